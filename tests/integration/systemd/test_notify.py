# SPDX-License-Identifier: LGPL-2.1-or-later
"""systemd-notify: the daemon speaks sd_notify to a NOTIFY_SOCKET of the
test's own, as systemd would see it under Type=notify.

- A state dir of 1,000 records (recovery slowed by NODEFS_TEST_SLOW_RECOVERY
  so it is seen): STATUS=recovering N of 1000 records and
  EXTEND_TIMEOUT_USEC while status says RECOVERING; READY=1 only once
  status says READY, with STATUS=ready with N volumes and M containers;
  WATCHDOG=1 every half of WATCHDOG_USEC; STOPPING=1 at SIGTERM, and
  nothing but WATCHDOG=1 after it.
- WATCHDOG_PID naming another process: READY=1 but no WATCHDOG=1.
- SIGHUP reloads: RELOADING=1 then READY=1; a new log_level and profiles
  apply at once, other changes are logged as needing a restart, a file
  that does not parse changes nothing. Plugins: added, changed (endpoint;
  a started one's command: its process ended, a new one started), removed;
  one that holds a volume is kept with an error line and goes at a later
  reload once the volume is destroyed.
- Under the journal ($JOURNAL_STREAM names stderr) log lines carry syslog
  priorities (<6> info, <4> warning).
- A FUSE loop made to hang (NODEFS_TEST_HANG_FUSE_AFTER_MS), on an abstract
  socket (@name): WATCHDOG=1 stops, so systemd would kill and restart it;
  SIGTERM still unmounts.

Root, FUSE and a test build (-Dtest_hooks=true); exit 77 otherwise.
"""

import json
import os
import re
import signal
import socket
import statistics
import subprocess
import threading
import time
import unittest

import nodefs_test as nt


class Listener:
    """A notify socket (a path, or @abstract) and a thread that keeps every
    datagram with its arrival time (monotonic) in .msgs."""

    def __init__(self, tmp, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "nodefs-test-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            path = os.path.join(tmp, "notify.sock")
            self.sock.bind(path)
            self.env = path
        self.sock.settimeout(0.1)
        self.msgs = []
        self.lock = threading.Lock()
        self.on_ready = None
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            t = time.monotonic()
            text = data.decode()
            extra = self.on_ready() if self.on_ready and "READY=1" in text \
                else None
            with self.lock:
                self.msgs.append((t, text, extra))

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()

    def lines(self):
        with self.lock:
            return list(self.msgs)

    def times_of(self, line):
        return [t for t, m, _ in self.lines() if line in m.split("\n")]

    def wait_for(self, line, timeout):
        return nt.wait_until(lambda: self.times_of(line), timeout)


def write_records(state_dir, n):
    """n ended operation records, as a daemon leaves them."""
    d = os.path.join(state_dir, "operations")
    os.makedirs(d)
    now = int(time.time())
    for i in range(1, n + 1):
        rec = {"version": 1, "type": "volume.create", "object": "v%d" % i,
               "command": "create v%d" % i, "state": "FINISHED",
               "attempts": 1, "created_unix": now, "finished_unix": now}
        with open(os.path.join(d, "%d.json" % i), "w") as f:
            json.dump(rec, f)


class Notify(unittest.TestCase):

    def start(self, tmp, listener, env, state_dir=None):
        env = dict(env, NOTIFY_SOCKET=listener.env)
        fs = nt.Nodefs("[nodefs]\noperations_keep = 2000\n", env=env,
                       state_dir=state_dir, ready=False, start_timeout=60)
        return fs

    def test_start_ready_watchdog_stop(self):
        tmp = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        work = os.path.join(tmp, "nodefs-notify-%d" % os.getpid())
        os.makedirs(work)
        lst = Listener(work)
        try:
            state = os.path.join(work, "state")
            write_records(state, 1000)
            fs = self.start(work, lst, {"WATCHDOG_USEC": "2000000",
                                        "NODEFS_TEST_SLOW_RECOVERY": "1500"},
                            state_dir=state)
            reads = []      # (time the read began, state it said)

            def status_now():
                return fs.status().get("state")

            lst.on_ready = status_now
            with fs:
                while True:
                    t = time.monotonic()
                    st = status_now()
                    reads.append((t, st))
                    if st == "READY":
                        break
                    self.assertLess(t, reads[0][0] + 60, "never READY")
                    time.sleep(0.05)
                self.assertTrue(lst.wait_for("READY=1", 10), lst.lines())
                t_ready = lst.times_of("READY=1")[0]
                # a watchdog window of ~5 periods after READY
                time.sleep(5.2)
                t_term = time.monotonic()
                problems = fs.stop()
                self.assertEqual(problems, [], fs.log())
            msgs = lst.lines()
            text = [m for _, m, _ in msgs]

            # STATUS while recovering, with the record count, and the
            # start timeout extended meanwhile
            rec = [m for m in text if m.startswith("STATUS=recovering ")]
            self.assertTrue(rec, text)
            self.assertTrue(all(m.endswith(" of 1000 records") for m in rec),
                            rec)
            self.assertIn("RECOVERING", [s for _, s in reads])
            ext = [t for t, m, _ in msgs if m.startswith("EXTEND_TIMEOUT_USEC=")]
            self.assertTrue(ext and ext[0] < t_ready, text)

            # READY=1 exactly once, when status already said READY, and
            # never before a read that still said RECOVERING began
            ready = [(t, m, x) for t, m, x in msgs if "READY=1" in m.split("\n")]
            self.assertEqual(len(ready), 1, text)
            self.assertEqual(ready[0][2], "READY", "status said %r when READY=1 "
                             "came" % ready[0][2])
            self.assertIn("STATUS=ready with 0 volumes and 0 containers",
                          ready[0][1].split("\n"))
            for t, st in reads:
                if st == "RECOVERING":
                    self.assertLess(t, t_ready)
            idx_ready = text.index(ready[0][1])
            self.assertFalse([m for m in text[idx_ready:]
                              if m.startswith("STATUS=recovering")], text)

            # WATCHDOG=1 every half of WATCHDOG_USEC (1 s)
            pings = [t for t in lst.times_of("WATCHDOG=1")
                     if t_ready <= t <= t_term]
            self.assertGreaterEqual(len(pings), 4, text)
            gaps = [b - a for a, b in zip(pings, pings[1:])]
            self.assertTrue(0.8 <= statistics.median(gaps) <= 1.2, gaps)
            self.assertLess(max(gaps), 2.0, gaps)

            # STOPPING=1 at SIGTERM, then no STATUS or READY
            stop = [(t, m) for t, m, _ in msgs if "STOPPING=1" in m.split("\n")]
            self.assertEqual(len(stop), 1, text)
            self.assertGreaterEqual(stop[0][0], t_term)
            self.assertLess(stop[0][0], t_term + 5)
            self.assertIn("STATUS=stopping", stop[0][1].split("\n"))
            after = text[text.index(stop[0][1]) + 1:]
            self.assertEqual([m for m in after if m != "WATCHDOG=1"], [], after)
        finally:
            lst.close()
            subprocess.run(["rm", "-rf", "--one-file-system", work])

    def test_watchdog_pid_of_another(self):
        tmp = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        work = os.path.join(tmp, "nodefs-notify-pid-%d" % os.getpid())
        os.makedirs(work)
        lst = Listener(work)
        try:
            fs = self.start(work, lst, {"WATCHDOG_USEC": "200000",
                                        "WATCHDOG_PID": "1"})
            with fs:
                self.assertTrue(lst.wait_for("READY=1", 20), lst.lines())
                time.sleep(0.6)
            self.assertEqual(lst.times_of("WATCHDOG=1"), [], lst.lines())
        finally:
            lst.close()
            subprocess.run(["rm", "-rf", "--one-file-system", work])

    def test_hung_fuse_loop_stops_the_watchdog(self):
        tmp = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        work = os.path.join(tmp, "nodefs-notify-hang-%d" % os.getpid())
        os.makedirs(work)
        lst = Listener(work, abstract=True)
        # READY=1 (recovery, a served statfs) must come before the hang
        hang_ms = int(nt.scaled(3.0) * 1000)
        try:
            t0 = time.monotonic()
            fs = self.start(work, lst, {"WATCHDOG_USEC": "500000",
                                        "NODEFS_TEST_HANG_FUSE_AFTER_MS":
                                        str(hang_ms)})
            with fs:
                self.assertTrue(lst.wait_for("READY=1", 20), lst.lines())
                # the mount is not read from now on: it is about to hang
                time.sleep(max(0, t0 + hang_ms / 1000 - time.monotonic()))
                time.sleep(4.0)
                t_end = time.monotonic()
                problems = fs.stop()
                self.assertEqual(problems, [], fs.log())
            pings = lst.times_of("WATCHDOG=1")
            before = [t for t in pings if t < t0 + hang_ms / 1000]
            self.assertGreaterEqual(len(before), 2, lst.lines())
            # the hang starts hang_ms after the loop does (a moment after
            # t0): none in the last 2.5 s
            late = [t for t in pings if t_end - 2.5 < t < t_end]
            self.assertEqual(late, [], lst.lines())
        finally:
            lst.close()
            subprocess.run(["rm", "-rf", "--one-file-system", work])


class JournalNodefs(nt.Nodefs):
    """A daemon whose stderr is 'the journal': JOURNAL_STREAM names the
    log file's device and inode, as systemd names its stream socket."""

    def start(self):
        open(self.log_path, "ab").close()
        st = os.stat(self.log_path)
        self.env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
        super().start()


CONF = """[nodefs]
log_level = info

[plugin px]
endpoint = unix:///nonexistent/px.sock
default = yes

[profile fast]
plugin = px
fs_type = ext4
"""


class Reload(unittest.TestCase):

    def test_reload_and_journal_priorities(self):
        tmp = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        work = os.path.join(tmp, "nodefs-reload-%d" % os.getpid())
        os.makedirs(work)
        lst = Listener(work)
        try:
            # the plugin is never there: its refresh holds a worker until
            # its deadline, which a stop need not wait for here
            fs = JournalNodefs(CONF, env={"NOTIFY_SOCKET": lst.env,
                                          "NODEFS_TEST_STOP_GRACE_MS": "500"})
            with fs:
                self.assertTrue(lst.wait_for("READY=1", 20), lst.lines())
                self.assertEqual(fs.listdir("profiles"), ["fast"])
                with open(fs.config_path, "w") as f:
                    f.write(CONF.replace("log_level = info", "log_level = debug\n"
                                         "csi_timeout = 30s")
                            .replace("fs_type = ext4", "fs_type = xfs") +
                            "\n[profile slow]\nplugin = px\n")
                fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: "and 2 profile changes applied" in fs.log(), 10),
                    fs.log())
                # the new directory reaches the kernel's cached listing
                # through the notifier, after the log line
                nt.wait_until(lambda: fs.listdir("profiles") == ["fast", "slow"], 5)
                self.assertEqual(fs.listdir("profiles"), ["fast", "slow"])
                self.assertEqual(fs.read("profiles", "fast", "fs_type"), "xfs\n")
                # a file that does not parse changes nothing
                with open(fs.config_path, "w") as f:
                    f.write("[nodefs]\nbogus = 1\n")
                fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: "nothing changed" in fs.log(), 10), fs.log())
                self.assertEqual(fs.listdir("profiles"), ["fast", "slow"])
                self.assertEqual(fs.status()["state"], "READY")
                self.assertEqual(fs.stop(), [], fs.log())
                log = fs.log()
            self.assertIn("<6>info: reload: log_level info -> debug", log)
            self.assertIn("<6>info: reload: profile fast: changed", log)
            self.assertIn("<6>info: reload: profile slow: added", log)
            self.assertIn("<4>warning: reload: [nodefs] csi_timeout changed: needs a "
                          "restart", log)
            self.assertIn("<3>error: reload: ", log)
            self.assertNotIn("nodefs: info:", log)
            text = [m for _, m, _ in lst.lines()]
            i = [k for k, m in enumerate(text) if m.startswith("RELOADING=1")]
            self.assertEqual(len(i), 2, text)
            self.assertIn("MONOTONIC_USEC=", text[i[0]])
            self.assertIn("READY=1", text[i[0] + 1:])
        finally:
            lst.close()
            subprocess.run(["rm", "-rf", "--one-file-system", work])

    def test_reload_plugins(self):
        """Plugins added, changed and removed by a reload; one that holds a
        volume is kept, with a log line, and goes at a later reload."""
        local = os.path.join(nt.NODEFS_BUILD, "csi-local", "nodefs-csi-local")
        if not os.access(local, os.X_OK):
            nt.skip("nodefs-csi-local is not built")
        tmp = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        work = os.path.join(tmp, "nodefs-reload-pl-%d" % os.getpid())
        os.makedirs(work)
        loc = ("[plugin loc]\nendpoint = unix://%s/loc.sock\ncommand = %s --base-dir %s/base\n"
               % (work, local, work))
        conf = ("[nodefs]\nlog_level = info\nretry_backoff = 50ms\nretry_max = 400ms\n\n"
                "[plugin px]\nendpoint = unix://%s/px.sock\ndefault = yes\n\n" % work)
        try:
            fs = JournalNodefs(conf + loc, env={"NODEFS_TEST_STOP_GRACE_MS": "500"})
            with fs:
                self.assertTrue(nt.wait_until(
                    lambda: fs.read("plugins", "loc", "health").startswith("READY"), 20),
                    fs.read("plugins", "loc", "health"))
                ok, e = fs.write_ctl("volumes/ctl", "create v1 plugin=loc size=1M")
                self.assertTrue(ok, fs.error("volumes"))
                pid = nt.parse_kv(fs.read("plugins", "loc", "process"))["pid"]
                # loc gone (it holds v1: kept), px moved, py2 new
                with open(fs.config_path, "w") as f:
                    f.write(conf.replace("px.sock", "px2.sock") +
                            "[plugin py2]\nendpoint = unix://%s/py2.sock\n" % work)
                fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: "2 plugin changes and 0 profile changes applied, 1 refused"
                    in fs.log(), 10), fs.log())
                self.assertEqual(sorted(fs.listdir("plugins")),
                                 ["ctl", "error", "loc", "px", "py2"])
                self.assertEqual(fs.read("plugins", "px", "endpoint").strip(),
                                 "unix://%s/px2.sock" % work)
                self.assertIn("reload: plugin loc: removed from the config: not removed, "
                              "holds volume 'v1'", fs.log())
                self.assertEqual(nt.parse_kv(fs.read("plugins", "loc", "process"))["pid"], pid)
                # v1 gone: the next reload removes loc, and ends its process
                ok, e = fs.write_ctl("volumes/v1/ctl", "destroy")
                self.assertTrue(ok, fs.error("volumes"))
                fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: re.search(r"reload: plugin loc: removed$", fs.log(), re.M), 10),
                    fs.log())
                self.assertNotIn("loc", fs.listdir("plugins"))
                self.assertTrue(nt.wait_until(
                    lambda: not os.path.exists("/proc/%s" % pid), 10))
                # loc back, with a changed command line: started anew
                with open(fs.config_path, "w") as f:
                    f.write(conf + loc.replace("/base", "/base2"))
                fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: "loc" in fs.listdir("plugins") and
                    fs.read("plugins", "loc", "health").startswith("READY"), 20), fs.log())
                self.assertNotIn("py2", fs.listdir("plugins"))
                self.assertEqual(fs.stop(), [], fs.log())
        finally:
            subprocess.run(["rm", "-rf", "--one-file-system", work])


if __name__ == "__main__":
    nt.main("mount", "hooks")

#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A kill -9 leaves nothing stuck (issue: the reaper's delete blocked a
dying nodefs for ever).

The kernel's notify_delete takes the i_rwsem of the file it deletes; a
writer of that ctl file holds it until nodefs answers. Were the reaper to
wait for it in the kernel when nodefs is killed, the thread would sleep
uninterruptibly for ever with /dev/fuse open: the process never dies, the
mount hangs, STATE_DIR/lock stays held, and every restart fails.

ReaperKill: a test build's hook (NODEFS_TEST_REAP_HOLD_MS) holds a
destroy's answer while the reaper goes to delete the destroyed volume's
names; nodefs is then SIGKILLed. The process must be gone within a second
(or be ended by the next start, which aborts the connection it left), the
restart must reach READY on the same state dir, and the writer must get
its errno (ECONNABORTED or ENOTCONN). With the old reaper the process
stays (its reaper thread in D state), and the restart fails with "state
dir ... is in use".

StuckEnded: the same with NODEFS_TEST_REAP_UNSAFE, which makes the
reaper delete without waiting, as it once did: the killed nodefs stays,
stuck. `nodefs --abort-stale STATE_DIR` (and, the second time, the next
start itself) must abort its connection, log a warning naming it, and the
process must end, the writer get its errno, the restart reach READY.
`--abort-stale` on a live nodefs's state dir, or on a dir with no record,
does nothing, quietly, and exits 0.

KillLoop: 50 kill -9s timed around destroys under load (volume creates
and destroys, Docker and LXC containers, readers walking the tree). After
each, nodefs restarts on the same state dir and must answer READY within
5 s (scaled). Afterwards no process of an earlier nodefs remains and no
FUSE connection is left in /sys/fs/fuse/connections. Prints the kills,
the restart times (median, max) and how many kills left a process that a
start had to end (stuck).

ProbeKill: the watchdog's liveness probe (daemon_alive) asks a statfs of
the mount. A test build's hook (NODEFS_TEST_STATFS_HOLD_MS) holds every
statfs answer; nodefs runs with NOTIFY_SOCKET and WATCHDOG_USEC, and once
the hook logs that it holds the probe's statfs (read, not answered) nodefs
is SIGKILLed. The process must be gone within a second (scaled) and, once
its stale mount is detached, no FUSE connection of it may be left. When
the probe's statfs was made by a thread of nodefs (nodefs-sd), that thread
waited uninterruptibly for the answer, kept /dev/fuse open, and the
process never died; the test then aborts the connection itself.
"""
import errno
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "volumes"))
sys.path.insert(0, os.path.join(HERE, "..", "containers"))

import nodefs_test as nt  # noqa: E402
import ctest  # noqa: E402
import voltest  # noqa: E402

CONNS = "/sys/fs/fuse/connections"
KILLS = int(os.environ.get("NODEFS_STUCK_KILLS", "50"))
SEED = int(os.environ.get("NODEFS_STUCK_SEED", str(int(time.time()))))
# a container command that ends at once on TERM (pid 1 has the handler)
CMD = "sh -c \"trap 'exit 0' TERM; while :; do sleep 0.2; done\""

WRITER = r'''
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    os.write(fd, (sys.argv[2] + "\n").encode())
    print("ok", flush=True)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)), flush=True)
'''


def mount_conn(mnt):
    """The FUSE connection number of the mount at mnt (the minor of its
    device), from mountinfo: no request to the daemon."""
    real = os.path.realpath(mnt)
    conn = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if nt._unescape_mount_field(fields[4]) == real:
                conn = fields[2].split(":")[1]
    return conn


def connections():
    try:
        return set(os.listdir(CONNS))
    except OSError:
        return set()


def mounted_conns():
    """The connection numbers of the FUSE mounts visible here."""
    out = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[2].startswith("0:"):
                out.add(fields[2].split(":")[1])
    return out


def leftover(conns):
    """Those of conns still in /sys/fs/fuse/connections with no mount of
    that number (a number a later mount took again is not left over),
    given a moment: the kernel tears a detached mount down once its last
    user has gone, a little after."""
    conns = set(conns)

    def left():
        return sorted(conns & (connections() - mounted_conns()))
    nt.wait_until(lambda: not left(), 5)
    return left()


def abort_conn(conn):
    with open(os.path.join(CONNS, conn, "abort"), "w") as f:
        f.write("1")


def threads(pid):
    """[(comm, state, wchan)] of pid's threads."""
    out = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            comm = open(base + "comm").read().strip()
            stat = open(base + "stat").read()
            wchan = open(base + "wchan").read().strip()
        except OSError:
            continue
        out.append((comm, stat[stat.rindex(")") + 2], wchan))
    return out


def log_since(fs, off):
    """The daemon's log from byte off on."""
    with open(fs.log_path, "rb") as f:
        f.seek(off)
        return f.read().decode(errors="replace")


def kill9(fs):
    """SIGKILL the daemon; seconds until the process is gone (waited for
    at most scaled(1)), or None when it is still there (stuck)."""
    proc = fs.proc
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    gone = nt.wait_until(lambda: proc.poll() is not None, 1, 0.005)
    if hasattr(fs, "_log") and not fs._log.closed:
        fs._log.close()
    fs.proc = None
    return (time.monotonic() - t0) if gone else None


class Guard:
    """If the killed daemon is still there after `after` seconds, abort
    its connection (so a stat of the mount, which would hang for ever on
    a stuck connection, returns) and remember that the test had to."""

    def __init__(self, proc, conn, after):
        self.fired = False
        self.proc, self.conn = proc, conn
        self.timer = threading.Timer(after, self.fire)
        self.timer.daemon = True
        self.timer.start()

    def fire(self):
        if self.proc.poll() is None and self.conn in connections():
            self.fired = True
            try:
                abort_conn(self.conn)
            except OSError:
                pass

    def cancel(self):
        self.timer.cancel()


def end_stuck(procs):
    """Cleanup for a daemon left stuck (the old reaper): abort its
    connection by hand so nothing outlives the test."""
    for proc, conn in procs:
        if proc.poll() is None and conn in connections():
            try:
                abort_conn(conn)
            except OSError:
                pass
        try:
            proc.wait(nt.scaled(10))
        except subprocess.TimeoutExpired:
            pass


class ReaperKillTest(unittest.TestCase):
    def setUp(self):
        nt.requires("mount", "hooks")

    def test_kill_while_a_destroy_writer_waits(self):
        with voltest.VolEnv() as env:
            ok, err = env.ctl("volumes/ctl", "create cv size=1M")
            self.assertTrue(ok, err)
            env.fs.env = {"NODEFS_TEST_REAP_HOLD_MS": "20000"}
            env.fs.restart()
            env.wait_plugin_ready()
            conn = mount_conn(env.fs.mnt)
            old = env.fs.proc
            writer = subprocess.Popen([sys.executable, "-c", WRITER,
                                       env.fs.path("volumes", "cv", "ctl"), "destroy"],
                                      stdout=subprocess.PIPE, text=True)
            try:
                held = nt.wait_until(lambda: "test hook: reaping" in env.fs.log(),
                                     nt.scaled(30))
                self.assertTrue(held, "the destroy never reached the reaper\n" + env.fs.log())
                time.sleep(0.3)    # the reaper goes to its deletes meanwhile
                before = threads(old.pid)
                took = kill9(env.fs)
                after = threads(old.pid)
                guard = Guard(old, conn, nt.scaled(10))
                env.fs.env = None
                t0 = time.monotonic()
                try:
                    env.fs.start()
                except nt.DaemonError as e:
                    self.fail("restart after the kill failed; the killed nodefs %s "
                              "(threads before the kill %s, after %s): %s"
                              % ("was gone" if took is not None else "was still there",
                                 before, after, e))
                finally:
                    guard.cancel()
                self.assertFalse(guard.fired, "the killed nodefs stayed, stuck (threads "
                                 "after the kill: %s): the test aborted its connection"
                                 % after)
                restarted = time.monotonic() - t0
                env.wait_plugin_ready()
                ended = nt.wait_until(lambda: old.poll() is not None, 5)
                self.assertTrue(ended, "the killed nodefs is still there after the "
                                "restart: %s" % threads(old.pid))
                out, _ = writer.communicate(timeout=nt.scaled(10))
                got = out.strip()
                self.assertIn(got, ("ECONNABORTED", "ENOTCONN"),
                              "the destroy's writer got %r" % got)
                self.assertEqual(leftover([conn]), [],
                                 "the killed nodefs's connection is left")
                print("reaper-kill: gone %s after the SIGKILL; restart READY in %.2f s; "
                      "writer %s; reaper before the kill: %s"
                      % ("%.3f s" % took if took is not None
                         else "only when the next start aborted its connection",
                         restarted, got, [t for t in before if t[0] == "nodefs-reap"]))
                if "aborted the connection" in env.fs.log():
                    print("reaper-kill: the start aborted connection %s" % conn)
            finally:
                end_stuck([(old, conn)])
                if writer.poll() is None:
                    writer.kill()
                    writer.wait()


class StuckEndedTest(unittest.TestCase):
    def setUp(self):
        nt.requires("mount", "hooks")

    def abort_stale(self, state_dir):
        return subprocess.run([nt.NODEFS_BIN, "--abort-stale", state_dir],
                              capture_output=True, text=True, timeout=nt.scaled(30))

    def test_abort_stale_and_start_end_a_stuck_nodefs(self):
        with voltest.VolEnv() as env:
            # nothing to end: quiet, 0, and the live daemon untouched
            for d in (env.state_dir, os.path.join(env.tmp, "no-such-dir")):
                p = self.abort_stale(d)
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""), d)
            self.assertIsNone(env.fs.proc.poll())
            for k, how in enumerate(("--abort-stale", "the next start")):
                name = "cv%d" % k
                ok, err = env.ctl("volumes/ctl", "create %s size=1M" % name)
                self.assertTrue(ok, err)
                env.fs.env = {"NODEFS_TEST_REAP_HOLD_MS": "20000",
                              "NODEFS_TEST_REAP_UNSAFE": "1"}
                env.fs.restart()
                env.wait_plugin_ready()
                conn = mount_conn(env.fs.mnt)
                old = env.fs.proc
                # the log is one file across restarts: wait for this round's line
                off = os.path.getsize(env.fs.log_path)
                writer = subprocess.Popen([sys.executable, "-c", WRITER,
                                           env.fs.path("volumes", name, "ctl"), "destroy"],
                                          stdout=subprocess.PIPE, text=True)
                try:
                    self.assertTrue(nt.wait_until(
                        lambda: "test hook: reaping" in log_since(env.fs, off),
                        nt.scaled(30)), env.fs.log())
                    time.sleep(0.3)
                    took = kill9(env.fs)
                    self.assertIsNone(took, "the unsafe reaper did not leave nodefs stuck "
                                      "(gone in %s s)" % took)
                    stuck = threads(old.pid)
                    env.fs.env = None
                    guard = Guard(old, conn, nt.scaled(15))
                    try:
                        if how == "--abort-stale":
                            p = self.abort_stale(env.state_dir)
                            self.assertEqual(p.returncode, 0, p.stderr)
                            said = p.stderr
                        env.fs.start()
                        if how != "--abort-stale":
                            said = log_since(env.fs, off)
                    finally:
                        guard.cancel()
                    self.assertFalse(guard.fired, "%s did not end the stuck nodefs (%s)"
                                     % (how, stuck))
                    self.assertIn("aborted the connection (/sys/fs/fuse/connections/%s/abort)"
                                  % conn, said)
                    self.assertIn("nodefs %d was killed" % old.pid, said)
                    self.assertTrue(nt.wait_until(lambda: old.poll() is not None,
                                                  nt.scaled(5)), threads(old.pid))
                    env.wait_plugin_ready()
                    out, _ = writer.communicate(timeout=nt.scaled(10))
                    self.assertIn(out.strip(), ("ECONNABORTED", "ENOTCONN"))
                    self.assertEqual(leftover([conn]), [])
                    print("stuck-ended by %s: threads of the killed nodefs %s; writer %s"
                          % (how, stuck, out.strip()))
                finally:
                    end_stuck([(old, conn)])
                    if writer.poll() is None:
                        writer.kill()
                        writer.wait()


class ProbeKillTest(unittest.TestCase):
    def setUp(self):
        nt.requires("mount", "hooks")

    def test_kill_while_the_watchdog_probe_waits(self):
        tmp = tempfile.mkdtemp(prefix="nodefs-probe-")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(os.path.join(tmp, "notify.sock"))
        env = {"NOTIFY_SOCKET": os.path.join(tmp, "notify.sock"),
               "WATCHDOG_USEC": "1000000", "NODEFS_TEST_STATFS_HOLD_MS": "60000"}
        old = conn = None
        try:
            with nt.Nodefs(env=env, ready=False) as fs:
                conn = mount_conn(fs.mnt)
                old = fs.proc
                held = nt.wait_until(lambda: "test hook: statfs answer held" in fs.log(),
                                     nt.scaled(20))
                self.assertTrue(held, "no statfs reached the mount\n" + fs.log())
                before = threads(old.pid)
                took = kill9(fs)
                after = threads(old.pid)
                if took is None:
                    # abort its connection before the cleanup touches the mount
                    end_stuck([(old, conn)])
                    self.fail("the killed nodefs stayed, stuck (threads before the kill "
                              "%s, after %s): the test aborted its connection"
                              % (before, after))
                # the stale mount keeps its connection's number until detached
                subprocess.run(["umount", "-l", fs.mnt], capture_output=True)
                self.assertEqual(leftover([conn]), [], "the killed nodefs's connection is left")
                print("probe-kill: gone %.3f s after the SIGKILL" % took)
        finally:
            if old is not None:
                end_stuck([(old, conn)])
            sock.close()
            subprocess.run(["rm", "-rf", "--one-file-system", tmp])


class Load:
    """Readers walking the tree and writers creating and destroying
    volumes, for the length of one iteration."""

    def __init__(self, fs, rnd, tag):
        self.fs = fs
        self.rnd = rnd
        self.tag = tag
        self.stop = threading.Event()
        self.threads = []

    def reader(self):
        while not self.stop.is_set():
            for d in ("volumes", "containers", "operations"):
                try:
                    for n in os.listdir(self.fs.path(d)):
                        p = self.fs.path(d, n, "state")
                        if os.path.exists(p):
                            with open(p) as f:
                                f.read()
                except OSError:
                    pass

    def writer(self, k):
        i = 0
        while not self.stop.is_set():
            name = "%s-w%d-%d" % (self.tag, k, i)
            i += 1
            for rel, line in (("volumes/ctl", "create %s size=1M" % name),
                              ("volumes/%s/ctl" % name, "destroy")):
                try:
                    nt.write_line(self.fs.path(rel), line)
                except OSError:
                    pass

    def start(self):
        for fn, args in ((self.reader, ()), (self.reader, ()), (self.writer, (0,))):
            t = threading.Thread(target=fn, args=args, daemon=True)
            t.start()
            self.threads.append(t)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(nt.scaled(10))


class KillLoopTest(unittest.TestCase):
    def setUp(self):
        nt.requires("mount", "hooks", "docker", "lxc", "csi-plugin")

    def clear(self, env):
        """Destroy what earlier iterations left (recovery finished or
        dropped their commands), all at once."""
        ws = [threading.Thread(target=nt.write_line, args=(env.fs.path(d, n, "ctl"), "destroy"))
              for d in ("volumes", "containers") for n in env.fs.listdir(d)
              if n not in ("ctl", "error")]
        for w in ws:
            w.start()
        for w in ws:
            w.join()

    def test_kill_loop(self):
        rnd = random.Random(SEED)
        olds = []
        restarts = []
        stuck = 0
        cut = done = 0     # destroys the kill cut short (their writer's errno), or done
        gone_times = []
        with ctest.Env(csi=True, stop_timeout="1s") as env:
            try:
                for i in range(KILLS):
                    self.clear(env)
                    tag = "k%d" % i
                    objs = []
                    for j in range(2):
                        n = "%s-v%d" % (tag, j)
                        env.must("volumes/ctl", "create %s size=1M" % n)
                        objs.append("volumes/%s/ctl" % n)
                    if i % 10 == 1:
                        n = "%s-d" % tag
                        env.run(n, "runtime=docker image=%s cmd=%s memory=32M"
                                % (ctest.IMAGE, ctest._shq(CMD)))
                        objs.append("containers/%s/ctl" % n)
                    if i % 25 == 3:
                        n = "%s-l" % tag
                        env.run(n, "runtime=lxc template=busybox cmd=%s memory=64M"
                                % ctest._shq(CMD))
                        objs.append("containers/%s/ctl" % n)
                    load = Load(env.fs, rnd, tag)
                    load.start()
                    results = []
                    writers = [threading.Thread(
                        target=lambda p: results.append(nt.write_line(p, "destroy")),
                        args=(env.fs.path(o),), daemon=True) for o in objs]
                    for w in writers:
                        w.start()
                    # kill around the destroys: before, during or after them
                    time.sleep(rnd.uniform(0.0, 0.15))
                    conn = mount_conn(env.fs.mnt)
                    old = env.fs.proc
                    olds.append((old, conn))
                    t0 = time.monotonic()
                    took = kill9(env.fs)
                    if took is None:
                        stuck += 1
                    else:
                        gone_times.append(took)
                    guard = Guard(old, conn, nt.scaled(10))
                    try:
                        env.fs.start()
                    except nt.DaemonError as e:
                        self.fail("kill %d: the restart failed (the killed nodefs %s): %s"
                                  % (i + 1, "was gone" if took is not None
                                     else "was still there: %s" % threads(old.pid), e))
                    finally:
                        guard.cancel()
                    self.assertFalse(guard.fired, "kill %d: the killed nodefs stayed, "
                                     "stuck: the test aborted its connection" % (i + 1))
                    took_restart = time.monotonic() - t0
                    restarts.append(took_restart)
                    print("kill %d: READY %.2f s after the kill" % (i + 1, took_restart),
                          file=sys.stderr)
                    load.end()
                    for w in writers:
                        w.join(nt.scaled(10))
                    self.assertEqual(len(results), len(writers),
                                     "kill %d: a destroy's writer is still blocked" % (i + 1))
                    cut += sum(1 for ok, e in results
                               if not ok and e in (errno.ECONNABORTED, errno.ENOTCONN))
                    done += sum(1 for ok, _ in results if ok)
                    self.assertTrue(nt.wait_until(lambda: old.poll() is not None,
                                                  nt.scaled(5)),
                                    "kill %d: the killed nodefs is still there after the "
                                    "restart: %s" % (i + 1, threads(old.pid)))
                    self.assertLess(took_restart, nt.scaled(5),
                                    "kill %d: READY %.2f s after the kill"
                                    % (i + 1, took_restart))
                # what the last iterations left, then the daemon stops
                self.clear(env)
            finally:
                end_stuck(olds)
        left = [p.pid for p, _ in olds if p.poll() is None]
        conns_left = leftover(c for _, c in olds)
        print("kill-loop: seed %d; %d kills; restart to READY median %.2f s, max %.2f s; "
              "killed process gone in median %.3f s, max %.3f s; stuck %d "
              "(ended by the next start); destroys cut by a kill %d, done before it %d"
              % (SEED, len(restarts), statistics.median(restarts), max(restarts),
                 statistics.median(gone_times) if gone_times else 0,
                 max(gone_times) if gone_times else 0, stuck, cut, done))
        self.assertEqual(len(restarts), KILLS)
        self.assertEqual(left, [], "processes of earlier nodefs remain")
        self.assertEqual(conns_left, [], "FUSE connections left")


if __name__ == "__main__":
    nt.main()

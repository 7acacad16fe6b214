# SPDX-License-Identifier: LGPL-2.1-or-later
"""Ending a mount: SIGTERM and SIGINT unmount cleanly and exit 0;
`fusermount3 -u` makes the daemon exit 0; a reader blocked on events does
not hold shutdown up; without -f the daemon returns once mounted and is
stopped by SIGTERM. After each, no /proc/mounts entry and no process remain.

With ctl writes waiting on their actions (test builds slow every action
down, NODEFS_TEST_SLOW_ACTION): the running action finishes and answers its
writer, the queued ones are not run (ESHUTDOWN, their operations stay
PENDING and are driven to an end at the next start); an action still
running after the grace (NODEFS_TEST_STOP_GRACE_MS) does not hold the mount,
and its late completion touches nothing freed (the sanitizer build checks).
SIGTERM while the daemon recovers (NODEFS_TEST_SLOW_RECOVERY) unmounts.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import nodefs_test as nt


# A default plugin whose socket is absent: a volume create is queued and
# fails fast (UNAVAILABLE, no retries to speak of) once its worker gets to
# it.
PLUGIN_DOWN = nt.offline_config().replace("[nodefs]\n", """[nodefs]
csi_timeout = 1s
retry_backoff = 10ms
retry_max = 20ms
""") + """
[plugin p0]
endpoint = unix:///nonexistent/nodefs-test/p0.sock
default = yes
"""


class Caller(threading.Thread):
    """One blocking call on its own thread: .result is (ok, errno)."""

    def __init__(self, what, fn):
        super().__init__(daemon=True)
        self.what, self.fn = what, fn
        self.result = None

    def run(self):
        self.result = self.fn()


def Writer(path, line):
    """A ctl write of line to path on its own thread."""
    return Caller(line, lambda: nt.write_line(path, line))


def Rmdir(path):
    def call():
        try:
            os.rmdir(path)
            return (True, 0)
        except OSError as e:
            return (False, e.errno)
    return Caller("rmdir " + path, call)


def op_records(state_dir):
    """{id: record} of the operation checkpoints on disk."""
    d = os.path.join(state_dir, "operations")
    out = {}
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name.endswith(".json") and not name.startswith("."):
            with open(os.path.join(d, name)) as f:
                out[name[:-5]] = json.load(f)
    return out


class UnmountTest(unittest.TestCase):
    def check_gone(self, fs):
        self.assertFalse(nt.is_mounted(fs.mnt), "still in /proc/mounts")
        # The mountpoint is a plain empty directory again.
        self.assertEqual(os.listdir(fs.mnt), [])
        self.assertEqual(nt.find_pids_with_arg(fs.mnt), [])

    def stop_with(self, sig):
        with nt.Nodefs(nt.offline_config()) as fs:
            self.assertEqual(fs.status().get("state"), "READY")
            problems = fs.stop(sig)
            self.assertEqual(problems, [], fs.log())
            self.assertEqual(fs.returncode, 0)
            self.check_gone(fs)

    def test_sigterm(self):
        self.stop_with(signal.SIGTERM)

    def test_sigint(self):
        self.stop_with(signal.SIGINT)

    def test_fusermount_u(self):
        with nt.Nodefs(nt.offline_config()) as fs:
            fs.read("status")
            p = subprocess.run(["fusermount3", "-u", fs.mnt],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            try:
                rc = fs.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.fail("nodefs still running 15s after fusermount3 -u")
            self.assertEqual(rc, 0, fs.log())
            fs.proc = None
            self.check_gone(fs)

    def test_sigterm_with_files_open_and_reader_blocked(self):
        with nt.Nodefs(nt.offline_config()) as fs:
            held = [open(fs.path("status"), "rb"),
                    open(fs.path("volumes", "ctl"), "wb", buffering=0)]
            outcome = []

            def blocked_reader():
                try:
                    with open(fs.path("events"), "rb", buffering=0) as f:
                        outcome.append(("data", f.read(4096)))
                except OSError as e:
                    outcome.append(("errno", e.errno))

            t = threading.Thread(target=blocked_reader, daemon=True)
            t.start()
            # a negative (nothing returned yet) has no event to wait on: 0.5 s is ample for a read that does not block to return
            time.sleep(0.5)
            self.assertTrue(t.is_alive(), "events read did not block: %r"
                            % outcome)
            t0 = time.monotonic()
            # An open file keeps a plain umount busy; the daemon's own
            # unmount on SIGTERM must still complete.
            problems = fs.stop(signal.SIGTERM)
            took = time.monotonic() - t0
            for f in held:
                try:
                    f.close()
                except OSError:
                    pass
            t.join(10)
            self.assertFalse(t.is_alive(), "events reader still blocked")
            self.assertEqual(problems, [], fs.log())
            self.assertFalse(nt.is_mounted(fs.mnt))
            self.assertLess(took, nt.scaled(10.0))

    def test_sigterm_while_serving(self):
        """A stop signal that lands while the loop answers requests (a
        reader loops on status, another lists the root) unmounts and exits
        0 every time, wherever the signal finds the main thread. Each stop
        is bounded; eight mounts, the signal at a different moment each."""
        for i in range(8):
            with nt.Nodefs(nt.offline_config()) as fs:
                stop = threading.Event()

                def reader(fn):
                    while not stop.is_set():
                        try:
                            fn()
                        except OSError:
                            return

                ts = [threading.Thread(target=reader, daemon=True,
                                       args=(lambda: nt.read_file(fs.path("status")),)),
                      threading.Thread(target=reader, daemon=True,
                                       args=(lambda: os.listdir(fs.mnt),))]
                for t in ts:
                    t.start()
                time.sleep(0.02 * i)
                t0 = time.monotonic()
                problems = fs.stop(signal.SIGTERM)
                took = time.monotonic() - t0
                stop.set()
                for t in ts:
                    t.join(10)
                self.assertEqual(problems, [], fs.log())
                self.assertEqual(fs.returncode, 0)
                self.assertLess(took, nt.scaled(10.0))

    def test_daemonizes_once_mounted(self):
        tmp = tempfile.mkdtemp(prefix="nodefs-test-")
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        conf = os.path.join(tmp, "nodefs.conf")
        with open(conf, "w") as f:
            f.write(nt.offline_config())
        state = os.path.join(tmp, "state")
        try:
            p = subprocess.run([nt.NODEFS_BIN, "--config", conf,
                                "--state-dir", state, mnt],
                               capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 0, p.stderr)
            # Mounted by the time the parent returns: no waiting here.
            # Recovery runs while it serves: RECOVERING, then READY.
            self.assertTrue(nt.is_mounted(mnt))
            self.assertTrue(nt.wait_until(lambda: "state: READY" in nt.read_file(
                os.path.join(mnt, "status")), 10))
            pids = nt.find_pids_with_arg(mnt)

            def ppid(pid):
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        return int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    return 0
            # one daemon: a child it forks for a moment (the probe that
            # statfs()es the mount for READY and the watchdog) carries the
            # same argv until it exits
            pids = [p for p in pids if ppid(p) not in pids]
            self.assertEqual(len(pids), 1, pids)
            with open("/proc/%d/stat" % pids[0]) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Detached: not a child of ours, not in our session.
            self.assertNotEqual(int(fields[1]), os.getpid())
            self.assertNotEqual(os.getsid(pids[0]), os.getsid(0))
            os.kill(pids[0], signal.SIGTERM)
            gone = nt.wait_until(
                lambda: not nt.find_pids_with_arg(mnt), 15)
            self.assertTrue(gone, "daemon still running after SIGTERM")
            self.assertFalse(nt.is_mounted(mnt))
        finally:
            for pid in nt.find_pids_with_arg(mnt):
                os.kill(pid, signal.SIGKILL)
            if nt.is_mounted(mnt):
                subprocess.run(["fusermount3", "-u", "-z", mnt],
                               capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)

    def require_hooks(self):
        nt.requires("hooks")

    def wait_ops(self, fs, n):
        self.assertTrue(nt.wait_until(
            lambda: len(fs.listdir("operations")) >= n, 10),
            "operations: %r" % fs.listdir("operations"))

    def test_sigterm_does_not_wait_for_the_queue(self):
        """SIGTERM with a running action and two queued behind it on the
        same volume (a write of its ctl file and an rmdir; the kernel runs
        one write of a file at a time): the running one finishes and its
        writer gets its own answer; the queued ones never run, their callers
        get ESHUTDOWN and their operations stay PENDING; the stop takes one
        action's time, not three. Restarted, the daemon ends the PENDING
        operations."""
        self.require_hooks()
        slow = 1.5
        with nt.Nodefs(PLUGIN_DOWN, env={
                "NODEFS_TEST_SLOW_ACTION": str(int(slow * 1000))}) as fs:
            create = Writer(fs.path("volumes", "ctl"), "create v1")
            create.start()
            self.assertTrue(nt.wait_until(
                lambda: os.path.isdir(fs.path("volumes", "v1")), 5))
            self.wait_ops(fs, 1)
            queued = [Writer(fs.path("volumes", "v1", "ctl"), "publish /srv/v1"),
                      Rmdir(fs.path("volumes", "v1"))]
            for k, w in enumerate(queued):
                w.start()
                self.wait_ops(fs, 2 + k)
            t0 = time.monotonic()
            problems = fs.stop(signal.SIGTERM)
            took = time.monotonic() - t0
            for w in [create] + queued:
                w.join(10)
                self.assertFalse(w.is_alive(), "a writer is still blocked")
            self.assertEqual(problems, [], fs.log())
            self.check_gone(fs)
            # one action's time (and start-up noise), not three
            self.assertLess(took, slow + nt.scaled(1.5), fs.log())
            # the running create finished: its writer got the plugin's
            # answer, not the stop's
            self.assertEqual(create.result, (False, errno.EAGAIN), fs.log())
            for w in queued:
                self.assertEqual(w.result, (False, errno.ESHUTDOWN),
                                 (w.what, fs.log()))
            recs = op_records(fs.state_dir)
            states = sorted((r["command"], r["state"]) for r in recs.values())
            self.assertEqual(states, [("create v1", "FAILED"),
                                      ("publish /srv/v1", "PENDING"),
                                      ("rmdir", "PENDING")])

            # The next start drives them to an end (v1 was never made:
            # dropped, with the reason) and serves as usual.
            fs.env = None
            fs.start()
            self.assertTrue(nt.wait_until(
                lambda: all(fs.read("operations", i, "state").strip()
                            != "PENDING" for i in fs.listdir("operations")),
                10), fs.log())
            for i in fs.listdir("operations"):
                self.assertIn(fs.read("operations", i, "state").strip(),
                              ("FAILED", "DROPPED"), i)
            self.assertEqual(fs.listdir("volumes"), ["ctl", "error"])
            self.assertEqual(fs.status().get("operations"), "3")
            self.assertEqual(fs.stop(signal.SIGTERM), [], fs.log())

    def test_sigterm_action_outlasts_grace(self):
        """An action still running when the stop's grace ends does not hold
        the mount: its writer gets ESHUTDOWN and the mount goes at once; the
        daemon exits 0 once the action has ended, and its completion, which
        comes after the session is gone, touches nothing freed."""
        self.require_hooks()
        with nt.Nodefs(PLUGIN_DOWN, env={
                "NODEFS_TEST_SLOW_ACTION": "3000",
                "NODEFS_TEST_STOP_GRACE_MS": "200"}) as fs:
            w = Writer(fs.path("volumes", "ctl"), "create v1")
            w.start()
            self.wait_ops(fs, 1)
            t0 = time.monotonic()
            fs.proc.send_signal(signal.SIGTERM)
            w.join(10)
            self.assertEqual(w.result, (False, errno.ESHUTDOWN), fs.log())
            self.assertLess(time.monotonic() - t0, nt.scaled(2.0))
            self.assertTrue(nt.wait_until(
                lambda: not nt.is_mounted(fs.mnt), 2), "still mounted")
            try:
                fs.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.fail("nodefs still running 10s after SIGTERM")
            problems = fs.stop(signal.SIGTERM)
            self.assertEqual(problems, [], fs.log())
            self.check_gone(fs)

    def test_sigterm_during_recovery(self):
        """Recovery runs while the mount serves (test builds make it last
        a minute, NODEFS_TEST_SLOW_RECOVERY): SIGTERM then unmounts cleanly
        and at once, a ctl write waiting for recovery gets ESHUTDOWN, and
        the next start recovers the same state dir."""
        self.require_hooks()
        with nt.Nodefs(PLUGIN_DOWN, ready=False, env={
                "NODEFS_TEST_SLOW_RECOVERY": "60000"}) as fs:
            self.assertEqual(fs.status().get("state"), "RECOVERING")
            w = Writer(fs.path("plugins", "ctl"),
                       "add p1 unix:///nonexistent/p1.sock")
            w.start()
            # a negative (nothing returned yet) has no event to wait on: 0.3 s is ample for a write that does not wait to return
            time.sleep(0.3)
            self.assertTrue(w.is_alive(), "the write did not wait: %r"
                            % (w.result,))
            t0 = time.monotonic()
            problems = fs.stop(signal.SIGTERM)
            took = time.monotonic() - t0
            w.join(10)
            self.assertEqual(problems, [], fs.log())
            self.check_gone(fs)
            self.assertLess(took, nt.scaled(5.0))
            self.assertEqual(w.result, (False, errno.ESHUTDOWN), fs.log())

            fs.env = None
            fs.ready = True
            fs.start()
            st = fs.status()
            self.assertEqual(st.get("state"), "READY")
            self.assertEqual(st.get("plugins"), "1")
            self.assertEqual(fs.listdir("plugins"), ["ctl", "error", "p0"])

    def test_restart_on_same_state_dir(self):
        with nt.Nodefs(nt.offline_config()) as fs:
            fs.restart()
            self.assertEqual(fs.status().get("state"), "READY")
            self.assertEqual(fs.status().get("volumes"), "0")


if __name__ == "__main__":
    nt.main()

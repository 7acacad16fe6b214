# SPDX-License-Identifier: LGPL-2.1-or-later
"""Ending a mount: SIGTERM and SIGINT unmount cleanly and exit 0;
`fusermount3 -u` makes the daemon exit 0; a reader blocked on events does
not hold shutdown up; without -f the daemon returns once mounted and is
stopped by SIGTERM. After each, no /proc/mounts entry and no process remain.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import nodefs_test as nt


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
            self.assertLess(took, 10.0)

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
            self.assertTrue(nt.is_mounted(mnt))
            self.assertIn("state: READY", nt.read_file(
                os.path.join(mnt, "status")))
            pids = nt.find_pids_with_arg(mnt)
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

    def test_restart_on_same_state_dir(self):
        with nt.Nodefs(nt.offline_config()) as fs:
            fs.restart()
            self.assertEqual(fs.status().get("state"), "READY")
            self.assertEqual(fs.status().get("volumes"), "0")


if __name__ == "__main__":
    nt.main()

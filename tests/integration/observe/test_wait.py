# SPDX-License-Identifier: LGPL-2.1-or-later
"""containers/NAME/wait with dockerd: a read blocks until the container
reaches a terminal state, then gives one line `exit_code=N oom_killed=0|1`
and then end of file; several waiters at once all get it; a waiter on a
container already exited gets it at once; poll() says readable only once
the line is there; `cat wait` from a shell works.
"""

import os
import select
import subprocess
import threading
import time
import unittest

import nodefs_test as nt
import observe as ob


class WaitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = ob.World(docker=True)
        cls.w.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def wait_path(self, name):
        return self.w.fs.path("containers", name, "wait")

    def test_blocks_until_exit(self):
        self.w.container("wk")
        results = []

        def waiter():
            t0 = time.monotonic()
            with open(self.wait_path("wk"), "rb") as f:
                data = f.read()
            results.append((data, time.monotonic() - t0))
        ts = [threading.Thread(target=waiter) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        self.assertTrue(all(t.is_alive() for t in ts),
                        "wait returned while the container runs")
        self.w.ctl("containers/wk/ctl", "kill")
        for t in ts:
            t.join(20)
        self.assertFalse(any(t.is_alive() for t in ts), "a waiter hangs")
        for data, took in results:
            self.assertEqual(data, b"exit_code=137 oom_killed=0\n")
            self.assertGreater(took, 0.4)

    def test_exit_code_and_already_exited(self):
        self.w.container("wx", cmd="sh -c 'sleep 1; exit 7'")
        p = subprocess.run(["cat", self.wait_path("wx")], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout), (0,
                         "exit_code=7 oom_killed=0\n"), p.stderr)
        # exited already: at once
        t0 = time.monotonic()
        self.assertEqual(self.w.fs.read("containers", "wx", "wait"),
                         "exit_code=7 oom_killed=0\n")
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_poll_wait(self):
        self.w.container("wp", cmd="sleep 600")
        fd = os.open(self.wait_path("wp"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        p = select.poll()
        p.register(fd, select.POLLIN)
        self.assertEqual(p.poll(300), [], "readable before the exit")
        threading.Timer(0.2, lambda: self.w.ctl("containers/wp/ctl",
                                                "stop 1")).start()
        r = p.poll(20000)
        self.assertTrue(r and r[0][1] & select.POLLIN, r)
        self.assertEqual(os.read(fd, 4096), b"exit_code=137 oom_killed=0\n")
        self.assertEqual(os.read(fd, 4096), b"", "no EOF after the line")


if __name__ == "__main__":
    def requires():
        nt.require_all()
        ob.require_plugin()
        ob.require_docker()
    nt.main(requires)

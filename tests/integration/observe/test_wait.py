# SPDX-License-Identifier: LGPL-2.1-or-later
"""The wait files.

containers/NAME/wait with dockerd: a read blocks until the container
reaches a terminal state, then gives one line `exit_code=N oom_killed=0|1`
and then end of file; several waiters at once all get it; a waiter on a
container already exited gets it at once; poll() says readable only once
the line is there; `cat wait` from a shell works.

volumes/NAME/wait and operations/ID/wait with the CSI test plugin (its
NodePublishVolume made slow): a command written with O_NONBLOCK returns its
operation id at once; `cat operations/ID/wait` blocks until the operation
ends and gives `state=FINISHED` (FAILED with the reason in `error`);
`cat volumes/NAME/wait` blocks while a command on the volume is queued or
running and gives the state it settled in (a waiter whose volume is
destroyed meanwhile gets ENOENT: the file is gone); both answer at once
when nothing is in flight, and poll() on them works.
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
        # a negative (nothing returned yet) has no event to wait on: 0.5 s is ample for a wrongful return to show
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
        self.assertLess(time.monotonic() - t0, nt.scaled(1.0))

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


class VolumeWaitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = ob.World(plugin_args=["--delay", "NodePublishVolume=1.5"])
        cls.w.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def nonblock(self, rel, line):
        """Write line with O_NONBLOCK; the operation id it started."""
        fd = os.open(self.w.fs.path(*rel.split("/")), os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, (line + "\n").encode())
            return os.pread(fd, 100, 0).decode().strip()
        finally:
            os.close(fd)

    def cat(self, *parts, timeout=30):
        t0 = time.monotonic()
        p = subprocess.run(["cat", self.w.fs.path(*parts)], capture_output=True,
                           text=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout, time.monotonic() - t0

    def test_publish_then_wait(self):
        self.w.volume("vw")
        target = os.path.join(self.w.tmp, "pub-vw")
        t0 = time.monotonic()
        oid = self.nonblock("volumes/vw/ctl", "publish " + target)
        self.assertLess(time.monotonic() - t0, nt.scaled(1.0), "O_NONBLOCK write waited")
        self.assertRegex(oid, r"^\d+$")
        results = {}

        def waiter(key, *parts):
            results[key] = self.cat(*parts)
        ts = [threading.Thread(target=waiter, args=("op", "operations", oid, "wait")),
              threading.Thread(target=waiter, args=("vol", "volumes", "vw", "wait"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(results["op"][0], "state=FINISHED\n")
        self.assertEqual(results["vol"][0], "state=PUBLISHED\n")
        self.assertGreater(results["op"][1], 0.5, "the operation wait did not block")
        self.assertGreater(results["vol"][1], 0.5, "the volume wait did not block")
        self.assertEqual(self.w.state("volumes", "vw"), "PUBLISHED")
        # settled: both answer at once
        for parts in (("operations", oid, "wait"), ("volumes", "vw", "wait")):
            out, took = self.cat(*parts)
            self.assertIn(out, ("state=FINISHED\n", "state=PUBLISHED\n"))
            self.assertLess(took, nt.scaled(1.0))
        self.w.ctl("volumes/vw/ctl", "unpublish")

    def test_failed_operation(self):
        # the plugin knows no such volume: ValidateVolumeCapabilities fails
        oid = self.nonblock("volumes/ctl", "import vf no-such-volume-id")
        out, _ = self.cat("operations", oid, "wait")
        self.assertEqual(out, "state=FAILED\n")
        self.assertIn("no-such-volume-id", self.w.fs.read("operations", oid, "error"))
        self.assertFalse(os.path.exists(self.w.fs.path("volumes", "vf")))

    def test_destroyed_volume_gone(self):
        self.w.volume("vd", publish=True)
        fd = os.open(self.w.fs.path("volumes", "vd", "wait"), os.O_RDONLY)
        try:
            self.assertEqual(os.read(fd, 100), b"state=PUBLISHED\n")
        finally:
            os.close(fd)
        fd = os.open(self.w.fs.path("volumes", "vd", "wait"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        oid = self.nonblock("volumes/vd/ctl", "destroy")
        self.assertEqual(self.cat("operations", oid, "wait")[0], "state=FINISHED\n")
        self.w.volumes.remove("vd")
        # a descriptor opened before the destroy: the volume is gone
        with self.assertRaises(FileNotFoundError):
            os.read(fd, 100)

    def test_poll(self):
        self.w.volume("vp")
        target = os.path.join(self.w.tmp, "pub-vp")
        oid = self.nonblock("volumes/vp/ctl", "publish " + target)
        fd = os.open(self.w.fs.path("operations", oid, "wait"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        p = select.poll()
        p.register(fd, select.POLLIN)
        self.assertEqual(p.poll(300), [], "readable while the publish runs")
        r = p.poll(20000)
        self.assertTrue(r and r[0][1] & select.POLLIN, r)
        self.assertEqual(os.read(fd, 100), b"state=FINISHED\n")
        self.assertEqual(os.read(fd, 100), b"")
        self.w.ctl("volumes/vp/ctl", "unpublish")


if __name__ == "__main__":
    nt.main("mount", "csi-plugin", "docker")

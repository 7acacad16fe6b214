# SPDX-License-Identifier: LGPL-2.1-or-later
"""The request loop (fs/fs-loop.c): one thread answers requests back to back,
and a request that holds it does not hold up the others for long. A test
build (-Dtest_hooks=true) makes every render of the files named `version`
take 400 ms longer (NODEFS_TEST_SLOW_RENDER=version:400), as a render that
calls a hung plugin would: the first such read is caught by the watchdog
(the device passes to another thread after 10 ms), later ones are handed
over before they start; many run at once. A ctl write is answered by the
thread that reads it (the command goes to a worker) unless that file's
writes have been slow (NODEFS_TEST_SLOW_RENDER=ctl:400, as an operation
checkpoint on a slow disk would be): the same rules hold for it.
"""

import os
import subprocess
import threading
import time
import unittest

import nodefs_test as nt

SLOW_MS = 400


def hooks_built():
    out = subprocess.run([os.environ["NODEFS_BIN"], "--version"],
                         capture_output=True, text=True).stdout
    return "test hooks" in out


class LoopTest(unittest.TestCase):
    # a daemon per test: what one test's slow renders taught the loop
    # (hand those files over up front) must not hide another's case
    def setUp(self):
        self.fs = nt.Nodefs(nt.offline_config(),
                            env={"NODEFS_TEST_SLOW_RENDER":
                                 "version:%d" % SLOW_MS})
        self.fs.__enter__()
        self.addCleanup(self.fs.__exit__, None, None, None)

    def slow_read(self, out):
        t0 = time.monotonic()
        data = self.fs.read("runtimes", "lxc", "version")
        out.append((time.monotonic() - t0, data))

    def test_slow_render_does_not_hold_up_others(self):
        for attempt in range(3):
            done = []
            t = threading.Thread(target=self.slow_read, args=(done,))
            t.start()
            time.sleep(0.05)    # the slow read is in its render now
            worst = 0
            n = 0
            while t.is_alive() and n < 50:
                t0 = time.monotonic()
                self.assertIn("state:", self.fs.read("status"))
                worst = max(worst, time.monotonic() - t0)
                n += 1
            t.join()
            took, data = done[0]
            self.assertGreaterEqual(took, SLOW_MS / 1000.0 - 0.01)
            self.assertTrue(data.endswith("\n"), data)
            self.assertGreater(n, 0, "the slow read ended before the others")
            # the watchdog passes the device on after 10 ms; the rest is
            # this machine's scheduling
            self.assertLess(worst, SLOW_MS / 1000.0 / 2,
                            "attempt %d: a status read took %.0f ms while "
                            "a slow render ran" % (attempt, worst * 1e3))

    def test_two_reads_of_one_descriptor(self):
        """A read that meets another read of the same descriptor still
        rendering waits for it on a thread of its own."""
        fd = os.open(self.fs.path("runtimes", "lxc", "version"), os.O_RDONLY)
        try:
            got = []
            threads = [threading.Thread(
                target=lambda: got.append(os.pread(fd, 4096, 0)))
                for _ in range(2)]
            for t in threads:
                t.start()
            time.sleep(0.05)
            t0 = time.monotonic()
            self.assertIn("state:", self.fs.read("status"))
            took = time.monotonic() - t0
            for t in threads:
                t.join()
            self.assertEqual(len(got), 2)
            self.assertEqual(got[0], got[1])
            self.assertLess(took, SLOW_MS / 1000.0 / 2,
                            "a status read took %.0f ms behind two reads of "
                            "one descriptor" % (took * 1e3))
        finally:
            os.close(fd)

    def test_slow_renders_run_at_once(self):
        done = []
        threads = [threading.Thread(target=self.slow_read, args=(done,))
                   for _ in range(6)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        self.assertEqual(len(done), 6)
        self.assertLess(took, 6 * SLOW_MS / 1000.0 / 2,
                        "6 slow reads took %.2f s: not in parallel" % took)


class SlowWriteTest(unittest.TestCase):
    """Writes of a blank line to volumes/ctl (no command, no plugin
    needed), each made 400 ms slower by the hook."""
    def setUp(self):
        self.fs = nt.Nodefs(nt.offline_config(),
                            env={"NODEFS_TEST_SLOW_RENDER": "ctl:%d" % SLOW_MS})
        self.fs.__enter__()
        self.addCleanup(self.fs.__exit__, None, None, None)

    def slow_write(self, out, rel=("volumes", "ctl")):
        t0 = time.monotonic()
        fd = os.open(self.fs.path(*rel), os.O_WRONLY)
        try:
            n = os.write(fd, b"\n")
        finally:
            os.close(fd)
        out.append((time.monotonic() - t0, n))

    def test_slow_write_does_not_hold_up_others(self):
        for attempt in range(3):
            done = []
            t = threading.Thread(target=self.slow_write, args=(done,))
            t.start()
            time.sleep(0.05)
            worst, n = 0, 0
            while t.is_alive() and n < 50:
                t0 = time.monotonic()
                self.assertIn("state:", self.fs.read("status"))
                worst = max(worst, time.monotonic() - t0)
                n += 1
            t.join()
            took, written = done[0]
            self.assertEqual(written, 1)
            self.assertGreaterEqual(took, SLOW_MS / 1000.0 - 0.01)
            self.assertGreater(n, 0, "the slow write ended before the reads")
            self.assertLess(worst, SLOW_MS / 1000.0 / 2,
                            "attempt %d: a status read took %.0f ms while "
                            "a slow ctl write ran" % (attempt, worst * 1e3))

    def test_slow_writes_run_at_once(self):
        """Writes to different ctl files run at once (the kernel lets one
        write at a time into one file)."""
        ctls = []
        for d in sorted(os.listdir(self.fs.path())):
            if os.path.isdir(self.fs.path(d)) and "ctl" in os.listdir(self.fs.path(d)):
                ctls.append((d, "ctl"))
        self.assertGreaterEqual(len(ctls), 2, ctls)
        done = []
        threads = [threading.Thread(target=self.slow_write, args=(done, rel))
                   for rel in ctls]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        self.assertEqual(len(done), len(ctls))
        self.assertLess(took, len(ctls) * SLOW_MS / 1000.0 * 0.75,
                        "%d slow writes to %s took %.2f s: not in parallel"
                        % (len(ctls), ctls, took))


def requires():
    nt.require_all()
    if not hooks_built():
        nt.skip("nodefs built without -Dtest_hooks=true")


if __name__ == "__main__":
    nt.main(requires)

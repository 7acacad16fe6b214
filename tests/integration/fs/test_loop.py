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

import functools
import os
import threading
import time
import unittest

import nodefs_test as nt

# the slow requests and every bound below scale together
SLOW_MS = int(400 * nt.TIME_SCALE)




class SlowCase(unittest.TestCase):
    """A daemon per test whose requests on files named SLOW take SLOW_MS
    longer: what one test's slow requests taught the loop (hand those
    files over up front) must not hide another's case."""
    SLOW = None

    def setUp(self):
        self.fs = nt.Nodefs(nt.offline_config(),
                            env={"NODEFS_TEST_SLOW_RENDER":
                                 "%s:%d" % (self.SLOW, SLOW_MS)})
        self.fs.__enter__()
        self.addCleanup(self.fs.__exit__, None, None, None)

    def reads_while(self, slow, what):
        """Read status again and again while slow(out) runs in a thread;
        three times. Returns the out of each run."""
        outs = []
        for attempt in range(3):
            done = []
            t = threading.Thread(target=slow, args=(done,))
            t.start()
            time.sleep(0.05)    # the slow request is under way now
            worst, n = 0, 0
            while t.is_alive() and n < 50:
                t0 = time.monotonic()
                self.assertIn("state:", self.fs.read("status"))
                worst = max(worst, time.monotonic() - t0)
                n += 1
            t.join()
            took = done[0][0]
            self.assertGreaterEqual(took, SLOW_MS / 1000.0 - 0.01)
            self.assertGreater(n, 0, "the slow %s ended before the reads" % what)
            # the watchdog passes the device on after 10 ms; the rest is
            # this machine's scheduling
            self.assertLess(worst, SLOW_MS / 1000.0 / 2,
                            "attempt %d: a status read took %.0f ms while "
                            "a slow %s ran" % (attempt, worst * 1e3, what))
            outs.append(done[0])
        return outs

    def at_once(self, targets, what, share=0.5):
        """Run every target(out) in its own thread: together they must take
        less than share of their time one after another."""
        done = []
        threads = [threading.Thread(target=t, args=(done,)) for t in targets]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        self.assertEqual(len(done), len(targets))
        self.assertLess(took, len(targets) * SLOW_MS / 1000.0 * share,
                        "%d slow %s took %.2f s: not in parallel"
                        % (len(targets), what, took))


class LoopTest(SlowCase):
    SLOW = "version"

    def slow_read(self, out):
        t0 = time.monotonic()
        data = self.fs.read("runtimes", "lxc", "version")
        out.append((time.monotonic() - t0, data))

    def test_slow_render_does_not_hold_up_others(self):
        for took, data in self.reads_while(self.slow_read, "render"):
            self.assertTrue(data.endswith("\n"), data)

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
        self.at_once([self.slow_read] * 6, "reads")


class SlowWriteTest(SlowCase):
    """Writes of a blank line to a ctl file (no command, no plugin needed),
    each made 400 ms slower by the hook."""
    SLOW = "ctl"

    def slow_write(self, out, rel=("volumes", "ctl")):
        t0 = time.monotonic()
        fd = os.open(self.fs.path(*rel), os.O_WRONLY)
        try:
            n = os.write(fd, b"\n")
        finally:
            os.close(fd)
        out.append((time.monotonic() - t0, n))

    def test_slow_write_does_not_hold_up_others(self):
        for took, written in self.reads_while(self.slow_write, "ctl write"):
            self.assertEqual(written, 1)

    def test_slow_writes_run_at_once(self):
        """Writes to different ctl files run at once (the kernel lets one
        write at a time into one file)."""
        ctls = [(d, "ctl") for d in sorted(os.listdir(self.fs.path()))
                if os.path.isdir(self.fs.path(d))
                and "ctl" in os.listdir(self.fs.path(d))]
        self.assertGreaterEqual(len(ctls), 2, ctls)
        self.at_once([functools.partial(self.slow_write, rel=rel) for rel in ctls],
                     "ctl writes to %s" % ctls, share=0.75)


if __name__ == "__main__":
    nt.main("mount", "hooks")

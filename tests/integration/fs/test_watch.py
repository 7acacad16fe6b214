# SPDX-License-Identifier: LGPL-2.1-or-later
"""Watching without busy loops: `status` supports poll() with sysfs
semantics (POLLPRI once the value changed after this descriptor last read
it; read again from offset 0), and `events` gives one JSON object per line,
each open starting at "now", a read blocking until the next event. The
change used is adding and removing a plugin (its socket is absent, which
must not matter to either).
"""

import json
import os
import select
import time
import unittest

import nodefs_test as nt


class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = nt.Nodefs(nt.offline_config())
        cls.fs.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.fs.__exit__(None, None, None)

    def add_plugin(self, name):
        ok, err = self.fs.write_ctl(
            "plugins/ctl", "add %s unix:///nonexistent/nodefs-test/%s.sock"
            % (name, name))
        self.assertEqual((ok, nt.errname(err)), (True, "OK"),
                         self.fs.error("plugins"))
        self.addCleanup(self.fs.write_ctl, "plugins/ctl", "remove " + name)

    def test_status_poll_wakes_on_change(self):
        fd = os.open(self.fs.path("status"), os.O_RDONLY)
        try:
            first = os.read(fd, 65536).decode()
            self.assertIn("plugins: 0", first)
            p = select.poll()
            p.register(fd, select.POLLPRI | select.POLLERR)
            # Nothing changed since our read: no POLLPRI.
            ev = p.poll(300)
            self.assertFalse([e for _, e in ev if e & select.POLLPRI],
                             "POLLPRI without a change: %r" % ev)
            t0 = time.monotonic()
            self.add_plugin("pw1")
            ev = p.poll(5000)
            took = time.monotonic() - t0
            self.assertTrue([e for _, e in ev if e & select.POLLPRI],
                            "no POLLPRI within 5s of a change: %r" % ev)
            again = os.pread(fd, 65536, 0).decode()
            self.assertIn("plugins: 1", again)
            # Having read again, the descriptor is quiet until the next one.
            ev = p.poll(300)
            self.assertFalse([e for _, e in ev if e & select.POLLPRI], ev)
            print("status poll woke %.1f ms after the write" % (took * 1e3))
        finally:
            os.close(fd)

    def read_events(self, fd, want, timeout=5.0):
        """Read event lines from fd until one satisfies want(ev) or the
        timeout passes; returns (match, all events seen)."""
        seen, buf = [], b""
        deadline = time.monotonic() + nt.scaled(timeout)
        p = select.poll()
        p.register(fd, select.POLLIN)
        while time.monotonic() < deadline:
            if not p.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                break
            chunk = os.read(fd, 65536)
            self.assertTrue(chunk, "EOF on events")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = json.loads(line)
                seen.append(ev)
                if want(ev):
                    return ev, seen
        return None, seen

    def test_events_start_now_and_follow(self):
        self.add_plugin("pw2")      # before the open: must not be seen
        # the event is out before the open (a reader starts at its open)
        time.sleep(0.2)
        fd = os.open(self.fs.path("events"), os.O_RDONLY)
        try:
            self.add_plugin("pw3")
            ev, seen = self.read_events(
                fd, lambda e: e.get("kind") == "plugin"
                and e.get("name") == "pw3")
            self.assertIsNotNone(ev, "no event for plugin pw3; saw %r"
                                 % seen)
            for e in seen:
                self.assertIn("time", e)
                self.assertIn("seq", e)
                self.assertNotEqual(e.get("name"), "pw2",
                                    "an event from before the open: %r" % e)
            seqs = [e["seq"] for e in seen]
            self.assertEqual(seqs, sorted(seqs))
        finally:
            os.close(fd)

    def test_events_with_head(self):
        """A shell reader (head -n 1) gets the line too."""
        import subprocess
        proc = subprocess.Popen(["timeout", "10", "head", "-n", "1",
                                 self.fs.path("events")],
                                stdout=subprocess.PIPE, text=True)
        try:
            # let the reader open events first (a reader starts at its open)
            time.sleep(0.5)
            self.add_plugin("pw4")
            out, _ = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0)
        ev = json.loads(out)
        self.assertIn("kind", ev)


if __name__ == "__main__":
    nt.main()

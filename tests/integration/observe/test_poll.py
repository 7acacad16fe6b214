# SPDX-License-Identifier: LGPL-2.1-or-later
"""poll() on state files, as on sysfs attributes and cgroup.events: a
Python select.poll loop on volumes/NAME/state and containers/NAME/state
(POLLPRI) is woken when the value changes, within 100 ms of the change (the
change's time is the event's "time" on the events stream), then reads the
new value again from offset 0; it is quiet until the next change. Status
(daemon) is covered by the fs tests.
"""

import json
import os
import select
import threading
import time
import unittest
from datetime import datetime

import nodefs_test as nt
import observe as ob

WAKE_MAX = nt.scaled(0.100)


def event_time(ev):
    return datetime.strptime(ev["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=__import__("datetime").timezone.utc).timestamp()


class PollTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = ob.World(docker=True)
        cls.w.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def follow(self, kind, name, act, final, limit=30.0):
        """Poll kind/name/state while act() runs in a thread; each wake-up
        re-reads from offset 0. Returns [(value, wake_time)] until final."""
        fd = os.open(self.w.fs.path(kind, name, "state"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        ev = ob.EventReader(self.w.fs.path("events"))
        self.addCleanup(ev.close)
        value = os.pread(fd, 4096, 0).decode().strip()
        p = select.poll()
        p.register(fd, select.POLLPRI | select.POLLERR)
        quiet = p.poll(200)
        self.assertFalse([e for _, e in quiet if e & select.POLLPRI],
                         "POLLPRI with no change: %r" % quiet)
        errors = []

        def run():
            try:
                act()
            except BaseException as e:   # reported by the test thread
                errors.append(e)
        t = threading.Thread(target=run)
        t.start()
        seen = [(value, time.time())]
        deadline = time.monotonic() + nt.scaled(limit)
        try:
            while seen[-1][0] != final and time.monotonic() < deadline:
                r = p.poll(int(max(1, (deadline - time.monotonic()) * 1000)))
                if not [e for _, e in r if e & select.POLLPRI]:
                    continue
                woke = time.time()
                v = os.pread(fd, 4096, 0).decode().strip()
                seen.append((v, woke))
        finally:
            t.join(60)
        if errors:
            raise errors[0]
        self.assertEqual(seen[-1][0], final, "values seen: %r" % seen)
        # every change has its event; the first wake after an event's time
        # must come within WAKE_MAX of it
        changes = []
        ev.read_until(lambda e: e["kind"] == kind[:-1] and e["name"] == name
                      and e["new"] == final, 10)
        for e in ev.seen:
            if e["kind"] == kind[:-1] and e["name"] == name:
                changes.append((e["new"], event_time(e)))
        self.assertTrue(changes, "no events for %s/%s" % (kind, name))
        lat = []
        for state, when in changes:
            woken = [w for v, w in seen[1:] if w >= when - 0.010]
            self.assertTrue(woken, "no wake-up after the change to %s; seen "
                            "%r" % (state, seen))
            lat.append(woken[0] - when)
        lat_ms = ["%s:%.1f" % (c[0], x * 1e3) for c, x in zip(changes, lat)]
        print("%s/%s: values %r, wake-ups %s ms after the changes"
              % (kind, name, [v for v, _ in seen], lat_ms))
        self.assertLess(max(lat), WAKE_MAX, "wake-ups (ms): %r" % lat_ms)
        # read again: quiet until the next change
        os.pread(fd, 4096, 0)
        r = p.poll(200)
        self.assertFalse([e for _, e in r if e & select.POLLPRI], r)
        return [v for v, _ in seen]

    def test_volume_state_poll(self):
        self.w.volume("pv")
        target = os.path.join(self.w.tmp, "pv-target")
        values = self.follow("volumes", "pv",
                             lambda: self.w.ctl("volumes/pv/ctl",
                                                "publish " + target),
                             "PUBLISHED")
        self.assertEqual(values[0], "CREATED")

    def test_container_state_poll(self):
        self.w.container("pc")
        values = self.follow("containers", "pc",
                             lambda: self.w.ctl("containers/pc/ctl", "stop 1"),
                             "EXITED")
        self.assertEqual(values[0], "RUNNING")

    def test_poll_after_removal(self):
        """A poller of a removed object's state is told (POLLERR/POLLHUP or
        POLLPRI) rather than left waiting forever."""
        self.w.volume("pr")
        fd = os.open(self.w.fs.path("volumes", "pr", "state"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        os.pread(fd, 4096, 0)
        p = select.poll()
        p.register(fd, select.POLLPRI | select.POLLERR)
        threading.Timer(0.2, lambda: self.w.ctl("volumes/pr/ctl",
                                                "destroy")).start()
        r = p.poll(10000)
        self.assertTrue(r, "no wake-up for a destroyed volume")
        # the wake-up may come a little before the volume is gone

        def gone():
            try:
                os.pread(fd, 4096, 0)
                return False
            except OSError:
                return True
        self.assertTrue(nt.wait_until(gone, 5), "the state file still reads")


if __name__ == "__main__":
    nt.main("mount", "csi-plugin", "docker")

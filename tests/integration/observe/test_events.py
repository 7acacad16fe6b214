# SPDX-License-Identifier: LGPL-2.1-or-later
"""The events file with real volumes (CSI test plugin) and containers
(dockerd):
- each open starts at the present: what happened before is not replayed;
- a read blocks until the next event and returns whole lines, one JSON
  object each with time, seq, kind, name, old, new, operation, message;
- 32 readers at once get the same lines; two readers both see every
  state change of a volume's life
  (create, publish, unpublish, destroy) and of a container's (run, stop,
  start, kill, destroy), in order, each change continuing the last;
- poll() and select() report readability only when an event is waiting;
- `head -n 1 events` returns after one event; a shell `while read` loop
  and Python's buffered `for line in f` follow the stream as tail -f would;
- a reader that does not read gets {"lost":N} once the ring (events_keep
  lines: 512 here, so that two floods of twice the ring stay short) has
  passed it, then the following lines; meanwhile the daemon answers
  other requests at once and its memory stays bounded.
"""

import json
import os
import re
import select
import subprocess
import threading
import time
import unittest

import nodefs_test as nt
import observe as ob

KEYS = ("time", "seq", "kind", "name", "old", "new", "operation", "message", "by")
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def sanitized(pid):
    """ASan keeps freed memory in quarantine: RSS says nothing there."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


RING = 512
# ms each engine event of a container is handed on late (NODEFS_TEST_SLOW_EVENTS)
SLOW_EVENTS = 150


class EventsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Each engine event of a container is handed on SLOW_EVENTS ms
        # late, as Podman's slower delivery does: the run's start event then
        # comes after the next command began, and the pause's after the
        # resume (test_state_events_carry_their_operation).
        cls.w = ob.World(docker=True, nodefs_extra="events_keep = %d\n" % RING,
                         env={"NODEFS_TEST_SLOW_EVENTS": str(SLOW_EVENTS)})
        cls.w.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def reader(self):
        r = ob.EventReader(self.w.fs.path("events"))
        self.addCleanup(r.close)
        return r

    def check_line(self, ev):
        self.assertEqual(tuple(ev.keys()), KEYS, ev)
        self.assertRegex(ev["time"], TIME_RE)
        self.assertIsInstance(ev["seq"], int)
        self.assertIn(ev["kind"], ("volume", "container", "operation",
                                   "plugin", "runtime", "daemon"))

    def test_open_starts_now(self):
        self.w.volume("early")
        r = self.reader()
        self.w.volume("late")
        ev = r.read_until(lambda e: e["kind"] == "volume"
                          and e["name"] == "late" and e["new"] == "CREATED")
        self.assertIsNotNone(ev, r.seen)
        self.assertFalse([e for e in r.seen if e["name"] == "early"],
                         "replayed an event from before the open")
        # the first thing seen is the making of "late" (the volume or its
        # create operation)
        first = r.seen[0]
        self.assertTrue(first["name"] == "late" or "create late"
                        in (first["message"] or ""), first)

    def test_blocking_read_whole_lines(self):
        fd = os.open(self.w.fs.path("events"), os.O_RDONLY)
        self.addCleanup(os.close, fd)

        def read(got):
            t0 = time.monotonic()
            got["data"] = os.read(fd, 65536)
            got["took"] = time.monotonic() - t0
        # The daemon's start may still be telling its story (its plugin,
        # its runtimes: a line is shown once the tree has flushed, a moment
        # after the change): a read may return those; then read on. Any
        # other line, or nothing, is a read that returned with nothing new.
        for _ in range(10):
            got = {}
            t = threading.Thread(target=read, args=(got,))
            t.start()
            # a negative (nothing returned yet) has no event to wait on: 0.5 s is ample for a wrongful return to show
            time.sleep(0.5)
            if t.is_alive():
                break
            t.join()
            early = [json.loads(line) for line in got["data"].splitlines()]
            self.assertTrue(early and all(e["kind"] in ("plugin", "runtime", "daemon")
                                          for e in early),
                            "read returned with nothing new: %r" % got["data"])
        self.assertTrue(t.is_alive(), "the daemon's start went on telling")
        self.w.volume("blk")
        t.join(10)
        self.assertFalse(t.is_alive(), "read did not return after an event")
        self.assertGreaterEqual(got["took"], 0.4)
        data = got["data"]
        self.assertTrue(data.endswith(b"\n"), data)
        for line in data.splitlines():
            self.check_line(json.loads(line))

    def test_seq_contiguous_and_keys(self):
        r = self.reader()
        self.w.volume("keys", publish=True)
        self.w.ctl("volumes/keys/ctl", "unpublish")
        r.read_until(lambda e: e["name"] == "keys" and e["old"] ==
                     "NODE_UNPUBLISH")
        self.assertTrue(r.seen)
        for ev in r.seen:
            self.check_line(ev)
        seqs = [e["seq"] for e in r.seen]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))),
                         "gaps or disorder in seq")
        # operation events carry the operation id, ended ones their outcome
        ops = [e for e in r.seen if e["kind"] == "operation"]
        self.assertTrue(ops)
        for e in ops:
            self.assertEqual(e["operation"], e["name"], e)
            self.assertTrue(os.path.isdir(self.w.fs.path("operations",
                                                         e["name"])))

    def lifecycle(self, readers, kind, name, final_pred):
        out = []
        for r in readers:
            ev = r.read_until(lambda e: e["kind"] == kind
                              and e["name"] == name and final_pred(e), 60)
            self.assertIsNotNone(ev, "%s %s: no final event; saw %r"
                                 % (kind, name, r.seen[-20:]))
            out.append(ob.state_changes(r.seen, kind, name))
        self.assertEqual(out[0], out[1], "the two readers disagree")
        chain = out[0]
        for prev, cur in zip(chain, chain[1:]):
            if cur[0] is not None:
                self.assertEqual(cur[0], prev[1],
                                 "%s %s: %r does not follow %r in %r"
                                 % (kind, name, cur, prev, chain))
        return [new for _, new in chain]

    def test_volume_lifecycle_two_readers(self):
        readers = [self.reader(), self.reader()]
        w = self.w
        w.volumes.append("life")
        w.ctl("volumes/ctl", "create life size=8M")
        target = os.path.join(w.tmp, "life-target")
        w.ctl("volumes/life/ctl", "publish " + target)
        w.ctl("volumes/life/ctl", "unpublish")
        w.ctl("volumes/life/ctl", "destroy")
        states = self.lifecycle(readers, "volume", "life",
                                lambda e: e["new"] == "DELETING")
        for s in ("CREATING", "CREATED", "NODE_STAGE", "NODE_PUBLISH",
                  "PUBLISHED", "NODE_UNPUBLISH", "DELETING"):
            self.assertIn(s, states, states)
        self.assertLess(states.index("CREATED"), states.index("PUBLISHED"))
        self.assertLess(states.index("PUBLISHED"),
                        states.index("NODE_UNPUBLISH"))
        self.assertLess(states.index("NODE_UNPUBLISH"),
                        states.index("DELETING"))

    def test_volume_removal_event(self):
        """Destroying a volume ends its story on the stream: a last event
        whose new state says it is gone (DELETED), as containers have
        DESTROYED."""
        r = self.reader()
        self.w.volume("gone")
        self.w.ctl("volumes/gone/ctl", "destroy")
        ev = r.read_until(lambda e: e["kind"] == "volume"
                          and e["name"] == "gone" and e["new"] == "DELETED",
                          10)
        self.assertIsNotNone(ev, "no DELETED event for a destroyed volume; "
                             "saw %r" % ob.state_changes(r.seen, "volume",
                                                         "gone"))
        self.assertEqual(ev["old"], "DELETING")

    def test_container_lifecycle_two_readers(self):
        readers = [self.reader(), self.reader()]
        w = self.w
        w.container("clife")
        w.ctl("containers/clife/ctl", "stop 1")
        w.ctl("containers/clife/ctl", "start")
        w.ctl("containers/clife/ctl", "kill")
        nt.wait_until(lambda: w.state("containers", "clife") == "EXITED", 20)
        w.ctl("containers/clife/ctl", "destroy")
        states = self.lifecycle(readers, "container", "clife",
                                lambda e: e["new"] == "DESTROYED")
        want = ["CREATED", "STARTING", "RUNNING", "STOPPING", "EXITED",
                "STARTING", "RUNNING", "EXITED", "DESTROYING", "DESTROYED"]
        it = iter(states)
        self.assertTrue(all(s in it for s in want),
                        "expected %r in order within %r" % (want, states))

    def command_events(self, r, rel, line, kind, name):
        """Write line to rel; return (the id of the operation it started,
        the state events of kind/name up to that operation's end, which
        comes after every event of the object the command causes)."""
        start = len(r.seen)
        self.w.ctl(rel, line)
        ours = []

        def ended(e):
            if e["kind"] != "operation":
                return False
            if e["old"] is None:
                ours.append(e["name"])
            return e["new"] != "PENDING" and e["name"] in ours
        end = r.read_until(ended, 30)
        self.assertIsNotNone(end, "the operation of %r never ended: %r" % (line, r.seen[start:]))
        self.assertEqual(ours, [end["name"]], line)
        return end["name"], [e for e in r.seen[start:]
                             if e["kind"] == kind and e["name"] == name]

    def test_state_events_carry_their_operation(self):
        """Every state change a command causes carries that command's
        operation id: a volume's create, publish, unpublish and destroy;
        a container's run, pause, resume (Docker's own pause event may come
        before the command's look), stop, start, kill and destroy. The
        engine's events come late (SLOW_EVENTS): one that happened before
        the state last changed moves nothing."""
        r = self.reader()
        w = self.w
        w.volumes.append("opv")
        w.containers.append("opc")
        target = os.path.join(w.tmp, "opv-target")
        steps = [
            ("volume", "opv", "volumes/ctl", "create opv size=8M"),
            ("volume", "opv", "volumes/opv/ctl", "publish " + target),
            ("volume", "opv", "volumes/opv/ctl", "unpublish"),
            ("volume", "opv", "volumes/opv/ctl", "destroy"),
            ("container", "opc", "containers/ctl",
             "run opc runtime=docker image=%s cmd='sleep 600'" % ob.IMAGE),
            ("container", "opc", "containers/opc/ctl", "pause"),
            ("container", "opc", "containers/opc/ctl", "resume"),
            ("container", "opc", "containers/opc/ctl", "stop 1"),
            ("container", "opc", "containers/opc/ctl", "start"),
            ("container", "opc", "containers/opc/ctl", "kill"),
            ("container", "opc", "containers/opc/ctl", "destroy"),
        ]
        for kind, name, rel, line in steps:
            op, evs = self.command_events(r, rel, line, kind, name)
            self.assertTrue(evs, "%r changed no state" % line)
            for e in evs:
                self.assertEqual(e["operation"], op, "%r: %r" % (line, e))
            if line.startswith("destroy"):
                self.assertIn(evs[-1]["new"], ("DELETED", "DESTROYED"), evs)

    def test_many_readers_see_the_same_lines(self):
        """32 readers (head -n 4) at once all get the same four lines."""
        procs = [subprocess.Popen(["head", "-n", "4",
                                   self.w.fs.path("events")],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
                 for _ in range(32)]
        try:
            # a negative (nothing returned yet) has no event to wait on: 1 s is ample for 32 readers to return wrongly
            time.sleep(1.0)
            self.assertTrue(all(p.poll() is None for p in procs))
            self.w.volume("many", publish=True)
            outs = [p.communicate(timeout=20)[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual(len(set(outs)), 1, "readers saw different lines")
        lines = outs[0].splitlines()
        self.assertEqual(len(lines), 4)
        evs = [json.loads(l) for l in lines]
        for e in evs:
            self.check_line(e)
        self.assertEqual([e["seq"] for e in evs],
                         list(range(evs[0]["seq"], evs[0]["seq"] + 4)))

    def test_poll_and_select(self):
        fd = os.open(self.w.fs.path("events"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        p = select.poll()
        p.register(fd, select.POLLIN)
        self.assertEqual(p.poll(200), [], "readable with nothing new")
        r, _, _ = select.select([fd], [], [], 0.2)
        self.assertEqual(r, [])
        t0 = time.monotonic()
        threading.Timer(0.3, lambda: self.w.volume("sel")).start()
        r, _, _ = select.select([fd], [], [], 10)
        self.assertEqual(r, [fd], "select did not wake on an event")
        self.assertGreater(time.monotonic() - t0, 0.2)
        data = os.read(fd, 65536)
        self.assertTrue(data.endswith(b"\n"))
        ev = json.loads(data.splitlines()[0])
        self.check_line(ev)
        # drained: not readable again until the next event
        time.sleep(0.5)   # the rest of the create's events
        while p.poll(0):
            os.read(fd, 65536)
        self.assertEqual(p.poll(200), [])

    def test_head_n1(self):
        proc = subprocess.Popen(["head", "-n", "1", self.w.fs.path("events")],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            # a negative (nothing returned yet) has no event to wait on: 0.5 s is ample for a wrongful return to show
            time.sleep(0.5)
            self.assertIsNone(proc.poll(), "head returned with no event")
            self.w.volume("hd")
            out, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        if err:
            print("head said: " + err.strip())
        self.assertEqual(out.count("\n"), 1, out)
        self.check_line(json.loads(out))

    def test_shell_while_read_follows(self):
        """`while read -r l; do ...; done < events` sees lines as they come
        (what `tail -f` does for a growing file; see nodefs(5) on tail)."""
        script = ('n=0; while IFS= read -r l; do printf "%s\\n" "$l"; '
                  'n=$((n+1)); [ $n -ge 3 ] && exit 0; done < "$1"')
        proc = subprocess.Popen(["bash", "-c", script, "sh",
                                 self.w.fs.path("events")],
                                stdout=subprocess.PIPE, text=True)
        try:
            # let the reader open events first (a reader starts at its open)
            time.sleep(0.3)
            self.w.volume("wr")
            try:
                out, _ = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                self.fail("bash read saw no whole line in 20 s (it reads "
                          "1 byte at a time from a nonseekable file); got %r"
                          % out[:200])
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lines = out.splitlines()
        self.assertEqual(len(lines), 3, out)
        for l in lines:
            self.check_line(json.loads(l))

    def test_python_readline_follows(self):
        with open(self.w.fs.path("events")) as f:
            threading.Timer(0.3, lambda: self.w.volume("rl")).start()
            first = f.readline()
            second = f.readline()
        for l in (first, second):
            self.assertTrue(l.endswith("\n"))
            self.check_line(json.loads(l))
        self.assertEqual(json.loads(second)["seq"],
                         json.loads(first)["seq"] + 1)

    def flood(self, n_lines):
        """Emit about n_lines events fast: plugins added and removed, many
        command lines per write (their sockets are absent: that is fine)."""
        made = 0
        i = 0
        while made < n_lines:
            lines = ""
            while len(lines) < 3500:
                lines += ("add fl%d unix:///nonexistent/fl.sock\n"
                          "remove fl%d\n" % (i, i))
                i += 1
                made += 2
            ok, err = nt.write_line(self.w.fs.path("plugins", "ctl"), lines)
            self.assertTrue(ok, "%s: %s" % (nt.errname(err),
                                           self.w.fs.error("plugins")))

    def flood_phase(self, tag):
        """One flood of 2 * RING events (twice the ring) while a fast reader
        follows the stream to a last marker event and a prober reads
        status every 10 ms. Returns (the fast reader's marker event, its
        lost list, the worst status read in seconds)."""
        fast = self.reader()
        worst = 0.0
        stop = threading.Event()
        fast_done = {}
        end = "fl-end-" + tag

        def keep_up():
            fast_done["ev"] = fast.read_until(
                lambda e: e["name"] == end and e["new"] == "removed", 120)
        ft = threading.Thread(target=keep_up)
        ft.start()

        def probe():
            nonlocal worst
            while not stop.is_set():
                t0 = time.monotonic()
                self.w.fs.read("status")
                worst = max(worst, time.monotonic() - t0)
                time.sleep(0.01)
        t = threading.Thread(target=probe)
        t.start()
        try:
            self.flood(2 * RING)
            nt.write_line(self.w.fs.path("plugins", "ctl"),
                          "add %s unix:///nonexistent/fl.sock\n"
                          "remove %s\n" % (end, end))
            ft.join(120)
        finally:
            stop.set()
            t.join()
            ft.join(120)
        return fast_done.get("ev"), fast.lost, worst

    def test_slow_reader_gets_lost_marker(self):
        pid = self.w.fs.proc.pid
        slow = os.open(self.w.fs.path("events"), os.O_RDONLY)
        self.addCleanup(os.close, slow)
        # The first phase grows what a burst of work grows once: the worker
        # threads and their malloc arenas, FUSE's threads, the ring. Memory
        # is measured across a second, identical phase: whatever queued per
        # event or per reader would grow it again.
        self.flood_phase("warm")
        rss0 = rss_kib(pid)
        ev, lost_fast, worst = self.flood_phase("end")
        fast_done = {"ev": ev}
        # a reader that keeps reading loses nothing, whatever the slow one does
        self.assertIsNotNone(fast_done.get("ev"), "fast reader missed the end")
        self.assertEqual(lost_fast, [], "the fast reader lost lines")
        self.assertLess(worst, nt.scaled(1.0), "status took %.3f s during the flood"
                        % worst)
        grown = rss_kib(pid) - rss0
        # a sanity bound (thread arenas make RSS noisy); the proof that
        # nothing queues per reader is below: at most the ring is kept
        if not sanitized(pid):
            self.assertLess(grown, 16 * 1024, "daemon RSS grew by %d KiB "
                            "across a second flood with a reader "
                            "that does not read" % grown)
        data = b""
        p = select.poll()
        p.register(slow, select.POLLIN)
        while p.poll(300):
            data += os.read(slow, 1 << 20)
        lines = data.splitlines()
        lost = json.loads(lines[0])
        self.assertEqual(list(lost), ["lost"], lines[0])
        # two floods of twice the ring each, of which the ring keeps one
        self.assertGreater(lost["lost"], 2 * RING)
        after = [json.loads(l) for l in lines[1:]]
        self.assertTrue(after, "nothing after the lost marker")
        for e in after:
            self.check_line(e)
        seqs = [e["seq"] for e in after]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        self.assertGreaterEqual(seqs[-1], fast_done["ev"]["seq"],
                                "the slow reader did not catch up")
        self.assertLessEqual(len(after), RING, "more than the ring was kept")
        print("flood: status worst %.1f ms, RSS +%d KiB, lost %d"
              % (worst * 1e3, grown, lost["lost"]))


if __name__ == "__main__":
    nt.main("mount", "csi-plugin", "docker")

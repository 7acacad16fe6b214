# SPDX-License-Identifier: LGPL-2.1-or-later
"""The kernel may cache a volume's files (page cache, real size,
keep_cache) and nodefs invalidates them on every change before the
change's event line or poll wake-up goes out. The promise of nodefs(5):
once a change's event has been read, or its poll wake-up seen, every read
shows the new value.

Writers publish and unpublish several volumes at once from their own
threads while readers follow `events` and, for each volume or operation
event, read that object's `state` at once; pollers wait for POLLPRI on a
volume's `state` and read it again. No reader may ever see a value older
than the last event it read: the value read after event k of an object must
be the new state of event k or of a later event of that object in the same
reader's stream. Pollers must read a value the volume went through, and a
poller woken after the last change reads the final value.
"""

import errno
import json
import os
import select
import threading
import time
import unittest

import nodefs_test as nt
import voltest as vt

VOLS = 4
CYCLES = 4
READERS = 3


class EventReader(threading.Thread):
    def __init__(self, env, stop):
        super().__init__(daemon=True)
        self.env, self.stop = env, stop
        self.events, self.checks, self.failure = [], [], None
        self.fd = os.open(env.fs.path("events"), os.O_RDONLY | os.O_NONBLOCK)

    def state_path(self, ev):
        if ev.get("kind") == "volume" and ev.get("name", "").startswith("s"):
            return self.env.fs.path("volumes", ev["name"], "state")
        if ev.get("kind") == "operation" and ev.get("name"):
            return self.env.fs.path("operations", ev["name"], "state")
        return None

    def run(self):
        buf = b""
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        try:
            while True:
                stopping = self.stop.is_set()
                p.poll(100)
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError as e:
                    if e.errno != errno.EAGAIN:
                        raise
                    chunk = b""
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    ev = json.loads(line)
                    self.events.append(ev)
                    path = self.state_path(ev)
                    if path and ev.get("new"):
                        try:
                            with open(path) as f:
                                v = f.read().strip()
                        except FileNotFoundError:
                            continue
                        self.checks.append((len(self.events) - 1, ev["kind"], ev["name"], v))
                if stopping and not chunk:
                    return
        except Exception as e:  # reported by the test
            self.failure = e
        finally:
            os.close(self.fd)

    def stale(self):
        """The checks whose value no event at or after theirs announced."""
        bad = []
        for k, kind, name, v in self.checks:
            later = [e["new"] for e in self.events[k:]
                     if e.get("kind") == kind and e.get("name") == name and e.get("new")]
            if v not in later:
                bad.append((self.events[k], v, later[:4]))
        return bad


class Poller(threading.Thread):
    def __init__(self, path, stop):
        super().__init__(daemon=True)
        self.path, self.stop, self.values, self.failure = path, stop, [], None

    def run(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            p = select.poll()
            p.register(fd, select.POLLPRI | select.POLLERR)
            self.values.append(os.pread(fd, 4096, 0).decode().strip())
            while not self.stop.is_set():
                if [e for _, e in p.poll(100) if e & select.POLLPRI]:
                    self.values.append(os.pread(fd, 4096, 0).decode().strip())
            self.final = os.pread(fd, 4096, 0).decode().strip()
        except Exception as e:
            self.failure = e
        finally:
            os.close(fd)


def metric(env, prefix):
    with open(env.fs.path("metrics", "nodefs.prom")) as f:
        for line in f:
            if line.startswith(prefix + " "):
                return int(line.split()[-1])
    raise AssertionError("no %s in metrics/nodefs.prom" % prefix)


def fuse_reads(env):
    return metric(env, 'nodefs_fuse_requests_total{op="read"}')


def quiet_stats_calls(env, secs=0.3):
    """nodefs's count of NodeGetVolumeStats calls once it has not moved for
    secs (scaled): the refresh a volume's change queues on a worker (which
    measures the plugin's volumes for the metrics) is over, so what follows
    counts the reads' calls alone."""
    last = env.calls().get("NodeGetVolumeStats", 0)
    end = time.monotonic() + nt.scaled(10)
    while time.monotonic() < end:
        time.sleep(nt.scaled(secs))
        now = env.calls().get("NodeGetVolumeStats", 0)
        if now == last:
            return now
        last = now
    raise AssertionError("NodeGetVolumeStats calls did not settle: %d" % last)


class StalenessTest(unittest.TestCase):
    def test_cached_file_is_served_from_the_page_cache(self):
        """A volume's id (cached: it never changes) has its real size, and
        reads of it are served by the kernel, not by nodefs; a change of
        the volume leaves it whole, and, its text unchanged, in the page
        cache: the reads after a publish reach nodefs no more than before."""
        with vt.VolEnv() as env:
            self.assertEqual(env.ctl("volumes/ctl", "create c size=1M"), (True, "OK"))
            path = env.fs.path("volumes", "c", "id")
            with open(path) as f:
                vid = f.read()
            self.assertTrue(vid.endswith("\n") and len(vid) > 1, vid)
            self.assertEqual(os.stat(path).st_size, len(vid), "its real size")
            before = fuse_reads(env)
            for _ in range(50):
                with open(path) as f:
                    self.assertEqual(f.read(), vid)
            # the metrics reads themselves are a few READs
            self.assertLess(fuse_reads(env) - before, 10, "reads of an unchanged id reach nodefs")
            kept = metric(env, "nodefs_read_cache_kept_total")
            self.assertEqual(env.ctl("volumes/c/ctl", "publish " + env.target("c")), (True, "OK"))
            self.assertGreater(metric(env, "nodefs_read_cache_kept_total"), kept,
                               "the publish's flushes left the id's pages")
            before = fuse_reads(env)
            for _ in range(50):
                with open(path) as f:
                    self.assertEqual(f.read(), vid)
            self.assertLess(fuse_reads(env) - before, 10, "the publish dropped the id's pages")
            self.assertEqual(os.stat(path).st_size, len(vid))

    def test_a_write_shows_its_change_when_it_returns(self):
        """A ctl write returns once what it changed is visible: the kernel
        keeps directory listings (cache_readdir), and a listing read just
        before a create or a destroy is stale until nodefs invalidates it,
        so an ls right after the write must already show the change. The
        notifier starts each round 30 ms late here (a test hook), as on a
        loaded machine, where this once failed."""
        with vt.VolEnv(extra_nodefs="operations_keep = 1000",
                       env={"NODEFS_TEST_SLOW_FLUSH_MS": "30"}) as env:
            vols, ops = env.fs.path("volumes"), env.fs.path("operations")
            for k in range(25):
                name = "rw%d" % k
                before = set(os.listdir(ops))
                self.assertNotIn(name, os.listdir(vols))
                self.assertEqual(env.ctl("volumes/ctl", "create %s size=1M" % name),
                                 (True, "OK"))
                self.assertIn(name, os.listdir(vols), "create %d" % k)
                new = set(os.listdir(ops)) - before
                self.assertEqual(len(new), 1, "create %d: %s" % (k, sorted(new)))
                oid = new.pop()
                with open(os.path.join(ops, oid, "object")) as f:
                    self.assertEqual(f.read(), "volumes/%s\n" % name)
                self.assertEqual(env.ctl("volumes/%s/ctl" % name, "destroy"), (True, "OK"))
                self.assertNotIn(name, os.listdir(vols), "destroy %d" % k)

    def test_a_failed_write_shows_its_operation_when_it_returns(self):
        """A write whose command fails returns its errno only once what the
        command changed is visible too: its operation (FAILED) in a listing
        of operations/ the kernel had cached, and no volume in volumes/ (an
        import of an id the plugin does not have). The notifier starts each
        round 30 ms late (a test hook), as on a loaded machine, where a
        failed expand's operation was once missing from the listing."""
        with vt.VolEnv(extra_nodefs="operations_keep = 1000",
                       env={"NODEFS_TEST_SLOW_FLUSH_MS": "30"}) as env:
            ops, vols = env.fs.path("operations"), env.fs.path("volumes")
            for k in range(10):
                name = "f%d" % k
                before = set(os.listdir(ops))
                self.assertNotIn(name, os.listdir(vols))
                # the plugin answers NOT_FOUND: an operation that fails
                self.assertEqual(env.ctl("volumes/ctl", "import %s vol-none-%d" % (name, k)),
                                 (False, "ENOENT"))
                new = set(os.listdir(ops)) - before
                self.assertEqual(len(new), 1, "import %d: %s" % (k, sorted(new)))
                with open(os.path.join(ops, new.pop(), "state")) as f:
                    self.assertEqual(f.read(), "FAILED\n")
                self.assertNotIn(name, os.listdir(vols))
                self.assertIn("vol-none-%d" % k, env.fs.error("volumes"))

    def test_readers_of_an_unchanged_state_share_one_render(self):
        """A volume's state is read from nodefs (its length varies), but
        the readers of one version share one render: many descriptors read
        it with one render between them, and after a change each one's
        read at offset 0 shows the new value."""
        with vt.VolEnv() as env:
            self.assertEqual(env.ctl("volumes/ctl", "create sh size=1M"), (True, "OK"))
            path = env.fs.path("volumes", "sh", "state")
            env.state("sh")
            renders = metric(env, "nodefs_read_renders_total")
            shared = metric(env, "nodefs_read_shared_total")
            fds = [os.open(path, os.O_RDONLY) for _ in range(20)]
            try:
                self.assertEqual({os.pread(fd, 4096, 0) for fd in fds}, {b"CREATED\n"})
                self.assertLessEqual(metric(env, "nodefs_read_renders_total") - renders, 1)
                self.assertGreaterEqual(metric(env, "nodefs_read_shared_total") - shared, 19)
                self.assertEqual(os.stat(path).st_size, 0, "a direct file")
                self.assertEqual(env.ctl("volumes/sh/ctl", "publish " + env.target("sh")),
                                 (True, "OK"))
                self.assertEqual({os.pread(fd, 4096, 0) for fd in fds}, {b"PUBLISHED\n"})
                # a read past the start continues the descriptor's render
                self.assertEqual(os.pread(fds[0], 4096, 3), b"LISHED\n")
            finally:
                for fd in fds:
                    os.close(fd)

    def published_stats(self, env):
        """Make volume st, publish it, and return its stats file's path."""
        self.assertEqual(env.ctl("volumes/ctl", "create st size=1M"), (True, "OK"))
        self.assertEqual(env.ctl("volumes/st/ctl", "publish " + env.target("st")),
                         (True, "OK"))
        return env.fs.path("volumes", "st", "stats")

    def test_stats_readers_share_a_sample_for_cache_max_age(self):
        """A volume's stats (a NodeGetVolumeStats call) is shared by its
        readers for at most cache_max_age: readers one after another within
        the age get one sample, a change of the volume ends the age early,
        and past the age a read samples anew."""
        with vt.VolEnv(extra_nodefs="cache_max_age = 1h") as env:
            path = self.published_stats(env)
            renders = metric(env, "nodefs_read_aged_renders_total")
            shared = metric(env, "nodefs_read_aged_shared_total")
            calls = quiet_stats_calls(env)
            texts = set()
            for _ in range(20):
                with open(path) as f:
                    texts.add(f.read())
            self.assertEqual(len(texts), 1, texts)
            self.assertIn("bytes_total ", texts.pop())
            self.assertEqual(metric(env, "nodefs_read_aged_renders_total") - renders, 1)
            self.assertGreaterEqual(metric(env, "nodefs_read_aged_shared_total") - shared, 19)
            self.assertEqual(env.calls().get("NodeGetVolumeStats", 0) - calls, 1,
                             "one call to the plugin for 20 reads")
            # a change of the volume (it stays staged): the next read
            # samples anew
            self.assertEqual(env.ctl("volumes/st/ctl", "unpublish"), (True, "OK"))
            calls = quiet_stats_calls(env)
            with open(path) as f:
                self.assertIn("bytes_total ", f.read())
            self.assertEqual(metric(env, "nodefs_read_aged_renders_total") - renders, 2)
            self.assertEqual(env.calls().get("NodeGetVolumeStats", 0) - calls, 1)

        with vt.VolEnv(extra_nodefs="cache_max_age = 200ms") as env:
            path = self.published_stats(env)
            renders = metric(env, "nodefs_read_aged_renders_total")
            for _ in range(3):
                with open(path) as f:
                    self.assertIn("bytes_total ", f.read())
                time.sleep(0.3)  # past the age, however slow the build
            self.assertEqual(metric(env, "nodefs_read_aged_renders_total") - renders, 3)

        with vt.VolEnv(extra_nodefs="cache_max_age = 0") as env:
            path = self.published_stats(env)
            calls = env.calls().get("NodeGetVolumeStats", 0)
            for _ in range(5):
                with open(path) as f:
                    self.assertIn("bytes_total ", f.read())
            self.assertEqual(env.calls().get("NodeGetVolumeStats", 0) - calls, 5,
                             "a call to the plugin at each read")
            self.assertEqual(metric(env, "nodefs_read_aged_renders_total"), 0)
            self.assertEqual(metric(env, "nodefs_read_aged_shared_total"), 0)

    def test_no_reader_sees_a_value_older_than_its_last_event(self):
        with vt.VolEnv() as env:
            names = ["s%d" % i for i in range(VOLS)]
            for n in names:
                self.assertEqual(env.ctl("volumes/ctl", "create %s size=1M" % n), (True, "OK"))
                self.assertEqual(env.state(n), "CREATED")
            stop = threading.Event()
            readers = [EventReader(env, stop) for _ in range(READERS)]
            pollers = [Poller(env.fs.path("volumes", n, "state"), stop) for n in names]
            for t in readers + pollers:
                t.start()
            errors = []

            def writer(n):
                for _ in range(CYCLES):
                    for line in ("publish " + env.target(n), "unpublish"):
                        ok, err = env.ctl("volumes/%s/ctl" % n, line)
                        if not ok:
                            errors.append((n, line, err, env.fs.error("volumes/" + n)))
                            return

            writers = [threading.Thread(target=writer, args=(n,)) for n in names]
            t0 = time.monotonic()
            for w in writers:
                w.start()
            for w in writers:
                w.join(nt.scaled(120))
            took = time.monotonic() - t0
            # the last wake-ups and events have gone out within this
            time.sleep(nt.scaled(0.5))
            stop.set()
            for t in readers + pollers:
                t.join(nt.scaled(30))
            self.assertEqual(errors, [])
            finals = {n: env.state(n) for n in names}
            checks = 0
            for r in readers:
                self.assertIsNone(r.failure)
                self.assertEqual(r.stale(), [])
                checks += len(r.checks)
            self.assertGreater(checks, VOLS * CYCLES * 2)
            for n, p in zip(names, pollers):
                self.assertIsNone(p.failure)
                walk = set(env.volume_walk(readers[0].events, n)) | {"CREATED"}
                self.assertEqual([v for v in p.values if v not in walk], [], n)
                self.assertEqual(p.final, finals[n], n)
                self.assertEqual(p.values[-1], finals[n], (n, p.values[-6:]))
            print("%d commands in %.1f s; %d state reads checked against the events"
                  % (VOLS * CYCLES * 2, took, checks))


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

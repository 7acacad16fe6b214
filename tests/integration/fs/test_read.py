# SPDX-License-Identifier: LGPL-2.1-or-later
"""Read semantics: a read at offset 0 takes a fresh snapshot, reads at later
offsets continue it (status read in 5-byte chunks across seconds is one
consistent snapshot), a read past the end returns nothing, and many
concurrent readers all succeed with well-formed data.
"""

import os
import threading
import time
import unittest

import nodefs_test as nt


def uptime(text):
    return float(nt.parse_kv(text)["uptime_seconds"])


class ReadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = nt.Nodefs(nt.offline_config())
        cls.fs.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.fs.__exit__(None, None, None)

    def test_chunked_read_is_one_snapshot(self):
        path = self.fs.path("status")
        before = self.fs.read("status")
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = [os.read(fd, 5)]
            # Long enough for uptime_seconds to move on by two.
            time.sleep(2.2)
            while True:
                c = os.read(fd, 5)
                if not c:
                    break
                self.assertLessEqual(len(c), 5)
                chunks.append(c)
            chunked = b"".join(chunks).decode()
            after = self.fs.read("status")
            # Same keys, same lines, except for the moving uptime.
            self.assertEqual(list(nt.parse_kv(chunked)),
                             list(nt.parse_kv(before)))
            self.assertTrue(chunked.endswith("\n"))
            self.assertLessEqual(uptime(chunked) - uptime(before), nt.scaled(1.0),
                                 "chunks were not served from one snapshot:"
                                 "\nbefore:\n%s\nchunked:\n%s"
                                 % (before, chunked))
            self.assertGreaterEqual(uptime(after) - uptime(chunked), 1.0,
                                    "uptime does not move: cannot tell")
            strip = lambda t: [l for l in t.splitlines()
                               if not l.startswith("uptime_seconds")]
            self.assertEqual(strip(chunked), strip(after))
            # A read at offset 0 on the same descriptor takes a new one.
            again = os.pread(fd, 65536, 0).decode()
            self.assertGreaterEqual(uptime(again) - uptime(chunked), 1.0,
                                    "pread at 0 served the old snapshot")
            # And reads past its end return nothing.
            self.assertEqual(os.pread(fd, 100, len(again.encode()) + 10),
                             b"")
        finally:
            os.close(fd)

    def test_chunked_equals_whole_for_every_size(self):
        """Chunk sizes 1..17 over a file that does not change (the list of
        commands of volumes/ctl)."""
        path = self.fs.path("volumes", "ctl")
        whole = nt.read_file(path)
        self.assertGreater(len(whole), 40)
        for size in range(1, 18):
            with open(path, "rb", buffering=0) as f:
                parts = []
                while True:
                    c = f.read(size)
                    if not c:
                        break
                    parts.append(c)
            self.assertEqual(b"".join(parts).decode(), whole, size)

    def test_seek_and_read_continue(self):
        path = self.fs.path("status")
        fd = os.open(path, os.O_RDONLY)
        try:
            first = os.read(fd, 65536)
            self.assertTrue(first)
            mid = len(first) // 2
            # pread at a later offset continues the snapshot of offset 0.
            self.assertEqual(os.pread(fd, 65536, mid), first[mid:])
            os.lseek(fd, 3, os.SEEK_SET)
            self.assertEqual(os.read(fd, 4), first[3:7])
        finally:
            os.close(fd)

    def test_shell_tools(self):
        for cmd, want in (("head -n1 status", "state: READY"),
                          ("grep '^state:' status", "state: READY"),
                          ("tail -n +1 status | grep -c ': '", None),
                          ("cat status status", "state: READY"),
                          ("dd if=status bs=3 status=none", "state: READY")):
            p = self.fs.sh(cmd)
            self.assertEqual(p.returncode, 0, "%s: %s" % (cmd, p.stderr))
            if want:
                self.assertIn(want, p.stdout, cmd)
        p = self.fs.sh("cat status status")
        self.assertEqual(p.stdout.count("state: READY"), 2)

    def test_concurrent_readers(self):
        files = ["status", "metrics/nodefs.prom", "runtimes/docker/status",
                 "runtimes/lxc/version", "volumes/ctl", "containers/error"]
        errors = []
        counts = []

        def reader(i):
            n = 0
            try:
                for k in range(60):
                    rel = files[(i + k) % len(files)]
                    data = nt.read_file(self.fs.path(rel))
                    if rel == "status" and "state: READY" not in data:
                        errors.append("bad status %r" % data)
                    if rel == "metrics/nodefs.prom" and not data:
                        errors.append("empty metrics")
                    os.listdir(self.fs.path("runtimes"))
                    os.stat(self.fs.path(rel))
                    n += 1
            except Exception as e:  # collected and reported below
                errors.append("%s: %r" % (rel, e))
            counts.append(n)

        threads = [threading.Thread(target=reader, args=(i,))
                   for i in range(24)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads),
                         "readers still blocked after 60s")
        self.assertEqual(errors, [])
        self.assertEqual(sum(counts), 24 * 60)
        print("concurrent: 24 threads x 60 reads in %.2fs"
              % (time.monotonic() - t0))
        self.assertEqual(self.fs.status().get("state"), "READY")

    def test_concurrent_bad_writes_and_reads(self):
        """Writers of bad commands and readers of error files at once: every
        write fails with EINVAL, every error read is one whole line."""
        errors = []

        def writer():
            for _ in range(50):
                ok, e = self.fs.write_ctl("volumes/ctl", "bogus")
                if (ok, e) != (False, 22):
                    errors.append("write gave %s" % nt.errname(e))

        def reader():
            for _ in range(50):
                t = self.fs.error("volumes")
                if t and (not t.endswith("\n") or t.count("\n") != 1):
                    errors.append("torn error file %r" % t)

        threads = [threading.Thread(target=f) for f in (writer, reader) * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(errors, [])


if __name__ == "__main__":
    nt.main()

# SPDX-License-Identifier: LGPL-2.1-or-later
"""Permissions as an unprivileged user sees them: nobody can read status and
walk the tree (allow_other) but gets EACCES writing a ctl file; with
ctl_group set, ctl files are 0220 root:GROUP and a member of that group may
write them. The group is made with groupadd for the test and removed after,
whatever happens. With reader_memory set, nobody holding many descriptors of
metrics/nodefs.prom gets EMFILE past the bound (counted by
nodefs_reader_limit_refused_total), root's opens and ctl writes are served
meanwhile, and closing them frees the budget. While nobody floods reads
(status, a state-like render and metrics, from several processes), root's
ctl writes are each answered within a generous bound and the flood goes on
being served.
"""

import grp
import os
import re
import stat
import subprocess
import time
import unittest

import nodefs_test as nt


class NobodyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = nt.Nodefs(nt.offline_config())
        cls.fs.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.fs.__exit__(None, None, None)

    def test_nobody_reads_status(self):
        p = nt.run_as(["cat", self.fs.path("status")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("state: READY", p.stdout)
        ok, e, data = nt.syscall_as("read", self.fs.path("metrics",
                                                         "nodefs.prom"))
        self.assertTrue(ok, nt.errname(e))

    def test_nobody_walks_the_tree(self):
        p = nt.run_as(["ls", "-laR", self.fs.mnt])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = nt.run_as(["find", self.fs.mnt, "-type", "f", "-name", "version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(p.stdout.split()), 2, p.stdout)  # docker, lxc

    def test_nobody_cannot_write_ctl(self):
        for d in ("volumes", "containers", "plugins"):
            ctl = self.fs.path(d, "ctl")
            ok, e, _ = nt.syscall_as("write", ctl, "bogus\n")
            self.assertEqual((ok, nt.errname(e)), (False, "EACCES"), d)
            ok, e, _ = nt.syscall_as("truncate", ctl)
            self.assertEqual((ok, nt.errname(e)), (False, "EACCES"), d)
            # Reading a 0200 file is refused to others too.
            ok, e, _ = nt.syscall_as("read", ctl)
            self.assertEqual((ok, nt.errname(e)), (False, "EACCES"), d)
            # Nothing reached the daemon: the error file is untouched.
            self.assertEqual(self.fs.error(d), "", d)
        p = nt.run_as(["bash", "-c", "echo bogus > " + self.fs.path(
            "volumes", "ctl")])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Permission denied", p.stderr)

    def test_nobody_cannot_write_read_only_files(self):
        for rel in ("status", "runtimes/docker/status", "volumes/error"):
            ok, e, _ = nt.syscall_as("write", self.fs.path(rel), "x\n")
            self.assertFalse(ok, rel)
            self.assertIn(nt.errname(e), ("EACCES", "EPERM"), rel)

    def test_nobody_cannot_mkdir(self):
        ok, e, _ = nt.syscall_as("mkdir", self.fs.path("volumes", "v1"))
        self.assertEqual((ok, nt.errname(e)), (False, "EACCES"))
        self.assertNotIn("v1", self.fs.listdir("volumes"))


class CtlGroupTest(unittest.TestCase):
    def setUp(self):
        self.group = "nodefs-test-%d" % os.getpid()
        subprocess.run(["groupadd", "--system", self.group], check=True,
                       capture_output=True)
        self.addCleanup(subprocess.run, ["groupdel", self.group],
                        capture_output=True)
        self.gid = grp.getgrnam(self.group).gr_gid

    def test_ctl_group_may_write(self):
        conf = ("[nodefs]\nallowed_targets = /mnt /srv\nctl_group = %s\n"
                % self.group)
        with nt.Nodefs(conf) as fs:
            for d in ("volumes", "containers", "plugins"):
                ctl = fs.path(d, "ctl")
                st = os.stat(ctl)
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o220,
                                 "%s %o" % (d, st.st_mode))
                self.assertEqual((st.st_uid, st.st_gid), (0, self.gid), d)
                # A member reaches the daemon: its bad command is parsed.
                ok, e, _ = nt.syscall_as("write", ctl, "bogus\n",
                                         groups=(self.gid,))
                self.assertEqual((ok, nt.errname(e)), (False, "EINVAL"), d)
                self.assertIn("bogus", fs.error(d))
                ok, e, _ = nt.syscall_as("truncate", ctl, groups=(self.gid,))
                self.assertEqual((ok, nt.errname(e)), (True, "OK"), d)
                # A non-member still cannot.
                ok, e, _ = nt.syscall_as("write", ctl, "bogus\n")
                self.assertEqual((ok, nt.errname(e)), (False, "EACCES"), d)
                # Other files stay read-only to the group.
                ok, e, _ = nt.syscall_as("write", fs.path("status"), "x\n",
                                         groups=(self.gid,))
                self.assertFalse(ok)

    def test_unknown_ctl_group_refused(self):
        conf = "[nodefs]\nctl_group = nodefs-no-such-group-%d\n" % os.getpid()
        with self.assertRaises(nt.DaemonError) as cm:
            with nt.Nodefs(conf, start_timeout=10):
                pass
        self.assertIn(":2: ", str(cm.exception))


# As nobody: open and read metrics/nodefs.prom until EMFILE (at most 2,000),
# say how many are held, wait for a line on stdin, close them all, open and
# read one again.
_HOLD_CHILD = r"""
import errno, os, sys, time
path = sys.argv[1]
fds, err = [], 0
while len(fds) < 2000:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        err = e.errno
        break
    fds.append(fd)
    os.read(fd, 1 << 20)
print("held %d %s" % (len(fds), errno.errorcode.get(err, err)), flush=True)
sys.stdin.readline()
for fd in fds:
    os.close(fd)
# the kernel sends each RELEASE after close() has returned: the budget
# comes back a moment later
deadline = time.monotonic() + float(sys.argv[2])
while True:
    try:
        fd = os.open(path, os.O_RDONLY)
        break
    except OSError as e:
        if e.errno != errno.EMFILE or time.monotonic() > deadline:
            raise
        time.sleep(0.02)
print("again %d" % len(os.read(fd, 1 << 20)), flush=True)
os.close(fd)
"""


class ReaderBudgetTest(unittest.TestCase):
    def metric(self, fs, name):
        m = re.search(r'^%s\{uid="%d"\} (\d+)$' % (name, nt.NOBODY_UID),
                      fs.read("metrics", "nodefs.prom"), re.M)
        return int(m.group(1)) if m else 0

    def test_nobody_bounded_root_not(self):
        conf = nt.offline_config().replace("[nodefs]\n",
                                           "[nodefs]\nreader_memory = 512K\n", 1)
        with nt.Nodefs(conf) as fs:
            prom = fs.path("metrics", "nodefs.prom")
            child = subprocess.Popen(
                nt.as_user_argv(["/usr/bin/python3", "-c", _HOLD_CHILD, prom,
                                 str(nt.scaled(10))]),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                cwd="/")
            try:
                held = child.stdout.readline().split()
                self.assertEqual(held[0], "held", held)
                # bounded well before 2,000, by the daemon (not RLIMIT_NOFILE)
                self.assertEqual(held[2], "EMFILE", held)
                self.assertGreater(int(held[1]), 0, held)
                self.assertLess(int(held[1]), 500, held)
                self.assertGreaterEqual(
                    self.metric(fs, "nodefs_reader_limit_refused_total"), 1)
                used = self.metric(fs, "nodefs_reader_memory_bytes")
                self.assertGreater(used, 0)
                self.assertLessEqual(used, 512 * 1024)
                # root is never bounded: many opens, and a ctl write served
                fds = [os.open(prom, os.O_RDONLY) for _ in range(600)]
                try:
                    for fd in fds:
                        self.assertTrue(os.read(fd, 1 << 20))
                finally:
                    for fd in fds:
                        os.close(fd)
                ok, e = fs.write_ctl("volumes/ctl", "bogus")
                self.assertFalse(ok)
                self.assertNotEqual(fs.error("volumes"), "")
                # closing frees the budget
                child.stdin.write("go\n")
                child.stdin.flush()
                again = child.stdout.readline().split()
                self.assertEqual(again[0], "again", again)
                self.assertGreater(int(again[1]), 0, again)
                self.assertEqual(child.wait(timeout=nt.scaled(30)), 0)
                self.assertTrue(nt.wait_until(
                    lambda: self.metric(fs, "nodefs_reader_memory_bytes") == 0,
                    10))
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()

    def test_root_ctl_served_while_nobody_floods_reads(self):
        with nt.Nodefs(nt.offline_config()) as fs:
            paths = [fs.path("status"), fs.path("metrics", "nodefs.prom")]
            kids = [subprocess.Popen(
                nt.as_user_argv(["/usr/bin/python3", "-c", _FLOOD_CHILD, paths[k % 2]]),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
                for k in range(4)]
            try:
                for k in kids:	# each has read its file and floods on
                    self.assertEqual(k.stdout.readline().split()[0], "flooding")
                worst = 0.0
                for n in range(20):
                    t0 = time.monotonic()
                    ok, e = fs.write_ctl("volumes/ctl", "bogus%d" % n)
                    worst = max(worst, time.monotonic() - t0)
                    self.assertFalse(ok)
                    self.assertIn("bogus%d" % n, fs.error("volumes"))
                # answered, not queued behind the readers: a ctl write takes
                # under a millisecond unloaded
                self.assertLess(worst, nt.scaled(2.0), "a ctl write waited %.2f s" % worst)
                counts = []
                for k in kids:
                    k.stdin.close()
                    counts.append(int(k.stdout.readline().split()[1]))
                    self.assertEqual(k.wait(timeout=nt.scaled(30)), 0)
                self.assertTrue(all(c > 1 for c in counts), counts)
                print("ctl writes under a read flood: worst %.1f ms, %d reads" %
                      (worst * 1000, sum(counts)))
            finally:
                for k in kids:
                    if k.poll() is None:
                        k.kill()
                        k.wait()


# Read the file in a loop (open, read to EOF, close) until stdin closes;
# "flooding" after the first read, "read N" at the end.
_FLOOD_CHILD = r"""
import os, select, sys
path, n = sys.argv[1], 0
while True:
    with open(path, "rb") as f:
        if not f.read():
            sys.exit("empty read")
    n += 1
    if n == 1:
        print("flooding", flush=True)
    if n % 16 == 0 and select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.read(1):
        break
print("read", n, flush=True)
"""


if __name__ == "__main__":
    nt.main()

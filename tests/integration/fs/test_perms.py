# SPDX-License-Identifier: LGPL-2.1-or-later
"""Permissions as an unprivileged user sees them: nobody can read status and
walk the tree (allow_other) but gets EACCES writing a ctl file; with
ctl_group set, ctl files are 0220 root:GROUP and a member of that group may
write them. The group is made with groupadd for the test and removed after,
whatever happens.
"""

import grp
import os
import stat
import subprocess
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


if __name__ == "__main__":
    nt.main()

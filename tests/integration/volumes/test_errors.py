# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bad input to volumes/ctl and volumes/NAME/ctl, against the real plugin.

What it proves: each rejected command (unknown plugin or profile, a
profile of another plugin, bad size or access mode, a taken name, a target
outside allowed_targets, relative or with "..", a target reached through a
symlink, a target another volume holds, publish of a published volume,
unpublish of an unpublished one, unstage of a published one, expand to no
more than the capacity, rmdir of a published volume) fails with the errno
the contract names (EINVAL, EEXIST, EPERM, EBUSY), leaves one line saying
why in the error file beside the ctl file, and changes nothing: the volume
list, each volume's state, target and record, the plugin's own state file,
the mounts under the publish root, and the CSI calls nodefs made (counted
from its metrics) are all as before.
"""

import errno
import os
import unittest

import nodefs_test as nt
import voltest as vt


class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # a second plugin, never reachable: a profile of hostpath must not
        # be used with it
        cls.env = vt.VolEnv(extra="[plugin other]\nendpoint = unix:///nonexistent/nodefs-test/other.sock\n")
        cls.env.__enter__()
        env = cls.env
        for line in ("create db size=64M", "create pubd size=64M"):
            ok, e = env.ctl("volumes/ctl", line)
            assert ok, (line, e, env.fs.error("volumes"))
        cls.tgt = env.target("pubd")
        ok, e = env.ctl("volumes/pubd/ctl", "publish " + cls.tgt)
        assert ok, (e, env.fs.error("volumes/pubd"))

    @classmethod
    def tearDownClass(cls):
        cls.env.__exit__(None, None, None)

    def rejected(self, ctl, line, want_errno, words, vol=None):
        env = self.env
        before = env.snapshot(vol)
        before_other = env.snapshot("pubd" if vol != "pubd" else "db")
        ok, e = env.ctl(ctl, line)
        self.assertEqual((ok, e), (False, want_errno), "%s <- %r" % (ctl, line))
        text = env.fs.error(os.path.dirname(ctl))
        self.assertEqual(len(text.splitlines()), 1, text)
        self.assertTrue(any(w in text for w in words),
                        "%s after %r does not say why: %r" % (ctl, line, text))
        self.assertEqual(env.snapshot(vol), before, "%r changed something" % line)
        self.assertEqual(env.snapshot("pubd" if vol != "pubd" else "db"), before_other)

    def test_create_bad_input(self):
        cases = [
            ("create x plugin=nope", "EINVAL", ("nope", "plugin")),
            ("create x profile=nope", "EINVAL", ("nope", "profile")),
            ("create x size=banana", "EINVAL", ("banana", "size")),
            ("create x size=-1", "EINVAL", ("-1", "size")),
            ("create x size=12Q", "EINVAL", ("12Q", "size")),
            ("create x mode=telepathic", "EINVAL", ("telepathic", "mode")),
            ("create x profile=fast plugin=other", "EINVAL", ("profile fast",)),
            ("create db", "EEXIST", ("db", "exists")),
            ("create db size=1G profile=fast", "EEXIST", ("db", "exists")),
            ("import db vol-123", "EEXIST", ("db", "exists")),
            ("import y vol-1 plugin=nope", "EINVAL", ("nope", "plugin")),
        ]
        for line, e, words in cases:
            with self.subTest(line=line):
                self.rejected("volumes/ctl", line, e, words)

    def test_mkdir_taken_name(self):
        before = self.env.snapshot("db")
        with self.assertRaises(OSError) as cm:
            os.mkdir(self.env.fs.path("volumes", "db"))
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        self.assertEqual(self.env.snapshot("db"), before)

    def test_publish_bad_targets(self):
        env = self.env
        link = env.target("link")
        if not os.path.islink(link):
            os.symlink("/tmp", link)
        os.makedirs(env.target("real"), exist_ok=True)
        cases = [
            ("publish /tmp/elsewhere/db", "EPERM", ("outside", "allowed")),
            ("publish /", "EPERM", ("outside", "allowed")),
            ("publish relative/db", "EINVAL", ("absolute", "relative")),
            ("publish %s/../../etc" % env.pub, "EINVAL", ("..",)),
            ("publish %s//x" % env.pub, "EINVAL", ("normalized", "//")),
            ("publish %s/x" % link, "EINVAL", ("symlink",)),
            ("publish %s" % link, "EINVAL", ("symlink",)),
            ("publish %s" % self.tgt, "EBUSY", ("pubd",)),
            ("publish %s/db bogus" % env.pub, "EINVAL", ("bogus",)),
        ]
        for line, e, words in cases:
            with self.subTest(line=line):
                self.rejected("volumes/db/ctl", line, e, words, vol="db")
        self.assertFalse(os.path.exists("/tmp/elsewhere"))

    def test_state_conflicts(self):
        cases = [
            ("volumes/db/ctl", "unpublish", "EINVAL", ("not published",), "db"),
            ("volumes/pubd/ctl", "publish %s" % self.env.target("again"), "EBUSY",
             ("already published",), "pubd"),
            ("volumes/pubd/ctl", "unstage", "EBUSY", ("publish",), "pubd"),
            ("volumes/db/ctl", "expand 1M", "EINVAL", ("capacity",), "db"),
            ("volumes/db/ctl", "expand 64M", "EINVAL", ("capacity",), "db"),
            ("volumes/db/ctl", "expand lots", "EINVAL", ("lots",), "db"),
            ("volumes/db/ctl", "frobnicate", "EINVAL", ("frobnicate",), "db"),
        ]
        for ctl, line, e, words, vol in cases:
            with self.subTest(line=line):
                self.rejected(ctl, line, e, words, vol=vol)
        self.assertFalse(os.path.exists(self.env.target("again")))

    def test_bad_value_on_a_later_line(self):
        """A bad value on any line of a write is found before the first
        line runs: nothing is created, published or called (EINVAL), and
        the error file names the bad line. Before, `create a` ran (a
        CreateVolume) and the write returned a short count."""
        env = self.env
        before = env.snapshot()
        # one write(2) of both lines: /usr/bin/printf (bash's builtin
        # writes each line on its own)
        rc, err = env.sh("env printf 'create a size=1M\\ncreate b size=lots\\n' > volumes/ctl")
        self.assertNotEqual(rc, 0)
        self.assertIn("Invalid argument", err)
        self.assertIn("line 2 'create b size=lots'", env.fs.error("volumes"))
        self.assertEqual(env.snapshot(), before)
        self.assertNotIn("a", env.volumes())
        cases = [
            ("volumes/ctl", "create a size=1M\nimport b vol-1 mode=telepathic", None,
             "telepathic"),
            ("volumes/db/ctl", "publish %s\nexpand lots" % env.target("db"), "db", "lots"),
            ("volumes/db/ctl", "stage\npublish %s bogus" % env.target("db"), "db", "bogus"),
            ("volumes/db/ctl", "publish %s\npublish relative/x" % env.target("db"), "db",
             "relative"),
            ("volumes/pubd/ctl", "unpublish\nunpublish now", "pubd", "now"),
        ]
        for ctl, data, vol, word in cases:
            with self.subTest(data=data):
                self.rejected(ctl, data, "EINVAL", (word,), vol=vol)
                self.assertIn("line 2", env.fs.error(os.path.dirname(ctl)))
        self.assertTrue(nt.is_mounted(self.tgt))
        self.assertFalse(os.path.exists(env.target("db")) and nt.is_mounted(env.target("db")))

    def test_rmdir_published_ebusy(self):
        env = self.env
        before = env.snapshot("pubd")
        p = env.fs.sh("rmdir volumes/pubd")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("busy", p.stderr)
        self.assertIn("publish", env.fs.error("volumes"))
        self.assertEqual(env.snapshot("pubd"), before)
        self.assertTrue(nt.is_mounted(self.tgt))

    def test_unknown_volume(self):
        self.assertFalse(os.path.exists(self.env.fs.path("volumes", "ghost", "ctl")))
        with self.assertRaises(OSError) as cm:
            os.rmdir(self.env.fs.path("volumes", "ghost"))
        self.assertEqual(cm.exception.errno, errno.ENOENT)


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""CSI secrets end to end: nodefs-csi-local started with --secrets FILE
requires them, nodefs sends them from `secrets = FILE` (a profile's, a
[plugin]'s, or plugins/ctl `add ... secrets=FILE`). Run against the
built-in plugin only (volumes-required-secrets-local).

What it proves: a volume of a profile whose file holds the plugin's
secrets goes through create, publish, expand, unpublish and destroy; a
create without them fails with EACCES (the plugin's UNAUTHENTICATED),
names the missing key, never a value, and leaves no volume in nodefs or
the plugin; a file changed to a wrong value makes the next call fail the
same way and changes nothing, and the right one lets it through. A plugin
added with `add NAME ENDPOINT secrets=FILE` sends that file for its
volumes without a profile's, and keeps it after a restart of nodefs (its
record); add refuses a file others may read (EACCES naming the file and
its mode), a relative path (EINVAL) and a missing file (ENOENT), and adds
nothing then.
"""

import os
import shutil
import tempfile
import unittest

import nodefs_test as nt
import voltest as vt
from test_secrets import dir_text, tree_text

SECRET = "s3cr3t-PLUGH-2718"


class RequiredSecretsTest(unittest.TestCase):
    maxDiff = None
    def setUp(self):
        if not vt.LOCAL:
            self.skipTest("needs the built-in plugin (NODEFS_TEST_PLUGIN=local)")
        self.sdir = tempfile.mkdtemp(prefix="nodefs-reqsec-")
        self.addCleanup(shutil.rmtree, self.sdir, True)
        # what the plugin requires, and what nodefs sends
        self.required = self.write("plugin.secrets", "password=%s\n" % SECRET)
        self.sent = self.write("nodefs.secrets", "# the plugin's account\npassword=%s\n" % SECRET)

    def write(self, name, text, mode=0o600):
        path = os.path.join(self.sdir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def env(self):
        return vt.VolEnv(["--secrets", self.required],
                         extra="\n[profile sec]\nplugin = hostpath\nsecrets = %s\n" % self.sent)

    def assert_refused(self, env, where, line, key="password"):
        ok, e = env.ctl(where + "/ctl", line)
        self.assertEqual((ok, e), (False, "EACCES"), env.fs.error(where))
        err = env.fs.error(where)
        self.assertIn("UNAUTHENTICATED", err)
        self.assertIn("secret '%s'" % key, err)
        self.assertNotIn(SECRET, err)

    def test_a_profile_sends_them_and_none_is_refused(self):
        with self.env() as env:
            tgt = env.target("v")
            self.assertEqual(env.ctl("volumes/ctl", "create v size=8M profile=sec"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "publish " + tgt), (True, "OK"))
            with open(os.path.join(tgt, "f"), "w") as f:
                f.write("data\n")
            self.assertEqual(env.ctl("volumes/v/ctl", "expand 16M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "unpublish"), (True, "OK"))
            # without a secrets file: the plugin refuses, nothing is left
            self.assert_refused(env, "volumes", "create plain size=8M")
            self.assertNotIn("plain", env.volumes())
            self.assertEqual(list(env.plugin.state()), [env.vol_id("v")])
            # a wrong value: the next call is refused and changes nothing
            self.write("nodefs.secrets", "password=wrong\n")
            before = env.snapshot("v")
            self.assert_refused(env, "volumes/v", "publish " + tgt)
            after = env.snapshot("v")
            self.assertEqual((after["vstate"], after["target"], after["plugin_state"],
                              after["mounts"]),
                             (before["vstate"], before["target"], before["plugin_state"],
                              before["mounts"]))
            self.assertEqual(env.state("v"), "VOL_READY")
            # the right one again: through
            self.write("nodefs.secrets", "password=%s\n" % SECRET)
            self.assertEqual(env.ctl("volumes/v/ctl", "publish " + tgt), (True, "OK"))
            with open(os.path.join(tgt, "f")) as f:
                self.assertEqual(f.read(), "data\n")
            self.assertEqual(env.ctl("volumes/v/ctl", "unpublish"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            for what, text in (("log", env.fs.log().encode()),
                               ("plugin log", env.plugin.log().encode()),
                               ("tree", tree_text(env.fs.mnt)),
                               ("state dir", dir_text(env.state_dir))):
                self.assertNotIn(SECRET.encode(), text, what)

    def test_added_with_secrets(self):
        with self.env() as env:
            ep = env.plugin.endpoint
            # refused: nothing added
            loose = self.write("loose.secrets", "password=%s\n" % SECRET, 0o644)
            for opt, errname, word in (("secrets=" + loose, "EACCES", "0644"),
                                       ("secrets=rel/x", "EINVAL", "absolute"),
                                       ("secrets=%s/none" % self.sdir, "ENOENT", "none")):
                ok, e = env.ctl("plugins/ctl", "add sec2 %s %s" % (ep, opt))
                self.assertEqual((ok, e), (False, errname), env.fs.error("plugins"))
                self.assertIn(word, env.fs.error("plugins"))
                self.assertNotIn(SECRET, env.fs.error("plugins"))
                self.assertNotIn("sec2", env.fs.listdir("plugins"))
            # the same plugin by another name, with the secrets nodefs sends
            self.assertEqual(env.ctl("plugins/ctl", "add sec2 %s secrets=%s" % (ep, self.sent)),
                             (True, "OK"))
            self.assertTrue(nt.wait_until(
                lambda: env.fs.read("plugins", "sec2", "health").startswith("READY"), 10))
            self.assertEqual(env.ctl("volumes/ctl", "create a size=8M plugin=sec2"), (True, "OK"))
            # the default plugin has none
            self.assert_refused(env, "volumes", "create b size=8M")
            # after a restart: back, with its secrets
            env.fs.stop()
            env.fs.start()
            env.wait_plugin_ready()
            self.assertTrue(nt.wait_until(
                lambda: env.fs.read("plugins", "sec2", "health").startswith("READY"), 10))
            tgt = env.target("a")
            self.assertEqual(env.ctl("volumes/a/ctl", "publish " + tgt), (True, "OK"))
            self.assertEqual(env.ctl("volumes/a/ctl", "unpublish"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/a/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.ctl("plugins/ctl", "remove sec2"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertNotIn(SECRET, env.fs.log())


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

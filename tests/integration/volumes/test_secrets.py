# SPDX-License-Identifier: LGPL-2.1-or-later
"""CSI secrets from a profile's `secrets = FILE`, against the real plugin
(which keeps what each call received in BASE/secrets.json).

What it proves: a volume made with the profile has the file's map sent in
every call of its life that has a secrets field (CreateVolume,
ControllerPublishVolume, NodeStageVolume, NodePublishVolume,
ControllerExpandVolume, NodeExpandVolume, ControllerUnpublishVolume,
DeleteVolume), none in the calls that have none, and a volume without it
sends none; a changed file is used by the next call; the secret's value
appears nowhere in the mounted tree (every file readable), the state dir,
the daemon's log or the events; a file others may read makes the command
fail with EACCES naming the file, never its content.
"""

import json
import os
import shutil
import tempfile
import unittest

import nodefs_test as nt
import voltest as vt

SECRET = "s3cr3t-XYZZY-4711"
WITH_SECRETS = ["CreateVolume", "ControllerPublishVolume", "NodeStageVolume",
                "NodePublishVolume", "ControllerExpandVolume", "NodeExpandVolume",
                "ControllerUnpublishVolume", "DeleteVolume"]


def received(env):
    try:
        with open(os.path.join(env.plugin.base, "secrets.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def tree_text(root):
    """Every readable file under the mount, but the streams and ctl files."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            if f in ("events", "wait", "ctl"):
                continue
            try:
                fd = os.open(os.path.join(d, f), os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                while True:
                    b = os.read(fd, 1 << 16)
                    if not b:
                        break
                    out.append(b)
            except OSError:
                pass
            finally:
                os.close(fd)
    return b"".join(out)


def dir_text(root):
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    out.append(fh.read())
    return b"".join(out)


class SecretsTest(unittest.TestCase):
    def setUp(self):
        self.sdir = tempfile.mkdtemp(prefix="nodefs-secrets-")
        self.sfile = os.path.join(self.sdir, "hostpath.secrets")
        self.write_secrets("user=admin\npassword=%s\n" % SECRET)

    def tearDown(self):
        shutil.rmtree(self.sdir, ignore_errors=True)

    def write_secrets(self, text, mode=0o600):
        with open(self.sfile, "w") as f:
            f.write("# the plugin's account\n" + text)
        os.chmod(self.sfile, mode)

    def profile(self):
        return "\n[profile sec]\nplugin = hostpath\nsecrets = %s\n" % self.sfile

    def test_secrets_reach_every_call_and_nothing_else(self):
        with vt.VolEnv(extra=self.profile()) as env:
            evfd = env.open_events()
            tgt = env.target("v")
            want = {"user": "admin", "password": SECRET}
            self.assertEqual(env.ctl("volumes/ctl", "create v size=8M profile=sec"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "publish " + tgt), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "expand 16M"), (True, "OK"))
            # what every file shows, while the volume is published
            self.assertNotIn(SECRET.encode(), tree_text(env.fs.mnt))
            self.assertEqual(env.ctl("volumes/v/ctl", "unpublish"), (True, "OK"))
            # the file is read at each call: the next ones see the change
            self.write_secrets("user=admin\npassword=%s-2\n" % SECRET)
            self.assertEqual(env.ctl("volumes/v/ctl", "destroy"), (True, "OK"))
            got = received(env)
            for rpc in WITH_SECRETS:
                self.assertIn(rpc, got, got.keys())
            for rpc in WITH_SECRETS[:-2]:
                self.assertEqual(got[rpc], want, rpc)
            self.assertEqual(got["DeleteVolume"]["password"], SECRET + "-2")
            for rpc in ("NodeUnpublishVolume", "NodeUnstageVolume", "NodeGetVolumeStats",
                        "GetCapacity", "ListVolumes", "Probe"):
                self.assertNotIn(rpc, got)
            # a volume without the profile sends none
            os.unlink(os.path.join(env.plugin.base, "secrets.json"))
            self.assertEqual(env.ctl("volumes/ctl", "create plain size=8M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/plain/ctl", "destroy"), (True, "OK"))
            self.assertEqual(received(env), {})
            # nowhere in nodefs's own words
            events = b"".join(json.dumps(e).encode() for e in env.drain_events(evfd))
            os.close(evfd)
            self.assertIn(b'"v"', events)
            for what, text in (("tree", tree_text(env.fs.mnt)),
                               ("state dir", dir_text(env.state_dir)),
                               ("log", env.fs.log().encode()), ("events", events)):
                self.assertNotIn(SECRET.encode(), text, what)

    def test_a_file_others_may_read_is_refused(self):
        with vt.VolEnv(extra=self.profile()) as env:
            os.chmod(self.sfile, 0o644)
            ok, e = env.ctl("volumes/ctl", "create v size=8M profile=sec")
            self.assertEqual((ok, e), (False, "EACCES"), env.fs.error("volumes"))
            err = env.fs.error("volumes")
            self.assertIn(self.sfile, err)
            self.assertIn("0644", err)
            self.assertNotIn(SECRET, err + env.fs.log())
            self.assertNotIn("v", env.volumes())
            self.assertEqual(env.plugin.state(), {})


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

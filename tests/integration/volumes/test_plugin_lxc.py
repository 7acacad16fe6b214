# SPDX-License-Identifier: LGPL-2.1-or-later
"""A CSI plugin nodefs runs as an LXC container ([plugin] runtime = lxc,
image = busybox: the template), the built nodefs-csi-local run from the
host's build dir (bind-mounted in; the busybox template binds the host's
/lib, /lib64 and /usr/lib read-only, so its libraries are there). Exits 77
without the lxc tools and the busybox template.

What it proves: the container carries the plugin role in its nodefs.json
and containers/ does not show it; its node plugin mounts show on the host
(the publish and staging roots shared with the host's, not slaves: liblxc's
own "rshared" leaves them slaves); a volume is created, published, written
on the host and read back from the plugin's base dir, unpublished and
destroyed; the plugin killed (SIGKILL to its init from the host) is seen,
its container removed and a new one started, counted in process; after a
kill -9 of nodefs the restarted daemon adopts the running container (the
same pid, one container, not two); a stop of nodefs removes it.
"""

import json
import os
import signal
import subprocess
import sys
import unittest

import nodefs_test as nt
import plugincontainer as pc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "containers"))
import ctest  # noqa: E402

BIN = os.environ.get("CSI_LOCAL_BIN", "")


class Env(pc.Env):
    """The plugin in an LXC container of an lxcpath in the temp dir;
    leaving stops and destroys what is there."""
    dirs = ("pub", "base", "sock", "lxc")

    def config(self):
        return """[nodefs]
allowed_targets = {t}/pub
csi_timeout = 10s
retry_backoff = 200ms
retry_max = 2s
reconcile_interval = 0

[plugin loc]
endpoint = unix://{t}/sock/csi.sock
runtime = lxc
image = busybox
command = {bin} --base-dir {t}/base --node-id pl-node
mounts = {t}/base {bindir}

[plugin ext]
endpoint = unix://{t}/none.sock
default = yes

[runtime lxc]
lxcpath = {t}/lxc
template_dir = {tdir}
""".format(t=self.tmp, bin=BIN, bindir=os.path.dirname(BIN), tdir=ctest.lxc_template_dir())

    def containers(self):
        """The lxcpath's containers (their directories)."""
        d = os.path.join(self.tmp, "lxc")
        return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))

    def meta(self, name):
        with open(os.path.join(self.tmp, "lxc", name, "nodefs.json")) as f:
            return json.load(f)

    def remove_containers(self):
        lxcpath = os.path.join(self.tmp, "lxc")
        for n in self.containers():
            subprocess.run(["lxc-stop", "-k", "-P", lxcpath, "-n", n],
                           capture_output=True, timeout=30)
            subprocess.run(["lxc-destroy", "-P", lxcpath, "-n", n],
                           capture_output=True, timeout=30)


class PluginLxcTest(unittest.TestCase):
    def test_run_publish_kill_restart_adopt(self):
        with Env() as env:
            env.wait_ready()
            proc = env.process()
            cid = proc["container"]
            self.assertEqual((proc["runtime"], proc["image"], proc["restarts"]),
                             ("lxc", "busybox", "0"), proc)
            self.assertEqual(env.containers(), [cid], "one container")
            self.assertEqual(env.meta(cid).get("io.nodefs.role"), "plugin")
            self.assertEqual(sorted(env.fs.listdir("containers")), ["ctl", "error"])

            self.assertEqual(env.ctl("volumes/ctl", "create v plugin=loc size=4M"), (True, "OK"))
            tgt = os.path.join(env.tmp, "pub", "v")
            self.assertEqual(env.ctl("volumes/v/ctl", "publish " + tgt), (True, "OK"),
                             env.fs.error("volumes/v"))
            self.assertTrue(nt.is_mounted(tgt), "the plugin's mount shows on the host")
            with open(os.path.join(tgt, "data"), "w") as f:
                f.write("kept")
            found = [os.path.join(r, "data") for r, _, fs in os.walk(os.path.join(env.tmp, "base"))
                     if "data" in fs]
            self.assertEqual(len(found), 1, "written into the volume's backing")

            # its init killed from the host: seen, removed, started again
            os.kill(int(proc["pid"]), signal.SIGKILL)
            self.assertTrue(nt.wait_until(lambda: env.process()["restarts"] == "1",
                                          nt.scaled(20)), env.process())
            env.wait_ready()
            proc = env.process()
            self.assertEqual(proc["terminations"], "1", proc)
            self.assertTrue(proc["last_exit"].startswith("container exited"), proc)
            self.assertEqual(env.containers(), [proc["container"]], "one container")
            pid2 = proc["pid"]

            # kill -9 of nodefs: the running container is adopted
            env.fs.kill9()
            env.fs.start()
            env.wait_ready()
            proc = env.process()
            self.assertEqual((proc["pid"], proc["adopted"]), (pid2, "yes"), proc)
            self.assertEqual(env.containers(), [proc["container"]], "one container, not two")
            self.assertEqual(env.ctl("volumes/v/ctl", "unpublish"), (True, "OK"),
                             env.fs.error("volumes/v"))
            self.assertFalse(nt.is_mounted(tgt))
            self.assertEqual(env.ctl("volumes/v/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.fs.stop(), [])
            self.assertEqual(env.containers(), [], "a stop removes it")


if __name__ == "__main__":
    nt.main("mount", "lxc")

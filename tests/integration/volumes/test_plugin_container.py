# SPDX-License-Identifier: LGPL-2.1-or-later
"""A CSI plugin nodefs runs as a Docker container ([plugin] runtime =
docker, image =), on the run's dockerd (tests/fixtures/dockerd.sh; exit 77
when NODEFS_TEST_DOCKER_HOST is unset), with the built-in plugin as the
image: a rootfs holding the built nodefs-csi-local, the shared libraries
ldd names and the loader, made into an image by `docker import` (the
shipped examples/scripts/csi-local-image.sh, so the example stays true).

What it proves: nodefs makes and starts the container through its runtime
(CSI_ENDPOINT set, the socket's directory, the plugin's base dir and the
publish and staging roots bind-mounted, rshared, privileged), carrying
io.nodefs.role=plugin and this instance's id, and containers/ does not
show it; a volume is created and published through it and data written
there is read back on the host; the container killed (SIGKILL through the
engine) is seen to exit with its status, removed, and a new one started,
counted in process and metrics; after a kill -9 of nodefs the
restarted daemon adopts the running container (the same id, one
container, not two); a reload whose config drops the plugin removes its
container, and so does a stop of nodefs. A missing image: health DOWN with
the engine's word, nodefs serves and stops at once.
"""

import json
import os
import signal
import subprocess
import time
import unittest

import nodefs_test as nt
import plugincontainer as pc

HOST = os.environ.get("NODEFS_TEST_DOCKER_HOST", "")
BIN = os.environ.get("CSI_LOCAL_BIN", "")
IMAGE_SCRIPT = os.path.join(nt.NODEFS_SRC, "examples", "scripts", "csi-local-image.sh")


def docker(*args, check=False, stdin=None):
    return subprocess.run(["docker", *args], env=dict(os.environ, DOCKER_HOST=HOST),
                          capture_output=True, text=True, timeout=120, check=check,
                          input=stdin)


def make_image(tag):
    """The image of the built plugin, made by the shipped script
    (examples/scripts/csi-local-image.sh: the binary, the libraries ldd
    names and the loader, by docker import)."""
    p = subprocess.run([IMAGE_SCRIPT, BIN, tag], env=dict(os.environ, DOCKER_HOST=HOST),
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("%s: %s" % (IMAGE_SCRIPT, p.stderr))


TAG = "nodefs-test/csi-local:%d" % os.getpid()
_made = []


def image():
    """The image of this test run: made at first use, removed at the end."""
    if not _made:
        make_image(TAG)
        _made.append(TAG)
    return TAG


def tearDownModule():
    for tag in _made:
        docker("rmi", "-f", tag)


class Env(pc.Env):
    """The plugin in a container of the image (made at first use; it goes at
    the end of the run, tearDownModule); leaving removes the containers of
    its instance."""
    prefix = "nodefs-pc-"

    def __init__(self, image=None, configured=True, reconcile="0"):
        self.image = image
        self.reconcile = reconcile
        self.configured = configured    # False: [plugin loc] left to plugins/ctl

    def prepare(self):
        self.tag = self.image or TAG
        if not self.image:
            image()

    def add_line(self, extra=""):
        """The plugins/ctl line that adds what [plugin loc] says."""
        return ("add loc unix://{t}/sock/csi.sock runtime=docker image={img} "
                "command='/nodefs-csi-local --base-dir {t}/base --node-id pc-node' "
                "mounts={t}/base {x}").format(t=self.tmp, img=self.tag, x=extra)

    def config(self):
        text = self._config()
        if not self.configured:
            text = text[:text.index("[plugin loc]")] + text[text.index("[plugin ext]"):]
        return text

    def _config(self):
        return """[nodefs]
allowed_targets = {t}/pub
csi_timeout = 10s
retry_backoff = 200ms
retry_max = 2s
reconcile_interval = {rec}

[plugin loc]
endpoint = unix://{t}/sock/csi.sock
runtime = docker
image = {img}
command = /nodefs-csi-local --base-dir {t}/base --node-id pc-node
mounts = {t}/base

[plugin ext]
endpoint = unix://{t}/none.sock
default = yes

[runtime docker]
endpoint = {host}
""".format(t=self.tmp, img=self.tag, host=HOST, rec=self.reconcile)

    def instance(self):
        with open(os.path.join(self.state_dir, "instance-id")) as f:
            return f.read().strip()

    def containers(self, all_=True):
        """Ids of the engine's containers of this instance."""
        args = ["ps", "-q", "--no-trunc", "--filter", "label=io.nodefs.instance=" + self.instance()]
        return docker(*(args + (["-a"] if all_ else []))).stdout.split()

    def remove_containers(self):
        for cid in self.containers():
            docker("rm", "-f", cid)


class PluginContainerTest(unittest.TestCase):
    def test_run_kill_restart_adopt(self):
        with Env() as env:
            env.wait_ready()
            proc = env.process()
            cid = proc["container"]
            self.assertEqual((proc["runtime"], proc["image"], proc["restarts"]),
                             ("docker", env.tag, "0"), proc)
            self.assertEqual(env.containers(), [cid], "one container")
            info = json.loads(docker("inspect", cid, check=True).stdout)[0]
            labels = info["Config"]["Labels"]
            self.assertEqual(labels.get("io.nodefs.role"), "plugin")
            self.assertEqual(labels.get("io.nodefs.instance"), env.instance())
            # a node plugin may mount; privileged only when asked (docker
            # 20.10 cannot start one where the host's bounding set lacks a
            # capability, as here: cap_sys_resource)
            self.assertIn("SYS_ADMIN", info["HostConfig"]["CapAdd"])
            self.assertFalse(info["HostConfig"]["Privileged"])
            self.assertIn("CSI_ENDPOINT=unix://%s/sock/csi.sock" % env.tmp, info["Config"]["Env"])
            binds = info["HostConfig"]["Binds"]
            self.assertIn("%s/pub:%s/pub:rw,rshared" % (env.tmp, env.tmp), binds)
            self.assertIn("%s/staging:%s/staging:rw,rshared" % (env.state_dir, env.state_dir),
                          binds)
            self.assertEqual(int(proc["pid"]), info["State"]["Pid"])
            # not a user's container: containers/ never shows it
            self.assertEqual(sorted(env.fs.listdir("containers")), ["ctl", "error"])

            # a volume through it, published on the host
            self.assertEqual(env.ctl("volumes/ctl", "create v plugin=loc size=4M"), (True, "OK"))
            tgt = os.path.join(env.tmp, "pub", "v")
            self.assertEqual(env.ctl("volumes/v/ctl", "publish " + tgt), (True, "OK"),
                             env.fs.error("volumes/v"))
            self.assertTrue(nt.is_mounted(tgt))
            with open(os.path.join(tgt, "data"), "w") as f:
                f.write("kept")

            # killed: its exit seen, it is removed and started again
            docker("kill", cid, check=True)
            self.assertTrue(nt.wait_until(
                lambda: env.process()["container"] not in ("none", cid), nt.scaled(20)),
                env.process())
            env.wait_ready()
            proc = env.process()
            self.assertEqual(proc["restarts"], "1", proc)
            self.assertEqual(proc["terminations"], "1", proc)
            self.assertEqual(proc["last_exit"], "container exited with status 137")
            self.assertEqual(env.metric("nodefs_csi_plugin_terminations_total"), 1)
            self.assertEqual(env.metric("nodefs_csi_plugin_restarts_total"), 1)
            cid2 = proc["container"]
            self.assertEqual(env.containers(), [cid2], "the dead one is removed")
            with open(os.path.join(tgt, "data")) as f:
                self.assertEqual(f.read(), "kept")

            # kill -9 of nodefs: the running container is adopted
            env.fs.kill9()
            env.fs.start()
            env.wait_ready()
            proc = env.process()
            self.assertEqual((proc["container"], proc["adopted"]), (cid2, "yes"), proc)
            self.assertEqual(env.containers(), [cid2], "one container, not two")
            self.assertEqual(env.ctl("volumes/v/ctl", "unpublish"), (True, "OK"),
                             env.fs.error("volumes/v"))
            self.assertFalse(nt.is_mounted(tgt))
            self.assertEqual(env.ctl("volumes/v/ctl", "destroy"), (True, "OK"))

            # a reload whose config no longer has it removes it
            cfg = env.config()
            with open(env.fs.config_path, "w") as f:
                f.write(cfg[:cfg.index("[plugin loc]")] + cfg[cfg.index("[plugin ext]"):])
            env.fs.proc.send_signal(signal.SIGHUP)
            self.assertTrue(nt.wait_until(lambda: not env.containers(), 20),
                            "%r\nlog:\n%s" % (env.containers(), env.fs.log()[-3000:]))
            self.assertTrue(nt.wait_until(
                lambda: "loc" not in env.fs.listdir("plugins"), nt.scaled(10)))

            # a stop of nodefs removes it: started again from the config
            with open(env.fs.config_path, "w") as f:
                f.write(cfg)
            env.fs.restart()
            env.wait_ready()
            self.assertEqual(len(env.containers()), 1)
            self.assertEqual(env.fs.stop(), [])
            self.assertEqual(env.containers(), [])

    def test_missing_image(self):
        # the engine's refusal is the plugin's health; nodefs serves, keeps
        # trying, and stops at once
        with Env(image="nodefs-test/no-such-image:%d" % os.getpid()) as env:
            self.assertTrue(nt.wait_until(
                lambda: "no-such-image" in env.fs.read("plugins", "loc", "health"),
                nt.scaled(20)), env.fs.read("plugins", "loc", "health"))
            health = env.fs.read("plugins", "loc", "health")
            self.assertTrue(health.startswith("DOWN"), health)
            self.assertEqual(env.process()["container"], "none")
            t0 = time.monotonic()
            self.assertEqual(env.fs.stop(), [])
            self.assertLess(time.monotonic() - t0, nt.scaled(10))
            self.assertEqual(env.containers(), [])

    def test_added_at_run_time_kept_running(self):
        # plugins/ctl add runtime=...: checkpointed, and with keep_running
        # its container outlives a stop and is adopted by the next start;
        # remove ends it and its container goes; reconciliation never lists it
        with Env(configured=False, reconcile="1s") as env:
            self.assertEqual(env.ctl("plugins/ctl", env.add_line("keep_running=yes")),
                             (True, "OK"), env.fs.error("plugins"))
            env.wait_ready()
            # reconciliation lists no container of this instance: the
            # plugin's is not a user's (no orphan, nothing taken in)
            rec = lambda: nt.parse_kv(env.fs.read("runtimes", "docker", "reconcile"))
            self.assertTrue(nt.wait_until(lambda: rec().get("last_run") not in ("never", None),
                                          nt.scaled(10)), rec())
            self.assertEqual((rec()["listed"], rec()["drift"]), ("0", "0"), rec())
            cid = env.process()["container"]
            self.assertEqual(env.process()["keep_running"], "yes")
            self.assertEqual(env.fs.stop(), [])
            self.assertEqual(env.containers(all_=False), [cid], "left running")
            env.fs.start()
            env.wait_ready()
            proc = env.process()
            self.assertEqual((proc["container"], proc["adopted"], proc["image"]),
                             (cid, "yes", env.tag), proc)
            self.assertEqual(env.containers(), [cid], "one container, not two")
            self.assertEqual(env.ctl("plugins/ctl", "remove loc"), (True, "OK"))
            self.assertTrue(nt.wait_until(lambda: not env.containers(), 20),
                            env.containers())
            # bad lines change nothing
            for line, want in (("add x unix://%s/x.sock runtime=podman image=i" % env.tmp, "EINVAL"),
                               ("add x unix://%s/x.sock runtime=docker" % env.tmp, "EINVAL"),
                               ("add x unix://%s/x.sock mounts=/a" % env.tmp, "EINVAL"),
                               ("add x unix://%s/x.sock runtime=docker image=i mounts=a"
                                % env.tmp, "EINVAL")):
                self.assertEqual(env.ctl("plugins/ctl", line), (False, want), line)
            self.assertEqual(sorted(env.fs.listdir("plugins")), ["ctl", "error", "ext"])


if __name__ == "__main__":
    nt.main("mount", "docker")

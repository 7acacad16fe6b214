# SPDX-License-Identifier: LGPL-2.1-or-later
"""Operations, O_NONBLOCK writes, ordering, import, discovered volumes,
profiles and capacity, against the real plugin.

What it proves:
- A ctl write on a descriptor opened O_NONBLOCK returns at once (before
  the slow plugin call ends); reading that descriptor gives the operation
  id, whose operations/ID/ is PENDING with the command, type and object,
  and the volume shows the transient state. A second O_NONBLOCK command on
  that busy volume fails with EBUSY and changes nothing; a blocking one
  waits its turn and runs after the first (calls of one volume run
  strictly in order). The operation then ends FINISHED with a finish time.
- operations/ lists operations oldest first and keeps operations_keep
  ended ones (their checkpoints too): the oldest go first.
- A volume made behind nodefs's back (CreateVolume through grpcio) shows in
  plugins/NAME/volumes as discovered; `import NAME ID` adopts it after
  ValidateVolumeCapabilities (capacity from ListVolumes), it is then listed
  as known, publishes, and its data is there. An unknown id fails with
  ENOENT and leaves nothing; an id already imported fails with EEXIST.
- Profiles: the profile files show their settings, plugins/NAME/capacity
  has one GetCapacity line per profile of the plugin, and a volume made
  with a profile carries its parameters to the plugin.
"""

import errno
import json
import os
import sys
import time
import unittest

import nodefs_test as nt
import voltest as vt


def csi_stub(env):
    """A real CSI controller client on the plugin's socket (grpcio)."""
    import grpc
    sys.path.insert(0, os.path.dirname(vt.PLUGIN_PY))
    try:
        import plugin as plugin_mod
    finally:
        sys.path.pop(0)
    pb, pbg = plugin_mod.load_stubs(os.path.join(nt.NODEFS_SRC, "csi", "csi.proto"))
    ch = grpc.insecure_channel("unix://" + env.plugin.sock)
    return pb, pbg.ControllerStub(ch), ch


class OpsTest(unittest.TestCase):
    def test_nonblock_and_ordering(self):
        with vt.VolEnv(["--delay", "NodePublishVolume=1.5"]) as env:
            tgt = env.target("db")
            ok, e = env.ctl("volumes/ctl", "create db size=16M")
            self.assertTrue(ok, e)
            fd = os.open(env.fs.path("volumes", "db", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                t0 = time.monotonic()
                n = os.write(fd, ("publish %s\n" % tgt).encode())
                took = time.monotonic() - t0
                # the reply is served from offset 0; the write moved the
                # descriptor's offset past it
                oid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            self.assertEqual(n, len("publish %s\n" % tgt))
            self.assertLess(took, nt.scaled(1.0))
            self.assertTrue(oid and oid in env.ops(), oid)
            op = env.op(oid)
            self.assertEqual((op["state"], op["type"], op["object"], op["command"]),
                             ("PENDING", "volume.publish", "volumes/db", "publish " + tgt))
            self.assertEqual(op["finished"], "")
            self.assertIn(env.state("db"),
                          ("CONTROLLER_PUBLISH", "NODE_READY", "NODE_STAGE", "VOL_READY",
                           "NODE_PUBLISH"))
            # a second nonblock command on the busy volume: EBUSY, nothing queued
            before = env.ops()
            ok, e = env.ctl("volumes/db/ctl", "unpublish", os.O_NONBLOCK)
            self.assertEqual((ok, e), (False, "EBUSY"))
            self.assertIn("in flight", env.fs.error("volumes/db"))
            self.assertEqual([o for o in env.ops() if o not in before
                              and env.op(o)["state"] != "DROPPED"], [])
            # a blocking one waits its turn: it runs after the publish
            ok, e = env.ctl("volumes/db/ctl", "unpublish")
            self.assertTrue(ok, env.fs.error("volumes/db"))
            self.assertEqual(env.op(oid)["state"], "FINISHED")
            self.assertTrue(env.op(oid)["finished"])
            self.assertEqual(env.state("db"), "VOL_READY")
            self.assertFalse(nt.is_mounted(tgt))
            uid, uop = env.last_op("volumes/db")
            self.assertEqual((uop["type"], uop["state"]), ("volume.unpublish", "FINISHED"))
            self.assertGreater(uid, oid)
            self.assertLessEqual(env.op(oid)["finished"], uop["finished"])

            # a nonblock create answers with its id; the volume follows
            fd = os.open(env.fs.path("volumes", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, b"create v2 size=16M\n")
                cid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            self.assertEqual(env.op(cid)["type"], "volume.create")
            self.assertTrue(nt.wait_until(lambda: env.op(cid)["state"] == "FINISHED", 10))
            self.assertEqual(env.state("v2"), "CREATED")

    def test_operations_oldest_first_and_kept(self):
        with vt.VolEnv(extra_nodefs="operations_keep = 5") as env:
            for i in range(4):
                ok, e = env.ctl("volumes/ctl", "create v%d size=1M" % i)
                self.assertTrue(ok, e)
                ok, e = env.ctl("volumes/v%d/ctl" % i, "destroy")
                self.assertTrue(ok, e)
            ok, e = env.ctl("volumes/ctl", "create v9 size=banana")   # rejected: no operation
            self.assertFalse(ok)
            ids = env.ops()
            self.assertEqual(len(ids), 5, ids)
            self.assertEqual(ids, sorted(ids))
            got = [(env.op(o)["type"], env.op(o)["object"]) for o in ids]
            self.assertEqual(got, [("volume.destroy", "volumes/v1"),
                                   ("volume.create", "volumes/v2"),
                                   ("volume.destroy", "volumes/v2"),
                                   ("volume.create", "volumes/v3"),
                                   ("volume.destroy", "volumes/v3")])
            created = [env.op(o)["created"] for o in ids]
            self.assertEqual(created, sorted(created))
            on_disk = sorted(f[:-5] for f in os.listdir(os.path.join(env.state_dir, "operations"))
                             if f.endswith(".json"))
            self.assertEqual(on_disk, ids)
            p = env.fs.sh("ls operations | head -1")
            self.assertEqual(p.stdout.strip(), ids[0])
            # after a restart the recovered operations are trimmed the same
            # way: the next two that end push out the two oldest
            env.fs.stop()
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(env.ops(), ids)
            ok, e = env.ctl("volumes/ctl", "create v4 size=1M")
            self.assertTrue(ok, e)
            ok, e = env.ctl("volumes/v4/ctl", "destroy")
            self.assertTrue(ok, e)
            after = env.ops()
            self.assertEqual(len(after), 5, after)
            self.assertEqual(after[:3], ids[2:])
            self.assertEqual([env.op(o)["object"] for o in after[3:]],
                             ["volumes/v4", "volumes/v4"])
            on_disk = sorted(f[:-5] for f in os.listdir(os.path.join(env.state_dir, "operations"))
                             if f.endswith(".json"))
            self.assertEqual(on_disk, after)
            # a trimmed record's removal is not flushed to disk (store_drop):
            # one that a crash brings back is the oldest at recovery and is
            # the first trimmed again
            env.fs.stop()
            opdir = os.path.join(env.state_dir, "operations")
            with open(os.path.join(opdir, after[0] + ".json")) as f:
                rec = json.load(f)
            rec["id"] = ids[0]
            back = os.path.join(opdir, ids[0] + ".json")
            with open(back, "w") as f:
                json.dump(rec, f)
            old = os.stat(os.path.join(opdir, after[0] + ".json")).st_mtime - 60
            os.utime(back, (old, old))
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(env.ops(), [ids[0]] + after)
            ok, e = env.ctl("volumes/ctl", "create v5 size=1M")
            self.assertTrue(ok, e)
            final = env.ops()
            self.assertEqual(final, after[1:] + final[-1:], final)
            self.assertFalse(os.path.exists(back))
            ok, e = env.ctl("volumes/v5/ctl", "destroy")
            self.assertTrue(ok, e)

    def test_import_and_discovered(self):
        with vt.VolEnv() as env:
            pb, ctl, ch = csi_stub(env)
            self.addCleanup(ch.close)
            cap = pb.VolumeCapability(
                mount=pb.VolumeCapability.MountVolume(),
                access_mode=pb.VolumeCapability.AccessMode(
                    mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
            resp = ctl.CreateVolume(pb.CreateVolumeRequest(
                name="made-elsewhere", volume_capabilities=[cap],
                capacity_range=pb.CapacityRange(required_bytes=5 << 20)), timeout=10)
            vid = resp.volume.volume_id
            with open(os.path.join(env.plugin.volume_dir(vid), "old-data"), "w") as f:
                f.write("from before\n")

            def listed(word):
                text = env.fs.read("plugins", "hostpath", "volumes")
                return any(l.split()[:1] == [vid] and word in l.split() for l in text.splitlines())
            self.assertTrue(nt.wait_until(lambda: listed("discovered"), 10),
                            env.fs.read("plugins", "hostpath", "volumes"))

            # unknown id: ENOENT, nothing left, and no more than one call
            before = env.volume_calls()
            ok, e = env.ctl("volumes/ctl", "import ghost vol-does-not-exist")
            self.assertEqual((ok, e), (False, "ENOENT"))
            self.assertIn("NOT_FOUND", env.fs.error("volumes"))
            self.assertNotIn("ghost", env.volumes())
            self.assertEqual(env.volume_calls()["ValidateVolumeCapabilities"],
                             before["ValidateVolumeCapabilities"] + 1)

            rc, err = env.sh("echo 'import legacy %s' > volumes/ctl" % vid)
            self.assertEqual(rc, 0, err)
            self.assertEqual(env.state("legacy"), "CREATED")
            self.assertEqual(env.vol_id("legacy"), vid)
            self.assertEqual(env.vread("legacy", "capacity"), str(5 << 20))
            self.assertTrue(nt.wait_until(lambda: listed("known"), 10))
            self.assertIn("legacy", env.fs.read("plugins", "hostpath", "volumes"))
            _, op = env.last_op("volumes/legacy")
            self.assertEqual((op["type"], op["state"]), ("volume.import", "FINISHED"))

            # the same id twice: EEXIST, no call
            before = env.volume_calls()
            ok, e = env.ctl("volumes/ctl", "import again %s" % vid)
            self.assertEqual((ok, e), (False, "EEXIST"))
            self.assertIn("legacy", env.fs.error("volumes"))
            self.assertEqual(env.volume_calls(), before)

            tgt = env.target("legacy")
            ok, e = env.ctl("volumes/legacy/ctl", "publish " + tgt)
            self.assertTrue(ok, env.fs.error("volumes/legacy"))
            with open(os.path.join(tgt, "old-data")) as f:
                self.assertEqual(f.read(), "from before\n")
            ok, e = env.ctl("volumes/legacy/ctl", "destroy")
            self.assertTrue(ok, e)
            self.assertNotIn(vid, env.plugin.state())
            self.assertTrue(nt.wait_until(lambda: not listed("known") and not listed("discovered"),
                                          10))

    def test_volumes_fetched_while_recovering_are_known(self):
        """plugins/NAME/volumes tells each of nodefs's volumes known by what
        nodefs holds when it is read: after a restart whose recovery is slow
        (NODEFS_TEST_SLOW_RECOVERY), the plugin is READY and its list
        fetched before the volumes are loaded, and they were listed as
        discovered until the next fetch (never, reconcile_interval = 0)."""
        with vt.VolEnv() as env:
            for k in range(3):
                self.assertEqual(env.ctl("volumes/ctl", "create k%d size=1M" % k), (True, "OK"))
            ids = {env.vol_id("k%d" % k): "k%d" % k for k in range(3)}
            with open(env.fs.config_path) as f:
                conf = f.read()
            self.assertIn("reconcile_interval = 2s\n", conf)
            with open(env.fs.config_path, "w") as f:
                f.write(conf.replace("reconcile_interval = 2s\n", "reconcile_interval = 0\n"))
            env.fs.env = dict(env.fs.env or {}, NODEFS_TEST_SLOW_RECOVERY="2000")
            env.fs.restart()
            self.assertTrue(nt.wait_until(
                lambda: env.fs.read("status").startswith("state: READY"), 30))
            self.assertTrue(nt.wait_until(
                lambda: "not fetched" not in env.fs.read("plugins", "hostpath", "volumes"), 15))
            lines = env.fs.read("plugins", "hostpath", "volumes").splitlines()
            for vid, name in ids.items():
                self.assertIn("%s %d known %s" % (vid, 1 << 20, name), lines, lines)

    def test_profiles_and_capacity(self):
        with vt.VolEnv() as env:
            fs = env.fs
            self.assertEqual(fs.listdir("profiles"), ["fast", "ro"])
            self.assertEqual(fs.read("profiles", "fast", "plugin"), "hostpath\n")
            self.assertEqual(fs.read("profiles", "fast", "access_mode"), "single-node-writer\n")
            self.assertEqual(fs.read("profiles", "fast", "fs_type"), "ext4\n")
            self.assertEqual(fs.read("profiles", "fast", "mount_flags"), "noatime nodiratime\n")
            self.assertEqual(fs.read("profiles", "fast", "parameters"), "tier=fast\nreplicas=1\n")
            self.assertEqual(fs.read("profiles", "ro", "access_mode"), "multi-node-reader-only\n")
            # fetched in the background once the plugin is READY
            # (nodefs(5)): until then it reads "unknown: not fetched yet"
            self.assertTrue(nt.wait_until(
                lambda: not fs.read("plugins", "hostpath", "capacity").startswith("unknown:"),
                nt.scaled(10)), fs.read("plugins", "hostpath", "capacity"))
            capa = nt.parse_kv(fs.read("plugins", "hostpath", "capacity"), sep=" ")
            self.assertEqual(sorted(capa), ["default", "fast", "ro"], capa)
            st = os.statvfs(env.plugin.base)
            for k, v in capa.items():
                self.assertGreater(int(v), 0, k)
                self.assertLessEqual(int(v), st.f_blocks * st.f_frsize, k)
            ok, e = env.ctl("volumes/ctl", "create p1 profile=fast param.extra=yes size=2M")
            self.assertTrue(ok, env.fs.error("volumes"))
            vid = env.vol_id("p1")
            self.assertEqual(env.plugin.state()[vid]["params"],
                             {"tier": "fast", "replicas": "1", "extra": "yes"})
            info = __import__("json").loads(fs.read("volumes", "p1", "info.json"))
            self.assertEqual(info["access_mode"], "single-node-writer")
            self.assertEqual(info["fs_type"], "ext4")
            self.assertEqual(info["mount_flags"], ["noatime", "nodiratime"])
            ok, e = env.ctl("volumes/ctl", "create p2 profile=ro")
            self.assertTrue(ok, env.fs.error("volumes"))
            self.assertEqual(env.vread("p2", "profile"), "ro")
            for n in ("p1", "p2"):
                os.rmdir(fs.path("volumes", n))
            self.assertEqual(env.plugin.state(), {})


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

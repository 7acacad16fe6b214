# SPDX-License-Identifier: LGPL-2.1-or-later
"""The whole volume lifecycle from a shell, against the real gRPC test
plugin, in every capability combination it offers (all, --no-stage,
--no-controller-publish, both, --no-expand).

What it proves: `echo ... > ctl` from bash creates a volume (state, id,
capacity, plugin, profile shown; the profile's parameters reach the
plugin); publish walks CREATED -> [CONTROLLER_PUBLISH -> ] NODE_READY ->
[NODE_STAGE -> VOL_READY ->] NODE_PUBLISH -> PUBLISHED, skipping exactly the
steps the plugin's capabilities lack, creating the target's missing parent;
a file written under the target lands in the plugin's volume directory;
stats come from NodeGetVolumeStats; expand reaches the plugin (ENOTSUP and
no call without EXPAND_VOLUME); unpublish, unstage, stage and destroy walk
back down in order (NodeUnpublish before NodeUnstage before
ControllerUnpublish before DeleteVolume); each CSI call is made exactly as
many times as the walk needs; every command is a FINISHED operation; and
nothing stays mounted afterwards. mkdir/rmdir make and destroy a volume.
Registered twice: against the Python test plugin, and (volumes-lifecycle-
local) against nodefs-csi-local, whose one combination is
--no-controller-publish (the only case run there).
"""

import errno
import os
import unittest

import nodefs_test as nt
import voltest as vt

GIB = 1 << 30


class LifecycleTest(unittest.TestCase):
    def lifecycle(self, flags):
        stage = "--no-stage" not in flags
        ctlpub = "--no-controller-publish" not in flags
        expand = "--no-expand" not in flags
        with vt.VolEnv(flags) as env:
            fs = env.fs
            caps = fs.read("plugins", "hostpath", "capabilities")
            self.assertEqual("STAGE_UNSTAGE_VOLUME" in caps, stage, caps)
            self.assertEqual("PUBLISH_UNPUBLISH_VOLUME" in caps, ctlpub, caps)
            ev = env.open_events()
            try:
                self.walk(env, ev, stage, ctlpub, expand)
            finally:
                # closed before the daemon stops: an open handle at unmount
                # is not freed (a leak report in sanitizer builds)
                os.close(ev)

    def walk(self, env, ev, stage, ctlpub, expand):
        fs = env.fs

        # create
        rc, err = env.sh("echo 'create db size=1G profile=fast' > volumes/ctl")
        self.assertEqual(rc, 0, err + fs.error("volumes"))
        self.assertEqual(env.state("db"), "CREATED")
        vid = env.vol_id("db")
        self.assertTrue(vid)
        self.assertEqual(env.vread("db", "capacity"), str(GIB))
        self.assertEqual(env.vread("db", "plugin"), "hostpath")
        self.assertEqual(env.vread("db", "profile"), "fast")
        pst = env.plugin.state()
        self.assertIn(vid, pst)
        self.assertEqual(pst[vid]["params"], {"tier": "fast", "replicas": "1"})
        self.assertEqual(pst[vid]["capacity"], GIB)
        self.assertEqual(env.volume_walk(env.drain_events(ev), "db"),
                         ["CREATING", "CREATED"])

        # publish, to a target whose parent does not exist yet
        tgt = env.target("apps", "db")
        rc, err = env.sh("echo 'publish %s' > volumes/db/ctl" % tgt)
        self.assertEqual(rc, 0, err)
        self.assertEqual(env.state("db"), "PUBLISHED")
        self.assertEqual(env.vread("db", "target"), tgt)
        want = (["CONTROLLER_PUBLISH"] if ctlpub else []) + ["NODE_READY"] + \
            (["NODE_STAGE", "VOL_READY"] if stage else []) + ["NODE_PUBLISH", "PUBLISHED"]
        self.assertEqual(env.volume_walk(env.drain_events(ev), "db"), want)
        self.assertTrue(nt.is_mounted(tgt))
        pst = env.plugin.state()[vid]
        self.assertEqual(pst["published"], [tgt])
        self.assertEqual(len(pst["staged"]), 1 if stage else 0)
        if stage:
            # staging lies under the state dir
            self.assertTrue(pst["staged"][0].startswith(env.state_dir + "/"), pst)
        self.assertEqual(pst["nodes"], ["node-1"] if ctlpub else [])

        # a file written through the target lands in the volume
        rc, err = env.sh("echo hello > %s/greeting && sync" % tgt)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(env.plugin.volume_dir(vid), "greeting")) as f:
            self.assertEqual(f.read(), "hello\n")

        # stats
        st = nt.parse_kv(fs.read("volumes", "db", "stats"), sep=" ")
        for k in ("bytes_used", "bytes_available", "inodes_used", "inodes_available"):
            self.assertIn(k, st)
            self.assertGreaterEqual(int(st[k]), 0)
        # the metrics keep what the plugin last reported
        prom = fs.read("metrics", "nodefs.prom")
        self.assertIn('nodefs_volume_used_bytes{volume="db"} ', prom)
        self.assertIn('nodefs_volume_available_bytes{volume="db"} ', prom)

        # expand
        before = env.volume_calls()
        rc, err = env.sh("echo 'expand 2G' > volumes/db/ctl")
        if expand and not env.plugin.grows_online():
            # an ext4 image grows online only with CAP_SYS_RESOURCE: the
            # controller step is done, the node step's failure is told
            self.assertNotEqual(rc, 0)
            self.assertIn("NodeExpandVolume", fs.error("volumes/db"))
            self.assertEqual(env.plugin.state()[vid]["capacity"], 2 * GIB)
        elif expand:
            self.assertEqual(rc, 0, err + fs.error("volumes/db"))
            self.assertEqual(env.vread("db", "capacity"), str(2 * GIB))
            self.assertEqual(env.plugin.state()[vid]["capacity"], 2 * GIB)
            after = env.volume_calls()
            self.assertEqual(after["ControllerExpandVolume"],
                             before["ControllerExpandVolume"] + 1)
            self.assertEqual(after["NodeExpandVolume"],
                             before["NodeExpandVolume"] + int(env.plugin.node_expansion))
        else:
            self.assertNotEqual(rc, 0)
            self.assertIn("not supported", err)
            self.assertIn("expand", fs.error("volumes/db"))
            self.assertEqual(env.vread("db", "capacity"), str(GIB))
            self.assertEqual(env.volume_calls(), before)

        # rmdir of a published volume: EBUSY, nothing changed
        snap = env.snapshot("db")
        with self.assertRaises(OSError) as cm:
            os.rmdir(fs.path("volumes", "db"))
        self.assertEqual(cm.exception.errno, errno.EBUSY)
        self.assertIn("publish", fs.error("volumes"))
        self.assertEqual(env.snapshot("db"), snap)
        env.drain_events(ev)

        # unpublish
        rc, err = env.sh("echo unpublish > volumes/db/ctl")
        self.assertEqual(rc, 0, err)
        self.assertFalse(nt.is_mounted(tgt))
        mid = "VOL_READY" if stage else "NODE_READY"
        self.assertEqual(env.state("db"), mid)
        self.assertEqual(env.vread("db", "target"), "")
        self.assertEqual(env.volume_walk(env.drain_events(ev), "db"),
                         ["NODE_UNPUBLISH", mid])
        # the data stays in the volume
        self.assertTrue(os.path.exists(os.path.join(env.plugin.volume_dir(vid), "greeting")))

        # unstage walks down to CREATED
        rc, err = env.sh("echo unstage > volumes/db/ctl")
        self.assertEqual(rc, 0, err)
        self.assertEqual(env.state("db"), "CREATED")
        want = (["NODE_UNSTAGE", "NODE_READY"] if stage else []) + \
            (["CONTROLLER_UNPUBLISH"] if ctlpub else []) + ["CREATED"]
        self.assertEqual(env.volume_walk(env.drain_events(ev), "db"), want)
        pst = env.plugin.state()[vid]
        self.assertEqual((pst["staged"], pst["nodes"], pst["published"]), ([], [], []))

        # stage walks up to VOL_READY (NODE_READY without staging)
        rc, err = env.sh("echo stage > volumes/db/ctl")
        self.assertEqual(rc, 0, err)
        self.assertEqual(env.state("db"), mid)

        # publish read-only again, then destroy walks all the way down
        rc, err = env.sh("echo 'publish %s ro' > volumes/db/ctl" % tgt)
        self.assertEqual(rc, 0, err)
        self.assertIn("ro", nt.mount_entry(tgt)["options"])
        rc, err = env.sh("echo x > %s/nope" % tgt)
        self.assertNotEqual(rc, 0)
        self.assertIn("Read-only", err)
        env.drain_events(ev)
        rc, err = env.sh("echo destroy > volumes/db/ctl")
        self.assertEqual(rc, 0, err)
        want = ["NODE_UNPUBLISH", mid] + \
            (["NODE_UNSTAGE", "NODE_READY"] if stage else []) + \
            (["CONTROLLER_UNPUBLISH"] if ctlpub else []) + ["CREATED", "DELETING", "DELETED"]
        self.assertEqual(env.volume_walk(env.drain_events(ev), "db"), want)
        self.assertNotIn("db", env.volumes())
        self.assertNotIn(vid, env.plugin.state())
        self.assertEqual(vt.mounts_under(env.tmp), [])
        self.assertFalse(os.path.exists(os.path.join(env.state_dir, "volumes", "db.json")))

        # each call as many times as the walks needed
        calls = env.volume_calls()
        self.assertEqual(calls["CreateVolume"], 1)
        self.assertEqual(calls["DeleteVolume"], 1)
        self.assertEqual(calls["NodePublishVolume"], 2)
        self.assertEqual(calls["NodeUnpublishVolume"], 2)
        self.assertEqual(calls["NodeStageVolume"], 2 if stage else 0)
        self.assertEqual(calls["NodeUnstageVolume"], 2 if stage else 0)
        self.assertEqual(calls["ControllerPublishVolume"], 2 if ctlpub else 0)
        self.assertEqual(calls["ControllerUnpublishVolume"], 2 if ctlpub else 0)

        # every command is a FINISHED operation, oldest first
        types = []
        for oid in env.ops():
            o = env.op(oid)
            if o["object"] == "volumes/db":
                types.append(o["type"])
                failed = not expand or not env.plugin.grows_online()
                want_state = "FAILED" if o["type"] == "volume.expand" and failed \
                    else "FINISHED"
                self.assertEqual(o["state"], want_state, o)
                self.assertTrue(o["created"] and o["finished"], o)
        want = ["volume.create", "volume.publish"] + \
            (["volume.expand"] if expand else []) + \
            ["volume.unpublish", "volume.unstage", "volume.stage", "volume.publish",
             "volume.destroy"]
        self.assertEqual([t for t in types if t != "volume.expand" or expand], want)

        # mkdir / rmdir
        os.mkdir(fs.path("volumes", "scratch"))
        self.assertEqual(env.state("scratch"), "CREATED")
        sid = env.vol_id("scratch")
        self.assertIn(sid, env.plugin.state())
        os.rmdir(fs.path("volumes", "scratch"))
        self.assertNotIn("scratch", env.volumes())
        self.assertNotIn(sid, env.plugin.state())

    def test_all_capabilities(self):
        self.lifecycle([])

    def test_no_stage(self):
        self.lifecycle(["--no-stage"])

    def test_no_controller_publish(self):
        self.lifecycle(["--no-controller-publish"])

    def test_no_stage_no_controller_publish(self):
        self.lifecycle(["--no-stage", "--no-controller-publish"])

    def test_no_expand(self):
        self.lifecycle(["--no-expand"])

    def test_profile_size(self):
        """A profile's size applies to a create whose line has none, and
        profiles/NAME/size shows it; size= on the line wins."""
        extra = "\n[profile sized]\nplugin = hostpath\nsize = 64M\n"
        with vt.VolEnv(extra=extra) as env:
            self.assertEqual(env.fs.read("profiles", "sized", "size").strip(), str(64 << 20))
            self.assertEqual(env.fs.read("profiles", "fast", "size"), "")
            for name, line, want in (("p1", "", 64 << 20), ("p2", " size=16M", 16 << 20)):
                ok, e = env.ctl("volumes/ctl", "create %s profile=sized%s" % (name, line))
                self.assertTrue(ok, env.fs.error("volumes"))
                self.assertEqual(env.vread(name, "capacity"), str(want))
                self.assertEqual(env.plugin.state()[env.vol_id(name)]["capacity"], want)


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

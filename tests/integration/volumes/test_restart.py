# SPDX-License-Identifier: LGPL-2.1-or-later
"""Volumes across a crash of nodefs (kill -9) and a restart on the same
state dir, against the real plugin.

What it proves: a published volume comes back PUBLISHED with its id,
target, capacity and profile, its bind mount untouched and its data
readable, and unpublishes and destroys normally afterwards; a volume
killed in the middle of NodeStage comes back in the transient NODE_STAGE,
the operation that was in flight is no longer PENDING (DROPPED, with the
reason), and the next publish re-drives NodeStage and finishes; operation
ids keep rising after the restart; after a reboot (its mounts gone, the
plugin's records not) a volume is not PUBLISHED until a publish has
mounted it for real, even with a plugin that answers from its records.
"""

import os
import time
import unittest

import nodefs_test as nt
import voltest as vt


class RestartTest(unittest.TestCase):
    def test_published_volume_survives_kill9(self):
        with vt.VolEnv() as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=32M profile=fast"),
                             (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
            with open(os.path.join(tgt, "kept"), "w") as f:
                f.write("across\n")
            vid = env.vol_id("db")
            last = max(env.ops())
            env.fs.kill9()
            self.assertTrue(nt.is_mounted(tgt))     # the plugin's mount, not ours
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertEqual(env.vol_id("db"), vid)
            self.assertEqual(env.vread("db", "target"), tgt)
            self.assertEqual(env.vread("db", "capacity"), str(32 << 20))
            self.assertEqual(env.vread("db", "profile"), "fast")
            with open(os.path.join(tgt, "kept")) as f:
                self.assertEqual(f.read(), "across\n")
            self.assertEqual(env.ctl("volumes/db/ctl", "unpublish"), (True, "OK"))
            self.assertFalse(nt.is_mounted(tgt))
            self.assertGreater(max(env.ops()), last)
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_publish_after_a_reboot_mounts_for_real(self):
        # A reboot (a changed boot id, NODEFS_TEST_BOOT_ID): the mounts are
        # gone and the plugin's records still say staged and published.
        # The volume comes back not PUBLISHED, and a publish mounts for
        # real, its data at the target. The Python plugin answers from its
        # records (--trust-records) as nodefs-csi-local did: nodefs sees
        # no mount at the target and has the plugin unpublish, unstage,
        # stage and publish again.
        flags = [] if vt.LOCAL else ["--trust-records"]
        with vt.VolEnv(flags) as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=32M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
            with open(os.path.join(tgt, "kept"), "w") as f:
                f.write("across\n")
            env.fs.kill9()
            env.plugin.stop()
            vt.unmount_all_under(env.tmp)
            vt.detach_loops_under(env.tmp)
            self.assertEqual(vt.mounts_under(env.tmp), [])
            env.plugin.start(flags)
            env.fs.env = dict(env.fs.env or {}, NODEFS_TEST_BOOT_ID="a-boot-after-%d" % os.getpid())
            env.fs.start()
            env.wait_plugin_ready()
            self.assertIn("rebooted", env.fs.log())
            self.assertNotEqual(env.state("db"), "PUBLISHED")
            self.assertFalse(nt.is_mounted(tgt))
            ok = env.ctl("volumes/db/ctl", "publish " + tgt)
            self.assertEqual(ok, (True, "OK"), env.vread("db", "error") + env.fs.log())
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertTrue(nt.is_mounted(tgt), "PUBLISHED, and nothing mounted at the target")
            with open(os.path.join(tgt, "kept")) as f:
                self.assertEqual(f.read(), "across\n")
            if not vt.LOCAL:
                self.assertIn("is not a mount point", env.fs.log())
                self.assertIn("published again", env.fs.log())
            self.assertEqual(env.ctl("volumes/db/ctl", "unpublish"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_killed_mid_call_is_redriven(self):
        with vt.VolEnv(["--delay", "NodeStageVolume=3"], csi_timeout="20s") as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            fd = os.open(env.fs.path("volumes", "db", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, ("publish %s\n" % tgt).encode())
                oid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            self.assertTrue(nt.wait_until(lambda: env.state("db") == "NODE_STAGE", 10))
            time.sleep(0.3)     # the RELEASE of the ctl handle
            env.fs.kill9()
            env.plugin.restart([])
            env.fs.start()
            env.wait_plugin_ready()
            # recovery drives the interrupted publish to its end: NodeStage
            # is sent again (idempotent), then NodePublish
            self.assertTrue(nt.wait_until(lambda: env.op(oid)["state"] != "PENDING", 30))
            op = env.op(oid)
            self.assertEqual(op["state"], "FINISHED", op)
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertGreaterEqual(env.calls().get("NodeStageVolume", 0), 1)
            self.assertTrue(nt.is_mounted(tgt))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_create_answered_late_is_learnt_by_repeating_it(self):
        """CreateVolume made the volume but its answer came after nodefs
        died: the resumed create sends it again (idempotent by name),
        learns the volume, and nothing is made twice."""
        with vt.VolEnv(["--late", "CreateVolume=3"], csi_timeout="20s") as env:
            fd = os.open(env.fs.path("volumes", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, b"create late size=8M\n")
                oid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            # the plugin has made it; its answer is on the way
            self.assertTrue(nt.wait_until(lambda: len(env.plugin.state()) == 1, 10))
            self.assertEqual(env.state("late"), "CREATING")
            time.sleep(0.3)     # the RELEASE of the ctl handle
            env.fs.kill9()
            env.plugin.restart([])
            env.fs.start()
            env.wait_plugin_ready()
            self.assertTrue(nt.wait_until(lambda: env.op(oid)["state"] != "PENDING", 30))
            op = env.op(oid)
            self.assertEqual(op["state"], "FINISHED", op)
            self.assertIn("CreateVolume", env.fs.read("operations", oid, "outcome"))
            self.assertIn("sent again", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(env.state("late"), "CREATED")
            self.assertEqual(len(env.plugin.state()), 1, "made twice")
            self.assertEqual(env.ctl("volumes/late/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

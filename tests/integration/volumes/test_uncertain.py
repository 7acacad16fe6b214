# SPDX-License-Identifier: LGPL-2.1-or-later
"""CSI calls whose answer never came, settled without a command, against
the real plugin (its --late RPC=S acts, then answers S seconds late).

What it proves: a CreateVolume that timed out is repeated in the
background (idempotent by name) once the plugin answers, and the volume
becomes CREATED by itself; a destroy of a volume whose create timed out
undoes what the late create made (CreateVolume to learn the id, then
DeleteVolume) and the volume is gone; a DeleteVolume answered late, live or
after nodefs was killed -9, leaves no volume behind in nodefs; a call with
no answer within uncertain_timeout is closed with its reason. Each end is
counted in nodefs_uncertain_outcomes_total{kind,result}, an `uncertain`
event and a line in the operation's outcome.
"""

import os
import time
import unittest

import nodefs_test as nt
import voltest as vt


def outcome_count(env, kind, result):
    key = 'nodefs_uncertain_outcomes_total{kind="%s",result="%s"} ' % (kind, result)
    for line in env.fs.read("metrics", "nodefs.prom").splitlines():
        if line.startswith(key):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def uncertain_events(env, fd):
    return [e for e in env.drain_events(fd) if e.get("kind") == "uncertain"]


class UncertainTest(unittest.TestCase):
    def test_create_timed_out_becomes_created_by_itself(self):
        with vt.VolEnv(["--late", "CreateVolume=2"], csi_timeout="500ms") as env:
            evfd = env.open_events()
            ok, e = env.ctl("volumes/ctl", "create db size=8M")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes"))
            self.assertEqual(env.state("db"), "CREATING")
            oid, _ = env.last_op("volumes/db")
            self.assertTrue(nt.wait_until(lambda: len(env.plugin.state()) == 1, 10))
            env.restart_plugin([])
            # no command: the background repeat learns the volume
            self.assertTrue(nt.wait_until(lambda: env.state("db") == "CREATED", 20),
                            env.fs.log())
            self.assertTrue(env.vol_id("db").startswith("vol-"))
            self.assertIn("answered after all",
                          env.fs.read("operations", oid, "outcome"))
            self.assertEqual(outcome_count(env, "csi.CreateVolume", "made"), 1)
            ev = uncertain_events(env, evfd)
            self.assertEqual([(x["name"], x["new"], x["operation"]) for x in ev],
                             [("db", "made", oid)], ev)
            os.close(evfd)
            self.assertEqual(len(env.plugin.state()), 1, "made twice")
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})

    def test_destroy_of_a_timed_out_create_undoes_it(self):
        """The create's answer never came and the volume was destroyed
        meanwhile: what the late CreateVolume made is deleted."""
        with vt.VolEnv(["--late", "CreateVolume=2"], csi_timeout="500ms") as env:
            ok, e = env.ctl("volumes/ctl", "create db size=8M")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes"))
            ok, e = env.ctl("volumes/db/ctl", "destroy")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(env.state("db"), "CREATING")
            oid, op = env.last_op("volumes/db")
            self.assertEqual(op["type"], "volume.destroy")
            self.assertTrue(nt.wait_until(lambda: len(env.plugin.state()) == 1, 10))
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: "db" not in env.volumes(), 20),
                            env.fs.log())
            self.assertEqual(env.plugin.state(), {}, "the late volume was left behind")
            self.assertIn("DeleteVolume removed it",
                          env.fs.read("operations", oid, "outcome"))
            self.assertEqual(outcome_count(env, "csi.CreateVolume", "undone"), 1)

    def test_delete_answered_late_forgets_the_volume(self):
        with vt.VolEnv(["--late", "DeleteVolume=2"], csi_timeout="500ms") as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            ok, e = env.ctl("volumes/db/ctl", "destroy")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(env.state("db"), "DELETING")
            oid, _ = env.last_op("volumes/db")
            self.assertEqual(env.plugin.state(), {})    # the plugin did delete it
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: "db" not in env.volumes(), 20),
                            env.fs.log())
            self.assertIn("the volume is gone", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(outcome_count(env, "csi.DeleteVolume", "deleted"), 1)
            self.assertFalse(os.path.exists(os.path.join(env.state_dir, "volumes", "db.json")))

    def test_delete_answered_after_a_crash(self):
        """DeleteVolume acted, its answer came after nodefs was killed: the
        restart repeats it (a missing volume is success) and forgets it."""
        with vt.VolEnv(["--late", "DeleteVolume=3"], csi_timeout="20s") as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            fd = os.open(env.fs.path("volumes", "db", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, b"destroy\n")
                oid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            self.assertTrue(nt.wait_until(lambda: env.plugin.state() == {}, 10))
            time.sleep(0.3)     # the RELEASE of the ctl handle
            env.fs.kill9()
            env.plugin.restart([])
            env.fs.start()
            env.wait_plugin_ready()
            self.assertTrue(nt.wait_until(lambda: env.op(oid)["state"] != "PENDING", 30))
            self.assertEqual(env.op(oid)["state"], "FINISHED", env.op(oid))
            self.assertNotIn("db", env.volumes())
            self.assertIn("DeleteVolume", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(outcome_count(env, "csi.DeleteVolume", "resumed"), 1)

    def test_no_answer_within_uncertain_timeout_is_closed(self):
        with vt.VolEnv(["--delay", "CreateVolume=30"], csi_timeout="300ms",
                       extra_nodefs="uncertain_timeout = 2s") as env:
            ok, e = env.ctl("volumes/ctl", "create db size=8M")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes"))
            oid, _ = env.last_op("volumes/db")
            self.assertTrue(nt.wait_until(
                lambda: outcome_count(env, "csi.CreateVolume", "never_answered") == 1, 20))
            self.assertIn("uncertain_timeout", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(env.state("db"), "CREATING")
            env.restart_plugin([])
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

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

The same for ControllerPublishVolume, NodeStageVolume, NodePublishVolume
and NodeUnpublishVolume (PublishUncertainTest): the call is in the volume's
record, with what it acts on, before it is sent; one whose answer never
came is repeated in the background and the volume goes on to the state it
leads to (an unpublish whose answer was lost does not leave the volume
published); one that acts late (--delay: it acts after nodefs gave up on
it), after an unpublish or unstage took the volume the other way, is
undone (NodeUnpublish, NodeUnstage, ControllerUnpublish), live and after
nodefs was killed -9; a call in flight at a kill -9 is repeated by the
resumed command.
"""

import json
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


def uncertain_events(env, fd, n=1):
    """The uncertain events on fd, once n came (or the wait ran out)."""
    return vt.events_until(fd, lambda e: e.get("kind") == "uncertain",
                           lambda kept: len(kept) >= n)


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
            # its record goes too: the tree's entry and the file go one
            # after the other, so the file may outlive the listing briefly
            rec = os.path.join(env.state_dir, "volumes", "db.json")
            self.assertTrue(nt.wait_until(lambda: not os.path.exists(rec), 5), rec)

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


def record(env, name):
    """The volume's record as the state dir has it ({} while unwritten)."""
    try:
        with open(os.path.join(env.state_dir, "volumes", name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write_nb(env, name, line):
    """Write a command to the volume's ctl without waiting: its operation."""
    fd = os.open(env.fs.path("volumes", name, "ctl"), os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, (line + "\n").encode())
        return os.pread(fd, 100, 0).decode().strip()
    finally:
        os.close(fd)


def plugin_vol(env):
    """The test plugin's one volume (its state.json entry)."""
    vols = env.plugin.state()
    return next(iter(vols.values())) if vols else {}


def staging_mounts(env):
    return vt.mounts_under(os.path.join(env.state_dir, "staging"))


# Each call: the command that sends it, the transient state it is sent in,
# the state it leads to.
CALLS = {
    "ControllerPublishVolume": ("publish", "CONTROLLER_PUBLISH", "NODE_READY"),
    "NodeStageVolume": ("publish", "NODE_STAGE", "VOL_READY"),
    "NodePublishVolume": ("publish", "NODE_PUBLISH", "PUBLISHED"),
}


class PublishUncertainTest(unittest.TestCase):
    def _timed_out_goes_on(self, rpc):
        """The call acted, its answer never came: recorded before it was
        sent, repeated in the background, and the volume goes on."""
        cmd, transient, done = CALLS[rpc]
        with vt.VolEnv(["--late", rpc + "=2"], csi_timeout="400ms") as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            evfd = env.open_events()
            ok, e = env.ctl("volumes/db/ctl", "%s %s" % (cmd, tgt))
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(env.state("db"), transient)
            oid, _ = env.last_op("volumes/db")
            rec = record(env, "db")["uncertain"]
            self.assertEqual((rec["rpc"], rec["volume_id"], rec["operation"]),
                             (rpc, env.vol_id("db"), oid), rec)
            if rpc == "ControllerPublishVolume":
                self.assertTrue(rec["node_id"])
            else:
                self.assertEqual(rec["path"], tgt if rpc == "NodePublishVolume"
                                 else os.path.join(env.state_dir, "staging",
                                                   env.vol_id("db")))
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: env.state("db") == done, 20),
                            env.fs.log())
            self.assertIn("answered after all", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(outcome_count(env, "csi." + rpc, "done"), 1)
            ev = uncertain_events(env, evfd)
            os.close(evfd)
            self.assertEqual([(x["name"], x["new"], x["operation"]) for x in ev],
                             [("db", "done", oid)], ev)
            self.assertTrue(nt.wait_until(lambda: "uncertain" not in record(env, "db"), 5))
            if done == "PUBLISHED":
                self.assertTrue(nt.is_mounted(tgt))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_controller_publish_timed_out_goes_on(self):
        self._timed_out_goes_on("ControllerPublishVolume")

    def test_stage_timed_out_goes_on(self):
        self._timed_out_goes_on("NodeStageVolume")

    def test_publish_timed_out_goes_on(self):
        self._timed_out_goes_on("NodePublishVolume")

    def test_unpublish_timed_out_is_not_left_published(self):
        """NodeUnpublish unmounted, its answer never came: the volume does
        not stay published in nodefs."""
        with vt.VolEnv(["--late", "NodeUnpublishVolume=2"], csi_timeout="400ms") as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
            ok, e = env.ctl("volumes/db/ctl", "unpublish")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(env.state("db"), "NODE_UNPUBLISH")
            self.assertFalse(nt.is_mounted(tgt))
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: env.state("db") == "VOL_READY", 20),
                            env.fs.log())
            self.assertEqual(env.vread("db", "target"), "")
            self.assertEqual(outcome_count(env, "csi.NodeUnpublishVolume", "done"), 1)
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def _late_act(self, rpc, cmd, undo_cmd, mounted, crash=False, extra=""):
        """rpc acts 4 s late (every attempt of it); the command times out
        at once, and undo_cmd takes the volume back; what the late call
        does is undone (mounted(env): whether its effect is there)."""
        flags = ["--delay", rpc + "=4:5"]
        with vt.VolEnv(flags, csi_timeout="300ms", extra_nodefs=extra) as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            t0 = time.monotonic()
            ok, e = env.ctl("volumes/db/ctl", cmd if cmd == "stage" else "%s %s" % (cmd, tgt))
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            oid, _ = env.last_op("volumes/db")
            self.assertEqual(env.ctl("volumes/db/ctl", undo_cmd), (True, "OK"),
                             env.fs.error("volumes/db"))
            # the late act must come after the undoing command: 5 attempts
            # of 300 ms and their backoff take about 2.2 s
            self.assertLess(time.monotonic() - t0, 3.8, "the commands took too long")
            self.assertFalse(mounted(env))
            if crash:
                self.assertEqual(record(env, "db").get("uncertain", {}).get("rpc"), rpc)
                env.fs.kill9()
                env.fs.start()
                env.wait_plugin_ready()
            # the late act comes at 4 s (and its retries' after it)
            self.assertTrue(nt.wait_until(lambda: mounted(env), 10), "no late act")
            self.assertTrue(nt.wait_until(lambda: not mounted(env), 10),
                            "the late act was left: " + env.fs.log())
            # reported at once when seen; a controller call, not seen from
            # the node, at uncertain_timeout
            self.assertTrue(nt.wait_until(
                lambda: outcome_count(env, "csi." + rpc, "undone")
                + outcome_count(env, "csi." + rpc, "unpublished") == 1, 15), env.fs.log())
            # every attempt's late act is past, none is left
            time.sleep(max(0, t0 + 7 - time.monotonic()))
            self.assertTrue(nt.wait_until(lambda: not mounted(env), 10),
                            "a later attempt's act was left: " + env.fs.log())
            self.assertIn(rpc, env.fs.read("operations", oid, "outcome"))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_publish_acting_late_after_an_unpublish_is_undone(self):
        self._late_act("NodePublishVolume", "publish", "unpublish",
                       lambda env: nt.is_mounted(env.target("db")))

    def test_stage_acting_late_after_an_unstage_is_undone(self):
        self._late_act("NodeStageVolume", "stage", "unstage",
                       lambda env: staging_mounts(env) != [])

    def test_controller_publish_acting_late_after_an_unstage_is_undone(self):
        # not seen from the node: ControllerUnpublish again at each look,
        # until uncertain_timeout
        self._late_act("ControllerPublishVolume", "stage", "unstage",
                       lambda env: plugin_vol(env).get("nodes", []) != [],
                       extra="uncertain_timeout = 9s")

    def test_publish_acting_late_after_a_crash_is_undone(self):
        """The same, with nodefs killed -9 before the late act: the record
        names the call and the restart watches for it."""
        self._late_act("NodePublishVolume", "publish", "unpublish",
                       lambda env: nt.is_mounted(env.target("db")), crash=True)

    def test_unpublish_acting_late_after_a_publish_is_redone(self):
        """The reverse: NodeUnpublish acts 4 s late (every attempt), after
        the volume was published again at the same target; the target
        nodefs believes published is mounted again."""
        with vt.VolEnv(["--delay", "NodeUnpublishVolume=4:5"], csi_timeout="300ms") as env:
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
            t0 = time.monotonic()
            ok, e = env.ctl("volumes/db/ctl", "unpublish")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            oid, _ = env.last_op("volumes/db")
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"),
                             env.fs.error("volumes/db"))
            self.assertLess(time.monotonic() - t0, 3.8, "the commands took too long")
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertTrue(nt.wait_until(lambda: not nt.is_mounted(tgt), 10), "no late act")
            self.assertTrue(nt.wait_until(
                lambda: outcome_count(env, "csi.NodeUnpublishVolume", "redone") == 1, 10),
                env.fs.log())
            time.sleep(max(0, t0 + 7 - time.monotonic()))
            self.assertTrue(nt.wait_until(lambda: nt.is_mounted(tgt), 10),
                            "a later attempt's act was left: " + env.fs.log())
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertIn("redid it", env.fs.read("operations", oid, "outcome"))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_killed_while_a_call_is_pending(self):
        """kill -9 while the call is pending: the restart repeats it
        (idempotent) and the resumed command finishes."""
        cases = dict(CALLS, NodeUnpublishVolume=("unpublish", "NODE_UNPUBLISH", "VOL_READY"))
        for rpc, (cmd, transient, _) in cases.items():
            with self.subTest(rpc=rpc), \
                    vt.VolEnv(["--delay", rpc + "=2"], csi_timeout="20s") as env:
                tgt = env.target("db")
                self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
                if cmd == "unpublish":
                    self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
                    oid = write_nb(env, "db", "unpublish")
                else:
                    oid = write_nb(env, "db", "publish " + tgt)
                self.assertTrue(nt.wait_until(lambda: env.state("db") == transient, 10))
                self.assertTrue(nt.wait_until(
                    lambda: record(env, "db").get("call", {}).get("rpc") == rpc, 5),
                    record(env, "db"))
                time.sleep(0.3)     # the RELEASE of the ctl handle
                env.fs.kill9()
                env.fs.start()
                env.wait_plugin_ready()
                self.assertTrue(nt.wait_until(lambda: env.op(oid)["state"] != "PENDING", 30))
                self.assertEqual(env.op(oid)["state"], "FINISHED", env.op(oid))
                want = "VOL_READY" if cmd == "unpublish" else "PUBLISHED"
                self.assertEqual(env.state("db"), want)
                self.assertEqual(nt.is_mounted(tgt), cmd == "publish")
                self.assertIn(rpc + " of volume db", env.fs.read("operations", oid, "outcome"))
                self.assertEqual(outcome_count(env, "csi." + rpc, "resumed"), 1)
                self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
                self.assertEqual(env.plugin.state(), {})
                self.assertEqual(vt.mounts_under(env.tmp), [])


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

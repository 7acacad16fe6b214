# SPDX-License-Identifier: LGPL-2.1-or-later
"""Snapshots, restores, clones and live changes through a real mount,
against the Python test plugin (its own snapshots and clones: copies of the
volume's directory) and, as volumes-snapshots-local(-image), against
nodefs-csi-local.

What it proves: snapshots/ctl create and import, snapshots/SNAP/ctl delete
and rmdir, mkdir refused; every file of snapshots/SNAP/ (id, source, size,
created, ready, state, plugin, info.json, error); volumes/NAME/snapshots;
volumes/ctl create from=snapshot:SNAP and from=volume:VOL with the data
of the source; modify param.K=V (a profile's mutable_parameters obeyed),
the parameters and condition files; bad input refused with nothing
changed; each capability missing answered ENOTSUP naming it; kill -9 of
nodefs while CreateSnapshot, DeleteSnapshot or a restore's CreateVolume is
in flight, each driven to its end at the next start with one object at the
plugin; an uncertain CreateSnapshot settled by repeating it, and in the
background with no command written again; a snapshot
whose source volume is then destroyed stays, and restores.
"""

import json
import os
import re
import time
import unittest

import nodefs_test as nt
import voltest as vt

PROFILE = """
[profile gold]
plugin = hostpath
parameters = tier=gold
mutable_parameters = iops, tier
"""


def snap(env, name, f):
    return env.fs.read("snapshots", name, f).strip()


def snaps(env):
    return [s for s in env.fs.listdir("snapshots") if s not in ("ctl", "error")]


def plugin_snapshots(env):
    """The snapshots the plugin holds, by id."""
    if vt.LOCAL:
        d = os.path.join(env.plugin.base, "state")
        return sorted(n for n in os.listdir(d) if n.startswith("snap-")) if os.path.isdir(d) else []
    try:
        with open(os.path.join(env.plugin.base, "state.json")) as f:
            return sorted(json.load(f).get("snapshots", {}))
    except FileNotFoundError:
        return []


def outside_snapshot(env, vid):
    """CreateSnapshot made straight on the plugin (grpcio), as another
    client would: nodefs knows nothing of it. Its id."""
    import sys
    import grpc
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csi-local"))
    import csilocal
    pb, pbg = csilocal.stubs()
    with grpc.insecure_channel("unix:" + env.plugin.sock) as ch:
        r = pbg.ControllerStub(ch).CreateSnapshot(
            pb.CreateSnapshotRequest(name="outside", source_volume_id=vid), timeout=nt.scaled(20))
    return r.snapshot.snapshot_id


def put(env, vol, name, text):
    """Write a file into volume vol (published at its target)."""
    with open(os.path.join(env.target(vol), name), "w") as f:
        f.write(text)


def get(env, vol, name):
    with open(os.path.join(env.target(vol), name)) as f:
        return f.read()


class SnapshotTest(unittest.TestCase):
    def test_snapshot_restore_clone_and_every_file(self):
        with vt.VolEnv(extra=PROFILE) as env:
            evfd = env.open_events()
            self.assertEqual(env.ctl("volumes/ctl", "create db size=32M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + env.target("db")), (True, "OK"))
            put(env, "db", "kept", "v1\n")
            vid = env.vol_id("db")
            # bad input: refused, nothing changed
            before = (snaps(env), plugin_snapshots(env), env.ops())
            self.assertEqual(env.ctl("snapshots/ctl", "create s1"), (False, "EINVAL"))
            self.assertIn("volume=VOL is required", env.fs.error("snapshots"))
            for line, want in (
                               ("create s1 volume=nope", "ENOENT"),
                               ("create .x volume=db", "EINVAL"),
                               ("create s1 volume=db plugin=other", "EINVAL"),
                               ("create s1 volume=db param.=1", "EINVAL"),
                               ("import s9", "EINVAL"),
                               ("bogus s1", "EINVAL")):
                self.assertEqual(env.ctl("snapshots/ctl", line), (False, want), line)
            with self.assertRaises(OSError) as e:
                os.mkdir(env.fs.path("snapshots", "s1"))
            self.assertEqual(nt.errname(e.exception.errno), "EPERM")
            self.assertIn("needs its volume", env.fs.error("snapshots"))
            self.assertEqual((snaps(env), plugin_snapshots(env), env.ops()), before)

            self.assertEqual(env.ctl("snapshots/ctl", "create s1 volume=db param.k=v"), (True, "OK"))
            self.assertEqual(snaps(env), ["s1"])
            self.assertEqual(snap(env, "s1", "state"), "READY")
            sid = snap(env, "s1", "id")
            self.assertEqual(plugin_snapshots(env), [sid])
            self.assertEqual(snap(env, "s1", "source"), "db " + vid)
            self.assertGreaterEqual(int(snap(env, "s1", "size")), 32 << 20)
            self.assertRegex(snap(env, "s1", "created"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertEqual(snap(env, "s1", "ready"), "yes")
            self.assertEqual(snap(env, "s1", "plugin"), "hostpath")
            self.assertEqual(snap(env, "s1", "error"), "")
            info = json.loads(env.fs.read("snapshots", "s1", "info.json"))
            self.assertEqual((info["id"], info["volume"], info["parameters"]), (sid, "db", ["k=v"]))
            self.assertEqual(env.vread("db", "snapshots"), "s1")
            oid, op = env.last_op("snapshots/s1")
            self.assertEqual((op["type"], op["state"]), ("snapshot.create", "FINISHED"))
            self.assertEqual(env.ctl("snapshots/ctl", "create s1 volume=db"), (False, "EEXIST"))
            evs = [e for e in env.drain_events(evfd) if e.get("kind") == "snapshot"]
            self.assertEqual([e["new"] for e in evs], ["CREATING", "READY"])
            self.assertEqual(evs[-1]["operation"], oid)
            self.assertIn('nodefs_snapshots{state="READY"} 1', env.fs.read("metrics", "nodefs.prom"))

            # the volume changes; the restore has the data of the snapshot
            put(env, "db", "kept", "v2\n")
            self.assertEqual(env.ctl("volumes/ctl", "create r1 from=snapshot:s1"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/r1/ctl", "publish " + env.target("r1")), (True, "OK"))
            self.assertEqual(get(env, "r1", "kept"), "v1\n")
            self.assertIn('"content_source": "snapshot:s1"', env.fs.read("volumes", "r1", "info.json"))
            # a clone has the data of the volume now
            self.assertEqual(env.ctl("volumes/ctl", "create c1 from=volume:db"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/c1/ctl", "publish " + env.target("c1")), (True, "OK"))
            self.assertEqual(get(env, "c1", "kept"), "v2\n")
            for line, want in (("create x from=bogus", "EINVAL"), ("create x from=snapshot:nope", "ENOENT"),
                               ("create x from=volume:nope", "ENOENT"), ("create x from=file:db", "EINVAL")):
                self.assertEqual(env.ctl("volumes/ctl", line), (False, want), line)
            self.assertNotIn("x", env.volumes())

            # import what the plugin holds under another name
            self.assertEqual(env.ctl("snapshots/ctl", "import s2 %s plugin=hostpath" % sid),
                             (False, "EEXIST"))    # it is s1 already
            self.assertEqual(env.ctl("snapshots/s1/ctl", "delete"), (True, "OK"))
            self.assertEqual(snaps(env), [])
            self.assertEqual(plugin_snapshots(env), [])
            self.assertEqual(env.vread("db", "snapshots"), "")
            self.assertEqual(env.ctl("snapshots/ctl", "create s3 volume=db"), (True, "OK"))
            sid3 = snap(env, "s3", "id")
            os.rmdir(env.fs.path("snapshots", "s3"))   # rmdir deletes (and forgets it)
            self.assertEqual(plugin_snapshots(env), [])
            # a snapshot made at the plugin by someone else, imported
            sid4 = outside_snapshot(env, vid)
            self.assertNotEqual(sid3, sid4)

            def listed(word):
                return "%s %s %s %s" % (sid4, vid, 32 << 20, word) in \
                    env.fs.read("plugins", "hostpath", "snapshots")
            # plugins/NAME/snapshots: ListSnapshots, known or discovered
            self.assertTrue(nt.wait_until(lambda: listed("discovered"), 10),
                            env.fs.read("plugins", "hostpath", "snapshots"))
            self.assertEqual(env.ctl("snapshots/ctl", "import back %s" % sid4), (True, "OK"))
            self.assertTrue(nt.wait_until(lambda: listed("known back"), 10),
                            env.fs.read("plugins", "hostpath", "snapshots"))
            self.assertEqual(snap(env, "back", "state"), "READY")
            self.assertEqual(snap(env, "back", "source").split()[-1], vid)
            self.assertEqual(env.ctl("snapshots/ctl", "import ghost snap-00000000deadbeef"),
                             (False, "ENOENT"))
            self.assertEqual(snaps(env), ["back"])

    def test_source_destroyed_snapshot_stays_and_restores(self):
        with vt.VolEnv() as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=32M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + env.target("db")), (True, "OK"))
            put(env, "db", "kept", "before\n")
            self.assertEqual(env.ctl("snapshots/ctl", "create s volume=db"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            self.assertNotIn("db", env.volumes())
            # both plugins let the volume go: the snapshot is a copy
            self.assertEqual(snap(env, "s", "state"), "READY")
            self.assertEqual(snap(env, "s", "source").split()[0], "db")
            self.assertEqual(env.ctl("volumes/ctl", "create back from=snapshot:s"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/back/ctl", "publish " + env.target("back")), (True, "OK"))
            self.assertEqual(get(env, "back", "kept"), "before\n")
            self.assertEqual(env.ctl("snapshots/s/ctl", "delete"), (True, "OK"))

    def test_modify_parameters_condition(self):
        with vt.VolEnv(extra=PROFILE) as env:
            self.assertEqual(env.ctl("volumes/ctl", "create g size=16M profile=gold"), (True, "OK"))
            self.assertEqual(env.vread("g", "parameters"), "tier=gold")
            self.assertEqual(env.ctl("volumes/g/ctl", "modify param.iops=500"), (True, "OK"))
            self.assertEqual(env.vread("g", "parameters"), "tier=gold\niops=500")
            self.assertEqual(env.ctl("volumes/g/ctl", "modify param.iops=700 param.tier=platinum"),
                             (True, "OK"))
            self.assertEqual(env.vread("g", "parameters"), "tier=gold\niops=700\ntier=platinum")
            _, op = env.last_op("volumes/g")
            self.assertEqual((op["type"], op["state"]), ("volume.modify", "FINISHED"))
            # keys the profile does not let change, and malformed lines
            before = env.vread("g", "parameters")
            self.assertEqual(env.ctl("volumes/g/ctl", "modify param.size=1"), (False, "EINVAL"))
            self.assertIn("mutable_parameters", env.fs.error("volumes/g"))
            for line, want in (("modify", "EINVAL"), ("modify iops=1", "EINVAL"),
                               ("modify param.=1", "EINVAL")):
                self.assertEqual(env.ctl("volumes/g/ctl", line), (False, want), line)
            self.assertEqual(env.vread("g", "parameters"), before)
            # kept across a restart
            env.fs.kill9()
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(env.vread("g", "parameters"), before)
            # the condition: normal, then abnormal once the data is gone
            self.assertEqual(env.ctl("volumes/g/ctl", "publish " + env.target("g")), (True, "OK"))
            self.assertEqual(env.vread("g", "condition"), "normal")
            vid = env.vol_id("g")
            data = (os.path.join(env.plugin.base, "data", vid) if vt.LOCAL and vt.BACKING == "dir"
                    else os.path.join(env.plugin.base, "data", vid + ".img") if vt.LOCAL
                    else os.path.join(env.plugin.base, "volumes", vid))
            os.rename(data, data + ".moved")
            try:
                self.assertTrue(env.vread("g", "condition").startswith("abnormal: "),
                                env.vread("g", "condition"))
            finally:
                os.rename(data + ".moved", data)
            if not vt.LOCAL:
                # a plugin that refuses the key: its error shown, nothing changed
                self.assertEqual(env.ctl("volumes/ctl", "create h size=16M"), (True, "OK"))
                self.assertEqual(env.ctl("volumes/h/ctl", "modify param.bad=1"), (False, "EINVAL"))
                self.assertIn("bad", env.fs.error("volumes/h"))
                self.assertEqual(env.vread("h", "parameters"), "")


class CapabilityTest(unittest.TestCase):
    """Each capability missing: ENOTSUP naming it, nothing made."""

    def test_missing_capabilities(self):
        with vt.VolEnv(["--no-clone", "--no-modify"]) as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=16M"), (True, "OK"))
            self.assertEqual(env.ctl("snapshots/ctl", "create s volume=db"), (True, "OK"))
            for rel, line, cap in (("volumes/ctl", "create c from=volume:db", "CLONE_VOLUME"),
                                   ("volumes/db/ctl", "modify param.iops=1", "MODIFY_VOLUME")):
                self.assertEqual(env.ctl(rel, line), (False, "ENOTSUP"), line)
                self.assertIn(cap, env.fs.error(os.path.dirname(rel)))
            self.assertEqual(env.vread("db", "condition"), "unknown")
            # the plugin loses CREATE_DELETE_SNAPSHOT (the capabilities are
            # fetched once a start): no snapshot, no restore, no delete
            env.restart_plugin(["--no-snapshots", "--no-clone", "--no-modify"])
            env.fs.kill9()
            env.fs.start()
            env.wait_plugin_ready()
            for rel, line in (("snapshots/ctl", "create t volume=db"),
                              ("volumes/ctl", "create r from=snapshot:s")):
                self.assertEqual(env.ctl(rel, line), (False, "ENOTSUP"), line)
                self.assertIn("CREATE_DELETE_SNAPSHOT", env.fs.error(os.path.dirname(rel)))
            self.assertEqual(env.ctl("snapshots/s/ctl", "delete"), (False, "ENOTSUP"))
            self.assertIn("CREATE_DELETE_SNAPSHOT", snap(env, "s", "error"))
            self.assertEqual(snap(env, "s", "state"), "READY")
            self.assertEqual(snaps(env), ["s"])
            self.assertEqual(env.volumes(), ["db"])


class CrashTest(unittest.TestCase):
    """kill -9 of nodefs with each call in flight (the plugin holds it with
    --delay): the next start drives the command to its end, and the plugin
    holds one object, not two."""

    def crash_during(self, env, rel, line, record, state, acted=None):
        """Write line; once the object's record says state (checkpointed
        durable before the call is sent: the plugin holds the call for
        --delay) and, with acted, once the plugin acted (it holds the
        answer for --late), kill -9 nodefs and start it again."""
        import threading
        done = []
        t = threading.Thread(target=lambda: done.append(env.ctl(rel, line)))
        t.start()

        def recorded():
            try:
                with open(os.path.join(env.state_dir, record)) as f:
                    return json.load(f).get("state") == state and (acted is None or acted())
            except (OSError, ValueError):
                return False
        self.assertTrue(nt.wait_until(recorded, 10), env.fs.log())
        env.fs.kill9()
        t.join(nt.scaled(10))
        env.fs.start()
        env.wait_plugin_ready()

    def test_kill9_at_each_step(self):
        with vt.VolEnv(["--delay", "CreateSnapshot=1.5:1", "--delay", "DeleteSnapshot=1.5:1",
                        "--delay", "CreateVolume=1.5:2"]) as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=16M"), (True, "OK"))
            # create: the resumed operation repeats CreateSnapshot by name
            self.crash_during(env, "snapshots/ctl", "create s volume=db", "snapshots/s.json", "CREATING")
            self.assertTrue(nt.wait_until(lambda: snap(env, "s", "state") == "READY", 10),
                            env.fs.log())
            self.assertEqual(len(plugin_snapshots(env)), 1)
            oid, op = env.last_op("snapshots/s")
            self.assertEqual((op["type"], op["state"]), ("snapshot.create", "FINISHED"))
            # restore: the resumed create repeats CreateVolume with the source
            self.crash_during(env, "volumes/ctl", "create r from=snapshot:s", "volumes/r.json", "CREATING")
            self.assertTrue(nt.wait_until(lambda: env.state("r") == "CREATED", 10), env.fs.log())
            self.assertEqual(len(env.plugin.state()), 2)
            # delete: the resumed operation repeats DeleteSnapshot
            self.crash_during(env, "snapshots/s/ctl", "delete", "snapshots/s.json", "DELETING")
            self.assertTrue(nt.wait_until(lambda: snaps(env) == [], 10), env.fs.log())
            self.assertEqual(plugin_snapshots(env), [])
            # the same after the plugin acted and before its answer came
            env.restart_plugin(["--late", "CreateSnapshot=1.5:1", "--late", "DeleteSnapshot=1.5:1",
                                "--late", "CreateVolume=1.5:1"])
            self.crash_during(env, "snapshots/ctl", "create t volume=db", "snapshots/t.json", "CREATING",
                              acted=lambda: len(plugin_snapshots(env)) == 1)
            self.assertTrue(nt.wait_until(lambda: snap(env, "t", "state") == "READY", 10),
                            env.fs.log())
            self.assertEqual(plugin_snapshots(env), [snap(env, "t", "id")])
            self.crash_during(env, "volumes/ctl", "create r2 from=snapshot:t", "volumes/r2.json", "CREATING",
                              acted=lambda: len(env.plugin.state()) == 3)
            self.assertTrue(nt.wait_until(lambda: env.state("r2") == "CREATED", 10), env.fs.log())
            self.assertEqual(len(env.plugin.state()), 3)
            self.crash_during(env, "snapshots/t/ctl", "delete", "snapshots/t.json", "DELETING",
                              acted=lambda: plugin_snapshots(env) == [])
            self.assertTrue(nt.wait_until(lambda: snaps(env) == [], 10), env.fs.log())

    def test_uncertain_create_settled_by_repeating(self):
        # every CreateSnapshot acts, then answers 2 s late: past csi_timeout,
        # each retry too
        with vt.VolEnv(["--late", "CreateSnapshot=2"], csi_timeout="500ms") as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=16M"), (True, "OK"))
            evfd = env.open_events()
            ok, e = env.ctl("snapshots/ctl", "create s volume=db")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("snapshots"))
            self.assertEqual(snap(env, "s", "state"), "CREATING")
            self.assertIn("never came", snap(env, "s", "error"))
            oid, _ = env.last_op("snapshots/s")
            self.assertTrue(nt.wait_until(lambda: len(plugin_snapshots(env)) == 1, 10))
            # the same line again repeats the call, by name: nothing more made
            self.assertEqual(env.ctl("snapshots/ctl", "create s volume=db"), (False, "ETIMEDOUT"))
            self.assertEqual(snap(env, "s", "state"), "CREATING")
            self.assertEqual(len(plugin_snapshots(env)), 1)
            # nothing written again: the background watch repeats the call
            # once answers come, and learns what the first one made
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: snap(env, "s", "state") == "READY", 10),
                            env.fs.log())
            self.assertEqual(plugin_snapshots(env), [snap(env, "s", "id")])
            self.assertTrue(nt.wait_until(
                lambda: "answered after all" in env.fs.read("operations", oid, "outcome"), 5),
                env.fs.read("operations", oid, "outcome"))
            key = 'nodefs_uncertain_outcomes_total{kind="csi.CreateSnapshot",result="made"} '
            made = [float(l[len(key):]) for l in env.fs.read("metrics", "nodefs.prom").splitlines()
                    if l.startswith(key)]
            self.assertEqual(made, [1.0])
            ev = vt.events_until(evfd, lambda x: x.get("kind") == "uncertain",
                                 lambda kept: len(kept) >= 1)
            self.assertEqual([(x["name"], x["new"], x["operation"]) for x in ev],
                             [("s", "made", oid)], ev)
            # the same for a DeleteSnapshot that acts, then answers late:
            # nothing written again, the snapshot goes by itself
            env.restart_plugin(["--late", "DeleteSnapshot=2"])
            ok, e = env.ctl("snapshots/s/ctl", "delete")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("snapshots/s"))
            self.assertEqual(snap(env, "s", "state"), "DELETING")
            did, _ = env.last_op("snapshots/s")
            self.assertTrue(nt.wait_until(lambda: plugin_snapshots(env) == [], 10))
            env.restart_plugin([])
            self.assertTrue(nt.wait_until(lambda: snaps(env) == [], 10), env.fs.log())
            self.assertIn("DeleteSnapshot of snapshot s answered after all",
                          env.fs.read("operations", did, "outcome"))
            ev = vt.events_until(evfd, lambda x: x.get("kind") == "uncertain",
                                 lambda kept: len(kept) >= 1)
            self.assertEqual([(x["name"], x["new"], x["operation"]) for x in ev],
                             [("s", "deleted", did)], ev)
            os.close(evfd)

    def test_ready_reread_until_the_plugin_says_so(self):
        with vt.VolEnv(["--snapshot-not-ready", "3"]) as env:
            self.assertEqual(env.ctl("volumes/ctl", "create db size=16M"), (True, "OK"))
            self.assertEqual(env.ctl("snapshots/ctl", "create s volume=db"), (True, "OK"))
            seen = [snap(env, "s", "ready") for _ in range(3)]
            self.assertEqual(seen, ["no", "no", "yes"])
            self.assertEqual(json.loads(env.fs.read("snapshots", "s", "info.json"))["ready"], True)


if __name__ == "__main__":
    nt.main()

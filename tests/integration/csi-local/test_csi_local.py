#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""nodefs-csi-local against python3-grpcio: Identity, the server core
(unknown methods, malformed bytes, many calls at once), and, per backing,
every Controller and Node RPC with the error codes the CSI spec lists,
idempotency, malformed requests that change nothing, and kill -9 restarts
with volumes staged and published; and (dir) the secrets --secrets FILE
requires."""

import errno
import os
import subprocess
import sys
import threading
import unittest

import nodefs_test as nt
import csilocal as cl

# argv[1]: the backing the Volumes tests run on (dir or image).
BACKING = sys.argv[1] if len(sys.argv) > 1 else "dir"


class Identity(unittest.TestCase):
    def test_identity(self):
        with cl.Local() as pl:
            r = pl.ok("Identity", "Probe")
            self.assertTrue(r.ready.value)
            r = pl.ok("Identity", "GetPluginInfo")
            self.assertEqual(r.name, "local.csi.nodefs.io")
            self.assertTrue(r.vendor_version)
            self.assertEqual(dict(r.manifest), {"backing": "dir"})
            r = pl.ok("Identity", "GetPluginCapabilities")
            svc = [c.service.type for c in r.capabilities if c.HasField("service")]
            self.assertEqual(svc, [pl.pb.PluginCapability.Service.CONTROLLER_SERVICE])
            exp = [c.volume_expansion.type for c in r.capabilities if c.HasField("volume_expansion")]
            self.assertEqual(exp, [pl.pb.PluginCapability.VolumeExpansion.ONLINE])
            r = pl.ok("Node", "NodeGetInfo")
            self.assertEqual(r.node_id, "node-1")

    def test_env_endpoint(self):
        with cl.Local() as pl:
            pl.stop()
            pl.start(env_endpoint=True)
            self.assertTrue(pl.ok("Identity", "Probe").ready.value)

    def test_server_core(self):
        with cl.Local() as pl:
            # unknown method, undecodable bytes, then the connection still works
            self.assertEqual(pl.raw("/csi.v1.Identity/Nope", b"")[0], "UNIMPLEMENTED")
            self.assertEqual(pl.raw("/csi.v1.Controller/ControllerPublishVolume", b"")[0],
                             "UNIMPLEMENTED")
            code, det = pl.raw("/csi.v1.Identity/Probe", b"\xff\xff\xff")
            self.assertEqual(code, "INVALID_ARGUMENT", det)
            # many calls at once on one connection
            errs = []

            def probe():
                for _ in range(50):
                    c, r = pl.call("Identity", "Probe")
                    if c != "OK":
                        errs.append(c)
            ts = [threading.Thread(target=probe) for _ in range(8)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            self.assertEqual(errs, [])

    def test_usage(self):
        import subprocess
        p = subprocess.run([cl.BIN, "--backing", "lvm", "--endpoint", "unix:///x"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--backing", p.stderr)
        p = subprocess.run([cl.BIN, "--endpoint", "tcp://x"], capture_output=True, text=True,
                           env={})
        self.assertEqual(p.returncode, 2)


GiB = 1 << 30


def has_cap_sys_resource():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 24))
    return False

MiB = 1 << 20


class Volumes(unittest.TestCase):
    """Controller and Node services on one backing (BACKING)."""

    def local(self):
        return cl.Local(backing=BACKING)

    def fs(self):
        return "ext4" if BACKING == "image" else ""

    def size(self):
        return 64 * MiB

    def create(self, pl, name, size=None, **kw):
        kw.setdefault("volume_capabilities", [pl.cap(fs_type=self.fs())])
        return pl.call("Controller", "CreateVolume", name=name,
                       capacity_range=pl.pb.CapacityRange(required_bytes=size or self.size()), **kw)

    def stage(self, pl, vid, path=None, cap=None):
        path = path or os.path.join(pl.tmp, "stage-" + vid)
        return pl.call("Node", "NodeStageVolume", volume_id=vid, staging_target_path=path,
                       volume_capability=cap or pl.cap(fs_type=self.fs())), path

    def publish(self, pl, vid, stage, target, ro=False, cap=None):
        return pl.call("Node", "NodePublishVolume", volume_id=vid, staging_target_path=stage,
                       target_path=target, readonly=ro,
                       volume_capability=cap or pl.cap(fs_type=self.fs()))

    def test_controller(self):
        with self.local() as pl:
            caps = [c.rpc.type for c in pl.ok("Controller", "ControllerGetCapabilities").capabilities]
            T = pl.pb.ControllerServiceCapability.RPC
            for t in ("CREATE_DELETE_VOLUME", "LIST_VOLUMES", "GET_CAPACITY", "CREATE_DELETE_SNAPSHOT",
                      "LIST_SNAPSHOTS", "CLONE_VOLUME", "EXPAND_VOLUME"):
                self.assertIn(getattr(T, t), caps)
            code, r = self.create(pl, "db", parameters={"tier": "fast"})
            self.assertEqual(code, "OK", r)
            vid = r.volume.volume_id
            self.assertGreaterEqual(r.volume.capacity_bytes, self.size())
            # idempotent by name
            code, r2 = self.create(pl, "db", parameters={"tier": "fast"})
            self.assertEqual((code, r2.volume.volume_id), ("OK", vid))
            self.assertEqual(self.create(pl, "db", parameters={"tier": "slow"})[0], "ALREADY_EXISTS")
            self.assertEqual(self.create(pl, "db", size=8 * GiB, parameters={"tier": "fast"})[0], "ALREADY_EXISTS")
            # required fields, named
            code, det = pl.call("Controller", "CreateVolume", volume_capabilities=[pl.cap()])
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("name", det)
            code, det = pl.call("Controller", "CreateVolume", name="x")
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("volume_capabilities", det)
            code, det = pl.call("Controller", "CreateVolume", name="x",
                                volume_capabilities=[pl.pb.VolumeCapability(mount={})])
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("access_mode", det)
            self.assertEqual(self.create(pl, "n" * 129)[0], "INVALID_ARGUMENT")
            code, det = pl.call("Controller", "CreateVolume", name="r", volume_capabilities=[pl.cap()],
                                capacity_range=pl.pb.CapacityRange(required_bytes=2 * GiB, limit_bytes=GiB))
            self.assertEqual(code, "OUT_OF_RANGE", det)
            code, det = self.create(pl, "huge", size=1 << 60)
            self.assertEqual(code, "OUT_OF_RANGE", det)
            # validate
            r = pl.ok("Controller", "ValidateVolumeCapabilities", volume_id=vid,
                      volume_capabilities=[pl.cap(fs_type=self.fs())])
            self.assertTrue(r.HasField("confirmed"))
            self.assertEqual(pl.call("Controller", "ValidateVolumeCapabilities", volume_id="vol-0000000000000000",
                                     volume_capabilities=[pl.cap()])[0], "NOT_FOUND")
            code, det = pl.call("Controller", "ValidateVolumeCapabilities", volume_id=vid)
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("volume_capabilities", det)
            if BACKING == "dir":
                r = pl.ok("Controller", "ValidateVolumeCapabilities", volume_id=vid,
                          volume_capabilities=[pl.cap(block=True)])
                self.assertFalse(r.HasField("confirmed"))
                self.assertIn("block", r.message)
            # capacity
            r = pl.ok("Controller", "GetCapacity")
            self.assertGreater(r.available_capacity, 0)
            # list with paging
            ids = {vid}
            for i in range(4):
                ids.add(self.create(pl, "v%d" % i)[1].volume.volume_id)
            seen, tok, pages = [], "", 0
            while True:
                r = pl.ok("Controller", "ListVolumes", max_entries=2, starting_token=tok)
                self.assertLessEqual(len(r.entries), 2)
                seen += [e.volume.volume_id for e in r.entries]
                pages += 1
                tok = r.next_token
                if not tok:
                    break
            self.assertEqual(sorted(seen), sorted(ids))
            self.assertEqual(pages, 3)
            self.assertEqual(pl.call("Controller", "ListVolumes", starting_token="bogus")[0], "ABORTED")
            self.assertEqual(pl.call("Controller", "ListVolumes", max_entries=-1)[0], "INVALID_ARGUMENT")
            # delete, idempotent
            pl.ok("Controller", "DeleteVolume", volume_id=vid)
            pl.ok("Controller", "DeleteVolume", volume_id=vid)
            self.assertEqual(pl.call("Controller", "DeleteVolume", volume_id="")[0], "INVALID_ARGUMENT")
            self.assertEqual(pl.call("Controller", "DeleteVolume", volume_id="../state")[0], "INVALID_ARGUMENT")
            self.assertNotIn(vid, [e.volume.volume_id for e in pl.ok("Controller", "ListVolumes").entries])
            self.assertEqual(self.create(pl, "db", parameters={"tier": "fast"})[0], "OK")

    def test_max_volumes(self):
        with cl.Local(backing=BACKING, args=["--max-volumes", "2"]) as pl:
            self.assertEqual(self.create(pl, "a")[0], "OK")
            self.assertEqual(self.create(pl, "b")[0], "OK")
            code, det = self.create(pl, "c")
            self.assertEqual(code, "RESOURCE_EXHAUSTED", det)
            self.assertEqual(self.create(pl, "a")[0], "OK")  # the same volume again

    def test_node(self):
        with self.local() as pl:
            T = pl.pb.NodeServiceCapability.RPC
            caps = [c.rpc.type for c in pl.ok("Node", "NodeGetCapabilities").capabilities]
            self.assertEqual(sorted(caps), sorted([T.STAGE_UNSTAGE_VOLUME, T.GET_VOLUME_STATS,
                                                   T.EXPAND_VOLUME, T.VOLUME_CONDITION]))
            vid = self.create(pl, "n1")[1].volume.volume_id
            stg = os.path.join(pl.tmp, "stage")
            # required fields and bad paths, named
            for kw, field in ((dict(staging_target_path=stg, volume_capability=pl.cap()), "volume_id"),
                              (dict(volume_id=vid, volume_capability=pl.cap()), "staging_target_path"),
                              (dict(volume_id=vid, staging_target_path=stg), "volume_capability"),
                              (dict(volume_id=vid, staging_target_path=pl.tmp + "/a/../b",
                                    volume_capability=pl.cap()), "staging_target_path"),
                              (dict(volume_id=vid, staging_target_path="relative",
                                    volume_capability=pl.cap()), "staging_target_path")):
                code, det = pl.call("Node", "NodeStageVolume", **kw)
                self.assertEqual(code, "INVALID_ARGUMENT", kw)
                self.assertIn(field, det)
            self.assertEqual(self.stage(pl, "vol-0000000000000000", stg)[0][0], "NOT_FOUND")
            (code, det), _ = self.stage(pl, vid, stg)
            self.assertEqual(code, "OK", det)
            self.assertTrue(nt.is_mounted(stg))
            self.assertEqual(self.stage(pl, vid, stg)[0][0], "OK")  # idempotent
            self.assertEqual(self.stage(pl, vid, stg + "2")[0][0], "ALREADY_EXISTS")
            t1 = os.path.join(pl.pub, "t1")
            t2 = os.path.join(pl.pub, "t2")
            self.assertEqual(self.publish(pl, vid, stg + "x", t1)[0], "FAILED_PRECONDITION")
            code, det = pl.call("Node", "NodePublishVolume", volume_id=vid, target_path=t1,
                                volume_capability=pl.cap(fs_type=self.fs()))
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("staging_target_path", det)
            cap = pl.cap(fs_type=self.fs(), flags=["noatime", "nodev"])
            self.assertEqual(self.publish(pl, vid, stg, t1, cap=cap), ("OK", pl.pb.NodePublishVolumeResponse()))
            self.assertEqual(self.publish(pl, vid, stg, t1, cap=cap)[0], "OK")  # idempotent
            self.assertEqual(self.publish(pl, vid, stg, t1, ro=True)[0], "ALREADY_EXISTS")
            opts = nt.mount_entry(t1)
            self.assertIn("noatime", str(opts))
            self.assertIn("nodev", str(opts))
            with open(os.path.join(t1, "hello"), "w") as f:
                f.write("world")
            self.assertEqual(self.publish(pl, vid, stg, t2, ro=True)[0], "OK")
            with open(os.path.join(t2, "hello")) as f:
                self.assertEqual(f.read(), "world")
            with self.assertRaises(OSError) as e:
                open(os.path.join(t2, "nope"), "w")
            self.assertEqual(e.exception.errno, errno.EROFS)
            # busy volume: no delete, no unstage
            self.assertEqual(pl.call("Controller", "DeleteVolume", volume_id=vid)[0], "FAILED_PRECONDITION")
            self.assertEqual(pl.call("Node", "NodeUnstageVolume", volume_id=vid,
                                     staging_target_path=stg)[0], "FAILED_PRECONDITION")
            # stats
            r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=t1)
            units = {u.unit: u for u in r.usage}
            U = pl.pb.VolumeUsage
            self.assertGreater(units[U.BYTES].total, 0)
            self.assertGreater(units[U.INODES].total, 0)
            self.assertFalse(r.volume_condition.abnormal, r.volume_condition.message)
            if BACKING == "image":
                self.assertLessEqual(units[U.BYTES].total, self.size())
            self.assertEqual(pl.call("Node", "NodeGetVolumeStats", volume_id=vid,
                                     volume_path=pl.pub)[0], "NOT_FOUND")
            self.assertEqual(pl.call("Node", "NodeGetVolumeStats", volume_id="vol-0000000000000000",
                                     volume_path=t1)[0], "NOT_FOUND")
            self.assertEqual(pl.call("Node", "NodeGetVolumeStats", volume_id=vid)[0], "INVALID_ARGUMENT")
            # node expand (nothing to grow): the current size
            r = pl.ok("Node", "NodeExpandVolume", volume_id=vid, volume_path=stg)
            self.assertGreaterEqual(r.capacity_bytes, self.size())
            self.assertEqual(pl.call("Node", "NodeExpandVolume", volume_id=vid, volume_path=stg,
                                     capacity_range=pl.pb.CapacityRange(required_bytes=1 << 50))[0],
                             "OUT_OF_RANGE")
            # take it all down, twice
            for t in (t1, t2, t1):
                pl.ok("Node", "NodeUnpublishVolume", volume_id=vid, target_path=t)
                self.assertFalse(nt.is_mounted(t))
                self.assertFalse(os.path.exists(t))
            self.assertEqual(pl.call("Node", "NodeUnpublishVolume", volume_id="vol-0000000000000000",
                                     target_path=t1)[0], "NOT_FOUND")
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
            self.assertFalse(nt.is_mounted(stg))
            self.assertEqual(pl.mounts(), [])
            pl.ok("Controller", "DeleteVolume", volume_id=vid)
            self.assertEqual(pl.data_files(), [])
            if BACKING == "image":
                self.assertTrue(cl.wait_loops_gone(pl.tmp), cl.loops_of(pl.tmp))

    def test_condition(self):
        with self.local() as pl:
            vid = self.create(pl, "c")[1].volume.volume_id
            (code, _), stg = self.stage(pl, vid)
            self.assertEqual(code, "OK")
            r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=stg)
            self.assertFalse(r.volume_condition.abnormal)
            data = os.path.join(pl.base, "data")
            if BACKING == "dir":
                os.rename(os.path.join(data, vid), os.path.join(pl.tmp, "moved"))
            else:
                os.truncate(os.path.join(data, vid + ".img"), 4096)
            r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=stg)
            self.assertTrue(r.volume_condition.abnormal)
            self.assertIn("backing", r.volume_condition.message)

    def test_snapshots_and_clones(self):
        with self.local() as pl:
            vid = self.create(pl, "src")[1].volume.volume_id
            (code, _), stg = self.stage(pl, vid)
            t = os.path.join(pl.pub, "t")
            self.assertEqual(self.publish(pl, vid, stg, t)[0], "OK")
            with open(os.path.join(t, "file"), "w") as f:
                f.write("v1")
            code, r = pl.call("Controller", "CreateSnapshot", source_volume_id=vid, name="s1")
            self.assertEqual(code, "OK", r)
            sid = r.snapshot.snapshot_id
            self.assertTrue(r.snapshot.ready_to_use)
            self.assertEqual(r.snapshot.source_volume_id, vid)
            self.assertGreater(r.snapshot.creation_time.seconds, 0)
            r2 = pl.ok("Controller", "CreateSnapshot", source_volume_id=vid, name="s1")
            self.assertEqual(r2.snapshot.snapshot_id, sid)
            other = self.create(pl, "other")[1].volume.volume_id
            self.assertEqual(pl.call("Controller", "CreateSnapshot", source_volume_id=other,
                                     name="s1")[0], "ALREADY_EXISTS")
            self.assertEqual(pl.call("Controller", "CreateSnapshot", source_volume_id="vol-0000000000000000",
                                     name="s2")[0], "NOT_FOUND")
            code, det = pl.call("Controller", "CreateSnapshot", source_volume_id=vid)
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("name", det)
            code, det = pl.call("Controller", "CreateSnapshot", name="s3")
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("source_volume_id", det)
            with open(os.path.join(t, "file"), "w") as f:
                f.write("v2")
            sid2 = pl.ok("Controller", "CreateSnapshot", source_volume_id=other, name="s2").snapshot.snapshot_id
            # list: all, by id, by source, paged, bad token
            self.assertEqual(sorted(e.snapshot.snapshot_id for e in pl.ok("Controller", "ListSnapshots").entries),
                             sorted([sid, sid2]))
            r = pl.ok("Controller", "ListSnapshots", snapshot_id=sid)
            self.assertEqual([e.snapshot.snapshot_id for e in r.entries], [sid])
            r = pl.ok("Controller", "ListSnapshots", source_volume_id=other)
            self.assertEqual([e.snapshot.snapshot_id for e in r.entries], [sid2])
            self.assertEqual(list(pl.ok("Controller", "ListSnapshots", snapshot_id="snap-0000000000000000").entries), [])
            r = pl.ok("Controller", "ListSnapshots", max_entries=1)
            self.assertEqual(len(r.entries), 1)
            r2 = pl.ok("Controller", "ListSnapshots", max_entries=1, starting_token=r.next_token)
            self.assertEqual(len(r2.entries), 1)
            self.assertNotEqual(r.entries[0].snapshot.snapshot_id, r2.entries[0].snapshot.snapshot_id)
            self.assertEqual(pl.call("Controller", "ListSnapshots", starting_token="x")[0], "ABORTED")
            # volumes from the snapshot (v1) and from the volume (v2)
            src = pl.pb.VolumeContentSource
            code, r = self.create(pl, "from-snap", volume_content_source=src(snapshot=src.SnapshotSource(snapshot_id=sid)))
            self.assertEqual(code, "OK", r)
            self.assertEqual(r.volume.content_source.snapshot.snapshot_id, sid)
            fs_id = r.volume.volume_id
            code, r = self.create(pl, "from-vol", size=2 * self.size(),
                                  volume_content_source=src(volume=src.VolumeSource(volume_id=vid)))
            self.assertEqual(code, "OK", r)
            fv_id = r.volume.volume_id
            self.assertEqual(self.create(pl, "from-none", volume_content_source=src(
                snapshot=src.SnapshotSource(snapshot_id="snap-0000000000000000")))[0], "NOT_FOUND")
            self.assertEqual(self.create(pl, "from-none", volume_content_source=src(
                volume=src.VolumeSource(volume_id="vol-0000000000000000")))[0], "NOT_FOUND")
            for cid, want in ((fs_id, "v1"), (fv_id, "v2")):
                (code, det), cstg = self.stage(pl, cid)
                self.assertEqual(code, "OK", det)
                with open(os.path.join(cstg, "file")) as f:
                    self.assertEqual(f.read(), want)
            if BACKING == "image":
                # the bigger clone's filesystem was grown at stage
                st = os.statvfs(os.path.join(pl.tmp, "stage-" + fv_id))
                self.assertGreater(st.f_blocks * st.f_frsize, self.size())
            pl.ok("Controller", "DeleteSnapshot", snapshot_id=sid)
            pl.ok("Controller", "DeleteSnapshot", snapshot_id=sid)
            self.assertEqual(pl.call("Controller", "DeleteSnapshot", snapshot_id="")[0], "INVALID_ARGUMENT")
            self.assertEqual([e.snapshot.snapshot_id for e in pl.ok("Controller", "ListSnapshots").entries], [sid2])

    def test_expand(self):
        with self.local() as pl:
            vid = self.create(pl, "e")[1].volume.volume_id
            (code, _), stg = self.stage(pl, vid)
            self.assertEqual(code, "OK")
            self.assertEqual(pl.call("Controller", "ControllerExpandVolume", volume_id=vid)[0], "INVALID_ARGUMENT")
            self.assertEqual(pl.call("Controller", "ControllerExpandVolume", volume_id="vol-0000000000000000",
                                     capacity_range=pl.pb.CapacityRange(required_bytes=GiB))[0], "NOT_FOUND")
            self.assertEqual(pl.call("Controller", "ControllerExpandVolume", volume_id=vid,
                                     capacity_range=pl.pb.CapacityRange(required_bytes=1 << 60))[0], "OUT_OF_RANGE")
            r = pl.ok("Controller", "ControllerExpandVolume", volume_id=vid,
                      capacity_range=pl.pb.CapacityRange(required_bytes=2 * self.size()))
            self.assertEqual(r.capacity_bytes, 2 * self.size())
            self.assertEqual(r.node_expansion_required, BACKING == "image")
            # smaller: never shrinks, answers the size it has
            r = pl.ok("Controller", "ControllerExpandVolume", volume_id=vid,
                      capacity_range=pl.pb.CapacityRange(required_bytes=self.size()))
            self.assertEqual(r.capacity_bytes, 2 * self.size())
            code, r = pl.call("Node", "NodeExpandVolume", volume_id=vid, volume_path=stg,
                              capacity_range=pl.pb.CapacityRange(required_bytes=2 * self.size()))
            if BACKING == "image" and not has_cap_sys_resource():
                # ext4 grows online only with CAP_SYS_RESOURCE: the error
                # says so, and a new stage grows it offline
                self.assertEqual(code, "INTERNAL")
                self.assertIn("CAP_SYS_RESOURCE", r)
                pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
                self.assertEqual(self.stage(pl, vid, stg)[0][0], "OK")
                r = pl.ok("Node", "NodeExpandVolume", volume_id=vid, volume_path=stg)
            else:
                self.assertEqual(code, "OK", r)
            self.assertEqual(r.capacity_bytes, 2 * self.size())
            if BACKING == "image":
                st = os.statvfs(stg)
                self.assertGreater(st.f_blocks * st.f_frsize, self.size())
            self.assertEqual(pl.ok("Controller", "ListVolumes").entries[0].volume.capacity_bytes, 2 * self.size())

    def test_unknown_id_first(self):
        """Every RPC that takes an id answers NOT_FOUND for a well-formed
        unknown one, whatever else is wrong or missing in the request (the
        spec's error tables); the calls an unknown id answers otherwise
        (deletes: OK; ListSnapshots by id: empty) still do."""
        with self.local() as pl:
            vid = self.create(pl, "known")[1].volume.volume_id
            before = (pl.state_files(), pl.data_files(), pl.mounts())
            nv, ns = "vol-00000000deadbeef", "snap-00000000deadbeef"
            src = pl.pb.VolumeContentSource
            calls = [
                # nothing else given, or everything else wrong
                ("Controller", "ValidateVolumeCapabilities", dict(volume_id=nv)),
                ("Controller", "ValidateVolumeCapabilities", dict(volume_id=nv, volume_capabilities=[pl.pb.VolumeCapability()])),
                ("Controller", "ControllerExpandVolume", dict(volume_id=nv)),
                ("Controller", "ControllerExpandVolume", dict(volume_id=nv, capacity_range=pl.pb.CapacityRange(required_bytes=-1))),
                ("Controller", "ControllerGetVolume", dict(volume_id=nv)),
                ("Controller", "ControllerModifyVolume", dict(volume_id=nv)),
                ("Controller", "ControllerModifyVolume", dict(volume_id=nv, mutable_parameters={"": "x"})),
                ("Controller", "CreateSnapshot", dict(source_volume_id=nv)),
                ("Controller", "CreateSnapshot", dict(source_volume_id=nv, name="a\nb")),
                ("Controller", "CreateVolume", dict(volume_content_source=src(snapshot=src.SnapshotSource(snapshot_id=ns)))),
                ("Controller", "CreateVolume", dict(name="x", volume_capabilities=[pl.pb.VolumeCapability()],
                                                    volume_content_source=src(volume=src.VolumeSource(volume_id=nv)))),
                ("Node", "NodeStageVolume", dict(volume_id=nv)),
                ("Node", "NodeStageVolume", dict(volume_id=nv, staging_target_path="relative", volume_capability=pl.pb.VolumeCapability())),
                ("Node", "NodeUnstageVolume", dict(volume_id=nv)),
                ("Node", "NodeUnstageVolume", dict(volume_id=nv, staging_target_path="x/../y")),
                ("Node", "NodePublishVolume", dict(volume_id=nv)),
                ("Node", "NodePublishVolume", dict(volume_id=nv, target_path="/", staging_target_path="rel")),
                ("Node", "NodeUnpublishVolume", dict(volume_id=nv)),
                ("Node", "NodeUnpublishVolume", dict(volume_id=nv, target_path="x/../y")),
                ("Node", "NodeGetVolumeStats", dict(volume_id=nv)),
                ("Node", "NodeGetVolumeStats", dict(volume_id=nv, volume_path="relative")),
                ("Node", "NodeExpandVolume", dict(volume_id=nv)),
                ("Node", "NodeExpandVolume", dict(volume_id=nv, volume_path="relative",
                                                  capacity_range=pl.pb.CapacityRange(required_bytes=2, limit_bytes=1))),
            ]
            for svc, rpc, kw in calls:
                code, det = pl.call(svc, rpc, **kw)
                self.assertEqual(code, "NOT_FOUND", (rpc, kw, det))
                self.assertIn("does not exist", det, rpc)
            # an empty id is a missing field, and bytes that are no id an invalid one
            for rpc, svc in (("NodeGetVolumeStats", "Node"), ("ControllerGetVolume", "Controller"),
                             ("ControllerModifyVolume", "Controller")):
                self.assertEqual(pl.call(svc, rpc, volume_id="")[0], "INVALID_ARGUMENT", rpc)
                self.assertEqual(pl.call(svc, rpc, volume_id="../x")[0], "INVALID_ARGUMENT", rpc)
            # the same calls with the known id get past it to the other fields
            self.assertEqual(pl.call("Node", "NodeGetVolumeStats", volume_id=vid, volume_path="relative")[0],
                             "INVALID_ARGUMENT")
            self.assertEqual(pl.call("Node", "NodeExpandVolume", volume_id=vid, volume_path="relative")[0],
                             "INVALID_ARGUMENT")
            # unknown ids the spec answers otherwise
            pl.ok("Controller", "DeleteVolume", volume_id=nv)
            pl.ok("Controller", "DeleteSnapshot", snapshot_id=ns)
            self.assertEqual(len(pl.ok("Controller", "ListSnapshots", snapshot_id=ns).entries), 0)
            self.assertEqual((pl.state_files(), pl.data_files(), pl.mounts()), before)

    def test_get_and_modify(self):
        """ControllerGetVolume (GET_VOLUME, VOLUME_CONDITION): the volume,
        where it is published, its condition; ControllerModifyVolume
        (MODIFY_VOLUME): mutable parameters merged into the record, kept
        over a restart."""
        with self.local() as pl:
            T = pl.pb.ControllerServiceCapability.RPC
            caps = [c.rpc.type for c in pl.ok("Controller", "ControllerGetCapabilities").capabilities]
            for t in ("GET_VOLUME", "MODIFY_VOLUME", "VOLUME_CONDITION"):
                self.assertIn(getattr(T, t), caps)
            code, r = self.create(pl, "g", mutable_parameters={"iops": "100"})
            self.assertEqual(code, "OK", r)
            vid = r.volume.volume_id
            r = pl.ok("Controller", "ControllerGetVolume", volume_id=vid)
            self.assertEqual(r.volume.volume_id, vid)
            self.assertEqual(r.volume.capacity_bytes, self.size())
            self.assertEqual(r.volume.volume_context["backing"], BACKING)
            self.assertFalse(r.status.volume_condition.abnormal)
            self.assertEqual(list(r.status.published_node_ids), [])
            (code, _), stg = self.stage(pl, vid)
            self.assertEqual(code, "OK")
            r = pl.ok("Controller", "ControllerGetVolume", volume_id=vid)
            self.assertEqual(list(r.status.published_node_ids), ["node-1"])
            pl.ok("Controller", "ControllerModifyVolume", volume_id=vid, mutable_parameters={"iops": "200", "tier": "b"})
            code, det = pl.call("Controller", "ControllerModifyVolume", volume_id=vid)
            self.assertEqual(code, "INVALID_ARGUMENT")
            self.assertIn("mutable_parameters", det)
            self.assertEqual(pl.call("Controller", "ControllerModifyVolume", volume_id=vid,
                                     mutable_parameters={"k": "v" * 200})[0], "INVALID_ARGUMENT")
            rec = open(os.path.join(pl.base, "state", vid)).read()
            self.assertIn("mparams iops%3D200,tier%3Db,", rec)
            pl.kill9()
            pl.start()
            self.assertIn("mparams iops%3D200,tier%3Db,", open(os.path.join(pl.base, "state", vid)).read())
            pl.ok("Controller", "ControllerModifyVolume", volume_id=vid, mutable_parameters={"tier": "c"})
            self.assertIn("mparams iops%3D200,tier%3Dc,", open(os.path.join(pl.base, "state", vid)).read())
            # the condition follows the data
            data = os.path.join(pl.base, "data")
            if BACKING == "dir":
                os.rename(os.path.join(data, vid), os.path.join(pl.tmp, "moved"))
            else:
                os.truncate(os.path.join(data, vid + ".img"), 4096)
            r = pl.ok("Controller", "ControllerGetVolume", volume_id=vid)
            self.assertTrue(r.status.volume_condition.abnormal)
            self.assertIn("backing", r.status.volume_condition.message)

    def test_malformed_changes_nothing(self):
        with self.local() as pl:
            vid = self.create(pl, "keep")[1].volume.volume_id
            (code, _), stg = self.stage(pl, vid)
            before = (pl.state_files(), pl.data_files(), pl.mounts())
            long = "x" * 5000
            bad = [
                ("Controller", "CreateVolume", dict(name=long, volume_capabilities=[pl.cap()])),
                ("Controller", "CreateVolume", dict(name="a\nb", volume_capabilities=[pl.cap()])),
                ("Controller", "CreateVolume", dict(name="ok", volume_capabilities=[pl.pb.VolumeCapability()])),
                ("Controller", "CreateVolume", dict(name="ok", volume_capabilities=[pl.cap(mode="UNKNOWN")])),
                ("Controller", "CreateVolume", dict(name="ok", volume_capabilities=[pl.cap()],
                                                    capacity_range=pl.pb.CapacityRange(required_bytes=-1))),
                ("Controller", "DeleteVolume", dict(volume_id="../" + vid)),
                ("Controller", "DeleteVolume", dict(volume_id=long)),
                ("Controller", "ControllerExpandVolume", dict(volume_id="..", capacity_range=pl.pb.CapacityRange(required_bytes=1))),
                ("Controller", "CreateSnapshot", dict(source_volume_id="../../etc", name="s")),
                ("Controller", "CreateSnapshot", dict(source_volume_id=vid, name=long)),
                ("Controller", "DeleteSnapshot", dict(snapshot_id="../state/" + vid)),
                ("Node", "NodeStageVolume", dict(volume_id=vid, staging_target_path=stg + "/../x", volume_capability=pl.cap())),
                ("Node", "NodeStageVolume", dict(volume_id="..", staging_target_path=stg, volume_capability=pl.cap())),
                ("Node", "NodePublishVolume", dict(volume_id=vid, staging_target_path=stg, target_path="/", volume_capability=pl.cap())),
                ("Node", "NodePublishVolume", dict(volume_id=vid, staging_target_path=stg, target_path=pl.pub + "/a/../../x", volume_capability=pl.cap())),
                ("Node", "NodePublishVolume", dict(volume_id=vid, staging_target_path=stg, target_path="/" + long, volume_capability=pl.cap())),
                ("Node", "NodePublishVolume", dict(volume_id=vid, staging_target_path=stg, target_path=pl.pub + "/t", volume_capability=pl.cap(flags=["bogus,flag"]))),
                ("Node", "NodeUnpublishVolume", dict(volume_id=vid, target_path="x/../y")),
                ("Node", "NodeUnstageVolume", dict(volume_id=vid, staging_target_path="")),
                ("Node", "NodeGetVolumeStats", dict(volume_id=vid, volume_path="../" + stg)),
                ("Node", "NodeExpandVolume", dict(volume_id=vid, volume_path="")),
                ("Controller", "ValidateVolumeCapabilities", dict(volume_id="/etc", volume_capabilities=[pl.cap()])),
            ]
            for svc, rpc, kw in bad:
                code, det = pl.call(svc, rpc, **kw)
                self.assertEqual(code, "INVALID_ARGUMENT", (rpc, kw, det))
            # raw garbage for every method
            for rpc in ("CreateVolume", "DeleteVolume", "ListVolumes", "CreateSnapshot"):
                self.assertEqual(pl.raw("/csi.v1.Controller/" + rpc, b"\x0a\xff\xff\xff\xff\x0f")[0],
                                 "INVALID_ARGUMENT")
            for rpc in ("NodeStageVolume", "NodePublishVolume", "NodeGetVolumeStats"):
                self.assertEqual(pl.raw("/csi.v1.Node/" + rpc, b"\x12\x05ab")[0], "INVALID_ARGUMENT")
            self.assertEqual((pl.state_files(), pl.data_files(), pl.mounts()), before)
            self.assertTrue(pl.ok("Identity", "Probe").ready.value)

    def test_kill9_restart(self):
        with self.local() as pl:
            vid = self.create(pl, "p")[1].volume.volume_id
            other = self.create(pl, "q")[1].volume.volume_id
            (code, _), stg = self.stage(pl, vid)
            t = os.path.join(pl.pub, "t")
            self.assertEqual(self.publish(pl, vid, stg, t)[0], "OK")
            with open(os.path.join(t, "f"), "w") as f:
                f.write("kept")
            sid = pl.ok("Controller", "CreateSnapshot", source_volume_id=other, name="qs").snapshot.snapshot_id
            # a half-made volume, as a crash between its two records leaves it
            half = "vol-00000000000000ff"
            with open(os.path.join(pl.base, "state", half), "w") as f:
                f.write("id %s\nname half\nstate creating\nbacking %s\nsize 1\n" % (half, BACKING))
            os.mkdir(os.path.join(pl.base, "data", half))
            # data a crash left before its first record was written
            orphan = "vol-00000000000000fe" + (".img" if BACKING == "image" else "")
            with open(os.path.join(pl.base, "data", orphan), "w") if BACKING == "image" \
                    else open(os.devnull) as f:
                pass
            if BACKING == "dir":
                os.mkdir(os.path.join(pl.base, "data", orphan))
            with open(os.path.join(pl.base, "state", ".%s.tmp" % other), "w") as f:
                f.write("garbage")
            self.assertEqual(pl.kill9(), -9)
            pl.start()
            self.assertEqual(sorted(e.volume.volume_id for e in pl.ok("Controller", "ListVolumes").entries),
                             sorted([vid, other]))
            self.assertNotIn(half, pl.data_files())
            self.assertNotIn(orphan, pl.data_files())
            self.assertNotIn(".%s.tmp" % other, os.listdir(os.path.join(pl.base, "state")))
            self.assertEqual([e.snapshot.snapshot_id for e in pl.ok("Controller", "ListSnapshots").entries], [sid])
            self.assertTrue(nt.is_mounted(t))
            with open(os.path.join(t, "f")) as f:
                self.assertEqual(f.read(), "kept")
            self.assertEqual(self.stage(pl, vid, stg)[0][0], "OK")
            self.assertEqual(self.publish(pl, vid, stg, t)[0], "OK")
            r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=t)
            self.assertFalse(r.volume_condition.abnormal, r.volume_condition.message)
            self.assertEqual(self.create(pl, "p")[1].volume.volume_id, vid)
            pl.ok("Node", "NodeUnpublishVolume", volume_id=vid, target_path=t)
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
            pl.ok("Controller", "DeleteVolume", volume_id=vid)
            self.assertEqual(pl.mounts(), [])

    def test_mounts_gone_behind_its_back(self):
        # What a reboot does: the mounts go, the records stay. A stage or a
        # publish the records call done is checked against the mount
        # table: publish refuses while the stage is not mounted, stage
        # mounts it again, publish binds again, and the data is there.
        # image: with its loop device kept (an unmount alone) and gone (a
        # reboot: a new one is attached).
        for detach in ((False, True) if BACKING == "image" else (False,)):
            with self.local() as pl:
                vid = self.create(pl, "g")[1].volume.volume_id
                (code, _), stg = self.stage(pl, vid)
                self.assertEqual(code, "OK")
                t = os.path.join(pl.pub, "t")
                self.assertEqual(self.publish(pl, vid, stg, t)[0], "OK")
                with open(os.path.join(t, "f"), "w") as f:
                    f.write("kept")
                loops = cl.loops_of(pl.base)
                for path in (t, stg):
                    subprocess.run(["umount", path], check=True)
                if detach:
                    for dev in loops:
                        subprocess.run(["losetup", "-d", dev], check=True)
                    self.assertTrue(cl.wait_loops_gone(pl.base))
                self.assertEqual(pl.mounts(), [])
                code, msg = self.publish(pl, vid, stg, t)
                self.assertEqual(code, "FAILED_PRECONDITION", "publish on the record's word")
                self.assertIn("stage it again", str(msg))
                self.assertEqual(self.stage(pl, vid, stg)[0][0], "OK")
                self.assertTrue(nt.is_mounted(stg))
                self.assertEqual(self.publish(pl, vid, stg, t)[0], "OK")
                self.assertTrue(nt.is_mounted(t))
                with open(os.path.join(t, "f")) as f:
                    self.assertEqual(f.read(), "kept")
                # written at the target, seen at the stage: one volume
                with open(os.path.join(t, "g"), "w") as f:
                    f.write("new")
                with open(os.path.join(stg, "g")) as f:
                    self.assertEqual(f.read(), "new")
                if BACKING == "image":
                    self.assertEqual(len(cl.loops_of(pl.base)), 1, "one loop device")
                pl.ok("Node", "NodeUnpublishVolume", volume_id=vid, target_path=t)
                pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
                pl.ok("Controller", "DeleteVolume", volume_id=vid)
                self.assertEqual(pl.mounts(), [])

    def test_concurrent_calls(self):
        with self.local() as pl:
            errs = []

            def work(i):
                for j in range(3):
                    code, r = self.create(pl, "c%d-%d" % (i, j))
                    if code != "OK":
                        errs.append((code, r))
                        continue
                    code, r = pl.call("Controller", "DeleteVolume", volume_id=r.volume.volume_id)
                    if code != "OK":
                        errs.append((code, r))
            ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
            [t.start() for t in ts]
            for _ in range(20):
                self.assertTrue(pl.ok("Identity", "Probe").ready.value)
            [t.join() for t in ts]
            self.assertEqual(errs, [])
            self.assertEqual(list(pl.ok("Controller", "ListVolumes").entries), [])


class ImageOnly(unittest.TestCase):
    """What only the image backing does: block access, xfs, size enforced."""

    def test_block(self):
        with cl.Local(backing="image") as pl:
            code, r = pl.call("Controller", "CreateVolume", name="b", volume_capabilities=[pl.cap(block=True)],
                              capacity_range=pl.pb.CapacityRange(required_bytes=16 * MiB))
            self.assertEqual(code, "OK", r)
            vid = r.volume.volume_id
            stg = os.path.join(pl.tmp, "bstage")
            os.mkdir(stg)
            pl.ok("Node", "NodeStageVolume", volume_id=vid, staging_target_path=stg,
                  volume_capability=pl.cap(block=True))
            # a filesystem stage of a block volume is refused
            self.assertEqual(pl.call("Controller", "ValidateVolumeCapabilities", volume_id=vid,
                                     volume_capabilities=[pl.cap(fs_type="ext4")])[1].HasField("confirmed"), False)
            self.assertEqual(pl.call("Node", "NodeStageVolume", volume_id=vid, staging_target_path=stg + "m",
                                     volume_capability=pl.cap())[0], "INVALID_ARGUMENT")
            t = os.path.join(pl.pub, "dev")
            pl.ok("Node", "NodePublishVolume", volume_id=vid, staging_target_path=stg, target_path=t,
                  volume_capability=pl.cap(block=True))
            import stat
            self.assertTrue(stat.S_ISBLK(os.stat(t).st_mode))
            fd = os.open(t, os.O_RDONLY)
            try:
                self.assertEqual(os.lseek(fd, 0, os.SEEK_END), 16 * MiB)
            finally:
                os.close(fd)
            r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=t)
            self.assertEqual(r.usage[0].total, 16 * MiB)
            pl.ok("Controller", "ControllerExpandVolume", volume_id=vid,
                  capacity_range=pl.pb.CapacityRange(required_bytes=32 * MiB))
            pl.ok("Node", "NodeExpandVolume", volume_id=vid, volume_path=t)
            fd = os.open(t, os.O_RDONLY)
            try:
                self.assertEqual(os.lseek(fd, 0, os.SEEK_END), 32 * MiB)
            finally:
                os.close(fd)
            pl.ok("Node", "NodeUnpublishVolume", volume_id=vid, target_path=t)
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
            self.assertTrue(cl.wait_loops_gone(pl.tmp), cl.loops_of(pl.tmp))

    def test_xfs_and_enforced_size(self):
        nt.requires("prog:mkfs.xfs:xfsprogs")
        with cl.Local(backing="image") as pl:
            self.assertEqual(pl.call("Controller", "CreateVolume", name="small", volume_capabilities=[pl.cap(fs_type="xfs")],
                                     capacity_range=pl.pb.CapacityRange(required_bytes=MiB, limit_bytes=100 * MiB))[0],
                             "OUT_OF_RANGE")
            self.assertEqual(pl.call("Controller", "CreateVolume", name="zfs", volume_capabilities=[pl.cap(fs_type="zfs")])[0],
                             "INVALID_ARGUMENT")
            code, r = pl.call("Controller", "CreateVolume", name="x", volume_capabilities=[pl.cap(fs_type="xfs")],
                              capacity_range=pl.pb.CapacityRange(required_bytes=300 * MiB))
            self.assertEqual(code, "OK", r)
            vid = r.volume.volume_id
            stg = os.path.join(pl.tmp, "xstage")
            pl.ok("Node", "NodeStageVolume", volume_id=vid, staging_target_path=stg,
                  volume_capability=pl.cap(fs_type="xfs"))
            self.assertIn("xfs", str(nt.mount_entry(stg)))
            self.assertEqual(pl.call("Node", "NodeStageVolume", volume_id=vid, staging_target_path=stg,
                                     volume_capability=pl.cap(fs_type="ext4"))[0], "INVALID_ARGUMENT")
            # the size is enforced: writing past it fails with ENOSPC
            with self.assertRaises(OSError) as e:
                with open(os.path.join(stg, "big"), "wb") as f:
                    for _ in range(400):
                        f.write(b"\0" * MiB)
            self.assertEqual(e.exception.errno, errno.ENOSPC)
            os.unlink(os.path.join(stg, "big"))
            pl.ok("Controller", "ControllerExpandVolume", volume_id=vid,
                  capacity_range=pl.pb.CapacityRange(required_bytes=400 * MiB))
            pl.ok("Node", "NodeExpandVolume", volume_id=vid, volume_path=stg)
            st = os.statvfs(stg)
            self.assertGreater(st.f_blocks * st.f_frsize, 330 * MiB)
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)


class DirCapacity(unittest.TestCase):
    """dir volumes report their own capacity in NodeGetVolumeStats: the
    size asked, the bytes and inodes their tree uses; the volume context
    says whether a project quota enforces the size ("none" here: this
    machine's kernel is built without CONFIG_QUOTA, so no filesystem under
    the plugin keeps project quotas)."""

    def stats(self, pl, vid, path):
        r = pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=path)
        return {u.unit: u for u in r.usage}

    def test_counted_over_the_tree(self):
        with cl.Local() as pl:
            r = pl.ok("Controller", "CreateVolume", name="c", volume_capabilities=[pl.cap()],
                      capacity_range=pl.pb.CapacityRange(required_bytes=64 * MiB))
            vid = r.volume.volume_id
            self.assertEqual(r.volume.volume_context["quota"], "none")
            stg = os.path.join(pl.tmp, "stg")
            pl.ok("Node", "NodeStageVolume", volume_id=vid, staging_target_path=stg, volume_capability=pl.cap())
            U = pl.pb.VolumeUsage
            u = self.stats(pl, vid, stg)
            self.assertEqual(u[U.BYTES].total, 64 * MiB)
            self.assertLess(u[U.BYTES].used, MiB)
            os.mkdir(os.path.join(stg, "d"))
            for i in range(3):
                with open(os.path.join(stg, "d", "f%d" % i), "wb") as f:
                    f.write(os.urandom(MiB))
                    os.fsync(f.fileno())
            u = self.stats(pl, vid, stg)
            self.assertEqual(u[U.BYTES].total, 64 * MiB)
            self.assertGreaterEqual(u[U.BYTES].used, 3 * MiB)
            self.assertLess(u[U.BYTES].used, 4 * MiB)
            self.assertEqual(u[U.BYTES].available, 64 * MiB - u[U.BYTES].used)
            self.assertEqual(u[U.INODES].used, 5)  # the root, d, 3 files
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)


class Secrets(unittest.TestCase):
    """--secrets FILE: every RPC whose request has a secrets field needs
    each key of the file with its value, else UNAUTHENTICATED (checked
    before any other field, nothing changed); the others need none; a bad
    file stops the plugin from starting; no value reaches its log."""

    SECRET = "pa55-XYZZY-0815"

    def setUp(self):
        import tempfile
        self.sdir = tempfile.mkdtemp(prefix="nodefs-csilocal-sec-")
        self.addCleanup(__import__("shutil").rmtree, self.sdir, True)
        self.sfile = self.write("# what every call must carry\nuser=bob\n\npassword=%s\n"
                                % self.SECRET)

    def write(self, text, mode=0o600, name="secrets"):
        path = os.path.join(self.sdir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def test_required_on_every_call_that_carries_them(self):
        good = {"user": "bob", "password": self.SECRET}
        wrong = {"user": "bob", "password": "guess"}
        with cl.Local(args=["--secrets", self.sfile]) as pl:
            # no secrets field: nothing needed
            self.assertTrue(pl.ok("Identity", "Probe").ready.value)
            pl.ok("Node", "NodeGetInfo")
            pl.ok("Controller", "GetCapacity")
            pl.ok("Controller", "ListVolumes")
            # checked first: a request missing its name too is UNAUTHENTICATED
            code, det = pl.call("Controller", "CreateVolume")
            self.assertEqual((code, det), ("UNAUTHENTICATED", "secret 'user' is required and missing"))
            cap = [pl.cap()]
            for sec, want in (({}, "secret 'user' is required and missing"),
                              ({"user": "bob"}, "secret 'password' is required and missing"),
                              (wrong, "secret 'password' does not match"),
                              ({"user": "bob", "password": self.SECRET + "x"},
                               "secret 'password' does not match")):
                code, det = pl.call("Controller", "CreateVolume", name="v", volume_capabilities=cap,
                                    secrets=sec)
                self.assertEqual((code, det), ("UNAUTHENTICATED", want))
            self.assertEqual(os.listdir(os.path.join(pl.base, "state")), [])
            # extra keys are fine
            vid = pl.ok("Controller", "CreateVolume", name="v", volume_capabilities=cap,
                        secrets=dict(good, extra="1")).volume.volume_id
            stg, tgt = os.path.join(pl.tmp, "stage"), os.path.join(pl.pub, "t")
            calls = [
                ("Controller", "ValidateVolumeCapabilities", dict(volume_id=vid, volume_capabilities=cap)),
                ("Controller", "ControllerExpandVolume",
                 dict(volume_id=vid, capacity_range=pl.pb.CapacityRange(required_bytes=8 * MiB))),
                ("Node", "NodeStageVolume", dict(volume_id=vid, staging_target_path=stg,
                                                 volume_capability=cap[0])),
                ("Node", "NodePublishVolume", dict(volume_id=vid, staging_target_path=stg,
                                                   target_path=tgt, volume_capability=cap[0])),
                ("Node", "NodeExpandVolume", dict(volume_id=vid, volume_path=tgt)),
                ("Controller", "CreateSnapshot", dict(source_volume_id=vid, name="s")),
                ("Controller", "ListSnapshots", dict()),
            ]
            for svc, rpc, kw in calls:
                before = pl.state_files()
                for sec in ({}, wrong):
                    code, det = pl.call(svc, rpc, secrets=sec, **kw)
                    self.assertEqual(code, "UNAUTHENTICATED", (rpc, det))
                    self.assertEqual(pl.state_files(), before, rpc)
                code, r = pl.call(svc, rpc, secrets=good, **kw)
                self.assertEqual(code, "OK", (rpc, r))
            self.assertTrue(nt.is_mounted(tgt))
            sid = pl.ok("Controller", "ListSnapshots", secrets=good).entries[0].snapshot.snapshot_id
            # the node calls without a secrets field need none
            pl.ok("Node", "NodeGetVolumeStats", volume_id=vid, volume_path=tgt)
            pl.ok("Node", "NodeUnpublishVolume", volume_id=vid, target_path=tgt)
            pl.ok("Node", "NodeUnstageVolume", volume_id=vid, staging_target_path=stg)
            for rpc, kw in (("DeleteSnapshot", dict(snapshot_id=sid)),
                            ("DeleteVolume", dict(volume_id=vid))):
                self.assertEqual(pl.call("Controller", rpc, secrets=wrong, **kw)[0],
                                 "UNAUTHENTICATED", rpc)
                pl.ok("Controller", rpc, secrets=good, **kw)
            self.assertEqual(os.listdir(os.path.join(pl.base, "state")), [])
            log = pl.log()
            self.assertIn("secrets required", log)
            self.assertIn("UNAUTHENTICATED", log)
            self.assertNotIn(self.SECRET, log)
            self.assertNotIn("guess", log)

    def test_a_bad_file_stops_the_start(self):
        import subprocess
        for text, mode, want in (("password=x\n", 0o644, "owned by root"),
                                 ("pass word=x\n", 0o600, "a key is"),
                                 ("just words\n", 0o600, "expected key=value"),
                                 ("# nothing\n", 0o600, "no key=value")):
            path = self.write(text, mode, "bad")
            p = subprocess.run([cl.BIN, "--endpoint", "unix://%s/s.sock" % self.sdir,
                                "--base-dir", self.sdir + "/base", "--secrets", path],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(path, p.stderr)
            self.assertIn(want, p.stderr)
            self.assertNotIn("password=x", p.stderr)
        p = subprocess.run([cl.BIN, "--endpoint", "unix://%s/s.sock" % self.sdir,
                            "--base-dir", self.sdir + "/base", "--secrets", self.sdir + "/none"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("No such file", p.stderr)


if __name__ == "__main__":
    cl.require()
    if BACKING == "image":
        why = cl.loop_devices_ok()
        if why:
            nt.skip("image backing: " + why)
        sys.argv[1:] = ["Volumes", "ImageOnly"]
    else:
        sys.argv[1:] = ["Identity", "Volumes", "DirCapacity", "Secrets"]
    nt.main(requires=None)

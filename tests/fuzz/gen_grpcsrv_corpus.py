#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Write the seeds of corpus/grpcsrv: HTTP/2 client byte streams (preface,
SETTINGS, then HEADERS + DATA per request, HPACK literals without Huffman)
carrying CSI requests encoded by python3-protobuf stubs generated from
csi/csi.proto (tests/fixtures/csi/plugin.py's loader), plus malformed ones.
The first byte of each seed is the fuzz target's mode byte.

    tests/fuzz/gen_grpcsrv_corpus.py   (from the source root; rewrites the dir)
"""
import hashlib
import importlib.util
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
spec = importlib.util.spec_from_file_location("p", os.path.join(ROOT, "tests/fixtures/csi/plugin.py"))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
pb, _ = mod.load_stubs(os.path.join(ROOT, "csi/csi.proto"))

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(typ, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([typ, flags]) + struct.pack(">I", sid) + payload


def lit(name, value):
    def ln(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + ln(name.encode()) + ln(value.encode())


def request(sid, path, msg, ct="application/grpc", end_on_headers=False, prefix=None):
    hb = (lit(":method", "POST") + lit(":scheme", "http") + lit(":path", path) +
          lit(":authority", "localhost") + lit("content-type", ct) + lit("te", "trailers") +
          lit("grpc-timeout", "5S"))
    out = frame(1, 0x4 | (0x1 if end_on_headers else 0), sid, hb)
    if not end_on_headers:
        body = (prefix if prefix is not None else b"\x00" + struct.pack(">I", len(msg))) + msg
        out += frame(0, 0x1, sid, body)
    return out


def cap(block=False, fs="ext4"):
    c = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(mode=1))
    if block:
        c.block.SetInParent()
    else:
        c.mount.fs_type = fs
        c.mount.mount_flags.append("noatime")
    return c


reqs = [
    ("Identity/Probe", pb.ProbeRequest()),
    ("Identity/GetPluginInfo", pb.GetPluginInfoRequest()),
    ("Identity/GetPluginCapabilities", pb.GetPluginCapabilitiesRequest()),
    ("Controller/CreateVolume", pb.CreateVolumeRequest(
        name="db", capacity_range=pb.CapacityRange(required_bytes=1 << 30),
        volume_capabilities=[cap()], parameters={"tier": "fast"},
        volume_content_source=pb.VolumeContentSource(
            snapshot=pb.VolumeContentSource.SnapshotSource(snapshot_id="snap-0123456789abcdef")))),
    ("Controller/DeleteVolume", pb.DeleteVolumeRequest(volume_id="vol-0123456789abcdef")),
    ("Controller/ValidateVolumeCapabilities", pb.ValidateVolumeCapabilitiesRequest(
        volume_id="vol-0123456789abcdef", volume_capabilities=[cap(block=True)])),
    ("Controller/ListVolumes", pb.ListVolumesRequest(max_entries=2, starting_token="vol-0123456789abcdef")),
    ("Controller/GetCapacity", pb.GetCapacityRequest(volume_capabilities=[cap()])),
    ("Controller/ControllerExpandVolume", pb.ControllerExpandVolumeRequest(
        volume_id="vol-0123456789abcdef", capacity_range=pb.CapacityRange(required_bytes=2 << 30))),
    ("Controller/CreateSnapshot", pb.CreateSnapshotRequest(source_volume_id="vol-0123456789abcdef", name="s")),
    ("Controller/ListSnapshots", pb.ListSnapshotsRequest(max_entries=1, source_volume_id="vol-0123456789abcdef")),
    ("Node/NodeStageVolume", pb.NodeStageVolumeRequest(
        volume_id="vol-0123456789abcdef", staging_target_path="/tmp/s", volume_capability=cap())),
    ("Node/NodePublishVolume", pb.NodePublishVolumeRequest(
        volume_id="vol-0123456789abcdef", staging_target_path="/tmp/s", target_path="/srv/../db",
        volume_capability=cap(), readonly=True)),
    ("Node/NodeGetVolumeStats", pb.NodeGetVolumeStatsRequest(volume_id="vol-0123456789abcdef", volume_path="/srv/db")),
    ("Node/NodeExpandVolume", pb.NodeExpandVolumeRequest(volume_id="vol-0123456789abcdef", volume_path="/srv/db")),
    ("Node/NodeGetInfo", pb.NodeGetInfoRequest()),
]

seeds = []
settings = frame(4, 0, 0, b"")
for i, (path, m) in enumerate(reqs):
    body = m.SerializeToString()
    mode = bytes([(0x80 if i % 2 else 0) | (i * 7 % 64)])
    seeds.append(mode + PREFACE + settings + request(1, "/csi.v1." + path, body))
# many requests on one connection, answered later
many = PREFACE + settings
for i, (path, m) in enumerate(reqs):
    many += request(1 + 2 * i, "/csi.v1." + path, m.SerializeToString())
seeds.append(b"\x8f" + many)
seeds.append(b"\x7f" + many + frame(7, 0, 0, struct.pack(">II", 31, 0)))  # GOAWAY
# malformed: no body, wrong content-type, compressed flag, bad prefix, reset, bad protobuf, unknown path
seeds.append(b"\x00" + PREFACE + settings + request(1, "/csi.v1.Identity/Probe", b"", end_on_headers=True))
seeds.append(b"\x00" + PREFACE + settings + request(1, "/csi.v1.Identity/Probe", b"", ct="text/plain"))
seeds.append(b"\x00" + PREFACE + settings + request(1, "/csi.v1.Identity/Probe", b"\x08\x01", prefix=b"\x01\x00\x00\x00\x02"))
seeds.append(b"\x00" + PREFACE + settings + request(1, "/csi.v1.Identity/Probe", b"\x08", prefix=b"\x00\x7f\xff\xff\xff"))
seeds.append(b"\x03" + PREFACE + settings + request(1, "/csi.v1.Controller/DeleteVolume", b"\x0a\xff\xff\xff\xff\x0f"))
seeds.append(b"\x03" + PREFACE + settings + request(1, "/csi.v1.Nope/Nope", b""))
seeds.append(b"\x81" + PREFACE + settings + request(1, "/csi.v1.Node/NodeGetInfo", b"") + frame(3, 0, 1, struct.pack(">I", 8)))
seeds.append(b"\x00" + PREFACE + settings + frame(6, 0, 0, b"12345678") + b"garbage after ping")
seeds.append(b"\x00" + b"GET / HTTP/1.1\r\n\r\n")

d = os.path.join(HERE, "corpus", "grpcsrv")
os.makedirs(d, exist_ok=True)
for f in os.listdir(d):
    os.unlink(os.path.join(d, f))
for s in seeds:
    with open(os.path.join(d, hashlib.sha1(s).hexdigest()), "wb") as f:
        f.write(s)
print(len(seeds), "seeds in", d)

#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/snapshots/run.py BUILD_DIR [ROUNDS]: a snapshot, then a restore, of
a 1 GiB `image` volume of nodefs-csi-local, through nodefs (`create S
volume=V` to snapshots/ctl, `create R from=snapshot:S` to volumes/ctl, then
the deletes) against the same CSI calls made directly on the plugin from
python3-grpcio (CreateSnapshot, CreateVolume with the snapshot as its
content source, DeleteVolume, DeleteSnapshot), one plugin, interleaved
rounds, the same 1 GiB of written data in the source. Median of each;
goal: nodefs / direct <= 1.1.

Root (loop devices, mounts). Exits 0 whatever the figures; 77 when
something it needs is missing; 1 only when it could not measure.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

if len(sys.argv) < 2:
    sys.exit("usage: run.py BUILD_DIR [ROUNDS]")
BUILD = os.path.abspath(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL = os.path.join(BUILD, "csi-local", "nodefs-csi-local")
NODEFS = os.path.join(BUILD, "nodefs")
GiB = 1 << 30


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def main():
    if os.geteuid() != 0:
        skip("needs root (loop devices)")
    for p in (LOCAL, NODEFS):
        if not os.access(p, os.X_OK):
            skip("no " + p)
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    sys.path.insert(0, os.path.join(SRC, "tests", "integration", "csi-local"))
    os.environ.setdefault("NODEFS_BIN", NODEFS)
    os.environ.setdefault("NODEFS_BUILD", BUILD)
    os.environ.setdefault("CSI_LOCAL_BIN", LOCAL)
    import grpc
    import csilocal
    import nodefs_test as nt
    why = csilocal.loop_devices_ok()
    if why:
        skip(why)
    pb, pbg = csilocal.stubs()
    tmp = tempfile.mkdtemp(prefix="nodefs-bench-snap-", dir="/var/tmp")
    os.chmod(tmp, 0o755)
    sock = os.path.join(tmp, "csi.sock")
    log = open(os.path.join(tmp, "plugin.log"), "ab")
    proc = subprocess.Popen([LOCAL, "--endpoint", "unix://" + sock, "--base-dir",
                             os.path.join(tmp, "base"), "--backing", "image", "--node-id", "n1"],
                            stdout=log, stderr=log)
    try:
        if not nt.wait_until(lambda: os.path.exists(sock), 20):
            raise RuntimeError("plugin did not listen")
        ch = grpc.insecure_channel("unix://" + sock)
        c = pbg.ControllerStub(ch)
        n = pbg.NodeStub(ch)
        cap = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(mode=1),
                                  mount=pb.VolumeCapability.MountVolume(fs_type="ext4"))
        pub = os.path.join(tmp, "pub")
        os.mkdir(pub)
        conf = ("[nodefs]\nallowed_targets = %s\nreconcile_interval = 0\ncsi_timeout = 300s\n\n"
                "[plugin local]\nendpoint = unix://%s\ndefault = yes\n" % (pub, sock))
        with nt.Nodefs(conf, state_dir=os.path.join(tmp, "nstate")) as fs:
            if not nt.wait_until(lambda: fs.read("plugins", "local", "health").startswith("READY"), 20):
                raise RuntimeError("plugin not READY in nodefs")

            def ctl(rel, line):
                ok, err = fs.write_ctl(rel, line)
                if not ok:
                    raise RuntimeError("%s <- %s: %s %s" % (rel, line, err, fs.read(
                        *(rel.rsplit("/", 1)[0].split("/") + ["error"]))))
            # the source: 1 GiB image, filled with 1 GiB less the fs overhead
            ctl("volumes/ctl", "create src size=1G fs=ext4")
            ctl("volumes/src/ctl", "publish " + os.path.join(pub, "src"))
            with open(os.path.join(pub, "src", "data"), "wb") as f:
                chunk = os.urandom(1 << 20)
                for _ in range(900):
                    f.write(chunk)
                os.fsync(f.fileno())
            ctl("volumes/src/ctl", "unpublish")
            ctl("volumes/src/ctl", "unstage")
            vid = fs.read("volumes", "src", "id").strip()

            def through_nodefs(i):
                t0 = time.perf_counter()
                ctl("snapshots/ctl", "create s%d volume=src" % i)
                ctl("volumes/ctl", "create r%d from=snapshot:s%d" % (i, i))
                t1 = time.perf_counter()
                ctl("volumes/r%d/ctl" % i, "destroy")
                ctl("snapshots/s%d/ctl" % i, "delete")
                return (t1 - t0) * 1e3

            def direct(i):
                t0 = time.perf_counter()
                s = c.CreateSnapshot(pb.CreateSnapshotRequest(source_volume_id=vid, name="d%d" % i),
                                     timeout=300).snapshot.snapshot_id
                src = pb.VolumeContentSource(snapshot=pb.VolumeContentSource.SnapshotSource(snapshot_id=s))
                v = c.CreateVolume(pb.CreateVolumeRequest(
                    name="dr%d" % i, volume_capabilities=[cap], volume_content_source=src,
                    capacity_range=pb.CapacityRange(required_bytes=GiB)), timeout=300).volume.volume_id
                t1 = time.perf_counter()
                c.DeleteVolume(pb.DeleteVolumeRequest(volume_id=v), timeout=300)
                c.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id=s), timeout=300)
                return (t1 - t0) * 1e3

            through_nodefs(100)   # warm both paths once
            direct(100)
            times = {"nodefs": [], "direct": []}
            for i in range(ROUNDS):
                times["nodefs"].append(through_nodefs(i))
                times["direct"].append(direct(i))
        ch.close()
        med = {k: statistics.median(v) for k, v in times.items()}
        fstype = subprocess.run(["stat", "-f", "-c", "%T", tmp], capture_output=True, text=True).stdout.strip()
        print("snapshot + restore of a 1 GiB image volume (900 MiB written), %d rounds, base on %s"
              % (ROUNDS, fstype))
        print("%-10s %12s %s" % ("path", "median_ms", "all"))
        for k in ("direct", "nodefs"):
            print("%-10s %12.1f %s" % (k, med[k], " ".join("%.1f" % t for t in times[k])))
        print("ratio nodefs/direct = %.3f (goal <= 1.1)" % (med["nodefs"] / med["direct"]))
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        nt.unmount_all_under(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

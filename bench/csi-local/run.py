#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/csi-local/run.py BUILD_DIR [PROBES]: nodefs-csi-local against its
baselines, measured in one run from the same clients.

  Probe: unary Probe latency served by nodefs-csi-local against the same
    calls served by the libgrpc++ Identity server of bench/grpc, both from
    the libgrpc++ client (bench/grpc/ref_client) on one connection, 1 and
    8 callers, three interleaved rounds each (median of the medians).
    Goal: ours / libgrpc++ <= 0.8.
  Cycle: CreateVolume + NodeStage + NodePublish + NodeUnpublish +
    NodeUnstage + DeleteVolume of one volume, from one python3-grpcio
    client, served by nodefs-csi-local (dir backing) against the Python test
    plugin (tests/fixtures/csi/plugin.py), interleaved, base dirs on the
    same filesystem. Median cycle.
  Cycle through nodefs: `create`, `publish`, `unpublish`, `destroy`
    written to one nodefs mount's ctl files (each command a CSI call or
    two: CreateVolume; NodeStage + NodePublish; NodeUnpublish; NodeUnstage
    + DeleteVolume), for volumes of a [plugin] that is nodefs-csi-local
    against one that is the Python test plugin, interleaved. Median cycle.
  RSS: the plugin's VmRSS idle, with 1,000 volumes, and after listing
    them all. Goal: < 4 MB with 1,000 volumes.

Root (mounts). Exits 0 whatever the figures; 77 when something it needs is
missing; 1 only when it could not measure.
"""
import importlib.util
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

if len(sys.argv) < 2:
    sys.exit("usage: run.py BUILD_DIR [PROBES]")
BUILD = os.path.abspath(sys.argv[1])
PROBES = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL = os.path.join(BUILD, "csi-local", "nodefs-csi-local")
IDS = os.path.join(BUILD, "bench", "grpc", "identity_server")
REF = os.path.join(BUILD, "bench", "grpc", "ref_client")
PLUGIN_PY = os.path.join(SRC, "tests", "fixtures", "csi", "plugin.py")


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


if os.geteuid() != 0:
    skip("needs root (mounts)")
for b in (LOCAL, IDS, REF):
    if not os.access(b, os.X_OK):
        skip("missing %s (meson compile -C BUILD nodefs-csi-local identity_server ref_client)" % b)
try:
    import grpc  # noqa: F401
except ImportError:
    skip("python3-grpcio missing")

spec = importlib.util.spec_from_file_location("tplugin", PLUGIN_PY)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
pb, pbg = mod.load_stubs(os.path.join(SRC, "csi", "csi.proto"))

tmp = tempfile.mkdtemp(prefix="nodefs-bench-csilocal-")
procs = []


def wait_sock(path, p):
    for _ in range(400):
        if p.poll() is not None:
            raise RuntimeError("%s exited %d" % (p.args[0], p.returncode))
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.025)
        finally:
            s.close()
    raise RuntimeError("no server on " + path)


def start(argv, sock):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, os.path.basename(sock) + ".log"), "wb"))
    procs.append(p)
    wait_sock(sock, p)
    return p


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def ref(sock, calls, threads):
    out = subprocess.run([REF, sock, str(calls), str(threads)], capture_output=True, text=True,
                         timeout=600, check=True).stdout.split()
    return float(out[0]), float(out[1])


def cycle(stub_c, stub_n, base, i):
    cap = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(mode=1))
    cap.mount.SetInParent()
    t0 = time.perf_counter()
    v = stub_c.CreateVolume(pb.CreateVolumeRequest(
        name="b%s" % i, volume_capabilities=[cap],
        capacity_range=pb.CapacityRange(required_bytes=1 << 20))).volume
    stg = os.path.join(base, "stg%s" % i)
    tgt = os.path.join(base, "tgt%s" % i)
    os.mkdir(stg)
    stub_n.NodeStageVolume(pb.NodeStageVolumeRequest(volume_id=v.volume_id, staging_target_path=stg,
                                                     volume_capability=cap, volume_context=v.volume_context))
    stub_n.NodePublishVolume(pb.NodePublishVolumeRequest(volume_id=v.volume_id, staging_target_path=stg,
                                                         target_path=tgt, volume_capability=cap,
                                                         volume_context=v.volume_context))
    stub_n.NodeUnpublishVolume(pb.NodeUnpublishVolumeRequest(volume_id=v.volume_id, target_path=tgt))
    stub_n.NodeUnstageVolume(pb.NodeUnstageVolumeRequest(volume_id=v.volume_id, staging_target_path=stg))
    stub_c.DeleteVolume(pb.DeleteVolumeRequest(volume_id=v.volume_id))
    dt = (time.perf_counter() - t0) * 1e6
    for d in (stg, tgt):
        if os.path.isdir(d):
            os.rmdir(d)
    return dt


try:
    # ---- Probe ----
    ids_sock = os.path.join(tmp, "ids.sock")
    loc_sock = os.path.join(tmp, "local.sock")
    start([IDS, ids_sock], ids_sock)
    local = start([LOCAL, "--endpoint", "unix://" + loc_sock, "--base-dir", os.path.join(tmp, "lbase")],
                  loc_sock)
    rss_idle = rss_kb(local.pid)
    print("Probe latency, libgrpc++ client (bench/grpc/ref_client), %d calls per round" % PROBES)
    print("%-8s %-22s %10s %10s" % ("callers", "server", "median_us", "p99_us"))
    probe_ratio = {}
    for t in (1, 8):
        r, o = [], []
        for _ in range(3):
            r.append(ref(ids_sock, PROBES, t))
            o.append(ref(loc_sock, PROBES, t))
        rm = statistics.median(x[0] for x in r)
        om = statistics.median(x[0] for x in o)
        print("%-8d %-22s %10.1f %10.1f" % (t, "libgrpc++ (identity)", rm, r[-1][1]))
        print("%-8d %-22s %10.1f %10.1f" % (t, "nodefs-csi-local", om, o[-1][1]))
        probe_ratio[t] = om / rm
        print("%-8d ratio nodefs-csi-local/libgrpc++ = %.2f (goal <= 0.8)" % (t, om / rm))

    # ---- Cycle ----
    import grpc
    py_sock = os.path.join(tmp, "py.sock")
    py_base = os.path.join(tmp, "pybase")
    os.mkdir(py_base)
    start(["/usr/bin/python3", PLUGIN_PY, "--endpoint", "unix://" + py_sock, "--base", py_base], py_sock)
    chans = {}
    for name, sock in (("nodefs-csi-local", loc_sock), ("plugin.py", py_sock)):
        ch = grpc.insecure_channel("unix://" + sock)
        chans[name] = (pbg.ControllerStub(ch), pbg.NodeStub(ch), ch)
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    times = {k: [] for k in chans}
    for i in range(3):  # warm up
        for k, (c, n, _) in chans.items():
            cycle(c, n, work, "w%d%s" % (i, k[0]))
    rounds = 60
    for i in range(rounds):
        for k, (c, n, _) in chans.items():
            times[k].append(cycle(c, n, work, "%d%s" % (i, k[0])))
    print()
    print("create+stage+publish+unpublish+unstage+delete, python3-grpcio client, %d cycles each" % rounds)
    print("%-22s %12s" % ("plugin", "median_us"))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in chans:
        print("%-22s %12.0f" % (k, med[k]))
    print("ratio nodefs-csi-local/plugin.py = %.2f" % (med["nodefs-csi-local"] / med["plugin.py"]))
    for _, _, ch in chans.values():
        ch.close()

    # ---- Cycle through nodefs ----
    nodefs_bin = os.path.join(BUILD, "nodefs")
    if os.access(nodefs_bin, os.X_OK):
        os.environ.setdefault("NODEFS_BIN", nodefs_bin)
        os.environ.setdefault("NODEFS_BUILD", BUILD)
        sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
        import nodefs_test as nt
        pub = os.path.join(tmp, "pub")
        os.mkdir(pub)
        conf = ("[nodefs]\nallowed_targets = %s\nreconcile_interval = 0\n\n"
                "[plugin local]\nendpoint = unix://%s\ndefault = yes\n\n"
                "[plugin py]\nendpoint = unix://%s\n" % (pub, loc_sock, py_sock))
        with nt.Nodefs(conf, state_dir=os.path.join(tmp, "nstate")) as fs:
            for name in ("local", "py"):
                if not nt.wait_until(lambda: fs.read("plugins", name, "health").startswith("READY"), 20):
                    raise RuntimeError("plugin %s not READY in nodefs" % name)
            ntimes = {"local": [], "py": []}

            def ncycle(plugin, i):
                v = "n%s%s" % (plugin, i)
                lines = (("volumes/ctl", "create %s size=1M plugin=%s" % (v, plugin)),
                         ("volumes/%s/ctl" % v, "publish " + os.path.join(pub, v)),
                         ("volumes/%s/ctl" % v, "unpublish"),
                         ("volumes/%s/ctl" % v, "destroy"))
                t0 = time.perf_counter()
                for rel, line in lines:
                    ok, err = fs.write_ctl(rel, line)
                    if not ok:
                        raise RuntimeError("%s <- %s: %s %s" % (rel, line, err,
                                           fs.read(*(rel.rsplit("/", 1)[0].split("/") + ["error"]))))
                return (time.perf_counter() - t0) * 1e6
            for i in range(3):
                for k in ntimes:
                    ncycle(k, "w%d" % i)
            nrounds = 40
            for i in range(nrounds):
                for k in ntimes:
                    ntimes[k].append(ncycle(k, i))
        nmed = {k: statistics.median(v) for k, v in ntimes.items()}
        print()
        print("create+publish+unpublish+destroy through a nodefs mount's ctl files, %d cycles each"
              % nrounds)
        print("%-22s %12s" % ("plugin", "median_us"))
        print("%-22s %12.0f" % ("nodefs-csi-local", nmed["local"]))
        print("%-22s %12.0f" % ("plugin.py", nmed["py"]))
        print("ratio nodefs-csi-local/plugin.py = %.2f" % (nmed["local"] / nmed["py"]))
    else:
        print("\n(cycle through nodefs not measured: no %s)" % nodefs_bin)

    # ---- RSS with 1,000 volumes ----
    ch = grpc.insecure_channel("unix://" + loc_sock)
    c = pbg.ControllerStub(ch)
    cap = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(mode=1))
    cap.mount.SetInParent()
    for i in range(1000):
        c.CreateVolume(pb.CreateVolumeRequest(name="pvc-%04d-0123456789abcdef" % i, volume_capabilities=[cap],
                                              parameters={"tier": "fast", "replicas": "1"},
                                              capacity_range=pb.CapacityRange(required_bytes=1 << 30)))
    rss_1000 = rss_kb(local.pid)
    n, tok = 0, ""
    while True:
        r = c.ListVolumes(pb.ListVolumesRequest(max_entries=100, starting_token=tok))
        n += len(r.entries)
        tok = r.next_token
        if not tok:
            break
    rss_list = rss_kb(local.pid)
    ch.close()
    print()
    print("nodefs-csi-local VmRSS: idle %d KiB; 1,000 volumes %d KiB; after listing them (%d) %d KiB (goal < 4096)"
          % (rss_idle, rss_1000, n, rss_list))
except Exception as e:  # could not measure
    print("FAILED to measure:", e)
    for p in procs:
        if p.poll() is None:
            p.kill()
    sys.exit(1)
finally:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    subprocess.run(["umount", "-R", "-l", tmp], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(0)

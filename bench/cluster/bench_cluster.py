#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench-cluster: what the cluster view costs on loopback, against a
three-member etcd started here.

1. The transport: nodefs' client (v3 JSON gateway, one kept-alive libcurl
   connection) put and range latency on the leader (etcd_put), beside
   etcdctl put (gRPC, a process per call) as a baseline; and etcd's share
   of one step of a remote command: a transaction conditional on a
   revision, from its start until a watcher on the leader has the event.
2. Visibility: N state changes of a volume on node a (stage, unstage,
   ...), each timed from the event a emits for it (its events file, the
   moment the state changed) until node b's cluster/nodes/a/... state file
   shows it (p50, p99): a's publisher, etcd, b's watch and cache. Beside
   it the watch side alone: a record written to etcd by this program until
   b's cluster/ shows it.
3. Remote overhead: the same command (a create that fails with EEXIST on
   the target, so nothing changes) written locally on b, and remotely from
   a through cluster/nodes/b/volumes/ctl (p50 each, and the difference).
   With NODEFS_BENCH_CLUSTER_BASE=BINARY (another build of nodefs, e.g.
   the previous protocol's) a second pair of nodes runs that binary under
   its own prefix on the same etcd, and its commands alternate with the
   first pair's: before and after in the same run. etcd's floor for a
   remote command is two such steps (the writer's create, the target's
   answer), measured again right after the commands; the rest of the added
   time is nodefs' own (its hand-offs, the run, the FUSE round trip).
With NODEFS_BENCH_ETCD_TMPFS=1 the members' data dirs are on /dev/shm:
the figures without the disk's fsyncs (etcd's own floor).
Exits 0 whatever the figures; 77 without root, FUSE, etcd or the plugin.
Usage: bench_cluster.py [CHANGES] [COMMANDS]
"""
import base64
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", "."), "tests", "integration", "cluster"))
import nodefs_test as nt  # noqa: E402
import etcdtest  # noqa: E402
import clustertest as ct  # noqa: E402


class nt_null:
    """A stand-in for an optional Node in a with statement."""
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def event_times(fs, want, stop):
    """Read fs's events in a thread: want[(name, state)] = [epoch, ...]."""
    def run():
        try:
            read()
        except OSError:
            pass  # the mount went at the end

    def read():
        with open(fs.path("events")) as f:
            while not stop.is_set():
                line = f.readline()
                if not line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("kind") != "volume" or not ev.get("new"):
                    continue
                t = datetime.strptime(ev["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                epoch = (t - datetime(1970, 1, 1)).total_seconds()
                want.setdefault((ev["name"], ev["new"]), []).append(epoch)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def visibility(a, b, changes):
    """State changes on a, each from a's event to b's cluster/ showing it."""
    ok, _ = a.write_ctl("volumes/ctl", "create vis size=1M")
    if not ok:
        return None, "cannot create a volume on a: " + a.error("volumes")
    mine = "cluster/nodes/a/volumes/vis/state"
    b.wait_read(mine, lambda s: s == a.read("volumes/vis/state"))
    seen, stop = {}, threading.Event()
    event_times(a, seen, stop)
    time.sleep(0.3)  # the reader is attached
    vis, cmds = [], ("stage", "unstage")
    path = b.path(mine)
    for i in range(changes):
        ok, _ = a.write_ctl("volumes/vis/ctl", cmds[i % 2])
        if not ok:
            stop.set()
            return None, "%s on a: %s" % (cmds[i % 2], a.error("volumes/vis"))
        want = a.read("volumes/vis/state")
        while True:
            with open(path) as fh:
                if fh.read() == want:
                    break
            time.sleep(0.0002)
        t1 = time.time()
        key = ("vis", want.strip())
        end = time.monotonic() + 2
        while not seen.get(key) and time.monotonic() < end:
            time.sleep(0.001)
        if seen.get(key):
            vis.append((t1 - seen[key].pop()) * 1e3)
        seen.clear()
    stop.set()
    return vis, None


def main():
    changes = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    cmds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    why = nt.why_not("mount", "csi-plugin") or etcdtest.why_not()
    if why:
        print("SKIP:", why)
        return 77
    tool = os.path.join(os.environ.get("NODEFS_BUILD", "build"), "bench", "cluster", "etcd_put")
    tmpfs = os.environ.get("NODEFS_BENCH_ETCD_TMPFS") == "1"
    with etcdtest.Etcd(base="/dev/shm" if tmpfs else None) as e:
        print("etcd data dirs:", "tmpfs (/dev/shm)" if tmpfs else e.tmp)
        def etcd_floor(n):
            out = subprocess.run([tool, e.endpoints, str(n)], capture_output=True, text=True,
                                 check=True).stdout.split()
            return dict(zip(out[0::2], out[1::2]))
        f = etcd_floor(500)
        t = []
        for _ in range(20):
            t0 = time.monotonic()
            e.ctl("put", "/bench/ctl", "x" * 200)
            t.append((time.monotonic() - t0) * 1e6)
        print("transport (on the leader): gateway put p50 %s us p99 %s us, range p50 %s us "
              "p99 %s us; etcdctl put (process + gRPC) p50 %.0f us; ratio %.1fx"
              % (f["put_p50_us"], f["put_p99_us"], f["range_p50_us"], f["range_p99_us"],
                 pct(t, 50), pct(t, 50) / float(f["put_p50_us"])))
        print("etcd's step (a conditional txn until a watcher on the leader has it): "
              "p50 %s us p99 %s us" % (f["txn_watch_p50_us"], f["txn_watch_p99_us"]))
        with ct.Node(e, "a") as a, ct.Node(e, "b", accept_remote=True) as b:
            b.wait_read("cluster/status", lambda s: "state: connected" in s)
            host, port = e.urls[0][len("http://"):].split(":")
            conn = http.client.HTTPConnection(host, int(port))
            key = base64.b64encode(b"/nodefs/nodes/x/volumes/o").decode()
            path = b.path("cluster/nodes/x/volumes/o/state")
            vis = []
            for i in range(changes):
                want = "S%d\n" % i
                val = json.dumps({"state": want, "info": {}}).encode()
                t0 = time.monotonic()
                conn.request("POST", "/v3/kv/put", json.dumps(
                    {"key": key, "value": base64.b64encode(val).decode()}))
                conn.getresponse().read()
                while True:
                    try:
                        with open(path) as fh:
                            if fh.read() == want:
                                break
                    except OSError:
                        pass
                vis.append((time.monotonic() - t0) * 1e3)
            print("watch side (an etcd put to b's cluster/) over %d: p50 %.2f ms p99 %.2f ms"
                  % (changes, pct(vis, 50), pct(vis, 99)))
            vis, why = visibility(a, b, changes)
            if why:
                print("SKIP:", why)
                return 77
            print("visibility (a state change on a to b's cluster/) over %d changes: "
                  "p50 %.2f ms p99 %.2f ms (goal p99 < 100 ms)"
                  % (len(vis), pct(vis, 50), pct(vis, 99)))
            m = dict(l.split(" ", 1) for l in a.read("metrics/nodefs.prom").splitlines()
                     if l.startswith("nodefs_cluster_publish"))
            print("a's publisher: %s passes, %s etcd transactions for %d changes"
                  % (m.get("nodefs_cluster_publish_seconds_count"),
                     m.get("nodefs_cluster_publish_writes_total"), len(vis)))
            put = float(f["put_p50_us"]) / 1000
            pairs = [("this build", a, b)]
            base = os.environ.get("NODEFS_BENCH_CLUSTER_BASE")
            with ct.Node(e, "a", prefix="/base", bin=base) if base else nt_null() as a0, \
                    ct.Node(e, "b", prefix="/base", bin=base, accept_remote=True) \
                    if base else nt_null() as b0:
                if base:
                    pairs.insert(0, ("baseline " + os.path.basename(base), a0, b0))
                for _, x, y in pairs:
                    ok, err = y.write_ctl("volumes/ctl", "create dup size=1M")
                    if not ok:
                        print("SKIP: cannot create a volume:", y.error("volumes"))
                        return 77
                    x.wait_read("cluster/nodes/b/volumes/dup/state", lambda s: s.strip() != "")
                res = {name: ([], []) for name, _, _ in pairs}
                for i in range(cmds):
                    # each pair goes first every other time: the other's
                    # aftermath (its watch, its deletes) falls on both alike
                    for name, x, y in (pairs if i % 2 == 0 else pairs[::-1]):
                        loc, rem = res[name]
                        t0 = time.monotonic()
                        y.write_ctl("volumes/ctl", "create dup size=1M")
                        loc.append((time.monotonic() - t0) * 1e3)
                        t0 = time.monotonic()
                        x.write_ctl("cluster/nodes/b/volumes/ctl", "create dup size=1M")
                        rem.append((time.monotonic() - t0) * 1e3)
            f2 = etcd_floor(300)
            floor = 2 * float(f2["txn_watch_p50_us"]) / 1000
            print("remote command over %d (a create failing with EEXIST on the target), "
                  "etcd put p50 %.2f ms; etcd's floor, two steps of txn until watched, "
                  "%.2f ms (p50 %s us each, after the commands; %s us before):"
                  % (cmds, put, floor, f2["txn_watch_p50_us"], f["txn_watch_p50_us"]))
            print("| | local p50 | remote p50 | remote p99 | added p50 | goal | added - etcd's floor |")
            print("|---|---|---|---|---|---|---|")
            for name, _, _ in pairs:
                loc, rem = res[name]
                added = pct(rem, 50) - pct(loc, 50)
                print("| %s | %.2f ms | %.2f ms | %.2f ms | %.2f ms | < 5 ms | %.2f ms |"
                      % (name, pct(loc, 50), pct(rem, 50), pct(rem, 99), added, added - floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())

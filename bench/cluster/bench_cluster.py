#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench-cluster: what the cluster view costs on loopback, against a
three-member etcd started here.

1. The transport: nodefs' client (v3 JSON gateway, one kept-alive libcurl
   connection) put and range latency (etcd_put), beside etcdctl put (gRPC,
   a process per call) as a baseline.
2. Visibility: N changes of a record under nodes/x/ written to etcd, each
   timed until node b's cluster/ file shows it (p50, p99): the watch and
   the cache; the publisher's part is its scan interval (10 ms) and one put.
3. Remote overhead: the same command (a create that fails with EEXIST on
   the target, so nothing changes) written locally on b, and remotely from
   a through cluster/nodes/b/volumes/ctl (p50 each, and the difference).
Exits 0 whatever the figures; 77 without root, FUSE, etcd or the plugin.
Usage: bench_cluster.py [CHANGES] [COMMANDS]
"""
import base64
import http.client
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", "."), "tests", "integration", "cluster"))
import nodefs_test as nt  # noqa: E402
import etcdtest  # noqa: E402
import clustertest as ct  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    changes = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    cmds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    why = nt.why_not("mount", "csi-plugin") or etcdtest.why_not()
    if why:
        print("SKIP:", why)
        return 77
    tool = os.path.join(os.environ.get("NODEFS_BUILD", "build"), "bench", "cluster", "etcd_put")
    with etcdtest.Etcd() as e:
        out = subprocess.run([tool, e.urls[0], "500"], capture_output=True, text=True,
                             check=True).stdout.split()
        f = dict(zip(out[0::2], out[1::2]))
        t = []
        for _ in range(20):
            t0 = time.monotonic()
            e.ctl("put", "/bench/ctl", "x" * 200)
            t.append((time.monotonic() - t0) * 1e6)
        print("transport: gateway put p50 %s us p99 %s us, range p50 %s us p99 %s us; "
              "etcdctl put (process + gRPC) p50 %.0f us; ratio %.1fx"
              % (f["put_p50_us"], f["put_p99_us"], f["range_p50_us"], f["range_p99_us"],
                 pct(t, 50), pct(t, 50) / float(f["put_p50_us"])))
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
            print("visibility over %d changes: p50 %.2f ms p99 %.2f ms"
                  % (changes, pct(vis, 50), pct(vis, 99)))
            ok, err = b.write_ctl("volumes/ctl", "create dup size=1M")
            if not ok:
                print("SKIP: cannot create a volume:", b.error("volumes"))
                return 77
            a.wait_read("cluster/nodes/b/volumes/dup/state", lambda s: s.strip() != "")
            loc, rem = [], []
            for _ in range(cmds):
                t0 = time.monotonic()
                b.write_ctl("volumes/ctl", "create dup size=1M")
                loc.append((time.monotonic() - t0) * 1e3)
                t0 = time.monotonic()
                a.write_ctl("cluster/nodes/b/volumes/ctl", "create dup size=1M")
                rem.append((time.monotonic() - t0) * 1e3)
            print("remote command over %d: local p50 %.2f ms, remote p50 %.2f ms p99 %.2f ms, "
                  "added p50 %.2f ms" % (cmds, pct(loc, 50), pct(rem, 50), pct(rem, 99),
                                        pct(rem, 50) - pct(loc, 50)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

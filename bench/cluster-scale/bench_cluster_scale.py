#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench-cluster-scale: N real nodefs processes on this machine, one
three-member etcd on loopback, measured idle and under load.

Each node has its own mount, state dir and built-in CSI plugin
(nodefs-csi-local, dir backing), and is named n0..n(N-1) in [cluster].
Per N (default 10 30; NODEFS_BENCH_SCALE_NODES="10 30 100"):
  - idle, then loaded (each node makes and destroys volumes at
    NODEFS_BENCH_SCALE_RATE changes a second, default 0.5, while a reader
    on n0 walks every node's cluster/nodes/NODE/volumes/ and their states):
    etcd's writes (store revisions) a second and watch events a second (all
    members, etcd_debugging_mvcc_events_total), each nodefs's RSS and CPU
    (median and max, and all together in cores);
  - visibility: a volume made on a node, from the CREATED event on its
    events file until n0's cluster/nodes/NODE/volumes/NAME/state shows it
    (p50, p99), in two steps: until a watcher of the bench's own on etcd
    has the record (the source's publish and etcd), and from there until
    n0 shows it (n0's watch, cache and FUSE); and the first read of a node
    not watched yet;
  - remote ctl: a create that fails with EEXIST on the target, written on
    n0 into cluster/nodes/NODE/volumes/ctl (p50, p99);
  - a node killed with SIGKILL: the time until every other node's
    cluster/nodes/NODE/status says DOWN (lease_ttl NODEFS_BENCH_SCALE_TTL,
    default 5s).
With NODEFS_BENCH_SCALE_FAULTS=1, at N=30: an etcd member replaced
(member remove, a new member with an empty data dir added), compaction
and defragmentation under load, and a node that loses etcd for longer
than its lease (SIGSTOP for 2 TTLs, then SIGCONT); after each, every
node's volumes as n0 sees them must equal that node's own (nothing lost).
NODEFS_BENCH_SCALE_HOGS=K adds K busy loops at nice 0 while loaded (a
load of the bench's own, repeatable), NODEFS_BENCH_SCALE_NODE_NICE the
nodes' nice (default 0): together they show what a node's latency waits
on under a load it does not make.
NODEFS_BENCH_SCALE_BIN: another nodefs binary (the baseline, e.g. the
whole-prefix watch) for the same run. Exits 0 whatever the figures; 77
without root, FUSE, etcd or the plugin.

etcd: its own raft timing (heartbeat 100 ms, election 1 s; the tests'
50/500 is NODEFS_BENCH_SCALE_ETCD_TIMING=50,500) and its members at nice
-10 (NODEFS_BENCH_SCALE_ETCD_NICE): at N=100 this machine runs 200
processes beside other sessions' builds, and with the tests' timing at
nice 0 etcd's heartbeats went late (peer round trip 1 s), it held 14
elections in one run and the latencies measured them. A production etcd
has cores of its own; the bench prints the leader changes, the peer round
trip and etcd's own put-to-watch time under the load (the floor of a
remote command's two steps and of visibility) so a run shows whether etcd
held.
"""
import errno
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", "."), "tests", "integration",
                                "cluster"))
import nodefs_test as nt  # noqa: E402
import etcdtest  # noqa: E402

BUILD = os.environ.get("NODEFS_BUILD", "build")
LOCAL = os.path.join(BUILD, "csi-local", "nodefs-csi-local")
BIN = os.environ.get("NODEFS_BENCH_SCALE_BIN") or nt.NODEFS_BIN
TTL = os.environ.get("NODEFS_BENCH_SCALE_TTL", "5s")
RATE = float(os.environ.get("NODEFS_BENCH_SCALE_RATE", "0.5"))
ETCD_TIMING = tuple(int(x) for x in
                    os.environ.get("NODEFS_BENCH_SCALE_ETCD_TIMING", "100,1000").split(","))
ETCD_NICE = int(os.environ.get("NODEFS_BENCH_SCALE_ETCD_NICE", "-10"))
NODE_NICE = int(os.environ.get("NODEFS_BENCH_SCALE_NODE_NICE", "0"))
HOGS = int(os.environ.get("NODEFS_BENCH_SCALE_HOGS", "0"))
HZ = os.sysconf("SC_CLK_TCK")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def med(v):
    return pct(v, 50)


class Node(nt.Nodefs):
    def __init__(self, etcd, i):
        self.name = "n%d" % i
        self.ptmp = tempfile.mkdtemp(prefix="nodefs-scale-%d-" % i)
        os.makedirs(os.path.join(self.ptmp, "pub"))
        sock = os.path.join(self.ptmp, "csi.sock")
        conf = ("[nodefs]\nallowed_targets = {t}/pub\nreconcile_interval = 0\n\n"
                "[plugin local]\nendpoint = unix://{s}\n"
                "command = {l} --endpoint unix://{s} --base-dir {t}/base\ndefault = yes\n\n"
                "[cluster]\netcd = {e}\nnode = {n}\nlease_ttl = {ttl}\naccept_remote = yes\n"
                ).format(t=self.ptmp, s=sock, l=os.path.abspath(LOCAL), e=etcd.endpoints,
                         n=self.name, ttl=TTL)
        super().__init__(conf, start_timeout=60)

    def argv(self):
        return [BIN] + super().argv()[1:]

    def __exit__(self, *exc):
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)
            return super().__exit__(*exc)
        finally:
            nt.unmount_all_under(self.ptmp)
            import shutil
            shutil.rmtree(self.ptmp, ignore_errors=True)

    def cpu_s(self):
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                v = f.read().rsplit(")", 1)[1].split()
            return (int(v[11]) + int(v[12])) / HZ
        except (OSError, AttributeError):
            return 0.0

    def rss_kb(self):
        return self.smaps().get("Rss", 0)

    def smaps(self):
        """Rss, Pss (shared pages divided among the processes mapping
        them) and Anonymous, kB."""
        out = {}
        try:
            with open("/proc/%d/smaps_rollup" % self.proc.pid) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in ("Rss", "Pss", "Anonymous"):
                        out[k] = int(v.split()[0])
        except (OSError, AttributeError, ValueError):
            pass
        return out


def etcd_metric(e, name):
    total = 0.0
    for i in range(e.n):
        if not e.procs[i] or e.procs[i].poll() is not None:
            continue
        try:
            import urllib.request
            with urllib.request.urlopen(e.urls[i] + "/metrics", timeout=3) as f:
                for line in f.read().decode().splitlines():
                    if line.startswith(name + " "):
                        total += float(line.split()[1])
        except OSError:
            pass
    return total


def etcd_health(e):
    """Leader changes (the most any member saw), heartbeat send failures,
    slow (unsynced or victim) watchers, and the peer round trip's sum and
    count, over the live members."""
    out = dict(leader_changes=0.0, hb_fail=0.0, slow_watchers=0.0, rtt_sum=0.0, rtt_n=0.0)
    for i in range(e.n):
        if not e.procs[i] or e.procs[i].poll() is not None:
            continue
        try:
            import urllib.request
            with urllib.request.urlopen(e.urls[i] + "/metrics", timeout=10) as f:
                text = f.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            name, _, v = line.partition(" ")
            try:
                v = float(v.split()[0]) if v else 0.0
            except ValueError:
                continue
            base = name.split("{")[0]
            if base == "etcd_server_leader_changes_seen_total":
                out["leader_changes"] = max(out["leader_changes"], v)
            elif base == "etcd_server_heartbeat_send_failures_total":
                out["hb_fail"] += v
            elif base == "etcd_debugging_mvcc_slow_watcher_total":
                out["slow_watchers"] += v
            elif base == "etcd_network_peer_round_trip_time_seconds_sum":
                out["rtt_sum"] += v
            elif base == "etcd_network_peer_round_trip_time_seconds_count":
                out["rtt_n"] += v
    return out


def etcd_put_to_watch(e, count):
    """etcd alone: a put through the JSON gateway (on the leader's
    endpoint when known) until a watcher on the same member has it, ms."""
    import base64
    import http.client
    import urllib.parse
    url = e.urls[0]
    try:
        for u in e.urls:
            st = json.loads(e.ctl_on([u], "endpoint", "status", "-w", "json", check=False))
            if st and st[0]["Status"]["leader"] == st[0]["Status"]["header"]["member_id"]:
                url = u
    except (ValueError, KeyError, IndexError, AssertionError, subprocess.SubprocessError):
        pass
    hp = urllib.parse.urlparse(url)
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    key = "/bench-floor/k"
    got, out = {}, []
    wc = http.client.HTTPConnection(hp.hostname, hp.port, timeout=30)
    wc.request("POST", "/v3/watch", json.dumps({"create_request": {
        "key": b64(key)}}), {"Content-Type": "application/json"})
    resp = wc.getresponse()
    ready = threading.Event()

    def reader():
        while True:
            try:
                line = resp.readline()
            except OSError:
                return
            if not line:
                return
            try:
                res = json.loads(line)["result"]
            except (ValueError, KeyError):
                continue
            ready.set()
            for ev in res.get("events", []):
                v = base64.b64decode(ev["kv"]["value"]).decode()
                got[v] = time.monotonic()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    ready.wait(10)
    pc = http.client.HTTPConnection(hp.hostname, hp.port, timeout=30)
    for i in range(count):
        v = "v%d" % i
        t0 = time.monotonic()
        pc.request("POST", "/v3/kv/put", json.dumps({"key": b64(key), "value": b64(v)}),
                   {"Content-Type": "application/json"})
        pc.getresponse().read()
        end = time.monotonic() + 10
        while v not in got and time.monotonic() < end:
            time.sleep(0.0005)
        if v in got:
            out.append((got[v] - t0) * 1e3)
        time.sleep(0.05)
    wc.close()
    pc.close()
    return out


def revision(e):
    out = e.ctl("endpoint", "status", "-w", "json", check=False)
    try:
        return max(int(m["Status"]["header"]["revision"]) for m in json.loads(out))
    except (ValueError, KeyError, TypeError):
        return 0


def pid_cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / HZ
    except OSError:
        return 0.0


def etcd_cpu_s(e):
    return sum(pid_cpu_s(p.pid) for p in e.procs if p and p.poll() is None)


def sample(e, nodes, secs):
    """CPU and RSS of each node, etcd's writes and watch events, over secs."""
    ec0 = etcd_cpu_s(e)
    c0 = [n.cpu_s() for n in nodes]
    r0, ev0, t0 = revision(e), etcd_metric(e, "etcd_debugging_mvcc_events_total"), time.monotonic()
    time.sleep(secs)
    c1 = [n.cpu_s() for n in nodes]
    ec1 = etcd_cpu_s(e)
    r1, ev1, t1 = revision(e), etcd_metric(e, "etcd_debugging_mvcc_events_total"), time.monotonic()
    dt = t1 - t0
    cpu = [(b - a) / dt for a, b in zip(c0, c1)]
    sm = [n.smaps() for n in nodes]
    rss = [m.get("Rss", 0) / 1024 for m in sm]
    pss = [m.get("Pss", 0) / 1024 for m in sm]
    anon = [m.get("Anonymous", 0) / 1024 for m in sm]
    return dict(writes=(r1 - r0) / dt, events=(ev1 - ev0) / dt, cpu_med=med(cpu), cpu_max=max(cpu),
                cpu_all=sum(cpu), rss_med=med(rss), rss_max=max(rss), pss_med=med(pss),
                anon_med=med(anon), etcd_cpu=(ec1 - ec0) / dt)


class Load:
    """Each node makes and destroys volumes at RATE changes a second
    (O_NONBLOCK writes: the driver never waits for a plugin), and a reader
    walks n0's cluster/ tree."""
    def __init__(self, nodes):
        self.nodes, self.stop, self.ths = nodes, threading.Event(), []
        self.walks = 0

    def drive(self):
        n, k = len(self.nodes), 0
        period = 1.0 / (RATE * n)
        live = {}
        nxt = time.monotonic()
        while not self.stop.is_set():
            node = self.nodes[k % n]
            k += 1
            have = live.setdefault(node.name, [])
            if len(have) >= 3 or (have and random.random() < 0.5):
                line = "destroy"
                path = node.path("volumes", have.pop(0), "ctl")
            else:
                name = "l%d" % k
                have.append(name)
                line, path = "create %s size=1M" % name, node.path("volumes", "ctl")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                try:
                    os.write(fd, (line + "\n").encode())
                finally:
                    os.close(fd)
            except OSError:
                pass
            nxt += period
            d = nxt - time.monotonic()
            if d > 0:
                self.stop.wait(d)

    def walk(self):
        n0 = self.nodes[0]
        while not self.stop.is_set():
            for node in self.nodes:
                try:
                    for v in n0.listdir("cluster/nodes/%s/volumes" % node.name):
                        if v not in ("ctl", "error"):
                            n0.read("cluster/nodes/%s/volumes/%s/state" % (node.name, v))
                except OSError:
                    pass
            self.walks += 1
            self.stop.wait(1.0)

    def __enter__(self):
        for fn in (self.drive, self.walk):
            th = threading.Thread(target=fn, daemon=True)
            th.start()
            self.ths.append(th)
        # HOGS busy loops at nice 0: a load of the bench's own making, so a
        # run under load can be repeated (with NODE_NICE, who waits for it)
        self.hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"],
                                      preexec_fn=lambda: os.nice(-os.nice(0)))
                     for _ in range(HOGS)]
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for h in self.hogs:
            h.kill()
            h.wait()
        for th in self.ths:
            th.join(10)


def created_events(node, seen, stop):
    def run():
        try:
            with open(node.path("events")) as f:
                while not stop.is_set():
                    line = f.readline()
                    if not line:
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if ev.get("kind") == "volume" and ev.get("new") == "CREATED":
                        t = datetime.strptime(ev["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                        seen[ev["name"]] = (t - datetime(1970, 1, 1)).total_seconds()
        except OSError:
            pass
    th = threading.Thread(target=run, daemon=True)
    th.start()


def etcd_watcher(e, prefix, on_event, stop):
    """A watcher of the bench's own on etcd (the JSON gateway on the first
    member, not a node): on_event(wall time, key, value as JSON or None)
    for each event under prefix, until stop is set and the connection
    returned is closed."""
    import base64
    import http.client
    import urllib.parse
    hp = urllib.parse.urlparse(e.urls[0])
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    wc = http.client.HTTPConnection(hp.hostname, hp.port, timeout=3600)
    wc.request("POST", "/v3/watch", json.dumps({"create_request": {
        "key": b64(prefix), "range_end": b64(end)}}), {"Content-Type": "application/json"})
    resp = wc.getresponse()

    def run():
        while not stop.is_set():
            try:
                line = resp.readline()
            except (OSError, AttributeError, ValueError):
                return  # closed by the caller's end
            if not line:
                return
            t = time.time()
            try:
                evs = json.loads(line)["result"].get("events", [])
            except (ValueError, KeyError):
                continue
            for ev in evs:
                k = base64.b64decode(ev["kv"]["key"]).decode()
                try:
                    v = json.loads(base64.b64decode(ev["kv"].get("value", "")))
                except ValueError:
                    v = None
                on_event(t, k, v)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return wc


def etcd_seen(e, prefix, seen, stop):
    """The wall time at which etcd's own watcher has each
    nodes/NODE/volumes/visK record in CREATED: visibility's middle step,
    after which only n0 is left."""
    def on(t, k, v):
        name = k.rsplit("/", 1)[1]
        if name.startswith("vis") and name not in seen and isinstance(v, dict) and \
                str(v.get("state", "")).strip() == "CREATED":
            seen[name] = t
    return etcd_watcher(e, prefix, on, stop)


def visibility(e, nodes, count):
    """A volume made on a node, from its CREATED event to n0's cluster/
    file showing it, in two steps: until etcd's own watcher has it (the
    source's publish and etcd), and from there until n0 shows it."""
    n0, vis, steps = nodes[0], [], []
    srcs = nodes[1:] if len(nodes) > 1 else nodes
    seen, etcd_at, stop = {}, {}, threading.Event()
    for s in srcs[:4]:
        created_events(s, seen, stop)
    wc = etcd_seen(e, "/nodefs/nodes/", etcd_at, stop)
    time.sleep(0.5)
    for i in range(count):
        src = srcs[i % min(4, len(srcs))]
        name = "vis%d" % i
        ok, _ = src.write_ctl("volumes/ctl", "create %s size=1M" % name)
        if not ok:
            continue
        path = n0.path("cluster/nodes/%s/volumes/%s/state" % (src.name, name))
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                with open(path) as f:
                    if f.read() == "CREATED\n":
                        break
            except OSError:
                pass
            time.sleep(0.001)
        t1 = time.time()
        end = time.monotonic() + 2
        while name not in seen and time.monotonic() < end:
            time.sleep(0.001)
        if name in seen:
            t0 = seen.pop(name)
            vis.append((t1 - t0) * 1e3)
            te = etcd_at.get(name)
            if te is not None:
                steps.append(((te - t0) * 1e3, (t1 - te) * 1e3))
        src.write_ctl("volumes/%s/ctl" % name, "destroy")
    stop.set()
    wc.close()
    return vis, steps


def first_read(nodes, count):
    """n1 lists another node's volumes it does not watch yet: the time of
    that first listing (one etcd range read)."""
    if len(nodes) < 3:
        return []
    r = nodes[1]
    out = []
    for node in random.sample(nodes[2:], min(count, len(nodes) - 2)):
        t0 = time.monotonic()
        r.listdir("cluster/nodes/%s/volumes" % node.name)
        out.append((time.monotonic() - t0) * 1e3)
    return out


def remote(e, nodes, count):
    """The times of the commands the target answered (EEXIST: it ran the
    create and found the volume), and how many got another answer (the
    writer's node gave up, or took the target for down), by errno."""
    n0, out, other, steps = nodes[0], [], {}, []
    tgt = nodes[-1]
    tgt.write_ctl("volumes/ctl", "create rtarget size=1M")
    # the commands' records as etcd's own watcher sees them: the writer's
    # record in the target's inbox (state new), the target's answer (done)
    evs, lock, stop = [], threading.Lock(), threading.Event()

    def on(t, k, v):
        if "/nodes/%s/inbox/" % tgt.name in k and isinstance(v, dict):
            with lock:
                evs.append((t, v.get("state")))
    wc = etcd_watcher(e, "/nodefs/nodes/%s/inbox/" % tgt.name, on, stop)
    time.sleep(0.2)
    for i in range(count):
        t0, w0 = time.monotonic(), time.time()
        ok, err = n0.write_ctl("cluster/nodes/%s/volumes/ctl" % tgt.name,
                               "create rtarget size=1M")
        t1, w1 = time.monotonic(), time.time()
        if err == errno.EEXIST:
            out.append((t1 - t0) * 1e3)
            with lock:
                new_at = [t for t, st in evs if st == "new" and t >= w0]
                done_at = [t for t, st in evs if st == "done" and t >= w0]
                del evs[:]
            if new_at and done_at:
                steps.append(((new_at[0] - w0) * 1e3, (done_at[0] - new_at[0]) * 1e3,
                              (w1 - done_at[0]) * 1e3))
        else:
            k = errno.errorcode.get(err, str(err)) if err else "ok"
            other[k] = other.get(k, 0) + 1
    stop.set()
    wc.close()
    return out, other, steps


def down_time(nodes):
    victim = nodes[len(nodes) // 2]
    others = [n for n in nodes if n is not victim]
    t0 = time.monotonic()
    victim.kill9()
    pending = set(range(len(others)))
    end = time.monotonic() + 120
    while pending and time.monotonic() < end:
        for k in list(pending):
            try:
                if others[k].read("cluster/nodes/%s/status" % victim.name).startswith("DOWN"):
                    pending.discard(k)
            except OSError:
                pass
        time.sleep(0.02)
    took = time.monotonic() - t0
    victim.start()
    return took if not pending else float("nan")


def consistent(nodes, timeout=60):
    """Every node's volumes as n0 sees them equal that node's own."""
    n0 = nodes[0]
    end = time.monotonic() + timeout
    bad = []
    while time.monotonic() < end:
        bad = []
        for node in nodes:
            mine = sorted(v for v in node.listdir("volumes") if v not in ("ctl", "error"))
            try:
                seen = sorted(v for v in n0.listdir("cluster/nodes/%s/volumes" % node.name)
                              if v not in ("ctl", "error"))
            except OSError:
                seen = None
            if mine != seen:
                bad.append(node.name)
        if not bad:
            return True, 0
        time.sleep(0.5)
    return False, bad


def faults(e, nodes):
    out = []
    with Load(nodes):
        time.sleep(3)
        t0 = time.monotonic()
        e.replace(1)
        e.wait_healthy(60)
        out.append(("member replaced", time.monotonic() - t0))
        rev = revision(e)
        t0 = time.monotonic()
        e.ctl("compact", str(rev), timeout=60)
        for u in e.urls:
            e.ctl_on([u], "defrag", timeout=60)
        out.append(("compaction + defrag", time.monotonic() - t0))
        victim = nodes[-1]
        victim.proc.send_signal(signal.SIGSTOP)
        ttl = float(TTL.rstrip("s"))
        time.sleep(2 * ttl)
        victim.proc.send_signal(signal.SIGCONT)
        out.append(("a node away past its lease", 2 * ttl))
        time.sleep(3)
    res = []
    for what, took in out:
        res.append((what, took))
    ok, bad = consistent(nodes)
    return res, ok, bad


def renice(pid, nice):
    """Every thread of pid to nice (a nice value is a thread's own; those
    made later inherit it from their maker)."""
    if not nice:
        return
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except OSError:
            pass


def run_n(n, do_faults):
    with tempfile.TemporaryDirectory(prefix="nodefs-scale-etcd-", dir="/dev/shm") as base:
        e = etcdtest.Etcd(base=base, timing=ETCD_TIMING, nice=ETCD_NICE)
        with e:
            nodes = [Node(e, i) for i in range(n)]
            started = []
            lock = threading.Lock()

            def start(node):
                node.__enter__()
                renice(node.proc.pid, NODE_NICE)
                with lock:
                    started.append(node)
            try:
                for k in range(0, n, 6):
                    ths = [threading.Thread(target=start, args=(node,))
                           for node in nodes[k:k + 6]]
                    for t in ths:
                        t.start()
                    for t in ths:
                        t.join()
                if len(started) != n:
                    raise RuntimeError("only %d of %d nodes started" % (len(started), n))
                n0 = nodes[0]
                nt.wait_until(lambda: len([d for d in n0.listdir("cluster/nodes")]) == n, 60)
                time.sleep(5)
                idle = sample(e, nodes, 10)
                fr = first_read(nodes, 10)
                h0 = etcd_health(e)
                with Load(nodes) as ld:
                    time.sleep(5)
                    loaded = sample(e, nodes, 10)
                    vis, steps = visibility(e, nodes, 60)
                    rem, rem_other, rem_steps = remote(e, nodes, 60)
                    floor = etcd_put_to_watch(e, 30)
                    walks = ld.walks
                h1 = etcd_health(e)
                health = dict(leader_changes=h1["leader_changes"] - h0["leader_changes"],
                              hb_fail=h1["hb_fail"] - h0["hb_fail"],
                              slow_watchers=h1["slow_watchers"],
                              rtt_ms=1e3 * (h1["rtt_sum"] - h0["rtt_sum"]) /
                              max(1.0, h1["rtt_n"] - h0["rtt_n"]))
                dt = down_time(nodes)
                fl = faults(e, nodes) if do_faults else None
                return dict(n=n, idle=idle, loaded=loaded, vis=vis, steps=steps, first=fr, remote=rem,
                            remote_other=rem_other, remote_steps=rem_steps,
                            down=dt, faults=fl, walks=walks, floor=floor, health=health)
            finally:
                for node in started:
                    try:
                        node.__exit__(None, None, None)
                    except Exception as ex:  # noqa: B902 (report, go on)
                        print("stop %s: %s" % (node.name, ex), file=sys.stderr)


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: needs root and /dev/fuse")
        sys.exit(77)
    if etcdtest.why_not() or not os.path.exists(LOCAL):
        print("SKIP: %s" % (etcdtest.why_not() or "no " + LOCAL))
        sys.exit(77)
    ns = [int(x) for x in os.environ.get("NODEFS_BENCH_SCALE_NODES", "10 30").split()]
    do_faults = os.environ.get("NODEFS_BENCH_SCALE_FAULTS") == "1"
    print("bench-cluster-scale: binary %s, lease_ttl %s, load %.2f changes/s a node; "
          "etcd heartbeat %d ms, election %d ms, nice %d; nodes at nice %d; %d busy "
          "loops under load; %s"
          % (BIN, TTL, RATE, ETCD_TIMING[0], ETCD_TIMING[1], ETCD_NICE, NODE_NICE, HOGS,
             open("/proc/loadavg").read().strip()))
    for n in ns:
        r = run_n(n, do_faults and n == 30)
        i, l = r["idle"], r["loaded"]
        print("\nN=%d" % n)
        print("  etcd writes/s          idle %8.1f   loaded %8.1f" % (i["writes"], l["writes"]))
        print("  etcd watch events/s    idle %8.1f   loaded %8.1f" % (i["events"], l["events"]))
        print("  RSS MiB median/max     idle %5.1f/%5.1f  loaded %5.1f/%5.1f"
              % (i["rss_med"], i["rss_max"], l["rss_med"], l["rss_max"]))
        print("  PSS / anon MiB median  idle %5.1f/%5.1f  loaded %5.1f/%5.1f"
              % (i["pss_med"], i["anon_med"], l["pss_med"], l["anon_med"]))
        print("  CPU %% a node med/max   idle %5.2f/%5.2f  loaded %5.2f/%5.2f"
              % (100 * i["cpu_med"], 100 * i["cpu_max"], 100 * l["cpu_med"], 100 * l["cpu_max"]))
        print("  CPU all nodes (cores)  idle %6.3f   loaded %6.3f" % (i["cpu_all"], l["cpu_all"]))
        print("  CPU etcd, 3 members    idle %6.3f   loaded %6.3f" % (i["etcd_cpu"], l["etcd_cpu"]))
        print("  visibility ms p50/p99  %7.2f / %7.2f  (%d samples)"
              % (med(r["vis"]), pct(r["vis"], 99), len(r["vis"])))
        st = r["steps"]
        if st:
            a, b = [x[0] for x in st], [x[1] for x in st]
            print("    event to etcd's watcher %7.2f / %7.2f, etcd's watcher to n0 %7.2f / %7.2f"
                  % (med(a), pct(a, 99), med(b), pct(b, 99)))
            slow = sorted(st, key=lambda x: -(x[0] + x[1]))[:3]
            print("    the slowest: %s" % ", ".join("%.0f + %.0f" % x for x in slow))
        print("  first read of a node   %7.2f ms p50, %7.2f max" % (med(r["first"]),
                                                                  max(r["first"] or [0])))
        print("  remote ctl ms p50/p99  %7.2f / %7.2f  (%d answered by the target%s)"
              % (med(r["remote"]), pct(r["remote"], 99), len(r["remote"]),
                 "".join(", %d %s" % (v, k) for k, v in sorted(r["remote_other"].items()))))
        st = r["remote_steps"]
        if st:
            cols = list(zip(*st))
            print("    until etcd's watcher has the command %6.2f / %6.2f, the target's answer "
                  "%6.2f / %6.2f, back to the writer %6.2f / %6.2f"
                  % tuple(x for c in cols for x in (med(c), pct(c, 99))))
        h = r["health"]
        print("  etcd alone, put until a watcher has it, ms p50/p99 (loaded)  %7.2f / %7.2f"
              % (med(r["floor"]), pct(r["floor"], 99)))
        print("  etcd under the load: %d leader changes, %d heartbeat send failures, peer "
              "round trip %.1f ms mean, %d slow watchers at the end"
              % (h["leader_changes"], h["hb_fail"], h["rtt_ms"], h["slow_watchers"]))
        print("  load average after N=%d: %s" % (n, open("/proc/loadavg").read().strip()))
        print("  all see DOWN after kill -9: %.2f s (lease_ttl %s)" % (r["down"], TTL))
        print("  reader walks of the whole tree under load: %d" % r["walks"])
        if r["faults"]:
            res, ok, bad = r["faults"]
            for what, took in res:
                print("  fault: %-28s %.1f s" % (what, took))
            print("  after the faults, every node's volumes as n0 sees them: %s"
                  % ("equal (nothing lost)" if ok else "DIFFER on %s" % bad))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

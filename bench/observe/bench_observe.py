# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/observe: what monitoring costs on a busy node.

With VOLUMES volumes (CSI test plugin) and CONTAINERS running containers
(dockerd, image nodefs-test/busybox) in one mount:
- reading metrics/nodefs.prom (open, read to EOF, close), median and p99
  per read, beside two baselines in the same run: the same bytes from
  tmpfs, and the small `status` file through the same mount (the FUSE
  round trips without the rendering);
- events delivery latency: from the state change (the event's own "time",
  stamped where the state changes) to a reader parked in read(), median
  and p99 over EVENTS changes made one at a time.

Usage: bench_observe.py [VOLUMES [CONTAINERS [READS [EVENTS]]]]
(defaults 1000 100 200 2000). Root, FUSE, python3-grpcio and a dockerd
(NODEFS_TEST_DOCKER_HOST, as tests/fixtures/dockerd.sh prints); exit 77
without. Prints one line per figure; exits 1 only when something fails.
Removes everything it made.
"""

import json
import os
import select
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", ""), "tests",
                                "integration"))
sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", ""), "tests",
                                "integration", "observe"))
import nodefs_test as nt  # noqa: E402
import observe as ob  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def read_whole(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        n = 0
        while True:
            b = os.read(fd, 1 << 17)
            if not b:
                return n
            n += len(b)
    finally:
        os.close(fd)


def timed_reads(path, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        read_whole(path)
        out.append(time.perf_counter() - t0)
    return out


def nonblock_lines(w, rel, lines, per_write=60):
    """Submit command lines with O_NONBLOCK writes (answered once each is
    checkpointed), many per write."""
    for i in range(0, len(lines), per_write):
        chunk = "".join(l + "\n" for l in lines[i:i + per_write])
        ok, err = nt.write_line(w.fs.path(rel), chunk, os.O_NONBLOCK)
        if not ok:
            raise AssertionError("%s: %s: %s" % (rel, nt.errname(err),
                                                 w.fs.error(os.path.dirname(rel))))


def wait_count(w, kind, state, n, timeout):
    def done():
        c = 0
        for name in os.listdir(w.fs.path(kind)):
            try:
                if w.fs.read(kind, name, "state").strip() == state:
                    c += 1
            except OSError:
                pass
        return c >= n
    if not nt.wait_until(done, timeout, 0.5):
        raise AssertionError("fewer than %d %s %s in %d s" % (n, kind, state,
                                                              timeout))


def event_latencies(w, n):
    """Make n changes one at a time (a plugin added, then removed: two
    events each) while a reader sits in read(); the latency of each line
    is its arrival minus its own time stamp."""
    fd = os.open(w.fs.path("events"), os.O_RDONLY)
    lat = []
    stop = threading.Event()

    def reader():
        buf = b""
        while not stop.is_set():
            chunk = os.read(fd, 65536)
            now = time.time()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = json.loads(line)
                if ev.get("kind") != "plugin":
                    continue
                t = datetime.strptime(ev["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                lat.append(now - t.replace(tzinfo=timezone.utc).timestamp())
                if ev.get("name") == "bench-end":
                    return
    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(n // 2):
            nt.write_line(w.fs.path("plugins", "ctl"),
                          "add be%d unix:///nonexistent/be.sock" % i)
            nt.write_line(w.fs.path("plugins", "ctl"), "remove be%d" % i)
            time.sleep(0.002)   # let the reader park again
        nt.write_line(w.fs.path("plugins", "ctl"),
                      "add bench-end unix:///nonexistent/be.sock")
        t.join(60)
        nt.write_line(w.fs.path("plugins", "ctl"), "remove bench-end")
    finally:
        stop.set()
        os.close(fd)
    return lat


def main():
    args = [int(a) for a in sys.argv[1:]]
    nvol, ncont, nreads, nevents = (args + [1000, 100, 200, 2000][len(args):])[:4]
    nt.require_all()
    ob.require_plugin()
    ob.require_docker()

    t0 = time.monotonic()
    with ob.World(docker=True, plugin_args=["--workers", "64"]) as w:
        names = ["bv%04d" % i for i in range(nvol)]
        w.volumes.extend(names)
        nonblock_lines(w, "volumes/ctl",
                       ["create %s size=1M" % n for n in names])
        wait_count(w, "volumes", "CREATED", nvol, 600)
        cnames = ["bc%03d" % i for i in range(ncont)]
        w.containers.extend(cnames)
        nonblock_lines(w, "containers/ctl",
                       ["run %s runtime=docker image=%s cmd='sleep 3600'"
                        % (n, ob.IMAGE) for n in cnames], per_write=20)
        wait_count(w, "containers", "RUNNING", ncont, 600)
        print("setup: %d volumes, %d running containers in %.1f s"
              % (nvol, ncont, time.monotonic() - t0), flush=True)

        prom = w.fs.path("metrics", "nodefs.prom")
        size = read_whole(prom)
        fams = ob.parse_prom(w.fs.read("metrics", "nodefs.prom"))
        lines = sum(len(f["samples"]) for f in fams.values())
        tmp = tempfile.mkdtemp(prefix="bench-observe-", dir="/dev/shm")
        try:
            copy = os.path.join(tmp, "nodefs.prom")
            shutil.copyfile(prom, copy)
            timed_reads(prom, 10)   # warm
            m = timed_reads(prom, nreads)
            s = timed_reads(w.fs.path("status"), nreads)
            c = timed_reads(copy, nreads)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print("metrics/nodefs.prom: %d bytes, %d samples, %d families"
              % (size, lines, len(fams)))
        print("read nodefs.prom: median %.3f ms, p99 %.3f ms (%d reads)"
              % (statistics.median(m) * 1e3, pct(m, 0.99) * 1e3, nreads))
        print("baseline tmpfs copy: median %.3f ms; status via FUSE: median "
              "%.3f ms" % (statistics.median(c) * 1e3,
                           statistics.median(s) * 1e3))
        print("ratio nodefs.prom / tmpfs copy: %.1f; rendering share: %.3f ms"
              % (statistics.median(m) / statistics.median(c),
                 (statistics.median(m) - statistics.median(s)) * 1e3),
              flush=True)

        lat = event_latencies(w, nevents)
        print("events delivery (change -> parked reader): median %.3f ms, "
              "p99 %.3f ms, max %.3f ms over %d events"
              % (statistics.median(lat) * 1e3, pct(lat, 0.99) * 1e3,
                 max(lat) * 1e3, len(lat)), flush=True)
        t1 = time.monotonic()
        # destroy in parallel (the World would do it one by one)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda c: w.fs.write_ctl("containers/%s/ctl" % c,
                                                 "destroy"), cnames))
            list(ex.map(lambda v: w.fs.write_ctl("volumes/%s/ctl" % v,
                                                 "destroy"), names))
    print("teardown: %.1f s" % (time.monotonic() - t1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

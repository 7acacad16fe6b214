# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/flood: what an unprivileged reader can make the daemon hold, and
whether root's commands still go through meanwhile.

With VOLUMES volumes (CSI test plugin) in one mount, uid 65534 (nobody)
opens DESCRIPTORS descriptors of metrics/nodefs.prom, reads one byte of
each (so each holds the snapshot taken at its first read) and keeps them
open, and attaches READERS idle `events` readers. Figures, all from the
same run:
- the daemon's RSS before, while they are held, and after they are closed;
- root's `create NAME size=1M` (a blocking write to volumes/ctl, the
  plugin's CreateVolume included), median over ROUNDS, before the flood
  (the baseline) and while it is held: the ratio.

Usage: bench_flood.py [VOLUMES [DESCRIPTORS [READERS [ROUNDS]]]]
(defaults 1000 2000 1000 10). Root, FUSE, python3-grpcio; exit 77
without. Prints one line per figure; exits 0 whatever the figures, 1 only
when it could not measure. Removes everything it made.
"""

import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", ""), "tests", "integration"))
sys.path.insert(0, os.path.join(os.environ.get("NODEFS_SRC", ""), "tests", "integration",
                                "volumes"))
import nodefs_test as nt  # noqa: E402
import voltest as vt  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def pending(env):
    n = 0
    for line in env.fs.read("metrics", "nodefs.prom").splitlines():
        if line.startswith("nodefs_operations_pending{"):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def make_volumes(env, n, per_write=60):
    lines = ["create f%05d size=1M" % i for i in range(n)]
    for i in range(0, n, per_write):
        chunk = "".join(l + "\n" for l in lines[i:i + per_write])
        ok, err = nt.write_line(env.fs.path("volumes", "ctl"), chunk, os.O_NONBLOCK)
        if not ok:
            raise AssertionError("create: %s: %s" % (nt.errname(err), env.fs.error("volumes")))
    if not nt.wait_until(lambda: pending(env) == 0, 600):
        raise AssertionError("creates did not finish")


def root_creates(env, tag, rounds):
    out = []
    for i in range(rounds):
        name = "r%s%03d" % (tag, i)
        t0 = time.perf_counter()
        ok, e = env.ctl("volumes/ctl", "create %s size=1M" % name)
        out.append(time.perf_counter() - t0)
        if not ok:
            raise AssertionError("root create %s: %s %s" % (name, e, env.fs.error("volumes")))
        env.ctl("volumes/%s/ctl" % name, "destroy")
    return out


def flood(env, descriptors, readers):
    """Fork a child that becomes nobody and holds the descriptors; returns
    (pid, fd to close to release it) once they are all held."""
    r_ready, w_ready = os.pipe()
    r_go, w_go = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r_ready)
            os.close(w_go)
            want = descriptors + readers + 64
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            os.setgroups([])
            os.setgid(nt.NOBODY_GID)
            os.setuid(nt.NOBODY_UID)
            held, refused = [], 0
            prom = env.fs.path("metrics", "nodefs.prom")
            for _ in range(descriptors):
                try:
                    fd = os.open(prom, os.O_RDONLY)
                    os.read(fd, 1)
                    held.append(fd)
                except OSError:
                    refused += 1
            ev = env.fs.path("events")
            for _ in range(readers):
                try:
                    fd = os.open(ev, os.O_RDONLY | os.O_NONBLOCK)
                    try:
                        os.read(fd, 4096)
                    except BlockingIOError:
                        pass
                    held.append(fd)
                except OSError:
                    refused += 1
            os.write(w_ready, b"%d %d\n" % (len(held), refused))
            os.read(r_go, 1)        # until the parent closes it
            for fd in held:
                os.close(fd)
            os._exit(0)
        except BaseException as e:  # noqa: BLE001
            os.write(2, ("flood child: %r\n" % e).encode())
            os._exit(1)
    os.close(w_ready)
    os.close(r_go)
    line = b""
    while not line.endswith(b"\n"):
        b = os.read(r_ready, 100)
        if not b:
            raise AssertionError("the flood child died")
        line += b
    os.close(r_ready)
    held, refused = (int(x) for x in line.split())
    return pid, w_go, held, refused


def main():
    args = [int(a) for a in sys.argv[1:]]
    volumes, descriptors, readers, rounds = (args + [1000, 2000, 1000, 10][len(args):])[:4]
    vt.require_plugin()
    with vt.VolEnv(csi_timeout="30s") as env:
        pid = env.fs.proc.pid
        t0 = time.monotonic()
        make_volumes(env, volumes)
        print("flood: %d volumes made in %.1f s" % (volumes, time.monotonic() - t0))
        env.fs.read("metrics", "nodefs.prom")   # the renderer's buffers, once
        base = root_creates(env, "a", rounds)
        rss0 = rss_kib(pid)
        t0 = time.monotonic()
        child, go, held, refused = flood(env, descriptors, readers)
        took = time.monotonic() - t0
        rss1 = rss_kib(pid)
        during = root_creates(env, "b", rounds)
        rss_held = rss_kib(pid)
        os.close(go)
        _, st = os.waitpid(child, 0)
        time.sleep(0.5)     # the RELEASEs
        rss2 = rss_kib(pid)
        mb, md = statistics.median(base), statistics.median(during)
        print("flood: uid %d held %d descriptors (%d of metrics/nodefs.prom, read once each, "
              "%d idle events readers; %d refused) in %.1f s"
              % (nt.NOBODY_UID, held, descriptors, readers, refused, took))
        print("flood: daemon RSS %.1f MB before, %.1f MB held (+%.1f MB), %.1f MB after root's "
              "creates, %.1f MB once closed"
              % (rss0 / 1024, rss1 / 1024, (rss1 - rss0) / 1024, rss_held / 1024, rss2 / 1024))
        print("flood: root create median %.2f ms while flooded vs %.2f ms baseline "
              "(%.2fx; max %.2f ms vs %.2f ms; %d rounds)"
              % (md * 1e3, mb * 1e3, md / mb if mb else 0, max(during) * 1e3, max(base) * 1e3,
                 rounds))
        if os.WEXITSTATUS(st) != 0:
            print("flood: the flood child failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

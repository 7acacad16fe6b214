#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/store/run.py BUILD_DIR commit|memory [options]: what nodefs's
checkpoints and objects cost, against anchors measured in the same run.
Root (mounts). Not a test. nodefs runs with the built-in plugin
nodefs-csi-local (dir backing), which it starts itself.

commit: the state dir on an ext4 file system of its own (a loop-mounted
  image under /var/tmp, so on this machine's disk); the plugin's base on
  tmpfs, so its own fsyncs (a plugin's, not nodefs's) stay out of it.
  16 writers at once:
  - tmpfs write (the anchor the ratios use): each writer open + write of a
    line + close of its own file on tmpfs;
  - ext4 fdatasync (the floor of one durable write per command): the same
    with an fdatasync of its file on the ext4 file system;
  - nodefs creates: `create NAME` written to volumes/ctl, the file opened
    with O_WRONLY alone, so the writes run at once (nodefs(5), WRITING; a
    truncating open, as `echo >`, would take the file alone);
  - nodefs commands on 16 ctl files: each writer its own volume, writing
    `publish TARGET` and `unpublish` in turn (these run concurrently and
    share flushes).
  For each: commands/s, p50 and p99 latency, and for nodefs the journal's
  fdatasyncs per command (nodefs_checkpoint_flushes_total over the
  commands). --before BIN runs the create figure again with another nodefs
  binary (an earlier build) on a fresh state dir of the same file system.
  Goal (issue 14): creates at least 10x the rate before.

memory: everything on tmpfs. The daemon's RSS (VmRSS; Private from
  smaps_rollup) idle and READY (the anchor), with --volumes volumes made
  through volumes/ctl and operations_keep of their operations kept, after a
  walk of the whole tree (find, and a read of every volume's state) and a
  read of metrics/nodefs.prom, and after destroying them all. Prints the
  cost per volume. Goals: at most 16 MB with 10,000 volumes and 1,000
  operations after the walk; back within 2 MB of the idle daemon after
  destroying them. A last figure is taken once the kernel has forgotten
  the removed volumes' inodes (echo 2 > /proc/sys/vm/drop_caches): fs
  keeps a removed volume's inodes, and through them the volume, until
  then. Last, the idle daemon's RSS by mapping (shared libraries' pages
  are most of it).

Exits 0 whatever the figures, 1 only when it could not measure, 77 when
something it needs is missing. Cleans up on every exit path.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def mounts_under(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return sorted(set(out), key=lambda m: -m.count("/"))


class Daemon:
    """nodefs with nodefs-csi-local, on a state dir and base under root."""

    def __init__(self, build, root, nodefs_bin=None, keep=1000, base=None):
        self.build = build
        self.base = base or os.path.join(root, "base")
        self.root = root
        self.bin = nodefs_bin or os.path.join(build, "nodefs")
        self.local = os.path.join(build, "csi-local", "nodefs-csi-local")
        self.mnt = os.path.join(root, "mnt")
        self.pub = os.path.join(root, "pub")
        self.state = os.path.join(root, "state")
        self.keep = keep
        self.proc = None

    def start(self):
        for d in (self.mnt, self.pub, self.state, self.base):
            os.makedirs(d, exist_ok=True)
        conf = os.path.join(self.root, "nodefs.conf")
        with open(conf, "w") as f:
            f.write("[nodefs]\nallowed_targets = %s\ncsi_timeout = 60s\nreconcile_interval = 0\n"
                    "operations_keep = %d\n\n[plugin local]\nendpoint = unix://%s/local.sock\n"
                    "command = %s --backing dir --base-dir %s\ndefault = yes\n"
                    % (self.pub, self.keep, self.root, self.local, self.base))
        self.log = open(os.path.join(self.root, "nodefs.log"), "ab")
        self.proc = subprocess.Popen([self.bin, "-f", "--config", conf, "--state-dir", self.state,
                                      self.mnt], stdout=self.log, stderr=self.log, cwd="/")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            try:
                with open(os.path.join(self.mnt, "plugins", "local", "health")) as f:
                    if f.read().startswith("READY"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("nodefs did not become ready: see %s/nodefs.log" % self.root)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        for m in mounts_under(self.mnt) + mounts_under(self.pub):
            subprocess.run(["umount", "-l", m], capture_output=True)

    def ctl(self, rel, line):
        try:
            with open(os.path.join(self.mnt, rel), "w") as f:
                f.write(line + "\n")
            return True
        except OSError as e:
            return e

    def ctl_shared(self, rel, line):
        """The line written as a program that shares the file does: no
        O_TRUNC (whose truncate takes the file alone in the kernel)."""
        try:
            fd = os.open(os.path.join(self.mnt, rel), os.O_WRONLY)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
            return True
        except OSError as e:
            return e

    def counter(self, name):
        with open(os.path.join(self.mnt, "metrics", "nodefs.prom")) as f:
            for line in f:
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return float("nan")

    def rss_kb(self):
        got = {}
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    got["rss"] = int(line.split()[1])
        try:
            with open("/proc/%d/smaps_rollup" % self.proc.pid) as f:
                for line in f:
                    k = line.split(":")[0]
                    if k in ("Private_Dirty", "Private_Clean"):
                        got["private"] = got.get("private", 0) + int(line.split()[1])
                    elif k == "Anonymous":
                        got["anon"] = int(line.split()[1])
        except OSError:
            pass
        return got

    def mappings_kb(self):
        """RSS and anonymous KB by mapping (a library, [heap], [anon]...)."""
        agg, cur = {}, None
        with open("/proc/%d/smaps" % self.proc.pid) as f:
            for line in f:
                p = line.split()
                if not p[0].endswith(":"):
                    cur = agg.setdefault(os.path.basename(p[5]) if len(p) > 5 else "[anon]",
                                         [0, 0])
                elif p[0] == "Rss:":
                    cur[0] += int(p[1])
                elif p[0] == "Anonymous:":
                    cur[1] += int(p[1])
        return sorted(agg.items(), key=lambda kv: -kv[1][0])


def writers(n, per, fn):
    """n threads calling fn(k, i) per times each: (seconds, latencies)."""
    lat = [[] for _ in range(n)]
    errs = []

    def run(k):
        for i in range(per):
            t = time.monotonic()
            r = fn(k, i)
            lat[k].append(time.monotonic() - t)
            if r is not True and r is not None:
                errs.append(r)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise RuntimeError("%d commands failed, first: %s" % (len(errs), errs[0]))
    return time.monotonic() - t0, [x for v in lat for x in v]


def file_writes(d, sync):
    def fn(k, i):
        fd = os.open(os.path.join(d, "w%d" % k), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, b"publish /srv/x\n")
        if sync:
            os.fdatasync(fd)
        os.close(fd)
    return fn


def row(name, n, secs, lat, anchor_rate=None, extra=""):
    rate = n / secs
    ratio = "" if anchor_rate is None else "%.3gx" % (anchor_rate / rate)
    print("%-34s %8.0f/s  p50 %8.1f us  p99 %8.1f us  %8s %s"
          % (name, rate, statistics.median(lat) * 1e6, pct(lat, 0.99) * 1e6, ratio, extra))
    return rate


def commit(a, tmp):
    img = os.path.join(tmp, "ext4.img")
    ext4 = os.path.join(tmp, "ext4")
    tfs = os.path.join(tmp, "tmpfs")
    os.makedirs(ext4)
    os.makedirs(tfs)
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    if subprocess.run(["mkfs.ext4", "-q", "-F", img], capture_output=True).returncode != 0:
        print("bench/store: mkfs.ext4 failed")
        return 77
    if subprocess.run(["mount", "-o", "loop", img, ext4], capture_output=True).returncode != 0:
        print("bench/store: cannot loop-mount an ext4 image (no loop devices?)")
        return 77
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", tfs], check=True)
    W, per = 16, a.per_writer
    print("16 writers, %d commands each; state dir on ext4 (loop image on %s), plugin base on tmpfs"
          % (per, tmp))
    print("%-34s %10s  %14s  %14s  %8s" % ("", "rate", "", "", "vs tmpfs"))
    secs, lat = writers(W, per * 4, file_writes(tfs, False))
    anchor = row("tmpfs write (anchor)", W * per * 4, secs, lat)
    os.makedirs(os.path.join(ext4, "floor"))
    secs, lat = writers(W, per, file_writes(os.path.join(ext4, "floor"), True))
    row("ext4 write + fdatasync (floor)", W * per, secs, lat, anchor)

    def creates(d, tag):
        f0 = d.counter("nodefs_checkpoint_flushes_total")
        secs, lat = writers(W, per, lambda k, i: d.ctl_shared(
            "volumes/ctl", "create %s%d-%d size=1M" % (tag, k, i)))
        f1 = d.counter("nodefs_checkpoint_flushes_total")
        per_cmd = "" if f0 != f0 else "%.2f fdatasyncs/command" % ((f1 - f0) / (W * per))
        return row("nodefs creates (%s)" % tag, W * per, secs, lat, anchor, per_cmd)

    d = Daemon(a.build, os.path.join(ext4, "now"), base=os.path.join(tfs, "base-now"))
    results = {}
    try:
        d.start()
        results["now"] = creates(d, "c")
        # 16 ctl files at once: publish / unpublish of each writer's volume
        f0 = d.counter("nodefs_checkpoint_flushes_total")

        def cycle(k, i):
            if i % 2 == 0:
                return d.ctl("volumes/c%d-0/ctl" % k, "publish %s/t%d" % (d.pub, k))
            return d.ctl("volumes/c%d-0/ctl" % k, "unpublish")
        secs, lat = writers(W, per if per % 2 == 0 else per + 1, cycle)
        n = W * (per if per % 2 == 0 else per + 1)
        f1 = d.counter("nodefs_checkpoint_flushes_total")
        row("nodefs publish|unpublish, 16 files", n, secs, lat, anchor,
            "%.2f fdatasyncs/command" % ((f1 - f0) / n))
    finally:
        d.stop()
    if a.before:
        b = Daemon(a.build, os.path.join(ext4, "before"), nodefs_bin=a.before,
                   base=os.path.join(tfs, "base-before"))
        try:
            b.start()
            results["before"] = creates(b, "b")
        finally:
            b.stop()
        print("creates: %.1fx the rate of %s (goal: at least 10x)"
              % (results["now"] / results["before"], a.before))
    return 0


def memory(a, tmp):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g", "tmpfs", tmp], check=True)
    d = Daemon(a.build, os.path.join(tmp, "m"), keep=1000)
    n = a.volumes
    rows = []

    def phase(name, goal=""):
        got = d.rss_kb()
        rows.append((name, got["rss"], got.get("anon", 0), goal))
        return got["rss"]
    try:
        d.start()
        time.sleep(0.5)
        idle = phase("idle and READY (anchor)")
        maps = d.mappings_kb()
        t0 = time.monotonic()
        for i in range(n):
            r = d.ctl("volumes/ctl", "create v%05d size=1M" % i)
            if r is not True:
                raise RuntimeError("create v%05d: %s" % (i, r))
        made = time.monotonic() - t0
        full = phase("%d volumes, %d operations kept" % (n, min(n, 1000)))
        subprocess.run(["find", d.mnt], capture_output=True)
        vdir = os.path.join(d.mnt, "volumes")
        for v in os.listdir(vdir):
            try:
                with open(os.path.join(vdir, v, "state")) as f:
                    f.read()
            except OSError:
                pass
        with open(os.path.join(d.mnt, "metrics", "nodefs.prom")) as f:
            f.read()
        walked = phase("after a walk and a metrics read", "<= 16384 KB")
        for i in range(n):
            d.ctl("volumes/v%05d/ctl" % i, "destroy")
        time.sleep(6)   # the monitor gives freed memory back once a probe period (5 s)
        gone = phase("after destroying them", "<= idle + 2048 KB")
        # fs keeps a removed volume's inodes (and through them the volume)
        # while the kernel holds them: what nodefs keeps once it forgot
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        time.sleep(6)
        forgot = phase("and once the kernel forgot their inodes", "<= idle + 2048 KB")
        print("%d volumes made at %.0f/s: %.0f bytes a volume (with its operation), the walk "
              "%.0f bytes a volume more" % (n, n / made, (full - idle) * 1024.0 / n,
                                          (walked - full) * 1024.0 / n))
        print("%-42s %10s %10s  %-18s %s" % ("phase", "RSS", "anonymous", "goal", ""))
        for name, r, an, goal in rows:
            met = ""
            if goal.startswith("<= 16384"):
                met = "met" if r <= 16384 else "not met"
            elif goal:
                met = "met" if r - idle <= 2048 else "not met (%+d KB)" % (r - idle)
            print("%-42s %7d KB %7d KB  %-18s %s" % (name, r, an, goal, met))
        print("idle by mapping (RSS, of it anonymous): " +
              ", ".join("%s %d KB (%d)" % (k, v[0], v[1]) for k, v in maps[:12]) +
              ", %d more: %d KB" % (len(maps) - 12, sum(v[0] for _, v in maps[12:])))
    finally:
        d.stop()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("what", choices=("commit", "memory"))
    ap.add_argument("--per-writer", type=int, default=20, help="commands per writer (commit)")
    ap.add_argument("--before", help="another nodefs binary whose create rate to compare")
    ap.add_argument("--volumes", type=int, default=10000, help="volumes (memory)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    if os.geteuid() != 0:
        print("bench/store: needs root (mounts)")
        return 77
    for p in (os.path.join(a.build, "nodefs"), os.path.join(a.build, "csi-local", "nodefs-csi-local")):
        if not os.access(p, os.X_OK):
            print("bench/store: %s is not built" % p)
            return 77
    tmp = tempfile.mkdtemp(prefix="nodefs-bench-store-", dir="/var/tmp")
    try:
        return commit(a, tmp) if a.what == "commit" else memory(a, tmp)
    except (RuntimeError, OSError) as e:
        print("bench/store: could not measure: %s" % e)
        return 1
    finally:
        for m in mounts_under(tmp):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/volumes/run.py BUILD_DIR [options]: nodefs's volume overhead,
measured against baselines in the same run. Root (mounts). Not a test.

1. lifecycle: create + publish + unpublish + destroy of one volume through a
   mounted nodefs (bench_volumes fs: open/write/close of the ctl files, as
   `echo > ctl` does) against the same CSI call sequence made directly with
   nodefs's csi client library (bench_volumes csi), both on the same test
   plugin (tests/fixtures/csi/plugin.py, real gRPC, real bind mounts),
   interleaved in --rounds rounds of --cycles cycles. Target: <= 1.1x.
   --plugin local runs the built-in plugin nodefs-csi-local (dir backing)
   instead of the Python one, as a plugin nodefs is told of (the same
   socket for both sides); --plugin both runs the lifecycle once with each.
   The same rounds time the two floors under the difference: four ctl
   writes of a blank line (bench_volumes blank: the FUSE round trips, no
   command behind them) and one checkpoint record written by store.c on
   the same file system (bench_volumes put), times the records per cycle
   that nodefs's own metrics count.
2. listing: `ls -l MNT/volumes` with --volumes volumes against `ls -l` of as
   many directories on tmpfs, interleaved, --ls-runs runs each. Target:
   <= 1.1x (issue 14). The volumes are made by the fast path (--seed, the default):
   the plugin's state file and nodefs's checkpoints are written before both
   start, as a restart would find them, so nodefs recovers them (the time
   it takes to be READY is printed, with --ops kept operations seeded
   beside them, FINISHED, as operations_keep keeps them); --no-seed makes them through
   volumes/ctl from --writers parallel writers instead (slow: the test
   plugin rewrites its whole state file on every create).
   Beside it (informational): `find` over every entry against as many
   tmpfs files (goal <= 1.5x).
3. reads: open + read + close of an unchanged volume `state`, of `status`
   (both direct_io: made by each read) and of a volume's `id` (keep_cache:
   the page cache), --reads times each (bench_volumes reads), interleaved
   with the same reads of the FUSE floor (bench/fuse-floor.c: a minimal
   FUSE file system, a process of its own, serving the same bytes with the
   same open flags) and of a tmpfs copy. Goal: <= 2x tmpfs (issue 14); the
   ratio to the floor says how much of the rest is nodefs's own, and the
   FUSE requests per read (nodefs's metrics) show the OPEN and RELEASE
   round trips no FUSE file system skips. Runs on the volumes of part 2.

--only lifecycle|listing|reads runs one part (reads still seeds and
recovers the --volumes volumes).

By default everything (plugin base, nodefs state dir, targets) lives on a
private tmpfs, so the figures are the cost of nodefs's own work rather than
of the disk; --disk puts it under /var/tmp, where nodefs's checkpoints
(one journal fdatasync before each call and one per command, see bench/store) weigh.
Prints medians, ratios and whether each meets its goal; exits 0 whatever
the figures, 1 only when it could not measure, 77 when something it needs is
missing. Cleans up on every exit path.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = os.path.join(SRC, "tests", "fixtures", "csi", "plugin.py")


def mounts_under(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return sorted(set(out), key=lambda m: -m.count("/"))


class Bench:
    def __init__(self, args):
        self.a = args
        self.nodefs_bin = os.path.join(args.build, "nodefs")
        self.bench_bin = os.path.join(args.build, "bench", "volumes", "bench_volumes")
        self.local_bin = os.path.join(args.build, "csi-local", "nodefs-csi-local")
        self.dir = None
        self.plugin = None
        self.nodefs = None
        self.tmpfs = []

    # ---- set-up and clean-up --------------------------------------------
    def setup(self):
        root = "/var/tmp" if self.a.disk else "/tmp"
        self.dir = tempfile.mkdtemp(prefix="nodefs-bench-vol-", dir=root)
        if not self.a.disk:
            self.mount_tmpfs(self.dir)
        for d in ("base", "pub", "pub/fs", "pub/csi", "stg", "state", "mnt"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        self.sock = os.path.join(self.dir, "csi.sock")
        self.mnt = os.path.join(self.dir, "mnt")

    def mount_tmpfs(self, path):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0755", "tmpfs", path],
                       check=True)
        self.tmpfs.append(path)

    def start_plugin(self, kind="python"):
        self.plugin_log = open(os.path.join(self.dir, "plugin.log"), "ab")
        if kind == "local":
            argv = [self.local_bin, "--endpoint", "unix://" + self.sock,
                    "--base-dir", os.path.join(self.dir, "base"), "--backing", "dir"]
        else:
            argv = ["/usr/bin/python3", PLUGIN, "--endpoint", "unix://" + self.sock,
                    "--base", os.path.join(self.dir, "base"), "--workers", "64"]
        self.plugin = subprocess.Popen(argv, stdout=self.plugin_log, stderr=self.plugin_log,
                                       cwd="/")
        for _ in range(600):
            if os.path.exists(self.sock):
                return
            if self.plugin.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit("the plugin did not start")

    def start_nodefs(self):
        conf = os.path.join(self.dir, "nodefs.conf")
        with open(conf, "w") as f:
            f.write("[nodefs]\nallowed_targets = %s/pub\ncsi_timeout = 60s\n"
                    "reconcile_interval = 0\noperations_keep = %d\n\n"
                    "[plugin hostpath]\nendpoint = unix://%s\n"
                    "default = yes\n" % (self.dir, max(self.a.ops, 100), self.sock))
        self.nodefs_log = open(os.path.join(self.dir, "nodefs.log"), "ab")
        t0 = self.started = time.monotonic()
        self.nodefs = subprocess.Popen(
            [self.nodefs_bin, "-f", "--config", conf, "--state-dir",
             os.path.join(self.dir, "state"), self.mnt],
            stdout=self.nodefs_log, stderr=self.nodefs_log, cwd="/")
        while time.monotonic() - t0 < 600:
            try:
                with open(os.path.join(self.mnt, "status")) as f:
                    if "READY" in f.read().split("state:", 1)[-1].split("\n", 1)[0]:
                        break
            except OSError:
                pass
            if self.nodefs.poll() is not None:
                raise SystemExit("nodefs exited: see %s/nodefs.log" % self.dir)
            time.sleep(0.02)
        ready = time.monotonic() - t0
        for _ in range(200):
            with open(os.path.join(self.mnt, "plugins", "hostpath", "health")) as f:
                if f.read().startswith("READY"):
                    break
            time.sleep(0.05)
        return ready

    def stop_nodefs(self):
        if self.nodefs and self.nodefs.poll() is None:
            self.nodefs.send_signal(signal.SIGTERM)
            try:
                self.nodefs.wait(60)
            except subprocess.TimeoutExpired:
                self.nodefs.kill()
                self.nodefs.wait()
        self.nodefs = None
        if self.dir and self.mnt in mounts_under(self.dir):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)

    def cleanup(self):
        self.stop_nodefs()
        self.stop_plugin()
        if self.dir:
            for _ in range(5):
                left = [m for m in mounts_under(self.dir) if m not in self.tmpfs]
                if not left:
                    break
                for m in left:
                    subprocess.run(["umount", "-l", m], capture_output=True)
            for m in reversed(self.tmpfs):
                subprocess.run(["umount", "-l", m], capture_output=True)
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- 1. lifecycle -----------------------------------------------------
    def run_bench(self, *argv):
        p = subprocess.run([self.bench_bin] + list(argv), capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("bench_volumes %s failed: %s" % (argv[0], p.stderr))
        return float(p.stdout.split()[0])

    def records_written(self):
        """Checkpoint records nodefs has written so far (its metrics)."""
        n = 0
        with open(os.path.join(self.mnt, "metrics", "nodefs.prom")) as f:
            for line in f:
                if line.startswith("nodefs_checkpoint_write_duration_seconds_count"):
                    n += int(float(line.split()[-1]))
        return n

    def lifecycle(self, kind="python"):
        fs, csi, blank, put = [], [], [], []
        fs_cycles = 0
        rec0 = self.records_written()
        putdir = os.path.join(self.dir, "putbench")
        os.makedirs(putdir, exist_ok=True)
        for r in range(self.a.rounds):
            fs.append(self.run_bench("fs", self.mnt, os.path.join(self.dir, "pub", "fs"),
                                     str(self.a.cycles)))
            fs_cycles += self.a.cycles + 1  # and its warm-up cycle
            csi.append(self.run_bench("csi", self.sock, os.path.join(self.dir, "pub", "csi"),
                                      os.path.join(self.dir, "stg"), str(self.a.cycles)))
            blank.append(self.run_bench("blank", self.mnt, str(self.a.cycles)))
            put.append(self.run_bench("put", putdir, "50"))
        records = (self.records_written() - rec0) / fs_cycles
        mf, mc = statistics.median(fs), statistics.median(csi)
        mb, mp = statistics.median(blank), statistics.median(put)
        floor = mb + records * mp
        print("lifecycle (create+publish+unpublish+destroy) on the %s plugin, state dir on %s,"
              " median of %d rounds x %d cycles:"
              % ("built-in (nodefs-csi-local, dir)" if kind == "local" else "Python test",
                 "disk (/var/tmp)" if self.a.disk else "tmpfs", self.a.rounds, self.a.cycles))
        print("  direct CSI calls (csi client library)  %9.0f us" % mc)
        print("  through nodefs (echo > ctl)             %9.0f us" % mf)
        ratio = mf / mc
        print("  ratio nodefs/direct = %.2f (target <= 1.1)" % ratio)
        print("  per round: nodefs %s" % " ".join("%.0f" % x for x in fs))
        print("             direct %s" % " ".join("%.0f" % x for x in csi))
        print("  floors under the difference (%.0f us), measured in the same rounds:" % (mf - mc))
        print("    4 ctl writes of a blank line (FUSE round trips)  %7.0f us" % mb)
        print("    %.1f checkpoint records per cycle x %.1f us       %7.0f us"
              % (records, mp, records * mp))
        print("  nodefs beyond direct + floors: %.0f us; ratio nodefs/(direct + floors) = %.2f"
              % (mf - mc - floor, mf / (mc + floor)))
        print("  floors alone put the ratio at %.2f" % ((mc + floor) / mc))
        return ratio <= 1.1

    # ---- 2. listing -------------------------------------------------------
    def seed(self, n):
        """The plugin's volumes and nodefs's records of them, as a restart
        would find them."""
        base = os.path.join(self.dir, "base")
        vols = {}
        state_vols = os.path.join(self.dir, "state", "volumes")
        os.makedirs(state_vols, exist_ok=True)
        for i in range(n):
            vid = "vol-seed%08d" % i
            name = "v%05d" % i
            path = os.path.join(base, "volumes", vid)
            os.makedirs(path)
            csi_name = "nodefs-%s-seed" % name
            vols[vid] = {"name": csi_name, "capacity": 1 << 20, "path": path, "params": {},
                         "nodes": [], "staged": [], "published": []}
            rec = {"version": 1, "name": name, "plugin": "hostpath", "mount_flags": [],
                   "parameters": [], "size_requested": 1 << 20, "imported": False,
                   "state": "CREATED", "csi_name": csi_name, "id": vid, "capacity": 1 << 20,
                   "volume_context": ["path=" + path, "name=" + csi_name],
                   "publish_context": [], "controller_published": False, "staged": False,
                   "readonly": False,
                   "staging_path": os.path.join(self.dir, "state", "staging", vid)}
            with open(os.path.join(state_vols, name + ".json"), "w") as f:
                json.dump(rec, f)
        with open(os.path.join(base, "state.json"), "w") as f:
            json.dump({"volumes": vols}, f)
        # kept operations, ended, as a day of commands leaves them
        state_ops = os.path.join(self.dir, "state", "operations")
        os.makedirs(state_ops, exist_ok=True)
        now = int(time.time())
        for i in range(self.a.ops):
            oid = "%06d" % (i + 1)
            name = "v%05d" % (i % max(n, 1))
            rec = {"id": oid, "type": "volume.publish", "object": "volumes/" + name,
                   "command": "publish %s/pub/%s" % (self.dir, name),
                   "by": "uid=0 gid=0 pid=1 comm=bench", "state": "FINISHED", "error": "",
                   "remote": "", "attempts": 1, "created_unix": now - self.a.ops + i,
                   "finished_unix": now - self.a.ops + i, "created": "", "finished": ""}
            with open(os.path.join(state_ops, oid + ".json"), "w") as f:
                json.dump(rec, f)

    def create_parallel(self, n):
        ctl = os.path.join(self.mnt, "volumes", "ctl")
        errors = []

        def writer(k):
            for i in range(k, n, self.a.writers):
                try:
                    fd = os.open(ctl, os.O_WRONLY)
                    try:
                        os.write(fd, b"create v%05d size=1M\n" % i)
                    finally:
                        os.close(fd)
                except OSError as e:
                    errors.append(e)
        t0 = time.monotonic()
        ts = [threading.Thread(target=writer, args=(k,)) for k in range(self.a.writers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errors:
            raise SystemExit("create failed: %s" % errors[0])
        return time.monotonic() - t0

    def time_ls(self, path):
        t0 = time.perf_counter()
        p = subprocess.run(["ls", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit("ls -l %s: %s" % (path, p.stderr.decode()))
        return dt * 1000, p.stdout.count(b"\n")

    def listing(self):
        n = self.a.volumes
        dirs = os.path.join(self.dir, "tmpfs-dirs")
        os.makedirs(dirs)
        self.mount_tmpfs(dirs)
        for i in range(n):
            os.mkdir(os.path.join(dirs, "v%05d" % i))
        vols = os.path.join(self.mnt, "volumes")
        ls_n = self.time_ls(vols)[1]
        if ls_n < n:
            raise SystemExit("ls -l shows %d entries, not %d" % (ls_n, n))
        fs, tm = [], []
        for _ in range(self.a.ls_runs):
            tm.append(self.time_ls(dirs)[0])
            fs.append(self.time_ls(vols)[0])
        mf, mt = statistics.median(fs), statistics.median(tm)
        print("listing: ls -l of %d entries, median of %d runs (each a fresh ls process):"
              % (n, self.a.ls_runs))
        print("  tmpfs directories          %8.1f ms" % mt)
        print("  nodefs volumes/            %8.1f ms" % mf)
        ratio = mf / mt
        met = ratio <= 1.1
        print("  ratio nodefs/tmpfs = %.2f (goal <= 1.1)" % ratio)
        print("  runs: nodefs %s" % " ".join("%.1f" % x for x in fs))
        print("        tmpfs  %s" % " ".join("%.1f" % x for x in tm))
        # find over every entry: tmpfs directories with as many files each
        # as a volume directory has
        per = len(os.listdir(os.path.join(vols, "v00000")))
        for i in range(n):
            for k in range(per):
                open(os.path.join(dirs, "v%05d" % i, "f%d" % k), "w").close()
        ff, ft = [], []
        for _ in range(3):
            for lst, path in ((ft, dirs), (ff, vols)):
                t0 = time.perf_counter()
                subprocess.run(["find", path], stdout=subprocess.DEVNULL, check=True)
                lst.append((time.perf_counter() - t0) * 1000)
        find_ratio = statistics.median(ff) / statistics.median(ft)
        met = met and find_ratio <= 1.5
        print("  find over %d entries: nodefs %.1f ms, tmpfs %.1f ms, ratio %.2f (goal <= 1.5)"
              % (n * (per + 1), statistics.median(ff), statistics.median(ft), find_ratio))
        # what else grows with the count (informational)
        reads = []
        for _ in range(5):
            t0 = time.perf_counter()
            with open(os.path.join(self.mnt, "metrics", "nodefs.prom")) as f:
                f.read()
            reads.append((time.perf_counter() - t0) * 1000)
        print("  metrics/nodefs.prom read with %d volumes: median %.1f ms"
              % (n, statistics.median(reads)))
        pv = os.path.join(self.mnt, "plugins", "hostpath", "volumes")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            with open(pv) as f:
                known = sum(1 for l in f if " known " in l)
            if known >= n:
                print("  plugins/hostpath/volumes lists all %d as known %.1f s after start"
                      % (n, time.monotonic() - self.started))
                break
            time.sleep(0.2)
        return met

    # ---- 3. reads -------------------------------------------------------
    def reads(self):
        """open + read + close of an unchanged file, against the FUSE floor
        and tmpfs (bench_volumes reads): state and status are made by each
        read (direct_io), a volume's id is served from the page cache
        (keep_cache)."""
        work = os.path.join(self.dir, "tmpfs-reads")
        os.makedirs(work)
        self.mount_tmpfs(work)
        p = subprocess.run([self.bench_bin, "reads", self.mnt, work, str(self.a.reads),
                            "direct_io:volumes/v00000/state", "direct_io:status",
                            "keep_cache:volumes/v00000/id"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            raise SystemExit("bench_volumes reads failed: %s" % p.stderr)
        ratios = [float(l.split(" ratio ", 1)[1].split()[0])
                  for l in p.stdout.splitlines() if l.startswith("  read ")]
        print("  (a FUSE open is a round trip to the daemon, OPEN and RELEASE, whatever"
              " serves the read: the floor is what no FUSE file system can go below)")
        return len(ratios) == 3 and all(r <= 2 for r in ratios)

    def stop_plugin(self):
        if self.plugin and self.plugin.poll() is None:
            self.plugin.send_signal(signal.SIGTERM)
            try:
                self.plugin.wait(30)
            except subprocess.TimeoutExpired:
                self.plugin.kill()
                self.plugin.wait()
        self.plugin = None

    def main(self):
        ok = True
        self.setup()
        kinds = ["python", "local"] if self.a.plugin == "both" else [self.a.plugin]
        for kind in kinds if self.a.cycles and self.want("lifecycle") else []:
            # a plugin with no other volumes: its state file stays small
            self.start_plugin(kind)
            self.start_nodefs()
            ok = self.lifecycle(kind) and ok
            self.stop_nodefs()
            self.stop_plugin()
            for d in ("base", "state", "pub/fs", "pub/csi", "stg"):
                shutil.rmtree(os.path.join(self.dir, d))
                os.mkdir(os.path.join(self.dir, d))
        if self.a.volumes and (self.want("listing") or self.want("reads")):
            if self.a.seed:
                t0 = time.monotonic()
                self.seed(self.a.volumes)
                print("seeded %d volumes (plugin state + nodefs checkpoints) in %.1f s"
                      % (self.a.volumes, time.monotonic() - t0))
            self.start_plugin()
            ready = self.start_nodefs()
            if self.a.seed:
                print("nodefs READY with %d recovered volumes and %d kept operations after"
                      " %.2f s (goal < 1 s on a quiet machine)"
                      % (self.a.volumes, self.a.ops, ready))
            else:
                dt = self.create_parallel(self.a.volumes)
                print("created %d volumes through volumes/ctl from %d writers in %.1f s"
                      " (%.0f/s)" % (self.a.volumes, self.a.writers, dt, self.a.volumes / dt))
            if self.want("listing"):
                ok = self.listing() and ok
            if self.want("reads"):
                ok = self.reads() and ok
        return ok

    def want(self, part):
        return self.a.only is None or self.a.only == part


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--volumes", type=int, default=10000)
    ap.add_argument("--ls-runs", type=int, default=9)
    ap.add_argument("--writers", type=int, default=32)
    ap.add_argument("--no-seed", dest="seed", action="store_false")
    ap.add_argument("--disk", action="store_true")
    ap.add_argument("--plugin", choices=("python", "local", "both"), default="both")
    ap.add_argument("--ops", type=int, default=1000, help="kept operations seeded")
    ap.add_argument("--reads", type=int, default=100000, help="reads of each file (part 3)")
    ap.add_argument("--only", choices=("lifecycle", "listing", "reads"),
                    help="run one part (default: all three)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    b = Bench(a)
    for need in (b.nodefs_bin, b.bench_bin) + ((b.local_bin,) if a.plugin != "python" else ()):
        if not os.access(need, os.X_OK):
            print("SKIP: missing %s (meson compile -C BUILD nodefs bench_volumes)" % need)
            return 77
    signal.signal(signal.SIGTERM, lambda *x: sys.exit(1))
    try:
        met = b.main()
    finally:
        b.cleanup()
    print("goals: %s" % ("all met" if met else "some missed (see above)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

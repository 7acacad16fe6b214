# SPDX-License-Identifier: LGPL-2.1-or-later
"""metrics/nodefs.prom against its real consumers.

With the CSI test plugin (a published volume) and dockerd (a running and an
exited container) in the mount, so that the families have samples:
- the text parses strictly as the Prometheus text format 0.0.4 (HELP and
  TYPE once per family and before its samples, a family's samples
  together, labels well formed, a trailing newline), every family the
  issue lists is there with its type, and histograms are well formed;
- one read is one snapshot: a reader reading in small pieces while
  volumes are made sees figures that agree with each other;
(promtool and node_exporter: test_consumers.py).
"""

import os
import threading
import time
import unittest

import nodefs_test as nt
import observe as ob

# family -> type: what docs/nodefs.5 promises.
FAMILIES = {
    "nodefs_build_info": "gauge",
    "nodefs_up": "gauge",
    "nodefs_csi_plugin_up": "gauge",
    "nodefs_csi_rpcs_pending": "gauge",
    "nodefs_csi_rpcs_total": "counter",
    "nodefs_csi_rpc_duration_seconds": "histogram",
    "nodefs_operations_pending": "gauge",
    "nodefs_operations_total": "counter",
    "nodefs_volumes": "gauge",
    "nodefs_volume_capacity_bytes": "gauge",
    "nodefs_volume_used_bytes": "gauge",
    "nodefs_volume_available_bytes": "gauge",
    "nodefs_snapshots": "gauge",
    "nodefs_containers": "gauge",
    "nodefs_container_cpu_seconds_total": "counter",
    "nodefs_container_memory_bytes": "gauge",
    "nodefs_container_exits_total": "counter",
    "nodefs_fuse_requests_total": "counter",
    "nodefs_fuse_request_duration_seconds": "histogram",
    "nodefs_checkpoint_write_duration_seconds": "histogram",
    "nodefs_checkpoint_write_errors_total": "counter",
    "nodefs_checkpoint_removals_total": "counter",
    "nodefs_checkpoint_flushes_total": "counter",
    "nodefs_checkpoint_records_total": "counter",
    "nodefs_checkpoint_syncfs_total": "counter",
    "nodefs_fetch_seconds": "histogram",
}

# Families that must have samples in this world (the rest may be empty).
WITH_SAMPLES = (
    "nodefs_build_info", "nodefs_csi_plugin_up", "nodefs_csi_rpcs_total",
    "nodefs_csi_rpc_duration_seconds", "nodefs_operations_total",
    "nodefs_volumes", "nodefs_volume_capacity_bytes", "nodefs_containers",
    "nodefs_container_cpu_seconds_total", "nodefs_container_memory_bytes",
    "nodefs_container_exits_total", "nodefs_fuse_requests_total",
    "nodefs_checkpoint_write_duration_seconds",
    "nodefs_checkpoint_write_errors_total",
    "nodefs_checkpoint_flushes_total", "nodefs_checkpoint_records_total",
)


class MetricsWorld(unittest.TestCase):
    """A mount with a published volume, a running and an exited container."""

    @classmethod
    def setUpClass(cls):
        cls.w = ob.World(docker=True)
        cls.w.__enter__()
        try:
            cls.w.volume("mvol", publish=True)
            cls.w.container("mrun")
            cls.w.container("mexit", cmd="sh -c 'exit 3'")
            ok = nt.wait_until(lambda: cls.w.state("containers", "mexit")
                               == "EXITED", 30)
            if not ok:
                raise AssertionError("mexit did not exit")
        except BaseException:
            cls.w.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def prom(self):
        return self.w.fs.read("metrics", "nodefs.prom")


class MetricsTest(MetricsWorld):
    def test_format_and_families(self):
        text = self.prom()
        fams = ob.parse_prom(text)
        for name, typ in FAMILIES.items():
            with self.subTest(family=name):
                self.assertTrue(name in fams, "family %s missing" % name)
                self.assertEqual(fams[name]["type"], typ)
                self.assertTrue(fams[name]["help"], "no HELP text")
        for name in WITH_SAMPLES:
            with self.subTest(samples=name):
                self.assertTrue(fams[name]["samples"], "no samples")
        for name, f in fams.items():
            if f["type"] == "counter":
                self.assertTrue(name.endswith("_total"), name)
            self.assertTrue(name.startswith("nodefs_"), name)
        # figures that must be what this world holds
        s = {(n, tuple(sorted(l.items()))): float(v)
             for n, l, v in sum((f["samples"] for f in fams.values()), [])}
        self.assertEqual(s[("nodefs_csi_plugin_up",
                            (("plugin", "hostpath"),))], 1)
        self.assertEqual(s[("nodefs_volumes", (("plugin", "hostpath"),
                                               ("state", "PUBLISHED")))], 1)
        self.assertEqual(s[("nodefs_volume_capacity_bytes",
                            (("volume", "mvol"),))], 16 << 20)
        self.assertEqual(s[("nodefs_containers", (("runtime", "docker"),
                                                  ("state", "RUNNING")))], 1)
        self.assertEqual(s[("nodefs_container_exits_total",
                            (("container", "mexit"), ("reason", "error")))], 1)
        self.assertGreater(s[("nodefs_container_memory_bytes",
                              (("container", "mrun"),))], 0)
        self.assertGreaterEqual(s[("nodefs_operations_total", (
            ("outcome", "finished"), ("type", "volume.publish")))], 1)
        self.assertGreaterEqual(s[("nodefs_csi_rpcs_total", (
            ("code", "OK"), ("plugin", "hostpath"),
            ("rpc", "NodePublishVolume")))], 1)

    def check_histogram(self, fams, name):
        series = {}
        for n, labels, v in fams[name]["samples"]:
            key = tuple(sorted((k, x) for k, x in labels.items()
                               if k != "le"))
            series.setdefault(key, {"buckets": []})
            if n == name + "_bucket":
                series[key]["buckets"].append((labels["le"], float(v)))
            elif n == name + "_count":
                series[key]["count"] = float(v)
            elif n == name + "_sum":
                series[key]["sum"] = float(v)
        self.assertTrue(series, name)
        for key, h in series.items():
            les = [float(le.replace("+Inf", "inf")) for le, _ in h["buckets"]]
            counts = [c for _, c in h["buckets"]]
            where = "%s%s: %r" % (name, dict(key), h["buckets"])
            self.assertEqual(les, sorted(les), where)
            self.assertEqual(les[-1], float("inf"), where)
            self.assertEqual(counts, sorted(counts),
                             "buckets not cumulative " + where)
            self.assertEqual(counts[-1], h["count"],
                             "+Inf bucket != _count " + where)
            self.assertIn("sum", h, where)

    def test_csi_histogram_well_formed(self):
        self.check_histogram(ob.parse_prom(self.prom()),
                             "nodefs_csi_rpc_duration_seconds")

    def test_fuse_histogram_well_formed(self):
        self.check_histogram(ob.parse_prom(self.prom()),
                             "nodefs_fuse_request_duration_seconds")

    def test_checkpoint_figures(self):
        """Every action writes records: a publish adds volume and operation
        writes, none fail, and the time they took is in the sum."""
        def figures():
            fams = ob.parse_prom(self.prom())
            return {(n, l.get("kind"), l.get("le")): float(v) for n, l, v in
                    fams["nodefs_checkpoint_write_duration_seconds"]["samples"]
                    + fams["nodefs_checkpoint_write_errors_total"]["samples"]
                    + fams["nodefs_checkpoint_removals_total"]["samples"]
                    + fams["nodefs_checkpoint_flushes_total"]["samples"]
                    + fams["nodefs_checkpoint_records_total"]["samples"]}
        h = "nodefs_checkpoint_write_duration_seconds"
        before = figures()
        self.w.volumes.append("ckm")
        self.w.ctl("volumes/ctl", "create ckm size=1M")
        self.w.ctl("volumes/ckm/ctl", "publish %s" % os.path.join(self.w.tmp, "pub-ckm"))
        self.w.ctl("volumes/ckm/ctl", "destroy")
        after = figures()
        for kind in ("volumes", "operations", "containers"):
            self.assertIn((h + "_count", kind, None), after)
            self.assertEqual(after[("nodefs_checkpoint_write_errors_total",
                                    kind, None)], 0)
        # create: CREATING, CREATED; publish: one before each of the three
        # calls and PUBLISHED; destroy: one before each of the four calls
        vol = after[(h + "_count", "volumes", None)] - \
            before[(h + "_count", "volumes", None)]
        ops = after[(h + "_count", "operations", None)] - \
            before[(h + "_count", "operations", None)]
        self.assertGreaterEqual(vol, 6)
        self.assertGreaterEqual(ops, 6, "three operations, PENDING and ended")
        self.assertGreater(after[(h + "_sum", "volumes", None)],
                           before[(h + "_sum", "volumes", None)])
        self.assertEqual(after[("nodefs_checkpoint_removals_total", "volumes",
                                None)] - before[(
                                    "nodefs_checkpoint_removals_total",
                                    "volumes", None)], 1)
        # grouped: one flush per step and one per command, fewer than records
        flushes = after[("nodefs_checkpoint_flushes_total", None, None)] - \
            before[("nodefs_checkpoint_flushes_total", None, None)]
        records = after[("nodefs_checkpoint_records_total", None, None)] - \
            before[("nodefs_checkpoint_records_total", None, None)]
        self.assertGreater(flushes, 0)
        self.assertLess(flushes, records)
        self.check_histogram(ob.parse_prom(self.prom()), h)

    def test_one_read_is_one_snapshot(self):
        """Read in 64-byte pieces while volumes are made: the pieces join
        into one valid exposition whose volume counts agree."""
        made = []
        stop = threading.Event()

        def churn():
            i = 0
            while not stop.is_set() and i < 20:
                name = "snap%d" % i
                self.w.volumes.append(name)
                self.w.ctl("volumes/ctl", "create %s size=1M" % name)
                made.append(name)
                i += 1

        t = threading.Thread(target=churn)
        t.start()
        try:
            for _ in range(10):
                fd = os.open(self.w.fs.path("metrics", "nodefs.prom"),
                             os.O_RDONLY)
                try:
                    parts = []
                    while True:
                        b = os.read(fd, 64)
                        if not b:
                            break
                        parts.append(b)
                        time.sleep(0.0005)
                finally:
                    os.close(fd)
                fams = ob.parse_prom(b"".join(parts).decode())
                in_states = sum(float(v) for _, _, v in
                                fams["nodefs_volumes"]["samples"])
                caps = len(fams["nodefs_volume_capacity_bytes"]["samples"])
                self.assertEqual(in_states, caps,
                                 "volume counts disagree within one read")
        finally:
            stop.set()
            t.join()
        for name in made:
            self.w.ctl("volumes/%s/ctl" % name, "destroy")

if __name__ == "__main__":
    nt.main("mount", "csi-plugin", "docker")

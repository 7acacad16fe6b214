# SPDX-License-Identifier: LGPL-2.1-or-later
"""metrics/nodefs.prom read by the real consumers, from Debian's packages:
- `promtool check metrics` (package prometheus) accepts the file;
- prometheus-node-exporter, with only its textfile collector, pointed with
  --collector.textfile.directory at the mounted metrics/ directory, serves
  nodefs's families on /metrics over loopback, node_textfile_scrape_error 0;
- the alerting rules of examples/monitoring pass `promtool check rules` and
  their unit tests (`promtool test rules`), and every family they use is
  one the mount serves.
The mount holds a published volume (CSI test plugin) and a running and an
exited container (dockerd), so most families have samples.
"""

import os
import re
import shutil
import socket
import subprocess
import unittest
import urllib.request

import nodefs_test as nt
import observe as ob
from test_metrics import MetricsWorld, WITH_SAMPLES


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ConsumersTest(MetricsWorld):
    def test_promtool_check_metrics(self):
        promtool = shutil.which("promtool")
        text = self.prom()
        p = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, "promtool: %s%s\n--- the file:\n%s"
                         % (p.stdout, p.stderr, text[:3000]))

    def test_alert_rules(self):
        promtool = shutil.which("promtool")
        here = os.path.join(nt.NODEFS_SRC, "examples", "monitoring")
        for argv in (["check", "rules", "nodefs-alerts.yml"],
                     ["test", "rules", "nodefs-alerts.test.yml"]):
            p = subprocess.run([promtool] + argv, cwd=here, capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 0, "promtool %s: %s%s"
                             % (" ".join(argv), p.stdout, p.stderr))
        served = ob.parse_prom(self.prom())
        with open(os.path.join(here, "nodefs-alerts.yml")) as f:
            exprs = [l.split("expr:", 1)[1] for l in f if "expr:" in l]
        used = set()
        for e in exprs:
            for name in re.findall(r"\bnodefs_[a-z_]+", e):
                used.add(re.sub(r"_(bucket|sum|count)$", "", name))
        self.assertGreaterEqual(len(used), 8, used)
        for name in sorted(used):
            self.assertIn(name, served, "the rules use %s, which nodefs does not "
                          "serve" % name)

    def test_node_exporter_textfile(self):
        exe = shutil.which("prometheus-node-exporter")
        port = free_port()
        log = open(os.path.join(self.w.tmp, "node-exporter.log"), "wb")
        proc = subprocess.Popen(
            [exe, "--web.listen-address=127.0.0.1:%d" % port,
             "--web.disable-exporter-metrics",
             "--collector.disable-defaults", "--collector.textfile",
             "--collector.textfile.directory=" + self.w.fs.path("metrics")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            url = "http://127.0.0.1:%d/metrics" % port
            body = None

            def scrape():
                nonlocal body
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        body = r.read().decode()
                    return True
                except OSError:
                    return proc.poll() is not None
            nt.wait_until(scrape, 20, 0.1)
            self.assertIsNone(proc.poll(), "node_exporter exited")
            self.assertIsNotNone(body, "node_exporter did not answer")
            fams = ob.parse_prom(body if body.endswith("\n") else body + "\n")
            for name in WITH_SAMPLES:
                self.assertTrue(name in fams, "node_exporter lacks " + name)
                self.assertTrue(fams[name]["samples"], name)
            errs = [float(v) for n, l, v in
                    fams["node_textfile_scrape_error"]["samples"]]
            self.assertEqual(errs, [0.0], "textfile scrape error")
            caps = {l.get("volume"): float(v) for _, l, v in
                    fams["nodefs_volume_capacity_bytes"]["samples"]}
            self.assertEqual(caps.get("mvol"), float(16 << 20), caps)
            self.assertEqual(fams["nodefs_csi_rpc_duration_seconds"]["type"],
                             "histogram")
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()



if __name__ == "__main__":
    nt.main("prog:promtool:prometheus", "prog:prometheus-node-exporter",
            "mount", "csi-plugin", "docker")

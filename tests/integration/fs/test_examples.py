# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shipped examples stay true: examples/nodefs.conf (the file setup.sh
installs) mounts and shows what it configures, and names every key of
nodefs(5); the operator scripts parse;
the systemd unit names the installed binary and unmounts after stop.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import nodefs_test as nt

EXAMPLES = os.path.join(nt.NODEFS_SRC, "examples")


class ExamplesTest(unittest.TestCase):
    def test_example_config_mounts(self):
        with open(os.path.join(EXAMPLES, "nodefs.conf")) as f:
            conf = f.read()
        # The plugin's socket and base dir moved under a temp dir, so the
        # test never meets a nodefs of this machine; the built-in plugin
        # from this build, found in PATH as an installed one would be.
        tmp = tempfile.mkdtemp(prefix="nodefs-example-")
        self.addCleanup(shutil.rmtree, tmp, True)
        conf = conf.replace("unix:///run/nodefs-csi/", "unix://%s/run/" % tmp)
        conf = conf.replace("/var/lib/nodefs/csi-local", tmp + "/csi-local")
        env = {"PATH": os.path.join(nt.NODEFS_BUILD, "csi-local") + ":" +
               os.environ.get("PATH", "/usr/bin:/bin")}
        with nt.Nodefs(conf, env=env) as fs:
            self.assertEqual(fs.status().get("state"), "READY")
            self.assertEqual(fs.status().get("plugins"), "1")
            self.assertIn("local", fs.listdir("plugins"))
            self.assertIn("fast", fs.listdir("profiles"))
            self.assertEqual(
                fs.read("plugins", "local", "endpoint").strip(),
                "unix://%s/run/local.sock" % tmp)
            # nodefs starts the built-in plugin and it answers
            self.assertRegex(fs.read("plugins", "local", "process"),
                             r"command: nodefs-csi-local --backing dir ")
            self.assertTrue(nt.wait_until(
                lambda: fs.read("plugins", "local", "health").startswith("READY"),
                nt.scaled(20)), fs.read("plugins", "local", "health"))
            for rt in ("docker", "lxc"):
                self.assertRegex(fs.read("runtimes", rt, "status"),
                                 r"^(healthy|unhealthy)\b")
            # --state-dir overrides the state_dir of the file.
            self.assertTrue(os.path.isdir(fs.state_dir))

    def test_example_config_names_every_key(self):
        """Every key of every section nodefs(5) documents is in the example,
        set or commented out (# or ;), under its section."""
        sys.path.insert(0, os.path.join(nt.NODEFS_SRC, "tests", "integration", "systemd"))
        from test_docs import documented_keys
        named, sec = {}, None
        with open(os.path.join(EXAMPLES, "nodefs.conf")) as f:
            for line in f:
                m = re.match(r"^[#;]?\[(\w+)(?: ([\w-]+))?\]\s*$", line)
                if m:
                    sec = m.group(1) if m.group(1) != "runtime" else "runtime " + m.group(2)
                    named.setdefault(sec, set())
                    continue
                m = re.match(r"^[#;]?\s*([a-z_]+)\s*=", line)
                if m and sec:
                    named[sec].add(m.group(1))
        for sec, keys in sorted(documented_keys().items()):
            self.assertEqual(sorted(set(keys) - named.get(sec, set())), [],
                             "[%s] keys nodefs(5) documents that examples/nodefs.conf "
                             "does not name" % sec)

    def test_operator_scripts_parse(self):
        scripts = os.path.join(EXAMPLES, "scripts")
        for name in sorted(os.listdir(scripts)):
            path = os.path.join(scripts, name)
            self.assertTrue(os.access(path, os.X_OK), name)
            if name.endswith(".py"):
                cmd = ["/usr/bin/python3", "-c", "import ast, sys; "
                       "ast.parse(open(sys.argv[1]).read())", path]
            else:
                cmd = ["bash", "-n", path]
            p = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, "%s: %s" % (name, p.stderr))
            p = subprocess.run([path, "--help"], capture_output=True,
                               text=True, timeout=10)
            self.assertEqual(p.returncode, 0, "%s --help: %s"
                             % (name, p.stderr))
            self.assertIn("usage", p.stdout.lower(), name)

    def test_systemd_unit(self):
        with open(os.path.join(EXAMPLES, "nodefs.service")) as f:
            unit = f.read()
        for want in ("ExecStart=/usr/local/bin/nodefs",
                     "ExecStopPost=-/usr/local/bin/nodefs --abort-stale /var/lib/nodefs",
                     "Restart=on-failure", "Type=notify", "NotifyAccess=main",
                     "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID"):
            self.assertIn(want, unit)
        # the mount cleared after a stop (docs-check Unit runs it)
        self.assertTrue([l for l in unit.splitlines() if l.startswith("ExecStopPost=")
                         and "/usr/bin/fusermount3 -uz /run/nodefs" in l], unit)


if __name__ == "__main__":
    nt.main()

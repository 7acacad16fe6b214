# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shape of a fresh mount: top-level entries, status, runtimes present
with absent services, file kinds and modes, sizes consistent with reads,
metrics in Prometheus text format, and whole-tree walks by ls -R, find and
stat. It needs no plugin, dockerd or LXC: the config names services that do
not exist, which must leave them present but unhealthy, never a failed mount.
"""

import os
import re
import stat
import subprocess
import unittest

import nodefs_test as nt

# Files that block on read by design: never read them in a walk.
BLOCKING = {"events", "wait"}


def walk(root):
    """(relpath, lstat) for every entry under root, root excluded."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames) + sorted(filenames):
            p = os.path.join(dirpath, n)
            out.append((os.path.relpath(p, root), os.lstat(p)))
    return out


class TreeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = nt.Nodefs(nt.offline_config())
        cls.fs.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.fs.__exit__(None, None, None)

    def test_top_level_entries(self):
        names = set(self.fs.listdir())
        missing = set(nt.TOP_LEVEL) - names
        self.assertFalse(missing, "top level lacks %s (has %s)"
                         % (sorted(missing), sorted(names)))
        p = self.fs.sh("ls")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(set(nt.TOP_LEVEL) <= set(p.stdout.split()), p.stdout)
        for d in ("metrics", "plugins", "profiles", "runtimes", "volumes",
                  "operations", "snapshots", "containers"):
            self.assertTrue(os.path.isdir(self.fs.path(d)), d)
        for f in ("status", "events"):
            self.assertTrue(os.path.isfile(self.fs.path(f)), f)

    def test_status_ready(self):
        text = self.fs.read("status")
        self.assertTrue(text.endswith("\n"), repr(text))
        for line in text.splitlines():
            self.assertRegex(line, r"^[a-z_]+: \S.*$", "not `key: value`")
        st = nt.parse_kv(text)
        self.assertEqual(st.get("state"), "READY", text)
        for k in ("version", "uptime_seconds", "volumes", "containers",
                  "operations", "plugins"):
            self.assertIn(k, st, text)
        self.assertGreaterEqual(float(st["uptime_seconds"]), 0)
        for k in ("volumes", "containers", "operations", "plugins"):
            self.assertRegex(st[k], r"^\d+$", k)
        self.assertEqual(st["volumes"], "0")
        self.assertEqual(st["containers"], "0")
        self.assertEqual(st["plugins"], "0")
        p = subprocess.run([nt.NODEFS_BIN, "--version"], capture_output=True,
                           text=True, timeout=10)
        self.assertIn(st["version"], p.stdout)

    def test_ctl_dirs_have_error_files(self):
        for d in ("plugins", "volumes", "containers"):
            names = self.fs.listdir(d)
            self.assertIn("ctl", names, d)
            self.assertIn("error", names, d)

    def test_runtimes_present_and_unhealthy(self):
        for rt in ("docker", "lxc"):
            names = self.fs.listdir("runtimes", rt)
            self.assertIn("status", names, rt)
            self.assertIn("version", names, rt)
        # Its socket does not exist: docker must say unhealthy, and why.
        text = self.fs.read("runtimes", "docker", "status")
        self.assertTrue(text.startswith("unhealthy"), text)
        self.assertGreater(len(text.strip()), len("unhealthy"),
                           "no reason given: %r" % text)
        # lxc may be healthy or not here, but it must answer with one of them.
        text = self.fs.read("runtimes", "lxc", "status")
        self.assertRegex(text, r"^(healthy|unhealthy)\b")

    def test_modes(self):
        entries = walk(self.fs.mnt)
        self.assertGreater(len(entries), 10)
        for rel, st in entries:
            name = os.path.basename(rel)
            mode = stat.S_IMODE(st.st_mode)
            self.assertEqual(st.st_uid, 0, rel)
            if stat.S_ISDIR(st.st_mode):
                if rel in ("volumes", "snapshots"):
                    self.assertIn(mode, (0o555, 0o755), "%s %o" % (rel, mode))
                else:
                    self.assertEqual(mode, 0o555, "%s %o" % (rel, mode))
                self.assertGreaterEqual(st.st_nlink, 1, rel)
            else:
                self.assertTrue(stat.S_ISREG(st.st_mode), rel)
                want = 0o200 if name == "ctl" else 0o444
                self.assertEqual(mode, want, "%s %o" % (rel, mode))
        root = os.stat(self.fs.mnt)
        self.assertEqual(stat.S_IMODE(root.st_mode), 0o555)

    def test_sizes_consistent_with_a_read(self):
        """st_size is either 0 (size unknown until read, as in procfs) or
        the length a read returns. Values may change between the stat and
        the read (uptime), so each file gets a few tries."""
        for rel, st in walk(self.fs.mnt):
            if not stat.S_ISREG(st.st_mode):
                continue
            if os.path.basename(rel) in BLOCKING:
                continue
            path = self.fs.path(rel)
            ok = False
            seen = []
            for _ in range(5):
                size = os.stat(path).st_size
                data = nt.read_file(path)
                size2 = os.stat(path).st_size
                seen.append((size, len(data.encode()), size2))
                if size == 0 or size2 == 0 or len(data.encode()) in (size,
                                                                     size2):
                    ok = True
                    break
            self.assertTrue(ok, "%s: (stat, read, stat) sizes %s"
                            % (rel, seen))

    def test_read_every_file(self):
        for rel, st in walk(self.fs.mnt):
            if not stat.S_ISREG(st.st_mode):
                continue
            name = os.path.basename(rel)
            if name in BLOCKING:
                continue
            data = nt.read_file(self.fs.path(rel))
            if data:
                self.assertTrue(data.endswith("\n"),
                                "%s does not end in a newline: %r"
                                % (rel, data[-40:]))
            if name in ("status", "ctl"):
                self.assertTrue(data.strip(), "%s is empty" % rel)

    def test_error_files_start_empty(self):
        for d in ("plugins", "volumes", "containers"):
            self.assertEqual(self.fs.error(d), "", d)

    def test_metrics_prometheus_text(self):
        text = self.fs.read("metrics", "nodefs.prom")
        self.assertTrue(text.endswith("\n"))
        samples = 0
        typed = set()
        for line in text.splitlines():
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$",
                             line)
                self.assertTrue(m, "bad comment line %r" % line)
                if m.group(1) == "TYPE":
                    self.assertIn(m.group(3), ("counter", "gauge", "histogram",
                                               "summary", "untyped"), line)
                    typed.add(m.group(2))
                continue
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? '
                         r'(\S+)( -?\d+)?$', line)
            self.assertTrue(m, "bad sample line %r" % line)
            float(m.group(3))
            samples += 1
        self.assertGreater(samples, 0, "no samples in nodefs.prom")
        self.assertTrue(all(t.startswith("nodefs_") for t in typed), typed)

    def test_ls_R(self):
        for cmd in ("ls -R .", "ls -laR .", "ls -la volumes containers"):
            p = self.fs.sh(cmd)
            self.assertEqual(p.returncode, 0, "%s: %s" % (cmd, p.stderr))
        p = self.fs.sh("ls -R .")
        for n in ("status", "nodefs.prom", "ctl", "docker", "lxc"):
            self.assertIn(n, p.stdout.split())

    def test_find_and_stat_every_file(self):
        p = self.fs.sh("find . -mindepth 1 | sort")
        self.assertEqual(p.returncode, 0, p.stderr)
        found = p.stdout.split("\n")[:-1]
        walked = sorted("./" + rel for rel, _ in walk(self.fs.mnt))
        self.assertEqual(found, walked)
        p = self.fs.sh("find . -exec stat -c '%n %F %a %s' {} +")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(p.stdout.splitlines()), len(walked) + 1)
        # Nothing blocking is read by find -type f -name status.
        p = self.fs.sh("find . -name status -type f -exec cat {} +")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("state: READY", p.stdout)

    def test_lookup_of_missing_names(self):
        for rel in ("nosuch", "volumes/nosuch", "containers/nosuch",
                    "plugins/nosuch", "runtimes/nosuch", "operations/nosuch",
                    "status/x"):
            with self.assertRaises(OSError, msg=rel) as cm:
                os.stat(self.fs.path(rel))
            self.assertIn(cm.exception.errno, (2, 20), rel)  # ENOENT ENOTDIR


if __name__ == "__main__":
    nt.main()

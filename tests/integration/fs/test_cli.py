# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's command line: --help and --version without root, a config
error refused at start with FILE:LINE, --config and --state-dir honoured,
-o passed to FUSE, -d; the running daemon keeps its name (comm and argv[0])
across its re-exec. Each refused start is checked to leave no mount and
no process behind.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import nodefs_test as nt


def project_version():
    with open(os.path.join(nt.NODEFS_SRC, "meson.build")) as f:
        m = re.search(r"version\s*:\s*'([^']+)'", f.read())
    return m.group(1) if m else None


class Refused:
    """Run the daemon (foreground) expecting it to refuse to start; the
    process is bounded in time and a mount it makes anyway is undone."""

    def __init__(self, config=None, extra=(), config_path=None):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-test-")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)
        self.state = os.path.join(self.tmp, "state")
        self.config_path = config_path or os.path.join(self.tmp, "nodefs.conf")
        if config is not None:
            with open(self.config_path, "w") as f:
                f.write(config)
        self.argv = [nt.NODEFS_BIN, "-f", "--config", self.config_path,
                     "--state-dir", self.state] + list(extra) + [self.mnt]

    def run(self):
        try:
            p = subprocess.run(self.argv, capture_output=True, text=True,
                               timeout=15, stdin=subprocess.DEVNULL)
            self.mounted = False
            return p
        except subprocess.TimeoutExpired:
            # It started instead of refusing: undo, then report.
            self.mounted = nt.is_mounted(self.mnt)
            raise AssertionError("nodefs did not refuse %s (still running "
                                 "after 15s)" % self.argv)
        finally:
            if nt.is_mounted(self.mnt):
                self.mounted = True
                subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                               capture_output=True)
            for pid in nt.find_pids_with_arg(self.mnt):
                os.kill(pid, 9)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class CliTest(unittest.TestCase):
    def test_help_without_root(self):
        for arg in ("--help", "-h"):
            p = nt.run_as([nt.NODEFS_BIN, arg])
            self.assertEqual(p.returncode, 0, p.stderr)
            out = p.stdout
            self.assertRegex(out, r"(?i)usage")
            for opt in ("-f", "-d", "-o", "--config", "--state-dir",
                        "--help", "--version"):
                self.assertIn(opt, out, "%s not in --help" % opt)

    def test_version_without_root(self):
        p = nt.run_as([nt.NODEFS_BIN, "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[0],
                         "nodefs %s" % project_version())

    def test_usage_errors(self):
        for argv in ([], ["--no-such-option", "/tmp"], ["a", "b"]):
            p = subprocess.run([nt.NODEFS_BIN] + argv, capture_output=True,
                               text=True, timeout=10,
                               stdin=subprocess.DEVNULL)
            self.assertNotEqual(p.returncode, 0, argv)
            self.assertTrue(p.stderr.strip(), "%s: no message" % argv)

    def test_config_errors_refused_with_file_and_line(self):
        cases = [
            ("[nodefs]\nallowed_targets = /mnt\n[nodefs\n", 3),
            ("# comment\n; comment\n[nodefs]\ncsi_timeout = banana\n", 4),
            ("[nodefs]\nretry_max = -5m\n", 2),
            ("[nodefs]\ncache_max_age = soon\n", 2),
            ("[nodefs]\nthis line has no equals sign\n", 2),
            ("[nodefs]\nno_such_key = 1\n", 2),
            ("[nodefs]\n\n[frobnicate x]\nkey = value\n", 3),
            ("[nodefs]\n[plugin bad/name]\nendpoint = unix:///x.sock\n", 2),
            ("[plugin p]\nendpoint = unix:///x.sock\n"
             "[profile fast]\nplugin = p\naccess_mode = telepathic\n", 5),
            # A dangling reference may be reported at the section or the key.
            ("[nodefs]\n[profile fast]\nplugin = nosuchplugin\n", (2, 3)),
            ("[nodefs]\nallowed_targets = relative/path\n", 2),
            ("key_before_section = 1\n", 1),
        ]
        for text, lines in cases:
            if isinstance(lines, int):
                lines = (lines,)
            r = Refused(text)
            try:
                p = r.run()
                self.assertEqual(p.returncode, 1,
                                 "config %r: status %d, stderr %r"
                                 % (text, p.returncode, p.stderr))
                wants = ["nodefs: %s:%d: " % (r.config_path, n) for n in lines]
                self.assertTrue(any(w in p.stderr for w in wants),
                                "config %r: want %s in stderr %r"
                                % (text, wants[0], p.stderr))
                self.assertFalse(r.mounted, "mounted despite a config error")
            finally:
                r.cleanup()

    def test_missing_explicit_config_refused(self):
        r = Refused(None, config_path="/nonexistent/nodefs-test.conf")
        try:
            p = r.run()
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("/nonexistent/nodefs-test.conf", p.stderr)
        finally:
            r.cleanup()

    def test_state_dir_created_and_config_honoured(self):
        conf = ("[nodefs]\nallowed_targets = /srv\n\n"
                "[plugin p1]\nendpoint = unix:///nonexistent/p1.sock\n"
                "default = yes\n\n"
                "[profile fast]\nplugin = p1\n"
                "access_mode = single-node-writer\nfs_type = ext4\n"
                "mount_flags = noatime\nparameters = k1=v1 k2=v2\n")
        with nt.Nodefs(conf) as fs:
            self.assertFalse(fs.state_dir.startswith(fs.mnt))
            self.assertTrue(os.path.isdir(fs.state_dir),
                            "state dir %s not created" % fs.state_dir)
            self.assertIn("p1", fs.listdir("plugins"))
            self.assertEqual(fs.read("plugins", "p1", "endpoint").strip(),
                             "unix:///nonexistent/p1.sock")
            self.assertIn("fast", fs.listdir("profiles"))
            prof = " ".join(fs.read("profiles", "fast", n)
                            for n in fs.listdir("profiles", "fast"))
            for v in ("p1", "single-node-writer", "ext4", "noatime",
                      "k1=v1"):
                self.assertIn(v, prof)
            self.assertEqual(fs.status().get("plugins"), "1")
            # An absent plugin is present and not READY.
            if "health" in fs.listdir("plugins", "p1"):
                self.assertNotRegex(fs.read("plugins", "p1", "health"),
                                    r"^READY\b")

    def test_process_keeps_its_name(self):
        # The daemon re-executes itself once (malloc tunables): its name
        # (comm: ps, pgrep -x, systemctl status) and argv[0] stay nodefs's,
        # not "exe" from /proc/self/exe.
        with nt.Nodefs("[nodefs]\n") as fs:
            pid = fs.proc.pid
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
            self.assertEqual(comm, os.path.basename(nt.NODEFS_BIN)[:15])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode()
            self.assertEqual(argv0, nt.NODEFS_BIN)
            p = subprocess.run(["pgrep", "-x", comm], capture_output=True, text=True)
            self.assertIn(str(pid), p.stdout.split())
            # it did re-execute (the tunables reached the loader)
            with open("/proc/%d/environ" % pid, "rb") as f:
                self.assertIn(b"GLIBC_TUNABLES=", f.read())

    def test_second_daemon_on_a_state_dir_refused(self):
        # Two daemons would write the same checkpoints: the second is
        # refused at start (exit 1, the reason), the first serves on, and
        # once it has stopped the state dir is free again.
        with nt.Nodefs(nt.offline_config()) as fs:
            r = Refused(nt.offline_config(), extra=())
            try:
                r.argv[r.argv.index("--state-dir") + 1] = fs.state_dir
                p = r.run()
                self.assertFalse(r.mounted)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("state dir %s is in use by another nodefs" % fs.state_dir,
                              p.stderr)
                self.assertEqual(fs.status().get("state"), "READY")
            finally:
                r.cleanup()
            fs.restart()
            self.assertEqual(fs.status().get("state"), "READY")

    def test_o_passes_fuse_options(self):
        name = "nodefs-test-%d" % os.getpid()
        with nt.Nodefs(nt.offline_config(), args=["-o", "fsname=" + name]) \
                as fs:
            ent = nt.mount_entry(fs.mnt)
            self.assertEqual(ent["source"], name, ent)
            self.assertTrue(ent["fstype"].startswith("fuse"), ent)
            # The defaults stay in force next to -o.
            self.assertIn("allow_other", ent["options"], ent)
            # fs enforces the modes itself (nodefs(5) PERMISSIONS)
            self.assertNotIn("default_permissions", ent["options"], ent)

    def test_o_ro(self):
        with nt.Nodefs(nt.offline_config(), args=["-o", "ro"]) as fs:
            ent = nt.mount_entry(fs.mnt)
            self.assertIn("ro", ent["options"], ent)
            self.assertEqual(fs.status().get("state"), "READY")
            ok, err = fs.write_ctl("volumes/ctl", "bogus")
            self.assertEqual((ok, nt.errname(err)), (False, "EROFS"))

    def test_debug_flag(self):
        with nt.Nodefs(nt.offline_config(), args=["-d"]) as fs:
            self.assertEqual(fs.status().get("state"), "READY")
            self.assertTrue(fs.log().strip(), "-d logged nothing")


if __name__ == "__main__":
    nt.main()

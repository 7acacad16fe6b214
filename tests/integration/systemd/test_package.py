# SPDX-License-Identifier: LGPL-2.1-or-later
"""systemd-package: the Debian package builds, is lintian-clean, and holds
what it must.

A copy of the source tree (what git tracks, or the tree without build
directories) is built with `dpkg-buildpackage -us -uc -b` (nocheck,
parallel=2, and noopt: it compiles everything once, beside the other tests,
and what is checked here is the packaging, not the code's optimisation),
lintian reports no error, and
the .deb unpacked with `dpkg -x` into a throwaway root holds:
- every program and man page meson installs (from `meson introspect
  --installed` of this build: nodefs, and the built-in CSI plugins once
  they exist), under /usr rather than /usr/local;
- the unit in /lib/systemd/system, Type=notify, starting /usr/bin/nodefs;
- examples/nodefs.conf as /etc/nodefs/nodefs.conf, a conffile;
- /var/lib/nodefs; Depends with fuse3 and the shared libraries (shlibs).
The packaged daemon runs (--version) and has no test hooks.

Exit 77 only when dpkg-buildpackage is missing (scripts/packages.txt
installs it). Runs in build/ only (the package builds without sanitizers
anyway), in its own suite `package`: the build takes a few minutes on a
loaded 2-core machine.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import nodefs_test as nt

SRC = nt.NODEFS_SRC
BUILD = nt.NODEFS_BUILD


def source_files():
    """The files of the tree, relative: git's list when SRC is a checkout."""
    p = subprocess.run(["git", "-C", SRC, "ls-files", "-co", "--exclude-standard"],
                       capture_output=True, text=True)
    if p.returncode == 0 and p.stdout.strip():
        return [f for f in p.stdout.splitlines()
                if os.path.isfile(os.path.join(SRC, f))]
    out = []
    for root, dirs, files in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        dirs[:] = [d for d in dirs if not (
            d.startswith(".") or (rel == "." and (d.startswith("build")
                                                  or d.startswith("obj-"))))]
        out += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return out


class Package(unittest.TestCase):
    tmp = None
    deb = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="nodefs-package-")
        src = os.path.join(cls.tmp, "src")
        for f in source_files():
            dst = os.path.join(src, f)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(SRC, f), dst)
        env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck noopt parallel=2")
        env.pop("MAKEFLAGS", None)
        t0 = time.monotonic()
        p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src,
                           env=env, capture_output=True, text=True,
                           timeout=1500)
        cls.build_seconds = time.monotonic() - t0
        cls.build_log = p.stdout + p.stderr
        print("dpkg-buildpackage: exit %d in %.0f s"
              % (p.returncode, cls.build_seconds), flush=True)
        debs = [f for f in os.listdir(cls.tmp)
                if f.startswith("nodefs_") and f.endswith(".deb")]
        if p.returncode == 0 and len(debs) == 1:
            cls.deb = os.path.join(cls.tmp, debs[0])
            cls.root = os.path.join(cls.tmp, "root")
            subprocess.run(["dpkg", "-x", cls.deb, cls.root], check=True)
            print(subprocess.run(["dpkg", "-c", cls.deb], capture_output=True,
                                 text=True).stdout, flush=True)

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if not self.deb:
            self.fail("the package did not build:\n" + self.build_log[-8000:])

    def field(self, name):
        return subprocess.run(["dpkg-deb", "-f", self.deb, name],
                              capture_output=True, text=True,
                              check=True).stdout.strip()

    def test_lintian_no_errors(self):
        # lintian leaves its MLDBM caches (mldbm-elf-*) in TMPDIR: give it
        # this test's own, removed with the rest in tearDownClass
        ltmp = os.path.join(self.tmp, "lintian-tmp")
        os.makedirs(ltmp, exist_ok=True)
        p = subprocess.run(["lintian", "--no-tag-display-limit", self.deb],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, TMPDIR=ltmp))
        print(p.stdout, flush=True)
        errors = [l for l in p.stdout.splitlines() if l.startswith("E:")]
        self.assertEqual(errors, [], p.stdout + p.stderr)
        self.assertNotIn("error", p.stderr.lower().replace(
            "running with root privileges is not recommended!", ""), p.stderr)

    def test_installs_what_meson_installs(self):
        p = subprocess.run(["meson", "introspect", "--installed", BUILD],
                           capture_output=True, text=True, check=True)
        installed = json.loads(p.stdout).values()
        p = subprocess.run(["meson", "introspect", "--buildoptions", BUILD],
                           capture_output=True, text=True, check=True)
        prefix = [o["value"] for o in json.loads(p.stdout)
                  if o["name"] == "prefix"][0]
        wanted = []
        for path in installed:
            rel = os.path.relpath(path, prefix)
            if rel.startswith("bin/"):
                wanted.append(os.path.join("usr", rel))
            elif rel.startswith("share/man/"):
                wanted.append(os.path.join("usr", rel) + ".gz")
        self.assertIn("usr/bin/nodefs", wanted)
        for rel in wanted:
            self.assertTrue(os.path.isfile(os.path.join(self.root, rel)), rel)
        for rel in wanted:
            if rel.startswith("usr/bin/"):
                self.assertTrue(os.access(os.path.join(self.root, rel), os.X_OK), rel)
        if os.path.isdir(os.path.join(SRC, "csi-local")):
            self.assertIn("usr/bin/nodefs-csi-local", wanted)
        self.assertFalse(os.path.exists(os.path.join(self.root, "usr/local")))

    def test_unit(self):
        path = os.path.join(self.root, "lib/systemd/system/nodefs.service")
        with open(path) as f:
            unit = f.read()
        for want in ("Type=notify", "NotifyAccess=main", "WatchdogSec=",
                     "ExecReload=/bin/kill -HUP $MAINPID",
                     # nodefs(8) SYSTEMD: kept plugins outlive the unit's
                     # stop (their own scope); only failures hit the limit
                     "KillMode=mixed", "StartLimitBurst=5", "reset-failed %n",
                     "ExecStart=/usr/bin/nodefs -f --config "
                     "/etc/nodefs/nodefs.conf /run/nodefs"):
            self.assertIn(want, unit)
        self.assertNotIn("/usr/local", unit)
        if shutil.which("systemd-analyze"):
            # the unit as systemd reads it (paths checked against the host,
            # so only the unit's own syntax is judged here)
            p = subprocess.run(["systemd-analyze", "verify", path],
                               capture_output=True, text=True, timeout=60)
            bad = [l for l in (p.stdout + p.stderr).splitlines()
                   if "Unknown" in l or "Invalid" in l or "ignoring" in l]
            self.assertEqual(bad, [], p.stdout + p.stderr)

    def test_config_and_state_dir(self):
        with open(os.path.join(self.root, "etc/nodefs/nodefs.conf")) as f:
            packaged = f.read()
        with open(os.path.join(SRC, "examples/nodefs.conf")) as f:
            self.assertEqual(packaged, f.read())
        ctl = os.path.join(self.tmp, "control")
        subprocess.run(["dpkg-deb", "-e", self.deb, ctl], check=True)
        with open(os.path.join(ctl, "conffiles")) as f:
            self.assertIn("/etc/nodefs/nodefs.conf", f.read().split())
        self.assertTrue(os.path.isdir(os.path.join(self.root, "var/lib/nodefs")))

    def test_depends(self):
        dep = self.field("Depends")
        for want in ("fuse3", "libfuse3-3", "libc6", "liblxc1", "libcurl4",
                     "libnghttp2-14", "libprotobuf-c1", "libjansson4"):
            self.assertIn(want, dep)

    def test_packaged_daemon_runs(self):
        p = subprocess.run([os.path.join(self.root, "usr/bin/nodefs"), "--version"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("nodefs "), p.stdout)
        self.assertNotIn("test hooks", p.stdout)


if __name__ == "__main__":
    nt.main("prog:dpkg-buildpackage:dpkg-dev")

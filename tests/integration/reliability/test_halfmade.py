#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A daemon killed while an LXC template runs leaves no half-made container.

A test build (-Dtest_hooks=true) run with NODEFS_CRASH_AT=lxc:template
SIGKILLs itself from the template's session, just before the template
starts, which then goes on running, as after a real crash. What it leaves in the lxcpath (the
in-progress mark .nodefs-creating-NAME, the container directory the
template is filling) is checked, then the daemon is started again on the
same state dir: recovery must kill the template's process group, remove
the container and every file of the create, end the create's operation
FAILED with the reason, and leave the name free for a new create.
"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "containers"))

import ctest  # noqa: E402
import nodefs_test as nt  # noqa: E402


def template_procs(path):
    """Pids of processes whose argv mentions path (the template's --path)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if path.encode() in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


class HalfMadeTest(unittest.TestCase):
    def setUp(self):
        nt.requires("hooks", "lxc")

    def test_crash_mid_template(self):
        with ctest.Env() as env:
            name = env.name("half")
            # liblxc's name for it: this instance's name_prefix + name
            cdir = os.path.join(env.lxcpath, env.engine(name))
            mark = os.path.join(env.lxcpath, ".nodefs-creating-" + env.engine(name))
            # keep the Env's sanitizer settings (liblxc's own leak)
            env.fs.env = dict(ctest.sanitizer_env(), NODEFS_CRASH_AT="lxc:template")
            env.fs.restart()
            ok, _ = env.fs.write_ctl("containers/ctl", "create %s runtime=lxc" % name)
            self.assertFalse(ok, "the create finished before the crash")
            died = nt.wait_until(lambda: env.fs.proc.poll() is not None, 30)
            self.assertTrue(died, "the daemon did not crash in the template:\n" + env.fs.log())
            env.fs.kill9()
            # what the crash left: the mark, and a container being made
            self.assertTrue(os.path.exists(mark), os.listdir(env.lxcpath))
            self.assertTrue(os.path.isdir(cdir), os.listdir(env.lxcpath))
            self.assertFalse(os.path.exists(os.path.join(cdir, "nodefs.json")))
            running = template_procs(cdir)

            env.fs.env = ctest.sanitizer_env()
            t0 = time.monotonic()
            env.fs.start()
            self.assertTrue(nt.wait_until(
                lambda: nt.parse_kv(env.read("status"))["state"] == "READY", 30))
            took = time.monotonic() - t0
            left = sorted(f for f in os.listdir(env.lxcpath) if name in f)
            self.assertEqual(left, [], "the half-made container was not removed")
            self.assertEqual(template_procs(cdir), [], "the template still runs")
            self.assertNotIn(name, env.containers())
            ops = [o for o in env.fs.listdir("operations")
                   if env.fs.read("operations", o, "object").strip() == "containers/" + name]
            self.assertEqual(len(ops), 1, ops)
            op = ops[0]
            self.assertEqual(env.fs.read("operations", op, "type").strip(), "container.create")
            self.assertEqual(env.fs.read("operations", op, "state").strip(), "FAILED")
            self.assertIn("half-made container was removed",
                          env.fs.read("operations", op, "error"))
            self.assertIn("removed the half-made lxc container " + env.engine(name),
                          env.fs.log())
            # the name is free again, and the reconciler finds nothing
            env.must("containers/ctl", "create %s runtime=lxc" % name)
            self.assertEqual(env.state(name), "CREATED")
            self.assertFalse(os.path.exists(mark))
            self.assertTrue(os.path.exists(os.path.join(cdir, "nodefs.json")))
            self.assertNotIn(name, env.read("runtimes", "lxc", "reconcile"))
            env.cctl(name, "destroy")
            env.wait_gone(name)
            self.assertFalse(os.path.exists(cdir))
            print("recovery with a half-made container took %.2f s (the template "
                  "was %s when the daemon restarted)"
                  % (took, "still running" if running else "done"))

    def test_failed_create_leaves_nothing(self):
        """A template that fails: no container, no mark, no create file."""
        with ctest.Env() as env:
            name = env.name("bad")
            ok, err = env.ctl("containers/ctl",
                              "create %s runtime=lxc template=download distro=none "
                              "release=none arch=none" % name)
            self.assertFalse(ok)
            self.assertEqual([f for f in os.listdir(env.lxcpath) if name in f], [])
            self.assertNotIn(name, env.containers())


if __name__ == "__main__":
    ctest.main(lxc_needed=True)

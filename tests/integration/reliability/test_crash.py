#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Crash matrix: kill -9 at every checkpoint of a command, restart, finish.

For each step of volume create/publish/unpublish/unstage/destroy and
container run/stop/destroy, the daemon (a test build: -Dtest_hooks=true)
runs with NODEFS_CRASH_AT=KIND:STATE, which SIGKILLs it right after that
checkpoint reached the disk. It is restarted on the same state dir; the
interrupted operation is driven to an end by recovery, or the command is
written again, as an operator would. The end state must be the one the
command gives without a crash, and once everything is destroyed nothing
may be left: no CSI volume in the plugin, no mount, no engine container.
"""
import json
import os
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "volumes"))

import nodefs_test as nt  # noqa: E402
import voltest  # noqa: E402

COVERED = []


def settle(env, timeout=30):
    """Wait until no operation is PENDING."""
    def done():
        return all(env.fs.read("operations", o, "state").strip() != "PENDING"
                   for o in env.fs.listdir("operations"))
    return nt.wait_until(done, timeout)


def crash_run(env, point, rel, line):
    """Restart the daemon armed at point, write line (it dies), restart."""
    env.fs.env = {"NODEFS_CRASH_AT": point}
    env.fs.restart()
    ok, _ = env.fs.write_ctl(rel, line)
    died = nt.wait_until(lambda: env.fs.proc.poll() is not None, 30)
    if not died:
        raise AssertionError("%s: the daemon did not crash at %s (write ok=%s)\n%s"
                             % (line, point, ok, env.fs.log()))
    env.fs.kill9()
    env.fs.env = None
    env.fs.start()
    env.wait_plugin_ready()
    COVERED.append("%s @ %s" % (line, point))


class VolumeCrashTest(unittest.TestCase):
    def setUp(self):
        nt.requires("hooks")

    def check_clean(self, env):
        """Destroy what is left and prove nothing leaked."""
        for name in env.fs.listdir("volumes"):
            if name in ("ctl", "error"):
                continue
            if env.state(name) == "PUBLISHED":
                env.ctl("volumes/%s/ctl" % name, "unpublish")
            ok, err = env.ctl("volumes/%s/ctl" % name, "destroy")
            if not ok:
                self.fail("destroy %s: %s %s" % (name, err, env.fs.error("volumes/" + name)))
        self.assertEqual(env.plugin.state(), {},
                         "CSI volumes leaked in the plugin")
        self.assertEqual(voltest.mounts_under(env.tmp), [], "mounts leaked")

    def scenario(self, flags, prep, point, line, want):
        with voltest.VolEnv(plugin_flags=flags) as env:
            line = line.replace("TARGET", env.target("cv"))
            for rel, l in prep:
                ok, err = env.ctl(rel, l.replace("TARGET", env.target("cv")))
                self.assertTrue(ok, "%s: %s" % (l, err))
            rel = "volumes/ctl" if line.startswith("create") else "volumes/cv/ctl"
            crash_run(env, point, rel, line)
            self.assertTrue(settle(env), "operations still PENDING after recovery")
            # finish the command as an operator would, if recovery has not
            if line.startswith("create"):
                if "cv" not in env.volumes():
                    ok, err = env.ctl(rel, line)
                    self.assertTrue(ok, err)
            elif line.startswith("destroy"):
                if "cv" in env.volumes():
                    ok, err = env.ctl(rel, line)
                    self.assertTrue(ok, "%s: %s" % (err, env.fs.error("volumes/cv")))
            elif env.state("cv") != want:
                ok, err = env.ctl(rel, line)
                self.assertTrue(ok, "%s: %s" % (err, env.fs.error("volumes/cv")))
            if want is None:
                self.assertNotIn("cv", env.volumes())
            else:
                self.assertEqual(env.state("cv"), want)
            if want == "PUBLISHED":
                with open(env.target("cv", "probe"), "w") as f:
                    f.write("x")
                vid = env.vol_id("cv")
                self.assertTrue(os.path.exists(os.path.join(env.plugin.volume_dir(vid), "probe")))
            self.check_clean(env)

    def test_create(self):
        self.scenario((), [], "volumes:CREATING", "create cv size=1M", "CREATED")

    def test_publish_steps(self):
        for point in ("volumes:CONTROLLER_PUBLISH", "volumes:NODE_STAGE", "volumes:NODE_PUBLISH",
                      "operations:PENDING"):
            with self.subTest(point=point):
                self.scenario((), [("volumes/ctl", "create cv size=1M")], point,
                              "publish TARGET", "PUBLISHED")

    def test_down_steps(self):
        for point, line, want in (("volumes:NODE_UNPUBLISH", "unpublish", "VOL_READY"),
                                  ("volumes:NODE_UNSTAGE", "unstage", "CREATED"),
                                  ("volumes:CONTROLLER_UNPUBLISH", "unstage", "CREATED"),
                                  ("volumes:DELETING", "destroy", None)):
            with self.subTest(point=point):
                self.scenario((), [("volumes/ctl", "create cv size=1M"),
                                   ("volumes/cv/ctl", "publish TARGET")]
                              + ([("volumes/cv/ctl", "unpublish")] if line != "unpublish" else []),
                              point, line, want)


class GroupCrashTest(unittest.TestCase):
    """A crash between the grouped records of concurrent commands: the
    journal's flush that carried several operations' records reached the
    disk, the first of their files was written and the others were not
    (NODEFS_CRASH_AT=group:1). Recovery replays the journal: every command
    whose operation was in the flush is found PENDING and driven to its
    end, and no record is torn or lost. (Writes to one ctl file are one at
    a time in the kernel: the commands go to the volumes' own ctl files.)"""
    WRITERS = 6

    def setUp(self):
        nt.requires("hooks")

    def test_group(self):
        with voltest.VolEnv() as env:
            names = ["g%d" % i for i in range(self.WRITERS)]
            for n in names:
                ok, err = env.ctl("volumes/ctl", "create %s size=1M" % n)
                self.assertTrue(ok, err)
            # each action waits 300 ms on its worker before it runs, so the
            # operations the writers begin are queued together before the
            # first step's flush takes them all
            env.fs.env = {"NODEFS_CRASH_AT": "group:1", "NODEFS_TEST_SLOW_ACTION": "300"}
            env.fs.restart()
            results = {}

            def writer(n):
                results[n] = env.ctl("volumes/%s/ctl" % n, "publish " + env.target(n))
            threads = [threading.Thread(target=writer, args=(n,)) for n in names]
            for t in threads:
                t.start()
            died = nt.wait_until(lambda: env.fs.proc.poll() is not None, 30)
            for t in threads:
                t.join(30)
            self.assertTrue(died, "the daemon did not crash at group:1 %s\n%s"
                            % (results, env.fs.log()))
            self.assertIn("between the grouped records", env.fs.log())
            env.fs.kill9()
            env.fs.env = None
            env.fs.start()
            env.wait_plugin_ready()
            COVERED.append("%d concurrent publishes @ group:1" % self.WRITERS)
            self.assertIn("records replayed", env.fs.log())
            self.assertTrue(settle(env), "operations still PENDING after recovery")
            st = env.fs.status()
            self.assertEqual(st["checkpoint_errors"], "0", st)
            pubs = [env.op(o) for o in env.ops()]
            pubs = [o for o in pubs if o["type"] == "volume.publish"]
            # the flush carried two operations or more: each came back
            self.assertGreaterEqual(len(pubs), 2, pubs)
            for o in pubs:
                self.assertEqual(o["state"], "FINISHED", o)
                self.assertEqual(env.state(o["object"].split("/", 1)[1]), "PUBLISHED", o)
            # an acknowledged command is never lost
            for n, (ok, _) in results.items():
                if ok:
                    self.assertEqual(env.state(n), "PUBLISHED", n)
            self.assertEqual(sorted(env.volumes()), names)
            for name in names:
                if env.state(name) == "PUBLISHED":
                    ok, err = env.ctl("volumes/%s/ctl" % name, "unpublish")
                    self.assertTrue(ok, err)
                ok, err = env.ctl("volumes/%s/ctl" % name, "destroy")
                self.assertTrue(ok, err)
            self.assertEqual(env.plugin.state(), {}, "CSI volumes leaked in the plugin")
            self.assertEqual(voltest.mounts_under(env.tmp), [], "mounts leaked")


class ContainerCrashTest(unittest.TestCase):
    def setUp(self):
        nt.requires("hooks", "docker")
        self.host = os.environ["NODEFS_TEST_DOCKER_HOST"]

    def engine_containers(self):
        out = subprocess.run(["docker", "-H", self.host, "ps", "-aq", "--filter",
                              "label=io.nodefs.managed=1", "--filter", "name=nodefs-cc"],
                             capture_output=True, text=True)
        return out.stdout.split()

    def test_container_steps(self):
        run = ("run cc runtime=docker image=nodefs-test/busybox cmd='sleep 600'")
        # the create checkpoints nothing before the engine answers: its
        # crash point is the operation's PENDING record
        cases = (("operations:PENDING", "containers/ctl", run, [], "RUNNING"),
                 ("containers:CREATED", "containers/ctl", run, [], "RUNNING"),
                 ("operations:PENDING", "containers/cc/ctl", "stop 1",
                  [("containers/ctl", run)], "EXITED"),
                 ("operations:PENDING", "containers/cc/ctl", "destroy",
                  [("containers/ctl", run)], None))
        for point, rel, line, prep, want in cases:
            with self.subTest(point=point, line=line):
                cfg = "[nodefs]\n[runtime docker]\nendpoint = %s\n" % self.host
                with nt.Nodefs(cfg) as fs:
                  try:
                    for r, l in prep:
                        ok, err = fs.write_ctl(r, l)
                        self.assertTrue(ok, "%s: %s" % (l, err))
                    nth = point
                    fs.env = {"NODEFS_CRASH_AT": nth}
                    fs.restart()
                    fs.write_ctl(rel, line)
                    self.assertTrue(nt.wait_until(lambda: fs.proc.poll() is not None, 60),
                                    "no crash at %s" % nth)
                    fs.kill9()
                    fs.env = None
                    fs.start()
                    COVERED.append("%s @ %s" % (line, nth))
                    nt.wait_until(lambda: all(
                        fs.read("operations", o, "state").strip() != "PENDING"
                        for o in fs.listdir("operations")), 60)
                    names = fs.listdir("containers")
                    if want is None:
                        if "cc" in names:
                            ok, err = fs.write_ctl("containers/cc/ctl", "destroy")
                            self.assertTrue(ok, err)
                    else:
                        if "cc" not in names:
                            ok, err = fs.write_ctl("containers/ctl", run)
                            self.assertTrue(ok, "%s %s" % (err, fs.error("containers")))
                        state = fs.read("containers", "cc", "state").strip()
                        if state != want:
                            ok, err = fs.write_ctl(rel, line)
                            self.assertTrue(ok, "%s: %s %s" % (line, err, fs.error("containers/cc")))
                        self.assertTrue(nt.wait_until(
                            lambda: fs.read("containers", "cc", "state").strip() == want, 30),
                            fs.read("containers", "cc", "state"))
                        ok, err = fs.write_ctl("containers/cc/ctl", "destroy")
                        self.assertTrue(ok, err)
                    self.assertEqual(self.engine_containers(), [], "engine containers leaked")
                  finally:
                    ids = self.engine_containers()
                    if ids:
                        subprocess.run(["docker", "-H", self.host, "rm", "-f"] + ids,
                                       capture_output=True)


if __name__ == "__main__":
    try:
        nt.main()
    finally:
        print("crash points covered: %d" % len(COVERED))
        for c in COVERED:
            print("  " + c)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""Docker containers as files, end to end: a real nodefs mount whose
[runtime docker] is the fixture's dockerd (NODEFS_TEST_DOCKER_HOST; skip when
unset), driven with open/read/write as a shell user would (issue #5): run,
state and the files beside it, exec, stats, update, pause/resume, stop, kill,
logs, wait, destroy; an outside `docker kill` seen within a second; an OOM
kill; bad input refused with nothing created; foreign containers never
shown or touched; recovery after a restart; an engine that goes away and
comes back; 20 runs at once. Every container a test made is removed by its
tearDown, through the engine, whatever happened.
"""

import json
import os
import subprocess
import threading
import time
import unittest

import nodefs_test as nt

HOST = os.environ.get("NODEFS_TEST_DOCKER_HOST", "")
IMAGE = "nodefs-test/busybox:latest"
FIXTURE = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "dockerd.sh")


def docker(*args, host=None, check=False, timeout=60):
    env = dict(os.environ, DOCKER_HOST=host or HOST)
    return subprocess.run(["docker", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=check)


def config(host=None):
    return ("[nodefs]\nallowed_targets = /tmp\n\n"
            "[runtime docker]\nendpoint = %s\nstop_timeout = 5s\n" % (host or HOST))


class DockerFs(unittest.TestCase):
    def setUp(self):
        self.prefix = "f%d-%s" % (os.getpid(), self._testMethodName[5:13].replace("_", ""))

    def tearDown(self):
        # whatever the test did, nothing of it stays in the engine
        out = docker("ps", "-aq", "--filter", "name=nodefs-" + self.prefix).stdout.split()
        if out:
            docker("rm", "-f", "-v", *out)

    def name(self, tag):
        return "%s-%s" % (self.prefix, tag)

    def run_ctr(self, fs, name, opts="cmd='sleep 1000'"):
        ok, err = fs.write_ctl("containers/ctl",
                               "run %s runtime=docker image=%s %s" % (name, IMAGE, opts))
        if not ok:
            self.fail("run %s: %s: %s" % (name, nt.errname(err), fs.read("containers", "error")))

    def ctl(self, fs, name, line):
        ok, err = fs.write_ctl("containers/%s/ctl" % name, line)
        if not ok:
            self.fail("%s %s: %s: %s" % (name, line, nt.errname(err),
                                         fs.read("containers", name, "error")))

    def state(self, fs, name):
        return fs.read("containers", name, "state").strip()

    def wait_state(self, fs, name, want, timeout=10):
        self.assertTrue(nt.wait_until(lambda: self.state(fs, name) == want, timeout),
                        "%s: state %s, want %s" % (name, self.state(fs, name), want))

    def stats(self, fs, name):
        return {k: float(v) for k, v in nt.parse_kv(fs.read("containers", name, "stats"), " ").items()}

    def test_run_files_and_commands(self):
        with nt.Nodefs(config()) as fs:
            self.assertEqual(fs.read("runtimes", "docker", "status").split()[0], "healthy")
            self.assertTrue(fs.read("runtimes", "docker", "version").startswith("1."))
            web = self.name("web")
            self.run_ctr(fs, web, "cmd='sleep 1000' memory=64M cpus=0.5 env.MODE=test")
            self.assertEqual(self.state(fs, web), "RUNNING")
            pid = int(fs.read("containers", web, "pid"))
            self.assertGreater(pid, 0)
            os.kill(pid, 0)
            self.assertTrue(fs.read("containers", web, "started_at").startswith("20"))
            self.assertIn("nodefs-test/busybox", fs.read("containers", web, "image"))
            self.assertEqual(fs.read("containers", web, "runtime").strip(), "docker")
            info = json.loads(fs.read("containers", web, "info.json"))
            self.assertEqual(info.get("state"), "RUNNING")

            st = self.stats(fs, web)
            self.assertEqual(st["memory_limit_bytes"], 64 << 20)
            self.assertGreater(st["memory_bytes"], 0)
            self.assertGreaterEqual(st["pids"], 1)

            self.ctl(fs, web, "exec 'printenv MODE'")
            files = fs.listdir("containers", web)
            out = [f for f in files if f.startswith("exec") and "out" in f]
            code = [f for f in files if f.startswith("exec") and "code" in f]
            self.assertTrue(out and code, files)
            self.assertEqual(fs.read("containers", web, out[0]), "test\n")
            self.assertEqual(fs.read("containers", web, code[0]).strip(), "0")

            self.ctl(fs, web, "update memory=128M cpus=1")
            self.assertEqual(self.stats(fs, web)["memory_limit_bytes"], 128 << 20)
            self.assertEqual(self.state(fs, web), "RUNNING")

            self.ctl(fs, web, "pause")
            self.wait_state(fs, web, "PAUSED")
            self.ctl(fs, web, "resume")
            self.wait_state(fs, web, "RUNNING")

            # sleep as pid 1 ignores SIGTERM: stop waits, then kills
            t0 = time.monotonic()
            self.ctl(fs, web, "stop 1")
            self.wait_state(fs, web, "EXITED")
            self.assertGreaterEqual(time.monotonic() - t0, 0.9)
            self.assertEqual(fs.read("containers", web, "exit_code").strip(), "137")
            self.assertEqual(fs.read("containers", web, "wait").strip(),
                             "exit_code=137 oom_killed=0")

            self.ctl(fs, web, "start")
            self.wait_state(fs, web, "RUNNING")
            self.ctl(fs, web, "kill 9")
            self.wait_state(fs, web, "EXITED")
            self.assertEqual(fs.read("containers", web, "exit_code").strip(), "137")

            cid = fs.read("containers", web, "id").strip()
            self.ctl(fs, web, "destroy")
            self.assertTrue(nt.wait_until(lambda: web not in fs.listdir("containers"), 10))
            self.assertNotEqual(docker("inspect", cid).returncode, 0, "engine still has it")

    def test_logs(self):
        with nt.Nodefs(config()) as fs:
            n = self.name("logs")
            self.run_ctr(fs, n, "cmd='sh -c \"echo to-out; echo to-err >&2\"'")
            self.assertEqual(fs.read("containers", n, "wait").strip(), "exit_code=0 oom_killed=0")
            logs = fs.read("containers", n, "logs")
            self.assertIn("to-out\n", logs)
            self.assertIn("to-err\n", logs)
            self.ctl(fs, n, "destroy")

    def test_outside_kill_within_a_second(self):
        with nt.Nodefs(config()) as fs:
            n = self.name("victim")
            self.run_ctr(fs, n)
            cid = fs.read("containers", n, "id").strip()
            docker("kill", cid, check=True)
            t0 = time.monotonic()
            self.assertTrue(nt.wait_until(lambda: self.state(fs, n) == "EXITED", 1.0),
                            "state %s a second after docker kill" % self.state(fs, n))
            print("EXITED seen %.3f s after docker kill returned" % (time.monotonic() - t0))
            self.assertEqual(fs.read("containers", n, "exit_code").strip(), "137")

    def test_oom_kill(self):
        with nt.Nodefs(config()) as fs:
            n = self.name("oom")
            # the pause: containerd arms its OOM watch just after the start,
            # and the engine loses an OOM before that
            self.run_ctr(fs, n, "memory=8M cmd='sh -c \"sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1\"'")
            self.assertEqual(fs.read("containers", n, "wait").strip(), "exit_code=137 oom_killed=1")
            self.assertEqual(fs.read("containers", n, "oom_killed").strip(), "1")

    def test_bad_input_creates_nothing(self):
        with nt.Nodefs(config()) as fs:
            before = fs.listdir("containers")
            cases = [
                ("run %s runtime=docker image=127.0.0.1:1/nodefs/missing" % self.name("noimg"), "ENOENT"),
                ("run %s runtime=docker image=%s memory=1K" % (self.name("mem"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s memory=lots" % (self.name("mem2"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s cmd='sleep 1" % (self.name("quote"), IMAGE), "EINVAL"),
                # outside allowed_targets: refused (common/valid.c answers EPERM)
                ("run %s runtime=docker image=%s bind=/etc:/x" % (self.name("bind"), IMAGE), "EPERM"),
            ]
            for line, want in cases:
                ok, err = fs.write_ctl("containers/ctl", line)
                self.assertEqual((ok, nt.errname(err)), (False, want), line)
                msg = fs.read("containers", "error").strip()
                self.assertTrue(msg, "no error text for: " + line)
            self.assertEqual(fs.listdir("containers"), before)
            taken = self.name("taken")
            self.run_ctr(fs, taken)
            ok, err = fs.write_ctl("containers/ctl",
                                   "run %s runtime=docker image=%s" % (taken, IMAGE))
            self.assertEqual((ok, nt.errname(err)), (False, "EEXIST"))
            self.assertEqual(self.state(fs, taken), "RUNNING")
            left = docker("ps", "-a", "--format", "{{.Names}}",
                          "--filter", "name=nodefs-" + self.prefix).stdout.split()
            self.assertEqual(left, ["nodefs-" + taken])

    def test_foreign_untouched_and_recovery(self):
        foreign = "nodefs-foreign-%d" % os.getpid()
        docker("run", "-d", "--name", foreign, IMAGE, "sleep", "1000", check=True)
        try:
            with nt.Nodefs(config()) as fs:
                n = self.name("kept")
                self.run_ctr(fs, n)
                cid = fs.read("containers", n, "id").strip()
                self.assertNotIn(foreign, fs.listdir("containers"))
                fs.restart()
                self.assertIn(n, fs.listdir("containers"))
                self.assertEqual(fs.read("containers", n, "id").strip(), cid)
                self.wait_state(fs, n, "RUNNING")
                self.assertNotIn(foreign, fs.listdir("containers"))
                self.ctl(fs, n, "destroy")
            r = docker("inspect", "-f", "{{.State.Running}}", foreign)
            self.assertEqual(r.stdout.strip(), "true", "the foreign container was touched")
        finally:
            docker("rm", "-f", foreign)

    def test_twenty_at_once(self):
        with nt.Nodefs(config()) as fs:
            names = [self.name("p%d" % i) for i in range(20)]
            results = {}

            def go(n):
                results[n] = fs.write_ctl(
                    "containers/ctl", "run %s runtime=docker image=%s cmd='sleep 1000' memory=32M" % (n, IMAGE))

            t0 = time.monotonic()
            threads = [threading.Thread(target=go, args=(n,)) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print("20 runs through nodefs in %.2f s" % (time.monotonic() - t0))
            for n in names:
                self.assertEqual(results[n], (True, 0), n)
                self.assertEqual(self.state(fs, n), "RUNNING")
            for n in names:
                self.ctl(fs, n, "destroy")

    def test_engine_goes_away_and_comes_back(self):
        d = "/tmp/nfdk3.%d" % os.getpid()
        out = subprocess.run([FIXTURE, "start", d], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            subprocess.run([FIXTURE, "stop", d], capture_output=True, timeout=120)
            self.fail("second dockerd: " + out.stderr)
        host = "unix://%s/docker.sock" % d
        try:
            with nt.Nodefs(config(host)) as fs:
                status = lambda: fs.read("runtimes", "docker", "status")
                self.assertTrue(status().startswith("healthy"), status())
                subprocess.run([FIXTURE, "stop", d], capture_output=True, timeout=120, check=True)
                self.assertTrue(nt.wait_until(lambda: status().startswith("unhealthy"), 15), status())
                self.assertIn("unreachable", status())
                # a command fails at once with a reason, never hangs
                t0 = time.monotonic()
                ok, err = fs.write_ctl("containers/ctl",
                                       "run %s runtime=docker image=%s" % (self.name("down"), IMAGE))
                self.assertFalse(ok)
                self.assertLess(time.monotonic() - t0, 5)
                self.assertTrue(fs.read("containers", "error").strip())
                subprocess.run([FIXTURE, "start", d], capture_output=True, timeout=120, check=True)
                self.assertTrue(nt.wait_until(lambda: status().startswith("healthy"), 15), status())
                n = self.name("back")
                self.run_ctr(fs, n)
                self.ctl(fs, n, "destroy")
        finally:
            subprocess.run([FIXTURE, "stop", d], capture_output=True, timeout=120)


if __name__ == "__main__":
    if not HOST:
        nt.skip("NODEFS_TEST_DOCKER_HOST unset: start tests/fixtures/dockerd.sh")
    nt.main()

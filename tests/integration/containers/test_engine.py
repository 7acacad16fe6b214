# SPDX-License-Identifier: LGPL-2.1-or-later
"""An engine that goes away and comes back, through the mount. The test
starts a second, private dockerd (tests/fixtures/dockerd.sh on its own dir,
never the run's shared one), mounts nodefs on it, stops that dockerd with
SIGTERM (its containers stop with it), and checks: runtimes/docker/status
says unhealthy with a reason; commands fail fast with a clear error rather
than hanging; files still read. Then the same dockerd is started again on
the same data: status is healthy again, the container that stopped while
the engine was down shows EXITED with its real exit code (resynchronised),
new runs work and outside kills are followed again (the event stream
reconnected). The LXC half: an lxcpath nodefs cannot use leaves the runtime
present and unhealthy with the reason, and the mount still comes up.
The private dockerd and its dir are removed on every exit path.
"""

import os
import signal
import subprocess
import threading
import time
import unittest

import nodefs_test as nt
import ctest
from ctest import IMAGE, DOCKERD_FIXTURE


def launch_dockerd(d):
    """Start dockerd on dir d as the fixture does (same flags, same data),
    detached (setsid -f), so it is never our zombie when the fixture stops
    it."""
    log = open(os.path.join(d, "dockerd.log"), "ab")
    tmp = os.path.join(d, "tmp")     # containerd dumps its stacks into TMPDIR
    os.makedirs(tmp, exist_ok=True)
    subprocess.run(["setsid", "-f", "dockerd", "--iptables=false", "--ip-masq=false",
                      "--bridge=none", "--storage-driver=vfs",
                      "--host=unix://%s/docker.sock" % d, "--data-root=%s/data" % d,
                      "--exec-root=%s/exec" % d, "--pidfile=%s/docker.pid" % d,
                      "--log-level=warn"], stdin=subprocess.DEVNULL, stdout=log,
                   stderr=log, cwd="/", check=True, timeout=30,
                   env=dict(os.environ, TMPDIR=tmp))
    log.close()


def dockerd_pid(d):
    try:
        with open(os.path.join(d, "docker.pid")) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if (d + "/").encode() not in f.read():
                return None
        return pid
    except (OSError, ValueError):
        return None


class Engine(unittest.TestCase):
    def test_dockerd_goes_away_and_comes_back(self):
        nt.requires("docker")
        if not os.access(DOCKERD_FIXTURE, os.X_OK):
            self.fail("%s is not executable" % DOCKERD_FIXTURE)
        d = "/tmp/nfc-dk.%d" % os.getpid()
        host = "unix://%s/docker.sock" % d
        try:
            p = subprocess.run([DOCKERD_FIXTURE, "start", d], capture_output=True,
                               text=True, timeout=180)
            self.assertEqual(p.returncode, 0, "second dockerd: " + p.stderr)
            with ctest.Env(docker_host=host) as env:
                status = lambda: env.read("runtimes", "docker", "status")
                self.assertTrue(status().startswith("healthy"), status())
                # exits 3 on the TERM dockerd sends its containers at shutdown
                kept = env.name("kept")
                env.run(kept, "runtime=docker image=%s cmd=%s" % (
                    IMAGE, ctest._shq("sh -c \"trap 'exit 3' TERM; while :; do sleep 0.1; done\"")))
                self.assertEqual(env.state(kept), "RUNNING")
                env.wait_caught(kept, signal.SIGTERM)

                pid = dockerd_pid(d)
                self.assertIsNotNone(pid)
                os.kill(pid, signal.SIGTERM)
                self.assertTrue(nt.wait_until(lambda: not os.path.exists("/proc/%d" % pid), 30))
                t0 = time.monotonic()
                self.assertTrue(nt.wait_until(lambda: status().startswith("unhealthy"), 10),
                                status())
                print("unhealthy %.2f s after dockerd exited: %s"
                      % (time.monotonic() - t0, status().strip()))
                self.assertGreater(len(status().split(None, 1)), 1, "no reason given")
                # commands fail at once, with a reason, and change nothing
                t0 = time.monotonic()
                ok, err = env.ctl("containers/ctl", "run %s runtime=docker image=%s"
                                  % (env.name("down"), IMAGE))
                self.assertEqual((ok, err), (False, "EHOSTDOWN"))
                self.assertIn("docker", env.read("containers", "error"))
                ok, err = env.ctl("containers/%s/ctl" % kept, "kill")
                self.assertEqual((ok, err), (False, "EHOSTDOWN"))
                self.assertIn("unhealthy", env.cread(kept, "error"))
                self.assertLess(time.monotonic() - t0, nt.scaled(3), "commands hung on a dead engine")
                self.assertEqual(env.containers(), [kept])
                env.cread(kept, "stats")
                env.cread(kept, "info.json")

                launch_dockerd(d)
                t0 = time.monotonic()
                self.assertTrue(nt.wait_until(lambda: status().startswith("healthy"), 20),
                                status())
                print("healthy %.2f s after dockerd was started again"
                      % (time.monotonic() - t0))
                # resynchronised: what happened while it was down
                env.wait_state(kept, "EXITED", 10)
                self.assertEqual(env.cread(kept, "exit_code").strip(), "3")
                # and working again, events included
                env.cctl(kept, "start")
                self.assertEqual(env.state(kept), "RUNNING")
                back = env.name("back")
                env.run(back, "runtime=docker image=%s cmd='sleep 1000'" % IMAGE)
                ctest.docker("kill", env.prefix + back, host=host, check=True)
                self.assertTrue(nt.wait_until(lambda: env.state(back) == "EXITED", 1.0, 0.01),
                                "outside kill not followed after the reconnect")
                for n in (kept, back):
                    env.cctl(n, "destroy")
        finally:
            subprocess.run([DOCKERD_FIXTURE, "stop", d], capture_output=True, timeout=180)
            self.assertFalse(os.path.exists(d))

    def test_reload_changes_a_runtime_setting(self):
        """SIGHUP with a new [runtime docker] stop_timeout: a stop under way
        when the reload comes finishes on the old driver handle, with its
        setting; a stop after it uses the new one. A reload that moves the
        runtime's endpoint while it has containers is refused, and the
        runtime goes on as it was."""
        nt.requires("docker")
        with ctest.Env(stop_timeout="6s") as env:
            a, b = env.name("slow"), env.name("fast")
            for n in (a, b):
                env.run(n, "runtime=docker image=%s cmd='sleep 1000'" % IMAGE)
            for n in (a, b):
                env.wait_state(n, "RUNNING", 30)
            res = {}

            def stop_a():
                t0 = time.monotonic()
                res["r"] = env.ctl("containers/%s/ctl" % a, "stop")
                res["t"] = time.monotonic() - t0
            th = threading.Thread(target=stop_a)
            th.start()
            try:
                # sleep as PID 1 ignores SIGTERM: the stop waits out its timeout
                self.assertTrue(nt.wait_until(lambda: env.state(a) == "STOPPING", 10))
                with open(env.fs.config_path, "w") as f:
                    f.write(env.config().replace("stop_timeout = 6s", "stop_timeout = 1s", 1))
                env.fs.proc.send_signal(signal.SIGHUP)
                self.assertTrue(nt.wait_until(
                    lambda: "reload: runtime docker: changed" in env.fs.log(), 10),
                    env.fs.log())
            finally:
                th.join(nt.scaled(60))
            self.assertEqual(res.get("r"), (True, "OK"), env.cread(a, "error"))
            self.assertEqual(env.state(a), "EXITED")
            self.assertIn("1 runtime change, 0 plugin changes", env.fs.log())
            t0 = time.monotonic()
            env.cctl(b, "stop")
            tb = time.monotonic() - t0
            self.assertEqual(env.state(b), "EXITED")
            # the old handle kept its 6 s; the new one kills after 1 s
            self.assertGreater(res["t"], 5.5, "the stop under way lost its setting")
            self.assertLess(tb, res["t"] / 2, "the stop after the reload waited %.1f s" % tb)
            self.assertTrue(env.read("runtimes", "docker", "status").startswith("healthy"))
            # moving the endpoint under containers is refused
            with open(env.fs.config_path, "w") as f:
                f.write(env.config().replace("stop_timeout = 6s", "stop_timeout = 1s", 1)
                        .replace("endpoint = %s" % env.docker_host,
                                 "endpoint = unix:///nonexistent/docker.sock", 1))
            env.fs.proc.send_signal(signal.SIGHUP)
            self.assertTrue(nt.wait_until(
                lambda: "where its containers live changed" in env.fs.log(), 10),
                env.fs.log())
            self.assertTrue(env.read("runtimes", "docker", "status").startswith("healthy"))
            env.cctl(a, "start")
            env.wait_state(a, "RUNNING", 30)
            for n in (a, b):
                env.cctl(n, "destroy")
                env.wait_gone(n)

    def test_lxc_unusable_is_unhealthy_not_fatal(self):
        # an lxcpath that is a file: liblxc cannot work there
        with ctest.Env() as env0:
            bad = os.path.join(env0.tmp, "not-a-dir")
            with open(bad, "w") as f:
                f.write("x")
            cfg = ("[nodefs]\nallowed_targets = %s\n\n[runtime lxc]\nlxcpath = %s\n"
                   % (env0.pub, bad))
            with nt.Nodefs(cfg) as fs:
                st = fs.read("runtimes", "lxc", "status")
                self.assertTrue(st.startswith("unhealthy"), st)
                self.assertGreater(len(st.split(None, 1)), 1, "no reason given")
                ok, err = fs.write_ctl("containers/ctl", "run x runtime=lxc template=busybox")
                self.assertEqual((ok, nt.errname(err)), (False, "EHOSTDOWN"))
                self.assertIn("lxc", fs.read("containers", "error"))
                self.assertEqual(sorted(fs.listdir("containers")), ["ctl", "error"])


if __name__ == "__main__":
    ctest.main()

# SPDX-License-Identifier: LGPL-2.1-or-later
"""Docker containers as files (issue #5), through a real mount on the run's
dockerd (tests/fixtures/dockerd.sh; skip when NODEFS_TEST_DOCKER_HOST is
unset). Every command of containers/ctl and containers/NAME/ctl is driven
with open/write/read and checked twice: by what the mount shows and by what
the engine says (docker inspect / ps). Every test uses its own Env, which
removes its engine containers, mount and temp dir on every exit path.
With NODEFS_TEST_ENGINE=podman (containers-podman-K) the same cases run
against the run's Podman (tests/fixtures/podman.sh) through its Docker
Engine API; where Podman answers differently a case asserts what nodefs(5)
says of it ("Podman as the Docker engine").
"""

import errno
import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

import nodefs_test as nt
import contract
import ctest
from ctest import IMAGE, docker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "observe"))
from observe import EventReader, state_changes  # noqa: E402


def inspect(cid):
    r = docker("inspect", cid)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)[0]


PODMAN = nt.ENGINE == "podman"


def cgroup_limits(pid):
    """(memory limit in bytes, CPUs) from the cgroup files of pid, v1 or
    v2: what the kernel enforces, whatever the engine's inspect says."""
    mem = cpu = None
    with open("/proc/%d/cgroup" % pid) as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    for _, ctrls, path in lines:
        dirs = [os.path.join("/sys/fs/cgroup", d, path.lstrip("/")) for d in
                ([ctrls] + ctrls.split(",") if ctrls else [""])]
        for d in dirs:
            if os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                mem = int(open(os.path.join(d, "memory.limit_in_bytes")).read())
            elif ctrls == "" and os.path.exists(os.path.join(d, "memory.max")):
                v = open(os.path.join(d, "memory.max")).read().strip()
                mem = 0 if v == "max" else int(v)
            if os.path.exists(os.path.join(d, "cpu.cfs_quota_us")):
                q = int(open(os.path.join(d, "cpu.cfs_quota_us")).read())
                per = int(open(os.path.join(d, "cpu.cfs_period_us")).read())
                cpu = 0 if q < 0 else q / per
            elif ctrls == "" and os.path.exists(os.path.join(d, "cpu.max")):
                q, per = open(os.path.join(d, "cpu.max")).read().split()
                cpu = 0 if q == "max" else int(q) / int(per)
    return mem, cpu


def drun(env, short, cmd="sleep 1000", extra=""):
    name = env.name(short)
    env.run(name, "runtime=docker image=%s cmd=%s %s" % (IMAGE, ctest._shq(cmd), extra))
    return name


class StalledRegistry:
    """A TCP listener on 127.0.0.1 that accepts and never answers: a pull
    from it stays in flight until someone closes the transfer."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def all_closed(self):
        """True when every connection made so far was closed by the peer."""
        for c in self.conns:
            c.setblocking(False)
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
            except BlockingIOError:
                return False
            except OSError:
                pass
        return bool(self.conns)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


class Docker(contract.Contract, unittest.TestCase):
    def start(self, env, short, cmd, extra=""):
        return drun(env, short, cmd, extra)

    def engine_stopped(self, env, name):
        self.assertFalse(inspect(env.cread(name, "id").strip())["State"]["Running"])

    def test_run_shows_files_and_engine_agrees(self):
        with ctest.Env() as env:
            self.assertTrue(env.read("runtimes", "docker", "status").startswith("healthy"))
            self.assertRegex(env.read("runtimes", "docker", "version"), r"^1\.\d+")
            web = drun(env, "web", extra="memory=64M cpus=0.5 env.MODE=test")
            self.assertEqual(env.state(web), "RUNNING")
            pid = int(env.cread(web, "pid"))
            os.kill(pid, 0)
            self.assertRegex(env.cread(web, "started_at"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertIn("nodefs-test/busybox", env.cread(web, "image"))
            self.assertEqual(env.cread(web, "runtime").strip(), "docker")
            info = json.loads(env.cread(web, "info.json"))
            self.assertEqual((info["state"], info["name"], info["runtime"]),
                             ("RUNNING", web, "docker"))
            self.assertEqual(info["env"], {"MODE": "<redacted>"})
            spec = json.loads(env.cread(web, "spec.json"))
            self.assertEqual(spec["env"], {"MODE": "test"})
            # the engine has what nodefs says, marked as nodefs's own
            ins = inspect(env.cread(web, "id").strip())
            self.assertIsNotNone(ins)
            self.assertEqual(ins["State"]["Pid"], pid)
            self.assertEqual(ins["HostConfig"]["Memory"], 64 << 20)
            self.assertEqual(ins["HostConfig"]["NanoCpus"], 500000000)
            self.assertIn("MODE=test", ins["Config"]["Env"])
            self.assertEqual(ins["Config"]["Cmd"], ["sleep", "1000"])
            labels = ins["Config"]["Labels"]
            self.assertIn("io.nodefs.managed", labels)
            self.assertEqual(labels.get("io.nodefs.name"), web)
            st = env.stats(web)
            self.assertEqual(sorted(st), sorted(ctest.STATS_KEYS))
            self.assertEqual(st["memory_limit_bytes"], 64 << 20)
            self.assertGreater(st["memory_bytes"], 0)
            self.assertGreaterEqual(st["pids"], 1)
            self.assertGreaterEqual(st["cpu_user_seconds"] + st["cpu_system_seconds"], 0)
            # create without start, then start
            c2 = env.name("later")
            env.must("containers/ctl", "create %s runtime=docker image=%s cmd='sleep 1000'"
                     % (c2, IMAGE))
            self.assertEqual(env.state(c2), "CREATED")
            self.assertEqual(env.cread(c2, "pid"), "")
            self.assertEqual(inspect(env.cread(c2, "id").strip())["State"]["Status"], "created")
            env.cctl(c2, "start")
            self.assertEqual(env.state(c2), "RUNNING")
            ok, err = env.ctl("containers/%s/ctl" % c2, "start")
            self.assertEqual((ok, err), (False, "EBUSY"))
            self.assertIn("RUNNING", env.cread(c2, "error"))

    def test_exec_output_and_exit_code(self):
        with ctest.Env() as env:
            web = drun(env, "ex", extra="env.MODE=test")
            same, out, code = env.exec_fd(web, "printenv MODE")
            self.assertEqual((out, code), ("test\n", "0"))
            self.assertEqual(same, "test\nexit_code=0\n")
            same, out, code = env.exec_fd(web, 'sh -c "echo out; echo err >&2; exit 3"')
            self.assertEqual(code, "3")
            self.assertEqual(sorted(out.splitlines()), ["err", "out"])
            self.assertTrue(same.endswith("exit_code=3\n"), same)
            # a program that does not exist: a non-zero exit code, and the
            # container goes on
            ok, err = env.ctl("containers/%s/ctl" % web, "exec /no/such/program")
            if ok:
                self.assertNotEqual(env.cread(web, "exec_exit_code").strip(), "0")
            else:
                self.assertTrue(env.cread(web, "error").strip())
            self.assertEqual(env.state(web), "RUNNING")
            ok, err = env.ctl("containers/%s/ctl" % web, "exec 'echo unterminated")
            self.assertEqual((ok, err), (False, "EINVAL"))

    def test_update_is_live(self):
        with ctest.Env() as env:
            web = drun(env, "up", extra="memory=64M cpus=0.5")
            pid = env.cread(web, "pid")
            env.cctl(web, "update memory=128M cpus=1")
            self.assertEqual(env.stats(web)["memory_limit_bytes"], 128 << 20)
            self.assertEqual(env.state(web), "RUNNING")
            self.assertEqual(env.cread(web, "pid"), pid, "update restarted the container")
            ins = inspect(env.cread(web, "id").strip())
            self.assertEqual(cgroup_limits(int(pid)), (128 << 20, 1))
            if PODMAN:
                # Podman 4 changes the cgroup only: its inspect keeps the
                # create's limits (nodefs(5), "Podman as the Docker
                # engine")
                self.assertEqual((ins["HostConfig"]["Memory"], ins["HostConfig"]["NanoCpus"]),
                                 (64 << 20, 500000000))
            else:
                self.assertEqual((ins["HostConfig"]["Memory"], ins["HostConfig"]["NanoCpus"]),
                                 (128 << 20, 1000000000))
            lim = nt.parse_kv(env.cread(web, "limits"), " ")
            self.assertEqual((lim["memory_bytes"], lim["cpus"]), (str(128 << 20), "1"))
            for bad in ("update memory=lots", "update memory=1K", "update cpus=-1",
                        "update", "update bogus=1"):
                ok, err = env.ctl("containers/%s/ctl" % web, bad)
                self.assertEqual((ok, err), (False, "EINVAL"), bad)
                self.assertTrue(env.cread(web, "error").strip())
            self.assertEqual(env.stats(web)["memory_limit_bytes"], 128 << 20)
            # and the next start: Docker keeps the update; Podman 4 goes
            # back to the create's limits (nodefs(5), "Podman as the
            # Docker engine")
            env.cctl(web, "kill")
            env.wait_state(web, "EXITED")
            env.cctl(web, "start")
            want = (64 << 20, 0.5) if PODMAN else (128 << 20, 1)
            self.assertEqual(cgroup_limits(int(env.cread(web, "pid"))), want)
            self.assertEqual(env.stats(web)["memory_limit_bytes"], want[0])

    def test_pause_resume(self):
        with ctest.Env() as env:
            web = drun(env, "pz")
            cid = env.cread(web, "id").strip()
            env.cctl(web, "pause")
            self.assertEqual(env.state(web), "PAUSED")
            self.assertTrue(inspect(cid)["State"]["Paused"])
            self.assertEqual(sorted(env.stats(web)), sorted(ctest.STATS_KEYS))
            # the wrong state is EBUSY whatever the engine's status
            # (Docker 409 or 500, Podman 500 "container state improper")
            ok, err = env.ctl("containers/%s/ctl" % web, "pause")
            self.assertEqual((ok, err), (False, "EBUSY"))
            self.assertEqual(env.state(web), "PAUSED")
            env.cctl(web, "resume")
            self.assertEqual(env.state(web), "RUNNING")
            self.assertFalse(inspect(cid)["State"]["Paused"])
            ok, err = env.ctl("containers/%s/ctl" % web, "resume")
            self.assertEqual((ok, err), (False, "EBUSY"))
            self.assertEqual(env.state(web), "RUNNING")

    def test_destroy_removes_everything(self):
        with ctest.Env() as env:
            n = drun(env, "ds")
            cid = env.cread(n, "id").strip()
            ck = os.path.join(env.state_dir, "containers", n + ".json")
            self.assertTrue(os.path.exists(ck))
            env.cctl(n, "destroy")
            env.wait_gone(n)
            self.assertIsNone(inspect(cid), "the engine still has it")
            self.assertFalse(os.path.exists(ck), "checkpoint left behind")
            self.assertFalse(os.path.exists(env.fs.path("containers", n)))
            # an exited one too
            e = drun(env, "ds2", "true")
            env.cread(e, "wait")
            cid = env.cread(e, "id").strip()
            env.cctl(e, "destroy")
            env.wait_gone(e)
            self.assertIsNone(inspect(cid))
            # and the name is free again
            again = drun(env, "ds")
            self.assertEqual(env.state(again), "RUNNING")

    def test_destroy_with_late_engine_events_leaves_no_record(self):
        # Podman hands its events on late: a container's start event can
        # come while a destroy runs, its die event before the destroy
        # deletes the record and its remove event after. The start moved the
        # container out of DESTROYING, and the die event's sync then wrote
        # the record back (EXITED, exit code 137) after the destroy had
        # answered. Forced here on dockerd: each event is handed on D after
        # it was matched to its container (NODEFS_TEST_SLOW_EVENTS), one at
        # a time, and the destroy waits 1.25 D between the engine's answer
        # and the record's delete (NODEFS_TEST_SLOW_DESTROY): start is taken
        # at D (DESTROYING), die is matched at D and taken at 2 D, and the
        # delete falls between, so remove finds no container.
        d = int(nt.scaled(0.5) * 1000)
        with ctest.Env() as env:
            env.fs.env = dict(env.fs.env or {}, NODEFS_TEST_SLOW_EVENTS=str(d),
                              NODEFS_TEST_SLOW_DESTROY=str(d * 5 // 4))
            env.fs.restart()
            n = drun(env, "late")
            ck = os.path.join(env.state_dir, "containers", n + ".json")
            cid = env.cread(n, "id").strip()
            env.cctl(n, "destroy")
            env.wait_gone(n)
            self.assertIsNone(inspect(cid), "the engine still has it")
            # a negative has no event to wait on: the late events and the
            # sync they queue are all taken 3 D after the start
            time.sleep(3 * d / 1000.0)
            self.assertFalse(os.path.exists(ck), "the record came back after the destroy: %s"
                             % (open(ck).read() if os.path.exists(ck) else ""))
            self.assertNotIn(n, env.containers())

    def test_pull_of_missing_image_fails_cleanly(self):
        with ctest.Env() as env:
            n = env.name("nopull")
            t0 = time.monotonic()
            ok, err = env.ctl("containers/ctl",
                              "run %s runtime=docker image=127.0.0.1:1/nodefs/missing:1" % n)
            self.assertFalse(ok)
            self.assertLess(time.monotonic() - t0, nt.scaled(30))
            self.assertIn(err, ("ENOENT", "EIO", "EHOSTDOWN", "ECONNREFUSED"))
            msg = env.read("containers", "error")
            self.assertIn("127.0.0.1:1", msg)
            self.assertEqual(env.containers(), [])
            self.assertEqual(ctest.docker_names(env.tag), [])
            self.assertEqual(os.listdir(os.path.join(env.state_dir, "containers")), [])

    def test_destroy_cancels_a_pull(self):
        reg = StalledRegistry()
        try:
            with ctest.Env() as env:
                n = env.name("pl")
                res = {}
                ev = EventReader(env.fs.path("events"))
                self.addCleanup(ev.close)

                def run():
                    res["run"] = env.ctl("containers/ctl", "run %s runtime=docker "
                                         "image=127.0.0.1:%d/nodefs/stall:1" % (n, reg.port))

                t = threading.Thread(target=run)
                t.start()
                try:
                    self.assertTrue(nt.wait_until(
                        lambda: n in env.containers() and env.state(n) == "PULLING", 10))
                    self.assertTrue(nt.wait_until(lambda: reg.conns, 10),
                                    "dockerd never reached the registry")
                    # a negative (nothing returned yet) has no event to wait on: the pull must still be under way 0.3 s after dockerd reached the registry (the registry never answers)
                    time.sleep(0.3)
                    self.assertEqual(env.state(n), "PULLING")
                    self.assertTrue(env.cread(n, "progress").strip())
                    t0 = time.monotonic()
                    env.cctl(n, "destroy")
                    self.assertLess(time.monotonic() - t0, nt.scaled(3))
                finally:
                    t.join(15)
                self.assertEqual(res.get("run"), (False, "ECANCELED"))
                self.assertIn("cancel", env.read("containers", "error"))
                env.wait_gone(n, 3)
                self.assertEqual(ctest.docker_names(env.tag), [])
                # the container's story, each change once and in order,
                # up to the end of the destroy's operation (which comes
                # after all the container's own)
                ops = {}

                def destroy_ended(e):
                    if e["kind"] == "operation" and e["old"] is None:
                        ops[e["name"]] = e["message"] or ""
                    return (e["kind"] == "operation" and e["new"] != "PENDING"
                            and ops.get(e["name"], "").startswith("destroy"))
                self.assertIsNotNone(ev.read_until(destroy_ended), ev.seen)
                self.assertEqual(state_changes(ev.seen, "container", n),
                                 [(None, "CREATING"), ("CREATING", "PULLING"),
                                  ("PULLING", "DESTROYING"), ("DESTROYING", "DESTROYED")])
                # the engine gave up the transfer once nodefs closed its end
                self.assertTrue(nt.wait_until(reg.all_closed, 15),
                                "the registry connection is still open")
        finally:
            reg.close()

    def test_create_of_a_present_image_is_creating_not_pulling(self):
        """The state names what happens: CREATING while the engine makes a
        container whose image it has (PULLING only while it fetches one,
        test_destroy_cancels_a_pull)."""
        with ctest.Env() as env:
            ev = EventReader(env.fs.path("events"))
            self.addCleanup(ev.close)
            n = env.name("made")
            env.must("containers/ctl", "create %s runtime=docker image=%s cmd='sleep 1000'"
                     % (n, IMAGE))
            self.assertEqual(env.state(n), "CREATED")
            self.assertIsNotNone(ev.read_until(lambda e: e["name"] == n and e["new"] == "CREATED"))
            self.assertEqual(state_changes(ev.seen, "container", n),
                             [(None, "CREATING"), ("CREATING", "CREATED")])

    def test_outside_kill_seen_within_a_second(self):
        with ctest.Env() as env:
            n = drun(env, "vic")
            h = drun(env, "vhup", ctest.HUP_42)
            cid = env.cread(n, "id").strip()
            docker("kill", cid, check=True)
            t0 = time.monotonic()
            self.assertTrue(nt.wait_until(lambda: env.state(n) == "EXITED", 1.0, 0.01),
                            "state %s a second after docker kill" % env.state(n))
            print("EXITED %.3f s after docker kill returned" % (time.monotonic() - t0))
            self.assertEqual(env.cread(n, "exit_code").strip(), "137")
            docker("kill", "-s", "HUP", env.cread(h, "id").strip(), check=True)
            self.assertTrue(nt.wait_until(lambda: env.state(h) == "EXITED", 1.0, 0.01))
            self.assertEqual(env.cread(h, "exit_code").strip(), "42")
            # outside pause/unpause is followed too
            p = drun(env, "vpz")
            pid_ = env.cread(p, "id").strip()
            docker("pause", pid_, check=True)
            self.assertTrue(nt.wait_until(lambda: env.state(p) == "PAUSED", 1.0, 0.01))
            docker("unpause", pid_, check=True)
            self.assertTrue(nt.wait_until(lambda: env.state(p) == "RUNNING", 1.0, 0.01))
            # outside removal: EXITED with a reason, never a hang
            docker("rm", "-f", pid_, check=True)
            # EXITED may come from the die before the removal's event
            # (Podman sends remove after its cleanup): wait for both
            self.assertTrue(nt.wait_until(lambda: env.state(p) == "EXITED" and
                                          env.cread(p, "error").strip(), 2.0, 0.01),
                            (env.state(p), env.cread(p, "error")))
            env.cctl(p, "destroy")
            env.wait_gone(p)

    def test_nonblock_command_beside_an_engine_sync(self):
        # An engine's own change (here a start made outside nodefs; at
        # startup, the engine coming up) queues an inspect of the container:
        # internal work, no command. A command written with O_NONBLOCK
        # meanwhile is taken; only a command in flight makes it EBUSY (CI:
        # a run written at once after a start got EBUSY from the engine's
        # first resync).
        with ctest.Env() as env:
            n = drun(env, "nb")
            env.cctl(n, "stop 1")
            env.wait_state(n, "EXITED")
            env.fs.env = dict(env.fs.env or {}, NODEFS_TEST_SLOW_ACTION="1000")
            env.fs.restart()
            docker("start", env.cread(n, "id").strip(), check=True)
            env.wait_state(n, "RUNNING", nt.scaled(5))
            fd = os.open(env.fs.path("containers", n, "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, b"stop 1\n")
                opid = os.pread(fd, 4096, 0).decode().strip()
            finally:
                os.close(fd)
            self.assertIn(opid, os.listdir(env.fs.path("operations")))
            self.assertTrue(nt.wait_until(lambda: env.read(
                "operations", opid, "state").strip() == "FINISHED", nt.scaled(15), 0.05),
                env.read("operations", opid, "info.json"))
            self.assertEqual(env.state(n), "EXITED")
            # a command queued behind it is still refused at once
            fd = os.open(env.fs.path("containers", n, "ctl"), os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"start\n")
                with self.assertRaises(OSError) as cm:
                    os.write(fd, b"stop 1\n")
                self.assertEqual(cm.exception.errno, errno.EBUSY)
            finally:
                os.close(fd)
            self.assertIn("in flight", env.cread(n, "error"))
            env.wait_state(n, "RUNNING", nt.scaled(10))

    def test_oom_kill(self):
        with ctest.Env() as env:
            n = drun(env, "oom", "sh -c 'x=y; while :; do x=$x$x$x$x; done'",
                     "memory=8M")
            if PODMAN:
                # Podman 4.3 with Debian 12's conmon says neither: no oom
                # event, OOMKilled false; the kernel's log names the
                # container all the same (nodefs(5), "Podman as the Docker
                # engine")
                self.assertEqual(env.cread(n, "wait"), "exit_code=137 oom_killed=1\n")
                ins = inspect(env.cread(n, "id").strip())
                self.assertEqual(ins["State"]["ExitCode"], 137)
            self.assertEqual(env.cread(n, "wait"), "exit_code=137 oom_killed=1\n")
            self.assertEqual(env.cread(n, "oom_killed").strip(), "1")
            self.assertTrue(json.loads(env.cread(n, "info.json"))["oom_killed"])

    def test_bad_input_creates_nothing(self):
        with ctest.Env() as env:
            outside = "/etc"
            cases = [
                ("run %s runtime=docker image=127.0.0.1:1/nodefs/missing" % env.name("a"), None),
                ("run %s runtime=docker image=%s memory=1K" % (env.name("b"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s memory=lots" % (env.name("c"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s cmd='sleep 1" % (env.name("d"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s cmd='sh -c \"x'" % (env.name("e"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s bind=%s:/x" % (env.name("f"), IMAGE, outside), None),
                ("run %s runtime=docker image=%s bind=%s/../etc:/x" % (env.name("g"), IMAGE, env.pub), None),
                ("run %s runtime=docker image=%s bind=relative:/x" % (env.name("h"), IMAGE), None),
                ("run %s runtime=docker image=%s volume=novol:/x" % (env.name("i"), IMAGE), None),
                ("run %s runtime=docker" % env.name("j"), "EINVAL"),
                ("run %s runtime=docker image=%s template=busybox" % (env.name("k"), IMAGE), "ENOTSUP"),
                ("run %s runtime=nosuch image=%s" % (env.name("l"), IMAGE), "EINVAL"),
                ("run %s image=%s" % (env.name("m"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s cpus=lots" % (env.name("n"), IMAGE), "EINVAL"),
                ("run %s runtime=docker image=%s bogus=1" % (env.name("o"), IMAGE), "EINVAL"),
                ("run .hidden runtime=docker image=%s" % IMAGE, "EINVAL"),
                ("run bad/name runtime=docker image=%s" % IMAGE, "EINVAL"),
            ]
            for line, want in cases:
                ok, err = env.ctl("containers/ctl", line)
                self.assertFalse(ok, line)
                if want:
                    self.assertEqual(err, want, line)
                msg = env.read("containers", "error").strip()
                self.assertTrue(msg, "no error text for: " + line)
                self.assertEqual(env.containers(), [], line)
                self.assertEqual(ctest.docker_names(env.tag), [], line)
            self.assertEqual(os.listdir(os.path.join(env.state_dir, "containers")), [])
            # a name taken: refused, and the one that has it is untouched
            taken = drun(env, "taken")
            pid = env.cread(taken, "pid")
            ok, err = env.ctl("containers/ctl", "run %s runtime=docker image=%s cmd='true'"
                              % (taken, IMAGE))
            self.assertEqual((ok, err), (False, "EEXIST"))
            self.assertIn(taken, env.read("containers", "error"))
            self.assertEqual((env.state(taken), env.cread(taken, "pid")), ("RUNNING", pid))
            self.assertEqual(ctest.docker_names(env.tag), [env.prefix + taken])
            ok, err = env.ctl("containers/ctl", "run %s runtime=lxc" % taken)
            self.assertEqual((ok, err), (False, "EEXIST"))
            # commands on a name that does not exist
            ok, err = env.ctl("containers/%s/ctl" % env.name("none"), "start")
            self.assertEqual(err, "ENOENT")
            ok, err = env.ctl("containers/%s/ctl" % taken, "frobnicate")
            self.assertEqual((ok, err), (False, "EINVAL"))
            # a name the engine has for a container nodefs does not know:
            # EEXIST (Docker's 409; Podman's 500 "that name is already in
            # use"), and the engine's container is left alone
            clash = env.name("clash")
            docker("create", "--name", env.prefix + clash, IMAGE, "true", check=True)
            ok, err = env.ctl("containers/ctl", "run %s runtime=docker image=%s" % (clash, IMAGE))
            self.assertEqual((ok, err), (False, "EEXIST"))
            self.assertIn("name taken", env.read("containers", "error"))
            self.assertNotIn(clash, env.containers())
            self.assertEqual(docker("inspect", "-f", "{{.State.Status}}", env.prefix + clash)
                             .stdout.strip(), "created")

    def test_launch_options_user_workdir_hostname_entrypoint_labels(self):
        """user=, workdir=, hostname=, entrypoint=, label.K=V seen inside
        (id, pwd, hostname through the entrypoint) and in the engine's
        inspect and info.json; a user the image lacks and a reserved label
        refused with nothing left; force_pull=yes pulls an image the engine
        has (from a registry on 127.0.0.1:1 that is not there, so it fails,
        where the same run without it succeeds)."""
        with ctest.Env() as env:
            n = env.name("opts")
            env.run(n, "runtime=docker image=%s user=nobody:nogroup workdir=/tmp hostname=web-1 "
                    "entrypoint='/bin/sh -c' cmd=%s label.tier=front label.team=a"
                    % (IMAGE, ctest._shq('"echo u=$(id -u) g=$(id -g) d=$(pwd) '
                                         'h=$(hostname); sleep 1000"')))
            want = "u=65534 g=65534 d=/tmp h=web-1"
            self.assertTrue(nt.wait_until(lambda: want in env.cread(n, "logs"), 5),
                            env.cread(n, "logs"))
            cfg = inspect(env.cread(n, "id").strip())["Config"]
            self.assertEqual((cfg["User"], cfg["WorkingDir"], cfg["Hostname"], cfg["Entrypoint"]),
                             ("nobody:nogroup", "/tmp", "web-1", ["/bin/sh", "-c"]))
            self.assertEqual((cfg["Labels"]["tier"], cfg["Labels"]["team"]), ("front", "a"))
            info = json.loads(env.cread(n, "info.json"))
            self.assertEqual(info["labels"], {"tier": "front", "team": "a"})
            self.assertEqual((info["user"], info["workdir"], info["hostname"], info["entrypoint"]),
                             ("nobody:nogroup", "/tmp", "web-1", ["/bin/sh", "-c"]))
            # checkpointed: the same after a crash and a restart
            env.fs.kill9()
            env.fs.start()
            self.assertEqual(json.loads(env.cread(n, "info.json"))["labels"], info["labels"])
            self.assertEqual(json.loads(env.cread(n, "info.json"))["sandbox_dir"],
                             info["sandbox_dir"])
            # refused: a user the image lacks (after the engine made it:
            # removed, and the sandbox with it: nothing left but the
            # operation, FAILED with the line), a label under io.nodefs.
            for short, line, want, says in [
                    ("nu", "run %s runtime=docker image=%s user=nosuch cmd='true'"
                     % (env.name("nu"), IMAGE), "EINVAL", "no user 'nosuch'"),
                    ("ng", "run %s runtime=docker image=%s user=nobody:nosuchgrp cmd='true'"
                     % (env.name("ng"), IMAGE), "EINVAL", "no group 'nosuchgrp'"),
                    ("nl", "run %s runtime=docker image=%s label.io.nodefs.name=x"
                     % (env.name("nl"), IMAGE), "EINVAL", "label.io.nodefs.name")]:
                ok, err = env.ctl("containers/ctl", line)
                self.assertEqual((ok, err), (False, want), line)
                self.assertIn(says, env.read("containers", "error"))
                if short != "nl":
                    ctest.assert_refusal_left_nothing(self, env, env.name(short), says)
            self.assertEqual(env.containers(), [n])
            self.assertEqual(ctest.docker_names(env.tag), [env.prefix + n])
            # force_pull: the engine has the image under this name, and is
            # made to pull it anyway
            tagged = "127.0.0.1:1/nodefs/fp-%s:latest" % env.tag
            docker("tag", IMAGE, tagged, check=True)
            try:
                fp = env.name("fp")
                ok, err = env.ctl("containers/ctl", "run %s runtime=docker image=%s force_pull=yes "
                                  "cmd='true'" % (fp, tagged))
                self.assertFalse(ok)
                self.assertIn("cannot be pulled", env.read("containers", "error"))
                env.run(fp, "runtime=docker image=%s cmd='true'" % tagged)
            finally:
                docker("rmi", "-f", tagged)

    def test_bad_value_on_a_later_line_changes_nothing(self):
        """Every value of every line of a write is checked before the first
        line runs: a good line followed by one with a bad limit, mount
        mode, signal or timeout does nothing (EINVAL; no container made, the
        running one untouched), and the error file names the bad line.
        Before, the first line ran and the write returned a short count."""
        with ctest.Env() as env:
            keep = drun(env, "keep")
            pid = env.cread(keep, "pid")
            a, b = env.name("a"), env.name("b")
            good = "run %s runtime=docker image=%s cmd='sleep 1000'" % (a, IMAGE)
            cases = [
                ("containers/ctl", good,
                 "run %s runtime=docker image=%s memory=lots" % (b, IMAGE), "lots"),
                ("containers/ctl", good,
                 "create %s runtime=docker image=%s bind=%s:/x:bogus" % (b, IMAGE, env.pub),
                 "bogus"),
                ("containers/ctl", good,
                 "create %s runtime=docker image=%s pids=0" % (b, IMAGE), "pids"),
                ("containers/%s/ctl" % keep, "stop", "kill BOGUS", "BOGUS"),
                ("containers/%s/ctl" % keep, "pause", "update memory=lots", "lots"),
                ("containers/%s/ctl" % keep, "kill", "stop forever", "forever"),
                ("containers/%s/ctl" % keep, "destroy", "exec ''", "empty"),
            ]
            for ctl, first, bad, word in cases:
                with self.subTest(bad=bad):
                    ok, err = env.ctl(ctl, first + "\n" + bad)
                    self.assertEqual((ok, err), (False, "EINVAL"))
                    text = env.read(os.path.dirname(ctl), "error")
                    self.assertIn("line 2 '%s" % bad[:45], text)
                    self.assertIn(word, text.split("': ", 1)[1])
                    self.assertEqual(env.containers(), [keep])
                    self.assertEqual(ctest.docker_names(env.tag), [env.prefix + keep])
                    self.assertEqual((env.state(keep), env.cread(keep, "pid")),
                                     ("RUNNING", pid))

    def test_bind_mounts(self):
        with ctest.Env() as env:
            rw = os.path.join(env.pub, "rw")
            ro = os.path.join(env.pub, "ro")
            os.mkdir(rw)
            os.mkdir(ro)
            with open(os.path.join(ro, "hello"), "w") as f:
                f.write("from-host\n")
            n = drun(env, "bd", extra="bind=%s:/data bind=%s:/conf:ro" % (rw, ro))
            _, out, code = env.exec_fd(n, "cat /conf/hello")
            self.assertEqual((out, code), ("from-host\n", "0"))
            _, out, code = env.exec_fd(n, 'sh -c "echo from-ctr > /data/f"')
            self.assertEqual(code, "0", out)
            with open(os.path.join(rw, "f")) as f:
                self.assertEqual(f.read(), "from-ctr\n")
            _, out, code = env.exec_fd(n, 'sh -c "echo x > /conf/y"')
            self.assertNotEqual(code, "0", "a :ro bind was writable")
            self.assertFalse(os.path.exists(os.path.join(ro, "y")))
            mounts = json.loads(env.cread(n, "info.json"))["mounts"]
            self.assertIn({"source": ro, "target": "/conf", "ro": True}, mounts)

    def test_bind_source_rechecked_at_start(self):
        """A bind source replaced by a symlink after the create is refused
        at the next start (EPERM), as LXC's driver does: the engine would
        follow the link."""
        with ctest.Env() as env:
            src = os.path.join(env.pub, "src")
            os.mkdir(src)
            n = drun(env, "bs", cmd="true", extra="bind=%s:/data" % src)
            env.wait_state(n, "EXITED")
            os.rmdir(src)
            os.symlink("/etc", src)
            ok, err = env.ctl("containers/%s/ctl" % n, "start")
            self.assertEqual((ok, nt.errname(err)), (False, "EPERM"))
            self.assertIn("symlink", env.cread(n, "error"))
            self.assertEqual(env.state(n), "EXITED")

    def test_unknown_exit_status(self):
        """A container removed from the engine before it ever ended has no
        exit code: exit_code reads "unknown" and wait says why."""
        with ctest.Env() as env:
            n = env.name("uk")
            env.must("containers/ctl", "create %s runtime=docker image=%s cmd=true" % (n, IMAGE))
            docker("rm", "-f", env.cread(n, "id").strip(), check=True)
            env.wait_state(n, "EXITED")
            self.assertEqual(env.cread(n, "exit_code"), "unknown\n")
            self.assertEqual(env.cread(n, "wait"), "exit_code=unknown oom_killed=0 reason=gone\n")

    def test_wait_gets_its_line_on_destroy(self):
        """A waiter gets its line whatever ends the container: a destroy
        of a running one too (the exit status, and that it was destroyed)."""
        with ctest.Env() as env:
            n = drun(env, "wd")
            t = env.start_wait_reader(n)
            time.sleep(0.3)	# the read is parked
            env.cctl(n, "destroy")
            t.join(20)
            self.assertFalse(t.is_alive(), "the waiter still waits")
            self.assertIsInstance(t.result, str, t.result)
            self.assertRegex(t.result, r"^exit_code=\S+ oom_killed=0 reason=destroyed\n$")

    def test_foreign_containers_never_shown_or_touched(self):
        with ctest.Env() as env:
            # one plain, one named as nodefs would name it but without the mark
            f1 = env.name("foreign")
            f2 = env.prefix + env.name("lookalike")
            docker("run", "-d", "--name", f1, IMAGE, "sleep", "1000", check=True)
            docker("run", "-d", "--name", f2, IMAGE, "sleep", "1000", check=True)
            mine = drun(env, "mine")
            self.assertEqual(env.containers(), [mine])
            ok, err = env.ctl("containers/ctl", "run %s runtime=docker image=%s"
                              % (env.name("lookalike"), IMAGE))
            self.assertFalse(ok, "nodefs took a name the engine has for another")
            env.fs.restart()
            self.assertEqual(env.containers(), [mine])
            env.cctl(mine, "destroy")
            for f in (f1, f2):
                r = docker("inspect", "-f", "{{.State.Running}}", f)
                self.assertEqual(r.stdout.strip(), "true", "%s was touched" % f)

    def test_recovery_after_kill9(self):
        with ctest.Env() as env:
            a = drun(env, "ra", extra="memory=32M")
            b = drun(env, "rb")
            c = drun(env, "rc", "true")
            env.cread(c, "wait")
            # removed from the engine behind nodefs's back: EXITED with the
            # reason, and still so after the restart
            g = drun(env, "rg")
            docker("rm", "-f", env.cread(g, "id").strip(), check=True)
            env.wait_state(g, "EXITED", 2)
            # Podman tells the exit ("died") before the removal ("remove"):
            # EXITED alone does not say nodefs has seen the removal yet
            self.assertTrue(nt.wait_until(lambda: env.cread(g, "error").strip(), 2.0, 0.01))
            ida, pida = env.cread(a, "id"), env.cread(a, "pid")
            idb = env.cread(b, "id").strip()
            env.fs.kill9()
            docker("kill", idb, check=True)     # dies while nodefs is down
            env.fs.start()
            self.assertEqual(sorted(env.containers()), sorted([a, b, c, g]))
            self.assertEqual(env.state(g), "EXITED")
            self.assertTrue(env.cread(g, "error").strip())
            self.assertEqual((env.state(a), env.cread(a, "id"), env.cread(a, "pid")),
                             ("RUNNING", ida, pida))
            self.assertEqual(env.stats(a)["memory_limit_bytes"], 32 << 20)
            env.wait_state(b, "EXITED", 5)
            self.assertEqual(env.cread(b, "exit_code").strip(), "137")
            self.assertEqual(env.cread(c, "exit_code").strip(), "0")
            # the event stream is followed again after the restart
            docker("kill", ida.strip(), check=True)
            self.assertTrue(nt.wait_until(lambda: env.state(a) == "EXITED", 1.0, 0.01))
            for n in (a, b, c, g):
                env.cctl(n, "destroy")
            self.assertEqual(env.containers(), [])
            self.assertEqual(ctest.docker_names(env.tag), [])

    def test_crash_during_pull_takes_it_back(self):
        reg = StalledRegistry()
        try:
            with ctest.Env() as env:
                n = env.name("cut")
                fd = os.open(env.fs.path("containers", "ctl"), os.O_WRONLY | os.O_NONBLOCK)
                try:
                    os.write(fd, ("run %s runtime=docker image=127.0.0.1:%d/nodefs/stall:1\n"
                                  % (n, reg.port)).encode())
                finally:
                    os.close(fd)
                self.assertTrue(nt.wait_until(lambda: reg.conns, 10))
                self.assertEqual(env.state(n), "PULLING")
                env.fs.kill9()
                env.fs.start()
                # never acknowledged, so taken back: the name is free, the
                # operation says why, the engine has nothing of it
                self.assertEqual(env.containers(), [])
                self.assertEqual(ctest.docker_names(env.tag), [])
                ops = [o for o in os.listdir(env.fs.path("operations"))]
                states = [(env.read("operations", o, "type").strip(),
                           env.read("operations", o, "state").strip()) for o in ops]
                self.assertIn(("container.create", "DROPPED"), states)
                again = drun(env, "cut")
                self.assertEqual(env.state(again), "RUNNING")
        finally:
            reg.close()


if __name__ == "__main__":
    ctest.main(docker_needed=True)

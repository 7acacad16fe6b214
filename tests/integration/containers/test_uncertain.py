#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Creates whose answer a crash lost (issue #20): the daemon is killed -9
while a Docker create is held back by a proxy in front of the run's
dockerd (delayproxy.py), so the engine makes the container after the
restarted daemon looked at its list. The late container must be removed
within seconds, and the operation say so; containers with nodefs's label
but another instance's id, or none, are never touched; a create that never
turns up is closed after uncertain_timeout and counted; a destroy the engine
carries out after the restart leaves nothing that nodefs believes in."""
import errno
import os
import re
import shutil
import tempfile
import unittest

import ctest
import nodefs_test as nt
from ctest import IMAGE
from delayproxy import DelayProxy


class PEnv(ctest.Env):
    def __init__(self, sock, timeout="5m"):
        super().__init__(docker_host="unix://" + sock)
        self.timeout = timeout

    def config(self):
        return super().config().replace(
            "[nodefs]\n", "[nodefs]\nuncertain_timeout = %s\n" % self.timeout, 1)


def run_nonblock(env, name):
    fd = os.open(env.fs.path("containers", "ctl"), os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, ("run %s runtime=docker image=%s cmd='sleep 1000'\n"
                      % (name, IMAGE)).encode())
    finally:
        os.close(fd)


def create_ops(env):
    out = []
    for o in os.listdir(env.fs.path("operations")):
        if env.read("operations", o, "type").strip() == "container.create":
            out.append(o)
    return out


def metric(env, result):
    m = re.search(r'^nodefs_uncertain_outcomes_total\{kind="docker.create",result="%s"\} (\d+)$'
                  % result, env.read("metrics", "nodefs.prom"), re.M)
    return int(m.group(1)) if m else 0


class UncertainDockerTest(unittest.TestCase):
    def setUp(self):
        nt.requires("docker")
        if not ctest.HOST.startswith("unix://"):
            nt.skip("the test dockerd is not on a unix socket")
        self.tmp = tempfile.mkdtemp(prefix="nodefs-unc-")
        self.sock = os.path.join(self.tmp, "docker.sock")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_late_create_is_removed(self):
        proxy = DelayProxy(ctest.HOST[len("unix://"):], self.sock, 3.0)
        try:
            with PEnv(self.sock) as env:
                n = env.name("late")
                # by hand, with the same nodefs name: another instance's,
                # and one from before instances had ids
                other = ctest.docker("create", "--name", env.name("other"),
                                     "--label", "io.nodefs.managed=1",
                                     "--label", "io.nodefs.name=" + n,
                                     "--label", "io.nodefs.instance=" + "0" * 32,
                                     IMAGE, "sleep", "1000", check=True).stdout.strip()
                old = ctest.docker("create", "--name", env.name("old"),
                                   "--label", "io.nodefs.managed=1",
                                   "--label", "io.nodefs.name=" + n,
                                   IMAGE, "sleep", "1000", check=True).stdout.strip()
                run_nonblock(env, n)
                self.assertTrue(nt.wait_until(lambda: proxy.creates >= 1, 10))
                env.fs.kill9()
                env.fs.start()
                print("create passed on %s the restart" % ("after" if not proxy.sent else "before"))
                self.assertTrue(nt.wait_until(lambda: proxy.sent >= 1, 15))
                ops = create_ops(env)
                self.assertEqual(len(ops), 1)
                self.assertIn(env.prefix + n, env.read("operations", ops[0], "info.json"))

                def removed():
                    return "removed" in env.read("operations", ops[0], "outcome")
                self.assertTrue(nt.wait_until(removed, 10, 0.1),
                                "not settled: " + env.read("operations", ops[0], "info.json"))
                self.assertEqual(ctest.docker_names(env.prefix + n), [])
                self.assertEqual(env.containers(), [])
                self.assertEqual(metric(env, "removed"), 1)
                for cid in (other, old):
                    r = ctest.docker("inspect", "-f", "{{.Id}}", cid)
                    self.assertEqual(r.stdout.strip(), cid, "a container not ours was touched")
                # the name is free again
                env.run(n, "runtime=docker image=%s cmd='sleep 1000'" % IMAGE)
                env.cctl(n, "destroy")
                ctest.docker("rm", "-f", other, old)
        finally:
            proxy.close()

    def test_late_destroy_is_not_believed_undone(self):
        """The reverse: a destroy in flight at a kill -9 that the engine
        carries out after the restart. nodefs must end with the container
        gone, on the engine and in containers/, and the destroy FINISHED
        (the engine answers the repeated DELETE that a removal is already
        in progress)."""
        proxy = DelayProxy(ctest.HOST[len("unix://"):], self.sock, 2.0,
                           match=(b"DELETE", b"/containers/"))
        try:
            with PEnv(self.sock) as env:
                n = env.name("gone")
                env.run(n, "runtime=docker image=%s cmd='sleep 1000'" % IMAGE)
                cid = env.cread(n, "id").strip()

                def destroy_nonblock():
                    # EBUSY while the run's last step still holds the
                    # container (nodefs(5): O_NONBLOCK): write again
                    fd = os.open(env.fs.path("containers", n, "ctl"),
                                 os.O_WRONLY | os.O_NONBLOCK)
                    try:
                        os.write(fd, b"destroy\n")
                        return True
                    except OSError as e:
                        if e.errno != errno.EBUSY:
                            raise
                        return False
                    finally:
                        os.close(fd)
                self.assertTrue(nt.wait_until(destroy_nonblock, 10, 0.05),
                                "destroy still EBUSY")
                self.assertTrue(nt.wait_until(lambda: proxy.creates >= 1, 10))
                env.fs.kill9()
                env.fs.start()
                self.assertTrue(nt.wait_until(lambda: proxy.sent >= 1, 15))

                def gone():
                    return (n not in env.containers() and
                            ctest.docker("inspect", cid).returncode != 0)
                if not nt.wait_until(gone, 10, 0.1):
                    ops = os.listdir(env.fs.path("operations"))
                    raise AssertionError("%s (engine: %s), state %s, error %r; operations: %s" % (
                        env.containers(), ctest.docker_names(env.prefix + n),
                        env.state(n), env.cread(n, "error"),
                        [env.read("operations", o, "info.json") for o in ops]))
                ops = [o for o in os.listdir(env.fs.path("operations"))
                       if env.read("operations", o, "type").strip() == "container.destroy"]
                self.assertEqual(len(ops), 1, ops)
                self.assertTrue(nt.wait_until(lambda: env.read(
                    "operations", ops[0], "state").strip() == "FINISHED", nt.scaled(10), 0.1),
                    env.read("operations", ops[0], "info.json"))
                self.assertNotIn(n, env.containers())
        finally:
            proxy.close()

    def test_never_made_is_closed_after_the_timeout(self):
        proxy = DelayProxy(ctest.HOST[len("unix://"):], self.sock, 0.5, drop=True)
        try:
            with PEnv(self.sock, timeout="2s") as env:
                n = env.name("never")
                run_nonblock(env, n)
                self.assertTrue(nt.wait_until(lambda: proxy.creates >= 1, 10))
                env.fs.kill9()
                env.fs.start()
                ops = create_ops(env)
                self.assertEqual(len(ops), 1)
                self.assertTrue(nt.wait_until(lambda: "never made" in env.read(
                    "operations", ops[0], "outcome"), 10, 0.1),
                    env.read("operations", ops[0], "info.json"))
                self.assertEqual(metric(env, "never_seen"), 1)
                self.assertEqual(env.read("operations", ops[0], "state").strip(), "DROPPED")
        finally:
            proxy.close()


if __name__ == "__main__":
    ctest.main(docker_needed=True)

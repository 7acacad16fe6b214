#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reconciliation: drift made from outside, seen within reconcile_interval.

nodefs runs with reconcile_interval = 1s against the run's dockerd and a
private lxcpath. Each test makes one difference behind nodefs's back with
the engines' own tools, where no event can tell nodefs (or where one may,
and the difference must still be shown), and checks that
runtimes/NAME/reconcile lists it, that a "drift" event is on the events
stream, that nodefs_reconcile_drift counts it, and that nothing was
silently fixed: an orphan stays in the engine, a container removed outside
stays in containers/ (EXITED, with the reason) until destroyed.
"""
import json
import os
import re
import select
import time
import unittest

import ctest
import nodefs_test as nt

INTERVAL = 1.0
# one pass after the change, plus the pass's own confirming look
WITHIN = 3 * INTERVAL + 2


class REnv(ctest.Env):
    def config(self):
        return super().config().replace(
            "[nodefs]\n", "[nodefs]\nreconcile_interval = %gs\n" % INTERVAL, 1)


class Events:
    """The events file, read without blocking forever: poll, then read."""

    def __init__(self, env):
        self.fd = os.open(env.fs.path("events"), os.O_RDONLY)
        self.lines = []
        self.buf = b""

    def close(self):
        os.close(self.fd)

    def wait(self, pred, timeout):
        deadline = time.monotonic() + nt.scaled(timeout)
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        while True:
            for line in self.lines:
                if pred(line):
                    return line
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if p.poll(int(left * 1000)):
                self.buf += os.read(self.fd, 65536)
                *whole, self.buf = self.buf.split(b"\n")
                import json
                self.lines += [json.loads(w) for w in whole if w.strip()]


def drift_lines(env, rt):
    """This Env's differences (the run's dockerd is shared: other mounts'
    containers carry nodefs's labels too, and are orphans to this one)."""
    text = env.read("runtimes", rt, "reconcile")
    return [l for l in text.splitlines()
            if l.split(" ", 1)[0] in ("missing", "state", "orphan")
            and l.split(" ", 2)[1].startswith(env.tag + "-")]


def all_drift(env, rt, kind):
    text = env.read("runtimes", rt, "reconcile")
    return sum(1 for l in text.splitlines() if l.startswith(kind + " "))


def wait_drift(env, rt, kind, name, timeout=WITHIN):
    found = []

    def look():
        found[:] = [l for l in drift_lines(env, rt) if l.startswith("%s %s " % (kind, name))]
        return bool(found)
    if not nt.wait_until(look, timeout, 0.1):
        raise AssertionError("no '%s %s' in runtimes/%s/reconcile within %.0fs:\n%s"
                             % (kind, name, rt, timeout, env.read("runtimes", rt, "reconcile")))
    return found[0]


def same_drift(env, rt, kind):
    """The metric counts what the reconcile file lists. Other tests' mounts
    on the shared dockerd come and go (their containers are orphans here),
    so a pass may fall between the two reads: read again until two agree."""
    seen = []

    def agree():
        seen[:] = [metric(env, rt, kind), all_drift(env, rt, kind)]
        return seen[0] == seen[1]
    if not nt.wait_until(agree, WITHIN, 0.1):
        raise AssertionError("nodefs_reconcile_drift{%s,%s} %d, reconcile lists %d"
                             % (rt, kind, seen[0], seen[1]))
    return True


def metric(env, rt, kind):
    text = env.read("metrics", "nodefs.prom")
    m = re.search(r'^nodefs_reconcile_drift\{runtime="%s",kind="%s"\} (\d+)$' % (rt, kind),
                  text, re.M)
    if not m:
        raise AssertionError("no nodefs_reconcile_drift{runtime=%s,kind=%s}" % (rt, kind))
    return int(m.group(1))


def is_drift(name, new=None):
    return lambda e: (e.get("kind") == "drift" and e.get("name") == name
                      and (new is None or e.get("new") == new))


class DockerReconcileTest(unittest.TestCase):
    def setUp(self):
        nt.requires("docker")

    def test_removed_behind_its_back(self):
        with REnv() as env:
            ev = Events(env)
            try:
                name = env.name("rm")
                env.run(name, "runtime=docker image=%s cmd='sleep 1000'" % ctest.IMAGE)
                env.wait_state(name, "RUNNING")
                self.assertEqual(drift_lines(env, "docker"), [])
                cid = env.cread(name, "id").strip()
                t0 = time.monotonic()
                ctest.docker("rm", "-f", cid, check=True)
                line = wait_drift(env, "docker", "missing", name)
                took = time.monotonic() - t0
                self.assertLess(took, nt.scaled(WITHIN))
                self.assertIn("nodefs=EXITED runtime=GONE", line)
                self.assertIsNotNone(ev.wait(is_drift(name, "GONE"), WITHIN),
                                     "no drift event for %s" % name)
                # shown, not fixed: the container stays until destroyed
                self.assertEqual(env.state(name), "EXITED")
                self.assertIn("removed outside nodefs", env.cread(name, "error"))
                self.assertTrue(same_drift(env, "docker", "missing"))
                self.assertGreaterEqual(metric(env, "docker", "missing"), 1)
                head = nt.parse_kv(env.read("runtimes", "docker", "reconcile"))
                self.assertNotEqual(head["last_run"], "never")
                env.cctl(name, "destroy")
                env.wait_gone(name)
                self.assertTrue(nt.wait_until(lambda: drift_lines(env, "docker") == [],
                                              WITHIN, 0.1))
            finally:
                ev.close()

    def test_orphan_is_shown_never_removed(self):
        with REnv() as env:
            ev = Events(env)
            try:
                ghost = env.name("ghost")
                r = ctest.docker("create", "--name", ghost,
                                 "--label", "io.nodefs.managed=1",
                                 "--label", "io.nodefs.name=" + ghost,
                                 "--label", "io.nodefs.instance=" + env.instance,
                                 ctest.IMAGE, "sleep", "1000", check=True)
                gid = r.stdout.strip()
                line = wait_drift(env, "docker", "orphan", ghost)
                self.assertIn("id=" + gid, line)
                self.assertIn("nodefs=- runtime=CREATED", line)
                e = ev.wait(is_drift(ghost, "CREATED"), WITHIN)
                self.assertIsNotNone(e, "no drift event for the orphan")
                self.assertIsNone(e["old"])
                self.assertIn(gid, e["message"])
                self.assertTrue(same_drift(env, "docker", "orphan"))
                self.assertGreaterEqual(metric(env, "docker", "orphan"), 1)
                # passes go by: it is reported once, and left alone
                # a negative (nothing returned yet) has no event to wait on: three passes go by, none reports it again
                time.sleep(3 * INTERVAL)
                self.assertEqual(ctest.docker_names(ghost), [ghost])
                self.assertNotIn(ghost, env.containers())
                self.assertEqual(sum(1 for x in ev.lines if is_drift(ghost)(x)), 1)
                # an unlabelled container is none of nodefs's business
                plain = env.name("plain")
                ctest.docker("create", "--name", plain, ctest.IMAGE, "true", check=True)
                # a negative (nothing returned yet) has no event to wait on: two passes go by and none reports it
                time.sleep(2 * INTERVAL)
                self.assertFalse([l for l in drift_lines(env, "docker") if plain in l])
                ctest.docker("rm", "-f", ghost, plain, check=True)
                self.assertTrue(nt.wait_until(lambda: drift_lines(env, "docker") == [],
                                              WITHIN, 0.1))
            finally:
                ev.close()


    def test_two_instances_share_one_dockerd(self):
        """Two nodefs with default names on one dockerd: each has its own
        instance id, names and labels; each runs a container of the same
        name, and neither reports the other's as drift."""
        tag = "c%d2i" % (os.getpid() % 100000)
        with REnv(tag=tag) as a, REnv(tag=tag) as b:
            self.assertRegex(a.instance, r"^[0-9a-f]{32}$")
            self.assertNotEqual(a.instance, b.instance)
            with open(os.path.join(a.state_dir, "instance-id")) as f:
                self.assertEqual(f.read().strip(), a.instance)
            self.assertEqual(a.prefix, "nodefs-%s-" % a.instance[:8])
            web = a.name("web")
            self.assertEqual(web, b.name("web"))
            for env in (a, b):
                env.run(web, "runtime=docker image=%s cmd='sleep 1000'" % ctest.IMAGE)
            for env in (a, b):
                env.wait_state(web, "RUNNING")
            self.assertEqual(ctest.docker_names(tag), sorted([a.prefix + web, b.prefix + web]))
            for env in (a, b):
                cid = env.cread(web, "id").strip()
                r = ctest.docker("inspect", "-f", '{{index .Config.Labels "io.nodefs.instance"}}',
                                 cid, check=True)
                self.assertEqual(r.stdout.strip(), env.instance)
            # two passes of each after both run: nothing to report
            for env in (a, b):
                first = nt.parse_kv(env.read("runtimes", "docker", "reconcile"))["last_run"]
                self.assertTrue(nt.wait_until(lambda: nt.parse_kv(env.read(
                    "runtimes", "docker", "reconcile"))["last_run"] != first, WITHIN, 0.1))
            time.sleep(2 * INTERVAL)
            for env in (a, b):
                self.assertEqual(drift_lines(env, "docker"), [],
                                 env.read("runtimes", "docker", "reconcile"))
                self.assertEqual(env.state(web), "RUNNING")
            # a restart finds its own, and leaves the other's alone
            a.fs.restart()
            a.wait_state(web, "RUNNING")
            self.assertEqual(b.state(web), "RUNNING")
            for env in (a, b):
                env.cctl(web, "destroy")
            self.assertEqual(ctest.docker_names(tag), [])


class SharedLxcEnv(REnv):
    """An REnv whose [runtime lxc] uses another Env's lxcpath."""

    def __init__(self, lxcpath, **kw):
        super().__init__(**kw)
        self.shared = lxcpath

    def config(self):
        return super().config().replace("lxcpath = %s\n" % self.lxcpath,
                                        "lxcpath = %s\n" % self.shared, 1)


def lxc_mark(lxcpath, engine_name):
    with open(os.path.join(lxcpath, engine_name, "nodefs.json")) as f:
        return json.load(f)


class LxcReconcileTest(unittest.TestCase):
    def setUp(self):
        nt.requires("lxc")

    def test_two_instances_share_one_lxcpath(self):
        """Two nodefs with default names on one lxcpath: each names its
        LXC containers with its own prefix, so both run a container of the
        same name; each mark carries its instance, and neither reports the
        other's as drift, nor touches it at a restart."""
        tag = "c%d2l" % (os.getpid() % 100000)
        with REnv(tag=tag) as a, SharedLxcEnv(a.lxcpath, tag=tag) as b:
            self.assertNotEqual(a.prefix, b.prefix)
            web = a.name("web")
            for env in (a, b):
                env.run(web, "runtime=lxc template=busybox cmd='sleep 1000'")
            for env in (a, b):
                env.wait_state(web, "RUNNING", 60)
            r = ctest.lxc("lxc-ls", "-P", a.lxcpath, "-1", check=True)
            self.assertEqual(sorted(r.stdout.split()), sorted([a.engine(web), b.engine(web)]))
            for env in (a, b):
                self.assertEqual(env.cread(web, "id").strip(), env.engine(web))
                mark = lxc_mark(a.lxcpath, env.engine(web))
                self.assertEqual((mark["io.nodefs.name"], mark["io.nodefs.instance"]),
                                 (web, env.instance), mark)
            # two passes of each after both run: nothing to report
            for env in (a, b):
                first = nt.parse_kv(env.read("runtimes", "lxc", "reconcile"))["last_run"]
                self.assertTrue(nt.wait_until(lambda: nt.parse_kv(env.read(
                    "runtimes", "lxc", "reconcile"))["last_run"] != first, WITHIN, 0.1))
            for env in (a, b):
                self.assertEqual(drift_lines(env, "lxc"), [],
                                 env.read("runtimes", "lxc", "reconcile"))
                self.assertEqual(metric(env, "lxc", "orphan"), 0)
            # a restart finds its own, and leaves the other's alone
            pid = b.cread(web, "pid")
            a.fs.restart()
            a.wait_state(web, "RUNNING")
            self.assertEqual((b.state(web), b.cread(web, "pid")), ("RUNNING", pid))
            for env in (a, b):
                env.cctl(web, "destroy")
                env.wait_gone(web)
            r = ctest.lxc("lxc-ls", "-P", a.lxcpath, "-1", check=True)
            self.assertEqual(r.stdout.split(), [])

    def test_destroyed_with_lxc_destroy(self):
        with REnv() as env:
            ev = Events(env)
            try:
                name = env.name("gone")
                env.must("containers/ctl", "create %s runtime=lxc" % name)
                env.wait_state(name, "CREATED", 60)
                # no event tells nodefs about this one: only reconciliation
                ctest.lxc("lxc-destroy", "-P", env.lxcpath, "-n", env.engine(name), check=True)
                line = wait_drift(env, "lxc", "missing", name)
                self.assertIn("nodefs=CREATED runtime=GONE", line)
                e = ev.wait(is_drift(name, "GONE"), WITHIN)
                self.assertIsNotNone(e)
                self.assertEqual(e["old"], "CREATED")
                # taken in as an event would have, and kept until destroyed
                env.wait_state(name, "EXITED", WITHIN)
                self.assertIn("removed outside nodefs", env.cread(name, "error"))
                self.assertEqual(metric(env, "lxc", "missing"), 1)
                env.cctl(name, "destroy")
                env.wait_gone(name)
                self.assertTrue(nt.wait_until(lambda: drift_lines(env, "lxc") == [],
                                              WITHIN, 0.1))
            finally:
                ev.close()

    def test_started_with_lxc_start(self):
        """A start nodefs did not make and no event brings: the state
        differs (CREATED against RUNNING) and is taken in."""
        with REnv() as env:
            ev = Events(env)
            try:
                name = env.name("up")
                env.must("containers/ctl", "create %s runtime=lxc" % name)
                env.wait_state(name, "CREATED", 60)
                ctest.lxc("lxc-start", "-P", env.lxcpath, "-n", env.engine(name), check=True)
                e = ev.wait(is_drift(name, "RUNNING"), WITHIN)
                self.assertIsNotNone(e, "no drift event: %s" % env.read("runtimes", "lxc",
                                                                        "reconcile"))
                self.assertEqual(e["old"], "CREATED")
                self.assertIn("state", e["message"])
                env.wait_state(name, "RUNNING", WITHIN)
                self.assertTrue(env.cread(name, "pid").strip())
                # watched from now on: a stop from outside is seen at once
                ctest.lxc("lxc-stop", "-P", env.lxcpath, "-n", env.engine(name), "-k", check=True)
                env.wait_state(name, "EXITED", 5)
                env.cctl(name, "destroy")
                env.wait_gone(name)
            finally:
                ev.close()

    def test_foreign_container_is_not_ours(self):
        """An LXC container under the same lxcpath without nodefs's mark is
        neither listed nor reported."""
        with REnv() as env:
            other = env.name("foreign")
            ctest.lxc("lxc-create", "-P", env.lxcpath, "-n", other, "-t", ctest.lxc_template(),
                      check=True)
            # a negative (nothing returned yet) has no event to wait on: three passes go by and none reports the foreign container
            time.sleep(3 * INTERVAL)
            self.assertEqual(drift_lines(env, "lxc"), [])
            self.assertEqual(metric(env, "lxc", "orphan"), 0)
            self.assertTrue(os.path.isdir(os.path.join(env.lxcpath, other)))


if __name__ == "__main__":
    ctest.main(lxc_needed=False)

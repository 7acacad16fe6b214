#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The cluster view and remote commands through a real three-member etcd.

Three nodefs instances (a, b, c) on one machine, each its own mount, state
dir and node name, publish to one etcd cluster: each sees the others'
volumes in cluster/, acts on them with echo into cluster/.../ctl, and keeps
working locally when etcd loses quorum.
"""
import contextlib
import ctypes
import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import nodefs_test as nt
import etcdtest
import clustertest as ct

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "containers"))
import ctest as ctr  # noqa: E402  (the run's dockerd, its image, the docker CLI)


def dirs(fs, rel):
    """The subdirectories of rel (the objects), sorted."""
    return sorted(n for n in fs.listdir(rel) if os.path.isdir(fs.path(rel, n)))


def ops_for(fs, obj, typ):
    """The operations (info.json dicts) of type typ on obj (volumes/NAME)."""
    out = []
    for o in fs.listdir("operations"):
        try:
            j = json.loads(fs.read("operations", o, "info.json"))
        except (OSError, ValueError):
            continue
        if j.get("object") == obj and j.get("type") == typ:
            out.append(j)
    return out


def detail_watches(fs):
    """fs's open watches of other nodes' objects (its gauge)."""
    for line in fs.read("metrics/nodefs.prom").splitlines():
        if line.startswith('nodefs_cluster_watches{kind="detail"} '):
            return int(line.split()[1])
    return None


def thread_names(fs):
    """The names of the daemon's threads."""
    out = []
    for t in os.listdir("/proc/%d/task" % fs.proc.pid):
        try:
            with open("/proc/%d/task/%s/comm" % (fs.proc.pid, t)) as f:
                out.append(f.read().strip())
        except OSError:
            pass
    return out


def error_of(fs, rel):
    """rel's error file, or why it cannot be read (an assertion's message)."""
    try:
        return fs.error(rel)
    except OSError as e:
        return "(%s: %s)" % (rel, e)


def write_once(path, line):
    """One write(2) of line, not retried on EINTR as os.write is (PEP 475):
    (ok, errno). A write interrupted by a signal returns EINTR while its
    command goes on (nodefs(5)); written again, it would be a second
    command."""
    libc = ctypes.CDLL(None, use_errno=True)
    data = (line + "\n").encode()
    fd = os.open(path, os.O_WRONLY)
    try:
        n = libc.write(fd, data, len(data))
        return (n == len(data), 0 if n == len(data) else ctypes.get_errno())
    finally:
        os.close(fd)


def in_thread(fn, *args):
    """Run fn(*args) in a thread; the returned function joins it and gives
    fn's result."""
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", fn(*args)), daemon=True)
    th.start()

    def result(timeout=30):
        th.join(nt.scaled(timeout))
        if th.is_alive():
            raise AssertionError("%s%r still running" % (fn.__name__, args))
        return box["r"]
    return result


class Cluster(unittest.TestCase):
    def setUp(self):
        ct.requires()

    def test_a_three_nodes(self):
        """a (refuses remote commands), b (accepts, with the run's dockerd)
        and c (accepts): the view, remote volume and container commands,
        O_NONBLOCK, an etcd member stopped, quorum lost and back, c killed
        (DOWN within its lease) and restarted."""
        nt.requires("docker")
        dock = "[runtime docker]\nendpoint = %s\nstop_timeout = 2s\n" % ctr.HOST
        with contextlib.ExitStack() as st:
            e = etcdtest.Etcd(wait=False)
            e, a, b, c = ct.started(st, e, ct.Node(e, "a"),
                                    ct.Node(e, "b", accept_remote=True, extra_conf=dock),
                                    ct.Node(e, "c", accept_remote=True, ttl="2s"))
            prefix = b.status().get("name_prefix", "")
            try:
                self.view_and_volumes(a, b, c)
                self.containers(a, b, prefix)
                self.member_stopped(e, a, b)
                self.down_and_back(a, c)
                self.quorum(e, a, b)
            finally:
                if prefix:
                    for n in ctr.docker_names(prefix):
                        ctr.docker("rm", "-f", "-v", n)

    def view_and_volumes(self, a, b, c):
        a.wait_read("cluster/status", lambda s: "state: connected" in s)
        ok, err = b.write_ctl("volumes/ctl", "create v1 size=1M")
        self.assertTrue(ok, b.error("volumes"))
        self.assertTrue(nt.wait_until(lambda: dirs(a, "cluster/nodes") == ["a", "b", "c"],
                                      nt.scaled(10)), dirs(a, "cluster/nodes"))
        # the view follows b's own state to where it settles
        nt.wait_until(lambda: b.read("volumes/v1/state") != "CREATING\n", 10)
        a.wait_read("cluster/nodes/b/volumes/v1/state", lambda s: s == b.read("volumes/v1/state"))
        a.wait_read("cluster/nodes/b/volumes/v1/info.json",
                    lambda s: json.loads(s) == json.loads(b.read("volumes/v1/info.json")))
        c.wait_read("cluster/nodes/b/volumes/v1/state", lambda s: s.strip() != "")
        for n in ("a", "b", "c"):
            self.assertTrue(c.read("cluster/nodes/%s/status" % n).startswith("UP\n"))
        # a remote create on b, from a: b's own volumes/ gets it
        ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create v2 size=1M")
        self.assertTrue(ok, error_of(a, "cluster/nodes/b/volumes"))
        self.assertIn("v2", b.listdir("volumes"))
        (op,) = ops_for(b, "volumes/v2", "volume.create")
        self.assertTrue(op["by"].startswith("node=a uid=0"), op)
        self.assertTrue(op.get("cluster_command", "").startswith("a-"), op)
        # its error comes back with b's errno and message
        ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create v2 size=1M")
        self.assertEqual((ok, nt.errname(err)), (False, nt.errname(errno.EEXIST)))
        self.assertIn("node b", error_of(a, "cluster/nodes/b/volumes"))
        # a refuses: accept_remote = no
        ok, err = a.write_ctl("volumes/ctl", "create va size=1M")
        self.assertTrue(ok)
        c.wait_read("cluster/nodes/a/volumes/va/state", lambda s: s.strip() != "")
        # c reads a's objects and b's: two detail watches, on one thread
        self.assertEqual(detail_watches(c), 2)
        self.assertEqual(thread_names(c).count("nodefs-cdetail"), 1, thread_names(c))
        ok, err = c.write_ctl("cluster/nodes/a/volumes/ctl", "create vx size=1M")
        self.assertEqual((ok, nt.errname(err)), (False, "EPERM"))
        self.assertIn("accept_remote = no", error_of(c, "cluster/nodes/a/volumes"))
        self.assertNotIn("vx", a.listdir("volumes"))
        # an object's own ctl: destroy v2 on b from c
        ok, err = c.write_ctl("cluster/nodes/b/volumes/v2/ctl", "destroy")
        self.assertTrue(ok, (nt.errname(err), b.log()[-3000:]))
        self.assertTrue(nt.wait_until(
            lambda: "v2" not in dirs(a, "cluster/nodes/b/volumes"), nt.scaled(5)))
        # O_NONBLOCK: the write returns with b's operation id once b has
        # checkpointed it; b runs it to its end
        fd = os.open(a.path("cluster/nodes/b/volumes/ctl"), os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, b"create v4 size=1M\n")
            oid = os.pread(fd, 100, 0).decode().strip()
        finally:
            os.close(fd)
        self.assertEqual(b.read("operations", oid, "command"), "create v4 size=1M\n")
        self.assertTrue(nt.wait_until(
            lambda: b.read("operations", oid, "state") == "FINISHED\n", nt.scaled(10)))
        # no mkdir under cluster/
        with self.assertRaises(OSError):
            os.mkdir(a.path("cluster/nodes/b/volumes/new"))
        self.assertIn("nodefs_cluster_connected 1", a.read("metrics/nodefs.prom"))

    def containers(self, a, b, prefix):
        """Container commands on b from a, on the real dockerd."""
        line = "run web runtime=docker image=%s cmd='sleep 600'" % ctr.IMAGE
        ok, err = a.write_ctl("cluster/nodes/b/containers/ctl", line)
        self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/containers")))
        self.assertEqual(b.read("containers/web/state"), "RUNNING\n")
        self.assertEqual(ctr.docker_names(prefix), [prefix + "web"])
        a.wait_read("cluster/nodes/b/containers/web/state", lambda s: s == "RUNNING\n")
        info = json.loads(a.read("cluster/nodes/b/containers/web/info.json"))
        self.assertEqual(info.get("runtime"), "docker", info)
        # the container's own ctl
        ok, err = a.write_ctl("cluster/nodes/b/containers/web/ctl", "stop 0")
        self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/containers/web"),
                             b.listdir("containers"), dirs(a, "cluster/nodes/b/containers"),
                             b.log()[-2500:], a.log()[-1500:]))
        self.assertEqual(b.read("containers/web/state"), "EXITED\n")
        a.wait_read("cluster/nodes/b/containers/web/state", lambda s: s == "EXITED\n")
        # a bad line: b's check, b's errno, and nothing changed there
        ok, err = a.write_ctl("cluster/nodes/b/containers/web/ctl", "kill NOSUCHSIG")
        self.assertEqual((ok, nt.errname(err)), (False, "EINVAL"))
        self.assertIn("node b", error_of(a, "cluster/nodes/b/containers/web"))
        ok, err = a.write_ctl("cluster/nodes/b/containers/web/ctl", "destroy")
        self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/containers/web")))
        self.assertNotIn("web", b.listdir("containers"))
        self.assertEqual(ctr.docker_names(prefix), [])
        self.assertTrue(nt.wait_until(
            lambda: "web" not in dirs(a, "cluster/nodes/b/containers"), nt.scaled(5)))

    def member_stopped(self, e, a, b):
        """Member 0 (every client's first endpoint) stops answering without
        closing its connections: the view and remote commands go on through
        the others."""
        e.kill(0, signal.SIGSTOP)
        try:
            a.wait_read("cluster/status", lambda s: "unhealthy" in s, timeout=5)
            ok, err = b.write_ctl("volumes/ctl", "create s1 size=1M")
            self.assertTrue(ok, b.error("volumes"))
            a.wait_read("cluster/nodes/b/volumes/s1/state", lambda s: s.strip() != "",
                        timeout=10)
            ok, err = a.write_ctl("cluster/nodes/b/volumes/s1/ctl", "destroy")
            self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/volumes/s1")))
            self.assertIn("state: connected", a.read("cluster/status"))
        finally:
            e.cont(0)

    def down_and_back(self, a, c):
        c.write_ctl("volumes/ctl", "create keep size=1M")
        a.wait_read("cluster/nodes/c/volumes/keep/state", lambda s: s.strip() != "")
        t0 = time.monotonic()
        c.kill9()
        a.wait_read("cluster/nodes/c/status", lambda s: s.startswith("DOWN since"), timeout=6)
        self.assertLess(time.monotonic() - t0, nt.scaled(2 + 2))
        # its objects are still listed as last published
        self.assertIn("keep", dirs(a, "cluster/nodes/c/volumes"))
        c.start()
        a.wait_read("cluster/nodes/c/status", lambda s: s.startswith("UP"))
        self.assertEqual(dirs(a, "cluster/nodes/c/volumes"), ["keep"])

    def quorum(self, e, a, b):
        # one member gone: nothing is interrupted
        e.kill(2)
        ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create q2 size=1M")
        self.assertTrue(ok, error_of(a, "cluster/nodes/b/volumes"))
        self.assertIn("connected", a.read("cluster/status"))
        a.wait_read("cluster/nodes/b/volumes/q2/state", lambda s: s.strip() != "")
        # two gone: unavailable, remote writes fail at once, local works
        e.kill(1)
        a.wait_read("cluster/status", lambda s: "state: unavailable since" in s, timeout=8)
        t0 = time.monotonic()
        ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create q3 size=1M")
        self.assertEqual(ok, False)
        self.assertIn(nt.errname(err), ("EHOSTUNREACH", "ETIMEDOUT"))
        self.assertLess(time.monotonic() - t0, nt.scaled(1))
        ok, err = a.write_ctl("volumes/ctl", "create local size=1M")
        self.assertTrue(ok, a.error("volumes"))
        self.assertIn("q2", dirs(a, "cluster/nodes/b/volumes"))  # the cache serves
        # all back: the view catches up without a restart
        e.start(1)
        e.start(2)
        b.wait_read("cluster/nodes/a/volumes/local/state", lambda s: s.strip() != "",
                    timeout=15)
        a.wait_read("cluster/status", lambda s: "state: connected" in s)

    def test_ab_lazy_resources(self):
        """Three nodes, detail_idle = 1s. b's resources against its
        containers' limits (one limited, one not, on the run's dockerd) and
        its profile's GetCapacity, as its files, its gauges and a's
        cluster/nodes/b/resources and cluster/resources show them. The
        lazy watch, counted on the etcd members themselves: no watch on b's
        objects until a reads them, one after (the first read lists them at
        once), none after the idle time. An etcd member replaced (member
        remove, a new member with an empty data dir added): nothing lost.
        etcd gone: a's view of b says it is stale, and serves on; back:
        live. a's creates of command records are made twice (a test hook):
        the command runs once and its answer comes back."""
        nt.requires("docker", "hooks")
        dock = ("[runtime docker]\nendpoint = %s\nstop_timeout = 1s\n"
                "[profile fast]\nplugin = hp\n" % ctr.HOST)
        idle = "detail_idle = 1s\n"
        with contextlib.ExitStack() as st:
            e = etcdtest.Etcd(wait=False)
            na = ct.Node(e, "a", extra=idle)
            # every remote create of a's as one whose reply was lost: made
            # again once b has answered (the client's retry on another
            # member); it must count as made, and run once
            na.env = {"NODEFS_TEST_CLUSTER_CREATE_RETRY": "1"}
            e, a, b, c = ct.started(st, e, na,
                                    ct.Node(e, "b", accept_remote=True, extra_conf=dock,
                                            extra=idle),
                                    ct.Node(e, "c", extra=idle))
            prefix = b.status().get("name_prefix", "")
            try:
                self.resources(a, b, c)
                self.lazy(e, a, b)
                self.replaced(e, a, b)
                self.stale(e, a, b)
                # through b, before the engine is told behind its back
                for n in ("lim", "unl"):
                    ok, err = b.write_ctl("containers/%s/ctl" % n, "destroy")
                    self.assertNotIn(n, b.listdir("containers"),
                                     (n, ok, nt.errname(err), error_of(b, "containers/" + n)))
            finally:
                if prefix:
                    for n in ctr.docker_names(prefix):
                        ctr.docker("rm", "-f", "-v", n)

    def resources(self, a, b, c):
        def kv(text):
            return dict(line.split(" ", 1) for line in text.splitlines())
        for name, lim in (("lim", " cpus=0.5 memory=64M"), ("unl", "")):
            ok, err = b.write_ctl("containers/ctl", "run %s runtime=docker image=%s "
                                  "cmd='sleep 600'%s" % (name, ctr.IMAGE, lim))
            self.assertTrue(ok, (nt.errname(err), b.error("containers")))
        ok, err = b.write_ctl("volumes/ctl", "create r1 size=1M profile=fast")
        self.assertTrue(ok, b.error("volumes"))
        cap = {}

        def settled():
            text = b.read("plugins/hp/capacity")
            cap.update(l.split(" ", 1) for l in text.splitlines() if l.startswith("fast "))
            r = kv(b.read("resources"))
            return "fast" in cap and r.get("profile.fast.capacity_bytes") == cap["fast"]
        self.assertTrue(nt.wait_until(settled, 10), (cap, b.read("resources")))
        r = kv(b.read("resources"))
        total = float(r["cpus_total"])
        self.assertGreater(total, 0)
        self.assertLessEqual(total, len(os.sched_getaffinity(0)))
        self.assertEqual((r["cpus_allocated"], r["memory_allocated"], r["containers_unlimited"]),
                         ("0.5", str(64 << 20), "1"), r)
        self.assertEqual((r["runtime.docker.cpus_allocated"],
                          r["runtime.docker.memory_allocated"]), ("0.5", str(64 << 20)))
        self.assertAlmostEqual(float(r["cpus_free"]), total - 0.5, places=3)
        self.assertEqual(int(r["memory_free"]), int(r["memory_total"]) - (64 << 20))
        self.assertLessEqual(int(r["memory_total"]),
                             os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        self.assertGreaterEqual(int(r["volumes_bytes_provisioned"]), 1 << 20)
        j = json.loads(b.read("resources.json"))
        self.assertEqual((j["cpus_allocated"], j["memory_allocated"], j["containers_unlimited"],
                          j["runtimes"]["docker"]["memory_allocated"],
                          j["profiles"]["fast"]["capacity_bytes"] > 0),
                         (0.5, 64 << 20, 1, 64 << 20, True))
        prom = [l for l in b.read("metrics/nodefs.prom").splitlines()
                if l.startswith("nodefs_node_")]
        self.assertIn('nodefs_node_cpus{kind="allocated"} 0.500', prom)
        self.assertIn('nodefs_node_memory_bytes{kind="allocated"} %d' % (64 << 20), prom)
        # (GetCapacity is statvfs of the plugin's dir: it moves with the disk)
        self.assertTrue(any(re.match(r'nodefs_node_profile_capacity_bytes\{profile="fast"\} '
                                     r'[1-9]', l) for l in prom), prom)
        # published with b's status: a's view shows the same lines
        mine = b.read("resources")
        strip = lambda t: re.sub(r"profile\.fast\.capacity_bytes \d+", "", t)
        a.wait_read("cluster/nodes/b/resources",
                    lambda s: strip(s) == strip(b.read("resources")))
        st = a.read("cluster/nodes/b/status")
        self.assertIn("containers: 2\n", st)
        self.assertIn("view: live\n", st)
        # cluster/resources: the sums over the three, and who has most free
        per = {}
        for n in "abc":
            a.wait_read("cluster/nodes/%s/resources" % n, lambda s: s != "")
            per[n] = kv(a.read("cluster/nodes/%s/resources" % n))
        tot = kv(a.wait_read("cluster/resources", lambda s: "nodes_up 3\n" in s))
        self.assertEqual(int(tot["memory_allocated"]), 64 << 20)
        self.assertEqual(int(tot["memory_total"]),
                         sum(int(per[n]["memory_total"]) for n in "abc"))
        self.assertAlmostEqual(float(tot["cpus_free"]),
                               sum(float(per[n]["cpus_free"]) for n in "abc"), places=2)
        best = tot["most_free.cpus"].split()
        self.assertNotEqual(best[0], "b", tot)
        self.assertEqual(tot["most_free.profile.fast.capacity_bytes"].split()[0], "b")
        del mine

    def lazy(self, e, a, b):
        details = detail_watches
        # nothing has read under cluster/nodes/b/{volumes,containers}/ yet
        self.assertEqual(details(a), 0)
        self.assertIn("detail: not watched\n", a.read("cluster/nodes/b/status"))
        base = e.watchers()
        # the first read lists b's objects at once, through one range read
        self.assertEqual(dirs(a, "cluster/nodes/b/volumes"), ["r1"])
        self.assertEqual(dirs(a, "cluster/nodes/b/containers"), ["lim", "unl"])
        self.assertEqual(details(a), 1)
        self.assertIn("detail: watched since", a.read("cluster/nodes/b/status"))
        self.assertTrue(nt.wait_until(lambda: e.watchers() == base + 1, 5),
                        (base, e.watchers()))
        # it follows b while open
        ok, err = b.write_ctl("volumes/ctl", "create r2 size=1M")
        self.assertTrue(ok)
        a.wait_read("cluster/nodes/b/volumes/r2/state", lambda s: s.strip() != "")
        # no read for detail_idle: closed, on a and on the members
        self.assertTrue(nt.wait_until(lambda: details(a) == 0, 6), details(a))
        self.assertTrue(nt.wait_until(lambda: e.watchers() == base, 5),
                        (base, e.watchers()))
        self.assertIn("detail: not watched\n", a.read("cluster/nodes/b/status"))
        # read again: open again, and current
        self.assertEqual(dirs(a, "cluster/nodes/b/volumes"), ["r1", "r2"])

    def replaced(self, e, a, b):
        """Member 1 lost and replaced by a new one with an empty data dir."""
        e.replace(1)
        e.wait_healthy()
        ok, err = b.write_ctl("volumes/ctl", "create r3 size=1M")
        self.assertTrue(ok)
        a.wait_read("cluster/nodes/b/volumes/r3/state", lambda s: s.strip() != "",
                    timeout=15)
        self.assertEqual(dirs(a, "cluster/nodes/b/volumes"), ["r1", "r2", "r3"])
        ok, err = a.write_ctl("cluster/nodes/b/volumes/r3/ctl", "destroy")
        self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/volumes/r3")))
        self.assertNotIn("r3", b.listdir("volumes"))
        # run once, though a's create of the command was made twice (the hook)
        self.assertEqual(len(ops_for(b, "volumes/r3", "volume.destroy")), 1)
        ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create r1 size=1M")
        self.assertEqual((ok, nt.errname(err)), (False, "EEXIST"))
        self.assertIn("node b", error_of(a, "cluster/nodes/b/volumes"))
        self.assertTrue(nt.wait_until(lambda: dirs(a, "cluster/nodes/b/volumes") == ["r1", "r2"],
                                      nt.scaled(5)))
        a.wait_read("cluster/status", lambda s: s.count("healthy member") == 3, timeout=15)

    def stale(self, e, a, b):
        """Every member gone: a's view of b is served, labelled stale."""
        self.assertEqual(dirs(a, "cluster/nodes/b/volumes"), ["r1", "r2"])
        for i in range(3):
            e.kill(i)
        st = a.wait_read("cluster/nodes/b/status", lambda s: "view: stale" in s)
        self.assertRegex(st, r"revision: [1-9]")
        self.assertIn("UP\n", st)  # as last seen, and said to be stale
        self.assertEqual(dirs(a, "cluster/nodes/b/volumes"), ["r1", "r2"])
        for i in range(3):
            e.start(i)
        a.wait_read("cluster/nodes/b/status", lambda s: "view: live" in s, timeout=20)

    def test_b_at_most_once(self):
        """b crashes once it has decided to run a remote command (before
        running it), then after the command's operation FINISHED (before
        answering): restarted,
        it runs the first once and answers the second from its operation;
        the writer's write(2) gets success both times (or EINTR, when a
        signal reaches the writer while b is away: the command going on),
        and nothing runs twice. Then records that are not nodefs' are shown as errors."""
        nt.requires("hooks")
        b = ct.Node(None, "b", accept_remote=True, ttl="4s")
        # armed from the start, so no restart is spent arming it; the second
        # point counts the first command's FINISHED, run after the restart
        points = [("cluster:run", "m1"), ("operations:FINISHED:2", "m2"), (None, None)]
        with etcdtest.Etcd() as e, ct.Node(e, "a", ttl="4s") as a:
            b.etcd(e)
            b.env = {"NODEFS_CRASH_AT": points[0][0]}
            with b:
                made = []
                for i, (point, name) in enumerate(points[:2]):
                    a.wait_read("cluster/status", lambda s: "state: connected" in s)
                    a.wait_read("cluster/nodes/b/status", lambda s: s.startswith("UP"))
                    done = in_thread(write_once, a.path("cluster/nodes/b/volumes/ctl"),
                                     "create %s size=1M" % name)
                    died = nt.wait_until(lambda: b.proc.poll() is not None, 15)
                    self.assertTrue(died, "b did not crash at %s:\n%s" % (point, b.log()))
                    b.kill9()
                    nxt = points[i + 1][0]
                    b.env = {"NODEFS_CRASH_AT": nxt} if nxt else None
                    b.start()
                    ok, err = done()
                    if err == errno.EINTR:
                        # a signal reached the writer while b was away (b
                        # is this process's child): the write returns
                        # EINTR and the command goes on. Written again, as
                        # os.write does (PEP 475), it would be a second
                        # command: the flake this test had
                        self.assertTrue(nt.wait_until(
                            lambda: [o["state"] for o in
                                     ops_for(b, "volumes/" + name, "volume.create")] ==
                            ["FINISHED"], nt.scaled(20)), b.log()[-3000:])
                    else:
                        self.assertTrue(ok, (point, nt.errname(err),
                                             a.error("cluster/nodes/b/volumes"),
                                             b.log()[-3000:], a.log()[-3000:]))
                    ops = ops_for(b, "volumes/" + name, "volume.create")
                    self.assertEqual([o["state"] for o in ops], ["FINISHED"], (point, ops))
                    made.append(name)
                    self.assertEqual(sorted(v for v in b.listdir("volumes")
                                            if v.startswith("m")), made)
                # the adoption answers the writer, but a writer that got
                # EINTR (above) did not wait for that answer: wait for its count
                adopted = ('nodefs_cluster_remote_commands_total{side="target",'
                           'result="adopted"} 1')
                self.assertTrue(nt.wait_until(
                    lambda: adopted in b.read("metrics/nodefs.prom"), nt.scaled(20)),
                    [l for l in b.read("metrics/nodefs.prom").splitlines()
                     if "remote_commands" in l])
            self.invalid_records(e, a)

    def invalid_records(self, e, a):
        e.ctl("put", "/nodefs/nodes/x/volumes/bad", "{truncated")
        e.ctl("put", "/nodefs/nodes/x/volumes/typ", '{"state": 3, "info": []}')
        e.ctl("put", "/nodefs/nodes/x/volumes/..", "{}")
        e.ctl("put", "/nodefs/summary/x/info", "[1]")
        e.ctl("put", "/nodefs/nodes/y", "nothing")
        e.ctl("put", "/nodefs/nodes/a/inbox/junk", "[not a command")
        a.wait_read("cluster/nodes/x/volumes/bad/state", lambda s: s == "INVALID\n")
        self.assertIn("not JSON", a.read("cluster/nodes/x/volumes/bad/error"))
        a.wait_read("cluster/nodes/x/volumes/typ/state", lambda s: s == "INVALID\n")
        self.assertIn("invalid record", a.read("cluster/nodes/x/volumes/typ/error"))
        self.assertIn("error", json.loads(a.read("cluster/nodes/x/volumes/typ/info.json")))
        self.assertTrue(a.read("cluster/nodes/x/status").startswith("DOWN"))
        self.assertEqual(sorted(dirs(a, "cluster/nodes/x/volumes")), ["bad", "typ"])
        self.assertEqual(a.status()["state"], "READY")
        # the junk command is answered, not run
        self.assertTrue(nt.wait_until(
            lambda: '"errno":' in e.ctl("get", "/nodefs/nodes/a/inbox/junk"), nt.scaled(5)))


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate
    signed by it, and a second CA that signed nothing here (P-256 keys:
    made in milliseconds, where RSA keys take seconds on a loaded host)."""
    def ssl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    for ca in ("ca", "other"):
        ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj",
            "/CN=%s" % ca, "-keyout", ca + ".key", "-out", ca + ".pem")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    for who in ("server", "client"):
        ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=%s" % who,
            "-keyout", who + ".key", "-out", who + ".csr")
        ssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", "ext", "-out", who + ".pem")
    p = lambda n: os.path.join(d, n)
    return dict(ca=p("ca.pem"), cert=p("server.pem"), key=p("server.key"),
                client_cert=p("client.pem"), client_key=p("client.key"), other=p("other.pem"))


class ClusterTls(unittest.TestCase):
    """(Sorts after Cluster: the shards take one long case each.)"""
    def setUp(self):
        ct.requires()
        nt.requires("prog:openssl")

    def test_tls(self):
        with tempfile.TemporaryDirectory() as d:
            c = make_certs(d)
            with etcdtest.Etcd(tls=c) as e:
                good = "ca = %s\ncert = %s\nkey = %s\n" % (c["ca"], c["client_cert"],
                                                        c["client_key"])
                with ct.Node(e, "a", extra=good) as a, ct.Node(e, "d", extra=good) as d:
                    a.wait_read("cluster/status", lambda s: "state: connected" in s)
                    a.wait_read("cluster/status", lambda s: "https://127.0.0.1" in s)
                    # another node's objects over https: a detail watch on
                    # a thread of its own (libcurl), as over http:// on the
                    # detail thread
                    ok, err = d.write_ctl("volumes/ctl", "create t1 size=1M")
                    self.assertTrue(ok, (nt.errname(err), d.error("volumes")))
                    a.wait_read("cluster/nodes/d/volumes/t1/state", lambda s: s.strip() != "")
                    ok, err = d.write_ctl("volumes/ctl", "create t2 size=1M")
                    self.assertTrue(ok, (nt.errname(err), d.error("volumes")))
                    a.wait_read("cluster/nodes/d/volumes/t2/state", lambda s: s.strip() != "")
                    self.assertIn("detail: watched since", a.read("cluster/nodes/d/status"))
                    self.assertEqual(thread_names(a).count("nodefs-cdetail"), 1)
                wrong_ca = "ca = %s\ncert = %s\nkey = %s\n" % (c["other"], c["client_cert"],
                                                            c["client_key"])
                with ct.Node(e, "b", extra=wrong_ca) as b:
                    st = b.wait_read("cluster/status", lambda s: "unavailable since" in s and
                                     "not connected yet" not in s)
                    self.assertRegex(st, "(?i)certificate|SSL")
                with ct.Node(e, "c", extra="ca = %s\n" % c["ca"]) as n:
                    st = n.wait_read("cluster/status", lambda s: "unavailable since" in s and
                                     "not connected yet" not in s)
                    self.assertIn("no client certificate", st)


class NoCluster(unittest.TestCase):
    def test_no_section_no_dir(self):
        nt.requires("mount")
        with nt.Nodefs(nt.offline_config()) as fs:
            self.assertNotIn("cluster", fs.listdir())

    def test_bad_config(self):
        nt.requires("mount")
        for text, msg in (("[cluster]\nnode = a\n", "etcd = URL"),
                          ("[cluster]\netcd = tcp://x\n", "not an http"),
                          ("[cluster]\netcd = http://127.0.0.1:1\nbogus = 1\n", "unknown key"),
                          ("[cluster]\netcd = http://127.0.0.1:1\nlease_ttl = 1s\n", "lease_ttl")):
            with self.assertRaises(nt.DaemonError) as cm:
                with nt.Nodefs(nt.offline_config() + text):
                    pass
            self.assertIn(msg, str(cm.exception))


class RemoteWait(unittest.TestCase):
    """(Sorts after NoCluster: the third shard, not the long first.)"""
    def setUp(self):
        ct.requires()

    def test_longer_than_a_ttl(self):
        """A remote command that runs longer than three of the writer's
        lease TTLs (a create whose plugin takes 6.5 s, against a 2 s TTL)
        gets its answer: the writer waits while the target is UP. A writer
        killed while it waits goes at once, the command going on."""
        with contextlib.ExitStack() as st:
            e = etcdtest.Etcd(wait=False)
            e, a, b = ct.started(st, e, ct.Node(e, "a", ttl="2s"),
                                 ct.Node(e, "b", accept_remote=True, csi_timeout="20s",
                                         plugin_args="--delay CreateVolume=6.5"))
            # a's view can show b before a itself is connected (its watch
            # comes first), and a write is refused until it is
            a.wait_read("cluster/status", lambda s: "state: connected" in s)
            a.wait_read("cluster/nodes/b/status", lambda s: s.startswith("UP"))
            t0 = time.monotonic()
            ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create slow size=1M")
            self.assertTrue(ok, (nt.errname(err), error_of(a, "cluster/nodes/b/volumes")))
            self.assertGreaterEqual(time.monotonic() - t0, 6.5)
            self.assertIn("slow", b.listdir("volumes"))
            # a writer killed while it waits for the remote answer goes at
            # once (the kernel would hold it until nodefs answered); the
            # command goes on at b
            w = subprocess.Popen(["bash", "-c", "echo 'create slow2 size=1M' > " +
                                  a.path("cluster/nodes/b/volumes/ctl")])
            self.assertTrue(nt.wait_until(lambda: "slow2" in b.listdir("volumes"),
                                          nt.scaled(10)))
            t0 = time.monotonic()
            w.kill()
            w.wait(timeout=nt.scaled(10))
            self.assertLess(time.monotonic() - t0, 3, "the killed writer waited")
            self.assertTrue(nt.wait_until(lambda: b.read("volumes/slow2/state") == "CREATED\n",
                                          nt.scaled(20)), b.log())


if __name__ == "__main__":
    nt.main("mount")

# SPDX-License-Identifier: LGPL-2.1-or-later
"""A container as a service (issue #33): restart policies kept by nodefs,
published ports, networks and health checks, against real engines.

- the run's dockerd (tests/fixtures/dockerd.sh): restart=on-failure:MAX with
  growing delays, a kill -9 of nodefs between two restarts, one `wait`, the
  engine's own policy off; the bad input the issue names.
- the second dockerd of the run, inside a network namespace of its own
  (tests/fixtures/dockerd-netns.sh): busybox httpd published on
  127.0.0.1:0:80 answers inside that namespace at the chosen port; its
  http check (nodefs's) turns unhealthy when httpd is killed and healthy
  when it is back; a Docker cmd check (the engine's Healthcheck) with
  health_restart=yes restarts it.
- LXC: network=none (a namespace of its own), nodefs's http check made
  inside it, and restart=on-failure:MAX through the same policy code.
- LXC: network=veth:BRIDGE with ip= and gateway=, on a bridge made in a
  network namespace the test makes, nodefs running in that namespace (with
  a sysfs of its own, where liblxc looks for the bridge): busybox httpd
  answers there at its ip=.
No traffic leaves loopback or those namespaces.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

import nodefs_test as nt
import ctest
from ctest import IMAGE

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "observe"))
from observe import EventReader  # noqa: E402

NETNS_HOST = os.environ.get("NODEFS_TEST_DOCKER_NETNS_HOST", "")
NETNS = os.environ.get("NODEFS_TEST_NETNS", "")
# serves /www until /tmp/down exists; back when it is removed
HTTPD_LOOP = ("sh -c \"mkdir -p /www && echo hello > /www/index.html && "
              "while :; do [ -e /tmp/down ] || httpd -f -p 80 -h /www; sleep 0.1; done\"")


# exits 0 the first time, then serves /www on port 80
ONCE_THEN_HTTPD = ("sh -c \"[ -e /ran ] || { touch /ran; exit 0; }; mkdir -p /www && "
                   "echo hello > /www/index.html && exec httpd -f -p 80 -h /www\"")


def in_netns(ns, *argv, timeout=10):
    return subprocess.run(["nsenter", "--net=/run/netns/" + ns, *argv], capture_output=True,
                          text=True, timeout=timeout)


def get(ns, url):
    r = in_netns(ns, "curl", "-s", "--max-time", "3", url)
    return r.stdout if r.returncode == 0 else None


def served_why(env, name, url):
    """What to look at when a published port does not serve: nodefs's
    state and ports, the engine's view of the container, its output, what
    listens in the namespace, and curl's own words."""
    eng = env.engine(name)
    out = ["state %r ports %r" % (env.state(name), env.cread(name, "ports"))]
    for args in (("inspect", "-f", "{{.State.Status}} {{json .NetworkSettings.Ports}} "
                  "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", eng),
                 ("logs", "--tail", "20", eng)):
        r = ctest.docker(*args, host=NETNS_HOST)
        out.append("docker %s: %s%s" % (args[0], r.stdout.strip(), r.stderr.strip()))
    out.append("listening: %s" % in_netns(NETNS, "ss", "-ltnp").stdout.strip())
    r = in_netns(NETNS, "curl", "-sS", "--max-time", "3", url)
    out.append("curl: %d %s%s" % (r.returncode, r.stdout.strip(), r.stderr.strip()))
    return "\n".join(out)


def waits_of(events):
    """[(N, ms)] of the EXITED events' "restart N of MAX in MS ms" notes."""
    out = []
    for e in events:
        m = re.search(r"restart (\d+) of \d+ in (\d+) ms", e.get("message") or "")
        if m:
            out.append((int(m.group(1)), int(m.group(2))))
    return out


def restarts(env, name):
    return nt.parse_kv(env.cread(name, "restarts"))


def health(env, name):
    return nt.parse_kv(env.cread(name, "health"))


class SlowResetEnv(ctest.Env):
    """retry_max 5s instead of ctest's 400ms: a run longer than retry_max
    starts the doubling over, and on a loaded machine a 0.3 s run can look
    longer than 400 ms from start to seen exit."""

    def config(self):
        return super().config().replace("retry_max = 400ms", "retry_max = 5s")


# Run by sh before nodefs, in a mount namespace of its own joined to the
# test's network namespace: a sysfs mounted there shows that namespace's
# interfaces (liblxc looks for a veth's bridge under /sys/class/net), and
# what was mounted under the old one (the cgroup hierarchies, securityfs,
# ...) is moved under it. The new sysfs is mounted aside first (on /sys/dev
# of the old, now private one), those mounts moved into it, and the whole
# moved onto /sys: nothing of it reaches the test's mount namespace, and
# /proc/self/mountinfo lists each cgroup hierarchy once.
SYSFS_OF_NETNS = """set -e
mount --make-rprivate /sys
subs=$(awk '$5 ~ "^/sys/" { print $5 }' /proc/self/mountinfo | sort -u)
mount -t sysfs sysfs /sys/dev
prev=/sys/dev
for m in $subs; do
    case $m in "$prev"/*) continue;; esac
    prev=$m
    if [ -d "/sys/dev${m#/sys}" ]; then mount --move "$m" "/sys/dev${m#/sys}"; fi
done
mount --move /sys/dev /sys
exec "$@"
"""


class NetnsNodefs(nt.Nodefs):
    """nodefs inside the network namespace ns, in a mount namespace of its
    own (SYSFS_OF_NETNS). Its dir is bound on itself and made shared first,
    so the FUSE mount made in the other namespace shows in the test's at
    the same path."""

    def __init__(self, ns, config, **kw):
        super().__init__(config, **kw)
        self.ns = ns
        self.shared = False

    def argv(self):
        return (["nsenter", "--net=/run/netns/" + self.ns, "unshare", "--mount",
                 "--propagation", "unchanged", "sh", "-c", SYSFS_OF_NETNS, "sh"]
                + super().argv())

    def start(self):
        if not self.shared:
            subprocess.run(["mount", "--bind", self.tmp, self.tmp], check=True)
            self.shared = True
            subprocess.run(["mount", "--make-shared", self.tmp], check=True)
        super().start()

    def _cleanup(self):
        if self.proc is not None:
            self.stop()
        if self.shared:
            subprocess.run(["umount", "-l", self.tmp], capture_output=True)
            self.shared = False
        super()._cleanup()


class NetnsEnv(ctest.Env):
    """A ctest.Env whose nodefs runs in the network namespace ns. liblxc's
    command sockets are abstract, so of that namespace: the lxc-* tools
    of the cleanup run there too."""

    def __init__(self, ns, **kw):
        super().__init__(**kw)
        self.ns = ns

    def new_nodefs(self, config, **kw):
        return NetnsNodefs(self.ns, config, **kw)

    def clean_engines(self):
        if self.tmp and os.path.isdir(self.lxcpath):
            for name in os.listdir(self.lxcpath):
                if os.path.isdir(os.path.join(self.lxcpath, name)):
                    in_netns(self.ns, "lxc-stop", "-P", self.lxcpath, "-n", name, "-k",
                             timeout=30)
                    in_netns(self.ns, "lxc-destroy", "-P", self.lxcpath, "-n", name, "-f",
                             timeout=60)


class Service(unittest.TestCase):

    def test_on_failure_max_kill9_wait_once(self):
        # restart=on-failure:3 of a command that fails: restarted 3 times
        # with growing waits, the count and the waits go on across a kill -9
        # of nodefs, then EXITED with exit_code=1 and one wait answer
        nt.requires("mount", "docker")
        with SlowResetEnv() as env:
            n = env.name("flaky")
            ev = EventReader(env.fs.path("events"))
            env.run(n, "runtime=docker image=%s restart=on-failure:3 "
                       "cmd='sh -c \"sleep 0.3; exit 1\"'" % IMAGE)
            self.assertTrue(nt.wait_until(lambda: int(restarts(env, n)["count"]) >= 1,
                                          nt.scaled(15)), env.cread(n, "restarts"))
            ev.read_until(lambda e: "restart 1 of 3" in (e.get("message") or ""), 5)
            waits = waits_of(ev.seen)
            ev.close()
            # a crash between two restarts
            env.fs.kill9()
            env.fs.start()
            ev = EventReader(env.fs.path("events"))
            w = env.start_wait_reader(n)
            w.join(nt.scaled(30))
            self.assertFalse(w.is_alive(), "wait did not answer")
            self.assertEqual(w.result.strip(), "exit_code=1 oom_killed=0")
            r = restarts(env, n)
            self.assertEqual(r["count"], "3", env.cread(n, "restarts"))
            self.assertEqual(r["policy"], "on-failure:3")
            self.assertIn("exit_code=1", r["last_exit"])
            self.assertTrue(r["next"].startswith("none"), r["next"])
            self.assertEqual(env.state(n), "EXITED")
            self.assertEqual(env.cread(n, "exit_code").strip(), "1")
            ev.read_until(lambda e: e.get("name") == n and "final" in (e.get("message") or ""),
                          2)
            waits += waits_of(ev.seen)
            # each wait at least the one before (retry_backoff 50ms
            # doubling: the jitter windows [25,50], [50,100], [100,200])
            waits = sorted(set(waits))
            self.assertGreaterEqual(len(waits), 2, waits)
            for (a, da), (b, db) in zip(waits, waits[1:]):
                if b == a + 1:
                    self.assertGreaterEqual(db, da, waits)
            prom = env.read("metrics", "nodefs.prom")
            self.assertIn('nodefs_container_restarts_total{container="%s"} 3' % n, prom)
            self.assertEqual(r["total"], "3")
            # the engine's own policy stayed off: every restart was nodefs's
            ins = ctest.docker("inspect", "-f", "[{{.HostConfig.RestartPolicy.Name}}] "
                               "{{.RestartCount}}", env.engine(n)).stdout.split()
            self.assertIn(ins, (["[]", "0"], ["[no]", "0"]))
            # a stop between restarts ends the policy; start starts it over
            env.must("containers/%s/ctl" % n, "start")
            self.assertTrue(nt.wait_until(lambda: restarts(env, n)["next"].startswith("20"),
                                          nt.scaled(10)), env.cread(n, "restarts"))
            env.cctl(n, "stop")
            self.assertIn("stopped by the user", restarts(env, n)["next"])
            c = restarts(env, n)["total"]
            self.assertGreaterEqual(int(c), 4)
            time.sleep(0.5)
            self.assertEqual(restarts(env, n)["total"], c)
            self.assertEqual(env.state(n), "EXITED")
            ev.close()

    def test_bad_input_makes_nothing(self):
        nt.requires("mount", "docker")
        with ctest.Env() as env:
            bad = [
                ("port=127.0.0.1:70000:80", "EINVAL", "HOSTPORT"),
                ("port=8080:80 port=8080:81", "EINVAL", "bound twice"),
                ("restart=on-failure:x", "EINVAL", "MAX is not a number"),
                ("health='http 80 /'", "EINVAL", "not published or exposed"),
                ("network=nodefs-no-such-net", "EINVAL", "nodefs-no-such-net"),
                ("ip=10.0.0.1/24", "ENOTSUP", "ip"),
            ]
            for i, (opts, err, word) in enumerate(bad):
                n = env.name("bad%d" % i)
                ok, e = env.ctl("containers/ctl", "create %s runtime=docker image=%s %s"
                                % (n, IMAGE, opts))
                self.assertFalse(ok, opts)
                self.assertEqual(e, err, opts)
                self.assertIn(word, env.read("containers", "error"), opts)
                self.assertNotIn(n, env.containers(), opts)
                self.assertEqual(ctest.docker_names(n), [], opts)
            if ctest.lxc_why_not() is None:
                ok, e = env.ctl("containers/ctl", "create %s runtime=lxc port=0:80"
                                % env.name("lxcport"))
                self.assertEqual((ok, e), (False, "ENOTSUP"))
                ok, e = env.ctl("containers/ctl", "create %s runtime=lxc network=veth:br0 "
                                "ip=10.0.0.300/24" % env.name("lxcip"))
                self.assertEqual((ok, e), (False, "EINVAL"))
            self.assertEqual(env.containers(), [])

    def test_port_and_health_in_netns(self):
        # busybox httpd published on 127.0.0.1:0:80 by the dockerd inside
        # the run's network namespace: reached there at the chosen port;
        # nodefs's http check follows httpd; the engine's own cmd check
        # with health_restart=yes restarts an unhealthy container
        nt.requires("mount", "docker")
        if not NETNS_HOST or not NETNS:
            nt.skip("no dockerd in a network namespace (tests/fixtures/dockerd-netns.sh)")
        with ctest.Env(docker_host=NETNS_HOST) as env:
            web = env.name("web")
            env.run(web, "runtime=docker image=%s port=127.0.0.1:0:80 cmd='%s' "
                         "health='http 80 /index.html' health_interval=200ms "
                         "health_retries=2 health_timeout=1s" % (IMAGE, HTTPD_LOOP))
            ports = env.cread(web, "ports")
            m = re.match(r"^80/tcp 127\.0\.0\.1:(\d+)\n$", ports)
            self.assertTrue(m, ports)
            url = "http://127.0.0.1:%s/index.html" % m.group(1)
            served = nt.wait_until(lambda: get(NETNS, url) == "hello\n", 10)
            self.assertTrue(served, "" if served else served_why(env, web, url))
            # not reachable from the host's namespace: the port is the
            # namespace's
            self.assertIsNone(get_host(url))
            self.assertTrue(nt.wait_until(lambda: health(env, web)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(web, "health"))
            ev = EventReader(env.fs.path("events"))
            env.cctl(web, "exec 'sh -c \"touch /tmp/down; killall httpd\"'")
            got = ev.read_until(lambda e: e.get("kind") == "health" and e.get("name") == web
                                and e.get("new") == "unhealthy", 10)
            self.assertIsNotNone(got, env.cread(web, "health"))
            h = health(env, web)
            self.assertEqual(h["state"], "unhealthy")
            self.assertGreaterEqual(int(h["failing_streak"]), 2)
            self.assertIn("connect", h["output"])
            self.assertIn('nodefs_container_health{container="%s",state="unhealthy"} 1' % web,
                          env.read("metrics", "nodefs.prom"))
            env.cctl(web, "exec 'rm /tmp/down'")
            got = ev.read_until(lambda e: e.get("kind") == "health" and e.get("name") == web
                                and e.get("new") == "healthy", 10)
            self.assertIsNotNone(got, env.cread(web, "health"))
            self.assertIn("200", health(env, web)["output"])
            self.assertEqual(env.state(web), "RUNNING")	# no health_restart
            # the engine's own check, and health_restart=yes
            svc = env.name("svc")
            env.run(svc, "runtime=docker image=%s port=127.0.0.1:0:80 restart=on-failure "
                         "health='cmd sh -c \"wget -q -O /dev/null http://127.0.0.1/index.html\"' "
                         "health_interval=300ms health_retries=2 health_restart=yes "
                         "cmd='sh -c \"mkdir -p /www && echo hi > /www/index.html && "
                         "httpd -p 80 -h /www; sleep 600\"'" % IMAGE)
            self.assertTrue(nt.wait_until(lambda: health(env, svc)["state"] == "healthy",
                                          nt.scaled(15)), env.cread(svc, "health"))
            st = ctest.docker("inspect", "-f", "{{.State.Health.Status}}", env.engine(svc),
                              host=NETNS_HOST).stdout.strip()
            self.assertEqual(st, "healthy")
            self.assertTrue(nt.wait_until(lambda: health(env, svc)["failing_streak"] == "0",
                                          nt.scaled(5)), env.cread(svc, "health"))
            env.cctl(svc, "exec 'killall httpd'")
            self.assertTrue(nt.wait_until(lambda: int(restarts(env, svc)["count"]) >= 1,
                                          nt.scaled(20)), env.cread(svc, "restarts"))
            self.assertIn("unhealthy=1", restarts(env, svc)["last_exit"])
            # the new run serves again
            self.assertTrue(nt.wait_until(lambda: health(env, svc)["state"] == "healthy",
                                          nt.scaled(15)), env.cread(svc, "health"))
            ev.close()

    def test_always_unless_stopped_networks_kill9(self):
        # On the dockerd inside the run's network namespace, one nodefs:
        # - restart=always restarts an exit 0; the new run's port (HOSTPORT
        #   0) shows in ports and answers inside the namespace;
        # - network=host is the namespace the test made, and health='tcp
        #   PORT' is healthy while the port answers, unhealthy once the
        #   listener is gone, healthy when it is back;
        # - network=none has no interface but lo;
        # - restart=unless-stopped: a user's stop ends it; after a kill -9
        #   of nodefs, the one that died meanwhile without a user's stop
        #   comes back, the stopped one stays down;
        # - ports is served from what nodefs kept: after the restart it
        #   shows the same binding with the engine stopped (SIGSTOP), and
        #   the read returns (it never waits on the engine).
        nt.requires("mount", "docker")
        if not NETNS_HOST or not NETNS:
            nt.skip("no dockerd in a network namespace (tests/fixtures/dockerd-netns.sh)")
        port = 20000 + os.getpid() % 10000
        with ctest.Env(docker_host=NETNS_HOST) as env:
            a, h, n = env.name("always"), env.name("hostnet"), env.name("none")
            env.run(a, "runtime=docker image=%s restart=always port=127.0.0.1:0:80 cmd='%s'"
                    % (IMAGE, ONCE_THEN_HTTPD))
            env.run(h, "runtime=docker image=%s network=host restart=unless-stopped "
                       "health='tcp %d' health_interval=200ms health_retries=1 "
                       "health_timeout=1s cmd='%s'"
                    % (IMAGE, port, HTTPD_LOOP.replace("-p 80", "-p %d" % port)))
            env.run(n, "runtime=docker image=%s network=none restart=unless-stopped "
                       "cmd='sh -c \"trap exit TERM; while :; do sleep 0.1; done\"'" % IMAGE)
            # always: the exit 0 was restarted, and the new run's binding shows
            self.assertTrue(nt.wait_until(lambda: restarts(env, a)["count"] == "1" and
                                          env.state(a) == "RUNNING", nt.scaled(15)),
                            env.cread(a, "restarts"))
            self.assertIn("exit_code=0", restarts(env, a)["last_exit"])
            pat = r"^80/tcp 127\.0\.0\.1:([1-9]\d*)\n$"
            self.assertTrue(nt.wait_until(lambda: re.match(pat, env.cread(a, "ports")),
                                          nt.scaled(5)), env.cread(a, "ports"))
            ports = env.cread(a, "ports")
            url = "http://127.0.0.1:%s/index.html" % re.match(pat, ports).group(1)
            self.assertTrue(nt.wait_until(lambda: get(NETNS, url) == "hello\n", 10))
            # host: the test's namespace, seen from inside
            out, _, code = env.exec_fd(h, "readlink /proc/self/ns/net")
            self.assertEqual(code, "0", out)
            self.assertEqual(out.splitlines()[0], "net:[%d]" % os.stat("/run/netns/" + NETNS).st_ino)
            self.assertTrue(nt.wait_until(lambda: health(env, h)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(h, "health"))
            self.assertIn("accepts connections", health(env, h)["output"])
            env.cctl(h, "exec 'sh -c \"touch /tmp/down; killall httpd\"'")
            self.assertTrue(nt.wait_until(lambda: health(env, h)["state"] == "unhealthy",
                                          nt.scaled(10)), env.cread(h, "health"))
            self.assertIn("connect to port %d" % port, health(env, h)["output"])
            env.cctl(h, "exec 'rm /tmp/down'")
            self.assertTrue(nt.wait_until(lambda: health(env, h)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(h, "health"))
            # none: loopback only
            out, _, code = env.exec_fd(n, "cat /proc/net/dev")
            self.assertEqual(code, "0", out)
            ifaces = [l.split(":")[0].strip() for l in out.splitlines() if ":" in l]
            self.assertEqual(ifaces, ["lo"], out)
            # unless-stopped: the user's stop ends it
            env.cctl(n, "stop")
            self.assertIn("stopped by the user", restarts(env, n)["next"])
            # a crash of nodefs; meanwhile hostnet dies
            env.fs.kill9()
            ctest.docker("kill", env.engine(h), host=NETNS_HOST, check=True)
            self.assertTrue(nt.wait_until(lambda: ctest.docker(
                "inspect", "-f", "{{.State.Running}}", env.engine(h),
                host=NETNS_HOST).stdout.strip() == "false", nt.scaled(10)))
            env.fs.start()
            self.assertTrue(nt.wait_until(lambda: env.state(h) == "RUNNING" and
                                          restarts(env, h)["count"] == "1", nt.scaled(15)),
                            env.cread(h, "restarts"))
            self.assertEqual(env.state(n), "EXITED")
            self.assertIn("stopped by the user", restarts(env, n)["next"])
            self.assertEqual((env.state(a), restarts(env, a)["count"]), ("RUNNING", "1"))
            # ports without the engine: stopped, the read still answers
            self.assertEqual(env.cread(a, "ports"), ports)
            with open(os.path.join(NETNS_HOST[len("unix://"):].rsplit("/", 1)[0],
                                   "docker.pid")) as f:
                dpid = int(f.read())
            got = {}
            os.kill(dpid, signal.SIGSTOP)
            try:
                t = threading.Thread(target=lambda: got.update(p=env.cread(a, "ports")),
                                     daemon=True)
                t.start()
                t.join(nt.scaled(5))
                self.assertFalse(t.is_alive(), "a read of ports waited on the engine")
            finally:
                os.kill(dpid, signal.SIGCONT)
            self.assertEqual(got.get("p"), ports)
            t.join()

    def test_lxc_network_health_restart(self):
        # LXC: network=none is a namespace of its own with only loopback;
        # nodefs's http check reaches httpd there (setns on a worker) and
        # follows it; restart=on-failure:2 through the same policy code
        nt.requires("mount", "lxc")
        with ctest.Env() as env:
            n = env.name("web")
            try_run(self, env, n, "runtime=lxc network=none health='http 80 /index.html' "
                    "health_interval=200ms health_retries=2 cmd='%s'" % HTTPD_LOOP)
            self.assertTrue(nt.wait_until(lambda: health(env, n)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(n, "health"))
            # its own namespace: no interface but loopback
            out, _, code = env.exec_fd(n, "cat /proc/net/dev")
            self.assertEqual(code, "0")
            ifaces = [l.split(":")[0].strip() for l in out.splitlines() if ":" in l]
            self.assertEqual(ifaces, ["lo"], out)
            self.assertEqual(env.cread(n, "ports"), "")
            env.cctl(n, "exec 'sh -c \"touch /tmp/down; killall httpd\"'")
            self.assertTrue(nt.wait_until(lambda: health(env, n)["state"] == "unhealthy",
                                          nt.scaled(10)), env.cread(n, "health"))
            env.cctl(n, "exec 'rm /tmp/down'")
            self.assertTrue(nt.wait_until(lambda: health(env, n)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(n, "health"))
            env.cctl(n, "kill")
            # an LXC cmd check runs through the driver's exec; with
            # health_restart=yes an unhealthy container is killed and its
            # policy restarts it (its cmd makes /tmp/ok again)
            k = env.name("cmd")
            ev = EventReader(env.fs.path("events"))
            try_run(self, env, k, "runtime=lxc network=none health='cmd test -e /tmp/ok' "
                    "health_interval=100ms health_retries=1 health_restart=yes "
                    "restart=on-failure cmd='sh -c \"touch /tmp/ok; exec sleep 600\"'")
            self.assertTrue(nt.wait_until(lambda: health(env, k)["state"] == "healthy",
                                          nt.scaled(10)), env.cread(k, "health"))
            self.assertTrue(health(env, k)["output"].startswith("exit_code=0"))
            env.cctl(k, "exec 'rm /tmp/ok'")
            got = ev.read_until(lambda e: e.get("kind") == "health" and e.get("name") == k
                                and e.get("new") == "unhealthy", 10)
            self.assertIsNotNone(got, env.cread(k, "health"))
            self.assertIn("exit_code=1", got.get("message") or "")
            self.assertTrue(nt.wait_until(lambda: restarts(env, k)["count"] == "1" and
                                          health(env, k)["state"] == "healthy",
                                          nt.scaled(15)), env.cread(k, "restarts"))
            self.assertIn("unhealthy=1", restarts(env, k)["last_exit"])
            self.assertEqual(env.state(k), "RUNNING")
            ev.close()
            env.cctl(k, "kill")
            f = env.name("flaky")
            try_run(self, env, f, "runtime=lxc network=none restart=on-failure:2 "
                    "cmd='sh -c \"sleep 0.2; exit 3\"'")
            w = env.start_wait_reader(f)
            w.join(nt.scaled(30))
            self.assertFalse(w.is_alive(), env.cread(f, "restarts"))
            self.assertEqual(w.result.strip(), "exit_code=3 oom_killed=0")
            r = restarts(env, f)
            self.assertEqual((r["count"], r["total"]), ("2", "2"), env.cread(f, "restarts"))
            self.assertEqual(env.state(f), "EXITED")

    def test_lxc_veth_bridge_in_netns(self):
        # network=veth:BRIDGE ip= gateway=: a bridge made in a network
        # namespace of the test's, nodefs running there; busybox httpd
        # answers at the ip= inside that namespace, and the veth goes with
        # the container. No traffic leaves the namespace.
        nt.requires("mount", "lxc")
        for tool in ("ip", "nsenter", "unshare", "curl"):
            if not shutil.which(tool):
                nt.skip("no %s" % tool)
        ns = "nodefs-lxcnet-%d" % os.getpid()
        br, ip, gw = "nbr0", "10.77.33.2", "10.77.33.1"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            for cmd in (["link", "set", "lo", "up"],
                        ["link", "add", br, "type", "bridge"],
                        ["addr", "add", gw + "/24", "dev", br],
                        ["link", "set", br, "up"]):
                subprocess.run(["ip", "-n", ns] + cmd, check=True)
            with NetnsEnv(ns) as env:
                n = env.name("veth")
                try_run(self, env, n, "runtime=lxc network=veth:%s ip=%s/24 gateway=%s "
                        "cmd='%s'" % (br, ip, gw, HTTPD_LOOP))
                url = "http://%s/index.html" % ip
                self.assertTrue(nt.wait_until(lambda: get(ns, url) == "hello\n",
                                              nt.scaled(10)), env.cread(n, "state"))
                # what liblxc was given
                with open(os.path.join(env.lxcpath, env.engine(n), "config")) as f:
                    conf = f.read()
                for line in ("lxc.net.0.type = veth", "lxc.net.0.link = %s" % br,
                             "lxc.net.0.ipv4.address = %s/24" % ip,
                             "lxc.net.0.ipv4.gateway = %s" % gw):
                    self.assertIn(line + "\n", conf)
                # inside: the address on its one veth, the default route
                # through the gateway
                out, _, code = env.exec_fd(n, "ip -4 addr")
                self.assertEqual(code, "0", out)
                self.assertIn("inet %s/24" % ip, out)
                out, _, code = env.exec_fd(n, "ip route")
                self.assertIn("default via %s" % gw, out)
                # the host end of the veth is on the bridge, in the
                # namespace; nothing of it in the test's
                ports = in_netns(ns, "ip", "-o", "link", "show", "master", br).stdout
                self.assertEqual(len(ports.splitlines()), 1, ports)
                self.assertFalse(os.path.exists("/sys/class/net/" + br))
                env.cctl(n, "kill")
                env.wait_state(n, "EXITED", nt.scaled(10))
                self.assertTrue(nt.wait_until(lambda: in_netns(
                    ns, "ip", "-o", "link", "show", "master", br).stdout == "",
                    nt.scaled(5)), "the veth outlived its container")
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def try_run(tc, env, n, opts):
    """env.run, and on failure the container's liblxc log in the message."""
    try:
        env.run(n, opts)
    except AssertionError as e:
        d = os.path.join(env.lxcpath, env.engine(n))
        logs = ""
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".log"):
                with open(os.path.join(d, f), errors="replace") as fh:
                    logs += "--- %s\n%s" % (f, fh.read()[-3000:])
        raise AssertionError("%s\n%s" % (e, logs))


def get_host(url):
    r = subprocess.run(["curl", "-s", "--max-time", "1", url], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


if __name__ == "__main__":
    ctest.main(docker_needed=True)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""Plugins nodefs starts and supervises ([plugin] command =, `add ...
command=`), through a real mount, with the real test plugin as the command.

What it proves: nodefs starts the plugin (CSI_ENDPOINT set; the plugin is
given no --endpoint) and it serves volumes; kill -9 of the plugin in the
middle of a publish: nodefs starts it again and the publish completes
through the CSI retries, process/metrics/events count one termination and
one restart; kill -9 of nodefs and a restart: the plugin it started is
adopted (the same pid, one process, not two); a plugin that stops
answering Probe (SIGSTOP) is killed and started again; a command that
cannot be executed: nodefs still mounts, health says DOWN with the exec
error, it keeps trying with backoff and logs at most one line per 10 s; a
plugin added at run time with command= is back after a restart with its
volume, and removing it ends its process and drops its record; at a stop
nodefs ends its plugins (SIGTERM) unless keep_running = yes, and a kept one
is adopted by the next start; a stop logs no failure of a plugin and
restarts none, even when the plugin got the SIGTERM too (a service
manager's group kill).
"""

import os
import shutil
import signal
import tempfile
import time
import unittest

import nodefs_test as nt
import voltest as vt


def config(tmp, command_extra="", keep="", extra_plugin="", csi_timeout="10s",
           backoff="300ms", retry_max="3s"):
    return """[nodefs]
allowed_targets = {tmp}/pub
csi_timeout = {csi_timeout}
retry_backoff = {backoff}
retry_max = {retry_max}
reconcile_interval = 0

[plugin hp]
endpoint = unix://{tmp}/csi.sock
command = /usr/bin/python3 {py} --base {tmp}/base {extra}
{keep}
default = yes
{extra_plugin}
""".format(tmp=tmp, py=vt.PLUGIN_PY, extra=command_extra, keep=keep,
           extra_plugin=extra_plugin.format(tmp=tmp), csi_timeout=csi_timeout, backoff=backoff,
           retry_max=retry_max)


class SupEnv:
    """A temp dir (pub/, base/, state/) and a nodefs whose config starts the
    test plugin. Leaving ends nodefs, then every process still running with
    this env's base dir on its command line (a keep_running plugin, or one
    a failed test left), and unmounts what is left."""

    def __init__(self, **kw):
        self.kw = kw
        self.tmp = None
        self.fs = None

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-sup-")
        try:
            os.chmod(self.tmp, 0o755)
            for d in ("pub", "base"):
                os.mkdir(os.path.join(self.tmp, d))
            self.base = os.path.join(self.tmp, "base")
            self.state_dir = os.path.join(self.tmp, "state")
            self.fs = nt.Nodefs(config(self.tmp, **self.kw), state_dir=self.state_dir)
            self.fs.__enter__()
        except BaseException:
            self._teardown()
            raise
        return self

    def _teardown(self):
        problems = []
        try:
            problems, self.final_log = nt.end_daemon(self.fs)
        finally:
            for arg in (self.base, os.path.join(self.tmp, "base2")):
                for pid in nt.find_pids_with_arg(arg):
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            nt.wait_until(lambda: not nt.find_pids_with_arg(self.base), 5)
            nt.remove_tree(self.tmp)
        return problems

    def __exit__(self, exc_type, exc, tb):
        problems = self._teardown()
        if problems and exc_type is None:
            raise nt.DaemonError("; ".join(problems) + "\nlog:\n" + self.final_log)
        return False

    # ---- helpers -------------------------------------------------------
    def process(self, name="hp"):
        return nt.parse_kv(self.fs.read("plugins", name, "process"))

    def health(self, name="hp"):
        return self.fs.read("plugins", name, "health")

    def wait_ready(self, name="hp", timeout=40):
        # the supervisor's own first Probe answered too: until then a hung
        # plugin is one that has not started (60 s), not one that stopped
        # answering
        ok = nt.wait_until(lambda: self.health(name).startswith("READY")
                           and self.process(name)["pid"] != "none"
                           and self.process(name)["supervision"] == "up", timeout, 0.1)
        if not ok:
            raise AssertionError("plugin %s not READY: %r %r\nlog:\n%s\nplugin log:\n%s" % (
                name, self.health(name), self.process(name), self.fs.log(),
                self.fs.read("plugins", name, "log")))

    def pids(self, arg=None):
        return nt.find_pids_with_arg(arg or self.base)

    def ctl(self, rel, line, flags=0):
        ok, err = self.fs.write_ctl(rel, line, flags)
        return ok, nt.errname(err)

    def metric(self, name, plugin="hp"):
        want = '%s{plugin="%s"} ' % (name, plugin)
        for line in self.fs.read("metrics", "nodefs.prom").splitlines():
            if line.startswith(want):
                return int(float(line.rsplit(" ", 1)[1]))
        return None

    def target(self, name):
        return os.path.join(self.tmp, "pub", name)


def _pgid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[2]) if fields[0] != "Z" else None
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid):
    return _pgid(pid) is not None


class SuperviseTest(unittest.TestCase):
    def test_started_and_restarted_mid_publish(self):
        with SupEnv(command_extra="--delay NodePublishVolume=2") as env:
            env.wait_ready()
            proc = env.process()
            self.assertEqual(proc["restarts"], "0")
            self.assertEqual(proc["adopted"], "no")
            pid = int(proc["pid"])
            self.assertEqual(env.pids(), [pid])
            self.assertEqual(os.getpgid(pid), pid, "its own process group")
            with open("/proc/%d/environ" % pid, "rb") as f:
                envs = f.read().split(b"\0")
            self.assertIn(("CSI_ENDPOINT=unix://%s/csi.sock" % env.tmp).encode(), envs)
            self.assertEqual(env.metric("nodefs_csi_plugin_terminations_total"), 0)
            self.assertEqual(env.metric("nodefs_csi_plugin_restarts_total"), 0)
            self.assertEqual(env.ctl("volumes/ctl", "create db size=8M"), (True, "OK"))
            evfd = os.open(env.fs.path("events"), os.O_RDONLY | os.O_NONBLOCK)
            self.addCleanup(os.close, evfd)
            tgt = env.target("db")
            fd = os.open(env.fs.path("volumes", "db", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, ("publish %s\n" % tgt).encode())
                oid = os.pread(fd, 100, 0).decode().strip()
            finally:
                os.close(fd)
            # the plugin is inside NodePublishVolume (2 s): kill it there
            self.assertTrue(nt.wait_until(
                lambda: env.fs.read("volumes", "db", "state").strip() == "NODE_PUBLISH", 20))
            time.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(nt.wait_until(
                lambda: env.fs.read("operations", oid, "state").strip() != "PENDING", 60),
                env.fs.read("operations", oid, "state"))
            self.assertEqual(env.fs.read("operations", oid, "state").strip(), "FINISHED",
                             env.fs.read("operations", oid, "error"))
            self.assertGreater(int(env.fs.read("operations", oid, "attempts")), 1)
            self.assertEqual(env.fs.read("volumes", "db", "state").strip(), "PUBLISHED")
            self.assertTrue(nt.is_mounted(tgt))
            proc = env.process()
            self.assertEqual(proc["restarts"], "1", proc)
            self.assertEqual(proc["last_exit"], "killed by signal 9 (SIGKILL)")
            self.assertNotEqual(int(proc["pid"]), pid)
            self.assertEqual(env.pids(), [int(proc["pid"])], "one process")
            self.assertEqual(env.metric("nodefs_csi_plugin_terminations_total"), 1)
            self.assertEqual(env.metric("nodefs_csi_plugin_restarts_total"), 1)
            ev = vt.events_until(
                evfd, lambda e: e.get("kind") == "plugin" and e.get("name") == "hp",
                lambda kept: {"exited", "restarted"} <= {e.get("new") for e in kept})
            news = [e["new"] for e in ev]
            self.assertIn("exited", news)
            self.assertIn("restarted", news)
            self.assertEqual([e["message"] for e in ev if e["new"] == "exited"],
                             ["killed by signal 9 (SIGKILL)"])
            self.assertEqual(env.ctl("volumes/db/ctl", "unpublish"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "destroy"), (True, "OK"))
            # the daemon's stop ends the plugin (SIGTERM)
            last = int(proc["pid"])
            self.assertEqual(env.fs.stop(), [])
            self.assertTrue(nt.wait_until(lambda: not env.pids(), 10), env.pids())
            self.assertFalse(os.path.exists("/proc/%d" % last))

    def test_kill9_of_nodefs_adopts_the_plugin(self):
        with SupEnv() as env:
            env.wait_ready()
            pid = int(env.process()["pid"])
            self.assertEqual(env.ctl("volumes/ctl", "create a size=8M"), (True, "OK"))
            env.fs.kill9()
            self.assertEqual(env.pids(), [pid], "the plugin outlives nodefs")
            env.fs.start()
            env.wait_ready()
            proc = env.process()
            self.assertEqual((proc["pid"], proc["adopted"]), (str(pid), "yes"), proc)
            self.assertEqual(env.pids(), [pid], "one plugin, not two")
            tgt = env.target("a")
            self.assertEqual(env.ctl("volumes/a/ctl", "publish " + tgt), (True, "OK"))
            self.assertEqual(env.ctl("volumes/a/ctl", "destroy"), (True, "OK"))
            # an adopted plugin is supervised as well: its exit is seen
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(nt.wait_until(
                lambda: env.process()["pid"] not in ("none", str(pid)), 30), env.process())
            self.assertIn("status unknown", env.process()["last_exit"])
            env.wait_ready()
            self.assertEqual(len(env.pids()), 1, env.pids())

    def test_kill9_of_nodefs_with_a_hung_plugin_ends_it(self):
        with SupEnv(csi_timeout="1s") as env:
            env.wait_ready()
            pid = int(env.process()["pid"])
            env.fs.kill9()
            os.kill(pid, signal.SIGSTOP)
            env.fs.start()
            # it does not answer: ended before another is started
            self.assertTrue(nt.wait_until(
                lambda: env.process()["pid"] not in ("none", str(pid)), 40), env.process())
            env.wait_ready()
            self.assertFalse(os.path.exists("/proc/%d/stat" % pid)
                             and open("/proc/%d/stat" % pid).read().split()[2] != "Z")
            self.assertEqual(len(env.pids()), 1, env.pids())

    def test_a_plugin_that_stops_answering_is_restarted(self):
        with SupEnv(csi_timeout="1s") as env:
            env.wait_ready()
            pid = int(env.process()["pid"])
            os.kill(pid, signal.SIGSTOP)
            self.assertTrue(nt.wait_until(
                lambda: env.process()["pid"] not in ("none", str(pid)), 30), env.process())
            env.wait_ready()
            self.assertIn("stopped answering Probe", env.fs.log())
            self.assertEqual(env.process()["last_exit"], "killed by signal 9 (SIGKILL)")
            self.assertEqual(len(env.pids()), 1)

    def test_log_and_what_is_left_of_the_group(self):
        # a shell that writes to stderr, leaves a child in its group and
        # becomes the plugin
        cmd = ("/bin/sh -c 'echo hello-from-the-plugin >&2; sleep 1000 & "
               "exec /usr/bin/python3 %s --base %s'" % (vt.PLUGIN_PY, "{tmp}/base"))
        tmp = tempfile.mkdtemp(prefix="nodefs-sup-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        os.mkdir(os.path.join(tmp, "base"))
        os.mkdir(os.path.join(tmp, "pub"))
        text = config(tmp).replace(
            "command = /usr/bin/python3 %s --base %s/base " % (vt.PLUGIN_PY, tmp),
            "command = " + cmd.format(tmp=tmp))
        with nt.Nodefs(text) as fs:
            def proc():
                return nt.parse_kv(fs.read("plugins", "hp", "process"))
            self.assertTrue(nt.wait_until(
                lambda: fs.read("plugins", "hp", "health").startswith("READY"), 40),
                fs.read("plugins", "hp", "health"))
            self.assertIn("hello-from-the-plugin\n", fs.read("plugins", "hp", "log"))
            pid = int(proc()["pid"])
            group = [int(d) for d in os.listdir("/proc") if d.isdigit()
                     and _pgid(int(d)) == pid]
            self.assertGreaterEqual(len(group), 2, "the plugin and its sleep")
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(nt.wait_until(
                lambda: all(not _alive(p) for p in group), 10), group)
            self.assertTrue(nt.wait_until(
                lambda: proc()["pid"] not in ("none", str(pid)), 30), proc())
            self.assertTrue(nt.wait_until(
                lambda: fs.read("plugins", "hp", "log").count("hello-from-the-plugin") == 2, 10))
            newpid = int(proc()["pid"])
        # the stop ended the new one and its group
        self.assertTrue(nt.wait_until(lambda: not _alive(newpid), 10))
        for d in os.listdir("/proc"):
            if d.isdigit() and _pgid(int(d)) == newpid:
                os.kill(int(d), signal.SIGKILL)
                self.fail("left in the plugin's group: %s" % d)

    def test_a_command_that_cannot_start(self):
        extra = """
[plugin broken]
endpoint = unix://{tmp}/broken/broken.sock
command = /nonexistent/nodefs-plugin --flag
"""
        with SupEnv(extra_plugin=extra, backoff="50ms", retry_max="200ms") as env:
            self.assertIn(env.fs.status()["state"], ("READY", "RECOVERING"))
            self.assertTrue(nt.wait_until(
                lambda: int(env.process("broken")["restarts"]) >= 5, 20), env.process("broken"))
            h = env.health("broken")
            self.assertRegex(h, r"^DOWN since \S+Z: cannot execute '/nonexistent/nodefs-plugin': "
                                r"No such file or directory; next try in \d+ ms\n$")
            self.assertEqual(env.process("broken")["pid"], "none")
            self.assertEqual(env.metric("nodefs_csi_plugin_terminations_total", "broken"), 0)
            self.assertGreaterEqual(env.metric("nodefs_csi_plugin_restarts_total", "broken"), 5)
            # a crash loop does not flood the log: one line per 10 s at most
            time.sleep(1)
            n = sum(1 for l in env.fs.log().splitlines()
                    if "plugin broken" in l and "cannot execute" in l)
            self.assertLessEqual(n, 2, env.fs.log())
            # the other plugin is not held up
            env.wait_ready()
            self.assertEqual(env.ctl("volumes/ctl", "create v size=1M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/v/ctl", "destroy"), (True, "OK"))

    def test_added_at_run_time_survives_a_restart(self):
        with SupEnv() as env:
            env.wait_ready()
            base2 = os.path.join(env.tmp, "base2")
            os.mkdir(base2)
            line = ("add px unix://%s/px.sock command='/usr/bin/python3 %s --base %s'"
                    % (env.tmp, vt.PLUGIN_PY, base2))
            self.assertEqual(env.ctl("plugins/ctl", line), (True, "OK"), env.fs.error("plugins"))
            env.wait_ready("px")
            self.assertEqual(env.ctl("volumes/ctl", "create pv size=4M plugin=px"), (True, "OK"),
                             env.fs.error("volumes"))
            self.assertEqual(env.ctl("plugins/ctl", "add bad unix:///x.sock command="),
                             (False, "EINVAL"))
            self.assertEqual(env.ctl("plugins/ctl", "add bad unix:///x.sock keep_running=yes"),
                             (False, "EINVAL"))
            self.assertNotIn("bad", env.fs.listdir("plugins"))
            env.fs.restart()
            self.assertIn("px", env.fs.listdir("plugins"))
            env.wait_ready("px")
            self.assertEqual(len(env.pids(base2)), 1)
            self.assertEqual(env.fs.read("volumes", "pv", "plugin").strip(), "px")
            tgt = env.target("pv")
            self.assertEqual(env.ctl("volumes/pv/ctl", "publish " + tgt), (True, "OK"))
            self.assertEqual(env.ctl("plugins/ctl", "remove px"), (False, "EBUSY"))
            self.assertEqual(env.ctl("volumes/pv/ctl", "destroy"), (True, "OK"))
            pid = int(env.process("px")["pid"])
            self.assertEqual(env.ctl("plugins/ctl", "remove px"), (True, "OK"))
            self.assertTrue(nt.wait_until(lambda: not env.pids(base2), 10))
            self.assertTrue(nt.wait_until(
                lambda: not os.path.exists(os.path.join(env.state_dir, "plugins", "px.json")), 5))
            self.assertFalse(os.path.exists("/proc/%d" % pid))
            env.fs.restart()
            self.assertNotIn("px", env.fs.listdir("plugins"))

    def test_never_a_second_copy_on_a_served_socket(self):
        tmp = tempfile.mkdtemp(prefix="nodefs-sup-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        os.mkdir(os.path.join(tmp, "pub"))
        other = vt.Plugin(tmp)          # tmp/csi.sock, tmp/base: not nodefs's
        other.start()
        self.addCleanup(other.stop)
        with nt.Nodefs(config(tmp, backoff="100ms", retry_max="300ms")) as fs:
            # (health is READY: the other process answers on the socket)
            self.assertTrue(nt.wait_until(
                lambda: "second copy" in fs.read("plugins", "hp", "process"), 20),
                fs.read("plugins", "hp", "process"))
            self.assertIn("served by pid %d" % other.proc.pid,
                          fs.read("plugins", "hp", "process"))
            self.assertEqual(nt.find_pids_with_arg(other.base), [other.proc.pid])
            other.stop()
            # once the socket is free (stale), nodefs starts its own (health
            # may still say READY from the other one until a probe fails:
            # wait for a process of nodefs's own that answers)
            own = lambda: nt.parse_kv(fs.read("plugins", "hp", "process"))["pid"] != "none"
            self.assertTrue(nt.wait_until(
                lambda: own() and fs.read("plugins", "hp", "health").startswith("READY"), 40),
                fs.read("plugins", "hp", "process") + fs.read("plugins", "hp", "health"))
            mine = nt.parse_kv(fs.read("plugins", "hp", "process"))["pid"]
            self.assertEqual(nt.find_pids_with_arg(other.base), [int(mine)])

    def test_keep_running(self):
        with SupEnv(keep="keep_running = yes") as env:
            env.wait_ready()
            pid = int(env.process()["pid"])
            self.assertEqual(env.process()["keep_running"], "yes")
            self.assertEqual(env.fs.stop(), [])
            self.assertEqual(env.pids(), [pid], "kept running across the stop")
            env.fs.start()
            env.wait_ready()
            self.assertEqual((env.process()["pid"], env.process()["adopted"]), (str(pid), "yes"))
            self.assertEqual(env.pids(), [pid])

    def test_a_stop_logs_no_failure(self):
        # A stop is no failure of the plugin: neither when nodefs ends it,
        # nor when a service manager signals the daemon and the plugin at
        # once (systemd's KillMode=control-group); no warning, no restart.
        for both in (False, True):
            with SupEnv() as env:
                env.wait_ready()
                pid = int(env.process()["pid"])
                if both:
                    os.kill(pid, signal.SIGTERM)
                self.assertEqual(env.fs.stop(), [])
                log = env.fs.log()
                bad = [l for l in log.splitlines()
                       if "plugin hp" in l and ("restart" in l or "warning" in l.lower()
                                                 or l.startswith("<4>"))]
                self.assertEqual(bad, [], log)
                self.assertTrue(nt.wait_until(lambda: not env.pids(), 5),
                                "plugin left running or restarted: %r\n%s" % (env.pids(), log))


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

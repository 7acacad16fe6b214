# SPDX-License-Identifier: LGPL-2.1-or-later
"""LXC containers as files (issue #6), through a real mount on real liblxc:
busybox-template containers in a private lxcpath per test (ctest.Env), with
no network and an unconfined profile (the driver's defaults). Every command
is driven with open/write/read and checked against what the host shows:
lxc-ls / lxc-info, the container's cgroup files (v1 or v2, found through
/proc/PID/cgroup), /proc. Every test's Env kills and destroys whatever is
left in its lxcpath and removes it, on every exit path.
"""

import fcntl
import glob
import json
import os
import signal
import subprocess
import struct
import sys
import threading
import time
import unittest

import nodefs_test as nt
import contract
import ctest
from ctest import lxc


def lrun(env, short, cmd=None, extra=""):
    name = env.name(short)
    opts = "runtime=lxc template=busybox %s" % extra
    if cmd:
        opts += " cmd=%s" % ctest._shq(cmd)
    env.run(name, opts)
    return name


def lxc_ls(env):
    r = lxc("lxc-ls", "-P", env.lxcpath, "-1")
    return sorted(r.stdout.split())


def lxc_state(env, name):
    r = lxc("lxc-info", "-P", env.lxcpath, "-n", name, "-s", "-H")
    return r.stdout.strip()


def cgroup_file(pid, controller, fname):
    """Contents of a cgroup file of pid's cgroup for controller (v1), or of
    its unified cgroup (v2); None when the host has no such file."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    for _, ctrls, path in lines:
        cands = []
        if controller in ctrls.split(","):
            for mnt in ("/sys/fs/cgroup/%s" % controller,
                        "/sys/fs/cgroup/%s" % ctrls):
                cands.append(os.path.join(mnt + path, fname))
        elif ctrls == "":
            cands.append(os.path.join("/sys/fs/cgroup" + path, fname))
            cands.append(os.path.join("/sys/fs/cgroup/unified" + path, fname))
        for c in cands:
            try:
                with open(c) as fh:
                    return fh.read().strip()
            except OSError:
                pass
    return None


def cgroup_mounts():
    with open("/proc/self/mounts") as f:
        return [l.split()[1] for l in f if l.split()[2] in ("cgroup", "cgroup2")]


class Lxc(contract.Contract, unittest.TestCase):
    def start(self, env, short, cmd, extra=""):
        return lrun(env, short, cmd, extra)

    def engine_stopped(self, env, name):
        self.assertEqual(lxc_state(env, env.engine(name)), "STOPPED")

    def stop_more(self, env):
        # a system container (busybox init, no command) halts cleanly
        s = lrun(env, "sys")
        t0 = time.monotonic()
        env.cctl(s, "stop 20")
        self.assertLess(time.monotonic() - t0, nt.scaled(15))
        self.assertEqual(env.state(s), "EXITED")
        self.assertEqual(env.cread(s, "exit_code").strip(), "130")
        self.engine_stopped(env, s)
        ok, err = env.ctl("containers/%s/ctl" % s, "stop")
        self.assertEqual((ok, err), (False, "EINVAL"))

    def logs_more(self, env):
        # a system container's console
        s = lrun(env, "sys")
        self.assertTrue(nt.wait_until(lambda: "activate this console" in
                                      env.cread(s, "logs"), 10), env.cread(s, "logs"))

    def test_run_shows_files_and_host_agrees(self):
        with ctest.Env() as env:
            st = env.read("runtimes", "lxc", "status")
            self.assertTrue(st.startswith("healthy"), st)
            self.assertIn("5.", env.read("runtimes", "lxc", "version"))
            box = lrun(env, "box", extra="memory=64M")
            self.assertEqual(env.state(box), "RUNNING")
            self.assertEqual(lxc_state(env, env.engine(box)), "RUNNING")
            pid = int(env.cread(box, "pid"))
            os.kill(pid, 0)
            self.assertEqual(env.cread(box, "runtime").strip(), "lxc")
            self.assertIn("busybox", env.cread(box, "image"))
            self.assertRegex(env.cread(box, "started_at"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            info = json.loads(env.cread(box, "info.json"))
            self.assertEqual((info["state"], info["runtime"], info["memory"]),
                             ("RUNNING", "lxc", 64 << 20))
            st = env.stats(box)
            self.assertEqual(sorted(st), sorted(ctest.STATS_KEYS))
            self.assertEqual(st["memory_limit_bytes"], 64 << 20)
            self.assertGreater(st["memory_bytes"], 0)
            self.assertGreaterEqual(st["pids"], 1)
            self.assertEqual(lxc_ls(env), [env.engine(box)])
            # the config carries what the tests' host needs, from the
            # runtime's options (no network, unconfined)
            with open(os.path.join(env.lxcpath, env.engine(box), "config")) as f:
                conf = f.read()
            self.assertRegex(conf, r"lxc\.net\.0\.type = none")
            self.assertRegex(conf, r"lxc\.apparmor\.profile = unconfined")
            # create, then start
            c2 = env.name("later")
            env.must("containers/ctl", "create %s runtime=lxc template=busybox" % c2)
            self.assertEqual(env.state(c2), "CREATED")
            self.assertEqual(lxc_state(env, env.engine(c2)), "STOPPED")
            env.cctl(c2, "start")
            self.assertEqual(env.state(c2), "RUNNING")
            self.assertEqual(lxc_state(env, env.engine(c2)), "RUNNING")

    def test_state_is_creating_while_the_template_runs(self):
        """While an LXC template builds the container its state reads
        CREATING (not PULLING: nothing is pulled), and the events say
        CREATING, then CREATED. The template here is the busybox one behind
        a gate the test opens."""
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "observe"))
        from observe import EventReader, state_changes
        with ctest.Env() as env:
            gate = os.path.join(env.tmp, "gate")
            tpl = os.path.join(env.tmp, "lxc-gated")
            with open(tpl, "w") as f:
                f.write("#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\nexec %s \"$@\"\n"
                        % (gate, ctest.lxc_template("busybox")))
            os.chmod(tpl, 0o755)
            ev = EventReader(env.fs.path("events"))
            self.addCleanup(ev.close)
            n = env.name("gated")
            res = {}
            t = threading.Thread(target=lambda: res.update(r=env.ctl(
                "containers/ctl", "create %s runtime=lxc template=%s" % (n, tpl))))
            t.start()
            try:
                self.assertTrue(nt.wait_until(lambda: n in env.containers(), 10))
                self.assertEqual(env.state(n), "CREATING")
                # the driver says so once its checks are done and the
                # template is about to run: a moment after the container shows
                self.assertTrue(nt.wait_until(lambda: "template" in env.cread(n, "progress"),
                                              10), env.cread(n, "progress"))
            finally:
                open(gate, "w").close()
                t.join(nt.scaled(60))
            self.assertEqual(res.get("r"), (True, "OK"), env.read("containers", "error"))
            self.assertEqual(env.state(n), "CREATED")
            self.assertIsNotNone(ev.read_until(lambda e: e["name"] == n and e["new"] == "CREATED"))
            self.assertEqual(state_changes(ev.seen, "container", n),
                             [(None, "CREATING"), ("CREATING", "CREATED")])

    def test_exec_output_and_exit_code(self):
        with ctest.Env() as env:
            n = lrun(env, "ex", "sleep 1000", "env.MODE=lxc-test")
            same, out, code = env.exec_fd(n, 'sh -c "echo $MODE"')
            self.assertEqual((out, code), ("lxc-test\n", "0"))
            self.assertEqual(same, "lxc-test\nexit_code=0\n")
            same, out, code = env.exec_fd(n, 'sh -c "echo out; echo err >&2; exit 3"')
            self.assertEqual(code, "3")
            self.assertEqual(sorted(out.splitlines()), ["err", "out"])
            self.assertTrue(same.endswith("exit_code=3\n"))
            # the exec'd command runs inside: its own pid namespace
            _, out, code = env.exec_fd(n, "cat /proc/1/cmdline")
            self.assertEqual(code, "0")
            self.assertIn("sleep", out)
            # signals are not blocked in what exec starts
            _, out, code = env.exec_fd(n, "grep SigBlk /proc/self/status")
            self.assertEqual(out.split(), ["SigBlk:", "0000000000000000"])
            ok, err = env.ctl("containers/%s/ctl" % n, "exec 'echo unterminated")
            self.assertEqual((ok, err), (False, "EINVAL"))
            self.assertEqual(env.state(n), "RUNNING")

    def test_update_pause_resume(self):
        with ctest.Env() as env:
            n = lrun(env, "up", "sleep 1000", "memory=64M pids=50 cpus=0.5")
            pid = int(env.cread(n, "pid"))
            self.assertEqual(cgroup_file(pid, "pids", "pids.max"), "50")
            env.cctl(n, "update memory=128M pids=80 cpus=1")
            self.assertEqual(env.stats(n)["memory_limit_bytes"], 128 << 20)
            self.assertEqual(int(env.cread(n, "pid")), pid, "update restarted it")
            self.assertEqual(cgroup_file(pid, "pids", "pids.max"), "80")
            v1 = cgroup_file(pid, "memory", "memory.limit_in_bytes")
            v2 = cgroup_file(pid, "memory", "memory.max")
            self.assertIn(str(128 << 20), (v1, v2))
            quota = cgroup_file(pid, "cpu", "cpu.cfs_quota_us")
            if quota is not None:
                period = int(cgroup_file(pid, "cpu", "cpu.cfs_period_us"))
                self.assertEqual(int(quota), period)
            else:
                self.assertEqual(cgroup_file(pid, "cpu", "cpu.max").split()[0],
                                 cgroup_file(pid, "cpu", "cpu.max").split()[1])
            lim = nt.parse_kv(env.cread(n, "limits"), " ")
            self.assertEqual((lim["pids"], lim["memory_bytes"]), ("80", str(128 << 20)))
            for bad in ("update memory=lots", "update pids=0", "update", "update x=1"):
                ok, err = env.ctl("containers/%s/ctl" % n, bad)
                self.assertEqual((ok, err), (False, "EINVAL"), bad)
            self.assertEqual(cgroup_file(pid, "pids", "pids.max"), "80")

            env.cctl(n, "pause")
            self.assertEqual(env.state(n), "PAUSED")
            self.assertEqual(lxc_state(env, env.engine(n)), "FROZEN")
            self.assertEqual(sorted(env.stats(n)), sorted(ctest.STATS_KEYS))
            env.cctl(n, "resume")
            self.assertEqual(env.state(n), "RUNNING")
            self.assertEqual(lxc_state(env, env.engine(n)), "RUNNING")
            _, out, code = env.exec_fd(n, "true")
            self.assertEqual(code, "0")

    def test_reads_never_wait_on_liblxc_locks(self):
        # stats, logs and metrics are served on FUSE threads: with the
        # container's liblxc disk lock held elsewhere (as a destroy or an
        # update's save_config holds it), they still answer at once
        with ctest.Env() as env:
            n = lrun(env, "lk", "sh -c 'echo lock-test-ready; exec sleep 1000'",
                     "memory=64M")
            self.assertTrue(nt.wait_until(lambda: "lock-test-ready" in
                                          env.cread(n, "logs"), 10))
            lock = "/run/lxc/lock/%s/.%s" % (env.lxcpath, env.engine(n))
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                            struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
                got = {}

                def reads():
                    got["stats"] = env.stats(n)
                    got["logs"] = env.cread(n, "logs")
                    got["prom"] = env.read("metrics", "nodefs.prom")

                t = threading.Thread(target=reads, daemon=True)
                t0 = time.monotonic()
                t.start()
                t.join(3)
                took = time.monotonic() - t0
                self.assertFalse(t.is_alive(), "a read waited on liblxc's container lock")
            finally:
                os.close(fd)    # releases the lock
            t.join(10)
            print("stats, logs, metrics with the lock held: %.3f s" % took)
            self.assertEqual(got["stats"]["memory_limit_bytes"], 64 << 20)
            self.assertGreater(got["stats"]["memory_bytes"], 0)
            self.assertIn("lock-test-ready", got["logs"])
            self.assertIn('nodefs_container_memory_bytes{container="%s"}' % n, got["prom"])
            # stopped: zeros, as before
            env.cctl(n, "kill")
            env.wait_state(n, "EXITED", 5)
            self.assertEqual(set(env.stats(n).values()), {0.0})

    def test_destroy_removes_everything(self):
        with ctest.Env() as env:
            n = lrun(env, "ds", "sleep 1000")
            pid = int(env.cread(n, "pid"))
            ck = os.path.join(env.state_dir, "containers", n + ".json")
            self.assertTrue(os.path.exists(ck))
            env.cctl(n, "destroy")
            env.wait_gone(n)
            self.assertEqual(lxc_ls(env), [])
            self.assertFalse(os.path.exists(os.path.join(env.lxcpath, env.engine(n))))
            self.assertFalse(os.path.exists(ck))
            self.assertFalse(os.path.exists("/proc/%d" % pid), "init outlived destroy")
            again = lrun(env, "ds")
            self.assertEqual(env.state(again), "RUNNING")

    def test_no_cgroups_left_and_daemon_stays_home(self):
        """liblxc's start enters its caller into lxc.monitor.NAME: the
        daemon goes back to its own cgroups, and after a destroy no cgroup
        of the container is left in any hierarchy (v1 or v2)."""
        def own(pid):
            with open("/proc/%d/cgroup" % pid) as f:
                return f.read()

        def left(name):
            found = []
            for mnt in cgroup_mounts():
                for pat in ("lxc.*.%s", "*/lxc.*.%s", "lxc.*.%s-*", "*/lxc.*.%s-*"):
                    found += glob.glob(os.path.join(mnt, pat % name))
            return found

        with ctest.Env() as env:
            home = own(env.fs.proc.pid)
            n = lrun(env, "cg", "sleep 1000")
            self.assertTrue(left(env.engine(n)), "the test sees no cgroup of a running container")
            self.assertEqual(own(env.fs.proc.pid), home, "the daemon left its cgroups")
            env.cctl(n, "destroy")
            env.wait_gone(n)
            self.assertEqual(left(env.engine(n)), [])

    def test_outside_stop_seen_within_a_second(self):
        with ctest.Env() as env:
            n = lrun(env, "vic", "sleep 1000")
            s = lrun(env, "vsys")
            for name in (n, s):
                r = lxc("lxc-stop", "-P", env.lxcpath, "-n", env.engine(name), "-k")
                self.assertEqual(r.returncode, 0, r.stderr)
                t0 = time.monotonic()
                self.assertTrue(nt.wait_until(lambda: env.state(name) == "EXITED", 1.0, 0.01),
                                "state %s a second after lxc-stop -k" % env.state(name))
                print("%s: EXITED %.3f s after lxc-stop -k returned"
                      % (name, time.monotonic() - t0))
                self.assertEqual(env.cread(name, "exit_code").strip(), "137")
                self.assertEqual(env.cread(name, "pid"), "")

    def test_oom_kill(self):
        with ctest.Env() as env:
            n = lrun(env, "oom", "sh -c 'x=y; while :; do x=$x$x$x$x; done'", "memory=16M")
            self.assertEqual(env.cread(n, "wait"), "exit_code=137 oom_killed=1\n")
            self.assertEqual(env.cread(n, "oom_killed").strip(), "1")
            self.assertTrue(json.loads(env.cread(n, "info.json"))["oom_killed"])
            # a clean run afterwards clears the flag
            q = lrun(env, "fine", "true", "memory=16M")
            self.assertEqual(env.cread(q, "wait"), "exit_code=0 oom_killed=0\n")

    def test_bind_mounts(self):
        with ctest.Env() as env:
            rw = os.path.join(env.pub, "rw")
            ro = os.path.join(env.pub, "ro")
            os.mkdir(rw)
            os.mkdir(ro)
            with open(os.path.join(ro, "hello"), "w") as f:
                f.write("from-host\n")
            # a link that stays under the allowed prefix is fine: the
            # container gets what it leads to
            os.symlink(ro, os.path.join(env.pub, "ro-link"))
            n = lrun(env, "bd", "sleep 1000", "bind=%s:/data bind=%s/ro-link:/conf:ro"
                     % (rw, env.pub))
            _, out, code = env.exec_fd(n, "cat /conf/hello")
            self.assertEqual((out, code), ("from-host\n", "0"))
            _, out, code = env.exec_fd(n, 'sh -c "echo from-ctr > /data/f"')
            self.assertEqual(code, "0", out)
            with open(os.path.join(rw, "f")) as f:
                self.assertEqual(f.read(), "from-ctr\n")
            _, out, code = env.exec_fd(n, 'sh -c "echo x > /conf/y"')
            self.assertNotEqual(code, "0", "a :ro bind was writable")
            self.assertFalse(os.path.exists(os.path.join(ro, "y")))
            with open(os.path.join(env.lxcpath, env.engine(n), "config")) as f:
                entries = [l for l in f if l.startswith("lxc.mount.entry")]
            self.assertTrue(any(rw in e for e in entries), entries)
            self.assertTrue(any(ro + " " in e for e in entries), entries)
            self.assertFalse(any("ro-link" in e for e in entries), entries)

    def test_launch_options_user_workdir_hostname_entrypoint_labels(self):
        """user= by name (from the container's own /etc/passwd and
        /etc/group: a template that adds app 1234:1235) seen by id inside,
        workdir=, hostname=, entrypoint= before cmd, label.K=V in the owner
        mark and info.json; a user the rootfs lacks refused with nothing
        left; force_pull ENOTSUP naming the option and the runtime."""
        with ctest.Env() as env:
            tpl = os.path.join(env.tmp, "lxc-withapp")
            with open(tpl, "w") as f:
                f.write('#!/bin/sh\nset -e\n"%s" "$@"\nroot=; prev=\n'
                        'for a; do case $a in --rootfs=*) root=${a#--rootfs=};; esac\n'
                        '  [ "$prev" = --rootfs ] && root=$a; prev=$a; done\n'
                        'echo "app:x:1234:1235::/:/bin/sh" >>"$root/etc/passwd"\n'
                        'echo "appg:x:1235:" >>"$root/etc/group"\n'
                        'echo "ops:x:1300:" >>"$root/etc/group"\n' % ctest.lxc_template())
            os.chmod(tpl, 0o755)
            n = env.name("opts")
            env.run(n, "runtime=lxc template=%s user=app workdir=/tmp hostname=box-1 "
                    "entrypoint='/bin/sh -c' cmd=%s label.tier=back"
                    % (tpl, ctest._shq('"echo u=$(id -u) g=$(id -g) d=$(pwd) '
                                       'h=$(hostname); sleep 1000"')))
            want = "u=1234 g=1235 d=/tmp h=box-1"
            self.assertTrue(nt.wait_until(lambda: want in env.cread(n, "logs"), 5),
                            env.cread(n, "logs"))
            mark = json.load(open(os.path.join(env.lxcpath, env.engine(n), "nodefs.json")))
            self.assertEqual(mark["labels"], {"tier": "back"})
            info = json.loads(env.cread(n, "info.json"))
            self.assertEqual((info["labels"], info["user"], info["hostname"]),
                             ({"tier": "back"}, "app", "box-1"))
            g = env.name("grp")
            env.run(g, "runtime=lxc template=%s user=app:ops cmd=%s"
                    % (tpl, ctest._shq('sh -c "echo g=$(id -g); sleep 1000"')))
            self.assertTrue(nt.wait_until(lambda: "g=1300" in env.cread(g, "logs"), 5),
                            env.cread(g, "logs"))
            for line, want, says in [
                    ("run %s runtime=lxc template=%s user=nosuch cmd='true'" % (env.name("nu"), tpl),
                     "EINVAL", "no user 'nosuch'"),
                    ("run %s runtime=lxc force_pull=yes" % env.name("fp"),
                     "ENOTSUP", "force_pull=: not supported by runtime lxc")]:
                ok, err = env.ctl("containers/ctl", line)
                self.assertEqual((ok, err), (False, want), line)
                self.assertIn(says, env.read("containers", "error"))
            # the refused user: the template's rootfs made and destroyed,
            # the sandbox gone, no record: the operation FAILED, alone
            ctest.assert_refusal_left_nothing(self, env, env.name("nu"), "no user 'nosuch'")
            self.assertEqual(sorted(env.containers()), sorted([n, g]))
            self.assertEqual(sorted(lxc_ls(env)), sorted([env.engine(n), env.engine(g)]))

    def test_bad_input_creates_nothing(self):
        with ctest.Env() as env:
            # a link under the allowed prefix that leads out of it
            os.symlink("/etc", os.path.join(env.pub, "etc-link"))
            os.symlink("/nonexistent-nodefs", os.path.join(env.pub, "dangling"))
            cases = [
                ("run %s runtime=lxc template=busybox bind=%s/etc-link:/x"
                 % (env.name("s1"), env.pub), "EPERM"),
                ("run %s runtime=lxc template=busybox bind=%s/etc-link/ssl:/x"
                 % (env.name("s2"), env.pub), "EPERM"),
                ("run %s runtime=lxc template=busybox bind=%s/dangling:/x"
                 % (env.name("s3"), env.pub), "EPERM"),
                ("run %s runtime=lxc template=nosuch" % env.name("a"), None),
                ("run %s runtime=lxc template=busybox memory=lots" % env.name("b"), "EINVAL"),
                ("run %s runtime=lxc template=busybox cmd='sleep 1" % env.name("c"), "EINVAL"),
                ("run %s runtime=lxc template=busybox bind=/etc:/x" % env.name("d"), None),
                ("run %s runtime=lxc template=busybox bind=%s/../..:/x" % (env.name("e"), env.pub), None),
                ("run %s runtime=lxc template=busybox flush_cache=maybe" % env.name("f"), "EINVAL"),
                ("run %s runtime=lxc template=busybox bogus=1" % env.name("g"), "EINVAL"),
                ("run %s runtime=lxc template=busybox pids=-3" % env.name("h"), "EINVAL"),
                ("run %s runtime=lxc template=busybox volume=novol:/x" % env.name("i"), None),
                # the download template with options it takes, no network:
                # it fails cleanly, and leaves no half-made container
                ("run %s runtime=lxc template=download distro=alpine release=3.19 "
                 "arch=amd64 image_server=127.0.0.1:1 flush_cache=1" % env.name("j"), None),
                # distro= and friends belong to the download template
                ("run %s runtime=lxc template=busybox distro=alpine" % env.name("k"), None),
            ]
            for line, want in cases:
                ok, err = env.ctl("containers/ctl", line)
                self.assertFalse(ok, line)
                if want:
                    self.assertEqual(err, want, line)
                self.assertTrue(env.read("containers", "error").strip(), line)
                self.assertEqual(env.containers(), [], line)
                self.assertEqual(lxc_ls(env), [], line)
                self.assertEqual(os.listdir(env.lxcpath), [], line)
                if "etc-link" in line:
                    self.assertIn("resolves to /etc", env.read("containers", "error"))
            self.assertEqual(os.listdir(os.path.join(env.state_dir, "containers")), [])
            # disable_gpg: Debian 12's download template checks no GPG
            # signature and has no --no-validate: refused, with the reason,
            # before the template runs
            ok, err = env.ctl("containers/ctl", "run %s runtime=lxc template=download "
                              "distro=alpine release=3.19 arch=amd64 image_server=127.0.0.1:1 "
                              "disable_gpg=true" % env.name("l"))
            self.assertEqual((ok, err), (False, "EINVAL"))
            why = env.read("containers", "error")
            self.assertIn("disable_gpg", why)
            self.assertIn("no --no-validate", why)
            self.assertEqual((env.containers(), os.listdir(env.lxcpath)), ([], []))
            # containers/ctl lists every option create takes, one line
            # each from the option table
            usage = env.read("containers", "ctl")
            for opt in ("template=", "distro=", "release=", "arch=", "image_variant=",
                        "image_server=", "template_args=", "flush_cache=", "force_cache=",
                        "disable_gpg=", "bind=", "volume="):
                self.assertIn("\n  " + opt, usage, opt)
            taken = lrun(env, "taken", "sleep 1000")
            pid = env.cread(taken, "pid")
            ok, err = env.ctl("containers/ctl", "run %s runtime=lxc template=busybox" % taken)
            self.assertEqual((ok, err), (False, "EEXIST"))
            self.assertEqual((env.state(taken), env.cread(taken, "pid")), ("RUNNING", pid))
            self.assertEqual(lxc_ls(env), [env.engine(taken)])

    def test_foreign_containers_never_shown_or_touched(self):
        with ctest.Env() as env:
            # made outside nodefs under the very name nodefs would give it
            f = env.name("foreign")
            ef = env.engine(f)
            r = lxc("lxc-create", "-P", env.lxcpath, "-n", ef, "-t", ctest.lxc_template())
            self.assertEqual(r.returncode, 0, r.stderr)
            mine = lrun(env, "mine", "sleep 1000")
            self.assertEqual(env.containers(), [mine])
            ok, err = env.ctl("containers/ctl", "run %s runtime=lxc template=busybox" % f)
            self.assertFalse(ok, "nodefs took over a container it did not make")
            self.assertTrue(os.path.exists(os.path.join(env.lxcpath, ef, "config")))
            env.fs.restart()
            self.assertEqual(env.containers(), [mine])
            env.cctl(mine, "destroy")
            env.wait_gone(mine)
            self.assertEqual(lxc_ls(env), [ef])
            self.assertEqual(lxc_state(env, ef), "STOPPED")

    def test_recovery_after_kill9(self):
        with ctest.Env() as env:
            a = lrun(env, "ra", "sleep 1000", "memory=32M")
            b = lrun(env, "rb", "sleep 1000")
            c = lrun(env, "rc", "true")
            env.cread(c, "wait")
            pida = env.cread(a, "pid")
            env.fs.kill9()
            r = lxc("lxc-stop", "-P", env.lxcpath, "-n", env.engine(b), "-k")
            self.assertEqual(r.returncode, 0, r.stderr)
            env.fs.start()
            self.assertEqual(sorted(env.containers()), sorted([a, b, c]))
            self.assertEqual((env.state(a), env.cread(a, "pid")), ("RUNNING", pida))
            self.assertEqual(env.stats(a)["memory_limit_bytes"], 32 << 20)
            env.wait_state(b, "EXITED", 5)
            self.assertEqual(env.cread(c, "exit_code").strip(), "0")
            # exits are followed again after the restart
            r = lxc("lxc-stop", "-P", env.lxcpath, "-n", env.engine(a), "-k")
            self.assertTrue(nt.wait_until(lambda: env.state(a) == "EXITED", 1.0, 0.01),
                            env.state(a))
            self.assertEqual(env.cread(a, "exit_code").strip(), "137")
            for n in (a, b, c):
                env.cctl(n, "destroy")
            self.assertEqual(lxc_ls(env), [])

    def test_a_dead_daemons_mount_fails_at_once(self):
        # lxc's monitors are started by a helper process, never forked
        # from the daemon: none holds its FUSE connection, so a daemon
        # killed with containers running leaves a mount that fails at
        # once (ENOTCONN) rather than one whose every access waits
        with ctest.Env() as env:
            names = [lrun(env, "dd%d" % i, "sleep 1000") for i in range(2)]
            for n in names:
                mon = subprocess.run(["pgrep", "-f", "lxc monitor\\] %s %s$"
                                      % (env.lxcpath, env.engine(n))],
                                     capture_output=True, text=True).stdout.split()
                self.assertEqual(len(mon), 1, (n, mon))
                fds = os.listdir("/proc/%s/fd" % mon[0])
                held = [f for f in fds
                        if os.path.realpath("/proc/%s/fd/%s" % (mon[0], f)) == "/dev/fuse"]
                self.assertEqual(held, [], "lxc's monitor of %s holds /dev/fuse" % n)
            env.fs.proc.kill()
            env.fs.proc.wait()
            t0 = time.monotonic()
            r = subprocess.run(["stat", os.path.join(env.fs.mnt, "status")],
                               capture_output=True, text=True, timeout=nt.scaled(10))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("Transport endpoint is not connected", r.stderr)
            self.assertLess(time.monotonic() - t0, nt.scaled(2))
            env.fs.kill9()
            env.fs.start()
            for n in names:
                env.cctl(n, "destroy")
            self.assertEqual(lxc_ls(env), [])


if __name__ == "__main__":
    ctest.main(lxc_needed=True)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""ctest: what the containers-as-files tests share, on top of nodefs_test.

An Env is one temp dir holding a private lxcpath (lxc/), the allowed root for
bind sources and publish targets (pub/), nodefs's state dir and a real nodefs
mount whose [runtime docker] is the run's dockerd (NODEFS_TEST_DOCKER_HOST,
tests/fixtures/dockerd.sh) and whose [runtime lxc] uses that lxcpath; with
csi=True it also runs the test CSI plugin (tests/fixtures/csi/plugin.py) so
volume= mounts have a real published volume behind them.

Leaving an Env, on every exit path: nodefs is stopped (checked: clean exit,
no mount left, no sanitizer finding), every Docker container whose name
carries the Env's unique prefix is removed through the engine, every LXC
container under the private lxcpath is killed and destroyed, the plugin is
stopped, whatever is still mounted under the temp dir is unmounted (deepest
first) and the temp dir is removed. Names given to nodefs are prefixed
with a per-Env tag, so two runs sharing one dockerd never collide.

It drives nodefs only through the mount (open/read/write, bash), and looks
at the engines only from outside (docker CLI, lxc-* tools) to check what
nodefs claims.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import nodefs_test as nt

HOST = os.environ.get("NODEFS_TEST_DOCKER_HOST", "")
IMAGE = "nodefs-test/busybox:latest"
DOCKERD_FIXTURE = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "dockerd.sh")
PLUGIN_PY = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "csi", "plugin.py")

# A shell loop that ignores SIGTERM (as a process with no handler would, and
# more: it survives a TERM meant to stop it), so `stop T` must kill it.
IGNORE_TERM = "sh -c \"trap '' TERM; while :; do sleep 1; done\""
# A process that exits with 42 when it gets SIGHUP: a delivered signal
# changes the exit code (pid 1 of a container ignores signals it has no
# handler for, so the handler is what makes the signal observable).
HUP_42 = "sh -c \"trap 'exit 42' HUP; while :; do sleep 0.1; done\""
STATS_KEYS = ("cpu_user_seconds", "cpu_system_seconds", "memory_bytes",
              "memory_limit_bytes", "pids", "sandbox_bytes")


def _terminated(signum, frame):
    # meson's timeout sends SIGTERM: unwind the `with` blocks so containers,
    # mounts and processes go
    raise KeyboardInterrupt("SIGTERM")


signal.signal(signal.SIGTERM, _terminated)


# ---- requirements ------------------------------------------------------

# (nt.requires() is the one check; these stay for older callers)

def have_docker():
    return nt.why_not("docker") is None


def lxc_why_not():
    """None when liblxc can be driven here, else the reason."""
    return nt.why_not("lxc")


def require(docker_needed=False, lxc_needed=False, csi_needed=False):
    nt.requires("mount", *(["docker"] if docker_needed else [])
                + (["lxc"] if lxc_needed else [])
                + (["csi-plugin"] if csi_needed else []))


# ---- engines seen from outside ---------------------------------------

def docker(*args, host=None, check=False, timeout=60):
    env = dict(os.environ, DOCKER_HOST=host or HOST)
    return subprocess.run(["docker", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=check)


def docker_names(prefix, host=None):
    """Names of the engine's containers (any state) that contain prefix."""
    out = docker("ps", "-a", "--format", "{{.Names}}", "--filter",
                 "name=" + prefix, host=host).stdout.split()
    return sorted(n for n in out if prefix in n)


def lxc(*args, check=False, timeout=60):
    return subprocess.run(list(args), capture_output=True, text=True,
                          timeout=timeout, check=check)


def lxc_template_dir():
    """The run's LXC templates (tests/fixtures/lxc-templates.sh: the
    installed ones, with an lxc-busybox that makes its links in one
    process), else the installed ones."""
    return os.environ.get("NODEFS_TEST_LXC_TEMPLATES") or "/usr/share/lxc/templates"


def lxc_template(name="busybox"):
    """A template's path, for lxc-create -t."""
    return os.path.join(lxc_template_dir(), "lxc-" + name)


mounts_under = nt.mounts_under
unmount_all_under = nt.unmount_all_under


# the test CSI plugin as a child process: one helper for every suite
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "volumes"))
from voltest import Plugin  # noqa: E402


LSAN_SUPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan.supp")


def sanitizer_env():
    """The daemon's environment additions: LeakSanitizer suppressions for
    leaks inside liblxc (see lsan.supp), kept beside whatever options the
    test runner set."""
    opts = os.environ.get("LSAN_OPTIONS", "")
    return {"LSAN_OPTIONS": (opts + ":" if opts else "") + "suppressions=" + LSAN_SUPP}


_seq = [0]


class Env:
    """A temp dir, a private lxcpath, optionally the CSI plugin, and a
    nodefs mount on them. docker_host: another dockerd's socket URL."""

    def __init__(self, csi=False, docker_host=None, lxc_extra="", docker_extra="",
                 tag=None, stop_timeout="5s", nodefs_extra=""):
        _seq[0] += 1
        self.tag = tag or "c%d%d" % (os.getpid() % 100000, _seq[0])
        self.csi = csi
        self.docker_host = docker_host or HOST
        self.lxc_extra = lxc_extra
        self.docker_extra = docker_extra
        self.stop_timeout = stop_timeout
        self.nodefs_extra = nodefs_extra
        self.tmp = None
        self.fs = None
        self.plugin = None
        self.final_log = ""

    def config(self):
        text = ("[nodefs]\nallowed_targets = %s\nretry_backoff = 50ms\n"
                "retry_max = 400ms\n%s\n" % (self.pub, self.nodefs_extra))
        if self.plugin:
            text += ("[plugin hostpath]\nendpoint = %s\ndefault = yes\n\n"
                     % self.plugin.endpoint)
        text += ("[runtime docker]\nendpoint = %s\nstop_timeout = %s\n%s\n"
                 "[runtime lxc]\nlxcpath = %s\nstop_timeout = %s\ntemplate_dir = %s\n%s"
                 % (self.docker_host, self.stop_timeout, self.docker_extra, self.lxcpath,
                    self.stop_timeout, lxc_template_dir(), self.lxc_extra))
        return text

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-ctr-")
        try:
            os.chmod(self.tmp, 0o755)
            self.pub = os.path.join(self.tmp, "pub")
            self.lxcpath = os.path.join(self.tmp, "lxc")
            os.mkdir(self.pub)
            os.mkdir(self.lxcpath)
            self.state_dir = os.path.join(self.tmp, "state")
            if self.csi:
                self.plugin = Plugin(self.tmp)
                self.plugin.start()
            self.fs = self.new_nodefs(self.config(), state_dir=self.state_dir,
                                      env=sanitizer_env())
            self.fs.__enter__()
            # this instance's identity: on its docker labels and names
            st = nt.parse_kv(self.fs.read("status"))
            self.instance = st.get("instance", "")
            self.prefix = st.get("name_prefix", "")
            if self.csi:
                ok = nt.wait_until(lambda: self.fs.read(
                    "plugins", "hostpath", "health").startswith("READY"), 15)
                if not ok:
                    raise AssertionError("plugin not READY: " + self.plugin.log())
        except BaseException:
            self._teardown()
            raise
        return self

    def new_nodefs(self, config, **kw):
        """The mount's nt.Nodefs (a subclass may start it elsewhere)."""
        return nt.Nodefs(config, **kw)

    def _teardown(self):
        problems = []
        try:
            problems, self.final_log = nt.end_daemon(self.fs)
        finally:
            try:
                self.kill_leftovers()
                self.clean_engines()
            finally:
                if self.plugin is not None:
                    self.plugin.stop()
                if self.tmp:
                    nt.remove_tree(self.tmp)
        return problems

    def kill_leftovers(self):
        """SIGKILL any process still running with this mount's config path
        in its argv: a daemon that outlived its stop, or a child it forked
        that never reached exec (liblxc forks to run a template)."""
        if self.fs is None or not self.fs.config_path:
            return
        for pid in nt.find_pids_with_arg(self.fs.config_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def clean_engines(self):
        """Remove every engine container this Env's names could have made."""
        if HOST and shutil.which("docker"):
            for host in {self.docker_host, HOST}:
                names = docker_names(self.tag, host=host)
                if names:
                    docker("rm", "-f", "-v", *names, host=host)
        if self.tmp and os.path.isdir(self.lxcpath):
            for name in os.listdir(self.lxcpath):
                if not os.path.isdir(os.path.join(self.lxcpath, name)):
                    continue
                lxc("lxc-stop", "-P", self.lxcpath, "-n", name, "-k", timeout=30)
                lxc("lxc-destroy", "-P", self.lxcpath, "-n", name, "-f", timeout=60)

    def __exit__(self, exc_type, exc, tb):
        problems = self._teardown()
        if problems and exc_type is None:
            raise nt.DaemonError("; ".join(problems) + "\nlog:\n" + self.final_log)
        return False

    # ---- names and files --------------------------------------------
    def name(self, short):
        return "%s-%s" % (self.tag, short)

    def engine(self, name):
        """What the engine calls the container nodefs made as name (its
        name_prefix + name): docker's container name, lxc's container
        name in the lxcpath."""
        return self.prefix + name

    def read(self, *parts):
        return self.fs.read(*parts)

    def cread(self, name, f):
        return self.fs.read("containers", name, f)

    def state(self, name):
        return self.cread(name, "state").strip()

    def wait_caught(self, name, signo):
        """Wait until the container's first process catches signo (its
        SigCgt): a signal sent to a namespace's init before its handler is
        in place is dropped by the kernel, and the test would wait in vain."""
        pid = int(self.cread(name, "pid"))

        def caught():
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("SigCgt:"):
                        return int(line.split()[1], 16) >> (signo - 1) & 1
            return False
        if not nt.wait_until(caught, 5, 0.02):
            raise AssertionError("%s: pid %d never caught signal %d" % (name, pid, signo))

    def containers(self):
        return [c for c in self.fs.listdir("containers") if c not in ("ctl", "error")]

    def stats(self, name):
        return {k: float(v) for k, v in nt.parse_kv(self.cread(name, "stats"), " ").items()}

    def ctl(self, rel, line):
        """(ok, errname) of writing one line to rel."""
        ok, err = self.fs.write_ctl(rel, line)
        return ok, nt.errname(err)

    def must(self, rel, line):
        ok, err = self.fs.write_ctl(rel, line)
        if not ok:
            d = os.path.dirname(rel)
            raise AssertionError("%s <- %r: %s: %s" % (rel, line, nt.errname(err),
                                                       self.fs.read(d, "error").strip()))

    def cctl(self, name, line):
        self.must("containers/%s/ctl" % name, line)

    def run(self, name, opts):
        self.must("containers/ctl", "run %s %s" % (name, opts))

    def wait_state(self, name, want, timeout=10):
        got = nt.wait_until(lambda: self.state(name) == want, timeout, 0.01)
        if not got:
            raise AssertionError("%s: state %s, want %s (error: %s)" % (
                name, self.state(name), want, self.cread(name, "error").strip()))

    def wait_gone(self, name, timeout=10):
        if not nt.wait_until(lambda: name not in self.containers(), timeout):
            raise AssertionError("%s still listed" % name)

    def exec_fd(self, name, argv):
        """exec through one O_RDWR descriptor: (output read back on the same
        fd, exec_output file, exec_exit_code file)."""
        fd = os.open(self.fs.path("containers", name, "ctl"), os.O_RDWR)
        try:
            line = "exec '%s'\n" % argv
            n = os.write(fd, line.encode())
            assert n == len(line.encode())
            same = os.pread(fd, 1 << 16, 0).decode()
        finally:
            os.close(fd)
        return (same, self.cread(name, "exec_output"),
                self.cread(name, "exec_exit_code").strip())

    def start_wait_reader(self, name):
        """Open containers/NAME/wait and read it on a thread; returns the
        thread, whose .result gets the line (or the exception)."""
        path = self.fs.path("containers", name, "wait")
        fd = os.open(path, os.O_RDONLY)
        t = threading.Thread(target=_read_fd, args=(fd,), daemon=True)
        t.result = None
        t.fd = fd
        t.start()
        return t


def _read_fd(fd):
    t = threading.current_thread()
    try:
        data = b""
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        t.result = data.decode()
    except OSError as e:
        t.result = e
    finally:
        os.close(fd)


def shell_parallel(mnt, lines, timeout=120):
    """Run one `echo LINE > containers/ctl` per line, each from its own
    background shell of one bash; returns ({line: (rc, stderr)}, wall
    seconds)."""
    errdir = tempfile.mkdtemp(prefix="nodefs-par-")
    try:
        script = ["cd %s || exit 99" % _shq(mnt)]
        for i, line in enumerate(lines):
            script.append("( echo %s > containers/ctl ) 2> %s/err.%d & pids[%d]=$!"
                          % (_shq(line), _shq(errdir), i, i))
        script.append('for i in "${!pids[@]}"; do wait "${pids[$i]}"; '
                      'echo "rc $i $?"; done')
        t0 = time.monotonic()
        p = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True,
                           text=True, timeout=timeout)
        wall = time.monotonic() - t0
        rcs = {}
        for l in p.stdout.splitlines():
            _, i, rc = l.split()
            rcs[int(i)] = int(rc)
        out = {}
        for i, line in enumerate(lines):
            with open(os.path.join(errdir, "err.%d" % i)) as fh:
                out[line] = (rcs.get(i, -1), fh.read())
        return out, wall
    finally:
        shutil.rmtree(errdir, ignore_errors=True)


def _shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def assert_refusal_left_nothing(tc, env, name, says):
    """A create of `name` that was refused: its operation FAILED with the
    error line saying `says`, and nothing else of it anywhere: no
    containers/NAME, no record in the state dir, no sandbox beyond those of
    the containers there are (nodefs(5), user=)."""
    tc.assertNotIn(name, env.containers())
    tc.assertFalse(os.path.exists(os.path.join(env.state_dir, "containers", name + ".json")))
    ops = [o for o in os.listdir(env.fs.path("operations")) if o != "ctl"
           and env.read("operations", o, "object").strip() == "containers/" + name]
    tc.assertEqual(len(ops), 1, ops)
    tc.assertEqual(env.read("operations", ops[0], "state").strip(), "FAILED")
    tc.assertIn(says, env.read("operations", ops[0], "error"))
    sbdir = os.path.join(env.state_dir, "sandboxes")
    have = sorted(env.cread(n, "sandbox").strip() for n in env.containers())
    left = sorted(os.path.join(sbdir, x) for x in os.listdir(sbdir)) if os.path.isdir(sbdir) else []
    tc.assertEqual(left, [h for h in have if h], "a sandbox of the refused create is left")


def main(**req):
    """nt.main() after require(**req) (docker_needed, lxc_needed,
    csi_needed): a file's whole needs; a case's own go in nt.requires()."""
    nt.main(requires=lambda: require(**req))

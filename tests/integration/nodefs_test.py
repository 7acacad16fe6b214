# SPDX-License-Identifier: LGPL-2.1-or-later
"""nodefs_test: the harness every integration test uses.

A test mounts a real nodefs with `with Nodefs(config_text) as fs:` and drives
it with ordinary system calls and programs. The harness owns one temp dir per
mount (mountpoint, state dir, config, daemon log), starts the daemon in the
foreground, waits (bounded) until `status` answers and says recovery is over
(`ready=False`: until it answers), and on exit sends SIGTERM,
checks that the mount is gone and removes everything it made. A daemon that
does not unmount, does not exit, or exits non-zero (a sanitizer finding exits
non-zero) fails the test that used it, with the daemon's log attached.

Use:

    import nodefs_test as nt

    class T(unittest.TestCase):
        def test_x(self):
            with nt.Nodefs(nt.offline_config()) as fs:
                self.assertEqual(fs.status()["state"], "READY")
                ok, err = fs.write_ctl("volumes/ctl", "bogus")
                self.assertEqual((ok, nt.errname(err)), (False, "EINVAL"))

    if __name__ == "__main__":
        nt.main("mount")   # exits 77 when root, FUSE or the binary is missing

What a test needs from the machine is checked by one function, requires():
  nt.main("mount", "docker", "prog:jq")   the whole file needs these
  nt.requires("hooks")                    first thing in setUp or a case
Needs: "mount" (= "bin", "root", "fuse"), "hooks" (-Dtest_hooks=true),
"docker" (the run's dockerd answers), "lxc", "csi-plugin" (the test CSI
plugin can run), "prog:NAME[:DEBIAN_PACKAGE]"; why_not(*needs) gives the
reason without skipping. A skip exits 77 (meson SKIP): before the cases at
once, from inside a case (unittest.SkipTest, self.skipTest, nt.skip) once
the cases ran, so a skipped case never passes silently and CI=true fails on
it. Never return early from a case for want of something: call requires().

Nodefs(config, args=(), env=None, start_timeout, stop_timeout, state_dir):
  .mnt .state_dir .config_path .tmp .proc .returncode; .path(*parts),
  .read(*parts), .status() -> dict, .write_ctl(rel, line, flags) -> (ok,
  errno), .error(dir), .listdir(*parts), .sh(script) (bash, cwd = mount),
  .log(), .stop(sig) -> [problems], .restart(), .kill9().
Module: requires(*needs), why_not(*needs), skip(reason),
  require_root/fuse/bin/all() (= requires("root") ...), read_file(path),
  write_line(path, line, flags) -> (ok, errno), errname(e), parse_kv(text),
  run_as(argv, uid, gid, groups) (setpriv; nobody by default),
  syscall_as(op, path, data, uid, gid, groups) -> (ok, errno, data),
  mount_entry(path), is_mounted(path), find_pids_with_arg(arg),
  wait_until(pred, timeout), scaled(seconds), TIME_SCALE, offline_config(),
  main().

It knows nothing of CSI, Docker or LXC: tests bring their own config and
services. Stdlib only; runs under /usr/bin/python3. Environment (set by meson
through integration_env): NODEFS_BIN, NODEFS_SRC, NODEFS_BUILD; by
scripts/test.sh: NODEFS_TIME_SCALE (see scaled()).

Time: an upper bound on elapsed time is asserted as scaled(seconds), never
a bare number; better, wait on the event itself (wait_until, poll). A test
that sleeps and then asserts that something did not happen says why in a
comment (a negative has no event to wait on).
"""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77
NOBODY_UID = 65534
NOBODY_GID = 65534

NODEFS_BIN = os.environ.get("NODEFS_BIN", "")
NODEFS_SRC = os.environ.get("NODEFS_SRC", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
NODEFS_BUILD = os.environ.get("NODEFS_BUILD", "")

# The Docker runtime's tests run against a second engine when meson says
# so (tests/integration/containers/meson.build, containers-podman-K):
# NODEFS_TEST_ENGINE=podman points them at the run's Podman
# (tests/fixtures/podman.sh, NODEFS_TEST_PODMAN_HOST) instead of its
# dockerd; the harness, the docker CLI checks and nodefs's config follow.
ENGINE = os.environ.get("NODEFS_TEST_ENGINE", "docker")
if ENGINE == "podman":
    os.environ["NODEFS_TEST_DOCKER_HOST"] = os.environ.get("NODEFS_TEST_PODMAN_HOST", "")

# Wall-clock bounds scale with the build: scripts/test.sh exports
# NODEFS_TIME_SCALE (4 for the sanitizer build, as meson's
# --timeout-multiplier; 1 otherwise). Every upper bound a test asserts on
# elapsed time is scaled(seconds); wait_until and the daemon's start and
# stop deadlines scale themselves.
try:
    TIME_SCALE = max(1.0, float(os.environ.get("NODEFS_TIME_SCALE", "1")))
except ValueError:
    TIME_SCALE = 1.0


def scaled(seconds):
    """An upper bound on elapsed time, in seconds, for this build."""
    return seconds * TIME_SCALE


# A daemon log holding one of these failed, whatever its exit status.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     ": runtime error: ")

# Entries the top level of every mount has (docs/nodefs.5).
TOP_LEVEL = ("status", "events", "resources", "resources.json", "metrics", "plugins", "profiles",
             "runtimes", "volumes", "operations", "snapshots", "containers")


# -- requirements ------------------------------------------------------
# One table of what a test may need from the machine. Each check returns
# None when the need is met, else the reason; a reason naming a Debian
# package says "(Debian package NAME)", which scripts/test.sh matches
# against the packages scripts/deps.sh could not install.

_running = False        # True while main() runs the unittest cases


def skip(reason):
    """Skip with reason. Before main() runs the cases (module level, main's
    requires): exit 77 (meson SKIP) now. Inside a case (setUp, setUpClass,
    a test body): raise unittest.SkipTest, and main() exits 77 once the
    cases ran, unless one failed (then 1). Either way meson sees SKIP, never
    a silent pass."""
    if _running:
        raise unittest.SkipTest(reason)
    print("SKIP: %s" % reason, flush=True)
    sys.exit(SKIP)


def _why_bin():
    if not NODEFS_BIN or not os.access(NODEFS_BIN, os.X_OK):
        return "NODEFS_BIN not set or not executable: %r" % NODEFS_BIN
    return None


def _why_root():
    return None if os.geteuid() == 0 else "needs root (mounts with allow_other)"


def _why_fuse():
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian package fuse3)"
    return None


_memo = {}


def _memoized(fn):
    def wrapped():
        if fn not in _memo:
            _memo[fn] = fn()
        return _memo[fn]
    wrapped.__doc__ = fn.__doc__
    return wrapped


@_memoized
def _why_hooks():
    """a test build (-Dtest_hooks=true): `nodefs --version` says so"""
    why = _why_bin()
    if why:
        return why
    out = subprocess.run([NODEFS_BIN, "--version"], capture_output=True,
                         text=True).stdout
    if "test hooks" not in out:
        return "nodefs built without -Dtest_hooks=true"
    return None


@_memoized
def _why_docker():
    """the run's dockerd (tests/fixtures/dockerd.sh), answering"""
    if ENGINE == "podman" and not os.environ.get("NODEFS_TEST_DOCKER_HOST"):
        return ("NODEFS_TEST_PODMAN_HOST unset: tests/fixtures/podman.sh "
                "starts a Podman service for the run (scripts/test.sh)")
    if not os.environ.get("NODEFS_TEST_DOCKER_HOST"):
        return ("NODEFS_TEST_DOCKER_HOST unset: tests/fixtures/dockerd.sh "
                "starts a dockerd for the run (scripts/test.sh)")
    if shutil.which("docker") is None:
        return "docker CLI missing (Debian package docker.io)"
    env = dict(os.environ, DOCKER_HOST=os.environ["NODEFS_TEST_DOCKER_HOST"])
    try:
        p = subprocess.run(["docker", "version", "--format",
                            "{{.Server.APIVersion}}"], env=env,
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "dockerd at NODEFS_TEST_DOCKER_HOST did not answer in 20 s"
    if p.returncode != 0:
        return ("dockerd at NODEFS_TEST_DOCKER_HOST not answering: %s"
                % p.stderr.strip()[:200])
    return None


def _why_lxc():
    """the lxc tools, the busybox template and busybox"""
    for prog in ("lxc-ls", "lxc-create", "lxc-stop", "lxc-destroy"):
        if shutil.which(prog) is None:
            return "%s missing (Debian package lxc)" % prog
    if not os.path.exists("/usr/share/lxc/templates/lxc-busybox"):
        return ("no busybox template /usr/share/lxc/templates/lxc-busybox "
                "(Debian package lxc-templates)")
    if shutil.which("busybox") is None:
        return "no busybox binary (Debian package busybox-static)"
    return None


@_memoized
def _why_csi_plugin():
    """what the CSI test plugin (tests/fixtures/csi/plugin.py) runs on"""
    for mod, pkg in (("grpc", "python3-grpcio"),
                     ("google.protobuf", "python3-protobuf")):
        p = subprocess.run(["/usr/bin/python3", "-c", "import " + mod],
                           capture_output=True)
        if p.returncode != 0:
            return "python3 module %s missing (Debian package %s)" % (mod, pkg)
    for prog, pkg in (("protoc", "protobuf-compiler"),
                      ("/usr/bin/grpc_python_plugin",
                       "protobuf-compiler-grpc")):
        if shutil.which(prog) is None:
            return "%s missing (Debian package %s)" % (prog, pkg)
    plugin = os.path.join(NODEFS_SRC, "tests", "fixtures", "csi", "plugin.py")
    if not os.path.exists(plugin):
        return "no %s" % plugin
    return None


CHECKS = {
    "bin": _why_bin,            # NODEFS_BIN is an executable
    "root": _why_root,
    "fuse": _why_fuse,          # /dev/fuse and fusermount3
    "hooks": _why_hooks,        # a -Dtest_hooks=true build
    "docker": _why_docker,      # the run's dockerd answers
    "lxc": _why_lxc,            # lxc tools, busybox template, busybox
    "csi-plugin": _why_csi_plugin,  # grpcio, protobuf, protoc, plugin.py
}
# "mount" (what every mounting test needs) stands for these:
MOUNT = ("bin", "root", "fuse")


def why_not(*needs):
    """None when every need is met, else the reason for the first that is
    not. A need is a name of CHECKS, "mount" (bin, root, fuse), or
    "prog:NAME" / "prog:NAME:PACKAGE" (a program on PATH; PACKAGE, the
    Debian package that has it, defaults to NAME)."""
    for need in needs:
        if need == "mount":
            why = why_not(*MOUNT)
        elif need.startswith("prog:"):
            _, _, rest = need.partition(":")
            prog, _, pkg = rest.partition(":")
            why = None
            if shutil.which(prog) is None:
                why = "%s missing (Debian package %s)" % (prog, pkg or prog)
        elif need in CHECKS:
            why = CHECKS[need]()
        else:
            raise ValueError("requires(): unknown need %r" % need)
        if why:
            return why
    return None


def requires(*needs):
    """Skip (see skip()) unless every need is met; needs as in why_not().
    The one way a test checks its environment: for a whole file, name the
    needs in main (`nt.main("mount", "docker")`) or call requires() at the
    top of the file; for one case, call it first thing in setUp,
    setUpClass or the test (`nt.requires("hooks")`)."""
    why = why_not(*needs)
    if why:
        skip(why)


def require_root():
    requires("root")


def require_fuse():
    requires("fuse")


def require_bin():
    requires("bin")


def require_all():
    """The common preamble of a mounting test: binary, root, FUSE."""
    requires("mount")


def offline_config(tmp_hint="/nonexistent/nodefs-test"):
    """A config naming both runtimes at services that are absent: the mount
    must still come up, with both runtimes present and unhealthy."""
    return ("[nodefs]\n"
            "allowed_targets = /mnt /srv\n"
            "\n"
            "[runtime docker]\n"
            "endpoint = unix://%s/docker.sock\n"
            "\n"
            "[runtime lxc]\n"
            "lxcpath = %s/lxc\n" % (tmp_hint, tmp_hint))


def _unescape_mount_field(s):
    # /proc/mounts escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 4 <= len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_entry(path):
    """The /proc/mounts entry mounted at path as a dict
    (source, target, fstype, options: list), or None."""
    path = os.path.realpath(path)
    found = None
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 4:
                continue
            if _unescape_mount_field(fields[1]) == path:
                found = {"source": _unescape_mount_field(fields[0]),
                         "target": path, "fstype": fields[2],
                         "options": fields[3].split(",")}
    return found  # the last one is the one on top


def mounts_under(path):
    """Mount points at or below path, deepest first."""
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = _unescape_mount_field(line.split()[4])
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return sorted(set(out), key=lambda m: -m.count("/"))


def unmount_all_under(path):
    """Lazily unmount everything at or below path (test cleanup)."""
    for _ in range(8):
        left = mounts_under(path)
        if not left:
            return
        for m in left:
            subprocess.run(["umount", "-l", m], capture_output=True)


def end_daemon(fs, before_cleanup=None):
    """The end of a test environment's daemon: stop fs (a Nodefs, or None)
    if it runs, then run before_cleanup (what must go while its mount is
    still there; an OSError from it is ignored), then clean up its mount
    and dir. Returns (the problems the stop found, the daemon's log with
    what its exit printed)."""
    problems, log = [], ""
    if fs is None:
        return problems, log
    if fs.proc is not None:
        problems = fs.stop()
    log = fs.log()
    if before_cleanup is not None:
        try:
            before_cleanup()
        except OSError:
            pass
    fs._cleanup()
    return problems, log


def remove_tree(path):
    """Unmount everything under path, then remove it (test cleanup)."""
    unmount_all_under(path)
    shutil.rmtree(path, ignore_errors=True)


def is_mounted(path):
    return mount_entry(path) is not None


# A message that names the same context twice ("ValidateVolumeCapabilities:
# ValidateVolumeCapabilities: NOT_FOUND"): each layer adds its context once.
DOUBLED_PREFIX = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*(?: [\w.-]+){0,3}): \1: ")


def doubled_prefix(text):
    """The first line of text that repeats its prefix, or None."""
    for line in text.splitlines():
        if DOUBLED_PREFIX.search(line):
            return line
    return None


def read_file(path, size=1 << 20):
    """Read a whole file with one open and read()s to EOF; returns str.
    Every error file the suite reads is checked for a doubled prefix."""
    with open(path, "rb") as f:
        text = f.read(size).decode()
    if os.path.basename(path) == "error" and doubled_prefix(text):
        raise AssertionError("%s repeats a prefix: %r" % (path, doubled_prefix(text)))
    return text


def write_line(path, line, flags=0):
    """Write line (a newline is added when missing) with a single os.write.
    Returns (ok, errno): (True, 0) when the whole line was written,
    (False, E) when open or write failed with errno E."""
    data = line if line.endswith("\n") else line + "\n"
    data = data.encode()
    try:
        fd = os.open(path, os.O_WRONLY | flags)
    except OSError as e:
        return (False, e.errno)
    try:
        n = os.write(fd, data)
        if n != len(data):
            return (False, errno.EIO)
        return (True, 0)
    except OSError as e:
        return (False, e.errno)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def errname(e):
    return errno.errorcode.get(e, str(e)) if e else "OK"


def parse_kv(text, sep=":"):
    """`key: value` lines (sep ':') or `key value` lines (sep ' ') -> dict."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if sep == ":":
            k, _, v = line.partition(":")
        else:
            k, _, v = line.partition(" ")
        out[k.strip()] = v.strip()
    return out


def as_user_argv(argv, uid=NOBODY_UID, gid=NOBODY_GID, groups=()):
    """argv wrapped so it runs with the given ids and no capabilities."""
    pre = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid]
    if groups:
        pre.append("--groups=" + ",".join(str(g) for g in groups))
    else:
        pre.append("--clear-groups")
    return pre + list(argv)


def run_as(argv, uid=NOBODY_UID, gid=NOBODY_GID, groups=(), timeout=30,
           **kw):
    """Run argv as an unprivileged user (nobody by default); returns the
    CompletedProcess with text stdout/stderr captured."""
    return subprocess.run(as_user_argv(argv, uid, gid, groups),
                          capture_output=True, text=True, timeout=timeout,
                          cwd="/", **kw)


_SYSCALL_CHILD = r"""
import errno, json, os, sys
op, path, data = sys.argv[1], sys.argv[2], sys.argv[3]
res = {"ok": True, "errno": 0, "data": ""}
try:
    if op == "read":
        fd = os.open(path, os.O_RDONLY)
        try:
            res["data"] = os.read(fd, 1 << 20).decode()
        finally:
            os.close(fd)
    elif op == "write":
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)
    elif op == "truncate":
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.close(fd)
    elif op == "mkdir":
        os.mkdir(path)
    elif op == "rmdir":
        os.rmdir(path)
    elif op == "listdir":
        res["data"] = "\n".join(sorted(os.listdir(path)))
    else:
        raise SystemExit("unknown op " + op)
except OSError as e:
    res = {"ok": False, "errno": e.errno, "data": ""}
print(json.dumps(res))
"""


def syscall_as(op, path, data="", uid=NOBODY_UID, gid=NOBODY_GID, groups=()):
    """Do one file operation as another user in a child process.
    op: read, write, truncate, mkdir, rmdir, listdir.
    Returns (ok, errno, data) so tests see the errno the kernel gave."""
    p = run_as(["/usr/bin/python3", "-c", _SYSCALL_CHILD, op, path, data],
               uid=uid, gid=gid, groups=groups)
    if p.returncode != 0:
        raise AssertionError("syscall_as child failed: rc=%d stderr=%s"
                             % (p.returncode, p.stderr))
    r = json.loads(p.stdout)
    return (r["ok"], r["errno"], r["data"])


def find_pids_with_arg(arg):
    """PIDs whose command line contains the exact argument arg. Used to find
    a daemon this test started with its own unique temp paths."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in args:
            pids.append(int(d))
    return pids


def thread_stacks(pid):
    """Where each thread of process pid is, for a daemon that hangs: its
    name, the kernel's wait channel and stack (/proc), and the user stacks
    gdb prints (when gdb is there). Never raises."""
    out = []
    try:
        with open("/proc/%d/status" % pid) as f:
            out.append(" ".join(l.strip() for l in f if l.startswith(("SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))))
    except OSError:
        pass
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except OSError as e:
        return "(no /proc/%d/task: %s)" % (pid, e)
    for tid in tids:
        base = "/proc/%d/task/%s/" % (pid, tid)
        parts = []
        for name in ("comm", "wchan", "stack"):
            try:
                with open(base + name) as f:
                    parts.append(f.read().strip())
            except OSError:
                parts.append("?")
        out.append("thread %s %s (%s)\n  %s" % (tid, parts[0], parts[1],
                                                 parts[2].replace("\n", "\n  ")))
    if shutil.which("gdb"):
        try:
            r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx",
                                "-ex", "thread apply all bt"],
                               capture_output=True, text=True, timeout=60)
            out.append(r.stdout)
        except (OSError, subprocess.SubprocessError) as e:
            out.append("(gdb: %s)" % e)
    return "\n".join(out)


def wait_until(pred, timeout, interval=0.05):
    """Poll pred() until it is true or timeout seconds (scaled()) passed;
    returns the last value of pred()."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


class DaemonError(AssertionError):
    pass


class Nodefs:
    """One nodefs mount for the duration of a `with` block.

    config: the text of the config file (written to <tmp>/nodefs.conf).
    args: extra daemon arguments placed before the mountpoint (e.g. ["-o",
    "fsname=x"]). env: extra environment. start_timeout: seconds to wait for
    `status` to answer. state_dir: use this state dir instead of a fresh one
    (tests of restart keep one across mounts); by default <tmp>/state, which
    is not created beforehand (the daemon must create it). ready: start()
    waits until status is past RECOVERING (recovery runs while the mount
    serves); False returns as soon as status answers.

    Attributes: mnt, state_dir, config_path, tmp, proc, log_path.
    """

    def __init__(self, config="[nodefs]\n", args=(), env=None,
                 start_timeout=20.0, stop_timeout=20.0, state_dir=None,
                 keep_state=False, ready=True):
        self.config = config
        self.ready = ready
        self.args = list(args)
        self.env = env
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._given_state = state_dir
        self.keep_state = keep_state
        self.tmp = None
        self.proc = None
        self.mnt = None
        self.state_dir = None
        self.config_path = None
        self.log_path = None
        self.returncode = None
        self.stop_problems = []

    # -- lifecycle -------------------------------------------------------
    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-test-")
        try:
            # Unprivileged users must be able to reach the mountpoint.
            os.chmod(self.tmp, 0o755)
            self.mnt = os.path.join(self.tmp, "mnt")
            os.mkdir(self.mnt, 0o755)
            self.state_dir = self._given_state or os.path.join(self.tmp,
                                                               "state")
            self.config_path = os.path.join(self.tmp, "nodefs.conf")
            with open(self.config_path, "w") as f:
                f.write(self.config)
            self.log_path = os.path.join(self.tmp, "daemon.log")
            self.start()
        except BaseException:
            self._cleanup()
            raise
        return self

    def argv(self):
        return [NODEFS_BIN, "-f", "--config", self.config_path,
                "--state-dir", self.state_dir] + self.args + [self.mnt]

    def start(self):
        """Start the daemon and wait until status answers. Raises
        DaemonError (with the log) when it exits or does not answer."""
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log,
                                     env=env, cwd="/")
        status = os.path.join(self.mnt, "status")
        deadline = time.monotonic() + scaled(self.start_timeout)
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                raise DaemonError("nodefs exited with status %d before "
                                  "mounting; log:\n%s" % (rc, self.log()))
            if is_mounted(self.mnt):
                try:
                    text = read_file(status)
                    # recovery runs while the mount serves: a test starts
                    # on a whole tree (ready=False: as soon as it answers)
                    if text and (not self.ready or
                                 "state: RECOVERING" not in text):
                        return
                except OSError:
                    pass
            if time.monotonic() >= deadline:
                raise DaemonError("nodefs did not answer %s (or stayed "
                                  "RECOVERING) within %.0fs; log:\n%s\n"
                                  "where its threads were:\n%s"
                                  % (status, scaled(self.start_timeout),
                                     self.log(), thread_stacks(self.proc.pid)))
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        """Stop the daemon with sig and check it unmounted and exited 0.
        Problems are returned (and remembered for __exit__), never raised,
        so cleanup always completes."""
        problems = []
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(scaled(self.stop_timeout))
            except subprocess.TimeoutExpired:
                problems.append("nodefs did not exit within %.0fs of %s; where its "
                                "threads were:\n%s"
                                % (scaled(self.stop_timeout), sig.name,
                                   thread_stacks(self.proc.pid)))
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.returncode = self.proc.returncode
            if self.returncode != 0 and not problems:
                problems.append("nodefs exited with status %s after %s"
                                % (self.returncode, sig.name))
        if self.mnt and is_mounted(self.mnt):
            problems.append("%s still mounted after the daemon exited"
                            % self.mnt)
            subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                           capture_output=True)
            if is_mounted(self.mnt):
                subprocess.run(["umount", "-l", self.mnt],
                               capture_output=True)
        if hasattr(self, "_log") and not self._log.closed:
            self._log.close()
        if doubled_prefix(self.log()):
            problems.append("a message of the daemon log repeats a prefix: %r"
                            % doubled_prefix(self.log()))
        for marker in SANITIZER_MARKERS:
            if marker in self.log():
                problems.append("sanitizer finding in the daemon log (%s)"
                                % marker.strip())
                break
        self.proc = None
        self.stop_problems += problems
        return problems

    def restart(self):
        """Stop (checked) and start again on the same mountpoint, state dir
        and config."""
        problems = self.stop()
        if problems:
            raise DaemonError("; ".join(problems) + "\nlog:\n" + self.log())
        self.start()

    def kill9(self):
        """SIGKILL the daemon (a crash) and clear the dead mount it leaves."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                           capture_output=True)
        if hasattr(self, "_log") and not self._log.closed:
            self._log.close()

    def _cleanup(self):
        if self.proc is not None:
            self.stop()
        elif self.mnt and is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                           capture_output=True)
        if self.tmp and os.path.isdir(self.tmp):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __exit__(self, exc_type, exc, tb):
        log = ""
        try:
            self.stop()
            log = self.log()
        finally:
            self._cleanup()
        if self.stop_problems and exc_type is None:
            raise DaemonError("; ".join(self.stop_problems) + "\nlog:\n" + log)
        return False

    # -- helpers ---------------------------------------------------------
    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-20000:]
        except (OSError, TypeError):
            return ""

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def read(self, *parts):
        return read_file(self.path(*parts))

    def status(self):
        return parse_kv(self.read("status"))

    def write_ctl(self, rel, line, flags=0):
        """Write one command line to the ctl file at rel (relative to the
        mount). Returns (ok, errno)."""
        return write_line(self.path(rel), line, flags)

    def error(self, reldir):
        """The error file beside a ctl file, as text."""
        return self.read(reldir, "error")

    def listdir(self, *parts):
        return sorted(os.listdir(self.path(*parts)))

    def sh(self, script, timeout=30, check=False):
        """Run a bash script with cwd at the mountpoint; returns the
        CompletedProcess (text, captured)."""
        return subprocess.run(["bash", "-c", script], cwd=self.mnt,
                              capture_output=True, text=True,
                              timeout=timeout, check=check)


_DEFAULT = object()


def _shard_arg(argv):
    """--shard=K/N (1 <= K <= N) out of argv: this run takes the cases
    whose place, in the order of their ids, is K modulo N. meson runs a
    long file as N tests (tests/integration/*/meson.build) that together
    run every case once."""
    rest, shard = [], None
    for a in argv:
        if a.startswith("--shard="):
            k, _, n = a[len("--shard="):].partition("/")
            shard = (int(k), int(n))
            if not 1 <= shard[0] <= shard[1]:
                raise SystemExit("bad %s" % a)
        else:
            rest.append(a)
    return rest, shard


def _flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _flatten(t)
        else:
            yield t


class _TimedResult(unittest.TextTestResult):
    """Keeps each case's wall time: main() prints the slowest, so the
    suite's time can be spent where it tells something."""
    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.times = getattr(self, "times", [])
        self.times.append((time.monotonic() - self._t0, test.id()))


class _ShardLoader(unittest.TestLoader):
    def __init__(self, shard):
        super().__init__()
        self.shard = shard

    def loadTestsFromModule(self, module, *args, **kw):
        suite = super().loadTestsFromModule(module, *args, **kw)
        if self.shard is None:
            return suite
        k, n = self.shard
        cases = sorted(_flatten(suite), key=lambda t: t.id())
        return self.suiteClass(t for i, t in enumerate(cases)
                               if i % n == k - 1)


def main(*needs, requires=_DEFAULT):
    """Check requirements, run the cases, exit with meson's meaning:
    0 all passed, 1 a case failed or errored (or none ran), 77 (SKIP) no
    failure but a case was skipped (a skipped case never passes silently;
    with CI=true scripts/test.sh fails on it).
    needs: names for requires() checked first ("mount" when neither needs
    nor requires is given). requires: a callable run before the cases
    (kept for older callers); None checks nothing."""
    global _running
    if requires is _DEFAULT:
        requires = None if needs else require_all
    if needs:
        globals()["requires"](*needs)
    if requires is not None:
        requires()
    argv, shard = _shard_arg(sys.argv)
    _running = True
    prog = unittest.main(verbosity=2, exit=False, argv=argv,
                         testLoader=_ShardLoader(shard),
                         testRunner=unittest.TextTestRunner(
                             resultclass=_TimedResult, verbosity=2))
    _running = False
    r = prog.result
    slow = sorted(getattr(r, "times", []), reverse=True)[:5]
    print("slowest cases: " + ", ".join(
        "%s %.1fs" % (name.rsplit(".", 1)[-1], t) for t, name in slow),
        flush=True)
    if not r.wasSuccessful():
        sys.exit(1)
    if r.testsRun == 0:
        print("FAIL: no test case ran", flush=True)
        sys.exit(1)
    if r.skipped:
        for case, reason in r.skipped:
            print("SKIP: %s: %s" % (case.id(), reason), flush=True)
        print("SKIP: %d of %d cases skipped" % (len(r.skipped), r.testsRun),
              flush=True)
        sys.exit(SKIP)
    sys.exit(0)

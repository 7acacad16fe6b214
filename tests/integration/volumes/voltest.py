# SPDX-License-Identifier: LGPL-2.1-or-later
"""voltest: what the volume tests share, on top of nodefs_test.

A VolEnv is one temp dir holding a real CSI plugin (tests/fixtures/csi/
plugin.py on python3-grpcio, real bind mounts), the allowed publish root
(pub/), nodefs's state dir and a real nodefs mount configured for that
plugin. Leaving it stops nodefs, stops the plugin, lazily unmounts whatever
is still mounted under the temp dir (deepest first: targets, staging paths)
and removes it, on every exit path. It knows the plugin only by its command
line, its socket and its state file (BASE/state.json).

With NODEFS_TEST_PLUGIN=local in the environment the plugin is the
built-in nodefs-csi-local (CSI_LOCAL_BIN) instead, started by the test as
an external plugin, in the backing NODEFS_TEST_BACKING names (dir, the
default, or image: loop-mounted ext4 images; skipped with exit 77 where
loop devices or e2fsprogs are missing); LocalPlugin reads its records into
the same state() shape, and a test asking for a mode it does not have
(--no-stage, fault injection) is skipped.

CSI calls nodefs made are counted from metrics/nodefs.prom
(nodefs_csi_rpcs_total, per attempt on the wire), so a test can say "no CSI
call was made" without instrumenting the plugin.
"""

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import nodefs_test as nt

PLUGIN_PY = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "csi", "plugin.py")
LOCAL = os.environ.get("NODEFS_TEST_PLUGIN") == "local"
CSI_LOCAL_BIN = os.environ.get("CSI_LOCAL_BIN", "")
BACKING = os.environ.get("NODEFS_TEST_BACKING", "dir")

# The RPCs a volume command makes (the refresh and Probe run on their own).
VOLUME_RPCS = ("CreateVolume", "DeleteVolume", "ControllerPublishVolume",
               "ControllerUnpublishVolume", "ValidateVolumeCapabilities",
               "ControllerExpandVolume", "NodeStageVolume",
               "NodeUnstageVolume", "NodePublishVolume",
               "NodeUnpublishVolume", "NodeExpandVolume")


def _terminated(signum, frame):
    # meson's timeout sends SIGTERM: unwind the `with` blocks so the plugin
    # stops and nothing stays mounted
    raise KeyboardInterrupt("SIGTERM")


signal.signal(signal.SIGTERM, _terminated)


def require_plugin():
    """The preamble of every volume test: nodefs, root, FUSE, grpcio."""
    nt.requires("mount", "csi-plugin")
    if LOCAL and BACKING == "image":
        why = loop_devices_ok()
        if why:
            nt.skip("image backing: " + why)


def loop_devices_ok():
    """Why the image backing cannot run here, or None."""
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control (loop devices)"
    for prog in ("mkfs.ext4", "resize2fs", "losetup"):
        if shutil.which(prog) is None:
            return "%s missing" % prog
    return None


def has_cap_sys_resource():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 24))
    return False


def detach_loops_under(path):
    """Detach the loop devices backed by files under path."""
    try:
        p = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"],
                           capture_output=True, text=True)
    except OSError:
        return
    for line in p.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].startswith(path + "/"):
            subprocess.run(["losetup", "-d", parts[0]], capture_output=True)


mounts_under = nt.mounts_under
unmount_all_under = nt.unmount_all_under


class Plugin:
    """The test CSI plugin as a child process (one at a time per env)."""

    node_expansion = True   # ControllerExpandVolume asks for NodeExpandVolume
    checks_exit = False     # grpcio's exit at SIGTERM says nothing

    def info(self):
        """What GetPluginInfo answers: plugins/NAME/info's lines."""
        return {"name": "hostpath.csi.nodefs.test", "vendor_version": "1.0.0"}

    def __init__(self, tmp):
        self.sock = os.path.join(tmp, "csi.sock")
        self.base = os.path.join(tmp, "base")
        self.log_path = os.path.join(tmp, "plugin.log")
        self.endpoint = "unix://" + self.sock
        self.proc = None
        self.flags = []
        self.problems = []

    def start(self, flags=(), timeout=30):
        self.flags = list(flags)
        os.makedirs(self.base, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/")
        log.close()
        deadline = time.monotonic() + nt.scaled(timeout)
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("plugin exited (%d): %s"
                                     % (self.proc.returncode, self.log()))
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.sock)
                return
            except OSError:
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                raise AssertionError("plugin did not listen: " + self.log())
            time.sleep(0.05)

    def argv(self):
        return ["/usr/bin/python3", PLUGIN_PY, "--endpoint", self.endpoint,
                "--base", self.base] + self.flags

    def stop(self):
        """Stop the plugin. Returns what went wrong with it so far (a
        non-zero exit after SIGTERM here or at a restart, a sanitizer
        finding in its log), as a list."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(nt.scaled(15))
                if rc != 0 and self.checks_exit:
                    self.problems.append("the plugin exited %d at SIGTERM" % rc)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if self.checks_exit:    # grpcio waits for a delayed call
                    self.problems.append("the plugin did not stop at SIGTERM")
        self.proc = None
        try:
            with open(self.log_path, "rb") as f:
                log = f.read().decode(errors="replace")
        except OSError:
            log = ""
        if any(m in log for m in nt.SANITIZER_MARKERS) and not any(
                "sanitizer" in p for p in self.problems):
            self.problems.append("sanitizer finding in the plugin's log")
        return self.problems

    def restart(self, flags=()):
        self.stop()
        self.start(flags)

    def state(self):
        try:
            with open(os.path.join(self.base, "state.json")) as f:
                return json.load(f)["volumes"]
        except FileNotFoundError:
            return {}

    def grows_online(self):
        return True

    def volume_dir(self, vid):
        return os.path.join(self.base, "volumes", vid)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-8000:]
        except OSError:
            return ""


class LocalPlugin(Plugin):
    """nodefs-csi-local (dir or image backing) in Plugin's shape. Its
    capabilities are fixed: stage yes, controller publish no, expand yes
    (with a node step in image backing: the filesystem grows there)."""

    node_expansion = BACKING == "image"
    checks_exit = True      # 0 after SIGTERM; a sanitizer build's leak check fails it
    # flags of plugin.py that describe what it already is
    SAME = {"--no-controller-publish"}
    # its own flags that take a value, passed on
    OWN = {"--secrets"}

    def info(self):
        out = subprocess.run([CSI_LOCAL_BIN, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()
        return {"name": "local.csi.nodefs.io", "vendor_version": out[-1]}

    def argv(self):
        own, odd, flags = [], [], list(self.flags)
        while flags:
            f = flags.pop(0)
            if f in self.OWN and flags:
                own += [f, flags.pop(0)]
            elif f not in self.SAME:
                odd.append(f)
        if odd:
            import unittest
            raise unittest.SkipTest("the built-in plugin has no mode %s" % " ".join(odd))
        return [CSI_LOCAL_BIN, "--endpoint", self.endpoint, "--base-dir", self.base,
                "--node-id", "node-1", "--backing", BACKING] + own

    def state(self):
        """{volume_id: {name, capacity, params, staged, published, nodes}} from
        its records (BASE/state/vol-*)."""
        from urllib.parse import unquote
        out = {}
        d = os.path.join(self.base, "state")
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return out
        for n in names:
            if not n.startswith("vol-"):
                continue
            rec = {"staged": [], "published": [], "nodes": [], "params": {}}
            with open(os.path.join(d, n)) as f:
                for line in f:
                    k, _, v = line.rstrip("\n").partition(" ")
                    if k == "size":
                        rec["capacity"] = int(v)
                    elif k == "name":
                        rec["name"] = unquote(v)
                    elif k == "staged":
                        rec["staged"].append(unquote(v))
                    elif k == "target":
                        rec["published"].append(unquote(v[3:]))
                    elif k == "params":
                        for kv in unquote(v).split(","):
                            if kv:
                                pk, _, pv = kv.partition("=")
                                rec["params"][unquote(pk)] = unquote(pv)
            out[n] = rec
        return out

    def grows_online(self):
        """An image's ext4 grows while mounted only with CAP_SYS_RESOURCE."""
        return BACKING != "image" or has_cap_sys_resource()

    def volume_dir(self, vid):
        if BACKING == "image":
            # the image's filesystem, where it is mounted: the staging path
            staged = self.state().get(vid, {}).get("staged", [])
            if not staged:
                raise AssertionError("volume %s is not staged: its image is not mounted" % vid)
            return staged[0]
        return os.path.join(self.base, "data", vid)


def drain_events(fd):
    """Every event line readable now from fd (non-blocking), as dicts."""
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError as e:
            if e.errno == errno.EAGAIN:
                break
            raise
        if not chunk:
            break
        buf += chunk
    return [json.loads(l) for l in buf.decode().splitlines() if l.strip()]


def events_until(fd, keep, want, timeout=10):
    """The events kept by keep(e), read from fd until want(kept) holds or
    timeout (scaled) passes. An event is shown once the tree has flushed
    the files it speaks of (events.c), a moment after the change itself:
    a reader that saw the change in a file waits for its line."""
    kept = []

    def more():
        kept.extend(e for e in drain_events(fd) if keep(e))
        return want(kept)
    nt.wait_until(more, timeout)
    return kept


def config_text(tmp, plugin, extra_nodefs="", extra="", csi_timeout="2s",
                retry_backoff="50ms"):
    return """[nodefs]
allowed_targets = {tmp}/pub
csi_timeout = {csi_timeout}
retry_backoff = {retry_backoff}
retry_max = 400ms
reconcile_interval = 2s
{extra_nodefs}

[plugin hostpath]
endpoint = {ep}
default = yes

[profile fast]
plugin = hostpath
access_mode = single-node-writer
fs_type = ext4
mount_flags = noatime nodiratime
parameters = tier=fast replicas=1

[profile ro]
plugin = hostpath
access_mode = multi-node-reader-only
{extra}
""".format(tmp=tmp, ep=plugin.endpoint, extra_nodefs=extra_nodefs, extra=extra,
           csi_timeout=csi_timeout, retry_backoff=retry_backoff)


class VolEnv:
    """A plugin (started with plugin_flags) and a nodefs mount using it."""

    def __init__(self, plugin_flags=(), extra_nodefs="", extra="", csi_timeout="2s",
                 env=None, retry_backoff="50ms"):
        self.plugin_flags = list(plugin_flags)
        self.env = env
        self.retry_backoff = retry_backoff
        self.csi_timeout = csi_timeout
        self.extra_nodefs = extra_nodefs
        self.extra = extra
        self.tmp = None
        self.fs = None
        self.plugin = None

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-vol-")
        try:
            os.chmod(self.tmp, 0o755)
            self.pub = os.path.join(self.tmp, "pub")
            os.mkdir(self.pub)
            self.state_dir = os.path.join(self.tmp, "state")
            self.plugin = (LocalPlugin if LOCAL else Plugin)(self.tmp)
            self.plugin.start(self.plugin_flags)
            self.fs = nt.Nodefs(config_text(self.tmp, self.plugin,
                                            self.extra_nodefs, self.extra,
                                            self.csi_timeout, self.retry_backoff),
                                state_dir=self.state_dir, env=self.env)
            self.fs.__enter__()
            self.wait_plugin_ready()
        except BaseException:
            self._teardown()
            raise
        return self

    def _teardown(self):
        problems = []
        self.final_log = ""
        try:
            problems, self.final_log = nt.end_daemon(self.fs)
        finally:
            if self.plugin is not None:
                problems += self.plugin.stop()
            if self.tmp:
                unmount_all_under(self.tmp)
                detach_loops_under(self.tmp)
                shutil.rmtree(self.tmp, ignore_errors=True)
        return problems

    def __exit__(self, exc_type, exc, tb):
        plog = self.plugin.log() if self.plugin is not None else ""
        problems = self._teardown()
        log = self.final_log
        if problems and exc_type is None:
            raise nt.DaemonError("; ".join(problems) + "\nlog:\n" + log +
                                 "\nplugin log:\n" + plog)
        return False

    # ---- helpers -------------------------------------------------------
    def wait_plugin_ready(self, timeout=15):
        ok = nt.wait_until(
            lambda: self.fs.read("plugins", "hostpath", "health").startswith("READY")
            and "not fetched" not in self.fs.read("plugins", "hostpath", "capabilities"),
            timeout)
        if not ok:
            raise AssertionError("plugin not READY: %r\n%s" % (
                self.fs.read("plugins", "hostpath", "health"), self.plugin.log()))

    def restart_plugin(self, flags=()):
        """Restart the plugin with other flags (its volumes persist in
        state.json) and wait until nodefs sees it READY again."""
        self.plugin.restart(flags)
        self.wait_plugin_ready()

    def target(self, *parts):
        return os.path.join(self.pub, *parts)

    def ctl(self, rel, line, flags=0):
        """(ok, errname) of writing one line to rel (a ctl file)."""
        ok, err = self.fs.write_ctl(rel, line, flags)
        return ok, nt.errname(err)

    def sh(self, script, timeout=60):
        """bash -c script at the mountpoint -> (rc, stderr)."""
        p = self.fs.sh(script, timeout=timeout)
        return p.returncode, p.stderr

    def vread(self, name, f):
        return self.fs.read("volumes", name, f).strip()

    def state(self, name):
        return self.vread(name, "state")

    def volumes(self):
        return [v for v in self.fs.listdir("volumes") if v not in ("ctl", "error")]

    def calls(self):
        """{rpc: attempts} nodefs made, from the metrics file."""
        out = {}
        for line in self.fs.read("metrics", "nodefs.prom").splitlines():
            if not line.startswith("nodefs_csi_rpcs_total{"):
                continue
            labels, _, val = line.rpartition(" ")
            rpc = labels.split('rpc="', 1)[1].split('"', 1)[0]
            out[rpc] = out.get(rpc, 0) + int(float(val))
        return out

    def volume_calls(self):
        c = self.calls()
        return {k: c.get(k, 0) for k in VOLUME_RPCS}

    def ops(self):
        """Operation ids as listed (the directory's order)."""
        return [o for o in os.listdir(self.fs.path("operations"))]

    def op(self, oid):
        d = {}
        for f in ("type", "object", "command", "state", "error", "attempts",
                  "created", "finished", "remote_status"):
            try:
                d[f] = self.fs.read("operations", oid, f).strip()
            except OSError:
                d[f] = None
        return d

    def last_op(self, obj=None):
        ids = self.ops()
        for oid in reversed(ids):
            if obj is None or self.op(oid)["object"] == obj:
                return oid, self.op(oid)
        return None, None

    def open_events(self):
        return os.open(self.fs.path("events"), os.O_RDONLY | os.O_NONBLOCK)

    def drain_events(self, fd):
        return drain_events(fd)

    def volume_walk(self, events, name):
        """The states volume name went through, in order, from events."""
        return [e["new"] for e in events
                if e.get("kind") == "volume" and e.get("name") == name and e.get("new")]

    def vol_id(self, name):
        return self.vread(name, "id")

    def snapshot(self, name=None):
        """What a rejected command must not change."""
        snap = {"volumes": self.volumes(), "plugin_state": self.plugin.state(),
                "calls": self.volume_calls(),
                "mounts": mounts_under(self.pub), "operations": self.ops()}
        if name:
            snap["vstate"] = self.state(name)
            snap["target"] = self.vread(name, "target")
            snap["info"] = json.loads(self.fs.read("volumes", name, "info.json"))
        return snap

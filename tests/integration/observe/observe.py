# SPDX-License-Identifier: LGPL-2.1-or-later
"""observe: what the observability tests share.

A World is one nodefs mount with real things in it: the CSI test plugin
(tests/fixtures/csi/plugin.py on python3-grpcio) on a temporary socket as
the default plugin, and, when the run has a dockerd (NODEFS_TEST_DOCKER_HOST
from tests/fixtures/dockerd.sh), the docker runtime with the image
nodefs-test/busybox. Everything it makes (volumes, containers, the plugin
process, its base dir, the mount) is undone on exit, also after a failure.

Also: an event reader over a raw descriptor (whole lines, JSON each) and a
parser of the Prometheus text format strict enough to catch what promtool
would. Stdlib only; runs under /usr/bin/python3.
"""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time

import nodefs_test as nt

PLUGIN = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "csi", "plugin.py")
IMAGE = "nodefs-test/busybox"


def docker_host():
    return os.environ.get("NODEFS_TEST_DOCKER_HOST", "")


def require_plugin():
    """Skip (77) without what the CSI test plugin needs."""
    nt.requires("csi-plugin")


def require_docker():
    nt.requires("docker")


class Plugin:
    """The CSI test plugin on a temporary socket; stop() undoes it."""

    def __init__(self, tmp, args=()):
        self.dir = tempfile.mkdtemp(prefix="csi-", dir=tmp)
        self.sock = os.path.join(self.dir, "csi.sock")
        self.base = os.path.join(self.dir, "base")
        self.log_path = os.path.join(self.dir, "plugin.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", PLUGIN, "--endpoint", "unix://" + self.sock,
             "--base", self.base] + list(args),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        if not nt.wait_until(lambda: os.path.exists(self.sock)
                             or self.proc.poll() is not None, 30):
            self.stop()
            raise AssertionError("CSI plugin did not listen in 30 s")
        if self.proc.poll() is not None:
            log = self.log()
            self.stop()
            raise AssertionError("CSI plugin exited: " + log)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        # the plugin's bind mounts (stage/publish) under its base, if any
        with open("/proc/self/mounts") as f:
            mounts = [ln.split()[1] for ln in f]
        for m in sorted((m for m in mounts if m.startswith(self.dir + "/")),
                        reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def config(plugin_sock, with_docker, nodefs_extra=""):
    c = ("[nodefs]\n"
         "allowed_targets = /tmp\n"
         + nodefs_extra +
         "\n"
         "[plugin hostpath]\n"
         "endpoint = unix://%s\n"
         "default = yes\n" % plugin_sock)
    if with_docker:
        c += "\n[runtime docker]\nendpoint = %s\n" % docker_host()
    return c


class World:
    """`with World(docker=True) as w:` a mount with a plugin (and docker).

    w.fs is the nt.Nodefs; w.ctl(rel, line) writes a command and raises with
    the error file's line on failure; volumes and containers made through
    w.volume()/w.container() are destroyed on exit."""

    def __init__(self, docker=False, plugin_args=(), nodefs_extra="", env=None):
        """nodefs_extra: lines added to the config's [nodefs] section; env:
        extra environment of nodefs."""
        self.docker = docker
        self.env = env
        self.plugin_args = plugin_args
        self.nodefs_extra = nodefs_extra
        self.tmp = None
        self.plugin = None
        self.fs = None
        self.volumes = []
        self.containers = []

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="nodefs-observe-")
        os.chmod(self.tmp, 0o755)
        try:
            self.plugin = Plugin(self.tmp, self.plugin_args)
            self.fs = nt.Nodefs(config(self.plugin.sock, self.docker, self.nodefs_extra),
                                env=self.env)
            self.fs.__enter__()
            ok = nt.wait_until(lambda: self.fs.read(
                "plugins", "hostpath", "health").startswith("READY"), 20)
            if not ok:
                raise AssertionError("plugin not READY: %r" % self.fs.read(
                    "plugins", "hostpath", "health"))
            if self.docker:
                ok = nt.wait_until(lambda: self.fs.read(
                    "runtimes", "docker", "status").startswith("healthy"), 20)
                if not ok:
                    raise AssertionError("docker runtime: %r" % self.fs.read(
                        "runtimes", "docker", "status"))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.fs is not None and self.fs.proc is not None:
                for c in self.containers:
                    if os.path.isdir(self.fs.path("containers", c)):
                        self.fs.write_ctl("containers/%s/ctl" % c, "destroy")
                for v in self.volumes:
                    if os.path.isdir(self.fs.path("volumes", v)):
                        self.fs.write_ctl("volumes/%s/ctl" % v, "destroy")
        finally:
            try:
                if self.fs is not None:
                    self.fs.__exit__(exc_type, exc, tb)
            finally:
                if self.plugin is not None:
                    self.plugin.stop()
                shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def ctl(self, rel, line, flags=0):
        ok, err = self.fs.write_ctl(rel, line, flags)
        if not ok:
            d = os.path.dirname(rel)
            raise AssertionError("%s <- %r: %s: %s" % (
                rel, line, nt.errname(err), self.fs.error(d).strip()))

    def volume(self, name, publish=False):
        self.volumes.append(name)
        self.ctl("volumes/ctl", "create %s size=16M" % name)
        if publish:
            target = os.path.join(self.tmp, "pub-" + name)
            self.ctl("volumes/%s/ctl" % name, "publish " + target)
        return name

    def container(self, name, cmd="sleep 600", run=True):
        self.containers.append(name)
        quoted = cmd.replace("\\", "\\\\").replace('"', '\\"')
        self.ctl("containers/ctl", '%s %s runtime=docker image=%s cmd="%s"'
                 % ("run" if run else "create", name, IMAGE, quoted))
        return name

    def state(self, kind, name):
        return self.fs.read(kind, name, "state").strip()


class EventReader:
    """Reads the events file through one descriptor: whole lines, one JSON
    object each. The open happens in the constructor (a reader starts at
    the present)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY)
        self.buf = b""
        self.seen = []
        self.lost = []     # the N of each {"lost":N} line

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read_until(self, want, timeout=10.0):
        """Events up to and including the first one with want(ev) true;
        None as the match when timeout passed first."""
        deadline = time.monotonic() + nt.scaled(timeout)
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                ev = json.loads(line)
                if list(ev) == ["lost"]:
                    self.lost.append(ev["lost"])
                    continue
                self.seen.append(ev)
                if want(ev):
                    return ev
            left = deadline - time.monotonic()
            if left <= 0 or not p.poll(max(1, int(left * 1000))):
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise AssertionError("EOF on events")
            if not chunk.endswith(b"\n"):
                raise AssertionError("a read ended inside a line: %r"
                                     % chunk[-80:])
            self.buf += chunk


def state_changes(events, kind, name):
    """[(old, new), ...] of the state events for one object."""
    return [(e.get("old"), e.get("new")) for e in events
            if e.get("kind") == kind and e.get("name") == name
            and "new" in e]


# ---- the Prometheus text format (version 0.0.4) ----

METRIC_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")


def parse_prom(text):
    """Parse the exposition text strictly; returns {family: {"type", "help",
    "samples": [(name, labels_dict, value)]}}. Raises ValueError on a
    second HELP/TYPE, a TYPE after samples, a family whose samples are not
    together, a bad name, label or value, or a missing trailing newline."""
    if not text.endswith("\n"):
        raise ValueError("no trailing newline")
    fams, order, current = {}, [], None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d: %r" % (n, line)
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 and line.startswith("# TYPE "):
                raise ValueError("short TYPE " + where)
            kind, name = parts[1], parts[2]
            if not METRIC_RE.match(name):
                raise ValueError("bad name " + where)
            f = fams.setdefault(name, {"type": None, "help": None,
                                       "samples": []})
            key = kind.lower()
            if f[key] is not None:
                raise ValueError("second %s %s" % (kind, where))
            if f["samples"]:
                raise ValueError("%s after samples %s" % (kind, where))
            f[key] = parts[3] if len(parts) > 3 else ""
            if name not in order:
                order.append(name)
            elif order[-1] != name:
                raise ValueError("family not together " + where)
            current = name
            continue
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)"
                     r"(\s+-?\d+)?$", line)
        if not m:
            raise ValueError("bad sample " + where)
        name, labels, value = m.group(1), m.group(2), m.group(3)
        lab = {}
        if labels:
            inner = labels[1:-1]
            pos = 0
            while pos < len(inner):
                lm = LABEL_RE.match(inner, pos)
                if not lm:
                    raise ValueError("bad labels " + where)
                if lm.group(1) in lab:
                    raise ValueError("label twice " + where)
                lab[lm.group(1)] = lm.group(2)
                pos = lm.end()
                if pos < len(inner):
                    if inner[pos] != ",":
                        raise ValueError("bad labels " + where)
                    pos += 1
        float(value.replace("+Inf", "inf").replace("-Inf", "-inf"))
        fam = name
        if fam not in fams:
            for s in SUFFIXES:
                if name.endswith(s) and name[:-len(s)] in fams:
                    fam = name[:-len(s)]
                    break
        if fam not in fams:
            fams[fam] = {"type": "untyped", "help": None, "samples": []}
            order.append(fam)
        if order[-1] != fam and fam != current:
            raise ValueError("family %s not together %s" % (fam, where))
        current = fam
        fams[fam]["samples"].append((name, lab, value))
    return fams

# SPDX-License-Identifier: LGPL-2.1-or-later
"""csilocal: what the tests of nodefs-csi-local share.

A Local is one temp dir holding a running nodefs-csi-local (its socket, its
base dir, its log) and a python3-grpcio client on stubs generated from
csi/csi.proto by the test plugin's own loader (tests/fixtures/csi/plugin.py
load_stubs: protoc + grpc_python_plugin), so the plugin is driven by a gRPC
stack that is not ours. Leaving it stops the plugin, lazily unmounts what
is left under the temp dir, detaches the loop devices of its images and
removes it, on every exit path.

    with Local(backing="dir") as pl:
        code, resp = pl.call("Controller", "CreateVolume", name="a", ...)

call() returns (grpc.StatusCode name, response or details) and never raises
for a status. Environment: CSI_LOCAL_BIN (the binary; set by meson).
"""

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import nodefs_test as nt

SRC = nt.NODEFS_SRC
BIN = os.environ.get("CSI_LOCAL_BIN", "")
PLUGIN_PY = os.path.join(SRC, "tests", "fixtures", "csi", "plugin.py")
PROTO = os.path.join(SRC, "csi", "csi.proto")

_stubs = None


def stubs():
    """(csi_pb2, csi_pb2_grpc), generated once per process."""
    global _stubs
    if _stubs is None:
        spec = importlib.util.spec_from_file_location("csi_test_plugin", PLUGIN_PY)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _stubs = mod.load_stubs(PROTO)
    return _stubs


def require():
    """Root, the binary, grpcio and the stub compilers, or exit 77."""
    if os.geteuid() != 0:
        nt.skip("needs root (mounts)")
    if not BIN or not os.access(BIN, os.X_OK):
        nt.skip("CSI_LOCAL_BIN not set or not executable: %r" % BIN)
    p = subprocess.run(["/usr/bin/python3", "-c", "import grpc, google.protobuf"],
                       capture_output=True)
    if p.returncode != 0:
        nt.skip("python3-grpcio or python3-protobuf missing")
    for prog in ("protoc", "/usr/bin/grpc_python_plugin"):
        if shutil.which(prog) is None:
            nt.skip("%s missing (protobuf-compiler, protobuf-compiler-grpc)" % prog)


def loop_devices_ok():
    """Why image backing cannot run here, or None."""
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control (loop devices)"
    for prog in ("mkfs.ext4", "resize2fs"):
        if shutil.which(prog) is None:
            return "%s missing (e2fsprogs)" % prog
    return None


def loops_of(path):
    """Loop devices backed by files under path."""
    out = []
    p = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"],
                       capture_output=True, text=True)
    for line in p.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].startswith(path):
            out.append(parts[0])
    return out


def wait_loops_gone(path, timeout=10):
    """Whether the loop devices backed by files under path are gone within
    timeout (scaled). The plugin's LOOP_CLR_FD detaches at once only when
    nothing else has the device open; one that another opener still holds
    (a probe of the device after its unmount) the kernel detaches when that
    opener closes it, a moment later on a loaded machine."""
    return nt.wait_until(lambda: not loops_of(path), timeout)


class Local:
    def __init__(self, backing="dir", args=(), base=None):
        self.backing = backing
        self.base_at = base
        self.args = list(args)
        self.tmp = None
        self.proc = None
        self.channel = None

    # ---- process ----
    def __enter__(self):
        import grpc
        self.grpc = grpc
        self.pb, self.pbg = stubs()
        self.tmp = tempfile.mkdtemp(prefix="nodefs-csilocal-")
        os.chmod(self.tmp, 0o755)
        self.sock = os.path.join(self.tmp, "csi.sock")
        self.base = self.base_at or os.path.join(self.tmp, "base")
        self.pub = os.path.join(self.tmp, "pub")
        os.mkdir(self.pub)
        self.log_path = os.path.join(self.tmp, "plugin.log")
        try:
            self.start()
        except BaseException:
            self._cleanup()
            raise
        return self

    def start(self, env_endpoint=False, timeout=20):
        log = open(self.log_path, "ab")
        argv = [BIN, "--base-dir", self.base, "--backing", self.backing,
                "--node-id", "node-1"] + self.args
        env = dict(os.environ)
        if env_endpoint:
            env["CSI_ENDPOINT"] = "unix://" + self.sock
        else:
            argv += ["--endpoint", "unix://" + self.sock]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=log, env=env, cwd="/")
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("plugin exited (%d): %s" % (self.proc.returncode, self.log()))
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.sock)
                break
            except OSError:
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                raise AssertionError("plugin did not listen: " + self.log())
            time.sleep(0.02)
        self.channel = self.grpc.insecure_channel("unix://" + self.sock)
        self.stub = {
            "Identity": self.pbg.IdentityStub(self.channel),
            "Controller": self.pbg.ControllerStub(self.channel),
            "Node": self.pbg.NodeStub(self.channel),
        }

    def stop(self, sig=signal.SIGTERM):
        """Stop the plugin; returns its exit status (None if not running)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill9(self):
        return self.stop(signal.SIGKILL)

    def _cleanup(self):
        try:
            self.stop()
        finally:
            if self.tmp:
                nt.unmount_all_under(self.tmp)
                for dev in loops_of(self.tmp):
                    subprocess.run(["losetup", "-d", dev], capture_output=True)
                shutil.rmtree(self.tmp, ignore_errors=True)

    def __exit__(self, exc_type, exc, tb):
        rc = None
        log = self.log()
        try:
            rc = self.stop()
        finally:
            self._cleanup()
        if exc_type is None and rc not in (0, None):
            raise AssertionError("plugin exited %s at stop:\n%s" % (rc, log))
        return False

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-8000:]
        except OSError:
            return ""

    # ---- calls ----
    def call(self, svc, rpc, timeout=60, **fields):
        req = getattr(self.pb, rpc + "Request")(**fields)
        try:
            return "OK", getattr(self.stub[svc], rpc)(req, timeout=timeout)
        except self.grpc.RpcError as e:
            return e.code().name, e.details()

    def ok(self, svc, rpc, **fields):
        code, resp = self.call(svc, rpc, **fields)
        if code != "OK":
            raise AssertionError("%s: %s %s" % (rpc, code, resp))
        return resp

    def raw(self, path, data, timeout=10):
        """A unary call with raw request bytes: (code name, bytes or details)."""
        fn = self.channel.unary_unary(path, request_serializer=None,
                                      response_deserializer=None)
        try:
            return "OK", fn(data, timeout=timeout)
        except self.grpc.RpcError as e:
            return e.code().name, e.details()

    # ---- message helpers ----
    def cap(self, block=False, fs_type="", flags=(), mode="SINGLE_NODE_WRITER"):
        pb = self.pb
        c = pb.VolumeCapability(access_mode=pb.VolumeCapability.AccessMode(
            mode=getattr(pb.VolumeCapability.AccessMode, mode)))
        if block:
            c.block.SetInParent()
        else:
            c.mount.fs_type = fs_type
            c.mount.mount_flags.extend(flags)
        return c

    def state_files(self):
        """{file: bytes} of the plugin's records: what must not change."""
        d = os.path.join(self.base, "state")
        out = {}
        for f in sorted(os.listdir(d)):
            with open(os.path.join(d, f), "rb") as fh:
                out[f] = fh.read()
        return out

    def data_files(self):
        return sorted(os.listdir(os.path.join(self.base, "data")))

    def mounts(self):
        return nt.mounts_under(self.tmp)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""etcdtest: a real three-member etcd cluster on loopback ports for a test.

    with etcdtest.Etcd() as e:          # started, healthy, in a temp dir
        e.endpoints                     # "http://127.0.0.1:P1 http://..."
        e.kill(0); e.kill(1)            # SIGKILL members (quorum lost)
        e.kill(0, signal.SIGSTOP)        # or stop one (e.cont(0) resumes)
        e.start(0); e.start(1)          # back, same data dirs
        e.ctl("put", "/k", "v")         # etcdctl against the live members
        e.replace(0)                    # member remove, then a new member added
        e.watchers()                    # watchers the members hold, summed

Ports are picked free by binding port 0; data dirs live under one temp dir
removed on exit, with every member stopped. Members start with short
election timeouts so a test's quorum faults settle in well under a second.
Knows nothing of nodefs. Stdlib only.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")


def why_not():
    if not ETCD or not ETCDCTL:
        return "etcd and etcdctl are not installed (etcd-server, etcd-client)"
    return None


def _free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class Etcd:
    def __init__(self, members=3, tls=None, base=None, wait=True, timing=(50, 500), nice=0):
        """wait=False: __enter__ starts the members without waiting for
        them to be healthy (wait_healthy() then), so nodes can start
        meanwhile. timing: the raft heartbeat interval and election
        timeout, ms (short by default, so a test's quorum faults settle
        fast; etcd's own are 100 and 1000). nice: the members' nice value
        (a benchmark that loads the machine keeps etcd's heartbeats on
        time with a negative one, as its own cores would)."""
        self.wait = wait
        self.timing = timing
        self.nice = nice
        self.n = members
        self.tls = tls  # dict(ca=, cert=, key=) for the client port, or None
        self.tmp = tempfile.mkdtemp(prefix="nodefs-etcd-", dir=base)
        ports = _free_ports(2 * members)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:]
        self.procs = [None] * members
        scheme = "https" if tls else "http"
        self.urls = ["%s://127.0.0.1:%d" % (scheme, p) for p in self.client_ports]
        self.endpoints = " ".join(self.urls)
        self.names = ["m%d" % i for i in range(members)]
        self.state = ["new"] * members
        self._set_cluster()

    def _set_cluster(self):
        self.cluster = ",".join("%s=http://127.0.0.1:%d" % (self.names[i], p)
                                for i, p in enumerate(self.peer_ports))

    def start(self, i):
        if self.procs[i] and self.procs[i].poll() is None:
            return
        d = os.path.join(self.tmp, self.names[i])
        argv = [ETCD, "--name", self.names[i], "--data-dir", d,
                "--listen-client-urls", self.urls[i],
                "--advertise-client-urls", self.urls[i],
                "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                "--initial-cluster", self.cluster,
                "--initial-cluster-token", os.path.basename(self.tmp),
                "--initial-cluster-state", self.state[i],
                "--heartbeat-interval", str(self.timing[0]),
                "--election-timeout", str(self.timing[1]),
                "--logger", "zap", "--log-level", "error"]
        if self.tls:
            argv += ["--trusted-ca-file", self.tls["ca"], "--cert-file", self.tls["cert"],
                     "--key-file", self.tls["key"], "--client-cert-auth"]
        log = open(os.path.join(self.tmp, "m%d.log" % i), "ab")
        nice = self.nice
        self.procs[i] = subprocess.Popen(argv, stdout=log, stderr=log,
                                         start_new_session=True,
                                         preexec_fn=(lambda: os.nice(nice)) if nice else None)
        log.close()

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(sig)
            if sig == signal.SIGKILL:
                p.wait()

    def replace(self, i):
        """Member i is lost and replaced as an operator replaces a machine:
        killed, removed from the cluster (member remove), and a new member
        (a new name, a new peer port, an empty data dir) added (member add)
        and started with --initial-cluster-state existing; it keeps the
        client URL, the one nodes were configured with."""
        self.kill(i)
        others = [self.urls[k] for k in range(self.n)
                  if k != i and self.procs[k] and self.procs[k].poll() is None]
        ms = json.loads(self.ctl_on(others, "member", "list", "-w", "json"))["members"]
        (mid,) = [m["ID"] for m in ms if m.get("name") == self.names[i]]
        # the others elect a leader first when the lost one led
        self.wait_healthy()
        self._retry(others, "member", "remove", "%x" % mid)
        self.names[i] = "%s-r%d" % (self.names[i].split("-")[0], time.monotonic_ns() % 100000)
        self.peer_ports[i] = _free_ports(1)[0]
        # (refused as "unhealthy cluster" until the others have been
        # connected to each other for etcd's health interval, 5 s)
        self._retry(others, "member", "add", self.names[i],
                    "--peer-urls=http://127.0.0.1:%d" % self.peer_ports[i])
        self._set_cluster()
        self.state[i] = "existing"
        self.start(i)

    def _retry(self, urls, *args, timeout=20):
        end = time.monotonic() + timeout
        while True:
            try:
                return self.ctl_on(urls, *args)
            except AssertionError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.25)

    def watchers(self):
        """The watchers the live members hold (etcd_debugging_mvcc_watcher_total,
        summed): one per watch a client has open."""
        total = 0
        for i in range(self.n):
            if not self.procs[i] or self.procs[i].poll() is not None:
                continue
            with urllib.request.urlopen(self.urls[i] + "/metrics", timeout=3) as f:
                for line in f.read().decode().splitlines():
                    if line.startswith("etcd_debugging_mvcc_watcher_total "):
                        total += int(float(line.split()[1]))
        return total

    def cont(self, i):
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(signal.SIGCONT)

    def ctl(self, *args, check=True, timeout=10):
        return self.ctl_on(self.urls, *args, check=check, timeout=timeout)

    def ctl_on(self, urls, *args, check=True, timeout=10):
        env = dict(os.environ, ETCDCTL_API="3")
        argv = [ETCDCTL, "--endpoints", ",".join(urls), "--command-timeout=3s"]
        if self.tls:
            argv += ["--cacert", self.tls["ca"], "--cert", self.tls["client_cert"],
                     "--key", self.tls["client_key"]]
        r = subprocess.run(argv + list(args), env=env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("etcdctl %s: %s" % (" ".join(args), r.stderr))
        return r.stdout

    def healthy(self, i):
        if self.tls:
            r = subprocess.run([ETCDCTL, "--endpoints", self.urls[i], "--cacert",
                                self.tls["ca"], "--cert", self.tls["client_cert"], "--key",
                                self.tls["client_key"], "endpoint", "health"],
                               env=dict(os.environ, ETCDCTL_API="3"), capture_output=True)
            return r.returncode == 0
        try:
            with urllib.request.urlopen(self.urls[i] + "/health", timeout=1) as f:
                return b'"true"' in f.read()
        except OSError:
            return False

    def wait_healthy(self, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(self.healthy(i) for i in range(self.n)
                   if self.procs[i] and self.procs[i].poll() is None):
                return
            time.sleep(0.05)
        raise AssertionError("etcd not healthy after %ss: %s" % (timeout, self.logs()))

    def logs(self):
        out = []
        for i in range(self.n):
            try:
                with open(os.path.join(self.tmp, "m%d.log" % i), errors="replace") as f:
                    out.append("m%d: %s" % (i, f.read()[-2000:]))
            except OSError:
                pass
        return "\n".join(out)

    def __enter__(self):
        try:
            for i in range(self.n):
                self.start(i)
            if self.wait:
                self.wait_healthy()
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        for i in range(self.n):
            self.kill(i)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __exit__(self, *exc):
        self.close()

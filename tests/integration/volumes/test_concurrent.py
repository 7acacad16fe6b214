# SPDX-License-Identifier: LGPL-2.1-or-later
"""50 volumes created and published concurrently from parallel shells,
then unpublished and destroyed concurrently, against the real plugin.

What it proves: 50 bash processes each running
`echo create ... > volumes/ctl && echo publish ... > volumes/vN/ctl` at
once all succeed; every volume is PUBLISHED at its own target with its own
plugin volume behind it (a file written through each target lands in that
volume and no other); the plugin holds exactly 50 volumes (no create made
two); each volume's operations ran in order; and the concurrent teardown
leaves no volume, no plugin volume and no mount behind.
"""

import os
import subprocess
import unittest

import nodefs_test as nt
import voltest as vt

N = 50


class ConcurrentTest(unittest.TestCase):
    def run_parallel(self, env, scripts, timeout=120):
        procs = [subprocess.Popen(["bash", "-c", s], cwd=env.fs.mnt,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for s in scripts]
        bad = []
        for s, p in zip(scripts, procs):
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                bad.append((s, err))
        return bad

    def test_fifty_parallel_shells(self):
        with vt.VolEnv() as env:
            scripts = []
            for i in range(N):
                tgt = env.target("c", "v%02d" % i)
                scripts.append("echo 'create v%02d size=%dM' > volumes/ctl && "
                               "echo 'publish %s' > volumes/v%02d/ctl && "
                               "echo v%02d > %s/who" % (i, i + 1, tgt, i, i, tgt))
            bad = self.run_parallel(env, scripts)
            self.assertEqual(bad, [])
            self.assertEqual(sorted(env.volumes()), ["v%02d" % i for i in range(N)])
            pst = env.plugin.state()
            self.assertEqual(len(pst), N)
            ids = set()
            for i in range(N):
                name = "v%02d" % i
                self.assertEqual(env.state(name), "PUBLISHED", name)
                vid = env.vol_id(name)
                ids.add(vid)
                self.assertEqual(pst[vid]["capacity"], (i + 1) << 20)
                self.assertEqual(pst[vid]["published"], [env.target("c", name)])
                with open(os.path.join(env.plugin.volume_dir(vid), "who")) as f:
                    self.assertEqual(f.read(), name + "\n")
            self.assertEqual(len(ids), N)
            self.assertEqual(len(vt.mounts_under(env.pub)), N)
            # per volume, its operations in the order its commands came
            per = {}
            for oid in env.ops():
                op = env.op(oid)
                per.setdefault(op["object"], []).append((op["type"], op["state"]))
            for i in range(N):
                self.assertEqual(per["volumes/v%02d" % i],
                                 [("volume.create", "FINISHED"), ("volume.publish", "FINISHED")])

            scripts = ["echo unpublish > volumes/v%02d/ctl && rmdir volumes/v%02d" % (i, i)
                       for i in range(N)]
            bad = self.run_parallel(env, scripts)
            self.assertEqual(bad, [])
            self.assertEqual(env.volumes(), [])
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

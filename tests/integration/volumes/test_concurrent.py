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

A command written to a volume whose directory has just appeared, before its
create is queued, never runs ahead of the create: it gets EBUSY ("being
created") or waits its turn, and the plugin ends with exactly the volumes
nodefs lists, their checkpoints and no others.
"""

import os
import subprocess
import threading
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

    def race(self, env, name, line):
        """create NAME while another thread writes line to NAME/ctl as soon
        as the directory is there; returns (create errno, line's errno)."""
        stop = threading.Event()
        got = []

        def writer():
            p = env.fs.path("volumes", name, "ctl")
            while not stop.is_set():
                ok, err = nt.write_line(p, line)
                if err != 2:        # ENOENT: not there yet
                    got.append(err)
                    return
        t = threading.Thread(target=writer)
        t.start()
        ok, err = env.fs.write_ctl("volumes/ctl", "create %s size=1M" % name)
        stop.set()
        t.join(60)
        return err, (got[0] if got else None)

    def check_consistent(self, env):
        listed = sorted(env.volumes())
        on_plugin = sorted(v["name"] for v in env.plugin.state().values())
        ids = sorted(env.vol_id(n) for n in listed)
        self.assertEqual(sorted(env.plugin.state().keys()), ids,
                         "the plugin holds volumes nodefs does not list: %s" % on_plugin)
        records = sorted(f[:-5] for f in os.listdir(os.path.join(env.state_dir, "volumes"))
                         if f.endswith(".json"))
        self.assertEqual(records, listed)

    def test_command_racing_its_create(self):
        with vt.VolEnv() as env:
            seen = set()
            for i in range(15):
                for line in ("destroy", "publish " + env.target("r%d" % i)):
                    name = "r%d%s" % (i, line[0])
                    cerr, lerr = self.race(env, name, line)
                    self.assertEqual(cerr, 0, nt.errname(cerr))
                    self.assertIn(lerr, (None, 0, 16), nt.errname(lerr))   # EBUSY
                    seen.add(nt.errname(lerr) if lerr is not None else "-")
                    self.check_consistent(env)
                    if name in env.volumes():
                        if env.state(name) == "PUBLISHED":
                            self.assertEqual(env.ctl("volumes/%s/ctl" % name, "unpublish"),
                                             (True, "OK"))
                        self.assertEqual(env.ctl("volumes/%s/ctl" % name, "destroy"),
                                         (True, "OK"))
            self.check_consistent(env)
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

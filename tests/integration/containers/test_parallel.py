# SPDX-License-Identifier: LGPL-2.1-or-later
"""Many containers at once through one mount: 20 Docker runs and 10 LXC runs
written from parallel shells (one `echo run ... > containers/ctl` each, all
in flight together). Every write must succeed, every container must be
RUNNING in the mount and in its engine, with its own pid and its own limit;
then they are destroyed in parallel too and nothing is left in either
engine. Wall times are printed (the commands, not a benchmark).
"""

import unittest

import ctest
import nodefs_test as nt
from ctest import IMAGE, lxc


class Parallel(unittest.TestCase):
    def check_all(self, env, names, runtime):
        pids = set()
        for n in names:
            self.assertEqual(env.state(n), "RUNNING", n)
            self.assertEqual(env.cread(n, "runtime").strip(), runtime)
            self.assertEqual(env.stats(n)["memory_limit_bytes"], 32 << 20, n)
            pids.add(env.cread(n, "pid").strip())
        self.assertEqual(len(pids), len(names), "two containers share a pid")

    def destroy_all(self, env, names):
        script = ["cd %s" % ctest._shq(env.fs.mnt)]
        for n in names:
            script.append("echo destroy > containers/%s/ctl &" % n)
        script.append("wait")
        p = env.fs.sh("\n".join(script), timeout=120)
        self.assertEqual(p.stderr, "")
        for n in names:
            env.wait_gone(n, 20)

    def test_twenty_docker_in_parallel(self):
        nt.requires("docker")
        with ctest.Env() as env:
            names = [env.name("d%02d" % i) for i in range(20)]
            lines = ["run %s runtime=docker image=%s cmd='sleep 1000' memory=32M" % (n, IMAGE)
                     for n in names]
            res, wall = ctest.shell_parallel(env.fs.mnt, lines)
            print("20 docker runs from parallel shells: %.2f s" % wall)
            for line, (rc, err) in res.items():
                self.assertEqual((rc, err), (0, ""), line)
            self.check_all(env, names, "docker")
            self.assertEqual(ctest.docker_names(env.tag), sorted(env.prefix + n for n in names))
            running = ctest.docker("ps", "--format", "{{.Names}}", "--filter",
                                   "name=" + env.tag).stdout.split()
            self.assertEqual(len(running), 20)
            self.destroy_all(env, names)
            self.assertEqual(ctest.docker_names(env.tag), [])

    def test_ten_lxc_in_parallel(self):
        nt.requires("lxc")
        with ctest.Env() as env:
            names = [env.name("l%02d" % i) for i in range(10)]
            lines = ["run %s runtime=lxc template=busybox cmd='sleep 1000' memory=32M" % n
                     for n in names]
            res, wall = ctest.shell_parallel(env.fs.mnt, lines)
            print("10 lxc runs from parallel shells: %.2f s" % wall)
            for line, (rc, err) in res.items():
                self.assertEqual((rc, err), (0, ""), line)
            self.check_all(env, names, "lxc")
            r = lxc("lxc-ls", "-P", env.lxcpath, "--running", "-1")
            self.assertEqual(sorted(r.stdout.split()), sorted(env.engine(n) for n in names))
            self.destroy_all(env, names)
            self.assertEqual(lxc("lxc-ls", "-P", env.lxcpath, "-1").stdout.split(), [])


if __name__ == "__main__":
    ctest.main()

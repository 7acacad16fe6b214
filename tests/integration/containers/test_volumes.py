# SPDX-License-Identifier: LGPL-2.1-or-later
"""volume=VOLNAME:/path[:ro] through the mount: a volume made and published
by nodefs on the test CSI plugin (tests/fixtures/csi/plugin.py, real bind
mounts), mounted into a Docker and an LXC container, and seen from inside
(exec) and from the host. A volume that is not published is refused with a
reason and nothing is created. Skips a runtime whose engine is missing;
skips whole when python3-grpcio is missing.
"""

import os
import unittest

import ctest
import nodefs_test as nt
from ctest import IMAGE


class Volumes(unittest.TestCase):
    def make_volume(self, env, vol):
        env.must("volumes/ctl", "create %s size=16M" % vol)
        target = os.path.join(env.pub, vol)
        env.must("volumes/%s/ctl" % vol, "publish %s" % target)
        self.assertEqual(env.read("volumes", vol, "state").strip(), "PUBLISHED")
        with open(os.path.join(target, "seed"), "w") as f:
            f.write("seeded-by-host\n")
        return target

    def check_inside(self, env, name, target):
        _, out, code = env.exec_fd(name, "cat /data/seed")
        self.assertEqual((out, code), ("seeded-by-host\n", "0"))
        _, out, code = env.exec_fd(name, 'sh -c "echo from-%s > /data/%s"' % (name, name))
        self.assertEqual(code, "0", out)
        with open(os.path.join(target, name)) as f:
            self.assertEqual(f.read(), "from-%s\n" % name)
        _, out, code = env.exec_fd(name, 'sh -c "echo x > /ro/x"')
        self.assertNotEqual(code, "0", "a :ro volume was writable")

    def test_volume_inside_containers(self):
        nt.requires("docker", "lxc")
        runtimes = [("docker", "runtime=docker image=%s cmd='sleep 1000'" % IMAGE),
                    ("lxc", "runtime=lxc template=busybox cmd='sleep 1000'")]
        with ctest.Env(csi=True) as env:
            vol = env.name("vol")
            target = self.make_volume(env, vol)
            names = []
            for rt, opts in runtimes:
                n = env.name(rt)
                env.run(n, "%s volume=%s:/data volume=%s:/ro:ro" % (opts, vol, vol))
                names.append(n)
                print("%s: volume %s seen inside" % (rt, vol))
                self.check_inside(env, n, target)
                self.assertIn(vol, env.cread(n, "info.json"))
            # an unpublished volume is refused, and nothing is made
            env.must("volumes/ctl", "create %s size=16M" % env.name("cold"))
            for rt, opts in runtimes:
                ok, err = env.ctl("containers/ctl", "run %s %s volume=%s:/data"
                                  % (env.name("x" + rt), opts, env.name("cold")))
                self.assertEqual((ok, err), (False, "EBUSY"))
                self.assertIn("publish", env.read("containers", "error"))
            self.assertEqual(sorted(env.containers()), sorted(names))
            for n in names:
                env.cctl(n, "destroy")
                env.wait_gone(n)
            env.must("volumes/%s/ctl" % vol, "destroy")

    def test_volume_in_use_is_busy(self):
        """unpublish and destroy of a volume a container mounts are EBUSY,
        naming the container; unpublish force does it anyway."""
        nt.requires("docker")
        with ctest.Env(csi=True) as env:
            vol = env.name("busy")
            self.make_volume(env, vol)
            n = env.name("user")
            env.run(n, "runtime=docker image=%s cmd='sleep 1000' volume=%s:/data" % (IMAGE, vol))
            for line in ("unpublish", "destroy"):
                ok, err = env.ctl("volumes/%s/ctl" % vol, line)
                self.assertEqual((ok, err), (False, "EBUSY"), line)
                self.assertIn(n, env.read("volumes", vol, "error"))
            self.assertEqual(env.read("volumes", vol, "state").strip(), "PUBLISHED")
            env.must("volumes/%s/ctl" % vol, "unpublish force")
            env.cctl(n, "destroy")
            env.wait_gone(n)
            env.must("volumes/%s/ctl" % vol, "destroy")


if __name__ == "__main__":
    ctest.main(csi_needed=True)

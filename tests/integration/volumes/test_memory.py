# SPDX-License-Identifier: LGPL-2.1-or-later
"""Memory: volumes made and destroyed give their memory back, against the
real plugin.

What it proves:
- After COUNT volumes are created and destroyed through volumes/ctl, and
  the kernel has forgotten their inodes (fs keeps a removed volume's
  inodes, and through them the volume, while the kernel holds them; the
  test drops the kernel's dentry and inode caches to make it forget), the
  daemon's RSS is back within BOUND of what it was before them: at most
  PER_VOLUME bytes a volume over SLACK. A first round of the same size is
  made and destroyed before the start is read, so the tables' first growth
  and the code the commands fault in are in the start.
- The figure measures something: the first round, on the fresh daemon,
  raised RSS by at least 512 bytes a volume (a volume costs about 1 KB;
  the second round reuses what the first gave back).
- The kernel forgets a destroyed volume's inodes by itself, without the
  test dropping its caches: after every file of 20 volumes was stat'ed
  and read, and the volumes destroyed through their ctl files, the
  mount's inode count (nodefs_fs_inodes) is back where it was, except for
  a file a process still holds open, which reads ENOENT and goes when it
  is closed. A walk (os.walk, which lists and enters directories) makes
  inodes for the directories only.
The bench (bench/store memory) does the same with 10,000 volumes and
csi-local; COUNT here is 250 (the Python plugin answers about 50 commands
a second on this machine, so 10,000 would take minutes). The sanitizer's
allocator keeps freed memory in quarantine: under ASan a cycle of 50
volumes runs and the volumes must be gone, but the bound is not asserted.
"""

import errno
import os
import subprocess
import time
import unittest

import nodefs_test as nt
import voltest as vt

PER_VOLUME = 256
SLACK = 192 * 1024


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


def sanitized():
    out = subprocess.run(["ldd", nt.NODEFS_BIN], capture_output=True, text=True).stdout
    return "libasan" in out


def forget():
    """Make the kernel forget unused dentries and inodes (nodefs's FORGETs
    follow)."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


# Under ASan the cycle only checks that the volumes go: a short one.
COUNT = int(os.environ.get("NODEFS_MEMORY_COUNT", "50" if sanitized() else "250"))


def inodes(env):
    with open(env.fs.path("metrics", "nodefs.prom")) as f:
        for line in f:
            if line.startswith("nodefs_fs_inodes "):
                return int(line.split()[-1])
    raise AssertionError("no nodefs_fs_inodes in metrics/nodefs.prom")


class MemoryTest(unittest.TestCase):
    def cycle(self, env, tag):
        for i in range(COUNT):
            ok, e = env.ctl("volumes/ctl", "create %s%04d size=1M" % (tag, i))
            self.assertTrue(ok, "create %s%04d: %s" % (tag, i, e))
        made = rss(env.fs.proc.pid)
        for i in range(COUNT):
            ok, e = env.ctl("volumes/%s%04d/ctl" % (tag, i), "destroy")
            self.assertTrue(ok, "destroy %s%04d: %s" % (tag, i, e))
        self.assertEqual(env.volumes(), [])
        forget()
        return made

    def test_destroyed_volumes_give_memory_back(self):
        with vt.VolEnv(extra_nodefs="operations_keep = 20") as env:
            pid = env.fs.proc.pid
            idle = rss(pid)
            first = self.cycle(env, "w")
            # the monitor trims the heap once per probe period (5 s)
            time.sleep(6)
            start = rss(pid)
            made = self.cycle(env, "v")
            bound = SLACK + COUNT * PER_VOLUME
            back = sanitized() or nt.wait_until(lambda: rss(pid) - start <= bound, 15)
            end = rss(pid)
            print("RSS: idle %d KB, with the first %d volumes %d KB; "
                  % (idle // 1024, COUNT, first // 1024), end="")
            print("start %d KB, with %d volumes %d KB (%+d B a volume), after "
                  "destroying them %d KB (%+d KB; bound %d KB)"
                  % (start // 1024, COUNT, made // 1024, (made - start) // COUNT,
                     end // 1024, (end - start) // 1024, bound // 1024))
            if sanitized():
                return
            self.assertGreaterEqual(first - idle, COUNT * 512,
                                    "the volumes did not show in RSS (%d KB idle, %d KB with "
                                    "them): nothing was measured" % (idle // 1024, first // 1024))
            self.assertTrue(back, "RSS %d KB after destroying %d volumes, %d KB over the "
                            "start (bound %d KB)" % (end // 1024, COUNT, (end - start) // 1024,
                                                     bound // 1024))

    def test_the_kernel_forgets_destroyed_volumes(self):
        with vt.VolEnv() as env:
            names = ["k%02d" % i for i in range(20)]
            for n in names:
                ok, e = env.ctl("volumes/ctl", "create %s size=1M" % n)
                self.assertTrue(ok, "create %s: %s" % (n, e))
            base = inodes(env)
            # a walk lists and enters the volumes: their directories only
            walked = sum(1 for _ in os.walk(env.fs.path("volumes")))
            self.assertGreaterEqual(walked, len(names))
            after_walk = inodes(env)
            self.assertLessEqual(after_walk - base, len(names) + 2,
                                 "a walk made inodes for files (%d -> %d)" % (base, after_walk))
            files = 0
            for n in names:
                d = env.fs.path("volumes", n)
                for f in os.listdir(d):
                    os.stat(os.path.join(d, f))
                    files += 1
                with open(os.path.join(d, "state")) as f:
                    self.assertIn("CREATED", f.read())
            held = inodes(env)
            self.assertGreaterEqual(held - base, files, "the stats made no inodes")
            keep = open(env.fs.path("volumes", names[0], "state"))
            for n in names:
                ok, e = env.ctl("volumes/%s/ctl" % n, "destroy")
                self.assertTrue(ok, "destroy %s: %s" % (n, e))
            self.assertEqual(env.volumes(), [])
            # only the open file and its directory stay
            gone = nt.wait_until(lambda: inodes(env) <= base + 2, 10)
            self.assertTrue(gone, "nodefs_fs_inodes %d after destroying %d volumes whose %d "
                            "files were looked up (%d before them): the kernel kept them"
                            % (inodes(env), len(names), files, base))
            with self.assertRaises(OSError) as cm:
                keep.seek(0)
                keep.read()
            self.assertEqual(cm.exception.errno, errno.ENOENT)
            keep.close()
            self.assertTrue(nt.wait_until(lambda: inodes(env) <= base,
                                          nt.scaled(10)),
                            "nodefs_fs_inodes %d once the last file was closed (%d before the "
                            "volumes' files were looked up)" % (inodes(env), base))


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

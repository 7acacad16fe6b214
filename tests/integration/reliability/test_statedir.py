#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What nodes do to a daemon: a full disk, a read-only state dir, a stale
mount left by a crash, hostile writes.

- State dir on a small tmpfs filled up: commands fail with ENOSPC and a
  readable error, nothing changes, and once space is back they work.
- State dir remounted read-only: commands fail with EROFS, reads still work.
- kill -9 leaves a dead mount ("Transport endpoint is not connected"): the
  next nodefs on that mountpoint replaces it.
- Hostile ctl writes: NUL bytes, invalid UTF-8, a line over 4 KiB, path
  traversal in names and targets, control characters: EINVAL, one line in
  the error file, no change.
"""
import errno
import json
import os
import subprocess
import sys
import tempfile
import unittest
import faulthandler
faulthandler.dump_traceback_later(200, exit=True)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "volumes"))

import nodefs_test as nt  # noqa: E402
import voltest  # noqa: E402


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path], check=True)


def umount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)


class StateDirTest(unittest.TestCase):
    def test_disk_full(self):
        with voltest.VolEnv() as env:
            # move the daemon onto a 512 KiB state dir
            small = os.path.join(env.tmp, "small")
            mount_tmpfs(small, "512k")
            try:
                env.fs.stop()
                env.fs.state_dir = small
                env.fs.start()
                env.wait_plugin_ready()
                ok, err = env.ctl("volumes/ctl", "create a size=1M")
                self.assertTrue(ok, err)
                # fill what is left
                with open(os.path.join(small, "filler"), "wb") as f:
                    try:
                        while True:
                            f.write(b"\0" * 65536)
                            f.flush()
                    except OSError:
                        pass
                before = (sorted(env.volumes()), env.plugin.state().keys())
                ok, err = env.ctl("volumes/ctl", "create b size=1M")
                self.assertFalse(ok)
                self.assertEqual(nt.errname(err), "ENOSPC")
                self.assertIn("checkpoint", env.fs.error("volumes"))
                after = (sorted(env.volumes()), env.plugin.state().keys())
                self.assertEqual(before[0], after[0])
                self.assertEqual(set(before[1]), set(after[1]), "a CSI volume was made")
                self.assertEqual(env.fs.status()["state"], "READY")
                os.unlink(os.path.join(small, "filler"))
                ok, err = env.ctl("volumes/ctl", "create b size=1M")
                self.assertTrue(ok, err)
                for v in ("a", "b"):
                    ok, err = env.ctl("volumes/%s/ctl" % v, "destroy")
                    self.assertTrue(ok, err)
                env.fs.stop()
            finally:
                umount(small)

    def test_journal_keeps_its_length(self):
        """The journal is written with zeros once (1.5 MiB, where there is
        room): flushes overwrite it in place, its size never changes, so
        their fdatasync commits no metadata; a clean stop leaves it holding
        no record (its first header zeroed), and a restart finds every
        volume."""
        with voltest.VolEnv() as env:
            journal = os.path.join(env.state_dir, "journal")
            self.assertEqual(os.stat(journal).st_size, 3 << 19)
            for k in range(5):
                self.assertEqual(env.ctl("volumes/ctl", "create j%d size=1M" % k), (True, "OK"))
            self.assertEqual(os.stat(journal).st_size, 3 << 19)
            with open(journal, "rb") as f:
                self.assertEqual(f.read(4), b"NFJ1", "the records are at its start")
            env.fs.stop()
            with open(journal, "rb") as f:
                self.assertEqual(f.read(24), bytes(24), "a clean stop empties it")
            self.assertEqual(os.stat(journal).st_size, 3 << 19)
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(sorted(env.volumes()), ["j%d" % k for k in range(5)])
            for k in range(5):
                self.assertEqual(env.state("j%d" % k), "CREATED")
                self.assertEqual(env.ctl("volumes/j%d/ctl" % k, "destroy"), (True, "OK"))

    def test_read_only_state_dir(self):
        with voltest.VolEnv() as env:
            ro = os.path.join(env.tmp, "ro")
            mount_tmpfs(ro, "4m")
            try:
                env.fs.stop()
                env.fs.state_dir = ro
                env.fs.start()
                env.wait_plugin_ready()
                subprocess.run(["mount", "-o", "remount,ro", ro], check=True)
                ok, err = env.ctl("volumes/ctl", "create c size=1M")
                self.assertFalse(ok)
                self.assertEqual(nt.errname(err), "EROFS")
                self.assertNotIn("c", env.volumes())
                self.assertEqual(env.plugin.state(), {})
                self.assertEqual(env.fs.status()["state"], "READY")
                env.fs.stop()
            finally:
                umount(ro)


    def test_corrupt_records(self):
        """Torn, non-JSON and future-version records: the daemon starts,
        counts them in status, keeps them aside as NAME.corrupt, brings back
        the good ones, and the volume whose record was lost shows on its
        plugin as discovered, ready to be imported."""
        with voltest.VolEnv() as env:
            for v in ("good", "torn", "future"):
                ok, err = env.ctl("volumes/ctl", "create %s size=1M" % v)
                self.assertTrue(ok, err)
            torn_id = env.vol_id("torn")
            env.fs.stop()
            vdir = os.path.join(env.state_dir, "volumes")
            with open(os.path.join(vdir, "torn.json"), "rb") as f:
                text = f.read()
            with open(os.path.join(vdir, "torn.json"), "wb") as f:
                f.write(text[:len(text) // 2])          # a torn write
            with open(os.path.join(vdir, "future.json")) as f:
                rec = json.load(f)
            rec["version"] = 99
            with open(os.path.join(vdir, "future.json"), "w") as f:
                json.dump(rec, f)
            odir = os.path.join(env.state_dir, "operations")
            some_op = sorted(os.listdir(odir))[0]
            with open(os.path.join(odir, some_op), "wb") as f:
                f.write(b"\xff\xfe not json \x00")
            env.fs.start()
            env.wait_plugin_ready()
            st = env.fs.status()
            self.assertEqual(st["state"], "READY")
            self.assertEqual(st["checkpoint_errors"], "3", st)
            self.assertEqual(sorted(env.volumes()), ["good"])
            self.assertEqual(env.state("good"), "CREATED")
            left = sorted(os.listdir(vdir))
            self.assertIn("torn.corrupt", left)
            self.assertIn("future.corrupt", left)
            self.assertNotIn("torn.json", left)
            self.assertIn(some_op[:-5] + ".corrupt", os.listdir(odir))
            log = env.fs.log()
            self.assertIn("torn", log)
            self.assertIn("unknown record version 99", log)
            # the lost volume is still on the plugin: listed as discovered
            self.assertTrue(nt.wait_until(lambda: torn_id in env.fs.read(
                "plugins", "hostpath", "volumes"), 20))
            ok, err = env.ctl("volumes/ctl", "import torn %s" % torn_id)
            self.assertTrue(ok, err)
            # a second start reads only the good records: no new errors
            env.fs.stop()
            env.fs.start()
            env.wait_plugin_ready()
            self.assertEqual(env.fs.status()["checkpoint_errors"], "0")
            self.assertEqual(sorted(env.volumes()), ["good", "torn"])
            for v in ("good", "torn"):
                ok, err = env.ctl("volumes/%s/ctl" % v, "destroy")
                self.assertTrue(ok, err)
            ok, err = env.ctl("volumes/ctl", "import future %s" % rec["id"])
            self.assertTrue(ok, err)
            ok, err = env.ctl("volumes/future/ctl", "destroy")
            self.assertTrue(ok, err)
            self.assertEqual(env.plugin.state(), {})


class StaleMountTest(unittest.TestCase):
    def test_dead_mount_replaced(self):
        with nt.Nodefs() as fs:
            fs.proc.kill()
            fs.proc.wait()
            with self.assertRaises(OSError) as cm:
                os.stat(os.path.join(fs.mnt, "status"))
            # ENOTCONN; or ECONNABORTED, the kernel's word for a request
            # still pending when the connection is torn down: the watchdog
            # probe's child (common/mntprobe.c), forked just before the
            # kill, holds /dev/fuse until its close_range(), so the stat
            # can wait for that (seen once in a whole run)
            self.assertIn(cm.exception.errno, (errno.ENOTCONN, errno.ECONNABORTED))
            fs.proc = None
            fs.start()
            self.assertEqual(fs.status()["state"], "READY")
            self.assertIn("stale mount", fs.log())


class HostileTest(unittest.TestCase):
    def test_hostile_writes(self):
        with nt.Nodefs("[nodefs]\nallowed_targets = /mnt\n") as fs:
            before = sorted(fs.listdir("volumes")), {k: v for k, v in fs.status().items() if k != "uptime_seconds"}
            cases = [
                ("volumes/ctl", b"create a\0b\n"),
                ("volumes/ctl", b"create \xff\xfe\n"),
                ("volumes/ctl", b"create " + b"x" * 5000 + b"\n"),
                ("volumes/ctl", b"create ../etc\n"),
                ("volumes/ctl", b"create a/b\n"),
                ("volumes/ctl", b"create \x1b[31mred\n"),
                ("containers/ctl", b"create c runtime=docker image=x bind=/mnt/../etc:/x\n"),
                ("containers/ctl", b"create c runtime=docker image=x bind=/etc:/x\n"),
                ("plugins/ctl", b"add p unix://relative.sock\n"),
                ("plugins/ctl", b"add ../p unix:///x.sock\n"),
            ]
            for rel, data in cases:
                with self.subTest(data=data[:40]):
                    fd = os.open(fs.path(*rel.split("/")), os.O_WRONLY)
                    try:
                        with self.assertRaises(OSError) as cm:
                            os.write(fd, data)
                        self.assertIn(errno.errorcode[cm.exception.errno], ("EINVAL", "EPERM"))
                    finally:
                        os.close(fd)
                    msg = fs.error(rel.rsplit("/", 1)[0])
                    self.assertEqual(len(msg.strip().splitlines()), 1, msg)
            for bad in (".hidden", "a" * 65, "a b"):
                with self.subTest(mkdir=bad):
                    with self.assertRaises(OSError) as cm:
                        os.mkdir(fs.path("volumes", bad))
                    self.assertIn(cm.exception.errno, (errno.EINVAL, errno.ENAMETOOLONG))
            with self.assertRaises(OSError) as cm:
                os.open(fs.path("status"), os.O_WRONLY)
            self.assertEqual(cm.exception.errno, errno.EACCES)
            after = sorted(fs.listdir("volumes")), {k: v for k, v in fs.status().items() if k != "uptime_seconds"}
            self.assertEqual(before, after)


if __name__ == "__main__":
    nt.main()

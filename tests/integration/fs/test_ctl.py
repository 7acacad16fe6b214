# SPDX-License-Identifier: LGPL-2.1-or-later
"""ctl files as users meet them: a bad command fails with EINVAL and the
error file beside it says why in one line; a rejected command changes
nothing; `echo bogus > ctl` from a real shell fails with "Invalid argument";
reading a ctl file lists its commands; truncating one succeeds; writing a
read-only file gets EACCES; mkdir of a bad name under volumes/ gets EINVAL.
A write of several lines with a bad value on any line does nothing (EINVAL);
one whose later line fails when it runs returns a short count covering the
lines that ran; the error file names the line either way.
None of it needs a plugin or a runtime service.
"""

import calendar
import errno
import os
import re
import time
import unittest

import nodefs_test as nt

# (ctl dir, command, words of which the error line must mention one)
BAD_COMMANDS = [
    ("volumes", "frobnicate x", ("frobnicate",)),
    ("volumes", "create", ("create", "name", "NAME", "argument")),
    ("volumes", "create .hidden", (".hidden", "name")),
    ("volumes", "create bad$name", ("bad$name", "name")),
    ("volumes", "create " + "v" * 65, ("name", "long", "64")),
    ("volumes", "create v1 size=banana", ("banana", "size")),
    ("volumes", "create v1 mode=telepathic", ("telepathic", "mode")),
    ("volumes", "create v1 nokey", ("nokey", "option", "argument")),
    ("volumes", "import v1", ("import", "ID", "id", "argument")),
    ("volumes", "create v1 'unterminated", ("quote", "unterminated", "'")),
    ("containers", "frobnicate x", ("frobnicate",)),
    ("containers", "create", ("create", "name", "NAME", "argument")),
    ("containers", "create .c1 runtime=docker", (".c1", "name")),
    ("containers", "create c1 runtime=docker image=busybox cpus=many", ("many", "cpus")),
    ("containers", "create c1 runtime=docker image=busybox memory=12X", ("12X", "memory")),
    ("containers", "create c1 runtime=docker image=busybox pids=-1", ("-1", "pids")),
    ("containers", "run c1 runtime=docker image=busybox volume=nocolon",
     ("nocolon", "volume")),
    ("containers", "create c1 runtime=docker image=busybox bind=relative:/x",
     ("relative", "bind")),
    ("plugins", "frobnicate x", ("frobnicate",)),
    ("plugins", "add", ("add", "name", "NAME", "argument")),
    ("plugins", "add onlyname", ("onlyname", "endpoint", "ENDPOINT",
                                  "argument")),
    ("plugins", "add p1 tcp://127.0.0.1:1", ("tcp", "unix", "endpoint")),
    ("plugins", "add .p1 unix:///x.sock", (".p1", "name")),
]


# A default plugin whose socket is absent: commands get past "which plugin"
# to the checks of their options, and nothing is ever created.
CONFIG = nt.offline_config() + """
[plugin p0]
endpoint = unix:///nonexistent/nodefs-test/p0.sock
default = yes
"""


class CtlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fs = nt.Nodefs(CONFIG)
        cls.fs.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.fs.__exit__(None, None, None)

    def snapshot(self):
        """What a rejected command must not change."""
        fs = self.fs
        st = fs.status()
        return {
            "volumes": fs.listdir("volumes"),
            "containers": fs.listdir("containers"),
            "plugins": fs.listdir("plugins"),
            "operations": fs.listdir("operations"),
            "counts": {k: st.get(k) for k in ("volumes", "containers",
                                              "operations", "plugins")},
            "state": os.listdir(fs.state_dir),
        }

    def test_bad_commands_einval_and_error_file(self):
        before = self.snapshot()
        for d, cmd, words in BAD_COMMANDS:
            ok, err = self.fs.write_ctl(d + "/ctl", cmd)
            self.assertEqual((ok, nt.errname(err)), (False, "EINVAL"),
                             "%s/ctl <- %r" % (d, cmd))
            text = self.fs.error(d)
            self.assertTrue(text.endswith("\n"), "%s/error %r" % (d, text))
            self.assertEqual(len(text.splitlines()), 1,
                             "%s/error is not one line: %r" % (d, text))
            shown = cmd if len(cmd) <= 48 else cmd[:45] + "..."
            why = text.split(shown + "': ", 1)[-1]	# after the time and the line
            self.assertTrue(any(w in why for w in words),
                            "%s/error after %r does not say why: %r"
                            % (d, cmd, text))
        self.assertEqual(self.snapshot(), before,
                         "a rejected command changed something")

    def test_error_line_time_and_command(self):
        """An error line starts with its time (RFC 3339, UTC) and the
        command line that failed, so an old failure is not taken for a
        current one."""
        t0 = time.time()
        ok, err = self.fs.write_ctl("volumes/ctl", "create v1 size=banana")
        self.assertFalse(ok)
        text = self.fs.error("volumes")
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) 'create v1 size=banana': .*banana",
                     text)
        self.assertTrue(m, text)
        when = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ"))
        self.assertLessEqual(abs(when - t0), 5, text)
        ok, err = self.fs.write_ctl("containers/ctl", "bogus 'a b'")
        self.assertRegex(self.fs.error("containers"), r"^\S+Z 'bogus 'a b'': unknown command")

    def test_rejected_multi_line_write_changes_nothing(self):
        """A write of several lines where a later one is bad: either EINVAL
        and none of the lines acted on (validate fully before mutating), or
        a short count that covers exactly the lines that acted. Never -1
        with something done."""
        before = self.snapshot()
        first = b"add p1 unix:///nonexistent/p1.sock\n"
        self.addCleanup(self.fs.write_ctl, "plugins/ctl", "remove p1")
        fd = os.open(self.fs.path("plugins", "ctl"), os.O_WRONLY)
        try:
            n = os.write(fd, first + b"bogus\n")
            err = 0
        except OSError as e:
            n, err = -1, e.errno
        finally:
            os.close(fd)
        if n == -1:
            self.assertEqual(nt.errname(err), "EINVAL")
            self.assertEqual(self.snapshot(), before,
                             "write failed with EINVAL, yet its first line "
                             "acted")
        else:
            self.assertEqual(n, len(first), "short count")
            self.assertIn("p1", self.fs.listdir("plugins"))

    def test_later_line_fails_short_count(self):
        """A write of several lines that all check, where a later one fails
        when it runs (its name was taken by the line before it: what only
        running shows): the write returns the bytes of the lines that ran,
        not -1 after acting; the error file names the failing line; the
        lines after it never ran. A writer that writes the rest again (a
        buffered Python file) then gets the failing line's errno."""
        first = b"add p1 unix:///nonexistent/p1.sock\n"
        again = b"add p1 unix:///nonexistent/p1-again.sock\n"
        third = b"add p3 unix:///nonexistent/p3.sock\n"
        for name in ("p1", "p3", "p4", "p5"):
            self.addCleanup(self.fs.write_ctl, "plugins/ctl", "remove " + name)
        fd = os.open(self.fs.path("plugins", "ctl"), os.O_WRONLY)
        try:
            n = os.write(fd, first + again + third)
        finally:
            os.close(fd)
        self.assertEqual(n, len(first), "a short count covering line 1")
        plugins = self.fs.listdir("plugins")
        self.assertIn("p1", plugins)
        self.assertNotIn("p3", plugins, "a line after the failing one ran")
        self.assertIn("/nonexistent/p1.sock", self.fs.read("plugins", "p1", "endpoint"))
        text = self.fs.error("plugins")
        self.assertEqual(len(text.splitlines()), 1, text)
        self.assertIn("line 2", text)
        self.assertIn("add p1 unix:///nonexistent/p1-again.sock", text)
        self.assertIn("exists", text.split("': ", 1)[1])

        # A line that does not parse is still caught before anything runs
        # (EINVAL, nothing done), and the error file says which.
        fd = os.open(self.fs.path("plugins", "ctl"), os.O_WRONLY)
        try:
            with self.assertRaises(OSError) as cm:
                os.write(fd, b"add p4 unix:///nonexistent/p4.sock\nbogus\n")
        finally:
            os.close(fd)
        self.assertEqual(nt.errname(cm.exception.errno), "EINVAL")
        self.assertNotIn("p4", self.fs.listdir("plugins"))
        self.assertIn("line 2 'bogus'", self.fs.error("plugins"))

        # Python's buffered file writes the rest after the short count and
        # raises the failing line's errno; the first line ran once.
        with self.assertRaises(OSError) as cm:
            with open(self.fs.path("plugins", "ctl"), "w") as f:
                f.write("add p5 unix:///nonexistent/p5.sock\n"
                        "add p5 unix:///nonexistent/p5.sock\n")
        self.assertEqual(nt.errname(cm.exception.errno), "EEXIST")
        self.assertIn("p5", self.fs.listdir("plugins"))

    def test_bad_value_anywhere_changes_nothing(self):
        """Every argument's value of every line (sizes, modes, names,
        paths, options and their keys) is checked before the first line
        runs: a write whose good first line is followed by a line with one
        bad value fails with EINVAL, does nothing, and the error file names
        the bad line. Before, the first line ran and the write returned a
        short count."""
        writes = [
            ("volumes", "create a size=1M", "create b size=lots", "lots"),
            ("volumes", "create a", "create b mode=telepathic", "telepathic"),
            ("volumes", "create a", "create b fs=bad/fs", "fs"),
            ("volumes", "create a", "create b param.=x", "param"),
            ("volumes", "create a", "create b profile=nosuch", "nosuch"),
            ("volumes", "create a", "import b ''", "id"),
            ("volumes", "create a", "create b plugin=bad$name", "plugin"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=docker image=busybox memory=lots", "memory"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=docker image=busybox bind=/srv/x:/x:bogus", "bogus"),
            ("containers", "create c1 runtime=docker image=busybox",
             "run c2 runtime=docker image=busybox volume=v1:relative", "relative"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=docker image=busybox pids=0", "pids"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=lxc flush_cache=perhaps", "flush_cache"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=docker image=busybox env.=x", "env"),
            ("containers", "create c1 runtime=docker image=busybox",
             "create c2 runtime=nosuch", "nosuch"),
            ("plugins", "add p1 unix:///nonexistent/p1.sock",
             "add p2 tcp://x", "tcp"),
            ("plugins", "add p1 unix:///nonexistent/p1.sock",
             "add p2 unix:///nonexistent/p2.sock command=x keep_running=perhaps",
             "perhaps"),
            ("plugins", "add p1 unix:///nonexistent/p1.sock", "remove bad$name",
             "bad$name"),
        ]
        before = self.snapshot()
        for d, good, bad, word in writes:
            data = (good + "\n" + bad + "\n").encode()
            fd = os.open(self.fs.path(d, "ctl"), os.O_WRONLY)
            try:
                with self.assertRaises(OSError, msg="%s/ctl <- %r" % (d, data)) as cm:
                    os.write(fd, data)
            finally:
                os.close(fd)
            self.assertEqual(nt.errname(cm.exception.errno), "EINVAL", bad)
            self.assertEqual(self.snapshot(), before, "%s/ctl <- %r changed something"
                             % (d, data))
            text = self.fs.error(d)
            self.assertEqual(len(text.splitlines()), 1, text)
            self.assertIn("line 2 '%s" % bad[:45], text)
            self.assertIn(word, text.split("': ", 1)[1], text)
        # the same holds when the bad line comes first
        ok, err = self.fs.write_ctl("volumes/ctl", "create b size=lots\ncreate a")
        self.assertEqual((ok, nt.errname(err)), (False, "EINVAL"))
        self.assertIn("line 1 'create b size=lots'", self.fs.error("volumes"))
        self.assertEqual(self.snapshot(), before)

    def test_missing_object_enoent(self):
        ok, err = self.fs.write_ctl("plugins/ctl", "remove nosuchplugin")
        self.assertEqual((ok, nt.errname(err)), (False, "ENOENT"))
        self.assertIn("nosuchplugin", self.fs.error("plugins"))

    def test_shell_echo_bogus_fails(self):
        for d in ("volumes", "containers", "plugins"):
            p = self.fs.sh("echo bogus > %s/ctl" % d)
            self.assertNotEqual(p.returncode, 0, d)
            self.assertIn("Invalid argument", p.stderr, d)
            p = self.fs.sh("printf 'bogus\\n' > %s/ctl" % d)
            self.assertNotEqual(p.returncode, 0, d)

    def test_reading_ctl_lists_commands(self):
        want = {"volumes": ("create", "import"),
                "containers": ("create", "run"),
                "plugins": ("add", "remove")}
        for d, cmds in want.items():
            text = self.fs.read(d, "ctl")
            lines = text.splitlines()
            self.assertTrue(text.endswith("\n"), d)
            firsts = [l.split()[0] for l in lines if l.strip()]
            for c in cmds:
                self.assertIn(c, firsts, "%s/ctl lists %r" % (d, lines))
            # One usage line per command.
            self.assertEqual(len(firsts), len(set(firsts)), lines)
        p = self.fs.sh("cat volumes/ctl")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("create", p.stdout)

    def test_truncate_ctl_succeeds(self):
        before = self.snapshot()
        for d in ("volumes", "containers", "plugins"):
            path = self.fs.path(d, "ctl")
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.close(fd)
            os.truncate(path, 0)
            with open(path, "w"):
                pass
            for script in ("echo > %s/ctl", ": > %s/ctl", "truncate -s 0 %s/ctl"):
                p = self.fs.sh(script % d)
                self.assertEqual(p.returncode, 0, "%s: %s" % (script % d,
                                                             p.stderr))
            # An empty line is nothing to do, not a bad command.
            ok, err = self.fs.write_ctl(d + "/ctl", "\n")
            self.assertEqual((ok, nt.errname(err)), (True, "OK"), d)
        self.assertEqual(self.snapshot(), before)

    def test_write_to_read_only_files_eacces(self):
        files = ["status", "events", "metrics/nodefs.prom",
                 "runtimes/docker/status", "runtimes/docker/version",
                 "volumes/error", "containers/error", "plugins/error"]
        for rel in files:
            ok, err = self.fs.write_ctl(rel, "bogus")
            self.assertEqual((ok, nt.errname(err)), (False, "EACCES"), rel)
            with self.assertRaises(OSError, msg=rel) as cm:
                os.truncate(self.fs.path(rel), 0)
            self.assertIn(cm.exception.errno, (errno.EACCES, errno.EPERM),
                          rel)
        p = self.fs.sh("echo x > status")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Permission denied", p.stderr)
        self.assertEqual(self.fs.status().get("state"), "READY")

    def test_create_files_refused(self):
        for rel in ("newfile", "volumes/newfile", "runtimes/docker/x"):
            with self.assertRaises(OSError, msg=rel):
                fd = os.open(self.fs.path(rel), os.O_WRONLY | os.O_CREAT,
                             0o644)
                os.close(fd)
            self.assertFalse(os.path.exists(self.fs.path(rel)), rel)

    def test_mkdir_bad_names_einval(self):
        before = self.snapshot()
        for name in (".bad", "a b", "bad$", "a:b", "v" * 65, "\u00e9t\u00e9"):
            with self.assertRaises(OSError, msg=repr(name)) as cm:
                os.mkdir(self.fs.path("volumes", name))
            self.assertEqual(nt.errname(cm.exception.errno), "EINVAL",
                             repr(name))
        # A name that is fine by itself but reached through "..".
        with self.assertRaises(OSError) as cm:
            os.mkdir(self.fs.path("volumes", "a..b", ".."))
        self.assertIn(nt.errname(cm.exception.errno),
                      ("ENOENT", "EINVAL", "EEXIST"))
        p = self.fs.sh("mkdir volumes/.bad")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Invalid argument", p.stderr)
        self.assertEqual(self.snapshot(), before)

    def test_mkdir_outside_volumes_refused(self):
        before = self.snapshot()
        for rel in ("newdir", "runtimes/newdir", "operations/newdir",
                    "plugins/newdir", "metrics/newdir"):
            with self.assertRaises(OSError, msg=rel):
                os.mkdir(self.fs.path(rel))
        self.assertEqual(self.snapshot(), before)

    def test_rmdir_and_unlink_refused(self):
        for rel in ("runtimes/docker", "runtimes", "volumes", "plugins"):
            with self.assertRaises(OSError, msg=rel):
                os.rmdir(self.fs.path(rel))
        for rel in ("status", "volumes/ctl", "volumes/error"):
            with self.assertRaises(OSError, msg=rel):
                os.unlink(self.fs.path(rel))
        with self.assertRaises(OSError):
            os.rmdir(self.fs.path("volumes", "nosuch"))
        with self.assertRaises(OSError):
            os.rename(self.fs.path("status"), self.fs.path("status2"))
        self.assertEqual(self.fs.status().get("state"), "READY")

    def test_oversized_write_rejected(self):
        """A ctl write is capped at 4 KiB: more is an error, not a silent
        truncation, and changes nothing."""
        before = self.snapshot()
        line = "create v1 " + " ".join("param.k%d=%s" % (i, "x" * 40)
                                       for i in range(200))
        self.assertGreater(len(line), 4096)
        ok, err = self.fs.write_ctl("volumes/ctl", line)
        self.assertFalse(ok)
        self.assertIn(nt.errname(err), ("EINVAL", "EFBIG", "E2BIG",
                                        "EMSGSIZE", "ENOSPC"))
        self.assertEqual(self.snapshot(), before)


class RecoveringTest(unittest.TestCase):
    """Recovery runs while the mount serves; test builds make it last
    (NODEFS_TEST_SLOW_RECOVERY). Meanwhile status says RECOVERING, a bad
    line is refused as ever, an O_NONBLOCK write gets EAGAIN and the error
    file says why, and a blocking write or mkdir waits, then runs once the
    daemon is READY."""

    SLOW = 2.0

    def test_commands_wait_for_recovery(self):
        nt.requires("hooks")
        import threading
        import time
        # no retries to speak of: a create on p1, which is down, fails fast
        config = nt.offline_config().replace("[nodefs]\n", (
            "[nodefs]\ncsi_timeout = 1s\nretry_backoff = 10ms\n"
            "retry_max = 20ms\n"))
        with nt.Nodefs(config, ready=False, env={
                "NODEFS_TEST_SLOW_RECOVERY": str(int(self.SLOW * 1000))}) as fs:
            t0 = time.monotonic()
            # status answers at once, and says so
            p = fs.sh("timeout 2 cat status")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("state: RECOVERING", p.stdout)

            ok, err = fs.write_ctl("plugins/ctl", "bogus")
            self.assertEqual((ok, nt.errname(err)), (False, "EINVAL"))
            ok, err = fs.write_ctl("plugins/ctl",
                                   "add p1 unix:///nonexistent/p1.sock",
                                   os.O_NONBLOCK)
            self.assertEqual((ok, nt.errname(err)), (False, "EAGAIN"))
            self.assertIn("RECOVERING", fs.error("plugins"))

            done = {}

            def call(key, fn):
                try:
                    fn()
                    done[key] = ("OK", time.monotonic())
                except OSError as e:
                    done[key] = (nt.errname(e.errno), time.monotonic())

            def write():
                with open(fs.path("plugins", "ctl"), "w") as f:
                    f.write("add p1 unix:///nonexistent/p1.sock\n")

            threads = [
                threading.Thread(target=call, args=("write", write)),
                # refused (no plugin, or p1 which is down), but only once
                # it may act
                threading.Thread(target=call, args=(
                    "mkdir", lambda: os.mkdir(fs.path("volumes", "v1")))),
            ]
            for t in threads:
                t.start()
            # a negative (nothing returned yet) has no event to wait on: 0.3 s of a recovery made to last SLOW s
            time.sleep(0.3)
            self.assertEqual(done, {}, "a command ran during recovery")
            self.assertEqual(fs.status().get("state"), "RECOVERING")
            for t in threads:
                t.join(10 + self.SLOW)
            self.assertEqual(fs.status().get("state"), "READY")
            self.assertEqual(done["write"][0], "OK", fs.log())
            self.assertIn(done["mkdir"][0], ("EINVAL", "EAGAIN"), fs.log())
            for key, (_, at) in done.items():
                self.assertGreaterEqual(at - t0, self.SLOW - 0.5, key)
            self.assertIn("p1", fs.listdir("plugins"))
            self.assertNotIn("v1", fs.listdir("volumes"))


if __name__ == "__main__":
    nt.main()

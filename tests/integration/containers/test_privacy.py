# SPDX-License-Identifier: LGPL-2.1-or-later
"""Who may read what (nodefs(5) PERMISSIONS), as the unprivileged user
nobody and as a member of read_group: a Docker container run with a secret
in its environment that prints it and an exec that prints another, and a
volume on the test CSI plugin with a parameter the redact list names. As
nobody every sensitive file (logs, exec_output, spec.json, a plugin's log)
is EACCES, every other file of the tree reads and holds no secret, and
info.json parses with "<redacted>" for the values; the group member reads
them all. A failed command's error line hides the value too. The group is
made with groupadd for the test and removed after. Audit: who wrote each
command (operations/ID/by, the checkpoint, the events), for root and a
ctl_group member, and nodefs_ctl_denied_total. Skips without dockerd or
python3-grpcio.
"""

import grp
import json
import os
import stat
import subprocess
import unittest

import ctest
import nodefs_test as nt
from ctest import IMAGE

ENV_SECRET = "hunter2-env-%d" % os.getpid()
PARAM_SECRET = "param-secret-%d" % os.getpid()

# Reads every path given on stdin, one a line, and prints a JSON object of
# path -> [errno name or "OK", content]; run as another user.
_READ_ALL = r"""
import errno, json, os, sys
out = {}
for path in sys.stdin.read().split("\n"):
    if not path:
        continue
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 1 << 20).decode()
        except BlockingIOError:
            data = ""
        finally:
            os.close(fd)
        out[path] = ["OK", data]
    except OSError as e:
        out[path] = [errno.errorcode[e.errno], ""]
print(json.dumps(out))
"""

SENSITIVE = ("logs", "exec_output", "spec.json", "log")


def read_all_as(paths, groups=()):
    p = nt.run_as(["/usr/bin/python3", "-c", _READ_ALL], groups=groups,
                  input="\n".join(paths), timeout=60)
    if p.returncode != 0:
        raise AssertionError("reader failed: %s" % p.stderr)
    return json.loads(p.stdout)


def tree_files(mnt):
    out = []
    for d, _, files in os.walk(mnt):
        for f in files:
            if f not in ("ctl", "wait", "events"):
                out.append(os.path.join(d, f))
    return sorted(out)


class Privacy(unittest.TestCase):
    def setUp(self):
        self.group = "nodefs-rd-%d" % os.getpid()
        subprocess.run(["groupadd", "--system", self.group], check=True,
                       capture_output=True)
        self.addCleanup(subprocess.run, ["groupdel", self.group],
                        capture_output=True)
        self.gid = grp.getgrnam(self.group).gr_gid

    def test_sensitive_files(self):
        nt.requires("docker", "csi-plugin")
        extra = "read_group = %s\nredact = password\n" % self.group
        with ctest.Env(csi=True, nodefs_extra=extra) as env:
            vol = env.name("vol")
            env.must("volumes/ctl", "create %s size=16M param.password=%s "
                     "param.color=blue" % (vol, PARAM_SECRET))
            env.must("volumes/%s/ctl" % vol, "publish %s"
                     % os.path.join(env.pub, vol))
            n = env.name("web")
            env.run(n, "runtime=docker image=%s env.DB_PASSWORD=%s "
                    "cmd='sh -c \"echo out-$DB_PASSWORD; sleep 1000\"'"
                    % (IMAGE, ENV_SECRET))
            env.wait_state(n, "RUNNING")
            env.cctl(n, "exec 'sh -c \"echo exec-$DB_PASSWORD\"'")
            nt.wait_until(lambda: ENV_SECRET in env.cread(n, "logs"), 10)
            self.assertIn(ENV_SECRET, env.cread(n, "logs"))
            self.assertIn("exec-" + ENV_SECRET, env.cread(n, "exec_output"))
            # a failed command's error line hides the value
            ok, _ = env.ctl("containers/ctl", "run b env.DB_PASSWORD=%s "
                            "runtime=nosuch image=x" % ENV_SECRET)
            self.assertFalse(ok)
            self.assertIn("<redacted>", env.read("containers", "error"))

            files = tree_files(env.fs.mnt)
            sens = [f for f in files if os.path.basename(f) in SENSITIVE]
            self.assertEqual(len(sens), 5, sens)
            for f in sens:
                st = os.stat(f)
                self.assertEqual((stat.S_IMODE(st.st_mode), st.st_gid),
                                 (0o440, self.gid), f)

            got = read_all_as(files)
            for f in files:
                rel = os.path.relpath(f, env.fs.mnt)
                res, data = got[f]
                if f in sens:
                    self.assertEqual(res, "EACCES", rel)
                    continue
                self.assertEqual(res, "OK", rel)
                for secret in (ENV_SECRET, PARAM_SECRET):
                    self.assertNotIn(secret, data, rel)
            info = json.loads(got[env.fs.path("containers", n, "info.json")][1])
            self.assertEqual(info["env"]["DB_PASSWORD"], "<redacted>")
            vinfo = json.loads(got[env.fs.path("volumes", vol, "info.json")][1])
            self.assertIn("password=<redacted>", vinfo["parameters"])
            self.assertIn("color=blue", vinfo["parameters"])
            for v in vinfo["volume_context"]:
                self.assertTrue(v.endswith("=<redacted>"), v)

            # the group reads them all, whole
            got = read_all_as(sens, groups=(self.gid,))
            for f in sens:
                self.assertEqual(got[f][0], "OK", f)
            spec = json.loads(got[env.fs.path("containers", n, "spec.json")][1])
            self.assertEqual(spec["env"]["DB_PASSWORD"], ENV_SECRET)
            vspec = got[env.fs.path("volumes", vol, "spec.json")][1]
            self.assertIn(PARAM_SECRET, vspec)
            self.assertIn("exec-" + ENV_SECRET,
                          got[env.fs.path("containers", n, "exec_output")][1])
            env.cctl(n, "destroy")
            env.wait_gone(n)
            env.must("volumes/%s/ctl" % vol, "unpublish")
            env.must("volumes/%s/ctl" % vol, "destroy")


    def test_audit(self):
        """operations/ID/by, its checkpoint, its events and the state changes
        of the volume or container it caused name who wrote the command:
        root, and a ctl_group member; a refused write is counted."""
        nt.requires("docker", "csi-plugin")
        extra = "ctl_group = %s\n" % self.group
        with ctest.Env(csi=True, nodefs_extra=extra) as env:
            evfd = os.open(env.fs.path("events"), os.O_RDONLY | os.O_NONBLOCK)
            self.addCleanup(os.close, evfd)
            n = env.name("a")
            env.run(n, "runtime=docker image=%s cmd='sleep 1000'" % IMAGE)
            vol = env.name("v")
            ok, e, _ = nt.syscall_as("write", env.fs.path("volumes", "ctl"),
                                     "create %s size=16M\n" % vol,
                                     groups=(self.gid,))
            self.assertTrue(ok, nt.errname(e))
            ops = sorted(o for o in env.fs.listdir("operations") if o.isdigit())
            by = {}
            for o in ops:
                info = json.loads(env.read("operations", o, "info.json"))
                by[info["object"]] = (env.read("operations", o, "by").strip(), o)
                self.assertEqual(info["by"], by[info["object"]][0])
            root_by, root_op = by["containers/" + n]
            self.assertRegex(root_by, r"^uid=0 gid=0 pid=\d+ comm=python3$")
            grp_by, grp_op = by["volumes/" + vol]
            self.assertRegex(grp_by, r"^uid=%d gid=%d pid=\d+ comm=python3$"
                             % (nt.NOBODY_UID, nt.NOBODY_GID))
            for o, want in ((root_op, root_by), (grp_op, grp_by)):
                with open(os.path.join(env.state_dir, "operations", o + ".json")) as f:
                    self.assertEqual(json.load(f)["by"], want)
            lines = os.read(evfd, 1 << 20).decode().splitlines()
            evs = [json.loads(x) for x in lines]
            for o, want in ((root_op, root_by), (grp_op, grp_by)):
                mine = [x for x in evs if x["kind"] == "operation" and x["name"] == o]
                self.assertTrue(mine, lines)
                for x in mine:
                    self.assertEqual(x.get("by"), want, x)
                # and so do the state changes the command caused
                moved = [x for x in evs if x["kind"] in ("volume", "container")
                         and x.get("operation") == o]
                self.assertTrue(moved, lines)
                for x in moved:
                    self.assertEqual(x.get("by"), want, x)
            # a write refused for permission is counted
            def denied():
                for line in env.read("metrics", "nodefs.prom").splitlines():
                    if line.startswith("nodefs_ctl_denied_total "):
                        return float(line.split()[1])
                raise AssertionError("no nodefs_ctl_denied_total")
            before = denied()
            ok, e, _ = nt.syscall_as("write", env.fs.path("volumes", "ctl"), "x\n")
            self.assertEqual((ok, nt.errname(e)), (False, "EACCES"))
            self.assertEqual(denied(), before + 1)
            env.cctl(n, "destroy")
            env.wait_gone(n)
            env.must("volumes/%s/ctl" % vol, "destroy")


if __name__ == "__main__":
    nt.main()

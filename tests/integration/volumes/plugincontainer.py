# SPDX-License-Identifier: LGPL-2.1-or-later
"""plugincontainer: what the tests of a plugin run as a container share,
whatever the runtime (test_plugin_container: Docker; test_plugin_lxc: LXC).

Env is a temp dir made a shared mount of its own (a node plugin's rshared
binds need one) holding pub/, base/, sock/ and whatever dirs the runtime
needs, and a nodefs whose plugin "loc" runs as a container. A subclass
gives config() and remove_containers() (what it made on its engine);
leaving stops nodefs (its problems fail the test), removes the containers,
unmounts everything under the dir and removes it."""

import os
import shutil
import subprocess
import tempfile

import nodefs_test as nt
import voltest as vt


class Env:
    prefix = "nodefs-pl-"
    dirs = ("pub", "base", "sock")

    def prepare(self):
        """Run before nodefs starts (the dirs exist by then)."""

    def config(self):
        raise NotImplementedError

    def remove_containers(self):
        raise NotImplementedError

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)
        self.fs = None
        self.shared = False
        try:
            os.chmod(self.tmp, 0o755)
            subprocess.run(["mount", "--bind", self.tmp, self.tmp], check=True)
            self.shared = True
            subprocess.run(["mount", "--make-rshared", self.tmp], check=True)
            for d in self.dirs:
                os.mkdir(os.path.join(self.tmp, d))
            self.prepare()
            self.state_dir = os.path.join(self.tmp, "state")
            self.fs = nt.Nodefs(self.config(), state_dir=self.state_dir)
            self.fs.__enter__()
        except BaseException:
            self._teardown()
            raise
        return self

    def _teardown(self):
        problems = []
        try:
            problems, self.final_log = nt.end_daemon(self.fs, self.remove_containers)
        finally:
            vt.unmount_all_under(self.tmp)
            if self.shared:
                subprocess.run(["umount", "-l", self.tmp], capture_output=True)
            shutil.rmtree(self.tmp, ignore_errors=True)
        return problems

    def __exit__(self, exc_type, exc, tb):
        problems = self._teardown()
        if problems and exc_type is None:
            raise nt.DaemonError("; ".join(problems) + "\nlog:\n" + self.final_log)
        return False

    def process(self):
        return nt.parse_kv(self.fs.read("plugins", "loc", "process"))

    def wait_ready(self, timeout=40):
        ok = nt.wait_until(lambda: self.fs.read("plugins", "loc", "health").startswith("READY")
                           and self.process()["container"] != "none", nt.scaled(timeout), 0.1)
        if not ok:
            raise AssertionError("plugin not READY: %r %r\nlog:\n%s\nplugin log:\n%s" % (
                self.fs.read("plugins", "loc", "health"), self.process(), self.fs.log(),
                self.fs.read("plugins", "loc", "log")))

    def ctl(self, rel, line):
        ok, err = self.fs.write_ctl(rel, line)
        return ok, nt.errname(err)

    def metric(self, name):
        want = '%s{plugin="loc"} ' % name
        for line in self.fs.read("metrics", "nodefs.prom").splitlines():
            if line.startswith(want):
                return int(float(line.rsplit(" ", 1)[1]))
        return None

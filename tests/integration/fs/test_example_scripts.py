# SPDX-License-Identifier: LGPL-2.1-or-later
"""The operator scripts of examples/scripts/ work against a real mount and
a real CSI plugin (tests/fixtures/csi/plugin.py, through the volume tests'
voltest.VolEnv): publish-volume.sh creates, publishes and waits, is
idempotent and fails with the volume's error; watch-events.py follows the
events of a volume as they happen and stops cleanly on SIGINT.
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

import nodefs_test as nt

sys.path.insert(0, os.path.join(nt.NODEFS_SRC, "tests", "integration",
                                "volumes"))
import voltest  # noqa: E402

SCRIPTS = os.path.join(nt.NODEFS_SRC, "examples", "scripts")
PUBLISH = os.path.join(SCRIPTS, "publish-volume.sh")
WATCH = os.path.join(SCRIPTS, "watch-events.py")


class ExampleScriptsTest(unittest.TestCase):
    def test_publish_volume_sh(self):
        with voltest.VolEnv() as env:
            mnt = env.fs.mnt
            target = env.target("db")
            p = subprocess.run([PUBLISH, "-m", mnt, "-t", "60", "db", target,
                                "size=64M", "profile=fast"],
                               capture_output=True, text=True, timeout=90)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("db is PUBLISHED at " + target, p.stdout)
            self.assertEqual(env.state("db"), "PUBLISHED")
            self.assertTrue(nt.is_mounted(target), "target not mounted")
            # The volume is usable at the target.
            with open(os.path.join(target, "hello"), "w") as f:
                f.write("hi\n")
            # Again: nothing to do, still success.
            p = subprocess.run([PUBLISH, "-m", mnt, "db", target],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("already published", p.stdout)
            # A target outside allowed_targets: exit 1 and the reason.
            p = subprocess.run([PUBLISH, "-m", mnt, "db2", "/var/tmp/nope",
                                "size=16M"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("publish db2 failed", p.stderr)
            err = env.vread("db2", "error")
            self.assertTrue(err, "db2/error is empty")
            self.assertIn(err, p.stderr)
            self.assertFalse(os.path.exists("/var/tmp/nope/hello"))
            # Not mounted: a clear message, exit 1.
            p = subprocess.run([PUBLISH, "-m", "/nonexistent", "x", target],
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 1)
            self.assertIn("not mounted", p.stderr)
            # Clean up through the interface itself.
            for line, vol in (("unpublish", "db"), ("destroy", "db"),
                              ("destroy", "db2")):
                ok, e = env.ctl("volumes/%s/ctl" % vol, line)
                self.assertTrue(ok, "%s %s: %s" % (line, vol, e))
        if os.path.isdir("/var/tmp/nope"):
            os.rmdir("/var/tmp/nope")

    def test_watch_events_py(self):
        with voltest.VolEnv() as env:
            proc = subprocess.Popen(["/usr/bin/python3", WATCH, "-m",
                                     env.fs.mnt, "--json", "--match",
                                     "name=ev1"],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            try:
                time.sleep(1.0)     # each open of events starts at "now"
                ok, e = env.ctl("volumes/ctl", "create ev1 size=16M")
                self.assertTrue(ok, e)
                ok, e = env.ctl("volumes/ctl", "create other size=16M")
                self.assertTrue(ok, e)
                ok, e = env.ctl("volumes/ev1/ctl", "destroy")
                self.assertTrue(ok, e)
                time.sleep(1.0)
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    out, err = proc.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    self.fail("watch-events.py ignored SIGINT")
            self.assertEqual(proc.returncode, 0, err)
            events = [json.loads(l) for l in out.splitlines() if l.strip()]
            self.assertTrue(events, "no events printed; stderr %r" % err)
            self.assertTrue(all(ev.get("name") == "ev1" for ev in events),
                            events)
            news = [ev.get("new") for ev in events]
            self.assertIn("CREATED", news, events)
            ok, e = env.ctl("volumes/other/ctl", "destroy")
            self.assertTrue(ok, e)


if __name__ == "__main__":
    nt.main(requires=voltest.require_plugin)

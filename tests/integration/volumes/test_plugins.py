# SPDX-License-Identifier: LGPL-2.1-or-later
"""plugins/NAME/ through a real mount, against the real plugin.

What it proves: info shows GetPluginInfo's name and version; health reads
READY, goes DOWN (with why) as soon as the plugin is killed, and READY
again when a new plugin process listens on the socket, the client's own
reconnect doing it without any command; info stays readable meanwhile, and
a create fails with EAGAIN (UNAVAILABLE), leaving its volume in CREATING to
be destroyed once the plugin is back. (The plugin events are not
checked here: they are sampled by the monitor every 5 s, so a short DOWN
may never be one.) A plugin without GET_CAPACITY and LIST_VOLUMES
(not advertised, the RPCs UNIMPLEMENTED) shows one `unsupported:` line in
capacity and in volumes, and nodefs never calls those RPCs (no errors in
the metrics, the error file or the log) while volumes still work; once the
plugin is restarted with them, both files show real figures.
"""

import os
import signal
import time
import unittest

import nodefs_test as nt
import voltest as vt


def lines(text):
    return [l for l in text.splitlines() if l.strip()]


def plugin_events(acc, env, fd):
    """Add the plugin events readable now from fd to acc; true once any."""
    acc.extend(e for e in env.drain_events(fd) if e.get("kind") == "plugin")
    return bool(acc)


class PluginFilesTest(unittest.TestCase):
    def test_info_and_health_follow_the_plugin(self):
        with vt.VolEnv() as env:
            fs = env.fs
            info = nt.parse_kv(fs.read("plugins", "hostpath", "info"))
            self.assertEqual(info, env.plugin.info())
            health = fs.read("plugins", "hostpath", "health")
            self.assertRegex(health, r"^READY since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$")
            pid = env.plugin.proc.pid
            evfd = env.open_events()
            self.addCleanup(os.close, evfd)
            env.drain_events(evfd)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            env.plugin.proc.wait()
            # The connection's end is seen at once: DOWN, and why.
            self.assertTrue(nt.wait_until(
                lambda: fs.read("plugins", "hostpath", "health").startswith("DOWN"), 5),
                fs.read("plugins", "hostpath", "health"))
            down = fs.read("plugins", "hostpath", "health")
            self.assertRegex(down, r"^DOWN since \S+Z: \S")
            # Every change of health is an event, at once (not at the
            # monitor's next 5 s tick).
            ev = []
            self.assertTrue(nt.wait_until(lambda: plugin_events(ev, env, evfd), 2), ev)
            self.assertLess(time.monotonic() - killed, nt.scaled(2.5))
            self.assertEqual((ev[0]["name"], ev[0]["old"], ev[0]["new"]),
                             ("hostpath", "READY", "DOWN"), ev)
            self.assertEqual(len(lines(down)), 1, down)
            # What was fetched stays readable while the plugin is away.
            self.assertEqual(nt.parse_kv(fs.read("plugins", "hostpath", "info"))["name"],
                             env.plugin.info()["name"])
            # A volume command fails meanwhile (UNAVAILABLE: EAGAIN, its
            # outcome unknown: the volume waits in CREATING to be re-driven).
            ok, e = env.ctl("volumes/ctl", "create late size=8M")
            self.assertEqual((ok, e), (False, "EAGAIN"), fs.error("volumes"))
            self.assertIn("UNAVAILABLE", fs.error("volumes"))
            self.assertEqual(env.state("late"), "CREATING")
            # A new process on the same socket: READY again by itself.
            env.plugin.start(env.plugin_flags)
            self.assertNotEqual(env.plugin.proc.pid, pid)
            self.assertTrue(nt.wait_until(
                lambda: fs.read("plugins", "hostpath", "health").startswith("READY"), 10),
                fs.read("plugins", "hostpath", "health"))
            self.assertRegex(fs.read("plugins", "hostpath", "health"),
                             r"^READY since \S+Z\n$")
            ev = []
            self.assertTrue(nt.wait_until(
                lambda: plugin_events(ev, env, evfd) and ev[-1]["new"] == "READY", 2), ev)
            self.assertEqual(ev[0]["old"], "DOWN", ev)
            r = env.ctl("volumes/late/ctl", "destroy")
            self.assertEqual(r, (True, "OK"), r == (True, "OK") or fs.error("volumes/late"))
            self.assertNotIn("late", env.volumes())
            self.assertEqual(env.plugin.state(), {})

    def test_without_capacity_and_list_volumes(self):
        with vt.VolEnv(["--no-capacity", "--no-list-volumes"]) as env:
            fs = env.fs
            caps = nt.parse_kv(fs.read("plugins", "hostpath", "capabilities"))
            self.assertIn("CREATE_DELETE_VOLUME", caps["controller"].split())
            self.assertNotIn("GET_CAPACITY", caps["controller"].split())
            self.assertNotIn("LIST_VOLUMES", caps["controller"].split())
            # Volumes work without them.
            tgt = env.target("db")
            self.assertEqual(env.ctl("volumes/ctl", "create db size=16M"), (True, "OK"))
            self.assertEqual(env.ctl("volumes/db/ctl", "publish " + tgt), (True, "OK"))
            self.assertTrue(nt.is_mounted(tgt))
            vid = env.vol_id("db")
            # A refresh since: the create marked the lists stale, so a read
            # refreshes them (in the background).
            before = env.calls().get("GetPluginInfo", 0)
            fs.read("plugins", "hostpath", "capacity")
            self.assertTrue(nt.wait_until(
                lambda: env.calls().get("GetPluginInfo", 0) > before, 10),
                env.calls())
            for f, cap in (("capacity", "GET_CAPACITY"), ("volumes", "LIST_VOLUMES")):
                text = fs.read("plugins", "hostpath", f)
                self.assertEqual(lines(text),
                                 ["unsupported: the plugin has no %s capability" % cap],
                                 "%s: %r" % (f, text))
            calls = env.calls()
            self.assertEqual(calls.get("GetCapacity", 0), 0, calls)
            self.assertEqual(calls.get("ListVolumes", 0), 0, calls)
            self.assertEqual(fs.read("plugins", "hostpath", "error").strip(), "")
            self.assertTrue(fs.read("plugins", "hostpath", "health").startswith("READY"))
            errors = [l for l in fs.read("metrics", "nodefs.prom").splitlines()
                      if l.startswith("nodefs_csi_rpcs_total{") and 'code="OK"' not in l]
            self.assertEqual(errors, [])
            log = fs.log()
            for word in ("GetCapacity", "ListVolumes", "UNIMPLEMENTED"):
                self.assertNotIn(word, log)

            # The same plugin with both: real figures, the volumes known by
            # name (a create marks the lists stale, the read refreshes them).
            env.restart_plugin([])
            self.assertEqual(env.ctl("volumes/ctl", "create db2 size=8M"), (True, "OK"))
            vid2 = env.vol_id("db2")
            want = sorted(["%s %d known db" % (vid, 16 << 20), "%s %d known db2" % (vid2, 8 << 20)])
            self.assertTrue(nt.wait_until(
                lambda: sorted(lines(fs.read("plugins", "hostpath", "volumes"))) == want, 10),
                fs.read("plugins", "hostpath", "volumes"))
            cap = [l.split() for l in lines(fs.read("plugins", "hostpath", "capacity"))]
            self.assertEqual([c[0] for c in cap][-1], "default", cap)
            self.assertIn("fast", [c[0] for c in cap])
            self.assertTrue(all(len(c) == 2 and int(c[1]) > 0 for c in cap), cap)
            for name in ("db", "db2"):
                self.assertEqual(env.ctl("volumes/%s/ctl" % name, "destroy"), (True, "OK"))
            self.assertEqual(env.plugin.state(), {})


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

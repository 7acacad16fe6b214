# SPDX-License-Identifier: LGPL-2.1-or-later
"""Plugin errors injected at every step of a volume's life (the test
plugin's --fail RPC=CODE[:COUNT] and --delay RPC=SECONDS).

What it proves:
- A certain failure (INTERNAL, INVALID_ARGUMENT, FAILED_PRECONDITION) of
  any call - CreateVolume, ControllerPublish, NodeStage, NodePublish,
  ControllerExpand, NodeExpand, NodeUnpublish, NodeUnstage,
  ControllerUnpublish, DeleteVolume - fails the command with the errno of
  the table (EIO, EINVAL, EBUSY), the plugin's message in the error file,
  the operation FAILED with the raw gRPC status and 1 attempt (these codes
  are not retried), and leaves the volume in the stable state it was in
  before that call, from which the same command, sent again, continues
  (a failed create leaves no volume at all). A NodeExpand that fails after
  the ControllerExpand went through is finished by the same expand.
- UNAVAILABLE twice per call is retried: every command succeeds and its
  operation shows attempts = 3.
- A call slower than csi_timeout fails with ETIMEDOUT and leaves the volume
  in the transient state (CREATING, NODE_STAGE, NODE_UNSTAGE); the next
  command re-drives that call: a re-driven CreateVolume makes no second
  volume, and NodeStage is re-sent after a NodeUnstage that timed out.
"""

import os
import signal
import subprocess
import sys
import time
import unittest

import nodefs_test as nt
import voltest as vt

STEP_RPCS = ("CreateVolume", "ControllerPublishVolume", "NodeStageVolume",
             "NodePublishVolume", "ControllerExpandVolume", "NodeExpandVolume",
             "NodeUnpublishVolume", "NodeUnstageVolume",
             "ControllerUnpublishVolume", "DeleteVolume")

GIB = 1 << 30


class FaultsTest(unittest.TestCase):
    def failed(self, env, ctl, line, want_errno, rpc, code, state_after, vol="db"):
        before_ops = env.ops()
        ok, e = env.ctl(ctl, line)
        self.assertEqual((ok, e), (False, want_errno), "%s <- %r (%s)" % (ctl, line, rpc))
        err_dir = "volumes" if ctl == "volumes/ctl" else "volumes/" + vol
        text = env.fs.error(err_dir)
        self.assertIn("injected", text, text)
        self.assertIn(rpc, text, text)
        new = [o for o in env.ops() if o not in before_ops]
        self.assertEqual(len(new), 1, new)
        op = env.op(new[0])
        self.assertEqual(op["state"], "FAILED", op)
        self.assertIn(code, op["remote_status"], op)
        self.assertIn("injected", op["error"], op)
        self.assertEqual(op["attempts"], "1", op)
        if state_after is None:
            self.assertNotIn(vol, env.volumes())
        else:
            self.assertEqual(env.state(vol), state_after, "after %s failed" % rpc)

    def succeeded(self, env, ctl, line, state_after, vol="db"):
        ok, e = env.ctl(ctl, line)
        if not ok:
            err_dir = "volumes" if ctl == "volumes/ctl" else "volumes/" + vol
            self.fail("%s <- %r: %s: %s" % (ctl, line, e, env.fs.error(err_dir)))
        if state_after is None:
            self.assertNotIn(vol, env.volumes())
        else:
            self.assertEqual(env.state(vol), state_after)

    def walk_with_failures(self, code, want_errno):
        flags = []
        for rpc in STEP_RPCS:
            flags += ["--fail", "%s=%s:1" % (rpc, code)]
        with vt.VolEnv(flags) as env:
            tgt = env.target("db")
            f, s = self.failed, self.succeeded
            f(env, "volumes/ctl", "create db size=1G", want_errno, "CreateVolume", code, None)
            self.assertEqual(env.plugin.state(), {})
            s(env, "volumes/ctl", "create db size=1G", "CREATED")
            vid = env.vol_id("db")
            pub = "publish " + tgt
            f(env, "volumes/db/ctl", pub, want_errno, "ControllerPublishVolume", code, "CREATED")
            f(env, "volumes/db/ctl", pub, want_errno, "NodeStageVolume", code, "NODE_READY")
            f(env, "volumes/db/ctl", pub, want_errno, "NodePublishVolume", code, "VOL_READY")
            self.assertFalse(nt.is_mounted(tgt))
            self.assertEqual(env.vread("db", "target"), "")   # published nowhere
            s(env, "volumes/db/ctl", pub, "PUBLISHED")
            self.assertTrue(nt.is_mounted(tgt))
            f(env, "volumes/db/ctl", "expand 2G", want_errno, "ControllerExpandVolume", code,
              "PUBLISHED")
            self.assertEqual(env.vread("db", "capacity"), str(GIB))
            f(env, "volumes/db/ctl", "expand 2G", want_errno, "NodeExpandVolume", code,
              "PUBLISHED")
            s(env, "volumes/db/ctl", "expand 2G", "PUBLISHED")
            self.assertEqual(env.vread("db", "capacity"), str(2 * GIB))
            self.assertEqual(env.plugin.state()[vid]["capacity"], 2 * GIB)
            f(env, "volumes/db/ctl", "unpublish", want_errno, "NodeUnpublishVolume", code,
              "PUBLISHED")
            self.assertTrue(nt.is_mounted(tgt))
            s(env, "volumes/db/ctl", "unpublish", "VOL_READY")
            self.assertFalse(nt.is_mounted(tgt))
            f(env, "volumes/db/ctl", "unstage", want_errno, "NodeUnstageVolume", code, "VOL_READY")
            f(env, "volumes/db/ctl", "unstage", want_errno, "ControllerUnpublishVolume", code,
              "NODE_READY")
            s(env, "volumes/db/ctl", "unstage", "CREATED")
            f(env, "volumes/db/ctl", "destroy", want_errno, "DeleteVolume", code, "CREATED")
            self.assertIn(vid, env.plugin.state())
            s(env, "volumes/db/ctl", "destroy", None)
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])

    def test_internal_everywhere(self):
        self.walk_with_failures("INTERNAL", "EIO")

    def test_invalid_argument_everywhere(self):
        self.walk_with_failures("INVALID_ARGUMENT", "EINVAL")

    def test_failed_precondition_everywhere(self):
        self.walk_with_failures("FAILED_PRECONDITION", "EBUSY")

    def test_unavailable_retried(self):
        flags = []
        for rpc in STEP_RPCS:
            flags += ["--fail", "%s=UNAVAILABLE:2" % rpc]
        with vt.VolEnv(flags) as env:
            tgt = env.target("db")
            for ctl, line, state in (
                    ("volumes/ctl", "create db size=1G", "CREATED"),
                    ("volumes/db/ctl", "publish " + tgt, "PUBLISHED"),
                    ("volumes/db/ctl", "expand 2G", "PUBLISHED"),
                    ("volumes/db/ctl", "unpublish", "VOL_READY"),
                    ("volumes/db/ctl", "unstage", "CREATED"),
                    ("volumes/db/ctl", "destroy", None)):
                before = env.ops()
                self.succeeded(env, ctl, line, state)
                new = [o for o in env.ops() if o not in before]
                op = env.op(new[0])
                self.assertEqual((op["state"], op["attempts"]), ("FINISHED", "3"), (line, op))
            calls = env.calls()
            for rpc in STEP_RPCS:
                self.assertEqual(calls.get(rpc, 0), 3, rpc)
            self.assertEqual(env.plugin.state(), {})

    def test_attempts_live_while_retrying(self):
        """While a call is retried, operations/ID/attempts and
        remote_status show the attempts so far and the last status."""
        with vt.VolEnv(["--fail", "CreateVolume=UNAVAILABLE:2"], retry_backoff="400ms") as env:
            fd = os.open(env.fs.path("volumes", "ctl"), os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, b"create db\n")
                oid = os.read(fd, 100).decode().strip()
            finally:
                os.close(fd)
            rd = lambda f: env.fs.read("operations", oid, f).strip()
            self.assertTrue(nt.wait_until(lambda: rd("attempts") != "0" or
                                          rd("state") == "FINISHED", 10))
            seen = (rd("attempts"), rd("remote_status"), rd("state"))
            self.assertIn(seen[0], ("1", "2"), seen)
            self.assertIn("UNAVAILABLE", seen[1], seen)
            self.assertNotEqual(seen[2], "FINISHED", seen)
            self.assertTrue(nt.wait_until(lambda: rd("state") == "FINISHED", 10))
            self.assertEqual(rd("attempts"), "3")

    def test_stop_cancels_a_call_in_flight(self):
        """A CSI call in flight when nodefs stops is cancelled once the
        stop's grace (shortened by test builds) is over: the daemon exits
        then, not at the call's deadline (csi_timeout 60 s here)."""
        nt.requires("hooks")
        with vt.VolEnv(plugin_flags=["--delay", "CreateVolume=60"], csi_timeout="60s",
                       env={"NODEFS_TEST_STOP_GRACE_MS": "300"}) as env:
            fd = os.open(env.fs.path("volumes", "ctl"), os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"create slow\n")
            finally:
                os.close(fd)
            self.assertTrue(nt.wait_until(lambda: "slow" in env.volumes() and
                                          env.state("slow") == "CREATING", 10))
            time.sleep(0.2)	# the call is on the wire
            t0 = time.monotonic()
            self.assertEqual(env.fs.stop(), [], env.fs.log())
            self.assertLess(time.monotonic() - t0, 15, "the daemon waited for the call")

    def test_a_signal_interrupts_a_waiting_write(self):
        """A writer waiting on a slow command gets EINTR as soon as a signal
        interrupts it (the kernel would otherwise wait for the answer, even
        through a SIGKILL); the command goes on to its end, and a later line
        of the same write does not run. SIGKILL ends a waiting writer too."""
        with vt.VolEnv(plugin_flags=["--delay", "CreateVolume=4"], csi_timeout="20s") as env:
            ctl = env.fs.path("volumes", "ctl")
            prog = ("import os, signal, sys\n"
                    "def stop(*a): raise SystemExit(42)\n"
                    "signal.signal(signal.SIGUSR1, stop)\n"
                    "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
                    "print('writing', flush=True)\n"
                    "os.write(fd, sys.argv[2].encode())\n")
            w = subprocess.Popen([sys.executable, "-c", prog, ctl,
                                  "create slow size=1M\ncreate after size=1M\n"],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(w.stdout.readline(), "writing\n")
            self.assertTrue(nt.wait_until(lambda: "slow" in env.volumes(), 10))
            t0 = time.monotonic()
            w.send_signal(signal.SIGUSR1)
            self.assertEqual(w.wait(timeout=nt.scaled(10)), 42)
            self.assertLess(time.monotonic() - t0, 3, "the writer waited for the command")
            self.assertEqual(env.state("slow"), "CREATING")
            # the command goes on and ends; the second line never runs
            self.assertTrue(nt.wait_until(lambda: env.state("slow") == "CREATED",
                                          nt.scaled(20)), env.fs.log())
            _, op = env.last_op("volumes/slow")
            self.assertEqual(op["state"], "FINISHED")
            # the next line is refused by the thread that finished the
            # first, a moment after the operation shows FINISHED
            self.assertTrue(nt.wait_until(lambda: "interrupted" in env.fs.error("volumes"),
                                          nt.scaled(5)), env.fs.error("volumes"))
            self.assertNotIn("after", env.volumes())
            # SIGKILL: the kernel sends the interrupt, and the process goes
            w = subprocess.Popen(["bash", "-c", "echo 'create slow2 size=1M' > " + ctl])
            self.assertTrue(nt.wait_until(lambda: "slow2" in env.volumes(), 10))
            t0 = time.monotonic()
            w.kill()
            w.wait(timeout=nt.scaled(10))
            self.assertLess(time.monotonic() - t0, 3, "the killed writer waited for the command")
            self.assertTrue(nt.wait_until(lambda: env.state("slow2") == "CREATED",
                                          nt.scaled(20)), env.fs.log())
            # an uninterrupted write still waits for its answer
            self.assertEqual(env.ctl("volumes/ctl", "create third size=1M"), (True, "OK"))
            self.assertEqual(env.state("third"), "CREATED")

    def test_writers_of_one_ctl_file_run_at_once(self):
        """Writers of one ctl file do not wait for each other (the kernel
        serialises writes to a FUSE file unless its open allows parallel
        ones): three `create`s written at once to volumes/ctl are in flight
        together while the plugin holds each for a while, and each writer
        gets its own answer. One after another, at most one would ever be
        CREATING. (Writers that open without O_TRUNC: a truncate takes the
        file's lock alone, so `echo >` writers still take turns.)"""
        with vt.VolEnv(plugin_flags=["--delay", "CreateVolume=6"], csi_timeout="60s") as env:
            ctl = env.fs.path("volumes", "ctl")
            # the file's size is what a read of it gives (its usage), which
            # is what lets a command line's write share the file
            with open(ctl) as f:
                self.assertEqual(os.stat(ctl).st_size, len(f.read().encode()))
            names = ["par%d" % k for k in range(3)]
            prog = ("import os, sys\n"
                    "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
                    "os.write(fd, sys.argv[2].encode())\n")
            ws = [subprocess.Popen([sys.executable, "-c", prog, ctl, "create %s size=1M\n" % n])
                  for n in names]
            try:
                self.assertTrue(nt.wait_until(lambda: all(n in env.volumes() for n in names),
                                              nt.scaled(20)), env.volumes())
                creating = [n for n in names if env.state(n) == "CREATING"]
                self.assertGreaterEqual(len(creating), 2,
                                        "the writers took turns: %s" % [(n, env.state(n)) for n in names])
            finally:
                for w in ws:
                    self.assertEqual(w.wait(timeout=nt.scaled(60)), 0)
            self.assertEqual([env.state(n) for n in names], ["CREATED"] * 3)

    def test_timeouts_leave_transient_state_and_are_redriven(self):
        with vt.VolEnv(["--delay", "CreateVolume=2"], csi_timeout="500ms") as env:
            tgt = env.target("db")
            # CreateVolume slower than csi_timeout: every attempt times out
            ok, e = env.ctl("volumes/ctl", "create db size=1G")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes"))
            self.assertIn("DEADLINE_EXCEEDED", env.fs.error("volumes"))
            self.assertEqual(env.state("db"), "CREATING")
            _, op = env.last_op("volumes/db")
            self.assertEqual(op["state"], "FAILED")
            self.assertGreater(int(op["attempts"]), 1)
            # the plugin made it meanwhile, once, whatever the attempts
            self.assertTrue(nt.wait_until(lambda: len(env.plugin.state()) == 1, 10))
            env.restart_plugin(["--delay", "NodeStageVolume=2"])
            # the next command re-drives CreateVolume: the same volume
            ok, e = env.ctl("volumes/db/ctl", "publish " + tgt)
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(len(env.plugin.state()), 1)
            vid = env.vol_id("db")
            self.assertIn(vid, env.plugin.state())
            self.assertEqual(env.state("db"), "NODE_STAGE")
            stage_calls = env.calls().get("NodeStageVolume", 0)
            env.restart_plugin(["--delay", "NodeUnstageVolume=2"])
            ok, e = env.ctl("volumes/db/ctl", "publish " + tgt)
            self.assertTrue(ok, env.fs.error("volumes/db"))
            # NodeStage was sent again: by the background settling of the
            # call whose answer never came, or by this command
            self.assertGreater(env.calls().get("NodeStageVolume", 0), stage_calls)
            self.assertEqual(env.state("db"), "PUBLISHED")
            ok, e = env.ctl("volumes/db/ctl", "unpublish")
            self.assertTrue(ok, env.fs.error("volumes/db"))
            ok, e = env.ctl("volumes/db/ctl", "unstage")
            self.assertEqual((ok, e), (False, "ETIMEDOUT"), env.fs.error("volumes/db"))
            self.assertEqual(env.state("db"), "NODE_UNSTAGE")
            env.restart_plugin([])
            # after a NodeUnstage of unknown outcome, NodeStage is sent again
            stage_calls = env.calls().get("NodeStageVolume", 0)
            ok, e = env.ctl("volumes/db/ctl", "publish " + tgt)
            self.assertTrue(ok, env.fs.error("volumes/db"))
            self.assertEqual(env.calls().get("NodeStageVolume", 0), stage_calls + 1)
            self.assertEqual(env.state("db"), "PUBLISHED")
            rc, err = env.sh("echo still > %s/f" % tgt)
            self.assertEqual(rc, 0, err)
            with open(os.path.join(env.plugin.volume_dir(vid), "f")) as f:
                self.assertEqual(f.read(), "still\n")
            self.succeeded(env, "volumes/db/ctl", "destroy", None)
            self.assertEqual(env.plugin.state(), {})
            self.assertEqual(vt.mounts_under(env.tmp), [])


if __name__ == "__main__":
    nt.main(requires=vt.require_plugin)

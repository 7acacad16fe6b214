# SPDX-License-Identifier: LGPL-2.1-or-later
"""contract: what nodefs(5) promises of a container whatever its runtime.

Contract is mixed into each runtime's TestCase (test_docker.Docker,
test_lxc.Lxc), which gives it three things:
  start(env, short, cmd, extra="")
                            run a container of that runtime with cmd (and
                            the create options extra), and return its
                            nodefs name;
  engine_stopped(env, name) assert that the engine itself (docker inspect,
                            lxc-info) says the container does not run;
  stop_more(env), logs_more(env)
                            what only that runtime adds (optional).
The cases here then hold both runtimes to the same words: `stop` waits its
timeout and kills, with the runtime's stop_timeout as the default; `kill`
takes a signal and leaves its exit code; `wait` blocks until the exit;
`logs` has what the process wrote, in its order.
"""

import signal
import time

import nodefs_test as nt
import ctest

# exits 0 at once when TERM comes
HONOUR_TERM = "sh -c \"trap 'exit 0' TERM; while :; do sleep 0.1; done\""
FOREVER = "sleep 1000"


class Contract:
    def start(self, env, short, cmd, extra=""):
        raise NotImplementedError

    def engine_stopped(self, env, name):
        raise NotImplementedError

    def stop_more(self, env):
        pass

    def logs_more(self, env):
        pass

    def test_stop_waits_then_kills(self):
        with ctest.Env(stop_timeout="1s") as env:
            n = self.start(env, "st", ctest.IGNORE_TERM)
            w = env.start_wait_reader(n)
            t0 = time.monotonic()
            env.cctl(n, "stop 2")
            took = time.monotonic() - t0
            self.assertEqual(env.state(n), "EXITED")
            self.assertGreaterEqual(took, 1.9, "stop did not wait its timeout")
            self.assertLess(took, nt.scaled(8))
            self.assertEqual(env.cread(n, "exit_code").strip(), "137")
            self.assertTrue(env.cread(n, "finished_at").strip())
            self.assertEqual(env.cread(n, "pid"), "")
            self.engine_stopped(env, n)
            w.join(5)
            self.assertEqual(w.result, "exit_code=137 oom_killed=0\n")
            # no TIMEOUT_S: the runtime's stop_timeout (1s here, not 10)
            d = self.start(env, "dflt", ctest.IGNORE_TERM)
            t0 = time.monotonic()
            env.cctl(d, "stop")
            took = time.monotonic() - t0
            self.assertGreaterEqual(took, 0.9)
            self.assertLess(took, nt.scaled(6), "stop ignored the runtime's stop_timeout")
            self.assertEqual(env.cread(d, "exit_code").strip(), "137")
            # a process that honours TERM stops at once with its own code
            # (once its handler is in place: a namespace's init drops a
            # signal it has no handler for)
            g = self.start(env, "gr", HONOUR_TERM)
            env.wait_caught(g, signal.SIGTERM)
            t0 = time.monotonic()
            env.cctl(g, "stop 10")
            self.assertLess(time.monotonic() - t0, nt.scaled(5))
            self.assertEqual(env.cread(g, "exit_code").strip(), "0")
            # a stop of a container that does not run, and a bad timeout
            ok, err = env.ctl("containers/%s/ctl" % g, "stop")
            self.assertEqual((ok, err), (False, "EINVAL"))
            ok, err = env.ctl("containers/%s/ctl" % g, "stop soon")
            self.assertEqual((ok, err), (False, "EINVAL"))
            self.stop_more(env)

    def test_kill_signal_and_exit_code(self):
        with ctest.Env() as env:
            n = self.start(env, "hup", ctest.HUP_42)
            ok, err = env.ctl("containers/%s/ctl" % n, "kill NOSUCHSIG")
            self.assertEqual((ok, err), (False, "EINVAL"))
            self.assertEqual(env.state(n), "RUNNING")
            env.wait_caught(n, signal.SIGHUP)
            env.cctl(n, "kill HUP")
            env.wait_state(n, "EXITED", 5)
            self.assertEqual(env.cread(n, "exit_code").strip(), "42")
            k = self.start(env, "k9", FOREVER)
            env.cctl(k, "kill")
            env.wait_state(k, "EXITED", 5)
            self.assertEqual(env.cread(k, "exit_code").strip(), "137")
            self.assertEqual(env.cread(k, "wait"), "exit_code=137 oom_killed=0\n")
            # start again after the exit; a signal by name with SIG and by
            # number
            for sig in ("SIGKILL", "9"):
                env.cctl(k, "start")
                self.assertEqual(env.state(k), "RUNNING")
                self.assertEqual(env.cread(k, "exit_code"), "")
                env.cctl(k, "kill " + sig)
                env.wait_state(k, "EXITED", 5)
                self.assertEqual(env.cread(k, "exit_code").strip(), "137")

    def test_wait_blocks_until_exit(self):
        with ctest.Env() as env:
            n = self.start(env, "wt", FOREVER)
            readers = [env.start_wait_reader(n) for _ in range(3)]
            # a negative (nothing returned yet) has no event to wait on:
            # 0.5 s is ample for a wrongful return to show
            time.sleep(0.5)
            for r in readers:
                self.assertTrue(r.is_alive(), "wait returned before the exit: %r" % r.result)
            env.cctl(n, "kill KILL")
            for r in readers:
                r.join(3)
                self.assertEqual(r.result, "exit_code=137 oom_killed=0\n")
            # an exited container answers at once
            t0 = time.monotonic()
            self.assertEqual(env.cread(n, "wait"), "exit_code=137 oom_killed=0\n")
            self.assertLess(time.monotonic() - t0, nt.scaled(1))
            # a container that exits by itself with its own code, late or
            # at once
            s = self.start(env, "self", "sh -c 'sleep 0.5; exit 5'")
            self.assertEqual(env.cread(s, "wait"), "exit_code=5 oom_killed=0\n")
            self.assertEqual(env.state(s), "EXITED")
            q = self.start(env, "quick", "sh -c 'exit 7'")
            self.assertEqual(env.cread(q, "wait"), "exit_code=7 oom_killed=0\n")

    def test_sandbox_mounted_owned_sized_and_removed(self):
        """The sandbox: made before the create under STATE_DIR/sandboxes,
        the container user's with mode 0750, mounted at sandbox_path,
        files written on either side seen on the other, its bytes in
        stats; none with sandbox=no; gone with destroy."""
        import os
        with ctest.Env() as env:
            n = self.start(env, "sb", FOREVER, "user=65534 sandbox_path=/work")
            path = env.cread(n, "sandbox").strip()
            self.assertTrue(path.startswith(os.path.join(env.state_dir, "sandboxes", n + "-")), path)
            st = os.stat(path)
            self.assertEqual((st.st_mode & 0o7777, st.st_uid), (0o750, 65534))
            with open(os.path.join(path, "from-host"), "w") as f:
                f.write("h" * 1000)
            same, out, code = env.exec_fd(n, 'sh -c "cat /work/from-host | wc -c; '
                                          'echo inside >/work/from-inside"')
            self.assertEqual((out.strip(), code), ("1000", "0"))
            with open(os.path.join(path, "from-inside")) as f:
                self.assertEqual(f.read(), "inside\n")
            self.assertEqual(env.stats(n)["sandbox_bytes"], 1007)
            info = __import__("json").loads(env.cread(n, "info.json"))
            self.assertEqual((info["sandbox_dir"], info["sandbox_path"], info["sandbox"]),
                             (path, "/work", True))
            # sandbox=no: none, nothing mounted
            o = self.start(env, "nosb", FOREVER, "sandbox=no")
            self.assertEqual(env.cread(o, "sandbox"), "")
            same, out, code = env.exec_fd(o, "test -e /sandbox")
            self.assertEqual(code, "1")
            self.assertEqual(env.stats(o)["sandbox_bytes"], 0)
            env.cctl(n, "destroy")
            env.wait_gone(n)
            self.assertFalse(os.path.exists(path))

    def test_fetch_lands_in_the_sandbox(self):
        """fetch= on this runtime: a tar.gz unpacked and an executable file
        in the sandbox before the start, seen inside (test_fetch.py has
        the fetcher's cases; the stage is the same for every runtime)."""
        import hashlib
        import httpfix
        import test_fetch
        with httpfix.Server() as srv, ctest.Env() as env:
            tool = b"#!/bin/sh\necho tool-ran\n"
            srv.put("tool", tool)
            srv.put("a.tgz", test_fetch.tgz([("d/a.txt", b"alpha\n")]))
            n = self.start(env, "fe", FOREVER, "user=65534 fetch=%s fetch=%s" % (
                ctest._shq(srv.url("/f/tool") + " executable sha256=" +
                           hashlib.sha256(tool).hexdigest()),
                ctest._shq(srv.url("/f/a.tgz") + " extract")))
            same, out, code = env.exec_fd(n, 'sh -c "/sandbox/tool; cat /sandbox/d/a.txt; '
                                          'stat -c %u /sandbox/d/a.txt"')
            self.assertEqual((out, code), ("tool-ran\nalpha\n65534\n", "0"))
            self.assertEqual([l.split()[1] for l in env.cread(n, "fetch").splitlines()],
                             ["done", "done"])

    def test_logs_stdout_and_stderr(self):
        with ctest.Env() as env:
            n = self.start(env, "lg", "sh -c 'echo to-out; echo to-err >&2; i=0; "
                           "while [ $i -lt 300 ]; do echo line$i; i=$((i+1)); done'")
            self.assertEqual(env.cread(n, "wait"), "exit_code=0 oom_killed=0\n")
            logs = env.cread(n, "logs")
            self.assertIn("to-out\n", logs)
            self.assertIn("to-err\n", logs)
            # stdout keeps its order; stderr may be copied on a pipe of its
            # own, so where to-err lands among the lines is the engine's
            out = [l for l in logs.splitlines() if l.startswith("line")]
            self.assertEqual(out, ["line%d" % i for i in range(300)])
            # no multiplexing header bytes leak through
            self.assertNotIn("\x01\x00\x00\x00", logs)
            self.assertNotIn("\x02\x00\x00\x00", logs)
            # the same through cat, as a user reads it
            p = env.fs.sh("cat containers/%s/logs | grep -c ^line" % n)
            self.assertEqual(p.stdout.strip(), "300")
            self.logs_more(env)

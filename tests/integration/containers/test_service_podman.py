# SPDX-License-Identifier: LGPL-2.1-or-later
"""A container's health check on Podman (issue #33), against the run's
Podman serving the Docker Engine API (tests/fixtures/podman.sh; run as
containers-podman-3, NODEFS_TEST_ENGINE=podman pointing the harness at it).

Podman 4.3 times its checks with systemd timers, which a host without
systemd never fires, so nodefs runs the engine's own check at each
interval; the health file, the events and podman's inspect agree.
"""

import os
import sys
import unittest

import nodefs_test as nt
import ctest
from ctest import IMAGE

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "observe"))
from observe import EventReader  # noqa: E402


def health(env, name):
    return nt.parse_kv(env.cread(name, "health"))


class PodmanService(unittest.TestCase):

    def test_podman_cmd_health(self):
        # Podman 4.3 times its checks with systemd timers, which this host
        # never fires, and its health_status event carries a word a check
        # behind: nodefs runs the engine's own check at each interval
        # (libpod's healthcheck call) and takes Podman's judgement; the
        # health file and the events follow it, and podman's inspect
        # agrees. The check's words with a space in one (Podman's Engine
        # API splits a CMD at each space) reach it whole.
        nt.requires("mount", "docker")
        with ctest.Env() as env:
            p = env.name("pm")
            ev = EventReader(env.fs.path("events"))
            env.run(p, "runtime=docker image=%s health='cmd sh -c \"test -e /tmp/ok\"' "
                       "health_interval=300ms health_retries=2 "
                       "cmd='sh -c \"mkdir -p /tmp; touch /tmp/ok; exec sleep 600\"'" % IMAGE)

            def inspect():
                return ctest.docker("inspect", "-f", "{{.State.Health.Status}}",
                                    env.engine(p)).stdout.strip()

            def engine_agrees(state):
                # Podman's inspect follows its record of the checks, which
                # once still said unhealthy just after the call whose
                # answer said healthy (a whole run, build/): it must agree
                # within moments, not at the same instant
                got = []
                nt.wait_until(lambda: got.append(inspect()) or got[-1] == state, 5,
                              interval=0.1)
                self.assertEqual(got[-1], state, "podman inspect: %s" % got)

            def change(state):
                got = ev.read_until(lambda e: e.get("kind") == "health" and
                                    e.get("name") == p and e.get("new") == state, 10)
                self.assertIsNotNone(got, env.cread(p, "health"))

            change("healthy")
            self.assertEqual(health(env, p)["state"], "healthy")
            engine_agrees("healthy")
            env.cctl(p, "exec 'rm /tmp/ok'")
            change("unhealthy")
            h = health(env, p)
            self.assertEqual(h["state"], "unhealthy")
            self.assertGreaterEqual(int(h["failing_streak"]), 2, h)
            engine_agrees("unhealthy")
            env.cctl(p, "exec 'touch /tmp/ok'")
            change("healthy")
            self.assertEqual(health(env, p)["failing_streak"], "0")
            engine_agrees("healthy")
            ev.close()


if __name__ == "__main__":
    ctest.main(docker_needed=True)

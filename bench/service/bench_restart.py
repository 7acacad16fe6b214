# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/service: detection-to-restart latency of a crashed container,
nodefs's restart policy against Docker's own `--restart on-failure`, on the
same dockerd in the same run, rounds interleaved.

The clock is the engine's: for each container, the time of its `die`
event to the time of the next `start` event (timeNano, from the engine's
/events). Each round makes two fresh containers of busybox running
`sh -c 'sleep 0.05; exit 1'`: one through nodefs (restart=on-failure:1,
retry_backoff = retry_max = 100ms, so its wait is drawn from [50, 100] ms),
one with `docker run --restart on-failure:1` (Docker waits 100 ms before a
first restart). Both waits are deliberate; the figures are
- latency: die to start, median of ROUNDS, and the ratio nodefs/docker;
- overhead: latency minus the wait each had scheduled (nodefs's from its
  EXITED event, "restart 1 of 1 in D ms"; Docker's 100 ms), and the ratio.

Usage: bench_restart.py [ROUNDS] (default 15). Root, FUSE, dockerd
(NODEFS_TEST_DOCKER_HOST, tests/fixtures/dockerd.sh); exit 77 without.
Exits 0 whatever the figures, 1 when it could not measure.
"""

import json
import os
import re
import statistics
import sys
import time

SRC = os.environ.get("NODEFS_SRC", "")
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "integration", "containers"))
sys.path.insert(0, os.path.join(SRC, "tests", "integration", "observe"))
import nodefs_test as nt  # noqa: E402
import ctest  # noqa: E402
from observe import EventReader  # noqa: E402

CMD = "sh -c 'sleep 0.05; exit 1'"


def engine_gap(cid, since, host):
    """ms from the container's first die event to the start after it."""
    out = ctest.docker("events", "--since", "%.3f" % since, "--until", "%.3f" % time.time(),
                       "--filter", "container=" + cid, "--format", "{{json .}}",
                       host=host, timeout=30).stdout
    die = None
    for line in out.splitlines():
        ev = json.loads(line)
        act, t = ev.get("Action") or ev.get("status"), ev.get("timeNano")
        if act == "die" and die is None:
            die = t
        elif act == "start" and die is not None:
            return (t - die) / 1e6
    return None


class Env(ctest.Env):
    """ctest's Env with the plugin supervisor's bounds set to Docker's
    first wait: retry_backoff = retry_max = 100ms."""

    def config(self):
        return super().config().replace("retry_backoff = 50ms\nretry_max = 400ms",
                                        "retry_backoff = 100ms\nretry_max = 100ms")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    why = nt.why_not("mount", "docker")
    if why:
        print("bench_restart: " + why)
        return 77
    host = ctest.HOST
    lat = {"nodefs": [], "docker": []}
    over = {"nodefs": [], "docker": []}
    with Env() as env:
        for i in range(rounds):
            # nodefs's policy
            n = env.name("r%d" % i)
            t0 = time.time() - 1
            ev = EventReader(env.fs.path("events"))
            env.run(n, "runtime=docker image=%s restart=on-failure:1 cmd=\"%s\""
                    % (ctest.IMAGE, CMD))
            w = env.start_wait_reader(n)
            w.join(nt.scaled(30))
            if w.is_alive():
                print("bench_restart: nodefs: no final exit")
                return 1
            cid = env.cread(n, "id").strip()
            gap = engine_gap(cid, t0, host)
            # the wait nodefs scheduled: its EXITED event's note
            e = ev.read_until(lambda e: e.get("name") == n and
                              "restart 1 of 1 in" in (e.get("message") or ""), 10)
            ev.close()
            m = re.findall(r"restart 1 of 1 in (\d+) ms", (e or {}).get("message") or "")
            if gap is None or not m:
                print("bench_restart: nodefs round %d: no die/start pair or no note" % i)
                return 1
            lat["nodefs"].append(gap)
            over["nodefs"].append(gap - int(m[0]))
            env.cctl(n, "destroy")
            # Docker's own
            name = "%s-dk%d" % (env.tag, i)
            t0 = time.time() - 1
            r = ctest.docker("run", "-d", "--restart", "on-failure:1", "--name", name,
                             ctest.IMAGE, "sh", "-c", "sleep 0.05; exit 1", host=host)
            if r.returncode != 0:
                print("bench_restart: docker run: " + r.stderr.strip())
                return 1
            cid = r.stdout.strip()
            ctest.docker("wait", cid, host=host, timeout=60)
            # wait returns at the first exit: wait for the restart's end
            deadline = time.time() + 30
            while time.time() < deadline:
                st = ctest.docker("inspect", "-f", "{{.RestartCount}} {{.State.Status}}", cid,
                                  host=host).stdout.split()
                if st and st[0] == "1" and st[1] == "exited":
                    break
                time.sleep(0.05)
            gap = engine_gap(cid, t0, host)
            ctest.docker("rm", "-f", cid, host=host)
            if gap is None:
                print("bench_restart: docker round %d: no die/start pair" % i)
                return 1
            lat["docker"].append(gap)
            over["docker"].append(gap - 100.0)
    mn, md = statistics.median(lat["nodefs"]), statistics.median(lat["docker"])
    on, od = statistics.median(over["nodefs"]), statistics.median(over["docker"])
    print("rounds: %d" % rounds)
    print("latency die->start median: nodefs %.1f ms, docker --restart %.1f ms, ratio %.2fx"
          % (mn, md, mn / md))
    print("overhead beyond the scheduled wait, median: nodefs %.1f ms, docker %.1f ms, "
          "ratio %.2fx" % (on, od, on / od if od > 0 else float("inf")))
    print("goal: latency at most 1.2x docker's: %s" % ("met" if mn / md <= 1.2 else "missed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

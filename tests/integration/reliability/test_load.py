#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Load: 16 writers and 3 readers against one mount for 60 s.

One nodefs mount (ctest.Env: the CSI test plugin, the run's dockerd, LXC in
a private lxcpath with no network and the unconfined profile) gets, for
NODEFS_LOAD_SECONDS (60 by default), 16 writer threads each writing a
random mix of commands on a small shared set of names, so that commands
collide: volume create, publish (to a few shared targets under
allowed_targets), unpublish, stage, unstage, expand, destroy, mkdir, rmdir;
Docker and LXC container run, create, start, stop, kill, pause, resume,
update, exec, destroy; and bad commands (unknown words, bad names, sizes,
targets outside allowed_targets, relative targets, NUL bytes, non-UTF-8,
lines over 4 KiB). A tenth of the writes use O_NONBLOCK and keep the
operation id they get back. Meanwhile reader threads walk the whole tree
and read every file (events and wait with O_NONBLOCK and poll, never a
blocking read).

Every answer is classified. A success is "ok"; an errno the command may
give in some state of its object (EBUSY, ENOENT, EEXIST for every command;
EINVAL where the man page says so, e.g. unpublish of a volume that is not
published, stop of a container that is not running; ECANCELED for a
create that a destroy cancelled; the errno a bad command must get) is
"refused"; anything else is an error, and so is a write or read blocked
longer than the hang deadline (60 s; 240 s in a sanitizer build). A read
may get ENOENT (its object went) or, for a container's logs, EBUSY (the
engine refuses the logs of a container being removed).

At the end the daemon must be alive and READY; every operation under
operations/ must be FINISHED, FAILED or DROPPED within a settle time (none
PENDING); the daemon's log must hold no sanitizer report; everything left
is destroyed through the mount, after which no volume is left in the
plugin, nothing is mounted under the temp dir, Docker has no container
with nodefs's label and this run's tag, and lxc-ls shows nothing. It
prints operations per second, the count per outcome and per command, and
the error count, which must be 0; each error comes with the events and
operations of the object it names (an event reader records the run).
NODEFS_LOAD_SEED fixes the writers' random choices (the threads' timing
still varies).
"""

import collections
import errno
import json
import os
import random
import select
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "containers"))
sys.path.insert(0, os.path.join(HERE, "..", "observe"))

import nodefs_test as nt  # noqa: E402
import ctest  # noqa: E402
from ctest import IMAGE  # noqa: E402
from observe import parse_prom  # noqa: E402

SECONDS = float(os.environ.get("NODEFS_LOAD_SECONDS", "60"))
WRITERS = 16
READERS = 3
END_STATES = ("FINISHED", "FAILED", "DROPPED")
# A container command that stops at once on TERM (pid 1 has the handler).
CMD = "sh -c \"trap 'exit 0' TERM; while :; do sleep 0.2; done\""
SEED = int(os.environ.get("NODEFS_LOAD_SEED", str(int(time.time()))))

E = errno
BASE_REFUSED = {E.EBUSY, E.ENOENT, E.EEXIST}


def sanitized(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "libasan" in f.read()
    except OSError:
        return False


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_cmd = collections.Counter()      # (kind, outcome, errname)
        self.outcomes = collections.Counter()
        self.errors = []
        self.nonblock_ids = []
        self.reads = collections.Counter()

    def count(self, kind, outcome, ename, detail=None):
        with self.lock:
            self.by_cmd[(kind, outcome, ename)] += 1
            self.outcomes[outcome] += 1
            if outcome == "error":
                self.errors.append(detail or "%s: %s" % (kind, ename))

    def read(self, outcome):
        with self.lock:
            self.reads[outcome] += 1

    def error(self, detail):
        with self.lock:
            self.outcomes["error"] += 1
            self.errors.append(detail)


class Load:
    """The shared names, the commands and the threads of one run."""

    def __init__(self, env, hang_s, lxc_share=0.25):
        self.env = env
        self.lxc_share = lxc_share
        self.fs = env.fs
        self.hang_s = hang_s
        self.stats = Stats()
        self.vols = [env.name("v%d" % i) for i in range(4)]
        self.dockers = [env.name("d%d" % i) for i in range(4)]
        self.lxcs = [env.name("l%d" % i) for i in range(2)]
        self.targets = [os.path.join(env.pub, "t%d" % i) for i in range(6)]
        self.stop = threading.Event()
        self.busy = {}          # thread name -> (what, since)
        self.busy_lock = threading.Lock()
        self.reported = set()

    # ---- one command ------------------------------------------------
    def attempt(self, kind, what, fn, refused, errdir, detail=lambda: ""):
        """Run fn (it raises OSError, or returns an operation id or None)
        while this thread shows as busy with what, and classify the answer:
        ok, refused (an errno in refused) or error, an error told with the
        line of errdir's error file and detail()."""
        me = threading.current_thread().name
        with self.busy_lock:
            self.busy[me] = (what, time.monotonic())
        err = 0
        oid = None
        try:
            oid = fn()
        except OSError as e:
            err = e.errno
        finally:
            with self.busy_lock:
                self.busy.pop(me, None)
        ename = nt.errname(err)
        if err == 0:
            self.stats.count(kind, "ok", ename)
            if oid:
                with self.stats.lock:
                    self.stats.nonblock_ids.append((oid, kind))
        elif err in refused:
            self.stats.count(kind, "refused", ename)
        else:
            try:
                msg = self.fs.read(errdir, "error").strip()
            except OSError as e:
                msg = "(error file: %s)" % e
            # the error file is the directory's: another writer's command
            # may have put its line there since; the operation has its own
            self.stats.count(kind, "error", ename, "%s: %s (error file now: %s)%s"
                             % (what, ename, msg, detail()))
        return err

    def write(self, kind, rel, line, refused, nonblock=False):
        """Write line (str or bytes) to rel and classify the answer.
        refused: the errnos this command may get in some state."""
        data = line if isinstance(line, bytes) else line.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        where = os.path.dirname(rel)

        def do():
            fd = os.open(self.fs.path(rel), os.O_RDWR | (os.O_NONBLOCK if nonblock else 0))
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(E.EIO, "short write")
                return os.pread(fd, 256, 0).decode().strip() if nonblock else None
            finally:
                os.close(fd)
        return self.attempt(kind, "%s <- %r" % (rel, data[:200]), do, refused, where,
                            lambda: self.failed_op(where, data))

    def failed_op(self, where, data):
        """The newest FAILED operation on object where with this command
        line, as text, or ''."""
        line = data.decode(errors="replace").strip()
        try:
            ids = sorted(os.listdir(self.fs.path("operations")), reverse=True)[:300]
            for o in ids:
                info = json.loads(self.fs.read("operations", o, "info.json"))
                if info.get("object") == where and info.get("state") == "FAILED" \
                        and info.get("command") == line:
                    return "; operation %s: %s [%s]" % (o, info.get("error"), info.get("remote"))
        except (OSError, ValueError):
            pass
        return ""

    # ---- the command mix ------------------------------------------------
    def volume_cmd(self, rnd):
        v = rnd.choice(self.vols)
        vc = "volumes/%s/ctl" % v
        nb = rnd.random() < 0.1
        r = rnd.random()
        if r < 0.16:
            return self.write("volume.create", "volumes/ctl", "create %s size=16M" % v,
                              BASE_REFUSED, nb)
        if r < 0.34:
            return self.write("volume.publish", vc, "publish " + rnd.choice(self.targets),
                              BASE_REFUSED, nb)
        if r < 0.48:
            return self.write("volume.unpublish", vc, "unpublish",
                              BASE_REFUSED | {E.EINVAL}, nb)
        if r < 0.54:
            return self.write("volume.stage", vc, "stage", BASE_REFUSED, nb)
        if r < 0.60:
            return self.write("volume.unstage", vc, "unstage", BASE_REFUSED, nb)
        if r < 0.70:
            return self.write("volume.expand", vc, "expand %dM" % rnd.choice((32, 64, 128, 256)),
                              BASE_REFUSED | {E.EINVAL}, nb)
        if r < 0.82:
            return self.write("volume.destroy", vc, "destroy", BASE_REFUSED, nb)
        if r < 0.86:
            return self.dir_op("volume.mkdir", os.mkdir, "volumes/" + v)
        if r < 0.90:
            return self.dir_op("volume.rmdir", os.rmdir, "volumes/" + v)
        return self.bad_volume_cmd(rnd, v)

    def bad_volume_cmd(self, rnd, v):
        vc = "volumes/%s/ctl" % v
        bad = [
            ("volumes/ctl", "bogus %s" % v, {E.EINVAL}),
            ("volumes/ctl", "create", {E.EINVAL}),
            ("volumes/ctl", "create ../%s" % v, {E.EINVAL}),
            ("volumes/ctl", "create .%s" % v, {E.EINVAL}),
            ("volumes/ctl", "create %s size=lots" % v, {E.EINVAL, E.EEXIST}),
            ("volumes/ctl", "create %s plugin=nope" % v, {E.EINVAL, E.EEXIST}),
            ("volumes/ctl", b"create %s\x00x" % v.encode(), {E.EINVAL}),
            ("volumes/ctl", b"create \xff\xfe", {E.EINVAL}),
            ("volumes/ctl", "create " + "x" * 5000, {E.EINVAL}),
            (vc, "publish relative/t", {E.EINVAL, E.ENOENT}),
            (vc, "publish /etc/nodefs-load", {E.EPERM, E.ENOENT}),
            (vc, "publish %s/../../etc" % self.env.pub, {E.EINVAL, E.ENOENT}),
            (vc, "expand lots", {E.EINVAL, E.ENOENT}),
            (vc, "unpublish now", {E.EINVAL, E.ENOENT}),
            (vc, "fly", {E.EINVAL, E.ENOENT}),
        ]
        rel, line, refused = rnd.choice(bad)
        return self.write("volume.bad", rel, line, refused)

    def dir_op(self, kind, fn, rel):
        return self.attempt(kind, "%s %s" % (kind, rel), lambda: fn(self.fs.path(rel)),
                            BASE_REFUSED, "volumes")

    def container_cmd(self, rnd):
        lxc = rnd.random() < self.lxc_share
        c = rnd.choice(self.lxcs if lxc else self.dockers)
        rt = "lxc" if lxc else "docker"
        cc = "containers/%s/ctl" % c
        nb = rnd.random() < 0.1
        # a state-dependent command may meet its container in any state:
        # EINVAL is the man page's answer to stop of a container that is
        # not running; the engines answer pause, resume, kill, exec and
        # update of a container in the wrong state with EBUSY
        busy = BASE_REFUSED | {E.EINVAL}
        r = rnd.random()
        if r < 0.20:
            if lxc:
                opts = "runtime=lxc template=busybox cmd=%s memory=64M" % ctest._shq(CMD)
            else:
                opts = "runtime=docker image=%s cmd=%s memory=32M" % (IMAGE, ctest._shq(CMD))
            verb = "run" if rnd.random() < 0.8 else "create"
            # ECANCELED: a destroy came while it was being made
            return self.write("%s.%s" % (rt, verb), "containers/ctl",
                              "%s %s %s" % (verb, c, opts), BASE_REFUSED | {E.ECANCELED}, nb)
        if r < 0.28:
            return self.write(rt + ".start", cc, "start", BASE_REFUSED, nb)
        if r < 0.39:
            return self.write(rt + ".stop", cc, "stop %d" % rnd.randint(0, 2), busy, nb)
        if r < 0.45:
            return self.write(rt + ".kill", cc, "kill " + rnd.choice(("", "KILL", "TERM", "HUP")),
                              busy, nb)
        if r < 0.53:
            # EAGAIN: a Docker pause runc could not freeze, three times
            # (nodefs(5)); before those retries one whole run met a
            # single failure of runc's, as EIO
            return self.write(rt + ".pause", cc, "pause",
                              busy if lxc else busy | {E.EAGAIN}, nb)
        if r < 0.61:
            return self.write(rt + ".resume", cc, "resume", busy, nb)
        if r < 0.68:
            return self.write(rt + ".update", cc, "update memory=%dM pids=%d" % (
                rnd.choice((32, 48, 64)), rnd.randint(20, 100)), busy, nb)
        if r < 0.76:
            return self.write(rt + ".exec", cc, "exec 'echo load'", busy, nb)
        if r < 0.88:
            return self.write(rt + ".destroy", cc, "destroy", BASE_REFUSED, nb)
        # a bad line naming a container that exists may be refused for
        # either reason
        taken = {E.EINVAL, E.EEXIST}
        bad = [
            ("containers/ctl", "run %s" % c, taken),
            ("containers/ctl", "run %s runtime=podman" % c, taken),
            ("containers/ctl", "run %s runtime=docker" % c, taken),
            ("containers/ctl", "run %s runtime=docker image=%s memory=1K" % (c, IMAGE),
             taken),
            ("containers/ctl", "run bad/name runtime=docker image=x", {E.EINVAL}),
            ("containers/ctl", b"run \xff runtime=docker image=x", {E.EINVAL}),
            ("containers/ctl", "run %s runtime=docker image=%s cmd='unterminated"
             % (c, IMAGE), {E.EINVAL}),
            ("containers/ctl", "run %s runtime=docker image=%s bind=/etc:/x"
             % (c, IMAGE), {E.EPERM, E.EEXIST}),
            (cc, "kill SIGNOPE", {E.EINVAL, E.ENOENT}),
            (cc, "stop soon", {E.EINVAL, E.ENOENT}),
            (cc, "update memory=1K", {E.EINVAL, E.ENOENT}),
            (cc, "exec", {E.EINVAL, E.ENOENT}),
            (cc, "jump", {E.EINVAL, E.ENOENT}),
        ]
        rel, line, refused = rnd.choice(bad)
        return self.write(rt + ".bad", rel, line, refused)

    def writer(self, idx):
        rnd = random.Random(SEED * 100 + idx)
        while not self.stop.is_set():
            try:
                if rnd.random() < 0.5:
                    self.volume_cmd(rnd)
                else:
                    self.container_cmd(rnd)
            except Exception as e:     # a bug of this test: count it, go on
                self.stats.error("writer %d: %r" % (idx, e))

    # ---- readers -----------------------------------------------------
    def read_file(self, path):
        name = os.path.basename(path)
        me = threading.current_thread().name
        with self.busy_lock:
            self.busy[me] = ("read " + path, time.monotonic())
        try:
            if name in ("events", "wait"):
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                try:
                    p = select.poll()
                    p.register(fd, select.POLLIN)
                    ready = p.poll(100)
                    try:
                        os.read(fd, 65536)
                    except BlockingIOError:
                        # POLLIN on events means a line is there for this
                        # descriptor; a wait file's readiness follows its
                        # object, which may be busy again by the read
                        if name == "events" and ready and ready[0][1] & select.POLLIN:
                            self.stats.error("read %s: EAGAIN after POLLIN" % path)
                finally:
                    os.close(fd)
            else:
                with open(path, "rb") as f:
                    data = f.read()
                if name == "nodefs.prom":
                    parse_prom(data.decode())
                elif name == "info.json":
                    json.loads(data)
            self.stats.read("ok")
        except OSError as e:
            # ENOENT: the object went between the walk and the read; EBUSY:
            # the engine refused the logs of a container being removed
            self.stats.read(nt.errname(e.errno))
            if e.errno != E.ENOENT and not (e.errno == E.EBUSY and name == "logs"):
                try:
                    with open(os.path.join(os.path.dirname(path), "error")) as f:
                        msg = f.read().strip()
                except OSError as e2:
                    msg = "(error file: %s)" % nt.errname(e2.errno)
                self.stats.error("read %s: %s (error file now: %s)"
                                 % (path, nt.errname(e.errno), msg))
        except ValueError as e:
            self.stats.error("read %s: bad content: %s" % (path, e))
        finally:
            with self.busy_lock:
                self.busy.pop(me, None)

    def reader(self, idx):
        while not self.stop.is_set():
            try:
                for d, _, files in os.walk(self.fs.mnt):
                    for f in files:
                        if self.stop.is_set():
                            return
                        self.read_file(os.path.join(d, f))
            except Exception as e:
                self.stats.error("reader %d: %r" % (idx, e))

    # ---- the history, for a failure's diagnosis ---------------------------
    def record_events(self):
        """Every event of the run, read as they come (blocking reads: the
        mount's stop ends them)."""
        self.events = []
        try:
            fd = os.open(self.fs.path("events"), os.O_RDONLY)
        except OSError:
            return
        buf = b""
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                buf += chunk
                *lines, buf = buf.split(b"\n")
                self.events.extend(lines)
        except OSError:
            return
        finally:
            os.close(fd)

    def story(self, names):
        """The events and operations that name one of names, as lines."""
        out = []
        for line in list(getattr(self, "events", [])):
            text = line.decode(errors="replace")
            if any(n in text for n in names):
                out.append("  event " + text)
        for o in sorted(os.listdir(self.fs.path("operations"))):
            try:
                info = json.loads(self.fs.read("operations", o, "info.json"))
            except (OSError, ValueError):
                continue
            if any(n in json.dumps(info) for n in names):
                out.append("  op %s" % json.dumps(info, sort_keys=True))
        return out

    # ---- the run -----------------------------------------------------
    def watch_hangs(self):
        now = time.monotonic()
        with self.busy_lock:
            for who, (what, since) in self.busy.items():
                if now - since > self.hang_s and (who, since) not in self.reported:
                    self.reported.add((who, since))
                    self.stats.error("hang: %s blocked %.0f s in %s" % (who, now - since, what))

    def run(self, seconds):
        threads = [threading.Thread(target=self.writer, args=(i,), name="w%d" % i, daemon=True)
                   for i in range(WRITERS)]
        threads += [threading.Thread(target=self.reader, args=(i,), name="r%d" % i, daemon=True)
                    for i in range(READERS)]
        threading.Thread(target=self.record_events, name="events", daemon=True).start()
        t0 = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() - t0 < seconds:
            time.sleep(0.5)
            self.watch_hangs()
        self.stop.set()
        # the last commands finish (a queue of commands on one object)
        deadline = time.monotonic() + self.hang_s
        for t in threads:
            while t.is_alive() and time.monotonic() < deadline:
                t.join(0.5)
                self.watch_hangs()
        wall = time.monotonic() - t0
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            self.stats.error("threads still blocked after the run: %s; busy: %r"
                             % (stuck, self.busy))
        return wall


def bounded(fn, seconds):
    """fn() on a thread of its own: (True, result) when it returned within
    seconds, (False, None) when it is still blocked (a hung FUSE write
    cannot be interrupted; the daemon's stop ends it)."""
    box = {}

    def run():
        try:
            box["r"] = fn()
        except Exception as e:
            box["r"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return (not t.is_alive(), box.get("r"))


def kill_lxc_leftovers(lxcpath):
    """SIGKILL processes whose command line names this run's lxcpath: an
    LXC monitor liblxc forked from the daemon outlives it when it hangs."""
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if lxcpath.encode() + b" " not in f.read().replace(b"\0", b" ") + b" ":
                    continue
            os.kill(int(d), 9)
        except OSError:
            pass


def op_states(fs):
    out = {}
    for o in os.listdir(fs.path("operations")):
        try:
            out[o] = fs.read("operations", o, "state").strip()
        except OSError as e:
            if e.errno != E.ENOENT:     # dropped by operations_keep meanwhile
                raise
    return out


class LoadTest(unittest.TestCase):
    def test_load(self):
        lxcpath = []
        try:
            self.load(lxcpath)
        finally:
            # after the mount's teardown: what a hang left behind
            for p in lxcpath:
                kill_lxc_leftovers(p)

    def load(self, lxcpath):
        with ctest.Env(csi=True, stop_timeout="2s") as env:
            lxcpath.append(env.lxcpath)
            san = sanitized(env.fs.proc.pid)
            hang_s = 240 if san else 60
            ok = nt.wait_until(lambda: env.read("runtimes", "docker", "status")
                               .startswith("healthy")
                               and env.read("runtimes", "lxc", "status")
                               .startswith("healthy"), 20)
            self.assertTrue(ok, "runtimes: docker %r, lxc %r" % (
                env.read("runtimes", "docker", "status"),
                env.read("runtimes", "lxc", "status")))
            # liblxc's daemonized start and its create fork the
            # multithreaded daemon and go on in the child without exec,
            # calling malloc: GCC 12's ASan allocator is not fork-safe, and
            # such a child hung on an allocator lock another thread held at
            # the fork (one run in five). glibc's malloc is fork-safe, so
            # only the sanitizer build leaves LXC to containers-lxc.
            load = Load(env, hang_s, lxc_share=0 if san else 0.25)
            print("load: %d writers, %d readers, %.0f s, seed %d%s" % (
                WRITERS, READERS, SECONDS, SEED,
                " (sanitizer build: volumes and Docker, no LXC)" if san else ""),
                flush=True)
            wall = load.run(SECONDS)
            st = load.stats

            # the daemon lives and answers
            self.assertIsNone(env.fs.proc.poll(), "the daemon died:\n" + env.fs.log())
            self.assertEqual(env.fs.status()["state"], "READY")

            # every operation reaches an end state
            settle = 60 if san else 30
            nt.wait_until(lambda: "PENDING" not in op_states(env.fs).values(), settle, 0.2)
            states = op_states(env.fs)
            pending = sorted(o for o, s in states.items() if s not in END_STATES)
            for o in pending:
                st.error("operation %s %s after %d s: %s %s" % (
                    o, states[o], settle, env.fs.read("operations", o, "type").strip(),
                    env.fs.read("operations", o, "command").strip()))
            for oid, kind in st.nonblock_ids:
                s = states.get(oid)
                if s is not None and s not in END_STATES:
                    st.error("O_NONBLOCK %s operation %s is %s" % (kind, oid, s))

            # no sanitizer report so far
            log = env.fs.log()
            for marker in nt.SANITIZER_MARKERS:
                if marker in log:
                    st.error("sanitizer report in the daemon log: " + marker)

            # everything made is destroyed through the mount, each destroy
            # bounded (a command stuck in the daemon holds its ctl file)
            budget = [hang_s]

            def destroy(rel):
                done, res = bounded(lambda: env.ctl(rel, "destroy"), budget[0])
                if not done:
                    st.error("final destroy %s: blocked %d s" % (rel, budget[0]))
                    budget[0] = 5       # the daemon is stuck: do not wait on each
                    return False
                if isinstance(res, Exception) or not res[0]:
                    d = os.path.dirname(rel)
                    st.error("final destroy %s: %s: %s" % (
                        rel, res, nt.read_file(env.fs.path(d, "error")).strip()))
                return True

            hung = False
            for c in env.containers():
                hung = not destroy("containers/%s/ctl" % c) or hung
            for v in env.fs.listdir("volumes"):
                if v not in ("ctl", "error"):
                    hung = not destroy("volumes/%s/ctl" % v) or hung
            gone = hung or nt.wait_until(lambda: not env.containers() and not [
                v for v in env.fs.listdir("volumes") if v not in ("ctl", "error")], 10)
            if not gone:
                for c in env.containers():
                    st.error("container %s left: %s (%s)" % (
                        c, env.state(c), env.cread(c, "error").strip()))
                for v in env.fs.listdir("volumes"):
                    if v not in ("ctl", "error"):
                        st.error("volume %s left: %s" % (
                            v, env.fs.read("volumes", v, "info.json").strip()))
            for vid, pv in env.plugin.state().items():
                # nodefs-NAME-OPID-SALT: the story from the create that made it
                parts = pv["name"].split("-")
                lines = load.story(["-".join(parts[1:-2]), vid])
                at = next((i for i, l in enumerate(lines) if '"%s"' % parts[-2] in l), 0)
                st.error("CSI volume %s left in the plugin: %r\n%s" % (
                    vid, pv, "\n".join(lines[max(0, at - 5):at + 40])))
            left = [m for m in nt.mounts_under(env.tmp) if m != env.fs.mnt
                    and not m.startswith(env.fs.mnt + "/")]
            if left:
                st.error("mounts left: %r" % left)
            r = ctest.docker("ps", "-a", "--format", "{{.Names}}",
                             "--filter", "label=io.nodefs.managed=1",
                             "--filter", "name=" + env.tag)
            if r.returncode != 0 or r.stdout.split():
                st.error("docker ps -a: rc %d, left: %r %s" % (
                    r.returncode, r.stdout.split(), r.stderr.strip()))
            r = ctest.lxc("lxc-ls", "-P", env.lxcpath, "-1")
            if r.stdout.split():
                st.error("LXC containers left: %r" % r.stdout.split())
            if env.fs.proc.poll() is not None:
                st.error("the daemon died during cleanup:\n" + env.fs.log())

            # the report
            total = sum(st.outcomes[k] for k in ("ok", "refused")) + sum(
                n for (_, o, _), n in st.by_cmd.items() if o == "error")
            ended = collections.Counter(states.values())
            print("load: %d commands in %.1f s: %.1f operations/s" % (total, wall, total / wall))
            print("load: outcomes: ok %d, refused %d, error %d" % (
                st.outcomes["ok"], st.outcomes["refused"], len(st.errors)))
            print("load: operations listed at the end: %s" % ", ".join(
                "%s %d" % kv for kv in sorted(ended.items())))
            print("load: reads: %s" % ", ".join("%s %d" % kv for kv in sorted(st.reads.items())))
            per = collections.defaultdict(collections.Counter)
            for (kind, outcome, ename), n in st.by_cmd.items():
                per[kind][ename if outcome != "ok" else "ok"] += n
            for kind in sorted(per):
                print("  %-18s %s" % (kind, " ".join("%s=%d" % kv
                                                     for kv in sorted(per[kind].items()))))
            print("load: error count %d" % len(st.errors), flush=True)
            if st.errors:
                # the history of what the errors name
                words = set()
                for e in st.errors:
                    words.update(w for w in load.vols + load.dockers + load.lxcs if w in e)
                for w in sorted(words):
                    print("history of %s (the end):\n%s" % (w, "\n".join(load.story([w])[-100:])))
            self.assertEqual(st.errors, [], "\n".join(st.errors[:50]))


if __name__ == "__main__":
    ctest.main(docker_needed=True, lxc_needed=True, csi_needed=True)

# SPDX-License-Identifier: LGPL-2.1-or-later
"""The fetcher (issue #32): fetch= downloads into a container's sandbox
before its first start, through the shared cache, against a loopback HTTP
server of the test's own (httpfix.py) that counts and logs its requests,
real tar, tar.gz and zip archives, file:// URIs, and the run's dockerd
(the fetch stage is nodefs's own and the same for every runtime: the
contract's test_fetch_lands_in_the_sandbox runs it on LXC too).
"""

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import threading
import time
import unittest
import zipfile

import nodefs_test as nt
import ctest
import httpfix
from ctest import IMAGE
from delayproxy import DelayProxy


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tgz(entries, mode="w:gz"):
    """A tar archive of (name, bytes or ('symlink'|'hardlink', target))."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, what in entries:
            ti = tarfile.TarInfo(name)
            if isinstance(what, tuple):
                ti.type = tarfile.SYMTYPE if what[0] == "symlink" else tarfile.LNKTYPE
                ti.linkname = what[1]
                t.addfile(ti)
            else:
                ti.size = len(what)
                ti.mode = 0o644
                t.addfile(ti, io.BytesIO(what))
    return buf.getvalue()


def zipped(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries:
            z.writestr(name, data)
    return buf.getvalue()


def fetch_lines(env, n):
    """containers/NAME/fetch as [uri, state, bytes, total, served, sha256]."""
    return [l.split() for l in env.cread(n, "fetch").splitlines()]


def fetch_count(env, how):
    """nodefs_fetch_seconds_count{how=HOW}."""
    for l in env.read("metrics", "nodefs.prom").splitlines():
        if l.startswith('nodefs_fetch_seconds_count{how="%s"} ' % how):
            return int(l.split()[1])
    return None


def run(env, short, fetches, extra="", cmd="sleep 1000"):
    n = env.name(short)
    opts = " ".join("fetch=%s" % ctest._shq(f) for f in fetches)
    line = "run %s runtime=docker image=%s cmd=%s %s %s" % (n, IMAGE, ctest._shq(cmd), opts, extra)
    ok, err = env.ctl("containers/ctl", line)
    return n, ok, err


class Fetch(unittest.TestCase):
    def test_fetch_downloads_checks_extracts_and_caches(self):
        """A run with five fetches (sha256 + executable + dest, tar.gz and
        zip extracted, file://, a redirect chain): all in the sandbox,
        seen inside, the fetch file and info.json saying so; a second run
        of the same URIs makes no request for the sha256 ones (cache) and
        a 304 for the one without (revalidated); an entry written since
        is dropped and downloaded again; the cache keeps to its bound."""
        with httpfix.Server() as srv, ctest.Env(nodefs_extra="fetch_cache_size = 3M") as env:
            tool = b"#!/bin/sh\necho tool-ran\n"
            srv.put("tool", tool)
            srv.put("app.tgz", tgz([("dir/a.txt", b"alpha\n"), ("dir/b.txt", b"beta\n")]))
            srv.put("app.zip", zipped([("z/c.txt", "gamma\n")]))
            srv.put("plain.txt", b"plain\n")
            local = os.path.join(env.pub, "local.txt")
            with open(local, "w") as f:
                f.write("local\n")
            fetches = [srv.url("/f/tool") + " sha256=%s executable dest=bin/tool" % sha(tool),
                       srv.url("/f/app.tgz") + " extract dest=app sha256=%s" % sha(srv.files["app.tgz"]),
                       srv.url("/f/app.zip") + " extract",
                       "file://" + local,
                       srv.url("/redirect/3/plain.txt")]
            n, ok, err = run(env, "f1", fetches)
            self.assertTrue(ok, "%s: %s" % (err, env.read("containers", "error")))
            self.assertEqual(env.state(n), "RUNNING")
            lines = fetch_lines(env, n)
            self.assertEqual([l[1] for l in lines], ["done"] * 5, lines)
            self.assertEqual([l[4] for l in lines], ["downloaded"] * 5, lines)
            # each fetch's own time, in the file and in the metric
            self.assertTrue(all(float(l[6]) > 0 for l in lines), lines)
            self.assertEqual(fetch_count(env, "downloaded"), 5)
            self.assertEqual(lines[0][5], sha(tool))
            self.assertEqual((lines[0][2], lines[0][3]), (str(len(tool)), str(len(tool))))
            sb = env.cread(n, "sandbox").strip()
            self.assertEqual(os.stat(os.path.join(sb, "bin/tool")).st_mode & 0o777, 0o755)
            self.assertEqual(open(os.path.join(sb, "plain.txt")).read(), "plain\n")
            self.assertEqual(open(os.path.join(sb, "local.txt")).read(), "local\n")
            # nothing half-written or temporary left beside them
            self.assertEqual(sorted(os.listdir(sb)), ["app", "bin", "local.txt", "plain.txt", "z"])
            same, out, code = env.exec_fd(n, 'sh -c "/sandbox/bin/tool; cat /sandbox/app/dir/a.txt '
                                          '/sandbox/z/c.txt"')
            self.assertEqual((out, code), ("tool-ran\nalpha\ngamma\n", "0"))
            info = json.loads(env.cread(n, "info.json"))
            self.assertEqual([f["uri"] for f in info["fetches"]],
                             [f.split()[0] for f in fetches])
            self.assertEqual(info["fetches"][0]["dest"], "bin/tool")
            # the same URIs again: the sha256 ones from the cache with no
            # request, the one without revalidated (a 304, no body)
            before = {p: srv.count(p) for p in ("/f/tool", "/f/app.tgz", "/f/app.zip")}
            n2, ok, err = run(env, "f2", fetches)
            self.assertTrue(ok, env.read("containers", "error"))
            served = [l[4] for l in fetch_lines(env, n2)]
            self.assertEqual(served[:2], ["cache", "cache"])
            self.assertEqual(served[4], "revalidated")
            self.assertEqual((fetch_count(env, "cache"), fetch_count(env, "revalidated")),
                             (served.count("cache"), served.count("revalidated")))
            self.assertEqual(srv.count("/f/tool"), before["/f/tool"])
            self.assertEqual(srv.count("/f/app.tgz"), before["/f/app.tgz"])
            last = [e for e in srv.log if e["path"] == "/f/plain.txt"][-1]
            self.assertEqual((last["status"], last["if_none_match"]), (304, srv.etag("plain.txt")))
            # a cache entry written since (its bytes no longer what was
            # checked): dropped, downloaded again
            objs = os.path.join(env.state_dir, "fetch-cache", "objects")
            key = sha(srv.url("/f/tool").encode())
            obj = os.path.join(objs, key + ".data")
            os.chmod(obj, 0o644)
            with open(obj, "ab") as f:
                f.write(b"junk")
            n3, ok, err = run(env, "f3", fetches[:1])
            self.assertTrue(ok, env.read("containers", "error"))
            self.assertEqual(fetch_lines(env, n3)[0][4], "downloaded")
            self.assertEqual(srv.count("/f/tool"), before["/f/tool"] + 1)
            self.assertEqual(open(os.path.join(env.cread(n3, "sandbox").strip(), "bin/tool"),
                                  "rb").read(), tool)
            # the entry's stamp (inode, size, mtime, ctime): a chmod by
            # someone else moves only ctime, so a rehash, and the entry
            # stays (no request); a write through a sandbox's hard link
            # that keeps the size and sets mtime back moves ctime too, and
            # the rehash finds other bytes: dropped, downloaded again
            os.chmod(obj, 0o600)
            n4, ok, err = run(env, "f4", fetches[:1])
            self.assertTrue(ok, env.read("containers", "error"))
            self.assertEqual(fetch_lines(env, n4)[0][4], "cache")
            self.assertEqual(srv.count("/f/tool"), before["/f/tool"] + 1)
            link = os.path.join(env.cread(n4, "sandbox").strip(), "bin/tool")
            self.assertEqual(os.stat(link).st_ino, os.stat(obj).st_ino)
            was = os.stat(link)
            with open(link, "r+b") as fh:
                fh.write(b"X")
            os.utime(link, ns=(was.st_atime_ns, was.st_mtime_ns))
            n5, ok, err = run(env, "f5", fetches[:1])
            self.assertTrue(ok, env.read("containers", "error"))
            self.assertEqual(fetch_lines(env, n5)[0][4], "downloaded")
            self.assertEqual(srv.count("/f/tool"), before["/f/tool"] + 2)
            self.assertEqual(open(os.path.join(env.cread(n5, "sandbox").strip(), "bin/tool"),
                                  "rb").read(), tool)
            # the bound: two 2 MB entries do not fit in 3M, the older goes
            for name in ("big1", "big2"):
                srv.put(name, os.urandom(2 << 20))
                nb, ok, err = run(env, name, [srv.url("/f/" + name)], cmd="true")
                self.assertTrue(ok, env.read("containers", "error"))
            left = [f for f in os.listdir(objs) if f.endswith(".data")]
            self.assertIn(sha(srv.url("/f/big2").encode()) + ".data", left)
            self.assertNotIn(sha(srv.url("/f/big1").encode()) + ".data", left)
            total = sum(os.path.getsize(os.path.join(objs, f)) for f in left)
            self.assertLessEqual(total, 3 << 20)

    def test_fetch_bad_input_and_failures(self):
        """Bad fetch= values: EINVAL (EPERM for a file:// outside
        allowed_targets) naming the URI, nothing made. A 404, a 500, a cut
        body, a digest mismatch, archives with '../', absolute and
        symlink-out entries: EIO naming the URI and why, the container
        left CREATED with the fetch failed; past sandbox_size: EFBIG. The
        server was asked nothing for the refused lines."""
        with httpfix.Server() as srv, ctest.Env() as env:
            srv.put("x", b"x" * 5000)
            bad = [("ftp://127.0.0.1/x", "EINVAL", "scheme is not http, https or file"),
                   ("http:///x", "EINVAL", "no host"),
                   (srv.url("/f/x") + " dest=../x", "EINVAL", "leaves the sandbox"),
                   (srv.url("/f/x") + " dest=/etc/x", "EINVAL", "leaves the sandbox"),
                   (srv.url("/f/x") + " sha256=abc", "EINVAL", "is not 64 hex digits"),
                   (srv.url("/f/"), "EINVAL", "give dest="),
                   ("file:///etc/passwd", "EPERM", "allowed_targets")]
            for i, (f, want, says) in enumerate(bad):
                n, ok, err = run(env, "b%d" % i, [f])
                self.assertEqual((ok, err), (False, want), f)
                msg = env.read("containers", "error")
                self.assertIn(says, msg)
                self.assertIn("fetch", msg)
            self.assertEqual(env.containers(), [])
            self.assertEqual(srv.count(), 0)
            srv.put("evil-dotdot.tgz", tgz([("ok.txt", b"ok"), ("../escape.txt", b"no")]))
            srv.put("evil-abs.tar", tgz([("/tmp/nodefs-abs-escape", b"no")], mode="w"))
            srv.put("evil-link.tgz", tgz([("ln", ("symlink", "../../../../etc")), ("ln/x", b"no")]))
            srv.put("evil-hard.tgz", tgz([("h", ("hardlink", "../../etc/passwd"))]))
            # each link inside by its own words, out together: s -> . and
            # a -> s/.. (the sandbox's parent); a/x would land beside it
            srv.put("evil-chain.tgz", tgz([("ok.txt", b"ok"), ("s", ("symlink", ".")),
                                           ("a", ("symlink", "s/..")), ("a/x", b"no")]))
            fails = [(srv.url("/status/404/x"), "EIO", "HTTP status 404"),
                     (srv.url("/status/500/x"), "EIO", "HTTP status 500"),
                     (srv.url("/cut/x"), "EIO", srv.url("/cut/x")),
                     (srv.url("/f/x") + " sha256=" + "0" * 64, "EIO",
                      "expected %s, got %s" % ("0" * 64, sha(b"x" * 5000))),
                     (srv.url("/f/evil-dotdot.tgz") + " extract", "EIO", "'../escape.txt'"),
                     (srv.url("/f/evil-abs.tar") + " extract", "EIO", "/tmp/nodefs-abs-escape"),
                     (srv.url("/f/evil-link.tgz") + " extract", "EIO", "../../../../etc"),
                     (srv.url("/f/evil-hard.tgz") + " extract", "EIO", "../../etc/passwd"),
                     (srv.url("/f/evil-chain.tgz") + " extract", "EIO", "'a/x'"),
                     (srv.url("/f/x") + " dest=big", "EFBIG", "sandbox_size")]
            made = []
            for i, (f, want, says) in enumerate(fails):
                extra = "sandbox_size=4K" if want == "EFBIG" else ""
                n, ok, err = run(env, "e%d" % i, [f], extra=extra)
                self.assertEqual((ok, err), (False, want), f)
                self.assertIn(says, env.read("containers", "error"), f)
                self.assertEqual(env.state(n), "CREATED", f)
                self.assertIn(says, env.cread(n, "error"))
                self.assertEqual(fetch_lines(env, n)[0][1], "failed")
                made.append(n)
                sb = env.cread(n, "sandbox").strip()
                # nothing of it in the sandbox, nothing outside
                self.assertEqual([x for x in os.listdir(sb) if not x.startswith(".")], [], f)
            self.assertFalse(os.path.exists("/tmp/nodefs-abs-escape"))
            # the redirect chain is followed; a start of a failed one runs
            # its fetch again (the server has the file now)
            srv.put("later", b"later\n")
            n = made[0]
            self.assertEqual(sorted(env.containers()), sorted(made))

    def test_concurrent_fetches_download_once(self):
        """Two containers fetching the same URI at once: one download (the
        second waits on the first, then takes the entry), both get the
        bytes."""
        with httpfix.Server() as srv, ctest.Env() as env:
            data = os.urandom(1 << 20)
            srv.put("shared", data)
            srv.slow_delay = 0.05   # 16 pieces: about 0.8 s
            f = srv.url("/slow/shared") + " sha256=" + sha(data)
            names, results = [env.name("c1"), env.name("c2")], {}

            def go(n):
                line = "run %s runtime=docker image=%s cmd='sleep 1000' fetch=%s" % (
                    n, IMAGE, ctest._shq(f))
                results[n] = env.ctl("containers/ctl", line)

            ts = [threading.Thread(target=go, args=(n,)) for n in names]
            for t in ts:
                t.start()
            for t in ts:
                t.join(nt.scaled(60))
            self.assertEqual([results[n] for n in names], [(True, "OK")] * 2,
                             env.read("containers", "error"))
            self.assertEqual(srv.count("/slow/shared"), 1)
            served = sorted(fetch_lines(env, n)[0][4] for n in names)
            self.assertEqual(served, ["cache", "downloaded"])
            for n in names:
                sb = env.cread(n, "sandbox").strip()
                self.assertEqual(open(os.path.join(sb, "shared"), "rb").read(), data)

    def test_kill9_mid_download_resumes_with_range(self):
        """kill -9 of nodefs in the middle of a 50 MB download: after the
        restart the run goes on, the server sees a Range request, and the
        container runs with the right bytes."""
        with httpfix.Server() as srv, ctest.Env() as env:
            data = os.urandom(50 << 20)
            srv.put("big", data)
            srv.slow_delay = 0.004    # 800 pieces: about 3 s
            n = env.name("k9")
            line = "run %s runtime=docker image=%s cmd='sleep 1000' fetch=%s" % (
                n, IMAGE, ctest._shq(srv.url("/ranged-slow/big") + " sha256=" + sha(data)))
            ok, err = env.fs.write_ctl("containers/ctl", line, os.O_NONBLOCK)
            self.assertIn(nt.errname(err), ("OK", "EINPROGRESS"))

            def got():
                try:
                    l = fetch_lines(env, n)
                    return l and int(l[0][2]) > (8 << 20)
                except (OSError, ValueError, IndexError):
                    return False
            self.assertTrue(nt.wait_until(got, 30, 0.02), "no progress: %r" % srv.log)
            self.assertEqual(env.state(n), "FETCHING")
            env.fs.kill9()
            srv.slow_delay = 0.001
            env.fs.start()
            env.wait_state(n, "RUNNING", 60)
            ranged = [e for e in srv.log if e["range"]]
            self.assertEqual(len(ranged), 1, srv.log)
            self.assertEqual(ranged[0]["status"], 206)
            start = int(ranged[0]["range"].split("=")[1].split("-")[0])
            self.assertGreater(start, 0)
            self.assertEqual(ranged[0]["if_range"], srv.etag("big"))
            l = fetch_lines(env, n)[0]
            self.assertEqual((l[1], l[5]), ("done", sha(data)))
            sb = env.cread(n, "sandbox").strip()
            with open(os.path.join(sb, "big"), "rb") as fh:
                self.assertEqual(sha(fh.read()), sha(data))

    def test_kill9_in_creates_resumes_fetch_and_reclaims_orphan_sandbox(self):
        """kill -9 of nodefs with two creates under way: A in its fetch
        stage (its record and sandbox made), B inside the engine's create
        (held by a proxy in front of dockerd: its sandbox made, no record
        yet). After a restart with keep_sandboxes = yes, B's sandbox stays;
        A's create goes on with its fetch (a Range request) in the same
        sandbox and ends CREATED with the right bytes. After a second kill
        -9 and a restart without it, B's sandbox, no container's, is gone
        and A's is kept."""
        nt.requires("docker")
        if not ctest.HOST.startswith("unix://"):
            nt.skip("the test dockerd is not on a unix socket")
        tmp = tempfile.mkdtemp(prefix="nodefs-orph-")
        proxy = DelayProxy(ctest.HOST[len("unix://"):], os.path.join(tmp, "docker.sock"), 0.0)
        try:
            with httpfix.Server() as srv, ctest.Env(docker_host="unix://" + proxy.path) as env:
                data = os.urandom(8 << 20)
                srv.put("big", data)
                srv.slow_delay = 0.02   # 128 pieces: about 3 s
                a, b = env.name("a"), env.name("b")
                fetch = srv.url("/ranged-slow/big") + " sha256=" + sha(data)
                ok, err = env.fs.write_ctl("containers/ctl", "create %s runtime=docker image=%s "
                                           "cmd='sleep 1000' fetch=%s" % (a, IMAGE, ctest._shq(fetch)),
                                           os.O_NONBLOCK)
                self.assertIn(nt.errname(err), ("OK", "EINPROGRESS"))

                def fetched(n, least):
                    try:
                        return int(fetch_lines(env, n)[0][2]) >= least
                    except (OSError, ValueError, IndexError):
                        return False
                self.assertTrue(nt.wait_until(lambda: fetched(a, 1 << 20), 30, 0.02))
                sb_a = env.cread(a, "sandbox").strip()
                proxy.delay, proxy.drop = 600, True     # B's create never reaches dockerd
                ok, err = env.fs.write_ctl("containers/ctl", "create %s runtime=docker image=%s "
                                           "cmd='sleep 1000'" % (b, IMAGE), os.O_NONBLOCK)
                self.assertIn(nt.errname(err), ("OK", "EINPROGRESS"))

                def sandbox_of(n):
                    try:
                        return env.cread(n, "sandbox").strip()
                    except OSError:
                        return ""
                self.assertTrue(nt.wait_until(lambda: proxy.creates == 2 and sandbox_of(b),
                                              nt.scaled(30), 0.02))
                sb_b = sandbox_of(b)
                self.assertEqual(env.state(a), "FETCHING")
                env.fs.kill9()
                conf = open(env.fs.config_path).read()
                with open(env.fs.config_path, "w") as f:
                    f.write(conf.replace("[nodefs]\n", "[nodefs]\nkeep_sandboxes = yes\n", 1))
                srv.slow_delay = 0.001
                env.fs.start()
                self.assertTrue(nt.wait_until(lambda: fetch_lines(env, a)[0][1] == "done",
                                              nt.scaled(60), 0.05), fetch_lines(env, a))
                self.assertEqual(env.state(a), "CREATED")
                self.assertNotIn(b, env.containers())
                self.assertTrue(os.path.isdir(sb_b), "keep_sandboxes = yes keeps it")
                self.assertEqual(env.cread(a, "sandbox").strip(), sb_a)
                ranged = [e for e in srv.log if e["range"]]
                self.assertEqual([e["status"] for e in ranged], [206], srv.log)
                with open(os.path.join(sb_a, "big"), "rb") as fh:
                    self.assertEqual(sha(fh.read()), sha(data))
                env.fs.kill9()
                with open(env.fs.config_path, "w") as f:
                    f.write(conf)
                env.fs.start()
                self.assertFalse(os.path.exists(sb_b), "the orphan sandbox is left")
                self.assertTrue(os.path.isfile(os.path.join(sb_a, "big")))
                self.assertEqual(env.state(a), "CREATED")
                proxy.delay, proxy.drop = 0.0, False
        finally:
            proxy.close()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ctest.main(docker_needed=True)

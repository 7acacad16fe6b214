# SPDX-License-Identifier: LGPL-2.1-or-later
"""The stock-host lane's check set, run inside the VM by vm-run.sh.

What a user of a stock Debian 12 host (systemd 252 as PID 1, cgroup v2
only, AppArmor on, docker.io with the systemd cgroup driver, lxc 5) sees
of the nodefs package: dpkg -i of the .deb, the README tour, Docker and LXC
containers with limits and their stats against the cgroup v2 files, OOM, a
volume in containers, systemctl restart, kill -9, the watchdog, six
restarts, a stop, and a reboot with a published volume and running
containers; and items 1 to 8 of the stock-host issue, each its own check
named itemN-...

Two phases, one boot each: phase 1 does everything but the reboot's
aftermath and exits 10 (vm-run.sh reboots); phase 2 checks what the reboot
left, and the run is over. The phase and what phase 2 compares against are
kept on the lane disk (results/state.json); every check's outcome is
written to results/results.json as soon as it is known, so a VM that
hangs still leaves what it found. Knows nothing of QEMU or the host side
(run.sh).
"""

import glob
import json
import os
import re
import signal
import subprocess
import time
import traceback

LANE = "/lane"
RES = os.path.join(LANE, "results")
MNT = "/run/nodefs"
CONF = "/etc/nodefs/nodefs.conf"
TEMPLATES = "/var/lib/nodefs-lane/templates"
IMAGE = "nodefs/busybox:lane"
# Bounds for waits: under TCG the VM is 11 to 20 times slower than the
# machine it runs on; these only bound how long a broken thing is waited
# for, a working one answers long before.
LONG = 180
SHORT = 60

os.makedirs(RES, exist_ok=True)
_logf = open(os.path.join(RES, "vm.log"), "a")


def log(msg):
    line = "[%7.1f] %s" % (time.monotonic(), msg)
    print("nodefs-lane: " + line, flush=True)
    _logf.write(line + "\n")
    _logf.flush()


def save_json(name, obj):
    path = os.path.join(RES, name)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.rename(path + ".tmp", path)
    d = os.open(RES, os.O_RDONLY)
    os.fsync(d)
    os.close(d)


def load_json(name, default):
    try:
        with open(os.path.join(RES, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


results = load_json("results.json", {"checks": [], "complete": False})
state = load_json("state.json", {"phase": 1})


class CheckFailed(Exception):
    pass


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("check took too long")


signal.signal(signal.SIGALRM, _alarm)


def check(name, fn, limit=600):
    """Run one check: ok when fn returns, failed with the reason when it
    raises. fn may return a detail string."""
    log("check %s ..." % name)
    t0 = time.monotonic()
    signal.alarm(limit)
    try:
        detail = fn() or ""
        ok = True
    except CheckFailed as e:
        ok, detail = False, str(e)
    except Exception as e:  # a check that breaks is a failed check
        ok, detail = False, "%s: %s" % (type(e).__name__, e)
        log(traceback.format_exc())
    finally:
        signal.alarm(0)
    dt = time.monotonic() - t0
    results["checks"].append({"name": name, "ok": ok, "detail": detail,
                              "seconds": round(dt, 1), "phase": state["phase"]})
    save_json("results.json", results)
    log("check %s: %s (%.1f s) %s" % (name, "ok" if ok else "FAILED", dt, detail))
    return ok


def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


# ---- helpers ----

def sh(*argv, timeout=LONG, check_rc=False, input=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check_rc and p.returncode != 0:
        raise CheckFailed("%s: exit %d: %s" % (" ".join(argv), p.returncode,
                                                (p.stdout + p.stderr).strip()[-600:]))
    return p


def rd(path):
    with open(path) as f:
        return f.read()


def rd_kv(path):
    out = {}
    for line in rd(path).splitlines():
        m = re.match(r"^([A-Za-z_]+):?\s+(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def ctl(path, line):
    """Write one command line; returns 0 or the errno of the write."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, (line + "\n").encode())
        return 0
    except OSError as e:
        return e.errno
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def ctl_ok(path, line):
    e = ctl(path, line)
    if e:
        errf = os.path.join(os.path.dirname(path), "error")
        why = rd(errf).strip() if os.path.exists(errf) else ""
        raise CheckFailed("'%s' > %s: %s; error: %s" % (line, path, os.strerror(e), why[-400:]))


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            last = e
        if time.monotonic() > end:
            raise CheckFailed("timed out after %d s waiting for %s%s"
                              % (timeout, what, " (%s)" % last if last else ""))
        time.sleep(0.5)


def unit_prop(prop):
    return sh("systemctl", "show", "-P", prop, "nodefs", timeout=30).stdout.strip()


def main_pid():
    return int(unit_prop("MainPID") or 0)


def nodefs_ready(timeout=LONG):
    def ready():
        if unit_prop("ActiveState") != "active":
            return False
        return "state: READY" in rd(os.path.join(MNT, "status"))
    wait_for(ready, timeout, "nodefs active and READY")
    return main_pid()


def cursor():
    p = sh("journalctl", "-u", "nodefs", "-n", "0", "--show-cursor", "--no-pager")
    m = re.search(r"-- cursor: (\S+)", p.stdout)
    return m.group(1) if m else None


def journal(after=None, prio=None, unit="nodefs"):
    argv = ["journalctl", "-u", unit, "--no-pager", "-q", "-o", "short-monotonic"]
    if after:
        argv += ["--after-cursor", after]
    else:
        argv += ["-b"]
    if prio:
        argv += ["-p", prio]
    return sh(*argv).stdout


def plugin_pid(name):
    v = rd_kv(os.path.join(MNT, "plugins", name, "process")).get("pid", "none")
    return int(v) if v.isdigit() else None


def alive(pid):
    if not pid:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def cstate(name):
    return rd(os.path.join(MNT, "containers", name, "state")).strip()


def cfile(name, f):
    return rd(os.path.join(MNT, "containers", name, f)).strip()


def vstate(name):
    return rd(os.path.join(MNT, "volumes", name, "state")).strip()


def is_mount(path):
    with open("/proc/self/mountinfo") as f:
        return any(l.split()[4] == path for l in f)


def container_cgroup(pid):
    """The container's cgroup v2 directory (docker-ID.scope or
    lxc.payload.NAME), from its init's /proc/PID/cgroup."""
    line = [l for l in rd("/proc/%d/cgroup" % pid).splitlines() if l.startswith("0::")][0]
    path = line[3:]
    parts = path.strip("/").split("/")
    for i in range(len(parts), 0, -1):
        last = parts[i - 1]
        if last.startswith("docker-") or last.startswith("lxc.payload."):
            return "/sys/fs/cgroup/" + "/".join(parts[:i])
    raise CheckFailed("no container cgroup in %s" % path)


def proc_cpu_seconds(pid):
    fields = rd("/proc/%d/stat" % pid).split(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def exec_in(name, argv):
    ctl_ok(os.path.join(MNT, "containers", name, "ctl"), "exec '%s'" % argv)
    return cfile(name, "exec_output"), cfile(name, "exec_exit_code")


def wait_line(name, timeout=LONG):
    p = sh("timeout", str(timeout), "cat", os.path.join(MNT, "containers", name, "wait"),
           timeout=timeout + 10)
    expect(p.returncode == 0, "wait of %s did not return in %d s" % (name, timeout))
    return p.stdout.strip()


# ---- phase 1 ----

def c_host_stock():
    expect(rd("/proc/1/comm").strip() == "systemd", "PID 1 is %s" % rd("/proc/1/comm").strip())
    fs = sh("stat", "-f", "-c", "%T", "/sys/fs/cgroup").stdout.strip()
    expect(fs == "cgroup2fs", "/sys/fs/cgroup is %s, not cgroup2 alone" % fs)
    aa = rd("/sys/module/apparmor/parameters/enabled").strip()
    expect(aa == "Y", "AppArmor enabled: %s" % aa)
    drv = sh("docker", "info", "-f", "{{.CgroupDriver}} {{.CgroupVersion}}").stdout.strip()
    expect(drv == "systemd 2", "docker cgroup driver and version: %r" % drv)
    return "kernel %s, systemd %s, docker %s" % (
        os.uname().release, sh("systemctl", "--version").stdout.split()[1], drv)


def c_install():
    debs = glob.glob(os.path.join(LANE, "nodefs_*.deb"))
    expect(len(debs) == 1, "one .deb on the lane disk: %s" % debs)
    p = sh("dpkg", "-i", debs[0], timeout=600)
    expect(p.returncode == 0, "dpkg -i: %s" % (p.stdout + p.stderr)[-1500:])
    expect(sh("systemctl", "is-enabled", "nodefs").stdout.strip() == "enabled",
           "nodefs.service is not enabled by the package")
    pid = nodefs_ready()
    return "%s; MainPID %d" % (os.path.basename(debs[0]), pid)


def c_tour():
    st = rd(os.path.join(MNT, "status"))
    expect("state: READY" in st, st)
    names = set(os.listdir(MNT))
    for n in ("containers", "events", "metrics", "operations", "plugins",
              "profiles", "runtimes", "status", "volumes"):
        expect(n in names, "ls %s lacks %s: %s" % (MNT, n, sorted(names)))
    for rt in ("docker", "lxc"):
        wait_for(lambda: rd(os.path.join(MNT, "runtimes", rt, "status")).startswith("healthy"),
                 SHORT, "runtimes/%s/status healthy" % rt)
    wait_for(lambda: rd(os.path.join(MNT, "plugins/local/health")).startswith("READY"),
             SHORT, "plugins/local/health READY")
    vctl = os.path.join(MNT, "volumes/ctl")
    ctl_ok(vctl, "create db size=1G profile=fast")
    ctl_ok(os.path.join(MNT, "volumes/db/ctl"), "publish /srv/db")
    expect(vstate("db") == "PUBLISHED", "db: %s" % vstate("db"))
    expect(rd(os.path.join(MNT, "volumes/db/target")).strip() == "/srv/db", "target")
    expect(is_mount("/srv/db"), "/srv/db is not a mount point")
    with open("/srv/db/greeting", "w") as f:
        f.write("hello\n")
    found = glob.glob("/var/lib/nodefs/csi-local/**/greeting", recursive=True)
    expect(found, "the greeting is not under /var/lib/nodefs/csi-local")
    stats = rd(os.path.join(MNT, "volumes/db/stats"))
    expect(re.search(r"^bytes_used \d+$", stats, re.M), "stats: %s" % stats)
    ctl_ok(os.path.join(MNT, "volumes/db/ctl"), "expand 2G")
    cap = rd(os.path.join(MNT, "volumes/db/capacity")).strip()
    expect(cap == "2147483648", "capacity after expand 2G: %s" % cap)
    ctl_ok(os.path.join(MNT, "volumes/db/ctl"), "unpublish")
    expect(not is_mount("/srv/db"), "/srv/db still mounted after unpublish")
    ctl_ok(os.path.join(MNT, "volumes/db/ctl"), "destroy")
    expect(not os.path.exists(os.path.join(MNT, "volumes/db")), "db still there")
    # a bad command fails, says why and changes nothing
    import errno as E
    expect(ctl(vctl, "create db size=lots") == E.EINVAL, "size=lots not EINVAL")
    state["tour_error_lots"] = rd(os.path.join(MNT, "volumes/error")).strip()
    expect(not os.path.exists(os.path.join(MNT, "volumes/db")), "a failed create made db")
    expect(ctl(vctl, "bogus") == E.EINVAL, "bogus not EINVAL")
    state["tour_error_bogus"] = rd(os.path.join(MNT, "volumes/error")).strip()
    save_json("state.json", state)
    return "create, publish, write, read, stats, expand, unpublish, destroy, two refused commands"


def readme_error_lines():
    """The README tour's `cat /run/nodefs/volumes/error` lines, without
    their time stamps."""
    lines = []
    with open(os.path.join(LANE, "README.md")) as f:
        for l in f:
            m = re.match(r"^\s+\d{4}-\d\d-\d\dT\S+Z (.*)$", l.rstrip("\n"))
            if m:
                lines.append(m.group(1))
    return lines


def c_item8_readme_errors():
    shown = readme_error_lines()
    expect(len(shown) >= 2, "the README shows %d error lines" % len(shown))
    bad = []
    for key in ("tour_error_lots", "tour_error_bogus"):
        got = state.get(key, "")
        got = re.sub(r"^\S+Z ", "", got)
        if got not in shown:
            bad.append("nodefs says %r; the README shows %s" % (got, shown))
    expect(not bad, "; ".join(bad))


def c_item8_network_none():
    import gzip
    with gzip.open("/usr/share/man/man5/nodefs.5.gz", "rt") as f:
        roff = f.read()
    # the text without roff's requests and escapes (no man-db in the image)
    text = re.sub(r"(?m)^\.[A-Za-z]+ ?", "", roff)
    text = re.sub(r"\\f[BIRP]|\\c|\\&", "", text).replace("\\(aq", "'").replace("\\-", "-")
    text = re.sub(r"\s+", " ", text.replace('"', ""))
    i = text.find("network_type = TYPE")
    expect(i >= 0, "nodefs(5) has no network_type = TYPE")
    near = text[i:i + 1200]
    expect(re.search(r"host'?s network namespace|network namespace of the host|"
                     r"host network namespace", near),
           "nodefs(5) on network_type = none does not say the container shares "
           "the host's network namespace: %r" % near[:200])


def c_item5_name():
    pid = main_pid()
    pg = sh("pgrep", "-x", "nodefs").stdout.split()
    ps = sh("ps", "-C", "nodefs", "-o", "pid=").stdout.split()
    status = sh("systemctl", "status", "nodefs", "--no-pager", "-n", "0").stdout
    comm = rd("/proc/%d/comm" % pid).strip()
    problems = []
    if str(pid) not in pg:
        problems.append("pgrep -x nodefs finds %s, not MainPID %d" % (pg, pid))
    if str(pid) not in ps:
        problems.append("ps -C nodefs finds %s" % ps)
    if "(exe)" in status:
        problems.append("systemctl status shows (exe)")
    expect(not problems, "; ".join(problems) + " (comm: %s)" % comm)


def configure():
    """The lane's config: the package's own, plus a plugin kept across
    stops (item 3) and the fast busybox template (tests/fixtures)."""
    out = sh("bash", os.path.join(LANE, "lxc-templates.sh"), "start", TEMPLATES).stdout
    expect("NODEFS_TEST_LXC_TEMPLATES=" in out, "lxc-templates.sh: %r" % out)
    conf = rd(CONF)
    conf = conf.replace("[runtime lxc]\n", "[runtime lxc]\ntemplate_dir = %s\n" % TEMPLATES, 1)
    conf += """
# stock-host lane: a second instance of the built-in plugin, kept running
# when nodefs stops (keep_running = yes)
[plugin kept]
endpoint = unix:///run/nodefs-csi/kept.sock
command = nodefs-csi-local --backing dir --base-dir /var/lib/nodefs/csi-kept
keep_running = yes
"""
    with open(CONF, "w") as f:
        f.write(conf)
    state["cursor_configured"] = cursor()
    save_json("state.json", state)
    sh("systemctl", "restart", "nodefs", check_rc=True, timeout=LONG)
    nodefs_ready()
    wait_for(lambda: rd(os.path.join(MNT, "plugins/kept/health")).startswith("READY"),
             SHORT, "plugins/kept/health READY")
    wait_for(lambda: rd(os.path.join(MNT, "runtimes/lxc/status")).startswith("healthy"),
             SHORT, "runtimes/lxc/status healthy")
    wait_for(lambda: rd(os.path.join(MNT, "runtimes/docker/status")).startswith("healthy"),
             SHORT, "runtimes/docker/status healthy")
    # the containers' root filesystem and tools
    sh("sh", os.path.join(LANE, "rootfs-busybox.sh"), "/var/tmp/bbroot", check_rc=True)
    os.makedirs("/srv/tools", exist_ok=True)
    with open("/srv/tools/eatmem", "w") as f:
        f.write("a=xxxxxxxxxxxxxxxx\nwhile :; do a=$a$a; done\n")
    p = subprocess.run("tar -C /var/tmp/bbroot -c . | docker import - %s" % IMAGE,
                       shell=True, capture_output=True, text=True, timeout=LONG)
    expect(p.returncode == 0, "docker import: %s" % p.stderr)
    # the volume the containers share, and that the reboot keeps published
    ctl_ok(os.path.join(MNT, "volumes/ctl"), "create shared size=64M")
    ctl_ok(os.path.join(MNT, "volumes/shared/ctl"), "publish /srv/shared")
    with open("/srv/shared/hello", "w") as f:
        f.write("from-host\n")
    return "kept plugin pid %s" % plugin_pid("kept")


LIMITS = "memory=64M cpus=0.5 pids=64"


def c_containers_run():
    cc = os.path.join(MNT, "containers/ctl")
    ctl_ok(cc, "run web runtime=docker image=%s cmd='sleep 100000' %s volume=shared:/data"
           % (IMAGE, LIMITS))
    ctl_ok(cc, "run box runtime=lxc cmd='/bin/sleep 100000' %s volume=shared:/data" % LIMITS)
    for n in ("web", "box"):
        wait_for(lambda: cstate(n) == "RUNNING", SHORT, "%s RUNNING" % n)
    state["pids"] = {n: int(cfile(n, "pid")) for n in ("web", "box")}
    state["ids"] = {n: cfile(n, "id") for n in ("web", "box")}
    save_json("state.json", state)
    return "pids %s" % state["pids"]


def limits_in_cgroup(name):
    cg = container_cgroup(int(cfile(name, "pid")))
    got = {f: rd(os.path.join(cg, f)).strip() for f in ("memory.max", "cpu.max", "pids.max")}
    want = {"memory.max": str(64 << 20), "cpu.max": "50000 100000", "pids.max": "64"}
    expect(got == want, "%s: %s, want %s" % (cg, got, want))
    return cg


def stats_match_cgroup(name):
    cg = container_cgroup(int(cfile(name, "pid")))
    time.sleep(1.2)  # past cache_max_age: a fresh sample
    s = {}
    for l in cfile(name, "stats").splitlines():
        k, v = l.split()
        s[k] = float(v)
    cur = int(rd(os.path.join(cg, "memory.current")))
    pids = int(rd(os.path.join(cg, "pids.current")))
    cpu = dict(l.split() for l in rd(os.path.join(cg, "cpu.stat")).splitlines())
    problems = []
    if s["memory_limit_bytes"] != int(rd(os.path.join(cg, "memory.max"))):
        problems.append("memory_limit_bytes %d" % s["memory_limit_bytes"])
    if abs(s["memory_bytes"] - cur) > max(cur * 0.2, 2 << 20):
        problems.append("memory_bytes %d, memory.current %d" % (s["memory_bytes"], cur))
    if s["pids"] != pids:
        problems.append("pids %d, pids.current %d" % (s["pids"], pids))
    for k in ("user", "system"):
        if abs(s["cpu_%s_seconds" % k] - int(cpu["%s_usec" % k]) / 1e6) > 0.5:
            problems.append("cpu_%s_seconds %.3f, cpu.stat %s_usec %s"
                            % (k, s["cpu_%s_seconds" % k], k, cpu["%s_usec" % k]))
    expect(not problems, "%s: %s" % (cg, "; ".join(problems)))
    return "%s: memory %d, pids %d" % (cg, cur, pids)


def volume_in(name):
    out, code = exec_in(name, "cat /data/hello")
    expect(code == "0" and out.strip() == "from-host",
           "cat /data/hello in %s: exit %s, %r" % (name, code, out))


def c_item1_idle_cpu():
    expect(cstate("box") == "RUNNING", "box: %s" % cstate("box"))
    pid = main_pid()
    # the spin this guards against is steady (about 10 s of CPU in 10 s);
    # a burst of the checks' own aftermath is not: the lower of two
    # windows (0.50 s in one window was seen once, the VM slowed by a
    # loaded host, with the check at 312 s instead of 141 s)
    used = []
    for _ in range(2):
        a = proc_cpu_seconds(pid)
        time.sleep(10)
        used.append(proc_cpu_seconds(pid) - a)
        if used[-1] < 0.5:
            break
    expect(min(used) < 0.5, "nodefs used %s s of CPU in 10 s windows with an LXC container "
           "running" % ", ".join("%.2f" % u for u in used))
    return "%s s of CPU in 10 s" % ", ".join("%.2f" % u for u in used)


def oom(name, runtime):
    img = "image=%s " % IMAGE if runtime == "docker" else ""
    cmd = "/bin/sh /tools/eatmem"
    ctl_ok(os.path.join(MNT, "containers/ctl"),
           "run %s runtime=%s %scmd='%s' memory=16M bind=/srv/tools:/tools:ro"
           % (name, runtime, img, cmd))
    line = wait_line(name)
    ok = cfile(name, "oom_killed")
    ctl(os.path.join(MNT, "containers", name, "ctl"), "destroy")
    expect(line.startswith("exit_code=137 oom_killed=1"),
           "wait: %r (oom_killed %s)" % (line, ok))
    return line


def containers_intact(tag):
    """The containers run on with the same pids and the volume stays
    mounted; a restarted nodefs may take a few seconds after READY to
    have asked the engines again."""
    def problems():
        out = []
        for n, pid in state["pids"].items():
            st, p = cstate(n), cfile(n, "pid")
            if st != "RUNNING" or p != str(pid) or not alive(pid):
                out.append("%s: %s pid %r (was %d, %s)"
                           % (n, st, p, pid, "alive" if alive(pid) else "gone"))
        if vstate("shared") != "PUBLISHED" or not is_mount("/srv/shared"):
            out.append("shared: %s, mounted %s" % (vstate("shared"), is_mount("/srv/shared")))
        return out
    end = time.monotonic() + 20
    while problems() and time.monotonic() < end:
        time.sleep(1)
    left = problems()
    expect(not left, "after %s: %s" % (tag, "; ".join(left)))


def kept_survives(before, tag):
    now = plugin_pid("kept")
    expect(alive(before) and now == before,
           "kept plugin (keep_running = yes) pid %s before %s; after: %s, the old one %s"
           % (before, tag, now, "alive" if alive(before) else "gone"))


def c_restart():
    kept = plugin_pid("kept")
    state["kept_before_restart"] = kept
    old = main_pid()
    sh("systemctl", "restart", "nodefs", check_rc=True)
    new = nodefs_ready()
    expect(new != old, "MainPID unchanged")
    containers_intact("systemctl restart")


def c_kill9():
    state["kept_before_kill9"] = plugin_pid("kept")
    n0 = int(unit_prop("NRestarts") or 0)
    old = main_pid()
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: int(unit_prop("NRestarts") or 0) > n0 and main_pid() not in (0, old),
             LONG, "systemd to restart nodefs after kill -9")
    nodefs_ready()
    containers_intact("kill -9")


def fuse_conn(mnt):
    """The fusectl directory of mnt's FUSE connection (its minor)."""
    with open("/proc/self/mountinfo") as f:
        for l in f:
            fs = l.split()
            if fs[4] == mnt and " - fuse" in l:
                return "/sys/fs/fuse/connections/%s" % fs[2].split(":")[1]
    return None


def fuse_abort(conn):
    """Abort a FUSE connection through fusectl: the one way out for
    threads waiting on a daemon that will never answer."""
    if not conn:
        return "no connection found"
    try:
        with open(conn + "/abort", "w") as a:
            a.write("1")
        return "FUSE connection %s aborted by hand" % conn
    except OSError as e:
        return "abort %s: %s" % (conn, e)


def blocked_threads(pid):
    """Threads of pid in uninterruptible sleep, with their kernel stacks."""
    out = []
    for t in glob.glob("/proc/%d/task/*" % pid):
        try:
            st = rd(t + "/stat").split(") ", 1)[1][0]
            if st == "D":
                stack = [l.split()[-1].split("+")[0] for l in rd(t + "/stack").splitlines()[:6]]
                out.append("%s (%s)" % (rd(t + "/comm").strip(), " < ".join(stack)))
        except OSError:
            pass
    return out


def c_watchdog():
    state["kept_before_watchdog"] = plugin_pid("kept")
    n0 = int(unit_prop("NRestarts") or 0)
    old = main_pid()
    wd = unit_prop("WatchdogUSec")
    c = cursor()
    conn = fuse_conn(MNT)
    # the containers' states (the volume's is item 2's business: after
    # the reboot it may still wait to be walked back up)
    before = {n: cstate(n) for n in ("web", "box")}
    os.kill(old, signal.SIGSTOP)  # FUSE loop and workers make no progress

    def restarted():
        return int(unit_prop("NRestarts") or 0) > n0 and main_pid() not in (0, old)
    # nothing may touch /run/nodefs until systemd has replaced it. The
    # watchdog fires within WatchdogSec; the abort signal (SIGABRT, with
    # SIGCONT) ends the process at once, or systemd's SIGKILL does after
    # TimeoutAbortSec (TimeoutStopSec, 60 s).
    stuck = None
    try:
        wait_for(restarted, 150, "the watchdog (WatchdogUSec %s) to restart a stopped nodefs" % wd)
    except CheckFailed as e:
        # it did not die: say which threads hold it, then free them so the
        # rest of the lane can go on
        threads = ", ".join(blocked_threads(old)) or "none"
        stuck = "%s; threads in D state: %s; %s" % (e, threads, fuse_abort(conn))
        wait_for(restarted, LONG, "nodefs restarted after its FUSE connection was aborted")
    nodefs_ready()
    expect(stuck is None, stuck)
    j = journal(after=c)
    expect("watchdog timeout" in j.lower(), "no 'Watchdog timeout' in the journal")
    after = {n: cstate(n) for n in ("web", "box")}
    expect(after == before, "before the watchdog: %s; after: %s" % (before, after))
    return "WatchdogUSec %s" % wd


def c_item6_six_restarts():
    sh("systemctl", "reset-failed", "nodefs")
    t0 = time.monotonic()
    fails = []
    for i in range(6):
        p = sh("systemctl", "restart", "nodefs")
        if p.returncode != 0:
            fails.append("restart %d: exit %d %s (%s)" % (
                i + 1, p.returncode, p.stderr.strip()[-200:], unit_prop("Result")))
            break
        nodefs_ready()
    dt = time.monotonic() - t0
    if fails:
        sh("systemctl", "reset-failed", "nodefs")
        sh("systemctl", "start", "nodefs")
        try:
            nodefs_ready()
        except CheckFailed:
            pass
    expect(not fails, "; ".join(fails) + " after %.0f s" % dt)
    expect(dt < 120, "six restarts took %.0f s: over 2 min, the check shows nothing" % dt)
    return "six restarts in %.0f s" % dt


def c_item4_and_3_stop():
    """systemctl stop: no warning (item 4); the plugin not kept is gone,
    the kept one runs on (item 3); the next start adopts it."""
    local = plugin_pid("local")
    kept = plugin_pid("kept")
    state["kept_before_stop"] = kept
    state["local_before_stop"] = local
    c = cursor()
    state["cursor_stop"] = c
    save_json("state.json", state)
    sh("systemctl", "stop", "nodefs", check_rc=True)
    time.sleep(2)
    state["stop_warnings"] = journal(after=c, prio="warning").strip()
    state["local_alive_after_stop"] = alive(local)
    state["kept_alive_after_stop"] = alive(kept)
    save_json("state.json", state)
    sh("systemctl", "start", "nodefs", check_rc=True)
    nodefs_ready()


def c_item4():
    w = state.get("stop_warnings")
    expect(w == "", "journalctl -u nodefs -p warning after a stop: %s" % w)


def c_item3_unkept_stops():
    expect(not state.get("local_alive_after_stop"),
           "plugin local (keep_running = no) pid %s still runs after systemctl stop"
           % state.get("local_before_stop"))


def c_item3_kept_stop():
    before = state.get("kept_before_stop")
    expect(state.get("kept_alive_after_stop"),
           "plugin kept (keep_running = yes) pid %s was killed by systemctl stop" % before)
    kept_survives(before, "stop and start")


def c_item7_noise():
    j = journal(after=state.get("cursor_configured"))
    status = sh("systemctl", "status", "nodefs", "--no-pager", "-n", "0").stdout
    problems = []
    noise = [l for l in j.splitlines() if "fusermount" in l and "failed" in l]
    if noise:
        problems.append("%d lines like %r" % (len(noise), noise[0][-120:]))
    fl = [l.strip() for l in status.splitlines() if "status=1/FAILURE" in l]
    if fl:
        problems.append("systemctl status: %r" % fl[0])
    expect(not problems, "; ".join(problems))


def phase1():
    for n, f in (("host-stock-debian12", c_host_stock),
                 ("install-deb", c_install)):
        if not check(n, f):
            if n == "install-deb":
                return 0
    check("readme-tour-volumes", c_tour)
    check("item8-readme-error-lines-as-shown", c_item8_readme_errors)
    check("item8-nodefs5-network-none-shares-host-netns", c_item8_network_none)
    check("item5-process-named-nodefs", c_item5_name)
    if not check("configure-kept-plugin-images-volume", configure):
        return 0
    if check("containers-run-docker-lxc-with-limits", c_containers_run):
        check("docker-limits-in-cgroup-v2", lambda: limits_in_cgroup("web"))
        check("lxc-limits-in-cgroup-v2", lambda: limits_in_cgroup("box"))
        check("docker-stats-match-cgroup-v2", lambda: stats_match_cgroup("web"))
        check("lxc-stats-match-cgroup-v2", lambda: stats_match_cgroup("box"))
        check("docker-volume-in-container", lambda: volume_in("web"))
        check("lxc-volume-in-container", lambda: volume_in("box"))
        check("item1-lxc-running-nodefs-cpu-near-zero", c_item1_idle_cpu)
    check("docker-oom", lambda: oom("oomd", "docker"))
    check("lxc-oom", lambda: oom("ooml", "lxc"))
    check("systemctl-restart-keeps-containers-volume", c_restart)
    check("item3-kept-plugin-survives-restart",
          lambda: kept_survives(state["kept_before_restart"], "systemctl restart"))
    check("kill9-restart-keeps-containers-volume", c_kill9)
    check("item3-kept-plugin-survives-kill9",
          lambda: kept_survives(state["kept_before_kill9"], "kill -9"))
    check("item6-six-restarts-in-2-min", c_item6_six_restarts)
    if check("systemctl-stop-start", c_item4_and_3_stop):
        check("item4-no-warning-at-stop", c_item4)
        check("item3-unkept-plugin-stops-with-nodefs", c_item3_unkept_stops)
        check("item3-kept-plugin-survives-stop", c_item3_kept_stop)
    check("item7-no-cleanup-noise", c_item7_noise)
    # the reboot: the volume stays published and the containers run
    state["boot_id"] = rd("/proc/sys/kernel/random/boot_id").strip()
    for n in ("web", "box"):
        try:
            state.setdefault("before_reboot", {})[n] = cstate(n)
        except OSError:
            pass
    state["shared_before_reboot"] = vstate("shared")
    state["phase"] = 2
    save_json("state.json", state)
    log("phase 1 done: rebooting with volume shared %s, containers %s"
        % (state["shared_before_reboot"], state.get("before_reboot")))
    return 10


# ---- phase 2, after the reboot ----

def c_reboot_back():
    bid = rd("/proc/sys/kernel/random/boot_id").strip()
    expect(bid != state.get("boot_id"), "boot_id unchanged: no reboot happened")
    nodefs_ready()


def c_item2_volume():
    # nodefs may still be walking the volume back up (NODE_READY,
    # VOL_READY) just after READY: judge it once it is PUBLISHED, or after
    # a minute
    try:
        wait_for(lambda: vstate("shared") == "PUBLISHED", SHORT, "shared PUBLISHED")
    except CheckFailed:
        pass
    st = vstate("shared")
    mounted = is_mount("/srv/shared")
    err = rd(os.path.join(MNT, "volumes/shared/error")).strip()
    if st == "PUBLISHED":
        expect(mounted, "volume shared says PUBLISHED but /srv/shared is not a mount point "
               "(error: %r)" % err)
        data = rd("/srv/shared/hello").strip() if os.path.exists("/srv/shared/hello") else None
        expect(data == "from-host", "/srv/shared/hello after the reboot: %r" % data)
        return "PUBLISHED, mounted, data there"
    expect(err, "volume shared is %s after the reboot and its error says nothing" % st)
    return "%s: %s" % (st, err)


def docker_running(cid):
    p = sh("docker", "inspect", "-f", "{{.State.Running}}", cid)
    return p.stdout.strip() == "true"


def lxc_running(name):
    p = sh("lxc-info", "-n", name, "-s", "-H")
    return p.stdout.strip() == "RUNNING"


def c_reboot_containers():
    problems = []
    for n, engine in (("web", docker_running), ("box", lxc_running)):
        cid = state["ids"][n]

        def agrees():
            st = cstate(n)
            return (st == "RUNNING") == engine(cid) and st not in (
                "STARTING", "STOPPING", "CREATING")
        try:
            wait_for(agrees, SHORT, "%s's state to match its engine" % n)
        except CheckFailed as e:
            problems.append("%s: nodefs %s, engine running %s (%s)"
                            % (n, cstate(n), engine(cid), e))
            continue
        if cstate(n) == "RUNNING":
            # a container given the volume must see its data, not an
            # empty directory
            out, code = exec_in(n, "cat /data/hello")
            if out.strip() != "from-host":
                problems.append("%s runs and sees /data/hello %r (exit %s)" % (n, out, code))
    expect(not problems, "; ".join(problems))
    return ", ".join("%s %s" % (n, cstate(n)) for n in ("web", "box"))


def phase2():
    if not check("reboot-nodefs-back-ready", c_reboot_back):
        return 0
    check("item2-reboot-volume-mounted-or-says-why", c_item2_volume)
    check("reboot-containers-state-truthful", c_reboot_containers)
    # last: a watchdog kill that does not end (a thread of nodefs waiting
    # on its own mount while the dump waits for it) may wedge the VM
    if check("watchdog-restarts-stopped-daemon", c_watchdog):
        check("item3-kept-plugin-survives-watchdog",
              lambda: kept_survives(state["kept_before_watchdog"], "the watchdog"))
    return 0


def main():
    phase = state.get("phase", 1)
    log("phase %s" % phase)
    if phase == 1:
        rc = phase1()
        if rc != 10:
            results["complete"] = True
    elif phase == 2:
        rc = phase2()
        results["complete"] = True
    else:
        return 0
    if results["complete"]:
        state["phase"] = 3
        save_json("state.json", state)
    sh("sh", "-c", "journalctl -b -u nodefs -u docker -u nodefs-lane --no-pager "
       "> %s/journal-phase%s.txt" % (RES, phase))
    save_json("results.json", results)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

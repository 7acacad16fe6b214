# SPDX-License-Identifier: LGPL-2.1-or-later
"""docs-check: the man pages say what the daemon has, so they never drift.

nodefs(5) is the table: THE TREE's entries (each .SS names a directory,
each .TP under it a file) and CONFIGURATION's keys (each .SS a section,
each .TP a key). Checked against it:
- every file of a live tree has an entry: a mount whose state dir holds a
  volume, a container and an operation record (recovered without any
  plugin or engine behind them) and whose config names a plugin, a
  profile and both runtimes, walked whole; names become NAME (ID for
  operations), as the page writes them;
- every key the parsers accept (backend/config/config.c's [nodefs], [plugin],
  [profile] sections, backend/cluster/cluster.c's [cluster] and the runtime drivers' [runtime docker|lxc]) has an
  entry in its section, and every entry is a key a parser accepts;
- `nodefs --help` lists the same keys per section, once each, and the
  daemon's files, which nodefs(8) FILES lists too.
The README's tour shows each refused command's error line as the daemon
writes it (time aside).
Root and FUSE for the live tree; exit 77 otherwise.
"""

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
import unittest

import nodefs_test as nt

SRC = nt.NODEFS_SRC
MAN5 = os.path.join(SRC, "docs", "nodefs.5")
MAN8 = os.path.join(SRC, "docs", "nodefs.8")


def roff_text(line):
    """The words of a font macro line (.B, .IB, .BR ...) as printed: the
    arguments joined without blanks, escapes dropped."""
    macro, _, rest = line.partition(" ")
    try:
        args = shlex.split(rest.replace("\\-", "-"))
    except ValueError:
        args = rest.split()
    text = "".join(args) if macro in (".IB", ".BI", ".BR", ".RB", ".IR", ".RI") \
        else " ".join(args)
    text = re.sub(r"\\f[A-Z]|\\f\(..|\\&|\\e", "", text)
    return text


def sections(path, sh):
    """{.SS heading: [first line after each .TP]} within .SH sh."""
    out, cur, inside, after_tp = {}, None, False, False
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith(".SH "):
                inside = line[4:].strip().strip('"') == sh
                cur = None
                continue
            if not inside:
                continue
            if line.startswith(".SS "):
                cur = roff_text(".B " + line[4:])
                out.setdefault(cur, [])
                after_tp = False
            elif line.startswith(".TP"):
                after_tp = True
            elif after_tp:
                after_tp = False
                if cur is not None and line.startswith("."):
                    out[cur].append(roff_text(line))
    return out


def documented_files():
    """Every path THE TREE documents, as 'volumes/NAME/state'."""
    paths = set()
    for heading, entries in sections(MAN5, "THE TREE").items():
        for base in [h.strip() for h in heading.split(",")]:
            if not base.endswith("/"):
                paths.add(base)        # a file with a section of its own
                continue
            for entry in entries:
                for name in entry.split(","):
                    name = name.strip().split(" ")[0]
                    if name:
                        paths.add(base + name)
    return paths


def documented_keys():
    """{'nodefs': {...}, 'plugin': {...}, ..., 'runtime docker': {...}}."""
    out = {}
    for heading, entries in sections(MAN5, "CONFIGURATION").items():
        m = re.match(r"\[(\w+)(?: (\w+))?\]$", heading)
        if not m:
            continue
        sec = m.group(1) if m.group(1) != "runtime" else "runtime " + m.group(2)
        keys = [e.split("=")[0].strip() for e in entries if "=" in e]
        out[sec] = keys
    return out


def code_keys():
    """The keys each parser compares against, from its source."""
    def strcmp_keys(text):
        return re.findall(r'strcmp\(k, "([a-z_]+)"\) == 0', text)

    cfg = ""
    for name in ("config.c", "config-apply.c"):  # the parser's two passes
        with open(os.path.join(SRC, "backend", "config", name)) as f:
            cfg += f.read()
    out = {}
    for sec in ("nodefs", "plugin", "profile"):
        m = re.search(r"\nstatic int apply_%s\(.*?\n}\n" % sec, cfg, re.S)
        if not m:
            raise AssertionError("backend/config/config*.c: no apply_%s()" % sec)
        out[sec] = strcmp_keys(m.group(0))
    with open(os.path.join(SRC, "backend", "cluster", "cluster.c")) as f:
        m = re.search(r"cluster_keys\[\] = \{(.*?)\};", f.read(), re.S)
    if not m:
        raise AssertionError("backend/cluster/cluster.c: no cluster_keys[]")
    out["cluster"] = re.findall(r'"([a-z_]+)"', m.group(1))
    for rt, path in (("docker", "runtimes/docker/docker.c"),
                     ("lxc", "runtimes/lxc/lxc.c")):
        with open(os.path.join(SRC, path)) as f:
            out["runtime " + rt] = strcmp_keys(f.read())
    return out


def help_text():
    return subprocess.run([nt.NODEFS_BIN, "--help"], capture_output=True,
                          text=True, timeout=10, check=True).stdout


def help_keys():
    """{section: [keys]} from the 'Config keys' block of --help."""
    out, inside = {}, False
    for line in help_text().splitlines():
        if line.startswith("Config keys"):
            inside = True
            continue
        if inside:
            if not line.startswith("  "):
                break
            m = re.match(r"\s+\[(\w+)(?: (\w+))?\]\s+(.*)$", line)
            if m:
                sec = m.group(1) if m.group(1) != "runtime" \
                    else "runtime " + m.group(2)
                out.setdefault(sec, []).extend(m.group(3).split())
            elif out:
                out[list(out)[-1]].extend(line.split())
    return out


class Keys(unittest.TestCase):

    def test_code_keys_documented(self):
        doc, code = documented_keys(), code_keys()
        self.assertEqual(sorted(doc), sorted(code),
                         "sections in nodefs(5) CONFIGURATION vs the parsers")
        for sec in code:
            missing = sorted(set(code[sec]) - set(doc[sec]))
            stale = sorted(set(doc[sec]) - set(code[sec]))
            self.assertEqual(missing, [], "[%s] keys the parser accepts with "
                             "no entry in docs/nodefs.5" % sec)
            self.assertEqual(stale, [], "[%s] keys docs/nodefs.5 documents "
                             "that no parser accepts" % sec)
            self.assertEqual(len(doc[sec]), len(set(doc[sec])),
                             "[%s] a key documented twice" % sec)

    def test_help_lists_keys_once(self):
        nt.requires("bin")
        doc, hk = documented_keys(), help_keys()
        self.assertEqual(sorted(hk), sorted(doc), help_text())
        for sec in doc:
            self.assertEqual(sorted(hk[sec]), sorted(doc[sec]), sec)
            self.assertEqual(len(hk[sec]), len(set(hk[sec])), sec)

    def test_help_lists_files(self):
        nt.requires("bin")
        text = help_text()
        with open(MAN8) as f:
            page = f.read()
        files_sh = page[page.index(".SH FILES"):].split("\n.SH ", 1)[0]
        for path in ("/etc/nodefs/nodefs.conf", "/var/lib/nodefs", "/run/nodefs"):
            self.assertIn(path, text)
            self.assertIn(path, files_sh)


def seed_state(state_dir):
    """One record of each kind, as a daemon leaves them."""
    now = int(time.time())
    recs = {
        "volumes/db.json": {"version": 1, "plugin": "px", "id": "vol-db",
                            "state": "CREATED", "capacity": 1048576},
        "containers/web.json": {"version": 1, "runtime": "lxc",
                                "state": "EXITED", "template_name": "busybox",
                                "exit_code": 0},
        "operations/1.json": {"version": 1, "type": "volume.create",
                              "object": "db", "command": "create db",
                              "state": "FINISHED", "attempts": 1,
                              "created_unix": now, "finished_unix": now},
    }
    for rel, rec in recs.items():
        path = os.path.join(state_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(rec, f)


def normalize(rel):
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] in ("plugins", "profiles", "volumes",
                                        "containers"):
        parts[1] = "NAME"
    if len(parts) >= 3 and parts[0] == "operations":
        parts[1] = "ID"
    return "/".join(parts)


class Tree(unittest.TestCase):

    def test_every_file_documented(self):
        nt.requires("mount")
        tmp = tempfile.mkdtemp(prefix="nodefs-docs-")
        try:
            state = os.path.join(tmp, "state")
            seed_state(state)
            config = (nt.offline_config(tmp) +
                      "\n[plugin px]\nendpoint = unix://%s/px.sock\n"
                      "default = yes\n\n[profile fast]\nplugin = px\n"
                      "size = 1M\n" % tmp)
            with nt.Nodefs(config, state_dir=state) as fs:
                for kind, name in (("volumes", "db"), ("containers", "web"),
                                   ("operations", "1"), ("plugins", "px"),
                                   ("profiles", "fast")):
                    self.assertIn(name, fs.listdir(kind), fs.log())
                found = set()
                for root, dirs, files in os.walk(fs.mnt):
                    for f in files:
                        rel = os.path.relpath(os.path.join(root, f), fs.mnt)
                        found.add(normalize(rel))
            doc = documented_files()
            missing = sorted(found - doc)
            self.assertEqual(missing, [], "files of the tree with no entry in "
                             "docs/nodefs.5 THE TREE")
            for kind in ("volumes/NAME/", "containers/NAME/", "operations/ID/",
                         "plugins/NAME/", "profiles/NAME/", "runtimes/lxc/"):
                self.assertTrue([p for p in found if p.startswith(kind)], kind)
        finally:
            subprocess.run(["rm", "-rf", "--one-file-system", tmp])


def readme_refusals():
    """The README tour's refused commands: (ctl dir, line written, the
    error line it shows without its time), in the order of the tour. A
    refusal is an `# echo LINE > /run/nodefs/DIR/ctl` answered with a write
    error, then `# cat /run/nodefs/DIR/error` and its one line."""
    with open(os.path.join(SRC, "README.md")) as f:
        lines = f.read().splitlines()
    out, last = [], {}
    for i, line in enumerate(lines):
        m = re.match(r"\s+# echo (.+) > /run/nodefs/(\S+)/ctl$", line)
        if m and i + 1 < len(lines) and "write error" in lines[i + 1]:
            last[m.group(2)] = shlex.split(m.group(1))[0]
            continue
        m = re.match(r"\s+# cat /run/nodefs/(\S+)/error$", line)
        if m and m.group(1) in last and i + 1 < len(lines):
            shown = lines[i + 1].strip().split(" ", 1)[1]
            out.append((m.group(1), last.pop(m.group(1)), shown))
    return out


class Readme(unittest.TestCase):

    def test_tour_errors_are_what_the_daemon_says(self):
        nt.requires("mount")
        refusals = readme_refusals()
        self.assertGreaterEqual(len(refusals), 2, "the tour's refused commands")
        with nt.Nodefs(nt.offline_config()) as fs:
            for d, line, shown in refusals:
                ok, err = fs.write_ctl(os.path.join(d, "ctl"), line + "\n")
                self.assertFalse(ok, line)
                real = fs.read(d, "error").strip().split(" ", 1)[1]
                self.assertEqual(shown, real, "README.md shows another error line "
                                 "for %r than the daemon writes" % line)


UNIT = os.path.join(SRC, "examples", "nodefs.service")


def unit_settings():
    """examples/nodefs.service as (key, value) pairs, in order."""
    out = []
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")) and "=" in line:
                k, v = line.split("=", 1)
                out.append((k, v))
    return out


def unit_argv(value, mountpoint, result="success"):
    """An Exec line of the unit as systemd would run it: its prefix
    ('-') dropped, $$ and %n as systemd expands them, and the mountpoint
    swapped for the test's own."""
    value = value.lstrip("-@:+!")
    value = value.replace("$$", "$").replace("%n", "nodefs.service")
    return [w.replace("/run/nodefs", mountpoint) for w in shlex.split(value)]


class Unit(unittest.TestCase):
    """The unit's settings as nodefs(8) SYSTEMD describes them, and its
    cleanup commands run for real (systemd itself is the stock-host
    lane's)."""

    def test_kill_mode_and_start_limit(self):
        st = dict(unit_settings())
        self.assertEqual(st.get("KillMode"), "mixed")
        self.assertEqual(st.get("Restart"), "on-failure")
        self.assertEqual((st.get("StartLimitIntervalSec"), st.get("StartLimitBurst")),
                         ("120s", "5"))
        # a clean stop resets the start limit, and nothing else does
        resets = [v for k, v in unit_settings()
                  if k == "ExecStopPost" and "reset-failed" in v]
        self.assertEqual(len(resets), 1, resets)
        self.assertIn('"$$SERVICE_RESULT" = success', resets[0])
        self.assertIn("reset-failed %n", resets[0])
        p = subprocess.run(unit_argv(resets[0], "/nonexistent"), capture_output=True,
                           text=True, env=dict(os.environ, SERVICE_RESULT="exit-code"))
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""),
                         "a failure leaves the count alone, silently")

    def test_cleanup_that_finds_nothing_is_silent(self):
        nt.requires("mount")
        cleanups = [(k, v) for k, v in unit_settings()
                    if k in ("ExecStartPre", "ExecStopPost") and "fusermount3" in v]
        self.assertEqual([k for k, _ in cleanups], ["ExecStartPre", "ExecStopPost"])
        tmp = tempfile.mkdtemp(prefix="nodefs-unit-")
        try:
            for k, v in cleanups:
                # nothing mounted: success, and not a word
                p = subprocess.run(unit_argv(v, tmp), capture_output=True, text=True)
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""), k)
        finally:
            os.rmdir(tmp)
        for k, v in cleanups:
            # the dead mount a crash leaves (ENOTCONN): cleared
            with nt.Nodefs(nt.offline_config()) as fs:
                fs.proc.kill()
                fs.proc.wait()
                fs.proc = None
                self.assertTrue(nt.is_mounted(fs.mnt))
                p = subprocess.run(unit_argv(v, fs.mnt), capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, (k, p.stderr))
                self.assertFalse(nt.is_mounted(fs.mnt), k)

if __name__ == "__main__":
    nt.main(requires=None)

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""circles: no circle of calls between backend/'s rooms.

Reads object files' symbols with nm: what each defines (T, D, B, R, ...)
and what it needs (U). File A calls file B when A needs a name B defines.
Computes the strongly connected sets of that graph (Tarjan) and fails on
any set that spans two folders, or that has more than MAX files; then the
same over the folders (a call from folder A to B and one from B to A is a
circle between rooms, even when no file circle joins them).

Arguments are static libraries (each a folder: the library's name less its
"libnodefs-" prefix), object files (the folder is the directory they sit in,
less meson's ".a.p" and the library prefix), or directories searched for
*.o. Knows nothing of nodefs but those naming conventions: the set of
libraries to check is meson's (tests/unit/arch/meson.build).

Usage: circles.py [--max N] [--show-all] [--expect-circle] LIB.a|FILE.o|DIR...
Exit 0: no circle too big and none across folders; 1: some, printed.
--expect-circle turns it round (0 only when it finds one): the check of
the check, over a circle planted on purpose (tests/unit/arch/plant).
"""
import os
import re
import subprocess
import sys

MAX = 4
DEFINED = set("TDBRGSVWCiu")


def folder_of_lib(path):
    name = os.path.basename(path)
    for suffix in (".a.p", ".a"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for prefix in ("libnodefs-", "lib"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return name


def member_name(m):
    # meson names an object after its source: volume.c.o
    return m[:-2] if m.endswith(".o") else m


def nm(paths):
    """{file: (folder, defined set, needed set)}"""
    files = {}
    if not paths:
        return files
    out = subprocess.run(["nm", "-A", "--no-sort"] + paths, check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        # "lib.a:member.o:0000 T name" (meson's thin archives name members
        # by path) or "file.o:0000 T name"; an undefined name has no address
        m = re.match(r"^(.*?\.a):(.*?\.o):(.*)$", line)
        if m:
            folder = folder_of_lib(m.group(1))
            member, rest = m.group(2), m.group(3)
        else:
            m = re.match(r"^(.*?\.o):(.*)$", line)
            if not m:
                continue
            member, rest = m.group(1), m.group(2)
            d = os.path.dirname(member)
            folder = folder_of_lib(d) if d else "."
        base = member_name(os.path.basename(member))
        # meson names a room's object after its source path: core_tree.c.o
        if base.startswith(folder + "_"):
            base = base[len(folder) + 1:]
        key = folder + "/" + base
        f = files.setdefault(key, (folder, set(), set()))
        parts = rest.split()
        if len(parts) < 2:
            continue
        typ, sym = parts[-2], parts[-1]
        if typ == "U":
            f[2].add(sym)
        elif typ in DEFINED:
            f[1].add(sym)
    return files


def graph(files):
    owner = {}
    for key, (_, defs, _) in files.items():
        for s in defs:
            owner.setdefault(s, key)
    edges = {}
    for key, (_, _, needs) in files.items():
        e = edges.setdefault(key, {})
        for s in needs:
            o = owner.get(s)
            if o is not None and o != key:
                e.setdefault(o, []).append(s)
    return edges


def tarjan(edges):
    index, low, on, stack, sccs = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        # iterative: the graphs are small but recursion limits are not ours
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                sccs.append(sorted(scc))
    return sccs


def main(argv):
    global MAX
    show_all = False
    expect = False
    paths = []
    args = iter(argv)
    for a in args:
        if a == "--max":
            MAX = int(next(args))
        elif a == "--show-all":
            show_all = True
        elif a == "--expect-circle":
            expect = True
        elif os.path.isdir(a):
            for d, _, names in os.walk(a):
                paths += [os.path.join(d, n) for n in sorted(names) if n.endswith(".o")]
        else:
            paths.append(a)
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"circles: cannot read {', '.join(missing)}: not built?")
        return 1
    files = nm(paths)
    edges = graph(files)
    sccs = [s for s in tarjan(edges) if len(s) > 1]
    bad = 0
    folders = sorted({f for f, _, _ in files.values()})
    print(f"circles: {len(files)} files in {len(folders)} folders ({', '.join(folders)})")
    for scc in sorted(sccs, key=len, reverse=True):
        spans = sorted({files[k][0] for k in scc})
        why = []
        if len(spans) > 1:
            why.append(f"spans {len(spans)} folders ({', '.join(spans)})")
        if len(scc) > MAX:
            why.append(f"{len(scc)} files > {MAX}")
        if not why and not show_all:
            continue
        bad += bool(why)
        print(f"{'CIRCLE' if why else 'circle (allowed)'} of {len(scc)} files: "
              f"{'; '.join(why) or 'one folder, small'}")
        members = set(scc)
        for k in scc:
            ties = []
            for o, syms in sorted(edges[k].items()):
                if o in members:
                    ties.append(f"{o} ({', '.join(sorted(syms)[:3])}"
                                f"{', ...' if len(syms) > 3 else ''})")
            print(f"  {k} -> {'; '.join(ties)}")
    # the rooms themselves: a call from room A to room B and another from
    # B to A is a circle between rooms even when no file circle joins them
    fedges = {}
    for k, outs in edges.items():
        for o, syms in outs.items():
            a, b = files[k][0], files[o][0]
            fedges.setdefault(a, {})
            if a != b:
                fedges[a].setdefault(b, []).extend(syms)
    for a in folders:
        fedges.setdefault(a, {})
    for scc in tarjan(fedges):
        if len(scc) < 2:
            continue
        bad += 1
        print(f"CIRCLE of {len(scc)} folders: {', '.join(scc)}")
        for a in scc:
            for b, syms in sorted(fedges[a].items()):
                if b in scc:
                    print(f"  {a} -> {b} ({', '.join(sorted(set(syms))[:4])}"
                          f"{', ...' if len(set(syms)) > 4 else ''})")
    if show_all:
        for a in folders:
            print(f"room {a} -> {', '.join(sorted(fedges[a])) or '(no other room)'}")
    if expect:
        print("circles: the planted circle was " + ("found" if bad else "NOT found"))
        return 0 if bad else 1
    if bad:
        print(f"circles: FAIL: {bad} circle(s) across folders, between folders or over "
              f"{MAX} files")
        return 1
    print(f"circles: ok: {len(sccs)} small circle(s) inside one folder, none across")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

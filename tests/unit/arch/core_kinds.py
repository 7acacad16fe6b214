#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""core_kinds: backend/core/ names no kind.

The hub knows the kinds only through their tables (kind.h), handed from
above by backend/registry.c. This proves it from what the build made:
  1. no symbol core's object files define (global or local) is named for
     a kind (a --word, e.g. "volume", "engine"), as backend_profiles was;
  2. no symbol core's objects need is defined by a kind's library (a
     --kind LIB.a): core calls a kind only through its table;
  3. struct backend (--header, core/backend-internal.h) holds no field
     whose name or type names a kind, as b->volumes or b->engines did.

Usage: core_kinds.py --core LIB.a --header FILE [--kind LIB.a]... [--word W]...
Exit 0: core names no kind; 1: what it names, printed.
Knows nothing of nodefs but nm's output and C's struct syntax.
"""
import re
import subprocess
import sys


def nm(path, *flags):
    out = subprocess.run(["nm", "-A", "--no-sort", *flags, path], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            # "lib.a:member.o:0000 T name" or "lib.a:member.o: U name"
            member = parts[0].split(":")[1] if parts[0].count(":") >= 2 else parts[0]
            yield member.rstrip(":"), parts[-2], parts[-1]


def struct_body(text, name):
    m = re.search(r"\bstruct\s+" + name + r"\s*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while depth and i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def fields(body):
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
    body = re.sub(r"//[^\n]*", " ", body)
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if decl:
            yield decl


def main(argv):
    core, header, kinds, words = None, None, [], []
    args = iter(argv)
    for a in args:
        if a == "--core":
            core = next(args)
        elif a == "--header":
            header = next(args)
        elif a == "--kind":
            kinds.append(next(args))
        elif a == "--word":
            words.append(next(args).lower())
    if not core or not header or not kinds or not words:
        print(__doc__)
        return 2
    bad = []
    named = re.compile("|".join(map(re.escape, words)), re.I)
    needs = {}
    for member, typ, sym in nm(core):
        if typ == "U":
            needs.setdefault(sym, set()).add(member)
        elif named.search(sym):
            bad.append(f"core defines {sym} ({typ}, {member}): named for a kind")
    for lib in kinds:
        for member, typ, sym in nm(lib, "--defined-only"):
            if typ in "TDBR" and sym in needs:
                for m in sorted(needs[sym]):
                    bad.append(f"core needs {sym} ({m}), defined by {lib.split('/')[-1]} "
                               f"({member}): a call past the kind's table")
    with open(header) as f:
        body = struct_body(f.read(), "backend")
    if body is None:
        bad.append(f"{header}: no struct backend")
        body = ""
    nfields = 0
    for decl in fields(body):
        nfields += 1
        if named.search(decl):
            bad.append(f"struct backend holds a kind's field: {decl};")
    print(f"core_kinds: {core.split('/')[-1]}: {len(needs)} symbols needed, checked against "
          f"{len(kinds)} kinds' libraries; struct backend: {nfields} fields; "
          f"words: {', '.join(words)}")
    for b in bad:
        print("  " + b)
    if bad:
        print(f"core_kinds: FAIL: core names a kind {len(bad)} time(s)")
        return 1
    print("core_kinds: ok: core names no kind")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""watch-events.py: follow /run/nodefs/events, one line per event.

Each open of the events file starts at "now" and a read blocks until the
next event, one JSON object per line. When nodefs restarts, the read fails
(ENOTCONN or EOF): this loop reopens with backoff, so it can run as a
long-lived watcher. Stdlib only.

usage: watch-events.py [-m MOUNT] [--json] [--match KEY=VALUE ...]
  -m MOUNT         where nodefs is mounted (default /run/nodefs)
  --json           print the raw JSON lines
  --match K=V      only events whose field K equals V (repeatable)
example: watch-events.py --match kind=volume --match name=db
"""

import argparse
import json
import os
import sys
import time


def fmt(ev):
    """One readable line: `TIME KIND NAME OLD -> NEW [operation] message`
    from the fields nodefs sends (time, seq, kind, name, old, new,
    operation, message; all but time and seq optional), then any other
    field as key=value. A {"lost": N} line means the reader fell behind."""
    if "lost" in ev:
        return "# lost %s events (reader too slow)" % ev["lost"]
    parts = [ev.get("time", "-"), ev.get("kind", "-"), ev.get("name", "-")]
    if "old" in ev or "new" in ev:
        parts.append("%s -> %s" % (ev.get("old", "?"), ev.get("new", "?")))
    if "operation" in ev:
        parts.append("[%s]" % ev["operation"])
    if "message" in ev:
        parts.append(ev["message"])
    known = ("time", "seq", "kind", "name", "old", "new", "operation",
             "message")
    parts += ["%s=%s" % (k, v if isinstance(v, str) else json.dumps(v))
              for k, v in ev.items() if k not in known]
    return " ".join(str(p) for p in parts)


def follow(path, args):
    backoff = 0.5
    while True:
        try:
            with open(path, "rb", buffering=0) as f:
                backoff = 0.5
                buf = b""
                while True:
                    chunk = f.read(65536)
                    if not chunk:
                        raise EOFError
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        handle(line.decode(errors="replace"), args)
        except (OSError, EOFError) as e:
            why = e.strerror if isinstance(e, OSError) else "end of stream"
            print("# %s: %s; reopening in %.1fs" % (path, why, backoff),
                  file=sys.stderr, flush=True)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def handle(line, args):
    if not line.strip():
        return
    try:
        ev = json.loads(line)
    except ValueError:
        print("# not JSON: %r" % line, file=sys.stderr)
        return
    for k, v in args.match:
        if str(ev.get(k)) != v:
            return
    print(line if args.json else fmt(ev), flush=True)


def main():
    p = argparse.ArgumentParser(
        description="Follow nodefs events, one line per event.")
    p.add_argument("-m", "--mount", default="/run/nodefs")
    p.add_argument("--json", action="store_true", help="raw JSON lines")
    p.add_argument("--match", action="append", default=[], metavar="K=V",
                   help="only events whose field K equals V")
    args = p.parse_args()
    try:
        args.match = [tuple(m.split("=", 1)) for m in args.match]
        if any(len(m) != 2 for m in args.match):
            raise ValueError
    except ValueError:
        p.error("--match wants KEY=VALUE")
    try:
        follow(os.path.join(args.mount, "events"), args)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

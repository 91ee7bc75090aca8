#!/usr/bin/env python3
"""Include-direction check (make lint): arrows point one way.

ARCHITECTURE.md gives the rooms and the arrows between them:

    daemon  -> engines, planner, protocol
    engines -> planner, kernels
    kernels/* -> kernels/common
    planner -> kernels/common
    protocol -> include only
    client  -> protocol

Every room may include include/attn/ (the public headers) and its own
files.  The daemon may also include kernels/common, which every room below
it already uses (dtype conversions, address translation).  tests/, bench/
and scripts/ are not checked: they may reach anything.

Each quoted #include of a C/C++/CUDA file in a checked room is resolved the
way the compiler resolves it (-I. -Iinclude, then the including file's own
directory) and must land in an allowed room.  A violation prints
"FILE:LINE: includes HEADER: ROOM -> ROOM is not an arrow (rule ...)".

Known exceptions live in scripts/include-exceptions.txt, one
"FILE -> HEADER  # why" per line.  An exception that no longer matches a
violation is itself an error, so the list only ever shrinks.

Usage: check-includes.py [--root DIR] [--exceptions FILE]
Exit status 0 when clean, 1 on a violation or a stale exception.
"""
import argparse
import os
import re
import sys

# Room -> the rooms it may include (besides itself and include/).  Longest
# prefix wins when classifying a path.
RULES = {
    "include": [],
    "protocol": [],
    "planner": ["kernels/common"],
    "kernels/common": [],
    "kernels/cpu": ["kernels/common"],
    "kernels/cuda": ["kernels/common"],
    "engines/cpu": ["planner", "kernels/common", "kernels/cpu", "kernels/cuda"],
    "engines/cuda": ["planner", "kernels/common", "kernels/cpu", "kernels/cuda"],
    "engines/common": ["planner", "kernels/common"],
    "daemon": ["engines/cpu", "engines/cuda", "engines/common", "planner", "protocol",
               "kernels/common"],
    "client/lib": ["protocol"],
    "client/attnctl": ["protocol", "client/lib"],
}
# Rooms whose names the rule text uses (engines/* share one rule).
RULE_TEXT = {
    "include": "include -> nothing else",
    "protocol": "protocol -> include only",
    "planner": "planner -> kernels/common",
    "kernels/common": "kernels/common -> include only",
    "kernels/cpu": "kernels/* -> kernels/common",
    "kernels/cuda": "kernels/* -> kernels/common",
    "engines/cpu": "engines -> planner, kernels",
    "engines/cuda": "engines -> planner, kernels",
    "engines/common": "engines -> planner, kernels",
    "daemon": "daemon -> engines, planner, protocol (and kernels/common)",
    "client/lib": "client -> protocol",
    "client/attnctl": "client -> protocol",
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    """The checked room a repository-relative path belongs to, or None."""
    best = None
    for room in RULES:
        if path == room or path.startswith(room + "/"):
            if best is None or len(room) > len(best):
                best = room
    return best


def resolve(root, src, header):
    """Repository-relative path of `header` as included from `src`."""
    for base in (os.path.dirname(src), "", "include"):
        cand = os.path.normpath(os.path.join(base, header))
        if os.path.exists(os.path.join(root, cand)):
            return cand
    # not found anywhere: judge the name as written (-I. first)
    return os.path.normpath(header)


def load_exceptions(path):
    out = {}
    if path is None or not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            if "->" not in text:
                sys.exit(f"{path}:{n}: expected 'FILE -> HEADER  # why'")
            a, b = (s.strip() for s in text.split("->", 1))
            out[(a, b)] = n
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--exceptions", default=None)
    args = ap.parse_args()
    root = args.root
    exc_path = args.exceptions
    if exc_path is None:
        exc_path = os.path.join(root, "scripts", "include-exceptions.txt")
    exceptions = load_exceptions(exc_path)
    used = set()
    violations = 0
    checked = 0
    for room in sorted(RULES):
        top = os.path.join(root, room)
        if not os.path.isdir(top):
            continue
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                src = os.path.relpath(os.path.join(dirpath, name), root)
                src_room = room_of(src)
                if src_room != room:
                    continue  # a deeper room's file: checked there
                checked += 1
                with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        hdr = resolve(root, src, m.group(1))
                        dst_room = room_of(hdr)
                        if dst_room in (src_room, "include") or dst_room in RULES[src_room]:
                            continue
                        key = (src, hdr)
                        if key in exceptions:
                            used.add(key)
                            continue
                        violations += 1
                        print(f"{src}:{n}: includes {hdr}: {src_room} -> {dst_room or '?'} "
                              f"is not an arrow (rule: {RULE_TEXT[src_room]})")
    stale = [(line, k) for k, line in exceptions.items() if k not in used]
    for line, (a, b) in sorted(stale):
        print(f"{exc_path}:{line}: stale exception {a} -> {b}: no such include any more; "
              "delete the line")
    print(f"include-check: {checked} files, {violations} violation(s), "
          f"{len(used)} listed exception(s), {len(stale)} stale")
    return 1 if violations or stale else 0


if __name__ == "__main__":
    sys.exit(main())

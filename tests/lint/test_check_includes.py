#!/usr/bin/env python3
"""The include-direction check (scripts/check-includes.py) passes on the tree
and fails, naming file:line and the rule, when a violation is planted in a
copy of it; a stale exception fails too."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("ATTN_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CHECK = os.path.join(SRC, "scripts", "check-includes.py")
ROOMS = ["include", "protocol", "planner", "kernels", "engines", "daemon", "client"]


def run(root, *extra):
    p = subprocess.run([sys.executable, CHECK, "--root", root, *extra], capture_output=True,
                       text=True)
    return p.returncode, p.stdout + p.stderr


def copy_tree(dst):
    for room in ROOMS:
        if os.path.isdir(os.path.join(SRC, room)):
            shutil.copytree(os.path.join(SRC, room), os.path.join(dst, room),
                            ignore=shutil.ignore_patterns("*.o", "*.d", "__pycache__"))
    os.makedirs(os.path.join(dst, "scripts"))
    shutil.copy(os.path.join(SRC, "scripts", "include-exceptions.txt"),
                os.path.join(dst, "scripts"))


def plant(root, path, line):
    full = os.path.join(root, path)
    with open(full, encoding="utf-8") as f:
        text = f.read()
    with open(full, "w", encoding="utf-8") as f:
        f.write(text + line + "\n")
    return text.count("\n") + 1  # the planted line's number


def expect(cond, what, out):
    if not cond:
        print(f"FAIL: {what}\n{out}")
        sys.exit(1)


def main():
    rc, out = run(SRC)
    expect(rc == 0, "the tree itself passes", out)
    expect("0 violation(s)" in out, "the tree has no unlisted violation", out)

    cases = [
        ("protocol/wire.c", '#include "planner/key.h"', "protocol -> planner",
         "protocol -> include only"),
        ("client/lib/client.c", '#include "daemon/server.h"', "client/lib -> daemon",
         "client -> protocol"),
        ("kernels/common/state.h", '#include "protocol/manifest.h"',
         "kernels/common -> protocol", "kernels/common -> include only"),
        ("planner/split.c", '#include "protocol/codec.h"', "planner -> protocol",
         "planner -> kernels/common"),
        ("kernels/cuda/decode.cu", '#include "daemon/pool.h"', "kernels/cuda -> daemon",
         "kernels/* -> kernels/common"),
    ]
    for path, line, arrow, rule in cases:
        with tempfile.TemporaryDirectory() as tmp:
            copy_tree(tmp)
            n = plant(tmp, path, line)
            rc, out = run(tmp)
            expect(rc == 1, f"{arrow} planted in {path} fails the check", out)
            expect(f"{path}:{n}: includes" in out, f"the report names {path}:{n}", out)
            expect(arrow in out and rule in out, f"the report names {arrow} and its rule", out)

    # the engines/ rules exist before the folder does
    with tempfile.TemporaryDirectory() as tmp:
        copy_tree(tmp)
        os.makedirs(os.path.join(tmp, "engines", "cuda"), exist_ok=True)
        with open(os.path.join(tmp, "engines", "cuda", "engine.c"), "w") as f:
            f.write('#include "planner/split.h"\n#include "kernels/common/state.h"\n'
                    '#include "protocol/codec.h"\n')
        rc, out = run(tmp)
        expect(rc == 1 and "engines/cuda/engine.c:3: includes protocol/codec.h" in out,
               "engines -> protocol fails; engines -> planner, kernels pass", out)
        expect("engines/cuda/engine.c:1" not in out and "engines/cuda/engine.c:2" not in out,
               "engines may include planner and kernels", out)

    # an exception that matches nothing is stale and fails
    with tempfile.TemporaryDirectory() as tmp:
        copy_tree(tmp)
        with open(os.path.join(tmp, "scripts", "include-exceptions.txt"), "a") as f:
            f.write("protocol/wire.c -> planner/key.h  # planted\n")
        rc, out = run(tmp)
        expect(rc == 1 and "stale exception protocol/wire.c -> planner/key.h" in out,
               "a stale exception fails", out)
    print("include check: all checks passed")


if __name__ == "__main__":
    main()

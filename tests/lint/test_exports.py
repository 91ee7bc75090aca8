#!/usr/bin/env python3
"""libattn.so exports exactly the functions attn/client.h declares, carries
the SONAME libattn.so.<major of VERSION>, and the daemon's hello reports the
same VERSION (one home for the version).

ATTN_LIBATTN names the library (make test passes build/libattn.so; "none"
in a STATIC=1 build, which has no shared library); ATTNCTL and ATTND, when
set, are used for the hello check."""
import json
import os
import re
import subprocess
import sys

SRC = os.environ.get("ATTN_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def declared():
    """Function names declared in include/attn/client.h (with ATTN_EXPORT)."""
    with open(os.path.join(SRC, "include", "attn", "client.h"), encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r"^ATTN_EXPORT[^;(]*?\b(attn_\w+)\(", text, re.M))
    # every function declaration of the header must carry the macro
    bare = set(re.findall(r"^(?!ATTN_EXPORT|typedef|#)[a-z][^;(=]*?\b(attn_\w+)\(", text, re.M))
    if bare:
        fail(f"client.h declares functions without ATTN_EXPORT: {sorted(bare)}")
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    return {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3 and f[1] == "T"}


def main():
    version = open(os.path.join(SRC, "VERSION"), encoding="utf-8").read().strip()
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        fail(f"VERSION '{version}' is not MAJOR.MINOR.PATCH")
    lib = os.environ.get("ATTN_LIBATTN") or os.path.join(SRC, "build", "libattn.so")
    if lib == "none":
        print("exports: STATIC build, no libattn.so to check")
    else:
        if not os.path.exists(lib):
            fail(f"{lib} does not exist (build it first)")
        want, got = declared(), exported(lib)
        if len(want) < 10:
            fail(f"only {len(want)} declarations found in client.h: the parser is wrong")
        if want != got:
            fail(f"exported - declared: {sorted(got - want)}; declared - exported: "
                 f"{sorted(want - got)}")
        dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True,
                             check=True).stdout
        soname = f"libattn.so.{version.split('.')[0]}"
        if f"[{soname}]" not in dyn:
            fail(f"SONAME of {lib} is not {soname}:\n{dyn}")
        real = os.path.realpath(lib)
        if os.path.basename(real) != f"libattn.so.{version}":
            fail(f"{lib} resolves to {real}, not libattn.so.{version}")
        print(f"exports: {len(got)} functions, all declared in client.h; SONAME {soname}")
    ctl = os.environ.get("ATTNCTL")
    if ctl and os.environ.get("ATTND"):
        p = subprocess.run([ctl, "hello", "--local"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            fail(f"attnctl hello --local failed: {p.stderr}")
        got_v = json.loads(p.stdout)["server"]["version"]
        if got_v != version:
            fail(f"hello says version {got_v}, VERSION says {version}")
        print(f"hello: version {got_v} = VERSION")
    print("exports: all checks passed")


if __name__ == "__main__":
    main()

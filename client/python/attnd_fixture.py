"""What the package's tests share (not part of the package): an attnd on
the CPU engine at a fresh ipc:// path, and the check that a call is refused
with a given code and field."""

import os
import subprocess
import tempfile
import time

import attn


def start_attnd(extra=()):
    """Start $ATTND (default build/attnd) on the CPU engine; returns the
    process and its URL once the socket exists (at most ~5 s)."""
    exe = os.environ.get("ATTND", "build/attnd")
    tmp = tempfile.mkdtemp(prefix="attn-py-")
    path = os.path.join(tmp, "attnd.sock")
    proc = subprocess.Popen([exe, "--listen", "ipc://" + path, "--engine", "cpu", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(250):
        if os.path.exists(path):
            break
        time.sleep(0.02)
    return proc, "ipc://" + path


def expect(code, field, fn, *a, **kw):
    """Call fn and require an AttnError with this code and field; returns it."""
    try:
        fn(*a, **kw)
    except attn.AttnError as e:
        assert (e.code, e.field) == (code, field), (e.code, e.field, e.message)
        return e
    raise AssertionError("accepted; expected %s %s" % (code, field))

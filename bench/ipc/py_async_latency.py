#!/usr/bin/env python3
"""Host latency of one request through the Python client, per kind: hello,
a synchronous run by reference (shm buffer), an asynchronous run whose shm
semaphore is already satisfied (queue idle between runs), async runs back
to back (each waits for its reply), and pipelined async runs (the call hands
the request off; up to max_outstanding replies unread).  Starts its own attnd (CPU engine, --workers 1 so that a connection's
requests are handled in the order received, --conn-inflight 64 --contexts 64
for the window of 32) on a private socket.

    ATTND=build/attnd python3 bench/ipc/py_async_latency.py [N] [--no-order]
Prints p50 and p99 in µs per kind.  The client numbers its runs ("order",
attnd enqueues them by it); --no-order sends them unnumbered, to see the
race that numbering removes.
"""
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "client", "python"))
import attn  # noqa: E402


def p50_p99(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2], ts[int(len(ts) * 0.99)]


def timed(n, fn, between=None):
    ts = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        ts.append((time.perf_counter() - t) * 1e6)
        if between:
            between(i)
    return p50_p99(ts)


def main():
    args = [x for x in sys.argv[1:] if x != "--no-order"]
    n = int(args[0]) if args else 400
    numbered = "--no-order" not in sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="attn-lat-")
    path = os.path.join(tmp, "s")
    proc = subprocess.Popen([os.environ.get("ATTND", "build/attnd"), "--listen", "ipc://" + path,
                             "--engine", "cpu", "--workers", "1", "--conn-inflight", "64",
                             "--contexts", "64"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(250):
            if os.path.exists(path):
                break
            time.sleep(0.02)
        c = attn.Client("ipc://" + path, order=numbered)
        c.pool_create("p", layers=1, num_pages=8, page_size=4, num_kv_heads=1, head_dim_qk=8,
                      head_dim_vo=8, kv_dtype="fp32")
        a = attn.ShmArena(c, 1 << 16)
        m = {"pool": "p", "num_qo_heads": 1, "q_dtype": "fp32",
             "requests": [{"id": 0, "cache_len": 1, "new_len": 1}], "qo_indptr": attn.i32([0, 1]),
             "kv": {"format": "csr", "page_indptr": attn.i32([0, 1]),
                    "page_indices": attn.i32([3]), "last_page_len": attn.i32([2])}}
        pid = c.plan(m)["plan_id"]
        xs = [a.empty((1, 1, 8), "fp32") for _ in range(4)]
        r = [attn.ref(a.buf, a.offset_of(x), 32) for x in xs]
        ready = lambda v: struct.pack_into("<Q", a.shm.buf, 0, v)  # noqa: E731

        def arun(v, block=True):
            t = c.run(pid, 0, *r[:3], o=r[3], wait=attn.sem(a.buf, 0, v),
                      signal=attn.sem(a.buf, 8, v), async_=True)
            if block:
                return t.wait()
            sent.append(t)
            return t

        sent = []  # pipelined tickets, for the order count

        print("hello p50 %.1f p99 %.1f us" % timed(n, lambda i: c.hello()))
        print("sync run by ref p50 %.1f p99 %.1f us" % timed(n, lambda i: c.run(pid, 0, *r[:3],
                                                                                 o=r[3])))
        ready(n)
        print("async run, queue idle p50 %.1f p99 %.1f us"
              % timed(n, lambda i: arun(i + 1), lambda i: time.sleep(0.002)))
        print("async run, back to back p50 %.1f p99 %.1f us"
              % timed(n, lambda i: arun(n + i + 1), lambda i: ready(n + i + 1)))
        order = {"runs": 0, "out_of_order": 0}

        def collect():
            """Read the outstanding replies; count the runs attnd enqueued
            out of the order sent (E_ORDER, no deadlock here: shm
            semaphores already satisfied)."""
            try:
                c.collect()
            except attn.AttnError as e:
                if e.code != "E_ORDER":
                    raise
            for t in sent:
                try:
                    t.wait()
                except attn.AttnError as e:
                    if e.code != "E_ORDER":
                        raise
                    order["out_of_order"] += 1
            order["runs"] += len(sent)
            sent.clear()

        # pipelined: the call only hands the request off; replies are read
        # once the window (max_outstanding) is full, or by collect()
        ready(4 * n)
        for k, window in enumerate((4, 32)):
            c.max_outstanding = window
            base = (2 + k) * n
            print("async run, pipelined (window %d, steady state): submit p50 %.1f p99 %.1f us"
                  % ((window,) + timed(n, lambda i: arun(base + i + 1, block=False))))
            collect()
        # the hand-off alone: batches of `window` submits, collected between
        window, ts, col = 32, [], []
        c.max_outstanding = window
        for b in range(max(1, n // window)):
            for i in range(window):
                t = time.perf_counter()
                arun(4 * n, block=False)
                ts.append((time.perf_counter() - t) * 1e6)
            t = time.perf_counter()
            collect()
            col.append((time.perf_counter() - t) * 1e6)
        print("async run, pipelined hand-off (batches of %d, no reply read): submit p50 %.1f "
              "p99 %.1f us; collect of a batch p50 %.1f us" % ((window,) + p50_p99(ts) +
                                                              (p50_p99(col)[0],)))
        print("pipelined runs attnd enqueued out of the order sent: %d of %d"
              % (order["out_of_order"], order["runs"]))
        del xs
        a.close()
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()

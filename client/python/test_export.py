"""Exported pools from Python through a real attnd (CPU engine, no GPU):

    ATTND=build/attnd python3 client/python/test_export.py

- attn.Pool.create maps the shm object attnd created; its per-layer numpy
  views show what kv_write wrote, page by page, in NHD and HND;
- the engine's way (the new rows written into the views, then
  BatchDecodeWrapper.run(q, kv_written=True)) gives O and LSE bit for bit
  those of the same decode sent with k_new / v_new to an ordinary pool, and
  the two pools end byte-identical;
- the refusals: rows given with kv_written (client side, E_SHAPE k_new),
  kv_written on a pool that is not exported (attnd, E_SEMANTIC kv_written),
  and a kv_written run after the exporting connection closed;
- drop() unmaps and drops; stats counts exported pools.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attn  # noqa: E402
from attnd_fixture import expect, start_attnd  # noqa: E402

P, HKV, HQ, D = 4, 2, 4, 8
PAGES = 16


def geometry(layout):
    return dict(layers=2, num_pages=PAGES, page_size=P, num_kv_heads=HKV, head_dim_qk=D,
                head_dim_vo=D, kv_dtype="fp32", layout=layout)


def checks(url):
    rng = np.random.default_rng(5)
    c = attn.Client(url, timeout=10)
    c.pool_create("inl", **geometry("NHD"))
    exp = attn.Pool.create(c, "exp", **geometry("NHD"))
    assert exp.export["kind"] == "shm" and exp.export["name"].startswith("/attnd-")
    assert c.stats()["counters"]["pools_exported"] == 1
    hist_k = rng.uniform(-1, 1, (PAGES, P, HKV, D)).astype(np.float32)
    hist_v = rng.uniform(-1, 1, (PAGES, P, HKV, D)).astype(np.float32)
    for pool in ("inl", "exp"):
        for layer in range(2):
            c.kv_write(pool, layer, list(range(PAGES)), hist_k.tobytes(), hist_v.tobytes())
    # the views are attnd's memory, in attnd's layout
    assert exp.k[1].shape == (PAGES, P, HKV, D)
    assert np.array_equal(exp.k[1], hist_k) and np.array_equal(exp.v[0], hist_v)

    lens = [5, 9, 2]  # committed rows before this step
    pages_of = [[7, 3], [9, 1, 12], [4]]
    indptr = [0, 2, 5, 6]
    indices = sum(pages_of, [])
    last = [T % P + 1 for T in lens]  # after the append
    B = len(lens)
    q = rng.uniform(-1, 1, (B, HQ, D)).astype(np.float32)
    k_new = rng.uniform(-1, 1, (B, HKV, D)).astype(np.float32)
    v_new = rng.uniform(-1, 1, (B, HKV, D)).astype(np.float32)

    with attn.BatchDecodeWrapper(url, pool="inl", arena_bytes=1 << 20) as w:
        w.plan(indptr, indices, last, HQ, HKV, D, P, q_data_type="fp32")
        o_ref, lse_ref = [np.array(x) for x in w.run(q, k_new, v_new, layer=1, return_lse=True)]
        # kv_written on a pool nobody but attnd writes
        expect("E_SEMANTIC", "kv_written", w.run, q, layer=1, kv_written=True)

    with attn.BatchDecodeWrapper(url, pool="exp", arena_bytes=1 << 20) as w:
        w.plan(indptr, indices, last, HQ, HKV, D, P, q_data_type="fp32")
        expect("E_SHAPE", "k_new", w.run, q, k_new, v_new, layer=1, kv_written=True)
        # the engine writes the new rows itself: row T_b of request b
        for b, T in enumerate(lens):
            page, slot = pages_of[b][T // P], T % P
            exp.k[1][page, slot] = k_new[b]
            exp.v[1][page, slot] = v_new[b]
        o, lse = w.run(q, layer=1, return_lse=True, kv_written=True)
        assert o.tobytes() == o_ref.tobytes() and lse.tobytes() == lse_ref.tobytes()
        assert "cpu_gather_rows" in str(w.last_reply.get("diag"))
    for layer in range(2):
        ki, vi, _ = c.kv_read("inl", layer, list(range(PAGES)))
        ke, ve, _ = c.kv_read("exp", layer, list(range(PAGES)))
        assert ki == ke and vi == ve, layer  # what the inline run committed, the client wrote

    # HND: the same rows, the head axis before the slot axis
    hnd = attn.Pool.create(c, "exp_hnd", **geometry("HND"))
    assert hnd.k[0].shape == (PAGES, HKV, P, D)
    pages_hnd = rng.uniform(-1, 1, (PAGES, HKV, P, D)).astype(np.float32)
    c.kv_write("exp_hnd", 0, list(range(PAGES)), pages_hnd.tobytes(), pages_hnd.tobytes())
    assert np.array_equal(hnd.k[0], pages_hnd) and np.array_equal(hnd.v[0], pages_hnd)
    hnd.drop()

    # the export ends with the connection that made it; the pool stays
    other = attn.Client(url, timeout=10)
    gone = attn.Pool.create(other, "exp_gone", **geometry("NHD"))
    gone.close()
    other.close()
    deadline = time.time() + 5
    while os.path.exists("/dev/shm" + gone.export["name"]) and time.time() < deadline:
        time.sleep(0.02)
    assert not os.path.exists("/dev/shm" + gone.export["name"])
    with attn.BatchDecodeWrapper(url, pool="exp_gone", arena_bytes=1 << 20) as w:
        w.plan(indptr, indices, last, HQ, HKV, D, P, q_data_type="fp32")
        e = expect("E_SEMANTIC", "kv_written", w.run, q, layer=0, kv_written=True)
        assert "closed" in e.message, e.message
        w.run(q, k_new, v_new, layer=0)  # inline rows still served
    c.pool_drop("exp_gone")

    exp.drop()
    assert c.stats()["counters"]["pools_exported"] == 0
    expect("E_UNKNOWN_POOL", "pool", c.pool_info, "exp")
    c.close()


def main():
    proc, url = start_attnd()
    try:
        checks(url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print("python exported pools: all checks passed")


def check_ipc_handle_bytes():
    """An IPC handle reaches cuIpcOpenMemHandle whole.  Handles are mostly
    zero bytes; a ctypes char-array member stops copying at the first NUL,
    which made the driver refuse every exported CUDA pool ("invalid
    argument", H200, 2026-12-01).  No GPU needed: the struct is checked."""
    from attn.cuda import IPC_HANDLE_BYTES, _IpcHandle
    h = bytes([7, 1, 0, 0, 9]) + bytes(IPC_HANDLE_BYTES - 6) + bytes([3])
    s = _IpcHandle.of(h)
    assert bytes(s) == h, "the handle struct lost bytes after a NUL"
    assert s.raw() == h


if __name__ == "__main__":
    check_ipc_handle_bytes()
    main()

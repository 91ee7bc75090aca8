"""End-to-end test of the pure-Python client against a real attnd.

    ATTND=build/attnd python3 client/python/test_attn.py

Starts attnd on a private ipc:// socket with the CPU engine, then: hello;
pool_create; kv_write/kv_read round trip of the seed 0x04D page table
[7, 3, 9]; a one-token decode (T = 9, C = 1, so the new row lands at
logical position 9 = page 9, row 1) checked against an exact Python
softmax; and the error replies for a dense mask without polarity (seed
0x05B) and an unknown op.  Exits non-zero on the first failure.
"""

import math
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attn  # noqa: E402


def main():
    attnd = os.environ.get("ATTND", "build/attnd")
    tmp = tempfile.mkdtemp(prefix="attn-py-")
    path = os.path.join(tmp, "attnd.sock")
    url = "ipc://" + path
    proc = subprocess.Popen([attnd, "--listen", url, "--engine", "cpu"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if os.path.exists(path):
                break
            time.sleep(0.02)
        run_checks(url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print("python client: all checks passed")


def run_checks(url):
    P, H, D = 4, 1, 2
    rng = random.Random(7)
    with attn.Client(url, timeout=10) as c:
        hello = c.hello()
        assert "server" in hello, hello
        c.pool_create("main", layers=1, num_pages=16, page_size=P, num_kv_heads=H,
                      head_dim_qk=D, head_dim_vo=D, kv_dtype="fp32", layout="NHD")
        info = c.pool_info("main")
        assert info["num_pages"] == 16 and info["kv_dtype"] == "fp32", info

        # history of 9 rows in pages [7, 3, 9] (seed 0x04D), page 9 half used
        pages = [7, 3, 9]
        k_hist = [rng.uniform(-1, 1) for _ in range(len(pages) * P * H * D)]
        v_hist = [rng.uniform(-1, 1) for _ in range(len(pages) * P * H * D)]
        c.kv_write("main", 0, pages, attn.tensor(k_hist, "fp32"), attn.tensor(v_hist, "fp32"))
        k_back, v_back, _ = c.kv_read("main", 0, pages)
        assert attn.untensor(k_back, "fp32") == attn.untensor(attn.tensor(k_hist, "fp32"),
                                                                "fp32")
        assert len(v_back) == len(v_hist) * 4

        T = 9
        manifest = {
            "pool": "main", "num_qo_heads": 1, "q_dtype": "fp32",
            "requests": [{"id": "req-A", "cache_len": T, "new_len": 1}],
            "qo_indptr": attn.i32([0, 1]),
            "kv": {"format": "csr", "page_indptr": attn.i32([0, 3]),
                   "page_indices": attn.i32(pages), "last_page_len": attn.i32([2])},
        }
        q = [0.5, -1.0]
        k_new = [0.25, 0.75]
        v_new = [-0.5, 2.0]
        r = c.attend(manifest, 0, attn.tensor(q, "fp32"), attn.tensor(k_new, "fp32"),
                     attn.tensor(v_new, "fp32"), return_lse=True)
        o = attn.untensor(r["o"], r["o_dtype"])
        lse = attn.untensor(r["lse"], "fp32")
        # exact reference: keys 0..8 from the history, key 9 the new row
        kf = attn.untensor(attn.tensor(k_hist, "fp32"), "fp32")
        vf = attn.untensor(attn.tensor(v_hist, "fp32"), "fp32")
        keys = [kf[t * D:(t + 1) * D] for t in range(T)] + [k_new]
        vals = [vf[t * D:(t + 1) * D] for t in range(T)] + [v_new]
        scale = 1 / math.sqrt(D)
        s = [scale * sum(a * b for a, b in zip(q, k)) for k in keys]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        want_lse = m + math.log(sum(w))
        want_o = [sum(wi * v[d] for wi, v in zip(w, vals)) / sum(w) for d in range(D)]
        assert abs(lse[0] - want_lse) < 1e-5, (lse, want_lse)
        assert all(abs(a - b) < 1e-5 for a, b in zip(o, want_o)), (o, want_o)
        assert "diag" in r

        bad = dict(manifest, mask={"kind": "dense", "bits": b"\x01"})
        try:
            c.plan(bad)
            raise AssertionError("a dense mask without polarity was accepted")
        except attn.AttnError as e:
            assert e.code == "E_MASK_POLARITY" and e.field == "mask.polarity", e
        try:
            c.call("explode")
            raise AssertionError("an unknown op was accepted")
        except attn.AttnError as e:
            assert e.code == "E_UNKNOWN_OP" and e.field == "op", e
        c.stats()

        shm_checks(c, manifest, q, k_new, v_new, r)


def shm_checks(c, manifest, q, k_new, v_new, inline):
    """The same attend by reference into a shm buffer equals the inline one
    bit for bit; the reply says where O and LSE went; drop, then refused."""
    buf = attn.ShmBuffer(4096)
    try:
        bid = c.buffer_register_shm(buf.name, buf.size)
        offs = {"q": 0, "k_new": 64, "v_new": 128, "o": 192, "lse": 256}
        for name, vals in (("q", q), ("k_new", k_new), ("v_new", v_new)):
            b = attn.tensor(vals, "fp32")
            buf.buf[offs[name]:offs[name] + len(b)] = b
        r = c.attend(manifest, 0, q=attn.ref(bid, offs["q"], 8),
                     k_new=attn.ref(bid, offs["k_new"], 8),
                     v_new=attn.ref(bid, offs["v_new"], 8),
                     o=attn.ref(bid, offs["o"], 8), lse=attn.ref(bid, offs["lse"], 4))
        assert r["o"] == {"buf": bid, "offset": offs["o"], "bytes": 8}, r["o"]
        assert r["lse"] == {"buf": bid, "offset": offs["lse"], "bytes": 4}, r["lse"]
        assert bytes(buf.buf[offs["o"]:offs["o"] + 8]) == inline["o"]
        assert bytes(buf.buf[offs["lse"]:offs["lse"] + 4]) == inline["lse"]
        try:
            import numpy  # noqa: F401  (optional)
            o = buf.array(offs["o"], (1, 1, 2), "fp32")
            assert o.tobytes() == inline["o"]
            del o  # a live view keeps the mapping exported: close() would refuse
        except ImportError:
            pass
        counters = c.stats()["counters"]
        assert counters["buffers"] == 1, counters
        c.buffer_drop(bid)
        try:
            c.attend(manifest, 0, q=attn.ref(bid, 0, 8), k_new=attn.ref(bid, 64, 8),
                     v_new=attn.ref(bid, 128, 8))
            raise AssertionError("a dropped buffer was accepted")
        except attn.AttnError as e:
            assert e.code == "E_UNKNOWN_BUFFER" and e.field == "q.buf", e
    finally:
        buf.close()


if __name__ == "__main__":
    main()

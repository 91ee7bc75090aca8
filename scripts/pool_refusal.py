#!/usr/bin/env python3
"""Pool bytes before/after refused calls, through attnd (scripts/device-e2e-prefill.sh).

`gen DIR DEVICE` writes DIR/refusal.json: a bf16 pool on DEVICE filled with
random pages, a kv_read, two attends every CUDA engine refuses (a mixed
batch that asks for the overlap schedule, which no engine implements --
partition runs on the GPU since issue 12; an append forced onto
cuda_decode), a kv_read, then an append that runs and commits, and a last
kv_read.  `check FILE` reads `attnctl run` output and prints the SHA-256 of
the pool before, after the refusals and after the committed append: the
first two must be equal, the third must differ (so the check can fail).
"""
import hashlib
import json
import random
import sys

PAGES, PAGE, HKV, D, HQ = 8, 16, 2, 64, 4


def rows(n, rng):
    return [round(rng.uniform(-1, 1), 3) for _ in range(n)]


def gen(out_dir, device):
    rng = random.Random(7)
    reqs = [
        {"op": "pool_create", "pool": "chk", "layers": 1, "num_pages": PAGES, "page_size": PAGE,
         "num_kv_heads": HKV, "head_dim_qk": D, "head_dim_vo": D, "kv_dtype": "bf16",
         "layout": "NHD", "device": device},
        {"op": "kv_write", "pool": "chk", "layer": 0, "pages": list(range(PAGES)),
         "tensors": {"k": rows(PAGES * PAGE * HKV * D, rng),
                     "v": rows(PAGES * PAGE * HKV * D, rng)}},
        {"op": "kv_read", "pool": "chk", "layer": 0, "pages": list(range(PAGES))},
    ]

    def attend(requests, policy):
        T = [r[1] for r in requests]
        C = [r[2] for r in requests]
        qo = [0]
        for c in C:
            qo.append(qo[-1] + c)
        # request b owns pages [2b, 2b + 2): 32 rows
        indptr, idx, last = [0], [], []
        for b, (t, c) in enumerate(zip(T, C)):
            n = (t + c + PAGE - 1) // PAGE
            idx += [2 * b + j for j in range(n)]
            indptr.append(len(idx))
            last.append((t + c) - (n - 1) * PAGE)
        total = qo[-1]
        return {"op": "attend", "pool": "chk", "num_qo_heads": HQ, "q_dtype": "bf16",
                "requests": [{"id": r[0], "cache_len": r[1], "new_len": r[2]} for r in requests],
                "qo_indptr": qo,
                "kv": {"format": "csr", "page_indptr": indptr, "page_indices": idx,
                       "last_page_len": last},
                "mask": {"kind": "causal"}, "policy": policy, "layer": 0,
                "q": rows(total * HQ * D, rng), "k_new": rows(total * HKV * D, rng),
                "v_new": rows(total * HKV * D, rng), "return_lse": True}

    mixed = [("p0", 0, 9), ("d1", 20, 1), ("a2", 12, 5)]
    reqs.append(attend(mixed, {"schedule": "overlap"}))
    reqs.append(attend([("a0", 10, 6), ("a1", 3, 4)], {"backend": "cuda_decode"}))
    reqs.append({"op": "kv_read", "pool": "chk", "layer": 0, "pages": list(range(PAGES))})
    reqs.append(attend([("a0", 10, 6), ("a1", 3, 4)], {}))
    reqs.append({"op": "kv_read", "pool": "chk", "layer": 0, "pages": list(range(PAGES))})
    with open(f"{out_dir}/refusal.json", "w") as f:
        json.dump(reqs, f)


def replies(text):
    try:
        v = json.loads(text)
        return v if isinstance(v, list) else [v]
    except json.JSONDecodeError:
        dec, out, i = json.JSONDecoder(), [], 0
        while i < len(text):
            while i < len(text) and text[i] in " \r\n\t":
                i += 1
            if i >= len(text):
                break
            v, i = dec.raw_decode(text, i)
            out.append(v)
        return out


def check(path):
    rs = replies(open(path).read())
    reads = [r for r in rs if isinstance(r, dict) and "tensors" in r]
    errs = [r for r in rs if isinstance(r, dict) and r.get("error")]
    sums = [hashlib.sha256(json.dumps(r["tensors"], sort_keys=True).encode()).hexdigest()[:16]
            for r in reads]
    for e in errs:
        er = e["error"]
        print("refused:", er.get("code") if isinstance(er, dict) else er,
              (er.get("field", "") + " " + er.get("message", "")[:160]) if isinstance(er, dict)
              else "")
    print("pool sha256 before / after refusals / after a committed append:", *sums)
    ok = len(reads) == 3 and sums[0] == sums[1] and sums[2] != sums[0] and len(errs) == 2
    print("pool refusal check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], sys.argv[3])
    else:
        sys.exit(check(sys.argv[2]))

#!/usr/bin/env python3
"""Prefill/append benchmark on one GPU, every peer in one process on the same data.

attnd's tensor-core prefill kernel on a paged (page 16, NHD, CSR, shuffled
pages) bf16 cache against: PyTorch SDPA with the cuDNN backend on contiguous
K/V, FlashInfer's BatchPrefillWithPagedKVCacheWrapper on the same paged
cache, and FlexAttention with a BlockMask for the masked cases.  TFLOP/s
count visible cells only: 4 * cells * H_q * d.  Medians of CUDA-event
timings of single launches after warm-up.

Usage (device): python3 bench/gpu/bench_prefill.py --out $OUT [--only NAME]
                [--skip flashinfer,flex] [--lib build-gpu/lib/libattn_cuda_bench.so]
Writes prefill-h200-<date>.json and .md into --out.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

P = 16
MASK_CAUSAL, MASK_NONE, MASK_FLASHMASK = 0, 1, 4

SHAPES = [
    dict(name="causal_S2048", B=1, T=0, C=2048),
    dict(name="causal_S8192", B=1, T=0, C=8192),
    dict(name="causal_S32768", B=1, T=0, C=32768),
    dict(name="append_B8_T4096_C512", B=8, T=4096, C=512),
    dict(name="fewq_B32_T8192_C4", B=32, T=8192, C=4),
    dict(name="flashmask_docs8_S8192", B=1, T=0, C=8192, fm="docs"),
    dict(name="flashmask_question_S8192", B=1, T=0, C=8192, fm="question"),
    dict(name="causal_d64_S8192", B=1, T=0, C=8192, d=64),
    dict(name="causal_d256_S8192", B=1, T=0, C=8192, d=256),
    dict(name="causal_group8_S8192", B=1, T=0, C=8192, hq=64),
]


def log(*a):
    print(*a, flush=True)


def load_lib(path):
    # an absolute path: a bare "lib.so" would be searched for on LD_LIBRARY_PATH, not here
    lib = ctypes.CDLL(os.path.abspath(path))
    vp, u32, i32p, i64p = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p
    lib.attnpf_create.restype = vp
    lib.attnpf_create.argtypes = [u32, i64p, i64p, i32p, i32p, i32p, i32p, u32, u32, u32, u32,
                                  u32, ctypes.c_int, i32p, i32p, i32p, i32p, ctypes.c_int, u32,
                                  ctypes.POINTER(ctypes.c_int)]
    lib.attnpf_run.restype = ctypes.c_int
    lib.attnpf_run.argtypes = [vp, vp, vp, vp, vp, vp, vp]
    lib.attnpf_free.argtypes = [vp]
    lib.attnpf_info.argtypes = [vp, vp]
    lib.attnpf_set_max_ctas.argtypes = [vp, u32]
    return lib


def time_fn(fn, reps=15, warm=3):
    """Median milliseconds of one call (CUDA events around each call)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def segments(shape):
    """Document / answer boundaries of a FlashMask shape (prefill, T = 0)."""
    S = shape["C"]
    if shape["fm"] == "docs":
        return [S * i // 8 for i in range(9)], False
    prefix = S // 4
    return [0, prefix] + [prefix + (S - prefix) * i // 4 for i in range(1, 5)], True


def visible_cells(shape):
    B, T, C = shape["B"], shape["T"], shape["C"]
    if "fm" not in shape:
        return B * (C * T + C * (C + 1) // 2)
    b, shared = segments(shape)
    cells = 0
    for s in range(len(b) - 1):
        n = b[s + 1] - b[s]
        cells += n * (n + 1) // 2
        if shared and s > 0:
            cells += n * b[1]
    return cells


def flashmask_vectors(shape):
    """Per-column lower-triangle masked rows [LTS, LTE) (upper family empty)."""
    S = shape["C"]
    b, shared = segments(shape)
    lts = torch.full((S,), S, dtype=torch.int32)
    for s in range(len(b) - 1):
        if shared and s == 0:
            continue
        lts[b[s]:b[s + 1]] = b[s + 1]
    lte = torch.full((S,), S, dtype=torch.int32)
    zero = torch.zeros(S, dtype=torch.int32)
    return lts, lte, zero, zero.clone()


def make_case(shape, gen):
    B, T, C = shape["B"], shape["T"], shape["C"]
    hq, hkv, d = shape.get("hq", 32), 8, shape.get("d", 128)
    L = T + C
    npg = (L + P - 1) // P
    num_pages = B * npg + 8
    perm = torch.randperm(num_pages, generator=gen)
    indices = perm[:B * npg].to(torch.int32)
    indptr = torch.arange(0, B * npg + 1, npg, dtype=torch.int32)
    last = torch.full((B,), L - (npg - 1) * P, dtype=torch.int32)
    k = torch.randn(num_pages, P, hkv, d, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(num_pages, P, hkv, d, generator=gen).to(torch.bfloat16).cuda()
    q = torch.randn(B * C, hq, d, generator=gen).to(torch.bfloat16).cuda()
    qo = torch.arange(0, B * C + 1, C, dtype=torch.int32)
    return dict(B=B, T=T, C=C, L=L, hq=hq, hkv=hkv, d=d, k=k, v=v, q=q, qo=qo, indptr=indptr,
                indices=indices, last=last, num_pages=num_pages)


def contiguous_kv(cs):
    """K/V gathered into [B, H_kv, L, d] (the SDPA / Flex layout)."""
    B, L, hkv, d = cs["B"], cs["L"], cs["hkv"], cs["d"]
    pg = cs["indices"].long().cuda()
    K = cs["k"][pg].reshape(B, -1, hkv, d)[:, :L].transpose(1, 2).contiguous()
    V = cs["v"][pg].reshape(B, -1, hkv, d)[:, :L].transpose(1, 2).contiguous()
    return K, V


def run_attnd(lib, shape, cs, row):
    B = cs["B"]
    T = torch.full((B,), cs["T"], dtype=torch.int64)
    C = torch.full((B,), cs["C"], dtype=torch.int64)
    rv = ctypes.c_int(0)
    vecs = [None] * 4
    kind = MASK_CAUSAL
    fm_causal = 0
    if "fm" in shape:
        kind, fm_causal = MASK_FLASHMASK, 1
        vecs = list(flashmask_vectors(shape))
    ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None
    h = lib.attnpf_create(B, ptr(T), ptr(C), ptr(cs["qo"]), ptr(cs["indptr"]), ptr(cs["indices"]),
                          ptr(cs["last"]), cs["num_pages"], P, cs["hq"], cs["hkv"], cs["d"], kind,
                          ptr(vecs[0]), ptr(vecs[1]), ptr(vecs[2]), ptr(vecs[3]), fm_causal, 0,
                          ctypes.byref(rv))
    if not h:
        raise RuntimeError(f"attnpf_create failed: {rv.value}")
    info = (ctypes.c_uint64 * 8)()
    lib.attnpf_info(h, info)
    o = torch.full_like(cs["q"], float("nan"))
    lse = torch.full((B * cs["C"], cs["hq"]), float("nan"), dtype=torch.float32, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    fn = lambda: lib.attnpf_run(h, ptr(cs["q"]), ptr(cs["k"]), ptr(cs["v"]), ptr(o), ptr(lse),
                                stream)
    if fn() != 0:
        raise RuntimeError("attnpf_run failed")
    torch.cuda.synchronize()
    ms = time_fn(fn)
    lib.attnpf_set_max_ctas(h, 0)  # one CTA per (item, K/V head) unit, for comparison
    ms_grid = time_fn(fn)
    lib.attnpf_set_max_ctas(h, torch.cuda.get_device_properties(0).multi_processor_count)
    keys = ["items", "merges", "skip_tiles", "full_tiles", "partial_tiles", "logical_cells",
            "executed_cells", "parts"]
    plan = {k: int(info[i]) for i, k in enumerate(keys)}
    nan = bool(torch.isnan(o).any().item() or torch.isnan(lse).any().item())
    lib.attnpf_free(h)
    return ms, o, dict(plan=plan, nan=nan, ms_one_cta_per_unit=ms_grid)


def run_sdpa(shape, cs, K, V):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, C, hq, d = cs["B"], cs["C"], cs["hq"], cs["d"]
    q4 = cs["q"].view(B, C, hq, d).transpose(1, 2)
    if cs["T"] == 0:
        def fn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q4, K, V, is_causal=True, enable_gqa=True)
    else:
        from torch.nn.attention.bias import causal_lower_right
        bias = causal_lower_right(C, cs["L"])

        def fn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q4, K, V, attn_mask=bias, enable_gqa=True)
    o = fn()
    torch.cuda.synchronize()
    return time_fn(fn), o.transpose(1, 2).reshape(B * C, hq, d)


def flashmask_dense(shape):
    """The shape's FlashMask (one prefill of S = C rows) as FlashInfer's flat
    custom mask: causal, inside a document or on the shared first one."""
    b, shared = segments(shape)
    S = shape["C"]
    seg = torch.zeros(S, dtype=torch.int64)
    for s in range(len(b) - 1):
        seg[b[s]:b[s + 1]] = s
    qi = torch.arange(S).view(-1, 1)
    kj = torch.arange(S).view(1, -1)
    m = (kj <= qi) & ((seg.view(1, -1) == seg.view(-1, 1)) | ((seg.view(1, -1) == 0) & shared))
    return m.reshape(-1)


def run_flashinfer(fi, shape, cs):
    B, C, hq, hkv, d = cs["B"], cs["C"], cs["hq"], cs["hkv"], cs["d"]
    ws = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
    kw = dict(causal=True)
    if "fm" in shape:
        kw = dict(custom_mask=flashmask_dense(shape).cuda())
    w.plan(cs["qo"].cuda(), cs["indptr"].cuda(), cs["indices"].cuda(), cs["last"].cuda(), hq, hkv,
           d, P, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, **kw)
    fn = lambda: w.run(cs["q"], (cs["k"], cs["v"]))
    o = fn()
    torch.cuda.synchronize()
    return time_fn(fn), o


def run_flex(shape, cs, K, V):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    B, C, hq, d = cs["B"], cs["C"], cs["hq"], cs["d"]
    b, shared = segments(shape)
    seg = torch.zeros(C, dtype=torch.int32, device="cuda")
    for s in range(len(b) - 1):
        seg[b[s]:b[s + 1]] = s

    def mask_mod(bb, h, qi, kj):
        same = seg[qi] == seg[kj]
        if shared:
            same = same | (seg[kj] == 0)
        return (kj <= qi) & same

    bm = create_block_mask(mask_mod, None, None, C, C, device="cuda")
    flex = torch.compile(flex_attention, dynamic=False)
    q4 = cs["q"].view(B, C, hq, d).transpose(1, 2)
    fn = lambda: flex(q4, K, V, block_mask=bm, enable_gqa=True)
    o = fn()
    torch.cuda.synchronize()
    return time_fn(fn), o.transpose(1, 2).reshape(B * C, hq, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--deadline", type=float, default=280.0, help="seconds; later peers skipped")
    a = ap.parse_args()
    t_start = time.time()
    lib = load_lib(a.lib)
    skip = set(x for x in a.skip.split(",") if x)
    fi = None
    if "flashinfer" not in skip:
        try:
            import flashinfer
            fi = flashinfer
        except Exception as ex:
            log("import flashinfer failed:", repr(ex)[:300])
    res = dict(date=datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
               device=torch.cuda.get_device_name(0), torch=torch.__version__,
               cuda=torch.version.cuda,
               flashinfer=getattr(fi, "__version__", None) if fi else None,
               command="bash bench/gpu/run_prefill.sh b", page_size=P, dtype="bf16",
               flops="4 * visible_cells * H_q * d", rows=[])
    gen = torch.Generator().manual_seed(1234)
    for shape in SHAPES:
        if a.only and a.only not in shape["name"]:
            continue
        cs = make_case(shape, gen)
        cells = visible_cells(shape)
        flop = 4.0 * cells * cs["hq"] * cs["d"]
        row = dict(shape=shape["name"], B=cs["B"], T=cs["T"], C=cs["C"], hq=cs["hq"],
                   hkv=cs["hkv"], d=cs["d"], visible_cells=cells, peers={})
        tf = lambda ms: flop / (ms * 1e-3) / 1e12
        o_ref = None
        try:
            ms, o_a, extra = run_attnd(lib, shape, cs, row)
            row["peers"]["attnd_paged"] = dict(ms=ms, tflops=tf(ms), **extra)
        except Exception as ex:
            row["peers"]["attnd_paged"] = dict(error=repr(ex)[:300])
            traceback.print_exc()
            o_a = None
        K = V = None
        if "fm" not in shape or True:
            K, V = contiguous_kv(cs)
        if "fm" not in shape:
            try:
                ms, o_s = run_sdpa(shape, cs, K, V)
                o_ref = o_s
                row["peers"]["sdpa_cudnn_contiguous"] = dict(ms=ms, tflops=tf(ms))
            except Exception as ex:
                row["peers"]["sdpa_cudnn_contiguous"] = dict(error=repr(ex)[:300])
        if "fm" in shape and "flex" not in skip and time.time() - t_start < a.deadline:
            try:
                ms, o_f = run_flex(shape, cs, K, V)
                o_ref = o_f
                row["peers"]["flex_blockmask"] = dict(ms=ms, tflops=tf(ms))
            except Exception as ex:
                row["peers"]["flex_blockmask"] = dict(error=repr(ex)[:300])
                traceback.print_exc()
        if fi is not None and time.time() - t_start < a.deadline:
            try:
                ms, o_fi = run_flashinfer(fi, shape, cs)
                if o_ref is None:
                    o_ref = o_fi
                row["peers"]["flashinfer_paged"] = dict(ms=ms, tflops=tf(ms))
            except Exception as ex:
                row["peers"]["flashinfer_paged"] = dict(error=repr(ex)[:300])
                traceback.print_exc()
        if o_a is not None and o_ref is not None:
            row["peers"]["attnd_paged"]["rel_l2_vs_peer"] = rel_l2(o_a, o_ref)
        res["rows"].append(row)
        log(shape["name"], json.dumps({k: {kk: (round(vv, 4) if isinstance(vv, float) else vv)
                                          for kk, vv in v.items() if kk != "plan"}
                                      for k, v in row["peers"].items()}))
        del cs, K, V
        torch.cuda.empty_cache()
    day = datetime.datetime.utcnow().strftime("%Y-%m-%d")
    with open(os.path.join(a.out, f"prefill-h200-{day}.json"), "w") as f:
        json.dump(res, f, indent=1)
    peers = ["attnd_paged", "sdpa_cudnn_contiguous", "flashinfer_paged", "flex_blockmask"]
    lines = [f"# Prefill benchmark, {res['device']}, {res['date']}", "",
             f"torch {res['torch']}, CUDA {res['cuda']}, flashinfer {res['flashinfer']}; "
             f"bf16, page {P}, H_kv 8; TFLOP/s = 4 * visible cells * H_q * d / time (median).", "",
             "| shape | " + " | ".join(peers) + " | attnd / cuDNN | attnd / FlashInfer | attnd / Flex |",
             "|---" * (len(peers) + 4) + "|"]
    for r in res["rows"]:
        cells = []
        for p in peers:
            x = r["peers"].get(p)
            cells.append("-" if x is None else ("err" if "error" in x else
                                                f"{x['tflops']:.0f} ({x['ms']:.3f} ms)"))
        a_ = r["peers"].get("attnd_paged", {})
        ratio = lambda p: (f"{a_['tflops'] / r['peers'][p]['tflops']:.2f}x"
                           if "tflops" in a_ and "tflops" in r["peers"].get(p, {}) else "-")
        lines.append(f"| {r['shape']} | " + " | ".join(cells) +
                     f" | {ratio('sdpa_cudnn_contiguous')} | {ratio('flashinfer_paged')} | {ratio('flex_blockmask')} |")
    with open(os.path.join(a.out, f"prefill-h200-{day}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    log("\n".join(lines))


if __name__ == "__main__":
    main()

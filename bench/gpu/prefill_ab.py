#!/usr/bin/env python3
"""A/B of prefill kernel builds in one process, on the same data (issue 12).

Each variant is a benchmark library (tests/gpu/build.sh's
libattn_cuda_bench.so, possibly from another commit) and a load tier:
"tma" lets the launcher take the TMA tier where the store admits it,
"gather" sets attn_cuda_prefill_params.gather_only (every K/V row by the
cp.async gather; a library without attnpf_set_gather_only has only the
gather), "tma-vchunk" loads V's TMA boxes per 64-column chunk as K's
instead of whole pages (attn_cuda_prefill_params.v_chunk_boxes; a library
before 2026-12-03's whole-page boxes has only that form).  The shapes are
bench_prefill.py's (bf16, H_q 32, H_kv 8, page 16 or --page, NHD, CSR,
shuffled pages) plus causal_S4096 (the prefill half of M2/M5).
Times: median of 15 CUDA-event-timed launches per variant after 3 warm-ups,
the variants' launches interleaved (time_interleaved), the persistent grid;
TFLOP/s = 4 * visible cells * H_q * d / time.  Every variant's O is
compared with the first variant's (rel L2) and checked for NaN.

Usage (device):
  python3 bench/gpu/prefill_ab.py --var base=lib_base.so:gather --var new=lib.so:tma \
      [--var new_gather=lib.so:gather] [--only causal_S8192,causal_S4096] [--out DIR] \
      [--fi fa2,fa3]
  --fi: FlashInfer's BatchPrefillWithPagedKVCacheWrapper with each named backend on the
  same data (FA3 takes no custom mask: the FlashMask shape runs FA2 only).
  --profile: run each (shape, variant) once, nothing timed (under ncu).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_prefill as bp  # noqa: E402

SHAPES = [dict(name="causal_S4096", B=1, T=0, C=4096),
          dict(name="causal_S16384", B=1, T=0, C=16384)] + bp.SHAPES + [
    # the two FlashMask patterns as attnd dense masks (bit matrices, true means allowed):
    # the same visible cells, the dense PARTIAL-tile path (libraries with attnpf_create_dense)
    dict(name="dense_docs8_S8192", B=1, T=0, C=8192, fm="docs", dense=True),
    dict(name="dense_question_S8192", B=1, T=0, C=8192, fm="question", dense=True)]


def dense_bits(shape):
    """The shape's FlashMask pattern as one request's C x (T + C) bit matrix,
    row-major, LSB first, a set bit = visible (true_means_allowed)."""
    m = bp.flashmask_dense(shape).to(torch.uint8).view(-1)
    pad = (-m.numel()) % 8
    if pad:
        m = torch.cat([m, torch.zeros(pad, dtype=torch.uint8)])
    w = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    return (m.view(-1, 8) * w).sum(1, dtype=torch.int64).to(torch.uint8).contiguous()


def load(path):
    lib = bp.load_lib(path)
    has = hasattr(lib, "attnpf_set_gather_only")
    if hasattr(lib, "attnpf_create_dense"):
        vp, u32 = ctypes.c_void_p, ctypes.c_uint32
        lib.attnpf_create_dense.restype = vp
        lib.attnpf_create_dense.argtypes = [u32, vp, vp, vp, vp, vp, vp, u32, u32, u32, u32, u32,
                                            vp, ctypes.c_uint64, ctypes.c_int, u32,
                                            ctypes.POINTER(ctypes.c_int)]
    if has:
        lib.attnpf_set_gather_only.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    if hasattr(lib, "attnpf_set_v_chunk_boxes"):
        lib.attnpf_set_v_chunk_boxes.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    return lib, has


def create(lib, shape, cs):
    B = cs["B"]
    T = torch.full((B,), cs["T"], dtype=torch.int64)
    C = torch.full((B,), cs["C"], dtype=torch.int64)
    rv = ctypes.c_int(0)
    vecs = [None] * 4
    kind, fm_causal = bp.MASK_CAUSAL, 0
    if "fm" in shape:
        kind, fm_causal = bp.MASK_FLASHMASK, 1
        vecs = list(bp.flashmask_vectors(shape))
    ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None
    if shape.get("dense"):
        if not hasattr(lib, "attnpf_create_dense"):
            raise RuntimeError("library has no attnpf_create_dense")
        bits = dense_bits(shape)
        h = lib.attnpf_create_dense(B, ptr(T), ptr(C), ptr(cs["qo"]), ptr(cs["indptr"]),
                                    ptr(cs["indices"]), ptr(cs["last"]), cs["num_pages"], bp.P,
                                    cs["hq"], cs["hkv"], cs["d"], ptr(bits), bits.numel(), 0, 0,
                                    ctypes.byref(rv))
        if not h:
            raise RuntimeError(f"attnpf_create_dense failed: {rv.value}")
        return h, ptr
    h = lib.attnpf_create(B, ptr(T), ptr(C), ptr(cs["qo"]), ptr(cs["indptr"]), ptr(cs["indices"]),
                          ptr(cs["last"]), cs["num_pages"], bp.P, cs["hq"], cs["hkv"], cs["d"],
                          kind, ptr(vecs[0]), ptr(vecs[1]), ptr(vecs[2]), ptr(vecs[3]), fm_causal,
                          0, ctypes.byref(rv))
    if not h:
        raise RuntimeError(f"attnpf_create failed: {rv.value}")
    return h, ptr


def fi_wrapper(fi, shape, cs, backend):
    """FlashInfer's paged prefill planned on the case (causal, or the shape's
    FlashMask as a dense custom mask) with the named backend (fa2 / fa3)."""
    ws = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
    kw = dict(causal=True)
    if "fm" in shape:
        kw = dict(custom_mask=bp.flashmask_dense(shape).cuda())
    w.plan(cs["qo"].cuda(), cs["indptr"].cuda(), cs["indices"].cuda(), cs["last"].cuda(),
           cs["hq"], cs["hkv"], cs["d"], bp.P, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16, **kw)
    w._ws = ws
    return w


def time_interleaved(timed, reps, warm=3):
    """Median ms of each (name, fn), the calls interleaved: every round runs
    each fn once, in forward then reverse order, so a drift of the clocks
    over the run (the H200 slowed 5-10 % over ten seconds of back-to-back
    prefill launches, 2026-12-03) falls on every variant alike."""
    for _ in range(warm):
        for _, fn in timed:
            fn()
    torch.cuda.synchronize()
    ts = {name: [] for name, _ in timed}
    for r in range(reps):
        for name, fn in (timed if r % 2 == 0 else timed[::-1]):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts[name].append(e0.elapsed_time(e1))
    return {name: statistics.median(v) for name, v in ts.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--var", action="append", required=True,
                    help="name=lib.so:tma|gather|tma-vchunk")
    ap.add_argument("--only", default="causal_S8192,causal_S4096")
    ap.add_argument("--out", default="")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--page", type=int, default=bp.P,
                    help="page size of the K/V pool (bench_prefill.py's P, 16, by default)")
    ap.add_argument("--fi", default="",
                    help="FlashInfer backends to run too, e.g. fa2,fa3 (same data; fa3 JIT-compiles "
                         "unless its module is cached)")
    a = ap.parse_args()
    bp.P = a.page
    libs, variants = {}, []
    for v in a.var:
        name, rest = v.split("=", 1)
        path, tier = rest.rsplit(":", 1)
        if path not in libs:
            libs[path] = load(path)
        variants.append((name, path, tier))
    only = set(a.only.split(",")) if a.only else None
    gen = torch.Generator().manual_seed(1234)
    rows = []
    for shape in SHAPES:
        if only and shape["name"] not in only:
            continue
        shape = dict(shape)
        cs = bp.make_case(shape, gen)
        flops = 4.0 * bp.visible_cells(shape) * cs["hq"] * cs["d"]
        row = dict(shape=shape["name"], variants={})
        ref = None
        timed, handles = [], []  # (name, fn) run once and checked; timed together below
        try:
            for name, path, tier in variants:
                lib, has = libs[path]
                h, ptr = create(lib, shape, cs)
                handles.append((lib, h))
                try:
                    if has:
                        lib.attnpf_set_gather_only(h, 1 if tier == "gather" else 0)
                    elif tier != "gather":
                        row["variants"][name] = dict(error="library has only the gather")
                        continue
                    if hasattr(lib, "attnpf_set_v_chunk_boxes"):
                        lib.attnpf_set_v_chunk_boxes(h, 1 if tier == "tma-vchunk" else 0)
                    o = torch.full_like(cs["q"], float("nan"))
                    lse = torch.full((cs["B"] * cs["C"], cs["hq"]), float("nan"),
                                     dtype=torch.float32, device="cuda")
                    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
                    fn = (lambda lib=lib, h=h, o=o, lse=lse, stream=stream:
                          lib.attnpf_run(h, ptr(cs["q"]), ptr(cs["k"]), ptr(cs["v"]), ptr(o),
                                         ptr(lse), stream))
                    if fn() != 0:
                        raise RuntimeError("attnpf_run failed")
                    torch.cuda.synchronize()
                    e = dict(nan=bool(torch.isnan(o).any().item() or torch.isnan(lse).any().item()))
                    if ref is None:
                        ref = o.clone()
                    else:
                        e["rel_l2_vs_first"] = bp.rel_l2(o, ref)
                    row["variants"][name] = e
                    timed.append((name, fn))
                except Exception as ex:
                    row["variants"][name] = dict(error=repr(ex)[:300])
            for be in [b for b in a.fi.split(",") if b]:
                if shape.get("hq", 32) != 32 or ("fm" in shape and be == "fa3"):
                    continue  # FA3 takes no custom mask
                try:
                    import flashinfer
                    w = fi_wrapper(flashinfer, shape, cs, be)
                    fn = lambda w=w: w.run(cs["q"], (cs["k"], cs["v"]))
                    o = fn()
                    torch.cuda.synchronize()
                    e = {}
                    if ref is not None:
                        e["rel_l2_vs_first"] = bp.rel_l2(o, ref)
                    row["variants"]["fi_" + be] = e
                    timed.append(("fi_" + be, fn))
                except Exception as ex:
                    row["variants"]["fi_" + be] = dict(error=repr(ex)[:300])
            if not a.profile and timed:
                for name, ms in time_interleaved(timed, a.reps).items():
                    row["variants"][name].update(ms=ms, tflops=flops / ms / 1e9)
        finally:
            for lib, h in handles:
                lib.attnpf_free(h)
        rows.append(row)
        print(shape["name"], json.dumps(row["variants"]), flush=True)
    if a.out:
        json.dump(dict(device=torch.cuda.get_device_name(0), variants=a.var, page=bp.P, rows=rows),
                  open(os.path.join(a.out, "prefill_ab.json"), "w"), indent=1)
    if not a.profile:
        names = [v[0] for v in variants] + ["fi_" + b for b in a.fi.split(",") if b]
        print("shape                      " + " ".join("%-18s" % n for n in names))
        for r in rows:
            cell = lambda n: ("%.3f ms %3.0f TF" % (r["variants"][n]["ms"],
                                                   r["variants"][n]["tflops"])
                              if "ms" in r["variants"].get(n, {}) else "-")
            print("%-26s " % r["shape"] + " ".join("%-18s" % cell(n) for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Paged decode benchmark on one GPU: attnd's kernels (via ctypes on
libattn_cuda_bench.so), FlashInfer's BatchDecodeWithPagedKVCacheWrapper,
PyTorch SDPA (cuDNN backend) on the same K/V laid out contiguously, and
gather-then-SDPA, all in one process on the same random data.

Every peer is timed the same way: N calls captured in one CUDA graph,
replayed R times, median per call (CUDA events).  Effective TB/s counts
the unique K/V bytes (sum of lengths x H_kv x d x 2 tensors x 2 bytes).
Writes <out>/decode-h200-<date>.json and .md.
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
SHAPES = [
    dict(name="B1_T32768", B=1, T=32768),
    dict(name="B1_T131072", B=1, T=131072),
    dict(name="B4_T16384", B=4, T=16384),
    dict(name="B16_T8192", B=16, T=8192),
    dict(name="B64_T4096", B=64, T=4096),
    dict(name="B128_T8192", B=128, T=8192),
    dict(name="B256_T2048", B=256, T=2048),
    dict(name="ragged64_256-16384", B=64, ragged=(256, 16384)),
    dict(name="group16_B8_T16384", B=8, T=16384, hq=64, hkv=4),
    dict(name="d256_B32_T4096", B=32, T=4096, d=256),
    # issue 13: shapes a new user tries beyond the list above
    dict(name="mha_B16_T4096", B=16, T=4096, hq=32, hkv=32),
    dict(name="g8_B64_T4096", B=64, T=4096, hq=8, hkv=1),
    dict(name="d64_B64_T2048", B=64, T=2048, hq=16, hkv=4, d=64),
    dict(name="P1_B16_T8192", B=16, T=8192, P=1),
    dict(name="P64_B16_T8192", B=16, T=8192, P=64),
    dict(name="B2_T2048", B=2, T=2048),
    dict(name="B32_T1024", B=32, T=1024),
]
# HND pages ([H_kv][P][d] per page: one head's rows of a page contiguous), run only when
# named in --shapes: is a peer's lead at a shape the NHD interleave of heads inside a row?
HND_SHAPES = [dict(s, name=s["name"] + "_hnd", layout="HND") for s in SHAPES
              if s["name"] in ("d64_B64_T2048", "B64_T4096", "B1_T32768", "B2_T2048",
                               "B16_T8192", "g8_B64_T4096")]
# Pages in physical order (request after request, page after page) instead of a random
# permutation, run only when named in --shapes: how much of a contiguous-K/V peer's lead is
# the DRAM locality of the page order rather than the kernel?
SEQ_SHAPES = [dict(s, name=s["name"] + "_seq", order="seq") for s in SHAPES
              if s["name"] in ("d64_B64_T2048", "P1_B16_T8192", "B1_T32768", "g8_B64_T4096",
                               "B64_T4096", "B2_T2048")]
# d = 64 beyond the list's one shape (H_q 16, H_kv 4), run only when named in --shapes: its
# pipeline depth is chosen on d64_B64_T2048 (docs/cuda.md round 8), checked here at long and
# short contexts and at a large batch
D64_SHAPES = [dict(name="d64_B1_T32768", B=1, T=32768, hq=16, hkv=4, d=64),
              dict(name="d64_B4_T16384", B=4, T=16384, hq=16, hkv=4, d=64),
              dict(name="d64_B16_T8192", B=16, T=8192, hq=16, hkv=4, d=64),
              dict(name="d64_B256_T2048", B=256, T=2048, hq=16, hkv=4, d=64),
              dict(name="d64_B2_T2048", B=2, T=2048, hq=16, hkv=4, d=64)]
# 2026-12-02d: d = 256 beyond the one list shape (keys as rows on the four row-copy warps)
D256_SHAPES = [dict(name="d256_B1_T32768", B=1, T=32768, d=256),
               dict(name="d256_B8_T8192", B=8, T=8192, d=256),
               dict(name="d256_B128_T2048", B=128, T=2048, d=256)]
EXTRA_SHAPES = HND_SHAPES + SEQ_SHAPES + D64_SHAPES + D256_SHAPES
POLICIES = {"fa": 1, "fi": 2, "global": 3}
QUICK = False  # --quick: fewer attnd configurations (set by main)
ATTND_RUNS = []  # --attnd: named attnd runs (NAMED_RUNS) instead of the default list
# issue 13 round 3: the FI policy with the fused fold (the benchmark's attnd column since round 1)
# and with the reducer kernel (the engine's default, fused_merge 0), each with the engine's
# programmatic launch (late trigger, the default), the early trigger and none
NAMED_RUNS = {
    "fi": {},
    "fi_pdl_early": dict(pdl=1),
    "fi_nopdl": dict(pdl=0),
    "fi_reducer": dict(fused=False),
    "fi_reducer_nopdl": dict(fused=False, pdl=0),
    "fi_nobulk": dict(bulk=0),
    "fi_tmap": dict(bulk=8),
    # issue 13 round 4: persistent CTAs (grid capacity), and the copy-warp producers at P1 / d 64
    "fi_persist": dict(persist=-1),
    "fi_bulk1": dict(bulk=1),
    "fi_bulk4": dict(bulk=4),
    # 2026-12-01 late: pipeline depth per shape (d 64: 3 stages fit 4 CTAs of 127 registers per SM)
    "fi_st2": dict(stages=2),
    "fi_st3": dict(stages=3),
    "fi_st4": dict(stages=4),
    "fi_st5": dict(stages=5),
    "fi_st6": dict(stages=6),
    # 2026-12-02: the tensor-map and copy-warp producers at d 64 / P 64 by pipeline depth
    "fi_tmap_st2": dict(bulk=8, stages=2),
    "fi_tmap_st4": dict(bulk=8, stages=4),
    "fi_tmap_st6": dict(bulk=8, stages=6),
    "fi_bulk4_st4": dict(bulk=4, stages=4),
    # 2026-12-02 (after the shared-memory alignment fix): each producer and depth again, d 256's
    # copy-warp and tensor-map depths, the shortest split at the short contexts
    "fi_tmap_st3": dict(bulk=8, stages=3),
    "fi_bulk4_st2": dict(bulk=4, stages=2),
    "fi_bulk4_st3": dict(bulk=4, stages=3),
    "fi_bulk2": dict(bulk=2),
    # 2026-12-02e: the tensor-map copies' L2 policy forced (default: evict_first where the K/V
    # exceed the L2)
    "fi_l2off": dict(l2=0),
    "fi_l2on": dict(l2=1),
    "fi_mc128": dict(min_chunk=128),
    "fi_mc512": dict(min_chunk=512),
    "fi_mc1024": dict(min_chunk=1024),
    "fi_st4_mc512": dict(stages=4, min_chunk=512),
    # the engine's cap of 32 splits per request off (main before 2026-12-02 round 8)
    "fi_nocap": dict(fi_max_splits=0),
    "fi_nocap_st4": dict(fi_max_splits=0, stages=4),
    # d 64 at small batches: the copy-warp producers with the cap and without it
    "fi_tmap_nocap": dict(bulk=8, fi_max_splits=0),
    "fi_bulk4_nocap": dict(bulk=4, fi_max_splits=0),
    # the split policy filling 2 or 3 grid capacities (more, shorter splits) now that the fold is cheap
    "fi_w2": dict(waves=2),
    "fi_w3": dict(waves=3),
    # 2026-12-02c: the per-SM rate on a quarter of the SMs (MPS): the cp.async producer by depth
    "fi_nobulk_st2": dict(bulk=0, stages=2),
    "fi_nobulk_st4": dict(bulk=0, stages=4),
    "fi_nobulk_st6": dict(bulk=0, stages=6),
}
OLD_LIB = None  # --old: the benchmark library of the kernel before issue 13


def log(*a):
    print(*a, flush=True)


def page_size(shape):
    """Page size of a shape (16 unless it says otherwise)."""
    return shape.get("P", P)


def nhd(bt, x):
    """The pool x of a batch as [pages, P, H_kv, d] (a view when the layout is HND)."""
    return x.transpose(1, 2) if bt.get("layout") == "HND" else x


def load_lib(path):
    lib = ctypes.CDLL(path)
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    lib.attnb_create.restype = vp
    lib.attnb_create.argtypes = [u32, vp, vp, vp, u32, u32, u32, u32, u32, u32, u32, u32, u32,
                                 u32, ctypes.c_int64]
    lib.attnb_run.restype = ctypes.c_int
    lib.attnb_run.argtypes = [vp, vp, vp, vp, vp, vp, vp]
    lib.attnb_update.restype = ctypes.c_int
    lib.attnb_update.argtypes = [vp, vp, vp, vp]
    lib.attnb_info.argtypes = [vp, vp]
    lib.attnb_destroy.argtypes = [vp]
    lib.attnb_set_simt.argtypes = [vp, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.attnb_set_waves.argtypes = [u32]
    lib.attnb_set_fused.argtypes = [ctypes.c_int]
    if hasattr(lib, "attnb_set_stages"):  # absent in libraries built before issue 13
        lib.attnb_set_stages.argtypes = [u32]
        lib.attnb_set_wave_model.argtypes = [ctypes.c_int64, ctypes.c_int64]
        lib.attnb_reset_wave_model.argtypes = []
    if hasattr(lib, "attnb_set_bulk"):  # absent before the copy-warp producer (issue 13, round 2)
        lib.attnb_set_bulk.argtypes = [ctypes.c_int]
    if hasattr(lib, "attnb_set_tmap_l2"):
        lib.attnb_set_tmap_l2.argtypes = [ctypes.c_void_p, ctypes.c_int]
    if hasattr(lib, "attnb_set_l2_evict_first"):  # absent before 2026-12-02e
        lib.attnb_set_l2_evict_first.argtypes = [ctypes.c_int]
    if hasattr(lib, "attnb_set_persist"):  # absent before issue 13 round 4
        lib.attnb_set_persist.argtypes = [ctypes.c_void_p, ctypes.c_int]
    if hasattr(lib, "attnb_set_probe"):  # absent before 2026-12-01 late
        lib.attnb_set_probe.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
        lib.attnb_set_probe_phases.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    if hasattr(lib, "attnb_set_pdl"):  # absent before issue 13 round 3
        lib.attnb_set_pdl.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.attnb_set_min_chunk.argtypes = [ctypes.c_int64]
    if hasattr(lib, "attnb_set_fi_max_splits"):  # absent before 2026-12-02 round 8
        lib.attnb_set_fi_max_splits.argtypes = [ctypes.c_int64]
    return lib


def i32ptr(t):
    assert t.dtype == torch.int32 and t.device.type == "cpu" and t.is_contiguous()
    return ctypes.c_void_p(t.data_ptr())


class Attnd:
    def __init__(self, lib, lens, indptr, indices, hq, hkv, d, policy, graph_splits=0, abi=0,
                 simt=False, heads_fast=True, waves=1, prefetch=True, fused=True, page=P,
                 stages=None, wave_model=None, bulk=None, pool=0, tmap_l2=None, pdl=None,
                 min_chunk=None, persist=None, layout=0, fi_max_splits=None, l2=None):
        self.lib = lib
        if l2 is not None:
            lib.attnb_set_l2_evict_first(int(l2))
        if min_chunk is not None:
            lib.attnb_set_min_chunk(int(min_chunk))
        if fi_max_splits is not None:
            lib.attnb_set_fi_max_splits(int(fi_max_splits))
        if bulk is not None:
            lib.attnb_set_bulk(int(bulk))
        if stages is not None:
            lib.attnb_set_stages(stages)
        if wave_model is not None:
            lib.attnb_set_wave_model(*wave_model)
        lib.attnb_set_fused(int(fused))  # process-wide, kept until close()
        self.lens, self.indptr, self.indices = lens.int(), indptr.int(), indices.int()
        lib.attnb_set_waves(waves)
        self.h = lib.attnb_create(len(lens), i32ptr(self.lens), i32ptr(self.indptr),
                                  i32ptr(self.indices), hq, hkv, d, page, layout, 2, 2, policy, abi,
                                  graph_splits, pool)
        if stages is not None:
            lib.attnb_set_stages(0)
        if wave_model is not None:
            lib.attnb_reset_wave_model()
        if bulk is not None:
            lib.attnb_set_bulk(-1)  # back to the engine's default
        if min_chunk is not None:
            lib.attnb_set_min_chunk(-1)
        if fi_max_splits is not None:
            lib.attnb_set_fi_max_splits(-1)  # back to the engine's cap
        if l2 is not None:
            lib.attnb_set_l2_evict_first(-1)  # back to the engine's rule
        if not self.h:
            raise RuntimeError("attnb_create failed")
        lib.attnb_set_waves(1)
        lib.attnb_set_simt(self.h, 1 if simt else 0, 1 if heads_fast else 0, 1 if prefetch else 0)
        if tmap_l2 is not None:
            lib.attnb_set_tmap_l2(self.h, tmap_l2)
        if pdl is not None:
            lib.attnb_set_pdl(self.h, int(pdl))
        if persist is not None:
            lib.attnb_set_persist(self.h, int(persist))
        info = (ctypes.c_uint32 * 4)()
        lib.attnb_info(self.h, info)
        self.info = dict(items=info[0], slots=info[1], ctas_per_sm=info[2], grid_capacity=info[3],
                         fused_merge=bool(fused and not simt))

    def update(self, lens, indptr, indices):
        self.lens, self.indptr, self.indices = lens.int(), indptr.int(), indices.int()
        rv = self.lib.attnb_update(self.h, i32ptr(self.lens), i32ptr(self.indptr),
                                   i32ptr(self.indices))
        if rv != 0:
            raise RuntimeError(f"attnb_update {rv}")

    def run(self, q, k, v, o, lse):
        rv = self.lib.attnb_run(self.h, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                lse.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if rv != 0:
            raise RuntimeError(f"attnb_run {rv}")

    def close(self):
        self.lib.attnb_destroy(self.h)
        self.lib.attnb_set_fused(1)


def time_fn(fn, iters=20, reps=9):
    """Median microseconds per call: `iters` calls in one CUDA graph."""
    fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                fn()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0.record()
            g.replay()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1000.0 / iters)
        del g
        return statistics.median(ts), "cuda_graph"
    except Exception as ex:  # some peer refuses capture: plain stream timing
        log("    graph capture failed, timing on the stream:", repr(ex)[:200])
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0.record()
            for _ in range(iters):
                fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1000.0 / iters)
        return statistics.median(ts), "stream_events"


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def make_batch(shape, gen):
    B = shape["B"]
    hq, hkv, d = shape.get("hq", 32), shape.get("hkv", 8), shape.get("d", 128)
    if "ragged" in shape:
        lo, hi = shape["ragged"]
        lens = torch.randint(lo, hi + 1, (B,), generator=gen, dtype=torch.int64)
    else:
        lens = torch.full((B,), shape["T"], dtype=torch.int64)
    P_ = page_size(shape)
    npages = (lens + P_ - 1) // P_
    need = int(npages.sum())
    pool = need + need // 16 + 8  # unused pages exist
    indptr = torch.zeros(B + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(npages, 0)
    if shape.get("order") == "seq":
        indices = torch.arange(need, dtype=torch.int64)  # physical order = logical order
    else:
        indices = torch.randperm(pool, generator=gen)[:need]  # random physical order
    last = lens - (npages - 1) * P_
    dev = "cuda"
    layout = shape.get("layout", "NHD")
    dims = (pool, hkv, P_, d) if layout == "HND" else (pool, P_, hkv, d)
    k = torch.randn(*dims, dtype=torch.bfloat16, device=dev)
    v = torch.randn(*dims, dtype=torch.bfloat16, device=dev)
    q = torch.randn(B, hq, d, dtype=torch.bfloat16, device=dev)
    return dict(B=B, hq=hq, hkv=hkv, d=d, lens=lens, indptr=indptr, indices=indices, last=last,
                k=k, v=v, q=q, pool=pool, P=P_, layout=layout)


def ref_decode(bt):
    """fp32 reference over the first few requests (gathered through the page table)."""
    outs = []
    g = bt["hq"] // bt["hkv"]
    for b in range(min(bt["B"], 4)):
        pg = bt["indices"][bt["indptr"][b]:bt["indptr"][b + 1]].cuda()
        L = int(bt["lens"][b])
        K = nhd(bt, bt["k"])[pg].reshape(-1, bt["hkv"], bt["d"])[:L].float()
        V = nhd(bt, bt["v"])[pg].reshape(-1, bt["hkv"], bt["d"])[:L].float()
        qb = bt["q"][b].float().view(bt["hkv"], g, bt["d"])
        s = torch.einsum("hgd,lhd->hgl", qb, K) / math.sqrt(bt["d"])
        p = torch.softmax(s, -1)
        outs.append(torch.einsum("hgl,lhd->hgd", p, V).reshape(bt["hq"], bt["d"]))
    return torch.stack(outs)


def bench_shape(lib, shape, fi, gen, res):
    bt = make_batch(shape, gen)
    B, hq, hkv, d = bt["B"], bt["hq"], bt["hkv"], bt["d"]
    kv_bytes = int(bt["lens"].sum()) * hkv * d * 2 * 2
    row = dict(shape=shape["name"], B=B, hq=hq, hkv=hkv, d=d, page_size=bt["P"], layout=bt["layout"],
               page_order=shape.get("order", "random"),
               sum_len=int(bt["lens"].sum()), kv_bytes=kv_bytes, peers={})
    ref = ref_decode(bt)
    q, k, v = bt["q"], bt["k"], bt["v"]

    # attnd: every split policy (tensor cores), and the CUDA-core producer
    runs = [(p, pid, {}) for p, pid in POLICIES.items()] + [
        ("fi_simt", 2, dict(simt=True)), ("fi_reducer", 2, dict(fused=False))]
    if QUICK:  # the final device call: the engine's path, the wave model off, today's kernel
        runs = [("fi", 2, {}), ("fi_nobulk", 2, dict(bulk=0)), ("fi_bulk4", 2, dict(bulk=4)),
                ("fi_tmap", 2, dict(bulk=8))]
    if ATTND_RUNS:  # --attnd: these named runs only
        runs = [(n, 2, dict(NAMED_RUNS[n])) for n in ATTND_RUNS]
    if OLD_LIB is not None:
        runs.append(("old", 2, dict(lib=OLD_LIB)))
        runs.append(("old_reducer", 2, dict(lib=OLD_LIB, fused=False)))
    first = None  # the first run's O and LSE: which runs give the same bytes
    for pname, pid, kw in runs:
        try:
            kw = dict(kw)
            a = Attnd(kw.pop("lib", lib), bt["lens"], bt["indptr"], bt["indices"], hq, hkv, d, pid, page=bt["P"],
                      pool=bt["pool"], layout=int(bt["layout"] == "HND"), **kw)
            o = torch.full((B, hq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
            lse = torch.full((B, hq), float("nan"), dtype=torch.float32, device="cuda")
            a.run(q, k, v, o, lse)
            torch.cuda.synchronize()
            err = rel_l2(o[:ref.shape[0]], ref)
            nan = bool(torch.isnan(o).any().item() or torch.isnan(lse).any().item())
            if first is None:
                first = (o.clone(), lse.clone())
            same = bool(torch.equal(o, first[0]) and torch.equal(lse, first[1]))
            us, how = time_fn(lambda: a.run(q, k, v, o, lse))
            row["peers"][f"attnd_{pname}"] = dict(us=us, tbps=kv_bytes / us / 1e6, rel_l2=err,
                                                  nan=nan, bitwise_equal_first=same, timing=how,
                                                  **a.info)
            a.close()
        except Exception as ex:
            row["peers"][f"attnd_{pname}"] = dict(error=repr(ex)[:300])
            traceback.print_exc()

    # FlashInfer: its CUDA-core decode (default) and its tensor-core path
    fi_paths = (("flashinfer", False), ("flashinfer_tc", True))
    for label, tc in fi_paths[1:] if QUICK else fi_paths:  # --quick: the tensor-core peer only
        if fi is None:
            break
        try:
            ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
            w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, bt["layout"], use_tensor_cores=tc)
            w.plan(bt["indptr"].int().cuda(), bt["indices"].int().cuda(), bt["last"].int().cuda(),
                   hq, hkv, d, bt["P"], q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
            o_fi = w.run(q, (k, v))
            torch.cuda.synchronize()
            err = rel_l2(o_fi[:ref.shape[0]], ref)
            us, how = time_fn(lambda: w.run(q, (k, v)))
            row["peers"][label] = dict(us=us, tbps=kv_bytes / us / 1e6, rel_l2=err, timing=how)
            del w, ws
        except Exception as ex:
            row["peers"][label] = dict(error=repr(ex)[:300])
            log("   ", label, "failed:", repr(ex)[:300])

    # SDPA (cuDNN) on contiguous K/V, and gather-then-SDPA (uniform lengths only)
    if "ragged" not in shape:
        T = shape["T"]
        from torch.nn.attention import SDPBackend, sdpa_kernel
        pg = bt["indices"].cuda()
        Kc = nhd(bt, k)[pg].reshape(B, T, hkv, d).transpose(1, 2).contiguous()
        Vc = nhd(bt, v)[pg].reshape(B, T, hkv, d).transpose(1, 2).contiguous()
        q4 = q.view(B, hq, 1, d)

        def sdpa(Kx, Vx):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q4, Kx, Vx, enable_gqa=True)

        for label, fn in (("sdpa_cudnn_contiguous", lambda: sdpa(Kc, Vc)),
                          ("gather_then_sdpa_cudnn", lambda: sdpa(
                              nhd(bt, k)[pg].reshape(B, T, hkv, d).transpose(1, 2),
                              nhd(bt, v)[pg].reshape(B, T, hkv, d).transpose(1, 2))))[:1 if QUICK else 2]:
            try:
                o_s = fn()
                torch.cuda.synchronize()
                err = rel_l2(o_s.view(B, hq, d)[:ref.shape[0]], ref)
                us, how = time_fn(fn)
                row["peers"][label] = dict(us=us, tbps=kv_bytes / us / 1e6, rel_l2=err, timing=how)
            except Exception as ex:
                row["peers"][label] = dict(error=repr(ex)[:300])
                log("   ", label, "failed:", repr(ex)[:200])
        del Kc, Vc
    best = min((p for p in POLICIES if "us" in row["peers"].get(f"attnd_{p}", {})),
               key=lambda p: row["peers"][f"attnd_{p}"]["us"], default=None)
    row["attnd_best_policy"] = best
    res["shapes"].append(row)
    log(f"  {row['shape']:>22}: " + "  ".join(
        f"{n}={p['us']:.1f}us/{p['tbps']:.2f}TB/s" if "us" in p else f"{n}=ERR"
        for n, p in row["peers"].items()))
    del bt
    torch.cuda.empty_cache()


def bench_graph(lib, gen, res, layers=32, B=16, T=8192, hq=32, hkv=8, d=128):
    """A 32-layer decode step captured as one CUDA graph; then lengths change
    inside the capacity envelope and the same graph replays correctly."""
    out = dict(layers=layers, B=B, T=T)
    cap_pages = T // P
    indptr = torch.arange(0, (B + 1) * cap_pages, cap_pages, dtype=torch.int64)
    pool = B * cap_pages + 8
    indices = torch.randperm(pool, generator=gen)[:B * cap_pages]
    ks = [torch.randn(pool, P, hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    vs = [torch.randn(pool, P, hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    q = torch.randn(B, hq, d, dtype=torch.bfloat16, device="cuda")
    os_ = [torch.empty(B, hq, d, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    lse = torch.empty(B, hq, dtype=torch.float32, device="cuda")
    lens = torch.full((B,), T, dtype=torch.int64)
    # graph mode: fixed grid, FIXED splits per request, identity slots
    splits = 16
    a = Attnd(lib, lens, indptr, indices, hq, hkv, d, 4, graph_splits=splits, pool=pool)
    single, _ = time_fn(lambda: a.run(q, ks[0], vs[0], os_[0], lse))
    def step():
        for l in range(layers):
            a.run(q, ks[l], vs[l], os_[l], lse)
    step()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(9):
        e0.record(); g.replay(); e1.record(); e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000.0)
    step_us = statistics.median(ts)
    out.update(single_layer_us=single, step_us=step_us, per_layer_us=step_us / layers,
               per_layer_overhead_us=step_us / layers - single, splits=splits)
    # lengths change; the captured graph replays with the refreshed plan
    errs = []
    for trial in range(3):
        new = torch.randint(1, T + 1, (B,), generator=gen, dtype=torch.int64)
        a.update(new, indptr, indices)
        for o in os_:
            o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        bt = dict(B=B, hq=hq, hkv=hkv, d=d, lens=new, indptr=indptr, indices=indices,
                  k=ks[layers - 1], v=vs[layers - 1], q=q)
        ref = ref_decode(bt)
        errs.append(rel_l2(os_[layers - 1][:ref.shape[0]], ref))
        out.setdefault("nan_after_update", False)
        out["nan_after_update"] |= bool(torch.isnan(os_[layers - 1]).any().item())
    out["rel_l2_after_length_change"] = errs
    a.close()
    res["graph"] = out
    log("  graph:", json.dumps(out))
    del ks, vs
    torch.cuda.empty_cache()


def write_md(res, path):
    L = [f"# attnd paged decode on {res['device']} ({res['date']})", "",
         f"Command: `{res['command']}`", "",
         f"torch {res['torch']}, flashinfer {res.get('flashinfer_version')}, cuda {res['cuda']}. "
         "Median per call of 20 calls captured in one CUDA graph, 9 replays; TB/s = unique K/V "
         "bytes / time. bf16, page 16, NHD, random page permutation.", ""]
    peers = ["attnd", "flashinfer", "sdpa_cudnn_contiguous", "gather_then_sdpa_cudnn"]
    L.append("| shape | attnd µs | attnd TB/s | policy | FI µs | FI TB/s | ×FI | FI-TC µs | ×FI-TC | "
             "cuDNN µs | cuDNN TB/s | ×cuDNN | gather+SDPA µs | ×gather | attnd FA/FI/GLOBAL µs | "
             "attnd CUDA-core µs | cp.async producer µs | ×cp.async | before µs | ×before | rel L2 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res["shapes"]:
        pol = r.get("attnd_default_policy") or r.get("attnd_best_policy")
        a = r["peers"].get(f"attnd_{pol}", {})
        def cell(name):
            p = r["peers"].get(name, {})
            if "us" not in p:
                return ("n/a", "n/a", "n/a")
            return (f"{p['us']:.1f}", f"{p['tbps']:.2f}",
                    f"{p['us'] / a['us']:.2f}" if "us" in a else "n/a")
        fi, cd, ga = cell("flashinfer"), cell("sdpa_cudnn_contiguous"), cell("gather_then_sdpa_cudnn")
        ft, sm, od = cell("flashinfer_tc"), cell("attnd_fi_simt"), cell("attnd_old")
        nb = cell("attnd_fi_nobulk")
        pols = "/".join(f"{r['peers'].get('attnd_' + p, {}).get('us', float('nan')):.1f}"
                        for p in POLICIES)
        L.append(f"| {r['shape']} | {a.get('us', float('nan')):.1f} | {a.get('tbps', float('nan')):.2f} | "
                 f"{pol} | {fi[0]} | {fi[1]} | {fi[2]} | {ft[0]} | {ft[2]} | {cd[0]} | {cd[1]} | {cd[2]} | "
                 f"{ga[0]} | {ga[2]} | {pols} | {sm[0]} | {nb[0]} | {nb[2]} | {od[0]} | {od[2]} | "
                 f"{a.get('rel_l2', float('nan')):.1e} |")
    L.append("")
    L.append("×peer = peer time / attnd time (above 1 means attnd is faster).")
    for k in ("summary", "graph", "errors"):
        if k in res:
            L += ["", f"## {k}", "", "```", json.dumps(res[k], indent=1), "```"]
    open(path, "w").write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="attnd: FI fused, FI reducer, FI without the wave model only")
    ap.add_argument("--old", default="", help="also time this older libattn_cuda_bench.so")
    ap.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    ap.add_argument("--no-flashinfer", action="store_true", help="skip FlashInfer (its JIT)")
    ap.add_argument("--attnd", default="", help="comma-separated attnd runs (NAMED_RUNS)")
    args = ap.parse_args()
    global QUICK, OLD_LIB, ATTND_RUNS
    QUICK = args.quick
    ATTND_RUNS = [x for x in args.attnd.split(",") if x]
    torch.manual_seed(int(time.time()))
    gen = torch.Generator().manual_seed(int(time.time()))
    lib = load_lib(args.lib)
    if args.old:
        OLD_LIB = load_lib(args.old)
    date = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None).strftime("%Y-%m-%d")
    res = dict(date=datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None).isoformat() + "Z",
               device=torch.cuda.get_device_name(0), torch=torch.__version__,
               cuda=torch.version.cuda, command=" ".join(sys.argv), shapes=[], errors=[])
    fi = None
    try:
        if args.no_flashinfer:
            raise ImportError("--no-flashinfer")
        import flashinfer
        fi = flashinfer
        res["flashinfer_version"] = getattr(flashinfer, "__version__", "?")
    except Exception as ex:
        res["errors"].append("import flashinfer: " + repr(ex)[:500])
        traceback.print_exc()
    log("device", res["device"], "flashinfer", res.get("flashinfer_version"))
    for sh in SHAPES + EXTRA_SHAPES:
        if sh in EXTRA_SHAPES and sh["name"] not in args.shapes.split(","):
            continue  # HND and page-order variants: only when named
        if args.only and args.only not in sh["name"]:
            continue
        if args.shapes and sh["name"] not in args.shapes.split(","):
            continue
        t0 = time.time()
        try:
            bench_shape(lib, sh, fi, gen, res)
        except Exception as ex:
            res["errors"].append(f"{sh['name']}: {ex!r}"[:500])
            traceback.print_exc()
        log(f"    ({time.time() - t0:.1f}s)")
        # after every shape, so a run cut by its time limit keeps what it measured
        part = os.path.join(args.out, f"decode-h200-{date}.partial.json")
        json.dump(res, open(part, "w"), indent=1)
    # the default policy: best geometric mean over all shapes
    geo = {}
    for p in POLICIES:
        xs = [r["peers"].get(f"attnd_{p}", {}).get("us") for r in res["shapes"]]
        xs = [x for x in xs if x]
        if xs and len(xs) == len(res["shapes"]):
            geo[p] = math.exp(sum(math.log(x) for x in xs) / len(xs))
    default = min(geo, key=geo.get) if geo else None
    summ = dict(policy_geomean_us=geo, default_policy=default)
    for r in res["shapes"]:
        r["attnd_default_policy"] = default
    if default:
        ratios = {}
        for peer in ("flashinfer", "flashinfer_tc", "sdpa_cudnn_contiguous", "gather_then_sdpa_cudnn",
                     "attnd_fi_simt", "attnd_fi_reducer", "attnd_fi_nowave", "attnd_fi_nobulk",
                     "attnd_fi_bulk1", "attnd_fi_bulk4", "attnd_fi_tmap", "attnd_fi_persist",
                     "attnd_fi_pdl_early", "attnd_fi_nopdl", "attnd_fi_reducer_nopdl", "attnd_old",
                     "attnd_old_reducer"):
            xs = [(r["peers"][peer]["us"] / r["peers"][f"attnd_{default}"]["us"], r["B"])
                  for r in res["shapes"] if "us" in r["peers"].get(peer, {})
                  and "us" in r["peers"].get(f"attnd_{default}", {})]
            if xs:
                ratios[peer] = dict(min=min(x for x, _ in xs),
                                    geomean=math.exp(sum(math.log(x) for x, _ in xs) / len(xs)),
                                    geomean_B_le_4=(math.exp(sum(math.log(x) for x, b in xs if b <= 4)
                                                    / max(1, sum(1 for _, b in xs if b <= 4)))))
        summ["ratios_vs_attnd_default"] = ratios
    res["summary"] = summ
    log("summary", json.dumps(summ))
    if not args.no_graph:
        try:
            bench_graph(lib, gen, res)
        except Exception as ex:
            res["errors"].append(f"graph: {ex!r}"[:500])
            traceback.print_exc()
    base = os.path.join(args.out, f"decode-h200-{date}")
    json.dump(res, open(base + ".json", "w"), indent=1)
    if os.path.exists(base + ".partial.json"):
        os.remove(base + ".partial.json")
    write_md(res, base + ".md")
    log("wrote", base + ".json", base + ".md")
    # compact table last (the device reply carries the end of the output)
    cols = ["attnd_fi", "attnd_fi_persist", "attnd_fi_pdl_early", "attnd_fi_nopdl",
            "attnd_fi_reducer_nopdl", "attnd_fa", "attnd_global", "attnd_fi_reducer", "attnd_fi_simt",
            "attnd_fi_nowave", "attnd_fi_nobulk", "attnd_fi_bulk1", "attnd_fi_bulk4", "attnd_fi_tmap",
            "attnd_old", "attnd_old_reducer",
            "flashinfer", "flashinfer_tc", "sdpa_cudnn_contiguous", "gather_then_sdpa_cudnn"]
    log("us: " + " ".join(c.replace("attnd_", "").replace("sdpa_cudnn_contiguous", "cudnn")
                          .replace("gather_then_sdpa_cudnn", "gather") for c in cols))
    for r in res["shapes"]:
        log(f"{r['shape'][:18]:>18} " + " ".join(
            f"{r['peers'].get(c, {}).get('us', float('nan')):.1f}" for c in cols))
    if "graph" in res:
        g = res["graph"]
        log("graph per-layer overhead us", round(g.get("per_layer_overhead_us", float("nan")), 2),
            "rel_l2 after change", [round(x, 5) for x in g.get("rel_l2_after_length_change", [])],
            "nan", g.get("nan_after_update"))


if __name__ == "__main__":
    main()

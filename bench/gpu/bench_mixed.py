#!/usr/bin/env python3
"""Mixed batches on the H200 (issue 12): attnd's cuda_prefill engine under each
policy.schedule (unified, partition, auto; partition also forked onto two
streams in either launch order, the prefill grid capped or not:
ATTN_MIXED_STREAMS / ATTN_MIXED_PREFILL_CTAS, read at engine init, so each
variant is its own engine instance) against FlashInfer's partitioned
path (BatchPrefillWithPagedKVCacheWrapper for the prefill/append rows +
BatchDecodeWithPagedKVCacheWrapper with tensor cores for the decodes, one
stream), FlashInfer BatchAttention (its unified persistent kernel), and
FlashInfer BatchPOD / POD where they admit the batch, in one process on the
same pages.

bf16, H_q 32, H_kv 8, d 128, page 16 (NHD, CSR, shuffled pages), causal.
attnd's time is the engine's own CUDA events (the append of the new rows and
the attention kernels; the pool is restored after each run, commit false);
the peers' time is CUDA events around their run() calls (attention only; the
new rows are already in the pages, which hold exactly the rows attnd
appends).  Median of 15 after 3 warm-ups.  Floor = max(visible FLOPs / 989
TFLOP/s, K/V bytes / 4.8 TB/s).  Usage (device, from the staged folder):
    python3 bench/gpu/bench_mixed.py --out $OUT
"""
import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys
import time
import traceback

import torch

HQ, HKV, D, P = 32, 8, 128, 16
SCHED = {"auto": 0, "partition": 1, "unified": 2, "overlap": 3}
# attnd's variants: name -> (policy.schedule, ATTN_MIXED_STREAMS, ATTN_MIXED_PREFILL_CTAS);
# the forked ones only on batches with both kernel families
VARIANTS = [
    ("unified", "unified", None, None),
    ("unified_snake", "unified", None, None),  # the snake unit walk (ATTN_PREFILL_WALK=snake)
    ("partition", "partition", None, None),
    ("auto", "auto", None, None),
    # overlap's trials (refused by default): the light prefill kernel (one CTA
    # per SM) and the decode kernels on a second stream beside it
    # (ATTN_MIXED_OVERLAP=1), and the fused kernel, prefill and decode roles
    # in one CTA per SM, one launch (ATTN_MIXED_OVERLAP=fused); on a batch of
    # one family, that family alone
    ("overlap", "overlap", None, None),
    ("ovl_fused", "overlap", None, None),
    ("part_pf", "partition", "prefill-first", None),
    ("part_pf_c120", "partition", "prefill-first", "120"),
    ("part_pf_c112", "partition", "prefill-first", "112"),
    ("part_pf_c96", "partition", "prefill-first", "96"),
    ("part_pf_c80", "partition", "prefill-first", "80"),
    ("part_pf_c66", "partition", "prefill-first", "66"),
    ("part_pf_c52", "partition", "prefill-first", "52"),
    ("part_serial", "partition", "serial", None),  # never forked (the cost model's other branch)
    ("part_df", "partition", "decode-first", None),
    ("part_df_c96", "partition", "decode-first", "96"),
    # the queue walk named explicitly (ATTN_PREFILL_WALK=queue), timed after the snake so an
    # A/B of the two walks brackets the snake with the default's two figures
    ("unified_queue", "unified", None, None),
]
FORKED = [v[0] for v in VARIANTS if v[2] not in (None, "serial")]
# the prefill kernel alone over a batch's prefill/append rows (prefill_glue.c),
# its persistent grid capped at each of these CTA counts (0: one per SM): the
# cost model's P(c), and M4's specialised prefill launch
KERNEL_CAPS = [0, 66, 80, 96, 112]
MASK_CAUSAL = 0
REPS = [15]  # timed runs after 3 warm-ups (--reps)
WALK = [None]  # the unit walk of every run that names none (--walk; None: the engine's default)


def log(*a):
    print(*a, flush=True)


def load_lib(path):
    lib = ctypes.CDLL(path)
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    lib.attnmx_create.restype = vp
    lib.attnmx_create.argtypes = [u32, vp, vp, vp, vp, vp, u32, u32, u32, u32, u32,
                                  ctypes.c_int, ctypes.c_int, vp, vp, ctypes.c_char_p,
                                  ctypes.c_size_t]
    lib.attnmx_run.restype = ctypes.c_int
    lib.attnmx_run.argtypes = [vp, vp, vp, vp, vp, vp, ctypes.POINTER(ctypes.c_double)]
    lib.attnmx_run_error.restype = ctypes.c_char_p
    lib.attnmx_run_error.argtypes = [vp]
    lib.attnmx_schedule.restype = ctypes.c_int
    lib.attnmx_schedule.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.attnmx_info.argtypes = [vp, vp]
    lib.attnmx_destroy.argtypes = [vp]
    lib.attnpf_create.restype = vp
    lib.attnpf_create.argtypes = [u32, vp, vp, vp, vp, vp, vp, u32, u32, u32, u32, u32,
                                  ctypes.c_int, vp, vp, vp, vp, ctypes.c_int, u32,
                                  ctypes.POINTER(ctypes.c_int)]
    lib.attnpf_run.restype = ctypes.c_int
    lib.attnpf_run.argtypes = [vp, vp, vp, vp, vp, vp, vp]
    lib.attnpf_free.argtypes = [vp]
    lib.attnpf_set_max_ctas.argtypes = [vp, u32]
    lib.attnpf_info.argtypes = [vp, vp]
    lib.attnmx_probe_run.restype = ctypes.c_int
    lib.attnmx_probe_run.argtypes = [vp, vp, vp, vp, vp, vp, vp, u32, u32]
    return lib


def prefill_kernel(lib, cs):
    """The prefill kernel alone over the case's requests (the new rows
    already in the pages, as the peers read them), one launch per call, at
    each cap of KERNEL_CAPS: name -> median ms."""
    B = cs["B"]
    T = torch.tensor(cs["T"], dtype=torch.int64)
    C = torch.tensor(cs["C"], dtype=torch.int64)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())
    rv = ctypes.c_int(0)
    h = lib.attnpf_create(B, ptr(T), ptr(C), ptr(cs["qo"]), ptr(cs["indptr"]), ptr(cs["indices"]),
                          ptr(cs["last"]), cs["num_pages"], P, HQ, HKV, D, MASK_CAUSAL, None,
                          None, None, None, 0, 0, ctypes.byref(rv))
    if not h:
        raise RuntimeError("attnpf_create failed: %d" % rv.value)
    try:
        q = cs["q"].cuda()
        o = torch.full_like(q, float("nan"))
        lse = torch.full((q.shape[0], HQ), float("nan"), dtype=torch.float32, device="cuda")
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        fn = lambda: lib.attnpf_run(h, ptr(q), ptr(cs["K"]), ptr(cs["V"]), ptr(o), ptr(lse),
                                    stream)
        info = (ctypes.c_uint64 * 8)()
        lib.attnpf_info(h, info)
        out = dict(items=int(info[0]), merges=int(info[1]))
        for cap in KERNEL_CAPS:
            lib.attnpf_set_max_ctas(h, cap)
            if fn() != 0:
                raise RuntimeError("attnpf_run failed at cap %d" % cap)
            torch.cuda.synchronize()
            nan = int(torch.isnan(o.float()).sum()) + int(torch.isnan(lse).sum())
            out["c%d" % (cap or 132)] = dict(ms=time_fn(fn), nan=nan)
        return out, o.cpu()
    finally:
        lib.attnpf_free(h)


def shapes(gen):
    def uni(lo, hi, n):
        return [int(x) for x in torch.randint(lo, hi + 1, (n,), generator=gen)]
    return [
        ("M1", [(t, 1024) for t in (0, 2048, 8192, 16384)], [2048] * 256),
        ("M2", [(0, 4096)], [8192] * 64),
        ("M3", [(t, 64) for t in uni(1024, 8192, 32)], uni(256, 16384, 128)),
        ("M5", [(0, 4096)], [4096] * 128),
        ("M4_decode", [], [4096] * 128),
        ("M4_prefill", [(0, 8192)], []),
        # prefill-only S 4096 (M2's and M5's prefill row): the light kernel
        # (overlap) against the full one (partition) alone
        ("M6_prefill4k", [(0, 4096)], []),
        # small steps (2026-12-02i): where a fork's fixed costs weigh most
        ("S1", [(0, 256), (1024, 256)], [1024] * 16),
        ("S2", [(2048, 128)], [2048] * 64),
        ("S3", [(0, 512)] * 4, [4096] * 32),
        ("S4", [(0, 1024)], [512] * 8),
    ]


def make_case(pre, dec, gen):
    reqs = list(pre) + [(t, 1) for t in dec]
    T = [r[0] for r in reqs]
    C = [r[1] for r in reqs]
    keys = [t + c for t, c in reqs]
    npg = [(k + P - 1) // P for k in keys]
    total = sum(npg) + 64
    perm = torch.randperm(total, generator=gen).to(torch.int32)
    indptr = [0]
    for n in npg:
        indptr.append(indptr[-1] + n)
    indices = perm[: indptr[-1]].contiguous()
    last = [k - (n - 1) * P for k, n in zip(keys, npg)]
    qo = [0]
    for c in C:
        qo.append(qo[-1] + c)
    dg = torch.Generator(device="cuda").manual_seed(int(torch.randint(1 << 30, (1,), generator=gen)))
    K = torch.randn(total, P, HKV, D, generator=dg, device="cuda", dtype=torch.bfloat16)
    V = torch.randn(total, P, HKV, D, generator=dg, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(qo[-1], HQ, D, generator=dg, device="cuda", dtype=torch.bfloat16).cpu()
    # the new rows are what the pages already hold at T .. T+C-1
    pos_page, pos_slot = [], []
    for b, (t, c) in enumerate(reqs):
        for i in range(t, t + c):
            pos_page.append(int(indices[indptr[b] + i // P]))
            pos_slot.append(i % P)
    pp = torch.tensor(pos_page, dtype=torch.long).cuda()
    ps = torch.tensor(pos_slot, dtype=torch.long).cuda()
    knew = K[pp, ps].contiguous().cpu()
    vnew = V[pp, ps].contiguous().cpu()
    i32 = lambda x: torch.tensor(x, dtype=torch.int32)
    cells = sum(c * t + c * (c + 1) // 2 for t, c in reqs)
    kv_bytes = sum(keys) * HKV * D * 2 * 2
    decode_kv_bytes = sum(keys[len(pre):]) * HKV * D * 2 * 2
    return dict(B=len(reqs), T=T, C=C, npre=len(pre), ndec=len(dec), qo=i32(qo),
                indptr=i32(indptr), indices=indices, last=i32(last), keys=i32(keys),
                num_pages=total, K=K, V=V, q=q, q_dev=q.cuda(), knew=knew, vnew=vnew,
                cells=cells, kv_bytes=kv_bytes, decode_kv_bytes=decode_kv_bytes)


def subset_case(cs, lo, hi):
    """Requests lo..hi-1 of a case on the same pages (the halves a forked
    run overlaps, timed alone for the calibration)."""
    qo, ip = cs["qo"], cs["indptr"]
    q0, q1, p0, p1 = int(qo[lo]), int(qo[hi]), int(ip[lo]), int(ip[hi])
    return dict(cs, B=hi - lo, T=cs["T"][lo:hi], C=cs["C"][lo:hi], qo=qo[lo:hi + 1] - q0,
                indptr=ip[lo:hi + 1] - p0, indices=cs["indices"][p0:p1].contiguous(),
                last=cs["last"][lo:hi].contiguous(), q=cs["q"][q0:q1].contiguous(),
                knew=cs["knew"][q0:q1].contiguous(), vnew=cs["vnew"][q0:q1].contiguous())


def run_variant(lib, cs, name, walk=None):
    """attnd under one variant: the stream setting in the environment while
    the engine instance is made (read at init), then restored; walk: the
    prefill kernel's unit walk (ATTN_PREFILL_WALK) where the variant names none."""
    _, sched, order, ctas = next(v for v in VARIANTS if v[0] == name)
    keep = {k: os.environ.pop(k, None)
            for k in ("ATTN_MIXED_STREAMS", "ATTN_MIXED_PREFILL_CTAS", "ATTN_PREFILL_WALK",
                      "ATTN_MIXED_OVERLAP")}
    try:
        if name in ("unified_snake", "unified_queue"):
            os.environ["ATTN_PREFILL_WALK"] = name.split("_")[1]
        elif (walk or WALK[0]) is not None:
            os.environ["ATTN_PREFILL_WALK"] = walk or WALK[0]
        if sched == "overlap":
            os.environ["ATTN_MIXED_OVERLAP"] = "fused" if name == "ovl_fused" else "1"
        if order is not None:
            os.environ["ATTN_MIXED_STREAMS"] = order
        if ctas is not None:
            os.environ["ATTN_MIXED_PREFILL_CTAS"] = ctas
        return run_attnd(lib, cs, sched, fork_probe=name in FORKED)
    finally:
        for k, v in keep.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def floor_ms(cs):
    return max(4.0 * cs["cells"] * HQ * D / 989e12, cs["kv_bytes"] / 4.8e12) * 1e3


def time_fn(fn, reps=None, warm=3):
    reps = reps or REPS[0]
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
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_attnd(lib, cs, sched, engine=0, fork_probe=False):
    B = cs["B"]
    T = (ctypes.c_int64 * B)(*cs["T"])
    C = (ctypes.c_int64 * B)(*cs["C"])
    why = ctypes.create_string_buffer(512)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())
    h = lib.attnmx_create(B, T, C, ptr(cs["indptr"]), ptr(cs["indices"]), ptr(cs["last"]),
                          cs["num_pages"], P, HQ, HKV, D, SCHED[sched], engine, ptr(cs["K"]),
                          ptr(cs["V"]), why, 512)
    if not h:
        raise RuntimeError(why.value.decode())
    try:
        o = torch.full((cs["qo"][-1], HQ, D), float("nan"), dtype=torch.bfloat16)
        lse = torch.full((cs["qo"][-1], HQ), float("nan"), dtype=torch.float32)
        us = ctypes.c_double(0)
        ts = []
        for i in range(REPS[0] + 3):
            rv = lib.attnmx_run(h, ptr(cs["q"]), ptr(cs["knew"]), ptr(cs["vnew"]), ptr(o),
                                ptr(lse), ctypes.byref(us))
            if rv != 0:
                raise RuntimeError(lib.attnmx_run_error(h).decode())
            if i >= 3:
                ts.append(us.value / 1e3)
        info = (ctypes.c_uint64 * 5)()
        lib.attnmx_info(h, info)
        ran = lib.attnmx_schedule(h, why, 512)
        extra = dict(
            ran={v: k for k, v in SCHED.items()}.get(ran, str(ran)), why=why.value.decode(),
            prefill_tiles=int(info[0]), prefill_items=int(info[1]), items=int(info[3]),
            prefill_merges=int(info[4]),
            spread_ms=[min(ts), max(ts)])
        # the probe, on two streams only: the light kernel's overlap trial (the
        # fused kernel shares each CTA by construction) and a forked partition
        # (where the decode CTAs ran while the capped prefill grid held its SMs,
        # docs/cuda-prefill-engine.md, "Forks")
        two_streams = fork_probe or (sched == "overlap" and "light" in extra["why"])
        if two_streams and cs["npre"] > 0 and cs["ndec"] > 0:
            extra["probe"] = probe(lib, h, cs, ptr, o, lse)
        return statistics.median(ts), o, lse, extra
    finally:
        lib.attnmx_destroy(h)


def probe(lib, h, cs, ptr, o, lse, sms=132, dec=4096):
    """One more run with the engine's co-residency probe: where (%smid) and
    when (%globaltimer) each light prefill CTA and each decode producer CTA
    ran.  A decode CTA sat beside a light one when a light CTA on its SM
    was resident during part of its life; the share of decode CTA-time
    spent so is the co-residency achieved."""
    n = 2 + 3 * (sms + dec)
    buf = (ctypes.c_uint64 * n)()
    rv = lib.attnmx_probe_run(h, ptr(cs["q"]), ptr(cs["knew"]), ptr(cs["vnew"]), ptr(o), ptr(lse),
                              buf, n, dec)
    if rv != 0:
        return dict(error="attnmx_probe_run: %d" % rv)
    return probe_stats(list(buf), sms, dec)


def probe_stats(buf, sms, dec):
    """The probe's buffer in numbers (times in us from the first light CTA's start)."""
    cta = lambda base, i: (buf[base + 3 * i], buf[base + 3 * i + 1], buf[base + 3 * i + 2])
    light = [c for c in (cta(2, i) for i in range(sms)) if c[1] and c[2]]
    decs = [c for c in (cta(2 + 3 * sms, i) for i in range(dec)) if c[1] and c[2]]
    if not light or not decs:
        return dict(error="no probe data", light=len(light), decode=len(decs))
    t0 = min(c[1] for c in light)
    us = lambda t: round((t - t0) / 1e3, 1)
    by_sm = {}
    for c in light:
        by_sm.setdefault(c[0], []).append(c)
    beside_ns = total_ns = 0
    beside_ctas = 0
    for s_, a, b in decs:
        total_ns += b - a
        ov = sum(max(0, min(b, lb) - max(a, la)) for _, la, lb in by_sm.get(s_, []))
        beside_ns += min(ov, b - a)
        beside_ctas += ov > 0
    # the prefill grid's last CTA start (late: its SM was held by decode
    # CTAs), and the SMs the decode CTAs used before the prefill grid ended
    p_end = max(c[2] for c in light)
    return dict(light_ctas=len(light), light_sms=len(by_sm),
                light_us=[us(min(c[1] for c in light)), us(p_end)],
                light_last_start_us=us(max(c[1] for c in light)),
                decode_sms_during_light=len({c[0] for c in decs if c[1] < p_end}),
                decode_first_start_us=us(min(c[1] for c in decs)),
                decode_ctas=len(decs), decode_sms=len({c[0] for c in decs}),
                decode_us=[us(min(c[1] for c in decs)), us(max(c[2] for c in decs))],
                decode_ctas_beside_light=beside_ctas,
                decode_time_share_beside_light=round(beside_ns / max(total_ns, 1), 3),
                stream_window_us=[us(buf[0]), us(buf[1])])


def sub_tables(cs, rows):
    """CSR tables of a subset of requests (their own qo_indptr)."""
    indptr, qo, last, idx = [0], [0], [], []
    for b in rows:
        a, e = int(cs["indptr"][b]), int(cs["indptr"][b + 1])
        idx.append(cs["indices"][a:e])
        indptr.append(indptr[-1] + e - a)
        qo.append(qo[-1] + cs["C"][b])
        last.append(int(cs["last"][b]))
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device="cuda")
    ind = torch.cat(idx).cuda() if idx else torch.zeros(0, dtype=torch.int32, device="cuda")
    return i32(qo), i32(indptr), ind, i32(last)


def fi_partitioned(fi, cs, ws):
    pre, dec = list(range(cs["npre"])), list(range(cs["npre"], cs["B"]))
    qrow = int(cs["qo"][cs["npre"]])
    kv = (cs["K"], cs["V"])
    calls = []
    if pre:
        qo, ip, ix, la = sub_tables(cs, pre)
        wp = fi.BatchPrefillWithPagedKVCacheWrapper(ws[0], "NHD")
        wp.plan(qo, ip, ix, la, HQ, HKV, D, P, causal=True, q_data_type=torch.bfloat16,
                kv_data_type=torch.bfloat16)
        qp = cs["q_dev"][:qrow]
        calls.append(lambda: wp.run(qp, kv))
    if dec:
        _, ip, ix, la = sub_tables(cs, dec)
        wd = fi.BatchDecodeWithPagedKVCacheWrapper(ws[1], "NHD", use_tensor_cores=True)
        wd.plan(ip, ix, la, HQ, HKV, D, P, q_data_type=torch.bfloat16,
                kv_data_type=torch.bfloat16)
        qd = cs["q_dev"][qrow:]
        calls.append(lambda: wd.run(qd, kv))
    fn = lambda: [c() for c in calls]
    outs = fn()
    torch.cuda.synchronize()
    return time_fn(fn), torch.cat(outs, 0)


def fi_batch_attention(fi, cs):
    ba = fi.BatchAttention(kv_layout="NHD")
    ba.plan(cs["qo"].cuda(), cs["indptr"].cuda(), cs["indices"].cuda(), cs["keys"].cuda(), HQ,
            HKV, D, D, P, causal=True, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    fn = lambda: ba.run(cs["q_dev"], (cs["K"], cs["V"]))
    o = fn()[0]
    torch.cuda.synchronize()
    return time_fn(fn), o


def fi_batch_pod(fi, cs, ws):
    pre, dec = list(range(cs["npre"])), list(range(cs["npre"], cs["B"]))
    if not pre or not dec:
        raise RuntimeError("BatchPOD needs prefill and decode rows")
    qrow = int(cs["qo"][cs["npre"]])
    qp_, ipp, ixp, lap = sub_tables(cs, pre)
    qd_, ipd, ixd, lad = sub_tables(cs, dec)
    w = fi.BatchPODWithPagedKVCacheWrapper(ws[0], "NHD")
    w.plan(qp_, ipp, ixp, lap, qd_, ipd, ixd, lad, HQ, HKV, D, P, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16)
    kv = (cs["K"], cs["V"])
    qp, qd = cs["q_dev"][:qrow], cs["q_dev"][qrow:]
    fn = lambda: w.run(qp, kv, qd, kv, causal_p=True)
    r = fn()
    torch.cuda.synchronize()
    op, od = (r[0][0], r[1][0]) if isinstance(r[0], tuple) else (r[0], r[1])
    return time_fn(fn), torch.cat([op, od], 0)


def fi_pod(fi, cs, ws):
    if cs["npre"] != 1 or cs["T"][0] != 0 or cs["ndec"] == 0:
        raise RuntimeError("POD takes one ragged prefill (T = 0) and paged decodes")
    qrow = int(cs["qo"][1])
    dec = list(range(1, cs["B"]))
    _, ipd, ixd, lad = sub_tables(cs, dec)
    w = fi.PODWithPagedKVCacheWrapper(ws[0], "NHD")
    w.plan(ipd, ixd, lad, HQ, HKV, D, P, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16)
    kp = cs["knew"][:qrow].cuda()
    vp = cs["vnew"][:qrow].cuda()
    qp, qd = cs["q_dev"][:qrow], cs["q_dev"][qrow:]
    kv = (cs["K"], cs["V"])
    fn = lambda: w.run(qp, kp, vp, qd, kv, causal_p=True)
    r = fn()
    torch.cuda.synchronize()
    return time_fn(fn), torch.cat([r[0], r[1]], 0)


def print_tables(out):
    """The short tables: attnd's variants, then the peers against attnd's best."""
    g = lambda d, k: ("%.3f" % d[k]["ms"]) if "ms" in d.get(k, {}) else "-"
    names = [v[0] for v in VARIANTS]
    log("ms      " + " ".join("%-9s" % n.replace("part_", "")[:9] for n in names) +
        " P_half D_half")
    for r in out["rows"]:
        log("%-7s " % r["batch"][:7] + " ".join("%-9s" % g(r["attnd"], n) for n in names) +
            " %s %s" % (g(r["attnd"], "prefill_half"), g(r["attnd"], "decode_half")))
    log("batch   floor  best(attnd)          auto(ran)        fi_part fi_BA  fi_BPOD fi_POD"
        "  best/part best/BA best/BPOD best/POD auto/best")
    for r in out["rows"]:
        ms = {n: r["attnd"][n]["ms"] for n in names if "ms" in r["attnd"].get(n, {})}
        if not ms:
            log(r["batch"], "no attnd figure")
            continue
        bn = min(ms, key=ms.get)
        rat = lambda k: ("%.2f" % (ms[bn] / r["peers"][k]["ms"])) if "ms" in r["peers"].get(
            k, {}) else "-"
        au = ("%.3f" % (ms["auto"] / ms[bn])) if "auto" in ms else "-"
        log("%-7s %.3f  %-8s %.3f  %s(%s)  %s  %s  %s  %s   %s %s %s %s  %s" % (
            r["batch"][:7], r["floor_ms"], bn, ms[bn], g(r["attnd"], "auto"),
            r["attnd"].get("auto", {}).get("ran", "?"), g(r["peers"], "part"),
            g(r["peers"], "ba"), g(r["peers"], "bpod"), g(r["peers"], "pod"), rat("part"),
            rat("ba"), rat("bpod"), rat("pod"), au))
    log("overlap's co-residency probe (light CTAs, distinct SMs, every light CTA resident "
        "[us], decode window [us], share of it beside the light grid):")
    for r in out["rows"]:
        pr = r["attnd"].get("overlap", {}).get("probe")
        if pr:
            log("  %-10s %s" % (r["batch"], pr))
    log("prefill kernel alone on the prefill rows (ms), grid capped at N CTAs:")
    for r in out["rows"]:
        k = r.get("kernel", {})
        if k:
            log("%-10s " % r["batch"] + " ".join("%s %s" % (c, ("%.3f" % v["ms"]) if isinstance(
                v, dict) and "ms" in v else "-") for c, v in k.items() if c.startswith("c")) +
                ("  error %s" % k["error"][:120] if "error" in k else ""))
    log("M4 through the mixed path / the specialised launch (target <= 1.03):")
    for r in out["rows"]:
        at = r["attnd"]
        spec = at.get("cuda_decode", {}).get("ms") or r.get("kernel", {}).get("c132", {}).get("ms")
        if r["batch"].startswith("M4") and spec:
            log("  %-10s specialised %.3f  " % (r["batch"], spec) + " ".join(
                "%s %.3f (%.3f)" % (n, at[n]["ms"], at[n]["ms"] / spec) for n in
                ("auto", "partition", "unified") if "ms" in at.get(n, {})))



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--deadline", type=float, default=240.0, help="seconds; later peers skipped")
    ap.add_argument("--peers", default="part,ba,bpod,pod")
    ap.add_argument("--variants", default="", help="attnd variants to run (default: all)")
    ap.add_argument("--no-extras", action="store_true",
                    help="leave out the halves and the prefill kernel alone")
    ap.add_argument("--reps", type=int, default=15, help="timed runs after 3 warm-ups")
    ap.add_argument("--only", default="", help="batches to run (M1,M2,...; default: all)")
    ap.add_argument("--walk", default="", help="the unit walk (ATTN_PREFILL_WALK) of every run")
    ap.add_argument("--walk-ab", default="",
                    help="a unit walk (ATTN_PREFILL_WALK, e.g. pairs) to run every variant and "
                    "half under again, right after its default run: name@walk in the JSON")
    ap.add_argument("--caps", default="",
                    help="more prefill-first caps to time (part_pf_cN variants and the prefill "
                         "kernel alone at N CTAs), e.g. 60,72,104")
    ap.add_argument("--json", default="mixed_bench.json", help="file name of the results in --out")
    ap.add_argument("--table", default="", help="only print the tables of this mixed_bench.json")
    ap.add_argument("--wait-file", default="",
                    help="before the peers: wait for this file (bench/gpu/fi_warm.py --done)")
    ap.add_argument("--wait-max", type=float, default=0.0, help="seconds to wait for it at most")
    a = ap.parse_args()
    if a.table:
        print_tables(json.load(open(a.table)))
        return 0
    REPS[0] = a.reps
    WALK[0] = a.walk or None
    for c in (int(x) for x in a.caps.split(",") if x):
        if not any(v[0] == "part_pf_c%d" % c for v in VARIANTS):
            VARIANTS.append(("part_pf_c%d" % c, "partition", "prefill-first", str(c)))
            FORKED.append("part_pf_c%d" % c)
        if c not in KERNEL_CAPS:
            KERNEL_CAPS.append(c)
    KERNEL_CAPS.sort()
    t0 = time.time()
    lib = load_lib(a.lib)
    fi = None
    try:
        import flashinfer
        fi = flashinfer
    except Exception as ex:
        log("import flashinfer failed:", repr(ex)[:300])
    res = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               device=torch.cuda.get_device_name(0), torch=torch.__version__,
               cuda=torch.version.cuda, flashinfer=getattr(fi, "__version__", None),
               command="python3 bench/gpu/bench_mixed.py --out $OUT (bench/gpu/run_mixed.sh b)",
               hq=HQ, hkv=HKV, d=D, page=P, rows=[])
    gen = torch.Generator().manual_seed(1212)
    cases = []
    # pass 1: attnd under every schedule on every batch (the engine's own path)
    for name, pre, dec in shapes(gen):
        cs = make_case(pre, dec, gen)  # drawn for every batch: the same data with --only
        if a.only and name not in a.only.split(","):
            continue
        row = dict(batch=name, B=cs["B"], prefill=pre if len(pre) <= 4 else f"{len(pre)} rows",
                   decodes=len(dec), visible_cells=cs["cells"], kv_bytes=cs["kv_bytes"],
                   decode_kv_bytes=cs["decode_kv_bytes"],
                   floor_ms=floor_ms(cs), attnd={}, peers={})
        ref = None
        both = cs["npre"] > 0 and cs["ndec"] > 0
        for name_v, *_ in VARIANTS:
            if name_v in FORKED and not both:
                continue
            if a.variants and name_v not in a.variants.split(","):
                continue
            for walk in [None] + ([a.walk_ab] if a.walk_ab and name_v not in
                                  ("unified_snake", "unified_queue") else []):
                key = name_v if walk is None else name_v + "@" + walk
                try:
                    ms, o, lse, extra = run_variant(lib, cs, name_v, walk)
                    row["attnd"][key] = dict(ms=ms, nan=int(torch.isnan(o.float()).sum()) +
                                             int(torch.isnan(lse).sum()), **extra)
                    if ref is None:
                        ref, ref_lse = o, lse
                    else:
                        row["attnd"][key]["rel_l2_vs_unified"] = rel_l2(o, ref)
                        # the unit walk changes which CTA runs a unit, not its bytes
                        row["attnd"][key]["bitwise_equal_first"] = bool(
                            torch.equal(o, ref) and torch.equal(lse, ref_lse))
                except Exception as ex:
                    row["attnd"][key] = dict(error=repr(ex)[:300])
        if both and not a.no_extras:  # the two halves alone (bench/gpu/calibrate_mixed.py)
            for half, lo, hi, walk in (("prefill_half", 0, cs["npre"], None),
                                       ("decode_half", cs["npre"], cs["B"], None)) + (
                    (("prefill_half@" + a.walk_ab, 0, cs["npre"], a.walk_ab),) if a.walk_ab
                    else ()):
                try:
                    ms, o, lse, extra = run_variant(lib, subset_case(cs, lo, hi), "partition",
                                                    walk)
                    row["attnd"][half] = dict(ms=ms, **extra)
                except Exception as ex:
                    row["attnd"][half] = dict(error=repr(ex)[:300])
        if cs["npre"] > 0 and not a.no_extras:  # the prefill kernel alone on the prefill rows, capped
            try:
                sub = subset_case(cs, 0, cs["npre"])
                row["kernel"], o = prefill_kernel(lib, sub)
                if cs["ndec"] == 0 and ref is not None:
                    row["kernel"]["rel_l2_vs_unified"] = rel_l2(o, ref)
            except Exception as ex:
                row["kernel"] = dict(error=repr(ex)[:300])
        if cs["npre"] == 0 and cs["ndec"] > 0:
            try:  # the specialised decode engine on the same pages (M4)
                ms, o, lse, extra = run_attnd(lib, cs, "auto", engine=1)
                row["attnd"]["cuda_decode"] = dict(ms=ms, rel_l2_vs_unified=rel_l2(o, ref),
                                                   **extra)
            except Exception as ex:
                row["attnd"]["cuda_decode"] = dict(error=repr(ex)[:300])
        row["attnd_ref"] = ref
        res["rows"].append(row)
        cases.append(cs)
        log(name, {k: (round(v["ms"], 4), v.get("ran")) if "ms" in v else v
                   for k, v in row["attnd"].items()}, "floor %.4f ms" % row["floor_ms"])
    dump = lambda: json.dump(dict(res, rows=[{k: v for k, v in r.items() if k != "attnd_ref"}
                                             for r in res["rows"]]),
                             open(os.path.join(a.out, a.json), "w"), indent=1)
    dump()
    # pass 2: the FlashInfer peers (JIT compiles on first use), deadline-bounded
    peers = [p for p in a.peers.split(",") if p]
    if peers and a.wait_file:
        tw = time.time()
        while not os.path.exists(a.wait_file) and time.time() - tw < a.wait_max:
            time.sleep(1)
        log("waited %.0f s for the JIT warm-up (%s)" % (time.time() - tw, "done" if os.path.exists(
            a.wait_file) else "not done"))
    # BatchPOD halves ws[0] between its prefill and decode plans, and its
    # prefill plan's split-k buffers alone outgrew 128 MiB on M1-M5 ("Buffer
    # overflow ... batch_prefill_tmp_s"): give every peer 2 GiB + 512 MiB
    ws = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (2048, 512)]
    for peer in peers:
        for row, cs in zip(res["rows"], cases):
            if fi is None or time.time() - t0 > a.deadline:
                row["peers"].setdefault(peer, dict(error="skipped (deadline or no flashinfer)"))
                continue
            try:
                if peer == "part":
                    ms, o = fi_partitioned(fi, cs, ws)
                elif peer == "ba":
                    ms, o = fi_batch_attention(fi, cs)
                elif peer == "bpod":
                    ms, o = fi_batch_pod(fi, cs, ws)
                else:
                    ms, o = fi_pod(fi, cs, ws)
                e = dict(ms=ms)
                if row["attnd_ref"] is not None:
                    e["rel_l2_vs_attnd"] = rel_l2(row["attnd_ref"], o.cpu())
                row["peers"][peer] = e
            except Exception as ex:
                row["peers"][peer] = dict(error=repr(ex)[:300])
            log(row["batch"], peer, row["peers"][peer], "t=%.0fs" % (time.time() - t0))
        dump()
    dump()
    out = dict(res, rows=[{k: v for k, v in r.items() if k != "attnd_ref"} for r in res["rows"]])
    print_tables(out)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The prefill kernel alone over S1-S4's (and M2's) prefill rows, 132 CTAs:
the planner's automatic split (fixed_splits 0) against no split (1), and the
decode rows alone through cuda_decode: what the split + combine cost on a
small step.  Usage: python3 splits.py LIB"""
import ctypes, sys, os
sys.path.insert(0, "bench/gpu")
import torch
import bench_mixed as bm

lib = bm.load_lib(sys.argv[1])
lib.attnpf_info.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
gen = torch.Generator().manual_seed(1212)
ptr = lambda t: ctypes.c_void_p(t.data_ptr())
for name, pre, dec in bm.shapes(gen):
    cs = bm.make_case(pre, dec, gen)
    if name not in ("S1", "S2", "S3", "S4", "M2", "M1"):
        continue
    sub = bm.subset_case(cs, 0, cs["npre"])
    T = torch.tensor(sub["T"], dtype=torch.int64)
    C = torch.tensor(sub["C"], dtype=torch.int64)
    q = sub["q"].cuda()
    line = [name]
    for fs in (0, 1):
        rv = ctypes.c_int(0)
        h = lib.attnpf_create(sub["B"], ptr(T), ptr(C), ptr(sub["qo"]), ptr(sub["indptr"]),
                              ptr(sub["indices"]), ptr(sub["last"]), sub["num_pages"], bm.P, bm.HQ,
                              bm.HKV, bm.D, bm.MASK_CAUSAL, None, None, None, None, 0, fs,
                              ctypes.byref(rv))
        if not h:
            line.append("splits=%d: create failed %d" % (fs, rv.value))
            continue
        info = (ctypes.c_uint64 * 8)()
        lib.attnpf_info(h, info)
        o = torch.full_like(q, float("nan"))
        lse = torch.full((q.shape[0], bm.HQ), float("nan"), dtype=torch.float32, device="cuda")
        st = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        lib.attnpf_set_max_ctas(h, 132)
        fn = lambda: lib.attnpf_run(h, ptr(q), ptr(cs["K"]), ptr(cs["V"]), ptr(o), ptr(lse), st)
        ms = bm.time_fn(fn, reps=30)
        nan = int(torch.isnan(o.float()).sum())
        line.append("splits=%d items %d merges %d: %.1f us (nan %d)" % (fs, info[0], info[1], ms * 1e3, nan))
        lib.attnpf_free(h)
    if cs["ndec"]:
        dsub = bm.subset_case(cs, cs["npre"], cs["B"])
        try:
            ms, o, lse, extra = bm.run_attnd(lib, dsub, "auto", engine=1)
            line.append("decode rows via cuda_decode %.1f us" % (ms * 1e3))
        except Exception as ex:
            line.append("decode: %r" % ex)
    print(" | ".join(line), flush=True)

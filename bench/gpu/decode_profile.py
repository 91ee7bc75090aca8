#!/usr/bin/env python3
"""Issue 13 profiling and configuration sweep of attnd's paged decode, on
the benchmark's random data (bench_decode.make_batch).

  --mode ncu-attnd   one attnd launch per shape inside an NVTX range "prof"
                     (run under `ncu --nvtx --nvtx-include prof/`); prints the
                     plan (items, slots, CTAs per SM, grid capacity)
  --mode ncu-cudnn   the same for cuDNN SDPA on contiguous K/V
  --mode ncu-fitc    the same for FlashInfer's tensor-core decode wrapper
  --mode sweep       every shape x configuration (pipeline stages, FI wave
                     model) timed like bench_decode.py (20 calls in a graph,
                     median of 9 replays), each output checked against the
                     fp32 reference; one JSON line per row and a table last.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402

PROFILE_SHAPES = ["B1_T32768", "B64_T4096", "B128_T8192", "B256_T2048", "B2_T2048"]


def shapes_named(names):
    by = {s["name"]: s for s in bd.SHAPES + bd.EXTRA_SHAPES}
    return [by[n] for n in names]


def prof_range(fn):
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def ncu_attnd(lib, shapes, gen, kw):
    kw = dict(kw)
    fused = kw.pop("fused", False)
    for sh in shapes:
        bt = bd.make_batch(sh, gen)
        a = bd.Attnd(lib, bt["lens"], bt["indptr"], bt["indices"], bt["hq"], bt["hkv"], bt["d"], 2,
                     page=bt["P"], fused=fused, pool=bt["pool"], layout=int(bt["layout"] == "HND"),
                     **kw)
        o = torch.empty(bt["B"], bt["hq"], bt["d"], dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(bt["B"], bt["hq"], dtype=torch.float32, device="cuda")
        run = lambda: a.run(bt["q"], bt["k"], bt["v"], o, lse)  # noqa: E731
        run()
        prof_range(run)
        print("plan", sh["name"], json.dumps(a.info), flush=True)
        a.close()
        del bt
        torch.cuda.empty_cache()


def ncu_cudnn(shapes, gen):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for sh in shapes:
        bt = bd.make_batch(sh, gen)
        B, T, hkv, d = bt["B"], sh["T"], bt["hkv"], bt["d"]
        pg = bt["indices"].cuda()
        Kc = bt["k"][pg].reshape(B, T, hkv, d).transpose(1, 2).contiguous()
        Vc = bt["v"][pg].reshape(B, T, hkv, d).transpose(1, 2).contiguous()
        q4 = bt["q"].view(B, bt["hq"], 1, d)

        def run():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q4, Kc, Vc, enable_gqa=True)
        run()
        prof_range(run)
        print("cudnn", sh["name"], flush=True)
        del bt, Kc, Vc
        torch.cuda.empty_cache()


def ncu_fitc(shapes, gen):
    import flashinfer
    for sh in shapes:
        bt = bd.make_batch(sh, gen)
        ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
        w.plan(bt["indptr"].int().cuda(), bt["indices"].int().cuda(), bt["last"].int().cuda(),
               bt["hq"], bt["hkv"], bt["d"], bt["P"], q_data_type=torch.bfloat16,
               kv_data_type=torch.bfloat16)
        run = lambda: w.run(bt["q"], (bt["k"], bt["v"]))  # noqa: E731
        run()
        prof_range(run)
        print("fitc", sh["name"], flush=True)
        del bt, w, ws
        torch.cuda.empty_cache()


CONFIGS = {
    "base": {},
    "s2": dict(stages=2),
    "wave": dict(wave_model=(96, 192)),
    "s2_wave": dict(stages=2, wave_model=(96, 192)),
    "nowave": dict(wave_model=(-1, 0)),
    # issue 13 round 2: the copy-warp producer (default) against the cp.async one
    "nobulk": dict(bulk=0),
    "bulk1": dict(bulk=1),
    "bulk2": dict(bulk=2),
    "bulk4": dict(bulk=4),
    "bulk4_s2": dict(bulk=4, stages=2),
    "bulk4_s4": dict(bulk=4, stages=4),
    "tmap": dict(bulk=8),
    "tmap_s2": dict(bulk=8, stages=2),
    "tmap_s4": dict(bulk=8, stages=4),
    "tmap_l2none": dict(bulk=8, tmap_l2=1),
    "tmap_l2_128": dict(bulk=8, tmap_l2=2),
    "tmap_l2_256": dict(bulk=8, tmap_l2=3),  # the first version's default
    # issue 13 round 3: the fused fold, programmatic dependent launch (pdl), shorter splits
    # (min_chunk keys), more splits (waves: grid capacity x 2), fewer stages; "fused" is
    # the benchmark's default path, the configurations above run the reducer kernel
    "fused": dict(fused=True),
    "pdl": dict(fused=True, pdl=1),
    "pdl_reducer": dict(pdl=1),
    "mc128": dict(fused=True, min_chunk=128),
    "mc128_pdl": dict(fused=True, min_chunk=128, pdl=1),
    "mc64_pdl": dict(fused=True, min_chunk=64, pdl=1),
    "w2_pdl": dict(fused=True, waves=2, pdl=1),
    "s2_pdl": dict(fused=True, stages=2, pdl=1),
    "nobulk_pdl": dict(fused=True, bulk=0, pdl=1),
    "pdl2": dict(fused=True, pdl=2),
    "pdl2_reducer": dict(pdl=2),
    "s4": dict(fused=True, stages=4),
    "s5": dict(fused=True, stages=5),
    "s6": dict(fused=True, stages=6),
    "s6_reducer": dict(stages=6),
    "mc128_reducer": dict(min_chunk=128),
    "mc512": dict(fused=True, min_chunk=512),
    "mc1024": dict(fused=True, min_chunk=1024),
    "tmap_s4_fused": dict(fused=True, bulk=8, stages=4),
    "w2": dict(fused=True, waves=2),
    # issue 13 round 4: persistent CTAs over the grid capacity (-1) or 2x / 4x it; the copy-warp
    # producers where the default is cp.async (page 1, d = 64)
    "persist": dict(fused=True, persist=-1),
    "persist_reducer": dict(persist=-1),
    "tmap_fused": dict(fused=True, bulk=8),
    "bulk1_fused": dict(fused=True, bulk=1),
    "bulk2_fused": dict(fused=True, bulk=2),
    "bulk4_fused": dict(fused=True, bulk=4),
    "nobulk_fused": dict(fused=True, bulk=0),
}


def sweep(lib, shapes, gen, configs, out):
    rows = []
    for sh in shapes:
        bt = bd.make_batch(sh, gen)
        ref = bd.ref_decode(bt)
        B, hq, hkv, d = bt["B"], bt["hq"], bt["hkv"], bt["d"]
        kv_bytes = int(bt["lens"].sum()) * hkv * d * 2 * 2
        for cname in configs:
            kw = CONFIGS[cname]
            if d == 256 and kw.get("stages", 0) > 3:
                continue
            row = dict(shape=sh["name"], config=cname)
            try:
                kw = dict(kw)
                fused = kw.pop("fused", False)
                a = bd.Attnd(lib, bt["lens"], bt["indptr"], bt["indices"], hq, hkv, d, 2,
                             page=bt["P"], fused=fused, pool=bt["pool"], **kw)
                o = torch.full((B, hq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
                lse = torch.full((B, hq), float("nan"), dtype=torch.float32, device="cuda")
                a.run(bt["q"], bt["k"], bt["v"], o, lse)
                torch.cuda.synchronize()
                row["rel_l2"] = bd.rel_l2(o[:ref.shape[0]], ref)
                row["nan"] = bool(torch.isnan(o).any() or torch.isnan(lse).any())
                us, _ = bd.time_fn(lambda: a.run(bt["q"], bt["k"], bt["v"], o, lse))
                row.update(us=us, tbps=kv_bytes / us / 1e6, **a.info)
                a.close()
            except Exception as ex:
                row["error"] = repr(ex)[:200]
            rows.append(row)
            print(json.dumps(row), flush=True)
        del bt
        torch.cuda.empty_cache()
    json.dump(rows, open(os.path.join(out, "sweep.json"), "w"), indent=1)
    print("us/TB/s per config:", " ".join(configs))
    for sh in shapes:
        cells = []
        for c in configs:
            r = next((r for r in rows if r["shape"] == sh["name"] and r["config"] == c), {})
            cells.append(f"{r['us']:.1f}/{r['tbps']:.2f}/{r['items']}" if "us" in r else "-")
        print(f"{sh['name'][:20]:>20} " + " ".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--shapes", default="")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(int(time.time()))
    names = args.shapes.split(",") if args.shapes else None
    if args.mode == "sweep":
        shapes = shapes_named(names) if names else bd.SHAPES
        sweep(bd.load_lib(args.lib), shapes, gen, args.configs.split(","), args.out)
        return
    shapes = shapes_named(names or PROFILE_SHAPES)
    if args.mode == "ncu-attnd":
        ncu_attnd(bd.load_lib(args.lib), shapes, gen, CONFIGS[args.configs.split(",")[0]])
    elif args.mode == "ncu-cudnn":
        ncu_cudnn(shapes, gen)
    elif args.mode == "ncu-fitc":
        ncu_fitc(shapes, gen)


if __name__ == "__main__":
    main()

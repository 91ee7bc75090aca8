#!/usr/bin/env python3
"""A/B of two builds of attnd's decode kernels in one process, on the same
data: `--old` and `--new` are two libattn_cuda_bench.so (bench_glue.c linked
with two versions of kernels/cuda/decode.cu).  For every shape of
bench_decode.py and every attnd configuration it benchmarks (FA, FI, GLOBAL,
FI on the CUDA-core producer, FI with the reducer kernel), it times both
builds the same way (N calls in one CUDA graph, median of R replays) over
--rounds rounds, alternating which build goes first, and reports each side's
best median and the median of the per-round new/old ratios; it checks
that both agree with the fp32 reference.  Writes <out>/ab-decode.json and
prints one line per (shape, configuration).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402

CONFIGS = [("fi", 2, {}), ("fa", 1, {}), ("global", 3, {}), ("fi_simt", 2, dict(simt=True)),
           ("fi_reducer", 2, dict(fused=False))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    ap.add_argument("--configs", default="", help="comma-separated configurations (default: all)")
    args = ap.parse_args()
    configs = [c for c in CONFIGS if not args.configs or c[0] in args.configs.split(",")]
    libs = {"old": bd.load_lib(args.old), "new": bd.load_lib(args.new)}
    gen = torch.Generator().manual_seed(20261201)
    rows = []
    for shape in bd.SHAPES:
        if args.shapes and shape["name"] not in args.shapes.split(","):
            continue
        bt = bd.make_batch(shape, gen)
        B, hq, hkv, d = bt["B"], bt["hq"], bt["hkv"], bt["d"]
        ref = bd.ref_decode(bt)
        q, k, v = bt["q"], bt["k"], bt["v"]
        for cname, pid, kw in configs:
            row = dict(shape=shape["name"], config=cname)
            try:
                hs, outs = {}, {}
                for side, lib in libs.items():
                    # pool: the store's page count, so the tensor-map producer may run
                    a = bd.Attnd(lib, bt["lens"], bt["indptr"], bt["indices"], hq, hkv, d, pid, page=bt["P"],
                                 pool=bt["pool"], **kw)
                    o = torch.full((B, hq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
                    lse = torch.full((B, hq), float("nan"), dtype=torch.float32, device="cuda")
                    a.run(q, k, v, o, lse)
                    torch.cuda.synchronize()
                    row[f"{side}_rel_l2"] = bd.rel_l2(o[:ref.shape[0]], ref)
                    row[f"{side}_nan"] = bool(torch.isnan(o).any() or torch.isnan(lse).any())
                    hs[side], outs[side] = a, (o, lse)
                row["old_vs_new_rel_l2"] = bd.rel_l2(outs["new"][0], outs["old"][0])
                row["lse_max_diff"] = (outs["new"][1] - outs["old"][1]).abs().max().item()
                best = {"old": float("inf"), "new": float("inf")}
                ratios = []
                for rnd in range(args.rounds):
                    got = {}
                    # alternate which build goes first, so drift favours neither
                    for side in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                        a, (o, lse) = hs[side], outs[side]
                        got[side], _ = bd.time_fn(lambda: a.run(q, k, v, o, lse))
                        best[side] = min(best[side], got[side])
                    ratios.append(got["new"] / got["old"])
                row["old_us"], row["new_us"] = best["old"], best["new"]
                row["new_over_old"] = best["new"] / best["old"]
                row["round_ratios"] = ratios
                row["median_round_ratio"] = sorted(ratios)[len(ratios) // 2]
                row.update(items=hs["new"].info["items"], slots=hs["new"].info["slots"])
                for a in hs.values():
                    a.close()
            except Exception as ex:  # one failing configuration does not stop the rest
                row["error"] = repr(ex)[:300]
            rows.append(row)
            if "error" in row:
                print(f"{shape['name']:>22} {cname:>10}: ERROR {row['error']}", flush=True)
            else:
                print(f"{shape['name']:>22} {cname:>10}: old {row['old_us']:8.2f} us  new "
                      f"{row['new_us']:8.2f} us  new/old {row['new_over_old']:.3f}  rel_l2 "
                      f"old {row['old_rel_l2']:.1e} new {row['new_rel_l2']:.1e} "
                      f"old-vs-new {row['old_vs_new_rel_l2']:.1e}  nan {row['old_nan']}/"
                      f"{row['new_nan']}  median round ratio {row['median_round_ratio']:.3f}",
                      flush=True)
        del bt
        torch.cuda.empty_cache()
    ok = [r for r in rows if "error" not in r]
    if ok:
        import math
        gm = math.exp(sum(math.log(r["new_over_old"]) for r in ok) / len(ok))
        worst = max(ok, key=lambda r: r["new_over_old"])
        gmr = math.exp(sum(math.log(r["median_round_ratio"]) for r in ok) / len(ok))
        print(f"geomean new/old {gm:.4f} (best of rounds), {gmr:.4f} (median round ratio) over "
              f"{len(ok)}; worst {worst['new_over_old']:.3f} ({worst['shape']} {worst['config']})",
              flush=True)
    with open(os.path.join(args.out, "ab-decode.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a decode launch spends its time, CTA by CTA (issue 13, the latency-bound shapes).

The tensor-map producer writes (%smid, start, end) per CTA in %globaltimer ns when its
probe is set (attnb_set_probe; the end is after the epilogue and, for the last CTA of a
split request's head, after the fold).  One launch at a time, programmatic launch off, so
`start` is when the CTA began, not when it was placed beside the previous kernel.  For each
shape it reports the launch's span (first start to last end), the ramp (how late the last
CTA started), CTA durations, the tail (last end after the median end), and the share of
SM-time in which an SM ran at least one CTA of the launch.

    python3 bench/gpu/decode_probe.py --lib build-gpu/lib/libattn_cuda_bench.so \
        --shapes B1_T32768,B4_T16384,g8_B64_T4096,B128_T8192 --out $OUT
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.getcwd(), 'bench/gpu'))
import bench_decode as bd  # noqa: E402  (the shapes, the batch builder, the library handle)


def analyse(rows, sms):
    """rows: [(sm, t0, t1)] of one launch -> the figures of the module docstring (us)."""
    t0 = min(r[1] for r in rows)
    t1 = max(r[2] for r in rows)
    span = (t1 - t0) / 1e3
    starts = sorted((r[1] - t0) / 1e3 for r in rows)
    ends = sorted((r[2] - t0) / 1e3 for r in rows)
    durs = sorted((r[2] - r[1]) / 1e3 for r in rows)
    busy = 0.0
    by_sm = {}
    for sm, a, b in rows:
        by_sm.setdefault(sm, []).append((a, b))
    for iv in by_sm.values():  # union of the CTA intervals on one SM
        iv.sort()
        cur_a, cur_b = iv[0]
        for a, b in iv[1:]:
            if a > cur_b:
                busy += cur_b - cur_a
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        busy += cur_b - cur_a
    return dict(ctas=len(rows), sms_used=len(by_sm), span_us=span,
                ramp_us=starts[-1], start_p50_us=starts[len(starts) // 2],
                dur_min_us=durs[0], dur_p50_us=durs[len(durs) // 2], dur_max_us=durs[-1],
                end_p10_us=ends[len(ends) // 10], end_p50_us=ends[len(ends) // 2],
                tail_us=ends[-1] - ends[len(ends) // 2],
                sm_busy_share=busy / 1e3 / (span * sms))


def probe_shape(lib, shape, gen, reps):
    bt = bd.make_batch(shape, gen)
    B, hq, hkv, d = bt["B"], bt["hq"], bt["hkv"], bt["d"]
    a = bd.Attnd(lib, bt["lens"], bt["indptr"], bt["indices"], hq, hkv, d, 2, page=bt["P"],
                 pool=bt["pool"])
    lib.attnb_set_pdl(a.h, 0)
    n = a.info["items"] * hkv * 4
    probe = torch.zeros(3 * n, dtype=torch.int64, device="cuda")
    phases = torch.zeros(8 * n, dtype=torch.int64, device="cuda")
    lib.attnb_set_probe(a.h, probe.data_ptr(), n)
    lib.attnb_set_probe_phases(a.h, phases.data_ptr())
    o = torch.empty((B, hq, d), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty((B, hq), dtype=torch.float32, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        a.run(bt["q"], bt["k"], bt["v"], o, lse)
    torch.cuda.synchronize()
    runs = []
    for _ in range(reps):
        probe.zero_()
        phases.zero_()
        torch.cuda.synchronize()
        e0.record()
        a.run(bt["q"], bt["k"], bt["v"], o, lse)
        e1.record()
        e1.synchronize()
        p = probe.view(-1, 3).cpu().tolist()
        ph = phases.view(-1, 8).cpu().tolist()
        rows = [(r[0], r[1], r[2]) for r in p if r[2] > 0]
        if not rows:
            raise RuntimeError("no CTA wrote the probe (not the tensor-map producer?)")
        f = analyse(rows, sms)
        # phases: last tile read -> (epilogue, slot, counter) -> fold start -> end (folding CTAs)
        t0 = min(r[1] for r in rows)
        last_tile = sorted((x[0] - t0) / 1e3 for x in ph if x[0] > 0)
        folds = [((r[2] - x[1]) / 1e3, (x[1] - x[0]) / 1e3) for r, x in zip(p, ph) if x[1] > 0]
        if last_tile:
            f["last_tile_p50_us"] = last_tile[len(last_tile) // 2]
            f["last_tile_max_us"] = last_tile[-1]
        if folds:
            f["folds"] = len(folds)
            f["fold_us_max"] = max(x[0] for x in folds)
            f["fold_us_p50"] = sorted(x[0] for x in folds)[len(folds) // 2]
            f["tile_to_fold_us_p50"] = sorted(x[1] for x in folds)[len(folds) // 2]
        def med(v):
            v = sorted(v)
            return v[len(v) // 2] if v else -1
        allc = [(r, x) for r, x in zip(p, ph) if r[2] > 0 and x[0] > 0]
        f["epi_us"] = med([(x[2] - x[0]) / 1e3 for r, x in allc if x[2]])
        f["atom_us"] = med([(x[3] - x[2]) / 1e3 for r, x in allc if x[3] and x[2]])
        f["nonfold_exit_us"] = med([(r[2] - x[3]) / 1e3 for r, x in allc if x[3] and not x[1]])
        fl = [(r, x) for r, x in allc if x[1]]
        f["f_atom_us"] = med([(x[3] - x[2]) / 1e3 for r, x in fl])
        f["f_epi_us"] = med([(x[2] - x[0]) / 1e3 for r, x in fl])
        f["f_load_us"] = med([(x[4] - x[1]) / 1e3 for r, x in fl if x[4]])
        f["f_comp_us"] = med([(x[5] - x[4]) / 1e3 for r, x in fl if x[5] and x[4]])
        f["f_store_us"] = med([(x[6] - x[5]) / 1e3 for r, x in fl if x[6] and x[5]])
        f["f_exit_us"] = med([(r[2] - x[6]) / 1e3 for r, x in fl if x[6]])
        f["f_wait_last_us"] = med([(x[1] - max(xx[3] for rr, xx in allc)) / 1e3 for r, x in fl]) if fl else -1
        if not runs:  # the first launch's CTAs, in launch order: [sm, start, end, last tile, fold
            # start or 0] ns after the first start
            first = t0
            raw = [[r[0], r[1] - first, r[2] - first, x[0] - first if x[0] else 0,
                    x[1] - first if x[1] else 0] if r[2] > 0 else None for r, x in zip(p, ph)]
        f["event_us"] = e0.elapsed_time(e1) * 1000.0
        runs.append(f)
    lib.attnb_set_probe(a.h, None, 0)
    lib.attnb_set_probe_phases(a.h, None)
    a.close()
    med = {k: statistics.median(r[k] for r in runs if k in r) for k in runs[0]}
    kv_bytes = int(bt["lens"].sum()) * hkv * d * 2 * 2
    med["span_tbps"] = kv_bytes / med["span_us"] / 1e6
    return dict(shape=shape["name"], items=a.info["items"], ctas_per_sm=a.info["ctas_per_sm"],
                kv_bytes=kv_bytes, median=med, runs=runs, first_launch_ctas=raw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="B1_T32768,B4_T16384,g8_B64_T4096,B128_T8192")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    lib = bd.load_lib(args.lib)
    gen = torch.Generator().manual_seed(int(time.time()))
    res = dict(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               device=torch.cuda.get_device_name(0), command=" ".join(sys.argv), shapes=[])
    want = args.shapes.split(",")
    for sh in bd.SHAPES:
        if sh["name"] not in want:
            continue
        try:  # a shape not on the tensor-map producer writes no probe: say so, go on
            r = probe_shape(lib, sh, gen, args.reps)
        except RuntimeError as ex:
            print(f"{sh['name']:>18} skipped: {ex}", flush=True)
            res["shapes"].append(dict(shape=sh["name"], error=str(ex)))
            continue
        res["shapes"].append(r)
        m = r["median"]
        print(f"{r['shape']:>18} ctas {m['ctas']:.0f} on {m['sms_used']:.0f} SMs: event "
              f"{m['event_us']:.1f} us, span {m['span_us']:.1f} ({m['span_tbps']:.2f} TB/s), ramp "
              f"{m['ramp_us']:.1f}, dur min/p50/max {m['dur_min_us']:.1f}/{m['dur_p50_us']:.1f}/"
              f"{m['dur_max_us']:.1f}, end p10/p50 {m['end_p10_us']:.1f}/{m['end_p50_us']:.1f}, "
              f"tail {m['tail_us']:.1f}, SM busy {m['sm_busy_share']:.2f}; last tile p50/max "
              f"{m.get('last_tile_p50_us', -1):.1f}/{m.get('last_tile_max_us', -1):.1f}, folds "
              f"{m.get('folds', 0):.0f}: tile->fold {m.get('tile_to_fold_us_p50', -1):.1f}, fold "
              f"p50/max {m.get('fold_us_p50', -1):.1f}/{m.get('fold_us_max', -1):.1f}", flush=True)
        print("   phases p50 us: " + ", ".join(f"{k} {m.get(k, -1):.2f}" for k in ("epi_us", "atom_us", "nonfold_exit_us", "f_epi_us", "f_atom_us", "f_load_us", "f_comp_us", "f_store_us", "f_exit_us")), flush=True)
    path = os.path.join(args.out, "decode-probe8.json")
    json.dump(res, open(path, "w"), indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()

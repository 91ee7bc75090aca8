#!/usr/bin/env python3
"""The forked-partition constant of planner/mixed_cost.c from a device run
of bench_mixed.py (its mixed_bench.json): per batch with both kernel
families, P = the prefill rows alone and D = the decode rows alone (the
rows "prefill_half" / "decode_half", each through the same engine, each
with its own append), F = a forked variant; the model says
F = max(P', D) + interference x min(P', D) + fork_us, P' = P x 132 / cap
for a capped prefill grid (its waves on fewer SMs).  Prints, per variant,
each batch's implied interference, the median, and the line to paste into
k_h200 (keep interference 1.0 when no forked variant beat serial: auto
then stays serial, as measured).
Usage: python3 bench/gpu/calibrate_mixed.py mixed_bench.json [--fork-us 6] [--sms 132]
"""
import argparse
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--fork-us", type=float, default=6.0)
    ap.add_argument("--sms", type=int, default=132)
    a = ap.parse_args()
    rows = json.load(open(a.json))["rows"]
    per_variant = {}
    wins = []
    for r in rows:
        at = r.get("attnd", {})
        if "ms" not in at.get("prefill_half", {}) or "ms" not in at.get("decode_half", {}):
            continue
        P, D = at["prefill_half"]["ms"] * 1e3, at["decode_half"]["ms"] * 1e3
        S = at.get("partition", {}).get("ms")
        for name, e in at.items():
            if not name.startswith("part_") or "ms" not in e:
                continue
            cap = int(name.rsplit("_c", 1)[1]) if "_c" in name else a.sms
            Pc = P * a.sms / cap
            F = e["ms"] * 1e3
            k = (F - max(Pc, D) - a.fork_us) / min(Pc, D)
            per_variant.setdefault(name, []).append(k)
            if S is not None and e["ms"] < S:
                wins.append((r["batch"], name, e["ms"], S))
            print("%-10s %-13s P %.0f us (P' %.0f)  D %.0f us  serial %s us  forked %.0f us  "
                  "interference %.3f" % (r["batch"], name, P, Pc, D,
                                         "%.0f" % (S * 1e3) if S else "-", F, k))
    if not per_variant:
        print("no forked variant with both halves measured: keep the constants")
        return 1
    print()
    for name, ks in sorted(per_variant.items()):
        print("%-13s median interference %.3f over %d batches (min %.3f, max %.3f)" % (
            name, statistics.median(ks), len(ks), min(ks), max(ks)))
    print()
    if not wins:
        print("no forked variant beat serial partition on any batch: keep .interference = 1.0")
        return 0
    print("forked beat serial on: " + ", ".join("%s %s %.3f<%.3f" % w for w in wins))
    best = min(per_variant, key=lambda n: statistics.median(per_variant[n]))
    k = max(0.0, statistics.median(per_variant[best]))
    cap = int(best.rsplit("_c", 1)[1]) if "_c" in best else 0
    print("paste into planner/mixed_cost.c k_h200 (from variant %s; auto forks prefill-first "
          "when the estimate beats serial):" % best)
    print("    .fork_us = %.1f,\n    .interference = %.3f,\n    .fork_ctas = %d," % (
        a.fork_us, k, cap))
    if best.startswith("part_df"):
        print("note: the best variant launches decode first; auto's forked order is "
              "prefill-first (ATTN_MIXED_STREAMS=decode-first selects it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

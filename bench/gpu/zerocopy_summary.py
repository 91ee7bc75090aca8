#!/usr/bin/env python3
"""Markdown summary of bench_zerocopy.py's zc-results.jsonl: step time,
per-layer GPU time, host submit p50/p99, GPU idle gap per layer, checks,
and each configuration against (a) and the targets of issue 11.

Gap per layer: (a) step minus the layers' attention and engine kernels
(CUDA events) over L; through attnd: the step's extra time per layer over
(a)'s kernels (step/L - (a) attention - (a) engine work), i.e. what the
client's stream spends per layer on anything but kernels.
Step handed off: host time from the step's first run call to its last
(the pipelined client hands the whole step to attnd before the GPU is done).
Usage: zerocopy_summary.py zc-results.jsonl
"""
import json
import sys


def f(x, nd=1):
    return "-" if x is None else ("%.*f" % (nd, x))


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    a = next((r for r in rows if r["phase"] == "a_inproc"), None)
    L = (a or rows[0])["env"]["layers"] if rows else 32
    print("| config | step p50 µs | ×(a) | attnd GPU per layer µs | submit p50 / p99 µs "
          "| step handed off µs | gap per layer µs | layer-0 check |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        name = r["phase"] + r.get("tag", "")
        if r["phase"] in ("kill", "c_probe") or "timeline" in r and r["phase"] != "a_inproc":
            continue
        if "unavailable" in r:
            print("| %s | not measured: %s | | | | | | |" % (name, r["unavailable"]))
            continue
        if "step_us" not in r:
            err = (r.get("error") or "").strip().splitlines()
            print("| %s | failed: %s | | | | | | |" % (name, err[-1] if err else "see run.log"))
            continue
        st = r["step_us"]["p50"]
        ratio = st / a["step_us"]["p50"] if a and "step_us" in a else None
        if r["phase"] == "a_inproc":
            gpu = r["attn_layer_us"]["p50"]
            gap = r["gap_per_layer_us"]
            sub = handed = "-"
        else:
            gpu = r["diag_kernel_us"]["p50"]
            base = (a["attn_layer_us"]["p50"] + a["engine_layer_us"]["p50"]) if a else None
            gap = st / L - base if base is not None else None
            sub = "%s / %s" % (f(r["submit_us"]["p50"]), f(r["submit_us"]["p99"]))
            handed = f((r.get("step_submit_us") or {}).get("p50"))
        c = r.get("check", {})
        last = r.get("check_last_step")
        chk = "rel L2 %.1e, LSE %.1e, %s%s" % (
            c.get("rel_l2", -1), c.get("lse_err", -1), "ok" if c.get("ok") else "FAIL",
            "" if last is None else ("; last step %s" % ("ok" if last.get("ok") else "FAIL")))
        if r.get("acc_checksum") is not None:
            chk += "; acc %.14g" % r["acc_checksum"]
        if r.get("run_seq_in_send_order") is False:
            chk += "; run_seq OUT OF SEND ORDER (%d steps voided)" % len(r.get("order_errors")
                                                                        or [])
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (name, f(st), f(ratio, 3), f(gpu),
                                                             sub, handed, f(gap, 2), chk))
    timeline(rows)
    parts = [r for r in rows if isinstance(r.get("submit_parts_us"), dict) and
             "total" in r["submit_parts_us"]]
    if parts:
        keys = list(parts[0]["submit_parts_us"])
        print("\nhost submit, parts of run() (median µs per run):\n")
        print("| config | " + " | ".join(keys) + " |")
        print("|---|" + "---|" * len(keys))
        for r in parts:
            print("| %s%s | " % (r["phase"], r.get("tag", "")) +
                  " | ".join(f(r["submit_parts_us"][k]) for k in keys) + " |")
    cparts = [r for r in rows if r.get("c_client") and isinstance(r.get("submit_parts_us"), dict)]
    if cparts:
        keys = list(cparts[0]["submit_parts_us"])
        print("\nC client (libattn prepared runs), host submit parts (median µs per run):\n")
        print("| config | " + " | ".join(keys) + " |")
        print("|---|" + "---|" * len(keys))
        for r in cparts:
            print("| %s%s | " % (r["phase"], r.get("tag", "")) +
                  " | ".join(f(r["submit_parts_us"][k]) for k in keys) + " |")
    for r in rows:
        if r["phase"] == "c_probe":
            print("\nhand-off latency in one process (kernel end stamp on stream A, memop write "
                  "-> first stamp after the wait on stream B; µs p50 / p99 over %s rounds): %s"
                  % (r.get("rounds"), "; ".join(
                      "%s %s / %s" % (k, f(r[k]["p50"], 2), f(r[k]["p99"], 2))
                      for k in ("memop_wait", "spin_kernel", "spin_stamps") if k in r)))
    for r in rows:
        if r["phase"] == "kill":
            print("\nkill test%s: child %r; buffers %s -> %s in %.2f s; another client's run "
                  "afterwards: %s -> %s" % (r.get("tag", ""), r.get("child_said"),
                                             r.get("buffers_before_kill"),
                                             r.get("buffers_after_kill"), r.get("release_s", -1),
                                             (r.get("check_after_kill") or {}).get("ok"),
                                             "PASS" if r.get("ok") else "FAIL"))


def timeline(rows):
    """Per-layer segments on the GPU's clock (median µs), from the stamped passes."""
    tl = [r for r in rows if isinstance(r.get("timeline"), dict)]
    if not tl:
        return
    keys = []
    for r in tl:
        keys += [k for k in r["timeline"] if k not in keys]
    print("\nGPU timeline per layer (%globaltimer stamps; median µs; a separate stamped pass):\n")
    print("| config | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for r in tl:
        t = r["timeline"]
        print("| %s%s | " % (r["phase"], r.get("tag", "")) +
              " | ".join(f(t.get(k), 2) if isinstance(t.get(k), float) else str(t.get(k, "-"))
                         for k in keys) + " |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Zero-copy decode step benchmark (issue 11): an engine-like torch client
and attnd in two processes, against attnd's kernels in-process.

One decode step = 32 layers of B = 64 requests, T = 4096 committed rows,
H_q 32, H_kv 8, d 128, bf16, page 16.  Per layer the client writes q and
the new K/V row with its own kernels, attention runs, and the client
consumes O (acc += O) before the next layer.  Phases (one process each,
bench/gpu/run_zerocopy.sh starts attnd and MPS around them):

  inproc   (a) attnd's kernels through the bench glue (libattn_cuda_bench.so)
           in this process: the engine writes the new rows into its own
           cache, then producer + reducer; no daemon.
  refs     (b)/(b') through attnd: tensors in a cuda_ipc arena by reference,
           ready/done semaphores, async runs (attn.BatchDecodeWrapper,
           transport cuda_ipc), pipelined (a step's 32 runs handed off
           without waiting, replies collected once per step), twice on the
           same pool: b_refs (this round's client: --window unanswered,
           prepared requests, K/V rows attnd reads in place, no events in
           the timed steps) and b_refs_r2 (round 2's: window 16, full
           encoding, events around every run, K/V rows attnd copies).
           With --timeline (attnd started with ATTN_CUDA_TIMELINE=FILE):
           a stamped pass of both instead, GPU timestamps on both sides
           of every layer matched by the runs' semaphore values.
           Reported unavailable, with attnd's reason, when this attnd
           cannot register cuda_ipc buffers or order runs.
  inline   (c) through attnd with today's inline tensors (transport inline).
  kill     a client killed (SIGKILL) mid-step: attnd keeps serving and the
           client's buffers are released (stats), another client's run is
           still correct.

Correctness: layer 0 holds random history (kv_write into attnd's pool, the
same tensors in the in-process cache); its O and LSE are checked against an
fp32 torch reference (rel L2 <= 1e-2, |LSE err| <= 1e-3, no NaN); the
other layers' caches are zero (timing does not depend on the values).

Timing: CUDA events on the client's stream (step), host clocks around
each run call (submit) and inside it (the wrapper's submit_times and the
client's send_times: checks, memops, encode, send), attnd's run_status
(kernel time of a run, CUDA events); (a) also a stamped timeline pass.
Appends to OUT/zc-results.jsonl.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch

B, T, HQ, HKV, D, P, L = 64, 4096, 32, 8, 128, 16, 32
POOL = "zc"


def log(*a):
    print(*a, flush=True)


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def summary(xs):
    return {"p50": pct(xs, 50), "p99": pct(xs, 99), "min": min(xs) if xs else None,
            "n": len(xs)}


class Stamps:
    """GPU timestamps on the client's stream: attn_cuda_stamp_launch (a
    1-thread kernel writing %globaltimer, the clock attnd's
    ATTN_CUDA_TIMELINE stamps share) from the bench glue library, into
    one int64 tensor [steps, layers, points]."""

    def __init__(self, lib, steps, layers, points):
        self.fn = lib.attn_cuda_stamp_launch
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.t = torch.zeros((steps, layers, points), dtype=torch.int64, device="cuda")
        self.base = self.t.data_ptr()
        self.points, self.layers = points, layers

    def __call__(self, step, layer, point, stream):
        rc = self.fn(self.base + 8 * ((step * self.layers + layer) * self.points + point), stream)
        assert rc == 0, rc

    def host(self):
        torch.cuda.synchronize()
        return self.t.cpu().tolist()


def median(xs):
    return statistics.median(xs) if xs else None


class Workload:
    """The step's data, generated the same way in every process (seeded on
    the GPU): page tables, layer-0 history, per-layer q / k_new / v_new."""

    def __init__(self, layers=L, seed=1234):
        dev = "cuda"
        self.layers = layers
        g = torch.Generator(device="cpu").manual_seed(seed)
        self.npages_req = (T + 1 + P - 1) // P  # history + the new row
        self.num_pages = B * self.npages_req + 64  # spare pages stay unused
        perm = torch.randperm(self.num_pages, generator=g)[:B * self.npages_req]
        self.indices = perm.to(torch.int32)
        self.indptr = torch.arange(0, B + 1, dtype=torch.int32) * self.npages_req
        self.last = torch.full((B,), (T + 1) - (self.npages_req - 1) * P, dtype=torch.int32)
        self.lens = torch.full((B,), T + 1, dtype=torch.int32)
        gd = torch.Generator(device=dev).manual_seed(seed + 1)
        # layer-0 history in the pool's NHD page layout [pages, P, HKV, D]
        self.k0 = torch.randn((self.num_pages, P, HKV, D), generator=gd,
                              device=dev).to(torch.bfloat16)
        self.v0 = torch.randn((self.num_pages, P, HKV, D), generator=gd,
                              device=dev).to(torch.bfloat16)
        # per-layer inputs, one seed per layer (so a 1-layer workload is a prefix)
        self.q = torch.empty((layers, B, HQ, D), dtype=torch.bfloat16, device=dev)
        self.k_new = torch.empty((layers, B, HKV, D), dtype=torch.bfloat16, device=dev)
        self.v_new = torch.empty((layers, B, HKV, D), dtype=torch.bfloat16, device=dev)
        for li in range(layers):
            gd.manual_seed(seed + 100 + li)
            self.q[li] = torch.randn((B, HQ, D), generator=gd, device=dev)
            self.k_new[li] = torch.randn((B, HKV, D), generator=gd, device=dev)
            self.v_new[li] = torch.randn((B, HKV, D), generator=gd, device=dev)
        # global row index of each request's new row (logical position T)
        pages = self.indices.view(B, self.npages_req).long()
        self.new_rows = (pages[:, T // P] * P + T % P).to(dev)

    def cache0_with_new(self):
        """Layer-0 K/V after the append (what attnd's pool holds after a run)."""
        k, v = self.k0.clone(), self.v0.clone()
        k.view(-1, HKV, D).index_copy_(0, self.new_rows, self.k_new[0])
        v.view(-1, HKV, D).index_copy_(0, self.new_rows, self.v_new[0])
        return k, v

    def reference0(self):
        """fp32 attention of layer 0: O [B, HQ, D], LSE [B, HQ]."""
        k, v = self.cache0_with_new()
        pages = self.indices.view(B, self.npages_req).long().cuda()
        kk = k[pages].reshape(B, -1, HKV, D)[:, :T + 1].float()  # [B, S, HKV, D]
        vv = v[pages].reshape(B, -1, HKV, D)[:, :T + 1].float()
        q = self.q[0].float().view(B, HKV, HQ // HKV, D)
        s = torch.einsum("bgjd,bsgd->bgjs", q, kk) / math.sqrt(D)
        lse = torch.logsumexp(s, dim=-1)
        o = torch.einsum("bgjs,bsgd->bgjd", torch.softmax(s, dim=-1), vv)
        return o.reshape(B, HQ, D), lse.reshape(B, HQ)


def check0(wl, o, lse, where):
    want_o, want_lse = wl.reference0()
    o, lse = o.float(), lse.float()
    rel = ((o - want_o).norm() / want_o.norm()).item()
    lse_err = (lse - want_lse).abs().max().item()
    nan = bool(torch.isnan(o).any().item() or torch.isnan(lse).any().item())
    ok = rel <= 1e-2 and lse_err <= 1e-3 and not nan
    log("%s layer 0 vs fp32 torch: rel L2 %.2e, |LSE err| %.2e, NaN %s -> %s"
        % (where, rel, lse_err, nan, "ok" if ok else "FAIL"))
    return {"rel_l2": rel, "lse_err": lse_err, "nan": nan, "ok": ok}


# ---- (a) in-process through the bench glue


def phase_inproc(args):
    lib = ctypes.CDLL(args.lib)
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    lib.attnb_create.restype = vp
    lib.attnb_create.argtypes = [u32, vp, vp, vp, u32, u32, u32, u32, u32, u32, u32, u32, u32,
                                 u32, ctypes.c_int64]
    lib.attnb_run.restype = ctypes.c_int
    lib.attnb_run.argtypes = [vp, vp, vp, vp, vp, vp, vp]
    lib.attnb_destroy.argtypes = [vp]
    wl = Workload(args.layers)
    lens, indptr, indices = wl.lens.clone(), wl.indptr.clone(), wl.indices.clone()
    h = lib.attnb_create(B, lens.data_ptr(), indptr.data_ptr(), indices.data_ptr(), HQ, HKV, D,
                         P, 0, 2, 2, 0, 0, 0, wl.num_pages)
    assert h, "attnb_create failed"
    kc = [wl.k0.clone()] + [torch.zeros_like(wl.k0) for _ in range(args.layers - 1)]
    vc = [wl.v0.clone()] + [torch.zeros_like(wl.v0) for _ in range(args.layers - 1)]
    q = torch.empty((B, HQ, D), dtype=torch.bfloat16, device="cuda")
    o = torch.empty_like(q)
    lse = torch.empty((B, HQ), dtype=torch.float32, device="cuda")
    acc = torch.zeros((B, HQ, D), dtype=torch.float32, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def layer(li, ev=None):
        if ev:
            ev[0].record()
        q.copy_(wl.q[li])  # the engine's own kernels: q and the new K/V rows
        kc[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.k_new[li])
        vc[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.v_new[li])
        if ev:
            ev[1].record()
        rv = lib.attnb_run(h, q.data_ptr(), kc[li].data_ptr(), vc[li].data_ptr(), o.data_ptr(),
                           lse.data_ptr(), stream)
        assert rv == 0, rv
        if ev:
            ev[2].record()
        acc.add_(o.float())  # consume O
        if ev:
            ev[3].record()

    layer(0)
    torch.cuda.synchronize()
    res = {"phase": "a_inproc", "check": check0(wl, o, lse, "(a)")}
    steps, attn_us, engine_us = [], [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for s in range(args.steps):
        e0.record()
        for li in range(args.layers):
            layer(li)
        e1.record()
        e1.synchronize()
        steps.append(e0.elapsed_time(e1) * 1e3)
    # per-layer split with events between the layer's parts (a separate pass)
    evs = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(args.layers)]
    for s in range(3):
        for li in range(args.layers):
            layer(li, evs[li])
        torch.cuda.synchronize()
        for ev in evs:
            attn_us.append(ev[1].elapsed_time(ev[2]) * 1e3)
            engine_us.append((ev[0].elapsed_time(ev[1]) + ev[2].elapsed_time(ev[3])) * 1e3)
    # timeline: %globaltimer stamps before the engine's writes, after them,
    # after attention, after the consume (a separate pass: each stamp is a launch)
    stamps = Stamps(lib, 3, args.layers, 4)

    def stamped(s, li):
        stamps(s, li, 0, stream)
        q.copy_(wl.q[li])
        kc[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.k_new[li])
        vc[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.v_new[li])
        stamps(s, li, 1, stream)
        assert lib.attnb_run(h, q.data_ptr(), kc[li].data_ptr(), vc[li].data_ptr(), o.data_ptr(),
                             lse.data_ptr(), stream) == 0
        stamps(s, li, 2, stream)
        acc.add_(o.float())
        stamps(s, li, 3, stream)

    for s in range(3):
        for li in range(args.layers):
            stamped(s, li)
    res["timeline"] = inproc_timeline(stamps.host())
    log("(a) timeline per layer (median us): %s" % json.dumps(res["timeline"]))
    st = statistics.median(steps)
    res.update(step_us=summary(steps), attn_layer_us=summary(attn_us),
               engine_layer_us=summary(engine_us),
               gap_per_layer_us=(st - args.layers * (statistics.median(attn_us) +
                                                     statistics.median(engine_us))) / args.layers)
    log("(a) step p50 %.1f us, attention per layer p50 %.1f us, engine work per layer %.1f us, "
        "gap per layer %.2f us" % (st, res["attn_layer_us"]["p50"], res["engine_layer_us"]["p50"],
                                   res["gap_per_layer_us"]))
    lib.attnb_destroy(h)
    return res


def inproc_timeline(t):
    """(a)'s stamps [step][layer][4] -> median µs per segment of a layer."""
    seg = {"engine_write": [], "attention": [], "consume": [], "stamp": [], "layer_period": []}
    for st in t[1:]:  # the first step warms up
        for li, (c0, c1, c2, c3) in enumerate(st):
            seg["engine_write"].append((c1 - c0) / 1e3)
            seg["attention"].append((c2 - c1) / 1e3)
            seg["consume"].append((c3 - c2) / 1e3)
            if li + 1 < len(st):
                seg["stamp"].append((st[li + 1][0] - c3) / 1e3)
                seg["layer_period"].append((st[li + 1][0] - c0) / 1e3)
    return {k: median(v) for k, v in seg.items()}


def daemon_timeline(t, epochs, attnd_lines):
    """Client stamps [step][layer][4] (before the q/K/V writes, after them =
    ready written next, after the done wait, after the consume) and
    attnd's ATTN_CUDA_TIMELINE lines (by wait value = the run's epoch) ->
    median µs per segment of a layer, on the GPU's one clock."""
    by_epoch = {r["wait"]: r for r in attnd_lines}
    seg = {k: [] for k in ("client_write", "ready_handoff", "attnd_inputs", "attnd_kernels",
                           "done_handoff", "client_consume", "stamp", "layer_period")}
    behind, matched = 0, 0
    for si, st in enumerate(t[1:], 1):
        for li, (c0, c1, c2, c3) in enumerate(st):
            a = by_epoch.get(epochs[si][li])
            if li + 1 < len(st):
                seg["stamp"].append((st[li + 1][0] - c3) / 1e3)
                seg["layer_period"].append((st[li + 1][0] - c0) / 1e3)
            seg["client_write"].append((c1 - c0) / 1e3)
            seg["client_consume"].append((c3 - c2) / 1e3)
            if a is None or not all(a.get(k) for k in ("wait_released", "kernels_start",
                                                        "kernels_end")):
                continue
            matched += 1
            behind += bool(a.get("host_behind"))
            seg["ready_handoff"].append((a["wait_released"] - c1) / 1e3)
            seg["attnd_inputs"].append((a["kernels_start"] - a["wait_released"]) / 1e3)
            seg["attnd_kernels"].append((a["kernels_end"] - a["kernels_start"]) / 1e3)
            seg["done_handoff"].append((c2 - a["kernels_end"]) / 1e3)
    out = {k: median(v) for k, v in seg.items()}
    out["runs_matched"] = matched
    out["attnd_host_behind"] = behind
    return out


# ---- through attnd


def create_pool(c, wl, layers, export=False):
    """The step's pool; with export, an attn.Pool whose k[l]/v[l] are this
    process's torch views of attnd's K/V (for kv_written runs)."""
    import attn
    try:
        c.pool_drop(POOL)
    except Exception:
        pass
    geom = dict(layers=layers, num_pages=wl.num_pages, page_size=P, num_kv_heads=HKV,
                head_dim_qk=D, head_dim_vo=D, kv_dtype="bf16", device="cuda:0")
    if export:
        return attn.Pool.create(c, POOL, **geom)
    c.pool_create(POOL, **geom)
    return None


def load_history(c, wl, layers):
    """Write layer 0's history in chunks under the frame cap."""
    chunk = 256  # pages: 8 MiB of K + 8 MiB of V per message
    k_cpu, v_cpu = wl.k0.view(torch.int16).cpu(), wl.v0.view(torch.int16).cpu()
    t0 = time.perf_counter()
    for p0 in range(0, wl.num_pages, chunk):
        n = min(chunk, wl.num_pages - p0)
        kb = ctypes.string_at(k_cpu[p0].data_ptr(), n * P * HKV * D * 2)
        vb = ctypes.string_at(v_cpu[p0].data_ptr(), n * P * HKV * D * 2)
        c.kv_write(POOL, 0, list(range(p0, p0 + n)), kb, vb)
    log("pool %s: %d layers x %d pages, layer 0 history written in %.1f s"
        % (POOL, layers, wl.num_pages, time.perf_counter() - t0))


def phase_daemon(args, transport):
    """(c) inline, or (b)/(b') by reference, on one pool and plan:
    b_refs (this round's client: pipelined, a window above the step's runs,
    prepared requests, K/V rows read in place by attnd) and b_refs_r2 (the
    second round's client: window 16, events around every run in the timed
    steps, each request encoded in full, K/V rows at an offset attnd copies
    them from).  With --timeline (attnd started with ATTN_CUDA_TIMELINE)
    both run a stamped pass instead: GPU timestamps on both sides of every
    layer, no history, no timed steps."""
    import attn
    wl = Workload(args.layers)
    admin = attn.Client(args.url, timeout=120)
    hello = admin.hello()
    kvw = args.kv_written and transport == "cuda_ipc"
    pool = create_pool(admin, wl, args.layers, export=kvw)
    variants = [("c_inline", dict(pipelined=False))] if transport == "inline" else \
        [("b_refs", dict(pipelined=True)), ("b_refs_r2", dict(pipelined=True, r2=True))]
    if kvw:  # the client writes its K/V rows into the exported pool itself, as (a) does
        variants.append(("b_refs_kvw", dict(pipelined=True, kvw=True)))
    if args.variants:
        variants = [v for v in variants if v[0] in args.variants.split(",")]
    common = {"transport": transport, "mps": os.environ.get("ZC_MPS", "?"),
              "hello_server": {k: v for k, v in hello.get("server", {}).items()
                               if k in ("version", "build_id", "mps", "gpu_handoff")}}
    w = None
    try:  # this attnd's answer first (registration, plan, one run), before the history
        w = attn.BatchDecodeWrapper(args.url, pool=POOL, transport=transport,
                                    arena_bytes=64 << 20, timeout=120,
                                    max_outstanding=args.window)
        w.plan(wl.indptr, wl.indices, wl.last, HQ, HKV, D, P, q_data_type="bf16",
               kv_data_type="bf16")
        probe = [w.empty(s, "bf16") if transport == "cuda_ipc" else
                 torch.zeros(s, dtype=torch.bfloat16, device="cuda")
                 for s in ((B, HQ, D), (B, HKV, D), (B, HKV, D))]
        w.run(*probe, layer=args.layers - 1)
        torch.cuda.synchronize()
    except attn.AttnError as e:
        why = "%s %s: %s" % (e.code, e.field, e.message)
        log("(%s) unavailable: %s" % (transport, why))
        if w is not None:
            w.close()
        return [dict(common, phase=tag, unavailable=why) for tag, _ in variants]
    if not args.timeline:
        load_history(admin, wl, args.layers)
    n_kv = B * HKV * D
    if transport == "cuda_ipc":
        q = w.empty((B, HQ, D), "bf16")
        k_new = w.empty((B, HKV, D), "bf16")
        v_new = w.empty((B, HKV, D), "bf16")
        # 8 bytes into their slots: not 16-aligned, so attnd copies them (round 2)
        k_off = w.empty((n_kv + 8,), "bf16")[4:4 + n_kv].view(B, HKV, D)
        v_off = w.empty((n_kv + 8,), "bf16")[4:4 + n_kv].view(B, HKV, D)
    else:
        q = torch.empty((B, HQ, D), dtype=torch.bfloat16, device="cuda")
        k_new = torch.empty((B, HKV, D), dtype=torch.bfloat16, device="cuda")
        v_new = torch.empty_like(k_new)
        k_off, v_off = k_new, v_new
    stamps = None
    if args.timeline:
        stamps = Stamps(ctypes.CDLL(args.lib), 3, args.layers, 4)
    results = []
    for tag, how in variants:
        r2 = how.get("r2", False)
        w.pipelined = how["pipelined"]
        w.prepared = not r2
        w.client.max_outstanding = 16 if r2 else args.window
        inputs = (q, k_off, v_off) if r2 else (q, k_new, v_new)
        if how.get("kvw"):
            inputs = (q, pool, None)  # daemon_layer: rows into pool.k[l] / pool.v[l]
        try:
            if stamps is not None:
                results.append(timeline_daemon(args, w, wl, tag, common, inputs, stamps))
            else:
                results.append(measure_daemon(args, w, wl, tag, how["pipelined"], r2, common,
                                              inputs))
        except Exception:  # recorded; the next variant still runs
            import traceback
            traceback.print_exc()
            results.append(dict(common, phase=tag, error=traceback.format_exc()[-2000:]))
    if args.c_client and transport == "cuda_ipc":
        results += run_c_client(args, wl, common)
    stats = admin.stats()["counters"]
    for r in results:
        r["buffers_live_before_close"] = stats.get("buffers")
    w.close()
    if pool is not None:
        pool.close()
    admin.close()
    return results


def write_workload(wl, path):
    """The step's page table and every layer's q / k_new / v_new for the C
    client (bench/gpu/zc_client.cu's load_workload reads this layout)."""
    import struct
    with open(path, "wb") as f:
        f.write(struct.pack("<9I", 0x7A637731, B, HQ, HKV, D, P, wl.layers, len(wl.indices), T))
        for t in (wl.indptr, wl.indices, wl.last):
            f.write(t.to(torch.int32).contiguous().numpy().tobytes())
        for t in (wl.q, wl.k_new, wl.v_new):
            f.write(t.contiguous().view(torch.int16).cpu().numpy().tobytes())


def run_c_client(args, wl, common):
    """(b) through libattn's C prepared runs: bench/gpu/zc_client.cu on the
    same pool (layer 0's history in it) and workload, one row per variant
    of its done wait, plus its in-process hand-off probe; its layer-0
    outputs checked here against the fp32 torch reference."""
    import subprocess
    import tempfile
    tmp = tempfile.mkdtemp(prefix="zc-c-")
    data = os.path.join(tmp, "workload.bin")
    write_workload(wl, data)
    cmd = [args.c_client, "--url", args.url, "--pool", POOL, "--data", data, "--out", tmp,
           "--steps", str(args.steps), "--window", str(args.window),
           "--variants", args.c_variants]
    cmd += ["--stamped", "1"] if args.timeline else ["--probe", "200"]
    # attnd's timeline lines of the C client's runs: those written after this point
    tl_from = os.path.getsize(args.timeline) if args.timeline and \
        os.path.exists(args.timeline) else 0
    log("(b_c) " + " ".join(cmd))
    # its lines are logged as they come (a hung client still leaves what it
    # printed), and it is killed after --c-timeout seconds
    import threading
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killer = threading.Timer(args.c_timeout, p.kill)
    killer.start()
    lines_out = []
    for line in p.stdout:
        lines_out.append(line)
        log("(b_c) " + line.rstrip()[:3000])
    rc = p.wait()
    killer.cancel()
    out = "".join(lines_out)
    err = "killed after %d s" % args.c_timeout if rc == -9 else out[-1500:]
    rows = []
    n_o, n_lse = B * HQ * D, B * HQ
    for line in out.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # logged above
        if "stamped" in r:
            time.sleep(0.5)  # attnd writes a run's line once it completed
            with open(args.timeline) as f:
                f.seek(tl_from)
                lines = []
                for line in f:
                    try:
                        lines.append(json.loads(line))
                    except ValueError:
                        pass
            L_, st = r["layers"], r["stamps"]
            t = [[st[(s_ * L_ + li) * 4:(s_ * L_ + li) * 4 + 4] for li in range(L_)]
                 for s_ in range(len(st) // (4 * L_))]
            epochs = [r["waits"][s_ * L_:(s_ + 1) * L_] for s_ in range(len(t))]
            tl = daemon_timeline(t, epochs, lines)
            log("(b_c_%s, timeline) per layer (median us): %s" % (r["stamped"], json.dumps(tl)))
            rows.append(dict(common, phase="b_c_%s_timeline" % r["stamped"], timeline=tl,
                             c_client=True, ok=r["ok"]))
            continue
        if "probe" in r:
            log("(b_c) hand-off probe (in process, us): %s" % json.dumps(r))
            rows.append(dict(common, phase="c_probe", **r))
            continue
        v = r["variant"]
        r = dict(common, phase="b_c_" + v, c_client=True, **r)
        if r["ok"]:
            def load(name, dtype, n):
                t = torch.from_file(os.path.join(tmp, name), size=n, dtype=dtype)
                return t.cuda()
            for i, key in ((0, "check"), (1, "check_last_step")):
                o = load("c_%s_o0_%d.bin" % (v, i), torch.bfloat16, n_o).view(B, HQ, D)
                lse = load("c_%s_lse0_%d.bin" % (v, i), torch.float32, n_lse).view(B, HQ)
                r[key] = check0(wl, o, lse, "(b_c_%s%s)" % (v, ", last step" if i else ""))
            acc = load("c_%s_acc.bin" % v, torch.float32, n_o)
            r["acc_checksum"] = float(acc.double().sum().item())
        log("(b_c_%s) step p50 %s us, submit p50 %s p99 %s us, attnd kernels per layer p50 %s "
            "us; parts %s; acc %s" % (v, r["step_us"]["p50"], r["submit_us"]["p50"],
                                      r["submit_us"]["p99"], r["diag_kernel_us"]["p50"],
                                      json.dumps(r["submit_parts_us"]), r.get("acc_checksum")))
        rows.append(r)
    if rc != 0 or not rows:
        rows.append(dict(common, phase="b_c", error="zc_client exit %s: %s" % (rc, err[-1500:])))
    return rows


def daemon_layer(w, wl, inputs, li, acc, out=None, hook=None):
    """One layer of the engine-like client: write q and the new K/V rows,
    attention through attnd, consume O.  inputs: (q, k_new, v_new), or (q,
    an exported attn.Pool, None): the rows written into the pool's views
    (index_copy_, as (a) writes its own cache) and the run kv_written.
    hook(point) marks the layer's boundaries (0 before the writes, 1 after
    them, 2 after run(), 3 after the consume)."""
    q, k_new, v_new = inputs
    pool = k_new if v_new is None else None
    if hook:
        hook(0)
    q.copy_(wl.q[li])
    if pool is not None:
        pool.k[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.k_new[li])
        pool.v[li].view(-1, HKV, D).index_copy_(0, wl.new_rows, wl.v_new[li])
        rows = {"kv_written": True}
    else:
        k_new.copy_(wl.k_new[li])
        v_new.copy_(wl.v_new[li])
        rows = {"k_new": k_new, "v_new": v_new}
    if hook:
        hook(1)
    if li == 0:
        o, lse = w.run(q, layer=li, return_lse=True, **rows)
    else:
        o, lse = w.run(q, layer=li, **rows), None
    if hook:
        hook(2)
    if out is not None and li == 0:
        out["o0"], out["lse0"] = o.clone(), lse.clone()
    acc.add_(o.float())
    if hook:
        hook(3)


def collect_step(w, tag, order_errors):
    """The step's replies (pipelined); False when attnd enqueued two of them
    out of the order sent (E_ORDER: the wrapper released the stream, the
    step's timing and outputs are void)."""
    import attn
    if not w.pipelined:
        return []
    try:
        return w.collect()
    except attn.AttnError as e:
        if e.code != "E_ORDER":
            raise
        order_errors.append(e.message)
        log("(%s) %s" % (tag, e.message))
        return None


def warm_up(args, w, wl, inputs, acc, tag, out=None):
    for _ in range(3):  # every kernel loaded, plan cached, prepared request made
        for li in range(args.layers):
            daemon_layer(w, wl, inputs, li, acc, out)
        ok = collect_step(w, tag, []) is not None
        torch.cuda.synchronize()
        if ok:
            return


def timeline_daemon(args, w, wl, tag, common, inputs, stamps):
    """3 stamped steps (the first warms up): the client's stamps and
    attnd's ATTN_CUDA_TIMELINE lines, matched by the run's epoch."""
    acc = torch.zeros((B, HQ, D), dtype=torch.float32, device="cuda")
    warm_up(args, w, wl, inputs, acc, tag)
    stream = torch.cuda.current_stream().cuda_stream
    epochs = [[0] * args.layers for _ in range(3)]
    order_errors = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    step_us = []
    for s in range(3):
        e0.record()
        for li in range(args.layers):
            daemon_layer(w, wl, inputs, li, acc,
                         hook=lambda pt, s=s, li=li: stamps(s, li, pt, stream))
            epochs[s][li] = w._epoch
        e1.record()
        collect_step(w, tag, order_errors)
        e1.synchronize()
        step_us.append(e0.elapsed_time(e1) * 1e3)
    t = stamps.host()
    lines = []
    with open(args.timeline) as f:
        for line in f:
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    tl = daemon_timeline(t, epochs, lines)
    log("(%s, timeline) per layer (median us): %s" % (tag, json.dumps(tl)))
    return dict(common, phase=tag + "_timeline", timeline=tl, stamped_step_us=summary(step_us),
                order_errors=order_errors)


def measure_daemon(args, w, wl, tag, pipelined, r2, common, inputs):
    res = dict(common, phase=tag, pipelined=pipelined,
               window=w.client.max_outstanding if pipelined else 1, r2_client=r2)
    acc = torch.zeros((B, HQ, D), dtype=torch.float32, device="cuda")
    diag_us, host_us, wait_us, seqs, step_submit = [], [], [], [], []
    out = {}

    def note(rep):
        d = (rep or {}).get("diag") or {}
        if isinstance(d.get("timing_us"), (int, float)):
            diag_us.append(d["timing_us"])
        if isinstance(d.get("host_timing_us"), (int, float)):
            host_us.append(d["host_timing_us"])
        if (rep or {}).get("run_seq"):
            seqs.append(rep["run_seq"])

    warm_up(args, w, wl, inputs, acc, tag, out)
    res["check"] = check0(wl, out["o0"], out["lse0"], "(%s)" % tag)
    order_errors, steps_ev, steps_wall = [], [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    evs = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(args.layers)]
    inline = w.transport == "inline"
    submit = []  # host µs of each run() call
    w.submit_times, w.client.send_times = [], []
    for s in range(args.steps):
        t0 = time.perf_counter()
        e0.record()
        for li in range(args.layers):
            ev = evs[li] if r2 else None  # round 2 recorded them in the timed steps
            t_a = [0.0]

            def hook(pt, ev=ev, t_a=t_a):
                if pt == 1:
                    if ev:
                        ev[0].record()
                    t_a[0] = time.perf_counter()
                elif pt == 2:
                    submit.append((time.perf_counter() - t_a[0]) * 1e6)
                    if ev:
                        ev[1].record()
            daemon_layer(w, wl, inputs, li, acc, out, hook)
            if not pipelined:
                note(w.last_reply)
        e1.record()
        t_handed = (time.perf_counter() - t0) * 1e6
        reps = collect_step(w, tag, order_errors)
        e1.synchronize()
        if reps is None:
            continue
        for rep in reps:
            note(rep)
        step_submit.append(t_handed)
        steps_wall.append((time.perf_counter() - t0) * 1e6)
        steps_ev.append(e0.elapsed_time(e1) * 1e3)
        if r2:
            for ev in evs:
                wait_us.append(ev[0].elapsed_time(ev[1]) * 1e3)
    res["submit_parts_us"] = submit_parts(w.submit_times, w.client.send_times, inline)
    w.submit_times, w.client.send_times = None, None
    # the last step's layer 0 again checked: pipelining did not reorder anything
    res["check_last_step"] = check0(wl, out["o0"], out["lse0"], "(%s, last step)" % tag)
    engine_us, queued_us = [], []
    for seq in seqs[-4 * args.layers:]:  # async runs: the GPU time comes from run_status
        st = w.client.run_status(seq)
        if isinstance(st.get("engine_us"), (int, float)) and st.get("state") == "done":
            engine_us.append(st["engine_us"])
            queued_us.append(st.get("queued_us") or 0)
    if engine_us:
        diag_us[:] = engine_us
        res["run_status_queued_us"] = summary(queued_us)
    res["run_seq_in_send_order"] = seqs == sorted(seqs) and not order_errors
    res["order_errors"] = order_errors  # steps voided: attnd enqueued runs out of send order
    res.update(step_us=summary(steps_ev), step_wall_us=summary(steps_wall),
               step_submit_us=summary(step_submit), submit_us=summary(submit),
               diag_kernel_us=summary(diag_us), diag_host_us=summary(host_us),
               run_window_on_client_stream_us=summary(wait_us),
               acc_checksum=float(acc.double().sum().item()))
    log("(%s) step p50 %.1f us (wall %.1f, whole step handed off in %.1f), submit p50 %.1f "
        "p99 %.1f us, attnd kernels per layer p50 %s us; submit parts %s"
        % (tag, res["step_us"]["p50"], res["step_wall_us"]["p50"], res["step_submit_us"]["p50"],
           res["submit_us"]["p50"], res["submit_us"]["p99"], res["diag_kernel_us"]["p50"],
           json.dumps(res["submit_parts_us"])))
    return res


def submit_parts(wt, st, inline):
    """Medians (µs) of the parts of run() on the cuda_ipc path: the
    wrapper's (entered, checked, ready written, request sent, done wait
    enqueued) and the client's send (entered, room made + fields, encoded,
    sent), one of each per run."""
    if inline or not wt or len(wt) != len(st):
        return {"runs": len(wt or []), "sends": len(st or [])}
    parts = {k: [] for k in ("checks_and_refs", "ready_memop", "before_send", "window_wait",
                             "encode", "nng_send", "after_send", "done_memop", "total")}
    for (a0, a1, a2, a3, a4), (s0, s1, s2, s3) in zip(wt, st):
        parts["checks_and_refs"].append(a1 - a0)
        parts["ready_memop"].append(a2 - a1)
        parts["before_send"].append(s0 - a2)
        parts["window_wait"].append(s1 - s0)
        parts["encode"].append(s2 - s1)
        parts["nng_send"].append(s3 - s2)
        parts["after_send"].append(a3 - s3)
        parts["done_memop"].append(a4 - a3)
        parts["total"].append(a4 - a0)
    return {k: median(v) / 1e3 for k, v in parts.items()}


def phase_kill(args):
    """A child client is SIGKILLed mid-step; attnd must keep serving, release
    the child's buffers, and a fresh client's run must still be right."""
    import subprocess
    import attn
    res = {"phase": "kill"}
    child = subprocess.Popen([sys.executable, __file__, "--phase", "kill-child", "--url",
                              args.url, "--layers", str(args.layers)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        for _ in range(200):  # its say-so ("waiting ..." / "running ..."), past any warnings
            line = child.stdout.readline()
            if not line or line.startswith(("waiting", "running")):
                break
        line = line.strip()
        time.sleep(0.3)
        admin = attn.Client(args.url, timeout=60)
        before = admin.stats()["counters"].get("buffers")
    finally:
        child.kill()
        child.wait()
    t0 = time.perf_counter()
    after = None
    while time.perf_counter() - t0 < 10:
        after = admin.stats()["counters"].get("buffers")
        if after == 0:
            break
        time.sleep(0.05)
    res.update(child_said=line, buffers_before_kill=before, buffers_after_kill=after,
               release_s=time.perf_counter() - t0)
    # attnd still serves: a full layer-0 run by another client, checked
    wl = Workload(1)
    w = attn.BatchDecodeWrapper(args.url, pool=POOL, transport="inline", timeout=60)
    w.plan(wl.indptr, wl.indices, wl.last, HQ, HKV, D, P, q_data_type="bf16")
    o, l = w.run(wl.q[0], wl.k_new[0], wl.v_new[0], layer=0, return_lse=True)
    res["check_after_kill"] = check0(wl, o, l, "(kill: another client afterwards)")
    w.close()
    admin.close()
    res["ok"] = after == 0 and res["check_after_kill"]["ok"] and bool(before)
    log("kill test: child %r, buffers %s -> %s in %.2f s, attnd served afterwards: %s"
        % (line, before, after, res["release_s"], res["ok"]))
    return res


def phase_kill_child(args):
    """Steps of async runs through a cuda_ipc arena (the stream synchronised
    per step, as an engine would), then one run whose wait nobody will ever
    satisfy, and sleeps until killed: attnd must release that wait when the
    connection goes.  Where this attnd has no cuda_ipc buffers: inline runs
    while holding a registered shm buffer."""
    import attn
    wl = Workload(args.layers)
    try:
        w = attn.BatchDecodeWrapper(args.url, pool=POOL, transport="cuda_ipc", timeout=60)
        w.plan(wl.indptr, wl.indices, wl.last, HQ, HKV, D, P, q_data_type="bf16")
        q, k, v = (w.empty((B, HQ, D), "bf16"), w.empty((B, HKV, D), "bf16"),
                   w.empty((B, HKV, D), "bf16"))
        w.run(q, k, v, layer=0)
        transport = "cuda_ipc"
    except attn.AttnError as e:
        transport = "shm+inline (cuda_ipc: %s %s)" % (e.code, e.field)
        w = attn.BatchDecodeWrapper(args.url, pool=POOL, transport="inline", timeout=60)
        held = attn.ShmArena(w.client, 1 << 20)  # noqa: F841 (held until killed)
        w.plan(wl.indptr, wl.indices, wl.last, HQ, HKV, D, P, q_data_type="bf16")
        q, k, v = wl.q[0], wl.k_new[0], wl.v_new[0]
    for step in range(3):
        for li in range(args.layers):
            if transport == "cuda_ipc":
                q.copy_(wl.q[li])
                k.copy_(wl.k_new[li])
                v.copy_(wl.v_new[li])
            w.run(q, k, v, layer=li)
        torch.cuda.current_stream().synchronize()
    if transport == "cuda_ipc":
        a, p = w.arena, w._plan
        sl = p["slots"]
        r = lambda n: attn.ref(a.buf, sl[n][0], sl[n][1])  # noqa: E731
        w.client.run(p["id"], 0, r("q"), r("k_new"), r("v_new"), o=r("o"),
                     wait=attn.sem(a.buf, 0, 1 << 40), signal=attn.sem(a.buf, 8, 1 << 40),
                     async_=True).wait()
        print("waiting: %s, one run enqueued behind a semaphore nobody writes" % transport,
              flush=True)
        while True:
            time.sleep(1)
    print("running %s" % transport, flush=True)
    li = 0
    while True:
        li = (li + 1) % args.layers
        w.run(q, k, v, layer=li)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", required=True,
                    choices=["inproc", "refs", "inline", "kill", "kill-child"])
    ap.add_argument("--url", default="ipc:///tmp/attnd-zc.sock")
    ap.add_argument("--lib", default="build-gpu/lib/libattn_cuda_bench.so")
    ap.add_argument("--layers", type=int, default=L)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--window", type=int, default=64,
                    help="pipelined runs unanswered at once (attnd: --conn-inflight above it)")
    ap.add_argument("--timeline", default="",
                    help="attnd's ATTN_CUDA_TIMELINE file: stamped passes instead of timed steps")
    ap.add_argument("--variants", default="", help="comma-separated subset of the variants")
    ap.add_argument("--kv-written", action="store_true",
                    help="refs: an exported pool and the variant b_refs_kvw (the client writes "
                         "its K/V rows into it, runs say kv_written)")
    ap.add_argument("--c-client", default="",
                    help="refs: also run bench/gpu/zc_client (libattn's prepared runs, C) on "
                         "the same pool and workload")
    ap.add_argument("--c-variants", default="memop,spin,oneword",
                    help="the C client's done waits to measure, in this order")
    ap.add_argument("--c-timeout", type=int, default=25)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    if args.phase == "kill-child":
        return phase_kill_child(args)
    fn = {"inproc": phase_inproc, "refs": lambda a: phase_daemon(a, "cuda_ipc"),
          "inline": lambda a: phase_daemon(a, "inline"), "kill": phase_kill}[args.phase]
    try:
        res = fn(args)
    except Exception:  # recorded, so the summary says which phase broke and how
        import traceback
        traceback.print_exc()
        res = {"phase": args.phase, "error": traceback.format_exc()[-2000:]}
    env = {"CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING"),
                  "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                  "layers": args.layers, "steps": args.steps,
                  "shape": dict(B=B, T=T, HQ=HQ, HKV=HKV, D=D, P=P, dtype="bf16")}
    with open(os.path.join(args.out, "zc-results.jsonl"), "a") as f:
        for r in res if isinstance(res, list) else [res]:
            r["env"], r["tag"] = env, args.tag
            f.write(json.dumps(r, default=str) + "\n")


if __name__ == "__main__":
    main()

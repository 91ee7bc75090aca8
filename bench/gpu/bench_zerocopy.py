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
           transport cuda_ipc), twice on the same pool: b_refs_blocking
           (each run waits for its reply, the first round's client) and
           b_refs (pipelined: the step's 32 runs handed off without
           waiting, --window unanswered at most, replies collected once
           per step).  Reported unavailable, with attnd's reason,
           when this attnd cannot register cuda_ipc buffers or order runs.
  inline   (c) through attnd with today's inline tensors (transport inline).
  kill     a client killed (SIGKILL) mid-step: attnd keeps serving and the
           client's buffers are released (stats), another client's run is
           still correct.

Correctness: layer 0 holds random history (kv_write into attnd's pool, the
same tensors in the in-process cache); its O and LSE are checked against an
fp32 torch reference (rel L2 <= 1e-2, |LSE err| <= 1e-3, no NaN); the
other layers' caches are zero (timing does not depend on the values).

Timing: CUDA events on the client's stream (step, per layer), host clocks
around each run call (submit), attnd's diagnostic (kernel time of a run,
CUDA events) where the reply carries one.  Writes OUT/zc-<phase>.json.
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


# ---- through attnd


def create_pool(c, wl, layers):
    try:
        c.pool_drop(POOL)
    except Exception:
        pass
    c.pool_create(POOL, layers=layers, num_pages=wl.num_pages, page_size=P, num_kv_heads=HKV,
                  head_dim_qk=D, head_dim_vo=D, kv_dtype="bf16", device="cuda:0")


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
    """(c) inline, or (b)/(b') by reference: the pipelined client (b_refs:
    a whole step's runs submitted without waiting for replies, collected
    once per step) and the blocking one (b_refs_blocking: each run waits
    for its reply, as in the first round), on the same pool and plan."""
    import attn
    wl = Workload(args.layers)
    admin = attn.Client(args.url, timeout=120)
    hello = admin.hello()
    create_pool(admin, wl, args.layers)
    variants = [("c_inline", False)] if transport == "inline" else \
        [("b_refs_blocking", False), ("b_refs", True)]
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
    load_history(admin, wl, args.layers)
    if transport == "cuda_ipc":
        q = w.empty((B, HQ, D), "bf16")
        k_new = w.empty((B, HKV, D), "bf16")
        v_new = w.empty((B, HKV, D), "bf16")
    else:
        q = torch.empty((B, HQ, D), dtype=torch.bfloat16, device="cuda")
        k_new = torch.empty((B, HKV, D), dtype=torch.bfloat16, device="cuda")
        v_new = torch.empty_like(k_new)
    results = []
    for tag, pipelined in variants:
        w.pipelined = pipelined
        try:
            results.append(measure_daemon(args, w, wl, admin, tag, pipelined, common,
                                          (q, k_new, v_new)))
        except Exception:  # recorded; the next variant still runs
            import traceback
            traceback.print_exc()
            results.append(dict(common, phase=tag, error=traceback.format_exc()[-2000:]))
    stats = admin.stats()["counters"]
    for r in results:
        r["buffers_live_before_close"] = stats.get("buffers")
    w.close()
    admin.close()
    return results


def measure_daemon(args, w, wl, admin, tag, pipelined, common, inputs):
    import attn
    q, k_new, v_new = inputs
    res = dict(common, phase=tag, pipelined=pipelined,
               window=w.client.max_outstanding if pipelined else 1)
    acc = torch.zeros((B, HQ, D), dtype=torch.float32, device="cuda")
    submit, diag_us, host_us, wait_us, seqs, step_submit = [], [], [], [], [], []
    out = {}

    def note(rep):
        d = (rep or {}).get("diag") or {}
        if isinstance(d.get("timing_us"), (int, float)):
            diag_us.append(d["timing_us"])
        if isinstance(d.get("host_timing_us"), (int, float)):
            host_us.append(d["host_timing_us"])
        if (rep or {}).get("run_seq"):
            seqs.append(rep["run_seq"])

    def layer(li, ev=None, record=True):
        q.copy_(wl.q[li])
        k_new.copy_(wl.k_new[li])
        v_new.copy_(wl.v_new[li])
        if ev:
            ev[0].record()
        t0 = time.perf_counter()
        if li == 0:
            o, l = w.run(q, k_new, v_new, layer=li, return_lse=True)
        else:
            o, l = w.run(q, k_new, v_new, layer=li), None
        t1 = time.perf_counter()
        if ev:
            ev[1].record()
        if record:
            submit.append((t1 - t0) * 1e6)
            if not pipelined:
                note(w.last_reply)
        if li == 0:
            out["o0"], out["lse0"] = o.clone(), l.clone()
        acc.add_(o.float())

    order_errors = []

    def collect(record=True):
        """The step's replies; False when attnd enqueued two of them out of
        the order sent (E_ORDER: the wrapper released the stream, the step's
        timing and outputs are void)."""
        if not pipelined:
            return True
        try:
            reps = w.collect()
        except attn.AttnError as e:
            if e.code != "E_ORDER":
                raise
            order_errors.append(e.message)
            log("(%s) %s" % (tag, e.message))
            return False
        for rep in reps:
            if record:
                note(rep)
        return True

    for _ in range(3):  # warm-up step: every kernel loaded, plan cached
        for li in range(args.layers):
            layer(li, record=False)
        ok = collect(record=False)
        torch.cuda.synchronize()
        if ok:
            break
    res["check"] = check0(wl, out["o0"], out["lse0"], "(%s)" % tag)
    steps_ev, steps_wall = [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    evs = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(args.layers)]
    for s in range(args.steps):
        t0 = time.perf_counter()
        e0.record()
        for li in range(args.layers):
            layer(li, evs[li])
        e1.record()
        t_handed = (time.perf_counter() - t0) * 1e6
        ok = collect()  # the replies, after the whole step was handed off
        e1.synchronize()
        if not ok:
            continue
        step_submit.append(t_handed)
        steps_wall.append((time.perf_counter() - t0) * 1e6)
        steps_ev.append(e0.elapsed_time(e1) * 1e3)
        for ev in evs:
            wait_us.append(ev[0].elapsed_time(ev[1]) * 1e3)
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
        "p99 %.1f us, attnd kernels per layer p50 %s us, client stream per run p50 %.1f us"
        % (tag, res["step_us"]["p50"], res["step_wall_us"]["p50"], res["step_submit_us"]["p50"],
           res["submit_us"]["p50"], res["submit_us"]["p99"], res["diag_kernel_us"]["p50"],
           res["run_window_on_client_stream_us"]["p50"]))
    return res


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
    ap.add_argument("--window", type=int, default=16,
                    help="pipelined runs unanswered at once (attnd: --conn-inflight above it)")
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

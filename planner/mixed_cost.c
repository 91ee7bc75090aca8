/* The mixed-batch cost model (mixed_cost.h). */
#include "planner/mixed_cost.h"

#include <stdio.h>
#include <string.h>

/* Calibrated on a lent H200 (132 SMs, driver 580.159.04) on 2026-12-01 at
 * 11:29 UTC from bench/gpu/bench_mixed.py (bench/results/
 * mixed-h200-2026-12-01.json): the prefill kernel ran 3.24-3.44 us per
 * executed 128 x 128 x d128 tile per SM in every batch (M4 prefill-only
 * 66560 tiles in 1.618 ms; unified M1/M2/M3/M5/M4-decode 3.27/3.41/3.24/
 * 3.40/3.44), so 3.25; the decode kernels read the decode rows' K/V at
 * 3.8 TB/s (M4 decode-only: 2148 MB in 0.578 ms, append included).  With
 * these the model is within 10 % of every measured strategy and picks the
 * measured best (partition) on M1-M5 (tests/unit/test_mixed_cost.c). */
static const attn_mixed_cost_consts k_h200 = {
    .tile_us = 3.25,
    .launch_us = 4.0,
    .decode_gbps = 3800.0,
    .decode_fixed_us = 8.0,
};

const attn_mixed_cost_consts *attn_mixed_cost_h200(void)
{
    return &k_h200;
}

/* One persistent launch of the prefill kernel: the SMs share the tiles,
 * but no launch ends before its longest work item. */
static double prefill_launch_us(uint64_t tiles, uint64_t longest, const attn_mixed_cost_in *in,
                                const attn_mixed_cost_consts *k)
{
    if (tiles == 0)
        return 0;
    const double per_tile =
        k->tile_us * (double)in->tile_n * (double)in->head_dim / (128.0 * 128.0);
    const double sms = in->num_sms ? (double)in->num_sms : 1.0;
    double waves = (double)tiles / sms;
    if ((double)longest > waves)
        waves = (double)longest;
    return k->launch_us + waves * per_tile;
}

void attn_mixed_cost_estimate(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k,
                              int partition_ok, attn_mixed_cost *out)
{
    memset(out, 0, sizeof *out);
    out->unified_us = prefill_launch_us(in->unified_tiles, in->unified_longest, in, k);
    out->partition_us = -1;
    if (partition_ok) {
        double dec = 0;
        if (in->decode_requests)
            dec = k->launch_us + k->decode_fixed_us +
                  (double)in->decode_kv_bytes / (k->decode_gbps * 1e3); /* GB/s -> bytes/us */
        out->partition_us = prefill_launch_us(in->prefill_tiles, in->prefill_longest, in, k) + dec;
    }
    const int part = partition_ok && out->partition_us < out->unified_us;
    out->pick = part ? ATTN_SCHED_PARTITION : ATTN_SCHED_UNIFIED;
    if (!partition_ok)
        snprintf(out->why, sizeof out->why,
                 "auto: unified est. %.0f us; partition not admitted for this batch",
                 out->unified_us);
    else
        snprintf(out->why, sizeof out->why,
                 "auto: %s est. %.0f us, %s %.0f us (%llu prefill-kernel tiles for %u decode rows, "
                 "%.1f MB of decode K/V)",
                 part ? "partition" : "unified", part ? out->partition_us : out->unified_us,
                 part ? "unified" : "partition", part ? out->unified_us : out->partition_us,
                 (unsigned long long)(in->unified_tiles - in->prefill_tiles), in->decode_requests,
                 (double)in->decode_kv_bytes / 1e6);
}

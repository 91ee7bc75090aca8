/* The mixed-batch cost model (mixed_cost.h). */
#include "planner/mixed_cost.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calibrated on a lent H200 (132 SMs) by bench/gpu/calibrate_mixed.py.
 * Now (2026-12-03, third session, bench/results/mixed-h200-2026-12-03-r30/:
 * call 1 on main d220d36, the prefill kernel with V's boxes as whole pages
 * from a second producer warp, 8-18 % faster than the kernel of the fit
 * below, two processes; call 2, the documented run on 976d8e1, M1-M5, M4 and
 * the small steps S1-S4; FlashInfer in the process): tile_us 1.72 and
 * unit_us 5.0 from the prefill kernel alone on M1-M5's prefill rows at
 * twelve caps and the whole machine (call 1, 130 runs; prefill_fixed_us and
 * combine_us given, below); decode_gbps 4505 from M4 decode-only;
 * unified_decode_gbps 4060 (new) over the 19 unified runs (tile_us alone
 * priced unified M2 and M5 14 % low: their decode rows' tiles did not get
 * faster with the prefill rows' ones; M within 3 % now, the small steps
 * 13-21 % low); over the forks within 1.15x of their batch's best (141 runs
 * of both calls), with the decode grid's waves on the free SMs (new:
 * mixed_cost.h), decode_sat_sms 60, interference 0.28, fork_us 14 (the
 * probe: the capped grid ran 575 us beside M5's decode kernels at cap 74
 * against 478 alone).  Every batch of the three processes runs its pick
 * within 1 % of its best measured cap (M2 80 against 66-80, 0.2-0.8 %),
 * and the small steps within 2 % of their best variant but S1 (unified,
 * 1.07x its fork at cap 96; tests/unit/test_mixed_cost.c
 * test_decode_waves); without the wave term S3 forked at cap 70 (213 us,
 * three waves of its 256 decode CTAs on 62 free SMs) against cap 66's 186.
 * light_factor scaled by the full kernel's span at S 4096 (2.07 x 1.19:
 * the light kernel did not change, the span it multiplies shrank) and
 * overlap_hide 0.16 -> 0.20 for the fork now counted apart (14-18 us of
 * M2's and M5's 489 us of decode), both on round 5's overlap runs below.
 * The fits before, kept as the history of each constant:
 * - tile_us and unit_us (2026-12-02, session i, calls 1 and 2, main
 *   494d75c's kernels; bench/results/mixed-h200-2026-12-02-r23-caps/) from
 *   the prefill kernel alone on M1, M2, M3 and M5's prefill rows at 14 caps
 *   each (56 runs): 2.12 us per 128 x 128 x d128 tile and 4.8 us per unit
 *   (work item x K/V head) beyond its tiles (round 4 of
 *   docs/cuda-prefill.md measured ~2.3 and ~6).  Without the unit term one
 *   tile_us could not serve both M1 (57 tiles a unit: 1.262 ms alone at cap
 *   100, 2.18 us a tile) and M2 (16.5: 0.646 ms at cap 66, 2.52 us a tile);
 * - decode_gbps, decode_sat_sms, interference and fork_us (2026-12-02,
 *   session j, call 4, the decode copy warps without run-time divisions;
 *   bench/results/mixed-h200-2026-12-02-r26-box/, three processes, tile_us
 *   and unit_us kept: the prefill kernel did not change): decode_gbps from
 *   M4 decode-only (2148 MB at 4.48 TB/s); the rest over the prefill-first
 *   forks at 16 caps (58..120) that ran within 1.15x of their batch's best:
 *   the decode kernels beside the capped grid read ~70 GB/s per free SM
 *   (4483 / 64; 51 before the copy warps lost their divisions), and the
 *   time they overlap it costs 22 % more.
 * - prefill_fixed_us and combine_us (2026-12-03, the prefill kernel alone
 *   on the prefill rows of the small steps S1-S4 at five caps, call 1 of
 *   that day, bench/results/mixed-h200-2026-12-03-r29-small/, pooled with
 *   the 56 runs of session i's calls 1 and 2 behind tile_us and unit_us):
 *   with tile_us and unit_us kept, 15 us of the kernel's own per launch
 *   (its first Q loads and ring fill, last epilogue, the grid's drain) and
 *   10 us for the combine kernel after a launch that cuts m tiles; the sum
 *   of absolute relative errors over the 76 runs 8.68 -> 2.63 (the small
 *   steps' launches had been estimated 15-30 us low, 30-60 %, the long ones
 *   within a few %).  Then interference refitted with them on session j's
 *   rows (0.22 -> 0.20; decode_sat_sms and fork_us the same).
 * Over the twelve candidate caps every batch of session j's three
 * processes runs its pick within 3.1 % of its best measured cap (M1 108
 * against 104: 1.5 %; M2 78 against 80: 0.2-0.6 %; M5, the same inputs,
 * 78 against 74: 2.1-3.1 %; M3 66 against 62-80: 0.1-1.6 %), and the
 * small steps their fastest strategy or within 10 % (S1's fork at cap 88
 * 60.9 us against cap 96's 55.7 and unified's 65.2; the constants before
 * these forked it at cap 78, 77.0 us); rows in tests/unit/test_mixed_cost.c.
 * overlap (round 5, 2026-12-01 18:21 and 18:26 UTC, branch ovl, bench/
 * results/mixed-h200-2026-12-01-r5.json): the light prefill kernel alone
 * on prefill-only S 4096 took 0.639 / 0.646 ms against the full kernel's
 * 0.347 / 0.351 (light_factor 1.84), and the decode kernels ran after the
 * light grid, not beside it (the probe: 0 % of the decode CTAs' time on an
 * SM with a light CTA): overlap measured 1.146 / 1.159 ms on M2 and
 * 1.147 / 1.156 on M5.  Refitted on call 4 (19:09 UTC, the one-warp light
 * kernel, which does share SMs with the decode CTAs: 0-54 % of their time
 * in the probe): the light kernel 0.729 ms against the full one's 0.352 on
 * S 4096 (light_factor 2.07), overlap 1.006 ms on M2 and 1.126 on M5 against
 * partition 0.886 / 0.889: with this model's P and fork_us the decode time
 * hidden beside the light grid is 4-27 %, and the mean 0.16 (overlap_hide)
 * estimates both within 6 %.  light_factor and overlap_hide were not
 * refitted after session j's decode change (overlap has no kernel change
 * since round 5 and is never the pick on the benchmark batches). */
static const attn_mixed_cost_consts k_h200 = {
    .tile_us = 1.72,
    .unit_us = 5.0,
    .launch_us = 4.0,
    .prefill_fixed_us = 15.0,
    .combine_us = 10.0,
    .decode_gbps = 4505.1,
    .unified_decode_gbps = 4060.0,
    .decode_fixed_us = 8.0,
    .fork_us = 14.0,
    .interference = 0.28,
    .decode_sat_sms = 60,
    .light_factor = 2.47,
    .overlap_hide = 0.20,
    .num_caps = 12,
    .caps = {62, 66, 70, 74, 78, 80, 88, 96, 100, 104, 108, 112},
};

#define ATTN__MIXED_ORDER_NAME(e, v, n) [v] = n,
static const char *const k_order_names[] = {ATTN_MIXED_ORDERS(ATTN__MIXED_ORDER_NAME)};
#undef ATTN__MIXED_ORDER_NAME
#define ATTN__COUNT_ONE(e, v, n) +1
enum { MIXED_ORDER_COUNT = 0 ATTN_MIXED_ORDERS(ATTN__COUNT_ONE) };
#undef ATTN__COUNT_ONE

const char *attn_mixed_order_name(attn_mixed_order o)
{
    return (unsigned)o < MIXED_ORDER_COUNT ? k_order_names[o] : "?";
}

int attn_mixed_streams_parse(const char *order, const char *ctas, uint32_t num_sms,
                             attn_mixed_streams *out, attn_error_detail *err)
{
    attn_mixed_streams s = {.order = ATTN_MIXED_ORDER_AUTO, .prefill_ctas = 0};
    if (order != NULL && order[0] != '\0') {
        int found = 0;
        for (unsigned i = 0; i < MIXED_ORDER_COUNT && !found; i++)
            if (strcmp(order, k_order_names[i]) == 0) {
                s.order = (attn_mixed_order)i;
                found = 1;
            }
        if (!found)
            return attn_error_set(err, ATTN_E_RANGE, "ATTN_MIXED_STREAMS",
                                  "'%s' is not auto, serial, decode-first or prefill-first", order);
    }
    if (ctas != NULL && ctas[0] != '\0') {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(ctas, &end, 10);
        if (errno != 0 || end == ctas || *end != '\0' || ctas[0] == '-' || v > num_sms)
            return attn_error_set(err, ATTN_E_RANGE, "ATTN_MIXED_PREFILL_CTAS",
                                  "'%s' is not a CTA count in [0, %u] (0: one per SM)", ctas,
                                  num_sms);
        s.prefill_ctas = (uint32_t)v;
    }
    *out = s;
    return 0;
}

const attn_mixed_cost_consts *attn_mixed_cost_h200(void)
{
    return &k_h200;
}

/* One persistent launch of the prefill kernel's attend grid: the SMs
 * share the tiles (and read `stream_us` worth of bandwidth-bound rows on
 * the whole machine), but no launch ends before its longest work item. */
static double attend_launch_us(uint64_t tiles, uint64_t units, uint64_t longest, double stream_us,
                               const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k)
{
    const double per_tile =
        k->tile_us * (double)in->tile_n * (double)in->head_dim / (128.0 * 128.0);
    const double sms = in->num_sms ? (double)in->num_sms : 1.0;
    double span = ((double)tiles * per_tile + (double)units * k->unit_us) / sms + stream_us;
    if ((double)longest * per_tile > span)
        span = (double)longest * per_tile;
    return k->launch_us + k->prefill_fixed_us + span;
}

static double prefill_launch_us(uint64_t tiles, uint64_t units, uint64_t longest,
                                const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k)
{
    return tiles == 0 ? 0 : attend_launch_us(tiles, units, longest, 0, in, k);
}

/* unified: every row in the prefill kernel.  Its decode rows' tiles (all
 * but the prefill rows' own) read one K/V tile per few FLOPs, so with
 * unified_decode_gbps they cost their bytes at that rate, not tile_us
 * (the prefill kernel's faster compute tiles of 2026-12-03 left them
 * where they were: tile_us alone priced unified M2 14 % low). */
static double unified_launch_us(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k)
{
    if (in->unified_tiles == 0)
        return 0;
    if (k->unified_decode_gbps <= 0 || in->decode_requests == 0 ||
        in->unified_tiles < in->prefill_tiles)
        return prefill_launch_us(in->unified_tiles, in->unified_units, in->unified_longest, in, k);
    const double stream = (double)in->decode_kv_bytes / (k->unified_decode_gbps * 1e3);
    return attend_launch_us(in->prefill_tiles, in->unified_units, in->unified_longest, stream, in,
                            k);
}

/* The combine kernel after a launch that cut m tiles. */
static double combine_us(uint64_t tiles, uint32_t merges, const attn_mixed_cost_consts *k)
{
    return tiles > 0 && merges > 0 ? k->combine_us : 0;
}

/* The decode kernels over the decode rows: bandwidth-bound. */
static double decode_us(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k)
{
    if (in->decode_requests == 0)
        return 0;
    return k->launch_us + k->decode_fixed_us +
           (double)in->decode_kv_bytes / (k->decode_gbps * 1e3); /* GB/s -> bytes/us */
}

/* The share of the CTA slots on `free` SMs the decode grid's waves fill
 * (1 when the grid is unknown): 256 CTAs at 2 a SM fill 2 waves of 66 SMs
 * (0.97) but 3 of 62 (0.69), the last one nearly empty (2026-12-03: S3 of
 * bench_mixed.py forked at cap 66 in 186 us, at cap 70 in 213). */
static double wave_fill(const attn_mixed_cost_in *in, uint32_t free)
{
    if (in->decode_ctas == 0 || in->decode_ctas_per_sm == 0 || free == 0)
        return 1.0;
    const uint64_t slots = (uint64_t)free * in->decode_ctas_per_sm;
    const uint64_t waves = (in->decode_ctas + slots - 1) / slots;
    return (double)in->decode_ctas / (double)(waves * slots);
}

/* Forked at cap c (0 or >= the SMs: the whole machine, nothing free for
 * the decode kernels): the fluid model of attn_mixed_cost_consts. */
static double forked_us(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k, uint32_t c,
                        double dec)
{
    const uint32_t n = in->num_sms ? in->num_sms : 1;
    if (c == 0 || c > n)
        c = n;
    attn_mixed_cost_in capped = *in;
    capped.num_sms = c;
    const double pc =
        prefill_launch_us(in->prefill_tiles, in->prefill_units, in->prefill_longest, &capped, k);
    double rate = 1.0; /* of the decode kernels' full rate, on the n - c free SMs */
    if (c == n)
        rate = 0.0;
    else if (k->decode_sat_sms != 0 && n - c < k->decode_sat_sms)
        rate = (double)(n - c) / (double)k->decode_sat_sms;
    rate *= wave_fill(in, n - c);
    const double beside = dec < rate * pc ? dec : rate * pc;
    return pc + (dec - beside) + k->interference * beside + k->fork_us +
           combine_us(in->prefill_tiles, in->prefill_merges, k);
}

/* Partition's variants; the order it runs by the setting, or the cheapest
 * (ties: serial, then the smaller cap).  Forking needs both kernel
 * families. */
static void partition_variants(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k,
                               attn_mixed_cost *out)
{
    const double dec = decode_us(in, k);
    out->serial_us =
        prefill_launch_us(in->prefill_tiles, in->prefill_units, in->prefill_longest, in, k) +
        combine_us(in->prefill_tiles, in->prefill_merges, k) + dec;
    out->concurrent_us = -1;
    const bool both = dec > 0 && in->prefill_tiles > 0;
    const attn_mixed_order asked = in->streams.order;
    if (both && asked != ATTN_MIXED_ORDER_SERIAL) {
        if (in->streams.prefill_ctas != 0) { /* the setting's cap alone */
            out->fork_ctas[0] = in->streams.prefill_ctas;
            out->num_forks = 1;
        } else if (k->num_caps == 0 && asked != ATTN_MIXED_ORDER_AUTO) {
            /* a forced order with no candidate: the uncapped grid, so the
             * order is kept (it fell back to serial) */
            out->fork_ctas[0] = 0;
            out->num_forks = 1;
        } else {
            for (uint32_t i = 0; i < k->num_caps && i < ATTN_MIXED_MAX_CAPS; i++)
                out->fork_ctas[out->num_forks++] = k->caps[i];
        }
        uint32_t best = 0;
        for (uint32_t i = 0; i < out->num_forks; i++) {
            out->fork_est_us[i] = forked_us(in, k, out->fork_ctas[i], dec);
            if (out->fork_est_us[i] < out->fork_est_us[best])
                best = i;
        }
        if (out->num_forks > 0) {
            out->concurrent_us = out->fork_est_us[best];
            out->prefill_ctas = out->fork_ctas[best];
        }
    }
    attn_mixed_order o = asked;
    if (out->concurrent_us < 0)
        o = ATTN_MIXED_ORDER_SERIAL;
    else if (o == ATTN_MIXED_ORDER_AUTO)
        o = out->concurrent_us < out->serial_us ? ATTN_MIXED_ORDER_PREFILL_FIRST
                                                : ATTN_MIXED_ORDER_SERIAL;
    out->order = o;
    if (o == ATTN_MIXED_ORDER_SERIAL)
        out->prefill_ctas = 0;
    out->partition_us = o == ATTN_MIXED_ORDER_SERIAL ? out->serial_us : out->concurrent_us;
}

void attn_mixed_cost_describe_partition(const attn_mixed_cost *c, char *buf, size_t size)
{
    if (size == 0)
        return;
    int n = c->order == ATTN_MIXED_ORDER_SERIAL
                ? snprintf(buf, size, "partition serial: %.0f us", c->serial_us)
                : snprintf(buf, size, "partition %s, prefill grid %u CTAs: serial %.0f us",
                           attn_mixed_order_name(c->order), c->prefill_ctas, c->serial_us);
    if (c->num_forks == 0 || n < 0 || (size_t)n >= size)
        return;
    n += snprintf(buf + n, size - (size_t)n, ", forked");
    for (uint32_t i = 0; i < c->num_forks && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, " %u:%.0f", c->fork_ctas[i], c->fork_est_us[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " us");
}

/* overlap: the light grid over the prefill rows (light_factor x the full
 * kernel's waves), the decode time it does not hide, and the fork; with
 * no prefill rows the decode kernels alone, with no decode rows the light
 * kernel alone. */
static double overlap_estimate(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k)
{
    const double p =
        prefill_launch_us(in->prefill_tiles, in->prefill_units, in->prefill_longest, in, k);
    const double fixed = k->launch_us + k->prefill_fixed_us; /* the factor scales the span */
    const double light = p > 0 ? fixed + k->light_factor * (p - fixed) : 0;
    const double dec = decode_us(in, k);
    if (light == 0 || dec == 0)
        return light + dec;
    return light + (1.0 - k->overlap_hide) * dec + k->fork_us;
}

void attn_mixed_cost_estimate(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k,
                              int partition_ok, attn_mixed_cost *out)
{
    memset(out, 0, sizeof *out);
    out->unified_us =
        unified_launch_us(in, k) + combine_us(in->unified_tiles, in->unified_merges, k);
    out->partition_us = out->serial_us = out->concurrent_us = out->overlap_us = -1;
    out->order = ATTN_MIXED_ORDER_SERIAL;
    if (partition_ok)
        partition_variants(in, k, out);
    const int part = partition_ok && out->partition_us < out->unified_us;
    out->pick = part ? ATTN_SCHED_PARTITION : ATTN_SCHED_UNIFIED;
    if (partition_ok && in->overlap_ok) { /* the decode rows on the decode kernels, as partition */
        out->overlap_us = overlap_estimate(in, k);
        const double best = part ? out->partition_us : out->unified_us;
        if (out->overlap_us < best)
            out->pick = ATTN_SCHED_OVERLAP;
    }
    if (!partition_ok) {
        snprintf(out->why, sizeof out->why,
                 "auto: unified est. %.0f us; partition not admitted for this batch",
                 out->unified_us);
        return;
    }
    /* the pick's estimate first, then the other candidates' */
    const char *names[3] = {"unified", "partition", "overlap"};
    const double est[3] = {out->unified_us, out->partition_us, out->overlap_us};
    const int pi = out->pick == ATTN_SCHED_OVERLAP ? 2 : part ? 1 : 0;
    int n = snprintf(out->why, sizeof out->why, "auto: %s est. %.0f us", names[pi], est[pi]);
    for (int i = 0; i < 3; i++)
        if (i != pi && est[i] >= 0 && n > 0 && (size_t)n < sizeof out->why)
            n += snprintf(out->why + n, sizeof out->why - (size_t)n, ", %s %.0f us", names[i],
                          est[i]);
    if (n > 0 && (size_t)n < sizeof out->why)
        n += snprintf(out->why + n, sizeof out->why - (size_t)n,
                      " (%llu prefill-kernel tiles for %u decode rows, %.1f MB of decode K/V",
                      (unsigned long long)(in->unified_tiles - in->prefill_tiles),
                      in->decode_requests, (double)in->decode_kv_bytes / 1e6);
    if (n > 0 && (size_t)n < sizeof out->why && in->decode_ctas > 0)
        n += snprintf(out->why + n, sizeof out->why - (size_t)n, ", a decode grid of %u CTAs",
                      in->decode_ctas);
    if (n > 0 && (size_t)n < sizeof out->why)
        n += snprintf(out->why + n, sizeof out->why - (size_t)n, "); ");
    if (n > 0 && (size_t)n < sizeof out->why) /* cut at the end: the estimates come first */
        attn_mixed_cost_describe_partition(out, out->why + n, sizeof out->why - (size_t)n);
}

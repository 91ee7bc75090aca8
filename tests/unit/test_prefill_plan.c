/* Host planning of the CUDA prefill kernel (planner/prefill_plan.h):
 * tile lists against a brute-force cell scan, the tile-class ledger, split
 * parts, item order and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "kernels/common/mask.h"
#include "planner/prefill_plan.h"

typedef struct fixture {
    attn_request_desc req[4];
    int64_t T[4], C[4];
    int32_t qo[5];
    attn_mask mask;
    int32_t fm[4][4096]; /* flashmask vectors: lts, lte, uts, ute */
    uint8_t bits[65536]; /* dense mask bits */
    attn_mask_prog prog;
    attn_prefill_plan_in in;
} fixture;

static void fixture_make(fixture *f, uint32_t B, const int64_t *T, const int64_t *C,
                         attn_mask_kind kind, uint32_t hq, uint32_t hkv, uint32_t d,
                         attn_prefill_variant v)
{
    memset(f, 0, sizeof *f);
    for (uint32_t b = 0; b < B; b++) {
        snprintf(f->req[b].id, sizeof f->req[b].id, "r%u", b);
        f->req[b].cache_len = f->T[b] = T[b];
        f->req[b].new_len = f->C[b] = C[b];
        f->qo[b + 1] = f->qo[b] + (int32_t)C[b];
    }
    f->mask.kind = kind;
    f->mask.left = 100;
    f->mask.sinks = 3;
    uint64_t rng = 0x5eed;
    if (kind == ATTN_MASK_FLASHMASK) {
        /* random two-interval columns: upper run above lower run, sorted ends */
        uint64_t k = 0;
        for (uint32_t b = 0; b < B; b++)
            for (int64_t j = 0; j < T[b] + C[b]; j++, k++) {
                int32_t e[4];
                for (int t = 0; t < 4; t++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    e[t] = (int32_t)((rng >> 33) % (uint64_t)(C[b] + 1));
                }
                for (int a = 1; a < 4; a++)
                    for (int c = a; c > 0 && e[c - 1] > e[c]; c--) {
                        int32_t x = e[c];
                        e[c] = e[c - 1];
                        e[c - 1] = x;
                    }
                f->fm[2][k] = e[0];
                f->fm[3][k] = e[1];
                f->fm[0][k] = e[2];
                f->fm[1][k] = e[3];
            }
        assert_true(k <= 4096);
        f->mask.fm_lts = f->fm[0];
        f->mask.fm_lte = f->fm[1];
        f->mask.fm_uts = f->fm[2];
        f->mask.fm_ute = f->fm[3];
        f->mask.fm_len = k;
        f->mask.fm_causal = true;
    } else if (kind == ATTN_MASK_DENSE) {
        uint64_t bytes = 0;
        for (uint32_t b = 0; b < B; b++)
            bytes += ((uint64_t)C[b] * (uint64_t)(T[b] + C[b]) + 7) / 8;
        assert_true(bytes <= sizeof f->bits);
        for (uint64_t i = 0; i < bytes; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            /* mostly-allowed bytes with whole masked runs, so FULL and SKIP both occur */
            f->bits[i] = (rng >> 60) < 3 ? 0xff : (rng >> 60) < 6 ? 0x00 : (uint8_t)(rng >> 40);
        }
        f->mask.dense_bits = f->bits;
        f->mask.dense_bytes = bytes;
        f->mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    }
    uint32_t tm, tn;
    attn_prefill_tile_shape(d, v, &tm, &tn);
    assert_int_equal(attn_mask_prog_build_blocks(&f->mask, f->req, B, tn, &f->prog, NULL), 0);
    f->in = (attn_prefill_plan_in){.num_requests = B,
                                   .T = f->T,
                                   .C = f->C,
                                   .qo_indptr = f->qo,
                                   .num_qo_heads = hq,
                                   .num_kv_heads = hkv,
                                   .head_dim = d,
                                   .mask = &f->prog,
                                   .num_sms = 0,
                                   .variant = v};
}

/* Brute force: the class of every (m tile, key tile) from its cells. */
static void check_against_cells(const fixture *f, const attn_prefill_plan *p)
{
    const uint32_t g = f->in.num_qo_heads / f->in.num_kv_heads;
    uint64_t full = 0, partial = 0, skip = 0;
    for (uint32_t it = 0; it < p->num_items; it++) {
        const attn_prefill_item *x = &p->items[it];
        int64_t T = f->T[x->req], C = f->C[x->req], keys = T + C;
        int64_t q0 = x->row0 / g, q1 = (x->row0 + p->tile_m - 1) / g + 1;
        if (q1 > C)
            q1 = C;
        int32_t prev = -1;
        for (int32_t k = x->tile_begin; k < x->tile_end; k++) {
            int32_t n = p->tiles[k] >> 1, part = p->tiles[k] & 1;
            assert_true(n > prev); /* ascending, no duplicates */
            prev = n;
            int64_t k0 = (int64_t)n * p->tile_n, k1 = k0 + p->tile_n;
            bool any_vis = false, any_hid = k1 > keys;
            for (int64_t i = q0; i < q1; i++)
                for (int64_t j = k0; j < k1 && j < keys; j++) {
                    if (attn_mask_visible(&f->prog, (uint32_t)x->req, i, j))
                        any_vis = true;
                    else
                        any_hid = true;
                }
            /* a listed tile holds a visible cell; only FlashMask's conservative
             * summaries may list an all-hidden tile, and only as PARTIAL */
            assert_true(any_vis || (part && f->mask.kind == ATTN_MASK_FLASHMASK));
            if (!part)
                assert_false(any_hid); /* a FULL tile has no hidden cell */
        }
        /* and every tile left out (SKIP) holds no visible cell */
        int32_t k = x->tile_begin;
        for (int64_t n = 0; n * p->tile_n < keys; n++) {
            if (k < x->tile_end && (p->tiles[k] >> 1) == n) {
                k++;
                continue;
            }
            for (int64_t i = q0; i < q1; i++)
                for (int64_t j = n * p->tile_n; j < (n + 1) * p->tile_n && j < keys; j++)
                    assert_false(attn_mask_visible(&f->prog, (uint32_t)x->req, i, j));
        }
    }
    (void)full;
    (void)partial;
    (void)skip;
    /* every key tile of every m tile is counted once, in one class */
    uint64_t all = 0;
    for (uint32_t b = 0; b < f->in.num_requests; b++) {
        uint64_t mt = ((uint64_t)f->C[b] * g + p->tile_m - 1) / p->tile_m;
        all += mt * (uint64_t)((f->T[b] + f->C[b] + p->tile_n - 1) / p->tile_n);
    }
    assert_int_equal(p->ledger.skip_tiles + p->ledger.full_tiles + p->ledger.partial_tiles,
                     all * f->in.num_kv_heads);
}

static void test_causal_prefill_tiles(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[1] = {0}, C[1] = {1000};
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 4, 4, 128, ATTN_PREFILL_FULL);
    attn_prefill_plan p;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
    assert_int_equal(p.tile_m, 128);
    assert_int_equal(p.tile_n, 128);
    assert_int_equal(p.num_items, 8); /* ceil(1000 / 128) m tiles */
    assert_int_equal(p.num_merges, 0);
    /* m tile k (rows 128k..) sees key tiles 0..k: 36 tiles, the diagonal
     * ones (8) and the one cut by the end of the keys are PARTIAL */
    assert_int_equal(p.num_tiles, 36);
    assert_int_equal(p.ledger.partial_tiles, 8 * 4);
    assert_int_equal(p.ledger.full_tiles, 28 * 4);
    assert_int_equal(p.ledger.skip_tiles, (64 - 36) * 4);
    assert_int_equal(p.ledger.logical_cells, 1000ull * 1001 / 2 * 4);
    assert_int_equal(p.ledger.executed_cells, 36ull * 128 * 128 * 4);
    /* longest first */
    for (uint32_t i = 1; i < p.num_items; i++)
        assert_true(p.items[i - 1].tile_end - p.items[i - 1].tile_begin >=
                    p.items[i].tile_end - p.items[i].tile_begin);
    check_against_cells(&f, &p);
    attn_prefill_plan_free(&p);
    attn_mask_prog_free(&f.prog);
}

/* The light variant (issue 12's overlap): 64 x 64 tiles; the same causal
 * prefill has twice the m tiles and, per m tile, the key tiles 0 .. its
 * diagonal: 16 x 17 / 2 = 136 listed tiles, 16 diagonal ones PARTIAL. */
static void test_light_tiles(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[1] = {0}, C[1] = {1024};
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 4, 4, 128, ATTN_PREFILL_LIGHT);
    attn_prefill_plan p;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
    assert_int_equal(p.variant, ATTN_PREFILL_LIGHT);
    assert_int_equal(p.tile_m, 64);
    assert_int_equal(p.tile_n, 64);
    assert_int_equal(p.num_items, 16);
    assert_int_equal(p.num_tiles, 136);
    assert_int_equal(p.ledger.partial_tiles, 16 * 4);
    assert_int_equal(p.ledger.full_tiles, 120 * 4);
    assert_int_equal(p.ledger.skip_tiles, (256 - 136) * 4);
    assert_int_equal(p.ledger.executed_cells, 136ull * 64 * 64 * 4);
    check_against_cells(&f, &p);
    /* the partial-state workspace follows the plan's tile_m */
    attn_prefill_plan_free(&p);
    attn_mask_prog_free(&f.prog);
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 4, 4, 128, ATTN_PREFILL_LIGHT);
    f.in.fixed_splits = 2;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
    uint64_t vec, rows;
    attn_prefill_plan_workspace(&p, 4, 128, &vec, &rows);
    assert_true(p.num_parts > 0);
    assert_int_equal(rows, (uint64_t)p.num_parts * 4 * 64);
    assert_int_equal(vec, rows * 128);
    attn_prefill_plan_free(&p);
    attn_mask_prog_free(&f.prog);
    /* every mask kind at d 64 and 128 against the cells, GQA g = 8 */
    const attn_mask_kind kinds[] = {ATTN_MASK_CAUSAL, ATTN_MASK_NONE,      ATTN_MASK_WINDOW,
                                    ATTN_MASK_SINK,   ATTN_MASK_FLASHMASK, ATTN_MASK_DENSE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (uint32_t d = 64; d <= 128; d += 64) {
            int64_t T3[3] = {0, 300, 77}, C3[3] = {333, 5, 130};
            fixture_make(&f, 3, T3, C3, kinds[k], 16, 2, d, ATTN_PREFILL_LIGHT);
            assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
            assert_int_equal(p.tile_m, 64);
            check_against_cells(&f, &p);
            attn_prefill_plan_free(&p);
            attn_mask_prog_free(&f.prog);
        }
}

/* No light kernel at d 256, and an unknown variant: refused naming the field. */
static void test_light_refusals(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[1] = {0}, C[1] = {100};
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 4, 4, 256, ATTN_PREFILL_FULL);
    f.in.variant = ATTN_PREFILL_LIGHT;
    attn_prefill_plan p;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, &err), ATTN_E_SHAPE);
    assert_string_equal(err.field, "variant");
    assert_non_null(strstr(err.message, "light"));
    assert_null(p.items);
    f.in.variant = (attn_prefill_variant)7;
    f.in.head_dim = 256;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, &err), ATTN_E_SHAPE);
    assert_string_equal(err.field, "variant");
    assert_string_equal(attn_prefill_variant_name(ATTN_PREFILL_LIGHT), "light");
    assert_string_equal(attn_prefill_variant_name((attn_prefill_variant)7), "?");
    assert_true(attn_prefill_variant_serves(ATTN_PREFILL_LIGHT, 128));
    assert_false(attn_prefill_variant_serves(ATTN_PREFILL_LIGHT, 256));
    assert_true(attn_prefill_variant_serves(ATTN_PREFILL_FULL, 256));
    attn_mask_prog_free(&f.prog);
}

static void test_every_kind_matches_cells(void **state)
{
    (void)state;
    const attn_mask_kind kinds[] = {ATTN_MASK_CAUSAL, ATTN_MASK_NONE,      ATTN_MASK_WINDOW,
                                    ATTN_MASK_SINK,   ATTN_MASK_FLASHMASK, ATTN_MASK_DENSE};
    const uint32_t dims[] = {64, 256};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t di = 0; di < 2; di++) {
            static fixture f;
            int64_t T[3] = {0, 300, 77}, C[3] = {333, 5, 130};
            fixture_make(&f, 3, T, C, kinds[k], 16, 2, dims[di], ATTN_PREFILL_FULL); /* g = 8 */
            attn_prefill_plan p;
            assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
            check_against_cells(&f, &p);
            attn_prefill_plan_free(&p);
            attn_mask_prog_free(&f.prog);
        }
}

static void test_splits(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[1] = {20000}, C[1] = {16};
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 8, 1, 128, ATTN_PREFILL_FULL);
    f.in.num_sms = 132;
    attn_prefill_plan p;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
    /* one m tile, 157 key tiles: auto split into min(132, 157/4) parts */
    assert_int_equal(p.num_merges, 1);
    assert_int_equal(p.merges[0].num_parts, 39);
    assert_int_equal(p.num_parts, 39);
    assert_int_equal(p.num_items, 39);
    /* the parts tile the list exactly, each at least 4 tiles */
    int32_t covered = 0;
    for (uint32_t i = 0; i < p.num_items; i++) {
        assert_true(p.items[i].part >= 0 && p.items[i].part < 39);
        assert_true(p.items[i].tile_end - p.items[i].tile_begin >= 4);
        covered += p.items[i].tile_end - p.items[i].tile_begin;
    }
    assert_int_equal(covered, (int32_t)p.num_tiles);
    uint64_t vec, row;
    attn_prefill_plan_workspace(&p, 1, 128, &vec, &row);
    assert_int_equal(row, 39ull * 128);
    assert_int_equal(vec, 39ull * 128 * 128);
    attn_prefill_plan_free(&p);
    f.in.fixed_splits = 3;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, NULL), 0);
    assert_int_equal(p.num_items, 3);
    assert_int_equal(p.merges[0].num_parts, 3);
    attn_prefill_plan_free(&p);
    attn_mask_prog_free(&f.prog);
}

/* Rows another kernel serves (partition's decode rows): no m tile, no
 * work item, no ledger entry, but the request keeps its record and q row,
 * and the other requests' tiles are those of a plan without it. */
static void test_skipped_requests(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[3] = {0, 4000, 700}, C[3] = {300, 1, 40};
    fixture_make(&f, 3, T, C, ATTN_MASK_CAUSAL, 8, 2, 128, ATTN_PREFILL_FULL);
    attn_prefill_plan all, part, alone;
    assert_int_equal(attn_prefill_plan_build(&f.in, &all, NULL), 0);
    const uint8_t skip[3] = {0, 1, 0};
    f.in.skip = skip;
    assert_int_equal(attn_prefill_plan_build(&f.in, &part, NULL), 0);
    assert_int_equal(part.num_requests, 3);
    assert_int_equal(part.reqs[1].qrow, 300);
    assert_int_equal(part.reqs[1].T, 4000);
    for (uint32_t i = 0; i < part.num_items; i++)
        assert_int_not_equal(part.items[i].req, 1);
    /* the decode row alone: 1 m tile x 32 key tiles x 2 heads in `all` */
    assert_int_equal(all.ledger.full_tiles + all.ledger.partial_tiles -
                         (part.ledger.full_tiles + part.ledger.partial_tiles),
                     32 * 2);
    assert_int_equal(all.num_items - part.num_items, 1);
    /* every request skipped: an empty plan, not an error */
    const uint8_t every[3] = {1, 1, 1};
    f.in.skip = every;
    f.in.num_sms = 132; /* the split heuristic must not divide by zero CTAs */
    assert_int_equal(attn_prefill_plan_build(&f.in, &alone, NULL), 0);
    assert_int_equal(alone.num_items, 0);
    assert_int_equal(alone.num_tiles, 0);
    assert_int_equal(alone.ledger.logical_cells, 0);
    attn_prefill_plan_free(&all);
    attn_prefill_plan_free(&part);
    attn_prefill_plan_free(&alone);
    attn_mask_prog_free(&f.prog);
}

static void test_bad_input(void **state)
{
    (void)state;
    static fixture f;
    int64_t T[1] = {0}, C[1] = {10};
    fixture_make(&f, 1, T, C, ATTN_MASK_CAUSAL, 6, 4, 128, ATTN_PREFILL_FULL);
    attn_prefill_plan p;
    attn_error_detail err;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, &err), ATTN_E_HEADS);
    assert_string_equal(err.field, "num_qo_heads");
    f.in.num_qo_heads = 8;
    f.in.head_dim = 96;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, &err), ATTN_E_SHAPE);
    assert_string_equal(err.field, "head_dim");
    f.in.head_dim = 128;
    f.qo[1] = 9;
    assert_int_equal(attn_prefill_plan_build(&f.in, &p, &err), ATTN_E_QO_INDPTR);
    assert_string_equal(err.field, "qo_indptr");
    assert_null(p.items);
    attn_mask_prog_free(&f.prog);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal_prefill_tiles),
        cmocka_unit_test(test_light_tiles),
        cmocka_unit_test(test_light_refusals),
        cmocka_unit_test(test_every_kind_matches_cells),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_skipped_requests),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* msgpack and JSON forms of the diagnostic (one walker, two emitters).
 *
 * The walker lives beside the diagnostic it walks: the diag borrows the
 * planner's key, selection and split plan, and packing it here keeps the
 * arrows one way (protocol never sees planner types; the reply encoder only
 * splices the packed bytes, protocol/codec.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/error.h"
#include "attn/names.h"
#include "planner/diag_encode.h"
#include "planner/split.h"

/* A structure emitter: msgpack writes straight to a packer (counts are
 * declared up front), JSON builds a jansson tree on a small stack. */
typedef struct emitter emitter;
struct emitter {
    int (*map)(emitter *e, uint32_t n);
    int (*arr)(emitter *e, uint32_t n);
    int (*end)(emitter *e);
    int (*str)(emitter *e, const char *s);
    int (*i64)(emitter *e, int64_t v);
    int (*u64)(emitter *e, uint64_t v);
    int (*dbl)(emitter *e, double v);
    int (*boolean)(emitter *e, bool v);
    int (*nil)(emitter *e);
};

/* ---- msgpack ---------------------------------------------------------- */

typedef struct mp_emitter {
    emitter e;
    msgpack_packer *pk;
} mp_emitter;

#define MP(e) (((mp_emitter *)(e))->pk)

static int mp_map(emitter *e, uint32_t n)
{
    return msgpack_pack_map(MP(e), n);
}
static int mp_arr(emitter *e, uint32_t n)
{
    return msgpack_pack_array(MP(e), n);
}
static int mp_end(emitter *e)
{
    return 0;
}
static int mp_str(emitter *e, const char *s)
{
    size_t n = strlen(s);
    int rv = msgpack_pack_str(MP(e), n);
    return rv != 0 ? rv : msgpack_pack_str_body(MP(e), s, n);
}
static int mp_i64(emitter *e, int64_t v)
{
    return msgpack_pack_int64(MP(e), v);
}
static int mp_u64(emitter *e, uint64_t v)
{
    return msgpack_pack_uint64(MP(e), v);
}
static int mp_dbl(emitter *e, double v)
{
    return msgpack_pack_double(MP(e), v);
}
static int mp_bool(emitter *e, bool v)
{
    return v ? msgpack_pack_true(MP(e)) : msgpack_pack_false(MP(e));
}
static int mp_nil(emitter *e)
{
    return msgpack_pack_nil(MP(e));
}

/* ---- JSON ------------------------------------------------------------- */

#define JS_DEPTH 8

typedef struct js_emitter {
    emitter e;
    json_t *stack[JS_DEPTH];
    int depth;
    json_t *root;
    const char *pending_key; /* inside an object: the next string is a key */
    bool expect_key[JS_DEPTH];
    int err;
} js_emitter;

#define JS(e) ((js_emitter *)(e))

/* Attach a new value at the current position (consumes `v`). */
static int js_put(emitter *e, json_t *v)
{
    js_emitter *j = JS(e);
    if (v == NULL) {
        j->err = ATTN_E_NOMEM;
        return -1;
    }
    if (j->depth == 0) {
        json_decref(j->root);
        j->root = v;
        return 0;
    }
    json_t *top = j->stack[j->depth - 1];
    int rv;
    if (json_is_object(top)) {
        rv = json_object_set_new(top, j->pending_key ? j->pending_key : "", v);
        j->pending_key = NULL;
        j->expect_key[j->depth - 1] = true;
    } else {
        rv = json_array_append_new(top, v);
    }
    if (rv != 0)
        j->err = ATTN_E_NOMEM;
    return rv;
}

static int js_open(emitter *e, json_t *c)
{
    js_emitter *j = JS(e);
    if (c == NULL || j->depth == JS_DEPTH) {
        json_decref(c);
        j->err = ATTN_E_NOMEM;
        return -1;
    }
    json_incref(c);
    if (js_put(e, c) != 0) {
        json_decref(c);
        return -1;
    }
    j->expect_key[j->depth] = json_is_object(c);
    j->stack[j->depth++] = c;
    json_decref(c); /* the parent (or root) holds it */
    return 0;
}

static int js_map(emitter *e, uint32_t n)
{
    return js_open(e, json_object());
}
static int js_arr(emitter *e, uint32_t n)
{
    return js_open(e, json_array());
}
static int js_end(emitter *e)
{
    if (JS(e)->depth > 0)
        JS(e)->depth--;
    return 0;
}
static int js_str(emitter *e, const char *s)
{
    js_emitter *j = JS(e);
    if (j->depth > 0 && j->expect_key[j->depth - 1]) {
        j->pending_key = s; /* emit_* keeps keys alive until the value follows */
        j->expect_key[j->depth - 1] = false;
        return 0;
    }
    return js_put(e, json_string(s));
}
static int js_i64(emitter *e, int64_t v)
{
    return js_put(e, json_integer((json_int_t)v));
}
static int js_u64(emitter *e, uint64_t v)
{
    return js_put(e, json_integer((json_int_t)v));
}
static int js_dbl(emitter *e, double v)
{
    return js_put(e, isfinite(v) ? json_real(v) : json_null());
}
static int js_bool(emitter *e, bool v)
{
    return js_put(e, json_boolean(v));
}
static int js_nil(emitter *e)
{
    return js_put(e, json_null());
}

/* ---- the one walker --------------------------------------------------- */

/* Each helper returns nonzero on the first failure; `rv |=` keeps going
 * cheaply and the caller reports one error. */
static int kv_str(emitter *e, const char *k, const char *v)
{
    return e->str(e, k) | (v != NULL ? e->str(e, v) : e->nil(e));
}
static int kv_i64(emitter *e, const char *k, int64_t v)
{
    return e->str(e, k) | e->i64(e, v);
}
static int kv_u64(emitter *e, const char *k, uint64_t v)
{
    return e->str(e, k) | e->u64(e, v);
}
static int kv_dbl(emitter *e, const char *k, double v)
{
    return e->str(e, k) | e->dbl(e, v);
}
static int kv_bool(emitter *e, const char *k, bool v)
{
    return e->str(e, k) | e->boolean(e, v);
}

static int emit_key(emitter *e, const attn_key *k)
{
    int rv = e->map(e, k->num_fields);
    for (uint32_t i = 0; i < k->num_fields; i++) {
        const attn_key_field *f = &k->fields[i];
        rv |= e->str(e, f->name);
        switch (f->type) {
        case ATTN_KEY_INT:
            rv |= e->i64(e, f->i);
            break;
        case ATTN_KEY_DOUBLE:
            rv |= e->dbl(e, f->d);
            break;
        case ATTN_KEY_BOOL:
            rv |= e->boolean(e, f->b);
            break;
        case ATTN_KEY_STR:
            rv |= e->str(e, f->s);
            break;
        case ATTN_KEY_INTS:
            rv |= e->arr(e, f->num_ints);
            for (uint32_t j = 0; j < f->num_ints; j++)
                rv |= e->i64(e, f->ints[j]);
            rv |= e->end(e);
            break;
        }
    }
    return rv | e->end(e);
}

static int emit_candidates(emitter *e, const attn_selection *s)
{
    uint32_t n = s ? s->num_candidates : 0;
    int rv = e->arr(e, n);
    for (uint32_t i = 0; i < n; i++) {
        const attn_candidate *c = &s->candidates[i];
        rv |= e->map(e, 6);
        rv |= kv_str(e, "name", c->name);
        rv |= kv_i64(e, "priority", c->priority);
        rv |= kv_bool(e, "installed", c->installed);
        rv |= kv_bool(e, "admitted", c->admission.admitted);
        rv |= kv_bool(e, "above_winner", c->above_winner);
        rv |= e->str(e, "reasons");
        rv |= e->arr(e, c->admission.num_reasons);
        for (uint32_t r = 0; r < c->admission.num_reasons; r++) {
            const attn_reason *re = &c->admission.reasons[r];
            rv |= e->map(e, 3);
            rv |= kv_str(e, "factor", attn_admit_factor_name(re->factor));
            rv |= kv_str(e, "field", re->field);
            rv |= kv_str(e, "text", re->text);
            rv |= e->end(e);
        }
        rv |= e->end(e) | e->end(e);
    }
    rv |= e->end(e);
    n = s ? s->num_out_of_domain : 0;
    rv |= e->str(e, "out_of_domain") | e->arr(e, n);
    for (uint32_t i = 0; i < n; i++) {
        rv |= e->map(e, 2);
        rv |= kv_str(e, "name", s->out_of_domain[i].name);
        rv |= kv_str(e, "why", s->out_of_domain[i].why);
        rv |= e->end(e);
    }
    return rv | e->end(e);
}

/* seed 0x06G: the tiles skipped, run without mask work and masked per
 * element, and the visible cells against the cells the tiles computed;
 * null for an engine that does not tile. */
static int emit_tiles(emitter *e, const attn_tile_report *tr)
{
    int rv = e->str(e, "tiles");
    if (tr == NULL)
        return rv | e->nil(e);
    const attn_prefill_ledger *t = &tr->ledger;
    const uint64_t all = t->skip_tiles + t->full_tiles + t->partial_tiles;
    rv |= e->map(e, 7);
    rv |= e->str(e, "shape");
    rv |= e->arr(e, 2);
    rv |= e->u64(e, tr->tile_m);
    rv |= e->u64(e, tr->tile_n);
    rv |= e->end(e);
    rv |= kv_u64(e, "skip", t->skip_tiles);
    rv |= kv_u64(e, "full", t->full_tiles);
    rv |= kv_u64(e, "partial", t->partial_tiles);
    rv |= kv_u64(e, "logical_cells", t->logical_cells);
    rv |= kv_u64(e, "executed_cells", t->executed_cells);
    rv |= kv_dbl(e, "skip_ratio", all ? (double)t->skip_tiles / (double)all : 0.0);
    return rv | e->end(e);
}

static int emit_schedule(emitter *e, const attn_diag *dg)
{
    const attn_split_plan *p = dg->plan;
    int rv = e->map(e, 10);
    rv |= kv_str(e, "schedule", attn_schedule_policy_name(dg->schedule));
    rv |= kv_str(e, "requested", attn_schedule_policy_name(dg->schedule_requested));
    rv |= kv_str(e, "why", dg->schedule_why);
    /* seed 0x08F: one phase per request, in manifest order, one letter each
     * (P prefill, A append, D decode): one string, not B of them, so a
     * B = 256 reply stays inside the diagnostic's cost budget */
    char small[256], *letters = small;
    uint32_t nb = dg->num_requests;
    if (nb + 1 > sizeof small && (letters = malloc(nb + 1)) == NULL)
        return ATTN_E_NOMEM;
    for (uint32_t b = 0; b < nb; b++) {
        attn_phase ph;
        int bad = attn_phase_classify(dg->requests[b].cache_len, dg->requests[b].new_len, &ph);
        letters[b] = bad ? '?' : attn_phase_letter(ph);
    }
    letters[nb] = '\0';
    rv |= kv_str(e, "phases", letters);
    if (letters != small)
        free(letters);
    rv |= kv_str(e, "split_policy", p ? attn_split_policy_name(p->policy) : NULL);
    rv |= kv_str(e, "state_abi", attn_state_abi_name(dg->state_abi));
    rv |= e->str(e, "splits") | e->arr(e, p ? p->num_requests : 0);
    for (uint32_t b = 0; p && b < p->num_requests; b++)
        rv |= e->u64(e, p->num_splits[b]);
    rv |= e->end(e);
    rv |= kv_u64(e, "work_items", p ? p->num_items : 0);
    rv |= kv_u64(e, "slots", p ? p->num_slots : 0);
    return rv | emit_tiles(e, dg->tiles) | e->end(e);
}

static int emit_kernels(emitter *e, const attn_diag *dg)
{
    static const char *const src[] = {"none", "declared", "observed", "observed"};
    int rv = e->map(e, 3);
    rv |= kv_str(e, "source", src[dg->kernel_source & 3]);
    rv |= kv_str(e, "tracer", dg->tracer);
    rv |= e->str(e, "items") | e->arr(e, dg->num_kernels);
    for (uint32_t i = 0; i < dg->num_kernels; i++) {
        const attn_diag_kernel *k = &dg->kernels[i];
        rv |= e->map(e, 5);
        rv |= kv_str(e, "symbol", k->symbol);
        rv |= kv_u64(e, "launches", k->launches);
        rv |= e->str(e, "grid") | e->arr(e, 3);
        for (int d = 0; d < 3; d++)
            rv |= e->u64(e, k->grid[d]);
        rv |= e->end(e);
        rv |= e->str(e, "block") | e->arr(e, 3);
        for (int d = 0; d < 3; d++)
            rv |= e->u64(e, k->block[d]);
        rv |= e->end(e);
        rv |= kv_dbl(e, "gpu_us", k->gpu_us);
        rv |= e->end(e);
    }
    return rv | e->end(e) | e->end(e);
}

static int emit_verify(emitter *e, const attn_verify_result *v)
{
    if (!v->done)
        return e->nil(e);
    int rv = e->map(e, 12);
    rv |= kv_bool(e, "passed", v->passed);
    rv |= kv_str(e, "reference", v->reference);
    rv |= kv_str(e, "metric", v->metric);
    rv |= kv_dbl(e, "rtol", v->rtol);
    rv |= kv_dbl(e, "lse_atol", v->lse_atol);
    rv |= kv_dbl(e, "max_abs", v->max_abs);
    rv |= kv_dbl(e, "max_rel", v->max_rel);
    rv |= kv_dbl(e, "rel_l2", v->rel_l2);
    rv |= kv_dbl(e, "lse_max_abs", v->lse_max_abs);
    rv |= kv_u64(e, "nonfinite_mismatches", v->nonfinite_mismatches);
    rv |= kv_bool(e, "cache_checked", v->cache_checked);
    rv |= kv_u64(e, "cache_mismatches", v->cache_mismatches);
    return rv | e->end(e);
}

/* Top-level keys: the same 27 every time, null where a stage did not happen. */
#define DIAG_KEYS 27

static int emit_diag(emitter *e, const attn_diag *dg)
{
    const attn_selection *s = dg->sel;
    const char *selected = s && s->selected >= 0 ? s->candidates[s->selected].name : NULL;
    int rv = e->map(e, DIAG_KEYS);
    rv |= e->str(e, "call_key");
    if (dg->call_key != NULL)
        rv |= emit_key(e, dg->call_key);
    else
        rv |= e->nil(e);
    rv |= kv_str(e, "call_key_sha256", dg->call_key_sha256[0] ? dg->call_key_sha256 : NULL);
    rv |= kv_str(e, "requested", s ? s->requested : NULL);
    rv |= kv_bool(e, "forced", s ? s->forced : false);
    rv |= e->str(e, "candidates") | emit_candidates(e, s); /* also writes out_of_domain */
    rv |= kv_str(e, "selected", selected);
    rv |= kv_str(e, "fallback", attn_fallback_name(s ? s->fallback : ATTN_FALLBACK_NONE));
    rv |= kv_str(e, "fallback_reason", s ? s->fallback_reason : "");
    rv |= e->str(e, "schedule") | emit_schedule(e, dg);
    rv |= e->str(e, "workspace") | e->map(e, dg->num_workspace);
    for (uint32_t i = 0; i < dg->num_workspace; i++)
        rv |= kv_u64(e, dg->workspace[i].field, dg->workspace[i].bytes);
    rv |= e->end(e);
    /* the same ledger with each field's dtype and element count (seed 0x03H) */
    rv |= e->str(e, "workspace_ledger") | e->arr(e, dg->num_workspace);
    for (uint32_t i = 0; i < dg->num_workspace; i++) {
        rv |= e->map(e, 4);
        rv |= kv_str(e, "field", dg->workspace[i].field);
        rv |= kv_str(e, "dtype", dg->workspace[i].dtype);
        rv |= kv_u64(e, "elems", dg->workspace[i].elems);
        rv |= kv_u64(e, "bytes", dg->workspace[i].bytes);
        rv |= e->end(e);
    }
    rv |= e->end(e);
    rv |= kv_str(e, "plan_key_sha256", dg->planned ? dg->plan_key_sha256 : NULL);
    rv |= e->str(e, "plan_cache");
    if (dg->planned) {
        rv |= e->map(e, 3);
        rv |= kv_str(e, "event", attn_plan_event_name(dg->plan_event.event));
        rv |= kv_str(e, "reason", dg->plan_event.reason);
        rv |= kv_u64(e, "plan_id", dg->plan_id);
        rv |= e->end(e);
    } else {
        rv |= e->nil(e);
    }
    rv |= e->str(e, "kernels") | emit_kernels(e, dg);
    /* an asynchronous run was answered before it ran: no timing yet */
    rv |= e->str(e, "timing_us") | (dg->async_seq != 0 ? e->nil(e) : e->dbl(e, dg->timing_us));
    rv |= kv_str(e, "timing_method", dg->timing_method);
    rv |= kv_str(e, "timing_scope", dg->timing_scope);
    /* the daemon's own window, labelled apart from the engine's timing */
    rv |= e->str(e, "host_timing_us") | (dg->host_timed ? e->dbl(e, dg->host_us) : e->nil(e));
    rv |= kv_str(e, "host_timing_method", dg->host_timed ? "host_clock" : NULL);
    rv |= kv_str(e, "host_timing_scope", dg->host_timed ? dg->host_scope : NULL);
    rv |= e->str(e, "verify") | emit_verify(e, &dg->verify);
    rv |= e->str(e, "async");
    if (dg->async_seq != 0) {
        rv |= e->map(e, 2);
        rv |= kv_u64(e, "run_seq", dg->async_seq);
        rv |= kv_str(e, "state", "enqueued");
        rv |= e->end(e);
    } else {
        rv |= e->nil(e);
    }
    rv |= e->str(e, "handoff");
    if (dg->handoff_set) {
        rv |= e->map(e, 4);
        rv |= e->str(e, "mps") | (dg->handoff_mps < 0 ? e->nil(e) : e->boolean(e, dg->handoff_mps));
        rv |= kv_bool(e, "time_sliced", dg->handoff_mps == 0);
        rv |= kv_str(e, "note", dg->handoff_note);
        rv |=
            e->str(e, "pingpong_us") | (dg->handoff_us > 0 ? e->dbl(e, dg->handoff_us) : e->nil(e));
        rv |= e->end(e);
    } else {
        rv |= e->nil(e);
    }
    rv |= kv_str(e, "artifact_sha256", dg->artifact_sha256[0] ? dg->artifact_sha256 : NULL);
    rv |= kv_i64(e, "evidence_level", dg->evidence_level);
    rv |= kv_str(e, "evidence_cap", dg->evidence_cap);
    return rv | e->end(e);
}

int attn_diag_pack(const attn_diag *dg, msgpack_packer *pk)
{
    mp_emitter m = {{mp_map, mp_arr, mp_end, mp_str, mp_i64, mp_u64, mp_dbl, mp_bool, mp_nil}, pk};
    return emit_diag(&m.e, dg) != 0 ? ATTN_E_NOMEM : 0;
}

json_t *attn_diag_to_json(const attn_diag *dg)
{
    js_emitter j;
    memset(&j, 0, sizeof j);
    j.e = (emitter){js_map, js_arr, js_end, js_str, js_i64, js_u64, js_dbl, js_bool, js_nil};
    if (emit_diag(&j.e, dg) != 0 || j.err != 0) {
        json_decref(j.root);
        return NULL;
    }
    return j.root;
}

/* The human explanation of a diagnostic in its JSON form (attnctl explain).
 * It reads only the JSON keys of PROTOCOL.md "diag"; the encoders are in
 * planner/diag_encode.h. */
#include <jansson.h>
#include <stdio.h>

#include "attn/error.h"
#include "attn/names.h"
#include "protocol/diag.h"

/* ---- explanation (attnctl explain) ------------------------------------ */

static const char *jstr(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : dflt;
}

int attn_diag_explain(const json_t *diag, FILE *out)
{
    if (!json_is_object(diag) || json_object_get(diag, "evidence_level") == NULL)
        return ATTN_E_TYPE;
    const json_t *ck = json_object_get(diag, "call_key");
    fprintf(out, "call     %s %s", jstr(ck, "phase", "?"), jstr(ck, "device", "?"));
    const json_t *hq = json_object_get(ck, "num_q_heads"),
                 *hkv = json_object_get(ck, "num_kv_heads");
    if (hq && hkv)
        fprintf(out, " H_q=%lld H_kv=%lld d=%lld/%lld %s/%s %s page=%lld mask=%s graph=%s",
                (long long)json_integer_value(hq), (long long)json_integer_value(hkv),
                (long long)json_integer_value(json_object_get(ck, "head_dim_qk")),
                (long long)json_integer_value(json_object_get(ck, "head_dim_vo")),
                jstr(ck, "q_dtype", "?"), jstr(ck, "kv_dtype", "?"), jstr(ck, "cache_layout", "?"),
                (long long)json_integer_value(json_object_get(ck, "page_size")),
                jstr(ck, "mask_kind", "?"),
                json_is_true(json_object_get(ck, "cuda_graph")) ? "on" : "off");
    fprintf(out, "\n         key sha256 %s\n", jstr(diag, "call_key_sha256", "(none)"));
    fprintf(out, "policy   %s%s\n", jstr(diag, "requested", "auto"),
            json_is_true(json_object_get(diag, "forced")) ? " (forced: fails closed)"
                                                          : " (first eligible by priority)");
    fprintf(out, "candidates\n");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(diag, "candidates"), i, c)
    {
        fprintf(out, "  %-16s prio %-4lld %s%s\n", jstr(c, "name", "?"),
                (long long)json_integer_value(json_object_get(c, "priority")),
                json_is_true(json_object_get(c, "admitted")) ? "admitted" : "rejected",
                json_is_true(json_object_get(c, "above_winner")) ? " (above the winner)" : "");
        size_t r;
        json_t *re;
        json_array_foreach(json_object_get(c, "reasons"), r, re)
        {
            fprintf(out, "      [%s] %s: %s\n", jstr(re, "factor", "?"), jstr(re, "field", ""),
                    jstr(re, "text", ""));
        }
    }
    json_array_foreach(json_object_get(diag, "out_of_domain"), i, c)
    {
        fprintf(out, "  %-16s out of domain: %s\n", jstr(c, "name", "?"), jstr(c, "why", ""));
    }
    fprintf(out, "selected %s, fallback %s%s%s\n", jstr(diag, "selected", "(none)"),
            jstr(diag, "fallback", "none"), *jstr(diag, "fallback_reason", "") ? ": " : "",
            jstr(diag, "fallback_reason", ""));
    const json_t *sc = json_object_get(diag, "schedule");
    if (json_is_object(sc)) {
        fprintf(out, "schedule %s, split policy %s, state %s, %lld work items, splits [",
                jstr(sc, "schedule", "?"), jstr(sc, "split_policy", "-"),
                jstr(sc, "state_abi", "?"),
                (long long)json_integer_value(json_object_get(sc, "work_items")));
        json_t *v;
        json_array_foreach(json_object_get(sc, "splits"), i, v)
        {
            fprintf(out, "%s%lld", i ? " " : "", (long long)json_integer_value(v));
        }
        fprintf(out, "]\n");
        if (*jstr(sc, "why", ""))
            fprintf(out, "         (asked %s: %s)\n", jstr(sc, "requested", "?"),
                    jstr(sc, "why", ""));
        fprintf(out, "phases   [");
        const char *ph = jstr(sc, "phases", "");
        for (size_t k = 0; ph[k] != '\0'; k++) {
            attn_phase p;
            fprintf(out, "%s%s", k ? " " : "",
                    attn_phase_of_letter(ph[k], &p) ? attn_phase_name(p) : "?");
        }
        fprintf(out, "]\n");
        const json_t *tl = json_object_get(sc, "tiles");
        if (json_is_object(tl)) {
            const json_t *sh = json_object_get(tl, "shape");
            fprintf(out,
                    "tiles    %lldx%lld: skip %lld, full %lld, partial %lld; cells logical %lld, "
                    "executed %lld\n",
                    (long long)json_integer_value(json_array_get(sh, 0)),
                    (long long)json_integer_value(json_array_get(sh, 1)),
                    (long long)json_integer_value(json_object_get(tl, "skip")),
                    (long long)json_integer_value(json_object_get(tl, "full")),
                    (long long)json_integer_value(json_object_get(tl, "partial")),
                    (long long)json_integer_value(json_object_get(tl, "logical_cells")),
                    (long long)json_integer_value(json_object_get(tl, "executed_cells")));
        }
    }
    const json_t *wl = json_object_get(diag, "workspace_ledger");
    if (json_array_size(wl) > 0) {
        const json_t *w;
        fprintf(out, "workspace");
        json_array_foreach(wl, i, w)
        {
            fprintf(out, "%s %s %s x%lld = %lld B", i ? "," : "", jstr(w, "field", "?"),
                    jstr(w, "dtype", "?"),
                    (long long)json_integer_value(json_object_get(w, "elems")),
                    (long long)json_integer_value(json_object_get(w, "bytes")));
        }
        fprintf(out, "\n");
    }
    const json_t *pc = json_object_get(diag, "plan_cache");
    if (json_is_object(pc))
        fprintf(out, "plan     %s (id %lld): %s\n         key sha256 %s\n", jstr(pc, "event", "?"),
                (long long)json_integer_value(json_object_get(pc, "plan_id")),
                jstr(pc, "reason", ""), jstr(diag, "plan_key_sha256", "?"));
    const json_t *ks = json_object_get(diag, "kernels");
    fprintf(out, "kernels  %s%s%s%s\n", jstr(ks, "source", "none"),
            *jstr(ks, "tracer", "") ? " by " : "", jstr(ks, "tracer", ""), "");
    json_array_foreach(json_object_get(ks, "items"), i, c)
    {
        fprintf(out, "  %s x%lld", jstr(c, "symbol", "?"),
                (long long)json_integer_value(json_object_get(c, "launches")));
        double us = json_number_value(json_object_get(c, "gpu_us"));
        if (us > 0)
            fprintf(out, " %.2f us on the GPU", us);
        fprintf(out, "\n");
    }
    fprintf(out, "timing   %.2f us by %s (%s)\n",
            json_number_value(json_object_get(diag, "timing_us")),
            jstr(diag, "timing_method", "(not timed)"), jstr(diag, "timing_scope", ""));
    if (json_is_number(json_object_get(diag, "host_timing_us")))
        fprintf(out, "host     %.2f us by host_clock (%s)\n",
                json_number_value(json_object_get(diag, "host_timing_us")),
                jstr(diag, "host_timing_scope", ""));
    const json_t *vf = json_object_get(diag, "verify");
    if (json_is_object(vf))
        fprintf(out,
                "verify   %s vs %s: max_abs %.3g max_rel %.3g rel_l2 %.3g lse %.3g (%s <= %g)\n",
                json_is_true(json_object_get(vf, "passed")) ? "PASS" : "FAIL",
                jstr(vf, "reference", "?"), json_number_value(json_object_get(vf, "max_abs")),
                json_number_value(json_object_get(vf, "max_rel")),
                json_number_value(json_object_get(vf, "rel_l2")),
                json_number_value(json_object_get(vf, "lse_max_abs")), jstr(vf, "metric", "?"),
                json_number_value(json_object_get(vf, "rtol")));
    long long level = json_integer_value(json_object_get(diag, "evidence_level"));
    static const char *const rung[] = {"nothing established",          "source present",
                                       "source path closes",           "loaded artifact identified",
                                       "selection observed",           "kernels observed",
                                       "correctness checked and timed"};
    fprintf(out, "evidence level %lld", level);
    if (level >= 0 && level <= 6)
        fprintf(out, " (%s)", rung[level]);
    const char *cap = jstr(diag, "evidence_cap", "");
    fprintf(out, "%s%s\n", *cap ? "; capped: " : "", cap);
    for (long long l = 2; l <= 6; l++)
        fprintf(out, "  [%c] %lld %s\n", l <= level ? 'x' : ' ', l, rung[l]);
    return 0;
}

/* Building the typed diagnostic and rating it on the evidence ladder (seed 0x0AH, 0x0B). */
#include <stdio.h>
#include <string.h>

#include "planner/diag.h"

int attn_evidence_level(const attn_evidence_inputs *in, char *why, size_t n)
{
    /* seed 0x0B: evidence cannot skip a level; the first missing rung caps it */
    static const char *const rung_missing[] = {
        "build id does not name a source revision",
        "",
        "loaded artifact not identified (exe and loaded objects unhashed)",
        "selection not bound to a call key digest",
        "kernels declared by the engine, not observed (run with trace: true)",
        "correctness not checked (run with verify: true)",
    };
    int level = 0;
    const char *cap = rung_missing[0];
    if (in->source_identified) {
        level = 2; /* levels 1-2: the exact source of this binary is named */
        cap = rung_missing[2];
        if (in->artifact_identified) {
            level = 3;
            cap = rung_missing[3];
            if (in->selection_recorded) {
                level = 4;
                cap = rung_missing[4];
                if (in->kernels == ATTN_KERNELS_NONE)
                    cap = "no kernels recorded";
                if (in->kernels == ATTN_KERNELS_HOST || in->kernels == ATTN_KERNELS_TRACED) {
                    level = 5;
                    cap = rung_missing[5];
                    if (in->verified && !in->verify_passed)
                        cap = "correctness check failed at the declared tolerance";
                    else if (in->verified && !in->timed)
                        cap = "not timed with a stated method";
                    else if (in->verified) {
                        level = 6;
                        cap = "";
                    }
                }
            }
        }
    }
    if (why != NULL && n > 0)
        snprintf(why, n, "%s", cap);
    return level;
}

int attn_diag_init(attn_diag *dg, const attn_key *call_key)
{
    memset(dg, 0, sizeof *dg);
    dg->call_key = call_key;
    if (call_key != NULL)
        return attn_key_sha256(call_key, dg->call_key_sha256);
    return 0;
}

void attn_diag_init_digest(attn_diag *dg, const attn_key *call_key,
                           const char call_key_sha256[ATTN_SHA256_HEX])
{
    memset(dg, 0, sizeof *dg);
    dg->call_key = call_key;
    memcpy(dg->call_key_sha256, call_key_sha256, ATTN_SHA256_HEX - 1);
    dg->call_key_sha256[ATTN_SHA256_HEX - 1] = '\0';
}

void attn_diag_set_selection(attn_diag *dg, const attn_selection *sel)
{
    dg->sel = sel;
}

void attn_diag_set_schedule(attn_diag *dg, const attn_split_plan *plan,
                            attn_schedule_policy schedule, attn_state_abi abi)
{
    dg->plan = plan;
    dg->schedule = schedule;
    dg->schedule_requested = schedule;
    dg->state_abi = abi;
}

void attn_diag_set_schedule_choice(attn_diag *dg, attn_schedule_policy requested, const char *why)
{
    dg->schedule_requested = requested;
    snprintf(dg->schedule_why, sizeof dg->schedule_why, "%s", why != NULL ? why : "");
}

void attn_diag_set_tiles(attn_diag *dg, const attn_tile_report *tiles)
{
    dg->tiles = tiles != NULL && tiles->counted ? tiles : NULL;
}

void attn_diag_set_host_timing(attn_diag *dg, double us, const char *scope)
{
    dg->host_timed = true;
    dg->host_us = us;
    snprintf(dg->host_scope, sizeof dg->host_scope, "%s", scope != NULL ? scope : "");
}

int attn_diag_add_workspace_field(attn_diag *dg, const char *field, const char *dtype,
                                  uint64_t elems, uint64_t bytes)
{
    if (dg->num_workspace == ATTN_DIAG_WS_MAX)
        return ATTN_E_TOO_LARGE;
    attn_diag_workspace *w = &dg->workspace[dg->num_workspace++];
    snprintf(w->field, sizeof w->field, "%s", field);
    snprintf(w->dtype, sizeof w->dtype, "%s", dtype != NULL ? dtype : "");
    w->elems = elems;
    w->bytes = bytes;
    return 0;
}

int attn_diag_add_workspace(attn_diag *dg, const char *field, uint64_t bytes)
{
    return attn_diag_add_workspace_field(dg, field, NULL, 0, bytes);
}

void attn_diag_set_requests(attn_diag *dg, const attn_request_desc *requests, uint32_t n)
{
    dg->requests = requests;
    dg->num_requests = requests != NULL ? n : 0;
}

void attn_diag_set_plan(attn_diag *dg, const char plan_key_sha256[ATTN_SHA256_HEX],
                        const attn_plan_decision *ev, uint64_t plan_id)
{
    snprintf(dg->plan_key_sha256, sizeof dg->plan_key_sha256, "%s", plan_key_sha256);
    dg->plan_event = *ev;
    dg->plan_id = plan_id;
    dg->planned = true;
}

void attn_diag_set_report(attn_diag *dg, const attn_exec_report *rep, attn_kernel_source source)
{
    dg->num_kernels = rep->num_kernels < ATTN_KERNELS_MAX ? rep->num_kernels : ATTN_KERNELS_MAX;
    for (uint32_t i = 0; i < dg->num_kernels; i++) {
        memset(&dg->kernels[i], 0, sizeof dg->kernels[i]);
        snprintf(dg->kernels[i].symbol, sizeof dg->kernels[i].symbol, "%s", rep->kernels[i].symbol);
        dg->kernels[i].launches = rep->kernels[i].launches;
    }
    /* an engine that says it was traced is believed only as far as `source` */
    dg->kernel_source = dg->num_kernels > 0 ? source : ATTN_KERNELS_NONE;
    snprintf(dg->tracer, sizeof dg->tracer, "%s", source == ATTN_KERNELS_HOST ? "host engine" : "");
    attn_diag_set_timing(dg, rep->engine_us, rep->timing_method,
                         rep->timing_scope[0] ? rep->timing_scope
                                              : "engine run (stage, attend, merge)");
}

attn_kernel_source attn_kernel_source_for(attn_platform platform, const attn_exec_report *rep,
                                          bool traced)
{
    if (rep == NULL || rep->num_kernels == 0)
        return traced ? ATTN_KERNELS_TRACED : ATTN_KERNELS_NONE;
    if (traced)
        return ATTN_KERNELS_TRACED;
    if (platform == ATTN_PLATFORM_CPU)
        return ATTN_KERNELS_HOST;
    return ATTN_KERNELS_DECLARED;
}

void attn_diag_set_traced(attn_diag *dg, const attn_diag_kernel *k, uint32_t n, const char *tracer)
{
    dg->num_kernels = n < ATTN_KERNELS_MAX ? n : ATTN_KERNELS_MAX;
    memcpy(dg->kernels, k, sizeof k[0] * dg->num_kernels);
    dg->kernel_source = dg->num_kernels > 0 ? ATTN_KERNELS_TRACED : ATTN_KERNELS_NONE;
    snprintf(dg->tracer, sizeof dg->tracer, "%s", tracer ? tracer : "");
}

void attn_diag_set_timing(attn_diag *dg, double us, const char *method, const char *scope)
{
    dg->timing_us = us;
    snprintf(dg->timing_method, sizeof dg->timing_method, "%s", method ? method : "");
    snprintf(dg->timing_scope, sizeof dg->timing_scope, "%s", scope ? scope : "");
}

void attn_diag_set_async(attn_diag *dg, uint64_t seq)
{
    dg->async_seq = seq;
    dg->timing_us = 0;
    dg->timing_method[0] = '\0';
    snprintf(dg->timing_scope, sizeof dg->timing_scope, "async: run_status %llu gives it",
             (unsigned long long)seq);
}

void attn_diag_set_handoff_measured(attn_diag *dg, double us)
{
    dg->handoff_us = us;
}

void attn_diag_set_handoff(attn_diag *dg, int mps, const char *note)
{
    dg->handoff_set = true;
    dg->handoff_mps = mps;
    snprintf(dg->handoff_note, sizeof dg->handoff_note, "%s", note != NULL ? note : "");
}

void attn_diag_set_verify(attn_diag *dg, const attn_verify_result *v)
{
    dg->verify = *v;
}

void attn_diag_finish(attn_diag *dg, const char *artifact_sha256, bool source_identified)
{
    attn_evidence_inputs in = {0};
    snprintf(dg->artifact_sha256, sizeof dg->artifact_sha256, "%s",
             artifact_sha256 ? artifact_sha256 : "");
    in.source_identified = source_identified;
    in.artifact_identified = dg->artifact_sha256[0] != '\0';
    in.selection_recorded =
        dg->call_key_sha256[0] != '\0' && dg->sel != NULL && dg->sel->selected >= 0;
    in.kernels = dg->kernel_source;
    in.verified = dg->verify.done;
    in.verify_passed = dg->verify.passed;
    in.timed = dg->timing_method[0] != '\0' && dg->timing_us > 0;
    dg->evidence_level = attn_evidence_level(&in, dg->evidence_cap, sizeof dg->evidence_cap);
}

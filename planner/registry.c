/* Registry, candidate domain, admission vectors and selection (seed 0x07A-0x07C). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "planner/key.h"
#include "planner/registry.h"
#include "planner/split.h"
#include "attn/names.h"

void attn_registry_init(attn_registry *r)
{
    memset(r, 0, sizeof *r);
}

/* Backend names are identifiers: [a-z0-9_], 1..ATTN_NAME_MAX-1 bytes. */
static int name_well_formed(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0 || n >= ATTN_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(islower(c) || isdigit(c) || c == '_'))
            return 0;
    }
    return 1;
}

static attn_registry_entry *entry_find(attn_registry *r, const char *name)
{
    for (uint32_t i = 0; i < r->num_entries; i++)
        if (strcmp(r->entries[i].name, name) == 0)
            return &r->entries[i];
    return NULL;
}

const attn_registry_entry *attn_registry_find(const attn_registry *r, const char *name)
{
    return entry_find((attn_registry *)r, name);
}

static int entry_new(attn_registry *r, const char *name, attn_registry_entry **out,
                     attn_error_detail *d)
{
    if (!name_well_formed(name) || strcmp(name, "auto") == 0)
        return attn_error_set(d, ATTN_E_POLICY, "backend.name",
                              "backend name '%s' is not an identifier [a-z0-9_]",
                              name ? name : "(null)");
    if (entry_find(r, name) != NULL)
        return attn_error_set(d, ATTN_E_POLICY, "backend.name",
                              "backend '%s' is already registered", name);
    if (r->num_entries == ATTN_REGISTRY_MAX)
        return attn_error_set(d, ATTN_E_TOO_LARGE, "backend.name",
                              "registry holds at most %d backends", ATTN_REGISTRY_MAX);
    attn_registry_entry *e = &r->entries[r->num_entries++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->enabled = true;
    *out = e;
    return 0;
}

int attn_registry_add_platforms(attn_registry *r, attn_engine *inst, uint32_t platforms,
                                attn_error_detail *d)
{
    if (inst == NULL || inst->ops == NULL || inst->ops->admit == NULL)
        return attn_error_set(d, ATTN_E_INTERNAL, "backend", "an engine needs an admit function");
    const attn_engine_ops *ops = inst->ops;
    attn_registry_entry *e = entry_find(r, ops->name != NULL ? ops->name : "");
    if (e != NULL && e->ops == ops) {
        /* one more device of an engine already registered */
        for (uint32_t i = 0; i < e->num_instances; i++)
            if (e->instances[i] == inst || e->instances[i]->device == inst->device)
                return attn_error_set(d, ATTN_E_POLICY, "backend.name",
                                      "backend '%s' already has an instance on %s", ops->name,
                                      inst->where);
        if (e->num_instances == ATTN_ENGINE_DEVICES_MAX)
            return attn_error_set(d, ATTN_E_TOO_LARGE, "backend.name",
                                  "backend '%s' has %d instances already", ops->name,
                                  ATTN_ENGINE_DEVICES_MAX);
        e->instances[e->num_instances++] = inst;
        e->platforms |= platforms;
        return 0;
    }
    int rv = entry_new(r, ops->name, &e, d);
    if (rv != 0)
        return rv;
    e->ops = ops;
    e->instances[0] = inst;
    e->num_instances = 1;
    e->platforms = platforms | (1u << ops->platform);
    e->phases = ops->phases;
    e->priority = ops->priority;
    return 0;
}

int attn_registry_add(attn_registry *r, attn_engine *inst, attn_error_detail *d)
{
    return attn_registry_add_platforms(r, inst, 0, d);
}

/* The CUDA ordinal of "cuda" (0) or "cuda:N"; -1 for anything else. */
static int cuda_ordinal(const char *device)
{
    if (device == NULL || strncmp(device, "cuda", 4) != 0)
        return -1;
    if (device[4] == '\0')
        return 0;
    if (device[4] != ':' || !isdigit((unsigned char)device[5]))
        return -1;
    int n = 0;
    for (const char *c = device + 5; *c; c++) {
        if (!isdigit((unsigned char)*c) || n > 100000)
            return -1;
        n = n * 10 + (*c - '0');
    }
    return n;
}

attn_engine *attn_registry_instance(const attn_registry_entry *e, const char *device)
{
    if (e == NULL || e->ops == NULL || e->num_instances == 0)
        return NULL;
    if (e->ops->platform != ATTN_PLATFORM_CUDA)
        return e->instances[0]; /* a host engine reads every pool it serves from the host */
    int ord = cuda_ordinal(device);
    for (uint32_t i = 0; i < e->num_instances; i++)
        if (e->instances[i]->device == ord)
            return e->instances[i];
    return NULL;
}

int attn_registry_declare(attn_registry *r, const char *name, attn_platform platform,
                          uint32_t phases, int priority, const char *why, attn_error_detail *d)
{
    attn_registry_entry *e = NULL;
    int rv = entry_new(r, name, &e, d);
    if (rv != 0)
        return rv;
    e->platforms = 1u << platform;
    e->phases = phases;
    e->priority = priority;
    snprintf(e->unavailable, sizeof e->unavailable, "%s",
             why && *why ? why : "not built into this binary");
    return 0;
}

int attn_registry_set_enabled(attn_registry *r, const char *name, bool enabled)
{
    attn_registry_entry *e = entry_find(r, name);
    if (e == NULL)
        return ATTN_E_UNKNOWN_BACKEND;
    e->enabled = enabled;
    return 0;
}

attn_platform attn_platform_of_device(const char *device)
{
    if (device == NULL || device[0] == '\0' || strcmp(device, "cpu") == 0)
        return ATTN_PLATFORM_CPU;
    if (strncmp(device, "cuda", 4) == 0 && (device[4] == '\0' || device[4] == ':'))
        return ATTN_PLATFORM_CUDA;
    return (attn_platform)0;
}

const char *attn_admit_factor_name(attn_admit_factor f)
{
    static const char *const names[ATTN_ADMIT_NUM_FACTORS] = {
        "installed", "enabled",    "phase",  "hardware", "q_dtype",  "kv_dtype",
        "shape",     "head_ratio", "layout", "mask",     "numerics", "lifecycle",
    };
    return (unsigned)f < ATTN_ADMIT_NUM_FACTORS ? names[f] : "unknown";
}

void attn_admission_reject(attn_admission *a, attn_admit_factor f, const char *field,
                           const char *fmt, ...)
{
    a->admitted = false;
    if (a->num_reasons == ATTN_REASONS_MAX) {
        /* keep the vector honest when it overflows: the last slot says so */
        snprintf(a->reasons[ATTN_REASONS_MAX - 1].text,
                 sizeof a->reasons[ATTN_REASONS_MAX - 1].text, "more reasons than %d",
                 ATTN_REASONS_MAX);
        return;
    }
    attn_reason *r = &a->reasons[a->num_reasons++];
    r->factor = f;
    snprintf(r->field, sizeof r->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
}

/* Phase of one request from (T, C) (seed 0x08C, attn_phase_classify); -1 when neither. */
static int phase_of(const attn_request_desc *r)
{
    attn_phase ph;
    return attn_phase_classify(r->cache_len, r->new_len, &ph) == 0 ? (int)ph : -1;
}

int attn_semantic_check(const attn_manifest *m, const attn_pool_geometry *g, attn_error_detail *d)
{
    char field[64];
    if (m->num_requests == 0)
        return attn_error_set(d, ATTN_E_EMPTY_BATCH, "requests", "the manifest has no requests");
    for (uint32_t b = 0; b < m->num_requests; b++) {
        if (phase_of(&m->requests[b]) < 0) {
            snprintf(field, sizeof field, "requests[%u].new_len", b);
            return attn_error_set(d, ATTN_E_PHASE, field,
                                  "(cache_len %lld, new_len %lld) is not prefill, append or decode",
                                  (long long)m->requests[b].cache_len,
                                  (long long)m->requests[b].new_len);
        }
    }
    /* seed 0x07A: an invalid GQA ratio is a malformed call, not "unsupported" */
    if (g->num_kv_heads == 0 || m->num_qo_heads == 0 || m->num_qo_heads % g->num_kv_heads != 0)
        return attn_error_set(d, ATTN_E_HEADS, "num_qo_heads",
                              "num_qo_heads %u is not a positive multiple of num_kv_heads %u",
                              m->num_qo_heads, g->num_kv_heads);
    if (g->head_dim_qk == 0 || g->head_dim_vo == 0)
        return attn_error_set(d, ATTN_E_SEMANTIC,
                              g->head_dim_qk == 0 ? "head_dim_qk" : "head_dim_vo",
                              "head dimensions must be positive");
    if (g->page_size == 0)
        return attn_error_set(d, ATTN_E_SEMANTIC, "page_size", "a paged cache needs page_size > 0");
    if (m->has_sm_scale && !(m->sm_scale > 0.0f && m->sm_scale < 1e30f))
        return attn_error_set(d, ATTN_E_SEMANTIC, "sm_scale",
                              "sm_scale must be a positive finite number");
    if (m->mask.kind == ATTN_MASK_DENSE && m->mask.polarity == ATTN_POLARITY_UNSET)
        return attn_error_set(d, ATTN_E_MASK_POLARITY, "mask.polarity",
                              "a dense mask needs an explicit polarity");
    return 0;
}

int attn_policy_check(const attn_registry *r, const attn_policy *p, attn_error_detail *d)
{
    const char *name = p->backend[0] ? p->backend : "auto";
    if (strcmp(name, "auto") == 0)
        return 0;
    if (!name_well_formed(name))
        return attn_error_set(d, ATTN_E_POLICY, "policy.backend",
                              "backend '%s' is neither \"auto\" nor an identifier [a-z0-9_]", name);
    if (attn_registry_find(r, name) == NULL) {
        char known[160] = "";
        size_t o = 0;
        for (uint32_t i = 0; i < r->num_entries && o < sizeof known; i++) {
            int w =
                snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "", r->entries[i].name);
            o += w > 0 ? (size_t)w : 0;
        }
        return attn_error_set(d, ATTN_E_UNKNOWN_BACKEND, "policy.backend",
                              "no backend '%s' is registered (known: %s)", name, known);
    }
    return 0;
}

const char *attn_fallback_name(attn_fallback f)
{
    switch (f) {
    case ATTN_FALLBACK_NONE:
        return "none";
    case ATTN_FALLBACK_BACKEND:
        return "backend";
    case ATTN_FALLBACK_ALGORITHMIC:
        return "algorithmic";
    case ATTN_FALLBACK_SEMANTIC:
        return "semantic";
    }
    return "unknown";
}

/* Why an entry is outside the candidate domain, or NULL when it is inside
 * (seed 0x07C: platform and phase first, so a wrong-phase backend is never
 * reported as a rejected candidate or a fallback). */
static const char *domain_miss(const attn_registry_entry *e, attn_platform platform,
                               uint32_t phases, char *buf, size_t n)
{
    if ((e->platforms & (1u << platform)) == 0) {
        snprintf(buf, n, "platform %s not served", attn_platform_name(platform));
        return buf;
    }
    if ((e->phases & phases) == 0) {
        snprintf(buf, n, "no phase of this call is in its domain");
        return buf;
    }
    return NULL;
}

/* The full admission vector of one in-domain entry: the registry's own
 * factors (installed, enabled, phase coverage, an instance on the pool's
 * device, the requested schedule) plus the instance's.  Returns that
 * instance (NULL when there is none). */
static attn_engine *admit_entry(const attn_registry_entry *e, const attn_manifest *m,
                                const attn_pool_geometry *g, uint32_t phases, attn_admission *a)
{
    attn_engine *inst = attn_registry_instance(e, g->device);
    memset(a, 0, sizeof *a);
    a->admitted = true;
    if (e->ops == NULL)
        attn_admission_reject(a, ATTN_ADMIT_INSTALLED, "backend", "%s", e->unavailable);
    if (!e->enabled)
        attn_admission_reject(a, ATTN_ADMIT_ENABLED, "backend", "disabled by configuration");
    if ((phases & ~e->phases) != 0) {
        char list[48] = "";
        for (int ph = 0; ph < 3; ph++)
            if ((phases & ~e->phases) & (1u << ph)) {
                size_t o = strlen(list);
                snprintf(list + o, sizeof list - o, "%s%s", o ? "," : "",
                         attn_phase_name((attn_phase)ph));
            }
        attn_admission_reject(a, ATTN_ADMIT_PHASE, "requests", "phase %s not supported", list);
    }
    if (e->ops != NULL && inst == NULL) {
        /* a device without an instance is a reason now, not an E_CUDA at run time */
        char have[96] = "";
        size_t o = 0;
        for (uint32_t i = 0; i < e->num_instances && o < sizeof have; i++) {
            int w =
                snprintf(have + o, sizeof have - o, "%s%s", i ? ", " : "", e->instances[i]->where);
            o += w > 0 ? (size_t)w : 0;
        }
        attn_admission_reject(a, ATTN_ADMIT_HARDWARE, "device",
                              "no %s instance serves %s (instances: %s)", e->name, g->device,
                              e->num_instances ? have : "none");
    }
    if (e->ops != NULL && !attn_engine_implements(e->ops, m->policy.schedule))
        /* seed 0x08G: a schedule is executed as asked or refused, never relabelled */
        attn_admission_reject(a, ATTN_ADMIT_PHASE, "policy.schedule",
                              "schedule %s is not implemented by %s",
                              attn_schedule_policy_name(m->policy.schedule), e->name);
    if (inst != NULL) {
        attn_admission own;
        memset(&own, 0, sizeof own);
        own.admitted = true;
        e->ops->admit(inst, m, g, &own);
        for (uint32_t i = 0; i < own.num_reasons; i++)
            attn_admission_reject(a, own.reasons[i].factor, own.reasons[i].field, "%s",
                                  own.reasons[i].text);
        if (!own.admitted && own.num_reasons == 0)
            attn_admission_reject(a, ATTN_ADMIT_INSTALLED, "backend",
                                  "the backend rejected the call without a reason");
    }
    a->admitted = a->num_reasons == 0;
    return inst;
}

/* One sentence listing a rejected candidate's reasons: first every failed
 * factor (short, so the whole vector survives a 256-byte error message),
 * then the texts as far as they fit. */
static void reasons_sentence(const attn_candidate *c, char *buf, size_t n)
{
    size_t o = 0;
    int w = snprintf(buf, n, "%u reason%s [", c->admission.num_reasons,
                     c->admission.num_reasons == 1 ? "" : "s");
    o = w > 0 ? (size_t)w : 0;
    for (uint32_t i = 0; i < c->admission.num_reasons && o < n; i++) {
        w = snprintf(buf + o, n - o, "%s%s", i ? "," : "",
                     attn_admit_factor_name(c->admission.reasons[i].factor));
        o += w > 0 ? (size_t)w : 0;
    }
    for (uint32_t i = 0; i <= c->admission.num_reasons && o < n; i++) {
        if (i == 0) {
            w = snprintf(buf + o, n - o, "]");
        } else {
            w = snprintf(buf + o, n - o, "%s%s", i == 1 ? " " : "; ",
                         c->admission.reasons[i - 1].text);
        }
        o += w > 0 ? (size_t)w : 0;
    }
}

int attn_registry_select(const attn_registry *r, const attn_manifest *m,
                         const attn_pool_geometry *g, attn_selection *sel, attn_error_detail *d)
{
    memset(sel, 0, sizeof *sel);
    sel->selected = -1;
    snprintf(sel->requested, sizeof sel->requested, "%s",
             m->policy.backend[0] ? m->policy.backend : "auto");
    sel->forced = strcmp(sel->requested, "auto") != 0;
    sel->platform = attn_platform_of_device(g->device);
    int rv = attn_semantic_check(m, g, d);
    if (rv != 0)
        return rv;
    if (sel->platform == 0)
        return attn_error_set(d, ATTN_E_SEMANTIC, "pool.device",
                              "device '%s' is neither cpu nor cuda:N", g->device);
    if ((rv = attn_policy_check(r, &m->policy, d)) != 0)
        return rv;
    for (uint32_t b = 0; b < m->num_requests; b++)
        sel->phases |= 1u << phase_of(&m->requests[b]);

    /* candidate domain in priority order (stable for equal priorities) */
    uint32_t order[ATTN_REGISTRY_MAX] = {0};
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->num_entries; i++) {
        char why[96];
        if (domain_miss(&r->entries[i], sel->platform, sel->phases, why, sizeof why) != NULL) {
            attn_out_of_domain *o = &sel->out_of_domain[sel->num_out_of_domain++];
            snprintf(o->name, sizeof o->name, "%s", r->entries[i].name);
            snprintf(o->why, sizeof o->why, "%s", why);
            continue;
        }
        uint32_t j = n++;
        while (j > 0 && r->entries[order[j - 1]].priority > r->entries[i].priority) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    /* seed 0x07D: the complete rejection vector is kept even after a winner */
    int first_eligible = -1, forced_idx = -1;
    attn_engine *inst[ATTN_REGISTRY_MAX] = {0};
    for (uint32_t k = 0; k < n; k++) {
        const attn_registry_entry *e = &r->entries[order[k]];
        attn_candidate *c = &sel->candidates[sel->num_candidates++];
        snprintf(c->name, sizeof c->name, "%s", e->name);
        c->priority = e->priority;
        c->installed = e->ops != NULL;
        inst[k] = admit_entry(e, m, g, sel->phases, &c->admission);
        if (c->admission.admitted && first_eligible < 0)
            first_eligible = (int)k;
        if (sel->forced && strcmp(e->name, sel->requested) == 0)
            forced_idx = (int)k;
    }

    char why[200];
    if (sel->forced) {
        if (forced_idx < 0) {
            const attn_registry_entry *e = attn_registry_find(r, sel->requested);
            snprintf(why, sizeof why, "%s", "outside the candidate domain");
            for (uint32_t i = 0; i < sel->num_out_of_domain; i++)
                if (strcmp(sel->out_of_domain[i].name, sel->requested) == 0)
                    snprintf(why, sizeof why, "%s", sel->out_of_domain[i].why);
            return attn_error_set(d, ATTN_E_BACKEND_REJECTED, "policy.backend",
                                  "forced backend '%s' cannot serve this call: %s", e->name, why);
        }
        attn_candidate *c = &sel->candidates[forced_idx];
        if (!c->admission.admitted) {
            /* seed 0x07C forced_fail_closed: the reasons, never a silent fallback */
            reasons_sentence(c, why, sizeof why);
            return attn_error_set(d, ATTN_E_BACKEND_REJECTED, "policy.backend",
                                  "forced backend '%s' rejects the call: %s", c->name, why);
        }
        sel->selected = forced_idx;
    } else {
        if (first_eligible < 0) {
            if (n == 0)
                return attn_error_set(d, ATTN_E_NO_BACKEND, "policy.backend",
                                      "no registered backend serves platform %s for this phase",
                                      attn_platform_name(sel->platform));
            reasons_sentence(&sel->candidates[0], why, sizeof why);
            return attn_error_set(d, ATTN_E_NO_BACKEND, "policy.backend",
                                  "all %u candidates reject the call; %s: %s", n,
                                  sel->candidates[0].name, why);
        }
        sel->selected = first_eligible;
        for (int k = 0; k < first_eligible; k++)
            sel->candidates[k].above_winner = true;
        if (first_eligible > 0) {
            /* seed 0x07C: a backend fallback is a rejection above the winner in the same domain */
            sel->fallback = ATTN_FALLBACK_BACKEND;
            reasons_sentence(&sel->candidates[0], why, sizeof why);
            snprintf(sel->fallback_reason, sizeof sel->fallback_reason, "%s rejected (%.150s)",
                     sel->candidates[0].name, why);
        }
    }
    sel->engine = inst[sel->selected];
    return 0;
}

void attn_selection_note_plan(attn_selection *sel, const attn_policy *p,
                              const attn_split_plan *plan)
{
    if (sel->fallback != ATTN_FALLBACK_NONE || plan == NULL)
        return;
    if (p->splits > 0) {
        for (uint32_t b = 0; b < plan->num_requests; b++) {
            if (plan->num_splits[b] != p->splits) {
                sel->fallback = ATTN_FALLBACK_ALGORITHMIC;
                snprintf(sel->fallback_reason, sizeof sel->fallback_reason,
                         "policy asked %u splits; request %u planned %u", p->splits, b,
                         plan->num_splits[b]);
                return;
            }
        }
    }
    if (p->split_policy != ATTN_SPLIT_AUTO && plan->policy != p->split_policy) {
        sel->fallback = ATTN_FALLBACK_ALGORITHMIC;
        snprintf(sel->fallback_reason, sizeof sel->fallback_reason,
                 "policy asked split policy %s; the plan used %s",
                 attn_split_policy_name(p->split_policy), attn_split_policy_name(plan->policy));
    }
}

void attn_selection_note_semantic(attn_selection *sel, const char *what)
{
    sel->fallback = ATTN_FALLBACK_SEMANTIC;
    snprintf(sel->fallback_reason, sizeof sel->fallback_reason, "%s", what);
}

/* Backend registry, candidate domain, admission and selection (seed 0x07B-0x07C).
 *
 * Four stages, kept apart so diagnostics can tell them apart: the registry
 * (every backend this build knows, installed or not), the candidate domain of
 * one call (platform x phases), the eligible set (admission is the
 * conjunction of the twelve factors of backend.h, and a rejection keeps every
 * failed factor), and the policy (forced fails closed; auto takes the first
 * eligible by priority and records every rejection above the winner).
 * Semantic checks run before any backend is asked (seed 0x07A).
 */
#ifndef ATTN_PLANNER_REGISTRY_H
#define ATTN_PLANNER_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/names.h"
#include "attn/types.h"
#include "planner/engine.h"

#define ATTN_REGISTRY_MAX 16

/* One registry entry: an installed engine with its instances (one per
 * device), or a declared one this build knows but cannot run here (not
 * compiled, no device), with the reason. */
typedef struct attn_registry_entry {
    char name[ATTN_NAME_MAX];
    const attn_engine_ops *ops; /* NULL when declared only */
    uint32_t num_instances;
    attn_engine *instances[ATTN_ENGINE_DEVICES_MAX]; /* borrowed; one per device */
    uint32_t platforms;    /* bit (1u << attn_platform) per platform it serves */
    uint32_t phases;       /* bit (1u << attn_phase) per phase */
    int priority;          /* lower first under auto */
    bool enabled;          /* runtime policy (factor E) */
    char unavailable[160]; /* why it is not installed (factor I), "" when installed */
} attn_registry_entry;

typedef struct attn_registry {
    uint32_t num_entries;
    attn_registry_entry entries[ATTN_REGISTRY_MAX];
} attn_registry;

/* Make an empty registry. */
void attn_registry_init(attn_registry *r);

/* Register an engine instance (borrowed: it must outlive the registry)
 * serving its own platform.  A second instance of the same engine on
 * another device joins its entry; ATTN_E_POLICY for a malformed name, a
 * name taken by another engine or a device that already has an instance,
 * ATTN_E_TOO_LARGE when the registry or the entry is full. */
int attn_registry_add(attn_registry *r, attn_engine *e, attn_error_detail *d);

/* Register an instance that also serves the platforms in `platforms` (e.g.
 * the CPU reference reading a device pool through a host copy); the caller
 * must really provide that path. */
int attn_registry_add_platforms(attn_registry *r, attn_engine *e, uint32_t platforms,
                                attn_error_detail *d);

/* The instance of `entry` that serves a pool on `device` ("cpu", "cuda",
 * "cuda:N"): a host engine's one instance for any device, a device
 * engine's instance with that ordinal; NULL when there is none. */
attn_engine *attn_registry_instance(const attn_registry_entry *entry, const char *device);

/* Declare a backend this build knows but cannot run here, so `hello` lists
 * it and forcing it fails with the reason instead of "unknown". */
int attn_registry_declare(attn_registry *r, const char *name, attn_platform platform,
                          uint32_t phases, int priority, const char *why, attn_error_detail *d);

/* Enable or disable a registered backend by runtime policy (factor E). */
int attn_registry_set_enabled(attn_registry *r, const char *name, bool enabled);

/* The entry called `name`, or NULL. */
const attn_registry_entry *attn_registry_find(const attn_registry *r, const char *name);

/* Platform of a pool device string: "cpu" -> CPU, "cuda:N"/"cuda" -> CUDA, else 0. */
attn_platform attn_platform_of_device(const char *device);

/* Short name of an admission factor ("installed", "head_ratio", "mask", ...). */
const char *attn_admit_factor_name(attn_admit_factor f);

/* Add one reason to an admission vector (admit functions call this for
 * every failed factor, never stopping at the first); printf-style text. */
void attn_admission_reject(attn_admission *a, attn_admit_factor f, const char *field,
                           const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Semantic checks of the call contract, before any backend (seed 0x07A):
 * phases from (T, C), H_q divisible by H_kv, head dims and page size
 * positive.  These are errors of the call, never "unsupported". */
int attn_semantic_check(const attn_manifest *m, const attn_pool_geometry *g, attn_error_detail *d);

/* Validate the policy's backend name against the registry: "auto" or a
 * registered/declared name; malformed -> ATTN_E_POLICY, well-formed but
 * unknown -> ATTN_E_UNKNOWN_BACKEND (field "policy.backend"). */
int attn_policy_check(const attn_registry *r, const attn_policy *p, attn_error_detail *d);

typedef enum attn_fallback {
    ATTN_FALLBACK_NONE = 0,
    ATTN_FALLBACK_BACKEND = 1,     /* a higher-priority in-domain candidate was rejected */
    ATTN_FALLBACK_ALGORITHMIC = 2, /* the selected backend changed its schedule or splits */
    ATTN_FALLBACK_SEMANTIC = 3,    /* another representation was materialised to keep meaning */
} attn_fallback;

/* "none", "backend", "algorithmic" or "semantic". */
const char *attn_fallback_name(attn_fallback f);

/* One in-domain candidate as the diagnostic reports it. */
typedef struct attn_candidate {
    char name[ATTN_NAME_MAX];
    int priority;
    bool installed;
    bool above_winner; /* rejected and ranked above the selected backend */
    attn_admission admission;
} attn_candidate;

/* A registry entry that is not a candidate for this call, and why. */
typedef struct attn_out_of_domain {
    char name[ATTN_NAME_MAX];
    char why[96];
} attn_out_of_domain;

typedef struct attn_selection {
    bool forced;                   /* policy.backend named a backend */
    char requested[ATTN_NAME_MAX]; /* "auto" or the forced name */
    attn_platform platform;        /* of the call (the pool's device) */
    uint32_t phases;               /* bit per phase present in the manifest */
    uint32_t num_candidates;       /* in priority order */
    attn_candidate candidates[ATTN_REGISTRY_MAX];
    uint32_t num_out_of_domain;
    attn_out_of_domain out_of_domain[ATTN_REGISTRY_MAX];
    int selected;        /* index into candidates, -1 when none */
    attn_engine *engine; /* the selected instance (the pool's device), NULL when none */
    attn_fallback fallback;
    char fallback_reason[192];
} attn_selection;

/* Run the four stages for a validated manifest on pool geometry `g`:
 * semantic checks, policy check, candidate domain, full admission of every
 * candidate, then the policy.  `sel` is filled even on failure, so an
 * error reply can carry the whole reason vector.  Errors: the semantic
 * codes, ATTN_E_POLICY, ATTN_E_UNKNOWN_BACKEND, ATTN_E_BACKEND_REJECTED
 * (forced and rejected), ATTN_E_NO_BACKEND (auto and none eligible). */
int attn_registry_select(const attn_registry *r, const attn_manifest *m,
                         const attn_pool_geometry *g, attn_selection *sel, attn_error_detail *d);

/* Classify an algorithmic fallback after planning: the selected backend
 * planned another split count or schedule than the policy asked for.
 * Updates sel->fallback only when it is still NONE. */
void attn_selection_note_plan(attn_selection *sel, const attn_policy *p,
                              const attn_split_plan *plan);

/* Record a semantic fallback (the engine gathered or converted a
 * representation); it outranks the other classes in the diagnostic. */
void attn_selection_note_semantic(attn_selection *sel, const char *what);

#endif

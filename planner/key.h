/* Dispatch (call) keys and plan keys: readable fields, one canonical
 * serialisation, one SHA-256 digest (seed 0x07A, 0x07F, 0x0BE).
 *
 * A key is a small set of named scalar or integer-array fields.  Its
 * canonical form is compact JSON with the field names sorted bytewise,
 * integers in decimal, doubles in the shortest round-trip form with a
 * fractional part ("0.0", "1e-05"), booleans as true/false.  That is the
 * form whose SHA-256 the seed's fixtures print (0x07D, 0x07F), so the
 * digests of this module can be checked against them byte for byte.
 */
#ifndef ATTN_PLANNER_KEY_H
#define ATTN_PLANNER_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/names.h"
#include "attn/types.h"

#define ATTN_KEY_MAX_FIELDS 48
#define ATTN_KEY_NAME_MAX 32
#define ATTN_KEY_STR_MAX 72
#define ATTN_SHA256_HEX 65 /* 64 hex digits and a NUL */

typedef enum attn_key_type {
    ATTN_KEY_INT = 0,
    ATTN_KEY_DOUBLE = 1,
    ATTN_KEY_BOOL = 2,
    ATTN_KEY_STR = 3,
    ATTN_KEY_INTS = 4, /* an array of integers, e.g. per-request lengths */
} attn_key_type;

typedef struct attn_key_field {
    char name[ATTN_KEY_NAME_MAX];
    attn_key_type type;
    int64_t i;
    double d;
    bool b;
    char s[ATTN_KEY_STR_MAX];
    int64_t *ints; /* owned by the key (ATTN_KEY_INTS) */
    uint32_t num_ints;
} attn_key_field;

/* A key: fields in insertion order; the canonical form sorts them. */
typedef struct attn_key {
    uint32_t num_fields;
    attn_key_field fields[ATTN_KEY_MAX_FIELDS];
} attn_key;

/* Make `k` empty. */
void attn_key_init(attn_key *k);

/* Release the arrays a key owns and make it empty. */
void attn_key_fini(attn_key *k);

/* Deep-copy `src` into `dst` (which must be initialised; its old fields are released). */
int attn_key_copy(attn_key *dst, const attn_key *src);

/* Set an integer field, replacing a field of the same name. */
int attn_key_set_int(attn_key *k, const char *name, int64_t v);

/* Set a double field, replacing a field of the same name. */
int attn_key_set_double(attn_key *k, const char *name, double v);

/* Set a boolean field, replacing a field of the same name. */
int attn_key_set_bool(attn_key *k, const char *name, bool v);

/* Set a string field (at most ATTN_KEY_STR_MAX - 1 bytes, else ATTN_E_RANGE). */
int attn_key_set_str(attn_key *k, const char *name, const char *v);

/* Set an integer-array field (the values are copied). */
int attn_key_set_ints(attn_key *k, const char *name, const int64_t *v, uint32_t n);

/* Remove a field by name; returns 1 when it was present. */
int attn_key_remove(attn_key *k, const char *name);

/* The field called `name`, or NULL. */
const attn_key_field *attn_key_get(const attn_key *k, const char *name);

/* The canonical serialisation (malloc'd, NUL-terminated; *len excludes the NUL). */
int attn_key_canonical(const attn_key *k, char **out, size_t *len);

/* SHA-256 (libcrypto EVP) of the canonical serialisation, as 64 lowercase hex digits. */
int attn_key_sha256(const attn_key *k, char hex[ATTN_SHA256_HEX]);

/* SHA-256 of arbitrary bytes as lowercase hex (shared by artifact identity). */
int attn_key_sha256_bytes(const void *data, size_t len, char hex[ATTN_SHA256_HEX]);

/* 1 when field `a` and field `b` have the same type and value. */
int attn_key_field_equal(const attn_key_field *a, const attn_key_field *b);

/* Write a field's value in canonical form into buf (truncated to n). */
void attn_key_field_str(const attn_key_field *f, char *buf, size_t n);

/* Where the call runs; the parts of the environment coordinate the manifest
 * does not say (seed 0x07A "environment"). */
typedef struct attn_key_env {
    const char *device_type;      /* "cpu" or "cuda" */
    int compute_capability;       /* e.g. 90; 0 on the host */
    const char *device;           /* the pool's device: "cpu", "cuda:0" */
    const char *workspace_device; /* where partial state lives */
} attn_key_env;

/* The call key of one validated manifest (seed 0x07A, 0x0BE): phase, per-request
 * q_len and kv_len, heads, dims, dtypes, layout, page size, mask, sm_scale,
 * policy, determinism, graph mode and the verification tolerance. */
int attn_call_key_build(const attn_manifest *m, const attn_pool_geometry *g,
                        const attn_key_env *env, attn_key *out);

/* The plan key: the static projection of a call key (seed 0x07F) — device,
 * workspace_device, kv_layout, page_size, num_q_heads, num_kv_heads,
 * head_dim_qk, head_dim_vo, q_dtype, kv_dtype, cuda_graph — plus our
 * schedule and state_abi.  Lengths and page lists are dynamic, not frozen. */
int attn_plan_key_build(const attn_key *call_key, attn_key *out);

/* What the plan cache did for one call (PROTOCOL.md diag.plan_cache). */
typedef enum attn_plan_event {
    ATTN_PLAN_MISS = 0,   /* no plan existed: one was built */
    ATTN_PLAN_HIT = 1,    /* the static projection is unchanged: reused */
    ATTN_PLAN_REPLAN = 2, /* a frozen field changed: a new plan was built */
} attn_plan_event;

typedef struct attn_plan_decision {
    attn_plan_event event;
    char reason[256];
} attn_plan_decision;

/* "miss", "hit" or "replan". */
const char *attn_plan_event_name(attn_plan_event e);

/* Decide the lifecycle event of a call whose plan key is `now` against the
 * plan key `frozen` its caller last used (NULL: none).  Equal projections
 * reuse; any changed frozen field replans, and the reason names each changed
 * field with old -> new and why it is frozen (seed 0x07F table). */
void attn_plan_decide(const attn_key *frozen, const attn_key *now, attn_plan_decision *out);

/* The refusal rule: a `run` that names an existing plan id must not change
 * a frozen field (it cannot be replanned silently under an id the caller
 * holds); returns 0, or ATTN_E_STALE_PLAN naming the first changed field. */
int attn_plan_check_named(const attn_key *frozen, const attn_key *now, attn_error_detail *d);

#endif

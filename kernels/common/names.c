/* Names and parsers of the enumeration lists (attn/names.h), generated from
 * the X-macro lists of attn/types.h: one list, every use. */
#include "attn/names.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/client.h"

/* The enum of attn_op ends with ATTN_OP_COUNT, so its values must be the
 * list's positions; the other lists are looked up by value. */
_Static_assert(ATTN_OP_COUNT == 0 ATTN_OPS(ATTN__ENUM_PLUS_ONE), "ATTN_OPS is not 0..n-1");

typedef struct name_entry {
    int value;
    const char *name;
} name_entry;

#define NAME_ENTRY(e, v, s, ...) {(e), (s)},
#define NAME_CASE(e, v, s, ...)                                                                    \
    case e:                                                                                        \
        return (s);

/* Find `s` in `tab`; on failure fill `err` with the field and the allowed names. */
static int parse_in(const name_entry *tab, size_t n, const char *s, const char *field, int code,
                    int *out, attn_error_detail *err)
{
    char allowed[160];
    size_t used = 0;
    for (size_t k = 0; s != NULL && k < n; k++)
        if (strcmp(s, tab[k].name) == 0) {
            *out = tab[k].value;
            return 0;
        }
    allowed[0] = '\0';
    for (size_t k = 0; k < n && used < sizeof allowed; k++)
        used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s", k ? ", " : "",
                                 tab[k].name);
    if (s == NULL)
        return attn_error_set(err, code, field, "%s is missing (one of %s)", field, allowed);
    return attn_error_set(err, code, field, "%s \"%.40s\" is not one of %s", field, s, allowed);
}

/* The name switch has no default: -Wswitch checks it against the enum.
 * `names` lists every enumerator (for the switch), `parsed` the ones a wire
 * name may parse to. */
#define NAMES_DEFINE2(type, names, parsed, code)                                                   \
    const char *type##_name(type v)                                                                \
    {                                                                                              \
        switch (v) {                                                                               \
            names(NAME_CASE)                                                                       \
        }                                                                                          \
        return "?";                                                                                \
    }                                                                                              \
    int type##_parse(const char *s, const char *field, type *out, attn_error_detail *err)          \
    {                                                                                              \
        static const name_entry tab[] = {parsed(NAME_ENTRY)};                                      \
        int v, rv = parse_in(tab, sizeof tab / sizeof tab[0], s, field, (code), &v, err);          \
        if (rv == 0)                                                                               \
            *out = (type)v;                                                                        \
        return rv;                                                                                 \
    }
#define NAMES_DEFINE(type, list, code) NAMES_DEFINE2(type, list, list, code)

/* ATTN_POLARITY_UNSET is an enumerator but not on the list (no wire name
 * parses to it); it still has a name for keys and messages. */
#define POLARITIES_AND_UNSET(X) X(ATTN_POLARITY_UNSET, 0, "unset") ATTN_MASK_POLARITIES(X)

NAMES_DEFINE(attn_dtype, ATTN_DTYPES, ATTN_E_DTYPE)
NAMES_DEFINE(attn_layout, ATTN_LAYOUTS, ATTN_E_RANGE)
NAMES_DEFINE(attn_phase, ATTN_PHASES, ATTN_E_PHASE)
NAMES_DEFINE(attn_kv_format, ATTN_KV_FORMATS, ATTN_E_RANGE)
NAMES_DEFINE(attn_mask_kind, ATTN_MASK_KINDS, ATTN_E_MASK_KIND)
NAMES_DEFINE2(attn_mask_polarity, POLARITIES_AND_UNSET, ATTN_MASK_POLARITIES, ATTN_E_MASK_POLARITY)
NAMES_DEFINE(attn_schedule_policy, ATTN_SCHEDULES, ATTN_E_POLICY)
NAMES_DEFINE(attn_state_abi, ATTN_STATE_ABIS, ATTN_E_POLICY)
NAMES_DEFINE(attn_split_policy, ATTN_SPLIT_POLICIES, ATTN_E_POLICY)
NAMES_DEFINE(attn_platform, ATTN_PLATFORMS, ATTN_E_RANGE)
NAMES_DEFINE(attn_buffer_kind, ATTN_BUFFER_KINDS, ATTN_E_RANGE)
NAMES_DEFINE(attn_run_state, ATTN_RUN_STATES, ATTN_E_RANGE)

/* ---- operations (public client API: attn/client.h) ---------------------- */

const char *attn_op_name(attn_op op)
{
    switch (op) {
        ATTN_OPS(NAME_CASE)
    case ATTN_OP_COUNT:
        break;
    }
    return "?";
}

int attn_op_from_name(const char *name, attn_op *op)
{
    static const name_entry tab[] = {ATTN_OPS(NAME_ENTRY)};
    for (size_t k = 0; name != NULL && k < sizeof tab / sizeof tab[0]; k++)
        if (strcmp(name, tab[k].name) == 0) {
            *op = (attn_op)tab[k].value;
            return 1;
        }
    return 0;
}

/* ---- facts of one entry ------------------------------------------------- */

char attn_phase_letter(attn_phase ph)
{
    switch (ph) {
#define LETTER_CASE(e, v, s, letter)                                                               \
    case e:                                                                                        \
        return (letter);
        ATTN_PHASES(LETTER_CASE)
#undef LETTER_CASE
    }
    return '?';
}

int attn_phase_of_letter(char c, attn_phase *out)
{
#define LETTER_IF(e, v, s, letter)                                                                 \
    if (c == (letter)) {                                                                           \
        *out = (e);                                                                                \
        return 1;                                                                                  \
    }
    ATTN_PHASES(LETTER_IF)
#undef LETTER_IF
    return 0;
}

int attn_phase_classify(int64_t cache_len, int64_t new_len, attn_phase *phase)
{
    /* seed 0x08H freeze_microbatch: the three phases, anything else fails */
    if (cache_len == 0 && new_len > 0)
        *phase = ATTN_PHASE_PREFILL;
    else if (cache_len > 0 && new_len == 1)
        *phase = ATTN_PHASE_DECODE;
    else if (cache_len > 0 && new_len > 1)
        *phase = ATTN_PHASE_APPEND;
    else
        return ATTN_E_PHASE;
    return 0;
}

double attn_sm_scale_default(uint32_t head_dim_qk)
{
    /* a zero head_dim is refused by validation; 1 keeps the scale finite
     * for callers (the key) that may see an unvalidated geometry */
    return 1.0 / sqrt((double)(head_dim_qk ? head_dim_qk : 1));
}

float attn_manifest_sm_scale(const attn_manifest *m, const attn_pool_geometry *g)
{
    return m->has_sm_scale ? m->sm_scale : (float)attn_sm_scale_default(g->head_dim_qk);
}

attn_tolerance attn_tolerance_for(attn_dtype q_dtype, attn_dtype kv_dtype)
{
    attn_tolerance t;
    if (q_dtype == ATTN_FP32 && kv_dtype == ATTN_FP32) {
        t.metric = "max_rel";
        t.rtol = 1e-5;
        t.lse_atol = 1e-5;
    } else {
        /* half-precision storage: normwise error, LSE absolute (device METHOD.md) */
        t.metric = "rel_l2";
        t.rtol = 1e-2;
        t.lse_atol = 1e-3;
    }
    return t;
}

/* Workspace ledgers (seed 0x03D-0x03H): one layout routine that counts when
 * given no buffer and carves when given one, so sizing and carving agree. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/common/dtype.h"
#include "planner/ledger.h"

/* The aligned bump allocator: base == NULL only advances the cursor. */
typedef struct carver {
    char *base;
    uint64_t capacity;
    uint64_t align;
    uint64_t cursor;
} carver;

static int carve_field(carver *c, attn_ledger *l, const char *name, const char *dtype,
                       uint32_t elem_bytes, uint64_t elems, attn_error_detail *err)
{
    if (elems != 0 && elem_bytes > UINT64_MAX / elems)
        return attn_error_set(err, ATTN_E_TOO_LARGE, name, "%llu elements overflow the ledger",
                              (unsigned long long)elems);
    uint64_t bytes = elems * elem_bytes;
    uint64_t offset = (c->cursor + c->align - 1) / c->align * c->align;
    if (offset < c->cursor || offset > UINT64_MAX - bytes)
        return attn_error_set(err, ATTN_E_TOO_LARGE, name, "field ends past 2^64 bytes");
    attn_ledger_field *f = &l->fields[l->num_fields++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    snprintf(f->dtype, sizeof(f->dtype), "%s", dtype);
    f->elem_bytes = elem_bytes;
    f->elems = elems;
    f->bytes = bytes;
    f->offset = offset;
    c->cursor = offset + bytes;
    l->payload_bytes += bytes;
    if (c->base != NULL) {
        if (c->cursor > c->capacity)
            return attn_error_set(err, ATTN_E_WORKSPACE, name,
                                  "field ends at byte %llu of a %llu-byte workspace",
                                  (unsigned long long)c->cursor, (unsigned long long)c->capacity);
        f->ptr = c->base + offset;
    }
    return 0;
}

int attn_ledger_layout(const attn_ledger_spec *spec, void *base, uint64_t capacity,
                       attn_ledger *out, attn_error_detail *err)
{
    int rv;
    memset(out, 0, sizeof(*out));
    uint32_t vb = (uint32_t)attn_dtype_size(spec->vec_dtype);
    uint32_t sb = (uint32_t)attn_dtype_size(spec->scalar_dtype);
    if (vb == 0)
        return attn_error_set(err, ATTN_E_DTYPE, "vec_dtype", "unknown partial vector dtype %d",
                              (int)spec->vec_dtype);
    if (sb == 0)
        return attn_error_set(err, ATTN_E_DTYPE, "scalar_dtype", "unknown partial scalar dtype %d",
                              (int)spec->scalar_dtype);
    if (spec->abi != ATTN_ABI_MLU && spec->abi != ATTN_ABI_LSE_O)
        return attn_error_set(err, ATTN_E_POLICY, "policy.state_abi", "unknown state ABI %d",
                              (int)spec->abi);
    if (spec->head_dim_vo == 0)
        return attn_error_set(err, ATTN_E_SHAPE, "head_dim_vo", "head_dim_vo must be > 0");
    uint64_t align = spec->align_bytes > 0 ? spec->align_bytes : 1;
    if ((align & (align - 1)) != 0)
        return attn_error_set(err, ATTN_E_RANGE, "align_bytes",
                              "alignment %u is not a power of two", spec->align_bytes);
    if (base != NULL && ((uintptr_t)base & (align - 1)) != 0)
        return attn_error_set(err, ATTN_E_WORKSPACE, "workspace",
                              "workspace base is not %llu-byte aligned", (unsigned long long)align);

    /* seed 0x03D: d_v_padded = round_up(d_v, vector_alignment_elements) */
    uint64_t va = spec->vec_align > 0 ? spec->vec_align : 1;
    uint64_t dpad = (spec->head_dim_vo + va - 1) / va * va;
    if (dpad > UINT32_MAX)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "vec_align", "padded head width overflows");
    out->head_dim_padded = (uint32_t)dpad;
    if (spec->states != 0 && dpad > UINT64_MAX / spec->states)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "states", "%llu states overflow the ledger",
                              (unsigned long long)spec->states);

    carver c = {(char *)base, capacity, align, 0};
    const char *vd = attn_dtype_name(spec->vec_dtype), *sd = attn_dtype_name(spec->scalar_dtype);
    /* seed 0x03E: every field of the ABI with its own dtype, none omitted */
    if (spec->abi == ATTN_ABI_MLU) {
        if ((rv = carve_field(&c, out, "partial_u", vd, vb, spec->states * dpad, err)) != 0 ||
            (rv = carve_field(&c, out, "partial_m", sd, sb, spec->states, err)) != 0 ||
            (rv = carve_field(&c, out, "partial_l", sd, sb, spec->states, err)) != 0)
            return rv;
    } else {
        if ((rv = carve_field(&c, out, "partial_O", vd, vb, spec->states * dpad, err)) != 0 ||
            (rv = carve_field(&c, out, "partial_LSE", sd, sb, spec->states, err)) != 0)
            return rv;
    }
    if (spec->explicit_valid &&
        (rv = carve_field(&c, out, "partial_valid", "uint8", 1, spec->states, err)) != 0)
        return rv;
    out->total_bytes = c.cursor;
    return 0;
}

const attn_ledger_field *attn_ledger_find(const attn_ledger *l, const char *name)
{
    for (uint32_t i = 0; i < l->num_fields; i++)
        if (strcmp(l->fields[i].name, name) == 0)
            return &l->fields[i];
    return NULL;
}

uint64_t attn_plan_num_states(const attn_split_plan *plan, const int64_t *q_len,
                              uint32_t num_qo_heads, bool capacity)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < plan->num_items; i++) {
        const attn_work_item *it = &plan->items[i];
        /* seed 0x03E: N_cfg counts configured splits, N_cap every slot */
        if (!capacity && it->kv_end <= it->kv_begin)
            continue;
        n += (q_len != NULL ? (uint64_t)q_len[it->req] : 1) * num_qo_heads;
    }
    if (capacity && plan->slot_capacity > plan->num_slots)
        n += (uint64_t)(plan->slot_capacity - plan->num_slots) * num_qo_heads;
    return n;
}

void attn_ledger_reduction_traffic(const attn_ledger *l, uint64_t out_states, uint32_t head_dim_vo,
                                   attn_dtype o_dtype, bool write_lse, attn_reduction_traffic *t)
{
    /* seed 0x03F: 2 M_partial + B H_q d_v b_O + [LSE] B H_q b_state */
    t->partial_write = l->payload_bytes;
    t->partial_read = l->payload_bytes;
    t->output_write = out_states * head_dim_vo * attn_dtype_size(o_dtype);
    t->lse_write = write_lse ? out_states * 4u : 0;
    t->total = t->partial_write + t->partial_read + t->output_write + t->lse_write;
}

void attn_plan_load_traffic(const attn_split_plan *plan, const int64_t *q_len,
                            const attn_load_spec *s, attn_load_traffic *t)
{
    uint64_t qb = attn_dtype_size(s->q_dtype);
    uint64_t kvb = attn_dtype_size(s->kv_dtype);
    uint64_t row_kv = (uint64_t)(s->head_dim_qk + s->head_dim_vo) * kvb;
    uint64_t row_q = (uint64_t)s->head_dim_qk * qb * s->num_qo_heads;
    memset(t, 0, sizeof(*t));
    for (uint32_t b = 0; b < plan->num_requests; b++)
        t->q_unique += (q_len != NULL ? (uint64_t)q_len[b] : 1) * row_q;
    for (uint32_t i = 0; i < plan->num_items; i++) {
        const attn_work_item *it = &plan->items[i];
        if (it->kv_end <= it->kv_begin)
            continue; /* an identity slot loads nothing */
        uint64_t keys = (uint64_t)(it->kv_end - it->kv_begin);
        t->q_demand += (q_len != NULL ? (uint64_t)q_len[it->req] : 1) * row_q;
        /* seed 0x03F: the H_q / H_kv gap is a reuse opportunity, not a
         * prediction of DRAM transfers, so both ledgers are reported */
        t->kv_unique += keys * s->num_kv_heads * row_kv;
        t->kv_demand += keys * s->num_qo_heads * row_kv;
    }
}

size_t attn_ledger_json(const attn_ledger *l, char *buf, size_t cap)
{
    size_t len = 0;
    if (buf != NULL && cap > 0)
        buf[0] = '\0';
#define LEDGER_PUT(...)                                                                            \
    do {                                                                                           \
        size_t room = len < cap ? cap - len : 0;                                                   \
        int n = snprintf(room > 0 ? buf + len : NULL, room, __VA_ARGS__);                          \
        if (n > 0)                                                                                 \
            len += (size_t)n;                                                                      \
    } while (0)
    LEDGER_PUT("{\"total_bytes\":%llu,\"payload_bytes\":%llu,\"head_dim_padded\":%u,\"fields\":[",
               (unsigned long long)l->total_bytes, (unsigned long long)l->payload_bytes,
               l->head_dim_padded);
    for (uint32_t i = 0; i < l->num_fields; i++) {
        const attn_ledger_field *f = &l->fields[i];
        LEDGER_PUT("%s{\"name\":\"%s\",\"dtype\":\"%s\",\"elems\":%llu,\"bytes\":%llu,"
                   "\"offset\":%llu}",
                   i ? "," : "", f->name, f->dtype, (unsigned long long)f->elems,
                   (unsigned long long)f->bytes, (unsigned long long)f->offset);
    }
    LEDGER_PUT("]}");
#undef LEDGER_PUT
    return len;
}

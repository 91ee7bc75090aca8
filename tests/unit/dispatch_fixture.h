/* Test fixture shared by the admission tests: the base decode call of seed
 * 0x07D (CUDA cc 90, decode S_q=1 S_k=4096, H_q 32 / H_kv 8, d 128, fp16 Q
 * and K/V, paged NHD page 16, causal, graph on, auto) as our manifest, and
 * two test doubles of the engine interface: a CUDA decode backend with the
 * admission predicate of the "cuda" engine (decode only, page sizes
 * {1,16,32,64,128}, head dims 64/128/256 with d_qk == d_vo, fp16/bf16 K/V
 * with q of the same dtype, causal/none/window/sink masks, needs a device),
 * and a CPU reference (every phase, mask and head dim, fp32/fp16/bf16, no
 * graph capture).  Header-only: every function is static.
 */
#ifndef ATTN_TESTS_DISPATCH_FIXTURE_H
#define ATTN_TESTS_DISPATCH_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "planner/backend.h"
#include "planner/key.h"
#include "planner/registry.h"

#define FX_PAGES 256

typedef struct fx_call {
    attn_manifest m;
    attn_pool_geometry g;
    attn_request_desc req[1];
    int32_t qo_indptr[2];
    int32_t page_indptr[2];
    int32_t page_indices[FX_PAGES];
    int32_t last_page_len[1];
    char device_type[8];
    char device[16];
    char workspace_device[16];
    int cc;
} fx_call;

/* The seed 0x07D base call. */
static inline void fx_base(fx_call *c)
{
    memset(c, 0, sizeof *c);
    c->req[0] = (attn_request_desc){.id = "r0", .cache_len = 4095, .new_len = 1};
    c->qo_indptr[0] = 0;
    c->qo_indptr[1] = 1;
    c->page_indptr[0] = 0;
    c->page_indptr[1] = FX_PAGES;
    for (int i = 0; i < FX_PAGES; i++)
        c->page_indices[i] = i;
    c->last_page_len[0] = 16;
    snprintf(c->m.pool, sizeof c->m.pool, "p0");
    c->m.num_qo_heads = 32;
    c->m.num_requests = 1;
    c->m.requests = c->req;
    c->m.qo_indptr = c->qo_indptr;
    c->m.kv.format = ATTN_KV_CSR;
    c->m.kv.page_indptr = c->page_indptr;
    c->m.kv.page_indices = c->page_indices;
    c->m.kv.num_page_indices = FX_PAGES;
    c->m.kv.last_page_len = c->last_page_len;
    c->m.mask.kind = ATTN_MASK_CAUSAL;
    c->m.q_dtype = ATTN_FP16;
    snprintf(c->m.policy.backend, sizeof c->m.policy.backend, "auto");
    c->m.policy.deterministic = true;
    c->m.policy.graph = true;
    snprintf(c->g.name, sizeof c->g.name, "p0");
    c->g.layers = 1;
    c->g.num_pages = FX_PAGES;
    c->g.page_size = 16;
    c->g.num_kv_heads = 8;
    c->g.head_dim_qk = 128;
    c->g.head_dim_vo = 128;
    c->g.kv_dtype = ATTN_FP16;
    c->g.layout = ATTN_NHD;
    snprintf(c->g.device, sizeof c->g.device, "cuda:0");
    snprintf(c->device_type, sizeof c->device_type, "cuda");
    snprintf(c->device, sizeof c->device, "cuda:0");
    snprintf(c->workspace_device, sizeof c->workspace_device, "cuda:0");
    c->cc = 90;
}

/* Move the call to the host (seed 0x07D "CPU decode"). */
static inline void fx_to_cpu(fx_call *c)
{
    snprintf(c->g.device, sizeof c->g.device, "cpu");
    snprintf(c->device_type, sizeof c->device_type, "cpu");
    snprintf(c->device, sizeof c->device, "cpu");
    snprintf(c->workspace_device, sizeof c->workspace_device, "cpu");
    c->cc = 0;
}

static inline attn_key_env fx_env(const fx_call *c)
{
    attn_key_env e = {c->device_type, c->cc, c->device, c->workspace_device};
    return e;
}

/* Initialise `k` and build the call key of `c` in its environment. */
static inline int fx_call_key(const fx_call *c, attn_key *k)
{
    attn_key_env env = fx_env(c);
    attn_key_init(k);
    return attn_call_key_build(&c->m, &c->g, &env, k);
}

/* ---- test doubles of the engine interface ---------------------------- */

typedef struct fx_device {
    int present; /* a CUDA device exists */
    int admit_calls;
} fx_device;

/* An engine double: its ops table and one instance of it (device 0 for a
 * CUDA double, the host otherwise); the instance's state is the fx_device. */
typedef struct fx_engine {
    attn_engine_ops ops;
    attn_engine inst;
} fx_engine;

/* Point the instance at its own table (after copying or editing one). */
static inline attn_engine *fx_engine_ready(fx_engine *f)
{
    f->inst.ops = &f->ops;
    f->inst.device = f->ops.platform == ATTN_PLATFORM_CUDA ? 0 : -1;
    snprintf(f->inst.where, sizeof f->inst.where, "%s",
             f->ops.platform == ATTN_PLATFORM_CUDA ? "cuda:0" : "cpu");
    return &f->inst;
}

static inline void fx_cuda_decode_admit(const attn_engine *self, const attn_manifest *m,
                                        const attn_pool_geometry *g, attn_admission *out)
{
    fx_device *dev = self->state;
    dev->admit_calls++;
    if (!dev->present)
        attn_admission_reject(out, ATTN_ADMIT_HARDWARE, "device", "no CUDA device present");
    for (uint32_t b = 0; b < m->num_requests; b++)
        if (m->requests[b].new_len != 1) {
            attn_admission_reject(out, ATTN_ADMIT_PHASE, "requests", "decode only (C = 1)");
            break;
        }
    if (g->kv_dtype != ATTN_FP16 && g->kv_dtype != ATTN_BF16)
        attn_admission_reject(out, ATTN_ADMIT_KV_DTYPE, "kv_dtype",
                              "kv_dtype %s not in {fp16, bf16}", attn_dtype_name(g->kv_dtype));
    if (m->q_dtype != g->kv_dtype)
        attn_admission_reject(out, ATTN_ADMIT_Q_DTYPE, "q_dtype",
                              "q_dtype %s differs from kv_dtype %s", attn_dtype_name(m->q_dtype),
                              attn_dtype_name(g->kv_dtype));
    uint32_t dims[2] = {g->head_dim_qk, g->head_dim_vo};
    const char *dim_names[2] = {"head_dim_qk", "head_dim_vo"};
    for (int i = 0; i < 2; i++)
        if (dims[i] != 64 && dims[i] != 128 && dims[i] != 256)
            attn_admission_reject(out, ATTN_ADMIT_SHAPE, dim_names[i], "%s=%u unsupported",
                                  dim_names[i], dims[i]);
    if (g->head_dim_qk != g->head_dim_vo)
        attn_admission_reject(out, ATTN_ADMIT_SHAPE, "head_dim_vo", "head_dim_qk != head_dim_vo");
    uint32_t P = g->page_size;
    if (P != 1 && P != 16 && P != 32 && P != 64 && P != 128)
        attn_admission_reject(out, ATTN_ADMIT_LAYOUT, "page_size",
                              "page_size %u not in {1,16,32,64,128}", P);
    if (m->mask.kind == ATTN_MASK_FLASHMASK || m->mask.kind == ATTN_MASK_DENSE)
        attn_admission_reject(out, ATTN_ADMIT_MASK, "mask.kind", "mask_kind=%s unsupported",
                              attn_mask_kind_name(m->mask.kind));
    out->admitted = out->num_reasons == 0;
}

static inline void fx_cpu_ref_admit(const attn_engine *self, const attn_manifest *m,
                                    const attn_pool_geometry *g, attn_admission *out)
{
    fx_device *dev = self->state;
    dev->admit_calls++;
    if (m->policy.graph)
        attn_admission_reject(out, ATTN_ADMIT_LIFECYCLE, "policy.graph",
                              "graph capture needs a CUDA stream; the host reference has none");
    out->admitted = out->num_reasons == 0;
}

#define FX_DECODE (1u << ATTN_PHASE_DECODE)
#define FX_ALL_PHASES ((1u << ATTN_PHASE_PREFILL) | (1u << ATTN_PHASE_APPEND) | FX_DECODE)

/* A registry with the CUDA decode double (priority 10) and the CPU
 * reference double (priority 100) serving host pools and, through a host
 * gather, device pools (the seed's paged_reference role). */
static inline void fx_registry(attn_registry *r, fx_engine *cuda, fx_engine *cpu, fx_device *dev)
{
    memset(cuda, 0, sizeof *cuda);
    memset(cpu, 0, sizeof *cpu);
    cuda->ops = (attn_engine_ops){.version = ATTN_ENGINE_OPS_VERSION,
                                  .name = "cuda_decode",
                                  .platform = ATTN_PLATFORM_CUDA,
                                  .phases = FX_DECODE,
                                  .schedules = 1u << ATTN_SCHED_PARTITION,
                                  .priority = 10,
                                  .admit = fx_cuda_decode_admit};
    cpu->ops =
        (attn_engine_ops){.version = ATTN_ENGINE_OPS_VERSION,
                          .name = "cpu_ref",
                          .platform = ATTN_PLATFORM_CPU,
                          .phases = FX_ALL_PHASES,
                          .schedules = (1u << ATTN_SCHED_PARTITION) | (1u << ATTN_SCHED_UNIFIED),
                          .priority = 100,
                          .admit = fx_cpu_ref_admit};
    cuda->inst.state = dev;
    cpu->inst.state = dev;
    attn_registry_init(r);
    attn_registry_add(r, fx_engine_ready(cuda), NULL);
    attn_registry_add_platforms(r, fx_engine_ready(cpu), 1u << ATTN_PLATFORM_CUDA, NULL);
}

#endif

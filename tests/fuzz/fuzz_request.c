/* Coverage-guided fuzz target (libFuzzer) over what a hostile client
 * reaches: the frame decoder, the JSON form, the manifest validator and the
 * one-request handler of the daemon, in-process with the CPU engine.
 *
 * Each input is one or more frames (fuzz_frames.h) answered in order by a
 * fresh server (the validator runs behind plan/attend on the pool named), so an input is
 * reproducible on its own and may build the state a later frame needs (pool_create, kv_write, plan,
 * then run).  The server's pool budget, frame cap and the sanitizer's malloc limit bound what one
 * input may allocate.  Oracles besides the sanitizers: the handler answers every frame (0 and a
 * reply), and the reply decodes as a reply. (Rendering frames as JSON is the client's side, covered
 * by test_codec_fuzz.)
 *
 * Build and run: `make fuzz FUZZ_SECONDS=60` (docs/fuzz.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/client.h"
#include "daemon/config.h"
#include "daemon/server.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "tests/fuzz/fuzz_frames.h"

/* A small pool named "main" exists before the first frame; frames may
 * create others within the budget below. */
#define FUZZ_POOL_BUDGET (16ull << 20)
#define FUZZ_MAX_MSG (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* One allocation above 256 MiB fails (the daemon answers E_NOMEM) instead of
 * taking the host: defect 3 of issue 9 (reply amplification) is bounded by
 * the reply cap, not here.  Short allocation stacks and a small quarantine
 * keep the executions fast enough for a long run on a shared core. */
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=256:allocator_may_return_null=1:malloc_context_size=8:"
           "quarantine_size_mb=32";
}

static void fuzz_config(attnd_config *cfg)
{
    attn_pool_geometry *g = &cfg->pools[0];
    attnd_config_defaults(cfg);
    cfg->engine = ATTND_ENGINE_CPU;
    cfg->threads = 1; /* the engine runs on the calling thread */
    cfg->max_plans = 8;
    cfg->max_msg = FUZZ_MAX_MSG;
    cfg->pool_budget = FUZZ_POOL_BUDGET;
    cfg->num_pools = 1;
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "main");
    g->layers = 2;
    g->num_pages = 16;
    g->page_size = 4;
    g->num_kv_heads = 2;
    g->head_dim_qk = 8;
    g->head_dim_vo = 8;
    g->kv_dtype = ATTN_FP32;
    g->layout = ATTN_NHD;
    snprintf(g->device, sizeof g->device, "cpu");
}

/* The frame as msgpack: itself, or its JSON form converted (NULL when the
 * JSON does not convert; that rejection is the decoder's answer). */
static const void *as_msgpack(const uint8_t *p, size_t n, attn_buf *conv, size_t *len)
{
    attn_json_hints hints;
    attn_error_detail err;
    if (n == 0 || (p[0] != '{' && p[0] != '['))
        return *len = n, p;
    memset(&hints, 0, sizeof hints);
    hints.has_q_dtype = true;
    hints.q_dtype = ATTN_FP32;
    hints.has_kv_dtype = true;
    hints.kv_dtype = ATTN_FP32;
    if (attn_json_to_msgpack((const char *)p, n, &hints, conv, &err) != 0)
        return NULL;
    *len = conv->len;
    return conv->data;
}

static void answer(attn_server *s, const void *frame, size_t len)
{
    void *reply = NULL;
    size_t reply_len = 0;
    attn_reply rep;
    attn_error_detail err;
    if (attn_server_handle(s, frame, len, &reply, &reply_len) != 0 || reply == NULL) {
        fprintf(stderr, "fuzz: the handler built no reply\n");
        abort();
    }
    memset(&rep, 0, sizeof rep);
    if (attn_reply_decode(reply, reply_len, NULL, &rep, &err) != 0) {
        fprintf(stderr, "fuzz: the daemon's reply does not decode: %s: %s\n", err.field,
                err.message);
        abort();
    }
    attn_reply_free(&rep);
    free(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    attnd_config cfg;
    attn_server *s;
    attn_error_detail err;
    size_t off = 0;

    fuzz_config(&cfg);
    if (attn_server_create(&s, &cfg, &err) != 0) {
        fprintf(stderr, "fuzz: server: %s: %s\n", err.field, err.message);
        abort();
    }
    for (int f = 0; f < ATTN_FUZZ_MAX_FRAMES && off <= size; f++) {
        size_t n = attn_fuzz_frame_len(data + off, size - off);
        attn_buf conv = {0};
        size_t len = 0;
        const void *frame = as_msgpack(data + off, n, &conv, &len);
        if (frame != NULL) {
            answer(s, frame, len);
        }
        attn_buf_free(&conv);
        off += n + ATTN_FUZZ_SEP_LEN;
    }
    attn_server_destroy(s);
    return 0;
}

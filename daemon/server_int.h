/* Private to daemon/: the server state shared by server.c (dispatch, pools,
 * hello, stats) and exec.c (plan, run, attend). */
#ifndef ATTN_DAEMON_SERVER_INT_H
#define ATTN_DAEMON_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "attn/client.h"
#include "daemon/async_runs.h"
#include "daemon/log.h"
#include "protocol/capture.h"
#include "daemon/buffers.h"
#include "daemon/handoff.h"
#include "daemon/plan_cache.h"
#include "daemon/pool.h"
#include "daemon/server.h"
#include "planner/key.h"
#include "planner/ledger.h"
#include "planner/registry.h"
#include "protocol/codec.h"

/* The version has one home, the VERSION file (the Makefile passes it in). */
#ifndef ATTN_VERSION
#error "ATTN_VERSION is defined by the Makefile from the VERSION file"
#endif
#define ATTND_VERSION ATTN_VERSION

struct attn_server {
    attnd_config cfg;
    attnd_pool_table *pools;
    attnd_plan_cache *plans;
    attnd_buffer_table *buffers; /* registered buffers, by connection */
    attn_registry registry;
    uint32_t num_engines;
    attn_engine *engines[1 + 2 * ATTN_ENGINE_DEVICES_MAX]; /* owned (cpu, then two CUDA engines per
                                                              device); the registry borrows them */
    attn_capture *capture;
    attnd_metrics metrics;
    attn_codec_limits limits;
    _Atomic uint64_t max_reply; /* --max-reply; SIGHUP may change it */
    _Atomic uint64_t engine_failures;
    char build_id[64];
    char artifact[128];
    char artifact_sha[ATTN_SHA256_HEX]; /* "" until the artifact identity is known */
    bool source_identified;
    void *identity; /* the artifact identity as one msgpack map (hello) */
    size_t identity_len;
    char device_desc[ATTN_NAME_MAX]; /* "cuda:0 NVIDIA H200 cc9.0 132sm 139GiB" or "" */
    pthread_rwlock_t trace_lock;     /* a traced device run holds it exclusively */
    attnd_log *log;                  /* NULL: no request log (attnctl --local, tests) */
    attnd_async *async;              /* asynchronous runs, semaphore waits */
    int mps;                         /* 1: CUDA contexts under MPS, 0: not, -1: unknown / no GPU */
    char mps_note[192];              /* what that means for a GPU-side hand-off */
    attnd_handoff handoff;           /* the ping-pong measured at cuda_ipc registrations */
};

/* What a `plan` (or the plan half of an `attend`) froze: the validated
 * manifest, its pool, the selected engine instance and the engine plan it
 * made (split plan, ledger, key environment, device metadata). */
typedef struct attnd_plan {
    attn_manifest m;
    char pool[ATTN_NAME_MAX];
    uint64_t pool_generation;
    attn_pool_geometry geom;
    attn_engine *engine;     /* the instance that made eplan */
    attn_engine_plan *eplan; /* freed through the engine's plan_free */
    attn_key call_key;
    attn_selection *sel; /* candidates, reasons, fallback: reported by every reply */
    char plan_key_sha[ATTN_SHA256_HEX];
    attn_plan_decision decision;
    double plan_us;
} attnd_plan;

/* Bytes a plan holds: the struct, its manifest's arrays, its selection and
 * its engine plan's struct and split plan (what the plan cache's byte bound
 * counts; an engine's private per-plan data is not seen here). */
uint64_t attnd_plan_bytes(const attnd_plan *p);

/* Free a plan object (the plan cache's free callback). */
void attnd_plan_free(void *obj);

/* plan: validate, select, split, cache; fills rep (plan_id, plan_key, diag). */
int attnd_exec_plan(attn_server *s, attn_request *req, attn_reply *rep, void **scratch,
                    attn_error_detail *err);

/* run: look the plan up, check shapes, resolve buffer references of
 * connection `conn`, run the engine with commit; fills rep. */
int attnd_exec_run(attn_server *s, uint32_t conn, attn_request *req, attn_reply *rep,
                   void **scratch, attn_error_detail *err);

/* attend: plan then run in one request (buffer references of `conn`). */
int attnd_exec_attend(attn_server *s, uint32_t conn, attn_request *req, attn_reply *rep,
                      void **scratch, attn_error_detail *err);

typedef struct attn_cuda_ipc attn_cuda_ipc;

/* The IPC cache and semaphore operations of the cuda_decode instance on
 * `device` (cuda_ipc buffers, device waits); NULL with `why` filled when
 * there is none. */
attn_cuda_ipc *attnd_server_ipc(attn_server *s, int device, char *why, size_t n);

/* Release what an exec call left in `scratch` (output buffers, diag bytes). */
void attnd_exec_scratch_free(void **scratch);

#endif

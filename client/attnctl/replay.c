/* attnctl replay: send a capture's requests to a daemon (history included,
 * so a fresh daemon reproduces the state), compare every reply with the
 * recorded one, print a table per request and exit non-zero on any
 * mismatch.
 *
 * Comparison (--verify): ok and error code always; O and LSE bit for bit
 * when both replies are fp32 from the CPU reference engine, else within the
 * tolerance the call declares (planner/key.h attn_tolerance_for); kv_read
 * pages bit for bit; plan keys equal.  Plan ids are remapped: a run names
 * the id the replaying daemon gave, not the recorded one.
 *
 * Re-runnable: by default every pool of the capture is renamed NAME.<tag>,
 * a tag no other invocation shares, and the replay drops the pools it
 * created when it ends (also after an error or Ctrl-C), so replays run
 * again, or side by side, on one daemon.  --keep-names uses the recorded
 * names and leaves the pools (--replace drops existing ones first).  Any
 * error reply the recording did not have makes the exit status 1.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnctl.h"
#include "protocol/capture.h"
#include "attn/names.h"
#include "progress.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"

#define MAX_PLAN_MAP 4096

typedef struct plan_map {
    uint64_t from[MAX_PLAN_MAP], to[MAX_PLAN_MAP];
    char phases[MAX_PLAN_MAP][32];
    uint32_t n;
} plan_map;

static int map_find(const plan_map *m, uint64_t from)
{
    for (uint32_t i = m->n; i-- > 0;)
        if (m->from[i] == from)
            return (int)i;
    return -1;
}

static void map_put(plan_map *m, uint64_t from, uint64_t to, const char *phases)
{
    int i = map_find(m, from);
    if (i < 0) {
        if (m->n == MAX_PLAN_MAP) /* forget the oldest half: plans are used soon after */
        {
            memmove(m->from, m->from + MAX_PLAN_MAP / 2, sizeof m->from / 2);
            memmove(m->to, m->to + MAX_PLAN_MAP / 2, sizeof m->to / 2);
            memmove(m->phases, m->phases + MAX_PLAN_MAP / 2, sizeof m->phases / 2);
            m->n = MAX_PLAN_MAP / 2;
        }
        i = (int)m->n++;
    }
    m->from[i] = from;
    m->to[i] = to;
    snprintf(m->phases[i], sizeof m->phases[i], "%s", phases);
}

/* "2P+1A+3D" for a manifest. */
static void phase_mix(const attn_manifest *m, char *buf, size_t n)
{
    uint32_t cnt[3] = {0, 0, 0};
    const char tag[3] = {'P', 'A', 'D'};
    size_t used = 0;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        attn_phase ph;
        if (attn_phase_classify(m->requests[b].cache_len, m->requests[b].new_len, &ph) == 0)
            cnt[ph]++;
    }
    buf[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (cnt[i] == 0 || used >= n)
            continue;
        used += (size_t)snprintf(buf + used, n - used, "%s%u%c", used ? "+" : "", cnt[i], tag[i]);
    }
    if (buf[0] == '\0')
        snprintf(buf, n, "-");
}

/* Backend, split summary and plan-cache event from a reply's diagnostic. */
static void diag_summary(const attn_reply *r, char *backend, size_t nb, char *splits, size_t ns,
                         char *event, size_t ne)
{
    char *js = NULL;
    json_t *d;
    attn_error_detail err;
    snprintf(backend, nb, "-");
    snprintf(splits, ns, "-");
    snprintf(event, ne, "-");
    if (r->diag.len == 0 ||
        attn_msgpack_to_json(r->diag.data, r->diag.len, 0, false, &js, &err) != 0)
        return;
    d = json_loads(js, 0, NULL);
    free(js);
    if (d == NULL)
        return;
    if (json_is_string(json_object_get(d, "selected")))
        snprintf(backend, nb, "%s", json_string_value(json_object_get(d, "selected")));
    {
        json_t *sc = json_object_get(d, "schedule");
        json_t *sp = json_object_get(sc, "splits");
        if (json_is_array(sp)) {
            json_int_t mx = 0, tot = 0;
            size_t i;
            json_t *v;
            json_array_foreach(sp, i, v)
            {
                json_int_t x = json_integer_value(v);
                tot += x;
                if (x > mx)
                    mx = x;
            }
            snprintf(splits, ns, "%s max%lld/%lld",
                     json_is_string(json_object_get(sc, "split_policy"))
                         ? json_string_value(json_object_get(sc, "split_policy"))
                         : "?",
                     (long long)mx, (long long)tot);
        }
    }
    if (json_is_string(json_object_get(json_object_get(d, "plan_cache"), "event")))
        snprintf(event, ne, "%s",
                 json_string_value(json_object_get(json_object_get(d, "plan_cache"), "event")));
    json_decref(d);
}

/* Compare two tensors: exact, or relative L2 within rtol. */
static int tensors_match(const attn_bytes *a, const attn_bytes *b, attn_dtype dt, int exact,
                         double rtol, char *why, size_t n, const char *what)
{
    size_t es = attn_dtype_size(dt), cnt;
    double num = 0, den = 0;
    if (a->len != b->len) {
        snprintf(why, n, "%s: %llu bytes, recorded %llu", what, (unsigned long long)a->len,
                 (unsigned long long)b->len);
        return 0;
    }
    if (a->len == 0 || memcmp(a->data, b->data, a->len) == 0)
        return 1;
    if (es == 0) {
        snprintf(why, n, "%s: unknown dtype %d", what, (int)dt);
        return 0;
    }
    if (exact) {
        snprintf(why, n, "%s differs bitwise", what);
        return 0;
    }
    cnt = a->len / es;
    for (size_t i = 0; i < cnt; i++) {
        double x = attn_tensor_elem_f32(a, dt, i), y = attn_tensor_elem_f32(b, dt, i);
        if (isinf(x) || isinf(y)) {
            if (x != y) {
                snprintf(why, n, "%s[%zu]: %g vs recorded %g", what, i, x, y);
                return 0;
            }
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (sqrt(num) > rtol * (sqrt(den) + 1e-30)) {
        snprintf(why, n, "%s rel L2 %.3g > %.3g", what, sqrt(num) / (sqrt(den) + 1e-30), rtol);
        return 0;
    }
    return 1;
}

static int compare_replies(const attn_reply *now, const attn_reply *rec, const char *backend_now,
                           const char *backend_rec, attn_dtype kv_dtype, char *why, size_t n)
{
    int exact;
    attn_tolerance tol;
    if (now->ok != rec->ok) {
        snprintf(why, n, "ok=%d, recorded ok=%d (%s)", now->ok, rec->ok,
                 now->ok ? attn_err_name(rec->error.code) : attn_err_name(now->error.code));
        return 0;
    }
    if (!now->ok) {
        if (now->error.code != rec->error.code || strcmp(now->error.field, rec->error.field) != 0) {
            snprintf(why, n, "%s %.40s, recorded %s %.40s", attn_err_name(now->error.code),
                     now->error.field, attn_err_name(rec->error.code), rec->error.field);
            return 0;
        }
        return 1;
    }
    switch (now->op) {
    case ATTN_OP_PLAN:
        if (strcmp(now->plan_key, rec->plan_key) != 0) {
            snprintf(why, n, "plan key differs");
            return 0;
        }
        return 1;
    case ATTN_OP_RUN:
    case ATTN_OP_ATTEND:
        /* seed 0x02H: another engine may reorder the reduction; the CPU
         * reference in fp32 is deterministic, so it must agree bit for bit */
        exact = now->o_dtype == ATTN_FP32 && strcmp(backend_now, "cpu_ref") == 0 &&
                strcmp(backend_rec, "cpu_ref") == 0;
        tol = attn_tolerance_for(now->o_dtype, kv_dtype);
        if (now->o_dtype != rec->o_dtype) {
            snprintf(why, n, "o dtype differs");
            return 0;
        }
        if (!tensors_match(&now->o, &rec->o, now->o_dtype, exact, tol.rtol, why, n, "o"))
            return 0;
        if (now->has_lse != rec->has_lse) {
            snprintf(why, n, "lse presence differs");
            return 0;
        }
        return tensors_match(&now->lse, &rec->lse, ATTN_FP32, exact,
                             tol.lse_atol > 0 ? tol.lse_atol : 1e-5, why, n, "lse");
    case ATTN_OP_KV_READ:
        if (!tensors_match(&now->k, &rec->k, now->kv_dtype, 1, 0, why, n, "k") ||
            !tensors_match(&now->v_data, &rec->v_data, now->kv_dtype, 1, 0, why, n, "v"))
            return 0;
        return 1;
    case ATTN_OP_POOL_CREATE:
    case ATTN_OP_POOL_INFO:
        if (now->bytes != rec->bytes) {
            snprintf(why, n, "pool bytes %llu, recorded %llu", (unsigned long long)now->bytes,
                     (unsigned long long)rec->bytes);
            return 0;
        }
        return 1;
    default:
        return 1;
    }
}

#define MAX_OWNED_POOLS 128

/* Pools this replay created, dropped at its end unless --keep-names. */
typedef struct owned_pools {
    char name[MAX_OWNED_POOLS][ATTN_NAME_MAX];
    uint32_t n;
} owned_pools;

static void own(owned_pools *o, const char *name)
{
    for (uint32_t i = 0; i < o->n; i++)
        if (strcmp(o->name[i], name) == 0)
            return;
    if (o->n < MAX_OWNED_POOLS)
        snprintf(o->name[o->n++], ATTN_NAME_MAX, "%s", name);
}

/* NAME -> NAME.<suffix> in place; -1 when that no longer fits a pool name. */
static int rename_one(char name[ATTN_NAME_MAX], const char *suffix)
{
    size_t n = strnlen(name, ATTN_NAME_MAX), k = strlen(suffix);
    if (n == 0)
        return 0;
    if (n + 1 + k >= ATTN_NAME_MAX)
        return -1;
    name[n] = '.';
    memcpy(name + n + 1, suffix, k + 1);
    return 0;
}

/* Every pool name a request carries (pool_create/drop/info, manifest, kv). */
static int rename_request(attn_request *r, const char *suffix)
{
    return rename_one(r->pool, suffix) | rename_one(r->geom.name, suffix) |
           rename_one(r->manifest.pool, suffix) | rename_one(r->kv.pool, suffix);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int actl_cmd_replay(int argc, char **argv)
{
    const char *file = NULL, *url = NULL;
    int local = 0, verify = 0, quiet = 0, keep_names = 0, replace = 0;
    char suffix[24] = "";
    owned_pools *owned;
    uint64_t unexpected = 0;
    int stop = 0; /* a pool could not be set up: the rest would run on someone else's */
    uint32_t repeat = 1;
    attn_capture_reader *rd = NULL;
    attn_capture_header h;
    attn_error_detail err;
    actl_conn c;
    plan_map *pm;
    uint64_t count = 0, mismatches = 0, failures = 0, bitwise = 0;
    attn_dtype kv_dtype = ATTN_FP32;
    double total_us = 0;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--url") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(argv[i], "--local") == 0)
            local = 1;
        else if (strcmp(argv[i], "--verify") == 0)
            verify = 1;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--keep-names") == 0)
            keep_names = 1;
        else if (strcmp(argv[i], "--replace") == 0)
            replace = keep_names = 1;
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (file == NULL && argv[i][0] != '-')
            file = argv[i];
        else
            file = NULL, i = argc;
    }
    if (file == NULL || repeat == 0 || repeat > 100000) {
        fprintf(stderr,
                "usage: attnctl replay FILE [--url U | --local] [--verify] [--repeat N] [--quiet]\n"
                "                      [--keep-names [--replace]]\n");
        return 2;
    }
    if (attn_capture_reader_open(&rd, file, &h, &err) != 0) {
        fprintf(stderr, "attnctl replay: %s\n", err.message);
        return 2;
    }
    if (actl_open(&c, actl_url(url), local, NULL) != 0) {
        attn_capture_reader_close(rd);
        return 1;
    }
    pm = calloc(1, sizeof *pm);
    owned = calloc(1, sizeof *owned);
    if (pm == NULL || owned == NULL)
        return 1;
    actl_interrupt_catch();
    if (!keep_names) {
        char tag[20];
        actl_unique_tag(tag, sizeof tag);
        snprintf(suffix, sizeof suffix, "r%s", tag);
        fprintf(stderr,
                "attnctl replay: pools renamed NAME.%s for this replay (--keep-names keeps "
                "the recorded names)\n",
                suffix);
    }
    /* pools that existed before the capture began */
    for (uint32_t p = 0; p < h.num_pools; p++) {
        attn_request req;
        attn_reply rep;
        memset(&req, 0, sizeof req);
        req.v = ATTN_PROTOCOL_VERSION;
        req.op = ATTN_OP_POOL_CREATE;
        req.id = 1;
        req.geom = h.pools[p];
        req.has_device = true;
        snprintf(req.pool, sizeof req.pool, "%s", h.pools[p].name);
        if (!keep_names && rename_request(&req, suffix) != 0) {
            fprintf(stderr,
                    "attnctl replay: pool name %s is too long to rename; use --keep-names\n",
                    h.pools[p].name);
            stop = 1;
            break;
        }
        if (replace)
            actl_pool_drop(&c, req.pool, 1);
        rc = actl_call_typed(&c, &req, &rep, &err);
        attn_reply_free(&rep);
        if (rc != 0) {
            fprintf(stderr, "attnctl replay: pool %s from the header: %s: %s%s\n", req.pool,
                    attn_err_name(rc), err.message,
                    rc == ATTN_E_POOL_EXISTS ? " (--replace drops it first)" : "");
            stop = 1;
            break;
        }
        if (!keep_names)
            own(owned, req.pool);
    }
    printf("replay %s (attnd %s, build %s) %s\n", file, h.attnd, h.build,
           verify ? "verifying" : "");
    printf("%5s  %-11s %-10s %-9s %-16s %-7s %10s  %s\n", "#", "op", "phases", "backend", "splits",
           "plan", "us", "result");
    for (; failures == 0 && !stop;) {
        void *req = NULL, *rec = NULL, *now = NULL, *sendbuf;
        size_t req_len = 0, rec_len = 0, now_len = 0, send_len;
        attn_request r;
        attn_reply rnow, rrec;
        attn_buf re = {0};
        char phases[32] = "-", backend[48], splits[48], event[16], brec[48], srec[48], erec[16];
        char why[320] = "";
        int decoded, ok_now = 0, ok_rec = 0, match = 1;
        double *times;
        uint32_t reps;

        if (actl_interrupted())
            break;
        rc = attn_capture_next(rd, &req, &req_len, &rec, &rec_len, &err);
        if (rc == 0)
            break;
        if (rc < 0) {
            fprintf(stderr, "attnctl replay: %s\n", err.message);
            failures++;
            break;
        }
        count++;
        sendbuf = req;
        send_len = req_len;
        memset(&r, 0, sizeof r);
        decoded = attn_request_decode(req, req_len, NULL, &r, &err) == 0;
        if (decoded && (r.op == ATTN_OP_PLAN || r.op == ATTN_OP_ATTEND))
            phase_mix(&r.manifest, phases, sizeof phases);
        if (decoded && r.op == ATTN_OP_POOL_CREATE)
            kv_dtype = r.geom.kv_dtype;
        {
            int reencode = 0;
            if (decoded && r.op == ATTN_OP_RUN) {
                int mi = map_find(pm, r.run.plan_id);
                if (mi >= 0) {
                    snprintf(phases, sizeof phases, "%s", pm->phases[mi]);
                    if (pm->to[mi] != r.run.plan_id) {
                        r.run.plan_id = pm->to[mi];
                        reencode = 1;
                    }
                }
            }
            if (decoded && (r.op == ATTN_OP_RUN || r.op == ATTN_OP_ATTEND) && r.run.order != 0) {
                /* replay sends one request at a time on one connection, so
                 * the recorded per-connection numbers (of several
                 * connections, repeated with --repeat) would only collide */
                r.run.order = 0;
                reencode = 1;
            }
            if (decoded && !keep_names && rename_request(&r, suffix) == 0)
                reencode = 1;
            if (decoded && replace && r.op == ATTN_OP_POOL_CREATE)
                actl_pool_drop(&c, r.geom.name[0] ? r.geom.name : r.pool, 1);
            if (decoded && !keep_names && r.op == ATTN_OP_POOL_CREATE)
                own(owned, r.geom.name[0] ? r.geom.name : r.pool);
            if (reencode && attn_request_encode(&r, &re, &err) == 0) {
                sendbuf = re.data;
                send_len = re.len;
            }
        }
        /* only operations without side effects beyond their first run repeat */
        reps =
            decoded && (r.op == ATTN_OP_RUN || r.op == ATTN_OP_HELLO || r.op == ATTN_OP_KV_READ ||
                        r.op == ATTN_OP_STATS || r.op == ATTN_OP_POOL_INFO)
                ? repeat
                : 1;
        times = calloc(reps, sizeof *times);
        for (uint32_t k = 0; k < reps && times != NULL; k++) {
            double t0 = actl_now_us();
            free(now);
            now = NULL;
            if (actl_call(&c, sendbuf, send_len, &now, &now_len) != 0) {
                failures++;
                break;
            }
            times[k] = actl_now_us() - t0;
        }
        memset(&rnow, 0, sizeof rnow);
        memset(&rrec, 0, sizeof rrec);
        if (now != NULL)
            ok_now = attn_reply_decode(now, now_len, NULL, &rnow, &err) == 0;
        ok_rec = attn_reply_decode(rec, rec_len, NULL, &rrec, &err) == 0;
        diag_summary(&rnow, backend, sizeof backend, splits, sizeof splits, event, sizeof event);
        diag_summary(&rrec, brec, sizeof brec, srec, sizeof srec, erec, sizeof erec);
        if (!ok_now || !ok_rec) {
            match = 0;
            snprintf(why, sizeof why, "%s", now == NULL ? "no reply" : "reply not decodable");
        } else if (verify) {
            match = compare_replies(&rnow, &rrec, backend, brec, kv_dtype, why, sizeof why);
        }
        if (ok_now && ok_rec && rnow.ok && rrec.ok && rrec.plan_id != 0 &&
            (rnow.op == ATTN_OP_PLAN || rnow.op == ATTN_OP_ATTEND))
            map_put(pm, rrec.plan_id, rnow.plan_id, phases);
        if (!match) {
            mismatches++;
            if (strstr(why, "bitwise") != NULL)
                bitwise++;
        }
        /* an error the recording did not have fails the replay, verified or not */
        if (ok_now && !rnow.ok && !(ok_rec && !rrec.ok && rrec.error.code == rnow.error.code)) {
            unexpected++;
            if (rnow.error.code == ATTN_E_POOL_EXISTS) {
                fprintf(stderr,
                        "attnctl replay: pool %s exists; stopping (--replace drops it "
                        "first, or leave out --keep-names)\n",
                        !decoded         ? "?"
                        : r.geom.name[0] ? r.geom.name
                                         : r.pool);
                stop = 1;
            }
        }
        if (times != NULL && reps > 0) {
            qsort(times, reps, sizeof *times, cmp_double);
            total_us += times[reps / 2];
        }
        if (!quiet || !match)
            printf("%5llu  %-11s %-10s %-9.9s %-16.16s %-7s %10.1f  %s%s%s\n",
                   (unsigned long long)count, decoded ? attn_op_name(r.op) : "(bad)", phases,
                   backend, splits, event, times != NULL && reps > 0 ? times[reps / 2] : 0.0,
                   !verify ? (ok_now && rnow.ok ? "ok" : "error")
                   : match ? "verified"
                           : "MISMATCH",
                   match ? "" : ": ", why);
        if (ok_now && !rnow.ok && !quiet && match)
            printf("%5s  %s %s: %s\n", "", attn_err_name(rnow.error.code), rnow.error.field,
                   rnow.error.message);
        free(times);
        attn_buf_free(&re);
        if (decoded)
            attn_request_free(&r);
        free(req);
        free(rec);
        free(now);
    }
    printf("%llu requests, %llu mismatches, %llu unexpected errors, %llu transport failures, %.1f "
           "us total (median per request%s)\n",
           (unsigned long long)count, (unsigned long long)mismatches,
           (unsigned long long)unexpected, (unsigned long long)failures, total_us,
           repeat > 1 ? " over repeats" : "");
    for (uint32_t i = 0; i < owned->n; i++)
        actl_pool_drop(&c, owned->name[i], 1); /* the capture may have dropped it already */
    free(pm);
    free(owned);
    actl_close(&c);
    attn_capture_reader_close(rd);
    if (actl_interrupted()) {
        fprintf(stderr, "attnctl replay: interrupted after %llu requests%s\n",
                (unsigned long long)count, keep_names ? "" : "; its pools were dropped");
        return 130;
    }
    return mismatches == 0 && failures == 0 && unexpected == 0 && !stop && count > 0 ? 0 : 1;
}

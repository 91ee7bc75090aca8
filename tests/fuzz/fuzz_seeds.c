/* Seed corpus for fuzz_request: the requests of the shipped examples.
 *
 *   fuzz_seeds OUTDIR FILE...
 *
 * A capture (*.capture) gives each recorded request frame as a seed (its
 * msgpack bytes), the JSON form of the small ones, and one sequence seed:
 * the pool_create frames of its header followed by its first requests
 * (fuzz_frames.h), so the fuzzer starts from inputs that reach plan and run
 * on a real pool.  A JSON request file (an array like examples/mixed.json)
 * gives each request as JSON text and the whole array as one sequence.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "tests/fuzz/fuzz_frames.h"

#define SEEDS_PER_CAPTURE 64
#define SEQUENCE_FRAMES 6
/* the fuzz run's -max_len: a longer seed would be cut to a broken frame */
#define MAX_SEED_BYTES (16u << 10)
#define MAX_JSON_SEED_BYTES MAX_SEED_BYTES

typedef struct seed_seq {
    unsigned char *data;
    size_t len;
    int frames;
} seed_seq;

static int write_seed(const char *dir, const char *base, const char *tag, int i, const void *p,
                      size_t n)
{
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s-%s-%03d", dir, base, tag, i);
    if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* Append one frame to a sequence seed (dropped when the seed would be too big). */
static void seq_add(seed_seq *s, const void *p, size_t n)
{
    size_t need = s->len + (s->frames ? ATTN_FUZZ_SEP_LEN : 0) + n;
    unsigned char *grown;
    if (s->frames >= SEQUENCE_FRAMES || need > MAX_SEED_BYTES)
        return;
    if ((grown = realloc(s->data, need)) == NULL)
        return;
    s->data = grown;
    if (s->frames)
        memcpy(s->data + s->len, ATTN_FUZZ_SEP, ATTN_FUZZ_SEP_LEN);
    memcpy(s->data + need - n, p, n);
    s->len = need;
    s->frames++;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

static int from_capture(const char *dir, const char *path)
{
    attn_capture_reader *r;
    attn_capture_header h;
    attn_error_detail err;
    seed_seq seq = {NULL, 0, 0};
    const char *base = base_name(path);
    int rc = 0;
    if (attn_capture_reader_open(&r, path, &h, &err) != 0) {
        fprintf(stderr, "fuzz_seeds: %s: %s\n", path, err.message);
        return 1;
    }
    for (uint32_t i = 0; i < h.num_pools; i++) {
        attn_request req;
        attn_buf b = {0};
        memset(&req, 0, sizeof req);
        req.v = ATTN_PROTOCOL_VERSION;
        req.op = ATTN_OP_POOL_CREATE;
        req.id = i + 1;
        req.has_id = true;
        req.geom = h.pools[i];
        snprintf(req.pool, sizeof req.pool, "%s", h.pools[i].name);
        if (attn_request_encode(&req, &b, &err) == 0)
            seq_add(&seq, b.data, b.len);
        attn_buf_free(&b);
    }
    for (int i = 0; i < SEEDS_PER_CAPTURE && rc == 0; i++) {
        void *req = NULL, *rep = NULL;
        size_t req_len = 0, rep_len = 0;
        char *js = NULL;
        int got = attn_capture_next(r, &req, &req_len, &rep, &rep_len, &err);
        if (got <= 0) {
            if (got < 0)
                fprintf(stderr, "fuzz_seeds: %s: %s\n", path, err.message);
            break;
        }
        if (req_len <= MAX_SEED_BYTES)
            rc |= write_seed(dir, base, "mp", i, req, req_len);
        if (attn_msgpack_to_json(req, req_len, 0, false, &js, &err) == 0) {
            if (strlen(js) <= MAX_JSON_SEED_BYTES)
                rc |= write_seed(dir, base, "json", i, js, strlen(js));
            free(js);
        }
        seq_add(&seq, req, req_len);
        free(req);
        free(rep);
    }
    attn_capture_reader_close(r);
    if (seq.frames > 0)
        rc |= write_seed(dir, base, "seq", 0, seq.data, seq.len);
    free(seq.data);
    return rc;
}

/* A JSON request file: each element (with v and id filled in as `attnctl run` does). */
static int from_json(const char *dir, const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_DECODE_ANY, &je), *el;
    seed_seq seq = {NULL, 0, 0};
    const char *base = base_name(path);
    size_t i;
    int rc = 0;
    if (root == NULL || !json_is_array(root)) {
        fprintf(stderr, "fuzz_seeds: %s: not a JSON array of requests\n", path);
        json_decref(root);
        return 1;
    }
    json_array_foreach(root, i, el)
    {
        char *text;
        if (json_object_get(el, "v") == NULL)
            json_object_set_new(el, "v", json_integer(1));
        if (json_object_get(el, "id") == NULL)
            json_object_set_new(el, "id", json_integer((json_int_t)(i + 1)));
        if (json_is_string(json_object_get(el, "plan_id")))
            json_object_set_new(el, "plan_id", json_integer(1)); /* "last": the first plan */
        if ((text = json_dumps(el, JSON_COMPACT)) == NULL)
            continue;
        rc |= write_seed(dir, base, "json", (int)i, text, strlen(text));
        seq_add(&seq, text, strlen(text));
        free(text);
    }
    if (seq.frames > 0)
        rc |= write_seed(dir, base, "seq", 0, seq.data, seq.len);
    free(seq.data);
    json_decref(root);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_seeds OUTDIR FILE.capture|FILE.json...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n > 5 && strcmp(argv[i] + n - 5, ".json") == 0)
            rc |= from_json(argv[1], argv[i]);
        else
            rc |= from_capture(argv[1], argv[i]);
    }
    return rc;
}

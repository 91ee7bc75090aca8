/* attnctl explain: for one reply or a whole capture, print the candidates
 * with their reasons, the selection, the plan event, the kernels and the
 * evidence ladder of every diagnostic (seed 0x07I, 0x0B).
 *
 * Input: a JSON reply, a JSON diagnostic, a JSON array of either, JSON
 * lines, or an attnd capture file (replies are msgpack frames there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "attn/error.h"
#include "attnctl.h"
#include "protocol/capture.h"
#include "protocol/diag.h"
#include "protocol/json.h"

typedef struct explain_opts {
    int have_id;
    long long id;
    int shown;
} explain_opts;

/* Explain one JSON value: a reply with "diag", a diagnostic, or an array of them. */
static int explain_value(json_t *v, explain_opts *o)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        int rv = 0;
        json_array_foreach(v, i, e)
        {
            int r = explain_value(e, o);
            if (r != 0)
                rv = r;
        }
        return rv;
    }
    if (!json_is_object(v))
        return 0;
    json_t *id = json_object_get(v, "id");
    if (o->have_id && (!json_is_integer(id) || json_integer_value(id) != o->id))
        return 0;
    json_t *diag = json_object_get(v, "diag");
    if (diag == NULL && json_object_get(v, "evidence_level") != NULL)
        diag = v;
    if (diag == NULL)
        return 0; /* a reply without a diagnostic (hello, pool_create, ...) */
    if (json_is_integer(id))
        printf("== request %lld", json_integer_value(id));
    else
        printf("==");
    json_t *err = json_object_get(v, "error");
    if (json_is_object(err))
        printf(" (error %s at %s: %s)", json_string_value(json_object_get(err, "code")) ?: "?",
               json_string_value(json_object_get(err, "field")) ?: "?",
               json_string_value(json_object_get(err, "message")) ?: "");
    printf("\n");
    o->shown++;
    return attn_diag_explain(diag, stdout) == 0 ? 0 : 1;
}

static int explain_capture(const char *path, explain_opts *o)
{
    attn_capture_reader *r = NULL;
    attn_capture_header h;
    attn_error_detail err;
    int rv = attn_capture_reader_open(&r, path, &h, &err);
    if (rv != 0) {
        fprintf(stderr, "attnctl explain: %s: %s\n", path, err.message);
        return 1;
    }
    int status = 0;
    for (;;) {
        void *req = NULL, *rep = NULL;
        size_t req_len = 0, rep_len = 0;
        rv = attn_capture_next(r, &req, &req_len, &rep, &rep_len, &err);
        if (rv <= 0) {
            if (rv < 0) {
                fprintf(stderr, "attnctl explain: %s: %s\n", path, err.message);
                status = 1;
            }
            free(req);
            free(rep);
            break;
        }
        char *text = NULL;
        if (attn_msgpack_to_json(rep, rep_len, 0, false, &text, &err) == 0) {
            json_t *v = json_loads(text, 0, NULL);
            if (v != NULL && explain_value(v, o) != 0)
                status = 1;
            json_decref(v);
        } else {
            fprintf(stderr, "attnctl explain: a reply frame does not decode: %s\n", err.message);
            status = 1;
        }
        free(text);
        free(req);
        free(rep);
    }
    attn_capture_reader_close(r);
    return status;
}

/* One JSON document, an array, or JSON lines. */
static int explain_json(const char *path, explain_opts *o)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "attnctl explain: cannot open %s\n", path);
        return 1;
    }
    int status = 0;
    for (;;) {
        json_error_t je;
        json_t *v = json_loadf(f, JSON_DISABLE_EOF_CHECK, &je);
        if (v == NULL) {
            /* end of input is fine; anything else is a parse error */
            int c;
            while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
                ;
            if (c != EOF) {
                fprintf(stderr, "attnctl explain: %s:%d: %s\n", path, je.line, je.text);
                status = 1;
            }
            break;
        }
        if (explain_value(v, o) != 0)
            status = 1;
        json_decref(v);
    }
    fclose(f);
    return status;
}

int attnctl_explain(int argc, char **argv)
{
    explain_opts o = {0};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
            o.have_id = 1;
            o.id = strtoll(argv[++i], NULL, 10);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "usage: attnctl explain FILE [--id N]\n");
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (path == NULL) {
        fprintf(stderr, "usage: attnctl explain FILE [--id N]\n"
                        "  FILE: a JSON reply or diagnostic (or an array / JSON lines of them),\n"
                        "        or an attnd capture file\n");
        return 2;
    }
    char magic[8] = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "attnctl explain: cannot open %s\n", path);
        return 1;
    }
    size_t n = fread(magic, 1, sizeof magic, f);
    fclose(f);
    int rv = n == sizeof magic && memcmp(magic, ATTN_CAPTURE_MAGIC, 8) == 0
                 ? explain_capture(path, &o)
                 : explain_json(path, &o);
    if (o.shown == 0) {
        fprintf(stderr, "attnctl explain: no diagnostic%s in %s\n",
                o.have_id ? " with that id" : "", path);
        return rv != 0 ? rv : 1;
    }
    return rv;
}

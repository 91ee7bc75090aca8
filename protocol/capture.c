/* Capture files (see capture.h). */
#include "protocol/capture.h"

#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"
#include "protocol/wire.h"

#define HEADER_MAX (1u << 20)

struct attn_capture {
    FILE *f;
    pthread_mutex_t lock;
};

struct attn_capture_reader {
    FILE *f;
};

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

int attn_capture_header_encode(const attn_capture_header *h, void **buf, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    pack_str(&pk, "format");
    pack_str(&pk, "attnd-capture");
    pack_str(&pk, "version");
    msgpack_pack_uint32(&pk, h->version);
    pack_str(&pk, "attnd");
    pack_str(&pk, h->attnd);
    pack_str(&pk, "build");
    pack_str(&pk, h->build);
    pack_str(&pk, "engine");
    pack_str(&pk, h->engine);
    pack_str(&pk, "pools");
    msgpack_pack_array(&pk, h->num_pools);
    for (uint32_t i = 0; i < h->num_pools; i++) {
        const attn_pool_geometry *g = &h->pools[i];
        msgpack_pack_map(&pk, 10);
        pack_str(&pk, "pool");
        pack_str(&pk, g->name);
        pack_str(&pk, "layers");
        msgpack_pack_uint32(&pk, g->layers);
        pack_str(&pk, "num_pages");
        msgpack_pack_uint32(&pk, g->num_pages);
        pack_str(&pk, "page_size");
        msgpack_pack_uint32(&pk, g->page_size);
        pack_str(&pk, "num_kv_heads");
        msgpack_pack_uint32(&pk, g->num_kv_heads);
        pack_str(&pk, "head_dim_qk");
        msgpack_pack_uint32(&pk, g->head_dim_qk);
        pack_str(&pk, "head_dim_vo");
        msgpack_pack_uint32(&pk, g->head_dim_vo);
        pack_str(&pk, "kv_dtype");
        pack_str(&pk, attn_dtype_name(g->kv_dtype));
        pack_str(&pk, "layout");
        pack_str(&pk, attn_layout_name(g->layout));
        pack_str(&pk, "device");
        pack_str(&pk, g->device[0] != '\0' ? g->device : "cpu");
    }
    *buf = sb.data; /* msgpack_sbuffer allocates with malloc/realloc */
    *len = sb.size;
    return 0;
}

static void put_u32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
    b[2] = (unsigned char)(v >> 16);
    b[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int attn_capture_open(attn_capture **out, const char *path, const attn_capture_header *h,
                      attn_error_detail *err)
{
    attn_capture *c;
    void *hb = NULL;
    size_t hl = 0;
    unsigned char lb[4];
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return attn_error_set(err, ATTN_E_IO, "capture", "cannot create %s", path);
    attn_capture_header_encode(h, &hb, &hl);
    put_u32(lb, (uint32_t)hl);
    if (fwrite(ATTN_CAPTURE_MAGIC, 1, 8, f) != 8 || fwrite(lb, 1, 4, f) != 4 ||
        fwrite(hb, 1, hl, f) != hl || fflush(f) != 0) {
        free(hb);
        fclose(f);
        return attn_error_set(err, ATTN_E_IO, "capture", "cannot write %s", path);
    }
    free(hb);
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        fclose(f);
        return attn_error_set(err, ATTN_E_NOMEM, "capture", "out of memory");
    }
    c->f = f;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return 0;
}

int attn_capture_append(attn_capture *c, const void *req, size_t req_len, const void *rep,
                        size_t rep_len)
{
    unsigned char a[4], b[4];
    int ok;
    if (req_len >= ATTN_CAPTURE_MAX_FRAME || rep_len >= ATTN_CAPTURE_MAX_FRAME)
        return ATTN_E_TOO_LARGE;
    put_u32(a, (uint32_t)req_len);
    put_u32(b, (uint32_t)rep_len);
    pthread_mutex_lock(&c->lock);
    ok = fwrite(a, 1, 4, c->f) == 4 && fwrite(req, 1, req_len, c->f) == req_len &&
         fwrite(b, 1, 4, c->f) == 4 && fwrite(rep, 1, rep_len, c->f) == rep_len &&
         fflush(c->f) == 0;
    pthread_mutex_unlock(&c->lock);
    return ok ? 0 : ATTN_E_IO;
}

void attn_capture_close(attn_capture *c)
{
    if (c == NULL)
        return;
    fclose(c->f);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Copy a str item into a fixed buffer; E_RANGE when it does not fit. */
static int item_str(const attn_wire_item *it, char *dst, size_t cap)
{
    if (it->type != ATTN_WT_STR || it->len >= cap)
        return ATTN_E_RANGE;
    memcpy(dst, it->ptr, it->len);
    dst[it->len] = '\0';
    return 0;
}

static int parse_pool(attn_wire_reader *r, attn_pool_geometry *g)
{
    attn_wire_item it, k, v;
    int rc;
    if ((rc = attn_wire_next(r, &it)) != 0)
        return rc;
    if (it.type != ATTN_WT_MAP)
        return ATTN_E_TYPE;
    memset(g, 0, sizeof *g);
    for (uint32_t i = 0; i < it.len; i++) {
        char s[64];
        if ((rc = attn_wire_next(r, &k)) != 0 || (rc = attn_wire_next(r, &v)) != 0)
            return rc;
        if (k.type != ATTN_WT_STR)
            return ATTN_E_TYPE;
        if (v.type == ATTN_WT_UINT) {
            uint32_t x = v.u > UINT32_MAX ? 0 : (uint32_t)v.u;
            if (attn_wire_str_eq(&k, "layers"))
                g->layers = x;
            else if (attn_wire_str_eq(&k, "num_pages"))
                g->num_pages = x;
            else if (attn_wire_str_eq(&k, "page_size"))
                g->page_size = x;
            else if (attn_wire_str_eq(&k, "num_kv_heads"))
                g->num_kv_heads = x;
            else if (attn_wire_str_eq(&k, "head_dim_qk"))
                g->head_dim_qk = x;
            else if (attn_wire_str_eq(&k, "head_dim_vo"))
                g->head_dim_vo = x;
        } else if (v.type == ATTN_WT_STR) {
            if (item_str(&v, s, sizeof s) != 0)
                return ATTN_E_RANGE;
            if (attn_wire_str_eq(&k, "pool"))
                snprintf(g->name, sizeof g->name, "%s", s);
            else if (attn_wire_str_eq(&k, "kv_dtype") &&
                     attn_dtype_parse(s, "kv_dtype", &g->kv_dtype, NULL) != 0)
                return ATTN_E_DTYPE;
            else if (attn_wire_str_eq(&k, "layout") &&
                     attn_layout_parse(s, "layout", &g->layout, NULL) != 0)
                return ATTN_E_RANGE;
            else if (attn_wire_str_eq(&k, "device") &&
                     item_str(&v, g->device, sizeof g->device) != 0)
                return ATTN_E_RANGE;
        } else if (v.type == ATTN_WT_ARRAY || v.type == ATTN_WT_MAP) {
            return ATTN_E_TYPE;
        }
    }
    return 0;
}

static int parse_header(const void *buf, size_t len, attn_capture_header *h)
{
    attn_wire_reader r;
    attn_wire_item it, k, v;
    int rc, format_ok = 0;
    attn_wire_init(&r, buf, len);
    memset(h, 0, sizeof *h);
    if ((rc = attn_wire_next(&r, &it)) != 0)
        return rc;
    if (it.type != ATTN_WT_MAP)
        return ATTN_E_TYPE;
    for (uint32_t i = 0; i < it.len; i++) {
        if ((rc = attn_wire_next(&r, &k)) != 0)
            return rc;
        if (k.type != ATTN_WT_STR)
            return ATTN_E_TYPE;
        if (attn_wire_str_eq(&k, "pools")) {
            if ((rc = attn_wire_next(&r, &v)) != 0)
                return rc;
            if (v.type != ATTN_WT_ARRAY || v.len > ATTN_CAPTURE_MAX_POOLS)
                return ATTN_E_TOO_LARGE;
            for (uint32_t p = 0; p < v.len; p++)
                if ((rc = parse_pool(&r, &h->pools[p])) != 0)
                    return rc;
            h->num_pools = v.len;
            continue;
        }
        if ((rc = attn_wire_next(&r, &v)) != 0)
            return rc;
        if (v.type == ATTN_WT_ARRAY || v.type == ATTN_WT_MAP)
            return ATTN_E_TYPE;
        if (attn_wire_str_eq(&k, "format"))
            format_ok = attn_wire_str_eq(&v, "attnd-capture");
        else if (attn_wire_str_eq(&k, "version") && v.type == ATTN_WT_UINT)
            h->version = (uint32_t)v.u;
        else if (attn_wire_str_eq(&k, "attnd"))
            item_str(&v, h->attnd, sizeof h->attnd);
        else if (attn_wire_str_eq(&k, "build"))
            item_str(&v, h->build, sizeof h->build);
        else if (attn_wire_str_eq(&k, "engine"))
            item_str(&v, h->engine, sizeof h->engine);
    }
    if (!format_ok)
        return ATTN_E_PROTOCOL;
    if (h->version != ATTN_CAPTURE_VERSION)
        return ATTN_E_VERSION;
    return 0;
}

int attn_capture_reader_open(attn_capture_reader **out, const char *path, attn_capture_header *h,
                             attn_error_detail *err)
{
    unsigned char head[12];
    uint32_t hl;
    void *hb;
    int rc;
    attn_capture_reader *r;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return attn_error_set(err, ATTN_E_IO, "capture", "cannot open %s", path);
    if (fread(head, 1, 12, f) != 12 || memcmp(head, ATTN_CAPTURE_MAGIC, 8) != 0) {
        fclose(f);
        return attn_error_set(err, ATTN_E_PROTOCOL, "capture", "%s is not an attnd capture", path);
    }
    hl = get_u32(head + 8);
    if (hl == 0 || hl > HEADER_MAX) {
        fclose(f);
        return attn_error_set(err, ATTN_E_TOO_LARGE, "capture.header", "header of %u bytes", hl);
    }
    hb = malloc(hl);
    if (hb == NULL || fread(hb, 1, hl, f) != hl) {
        free(hb);
        fclose(f);
        return attn_error_set(err, ATTN_E_TRUNCATED, "capture.header", "header cut short");
    }
    rc = parse_header(hb, hl, h);
    free(hb);
    if (rc != 0) {
        fclose(f);
        return attn_error_set(err, rc, "capture.header", "malformed capture header (%s)",
                              attn_err_name(rc));
    }
    r = calloc(1, sizeof *r);
    if (r == NULL) {
        fclose(f);
        return attn_error_set(err, ATTN_E_NOMEM, "capture", "out of memory");
    }
    r->f = f;
    *out = r;
    return 0;
}

/* Read one length-prefixed frame; 1 ok, 0 clean end (only when allow_eof). */
static int read_frame(FILE *f, void **buf, size_t *len, int allow_eof, attn_error_detail *err)
{
    unsigned char lb[4];
    size_t got = fread(lb, 1, 4, f);
    uint32_t n;
    if (got == 0 && allow_eof && feof(f))
        return 0;
    if (got != 4)
        return attn_error_set(err, ATTN_E_TRUNCATED, "capture", "record length cut short");
    n = get_u32(lb);
    *buf = malloc(n == 0 ? 1 : n);
    if (*buf == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "capture", "cannot allocate %u bytes", n);
    if (fread(*buf, 1, n, f) != n) {
        free(*buf);
        *buf = NULL;
        return attn_error_set(err, ATTN_E_TRUNCATED, "capture", "record of %u bytes cut short", n);
    }
    *len = n;
    return 1;
}

int attn_capture_next(attn_capture_reader *r, void **req, size_t *req_len, void **rep,
                      size_t *rep_len, attn_error_detail *err)
{
    int rc = read_frame(r->f, req, req_len, 1, err);
    if (rc <= 0)
        return rc;
    rc = read_frame(r->f, rep, rep_len, 0, err);
    if (rc != 1) {
        free(*req);
        *req = NULL;
        return rc;
    }
    return 1;
}

void attn_capture_reader_close(attn_capture_reader *r)
{
    if (r == NULL)
        return;
    fclose(r->f);
    free(r);
}

/* The capture file format, one home for attnd (which writes it: the daemon
 * decides only when and where, daemon/server.c) and attnctl (which reads it:
 * replay, explain).  Every request and its reply, appended as they happen.
 *
 * Layout (docs/daemon.md): the 8 bytes "ATTNCAP1", a u32 little-endian
 * length and a msgpack header map {format: "attnd-capture", version: 1,
 * attnd, build, engine, pools: [pool_create maps of the pools that existed
 * when the capture began]}, then records, each a u32 LE length + request
 * frame followed by a u32 LE length + reply frame.  Frames are the exact
 * msgpack bytes of the wire.  Every record is flushed when written, so a
 * capture is complete up to the last answered request.
 */
#ifndef ATTN_PROTOCOL_CAPTURE_H
#define ATTN_PROTOCOL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"

#define ATTN_CAPTURE_MAGIC "ATTNCAP1"
#define ATTN_CAPTURE_VERSION 1
#define ATTN_CAPTURE_MAX_POOLS 32
#define ATTN_CAPTURE_MAX_FRAME (1ull << 32)

typedef struct attn_capture attn_capture;

/* The header of a capture file. */
typedef struct attn_capture_header {
    uint32_t version;
    char attnd[32];
    char build[64];
    char engine[32];
    uint32_t num_pools;
    attn_pool_geometry pools[ATTN_CAPTURE_MAX_POOLS];
} attn_capture_header;

/* Create (truncate) `path` and write the header. */
int attn_capture_open(attn_capture **out, const char *path, const attn_capture_header *h,
                      attn_error_detail *err);

/* Append one request/reply record and flush it; thread-safe. */
int attn_capture_append(attn_capture *c, const void *req, size_t req_len, const void *rep,
                        size_t rep_len);

/* Close the file. */
void attn_capture_close(attn_capture *c);

typedef struct attn_capture_reader attn_capture_reader;

/* Open a capture and read its header (E_IO, E_PROTOCOL on a bad magic or header). */
int attn_capture_reader_open(attn_capture_reader **out, const char *path, attn_capture_header *h,
                             attn_error_detail *err);

/* Read the next record into malloc'ed buffers (free both); returns 1 for a
 * record, 0 at the end, or an attn_err for a truncated or oversized record. */
int attn_capture_next(attn_capture_reader *r, void **req, size_t *req_len, void **rep,
                      size_t *rep_len, attn_error_detail *err);

/* Close a reader. */
void attn_capture_reader_close(attn_capture_reader *r);

/* Encode a pool geometry as the pool_create request map body is written in
 * the header (msgpack bytes into a malloc'ed buffer); used by tests and gen. */
int attn_capture_header_encode(const attn_capture_header *h, void **buf, size_t *len);

#endif

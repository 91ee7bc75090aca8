/* The input format shared by the fuzz target and its seed generator: one or
 * more request frames joined by ATTN_FUZZ_SEP, so one input can create a
 * pool, write pages, plan and run in sequence against a fresh server.
 *
 * The separator starts with 0xc1, the one byte msgpack never uses, so it
 * cannot be mistaken for the start of a frame; it may still occur inside a
 * bin payload, which only splits that input differently (still a valid,
 * reproducible input).
 */
#ifndef ATTN_TESTS_FUZZ_FRAMES_H
#define ATTN_TESTS_FUZZ_FRAMES_H

#include <stddef.h>
#include <string.h>

#define ATTN_FUZZ_SEP                                                                              \
    "\xc1\xc1"                                                                                     \
    "FRAME\xc1"
#define ATTN_FUZZ_SEP_LEN 8
#define ATTN_FUZZ_MAX_FRAMES 8

/* Length of the frame at the start of [p, p + n): up to the next separator or the end. */
static inline size_t attn_fuzz_frame_len(const unsigned char *p, size_t n)
{
    const void *hit = memmem(p, n, ATTN_FUZZ_SEP, ATTN_FUZZ_SEP_LEN);
    return hit == NULL ? n : (size_t)((const unsigned char *)hit - p);
}

#endif

/* Typed messages of the wire protocol (PROTOCOL.md, docs/protocol.md).
 *
 * The structs themselves live in include/attn/client.h, because the client
 * library hands them to engines; this header adds what only the protocol
 * side needs: the run/kv shape checks the daemon calls once a plan or a pool
 * is known, and byte-size helpers.  Pure C: no sockets, no msgpack.
 */
#ifndef ATTN_PROTOCOL_MSG_H
#define ATTN_PROTOCOL_MSG_H

#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Byte length of a [n0, n1, n2] tensor of `dt`; 0 with *ok false when the
 * product overflows uint64 (the caller then reports ATTN_E_TOO_LARGE). */
uint64_t attn_tensor_bytes(uint64_t n0, uint64_t n1, uint64_t n2, attn_dtype dt, bool *ok);

/* Element `i` of tensor `t` of dtype `dt`, widened to fp32 (exact; the
 * conversions of kernels/common/dtype.h).  The caller keeps i inside t. */
float attn_tensor_elem_f32(const attn_bytes *t, attn_dtype dt, size_t i);

/* Check the tensors of a run (or the run half of an attend) against the
 * validated manifest `m` and its pool `g`: q, k_new, v_new byte lengths must
 * equal the PROTOCOL.md shapes (total_q = qo_indptr[B]); else ATTN_E_SHAPE
 * with field "q" / "k_new" / "v_new".  A tensor given by reference is checked
 * by its declared bytes, as are the optional output references o and lse
 * (ATTN_E_SHAPE "o" / "lse"); their ranges are the buffer table's to check
 * (daemon/buffers.h).  A run's optional q_dtype must equal
 * m->q_dtype (ATTN_E_DTYPE, field "q_dtype").  A kv_written run must send
 * neither k_new nor v_new (ATTN_E_SHAPE naming the one it sent). */
int attn_run_check_shapes(const attn_run_args *a, const attn_manifest *m,
                          const attn_pool_geometry *g, attn_error_detail *err);

/* Check a kv_write's k and v (or, with `op` ATTN_OP_KV_READ, only the page
 * count and dtype) against pool `g`: [num_pages, P, H_kv, d] in kv_dtype
 * (NHD; HND has the same byte length); pages in [0, num_pages), layer in
 * [0, layers).  ATTN_E_SHAPE "k"/"v", ATTN_E_PAGE_OUT_OF_POOL "pages[i]",
 * ATTN_E_LAYER "layer", ATTN_E_DTYPE "kv_dtype". */
int attn_kv_check(const attn_kv_args *a, attn_op op, const attn_pool_geometry *g,
                  attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif

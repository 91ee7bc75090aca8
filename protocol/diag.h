/* Encoders of the dispatch diagnostic (PROTOCOL.md "diag"): a msgpack map the
 * reply encoder splices in, and the same structure as JSON for attnctl.
 * One walker produces both, so the two forms cannot drift apart.
 */
#ifndef ATTN_PROTOCOL_DIAG_H
#define ATTN_PROTOCOL_DIAG_H

#include <stdio.h>

#include <jansson.h>
#include <msgpack.h>

#include "planner/diag.h"

/* Pack the diagnostic as one msgpack map (string keys) into `pk`; 0 or ATTN_E_NOMEM. */
int attn_diag_pack(const attn_diag *dg, msgpack_packer *pk);

/* The diagnostic as a new JSON object (same keys); NULL when out of memory. */
json_t *attn_diag_to_json(const attn_diag *dg);

/* Print a human explanation of one JSON diagnostic: the call, every
 * candidate with its reasons, the selection and fallback, the plan event,
 * the kernels and the evidence ladder.  Returns 0, or ATTN_E_TYPE when
 * `diag` is not a diagnostic object. */
int attn_diag_explain(const json_t *diag, FILE *out);

#endif

/* Encoders of the dispatch diagnostic (PROTOCOL.md "diag"): a msgpack map the
 * reply encoder splices in, and the same structure as JSON for attnctl and
 * the tests.  One walker produces both, so the two forms cannot drift apart.
 * The explanation of the JSON form is protocol/diag.h.
 */
#ifndef ATTN_PLANNER_DIAG_ENCODE_H
#define ATTN_PLANNER_DIAG_ENCODE_H

#include <jansson.h>
#include <msgpack.h>

#include "planner/diag.h"

/* Pack the diagnostic as one msgpack map (string keys) into `pk`; 0 or ATTN_E_NOMEM. */
int attn_diag_pack(const attn_diag *dg, msgpack_packer *pk);

/* The diagnostic as a new JSON object (same keys); NULL when out of memory. */
json_t *attn_diag_to_json(const attn_diag *dg);

#endif

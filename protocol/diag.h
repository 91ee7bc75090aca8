/* The human explanation of one dispatch diagnostic in its JSON form
 * (PROTOCOL.md "diag"; attnctl explain).  The encoders of the diagnostic are
 * beside the diagnostic itself, planner/diag_encode.h.
 */
#ifndef ATTN_PROTOCOL_DIAG_H
#define ATTN_PROTOCOL_DIAG_H

#include <stdio.h>

#include <jansson.h>

/* Print a human explanation of one JSON diagnostic: the call, every
 * candidate with its reasons, the selection and fallback, the plan event,
 * the kernels and the evidence ladder.  Returns 0, or ATTN_E_TYPE when
 * `diag` is not a diagnostic object. */
int attn_diag_explain(const json_t *diag, FILE *out);

#endif

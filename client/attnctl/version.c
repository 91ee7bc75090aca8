/* attnctl --version: the version and build id compiled into this binary
 * (the Makefile passes ATTN_VERSION and ATTN_BUILD_ID, and rebuilds this
 * object when either changes). */
#include <stdio.h>

#include "attnctl.h"

#ifndef ATTN_VERSION
#error "ATTN_VERSION is defined by the Makefile"
#endif
#ifndef ATTN_BUILD_ID
#define ATTN_BUILD_ID "unknown"
#endif

void actl_print_version(FILE *out)
{
    fprintf(out, "attnctl %s (build %s)\n", ATTN_VERSION, ATTN_BUILD_ID);
}

/* Name and message tables generated from the one error list. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attn/error.h"

const char *attn_err_name(int err)
{
    switch (err) {
#define ATTN__ERR_NAME(name, num, msg)                                                             \
    case (num):                                                                                    \
        return (num) == 0 ? "OK" : "E_" #name;
        ATTN_ERRORS(ATTN__ERR_NAME)
#undef ATTN__ERR_NAME
    }
    return "E_UNKNOWN";
}

const char *attn_err_message(int err)
{
    switch (err) {
#define ATTN__ERR_MSG(name, num, msg)                                                              \
    case (num):                                                                                    \
        return (msg);
        ATTN_ERRORS(ATTN__ERR_MSG)
#undef ATTN__ERR_MSG
    }
    return "unknown error";
}

int attn_err_from_name(const char *name, int *err)
{
#define ATTN__ERR_FIND(n, num, msg)                                                                \
    if (strcmp(name, (num) == 0 ? "OK" : "E_" #n) == 0) {                                          \
        *err = (num);                                                                              \
        return 1;                                                                                  \
    }
    ATTN_ERRORS(ATTN__ERR_FIND)
#undef ATTN__ERR_FIND
    return 0;
}

int attn_error_set(attn_error_detail *d, int code, const char *field, const char *fmt, ...)
{
    if (d != NULL) {
        va_list ap;
        d->code = code;
        snprintf(d->field, sizeof d->field, "%s", field != NULL ? field : "");
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

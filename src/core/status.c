/* status.c - error recording for the library (see status.h). */
#include "selectivbench/status.h"

sb_status sb_error_set(sb_error *err, sb_status status, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *sb_status_name(sb_status status)
{
    switch (status) {
    case SB_OK: return "ok";
    case SB_ERR_INVALID: return "invalid argument";
    case SB_ERR_IO: return "i/o error";
    case SB_ERR_NOMEM: return "out of memory";
    case SB_ERR_RUNTIME: return "runtime error";
    case SB_ERR_DIVERGED: return "diverged";
    }
    return "unknown status";
}

int sb_status_exit_code(sb_status status)
{
    switch (status) {
    case SB_OK: return 0;
    case SB_ERR_INVALID: return 2;
    case SB_ERR_DIVERGED: return 3;
    default: return 1;
    }
}

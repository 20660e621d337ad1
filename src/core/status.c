/* status.c - error recording for the library (see status.h). */
#include "core/status.h"

#include <stddef.h>
#include <string.h>

/* The public ABI (include/selectivbench/selectivbench.h): these values are promised to
 * programs built against the library and change only with its major version. */
_Static_assert(SB_OK == 0 && SB_ERR_INVALID == 1 && SB_ERR_IO == 2 && SB_ERR_NOMEM == 3 &&
                   SB_ERR_RUNTIME == 4 && SB_ERR_DIVERGED == 5,
               "sb_status values are part of the public ABI");
_Static_assert(SB_ERROR_MSG_MAX == 512 && offsetof(sb_error, msg) == sizeof(sb_status),
               "sb_error's layout is part of the public ABI");

sb_status sb_error_set(sb_error *err, sb_status status, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* a message is one line whatever text it quotes (a caller's status, a file's key, a
         * flag value): control bytes become '?' */
        for (char *c = err->msg; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
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
    case SB_ERR_EXCLUDED: return "excluded";
    }
    return "unknown status";
}

/* The one name table of a run's statuses (the database stores these names; a new status is
 * a value in the public enum and a line here). Index 0, SB_RUN_NONE, has no name. */
static const char *const run_status_names[] = {
    [SB_RUN_NONE] = "",
    [SB_RUN_RUNNING] = "running",
    [SB_RUN_FINISHED] = "finished",
    [SB_RUN_FAILED] = "failed",
    [SB_RUN_DIVERGED] = "diverged",
    [SB_RUN_INTERRUPTED] = "interrupted",
    NULL,
};
_Static_assert(SB_RUN_NONE == 0 && SB_RUN_INTERRUPTED == 5,
               "sb_run_status values are part of the public ABI");

const char *sb_run_status_name(sb_run_status status)
{
    return status > SB_RUN_NONE && status <= SB_RUN_INTERRUPTED ? run_status_names[status] : "";
}

const char *const *sb_run_status_names(void)
{
    return run_status_names + SB_RUN_RUNNING;
}

sb_status sb_run_status_parse(const char *name, sb_run_status *out, sb_error *err)
{
    for (int s = SB_RUN_RUNNING; s <= SB_RUN_INTERRUPTED; s++)
        if (name != NULL && strcmp(name, run_status_names[s]) == 0) {
            *out = (sb_run_status)s;
            return SB_OK;
        }
    return sb_error_set(err, SB_ERR_INVALID,
                        "unknown run status '%s': give running, finished, failed, diverged or "
                        "interrupted",
                        name != NULL ? name : "(null)");
}

int sb_status_exit_code(sb_status status)
{
    switch (status) {
    case SB_OK: return 0;
    case SB_ERR_INVALID:
    case SB_ERR_EXCLUDED: return 2;
    case SB_ERR_DIVERGED: return 3;
    default: return 1;
    }
}

static sb_assert_hook assert_hook;

sb_assert_hook sb_set_assert_hook(sb_assert_hook hook)
{
    sb_assert_hook previous = assert_hook;
    assert_hook = hook;
    return previous;
}

/* The one place the library writes to the terminal and stops the process: a broken
 * invariant (a bug), never bad input. */
_Noreturn void sb_assert_fail(const char *file, int line, const char *cond)
{
    if (assert_hook != NULL)
        assert_hook(file, line, cond);
    fprintf(stderr, /* floors: allowed */
            "selectivbench: internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    abort(); /* floors: allowed */
}

/*
 * status.h - status codes and error messages shared by every library module.
 *
 * Library functions that can fail return an sb_status and, when they fail, leave
 * one human-readable line in an sb_error: what went wrong, where, and what to do.
 * The library never prints and never exits; the CLI reports the message and maps
 * the status to an exit code (sb_status_exit_code).
 */
#ifndef SELECTIVBENCH_STATUS_H
#define SELECTIVBENCH_STATUS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* sb_status (SB_OK, SB_ERR_INVALID, SB_ERR_IO, SB_ERR_NOMEM, SB_ERR_RUNTIME, SB_ERR_DIVERGED),
 * SB_ERROR_MSG_MAX and sb_error are the public header's: one definition, so the library and
 * the programs using it agree (src/core/status.c freezes their values). Zero-initialise an
 * sb_error before use. */
#include "selectivbench/selectivbench.h"

/* Records status and a printf-style message in err (err may be NULL); returns status,
 * so a failing function can end with `return sb_error_set(err, SB_ERR_..., "...")`. */
sb_status sb_error_set(sb_error *err, sb_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* sb_status_name, sb_run_status_name, sb_run_status_parse: see the public header. */

/* The names of a stored run's statuses, running to interrupted, NULL-terminated (what
 * sb_results_statuses returns). Static. */
const char *const *sb_run_status_names(void);

/* Exit code the CLI uses for a status: 0 ok, 2 usage, 3 divergence, 1 otherwise. */
int sb_status_exit_code(sb_status status);

/* Always-on assertion for programmer errors (never for bad user input): calls the assert
 * hook (if one is set), then writes the failed condition to stderr and aborts. */
#define SB_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            sb_assert_fail(__FILE__, __LINE__, #cond);                                             \
    } while (0)

_Noreturn void sb_assert_fail(const char *file, int line, const char *cond);

/* A function called with the failed assertion before the process aborts (a front end can
 * log it or flush its own state); NULL removes it. Returns the previous hook. */
typedef void (*sb_assert_hook)(const char *file, int line, const char *cond);
sb_assert_hook sb_set_assert_hook(sb_assert_hook hook);

#endif

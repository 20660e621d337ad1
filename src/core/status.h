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

typedef enum sb_status {
    SB_OK = 0,
    SB_ERR_INVALID,  /* bad parameter or configuration (a usage error) */
    SB_ERR_IO,       /* a file could not be read or written */
    SB_ERR_NOMEM,    /* an allocation failed */
    SB_ERR_RUNTIME,  /* the computation could not finish (e.g. retry limit hit) */
    SB_ERR_DIVERGED, /* a NaN or infinite value appeared */
} sb_status;

#define SB_ERROR_MSG_MAX 512

/* Holds the message of the last failure. Zero-initialise before use. */
typedef struct sb_error {
    sb_status status;
    char msg[SB_ERROR_MSG_MAX];
} sb_error;

/* Records status and a printf-style message in err (err may be NULL); returns status,
 * so a failing function can end with `return sb_error_set(err, SB_ERR_..., "...")`. */
sb_status sb_error_set(sb_error *err, sb_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Short name of a status ("invalid argument", ...). */
const char *sb_status_name(sb_status status);

/* Exit code the CLI uses for a status: 0 ok, 2 usage, 3 divergence, 1 otherwise. */
int sb_status_exit_code(sb_status status);

/* Always-on assertion for programmer errors (never for bad user input): calls the assert
 * hook (if one is set), then writes the failed condition to stderr and aborts. */
#define SB_ASSERT(cond)                                                                     \
    do {                                                                                    \
        if (!(cond))                                                                        \
            sb_assert_fail(__FILE__, __LINE__, #cond);                                      \
    } while (0)

_Noreturn void sb_assert_fail(const char *file, int line, const char *cond);

/* A function called with the failed assertion before the process aborts (a front end can
 * log it or flush its own state); NULL removes it. Returns the previous hook. */
typedef void (*sb_assert_hook)(const char *file, int line, const char *cond);
sb_assert_hook sb_set_assert_hook(sb_assert_hook hook);

#endif

/*
 * task_options.h - the reference's task flags (train.py names and meanings), shared by
 * every subcommand that builds a task.
 */
#ifndef SELECTIVBENCH_CLI_TASK_OPTIONS_H
#define SELECTIVBENCH_CLI_TASK_OPTIONS_H

#include "options.h"
#include "selectivbench/task.h"

typedef struct sb_task_flags {
    sb_task_config cfg;
    int64_t seed;
    int dist_dur;      /* index into {"uniform", "lognormal"} */
    int protocol;      /* index into {"reference", "clean"} */
    int gap_rng;       /* index into {"derived", "reference"} */
    double test_noise; /* accepted like train.py, never used (reference quirk) */
    int classify;      /* accepted: classification is the only mode */
    const char *base_set;
} sb_task_flags;

/* Fills tf with the defaults and appends the task flags to opts[*n] (grammar flags only
 * when grammar_only). opts must have room for SB_TASK_MAX_OPTIONS more entries. */
#define SB_TASK_MAX_OPTIONS 32
void sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only);

/* Copies the parsed flags into tf->cfg; SB_ERR_INVALID for combinations the parser
 * cannot see (e.g. an unsupported --base_set). */
sb_status sb_task_options_finish(sb_task_flags *tf, sb_error *err);

#endif

/*
 * task_options.h - the task keys of the key table as CLI options, for the subcommands that
 * build a task (grammar, data, bench).
 */
#ifndef SELECTIVBENCH_CLI_TASK_OPTIONS_H
#define SELECTIVBENCH_CLI_TASK_OPTIONS_H

#include "cli/options.h"
#include "selectivbench/selectivbench.h"

typedef struct sb_task_flags {
    sb_config *config; /* every key, set by name while parsing (defaults first) */
} sb_task_flags;

/* Fills tf with the defaults (a new tf->config) and appends the task flags to opts[*n]
 * (grammar flags only when grammar_only). opts must have room for SB_TASK_MAX_OPTIONS more
 * entries. Free tf with sb_task_flags_free, also after an error. Errors: SB_ERR_NOMEM. */
#define SB_TASK_MAX_OPTIONS 96
sb_status sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only,
                              sb_error *err);

/* Frees tf->config. */
void sb_task_flags_free(sb_task_flags *tf);

#endif

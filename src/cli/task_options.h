/*
 * task_options.h - the flags of the key table (src/config/keys.def) as CLI options: the
 * task keys for the subcommands that build a task (grammar, data, bench), and the
 * function that makes the options of any group of keys.
 */
#ifndef SELECTIVBENCH_CLI_TASK_OPTIONS_H
#define SELECTIVBENCH_CLI_TASK_OPTIONS_H

#include "cli/options.h"
#include "config/config.h"
#include "config/run_config.h"

/* Transitional (cmd_grammar.c, cmd_data.c and cmd_bench.c read the task as the library's
 * internal structs): sb_options_add_keys over a run configuration held by value. */
void sb_key_options_add(sb_run_config *cfg, sb_key_group group, sb_option *opts, int *n);

typedef struct sb_task_flags {
    sb_run_config run; /* every key, set by name while parsing (defaults first) */
    sb_task_config cfg; /* the task part, filled by sb_task_options_finish */
} sb_task_flags;

/* Fills tf with the defaults and appends the task flags to opts[*n] (grammar flags only
 * when grammar_only). opts must have room for SB_TASK_MAX_OPTIONS more entries. */
#define SB_TASK_MAX_OPTIONS 96
void sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only);

/* Copies the parsed task keys into tf->cfg. */
sb_status sb_task_options_finish(sb_task_flags *tf, sb_error *err);

#endif

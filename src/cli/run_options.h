/*
 * run_options.h - the flags of train, eval, probe and ceiling: every key of the table
 * (train.py's flags, the no-ops included), setting a configuration by name, plus the CLI's
 * own switches (threads, output, files), which are not part of a configuration.
 */
#ifndef SELECTIVBENCH_CLI_RUN_OPTIONS_H
#define SELECTIVBENCH_CLI_RUN_OPTIONS_H

#include "cli/options.h"
#include "config/run_config.h" /* transitional: sb_run_flags.cfg (see below) */
#include "selectivbench/selectivbench.h"

typedef struct sb_run_flags {
    /* every key, defaults first: the public handle the flags set by name. A caller may put a
     * recorded configuration in it (sb_config_assign) before parsing. */
    sb_config *config;
    /* transitional: the same configuration as the library's internal struct, for the
     * commands not yet on the public API (cmd_probe.c, cmd_ceiling.c); config is a view of
     * it. To drop it: make config a handle of its own (sb_config_create) and free it. */
    sb_run_config cfg;
    /* the CLI's own switches */
    int save_model;
    int continued_training;
    int only_createset;
    int threads;
    const char *results_dir;
    const char *ckpt;
    int json;
    int quiet;
    int print_hashes;
    double mem_budget;
} sb_run_flags;

#define SB_RUN_MAX_OPTIONS 128

/* Fills rf with defaults and appends every key and switch to opts[*n]. rf must stay where it
 * is while the options are used (they point into it). */
void sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n);

/* Transitional: the public handle over a run configuration held by value. The public
 * sb_config is exactly an sb_run_config (src/api/api.h), so the handle is its address. */
static inline sb_config *sb_cli_config_view(sb_run_config *run)
{
    return (sb_config *)(void *)run;
}

#endif

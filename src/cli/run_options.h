/*
 * run_options.h - the flags of train, eval, probe and ceiling: every key of the table
 * (train.py's flags, the no-ops included), setting a configuration by name, plus the CLI's
 * own switches (threads, output, files), which are not part of a configuration.
 */
#ifndef SELECTIVBENCH_CLI_RUN_OPTIONS_H
#define SELECTIVBENCH_CLI_RUN_OPTIONS_H

#include "cli/options.h"
#include "selectivbench/selectivbench.h"

typedef struct sb_run_flags {
    /* every key, defaults first: the flags' own handle, set by name while parsing. A caller
     * may put a recorded configuration in it (sb_config_assign) before parsing. */
    sb_config *config;
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

/* Fills rf with defaults (a new rf->config) and appends every key and switch to opts[*n]. rf
 * must stay where it is while the options are used (they point into it); free it with
 * sb_run_flags_free, also after an error. Errors: SB_ERR_NOMEM. */
sb_status sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n, sb_error *err);

/* Frees rf->config. */
void sb_run_flags_free(sb_run_flags *rf);

#endif

/*
 * run_options.h - the flags of train, eval, probe and ceiling: every key of the table
 * (src/config/keys.def: train.py's flags, the no-ops included), setting an sb_run_config
 * by name, plus the CLI's own switches (threads, output, files), which are not part of a
 * configuration.
 */
#ifndef SELECTIVBENCH_CLI_RUN_OPTIONS_H
#define SELECTIVBENCH_CLI_RUN_OPTIONS_H

#include "cli/options.h"
#include "config/run_config.h"
#include "cli/task_options.h"

typedef struct sb_run_flags {
    sb_run_config cfg; /* every key, defaults first; a caller may put a recorded one here */
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

/* Fills rf with defaults and appends every key and switch to opts[*n]. */
void sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n);

#endif

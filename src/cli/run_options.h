/*
 * run_options.h - every flag of the reference's train.py (argparse names, types and
 * meanings), mapped onto an sb_run_config; shared by train, eval and (later) sweep.
 * Flags that only make sense with a GPU, W&B or the reference's file cache are accepted
 * and documented as no-ops.
 */
#ifndef SELECTIVBENCH_CLI_RUN_OPTIONS_H
#define SELECTIVBENCH_CLI_RUN_OPTIONS_H

#include "options.h"
#include "selectivbench/run_config.h"
#include "task_options.h"

typedef struct sb_run_flags {
    sb_task_flags task;       /* the task flags (--seed is the run seed) */
    sb_run_config cfg;        /* filled by sb_run_options_finish */
    const char *model;
    int64_t task_seed;
    int same_seed;
    int optimizer, scheduler;
    int save_model;
    int continued_training;
    int test_pretrained;
    int only_createset;
    int warmup_steps;
    int n_head;
    int threads;
    const char *results_dir;
    const char *ckpt;
    int json;
    int quiet;
    int print_hashes;
    double mem_budget;
    /* accepted, no effect here */
    int noop_int;
    int noop_flag;
    int noop_bool;
    double noop_double;
    const char *noop_str;
} sb_run_flags;

#define SB_RUN_MAX_OPTIONS (SB_TASK_MAX_OPTIONS + 64)

/* Fills rf with defaults and appends every flag to opts[*n]. */
void sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n);

/* Turns the parsed flags into rf->cfg (run seed, task seed, feat_size remapping...). */
sb_status sb_run_options_finish(sb_run_flags *rf, sb_error *err);

/* Puts a recorded configuration (a checkpoint's) into the flags' storage, so that parsing
 * overrides it field by field; model_buf keeps the model name (the flag points at it).
 * Shared by eval and probe. */
void sb_run_flags_from_config(sb_run_flags *rf, const sb_run_config *cfg, char *model_buf,
                              size_t size);

#endif

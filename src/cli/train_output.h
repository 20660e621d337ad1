/* train_output.h - what `train` and `eval` print: a live progress line on a terminal,
 * plain lines otherwise, and the final summary or JSON object. */
#ifndef SELECTIVBENCH_CLI_TRAIN_OUTPUT_H
#define SELECTIVBENCH_CLI_TRAIN_OUTPUT_H

#include <stdio.h>

#include "config/run_config.h"
#include "train/trainer.h"

typedef struct sb_train_output {
    FILE *f;          /* progress goes here (stderr with --json) */
    int quiet, json, tty, threads;
    double last_live; /* time of the last live-line refresh */
    int live_open;    /* a live line is on screen */
    /* a sweep's worker: the sweep reads progress records from this pipe (the record and
     * SB_PROGRESS_FD_ENV are defined in exp/sweep_exec.h); NULL otherwise */
    FILE *progress;
    double last_progress;
    double test_acc; /* last evaluation's test accuracy (NaN before the first) */
} sb_train_output;

void sb_train_output_init(sb_train_output *o, const sb_run_config *cfg, int quiet, int json,
                          int threads);
/* sb_train_callback */
void sb_train_output_event(const sb_train_event *ev, void *user);
/* Closes the progress pipe, if any. */
void sb_train_output_close(sb_train_output *o);
/* Summary line(s), or the JSON object with --json; ceiling and effective_memory are the
 * run's yardsticks (NaN: not recorded; INFINITY: memory beyond the window curve). */
void sb_train_output_finish(sb_train_output *o, const sb_run_config *cfg,
                            const sb_train_result *res, const char *ckpt, double ceiling,
                            double effective_memory);

#endif

/* train_output.h - what `train` prints: a live progress line on a terminal, plain lines
 * otherwise, and the final summary or JSON object. */
#ifndef SELECTIVBENCH_CLI_TRAIN_OUTPUT_H
#define SELECTIVBENCH_CLI_TRAIN_OUTPUT_H

#include <stdio.h>

#include "selectivbench/selectivbench.h"

/* How often progress shows inside a run: the live line on a terminal is rewritten every
 * SB_TRAIN_LIVE_EVERY_S seconds; elsewhere (a log, a pipe, a sweep worker's log file) a plain
 * line goes out every log_every seconds (--progress_every, default SB_TRAIN_LOG_EVERY_S). */
#define SB_TRAIN_LIVE_EVERY_S 0.5
#define SB_TRAIN_LOG_EVERY_S 10.0

typedef struct sb_train_output {
    FILE *f; /* progress goes here (stderr with --json) */
    const sb_config *cfg;
    int quiet, json, tty, threads;
    double last_live; /* time of the last live-line refresh */
    int live_open;    /* a live line is on screen */
    double log_every; /* seconds between plain progress lines off a terminal (0: every update) */
    double last_log;  /* time of the last plain line (or evaluation line, or the start) */
    sb_sweep_worker *progress; /* a sweep's worker: progress records go to the sweep */
    double last_progress;
    double test_acc; /* last evaluation's test accuracy (NaN before the first) */
    int begun;       /* on_begin was called: the run was going to train */
} sb_train_output;

/* Sets o up for a run of cfg (kept: it must outlive o), with plain progress lines every
 * SB_TRAIN_LOG_EVERY_S seconds off a terminal (change o->log_every after this). */
void sb_train_output_init(sb_train_output *o, const sb_config *cfg, int quiet, int json,
                          int threads);
/* sb_train_settings' on_begin: the run's header line, and the sweep's progress pipe. */
void sb_train_output_begin(void *user);
/* sb_train_settings' on_start and progress (user: the sb_train_output). */
void sb_train_output_start(const sb_progress *p, void *user);
void sb_train_output_progress(const sb_progress *p, void *user);
/* Closes the progress pipe, if any. */
void sb_train_output_close(sb_train_output *o);
/* Summary line(s), or the JSON object with --json; ckpt NULL when none was written. */
void sb_train_output_finish(sb_train_output *o, const sb_train_outcome *res, const char *ckpt);

/* The keys a run's result shares in every --json line of train: hash, status, reason (when
 * there is one), losses and accuracies, parameters, speed and wall time. */
void sb_train_output_json_result(sb_jw *j, const sb_train_outcome *res);

#endif

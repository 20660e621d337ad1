/*
 * task_set.h - the distinct tasks of a sweep's runs, each built once: a sweep has thousands of
 * runs but few tasks. The cost estimate (sweep_cost.c) and the planner (plan.c) read a task's
 * split sizes and mean frames per sample from here, so the two count frames alike.
 */
#ifndef SELECTIVBENCH_TASK_SET_H
#define SELECTIVBENCH_TASK_SET_H

#include "core/status.h"
#include "task/task.h"

/* Samples whose frames give a split's mean frames per sample. */
#define SB_TASK_SET_SAMPLES 64

typedef struct sb_set_task {
    char key[17]; /* the task's identity: sb_ceiling_hash with the default options */
    sb_task *task;
    double build_s; /* seconds sb_task_create took */
    int64_t train_samples;
    int64_t test_split_samples; /* the test split (a learning-curve point reads it) */
    int64_t test_samples;       /* the test and validation splits (an evaluation reads both) */
    double train_frames, test_frames; /* mean frames per sample of the first SB_TASK_SET_SAMPLES */
    int train_max_frames;             /* the longest of those training samples */
} sb_set_task;

typedef struct sb_task_set {
    sb_set_task *list;
    int n, cap;
} sb_task_set;

/* The index in set of tc's task: found, or built now and measured. Errors: building the task
 * or a sample, SB_ERR_NOMEM. */
sb_status sb_task_set_find(sb_task_set *set, const sb_task_config *tc, int *index, sb_error *err);

/* Frees every task and the list. */
void sb_task_set_free(sb_task_set *set);

#endif

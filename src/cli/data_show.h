/* data_show.h - human-readable views of a task and its samples (used by data, ceiling and
 * demo). */
#ifndef SELECTIVBENCH_CLI_DATA_SHOW_H
#define SELECTIVBENCH_CLI_DATA_SHOW_H

#include <stdio.h>

#include "selectivbench/selectivbench.h"

/* One paragraph: grammar size, TE, lengths, gaps of train and test. */
void sb_data_print_task(const sb_task *task, FILE *f);

/* Pretty-prints the samples idx[0..n-1] of a split: states in order, each followed by
 * its gap ("_5" = five zero frames, "!QR" = distractor symbols Q and R). */
sb_status sb_data_show(const sb_task *task, sb_split split, const int64_t *idx, int64_t n, FILE *f,
                       sb_error *err);

#endif

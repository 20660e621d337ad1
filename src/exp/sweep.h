/*
 * sweep.h - W&B sweep files (the paper's files in configs/paper/) read and expanded as W&B
 * does for `method: grid`.
 *
 * A sweep file has `parameters: {name: {values: [...]}}` (or `{value: x}`), `method: grid`
 * and a `command:` list whose items are fixed flags and the macros ${env}, ${interpreter},
 * ${program} (dropped: the program here is `selectivbench train`) and ${args} (the run's
 * parameters as --name=value). The grid is the Cartesian product of the parameter values,
 * parameters taken in alphabetical order, the last varying fastest.
 */
#ifndef SELECTIVBENCH_SWEEP_H
#define SELECTIVBENCH_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct sb_sweep_param {
    char *name;
    int n_values;
    char **values; /* scalars as written in the file */
} sb_sweep_param;

typedef struct sb_sweep {
    char *path;
    char *program; /* "train.py" in the paper's files (informative) */
    char *method;  /* "grid" */
    char *metric_name, *metric_goal;
    int n_params;
    sb_sweep_param *params; /* sorted by name */
    int n_command;
    char **command; /* the command items as written */
} sb_sweep;

/* Reads a sweep file. Errors (SB_ERR_INVALID, or SB_ERR_IO when unreadable) name the file
 * and the line: malformed YAML, a key given twice in one mapping (at any level), a method
 * other than grid, unknown top-level keys, a parameter without values, values that are not
 * scalars; a grid of more than INT64_MAX runs names the file. */
sb_status sb_sweep_load(const char *path, sb_sweep **out, sb_error *err);
void sb_sweep_free(sb_sweep *s);

/* The same from text in memory (len bytes); `path` names it in messages. */
sb_status sb_sweep_load_text(const char *path, const char *text, size_t len, sb_sweep **out,
                             sb_error *err);

/* Number of runs of the grid: the product of the parameters' value counts, or -1 when it
 * is over INT64_MAX (never for a sweep sb_sweep_load gave: it refuses such a file). The
 * grid is never listed: runs are taken by index (sb_sweep_select). */
int64_t sb_sweep_count(const sb_sweep *s);

/* The value index of parameter p in run k. */
int sb_sweep_value_index(const sb_sweep *s, int64_t k, int p);

/* The train flags of run k: the fixed flags of `command` in order, with ${args} replaced
 * by the run's parameters as "--name=value". *argv is a NULL-terminated malloc'd array of
 * malloc'd strings (free with sb_sweep_args_free); *argc its length. */
sb_status sb_sweep_run_args(const sb_sweep *s, int64_t k, char ***argv, int *argc, sb_error *err);
void sb_sweep_args_free(char **argv);

/* Whether run k has parameter `name` equal to `value` (textually); 0 when the parameter
 * is not in the grid. */
int sb_sweep_run_matches(const sb_sweep *s, int64_t k, const char *name, const char *value);

/* ---- selections: the runs a sweep takes ------------------------------------------------ *
 * sb_sweep_select, sb_sweep_selection_size, sb_sweep_selection_run and
 * sb_sweep_selection_free are the public header's (sb_sweep_select_options,
 * SB_SWEEP_MAX_RUNS); they live here. A selection never lists its runs: each filter narrows
 * one parameter's values, so the filtered runs form a smaller grid (the sub-grid) whose
 * size is a product; shard I/N takes sub-grid runs I, I + N, I + 2N, ... and the limit the
 * first of those; run i of the selection is computed from i. */

#endif

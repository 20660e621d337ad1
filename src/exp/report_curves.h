/*
 * report_curves.h - the learning-curve figures of the report: test accuracy against the
 * training samples seen, one line per group of runs (the seeds of one setting), the mean
 * over the group's runs at each evaluation with a band from the lowest to the highest run.
 * (src/exp/report_curves.c)
 */
#ifndef SELECTIVBENCH_REPORT_CURVES_H
#define SELECTIVBENCH_REPORT_CURVES_H

#include <stdint.h>

#include "core/plot.h"
#include "core/status.h"
#include "exp/results.h"

/* A group of runs drawn as one line: its label and the database ids of its runs. */
typedef struct sb_curve_group {
    const char *label;
    int n_runs;
    const int64_t *run_ids;
} sb_curve_group;

/* A group's line needs this many points to be drawn: fewer is not a curve. */
#define SB_CURVE_MIN_POINTS 3

/* Writes path_base.png, .svg and .pdf: per group, the mean test accuracy over its runs at
 * each number of training samples evaluated (runs evaluated at other sample counts count
 * where they have one), shaded from the lowest to the highest run when the group has
 * several; refs (horizontal reference lines) behind. Groups with fewer than
 * SB_CURVE_MIN_POINTS points are left out; *n_drawn: the lines drawn (0: no figure was
 * written). *x and *y (either may be NULL) receive the axes drawn. Errors: the database's
 * read errors, SB_ERR_NOMEM, those of sb_plot_write. */
sb_status sb_report_curve_figure(sb_results *db, const char *title, const char *subtitle,
                                 const sb_curve_group *groups, int n_groups,
                                 const sb_plot_ref *refs, int n_refs, const char *path_base,
                                 sb_plot_axis *x, sb_plot_axis *y, int *n_drawn, sb_error *err);

#endif

/*
 * report.h - the paper's figures and tables from whatever runs a results database holds.
 *
 * Each finished run is assigned to the figure of its task, recognised from its
 * configuration (diverged, failed, stopped or running runs are left out of every figure and
 * mean, and counted, in the summary and in report.md):
 *   fig4   task 4, --test_pretrained: accuracy vs gap frames at test (one figure per width)
 *   fig3b  task 3, --grammar_gap: accuracy vs parameters (non-grammatical gaps)
 *   fig3a  task 2, noisy or longer gaps: accuracy vs parameters
 *   fig2a  task 1a, --grammar_scale: accuracy vs topological entropy (one figure per width)
 *   fig2b  task 1b, the rest: accuracy vs parameters
 * One line per model; each point is the mean +- standard deviation over seeds of the
 * learning-rate / warm-up setting with the best mean test accuracy at that point. Runs of
 * the two protocols go to separate figures.
 *
 * The yardsticks (results.h, ceiling.h): every accuracy figure shows, as grey reference
 * lines, the ceiling (the ideal observer's expected accuracy) and the window observers
 * k = 1, 4 and 8 of the runs' tasks: horizontal where every point of the figure has the
 * same value, otherwise a line through the mean over the runs at each x (fig2a and fig4,
 * whose x varies the task). Each accuracy figure has a companion NAME_memory: the
 * effective memory (elements, on a log2(1 + m) axis, beyond 32 drawn on a line of its own)
 * of the same best settings against the same x (parameters for fig2b, fig3a and fig3b),
 * mean +- std over seeds, a memory beyond 32 counted as 64 in the mean. Runs without
 * yardsticks get them first (computed from their stored configuration and, when the
 * database is writable, stored).
 */
#ifndef SELECTIVBENCH_REPORT_H
#define SELECTIVBENCH_REPORT_H

#include "core/status.h"

typedef struct sb_report_summary {
    sb_report_outcome out; /* the public record: runs read, used, left out, diverged, under
                              "Other runs"; figures; yardsticks missing and why; report.md */
    /* the other runs left out of every figure and mean, besides out.runs_diverged: */
    int runs_unfinished; /* "failed", "stopped", still "running" */
    int runs_unusable;   /* "finished" without a test accuracy, a readable configuration or
                            a finite x (report --x) */
} sb_report_summary;

/* Reads db_path and writes the figures and report.md into out_dir (created if missing).
 * Errors: SB_ERR_IO naming the database or the file. */
sb_status sb_report_generate(const char *db_path, const char *out_dir, sb_report_summary *sum,
                             sb_error *err);

/* The same; read_only 1: the database is only read even when writable (yardsticks missing
 * from it are computed for the figures, not stored), for viewers such as `serve`. */
sb_status sb_report_generate_mode(const char *db_path, int read_only, const char *out_dir,
                                  sb_report_summary *sum, sb_error *err);

/* What to report: read_only as for sb_report_generate_mode; x_key (a configuration key,
 * e.g. dataset_size for a scale study) draws every run against that key, one figure, instead
 * of the paper's figures; filters ("KEY=VALUE", as sb_results_config_matches takes them)
 * keep only the runs matching all of them, for the figures and the findings. */
typedef struct sb_report_options {
    int read_only;
    const char *x_key;
    const char *const *filters;
    int n_filters;
} sb_report_options;

/* sb_report_generate with options. Errors: SB_ERR_INVALID for an unknown x_key; those of
 * sb_report_generate. */
sb_status sb_report_generate_with(const char *db_path, const char *out_dir,
                                  const sb_report_options *opts, sb_report_summary *sum,
                                  sb_error *err);

#endif

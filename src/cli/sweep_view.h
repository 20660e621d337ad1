/* sweep_view.h - what `sweep` and `demo` print while the library runs a sweep
 * (sb_sweep_run): on a terminal, a live block of one line per running run under a
 * sweep-level line, redrawn in place; otherwise a plain line per run and a sweep line
 * once a minute; always one line per ended run and per run put aside because another
 * process trains it, and a summary at the end. */
#ifndef SELECTIVBENCH_CLI_SWEEP_VIEW_H
#define SELECTIVBENCH_CLI_SWEEP_VIEW_H

#include "selectivbench/selectivbench.h"

/* The counts of a sweep's runs, as its last update gave them, and its first refused run. */
typedef struct sb_cli_sweep_tally {
    int done, failed, skipped, refused, excluded, interrupted;
    int64_t first_refused_run;            /* -1 when none was refused */
    char first_refused[SB_ERROR_MSG_MAX]; /* why it was refused */
    int64_t first_failed_run;             /* -1 when none failed or diverged */
    char first_failed[SB_ERROR_MSG_MAX];  /* why it failed (its log, when not recorded) */
} sb_cli_sweep_tally;

/* Runs runs[0 .. n_runs-1] of s (NULL: every run) with sb_sweep_run, the keys workers,
 * threads, results, db and checkpoint_every read from cfg, this program as the worker and
 * sb_cli_stop_requested as the cancel poll, printing the progress (none with quiet) and the
 * summary line "sweep LABEL: N runs selected of M: ...". plan (may be NULL): the selection's plan,
 * whose runs' seconds give the sweep's ETA (the seconds left of the runs not yet ended, those
 * running counted from their progress, scaled by how the finished runs compared with their
 * plan, over the workers); without one the ETA is the mean time of the runs so far.
 * Returns what sb_sweep_run returns; *tally the final counts. */
sb_status sb_cli_sweep_run(const sb_sweep *s, const char *label, const int64_t *runs,
                           int64_t n_runs, const sb_config *cfg, const sb_plan *plan, int quiet,
                           sb_cli_sweep_tally *tally, sb_error *err);

#endif

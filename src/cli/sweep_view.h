/* sweep_view.h - what `sweep` and `demo` print while the library executes a sweep
 * (exp/sweep_exec.h): on a terminal, a live block of one line per running run under a
 * sweep-level line, redrawn in place; otherwise a plain line per run and a sweep line
 * once a minute; always one line per ended run, and a summary at the end. */
#ifndef SELECTIVBENCH_CLI_SWEEP_VIEW_H
#define SELECTIVBENCH_CLI_SWEEP_VIEW_H

#include "exp/sweep_exec.h"

/* Executes runs[0..n_runs-1] of s with sb_sweep_execute (opts->on_event and user are
 * replaced by the view; opts->db must be set), printing the progress (none with quiet)
 * and the summary line "sweep LABEL: N runs selected of M: ...". Returns what
 * sb_sweep_execute returns; tally as it fills it. */
sb_status sb_cli_sweep_run(const sb_sweep *s, const char *label, const int64_t *runs,
                           int64_t n_runs, const sb_sweep_exec_opts *opts, int quiet,
                           sb_sweep_tally *tally, sb_error *err);

#endif

/* plan_view.h - `selectivbench plan`'s output shared with `sweep` (src/cli/plan_view.c): the
 * plan's one-line total that `sweep` prints before it
 * starts, and `train`'s notice before a long run. */
#ifndef SELECTIVBENCH_CLI_PLAN_VIEW_H
#define SELECTIVBENCH_CLI_PLAN_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "selectivbench/selectivbench.h"

/* `sweep`'s line before it starts: the plan's core-hours, its wall time on `workers`
 * workers of `threads` threads (0: the cores divided among the workers) in the sweep's order and
 * the largest run's peak memory, from the cached calibrations (nothing is measured: what the cache
 * lacks is costed at a FLOP rate, and the line says so). Returns the plan (the sweep's ETA reads
 * its runs' seconds; freed with sb_plan_free), NULL when none was made. */
sb_plan *sb_cli_plan_print_total(const sb_sweep *s, const sb_sweep_selection *sel, int workers,
                                 int threads);

/* A run planned over this long says so before it starts (issue 38: paper-size defaults
 * must not start without a word). */
#define SB_CLI_PLAN_NOTICE_S 600.0

/* `train`'s line before a run planned over SB_CLI_PLAN_NOTICE_S: its time on `threads`
 * threads and its peak memory, from the cached calibrations (nothing measured), and how to
 * make it smaller or stop it; nothing for a shorter run or when no plan can be made. */
void sb_cli_plan_print_run(FILE *f, const sb_config *cfg, int threads);

#endif

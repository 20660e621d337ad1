/* plan_view.h - `selectivbench plan`'s output shared with `sweep` (src/cli/plan_view.c): the
 * calibration cache's path and the plan's one-line total that `sweep` prints before it
 * starts. */
#ifndef SELECTIVBENCH_CLI_PLAN_VIEW_H
#define SELECTIVBENCH_CLI_PLAN_VIEW_H

#include <stddef.h>

#include "selectivbench/selectivbench.h"

/* The calibration cache: $SB_CACHE_DIR/plan-calibration.json, else
 * $XDG_CACHE_HOME/selectivbench/plan-calibration.json, else
 * ~/.cache/selectivbench/plan-calibration.json; "" when none of them is set. */
void sb_cli_plan_cache_path(char *buf, size_t size);


/* `sweep`'s line before it starts: the plan's core-hours and its wall time on `workers`
 * workers of `threads` threads in the sweep's order, from the cached calibrations (nothing
 * is measured: what the cache lacks is costed at a FLOP rate, and the line says so). */
void sb_cli_plan_print_total(const sb_sweep *s, const sb_sweep_selection *sel, int workers,
                             int threads);

#endif

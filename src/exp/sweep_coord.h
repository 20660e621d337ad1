/* sweep_coord.h - a sweep's coordinator over the caller's transport (sweep_coord.c): the
 * public header's sb_sweep_coordinate, its keys read by the api floor. */
#ifndef SELECTIVBENCH_SWEEP_COORD_H
#define SELECTIVBENCH_SWEEP_COORD_H

#include "core/status.h"
#include "exp/sweep.h"

/* sb_sweep_coordinate with its keys given: the results folder and the database's path (NULL:
 * RESULTS/selectivbench.db). */
sb_status sb_sweep_coordinate_with(const sb_sweep *s, const sb_sweep_selection *sel,
                                   const char *results, const char *db_path, int n_workers,
                                   int max_id, const sb_coord_settings *settings,
                                   sb_coord_tally *tally, sb_error *err);

#endif

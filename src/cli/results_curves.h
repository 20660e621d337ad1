/* results_curves.h - `selectivbench results --curves [RUN]`: the learning curves stored in a
 * results database (src/cli/results_curves.c). */
#ifndef SELECTIVBENCH_CLI_RESULTS_CURVES_H
#define SELECTIVBENCH_CLI_RESULTS_CURVES_H

#include "selectivbench/selectivbench.h"

/* Whether the command line asks for the learning curves (--curves among its flags). */
int sb_cli_results_wants_curves(int argc, char **argv);

/* `results --curves [RUN] [DB|DIR] [--db PATH] [--json|--csv]`: returns the exit code. */
int sb_cmd_results_curves(int argc, char **argv);

/* One point of a curve as a JSON object (step, samples, split, loss, acc, lr, tokens_per_s,
 * wall_s; unknown numbers null): the one form `results --curves --json` and `serve` write. */
void sb_cli_json_curve_point(sb_jw *j, const sb_curve_point *p);

#endif

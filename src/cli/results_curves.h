/* results_curves.h - `selectivbench results --curves [RUN]`: the learning curves stored in a
 * results database (src/cli/results_curves.c). */
#ifndef SELECTIVBENCH_CLI_RESULTS_CURVES_H
#define SELECTIVBENCH_CLI_RESULTS_CURVES_H

/* Whether the command line asks for the learning curves (--curves among its flags). */
int sb_cli_results_wants_curves(int argc, char **argv);

/* `results --curves [RUN] [DB|DIR] [--db PATH] [--json|--csv]`: returns the exit code. */
int sb_cmd_results_curves(int argc, char **argv);

#endif

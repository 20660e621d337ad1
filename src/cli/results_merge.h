/* results_merge.h - `selectivbench results merge SRC.db... --db ALL.db`: shard databases
 * merged into one by run hash (src/cli/results_merge.c, sb_results_merge). */
#ifndef SELECTIVBENCH_CLI_RESULTS_MERGE_H
#define SELECTIVBENCH_CLI_RESULTS_MERGE_H

/* Whether the command line is `results merge ...`. */
int sb_cli_results_wants_merge(int argc, char **argv);

/* `results merge SRC... --db DST`: returns the exit code (1 when a run conflicts). */
int sb_cmd_results_merge(int argc, char **argv);

#endif

/* cli.h - what the subcommands share (src/cli/cli.c); the subcommands themselves are
 * declared in commands.h. */
#ifndef SELECTIVBENCH_CLI_H
#define SELECTIVBENCH_CLI_H

#include <stdio.h>

#include "cli/options.h"
#include "selectivbench/selectivbench.h"

/* Prints err as one line on stderr and returns the exit code of its status. */
int sb_cli_fail(const char *cmd, const sb_error *err);

/* Parses the options; on error prints it and returns the exit code (2), on --help
 * prints usage + options and returns 0; returns -1 to go on. */
int sb_cli_parse(const char *cmd, const char *usage, sb_option *opts, int n_opts, int argc,
                 char **argv, const char **positional, int max_positional, int *n_positional);

/* Commands that take a checkpoint first (`eval CKPT [flags]`, `probe CKPT [flags]`): returns
 * -1 to go on with *ckpt = argv[2]; otherwise prints the usage (--help, exit code 0) or one
 * error line (exit code 2) and returns the code. */
int sb_cli_checkpoint_first(const char *cmd, const char *usage, int argc, char **argv,
                            const char **ckpt);

/* The --threads flag: applies it (0 = all cores) and returns the thread count. */
int sb_cli_threads(int requested);

/* --print_hashes: prints "RUN_HASH TRAINING_HASH" of cfg and returns 0. */
int sb_cli_print_config_hashes(const sb_config *cfg);

/* The database a results/report path names: a results folder (such as results/) stands
 * for the database inside it, DIR/selectivbench.db (SB_RESULTS_DB_NAME), joined into buf;
 * any other path is returned as given. */
const char *sb_cli_results_db(const char *path, char *buf, size_t size);

/* Whether stdout is a terminal (for live progress lines). */
int sb_cli_stdout_is_tty(void);

#endif

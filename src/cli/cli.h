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

/* Commands that take a checkpoint first (`eval RUN|CKPT [flags]`, `probe RUN|CKPT`): returns
 * -1 to go on with *ckpt = argv[2], or with *ckpt = NULL when argv[2] is --help (then call
 * sb_cli_checkpoint_help); otherwise prints one error line and returns its exit code (2). */
int sb_cli_checkpoint_first(const char *cmd, int argc, char **argv, const char **ckpt);

/* `eval --help`, `probe --help`: the usage and every flag with train's defaults, and a line
 * saying a checkpoint's recorded configuration replaces them. Returns the exit code. */
int sb_cli_checkpoint_help(const char *cmd, const char *usage, sb_option *opts, int n_opts,
                           int argc, char **argv);

/* `eval` and `probe` take a run id (a unique prefix of a run hash, the `run` column of
 * `results`) or a checkpoint file as arg. An existing file is the checkpoint itself:
 * ckpt = arg, run_id "" and *run_config NULL. Otherwise lowercase hex digits are a run id,
 * looked up (at least 4 digits, a unique prefix) in the results database that --db PATH or
 * --results DIR in argv name (default results/selectivbench.db): ckpt receives the run's checkpoint
 * (the stored path, or DB_FOLDER/checkpoints/NAME when the stored path is relative to another
 * folder), run_id its run hash and *run_config its stored configuration (free it with
 * sb_config_free). Any other argument is passed on as a path (loading it says it is
 * missing). Returns -1 to go on, else prints one error line and returns its exit code. */
int sb_cli_run_or_checkpoint(const char *cmd, const char *arg, int argc, char **argv, char *ckpt,
                             size_t size, char run_id[17], sb_config **run_config);

/* `eval RUN|CKPT [flags]`, `probe RUN|CKPT [flags]`: the checkpoint found as
 * sb_cli_run_or_checkpoint finds it, cfg set to its recorded configuration (a missing or
 * corrupt file is the error), then the flags after arg parsed into opts (they set cfg's keys
 * by name). Returns -1 to go on, else the exit code (an error line printed). */
int sb_cli_checkpoint_flags(const char *cmd, const char *arg, sb_option *opts, int n_opts, int argc,
                            char **argv, sb_config *cfg, char *ckpt, size_t size, char run_id[17]);

/* JSON: key, then v, or null when v is negative (a count or index not recorded). */
void sb_cli_json_count(sb_jw *j, const char *key, int64_t v);

/* Returns -1 when the results database db_path exists, else prints that there is none (and
 * how to make one) and returns the exit code. */
int sb_cli_db_exists(const char *cmd, const char *db_path);

/* The --threads flag: applies it (0 = all cores) and returns the thread count. */
int sb_cli_threads(int requested);

/* --print_hashes: prints "RUN_HASH TRAINING_HASH" of cfg and returns 0. */
int sb_cli_print_config_hashes(const sb_config *cfg);

/* The database a results/report path names: a results folder (such as results/) stands
 * for the database inside it, DIR/selectivbench.db (SB_RESULTS_DB_NAME), joined into buf;
 * any other path is returned as given. */
const char *sb_cli_results_db(const char *path, char *buf, size_t size);

/* The values of a repeatable flag (--filter K=V, also --filter=K=V) in argv[2..], in order:
 * up to max of them into out; returns how many were given (more than max: too many). The
 * option table keeps one value per flag, so repeatable ones are collected here. */
int sb_cli_repeated(int argc, char **argv, const char *flag, const char **out, int max);

/* Whether stdout is a terminal (for live progress lines). */
int sb_cli_stdout_is_tty(void);

/* Runs a command's body with its settings: a configuration from sb_run_settings_new(presets)
 * given to body(cfg, argc, argv) and freed after it; body's exit code. */
int sb_run_with_settings(const char *cmd, const char *const *presets,
                         int (*body)(sb_config *cfg, int argc, char **argv), int argc, char **argv);

#endif

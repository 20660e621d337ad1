/*
 * options.h - command-line flags in the style of the reference's train.py (argparse):
 * `--name value` or `--name=value`, booleans written `--flag True` (str2bool), switches
 * written `--flag`. A table of sb_option drives parsing and --help. Every setting with a
 * value to check (a number, a boolean, a choice) is a key of the key table
 * (src/config/keys.def): its option sets the key of a configuration, which checks it; the
 * command reads it back from there. The other options are a command's paths, names and
 * switches. Unknown flags, malformed numbers and out-of-range values are errors naming the
 * flag. */
#ifndef SELECTIVBENCH_CLI_OPTIONS_H
#define SELECTIVBENCH_CLI_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "selectivbench/selectivbench.h"

typedef enum sb_opt_type {
    SB_OPT_SWITCH, /* int set to 1 by the bare flag (argparse store_true) */
    SB_OPT_STRING, /* const char * pointing into argv */
    SB_OPT_KEY,    /* a key of the table: dest is an sb_config, the value goes through
                      sb_config_set_key (a switch key may stand alone) */
} sb_opt_type;

/* The --db option's help, one text for every command that reads a results database. */
#define SB_CLI_DB_HELP                                                                             \
    "results database, or a results folder DIR for DIR/" SB_RESULTS_DB_NAME                        \
    " (default results/" SB_RESULTS_DB_NAME ")"

typedef struct sb_option {
    const char *name; /* without the leading "--" */
    sb_opt_type type;
    void *dest;
    const char *metavar; /* shown in --help */
    const char *help;
    int seen; /* set by the parser when the flag was given */
} sb_option;

/* Parses argv[first..argc-1]. Arguments that are not flags are collected in
 * positional[] (at most max_positional; more is an error). Returns SB_ERR_INVALID with
 * a message on the first bad argument. A bare "--help" or "-h" sets *help. */
sb_status sb_options_parse(sb_option *opts, int n_opts, int argc, char **argv, int first,
                           const char **positional, int max_positional, int *n_positional,
                           int *help, sb_error *err);

/* Sets one option from its value as written after "--name=" (NULL: the bare flag, for a
 * switch). Errors name the flag. */
sb_status sb_option_set(sb_option *o, const char *value, sb_error *err);

/* Whether the option is written alone (a switch, or a switch key of the table). */
int sb_option_is_switch(const sb_option *o);

/* The options written in opts[0..cap) before the first one without a name (a table with
 * room left for keys). */
int sb_options_count(const sb_option *opts, int cap);

/* The option of that name, or NULL. */
sb_option *sb_options_find(sb_option *opts, int n_opts, const char *name);

/* The program as the user ran it (argv[0]: "./build/selectivbench" before `./run.sh install`,
 * "selectivbench" after it). Every hint that gives a command to run starts with it, so that
 * the hint pastes into the shell it was printed in. main() sets it first. */
void sb_cli_set_program(const char *argv0);
const char *sb_cli_program(void);

/* For a model name the registry does not have: the registered name closest to it (a
 * typo), else NULL (also NULL for a known name). */
const char *sb_cli_closest_model(const char *model);

/* Prints the options as a help table. */
void sb_options_print_help(FILE *f, const sb_option *opts, int n_opts);

/* Appends one SB_OPT_KEY option per key of the table in groups up to `group` (SB_KEYS_*,
 * in the table's order), each setting its key of *cfg by name. opts must have room for
 * sb_config_key_count() more entries. */
void sb_options_add_keys(sb_config *cfg, int group, sb_option *opts, int *n);

/* Appends the option of the key `name` (any group: the COMMAND keys are taken this way),
 * setting that key of *cfg. Its --help line is `help` (NULL: the table's) with the value cfg
 * holds now as the default, so a command that starts from other values than the table's
 * (bench's smaller model) sets them in cfg first. A name outside the table adds nothing. */
void sb_options_add_key(sb_config *cfg, const char *name, const char *help, sb_option *opts,
                        int *n);

/* Parses "0-4,57,999" into a list of indices (allocated; *n receives the count).
 * Every index must lie in [0, limit). */
sb_status sb_parse_index_list(const char *text, int64_t limit, int64_t **out, int64_t *n,
                              sb_error *err);

#endif

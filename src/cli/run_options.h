/*
 * run_options.h - the flags of train, eval, probe and ceiling: every key of the table up to
 * a group (train.py's flags, the no-ops and the runtime keys: threads, files, output),
 * setting one configuration by name. The commands read the runtime keys back from it.
 */
#ifndef SELECTIVBENCH_CLI_RUN_OPTIONS_H
#define SELECTIVBENCH_CLI_RUN_OPTIONS_H

#include "cli/options.h"
#include "selectivbench/selectivbench.h"

typedef struct sb_run_flags {
    /* every key, defaults first: the flags' own handle, set by name while parsing. A caller
     * may put a recorded configuration in it (sb_config_assign) before parsing. */
    sb_config *config;
} sb_run_flags;

#define SB_RUN_MAX_OPTIONS 128

/* Fills rf with defaults (a new rf->config) and appends one option per key in groups up to
 * `group` (SB_KEYS_RUNTIME: eval, probe, ceiling; SB_KEYS_TRAIN: train) to opts[*n]. Free
 * rf with sb_run_flags_free, also after an error. Errors: SB_ERR_NOMEM. */
sb_status sb_run_options_add(sb_run_flags *rf, int group, sb_option *opts, int *n, sb_error *err);

/* A new configuration for a command's settings: the table's defaults, then `presets`, a
 * NULL-terminated list of name, value pairs where the command starts from other values
 * (bench's smaller model). Errors: SB_ERR_NOMEM; those of sb_config_set_key. */
sb_status sb_run_settings_new(sb_config **out, const char *const *presets, sb_error *err);

/* Frees rf->config. */
void sb_run_flags_free(sb_run_flags *rf);

/* A numeric, switch or choice key of cfg as an int (quiet, json, threads, a choice's index,
 * ...); 0 for an optional key left unset. */
int sb_run_flag(const sb_config *cfg, const char *key);

/* Sets key `key` of cfg to the printf-formatted value (what a flag would say). Errors:
 * those of sb_config_set_key. */
sb_status sb_run_set(sb_config *cfg, const char *key, sb_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A path key of cfg (results, db, ckpt), NULL when it is "" (not set). */
const char *sb_run_path(const sb_config *cfg, const char *key);

#endif

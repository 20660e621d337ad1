/*
 * config_bridge.h - the ported commands (grammar, data, ceiling, bench, probe) use the
 * public API only; the flag helpers they share with the other commands (task_options.h,
 * run_options.h) still fill a library sb_run_config. These functions are the one crossing
 * between the two, until the helpers fill an sb_config themselves; then this file goes.
 */
#ifndef SELECTIVBENCH_CLI_CONFIG_BRIDGE_H
#define SELECTIVBENCH_CLI_CONFIG_BRIDGE_H

#include "selectivbench/selectivbench.h"

struct sb_run_config;

/* A new public configuration holding *run (freed with sb_config_free). Errors: SB_ERR_NOMEM. */
sb_status sb_cli_config_new(const struct sb_run_config *run, sb_config **out, sb_error *err);

/* Copies cfg into *run (a recorded configuration as the flags' starting point). */
void sb_cli_config_to_run(const sb_config *cfg, struct sb_run_config *run);

/* Fills err with status and a printf-style message; returns status. */
sb_status sb_cli_error(sb_error *err, sb_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

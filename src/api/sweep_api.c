/* sweep_api.c - the public API's sweeps (selectivbench.h): the configuration of one run of a
 * sweep file's grid. sb_sweep_load, sb_sweep_free and sb_sweep_count are sweep.c's own.
 *
 * TODO(#14): src/cli/sweep_runner.c builds the same configuration from the CLI's option
 * tables; it is moving into the library (src/exp/sweep_exec.c), after which this file should
 * call that builder instead of its own, and sb_sweep_run (see the public header) wraps
 * sb_sweep_execute. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "config/config.h"
#include "exp/sweep.h"

/* Flags of `selectivbench train` that a sweep's command may carry and that are not keys of
 * a configuration (where results go, threads, output): accepted and ignored here. */
static const char *const train_only_flags[] = {
    "save_model", "continued_training", "resume", "only_createset", "threads", "results",
    "ckpt",       "mem_budget",         "json",   "quiet",          "print_hashes", NULL,
};

static int is_train_only_flag(const char *name)
{
    for (int i = 0; train_only_flags[i] != NULL; i++)
        if (strcmp(train_only_flags[i], name) == 0)
            return 1;
    return 0;
}

/* Sets flag `name` (a key of the table, or a train-only flag, ignored). */
static sb_status set_flag(sb_run_config *run, const sb_sweep *s, const char *name,
                          const char *value, sb_error *err)
{
    if (sb_config_find(name) != NULL) {
        sb_status st = sb_config_set(run, name, value != NULL ? value : "True", err);
        if (st != SB_OK && err != NULL) {
            char msg[SB_ERROR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            sb_error_set(err, st, "sweep file '%s': %s", s->path, msg);
        }
        return st;
    }
    if (is_train_only_flag(name))
        return SB_OK;
    return sb_error_set(err, SB_ERR_INVALID, "sweep file '%s': unknown flag --%s", s->path, name);
}

/* The run's grid values, by name. */
static sb_status set_params(sb_run_config *run, const sb_sweep *s, int64_t k, sb_error *err)
{
    for (int p = 0; p < s->n_params; p++) {
        sb_status st = set_flag(run, s, s->params[p].name,
                                s->params[p].values[sb_sweep_value_index(s, k, p)], err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

/* Whether a command item is a value (not a --flag or a macro). */
static int is_value(const char *item)
{
    return strncmp(item, "--", 2) != 0 && strncmp(item, "${", 2) != 0;
}

sb_status sb_sweep_config(const sb_sweep *s, int64_t k, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(s, err);
    int64_t n_runs = sb_sweep_count(s);
    if (k < 0 || k >= n_runs)
        return sb_error_set(err, SB_ERR_INVALID, "sweep file '%s': run %lld is outside [0, %lld)",
                            s->path, (long long)k, (long long)n_runs);
    sb_run_config run = sb_run_config_default();
    sb_status st = SB_OK;
    int has_args = 0;
    /* the command's fixed flags in order, the run's values where ${args} stands (at the end
     * without it), as `train` reads its flags */
    for (int i = 0; i < s->n_command && st == SB_OK; i++) {
        const char *c = s->command[i];
        if (strcmp(c, "${args}") == 0) {
            has_args = 1;
            st = set_params(&run, s, k, err);
            continue;
        }
        if (strcmp(c, "${env}") == 0 || strcmp(c, "${interpreter}") == 0 ||
            strcmp(c, "${program}") == 0 || strcmp(c, "python") == 0 || strcmp(c, "python3") == 0)
            continue;
        if (strncmp(c, "--", 2) != 0 || c[2] == '\0')
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command item '%s' is not a --flag", s->path, c);
        char name[128];
        const char *eq = strchr(c + 2, '=');
        size_t len = eq != NULL ? (size_t)(eq - (c + 2)) : strlen(c + 2);
        snprintf(name, sizeof name, "%.*s", (int)len, c + 2);
        const char *value = eq != NULL ? eq + 1 : NULL;
        /* a bare switch stands alone; any other flag takes the next item as its value */
        const sb_config_key *key = sb_config_find(name);
        int is_switch = key != NULL && key->kind == SB_KEY_SWITCH;
        if (value == NULL && !is_switch && i + 1 < s->n_command && is_value(s->command[i + 1]))
            value = s->command[++i];
        st = set_flag(&run, s, name, value, err);
    }
    if (st == SB_OK && !has_args)
        st = set_params(&run, s, k, err);
    if (st != SB_OK)
        return st;
    return sb_api_config_new(&run, out, err);
}

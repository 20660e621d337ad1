/*
 * results_view.h - what `selectivbench results` prints of the runs it selected
 * (src/cli/results_view.c): columns by name (a run's fields, the task's TE and every
 * configuration key), the configuration keys a set of runs varies, --sort, --columns,
 * --group (mean, sample standard deviation and n per group), as a table, CSV or JSON, and
 * one run in detail (--run).
 */
#ifndef SELECTIVBENCH_CLI_RESULTS_VIEW_H
#define SELECTIVBENCH_CLI_RESULTS_VIEW_H

#include <jansson.h>

#include "selectivbench/selectivbench.h"

/* What `results` says of a run whose stored configuration cannot be read (every format). */
#define RESULTS_DAMAGE "its stored configuration is not a JSON object"

/* The runs of the database (of --model) and which of them are shown. */
typedef struct results_rows {
    sb_result_row *rows;
    size_t n;
    char **config_json; /* [n] each run's configuration as stored (NULL: none) */
    json_t **configs;   /* [n] each run's configuration, parsed (NULL: unreadable) */
    int *keep;          /* [n] shown: passes --status, every --filter (and --run) */
    int *damaged;       /* [n] its stored configuration is not a JSON object: shown, marked,
                         * with config_json NULL and configs an empty object */
    size_t n_damaged;   /* of the runs shown */
    size_t kept;
    double *ceiling_se; /* [n] standard error of the ceiling, NaN where unknown */
    int n_unfilled;     /* finished runs shown whose yardsticks could not be computed */
    sb_error fill_err;  /* why, for the first of them */
} results_rows;

/* How the runs are shown: the texts of --columns, --sort and --group (NULL: not given). */
typedef struct results_view_options {
    const char *columns; /* "a,b,c": these columns, in this order */
    const char *sort;    /* "KEY" ascending, "-KEY" descending */
    const char *group;   /* "a,b": one line per distinct value of these columns */
    int json, csv;
} results_view_options;

/* Checks the names in --columns, --sort and --group before anything is read: an unknown
 * name is an error naming the flag, the closest known name and the columns. Errors:
 * SB_ERR_INVALID. */
sb_status results_view_check(const results_view_options *o, sb_error *err);

/* Prints the runs of t that are kept: grouped with --group, else one per run; as a table,
 * CSV or JSON. Errors: SB_ERR_INVALID (a --group/--sort combination that cannot be shown),
 * SB_ERR_NOMEM. */
sb_status results_view_print(const results_rows *t, const results_view_options *o, sb_error *err);

/* Writes into j the groups of the runs idx[n] of rows[n_rows] (configs[n_rows]: their
 * stored configurations) by o->group, with the statistics of o->columns (NULL: test_acc,
 * test_loss, ceiling) in o->sort's order, exactly as `results --group ... --json` prints
 * them (the dashboard's /api/groups). Errors: SB_ERR_INVALID naming the flag (--group,
 * --columns, --sort), SB_ERR_NOMEM. */
sb_status results_view_groups_json(sb_jw *j, const sb_result_row *rows, const char *const *configs,
                                   size_t n_rows, const size_t *idx, size_t n,
                                   const results_view_options *o, sb_error *err);

/* Prints run i of t in detail (the table form of --run): its id, status, checkpoint, log
 * (when db_path's folder has one), metrics, yardsticks and the configuration keys that
 * differ from train's defaults. */
void results_view_print_run(const results_rows *t, size_t i, const char *db_path);

#endif

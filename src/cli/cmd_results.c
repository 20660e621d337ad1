/*
 * cmd_results.c - `selectivbench results`: the runs of a results database, as a table,
 * JSON ({"runs": [...]}) or CSV for pandas; filtered by model, status or any
 * configuration key; sorted (--sort), with chosen columns (--columns), grouped with mean,
 * standard deviation and n (--group), or one run in detail (--run ID). The columns and
 * the printing are results_view.c's. Every finished run is shown with its yardsticks: those
 * missing (runs recorded before they existed) are computed from the run's stored
 * configuration and written back, unless the database is read-only (sb_results_backfill).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/results_curves.h"
#include "cli/results_merge.h"
#include "cli/results_view.h"
#include "cli/run_options.h"
#include "selectivbench/selectivbench.h"

#define MAX_FILTERS 16

/* The command line of `results`. */
typedef struct results_args {
    const char *db_path, *model;
    sb_run_status status;    /* --status, SB_RUN_NONE: every status */
    char db_in_folder[4096]; /* DIR/selectivbench.db when the path given is a folder */
    int json, csv, check, threads;
    const char *filters[MAX_FILTERS]; /* KEY=VALUE, each --filter in order */
    int n_filters;
    const char *run;           /* --run ID: this run alone, in detail */
    results_view_options view; /* --columns, --sort, --group */
} results_args;

/* Whether the registry has a model of this name. */
static int model_known(const char *name)
{
    for (int i = 0; i < sb_models_count(); i++)
        if (strcmp(sb_models_name(i), name) == 0)
            return 1;
    return 0;
}

/* The --filter error for a key the configuration does not have, with the closest key. */
static sb_status unknown_filter_key(const char *filter, const char *key, sb_error *err)
{
    const char *names[256];
    int n_names = 0;
    for (int i = 0; i < sb_config_key_count() && n_names < 256; i++)
        names[n_names++] = sb_config_key_name(i);
    const char *hint = sb_closest_name(key, names, n_names);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--filter '%s': '%s' is not a configuration key; did you mean '%s'? "
                            "(%s train --help lists them)",
                            filter, key, hint, sb_cli_program());
    return sb_error_set(err, SB_ERR_INVALID,
                        "--filter '%s': '%s' is not a configuration key (%s train --help lists "
                        "them)",
                        filter, key, sb_cli_program());
}

/* The --filter error for a model the registry does not have, with the closest model. */
static sb_status unknown_filter_model(const char *filter, const char *model, sb_error *err)
{
    const char *hint = sb_cli_closest_model(model);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--filter '%s': unknown model '%s'; did you mean '%s'? (%s models "
                            "lists them)",
                            filter, model, hint, sb_cli_program());
    return sb_error_set(err, SB_ERR_INVALID,
                        "--filter '%s': unknown model '%s' (%s models lists them)", filter, model,
                        sb_cli_program());
}

/* A --filter KEY=VALUE must name a key of the configuration and a value that key takes (a
 * model of the registry for `model`): a typo is an error, not an empty table. */
static sb_status check_filter(const char *filter, sb_config *scratch, sb_error *err)
{
    const char *eq = strchr(filter, '=');
    if (eq == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "--filter '%s': write KEY=VALUE", filter);
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - filter), filter);
    if (sb_config_key_find(key) < 0)
        return unknown_filter_key(filter, key, err);
    if (strcmp(key, "model") == 0) /* a registry model, or one the database has (below) */
        return SB_OK;
    /* each value of a list KEY=A,B,C */
    for (const char *value = eq + 1;;) {
        const char *comma = strchr(value, ',');
        char one[256];
        snprintf(one, sizeof one, "%.*s", comma != NULL ? (int)(comma - value) : (int)strlen(value),
                 value);
        sb_error why = {0};
        if (sb_config_set_key(scratch, key, one, &why) != SB_OK)
            return sb_error_set(err, SB_ERR_INVALID, "--filter '%s': %s", filter, why.msg);
        if (comma == NULL)
            return SB_OK;
        value = comma + 1;
    }
}

/* Every --filter checked (check_filter). */
static sb_status check_filters(const results_args *a, sb_error *err)
{
    sb_config *scratch = NULL;
    sb_status st = sb_config_create(&scratch, err);
    for (int f = 0; st == SB_OK && f < a->n_filters; f++)
        st = check_filter(a->filters[f], scratch, err);
    sb_config_free(scratch);
    return st;
}

/* The error of a --status the library's list lacks: the list, and the name meant. */
/* The library's statuses as "a, b, c" in list[size]; returns how many there are. */
static int status_list(char *list, size_t size)
{
    const char *const *statuses = sb_results_statuses();
    list[0] = '\0';
    int n = 0;
    for (; statuses[n] != NULL; n++) {
        strncat(list, n > 0 ? ", " : "", size - strlen(list) - 1);
        strncat(list, statuses[n], size - strlen(list) - 1);
    }
    return n;
}

static int status_fail(const char *name)
{
    const char *const *statuses = sb_results_statuses();
    char list[160];
    const int n = status_list(list, sizeof list);
    const char *hint = sb_closest_name(name, statuses, n);
    sb_error err = {0};
    if (hint != NULL)
        sb_error_set(&err, SB_ERR_INVALID, "--status: '%s' is not one of: %s; did you mean '%s'?",
                     name, list, hint);
    else
        sb_error_set(&err, SB_ERR_INVALID, "--status: '%s' is not one of: %s", name, list);
    return sb_cli_fail("results", &err);
}

/* Parses the flags into a; returns -1 to go on, else the exit code. */
static int results_parse(int argc, char **argv, results_args *a)
{
    const char *filter_dummy = NULL;
    int curves_dummy = 0;
    /* --status takes the library's statuses (status_fail), --model the registry's models */
    const char *status_name = NULL;
    char list[160], status_help[sizeof list + 64];
    status_list(list, sizeof list);
    snprintf(status_help, sizeof status_help, "only runs with this status (%s; default: all)",
             list);
    sb_error err = {0};
    sb_config *settings = NULL;
    if (sb_run_settings_new(&settings, NULL, &err) != SB_OK)
        return sb_cli_fail("results", &err);
    sb_option opts[24] = {
        {"db", SB_OPT_STRING, &a->db_path, "PATH", SB_CLI_DB_HELP, 0},
        {"model", SB_OPT_STRING, &a->model, "NAME",
         "only runs of this model (the models command lists them, or an external model the "
         "database has; default: all)",
         0},
        {"status", SB_OPT_STRING, &status_name, "S", status_help, 0},
        {"filter", SB_OPT_STRING, &filter_dummy, "KEY=VALUE",
         "only runs whose configuration has KEY = VALUE, or any of KEY=A,B,C (repeatable: "
         "every one; default: none)",
         0},
        {"json", SB_OPT_SWITCH, &a->json, NULL, "print {\"runs\": [...]}", 0},
        {"csv", SB_OPT_SWITCH, &a->csv, NULL, "print CSV with every configuration key", 0},
        {"run", SB_OPT_STRING, &a->run, "ID",
         "this run alone, in detail: its checkpoint, log, metrics and configuration (ID: a "
         "unique prefix of the run column; default: every run)",
         0},
        {"columns", SB_OPT_STRING, &a->view.columns, "A,B,..",
         "the table's and CSV's columns: a run's fields (run, status, test_acc, checkpoint, "
         "te, ...) or configuration keys (default: run, model, the keys whose values differ "
         "between the runs shown, then the results)",
         0},
        {"sort", SB_OPT_STRING, &a->view.sort, "[-]KEY",
         "order by a column (-KEY: descending; unknown values last; default: as recorded)", 0},
        {"group", SB_OPT_STRING, &a->view.group, "A,B,..",
         "one line per distinct value of these columns (e.g. model,feat_size): n finished "
         "runs and the mean and sample standard deviation (n - 1) of test_acc, test_loss and "
         "ceiling, or of the numeric --columns (default: no grouping)",
         0},
        {"check", SB_OPT_SWITCH, &a->check, NULL,
         "run SQLite's integrity check on the database and print ok or corrupt", 0},
        /* listed for --help: a command line with --curves goes to results_curves.c */
        {"curves", SB_OPT_SWITCH, &curves_dummy, NULL,
         "the learning curves: results --curves [RUN] [--json|--csv] (every evaluation of a "
         "run, or of every run; results --curves --help)",
         0},
    };
    int n_filters = sb_cli_repeated(argc, argv, "--filter", a->filters, MAX_FILTERS);
    a->n_filters = n_filters < MAX_FILTERS ? n_filters : MAX_FILTERS;
    int n_opts = sb_options_count(opts, 24);
    sb_options_add_key(settings, "threads", NULL, opts, &n_opts);
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("results",
                          "[DB|DIR] [--model M] [--status S] [--filter K=V] [--run ID] "
                          "[--columns A,B] [--sort [-]KEY] [--group A,B] [--json|--csv]",
                          opts, n_opts, argc, argv, pos, 1, &n_pos);
    a->threads = sb_run_flag(settings, "threads");
    sb_config_free(settings);
    if (rc >= 0)
        return rc;
    a->status = SB_RUN_NONE;
    if (status_name != NULL && sb_run_status_parse(status_name, &a->status, NULL) != SB_OK)
        return status_fail(status_name);
    sb_cli_threads(a->threads);
    if (n_pos == 1)
        a->db_path = pos[0];
    a->db_path = sb_cli_results_db(a->db_path, a->db_in_folder, sizeof a->db_in_folder);
    if (n_filters > MAX_FILTERS) {
        sb_error_set(&err, SB_ERR_INVALID, "--filter is given %d times; at most %d", n_filters,
                     MAX_FILTERS);
        return sb_cli_fail("results", &err);
    }
    if (check_filters(a, &err) != SB_OK)
        return sb_cli_fail("results", &err);
    if (a->json && a->csv) {
        sb_error_set(&err, SB_ERR_INVALID, "choose one of --json and --csv");
        return sb_cli_fail("results", &err);
    }
    a->view.json = a->json;
    a->view.csv = a->csv;
    if (results_view_check(&a->view, &err) != SB_OK)
        return sb_cli_fail("results", &err);
    return -1;
}

/* Opens the database (read-only when we may not write it); returns -1 to go on, else the
 * exit code. */
static int results_open(const char *db_path, sb_results **db)
{
    sb_error err = {0};
    int rc = sb_cli_db_exists("results", db_path);
    if (rc >= 0)
        return rc;
    /* a database we may not write is shown as it is, its missing yardsticks computed but
     * not stored */
    sb_status open_st = access(db_path, W_OK) == 0 ? sb_results_open(db_path, db, &err)
                                                   : sb_results_open_readonly(db_path, db, &err);
    if (open_st != SB_OK)
        return sb_cli_fail("results", &err);
    return -1;
}

/* A model named by --model or --filter model=M must be a registry model or one of the
 * database's runs (an external model recorded through sb_results_record_external): a typo
 * is a usage error naming the registry's models, not an empty table. db NULL: there is no
 * database, so no external model either. */
static sb_status check_models(sb_results *db, const results_args *a, sb_error *err)
{
    for (int f = -1; f < a->n_filters; f++) {
        const char *listed = f < 0                                      ? a->model
                             : strncmp(a->filters[f], "model=", 6) == 0 ? a->filters[f] + 6
                                                                        : NULL;
        if (listed == NULL)
            continue;
        /* --filter model=A,B: the first name of the list that is not known */
        char name[128] = "";
        for (const char *p = listed; name[0] == '\0';) {
            const char *comma = f >= 0 ? strchr(p, ',') : NULL;
            int len = comma != NULL ? (int)(comma - p) : (int)strlen(p);
            snprintf(name, sizeof name, "%.*s", len, p);
            if (model_known(name))
                name[0] = '\0';
            if (comma == NULL)
                break;
            p = comma + 1;
        }
        if (name[0] == '\0')
            continue;
        size_t n = 0;
        sb_status st = db != NULL ? sb_results_count(db, name, &n, err) : SB_OK;
        if (st != SB_OK)
            return st;
        if (n > 0)
            continue;
        if (f >= 0)
            return unknown_filter_model(a->filters[f], name, err);
        /* the closed set's message, as for any choice flag: the registry's models, then the
         * external ones the database has (the hint is the closest of them all) */
        char list[2048] = "", external[16][32];
        const char *names[64];
        int n_names = 0, n_external = 0;
        for (int i = 0; i < sb_models_count() && n_names < 48; i++) {
            names[n_names++] = sb_models_name(i);
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i > 0 ? ", " : "",
                     sb_models_name(i));
        }
        sb_result_row row;
        size_t got = 0;
        for (size_t first = 0; db != NULL && n_external < 16; first++) {
            if (sb_results_read(db, NULL, first, &row, 1, &got, err) != SB_OK || got == 0)
                break;
            int seen = model_known(row.model);
            for (int e = 0; !seen && e < n_external; e++)
                seen = strcmp(external[e], row.model) == 0;
            if (seen)
                continue;
            snprintf(external[n_external], sizeof external[n_external], "%s", row.model);
            names[n_names++] = external[n_external];
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     n_external == 0 ? ", or in this database: " : ", ", row.model);
            n_external++;
        }
        const char *hint = sb_closest_name(name, names, n_names);
        return sb_error_set(err, SB_ERR_INVALID, "--model: '%s' is not one of: %s%s%s%s", name,
                            list, hint != NULL ? "; did you mean '" : "", hint != NULL ? hint : "",
                            hint != NULL ? "'?" : "");
    }
    return SB_OK;
}

/* --check: SQLite's integrity check; closes db and returns the exit code. */
static int results_check(sb_results *db, const char *db_path)
{
    sb_error err = {0};
    int ok = 0;
    sb_status st = sb_results_integrity_check(db, &ok, &err);
    sb_results_close(db);
    if (st != SB_OK)
        return sb_cli_fail("results", &err);
    printf("%s: %s\n", db_path, ok ? "ok" : "corrupt");
    return ok ? 0 : 1;
}

static void results_rows_free(results_rows *t)
{
    for (size_t i = 0; t->configs != NULL && i < t->n; i++)
        json_decref(t->configs[i]);
    for (size_t i = 0; t->config_json != NULL && i < t->n; i++)
        sb_string_free(t->config_json[i]);
    free(t->configs);
    free(t->config_json);
    free(t->keep);
    free(t->damaged);
    free(t->ceiling_se);
    free(t->rows);
}

/* The runs (of --model), their configurations parsed, and those shown. */
static sb_status results_select(sb_results *db, const results_args *a, results_rows *t,
                                sb_error *err)
{
    char run_hash[17] = "";
    sb_status st = a->run != NULL ? sb_results_resolve_run(db, a->run, run_hash, err) : SB_OK;
    if (st != SB_OK)
        return st;
    size_t n = 0;
    st = sb_results_count(db, a->model, &n, err);
    if (st != SB_OK)
        return st;
    t->rows = calloc(n > 0 ? n : 1, sizeof *t->rows);
    t->config_json = calloc(n > 0 ? n : 1, sizeof *t->config_json);
    t->configs = calloc(n > 0 ? n : 1, sizeof *t->configs);
    t->keep = calloc(n > 0 ? n : 1, sizeof *t->keep);
    t->damaged = calloc(n > 0 ? n : 1, sizeof *t->damaged);
    t->ceiling_se = malloc((n > 0 ? n : 1) * sizeof *t->ceiling_se);
    if (t->rows == NULL || t->config_json == NULL || t->configs == NULL || t->keep == NULL ||
        t->damaged == NULL || t->ceiling_se == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %zu runs", n);
    if ((st = sb_results_read(db, a->model, 0, t->rows, n, &t->n, err)) != SB_OK)
        return st;
    n = t->n;
    for (size_t i = 0; i < n; i++) {
        const sb_result_row *r = &t->rows[i];
        st = sb_results_config_json(db, r->run_hash, &t->config_json[i], err);
        if (st != SB_OK)
            return st;
        /* shown, sorted and grouped as trained (grammar_scale resolved); --json prints the
         * stored text */
        char *effective = sb_experiment_effective_config(t->config_json[i]);
        t->configs[i] = json_loads(effective != NULL           ? effective
                                   : t->config_json[i] != NULL ? t->config_json[i]
                                                               : "{}",
                                   0, NULL);
        free(effective);
        if (!json_is_object(t->configs[i])) { /* damaged: listed and marked, never dropped */
            json_decref(t->configs[i]);
            sb_string_free(t->config_json[i]);
            t->config_json[i] = NULL;
            t->configs[i] = json_object();
            t->damaged[i] = 1;
            if (t->configs[i] == NULL)
                return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %zu runs", n);
        }
        t->keep[i] = a->status == SB_RUN_NONE || r->status == a->status;
        for (int f = 0; t->keep[i] && f < a->n_filters; f++)
            t->keep[i] =
                !t->damaged[i] && sb_results_config_matches(t->config_json[i], a->filters[f]);
        if (run_hash[0] != '\0')
            t->keep[i] = strcmp(r->run_hash, run_hash) == 0;
        t->kept += t->keep[i] != 0;
        t->n_damaged += t->keep[i] && t->damaged[i];
        t->ceiling_se[i] = (double)NAN;
    }
    return SB_OK;
}

/* The yardsticks of the finished runs shown, backfilled where missing, and the standard
 * error of their ceiling (from the cache); a run that fails is counted, not fatal. */
static void results_backfill(sb_results *db, int threads, results_rows *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!t->keep[i] || t->rows[i].status != SB_RUN_FINISHED)
            continue;
        sb_error e = {0};
        if (sb_results_backfill(db, &t->rows[i], threads, &t->ceiling_se[i], &e) != SB_OK &&
            t->n_unfilled++ == 0)
            t->fill_err = e;
    }
}

int sb_cmd_results(int argc, char **argv)
{
    if (sb_cli_results_wants_curves(argc, argv)) /* the learning curves: results_curves.c */
        return sb_cmd_results_curves(argc, argv);
    if (sb_cli_results_wants_merge(argc, argv)) /* shard databases into one: results_merge.c */
        return sb_cmd_results_merge(argc, argv);
    results_args a = {.db_path = "results/" SB_RESULTS_DB_NAME};
    int rc = results_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    sb_results *db = NULL;
    sb_error err = {0};
    if (access(a.db_path, F_OK) != 0 && check_models(NULL, &a, &err) != SB_OK)
        return sb_cli_fail("results", &err); /* a usage error before the missing database */
    if ((rc = results_open(a.db_path, &db)) >= 0)
        return rc;
    if (a.check)
        return results_check(db, a.db_path);

    results_rows t = {0};
    if (check_models(db, &a, &err) != SB_OK || results_select(db, &a, &t, &err) != SB_OK) {
        results_rows_free(&t);
        sb_results_close(db);
        return sb_cli_fail("results", &err);
    }
    results_backfill(db, a.threads, &t);
    sb_status st = SB_OK;
    if (a.run != NULL && !a.json && !a.csv) {
        for (size_t i = 0; i < t.n; i++)
            if (t.keep[i])
                results_view_print_run(&t, i, a.db_path);
    } else {
        st = results_view_print(&t, &a.view, &err);
    }
    if (st != SB_OK) {
        results_rows_free(&t);
        sb_results_close(db);
        return sb_cli_fail("results", &err);
    }
    if (t.n_unfilled > 0)
        fprintf(stderr,
                "selectivbench results: warning: the yardsticks of %d finished run%s could not "
                "be computed (shown empty): %s\n",
                t.n_unfilled, t.n_unfilled == 1 ? "" : "s", t.fill_err.msg);
    results_rows_free(&t);
    sb_results_close(db);
    return 0;
}

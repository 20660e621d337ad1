/*
 * cmd_results.c - `selectivbench results`: the runs of a results database, as a table,
 * JSON ({"runs": [...]}) or CSV for pandas; filtered by model, status or any
 * configuration key. Every finished run is shown with its yardsticks: those missing (runs
 * recorded before they existed) are computed from the run's stored configuration and
 * written back, unless the database is read-only (sb_results_backfill).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "selectivbench/selectivbench.h"

#define MAX_FILTERS 16

/* Whether a run's configuration has key == value (numbers compared as numbers). */
static int config_matches(json_t *config, const char *filter)
{
    const char *eq = strchr(filter, '=');
    if (eq == NULL)
        return 0;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - filter), filter);
    const char *want = eq + 1;
    json_t *v = json_object_get(config, key);
    if (v == NULL)
        return 0;
    if (json_is_string(v))
        return strcmp(json_string_value(v), want) == 0;
    if (json_is_number(v)) {
        char *end;
        double w = strtod(want, &end);
        return *end == '\0' && json_number_value(v) == w;
    }
    if (json_is_boolean(v))
        return (json_is_true(v) && (strcmp(want, "True") == 0 || strcmp(want, "true") == 0 ||
                                    strcmp(want, "1") == 0)) ||
               (!json_is_true(v) && (strcmp(want, "False") == 0 || strcmp(want, "false") == 0 ||
                                     strcmp(want, "0") == 0));
    if (json_is_null(v))
        return strcmp(want, "null") == 0 || strcmp(want, "None") == 0;
    return 0;
}

static void print_number_or_empty(double v)
{
    if (isfinite(v)) {
        char buf[40];
        sb_jw_format_double(buf, sizeof buf, v);
        fputs(buf, stdout);
    }
}

/* Effective memory as text: ">32" beyond the k = 32 observer, empty when unknown. */
static void format_memory(char *buf, size_t size, double v)
{
    if (isnan(v))
        buf[0] = '\0';
    else if (isinf(v))
        snprintf(buf, size, ">32");
    else
        sb_jw_format_double(buf, size, v);
}

/* configuration keys that are already fixed columns */
static int fixed_column(const char *key)
{
    return strcmp(key, "model") == 0 || strcmp(key, "protocol") == 0;
}

static void csv_value(json_t *v)
{
    if (v == NULL || json_is_null(v))
        return;
    if (json_is_string(v))
        printf("%s", json_string_value(v));
    else if (json_is_integer(v))
        printf("%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        print_number_or_empty(json_real_value(v));
    else if (json_is_boolean(v))
        printf("%s", json_is_true(v) ? "True" : "False");
}

/* The command line of `results`. */
typedef struct results_args {
    const char *db_path, *model, *status;
    char db_in_folder[4096]; /* DIR/selectivbench.db when the path given is a folder */
    int json, csv, check, threads;
    const char *filters[MAX_FILTERS]; /* KEY=VALUE, each --filter in order */
    int n_filters;
} results_args;

/* The runs of the database and which of them are shown. */
typedef struct results_rows {
    sb_result_row *rows;
    size_t n;
    char **config_json; /* [n] each run's configuration as stored (NULL: none) */
    json_t **configs;   /* [n] each run's configuration, parsed (NULL: unreadable) */
    int *keep;          /* [n] shown: passes --status and every --filter */
    size_t kept;
    double *ceiling_se; /* [n] standard error of the ceiling, NaN where unknown */
    int n_unfilled;     /* finished runs shown whose yardsticks could not be computed */
    sb_error fill_err;  /* why, for the first of them */
} results_rows;

/* The registry's model names, NULL-terminated (malloc'd; the names are the registry's). */
static const char **model_names(void)
{
    int n = sb_models_count();
    const char **names = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; names != NULL && i < n; i++)
        names[i] = sb_models_name(i);
    return names;
}

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
                            "(selectivbench train --help lists them)", filter, key, hint);
    return sb_error_set(err, SB_ERR_INVALID,
                        "--filter '%s': '%s' is not a configuration key (selectivbench train "
                        "--help lists them)", filter, key);
}

/* The --filter error for a model the registry does not have, with the closest model. */
static sb_status unknown_filter_model(const char *filter, const char *model, sb_error *err)
{
    const char *hint = sb_cli_closest_model(model);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--filter '%s': unknown model '%s'; did you mean '%s'? (selectivbench "
                            "models lists them)", filter, model, hint);
    return sb_error_set(err, SB_ERR_INVALID,
                        "--filter '%s': unknown model '%s' (selectivbench models lists them)",
                        filter, model);
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
    if (strcmp(key, "model") == 0 && !model_known(eq + 1))
        return unknown_filter_model(filter, eq + 1, err);
    sb_error why = {0};
    if (sb_config_set_key(scratch, key, eq + 1, &why) != SB_OK)
        return sb_error_set(err, SB_ERR_INVALID, "--filter '%s': %s", filter, why.msg);
    return SB_OK;
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


/* Parses the flags into a; returns -1 to go on, else the exit code. */
static int results_parse(int argc, char **argv, results_args *a)
{
    const char *filter_dummy = NULL;
    /* --status and --model take a closed set: the library's statuses, the registry's models */
    const char *const *statuses = sb_results_statuses();
    const char **models = model_names();
    int status_index = -1, model_index = -1;
    char status_help[160] = "only runs with this status (";
    for (int i = 0; statuses[i] != NULL; i++) {
        strncat(status_help, statuses[i], sizeof status_help - strlen(status_help) - 1);
        strncat(status_help, statuses[i + 1] != NULL ? ", " : "; default: all)",
                sizeof status_help - strlen(status_help) - 1);
    }
    sb_error err = {0};
    if (models == NULL) {
        sb_error_set(&err, SB_ERR_NOMEM, "out of memory");
        return sb_cli_fail("results", &err);
    }
    sb_option opts[] = {
        {"db", SB_OPT_STRING, &a->db_path, 0, 0, NULL, "PATH",
         "results database, or a results folder DIR for DIR/" SB_RESULTS_DB_NAME
         " (default results/" SB_RESULTS_DB_NAME ")", 0},
        {"model", SB_OPT_CHOICE, &model_index, 0, 0, models, "NAME",
         "only runs of this model (selectivbench models lists them; default: all)", 0},
        {"status", SB_OPT_CHOICE, &status_index, 0, 0, statuses, "S", status_help, 0},
        {"filter", SB_OPT_STRING, &filter_dummy, 0, 0, NULL, "KEY=VALUE",
         "only runs whose configuration has KEY = VALUE (repeatable; default: none)", 0},
        {"json", SB_OPT_SWITCH, &a->json, 0, 1, NULL, NULL, "print {\"runs\": [...]}", 0},
        {"csv", SB_OPT_SWITCH, &a->csv, 0, 1, NULL, NULL, "print CSV with every configuration key",
         0},
        {"check", SB_OPT_SWITCH, &a->check, 0, 1, NULL, NULL,
         "run SQLite's integrity check on the database and print ok or corrupt", 0},
        {"threads", SB_OPT_INT, &a->threads, 0, 1024, NULL, "N", "threads (default: all cores)", 0},
    };
    /* the option table keeps one value per flag: the repeatable --filter is collected here */
    int n_filters = 0;
    for (int i = 2; i < argc; i++) {
        const char *f = strcmp(argv[i], "--filter") == 0 && i + 1 < argc ? argv[i + 1]
                        : strncmp(argv[i], "--filter=", 9) == 0          ? argv[i] + 9
                                                                          : NULL;
        if (f != NULL && n_filters++ < MAX_FILTERS)
            a->filters[a->n_filters++] = f;
    }
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("results", "[DB|DIR] [--model M] [--status S] [--filter K=V] [--json|--csv]",
                          opts, (int)(sizeof opts / sizeof *opts), argc, argv, pos, 1, &n_pos);
    /* the chosen names are the library's own strings: they outlive the list */
    a->status = status_index >= 0 ? statuses[status_index] : NULL;
    a->model = model_index >= 0 ? models[model_index] : NULL;
    free(models);
    if (rc >= 0)
        return rc;
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
    return -1;
}

/* Opens the database (read-only when we may not write it); returns -1 to go on, else the
 * exit code. */
static int results_open(const char *db_path, sb_results **db)
{
    sb_error err = {0};
    FILE *probe = fopen(db_path, "rb");
    if (probe == NULL) {
        sb_error_set(&err, SB_ERR_IO, "no results database at '%s' (train or sweep first, or "
                                      "give --db PATH)", db_path);
        return sb_cli_fail("results", &err);
    }
    fclose(probe);
    /* a database we may not write is shown as it is, its missing yardsticks computed but
     * not stored */
    sb_status open_st = access(db_path, W_OK) == 0 ? sb_results_open(db_path, db, &err)
                                                    : sb_results_open_readonly(db_path, db, &err);
    if (open_st != SB_OK)
        return sb_cli_fail("results", &err);
    return -1;
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
    free(t->ceiling_se);
    free(t->rows);
}

/* The runs (of --model), their configurations parsed, and those shown. */
static sb_status results_select(sb_results *db, const results_args *a, results_rows *t,
                                sb_error *err)
{
    size_t n = 0;
    sb_status st = sb_results_count(db, a->model, &n, err);
    if (st != SB_OK)
        return st;
    t->rows = calloc(n > 0 ? n : 1, sizeof *t->rows);
    t->config_json = calloc(n > 0 ? n : 1, sizeof *t->config_json);
    t->configs = calloc(n > 0 ? n : 1, sizeof *t->configs);
    t->keep = calloc(n > 0 ? n : 1, sizeof *t->keep);
    t->ceiling_se = malloc((n > 0 ? n : 1) * sizeof *t->ceiling_se);
    if (t->rows == NULL || t->config_json == NULL || t->configs == NULL || t->keep == NULL ||
        t->ceiling_se == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %zu runs", n);
    if ((st = sb_results_read(db, a->model, 0, t->rows, n, &t->n, err)) != SB_OK)
        return st;
    n = t->n;
    for (size_t i = 0; i < n; i++) {
        const sb_result_row *r = &t->rows[i];
        st = sb_results_config_json(db, r->run_hash, &t->config_json[i], err);
        if (st != SB_OK)
            return st;
        t->configs[i] = json_loads(t->config_json[i] != NULL ? t->config_json[i] : "{}", 0, NULL);
        t->keep[i] = t->configs[i] != NULL && (a->status == NULL || strcmp(r->status, a->status) == 0);
        for (int f = 0; t->keep[i] && f < a->n_filters; f++)
            t->keep[i] = config_matches(t->configs[i], a->filters[f]);
        t->kept += t->keep[i] != 0;
        t->ceiling_se[i] = (double)NAN;
    }
    return SB_OK;
}

/* The yardsticks of the finished runs shown, backfilled where missing, and the standard
 * error of their ceiling (from the cache); a run that fails is counted, not fatal. */
static void results_backfill(sb_results *db, int threads, results_rows *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!t->keep[i] || strcmp(t->rows[i].status, "finished") != 0)
            continue;
        sb_error e = {0};
        if (sb_results_backfill(db, &t->rows[i], threads, &t->ceiling_se[i], &e) != SB_OK &&
            t->n_unfilled++ == 0)
            t->fill_err = e;
    }
}

/* --json: one run as an object. */
static void print_json_run(sb_jw *j, const sb_result_row *r, const char *config_json,
                           double ceiling_se)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "hash");
    sb_jw_string(j, r->run_hash);
    sb_jw_key(j, "status");
    sb_jw_string(j, r->status);
    sb_jw_key(j, "model");
    sb_jw_string(j, r->model);
    sb_jw_key(j, "protocol");
    sb_jw_string(j, r->protocol);
    if (r->reason[0] != '\0') {
        sb_jw_key(j, "reason");
        sb_jw_string(j, r->reason);
    }
    /* the configuration as an object (already canonical JSON text) */
    sb_jw_key(j, "config");
    sb_jw_raw(j, config_json != NULL ? config_json : "{}");
    sb_jw_key(j, "params");
    if (r->params >= 0)
        sb_jw_int(j, r->params);
    else
        sb_jw_null(j);
    const char *mk[6] = {"test_acc", "test_loss", "train_acc", "train_loss", "wall_s",
                         "tokens_per_s"};
    double mv[6] = {r->test_acc, r->test_loss, r->train_acc,
                    r->train_loss, r->wall_s, r->tokens_per_s};
    for (int k = 0; k < 6; k++) {
        sb_jw_key(j, mk[k]);
        sb_jw_double(j, mv[k]);
    }
    sb_jw_key(j, "ceiling");
    sb_jw_double(j, r->ceiling);
    sb_jw_key(j, "ceiling_se");
    sb_jw_double(j, ceiling_se);
    sb_jw_key(j, "effective_memory");
    if (isinf(r->effective_memory))
        sb_jw_string(j, ">32");
    else
        sb_jw_double(j, r->effective_memory);
    sb_jw_key(j, "flops_per_token");
    sb_jw_double(j, r->flops_per_token);
    sb_jw_key(j, "state_size");
    if (r->state_size >= 0)
        sb_jw_int(j, r->state_size);
    else
        sb_jw_null(j);
    sb_jw_key(j, "finished_at");
    if (r->finished_at[0] != '\0')
        sb_jw_string(j, r->finished_at);
    else
        sb_jw_null(j);
    sb_jw_key(j, "attempts");
    sb_jw_int(j, r->attempts);
    sb_jw_object_end(j);
}

/* --json: {"runs": [...]} of the runs shown. Errors: SB_ERR_NOMEM. */
static sb_status print_json(const results_rows *t, sb_error *err)
{
    sb_jw *j = sb_jw_open(stdout, 0);
    if (j == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    sb_jw_object_begin(j);
    sb_jw_key(j, "runs");
    sb_jw_array_begin(j);
    for (size_t i = 0; i < t->n; i++)
        if (t->keep[i])
            print_json_run(j, &t->rows[i], t->config_json[i], t->ceiling_se[i]);
    sb_jw_array_end(j);
    sb_jw_object_end(j);
    sb_jw_close(j);
    printf("\n");
    return SB_OK;
}

/* --csv: one run's line; keys: the configuration whose keys are the columns (or NULL). */
static void print_csv_run(const sb_result_row *r, json_t *config, double ceiling_se, json_t *keys)
{
    printf("%s,%s,%s,%s,", r->run_hash, r->status, r->model,
           r->protocol);
    if (r->params >= 0)
        printf("%lld", (long long)r->params);
    double mv[6] = {r->test_acc, r->test_loss, r->train_acc,
                    r->train_loss, r->wall_s, r->tokens_per_s};
    for (int k = 0; k < 6; k++) {
        printf(",");
        print_number_or_empty(mv[k]);
    }
    char mem[40];
    format_memory(mem, sizeof mem, r->effective_memory);
    printf(",");
    print_number_or_empty(r->ceiling);
    printf(",%s,", mem);
    print_number_or_empty(ceiling_se);
    const char *key;
    json_t *v;
    if (keys != NULL)
        json_object_foreach(keys, key, v) {
            if (fixed_column(key))
                continue;
            printf(",");
            csv_value(json_object_get(config, key));
        }
    printf("\n");
}

/* --csv: a header line, then one line per run shown. */
static void print_csv(const results_rows *t)
{
    /* columns: fixed ones, then the configuration keys of the first kept run */
    json_t *keys = NULL;
    for (size_t i = 0; i < t->n && keys == NULL; i++)
        if (t->keep[i])
            keys = t->configs[i];
    printf("hash,status,model,protocol,params,test_acc,test_loss,train_acc,train_loss,wall_s,"
           "tokens_per_s,ceiling,effective_memory,ceiling_se");
    const char *key;
    json_t *v;
    if (keys != NULL)
        json_object_foreach(keys, key, v)
            if (!fixed_column(key))
                printf(",%s", key);
    printf("\n");
    for (size_t i = 0; i < t->n; i++)
        if (t->keep[i])
            print_csv_run(&t->rows[i], t->configs[i], t->ceiling_se[i], keys);
}

/* The table: one run's line, and its reason when it did not finish. */
static void print_table_run(const sb_result_row *r, json_t *c)
{
    json_t *warm = json_object_get(c, "warmup_steps");
    char warm_s[16] = "5%";
    if (json_is_integer(warm))
        snprintf(warm_s, sizeof warm_s, "%lld", (long long)json_integer_value(warm));
    /* yardsticks: "-" where unknown; effective memory in elements, ">32" beyond */
    char ceil_s[16] = "-", mem_s[16] = "-";
    if (!isnan(r->ceiling))
        snprintf(ceil_s, sizeof ceil_s, "%.4f", r->ceiling);
    if (isinf(r->effective_memory))
        snprintf(mem_s, sizeof mem_s, ">32");
    else if (!isnan(r->effective_memory))
        snprintf(mem_s, sizeof mem_s, "%.2f", r->effective_memory);
    printf("%-16s %-20s %6lld %4lld %8g %6s %5lld %-9s %9.4f %9.4f %8s %7s %10lld %8.1f\n",
           r->run_hash, r->model[0] != '\0' ? r->model : "?",
           (long long)json_integer_value(json_object_get(c, "feat_size")),
           (long long)json_integer_value(json_object_get(c, "layers")),
           json_number_value(json_object_get(c, "lr")), warm_s,
           (long long)json_integer_value(json_object_get(c, "seed")), r->status,
           r->test_acc, r->test_loss, ceil_s, mem_s, (long long)r->params,
           r->wall_s);
    if (r->reason[0] != '\0' && strcmp(r->status, "finished") != 0)
        printf("    %s\n", r->reason);
}

/* The default output: a header, one line per run shown, the count. */
static void print_table(const results_rows *t)
{
    printf("%-16s %-20s %6s %4s %8s %6s %5s %-9s %9s %9s %8s %7s %10s %8s\n", "hash", "model",
           "width", "L", "lr", "warmup", "seed", "status", "test acc", "test loss", "ceiling",
           "eff mem", "params", "wall s");
    for (size_t i = 0; i < t->n; i++)
        if (t->keep[i])
            print_table_run(&t->rows[i], t->configs[i]);
    printf("%zu of %zu runs\n", t->kept, t->n);
}

int sb_cmd_results(int argc, char **argv)
{
    results_args a = {.db_path = "results/" SB_RESULTS_DB_NAME};
    int rc = results_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    sb_results *db = NULL;
    if ((rc = results_open(a.db_path, &db)) >= 0)
        return rc;
    if (a.check)
        return results_check(db, a.db_path);

    results_rows t = {0};
    sb_error err = {0};
    if (results_select(db, &a, &t, &err) != SB_OK) {
        results_rows_free(&t);
        sb_results_close(db);
        return sb_cli_fail("results", &err);
    }
    results_backfill(db, a.threads, &t);
    if (a.json) {
        if (print_json(&t, &err) != SB_OK) {
            results_rows_free(&t);
            sb_results_close(db);
            return sb_cli_fail("results", &err);
        }
    } else if (a.csv)
        print_csv(&t);
    else
        print_table(&t);
    if (t.n_unfilled > 0)
        fprintf(stderr,
                "selectivbench results: warning: the yardsticks of %d finished run%s could not "
                "be computed (shown empty): %s\n",
                t.n_unfilled, t.n_unfilled == 1 ? "" : "s", t.fill_err.msg);
    results_rows_free(&t);
    sb_results_close(db);
    return 0;
}

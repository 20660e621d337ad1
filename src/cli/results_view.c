/* results_view.c - the runs `results` shows, as columns (see results_view.h). */
#include "cli/results_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"

#define MAX_LIST 32 /* names in one --columns or --group */

/* ---- columns (the library's: sb_run_column_*) -------------------------------------------- */

/* A column is the library's column number (sb_run_column_find). */
typedef int column;

static sb_run_column_info column_info(column c)
{
    sb_run_column_info info = {"?", "?", "?", -1, 0};
    sb_run_column_get(c, &info);
    return info;
}

static int column_find(const char *name, column *out)
{
    *out = sb_run_column_find(name);
    return *out >= 0;
}

/* The column of a run's field by name (a name of the library's table). */
static column field(const char *name)
{
    return sb_run_column_find(name);
}

static const char *column_name(column c)
{
    return column_info(c).name;
}

static const char *column_title(column c)
{
    return column_info(c).title;
}

static const char *column_csv(column c)
{
    return column_info(c).csv;
}

static int column_numeric(column c)
{
    return column_info(c).numeric;
}

/* The error for a name that is no column: the closest name and the run's fields. */
static sb_status unknown_column(const char *flag, const char *name, sb_error *err)
{
    const char *names[512];
    int n = 0;
    char known[400] = "";
    for (int c = 0; c < sb_run_column_count() && n < (int)(sizeof names / sizeof *names); c++) {
        sb_run_column_info info;
        if (!sb_run_column_get(c, &info) ||
            (c >= sb_run_column_fields() && sb_run_column_find(info.name) != c))
            continue; /* not stored with a run, or a key that is a field (model) */
        names[n++] = info.name;
        if (c < sb_run_column_fields())
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", c > 0 ? ", " : "",
                     info.name);
    }
    const char *hint = sb_closest_name(name, names, n);
    char did_you_mean[96] = "";
    if (hint != NULL)
        snprintf(did_you_mean, sizeof did_you_mean, "; did you mean '%s'?", hint);
    return sb_error_set(err, SB_ERR_INVALID,
                        "--%s: no column '%s'%s (the columns: %s, and every configuration key "
                        "that `%s train --help` lists)",
                        flag, name, did_you_mean, known, sb_cli_program());
}

/* Splits "a,b,c" into columns (at most max); errors name the flag. */
static sb_status parse_columns(const char *flag, const char *text, column *out, int max, int *n,
                               sb_error *err)
{
    *n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (*n == max)
            return sb_error_set(err, SB_ERR_INVALID, "--%s names more than %d columns", flag, max);
        if (!column_find(tok, &out[*n]))
            return unknown_column(flag, tok, err);
        (*n)++;
    }
    if (*n == 0)
        return sb_error_set(err, SB_ERR_INVALID, "--%s: name at least one column (a,b,c)", flag);
    return SB_OK;
}

/* --sort's column and direction ("-KEY": descending). */
static sb_status parse_sort(const char *text, column *c, int *descending, sb_error *err)
{
    *descending = text[0] == '-';
    const char *name = text + (*descending ? 1 : 0);
    if (!column_find(name, c))
        return unknown_column("sort", name, err);
    return SB_OK;
}

sb_status results_view_check(const results_view_options *o, sb_error *err)
{
    column cols[MAX_LIST];
    int n = 0, descending = 0;
    sb_status st = SB_OK;
    if (o->columns != NULL)
        st = parse_columns("columns", o->columns, cols, MAX_LIST, &n, err);
    if (st == SB_OK && o->group != NULL)
        st = parse_columns("group", o->group, cols, MAX_LIST, &n, err);
    if (st == SB_OK && o->sort != NULL)
        st = parse_sort(o->sort, &cols[0], &descending, err);
    return st;
}

/* ---- cells ---------------------------------------------------------------------------------- */

/* What the view keeps while it prints: the library's table of the runs. */
typedef struct view {
    const results_rows *t;
    sb_run_table *table;
} view;

/* A number as the exact text of CSV and JSON ("" when unknown). */
static void number_text(double x, char *buf, size_t size)
{
    if (isfinite(x))
        sb_jw_format_double(buf, size, x);
    else
        buf[0] = '\0';
}

/* Run i's value in column c: its exact text (as CSV writes it; "" when unknown) and its
 * number (NaN when it is not one). */
static double cell(view *v, size_t i, column c, char *buf, size_t size)
{
    return sb_run_table_value(v->table, i, c, buf, size);
}

/* Run i's value in column c as the table shows it ("-" when unknown). */
static void cell_table(view *v, size_t i, column c, char *buf, size_t size)
{
    double x = cell(v, i, c, buf, size);
    int digits = column_info(c).digits;
    if (digits == SB_RUN_COLUMN_G3 && isfinite(x))
        snprintf(buf, size, "%.3g", x);
    else if (digits >= 0 && isfinite(x))
        snprintf(buf, size, "%.*f", digits, x);
    if (buf[0] == '\0')
        snprintf(buf, size, "-");
}

/* ---- which runs, in which order -------------------------------------------------------- */

/* The indices of the kept runs, in database order; *n receives how many. */
static size_t *kept_runs(const results_rows *t, size_t *n)
{
    size_t *idx = malloc((t->n > 0 ? t->n : 1) * sizeof *idx);
    *n = 0;
    for (size_t i = 0; idx != NULL && i < t->n; i++)
        if (t->keep[i])
            idx[(*n)++] = i;
    return idx;
}

/* One value to sort by: a number when it is one, else text; unknown ones go last. */
typedef struct sort_item {
    size_t index; /* the run (or group) */
    size_t order; /* its place before sorting: ties keep it */
    double number;
    char text[256];
} sort_item;

static int sort_descending; /* qsort has no context argument: the direction of this sort */

static int sort_compare(const void *pa, const void *pb)
{
    const sort_item *a = pa, *b = pb;
    int a_known = a->text[0] != '\0', b_known = b->text[0] != '\0';
    if (a_known != b_known)
        return a_known ? -1 : 1; /* unknown last, in either direction */
    int c = 0;
    if (!isnan(a->number) && !isnan(b->number))
        c = (a->number > b->number) - (a->number < b->number);
    else if (a_known)
        c = strcmp(a->text, b->text);
    if (sort_descending)
        c = -c;
    if (c == 0)
        c = (a->order > b->order) - (a->order < b->order);
    return c;
}

/* Sorts items[n] (their index fields) and writes the indices back in their new order. */
static void sort_indices(sort_item *items, size_t n, int descending, size_t *out)
{
    sort_descending = descending;
    qsort(items, n, sizeof *items, sort_compare);
    for (size_t k = 0; k < n; k++)
        out[k] = items[k].index;
}

/* Sorts the runs idx[n] by column c. Errors: SB_ERR_NOMEM. */
static sb_status sort_runs(view *v, size_t *idx, size_t n, column c, int descending, sb_error *err)
{
    sort_item *items = malloc((n > 0 ? n : 1) * sizeof *items);
    if (items == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory sorting %zu runs", n);
    for (size_t k = 0; k < n; k++) {
        items[k].index = idx[k];
        items[k].order = k;
        items[k].number = cell(v, idx[k], c, items[k].text, sizeof items[k].text);
    }
    sort_indices(items, n, descending, idx);
    free(items);
    return SB_OK;
}

/* ---- the columns a set of runs varies ------------------------------------------------------ */

/* The keys that make a grammar: when one varies, the table shows each run's TE. */
static int grammar_key(const char *name)
{
    static const char *const keys[] = {
        "vocab", "amb", "amb_depth", "grammar_scale", "transition_density", NULL};
    for (int i = 0; keys[i] != NULL; i++)
        if (strcmp(name, keys[i]) == 0)
            return 1;
    return 0;
}

/* The default columns: the run, its model, every stored key whose value differs between
 * the runs idx[n] (and TE when the grammar does), then status and results. */
static int default_columns(view *v, const size_t *idx, size_t n, column *out, int max)
{
    int k = 0, grammar_varies = 0;
    out[k++] = field("run");
    out[k++] = field("model");
    /* the library's rule, as the dashboard's (sb_experiment_varied_keys) */
    const char **texts = malloc((n > 0 ? n : 1) * sizeof *texts);
    unsigned char *varies = calloc((size_t)sb_config_key_count(), 1);
    if (texts != NULL && varies != NULL) {
        for (size_t r = 0; r < n; r++)
            texts[r] = v->t->config_json[idx[r]];
        sb_experiment_varied_keys(texts, n, varies);
    }
    for (int key = 0; varies != NULL && key < sb_config_key_count() && k < max - 8; key++) {
        if (!varies[key])
            continue;
        grammar_varies |= grammar_key(sb_config_key_name(key));
        out[k++] = sb_run_column_fields() + key;
    }
    free(texts);
    free(varies);
    if (grammar_varies)
        out[k++] = field("te");
    static const char *const results[] = {"status",  "valid_acc",        "test_acc", "test_loss",
                                          "ceiling", "effective_memory", "params",   "wall_s"};
    for (size_t f = 0; f < sizeof results / sizeof *results; f++)
        out[k++] = field(results[f]);
    return k;
}

/* ---- one line per run: table, CSV ----------------------------------------------------------- */

#define MAX_COLUMNS 300 /* the fields and every key */

static void print_table_runs(view *v, const size_t *idx, size_t n, const column *cols, int n_cols)
{
    int width[MAX_COLUMNS];
    char buf[4096];
    for (int c = 0; c < n_cols; c++) {
        width[c] = (int)strlen(column_title(cols[c]));
        for (size_t k = 0; k < n; k++) {
            cell_table(v, idx[k], cols[c], buf, sizeof buf);
            if ((int)strlen(buf) > width[c])
                width[c] = (int)strlen(buf);
        }
    }
    for (int c = 0; c < n_cols; c++)
        printf("%s%*s", c > 0 ? "  " : "", column_numeric(cols[c]) ? width[c] : -width[c],
               column_title(cols[c]));
    printf("\n");
    for (size_t k = 0; k < n; k++) {
        for (int c = 0; c < n_cols; c++) {
            cell_table(v, idx[k], cols[c], buf, sizeof buf);
            printf("%s%*s", c > 0 ? "  " : "", column_numeric(cols[c]) ? width[c] : -width[c], buf);
        }
        printf("\n");
        const sb_result_row *r = &v->t->rows[idx[k]];
        if (r->reason[0] != '\0' && r->status != SB_RUN_FINISHED)
            printf("    %s\n", r->reason);
        if (v->t->damaged[idx[k]])
            printf("    damaged: %s\n", RESULTS_DAMAGE);
    }
    printf("%zu of %zu runs", n, v->t->n);
    if (v->t->n_damaged > 0)
        printf(" (%zu with a damaged configuration: its keys are unknown)", v->t->n_damaged);
    printf("\n");
}

/* A CSV field, quoted when it holds a comma, a quote or a line break. */
static void csv_field(const char *text)
{
    if (strpbrk(text, ",\"\n\r") == NULL) {
        fputs(text, stdout);
        return;
    }
    putchar('"');
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == '"')
            putchar('"');
        putchar(*c);
    }
    putchar('"');
}

/* CSV's columns without --columns: the run's fields, then every stored key (the keys of
 * the first run's stored configuration, model and protocol being fields already). */
static int csv_default_columns(const results_rows *t, const size_t *idx, size_t n, column *out,
                               int max)
{
    static const char *const csv_fields[] = {"run",
                                             "status",
                                             "model",
                                             "protocol",
                                             "params",
                                             "test_acc",
                                             "test_loss",
                                             "train_acc",
                                             "train_loss",
                                             "wall_s",
                                             "tokens_per_s",
                                             "ceiling",
                                             "effective_memory",
                                             "ceiling_se",
                                             "checkpoint",
                                             "valid_acc",
                                             "valid_loss"};
    int k = 0;
    for (size_t f = 0; f < sizeof csv_fields / sizeof *csv_fields; f++)
        out[k++] = field(csv_fields[f]);
    json_t *first = n > 0 ? t->configs[idx[0]] : NULL;
    const char *key;
    json_t *value;
    if (first != NULL)
        json_object_foreach (first, key, value) {
            int c = sb_run_column_find(key); /* model and protocol: fields already */
            if (c < sb_run_column_fields() || k == max)
                continue;
            out[k++] = c;
        }
    return k;
}

static void print_csv_runs(view *v, const size_t *idx, size_t n, const column *cols, int n_cols)
{
    char buf[4096];
    for (int c = 0; c < n_cols; c++) {
        printf("%s", c > 0 ? "," : "");
        csv_field(column_csv(cols[c]));
    }
    /* a last column, only when a run shown is damaged: which ones, and why */
    int any_damaged = v->t->n_damaged > 0;
    if (any_damaged)
        printf(",damaged");
    printf("\n");
    for (size_t k = 0; k < n; k++) {
        for (int c = 0; c < n_cols; c++) {
            cell(v, idx[k], cols[c], buf, sizeof buf);
            printf("%s", c > 0 ? "," : "");
            csv_field(buf);
        }
        if (any_damaged) {
            printf(",");
            csv_field(v->t->damaged[idx[k]] ? RESULTS_DAMAGE : "");
        }
        printf("\n");
    }
}

/* ---- one object per run: JSON -------------------------------------------------------------- */

static void json_number_or_null(sb_jw *j, double x)
{
    if (isfinite(x))
        sb_jw_double(j, x);
    else
        sb_jw_null(j);
}

/* "key": s, or "key": null when s is empty (a NULL column). */
static void json_text_or_null(sb_jw *j, const char *key, const char *s)
{
    sb_jw_key(j, key);
    if (s[0] != '\0')
        sb_jw_string(j, s);
    else
        sb_jw_null(j);
}

static void print_json_run(sb_jw *j, const sb_result_row *r, const char *config_json, int damaged,
                           double ceiling_se)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "hash"); /* the run id */
    sb_jw_string(j, r->run_hash);
    sb_jw_key(j, "status");
    sb_jw_string(j, sb_run_status_name(r->status));
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
    if (damaged) {
        sb_jw_null(j);
        sb_jw_key(j, "damaged");
        sb_jw_string(j, RESULTS_DAMAGE);
    } else {
        sb_jw_raw(j, config_json != NULL ? config_json : "{}");
    }
    sb_cli_json_count(j, "params", r->params);
    const char *mk[8] = {"test_acc", "test_loss",    "train_acc", "train_loss",
                         "wall_s",   "tokens_per_s", "valid_acc", "valid_loss"};
    double mv[8] = {r->test_acc, r->test_loss,    r->train_acc, r->train_loss,
                    r->wall_s,   r->tokens_per_s, r->valid_acc, r->valid_loss};
    for (int k = 0; k < 8; k++) {
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
    sb_cli_json_count(j, "state_size", r->state_size);
    json_text_or_null(j, "finished_at", r->finished_at);
    sb_jw_key(j, "attempts");
    sb_jw_int(j, r->attempts);
    /* where it ran: the machine, the MPI rank of an MPI sweep (null otherwise), and the
     * ranks a data-parallel training used */
    json_text_or_null(j, "host", r->host);
    sb_cli_json_count(j, "rank", r->rank);
    sb_jw_key(j, "world_size");
    sb_jw_int(j, r->world_size);
    /* what its bits depend on besides the configuration (null before schema 5) */
    sb_cli_json_count(j, "threads", r->threads);
    json_text_or_null(j, "engine", r->engine);
    json_text_or_null(j, "fingerprint", r->fingerprint);
    json_text_or_null(j, "checkpoint", r->checkpoint);
    sb_jw_object_end(j);
}

static sb_status print_json_runs(const results_rows *t, const size_t *idx, size_t n, sb_error *err)
{
    sb_jw *j = sb_jw_open(stdout, 0);
    if (j == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    sb_jw_object_begin(j);
    sb_jw_key(j, "runs");
    sb_jw_array_begin(j);
    for (size_t k = 0; k < n; k++)
        print_json_run(j, &t->rows[idx[k]], t->config_json[idx[k]], t->damaged[idx[k]],
                       t->ceiling_se[idx[k]]);
    sb_jw_array_end(j);
    sb_jw_object_end(j);
    sb_jw_close(j);
    printf("\n");
    return SB_OK;
}

/* ---- groups (the library's: sb_run_table_groups) ---------------------------------------- */

typedef sb_run_group group;

/* With --sort: the groups by a group column, n, or a summarised column's mean (else they
 * stay in the library's order, by the group columns' values). Errors: SB_ERR_INVALID for a
 * --sort column that is none of these, SB_ERR_NOMEM. */
static sb_status sort_groups(view *v, group *groups, size_t n_groups, const column *by, int n_by,
                             const column *stats, int n_stats, const char *sort, sb_error *err)
{
    if (sort == NULL)
        return SB_OK;
    int descending = sort[0] == '-', by_index = -1, stat_index = -1;
    const char *name = sort + descending;
    column c = -1;
    int by_n = strcmp(name, "n") == 0;
    if (!by_n && column_find(name, &c)) {
        for (int b = 0; b < n_by; b++)
            if (by[b] == c)
                by_index = b;
        for (int s = 0; s < n_stats && by_index < 0; s++)
            if (stats[s] == c)
                stat_index = s;
    }
    if (!by_n && by_index < 0 && stat_index < 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--sort '%s' with --group: sort by a group column, by n or by a "
                            "summarised column (--columns)",
                            name);
    sort_item *items = malloc((n_groups > 0 ? n_groups : 1) * sizeof *items);
    size_t *order = malloc((n_groups > 0 ? n_groups : 1) * sizeof *order);
    group *sorted = malloc((n_groups > 0 ? n_groups : 1) * sizeof *sorted);
    if (items == NULL || order == NULL || sorted == NULL) {
        free(items), free(order), free(sorted);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n_groups; k++) {
        group *g = &groups[k];
        items[k].index = k;
        items[k].order = k;
        if (by_n) {
            items[k].number = (double)g->finished;
            snprintf(items[k].text, sizeof items[k].text, "%zu", g->finished);
        } else if (stat_index >= 0) {
            items[k].number = g->stats[stat_index].mean;
            number_text(items[k].number, items[k].text, sizeof items[k].text);
        } else {
            items[k].number = cell(v, g->first, by[by_index], items[k].text, sizeof items[k].text);
        }
    }
    sort_indices(items, n_groups, descending, order);
    for (size_t k = 0; k < n_groups; k++)
        sorted[k] = groups[order[k]];
    memcpy(groups, sorted, n_groups * sizeof *groups);
    free(items), free(order), free(sorted);
    return SB_OK;
}

/* Whether any group carries an "apart" label (then the outputs have that column). */
static int any_apart(const group *groups, size_t n_groups)
{
    for (size_t g = 0; g < n_groups; g++)
        if (groups[g].apart[0] != '\0')
            return 1;
    return 0;
}

static void print_groups_table(view *v, const group *groups, size_t n_groups, const column *by,
                               int n_by, const column *stats, int n_stats, size_t n_runs)
{
    char buf[256];
    int width[MAX_LIST];
    for (int c = 0; c < n_by; c++) {
        width[c] = (int)strlen(column_title(by[c]));
        for (size_t g = 0; g < n_groups; g++) {
            cell_table(v, groups[g].first, by[c], buf, sizeof buf);
            if ((int)strlen(buf) > width[c])
                width[c] = (int)strlen(buf);
        }
    }
    for (int c = 0; c < n_by; c++)
        printf("%*s  ", column_numeric(by[c]) ? width[c] : -width[c], column_title(by[c]));
    printf("%3s", "n");
    for (int s = 0; s < n_stats; s++)
        printf("  %12s  %8s", column_title(stats[s]), "sd");
    const int apart = any_apart(groups, n_groups);
    printf(apart ? "  apart\n" : "\n");
    size_t finished = 0;
    for (size_t g = 0; g < n_groups; g++) {
        for (int c = 0; c < n_by; c++) {
            cell_table(v, groups[g].first, by[c], buf, sizeof buf);
            printf("%*s  ", column_numeric(by[c]) ? width[c] : -width[c], buf);
        }
        printf("%3zu", groups[g].finished);
        finished += groups[g].finished;
        for (int s = 0; s < n_stats; s++) {
            const sb_run_stat *st = &groups[g].stats[s];
            char mean[32] = "-", sd[32] = "-";
            if (isfinite(st->mean))
                snprintf(mean, sizeof mean, "%.4f", st->mean);
            if (isfinite(st->std))
                snprintf(sd, sizeof sd, "%.4f", st->std);
            printf("  %12s  %8s", mean, sd);
        }
        if (apart)
            printf("  %s", groups[g].apart);
        printf("\n");
    }
    printf("%zu groups of %zu finished runs (mean and sample standard deviation, n - 1)", n_groups,
           finished);
    if (finished < n_runs)
        printf("; %zu runs that did not finish left out", n_runs - finished);
    printf("\n");
}

static void print_groups_csv(view *v, const group *groups, size_t n_groups, const column *by,
                             int n_by, const column *stats, int n_stats)
{
    char buf[256];
    for (int c = 0; c < n_by; c++) {
        csv_field(column_csv(by[c]));
        printf(",");
    }
    printf("n");
    for (int s = 0; s < n_stats; s++)
        printf(",%s_mean,%s_std", column_csv(stats[s]), column_csv(stats[s]));
    const int apart = any_apart(groups, n_groups);
    printf(apart ? ",apart\n" : "\n");
    for (size_t g = 0; g < n_groups; g++) {
        for (int c = 0; c < n_by; c++) {
            cell(v, groups[g].first, by[c], buf, sizeof buf);
            csv_field(buf);
            printf(",");
        }
        printf("%zu", groups[g].finished);
        for (int s = 0; s < n_stats; s++) {
            number_text(groups[g].stats[s].mean, buf, sizeof buf);
            printf(",%s", buf);
            number_text(groups[g].stats[s].std, buf, sizeof buf);
            printf(",%s", buf);
        }
        if (apart) {
            printf(",");
            csv_field(groups[g].apart);
        }
        printf("\n");
    }
}

/* The groups as `results --group --json` prints them: {"groups": [{COLUMN: value, ..., "n",
 * STAT: {"mean", "std", "n"}, ..., "apart" (when set), "runs": [ids]}]}. */
static void write_groups_json(sb_jw *j, sb_run_table *t, const sb_result_row *rows,
                              const group *groups, size_t n_groups, const column *by, int n_by,
                              const column *stats, int n_stats)
{
    char buf[256];
    sb_jw_object_begin(j);
    sb_jw_key(j, "groups");
    sb_jw_array_begin(j);
    for (size_t g = 0; g < n_groups; g++) {
        sb_jw_object_begin(j);
        for (int c = 0; c < n_by; c++) {
            double x = sb_run_table_value(t, groups[g].first, by[c], buf, sizeof buf);
            sb_jw_key(j, column_name(by[c]));
            if (isfinite(x) && column_numeric(by[c]))
                sb_jw_raw(j, buf); /* the number as stored: 3 stays an integer */
            else
                sb_jw_string(j, buf);
        }
        sb_jw_key(j, "n");
        sb_jw_int(j, (int64_t)groups[g].finished);
        for (int s = 0; s < n_stats; s++) {
            const sb_run_stat *st = &groups[g].stats[s];
            sb_jw_key(j, column_name(stats[s]));
            sb_jw_object_begin(j);
            sb_jw_key(j, "mean");
            json_number_or_null(j, st->mean);
            sb_jw_key(j, "std");
            json_number_or_null(j, st->std);
            sb_jw_key(j, "n");
            sb_jw_int(j, (int64_t)st->n);
            sb_jw_object_end(j);
        }
        if (groups[g].apart[0] != '\0') { /* what sets it apart from equal-looking groups */
            sb_jw_key(j, "apart");
            sb_jw_string(j, groups[g].apart);
        }
        sb_jw_key(j, "runs");
        sb_jw_array_begin(j);
        for (size_t k = 0; k < groups[g].n_runs; k++)
            sb_jw_string(j, rows[groups[g].runs[k]].run_hash);
        sb_jw_array_end(j);
        sb_jw_object_end(j);
    }
    sb_jw_array_end(j);
    sb_jw_object_end(j);
}

/* --group: the statistics of --columns (numeric ones; group columns skipped) or of the
 * test accuracy, test loss and ceiling. */
static sb_status group_stats(const results_view_options *o, const column *by, int n_by,
                             column *stats, int *n_stats, sb_error *err)
{
    *n_stats = 0;
    if (o->columns == NULL) {
        stats[0] = field("test_acc");
        stats[1] = field("test_loss");
        stats[2] = field("ceiling");
        *n_stats = 3;
        return SB_OK;
    }
    column listed[MAX_LIST];
    int n = 0;
    sb_status st = parse_columns("columns", o->columns, listed, MAX_LIST, &n, err);
    for (int c = 0; st == SB_OK && c < n; c++) {
        int is_group = 0;
        for (int b = 0; b < n_by; b++)
            is_group |= by[b] == listed[c];
        if (is_group)
            continue;
        if (!column_numeric(listed[c]))
            return sb_error_set(err, SB_ERR_INVALID,
                                "--columns '%s' with --group: only numbers are summarised (mean "
                                "and standard deviation); group by it with --group instead",
                                column_name(listed[c]));
        stats[(*n_stats)++] = listed[c];
    }
    return st;
}

/* The groups of the runs idx[n] by o->group, with the statistics group_stats names, in
 * --sort's order (or the library's). Errors: SB_ERR_INVALID naming the flag, SB_ERR_NOMEM. */
static sb_status make_groups(view *v, const size_t *idx, size_t n, const results_view_options *o,
                             column *by, int *n_by, column *stats, int *n_stats, group **groups,
                             size_t *n_groups, sb_error *err)
{
    *groups = NULL;
    *n_groups = 0;
    sb_status st = parse_columns("group", o->group, by, MAX_LIST, n_by, err);
    if (st == SB_OK)
        st = group_stats(o, by, *n_by, stats, n_stats, err);
    if (st == SB_OK)
        st = sb_run_table_groups(v->table, idx, n, by, *n_by, stats, *n_stats, groups, n_groups,
                                 err);
    if (st == SB_OK)
        st = sort_groups(v, *groups, *n_groups, by, *n_by, stats, *n_stats, o->sort, err);
    return st;
}

static sb_status print_grouped(view *v, const size_t *idx, size_t n, const results_view_options *o,
                               sb_error *err)
{
    column by[MAX_LIST], stats[MAX_LIST];
    int n_by = 0, n_stats = 0;
    group *groups = NULL;
    size_t n_groups = 0;
    sb_status st = make_groups(v, idx, n, o, by, &n_by, stats, &n_stats, &groups, &n_groups, err);
    sb_jw *j = st == SB_OK && o->json ? sb_jw_open(stdout, 0) : NULL;
    if (st == SB_OK && o->json && j == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    if (st == SB_OK && o->json) {
        write_groups_json(j, v->table, v->t->rows, groups, n_groups, by, n_by, stats, n_stats);
        sb_jw_close(j);
        printf("\n");
    } else if (st == SB_OK && o->csv) {
        print_groups_csv(v, groups, n_groups, by, n_by, stats, n_stats);
    } else if (st == SB_OK) {
        print_groups_table(v, groups, n_groups, by, n_by, stats, n_stats, n);
    }
    sb_run_groups_free(groups, n_groups);
    return st;
}

sb_status results_view_groups_json(sb_jw *j, const sb_result_row *rows, const char *const *configs,
                                   size_t n_rows, const size_t *idx, size_t n,
                                   const results_view_options *o, sb_error *err)
{
    view v = {0};
    column by[MAX_LIST], stats[MAX_LIST];
    int n_by = 0, n_stats = 0;
    group *groups = NULL;
    size_t n_groups = 0;
    sb_status st = sb_run_table_new(rows, configs, NULL, n_rows, &v.table, err);
    if (st == SB_OK)
        st = make_groups(&v, idx, n, o, by, &n_by, stats, &n_stats, &groups, &n_groups, err);
    if (st == SB_OK)
        write_groups_json(j, v.table, rows, groups, n_groups, by, n_by, stats, n_stats);
    sb_run_groups_free(groups, n_groups);
    sb_run_table_free(v.table);
    return st;
}

/* ---- entry points -------------------------------------------------------------------------- */

static sb_status print_runs(view *v, size_t *idx, size_t n, const results_view_options *o,
                            sb_error *err)
{
    column cols[MAX_COLUMNS];
    int n_cols = 0;
    sb_status st = SB_OK;
    if (o->sort != NULL) {
        column by;
        int descending = 0;
        st = parse_sort(o->sort, &by, &descending, err);
        if (st == SB_OK)
            st = sort_runs(v, idx, n, by, descending, err);
    }
    if (st != SB_OK)
        return st;
    if (o->json) /* every field of every run; --columns chooses the table's and CSV's */
        return print_json_runs(v->t, idx, n, err);
    if (o->columns != NULL)
        st = parse_columns("columns", o->columns, cols, MAX_LIST, &n_cols, err);
    else if (o->csv)
        n_cols = csv_default_columns(v->t, idx, n, cols, MAX_COLUMNS);
    else
        n_cols = default_columns(v, idx, n, cols, MAX_COLUMNS);
    if (st != SB_OK)
        return st;
    if (o->csv)
        print_csv_runs(v, idx, n, cols, n_cols);
    else
        print_table_runs(v, idx, n, cols, n_cols);
    return SB_OK;
}

sb_status results_view_print(const results_rows *t, const results_view_options *o, sb_error *err)
{
    view v = {.t = t};
    size_t n = 0;
    size_t *idx = kept_runs(t, &n);
    sb_status st = idx != NULL ? SB_OK : sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    if (st == SB_OK)
        st = sb_run_table_new(t->rows, (const char *const *)t->config_json, t->ceiling_se, t->n,
                              &v.table, err);
    if (st == SB_OK && o->group != NULL)
        st = print_grouped(&v, idx, n, o, err);
    else if (st == SB_OK)
        st = print_runs(&v, idx, n, o, err);
    sb_run_table_free(v.table);
    free(idx);
    return st;
}

/* "key value" of the stored keys of run i that differ from train's defaults, on one line. */
static void print_changed_keys(const char *config_json)
{
    sb_config *cfg = NULL;
    if (config_json != NULL)
        sb_config_from_json(config_json, &cfg, NULL);
    printf("%-12s", "config");
    if (cfg == NULL) {
        printf("(unreadable)\n");
        return;
    }
    int any = 0;
    char value[256];
    for (int key = 0; key < sb_config_key_count(); key++) {
        if (sb_config_key_hashes(key) == 0)
            continue;
        if (sb_config_get_key(cfg, sb_config_key_name(key), value, sizeof value, NULL) != SB_OK)
            value[0] = '\0';
        const char *def = sb_config_key_default(key);
        double a, b; /* numbers compared as numbers (1e-3 is 0.001), the rest as text */
        int numbers =
            def != NULL && sb_config_parse_double(value, &a) && sb_config_parse_double(def, &b);
        int same = numbers ? a == b : def != NULL && strcmp(value, def) == 0;
        if (same)
            continue;
        printf("%s--%s %s", any ? " " : "", sb_config_key_name(key), value);
        any = 1;
    }
    printf("%s\n", any ? "" : "(train's defaults)");
    sb_config_free(cfg);
}

void results_view_print_run(const results_rows *t, size_t i, const char *db_path)
{
    const sb_result_row *r = &t->rows[i];
    printf("%-12s%s\n", "run", r->run_hash);
    printf("%-12s%s", "status", sb_run_status_name(r->status));
    if (r->finished_at[0] != '\0')
        printf(" at %s", r->finished_at);
    printf(", %lld attempt%s\n", (long long)r->attempts, r->attempts == 1 ? "" : "s");
    if (r->reason[0] != '\0')
        printf("%-12s%s\n", "reason", r->reason);
    printf("%-12s%s (protocol %s), %lld parameters\n", "model", r->model, r->protocol,
           (long long)r->params);
    printf("%-12s%s\n", "checkpoint", r->checkpoint[0] != '\0' ? r->checkpoint : "(none saved)");
    /* a sweep's worker writes its output to DIR/logs/RUN.log beside the database */
    const char *slash = strrchr(db_path, '/');
    char log[4200];
    snprintf(log, sizeof log, "%.*s%slogs/%s.log", slash != NULL ? (int)(slash - db_path) : 0,
             db_path, slash != NULL ? "/" : "", r->run_hash);
    if (access(log, R_OK) == 0)
        printf("%-12s%s\n", "log", log);
    printf("%-12stest acc %.4f, test loss %.4f; train acc %.4f, train loss %.4f\n", "metrics",
           r->test_acc, r->test_loss, r->train_acc, r->train_loss);
    if (!isnan(r->valid_acc))
        printf("%-12svalid acc %.4f, valid loss %.4f (the split choices read)\n", "", r->valid_acc,
               r->valid_loss);
    char mem[32] = "-";
    if (isinf(r->effective_memory))
        snprintf(mem, sizeof mem, "beyond 32");
    else if (!isnan(r->effective_memory))
        snprintf(mem, sizeof mem, "%.2f", r->effective_memory);
    printf("%-12sceiling %.4f (standard error %.4f), effective memory %s elements\n", "yardsticks",
           r->ceiling, t->ceiling_se[i], mem);
    printf("%-12s%.1f s, %.0f tokens/s\n", "time", r->wall_s, r->tokens_per_s);
    print_changed_keys(t->config_json[i]);
}

/* run_table.c - runs as columns and their groups over seeds (selectivbench.h, "Runs as a
 * table"): the one rule `results` and the dashboard's /api/groups share for a column's
 * value, which runs form a group and what a group's statistics are. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp/experiment.h"
#include "selectivbench/selectivbench.h"

/* ---- columns ------------------------------------------------------------------------------ */

/* A run's own fields (and the task's TE), in the order errors and `--help` list them. */
#define SB_RUN_FIELDS(X)                                                                           \
    X(RUN, "run", "hash", "run", -1, 0)                                                            \
    X(STATUS, "status", "status", "status", -1, 0)                                                 \
    X(MODEL, "model", "model", "model", -1, 0)                                                     \
    X(PROTOCOL, "protocol", "protocol", "protocol", -1, 0)                                         \
    X(PARAMS, "params", "params", "params", -1, 1)                                                 \
    X(TEST_ACC, "test_acc", "test_acc", "test acc", 4, 1)                                          \
    X(TEST_LOSS, "test_loss", "test_loss", "test loss", 4, 1)                                      \
    X(VALID_ACC, "valid_acc", "valid_acc", "valid acc", 4, 1)                                      \
    X(VALID_LOSS, "valid_loss", "valid_loss", "valid loss", 4, 1)                                  \
    X(TRAIN_ACC, "train_acc", "train_acc", "train acc", 4, 1)                                      \
    X(TRAIN_LOSS, "train_loss", "train_loss", "train loss", 4, 1)                                  \
    X(WALL_S, "wall_s", "wall_s", "wall s", 1, 1)                                                  \
    X(TOKENS_PER_S, "tokens_per_s", "tokens_per_s", "tok/s", 0, 1)                                 \
    X(CEILING, "ceiling", "ceiling", "ceiling", 4, 1)                                              \
    X(CEILING_SE, "ceiling_se", "ceiling_se", "ceiling se", 4, 1)                                  \
    X(EFFECTIVE_MEMORY, "effective_memory", "effective_memory", "eff mem", 2, 1)                   \
    X(FLOPS_PER_TOKEN, "flops_per_token", "flops_per_token", "flops/tok", SB_RUN_COLUMN_G3, 1)     \
    X(STATE_SIZE, "state_size", "state_size", "state", -1, 1)                                      \
    X(ATTEMPTS, "attempts", "attempts", "attempts", -1, 1)                                         \
    X(FINISHED_AT, "finished_at", "finished_at", "finished at", -1, 0)                             \
    X(CHECKPOINT, "checkpoint", "checkpoint", "checkpoint", -1, 0)                                 \
    X(TE, "te", "te", "TE", 4, 1)

typedef enum field {
#define X(id, name, csv, title, digits, numeric) F_##id,
    SB_RUN_FIELDS(X)
#undef X
        N_FIELDS
} field;

static const sb_run_column_info fields[N_FIELDS] = {
#define X(id, name, csv, title, digits, numeric) {name, csv, title, digits, numeric},
    SB_RUN_FIELDS(X)
#undef X
};

/* Column c is field c below N_FIELDS, else configuration key c - N_FIELDS (one of the keys
 * stored with a run: those of the run hash). */
int sb_run_column_count(void)
{
    return N_FIELDS + sb_config_key_count();
}

int sb_run_column_fields(void)
{
    return N_FIELDS;
}

static int stored_key(int key)
{
    return key >= 0 && key < sb_config_key_count() && sb_config_key_hashes(key);
}

int sb_run_column_find(const char *name)
{
    if (name == NULL)
        return -1;
    for (int f = 0; f < N_FIELDS; f++) /* model and protocol are keys too: the field first */
        if (strcmp(name, fields[f].name) == 0 || strcmp(name, fields[f].csv) == 0)
            return f;
    int key = sb_config_key_find(name);
    return stored_key(key) ? N_FIELDS + key : -1;
}

int sb_run_column_get(int column, sb_run_column_info *out)
{
    if (column >= 0 && column < N_FIELDS) {
        *out = fields[column];
        return 1;
    }
    int key = column - N_FIELDS;
    if (!stored_key(key))
        return 0;
    const char *type = sb_config_key_type(key);
    const char *name = sb_config_key_name(key);
    *out = (sb_run_column_info){name, name, name, -1,
                                strstr(type, "int") != NULL || strstr(type, "double") != NULL};
    return 1;
}

/* ---- the table ---------------------------------------------------------------------------- */

/* The topological entropy of a grammar, computed once per grammar. */
typedef struct te_entry {
    int vocab, amb, depth;
    char task_seed[32], density[32];
    double te;
} te_entry;

struct sb_run_table {
    const sb_result_row *rows;
    const char *const *configs; /* [n] stored JSON texts (NULL: none or damaged) */
    const double *ceiling_se;   /* [n] or NULL */
    size_t n;
    json_t **json;   /* [n] parsed when first needed; NULL unreadable */
    sb_config **cfg; /* [n] built when first needed */
    char *tried;     /* [n] bit 1: json tried, bit 2: cfg tried */
    te_entry *te;
    int n_te;
};

sb_status sb_run_table_new(const sb_result_row *rows, const char *const *configs,
                           const double *ceiling_se, size_t n, sb_run_table **out, sb_error *err)
{
    *out = NULL;
    sb_run_table *t = calloc(1, sizeof *t);
    if (t != NULL) {
        t->json = calloc(n > 0 ? n : 1, sizeof *t->json);
        t->cfg = calloc(n > 0 ? n : 1, sizeof *t->cfg);
        t->tried = calloc(n > 0 ? n : 1, 1);
    }
    if (t == NULL || t->json == NULL || t->cfg == NULL || t->tried == NULL) {
        sb_run_table_free(t);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a table of %zu runs", n);
    }
    t->rows = rows;
    t->configs = configs;
    t->ceiling_se = ceiling_se;
    t->n = n;
    *out = t;
    return SB_OK;
}

void sb_run_table_free(sb_run_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++) {
        json_decref(t->json != NULL ? t->json[i] : NULL);
        sb_config_free(t->cfg != NULL ? t->cfg[i] : NULL);
    }
    free(t->json);
    free(t->cfg);
    free(t->tried);
    free(t->te);
    free(t);
}

static const char *config_text(const sb_run_table *t, size_t i)
{
    return t->configs != NULL ? t->configs[i] : NULL;
}

/* Run i's stored configuration as JSON, as its task was trained (grammar_scale resolved);
 * NULL when it has none or it is not an object. */
static json_t *run_json(sb_run_table *t, size_t i)
{
    if (!(t->tried[i] & 1) && config_text(t, i) != NULL) {
        char *effective = sb_experiment_effective_config(config_text(t, i));
        json_t *j = effective != NULL ? json_loads(effective, 0, NULL) : NULL;
        free(effective);
        if (j != NULL && !json_is_object(j)) {
            json_decref(j);
            j = NULL;
        }
        t->json[i] = j;
    }
    t->tried[i] |= 1;
    return t->json[i];
}

/* Run i's stored configuration with defaults where it has no value; NULL when unreadable. */
static const sb_config *run_config(sb_run_table *t, size_t i)
{
    if (!(t->tried[i] & 2) && config_text(t, i) != NULL)
        sb_config_from_json(config_text(t, i), &t->cfg[i], NULL);
    t->tried[i] |= 2;
    return t->cfg[i];
}

static void key_text(const sb_config *cfg, const char *key, char *buf, size_t size)
{
    if (cfg == NULL || sb_config_get_key(cfg, key, buf, size, NULL) != SB_OK)
        buf[0] = '\0';
}

/* The topological entropy of run i's grammar (nats); NaN when it cannot be built. */
static double run_te(sb_run_table *t, size_t i)
{
    const sb_config *cfg = run_config(t, i);
    if (cfg == NULL)
        return (double)NAN;
    te_entry e = {0};
    sb_config_grammar_sizes(cfg, &e.vocab, &e.amb, &e.depth);
    key_text(cfg, "task_seed", e.task_seed, sizeof e.task_seed);
    key_text(cfg, "transition_density", e.density, sizeof e.density);
    for (int k = 0; k < t->n_te; k++) {
        te_entry *c = &t->te[k];
        if (c->vocab == e.vocab && c->amb == e.amb && c->depth == e.depth &&
            strcmp(c->task_seed, e.task_seed) == 0 && strcmp(c->density, e.density) == 0)
            return c->te;
    }
    sb_grammar *g = NULL;
    e.te = (double)NAN;
    if (sb_grammar_from_config(cfg, &g, NULL) == SB_OK) {
        sb_grammar_facts facts;
        sb_grammar_get_facts(g, &facts);
        e.te = facts.topological_entropy;
    }
    sb_grammar_free(g);
    te_entry *grown = realloc(t->te, (size_t)(t->n_te + 1) * sizeof *grown);
    if (grown != NULL) {
        t->te = grown;
        t->te[t->n_te++] = e;
    }
    return e.te;
}

/* The number a text holds, or NaN (text that is not wholly a finite number). */
static double text_number(const char *text)
{
    if (text[0] == '\0')
        return (double)NAN;
    char *end;
    double x = strtod(text, &end);
    return *end == '\0' && isfinite(x) ? x : (double)NAN;
}

/* A stored configuration value as text ("" for null); 0 when it has no value. */
static int json_text(json_t *value, char *buf, size_t size)
{
    if (value == NULL)
        return 0;
    buf[0] = '\0';
    if (json_is_string(value))
        snprintf(buf, size, "%s", json_string_value(value));
    else if (json_is_integer(value))
        snprintf(buf, size, "%lld", (long long)json_integer_value(value));
    else if (json_is_real(value)) /* finite: JSON has no other */
        sb_jw_format_double(buf, size, json_real_value(value));
    else if (json_is_boolean(value))
        snprintf(buf, size, "%s", json_is_true(value) ? "True" : "False");
    return 1;
}

/* Run i's number in field f (NaN when it has none), or its text in *text. */
static double field_number(sb_run_table *t, size_t i, field f, const char **text)
{
    const sb_result_row *r = &t->rows[i];
    *text = NULL;
    switch (f) {
    case F_RUN: *text = r->run_hash; break;
    case F_STATUS: *text = sb_run_status_name(r->status); break;
    case F_MODEL: *text = r->model; break;
    case F_PROTOCOL: *text = r->protocol; break;
    case F_FINISHED_AT: *text = r->finished_at; break;
    case F_CHECKPOINT: *text = r->checkpoint; break;
    case F_PARAMS: return r->params >= 0 ? (double)r->params : (double)NAN;
    case F_TEST_ACC: return r->test_acc;
    case F_TEST_LOSS: return r->test_loss;
    case F_VALID_ACC: return r->valid_acc;
    case F_VALID_LOSS: return r->valid_loss;
    case F_TRAIN_ACC: return r->train_acc;
    case F_TRAIN_LOSS: return r->train_loss;
    case F_WALL_S: return r->wall_s;
    case F_TOKENS_PER_S: return r->tokens_per_s;
    case F_CEILING: return r->ceiling;
    case F_CEILING_SE: return t->ceiling_se != NULL ? t->ceiling_se[i] : (double)NAN;
    case F_EFFECTIVE_MEMORY: return r->effective_memory;
    case F_FLOPS_PER_TOKEN: return r->flops_per_token;
    case F_STATE_SIZE: return r->state_size >= 0 ? (double)r->state_size : (double)NAN;
    case F_ATTEMPTS: return (double)r->attempts;
    case F_TE: return run_te(t, i);
    case N_FIELDS: break;
    }
    return (double)NAN;
}

double sb_run_table_value(sb_run_table *t, size_t i, int column, char *buf, size_t size)
{
    buf[0] = '\0';
    if (i >= t->n)
        return (double)NAN;
    if (column >= 0 && column < N_FIELDS) {
        const char *text;
        double x = field_number(t, i, (field)column, &text);
        int integer = column == F_PARAMS || column == F_STATE_SIZE || column == F_ATTEMPTS;
        if (text != NULL)
            snprintf(buf, size, "%s", text);
        else if (integer && !isnan(x))
            snprintf(buf, size, "%lld", (long long)x);
        else if (column == F_EFFECTIVE_MEMORY && isinf(x))
            snprintf(buf, size, ">32"); /* beyond the k = 32 observer */
        else if (isfinite(x))           /* the exact text of CSV and JSON; "" when unknown */
            sb_jw_format_double(buf, size, x);
        return x;
    }
    int key = column - N_FIELDS;
    if (!stored_key(key))
        return (double)NAN;
    const char *name = sb_config_key_name(key);
    json_t *stored = run_json(t, i);
    if (!json_text(stored != NULL ? json_object_get(stored, name) : NULL, buf, size))
        key_text(run_config(t, i), name, buf, size); /* recorded before the key existed */
    return text_number(buf);
}

/* ---- groups over seeds -------------------------------------------------------------------- */

static sb_run_stat column_stat(sb_run_table *t, const sb_run_group *g, int column)
{
    sb_run_stat s = {(double)NAN, (double)NAN, 0};
    double sum = 0, sum_sq = 0;
    char buf[256];
    for (int pass = 0; pass < 2; pass++) { /* the mean, then squared deviations from it */
        for (size_t k = 0; k < g->n_runs; k++) {
            size_t i = g->runs[k];
            double x = sb_run_table_value(t, i, column, buf, sizeof buf);
            if (t->rows[i].status != SB_RUN_FINISHED || !isfinite(x))
                continue;
            if (pass == 0)
                sum += x, s.n++;
            else
                sum_sq += (x - s.mean) * (x - s.mean); /* no cancellation */
        }
        if (pass == 0 && s.n > 0)
            s.mean = sum / (double)s.n;
    }
    if (s.n > 1)
        s.std = sqrt(sum_sq / (double)(s.n - 1));
    return s;
}

/* A group column's value in a group (its first run's): the text and the number. */
typedef struct cell {
    double number;
    char text[256];
} cell;

/* Unknown values last; two numbers by value, else the texts. */
static int cell_compare(const cell *a, const cell *b)
{
    int a_known = a->text[0] != '\0', b_known = b->text[0] != '\0';
    if (a_known != b_known)
        return a_known ? -1 : 1;
    if (!isnan(a->number) && !isnan(b->number))
        return (a->number > b->number) - (a->number < b->number);
    return strcmp(a->text, b->text);
}

/* Groups a before b: by the group columns in turn, then in order of first appearance. */
static int group_before(const cell *cells, int n_by, size_t a, size_t b)
{
    for (int c = 0; c < n_by; c++) {
        int r = cell_compare(&cells[a * (size_t)n_by + c], &cells[b * (size_t)n_by + c]);
        if (r != 0)
            return r < 0;
    }
    return a < b;
}

/* Sorts order[n] (group indices) by group_before: a merge sort, stable and with context. */
static void sort_groups(const cell *cells, int n_by, size_t *order, size_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_groups(cells, n_by, order, tmp, h);
    sort_groups(cells, n_by, order + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = group_before(cells, n_by, order[j], order[i]) ? order[j++] : order[i++];
    while (i < h)
        tmp[k++] = order[i++];
    while (j < n)
        tmp[k++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
}

void sb_run_groups_free(sb_run_group *groups, size_t n)
{
    for (size_t g = 0; groups != NULL && g < n; g++) {
        free(groups[g].runs);
        free(groups[g].stats);
        free(groups[g].experiment);
    }
    free(groups);
}

/* Run i's values in the group columns, joined by a separator no value holds. */
static char *values_key(sb_run_table *t, size_t i, const int *by, int n_by)
{
    size_t size = (size_t)n_by * 257 + 1;
    char *key = malloc(size), buf[256];
    if (key == NULL)
        return NULL;
    key[0] = '\0';
    for (int c = 0; c < n_by; c++) {
        sb_run_table_value(t, i, by[c], buf, sizeof buf);
        size_t len = strlen(key);
        snprintf(key + len, size - len, "%s\x1f", buf);
    }
    return key;
}

/* Adds run i to the group of its values and experiment, opening one when none matches. */
static sb_status add_run(sb_run_table *t, size_t i, const int *by, int n_by, int n_stats,
                         sb_run_group *groups, char **keys, size_t *n_groups, size_t n_max,
                         sb_error *err)
{
    static const char *const seed_keys[2] = {"seed", "task_seed"};
    char *key = values_key(t, i, by, n_by);
    const char *json = config_text(t, i);
    char *exp = sb_experiment_key(json != NULL ? json : "{}", seed_keys, 2, NULL, 0);
    if (exp == NULL)
        exp = strdup(""); /* unreadable: its column values alone */
    if (key == NULL || exp == NULL) {
        free(key), free(exp);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory grouping runs");
    }
    size_t g = 0;
    while (g < *n_groups && (strcmp(keys[g], key) != 0 || strcmp(groups[g].experiment, exp) != 0))
        g++;
    if (g < *n_groups) {
        free(key), free(exp);
    } else {
        keys[g] = key;
        groups[g].experiment = exp;
        groups[g].first = i;
        groups[g].runs = malloc(n_max * sizeof *groups[g].runs);
        groups[g].stats = calloc((size_t)(n_stats > 0 ? n_stats : 1), sizeof *groups[g].stats);
        (*n_groups)++;
        if (groups[g].runs == NULL || groups[g].stats == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory grouping runs");
    }
    groups[g].runs[groups[g].n_runs++] = i;
    groups[g].finished += t->rows[i].status == SB_RUN_FINISHED;
    return SB_OK;
}

#define MAX_SAME 64 /* groups of equal column values labelled apart */

/* Groups of equal column values: labelled by the keys whose values differ between them. */
static sb_status label_apart(sb_run_group *groups, char **keys, size_t n_groups, sb_error *err)
{
    for (size_t g = 0; g < n_groups; g++) {
        if (groups[g].apart[0] != '\0')
            continue;
        const char *same[MAX_SAME];
        char *labels[MAX_SAME];
        size_t members[MAX_SAME];
        int m = 0;
        for (size_t h = g; h < n_groups && m < MAX_SAME; h++)
            if (strcmp(keys[h], keys[g]) == 0) {
                same[m] = groups[h].experiment, labels[m] = groups[h].apart, members[m++] = h;
            }
        if (m > 1 && sb_experiment_labels(same, m, labels, sizeof groups[g].apart) != 0)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory labelling groups");
        for (int q = 0; q < m; q++) /* a group whose configuration is unreadable */
            if (groups[members[q]].apart[0] == '\0' && m > 1)
                snprintf(groups[members[q]].apart, sizeof groups[g].apart, "unreadable");
    }
    return SB_OK;
}

/* Puts the groups in the order of their group columns' values. */
static sb_status order_groups(sb_run_table *t, sb_run_group *groups, size_t n_groups, const int *by,
                              int n_by, sb_error *err)
{
    size_t m = n_groups > 0 ? n_groups : 1;
    cell *cells = malloc(m * (size_t)(n_by > 0 ? n_by : 1) * sizeof *cells);
    size_t *order = malloc(m * sizeof *order), *tmp = malloc(m * sizeof *tmp);
    sb_run_group *sorted = malloc(m * sizeof *sorted);
    sb_status st = cells != NULL && order != NULL && tmp != NULL && sorted != NULL
                       ? SB_OK
                       : sb_error_set(err, SB_ERR_NOMEM, "out of memory ordering groups");
    for (size_t g = 0; st == SB_OK && g < n_groups; g++) {
        order[g] = g;
        for (int c = 0; c < n_by; c++) {
            cell *x = &cells[g * (size_t)n_by + c];
            x->number = sb_run_table_value(t, groups[g].first, by[c], x->text, sizeof x->text);
        }
    }
    if (st == SB_OK) {
        sort_groups(cells, n_by, order, tmp, n_groups);
        for (size_t k = 0; k < n_groups; k++)
            sorted[k] = groups[order[k]];
        memcpy(groups, sorted, n_groups * sizeof *groups);
    }
    free(cells), free(order), free(tmp), free(sorted);
    return st;
}

sb_status sb_run_table_groups(sb_run_table *t, const size_t *runs, size_t n, const int *by,
                              int n_by, const int *stats, int n_stats, sb_run_group **out,
                              size_t *n_out, sb_error *err)
{
    *out = NULL;
    *n_out = 0;
    sb_run_column_info info;
    for (int c = 0; c < n_by + n_stats; c++)
        if (!sb_run_column_get(c < n_by ? by[c] : stats[c - n_by], &info))
            return sb_error_set(err, SB_ERR_INVALID, "column %d is not a column of a run table",
                                c < n_by ? by[c] : stats[c - n_by]);
    for (size_t k = 0; k < n; k++)
        if (runs[k] >= t->n)
            return sb_error_set(err, SB_ERR_INVALID, "run %zu is not in the table (%zu runs)",
                                runs[k], t->n);
    sb_run_group *groups = calloc(n > 0 ? n : 1, sizeof *groups);
    char **keys = calloc(n > 0 ? n : 1, sizeof *keys);
    size_t n_groups = 0;
    sb_status st = groups != NULL && keys != NULL
                       ? SB_OK
                       : sb_error_set(err, SB_ERR_NOMEM, "out of memory grouping %zu runs", n);
    /* a group's runs differ in their seeds alone (issue 38): runs of equal column values
     * whose configurations differ elsewhere are groups of their own, labelled apart */
    for (size_t k = 0; st == SB_OK && k < n; k++)
        st = add_run(t, runs[k], by, n_by, n_stats, groups, keys, &n_groups, n, err);
    for (size_t g = 0; st == SB_OK && g < n_groups; g++)
        for (int s = 0; s < n_stats; s++)
            groups[g].stats[s] = column_stat(t, &groups[g], stats[s]);
    if (st == SB_OK)
        st = label_apart(groups, keys, n_groups, err);
    for (size_t g = 0; keys != NULL && g < n_groups; g++)
        free(keys[g]);
    free(keys);
    if (st == SB_OK)
        st = order_groups(t, groups, n_groups, by, n_by, err);
    if (st != SB_OK) {
        sb_run_groups_free(groups, n_groups);
        return st;
    }
    *out = groups;
    *n_out = n_groups;
    return SB_OK;
}

/* serve_data.c - the JSON answers of `selectivbench serve` (serve.h): the runs, one run's
 * learning curve, the live status. Each opens the database read-only, reads what it needs
 * and closes it, so a running sweep's new rows appear at the next request. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/results_curves.h"
#include "cli/serve.h"

/* ---- replies ---- */

int sb_serve_json_begin(sb_serve_json *b)
{
    memset(b, 0, sizeof *b);
    b->f = open_memstream(&b->data, &b->len);
    if (b->f == NULL)
        return 0;
    b->j = sb_jw_open(b->f, 0);
    if (b->j == NULL) {
        fclose(b->f);
        free(b->data);
        return 0;
    }
    return 1;
}

void sb_serve_json_finish(sb_serve_json *b, sb_serve_reply *r)
{
    sb_jw_close(b->j);
    int bad = ferror(b->f);
    fclose(b->f); /* sets data and len */
    if (bad || b->data == NULL) {
        free(b->data);
        r->status = 500;
        r->type = "text/plain; charset=utf-8";
        r->body = NULL;
        r->len = 0;
        return;
    }
    r->status = 200;
    r->type = "application/json";
    r->body = b->data;
    r->len = b->len;
}

/* The length of the valid UTF-8 sequence at s (1-4 bytes), 0 when none starts there. */
static size_t utf8_sequence(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xC2 && s[0] <= 0xDF   ? 2
               : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
               : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                              : 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    /* overlong forms and surrogates */
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

void sb_serve_reply_error(sb_serve_reply *r, unsigned status, const char *message)
{
    /* a message may quote what the request held: bytes that are not UTF-8 become '?', so
     * that the reply is JSON whatever was asked */
    char clean[SB_ERROR_MSG_MAX];
    size_t o = 0;
    const unsigned char *m = (const unsigned char *)message;
    for (size_t i = 0; m[i] != '\0' && o + 5 < sizeof clean;) {
        size_t n = utf8_sequence(m + i);
        if (n == 0) {
            clean[o++] = '?';
            i++;
            continue;
        }
        memcpy(clean + o, m + i, n);
        o += n, i += n;
    }
    clean[o] = '\0';
    message = clean;
    sb_serve_json b;
    if (!sb_serve_json_begin(&b)) {
        r->status = 500;
        r->type = "text/plain; charset=utf-8";
        r->body = NULL;
        r->len = 0;
        return;
    }
    sb_jw_object_begin(b.j);
    sb_jw_key(b.j, "error");
    sb_jw_string(b.j, message);
    sb_jw_object_end(b.j);
    sb_serve_json_finish(&b, r);
    if (r->status == 200)
        r->status = status;
}

/* ---- reading the database ---- */

/* Every run of the database, in insertion order: *rows (malloc'd) of *n. */
static sb_status read_rows(sb_results *db, sb_result_row **rows, size_t *n, sb_error *err)
{
    size_t count = 0;
    *rows = NULL;
    *n = 0;
    sb_status st = sb_results_count(db, NULL, &count, err);
    if (st != SB_OK)
        return st;
    *rows = calloc(count > 0 ? count : 1, sizeof **rows);
    if (*rows == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory reading %zu runs", count);
    return sb_results_read(db, NULL, 0, *rows, count, n, err);
}

sb_status sb_serve_open_and_read(const char *db_path, sb_results **db, sb_result_row **rows,
                                 size_t *n, sb_error *err)
{
    *rows = NULL;
    *n = 0;
    sb_status st = sb_results_open_readonly(db_path, db, err);
    if (st != SB_OK)
        return st;
    st = read_rows(*db, rows, n, err);
    if (st != SB_OK) {
        sb_results_close(*db);
        *db = NULL;
        free(*rows);
        *rows = NULL;
    }
    return st;
}

/* ---- /api/runs ---- */

static void write_number_or_null(sb_jw *j, const char *key, double v)
{
    sb_jw_key(j, key);
    sb_jw_double(j, v); /* not finite: null */
}

void sb_serve_write_run_fields(sb_jw *j, const sb_result_row *r)
{
    sb_jw_key(j, "id");
    sb_jw_string(j, r->run_hash);
    sb_jw_key(j, "status");
    sb_jw_string(j, sb_run_status_name(r->status));
    sb_jw_key(j, "model");
    sb_jw_string(j, r->model);
    sb_jw_key(j, "protocol");
    sb_jw_string(j, r->protocol);
    sb_jw_key(j, "reason");
    sb_jw_string(j, r->reason);
    sb_cli_json_count(j, "params", r->params);
    write_number_or_null(j, "test_acc", r->test_acc);
    write_number_or_null(j, "test_loss", r->test_loss);
    write_number_or_null(j, "valid_acc", r->valid_acc);
    write_number_or_null(j, "valid_loss", r->valid_loss);
    write_number_or_null(j, "train_acc", r->train_acc);
    write_number_or_null(j, "train_loss", r->train_loss);
    write_number_or_null(j, "wall_s", r->wall_s);
    write_number_or_null(j, "tokens_per_s", r->tokens_per_s);
    write_number_or_null(j, "ceiling", r->ceiling);
    sb_jw_key(j, "effective_memory"); /* beyond the k = 32 observer: ">32", as `results` */
    if (isinf(r->effective_memory))
        sb_jw_string(j, ">32");
    else
        sb_jw_double(j, r->effective_memory);
    sb_jw_key(j, "finished_at");
    sb_jw_string(j, r->finished_at);
    sb_jw_key(j, "attempts");
    sb_jw_int(j, r->attempts);
    sb_jw_key(j, "checkpoint");
    sb_jw_string(j, r->checkpoint);
}

/* One run as an object: its id, status, metrics and configuration (config_json: as stored). */
static void write_run(sb_jw *j, const sb_result_row *r, const char *config_json,
                      const json_t *parsed)
{
    sb_jw_object_begin(j);
    sb_serve_write_run_fields(j, r);
    /* a configuration that is not a JSON object is not copied into the reply (it would make
     * the whole answer invalid): the run is listed with an empty one and its damage named */
    sb_jw_key(j, "config");
    if (config_json == NULL || json_is_object(parsed)) {
        sb_jw_raw(j, config_json != NULL ? config_json : "{}");
    } else {
        sb_jw_raw(j, "{}");
        sb_jw_key(j, "damaged");
        sb_jw_string(j, "its stored configuration is not a JSON object");
    }
    sb_jw_object_end(j);
}

/* The runs' stored configurations: texts[n] (as stored, NULL when none) and parsed[n]. */
typedef struct run_configs {
    char **texts;
    json_t **parsed;
    size_t n;
} run_configs;

static void run_configs_free(run_configs *c)
{
    for (size_t i = 0; i < c->n; i++) {
        sb_string_free(c->texts[i]);
        json_decref(c->parsed[i]);
    }
    free(c->texts);
    free(c->parsed);
}

static sb_status run_configs_read(sb_results *db, const sb_result_row *rows, size_t n,
                                  run_configs *c, sb_error *err)
{
    c->n = 0;
    c->texts = calloc(n > 0 ? n : 1, sizeof *c->texts);
    c->parsed = calloc(n > 0 ? n : 1, sizeof *c->parsed);
    if (c->texts == NULL || c->parsed == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory reading %zu configurations", n);
    for (size_t i = 0; i < n; i++) {
        sb_status st = sb_results_config_json(db, rows[i].run_hash, &c->texts[i], err);
        if (st != SB_OK)
            return st;
        c->n = i + 1;
        char *effective = sb_experiment_effective_config(c->texts[i]);
        if (effective != NULL) { /* the dashboard shows the task as trained */
            sb_string_free(c->texts[i]);
            c->texts[i] = effective; /* both free() */
        }
        if (c->texts[i] != NULL)
            c->parsed[i] = json_loads(c->texts[i], 0, NULL);
    }
    return SB_OK;
}

static void write_runs(sb_jw *j, const char *db_path, const sb_result_row *rows, size_t n,
                       const run_configs *c)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "db");
    sb_jw_string(j, db_path);
    sb_jw_key(j, "statuses");
    sb_jw_array_begin(j);
    for (const char *const *s = sb_results_statuses(); *s != NULL; s++)
        sb_jw_string(j, *s);
    sb_jw_array_end(j);
    /* the keys of the table in its order whose value differs between runs, as the default
     * columns of `results`: keys of the run hash only, the task seed not when it follows
     * the seed */
    sb_jw_key(j, "varied");
    sb_jw_array_begin(j);
    unsigned char *varies = calloc((size_t)sb_config_key_count(), 1);
    if (varies != NULL)
        sb_experiment_varied_keys((const char *const *)c->texts, c->n, varies);
    for (int k = 0; varies != NULL && k < sb_config_key_count(); k++)
        if (varies[k])
            sb_jw_string(j, sb_config_key_name(k));
    free(varies);
    sb_jw_array_end(j);
    sb_jw_key(j, "runs");
    sb_jw_array_begin(j);
    for (size_t i = 0; i < n; i++)
        write_run(j, &rows[i], i < c->n ? c->texts[i] : NULL, i < c->n ? c->parsed[i] : NULL);
    sb_jw_array_end(j);
    sb_jw_object_end(j);
}

void sb_serve_runs(const char *db_path, sb_serve_reply *r)
{
    sb_error err = {0};
    sb_results *db = NULL;
    sb_result_row *rows = NULL;
    size_t n = 0;
    run_configs configs = {0};
    sb_status st = sb_serve_open_and_read(db_path, &db, &rows, &n, &err);
    if (st == SB_OK)
        st = run_configs_read(db, rows, n, &configs, &err);
    sb_results_close(db);
    sb_serve_json b;
    if (st != SB_OK)
        sb_serve_reply_error(r, 500, err.msg);
    else if (!sb_serve_json_begin(&b))
        sb_serve_reply_error(r, 500, "out of memory");
    else {
        write_runs(b.j, db_path, rows, n, &configs);
        sb_serve_json_finish(&b, r);
    }
    run_configs_free(&configs);
    free(rows);
}

/* ---- /api/curve ---- */

int sb_serve_id_well_formed(const char *id)
{
    size_t len = strlen(id);
    return len >= 4 && len <= 16 && strspn(id, "0123456789abcdef") == len;
}

/* How many runs have an id starting with prefix. */
static size_t count_prefix(const sb_result_row *rows, size_t n, const char *prefix)
{
    size_t matches = 0;
    for (size_t i = 0; i < n; i++)
        matches += strncmp(rows[i].run_hash, prefix, strlen(prefix)) == 0;
    return matches;
}

static void write_points(sb_jw *j, const char *key, const sb_curve_point *points, size_t n)
{
    sb_jw_key(j, key);
    sb_jw_array_begin(j);
    for (size_t i = 0; i < n; i++)
        sb_cli_json_curve_point(j, &points[i]);
    sb_jw_array_end(j);
}

static void write_curve(sb_jw *j, const sb_result_row *run, const sb_curve_point *points, size_t n,
                        const sb_curve_point *live, size_t n_live)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "id");
    sb_jw_string(j, run->run_hash);
    sb_jw_key(j, "model");
    sb_jw_string(j, run->model);
    sb_jw_key(j, "status");
    sb_jw_string(j, sb_run_status_name(run->status));
    write_points(j, "points", points, n);
    /* the training means a running run writes between its evaluations (--live_every) */
    write_points(j, "live", live, n_live);
    sb_jw_object_end(j);
}

unsigned sb_serve_resolve(sb_results *db, const sb_result_row *rows, size_t n, const char *id,
                          sb_result_row *run, sb_error *err)
{
    char hash[17];
    if (sb_results_resolve_run(db, id, hash, err) != SB_OK)
        return count_prefix(rows, n, id) == 0 ? 404 : 400;
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].run_hash, hash) == 0) {
            *run = rows[i];
            return 200;
        }
    /* added after the rows were read: look it up on its own */
    int found = 0;
    if (sb_results_find(db, hash, run, &found, err) != SB_OK)
        return 500;
    if (!found) {
        sb_error_set(err, SB_ERR_INVALID, "no run '%s'", id);
        return 404;
    }
    return 200;
}

void sb_serve_curve(const char *db_path, const char *id, sb_serve_reply *r)
{
    if (id == NULL || !sb_serve_id_well_formed(id)) {
        sb_serve_reply_error(r, 400,
                             "give the run as ?run=ID: its id or a prefix of at least 4 "
                             "lowercase hex digits");
        return;
    }
    sb_error err = {0};
    sb_results *db = NULL;
    sb_result_row *rows = NULL, run;
    size_t n = 0, n_points = 0, n_live = 0;
    sb_curve_point *points = NULL, *live = NULL;
    unsigned status = sb_serve_open_and_read(db_path, &db, &rows, &n, &err) == SB_OK ? 200 : 500;
    if (status == 200)
        status = sb_serve_resolve(db, rows, n, id, &run, &err);
    if (status == 200 && (sb_results_curve(db, run.run_hash, &points, &n_points, &err) != SB_OK ||
                          sb_results_live(db, run.run_hash, &live, &n_live, &err) != SB_OK))
        status = 500;
    sb_results_close(db);
    sb_serve_json b;
    if (status != 200)
        sb_serve_reply_error(r, status, err.msg);
    else if (!sb_serve_json_begin(&b))
        sb_serve_reply_error(r, 500, "out of memory");
    else {
        write_curve(b.j, &run, points, n_points, live, n_live);
        sb_serve_json_finish(&b, r);
    }
    sb_results_curve_free(points);
    sb_results_curve_free(live);
    free(rows);
}

/* ---- /api/status and the runs' fingerprint ---- */

/* FNV-1a, 64 bits, over len bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t rows_key(const sb_result_row *rows, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h = fnv1a(h, rows[i].run_hash, strlen(rows[i].run_hash));
        h = fnv1a(h, &rows[i].status, sizeof rows[i].status);
        h = fnv1a(h, &rows[i].attempts, sizeof rows[i].attempts);
        h = fnv1a(h, &rows[i].test_acc, sizeof rows[i].test_acc);
    }
    return h;
}

sb_status sb_serve_runs_key(const char *db_path, uint64_t *key, sb_error *err)
{
    sb_results *db = NULL;
    sb_result_row *rows = NULL;
    size_t n = 0;
    sb_status st = sb_serve_open_and_read(db_path, &db, &rows, &n, err);
    sb_results_close(db);
    if (st == SB_OK)
        *key = rows_key(rows, n);
    free(rows);
    return st;
}

/* A running run's latest point: its step, samples, test accuracy (of its latest evaluation),
 * and its point count, evaluations and live points (the page fetches the curve again when
 * it grows). */
static void write_running(sb_jw *j, sb_results *db, const sb_result_row *run)
{
    sb_curve_point *points = NULL, *live = NULL;
    size_t n = 0, n_live = 0;
    sb_error err = {0};
    if (sb_results_curve(db, run->run_hash, &points, &n, &err) != SB_OK)
        n = 0;
    if (sb_results_live(db, run->run_hash, &live, &n_live, &err) != SB_OK)
        n_live = 0;
    const sb_curve_point *last = n > 0 ? &points[n - 1] : NULL, *last_test = NULL;
    if (n_live > 0 && (last == NULL || live[n_live - 1].step > last->step))
        last = &live[n_live - 1];
    for (size_t i = 0; i < n; i++)
        if (points[i].split == SB_SPLIT_TEST)
            last_test = &points[i];
    sb_jw_object_begin(j);
    sb_jw_key(j, "id");
    sb_jw_string(j, run->run_hash);
    sb_jw_key(j, "model");
    sb_jw_string(j, run->model);
    sb_jw_key(j, "points");
    sb_jw_uint(j, n + n_live);
    sb_jw_key(j, "step");
    if (last != NULL)
        sb_jw_int(j, last->step);
    else
        sb_jw_null(j);
    sb_jw_key(j, "samples");
    if (last != NULL && last->samples >= 0)
        sb_jw_int(j, last->samples);
    else
        sb_jw_null(j);
    write_number_or_null(j, "test_acc", last_test != NULL ? last_test->acc : (double)NAN);
    write_number_or_null(j, "wall_s", last != NULL ? last->wall_s : (double)NAN);
    sb_jw_object_end(j);
    sb_results_curve_free(points);
    sb_results_curve_free(live);
}

static void write_status(sb_jw *j, sb_results *db, const sb_result_row *rows, size_t n)
{
    char key[17];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)rows_key(rows, n));
    sb_jw_object_begin(j);
    sb_jw_key(j, "key");
    sb_jw_string(j, key);
    sb_jw_key(j, "total");
    sb_jw_uint(j, n);
    sb_jw_key(j, "counts");
    sb_jw_object_begin(j);
    for (int s = SB_RUN_RUNNING; s <= SB_RUN_INTERRUPTED; s++) {
        size_t count = 0;
        for (size_t i = 0; i < n; i++)
            count += rows[i].status == (sb_run_status)s;
        sb_jw_key(j, sb_run_status_name((sb_run_status)s));
        sb_jw_uint(j, count);
    }
    sb_jw_object_end(j);
    sb_jw_key(j, "running");
    sb_jw_array_begin(j);
    for (size_t i = 0; i < n; i++)
        if (rows[i].status == SB_RUN_RUNNING)
            write_running(j, db, &rows[i]);
    sb_jw_array_end(j);
    sb_jw_object_end(j);
}

void sb_serve_status(const char *db_path, sb_serve_reply *r)
{
    sb_error err = {0};
    sb_results *db = NULL;
    sb_result_row *rows = NULL;
    size_t n = 0;
    sb_serve_json b;
    if (sb_serve_open_and_read(db_path, &db, &rows, &n, &err) != SB_OK)
        sb_serve_reply_error(r, 500, err.msg);
    else if (!sb_serve_json_begin(&b))
        sb_serve_reply_error(r, 500, "out of memory");
    else {
        write_status(b.j, db, rows, n);
        sb_serve_json_finish(&b, r);
    }
    sb_results_close(db);
    free(rows);
}

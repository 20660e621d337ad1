/*
 * test_results.c - the results database: schema, run life cycle, round trips, concurrent
 * connections and processes, files that must be refused untouched, the yardsticks (the
 * cache of ceilings, a run's ceiling and effective memory), interrupted runs and resumed
 * attempts, and the upgrades of version-1 and version-2 files.
 *
 * Every test works in its own mkdtemp folder, removed afterwards. Checks on the file
 * itself (journal mode, meta table, NULLs, constraints) go through a raw SQLite
 * connection, as another program reading the database would.
 */
/* mkdtemp needs _GNU_SOURCE, which the build defines for every file */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/run_config.h"
#include "exp/report.h"
#include "exp/results.h"
#include "exp/run_lock.h"
#include "exp/run_store.h"
#include "task/ceiling.h"

/* ---- fixture: a temporary folder ----------------------------------------------------- */

typedef struct fixture {
    char dir[512];
    char path[600]; /* dir/results.db */
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (fx == NULL)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(fx->dir, sizeof fx->dir, "%s/sb_results_XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/results.db", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    int rc = test_remove_dir(fx->dir);
    free(fx);
    return rc;
}

/* ---- helpers ------------------------------------------------------------------------- */

static sb_results *open_ok(const char *path)
{
    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open(path, &db, &err) != SB_OK)
        fail_msg("sb_results_open: %s", err.msg);
    assert_non_null(db);
    return db;
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *raw = NULL;
    if (sqlite3_open_v2(path, &raw, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        fail_msg("raw open of %s: %s", path, sqlite3_errmsg(raw));
    sqlite3_busy_timeout(raw, 5000);
    return raw;
}

/* First column of the first row as a new string ("NULL" for SQL NULL), or fails. */
static char *raw_text(sqlite3 *raw, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(raw, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("prepare '%s': %s", sql, sqlite3_errmsg(raw));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("'%s' returned no row: %s", sql, sqlite3_errmsg(raw));
    const unsigned char *v = sqlite3_column_text(st, 0);
    char *out = strdup(v != NULL ? (const char *)v : "NULL");
    sqlite3_finalize(st);
    assert_non_null(out);
    return out;
}

static void assert_raw_text(sqlite3 *raw, const char *sql, const char *want)
{
    char *got = raw_text(raw, sql);
    if (strcmp(got, want) != 0)
        fail_msg("'%s' gave '%s', want '%s'", sql, got, want);
    free(got);
}

/* The whole file, for before/after comparisons; *n its size. */
static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s: %s", path, strerror(errno));
    unsigned char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static int file_exists(const char *path)
{
    struct stat sbuf;
    return stat(path, &sbuf) == 0;
}

/* Equal doubles, NaN equal to NaN (NaN means NULL). */
static void assert_same_double(double got, double want)
{
    if (isnan(want) ? !isnan(got) : !(got == want))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* An ISO-8601 UTC timestamp as SQLite writes it: 2025-01-31T12:00:00.000Z */
static void assert_timestamp(const char *s)
{
    assert_non_null(s);
    assert_int_equal(strlen(s), 24);
    assert_true(s[4] == '-' && s[10] == 'T' && s[13] == ':' && s[23] == 'Z');
}

static sb_run_info run_info(const char *hash, const char *model)
{
    return (sb_run_info){
        .hash = hash,
        .config_json = "{\"model\": \"mamba\", \"feat_size\": 64, \"lr\": 0.001}",
        .model = model,
        .protocol = "reference",
        .params = 123456,
        .state_size = 2048,
        .flops_per_token = 2.5e5,
        .code_version = "0.1.0-test",
        .checkpoint = "runs/abc/model.safetensors",
        .host = "worker-1",
    };
}

static int64_t begin_ok(sb_results *db, const sb_run_info *run)
{
    int64_t id = -1;
    sb_error err = {0};
    if (sb_results_run_begin(db, run, &id, &err) != SB_OK)
        fail_msg("run_begin: %s", err.msg);
    assert_true(id > 0);
    return id;
}

static void eval_ok(sb_results *db, int64_t id, int64_t step, sb_split split, double loss,
                    double acc)
{
    sb_eval_row e = {.step = step,
                     .samples = step * 64,
                     .split = split,
                     .loss = loss,
                     .acc = acc,
                     .lr = 1e-3,
                     .tokens_per_s = 5000.0,
                     .wall_s = 0.5 * (double)step};
    sb_error err = {0};
    if (sb_results_add_eval(db, id, &e, &err) != SB_OK)
        fail_msg("add_eval: %s", err.msg);
}

static void end_ok(sb_results *db, int64_t id, sb_run_status status, const char *reason,
                   const sb_run_metrics *m)
{
    sb_error err = {0};
    if (sb_results_run_end(db, id, status, reason, m, &err) != SB_OK)
        fail_msg("run_end: %s", err.msg);
}

static sb_run_row get_ok(sb_results *db, const char *hash)
{
    sb_run_row row;
    int found = -1;
    sb_error err = {0};
    if (sb_results_get_run(db, hash, &row, &found, &err) != SB_OK)
        fail_msg("get_run: %s", err.msg);
    assert_int_equal(found, 1);
    return row;
}

static const sb_run_metrics final_metrics = {.test_acc = 0.875,
                                             .test_loss = 0.25,
                                             .train_acc = 0.9375,
                                             .train_loss = 0.125,
                                             .wall_s = 12.5,
                                             .tokens_per_s = 40000.0};

/* ---- tests --------------------------------------------------------------------------- */

/* open creates the folder and the file; close and reopen keep what was written. */
static void test_open_close_roundtrip(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s/sub/results.db", fx->dir);
    assert_false(file_exists(path));
    sb_results *db = open_ok(path);
    assert_true(file_exists(path));
    sb_run_info run = run_info("h-roundtrip", "gru");
    int64_t id = begin_ok(db, &run);
    sb_results_close(db);

    db = open_ok(path);
    sb_run_row row = get_ok(db, "h-roundtrip");
    assert_int_equal(row.id, id);
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    sb_results_run_row_clear(&row);
    sb_results_close(db);
    sb_results_close(NULL);
}

static void test_wal_mode(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "PRAGMA journal_mode", "wal");
    sqlite3_close(raw);
    sb_results_close(db);
}

/* Where a run ran: a new run has no rank and the world size it was begun with; the MPI
 * coordinator's placement sets host, rank and attempts; an unknown hash is refused; a new
 * attempt forgets the rank (the coordinator sets it again) and counts itself. */
static void test_placement(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-placed", "gru");
    run.world_size = 2;
    begin_ok(db, &run);
    sb_run_row row;
    int found = 0;
    sb_error err = {0};
    assert_int_equal(sb_results_get_run(db, "h-placed", &row, &found, &err), SB_OK);
    assert_true(found);
    assert_int_equal(row.r.rank, -1);
    assert_int_equal(row.r.world_size, 2);
    assert_string_equal(row.r.host, "worker-1");
    sb_results_run_row_clear(&row);

    assert_int_equal(sb_results_set_placement(db, "h-placed", "node-7", 3, 5, &err), SB_OK);
    assert_int_equal(sb_results_get_run(db, "h-placed", &row, &found, &err), SB_OK);
    assert_int_equal(row.r.rank, 3);
    assert_int_equal(row.r.attempts, 5);
    assert_string_equal(row.r.host, "node-7");
    sb_results_run_row_clear(&row);
    /* NULL host keeps the stored one */
    assert_int_equal(sb_results_set_placement(db, "h-placed", NULL, 1, 6, &err), SB_OK);
    assert_int_equal(sb_results_get_run(db, "h-placed", &row, &found, &err), SB_OK);
    assert_string_equal(row.r.host, "node-7");
    assert_int_equal(row.r.rank, 1);
    sb_results_run_row_clear(&row);

    assert_int_equal(sb_results_set_placement(db, "h-nowhere", "x", 1, 1, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "h-nowhere"));

    run.world_size = 0; /* unset: one rank */
    begin_ok(db, &run);
    assert_int_equal(sb_results_get_run(db, "h-placed", &row, &found, &err), SB_OK);
    assert_int_equal(row.r.rank, -1);
    assert_int_equal(row.r.attempts, 7);
    assert_int_equal(row.r.world_size, 1);
    sb_results_run_row_clear(&row);
    sb_results_close(db);
}

static void test_schema_version(void **state)
{
    fixture *fx = *state;
    sb_results_close(open_ok(fx->path));
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'schema_version'", "7");
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'application'", "selectivbench");
    /* a new file's runs table takes 'interrupted' and has its index */
    assert_raw_text(raw,
                    "SELECT count(*) FROM sqlite_master WHERE name = 'runs' AND "
                    "sql LIKE '%''interrupted''%'",
                    "1");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_model'", "1");
    assert_raw_text(raw,
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                    "('meta', 'runs', 'evaluations', 'ceilings', 'live')",
                    "5");
    assert_raw_text(raw,
                    "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                    "('ceiling', 'effective_memory')",
                    "2");
    sqlite3_close(raw);
    /* reopening an existing database leaves the version alone */
    sb_results_close(open_ok(fx->path));
    raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT count(*) FROM meta WHERE key = 'schema_version'", "1");
    sqlite3_close(raw);
}

/* begin -> evals -> end, then read back exactly what was written. */
static void test_run_roundtrip(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-mamba", "mamba");
    run.threads = 2, run.engine = "auto-1", run.fingerprint = "0123abcd";
    int64_t id = begin_ok(db, &run);

    /* out of order, with NaN values and one replaced row */
    eval_ok(db, id, 200, SB_SPLIT_TEST, 0.5, 0.75);
    eval_ok(db, id, 100, SB_SPLIT_TRAIN, 1.5, (double)NAN);
    eval_ok(db, id, 100, SB_SPLIT_TEST, 1.25, 0.5);
    eval_ok(db, id, 200, SB_SPLIT_TEST, 0.375, 0.8125); /* replaces the first */
    sb_eval_row unknown = {.step = 0,
                           .samples = -1,
                           .split = SB_SPLIT_TEST,
                           .loss = (double)NAN,
                           .acc = (double)NAN,
                           .lr = (double)NAN,
                           .tokens_per_s = (double)NAN,
                           .wall_s = (double)NAN};
    sb_error err = {0};
    assert_int_equal(sb_results_add_eval(db, id, &unknown, &err), SB_OK);

    sb_run_metrics m = sb_results_metrics_unknown(); /* train_loss stays unknown */
    m.test_acc = final_metrics.test_acc;
    m.test_loss = final_metrics.test_loss;
    m.train_acc = final_metrics.train_acc;
    m.wall_s = final_metrics.wall_s;
    m.tokens_per_s = final_metrics.tokens_per_s;
    end_ok(db, id, SB_RUN_FINISHED, NULL, &m);

    sb_run_info other = run_info("h-gru", "gru");
    other.protocol = "clean";
    other.params = -1;
    other.flops_per_token = (double)NAN;
    other.checkpoint = NULL;
    int64_t id2 = begin_ok(db, &other);
    assert_true(id2 != id);

    sb_run_row row = get_ok(db, "h-mamba");
    assert_int_equal(row.id, id);
    assert_string_equal(row.r.run_hash, run.hash);
    assert_string_equal(row.config_json, run.config_json);
    assert_string_equal(row.r.model, "mamba");
    assert_string_equal(row.r.protocol, "reference");
    assert_int_equal(row.r.status, SB_RUN_FINISHED);
    assert_string_equal(row.r.reason, "");
    assert_int_equal(row.r.params, 123456);
    assert_int_equal(row.r.state_size, 2048);
    assert_same_double(row.r.flops_per_token, 2.5e5);
    assert_same_double(row.r.test_acc, 0.875);
    assert_same_double(row.r.test_loss, 0.25);
    assert_same_double(row.r.train_acc, 0.9375);
    assert_same_double(row.r.train_loss, (double)NAN);
    assert_same_double(row.r.wall_s, 12.5);
    assert_same_double(row.r.tokens_per_s, 40000.0);
    assert_string_equal(row.code_version, "0.1.0-test");
    assert_string_equal(row.r.checkpoint, "runs/abc/model.safetensors");
    assert_string_equal(row.r.host, "worker-1");
    assert_timestamp(row.started_at);
    assert_timestamp(row.r.finished_at);
    assert_true(strcmp(row.started_at, row.r.finished_at) <= 0);
    assert_int_equal(row.r.attempts, 1);
    assert_int_equal(row.r.threads, 2);
    assert_string_equal(row.r.engine, "auto-1");
    assert_string_equal(row.r.fingerprint, "0123abcd");
    sb_results_run_row_clear(&row);
    assert_string_equal(row.r.run_hash, "");
    row = get_ok(db, "h-gru"); /* none given: "" */
    assert_int_equal(row.r.threads, -1);
    assert_string_equal(row.r.engine, "");
    assert_string_equal(row.r.fingerprint, "");
    sb_results_run_row_clear(&row);

    /* NaN and unknown counts are SQL NULL in the file */
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw,
                    "SELECT train_loss IS NULL AND test_loss = 0.25 FROM runs "
                    "WHERE hash = 'h-mamba'",
                    "1");
    assert_raw_text(raw,
                    "SELECT params IS NULL AND flops_per_token IS NULL AND finished_at "
                    "IS NULL FROM runs WHERE hash = 'h-gru'",
                    "1");
    assert_raw_text(raw,
                    "SELECT acc IS NULL AND loss = 1.5 FROM evaluations "
                    "WHERE step = 100 AND split = 'train'",
                    "1");
    assert_raw_text(raw,
                    "SELECT samples IS NULL AND lr IS NULL FROM evaluations "
                    "WHERE step = 0",
                    "1");
    sqlite3_close(raw);

    /* evaluations in step order, test before train, the replaced row once */
    sb_eval_row *evals = NULL;
    size_t n = 99;
    if (sb_results_list_evals(db, id, &evals, &n, &err) != SB_OK)
        fail_msg("list_evals: %s", err.msg);
    assert_int_equal(n, 4);
    int64_t want_step[4] = {0, 100, 100, 200};
    sb_split want_split[4] = {SB_SPLIT_TEST, SB_SPLIT_TEST, SB_SPLIT_TRAIN, SB_SPLIT_TEST};
    double want_loss[4] = {(double)NAN, 1.25, 1.5, 0.375};
    double want_acc[4] = {(double)NAN, 0.5, (double)NAN, 0.8125};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(evals[i].step, want_step[i]);
        assert_int_equal(evals[i].split, want_split[i]);
        assert_same_double(evals[i].loss, want_loss[i]);
        assert_same_double(evals[i].acc, want_acc[i]);
    }
    assert_int_equal(evals[0].samples, -1);
    assert_same_double(evals[0].lr, (double)NAN);
    assert_int_equal(evals[3].samples, 200 * 64);
    assert_same_double(evals[3].lr, 1e-3);
    assert_same_double(evals[3].tokens_per_s, 5000.0);
    assert_same_double(evals[3].wall_s, 100.0);
    free(evals);

    /* list_runs: all in id order, or one model */
    sb_run_row *rows = NULL;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].id, id);
    assert_string_equal(rows[0].r.run_hash, "h-mamba");
    assert_same_double(rows[0].r.train_loss, (double)NAN);
    assert_same_double(rows[0].r.test_acc, 0.875);
    assert_int_equal(rows[1].id, id2);
    assert_int_equal(rows[1].r.status, SB_RUN_RUNNING);
    assert_string_equal(rows[1].r.protocol, "clean");
    assert_int_equal(rows[1].r.params, -1);
    assert_same_double(rows[1].r.flops_per_token, (double)NAN);
    assert_string_equal(rows[1].r.checkpoint, "");
    assert_string_equal(rows[1].r.finished_at, "");
    assert_same_double(rows[1].r.test_acc, (double)NAN);
    sb_results_run_rows_free(rows, n);

    assert_int_equal(sb_results_list_runs(db, "gru", &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].r.run_hash, "h-gru");
    sb_results_run_rows_free(rows, n);

    assert_int_equal(sb_results_list_runs(db, "transformer", &rows, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    assert_null(rows);

    int found = -1;
    assert_int_equal(sb_results_get_run(db, "no-such-hash", &row, &found, &err), SB_OK);
    assert_int_equal(found, 0);
    assert_int_equal(sb_results_list_evals(db, 12345, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    sb_results_close(db);
}

/* A finished run is refused and left as it was. */
static void test_finished_run_refused(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-done", "mamba");
    int64_t id = begin_ok(db, &run);
    eval_ok(db, id, 10, SB_SPLIT_TEST, 0.5, 0.5);
    end_ok(db, id, SB_RUN_FINISHED, NULL, &final_metrics);
    sb_run_row before = get_ok(db, "h-done");

    int64_t id2 = -7;
    sb_error err = {0};
    assert_int_equal(sb_results_run_begin(db, &run, &id2, &err), SB_ERR_INVALID);
    assert_int_equal(id2, -7);
    assert_non_null(strstr(err.msg, "already finished"));
    assert_non_null(strstr(err.msg, "h-done"));

    /* ending it again is refused too */
    sb_run_metrics m = final_metrics;
    m.test_acc = 0.0;
    assert_int_equal(sb_results_run_end(db, id, SB_RUN_FAILED, "again", &m, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "not running"));

    sb_run_row after = get_ok(db, "h-done");
    assert_int_equal(after.r.status, SB_RUN_FINISHED);
    assert_string_equal(after.started_at, before.started_at);
    assert_string_equal(after.r.finished_at, before.r.finished_at);
    assert_same_double(after.r.test_acc, final_metrics.test_acc);
    assert_string_equal(after.r.reason, "");
    assert_int_equal(after.r.attempts, 1);
    sb_eval_row *evals = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    free(evals);
    sb_results_run_row_clear(&before);
    sb_results_run_row_clear(&after);
    sb_results_close(db);
}

/* A failed, diverged or crashed (still 'running') run is reset and reuses its id. */
static void test_unfinished_run_reset(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-retry", "gla");
    int64_t id = begin_ok(db, &run);
    eval_ok(db, id, 10, SB_SPLIT_TEST, 0.5, 0.5);
    eval_ok(db, id, 20, SB_SPLIT_TEST, 0.4, 0.6);
    end_ok(db, id, SB_RUN_DIVERGED, "loss became NaN at step 21", &final_metrics);
    sb_run_row row = get_ok(db, "h-retry");
    assert_int_equal(row.r.status, SB_RUN_DIVERGED);
    assert_string_equal(row.r.reason, "loss became NaN at step 21");
    sb_results_run_row_clear(&row);

    /* second attempt with a new checkpoint path and config */
    run.config_json = "{\"model\": \"gla\", \"lr\": 0.0005}";
    run.checkpoint = "runs/retry/model.safetensors";
    assert_int_equal(begin_ok(db, &run), id);
    row = get_ok(db, "h-retry");
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    assert_string_equal(row.r.reason, "");
    assert_string_equal(row.r.finished_at, "");
    assert_string_equal(row.config_json, run.config_json);
    assert_string_equal(row.r.checkpoint, run.checkpoint);
    assert_same_double(row.r.test_acc, (double)NAN);
    assert_same_double(row.r.wall_s, (double)NAN);
    assert_int_equal(row.r.attempts, 2);
    sb_results_run_row_clear(&row);
    sb_eval_row *evals = NULL;
    size_t n = 99;
    sb_error err = {0};
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 0);

    /* the attempt crashes (never ends) and the run is begun a third time */
    eval_ok(db, id, 10, SB_SPLIT_TEST, 0.5, 0.5);
    assert_int_equal(begin_ok(db, &run), id);
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    row = get_ok(db, "h-retry");
    assert_int_equal(row.r.attempts, 3);
    sb_results_run_row_clear(&row);

    end_ok(db, id, SB_RUN_FAILED, "out of memory", &final_metrics);
    assert_int_equal(begin_ok(db, &run), id);

    sb_run_row *rows = NULL;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
}

/* A run stopped by a signal ends 'interrupted' with its reason; the attempt that resumes it
 * from its checkpoint keeps its evaluations (those past the resume point are dropped),
 * one that starts over does not. */
static void test_interrupted_run(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-stop", "gru");
    int64_t id = begin_ok(db, &run);
    eval_ok(db, id, 10, SB_SPLIT_TEST, 0.5, 0.5);
    eval_ok(db, id, 20, SB_SPLIT_TEST, 0.4, 0.6);
    end_ok(db, id, SB_RUN_INTERRUPTED, "interrupted at update 25 of 40 (800 samples)",
           &final_metrics);
    sb_run_row row = get_ok(db, "h-stop");
    assert_int_equal(row.r.status, SB_RUN_INTERRUPTED);
    assert_string_equal(row.r.reason, "interrupted at update 25 of 40 (800 samples)");
    assert_true(row.r.finished_at[0] != '\0');
    sb_results_run_row_clear(&row);

    /* resumed: same id, attempt 2, running, the evaluations kept */
    run.keep_evaluations = 1;
    assert_int_equal(begin_ok(db, &run), id);
    row = get_ok(db, "h-stop");
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    assert_string_equal(row.r.reason, "");
    assert_int_equal(row.r.attempts, 2);
    sb_results_run_row_clear(&row);
    sb_eval_row *evals = NULL;
    size_t n = 0;
    sb_error err = {0};
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 2);
    free(evals);
    /* it resumes from update 10: the evaluation at 20 is its to redo */
    assert_int_equal(sb_results_delete_evals_after(db, id, 10, &err), SB_OK);
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(evals[0].step, 10);
    free(evals);
    eval_ok(db, id, 20, SB_SPLIT_TEST, 0.3, 0.7);
    end_ok(db, id, SB_RUN_FINISHED, NULL, &final_metrics);
    row = get_ok(db, "h-stop");
    assert_int_equal(row.r.status, SB_RUN_FINISHED);
    assert_int_equal(row.r.attempts, 2);
    sb_results_run_row_clear(&row);

    /* interrupted again and started over (no keep): the evaluations go */
    sb_run_info other = run_info("h-stop-2", "gru");
    int64_t id2 = begin_ok(db, &other);
    eval_ok(db, id2, 10, SB_SPLIT_TEST, 0.5, 0.5);
    end_ok(db, id2, SB_RUN_INTERRUPTED, "interrupted at update 12 of 40", &final_metrics);
    assert_int_equal(begin_ok(db, &other), id2);
    assert_int_equal(sb_results_list_evals(db, id2, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    sb_results_close(db);

    /* the schema itself takes the status */
    sqlite3 *raw = raw_open(fx->path);
    assert_int_equal(
        sqlite3_exec(raw, "UPDATE runs SET status = 'interrupted' WHERE id = 1", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_not_equal(
        sqlite3_exec(raw, "UPDATE runs SET status = 'paused' WHERE id = 1", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(raw);
}

/* The dead-run rule (sb_run_store_settle_dead): a 'running' row whose lock no process holds
 * reads as interrupted; a writable connection records it, a read-only one only reports it;
 * a held lock, or a row that ended meanwhile, is left as it is. */
static void test_dead_run_settled(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-dead", "gru");
    int64_t id = begin_ok(db, &run);
    sb_run_info live = run_info("h-live", "gru");
    begin_ok(db, &live);
    sb_results_close(db);

    /* h-live's lock is held (by this process, through its own descriptor) */
    char lock_path[700];
    sb_error err = {0};
    assert_int_equal(
        sb_run_store_lock_path(fx->path, "h-live", lock_path, sizeof lock_path, 1, &err), SB_OK);
    sb_run_lock lock;
    long holder = -1;
    assert_int_equal(sb_run_lock_take(lock_path, &lock, &holder, &err), SB_OK);
    assert_int_equal(holder, 0);

    /* read-only: reported, not written */
    sb_results *ro = NULL;
    assert_int_equal(sb_results_open_readonly(fx->path, &ro, &err), SB_OK);
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(ro, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(sb_run_store_settle_dead(ro, rows, n, &err), SB_OK);
    assert_int_equal(rows[0].r.status, SB_RUN_INTERRUPTED);
    assert_string_equal(rows[0].r.reason, SB_RUN_STORE_DEAD_REASON);
    assert_int_equal(rows[1].r.status, SB_RUN_RUNNING);
    assert_string_equal(rows[1].r.reason, "");
    sb_results_run_rows_free(rows, n);
    sb_results_close(ro);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT status FROM runs WHERE hash = 'h-dead'", "running");
    sqlite3_close(raw);

    /* writable: recorded, with finished_at, in the attempt that was read */
    db = open_ok(fx->path);
    sb_run_row row = get_ok(db, "h-dead");
    assert_int_equal(sb_run_store_settle_dead(db, &row, 1, &err), SB_OK);
    assert_int_equal(row.r.status, SB_RUN_INTERRUPTED);
    assert_true(row.r.finished_at[0] != '\0');
    sb_results_run_row_clear(&row);
    raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT status FROM runs WHERE hash = 'h-dead'", "interrupted");
    assert_raw_text(raw, "SELECT reason FROM runs WHERE hash = 'h-dead'", SB_RUN_STORE_DEAD_REASON);
    assert_raw_text(raw, "SELECT status FROM runs WHERE hash = 'h-live'", "running");
    sqlite3_close(raw);

    /* a row read as running that ended before its lock was looked at: read again, unchanged */
    row = get_ok(db, "h-live");
    sb_run_lock_release(&lock);
    end_ok(db, 2, SB_RUN_FINISHED, NULL, &final_metrics);
    assert_int_equal(sb_run_store_settle_dead(db, &row, 1, &err), SB_OK);
    assert_int_equal(row.r.status, SB_RUN_FINISHED);
    sb_results_run_row_clear(&row);
    /* and the write only takes the attempt it read */
    int changed = 1;
    assert_int_equal(begin_ok(db, &run), id); /* attempt 2, running */
    assert_int_equal(sb_results_mark_interrupted(db, id, 1, "old attempt", &changed, &err), SB_OK);
    assert_int_equal(changed, 0);
    row = get_ok(db, "h-dead");
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    sb_results_run_row_clear(&row);
    sb_results_close(db);
}

/* Another connection (another worker) sees each write once it is committed. */
static void test_second_connection(void **state)
{
    fixture *fx = *state;
    sb_results *a = open_ok(fx->path);
    sb_results *b = open_ok(fx->path);
    sb_run_info run = run_info("h-shared", "s4d");
    int64_t id = begin_ok(a, &run);
    eval_ok(a, id, 5, SB_SPLIT_TEST, 0.5, 0.25);

    sb_run_row row = get_ok(b, "h-shared");
    assert_int_equal(row.id, id);
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    sb_results_run_row_clear(&row);
    sb_eval_row *evals = NULL;
    size_t n = 0;
    sb_error err = {0};
    assert_int_equal(sb_results_list_evals(b, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_same_double(evals[0].acc, 0.25);
    free(evals);

    end_ok(b, id, SB_RUN_FINISHED, NULL, &final_metrics);
    row = get_ok(a, "h-shared");
    assert_int_equal(row.r.status, SB_RUN_FINISHED);
    assert_same_double(row.r.test_acc, final_metrics.test_acc);
    sb_results_run_row_clear(&row);
    int64_t id2 = 0;
    assert_int_equal(sb_results_run_begin(a, &run, &id2, &err), SB_ERR_INVALID);
    sb_results_close(a);
    sb_results_close(b);
}

/* Worker processes create the database together and write to it at the same time. */
#define N_WORKERS 4
#define RUNS_PER_WORKER 8

static int worker(const char *path, int w)
{
    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open(path, &db, &err) != SB_OK) {
        fprintf(stderr, "worker %d: %s\n", w, err.msg);
        return 1;
    }
    int bad = 0;
    for (int k = 0; k < RUNS_PER_WORKER && !bad; k++) {
        char hash[32];
        snprintf(hash, sizeof hash, "w%d-r%d", w, k);
        sb_run_info run = run_info(hash, "gru");
        int64_t id = 0;
        bad = sb_results_run_begin(db, &run, &id, &err) != SB_OK;
        for (int s = 0; s < 3 && !bad; s++) {
            sb_eval_row e = {.step = s,
                             .samples = s,
                             .split = SB_SPLIT_TEST,
                             .loss = 1.0,
                             .acc = 0.5,
                             .lr = 0.1,
                             .tokens_per_s = 1.0,
                             .wall_s = 1.0};
            bad = sb_results_add_eval(db, id, &e, &err) != SB_OK;
        }
        if (!bad)
            bad = sb_results_run_end(db, id, SB_RUN_FINISHED, NULL, &final_metrics, &err) != SB_OK;
    }
    if (bad)
        fprintf(stderr, "worker %d: %s\n", w, err.msg);
    sb_results_close(db);
    return bad;
}

static void test_concurrent_workers(void **state)
{
    fixture *fx = *state;
    pid_t pid[N_WORKERS];
    for (int w = 0; w < N_WORKERS; w++) {
        pid[w] = fork();
        assert_true(pid[w] >= 0);
        if (pid[w] == 0)
            _exit(worker(fx->path, w));
    }
    for (int w = 0; w < N_WORKERS; w++) {
        int wstatus = 0;
        assert_int_equal(waitpid(pid[w], &wstatus, 0), pid[w]);
        assert_true(WIFEXITED(wstatus));
        assert_int_equal(WEXITSTATUS(wstatus), 0);
    }
    sb_results *db = open_ok(fx->path);
    sb_run_row *rows = NULL;
    size_t n = 0;
    sb_error err = {0};
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, N_WORKERS * RUNS_PER_WORKER);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(rows[i].r.status, SB_RUN_FINISHED);
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT count(*) FROM evaluations", "96");
    assert_raw_text(raw, "SELECT count(*) FROM meta WHERE key = 'schema_version'", "1");
    sqlite3_close(raw);
}

/* A worker that opens the file while another process holds its write lock before it is
 * in WAL mode (another worker creating it): the switch to WAL, which SQLite reports as
 * busy at once without calling the busy handler, must wait instead of failing. */
static void test_open_waits_for_writer(void **state)
{
    fixture *fx = *state;
    FILE *f = fopen(fx->path, "wb"); /* an empty file: a database not yet in WAL mode */
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *raw = NULL;
        int bad = sqlite3_open(fx->path, &raw) != SQLITE_OK;
        /* its COMMIT may meet the parent's read lock between two of its retries (seen under
         * ASan on a loaded machine): wait for it, as every real worker does */
        bad = bad || sqlite3_busy_timeout(raw, 10000) != SQLITE_OK;
        bad = bad || sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK;
        bad = bad || write(ready[1], "w", 1) != 1; /* holding the write lock now */
        usleep(200 * 1000);
        bad = bad || sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL) != SQLITE_OK;
        sqlite3_close(raw);
        _exit(bad);
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open(fx->path, &db, &err) != SB_OK)
        fail_msg("open while another process writes: %s", err.msg);
    sb_results_close(db);
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    close(ready[0]);
    close(ready[1]);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "PRAGMA journal_mode", "wal");
    sqlite3_close(raw);
}

/* A file that is not a database is refused and left byte for byte as it was. */
static void test_not_a_database(void **state)
{
    fixture *fx = *state;
    FILE *f = fopen(fx->path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 4096; i++)
        fputc((i * 37 + 11) & 0xff, f);
    assert_int_equal(fclose(f), 0);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_file(fx->path, &n_before);

    sb_results *db = (sb_results *)&db; /* must be reset to NULL */
    sb_error err = {0};
    assert_int_equal(sb_results_open(fx->path, &db, &err), SB_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, fx->path));
    assert_non_null(strstr(err.msg, "not a SQLite database"));

    unsigned char *after = read_file(fx->path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    char wal[700];
    snprintf(wal, sizeof wal, "%s-wal", fx->path);
    assert_false(file_exists(wal));
    free(before);
    free(after);

    /* a SQLite database of something else is refused too */
    char other[700];
    snprintf(other, sizeof other, "%s/other.db", fx->dir);
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(other, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(sb_results_open(other, &db, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, "not a selectivbench results database"));
}

static void test_unwritable_path(void **state)
{
    (void)state;
    const char *path = "/dev/null/x/results.db";
    sb_results *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_results_open(path, &db, &err), SB_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, path));
    assert_null(strchr(err.msg, '\n'));

    assert_int_equal(sb_results_open("", &db, &err), SB_ERR_INVALID);
}

/* A database from a newer program is refused, naming both versions, and left alone. */
static void test_newer_schema_refused(void **state)
{
    fixture *fx = *state;
    sb_results_close(open_ok(fx->path));
    sqlite3 *raw = raw_open(fx->path);
    assert_int_equal(sqlite3_exec(raw,
                                  "UPDATE meta SET value = '99' WHERE key = "
                                  "'schema_version'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(raw); /* the last connection checkpoints the WAL into the file */
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_file(fx->path, &n_before);

    sb_results *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_results_open(fx->path, &db, &err), SB_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, fx->path));
    assert_non_null(strstr(err.msg, "schema_version 99"));
    assert_non_null(strstr(err.msg, "schema_version 7 "));

    unsigned char *after = read_file(fx->path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(before);
    free(after);
}

/* Bad values are refused with SB_ERR_INVALID and change nothing, through the API and,
 * for the status, through the schema's CHECK constraint as well. */
static void test_bad_input_refused(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-bad", "mamba");
    int64_t id = begin_ok(db, &run);
    eval_ok(db, id, 1, SB_SPLIT_TEST, 0.5, 0.5);
    sb_error err = {0};

    assert_int_equal(sb_results_run_end(db, id, (sb_run_status)42, NULL, &final_metrics, &err),
                     SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "cannot end with status"));
    assert_int_equal(sb_results_run_end(db, id, SB_RUN_RUNNING, NULL, &final_metrics, &err),
                     SB_ERR_INVALID);
    assert_int_equal(sb_results_run_end(db, id, SB_RUN_NONE, NULL, &final_metrics, &err),
                     SB_ERR_INVALID);
    assert_int_equal(sb_results_run_end(db, id + 100, SB_RUN_FINISHED, NULL, &final_metrics, &err),
                     SB_ERR_INVALID);
    sb_run_row row = get_ok(db, "h-bad");
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    assert_string_equal(row.r.finished_at, "");
    assert_same_double(row.r.test_acc, (double)NAN);
    sb_results_run_row_clear(&row);

    /* the schema refuses it from any program */
    sqlite3 *raw = raw_open(fx->path);
    assert_int_equal(sqlite3_exec(raw, "UPDATE runs SET status = 'bogus'", NULL, NULL, NULL),
                     SQLITE_CONSTRAINT);
    assert_int_equal(sqlite3_extended_errcode(raw), SQLITE_CONSTRAINT_CHECK);
    assert_int_equal(sqlite3_exec(raw,
                                  "INSERT INTO evaluations (run_id, step, split) "
                                  "VALUES (1, 5, 'bogus')",
                                  NULL, NULL, NULL),
                     SQLITE_CONSTRAINT);
    sqlite3_close(raw);
    row = get_ok(db, "h-bad");
    assert_int_equal(row.r.status, SB_RUN_RUNNING);
    sb_results_run_row_clear(&row);

    /* runs that would not be usable later */
    sb_run_info bad = run_info("h-json", "mamba");
    bad.config_json = "{\"model\": ";
    int64_t id2 = -1;
    assert_int_equal(sb_results_run_begin(db, &bad, &id2, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "config_is_json"));
    bad = run_info("h-proto", "mamba");
    bad.protocol = "dirty";
    assert_int_equal(sb_results_run_begin(db, &bad, &id2, &err), SB_ERR_INVALID);
    bad = run_info("", "mamba");
    assert_int_equal(sb_results_run_begin(db, &bad, &id2, &err), SB_ERR_INVALID);
    assert_int_equal(id2, -1);

    /* evaluations of a run that does not exist, or with a negative step */
    sb_eval_row e = {.step = 3,
                     .samples = 3,
                     .split = SB_SPLIT_TEST,
                     .loss = 1.0,
                     .acc = 0.5,
                     .lr = 0.1,
                     .tokens_per_s = 1.0,
                     .wall_s = 1.0};
    assert_int_equal(sb_results_add_eval(db, id + 100, &e, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no run has this id"));
    e.step = -1;
    assert_int_equal(sb_results_add_eval(db, id, &e, &err), SB_ERR_INVALID);

    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    sb_results_run_rows_free(rows, n);
    sb_eval_row *evals = NULL;
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    free(evals);

    /* the connection is still usable after the refusals */
    end_ok(db, id, SB_RUN_FINISHED, NULL, &final_metrics);
    sb_results_close(db);
}

/* ---- report: the point each figure shows ----------------------------------------------- */

/* Task 1b runs of one model at one width: two learning rates x two seeds (and one run at a
 * second width, so that the runs make a figure). The report must take the learning rate
 * with the best mean VALIDATION accuracy (1e-3: 0.71 against 0.605), not the one the test
 * would pick (3e-3: mean test accuracy 0.64 against 0.60), say that validation chose it,
 * give its test accuracy's mean (0.60), sample standard deviation (n - 1: 0.1414) and seed
 * count, and write the figure as PNG, SVG and PDF plus report.md; with the figure of
 * effective memory and the runs' ceilings (computed for the runs, which were recorded
 * without them, and stored). */
static void test_report_best_setting(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    const double lrs[2] = {1e-3, 3e-3}, accs[2][2] = {{0.50, 0.70}, {0.62, 0.66}};
    const double valids[2][2] = {{0.70, 0.72}, {0.60, 0.61}};
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < 2; s++) {
            sb_run_config c = sb_run_config_default();
            snprintf(c.model, sizeof c.model, "gru");
            c.feat_size = 16;
            c.lr = lrs[i];
            c.seed = (uint64_t)s + 1;
            char hash[17];
            sb_run_config_hash(&c, 0, hash);
            char *json = sb_run_config_json_string(&c, 0);
            assert_non_null(json);
            sb_run_info run = run_info(hash, "gru");
            run.config_json = json;
            run.params = 2929;
            int64_t id = begin_ok(db, &run);
            sb_run_metrics m = sb_results_metrics_unknown();
            m.test_acc = accs[i][s];
            m.valid_acc = valids[i][s];
            end_ok(db, id, SB_RUN_FINISHED, NULL, &m);
            free(json);
        }
    /* a second width: a figure needs two x values (one x alone is under "Other runs") */
    sb_run_config wide = sb_run_config_default();
    snprintf(wide.model, sizeof wide.model, "gru");
    wide.feat_size = 32;
    char wide_hash[17];
    sb_run_config_hash(&wide, 0, wide_hash);
    char *wide_json = sb_run_config_json_string(&wide, 0);
    assert_non_null(wide_json);
    sb_run_info wide_run = run_info(wide_hash, "gru");
    wide_run.config_json = wide_json;
    wide_run.params = 9000;
    sb_run_metrics wide_m = sb_results_metrics_unknown();
    wide_m.test_acc = 0.55;
    end_ok(db, begin_ok(db, &wide_run), SB_RUN_FINISHED, NULL, &wide_m);
    free(wide_json);
    sb_results_close(db);

    char out[700];
    snprintf(out, sizeof out, "%s/report", fx->dir);
    sb_report_summary sum;
    sb_error err = {0};
    if (sb_report_generate(fx->path, out, &sum, &err) != SB_OK)
        fail_msg("report: %s", err.msg);
    assert_int_equal(sum.out.runs_read, 5);
    assert_int_equal(sum.out.runs_used, 5);
    assert_int_equal(sum.out.runs_other, 0);
    /* accuracy and effective memory; no learning curves: these rows have no evaluations */
    assert_int_equal(sum.out.figures, 2);
    assert_int_equal(sum.out.yardsticks_missing, 0);
    const char *ext[3] = {"png", "svg", "pdf"};
    for (int e = 0; e < 3; e++)
        for (int m = 0; m < 2; m++) {
            char path[800];
            snprintf(path, sizeof path, "%s/fig2b%s.%s", out, m ? "_memory" : "", ext[e]);
            struct stat st;
            if (stat(path, &st) != 0 || st.st_size == 0)
                fail_msg("no figure %s", path);
        }
    /* the report gave the runs their yardsticks (backfilled and stored) */
    db = open_ok(fx->path);
    sb_run_row *all = NULL;
    size_t n_all = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &all, &n_all, &err), SB_OK);
    assert_int_equal(n_all, 5);
    for (size_t i = 0; i < n_all; i++)
        assert_true(all[i].r.ceiling > 0.5 && all[i].r.ceiling <= 1 &&
                    !isnan(all[i].r.effective_memory));
    char want_ceiling[32];
    snprintf(want_ceiling, sizeof want_ceiling, "| %.4f |", all[0].r.ceiling);
    sb_results_run_rows_free(all, n_all);
    sb_results_close(db);
    FILE *f = fopen(sum.out.table_path, "r");
    assert_non_null(f);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "| gru | 0.002929 |", 18) != 0) /* the width with 4 runs */
            continue;
        rows++;
        if (strstr(line, "| 0.6000 | 0.1414 | 2 | 0.001 | 5% | valid |") == NULL ||
            strstr(line, want_ceiling) == NULL)
            fail_msg("report.md row: %s", line);
    }
    fclose(f);
    assert_int_equal(rows, 1);
}

/* One run of the task 1b setting (gru, width 16, lr 3e-3) with this seed, status and test
 * accuracy. */
static void add_setting_run(sb_results *db, uint64_t seed, sb_run_status status, double acc)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "gru");
    c.feat_size = 16;
    c.lr = 3e-3;
    c.seed = seed;
    char hash[17];
    sb_run_config_hash(&c, 0, hash);
    char *json = sb_run_config_json_string(&c, 0);
    assert_non_null(json);
    sb_run_info run = run_info(hash, "gru");
    run.config_json = json;
    run.params = 2929;
    int64_t id = begin_ok(db, &run);
    sb_run_metrics m = sb_results_metrics_unknown();
    m.test_acc = acc;
    end_ok(db, id, status, status == SB_RUN_FINISHED ? NULL : "why", &m);
    free(json);
}

/* Diverged and unfinished runs are left out of the means, and counted: seeds 1 and 2
 * finished (0.62, 0.66: mean 0.64); seed 3 diverged with the accuracy of its last
 * evaluation (0.99), seed 4 failed (0.98). */
static void test_report_leaves_out_diverged(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    add_setting_run(db, 1, SB_RUN_FINISHED, 0.62);
    add_setting_run(db, 2, SB_RUN_FINISHED, 0.66);
    add_setting_run(db, 3, SB_RUN_DIVERGED, 0.99);
    add_setting_run(db, 4, SB_RUN_FAILED, 0.98);
    sb_results_close(db);
    char out[700];
    snprintf(out, sizeof out, "%s/report", fx->dir);
    sb_report_summary sum;
    sb_error err = {0};
    if (sb_report_generate(fx->path, out, &sum, &err) != SB_OK)
        fail_msg("report: %s", err.msg);
    assert_int_equal(sum.out.runs_read, 4);
    assert_int_equal(sum.out.runs_used, 2);
    assert_int_equal(sum.out.runs_diverged, 1);
    assert_int_equal(sum.runs_unfinished, 1);
    assert_int_equal(sum.runs_unusable, 0);
    FILE *f = fopen(sum.out.table_path, "r");
    assert_non_null(f);
    char line[2048];
    int rows = 0, said = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        /* the two seeds of one setting make no figure: they are under "Other runs" */
        said += strstr(line, "From `") != NULL &&
                strstr(line, ": 4 runs, 2 finished: 0 placed in a figure, 2 under \"Other "
                             "runs\"") != NULL &&
                strstr(line, "Left out of every figure and mean: 1 diverged run, 1 unfinished "
                             "run (failed, stopped or running); `selectivbench results` shows "
                             "why.") != NULL;
        if (strncmp(line, "| gru |", 7) != 0)
            continue;
        rows++;
        if (strstr(line, "| 0.6400 | 0.0283 | 2 | 0.003 |") == NULL)
            fail_msg("report.md row: %s", line);
    }
    fclose(f);
    assert_int_equal(rows, 1);
    assert_int_equal(said, 1);
}

/* ---- yardsticks: the cache of ceilings, a run's ceiling and effective memory ------------- */

static sb_ceiling sample_ceiling(double expected)
{
    sb_ceiling c;
    memset(&c, 0, sizeof c);
    c.expected_acc = expected;
    c.realized_acc = 0.8125;
    c.expected_acc_se = 0.0125;
    for (int k = 0; k < SB_CEILING_N_WINDOWS; k++)
        c.window_acc[k] = 0.1 + 0.1 * k;
    c.n_windows = SB_CEILING_N_WINDOWS; /* every window, as interleaved walks of 4096 have */
    c.n_samples = 12;
    c.n_elements = 240;
    c.seconds = 0.5;
    return c;
}

/* put then get returns what was stored, across connections; put replaces; bad entries are
 * refused and change nothing; a cached text that does not read back counts as missing. */
static void test_ceiling_cache(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_error err = {0};
    sb_ceiling got;
    int found = -1;
    assert_int_equal(sb_results_get_ceiling(db, "0123456789abcdef", &got, &found, &err), SB_OK);
    assert_int_equal(found, 0);

    sb_ceiling c = sample_ceiling(0.875);
    if (sb_results_put_ceiling(db, "0123456789abcdef", "{\"vocab\": 9}", &c, &err) != SB_OK)
        fail_msg("put_ceiling: %s", err.msg);
    sb_results_close(db);
    db = open_ok(fx->path);
    assert_int_equal(sb_results_get_ceiling(db, "0123456789abcdef", &got, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    assert_same_double(got.expected_acc, 0.875);
    assert_same_double(got.realized_acc, 0.8125);
    assert_same_double(got.expected_acc_se, 0.0125);
    assert_int_equal(got.n_windows, SB_CEILING_N_WINDOWS);
    for (int k = 0; k < SB_CEILING_N_WINDOWS; k++)
        assert_same_double(got.window_acc[k], 0.1 + 0.1 * k);
    assert_int_equal(got.n_samples, 12);
    assert_int_equal(got.n_elements, 240);

    /* a second put replaces the entry */
    c = sample_ceiling(0.9375);
    assert_int_equal(sb_results_put_ceiling(db, "0123456789abcdef", "{\"vocab\": 9}", &c, &err),
                     SB_OK);
    assert_int_equal(sb_results_get_ceiling(db, "0123456789abcdef", &got, &found, &err), SB_OK);
    assert_same_double(got.expected_acc, 0.9375);
    /* refused: no hash, no configuration, a configuration that is not JSON */
    assert_int_equal(sb_results_put_ceiling(db, "", "{}", &c, &err), SB_ERR_INVALID);
    assert_int_equal(sb_results_put_ceiling(db, "h2", NULL, &c, &err), SB_ERR_INVALID);
    assert_int_equal(sb_results_put_ceiling(db, "h2", "{\"vocab\": ", &c, &err), SB_ERR_INVALID);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT count(*) FROM ceilings", "1");
    assert_raw_text(raw, "SELECT json_extract(config_json, '$.vocab') FROM ceilings", "9");
    assert_raw_text(raw, "SELECT json_extract(ceiling_json, '$.expected_acc') FROM ceilings",
                    "0.9375");
    /* a damaged entry: missing, so that it is computed again */
    assert_int_equal(
        sqlite3_exec(raw, "UPDATE ceilings SET ceiling_json = '[1]'", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(sb_results_get_ceiling(db, "0123456789abcdef", &got, &found, &err), SB_OK);
    assert_int_equal(found, 0);
    sb_results_close(db);
}

/* set_yardsticks stores ceiling and effective memory (infinity kept, NaN as NULL); a run
 * that starts again loses them; an unknown run is refused. */
static void test_run_yardsticks(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-yard", "gru");
    int64_t id = begin_ok(db, &run);
    sb_run_row row = get_ok(db, "h-yard");
    assert_same_double(row.r.ceiling, (double)NAN);
    assert_same_double(row.r.effective_memory, (double)NAN);
    sb_results_run_row_clear(&row);
    end_ok(db, id, SB_RUN_FINISHED, NULL, &final_metrics);
    sb_error err = {0};
    if (sb_results_set_yardsticks(db, id, 0.96875, 3.5, &err) != SB_OK)
        fail_msg("set_yardsticks: %s", err.msg);
    row = get_ok(db, "h-yard");
    assert_same_double(row.r.ceiling, 0.96875);
    assert_same_double(row.r.effective_memory, 3.5);
    sb_results_run_row_clear(&row);

    assert_int_equal(sb_results_set_yardsticks(db, id, 0.96875, (double)INFINITY, &err), SB_OK);
    sb_results_close(db);
    db = open_ok(fx->path);
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_true(isinf(rows[0].r.effective_memory) && rows[0].r.effective_memory > 0);
    assert_same_double(rows[0].r.ceiling, 0.96875);
    sb_results_run_rows_free(rows, n);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT effective_memory > 1e308 FROM runs", "1");
    sqlite3_close(raw);

    assert_int_equal(sb_results_set_yardsticks(db, id, (double)NAN, (double)NAN, &err), SB_OK);
    raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT ceiling IS NULL AND effective_memory IS NULL FROM runs", "1");
    sqlite3_close(raw);
    assert_int_equal(sb_results_set_yardsticks(db, id + 100, 0.5, 1.0, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no run with id"));

    /* a failed run that starts again forgets its yardsticks */
    sb_run_info other = run_info("h-again", "gru");
    int64_t id2 = begin_ok(db, &other);
    end_ok(db, id2, SB_RUN_FAILED, "killed", &final_metrics);
    assert_int_equal(sb_results_set_yardsticks(db, id2, 0.5, 2.0, &err), SB_OK);
    assert_int_equal(begin_ok(db, &other), id2);
    row = get_ok(db, "h-again");
    assert_same_double(row.r.ceiling, (double)NAN);
    assert_same_double(row.r.effective_memory, (double)NAN);
    sb_results_run_row_clear(&row);
    sb_results_close(db);
}

/* A small task for the real ideal observer (milliseconds). */
static sb_run_config tiny_run_config(uint64_t seed)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "gru");
    c.feat_size = 16;
    c.seed = seed;
    c.task.grammar.vocab = 9;
    c.task.grammar.amb = 8;
    c.task.grammar.amb_depth = 8;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.dataset_size = 96;
    c.task.test_size = 12;
    return c;
}

/* Inserts a finished run of configuration c with test accuracy acc; returns its id. */
static int64_t finished_run(sb_results *db, const sb_run_config *c, double acc, char hash[17])
{
    sb_run_config_hash(c, 0, hash);
    char *json = sb_run_config_json_string(c, 0);
    assert_non_null(json);
    sb_run_info run = run_info(hash, c->model);
    run.config_json = json;
    int64_t id = begin_ok(db, &run);
    sb_run_metrics m = sb_results_metrics_unknown();
    m.test_acc = acc;
    end_ok(db, id, SB_RUN_FINISHED, NULL, &m);
    free(json);
    return id;
}

/* The ceiling of a task is computed once, then read from the cache; recording a run's
 * yardsticks stores its ceiling and the effective memory of its accuracy; backfill fills
 * a run recorded without them (and writes them back). */
static void test_task_ceiling_cached(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_config cfg = tiny_run_config(1);
    sb_ceiling c1, c2;
    int computed = -1;
    sb_error err = {0};
    if (sb_results_task_ceiling(db, &cfg.task, 1, &c1, &computed, &err) != SB_OK)
        fail_msg("task_ceiling: %s", err.msg);
    assert_int_equal(computed, 1);
    assert_true(c1.expected_acc > 0 && c1.expected_acc <= 1);
    assert_int_equal(sb_results_task_ceiling(db, &cfg.task, 1, &c2, &computed, &err), SB_OK);
    assert_int_equal(computed, 0);
    assert_same_double(c2.expected_acc, c1.expected_acc);
    for (int k = 0; k < SB_CEILING_N_WINDOWS; k++)
        assert_same_double(c2.window_acc[k], c1.window_acc[k]);

    char hash[17];
    int64_t id = finished_run(db, &cfg, 0.5, hash);
    double ceil = 0, mem = 0;
    if (sb_results_record_yardsticks(db, id, &cfg.task, 0.5, 1, &ceil, &mem, &err) != SB_OK)
        fail_msg("record_yardsticks: %s", err.msg);
    assert_same_double(ceil, c1.expected_acc);
    assert_same_double(mem, sb_ceiling_effective_memory(&c1, 0.5));
    sb_run_row row = get_ok(db, hash);
    assert_same_double(row.r.ceiling, c1.expected_acc);
    assert_same_double(row.r.effective_memory, mem);
    sb_results_run_row_clear(&row);

    /* a run recorded without yardsticks (as before they existed) is backfilled */
    sb_run_config cfg2 = tiny_run_config(2);
    cfg2.task.grammar.seed = 2;
    char hash2[17];
    (void)finished_run(db, &cfg2, 0.25, hash2);
    row = get_ok(db, hash2);
    assert_same_double(row.r.ceiling, (double)NAN);
    int filled = -1;
    if (sb_results_fill_yardsticks(db, &row, 1, &filled, &err) != SB_OK)
        fail_msg("fill_yardsticks: %s", err.msg);
    assert_int_equal(filled, 1);
    sb_ceiling c3;
    assert_int_equal(sb_results_task_ceiling(db, &cfg2.task, 1, &c3, &computed, &err), SB_OK);
    assert_int_equal(computed, 0); /* cached by the backfill */
    assert_same_double(row.r.ceiling, c3.expected_acc);
    assert_same_double(row.r.effective_memory, sb_ceiling_effective_memory(&c3, 0.25));
    double want_mem = row.r.effective_memory;
    sb_results_run_row_clear(&row);
    row = get_ok(db, hash2);
    assert_same_double(row.r.ceiling, c3.expected_acc);
    assert_same_double(row.r.effective_memory, want_mem);
    /* nothing more to fill */
    assert_int_equal(sb_results_fill_yardsticks(db, &row, 1, &filled, &err), SB_OK);
    assert_int_equal(filled, 0);
    sb_results_run_row_clear(&row);

    /* a configuration that does not read back: an error naming the run, row unchanged */
    sb_run_info bad = run_info("h-badconfig", "gru");
    bad.config_json = "{\"no_such_key\": 1}";
    int64_t id3 = begin_ok(db, &bad);
    end_ok(db, id3, SB_RUN_FINISHED, NULL, &final_metrics);
    row = get_ok(db, "h-badconfig");
    assert_int_equal(sb_results_fill_yardsticks(db, &row, 1, &filled, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "h-badconfig"));
    assert_same_double(row.r.ceiling, (double)NAN);
    sb_results_run_row_clear(&row);
    sb_results_close(db);
}

/* The schema of version 1, as the first selectivbench wrote it. */
static const char schema_v1_sql[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);\n"
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  hash TEXT UNIQUE NOT NULL CONSTRAINT hash_not_empty CHECK (hash <> ''),\n"
    "  config_json TEXT NOT NULL CONSTRAINT config_is_json CHECK (json_valid(config_json)),\n"
    "  model TEXT,\n"
    "  protocol TEXT CONSTRAINT protocol_known CHECK (protocol IN ('reference', 'clean')),\n"
    "  status TEXT NOT NULL CONSTRAINT status_known\n"
    "    CHECK (status IN ('running', 'finished', 'failed', 'diverged')),\n"
    "  reason TEXT, params INTEGER, state_size INTEGER, flops_per_token REAL,\n"
    "  test_acc REAL, test_loss REAL, train_acc REAL, train_loss REAL, wall_s REAL,\n"
    "  tokens_per_s REAL, code_version TEXT, checkpoint TEXT, started_at TEXT,\n"
    "  finished_at TEXT, host TEXT, attempts INTEGER NOT NULL DEFAULT 1\n"
    ");\n"
    "CREATE INDEX runs_model ON runs (model);\n"
    "CREATE TABLE evaluations (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL CONSTRAINT step_not_negative CHECK (step >= 0),\n"
    "  samples INTEGER,\n"
    "  split TEXT NOT NULL CONSTRAINT split_known CHECK (split IN ('train', 'test')),\n"
    "  loss REAL, acc REAL, lr REAL, tokens_per_s REAL, wall_s REAL,\n"
    "  PRIMARY KEY (run_id, step, split)\n"
    ");\n"
    "INSERT INTO meta VALUES ('schema_version', '1'), ('application', 'selectivbench'),\n"
    "  ('created_at', '2025-01-31T12:00:00.000Z');\n";

/* Writes a version-1 file at path with one finished run of a tiny task (its
 * configuration as run_config writes it) and two evaluations; extra_sql runs last. */
static void write_v1_file(const char *path, const char *extra_sql)
{
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode = WAL", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    if (sqlite3_exec(raw, schema_v1_sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("v1 schema: %s", sqlite3_errmsg(raw));
    sb_run_config cfg = tiny_run_config(1);
    char hash[17];
    sb_run_config_hash(&cfg, 0, hash);
    char *json = sb_run_config_json_string(&cfg, 0);
    assert_non_null(json);
    assert_int_equal(sqlite3_prepare_v2(raw,
                                        "INSERT INTO runs (hash, config_json, model, protocol, "
                                        "status, params, test_acc, test_loss, started_at, "
                                        "finished_at) VALUES (?1, ?2, 'gru', 'reference', "
                                        "'finished', 2929, 0.625, 1.5, "
                                        "'2025-01-31T12:00:00.000Z', '2025-01-31T12:01:00.000Z')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, json, -1, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    free(json);
    assert_int_equal(sqlite3_exec(raw,
                                  "INSERT INTO evaluations (run_id, step, samples, split, loss, "
                                  "acc) VALUES (1, 0, 0, 'test', 2.0, 0.25), "
                                  "(1, 6, 96, 'test', 1.5, 0.625)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    if (extra_sql != NULL && sqlite3_exec(raw, extra_sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("extra SQL: %s", sqlite3_errmsg(raw));
    sqlite3_close(raw); /* checkpoints the WAL into the file */
}

/* A version-1 file: read as it is by a read-only connection (file untouched, runs without
 * yardsticks, backfilled in memory only), upgraded in place by a writable one (columns
 * added, every row and evaluation kept), then usable as a version-2 file. */
static void test_migrate_v1(void **state)
{
    fixture *fx = *state;
    write_v1_file(fx->path, NULL);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_file(fx->path, &n_before);

    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open_readonly(fx->path, &db, &err) != SB_OK)
        fail_msg("open_readonly: %s", err.msg);
    assert_true(sb_results_is_readonly(db));
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_same_double(rows[0].r.test_acc, 0.625);
    assert_same_double(rows[0].r.ceiling, (double)NAN);
    int filled = 0;
    if (sb_results_fill_yardsticks(db, &rows[0], 1, &filled, &err) != SB_OK)
        fail_msg("fill_yardsticks read-only: %s", err.msg);
    assert_int_equal(filled, 1);
    assert_true(rows[0].r.ceiling > 0 && rows[0].r.ceiling <= 1);
    double ceiling_ro = rows[0].r.ceiling, memory_ro = rows[0].r.effective_memory;
    /* the computed ceiling stays with the connection */
    sb_run_config cfg = tiny_run_config(1);
    int computed = -1;
    sb_ceiling c;
    assert_int_equal(sb_results_task_ceiling(db, &cfg.task, 1, &c, &computed, &err), SB_OK);
    assert_int_equal(computed, 0);
    assert_int_equal(sb_results_set_yardsticks(db, rows[0].id, 0.5, 1.0, &err), SB_ERR_IO);
    int64_t id = -1;
    sb_run_info run = run_info("h-ro", "gru");
    assert_int_equal(sb_results_run_begin(db, &run, &id, &err), SB_ERR_IO);
    /* a file before schema 7, read as it is, has no live points (and no table for them) */
    sb_eval_row *live = NULL;
    size_t n_live = 7;
    assert_int_equal(sb_results_list_live(db, rows[0].id, &live, &n_live, &err), SB_OK);
    assert_int_equal(n_live, 0);
    assert_null(live);
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
    unsigned char *after = read_file(fx->path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(after);
    free(before);

    /* a writable connection upgrades it (through versions 2, 3 and 4 to 5) */
    db = open_ok(fx->path);
    sb_results_close(db);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'schema_version'", "7");
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'created_at'",
                    "2025-01-31T12:00:00.000Z");
    assert_raw_text(raw,
                    "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                    "('ceiling', 'effective_memory')",
                    "2");
    /* version 5's columns, NULL for the runs of before */
    assert_raw_text(raw,
                    "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                    "('threads', 'engine', 'fingerprint')",
                    "3");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'ceilings'", "1");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'live'", "1");
    assert_raw_text(raw,
                    "SELECT model || ' ' || status || ' ' || params || ' ' || test_acc || ' ' || "
                    "finished_at FROM runs",
                    "gru finished 2929 0.625 2025-01-31T12:01:00.000Z");
    assert_raw_text(raw, "SELECT ceiling IS NULL AND effective_memory IS NULL FROM runs", "1");
    assert_raw_text(raw, "SELECT count(*) || ' ' || sum(step) FROM evaluations", "2 6");
    assert_raw_text(raw, "PRAGMA integrity_check", "ok");
    sqlite3_close(raw);

    /* and it is a current database now: backfill writes, new runs carry yardsticks */
    db = open_ok(fx->path);
    assert_false(sb_results_is_readonly(db));
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    if (sb_results_fill_yardsticks(db, &rows[0], 1, &filled, &err) != SB_OK)
        fail_msg("fill_yardsticks: %s", err.msg);
    assert_int_equal(filled, 1);
    assert_same_double(rows[0].r.ceiling, ceiling_ro);
    assert_same_double(rows[0].r.effective_memory, memory_ro);
    sb_eval_row *evals = NULL;
    size_t n_evals = 0;
    assert_int_equal(sb_results_list_evals(db, rows[0].id, &evals, &n_evals, &err), SB_OK);
    assert_int_equal(n_evals, 2);
    free(evals);
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
    raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT ceiling IS NOT NULL FROM runs", "1");
    assert_raw_text(raw, "SELECT count(*) FROM ceilings", "1");
    sqlite3_close(raw);
}

/* Version 2 as the second selectivbench wrote it: version 1 with the yardsticks and the
 * ceilings table, a finished run (with yardsticks and evaluations), a failed run with
 * evaluations, and a cached ceiling. */
static const char v2_extra_sql[] =
    "ALTER TABLE runs ADD COLUMN ceiling REAL;\n"
    "ALTER TABLE runs ADD COLUMN effective_memory REAL;\n"
    "CREATE TABLE ceilings (\n"
    "  hash TEXT PRIMARY KEY NOT NULL CONSTRAINT ceiling_hash_not_empty CHECK (hash <> ''),\n"
    "  config_json TEXT NOT NULL\n"
    "    CONSTRAINT ceiling_config_is_json CHECK (json_valid(config_json)),\n"
    "  ceiling_json TEXT NOT NULL CONSTRAINT ceiling_is_json CHECK (json_valid(ceiling_json)),\n"
    "  created_at TEXT NOT NULL\n"
    ");\n"
    "UPDATE meta SET value = '2' WHERE key = 'schema_version';\n"
    "UPDATE runs SET ceiling = 0.75, effective_memory = 3.5, attempts = 2 WHERE id = 1;\n"
    "INSERT INTO runs (id, hash, config_json, model, protocol, status, reason, started_at, "
    "  checkpoint) VALUES (7, 'h-failed', '{\"model\": \"gla\"}', 'gla', 'clean', 'failed', "
    "  'killed by signal 15', '2025-02-01T00:00:00.000Z', 'ck/h-failed.safetensors');\n"
    "INSERT INTO evaluations (run_id, step, samples, split, loss, acc) VALUES "
    "  (7, 5, 80, 'test', 1.75, 0.5), (7, 5, 80, 'train', 1.5, 0.5), "
    "  (7, 10, 160, 'test', 1.25, 0.625);\n"
    "INSERT INTO ceilings VALUES ('c1', '{}', '{\"expected_acc\": 0.75}', "
    "  '2025-02-01T00:00:00.000Z');\n";

/* A version-2 file: read as it is by a read-only connection (untouched), upgraded in place
 * by a writable one: the runs table rebuilt with 'interrupted' allowed, every run with its
 * id, columns and yardsticks, every evaluation still attached (the rebuild must not
 * cascade), the index, foreign keys enforced again; then an interrupted run records. */
static void test_migrate_v2(void **state)
{
    fixture *fx = *state;
    write_v1_file(fx->path, v2_extra_sql);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_file(fx->path, &n_before);

    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open_readonly(fx->path, &db, &err) != SB_OK)
        fail_msg("open_readonly: %s", err.msg);
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].r.status, SB_RUN_FINISHED);
    assert_same_double(rows[0].r.ceiling, 0.75);
    assert_int_equal(rows[1].r.status, SB_RUN_FAILED);
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
    unsigned char *after = read_file(fx->path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(after);
    free(before);

    db = open_ok(fx->path);
    sb_results_close(db);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'schema_version'", "7");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_new'", "0");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_model'", "1");
    assert_raw_text(raw,
                    "SELECT group_concat(id || ' ' || model || ' ' || status || ' ' || "
                    "attempts || ' ' || coalesce(ceiling, '-') || ' ' || "
                    "coalesce(effective_memory, '-') || ' ' || coalesce(checkpoint, '-') || "
                    "' ' || coalesce(reason, '-'), '; ') FROM runs",
                    "1 gru finished 2 0.75 3.5 - -; "
                    "7 gla failed 1 - - ck/h-failed.safetensors killed by signal 15");
    assert_raw_text(raw, "SELECT hash FROM runs WHERE id = 7", "h-failed");
    /* upgrade 4: no rank, one rank's training, for the runs already there */
    assert_raw_text(raw,
                    "SELECT group_concat(coalesce(rank, '-') || ' ' || world_size, '; ') "
                    "FROM runs",
                    "- 1; - 1");
    assert_raw_text(raw,
                    "SELECT group_concat(run_id || ':' || step || ':' || split, ' ') FROM "
                    "(SELECT * FROM evaluations ORDER BY run_id, step, split)",
                    "1:0:test 1:6:test 7:5:test 7:5:train 7:10:test");
    assert_raw_text(raw, "SELECT count(*) FROM pragma_foreign_key_check", "0");
    assert_raw_text(raw, "SELECT count(*) FROM ceilings", "1");
    /* upgrade 6: no validation split for the runs already there; the evaluations table
     * rebuilt (no leftover), its rows kept (checked above) */
    assert_raw_text(raw,
                    "SELECT group_concat(coalesce(valid_acc, '-') || ' ' || "
                    "coalesce(valid_loss, '-'), '; ') FROM runs",
                    "- -; - -");
    assert_raw_text(raw, "SELECT count(*) FROM sqlite_master WHERE name = 'evaluations_new'", "0");
    assert_raw_text(raw, "PRAGMA integrity_check", "ok");
    sqlite3_close(raw);

    /* the new status records; foreign keys are on again (a deleted run takes its
     * evaluations with it); an evaluation of the validation split records, and the run's
     * validation accuracy with its end */
    db = open_ok(fx->path);
    sb_run_info failed = run_info("h-failed", "gla");
    failed.keep_evaluations = 1;
    int64_t id = begin_ok(db, &failed);
    assert_int_equal(id, 7);
    sb_eval_row valid = {.step = 12,
                         .samples = 192,
                         .split = SB_SPLIT_VALID,
                         .loss = 1.0,
                         .acc = 0.625,
                         .lr = (double)NAN,
                         .tokens_per_s = (double)NAN,
                         .wall_s = (double)NAN};
    assert_int_equal(sb_results_add_eval(db, id, &valid, &err), SB_OK);
    sb_run_metrics with_valid = final_metrics;
    with_valid.valid_acc = 0.625;
    with_valid.valid_loss = 1.0;
    end_ok(db, id, SB_RUN_INTERRUPTED, "interrupted at update 12 of 40", &with_valid);
    sb_run_row row = get_ok(db, "h-failed");
    assert_int_equal(row.r.status, SB_RUN_INTERRUPTED);
    assert_int_equal(row.r.attempts, 2);
    assert_same_double(row.r.valid_acc, 0.625);
    assert_same_double(row.r.valid_loss, 1.0);
    sb_results_run_row_clear(&row);
    sb_eval_row *evals = NULL;
    size_t n_evals = 0;
    assert_int_equal(sb_results_list_evals(db, id, &evals, &n_evals, &err), SB_OK);
    int valid_rows = 0;
    for (size_t i = 0; i < n_evals; i++)
        valid_rows += evals[i].split == SB_SPLIT_VALID && evals[i].step == 12;
    assert_int_equal(valid_rows, 1);
    free(evals);
    int deleted = 0;
    assert_int_equal(sb_results_delete_run(db, "h-failed", &deleted, &err), SB_OK);
    assert_int_equal(deleted, 1);
    sb_results_close(db);
    raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT count(*) FROM evaluations", "2");
    sqlite3_close(raw);
}

/* A version-1 file whose upgrade cannot be done (a damaged file: its runs table is not
 * there) is refused with the reason and left byte for byte as it was, still version 1.
 * read-only opens of missing files fail without creating them. */
static void test_migrate_refused(void **state)
{
    fixture *fx = *state;
    write_v1_file(fx->path, "DROP TABLE evaluations; DROP TABLE runs;");
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_file(fx->path, &n_before);
    sb_results *db = (sb_results *)&db;
    sb_error err = {0};
    assert_int_equal(sb_results_open(fx->path, &db, &err), SB_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, fx->path));
    assert_non_null(strstr(err.msg, "cannot upgrade the schema from version 1 to 7"));
    unsigned char *after = read_file(fx->path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(before);
    free(after);
    sqlite3 *raw = raw_open(fx->path);
    assert_raw_text(raw, "SELECT value FROM meta WHERE key = 'schema_version'", "1");
    sqlite3_close(raw);

    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing.db", fx->dir);
    assert_int_equal(sb_results_open_readonly(missing, &db, &err), SB_ERR_IO);
    assert_null(db);
    assert_non_null(strstr(err.msg, missing));
    assert_false(file_exists(missing));
}

/* ---- merging shard databases ------------------------------------------------------------- */

typedef struct merge_seen {
    int n;
    char hash[32];
    double kept_acc, other_acc;
} merge_seen;

static void merge_conflict(const char *run_hash, const char *model, const char *status,
                           double test_acc, const char *source_path, const char *source_status,
                           double source_test_acc, void *user)
{
    (void)model, (void)status, (void)source_path, (void)source_status;
    merge_seen *seen = user;
    seen->n++;
    snprintf(seen->hash, sizeof seen->hash, "%s", run_hash);
    seen->kept_acc = test_acc;
    seen->other_acc = source_test_acc;
}

static void run_ended(sb_results *db, const char *hash, sb_run_status status, double acc,
                      int n_evals)
{
    sb_run_info run = run_info(hash, "gru");
    int64_t id = begin_ok(db, &run);
    for (int k = 1; k <= n_evals; k++)
        eval_ok(db, id, 10 * k, SB_SPLIT_TEST, 1.0 / k, acc * k / n_evals);
    sb_run_metrics m = final_metrics;
    m.test_acc = acc;
    end_ok(db, id, status, status == SB_RUN_FINISHED ? NULL : "a reason", &m);
}

static size_t evals_of(sb_results *db, const char *hash)
{
    sb_run_row row = get_ok(db, hash);
    sb_eval_row *evals = NULL;
    size_t n = 0;
    sb_error err = {0};
    if (sb_results_list_evals(db, row.id, &evals, &n, &err) != SB_OK)
        fail_msg("list_evals: %s", err.msg);
    free(evals);
    sb_results_run_row_clear(&row);
    return n;
}

static void assert_status_acc(sb_results *db, const char *hash, sb_run_status status, double acc)
{
    sb_run_row row = get_ok(db, hash);
    assert_int_equal(row.r.status, status);
    assert_same_double(row.r.test_acc, acc);
    sb_results_run_row_clear(&row);
}

/* results merge: added, replaced (further along there), the same, kept (further along
 * here), a conflict (ended differently in both) reported and ours kept; evaluations and
 * cached ceilings copied; a second merge changes nothing; refusals. */
/* A coordinator's round trip: sb_results_extract_run writes a new file with one run (its
 * evaluations and the cached ceilings) and refuses an existing file; sb_results_take_run
 * puts the worker's attempt back over ours whatever the statuses (a failed retry replaces
 * an interrupted row), touching no other run. */
static void test_extract_take(void **state)
{
    fixture *fx = *state;
    char seed[700];
    snprintf(seed, sizeof seed, "%s/seed.db", fx->dir);
    sb_results *db = open_ok(fx->path);
    run_ended(db, "h-a", SB_RUN_INTERRUPTED, 0.25, 2);
    run_ended(db, "h-b", SB_RUN_FINISHED, 0.5, 3);
    sb_error err = {0};
    sb_ceiling c = sample_ceiling(0.875);
    if (sb_results_put_ceiling(db, "0123456789abcdef", "{\"vocab\": 9}", &c, &err) != SB_OK)
        fail_msg("put_ceiling: %s", err.msg);
    int found = 0;
    if (sb_results_extract_run(db, "h-a", seed, &found, &err) != SB_OK)
        fail_msg("extract: %s", err.msg);
    assert_true(found);
    assert_int_equal(sb_results_extract_run(db, "h-a", seed, &found, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "exists"));

    sb_results *w = open_ok(seed);
    size_t n = 0;
    assert_int_equal(sb_results_count(w, NULL, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_status_acc(w, "h-a", SB_RUN_INTERRUPTED, 0.25);
    assert_int_equal(evals_of(w, "h-a"), 2);
    sb_ceiling back;
    int cached = 0;
    assert_int_equal(sb_results_get_ceiling(w, "0123456789abcdef", &back, &cached, &err), SB_OK);
    assert_true(cached);
    /* the worker's attempt: the row ends failed, with one evaluation */
    sb_results_close(w);
    remove(seed);
    w = open_ok(seed);
    run_ended(w, "h-a", SB_RUN_FAILED, 0.125, 1);
    sb_results_close(w);

    if (sb_results_take_run(db, seed, "h-a", &found, &err) != SB_OK)
        fail_msg("take: %s", err.msg);
    assert_true(found);
    assert_status_acc(db, "h-a", SB_RUN_FAILED, 0.125);
    assert_int_equal(evals_of(db, "h-a"), 1);
    assert_status_acc(db, "h-b", SB_RUN_FINISHED, 0.5);
    assert_int_equal(evals_of(db, "h-b"), 3);
    if (sb_results_take_run(db, seed, "h-b", &found, &err) != SB_OK)
        fail_msg("take of a run the source lacks: %s", err.msg);
    assert_false(found);
    assert_status_acc(db, "h-b", SB_RUN_FINISHED, 0.5);
    sb_results_close(db);
}

static void test_merge(void **state)
{
    fixture *fx = *state;
    char other[700];
    snprintf(other, sizeof other, "%s/shard.db", fx->dir);
    sb_results *db = open_ok(fx->path), *src = open_ok(other);
    run_ended(db, "h-same", SB_RUN_FINISHED, 0.875, 2);
    run_ended(src, "h-same", SB_RUN_FINISHED, 0.875, 2);
    run_ended(db, "h-failed-here", SB_RUN_FAILED, 0.125, 1);
    run_ended(src, "h-failed-here", SB_RUN_FINISHED, 0.75, 3);
    run_ended(db, "h-stopped-here", SB_RUN_INTERRUPTED, 0.25, 2);
    run_ended(src, "h-stopped-here", SB_RUN_FAILED, 0.125, 1);
    run_ended(db, "h-conflict", SB_RUN_FINISHED, 0.5, 1);
    run_ended(src, "h-conflict", SB_RUN_FINISHED, 0.625, 1);
    run_ended(src, "h-new", SB_RUN_DIVERGED, 0.0625, 4);
    sb_error err = {0};
    sb_ceiling c = sample_ceiling(0.875);
    if (sb_results_put_ceiling(src, "0123456789abcdef", "{\"vocab\": 9}", &c, &err) != SB_OK)
        fail_msg("put_ceiling: %s", err.msg);
    sb_results_close(src);

    sb_results_merge_tally t;
    merge_seen seen = {0};
    if (sb_results_merge(db, other, &t, merge_conflict, &seen, &err) != SB_OK)
        fail_msg("merge: %s", err.msg);
    assert_int_equal(t.added, 1);
    assert_int_equal(t.replaced, 1);
    assert_int_equal(t.same, 1);
    assert_int_equal(t.kept, 1);
    assert_int_equal(t.conflicts, 1);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.hash, "h-conflict");
    assert_same_double(seen.kept_acc, 0.5);
    assert_same_double(seen.other_acc, 0.625);
    assert_status_acc(db, "h-failed-here", SB_RUN_FINISHED, 0.75);
    assert_int_equal(evals_of(db, "h-failed-here"), 3); /* the source's, not ours */
    assert_status_acc(db, "h-stopped-here", SB_RUN_INTERRUPTED, 0.25);
    assert_status_acc(db, "h-conflict", SB_RUN_FINISHED, 0.5);
    assert_status_acc(db, "h-new", SB_RUN_DIVERGED, 0.0625);
    assert_int_equal(evals_of(db, "h-new"), 4);
    sb_run_row copied = get_ok(db, "h-new");
    assert_string_equal(copied.r.host, "worker-1"); /* every column comes along */
    assert_int_equal(copied.r.params, 123456);
    sb_results_run_row_clear(&copied);
    sb_ceiling got;
    int found = 0;
    assert_int_equal(sb_results_get_ceiling(db, "0123456789abcdef", &got, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    assert_same_double(got.expected_acc, c.expected_acc);

    /* twice: nothing changes (the conflict is reported again) */
    sb_run_row *before = NULL, *after = NULL;
    size_t n_before = 0, n_after = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &before, &n_before, &err), SB_OK);
    seen.n = 0;
    assert_int_equal(sb_results_merge(db, other, &t, merge_conflict, &seen, &err), SB_OK);
    assert_int_equal(t.added + t.replaced, 0);
    assert_int_equal(t.same, 3);
    assert_int_equal(t.kept, 1);
    assert_int_equal(t.conflicts, 1);
    assert_int_equal(seen.n, 1);
    assert_int_equal(sb_results_list_runs(db, NULL, &after, &n_after, &err), SB_OK);
    assert_int_equal(n_after, n_before);
    assert_int_equal(n_after, 5);
    for (size_t i = 0; i < n_after; i++) {
        assert_string_equal(after[i].r.run_hash, before[i].r.run_hash);
        assert_int_equal(after[i].r.status, before[i].r.status);
        assert_int_equal(after[i].id, before[i].id);
        assert_same_double(after[i].r.test_acc, before[i].r.test_acc);
    }
    for (size_t i = 0; i < n_after; i++) {
        sb_results_run_row_clear(&before[i]);
        sb_results_run_row_clear(&after[i]);
    }
    free(before);
    free(after);
    int ok = 0;
    assert_int_equal(sb_results_integrity_check(db, &ok, &err), SB_OK);
    assert_true(ok);

    /* refusals: itself, a missing file, a file that is not a results database */
    assert_int_equal(sb_results_merge(db, fx->path, &t, NULL, NULL, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "is the database merged into"));
    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing.db", fx->dir);
    assert_int_equal(sb_results_merge(db, missing, &t, NULL, NULL, &err), SB_ERR_IO);
    assert_int_equal(t.added, 0);
    sb_results_close(db);
}

static void live_ok(sb_results *db, int64_t id, int64_t step, double loss)
{
    sb_eval_row e = {.step = step,
                     .samples = step * 64,
                     .split = SB_SPLIT_TRAIN,
                     .loss = loss,
                     .acc = 0.5,
                     .lr = 1e-3,
                     .tokens_per_s = 5000.0,
                     .wall_s = 0.25 * (double)step};
    sb_error err = {0};
    if (sb_results_add_live(db, id, &e, &err) != SB_OK)
        fail_msg("add_live: %s", err.msg);
}

static size_t live_of(sb_results *db, const char *hash, sb_eval_row **rows)
{
    sb_run_row row = get_ok(db, hash);
    size_t n = 0;
    sb_error err = {0};
    if (sb_results_list_live(db, row.id, rows, &n, &err) != SB_OK)
        fail_msg("list_live: %s", err.msg);
    sb_results_run_row_clear(&row);
    return n;
}

/* Live points (schema 7): written and read back apart from the evaluations, checked like
 * them, dropped past a resume's step and by a restart, copied by a merge. */
static void test_live_points(void **state)
{
    fixture *fx = *state;
    sb_results *db = open_ok(fx->path);
    sb_run_info run = run_info("h-live", "gru");
    int64_t id = begin_ok(db, &run);
    eval_ok(db, id, 10, SB_SPLIT_TEST, 1.5, 0.25);
    live_ok(db, id, 30, 0.75);
    live_ok(db, id, 20, 1.25);
    live_ok(db, id, 30, 0.5); /* the same step again replaces it */
    sb_eval_row *rows = NULL;
    assert_int_equal(live_of(db, "h-live", &rows), 2);
    assert_int_equal(rows[0].step, 20);
    assert_int_equal(rows[1].step, 30);
    assert_int_equal(rows[0].split, SB_SPLIT_TRAIN);
    assert_int_equal(rows[1].samples, 30 * 64);
    assert_same_double(rows[1].loss, 0.5);
    assert_same_double(rows[1].wall_s, 7.5);
    free(rows);
    assert_int_equal(evals_of(db, "h-live"), 1); /* not evaluations */
    /* checked as evaluations are */
    sb_error err = {0};
    sb_eval_row bad = {.step = 40,
                       .samples = 1,
                       .split = SB_SPLIT_TRAIN,
                       .loss = 0.5,
                       .acc = 7.0,
                       .lr = 1e-3,
                       .tokens_per_s = 1.0,
                       .wall_s = 1.0};
    assert_int_equal(sb_results_add_live(db, id, &bad, &err), SB_ERR_INVALID);
    /* a resume from step 20 drops what came after */
    assert_int_equal(sb_results_delete_evals_after(db, id, 20, &err), SB_OK);
    assert_int_equal(live_of(db, "h-live", &rows), 1);
    free(rows);
    /* a merge copies them with the run */
    live_ok(db, id, 25, 0.625);
    end_ok(db, id, SB_RUN_FINISHED, NULL, &final_metrics);
    sb_results_close(db);
    char other[700];
    snprintf(other, sizeof other, "%s/merged.db", fx->dir);
    sb_results *dst = open_ok(other);
    sb_results_merge_tally t;
    assert_int_equal(sb_results_merge(dst, fx->path, &t, NULL, NULL, &err), SB_OK);
    assert_int_equal(t.added, 1);
    assert_int_equal(live_of(dst, "h-live", &rows), 2);
    assert_int_equal(rows[1].step, 25);
    free(rows);
    sb_results_close(dst);
    /* a restart (an unfinished run begun again, not resumed) forgets them */
    db = open_ok(fx->path);
    sb_run_info second = run_info("h-again", "gru");
    int64_t id2 = begin_ok(db, &second);
    live_ok(db, id2, 5, 1.0);
    assert_int_equal(begin_ok(db, &second), id2);
    assert_int_equal(live_of(db, "h-again", &rows), 0);
    assert_null(rows);
    sb_results_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_close_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_take, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finished_run_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_run_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_waits_for_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_best_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_leaves_out_diverged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ceiling_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_yardsticks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_ceiling_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_run_settled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_points, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

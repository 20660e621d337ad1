/*
 * results.c - the results database on SQLite (see results.h for the schema and the life
 * of a run).
 *
 * Values only ever reach SQLite as bound parameters; no SQL text is built from them.
 * Writes that read before they write, or touch several rows, run in BEGIN IMMEDIATE
 * transactions: taking the write lock first lets the busy timeout wait for the other
 * workers, where a deferred transaction that upgrades from read to write would fail at
 * once with SQLITE_BUSY. A single INSERT runs in SQLite's implicit transaction. CHECK and
 * FOREIGN KEY constraints in the schema back up the checks done here, so a rejected value
 * never reaches the file.
 */
#include "exp/results.h"
#include "core/fs.h"
#include "exp/experiment.h"

#include "core/json_writer.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A ceiling kept in memory by a read-only connection (sb_results_put_ceiling). */
typedef struct results_memo {
    char *hash;
    sb_ceiling c;
} results_memo;

struct sb_results {
    sqlite3 *db;
    char *path;      /* as given to sb_results_open, for messages */
    int readonly;    /* opened with sb_results_open_readonly */
    int64_t version; /* the file's schema version (< current only when read-only) */
    results_memo *memo;
    int n_memo;
};

/* Timestamps: UTC ISO-8601 with milliseconds, from SQLite's clock. */
#define RESULTS_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

/* Version 1, as the first selectivbench wrote it; a new file gets it and then every
 * upgrade below, so new and upgraded files have the same tables. */
static const char results_schema_sql[] =
    "CREATE TABLE meta (\n"
    "  key TEXT PRIMARY KEY NOT NULL,\n"
    "  value TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  hash TEXT UNIQUE NOT NULL CONSTRAINT hash_not_empty CHECK (hash <> ''),\n"
    "  config_json TEXT NOT NULL CONSTRAINT config_is_json CHECK (json_valid(config_json)),\n"
    "  model TEXT,\n"
    "  protocol TEXT CONSTRAINT protocol_known CHECK (protocol IN ('reference', 'clean')),\n"
    "  status TEXT NOT NULL CONSTRAINT status_known\n"
    "    CHECK (status IN ('running', 'finished', 'failed', 'diverged')),\n"
    "  reason TEXT,\n"
    "  params INTEGER,\n"
    "  state_size INTEGER,\n"
    "  flops_per_token REAL,\n"
    "  test_acc REAL,\n"
    "  test_loss REAL,\n"
    "  train_acc REAL,\n"
    "  train_loss REAL,\n"
    "  wall_s REAL,\n"
    "  tokens_per_s REAL,\n"
    "  code_version TEXT,\n"
    "  checkpoint TEXT,\n"
    "  started_at TEXT,\n"
    "  finished_at TEXT,\n"
    "  host TEXT,\n"
    "  attempts INTEGER NOT NULL DEFAULT 1\n"
    ");\n"
    "CREATE INDEX runs_model ON runs (model);\n"
    "CREATE TABLE evaluations (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL CONSTRAINT step_not_negative CHECK (step >= 0),\n"
    "  samples INTEGER,\n"
    "  split TEXT NOT NULL CONSTRAINT split_known CHECK (split IN ('train', 'test')),\n"
    "  loss REAL,\n"
    "  acc REAL,\n"
    "  lr REAL,\n"
    "  tokens_per_s REAL,\n"
    "  wall_s REAL,\n"
    "  PRIMARY KEY (run_id, step, split)\n"
    ");\n";

/* Version 1 -> 2: the yardsticks of a run and the cache of ceilings (results.h). */
static const char results_upgrade_2_sql[] =
    "ALTER TABLE runs ADD COLUMN ceiling REAL;\n"
    "ALTER TABLE runs ADD COLUMN effective_memory REAL;\n"
    "CREATE TABLE ceilings (\n"
    "  hash TEXT PRIMARY KEY NOT NULL CONSTRAINT ceiling_hash_not_empty CHECK (hash <> ''),\n"
    "  config_json TEXT NOT NULL\n"
    "    CONSTRAINT ceiling_config_is_json CHECK (json_valid(config_json)),\n"
    "  ceiling_json TEXT NOT NULL CONSTRAINT ceiling_is_json CHECK (json_valid(ceiling_json)),\n"
    "  created_at TEXT NOT NULL\n"
    ");\n";

/* Every column of the runs table since version 2, in table order. */
#define RESULTS_RUN_COLUMNS_ALL                                                                    \
    "id, hash, config_json, model, protocol, status, reason, params, state_size, "                 \
    "flops_per_token, test_acc, test_loss, train_acc, train_loss, wall_s, tokens_per_s, "          \
    "code_version, checkpoint, started_at, finished_at, host, attempts, ceiling, effective_memory"

/* Version 2 -> 3: status 'interrupted' (a run stopped by a signal, resumable from its
 * checkpoint). SQLite cannot change a CHECK constraint in place, so the runs table is
 * rebuilt as SQLite's documentation describes (lang_altertable.html, "other kinds of table
 * schema changes"): a new table, the rows copied with their ids, the old table dropped, the
 * new one renamed, its index made again. It runs with foreign keys off (results_init turns
 * them on after the upgrade's transaction), otherwise dropping the old table would delete
 * every evaluation through ON DELETE CASCADE; the evaluations keep pointing at the same ids,
 * which results_upgrade checks with PRAGMA foreign_key_check before committing. */
static const char results_upgrade_3_sql[] =
    "CREATE TABLE runs_new (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  hash TEXT UNIQUE NOT NULL CONSTRAINT hash_not_empty CHECK (hash <> ''),\n"
    "  config_json TEXT NOT NULL CONSTRAINT config_is_json CHECK (json_valid(config_json)),\n"
    "  model TEXT,\n"
    "  protocol TEXT CONSTRAINT protocol_known CHECK (protocol IN ('reference', 'clean')),\n"
    "  status TEXT NOT NULL CONSTRAINT status_known\n"
    "    CHECK (status IN ('running', 'finished', 'failed', 'diverged', 'interrupted')),\n"
    "  reason TEXT,\n"
    "  params INTEGER,\n"
    "  state_size INTEGER,\n"
    "  flops_per_token REAL,\n"
    "  test_acc REAL,\n"
    "  test_loss REAL,\n"
    "  train_acc REAL,\n"
    "  train_loss REAL,\n"
    "  wall_s REAL,\n"
    "  tokens_per_s REAL,\n"
    "  code_version TEXT,\n"
    "  checkpoint TEXT,\n"
    "  started_at TEXT,\n"
    "  finished_at TEXT,\n"
    "  host TEXT,\n"
    "  attempts INTEGER NOT NULL DEFAULT 1,\n"
    "  ceiling REAL,\n"
    "  effective_memory REAL\n"
    ");\n"
    "INSERT INTO runs_new (" RESULTS_RUN_COLUMNS_ALL ")\n"
    "  SELECT " RESULTS_RUN_COLUMNS_ALL " FROM runs;\n"
    "DROP TABLE runs;\n"
    "ALTER TABLE runs_new RENAME TO runs;\n"
    "CREATE INDEX runs_model ON runs (model);\n";

/* Version 3 -> 4: where a run ran, for sweeps over several processes and machines: the MPI
 * rank that trained it (NULL outside an MPI sweep) and the number of data-parallel ranks
 * its training used (1 for every run before). */
static const char results_upgrade_4_sql[] =
    "ALTER TABLE runs ADD COLUMN rank INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1;\n";

/* Version 4 -> 5: what a run's bits depend on besides its configuration: the thread count,
 * the engine table and the fingerprint (tensor/gemm_engine.h), NULL for the runs before. */
static const char results_upgrade_5_sql[] = "ALTER TABLE runs ADD COLUMN threads INTEGER;\n"
                                            "ALTER TABLE runs ADD COLUMN engine TEXT;\n"
                                            "ALTER TABLE runs ADD COLUMN fingerprint TEXT;\n";

/* Version 5 -> 6: the validation split (docs/task.md, "Splits"): a run's final validation
 * accuracy and loss, NULL for the runs before, and evaluation rows of split 'valid'. The
 * split's CHECK constraint changes, so the evaluations table is rebuilt as the runs table
 * was for version 3 (with foreign keys off, checked before committing). */
static const char results_upgrade_6_sql[] =
    "ALTER TABLE runs ADD COLUMN valid_acc REAL;\n"
    "ALTER TABLE runs ADD COLUMN valid_loss REAL;\n"
    "CREATE TABLE evaluations_new (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL CONSTRAINT step_not_negative CHECK (step >= 0),\n"
    "  samples INTEGER,\n"
    "  split TEXT NOT NULL CONSTRAINT split_known CHECK (split IN ('train', 'test', 'valid')),\n"
    "  loss REAL,\n"
    "  acc REAL,\n"
    "  lr REAL,\n"
    "  tokens_per_s REAL,\n"
    "  wall_s REAL,\n"
    "  PRIMARY KEY (run_id, step, split)\n"
    ");\n"
    "INSERT INTO evaluations_new (run_id, step, samples, split, loss, acc, lr, tokens_per_s, "
    "wall_s)\n"
    "  SELECT run_id, step, samples, split, loss, acc, lr, tokens_per_s, wall_s FROM evaluations;\n"
    "DROP TABLE evaluations;\n"
    "ALTER TABLE evaluations_new RENAME TO evaluations;\n";

/* Version 6 -> 7: live points, the training means a running run writes every --live_every
 * seconds for the dashboard (docs/dashboard.md), in a table of their own: they are not
 * evaluations, and no figure or verdict reads them. */
static const char results_upgrade_7_sql[] =
    "CREATE TABLE live (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL CONSTRAINT live_step_not_negative CHECK (step >= 0),\n"
    "  samples INTEGER,\n"
    "  loss REAL,\n"
    "  acc REAL,\n"
    "  lr REAL,\n"
    "  tokens_per_s REAL,\n"
    "  wall_s REAL,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ");\n";

/* Columns of a run, in the order results_read_run reads them; a version-1 file (read-only)
 * has no yardsticks, read as NULL, and a file before version 4 no rank (NULL) and
 * world_size (1). */
#define RESULTS_RUN_COLUMNS_V1                                                                     \
    "id, hash, config_json, model, protocol, status, reason, params, state_size, "                 \
    "flops_per_token, test_acc, test_loss, train_acc, train_loss, wall_s, tokens_per_s, "          \
    "code_version, checkpoint, host, started_at, finished_at, attempts"
#define RESULTS_RUN_COLUMNS                                                                        \
    RESULTS_RUN_COLUMNS_V1 ", ceiling, effective_memory, rank, world_size, threads, engine, "      \
                           "fingerprint, valid_acc, valid_loss"

static const char *results_run_columns(const sb_results *r)
{
    if (r->version >= 6)
        return RESULTS_RUN_COLUMNS;
    if (r->version >= 5)
        return RESULTS_RUN_COLUMNS_V1 ", ceiling, effective_memory, rank, world_size, threads, "
                                      "engine, fingerprint, NULL, NULL";
    if (r->version >= 4)
        return RESULTS_RUN_COLUMNS_V1 ", ceiling, effective_memory, rank, world_size, NULL, NULL, "
                                      "NULL, NULL, NULL";
    if (r->version >= 2)
        return RESULTS_RUN_COLUMNS_V1 ", ceiling, effective_memory, NULL, 1, NULL, NULL, NULL, "
                                      "NULL, NULL";
    return RESULTS_RUN_COLUMNS_V1 ", NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL";
}

/* ---- errors ------------------------------------------------------------------------- */

/* Bad values are the caller's (invalid); everything else is the file's (i/o). */
static sb_status results_status_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG: return SB_ERR_INVALID;
    case SQLITE_NOMEM: return SB_ERR_NOMEM;
    default: return SB_ERR_IO;
    }
}

/* What to do about a failed call, appended to the message. */
static const char *results_hint(int rc)
{
    if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
        return "; no run has this id";
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "; another process held the write lock past the busy timeout";
    case SQLITE_FULL: return "; the disk is full";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN: return "; check that the file and its folder exist and are writable";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "; the file is damaged or is not a results database";
    default: return "";
    }
}

/* Records "results database 'PATH': WHAT: sqlite message; hint" for the failed call rc.
 * Call it before any other SQLite call on the connection, which would replace the
 * message. */
static sb_status results_fail(const sb_results *r, int rc, sb_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sb_status results_fail(const sb_results *r, int rc, sb_error *err, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sb_error_set(err, results_status_of(rc), "results database '%s': %s: %s%s", r->path,
                        what, sqlite3_errmsg(r->db), results_hint(rc));
}

/* ---- binding and reading values ------------------------------------------------------ */

/* Each binder does nothing when rc already reports a failure, and returns the first
 * failure, so a statement's binds read as a straight list. */
static int results_bind_text(int rc, sqlite3_stmt *st, int i, const char *s)
{
    if (rc != SQLITE_OK)
        return rc;
    /* SQLITE_STATIC: the strings outlive the statement, which is finalized in the call */
    return s == NULL ? sqlite3_bind_null(st, i) : sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

static int results_bind_int(int rc, sqlite3_stmt *st, int i, int64_t v)
{
    return rc != SQLITE_OK ? rc : sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* A count that may be unknown: negative values are stored as NULL. */
static int results_bind_count(int rc, sqlite3_stmt *st, int i, int64_t v)
{
    if (rc != SQLITE_OK)
        return rc;
    return v < 0 ? sqlite3_bind_null(st, i) : sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* A metric that may be unknown: NaN is stored as NULL (infinities are kept). */
static int results_bind_real(int rc, sqlite3_stmt *st, int i, double v)
{
    if (rc != SQLITE_OK)
        return rc;
    return isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

/* Copies text column i into *out (NULL for SQL NULL); returns SQLITE_NOMEM on failure. */
static int results_col_text(sqlite3_stmt *st, int i, char **out)
{
    *out = NULL;
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return SQLITE_OK;
    const unsigned char *text = sqlite3_column_text(st, i);
    if (text == NULL)
        return SQLITE_NOMEM;
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    *out = malloc(n + 1);
    if (*out == NULL)
        return SQLITE_NOMEM;
    memcpy(*out, text, n);
    (*out)[n] = '\0';
    return SQLITE_OK;
}

static double results_col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? (double)NAN : sqlite3_column_double(st, i);
}

static int64_t results_col_count(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : (int64_t)sqlite3_column_int64(st, i);
}

/* The status in column i: SB_RUN_NONE for NULL or a name the table does not have (only a
 * damaged file has either: the column is checked against the names). */
static sb_run_status results_col_status(sqlite3_stmt *st, int i)
{
    const unsigned char *text = sqlite3_column_text(st, i);
    sb_run_status s = SB_RUN_NONE;
    if (text == NULL || sb_run_status_parse((const char *)text, &s, NULL) != SB_OK)
        return SB_RUN_NONE;
    return s;
}

/* Copies the text of column i into dst[size] ("" for NULL; a longer text is cut);
 * SQLITE_NOMEM when SQLite could not make the text of a value that is there. */
static int results_col_copy(sqlite3_stmt *st, int i, char *dst, size_t size)
{
    const unsigned char *text = sqlite3_column_text(st, i);
    snprintf(dst, size, "%s", text != NULL ? (const char *)text : "");
    return text == NULL && sqlite3_column_type(st, i) != SQLITE_NULL ? SQLITE_NOMEM : SQLITE_OK;
}

/* Fills row from a statement that selected RESULTS_RUN_COLUMNS; on SQLITE_NOMEM the row
 * is cleared. */
static int results_read_run(sqlite3_stmt *st, sb_run_row *row)
{
    memset(row, 0, sizeof *row);
    sb_result_row *r = &row->r;
    row->id = (int64_t)sqlite3_column_int64(st, 0);
    /* hash is a NOT NULL column: only a damaged file has NULL there (found by
     * tests/fuzz/fuzz_results.c); it reads as "" so that callers may compare it */
    int rc = results_col_copy(st, 1, r->run_hash, sizeof r->run_hash);
    rc = rc != SQLITE_OK ? rc : results_col_text(st, 2, &row->config_json);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 3, r->model, sizeof r->model);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 4, r->protocol, sizeof r->protocol);
    r->status = results_col_status(st, 5);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 6, r->reason, sizeof r->reason);
    r->params = results_col_count(st, 7);
    r->state_size = results_col_count(st, 8);
    r->flops_per_token = results_col_real(st, 9);
    r->test_acc = results_col_real(st, 10);
    r->test_loss = results_col_real(st, 11);
    r->train_acc = results_col_real(st, 12);
    r->train_loss = results_col_real(st, 13);
    r->wall_s = results_col_real(st, 14);
    r->tokens_per_s = results_col_real(st, 15);
    if (rc == SQLITE_OK)
        rc = results_col_text(st, 16, &row->code_version);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 17, r->checkpoint, sizeof r->checkpoint);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 18, r->host, sizeof r->host);
    if (rc == SQLITE_OK)
        rc = results_col_text(st, 19, &row->started_at);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 20, r->finished_at, sizeof r->finished_at);
    r->attempts = (int64_t)sqlite3_column_int64(st, 21);
    r->ceiling = results_col_real(st, 22);
    r->effective_memory = results_col_real(st, 23);
    r->rank = results_col_count(st, 24);
    r->world_size = sqlite3_column_type(st, 25) == SQLITE_NULL ? 1 : sqlite3_column_int64(st, 25);
    r->threads = results_col_count(st, 26);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 27, r->engine, sizeof r->engine);
    rc = rc != SQLITE_OK ? rc : results_col_copy(st, 28, r->fingerprint, sizeof r->fingerprint);
    r->valid_acc = results_col_real(st, 29);
    r->valid_loss = results_col_real(st, 30);
    if (rc != SQLITE_OK)
        sb_results_run_row_clear(row);
    return rc;
}

/* Steps a statement that returns no rows and finalizes it. rc is the result of its
 * prepare and binds; what (printf-style) names the action in the error message. */
static sb_status results_exec_stmt(sb_results *r, sqlite3_stmt *st, int rc, sb_error *err,
                                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static sb_status results_exec_stmt(sb_results *r, sqlite3_stmt *st, int rc, sb_error *err,
                                   const char *fmt, ...)
{
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sb_status status = SB_OK;
    if (rc != SQLITE_OK) {
        char what[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        status = results_fail(r, rc, err, "%s", what);
    }
    /* finalize repeats the step's error, already reported above */
    (void)sqlite3_finalize(st);
    return status;
}

/* ---- transactions -------------------------------------------------------------------- */

static sb_status results_tx_begin(sb_results *r, sb_error *err)
{
    int rc = sqlite3_exec(r->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return results_fail(r, rc, err, "cannot start a write transaction");
    return SB_OK;
}

/* Commits when status is SB_OK, rolls back otherwise; returns the final status. */
static sb_status results_tx_end(sb_results *r, sb_status status, sb_error *err)
{
    if (status == SB_OK) {
        int rc = sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return SB_OK;
        status = results_fail(r, rc, err, "cannot commit the transaction");
    }
    /* After some errors SQLite has rolled back already (autocommit is on again). A failing
     * ROLLBACK cannot be repaired here and the first error is the one worth reporting;
     * SQLite rolls the transaction back itself when the connection closes. */
    if (!sqlite3_get_autocommit(r->db))
        (void)sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* ---- opening ------------------------------------------------------------------------- */

/* Creates the folder that holds path, with its parents, when it is missing. */
static sb_status results_make_parent(const char *path, sb_error *err)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return SB_OK; /* the current folder, or the root */
    size_t len = (size_t)(slash - path);
    char *dir = malloc(len + 1);
    if (dir == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory opening results database '%s'", path);
    memcpy(dir, path, len);
    dir[len] = '\0';
    sb_error why = {0};
    sb_status status = sb_make_dirs(dir, "folder", &why);
    free(dir);
    if (status != SB_OK)
        return sb_error_set(err, status, "cannot create results database '%s': %s", path, why.msg);
    return SB_OK;
}

/* Reads the schema version without writing: 0 for an empty database (no tables yet),
 * else the meta table's schema_version (>= 1). Refuses files that are not SQLite
 * databases and SQLite databases that are not results databases. */
static sb_status results_read_version(sb_results *r, int64_t *version, sb_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT (SELECT count(*) FROM sqlite_master), "
                                "(SELECT count(*) FROM sqlite_master "
                                " WHERE type = 'table' AND name = 'meta')",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sb_status status;
        if ((rc & 0xff) == SQLITE_NOTADB)
            status = sb_error_set(err, SB_ERR_IO,
                                  "'%s' is not a SQLite database (%s); give another results path "
                                  "or move the file away",
                                  r->path, sqlite3_errmsg(r->db));
        else
            status = results_fail(r, rc, err, "cannot read the database");
        (void)sqlite3_finalize(st);
        return status;
    }
    int64_t n_objects = (int64_t)sqlite3_column_int64(st, 0);
    int64_t has_meta = (int64_t)sqlite3_column_int64(st, 1);
    (void)sqlite3_finalize(st); /* a one-row SELECT that stepped to its row */
    if (!has_meta) {
        *version = 0;
        if (n_objects == 0)
            return SB_OK;
        return sb_error_set(err, SB_ERR_IO,
                            "'%s' is a SQLite database but not a selectivbench results database "
                            "(it has no meta table); give another results path",
                            r->path);
    }

    rc = sqlite3_prepare_v2(r->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st,
                            NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sb_status status = results_fail(r, rc, err, "cannot read the schema version");
        (void)sqlite3_finalize(st);
        return status;
    }
    char text[32] = "";
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        if (v != NULL)
            snprintf(text, sizeof text, "%s", (const char *)v);
    }
    (void)sqlite3_finalize(st);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || errno != 0 || v < 1)
        return sb_error_set(err, SB_ERR_IO,
                            "results database '%s' has no valid schema_version in its meta table "
                            "(found '%s'); the file is damaged or was not written by selectivbench",
                            r->path, text);
    *version = (int64_t)v;
    return SB_OK;
}

static sb_status results_check_newer(const sb_results *r, int64_t version, sb_error *err)
{
    if (version <= SB_RESULTS_SCHEMA_VERSION)
        return SB_OK;
    return sb_error_set(err, SB_ERR_IO,
                        "results database '%s' has schema_version %lld, newer than schema_version "
                        "%d that this selectivbench knows; use a newer selectivbench or another "
                        "results path",
                        r->path, (long long)version, SB_RESULTS_SCHEMA_VERSION);
}

/* Switches the database to WAL journal mode (a no-op when it is already). While another
 * connection holds the write lock of a file not yet in WAL mode (a worker creating the
 * database), the switch fails at once with SQLITE_BUSY: it upgrades a read transaction to
 * a write one, and SQLite does not call the busy handler for that. So it is retried here,
 * for up to the busy timeout (test_open_waits_for_writer). */
static sb_status results_set_wal(sb_results *r, sb_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    for (int waited_ms = 0; ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) &&
                            waited_ms < SB_RESULTS_BUSY_TIMEOUT_MS;) {
        (void)sqlite3_reset(st); /* repeats the SQLITE_BUSY just seen */
        waited_ms += sqlite3_sleep(10);
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_ROW) {
        sb_status status = results_fail(r, rc, err, "cannot switch to WAL journal mode");
        (void)sqlite3_finalize(st);
        return status;
    }
    char mode[16] = "";
    const unsigned char *v = sqlite3_column_text(st, 0);
    if (v != NULL)
        snprintf(mode, sizeof mode, "%s", (const char *)v);
    (void)sqlite3_finalize(st); /* the pragma returns one row */
    if (strcmp(mode, "wal") != 0)
        return sb_error_set(err, SB_ERR_IO,
                            "results database '%s': cannot switch to WAL journal mode (the mode is "
                            "'%s'); put the results folder on a local file system",
                            r->path, mode);
    return SB_OK;
}

/* The upgrade of version v - 1 to v at [v]: a new file gets version 1 and every upgrade,
 * so new and upgraded files have the same tables. */
static const char *const results_upgrades[SB_RESULTS_SCHEMA_VERSION + 1] = {
    [2] = results_upgrade_2_sql, [3] = results_upgrade_3_sql, [4] = results_upgrade_4_sql,
    [5] = results_upgrade_5_sql, [6] = results_upgrade_6_sql, [7] = results_upgrade_7_sql,
};

/* Runs the upgrades after version `version` (inside the caller's transaction): SQLite's code. */
static int results_run_upgrades(sb_results *r, int64_t version)
{
    int rc = SQLITE_OK;
    for (int64_t v = version + 1; rc == SQLITE_OK && v <= SB_RESULTS_SCHEMA_VERSION; v++) {
        SB_ASSERT(results_upgrades[v] != NULL); /* a new version needs its upgrade here */
        rc = sqlite3_exec(r->db, results_upgrades[v], NULL, NULL, NULL);
    }
    return rc;
}

static sb_status results_create_schema(sb_results *r, sb_error *err)
{
    int rc = sqlite3_exec(r->db, results_schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = results_run_upgrades(r, 1);
    if (rc != SQLITE_OK)
        return results_fail(r, rc, err, "cannot create the tables");
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(r->db,
                            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1), "
                            "('application', 'selectivbench'), ('created_at', " RESULTS_NOW ")",
                            -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, SB_RESULTS_SCHEMA_VERSION);
    return results_exec_stmt(r, st, rc, err, "cannot write the meta table");
}

/* Whether every evaluation still points at a run (PRAGMA foreign_key_check returns no row):
 * SQLITE_OK, SQLITE_CONSTRAINT_FOREIGNKEY when one does not, or SQLite's error. */
static int results_foreign_keys_hold(sb_results *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db, "PRAGMA foreign_key_check", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    else if (rc == SQLITE_ROW)
        rc = SQLITE_CONSTRAINT_FOREIGNKEY;
    (void)sqlite3_finalize(st);
    return rc;
}

/* Upgrades a file of schema version `version` (>= 1) to the current one, one version at a
 * time, inside the caller's transaction and with foreign keys off (results_init): a failure
 * leaves the file as it was (the caller rolls back). */
static sb_status results_upgrade(sb_results *r, int64_t version, sb_error *err)
{
    if (version >= SB_RESULTS_SCHEMA_VERSION)
        return SB_OK;
    int rc = results_run_upgrades(r, version);
    if (rc == SQLITE_OK)
        rc = results_foreign_keys_hold(r);
    if (rc != SQLITE_OK)
        return results_fail(r, rc, err,
                            "cannot upgrade the schema from version %lld to %d; the file is "
                            "left as it was",
                            (long long)version, SB_RESULTS_SCHEMA_VERSION);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(r->db, "UPDATE meta SET value = ?1 WHERE key = 'schema_version'", -1,
                            &st, NULL);
    rc = results_bind_int(rc, st, 1, SB_RESULTS_SCHEMA_VERSION);
    return results_exec_stmt(r, st, rc, err, "cannot record the upgraded schema version");
}

/* Configures the connection and brings the file to the current schema. Everything that
 * could refuse the file reads it first, so a refused file is left untouched. */
static sb_status results_init(sb_results *r, sb_error *err)
{
    int rc = sqlite3_extended_result_codes(r->db, 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(r->db, SB_RESULTS_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return results_fail(r, rc, err, "cannot configure the connection");
    if (sqlite3_db_readonly(r->db, "main") == 1)
        return sb_error_set(err, SB_ERR_IO,
                            "results database '%s' is read-only; check the permissions of the file "
                            "and its folder",
                            r->path);

    int64_t version = 0;
    sb_status status = results_read_version(r, &version, err);
    if (status == SB_OK)
        status = results_check_newer(r, version, err);
    if (status == SB_OK)
        status = results_set_wal(r, err);
    if (status == SB_OK) {
        rc = sqlite3_exec(r->db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            status = results_fail(r, rc, err, "cannot configure foreign keys");
    }
    if (status != SB_OK)
        return status;

    /* Create or upgrade under the write lock; another worker may have done it since the
     * read above, so read again. Foreign keys stay off until it is done: the upgrade to
     * version 3 drops and rebuilds the runs table (the pragma is a no-op inside a
     * transaction, so it is set around it). */
    status = results_tx_begin(r, err);
    if (status != SB_OK)
        return status;
    status = results_read_version(r, &version, err);
    if (status == SB_OK)
        status = results_check_newer(r, version, err);
    if (status == SB_OK && version == 0)
        status = results_create_schema(r, err);
    else if (status == SB_OK)
        status = results_upgrade(r, version, err);
    status = results_tx_end(r, status, err);
    if (status == SB_OK) {
        /* per connection: needed for REFERENCES and ON DELETE CASCADE */
        rc = sqlite3_exec(r->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            status = results_fail(r, rc, err, "cannot enable foreign keys");
    }
    if (status == SB_OK)
        r->version = SB_RESULTS_SCHEMA_VERSION;
    return status;
}

/* A connection handle without its SQLite connection yet, owning a copy of path. */
static sb_status results_handle_new(const char *path, sb_results **out, sb_error *err)
{
    sb_results *r = calloc(1, sizeof *r);
    size_t len = strlen(path);
    char *copy = malloc(len + 1);
    if (r == NULL || copy == NULL) {
        free(r), free(copy);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory opening results database '%s'", path);
    }
    memcpy(copy, path, len + 1);
    r->path = copy;
    *out = r;
    return SB_OK;
}

sb_status sb_results_open(const char *path, sb_results **out, sb_error *err)
{
    SB_ASSERT(path != NULL && out != NULL);
    *out = NULL;
    if (path[0] == '\0')
        return sb_error_set(err, SB_ERR_INVALID,
                            "the results database path is empty; give a file name such as "
                            "results/results.db");
    sb_status status = results_make_parent(path, err);
    if (status != SB_OK)
        return status;

    sb_results *r = NULL;
    sb_status st_new = results_handle_new(path, &r, err);
    if (st_new != SB_OK)
        return st_new;
    /* A failed open still returns a handle (or NULL when out of memory), for the message */
    int rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK)
        status = results_fail(r, rc, err, "cannot open it");
    else
        status = results_init(r, err);
    if (status != SB_OK) {
        sb_results_close(r);
        return status;
    }
    *out = r;
    return SB_OK;
}

sb_status sb_results_open_readonly(const char *path, sb_results **out, sb_error *err)
{
    SB_ASSERT(path != NULL && out != NULL);
    *out = NULL;
    struct stat sbuf;
    if (stat(path, &sbuf) != 0)
        return sb_error_set(err, SB_ERR_IO, "cannot read results database '%s': %s", path,
                            strerror(errno));
    sb_results *r = NULL;
    sb_status st_new = results_handle_new(path, &r, err);
    if (st_new != SB_OK)
        return st_new;
    r->readonly = 1;
    sb_status status = SB_OK;
    int rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_extended_result_codes(r->db, 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(r->db, SB_RESULTS_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        status = results_fail(r, rc, err, "cannot open it for reading");
    int64_t version = 0;
    if (status == SB_OK)
        status = results_read_version(r, &version, err);
    if (status == SB_OK)
        status = results_check_newer(r, version, err);
    if (status == SB_OK && version == 0)
        status = sb_error_set(err, SB_ERR_IO,
                              "'%s' is an empty SQLite database, not a results database yet; "
                              "train or sweep into it first",
                              path);
    if (status != SB_OK) {
        sb_results_close(r);
        return status;
    }
    r->version = version;
    *out = r;
    return SB_OK;
}

int sb_results_is_readonly(const sb_results *db)
{
    return db->readonly;
}

const char *sb_results_file(const sb_results *db)
{
    return db->path;
}

void sb_results_close(sb_results *db)
{
    if (db == NULL)
        return;
    /* close_v2 cannot fail for a valid handle; every statement is finalized by now */
    (void)sqlite3_close_v2(db->db);
    for (int i = 0; i < db->n_memo; i++)
        free(db->memo[i].hash);
    free(db->memo);
    free(db->path);
    free(db);
}

int sb_run_resumable(sb_run_status status, const char *checkpoint)
{
    return status == SB_RUN_INTERRUPTED && checkpoint != NULL && checkpoint[0] != '\0' &&
           access(checkpoint, R_OK) == 0;
}

sb_run_metrics sb_results_metrics_unknown(void)
{
    double nan = (double)NAN;
    return (sb_run_metrics){nan, nan, nan, nan, nan, nan, nan, nan};
}

/* ---- runs ---------------------------------------------------------------------------- */

int sb_run_status_ended(sb_run_status status)
{
    return status == SB_RUN_FINISHED || status == SB_RUN_FAILED || status == SB_RUN_DIVERGED ||
           status == SB_RUN_INTERRUPTED;
}

static sb_status results_check_run(const sb_results *r, const sb_run_info *run, sb_error *err)
{
    if (run->hash == NULL || run->hash[0] == '\0')
        return sb_error_set(err, SB_ERR_INVALID,
                            "results database '%s': a run needs a non-empty configuration hash",
                            r->path);
    if (run->config_json == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "results database '%s': run %s has no configuration JSON", r->path,
                            run->hash);
    if (run->protocol != NULL && strcmp(run->protocol, "reference") != 0 &&
        strcmp(run->protocol, "clean") != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "results database '%s': run %s has unknown protocol '%s'; use "
                            "'reference' or 'clean'",
                            r->path, run->hash, run->protocol);
    return SB_OK;
}

/* Binds ?1 hash ... ?10 host, ?11 world_size, ?12 threads, ?13 engine, ?14 fingerprint, the
 * layout of both the insert and the reset statement. */
static int results_bind_run(int rc, sqlite3_stmt *st, const sb_run_info *run)
{
    rc = results_bind_text(rc, st, 1, run->hash);
    rc = results_bind_text(rc, st, 2, run->config_json);
    rc = results_bind_text(rc, st, 3, run->model);
    rc = results_bind_text(rc, st, 4, run->protocol);
    rc = results_bind_count(rc, st, 5, run->params);
    rc = results_bind_count(rc, st, 6, run->state_size);
    rc = results_bind_real(rc, st, 7, run->flops_per_token);
    rc = results_bind_text(rc, st, 8, run->code_version);
    rc = results_bind_text(rc, st, 9, run->checkpoint);
    rc = results_bind_text(rc, st, 10, run->host);
    rc = results_bind_int(rc, st, 11, run->world_size > 1 ? run->world_size : 1);
    rc = results_bind_count(rc, st, 12, run->threads > 0 ? run->threads : -1);
    rc = results_bind_text(rc, st, 13, run->engine);
    rc = results_bind_text(rc, st, 14, run->fingerprint);
    return rc;
}

/* Finds the run with hash: *id (-1 when there is none) and its status. */
static sb_status results_find_hash(sb_results *r, const char *hash, int64_t *id,
                                   sb_run_status *status_out, sb_error *err)
{
    *id = -1;
    *status_out = SB_RUN_NONE;
    sqlite3_stmt *st = NULL;
    int rc =
        sqlite3_prepare_v2(r->db, "SELECT id, status FROM runs WHERE hash = ?1", -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *id = (int64_t)sqlite3_column_int64(st, 0);
        *status_out = results_col_status(st, 1);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sb_status status =
        rc == SQLITE_OK ? SB_OK : results_fail(r, rc, err, "cannot look up run %s", hash);
    (void)sqlite3_finalize(st);
    return status;
}

sb_status sb_results_run_begin(sb_results *db, const sb_run_info *run, int64_t *run_id,
                               sb_error *err)
{
    SB_ASSERT(db != NULL && run != NULL && run_id != NULL);
    sb_status status = results_check_run(db, run, err);
    if (status != SB_OK)
        return status;
    status = results_tx_begin(db, err);
    if (status != SB_OK)
        return status;
    int64_t id = -1;
    sb_run_status old_status = SB_RUN_NONE;
    status = results_find_hash(db, run->hash, &id, &old_status, err);
    sqlite3_stmt *st = NULL;
    if (status == SB_OK && id >= 0 && old_status == SB_RUN_FINISHED) {
        status = sb_error_set(err, SB_ERR_INVALID,
                              "run %s (id %lld) already finished in results database '%s'; skip "
                              "it, or delete its row to train it again",
                              run->hash, (long long)id, db->path);
    } else if (status == SB_OK && id < 0) {
        int rc = sqlite3_prepare_v2(
            db->db,
            "INSERT INTO runs (hash, config_json, model, protocol, status, params, state_size, "
            "flops_per_token, code_version, checkpoint, host, world_size, threads, engine, "
            "fingerprint, started_at, attempts) "
            "VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
            "?14, " RESULTS_NOW ", 1)",
            -1, &st, NULL);
        rc = results_bind_run(rc, st, run);
        status = results_exec_stmt(db, st, rc, err, "cannot insert run %s", run->hash);
        if (status == SB_OK)
            id = (int64_t)sqlite3_last_insert_rowid(db->db);
    } else if (status == SB_OK) {
        /* an unfinished attempt: forget its evaluations (unless the run resumes from its
         * checkpoint) and results, keep its id */
        if (!run->keep_evaluations) {
            int rc = sqlite3_prepare_v2(db->db, "DELETE FROM evaluations WHERE run_id = ?1", -1,
                                        &st, NULL);
            rc = results_bind_int(rc, st, 1, id);
            status = results_exec_stmt(db, st, rc, err, "cannot delete the evaluations of run %s",
                                       run->hash);
            if (status == SB_OK) {
                rc =
                    sqlite3_prepare_v2(db->db, "DELETE FROM live WHERE run_id = ?1", -1, &st, NULL);
                rc = results_bind_int(rc, st, 1, id);
                status = results_exec_stmt(db, st, rc, err,
                                           "cannot delete the live points of run %s", run->hash);
            }
        }
        if (status == SB_OK) {
            int rc = sqlite3_prepare_v2(
                db->db,
                "UPDATE runs SET config_json = ?2, model = ?3, protocol = ?4, "
                "status = 'running', reason = NULL, params = ?5, state_size = ?6, "
                "flops_per_token = ?7, test_acc = NULL, test_loss = NULL, train_acc = NULL, "
                "train_loss = NULL, valid_acc = NULL, valid_loss = NULL, wall_s = NULL, "
                "tokens_per_s = NULL, code_version = ?8, "
                "checkpoint = ?9, host = ?10, rank = NULL, world_size = ?11, threads = ?12, "
                "engine = ?13, fingerprint = ?14, started_at = " RESULTS_NOW ", "
                "finished_at = NULL, attempts = attempts + 1, ceiling = NULL, "
                "effective_memory = NULL WHERE hash = ?1",
                -1, &st, NULL);
            rc = results_bind_run(rc, st, run);
            status = results_exec_stmt(db, st, rc, err, "cannot restart run %s", run->hash);
        }
    }
    status = results_tx_end(db, status, err);
    if (status == SB_OK)
        *run_id = id;
    return status;
}

/* One metric against its rule (sb_results_check_metrics): 0 when it passes. */
enum { METRIC_ACC, METRIC_LOSS, METRIC_AMOUNT };
static int metric_bad(double v, int kind, int allow_inf_loss)
{
    if (isnan(v))
        return 0; /* unknown */
    if (kind == METRIC_ACC)
        return !(v >= 0.0 && v <= 1.0);
    if (kind == METRIC_LOSS && allow_inf_loss && v == (double)INFINITY)
        return 0;
    return !(isfinite(v) && v >= 0.0);
}

static sb_status metric_refuse(const char *what, const char *name, double v, int kind,
                               sb_error *err)
{
    return sb_error_set(err, SB_ERR_INVALID, "%s: %s %g: give %s, or NaN when unknown", what, name,
                        v,
                        kind == METRIC_ACC    ? "an accuracy in [0, 1]"
                        : kind == METRIC_LOSS ? "a finite loss >= 0"
                                              : "a finite value >= 0");
}

sb_status sb_results_check_metrics(const sb_run_metrics *m, int allow_inf_loss, const char *what,
                                   sb_error *err)
{
    const struct {
        const char *name;
        double v;
        int kind;
    } fields[] = {
        {"test_acc", m->test_acc, METRIC_ACC},   {"test_loss", m->test_loss, METRIC_LOSS},
        {"train_acc", m->train_acc, METRIC_ACC}, {"train_loss", m->train_loss, METRIC_LOSS},
        {"wall_s", m->wall_s, METRIC_AMOUNT},    {"tokens_per_s", m->tokens_per_s, METRIC_AMOUNT},
        {"valid_acc", m->valid_acc, METRIC_ACC}, {"valid_loss", m->valid_loss, METRIC_LOSS}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (metric_bad(fields[i].v, fields[i].kind, allow_inf_loss))
            return metric_refuse(what, fields[i].name, fields[i].v, fields[i].kind, err);
    return SB_OK;
}

sb_status sb_results_check_eval(const sb_eval_row *row, int allow_inf_loss, const char *what,
                                sb_error *err)
{
    if (row->step < 0)
        return sb_error_set(err, SB_ERR_INVALID, "%s: step %lld: give a step >= 0", what,
                            (long long)row->step);
    if (row->samples < -1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "%s: samples %lld: give a count >= 0, or -1 when unknown", what,
                            (long long)row->samples);
    if (row->split != SB_SPLIT_TRAIN && row->split != SB_SPLIT_TEST && row->split != SB_SPLIT_VALID)
        return sb_error_set(err, SB_ERR_INVALID, "%s: unknown split %d (train, test or valid)",
                            what, (int)row->split);
    const struct {
        const char *name;
        double v;
        int kind;
    } fields[] = {{"loss", row->loss, METRIC_LOSS},
                  {"acc", row->acc, METRIC_ACC},
                  {"lr", row->lr, METRIC_AMOUNT},
                  {"tokens_per_s", row->tokens_per_s, METRIC_AMOUNT},
                  {"wall_s", row->wall_s, METRIC_AMOUNT}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (metric_bad(fields[i].v, fields[i].kind, allow_inf_loss))
            return metric_refuse(what, fields[i].name, fields[i].v, fields[i].kind, err);
    return SB_OK;
}

/* An evaluation (live 0) or a live point (live 1) of run run_id, replacing one at its step
 * (and split). */
static sb_status results_add_point(sb_results *db, int64_t run_id, const sb_eval_row *row, int live,
                                   sb_error *err)
{
    SB_ASSERT(db != NULL && row != NULL && (!live || row->split == SB_SPLIT_TRAIN));
    const char *what_point = live ? "live point" : "evaluation";
    char what[SB_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "results database '%.200s': %s of run %lld", db->path, what_point,
             (long long)run_id);
    sb_status checked = sb_results_check_eval(row, 1, what, err);
    if (checked != SB_OK)
        return checked;
    /* the same parameters in both; a live point has no split (?4 is left out) */
    const char *sql = live ? "INSERT OR REPLACE INTO live (run_id, step, samples, loss, acc, lr, "
                             "tokens_per_s, wall_s) VALUES (?1, ?2, ?3, ?5, ?6, ?7, ?8, ?9)"
                           : "INSERT OR REPLACE INTO evaluations (run_id, step, samples, split, "
                             "loss, acc, lr, tokens_per_s, wall_s) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, run_id);
    rc = results_bind_int(rc, st, 2, row->step);
    rc = results_bind_count(rc, st, 3, row->samples);
    if (!live)
        rc = results_bind_text(rc, st, 4, sb_split_name(row->split));
    rc = results_bind_real(rc, st, 5, row->loss);
    rc = results_bind_real(rc, st, 6, row->acc);
    rc = results_bind_real(rc, st, 7, row->lr);
    rc = results_bind_real(rc, st, 8, row->tokens_per_s);
    rc = results_bind_real(rc, st, 9, row->wall_s);
    return results_exec_stmt(db, st, rc, err, "cannot record the %s at step %lld of run %lld",
                             what_point, (long long)row->step, (long long)run_id);
}

sb_status sb_results_add_eval(sb_results *db, int64_t run_id, const sb_eval_row *row, sb_error *err)
{
    return results_add_point(db, run_id, row, 0, err);
}

sb_status sb_results_add_live(sb_results *db, int64_t run_id, const sb_eval_row *row, sb_error *err)
{
    return results_add_point(db, run_id, row, 1, err);
}

sb_status sb_results_delete_evals_after(sb_results *db, int64_t run_id, int64_t step, sb_error *err)
{
    SB_ASSERT(db != NULL);
    static const char *const tables[] = {"evaluations", "live"};
    sb_status status = SB_OK;
    for (int t = 0; t < 2 && status == SB_OK; t++) {
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE run_id = ?1 AND step > ?2", tables[t]);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
        rc = results_bind_int(rc, st, 1, run_id);
        rc = results_bind_int(rc, st, 2, step);
        status = results_exec_stmt(
            db, st, rc, err, "cannot delete the %s of run %lld after step %lld",
            t == 0 ? "evaluations" : "live points", (long long)run_id, (long long)step);
    }
    return status;
}

sb_status sb_results_run_end(sb_results *db, int64_t run_id, sb_run_status status,
                             const char *reason, const sb_run_metrics *m, sb_error *err)
{
    SB_ASSERT(db != NULL && m != NULL);
    if (!sb_run_status_ended(status))
        return sb_error_set(err, SB_ERR_INVALID,
                            "results database '%s': run %lld cannot end with status '%s'; use "
                            "'finished', 'failed', 'diverged' or 'interrupted'",
                            db->path, (long long)run_id, sb_run_status_name(status));
    char what[SB_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "results database '%.200s': run %lld", db->path, (long long)run_id);
    sb_status st_out = sb_results_check_metrics(m, status == SB_RUN_DIVERGED, what, err);
    if (st_out != SB_OK)
        return st_out;
    st_out = results_tx_begin(db, err);
    if (st_out != SB_OK)
        return st_out;

    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, "SELECT status FROM runs WHERE id = ?1", -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, run_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sb_run_status old = SB_RUN_NONE;
    if (rc == SQLITE_ROW) {
        old = results_col_status(st, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        st_out = sb_error_set(err, SB_ERR_INVALID,
                              "results database '%s' has no run with id %lld to end", db->path,
                              (long long)run_id);
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK)
        st_out = results_fail(db, rc, err, "cannot look up run %lld", (long long)run_id);
    (void)sqlite3_finalize(st);
    if (st_out == SB_OK && old != SB_RUN_RUNNING)
        st_out = sb_error_set(err, SB_ERR_INVALID,
                              "results database '%s': run %lld is '%s', not running; begin it "
                              "again before ending it",
                              db->path, (long long)run_id, sb_run_status_name(old));
    if (st_out == SB_OK) {
        rc = sqlite3_prepare_v2(db->db,
                                "UPDATE runs SET status = ?2, reason = ?3, test_acc = ?4, "
                                "test_loss = ?5, train_acc = ?6, train_loss = ?7, wall_s = ?8, "
                                "tokens_per_s = ?9, valid_acc = ?10, valid_loss = ?11, "
                                "finished_at = " RESULTS_NOW " WHERE id = ?1",
                                -1, &st, NULL);
        rc = results_bind_int(rc, st, 1, run_id);
        rc = results_bind_text(rc, st, 2, sb_run_status_name(status));
        rc = results_bind_text(rc, st, 3, reason);
        rc = results_bind_real(rc, st, 4, m->test_acc);
        rc = results_bind_real(rc, st, 5, m->test_loss);
        rc = results_bind_real(rc, st, 6, m->train_acc);
        rc = results_bind_real(rc, st, 7, m->train_loss);
        rc = results_bind_real(rc, st, 8, m->wall_s);
        rc = results_bind_real(rc, st, 9, m->tokens_per_s);
        rc = results_bind_real(rc, st, 10, m->valid_acc);
        rc = results_bind_real(rc, st, 11, m->valid_loss);
        st_out = results_exec_stmt(db, st, rc, err, "cannot record the end of run %lld",
                                   (long long)run_id);
    }
    return results_tx_end(db, st_out, err);
}

sb_status sb_results_set_placement(sb_results *db, const char *hash, const char *host, int64_t rank,
                                   int64_t attempts, sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db,
                                "UPDATE runs SET host = coalesce(?2, host), rank = ?3, "
                                "attempts = ?4 WHERE hash = ?1",
                                -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    rc = results_bind_text(rc, st, 2, host);
    rc = results_bind_count(rc, st, 3, rank);
    rc = results_bind_int(rc, st, 4, attempts > 0 ? attempts : 1);
    sb_status status = results_exec_stmt(db, st, rc, err, "cannot record where run %s ran", hash);
    if (status == SB_OK && sqlite3_changes(db->db) == 0)
        status = sb_error_set(err, SB_ERR_INVALID, "results database '%s' has no run %s", db->path,
                              hash);
    return status;
}

sb_status sb_results_mark_interrupted(sb_results *db, int64_t run_id, int64_t attempts,
                                      const char *reason, int *changed, sb_error *err)
{
    SB_ASSERT(db != NULL && changed != NULL);
    *changed = 0;
    /* only the attempt that was read: a row that ended, or began again, since is left alone */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db,
                                "UPDATE runs SET status = 'interrupted', reason = ?3, "
                                "finished_at = " RESULTS_NOW " WHERE id = ?1 AND attempts = ?2 "
                                "AND status = 'running'",
                                -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, run_id);
    rc = results_bind_int(rc, st, 2, attempts);
    rc = results_bind_text(rc, st, 3, reason);
    sb_status status =
        results_exec_stmt(db, st, rc, err, "cannot mark run %lld interrupted", (long long)run_id);
    if (status == SB_OK)
        *changed = sqlite3_changes(db->db) > 0;
    return status;
}

sb_status sb_results_delete_run(sb_results *db, const char *hash, int *deleted, sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL);
    *deleted = 0;
    sb_status st_out = results_tx_begin(db, err);
    if (st_out != SB_OK)
        return st_out;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, "DELETE FROM runs WHERE hash = ?1", -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    st_out = results_exec_stmt(db, st, rc, err, "cannot delete run %s", hash);
    if (st_out == SB_OK)
        *deleted = sqlite3_changes(db->db) > 0;
    return results_tx_end(db, st_out, err);
}

sb_status sb_results_integrity_check(sb_results *db, int *ok, sb_error *err)
{
    SB_ASSERT(db != NULL);
    *ok = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, "PRAGMA integrity_check", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *text = sqlite3_column_text(st, 0);
        *ok = text != NULL && strcmp((const char *)text, "ok") == 0;
        rc = SQLITE_OK;
    }
    sb_status status = SB_OK;
    if (rc != SQLITE_OK)
        status = results_fail(db, rc, err, "cannot run the integrity check");
    (void)sqlite3_finalize(st);
    return status;
}

/* ---- reading ------------------------------------------------------------------------- */

sb_status sb_results_get_run(sb_results *db, const char *hash, sb_run_row *out, int *found,
                             sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL && out != NULL && found != NULL);
    memset(out, 0, sizeof *out);
    *found = 0;
    sqlite3_stmt *st = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE hash = ?1", results_run_columns(db));
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        rc = results_read_run(st, out);
        if (rc == SQLITE_OK)
            *found = 1;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sb_status status = SB_OK;
    if (rc == SQLITE_NOMEM)
        status =
            sb_error_set(err, SB_ERR_NOMEM,
                         "out of memory reading run %s from results database '%s'", hash, db->path);
    else if (rc != SQLITE_OK)
        status = results_fail(db, rc, err, "cannot read run %s", hash);
    (void)sqlite3_finalize(st);
    return status;
}

/* Makes room for one more element in *rows (capacity *cap, count n). */
static int results_grow(void **rows, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 1;
    size_t new_cap = *cap == 0 ? 16 : 2 * *cap;
    void *p = realloc(*rows, new_cap * size);
    if (p == NULL)
        return 0;
    *rows = p;
    *cap = new_cap;
    return 1;
}

sb_status sb_results_list_runs(sb_results *db, const char *model, sb_run_row **rows, size_t *n,
                               sb_error *err)
{
    SB_ASSERT(db != NULL && rows != NULL && n != NULL);
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE ?1 IS NULL OR model = ?1 ORDER BY id",
             results_run_columns(db));
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, model);
    void *list = NULL;
    size_t count = 0, cap = 0;
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
            break;
        }
        if (rc != SQLITE_ROW)
            break;
        if (!results_grow(&list, &cap, count, sizeof(sb_run_row)))
            rc = SQLITE_NOMEM;
        else
            rc = results_read_run(st, (sb_run_row *)list + count);
        if (rc == SQLITE_OK)
            count++;
    }
    sb_status status = SB_OK;
    if (rc == SQLITE_NOMEM)
        status = sb_error_set(err, SB_ERR_NOMEM,
                              "out of memory listing the runs of results database '%s'", db->path);
    else if (rc != SQLITE_OK)
        status = results_fail(db, rc, err, "cannot list runs");
    (void)sqlite3_finalize(st);
    if (status != SB_OK) {
        sb_results_run_rows_free(list, count);
        return status;
    }
    *rows = list;
    *n = count;
    return SB_OK;
}

/* The rows of run run_id that sql selects (step, samples, split, loss, acc, lr, tokens_per_s,
 * wall_s; ?1 the run): what, "evaluations" or "live points", names them in errors. */
static sb_status results_list_points(sb_results *db, const char *sql, const char *what,
                                     int64_t run_id, sb_eval_row **rows, size_t *n, sb_error *err)
{
    SB_ASSERT(db != NULL && rows != NULL && n != NULL);
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, run_id);
    void *list = NULL;
    size_t count = 0, cap = 0;
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
            break;
        }
        if (rc != SQLITE_ROW)
            break;
        if (!results_grow(&list, &cap, count, sizeof(sb_eval_row))) {
            rc = SQLITE_NOMEM;
            break;
        }
        /* split is NOT NULL and CHECKed to 'train', 'test' or 'valid': NULL text is no
         * memory, or a damaged file (whose constraints were not enforced), as is an unknown
         * name */
        const unsigned char *split = sqlite3_column_text(st, 2);
        if (split == NULL) {
            rc = sqlite3_column_type(st, 2) == SQLITE_NULL ? SQLITE_CORRUPT : SQLITE_NOMEM;
            break;
        }
        sb_eval_row *e = (sb_eval_row *)list + count++;
        e->step = (int64_t)sqlite3_column_int64(st, 0);
        e->samples = results_col_count(st, 1);
        if (sb_split_from_name((const char *)split, &e->split) != 0) {
            count--;
            rc = SQLITE_CORRUPT;
            break;
        }
        e->loss = results_col_real(st, 3);
        e->acc = results_col_real(st, 4);
        e->lr = results_col_real(st, 5);
        e->tokens_per_s = results_col_real(st, 6);
        e->wall_s = results_col_real(st, 7);
        rc = SQLITE_OK;
    }
    sb_status status = SB_OK;
    if (rc == SQLITE_NOMEM)
        status = sb_error_set(err, SB_ERR_NOMEM,
                              "out of memory listing the %s of run %lld in results "
                              "database '%s'",
                              what, (long long)run_id, db->path);
    else if (rc == SQLITE_CORRUPT)
        status = sb_error_set(err, SB_ERR_IO,
                              "results database '%s' is damaged: an evaluation of run %lld has "
                              "no split; restore it from a copy or start a new one",
                              db->path, (long long)run_id);
    else if (rc != SQLITE_OK)
        status =
            results_fail(db, rc, err, "cannot list the %s of run %lld", what, (long long)run_id);
    (void)sqlite3_finalize(st);
    if (status != SB_OK) {
        free(list);
        return status;
    }
    *rows = list;
    *n = count;
    return SB_OK;
}

sb_status sb_results_list_evals(sb_results *db, int64_t run_id, sb_eval_row **rows, size_t *n,
                                sb_error *err)
{
    return results_list_points(db,
                               "SELECT step, samples, split, loss, acc, lr, tokens_per_s, wall_s "
                               "FROM evaluations WHERE run_id = ?1 ORDER BY step, split",
                               "evaluations", run_id, rows, n, err);
}

sb_status sb_results_list_live(sb_results *db, int64_t run_id, sb_eval_row **rows, size_t *n,
                               sb_error *err)
{
    *rows = NULL;
    *n = 0;
    if (db->version < 7) /* a file read-only at an older schema: none */
        return SB_OK;
    return results_list_points(db,
                               "SELECT step, samples, 'train', loss, acc, lr, tokens_per_s, "
                               "wall_s FROM live WHERE run_id = ?1 ORDER BY step",
                               "live points", run_id, rows, n, err);
}

/* ---- the yardsticks -------------------------------------------------------------------- */

sb_status sb_results_get_ceiling(sb_results *db, const char *hash, sb_ceiling *out, int *found,
                                 sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL && out != NULL && found != NULL);
    memset(out, 0, sizeof *out);
    *found = 0;
    for (int i = 0; i < db->n_memo; i++)
        if (strcmp(db->memo[i].hash, hash) == 0) {
            *out = db->memo[i].c;
            *found = 1;
            return SB_OK;
        }
    if (db->version < 2)
        return SB_OK; /* a version-1 file read as it is: no cache yet */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, "SELECT ceiling_json FROM ceilings WHERE hash = ?1", -1,
                                &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    char *text = NULL;
    if (rc == SQLITE_ROW)
        rc = results_col_text(st, 0, &text);
    else if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sb_status status = SB_OK;
    if (rc == SQLITE_NOMEM)
        status = sb_error_set(err, SB_ERR_NOMEM,
                              "out of memory reading ceiling %s from results database '%s'", hash,
                              db->path);
    else if (rc != SQLITE_OK)
        status = results_fail(db, rc, err, "cannot read ceiling %s", hash);
    (void)sqlite3_finalize(st);
    if (status == SB_OK && text != NULL) {
        sb_error perr = {0};
        /* a text that does not read back counts as missing: it is computed again */
        if (sb_ceiling_from_json(text, out, &perr) == SB_OK)
            *found = 1;
        else
            memset(out, 0, sizeof *out);
    }
    free(text);
    return status;
}

/* Keeps c under hash in the connection's memory (read-only connections). */
static sb_status results_memo_put(sb_results *db, const char *hash, const sb_ceiling *c,
                                  sb_error *err)
{
    for (int i = 0; i < db->n_memo; i++)
        if (strcmp(db->memo[i].hash, hash) == 0) {
            db->memo[i].c = *c;
            return SB_OK;
        }
    results_memo *grown = realloc(db->memo, (size_t)(db->n_memo + 1) * sizeof *grown);
    char *copy = strdup(hash);
    if (grown != NULL)
        db->memo = grown;
    if (grown == NULL || copy == NULL) {
        free(copy);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory keeping ceiling %s", hash);
    }
    db->memo[db->n_memo++] = (results_memo){copy, *c};
    return SB_OK;
}

sb_status sb_results_put_ceiling(sb_results *db, const char *hash, const char *config_json,
                                 const sb_ceiling *c, sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL && c != NULL);
    if (hash[0] == '\0' || config_json == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "results database '%s': a cached ceiling needs a hash and its task's "
                            "configuration",
                            db->path);
    if (db->readonly)
        return results_memo_put(db, hash, c, err);
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    if (f == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing ceiling %s", hash);
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_ceiling_write_json(c, &j);
    if (fclose(f) != 0 || json == NULL) {
        free(json);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing ceiling %s", hash);
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db,
                                "INSERT OR REPLACE INTO ceilings (hash, config_json, ceiling_json, "
                                "created_at) VALUES (?1, ?2, ?3, " RESULTS_NOW ")",
                                -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, hash);
    rc = results_bind_text(rc, st, 2, config_json);
    rc = results_bind_text(rc, st, 3, json);
    sb_status status = results_exec_stmt(db, st, rc, err, "cannot store ceiling %s", hash);
    free(json);
    return status;
}

sb_status sb_results_set_yardsticks(sb_results *db, int64_t run_id, double ceiling,
                                    double effective_memory, sb_error *err)
{
    SB_ASSERT(db != NULL);
    if (db->readonly)
        return sb_error_set(err, SB_ERR_IO,
                            "results database '%s' is open read-only; cannot record the "
                            "yardsticks of run %lld",
                            db->path, (long long)run_id);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db->db, "UPDATE runs SET ceiling = ?2, effective_memory = ?3 WHERE id = ?1", -1, &st, NULL);
    rc = results_bind_int(rc, st, 1, run_id);
    rc = results_bind_real(rc, st, 2, ceiling);
    rc = results_bind_real(rc, st, 3, effective_memory);
    sb_status status = results_exec_stmt(
        db, st, rc, err, "cannot record the yardsticks of run %lld", (long long)run_id);
    if (status == SB_OK && sqlite3_changes(db->db) == 0)
        status = sb_error_set(err, SB_ERR_INVALID,
                              "results database '%s' has no run with id %lld to give yardsticks",
                              db->path, (long long)run_id);
    return status;
}

void sb_results_run_row_clear(sb_run_row *row)
{
    if (row == NULL)
        return;
    free(row->config_json);
    free(row->code_version);
    free(row->started_at);
    memset(row, 0, sizeof *row);
}

void sb_results_run_rows_free(sb_run_row *rows, size_t n)
{
    if (rows == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        sb_results_run_row_clear(&rows[i]);
    free(rows);
}

/* ---- merging databases ------------------------------------------------------------------ */

/* How far along a run is, for a merge: an ended run (finished or diverged) over an
 * interrupted one (it resumes from a checkpoint) over a failed one over a running row (its
 * process is elsewhere, or gone). */
static int merge_rank(const char *name)
{
    sb_run_status status = SB_RUN_NONE;
    if (name == NULL || sb_run_status_parse(name, &status, NULL) != SB_OK)
        return -1;
    switch (status) {
    case SB_RUN_FINISHED:
    case SB_RUN_DIVERGED: return 3;
    case SB_RUN_INTERRUPTED: return 2;
    case SB_RUN_FAILED: return 1;
    default: return 0;
    }
}

/* Two optional numbers that are the same (both NULL, or the same double). */
static int merge_same_real(sqlite3_stmt *st, int a, int b)
{
    int na = sqlite3_column_type(st, a) == SQLITE_NULL,
        nb = sqlite3_column_type(st, b) == SQLITE_NULL;
    if (na || nb)
        return na && nb;
    return sqlite3_column_double(st, a) == sqlite3_column_double(st, b);
}

#define MERGE_HASH_MAX 64 /* run hashes are 16 hex digits; longer is not ours */
typedef struct merge_action {
    char hash[MERGE_HASH_MAX];
    int replace; /* 1: delete our row first */
} merge_action;

/* The columns of our runs table but id, comma-separated, in *out (malloc'd): the list a
 * copy names, so that a column added by a later schema is copied without an edit here. The
 * names come from our own schema, never from the source file. */
static sb_status merge_run_columns(sb_results *r, char **out, sb_error *err)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT name FROM pragma_table_info('runs', 'main') "
                                "WHERE name <> 'id' ORDER BY cid",
                                -1, &st, NULL);
    size_t len = 0, cap = 512;
    char *cols = malloc(cap);
    if (cols == NULL)
        rc = SQLITE_NOMEM;
    else
        cols[0] = '\0';
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        size_t n = name != NULL ? strlen(name) : 0;
        if (n == 0 || strspn(name, "abcdefghijklmnopqrstuvwxyz_0123456789") != n) {
            rc = SQLITE_CORRUPT;
            break;
        }
        if (len + n + 3 > cap) {
            char *bigger = realloc(cols, cap *= 2);
            if (bigger == NULL) {
                rc = SQLITE_NOMEM;
                break;
            }
            cols = bigger;
        }
        len += (size_t)snprintf(cols + len, cap - len, "%s%s", len > 0 ? ", " : "", name);
        rc = SQLITE_OK;
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    (void)sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(cols);
        return results_fail(r, rc, err, "cannot read the columns of its runs table");
    }
    *out = cols;
    return SB_OK;
}

/* Copies run `hash` of the attached source `src` with its evaluations and live points (our row of
 * that hash deleted first when replace: its evaluations go with it, ON DELETE CASCADE). */
static sb_status merge_copy_run(sb_results *r, const char *cols, const merge_action *a,
                                sb_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    sb_status status = SB_OK;
    if (a->replace) {
        rc = sqlite3_prepare_v2(r->db, "DELETE FROM main.runs WHERE hash = ?1", -1, &st, NULL);
        rc = results_bind_text(rc, st, 1, a->hash);
        if ((status = results_exec_stmt(r, st, rc, err, "cannot replace run %s", a->hash)) != SB_OK)
            return status;
    }
    char sql[2048];
    int n =
        snprintf(sql, sizeof sql,
                 "INSERT INTO main.runs (%s) SELECT %s FROM src.runs WHERE hash = ?1", cols, cols);
    if (n < 0 || (size_t)n >= sizeof sql)
        return sb_error_set(err, SB_ERR_RUNTIME, "merge: the runs table has too many columns");
    rc = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, a->hash);
    if ((status = results_exec_stmt(r, st, rc, err, "cannot copy run %s", a->hash)) != SB_OK)
        return status;
    const int64_t id = (int64_t)sqlite3_last_insert_rowid(r->db);
    /* the run's rows in the tables that point at it */
    static const struct {
        const char *table, *what, *columns;
    } children[] = {
        {"evaluations", "evaluations", "step, samples, split, loss, acc, lr, tokens_per_s, wall_s"},
        {"live", "live points", "step, samples, loss, acc, lr, tokens_per_s, wall_s"},
    };
    for (size_t c = 0; c < sizeof children / sizeof children[0]; c++) {
        n = snprintf(sql, sizeof sql,
                     "INSERT INTO main.%s (run_id, %s) SELECT ?1, %s FROM src.%s WHERE run_id = "
                     "(SELECT id FROM src.runs WHERE hash = ?2)",
                     children[c].table, children[c].columns, children[c].columns,
                     children[c].table);
        SB_ASSERT(n > 0 && (size_t)n < sizeof sql);
        rc = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
        rc = results_bind_int(rc, st, 1, id);
        rc = results_bind_text(rc, st, 2, a->hash);
        if ((status = results_exec_stmt(r, st, rc, err, "cannot copy the %s of run %s",
                                        children[c].what, a->hash)) != SB_OK)
            return status;
    }
    return SB_OK;
}

/* Reads the source's runs (only run only_hash when it is not NULL) against ours and decides,
 * run by run; conflicts go to the callback. With take, the source's row wins whatever its
 * status (a coordinator taking back the attempt it handed out). *actions (malloc'd) lists
 * the runs to copy. */
static sb_status merge_plan(sb_results *r, const char *src_path, const char *only_hash, int take,
                            sb_results_merge_tally *t, sb_results_conflict_fn on_conflict,
                            void *user, merge_action **actions, size_t *n_actions, sb_error *err)
{
    *actions = NULL;
    *n_actions = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db,
                                "SELECT s.hash, s.model, s.status, s.test_acc, s.test_loss, "
                                "m.status, m.test_acc, m.test_loss FROM src.runs s LEFT JOIN "
                                "main.runs m ON m.hash = s.hash WHERE ?1 IS NULL OR s.hash = ?1 "
                                "ORDER BY s.id",
                                -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, only_hash);
    size_t cap = 0;
    merge_action *list = NULL;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *hash = (const char *)sqlite3_column_text(st, 0);
        const char *model = (const char *)sqlite3_column_text(st, 1);
        const char *theirs = (const char *)sqlite3_column_text(st, 2);
        const char *ours = (const char *)sqlite3_column_text(st, 5);
        rc = SQLITE_OK;
        if (hash == NULL || strlen(hash) >= MERGE_HASH_MAX) {
            rc = SQLITE_CORRUPT;
            break;
        }
        int copy = 0, replace = 0;
        if (ours == NULL) {
            copy = 1;
            t->added++;
        } else if (take || merge_rank(theirs) > merge_rank(ours)) {
            copy = replace = 1;
            t->replaced++;
        } else if (merge_rank(theirs) == 3 && merge_rank(ours) == 3 &&
                   (strcmp(theirs, ours) != 0 || !merge_same_real(st, 3, 6) ||
                    !merge_same_real(st, 4, 7))) {
            /* ended in both, differently: ours is kept, the caller hears of it */
            t->conflicts++;
            if (on_conflict != NULL) {
                double nan = (double)NAN;
                on_conflict(
                    hash, model, ours,
                    sqlite3_column_type(st, 6) == SQLITE_NULL ? nan : sqlite3_column_double(st, 6),
                    src_path, theirs,
                    sqlite3_column_type(st, 3) == SQLITE_NULL ? nan : sqlite3_column_double(st, 3),
                    user);
            }
        } else if (merge_rank(theirs) == merge_rank(ours)) {
            t->same++;
        } else {
            t->kept++;
        }
        if (!copy)
            continue;
        if (*n_actions == cap) {
            size_t bigger = cap > 0 ? 2 * cap : 64;
            merge_action *grown = realloc(list, bigger * sizeof *grown);
            if (grown == NULL) {
                rc = SQLITE_NOMEM;
                break;
            }
            list = grown, cap = bigger;
        }
        snprintf(list[*n_actions].hash, sizeof list[*n_actions].hash, "%s", hash);
        list[(*n_actions)++].replace = replace;
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    (void)sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(list);
        *n_actions = 0;
        return results_fail(r, rc, err, "cannot read the runs of '%s'", src_path);
    }
    *actions = list;
    return SB_OK;
}

/* sb_results_merge, of one run only when only_hash is not NULL, the source winning with take. */
static sb_status results_merge_from(sb_results *db, const char *src_path, const char *only_hash,
                                    int take, sb_results_merge_tally *tally,
                                    sb_results_conflict_fn on_conflict, void *user, sb_error *err)
{
    SB_ASSERT(db != NULL && src_path != NULL && tally != NULL);
    memset(tally, 0, sizeof *tally);
    if (db->readonly)
        return sb_error_set(err, SB_ERR_IO,
                            "results database '%s' is open read-only; cannot "
                            "merge into it",
                            db->path);
    /* the source: a results database of our schema, not the destination itself */
    struct stat a, b;
    if (stat(src_path, &b) == 0 && stat(db->path, &a) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return sb_error_set(err, SB_ERR_INVALID,
                            "'%s' is the database merged into; give another file", src_path);
    sb_results *src = NULL;
    sb_status status = sb_results_open_readonly(src_path, &src, err);
    if (status != SB_OK)
        return status;
    const int64_t version = src->version;
    sb_results_close(src);
    if (version < SB_RESULTS_SCHEMA_VERSION)
        return sb_error_set(err, SB_ERR_INVALID,
                            "'%s' has results schema %lld, older than %d: open it once with "
                            "`selectivbench results --db %s` (which upgrades it), then merge",
                            src_path, (long long)version, SB_RESULTS_SCHEMA_VERSION, src_path);

    char *cols = NULL;
    if ((status = merge_run_columns(db, &cols, err)) != SB_OK)
        return status;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->db, "ATTACH DATABASE ?1 AS src", -1, &st, NULL);
    rc = results_bind_text(rc, st, 1, src_path);
    if ((status = results_exec_stmt(db, st, rc, err, "cannot attach '%s'", src_path)) != SB_OK) {
        free(cols);
        return status;
    }
    /* under the write lock: nobody changes our rows between the plan and the copies */
    merge_action *actions = NULL;
    size_t n_actions = 0;
    status = results_tx_begin(db, err);
    if (status == SB_OK) {
        status = merge_plan(db, src_path, only_hash, take, tally, on_conflict, user, &actions,
                            &n_actions, err);
        for (size_t i = 0; status == SB_OK && i < n_actions; i++)
            status = merge_copy_run(db, cols, &actions[i], err);
        if (status == SB_OK) { /* the cached ceilings: the same hash is the same ceiling */
            rc = sqlite3_prepare_v2(db->db,
                                    "INSERT OR IGNORE INTO main.ceilings (hash, config_json, "
                                    "ceiling_json, created_at) SELECT hash, config_json, "
                                    "ceiling_json, created_at FROM src.ceilings",
                                    -1, &st, NULL);
            status = results_exec_stmt(db, st, rc, err, "cannot copy the cached ceilings");
        }
        if (status == SB_OK && results_foreign_keys_hold(db) != SQLITE_OK)
            status = sb_error_set(
                err, SB_ERR_IO, "merge: an evaluation does not point at a run; nothing was merged");
        status = results_tx_end(db, status, err);
    }
    free(actions);
    free(cols);
    (void)sqlite3_exec(db->db, "DETACH DATABASE src", NULL, NULL, NULL);
    if (status != SB_OK)
        memset(tally, 0, sizeof *tally);
    return status;
}

sb_status sb_results_merge(sb_results *db, const char *src_path, sb_results_merge_tally *tally,
                           sb_results_conflict_fn on_conflict, void *user, sb_error *err)
{
    return results_merge_from(db, src_path, NULL, 0, tally, on_conflict, user, err);
}

sb_status sb_results_take_run(sb_results *db, const char *src_path, const char *hash, int *found,
                              sb_error *err)
{
    SB_ASSERT(hash != NULL && found != NULL);
    sb_results_merge_tally t;
    sb_status status = results_merge_from(db, src_path, hash, 1, &t, NULL, NULL, err);
    *found = status == SB_OK && t.added + t.replaced > 0;
    return status;
}

sb_status sb_results_extract_run(sb_results *db, const char *hash, const char *dst_path, int *found,
                                 sb_error *err)
{
    SB_ASSERT(db != NULL && hash != NULL && dst_path != NULL && found != NULL);
    *found = 0;
    struct stat there;
    if (stat(dst_path, &there) == 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "'%s' exists; a run is extracted into a new file only", dst_path);
    sb_results *dst = NULL;
    sb_status status = sb_results_open(dst_path, &dst, err);
    if (status != SB_OK)
        return status;
    status = sb_results_take_run(dst, db->path, hash, found, err);
    sb_results_close(dst);
    return status;
}

/* Whether the JSON value v is the text want (one value of a filter). */
static int value_matches(json_t *v, const char *want)
{
    if (v == NULL)
        return 0;
    if (json_is_string(v))
        return strcmp(json_string_value(v), want) == 0;
    if (json_is_number(v)) {
        char *end;
        double w = strtod(want, &end);
        return end != want && *end == '\0' && json_number_value(v) == w;
    }
    if (json_is_boolean(v))
        return json_is_true(v) ? strcmp(want, "True") == 0 || strcmp(want, "true") == 0 ||
                                     strcmp(want, "1") == 0
                               : strcmp(want, "False") == 0 || strcmp(want, "false") == 0 ||
                                     strcmp(want, "0") == 0;
    if (json_is_null(v))
        return strcmp(want, "null") == 0 || strcmp(want, "None") == 0;
    return 0;
}

int sb_results_config_matches(const char *config_json, const char *filter)
{
    if (config_json == NULL || filter == NULL)
        return 0;
    const char *eq = strchr(filter, '=');
    if (eq == NULL || eq == filter || eq - filter >= 128)
        return 0;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - filter), filter);
    json_t *config = json_loads(config_json, 0, NULL);
    if (json_is_object(config))
        sb_experiment_resolve(config); /* vocab=5 matches the grammar as trained */
    json_t *v = config != NULL ? json_object_get(config, key) : NULL;
    int match = 0;
    /* VALUE may list several, comma-separated: any of them matches (seed=1,2,3) */
    for (const char *want = eq + 1; v != NULL && !match;) {
        const char *comma = strchr(want, ',');
        size_t len = comma != NULL ? (size_t)(comma - want) : strlen(want);
        char one[256];
        if (len < sizeof one) {
            memcpy(one, want, len);
            one[len] = '\0';
            match = value_matches(v, one);
        }
        if (comma == NULL)
            break;
        want = comma + 1;
    }
    json_decref(config);
    return match;
}

/*
 * results.h - the results database: one SQLite file per results folder, with a row per
 * training run and a row per evaluation (docs/training.md, "Checkpoints, results and resuming").
 *
 * Several worker processes write to the same file at once: the database runs in WAL
 * journal mode (readers never block the writer), every connection waits up to
 * SB_RESULTS_BUSY_TIMEOUT_MS for the write lock, and every write is one transaction, so a
 * crash or a rejected value leaves the file as it was before the call.
 *
 * Schema (version SB_RESULTS_SCHEMA_VERSION, recorded in table `meta`):
 *   meta(key TEXT PRIMARY KEY, value TEXT)         schema_version, application, created_at
 *   runs(id, hash UNIQUE, config_json, model, protocol, status, reason, params,
 *        state_size, flops_per_token, test_acc, test_loss, train_acc, train_loss, wall_s,
 *        tokens_per_s, code_version, checkpoint, started_at, finished_at, host, attempts,
 *        ceiling, effective_memory, rank, world_size, threads, engine, fingerprint,
 *        valid_acc, valid_loss)
 *   evaluations(run_id -> runs.id ON DELETE CASCADE, step, samples, split (train, test,
 *        valid), loss, acc, lr,
 *        tokens_per_s, wall_s; PRIMARY KEY (run_id, step, split))
 *   ceilings(hash PRIMARY KEY, config_json, ceiling_json, created_at)
 *        the ideal observer of a task (ceiling.h), computed once per task configuration:
 *        hash is sb_ceiling_hash, config_json the task it was computed for, ceiling_json
 *        what sb_ceiling_write_json writes.
 * A run's yardsticks (the columns ceiling and effective_memory) compare it with its task:
 * ceiling is the expected_acc of the ideal observer on the run's test split and
 * effective_memory sb_ceiling_effective_memory of its final test accuracy, in elements
 * (+infinity, stored as SQLite's Inf: beyond the k = 32 window observer).
 * Older files are upgraded in place when a writable connection opens them, in one
 * transaction (a failure leaves the file as it was); a read-only connection reads them as
 * they are. Version 1 had no yardsticks and no ceilings table (upgrade 2 adds the two
 * columns, NULL for the runs already there, and the table); version 2 had no status
 * 'interrupted' (upgrade 3 rebuilds the runs table with the new CHECK constraint, keeping
 * every run's id and so every evaluation); version 3 had no rank and world_size (upgrade 4
 * adds them: NULL and 1); version 4 had no threads, engine and fingerprint (upgrade 5 adds
 * them, NULL: what they are, tensor/gemm_engine.h); version 5 had no validation split
 * (upgrade 6 adds valid_acc and valid_loss, NULL, and lets an evaluation's split be
 * 'valid', rebuilding the evaluations table).
 * Timestamps are UTC ISO-8601 ("2025-01-31T12:00:00.000Z"), written by SQLite's clock.
 * Unknown values are SQL NULL: in the C structs NULL strings, NaN doubles and -1 integers.
 *
 * A run's life: sb_results_run_begin (status 'running') -> sb_results_add_eval per
 * evaluation -> sb_results_run_end ('finished', 'failed', 'diverged', or 'interrupted':
 * stopped by a signal after writing a checkpoint that --resume continues from). A run is
 * keyed by the hash of its configuration, so a sweep asks sb_results_get_run (or lets
 * run_begin refuse) to skip runs that already finished and resumes the others.
 *
 * A connection (sb_results) belongs to one thread at a time; each worker process opens
 * its own.
 */
#ifndef SELECTIVBENCH_RESULTS_H
#define SELECTIVBENCH_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "task/ceiling.h"
#include "task/task.h"

#define SB_RESULTS_SCHEMA_VERSION 7
#define SB_RESULTS_BUSY_TIMEOUT_MS 30000

/* An open results database (a SQLite connection). */
typedef struct sb_results sb_results;

/* What a run is, known before it trains. Strings are borrowed for the call. */
typedef struct sb_run_info {
    const char *hash;         /* configuration hash, the run's key; required, non-empty */
    const char *config_json;  /* the whole run configuration as a JSON text; required */
    const char *model;        /* model name, or NULL */
    const char *protocol;     /* "reference", "clean" or NULL */
    int64_t params;           /* trainable parameters; < 0: unknown (NULL) */
    int64_t state_size;       /* recurrent state size per sequence; < 0: unknown */
    double flops_per_token;   /* NaN: unknown */
    const char *code_version; /* program version or commit, or NULL */
    const char *checkpoint;   /* checkpoint path, or NULL */
    const char *host;         /* machine that runs it, or NULL */
    int world_size;           /* ranks its training is spread over (data-parallel); <= 1: one */
    int threads;              /* threads per process; <= 0: unknown (NULL) */
    const char *engine;       /* the engine table (sb_gemm_table_name), or NULL */
    const char *fingerprint;  /* sb_gemm_fingerprint's digest, or NULL */
    /* the run continues an unfinished attempt from its checkpoint (--resume): run_begin
     * keeps that attempt's evaluations instead of deleting them */
    int keep_evaluations;
} sb_run_info;

/* Final metrics of a run; NaN where unknown (stored as NULL). */
typedef struct sb_run_metrics {
    double test_acc, test_loss;
    double train_acc, train_loss;
    double wall_s;                /* training wall time in seconds */
    double tokens_per_s;          /* training throughput */
    double valid_acc, valid_loss; /* the validation split's, for choices (schema 6) */
} sb_run_metrics;

/* One evaluation of a run on one split. */
typedef struct sb_eval_row {
    int64_t step;        /* optimiser update step, >= 0 */
    int64_t samples;     /* training samples seen; < 0: unknown (NULL) */
    sb_split split;      /* SB_SPLIT_TRAIN, SB_SPLIT_TEST or SB_SPLIT_VALID */
    double loss, acc;    /* NaN: unknown */
    double lr;           /* learning rate at this step; NaN: unknown */
    double tokens_per_s; /* NaN: unknown */
    double wall_s;       /* seconds since the run started; NaN: unknown */
} sb_eval_row;

/* A run as stored: the public record (sb_result_row, what sb_results_read gives a caller,
 * so the api floor hands it over as it is) and the columns the library alone reads. In r a
 * NULL column reads as "" (text), NaN (numbers), -1 (params, state_size, rank, threads) or 1
 * (world_size); a text longer than its field (only a damaged file has one: hashes are 16
 * characters, model names at most 31) is cut. The strings below are owned by the row (NULL
 * where the column is NULL) and freed by sb_results_run_row_clear / sb_results_run_rows_free. */
typedef struct sb_run_row {
    sb_result_row r;
    int64_t id;
    char *config_json;
    char *code_version;
    char *started_at; /* UTC ISO-8601 */
} sb_run_row;

/* Whether a run stored with this status and checkpoint path (NULL or "": none) continues
 * from its checkpoint when it runs again: it was interrupted and the checkpoint file is
 * readable. The one rule of every sweep (local workers, MPI teams). */
int sb_run_resumable(sb_run_status status, const char *checkpoint);

/* Whether a run with this status has ended: finished, failed, diverged or interrupted. */
int sb_run_status_ended(sb_run_status status);

/* Metrics with every field NaN (unknown), to fill in field by field. */
sb_run_metrics sb_results_metrics_unknown(void);

/* The checks every stored metric passes, so that no impossible number is drawn or averaged
 * as a result: each value NaN (unknown) or accuracies in [0, 1], losses >= 0, times, rates
 * and learning rates finite and >= 0. A loss may be +inf only when allow_inf_loss (a
 * diverged native run keeps the loss it diverged on); a record from outside the library
 * (sb_results_record_external) passes 0. `what` names the row in the one-line error
 * (SB_ERR_INVALID). sb_results_run_end and sb_results_add_eval call them. */
sb_status sb_results_check_metrics(const sb_run_metrics *m, int allow_inf_loss, const char *what,
                                   sb_error *err);
sb_status sb_results_check_eval(const sb_eval_row *row, int allow_inf_loss, const char *what,
                                sb_error *err);

/* Opens the results database at path, creating the file, and its parent folder if that is
 * missing (one level, not a chain), when needed; a new file gets the current schema.
 * On success *out is an open connection, closed with sb_results_close.
 * Errors, each one line naming path: SB_ERR_INVALID for an empty path; SB_ERR_IO when
 * the folder cannot be created or written, the file is not a SQLite database, is a SQLite
 * database of something else, is read-only, or records a schema_version newer than
 * SB_RESULTS_SCHEMA_VERSION (the message gives both). A file that is refused is not
 * modified. *out is NULL on failure. */
sb_status sb_results_open(const char *path, sb_results **out, sb_error *err);

/* Opens an existing results database for reading only: nothing is created, upgraded or
 * written (a version-1 file is read as it is, its runs without yardsticks). Writes through
 * this connection fail with SB_ERR_IO, except sb_results_put_ceiling (see there).
 * Errors: SB_ERR_IO when the file is missing, cannot be read, is not a results database or
 * records a newer schema_version. *out is NULL on failure. */
sb_status sb_results_open_readonly(const char *path, sb_results **out, sb_error *err);

/* Whether the connection was opened with sb_results_open_readonly. */
int sb_results_is_readonly(const sb_results *db);

/* The database's path as given to sb_results_open (its runs' locks are beside it). */
const char *sb_results_file(const sb_results *db);

/* Closes the connection (NULL is allowed). The last connection to close checkpoints the
 * write-ahead log into the database file. */
void sb_results_close(sb_results *db);

/* Records the start of a run: inserts it with status 'running', started_at = now and
 * attempts = 1, and sets *run_id. If a run with the same hash exists and is not
 * 'finished' (a crashed, failed, diverged or interrupted attempt), it is reused: its
 * evaluations are deleted (kept with run->keep_evaluations), its metrics, reason and
 * finished_at cleared, its fields replaced by run's, its status set to 'running' and
 * attempts incremented; *run_id is its old id.
 * Errors: SB_ERR_INVALID when the run already finished (the message says so; callers
 * skip it) or when run's fields are invalid (empty hash, config_json not JSON, unknown
 * protocol); SB_ERR_IO when the database cannot be written. Nothing changes on error.
 * Note: a 'running' row may belong to a live worker; giving each run to one worker is
 * the caller's job (run_store.c takes the run's lock, run_lock.h, before calling this). */
sb_status sb_results_run_begin(sb_results *db, const sb_run_info *run, int64_t *run_id,
                               sb_error *err);

/* Records one evaluation of run run_id, replacing a previous row with the same (step,
 * split). Errors: SB_ERR_INVALID when step < 0, the split is unknown or no run has this
 * id; SB_ERR_IO when the database cannot be written. */
sb_status sb_results_add_eval(sb_results *db, int64_t run_id, const sb_eval_row *row,
                              sb_error *err);

/* Records one live point of run run_id (split SB_SPLIT_TRAIN: the running means of the
 * training loss and accuracy since the last curve point, the learning rate, the throughput
 * so far), replacing one at the same step. Live points are a table of their own (schema 7),
 * written every --live_every seconds while the run trains for the dashboard; evaluations,
 * figures and verdicts never read them. Errors as sb_results_add_eval. */
sb_status sb_results_add_live(sb_results *db, int64_t run_id, const sb_eval_row *row,
                              sb_error *err);

/* Deletes the evaluations and live points of run run_id after update step `step` (a resumed
 * run drops what its previous attempt recorded past its checkpoint). Errors: SB_ERR_IO on a
 * write failure. */
sb_status sb_results_delete_evals_after(sb_results *db, int64_t run_id, int64_t step,
                                        sb_error *err);

/* Records the end of a running run: status (finished, failed, diverged or
 * interrupted), reason (why it failed, diverged or was interrupted; may be NULL), the
 * final metrics m (NaN fields are stored as NULL) and finished_at = now.
 * Errors: SB_ERR_INVALID when status is not one of the four, when no run has this id or
 * the run is not 'running' (its row is left unchanged); SB_ERR_IO on a write failure. */
sb_status sb_results_run_end(sb_results *db, int64_t run_id, sb_run_status status,
                             const char *reason, const sb_run_metrics *m, sb_error *err);

/* Records that attempt `attempts` of run run_id, found 'running', has no process any more:
 * status 'interrupted', reason, finished_at = now. Only a row still 'running' in that attempt
 * changes (*changed = 1): one that ended or began again meanwhile is left as it is.
 * Errors: SB_ERR_IO on a write failure (a read-only connection included). */
sb_status sb_results_mark_interrupted(sb_results *db, int64_t run_id, int64_t attempts,
                                      const char *reason, int *changed, sb_error *err);

/* Records where run `hash` ran in an MPI sweep: its host, the rank that trained it and how
 * many times it has been started in all (the coordinator, the one writer of the sweep's
 * database, counts them across the copies of the run's row it merges in). Errors:
 * SB_ERR_INVALID when no run has that hash; SB_ERR_IO on a write failure. */
sb_status sb_results_set_placement(sb_results *db, const char *hash, const char *host, int64_t rank,
                                   int64_t attempts, sb_error *err);

/* Copies run `hash` (row, evaluations) of the results database at src_path into db,
 * replacing db's row of that hash whatever the two statuses (a coordinator taking back the
 * attempt it handed out; sb_results_merge decides by how far along each is), with the
 * cached ceilings. *found: the source had the run. Errors: those of sb_results_merge. */
sb_status sb_results_take_run(sb_results *db, const char *src_path, const char *hash, int *found,
                              sb_error *err);

/* Writes a new results database at dst_path holding only run `hash` of db (its row and
 * evaluations) and db's cached ceilings: what a worker on another machine needs to continue
 * the run. *found: db had the run (dst_path is created either way). Errors: SB_ERR_INVALID
 * when dst_path exists; those of sb_results_open and sb_results_merge. */
sb_status sb_results_extract_run(sb_results *db, const char *hash, const char *dst_path, int *found,
                                 sb_error *err);

/* Deletes the run with this hash and its evaluations (to train a finished run again);
 * *deleted is 1 if it existed. Errors: SB_ERR_IO on a write failure. */
sb_status sb_results_delete_run(sb_results *db, const char *hash, int *deleted, sb_error *err);

/* SQLite's PRAGMA integrity_check: *ok = 1 when the file is intact. */
sb_status sb_results_integrity_check(sb_results *db, int *ok, sb_error *err);

/* Looks up the run with this configuration hash. *found is 1 and *out holds the row
 * (clear it with sb_results_run_row_clear) when it exists; otherwise *found is 0 and
 * *out is zeroed. Errors: SB_ERR_IO on a read failure, SB_ERR_NOMEM. */
sb_status sb_results_get_run(sb_results *db, const char *hash, sb_run_row *out, int *found,
                             sb_error *err);

/* Every run (model == NULL) or the runs of one model, in id (insertion) order. *rows is a
 * new array of *n rows (NULL when *n is 0), freed with sb_results_run_rows_free.
 * Errors: SB_ERR_IO on a read failure, SB_ERR_NOMEM; *rows is NULL and *n 0 then. */
sb_status sb_results_list_runs(sb_results *db, const char *model, sb_run_row **rows, size_t *n,
                               sb_error *err);

/* The evaluations of run run_id ordered by step, then split (test, train, valid). *rows is
 * a new array of *n rows (NULL when *n is 0), freed with free(). An unknown run_id gives
 * no rows. Errors: SB_ERR_IO on a read failure, SB_ERR_NOMEM. */
sb_status sb_results_list_evals(sb_results *db, int64_t run_id, sb_eval_row **rows, size_t *n,
                                sb_error *err);

/* The live points of run run_id (sb_results_add_live) ordered by step, as
 * sb_results_list_evals; none in a file read at a schema before 7. */
sb_status sb_results_list_live(sb_results *db, int64_t run_id, sb_eval_row **rows, size_t *n,
                               sb_error *err);

/* ---- the yardsticks: the ideal observer of a run's task (ceiling.h) ---------------------- */

/* Looks up the cached ceiling with this hash (sb_ceiling_hash). *found is 1 and *out holds
 * it when there is one; otherwise *found is 0 (also for a cached text that no longer reads
 * back: the caller computes it again and put replaces it).
 * Errors: SB_ERR_IO on a read failure, SB_ERR_NOMEM. */
sb_status sb_results_get_ceiling(sb_results *db, const char *hash, sb_ceiling *out, int *found,
                                 sb_error *err);

/* Stores a computed ceiling under hash, replacing an older entry. config_json (a JSON
 * text, required) records the task it belongs to, for people reading the file. On a
 * read-only connection the ceiling is kept in memory with the connection instead (get
 * finds it until the connection closes). Errors: SB_ERR_INVALID for an empty hash or a
 * config_json that is not JSON, SB_ERR_IO on a write failure, SB_ERR_NOMEM. */
sb_status sb_results_put_ceiling(sb_results *db, const char *hash, const char *config_json,
                                 const sb_ceiling *c, sb_error *err);

/* Records the yardsticks of run run_id: ceiling (NaN: NULL) and effective_memory (NaN:
 * NULL, INFINITY kept). Errors: SB_ERR_INVALID when no run has this id; SB_ERR_IO on a
 * write failure (a read-only connection included). */
sb_status sb_results_set_yardsticks(sb_results *db, int64_t run_id, double ceiling,
                                    double effective_memory, sb_error *err);

/* The ceiling of a task's test split with the default sb_ceiling_options (threads
 * threads, 0: all cores): from the cache, or computed (sb_task_create, sb_ceiling_compute)
 * and cached. *computed (may be NULL) is 1 when it was computed now.
 * Errors: those of the task, of the computation and of the cache. (src/exp/yardsticks.c) */
sb_status sb_results_task_ceiling(sb_results *db, const sb_task_config *task, int threads,
                                  sb_ceiling *out, int *computed, sb_error *err);

/* Computes and records the yardsticks of the finished run run_id of task with final test
 * accuracy test_acc (NaN: the ceiling only). The values recorded are returned in *ceiling
 * and *effective_memory (either may be NULL). Errors: those of sb_results_task_ceiling and
 * sb_results_set_yardsticks. (src/exp/yardsticks.c) */
sb_status sb_results_record_yardsticks(sb_results *db, int64_t run_id, const sb_task_config *task,
                                       double test_acc, int threads, double *ceiling,
                                       double *effective_memory, sb_error *err);

/* Backfills a stored row: for a finished run whose yardsticks are missing (ceiling NULL,
 * or effective_memory NULL with a test accuracy), builds its task from config_json
 * (sb_run_config_from_json), gets its ceiling (sb_results_task_ceiling) and fills
 * row->ceiling and row->effective_memory; they are written to the database unless the
 * connection is read-only. *filled (may be NULL) is 1 when the row was given values.
 * Other rows are left alone (SB_OK, *filled 0). Errors: a configuration that does not
 * read back or builds no task, and those of sb_results_task_ceiling and
 * sb_results_set_yardsticks; the row is unchanged then. (src/exp/yardsticks.c) */
sb_status sb_results_fill_yardsticks(sb_results *db, sb_run_row *row, int threads, int *filled,
                                     sb_error *err);

/* Frees the strings of one row and zeroes it (NULL is allowed). */
void sb_results_run_row_clear(sb_run_row *row);

/* Frees an array of n rows from sb_results_list_runs (NULL is allowed). */
void sb_results_run_rows_free(sb_run_row *rows, size_t n);

/* Whether the stored configuration (JSON text) has KEY = VALUE for filter "KEY=VALUE":
 * numbers compare as numbers, booleans as True/False/1/0, null as null/None. 0 for a
 * missing key, a malformed filter or unreadable JSON. (Public: the API's header.) */
int sb_results_config_matches(const char *config_json, const char *filter);

#endif

/*
 * run_store.h - where a run's files go in a results folder, and its rows in the results
 * database: begin, evaluations, end (with its yardsticks). Used by `train`, `sweep` and
 * `demo`. (src/exp/run_store.c)
 *
 * The layout of a results folder RESULTS:
 *   RESULTS/selectivbench.db                 the results database (results.h)
 *   RESULTS/checkpoints/HASH.safetensors     a run's checkpoint, HASH its training hash
 *   RESULTS/logs/HASH.log                    a sweep worker's output, HASH its run hash
 *   RESULTS/locks/HASH.lock                  the lock of the run with run hash HASH while
 *                                            a process trains it (run_lock.h); beside the
 *                                            database, wherever --db puts it
 */
#ifndef SELECTIVBENCH_RUN_STORE_H
#define SELECTIVBENCH_RUN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "config/run_config.h"
#include "core/status.h"
#include "exp/results.h"
#include "exp/run_lock.h"
#include "train/trainer.h"

/* The results database's file name inside a results folder. */
#define SB_RUN_STORE_DB_NAME "selectivbench.db"

/* ---- the folder layout ------------------------------------------------------------------ */

/* Creates the folder dir (one level) if it is missing; SB_ERR_IO naming it when that fails
 * or when dir exists and is not a folder. Safe against another process creating it at the
 * same moment (parallel sweep workers). */
sb_status sb_run_store_make_dir(const char *dir, sb_error *err);

/* Writes RESULTS/selectivbench.db into out[size]. SB_ERR_INVALID when it does not fit. */
sb_status sb_run_store_db_path(const char *results_dir, char *out, size_t size, sb_error *err);

/* Writes the default checkpoint path of cfg, RESULTS/checkpoints/HASH.safetensors with HASH
 * its training hash, into out[size]. With create, makes RESULTS and RESULTS/checkpoints if
 * missing. SB_ERR_INVALID when the path does not fit; SB_ERR_IO from the folders. */
sb_status sb_run_store_ckpt_path(const char *results_dir, const sb_run_config *cfg, char *out,
                                 size_t size, int create, sb_error *err);

/* Whether cfg's checkpoint pair is on disk in RESULTS/checkpoints, complete: the model file
 * and its optimiser state (in place, or pending after a kill inside the save, which the
 * next load settles; train/checkpoint.c). A run with such a pair and no row to say so (its
 * MPI rank or coordinator was killed before the row was written) continues from it. */
int sb_run_store_checkpoint_complete(const char *results_dir, const sb_run_config *cfg);

/* Writes the logs folder RESULTS/logs into out[size]; with create, makes RESULTS and it if
 * missing. SB_ERR_INVALID when the path does not fit; SB_ERR_IO from the folders. */
sb_status sb_run_store_log_dir(const char *results_dir, char *out, size_t size, int create,
                               sb_error *err);

/* Writes RESULTS/logs/HASH.log, the log of the run with run hash hash, into out[size].
 * SB_ERR_INVALID when it does not fit. */
sb_status sb_run_store_log_path(const char *results_dir, const char *hash, char *out, size_t size,
                                sb_error *err);

/* Writes the lock file of the run with run hash hash in the results database db_path,
 * <folder of db_path>/locks/HASH.lock, into out[size]; with create, makes the locks folder if
 * missing. SB_ERR_INVALID when it does not fit; SB_ERR_IO from the folder. */
sb_status sb_run_store_lock_path(const char *db_path, const char *hash, char *out, size_t size,
                                 int create, sb_error *err);

/* ---- runs whose process is gone ----------------------------------------------------------- */

/* The reason a run left 'running' by a process that died (kill -9, a crash, a power cut) is
 * reported and recorded with. */
#define SB_RUN_STORE_DEAD_REASON                                                                   \
    "its process ended without finishing (killed?); train it again (--resume continues from "      \
    "its last checkpoint)"

/* The dead-run rule, for rows just read from db: a row 'running' whose lock (beside the
 * database, sb_run_store_lock_path) no process holds has no process training it, since a
 * run is marked running only under its lock and its end is recorded before the lock goes.
 * Such a row is reported 'interrupted' with SB_RUN_STORE_DEAD_REASON; on a connection
 * opened for writing the database records it too (sb_results_mark_interrupted), on a
 * read-only one it is only reported. A row that ended or began again between the read and
 * the look at its lock is read again instead. Lock files that cannot be read leave their
 * rows as they are. Errors: SB_ERR_NOMEM (the rows are left valid). */
sb_status sb_run_store_settle_dead(sb_results *db, sb_run_row *rows, size_t n, sb_error *err);

/* ---- a run's rows in the results database ----------------------------------------------- */

typedef struct sb_run_record {
    sb_results *db;
    sb_run_lock lock; /* held from begin to end: no other process trains the run */
    int resumed;      /* the run continues from its checkpoint */
    int64_t run_id;
    sb_task_config task;              /* the run's task, for its yardsticks at the end */
    int threads;                      /* threads for the yardsticks' computation (0: all cores) */
    double ceiling, effective_memory; /* recorded at the end of a finished run; NaN: none */
    double wall_before;               /* resumed: the wall time its earlier attempts recorded (s) */
    double live_every;                /* seconds between live points (--live_every; 0: none) */
    double last_point_s; /* sb_time_now() at the last evaluation or live point written */
} sb_run_record;

/* Opens db_path, takes the run's lock (sb_run_store_lock_path) and records the start of the
 * run (its configuration, parameter count, state size, FLOPs per token, checkpoint path ckpt,
 * code version and host). resume: the run continues an unfinished attempt from its
 * checkpoint, whose evaluations are kept (those past the point it resumes from are dropped
 * at its start event). world_size: the processes its training is spread over
 * (data-parallel; 1: one), threads: the threads of each (0: unknown), both recorded in its
 * row with the engine table and the fingerprint (sb_gemm_fingerprint). When the run already
 * finished: with force, its rows are deleted and it starts again; otherwise *finished = 1, *stored
 * holds its row (clear with sb_results_run_row_clear) and nothing is begun (close rec with
 * sb_run_record_close). When another process holds the run's lock: *locked_by is its pid (-1 when
 * it cannot be named; 0 otherwise) and SB_ERR_RUNTIME says "run HASH is already being trained by
 * pid N". On failure the database is closed and the lock released. */
sb_status sb_run_record_begin(sb_run_record *rec, const char *db_path, const sb_run_config *cfg,
                              const char *ckpt, int force, int resume, int world_size, int threads,
                              int *finished, long *locked_by, sb_run_row *stored, sb_error *err);

/* The same for a run trained outside this library (a PyTorch model through the Python
 * binding): its model is cfg->model, a name of the caller's, not a layer type; params and
 * state_size as the caller counts them (< 0: unknown), FLOPs per token unknown,
 * code_version the caller's (NULL: none). A finished run is never replaced (*finished). */
sb_status sb_run_record_begin_external(sb_run_record *rec, const char *db_path,
                                       const sb_run_config *cfg, int64_t params, int64_t state_size,
                                       const char *code_version, int *finished, long *locked_by,
                                       sb_run_row *stored, sb_error *err);

/* Records an evaluation event (its test row, and its train row when it has a training
 * loss); for a resumed run, its start event drops the evaluations recorded past the update
 * it resumes from; other events and a closed record are ignored. Both rows are attempted; the first
 * failure is returned in err (the caller warns and the run goes on). */
sb_status sb_run_record_event(sb_run_record *rec, const sb_train_event *ev, sb_error *err);

/* Records the end of the run and, for a finished run, its yardsticks (the ceiling of its
 * task's test split, from the database's cache or computed, and the effective memory of
 * its test accuracy: sb_results_record_yardsticks) into rec->ceiling and
 * rec->effective_memory, then closes the database and releases the run's lock. A failure
 * to record the yardsticks is returned after the end is recorded. */
sb_status sb_run_record_end(sb_run_record *rec, const sb_train_outcome *res, sb_error *err);

/* Closes the database and releases the lock without recording an end (after begin found
 * the run finished). */
void sb_run_record_close(sb_run_record *rec);

#endif

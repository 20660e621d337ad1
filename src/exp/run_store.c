/* run_store.c - a results folder's layout and the results-database rows of one run (see
 * run_store.h). */
#include "exp/run_store.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/timer.h"
#include "model/model.h"
#include "tensor/gemm_engine.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"

/* ---- the folder layout ------------------------------------------------------------------ */

sb_status sb_run_store_make_dir(const char *dir, sb_error *err)
{
    return sb_make_dirs(dir, "results folder", err);
}

sb_status sb_run_store_db_path(const char *results_dir, char *out, size_t size, sb_error *err)
{
    int len = snprintf(out, size, "%s/" SB_RUN_STORE_DB_NAME, results_dir);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results path too long");
    return SB_OK;
}

sb_status sb_run_store_ckpt_path(const char *results_dir, const sb_run_config *cfg, char *out,
                                 size_t size, int create, sb_error *err)
{
    char dir[3072];
    if (snprintf(dir, sizeof dir, "%s/checkpoints", results_dir) >= (int)sizeof dir)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    if (create) {
        sb_status st = sb_run_store_make_dir(results_dir, err);
        if (st == SB_OK)
            st = sb_run_store_make_dir(dir, err);
        if (st != SB_OK)
            return st;
    }
    char hash[17];
    sb_run_config_hash(cfg, 1, hash);
    int len = snprintf(out, size, "%s/%s.safetensors", dir, hash);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    return SB_OK;
}

int sb_run_store_checkpoint_complete(const char *results_dir, const sb_run_config *cfg)
{
    char model[4096], optim[4200], pending[4300];
    sb_error err = {0};
    if (sb_run_store_ckpt_path(results_dir, cfg, model, sizeof model, 0, &err) != SB_OK ||
        access(model, R_OK) != 0)
        return 0;
    sb_checkpoint_optim_path(model, optim, sizeof optim);
    snprintf(pending, sizeof pending, "%s.pending", optim);
    return access(optim, R_OK) == 0 || access(pending, R_OK) == 0;
}

sb_status sb_run_store_log_dir(const char *results_dir, char *out, size_t size, int create,
                               sb_error *err)
{
    int len = snprintf(out, size, "%s/logs", results_dir);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    if (!create)
        return SB_OK;
    sb_status st = sb_run_store_make_dir(results_dir, err);
    if (st == SB_OK)
        st = sb_run_store_make_dir(out, err);
    return st;
}

sb_status sb_run_store_log_path(const char *results_dir, const char *hash, char *out, size_t size,
                                sb_error *err)
{
    int len = snprintf(out, size, "%s/logs/%s.log", results_dir, hash);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    return SB_OK;
}

sb_status sb_run_store_lock_path(const char *db_path, const char *hash, char *out, size_t size,
                                 int create, sb_error *err)
{
    const char *slash = strrchr(db_path, '/');
    int folder_len = slash != NULL ? (int)(slash - db_path) : 0;
    char dir[4096];
    int len = slash == NULL     ? snprintf(dir, sizeof dir, "locks")
              : folder_len == 0 ? snprintf(dir, sizeof dir, "/locks")
                                : snprintf(dir, sizeof dir, "%.*s/locks", folder_len, db_path);
    if (len < 0 || (size_t)len >= sizeof dir)
        return sb_error_set(err, SB_ERR_INVALID, "results database path '%s' is too long", db_path);
    if (create) {
        sb_status st = sb_run_store_make_dir(dir, err);
        if (st != SB_OK)
            return st;
    }
    len = snprintf(out, size, "%s/%s.lock", dir, hash);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results database path '%s' is too long", db_path);
    return SB_OK;
}

/* ---- runs whose process is gone ----------------------------------------------------------- */

/* Whether some process holds the lock of run hash in db (1), or none does (0); -1 when the
 * lock cannot be looked at. */
static int run_is_locked(sb_results *db, const char *hash)
{
    char path[4096];
    long holder = 0;
    sb_error ignored = {0};
    if (sb_run_store_lock_path(sb_results_file(db), hash, path, sizeof path, 0, &ignored) !=
            SB_OK ||
        sb_run_lock_holder(path, &holder, &ignored) != SB_OK)
        return -1;
    return holder != 0;
}

/* Row as the database has it now (after it changed under us). */
static sb_status reread_row(sb_results *db, sb_run_row *row, sb_error *err)
{
    sb_run_row now;
    int found = 0;
    sb_status st = sb_results_get_run(db, row->r.run_hash, &now, &found, err);
    if (st != SB_OK || !found)
        return st; /* deleted meanwhile: keep what was read */
    sb_results_run_row_clear(row);
    *row = now;
    return SB_OK;
}

/* Row reported interrupted (in memory only). */
static sb_status report_dead(sb_run_row *row)
{
    row->r.status = SB_RUN_INTERRUPTED;
    snprintf(row->r.reason, sizeof row->r.reason, "%s", SB_RUN_STORE_DEAD_REASON);
    return SB_OK;
}

/* One row of the dead-run rule (see sb_run_store_settle_dead). */
static sb_status settle_row(sb_results *db, sb_run_row *row, sb_error *err)
{
    if (row->r.status != SB_RUN_RUNNING || run_is_locked(db, row->r.run_hash) != 0)
        return SB_OK;
    if (!sb_results_is_readonly(db)) {
        int changed = 0;
        sb_error write_err = {0};
        /* a write that fails (the database busy for too long) still leaves the report right */
        if (sb_results_mark_interrupted(db, row->id, row->r.attempts, SB_RUN_STORE_DEAD_REASON,
                                        &changed, &write_err) == SB_OK)
            return reread_row(db, row, err);
        return report_dead(row);
    }
    /* read-only: report it, unless the row moved on since it was read */
    sb_run_row now;
    int found = 0;
    sb_status st = sb_results_get_run(db, row->r.run_hash, &now, &found, err);
    if (st != SB_OK)
        return st;
    int same = found && now.r.status == SB_RUN_RUNNING && now.r.attempts == row->r.attempts;
    if (found && !same) {
        sb_results_run_row_clear(row);
        *row = now;
        return SB_OK;
    }
    if (found)
        sb_results_run_row_clear(&now);
    return report_dead(row);
}

sb_status sb_run_store_settle_dead(sb_results *db, sb_run_row *rows, size_t n, sb_error *err)
{
    for (size_t i = 0; i < n; i++) {
        sb_status st = settle_row(db, &rows[i], err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

/* ---- a run's rows in the results database ----------------------------------------------- */

/* Takes the lock of run hash (beside the database db_path) into rec->lock; when another
 * process holds it, *locked_by names it and the call fails. */
static sb_status record_lock(sb_run_record *rec, const char *db_path, const char *hash,
                             long *locked_by, sb_error *err)
{
    char path[4096];
    sb_status st = sb_run_store_lock_path(db_path, hash, path, sizeof path, 1, err);
    if (st == SB_OK)
        st = sb_run_lock_take(path, &rec->lock, locked_by, err);
    if (st != SB_OK || *locked_by == 0)
        return st;
    char who[48] = "another process";
    if (*locked_by > 0)
        snprintf(who, sizeof who, "pid %ld", *locked_by);
    return sb_error_set(err, SB_ERR_RUNTIME,
                        "run %s is already being trained by %s (lock '%s'); wait for it to end "
                        "or stop it, then run this again",
                        hash, who, path);
}

/* Closes what begin opened, after it failed. */
static void record_abandon(sb_run_record *rec)
{
    sb_results_close(rec->db);
    rec->db = NULL;
    sb_run_lock_release(&rec->lock);
}

/* The part of a run's beginning that does not depend on who trains it: opens db_path, takes
 * the run's lock and looks for a finished run (deleted with force; else *finished = 1). */
static sb_status record_open(sb_run_record *rec, const char *db_path, const sb_run_config *cfg,
                             int force, int resume, int *finished, long *locked_by,
                             sb_run_row *stored, sb_error *err)
{
    memset(rec, 0, sizeof *rec);
    rec->lock.fd = -1;
    rec->resumed = resume;
    rec->task = cfg->task;
    rec->ceiling = rec->effective_memory = (double)NAN;
    rec->live_every = cfg->live_every;
    rec->last_point_s = sb_time_now();
    *finished = 0;
    *locked_by = 0;
    sb_status st = sb_results_open(db_path, &rec->db, err);
    if (st != SB_OK)
        return st;
    char hash[17];
    sb_run_config_hash(cfg, 0, hash);
    /* the lock before the row: a run is marked running only by the process that trains it */
    if ((st = record_lock(rec, db_path, hash, locked_by, err)) != SB_OK)
        goto fail;
    int found = 0;
    if ((st = sb_results_get_run(rec->db, hash, stored, &found, err)) != SB_OK)
        goto fail;
    if (found && stored->r.status == SB_RUN_FINISHED) {
        if (!force) {
            *finished = 1;
            return SB_OK;
        }
        int deleted = 0;
        if ((st = sb_results_delete_run(rec->db, hash, &deleted, err)) != SB_OK)
            goto fail;
    }
    /* a resumed run's wall time counts its earlier attempts (each recorded its own part) */
    if (found && resume && isfinite(stored->r.wall_s) && stored->r.wall_s > 0)
        rec->wall_before = stored->r.wall_s;
    if (found)
        sb_results_run_row_clear(stored);
    return SB_OK;
fail:
    record_abandon(rec);
    return st;
}

/* Records the start of the run described by info (its hash, configuration text and host
 * filled in here); on failure the database is closed and the lock released. */
static sb_status record_start(sb_run_record *rec, const sb_run_config *cfg, sb_run_info *info,
                              sb_error *err)
{
    char hash[17];
    sb_run_config_hash(cfg, 0, hash);
    char *config = sb_run_config_json_string(cfg, 0);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    info->hash = hash;
    info->config_json = config;
    info->host = host[0] != '\0' ? host : NULL;
    sb_status st = config != NULL ? sb_results_run_begin(rec->db, info, &rec->run_id, err)
                                  : sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    free(config);
    if (st != SB_OK)
        record_abandon(rec);
    return st;
}

sb_status sb_run_record_begin(sb_run_record *rec, const char *db_path, const sb_run_config *cfg,
                              const char *ckpt, int force, int resume, int world_size, int threads,
                              int *finished, long *locked_by, sb_run_row *stored, sb_error *err)
{
    sb_status st = record_open(rec, db_path, cfg, force, resume, finished, locked_by, stored, err);
    if (st != SB_OK || *finished)
        return st;
    /* what the run is: parameters, state size and FLOPs of its model on its task */
    sb_task *task = NULL;
    if ((st = sb_task_create(&cfg->task, &task, err)) != SB_OK)
        goto fail;
    sb_model_config mc = sb_run_config_model(cfg, task->n_inputs, task->grammar->d_output);
    int frames = task->n_elements[SB_SPLIT_TRAIN];
    sb_task_free(task);
    size_t params = 0;
    if ((st = sb_model_param_count(&mc, &params, err)) != SB_OK)
        goto fail;
    const sb_layer_type *type = sb_layer_type_find(mc.model);
    sb_fingerprint fp;
    sb_gemm_fingerprint(cfg, threads, &fp);
    sb_run_info info = {
        .model = cfg->model,
        .protocol = cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference",
        .params = (int64_t)params,
        .state_size =
            type->state_size != NULL ? (int64_t)(mc.n_layers * type->state_size(&mc)) : -1,
        .flops_per_token = sb_model_config_flops_per_token(&mc, frames),
        .code_version = SB_VERSION,
        .checkpoint = ckpt,
        .keep_evaluations = resume,
        .world_size = world_size,
        .threads = threads,
        .engine = fp.table,
        .fingerprint = fp.digest,
    };
    return record_start(rec, cfg, &info, err);
fail:
    record_abandon(rec);
    return st;
}

sb_status sb_run_record_begin_external(sb_run_record *rec, const char *db_path,
                                       const sb_run_config *cfg, int64_t params, int64_t state_size,
                                       const char *code_version, int *finished, long *locked_by,
                                       sb_run_row *stored, sb_error *err)
{
    sb_status st = record_open(rec, db_path, cfg, 0, 0, finished, locked_by, stored, err);
    if (st != SB_OK || *finished)
        return st;
    sb_run_info info = {
        .model = cfg->model,
        .protocol = cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference",
        .params = params,
        .state_size = state_size,
        .flops_per_token = (double)NAN,
        .code_version = code_version,
    };
    return record_start(rec, cfg, &info, err);
}

/* A live point of an update's progress event: written when live_every seconds have passed
 * since the last point. The clock decides only what is recorded, never what is computed. */
static sb_status record_live(sb_run_record *rec, const sb_train_event *ev, sb_error *err)
{
    double now = sb_time_now();
    if (rec->live_every <= 0 || now - rec->last_point_s < rec->live_every)
        return SB_OK;
    rec->last_point_s = now;
    sb_eval_row live = {.step = ev->step,
                        .samples = ev->samples,
                        .split = SB_SPLIT_TRAIN,
                        .loss = ev->mean_loss,
                        .acc = ev->mean_acc,
                        .lr = ev->lr,
                        .tokens_per_s = isfinite(ev->tokens_per_s) ? ev->tokens_per_s : (double)NAN,
                        .wall_s = ev->elapsed_s};
    return sb_results_add_live(rec->db, rec->run_id, &live, err);
}

sb_status sb_run_record_event(sb_run_record *rec, const sb_train_event *ev, sb_error *err)
{
    if (rec->db != NULL && ev->kind == SB_EVENT_START && rec->resumed)
        return sb_results_delete_evals_after(rec->db, rec->run_id, ev->step, err);
    if (rec->db != NULL && ev->kind == SB_EVENT_PROGRESS)
        return record_live(rec, ev, err);
    if (rec->db == NULL || ev->kind != SB_EVENT_EVAL)
        return SB_OK;
    rec->last_point_s = sb_time_now();
    /* a rate over no measured time (an evaluation before the first timed update) is
     * unknown, not infinite */
    double rate = isfinite(ev->tokens_per_s) ? ev->tokens_per_s : (double)NAN;
    sb_eval_row test = {.step = ev->step,
                        .samples = ev->samples,
                        .split = SB_SPLIT_TEST,
                        .loss = ev->test_loss,
                        .acc = ev->test_acc,
                        .lr = ev->lr,
                        .tokens_per_s = rate,
                        .wall_s = ev->elapsed_s};
    sb_status st = sb_results_add_eval(rec->db, rec->run_id, &test, err);
    if (st == SB_OK && !isnan(ev->valid_acc)) {
        sb_eval_row valid = test;
        valid.split = SB_SPLIT_VALID;
        valid.loss = ev->valid_loss;
        valid.acc = ev->valid_acc;
        st = sb_results_add_eval(rec->db, rec->run_id, &valid, err);
    }
    if (!isnan(ev->loss)) {
        sb_eval_row train = test;
        train.split = SB_SPLIT_TRAIN;
        train.loss = ev->loss;
        train.acc = ev->acc;
        /* the train row is written even when the test row failed; err keeps the first */
        sb_error train_err = {0};
        sb_status st_train = sb_results_add_eval(rec->db, rec->run_id, &train, &train_err);
        if (st == SB_OK && st_train != SB_OK) {
            st = st_train;
            *err = train_err;
        }
    }
    return st;
}

sb_status sb_run_record_end(sb_run_record *rec, const sb_train_outcome *res, sb_error *err)
{
    if (rec->db == NULL)
        return SB_OK;
    sb_run_metrics m = {.test_acc = res->test_acc,
                        .test_loss = res->test_loss,
                        .train_acc = res->train_acc,
                        .train_loss = res->train_loss,
                        .wall_s = res->wall_s + rec->wall_before,
                        .tokens_per_s = res->tokens_per_s,
                        .valid_acc = res->valid_acc,
                        .valid_loss = res->valid_loss};
    sb_run_status status = res->status != SB_RUN_NONE ? res->status : SB_RUN_FAILED;
    sb_status st = sb_results_run_end(rec->db, rec->run_id, status,
                                      res->reason[0] != '\0' ? res->reason : NULL, &m, err);
    if (st == SB_OK && status == SB_RUN_FINISHED)
        st = sb_results_record_yardsticks(rec->db, rec->run_id, &rec->task, res->test_acc,
                                          rec->threads, &rec->ceiling, &rec->effective_memory, err);
    sb_run_record_close(rec);
    return st;
}

void sb_run_record_close(sb_run_record *rec)
{
    record_abandon(rec);
}

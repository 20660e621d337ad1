/* train_api.c - the public API's training, evaluation and checkpoints (selectivbench.h):
 * wrappers over train/trainer.h, train/checkpoint.h and exp/run_store.h, doing what
 * `selectivbench train` and `eval` do without their printing. */
#include <math.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "core/alloc.h"
#include "core/cpus.h"
#include "exp/run_store.h"
#include "tensor/gemm_engine.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"
#include "train/trainer.h"

/* The trainer's events as the public progress record, and the run's database rows. */
typedef struct train_sinks {
    const sb_train_settings *settings;
    sb_run_record rec; /* rec.db NULL: in memory */
    sb_error db_err;   /* the first failed database write (the run goes on) */
} train_sinks;

static void train_event(const sb_train_event *ev, void *user)
{
    train_sinks *s = user;
    const sb_train_settings *set = s->settings;
    if (s->rec.db != NULL) {
        sb_error err = {0};
        if (sb_run_record_event(&s->rec, ev, &err) != SB_OK && s->db_err.status == SB_OK) {
            s->db_err = err;
            if (set->on_db_warning != NULL)
                set->on_db_warning(err.msg, 0, set->user);
        }
    }
    sb_progress_fn fn = ev->kind == SB_EVENT_START ? set->on_start : set->progress;
    if (fn == NULL)
        return;
    int eval = ev->kind == SB_EVENT_EVAL;
    sb_progress p = {
        .is_evaluation = eval,
        .step = ev->step,
        .total_steps = ev->total_steps,
        .samples = ev->samples,
        .loss = ev->loss,
        .acc = ev->acc,
        .test_loss = eval ? ev->test_loss : (double)NAN,
        .test_acc = eval ? ev->test_acc : (double)NAN,
        .lr = ev->lr,
        .tokens_per_s = ev->tokens_per_s,
        .elapsed_s = ev->elapsed_s,
        .eta_s = ev->eta_s,
        .params = ev->params,
        .grad_acc = ev->grad_acc,
        .mean_loss = ev->mean_loss,
        .mean_acc = ev->mean_acc,
        .valid_loss = eval ? ev->valid_loss : (double)NAN,
        .valid_acc = eval ? ev->valid_acc : (double)NAN,
    };
    fn(&p, set->user);
}

/* The outcome's fields that do not depend on training. */
static void outcome_init(sb_train_outcome *out, const sb_run_config *cfg)
{
    memset(out, 0, sizeof *out);
    out->test_acc = out->test_loss = out->train_acc = out->train_loss = (double)NAN;
    out->valid_acc = out->valid_loss = (double)NAN;
    out->tokens_per_s = out->wall_s = (double)NAN;
    out->ceiling = out->effective_memory = out->flops_per_token = (double)NAN;
    sb_run_config_hash(cfg, 0, out->run_hash);
    sb_run_config_hash(cfg, 1, out->training_hash);
}

/* A run the database already has finished, as its row stores it. */
static void outcome_from_row(sb_train_outcome *out, const sb_run_row *row)
{
    out->status = row->r.status;
    out->test_acc = row->r.test_acc;
    out->test_loss = row->r.test_loss;
    out->train_acc = row->r.train_acc;
    out->train_loss = row->r.train_loss;
    out->valid_acc = row->r.valid_acc;
    out->valid_loss = row->r.valid_loss;
    out->tokens_per_s = row->r.tokens_per_s;
    out->wall_s = row->r.wall_s;
    out->params = row->r.params >= 0 ? (uint64_t)row->r.params : 0;
    out->ceiling = row->r.ceiling;
    out->effective_memory = row->r.effective_memory;
    out->flops_per_token = row->r.flops_per_token;
    snprintf(out->checkpoint, sizeof out->checkpoint, "%s", row->r.checkpoint);
    snprintf(out->finished_at, sizeof out->finished_at, "%s", row->r.finished_at);
    out->cached = 1;
}

/* What a results folder says of a run about to train; a world of processes all follow
 * rank 0's (world_agree). */
enum { VERDICT_TRAIN, VERDICT_CACHED, VERDICT_FAILED, VERDICT_LOCKED };

/* The database and checkpoint paths of a run in its results folder, into out; create:
 * make the folders that will be written. */
static sb_status results_paths(const sb_run_config *run, int create, sb_train_outcome *out,
                               sb_error *err)
{
    const sb_runtime *rt = &run->rt;
    sb_status st;
    if (create && (st = sb_run_store_make_dir(rt->results, err)) != SB_OK)
        return st;
    if (rt->db[0] != '\0')
        snprintf(out->database, sizeof out->database, "%s", rt->db);
    else if ((st = sb_run_store_db_path(rt->results, out->database, sizeof out->database, err)) !=
             SB_OK)
        return st;
    if (rt->ckpt[0] != '\0')
        snprintf(out->checkpoint, sizeof out->checkpoint, "%s", rt->ckpt);
    else if ((st = sb_run_store_ckpt_path(rt->results, run, out->checkpoint, sizeof out->checkpoint,
                                          create && rt->save_model, err)) != SB_OK)
        return st;
    if (!rt->save_model && !run->test_pretrained && !rt->resume)
        out->checkpoint[0] = '\0'; /* nothing will be written or read there */
    return SB_OK;
}

/* With resume: the engine table the checkpoint was trained under, when the configuration
 * leaves gemm at its default (auto), so that the continued run computes as the first part
 * did; the checkpoint's fingerprint into out. A checkpoint that is missing or records no
 * table changes nothing (the trainer reports a missing one). */
static sb_status resume_engine(sb_run_config *run, sb_train_outcome *out, sb_error *err)
{
    char path[4096];
    sb_status st = SB_OK;
    if (run->rt.ckpt[0] != '\0')
        snprintf(path, sizeof path, "%s", run->rt.ckpt);
    else if ((st = sb_run_store_ckpt_path(run->rt.results, run, path, sizeof path, 0, err)) !=
             SB_OK)
        return st;
    if (access(path, R_OK) != 0)
        return SB_OK;
    char table[16], digest[9];
    if ((st = sb_checkpoint_read_engine(path, table, digest, err)) != SB_OK)
        return st;
    snprintf(out->checkpoint_fingerprint, sizeof out->checkpoint_fingerprint, "%s", digest);
    sb_gemm_kind recorded;
    if (table[0] != '\0' && run->gemm == SB_GEMM_AUTO &&
        sb_gemm_table_parse(table, &recorded, NULL) == SB_OK)
        run->gemm = recorded;
    return SB_OK;
}

/* Opens the run's record in its database (the lock, its row): *verdict TRAIN, CACHED (out
 * filled from the finished row), LOCKED or FAILED (the status returned). */
static sb_status results_begin(const sb_run_config *run, int world, train_sinks *sinks,
                               sb_train_outcome *out, int *verdict, sb_error *err)
{
    int finished = 0;
    sb_run_row stored;
    memset(&stored, 0, sizeof stored);
    sb_status st = sb_run_record_begin(&sinks->rec, out->database, run,
                                       out->checkpoint[0] != '\0' ? out->checkpoint : NULL,
                                       run->rt.force, run->rt.resume, world, out->threads,
                                       &finished, &out->locked_by, &stored, err);
    if (st != SB_OK) {
        *verdict = out->locked_by != 0 ? VERDICT_LOCKED : VERDICT_FAILED;
        return st;
    }
    if (finished) {
        outcome_from_row(out, &stored);
        sb_results_run_row_clear(&stored);
        sb_run_record_close(&sinks->rec);
        *verdict = VERDICT_CACHED;
    }
    return SB_OK;
}

/* Every process takes rank 0's verdict (all_gather of one int each). */
static sb_status world_agree(const sb_train_settings *settings, int world, int *verdict,
                             sb_error *err)
{
    if (settings->all_gather == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "a world of %d processes needs settings->all_gather", world);
    int *all = sb_malloc((size_t)world * sizeof *all);
    if (all == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    int mine = *verdict;
    int rc = settings->all_gather(&mine, sizeof mine, all, settings->world_user);
    *verdict = all[0];
    sb_free(all);
    if (rc != 0)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "the processes could not agree to begin the run (all-gather failed)");
    return SB_OK;
}

/* What may refuse a run before anything is recorded: the one check of its configuration,
 * the engine table a resume takes from its checkpoint, the fingerprint (into out, with the
 * threads) and the engine and precision this machine can run. */
static sb_status prepare_run(sb_run_config *run, sb_train_outcome *out, sb_error *err)
{
    const sb_runtime *rt = &run->rt;
    int threads = rt->threads > 0 ? rt->threads : sb_cpu_count();
    sb_status st = sb_run_config_check(run, err);
    if (st == SB_OK && rt->resume && rt->results[0] != '\0')
        st = resume_engine(run, out, err);
    sb_fingerprint fp;
    sb_gemm_fingerprint(run, threads, &fp);
    snprintf(out->engine, sizeof out->engine, "%s", fp.table);
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s", fp.digest);
    out->threads = threads;
    if (st == SB_OK)
        st = sb_gemm_configure(run, err);
    if (st != SB_OK) {
        out->status = SB_RUN_FAILED;
        snprintf(out->reason, sizeof out->reason, "%s", err != NULL ? err->msg : "");
    }
    return st;
}

sb_status sb_train_config(const sb_config *cfg, const sb_train_settings *settings,
                          sb_train_outcome *out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    memset(out, 0, sizeof *out);
    SB_API_REQUIRE(cfg, err);
    sb_run_config resolved = cfg->run; /* a resume may take its checkpoint's engine table */
    const sb_run_config *run = &resolved;
    outcome_init(out, run);
    sb_train_settings none = {0};
    if (settings == NULL)
        settings = &none;
    sb_status st = prepare_run(&resolved, out, err);
    if (st != SB_OK)
        return st;
    const sb_runtime *rt = &run->rt;
    const int threads = out->threads;
    const int recorded = rt->results[0] != '\0';

    train_sinks sinks;
    memset(&sinks, 0, sizeof sinks);
    sinks.settings = settings;
    const int world = settings->world_size > 1 ? settings->world_size : 1;
    const int rank = world > 1 ? settings->world_rank : 0;
    int verdict = VERDICT_TRAIN;
    if (recorded) {
        st = results_paths(run, rank == 0, out, err);
        if (st == SB_OK && rank == 0)
            st = results_begin(run, world, &sinks, out, &verdict, err);
        else if (st != SB_OK)
            verdict = VERDICT_FAILED;
        if (st == SB_OK && verdict == VERDICT_TRAIN)
            sinks.rec.threads = threads;
    }
    /* a world of processes does what rank 0's database says (it alone opens it) */
    if (world > 1 && (st = world_agree(settings, world, &verdict, err)) != SB_OK) {
        if (sinks.rec.db != NULL)
            sb_run_record_close(&sinks.rec);
        return st;
    }
    if (verdict != VERDICT_TRAIN) {
        if (rank == 0)
            return st;
        if (verdict == VERDICT_CACHED) {
            out->cached = 1;
            return SB_OK;
        }
        if (verdict == VERDICT_LOCKED)
            out->locked_by = -1;
        return sb_error_set(err, SB_ERR_RUNTIME, "rank 0 did not begin the run");
    }

    if (settings->on_begin != NULL)
        settings->on_begin(settings->user);
    sb_train_options topt = {
        .threads = threads,
        .ckpt_path = out->checkpoint[0] != '\0' ? out->checkpoint : NULL,
        .mem_budget_gb = rt->mem_budget,
        .resume = rt->resume,
        .callback = train_event,
        .user = &sinks,
        .should_stop = settings->should_stop,
        .checkpoint_every_s = 60.0 * rt->checkpoint_every,
        .stop_user = settings->user,
        .inject_nan_at = rt->inject_nan_at,
        .world_rank = rank,
        .world_size = world,
        .all_gather = settings->all_gather,
        .world_user = settings->world_user,
        .all_to_all = settings->all_to_all,
    };
    st = sb_train(run, &topt, out, err); /* the trainer's fields of out */
    if (out->status == SB_RUN_NONE)
        out->status = SB_RUN_FAILED;
    sb_error db_err = {0};
    sb_status db_st = SB_OK;
    if (sinks.rec.db != NULL)
        db_st = sb_run_record_end(&sinks.rec, out, &db_err);
    if (db_st != SB_OK && settings->on_db_warning != NULL) {
        settings->on_db_warning(db_err.msg, 1, settings->user);
        db_st = SB_OK;
    }
    if (settings->on_db_warning != NULL)
        sinks.db_err.status = SB_OK; /* reported */

    if (recorded && rank == 0) {
        out->ceiling = sinks.rec.ceiling;
        out->effective_memory = sinks.rec.effective_memory;
    }
    if (st != SB_OK)
        return st;
    /* the run trained: a failure to record it is the call's failure (the numbers are in out) */
    if (sinks.db_err.status != SB_OK)
        return sb_error_set(err, sinks.db_err.status, "%s", sinks.db_err.msg);
    if (db_st != SB_OK)
        return sb_error_set(err, db_st, "%s", db_err.msg);
    return SB_OK;
}

sb_status sb_evaluate_checkpoint(const char *checkpoint, const sb_config *cfg, sb_eval_outcome *out,
                                 sb_error *err)
{
    SB_API_REQUIRE(out, err);
    memset(out, 0, sizeof *out);
    out->test_acc = out->test_loss = out->test_gap_s = (double)NAN;
    out->valid_acc = out->valid_loss = (double)NAN;
    SB_API_REQUIRE(checkpoint, err);
    sb_run_config run;
    sb_status st = SB_OK;
    if (cfg != NULL)
        run = cfg->run;
    else if ((st = sb_checkpoint_read_config(checkpoint, &run, err)) != SB_OK)
        return st;
    if ((st = sb_run_config_check(&run, err)) != SB_OK)
        return st;
    /* the engine table the checkpoint was trained under, unless the caller names one */
    char table[16], digest[9];
    sb_gemm_kind recorded;
    if ((st = sb_checkpoint_read_engine(checkpoint, table, digest, err)) != SB_OK)
        return st;
    if (table[0] != '\0' && run.gemm == SB_GEMM_AUTO &&
        sb_gemm_table_parse(table, &recorded, NULL) == SB_OK)
        run.gemm = recorded;
    const sb_runtime *rt = &run.rt;
    omp_set_num_threads(rt->threads > 0 ? rt->threads : sb_cpu_count());
    if ((st = sb_gemm_configure(&run, err)) != SB_OK)
        return st;

    sb_task *task = NULL;
    sb_model *m = NULL;
    if ((st = sb_task_create(&run.task, &task, err)) != SB_OK)
        return st;
    sb_model_config mc = sb_run_config_model(&run, task->n_inputs, task->grammar->d_output);
    if ((st = sb_model_create(&mc, run.seed, &m, err)) == SB_OK &&
        (st = sb_checkpoint_load(checkpoint, m, NULL, NULL, err)) == SB_OK &&
        (rt->dump[0] == '\0' ||
         (st = sb_dump_first_batch(rt->dump, task, m, run.test_bs, err)) == SB_OK))
        st =
            sb_evaluate(task, m, run.test_bs, rt->mem_budget, &out->test_loss, &out->test_acc, err);
    if (st == SB_OK && isfinite(out->test_loss))
        st = sb_evaluate_split(task, SB_SPLIT_VALID, m, run.test_bs, rt->mem_budget,
                               &out->valid_loss, &out->valid_acc, err);
    /* finite weights can still overflow in the forward pass (values near the float limit):
     * a non-finite loss is the weights' failure, never a result */
    if (st == SB_OK && !isfinite(out->test_loss)) {
        st = sb_error_set(err, SB_ERR_DIVERGED,
                          "checkpoint '%s': its weights give a non-finite test loss (%g): they "
                          "overflow in the forward pass (a run that diverged, or damaged "
                          "weights); evaluate an earlier checkpoint or retrain",
                          checkpoint, out->test_loss);
        out->test_loss = out->test_acc = (double)NAN;
    }
    if (st == SB_OK) {
        out->test_size = sb_task_split_size(task, SB_SPLIT_TEST);
        out->valid_size = sb_task_split_size(task, SB_SPLIT_VALID);
        out->test_gap_s = sb_task_test_duration(task);
    }
    sb_model_free(m);
    sb_task_free(task);
    return st;
}

sb_status sb_checkpoint_config(const char *path, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(path, err);
    sb_run_config run;
    sb_status st = sb_checkpoint_read_config(path, &run, err);
    if (st != SB_OK)
        return st;
    return sb_api_config_new(&run, out, err);
}

/* plan_calibrate.c - one calibration of `selectivbench plan` (plan.h): the seconds a
 * training frame and a test frame of one shape of run take on this machine, measured on a
 * few real training updates and one evaluation of that run's configuration. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"
#include "exp/plan.h"
#include "model/model.h"
#include "task/batch.h"
#include "task/ceiling.h"
#include "tensor/gemm_engine.h"
#include "tensor/nn.h"
#include "tensor/optim.h"
#include "train/run_setup.h"
#include "train/trainer.h"

/* A training micro-batch measured here has at most this many FLOPs per thread (forward and
 * backward: about a second at 10 GFLOP/s); a larger one is measured on fewer layers, then
 * (one layer still too large) on fewer samples. Layers go first: a step's time is close to
 * proportional to its layers, while a smaller batch costs far more per frame (a step's
 * fixed costs are shared by fewer frames: 3 samples instead of 32 take 5 to 7 times longer
 * per frame at widths 64 and 128). */
#define CAL_STEP_FLOPS 1e10
/* Timed micro-batches at most (small models reach the time target long before). */
#define CAL_MAX_MICRO 64
/* The evaluation measured: at most this many forward FLOPs per thread, at most two test
 * batches. */
#define CAL_EVAL_FLOPS 2e9

/* Seconds of work: on one thread the process's CPU time, which other processes sharing
 * the cores do not inflate (a calibration on a busy machine measures the quiet machine);
 * on several threads the wall clock (the threads' waits count). */
static double work_now(int threads)
{
    if (threads > 1)
        return sb_time_now();
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return sb_time_now();
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The frames of the first n samples of a split, summed. */
static sb_status split_frames(const sb_task *task, sb_split split, int64_t n, double *frames,
                              sb_error *err)
{
    sb_sample sample;
    memset(&sample, 0, sizeof sample);
    sb_status st = sb_sample_alloc(task, &sample, err);
    *frames = 0.0;
    for (int64_t i = 0; st == SB_OK && i < n; i++) {
        st = sb_task_sample(task, split, i, &sample, err);
        *frames += sample.n_frames;
    }
    sb_sample_free(&sample);
    return st;
}

/* Trains m on micro-batches of B samples for about target_s seconds: *s_per_frame, and the
 * GEMM share of the model's FLOPs. The first micro-batch is a warm-up, never timed, even
 * when it is the size of the whole budget: its first-call costs (the arena's first touch
 * of its pages, oneDNN's primitives, OpenBLAS's buffers) made it 5-10 times slower per frame
 * than the next ones at width 64 and 200-element samples, and a run pays them once. */
static sb_status measure_training(const sb_run_config *cfg, const sb_task *task, sb_model *m, int B,
                                  int acc, int threads, double target_s, double *s_per_frame,
                                  double *gemm_share, double *gflops, sb_error *err)
{
    sb_batch batch;
    memset(&batch, 0, sizeof batch);
    sb_status st = sb_batch_init(&batch, task, B, err);
    if (st != SB_OK)
        return st;
    int64_t n_train = sb_task_split_size(task, SB_SPLIT_TRAIN);
    int64_t index[4096];
    if (B > (int)(sizeof index / sizeof *index))
        B = (int)(sizeof index / sizeof *index);
    sb_graph g;
    sb_graph_init(&g, 0);
    sb_optimizer opt;
    sb_optimizer_init(&opt, cfg->optimizer, cfg->lr, cfg->wd);
    double timed = 0.0, frames = 0.0, model_flops = 0.0;
    int timed_micro = 0;
    for (int k = 0; st == SB_OK; k++) {
        if (k == 1)
            sb_gemm_flops_reset(); /* count the timed micro-batches only */
        double t0 = work_now(threads);
        for (int i = 0; i < B; i++)
            index[i] = ((int64_t)k * B + i) % (n_train > 0 ? n_train : 1);
        st = sb_batch_fill(&batch, task, SB_SPLIT_TRAIN, index, B, 0, err);
        if (st != SB_OK)
            break;
        g.training = 1;
        g.step = (uint64_t)k;
        double loss = 0.0;
        st = sb_train_micro_batch(&g, m, &batch, 1, &loss, err);
        if (st != SB_OK)
            break;
        if ((k + 1) % acc == 0) {
            sb_clip_grad_norm(&m->params, 1.0);
            sb_optimizer_step(&opt, &m->params, 1.0);
            sb_params_zero_grad(&m->params);
        }
        if (k == 0)
            continue; /* the warm-up: first allocations, the GEMM engine's choices */
        timed += work_now(threads) - t0;
        timed_micro++;
        double f = 0.0;
        for (int b = 0; b < B; b++)
            f += batch.n_frames[b];
        frames += f;
        model_flops += 3.0 * sb_model_flops_per_token(m, batch.T) * f;
        /* two timed micro-batches, or one when it alone takes a third of the target */
        if (timed_micro >= CAL_MAX_MICRO || (timed_micro >= 2 && timed >= target_s) ||
            (timed_micro == 1 && timed >= target_s / 3))
            break;
    }
    if (st == SB_OK) {
        double openblas = 0.0, onednn = 0.0;
        sb_gemm_flops_get(&openblas, &onednn);
        *s_per_frame = frames > 0 ? timed / frames : 0.0;
        *gemm_share = model_flops > 0 ? fmin(1.0, (openblas + onednn) / model_flops) : 0.0;
        *gflops = timed > 0 ? model_flops / timed / 1e9 : 0.0;
    }
    sb_graph_free(&g);
    sb_batch_free(&batch);
    return st;
}

/* Evaluates m on a copy of the task whose test split has n_test samples: seconds per frame,
 * of a second evaluation (a run evaluates many times; the first pays the first calls). */
static sb_status measure_evaluation(const sb_run_config *cfg, const sb_model *m, int64_t n_test,
                                    int threads, double *s_per_frame, sb_error *err)
{
    sb_task_config tc = cfg->task;
    tc.test_size = n_test;
    sb_task *small = NULL;
    sb_status st = sb_task_create(&tc, &small, err);
    if (st != SB_OK)
        return st;
    double frames = 0.0, loss = 0.0, acc = 0.0;
    st = split_frames(small, SB_SPLIT_TEST, sb_task_split_size(small, SB_SPLIT_TEST), &frames, err);
    if (st == SB_OK)
        st = sb_evaluate(small, m, cfg->test_bs, 4.0, &loss, &acc, err);
    double t0 = work_now(threads);
    if (st == SB_OK)
        st = sb_evaluate(small, m, cfg->test_bs, 4.0, &loss, &acc, err);
    double t = work_now(threads) - t0;
    if (st == SB_OK)
        *s_per_frame = frames > 0 ? t / frames : 0.0;
    sb_task_free(small);
    return st;
}

sb_status sb_plan_calibrate(const sb_run_config *cfg, const sb_task *task, int micro, int acc,
                            int threads, double target_s, double task_s, sb_plan_calibration *c,
                            sb_error *err)
{
    double t_begin = sb_time_now();
    omp_set_num_threads(threads);
    sb_status st = sb_gemm_configure(cfg, err);
    if (st != SB_OK)
        return st;
    sb_model_config mc = sb_run_config_model(cfg, task->n_inputs, task->grammar->d_output);
    /* the mean training sample, to size the measured micro-batch */
    int64_t n_train = sb_task_split_size(task, SB_SPLIT_TRAIN);
    double frames = 0.0;
    int64_t n_look = n_train < 16 ? n_train : 16;
    if ((st = split_frames(task, SB_SPLIT_TRAIN, n_look, &frames, err)) != SB_OK)
        return st;
    int T = n_look > 0 ? (int)lround(frames / (double)n_look) : 1;
    if (T < 1)
        T = 1;
    double per_sample = 3.0 * sb_model_config_flops_per_token(&mc, T) * T;
    double budget = CAL_STEP_FLOPS * threads;
    int B = micro, layers = mc.n_layers;
    if (per_sample * B > budget && mc.n_layers > 1)
        layers = (int)fmax(1.0, floor(mc.n_layers * budget / (per_sample * B)));
    double per_layer_sample = per_sample / mc.n_layers * layers;
    if (per_layer_sample * B > budget)
        B = (int)fmax(1.0, floor(budget / per_layer_sample));
    sb_model_config measured = mc;
    measured.n_layers = layers;

    double t0 = work_now(threads);
    sb_model *m = NULL;
    if ((st = sb_model_create(&measured, 1, &m, err)) != SB_OK)
        return st;
    double model_s = (work_now(threads) - t0) * (double)mc.n_layers / (double)layers;
    /* the run's yardsticks: the ideal observer of its task, computed when it ends (once per
     * task in a results database; counted for every run here, a few seconds at most) */
    sb_ceiling_options copt = sb_ceiling_options_default();
    copt.threads = threads;
    sb_ceiling ceiling;
    double t1 = work_now(threads);
    if ((st = sb_ceiling_compute_with(task, &copt, &ceiling, err)) != SB_OK) {
        sb_model_free(m);
        return st;
    }
    double ceiling_s = work_now(threads) - t1;
    double train_spf = 0.0, eval_spf = 0.0, gemm = 0.0, gflops = 0.0;
    st = measure_training(cfg, task, m, B, acc, threads, target_s * 0.75, &train_spf, &gemm,
                          &gflops, err);
    if (st == SB_OK) {
        /* a test sample's forward costs about a third of a training sample's step */
        double eval_sample = per_layer_sample / 3.0;
        int64_t n_test = (int64_t)fmax(1.0, floor(CAL_EVAL_FLOPS * threads / eval_sample));
        int64_t most = 2 * (int64_t)cfg->test_bs;
        int64_t test_size = cfg->task.test_size;
        if (n_test > most)
            n_test = most;
        if (test_size > 0 && n_test > test_size)
            n_test = test_size;
        st = measure_evaluation(cfg, m, n_test, threads, &eval_spf, err);
    }
    sb_model_free(m);
    if (st != SB_OK)
        return st;
    double scale = (double)mc.n_layers / (double)layers;
    c->train_s_per_frame = train_spf * scale;
    c->eval_s_per_frame = eval_spf * scale;
    c->setup_s = task_s + model_s + ceiling_s + SB_PLAN_PROCESS_S;
    c->gemm_share = gemm;
    c->gflops = gflops;
    c->calibrated_layers = layers;
    c->calibrated_threads = threads;
    c->measured_s = sb_time_now() - t_begin;
    c->source = SB_PLAN_MEASURED;
    return SB_OK;
}

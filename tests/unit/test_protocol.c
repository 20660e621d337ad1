/*
 * test_protocol.c - what --protocol changes in training (docs/training.md, "Two protocols"),
 * through the trainer's own code (double build: the comparisons are exact up to rounding).
 *
 * 1. Gradient accumulation. train.py calls loss.backward() on every micro-batch's loss (the
 *    mean cross-entropy over that micro-batch's valid frames) and steps every grad_acc of
 *    them, so an update's gradient is the SUM of the micro-batches' mean-loss gradients
 *    (protocol reference); clean takes their MEAN. The micro-batches are run with the
 *    trainer's step (sb_train_micro_batch) and loss scale (sb_train_loss_scale), one after
 *    the other without zeroing, as in the loop, and the accumulated gradient is compared
 *    (a) with the sum / mean of the gradients of each micro-batch run alone, and (b) with
 *    central differences of the reference's objective sum_j mean_loss_j (divided by k under
 *    clean), on the largest gradient element of every parameter tensor.
 * 2. The dropout quirk. train.py calls model.train() once; its evaluation switches the model
 *    to eval mode and nothing switches it back, so under the reference protocol dropout
 *    stops after the first evaluation; under clean it stays on. With a learning rate of
 *    1e-12 the weights stay put, so the loss sb_train reports for each update is the loss
 *    of that micro-batch under the initial weights, with or without dropout: the test
 *    compares it with the dropout-free loss computed here, update by update, for an
 *    uninterrupted run and for a run resumed after the first evaluation.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/model.h"
#include "task/batch.h"
#include "test_util.h"
#include "train/run_setup.h"
#include "train/trainer.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_test_protocol_XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_remove_dir(tmpdir);
}

/* A tiny GRU run: 9-letter grammar, 20-element samples with 1-3 frame gaps (so samples have
 * different frame counts and micro-batches different numbers of valid frames), 12 updates
 * of 16 samples, an evaluation every 4 updates. */
static sb_run_config tiny_run(sb_protocol protocol)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "gru");
    c.task.grammar.vocab = 9, c.task.grammar.amb = 8, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.train_gap_max = 0.3;
    c.task.dataset_size = 192;
    c.task.test_size = 16;
    c.task.protocol = protocol;
    c.feat_size = 8;
    c.layers = 2;
    c.batch_size = 16;
    c.test_bs = 8;
    c.epoch_size = 64;
    c.curve_points = 0; /* the --epoch_size evaluations alone: their cadence is the subject */
    c.dropout = 0.5;
    c.lr = 1e-3;
    c.seed = c.task.grammar.seed = 3;
    return c;
}

/* The task and the initial model of a run (the trainer builds exactly these). */
static void make_task_model(const sb_run_config *c, sb_task **task, sb_model **m)
{
    sb_error err = {0};
    if (sb_task_create(&c->task, task, &err) != SB_OK)
        fail_msg("task: %s", err.msg);
    sb_model_config mc = sb_run_config_model(c, (*task)->n_inputs, (*task)->grammar->d_output);
    if (sb_model_create(&mc, c->seed, m, &err) != SB_OK)
        fail_msg("model: %s", err.msg);
}

/* The training micro-batch k of `micro` samples (samples k*micro ..), as the loop cuts it. */
static void fill_micro_batch(sb_batch *b, const sb_task *task, int64_t k, int micro)
{
    int64_t index[64];
    assert_true(micro <= 64);
    for (int i = 0; i < micro; i++)
        index[i] = k * micro + i;
    sb_error err = {0};
    if (sb_batch_fill(b, task, SB_SPLIT_TRAIN, index, micro, 1, &err) != SB_OK)
        fail_msg("batch: %s", err.msg);
}

/* Runs micro-batch b with the trainer's step (dropout off); returns its mean loss. */
static double micro_step(sb_graph *g, const sb_model *m, const sb_batch *b, real loss_scale)
{
    double loss = 0.0;
    sb_error err = {0};
    g->training = 0;
    if (sb_train_micro_batch(g, m, b, loss_scale, &loss, &err) != SB_OK)
        fail_msg("micro-batch: %s", err.msg);
    assert_true(isfinite(loss) && loss > 0.0);
    return loss;
}

/* ---- 1. gradient accumulation --------------------------------------------------------------- */

enum { ACC = 3, MICRO = 4 };

/* sum_j mean_loss_j over the ACC micro-batches (the reference's objective of one update). */
static double summed_loss(sb_graph *g, const sb_model *m, sb_batch *const *mb)
{
    double total = 0.0;
    for (int j = 0; j < ACC; j++)
        total += micro_step(g, m, mb[j], 1);
    return total;
}

static void test_accumulation_sums_or_averages(void **state)
{
    (void)state;
    assert_true(sb_train_loss_scale(SB_PROTOCOL_REFERENCE, ACC) == 1);
    assert_true(sb_train_loss_scale(SB_PROTOCOL_CLEAN, ACC) == (real)(1.0 / ACC));
    assert_true(sb_train_loss_scale(SB_PROTOCOL_CLEAN, 1) == 1);

    sb_run_config c = tiny_run(SB_PROTOCOL_REFERENCE);
    sb_task *task = NULL;
    sb_model *m = NULL;
    make_task_model(&c, &task, &m);
    sb_params *ps = &m->params;
    const size_t n = ps->total;
    sb_error err = {0};
    sb_batch batches[ACC], *mb[ACC];
    int frames[ACC];
    for (int j = 0; j < ACC; j++) {
        assert_int_equal(sb_batch_init(&batches[j], task, MICRO, &err), SB_OK);
        mb[j] = &batches[j];
        fill_micro_batch(mb[j], task, j, MICRO);
        frames[j] = 0;
        for (int b = 0; b < MICRO; b++)
            frames[j] += mb[j]->n_frames[b];
    }
    /* different valid-frame counts: a sum of means is neither a mean of the whole batch nor
     * a plain multiple of it, so the formula matters */
    assert_true(frames[0] != frames[1] || frames[1] != frames[2]);
    sb_graph g;
    sb_graph_init(&g, (size_t)1 << 20);

    /* each micro-batch alone */
    real *each_sum = calloc(n, sizeof *each_sum);
    real *each_mean = calloc(n, sizeof *each_mean);
    real *acc_ref = calloc(n, sizeof *acc_ref);
    real *acc_clean = calloc(n, sizeof *acc_clean);
    assert_non_null(each_sum), assert_non_null(each_mean);
    assert_non_null(acc_ref), assert_non_null(acc_clean);
    for (int j = 0; j < ACC; j++) {
        sb_params_zero_grad(ps);
        micro_step(&g, m, mb[j], 1);
        for (size_t i = 0; i < n; i++)
            each_sum[i] += ps->grad[i];
    }
    for (size_t i = 0; i < n; i++)
        each_mean[i] = each_sum[i] / ACC;

    /* the trainer's accumulation: the protocol's scale, no zeroing between micro-batches */
    const sb_protocol protocols[2] = {SB_PROTOCOL_REFERENCE, SB_PROTOCOL_CLEAN};
    real *acc[2] = {acc_ref, acc_clean};
    for (int p = 0; p < 2; p++) {
        const real scale = sb_train_loss_scale(protocols[p], ACC);
        sb_params_zero_grad(ps);
        for (int j = 0; j < ACC; j++)
            micro_step(&g, m, mb[j], scale);
        memcpy(acc[p], ps->grad, n * sizeof(real));
    }

    /* (a) reference = sum of the micro-batch gradients, clean = their mean */
    double d_ref = test_max_rel_diff(acc_ref, each_sum, n);
    double d_clean = test_max_rel_diff(acc_clean, each_mean, n);
    if (!(d_ref <= 1e-12) || !(d_clean <= 1e-12))
        fail_msg("accumulated vs per-micro-batch gradients: reference %.3g (sum), clean %.3g "
                 "(mean)",
                 d_ref, d_clean);
    /* and not the other way round: the two differ by the factor ACC */
    assert_true(test_max_rel_diff(acc_ref, each_mean, n) > 0.5);
    assert_true(test_max_rel_diff(acc_clean, each_sum, n) > 0.5);

    /* (b) central differences of the reference's objective sum_j mean_loss_j (and of its
     * mean under clean) on the largest gradient element of every parameter tensor */
    for (int t = 0; t < ps->n; t++) {
        const sb_param *pr = &ps->p[t];
        if (pr->flags & SB_PARAM_BUFFER)
            continue;
        size_t at = pr->offset;
        for (size_t i = pr->offset; i < pr->offset + pr->size; i++)
            if (fabs((double)acc_ref[i]) > fabs((double)acc_ref[at]))
                at = i;
        assert_true(fabs((double)acc_ref[at]) > 1e-6); /* every tensor gets a gradient */
        const real saved = ps->data[at];
        const double h = 1e-6 * fmax(1.0, fabs((double)saved));
        ps->data[at] = saved + (real)h;
        double up = summed_loss(&g, m, mb);
        ps->data[at] = saved - (real)h;
        double down = summed_loss(&g, m, mb);
        ps->data[at] = saved;
        double numeric = (up - down) / (2.0 * h);
        double want[2] = {numeric, numeric / ACC};
        for (int p = 0; p < 2; p++) {
            double got = (double)acc[p][at];
            if (!(fabs(got - want[p]) <= 1e-6 * fabs(want[p]) + 1e-9))
                fail_msg("%s[%zu] under %s: accumulated %.10g, central difference of the "
                         "reference's objective %.10g",
                         pr->name, at - pr->offset, p == 0 ? "reference" : "clean", got, want[p]);
        }
    }

    free(each_sum);
    free(each_mean);
    free(acc_ref);
    free(acc_clean);
    sb_graph_free(&g);
    for (int j = 0; j < ACC; j++)
        sb_batch_free(&batches[j]);
    sb_model_free(m);
    sb_task_free(task);
}

/* ---- 2. the dropout quirk ------------------------------------------------------------------- */

enum { UPDATES = 12, EVAL_EVERY = 4 };

typedef struct run_log {
    double loss[UPDATES + 1]; /* [u]: the loss sb_train reported for update u (1-based) */
    int n_progress;
    int64_t first_eval; /* the update after which the first evaluation ran */
} run_log;

static void log_event(const sb_train_event *ev, void *user)
{
    run_log *log = user;
    if (ev->kind == SB_EVENT_PROGRESS && ev->step >= 1 && ev->step <= UPDATES) {
        log->loss[ev->step] = ev->loss;
        log->n_progress++;
    }
    if (ev->kind == SB_EVENT_EVAL && log->first_eval == 0)
        log->first_eval = ev->step;
}

/* Trains c (from the checkpoint at ckpt when resume), logging every update's loss. */
static void train_logged(const sb_run_config *c, const char *ckpt, int64_t stop_after, int resume,
                         run_log *log)
{
    sb_train_options opt = {.threads = 2,
                            .ckpt_path = ckpt,
                            .mem_budget_gb = 1.0,
                            .stop_after = stop_after,
                            .resume = resume,
                            .callback = log_event,
                            .user = log};
    sb_train_outcome res;
    sb_error err = {0};
    if (sb_train(c, &opt, &res, &err) != SB_OK)
        fail_msg("training failed: %s", err.msg);
}

/* The dropout-free loss of every training micro-batch under the initial weights. */
static void dropout_free_losses(const sb_run_config *c, double *loss)
{
    sb_task *task = NULL;
    sb_model *m = NULL;
    make_task_model(c, &task, &m);
    sb_batch b;
    sb_error err = {0};
    assert_int_equal(sb_batch_init(&b, task, c->batch_size, &err), SB_OK);
    sb_graph g;
    sb_graph_init(&g, (size_t)1 << 20);
    for (int u = 1; u <= UPDATES; u++) {
        fill_micro_batch(&b, task, u - 1, c->batch_size);
        loss[u] = micro_step(&g, m, &b, 1);
    }
    sb_graph_free(&g);
    sb_batch_free(&b);
    sb_model_free(m);
    sb_task_free(task);
}

/* Whether update u ran with dropout: its loss differs from the dropout-free one. With the
 * weights frozen the two agree to 1e-11 or better without dropout and differ by 4e-4 to
 * 5e-3 (relative) with it (p = 0.5, measured); anything in between is a test failure. */
static int had_dropout(double logged, double free_loss, int u, const char *what)
{
    double rel = fabs(logged - free_loss) / free_loss;
    if (rel < 1e-9)
        return 0;
    if (rel > 1e-5)
        return 1;
    fail_msg("%s, update %d: loss %.12g vs %.12g without dropout (%.3g): neither equal nor "
             "clearly different",
             what, u, logged, free_loss, rel);
    return -1;
}

static void check_dropout_pattern(const sb_run_config *c, const double *free_loss,
                                  const run_log *log, int from_update, const char *what)
{
    for (int u = from_update; u <= UPDATES; u++) {
        /* train.py: on until the first evaluation, then off for good (reference); always on
         * (clean) */
        int want = c->task.protocol == SB_PROTOCOL_CLEAN || u <= EVAL_EVERY;
        int got = had_dropout(log->loss[u], free_loss[u], u, what);
        if (got != want)
            fail_msg("%s (%s protocol), update %d: dropout %s, expected %s (loss %.12g, "
                     "%.12g without dropout)",
                     what, c->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference", u,
                     got ? "on" : "off", want ? "on" : "off", log->loss[u], free_loss[u]);
    }
}

static void test_dropout_until_first_evaluation(void **state)
{
    (void)state;
    const sb_protocol protocols[2] = {SB_PROTOCOL_REFERENCE, SB_PROTOCOL_CLEAN};
    for (int p = 0; p < 2; p++) {
        sb_run_config c = tiny_run(protocols[p]);
        c.lr = 1e-12; /* the smallest --lr: the weights stay put (changes of ~1e-12) */
        double free_loss[UPDATES + 1];
        dropout_free_losses(&c, free_loss);

        /* an uninterrupted run */
        run_log full = {0};
        train_logged(&c, NULL, 0, 0, &full);
        assert_int_equal(full.n_progress, UPDATES);
        assert_int_equal(full.first_eval, EVAL_EVERY);
        check_dropout_pattern(&c, free_loss, &full, 1, "uninterrupted run");

        /* stopped at the first evaluation's checkpoint, then resumed: the resumed process
         * must know whether the first evaluation has switched dropout off */
        char ckpt[512];
        snprintf(ckpt, sizeof ckpt, "%s/run%d.safetensors", tmpdir, p);
        run_log part = {0}, rest = {0};
        train_logged(&c, ckpt, EVAL_EVERY, 0, &part);
        assert_int_equal(part.n_progress, EVAL_EVERY);
        train_logged(&c, ckpt, 0, 1, &rest);
        assert_int_equal(rest.n_progress, UPDATES - EVAL_EVERY);
        check_dropout_pattern(&c, free_loss, &rest, EVAL_EVERY + 1, "resumed run");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulation_sums_or_averages),
        cmocka_unit_test(test_dropout_until_first_evaluation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

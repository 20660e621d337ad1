/*
 * test_trajectory.c - ten optimiser steps of the real trainer against PyTorch, step by
 * step (as llm.c's test_gpt2).
 *
 * A tiny GRU RecNet is trained by sb_train (forward, backward, global-norm clipping at 1,
 * Adam or AdamW, the warm-up + cosine schedule: the library's own loop) for 10 updates of
 * 8 samples. The per-update losses and learning rates and every final weight are compared
 * with tests/data/torch/trajectory/<optimizer>.json, which tools/make_trajectory_vectors.py
 * made with the reference's RecNet, torch.optim.Adam / AdamW as train.py builds them,
 * clip_grad_norm_ and train.py's LambdaLR schedule, in float32 like this build.
 *
 * The batches PyTorch trained on are committed too (tests/data/torch/trajectory/
 * batches.json): this file wrote them with `test_trajectory --write-batches FILE`, and the
 * test first checks that the task generator still makes exactly those batches, so a
 * change of the task cannot pass itself off as an optimiser difference.
 *
 * The settings are chosen so that each optimiser detail shows: a large learning rate
 * (1e-2) so the weights move, weight decay 0.1 so coupled vs decoupled decay differs, a
 * 3-update warm-up (update 0 at factor 0, as LambdaLR), gradient norms of 1.1-1.7 in
 * updates 0-4 so clipping acts (0.6-0.9 after), and both optimisers (Adam eps 1e-8, AdamW
 * eps 1e-15).
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
#include "test_gemm_env.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

#define TRAJ_UPDATES 10
#define TRAJ_BATCH 8

/* Tolerances, float32 C against float32 torch (different summation orders). Measured
 * on the development machine: losses agree to 8.2e-7 relative, weights to 7.2e-7 absolute
 * (a few float32 ulps of the LayerNorm weights near 1). The weight tolerance, 3e-6 = 3e-4 lr
 * (an Adam step moves a weight by up to about lr), sits about 4x above that noise and 3-4x
 * below the smallest optimiser mistake this test is meant to catch (Adam's eps 1e-8 put
 * inside the square root or before the bias correction: 8-14e-6); the larger mistakes
 * (bias correction, weight decay kind, clipping, warm-up) change a loss by 1e-5 to 2e-1.
 * The learning rates are the schedule's doubles, compared to double rounding. */
#define LOSS_REL_TOL 5e-6
#define LR_REL_TOL 1e-12
#define WEIGHT_TOL_IN_LR 3e-4

/* The run: the same for the batch writer, the PyTorch generator (which reads it from
 * batches.json) and the test. */
static sb_run_config trajectory_config(sb_optimizer_kind kind)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "gru");
    c.task.grammar.vocab = 5, c.task.grammar.amb = 4, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 12;
    c.task.train_gap_max = 0.3; /* gaps of 1 to 3 frames */
    c.task.dataset_size = TRAJ_UPDATES * TRAJ_BATCH;
    c.task.test_size = 8;
    c.feat_size = 16;
    c.layers = 2;
    c.batch_size = TRAJ_BATCH;
    c.test_bs = 8;
    c.dropout = 0;
    c.lr = 1e-2;
    c.wd = 0.1;
    c.optimizer = kind;
    c.warmup_steps = 3;
    c.gemm = test_gemm_engine(); /* $SB_TEST_GEMM: the same trajectory under oneDNN */
    c.deterministic = getenv("SB_TEST_GEMM") != NULL;
    c.seed = c.task.grammar.seed = 5;
    return c;
}

static const char *optimizer_name(sb_optimizer_kind kind)
{
    return kind == SB_OPT_ADAMW ? "adamw" : "adam";
}

/* ---- the batches ------------------------------------------------------------------------ */

/* The one-hot class of frame f of a batch, -1 for an all-zero (gap) frame, -2 for anything
 * else (noise, several ones: not representable in batches.json). */
static int frame_class(const sb_batch *b, size_t f)
{
    int cls = -1;
    for (int v = 0; v < b->V; v++) {
        float x = b->data[f * (size_t)b->V + (size_t)v];
        if (x == 0.0f)
            continue;
        if (x != 1.0f || cls != -1)
            return -2;
        cls = v;
    }
    return cls;
}

/* Fills update k's batch: training samples k*B .. k*B+B-1, as the trainer takes them. */
static void fill_update_batch(sb_batch *b, const sb_task *task, int k)
{
    int64_t index[TRAJ_BATCH];
    for (int i = 0; i < TRAJ_BATCH; i++)
        index[i] = (int64_t)k * TRAJ_BATCH + i;
    sb_error err = {0};
    if (sb_batch_fill(b, task, SB_SPLIT_TRAIN, index, TRAJ_BATCH, 1, &err) != SB_OK)
        fail_msg("%s", err.msg);
}

static sb_task *make_task(const sb_run_config *c)
{
    sb_task *task = NULL;
    sb_error err = {0};
    if (sb_task_create(&c->task, &task, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return task;
}

static json_t *int_array(const int32_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* --write-batches: the run's settings and its 10 batches (frame classes, targets, mask) as
 * JSON for tools/make_trajectory_vectors.py. */
static int write_batches(const char *path)
{
    sb_run_config c = trajectory_config(SB_OPT_ADAM);
    sb_task *task = make_task(&c);
    sb_model_config mc = sb_run_config_model(&c, task->n_inputs, task->grammar->d_output);
    /* the settings tools/make_trajectory_vectors.py builds its RecNet and optimiser from */
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("selectivbench-trajectory-batches-1"));
    json_object_set_new(root, "model", json_string(mc.model));
    json_object_set_new(root, "seed", json_integer((json_int_t)c.seed));
    json_object_set_new(root, "inp", json_integer(mc.d_input));
    json_object_set_new(root, "out", json_integer(mc.d_output));
    json_object_set_new(root, "d_model", json_integer(mc.d_model));
    json_object_set_new(root, "layers", json_integer(mc.n_layers));
    json_object_set_new(root, "dropout", json_real(mc.dropout));
    json_object_set_new(root, "n_head", json_integer(mc.n_head));
    json_object_set_new(root, "d_state", json_integer(mc.d_state));
    json_object_set_new(root, "rope_base", json_real(mc.rope_base));
    json_object_set_new(root, "batch_size", json_integer(c.batch_size));
    json_object_set_new(root, "updates", json_integer(TRAJ_UPDATES));
    json_object_set_new(root, "lr", json_real(c.lr));
    json_object_set_new(root, "wd", json_real(c.wd));
    json_object_set_new(root, "warmup_steps", json_integer(c.warmup_steps));
    json_object_set_new(root, "schedule_total", json_real(sb_run_config_total_updates(&c)));
    json_t *batches = json_array();
    sb_batch b;
    sb_error err = {0};
    if (sb_batch_init(&b, task, TRAJ_BATCH, &err) != SB_OK)
        fail_msg("%s", err.msg);
    for (int k = 0; k < TRAJ_UPDATES; k++) {
        fill_update_batch(&b, task, k);
        size_t frames = (size_t)b.B * (size_t)b.T;
        int32_t *cls = malloc(frames * sizeof *cls), *valid = malloc(frames * sizeof *valid);
        assert_non_null(cls);
        assert_non_null(valid);
        for (size_t f = 0; f < frames; f++) {
            cls[f] = frame_class(&b, f);
            if (cls[f] == -2)
                fail_msg("frame %zu of batch %d is not one-hot or zero", f, k);
            valid[f] = b.valid[f];
        }
        json_array_append_new(batches, json_pack("{s:i, s:i, s:o, s:o, s:o}", "B", b.B, "T", b.T,
                                                 "input_class", int_array(cls, frames), "target",
                                                 int_array(b.target, frames), "valid",
                                                 int_array(valid, frames)));
        free(cls);
        free(valid);
    }
    json_object_set_new(root, "batches", batches);
    int rc = json_dump_file(root, path, JSON_COMPACT);
    json_decref(root);
    sb_batch_free(&b);
    sb_task_free(task);
    return rc == 0 ? 0 : 1;
}

/* The committed batches are still the ones the task generator makes (else the vectors
 * must be made again: see the header). */
static void test_batches_unchanged(void **state)
{
    (void)state;
    json_t *ref = test_load_json("torch/trajectory/batches.json");
    sb_run_config c = trajectory_config(SB_OPT_ADAM);
    sb_task *task = make_task(&c);
    assert_int_equal(json_integer_value(json_object_get(ref, "inp")), task->n_inputs);
    assert_int_equal(json_integer_value(json_object_get(ref, "out")), task->grammar->d_output);
    json_t *batches = json_object_get(ref, "batches");
    assert_int_equal(json_array_size(batches), TRAJ_UPDATES);
    sb_batch b;
    sb_error err = {0};
    if (sb_batch_init(&b, task, TRAJ_BATCH, &err) != SB_OK)
        fail_msg("%s", err.msg);
    for (int k = 0; k < TRAJ_UPDATES; k++) {
        fill_update_batch(&b, task, k);
        json_t *e = json_array_get(batches, (size_t)k);
        assert_int_equal(json_integer_value(json_object_get(e, "T")), b.T);
        json_t *cls = json_object_get(e, "input_class"), *tgt = json_object_get(e, "target"),
               *valid = json_object_get(e, "valid");
        size_t frames = (size_t)b.B * (size_t)b.T;
        assert_int_equal(json_array_size(cls), frames);
        for (size_t f = 0; f < frames; f++)
            if (json_integer_value(json_array_get(cls, f)) != frame_class(&b, f) ||
                json_integer_value(json_array_get(tgt, f)) != b.target[f] ||
                json_integer_value(json_array_get(valid, f)) != b.valid[f])
                fail_msg("batch %d frame %zu differs from batches.json: the task generator "
                         "changed; make the trajectory vectors again",
                         k, f);
    }
    sb_batch_free(&b);
    sb_task_free(task);
    json_decref(ref);
}

/* ---- the trajectory ----------------------------------------------------------------------- */

typedef struct trajectory {
    int n;
    double loss[TRAJ_UPDATES];
    double lr[TRAJ_UPDATES];
} trajectory;

/* Records each update's loss (the loss of its batch before the update) and learning rate. */
static void record_update(const sb_train_event *ev, void *user)
{
    trajectory *tr = user;
    if (ev->kind != SB_EVENT_PROGRESS)
        return;
    assert_true(tr->n < TRAJ_UPDATES);
    assert_int_equal(ev->step, tr->n + 1);
    tr->loss[tr->n] = ev->loss;
    tr->lr[tr->n] = ev->lr;
    tr->n++;
}

static double rel_diff(double a, double b)
{
    double scale = fmax(fabs(a), fabs(b));
    return scale > 0 ? fabs(a - b) / scale : 0.0;
}

static void check_trajectory(sb_optimizer_kind kind)
{
    const char *name = optimizer_name(kind);
    char rel[128];
    snprintf(rel, sizeof rel, "torch/trajectory/%s.json", name);
    json_t *ref = test_load_json(rel);
    sb_run_config c = trajectory_config(kind);
    /* the vectors were made for this run */
    assert_string_equal(json_string_value(json_object_get(ref, "optimizer")), name);
    assert_true(json_real_value(json_object_get(ref, "lr")) == c.lr);
    assert_true(json_real_value(json_object_get(ref, "wd")) == c.wd);
    assert_int_equal(json_integer_value(json_object_get(ref, "warmup_steps")), c.warmup_steps);

    char dir[] = "/tmp/sb_test_trajectory_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char ckpt[128];
    snprintf(ckpt, sizeof ckpt, "%s/final.safetensors", dir);
    trajectory tr = {0};
    sb_train_options opt = {.threads = 1,
                            .ckpt_path = ckpt,
                            .mem_budget_gb = 1.0,
                            .callback = record_update,
                            .user = &tr};
    sb_train_outcome res;
    sb_error err = {0};
    if (sb_train(&c, &opt, &res, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_int_equal(res.steps, TRAJ_UPDATES);
    assert_int_equal(tr.n, TRAJ_UPDATES);

    /* 1. losses and learning rates, update by update */
    json_t *steps = json_object_get(ref, "steps");
    assert_int_equal(json_array_size(steps), TRAJ_UPDATES);
    double worst_loss = 0;
    for (int k = 0; k < TRAJ_UPDATES; k++) {
        json_t *s = json_array_get(steps, (size_t)k);
        double want_loss = json_real_value(json_object_get(s, "loss"));
        double want_lr = json_real_value(json_object_get(s, "lr"));
        double d = rel_diff(tr.loss[k], want_loss);
        printf("  %s update %d: loss %.8f torch %.8f (rel %.2g), lr %.6g torch %.6g\n", name, k,
               tr.loss[k], want_loss, d, tr.lr[k], want_lr);
        worst_loss = fmax(worst_loss, d);
        if (!(d <= LOSS_REL_TOL))
            fail_msg("%s: loss of update %d is %.9g, torch %.9g (relative difference %.3g > %g)",
                     name, k, tr.loss[k], want_loss, d, LOSS_REL_TOL);
        if (!(rel_diff(tr.lr[k], want_lr) <= LR_REL_TOL))
            fail_msg("%s: learning rate of update %d is %.17g, torch %.17g", name, k, tr.lr[k],
                     want_lr);
    }

    /* 2. every weight after the 10 updates (the final checkpoint) */
    sb_task *task = make_task(&c);
    sb_model_config mc = sb_run_config_model(&c, task->n_inputs, task->grammar->d_output);
    sb_model *m = NULL;
    int64_t samples = 0;
    if (sb_model_create(&mc, c.seed, &m, &err) != SB_OK ||
        sb_checkpoint_load(ckpt, m, NULL, &samples, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_int_equal(samples, TRAJ_UPDATES * TRAJ_BATCH);
    json_t *weights = json_object_get(ref, "final_state_dict");
    assert_int_equal(json_array_size(weights), (size_t)m->params.n);
    const double weight_tol = WEIGHT_TOL_IN_LR * c.lr;
    double worst_weight = 0;
    const char *worst_name = "";
    size_t worst_index = 0;
    double worst_got = 0, worst_want = 0;
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        json_t *e = json_array_get(weights, (size_t)i);
        if (strcmp(p->name, json_string_value(json_object_get(e, "name"))) != 0)
            fail_msg("%s: parameter %d is %s, torch has %s", name, i, p->name,
                     json_string_value(json_object_get(e, "name")));
        json_t *values = json_object_get(e, "values");
        assert_int_equal(json_array_size(values), p->size);
        for (size_t k = 0; k < p->size; k++) {
            double want = json_real_value(json_array_get(values, k));
            double got = (double)m->params.data[p->offset + k];
            double d = fabs(got - want);
            if (!(d <= worst_weight)) { /* NaN wins */
                worst_weight = d;
                worst_name = p->name;
                worst_index = k;
                worst_got = got;
                worst_want = want;
            }
        }
    }
    if (!(worst_weight <= weight_tol))
        fail_msg("%s: final %s[%zu] = %.9g, torch %.9g (the largest difference, %.3g > %.3g)", name,
                 worst_name, worst_index, worst_got, worst_want, worst_weight, weight_tol);
    printf("  %s: max loss difference %.3g (relative), max weight difference %.3g (%.3g lr, "
           "in %s)\n",
           name, worst_loss, worst_weight, worst_weight / c.lr, worst_name);

    sb_model_free(m);
    sb_task_free(task);
    char optim_path[160];
    sb_checkpoint_optim_path(ckpt, optim_path, sizeof optim_path);
    unlink(optim_path);
    unlink(ckpt);
    rmdir(dir);
    json_decref(ref);
}

static void test_adam_trajectory(void **state)
{
    (void)state;
    check_trajectory(SB_OPT_ADAM);
}

static void test_adamw_trajectory(void **state)
{
    (void)state;
    check_trajectory(SB_OPT_ADAMW);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-batches") == 0)
        return write_batches(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_unchanged),
        cmocka_unit_test(test_adam_trajectory),
        cmocka_unit_test(test_adamw_trajectory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

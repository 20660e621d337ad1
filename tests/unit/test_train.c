/*
 * test_train.c - parameter counts, the optimiser against torch, schedules, and the
 * training loop: identical results on 1 and 2 threads, resume equals an uninterrupted run,
 * divergence (NaN loss, NaN gradient, an exploding loss), checkpoints and their failure
 * modes (non-finite values refused on save and load, damaged metadata), the learning
 * curve's points.
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
#include "tensor/optim.h"
#include "test_gemm_env.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"
#include "train/trainer.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_test_train_XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_remove_dir(tmpdir);
}

/* ---- the reference's parameter counts (docs/models/README.md; I 41, O 1601, 8 layers) -- */

static void test_param_counts(void **state)
{
    (void)state;
    const int widths[5] = {64, 128, 256, 512, 1024};
    const size_t transformer[5] = {639497, 2325961, 8844617, 34464841, 136034889};
    const size_t gru[5] = {307457, 1006529, 3584321, 13458497, 52081217};
    for (int i = 0; i < 5; i++) {
        sb_model_config mc = {.d_input = 41,
                              .d_output = 1601,
                              .d_model = widths[i],
                              .n_layers = 8,
                              .d_state = 128,
                              .n_head = sb_num_heads(widths[i]),
                              .dropout = 0.2,
                              .rope_base = 1000};
        size_t n = 0;
        sb_error err = {0};
        snprintf(mc.model, sizeof mc.model, "transformer");
        assert_int_equal(sb_model_param_count(&mc, &n, &err), SB_OK);
        assert_int_equal(n, transformer[i]);
        snprintf(mc.model, sizeof mc.model, "gru");
        assert_int_equal(sb_model_param_count(&mc, &n, &err), SB_OK);
        assert_int_equal(n, gru[i]);
    }
    /* get_num_heads of the paper's widths */
    const int d[] = {64, 256, 512, 648, 768, 960, 1024, 1152, 1280, 1296};
    const int h[] = {4, 4, 4, 8, 8, 8, 8, 16, 16, 16};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        assert_int_equal(sb_num_heads(d[i]), h[i]);
}

/* ---- optimiser and clipping against torch (tests/data/torch/optim.json) ------------- */

static void test_optimizer_matches_torch(void **state)
{
    (void)state;
    json_t *ref = test_load_json("torch/optim.json");
    const char *kinds[2] = {"adam", "adamw"};
    for (int kind = 0; kind < 2; kind++) {
        sb_params ps;
        sb_params_init(&ps);
        int shape[1] = {5};
        sb_params_add(&ps, "p", 1, shape, SB_INIT_CONST, 0.0, 0);
        sb_error err = {0};
        assert_int_equal(sb_params_alloc(&ps, &err), SB_OK);
        const float init[5] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f};
        for (int i = 0; i < 5; i++)
            ps.data[i] = init[i];
        sb_optimizer opt;
        sb_optimizer_init(&opt, kind == 0 ? SB_OPT_ADAM : SB_OPT_ADAMW, 0.01, 0.01);
        json_t *steps = json_object_get(ref, kinds[kind]);
        for (int k = 0; k < 4; k++) {
            const float g[5] = {0.3f, -2.0f, 0.01f * (float)k, 5.0f, -0.7f};
            for (int i = 0; i < 5; i++)
                ps.grad[i] = g[i] * (float)(k + 1);
            double norm = sb_clip_grad_norm(&ps, 1.0);
            json_t *step = json_array_get(steps, (size_t)k);
            assert_true(fabs(norm - json_number_value(json_object_get(step, "grad_norm"))) <
                        1e-5 * norm);
            sb_optimizer_step(&opt, &ps, 1.0);
            json_t *want = json_object_get(step, "param");
            for (int i = 0; i < 5; i++) {
                double w = json_number_value(json_array_get(want, (size_t)i));
                if (!(fabs((double)ps.data[i] - w) <= 2e-6 * fmax(1.0, fabs(w))))
                    fail_msg("%s step %d param %d: %.9g, torch %.9g", kinds[kind], k, i,
                             (double)ps.data[i], w);
            }
        }
        sb_params_free(&ps);
    }
    json_decref(ref);
}

static void test_schedules(void **state)
{
    (void)state;
    /* LambdaLR with train.py's lambdas: 0 at step 0, linear warm-up, then cosine */
    assert_true(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 0, 10, 110) == 0.0);
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 5, 10, 110) - 0.5) < 1e-15);
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 10, 10, 110) - 1.0) < 1e-15);
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 60, 10, 110) - 0.5) < 1e-15);
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 110, 10, 110)) < 1e-15);
    /* fractional warm-up (5% of 375 updates = 18.75) */
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP, 18, 18.75, 375) - 18 / 18.75) <
                1e-15);
    /* lr_min variant: floor 0.1 */
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP_LR_MIN, 110, 10, 110) - 0.1) <
                1e-15);
    assert_true(fabs(sb_schedule_factor(SB_SCHED_COSINE_WARMUP_LR_MIN, 60, 10, 110) - 0.55) <
                1e-15);
}

/* ---- the training loop ------------------------------------------------------------------- */

static sb_run_config tiny_run(const char *model)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "%s", model);
    c.task.grammar.vocab = 9, c.task.grammar.amb = 8, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.train_gap_max = 0.3; /* some gaps: 1 to 3 frames */
    c.task.dataset_size = 192;
    c.task.test_size = 24;
    c.feat_size = 16;
    c.layers = 2;
    c.batch_size = 16;
    c.test_bs = 10;
    c.epoch_size = 64; /* an evaluation every 4 updates */
    c.dropout = 0.2;
    c.lr = 3e-3;
    c.seed = c.task.grammar.seed = 2;
    c.gemm = test_gemm_engine(); /* $SB_TEST_GEMM (auto when unset) */
    return c;
}

static long read_file(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n)
        n = -1;
    fclose(f);
    return n;
}

static void assert_same_file(const char *a, const char *b)
{
    unsigned char *x = NULL, *y = NULL;
    long nx = read_file(a, &x), ny = read_file(b, &y);
    assert_true(nx > 0 && nx == ny);
    assert_memory_equal(x, y, (size_t)nx);
    free(x);
    free(y);
}

static void train_to(const sb_run_config *c, int threads, const char *ckpt, sb_train_outcome *res,
                     int64_t stop_after, int resume)
{
    sb_train_options opt = {.threads = threads,
                            .ckpt_path = ckpt,
                            .mem_budget_gb = 1.0,
                            .stop_after = stop_after,
                            .resume = resume};
    sb_error err = {0};
    if (sb_train(c, &opt, res, &err) != SB_OK)
        fail_msg("training failed: %s", err.msg);
}

static void test_threads_identical(void **state)
{
    (void)state;
    const char *models[2] = {"transformer", "gru"};
    for (int k = 0; k < 2; k++) {
        sb_run_config c = tiny_run(models[k]);
        c.deterministic = 1; /* what makes the thread count irrelevant under every engine */
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/%s_t1.safetensors", tmpdir, models[k]);
        snprintf(b, sizeof b, "%s/%s_t2.safetensors", tmpdir, models[k]);
        sb_train_outcome r1, r2;
        train_to(&c, 1, a, &r1, 0, 0);
        train_to(&c, 2, b, &r2, 0, 0);
        assert_int_equal(r1.status, SB_RUN_FINISHED);
        assert_int_equal(r1.steps, 12);
        assert_int_equal(r1.n_evals, 3);
        assert_true(r1.test_acc == r2.test_acc && r1.test_loss == r2.test_loss);
        assert_true(r1.train_loss == r2.train_loss && r1.train_acc == r2.train_acc);
        assert_same_file(a, b); /* every weight bitwise equal */
    }
}

static void test_resume_equals_uninterrupted(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("transformer");
    char full[512], part[512];
    snprintf(full, sizeof full, "%s/full.safetensors", tmpdir);
    snprintf(part, sizeof part, "%s/part.safetensors", tmpdir);
    sb_train_outcome r_full, r_part, r_rest;
    train_to(&c, 2, full, &r_full, 0, 0);
    train_to(&c, 2, part, &r_part, 4, 0); /* stops at the first evaluation */
    assert_int_equal(r_part.status, SB_RUN_INTERRUPTED);
    assert_int_equal(r_part.steps, 4);
    train_to(&c, 2, part, &r_rest, 0, 1);
    assert_int_equal(r_rest.status, SB_RUN_FINISHED);
    assert_int_equal(r_rest.steps, r_full.steps);
    assert_true(r_rest.test_acc == r_full.test_acc && r_rest.test_loss == r_full.test_loss);
    assert_same_file(full, part);
}

/* A stop request (what the CLI's signal handler sets) polled after update 6, between two
 * evaluations: the run ends there with a checkpoint, status "interrupted" and the update in
 * the reason; resumed, it ends with the weights, the test metrics and the last training
 * averages of an uninterrupted run. Without a checkpoint path the reason says it starts
 * over. */
typedef struct stop_poll {
    int polls, stop_at;
} stop_poll;

static int stop_at_poll(void *user)
{
    stop_poll *p = user;
    return ++p->polls >= p->stop_at;
}

static void test_stop_request_resumes(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("transformer");
    char full[512], part[512];
    snprintf(full, sizeof full, "%s/stop_full.safetensors", tmpdir);
    snprintf(part, sizeof part, "%s/stop_part.safetensors", tmpdir);
    sb_train_outcome r_full, r_part, r_rest;
    train_to(&c, 2, full, &r_full, 0, 0);
    stop_poll poll = {.stop_at = 6};
    sb_train_options opt = {.threads = 2,
                            .ckpt_path = part,
                            .mem_budget_gb = 1.0,
                            .should_stop = stop_at_poll,
                            .stop_user = &poll};
    sb_error err = {0};
    assert_int_equal(sb_train(&c, &opt, &r_part, &err), SB_OK);
    assert_int_equal(r_part.status, SB_RUN_INTERRUPTED);
    assert_int_equal(poll.polls, 6); /* once per update */
    assert_int_equal(r_part.steps, 6);
    assert_int_equal(r_part.samples, 6 * c.batch_size);
    assert_int_equal(r_part.n_evals, 1); /* the evaluation at update 4 */
    assert_non_null(strstr(r_part.reason, "interrupted at update 6 of 12"));
    train_to(&c, 2, part, &r_rest, 0, 1);
    assert_int_equal(r_rest.status, SB_RUN_FINISHED);
    assert_int_equal(r_rest.steps, r_full.steps);
    assert_true(r_rest.test_acc == r_full.test_acc && r_rest.test_loss == r_full.test_loss);
    assert_true(r_rest.train_loss == r_full.train_loss && r_rest.train_acc == r_full.train_acc);
    assert_same_file(full, part);

    /* a request that is never granted stops nothing; without a path, nothing is written */
    poll = (stop_poll){.stop_at = 1000};
    opt.ckpt_path = NULL;
    assert_int_equal(sb_train(&c, &opt, &r_part, &err), SB_OK);
    assert_int_equal(r_part.status, SB_RUN_FINISHED);
    assert_int_equal(poll.polls, 11); /* not after the last update */
    poll = (stop_poll){.stop_at = 2};
    assert_int_equal(sb_train(&c, &opt, &r_part, &err), SB_OK);
    assert_int_equal(r_part.status, SB_RUN_INTERRUPTED);
    assert_int_equal(r_part.steps, 2);
    assert_non_null(strstr(r_part.reason, "no checkpoint was written"));
}

static void test_divergence_stops(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    sb_train_options opt = {.threads = 2, .mem_budget_gb = 1.0, .inject_nan_at = 6};
    sb_train_outcome res;
    sb_error err = {0};
    assert_int_equal(sb_train(&c, &opt, &res, &err), SB_ERR_DIVERGED);
    assert_int_equal(res.status, SB_RUN_DIVERGED);
    assert_non_null(strstr(err.msg, "NaN"));
    assert_int_equal(res.steps, 5);
}

/* The limit of the divergence rule: 10 x the larger of the first update's loss and ln(C). */
static void test_divergence_limit(void **state)
{
    (void)state;
    assert_true(fabs(sb_train_loss_limit(4.3, 65) - 43.0) < 1e-12);
    assert_true(fabs(sb_train_loss_limit(1.0, 65) - 10.0 * log(65.0)) < 1e-12);
    assert_true(fabs(sb_train_loss_limit((double)NAN, 9) - 10.0 * log(9.0)) < 1e-12);
    /* every model starts near ln(C): 4.18 to 4.49 nats for C = 65 (docs/training.md) */
    assert_true(sb_train_loss_limit(4.49, 65) > 40.0);
}

/* A run whose loss explodes (--lr 50) but stays finite is diverged, not finished: at the
 * first evaluation, before it, with the window's mean loss in the reason; no checkpoint. */
static void test_divergence_high_lr(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    c.lr = 50;
    char ckpt[512], sidecar[600];
    snprintf(ckpt, sizeof ckpt, "%s/high_lr.safetensors", tmpdir);
    sb_checkpoint_optim_path(ckpt, sidecar, sizeof sidecar);
    sb_train_options opt = {.threads = 2, .mem_budget_gb = 1.0, .ckpt_path = ckpt};
    sb_train_outcome res;
    sb_error err = {0};
    assert_int_equal(sb_train(&c, &opt, &res, &err), SB_ERR_DIVERGED);
    assert_int_equal(res.status, SB_RUN_DIVERGED);
    assert_string_equal(res.reason, err.msg);
    assert_non_null(strstr(err.msg, "the training loss rose to "));
    assert_non_null(strstr(err.msg, "(mean of updates 1-4)"));
    assert_non_null(strstr(err.msg, "diverged at update 4 (sample 64)"));
    assert_int_equal(res.steps, 4);
    assert_true(res.train_loss > sb_train_loss_limit(4.6, 65)); /* the window's mean */
    assert_true(isnan(res.test_acc) && res.n_evals == 0);
    assert_int_equal(access(ckpt, F_OK), -1);
    assert_int_equal(access(sidecar, F_OK), -1);
    /* the same run at its normal rate finishes */
    c.lr = 3e-3;
    train_to(&c, 2, NULL, &res, 0, 0);
    assert_int_equal(res.status, SB_RUN_FINISHED);
}

/* A NaN gradient with a finite loss: diverged at that update, before the optimiser step;
 * the checkpoint of the evaluation before stays finite and loadable. */
static void test_divergence_nan_gradient(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/nan_grad.safetensors", tmpdir);
    sb_train_options opt = {
        .threads = 2, .mem_budget_gb = 1.0, .ckpt_path = ckpt, .inject_nan_grad_at = 6};
    sb_train_outcome res;
    sb_error err = {0};
    assert_int_equal(sb_train(&c, &opt, &res, &err), SB_ERR_DIVERGED);
    assert_int_equal(res.status, SB_RUN_DIVERGED);
    assert_non_null(strstr(err.msg, "the gradient norm became NaN at update 5 (sample 80)"));
    assert_int_equal(res.steps, 5);
    assert_int_equal(res.n_evals, 1);
    sb_model *m = NULL;
    sb_model_config mc = sb_run_config_model(&c, 9, 65);
    assert_int_equal(sb_model_create(&mc, 1, &m, &err), SB_OK);
    sb_optimizer o;
    sb_optimizer_init(&o, SB_OPT_ADAM, c.lr, 0);
    int64_t seen = 0;
    if (sb_checkpoint_load(ckpt, m, &o, &seen, &err) != SB_OK)
        fail_msg("the checkpoint before the divergence does not load: %s", err.msg);
    assert_int_equal(seen, 64);
    sb_model_free(m);
}

/* train.py's early stopping: a run whose update loss never improves for `patience`
 * updates stops there (with a final evaluation). */
static void test_early_stop(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    c.early_stop = 1;
    c.patience = 1;
    c.lr = 0.5; /* noisy updates: the loss soon fails to improve */
    sb_train_outcome res;
    train_to(&c, 2, NULL, &res, 0, 0);
    assert_int_equal(res.status, SB_RUN_FINISHED);
    assert_true(res.steps < 12);
    assert_true(res.n_evals >= 1);
    c.early_stop = 0;
    train_to(&c, 2, NULL, &res, 0, 0);
    assert_int_equal(res.steps, 12);
}

static void test_checkpoint_roundtrip_and_errors(void **state)
{
    (void)state;
    sb_model_config mc = {.d_input = 9,
                          .d_output = 65,
                          .d_model = 16,
                          .n_layers = 2,
                          .d_state = 8,
                          .n_head = 4,
                          .dropout = 0.2,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "transformer");
    sb_model *a = NULL, *b = NULL, *other = NULL, *wide = NULL;
    sb_error err = {0};
    assert_int_equal(sb_model_create(&mc, 1, &a, &err), SB_OK);
    assert_int_equal(sb_model_create(&mc, 2, &b, &err), SB_OK);
    sb_run_config cfg = sb_run_config_default();
    char path[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", tmpdir);
    assert_int_equal(sb_checkpoint_save(path, a, &cfg, NULL, 123, &err), SB_OK);
    int64_t seen = 0;
    assert_int_equal(sb_checkpoint_load(path, b, NULL, &seen, &err), SB_OK);
    assert_int_equal(seen, 123);
    assert_memory_equal(a->params.data, b->params.data, a->params.total * sizeof(real));
    sb_run_config back;
    assert_int_equal(sb_checkpoint_read_config(path, &back, &err), SB_OK);
    assert_string_equal(back.model, cfg.model);

    /* missing file */
    assert_int_equal(sb_checkpoint_load("/nonexistent/x.safetensors", b, NULL, NULL, &err),
                     SB_ERR_IO);
    /* corrupt file: truncated */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmpdir);
    unsigned char *bytes = NULL;
    long n = read_file(path, &bytes);
    FILE *f = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)n / 2, f);
    fclose(f);
    free(bytes);
    assert_int_equal(sb_checkpoint_load(bad, b, NULL, NULL, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, bad));
    /* another model: a GRU checkpoint into a transformer */
    sb_model_config gc = mc;
    snprintf(gc.model, sizeof gc.model, "gru");
    assert_int_equal(sb_model_create(&gc, 1, &other, &err), SB_OK);
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/gru.safetensors", tmpdir);
    assert_int_equal(sb_checkpoint_save(gpath, other, &cfg, NULL, 0, &err), SB_OK);
    real *before = malloc(b->params.total * sizeof *before);
    memcpy(before, b->params.data, b->params.total * sizeof *before);
    assert_int_equal(sb_checkpoint_load(gpath, b, NULL, NULL, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "another model"));
    /* another width: shapes differ; the model is left untouched */
    sb_model_config wc = mc;
    wc.d_model = 32;
    assert_int_equal(sb_model_create(&wc, 1, &wide, &err), SB_OK);
    assert_int_equal(sb_checkpoint_load(path, wide, NULL, NULL, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "shape"));
    assert_memory_equal(before, b->params.data, b->params.total * sizeof *before);
    /* the optimiser sidecar is required by a resume */
    sb_optimizer opt;
    sb_optimizer_init(&opt, SB_OPT_ADAM, 1e-3, 0);
    assert_int_equal(sb_checkpoint_load(path, b, &opt, NULL, &err), SB_ERR_IO);
    free(before);
    sb_model_free(a);
    sb_model_free(b);
    sb_model_free(other);
    sb_model_free(wide);
}

/* Overwrites `count` float32 values of tensor `name` in a safetensors file with `value`
 * (the header gives where its bytes are). */
static void poke_tensor(const char *path, const char *name, int count, float value)
{
    unsigned char *bytes = NULL;
    long n = read_file(path, &bytes);
    assert_true(n > 8);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | bytes[i];
    char key[128];
    snprintf(key, sizeof key, "\"%s\":{", name);
    char *header = malloc(header_len + 1);
    memcpy(header, bytes + 8, header_len);
    header[header_len] = '\0';
    const char *entry = strstr(header, key);
    assert_non_null(entry);
    long begin = -1;
    assert_int_equal(sscanf(strstr(entry, "data_offsets"), "data_offsets\":[%ld", &begin), 1);
    for (int i = 0; i < count; i++)
        memcpy(bytes + 8 + header_len + (size_t)begin + (size_t)i * 4, &value, 4);
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(bytes, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(header);
    free(bytes);
}

/* Replaces `from` by `to` (the same length) in a file's bytes: a damaged header. */
static void replace_in_file(const char *src, const char *dst, const char *from, const char *to)
{
    assert_int_equal(strlen(from), strlen(to));
    unsigned char *bytes = NULL;
    long n = read_file(src, &bytes);
    unsigned char *at = memmem(bytes, (size_t)n, from, strlen(from));
    assert_non_null(at);
    memcpy(at, to, strlen(to));
    FILE *f = fopen(dst, "wb");
    assert_int_equal(fwrite(bytes, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(bytes);
}

/* No NaN or infinity is written to a checkpoint or read from one; damaged metadata names
 * the file and the key. */
static void test_checkpoint_non_finite_and_metadata(void **state)
{
    (void)state;
    sb_model_config mc = {.d_input = 9,
                          .d_output = 65,
                          .d_model = 16,
                          .n_layers = 1,
                          .d_state = 8,
                          .n_head = 4,
                          .dropout = 0.2,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "gru");
    sb_model *a = NULL, *b = NULL;
    sb_error err = {0};
    assert_int_equal(sb_model_create(&mc, 1, &a, &err), SB_OK);
    assert_int_equal(sb_model_create(&mc, 2, &b, &err), SB_OK);
    sb_run_config cfg = sb_run_config_default();
    snprintf(cfg.model, sizeof cfg.model, "gru");
    sb_optimizer opt;
    sb_optimizer_init(&opt, SB_OPT_ADAM, 1e-3, 0);
    char path[512], sidecar[600];
    snprintf(path, sizeof path, "%s/nonfinite.safetensors", tmpdir);
    sb_checkpoint_optim_path(path, sidecar, sizeof sidecar);
    sb_params *ps = &a->params;
    const sb_param *hh = sb_params_find(ps, "layers.0.weight_hh_l0");
    assert_non_null(hh);

    /* the writer: 2 NaN and 1 inf weights, then 1 NaN moment; nothing is written */
    real *w = ps->data + hh->offset;
    real saved[3] = {w[0], w[5], w[7]};
    w[0] = (real)NAN, w[5] = (real)INFINITY, w[7] = (real)NAN;
    assert_int_equal(sb_checkpoint_save(path, a, &cfg, &opt, 0, &err), SB_ERR_DIVERGED);
    assert_non_null(strstr(err.msg, "tensor 'layers.0.weight_hh_l0' has 3 non-finite values"));
    assert_non_null(strstr(err.msg, path));
    w[0] = saved[0], w[5] = saved[1], w[7] = saved[2];
    ps->v[hh->offset + 2] = (real)NAN;
    assert_int_equal(sb_checkpoint_save(path, a, &cfg, &opt, 0, &err), SB_ERR_DIVERGED);
    assert_non_null(strstr(err.msg, "tensor 'exp_avg_sq.layers.0.weight_hh_l0' has 1 "
                                    "non-finite value "));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(sidecar, F_OK), -1);
    ps->v[hh->offset + 2] = 0;

    /* the loader: a finite file loads; with 3 NaN in one tensor it is refused, the model
     * untouched; the same for the optimiser's sidecar */
    assert_int_equal(sb_checkpoint_save(path, a, &cfg, &opt, 32, &err), SB_OK);
    assert_int_equal(sb_checkpoint_load(path, b, &opt, NULL, &err), SB_OK);
    real *before = malloc(b->params.total * sizeof *before);
    memcpy(before, b->params.data, b->params.total * sizeof *before);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/nan.safetensors", tmpdir);
    replace_in_file(path, bad, "\"samples_seen\":\"32\"", "\"samples_seen\":\"32\"");
    poke_tensor(bad, "layers.0.weight_hh_l0", 3, NAN);
    assert_int_equal(sb_checkpoint_load(bad, b, NULL, NULL, &err), SB_ERR_INVALID);
    char want[700];
    snprintf(want, sizeof want,
             "checkpoint '%s': tensor 'layers.0.weight_hh_l0' has 3 non-finite values "
             "(NaN/inf); the file is damaged or from a diverged run",
             bad);
    assert_string_equal(err.msg, want);
    assert_memory_equal(before, b->params.data, b->params.total * sizeof *before);
    poke_tensor(sidecar, "exp_avg.decoder.bias", 1, -INFINITY);
    assert_int_equal(sb_checkpoint_load(path, b, &opt, NULL, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tensor 'exp_avg.decoder.bias' has 1 non-finite value "));

    /* damaged metadata: the file and the key are named, as damage (SB_ERR_IO), not as a
     * foreign file (SB_ERR_INVALID, which callers answer with defaults) */
    replace_in_file(path, bad, "\"samples_seen\":\"32\"", "\"samples_seen\":\"-2\"");
    assert_int_equal(sb_checkpoint_load(bad, b, NULL, NULL, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, "is damaged or not from this version"));
    assert_non_null(strstr(err.msg, "metadata 'samples_seen'"));
    sb_run_config back;
    replace_in_file(path, bad, "\\\"vocab\\\":41", "\\\"vocab\\\":-5");
    assert_int_equal(sb_checkpoint_read_config(bad, &back, &err), SB_ERR_IO);
    snprintf(want, sizeof want,
             "checkpoint '%s' is damaged or not from this version of selectivbench: its "
             "metadata 'config' is unusable (vocab -5 is ",
             bad);
    assert_memory_equal(err.msg, want, strlen(want));
    assert_int_equal(sb_checkpoint_read_config(path, &back, &err), SB_OK);
    free(before);
    sb_model_free(a);
    sb_model_free(b);
}

/* train.py's feat_size work-arounds for the transformer: 648 -> 768 and 1296 -> 1280 (960
 * is refused by sb_run_config_check); every other width and model is built as asked. */
static void test_feat_size_workarounds(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("transformer");
    const int asked[4] = {648, 1296, 512, 64}, built[4] = {768, 1280, 512, 64};
    for (int i = 0; i < 4; i++) {
        c.feat_size = asked[i];
        assert_int_equal(sb_run_config_effective_width(&c), built[i]);
    }
    snprintf(c.model, sizeof c.model, "gla");
    c.feat_size = 648;
    assert_int_equal(sb_run_config_effective_width(&c), 648);
    snprintf(c.model, sizeof c.model, "transformer");
    c.feat_size = 960;
    sb_error err = {0};
    assert_int_not_equal(sb_run_config_check(&c, &err), SB_OK);
    assert_non_null(strstr(err.msg, "960"));
}

/* Gradient accumulation: an explicit factor is kept, 0 means 1, train.py forces 16 for long
 * gaps on wide models under the reference protocol, and -1 takes the smallest power of two
 * whose micro-batch step fits the memory budget (while keeping micro-batches of more than
 * 2 samples). */
static void test_grad_acc_rules(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    c.batch_size = 64;
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&c.task, &task, &err), SB_OK);
    c.grad_acc = 4;
    assert_int_equal(sb_train_grad_acc(&c, task, 1.0), 4);
    c.grad_acc = 0;
    assert_int_equal(sb_train_grad_acc(&c, task, 1.0), 1);
    c.grad_acc = -1;
    assert_int_equal(sb_train_grad_acc(&c, task, 100.0), 1); /* everything fits */
    const int acc_small = sb_train_grad_acc(&c, task, 1e-9); /* nothing fits */
    assert_int_equal(acc_small, 16); /* micro-batches of 4: 64 / (2 * 16) = 2 stops halving */
    for (double budget = 1e-6; budget < 1.0; budget *= 2) {
        int acc = sb_train_grad_acc(&c, task, budget);
        assert_true(acc >= 1 && acc <= acc_small && (acc & (acc - 1)) == 0);
        assert_true(sb_train_grad_acc(&c, task, budget * 2) <= acc); /* more memory, fewer */
    }
    c.task.protocol = SB_PROTOCOL_REFERENCE;
    c.task.train_gap_max = 1.0;
    c.feat_size = 768;
    c.grad_acc = 1;
    assert_int_equal(sb_train_grad_acc(&c, task, 100.0), 16);
    c.task.protocol = SB_PROTOCOL_CLEAN;
    assert_int_equal(sb_train_grad_acc(&c, task, 100.0), 1);
    sb_task_free(task);
}

/* A NaN weight reaching the forward (as one did from a damaged checkpoint before loads
 * were checked): attention's softmax, the gates and the decoder run exp on NaN, which must
 * be well defined (the sanitizer build aborts on undefined behaviour) and give a NaN test
 * loss, which the trainer calls divergence. Every registered model. */
static void test_nan_weight_forward(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("transformer");
    c.feat_size = 32; /* fox_layered's 32 heads */
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&c.task, &task, &err), SB_OK);
    const sb_layer_type *const *types = sb_layer_types();
    for (int t = 0; types[t] != NULL; t++) {
        snprintf(c.model, sizeof c.model, "%s", types[t]->name);
        sb_model_config mc = sb_run_config_model(&c, task->n_inputs, task->grammar->d_output);
        sb_model *m = NULL;
        if (sb_model_create(&mc, 1, &m, &err) != SB_OK)
            fail_msg("%s: %s", types[t]->name, err.msg);
        for (size_t i = 0; i < m->params.total; i += 7)
            m->params.data[i] = (real)NAN;
        double loss = 0, acc = 0;
        if (sb_evaluate(task, m, 6, 1.0, &loss, &acc, &err) != SB_OK)
            fail_msg("%s: evaluation failed: %s", types[t]->name, err.msg);
        if (!isnan(loss))
            fail_msg("%s: NaN weights gave a test loss of %g", types[t]->name, loss);
        sb_model_free(m);
    }
    sb_task_free(task);
}

/* The three evaluation paths of every registered model on one task (see sb_eval_mode):
 * the default (inputs generated chunk by chunk) gives bit for bit the loss and accuracy of
 * the path that builds the whole one-hot batch first, and the accuracy of the whole-sequence
 * forward with its loss within 1e-8 (relative): the streaming steps reproduce the whole
 * forward bit for bit except S4's (its whole form is an FFT convolution: 4e-10 measured).
 * Batches of 10 over 24 samples: the last one is short (its streaming states must still
 * start at zero in every layer). */
static void check_eval_paths(const sb_run_config *base)
{
    sb_run_config c = *base;
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&c.task, &task, &err), SB_OK);
    const sb_layer_type *const *types = sb_layer_types();
    int streamed = 0;
    double acc_sum = 0.0;
    for (int t = 0; types[t] != NULL; t++) {
        snprintf(c.model, sizeof c.model, "%s", types[t]->name);
        sb_model_config mc = sb_run_config_model(&c, task->n_inputs, task->grammar->d_output);
        sb_model *m = NULL;
        if (sb_model_create(&mc, 1, &m, &err) != SB_OK)
            fail_msg("%s: %s", types[t]->name, err.msg);
        double loss[3], acc[3];
        const sb_eval_mode modes[3] = {SB_EVAL_STREAM, SB_EVAL_STREAM_WHOLE_INPUT, SB_EVAL_WHOLE};
        for (int k = 0; k < 3; k++)
            if (sb_evaluate_mode(task, m, 10, 1.0, modes[k], &loss[k], &acc[k], &err) != SB_OK)
                fail_msg("%s: evaluation failed: %s", types[t]->name, err.msg);
        if (!(loss[0] == loss[1] && acc[0] == acc[1]))
            fail_msg("%s: streamed input gave loss %.17g acc %.17g, the whole input %.17g %.17g",
                     types[t]->name, loss[0], acc[0], loss[1], acc[1]);
        if (!(acc[0] == acc[2] && fabs(loss[0] - loss[2]) <= 1e-8 * loss[2]))
            fail_msg("%s: streamed gave loss %.17g acc %.17g, the whole forward %.17g %.17g",
                     types[t]->name, loss[0], acc[0], loss[2], acc[2]);
        if (!(loss[0] > 0.5 && acc[0] < 1.0))
            fail_msg("%s: implausible evaluation loss %g acc %g", types[t]->name, loss[0], acc[0]);
        acc_sum += acc[0];
        streamed += sb_model_can_stream(m);
        sb_model_free(m);
    }
    assert_true(streamed >= 12); /* all but the attention models stream */
    assert_true(acc_sum > 0.0);  /* untrained, but some elements are right */
    sb_task_free(task);
}

/* Evaluation streams the frames of each test batch (issue 17). Noise on, so the chunks
 * start inside its stream. */
static void test_eval_streamed_equals_whole(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("transformer");
    c.feat_size = 32; /* fox_layered's 32 heads */
    c.task.train_noise = 0.1;
    /* short gaps (0.3 s): samples of about 80 frames, one streaming chunk */
    c.task.test_dur = 0.3;
    check_eval_paths(&c);
    /* gaps of 3 s: samples of about 620 frames, two streaming chunks of 512 */
    c.task.test_dur = 3.0;
    check_eval_paths(&c);
}

/* The learning curve's points (--curve_points) against their definition: update u gets one
 * when u = ceil(k total / P) for a k in 1..P-1, unless the --epoch_size cadence or the last
 * update evaluates it anyway; sb_train_curve_extra counts them. */
static void test_curve_points(void **state)
{
    (void)state;
    for (int64_t total = 1; total <= 64; total++)
        for (int64_t every = 1; every <= 70; every += (every < 8 ? 1 : 7))
            for (int points = 0; points <= 24; points++) {
                char want[80] = {0};
                for (int k = 1; k < points; k++) {
                    int64_t u = (k * total + points - 1) / points;
                    if (u >= 1 && u < total && u % every != 0)
                        want[u] = 1;
                }
                int64_t n = 0;
                for (int64_t u = 0; u <= total + 1; u++) {
                    int got = sb_train_curve_point(u, total, every, points);
                    if (got != (u <= total ? want[u] : 0))
                        fail_msg("u %lld of %lld, every %lld, P %d: got %d", (long long)u,
                                 (long long)total, (long long)every, points, got);
                    n += got;
                }
                assert_int_equal(sb_train_curve_extra(total, every, points), n);
            }
    /* 20 updates, P 10, cadence beyond the run: updates 2, 4, ..., 18 (the 20th evaluates) */
    assert_int_equal(sb_train_curve_extra(20, 312, 10), 9);
    assert_int_equal(sb_train_curve_point(4, 20, 312, 10), 1);
    assert_int_equal(sb_train_curve_point(5, 20, 312, 10), 0);
    /* a cadence of 2 already evaluates every even update: nothing to add */
    assert_int_equal(sb_train_curve_extra(20, 2, 10), 0);
}

/* One training checks its configuration once, where it enters the library: the trainer
 * below takes it as checked (the issue of a train that checked three times). */
static void test_one_check_per_training(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL;
    const char *json = "{\"amb\": 3, \"grammar_scale\": true, \"train_seqlen_max\": 8, "
                       "\"test_seqlen_max\": 8, \"test_size\": 20, \"dataset_size\": 64, "
                       "\"batch_size\": 16, \"model\": \"gru\", \"feat_size\": 8}";
    assert_int_equal(sb_config_from_json(json, &cfg, &err), SB_OK);
    /* the runtime keys are in no JSON: set by name, in memory on one thread */
    assert_int_equal(sb_config_set_key(cfg, "results", "", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "threads", "1", &err), SB_OK);
    long before = sb_run_config_checks_made();
    sb_train_outcome out;
    if (sb_train_config(cfg, NULL, &out, &err) != SB_OK)
        fail_msg("train: %s", err.msg);
    assert_int_equal(out.status, SB_RUN_FINISHED);
    assert_int_equal(sb_run_config_checks_made() - before, 1);
    assert_string_equal(out.database, ""); /* results "": in memory */
    sb_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_one_check_per_training),
        cmocka_unit_test(test_optimizer_matches_torch),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_stop_request_resumes),
        cmocka_unit_test(test_divergence_stops),
        cmocka_unit_test(test_divergence_limit),
        cmocka_unit_test(test_divergence_high_lr),
        cmocka_unit_test(test_divergence_nan_gradient),
        cmocka_unit_test(test_early_stop),
        cmocka_unit_test(test_checkpoint_roundtrip_and_errors),
        cmocka_unit_test(test_checkpoint_non_finite_and_metadata),
        cmocka_unit_test(test_feat_size_workarounds),
        cmocka_unit_test(test_grad_acc_rules),
        cmocka_unit_test(test_nan_weight_forward),
        cmocka_unit_test(test_eval_streamed_equals_whole),
        cmocka_unit_test(test_curve_points),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_s4.c - the S4D layer and its training setup in the float build:
 *   - the float FFT path (kernel + convolution) against the double-precision recurrence
 *     at a realistic length: outputs and gradients;
 *   - identical results (outputs and every gradient, bit for bit) with 1 and 2 threads;
 *   - the reference's parameter counts (docs/models/README.md lists them), state_dict
 *     names, shapes, order and optimiser groups; the initialisation against torch 1.13 bit for bit
 * at the widths of the tiny task and the sweeps (tests/data/s4/init.json);
 *   - train.py's S4 optimiser against torch (tests/data/s4/optim.json): AdamW groups,
 *     weight decay, clipping, CosineAnnealingLR stepped per evaluation (learning rates
 *     exactly, weights to float rounding), and the trainer using that schedule;
 *     training on 1 and 2 threads bitwise equal; resume equals an uninterrupted run;
 *   - streaming evaluation memory does not grow with the number of chunks.
 */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model_checks.h"

#include "model/model.h"
#include "ops/ops.h"
#include "ops/ops_s4.h"
#include "tensor/optim.h"
#include "test_util.h"
#include "train/trainer.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_test_s4_XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_remove_dir(tmpdir);
}

static double lcg_uniform(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / 16777216.0;
}

static sb_tensor *random_tensor(sb_graph *g, int ndim, const int *shape, double lo, double hi,
                                unsigned seed)
{
    sb_tensor *t = sb_tensor_new(g, ndim, shape);
    unsigned s = seed * 2654435761u + 99u;
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (real)(lo + (hi - lo) * lcg_uniform(&s));
    return t;
}

/* ---- float FFT path against the double recurrence ----------------------------------------- */

enum { S_U, S_LOG_DT, S_C, S_LAR, S_AIM, S_D, S_COUNT };

/* Tolerance: the recurrence computes in double (a float result only at the end); the FFT
 * path rounds the kernel to float and convolves with float FFTs of size 2^k 3^l 5^m >= 2T,
 * whose rounding grows like log n ulp of the largest terms. Measured at T = 300, H = 32,
 * N2 = 32 with init-like parameters: 1.8e-7 (outputs) and at most 2.7e-7 (gradients) of
 * the tensors' scale. 2e-6 leaves a margin of 7 and stays far below what a dropped mode,
 * a shifted tap or a wrong sign gives (>= 1e-2). */
#define OUT_TOL 2e-6
#define GRAD_TOL 2e-6

static void test_fft_vs_recurrence(void **state)
{
    (void)state;
    const int B = 2, T = 300, H = 32, N2 = 32;
    sb_graph hold, g;
    sb_graph_init(&hold, 1 << 22);
    sb_graph_init(&g, 1 << 24);
    int u[3] = {B, T, H}, h1[1] = {H}, c[3] = {H, N2, 2}, hn[2] = {H, N2};
    sb_tensor *in[S_COUNT];
    in[S_U] = random_tensor(&hold, 3, u, -1, 1, 1);
    in[S_LOG_DT] = random_tensor(&hold, 1, h1, log(1e-3), log(1e-1), 2);
    in[S_C] = random_tensor(&hold, 3, c, -1, 1, 3);
    in[S_LAR] = random_tensor(&hold, 2, hn, log(0.4), log(0.6), 4);
    in[S_AIM] = random_tensor(&hold, 2, hn, 0, 0, 5);
    for (int h = 0; h < H; h++)
        for (int n = 0; n < N2; n++)
            in[S_AIM]->data[h * N2 + n] = (real)(M_PI * n);
    in[S_D] = random_tensor(&hold, 1, h1, -1, 1, 6);
    real *grads[2][S_COUNT];
    sb_tensor *y[2];
    for (int form = 0; form < 2; form++) {
        sb_graph_reset(&g);
        g.record = 1;
        for (int i = 0; i < S_COUNT; i++) {
            in[i]->requires_grad = 1;
            in[i]->grad = NULL;
        }
        if (form == 0) {
            sb_tensor *K = sb_s4d_kernel(&g, in[S_LOG_DT], in[S_C], in[S_LAR], in[S_AIM], T);
            y[0] = sb_s4d_conv(&g, in[S_U], K, in[S_D]);
        } else {
            y[1] = sb_s4d_recurrence(&g, in[S_U], in[S_LOG_DT], in[S_C], in[S_LAR], in[S_AIM],
                                     in[S_D], NULL);
        }
        real *dy = sb_tensor_grad(&g, y[form]);
        unsigned s = 17;
        for (size_t i = 0; i < y[form]->size; i++)
            dy[i] = (real)(2 * lcg_uniform(&s) - 1);
        sb_graph_backward(&g);
        for (int i = 0; i < S_COUNT; i++) {
            grads[form][i] = malloc(in[i]->size * sizeof(real));
            memcpy(grads[form][i], in[i]->grad, in[i]->size * sizeof(real));
        }
        if (form == 0) { /* keep y: the next form resets the graph */
            real *keep = malloc(y[0]->size * sizeof(real));
            memcpy(keep, y[0]->data, y[0]->size * sizeof(real));
            y[0] = sb_tensor_wrap(&hold, keep, 3, u);
        }
    }
    double d = test_max_rel_diff(y[0]->data, y[1]->data, y[1]->size);
    if (!(d < OUT_TOL))
        fail_msg("FFT path vs recurrence: outputs differ by %.3g", d);
    const char *names[S_COUNT] = {"u", "log_dt", "C", "log_A_real", "A_imag", "D"};
    for (int i = 0; i < S_COUNT; i++) {
        d = test_max_rel_diff(grads[0][i], grads[1][i], in[i]->size);
        if (!(d < GRAD_TOL))
            fail_msg("FFT path vs recurrence: gradient of %s differs by %.3g", names[i], d);
        free(grads[0][i]);
        free(grads[1][i]);
    }
    free(y[0]->data);
    sb_graph_free(&hold);
    sb_graph_free(&g);
}

/* ---- threads ------------------------------------------------------------------------------ */

static void test_threads(void **state)
{
    (void)state;
    sb_model_config mc = {.d_input = 9,
                          .d_output = 13,
                          .d_model = 48,
                          .n_layers = 2,
                          .d_state = 16,
                          .n_head = 4,
                          .dropout = 0.1,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "s4");
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 3, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    check_threads_identical(m, 4, 150, "s4");
    sb_model_free(m);
}

/* ---- parameter counts, state_dict, groups, initialisation ------------------------------------ */

static void test_param_counts(void **state)
{
    (void)state;
    /* the reference's counts (docs/models/README.md): I = 41, O = 1601, 8 layers */
    const int dims[5] = {64, 128, 256, 512, 1024};
    const size_t s4_128[5] = {306433, 742337, 2007361, 6110273, 20607553};
    const size_t s4_64[5] = {240897, 611265, 1745217, 5585985, 19558977};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2; k++) {
            sb_model_config mc = {.d_input = 41,
                                  .d_output = 1601,
                                  .d_model = dims[i],
                                  .n_layers = 8,
                                  .d_state = k == 0 ? 128 : 64,
                                  .n_head = sb_num_heads(dims[i]),
                                  .dropout = 0.2,
                                  .rope_base = 1000};
            snprintf(mc.model, sizeof mc.model, "s4");
            size_t count = 0;
            sb_error err = {0};
            if (sb_model_param_count(&mc, &count, &err) != SB_OK)
                fail_msg("%s", err.msg);
            const size_t want = k == 0 ? s4_128[i] : s4_64[i];
            if (count != want)
                fail_msg("s4 d=%d N=%d: %zu parameters, spec %zu", dims[i], mc.d_state, count,
                         want);
        }
    /* refused: fewer than one complex mode */
    sb_model_config bad = {.d_input = 5,
                           .d_output = 5,
                           .d_model = 8,
                           .n_layers = 1,
                           .d_state = 1,
                           .n_head = 4,
                           .rope_base = 1000};
    snprintf(bad.model, sizeof bad.model, "s4");
    sb_model *m = NULL;
    sb_error err = {0};
    assert_int_equal(sb_model_create(&bad, 1, &m, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "d_state"));
}

static void test_state_dict_and_groups(void **state)
{
    (void)state;
    sb_model_config mc = {.d_input = 41,
                          .d_output = 17,
                          .d_model = 64,
                          .n_layers = 2,
                          .d_state = 16,
                          .n_head = 4,
                          .dropout = 0.2,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "s4");
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 1, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    const struct {
        const char *name;
        int ndim, shape[3];
        int group2;
    } want[7] = {
        {"layers.1.D", 1, {64}, 0},
        {"layers.1.kernel.C", 3, {64, 8, 2}, 0},
        {"layers.1.kernel.log_dt", 1, {64}, 1},
        {"layers.1.kernel.log_A_real", 2, {64, 8}, 1},
        {"layers.1.kernel.A_imag", 2, {64, 8}, 1},
        {"layers.1.output_linear.0.weight", 3, {128, 64, 1}, 0},
        {"layers.1.output_linear.0.bias", 1, {128}, 0},
    };
    const int first = m->layer_first[1];
    for (int k = 0; k < 7; k++) {
        const sb_param *p = &m->params.p[first + k];
        if (strcmp(p->name, want[k].name) != 0)
            fail_msg("parameter %d is %s, expected %s", first + k, p->name, want[k].name);
        assert_int_equal(p->ndim, want[k].ndim);
        for (int d = 0; d < p->ndim; d++)
            assert_int_equal(p->shape[d], want[k].shape[d]);
        assert_int_equal((p->flags & SB_PARAM_GROUP2) != 0, want[k].group2);
        assert_int_equal(p->flags & SB_PARAM_BUFFER, 0);
    }
    assert_string_equal(m->params.p[first + 7].name, "decoder.weight");
    int n_group2 = 0;
    for (int i = 0; i < m->params.n; i++)
        n_group2 += (m->params.p[i].flags & SB_PARAM_GROUP2) != 0;
    assert_int_equal(n_group2, 6); /* three per layer, nothing outside the kernels */
    sb_model_free(m);
}

static uint64_t fnv1a64(const void *data, size_t n)
{
    const unsigned char *b = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Every initial value bit for bit against torch.manual_seed(seed) + RecNet(model='s4') */
static void test_init_matches_torch(void **state)
{
    (void)state;
    json_t *root = test_load_json("s4/init.json");
    for (size_t c = 0; c < json_array_size(root); c++) {
        json_t *ref = json_array_get(root, c);
        sb_model_config mc = {.d_input = (int)json_integer_value(json_object_get(ref, "inp")),
                              .d_output = (int)json_integer_value(json_object_get(ref, "out")),
                              .d_model = (int)json_integer_value(json_object_get(ref, "d_model")),
                              .n_layers = (int)json_integer_value(json_object_get(ref, "layers")),
                              .d_state = (int)json_integer_value(json_object_get(ref, "d_state")),
                              .n_head = 4,
                              .dropout = 0.2,
                              .rope_base = 1000};
        snprintf(mc.model, sizeof mc.model, "s4");
        sb_model *m = NULL;
        sb_error err = {0};
        if (sb_model_create(&mc, (uint64_t)json_integer_value(json_object_get(ref, "seed")), &m,
                            &err) != SB_OK)
            fail_msg("%s", err.msg);
        json_t *params = json_object_get(ref, "params");
        assert_int_equal(json_array_size(params), (size_t)m->params.n);
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            json_t *e = json_array_get(params, (size_t)i);
            assert_string_equal(p->name, json_string_value(json_object_get(e, "name")));
            assert_int_equal((size_t)json_integer_value(json_object_get(e, "size")), p->size);
            const uint64_t want = test_json_u64(json_object_get(e, "fnv1a64"));
            const uint64_t got = fnv1a64(p->tensor.data, p->size * sizeof(real));
            if (got != want)
                fail_msg("d_model %d: initial %s differs from torch's", mc.d_model, p->name);
        }
        sb_model_free(m);
    }
    json_decref(root);
}

/* ---- optimiser and schedule against torch --------------------------------------------------- */

static void test_optimizer_matches_torch(void **state)
{
    (void)state;
    json_t *root = test_load_json("s4/optim.json");
    json_t *cases = json_object_get(root, "cases");
    assert_int_equal(json_array_size(cases), 2);
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c);
        const double lr = json_number_value(json_object_get(cs, "lr"));
        const int64_t t_max = json_integer_value(json_object_get(cs, "epochs"));
        const int64_t every = json_integer_value(json_object_get(cs, "eval_every"));
        sb_params ps;
        sb_params_init(&ps);
        int s5[1] = {5}, s3[1] = {3};
        sb_params_add(&ps, "general", 1, s5, SB_INIT_CONST, 0.0, 0);
        sb_param *k = sb_params_add(&ps, "kernel", 1, s3, SB_INIT_CONST, 0.0, 0);
        k->flags |= SB_PARAM_GROUP2;
        sb_error err = {0};
        assert_int_equal(sb_params_alloc(&ps, &err), SB_OK);
        real *pg = ps.p[0].tensor.data, *pk = ps.p[1].tensor.data;
        real *gg = ps.p[0].tensor.grad, *gk = ps.p[1].tensor.grad;
        const float init_g[5] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f}, init_k[3] = {-0.7f, 0.25f, 1.5f};
        for (int i = 0; i < 5; i++)
            pg[i] = (real)init_g[i];
        for (int i = 0; i < 3; i++)
            pk[i] = (real)init_k[i];
        sb_optimizer opt;
        sb_optimizer_init_s4(&opt, lr);
        json_t *steps = json_object_get(cs, "steps");
        for (size_t s = 0; s < json_array_size(steps); s++) {
            json_t *st = json_array_get(steps, s);
            const float kf = (float)s;
            const float g5[5] = {0.3f, -2.0f, (float)(0.01 * (double)s), 5.0f, -0.7f};
            for (int i = 0; i < 5; i++)
                gg[i] = g5[i] * (kf + 1);
            const float g3[3] = {(float)(0.05 * (double)s - 0.2), 1.0f, -0.4f};
            for (int i = 0; i < 3; i++)
                gk[i] = g3[i];
            double norm = sb_clip_grad_norm(&ps, 1.0);
            assert_true(fabs(norm - json_number_value(json_object_get(st, "grad_norm"))) <
                        1e-5 * norm);
            const int64_t epoch = (int64_t)s / every;
            const double lr1 = sb_cosine_annealing_lr(opt.lr, epoch, t_max);
            const double lr2 = sb_cosine_annealing_lr(opt.group2_lr, epoch, t_max);
            json_t *lrs = json_object_get(st, "lr");
            /* the same double arithmetic as torch's scheduler: exactly equal */
            if (lr1 != json_number_value(json_array_get(lrs, 0)) ||
                lr2 != json_number_value(json_array_get(lrs, 1)))
                fail_msg("case %zu update %zu: lr %.17g, %.17g; torch %.17g, %.17g", c, s, lr1, lr2,
                         json_number_value(json_array_get(lrs, 0)),
                         json_number_value(json_array_get(lrs, 1)));
            sb_optimizer_step_lr(&opt, &ps, lr1, lr2);
            const char *which[2] = {"general", "kernel"};
            for (int w = 0; w < 2; w++) {
                json_t *want = json_object_get(st, which[w]);
                const real *p = w == 0 ? pg : pk;
                for (size_t i = 0; i < json_array_size(want); i++) {
                    double v = json_number_value(json_array_get(want, i));
                    if (!(fabs((double)p[i] - v) <= 2e-6 * fmax(1.0, fabs(v))))
                        fail_msg("case %zu update %zu %s[%zu]: %.9g, torch %.9g", c, s, which[w], i,
                                 (double)p[i], v);
                }
            }
        }
        sb_params_free(&ps);
    }
    /* closed-form landmarks: half at T_max / 2, zero at T_max, then the rise */
    assert_true(fabs(sb_cosine_annealing_lr(1.0, 2, 4) - 0.5) < 1e-15);
    assert_true(fabs(sb_cosine_annealing_lr(1.0, 4, 4)) < 1e-15);
    assert_true(sb_cosine_annealing_lr(1.0, 5, 4) > 0.1);
    assert_true(sb_cosine_annealing_lr(2e-3, 7, 0) == 2e-3);
    json_decref(root);
}

/* ---- the trainer with the S4 setup --------------------------------------------------------- */

static sb_run_config tiny_run(void)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "s4");
    c.task.grammar.vocab = 9, c.task.grammar.amb = 8, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.train_gap_max = 0.3;
    c.task.dataset_size = 192;
    c.task.test_size = 24;
    c.feat_size = 16;
    c.d_state = 8;
    c.layers = 2;
    c.batch_size = 16;
    c.test_bs = 10;
    c.epoch_size = 64; /* an evaluation every 4 updates; T_max = 192 // 64 = 3 */
    c.dropout = 0.2;
    c.lr = 3e-3;
    c.optimizer = SB_OPT_ADAM; /* ignored for s4, as train.py ignores it */
    c.wd = 0.5;                /* ignored too */
    c.seed = c.task.grammar.seed = 2;
    return c;
}

typedef struct lr_log {
    double lr[64];
    int n;
} lr_log;

static void record_lr(const sb_train_event *ev, void *user)
{
    lr_log *log = user;
    if (ev->kind == SB_EVENT_PROGRESS && log->n < 64)
        log->lr[log->n++] = ev->lr;
}

static void train_to(const sb_run_config *c, int threads, const char *ckpt, sb_train_outcome *res,
                     int64_t stop_after, int resume, lr_log *log)
{
    sb_train_options opt = {.threads = threads,
                            .ckpt_path = ckpt,
                            .mem_budget_gb = 1.0,
                            .stop_after = stop_after,
                            .resume = resume,
                            .callback = log != NULL ? record_lr : NULL,
                            .user = log};
    sb_error err = {0};
    if (sb_train(c, &opt, res, &err) != SB_OK)
        fail_msg("training failed: %s", err.msg);
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

static void test_trainer(void **state)
{
    (void)state;
    json_t *root = test_load_json("s4/optim.json");
    json_t *want = json_object_get(json_object_get(root, "trainer"), "lrs");
    sb_run_config c = tiny_run();
    c.deterministic = 1; /* what makes the thread count irrelevant (and the checkpoint's
                          * fingerprint, so the files compare byte for byte) */
    char a[512], b[512], part[512];
    snprintf(a, sizeof a, "%s/s4_t1.safetensors", tmpdir);
    snprintf(b, sizeof b, "%s/s4_t2.safetensors", tmpdir);
    snprintf(part, sizeof part, "%s/s4_part.safetensors", tmpdir);
    sb_train_outcome r1, r2, rp, rr;
    lr_log log = {.n = 0};
    train_to(&c, 1, a, &r1, 0, 0, &log);
    assert_int_equal(r1.status, SB_RUN_FINISHED);
    assert_int_equal(r1.steps, 12);
    assert_int_equal(r1.n_evals, 3);
    assert_int_equal(log.n, (int)json_array_size(want));
    for (int k = 0; k < log.n; k++) /* the general group's rate at every update */
        if (log.lr[k] != json_number_value(json_array_get(json_array_get(want, (size_t)k), 0)))
            fail_msg("update %d: lr %.17g, torch %.17g", k, log.lr[k],
                     json_number_value(json_array_get(json_array_get(want, (size_t)k), 0)));
    train_to(&c, 2, b, &r2, 0, 0, NULL);
    assert_true(r1.test_acc == r2.test_acc && r1.test_loss == r2.test_loss);
    assert_true(r1.train_loss == r2.train_loss && r1.train_acc == r2.train_acc);
    assert_same_file(a, b); /* every weight bitwise equal */
    /* interrupted after the first epoch and resumed: the schedule continues where it was */
    train_to(&c, 2, part, &rp, 4, 0, NULL);
    assert_int_equal(rp.status, SB_RUN_INTERRUPTED);
    train_to(&c, 2, part, &rr, 0, 1, NULL);
    assert_int_equal(rr.status, SB_RUN_FINISHED);
    assert_true(rr.test_acc == r1.test_acc && rr.test_loss == r1.test_loss);
    assert_same_file(a, part);
    json_decref(root);
}

/* ---- streaming memory ---------------------------------------------------------------------- */

static void test_stream_memory(void **state)
{
    (void)state;
    sb_model_config mc = {.d_input = 9,
                          .d_output = 13,
                          .d_model = 32,
                          .n_layers = 2,
                          .d_state = 16,
                          .n_head = 4,
                          .dropout = 0,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "s4");
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 3, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    check_stream_memory_flat(m, 2, 512, 20, "s4");
    sb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fft_vs_recurrence),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_state_dict_and_groups),
        cmocka_unit_test(test_init_matches_torch),
        cmocka_unit_test(test_optimizer_matches_torch),
        cmocka_unit_test(test_trainer),
        cmocka_unit_test(test_stream_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

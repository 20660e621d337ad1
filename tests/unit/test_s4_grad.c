/*
 * test_s4_grad.c - the S4D ops and layer in double precision:
 *   - finite-difference gradient checks of every op: the kernel (all four parameter
 *     tensors), the FFT convolution and the direct one (u, K, D), the recurrence (u and all
 *     parameters), the tied dropout, the GLU; of an S4D layer alone (input and every
 *     parameter) and of whole RecNets with and without dropout;
 *   - the three forms of the layer's SSM against each other: kernel + FFT convolution,
 *     kernel + direct sums, diagonal recurrence (outputs and every gradient), and the FFT
 *     convolution at lengths whose FFT sizes have every factor 2, 3, 5;
 *   - streaming in pieces (recurrence, carried state) against the whole sequence (FFT);
 *   - the reference PyTorch RecNet (tests/data/s4/recnet.json, tools/make_s4_vectors.py):
 *     identical initial weights for three sizes (every way torch.randn draws), logits,
 *     loss and every parameter gradient of a float64 forward/backward.
 * Shapes are tiny: B 2-3, T up to 37, H 3-16, N2 2-4.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "model/model.h"
#include "ops/ops.h"
#include "ops/ops_s4.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------------------------ */

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
        t->data[i] = lo + (hi - lo) * lcg_uniform(&s);
    return t;
}

/* the SSM's inputs: u, log_dt, C, log_A_real, A_imag, D. log_dt spans dt in [0.05, 0.37]
 * and A_imag [0, 12] so that decays and rotations both matter within T frames */
enum { S_U, S_LOG_DT, S_C, S_LAR, S_AIM, S_D, S_COUNT };

static void add_ssm_inputs(gc_problem *p, int B, int T, int H, int N2, unsigned seed)
{
    int u[3] = {B, T, H}, h1[1] = {H}, c[3] = {H, N2, 2}, hn[2] = {H, N2};
    gc_add_input(p, "u", 3, u, -1, 1, seed + 1);
    gc_add_input(p, "log_dt", 1, h1, -3, -1, seed + 2);
    gc_add_input(p, "C", 3, c, -1, 1, seed + 3);
    gc_add_input(p, "log_A_real", 2, hn, -1.5, 0.3, seed + 4);
    gc_add_input(p, "A_imag", 2, hn, 0, 12, seed + 5);
    gc_add_input(p, "D", 1, h1, -1, 1, seed + 6);
}

static sb_tensor **ssm_tensors(sb_graph *g, int B, int T, int H, int N2, unsigned seed)
{
    static sb_tensor *t[S_COUNT];
    int u[3] = {B, T, H}, h1[1] = {H}, c[3] = {H, N2, 2}, hn[2] = {H, N2};
    t[S_U] = random_tensor(g, 3, u, -1, 1, seed + 1);
    t[S_LOG_DT] = random_tensor(g, 1, h1, -3, -1, seed + 2);
    t[S_C] = random_tensor(g, 3, c, -1, 1, seed + 3);
    t[S_LAR] = random_tensor(g, 2, hn, -1.5, 0.3, seed + 4);
    t[S_AIM] = random_tensor(g, 2, hn, 0, 12, seed + 5);
    t[S_D] = random_tensor(g, 1, h1, -1, 1, seed + 6);
    for (int i = 0; i < S_COUNT; i++)
        t[i]->requires_grad = 1;
    return t;
}

typedef enum ssm_form { FORM_FFT, FORM_DIRECT, FORM_RECURRENCE } ssm_form;

/* the SSM map u -> y in one of its forms */
static sb_tensor *run_ssm(sb_graph *g, sb_tensor **in, ssm_form form, real *state)
{
    if (form == FORM_RECURRENCE)
        return sb_s4d_recurrence(g, in[S_U], in[S_LOG_DT], in[S_C], in[S_LAR], in[S_AIM], in[S_D],
                                 state);
    sb_tensor *K = sb_s4d_kernel(g, in[S_LOG_DT], in[S_C], in[S_LAR], in[S_AIM], in[S_U]->shape[1]);
    return form == FORM_FFT ? sb_s4d_conv(g, in[S_U], K, in[S_D])
                            : sb_s4d_conv_ref(g, in[S_U], K, in[S_D]);
}

static sb_tensor *fn_ssm(sb_graph *g, sb_tensor **in, void *ctx)
{
    return run_ssm(g, in, *(const ssm_form *)ctx, NULL);
}

/* Runs fn on `in` with a fixed random output gradient: output and every input gradient. */
typedef sb_tensor *(*multi_fn)(sb_graph *g, sb_tensor **in, void *ctx);

static void run_with_grads(multi_fn fn, void *ctx, sb_tensor **in, int n_in, sb_graph *g,
                           sb_tensor **y_out, real **grads)
{
    sb_graph_reset(g);
    g->record = 1;
    for (int i = 0; i < n_in; i++)
        in[i]->grad = NULL;
    sb_tensor *y = fn(g, in, ctx);
    real *dy = sb_tensor_grad(g, y);
    unsigned s = 4242u;
    for (size_t i = 0; i < y->size; i++)
        dy[i] = 2 * lcg_uniform(&s) - 1;
    sb_graph_backward(g);
    *y_out = y;
    for (int i = 0; i < n_in; i++) {
        grads[i] = malloc(in[i]->size * sizeof(real));
        if (in[i]->grad != NULL)
            memcpy(grads[i], in[i]->grad, in[i]->size * sizeof(real));
        else
            memset(grads[i], 0, in[i]->size * sizeof(real));
        in[i]->grad = NULL;
    }
}

/* ---- gradient checks of the ops -------------------------------------------------------------- */

static sb_tensor *fn_kernel(sb_graph *g, sb_tensor **in, void *ctx)
{
    return sb_s4d_kernel(g, in[0], in[1], in[2], in[3], *(const int *)ctx);
}

static void test_kernel_grad(void **state)
{
    (void)state;
    const int Ts[3] = {11, 1, 29};
    for (int k = 0; k < 3; k++) {
        gc_problem p = {.name = "s4d kernel", .fn = fn_kernel, .ctx = (void *)&Ts[k]};
        int h1[1] = {3}, c[3] = {3, 4, 2}, hn[2] = {3, 4};
        gc_add_input(&p, "log_dt", 1, h1, -3, -1, 11u + (unsigned)k);
        gc_add_input(&p, "C", 3, c, -1, 1, 12u + (unsigned)k);
        gc_add_input(&p, "log_A_real", 2, hn, -1.5, 0.3, 13u + (unsigned)k);
        gc_add_input(&p, "A_imag", 2, hn, 0, 12, 14u + (unsigned)k);
        if (Ts[k] == 1) /* K[0] = 2 Re(C q) depends on everything; nothing is zero */
            p.allow_zero_grad = 0;
        gc_check(&p);
        gc_free(&p);
    }
}

static void test_ssm_forms_grad(void **state)
{
    (void)state;
    const struct {
        const char *name;
        ssm_form form;
        int B, T, H, N2;
    } cases[] = {
        {"fft conv T=11", FORM_FFT, 2, 11, 3, 4},
        {"fft conv T=1", FORM_FFT, 2, 1, 3, 2},
        {"fft conv T=37", FORM_FFT, 3, 37, 2, 3},
        {"fft conv H=19", FORM_FFT, 2, 9, 19, 2},
        {"direct conv T=11", FORM_DIRECT, 2, 11, 3, 4},
        {"recurrence T=11", FORM_RECURRENCE, 2, 11, 3, 4},
        {"recurrence T=23", FORM_RECURRENCE, 3, 23, 2, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        gc_problem p = {.name = cases[k].name, .fn = fn_ssm, .ctx = (void *)&cases[k].form};
        add_ssm_inputs(&p, cases[k].B, cases[k].T, cases[k].H, cases[k].N2, 10u * (unsigned)k);
        gc_check(&p);
        gc_free(&p);
    }
}

/* the convolution ops alone on a free kernel K (no parameter chain), with and without D */
typedef struct conv_opts {
    int fft, with_D;
} conv_opts;

static sb_tensor *fn_conv(sb_graph *g, sb_tensor **in, void *ctx)
{
    const conv_opts *o = ctx;
    sb_tensor *D = o->with_D ? in[2] : NULL;
    return o->fft ? sb_s4d_conv(g, in[0], in[1], D) : sb_s4d_conv_ref(g, in[0], in[1], D);
}

static void test_conv_grad(void **state)
{
    (void)state;
    const conv_opts opts[4] = {{1, 1}, {1, 0}, {0, 1}, {0, 0}};
    const int Ts[4] = {13, 7, 13, 2};
    for (int k = 0; k < 4; k++) {
        gc_problem p = {.name = opts[k].fft ? "fft conv, free K" : "direct conv, free K",
                        .fn = fn_conv,
                        .ctx = (void *)&opts[k]};
        int u[3] = {2, Ts[k], 5}, K[2] = {5, Ts[k]}, h1[1] = {5};
        gc_add_input(&p, "u", 3, u, -1, 1, 31u + (unsigned)k);
        gc_add_input(&p, "K", 2, K, -1, 1, 32u + (unsigned)k);
        gc_add_input(&p, "D", 1, h1, -1, 1, 33u + (unsigned)k);
        if (!opts[k].with_D)
            p.inputs[2].tensor.requires_grad = 0;
        gc_check(&p);
        gc_free(&p);
    }
}

static sb_tensor *fn_tied(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_dropout_tied(g, in[0], (real)0.4);
}

static sb_tensor *fn_glu(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_glu(g, in[0]);
}

static void test_dropout_glu_grad(void **state)
{
    (void)state;
    gc_problem p = {.name = "tied dropout", .fn = fn_tied, .training = 1};
    int x[3] = {3, 6, 8};
    gc_add_input(&p, "x", 3, x, -1, 1, 41);
    gc_check(&p);
    gc_free(&p);
    gc_problem q = {.name = "glu", .fn = fn_glu};
    int pw[3] = {2, 5, 12};
    gc_add_input(&q, "p", 3, pw, -3, 3, 42);
    gc_check(&q);
    gc_free(&q);
}

/* The tied mask: one decision per (b, h) for every frame, kept values scaled 1 / (1 - p),
 * about 1 - p of them kept, different (b, h) with different decisions, new masks per call. */
static void test_dropout_tied_mask(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.training = 1;
    g.dropout_seed = 7;
    const int B = 32, T = 3, H = 128;
    int shape[3] = {B, T, H};
    sb_tensor *x = random_tensor(&g, 3, shape, 1, 2, 3);
    const real p = (real)0.3;
    sb_tensor *y = sb_dropout_tied(&g, x, p), *y2 = sb_dropout_tied(&g, x, p);
    int kept = 0, differ = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t i0 = ((size_t)b * T) * H + (size_t)h;
            const int keep = y->data[i0] != 0;
            kept += keep;
            differ += keep != (y2->data[i0] != 0);
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * T + (size_t)t) * H + (size_t)h;
                if (keep)
                    assert_true(fabs(y->data[i] - x->data[i] / (1 - p)) < 1e-15);
                else
                    assert_true(y->data[i] == 0);
            }
        }
    assert_true(kept > 0.67 * B * H && kept < 0.73 * B * H); /* 4096 draws: 0.7 +- 4 sd */
    assert_true(differ > 0);
    g.training = 0;
    assert_ptr_equal(sb_dropout_tied(&g, x, p), x);
    sb_graph_free(&g);
}

/* ---- the three forms against each other ------------------------------------------------------ */

static void test_forms_agree(void **state)
{
    (void)state;
    const struct {
        int B, T, H, N2;
    } sizes[] = {{3, 53, 5, 7}, {2, 16, 4, 3}, {2, 45, 3, 2}, {1, 125, 2, 4}};
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
        sb_graph hold, g1, g2, g3;
        sb_graph_init(&hold, 1 << 20);
        sb_graph_init(&g1, 1 << 22);
        sb_graph_init(&g2, 1 << 22);
        sb_graph_init(&g3, 1 << 24);
        sb_tensor **in =
            ssm_tensors(&hold, sizes[c].B, sizes[c].T, sizes[c].H, sizes[c].N2, 3u + (unsigned)c);
        ssm_form forms[3] = {FORM_FFT, FORM_DIRECT, FORM_RECURRENCE};
        sb_tensor *y[3];
        real *gr[3][S_COUNT];
        run_with_grads(fn_ssm, &forms[0], in, S_COUNT, &g1, &y[0], gr[0]);
        run_with_grads(fn_ssm, &forms[1], in, S_COUNT, &g2, &y[1], gr[1]);
        run_with_grads(fn_ssm, &forms[2], in, S_COUNT, &g3, &y[2], gr[2]);
        for (int f = 0; f < 2; f++) {
            double d = test_max_rel_diff(y[f]->data, y[2]->data, y[2]->size);
            if (!(d < 1e-12))
                fail_msg("size %zu: form %d vs recurrence: outputs differ by %.3g", c, f, d);
            for (int i = 0; i < S_COUNT; i++) {
                d = test_max_rel_diff(gr[f][i], gr[2][i], in[i]->size);
                if (!(d < 1e-11))
                    fail_msg("size %zu: form %d vs recurrence: gradient %d differs by %.3g", c, f,
                             i, d);
            }
        }
        for (int f = 0; f < 3; f++)
            for (int i = 0; i < S_COUNT; i++)
                free(gr[f][i]);
        /* the recurrence from a non-zero state, streamed in pieces, against one call */
        const int B = sizes[c].B, T = sizes[c].T, H = sizes[c].H, N2 = sizes[c].N2;
        const size_t ns = (size_t)B * H * N2 * 2;
        real *s_one = malloc(ns * sizeof(real)), *s_pieces = malloc(ns * sizeof(real));
        unsigned seed = 5;
        for (size_t i = 0; i < ns; i++)
            s_one[i] = s_pieces[i] = 2 * lcg_uniform(&seed) - 1;
        g3.record = 0;
        sb_graph_reset(&g3);
        sb_tensor *whole = run_ssm(&g3, in, FORM_RECURRENCE, s_one);
        int t0 = 0, len = 1;
        while (t0 < T) {
            int n = t0 + len <= T ? len : T - t0;
            sb_tensor *part[S_COUNT];
            memcpy(part, in, sizeof part);
            part[S_U] = test_time_slice(&g3, in[S_U], t0, n);
            sb_tensor *yp = run_ssm(&g3, part, FORM_RECURRENCE, s_pieces);
            sb_tensor *ref = test_time_slice(&g3, whole, t0, n);
            assert_true(test_max_rel_diff(yp->data, ref->data, yp->size) < 1e-14);
            t0 += n;
            len = len * 3 + 1;
        }
        assert_true(test_max_rel_diff(s_pieces, s_one, ns) < 1e-14);
        free(s_one);
        free(s_pieces);
        sb_graph_free(&hold), sb_graph_free(&g1), sb_graph_free(&g2), sb_graph_free(&g3);
    }
}

/* The FFT convolution at many lengths (FFT sizes 2^a 3^b 5^c) against the direct sums. */
static void test_fft_lengths(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    for (int T = 1; T <= 70; T += (T < 20 ? 1 : 7)) {
        sb_graph_reset(&g);
        g.record = 0;
        int u[3] = {2, T, 3}, K[2] = {3, T}, h1[1] = {3};
        sb_tensor *x = random_tensor(&g, 3, u, -1, 1, (unsigned)T);
        sb_tensor *k = random_tensor(&g, 2, K, -1, 1, 100u + (unsigned)T);
        sb_tensor *D = random_tensor(&g, 1, h1, -1, 1, 200u + (unsigned)T);
        sb_tensor *a = sb_s4d_conv(&g, x, k, D), *b = sb_s4d_conv_ref(&g, x, k, D);
        double d = test_max_rel_diff(a->data, b->data, a->size);
        if (!(d < 1e-13))
            fail_msg("T = %d: FFT convolution differs from the direct sums by %.3g", T, d);
    }
    sb_graph_free(&g);
}

/* ---- the layer and whole RecNets ------------------------------------------------------------- */

typedef struct layer_ctx {
    sb_model *m;
    int n_params;
} layer_ctx;

/* inputs: the layer's parameters, then its input x */
static sb_tensor *fn_layer(sb_graph *g, sb_tensor **in, void *arg)
{
    layer_ctx *c = arg;
    for (int i = 0; i < c->n_params; i++) {
        sb_tensor *t = sb_model_param(c->m, 0, i);
        t->data = in[i]->data;
        t->grad = in[i]->grad;
    }
    return c->m->type->forward(g, c->m, 0, in[c->n_params]);
}

static sb_model *s4_model(int d_input, int d_output, int D, int N, int layers, double dropout,
                          uint64_t seed)
{
    sb_model_config mc = {.d_input = d_input,
                          .d_output = d_output,
                          .d_model = D,
                          .n_layers = layers,
                          .d_state = N,
                          .n_head = 4,
                          .dropout = dropout,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "s4");
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, seed, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return m;
}

static void check_layer(int D, int N, double dropout, int T)
{
    sb_model *m = s4_model(3, 3, D, N, 1, dropout, 3);
    layer_ctx ctx = {.m = m, .n_params = m->params.n - m->layer_first[0] - 2};
    gc_problem p = {.name = "s4 layer", .fn = fn_layer, .ctx = &ctx, .training = dropout > 0};
    for (int k = 0; k < ctx.n_params; k++) {
        sb_param *q = &m->params.p[m->layer_first[0] + k];
        /* initial values plus U(-0.1, 0.1): A_imag, log_A_real move off their grid */
        sb_tensor *t = gc_add_input(&p, q->name, q->ndim, q->shape, -0.1, 0.1, (unsigned)k + 1);
        for (size_t i = 0; i < t->size; i++)
            t->data[i] += m->params.data[q->offset + i];
    }
    /* dt from the init (1e-3 to 1e-1) makes the kernel gradients tiny next to the rest: use
     * larger steps so that they are measured, not rounding */
    for (int h = 0; h < D; h++)
        p.inputs[2].tensor.data[h] = -3.0 + 2.0 * h / D;
    int xs[3] = {2, T, D};
    gc_add_input(&p, "x", 3, xs, -1, 1, 99);
    p.rtol = 1e-5;
    p.step = 1e-5;
    gc_check(&p);
    gc_free(&p);
    sb_model_free(m);
}

static void test_layer_grad(void **state)
{
    (void)state;
    check_layer(8, 6, 0.0, 11);
    check_layer(16, 4, 0.3, 9); /* tied dropout on: a fixed mask per (b, h) */
}

typedef struct model_ctx {
    sb_model *m;
    sb_tensor *input;
    int32_t *target;
    uint8_t *valid;
} model_ctx;

static sb_tensor *fn_recnet(sb_graph *g, sb_tensor **in, void *arg)
{
    model_ctx *c = arg;
    for (int i = 0; i < c->m->params.n; i++) {
        c->m->params.p[i].tensor.data = in[i]->data;
        c->m->params.p[i].tensor.grad = in[i]->grad;
    }
    sb_tensor *logits = sb_model_forward(g, c->m, c->input);
    return sb_cross_entropy(g, logits, c->target, c->valid, 1, NULL);
}

static void check_recnet(int training)
{
    sb_model *m = s4_model(5, 7, 16, 6, 2, 0.25, 5);
    enum { B = 2, T = 11, I = 5 };
    static real input_data[B * T * I];
    static int32_t target[B * T];
    static uint8_t valid[B * T];
    memset(input_data, 0, sizeof input_data);
    for (int f = 0; f < B * T; f++) {
        input_data[f * I + (f * 3) % I] = 1;
        target[f] = (f * 5 + 1) % 7;
        valid[f] = f != B * T - 1;
    }
    sb_graph holder;
    sb_graph_init(&holder, 1 << 16);
    int shape[3] = {B, T, I};
    model_ctx ctx = {.m = m,
                     .input = sb_tensor_wrap(&holder, input_data, 3, shape),
                     .target = target,
                     .valid = valid};
    gc_problem p = {.name = "s4 recnet", .fn = fn_recnet, .ctx = &ctx, .training = training};
    for (int i = 0; i < m->params.n; i++) {
        sb_param *q = &m->params.p[i];
        sb_tensor *t = gc_add_input(&p, q->name, q->ndim, q->shape, -0.1, 0.1, (unsigned)i + 1);
        for (size_t k = 0; k < t->size; k++)
            t->data[k] += m->params.data[q->offset + k];
    }
    p.rtol = 1e-5;
    p.step = 1e-5;
    gc_check(&p);
    gc_free(&p);
    sb_graph_free(&holder);
    sb_model_free(m);
}

static void test_recnet_grad(void **state)
{
    (void)state;
    check_recnet(0);
    check_recnet(1);
}

/* Streaming the whole model in pieces (recurrence, carried state) equals the whole
 * sequence (kernel + FFT convolution). */
static void test_stream(void **state)
{
    (void)state;
    sb_model *m = s4_model(5, 7, 16, 6, 2, 0, 9);
    const int B = 2, T = 23, I = 5;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int shape[3] = {B, T, I};
    sb_tensor *x = random_tensor(&g, 3, shape, 0, 1, 4);
    sb_tensor *full = sb_model_hidden(&g, m, x, 0);
    const size_t per = m->type->stream_state_floats(&m->cfg);
    assert_int_equal(per, (size_t)16 * 3 * 2);
    real *buf = calloc((size_t)m->cfg.n_layers * B * per, sizeof(real));
    real *states[2] = {buf, buf + (size_t)B * per};
    int pieces[4] = {6, 1, 3, 13}, t0 = 0;
    for (int k = 0; k < 4; k++) {
        sb_tensor *xp = test_time_slice(&g, x, t0, pieces[k]);
        sb_tensor *yp = sb_model_hidden_stream(&g, m, xp, states);
        sb_tensor *ref = test_time_slice(&g, full, t0, pieces[k]);
        double d = test_max_rel_diff(yp->data, ref->data, yp->size);
        if (!(d < 1e-12))
            fail_msg("s4: streaming piece %d differs by %.3g", k, d);
        t0 += pieces[k];
    }
    free(buf);
    sb_graph_free(&g);
    sb_model_free(m);
}

/* ---- against the reference PyTorch RecNet --------------------------------------------------- */

static double rel_err(double a, double b)
{
    double scale = fmax(fabs(a), fabs(b));
    return scale > 0 ? fabs(a - b) / scale : 0.0;
}

static void test_torch_reference(void **state)
{
    (void)state;
    json_t *root = test_load_json("s4/recnet.json");
    for (size_t c = 0; c < json_array_size(root); c++) {
        json_t *ref = json_array_get(root, c);
        sb_model *m = s4_model((int)json_integer_value(json_object_get(ref, "inp")),
                               (int)json_integer_value(json_object_get(ref, "out")),
                               (int)json_integer_value(json_object_get(ref, "d_model")),
                               (int)json_integer_value(json_object_get(ref, "d_state")),
                               (int)json_integer_value(json_object_get(ref, "layers")), 0.2,
                               (uint64_t)json_integer_value(json_object_get(ref, "seed")));
        /* 1. the state_dict: names, order, shapes, identical initial values */
        json_t *sd = json_object_get(ref, "state_dict");
        assert_int_equal(json_array_size(sd), (size_t)m->params.n);
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            json_t *e = json_array_get(sd, (size_t)i);
            if (strcmp(p->name, json_string_value(json_object_get(e, "name"))) != 0)
                fail_msg("case %zu: state_dict entry %d is %s, expected %s", c, i, p->name,
                         json_string_value(json_object_get(e, "name")));
            json_t *shape = json_object_get(e, "shape");
            assert_int_equal(json_array_size(shape), (size_t)p->ndim);
            for (int d = 0; d < p->ndim; d++)
                assert_int_equal(json_integer_value(json_array_get(shape, (size_t)d)), p->shape[d]);
            json_t *values = json_object_get(e, "values");
            for (size_t k = 0; k < p->size; k++) {
                double want = json_number_value(json_array_get(values, k));
                double got = (double)m->params.data[p->offset + k];
                if (want != got)
                    fail_msg("case %zu: initial %s[%zu] = %.9g, torch has %.9g", c, p->name, k, got,
                             want);
            }
        }
        if (json_object_get(ref, "logits") == NULL) {
            sb_model_free(m);
            continue;
        }
        /* 2. forward and backward on the fixed batch (evaluation mode: no dropout) */
        const int B = (int)json_integer_value(json_object_get(ref, "batch"));
        const int T = (int)json_integer_value(json_object_get(ref, "frames"));
        const int I = m->cfg.d_input, O = m->cfg.d_output;
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        g.record = 1;
        g.training = 0;
        int shape[3] = {B, T, I};
        sb_tensor *x = sb_tensor_zeros(&g, 3, shape);
        int32_t *target = malloc((size_t)(B * T) * sizeof *target);
        uint8_t *valid = malloc((size_t)(B * T));
        json_t *cls = json_object_get(ref, "input_classes"), *tgt = json_object_get(ref, "target");
        for (int f = 0; f < B * T; f++) {
            x->data[(size_t)f * (size_t)I +
                    (size_t)json_integer_value(json_array_get(cls, (size_t)f))] = 1;
            target[f] = (int32_t)json_integer_value(json_array_get(tgt, (size_t)f));
            valid[f] = 1;
        }
        sb_tensor *logits = sb_model_forward(&g, m, x);
        json_t *ref_logits = json_object_get(ref, "logits");
        assert_int_equal(json_array_size(ref_logits), (size_t)B * T * O);
        double worst = 0;
        for (size_t k = 0; k < logits->size; k++)
            worst = fmax(
                worst, rel_err(logits->data[k], json_number_value(json_array_get(ref_logits, k))));
        if (!(worst < 1e-10))
            fail_msg("s4: logits differ from torch by %.3g (relative)", worst);
        sb_tensor *loss = sb_cross_entropy(&g, logits, target, valid, 1, NULL);
        assert_true(rel_err(loss->data[0], json_number_value(json_object_get(ref, "loss"))) <
                    1e-12);
        sb_tensor_grad(&g, loss)[0] = 1;
        sb_graph_backward(&g);
        json_t *grads = json_object_get(ref, "grads");
        int n_checked = 0;
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            json_t *gv = json_object_get(grads, p->name);
            if (gv == NULL)
                fail_msg("s4: torch has no gradient for %s", p->name);
            double gmax = 0;
            for (size_t k = 0; k < p->size; k++)
                gmax = fmax(gmax, fabs(json_number_value(json_array_get(gv, k))));
            assert_true(gmax > 0);
            for (size_t k = 0; k < p->size; k++) {
                double want = json_number_value(json_array_get(gv, k));
                double got = (double)m->params.grad[p->offset + k];
                if (!(fabs(got - want) <= 1e-9 * gmax + 1e-15))
                    fail_msg("s4: d/d%s[%zu] = %.12g, torch %.12g", p->name, k, got, want);
            }
            n_checked++;
        }
        assert_int_equal(n_checked, m->params.n);
        free(target);
        free(valid);
        sb_graph_free(&g);
        sb_model_free(m);
    }
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_grad),       cmocka_unit_test(test_ssm_forms_grad),
        cmocka_unit_test(test_conv_grad),         cmocka_unit_test(test_dropout_glu_grad),
        cmocka_unit_test(test_dropout_tied_mask), cmocka_unit_test(test_forms_agree),
        cmocka_unit_test(test_fft_lengths),       cmocka_unit_test(test_layer_grad),
        cmocka_unit_test(test_recnet_grad),       cmocka_unit_test(test_stream),
        cmocka_unit_test(test_torch_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

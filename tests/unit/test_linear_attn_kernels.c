/*
 * test_linear_attn_kernels.c - the ops of the fla layers (ops_fla.h), in double precision:
 *   - finite-difference gradient checks of every block and of both kernels (chunked and
 *     step-by-step) at tiny shapes whose length crosses chunk boundaries with a ragged tail,
 *     for every gate variant, including chunks whose decay is too strong for the factorised
 *     products;
 *   - chunked == step-by-step: outputs, final states and gradients;
 *   - the Householder-product form of the delta rule == the interleaved sequence;
 *   - identical results with 1 and 2 threads;
 *   - the small-matrix kernel of the chunked forms (sb_fla_gemm) equals a plain loop exactly,
 *     through every block shape (8/4/1 rows; 32/16/8/4/fewer columns) and triangle mode.
 * docs/models/linear_attention.md lists these checks.
 */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "ops/fla_kernels.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static unsigned lcg_state = 1;
static double urand(double lo, double hi)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg_state >> 8) / 16777216.0;
}

static sb_tensor *rand_tensor(sb_graph *g, int ndim, const int *shape, double lo, double hi)
{
    sb_tensor *t = sb_tensor_new(g, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = urand(lo, hi);
    t->requires_grad = 1;
    return t;
}

static double max_abs_diff(const real *a, const real *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= m))
            m = isnan(e) ? (double)INFINITY : e;
    }
    return m;
}

/* ---- blocks ---------------------------------------------------------------------------------- */

static sb_tensor *fn_l2norm(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_l2norm(g, in[0], 5, 1e-6);
}

static void test_l2norm(void **state)
{
    (void)state;
    gc_problem p = {.name = "l2norm", .fn = fn_l2norm};
    int x[3] = {2, 3, 10}; /* two groups of 5 per row */
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_check(&p);
    gc_free(&p);
    /* values: unit norm up to the eps */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    sb_tensor *t = rand_tensor(&g, 3, x, -1, 1);
    sb_tensor *y = sb_l2norm(&g, t, 5, 1e-6);
    for (int r = 0; r < 12; r++) {
        double ss = 0, sy = 0;
        for (int i = 0; i < 5; i++) {
            ss += t->data[r * 5 + i] * t->data[r * 5 + i];
            sy += y->data[r * 5 + i] * y->data[r * 5 + i];
        }
        assert_true(fabs(sy - ss / (ss + 1e-6)) < 1e-14);
    }
    sb_graph_free(&g);
}

static sb_tensor *fn_rmsnorm_gated(sb_graph *g, sb_tensor **in, void *ctx)
{
    int gated = *(int *)ctx;
    return sb_rmsnorm_gated(g, in[0], gated ? in[2] : NULL, in[1], 1e-5);
}

static void test_rmsnorm_gated(void **state)
{
    (void)state;
    for (int gated = 0; gated < 2; gated++) {
        gc_problem p = {.name = gated ? "gated rmsnorm" : "rmsnorm (fla)",
                        .fn = fn_rmsnorm_gated,
                        .ctx = &gated};
        int x[4] = {2, 3, 2, 19}, w[1] = {19}; /* 19: crosses the 16-column blocks of dw */
        gc_add_input(&p, "x", 4, x, -2, 2, 1);
        gc_add_input(&p, "w", 1, w, 0.5, 1.5, 2);
        if (gated)
            gc_add_input(&p, "gate", 4, x, -3, 3, 3);
        gc_check(&p);
        gc_free(&p);
    }
}

static sb_tensor *fn_logsigmoid(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_logsigmoid(g, in[0], 1.0 / 16);
}

static sb_tensor *fn_gla_gate(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_gla_gate(g, in[0], in[1], in[2], in[3], 16);
}

static void test_gates(void **state)
{
    (void)state;
    gc_problem p = {.name = "logsigmoid / 16", .fn = fn_logsigmoid};
    int x[2] = {5, 7};
    gc_add_input(&p, "x", 2, x, -30, 30, 1);
    gc_check(&p);
    gc_free(&p);

    gc_problem q = {.name = "GLA low-rank gate", .fn = fn_gla_gate};
    int xs[3] = {2, 3, 6}, w0[2] = {4, 6}, w1[2] = {5, 4}, b1[1] = {5};
    gc_add_input(&q, "x", 3, xs, -1, 1, 1);
    gc_add_input(&q, "w0", 2, w0, -1, 1, 2);
    gc_add_input(&q, "w1", 2, w1, -1, 1, 3);
    gc_add_input(&q, "b1", 1, b1, -1, 1, 4);
    gc_check(&q);
    gc_free(&q);

    /* values against the closed forms */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    int s[1] = {4};
    real xv[4] = {-40, -1, 0.5, 25};
    sb_tensor *t = sb_tensor_wrap(&g, xv, 1, s);
    sb_tensor *y = sb_logsigmoid(&g, t, 1);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(y->data[i] - log(1 / (1 + exp(-xv[i])))) < 1e-14);
    sb_graph_free(&g);
}

static sb_tensor *fn_decay(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_decay_gate(g, in[0], in[1], in[2]);
}

static real beta_c;
static sb_tensor *fn_beta(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_beta_gate(g, in[0], beta_c);
}

static void test_decay_beta(void **state)
{
    (void)state;
    gc_problem p = {.name = "GDN decay gate", .fn = fn_decay};
    int a[3] = {2, 5, 3}, h[1] = {3};
    gc_add_input(&p, "a", 3, a, -3, 3, 1);
    gc_add_input(&p, "A_log", 1, h, -1, 2, 2);
    gc_add_input(&p, "dt_bias", 1, h, -5, 1, 3);
    gc_check(&p);
    gc_free(&p);
    for (int c = 1; c <= 2; c++) {
        beta_c = (real)c;
        gc_problem q = {.name = c == 1 ? "beta" : "beta x2", .fn = fn_beta};
        gc_add_input(&q, "z", 3, a, -4, 4, 4);
        gc_check(&q);
        gc_free(&q);
    }
    /* softplus above PyTorch's threshold: y = -exp(A_log) (a + dt_bias) */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    int s1[2] = {1, 1}, s0[1] = {1};
    real av[1] = {30}, Al[1] = {0.5}, dtb[1] = {-2};
    sb_tensor *y = sb_decay_gate(&g, sb_tensor_wrap(&g, av, 2, s1), sb_tensor_wrap(&g, Al, 1, s0),
                                 sb_tensor_wrap(&g, dtb, 1, s0));
    assert_true(fabs(y->data[0] + exp(0.5) * 28) < 1e-12);
    sb_graph_free(&g);
}

static sb_tensor *fn_short_conv(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_short_conv(g, in[0], in[1]);
}

static void test_short_conv(void **state)
{
    (void)state;
    gc_problem p = {.name = "short conv + silu", .fn = fn_short_conv};
    int x[3] = {2, 7, 5}, w[3] = {5, 1, 4};
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_add_input(&p, "w", 3, w, -0.5, 0.5, 2);
    gc_check(&p);
    gc_free(&p);
}

/* ---- kernel K1 ------------------------------------------------------------------------------ */

typedef enum { GATE_NONE, GATE_HEAD, GATE_CHANNEL } gate_kind;

typedef struct k1_case {
    gate_kind gate;
    int chunk; /* 0: step-by-step reference */
} k1_case;

static sb_tensor *fn_k1(sb_graph *g, sb_tensor **in, void *ctx)
{
    const k1_case *c = ctx;
    sb_tensor *gate = c->gate == GATE_NONE ? NULL : in[3];
    if (c->chunk == 0)
        return sb_linear_attn_ref(g, in[0], in[1], in[2], gate, 0.6, NULL);
    return sb_linear_attn(g, in[0], in[1], in[2], gate, 0.6, c->chunk, NULL);
}

/* B = 2, T = 11 (chunks of 4: 4 + 4 + 3), H = 2, K = 3, V = 4. g_lo/g_hi: log-decays. */
static void k1_gradcheck(const char *name, gate_kind gate, int chunk, double g_lo, double g_hi)
{
    k1_case c = {gate, chunk};
    gc_problem p = {.name = name, .fn = fn_k1, .ctx = &c};
    int qs[4] = {2, 11, 2, 3}, vs[4] = {2, 11, 2, 4};
    gc_add_input(&p, "q", 4, qs, -1, 1, 1);
    gc_add_input(&p, "k", 4, qs, -1, 1, 2);
    gc_add_input(&p, "v", 4, vs, -1, 1, 3);
    if (gate == GATE_CHANNEL)
        gc_add_input(&p, "g", 4, qs, g_lo, g_hi, 4);
    else if (gate == GATE_HEAD)
        gc_add_input(&p, "g", 3, qs, g_lo, g_hi, 4);
    gc_check(&p);
    gc_free(&p);
}

static void test_k1_grad(void **state)
{
    (void)state;
    k1_gradcheck("K1 ref, per-channel gate", GATE_CHANNEL, 0, -0.6, -0.01);
    k1_gradcheck("K1 ref, scalar gate", GATE_HEAD, 0, -0.6, -0.01);
    k1_gradcheck("K1 ref, no gate", GATE_NONE, 0, 0, 0);
    k1_gradcheck("K1 chunk 4, per-channel gate", GATE_CHANNEL, 4, -0.6, -0.01);
    k1_gradcheck("K1 chunk 4, scalar gate", GATE_HEAD, 4, -0.6, -0.01);
    k1_gradcheck("K1 chunk 4, no gate", GATE_NONE, 4, 0, 0);
    k1_gradcheck("K1 chunk 1, per-channel gate", GATE_CHANNEL, 1, -0.6, -0.01);
    k1_gradcheck("K1 chunk 16 (> T), per-channel gate", GATE_CHANNEL, 16, -0.6, -0.01);
    /* decays beyond the factorised range (chunk totals < -30): the term-by-term path */
    k1_gradcheck("K1 chunk 4, strong per-channel gate", GATE_CHANNEL, 4, -12, -6);
    k1_gradcheck("K1 chunk 4, strong scalar gate", GATE_HEAD, 4, -12, -6);
    k1_gradcheck("K1 chunk 4, mixed per-channel gate", GATE_CHANNEL, 4, -12, -0.01);
    /* chunk totals beyond double's exp range: a factorised product would overflow */
    k1_gradcheck("K1 chunk 4, extreme per-channel gate", GATE_CHANNEL, 4, -300, -150);
    k1_gradcheck("K1 chunk 4, extreme scalar gate", GATE_HEAD, 4, -300, -150);
}

/* Runs forward + backward of one kernel call with a fixed output gradient; returns o. */
typedef sb_tensor *(*kernel_fn)(sb_graph *g, sb_tensor **in, void *ctx);

static sb_tensor *run_fwd_bwd(sb_graph *g, kernel_fn fn, sb_tensor **in, int n_in, void *ctx)
{
    sb_graph_reset(g);
    g->record = 1;
    for (int i = 0; i < n_in; i++)
        in[i]->grad = NULL;
    sb_tensor *o = fn(g, in, ctx);
    real *dy = sb_tensor_grad(g, o);
    for (size_t i = 0; i < o->size; i++)
        dy[i] = (real)sin(0.7 * (double)i + 0.3);
    sb_graph_backward(g);
    return o;
}

/* Copies of the inputs' gradients (they live in the arena). */
static real *save_grads(sb_tensor **in, int n_in, size_t *total)
{
    size_t n = 0;
    for (int i = 0; i < n_in; i++)
        n += in[i]->size;
    real *buf = malloc(n * sizeof *buf);
    n = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->grad != NULL)
            memcpy(buf + n, in[i]->grad, in[i]->size * sizeof *buf);
        else
            memset(buf + n, 0, in[i]->size * sizeof *buf);
        n += in[i]->size;
    }
    *total = n;
    return buf;
}

/* Chunked == step-by-step for K1: outputs, gradients and final states. */
static void k1_compare(gate_kind gate, int chunk, int T, double g_lo, double g_hi)
{
    const int B = 2, H = 3, K = 5, V = 7;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    lcg_state = 99;
    int qs[4] = {B, T, H, K}, vs[4] = {B, T, H, V};
    /* inputs outside the arena (the graph is reset between runs) */
    sb_tensor in_store[4];
    sb_tensor *in[4];
    int n_in = gate == GATE_NONE ? 3 : 4;
    for (int i = 0; i < 4; i++) {
        const int *shape = i == 2 ? vs : qs;
        int ndim = (i == 3 && gate == GATE_HEAD) ? 3 : 4;
        memset(&in_store[i], 0, sizeof in_store[i]);
        in_store[i].ndim = ndim;
        in_store[i].size = 1;
        for (int d = 0; d < ndim; d++)
            in_store[i].shape[d] = shape[d], in_store[i].size *= (size_t)shape[d];
        in_store[i].data = malloc(in_store[i].size * sizeof(real));
        for (size_t e = 0; e < in_store[i].size; e++)
            in_store[i].data[e] = i == 3 ? urand(g_lo, g_hi) : urand(-1, 1);
        in_store[i].requires_grad = 1;
        in[i] = &in_store[i];
    }
    k1_case cref = {gate, 0}, cchk = {gate, chunk};
    sb_tensor *o1 = run_fwd_bwd(&g, fn_k1, in, n_in, &cref);
    real *out_ref = malloc(o1->size * sizeof(real));
    memcpy(out_ref, o1->data, o1->size * sizeof(real));
    size_t ng;
    real *grad_ref = save_grads(in, n_in, &ng);
    sb_tensor *o2 = run_fwd_bwd(&g, fn_k1, in, n_in, &cchk);
    real *grad_chk = save_grads(in, n_in, &ng);
    double e_out = max_abs_diff(out_ref, o2->data, o2->size);
    double e_grad = max_abs_diff(grad_ref, grad_chk, ng);
    if (!(e_out < 1e-12 && e_grad < 1e-11))
        fail_msg("K1 gate %d chunk %d T %d: output error %g, gradient error %g", (int)gate, chunk,
                 T, e_out, e_grad);
    /* final states through the streaming form, starting from a non-zero state */
    sb_graph_reset(&g);
    g.record = 0;
    size_t ns = (size_t)B * H * K * V;
    real *s1 = malloc(ns * sizeof(real)), *s2 = malloc(ns * sizeof(real));
    for (size_t i = 0; i < ns; i++)
        s1[i] = s2[i] = urand(-1, 1);
    sb_tensor *gt = gate == GATE_NONE ? NULL : in[3];
    sb_tensor *a = sb_linear_attn_ref(&g, in[0], in[1], in[2], gt, 0.6, s1);
    sb_tensor *b = sb_linear_attn(&g, in[0], in[1], in[2], gt, 0.6, chunk, s2);
    assert_true(max_abs_diff(a->data, b->data, a->size) < 1e-12);
    assert_true(max_abs_diff(s1, s2, ns) < 1e-12);
    free(s1), free(s2), free(out_ref), free(grad_ref), free(grad_chk);
    for (int i = 0; i < 4; i++)
        free(in_store[i].data);
    sb_graph_free(&g);
}

static void test_k1_chunked_vs_ref(void **state)
{
    (void)state;
    for (int gk = 0; gk < 3; gk++) {
        k1_compare((gate_kind)gk, 4, 11, -0.8, -0.01);
        k1_compare((gate_kind)gk, 16, 37, -0.3, -0.001);
        k1_compare((gate_kind)gk, 5, 3, -0.3, -0.001); /* T < chunk */
        if (gk != GATE_NONE)
            k1_compare((gate_kind)gk, 8, 29, -10, -0.01); /* some chunks term by term */
        if (gk != GATE_NONE)
            k1_compare((gate_kind)gk, 4, 13, -400, -0.01); /* overflow if factorised */
    }
}

/* ---- kernel K2 ------------------------------------------------------------------------------- */

typedef struct k2_case {
    int n; /* Householder steps */
    int gated;
    int chunk; /* 0: reference */
} k2_case;

static sb_tensor *fn_k2(sb_graph *g, sb_tensor **in, void *ctx)
{
    const k2_case *c = ctx;
    sb_tensor *gate = c->gated ? in[4] : NULL;
    if (c->chunk == 0)
        return sb_delta_rule_ref(g, in[0], in[1], in[2], in[3], gate, 0.6, NULL);
    return sb_delta_rule(g, in[0], in[1], in[2], in[3], gate, 0.6, c->chunk, NULL);
}

/* B = 2, T = 7 (chunks of 3: 3 + 3 + 1), H = 2, K = 3, V = 4. */
static void k2_gradcheck(const char *name, int n, int gated, int chunk, double g_lo, double g_hi)
{
    k2_case c = {n, gated, chunk};
    gc_problem p = {.name = name, .fn = fn_k2, .ctx = &c};
    int qs[4] = {2, 7, 2, 3}, ks[4] = {2, 7, 2 * n, 3}, vs[4] = {2, 7, 2 * n, 4};
    int bs[3] = {2, 7, 2 * n}, gs[3] = {2, 7, 2};
    gc_add_input(&p, "q", 4, qs, -1, 1, 1);
    gc_add_input(&p, "k", 4, ks, -0.55, 0.55, 2);
    gc_add_input(&p, "v", 4, vs, -1, 1, 3);
    gc_add_input(&p, "beta", 3, bs, 0.1, 1.9, 4);
    if (gated)
        gc_add_input(&p, "g", 3, gs, g_lo, g_hi, 5);
    gc_check(&p);
    gc_free(&p);
}

static void test_k2_grad(void **state)
{
    (void)state;
    k2_gradcheck("K2 ref, delta rule", 1, 0, 0, 0, 0);
    k2_gradcheck("K2 ref, gated", 1, 1, 0, -0.8, -0.01);
    k2_gradcheck("K2 ref, gated product n=4", 4, 1, 0, -0.8, -0.01);
    k2_gradcheck("K2 chunk 3, delta rule", 1, 0, 3, 0, 0);
    k2_gradcheck("K2 chunk 3, gated", 1, 1, 3, -0.8, -0.01);
    k2_gradcheck("K2 chunk 3, product n=3 ungated", 3, 0, 3, 0, 0);
    k2_gradcheck("K2 chunk 3, gated product n=4", 4, 1, 3, -0.8, -0.01);
    k2_gradcheck("K2 chunk 1, gated product n=2", 2, 1, 1, -0.8, -0.01);
    k2_gradcheck("K2 chunk 3, strong gate", 1, 1, 3, -20, -11);
    k2_gradcheck("K2 chunk 3, strong gate, n=4", 4, 1, 3, -20, -11);
    k2_gradcheck("K2 chunk 3, extreme gate", 1, 1, 3, -400, -300);
    k2_gradcheck("K2 chunk 3, extreme gate, n=4", 4, 1, 3, -400, -300);
}

static void k2_compare(int n, int gated, int chunk, int T, double g_lo, double g_hi)
{
    const int B = 2, H = 3, K = 5, V = 6;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    lcg_state = 7;
    int shapes[5][4] = {
        {B, T, H, K}, {B, T, n * H, K}, {B, T, n * H, V}, {B, T, n * H, 0}, {B, T, H, 0}};
    sb_tensor in_store[5];
    sb_tensor *in[5];
    int n_in = gated ? 5 : 4;
    for (int i = 0; i < 5; i++) {
        int ndim = i >= 3 ? 3 : 4;
        memset(&in_store[i], 0, sizeof in_store[i]);
        in_store[i].ndim = ndim;
        in_store[i].size = 1;
        for (int d = 0; d < ndim; d++)
            in_store[i].shape[d] = shapes[i][d], in_store[i].size *= (size_t)shapes[i][d];
        in_store[i].data = malloc(in_store[i].size * sizeof(real));
        for (size_t e = 0; e < in_store[i].size; e++) {
            double lo = -1, hi = 1;
            if (i == 1)
                lo = -0.4, hi = 0.4; /* |k| < 1 */
            if (i == 3)
                lo = 0.05, hi = 1.95;
            if (i == 4)
                lo = g_lo, hi = g_hi;
            in_store[i].data[e] = urand(lo, hi);
        }
        in_store[i].requires_grad = 1;
        in[i] = &in_store[i];
    }
    k2_case cref = {n, gated, 0}, cchk = {n, gated, chunk};
    sb_tensor *o1 = run_fwd_bwd(&g, fn_k2, in, n_in, &cref);
    real *out_ref = malloc(o1->size * sizeof(real));
    memcpy(out_ref, o1->data, o1->size * sizeof(real));
    size_t ng;
    real *grad_ref = save_grads(in, n_in, &ng);
    sb_tensor *o2 = run_fwd_bwd(&g, fn_k2, in, n_in, &cchk);
    real *grad_chk = save_grads(in, n_in, &ng);
    double e_out = max_abs_diff(out_ref, o2->data, o2->size);
    double e_grad = max_abs_diff(grad_ref, grad_chk, ng);
    if (!(e_out < 1e-12 && e_grad < 1e-10))
        fail_msg("K2 n %d gated %d chunk %d T %d: output error %g, gradient error %g", n, gated,
                 chunk, T, e_out, e_grad);
    sb_graph_reset(&g);
    g.record = 0;
    size_t ns = (size_t)B * H * K * V;
    real *s1 = malloc(ns * sizeof(real)), *s2 = malloc(ns * sizeof(real));
    for (size_t i = 0; i < ns; i++)
        s1[i] = s2[i] = urand(-1, 1);
    sb_tensor *gt = gated ? in[4] : NULL;
    sb_tensor *a = sb_delta_rule_ref(&g, in[0], in[1], in[2], in[3], gt, 0.6, s1);
    sb_tensor *b = sb_delta_rule(&g, in[0], in[1], in[2], in[3], gt, 0.6, chunk, s2);
    assert_true(max_abs_diff(a->data, b->data, a->size) < 1e-12);
    assert_true(max_abs_diff(s1, s2, ns) < 1e-12);
    free(s1), free(s2), free(out_ref), free(grad_ref), free(grad_chk);
    for (int i = 0; i < 5; i++)
        free(in_store[i].data);
    sb_graph_free(&g);
}

static void test_k2_chunked_vs_ref(void **state)
{
    (void)state;
    for (int gated = 0; gated < 2; gated++)
        for (int n = 1; n <= 4; n += 3) {
            k2_compare(n, gated, 4, 11, -0.8, -0.01);
            k2_compare(n, gated, 16, 37, -0.3, -0.001);
            k2_compare(n, gated, 5, 3, -0.3, -0.001);
            if (gated)
                k2_compare(n, gated, 8, 29, -12, -0.01);
            if (gated)
                k2_compare(n, gated, 4, 13, -400, -0.01);
        }
}

/* The product of n Householder steps per token (spec 10.3, first form) computed by hand
 * equals the kernel on the interleaved sequence. */
static void test_k2_householder_product(void **state)
{
    (void)state;
    const int B = 1, T = 6, H = 2, K = 4, V = 3, n = 4;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    lcg_state = 3;
    int qs[4] = {B, T, H, K}, ks[4] = {B, T, n * H, K}, vs[4] = {B, T, n * H, V};
    int bs[3] = {B, T, n * H}, gs[3] = {B, T, H};
    sb_tensor *q = rand_tensor(&g, 4, qs, -1, 1), *k = rand_tensor(&g, 4, ks, -0.5, 0.5);
    sb_tensor *v = rand_tensor(&g, 4, vs, -1, 1), *beta = rand_tensor(&g, 3, bs, 0.1, 1.9);
    sb_tensor *gt = rand_tensor(&g, 3, gs, -1, 0);
    sb_tensor *o = sb_delta_rule(&g, q, k, v, beta, gt, 0.5, 2, NULL);
    for (int h = 0; h < H; h++) {
        double S[4][3] = {{0}};
        for (int t = 0; t < T; t++) {
            double a = exp(gt->data[t * H + h]);
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    S[c][x] *= a;
            for (int j = 0; j < n; j++) {
                const real *kk = k->data + ((size_t)(t * n + j) * H + h) * K;
                const real *vv = v->data + ((size_t)(t * n + j) * H + h) * V;
                double b = beta->data[(t * n + j) * H + h], u[3];
                for (int x = 0; x < V; x++) {
                    u[x] = vv[x];
                    for (int c = 0; c < K; c++)
                        u[x] -= S[c][x] * kk[c];
                    u[x] *= b;
                }
                for (int c = 0; c < K; c++)
                    for (int x = 0; x < V; x++)
                        S[c][x] += kk[c] * u[x];
            }
            for (int x = 0; x < V; x++) {
                double acc = 0;
                for (int c = 0; c < K; c++)
                    acc += 0.5 * S[c][x] * q->data[(t * H + h) * K + c];
                assert_true(fabs(acc - o->data[(t * H + h) * V + x]) < 1e-13);
            }
        }
    }
    sb_graph_free(&g);
}

/* ---- threads --------------------------------------------------------------------------------- */

static void test_threads(void **state)
{
    (void)state;
    const int B = 3, T = 23, H = 2, K = 4, V = 5, n = 2;
    real *results[2][2];
    size_t sizes[2];
    for (int th = 0; th < 2; th++) {
        omp_set_num_threads(th + 1);
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        lcg_state = 11;
        g.record = 1;
        int qs[4] = {B, T, H, K}, vs[4] = {B, T, H, V}, ks[4] = {B, T, n * H, K};
        int vvs[4] = {B, T, n * H, V}, bs[3] = {B, T, n * H}, gs[3] = {B, T, H};
        sb_tensor *q = rand_tensor(&g, 4, qs, -1, 1), *k = rand_tensor(&g, 4, qs, -1, 1);
        sb_tensor *v = rand_tensor(&g, 4, vs, -1, 1), *gk = rand_tensor(&g, 4, qs, -0.5, 0);
        sb_tensor *kk = rand_tensor(&g, 4, ks, -0.5, 0.5), *vv = rand_tensor(&g, 4, vvs, -1, 1);
        sb_tensor *beta = rand_tensor(&g, 3, bs, 0.1, 1.9), *gh = rand_tensor(&g, 3, gs, -0.5, 0);
        sb_tensor *o1 = sb_linear_attn(&g, q, k, v, gk, 0.5, 8, NULL);
        sb_tensor *o2 = sb_delta_rule(&g, q, kk, vv, beta, gh, 0.5, 8, NULL);
        real *d1 = sb_tensor_grad(&g, o1), *d2 = sb_tensor_grad(&g, o2);
        for (size_t i = 0; i < o1->size; i++)
            d1[i] = (real)cos((double)i), d2[i] = (real)sin((double)i);
        sb_graph_backward(&g);
        sb_tensor *all[10] = {o1, o2, q, k, v, gk, kk, vv, beta, gh};
        size_t total = 0;
        for (int i = 0; i < 10; i++)
            total += all[i]->size * (i < 2 ? 1 : 2);
        real *buf = malloc(total * sizeof(real)), *p = buf;
        for (int i = 0; i < 10; i++) {
            memcpy(p, all[i]->data, all[i]->size * sizeof(real));
            p += all[i]->size;
            if (i >= 2) {
                memcpy(p, all[i]->grad, all[i]->size * sizeof(real));
                p += all[i]->size;
            }
        }
        results[th][0] = buf;
        sizes[th] = total;
        results[th][1] = NULL;
        sb_graph_free(&g);
    }
    omp_set_num_threads(2);
    assert_int_equal(sizes[0], sizes[1]);
    assert_memory_equal(results[0][0], results[1][0], sizes[0] * sizeof(real));
    free(results[0][0]);
    free(results[1][0]);
}

/* ---- the small-matrix kernel ----------------------------------------------------------------- */

/* sb_fla_gemm against the plain triple loop it promises to equal: every C entry is one fma
 * sum over p in increasing order, so the blocked kernel must match bit for bit (== also
 * accepts a signed zero, which an fma with a skipped zero of A could flip). Shapes sweep
 * every block path: 8, 4 and 1 rows; 32, 16, 8, 4 and fewer columns; both layouts of A;
 * accumulate or not; lower and upper triangular inputs and triangular outputs. */
static void test_fla_gemm(void **state)
{
    (void)state;
    const int max_dim = 70;
    real *A = malloc(sizeof(real) * (size_t)(max_dim + 3) * (size_t)(max_dim + 3));
    real *B = malloc(sizeof(real) * (size_t)max_dim * (size_t)(max_dim + 3));
    real *C = malloc(sizeof(real) * (size_t)max_dim * (size_t)(max_dim + 3));
    real *R = malloc(sizeof(real) * (size_t)max_dim * (size_t)(max_dim + 3));
    assert_non_null(A);
    assert_non_null(B);
    assert_non_null(C);
    assert_non_null(R);
    const int Ms[] = {1, 3, 4, 5, 8, 12, 13, 16, 21, 64};
    const int Ns[] = {1, 3, 4, 7, 8, 12, 16, 20, 28, 32, 48, 52, 64, 70};
    const int Ps[] = {1, 5, 16, 33, 64};
    long checked = 0;
    for (int mi = 0; mi < 10; mi++)
        for (int ni = 0; ni < 14; ni++)
            for (int pi = 0; pi < 5; pi++)
                for (int mode = 0; mode < 6; mode++) {
                    const int M = Ms[mi], N = Ns[ni], P = Ps[pi];
                    const int ta = mode & 1, accumulate = (mode >> 1) & 1;
                    /* triangle: none, lower in (n = 1, 2), upper in (n = 1, 2), lower out */
                    const int tri_kind = (mi + ni + pi + mode) % 6;
                    const int tri_in = tri_kind == 1   ? 1
                                       : tri_kind == 2 ? 2
                                       : tri_kind == 3 ? -1
                                       : tri_kind == 4 ? -2
                                                       : 0;
                    const int tri_out = tri_kind == 5 ? 1 : 0;
                    const size_t lda = (size_t)(ta ? M : P) + 2, ldb = (size_t)N + 1,
                                 ldc = (size_t)N + 3;
                    for (int i = 0; i < M; i++)
                        for (int p = 0; p < P; p++) {
                            const int zero = (tri_in > 0 && p >= (i + 1) * tri_in) ||
                                             (tri_in < 0 && p < i / -tri_in);
                            real *a = ta ? &A[(size_t)p * lda + (size_t)i]
                                         : &A[(size_t)i * lda + (size_t)p];
                            *a = zero ? 0 : (real)urand(-1, 1);
                        }
                    for (int p = 0; p < P; p++)
                        for (int j = 0; j < N; j++)
                            B[(size_t)p * ldb + (size_t)j] = (real)urand(-1, 1);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++)
                            C[(size_t)i * ldc + (size_t)j] = R[(size_t)i * ldc + (size_t)j] =
                                (real)urand(-1, 1);
                    const real alpha = (real)0.375;
                    sb_fla_gemm(ta, M, N, P, alpha, A, lda, B, ldb, C, ldc, accumulate, tri_in,
                                tri_out);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            if (tri_out > 0 && j >= (i + 1) * tri_out)
                                continue;
                            real acc = 0;
                            for (int p = 0; p < P; p++) {
                                const real a = ta ? A[(size_t)p * lda + (size_t)i]
                                                  : A[(size_t)i * lda + (size_t)p];
                                acc = fma(a, B[(size_t)p * ldb + (size_t)j], acc);
                            }
                            const real c0 = R[(size_t)i * ldc + (size_t)j];
                            const real want = accumulate ? c0 + alpha * acc : alpha * acc;
                            const real got = C[(size_t)i * ldc + (size_t)j];
                            if (!(got == want))
                                fail_msg("sb_fla_gemm ta %d M %d N %d P %d acc %d tri %d/%d: "
                                         "C[%d][%d] = %.17g, "
                                         "plain loop %.17g",
                                         ta, M, N, P, accumulate, tri_in, tri_out, i, j,
                                         (double)got, (double)want);
                            checked++;
                        }
                }
    assert_true(checked > 100000);
    free(A);
    free(B);
    free(C);
    free(R);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_l2norm),
        cmocka_unit_test(test_rmsnorm_gated),
        cmocka_unit_test(test_gates),
        cmocka_unit_test(test_decay_beta),
        cmocka_unit_test(test_short_conv),
        cmocka_unit_test(test_k1_grad),
        cmocka_unit_test(test_k1_chunked_vs_ref),
        cmocka_unit_test(test_k2_grad),
        cmocka_unit_test(test_k2_chunked_vs_ref),
        cmocka_unit_test(test_k2_householder_product),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fla_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_path_attn.c - PaTH attention (docs/models/path_attn.md). One source, built twice.
 *
 * test_path_attn, the double build (SB_REAL_DOUBLE):
 *   - both forms of the kernel (sb_path_attn, blocks 1, 4, 32; sb_path_attn_ref) against a
 *     plain form (path_plain.h) that multiplies the Householder matrices out explicitly
 *     (Dh x Dh products for every query and key);
 *   - finite-difference gradient checks of both forms (every input; raw w, and w through
 *     the L2 norm with beta near 2, near-reflections), lengths crossing the blocks with
 *     ragged tails (11 and 13 with blocks of 4, 67 with the layer's 32), and 1, 2;
 *   - the blocked form against the row-by-row form: outputs and every gradient;
 *   - beta = 0 is plain causal softmax attention (sb_attention_causal);
 *   - 1 and 2 threads identical (outputs and gradients);
 *   - the whole RecNet against the pure-PyTorch mimic (tests/data/models/path_attn):
 *     names, shapes, initial values, parameter counts at two widths, float64 logits.
 * test_path_attn_float, the float build (what training uses):
 *   - the kernel against the explicit Householder products in double (path_plain.h), on a
 *     sequence long enough for rounding to build up along the walks (T 300);
 *   - the whole RecNet against the PyTorch mimic's float64 logits;
 *   - identical training steps (logits and every gradient) with 1 and 2 threads.
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

#include <cmocka.h>

#include "model/model.h"
#include "model_checks.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_path.h"
#include "path_plain.h"
#include "test_util.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

/* The whole RecNet of the mimic file's sizes and seed against the mimic: layout, initial
 * values and logits to tol; the logits' error is printed. */
static void check_path_mimic(mimic_file *f, const mimic_tolerances *tol)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "path_attn");
    cfg.d_input = f->I, cfg.d_output = f->O, cfg.d_model = f->D, cfg.n_layers = f->L;
    cfg.n_head = f->H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f->seed, &m, &err) != SB_OK)
        fail_msg("path_attn: %s", err.msg);
    check_against_mimic(mimic_model(f, "path_attn"), m, f, tol, "path_attn");
    const double e = check_mimic_logits(mimic_model(f, "path_attn"), m, f, tol->logits_floor,
                                        tol->logits_tol, "path_attn");
    print_message("path_attn: logits vs the mimic's float64 logits, max rel error %.3g\n", e);
    sb_model_free(m);
}

#ifdef SB_REAL_DOUBLE

/* Inputs held outside the arena. */
typedef struct path_inputs {
    int B, T, H, Dh;
    real *q, *k, *v, *w, *beta;
} path_inputs;

static void inputs_make(path_inputs *in, int B, int T, int H, int Dh, double w_scale, double b_lo,
                        double b_hi, int unit_w)
{
    const size_t n = (size_t)B * T * H * Dh, nb = (size_t)B * T * H;
    in->B = B, in->T = T, in->H = H, in->Dh = Dh;
    in->q = malloc(n * sizeof(real)), in->k = malloc(n * sizeof(real));
    in->v = malloc(n * sizeof(real)), in->w = malloc(n * sizeof(real));
    in->beta = malloc(nb * sizeof(real));
    assert_true(in->q && in->k && in->v && in->w && in->beta);
    for (size_t i = 0; i < n; i++) {
        in->q[i] = urand(-1, 1), in->k[i] = urand(-1, 1), in->v[i] = urand(-1, 1);
        in->w[i] = urand(-w_scale, w_scale);
    }
    if (unit_w)
        for (size_t r = 0; r < n / Dh; r++) {
            double s = 0;
            for (int e = 0; e < Dh; e++)
                s += in->w[r * Dh + e] * in->w[r * Dh + e];
            for (int e = 0; e < Dh; e++)
                in->w[r * Dh + e] /= sqrt(s);
        }
    for (size_t i = 0; i < nb; i++)
        in->beta[i] = urand(b_lo, b_hi);
}

static void inputs_free(path_inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->w), free(in->beta);
}

/* block 0: the row-by-row twin sb_path_attn_ref; else sb_path_attn with that block */
static sb_tensor *run_kernel(sb_graph *g, const path_inputs *in, sb_tensor **t, int block)
{
    int s4[4] = {in->B, in->T, in->H, in->Dh}, s3[3] = {in->B, in->T, in->H};
    real *src[5] = {in->q, in->k, in->v, in->w, in->beta};
    for (int i = 0; i < 5; i++) {
        t[i] = sb_tensor_wrap(g, src[i], i < 4 ? 4 : 3, i < 4 ? s4 : s3);
        t[i]->requires_grad = 1;
    }
    return block == 0 ? sb_path_attn_ref(g, t[0], t[1], t[2], t[3], t[4])
                      : sb_path_attn(g, t[0], t[1], t[2], t[3], t[4], block);
}

static void check_against_plain(int block, int B, int T, int H, int Dh, double w_scale, double b_lo,
                                double b_hi, int unit_w)
{
    path_inputs in;
    inputs_make(&in, B, T, H, Dh, w_scale, b_lo, b_hi, unit_w);
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    sb_tensor *t[5];
    sb_tensor *o = run_kernel(&g, &in, t, block);
    double *ref = malloc(o->size * sizeof *ref);
    assert_non_null(ref);
    path_plain(in.q, in.k, in.v, in.w, in.beta, B, T, H, Dh, ref);
    double err = 0, mag = 0;
    for (size_t i = 0; i < o->size; i++) {
        const double e = fabs((double)o->data[i] - ref[i]);
        err = e <= err ? err : (isnan(e) ? (double)INFINITY : e);
        mag = fmax(mag, fabs(ref[i]));
    }
    print_message("%s %d vs explicit Householder products (B %d T %d H %d Dh %d, beta in "
                  "[%g, %g]%s): max abs diff %.3g (|o| up to %.3g)\n",
                  block ? "block" : "ref", block, B, T, H, Dh, b_lo, b_hi, unit_w ? ", unit w" : "",
                  err, mag);
    if (!(err <= 1e-12 * (1 + mag)))
        fail_msg("kernel differs from the explicit products by %g", err);
    free(ref);
    sb_graph_free(&g);
    inputs_free(&in);
}

static void test_kernel_vs_plain(void **state)
{
    (void)state;
    const int blocks[4] = {0, 1, 4, SB_PATH_ATTN_BLOCK};
    for (int b = 0; b < 4; b++) {
        lcg = 5;
        check_against_plain(blocks[b], 2, 13, 2, 3, 0.5, 0.1, 1.9, 0);
        check_against_plain(blocks[b], 1, 1, 1, 4, 0.5, 0.1, 1.9, 0);
        check_against_plain(blocks[b], 2, 75, 3, 5, 1.0, 0.0, 2.0, 1);  /* unit w: 32+32+11 */
        check_against_plain(blocks[b], 1, 30, 1, 8, 1.0, 1.95, 2.0, 1); /* near reflections */
    }
}

/* ---- gradients ------------------------------------------------------------------------------ */

typedef struct path_case {
    int block; /* 0: sb_path_attn_ref */
    int l2;    /* w through the L2 norm first (as the layer) */
} path_case;

/* in: q, k, v, w, beta */
static sb_tensor *fn_path(sb_graph *g, sb_tensor **in, void *ctx)
{
    const path_case *c = ctx;
    sb_tensor *w = in[3];
    if (c->l2) {
        const int Dh = w->shape[3];
        int flat[3] = {w->shape[0], w->shape[1], w->shape[2] * Dh};
        w = sb_tensor_reshape(g, sb_l2norm(g, sb_tensor_reshape(g, w, 3, flat), Dh, 1e-6), 4,
                              w->shape);
    }
    return c->block == 0 ? sb_path_attn_ref(g, in[0], in[1], in[2], w, in[4])
                         : sb_path_attn(g, in[0], in[1], in[2], w, in[4], c->block);
}

static void path_gradcheck(const char *name, int block, int B, int T, int H, int Dh, double w_scale,
                           double b_lo, double b_hi, int l2)
{
    path_case c = {block, l2};
    gc_problem p = {.name = name, .fn = fn_path, .ctx = &c};
    int s4[4] = {B, T, H, Dh}, s3[3] = {B, T, H};
    gc_add_input(&p, "q", 4, s4, -1, 1, 1);
    gc_add_input(&p, "k", 4, s4, -1, 1, 2);
    gc_add_input(&p, "v", 4, s4, -1, 1, 3);
    gc_add_input(&p, "w", 4, s4, -w_scale, w_scale, 4);
    gc_add_input(&p, "beta", 3, s3, b_lo, b_hi, 5);
    if (T == 1) /* one frame: o = v, no score matters and no Householder factor is used */
        p.allow_zero_grad = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4);
    gc_check(&p); /* every element within 1e-8 + 1e-6 |g| */
    gc_free(&p);
}

static void test_kernel_grad(void **state)
{
    (void)state;
    /* blocks of 4: T 11 = 4 + 4 + 3, T 13 = 4 + 4 + 4 + 1; the layer's 32: T 67 = 32 + 32 + 3 */
    path_gradcheck("PaTH block 4, T 11, raw w", 4, 2, 11, 2, 3, 0.5, 0.1, 1.9, 0);
    path_gradcheck("PaTH block 4, T 13, L2 w, beta near 2", 4, 2, 13, 2, 4, 1, 1.8, 1.99, 1);
    path_gradcheck("PaTH block 4, T 2", 4, 1, 2, 2, 4, 0.5, 0.1, 1.9, 0);
    path_gradcheck("PaTH block 4, T 1", 4, 2, 1, 2, 3, 0.5, 0.1, 1.9, 0);
    path_gradcheck("PaTH block 32, T 67, L2 w, beta in (0, 2)", SB_PATH_ATTN_BLOCK, 1,
                   2 * SB_PATH_ATTN_BLOCK + 3, 1, 3, 1, 0.01, 1.99, 1);
    path_gradcheck("PaTH ref, T 13, raw w", 0, 2, 13, 2, 3, 0.5, 0.1, 1.9, 0);
    path_gradcheck("PaTH ref, T 1", 0, 2, 1, 2, 3, 0.5, 0.1, 1.9, 0);
    path_gradcheck("PaTH ref, T 40, L2 w, beta in (0, 2)", 0, 1, 40, 1, 5, 1, 0.01, 1.99, 1);
}

/* ---- blocked vs row by row: outputs and gradients -------------------------------------------- */

static real *fwd_bwd(const path_inputs *in, int block, size_t *n)
{
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 1;
    sb_tensor *t[5];
    sb_tensor *o = run_kernel(&g, in, t, block);
    real *dy = sb_tensor_grad(&g, o);
    for (size_t i = 0; i < o->size; i++)
        dy[i] = (real)sin(0.37 * (double)i + 1);
    sb_graph_backward(&g);
    *n = o->size * 5 + t[4]->size;
    real *res = malloc(*n * sizeof(real));
    assert_non_null(res);
    memcpy(res, o->data, o->size * sizeof(real));
    for (int i = 0; i < 5; i++)
        memcpy(res + o->size * (size_t)(i + 1), t[i]->grad, t[i]->size * sizeof(real));
    sb_graph_free(&g);
    return res;
}

static void test_blocked_vs_ref(void **state)
{
    (void)state;
    const int blocks[4] = {1, 5, SB_PATH_ATTN_BLOCK, 100};
    lcg = 13;
    path_inputs in;
    inputs_make(&in, 2, 71, 2, 6, 1, 0.01, 1.99, 1);
    size_t n0, n1;
    real *ref = fwd_bwd(&in, 0, &n0);
    for (int b = 0; b < 4; b++) {
        real *got = fwd_bwd(&in, blocks[b], &n1);
        assert_int_equal(n0, n1);
        const double e = test_max_rel_diff(got, ref, n0);
        print_message("block %d vs row by row, T 71: outputs and gradients, max rel diff %.3g\n",
                      blocks[b], e);
        if (!(e < 1e-13))
            fail_msg("block %d differs from the row-by-row form by %g", blocks[b], e);
        free(got);
    }
    free(ref);
    inputs_free(&in);
}

/* ---- beta = 0: plain attention -------------------------------------------------------------- */

static void test_beta_zero_is_attention(void **state)
{
    (void)state;
    lcg = 9;
    path_inputs in;
    inputs_make(&in, 2, 150, 2, 4, 1, 0, 0, 0); /* crosses attention.c's 128-query block */
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    sb_tensor *t[5];
    sb_tensor *o = run_kernel(&g, &in, t, SB_PATH_ATTN_BLOCK);
    sb_tensor *a = sb_attention_causal(&g, t[0], t[1], t[2]);
    double err = 0;
    for (size_t i = 0; i < o->size; i++)
        err = fmax(err, fabs((double)o->data[i] - (double)a->data[i]));
    if (!(err < 1e-13))
        fail_msg("beta = 0: PaTH differs from causal attention by %g", err);
    sb_graph_free(&g);
    inputs_free(&in);
}

/* ---- threads --------------------------------------------------------------------------------- */

static void test_threads(void **state)
{
    (void)state;
    real *res[2];
    size_t n = 0;
    for (int th = 0; th < 2; th++) {
        omp_set_num_threads(th + 1);
        lcg = 11;
        path_inputs in;
        inputs_make(&in, 3, 23, 2, 4, 1, 0.05, 1.95, 1);
        sb_graph g;
        sb_graph_init(&g, 1 << 20);
        g.record = 1;
        sb_tensor *t[5];
        sb_tensor *o = run_kernel(&g, &in, t, 8);
        real *dy = sb_tensor_grad(&g, o);
        for (size_t i = 0; i < o->size; i++)
            dy[i] = (real)sin(0.37 * (double)i + 1);
        sb_graph_backward(&g);
        n = o->size * 5 + t[4]->size;
        res[th] = malloc(n * sizeof(real));
        assert_non_null(res[th]);
        memcpy(res[th], o->data, o->size * sizeof(real));
        for (int i = 0; i < 5; i++)
            memcpy(res[th] + o->size * (size_t)(i + 1), t[i]->grad, t[i]->size * sizeof(real));
        sb_graph_free(&g);
        inputs_free(&in);
    }
    omp_set_num_threads(2);
    assert_memory_equal(res[0], res[1], n * sizeof(real));
    free(res[0]), free(res[1]);
}

/* ---- the whole RecNet against the mimic ------------------------------------------------------ */

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/path_attn/path_attn.json");
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-9};
    check_path_mimic(&f, &tol);
    /* parameter counts at both widths of the file */
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "path_attn");
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.n_layers = f.L;
    sb_error err = {0};
    const json_t *counts = json_object_get(f.root, "counts");
    assert_non_null(counts);
    const int widths[2] = {16, 32};
    for (int i = 0; i < 2; i++) {
        char key[8];
        snprintf(key, sizeof key, "%d", widths[i]);
        cfg.d_model = widths[i];
        cfg.n_head = sb_num_heads(widths[i]);
        size_t count = 0;
        if (sb_model_param_count(&cfg, &count, &err) != SB_OK)
            fail_msg("path_attn: %s", err.msg);
        assert_int_equal((long long)count, json_integer_value(json_object_get(counts, key)));
    }
    mimic_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_vs_plain), cmocka_unit_test(test_kernel_grad),
        cmocka_unit_test(test_blocked_vs_ref),  cmocka_unit_test(test_beta_zero_is_attention),
        cmocka_unit_test(test_threads),         cmocka_unit_test(test_mimic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

static void test_kernel_vs_plain(void **state)
{
    (void)state;
    const int B = 2, T = 300, H = 2, Dh = 8, ld = H * Dh;
    const size_t n = (size_t)B * T * ld, nb = (size_t)B * T * H;
    real *buf = malloc((4 * n + nb) * sizeof *buf);
    double *ref = malloc(n * sizeof *ref);
    assert_true(buf && ref);
    real *q = buf, *k = q + n, *v = k + n, *w = v + n, *beta = w + n;
    lcg = 3;
    for (size_t i = 0; i < 4 * n; i++)
        buf[i] = (real)urand(-1, 1);
    for (size_t r = 0; r < n / Dh; r++) { /* unit w, as the layer gives */
        double s = 0;
        for (int e = 0; e < Dh; e++)
            s += (double)w[r * Dh + e] * (double)w[r * Dh + e];
        for (int e = 0; e < Dh; e++)
            w[r * Dh + e] = (real)((double)w[r * Dh + e] / sqrt(s));
    }
    for (size_t i = 0; i < nb; i++)
        beta[i] = (real)urand(0, 2);
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    int s4[4] = {B, T, H, Dh}, s3[3] = {B, T, H};
    sb_tensor *o = sb_path_attn(&g, sb_tensor_wrap(&g, q, 4, s4), sb_tensor_wrap(&g, k, 4, s4),
                                sb_tensor_wrap(&g, v, 4, s4), sb_tensor_wrap(&g, w, 4, s4),
                                sb_tensor_wrap(&g, beta, 3, s3), SB_PATH_ATTN_BLOCK);
    path_plain(q, k, v, w, beta, B, T, H, Dh, ref);
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)o->data[i] - ref[i]);
        err = e <= err ? err : (isnan(e) ? (double)INFINITY : e);
    }
    print_message("float kernel vs double explicit products, T %d: max abs diff %.3g\n", T, err);
    if (!(err < 2e-5))
        fail_msg("float kernel differs from the double plain form by %g", err);
    sb_graph_free(&g);
    free(buf), free(ref);
}

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/path_attn/path_attn.json");
    /* the logits' relative error with the floor of the other float32 mimic tests (0.1):
     * with a floor of 1e-3 a logit near zero turned an absolute error of about 1e-7, float32
     * rounding of OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE=Haswell), into 1.07e-4 */
    const mimic_tolerances tol = {
        .sum_rtol = 1e-5, .first_rtol = 0, .logits_floor = 0.1, .logits_tol = 1e-4};
    check_path_mimic(&f, &tol);
    mimic_close(&f);
}

static void test_threads(void **state)
{
    (void)state;
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "path_attn");
    cfg.d_input = 5, cfg.d_output = 7, cfg.d_model = 16, cfg.n_layers = 2, cfg.n_head = 4;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, 7, &m, &err) != SB_OK)
        fail_msg("path_attn: %s", err.msg);
    check_threads_identical(m, 3, 41, "path_attn");
    sb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_vs_plain),
        cmocka_unit_test(test_mimic),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif

/*
 * test_dplr.c - the diagonal-plus-low-rank recurrence (src/ops/dplr.c) and the layers built on
 * it (kda, rwkv7). One source, built twice.
 *
 * test_dplr, the double build (SB_REAL_DOUBLE):
 *   - finite-difference gradients of sb_dplr in both orders, every input (q, k, v, w, a, b),
 *     V != K, lengths crossing the kept-state blocks with a ragged tail;
 *   - the same gradients whatever the block length (1, 5, 16, T);
 *   - the forward against plain recurrences written here: fla's naive_recurrent_kda (decay,
 *     then the delta update) and the generalized delta rule S = D S + b a^T S + k v^T;
 *   - streaming in two pieces == the whole sequence;
 *   - gradients of the elementwise blocks (KDA's gate, per-head scaling, products);
 *   - gradients of RWKV-7's blocks (token shift, per-channel scaling, GroupNorm, bonus);
 *   - rwkv7 in RecNet against its mimic (tests/data/models/rwkv7/rwkv7.json): names, shapes,
 *     initial sums to 1e-6 and first values to 1e-4 (orthogonal matrices), counts at d = 16
 *     and 32, float64 logits to 1e-9 with every parameter set by a formula (o_proj is zero at
 *     init, which would hide the layer);
 *   - kda in RecNet against the PyTorch mimic (tests/data/models/kda/kda.json): state_dict
 *     names, shapes, initial sums and first values bit for bit, counts at d = 16 and 32,
 *     float64 logits to 1e-9.
 * test_dplr_float, the float build: kda and rwkv7 against the same mimics (state_dict, initial
 * values as above, logits against the mimic's float64 forward to 1e-4), and the op itself
 * against the double-precision recurrence written in the test (float vs double, 1e-5).
 * The whole-model gradient and streaming checks are test_every_model's.
 */
#include <math.h>
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
#include "ops/ops_dplr.h"
#include "test_util.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

#ifdef SB_REAL_DOUBLE

/* ---- the op's gradients ------------------------------------------------------------------- */

typedef struct dplr_case {
    sb_dplr_order order;
    int chunk;
    real scale;
} dplr_case;

static sb_tensor *fn_dplr(sb_graph *g, sb_tensor **in, void *ctx)
{
    const dplr_case *c = ctx;
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], c->scale, c->order, c->chunk, NULL);
}

/* B = 2, H = 2, K = 3, V = 4 */
static void add_dplr_inputs(gc_problem *p, int T)
{
    int ks[4] = {2, T, 2, 3}, vs[4] = {2, T, 2, 4};
    gc_add_input(p, "q", 4, ks, -1, 1, 1);
    gc_add_input(p, "k", 4, ks, -1, 1, 2);
    gc_add_input(p, "v", 4, vs, -1, 1, 3);
    gc_add_input(p, "w", 4, ks, -1.2, 0.1, 4);
    gc_add_input(p, "a", 4, ks, -0.6, 0.6, 5);
    gc_add_input(p, "b", 4, ks, -0.6, 0.6, 6);
}

static double dplr_gradcheck(sb_dplr_order order, int chunk, int T)
{
    char name[96];
    snprintf(name, sizeof name, "dplr order %d chunk %d T %d", (int)order, chunk, T);
    dplr_case c = {order, chunk, 0.7};
    gc_problem p = {.name = name, .fn = fn_dplr, .ctx = &c, .rtol = 1e-6};
    add_dplr_inputs(&p, T);
    double e = gc_check(&p);
    gc_free(&p);
    return e;
}

static void test_dplr_grad(void **state)
{
    (void)state;
    double worst = 0;
    for (int order = 0; order < 2; order++) {
        /* blocks of 5 over 13 tokens (5 + 5 + 3), and the layers' block over 37 (16 + 16 + 5) */
        double e1 = dplr_gradcheck((sb_dplr_order)order, 5, 13);
        double e2 = dplr_gradcheck((sb_dplr_order)order, SB_DPLR_CHUNK, 37);
        worst = fmax(worst, fmax(e1, e2));
    }
    print_message("dplr: worst relative gradient error %.3g\n", worst);
}

/* One forward + backward with a fixed output gradient; returns o then every input gradient. */
static double *dplr_grads(sb_dplr_order order, int chunk, int T, size_t *count)
{
    gc_problem p = {.name = "dplr"};
    add_dplr_inputs(&p, T);
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 1;
    sb_tensor *in[6];
    for (int i = 0; i < 6; i++) {
        in[i] = sb_tensor_wrap(&g, p.inputs[i].tensor.data, 4, p.inputs[i].tensor.shape);
        in[i]->requires_grad = 1;
    }
    sb_tensor *o = sb_dplr(&g, in[0], in[1], in[2], in[3], in[4], in[5], 0.7, order, chunk, NULL);
    real *dO = sb_tensor_grad(&g, o);
    for (size_t i = 0; i < o->size; i++)
        dO[i] = sin(0.37 * (double)i + 0.1);
    sb_graph_backward(&g);
    size_t n = o->size;
    for (int i = 0; i < 6; i++)
        n += in[i]->size;
    double *out = malloc(n * sizeof *out);
    assert_non_null(out);
    size_t at = 0;
    for (size_t i = 0; i < o->size; i++)
        out[at++] = o->data[i];
    for (int i = 0; i < 6; i++)
        for (size_t j = 0; j < in[i]->size; j++)
            out[at++] = in[i]->grad[j];
    *count = n;
    sb_graph_free(&g);
    gc_free(&p);
    return out;
}

static void test_dplr_block_length(void **state)
{
    (void)state;
    const int T = 23, chunks[3] = {5, 16, 23};
    for (int order = 0; order < 2; order++) {
        size_t n0, n1;
        double *ref = dplr_grads((sb_dplr_order)order, 1, T, &n0);
        for (int c = 0; c < 3; c++) {
            double *got = dplr_grads((sb_dplr_order)order, chunks[c], T, &n1);
            assert_int_equal(n0, n1);
            for (size_t i = 0; i < n0; i++)
                if (fabs(got[i] - ref[i]) > 1e-12 * (1 + fabs(ref[i])))
                    fail_msg("order %d chunk %d: value %zu %.17g vs %.17g", order, chunks[c], i,
                             got[i], ref[i]);
            free(got);
        }
        free(ref);
    }
}

/* ---- the forward against plain recurrences ------------------------------------------------ */

enum { RB = 2, RT = 19, RH = 2, RK = 3, RV = 4 };

static double urand(unsigned *s, double lo, double hi)
{
    *s = *s * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(*s >> 8) / 16777216.0;
}

static void fill(real *x, size_t n, unsigned seed, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = urand(&seed, lo, hi);
}

/* fla's naive_recurrent_kda for one (b, h): S *= exp(g); S += beta k (v - S^T k)^T;
 * o = scale S^T q. q, k, g rows of stride H K, v and o of stride H V, beta of stride H. */
static void naive_kda(const real *q, const real *k, const real *v, const real *g, const real *beta,
                      double scale, double *o)
{
    double S[RK][RV] = {{0}};
    for (int t = 0; t < RT; t++) {
        const real *qt = q + t * RH * RK, *kt = k + t * RH * RK, *gt = g + t * RH * RK;
        const real *vt = v + t * RH * RV;
        for (int c = 0; c < RK; c++)
            for (int x = 0; x < RV; x++)
                S[c][x] *= exp(gt[c]);
        double u[RV];
        for (int x = 0; x < RV; x++) {
            u[x] = vt[x];
            for (int c = 0; c < RK; c++)
                u[x] -= kt[c] * S[c][x];
        }
        for (int c = 0; c < RK; c++)
            for (int x = 0; x < RV; x++)
                S[c][x] += beta[t * RH] * kt[c] * u[x];
        for (int x = 0; x < RV; x++) {
            double s = 0;
            for (int c = 0; c < RK; c++)
                s += qt[c] * S[c][x];
            o[t * RV + x] = scale * s;
        }
    }
}

/* the generalized delta rule: S = diag(exp(w)) S + b (a^T S) + k v^T, o = scale S^T q */
static void naive_gdr(const real *q, const real *k, const real *v, const real *w, const real *a,
                      const real *b, double scale, double *o)
{
    double S[RK][RV] = {{0}};
    for (int t = 0; t < RT; t++) {
        const size_t r = (size_t)t * RH * RK;
        const real *vt = v + t * RH * RV;
        double z[RV] = {0}, N[RK][RV];
        for (int c = 0; c < RK; c++)
            for (int x = 0; x < RV; x++)
                z[x] += a[r + c] * S[c][x];
        for (int c = 0; c < RK; c++)
            for (int x = 0; x < RV; x++)
                N[c][x] = exp(w[r + c]) * S[c][x] + b[r + c] * z[x] + k[r + c] * vt[x];
        memcpy(S, N, sizeof S);
        for (int x = 0; x < RV; x++) {
            double s = 0;
            for (int c = 0; c < RK; c++)
                s += q[r + c] * S[c][x];
            o[t * RV + x] = scale * s;
        }
    }
}

static void test_dplr_vs_naive(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    const int ks[4] = {RB, RT, RH, RK}, vs[4] = {RB, RT, RH, RV}, hs[3] = {RB, RT, RH};
    sb_tensor *q = sb_tensor_new(&g, 4, ks), *k = sb_tensor_new(&g, 4, ks);
    sb_tensor *v = sb_tensor_new(&g, 4, vs), *w = sb_tensor_new(&g, 4, ks);
    sb_tensor *a = sb_tensor_new(&g, 4, ks), *b = sb_tensor_new(&g, 4, ks);
    sb_tensor *beta = sb_tensor_new(&g, 3, hs);
    fill(q->data, q->size, 1, -1, 1), fill(k->data, k->size, 2, -1, 1);
    fill(v->data, v->size, 3, -1, 1), fill(w->data, w->size, 4, -1, 0);
    fill(a->data, a->size, 5, -0.5, 0.5), fill(b->data, b->size, 6, -0.5, 0.5);
    fill(beta->data, beta->size, 7, 0, 1);
    const double scale = 1 / sqrt((double)RK);
    /* KDA: a = k, b = -beta k, written key beta k, decayed order */
    sb_tensor *kb = sb_dplr_scale_heads(&g, k, beta, 1);
    sb_tensor *nb = sb_dplr_scale_heads(&g, kb, NULL, -1);
    sb_tensor *o_kda = sb_dplr(&g, q, kb, v, w, k, nb, scale, SB_DPLR_DECAYED, 4, NULL);
    sb_tensor *o_gdr = sb_dplr(&g, q, k, v, w, a, b, scale, SB_DPLR_UNDECAYED, 4, NULL);
    double worst_kda = 0, worst_gdr = 0;
    for (int bb = 0; bb < RB; bb++)
        for (int h = 0; h < RH; h++) {
            const size_t ko = ((size_t)bb * RT * RH + h) * RK, vo = ((size_t)bb * RT * RH + h) * RV;
            double ref[RT * RV];
            naive_kda(q->data + ko, k->data + ko, v->data + vo, w->data + ko,
                      beta->data + (size_t)bb * RT * RH + h, scale, ref);
            for (int t = 0; t < RT; t++)
                for (int x = 0; x < RV; x++)
                    worst_kda = fmax(worst_kda, fabs(o_kda->data[vo + (size_t)t * RH * RV + x] -
                                                     ref[t * RV + x]));
            naive_gdr(q->data + ko, k->data + ko, v->data + vo, w->data + ko, a->data + ko,
                      b->data + ko, scale, ref);
            for (int t = 0; t < RT; t++)
                for (int x = 0; x < RV; x++)
                    worst_gdr = fmax(worst_gdr, fabs(o_gdr->data[vo + (size_t)t * RH * RV + x] -
                                                     ref[t * RV + x]));
        }
    print_message("dplr vs naive: kda %.3g, generalized delta rule %.3g\n", worst_kda, worst_gdr);
    assert_true(worst_kda < 1e-12);
    assert_true(worst_gdr < 1e-12);
    /* the two orders differ (the test would not see a swapped order otherwise) */
    sb_tensor *o_other = sb_dplr(&g, q, kb, v, w, k, nb, scale, SB_DPLR_UNDECAYED, 4, NULL);
    double gap = 0;
    for (size_t i = 0; i < o_kda->size; i++)
        gap = fmax(gap, fabs(o_other->data[i] - o_kda->data[i]));
    assert_true(gap > 1e-3);
    sb_graph_free(&g);
}

static void test_dplr_stream(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    const int T = 21, T1 = 8;
    for (int order = 0; order < 2; order++) {
        const int whole[4] = {RB, T, RH, RK}, wv[4] = {RB, T, RH, RV};
        sb_tensor *in[6];
        for (int i = 0; i < 6; i++) {
            in[i] = sb_tensor_new(&g, 4, i == 2 ? wv : whole);
            fill(in[i]->data, in[i]->size, 10 + (unsigned)i, i == 3 ? -1 : -0.6, i == 3 ? 0 : 0.6);
        }
        sb_tensor *o = sb_dplr(&g, in[0], in[1], in[2], in[3], in[4], in[5], 0.5,
                               (sb_dplr_order)order, SB_DPLR_CHUNK, NULL);
        real state_buf[RB * RH * RK * RV] = {0};
        double worst = 0;
        for (int piece = 0; piece < 2; piece++) {
            const int t0 = piece == 0 ? 0 : T1, n = piece == 0 ? T1 : T - T1;
            sb_tensor *part[6];
            for (int i = 0; i < 6; i++) {
                const int D = i == 2 ? RV : RK, shape[4] = {RB, n, RH, D};
                part[i] = sb_tensor_new(&g, 4, shape);
                for (int bb = 0; bb < RB; bb++)
                    memcpy(part[i]->data + (size_t)bb * n * RH * D,
                           in[i]->data + ((size_t)bb * T + t0) * RH * D,
                           (size_t)n * RH * D * sizeof(real));
            }
            sb_tensor *op = sb_dplr(&g, part[0], part[1], part[2], part[3], part[4], part[5], 0.5,
                                    (sb_dplr_order)order, SB_DPLR_CHUNK, state_buf);
            for (int bb = 0; bb < RB; bb++)
                for (size_t i = 0; i < (size_t)n * RH * RV; i++)
                    worst = fmax(worst, fabs(op->data[(size_t)bb * n * RH * RV + i] -
                                             o->data[((size_t)bb * T + t0) * RH * RV + i]));
        }
        assert_true(worst < 1e-13);
    }
    sb_graph_free(&g);
}

/* ---- the elementwise blocks --------------------------------------------------------------- */

static sb_tensor *fn_kda_gate(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_kda_gate(g, in[0], in[1], in[2]);
}

static sb_tensor *fn_scale_heads(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_dplr_scale_heads(g, in[0], in[1], -0.8);
}

static sb_tensor *fn_mul(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_dplr_mul(g, in[0], in[1], 1.3);
}

static sb_tensor *fn_token_shift(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_token_shift(g, in[0], NULL);
}

static sb_tensor *fn_rowmul(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_dplr_rowmul(g, in[0], in[1]);
}

static sb_tensor *fn_group_norm(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_group_norm(g, in[0], 3, in[1], in[2], 0.05);
}

static sb_tensor *fn_bonus(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rwkv7_bonus(g, in[0], in[1], in[2], in[3], 2);
}

static void test_rwkv_blocks_grad(void **state)
{
    (void)state;
    {
        gc_problem p = {.name = "token shift", .fn = fn_token_shift};
        int xs[3] = {2, 5, 3};
        gc_add_input(&p, "x", 3, xs, -1, 1, 1);
        gc_check(&p);
        gc_free(&p);
    }
    {
        gc_problem p = {.name = "rowmul", .fn = fn_rowmul};
        int xs[3] = {2, 5, 4}, ws[1] = {4};
        gc_add_input(&p, "x", 3, xs, -1, 1, 1);
        gc_add_input(&p, "w", 1, ws, -1, 1, 2);
        gc_check(&p);
        gc_free(&p);
    }
    {
        gc_problem p = {.name = "group norm", .fn = fn_group_norm};
        int xs[3] = {2, 4, 6}, ws[1] = {6};
        gc_add_input(&p, "x", 3, xs, -1, 1, 1);
        gc_add_input(&p, "weight", 1, ws, 0.5, 1.5, 2);
        gc_add_input(&p, "bias", 1, ws, -1, 1, 3);
        gc_check(&p);
        gc_free(&p);
    }
    {
        gc_problem p = {.name = "rwkv7 bonus", .fn = fn_bonus};
        int ks[3] = {2, 4, 6}, us[1] = {6}, vs[3] = {2, 4, 8};
        gc_add_input(&p, "r", 3, ks, -1, 1, 1);
        gc_add_input(&p, "k", 3, ks, -1, 1, 2);
        gc_add_input(&p, "u", 1, us, -1, 1, 3);
        gc_add_input(&p, "v", 3, vs, -1, 1, 4);
        gc_check(&p);
        gc_free(&p);
    }
}

static void test_blocks_grad(void **state)
{
    (void)state;
    {
        gc_problem p = {.name = "kda gate", .fn = fn_kda_gate};
        int fs[3] = {2, 5, 6}, hs[1] = {2}, ds[1] = {6};
        gc_add_input(&p, "f", 3, fs, -4, 4, 1);
        gc_add_input(&p, "A_log", 1, hs, -1, 2, 2);
        gc_add_input(&p, "dt_bias", 1, ds, -3, 1, 3);
        gc_check(&p);
        gc_free(&p);
    }
    {
        gc_problem p = {.name = "scale heads", .fn = fn_scale_heads};
        int xs[4] = {2, 5, 2, 3}, ss[3] = {2, 5, 2};
        gc_add_input(&p, "x", 4, xs, -1, 1, 1);
        gc_add_input(&p, "s", 3, ss, 0, 1, 2);
        gc_check(&p);
        gc_free(&p);
    }
    {
        gc_problem p = {.name = "mul", .fn = fn_mul};
        int xs[3] = {2, 5, 4};
        gc_add_input(&p, "x", 3, xs, -1, 1, 1);
        gc_add_input(&p, "z", 3, xs, -1, 1, 2);
        gc_check(&p);
        gc_free(&p);
    }
}

/* ---- the layers against their PyTorch mimics ---------------------------------------------- */

static sb_model *make_model(const char *name, int D, int H, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L, cfg.n_head = H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    return m;
}

/* parameter counts at d = 16 and 32 from the configuration alone, against the mimic's */
static void check_counts(const char *name, const char *path)
{
    mimic_file f;
    mimic_open(&f, path);
    const json_t *counts = json_object_get(f.root, "counts");
    const int widths[2] = {16, 32};
    for (int i = 0; i < 2; i++) {
        char key[8];
        snprintf(key, sizeof key, "%d", widths[i]);
        sb_model_config cfg = {0};
        snprintf(cfg.model, sizeof cfg.model, "%s", name);
        cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = widths[i], cfg.n_layers = f.L;
        cfg.n_head = sb_num_heads(widths[i]);
        size_t n = 0;
        sb_error err = {0};
        assert_int_equal(sb_model_param_count(&cfg, &n, &err), SB_OK);
        const long long want = json_integer_value(json_object_get(counts, key));
        if ((long long)n != want)
            fail_msg("%s d=%d: %zu parameters, the mimic has %lld", name, widths[i], n, want);
    }
    mimic_close(&f);
}

static void check_model_mimic(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "models/%s/%s.json", name, name);
    mimic_file f;
    mimic_open(&f, path);
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-9};
    sb_model *m = make_model(name, f.D, f.H, f.I, f.O, f.L, f.seed);
    check_against_mimic(mimic_model(&f, name), m, &f, &tol, name);
    sb_model_free(m);
    mimic_close(&f);
    check_counts(name, path);
}

static void test_kda_mimic(void **state)
{
    (void)state;
    check_model_mimic("kda");
}

/* The mimic's set_formula_weights: tensor ti (state_dict order), element j:
 * 0.2 sin(0.7 j + 1.3 ti + 0.2), + 1 for the norms' weights. */
static void set_formula_weights(sb_model *m)
{
    for (int ti = 0; ti < m->params.n; ti++) {
        sb_param *p = &m->params.p[ti];
        const size_t len = strlen(p->name);
        const int norm_weight =
            strstr(p->name, "norm") != NULL && len >= 6 && strcmp(p->name + len - 6, "weight") == 0;
        for (size_t j = 0; j < p->size; j++)
            p->tensor.data[j] = 0.2 * sin(0.7 * (double)j + 1.3 * ti + 0.2) + (norm_weight ? 1 : 0);
    }
}

/* RWKV-7: the initial values include orthogonal matrices (a QR that rounds differently from
 * LAPACK's float32 one: ~5e-8 absolute), so sums are compared to 1e-6 and first values to 1e-4
 * relative; the layer's output is zero at init (o_proj = 0), so the logits are compared with the
 * formula weights. */
static void test_rwkv7_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/rwkv7/rwkv7.json");
    const json_t *ref = mimic_model(&f, "rwkv7");
    sb_model *m = make_model("rwkv7", f.D, f.H, f.I, f.O, f.L, f.seed);
    check_mimic_layout(ref, m, "rwkv7");
    check_mimic_sum_and_first(ref, m, 1e-6, 1e-4, "rwkv7");
    set_formula_weights(m);
    double e = check_mimic_logits(ref, m, &f, 1e-3, 1e-9, "rwkv7");
    print_message("rwkv7: logits relative error %.3g\n", e);
    sb_model_free(m);
    mimic_close(&f);
    check_counts("rwkv7", "models/rwkv7/rwkv7.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dplr_grad),     cmocka_unit_test(test_dplr_block_length),
        cmocka_unit_test(test_dplr_vs_naive), cmocka_unit_test(test_dplr_stream),
        cmocka_unit_test(test_blocks_grad),   cmocka_unit_test(test_rwkv_blocks_grad),
        cmocka_unit_test(test_kda_mimic),     cmocka_unit_test(test_rwkv7_mimic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

static void check_model_mimic(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "models/%s/%s.json", name, name);
    mimic_file f;
    mimic_open(&f, path);
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-4};
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = f.D, cfg.n_layers = f.L, cfg.n_head = f.H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    check_against_mimic(mimic_model(&f, name), m, &f, &tol, name);
    sb_model_free(m);
    mimic_close(&f);
}

static void test_kda_mimic_float(void **state)
{
    (void)state;
    check_model_mimic("kda");
}

/* float op against a double recurrence of the undecayed order over 40 tokens */
static void test_dplr_float_vs_double(void **state)
{
    (void)state;
    enum { T = 40, K = 5, V = 6 };
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    const int ks[4] = {1, T, 1, K}, vs[4] = {1, T, 1, V};
    sb_tensor *in[6];
    unsigned s = 9;
    for (int i = 0; i < 6; i++) {
        in[i] = sb_tensor_new(&g, 4, i == 2 ? vs : ks);
        for (size_t j = 0; j < in[i]->size; j++) {
            s = s * 1664525u + 1013904223u;
            const double u = (double)(s >> 8) / 16777216.0;
            in[i]->data[j] = (real)(i == 3 ? -u : (i >= 4 ? 0.8 * (u - 0.5) : 2 * u - 1));
        }
    }
    for (int order = 0; order < 2; order++) {
        sb_tensor *o = sb_dplr(&g, in[0], in[1], in[2], in[3], in[4], in[5], 1,
                               (sb_dplr_order)order, SB_DPLR_CHUNK, NULL);
        double S[K][V] = {{0}}, worst = 0;
        for (int t = 0; t < T; t++) {
            const real *q = in[0]->data + t * K, *k = in[1]->data + t * K;
            const real *v = in[2]->data + t * V, *w = in[3]->data + t * K;
            const real *a = in[4]->data + t * K, *b = in[5]->data + t * K;
            double P[K][V], z[V] = {0};
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    P[c][x] = order == SB_DPLR_DECAYED ? exp((double)w[c]) * S[c][x] : S[c][x];
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    z[x] += (double)a[c] * P[c][x];
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    S[c][x] = exp((double)w[c]) * S[c][x] + (double)b[c] * z[x] +
                              (double)k[c] * (double)v[x];
            for (int x = 0; x < V; x++) {
                double r = 0;
                for (int c = 0; c < K; c++)
                    r += (double)q[c] * S[c][x];
                worst = fmax(worst, fabs(r - (double)o->data[t * V + x]));
            }
        }
        print_message("dplr order %d: float vs double %.3g\n", order, worst);
        assert_true(worst < 1e-5);
    }
    sb_graph_free(&g);
}

static void test_rwkv7_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/rwkv7/rwkv7.json");
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "rwkv7");
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = f.D, cfg.n_layers = f.L, cfg.n_head = f.H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
        fail_msg("rwkv7: %s", err.msg);
    const json_t *ref = mimic_model(&f, "rwkv7");
    check_mimic_layout(ref, m, "rwkv7");
    check_mimic_sum_and_first(ref, m, 1e-6, 1e-4, "rwkv7");
    /* the mimic's set_formula_weights (see test_dplr.c) */
    for (int ti = 0; ti < m->params.n; ti++) {
        sb_param *p = &m->params.p[ti];
        const size_t len = strlen(p->name);
        const int nw =
            strstr(p->name, "norm") != NULL && len >= 6 && strcmp(p->name + len - 6, "weight") == 0;
        for (size_t j = 0; j < p->size; j++)
            p->tensor.data[j] = (real)(0.2 * sin(0.7 * (double)j + 1.3 * ti + 0.2) + (nw ? 1 : 0));
    }
    check_mimic_logits(ref, m, &f, 1e-3, 1e-4, "rwkv7");
    sb_model_free(m);
    mimic_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dplr_float_vs_double),
        cmocka_unit_test(test_kda_mimic_float),
        cmocka_unit_test(test_rwkv7_mimic_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif

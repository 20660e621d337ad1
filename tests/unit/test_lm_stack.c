/*
 * test_lm_stack.c - the *_layered models (the LM stack, docs/models/layered.md). One source,
 * built twice.
 *
 * test_lm_stack, the double build (SB_REAL_DOUBLE):
 *   - kernel K4 (forgetting attention): blocked form == plain form (forward and gradients,
 *     several query blocks, large cumulative gates), both against finite differences;
 *   - GatedMLP and the stack's full-width RMSNorm against finite differences;
 *   - each stacked model: the gradient of every parameter tensor against central differences
 *     along random directions (the 256-wide MLPs make element-wise checks of whole models too
 *     slow), sequences crossing the mixers' chunks, parameters moved off their initial values;
 *   - parameter counts == the spec's tables at every listed width, refused sizes;
 *   - names, shapes, order and initial values (bit for bit) and logits against a pure-PyTorch
 *     mimic (tests/data/layered/make_layered_mimic.py: fla construction order, transformers'
 *     post_init replayed);
 *   - the distributions of the initialisation (the stack's _init_weights), the initial
 *     cross-entropy (ln C);
 *   - torch's normal_ draws (AVX2 kernel, small-tensor path) against torch's values;
 *   - streaming == whole sequence (recurrent mixers), the evaluation path == training path;
 *   - checkpoints with the reference state_dict names.
 * test_lm_stack_float, the float build (the one that trains):
 *   - initial weights bit for bit and logits against the float64 PyTorch mimic
 *     (tests/data/layered/layered_mimic.json);
 *   - kernel K4 in float: the blocked form (fast exp, per-block gate reference) against the
 *     plain form on long sequences whose cumulative gates reach -2000;
 *   - one training step on 1 and on 2 threads: identical logits and gradients.
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

#include "config/run_config.h"
#include "core/safetensors.h"
#include "model/model.h"
#include "model_checks.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_layered.h"
#include "test_util.h"
#include "train/checkpoint.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

static const char *const names[4] = {"gla_layered", "delta_net_layered", "gated_delta_net_layered",
                                     "fox_layered"};

static sb_model *make_model(const char *name, int D, int F, int C, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = F, cfg.d_output = C, cfg.d_model = D, cfg.n_layers = L;
    cfg.n_head = sb_num_heads(D);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    return m;
}

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

#ifdef SB_REAL_DOUBLE

/* lm_stack.c */
int sb_lm_stack_mlp_width(int D);
void sb_torch_normal(sb_mt19937 *rng, int *cache_valid, double *cache, real *out, size_t n,
                     double mean, double std);

/* ---- kernel K4 ------------------------------------------------------------------------------- */

static sb_tensor *fn_k4(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_forgetting_attn(g, in[0], in[1], in[2], in[3]);
}

static sb_tensor *fn_k4_ref(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_forgetting_attn_ref(g, in[0], in[1], in[2], in[3]);
}

static void k4_gradcheck(gc_fn fn, const char *title, int B, int T, int H, int Dh)
{
    gc_problem p = {.name = title, .fn = fn};
    int qs[4] = {B, T, H, Dh}, fs[3] = {B, T, H};
    gc_add_input(&p, "q", 4, qs, -1, 1, 1);
    gc_add_input(&p, "k", 4, qs, -1, 1, 2);
    gc_add_input(&p, "v", 4, qs, -1, 1, 3);
    gc_add_input(&p, "f", 3, fs, -1.5, -0.01, 4); /* log forget gates */
    gc_check(&p);
    gc_free(&p);
}

static void test_k4_grad(void **state)
{
    (void)state;
    k4_gradcheck(fn_k4, "K4 blocked, one block", 2, 7, 3, 3);
    k4_gradcheck(fn_k4, "K4 blocked, T = 133 (two query blocks)", 1, 133, 2, 2);
    k4_gradcheck(fn_k4_ref, "K4 plain", 2, 9, 2, 3);
}

/* blocked == plain for the output and every gradient, over three query blocks and with
 * cumulative gates reaching -1000 (the blocked form's per-block reference point) */
static void test_k4_blocked_vs_plain(void **state)
{
    (void)state;
    const int B = 2, T = 300, H = 2, Dh = 4;
    int qs[4] = {B, T, H, Dh}, fs[3] = {B, T, H};
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    g.record = 1;
    sb_tensor *in[2][4];
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 4; i++)
            in[v][i] = sb_tensor_new(&g, i < 3 ? 4 : 3, i < 3 ? qs : fs);
    lcg = 99;
    for (int i = 0; i < 4; i++)
        for (size_t e = 0; e < in[0][i]->size; e++) {
            in[0][i]->data[e] = i < 3 ? urand(-2, 2) : urand(-6, -0.001);
            in[1][i]->data[e] = in[0][i]->data[e];
        }
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 4; i++)
            in[v][i]->requires_grad = 1;
    sb_tensor *o[2];
    o[0] = sb_forgetting_attn(&g, in[0][0], in[0][1], in[0][2], in[0][3]);
    o[1] = sb_forgetting_attn_ref(&g, in[1][0], in[1][1], in[1][2], in[1][3]);
    double worst = 0;
    for (size_t e = 0; e < o[0]->size; e++)
        worst = fmax(worst, fabs((double)o[0]->data[e] - (double)o[1]->data[e]));
    if (!(worst < 1e-13))
        fail_msg("K4 blocked and plain outputs differ by %g", worst);
    for (int v = 0; v < 2; v++) {
        real *d = sb_tensor_grad(&g, o[v]);
        for (size_t e = 0; e < o[v]->size; e++)
            d[e] = (real)sin(0.7 * (double)e + 0.3);
    }
    sb_graph_backward(&g);
    for (int i = 0; i < 4; i++) {
        double w = 0, scale = 0;
        for (size_t e = 0; e < in[0][i]->size; e++) {
            w = fmax(w, fabs((double)in[0][i]->grad[e] - (double)in[1][i]->grad[e]));
            scale = fmax(scale, fabs(in[1][i]->grad[e]));
        }
        if (!(w <= 1e-12 * (1 + scale)) || !(scale > 0))
            fail_msg("K4 blocked and plain gradients of input %d differ by %g (scale %g)", i, w,
                     scale);
    }
    sb_graph_free(&g);
}

/* ---- GatedMLP and the stack's norm ----------------------------------------------------------- */

static sb_tensor *fn_mlp(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_gated_mlp(g, in[0], in[1], in[2], in[3]);
}

static sb_tensor *fn_norm(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rmsnorm_gated(g, in[0], NULL, in[1], (real)1e-6);
}

static void test_mlp_norm_grad(void **state)
{
    (void)state;
    const int D = 5, W = 7;
    gc_problem p = {.name = "GatedMLP", .fn = fn_mlp};
    int zs[3] = {2, 3, D}, ws[2] = {W, D}, ds[2] = {D, W};
    gc_add_input(&p, "z", 3, zs, -1.5, 1.5, 1);
    gc_add_input(&p, "gate_proj", 2, ws, -1, 1, 2);
    gc_add_input(&p, "up_proj", 2, ws, -1, 1, 3);
    gc_add_input(&p, "down_proj", 2, ds, -1, 1, 4);
    gc_check(&p);
    gc_free(&p);
    gc_problem q = {.name = "RMSNorm over the full width, eps 1e-6", .fn = fn_norm};
    int xs[3] = {2, 4, 6}, wn[1] = {6};
    gc_add_input(&q, "x", 3, xs, -1, 1, 5);
    gc_add_input(&q, "w", 1, wn, 0.5, 1.5, 6);
    gc_check(&q);
    gc_free(&q);
}

/* ---- whole models: directional derivative of every parameter tensor -------------------------- */

/* Moves every parameter off its initial value (norm weights around 1, the rest by a small
 * relative amount plus noise), so that gates, biases and norm weights matter. */
static void perturb(sb_model *m)
{
    for (int i = 0; i < m->params.n; i++) {
        sb_param *p = &m->params.p[i];
        const int is_norm = strstr(p->name, "norm") != NULL;
        for (size_t k = 0; k < p->size; k++) {
            real *v = &p->tensor.data[k];
            *v = is_norm ? urand(0.6, 1.4) : *v * urand(0.8, 1.2) + urand(-0.1, 0.1);
        }
    }
}

static double loss_of(sb_model *m, sb_graph *g, sb_tensor *x, const double *r)
{
    sb_graph_reset(g);
    g->record = 0;
    sb_tensor *y = sb_model_forward(g, m, x);
    double s = 0;
    for (size_t i = 0; i < y->size; i++)
        s += y->data[i] * r[i];
    return s;
}

static void model_dircheck(const char *name, int D, int T)
{
    const int F = 3, C = 5, L = 2, B = 2;
    sb_model *m = make_model(name, D, F, C, L, 5);
    lcg = 17;
    perturb(m);
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int xs[3] = {B, T, F};
    real *xd = malloc((size_t)B * T * F * sizeof *xd);
    for (int i = 0; i < B * T * F; i++)
        xd[i] = urand(-1, 1);
    sb_tensor x = {
        .data = xd, .ndim = 3, .shape = {xs[0], xs[1], xs[2]}, .size = (size_t)B * T * F};
    const size_t ny = (size_t)B * T * C;
    double *r = malloc(ny * sizeof *r);
    for (size_t i = 0; i < ny; i++)
        r[i] = sin(0.37 * (double)i + 1);
    /* analytic gradients */
    sb_params *ps = &m->params;
    sb_params_zero_grad(ps);
    sb_graph_reset(&g);
    g.record = 1;
    sb_tensor *y = sb_model_forward(&g, m, &x);
    real *dy = sb_tensor_grad(&g, y);
    for (size_t i = 0; i < ny; i++)
        dy[i] = (real)r[i];
    sb_graph_backward(&g);
    real *grad = malloc(ps->total * sizeof *grad);
    memcpy(grad, ps->grad, ps->total * sizeof *grad);
    const double eps = 4e-6;
    double worst = 0;
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = &ps->p[i];
        real *w = ps->data + p->offset;
        const real *gw = grad + p->offset;
        double gmax = 0;
        for (size_t k = 0; k < p->size; k++)
            gmax = fmax(gmax, fabs(gw[k]));
        if (!(gmax > 0))
            fail_msg("%s: the gradient of %s is zero", name, p->name);
        real *saved = malloc(p->size * sizeof *saved), *dir = malloc(p->size * sizeof *dir);
        memcpy(saved, w, p->size * sizeof *saved);
        for (int rep = 0; rep < 2; rep++) {
            double norm = 0, an = 0;
            for (size_t k = 0; k < p->size; k++) {
                dir[k] = urand(-1, 1);
                norm += dir[k] * dir[k];
            }
            norm = sqrt(norm);
            for (size_t k = 0; k < p->size; k++) {
                dir[k] /= norm;
                an += gw[k] * dir[k];
            }
            /* central differences at eps and eps / 2, Richardson-extrapolated: the small
             * L2-normalised heads make some directions strongly curved */
            double fd2[2];
            for (int h = 0; h < 2; h++) {
                const double e = h == 0 ? eps : eps / 2;
                for (size_t k = 0; k < p->size; k++)
                    w[k] = saved[k] + e * dir[k];
                const double lp = loss_of(m, &g, &x, r);
                for (size_t k = 0; k < p->size; k++)
                    w[k] = saved[k] - e * dir[k];
                const double lm = loss_of(m, &g, &x, r);
                fd2[h] = (lp - lm) / (2 * e);
            }
            memcpy(w, saved, p->size * sizeof *saved);
            const double fd = (4 * fd2[1] - fd2[0]) / 3, err = fabs(fd - an);
            worst = fmax(worst, err / (1e-8 + 1e-6 * fabs(an)));
            if (!(err <= 1e-8 + 1e-6 * fabs(an)))
                fail_msg("%s, T = %d: d/d%s along a random direction: backward %.12g, finite "
                         "differences %.12g",
                         name, T, p->name, an, fd);
        }
        free(saved);
        free(dir);
    }
    print_message("  %s, T = %d: %d parameter tensors, worst error %.3g of the tolerance\n", name,
                  T, ps->n, worst);
    free(grad);
    free(r);
    free(xd);
    sb_graph_free(&g);
    sb_model_free(m);
}

static void test_grad_gla(void **state)
{
    (void)state;
    model_dircheck("gla_layered", 8, 2 * SB_LINEAR_ATTN_CHUNK + 3);
}

static void test_grad_delta_net(void **state)
{
    (void)state;
    /* D = 32: heads of width 2 (at width 1 the L2 norm is a sign function, too sharp for
     * finite differences) */
    model_dircheck("delta_net_layered", 32, 2 * SB_DELTA_RULE_CHUNK + 3);
}

static void test_grad_gated_delta_net(void **state)
{
    (void)state;
    model_dircheck("gated_delta_net_layered", 8, 2 * SB_DELTA_RULE_CHUNK + 3);
}

static void test_grad_fox(void **state)
{
    (void)state;
    model_dircheck("fox_layered", 32, 131); /* two query blocks of K4 */
}

/* ---- parameter counts ------------------------------------------------------------------------ */

static size_t count(const char *name, int D, int L, sb_status *st)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = 41, cfg.d_output = 1601, cfg.d_model = D, cfg.n_layers = L;
    cfg.n_head = sb_num_heads(D);
    size_t n = 0;
    sb_error err = {0};
    *st = sb_model_param_count(&cfg, &n, &err);
    return n;
}

static void test_param_counts(void **state)
{
    (void)state;
    /* docs/models/layered.md (F = 41, n_out = 1601); fox_layered: the spec's backbone
     * count plus the added head (1601 D) */
    static const int widths[5] = {64, 128, 256, 512, 1024};
    static const size_t total[4][2][5] = {
        {{374208, 1272704, 3856128, 14528000, 53173248},
         {643200, 2334976, 7291392, 28214272, 104663040}},
        {{375056, 1274400, 3859520, 14534784, 53186816},
         {644896, 2338368, 7298176, 28227840, 104690176}},
        {{508336, 1803056, 5965360, 22940720, 61559856},
         {911456, 3395680, 11509856, 45039712, 121436256}},
        {{273728, 1071616, 3453824, 13723264, 51563648},
         {544704, 2137728, 6896640, 27424512, 103083264}},
    };
    sb_status st;
    for (int mi = 0; mi < 4; mi++)
        for (int li = 0; li < 2; li++)
            for (int w = 0; w < 5; w++) {
                const int D = widths[w], L = li == 0 ? 4 : 8;
                size_t want = total[mi][li][w] + (mi == 3 ? (size_t)1601 * (size_t)D : 0);
                size_t got = count(names[mi], D, L, &st);
                assert_int_equal(st, SB_OK);
                if (got != want)
                    fail_msg("%s at D = %d, L = %d: %zu parameters, the spec says %zu", names[mi],
                             D, L, got, want);
            }
    /* the other widths of the size sweep, L = 8; 0 = the reference fails there */
    static const int more[6] = {384, 648, 768, 960, 1152, 1296};
    static const size_t more_total[4][6] = {
        {14869248, 42510096, 58050048, 90257280, 129542400, 167632416},
        {14879424, 0, 58070400, 90282720, 129572928, 167666760},
        {24342624, 49226064, 67484256, 104999136, 118864608, 154126896},
        {14276992, 0, 56865280, 88776256, 127765120, 0},
    };
    for (int mi = 0; mi < 4; mi++)
        for (int w = 0; w < 6; w++) {
            const int D = more[w];
            size_t got = count(names[mi], D, 8, &st);
            if (more_total[mi][w] == 0) {
                if (st != SB_ERR_INVALID)
                    fail_msg("%s at D = %d should be refused", names[mi], D);
                continue;
            }
            assert_int_equal(st, SB_OK);
            size_t want = more_total[mi][w] + (mi == 3 ? (size_t)1601 * (size_t)D : 0);
            if (got != want)
                fail_msg("%s at D = %d, L = 8: %zu parameters, the spec says %zu", names[mi], D,
                         got, want);
        }
    /* the MLP width table (spec 2.2) */
    static const int dd[11] = {64, 128, 256, 384, 512, 648, 768, 960, 1024, 1152, 1296};
    static const int ii[11] = {256, 512, 768, 1024, 1536, 1792, 2048, 2560, 2816, 3072, 3584};
    for (int k = 0; k < 11; k++)
        assert_int_equal(sb_lm_stack_mlp_width(dd[k]), ii[k]);
    /* other refused sizes */
    count("gla_layered", 100, 2, &st);
    assert_int_equal(st, SB_ERR_INVALID);
    count("delta_net_layered", 72, 2, &st);
    assert_int_equal(st, SB_ERR_INVALID);
    count("fox_layered", 48, 2, &st);
    assert_int_equal(st, SB_ERR_INVALID);
}

/* ---- against the PyTorch mimic --------------------------------------------------------------- */

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "layered/layered_mimic.json");
    for (int mi = 0; mi < 4; mi++) {
        const json_t *ref = mimic_model(&f, names[mi]);
        const int D = (int)json_integer_value(json_object_get(ref, "d"));
        sb_model *m = make_model(names[mi], D, f.I, f.O, f.L, f.seed);
        check_mimic_layout(ref, m, names[mi]);
        /* the initial values, bit for bit: sampled elements exactly, sums to rounding */
        check_mimic_sampled_values(ref, m, names[mi]);
        const json_t *params = json_object_get(ref, "params");
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            const json_t *rp = json_array_get(params, (size_t)i);
            double sum = 0, sumsq = 0;
            for (size_t k = 0; k < p->size; k++) {
                sum += p->tensor.data[k];
                sumsq += p->tensor.data[k] * p->tensor.data[k];
            }
            double rs = json_real_value(json_object_get(rp, "sum"));
            double rq = json_real_value(json_object_get(rp, "sumsq"));
            if (!(fabs(sum - rs) <= 1e-12 * (1 + sqrt(rq) * sqrt((double)p->size))) ||
                !(fabs(sumsq - rq) <= 1e-12 * rq + 1e-300))
                fail_msg("%s: %s sums to %.15g (squares %.15g), torch %.15g (%.15g)", names[mi],
                         p->name, sum, sumsq, rs, rq);
        }
        check_mimic_logits(ref, m, &f, 1e-3, 1e-9, names[mi]);
        sb_model_free(m);
    }
    mimic_close(&f);
}

/* ---- initial distributions (spec 2.4) -------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_init_stats(void **state)
{
    (void)state;
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(names[mi], 64, 41, 1601, 2, 7);
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            const real *v = p->tensor.data;
            const double n = (double)p->size;
            double mean = 0, sq = 0, mn = (double)INFINITY, mx = -(double)INFINITY;
            for (size_t k = 0; k < p->size; k++) {
                mean += v[k];
                sq += v[k] * v[k];
                mn = fmin(mn, v[k]);
                mx = fmax(mx, v[k]);
            }
            mean /= n;
            const double sd = sqrt(sq / n - mean * mean);
            if (strcmp(p->name, "proj.weight") == 0 || strcmp(p->name, "proj.bias") == 0) {
                /* PyTorch's Linear default, fan-in 41 */
                const double bound = 1 / sqrt(41.0);
                assert_true(mn >= -bound && mx <= bound && mx - mn > bound);
            } else if (strstr(p->name, "norm") != NULL) {
                assert_true(mn == 1 && mx == 1);
            } else if (ends_with(p->name, ".bias")) { /* gk_proj.1, f_proj: zero */
                assert_true(mn == 0 && mx == 0);
            } else if (ends_with(p->name, "A_log")) {
                assert_true(exp(mx) < 16 && exp(mn) > 0);
            } else if (ends_with(p->name, "dt_bias")) {
                const double lo = log1p(exp(mn)), hi = log1p(exp(mx)); /* softplus */
                assert_true(lo >= 1e-3 * (1 - 1e-6) && hi <= 0.1 * (1 + 1e-6));
            } else { /* Linear and conv weights: N(0, 0.02^2) */
                const double tol_sd = 0.02 * 6 / sqrt(2 * n), tol_mean = 0.02 * 6 / sqrt(n);
                if (!(fabs(sd - 0.02) <= tol_sd) || !(fabs(mean) <= tol_mean))
                    fail_msg("%s: %s has mean %g and std %g (%g values), want 0 and 0.02",
                             names[mi], p->name, mean, sd, n);
            }
        }
        /* initial cross-entropy ~ ln C: the head's N(0, 0.02^2) rows on unit-RMS hidden
         * states give logits of standard deviation 0.02 sqrt(64) = 0.16 */
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        int xs[3] = {2, 30, 41};
        sb_tensor *x = sb_tensor_zeros(&g, 3, xs);
        int32_t target[60];
        uint8_t valid[60];
        lcg = 3;
        for (int r = 0; r < 60; r++) {
            x->data[(size_t)r * 41 + (size_t)(r * 7 % 41)] = 1; /* one-hot frames */
            target[r] = (int32_t)urand(0, 1600.999);
            valid[r] = 1;
        }
        sb_tensor *y = sb_model_forward(&g, m, x);
        sb_tensor *loss = sb_cross_entropy(&g, y, target, valid, 1, NULL);
        if (!(fabs(loss->data[0] - log(1601.0)) < 0.05))
            fail_msg("%s: initial cross-entropy %g, ln 1601 = %g", names[mi], (double)loss->data[0],
                     log(1601.0));
        sb_graph_free(&g);
        sb_model_free(m);
    }
}

/* ---- torch's normal_ ------------------------------------------------------------------------- */

static void test_torch_normal(void **state)
{
    (void)state;
    /* torch.manual_seed(5); torch.empty(37).normal_(0, 0.02); torch.empty(5).uniform_(0, 1)
     * (torch 1.13, AVX2 kernel): elements 0, 1, 15, 16, 20, 21, 30, 36, then the uniforms */
    static const int at[8] = {0, 1, 15, 16, 20, 21, 30, 36};
    static const double want[8] = {
        0.036846596747636795,  0.010377743281424046, -0.01564670167863369,  0.05559726059436798,
        -0.002593253506347537, 0.005758995655924082, -0.010519023984670639, 0.0248340405523777};
    static const double want_u[5] = {0.2514558434486389, 0.7662155032157898, 0.7023026347160339,
                                     0.8180407881736755, 0.18046581745147705};
    sb_mt19937 rng;
    sb_mt19937_init_genrand(&rng, 5);
    int cv = 0;
    double cache = 0;
    real out[37], u[5];
    sb_torch_normal(&rng, &cv, &cache, out, 37, 0.0, 0.02);
    sb_torch_uniform(&rng, u, 5, 0, 1);
    for (int k = 0; k < 8; k++)
        assert_true((float)out[at[k]] == (float)want[k]);
    for (int k = 0; k < 5; k++)
        assert_true((float)u[k] == (float)want_u[k]);
    double s = 0;
    for (int k = 0; k < 37; k++)
        s += (double)(float)out[k];
    assert_true(fabs(s - -0.12149669701466337) < 1e-15);
    /* below 16 values: double Box-Muller with the cached sine sample (seed 3: 5 values, then
     * 3, then two uniforms) */
    static const double small[8] = {
        0.01606552116572857,   0.0034966678358614445, 0.0017795618623495102, -0.012274360284209251,
        0.0009236490586772561, -0.0273651834577322,   0.006749901920557022,  0.020222317427396774};
    sb_mt19937_init_genrand(&rng, 3);
    cv = 0;
    sb_torch_normal(&rng, &cv, &cache, out, 5, 0.0, 0.02);
    sb_torch_normal(&rng, &cv, &cache, out + 5, 3, 0.0, 0.02);
    sb_torch_uniform(&rng, u, 2, 0, 1);
    for (int k = 0; k < 8; k++)
        assert_true((float)out[k] == (float)small[k]);
    assert_true((float)u[0] == 0.17560523748397827f && (float)u[1] == 0.9491828680038452f);
}

/* ---- streaming and the evaluation path ------------------------------------------------------- */

static void test_stream(void **state)
{
    (void)state;
    const int F = 3, C = 4, L = 2, B = 3, T = 75;
    const int dims[4] = {8, 16, 8, 32};
    const int chunks[4] = {5, 1, 33, 36};
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(names[mi], dims[mi], F, C, L, 9);
        lcg = 23;
        perturb(m);
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        int xs[3] = {B, T, F};
        sb_tensor *x = sb_tensor_new(&g, 3, xs);
        for (size_t i = 0; i < x->size; i++)
            x->data[i] = urand(-1, 1);
        sb_tensor *whole = sb_model_hidden(&g, m, x, 0);
        assert_int_equal(whole->size, (size_t)B * T * dims[mi]);
        /* evaluation: the arena released block by block */
        sb_tensor *eval = sb_model_hidden(&g, m, x, 1);
        for (size_t i = 0; i < whole->size; i++)
            assert_true(eval->data[i] == whole->data[i]);
        assert_int_equal(m->dec_b->size, (size_t)C); /* the decoder's zero bias */
        for (int c = 0; c < C; c++)
            assert_true(m->dec_b->data[c] == 0);
        if (mi == 3) { /* attention: no recurrent form */
            assert_false(sb_model_can_stream(m));
            sb_graph_free(&g);
            sb_model_free(m);
            continue;
        }
        check_stream_matches_whole(m, x->data, B, T, chunks, 4, 1e-12, names[mi]);
        sb_graph_free(&g);
        sb_model_free(m);
    }
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

static void test_checkpoint(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_layered_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    static const char *const expect[4][3] = {
        {"base_model.model.layers.1.attn.gk_proj.1.bias", "base_model.lm_head.weight", "proj.bias"},
        {"base_model.model.layers.0.attn.v_conv1d.weight", "base_model.model.norm.weight",
         "proj.weight"},
        {"base_model.model.layers.1.attn.A_log", "base_model.model.layers.0.mlp.down_proj.weight",
         "base_model.lm_head.weight"},
        {"base_model.layers.0.attn.f_proj.bias", "base_model.norm.weight",
         "base_model.lm_head.weight"},
    };
    const int dims[4] = {8, 16, 8, 32};
    for (int mi = 0; mi < 4; mi++) {
        sb_model *a = make_model(names[mi], dims[mi], 3, 4, 2, 1);
        sb_model *b = make_model(names[mi], dims[mi], 3, 4, 2, 2);
        sb_run_config cfg = sb_run_config_default();
        snprintf(cfg.model, sizeof cfg.model, "%s", names[mi]);
        sb_error err = {0};
        assert_int_equal(sb_checkpoint_save(path, a, &cfg, NULL, 7, &err), SB_OK);
        sb_safetensors *f = NULL;
        assert_int_equal(sb_safetensors_open(path, &f, &err), SB_OK);
        assert_int_equal(sb_safetensors_count(f), (size_t)a->params.n);
        for (int k = 0; k < 3; k++)
            if (sb_safetensors_find(f, expect[mi][k]) == NULL)
                fail_msg("%s: the checkpoint has no tensor %s", names[mi], expect[mi][k]);
        sb_safetensors_close(f);
        int64_t seen = 0;
        assert_int_equal(sb_checkpoint_load(path, b, NULL, &seen, &err), SB_OK);
        assert_int_equal(seen, 7);
        for (size_t i = 0; i < a->params.total; i++)
            assert_true((float)a->params.data[i] == (float)b->params.data[i]);
        sb_model_free(a);
        sb_model_free(b);
    }
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k4_grad),        cmocka_unit_test(test_k4_blocked_vs_plain),
        cmocka_unit_test(test_mlp_norm_grad),  cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_torch_normal),   cmocka_unit_test(test_mimic),
        cmocka_unit_test(test_init_stats),     cmocka_unit_test(test_stream),
        cmocka_unit_test(test_checkpoint),     cmocka_unit_test(test_grad_gla),
        cmocka_unit_test(test_grad_delta_net), cmocka_unit_test(test_grad_gated_delta_net),
        cmocka_unit_test(test_grad_fox),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "layered/layered_mimic.json");
    for (int mi = 0; mi < 4; mi++) {
        const json_t *ref = mimic_model(&f, names[mi]);
        const int D = (int)json_integer_value(json_object_get(ref, "d"));
        sb_model *m = make_model(names[mi], D, f.I, f.O, f.L, f.seed);
        check_mimic_sampled_values(ref, m, names[mi]);
        check_mimic_logits(ref, m, &f, 0.1, 1e-5, names[mi]);
        sb_model_free(m);
    }
    mimic_close(&f);
}

static void test_k4_float(void **state)
{
    (void)state;
    const int B = 1, T = 1500, H = 2, Dh = 8;
    int qs[4] = {B, T, H, Dh}, fs[3] = {B, T, H};
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    sb_tensor *q = sb_tensor_new(&g, 4, qs), *k = sb_tensor_new(&g, 4, qs);
    sb_tensor *v = sb_tensor_new(&g, 4, qs), *f = sb_tensor_new(&g, 3, fs);
    lcg = 5;
    for (size_t i = 0; i < q->size; i++) {
        q->data[i] = (real)urand(-2, 2);
        k->data[i] = (real)urand(-2, 2);
        v->data[i] = (real)urand(-1, 1);
    }
    /* head 0: slow forgetting (F reaches about -150); head 1: fast (about -2000) */
    for (int t = 0; t < T; t++) {
        f->data[(size_t)t * H] = (real)urand(-0.2, 0);
        f->data[(size_t)t * H + 1] = (real)urand(-2.6, 0);
    }
    sb_tensor *a = sb_forgetting_attn(&g, q, k, v, f);
    sb_tensor *b = sb_forgetting_attn_ref(&g, q, k, v, f);
    double worst = 0;
    for (size_t i = 0; i < a->size; i++)
        worst = fmax(worst, fabs((double)a->data[i] - (double)b->data[i]));
    if (!(worst < 2e-5))
        fail_msg("K4 float: blocked and plain forms differ by %g", worst);
    sb_graph_free(&g);
}

static void test_threads(void **state)
{
    (void)state;
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(names[mi], 64, 9, 20, 2, 3);
        check_threads_identical(m, 4, 150, names[mi]);
        sb_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_k4_float),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif

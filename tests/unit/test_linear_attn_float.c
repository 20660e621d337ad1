/*
 * test_linear_attn_float.c - the fla ops and layers in the float build (what training uses):
 *   - both kernels (chunked, the fast exp) against a double-precision plain recurrence
 *     written here, including decays too strong for the factorised chunk products;
 *   - whole RecNets against the PyTorch mimic's logits (tests/data/fla);
 *   - identical training steps (logits and every gradient) with 1 and 2 threads;
 *   - the reference's parameter counts (docs/models/fla_layers.md, "Parameters") and
 *     state_dict names and shapes.
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
#include "test_util.h"

static const char *const model_names[4] = {"gla", "delta_net", "gated_delta_net",
                                           "gated_delta_product"};

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

static sb_tensor *rand_tensor(sb_graph *g, int ndim, const int *shape, double lo, double hi)
{
    sb_tensor *t = sb_tensor_new(g, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (real)urand(lo, hi);
    return t;
}

/* rows of D values scaled to unit norm (the delta rule's keys) */
static void normalise_rows(sb_tensor *t, int D)
{
    for (size_t r = 0; r < t->size / (size_t)D; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++)
            ss += (double)t->data[r * D + i] * (double)t->data[r * D + i];
        for (int i = 0; i < D; i++)
            t->data[r * D + i] = (real)((double)t->data[r * D + i] / sqrt(ss));
    }
}

/* ---- K1 against a double recurrence ---------------------------------------------------------- */

static void k1_float(int gate_kind, double g_lo, double g_hi)
{
    const int B = 2, T = 100, H = 2, K = 16, V = 32;
    const double scale = 0.25;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    lcg = 5;
    int qs[4] = {B, T, H, K}, vs[4] = {B, T, H, V};
    sb_tensor *q = rand_tensor(&g, 4, qs, -1, 1), *k = rand_tensor(&g, 4, qs, -1, 1);
    sb_tensor *v = rand_tensor(&g, 4, vs, -1, 1);
    sb_tensor *gt = NULL;
    if (gate_kind == 2)
        gt = rand_tensor(&g, 4, qs, g_lo, g_hi);
    else if (gate_kind == 1)
        gt = rand_tensor(&g, 3, qs, g_lo, g_hi);
    sb_tensor *o = sb_linear_attn(&g, q, k, v, gt, (real)scale, SB_LINEAR_ATTN_CHUNK, NULL);
    double worst = 0, norm = 0;
    double *S = malloc((size_t)K * V * sizeof *S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            memset(S, 0, (size_t)K * V * sizeof *S);
            for (int t = 0; t < T; t++) {
                const size_t row = ((size_t)b * T + t) * H + h;
                for (int c = 0; c < K; c++) {
                    double a = 1;
                    if (gate_kind == 2)
                        a = exp((double)gt->data[row * K + c]);
                    else if (gate_kind == 1)
                        a = exp((double)gt->data[row]);
                    for (int x = 0; x < V; x++)
                        S[c * V + x] = a * S[c * V + x] +
                                       (double)k->data[row * K + c] * (double)v->data[row * V + x];
                }
                for (int x = 0; x < V; x++) {
                    double acc = 0;
                    for (int c = 0; c < K; c++)
                        acc += scale * (double)q->data[row * K + c] * S[c * V + x];
                    worst = fmax(worst, fabs(acc - (double)o->data[row * V + x]));
                    norm = fmax(norm, fabs(acc));
                }
            }
        }
    if (!(worst <= 2e-5 * norm))
        fail_msg("K1 float (gate %d, %g..%g): error %g for outputs up to %g", gate_kind, g_lo, g_hi,
                 worst, norm);
    free(S);
    sb_graph_free(&g);
}

static void test_k1_float(void **state)
{
    (void)state;
    k1_float(0, 0, 0);
    k1_float(1, -0.3, -0.001);
    k1_float(2, -0.3, -0.001);
    k1_float(2, -0.02, 0);  /* GLA's typical range: logsigmoid / 16 */
    k1_float(2, -8, -0.01); /* chunk totals far beyond float's exp range */
    k1_float(1, -8, -0.01);
}

/* ---- K2 against a double recurrence ---------------------------------------------------------- */

static void k2_float(int n, int gated, double beta_max, double g_lo, double g_hi, int chunk)
{
    const int B = 2, T = 90, H = 2, K = 16, V = 32;
    const double scale = 0.25;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    lcg = 8;
    int qs[4] = {B, T, H, K}, ks[4] = {B, T, n * H, K}, vs[4] = {B, T, n * H, V};
    int bs[3] = {B, T, n * H}, gs[3] = {B, T, H};
    sb_tensor *q = rand_tensor(&g, 4, qs, -1, 1), *k = rand_tensor(&g, 4, ks, -1, 1);
    normalise_rows(q, K);
    normalise_rows(k, K);
    sb_tensor *v = rand_tensor(&g, 4, vs, -1, 1);
    sb_tensor *beta = rand_tensor(&g, 3, bs, 0.01, beta_max);
    sb_tensor *gt = gated ? rand_tensor(&g, 3, gs, g_lo, g_hi) : NULL;
    sb_tensor *o = sb_delta_rule(&g, q, k, v, beta, gt, (real)scale, chunk, NULL);
    double worst = 0, norm = 0;
    double *S = malloc((size_t)K * V * sizeof *S), u[32];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            memset(S, 0, (size_t)K * V * sizeof *S);
            for (int t = 0; t < T; t++) {
                if (gated) {
                    double a = exp((double)gt->data[((size_t)b * T + t) * H + h]);
                    for (int i = 0; i < K * V; i++)
                        S[i] *= a;
                }
                for (int j = 0; j < n; j++) {
                    const size_t row = ((size_t)b * T + t) * n * H + (size_t)j * H + h;
                    const real *kk = k->data + row * K, *vv = v->data + row * V;
                    const double bt = (double)beta->data[row];
                    for (int x = 0; x < V; x++) {
                        u[x] = (double)vv[x];
                        for (int c = 0; c < K; c++)
                            u[x] -= S[c * V + x] * (double)kk[c];
                        u[x] *= bt;
                    }
                    for (int c = 0; c < K; c++)
                        for (int x = 0; x < V; x++)
                            S[c * V + x] += (double)kk[c] * u[x];
                }
                const size_t row = ((size_t)b * T + t) * H + h;
                for (int x = 0; x < V; x++) {
                    double acc = 0;
                    for (int c = 0; c < K; c++)
                        acc += scale * (double)q->data[row * K + c] * S[c * V + x];
                    worst = fmax(worst, fabs(acc - (double)o->data[row * V + x]));
                    norm = fmax(norm, fabs(acc));
                }
            }
        }
    if (!(worst <= 1e-4 * norm))
        fail_msg("K2 float (n %d, gated %d, beta < %g): error %g for outputs up to %g", n, gated,
                 beta_max, worst, norm);
    free(S);
    sb_graph_free(&g);
}

static void test_k2_float(void **state)
{
    (void)state;
    k2_float(1, 0, 1, 0, 0, SB_DELTA_RULE_CHUNK);
    k2_float(1, 1, 1, -0.5, -0.001, SB_DELTA_RULE_CHUNK);
    k2_float(1, 1, 1, -6, -0.001, SB_DELTA_RULE_CHUNK); /* strong decays */
    k2_float(4, 1, 2, -0.5, -0.001, 16);                /* negative eigenvalues */
    k2_float(4, 1, 2, -6, -0.001, 16);
    k2_float(4, 0, 2, 0, 0, 16);
}

/* ---- whole models ---------------------------------------------------------------------------- */

static sb_model *make_model(const char *name, int D, int H, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L, cfg.n_head = H;
    cfg.dropout = 0.2;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    return m;
}

/* The float forward against the mimic's float64 logits. */
static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "fla/recnet_mimic_seed3.json");
    for (int mi = 0; mi < 4; mi++) {
        const json_t *ref = mimic_model(&f, model_names[mi]);
        sb_model *m = make_model(model_names[mi], f.D, f.H, f.I, f.O, f.L, f.seed);
        check_mimic_logits(ref, m, &f, 0.1, 1e-5, model_names[mi]);
        sb_model_free(m);
    }
    mimic_close(&f);
}

static void test_threads(void **state)
{
    (void)state;
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(model_names[mi], 32, 4, 5, 9, 2, 1);
        check_threads_identical(m, 3, 77, model_names[mi]);
        sb_model_free(m);
    }
}

/* Streaming evaluation of a 20,000-frame sequence in chunks of 500: the activation memory
 * after the last chunk is what it was after the first (nothing grows with the frames), and the
 * state stays finite. */
static void test_stream_memory(void **state)
{
    (void)state;
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(model_names[mi], 32, 4, 5, 9, 2, 1);
        check_stream_memory_flat(m, 2, 500, 40, model_names[mi]);
        sb_model_free(m);
    }
}

/* ---- parameter counts and names -------------------------------------------------------------- */

/* the reference's parameter counts (docs/models/fla_layers.md), per layer, at d = 64, 128,
 * 256, 512, 1024 */
static const long long layer_count[4][5] = {
    {35936, 137408, 536960, 2122496, 8439040},
    {25888, 100928, 398464, 1583360, 6316288},
    {34344, 134216, 530568, 2109704, 8421648},
    {74280, 287816, 1132680, 4493576, 17920272},
};

static void test_param_counts(void **state)
{
    (void)state;
    const int dims[5] = {64, 128, 256, 512, 1024};
    const int I = 41, O = 1601, L = 8;
    for (int mi = 0; mi < 4; mi++)
        for (int di = 0; di < 5; di++) {
            const int D = dims[di];
            sb_model_config cfg = {0};
            snprintf(cfg.model, sizeof cfg.model, "%s", model_names[mi]);
            cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L;
            cfg.n_head = sb_num_heads(D);
            /* the layer's table alone (no allocation) */
            sb_params ps;
            sb_params_init(&ps);
            sb_layer_type_find(model_names[mi])->add_params(&ps, "layers.0.", &cfg);
            long long n = 0;
            for (int i = 0; i < ps.n; i++)
                n += (long long)ps.p[i].size;
            sb_params_free(&ps);
            if (n != layer_count[mi][di])
                fail_msg("%s d=%d: %lld parameters per layer, spec %lld", model_names[mi], D, n,
                         layer_count[mi][di]);
            /* the whole RecNet where it fits in a test's memory */
            const long long whole =
                (long long)I * D + D + L * (layer_count[mi][di] + 2LL * D) + (long long)D * O + O;
            if (D <= 256) {
                sb_model *m = make_model(model_names[mi], D, cfg.n_head, I, O, L, 1);
                assert_int_equal((long long)m->params.count, whole);
                sb_model_free(m);
            }
        }
}

static void test_state_dict(void **state)
{
    (void)state;
    /* d = 64, H = 4: K = 16, V = 32 */
    static const char *const names[4][14] = {
        {"q_proj.weight 64 64", "k_proj.weight 64 64", "v_proj.weight 128 64",
         "g_proj.weight 128 64", "q_conv1d.weight 64 1 4", "k_conv1d.weight 64 1 4",
         "v_conv1d.weight 128 1 4", "gk_proj.0.weight 16 64", "gk_proj.1.weight 64 16",
         "gk_proj.1.bias 64", "o_proj.weight 64 128", "g_norm_swish_gate.weight 32", NULL},
        {"q_proj.weight 64 64", "k_proj.weight 64 64", "v_proj.weight 128 64", "b_proj.weight 4 64",
         "q_conv1d.weight 64 1 4", "k_conv1d.weight 64 1 4", "v_conv1d.weight 128 1 4",
         "o_norm.weight 32", "o_proj.weight 64 128", NULL},
        {"A_log 4", "dt_bias 4", "q_proj.weight 64 64", "k_proj.weight 64 64",
         "v_proj.weight 128 64", "a_proj.weight 4 64", "b_proj.weight 4 64",
         "q_conv1d.weight 64 1 4", "k_conv1d.weight 64 1 4", "v_conv1d.weight 128 1 4",
         "g_proj.weight 128 64", "o_norm.weight 32", "o_proj.weight 64 128", NULL},
        {"A_log 4", "dt_bias 4", "q_proj.weight 64 64", "k_proj.weight 256 64",
         "v_proj.weight 512 64", "b_proj.weight 16 64", "a_proj.weight 4 64",
         "q_conv1d.weight 64 1 4", "k_conv1d.weight 256 1 4", "v_conv1d.weight 512 1 4",
         "g_proj.weight 128 64", "o_norm.weight 32", "o_proj.weight 64 128", NULL},
    };
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(model_names[mi], 64, 4, 9, 65, 2, 1);
        for (int l = 0; l < 2; l++) {
            int k = 0;
            for (; names[mi][k] != NULL; k++) {
                const sb_param *p = &m->params.p[m->layer_first[l] + k];
                char got[160];
                int len = snprintf(got, sizeof got, "%s", p->name);
                for (int d = 0; d < p->ndim; d++)
                    len += snprintf(got + len, sizeof got - (size_t)len, " %d", p->shape[d]);
                char want[160];
                snprintf(want, sizeof want, "layers.%d.%s", l, names[mi][k]);
                if (strcmp(got, want) != 0)
                    fail_msg("%s: parameter %d of layer %d is '%s', want '%s'", model_names[mi], k,
                             l, got, want);
            }
            int next = l + 1 < 2 ? m->layer_first[l + 1] : m->params.n - 2;
            assert_int_equal(m->layer_first[l] + k, next);
        }
        /* fla's _no_weight_decay marks are ignored by the reference's optimiser: A_log and
         * dt_bias decay like every other parameter */
        const sb_param *a = sb_params_find(&m->params, "layers.1.A_log");
        if (a != NULL)
            assert_false(a->flags & SB_PARAM_NO_DECAY);
        sb_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k1_float),      cmocka_unit_test(test_k2_float),
        cmocka_unit_test(test_mimic_float),   cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stream_memory), cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_state_dict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

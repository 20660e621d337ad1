/*
 * test_mamba.c - the state-space layers in the float build:
 *   - the float kernels against a double-precision recurrence written here;
 *   - identical results (outputs and every gradient, bit for bit) with 1 and 2 threads;
 *   - the reference's parameter counts (docs/models/README.md lists them), state_dict
 *     names, shapes, order;
 *   - the initialisation: A_log, D, the dt biases, bounds of the drawn weights, and the
 *     torch draw order (one value checked against torch 1.13 by hand, see below).
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

#include "model_checks.h"

#include "model/model.h"
#include "ops/ops.h"
#include "ops/ops_ssm.h"

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

static double softplus_d(double x)
{
    return x > 20 ? x : log1p(exp(x));
}

/* ---- float kernels against a double recurrence ------------------------------------------ */

/* Tolerance: every output is a sum over N states of products accumulated over T steps
 * with decays < 1; in float each step adds about an ulp (6e-8) per term and ssm_exp about
 * 2 ulp. The chunked SSD also takes exp(s_i - s_j) of differences of float cumulative
 * sums, which carry |s| ulp of absolute error (|s| reaches tens within a 256-frame chunk),
 * as the reference's fp32 kernels do. Measured: 2.1e-7 (scan), 2.6e-6 (SSD, chunk 256),
 * 7.3e-7 (SSD, chunk 64) of the output's scale. 2e-5 leaves an 8x margin and stays ~500x
 * below what a wrong decay, a dropped term or a swapped index produces (>= 1e-2). */
#define FLOAT_TOL 2e-5

static void test_scan_float_vs_double(void **state)
{
    (void)state;
    const int B = 2, T = 300, E = 6, N = 16;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int bte[3] = {B, T, E}, btn[3] = {B, T, N}, e1[1] = {E}, en[2] = {E, N};
    sb_tensor *u = random_tensor(&g, 3, bte, -1, 1, 1),
              *delta = random_tensor(&g, 3, bte, -3, 1, 2);
    sb_tensor *bias = random_tensor(&g, 1, e1, -2, 0, 3),
              *A_log = random_tensor(&g, 2, en, -1, 2, 4);
    sb_tensor *Bm = random_tensor(&g, 3, btn, -1, 1, 5), *Cm = random_tensor(&g, 3, btn, -1, 1, 6);
    sb_tensor *D = random_tensor(&g, 1, e1, 0.5, 1.5, 7), *z = random_tensor(&g, 3, bte, -2, 2, 8);
    sb_tensor *y = sb_selective_scan(&g, u, delta, bias, A_log, Bm, Cm, D, z, NULL);
    double worst = 0, scale = 0;
    double h[16];
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) {
            for (int n = 0; n < N; n++)
                h[n] = 0;
            for (int t = 0; t < T; t++) {
                size_t row = (size_t)b * T + (size_t)t, ie = row * E + (size_t)e;
                double dt = softplus_d((double)delta->data[ie] + (double)bias->data[e]);
                double acc = 0;
                for (int n = 0; n < N; n++) {
                    double A = -exp((double)A_log->data[(size_t)e * N + (size_t)n]);
                    h[n] = exp(dt * A) * h[n] +
                           dt * (double)Bm->data[row * N + (size_t)n] * (double)u->data[ie];
                    acc += (double)Cm->data[row * N + (size_t)n] * h[n];
                }
                double zz = (double)z->data[ie];
                double ref = (acc + (double)D->data[e] * (double)u->data[ie]) * zz / (1 + exp(-zz));
                worst = fmax(worst, fabs((double)y->data[ie] - ref));
                scale = fmax(scale, fabs(ref));
            }
        }
    if (!(worst <= FLOAT_TOL * scale))
        fail_msg("selective scan: float vs double %.3g of %.3g", worst, scale);
    sb_graph_free(&g);
}

static void test_ssd_float_vs_double(void **state)
{
    (void)state;
    const int B = 2, T = 300, M = 3, P = 4, N = 16, E = M * P;
    sb_graph g;
    sb_graph_init(&g, 1 << 23);
    int x_s[3] = {B, T, E}, dt_s[3] = {B, T, M}, m1[1] = {M}, btn[3] = {B, T, N};
    sb_tensor *x = random_tensor(&g, 3, x_s, -1, 1, 1), *dt = random_tensor(&g, 3, dt_s, -4, 0, 2);
    sb_tensor *bias = random_tensor(&g, 1, m1, -2, 0, 3),
              *A_log = random_tensor(&g, 1, m1, -1, 2, 4);
    sb_tensor *Bm = random_tensor(&g, 3, btn, -1, 1, 5), *Cm = random_tensor(&g, 3, btn, -1, 1, 6);
    sb_tensor *D = random_tensor(&g, 1, m1, 0.5, 1.5, 7);
    const int chunks[2] = {256, 64};
    for (int c = 0; c < 2; c++) {
        sb_tensor *y = sb_ssd(&g, x, dt, bias, A_log, Bm, Cm, D, chunks[c], NULL);
        double worst = 0, scale = 0;
        double S[4 * 16];
        for (int b = 0; b < B; b++)
            for (int m = 0; m < M; m++) {
                for (int k = 0; k < P * N; k++)
                    S[k] = 0;
                double A = -exp((double)A_log->data[m]);
                for (int t = 0; t < T; t++) {
                    size_t row = (size_t)b * T + (size_t)t;
                    double d =
                        softplus_d((double)dt->data[row * M + (size_t)m] + (double)bias->data[m]);
                    double a = exp(d * A);
                    for (int p = 0; p < P; p++) {
                        double xp = (double)x->data[row * E + (size_t)(m * P + p)], acc = 0;
                        for (int n = 0; n < N; n++) {
                            S[p * N + n] =
                                a * S[p * N + n] + d * xp * (double)Bm->data[row * N + (size_t)n];
                            acc += S[p * N + n] * (double)Cm->data[row * N + (size_t)n];
                        }
                        double ref = acc + (double)D->data[m] * xp;
                        worst =
                            fmax(worst, fabs((double)y->data[row * E + (size_t)(m * P + p)] - ref));
                        scale = fmax(scale, fabs(ref));
                    }
                }
            }
        if (!(worst <= FLOAT_TOL * scale))
            fail_msg("ssd chunk %d: float vs double %.3g of %.3g", chunks[c], worst, scale);
    }
    sb_graph_free(&g);
}

/* ---- 1 thread vs 2 threads ------------------------------------------------------------------ */

/* Forward + backward of a small RecNet (N = 128: the selective scan's backward runs in two
 * 256-frame segments; T = 300: two SSD chunks) with 1 and 2 threads. */
static void test_threads(void **state)
{
    (void)state;
    const char *names[2] = {"mamba", "mamba2"};
    for (int k = 0; k < 2; k++) {
        sb_model_config mc = {.d_input = 9,
                              .d_output = 13,
                              .d_model = 32,
                              .n_layers = 2,
                              .d_state = 128,
                              .n_head = 4,
                              .dropout = 0.1,
                              .rope_base = 1000};
        snprintf(mc.model, sizeof mc.model, "%s", names[k]);
        sb_model *m = NULL;
        sb_error err = {0};
        if (sb_model_create(&mc, 3, &m, &err) != SB_OK)
            fail_msg("%s", err.msg);
        check_threads_identical(m, 4, 300, names[k]);
        sb_model_free(m);
    }
}

/* ---- parameter counts, state_dict, initialisation -------------------------------------------- */

static void test_param_counts(void **state)
{
    (void)state;
    /* the reference's counts (docs/models/README.md): I = 41, O = 1601, 8 layers */
    const int dims[5] = {64, 128, 256, 512, 1024};
    const size_t mamba128[5] = {712961, 1833921, 5304641, 17161281, 60535361};
    const size_t mamba2_128[5] = {456129, 1293441, 4147713, 14574849, 54369217};
    const size_t mamba64[5] = {516353, 1440705, 4518209, 15588417, 57389633};
    const size_t mamba2_64[5] = {385473, 1157249, 3880449, 14045441, 53315521};
    for (int i = 0; i < 5; i++) {
        sb_model_config mc = {.d_input = 41,
                              .d_output = 1601,
                              .d_model = dims[i],
                              .n_layers = 8,
                              .n_head = sb_num_heads(dims[i]),
                              .dropout = 0.2,
                              .rope_base = 1000};
        const struct {
            const char *name;
            int N;
            size_t want;
        } cases[4] = {{"mamba", 128, mamba128[i]},
                      {"mamba2", 128, mamba2_128[i]},
                      {"mamba", 64, mamba64[i]},
                      {"mamba2", 64, mamba2_64[i]}};
        for (int c = 0; c < 4; c++) {
            snprintf(mc.model, sizeof mc.model, "%s", cases[c].name);
            mc.d_state = cases[c].N;
            size_t count = 0;
            sb_error err = {0};
            if (sb_model_param_count(&mc, &count, &err) != SB_OK)
                fail_msg("%s", err.msg);
            if (count != cases[c].want)
                fail_msg("%s d=%d N=%d: %zu parameters, spec %zu", cases[c].name, dims[i],
                         cases[c].N, count, cases[c].want);
        }
    }
}

static sb_model *make_model(const char *name, int d, int N, uint64_t seed)
{
    sb_model_config mc = {.d_input = 41,
                          .d_output = 17,
                          .d_model = d,
                          .n_layers = 2,
                          .d_state = N,
                          .n_head = sb_num_heads(d),
                          .dropout = 0,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, seed, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return m;
}

static void expect_param(const sb_model *m, int index, const char *name, int ndim, const int *shape)
{
    const sb_param *p = &m->params.p[index];
    if (strcmp(p->name, name) != 0)
        fail_msg("parameter %d is %s, expected %s", index, p->name, name);
    assert_int_equal(p->ndim, ndim);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(p->shape[d], shape[d]);
}

static void test_state_dict(void **state)
{
    (void)state;
    /* d = 64: E = 128, R = 4, N = 16; Mamba2: n_head 4, headdim 16, M = 8 heads */
    sb_model *m = make_model("mamba", 64, 16, 1);
    int i = m->layer_first[1];
    int en[2] = {128, 16}, e[1] = {128}, in_w[2] = {256, 64}, cw[3] = {128, 1, 4};
    int xw[2] = {4 + 32, 128}, dtw[2] = {128, 4}, ow[2] = {64, 128};
    expect_param(m, i + 0, "layers.1.A_log", 2, en);
    expect_param(m, i + 1, "layers.1.D", 1, e);
    expect_param(m, i + 2, "layers.1.in_proj.weight", 2, in_w);
    expect_param(m, i + 3, "layers.1.conv1d.weight", 3, cw);
    expect_param(m, i + 4, "layers.1.conv1d.bias", 1, e);
    expect_param(m, i + 5, "layers.1.x_proj.weight", 2, xw);
    expect_param(m, i + 6, "layers.1.dt_proj.weight", 2, dtw);
    expect_param(m, i + 7, "layers.1.dt_proj.bias", 1, e);
    expect_param(m, i + 8, "layers.1.out_proj.weight", 2, ow);
    expect_param(m, i + 9, "decoder.weight", 2, (int[]){17, 64});
    sb_model_free(m);
    m = make_model("mamba2", 64, 16, 1);
    i = m->layer_first[0];
    int m8[1] = {8}, in2[2] = {2 * 128 + 2 * 16 + 8, 64}, cw2[3] = {128 + 32, 1, 4};
    expect_param(m, i + 0, "layers.0.dt_bias", 1, m8);
    expect_param(m, i + 1, "layers.0.A_log", 1, m8);
    expect_param(m, i + 2, "layers.0.D", 1, m8);
    expect_param(m, i + 3, "layers.0.in_proj.weight", 2, in2);
    expect_param(m, i + 4, "layers.0.conv1d.weight", 3, cw2);
    expect_param(m, i + 5, "layers.0.conv1d.bias", 1, (int[]){160});
    expect_param(m, i + 6, "layers.0.norm.weight", 1, e);
    expect_param(m, i + 7, "layers.0.out_proj.weight", 2, ow);
    expect_param(m, i + 8, "layers.1.dt_bias", 1, m8);
    sb_model_free(m);
}

static const real *param_data(const sb_model *m, const char *name, size_t *size)
{
    const sb_param *p = sb_params_find(&m->params, name);
    if (p == NULL)
        fail_msg("no parameter %s", name);
    *size = p->size;
    return p->tensor.data;
}

static void check_range(const sb_model *m, const char *name, double lo, double hi)
{
    size_t n;
    const real *v = param_data(m, name, &n);
    double mn = 1e30, mx = -1e30;
    for (size_t i = 0; i < n; i++) {
        mn = fmin(mn, (double)v[i]);
        mx = fmax(mx, (double)v[i]);
    }
    if (!(mn >= lo && mx <= hi))
        fail_msg("%s in [%g, %g], expected within [%g, %g]", name, mn, mx, lo, hi);
    /* drawn values fill most of their range */
    if (n >= 64 && !(mx - mn > 0.8 * (hi - lo)))
        fail_msg("%s spans only [%g, %g] of [%g, %g]", name, mn, mx, lo, hi);
}

static void test_init(void **state)
{
    (void)state;
    sb_model *m = make_model("mamba", 64, 16, 1);
    size_t n;
    const real *A_log = param_data(m, "layers.0.A_log", &n);
    for (size_t i = 0; i < n; i++) /* exactly float32 log(n + 1), as torch.log gives */
        assert_true(A_log[i] == logf((float)(i % 16 + 1)));
    const real *D = param_data(m, "layers.0.D", &n);
    for (size_t i = 0; i < n; i++)
        assert_true(D[i] == 1);
    const real *bias = param_data(m, "layers.0.dt_proj.bias", &n);
    double mn = 1, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double dt = softplus_d((double)bias[i]);
        mn = fmin(mn, dt), mx = fmax(mx, dt);
    }
    assert_true(mn >= 0.999e-3 && mx <= 0.1001 && mx / mn > 20); /* log-uniform [1e-3, 1e-1] */
    check_range(m, "layers.0.conv1d.weight", -0.5, 0.5);
    check_range(m, "layers.0.conv1d.bias", -0.5, 0.5);    /* PyTorch's default, not zeros */
    check_range(m, "layers.0.dt_proj.weight", -0.5, 0.5); /* R = 4: R^-1/2 */
    check_range(m, "layers.0.in_proj.weight", -0.125, 0.125);
    check_range(m, "layers.0.x_proj.weight", -1 / sqrt(128.0), 1 / sqrt(128.0));
    /* Draw order against torch 1.13 (a construction replica with torch.manual_seed(1):
     * nn.Linear(41, 64), then per layer the modules in Mamba's order, then the decoder;
     * every drawn weight of both layers and the decoder matched bit for bit). The values
     * derived through exp/log (dt biases, Mamba2's A_log) may differ by 1 float ulp from
     * torch's vectorised exp and log. */
    const real *w_in = param_data(m, "layers.0.in_proj.weight", &n);
    assert_true(w_in[0] == (real)0.1141895204782486);
    const real *dec_b = param_data(m, "decoder.bias", &n);
    assert_true(dec_b[0] == (real)0.10430543124675751);
    const real *b1 = param_data(m, "layers.1.dt_proj.bias", &n);
    const double torch_b1[3] = {-2.830749988555908, -4.662200927734375, -6.745911121368408};
    for (int i = 0; i < 3; i++)
        assert_true(fabs((double)b1[i] - torch_b1[i]) <= 5e-7);
    sb_model_free(m);

    m = make_model("mamba2", 64, 16, 1);
    A_log = param_data(m, "layers.0.A_log", &n);
    for (size_t i = 0; i < n; i++) /* log of U(1, 16) */
        assert_true(A_log[i] >= 0 && A_log[i] <= logf(16.0f));
    bias = param_data(m, "layers.1.dt_bias", &n);
    for (size_t i = 0; i < n; i++) {
        double dt = softplus_d((double)bias[i]);
        assert_true(dt >= 0.999e-3 && dt <= 0.1001);
    }
    D = param_data(m, "layers.0.D", &n);
    for (size_t i = 0; i < n; i++)
        assert_true(D[i] == 1);
    const real *norm = param_data(m, "layers.0.norm.weight", &n);
    for (size_t i = 0; i < n; i++)
        assert_true(norm[i] == 1);
    check_range(m, "layers.0.conv1d.weight", -0.5, 0.5);
    check_range(m, "layers.0.conv1d.bias", -0.5, 0.5);
    check_range(m, "layers.0.out_proj.weight", -1 / sqrt(128.0), 1 / sqrt(128.0));
    /* torch 1.13, the same replica for Mamba2 */
    dec_b = param_data(m, "decoder.bias", &n);
    assert_true(dec_b[0] == (real)0.0009445101022720337);
    const double torch_dt_bias[8] = {-5.695226192474365,  -4.770435333251953, -5.972539901733398,
                                     -2.7517952919006348, -6.195062160491943, -3.091766119003296,
                                     -2.289834976196289,  -6.643057823181152};
    const double torch_A_log[8] = {1.5690677165985107, 2.3145177364349365, 2.627485752105713,
                                   2.0676004886627197, 2.751582622528076,  1.6255615949630737,
                                   1.9876351356506348, 0.8658100366592407};
    bias = param_data(m, "layers.1.dt_bias", &n);
    A_log = param_data(m, "layers.0.A_log", &n);
    for (int i = 0; i < 8; i++) {
        assert_true(fabs((double)bias[i] - torch_dt_bias[i]) <= 5e-7);
        assert_true(fabs((double)A_log[i] - torch_A_log[i]) <= 2.5e-7);
    }
    sb_model_free(m);
}

/* ---- streaming memory ---------------------------------------------------------------------- */

/* Evaluation of long sequences streams chunks of frames through the layers, carrying
 * their state: the memory per chunk must not depend on how many chunks came before. */
static void test_stream_memory(void **state)
{
    (void)state;
    const char *names[2] = {"mamba", "mamba2"};
    for (int k = 0; k < 2; k++) {
        sb_model_config mc = {.d_input = 9,
                              .d_output = 13,
                              .d_model = 32,
                              .n_layers = 2,
                              .d_state = 16,
                              .n_head = 4,
                              .dropout = 0,
                              .rope_base = 1000};
        snprintf(mc.model, sizeof mc.model, "%s", names[k]);
        sb_model *m = NULL;
        sb_error err = {0};
        if (sb_model_create(&mc, 3, &m, &err) != SB_OK)
            fail_msg("%s", err.msg);
        check_stream_memory_flat(m, 2, 512, 40, names[k]); /* 20 480 frames */
        sb_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_float_vs_double),
        cmocka_unit_test(test_ssd_float_vs_double),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stream_memory),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_state_dict),
        cmocka_unit_test(test_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_hawk.c - Hawk (src/layers/hawk.c, docs/models/hawk.md). One source, built twice.
 *
 * test_hawk, the double build (SB_REAL_DOUBLE):
 *   - finite-difference gradient checks of the new ops (ops_hawk.h): the RG-LRU scan (every
 *     input; frame 0 a reset, as Griffin's reference code, and a continuation from a zero
 *     state; 70 channels, so one sample's channels cross the 64-channel scan block with a
 *     ragged tail; a case with decays near 1 where sqrt(1 - a^2) is small), the
 *     block-diagonal projection, the tanh-GeLU-gated product (and its values);
 *   - the scan against a plain double recurrence written here (h_0 = i_0 x_0, then
 *     h_t = a_t h_{t-1} + sqrt(1 - a_t^2) i_t x_t), streamed in pieces against the whole
 *     sequence, 1 and 2 threads identical;
 *   - the initialisation rule of Lambda (rnn_param_init's: a0 = sigmoid(Lambda) in
 *     [0.9, 0.999], a0^2 uniform);
 *   - the whole RecNet against the pure-PyTorch mimic (tests/data/models/hawk/hawk.json):
 *     names, shapes, counts at d = 16 and d = 32, initial values (first values and every
 *     Lambda bit for bit), float64 logits; streaming in chunks == the whole sequence.
 * test_hawk_float, the float build (what training uses):
 *   - the whole RecNet against the float64 logits of the same mimic to 1e-4, and its initial
 *     values bit for bit (first values, every Lambda and a few values of every other
 *     parameter);
 *   - identical training steps (logits and every gradient) with 1 and 2 threads;
 *   - streaming a long sequence does not grow the activation memory;
 *   - the state_dict names and shapes at d = 64 (4 gate blocks of 22 channels: R = 88).
 * The whole-model gradient checks are test_every_model_grad's.
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
#include "ops/ops_hawk.h"
#include "test_util.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

static sb_model *make_model(int D, int H, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "hawk");
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L, cfg.n_head = H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("hawk: %s", err.msg);
    return m;
}

#ifdef SB_REAL_DOUBLE

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

/* ---- gradient checks of the ops ------------------------------------------------------------ */

/* in: x, ga, gx, lambda; ctx: the reset flag (int) */
static sb_tensor *fn_rglru(sb_graph *g, sb_tensor **in, void *ctx)
{
    return sb_rglru(g, in[0], in[1], in[2], in[3], 8, NULL, *(const int *)ctx);
}

static void rglru_gradcheck(const char *name, int B, int T, int C, double ga_lo, double ga_hi,
                            double lam_lo, double lam_hi, int reset)
{
    gc_problem p = {.name = name, .fn = fn_rglru, .ctx = &reset};
    /* with one frame and a reset, the output does not depend on ga or lambda */
    if (reset && T == 1)
        p.allow_zero_grad = 1 << 1 | 1 << 3;
    int xs[3] = {B, T, C}, ls[1] = {C};
    gc_add_input(&p, "x", 3, xs, -1.5, 1.5, 1);
    gc_add_input(&p, "ga", 3, xs, ga_lo, ga_hi, 2);
    gc_add_input(&p, "gx", 3, xs, -2, 2, 3);
    gc_add_input(&p, "lambda", 1, ls, lam_lo, lam_hi, 4);
    double worst = gc_check(&p);
    print_message("%s%s: max rel error %.3g\n", name, reset ? "" : " (no reset)", worst);
    gc_free(&p);
}

static void test_rglru_grad(void **state)
{
    (void)state;
    for (int reset = 1; reset >= 0; reset--) {
        rglru_gradcheck("RG-LRU, 70 channels (64 + 6), T 13", 2, 13, 70, -3, 3, -1, 6, reset);
        rglru_gradcheck("RG-LRU, 5 channels, T 1", 3, 1, 5, -3, 3, -1, 6, reset);
        /* decays near 1: Lambda up to 9 (a0^8 up to 0.999) and small r, where sqrt(1 - a^2)
         * is ~1e-2 and its slope large */
        rglru_gradcheck("RG-LRU, decays near 1", 2, 9, 7, -6, -2, 6, 9, reset);
        /* fast decays: Lambda negative (a0 below 1/2), r near 1 */
        rglru_gradcheck("RG-LRU, fast decays", 2, 9, 7, 1, 4, -3, -1, reset);
    }
}

/* with a reset, frame 0 passes no gradient to ga_0 or lambda: lambda's gradient on a
 * one-frame sequence is exactly 0, and ga's gradient is 0 at frame 0 only */
static void test_rglru_reset_grad(void **state)
{
    (void)state;
    const int B = 2, T = 3, C = 5;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 1;
    int xs[3] = {B, T, C}, x1[3] = {B, 1, C}, ls[1] = {C};
    lcg = 17;
    for (int one = 0; one < 2; one++) {
        sb_tensor *in[4];
        for (int k = 0; k < 4; k++) {
            in[k] = k < 3 ? sb_tensor_new(&g, 3, one ? x1 : xs) : sb_tensor_new(&g, 1, ls);
            for (size_t i = 0; i < in[k]->size; i++)
                in[k]->data[i] = urand(-2, 2);
            in[k]->requires_grad = 1;
        }
        sb_tensor *y = sb_rglru(&g, in[0], in[1], in[2], in[3], 8, NULL, 1);
        real *dy = sb_tensor_grad(&g, y);
        for (size_t i = 0; i < y->size; i++)
            dy[i] = 1;
        sb_graph_backward(&g);
        const int Tn = one ? 1 : T;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tn; t++)
                for (int c = 0; c < C; c++) {
                    const real d = in[1]->grad[((size_t)b * Tn + t) * C + c];
                    assert_true(t == 0 ? d == 0 : d != 0);
                }
        for (int c = 0; c < C; c++)
            assert_true(one ? in[3]->grad[c] == 0 : in[3]->grad[c] != 0);
        sb_graph_reset(&g);
        g.record = 1;
    }
    sb_graph_free(&g);
}

static sb_tensor *fn_bdl(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_block_diag_linear(g, in[0], in[1], in[2]);
}

static void test_block_diag_grad(void **state)
{
    (void)state;
    gc_problem p = {.name = "block-diagonal projection, 3 blocks of 4", .fn = fn_bdl};
    int xs[3] = {2, 5, 12}, ws[3] = {3, 4, 4}, bs[2] = {3, 4};
    gc_add_input(&p, "x", 3, xs, -1, 1, 1);
    gc_add_input(&p, "w", 3, ws, -1, 1, 2);
    gc_add_input(&p, "b", 2, bs, -1, 1, 3);
    double worst = gc_check(&p);
    print_message("block-diagonal: max rel error %.3g\n", worst);
    gc_free(&p);
    /* values: off-block weights do not leak, the input index comes first */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    int x1[2] = {1, 4}, w1[3] = {2, 2, 2}, b1[2] = {2, 2};
    real xv[4] = {1, 2, 3, 4}, wv[8] = {1, 10, 100, 1000, 2, 3, 5, 7}, bv[4] = {0.5, 0, 0, -1};
    sb_tensor *y =
        sb_block_diag_linear(&g, sb_tensor_wrap(&g, xv, 2, x1), sb_tensor_wrap(&g, wv, 3, w1),
                             sb_tensor_wrap(&g, bv, 2, b1));
    const double want[4] = {1 * 1 + 2 * 100 + 0.5, 1 * 10 + 2 * 1000, 3 * 2 + 4 * 5,
                            3 * 3 + 4 * 7 - 1};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(y->data[i] - want[i]) < 1e-12);
    sb_graph_free(&g);
}

static sb_tensor *fn_gelu_tanh_mul(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_gelu_tanh_mul(g, in[0], in[1]);
}

static void test_gelu_tanh_mul(void **state)
{
    (void)state;
    gc_problem p = {.name = "gelu_tanh(a) * v", .fn = fn_gelu_tanh_mul};
    int s[2] = {7, 9};
    gc_add_input(&p, "a", 2, s, -4, 4, 1);
    gc_add_input(&p, "v", 2, s, -2, 2, 2);
    double worst = gc_check(&p);
    print_message("gelu_tanh_mul: max rel error %.3g\n", worst);
    gc_free(&p);
    /* values: the tanh form, not the erf form (they differ by up to 4.7e-4, at |a| = 2.7) */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    int s1[1] = {6};
    real av[6] = {-3, -1.5, -0.2, 0, 0.7, 2.1}, vv[6] = {1, -2, 0.5, 3, 1, -1};
    sb_tensor *y =
        sb_gelu_tanh_mul(&g, sb_tensor_wrap(&g, av, 1, s1), sb_tensor_wrap(&g, vv, 1, s1));
    for (int i = 0; i < 6; i++) {
        const double a = av[i];
        const double want =
            0.5 * a * (1 + tanh(sqrt(2 / acos(-1.0)) * (a + 0.044715 * a * a * a))) * vv[i];
        assert_true(fabs(y->data[i] - want) < 1e-15);
    }
    sb_graph_free(&g);
}

/* ---- the scan against a plain recurrence ----------------------------------------------------- */

static double sigm(double x)
{
    return 1 / (1 + exp(-x));
}

static void test_rglru_values(void **state)
{
    (void)state;
    const int B = 2, T = 40, C = 67;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int xs[3] = {B, T, C}, ls[1] = {C};
    sb_tensor *in[4];
    lcg = 5;
    for (int k = 0; k < 4; k++) {
        in[k] = k < 3 ? sb_tensor_new(&g, 3, xs) : sb_tensor_new(&g, 1, ls);
        for (size_t i = 0; i < in[k]->size; i++)
            in[k]->data[i] = urand(k == 3 ? -1 : -2, k == 3 ? 8 : 2);
    }
    sb_tensor *y = sb_rglru(&g, in[0], in[1], in[2], in[3], 8, NULL, 1);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double h = 0;
            const double a0 = sigm(in[3]->data[c]);
            for (int t = 0; t < T; t++) {
                const size_t o = ((size_t)b * T + t) * C + c;
                const double a = pow(a0, 8 * sigm(in[1]->data[o])); /* a0^(c r) */
                const double u = sigm(in[2]->data[o]) * in[0]->data[o];
                h = t == 0 ? u : a * h + sqrt(1 - a * a) * u; /* frame 0: the reset */
                worst = fmax(worst, fabs(h - y->data[o]));
            }
        }
    print_message("RG-LRU vs a plain recurrence: %.3g\n", worst);
    assert_true(worst < 1e-10);

    /* streamed in pieces of 7, 1, 20, 12 frames from a carried state == the whole sequence
     * (the reset in the first piece only); the carried state starts as junk, which the reset
     * must not read */
    real *st = malloc((size_t)B * C * sizeof *st);
    assert_non_null(st);
    for (int i = 0; i < B * C; i++)
        st[i] = (real)(1e3 * (i + 1));
    const int pieces[4] = {7, 1, 20, 12};
    int t0 = 0;
    double sworst = 0;
    for (int pi = 0; pi < 4; pi++) {
        const int Tc = pieces[pi];
        int ps[3] = {B, Tc, C};
        sb_tensor *part[3];
        for (int k = 0; k < 3; k++) {
            part[k] = sb_tensor_new(&g, 3, ps);
            for (int b = 0; b < B; b++)
                memcpy(part[k]->data + (size_t)b * Tc * C, in[k]->data + ((size_t)b * T + t0) * C,
                       (size_t)Tc * C * sizeof(real));
        }
        sb_tensor *yp = sb_rglru(&g, part[0], part[1], part[2], in[3], 8, st, pi == 0);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tc; t++)
                for (int c = 0; c < C; c++)
                    sworst = fmax(sworst, fabs(yp->data[((size_t)b * Tc + t) * C + c] -
                                               y->data[((size_t)b * T + t0 + t) * C + c]));
        t0 += Tc;
    }
    assert_int_equal(t0, T);
    assert_true(sworst == 0);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            assert_true(st[(size_t)b * C + c] == y->data[((size_t)b * T + T - 1) * C + c]);
    free(st);
    sb_graph_free(&g);
}

/* forward + backward with 1 and 2 threads: outputs and gradients identical */
static void test_rglru_threads(void **state)
{
    (void)state;
    const int B = 3, T = 50, C = 150; /* three channel blocks per sample */
    int xs[3] = {B, T, C}, ls[1] = {C};
    const int saved = omp_get_max_threads();
    real *res[2];
    size_t n = 0;
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        g.record = 1;
        lcg = 9;
        sb_tensor *in[4];
        for (int k = 0; k < 4; k++) {
            in[k] = k < 3 ? sb_tensor_new(&g, 3, xs) : sb_tensor_new(&g, 1, ls);
            for (size_t i = 0; i < in[k]->size; i++)
                in[k]->data[i] = urand(-2, 5);
            in[k]->requires_grad = 1;
        }
        sb_tensor *y = sb_rglru(&g, in[0], in[1], in[2], in[3], 8, NULL, 1);
        real *dy = sb_tensor_grad(&g, y);
        for (size_t i = 0; i < y->size; i++)
            dy[i] = (real)sin(0.3 * (double)i);
        sb_graph_backward(&g);
        n = y->size * 4 + (size_t)C;
        res[run] = malloc(n * sizeof(real));
        memcpy(res[run], y->data, y->size * sizeof(real));
        size_t off = y->size;
        for (int k = 0; k < 4; k++) {
            memcpy(res[run] + off, in[k]->grad, in[k]->size * sizeof(real));
            off += in[k]->size;
        }
        sb_graph_free(&g);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(res[0], res[1], n * sizeof(real));
    free(res[0]), free(res[1]);
}

/* ---- the whole RecNet against the mimic ------------------------------------------------------ */

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/hawk/hawk.json");
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-10};
    const json_t *ref = mimic_model(&f, "hawk");
    sb_model *m = make_model(f.D, f.H, f.I, f.O, f.L, f.seed);
    check_mimic_layout(ref, m, "hawk");
    check_mimic_sum_and_first(ref, m, tol.sum_rtol, tol.first_rtol, "hawk");
    /* every Lambda and a few values of every other parameter, bit for bit */
    check_mimic_sampled_values(ref, m, "hawk");
    const double worst = check_mimic_logits(ref, m, &f, tol.logits_floor, tol.logits_tol, "hawk");
    print_message("hawk: float64 logits vs the mimic: %.3g (relative, floor 1e-3)\n", worst);
    sb_model_free(m);
    /* the counts at both widths */
    const json_t *counts = json_object_get(f.root, "counts");
    assert_non_null(counts);
    const int widths[2] = {16, 32};
    for (int i = 0; i < 2; i++) {
        char key[8];
        snprintf(key, sizeof key, "%d", widths[i]);
        const json_t *c = json_object_get(counts, key);
        assert_non_null(c);
        sb_model_config cfg = {0};
        snprintf(cfg.model, sizeof cfg.model, "hawk");
        cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = widths[i], cfg.n_layers = f.L;
        cfg.n_head = sb_num_heads(widths[i]);
        size_t count = 0;
        sb_error err = {0};
        assert_int_equal(sb_model_param_count(&cfg, &count, &err), SB_OK);
        print_message("hawk d=%d: %zu parameters (mimic %lld)\n", widths[i], count,
                      (long long)json_integer_value(c));
        assert_int_equal((long long)count, (long long)json_integer_value(c));
    }
    mimic_close(&f);
}

/* rnn_param_init's ring: a0 = sigmoid(Lambda) with a0^2 uniform in [0.9^2, 0.999^2] */
static void test_lambda_init(void **state)
{
    (void)state;
    sb_model *m = make_model(128, 4, 3, 4, 2, 11);
    double lo = 1, hi = 0, ks = 0;
    size_t n = 0;
    double sq[2 * 172];
    for (int l = 0; l < 2; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.temporal_block.rg_lru.a_logit", l);
        sb_param *p = sb_params_find(&m->params, name);
        assert_non_null(p);
        assert_int_equal(p->size, 172);
        for (size_t k = 0; k < p->size; k++) {
            const double a0 = sigm(p->tensor.data[k]);
            lo = fmin(lo, a0), hi = fmax(hi, a0);
            sq[n++] = a0 * a0;
        }
    }
    /* Kolmogorov-Smirnov distance of a0^2 to U(0.81, 0.998001) */
    for (size_t i = 0; i < n; i++) {
        size_t below = 0;
        for (size_t j = 0; j < n; j++)
            below += sq[j] <= sq[i];
        const double cdf = (sq[i] - 0.81) / (0.998001 - 0.81);
        ks = fmax(ks, fabs((double)below / (double)n - cdf));
    }
    print_message("a0 over %zu channels: [%.6f, %.6f], KS distance of a0^2 to uniform %.3f\n", n,
                  lo, hi, ks);
    /* float32 steps: a0 within ~1e-6 of the ring; 344 draws cover most of it */
    assert_true(lo >= 0.9 - 1e-6 && hi <= 0.999 + 1e-6);
    assert_true(lo < 0.905 && hi > 0.995);
    /* the 1% critical value is 1.63 / sqrt(n) = 0.088; a0^8 uniform (the paper's text)
     * would put a0^2 in [0.974, 0.99975] */
    assert_true(ks < 0.088);
    sb_model_free(m);
}

static void test_stream(void **state)
{
    (void)state;
    const int D = 16, H = 4, I = 3, O = 4, L = 2, B = 3, T = 45;
    const int chunks[4] = {5, 1, 2, 37};
    real *x = malloc((size_t)B * T * I * sizeof *x);
    assert_non_null(x);
    sb_model *m = make_model(D, H, I, O, L, 9);
    lcg = 23;
    for (size_t i = 0; i < (size_t)B * T * I; i++)
        x[i] = urand(-1, 1);
    check_stream_matches_whole(m, x, B, T, chunks, 4, 1e-12, "hawk");
    sb_model_free(m);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rglru_grad),      cmocka_unit_test(test_rglru_reset_grad),
        cmocka_unit_test(test_block_diag_grad), cmocka_unit_test(test_gelu_tanh_mul),
        cmocka_unit_test(test_rglru_values),    cmocka_unit_test(test_rglru_threads),
        cmocka_unit_test(test_mimic),           cmocka_unit_test(test_lambda_init),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/hawk/hawk.json");
    const json_t *ref = mimic_model(&f, "hawk");
    sb_model *m = make_model(f.D, f.H, f.I, f.O, f.L, f.seed);
    check_mimic_layout(ref, m, "hawk");
    check_mimic_sum_and_first(ref, m, 1e-6, 0, "hawk");
    check_mimic_sampled_values(ref, m, "hawk");
    double worst = check_mimic_logits(ref, m, &f, 0.1, 1e-4, "hawk");
    print_message("hawk: float logits vs the float64 mimic: %.3g\n", worst);
    sb_model_free(m);
    mimic_close(&f);
}

static void test_threads(void **state)
{
    (void)state;
    sb_model *m = make_model(32, 4, 5, 9, 2, 1);
    check_threads_identical(m, 3, 77, "hawk");
    sb_model_free(m);
}

static void test_stream_memory(void **state)
{
    (void)state;
    sb_model *m = make_model(32, 4, 5, 9, 2, 1);
    check_stream_memory_flat(m, 2, 400, 30, "hawk");
    sb_model_free(m);
}

static void test_state_dict(void **state)
{
    (void)state;
    static const char *const names[] = {
        "temporal_pre_norm.weight 64",
        "temporal_block.linear_y.weight 88 64",
        "temporal_block.linear_y.bias 88",
        "temporal_block.linear_x.weight 88 64",
        "temporal_block.linear_x.bias 88",
        "temporal_block.conv_1d.weight 88 1 4",
        "temporal_block.conv_1d.bias 88",
        "temporal_block.rg_lru.a_logit 88",
        "temporal_block.rg_lru.input_gate_weight 4 22 22",
        "temporal_block.rg_lru.input_gate_bias 4 22",
        "temporal_block.rg_lru.a_gate_weight 4 22 22",
        "temporal_block.rg_lru.a_gate_bias 4 22",
        "temporal_block.linear_out.weight 64 88",
        "temporal_block.linear_out.bias 64",
        "channel_pre_norm.weight 64",
        "mlp_block.gate_proj.weight 192 64",
        "mlp_block.gate_proj.bias 192",
        "mlp_block.up_proj.weight 192 64",
        "mlp_block.up_proj.bias 192",
        "mlp_block.down_proj.weight 64 192",
        "mlp_block.down_proj.bias 64",
        NULL,
    };
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "hawk");
    cfg.d_model = 64, cfg.n_head = sb_num_heads(64);
    sb_params ps;
    sb_params_init(&ps);
    int n = sb_layer_type_find("hawk")->add_params(&ps, "", &cfg);
    int i = 0;
    for (; names[i] != NULL; i++) {
        assert_true(i < n);
        char got[160];
        int len = snprintf(got, sizeof got, "%s", ps.p[i].name);
        for (int d = 0; d < ps.p[i].ndim; d++)
            len += snprintf(got + len, sizeof got - (size_t)len, " %d", ps.p[i].shape[d]);
        assert_string_equal(got, names[i]);
    }
    assert_int_equal(i, n);
    sb_params_free(&ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stream_memory),
        cmocka_unit_test(test_state_dict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif

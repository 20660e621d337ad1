/*
 * test_hawk.c - Hawk (src/layers/hawk.c, docs/models/hawk.md) in double precision:
 *   - finite-difference gradient checks of the new ops (ops_hawk.h): the RG-LRU scan (every
 *     input; 70 channels, so one sample's channels cross the 64-channel scan block with a
 *     ragged tail; a case with decays near 1 where sqrt(1 - a^2) is small), the block-diagonal
 *     projection, the GeLU-gated product;
 *   - the scan against a plain double recurrence written here, streamed in pieces against the
 *     whole sequence, 1 and 2 threads identical;
 *   - the initialisation rule of Lambda (sigmoid(Lambda)^8 in [0.9, 0.999], spread out);
 *   - the whole RecNet against the pure-PyTorch mimic (tests/data/models/hawk/hawk.json):
 *     names, shapes, counts at d = 16 and d = 32, initial values (first values bit for bit),
 *     float64 logits; streaming in chunks == the whole sequence.
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

#include "gradcheck.h"
#include "model_checks.h"
#include "model/model.h"
#include "ops/ops.h"
#include "ops/ops_hawk.h"
#include "test_util.h"

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

/* ---- gradient checks of the ops ------------------------------------------------------------ */

/* in: x, ga, gx, lambda */
static sb_tensor *fn_rglru(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rglru(g, in[0], in[1], in[2], in[3], 8, NULL);
}

static void rglru_gradcheck(const char *name, int B, int T, int C, double ga_lo, double ga_hi,
                            double lam_lo, double lam_hi)
{
    gc_problem p = {.name = name, .fn = fn_rglru};
    int xs[3] = {B, T, C}, ls[1] = {C};
    gc_add_input(&p, "x", 3, xs, -1.5, 1.5, 1);
    gc_add_input(&p, "ga", 3, xs, ga_lo, ga_hi, 2);
    gc_add_input(&p, "gx", 3, xs, -2, 2, 3);
    gc_add_input(&p, "lambda", 1, ls, lam_lo, lam_hi, 4);
    double worst = gc_check(&p);
    print_message("%s: max rel error %.3g\n", name, worst);
    gc_free(&p);
}

static void test_rglru_grad(void **state)
{
    (void)state;
    rglru_gradcheck("RG-LRU, 70 channels (64 + 6), T 13", 2, 13, 70, -3, 3, -1, 6);
    rglru_gradcheck("RG-LRU, 5 channels, T 1", 3, 1, 5, -3, 3, -1, 6);
    /* decays near 1: Lambda up to 9 (a0^8 up to 0.999, the initial range) and small r, where
     * sqrt(1 - a^2) is ~1e-2 and its slope large */
    rglru_gradcheck("RG-LRU, decays near 1", 2, 9, 7, -6, -2, 6, 9);
    /* fast decays: Lambda negative (a0 below 1/2), r near 1 */
    rglru_gradcheck("RG-LRU, fast decays", 2, 9, 7, 1, 4, -3, -1);
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
    sb_tensor *y = sb_block_diag_linear(&g, sb_tensor_wrap(&g, xv, 2, x1),
                                        sb_tensor_wrap(&g, wv, 3, w1), sb_tensor_wrap(&g, bv, 2, b1));
    const double want[4] = {1 * 1 + 2 * 100 + 0.5, 1 * 10 + 2 * 1000, 3 * 2 + 4 * 5,
                            3 * 3 + 4 * 7 - 1};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(y->data[i] - want[i]) < 1e-12);
    sb_graph_free(&g);
}

static sb_tensor *fn_gelu_mul(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_gelu_mul(g, in[0], in[1]);
}

static void test_gelu_mul_grad(void **state)
{
    (void)state;
    gc_problem p = {.name = "gelu(a) * v", .fn = fn_gelu_mul};
    int s[2] = {7, 9};
    gc_add_input(&p, "a", 2, s, -4, 4, 1);
    gc_add_input(&p, "v", 2, s, -2, 2, 2);
    double worst = gc_check(&p);
    print_message("gelu_mul: max rel error %.3g\n", worst);
    gc_free(&p);
}

/* ---- the scan against a plain recurrence ------------------------------------------------------ */

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
    sb_tensor *y = sb_rglru(&g, in[0], in[1], in[2], in[3], 8, NULL);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double h = 0;
            const double a0 = sigm(in[3]->data[c]);
            for (int t = 0; t < T; t++) {
                const size_t o = ((size_t)b * T + t) * C + c;
                const double a = pow(a0, 8 * sigm(in[1]->data[o])); /* a0^(c r) */
                h = a * h + sqrt(1 - a * a) * sigm(in[2]->data[o]) * in[0]->data[o];
                worst = fmax(worst, fabs(h - y->data[o]));
            }
        }
    print_message("RG-LRU vs a plain recurrence: %.3g\n", worst);
    assert_true(worst < 1e-10);

    /* streamed in pieces of 7, 1, 20, 12 frames from a carried state == the whole sequence */
    real *st = calloc((size_t)B * C, sizeof *st);
    assert_non_null(st);
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
                memcpy(part[k]->data + (size_t)b * Tc * C,
                       in[k]->data + ((size_t)b * T + t0) * C, (size_t)Tc * C * sizeof(real));
        }
        sb_tensor *yp = sb_rglru(&g, part[0], part[1], part[2], in[3], 8, st);
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
        sb_tensor *y = sb_rglru(&g, in[0], in[1], in[2], in[3], 8, NULL);
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

/* ---- the whole RecNet against the mimic ------------------------------------------------------- */

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

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/hawk/hawk.json");
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-9};
    const json_t *ref = mimic_model(&f, "hawk");
    sb_model *m = make_model(f.D, f.H, f.I, f.O, f.L, f.seed);
    check_against_mimic(ref, m, &f, &tol, "hawk");
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

static void test_lambda_init(void **state)
{
    (void)state;
    sb_model *m = make_model(64, 4, 3, 4, 1, 11);
    sb_param *p = sb_params_find(&m->params, "layers.0.temporal_block.rg_lru.a_logit");
    assert_non_null(p);
    double lo = 1, hi = 0;
    for (size_t k = 0; k < p->size; k++) {
        const double a8 = pow(sigm(p->tensor.data[k]), 8);
        lo = fmin(lo, a8), hi = fmax(hi, a8);
    }
    print_message("a0^8 over %zu channels: [%.6f, %.6f]\n", p->size, lo, hi);
    /* float32 logits: a0^8 within ~1e-6 of the interval; 88 draws cover most of it */
    assert_true(lo >= 0.9 - 1e-6 && hi <= 0.999 + 1e-6);
    assert_true(lo < 0.92 && hi > 0.98);
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
        cmocka_unit_test(test_rglru_grad),     cmocka_unit_test(test_block_diag_grad),
        cmocka_unit_test(test_gelu_mul_grad),  cmocka_unit_test(test_rglru_values),
        cmocka_unit_test(test_rglru_threads),  cmocka_unit_test(test_mimic),
        cmocka_unit_test(test_lambda_init),          cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

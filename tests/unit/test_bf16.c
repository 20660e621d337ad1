/* test_bf16.c - --precision bf16 (src/tensor/gemm_engine.h, blas.c, gemm_onednn.c):
 *   - rounding to bf16: nearest even on exact bit patterns, infinities, NaNs, overflow;
 *   - a bf16 product is the float32-accumulated product of the rounded operands (against a
 *     double-precision product of the same rounded values) on every transpose, in one oneDNN
 *     call and in deterministic blocks (1 and 2 threads: the same bits), and it differs from
 *     the float32 product (the rounding is really applied);
 *   - products below the threshold stay float32;
 *   - every registered model: forward logits in bf16 within 3e-2 of float32 on the same
 *     weights (the bound), with bf16 products really taken; a layer type with
 *     fp32_products (MesaNet) takes none and gives the float32 logits bit for bit.
 * Skipped (exit 77) in a build or on a CPU without bf16 products. */
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

#include "layers/layer.h"
#include "model/model.h"
#include "tensor/gemm_engine.h"
#include "test_util.h"

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t to_bf16(float f)
{
    uint16_t h;
    sb_bf16_from_float(1, 1, &f, 1, &h);
    return h;
}

static float bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_rounding(void **state)
{
    (void)state;
    assert_int_equal(to_bf16(1.0f), 0x3f80);
    assert_int_equal(to_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one (1) */
    assert_int_equal(to_bf16(bits(0x3f808000u)), 0x3f80);
    /* 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even one (up) */
    assert_int_equal(to_bf16(bits(0x3f818000u)), 0x3f82);
    /* just above and below a half */
    assert_int_equal(to_bf16(bits(0x3f808001u)), 0x3f81);
    assert_int_equal(to_bf16(bits(0x3f807fffu)), 0x3f80);
    assert_int_equal(to_bf16(INFINITY), 0x7f80);
    assert_int_equal(to_bf16(-INFINITY), 0xff80);
    /* the largest float rounds up to infinity, as IEEE rounding does */
    assert_int_equal(to_bf16(bits(0x7f7fffffu)), 0x7f80);
    /* NaNs stay NaNs, even those whose payload lies in the low half only */
    assert_true(isnan(from_bf16(to_bf16(NAN))));
    assert_true(isnan(from_bf16(to_bf16(bits(0x7f800001u)))));
    assert_true(isnan(from_bf16(to_bf16(bits(0xff800001u)))));
    /* a strided block: rows of a wider matrix, written densely */
    float src[3][5];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++)
            src[r][c] = (float)(r * 5 + c) + 0.5f;
    uint16_t dst[3][4];
    sb_bf16_from_float(3, 4, &src[0][0], 5, &dst[0][0]);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++)
            assert_true(from_bf16(dst[r][c]) == src[r][c]); /* exact in 8 bits */
}

/* op(X)[i][p] of a row-major X with leading dimension ld */
static float op_at(const float *X, int trans, int ld, int i, int p)
{
    return trans ? X[(size_t)p * ld + i] : X[(size_t)i * ld + p];
}

/* C = op(A) op(B) in double from the bf16-rounded operands; the largest |C| in *scale */
static double *rounded_product(int ta, int tb, int M, int N, int K, const float *A, int lda,
                               const float *B, int ldb)
{
    double *C = calloc((size_t)M * N, sizeof *C);
    for (int i = 0; i < M; i++)
        for (int p = 0; p < K; p++) {
            double a = from_bf16(to_bf16(op_at(A, ta, lda, i, p)));
            for (int j = 0; j < N; j++)
                C[(size_t)i * N + j] += a * (double)from_bf16(to_bf16(op_at(B, tb, ldb, p, j)));
        }
    return C;
}

static void product(int ta, int tb, int M, int N, int K, const float *A, const float *B, float *C)
{
    int lda = ta ? M : K, ldb = tb ? K : N;
    sb_gemm(ta, tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
}

static void set_mode(sb_precision_kind precision, int deterministic)
{
    sb_error err = {0};
    if (sb_gemm_engine_set(SB_GEMM_ONEDNN, deterministic, &err) != SB_OK ||
        sb_gemm_precision_set(precision, &err) != SB_OK)
        fail_msg("%s", err.msg);
}

static void test_products(void **state)
{
    (void)state;
    /* a row split, a column split and a K split of the deterministic path */
    static const int shapes[3][3] = {{300, 200, 150}, {40, 700, 96}, {48, 64, 5000}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++) {
            const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = t & 1, tb = t >> 1;
            float *A = test_random_matrix((size_t)M * K, 11 + s),
                  *B = test_random_matrix((size_t)K * N, 7);
            float *c32 = malloc((size_t)M * N * sizeof *c32), *c16 = malloc((size_t)M * N * 4),
                  *c1 = malloc((size_t)M * N * 4), *c2 = malloc((size_t)M * N * 4);
            double *ref = rounded_product(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N);
            set_mode(SB_PRECISION_FP32, 0);
            product(ta, tb, M, N, K, A, B, c32);
            set_mode(SB_PRECISION_BF16, 0);
            sb_gemm_flops_reset();
            product(ta, tb, M, N, K, A, B, c16);
            assert_true(sb_gemm_flops_bf16() == 2.0 * M * N * K);
            /* deterministic blocks on 1 and 2 threads */
            set_mode(SB_PRECISION_BF16, 1);
            omp_set_num_threads(1);
            product(ta, tb, M, N, K, A, B, c1);
            omp_set_num_threads(2);
            product(ta, tb, M, N, K, A, B, c2);
            assert_memory_equal(c1, c2, (size_t)M * N * sizeof *c1);
            double err16 = 0, err_det = 0, diff32 = 0;
            for (size_t i = 0; i < (size_t)M * N; i++) {
                err16 = fmax(err16, fabs((double)c16[i] - ref[i]));
                err_det = fmax(err_det, fabs((double)c1[i] - ref[i]));
                diff32 = fmax(diff32, fabs((double)c32[i] - ref[i]));
            }
            /* float32 accumulation of K products of size <= 1/4: a few 1e-6 relative */
            const double tol = 1e-6 * K;
            if (err16 > tol || err_det > tol)
                fail_msg("%dx%dx%d ta %d tb %d: bf16 product off the rounded operands' by %g "
                         "(blocks %g, tolerance %g)",
                         M, N, K, ta, tb, err16, err_det, tol);
            /* the float32 product is farther: the operands were rounded */
            if (!(diff32 > 10 * err16))
                fail_msg("%dx%dx%d: bf16 and float32 products too close (%g vs %g)", M, N, K,
                         diff32, err16);
            free(A), free(B), free(c32), free(c16), free(c1), free(c2), free(ref);
        }
    set_mode(SB_PRECISION_FP32, 0);
}

/* A product below SB_GEMM_BF16_MIN_FLOPS stays float32 (bit for bit OpenBLAS-or-oneDNN). */
static void test_small_products_stay_fp32(void **state)
{
    (void)state;
    const int M = 20, N = 30, K = 40;
    float *A = test_random_matrix((size_t)M * K, 3), *B = test_random_matrix((size_t)K * N, 4);
    float c32[20 * 30], c16[20 * 30];
    set_mode(SB_PRECISION_FP32, 0);
    product(0, 0, M, N, K, A, B, c32);
    set_mode(SB_PRECISION_BF16, 0);
    sb_gemm_flops_reset();
    product(0, 0, M, N, K, A, B, c16);
    assert_true(sb_gemm_flops_bf16() == 0);
    assert_memory_equal(c32, c16, sizeof c32);
    set_mode(SB_PRECISION_FP32, 0);
    free(A), free(B);
}

/* ---- every model ------------------------------------------------------------------------ */

enum { IN = 41, OUT = 65, WIDTH = 64, BATCH = 4, FRAMES = 300 };

static void test_logits(void **state)
{
    const sb_layer_type *type = *state;
    sb_model_config cfg = {.d_input = IN,
                           .d_output = OUT,
                           .d_model = WIDTH,
                           .n_layers = 2,
                           .d_state = 16,
                           .n_head = sb_num_heads(WIDTH),
                           .dropout = 0,
                           .rope_base = 1000};
    snprintf(cfg.model, sizeof cfg.model, "%s", type->name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create_type(type, &cfg, 5, &m, &err) != SB_OK)
        fail_msg("%s: %s", type->name, err.msg);
    /* one-hot frames, as the tasks feed them */
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    int xs[3] = {BATCH, FRAMES, IN};
    sb_tensor *x = sb_tensor_new(&g, 3, xs);
    memset(x->data, 0, x->size * sizeof(real));
    uint64_t r = 99;
    for (int f = 0; f < BATCH * FRAMES; f++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        x->data[(size_t)f * IN + (r >> 33) % IN] = 1;
    }
    set_mode(SB_PRECISION_FP32, 0);
    sb_tensor *y32 = sb_model_forward(&g, m, x);
    set_mode(SB_PRECISION_BF16, 0);
    sb_gemm_flops_reset();
    sb_tensor *y16 = sb_model_forward(&g, m, x);
    const double bf16_flops = sb_gemm_flops_bf16();
    set_mode(SB_PRECISION_FP32, 0);
    assert_int_equal(y32->size, y16->size);
    double worst = 0, largest = 0;
    for (size_t i = 0; i < y32->size; i++) {
        if (!isfinite(y16->data[i]))
            fail_msg("%s: a bf16 logit is not finite", type->name);
        worst = fmax(worst, fabs((double)y16->data[i] - (double)y32->data[i]));
        largest = fmax(largest, fabs((double)y32->data[i]));
    }
    print_message("%-24s bf16 vs fp32 logits: max |diff| %.2e (largest |logit| %.2f), bf16 "
                  "GFLOP %.3f\n",
                  type->name, worst, largest, bf16_flops / 1e9);
    if (type->fp32_products) {
        /* the layer's rule: every product of the model stays float32 */
        if (bf16_flops != 0 || worst != 0)
            fail_msg("%s: fp32_products, yet %g bf16 FLOPs moved the logits by %g", type->name,
                     bf16_flops, worst);
        sb_graph_free(&g);
        sb_model_free(m);
        return;
    }
    if (!(bf16_flops > 0))
        fail_msg("%s: no product ran in bf16", type->name);
    if (!(worst > 0))
        fail_msg("%s: bf16 logits identical to float32 (no rounding reached them)", type->name);
    if (worst > 3e-2)
        fail_msg("%s: bf16 logits differ from float32 by %g (bound 3e-2)", type->name, worst);
    sb_graph_free(&g);
    sb_model_free(m);
}

int main(void)
{
    if (!sb_onednn_bf16_supported()) {
        printf("skipped: this build or CPU has no bf16 products (oneDNN with AVX-512)\n");
        return 77;
    }
    const struct CMUnitTest core[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_small_products_stay_fp32),
    };
    int failed = cmocka_run_group_tests_name("bf16 products", core, NULL, NULL);
    const sb_layer_type *const *types = sb_layer_types();
    int n = 0;
    while (types[n] != NULL)
        n++;
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    for (int i = 0; i < n; i++) {
        tests[i].name = types[i]->name;
        tests[i].test_func = test_logits;
        tests[i].initial_state = (void *)types[i];
    }
    failed += _cmocka_run_group_tests("bf16 logits of every model", tests, (size_t)n, NULL, NULL);
    free(tests);
    return failed;
}

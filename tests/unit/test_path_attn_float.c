/*
 * test_path_attn_float.c - PaTH attention in the float build (what training uses):
 *   - the kernel against the explicit Householder products in double (path_plain.h), on a
 *     sequence long enough for rounding to build up along the walks (T 300);
 *   - the whole RecNet against the PyTorch mimic's float64 logits (tests/data/models/path_attn);
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
#include "ops/ops_path.h"
#include "path_plain.h"
#include "test_util.h"

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

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
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "path_attn");
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = f.D, cfg.n_layers = f.L;
    cfg.n_head = f.H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
        fail_msg("path_attn: %s", err.msg);
    check_against_mimic(mimic_model(&f, "path_attn"), m, &f, &tol, "path_attn");
    const double e = check_mimic_logits(mimic_model(&f, "path_attn"), m, &f, tol.logits_floor,
                                        tol.logits_tol, "path_attn");
    print_message("path_attn: logits vs the mimic's float64 logits, max rel error %.3g\n", e);
    sb_model_free(m);
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

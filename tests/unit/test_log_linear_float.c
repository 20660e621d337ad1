/*
 * test_log_linear_float.c - log_linear_mamba2 in the float build: the RecNet's logits against
 * the float64 PyTorch mimic (tests/data/models/log_linear_mamba2), its initial values and
 * counts, the streamed level recurrence against the whole-sequence form, 1 vs 2 threads, and
 * streaming memory that stays flat over many chunks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "model_checks.h"
#include "test_util.h"

static sb_model *make_model(int D, int H, int N, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "log_linear_mamba2");
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L;
    cfg.n_head = H, cfg.d_state = N, cfg.dropout = 0.1;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("log_linear_mamba2: %s", err.msg);
    return m;
}

static int config_N(const mimic_file *f)
{
    return (int)json_integer_value(json_object_get(json_object_get(f->root, "config"), "N"));
}

static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/log_linear_mamba2/log_linear_mamba2.json");
    const int N = config_N(&f);
    sb_model *m = make_model(f.D, f.H, N, f.I, f.O, f.L, f.seed);
    mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 1e-6, .logits_floor = 0.1, .logits_tol = 1e-4};
    const json_t *ref = mimic_model(&f, "log_linear_mamba2");
    check_against_mimic(ref, m, &f, &tol, "log_linear_mamba2");
    const double e = check_mimic_logits(ref, m, &f, 0.1, 1e-4, "log_linear_mamba2");
    print_message("log_linear_mamba2: float logits vs the float64 mimic: %.3g\n", e);
    sb_model_free(m);
    m = make_model(32, 4, N, f.I, f.O, f.L, f.seed);
    check_mimic_layout(mimic_model(&f, "log_linear_mamba2_d32"), m, "log_linear_mamba2 d32");
    sb_model_free(m);
    mimic_close(&f);
}

static void test_stream_float(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 11);
    const int B = 2, T = 150, chunks[4] = {1, 66, 63, 20};
    real *x = test_random_matrix((size_t)B * T * 5, 5);
    check_stream_matches_whole(m, x, B, T, chunks, 4, 2e-5, "log_linear_mamba2");
    free(x);
    sb_model_free(m);
}

static void test_threads(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 3);
    check_threads_identical(m, 3, 70, "log_linear_mamba2");
    sb_model_free(m);
}

static void test_stream_memory(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 3);
    check_stream_memory_flat(m, 2, 16, 40, "log_linear_mamba2");
    sb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_stream_float),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stream_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

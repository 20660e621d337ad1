/*
 * test_hawk_float.c - Hawk (src/layers/hawk.c) in the float build (what training uses):
 *   - the whole RecNet against the float64 logits of the PyTorch mimic
 *     (tests/data/models/hawk/hawk.json) to 1e-4, and its initial values bit for bit (first
 *     values, every Lambda and a few values of every other parameter);
 *   - identical training steps (logits and every gradient) with 1 and 2 threads;
 *   - streaming a long sequence does not grow the activation memory;
 *   - the state_dict names and shapes at d = 64 (4 gate blocks of 22 channels: R = 88).
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
#include "test_util.h"

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

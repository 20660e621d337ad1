/*
 * test_gla_family_float.c - the GLA family's new models (linear_attn, simple_gla, hgrn2) in
 * the float build (what training uses): whole RecNets against each model's float64 PyTorch
 * mimic (tests/data/models/<model>/), within 1e-4 relative to the logits (floor 0.1), the
 * state_dict layout (names, shapes, order, count), and the per-layer parameter counts of the
 * spec's table (docs/models/fla_layers.md, section 15: LinearAttention*, SimpleGLA*, HGRN2*
 * rows) at d = 64 .. 1024.
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

static const char *const model_names[] = {"linear_attn", "simple_gla", "hgrn2"};
#define N_MODELS ((int)(sizeof model_names / sizeof model_names[0]))

static void test_mimic_float(void **state)
{
    (void)state;
    for (int mi = 0; mi < N_MODELS; mi++) {
        char path[160];
        snprintf(path, sizeof path, "models/%s/%s.json", model_names[mi], model_names[mi]);
        mimic_file f;
        mimic_open(&f, path);
        const json_t *ref = mimic_model(&f, model_names[mi]);
        sb_model_config cfg = {.d_input = f.I,
                               .d_output = f.O,
                               .d_model = f.D,
                               .n_layers = f.L,
                               .n_head = f.H,
                               .dropout = 0.2};
        snprintf(cfg.model, sizeof cfg.model, "%s", model_names[mi]);
        sb_model *m = NULL;
        sb_error err = {0};
        if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
            fail_msg("%s: %s", model_names[mi], err.msg);
        check_mimic_layout(ref, m, model_names[mi]);
        double worst = check_mimic_logits(ref, m, &f, 0.1, 1e-4, model_names[mi]);
        print_message("%s: float logits vs the float64 mimic: %.3g\n", model_names[mi], worst);
        sb_model_free(m);
        mimic_close(&f);
    }
}

/* the spec's per-layer counts, H = get_num_heads(d, 128) */
static const int dims[5] = {64, 128, 256, 512, 1024};
static const long long layer_count[3][5] = {
    {17488, 69792, 278848, 1114752, 4260480},  /* 4d^2 + 4(d_k^2 + d_k) + d_k */
    {34084, 133700, 529540, 2107652, 8413448}, /* 8d^2 + dH + H + 16d + 2d/H */
    {16448, 65664, 262400, 1049088, 4195328},  /* 4d^2 + d */
};

static void test_layer_counts(void **state)
{
    (void)state;
    for (int mi = 0; mi < N_MODELS; mi++)
        for (int di = 0; di < 5; di++) {
            sb_model_config cfg = {.d_input = 41,
                                   .d_output = 1601,
                                   .d_model = dims[di],
                                   .n_layers = 1,
                                   .n_head = sb_num_heads(dims[di])};
            snprintf(cfg.model, sizeof cfg.model, "%s", model_names[mi]);
            sb_params ps;
            sb_params_init(&ps);
            sb_layer_type_find(model_names[mi])->add_params(&ps, "layers.0.", &cfg);
            long long n = 0;
            for (int i = 0; i < ps.n; i++)
                n += (long long)ps.p[i].size;
            sb_params_free(&ps);
            if (n != layer_count[mi][di])
                fail_msg("%s d=%d: %lld parameters per layer, spec %lld", model_names[mi], dims[di],
                         n, layer_count[mi][di]);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_layer_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

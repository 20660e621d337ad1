/*
 * test_gla_family_float.c - the GLA family's new models (linear_attn, simple_gla, hgrn2) in
 * the float build (what training uses): whole RecNets against each model's float64 PyTorch
 * mimic (tests/data/models/<model>/), within 1e-4 relative to the logits (floor 0.1), and the
 * state_dict layout (names, shapes, order, count).
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

#include "model_checks.h"
#include "model/model.h"
#include "test_util.h"

static const char *const model_names[] = {"linear_attn", "simple_gla"};
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
        sb_model_config cfg = {.d_input = f.I, .d_output = f.O, .d_model = f.D, .n_layers = f.L,
                               .n_head = f.H, .dropout = 0.2};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

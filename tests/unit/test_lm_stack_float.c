/*
 * test_lm_stack_float.c - the *_layered models in the float build (the one that trains):
 *   - initial weights bit for bit and logits against the float64 PyTorch mimic
 *     (tests/data/layered/layered_mimic.json);
 *   - kernel K4 in float: the blocked form (fast exp, per-block gate reference) against the
 *     plain form on long sequences whose cumulative gates reach -2000;
 *   - one training step on 1 and on 2 threads: identical logits and gradients.
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
#include "ops/ops_layered.h"
#include "test_util.h"

static const char *const names[4] = {"gla_layered", "delta_net_layered", "gated_delta_net_layered",
                                     "fox_layered"};

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

static sb_model *make_model(const char *name, int D, int F, int C, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = F, cfg.d_output = C, cfg.d_model = D, cfg.n_layers = L;
    cfg.n_head = sb_num_heads(D);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    return m;
}

static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "layered/layered_mimic.json");
    for (int mi = 0; mi < 4; mi++) {
        const json_t *ref = mimic_model(&f, names[mi]);
        const int D = (int)json_integer_value(json_object_get(ref, "d"));
        sb_model *m = make_model(names[mi], D, f.I, f.O, f.L, f.seed);
        check_mimic_sampled_values(ref, m, names[mi]);
        check_mimic_logits(ref, m, &f, 0.1, 1e-5, names[mi]);
        sb_model_free(m);
    }
    mimic_close(&f);
}

static void test_k4_float(void **state)
{
    (void)state;
    const int B = 1, T = 1500, H = 2, Dh = 8;
    int qs[4] = {B, T, H, Dh}, fs[3] = {B, T, H};
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    sb_tensor *q = sb_tensor_new(&g, 4, qs), *k = sb_tensor_new(&g, 4, qs);
    sb_tensor *v = sb_tensor_new(&g, 4, qs), *f = sb_tensor_new(&g, 3, fs);
    lcg = 5;
    for (size_t i = 0; i < q->size; i++) {
        q->data[i] = (real)urand(-2, 2);
        k->data[i] = (real)urand(-2, 2);
        v->data[i] = (real)urand(-1, 1);
    }
    /* head 0: slow forgetting (F reaches about -150); head 1: fast (about -2000) */
    for (int t = 0; t < T; t++) {
        f->data[(size_t)t * H] = (real)urand(-0.2, 0);
        f->data[(size_t)t * H + 1] = (real)urand(-2.6, 0);
    }
    sb_tensor *a = sb_forgetting_attn(&g, q, k, v, f);
    sb_tensor *b = sb_forgetting_attn_ref(&g, q, k, v, f);
    double worst = 0;
    for (size_t i = 0; i < a->size; i++)
        worst = fmax(worst, fabs((double)a->data[i] - (double)b->data[i]));
    if (!(worst < 2e-5))
        fail_msg("K4 float: blocked and plain forms differ by %g", worst);
    sb_graph_free(&g);
}

static void test_threads(void **state)
{
    (void)state;
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(names[mi], 64, 9, 20, 2, 3);
        check_threads_identical(m, 4, 150, names[mi]);
        sb_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_k4_float),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

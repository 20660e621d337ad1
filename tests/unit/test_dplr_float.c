/*
 * test_dplr_float.c - the layers on the diagonal-plus-low-rank recurrence (kda, rwkv7) in the float
 * build: state_dict, initial values bit for bit and logits against the PyTorch mimic's float64
 * forward to 1e-4 (tests/data/models/<name>/<name>.json), and the op itself against the
 * double-precision recurrence written in the test (float vs double, 1e-5).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "model_checks.h"
#include "ops/ops_dplr.h"
#include "test_util.h"

static void check_model_mimic(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "models/%s/%s.json", name, name);
    mimic_file f;
    mimic_open(&f, path);
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-4};
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = f.D, cfg.n_layers = f.L, cfg.n_head = f.H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    check_against_mimic(mimic_model(&f, name), m, &f, &tol, name);
    sb_model_free(m);
    mimic_close(&f);
}

static void test_kda_mimic_float(void **state)
{
    (void)state;
    check_model_mimic("kda");
}

/* float op against a double recurrence of the undecayed order over 40 tokens */
static void test_dplr_float_vs_double(void **state)
{
    (void)state;
    enum { T = 40, K = 5, V = 6 };
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    const int ks[4] = {1, T, 1, K}, vs[4] = {1, T, 1, V};
    sb_tensor *in[6];
    unsigned s = 9;
    for (int i = 0; i < 6; i++) {
        in[i] = sb_tensor_new(&g, 4, i == 2 ? vs : ks);
        for (size_t j = 0; j < in[i]->size; j++) {
            s = s * 1664525u + 1013904223u;
            const double u = (double)(s >> 8) / 16777216.0;
            in[i]->data[j] = (real)(i == 3 ? -u : (i >= 4 ? 0.8 * (u - 0.5) : 2 * u - 1));
        }
    }
    for (int order = 0; order < 2; order++) {
        sb_tensor *o = sb_dplr(&g, in[0], in[1], in[2], in[3], in[4], in[5], 1,
                               (sb_dplr_order)order, SB_DPLR_CHUNK, NULL);
        double S[K][V] = {{0}}, worst = 0;
        for (int t = 0; t < T; t++) {
            const real *q = in[0]->data + t * K, *k = in[1]->data + t * K;
            const real *v = in[2]->data + t * V, *w = in[3]->data + t * K;
            const real *a = in[4]->data + t * K, *b = in[5]->data + t * K;
            double P[K][V], z[V] = {0};
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    P[c][x] = order == SB_DPLR_DECAYED ? exp((double)w[c]) * S[c][x] : S[c][x];
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    z[x] += (double)a[c] * P[c][x];
            for (int c = 0; c < K; c++)
                for (int x = 0; x < V; x++)
                    S[c][x] = exp((double)w[c]) * S[c][x] + (double)b[c] * z[x] +
                              (double)k[c] * (double)v[x];
            for (int x = 0; x < V; x++) {
                double r = 0;
                for (int c = 0; c < K; c++)
                    r += (double)q[c] * S[c][x];
                worst = fmax(worst, fabs(r - (double)o->data[t * V + x]));
            }
        }
        print_message("dplr order %d: float vs double %.3g\n", order, worst);
        assert_true(worst < 1e-5);
    }
    sb_graph_free(&g);
}

static void test_rwkv7_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/rwkv7/rwkv7.json");
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "rwkv7");
    cfg.d_input = f.I, cfg.d_output = f.O, cfg.d_model = f.D, cfg.n_layers = f.L, cfg.n_head = f.H;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f.seed, &m, &err) != SB_OK)
        fail_msg("rwkv7: %s", err.msg);
    const json_t *ref = mimic_model(&f, "rwkv7");
    check_mimic_layout(ref, m, "rwkv7");
    check_mimic_sum_and_first(ref, m, 1e-6, 1e-4, "rwkv7");
    /* the mimic's set_formula_weights (see test_dplr.c) */
    for (int ti = 0; ti < m->params.n; ti++) {
        sb_param *p = &m->params.p[ti];
        const size_t len = strlen(p->name);
        const int nw =
            strstr(p->name, "norm") != NULL && len >= 6 && strcmp(p->name + len - 6, "weight") == 0;
        for (size_t j = 0; j < p->size; j++)
            p->tensor.data[j] = (real)(0.2 * sin(0.7 * (double)j + 1.3 * ti + 0.2) + (nw ? 1 : 0));
    }
    check_mimic_logits(ref, m, &f, 1e-3, 1e-4, "rwkv7");
    sb_model_free(m);
    mimic_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dplr_float_vs_double),
        cmocka_unit_test(test_kda_mimic_float),
        cmocka_unit_test(test_rwkv7_mimic_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

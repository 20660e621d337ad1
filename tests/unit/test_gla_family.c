/*
 * test_gla_family.c - the GLA family's new models: linear_attn (docs/models/linear_attn.md),
 * simple_gla, hgrn2. One source, built twice.
 *
 * test_gla_family, the double build (SB_REAL_DOUBLE):
 *   - finite-difference gradient checks of the new ops (ops_gla_family.h: the Hadamard
 *     feature map with every input, HGRN2's 1 - exp key) on shapes with ragged sizes, and
 *     HGRN2's recurrence as one chain (logsigmoid, tied key, K1 with 8-token chunks crossed
 *     with a ragged tail, decays strong enough for K1's term-by-term chunks);
 *     kernel K1 itself, with every gate variant these layers use (none, per head, per
 *     channel), is checked in test_linear_attn_kernels.c;
 *   - whole RecNets against each model's pure-PyTorch mimic (tests/data/models/<model>/):
 *     state_dict names, shapes, initial sums and first values bit for bit, trainable counts
 *     at d = 16 and d = 32, float64 logits on a sequence crossing K1's chunk twice (~1e-9).
 * test_gla_family_float, the float build (what training uses):
 *   - whole RecNets against each model's float64 PyTorch mimic, within 1e-4 relative to the
 *     logits (floor 0.1), the state_dict layout (names, shapes, order, count);
 *   - the per-layer parameter counts of the spec's table (docs/models/fla_layers.md, section
 *     15: LinearAttention*, SimpleGLA*, HGRN2* rows) at d = 64 .. 1024.
 * The registry-driven tests (test_every_model*) check the whole models' gradients, streaming
 * and checkpoints.
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
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_gla_family.h"
#include "test_util.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

static const char *const model_names[] = {"linear_attn", "simple_gla", "hgrn2"};
#define N_MODELS ((int)(sizeof model_names / sizeof model_names[0]))

#ifdef SB_REAL_DOUBLE

/* ---- the new ops ------------------------------------------------------------------------- */

/* in: x, w1, b1, w2, b2 */
static sb_tensor *fn_hadamard(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_hadamard_map(g, in[0], in[1], in[2], in[3], in[4]);
}

static void test_hadamard_map_grad(void **state)
{
    (void)state;
    /* x [B, T, H, Din] as the layer gives it (heads of the projection), Dout != Din so that a
     * transposed weight fails */
    gc_problem p = {.name = "Hadamard feature map", .fn = fn_hadamard};
    int xs[4] = {2, 5, 3, 4}, ws[2] = {6, 4}, bs[1] = {6};
    gc_add_input(&p, "x", 4, xs, -1.5, 1.5, 1);
    gc_add_input(&p, "w1", 2, ws, -1, 1, 2);
    gc_add_input(&p, "b1", 1, bs, -1, 1, 3);
    gc_add_input(&p, "w2", 2, ws, -1, 1, 4);
    gc_add_input(&p, "b2", 1, bs, -1, 1, 5);
    double e = gc_check(&p);
    print_message("Hadamard feature map: max rel error %.3g\n", e);
    gc_free(&p);
    /* values: one row against the formula */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    int s1[2] = {1, 2}, s2[2] = {2, 2}, s3[1] = {2};
    real xv[2] = {0.5, -2}, w1v[4] = {1, 2, -1, 0.5}, b1v[2] = {0.25, -1};
    real w2v[4] = {0, 3, 2, -1}, b2v[2] = {1, 0.5};
    sb_tensor *y = sb_hadamard_map(&g, sb_tensor_wrap(&g, xv, 2, s1),
                                   sb_tensor_wrap(&g, w1v, 2, s2), sb_tensor_wrap(&g, b1v, 1, s3),
                                   sb_tensor_wrap(&g, w2v, 2, s2), sb_tensor_wrap(&g, b2v, 1, s3));
    const double a0 = 0.5 - 4 + 0.25, a1 = -0.5 - 1 - 1, c0 = -6 + 1, c1 = 1 + 2 + 0.5;
    assert_true(fabs(y->data[0] - a0 * c0) < 1e-15);
    assert_true(fabs(y->data[1] - a1 * c1) < 1e-15);
    sb_graph_free(&g);
}

static sb_tensor *fn_one_minus_exp(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_one_minus_exp(g, in[0]);
}

static void test_one_minus_exp_grad(void **state)
{
    (void)state;
    /* log forget gates as HGRN2 makes them: logsigmoid values, from strong to weak decay */
    gc_problem p = {.name = "HGRN2 key 1 - exp(g)", .fn = fn_one_minus_exp};
    int s[4] = {2, 7, 3, 5};
    gc_add_input(&p, "g", 4, s, -9, -1e-3, 1);
    double e = gc_check(&p);
    print_message("1 - exp(g): max rel error %.3g\n", e);
    gc_free(&p);
}

/* HGRN2's recurrence as one chain: g = logsigmoid(f), k = 1 - exp(g), o = K1(q, k, v, g) with
 * the layer's 8-token chunks; in: q, f, v */
static sb_tensor *fn_hgrn2_core(sb_graph *g, sb_tensor **in, void *ctx)
{
    const int chunk = *(const int *)ctx;
    sb_tensor *gf = sb_logsigmoid(g, in[1], 1);
    sb_tensor *k = sb_one_minus_exp(g, gf);
    return sb_linear_attn(g, in[0], k, in[2], gf, (real)0.5, chunk, NULL);
}

static void test_hgrn2_core_grad(void **state)
{
    (void)state;
    /* T = 19 = 8 + 8 + 3; f down to -7 makes some chunks decay below exp(-30) (K1's
     * term-by-term form), f up to 4 leaves keys near 0 */
    const int chunks[2] = {8, 0};
    for (int c = 0; c < 2; c++) {
        int chunk = chunks[c] > 0 ? chunks[c] : 19;
        gc_problem p = {.name = c == 0 ? "HGRN2 core, chunk 8" : "HGRN2 core, one chunk",
                        .fn = fn_hgrn2_core,
                        .ctx = &chunk};
        int qs[4] = {2, 19, 2, 4}, vs[4] = {2, 19, 2, 3};
        gc_add_input(&p, "q", 4, qs, -1, 1, 1);
        gc_add_input(&p, "f", 4, qs, -7, 4, 2);
        gc_add_input(&p, "v", 4, vs, -1, 1, 3);
        double e = gc_check(&p);
        print_message("%s: max rel error %.3g\n", p.name, e);
        gc_free(&p);
    }
}

/* ---- whole models against the mimics ------------------------------------------------------ */

static sb_model *make_model(const char *name, int D, int H, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L, cfg.n_head = H;
    cfg.dropout = 0;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", name, err.msg);
    return m;
}

static void test_mimic(void **state)
{
    (void)state;
    /* first values bit for bit (first_rtol 0) */
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 0, .logits_floor = 1e-3, .logits_tol = 1e-9};
    for (int mi = 0; mi < N_MODELS; mi++) {
        char path[160];
        snprintf(path, sizeof path, "models/%s/%s.json", model_names[mi], model_names[mi]);
        mimic_file f;
        mimic_open(&f, path);
        const json_t *ref = mimic_model(&f, model_names[mi]);
        sb_model *m = make_model(model_names[mi], f.D, f.H, f.I, f.O, f.L, f.seed);
        check_against_mimic(ref, m, &f, &tol, model_names[mi]);
        sb_model_free(m);
        /* the count at the second width, without allocating */
        sb_model_config cfg = {
            .d_input = f.I, .d_output = f.O, .d_model = 32, .n_layers = f.L, .n_head = f.H};
        snprintf(cfg.model, sizeof cfg.model, "%s", model_names[mi]);
        size_t count = 0;
        sb_error err = {0};
        assert_int_equal(sb_model_param_count(&cfg, &count, &err), SB_OK);
        assert_int_equal((long long)count,
                         (long long)json_integer_value(json_object_get(ref, "count_d32")));
        print_message("%s: mimic matched; counts d=16 %lld, d=32 %lld\n", model_names[mi],
                      (long long)json_integer_value(json_object_get(ref, "count")),
                      (long long)count);
        mimic_close(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hadamard_map_grad),
        cmocka_unit_test(test_one_minus_exp_grad),
        cmocka_unit_test(test_hgrn2_core_grad),
        cmocka_unit_test(test_mimic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

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

#endif

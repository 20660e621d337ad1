/*
 * test_linear_attn_layers.c - the four fla layers inside RecNet, in double precision:
 *   - parameter names, shapes, order, initial values and the forward against a pure-PyTorch
 *     mimic (tests/data/fla/make_recnet_mimic.py: construction order and special inits of fla
 *     v0.3.2, forward written from the spec with naive recurrences);
 *   - finite-difference gradient checks of whole RecNets (every parameter and the input),
 *     sequences crossing the layers' chunk boundaries with a ragged tail, parameters moved off
 *     their initial values;
 *   - streaming in chunks == the whole sequence;
 *   - the A_log / dt_bias initialisers against torch's values.
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
#include "model/model.h"
#include "model_checks.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "test_util.h"

static const char *const model_names[4] = {"gla", "delta_net", "gated_delta_net",
                                           "gated_delta_product"};

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

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

/* ---- against the PyTorch mimic ------------------------------------------------------------- */

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "fla/recnet_mimic_seed3.json");
    /* float32 values drawn as torch draws them: the sums and first values equal up to the last
     * bit of the float32 logs/exps of A_log and dt_bias */
    const mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 1e-6, .logits_floor = 1e-3, .logits_tol = 1e-8};
    for (int mi = 0; mi < 4; mi++) {
        const json_t *ref = mimic_model(&f, model_names[mi]);
        sb_model *m = make_model(model_names[mi], f.D, f.H, f.I, f.O, f.L, f.seed);
        check_against_mimic(ref, m, &f, &tol, model_names[mi]);
        sb_model_free(m);
    }
    mimic_close(&f);
}

/* ---- whole-model gradient checks ------------------------------------------------------------- */

typedef struct model_gc {
    sb_model *m;
} model_gc;

typedef struct params_ctx {
    sb_tensor *flat;
    sb_params *ps;
} params_ctx;

/* Recorded first, run last: hands the parameters' gradients to the flat input. */
static void params_backward(sb_graph *g, void *ctx)
{
    params_ctx *c = ctx;
    real *d = sb_tensor_grad(g, c->flat);
    for (size_t i = 0; i < c->ps->total; i++)
        d[i] += c->ps->grad[i];
}

static sb_tensor *fn_model(sb_graph *g, sb_tensor **in, void *ctx)
{
    model_gc *mc = ctx;
    sb_params *ps = &mc->m->params;
    memcpy(ps->data, in[1]->data, ps->total * sizeof(real));
    sb_params_zero_grad(ps);
    params_ctx *pc = sb_graph_record(g, params_backward, sizeof *pc);
    if (pc != NULL)
        pc->flat = in[1], pc->ps = ps;
    return sb_model_forward(g, mc->m, in[0]);
}

/* Moves every parameter off its initial value (norm weights around 1, the rest by a small
 * relative amount plus noise) so that gates, biases and norm weights have non-trivial
 * gradients. */
static void perturb(sb_model *m)
{
    for (int i = 0; i < m->params.n; i++) {
        sb_param *p = &m->params.p[i];
        int is_norm = strstr(p->name, "norm") != NULL;
        for (size_t k = 0; k < p->size; k++) {
            real *v = &p->tensor.data[k];
            if (is_norm && strstr(p->name, "bias") == NULL)
                *v = urand(0.6, 1.4);
            else
                *v = *v * urand(0.8, 1.2) + urand(-0.1, 0.1);
        }
    }
}

static void model_gradcheck(const char *name, int T)
{
    const int D = 8, H = 2, I = 3, O = 4, L = 2, B = 2;
    sb_model *m = make_model(name, D, H, I, O, L, 5);
    lcg = 17;
    perturb(m);
    model_gc mc = {m};
    char title[96];
    snprintf(title, sizeof title, "RecNet of %s, T = %d", name, T);
    /* step 3e-6: at 1e-6 the rounding noise of a loss summed over hundreds of logits (~1e-8)
     * reaches the tolerance, at 1e-5 the truncation error does where the L2 norms of small
     * keys make the function sharp; in between both stay near 1e-9 */
    gc_problem p = {.name = title, .fn = fn_model, .ctx = &mc, .step = 3e-6};
    int xs[3] = {B, T, I}, ps[1] = {(int)m->params.total};
    gc_add_input(&p, "input", 3, xs, -1, 1, 1);
    sb_tensor *flat = gc_add_input(&p, "parameters", 1, ps, 0, 0, 2);
    memcpy(flat->data, m->params.data, m->params.total * sizeof(real));
    gc_check(&p);
    /* every parameter tensor gets a non-zero gradient */
    gc_check_every_param_has_gradient(&p, m, 0, title);
    gc_free(&p);
    sb_model_free(m);
}

/* T crosses the layers' chunks twice, with a tail. */
static void test_gradcheck_gla(void **state)
{
    (void)state;
    model_gradcheck("gla", 2 * SB_LINEAR_ATTN_CHUNK + 3);
}

static void test_gradcheck_delta_net(void **state)
{
    (void)state;
    model_gradcheck("delta_net", 2 * SB_DELTA_RULE_CHUNK + 3);
}

static void test_gradcheck_gated_delta_net(void **state)
{
    (void)state;
    model_gradcheck("gated_delta_net", 2 * SB_DELTA_RULE_CHUNK + 3);
    model_gradcheck("gated_delta_net", 5); /* shorter than a chunk */
}

static void test_gradcheck_gated_delta_product(void **state)
{
    (void)state;
    model_gradcheck("gated_delta_product", 2 * 8 + 3); /* its chunks are 8 tokens */
}

/* ---- streaming ------------------------------------------------------------------------------- */

static void test_stream(void **state)
{
    (void)state;
    const int D = 8, H = 2, I = 3, O = 4, L = 2, B = 3, T = 75;
    const int chunks[4] = {5, 1, 33, 36};
    real *x = malloc((size_t)B * T * I * sizeof *x);
    assert_non_null(x);
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(model_names[mi], D, H, I, O, L, 9);
        lcg = 23;
        perturb(m);
        for (size_t i = 0; i < (size_t)B * T * I; i++)
            x[i] = urand(-1, 1);
        check_stream_matches_whole(m, x, B, T, chunks, 4, 1e-12, model_names[mi]);
        sb_model_free(m);
    }
    free(x);
}

/* ---- initialisers ---------------------------------------------------------------------------- */

/* torch.manual_seed(s); A = torch.empty(8).uniform_(0, 16); log(A); then torch.rand(8) for
 * dt (gated_deltanet.py v0.3.2), printed by torch 1.13. */
static const struct {
    uint32_t seed;
    double A_log[8], dt_bias[8];
} init_ref[] = {
    {0,
     {2.07192659, 2.50891185, 0.347580969, 0.747866273, 1.59305751, 2.31700659, 2.05942941,
      2.66327},
     {-4.80543232, -3.98666739, -5.29854727, -5.05459738, -6.80438757, -6.1290431, -5.55241299,
      -4.51442432}},
    {1,
     {2.49503064, 1.49715889, 1.86394179, 2.46427464, -0.758208692, 2.54926848, 1.84911561,
      2.49071908},
     {-4.27817774, -4.88333464, -3.95703864, -4.48597288, -3.75258589, -5.50045109, -4.76881838,
      -4.8083992}},
    {12345,
     {2.75413775, 2.64430809, 2.76470113, 1.99837732, 0.286272496, 1.04903591, 1.77137041,
      2.20633793},
     {-5.35065079, -5.93037748, -4.78778648, -3.13147402, -2.65661287, -5.74042177, -5.92396832,
      -4.70673752}},
};

void sb_fla_init_A_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx);
void sb_fla_init_dt_bias(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx);

static void test_init_vectors(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof init_ref / sizeof *init_ref; c++) {
        sb_mt19937 rng;
        sb_mt19937_init_genrand(&rng, init_ref[c].seed);
        sb_param p;
        memset(&p, 0, sizeof p);
        p.size = 8;
        real a[8], dt[8];
        sb_fla_init_A_log(&p, a, &rng, NULL);
        sb_fla_init_dt_bias(&p, dt, &rng, NULL);
        for (int i = 0; i < 8; i++) {
            /* printed with 9 digits: float32 round trip, 1 ulp allowed for libm vs Sleef */
            assert_true(fabs(a[i] - init_ref[c].A_log[i]) <= 3e-7 * fabs(init_ref[c].A_log[i]));
            assert_true(fabs(dt[i] - init_ref[c].dt_bias[i]) <=
                        3e-7 * fabs(init_ref[c].dt_bias[i]));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_vectors),
        cmocka_unit_test(test_mimic),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_gradcheck_gla),
        cmocka_unit_test(test_gradcheck_delta_net),
        cmocka_unit_test(test_gradcheck_gated_delta_net),
        cmocka_unit_test(test_gradcheck_gated_delta_product),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_fla_layers.c - the four fla layers inside RecNet, in double precision:
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
#include "selectivbench/model.h"
#include "selectivbench/ops.h"
#include "selectivbench/ops_fla.h"
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
    json_t *root = test_load_json("fla/recnet_mimic_seed3.json");
    json_t *cfg = json_object_get(root, "config");
    const int I = (int)json_integer_value(json_object_get(cfg, "I"));
    const int D = (int)json_integer_value(json_object_get(cfg, "d"));
    const int O = (int)json_integer_value(json_object_get(cfg, "O"));
    const int L = (int)json_integer_value(json_object_get(cfg, "L"));
    const int H = (int)json_integer_value(json_object_get(cfg, "H"));
    const int B = (int)json_integer_value(json_object_get(cfg, "B"));
    const int T = (int)json_integer_value(json_object_get(cfg, "T"));
    const uint64_t seed = (uint64_t)json_integer_value(json_object_get(cfg, "seed"));
    json_t *input = json_object_get(root, "input");
    assert_int_equal(json_array_size(input), (size_t)B * T * I);
    for (int mi = 0; mi < 4; mi++) {
        json_t *ref = json_object_get(json_object_get(root, "models"), model_names[mi]);
        assert_non_null(ref);
        sb_model *m = make_model(model_names[mi], D, H, I, O, L, seed);
        /* parameters: names, shapes and order of the state_dict; initial values */
        json_t *params = json_object_get(ref, "params");
        assert_int_equal(json_array_size(params), (size_t)m->params.n);
        assert_int_equal(json_integer_value(json_object_get(ref, "count")), m->params.count);
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *p = &m->params.p[i];
            json_t *rp = json_array_get(params, (size_t)i);
            const char *rname = json_string_value(json_object_get(rp, "name"));
            if (strcmp(p->name, rname) != 0)
                fail_msg("%s: parameter %d is %s, the reference has %s", model_names[mi], i,
                         p->name, rname);
            json_t *shape = json_object_get(rp, "shape");
            assert_int_equal(json_array_size(shape), (size_t)p->ndim);
            for (int d = 0; d < p->ndim; d++)
                assert_int_equal(json_integer_value(json_array_get(shape, (size_t)d)), p->shape[d]);
            double sum = 0;
            for (size_t k = 0; k < p->size; k++)
                sum += p->tensor.data[k];
            double rsum = json_real_value(json_object_get(rp, "sum"));
            /* float32 values drawn as torch draws them: equal up to the last bit of the
             * float32 logs/exps of A_log and dt_bias */
            if (!(fabs(sum - rsum) <= 1e-6 * (1 + fabs(rsum))))
                fail_msg("%s: %s sums to %.10g, reference %.10g", model_names[mi], p->name, sum,
                         rsum);
            json_t *first = json_object_get(rp, "first");
            for (size_t k = 0; k < json_array_size(first); k++) {
                double rv = json_real_value(json_array_get(first, k));
                if (!(fabs(p->tensor.data[k] - rv) <= 1e-6 * fabs(rv)))
                    fail_msg("%s: %s[%zu] = %.9g, reference %.9g", model_names[mi], p->name, k,
                             (double)p->tensor.data[k], rv);
            }
        }
        /* forward */
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        int xs[3] = {B, T, I};
        sb_tensor *x = sb_tensor_new(&g, 3, xs);
        for (size_t i = 0; i < x->size; i++)
            x->data[i] = json_real_value(json_array_get(input, i));
        sb_tensor *y = sb_model_forward(&g, m, x);
        json_t *logits = json_object_get(ref, "logits");
        assert_int_equal(json_array_size(logits), y->size);
        double worst = 0;
        for (size_t i = 0; i < y->size; i++) {
            double rv = json_real_value(json_array_get(logits, i));
            double e = fabs(y->data[i] - rv) / (1e-3 + fabs(rv));
            worst = e > worst || isnan(e) ? e : worst;
        }
        if (!(worst < 1e-8))
            fail_msg("%s: logits differ from the mimic by %g (relative)", model_names[mi], worst);
        sb_graph_free(&g);
        sb_model_free(m);
    }
    json_decref(root);
}

/* ---- whole-model gradient checks --------------------------------------------------------------
 */

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
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    g.record = 1;
    sb_tensor *in[2] = {&p.inputs[0].tensor, flat};
    in[0]->grad = in[1]->grad = NULL;
    sb_tensor *y = fn_model(&g, in, &mc);
    real *dy = sb_tensor_grad(&g, y);
    for (size_t i = 0; i < y->size; i++)
        dy[i] = (real)sin(0.37 * (double)i + 1);
    sb_graph_backward(&g);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *pp = &m->params.p[i];
        double mx = 0;
        for (size_t k = 0; k < pp->size; k++)
            mx = fmax(mx, fabs(m->params.grad[pp->offset + k]));
        if (!(mx > 0))
            fail_msg("%s: the gradient of %s is zero", title, pp->name);
    }
    sb_graph_free(&g);
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

/* ---- streaming ----------------------------------------------------------------------------------
 */

static void test_stream(void **state)
{
    (void)state;
    const int D = 8, H = 2, I = 3, O = 4, L = 2, B = 3, T = 75;
    const int chunks[4] = {5, 1, 33, 36};
    for (int mi = 0; mi < 4; mi++) {
        sb_model *m = make_model(model_names[mi], D, H, I, O, L, 9);
        lcg = 23;
        perturb(m);
        assert_true(sb_model_can_stream(m));
        sb_graph g;
        sb_graph_init(&g, 1 << 22);
        int xs[3] = {B, T, I};
        sb_tensor *x = sb_tensor_new(&g, 3, xs);
        for (size_t i = 0; i < x->size; i++)
            x->data[i] = urand(-1, 1);
        sb_tensor *whole = sb_model_hidden(&g, m, x, 0);
        const size_t sf = m->type->stream_state_floats(&m->cfg);
        real *buf = calloc((size_t)L * B * sf, sizeof(real));
        real *states[2] = {buf, buf + (size_t)B * sf};
        int t0 = 0;
        double worst = 0;
        for (int c = 0; c < 4; c++) {
            int cs[3] = {B, chunks[c], I};
            sb_arena_mark mark = sb_arena_get_mark(&g.arena);
            sb_tensor *xc = sb_tensor_new(&g, 3, cs);
            for (int b = 0; b < B; b++)
                memcpy(xc->data + (size_t)b * chunks[c] * I, x->data + ((size_t)b * T + t0) * I,
                       (size_t)chunks[c] * I * sizeof(real));
            sb_tensor *yc = sb_model_hidden_stream(&g, m, xc, states);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < chunks[c]; t++)
                    for (int j = 0; j < D; j++) {
                        double e = fabs(yc->data[((size_t)b * chunks[c] + t) * D + j] -
                                        whole->data[((size_t)b * T + t0 + t) * D + j]);
                        worst = e > worst || isnan(e) ? e : worst;
                    }
            sb_arena_reset_to(&g.arena, mark);
            t0 += chunks[c];
        }
        if (!(worst < 1e-12))
            fail_msg("%s: streaming differs from the whole sequence by %g", model_names[mi], worst);
        free(buf);
        sb_graph_free(&g);
        sb_model_free(m);
    }
}

/* ---- initialisers -------------------------------------------------------------------------------
 */

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

/*
 * test_every_model.c - the checks every registered model must pass, driven by the registry
 * (sb_layer_types()): a model added with one file and one SB_LAYER line is tested here with no
 * edit. Shapes are the tiniest that still cross the layer's own chunk (sb_layer_type.test_chunk)
 * with a ragged tail.
 *
 * Compiled twice (tests/CMakeLists.txt):
 *   test_every_model_grad (double library):
 *     - the registry's order and names are layers.def's;
 *     - whole-model finite-difference gradient check (tolerance sb_layer_type.grad_rtol), the
 *       parameters moved off their initial values: every element of every parameter and of
 *       the input on a short sequence (every parameter tensor gets a non-zero gradient), then
 *       along random directions of all parameters on a sequence crossing the chunk twice;
 *     - streaming in chunks == the whole sequence (layers with forward_stream), 1e-10;
 *   test_every_model (float library):
 *     - one training step on 1 and 2 threads: logits and gradients identical bit for bit;
 *     - checkpoint round trip: saved, loaded into a model with other initial weights, the
 *       same parameters bit for bit and the same logits;
 *     - streaming == the whole sequence in float, 1e-4.
 * Float vs double agreement of every model is test_float_double (registry-driven too).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/model.h"
#include "model_checks.h"
#include "ops/ops.h"
#include "test_util.h"
#include "train/checkpoint.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

/* the tiny configuration every model is built with: width sb_layer_type.test_width (8 if 0) */
enum { I = 5, O = 7, L = 2 };

static sb_model *make_model(const sb_layer_type *type, uint64_t seed)
{
    const int D = type->test_width > 0 ? type->test_width : 8;
    sb_model_config cfg = {.d_input = I,
                           .d_output = O,
                           .d_model = D,
                           .n_layers = L,
                           .d_state = 4,
                           .n_head = 2,
                           .dropout = 0,
                           .rope_base = 1000};
    snprintf(cfg.model, sizeof cfg.model, "%s", type->name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create_type(type, &cfg, seed, &m, &err) != SB_OK)
        fail_msg("%s: %s", type->name, err.msg);
    return m;
}

/* Frames that cross the layer's chunk twice with a tail (at least `least`). */
static int frames_crossing(const sb_layer_type *type, int least)
{
    const int T = 2 * type->test_chunk + 3;
    return T > least ? T : least;
}

static unsigned lcg = 1;
static double urand(double lo, double hi)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(lcg >> 8) / 16777216.0;
}

/* Moves every parameter off its initial value (norm weights around 1, the rest by a small
 * relative amount plus noise) so that gates, biases and norm weights have generic gradients.
 * Buffers (constants such as rotary frequencies) keep their values. */
static void perturb(sb_model *m)
{
    for (int i = 0; i < m->params.n; i++) {
        sb_param *p = &m->params.p[i];
        if (p->flags & SB_PARAM_BUFFER)
            continue;
        const int is_norm = strstr(p->name, "norm") != NULL && strstr(p->name, "bias") == NULL;
        for (size_t k = 0; k < p->size; k++) {
            real *v = &p->tensor.data[k];
            *v = is_norm ? (real)urand(0.6, 1.4)
                         : *v * (real)urand(0.8, 1.2) + (real)urand(-0.1, 0.1);
        }
    }
}

/* x[B, T, I] of uniform values */
static real *random_input(int B, int T, unsigned seed)
{
    real *x = malloc((size_t)B * T * I * sizeof *x);
    assert_non_null(x);
    lcg = seed;
    for (size_t i = 0; i < (size_t)B * T * I; i++)
        x[i] = (real)urand(-1, 1);
    return x;
}

static void check_stream(const sb_layer_type *type, double tol)
{
    if (type->forward_stream == NULL)
        return; /* no recurrent form: evaluation runs the whole sequence */
    const int B = 2, T = frames_crossing(type, 20);
    /* uneven chunks: one frame, a chunk and a bit, the rest */
    const int c1 = type->test_chunk + 2, chunks[3] = {1, c1, T - 1 - c1};
    sb_model *m = make_model(type, 9);
    lcg = 23;
    perturb(m);
    real *x = random_input(B, T, 31);
    check_stream_matches_whole(m, x, B, T, chunks, 3, tol, type->name);
    free(x);
    sb_model_free(m);
}

#ifdef SB_REAL_DOUBLE

/* ---- the registry is layers.def -------------------------------------------------------------- */

static void test_registry_is_layers_def(void **state)
{
    (void)state;
    static const char *const names[] = {
#define SB_LAYER(x) #x,
#include "layers/layers.def"
#undef SB_LAYER
    };
    const int n = (int)(sizeof names / sizeof names[0]);
    const sb_layer_type *const *types = sb_layer_types();
    int i = 0;
    for (; types[i] != NULL; i++) {
        assert_true(i < n);
        if (strcmp(types[i]->name, names[i]) != 0)
            fail_msg("registry entry %d is named '%s'; layers.def says SB_LAYER(%s)", i,
                     types[i]->name, names[i]);
        assert_ptr_equal(sb_layer_type_find(names[i]), types[i]);
        assert_non_null(types[i]->add_params);
        assert_non_null(types[i]->forward);
        /* streaming needs both halves */
        assert_true((types[i]->forward_stream == NULL) == (types[i]->stream_state_floats == NULL));
    }
    assert_int_equal(i, n);
}

/* ---- the heads check (sb_layer_check_heads, written once) ------------------------------------ */

/* Every multi-head layer refuses a width its heads do not divide, naming itself, the width
 * and the heads; the others build at that width. */
static void test_heads_check(void **state)
{
    (void)state;
    static const char *const multi_head[] = {"transformer",
                                             "mamba2",
                                             "gla",
                                             "delta_net",
                                             "gated_delta_net",
                                             "gated_delta_product",
                                             "retnet",
                                             "mesa_net",
                                             "linear_attn",
                                             "simple_gla",
                                             "hgrn2",
                                             "kda",
                                             "path_attn",
                                             "log_linear_mamba2"};
    for (size_t i = 0; i < sizeof multi_head / sizeof multi_head[0]; i++) {
        const sb_layer_type *type = sb_layer_type_find(multi_head[i]);
        assert_non_null(type);
        assert_non_null(type->check);
        /* 3 heads divide neither 10 nor the inner width 20 */
        sb_model_config cfg = {.d_input = I,
                               .d_output = O,
                               .d_model = 10,
                               .n_layers = 1,
                               .d_state = 4,
                               .n_head = 3,
                               .rope_base = 1000};
        snprintf(cfg.model, sizeof cfg.model, "%s", type->name);
        sb_error err = {0};
        assert_int_equal(type->check(&cfg, &err), SB_ERR_INVALID);
        char want[128];
        snprintf(want, sizeof want, "%s: %s is not divisible by 3 heads", type->name,
                 strcmp(type->name, "log_linear_mamba2") == 0 ? "the inner width 20"
                                                              : "--feat_size 10");
        if (strcmp(err.msg, want) != 0)
            fail_msg("%s: '%s', want '%s'", type->name, err.msg, want);
        cfg.n_head = 0;
        assert_int_equal(type->check(&cfg, &err), SB_ERR_INVALID);
    }
}

/* ---- whole-model gradient check ------------------------------------------------------------- */

typedef struct grad_ctx {
    sb_model *m;
    const real *theta0; /* [total] the parameters the directional check starts from */
    const real *dir;    /* [total] its direction (0 on buffers) */
    sb_tensor *target;  /* the checked input the recorded backward adds to */
    sb_tensor *x;       /* its (fixed) input [B, T, I] */
} grad_ctx;

/* The model's buffers (constants, e.g. rotary frequencies) at their initial values: the
 * checks move trained parameters only. */
static void restore_buffers(sb_params *ps, const real *theta0)
{
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].flags & SB_PARAM_BUFFER)
            memcpy(ps->data + ps->p[i].offset, theta0 + ps->p[i].offset,
                   ps->p[i].size * sizeof(real));
}

/* Recorded first, run last: hands the parameters' gradients to the flat input. */
static void flat_backward(sb_graph *g, void *ctx)
{
    grad_ctx *c = *(grad_ctx **)ctx;
    sb_tensor *flat = c->target; /* the flat parameter input */
    real *d = sb_tensor_grad(g, flat);
    for (size_t i = 0; i < c->m->params.total; i++)
        d[i] += c->m->params.grad[i];
}

/* in[0] the input [B, T, I], in[1] every parameter as one flat vector */
static sb_tensor *fn_flat(sb_graph *g, sb_tensor **in, void *arg)
{
    grad_ctx *c = arg;
    sb_params *ps = &c->m->params;
    memcpy(ps->data, in[1]->data, ps->total * sizeof(real));
    restore_buffers(ps, c->theta0);
    sb_params_zero_grad(ps);
    c->target = in[1];
    grad_ctx **rec = sb_graph_record(g, flat_backward, sizeof *rec);
    if (rec != NULL)
        *rec = c;
    return sb_model_forward(g, c->m, in[0]);
}

/* Recorded first, run last: d eps = <dL/dtheta, dir>. */
static void dir_backward(sb_graph *g, void *ctx)
{
    grad_ctx *c = *(grad_ctx **)ctx;
    double s = 0;
    for (size_t i = 0; i < c->m->params.total; i++)
        s += (double)c->m->params.grad[i] * (double)c->dir[i];
    sb_tensor_grad(g, c->target)[0] += (real)s;
}

/* in[0] = eps [1]: the parameters are theta0 + eps dir */
static sb_tensor *fn_dir(sb_graph *g, sb_tensor **in, void *arg)
{
    grad_ctx *c = arg;
    sb_params *ps = &c->m->params;
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = c->theta0[i] + in[0]->data[0] * c->dir[i];
    sb_params_zero_grad(ps);
    c->target = in[0];
    grad_ctx **rec = sb_graph_record(g, dir_backward, sizeof *rec);
    if (rec != NULL)
        *rec = c;
    return sb_model_forward(g, c->m, c->x);
}

static void check_gradients(const sb_layer_type *type)
{
    /* the function the backward differentiates (MesaNet: its exact-solve twin) */
    if (type->grad_check_type != NULL)
        type = type->grad_check_type;
    const double rtol = type->grad_rtol > 0 ? type->grad_rtol : 1e-5;
    sb_model *m = make_model(type, 5);
    lcg = 17;
    perturb(m);
    const size_t total = m->params.total;
    real *theta0 = malloc(total * sizeof *theta0), *dir = calloc(total, sizeof *dir);
    assert_true(theta0 != NULL && dir != NULL);
    memcpy(theta0, m->params.data, total * sizeof *theta0);
    grad_ctx c = {.m = m, .theta0 = theta0, .dir = dir};
    char title[96];

    /* (1) every element of every parameter and of the input, on a sequence shorter than any
     * chunk. Step 3e-6: between the rounding noise of a loss summed over many logits and the
     * truncation error where small keys' L2 norms make the function sharp. */
    const int B = 2, T_short = 5;
    snprintf(title, sizeof title, "%s, every element, T = %d", type->name, T_short);
    gc_problem p = {.name = title, .fn = fn_flat, .ctx = &c, .step = 3e-6, .rtol = rtol};
    int xs[3] = {B, T_short, I}, ps[1] = {(int)total};
    gc_add_input(&p, "input", 3, xs, -1, 1, 1);
    sb_tensor *flat = gc_add_input(&p, "parameters", 1, ps, 0, 0, 2);
    memcpy(flat->data, theta0, total * sizeof(real));
    gc_check(&p);
    /* every trained parameter tensor gets a non-zero gradient */
    gc_check_every_param_has_gradient(&p, m, 1, title);
    gc_free(&p);

    /* (2) along random directions of all parameters, on a sequence crossing the layer's chunk
     * twice with a ragged tail: 2 forwards per direction instead of 2 per element */
    const int T = frames_crossing(type, 11);
    real *x = random_input(B, T, 37);
    sb_graph holder;
    sb_graph_init(&holder, 1 << 16);
    int xl[3] = {B, T, I};
    c.x = sb_tensor_wrap(&holder, x, 3, xl);
    for (int k = 0; k < 3; k++) {
        lcg = 101u + (unsigned)k;
        for (int i = 0; i < m->params.n; i++) {
            const sb_param *pp = &m->params.p[i];
            for (size_t e = 0; e < pp->size; e++)
                dir[pp->offset + e] = (pp->flags & SB_PARAM_BUFFER)
                                          ? 0
                                          : (real)urand(-1, 1) * (1 + fabs(theta0[pp->offset + e]));
        }
        snprintf(title, sizeof title, "%s, direction %d, T = %d", type->name, k, T);
        gc_problem q = {.name = title, .fn = fn_dir, .ctx = &c, .step = 1e-6, .rtol = rtol};
        int one[1] = {1};
        gc_add_input(&q, "eps", 1, one, 0, 0, 3);
        gc_check(&q);
        gc_free(&q);
    }
    sb_graph_free(&holder);
    free(x);
    free(theta0);
    free(dir);
    sb_model_free(m);
}

static void test_gradients(void **state)
{
    check_gradients(*state);
}

static void test_stream_double(void **state)
{
    check_stream(*state, 1e-10);
}

#else

/* ---- threads --------------------------------------------------------------------------------- */

static void test_threads(void **state)
{
    const sb_layer_type *type = *state;
    sb_model *m = make_model(type, 3);
    check_threads_identical(m, 3, frames_crossing(type, 40), type->name);
    sb_model_free(m);
}

/* ---- checkpoint round trip ---------------------------------------------------------------- */

static sb_tensor *logits_of(sb_graph *g, const sb_model *m, const real *x, int B, int T)
{
    int xs[3] = {B, T, I};
    sb_tensor *xt = sb_tensor_new(g, 3, xs);
    memcpy(xt->data, x, xt->size * sizeof(real));
    return sb_model_forward(g, m, xt);
}

static void test_checkpoint(void **state)
{
    const sb_layer_type *type = *state;
    sb_model *a = make_model(type, 3), *b = make_model(type, 4);
    lcg = 29;
    perturb(a);
    sb_run_config rc = sb_run_config_default();
    snprintf(rc.model, sizeof rc.model, "%s", type->name);
    char path[256];
    snprintf(path, sizeof path, "every_model_%s_%d.safetensors", type->name, (int)getpid());
    sb_error err = {0};
    if (sb_checkpoint_save(path, a, &rc, NULL, 123, &err) != SB_OK)
        fail_msg("%s: save: %s", type->name, err.msg);
    int64_t samples = 0;
    sb_status st = sb_checkpoint_load(path, b, NULL, &samples, &err);
    remove(path);
    if (st != SB_OK)
        fail_msg("%s: load: %s", type->name, err.msg);
    assert_int_equal(samples, 123);
    assert_int_equal(a->params.n, b->params.n);
    for (int i = 0; i < a->params.n; i++) {
        const sb_param *pa = &a->params.p[i], *pb = &b->params.p[i];
        assert_string_equal(pa->name, pb->name);
        if (memcmp(pa->tensor.data, pb->tensor.data, pa->size * sizeof(real)) != 0)
            fail_msg("%s: %s differs after the round trip", type->name, pa->name);
    }
    const int B = 2, T = 9;
    real *x = random_input(B, T, 41);
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    sb_tensor *ya = logits_of(&g, a, x, B, T), *yb = logits_of(&g, b, x, B, T);
    assert_int_equal(ya->size, yb->size);
    if (memcmp(ya->data, yb->data, ya->size * sizeof(real)) != 0)
        fail_msg("%s: the loaded model's logits differ", type->name);
    sb_graph_free(&g);
    free(x);
    sb_model_free(a);
    sb_model_free(b);
}

static void test_stream_float(void **state)
{
    check_stream(*state, 1e-4);
}

#endif

/* One cmocka test per (check, registered model), named "check model". */
int main(void)
{
#ifdef SB_REAL_DOUBLE
    static const struct {
        const char *name;
        CMUnitTestFunction fn;
    } checks[] = {{"gradients", test_gradients}, {"stream", test_stream_double}};
#else
    static const struct {
        const char *name;
        CMUnitTestFunction fn;
    } checks[] = {
        {"threads", test_threads}, {"checkpoint", test_checkpoint}, {"stream", test_stream_float}};
#endif
    const int n_checks = (int)(sizeof checks / sizeof checks[0]);
    const sb_layer_type *const *types = sb_layer_types();
    int n_types = 0;
    while (types[n_types] != NULL)
        n_types++;
    const size_t n_max = (size_t)n_checks * (size_t)n_types + 2;
    struct CMUnitTest *tests = calloc(n_max, sizeof *tests);
    char(*names)[64] = calloc(n_max, sizeof *names);
    if (tests == NULL || names == NULL)
        return 1;
    size_t n = 0;
#ifdef SB_REAL_DOUBLE
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_registry_is_layers_def);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_heads_check);
#endif
    for (int c = 0; c < n_checks; c++)
        for (int t = 0; t < n_types; t++) {
            snprintf(names[n], sizeof names[n], "%s %s", checks[c].name, types[t]->name);
            tests[n] = (struct CMUnitTest){
                .name = names[n], .test_func = checks[c].fn, .initial_state = (void *)types[t]};
            n++;
        }
    int failed = _cmocka_run_group_tests("every model", tests, n, NULL, NULL);
    free(tests);
    free(names);
    return failed;
}

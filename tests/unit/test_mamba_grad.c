/*
 * test_mamba_grad.c - the state-space ops and layers in double precision:
 *   - finite-difference gradient checks of every op (fast and reference forms), of a
 *     Mamba and a Mamba2 layer alone (input and every parameter) and of whole RecNets;
 *   - the fast forms against the step-by-step ones: outputs, final states, gradients;
 *   - streaming in pieces against the whole sequence.
 * Shapes are tiny but cross every boundary: T = 37 frames spans three 16-frame backward
 * segments of the selective scan, the last one partial; T = 11 with 4-frame chunks gives
 * three SSD chunks, the last one partial.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "model/model.h"
#include "ops/ops.h"
#include "ops/ops_ssm.h"
#include "test_util.h"

extern const sb_layer_type sb_layer_mamba2_chunk4; /* mamba2.c: 4-frame chunks */

/* ---- helpers ------------------------------------------------------------------------------ */

static double lcg_uniform(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / 16777216.0;
}

static sb_tensor *random_tensor(sb_graph *g, int ndim, const int *shape, double lo, double hi,
                                unsigned seed)
{
    sb_tensor *t = sb_tensor_new(g, ndim, shape);
    unsigned s = seed * 2654435761u + 99u;
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = lo + (hi - lo) * lcg_uniform(&s);
    return t;
}

/* ---- selective scan --------------------------------------------------------------------- */

enum { SC_U, SC_DELTA, SC_BIAS, SC_ALOG, SC_B, SC_C, SC_D, SC_Z, SC_COUNT };

typedef struct scan_opts {
    int ref;        /* the step-by-step form */
    int bias, D, z; /* use dt_bias, D, z */
} scan_opts;

static sb_tensor *run_scan(sb_graph *g, sb_tensor **in, const scan_opts *o, real *state)
{
    sb_tensor *(*op)(sb_graph *, sb_tensor *, sb_tensor *, sb_tensor *, sb_tensor *, sb_tensor *,
                     sb_tensor *, sb_tensor *, sb_tensor *, real *) =
        o->ref ? sb_selective_scan_ref : sb_selective_scan;
    return op(g, in[SC_U], in[SC_DELTA], o->bias ? in[SC_BIAS] : NULL, in[SC_ALOG], in[SC_B],
              in[SC_C], o->D ? in[SC_D] : NULL, o->z ? in[SC_Z] : NULL, state);
}

static sb_tensor *fn_scan(sb_graph *g, sb_tensor **in, void *ctx)
{
    return run_scan(g, in, ctx, NULL);
}

static void add_scan_inputs(gc_problem *p, int B, int T, int E, int N, unsigned seed)
{
    int bte[3] = {B, T, E}, btn[3] = {B, T, N}, e1[1] = {E}, en[2] = {E, N};
    gc_add_input(p, "u", 3, bte, -1, 1, seed + 1);
    gc_add_input(p, "delta", 3, bte, -2, 1, seed + 2);
    gc_add_input(p, "dt_bias", 1, e1, -1, 0, seed + 3);
    gc_add_input(p, "A_log", 2, en, -0.5, 1.5, seed + 4);
    gc_add_input(p, "B", 3, btn, -1, 1, seed + 5);
    gc_add_input(p, "C", 3, btn, -1, 1, seed + 6);
    gc_add_input(p, "D", 1, e1, 0.5, 1.5, seed + 7);
    gc_add_input(p, "z", 3, bte, -2, 2, seed + 8);
}

static void test_scan_grad(void **state)
{
    (void)state;
    const struct {
        const char *name;
        scan_opts o;
        int T;
    } cases[] = {
        {"selective scan T=37", {0, 1, 1, 1}, 37},
        {"selective scan T=11", {0, 1, 1, 1}, 11},
        {"selective scan, no bias/D/z", {0, 0, 0, 0}, 37},
        {"selective scan ref T=37", {1, 1, 1, 1}, 37},
        {"selective scan ref, no bias/D/z", {1, 0, 0, 0}, 19},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        gc_problem p = {.name = cases[k].name, .fn = fn_scan, .ctx = (void *)&cases[k].o};
        add_scan_inputs(&p, 2, cases[k].T, 3, 6, 10 * (unsigned)k);
        if (!cases[k].o.bias)
            p.inputs[SC_BIAS].tensor.requires_grad = 0;
        if (!cases[k].o.D)
            p.inputs[SC_D].tensor.requires_grad = 0;
        if (!cases[k].o.z)
            p.inputs[SC_Z].tensor.requires_grad = 0;
        gc_check(&p);
        gc_free(&p);
    }
}

/* Runs op on copies of `in` with gradient seed r: output and every input gradient. */
typedef sb_tensor *(*multi_fn)(sb_graph *g, sb_tensor **in, void *ctx);

static void run_with_grads(multi_fn fn, void *ctx, sb_tensor **in, int n_in, sb_graph *g,
                           sb_tensor **y_out, real **grads)
{
    sb_graph_reset(g);
    g->record = 1;
    for (int i = 0; i < n_in; i++)
        in[i]->grad = NULL;
    sb_tensor *y = fn(g, in, ctx);
    real *dy = sb_tensor_grad(g, y);
    unsigned s = 4242u;
    for (size_t i = 0; i < y->size; i++)
        dy[i] = 2 * lcg_uniform(&s) - 1;
    sb_graph_backward(g);
    *y_out = y;
    for (int i = 0; i < n_in; i++) {
        grads[i] = malloc(in[i]->size * sizeof(real));
        if (in[i]->grad != NULL)
            memcpy(grads[i], in[i]->grad, in[i]->size * sizeof(real));
        else
            memset(grads[i], 0, in[i]->size * sizeof(real));
        in[i]->grad = NULL;
    }
}

static sb_tensor **scan_tensors(sb_graph *g, int B, int T, int E, int N, unsigned seed)
{
    static sb_tensor *t[SC_COUNT];
    int bte[3] = {B, T, E}, btn[3] = {B, T, N}, e1[1] = {E}, en[2] = {E, N};
    t[SC_U] = random_tensor(g, 3, bte, -1, 1, seed + 1);
    t[SC_DELTA] = random_tensor(g, 3, bte, -2, 1, seed + 2);
    t[SC_BIAS] = random_tensor(g, 1, e1, -1, 0, seed + 3);
    t[SC_ALOG] = random_tensor(g, 2, en, -0.5, 1.5, seed + 4);
    t[SC_B] = random_tensor(g, 3, btn, -1, 1, seed + 5);
    t[SC_C] = random_tensor(g, 3, btn, -1, 1, seed + 6);
    t[SC_D] = random_tensor(g, 1, e1, 0.5, 1.5, seed + 7);
    t[SC_Z] = random_tensor(g, 3, bte, -2, 2, seed + 8);
    for (int i = 0; i < SC_COUNT; i++)
        t[i]->requires_grad = 1;
    return t;
}

/* Fast and step-by-step forms agree: outputs and gradients (double: to rounding), final
 * states from a non-zero initial state, and streaming in pieces. */
static void test_scan_fast_vs_ref(void **state)
{
    (void)state;
    const int B = 3, T = 53, E = 5, N = 7;
    sb_graph hold, g1, g2;
    sb_graph_init(&hold, 1 << 20);
    sb_graph_init(&g1, 1 << 22);
    sb_graph_init(&g2, 1 << 22);
    sb_tensor **in = scan_tensors(&hold, B, T, E, N, 3);
    scan_opts fast = {0, 1, 1, 1}, ref = {1, 1, 1, 1};
    sb_tensor *yf, *yr;
    real *gf[SC_COUNT], *gr[SC_COUNT];
    run_with_grads(fn_scan, &fast, in, SC_COUNT, &g1, &yf, gf);
    run_with_grads(fn_scan, &ref, in, SC_COUNT, &g2, &yr, gr);
    assert_true(test_max_rel_diff(yf->data, yr->data, yf->size) < 1e-13);
    for (int i = 0; i < SC_COUNT; i++) {
        double d = test_max_rel_diff(gf[i], gr[i], in[i]->size);
        if (!(d < 1e-12))
            fail_msg("selective scan gradient %d: fast vs ref %.3g", i, d);
        free(gf[i]);
        free(gr[i]);
    }
    /* final states from a non-zero start; then streaming in pieces of 20, 1 and 32 frames */
    const size_t ns = (size_t)B * E * N;
    real *s_fast = malloc(ns * sizeof(real)), *s_ref = malloc(ns * sizeof(real));
    real *s_stream = malloc(ns * sizeof(real));
    unsigned seed = 5;
    for (size_t i = 0; i < ns; i++)
        s_fast[i] = s_ref[i] = s_stream[i] = 2 * lcg_uniform(&seed) - 1;
    g1.record = g2.record = 0;
    sb_graph_reset(&g1);
    sb_graph_reset(&g2);
    sb_tensor *y1 = run_scan(&g1, in, &fast, s_fast);
    sb_tensor *y2 = run_scan(&g2, in, &ref, s_ref);
    assert_true(test_max_rel_diff(y1->data, y2->data, y1->size) < 1e-13);
    assert_true(test_max_rel_diff(s_fast, s_ref, ns) < 1e-13);
    int pieces[3] = {20, 1, 32}, t0 = 0;
    for (int k = 0; k < 3; k++) {
        sb_tensor *part[SC_COUNT];
        for (int i = 0; i < SC_COUNT; i++)
            part[i] = in[i]->ndim == 3 ? test_time_slice(&g2, in[i], t0, pieces[k]) : in[i];
        sb_tensor *yp = run_scan(&g2, part, &fast, s_stream);
        sb_tensor *ref_part = test_time_slice(&g2, y1, t0, pieces[k]);
        assert_true(test_max_rel_diff(yp->data, ref_part->data, yp->size) < 1e-13);
        t0 += pieces[k];
    }
    assert_true(test_max_rel_diff(s_stream, s_fast, ns) < 1e-13);
    free(s_fast), free(s_ref), free(s_stream);
    sb_graph_free(&hold), sb_graph_free(&g1), sb_graph_free(&g2);
}

/* ---- SSD ------------------------------------------------------------------------------------ */

enum { SD_X, SD_DT, SD_BIAS, SD_ALOG, SD_B, SD_C, SD_D, SD_COUNT };

typedef struct ssd_opts {
    int chunk; /* 0: the recurrent reference */
    int bias, D;
} ssd_opts;

static sb_tensor *run_ssd(sb_graph *g, sb_tensor **in, const ssd_opts *o, real *state)
{
    sb_tensor *bias = o->bias ? in[SD_BIAS] : NULL, *D = o->D ? in[SD_D] : NULL;
    if (o->chunk == 0)
        return sb_ssd_ref(g, in[SD_X], in[SD_DT], bias, in[SD_ALOG], in[SD_B], in[SD_C], D, state);
    return sb_ssd(g, in[SD_X], in[SD_DT], bias, in[SD_ALOG], in[SD_B], in[SD_C], D, o->chunk,
                  state);
}

static sb_tensor *fn_ssd(sb_graph *g, sb_tensor **in, void *ctx)
{
    return run_ssd(g, in, ctx, NULL);
}

static void add_ssd_inputs(gc_problem *p, int B, int T, int M, int P, int N, unsigned seed)
{
    int x[3] = {B, T, M * P}, dt[3] = {B, T, M}, m1[1] = {M}, btn[3] = {B, T, N};
    gc_add_input(p, "x", 3, x, -1, 1, seed + 1);
    gc_add_input(p, "dt", 3, dt, -2, 1, seed + 2);
    gc_add_input(p, "dt_bias", 1, m1, -1, 0, seed + 3);
    gc_add_input(p, "A_log", 1, m1, -1, 1, seed + 4);
    gc_add_input(p, "B", 3, btn, -1, 1, seed + 5);
    gc_add_input(p, "C", 3, btn, -1, 1, seed + 6);
    gc_add_input(p, "D", 1, m1, 0.5, 1.5, seed + 7);
}

static void test_ssd_grad(void **state)
{
    (void)state;
    const struct {
        const char *name;
        ssd_opts o;
        int T;
    } cases[] = {
        {"ssd chunk 4, T=11", {4, 1, 1}, 11},       {"ssd chunk 4, T=8", {4, 1, 1}, 8},
        {"ssd chunk 1, T=5", {1, 1, 1}, 5},         {"ssd one chunk, T=11", {64, 1, 1}, 11},
        {"ssd chunk 3, no bias/D", {3, 0, 0}, 10},  {"ssd recurrent T=11", {0, 1, 1}, 11},
        {"ssd recurrent, no bias/D", {0, 0, 0}, 7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        gc_problem p = {.name = cases[k].name, .fn = fn_ssd, .ctx = (void *)&cases[k].o};
        add_ssd_inputs(&p, 2, cases[k].T, 2, 3, 5, 10 * (unsigned)k);
        if (!cases[k].o.bias)
            p.inputs[SD_BIAS].tensor.requires_grad = 0;
        if (!cases[k].o.D)
            p.inputs[SD_D].tensor.requires_grad = 0;
        gc_check(&p);
        gc_free(&p);
    }
}

static sb_tensor **ssd_tensors(sb_graph *g, int B, int T, int M, int P, int N, unsigned seed)
{
    static sb_tensor *t[SD_COUNT];
    int x[3] = {B, T, M * P}, dt[3] = {B, T, M}, m1[1] = {M}, btn[3] = {B, T, N};
    t[SD_X] = random_tensor(g, 3, x, -1, 1, seed + 1);
    t[SD_DT] = random_tensor(g, 3, dt, -2, 1, seed + 2);
    t[SD_BIAS] = random_tensor(g, 1, m1, -1, 0, seed + 3);
    t[SD_ALOG] = random_tensor(g, 1, m1, -1, 1, seed + 4);
    t[SD_B] = random_tensor(g, 3, btn, -1, 1, seed + 5);
    t[SD_C] = random_tensor(g, 3, btn, -1, 1, seed + 6);
    t[SD_D] = random_tensor(g, 1, m1, 0.5, 1.5, seed + 7);
    for (int i = 0; i < SD_COUNT; i++)
        t[i]->requires_grad = 1;
    return t;
}

/* Chunked (several chunk sizes, ragged tails) against the recurrence: outputs, gradients,
 * final states from a non-zero start, and streaming in pieces. */
static void test_ssd_chunked_vs_ref(void **state)
{
    (void)state;
    const int B = 2, T = 29, M = 3, P = 4, N = 6;
    sb_graph hold, g1, g2;
    sb_graph_init(&hold, 1 << 20);
    sb_graph_init(&g1, 1 << 22);
    sb_graph_init(&g2, 1 << 22);
    sb_tensor **in = ssd_tensors(&hold, B, T, M, P, N, 7);
    ssd_opts ref = {0, 1, 1};
    sb_tensor *yr;
    real *gr[SD_COUNT];
    run_with_grads(fn_ssd, &ref, in, SD_COUNT, &g2, &yr, gr);
    const int chunks[5] = {1, 4, 7, 16, 256};
    for (int c = 0; c < 5; c++) {
        ssd_opts o = {chunks[c], 1, 1};
        sb_tensor *yf;
        real *gf[SD_COUNT];
        run_with_grads(fn_ssd, &o, in, SD_COUNT, &g1, &yf, gf);
        double dy = test_max_rel_diff(yf->data, yr->data, yf->size);
        if (!(dy < 1e-12))
            fail_msg("ssd chunk %d: output differs from the recurrence by %.3g", chunks[c], dy);
        for (int i = 0; i < SD_COUNT; i++) {
            double d = test_max_rel_diff(gf[i], gr[i], in[i]->size);
            if (!(d < 1e-11))
                fail_msg("ssd chunk %d: gradient %d differs from the recurrence by %.3g", chunks[c],
                         i, d);
            free(gf[i]);
        }
    }
    for (int i = 0; i < SD_COUNT; i++)
        free(gr[i]);
    const size_t ns = (size_t)B * M * P * N;
    real *s_fast = malloc(ns * sizeof(real)), *s_ref = malloc(ns * sizeof(real));
    real *s_stream = malloc(ns * sizeof(real));
    unsigned seed = 11;
    for (size_t i = 0; i < ns; i++)
        s_fast[i] = s_ref[i] = s_stream[i] = 2 * lcg_uniform(&seed) - 1;
    g1.record = g2.record = 0;
    sb_graph_reset(&g1);
    sb_graph_reset(&g2);
    ssd_opts c4 = {4, 1, 1};
    sb_tensor *y1 = run_ssd(&g1, in, &c4, s_fast);
    sb_tensor *y2 = run_ssd(&g2, in, &ref, s_ref);
    assert_true(test_max_rel_diff(y1->data, y2->data, y1->size) < 1e-12);
    assert_true(test_max_rel_diff(s_fast, s_ref, ns) < 1e-12);
    int pieces[3] = {9, 1, 19}, t0 = 0;
    for (int k = 0; k < 3; k++) {
        sb_tensor *part[SD_COUNT];
        for (int i = 0; i < SD_COUNT; i++)
            part[i] = in[i]->ndim == 3 ? test_time_slice(&g2, in[i], t0, pieces[k]) : in[i];
        sb_tensor *yp = run_ssd(&g2, part, &c4, s_stream);
        sb_tensor *ref_part = test_time_slice(&g2, y1, t0, pieces[k]);
        assert_true(test_max_rel_diff(yp->data, ref_part->data, yp->size) < 1e-12);
        t0 += pieces[k];
    }
    assert_true(test_max_rel_diff(s_stream, s_fast, ns) < 1e-12);
    free(s_fast), free(s_ref), free(s_stream);
    sb_graph_free(&hold), sb_graph_free(&g1), sb_graph_free(&g2);
}

/* ---- gated RMSNorm, split ------------------------------------------------------------------- */

static sb_tensor *fn_gate_first(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rmsnorm_gate_first(g, in[0], in[1], in[2], 1e-5);
}

static void test_gate_first_norm(void **state)
{
    (void)state;
    gc_problem p = {.name = "gated rmsnorm (gate first)", .fn = fn_gate_first};
    int x[3] = {2, 3, 37}, e[1] = {37}; /* 37 columns cross the 32-column blocks */
    gc_add_input(&p, "y", 3, x, -2, 2, 1);
    gc_add_input(&p, "z", 3, x, -2, 2, 2);
    gc_add_input(&p, "w", 1, e, 0.5, 1.5, 3);
    gc_check(&p);
    gc_free(&p);
}

static sb_tensor *fn_split(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    sb_tensor *parts[3];
    int widths[3] = {3, 3, 2};
    sb_split_cols(g, in[0], 3, widths, parts);
    /* the last part is unused: its columns get no gradient */
    return sb_add(g, sb_silu(g, parts[0]), parts[1]);
}

static void test_split(void **state)
{
    (void)state;
    gc_problem p = {.name = "split", .fn = fn_split};
    int x[3] = {2, 3, 8};
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_check(&p);
    gc_free(&p);
}

/* ---- convolution + SiLU --------------------------------------------------------------------- */

static sb_tensor *fn_conv_silu(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_conv1d_silu(g, in[0], in[1], in[2], NULL);
}

static sb_tensor *fn_conv_then_silu(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_silu(g, sb_conv1d_causal(g, in[0], in[1], in[2]));
}

/* The fused op: gradient check, and the same values and gradients as the two existing
 * ops it replaces; streaming with a history equals the whole sequence. */
static void test_conv_silu(void **state)
{
    (void)state;
    gc_problem p = {.name = "conv + silu", .fn = fn_conv_silu};
    int x[3] = {2, 6, 19}, w[3] = {19, 1, 4}, b[1] = {19}; /* 19 channels cross 16-blocks */
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_add_input(&p, "w", 3, w, -0.5, 0.5, 2);
    gc_add_input(&p, "b", 1, b, -0.5, 0.5, 3);
    gc_check(&p);
    gc_free(&p);

    sb_graph hold, g1, g2;
    sb_graph_init(&hold, 1 << 20);
    sb_graph_init(&g1, 1 << 20);
    sb_graph_init(&g2, 1 << 20);
    int xs[3] = {3, 13, 21}, ws[3] = {21, 1, 4}, bs[1] = {21};
    sb_tensor *in[3] = {random_tensor(&hold, 3, xs, -2, 2, 1),
                        random_tensor(&hold, 3, ws, -0.5, 0.5, 2),
                        random_tensor(&hold, 1, bs, -0.5, 0.5, 3)};
    for (int i = 0; i < 3; i++)
        in[i]->requires_grad = 1;
    sb_tensor *y1, *y2;
    real *gr1[3], *gr2[3];
    run_with_grads(fn_conv_silu, NULL, in, 3, &g1, &y1, gr1);
    run_with_grads(fn_conv_then_silu, NULL, in, 3, &g2, &y2, gr2);
    assert_true(test_max_rel_diff(y1->data, y2->data, y1->size) < 1e-14);
    for (int i = 0; i < 3; i++) {
        assert_true(test_max_rel_diff(gr1[i], gr2[i], in[i]->size) < 1e-13);
        free(gr1[i]), free(gr2[i]);
    }
    real history[3 * 3 * 21] = {0};
    int pieces[3] = {2, 1, 10}, t0 = 0;
    g1.record = 0;
    for (int k = 0; k < 3; k++) {
        sb_tensor *xp = test_time_slice(&g1, in[0], t0, pieces[k]);
        sb_tensor *yp = sb_conv1d_silu(&g1, xp, in[1], in[2], history);
        sb_tensor *ref = test_time_slice(&g1, y1, t0, pieces[k]);
        assert_true(test_max_rel_diff(yp->data, ref->data, yp->size) < 1e-14);
        t0 += pieces[k];
    }
    sb_graph_free(&hold), sb_graph_free(&g1), sb_graph_free(&g2);
}

/* ---- layers alone and whole RecNets ------------------------------------------------------- */

typedef struct layer_ctx {
    sb_model *m;
    int n_params;
} layer_ctx;

/* inputs: the layer's parameters, then its input x */
static sb_tensor *fn_layer(sb_graph *g, sb_tensor **in, void *arg)
{
    layer_ctx *c = arg;
    for (int i = 0; i < c->n_params; i++) {
        sb_tensor *t = sb_model_param(c->m, 0, i);
        t->data = in[i]->data;
        t->grad = in[i]->grad;
    }
    return c->m->type->forward(g, c->m, 0, in[c->n_params]);
}

static void check_layer(const sb_layer_type *type, int D, int N)
{
    sb_model_config mc = {.d_input = 3,
                          .d_output = 3,
                          .d_model = D,
                          .n_layers = 1,
                          .d_state = N,
                          .n_head = 4,
                          .dropout = 0,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", type->name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create_type(type, &mc, 3, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    layer_ctx ctx = {.m = m, .n_params = m->params.n - m->layer_first[0] - 2};
    gc_problem p = {.name = type->name, .fn = fn_layer, .ctx = &ctx};
    for (int k = 0; k < ctx.n_params; k++) {
        sb_param *q = &m->params.p[m->layer_first[0] + k];
        /* initial values plus U(-0.1, 0.1): D, dt biases and the norm weight move off
         * their initial constants */
        sb_tensor *t = gc_add_input(&p, q->name, q->ndim, q->shape, -0.1, 0.1, (unsigned)k + 1);
        for (size_t i = 0; i < t->size; i++)
            t->data[i] += m->params.data[q->offset + i];
    }
    int xs[3] = {2, 11, D};
    gc_add_input(&p, "x", 3, xs, -1, 1, 99);
    /* long chains: a step of 1e-6 leaves ~1e-8 of cancellation noise in the differences
     * of the dt rows of in_proj (measured); 1e-5 keeps the truncation error far below */
    p.rtol = 1e-5;
    p.step = 1e-5;
    gc_check(&p);
    gc_free(&p);
    sb_model_free(m);
}

static void test_layers_grad(void **state)
{
    (void)state;
    check_layer(sb_layer_type_find("mamba"), 16, 6);
    check_layer(sb_layer_type_find("mamba2"), 16, 6); /* one chunk of 256 */
    check_layer(&sb_layer_mamba2_chunk4, 16, 6);      /* chunks 4, 4, 3 */
    check_layer(&sb_layer_mamba2_chunk4, 32, 8);      /* P = 8, M = 8 */
}

typedef struct model_ctx {
    sb_model *m;
    sb_tensor *input;
    int32_t *target;
    uint8_t *valid;
} model_ctx;

static sb_tensor *fn_recnet(sb_graph *g, sb_tensor **in, void *arg)
{
    model_ctx *c = arg;
    for (int i = 0; i < c->m->params.n; i++) {
        c->m->params.p[i].tensor.data = in[i]->data;
        c->m->params.p[i].tensor.grad = in[i]->grad;
    }
    sb_tensor *logits = sb_model_forward(g, c->m, c->input);
    return sb_cross_entropy(g, logits, c->target, c->valid, 1, NULL);
}

static void check_recnet(const sb_layer_type *type, int training)
{
    sb_model_config mc = {.d_input = 5,
                          .d_output = 7,
                          .d_model = 16,
                          .n_layers = 2,
                          .d_state = 6,
                          .n_head = 4,
                          .dropout = 0.25,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", type->name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create_type(type, &mc, 5, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    enum { B = 2, T = 11, I = 5 };
    static real input_data[B * T * I];
    static int32_t target[B * T];
    static uint8_t valid[B * T];
    memset(input_data, 0, sizeof input_data);
    for (int f = 0; f < B * T; f++) {
        input_data[f * I + (f * 3) % I] = 1;
        target[f] = (f * 5 + 1) % 7;
        valid[f] = f != B * T - 1;
    }
    sb_graph holder;
    sb_graph_init(&holder, 1 << 16);
    int shape[3] = {B, T, I};
    model_ctx ctx = {.m = m,
                     .input = sb_tensor_wrap(&holder, input_data, 3, shape),
                     .target = target,
                     .valid = valid};
    gc_problem p = {.name = type->name, .fn = fn_recnet, .ctx = &ctx, .training = training};
    for (int i = 0; i < m->params.n; i++) {
        sb_param *q = &m->params.p[i];
        sb_tensor *t = gc_add_input(&p, q->name, q->ndim, q->shape, -0.1, 0.1, (unsigned)i + 1);
        for (size_t k = 0; k < t->size; k++)
            t->data[k] += m->params.data[q->offset + k];
    }
    p.rtol = 1e-5;
    p.step = 1e-5;
    gc_check(&p);
    gc_free(&p);
    sb_graph_free(&holder);
    sb_model_free(m);
}

static void test_recnets_grad(void **state)
{
    (void)state;
    check_recnet(sb_layer_type_find("mamba"), 0);
    check_recnet(sb_layer_type_find("mamba"), 1);
    check_recnet(&sb_layer_mamba2_chunk4, 0);
    check_recnet(&sb_layer_mamba2_chunk4, 1);
}

/* Streaming the whole model in pieces equals the whole sequence (the layers' conv history
 * and SSM state carried across pieces). */
static void check_stream(const sb_layer_type *type)
{
    sb_model_config mc = {.d_input = 5,
                          .d_output = 7,
                          .d_model = 16,
                          .n_layers = 2,
                          .d_state = 6,
                          .n_head = 4,
                          .dropout = 0,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", type->name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create_type(type, &mc, 9, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    const int B = 2, T = 23, I = 5;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int shape[3] = {B, T, I};
    sb_tensor *x = random_tensor(&g, 3, shape, 0, 1, 4);
    sb_tensor *full = sb_model_hidden(&g, m, x, 0);
    const size_t per = type->stream_state_floats(&mc);
    real *buf = calloc((size_t)mc.n_layers * B * per, sizeof(real));
    real *states[2] = {buf, buf + (size_t)B * per};
    int pieces[4] = {6, 1, 3, 13}, t0 = 0;
    for (int k = 0; k < 4; k++) {
        sb_tensor *xp = test_time_slice(&g, x, t0, pieces[k]);
        sb_tensor *yp = sb_model_hidden_stream(&g, m, xp, states);
        sb_tensor *ref = test_time_slice(&g, full, t0, pieces[k]);
        double d = test_max_rel_diff(yp->data, ref->data, yp->size);
        if (!(d < 1e-12))
            fail_msg("%s: streaming piece %d differs by %.3g", type->name, k, d);
        t0 += pieces[k];
    }
    free(buf);
    sb_graph_free(&g);
    sb_model_free(m);
}

static void test_stream(void **state)
{
    (void)state;
    check_stream(sb_layer_type_find("mamba"));
    check_stream(sb_layer_type_find("mamba2"));
    check_stream(&sb_layer_mamba2_chunk4);
}

/* ---- against the reference modules ---------------------------------------------------------- */

/* tests/data/ssm/ssm_layers.json holds the outputs of the reference's own modules
 * (mamba_ssm v2.2.4 Mamba and Mamba2 on their pure-PyTorch paths, float64) for given
 * parameters and input, with their state_dict names and shapes. */
static void check_reference_module(const char *name)
{
    json_t *root = test_load_json("ssm/ssm_layers.json");
    json_t *ref = json_object_get(root, name);
    assert_non_null(ref);
    sb_model_config mc = {.d_input = 3,
                          .d_output = 3,
                          .d_model = 16,
                          .n_layers = 1,
                          .d_state = 6,
                          .n_head = 4,
                          .dropout = 0,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 1, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    /* names, shapes and order of the module's state_dict */
    json_t *sd = json_object_get(ref, "state_dict"), *params = json_object_get(ref, "params");
    const int first = m->layer_first[0];
    assert_int_equal((int)json_array_size(sd), m->params.n - first - 2);
    for (size_t k = 0; k < json_array_size(sd); k++) {
        const sb_param *p = &m->params.p[first + (int)k];
        const char *want = json_string_value(json_array_get(json_array_get(sd, k), 0));
        json_t *shape = json_array_get(json_array_get(sd, k), 1);
        if (strcmp(p->name + strlen("layers.0."), want) != 0)
            fail_msg("%s: parameter %zu is %s, the reference has %s", name, k, p->name, want);
        assert_int_equal(p->ndim, (int)json_array_size(shape));
        for (int d = 0; d < p->ndim; d++)
            assert_int_equal(p->shape[d],
                             (int)json_integer_value(json_array_get(shape, (size_t)d)));
        json_t *values = json_object_get(params, want);
        assert_int_equal(json_array_size(values), p->size);
        for (size_t i = 0; i < p->size; i++)
            p->tensor.data[i] = json_real_value(json_array_get(values, i));
    }
    json_t *xj = json_object_get(ref, "x"), *yj = json_object_get(ref, "y");
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int shape[3] = {2, 11, 16};
    sb_tensor *x = sb_tensor_new(&g, 3, shape);
    assert_int_equal(json_array_size(xj), x->size);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = json_real_value(json_array_get(xj, i));
    sb_tensor *y = m->type->forward(&g, m, 0, x);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < y->size; i++) {
        double r = json_real_value(json_array_get(yj, i));
        worst = fmax(worst, fabs(y->data[i] - r));
        scale = fmax(scale, fabs(r));
    }
    if (!(worst <= 1e-12 * scale))
        fail_msg("%s: the forward differs from the reference module by %.3g (of %.3g)", name, worst,
                 scale);
    sb_graph_free(&g);
    sb_model_free(m);
    json_decref(root);
}

static void test_reference_modules(void **state)
{
    (void)state;
    check_reference_module("mamba");
    check_reference_module("mamba2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_gate_first_norm),
        cmocka_unit_test(test_conv_silu),
        cmocka_unit_test(test_scan_grad),
        cmocka_unit_test(test_scan_fast_vs_ref),
        cmocka_unit_test(test_ssd_grad),
        cmocka_unit_test(test_ssd_chunked_vs_ref),
        cmocka_unit_test(test_layers_grad),
        cmocka_unit_test(test_recnets_grad),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_reference_modules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_log_linear.c - log-linear attention over Mamba2 (ops_log_linear.h, log_linear_mamba2.c).
 * One source, built twice.
 *
 * test_log_linear, the double build (SB_REAL_DOUBLE):
 *   - finite-difference gradient checks of the whole-sequence op, every input, with query
 *     blocks that leave ragged tails and lengths that cross powers of two (level boundaries),
 *     with fla's 15 levels and with few levels (the top level gathering the rest);
 *   - the op against a direct sum whose levels come from fla's mask rule (naive.py), written
 *     here independently of the op's bit-length rule;
 *   - the block size changes nothing; the streaming recurrence (O(log T) level states) in
 *     pieces equals the whole-sequence form;
 *   - the RecNet against the PyTorch mimic (tests/data/models/log_linear_mamba2): names,
 *     shapes, initial values, counts at widths 16 and 32, float64 logits.
 * test_log_linear_float, the float build: the RecNet's logits against the float64 PyTorch
 * mimic, its initial values and counts, the streamed level recurrence against the
 * whole-sequence form, 1 vs 2 threads, and streaming memory that stays flat over many chunks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "model_checks.h"
#include "ops/ops_log_linear.h"
#include "test_util.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

static int config_N(const mimic_file *f)
{
    return (int)json_integer_value(json_object_get(json_object_get(f->root, "config"), "N"));
}

#ifdef SB_REAL_DOUBLE

enum { IN_X, IN_DT, IN_BIAS, IN_ALOG, IN_B, IN_C, IN_DL, IN_L, IN_D, IN_COUNT };

typedef struct ll_case {
    const char *name;
    int T, block, K, with_D;
} ll_case;

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

/* the input ranges: dt around softplus(-1..1), A_log so that decays stay visible over tens of
 * frames, dl and L both signs (level weights from ~0.1 to ~3) */
static const double lo[IN_COUNT] = {-1, -2, -0.5, -1.5, -1, -1, -1.5, -1.5, 0.5};
static const double hi[IN_COUNT] = {1, 0.5, 0.5, 0, 1, 1, 1.5, 1.5, 1.5};
static const char *const in_names[IN_COUNT] = {"x", "dt_in", "dt_bias", "A_log", "B",
                                               "C", "dl",    "L",       "D"};

static void in_shapes(int B, int T, int H, int P, int N, int K, int shapes[IN_COUNT][3],
                      int ndims[IN_COUNT])
{
    const int s[IN_COUNT][3] = {{B, T, H * P}, {B, T, H},     {H},    {H}, {B, T, N},
                                {B, T, N},     {B, T, H * K}, {H, K}, {H}};
    const int n[IN_COUNT] = {3, 3, 1, 1, 3, 3, 3, 2, 1};
    memcpy(shapes, s, sizeof s);
    memcpy(ndims, n, sizeof n);
}

static sb_tensor *fn_op(sb_graph *g, sb_tensor **in, void *ctx)
{
    const ll_case *c = ctx;
    return sb_log_linear_ssd(g, in[IN_X], in[IN_DT], in[IN_BIAS], in[IN_ALOG], in[IN_B], in[IN_C],
                             in[IN_DL], in[IN_L], c->with_D ? in[IN_D] : NULL, c->block);
}

/* ---- gradient checks ------------------------------------------------------------------------ */

static void test_op_grad(void **state)
{
    (void)state;
    /* B = 2, H = 2, P = 3, N = 4 */
    static const ll_case cases[] = {
        {"blocks of 4, T = 11", 11, 4, 15, 1},     /* 4 + 4 + 3, crosses 8 */
        {"blocks of 3, T = 17", 17, 3, 15, 1},     /* ragged 2, crosses 16 */
        {"blocks of 8, T = 33", 33, 8, 15, 1},     /* crosses 32, tail of 1 */
        {"one block, T = 16", 16, 64, 15, 1},      /* exactly a power of two */
        {"3 levels, T = 20", 20, 6, 3, 1},         /* the top level gathers levels >= 2 */
        {"blocks of 5, T = 9, no D", 9, 5, 15, 0}, /* D absent */
        {"1 frame", 1, 4, 15, 1},
    };
    double worst = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ll_case *c = &cases[k];
        gc_problem p = {.name = c->name, .fn = fn_op, .ctx = (void *)c};
        int shapes[IN_COUNT][3], ndims[IN_COUNT];
        in_shapes(2, c->T, 2, 3, 4, c->K, shapes, ndims);
        for (int i = 0; i < IN_COUNT; i++)
            gc_add_input(&p, in_names[i], ndims[i], shapes[i], lo[i], hi[i], 17 * (unsigned)k + i);
        if (!c->with_D)
            p.inputs[IN_D].tensor.requires_grad = 0;
        if (c->T == 1) /* one frame: no segment holds a decay, and dl's levels >= 1 go unused */
            p.inputs[IN_ALOG].allow_zero_grad = 1;
        const double e = gc_check(&p);
        print_message("log-linear op, %s: max relative error %.3g\n", c->name, e);
        worst = fmax(worst, e);
        gc_free(&p);
    }
    print_message("log-linear op gradients: worst relative error %.3g\n", worst);
}

/* ---- the op against a direct sum with fla's mask rule ---------------------------------------- */

/* fla naive.py's construct_level_mask, restated: level 0 is the diagonal; level l >= 1 covers
 * (i, j) when i mod 2^l >= 2^(l-1) and i - i mod 2^(l-1) - 2^(l-1) <= j < i - i mod 2^(l-1) */
static int fla_level(int i, int j)
{
    if (i == j)
        return 0;
    for (int l = 1; l < 31; l++) {
        const int half = 1 << (l - 1), base = i - i % half;
        if (i % (1 << l) >= half && j + half >= base && j < base)
            return l;
    }
    return -1;
}

static void direct_sum(sb_tensor **in, int K, int with_D, real *y)
{
    const int B = in[IN_X]->shape[0], T = in[IN_X]->shape[1], E = in[IN_X]->shape[2];
    const int H = (int)in[IN_ALOG]->size, P = E / H, N = in[IN_B]->shape[2];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double A = -exp(in[IN_ALOG]->data[h]);
            for (int t = 0; t < T; t++) {
                const size_t rt = (size_t)b * T + (size_t)t;
                for (int p = 0; p < P; p++) {
                    double acc =
                        with_D ? in[IN_D]->data[h] * in[IN_X]->data[rt * E + h * P + p] : 0;
                    for (int s = 0; s <= t; s++) {
                        const size_t rs = (size_t)b * T + (size_t)s;
                        double seg = 0; /* sum of dt A over (s, t] */
                        for (int u = s + 1; u <= t; u++) {
                            const double pre =
                                in[IN_DT]->data[((size_t)b * T + u) * H + h] + in[IN_BIAS]->data[h];
                            seg += log1p(exp(pre)) * A;
                        }
                        const double pre_s = in[IN_DT]->data[rs * H + h] + in[IN_BIAS]->data[h];
                        const int lev = fla_level(t, s);
                        assert_true(lev >= 0);
                        const int l = lev < K - 1 ? lev : K - 1;
                        const double u = in[IN_L]->data[h * K + l] *
                                         in[IN_DL]->data[rt * (size_t)(H * K) + h * K + l];
                        double cb = 0;
                        for (int n = 0; n < N; n++)
                            cb += in[IN_C]->data[rt * N + n] * in[IN_B]->data[rs * N + n];
                        acc += log1p(exp(u)) * exp(seg) * cb * log1p(exp(pre_s)) *
                               in[IN_X]->data[rs * E + h * P + p];
                    }
                    y[rt * E + h * P + p] = acc;
                }
            }
        }
}

static sb_tensor **op_inputs(sb_graph *g, int B, int T, int H, int P, int N, int K, unsigned seed)
{
    static sb_tensor *t[IN_COUNT];
    int shapes[IN_COUNT][3], ndims[IN_COUNT];
    in_shapes(B, T, H, P, N, K, shapes, ndims);
    for (int i = 0; i < IN_COUNT; i++)
        t[i] = random_tensor(g, ndims[i], shapes[i], lo[i], hi[i], seed + (unsigned)i);
    return t;
}

static void test_op_vs_fla_mask(void **state)
{
    (void)state;
    static const int Ts[] = {1, 2, 7, 8, 9, 40};
    static const int Ks[] = {15, 3};
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (size_t ki = 0; ki < 2; ki++) {
            sb_graph_reset(&g);
            const int T = Ts[ti], K = Ks[ki];
            sb_tensor **in = op_inputs(&g, 2, T, 3, 2, 5, K, 100 + (unsigned)ti);
            ll_case c = {"", T, 4, K, 1};
            sb_tensor *y = fn_op(&g, in, &c);
            real *want = malloc(y->size * sizeof(real));
            direct_sum(in, K, 1, want);
            const double d = test_max_rel_diff(y->data, want, y->size);
            if (!(d < 1e-12))
                fail_msg("T %d, K %d: the op differs from the direct sum by %.3g", T, K, d);
            free(want);
        }
    sb_graph_free(&g);
}

/* ---- block sizes, streaming ------------------------------------------------------------------ */

static void test_blocks_and_stream(void **state)
{
    (void)state;
    static const int Ts[] = {1, 2, 16, 17, 64, 65, 131};
    static const int Ks[] = {15, 4};
    const int B = 2, H = 2, P = 3, N = 4;
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (size_t ki = 0; ki < 2; ki++) {
            sb_graph_reset(&g);
            const int T = Ts[ti], K = Ks[ki];
            sb_tensor **in = op_inputs(&g, B, T, H, P, N, K, 300 + 7 * (unsigned)ti);
            ll_case whole = {"", T, T, K, 1};
            sb_tensor *y = fn_op(&g, in, &whole);
            static const int blocks[] = {1, 3, 7, 64};
            for (int bi = 0; bi < 4; bi++) {
                ll_case c = {"", T, blocks[bi], K, 1};
                sb_tensor *yb = fn_op(&g, in, &c);
                const double d = test_max_rel_diff(yb->data, y->data, y->size);
                if (!(d < 1e-13))
                    fail_msg("T %d, K %d: blocks of %d differ from one block by %.3g", T, K,
                             blocks[bi], d);
            }
            /* the recurrence, in pieces of 1, 5 and the rest, from zeroed states */
            const size_t nlev = (size_t)B * H * (size_t)(K - 1) * P * N;
            real *levels = calloc(nlev + 1, sizeof(real)), pos[2] = {0, 0};
            real *ys = malloc(y->size * sizeof(real));
            const int cuts[4] = {0, T < 1 ? T : 1, T < 6 ? T : 6, T};
            for (int piece = 0; piece < 3; piece++) {
                const int t0 = cuts[piece], n = cuts[piece + 1] - t0;
                if (n == 0)
                    continue;
                sb_tensor *part[IN_COUNT];
                for (int i = 0; i < IN_COUNT; i++) {
                    part[i] = in[i];
                    if (in[i]->ndim == 3) { /* frames [t0, t0 + n) of every row */
                        const int w = in[i]->shape[2];
                        int s[3] = {B, n, w};
                        part[i] = sb_tensor_new(&g, 3, s);
                        for (int b = 0; b < B; b++)
                            memcpy(part[i]->data + (size_t)b * n * w,
                                   in[i]->data + ((size_t)b * T + t0) * w,
                                   (size_t)n * w * sizeof(real));
                    }
                }
                g.record = 0;
                sb_tensor *yp = sb_log_linear_ssd_stream(
                    &g, part[IN_X], part[IN_DT], part[IN_BIAS], part[IN_ALOG], part[IN_B],
                    part[IN_C], part[IN_DL], part[IN_L], part[IN_D], levels, pos);
                const int E = H * P;
                for (int b = 0; b < B; b++)
                    memcpy(ys + ((size_t)b * T + t0) * E, yp->data + (size_t)b * n * E,
                           (size_t)n * E * sizeof(real));
            }
            assert_true(pos[0] == T && pos[1] == T);
            const double d = test_max_rel_diff(ys, y->data, y->size);
            if (!(d < 1e-12))
                fail_msg("T %d, K %d: the streamed recurrence differs from the whole form by %.3g",
                         T, K, d);
            free(levels), free(ys);
        }
    sb_graph_free(&g);
}

/* The level states hold only ceil(log2 T) non-empty levels: after T frames, level l is
 * non-empty exactly when bit l-1 of T is set (the buckets of the next position T). */
static void test_levels_occupied(void **state)
{
    (void)state;
    const int B = 1, H = 1, P = 2, N = 3, K = 15, T = 37; /* 37 = 100101b */
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    sb_tensor **in = op_inputs(&g, B, T, H, P, N, K, 77);
    const size_t PN = (size_t)P * N;
    real *levels = calloc((size_t)(K - 1) * PN, sizeof(real)), pos[1] = {0};
    sb_log_linear_ssd_stream(&g, in[IN_X], in[IN_DT], in[IN_BIAS], in[IN_ALOG], in[IN_B], in[IN_C],
                             in[IN_DL], in[IN_L], in[IN_D], levels, pos);
    for (int l = 1; l < K; l++) {
        double norm = 0;
        for (size_t k = 0; k < PN; k++)
            norm += fabs(levels[(size_t)(l - 1) * PN + k]);
        const int expect = (T >> (l - 1)) & 1;
        if ((norm > 0) != expect)
            fail_msg("after %d frames level %d holds %g (expected %s)", T, l, norm,
                     expect ? "frames" : "nothing");
    }
    free(levels);
    sb_graph_free(&g);
}

/* ---- the RecNet against the mimic ------------------------------------------------------------ */

static sb_model *make_model(int D, int H, int N, const mimic_file *f)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "log_linear_mamba2");
    cfg.d_input = f->I, cfg.d_output = f->O, cfg.d_model = D, cfg.n_layers = f->L;
    cfg.n_head = H, cfg.d_state = N, cfg.dropout = 0.1;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, f->seed, &m, &err) != SB_OK)
        fail_msg("log_linear_mamba2: %s", err.msg);
    return m;
}

static void test_mimic(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/log_linear_mamba2/log_linear_mamba2.json");
    const int N = config_N(&f);
    sb_model *m = make_model(f.D, f.H, N, &f);
    /* drawn weights bit for bit; dt_bias and A_log through exp/log within a float ulp */
    mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 1e-6, .logits_floor = 0.1, .logits_tol = 1e-9};
    check_against_mimic(mimic_model(&f, "log_linear_mamba2"), m, &f, &tol, "log_linear_mamba2");
    const double e = check_mimic_logits(mimic_model(&f, "log_linear_mamba2"), m, &f, 0.1, 1e-9,
                                        "log_linear_mamba2");
    print_message("log_linear_mamba2: float64 logits vs the mimic: %.3g\n", e);
    print_message("log_linear_mamba2 d=16: %zu parameters (mimic: the same)\n", m->params.count);
    sb_model_free(m);
    /* width 32: layout, count and initial values */
    const json_t *ref32 = mimic_model(&f, "log_linear_mamba2_d32");
    m = make_model(32, 4, N, &f);
    check_mimic_layout(ref32, m, "log_linear_mamba2 d32");
    check_mimic_sum_and_first(ref32, m, 1e-6, 1e-6, "log_linear_mamba2 d32");
    print_message("log_linear_mamba2 d=32: %zu parameters (mimic: the same)\n", m->params.count);
    sb_model_free(m);
    mimic_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_grad),
        cmocka_unit_test(test_op_vs_fla_mask),
        cmocka_unit_test(test_blocks_and_stream),
        cmocka_unit_test(test_levels_occupied),
        cmocka_unit_test(test_mimic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* float build */

static sb_model *make_model(int D, int H, int N, int I, int O, int L, uint64_t seed)
{
    sb_model_config cfg = {0};
    snprintf(cfg.model, sizeof cfg.model, "log_linear_mamba2");
    cfg.d_input = I, cfg.d_output = O, cfg.d_model = D, cfg.n_layers = L;
    cfg.n_head = H, cfg.d_state = N, cfg.dropout = 0.1;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&cfg, seed, &m, &err) != SB_OK)
        fail_msg("log_linear_mamba2: %s", err.msg);
    return m;
}

static void test_mimic_float(void **state)
{
    (void)state;
    mimic_file f;
    mimic_open(&f, "models/log_linear_mamba2/log_linear_mamba2.json");
    const int N = config_N(&f);
    sb_model *m = make_model(f.D, f.H, N, f.I, f.O, f.L, f.seed);
    mimic_tolerances tol = {
        .sum_rtol = 1e-6, .first_rtol = 1e-6, .logits_floor = 0.1, .logits_tol = 1e-4};
    const json_t *ref = mimic_model(&f, "log_linear_mamba2");
    check_against_mimic(ref, m, &f, &tol, "log_linear_mamba2");
    const double e = check_mimic_logits(ref, m, &f, 0.1, 1e-4, "log_linear_mamba2");
    print_message("log_linear_mamba2: float logits vs the float64 mimic: %.3g\n", e);
    sb_model_free(m);
    m = make_model(32, 4, N, f.I, f.O, f.L, f.seed);
    check_mimic_layout(mimic_model(&f, "log_linear_mamba2_d32"), m, "log_linear_mamba2 d32");
    sb_model_free(m);
    mimic_close(&f);
}

static void test_stream_float(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 11);
    const int B = 2, T = 150, chunks[4] = {1, 66, 63, 20};
    real *x = test_random_matrix((size_t)B * T * 5, 5);
    check_stream_matches_whole(m, x, B, T, chunks, 4, 2e-5, "log_linear_mamba2");
    free(x);
    sb_model_free(m);
}

static void test_threads(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 3);
    check_threads_identical(m, 3, 70, "log_linear_mamba2");
    sb_model_free(m);
}

static void test_stream_memory(void **state)
{
    (void)state;
    sb_model *m = make_model(16, 4, 8, 5, 7, 2, 3);
    check_stream_memory_flat(m, 2, 16, 40, "log_linear_mamba2");
    sb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mimic_float),
        cmocka_unit_test(test_stream_float),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stream_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif

/*
 * test_ops_grad.c - finite-difference gradient checks of every op, in double precision.
 * Shapes are tiny but cross every block boundary (attention blocks of 128 queries).
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
#include "ops/ops.h"

/* ---- linear ------------------------------------------------------------------------------ */

static sb_tensor *fn_linear(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_linear(g, in[0], in[1], in[2]);
}

static sb_tensor *fn_linear_nobias(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_linear(g, in[0], in[1], NULL);
}

static void test_linear(void **state)
{
    (void)state;
    gc_problem p = {.name = "linear", .fn = fn_linear};
    int x[3] = {2, 3, 5}, w[2] = {4, 5}, b[1] = {4};
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_add_input(&p, "w", 2, w, -1, 1, 2);
    gc_add_input(&p, "b", 1, b, -1, 1, 3);
    gc_check(&p);
    gc_free(&p);
    gc_problem q = {.name = "linear without bias", .fn = fn_linear_nobias};
    gc_add_input(&q, "x", 3, x, -1, 1, 4);
    gc_add_input(&q, "w", 2, w, -1, 1, 5);
    gc_check(&q);
    gc_free(&q);
}

/* ---- norms ---------------------------------------------------------------------------------- */

static sb_tensor *fn_layernorm(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_layernorm(g, in[0], in[1], in[2], 1e-5);
}

static void test_layernorm(void **state)
{
    (void)state;
    gc_problem p = {.name = "layernorm", .fn = fn_layernorm};
    int x[3] = {2, 3, 37}, d[1] = {37}; /* 37: crosses the 32-column blocks */
    gc_add_input(&p, "x", 3, x, -2, 2, 1);
    gc_add_input(&p, "gamma", 1, d, 0.5, 1.5, 2);
    gc_add_input(&p, "beta", 1, d, -1, 1, 3);
    gc_check(&p);
    gc_free(&p);
}

static sb_tensor *fn_rmsnorm(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rmsnorm_rms_eps(g, in[0], in[1], 1e-8);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    gc_problem p = {.name = "rmsnorm (rms + eps)", .fn = fn_rmsnorm};
    int x[4] = {2, 3, 4, 6}, d[1] = {6}; /* w shared by 4 heads */
    gc_add_input(&p, "x", 4, x, -2, 2, 1);
    gc_add_input(&p, "w", 1, d, 0.5, 1.5, 2);
    gc_check(&p);
    gc_free(&p);
}

/* At x = 0 the reference's gradient is g / eps (PyTorch's norm backward gives 0 for the
 * second term); checked directly, since finite differences are meaningless there. */
static void test_rmsnorm_at_zero(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    g.record = 1;
    real xd[4] = {0, 0, 0, 0}, wd[4] = {1, 2, 3, 4};
    int s4[1] = {4};
    sb_tensor *x = sb_tensor_wrap(&g, xd, 1, s4), *w = sb_tensor_wrap(&g, wd, 1, s4);
    x->requires_grad = 1;
    sb_tensor *y = sb_rmsnorm_rms_eps(&g, x, w, 1e-8);
    real *dy = sb_tensor_grad(&g, y);
    for (int i = 0; i < 4; i++)
        dy[i] = 1;
    sb_graph_backward(&g);
    for (int i = 0; i < 4; i++) {
        assert_true(y->data[i] == 0);
        assert_true(fabs(x->grad[i] - wd[i] / 1e-8) <= 1e-6 * wd[i] / 1e-8);
    }
    sb_graph_free(&g);
}

/* ---- elementwise -------------------------------------------------------------------------- */

static sb_tensor *fn_add3(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    /* a used twice: the gradients of both uses must add up */
    return sb_add(g, sb_add3(g, in[0], in[1], in[2]), in[0]);
}

static void test_add(void **state)
{
    (void)state;
    gc_problem p = {.name = "add / add3", .fn = fn_add3};
    int s[2] = {3, 4};
    gc_add_input(&p, "a", 2, s, -1, 1, 1);
    gc_add_input(&p, "b", 2, s, -1, 1, 2);
    gc_add_input(&p, "c", 2, s, -1, 1, 3);
    gc_check(&p);
    gc_free(&p);
}

static sb_tensor *fn_dropout(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_dropout(g, in[0], 0.3);
}

static void test_dropout(void **state)
{
    (void)state;
    gc_problem p = {.name = "dropout", .fn = fn_dropout, .training = 1};
    int s[2] = {8, 16};
    gc_add_input(&p, "x", 2, s, -1, 1, 1);
    gc_check(&p);
    gc_free(&p);
    /* statistics: about 30% dropped, survivors scaled by 1 / 0.7; eval mode is identity */
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.training = 1;
    g.dropout_seed = 9;
    int big[1] = {100000};
    sb_tensor *x = sb_tensor_new(&g, 1, big);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = 1;
    sb_tensor *y = sb_dropout(&g, x, 0.3);
    size_t zeros = 0;
    for (size_t i = 0; i < y->size; i++) {
        if (y->data[i] == 0)
            zeros++;
        else
            assert_true(fabs(y->data[i] - 1 / 0.7) < 1e-12);
    }
    assert_true(fabs((double)zeros / 1e5 - 0.3) < 0.01);
    sb_tensor *y2 = sb_dropout(&g, x, 0.3); /* a second call draws another mask */
    assert_memory_not_equal(y->data, y2->data, 64 * sizeof(real));
    g.training = 0;
    assert_ptr_equal(sb_dropout(&g, x, 0.3), x);
    sb_graph_free(&g);
}

typedef sb_tensor *(*unary_op)(sb_graph *, sb_tensor *);

static sb_tensor *fn_unary(sb_graph *g, sb_tensor **in, void *ctx)
{
    unary_op op = *(unary_op *)ctx;
    return op(g, in[0]);
}

static void test_activations(void **state)
{
    (void)state;
    struct {
        const char *name;
        unary_op op;
        double lo, hi;
    } cases[] = {
        {"gelu", sb_gelu, -3, 3},
        {"silu", sb_silu, -4, 4},
        {"sigmoid", sb_sigmoid, -4, 4},
        {"softplus", sb_softplus, -5, 5},
        {"softplus above 20", sb_softplus, 21, 30},
        {"tanh", sb_tanh_op, -2, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        gc_problem p = {.name = cases[c].name, .fn = fn_unary, .ctx = &cases[c].op};
        int s[2] = {5, 7};
        gc_add_input(&p, "x", 2, s, cases[c].lo, cases[c].hi, (unsigned)c + 1);
        gc_check(&p);
        gc_free(&p);
    }
}

static sb_tensor *fn_swiglu(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_swiglu_beta(g, in[0], in[1]);
}

static void test_swiglu(void **state)
{
    (void)state;
    gc_problem p = {.name = "swiglu with beta", .fn = fn_swiglu};
    int h[3] = {2, 3, 10}, one[1] = {1};
    gc_add_input(&p, "h", 3, h, -2, 2, 1);
    gc_add_input(&p, "beta", 1, one, 0.5, 1.5, 2);
    gc_check(&p);
    gc_free(&p);
}

/* ---- rope, attention -------------------------------------------------------------------- */

static real test_inv_freq[4] = {1.0, 0.3, 0.1, 0.03};

static sb_tensor *fn_rope(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_rope(g, in[0], test_inv_freq);
}

static void test_rope(void **state)
{
    (void)state;
    gc_problem p = {.name = "rope", .fn = fn_rope};
    int x[4] = {2, 5, 3, 8};
    gc_add_input(&p, "x", 4, x, -1, 1, 1);
    gc_check(&p);
    gc_free(&p);
    /* position 0 is not rotated; the rotation keeps pair norms */
    sb_graph g;
    sb_graph_init(&g, 1 << 16);
    sb_tensor *xt = sb_tensor_new(&g, 4, x);
    for (size_t i = 0; i < xt->size; i++)
        xt->data[i] = (real)((double)(i % 7) - 3.0);
    sb_tensor *y = sb_rope(&g, xt, test_inv_freq);
    for (int i = 0; i < 3 * 8; i++)
        assert_true(y->data[i] == xt->data[i]);
    sb_graph_free(&g);
}

static sb_tensor *fn_attention(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_attention_causal(g, in[0], in[1], in[2]);
}

static void test_attention(void **state)
{
    (void)state;
    /* T = 131 crosses the 128-query block */
    int shapes[2][4] = {{2, 7, 2, 4}, {1, 131, 2, 2}};
    for (int c = 0; c < 2; c++) {
        gc_problem p = {.name = c == 0 ? "attention T=7" : "attention T=131", .fn = fn_attention};
        gc_add_input(&p, "q", 4, shapes[c], -1.5, 1.5, 1);
        gc_add_input(&p, "k", 4, shapes[c], -1.5, 1.5, 2);
        gc_add_input(&p, "v", 4, shapes[c], -1, 1, 3);
        gc_check(&p);
        gc_free(&p);
    }
}

/* Against a plain softmax(QK^T) V with the full matrix. */
static void test_attention_reference(void **state)
{
    (void)state;
    const int B = 2, T = 150, H = 3, Dh = 5;
    int shape[4] = {B, T, H, Dh};
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    sb_tensor *q = sb_tensor_new(&g, 4, shape), *k = sb_tensor_new(&g, 4, shape),
              *v = sb_tensor_new(&g, 4, shape);
    for (size_t i = 0; i < q->size; i++) {
        q->data[i] = (real)sin(0.37 * (double)i);
        k->data[i] = (real)cos(0.11 * (double)i);
        v->data[i] = (real)sin(0.05 * (double)i + 1);
    }
    sb_tensor *o = sb_attention_causal(&g, q, k, v);
    double *s = malloc((size_t)T * sizeof *s);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double m = -1e300, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double acc = 0;
                    for (int i = 0; i < Dh; i++)
                        acc += q->data[(((size_t)b * T + t) * H + h) * Dh + i] *
                               k->data[(((size_t)b * T + j) * H + h) * Dh + i];
                    s[j] = acc / sqrt((double)Dh);
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j <= t; j++)
                    sum += (s[j] = exp(s[j] - m));
                for (int i = 0; i < Dh; i++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += s[j] / sum * v->data[(((size_t)b * T + j) * H + h) * Dh + i];
                    double got = o->data[(((size_t)b * T + t) * H + h) * Dh + i];
                    worst = fmax(worst, fabs(got - acc));
                }
            }
    assert_true(worst < 1e-12);
    free(s);
    sb_graph_free(&g);
}

/* ---- causal depthwise convolution -------------------------------------------------------- */

static sb_tensor *fn_conv(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_conv1d_causal(g, in[0], in[1], in[2]);
}

static void test_conv(void **state)
{
    (void)state;
    gc_problem p = {.name = "causal depthwise conv", .fn = fn_conv};
    int x[3] = {2, 6, 19}, w[3] = {19, 1, 4}, b[1] = {19}; /* 19 channels cross 16-blocks */
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_add_input(&p, "w", 3, w, -0.5, 0.5, 2);
    gc_add_input(&p, "b", 1, b, -0.5, 0.5, 3);
    gc_check(&p);
    gc_free(&p);
}

/* Streaming in chunks (3, 1, 4 frames) equals the whole sequence at once. */
static void test_conv_stream(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    int xs[3] = {2, 8, 5}, ws[3] = {5, 1, 4}, bs[1] = {5};
    sb_tensor *x = sb_tensor_new(&g, 3, xs), *w = sb_tensor_new(&g, 3, ws),
              *b = sb_tensor_new(&g, 1, bs);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)sin(0.3 * (double)i);
    for (size_t i = 0; i < w->size; i++)
        w->data[i] = (real)cos(0.7 * (double)i);
    for (size_t i = 0; i < b->size; i++)
        b->data[i] = (real)(0.1 * (double)i);
    sb_tensor *full = sb_conv1d_causal(&g, x, w, b);
    real history[2 * 3 * 5] = {0};
    int chunks[3] = {3, 1, 4}, t0 = 0;
    for (int c = 0; c < 3; c++) {
        int cs[3] = {2, chunks[c], 5};
        sb_tensor *xc = sb_tensor_new(&g, 3, cs);
        for (int bb = 0; bb < 2; bb++)
            memcpy(xc->data + (size_t)bb * chunks[c] * 5, x->data + ((size_t)bb * 8 + t0) * 5,
                   (size_t)chunks[c] * 5 * sizeof(real));
        sb_tensor *yc = sb_conv1d_causal_stream(&g, xc, w, b, history);
        for (int bb = 0; bb < 2; bb++)
            for (int t = 0; t < chunks[c]; t++)
                for (int ch = 0; ch < 5; ch++)
                    assert_true(fabs(yc->data[((size_t)bb * chunks[c] + t) * 5 + ch] -
                                     full->data[((size_t)bb * 8 + t0 + t) * 5 + ch]) < 1e-14);
        t0 += chunks[c];
    }
    sb_graph_free(&g);
}

/* ---- gru ------------------------------------------------------------------------------------ */

static sb_tensor *fn_gru(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_gru(g, in[0], in[1], in[2], in[3], in[4]);
}

static void test_gru(void **state)
{
    (void)state;
    gc_problem p = {.name = "gru", .fn = fn_gru};
    int x[3] = {2, 7, 3}, wih[2] = {12, 3}, whh[2] = {12, 4}, b[1] = {12};
    gc_add_input(&p, "x", 3, x, -1, 1, 1);
    gc_add_input(&p, "w_ih", 2, wih, -0.8, 0.8, 2);
    gc_add_input(&p, "w_hh", 2, whh, -0.8, 0.8, 3);
    gc_add_input(&p, "b_ih", 1, b, -0.5, 0.5, 4);
    gc_add_input(&p, "b_hh", 1, b, -0.5, 0.5, 5);
    gc_check(&p);
    gc_free(&p);
}

/* Streaming the GRU in chunks equals one run over the whole sequence. */
static void test_gru_stream(void **state)
{
    (void)state;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    const int B = 2, T = 9, D = 3, Hd = 4;
    int xs[3] = {B, T, D}, wih[2] = {3 * Hd, D}, whh[2] = {3 * Hd, Hd}, bs[1] = {3 * Hd};
    sb_tensor *x = sb_tensor_new(&g, 3, xs), *w_ih = sb_tensor_new(&g, 2, wih),
              *w_hh = sb_tensor_new(&g, 2, whh), *b_ih = sb_tensor_new(&g, 1, bs),
              *b_hh = sb_tensor_new(&g, 1, bs);
    sb_tensor *all[5] = {x, w_ih, w_hh, b_ih, b_hh};
    for (int k = 0; k < 5; k++)
        for (size_t i = 0; i < all[k]->size; i++)
            all[k]->data[i] = (real)(0.6 * sin(0.37 * (double)i + k));
    sb_tensor *full = sb_gru(&g, x, w_ih, w_hh, b_ih, b_hh);
    real h[2 * 4] = {0};
    int chunks[3] = {4, 1, 4}, t0 = 0;
    for (int c = 0; c < 3; c++) {
        int cs[3] = {B, chunks[c], D};
        sb_tensor *xc = sb_tensor_new(&g, 3, cs);
        for (int bb = 0; bb < B; bb++)
            memcpy(xc->data + (size_t)bb * chunks[c] * D, x->data + ((size_t)bb * T + t0) * D,
                   (size_t)chunks[c] * D * sizeof(real));
        sb_tensor *yc = sb_gru_stream(&g, xc, w_ih, w_hh, b_ih, b_hh, h);
        for (int bb = 0; bb < B; bb++)
            for (int t = 0; t < chunks[c]; t++)
                for (int j = 0; j < Hd; j++)
                    assert_true(fabs(yc->data[((size_t)bb * chunks[c] + t) * Hd + j] -
                                     full->data[((size_t)bb * T + t0 + t) * Hd + j]) < 1e-14);
        t0 += chunks[c];
    }
    sb_graph_free(&g);
}

/* ---- cross-entropy ------------------------------------------------------------------------ */

static int32_t ce_target[12] = {0, 3, 2, 1, 4, 4, 0, 2, 1, 3, 0, 1};
static uint8_t ce_valid[12] = {1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1};

static sb_tensor *fn_ce(sb_graph *g, sb_tensor **in, void *ctx)
{
    (void)ctx;
    return sb_cross_entropy(g, in[0], ce_target, ce_valid, 1, NULL);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    gc_problem p = {.name = "cross-entropy", .fn = fn_ce};
    int s[3] = {3, 4, 5};
    gc_add_input(&p, "logits", 3, s, -2, 2, 1);
    gc_check(&p);
    gc_free(&p);
}

/* ---- windowed accuracy ---------------------------------------------------------------------- */

static void test_window_accuracy(void **state)
{
    (void)state;
    /* one sample, T = 5 frames, C = 3, two elements: frames [0, 2) and [2, 5) */
    real probs[15] = {0.6, 0.3, 0.1, /* frame 0 */
                      0.1, 0.5, 0.4, /* frame 1: window sum 0.7, 0.8, 0.5 -> class 1 */
                      0.5, 0.2, 0.3, 0.5, 0.2, 0.3, 0.1, 0.2, 0.7}; /* sums 1.1 .6 1.3 -> 2 */
    int32_t target[5] = {1, 1, 0, 0, 0};
    int32_t start[2] = {0, 2}, len[2] = {2, 3};
    int64_t correct = 0, counted = 0;
    sb_window_accuracy(probs, 5, 3, target, start, len, 1, 2, &correct, &counted);
    assert_int_equal(counted, 2);
    assert_int_equal(correct, 1); /* element 0 right (1), element 1 wrong (2 vs 0) */
    /* ties go to the first maximum; padded windows are skipped */
    real tie[6] = {0.5, 0.5, 0, 0.5, 0.5, 0};
    int32_t t2[2] = {0, 0}, s2[2] = {0, 0}, l2[2] = {2, 0};
    correct = counted = 0;
    sb_window_accuracy(tie, 2, 3, t2, s2, l2, 1, 2, &correct, &counted);
    assert_int_equal(counted, 1);
    assert_int_equal(correct, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rmsnorm_at_zero),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_reference),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_stream),
        cmocka_unit_test(test_gru),
        cmocka_unit_test(test_gru_stream),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_window_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

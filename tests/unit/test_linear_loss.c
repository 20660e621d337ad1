/*
 * test_linear_loss.c - the fused decoder head (sb_linear_cross_entropy) against the unfused
 * pair sb_linear + sb_cross_entropy + sb_window_accuracy, in the float build, at the
 * decoder's real class count (1601) and with more rows than one chunk (3 samples of 400
 * frames = 1200 rows, default chunks of 512):
 *   - the loss and the gradients of x, W and b agree within 1e-5 of each tensor's largest
 *     value (the double-precision finite-difference check of the op is a row of test_ops);
 *   - the accuracy counts are identical, on windows of many lengths that cross the chunk
 *     boundaries, with half of the windows' targets set to the unfused argmax (so that the
 *     count is not trivially 0);
 *   - the step's arena stays below one [N, C] matrix (the unfused path needs two).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"
#include "tensor/nn.h"

enum { B = 3, T = 400, N = B * T, D = 32, C = 1601, E = 40 };

typedef struct head_case {
    real x[N * D], w[C * D], b[C];
    int32_t target[N];
    uint8_t valid[N];
    int32_t elem_start[B * E], elem_len[B * E];
} head_case;

static uint64_t lcg_state = 12345;
static double uniform(double lo, double hi)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg_state >> 11) / 9007199254740992.0;
}

/* Windows of 1 to 60 frames back to back from frame 3, the last ones padding (length 0);
 * the samples end 0, 37 and 74 frames early (invalid padding frames). */
static void case_fill(head_case *hc)
{
    for (int i = 0; i < N * D; i++)
        hc->x[i] = (real)uniform(-1, 1);
    for (int i = 0; i < C * D; i++)
        hc->w[i] = (real)uniform(-0.5, 0.5);
    for (int i = 0; i < C; i++)
        hc->b[i] = (real)uniform(-0.2, 0.2);
    for (int bb = 0; bb < B; bb++) {
        int frames = T - 37 * bb;
        for (int t = 0; t < T; t++) {
            hc->target[bb * T + t] = (int32_t)uniform(0, C);
            hc->valid[bb * T + t] = t < frames;
        }
        int t = 3;
        for (int e = 0; e < E; e++) {
            int len = 1 + (int)uniform(0, 60);
            if (t + len > frames)
                len = 0;
            hc->elem_start[bb * E + e] = len > 0 ? t : 0;
            hc->elem_len[bb * E + e] = len;
            t += len;
        }
    }
}

static sb_tensor *leaf(sb_graph *g, real *data, int ndim, const int *shape)
{
    sb_tensor *t = sb_tensor_wrap(g, data, ndim, shape);
    t->requires_grad = 1;
    return t;
}

typedef struct head_result {
    double loss;
    int64_t correct, counted;
    real *dx, *dw, *db;
    size_t arena_peak;
} head_result;

static real *copy_grad(const sb_tensor *t)
{
    real *out = malloc(t->size * sizeof *out);
    assert_non_null(out);
    assert_non_null(t->grad);
    memcpy(out, t->grad, t->size * sizeof *out);
    return out;
}

/* One recorded forward and backward of the head, fused or not. */
static head_result run_head(head_case *hc, int fused)
{
    sb_graph g;
    sb_graph_init(&g, (size_t)16 << 20);
    g.record = 1;
    const int xs[2] = {N, D}, ws[2] = {C, D}, bs[1] = {C};
    sb_tensor *x = leaf(&g, hc->x, 2, xs), *w = leaf(&g, hc->w, 2, ws), *b = leaf(&g, hc->b, 1, bs);
    head_result r = {0};
    sb_tensor *loss;
    if (fused) {
        sb_head_loss h = {.target = hc->target,
                          .valid = hc->valid,
                          .loss_scale = 0.5f,
                          .elem_start = hc->elem_start,
                          .elem_len = hc->elem_len,
                          .B = B,
                          .T = T,
                          .E = E};
        loss = sb_linear_cross_entropy(&g, x, w, b, &h);
        r.correct = h.correct, r.counted = h.counted;
    } else {
        sb_tensor *probs = NULL;
        loss = sb_cross_entropy(&g, sb_linear(&g, x, w, b), hc->target, hc->valid, 0.5f, &probs);
        sb_window_accuracy(probs->data, T, C, hc->target, hc->elem_start, hc->elem_len, B, E,
                           &r.correct, &r.counted);
    }
    r.loss = (double)loss->data[0];
    r.arena_peak = g.arena.peak;
    sb_tensor_grad(&g, loss)[0] = 1;
    sb_graph_backward(&g);
    r.dx = copy_grad(x), r.dw = copy_grad(w), r.db = copy_grad(b);
    sb_graph_free(&g);
    return r;
}

static void result_free(head_result *r)
{
    free(r->dx);
    free(r->dw);
    free(r->db);
}

/* max |a - ref| over max |ref| */
static double relative_error(const real *a, const real *ref, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

/* Sets the target of every second window to the class the unfused probabilities pick. */
static int aim_half_the_windows(head_case *hc)
{
    sb_graph g;
    sb_graph_init(&g, (size_t)16 << 20);
    const int xs[2] = {N, D}, ws[2] = {C, D}, bs[1] = {C};
    sb_tensor *logits =
        sb_linear(&g, sb_tensor_wrap(&g, hc->x, 2, xs), sb_tensor_wrap(&g, hc->w, 2, ws),
                  sb_tensor_wrap(&g, hc->b, 1, bs));
    sb_tensor *probs = NULL;
    sb_cross_entropy(&g, logits, hc->target, hc->valid, 1, &probs);
    int aimed = 0;
    for (int i = 0; i < B * E; i += 2) {
        if (hc->elem_len[i] == 0)
            continue;
        size_t f0 = (size_t)(i / E) * T + (size_t)hc->elem_start[i];
        int best = 0;
        double best_sum = -1;
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int f = 0; f < hc->elem_len[i]; f++)
                s += (double)probs->data[(f0 + (size_t)f) * C + (size_t)j];
            if (s > best_sum)
                best_sum = s, best = j;
        }
        hc->target[f0] = best;
        aimed++;
    }
    sb_graph_free(&g);
    return aimed;
}

/* Windows of nonzero length; fails unless some of them cross both chunk boundaries (rows 512
 * and 1024). */
static int windows_in_use(const head_case *hc)
{
    int used = 0, crossing = 0;
    for (int i = 0; i < B * E; i++) {
        if (hc->elem_len[i] == 0)
            continue;
        used++;
        int f0 = (i / E) * T + hc->elem_start[i], f1 = f0 + hc->elem_len[i];
        crossing += (f0 < 512 && f1 > 512) || (f0 < 1024 && f1 > 1024);
    }
    assert_int_equal(crossing, 2);
    return used;
}

static void test_fused_matches_unfused(void **state)
{
    (void)state;
    head_case *hc = malloc(sizeof *hc);
    assert_non_null(hc);
    case_fill(hc);
    int aimed = aim_half_the_windows(hc);
    head_result fused = run_head(hc, 1), plain = run_head(hc, 0);

    assert_true(fabs(fused.loss - plain.loss) <= 1e-5 * fabs(plain.loss));
    assert_true(relative_error(fused.dx, plain.dx, (size_t)N * D) <= 1e-5);
    assert_true(relative_error(fused.dw, plain.dw, (size_t)C * D) <= 1e-5);
    assert_true(relative_error(fused.db, plain.db, C) <= 1e-5);
    /* the counts: equal, and not trivial */
    assert_int_equal(fused.counted, plain.counted);
    assert_int_equal(fused.correct, plain.correct);
    assert_int_equal(plain.counted, windows_in_use(hc));
    assert_true(plain.correct >= aimed - 2); /* a tie could pick another class: a margin */
    /* memory: the unfused pair holds logits and probabilities ([N, C] each) */
    const size_t one_matrix = (size_t)N * C * sizeof(real);
    assert_true(plain.arena_peak >= 2 * one_matrix);
    assert_true(fused.arena_peak < one_matrix);

    result_free(&fused);
    result_free(&plain);
    free(hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_matches_unfused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* linear.c - y = x W^T + b, the op every projection uses (see ops.h).
 *
 * Forward:  y[N, out] = x[N, in] W[out, in]^T + b            (one sgemm)
 * Backward: dx += dy W;  dW += dy^T x;  db += sum_n dy[n]     (two sgemm + a column sum)
 *
 * Under --precision bf16 the op rounds x and W once in the forward and keeps the copies for
 * the backward, where dy is rounded once for both products (sb_gemm would round each operand
 * of each product again: six roundings where three do). The products' bits are the same.
 */
#include <omp.h>
#include <string.h>

#include "ops/ops.h"
#include "tensor/gemm_engine.h"

typedef struct linear_ctx {
    sb_tensor *x, *w, *b, *y;
    int N, in, out;
    uint16_t *x16, *w16; /* bf16 copies of x and W (NULL: the products ran in float32) */
} linear_ctx;

/* A bf16 copy of the dense rows x cols matrix m in the graph's arena. */
static uint16_t *rounded_copy(sb_graph *g, const real *m, int rows, int cols)
{
#ifdef SB_REAL_DOUBLE
    (void)g, (void)m, (void)rows, (void)cols;
    return NULL; /* never asked for: bf16 never applies in the double build */
#else
    uint16_t *copy = sb_graph_alloc(g, (size_t)rows * (size_t)cols * sizeof *copy);
    sb_bf16_from_float(rows, cols, m, cols, copy);
    return copy;
#endif
}

void sb_colsum_add(const real *x, int N, int C, real *out)
{
    /* columns split between threads, rows summed in order: the same result for any
     * number of threads */
    int blocks = (C + 63) / 64;
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)C > 65536)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
        real acc[64];
        for (int c = c0; c < c1; c++)
            acc[c - c0] = 0;
        for (int n = 0; n < N; n++) {
            const real *row = x + (size_t)n * (size_t)C;
            for (int c = c0; c < c1; c++)
                acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; c++)
            out[c] += acc[c - c0];
    }
}

static void linear_backward(sb_graph *g, void *ctx)
{
    linear_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad;
    /* both products have the forward's size: bf16 applies to them as it did there */
    uint16_t *dy16 = c->x16 != NULL && sb_gemm_bf16_applies(c->N, c->in, c->out)
                         ? rounded_copy(g, dy, c->N, c->out)
                         : NULL;
    if (c->x->requires_grad) {
        int fresh;
        real *dx = sb_tensor_grad_fresh(g, c->x, &fresh);
        sb_gemm_rounded(0, 0, c->N, c->in, c->out, 1, dy, dy16, c->out, c->w->data, c->w16, c->in,
                        fresh ? 0 : 1, dx, c->in);
    }
    if (c->w->requires_grad)
        sb_gemm_rounded(1, 0, c->out, c->in, c->N, 1, dy, dy16, c->out, c->x->data, c->x16, c->in,
                        1, sb_tensor_grad(g, c->w), c->in);
    if (c->b != NULL && c->b->requires_grad)
        sb_colsum_add(dy, c->N, c->out, sb_tensor_grad(g, c->b));
}

sb_tensor *sb_linear(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b)
{
    SB_ASSERT(w->ndim == 2);
    int out = w->shape[0], in = w->shape[1];
    SB_ASSERT(x->shape[x->ndim - 1] == in);
    SB_ASSERT(b == NULL || (int)b->size == out);
    int N = (int)(x->size / (size_t)in);
    int shape[SB_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[x->ndim - 1] = out;
    sb_tensor *y = sb_tensor_new(g, x->ndim, shape);
    if (b != NULL) {
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)out > 65536)
        for (int n = 0; n < N; n++)
            memcpy(y->data + (size_t)n * (size_t)out, b->data, (size_t)out * sizeof(real));
    }
    y->requires_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    uint16_t *x16 = NULL, *w16 = NULL;
    if (sb_gemm_bf16_applies(N, out, in)) {
        x16 = rounded_copy(g, x->data, N, in);
        w16 = rounded_copy(g, w->data, out, in);
    }
    sb_gemm_rounded(0, 1, N, out, in, 1, x->data, x16, in, w->data, w16, in, b != NULL ? 1 : 0,
                    y->data, out);
    if (y->requires_grad) {
        linear_ctx *c = sb_graph_record(g, linear_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->w = w, c->b = b, c->y = y;
            c->N = N, c->in = in, c->out = out;
            c->x16 = x16, c->w16 = w16;
        }
    }
    return y;
}

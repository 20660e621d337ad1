/* linear.c - y = x W^T + b, the op every projection uses (see ops.h).
 *
 * Forward:  y[N, out] = x[N, in] W[out, in]^T + b            (one sgemm)
 * Backward: dx += dy W;  dW += dy^T x;  db += sum_n dy[n]     (two sgemm + a column sum)
 */
#include <omp.h>
#include <string.h>

#include "ops/ops.h"

typedef struct linear_ctx {
    sb_tensor *x, *w, *b, *y;
    int N, in, out;
} linear_ctx;

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
    if (c->x->requires_grad) {
        int fresh;
        real *dx = sb_tensor_grad_fresh(g, c->x, &fresh);
        sb_gemm(0, 0, c->N, c->in, c->out, 1, dy, c->out, c->w->data, c->in, fresh ? 0 : 1, dx,
                c->in);
    }
    if (c->w->requires_grad)
        sb_gemm(1, 0, c->out, c->in, c->N, 1, dy, c->out, c->x->data, c->in, 1,
                sb_tensor_grad(g, c->w), c->in);
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
    sb_gemm(0, 1, N, out, in, 1, x->data, in, w->data, in, b != NULL ? 1 : 0, y->data, out);

    y->requires_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    if (y->requires_grad) {
        linear_ctx *c = sb_graph_record(g, linear_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->w = w, c->b = b, c->y = y;
            c->N = N, c->in = in, c->out = out;
        }
    }
    return y;
}

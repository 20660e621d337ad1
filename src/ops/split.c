/* split.c - splitting a tensor's last dimension into contiguous parts (ops_ssm.h).
 * Forward: part k, row r = x[r, off_k : off_k + w_k]. Backward: dx[r, off_k + i] += dpart_k[r, i]
 * for every part that received a gradient. Rows are independent: split across threads. */
#include <omp.h>
#include <string.h>

#include "ops/ops_ssm.h"

#define SPLIT_MAX_PARTS 8

typedef struct split_ctx {
    sb_tensor *x, *parts[SPLIT_MAX_PARTS];
    int n_parts, rows, width;
} split_ctx;

static void split_backward(sb_graph *g, void *ctx)
{
    split_ctx *c = ctx;
    if (!c->x->requires_grad)
        return;
    int any = 0;
    for (int k = 0; k < c->n_parts; k++)
        any |= c->parts[k]->grad != NULL;
    if (!any)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const int rows = c->rows, width = c->width;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)width > 32768)
    for (int r = 0; r < rows; r++) {
        real *dxr = dx + (size_t)r * (size_t)width;
        for (int k = 0; k < c->n_parts; k++) {
            const int w = c->parts[k]->shape[c->parts[k]->ndim - 1];
            const real *dp = c->parts[k]->grad;
            if (dp != NULL) {
                dp += (size_t)r * (size_t)w;
                for (int i = 0; i < w; i++)
                    dxr[i] += dp[i];
            }
            dxr += w;
        }
    }
}

void sb_split_cols(sb_graph *g, sb_tensor *x, int n_parts, const int *widths, sb_tensor **parts)
{
    SB_ASSERT(n_parts >= 1 && n_parts <= SPLIT_MAX_PARTS);
    const int width = x->shape[x->ndim - 1];
    const int rows = (int)(x->size / (size_t)width);
    int total = 0, shape[SB_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    for (int k = 0; k < n_parts; k++) {
        SB_ASSERT(widths[k] >= 1);
        total += widths[k];
        shape[x->ndim - 1] = widths[k];
        parts[k] = sb_tensor_new(g, x->ndim, shape);
        parts[k]->requires_grad = x->requires_grad;
    }
    SB_ASSERT(total == width);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)width > 32768)
    for (int r = 0; r < rows; r++) {
        const real *xr = x->data + (size_t)r * (size_t)width;
        for (int k = 0; k < n_parts; k++) {
            memcpy(parts[k]->data + (size_t)r * (size_t)widths[k], xr,
                   (size_t)widths[k] * sizeof(real));
            xr += widths[k];
        }
    }
    if (x->requires_grad) {
        split_ctx *c = sb_graph_record(g, split_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->n_parts = n_parts, c->rows = rows, c->width = width;
            for (int k = 0; k < n_parts; k++)
                c->parts[k] = parts[k];
        }
    }
}

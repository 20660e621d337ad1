/* gla_family.c - the ops of ops_gla_family.h (LinearAttention's feature map, HGRN2's input
 * gate). Both are elementwise after sb_linear:
 *   product:         y = a ⊙ b;          da += dy ⊙ b,  db += dy ⊙ a
 *   one minus exp:   y = 1 - exp(x);     dx += -dy ⊙ exp(x)
 * Elements are split between threads; each element's gradient has one writer.
 */
#include <omp.h>
#include <tgmath.h>

#include "ops/ops.h"
#include "ops/ops_gla_family.h"

#define PAR_MIN 32768 /* below this many elements, one thread */

typedef struct product_ctx {
    sb_tensor *a, *b, *y;
} product_ctx;

static void product_backward(sb_graph *g, void *ctx)
{
    product_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad, *a = c->a->data, *b = c->b->data;
    const size_t n = c->y->size;
    if (c->a->requires_grad) {
        real *da = sb_tensor_grad(g, c->a);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
        for (size_t i = 0; i < n; i++)
            da[i] += dy[i] * b[i];
    }
    if (c->b->requires_grad) {
        real *db = sb_tensor_grad(g, c->b);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
        for (size_t i = 0; i < n; i++)
            db[i] += dy[i] * a[i];
    }
}

/* y = a ⊙ b for two tensors of the same shape */
static sb_tensor *product(sb_graph *g, sb_tensor *a, sb_tensor *b)
{
    SB_ASSERT(a->size == b->size);
    sb_tensor *y = sb_tensor_new(g, a->ndim, a->shape);
    const size_t n = y->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y->data[i] = a->data[i] * b->data[i];
    y->requires_grad = a->requires_grad || b->requires_grad;
    if (y->requires_grad) {
        product_ctx *c = sb_graph_record(g, product_backward, sizeof *c);
        if (c != NULL)
            c->a = a, c->b = b, c->y = y;
    }
    return y;
}

sb_tensor *sb_hadamard_map(sb_graph *g, sb_tensor *x, sb_tensor *w1, sb_tensor *b1, sb_tensor *w2,
                           sb_tensor *b2)
{
    return product(g, sb_linear(g, x, w1, b1), sb_linear(g, x, w2, b2));
}

typedef struct ome_ctx {
    sb_tensor *x, *y;
} ome_ctx;

static void ome_backward(sb_graph *g, void *ctx)
{
    ome_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const real *dy = c->y->grad, *x = c->x->data;
    const size_t n = c->y->size;
    /* exp recomputed: y - 1 would lose the small values of exp(x) to rounding */
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] -= dy[i] * exp(x[i]);
}

sb_tensor *sb_one_minus_exp(sb_graph *g, sb_tensor *glog)
{
    sb_tensor *y = sb_tensor_new(g, glog->ndim, glog->shape);
    const size_t n = y->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y->data[i] = 1 - exp(glog->data[i]);
    y->requires_grad = glog->requires_grad;
    if (y->requires_grad) {
        ome_ctx *c = sb_graph_record(g, ome_backward, sizeof *c);
        if (c != NULL)
            c->x = glog, c->y = y;
    }
    return y;
}

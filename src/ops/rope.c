/* rope.c - rotary position embedding of the reference transformer (see ops.h).
 * Pairs (i, i + Dh/2), angle t f_i:  y1 = x1 cos + x2 sin,  y2 = -x1 sin + x2 cos.
 * The backward is the transposed rotation: dx1 = dy1 cos - dy2 sin, dx2 = dy1 sin + dy2 cos. */
#include <omp.h>
#include <tgmath.h>

#include "ops/ops.h"

typedef struct rope_ctx {
    sb_tensor *x, *y;
    real *cs; /* [T][Dh/2][2] cos, sin */
    int B, T, H, Dh;
} rope_ctx;

/* dir = +1 forward, -1 backward (transpose) */
static void rope_apply(const real *cs, const real *in, real *out, int accumulate, int B, int T,
                       int H, int Dh, int dir)
{
    const int half = Dh / 2;
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)H * (size_t)Dh >     \
                                              32768)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const real *c = cs + (size_t)t * (size_t)half * 2;
        for (int h = 0; h < H; h++) {
            const real *x = in + ((size_t)bt * (size_t)H + (size_t)h) * (size_t)Dh;
            real *y = out + ((size_t)bt * (size_t)H + (size_t)h) * (size_t)Dh;
            for (int i = 0; i < half; i++) {
                real co = c[2 * i], si = c[2 * i + 1] * (real)dir;
                real y1 = x[i] * co + x[i + half] * si;
                real y2 = -x[i] * si + x[i + half] * co;
                if (accumulate) {
                    y[i] += y1;
                    y[i + half] += y2;
                } else {
                    y[i] = y1;
                    y[i + half] = y2;
                }
            }
        }
    }
}

static void rope_backward(sb_graph *g, void *ctx)
{
    rope_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    rope_apply(c->cs, c->y->grad, sb_tensor_grad(g, c->x), 1, c->B, c->T, c->H, c->Dh, -1);
}

sb_tensor *sb_rope(sb_graph *g, sb_tensor *x, const real *inv_freq)
{
    SB_ASSERT(x->ndim == 4 && x->shape[3] % 2 == 0);
    const int B = x->shape[0], T = x->shape[1], H = x->shape[2], Dh = x->shape[3];
    const int half = Dh / 2;
    real *cs = sb_graph_alloc(g, (size_t)T * (size_t)half * 2 * sizeof *cs);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            real angle = (real)t * inv_freq[i];
            cs[((size_t)t * (size_t)half + (size_t)i) * 2] = cos(angle);
            cs[((size_t)t * (size_t)half + (size_t)i) * 2 + 1] = sin(angle);
        }
    sb_tensor *y = sb_tensor_new(g, 4, x->shape);
    rope_apply(cs, x->data, y->data, 0, B, T, H, Dh, 1);
    y->requires_grad = x->requires_grad;
    if (y->requires_grad) {
        rope_ctx *c = sb_graph_record(g, rope_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y, c->cs = cs, c->B = B, c->T = T, c->H = H, c->Dh = Dh;
    }
    return y;
}

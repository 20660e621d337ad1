/* gated_mlp.c - fla's GatedMLP (fla/modules/mlp.py, swish activation, fused swiglu_linear),
 * see ops_layered.h and docs/models/layered.md.
 *
 *   forward:  h = [z Wg^T | z Wu^T] = [g | u]  ([N, 2I]),  p = silu(g) u,  m = p Wd^T
 *   backward: p recomputed from h;  dWd += dm^T p,  dp = dm Wd,
 *             dg = dp u silu'(g),  du = dp silu(g)   (silu'(g) = s (1 + g (1 - s)), s =
 * sigmoid(g)), dWg += dg^T z,  dWu += du^T z,  dz += dg Wg + du Wu The products are sb_gemm calls
 * (deterministic blocking); the elementwise loops are split over rows.
 */
#include <omp.h>
#include <tgmath.h>

#include "ops/ops_layered.h"

#include "tensor/fastmath.h"

#define PAR_MIN 32768 /* below this many elements, one thread */

typedef struct gmlp_ctx {
    sb_tensor *z, *wg, *wu, *wd, *y;
    real *h; /* [N, 2I]: gate | up */
    int N, D, Hd;
} gmlp_ctx;

#ifdef SB_REAL_DOUBLE
static inline real sigm(real x)
{
    return 1 / (1 + exp(-x));
}
#else
static inline real sigm(real x)
{
    return sb_fsigmoid(x);
}
#endif

/* p[N, Hd] = silu(g) u from h = [g | u] */
static void swiglu_rows(const real *h, int N, int Hd, real *p)
{
    const size_t n = (size_t)N * (size_t)Hd;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int r = 0; r < N; r++) {
        const real *g = h + (size_t)r * 2 * (size_t)Hd, *u = g + Hd;
        real *pr = p + (size_t)r * (size_t)Hd;
        for (int i = 0; i < Hd; i++)
            pr[i] = g[i] * sigm(g[i]) * u[i];
    }
}

static void gmlp_backward(sb_graph *g, void *ctx)
{
    gmlp_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int N = c->N, D = c->D, Hd = c->Hd;
    const real *h = c->h, *dy = c->y->grad, *z = c->z->data;
    real *buf = sb_graph_alloc(g, (size_t)N * (size_t)Hd * sizeof *buf);
    if (c->wd->requires_grad) {
        swiglu_rows(h, N, Hd, buf);
        sb_gemm(1, 0, D, Hd, N, 1, dy, D, buf, Hd, 1, sb_tensor_grad(g, c->wd), Hd);
    }
    /* dp = dm Wd, then dh = [dg | du] */
    sb_gemm(0, 0, N, Hd, D, 1, dy, D, c->wd->data, Hd, 0, buf, Hd);
    real *dh = sb_graph_alloc(g, (size_t)N * 2 * (size_t)Hd * sizeof *dh);
    const size_t n = (size_t)N * (size_t)Hd;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int r = 0; r < N; r++) {
        const real *gr = h + (size_t)r * 2 * (size_t)Hd, *ur = gr + Hd;
        const real *dp = buf + (size_t)r * (size_t)Hd;
        real *dg = dh + (size_t)r * 2 * (size_t)Hd, *du = dg + Hd;
        for (int i = 0; i < Hd; i++) {
            const real s = sigm(gr[i]);
            du[i] = dp[i] * gr[i] * s;
            dg[i] = dp[i] * ur[i] * s * (1 + gr[i] * (1 - s));
        }
    }
    const size_t ld2 = 2 * (size_t)Hd;
    if (c->wg->requires_grad)
        sb_gemm(1, 0, Hd, D, N, 1, dh, (int)ld2, z, D, 1, sb_tensor_grad(g, c->wg), D);
    if (c->wu->requires_grad)
        sb_gemm(1, 0, Hd, D, N, 1, dh + Hd, (int)ld2, z, D, 1, sb_tensor_grad(g, c->wu), D);
    if (c->z->requires_grad) {
        real *dz = sb_tensor_grad(g, c->z);
        sb_gemm(0, 0, N, D, Hd, 1, dh, (int)ld2, c->wg->data, D, 1, dz, D);
        sb_gemm(0, 0, N, D, Hd, 1, dh + Hd, (int)ld2, c->wu->data, D, 1, dz, D);
    }
}

sb_tensor *sb_gated_mlp(sb_graph *g, sb_tensor *z, sb_tensor *w_gate, sb_tensor *w_up,
                        sb_tensor *w_down)
{
    const int D = z->shape[z->ndim - 1], Hd = w_gate->shape[0];
    SB_ASSERT(w_gate->ndim == 2 && w_gate->shape[1] == D);
    SB_ASSERT(w_up->ndim == 2 && w_up->shape[0] == Hd && w_up->shape[1] == D);
    SB_ASSERT(w_down->ndim == 2 && w_down->shape[0] == D && w_down->shape[1] == Hd);
    const int N = (int)(z->size / (size_t)D);
    sb_tensor *y = sb_tensor_new(g, z->ndim, z->shape);
    y->requires_grad =
        z->requires_grad || w_gate->requires_grad || w_up->requires_grad || w_down->requires_grad;
    const int keep = y->requires_grad && g->record; /* the backward needs h */
    sb_arena_mark mark = sb_arena_get_mark(&g->arena);
    real *h = sb_graph_alloc(g, (size_t)N * 2 * (size_t)Hd * sizeof *h);
    sb_gemm(0, 1, N, Hd, D, 1, z->data, D, w_gate->data, D, 0, h, 2 * Hd);
    sb_gemm(0, 1, N, Hd, D, 1, z->data, D, w_up->data, D, 0, h + Hd, 2 * Hd);
    if (keep)
        mark = sb_arena_get_mark(&g->arena);
    real *p = sb_graph_alloc(g, (size_t)N * (size_t)Hd * sizeof *p);
    swiglu_rows(h, N, Hd, p);
    sb_gemm(0, 1, N, D, Hd, 1, p, Hd, w_down->data, Hd, 0, y->data, D);
    /* p (and h when no backward follows) are not needed any more */
    sb_arena_reset_to(&g->arena, mark);
    if (y->requires_grad) {
        gmlp_ctx *c = sb_graph_record(g, gmlp_backward, sizeof *c);
        if (c != NULL) {
            c->z = z, c->wg = w_gate, c->wu = w_up, c->wd = w_down, c->y = y;
            c->h = h, c->N = N, c->D = D, c->Hd = Hd;
        }
    }
    return y;
}

/* rwkv_blocks.c - the small blocks of RWKV-7 (ops_dplr.h): token shift, per-channel scaling,
 * GroupNorm and the bonus term. Forward and backward side by side; sums over rows run in a
 * fixed order (no threads), so results do not depend on the thread count.
 *
 *   token shift: d_t = x_{t-1} - x_t;               dx_t += dd_{t+1} - dd_t
 *   rowmul:      y = x w;                           dx += dy w, dw += sum_rows dy x
 *   GroupNorm:   xh = (x - mean) / sqrt(var + eps), y = xh w + b;
 *                dxh = dy w, dx = (dxh - mean(dxh) - xh mean(dxh xh)) / sqrt(var + eps)
 *   bonus:       c_h = sum_c r k u, y_h = c_h v_h;  dv_h += c_h dy_h, dc_h = dy_h . v_h,
 *                dr += dc k u, dk += dc r u, du += sum_rows dc r k
 */
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/ops_dplr.h"

/* ---- token shift ------------------------------------------------------------------------- */

typedef struct shift_ctx {
    sb_tensor *x, *y;
} shift_ctx;

static void shift_backward(sb_graph *g, void *ctx)
{
    shift_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    const int B = c->x->shape[0], T = c->x->shape[1], D = c->x->shape[2];
    real *dx = sb_tensor_grad(g, c->x);
    const real *dy = c->y->grad;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t row = ((size_t)b * (size_t)T + (size_t)t) * (size_t)D;
            for (int i = 0; i < D; i++) {
                real v = -dy[row + (size_t)i];
                if (t + 1 < T)
                    v += dy[row + (size_t)D + (size_t)i];
                dx[row + (size_t)i] += v;
            }
        }
}

sb_tensor *sb_token_shift(sb_graph *g, sb_tensor *x, real *history)
{
    SB_ASSERT(x->ndim == 3);
    SB_ASSERT(history == NULL || !g->record);
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t row = ((size_t)b * (size_t)T + (size_t)t) * (size_t)D;
            const real *prev = t > 0 ? x->data + row - D
                                     : (history != NULL ? history + (size_t)b * (size_t)D : NULL);
            for (int i = 0; i < D; i++)
                y->data[row + (size_t)i] = (prev != NULL ? prev[i] : 0) - x->data[row + (size_t)i];
        }
    if (history != NULL && T > 0)
        for (int b = 0; b < B; b++)
            memcpy(history + (size_t)b * (size_t)D,
                   x->data + ((size_t)b * (size_t)T + (size_t)(T - 1)) * (size_t)D,
                   (size_t)D * sizeof *history);
    y->requires_grad = history == NULL && x->requires_grad;
    if (y->requires_grad) {
        shift_ctx *c = sb_graph_record(g, shift_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y;
    }
    return y;
}

/* ---- per-channel scaling ------------------------------------------------------------------ */

typedef struct rowmul_ctx {
    sb_tensor *x, *w, *y;
} rowmul_ctx;

static void rowmul_backward(sb_graph *g, void *ctx)
{
    rowmul_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const size_t D = c->w->size, rows = c->x->size / D;
    const real *dy = c->y->grad, *x = c->x->data, *w = c->w->data;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    for (size_t n = 0; n < rows; n++)
        for (size_t i = 0; i < D; i++) {
            const size_t j = n * D + i;
            if (dx != NULL)
                dx[j] += dy[j] * w[i];
            if (dw != NULL)
                dw[i] += dy[j] * x[j];
        }
}

sb_tensor *sb_dplr_rowmul(sb_graph *g, sb_tensor *x, sb_tensor *w)
{
    const size_t D = w->size;
    SB_ASSERT(D > 0 && x->size % D == 0 && (size_t)x->shape[x->ndim - 1] == D);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    for (size_t j = 0; j < x->size; j++)
        y->data[j] = x->data[j] * w->data[j % D];
    y->requires_grad = x->requires_grad || w->requires_grad;
    if (y->requires_grad) {
        rowmul_ctx *c = sb_graph_record(g, rowmul_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->w = w, c->y = y;
    }
    return y;
}

/* ---- GroupNorm ------------------------------------------------------------------------------ */

typedef struct gn_ctx {
    sb_tensor *x, *w, *b, *y;
    real *xhat, *rstd; /* [rows][D], [rows][G] */
    int G;
} gn_ctx;

static void gn_backward(sb_graph *g, void *ctx)
{
    gn_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int D = (int)c->w->size, G = c->G, n = D / G;
    const size_t rows = c->x->size / (size_t)D;
    const real *dy = c->y->grad, *w = c->w->data;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    real *db = c->b->requires_grad ? sb_tensor_grad(g, c->b) : NULL;
    for (size_t r = 0; r < rows; r++)
        for (int grp = 0; grp < G; grp++) {
            const size_t o = r * (size_t)D + (size_t)grp * (size_t)n;
            const real *xh = c->xhat + o, *dyr = dy + o, *wg = w + (size_t)grp * (size_t)n;
            real mean_d = 0, mean_dx = 0;
            for (int i = 0; i < n; i++) {
                const real d = dyr[i] * wg[i];
                mean_d += d, mean_dx += d * xh[i];
                if (dw != NULL)
                    dw[(size_t)grp * (size_t)n + (size_t)i] += dyr[i] * xh[i];
                if (db != NULL)
                    db[(size_t)grp * (size_t)n + (size_t)i] += dyr[i];
            }
            mean_d /= (real)n, mean_dx /= (real)n;
            if (dx != NULL) {
                const real rs = c->rstd[r * (size_t)G + (size_t)grp];
                for (int i = 0; i < n; i++)
                    dx[o + (size_t)i] += rs * (dyr[i] * wg[i] - mean_d - xh[i] * mean_dx);
            }
        }
}

sb_tensor *sb_group_norm(sb_graph *g, sb_tensor *x, int G, sb_tensor *weight, sb_tensor *bias,
                         real eps)
{
    const int D = (int)weight->size;
    SB_ASSERT(G > 0 && D % G == 0 && (int)bias->size == D && x->shape[x->ndim - 1] == D);
    const int n = D / G;
    const size_t rows = x->size / (size_t)D;
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    y->requires_grad = x->requires_grad || weight->requires_grad || bias->requires_grad;
    gn_ctx *c = y->requires_grad ? sb_graph_record(g, gn_backward, sizeof *c) : NULL;
    real *xhat = c != NULL ? sb_graph_alloc(g, x->size * sizeof(real)) : NULL;
    real *rstd = c != NULL ? sb_graph_alloc(g, rows * (size_t)G * sizeof(real)) : NULL;
    for (size_t r = 0; r < rows; r++)
        for (int grp = 0; grp < G; grp++) {
            const size_t o = r * (size_t)D + (size_t)grp * (size_t)n;
            const real *xr = x->data + o;
            real mean = 0, var = 0;
            for (int i = 0; i < n; i++)
                mean += xr[i];
            mean /= (real)n;
            for (int i = 0; i < n; i++)
                var += (xr[i] - mean) * (xr[i] - mean);
            var /= (real)n;
            const real rs = 1 / sqrt(var + eps);
            for (int i = 0; i < n; i++) {
                const real xh = (xr[i] - mean) * rs;
                const size_t ch = (size_t)grp * (size_t)n + (size_t)i;
                y->data[o + (size_t)i] = xh * weight->data[ch] + bias->data[ch];
                if (xhat != NULL)
                    xhat[o + (size_t)i] = xh;
            }
            if (rstd != NULL)
                rstd[r * (size_t)G + (size_t)grp] = rs;
        }
    if (c != NULL)
        c->x = x, c->w = weight, c->b = bias, c->y = y, c->xhat = xhat, c->rstd = rstd, c->G = G;
    return y;
}

/* ---- bonus term ------------------------------------------------------------------------------ */

typedef struct bonus_ctx {
    sb_tensor *r, *k, *u, *v, *y;
    int H;
} bonus_ctx;

static void bonus_backward(sb_graph *g, void *ctx)
{
    bonus_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int H = c->H, KA = (int)c->u->size, K = KA / H;
    const int VA = c->v->shape[c->v->ndim - 1], V = VA / H;
    const size_t rows = c->r->size / (size_t)KA;
    const real *r = c->r->data, *k = c->k->data, *u = c->u->data, *v = c->v->data;
    const real *dy = c->y->grad;
    real *dr = c->r->requires_grad ? sb_tensor_grad(g, c->r) : NULL;
    real *dk = c->k->requires_grad ? sb_tensor_grad(g, c->k) : NULL;
    real *du = c->u->requires_grad ? sb_tensor_grad(g, c->u) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    for (size_t n = 0; n < rows; n++)
        for (int h = 0; h < H; h++) {
            const size_t ko = n * (size_t)KA + (size_t)h * (size_t)K;
            const size_t vo = n * (size_t)VA + (size_t)h * (size_t)V;
            real coef = 0;
            for (int i = 0; i < K; i++)
                coef +=
                    r[ko + (size_t)i] * k[ko + (size_t)i] * u[(size_t)h * (size_t)K + (size_t)i];
            const real dc = fla_dot(V, dy + vo, v + vo);
            if (dv != NULL)
                fla_axpy(V, coef, dy + vo, dv + vo);
            for (int i = 0; i < K; i++) {
                const size_t j = ko + (size_t)i, uj = (size_t)h * (size_t)K + (size_t)i;
                if (dr != NULL)
                    dr[j] += dc * k[j] * u[uj];
                if (dk != NULL)
                    dk[j] += dc * r[j] * u[uj];
                if (du != NULL)
                    du[uj] += dc * r[j] * k[j];
            }
        }
}

sb_tensor *sb_rwkv7_bonus(sb_graph *g, sb_tensor *r, sb_tensor *k, sb_tensor *u, sb_tensor *v,
                          int H)
{
    const int KA = (int)u->size, VA = v->shape[v->ndim - 1];
    SB_ASSERT(H > 0 && KA % H == 0 && VA % H == 0 && r->size == k->size);
    SB_ASSERT(r->shape[r->ndim - 1] == KA && r->size / (size_t)KA == v->size / (size_t)VA);
    const int K = KA / H, V = VA / H;
    const size_t rows = r->size / (size_t)KA;
    sb_tensor *y = sb_tensor_new(g, v->ndim, v->shape);
    for (size_t n = 0; n < rows; n++)
        for (int h = 0; h < H; h++) {
            const size_t ko = n * (size_t)KA + (size_t)h * (size_t)K;
            const size_t vo = n * (size_t)VA + (size_t)h * (size_t)V;
            real coef = 0;
            for (int i = 0; i < K; i++)
                coef += r->data[ko + (size_t)i] * k->data[ko + (size_t)i] *
                        u->data[(size_t)h * (size_t)K + (size_t)i];
            for (int i = 0; i < V; i++)
                y->data[vo + (size_t)i] = coef * v->data[vo + (size_t)i];
        }
    y->requires_grad = r->requires_grad || k->requires_grad || u->requires_grad || v->requires_grad;
    if (y->requires_grad) {
        bonus_ctx *c = sb_graph_record(g, bonus_backward, sizeof *c);
        if (c != NULL)
            c->r = r, c->k = k, c->u = u, c->v = v, c->y = y, c->H = H;
    }
    return y;
}

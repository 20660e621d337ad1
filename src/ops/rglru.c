/* rglru.c - Hawk's ops (see ops_hawk.h; derivations in docs/models/hawk.md): the RG-LRU scan,
 * the block-diagonal gate projection and the GeLU-gated product.
 *
 * RG-LRU, per channel, with k = c softplus(-lambda), l_t = -k r_t, a_t = exp(l_t),
 * m_t = sqrt(1 - a_t^2) = sqrt(-expm1(2 l_t)), u_t = i_t x_t, h_t = a_t h_{t-1} + m_t u_t;
 * at a reset (a sequence's first frame, Griffin's reference code) h_0 = u_0: a_0 = 0, m_0 = 1.
 * Backward, frames in reverse with G_t = dL/dh_t (its own output gradient plus a_{t+1} G_{t+1}):
 *   dx_t  = G_t m_t i_t
 *   dgx_t = G_t m_t x_t i_t (1 - i_t)
 *   dl_t  = G_t (a_t h_{t-1} - (a_t^2 / m_t) u_t)          (dm/dl = -a^2 / m)
 *   dga_t = dl_t (-k) r_t (1 - r_t)
 *   dlambda = sum_t dl_t (-r_t) * dk/dlambda,  dk/dlambda = -c sigmoid(-lambda)
 * and at a reset frame dx_0 = G_0 i_0, dgx_0 = G_0 x_0 i_0 (1 - i_0), dl_0 = 0 (a_0 and m_0
 * are constants there: no gradient to ga_0 or lambda from frame 0).
 * h_{t-1} is the output's previous frame, so the backward stores nothing of its own; r, i,
 * a and m are recomputed. Where m_t is exactly 0 (r_t or k rounded to 0: a_t = 1) the
 * square root's term is dropped, its limit along the chain (through r_t (1 - r_t) or k).
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops.h"
#include "ops/ops_hawk.h"

#define PAR_MIN 32768 /* below this many elements, one thread */
#define CH_BLOCK 64   /* channels one thread scans together (contiguous in a frame) */

static inline real sigmoid(real x)
{
    return 1 / (1 + exp(-x));
}

/* PyTorch softplus (beta 1, threshold 20) and its derivative */
static inline real softplus(real x)
{
    return x > 20 ? x : log1p(exp(x));
}

static inline real softplus_slope(real x)
{
    return x > 20 ? 1 : sigmoid(x);
}

/* ---- RG-LRU scan ------------------------------------------------------------------------- */

typedef struct rglru_ctx {
    sb_tensor *x, *ga, *gx, *lambda, *y;
    real c_exp;
    int B, T, C;
    int reset; /* frame 0 is a sequence's first frame */
} rglru_ctx;

/* k[c] = c_exp softplus(-lambda[c]) */
static void rglru_rates(const real *lambda, int C, real c_exp, real *k)
{
    for (int c = 0; c < C; c++)
        k[c] = c_exp * softplus(-lambda[c]);
}

/* one sample's channels [c0, c1) over all frames, from h0 (NULL: zeros); h0 gets h_{T-1}.
 * reset: frame 0 is the sequence's first, h_0 = i_0 x_0 (h0's values are not read). */
static void rglru_scan_block(const real *x, const real *ga, const real *gx, const real *k, int T,
                             int C, int c0, int c1, int reset, real *y, real *h0)
{
    real h[CH_BLOCK];
    const int n = c1 - c0;
    for (int j = 0; j < n; j++)
        h[j] = h0 != NULL && !reset ? h0[c0 + j] : 0;
    for (int t = 0; t < T; t++) {
        const size_t o = (size_t)t * (size_t)C + (size_t)c0;
        if (t == 0 && reset) {
            for (int j = 0; j < n; j++) {
                h[j] = sigmoid(gx[o + j]) * x[o + j];
                y[o + j] = h[j];
            }
            continue;
        }
        for (int j = 0; j < n; j++) {
            const real r = sigmoid(ga[o + j]), i = sigmoid(gx[o + j]);
            const real l = -k[c0 + j] * r;
            const real a = exp(l), m = sqrt(-expm1(2 * l));
            h[j] = a * h[j] + m * (i * x[o + j]);
            y[o + j] = h[j];
        }
    }
    if (h0 != NULL)
        for (int j = 0; j < n; j++)
            h0[c0 + j] = h[j];
}

static void rglru_backward(sb_graph *g, void *ctx)
{
    rglru_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, C = c->C;
    const int nblk = (C + CH_BLOCK - 1) / CH_BLOCK;
    const real *dy = c->y->grad, *y = c->y->data;
    const real *x = c->x->data, *ga = c->ga->data, *gx = c->gx->data;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dga = c->ga->requires_grad ? sb_tensor_grad(g, c->ga) : NULL;
    real *dgx = c->gx->requires_grad ? sb_tensor_grad(g, c->gx) : NULL;
    real *k = sb_graph_alloc(g, (size_t)C * sizeof *k);
    rglru_rates(c->lambda->data, C, c->c_exp, k);
    /* d loss / d k per sample, summed over the samples in order below */
    real *dk = sb_graph_alloc(g, (size_t)B * (size_t)C * sizeof *dk);
    const size_t work = (size_t)B * (size_t)T * (size_t)C;
#pragma omp parallel for schedule(static) if (work > PAR_MIN / 4)
    for (int job = 0; job < B * nblk; job++) {
        const int b = job / nblk, c0 = (job % nblk) * CH_BLOCK;
        const int c1 = c0 + CH_BLOCK < C ? c0 + CH_BLOCK : C, n = c1 - c0;
        const size_t base = (size_t)b * (size_t)T * (size_t)C;
        real carry[CH_BLOCK], dks[CH_BLOCK];
        for (int j = 0; j < n; j++)
            carry[j] = 0, dks[j] = 0;
        for (int t = T - 1; t >= 0; t--) {
            const size_t o = base + (size_t)t * (size_t)C + (size_t)c0;
            if (t == 0 && c->reset) {
                /* h_0 = i_0 x_0: the gates' r_0 and lambda do not enter */
                for (int j = 0; j < n; j++) {
                    const real i = sigmoid(gx[o + j]);
                    const real G = dy[o + j] + carry[j];
                    if (dx != NULL)
                        dx[o + j] += G * i;
                    if (dgx != NULL)
                        dgx[o + j] += G * x[o + j] * i * (1 - i);
                }
                continue;
            }
            for (int j = 0; j < n; j++) {
                const real kc = k[c0 + j];
                const real r = sigmoid(ga[o + j]), i = sigmoid(gx[o + j]);
                const real l = -kc * r;
                const real a = exp(l), m = sqrt(-expm1(2 * l));
                const real hprev = t > 0 ? y[o + j - (size_t)C] : 0;
                const real G = dy[o + j] + carry[j];
                const real u = i * x[o + j];
                real dl = G * a * hprev;
                if (m > 0)
                    dl -= G * (a * a / m) * u;
                if (dx != NULL)
                    dx[o + j] += G * m * i;
                if (dgx != NULL)
                    dgx[o + j] += G * m * x[o + j] * i * (1 - i);
                if (dga != NULL)
                    dga[o + j] += dl * (-kc) * r * (1 - r);
                dks[j] += dl * (-r);
                carry[j] = G * a;
            }
        }
        for (int j = 0; j < n; j++)
            dk[(size_t)b * (size_t)C + (size_t)(c0 + j)] = dks[j];
    }
    if (c->lambda->requires_grad) {
        real *dlam = sb_tensor_grad(g, c->lambda);
        const real *lam = c->lambda->data;
        for (int ch = 0; ch < C; ch++) {
            real s = 0;
            for (int b = 0; b < B; b++)
                s += dk[(size_t)b * (size_t)C + (size_t)ch];
            dlam[ch] += s * (-c->c_exp * softplus_slope(-lam[ch]));
        }
    }
}

sb_tensor *sb_rglru(sb_graph *g, sb_tensor *x, sb_tensor *ga, sb_tensor *gx, sb_tensor *lambda,
                    real c_exp, real *state, int reset)
{
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    SB_ASSERT(ga->size == x->size && gx->size == x->size && (int)lambda->size == C);
    SB_ASSERT(state == NULL || !g->record);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    real *k = sb_graph_alloc(g, (size_t)C * sizeof *k);
    rglru_rates(lambda->data, C, c_exp, k);
    const int nblk = (C + CH_BLOCK - 1) / CH_BLOCK;
    const size_t work = (size_t)B * (size_t)T * (size_t)C;
#pragma omp parallel for schedule(static) if (work > PAR_MIN / 4)
    for (int job = 0; job < B * nblk; job++) {
        const int b = job / nblk, c0 = (job % nblk) * CH_BLOCK;
        const int c1 = c0 + CH_BLOCK < C ? c0 + CH_BLOCK : C;
        const size_t base = (size_t)b * (size_t)T * (size_t)C;
        rglru_scan_block(x->data + base, ga->data + base, gx->data + base, k, T, C, c0, c1, reset,
                         y->data + base, state != NULL ? state + (size_t)b * (size_t)C : NULL);
    }
    y->requires_grad =
        x->requires_grad || ga->requires_grad || gx->requires_grad || lambda->requires_grad;
    if (y->requires_grad) {
        rglru_ctx *c = sb_graph_record(g, rglru_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->ga = ga, c->gx = gx, c->lambda = lambda, c->y = y;
            c->c_exp = c_exp, c->B = B, c->T = T, c->C = C, c->reset = reset;
        }
    }
    return y;
}

/* ---- block-diagonal projection ---------------------------------------------------------------
 * One product per block over all rows: Y_h = X_h W_h (+ b_h), strided views of the row-major
 * [N, H W] matrices. Backward: dX_h += dY_h W_h^T, dW_h += X_h^T dY_h, db += column sums. */

typedef struct bdl_ctx {
    sb_tensor *x, *w, *b, *y;
    int N, H, W;
} bdl_ctx;

static void bdl_backward(sb_graph *g, void *ctx)
{
    bdl_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int N = c->N, H = c->H, W = c->W, HW = H * W;
    const real *dy = c->y->grad;
    const size_t blk = (size_t)W * (size_t)W;
    if (c->x->requires_grad) {
        real *dx = sb_tensor_grad(g, c->x);
        for (int h = 0; h < H; h++)
            sb_gemm(0, 1, N, W, W, 1, dy + (size_t)h * W, HW, c->w->data + (size_t)h * blk, W, 1,
                    dx + (size_t)h * W, HW);
    }
    if (c->w->requires_grad) {
        real *dw = sb_tensor_grad(g, c->w);
        for (int h = 0; h < H; h++)
            sb_gemm(1, 0, W, W, N, 1, c->x->data + (size_t)h * W, HW, dy + (size_t)h * W, HW, 1,
                    dw + (size_t)h * blk, W);
    }
    if (c->b != NULL && c->b->requires_grad)
        sb_colsum_add(dy, N, HW, sb_tensor_grad(g, c->b));
}

sb_tensor *sb_block_diag_linear(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b)
{
    SB_ASSERT(w->ndim == 3 && w->shape[1] == w->shape[2]);
    const int H = w->shape[0], W = w->shape[1], HW = H * W;
    SB_ASSERT(x->shape[x->ndim - 1] == HW);
    SB_ASSERT(b == NULL || (int)b->size == HW);
    const int N = (int)(x->size / (size_t)HW);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    for (int n = 0; n < N; n++) {
        real *yr = y->data + (size_t)n * (size_t)HW;
        if (b != NULL)
            memcpy(yr, b->data, (size_t)HW * sizeof *yr);
        else
            memset(yr, 0, (size_t)HW * sizeof *yr);
    }
    const size_t blk = (size_t)W * (size_t)W;
    for (int h = 0; h < H; h++)
        sb_gemm(0, 0, N, W, W, 1, x->data + (size_t)h * W, HW, w->data + (size_t)h * blk, W, 1,
                y->data + (size_t)h * W, HW);
    y->requires_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    if (y->requires_grad) {
        bdl_ctx *c = sb_graph_record(g, bdl_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->w = w, c->b = b, c->y = y, c->N = N, c->H = H, c->W = W;
    }
    return y;
}

/* ---- GeLU-gated product ------------------------------------------------------------------------
 * y = gelu(a) v with GeLU's tanh form (torch's F.gelu(approximate="tanh"), in its order of
 * operations): gelu(a) = a/2 (1 + tanh(z)), z = beta (a + kappa a^3), beta = sqrt(2/pi).
 *   da += dy v (1/2 (1 + tanh z) + a/2 (1 - tanh^2 z) beta (1 + 3 kappa a^2)),  dv += dy gelu(a)
 */

#define GELU_BETA ((real)0.79788456080286535588) /* sqrt(2 / pi) */
#define GELU_KAPPA ((real)0.044715)

typedef struct gmul_ctx {
    sb_tensor *a, *v, *y;
} gmul_ctx;

static inline real gelu_tanh(real a)
{
    const real z = GELU_BETA * (a + GELU_KAPPA * (a * a * a));
    return (real)0.5 * a * (1 + tanh(z));
}

static void gmul_backward(sb_graph *g, void *ctx)
{
    gmul_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad, *a = c->a->data, *v = c->v->data;
    real *da = c->a->requires_grad ? sb_tensor_grad(g, c->a) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    const size_t n = c->y->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t e = 0; e < n; e++) {
        const real x = a[e], x2 = x * x;
        const real th = tanh(GELU_BETA * (x + GELU_KAPPA * (x2 * x)));
        if (da != NULL) {
            const real dz = GELU_BETA * (1 + 3 * GELU_KAPPA * x2); /* dz / da */
            da[e] += dy[e] * v[e] * ((real)0.5 * (1 + th) + (real)0.5 * x * (1 - th * th) * dz);
        }
        if (dv != NULL)
            dv[e] += dy[e] * ((real)0.5 * x * (1 + th));
    }
}

sb_tensor *sb_gelu_tanh_mul(sb_graph *g, sb_tensor *a, sb_tensor *v)
{
    SB_ASSERT(a->size == v->size);
    sb_tensor *y = sb_tensor_new(g, a->ndim, a->shape);
    const size_t n = a->size;
    const real *ad = a->data, *vd = v->data;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t e = 0; e < n; e++)
        y->data[e] = gelu_tanh(ad[e]) * vd[e];
    y->requires_grad = a->requires_grad || v->requires_grad;
    if (y->requires_grad) {
        gmul_ctx *c = sb_graph_record(g, gmul_backward, sizeof *c);
        if (c != NULL)
            c->a = a, c->v = v, c->y = y;
    }
    return y;
}

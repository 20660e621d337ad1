/* ssm_norm.c - Mamba2's gated RMSNorm (RMSNormGated, norm_before_gate=False, one group
 * spanning all E channels, eps under the root). Spec: spec/models-ssm.md section 1.6.
 *
 * Forward, per token:  g = y silu(z),  r = (mean_E(g^2) + eps)^(-1/2),  o = g r w
 * Backward, with q = do w and ghat = g r:
 *   dw += sum_tokens do ghat
 *   dg  = r (q - ghat mean_E(q ghat))
 *   dy += dg silu(z),  dz += dg y silu'(z),  silu'(z) = s (1 + z (1 - s)), s = sigmoid(z)
 * Saved: the inputs y, z (already kept by the ops that made them) and r, one value per
 * token; g and ghat are recomputed. */
#include <omp.h>
#include <tgmath.h>

#include "selectivbench/ops_ssm.h"
#include "ssm_math.h"

typedef struct gnorm_ctx {
    sb_tensor *y, *z, *w, *o;
    real *rstd; /* [rows] */
    int rows, E;
} gnorm_ctx;

static void gnorm_backward(sb_graph *g, void *ctx)
{
    gnorm_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int rows = c->rows, E = c->E;
    const real *y = c->y->data, *z = c->z->data, *w = c->w->data, *dout = c->o->grad;
    real *dy = c->y->requires_grad ? sb_tensor_grad(g, c->y) : NULL;
    real *dz = c->z->requires_grad ? sb_tensor_grad(g, c->z) : NULL;
    if (dy != NULL || dz != NULL) {
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)E > 16384)
        for (int n = 0; n < rows; n++) {
            const size_t off = (size_t)n * (size_t)E;
            const real r = c->rstd[n];
            real dot = 0; /* sum_i q_i ghat_i */
            for (int i = 0; i < E; i++) {
                real s = ssm_sigmoid(z[off + i]);
                real gh = y[off + i] * z[off + i] * s * r;
                dot += dout[off + i] * w[i] * gh;
            }
            const real mean_qg = dot / (real)E;
            for (int i = 0; i < E; i++) {
                real zi = z[off + i], s = ssm_sigmoid(zi), silu = zi * s;
                real gh = y[off + i] * silu * r;
                real dg = r * (dout[off + i] * w[i] - gh * mean_qg);
                if (dy != NULL)
                    dy[off + i] += dg * silu;
                if (dz != NULL)
                    dz[off + i] += dg * y[off + i] * s * (1 + zi * (1 - s));
            }
        }
    }
    if (c->w->requires_grad) {
        real *dw = sb_tensor_grad(g, c->w);
        /* column sums over tokens; columns split between threads, tokens in order */
        int blocks = (E + 31) / 32;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)E > 16384)
        for (int blk = 0; blk < blocks; blk++) {
            int i0 = blk * 32, i1 = i0 + 32 < E ? i0 + 32 : E;
            real acc[32] = {0};
            for (int n = 0; n < rows; n++) {
                const size_t off = (size_t)n * (size_t)E;
                const real r = c->rstd[n];
                for (int i = i0; i < i1; i++) {
                    real zi = z[off + i];
                    acc[i - i0] += dout[off + i] * y[off + i] * zi * ssm_sigmoid(zi) * r;
                }
            }
            for (int i = i0; i < i1; i++)
                dw[i] += acc[i - i0];
        }
    }
}

sb_tensor *sb_rmsnorm_gated(sb_graph *g, sb_tensor *y, sb_tensor *z, sb_tensor *w, real eps)
{
    const int E = (int)w->size;
    SB_ASSERT(y->shape[y->ndim - 1] == E && y->size == z->size);
    const int rows = (int)(y->size / (size_t)E);
    sb_tensor *o = sb_tensor_new(g, y->ndim, y->shape);
    o->requires_grad = y->requires_grad || z->requires_grad || w->requires_grad;
    gnorm_ctx *c = o->requires_grad ? sb_graph_record(g, gnorm_backward, sizeof *c) : NULL;
    real *rstd = NULL;
    if (c != NULL) {
        rstd = sb_graph_alloc(g, (size_t)rows * sizeof *rstd);
        c->y = y, c->z = z, c->w = w, c->o = o, c->rstd = rstd, c->rows = rows, c->E = E;
    }
    const real *yd = y->data, *zd = z->data, *wd = w->data;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)E > 16384)
    for (int n = 0; n < rows; n++) {
        const size_t off = (size_t)n * (size_t)E;
        real *orow = o->data + off;
        real ss = 0;
        for (int i = 0; i < E; i++) {
            real zi = zd[off + i];
            real gi = yd[off + i] * zi * ssm_sigmoid(zi);
            orow[i] = gi; /* g, scaled below */
            ss += gi * gi;
        }
        const real r = 1 / sqrt(ss / (real)E + eps);
        for (int i = 0; i < E; i++)
            orow[i] = orow[i] * r * wd[i];
        if (rstd != NULL)
            rstd[n] = r;
    }
    return o;
}

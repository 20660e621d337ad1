/* ssm_norm.c - Mamba2's gated RMSNorm (RMSNormGated, norm_before_gate=False, one group
 * spanning all E channels, eps under the root). Spec: docs/models/mamba2.md.
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

#include "ops/ops.h"
#include "ops/ops_ssm.h"
#include "ops/ssm_math.h"

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
    /* dw's per-token terms do ghat, summed over tokens in order afterwards */
    real *dw_terms =
        c->w->requires_grad ? sb_graph_alloc(g, (size_t)rows * (size_t)E * sizeof(real)) : NULL;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)E > 16384)
    for (int n = 0; n < rows; n++) {
        const size_t off = (size_t)n * (size_t)E;
        const real *yr = y + off, *zr = z + off, *dr = dout + off;
        const real r = c->rstd[n];
        real part[SSM_LANES] = {0}; /* sum_i q_i ghat_i in fixed lanes (ssm_math.h) */
        for (int i0 = 0; i0 < E; i0 += SSM_LANES) {
            const int lanes = ssm_lanes_width(i0, E);
#pragma omp simd
            for (int k = 0; k < lanes; k++) {
                const int i = i0 + k;
                part[k] += dr[i] * w[i] * yr[i] * zr[i] * ssm_sigmoid(zr[i]);
            }
        }
        const real dot = ssm_lanes_sum(part);
        const real mean_qg = dot * r / (real)E;
        real *dyr = dy != NULL ? dy + off : NULL, *dzr = dz != NULL ? dz + off : NULL;
        real *dwr = dw_terms != NULL ? dw_terms + off : NULL;
#pragma omp simd
        for (int i = 0; i < E; i++) {
            const real zi = zr[i], s = ssm_sigmoid(zi), silu = zi * s;
            const real gh = yr[i] * silu * r;
            const real dg = r * (dr[i] * w[i] - gh * mean_qg);
            if (dyr != NULL)
                dyr[i] += dg * silu;
            if (dzr != NULL)
                dzr[i] += dg * yr[i] * s * (1 + zi * (1 - s));
            if (dwr != NULL)
                dwr[i] = dr[i] * gh;
        }
    }
    if (dw_terms != NULL)
        sb_colsum_add(dw_terms, rows, E, sb_tensor_grad(g, c->w));
}

sb_tensor *sb_rmsnorm_gate_first(sb_graph *g, sb_tensor *y, sb_tensor *z, sb_tensor *w, real eps)
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
    const real *wd = w->data;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)E > 16384)
    for (int n = 0; n < rows; n++) {
        const size_t off = (size_t)n * (size_t)E;
        const real *yr = y->data + off, *zr = z->data + off;
        real *orow = o->data + off;
        real part[SSM_LANES] = {0}; /* sum of squares in fixed lanes (ssm_math.h) */
        for (int i0 = 0; i0 < E; i0 += SSM_LANES) {
            const int lanes = ssm_lanes_width(i0, E);
#pragma omp simd
            for (int k = 0; k < lanes; k++) {
                const int i = i0 + k;
                const real gi = yr[i] * zr[i] * ssm_sigmoid(zr[i]);
                orow[i] = gi; /* g, scaled below */
                part[k] += gi * gi;
            }
        }
        const real ss = ssm_lanes_sum(part);
        const real r = 1 / sqrt(ss / (real)E + eps);
#pragma omp simd
        for (int i = 0; i < E; i++)
            orow[i] = orow[i] * r * wd[i];
        if (rstd != NULL)
            rstd[n] = r;
    }
    return o;
}

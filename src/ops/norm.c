/* norm.c - LayerNorm (RecNet post-norm) and the reference transformer's RMSNorm.
 * Derivations: docs/models/recnet.md (LayerNorm), docs/models/transformer.md (RMSNorm). */
#include <omp.h>
#include <tgmath.h>

#include "ops/ops.h"

/* ---- LayerNorm -------------------------------------------------------------------------
 * Forward, per row of D values:
 *   mu = mean(x), var = mean((x - mu)^2), rstd = (var + eps)^-1/2,
 *   xhat = (x - mu) rstd, y = gamma xhat + beta
 * Backward, with g = dy gamma:
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)), dgamma += sum_rows dy xhat,
 *   dbeta += sum_rows dy
 */
typedef struct layernorm_ctx {
    sb_tensor *x, *gamma, *beta, *y;
    real *mean, *rstd; /* [N] */
    int N, D;
} layernorm_ctx;

static void layernorm_backward(sb_graph *g, void *ctx)
{
    layernorm_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int N = c->N, D = c->D;
    const real *x = c->x->data, *dy = c->y->grad, *gamma = c->gamma->data;
    if (c->x->requires_grad) {
        real *dx = sb_tensor_grad(g, c->x);
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)D > 32768)
        for (int n = 0; n < N; n++) {
            const real *xr = x + (size_t)n * (size_t)D, *dyr = dy + (size_t)n * (size_t)D;
            real *dxr = dx + (size_t)n * (size_t)D;
            real mu = c->mean[n], rs = c->rstd[n];
            real sum_g = 0, sum_gx = 0;
            for (int i = 0; i < D; i++) {
                real gi = dyr[i] * gamma[i];
                sum_g += gi;
                sum_gx += gi * (xr[i] - mu) * rs;
            }
            real mean_g = sum_g / (real)D, mean_gx = sum_gx / (real)D;
            for (int i = 0; i < D; i++) {
                real xhat = (xr[i] - mu) * rs;
                dxr[i] += rs * (dyr[i] * gamma[i] - mean_g - xhat * mean_gx);
            }
        }
    }
    if (c->gamma->requires_grad || (c->beta != NULL && c->beta->requires_grad)) {
        real *dgamma = c->gamma->requires_grad ? sb_tensor_grad(g, c->gamma) : NULL;
        real *dbeta =
            (c->beta != NULL && c->beta->requires_grad) ? sb_tensor_grad(g, c->beta) : NULL;
        /* column sums over rows, columns split between threads: deterministic */
        int blocks = (D + 31) / 32;
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)D > 32768)
        for (int blk = 0; blk < blocks; blk++) {
            int i0 = blk * 32, i1 = i0 + 32 < D ? i0 + 32 : D;
            real acc_g[32] = {0}, acc_b[32] = {0};
            for (int n = 0; n < N; n++) {
                const real *xr = x + (size_t)n * (size_t)D, *dyr = dy + (size_t)n * (size_t)D;
                real mu = c->mean[n], rs = c->rstd[n];
                for (int i = i0; i < i1; i++) {
                    acc_g[i - i0] += dyr[i] * (xr[i] - mu) * rs;
                    acc_b[i - i0] += dyr[i];
                }
            }
            for (int i = i0; i < i1; i++) {
                if (dgamma != NULL)
                    dgamma[i] += acc_g[i - i0];
                if (dbeta != NULL)
                    dbeta[i] += acc_b[i - i0];
            }
        }
    }
}

sb_tensor *sb_layernorm(sb_graph *g, sb_tensor *x, sb_tensor *gamma, sb_tensor *beta, real eps)
{
    const int D = (int)gamma->size;
    SB_ASSERT(x->shape[x->ndim - 1] == D);
    SB_ASSERT(beta == NULL || (int)beta->size == D);
    const int N = (int)(x->size / (size_t)D);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    y->requires_grad =
        x->requires_grad || gamma->requires_grad || (beta != NULL && beta->requires_grad);
    layernorm_ctx *c = y->requires_grad ? sb_graph_record(g, layernorm_backward, sizeof *c) : NULL;
    real *mean = NULL, *rstd = NULL;
    if (c != NULL) {
        mean = sb_graph_alloc(g, (size_t)N * sizeof *mean);
        rstd = sb_graph_alloc(g, (size_t)N * sizeof *rstd);
        c->x = x, c->gamma = gamma, c->beta = beta, c->y = y;
        c->mean = mean, c->rstd = rstd, c->N = N, c->D = D;
    }
    const real *gm = gamma->data, *bt = beta != NULL ? beta->data : NULL;
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)D > 32768)
    for (int n = 0; n < N; n++) {
        const real *xr = x->data + (size_t)n * (size_t)D;
        real *yr = y->data + (size_t)n * (size_t)D;
        real sum = 0;
        for (int i = 0; i < D; i++)
            sum += xr[i];
        real mu = sum / (real)D;
        real var = 0;
        for (int i = 0; i < D; i++)
            var += (xr[i] - mu) * (xr[i] - mu);
        var /= (real)D;
        real rs = 1 / sqrt(var + eps);
        for (int i = 0; i < D; i++)
            yr[i] = (xr[i] - mu) * rs * gm[i] + (bt != NULL ? bt[i] : 0);
        if (mean != NULL) {
            mean[n] = mu;
            rstd[n] = rs;
        }
    }
    return y;
}

/* ---- RMSNorm of the reference transformer ----------------------------------------------
 * Forward, per group of d values: r = ||x|| / sqrt(d), xhat = x / (r + eps), y = xhat w.
 * Backward, g = dy w: dx = g / (r + eps) - x (sum_j g_j x_j) / (d r (r + eps)^2)
 * (at r = 0 the second term is 0/0; PyTorch's norm backward gives 0 there, so dx = g / eps),
 * dw += sum_groups dy xhat.
 */
typedef struct rmsnorm_ctx {
    sb_tensor *x, *w, *y;
    real *rms; /* [rows] */
    int rows, d;
    real eps;
} rmsnorm_ctx;

static void rmsnorm_backward(sb_graph *g, void *ctx)
{
    rmsnorm_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int rows = c->rows, d = c->d;
    const real *x = c->x->data, *dy = c->y->grad, *w = c->w->data;
    const real eps = c->eps;
    if (c->x->requires_grad) {
        real *dx = sb_tensor_grad(g, c->x);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)d > 32768)
        for (int n = 0; n < rows; n++) {
            const real *xr = x + (size_t)n * (size_t)d, *dyr = dy + (size_t)n * (size_t)d;
            real *dxr = dx + (size_t)n * (size_t)d;
            real r = c->rms[n], den = r + eps;
            real sum_gx = 0;
            for (int i = 0; i < d; i++)
                sum_gx += dyr[i] * w[i] * xr[i];
            real k = r > 0 ? sum_gx / ((real)d * r * den * den) : 0;
            for (int i = 0; i < d; i++)
                dxr[i] += dyr[i] * w[i] / den - xr[i] * k;
        }
    }
    if (c->w->requires_grad) {
        real *dw = sb_tensor_grad(g, c->w);
        int blocks = (d + 31) / 32;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)d > 32768)
        for (int blk = 0; blk < blocks; blk++) {
            int i0 = blk * 32, i1 = i0 + 32 < d ? i0 + 32 : d;
            real acc[32] = {0};
            for (int n = 0; n < rows; n++) {
                const real *xr = x + (size_t)n * (size_t)d, *dyr = dy + (size_t)n * (size_t)d;
                real den = c->rms[n] + eps;
                for (int i = i0; i < i1; i++)
                    acc[i - i0] += dyr[i] * xr[i] / den;
            }
            for (int i = i0; i < i1; i++)
                dw[i] += acc[i - i0];
        }
    }
}

sb_tensor *sb_rmsnorm_rms_eps(sb_graph *g, sb_tensor *x, sb_tensor *w, real eps)
{
    const int d = (int)w->size;
    SB_ASSERT(x->size % (size_t)d == 0);
    const int rows = (int)(x->size / (size_t)d);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    y->requires_grad = x->requires_grad || w->requires_grad;
    rmsnorm_ctx *c = y->requires_grad ? sb_graph_record(g, rmsnorm_backward, sizeof *c) : NULL;
    real *rms = NULL;
    if (c != NULL) {
        rms = sb_graph_alloc(g, (size_t)rows * sizeof *rms);
        c->x = x, c->w = w, c->y = y, c->rms = rms, c->rows = rows, c->d = d, c->eps = eps;
    }
    const real *wd = w->data;
    const real inv_sqrt_d = 1 / sqrt((real)d);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)d > 32768)
    for (int n = 0; n < rows; n++) {
        const real *xr = x->data + (size_t)n * (size_t)d;
        real *yr = y->data + (size_t)n * (size_t)d;
        real ss = 0;
        for (int i = 0; i < d; i++)
            ss += xr[i] * xr[i];
        real r = sqrt(ss) * inv_sqrt_d;
        real inv = 1 / (r + eps);
        for (int i = 0; i < d; i++)
            yr[i] = xr[i] * inv * wd[i];
        if (rms != NULL)
            rms[n] = r;
    }
    return y;
}

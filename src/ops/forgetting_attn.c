/* forgetting_attn.c - kernel K4, forgetting attention (FoX; docs/models/layered.md), see
 * ops_layered.h.
 *
 * Per batch b and head h, with Q, K, V the [T, Dh] slices (row stride H Dh), F the cumulative
 * sum of the log forget gates and s = Dh^-1/2, blocked over queries as attention.c:
 *   forward, per block of QB queries [t0, t1):
 *     Z = s Q[t0:t1] K[0:t1]^T + (F_i - F_j) (causal: j <= i), P = softmax_rows(Z),
 *     lse_i = log sum_j exp(Z_ij), O[t0:t1] = P V[0:t1]
 *   backward, Delta_i = <dO_i, O_i>, per block (P recomputed from lse):
 *     dV += P^T dO, dP = dO V^T, dZ = P (dP - Delta), dQ += s dZ K, dK += s dZ^T Q,
 *     dF_i += rowsum(dZ)_i - colsum(dZ)_i,  then df_t = sum_{i >= t} dF_i.
 * (The row sums vanish for a softmax; they are kept so that the backward is the exact
 * derivative of what the forward computes.) F is summed in double. Inside a block the
 * biases are taken relative to F at the block's first query, F_i - F_j = Fr_i - Fr_j with
 * Fr_j = F_j - F_t0 rounded to `real`: keys whose Fr is large are also those whose weight
 * exp(F_i - F_j) vanishes, so the rounding of a large |F| never reaches a visible weight.
 * Forward and backward use the same blocks, so the recomputed probabilities are exact.
 * The block products are those of attention.c (causal_blocks.c).
 * Work is split over (b, h) pairs, each summed in a fixed order: results do not depend on
 * the thread count.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <tgmath.h>

#include "ops/ops_layered.h"

#include "ops/causal_blocks.h"
#include "tensor/fastmath.h"

#define QB 128 /* queries per block */

typedef struct fattn_ctx {
    sb_tensor *q, *k, *v, *f, *o;
    real *lse; /* [B][H][T] */
    int B, T, H, Dh;
} fattn_ctx;

/* F[t] = f[0] + ... + f[t] for one (b, h); f has stride H. */
static void cum_gates(const real *f, int T, int H, double *F)
{
    double acc = 0;
    for (int t = 0; t < T; t++) {
        acc += (double)f[(size_t)t * (size_t)H];
        F[t] = acc;
    }
}

/* S[rows, t1] <- the probabilities of queries [t0, t0 + rows) over keys [0, t1): with
 * lse == NULL a softmax of each row (writing lse_out), else exp(Z - lse); 0 where masked.
 * KT: K transposed, [Dh, T]. Fr: scratch [t1]. */
static void fattn_block_probs(const real *Q, const real *KT, int ld, int Dh, int T, const double *F,
                              int t0, int rows, real scale, real *S, real *Fr, const real *lse,
                              real *lse_out)
{
    const int t1 = t0 + rows;
    for (int j = 0; j < t1; j++)
        Fr[j] = (real)(F[j] - F[t0]);
    sb_causal_scores(Q, ld, Dh, t0, rows, scale, KT, T, S);
    for (int i = 0; i < rows; i++) {
        real *s = S + (size_t)i * (size_t)t1;
        const int last = t0 + i; /* keys 0..last are visible */
        const real fi = Fr[last];
        for (int j = 0; j <= last; j++)
            s[j] += fi - Fr[j];
        if (lse != NULL) {
            (void)sb_vexp_shift(s, last + 1, lse[last]);
        } else {
            real m = sb_vmax(s, last + 1);
            real sum = sb_vexp_shift(s, last + 1, m);
            real inv = 1 / sum;
            for (int j = 0; j <= last; j++)
                s[j] *= inv;
            if (lse_out != NULL)
                lse_out[last] = m + log(sum);
        }
        for (int j = last + 1; j < t1; j++)
            s[j] = 0;
    }
}

static void fattn_backward(sb_graph *g, void *ctx)
{
    fattn_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, Dh = c->Dh, ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    real *dq = c->q->requires_grad ? sb_tensor_grad(g, c->q) : NULL;
    real *dk = c->k->requires_grad ? sb_tensor_grad(g, c->k) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    real *df = c->f->requires_grad ? sb_tensor_grad(g, c->f) : NULL;
    const int threads = omp_get_max_threads();
    /* per thread: P and dP blocks, Delta, Fr and column-sum rows, K and V transposed (reals);
     * F and dF (doubles) */
    const size_t scratch =
        (size_t)2 * QB * (size_t)T + 3 * (size_t)T + (size_t)2 * (size_t)Dh * (size_t)T;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
    double *dwork = sb_graph_alloc(g, (size_t)threads * 2 * (size_t)T * sizeof *dwork);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const real *Q = c->q->data + base, *K = c->k->data + base, *V = c->v->data + base;
        const real *O = c->o->data + base, *dO = c->o->grad + base;
        const real *lse = c->lse + (size_t)bh * (size_t)T;
        real *P = work + (size_t)tid * scratch;
        real *dP = P + (size_t)QB * (size_t)T, *delta = dP + (size_t)QB * (size_t)T;
        real *Fr = delta + T, *cs = Fr + T;
        real *KT = cs + T, *VT = KT + (size_t)Dh * (size_t)T;
        double *F = dwork + (size_t)tid * 2 * (size_t)T, *dF = F + T;
        sb_transpose_head(K, ld, T, Dh, KT);
        sb_transpose_head(V, ld, T, Dh, VT);
        cum_gates(c->f->data + (size_t)b * (size_t)T * (size_t)H + (size_t)h, T, H, F);
        for (int t = 0; t < T; t++) {
            real acc = 0;
            for (int i = 0; i < Dh; i++)
                acc +=
                    dO[(size_t)t * (size_t)ld + (size_t)i] * O[(size_t)t * (size_t)ld + (size_t)i];
            delta[t] = acc;
            dF[t] = 0;
        }
        for (int t0 = 0; t0 < T; t0 += QB) {
            const int rows = T - t0 < QB ? T - t0 : QB, t1 = t0 + rows;
            fattn_block_probs(Q, KT, ld, Dh, T, F, t0, rows, scale, P, Fr, lse, NULL);
            /* dV[0:t1] += P^T dO[t0:t1] */
            if (dv != NULL)
                sb_causal_at_y(P, t0, rows, 1, dO, ld, Dh, dv + base, 1);
            /* dP = dO[t0:t1] V[0:t1]^T, then dZ = P (dP - delta) in place (0 where masked) */
            sb_causal_scores(dO, ld, Dh, t0, rows, 1, VT, T, dP);
            for (int i = 0; i < rows; i++) {
                const real *p = P + (size_t)i * (size_t)t1;
                real *dp = dP + (size_t)i * (size_t)t1;
                const real d = delta[t0 + i];
                const int last = t0 + i;
                for (int j = 0; j <= last; j++)
                    dp[j] = p[j] * (dp[j] - d);
                for (int j = last + 1; j < t1; j++)
                    dp[j] = 0;
            }
            if (df != NULL) {
                /* column sums of the block in cs (rows in order), then into dF */
                for (int j = 0; j < t1; j++)
                    cs[j] = 0;
                for (int i = 0; i < rows; i++) {
                    const real *dz = dP + (size_t)i * (size_t)t1;
                    for (int j = 0; j <= t0 + i; j++)
                        cs[j] += dz[j];
                    dF[t0 + i] += (double)sb_vsum(dz, t0 + i + 1);
                }
                for (int j = 0; j < t1; j++)
                    dF[j] -= (double)cs[j];
            }
            /* dQ[t0:t1] += s dZ K[0:t1];  dK[0:t1] += s dZ^T Q[t0:t1] */
            if (dq != NULL)
                sb_causal_a_y(dP, t0, rows, scale, K, ld, Dh, dq + base + (size_t)t0 * (size_t)ld,
                              1);
            if (dk != NULL)
                sb_causal_at_y(dP, t0, rows, scale, Q, ld, Dh, dk + base, 1);
        }
        if (df != NULL) {
            double acc = 0;
            real *dfr = df + (size_t)b * (size_t)T * (size_t)H + (size_t)h;
            for (int t = T - 1; t >= 0; t--) {
                acc += dF[t];
                dfr[(size_t)t * (size_t)H] += (real)acc;
            }
        }
    }
}

static void check_shapes(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                         const sb_tensor *f)
{
    SB_ASSERT(q->ndim == 4 && k->size == q->size && v->size == q->size);
    SB_ASSERT(f->size == (size_t)q->shape[0] * (size_t)q->shape[1] * (size_t)q->shape[2]);
}

sb_tensor *sb_forgetting_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *f)
{
    check_shapes(q, k, v, f);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    const int ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    sb_tensor *o = sb_tensor_new(g, 4, q->shape);
    o->requires_grad = q->requires_grad || k->requires_grad || v->requires_grad || f->requires_grad;
    fattn_ctx *c = o->requires_grad ? sb_graph_record(g, fattn_backward, sizeof *c) : NULL;
    real *lse = NULL;
    if (c != NULL) {
        lse = sb_graph_alloc(g, (size_t)B * (size_t)H * (size_t)T * sizeof *lse);
        c->q = q, c->k = k, c->v = v, c->f = f, c->o = o, c->lse = lse;
        c->B = B, c->T = T, c->H = H, c->Dh = Dh;
    }
    const int threads = omp_get_max_threads();
    const size_t scratch = (size_t)QB * (size_t)T + (size_t)T + (size_t)Dh * (size_t)T;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
    double *dwork = sb_graph_alloc(g, (size_t)threads * (size_t)T * sizeof *dwork);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const real *Q = q->data + base, *K = k->data + base, *V = v->data + base;
        real *O = o->data + base;
        real *P = work + (size_t)tid * scratch, *Fr = P + (size_t)QB * (size_t)T;
        real *KT = Fr + T;
        double *F = dwork + (size_t)tid * (size_t)T;
        real *lse_bh = lse != NULL ? lse + (size_t)bh * (size_t)T : NULL;
        cum_gates(f->data + (size_t)b * (size_t)T * (size_t)H + (size_t)h, T, H, F);
        sb_transpose_head(K, ld, T, Dh, KT);
        for (int t0 = 0; t0 < T; t0 += QB) {
            const int rows = T - t0 < QB ? T - t0 : QB;
            fattn_block_probs(Q, KT, ld, Dh, T, F, t0, rows, scale, P, Fr, NULL, lse_bh);
            sb_causal_a_y(P, t0, rows, 1, V, ld, Dh, O + (size_t)t0 * (size_t)ld, 0);
        }
    }
    return o;
}

/* ---- the plain form: whole score matrices --------------------------------------------------- */

typedef struct fattn_ref_ctx {
    sb_tensor *q, *k, *v, *f, *o;
    real *P; /* [B][H][T][T] */
    int B, T, H, Dh;
} fattn_ref_ctx;

static void fattn_ref_backward(sb_graph *g, void *ctx)
{
    fattn_ref_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, Dh = c->Dh, ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    real *dq = c->q->requires_grad ? sb_tensor_grad(g, c->q) : NULL;
    real *dk = c->k->requires_grad ? sb_tensor_grad(g, c->k) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    real *df = c->f->requires_grad ? sb_tensor_grad(g, c->f) : NULL;
    real *dZ = sb_graph_alloc(g, (size_t)T * (size_t)T * sizeof *dZ);
    double *dF = sb_graph_alloc(g, (size_t)T * sizeof *dF);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
            const real *P = c->P + ((size_t)b * (size_t)H + (size_t)h) * (size_t)T * (size_t)T;
            const real *dO = c->o->grad + base;
            for (int i = 0; i < T; i++) {
                real *dz = dZ + (size_t)i * (size_t)T;
                real rowdot = 0; /* sum_j P_ij dP_ij */
                for (int j = 0; j <= i; j++) {
                    real dp = 0;
                    for (int e = 0; e < Dh; e++)
                        dp += dO[(size_t)i * ld + e] * c->v->data[base + (size_t)j * ld + e];
                    dz[j] = dp;
                    rowdot += P[(size_t)i * T + j] * dp;
                }
                for (int j = 0; j <= i; j++)
                    dz[j] = P[(size_t)i * T + j] * (dz[j] - rowdot);
            }
            for (int t = 0; t < T; t++)
                dF[t] = 0;
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const real z = dZ[(size_t)i * T + j], p = P[(size_t)i * T + j];
                    dF[i] += (double)z;
                    dF[j] -= (double)z;
                    for (int e = 0; e < Dh; e++) {
                        if (dq != NULL)
                            dq[base + (size_t)i * ld + e] +=
                                scale * z * c->k->data[base + (size_t)j * ld + e];
                        if (dk != NULL)
                            dk[base + (size_t)j * ld + e] +=
                                scale * z * c->q->data[base + (size_t)i * ld + e];
                        if (dv != NULL)
                            dv[base + (size_t)j * ld + e] += p * dO[(size_t)i * ld + e];
                    }
                }
            if (df != NULL) {
                double acc = 0;
                for (int t = T - 1; t >= 0; t--) {
                    acc += dF[t];
                    df[((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)h] += (real)acc;
                }
            }
        }
}

sb_tensor *sb_forgetting_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v,
                                  sb_tensor *f)
{
    check_shapes(q, k, v, f);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    const int ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    sb_tensor *o = sb_tensor_zeros(g, 4, q->shape);
    real *P = sb_graph_alloc(g, (size_t)B * (size_t)H * (size_t)T * (size_t)T * sizeof *P);
    double *F = sb_graph_alloc(g, (size_t)T * sizeof *F);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
            real *Pb = P + ((size_t)b * (size_t)H + (size_t)h) * (size_t)T * (size_t)T;
            cum_gates(f->data + (size_t)b * (size_t)T * (size_t)H + (size_t)h, T, H, F);
            for (int i = 0; i < T; i++) {
                real *p = Pb + (size_t)i * T, mx = -(real)INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    real z = 0;
                    for (int e = 0; e < Dh; e++)
                        z +=
                            q->data[base + (size_t)i * ld + e] * k->data[base + (size_t)j * ld + e];
                    p[j] = scale * z + (real)(F[i] - F[j]);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= i; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int j = 0; j < T; j++)
                    p[j] = j <= i ? p[j] / sum : 0;
                for (int j = 0; j <= i; j++)
                    for (int e = 0; e < Dh; e++)
                        o->data[base + (size_t)i * ld + e] +=
                            p[j] * v->data[base + (size_t)j * ld + e];
            }
        }
    o->requires_grad = q->requires_grad || k->requires_grad || v->requires_grad || f->requires_grad;
    fattn_ref_ctx *c = o->requires_grad ? sb_graph_record(g, fattn_ref_backward, sizeof *c) : NULL;
    if (c != NULL) {
        c->q = q, c->k = k, c->v = v, c->f = f, c->o = o, c->P = P;
        c->B = B, c->T = T, c->H = H, c->Dh = Dh;
    }
    return o;
}

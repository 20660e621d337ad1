/* attention.c - causal softmax attention, blocked over queries (see ops.h).
 *
 * Per batch b and head h, with Q, K, V the [T, Dh] slices (row stride H*Dh) and
 * s = 1/sqrt(Dh):
 *   forward, per block of QB queries [t0, t1):
 *     S = s Q[t0:t1] K[0:t1]^T (causal: S_ij = -inf for j > i),
 *     P = softmax_rows(S), lse_i = log sum_j exp(S_ij), O[t0:t1] = P V[0:t1]
 *   backward, Delta_i = <dO_i, O_i>, per block (P recomputed from lse):
 *     dV[0:t1] += P^T dO[t0:t1], dP = dO[t0:t1] V[0:t1]^T, dS = P (dP - Delta),
 *     dQ[t0:t1] += s dS K[0:t1], dK[0:t1] += s dS^T Q[t0:t1]
 * Only a QB x T block of scores exists at a time (per thread), so memory grows linearly
 * with T: task 4's 20 000-frame test sequences fit. Work is split over (b, h) pairs, each
 * pair's sums are done in a fixed order: results do not depend on the thread count.
 *
 * The block products are in causal_blocks.c (the register-blocked small-matrix kernel,
 * masked halves of the diagonal blocks skipped); K and V are transposed once per (b, h)
 * into [Dh, T] scratch for the score products.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <tgmath.h>

#include "ops/ops.h"

#include "ops/causal_blocks.h"
#include "tensor/fastmath.h"

#define QB 128 /* queries per block */

typedef struct attention_ctx {
    sb_tensor *q, *k, *v, *o;
    real *lse; /* [B][H][T] */
    int B, T, H, Dh;
} attention_ctx;

/* S[rows, t1] <- scale Q K^T for queries [t0, t0 + rows) with the causal mask, then
 * exponentiated: with lse == NULL, softmax rows (writing lse_out); else exp(S - lse).
 * KT is K transposed, [Dh, T]. Masked entries are set to 0. */
static void attention_block_probs(const real *Q, const real *KT, int ld, int Dh, int T, int t0,
                                  int rows, real scale, real *S, const real *lse, real *lse_out)
{
    const int t1 = t0 + rows;
    sb_causal_scores(Q, ld, Dh, t0, rows, scale, KT, T, S);
    for (int i = 0; i < rows; i++) {
        real *s = S + (size_t)i * (size_t)t1;
        int last = t0 + i; /* keys 0..last are visible */
        if (lse != NULL) {
            (void)sb_vexp_shift(s, last + 1, lse[t0 + i]);
        } else {
            real m = sb_vmax(s, last + 1);
            real sum = sb_vexp_shift(s, last + 1, m);
            real inv = 1 / sum;
            for (int j = 0; j <= last; j++)
                s[j] *= inv;
            if (lse_out != NULL)
                lse_out[t0 + i] = m + log(sum);
        }
        for (int j = last + 1; j < t1; j++)
            s[j] = 0;
    }
}

static void attention_backward(sb_graph *g, void *ctx)
{
    attention_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, Dh = c->Dh, ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    real *dq = sb_tensor_grad(g, c->q), *dk = sb_tensor_grad(g, c->k);
    real *dv = sb_tensor_grad(g, c->v);
    const int threads = omp_get_max_threads();
    const size_t scratch =
        (size_t)2 * QB * (size_t)T + (size_t)T + (size_t)2 * (size_t)Dh * (size_t)T;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const real *Q = c->q->data + base, *K = c->k->data + base, *V = c->v->data + base;
        const real *O = c->o->data + base, *dO = c->o->grad + base;
        real *dQ = dq + base, *dK = dk + base, *dV = dv + base;
        const real *lse = c->lse + (size_t)bh * (size_t)T;
        real *P = work + (size_t)omp_get_thread_num() * scratch;
        real *dP = P + (size_t)QB * (size_t)T, *delta = dP + (size_t)QB * (size_t)T;
        real *KT = delta + T, *VT = KT + (size_t)Dh * (size_t)T;
        sb_transpose_head(K, ld, T, Dh, KT);
        sb_transpose_head(V, ld, T, Dh, VT);
        for (int t = 0; t < T; t++) {
            real acc = 0;
            for (int i = 0; i < Dh; i++)
                acc +=
                    dO[(size_t)t * (size_t)ld + (size_t)i] * O[(size_t)t * (size_t)ld + (size_t)i];
            delta[t] = acc;
        }
        for (int t0 = 0; t0 < T; t0 += QB) {
            int rows = T - t0 < QB ? T - t0 : QB, t1 = t0 + rows;
            attention_block_probs(Q, KT, ld, Dh, T, t0, rows, scale, P, lse, NULL);
            /* dV[0:t1] += P^T dO[t0:t1] */
            sb_causal_at_y(P, t0, rows, 1, dO, ld, Dh, dV, 1);
            /* dP = dO[t0:t1] V[0:t1]^T, then dS = P (dP - delta) in place (0 where masked) */
            sb_causal_scores(dO, ld, Dh, t0, rows, 1, VT, T, dP);
            for (int i = 0; i < rows; i++) {
                real *p = P + (size_t)i * (size_t)t1, *dp = dP + (size_t)i * (size_t)t1;
                real d = delta[t0 + i];
                int last = t0 + i;
                for (int j = 0; j <= last; j++)
                    dp[j] = p[j] * (dp[j] - d);
                for (int j = last + 1; j < t1; j++)
                    dp[j] = 0;
            }
            /* dQ[t0:t1] += s dS K[0:t1];  dK[0:t1] += s dS^T Q[t0:t1] */
            sb_causal_a_y(dP, t0, rows, scale, K, ld, Dh, dQ + (size_t)t0 * (size_t)ld, 1);
            sb_causal_at_y(dP, t0, rows, scale, Q, ld, Dh, dK, 1);
        }
    }
}

sb_tensor *sb_attention_causal(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v)
{
    SB_ASSERT(q->ndim == 4 && k->size == q->size && v->size == q->size);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    const int ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    sb_tensor *o = sb_tensor_new(g, 4, q->shape);
    o->requires_grad = q->requires_grad || k->requires_grad || v->requires_grad;
    attention_ctx *c = o->requires_grad ? sb_graph_record(g, attention_backward, sizeof *c) : NULL;
    real *lse = NULL;
    if (c != NULL) {
        lse = sb_graph_alloc(g, (size_t)B * (size_t)H * (size_t)T * sizeof *lse);
        c->q = q, c->k = k, c->v = v, c->o = o, c->lse = lse;
        c->B = B, c->T = T, c->H = H, c->Dh = Dh;
    }
    const int threads = omp_get_max_threads();
    const size_t scratch = (size_t)QB * (size_t)T + (size_t)Dh * (size_t)T;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const real *Q = q->data + base, *K = k->data + base, *V = v->data + base;
        real *O = o->data + base;
        real *P = work + (size_t)omp_get_thread_num() * scratch;
        real *KT = P + (size_t)QB * (size_t)T;
        real *lse_bh = lse != NULL ? lse + (size_t)bh * (size_t)T : NULL;
        sb_transpose_head(K, ld, T, Dh, KT);
        for (int t0 = 0; t0 < T; t0 += QB) {
            int rows = T - t0 < QB ? T - t0 : QB;
            attention_block_probs(Q, KT, ld, Dh, T, t0, rows, scale, P, NULL, lse_bh);
            sb_causal_a_y(P, t0, rows, 1, V, ld, Dh, O + (size_t)t0 * (size_t)ld, 0);
        }
    }
    return o;
}

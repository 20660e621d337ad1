/* path_attn.c - PaTH attention, see ops_path.h; derivations in docs/models/path_attn.md.
 *
 * Per batch b and head h, with Q, K, V, W the [T, Dh] slices (row stride H Dh), beta the
 * [T] slice (stride H) and H_s = I - beta_s w_s w_s^T, query i walks back over its keys:
 *   u_i = q_i,   Z_ij = s u_j . k_j,   u_{j-1} = H_j u_j        (j = i, i-1, ..., 0)
 * so u_j = H_{j+1} ... H_i q_i and Z_ij = s q_i^T H_i ... H_{j+1} k_j (each H_s is
 * symmetric). The row is then a causal softmax times V, as attention.c. The walk keeps one
 * Dh vector per row: nothing of size T x T x Dh is formed, and only the rows' log-sum-exp is
 * saved for the backward.
 *
 * Backward of one row, with dZ_ij = P_ij (dP_ij - sum_l P_il dP_il), dP_ij = dO_i . v_j:
 * the walk is recomputed with its vectors u_0..u_i kept ([T, Dh] scratch), then run in
 * reverse (j = 0, 1, ..., i) carrying g = dL/du_j:
 *   through u_{j-1} = H_j u_j (j > 0), with a = w_j . u_j and c = w_j . g:
 *     dbeta_j += -a c,   dw_j += -beta_j (c u_j + a g),   g <- g - beta_j c w_j  (= H_j g)
 *   through Z_ij:  g += s dZ_ij k_j,   dk_j += s dZ_ij u_j
 * and at the end dq_i += g. dV_j += P_ij dO_i. Rows of one (b, h) run in order, so every
 * sum has a fixed order whatever the thread count.
 *
 * Two forms: sb_path_attn_ref walks one row at a time (first half of this file);
 * sb_path_attn walks a block of rows together (second half), the form the layer uses.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <tgmath.h>

#include "ops/ops_path.h"

#include "ops/causal_blocks.h"
#include "tensor/fastmath.h"

/* What both forms' backwards need (block: the blocked form's rows per block, 0 for the
 * row-by-row form). */
typedef struct path_ctx {
    sb_tensor *q, *k, *v, *w, *beta, *o;
    real *lse; /* [B][H][T]: log-sum-exp of every row's scaled scores */
    int B, T, H, Dh, block;
} path_ctx;

/* Both forms' start: the output, and the backward's record (with the rows' log-sum-exp,
 * *lse) when a gradient is wanted; *lse is NULL otherwise. */
static sb_tensor *path_begin(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                             sb_tensor *beta, int block, sb_backward_fn backward, real **lse)
{
    SB_ASSERT(q->ndim == 4 && k->size == q->size && v->size == q->size && w->size == q->size);
    SB_ASSERT(beta->size == (size_t)q->shape[0] * (size_t)q->shape[1] * (size_t)q->shape[2]);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    sb_tensor *o = sb_tensor_new(g, 4, q->shape);
    o->requires_grad = q->requires_grad || k->requires_grad || v->requires_grad ||
                       w->requires_grad || beta->requires_grad;
    path_ctx *c = o->requires_grad ? sb_graph_record(g, backward, sizeof *c) : NULL;
    *lse = NULL;
    if (c != NULL) {
        *lse = sb_graph_alloc(g, (size_t)B * (size_t)H * (size_t)T * sizeof **lse);
        c->q = q, c->k = k, c->v = v, c->w = w, c->beta = beta, c->o = o, c->lse = *lse;
        c->B = B, c->T = T, c->H = H, c->Dh = Dh, c->block = block;
    }
    return o;
}

static real dot(const real *a, const real *b, int n)
{
    real acc = 0;
    for (int e = 0; e < n; e++)
        acc += a[e] * b[e];
    return acc;
}

/* One (b, h) slice: Q, K, W rows of stride ld; beta of stride bs. */
typedef struct path_slice {
    const real *Q, *K, *W, *beta;
    int ld, bs, Dh;
} path_slice;

/* Row i's raw scores s[j] = q_i^T H_i ... H_{j+1} k_j for j <= i. With U != NULL the walk's
 * vectors are kept, u_j at U + j Dh; else u (scratch [Dh]) carries it. */
static void path_row_scores(const path_slice *sl, int i, real *s, real *U, real *u)
{
    const int Dh = sl->Dh, ld = sl->ld;
    real *cur = U != NULL ? U + (size_t)i * (size_t)Dh : u;
    const real *qi = sl->Q + (size_t)i * (size_t)ld;
    for (int e = 0; e < Dh; e++)
        cur[e] = qi[e];
    for (int j = i; j >= 0; j--) {
        const real *kj = sl->K + (size_t)j * (size_t)ld;
        s[j] = dot(cur, kj, Dh);
        if (j == 0)
            break;
        /* u_{j-1} = u_j - beta_j (w_j . u_j) w_j */
        const real *wj = sl->W + (size_t)j * (size_t)ld;
        const real ba = sl->beta[(size_t)j * (size_t)sl->bs] * dot(wj, cur, Dh);
        real *next = U != NULL ? U + (size_t)(j - 1) * (size_t)Dh : cur;
        for (int e = 0; e < Dh; e++)
            next[e] = cur[e] - ba * wj[e];
        cur = next;
    }
}

static void path_ref_backward(sb_graph *g, void *ctx)
{
    path_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, Dh = c->Dh, ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    real *dq = c->q->requires_grad ? sb_tensor_grad(g, c->q) : NULL;
    real *dk = c->k->requires_grad ? sb_tensor_grad(g, c->k) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    real *dbeta = c->beta->requires_grad ? sb_tensor_grad(g, c->beta) : NULL;
    const int threads = omp_get_max_threads();
    /* per thread: the row's probabilities and score gradients [T] each, the walk [T, Dh],
     * the carried gradient [Dh] */
    const size_t scratch = 2 * (size_t)T + (size_t)T * (size_t)Dh + (size_t)Dh;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const size_t bbase = (size_t)b * (size_t)T * (size_t)H + (size_t)h;
        const path_slice sl = {c->q->data + base,
                               c->k->data + base,
                               c->w->data + base,
                               c->beta->data + bbase,
                               ld,
                               H,
                               Dh};
        const real *V = c->v->data + base, *dO = c->o->grad + base;
        const real *lse = c->lse + (size_t)bh * (size_t)T;
        real *P = work + (size_t)tid * scratch, *dZ = P + T, *U = dZ + T;
        real *gu = U + (size_t)T * (size_t)Dh;
        for (int i = 0; i < T; i++) {
            const real *dOi = dO + (size_t)i * (size_t)ld;
            path_row_scores(&sl, i, P, U, NULL);
            /* P, dP = dO_i V^T (in dZ), dV += P^T dO_i */
            for (int j = 0; j <= i; j++) {
                P[j] = sb_fexp(scale * P[j] - lse[i]);
                dZ[j] = dot(dOi, V + (size_t)j * (size_t)ld, Dh);
                if (dv != NULL) {
                    real *dvj = dv + base + (size_t)j * (size_t)ld;
                    for (int e = 0; e < Dh; e++)
                        dvj[e] += P[j] * dOi[e];
                }
            }
            real rowdot = 0;
            for (int j = 0; j <= i; j++)
                rowdot += P[j] * dZ[j];
            for (int j = 0; j <= i; j++)
                dZ[j] = scale * P[j] * (dZ[j] - rowdot);
            /* the walk in reverse, g = dL/du_j */
            for (int e = 0; e < Dh; e++)
                gu[e] = 0;
            for (int j = 0; j <= i; j++) {
                const real *uj = U + (size_t)j * (size_t)Dh;
                if (j > 0) { /* u_{j-1} = H_j u_j */
                    const real *wj = sl.W + (size_t)j * (size_t)ld;
                    const real bj = sl.beta[(size_t)j * (size_t)H];
                    const real a = dot(wj, uj, Dh), cg = dot(wj, gu, Dh);
                    if (dbeta != NULL)
                        dbeta[bbase + (size_t)j * (size_t)H] -= a * cg;
                    if (dw != NULL) {
                        real *dwj = dw + base + (size_t)j * (size_t)ld;
                        for (int e = 0; e < Dh; e++)
                            dwj[e] -= bj * (cg * uj[e] + a * gu[e]);
                    }
                    for (int e = 0; e < Dh; e++)
                        gu[e] -= bj * cg * wj[e];
                }
                const real *kj = sl.K + (size_t)j * (size_t)ld;
                const real dz = dZ[j];
                for (int e = 0; e < Dh; e++)
                    gu[e] += dz * kj[e];
                if (dk != NULL) {
                    real *dkj = dk + base + (size_t)j * (size_t)ld;
                    for (int e = 0; e < Dh; e++)
                        dkj[e] += dz * uj[e];
                }
            }
            if (dq != NULL) {
                real *dqi = dq + base + (size_t)i * (size_t)ld;
                for (int e = 0; e < Dh; e++)
                    dqi[e] += gu[e];
            }
        }
    }
}

sb_tensor *sb_path_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                            sb_tensor *beta)
{
    real *lse;
    sb_tensor *o = path_begin(g, q, k, v, w, beta, 0, path_ref_backward, &lse);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    const int ld = H * Dh;
    const real scale = 1 / sqrt((real)Dh);
    const int threads = omp_get_max_threads();
    const size_t scratch = (size_t)T + 2 * (size_t)Dh; /* scores, walk vector, output row */
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const path_slice sl = {q->data + base,
                               k->data + base,
                               w->data + base,
                               beta->data + (size_t)b * (size_t)T * (size_t)H + (size_t)h,
                               ld,
                               H,
                               Dh};
        const real *V = v->data + base;
        real *s = work + (size_t)tid * scratch, *u = s + T, *orow = u + Dh;
        for (int i = 0; i < T; i++) {
            path_row_scores(&sl, i, s, NULL, u);
            for (int j = 0; j <= i; j++)
                s[j] *= scale;
            const real m = sb_vmax(s, i + 1);
            const real sum = sb_vexp_shift(s, i + 1, m);
            const real inv = 1 / sum;
            if (lse != NULL)
                lse[(size_t)bh * (size_t)T + (size_t)i] = m + log(sum);
            for (int e = 0; e < Dh; e++)
                orow[e] = 0;
            for (int j = 0; j <= i; j++) {
                const real pj = s[j] * inv;
                const real *vj = V + (size_t)j * (size_t)ld;
                for (int e = 0; e < Dh; e++)
                    orow[e] += pj * vj[e];
            }
            real *oi = o->data + base + (size_t)i * (size_t)ld;
            for (int e = 0; e < Dh; e++)
                oi[e] = orow[e];
        }
    }
    return o;
}

/* ---- the blocked form: a block of query rows walks together ---------------------------------
 *
 * The rows [t0, t1) of a block walk back over keys j = t1-1, ..., 0 side by side, their
 * vectors held as the columns of U [Dh, rows] (column r is row t0 + r); row i joins the walk
 * at j = i (column set to q_i) and every column gets the same update u <- H_j u, so each step
 * is three loops over the columns that vectorise (no reduction along Dh is reordered: every
 * row's arithmetic is that of the plain walk above). Columns that have not joined are zero
 * and are skipped. The softmax and P V are attention.c's, on [rows, t1] probability blocks
 * (causal_blocks.c). */

/* S[rows, t1] <- the raw scores of the block's rows (0 above the causal diagonal). With Us
 * != NULL the walk's vectors are kept: U before the score of key j at Us + j Dh QB (stride
 * QB between e rows); else U (scratch [Dh, QB]) carries the walk. a, sc: scratch [QB] each
 * (the scores of one key are summed in sc, contiguous, then stored in S's column). */
static void pathb_scores(const path_slice *sl, int t0, int rows, int QB, real *S, real *Us,
                         real *restrict U, real *restrict a, real *restrict sc)
{
    const int Dh = sl->Dh, ld = sl->ld, t1 = t0 + rows;
    const size_t step = (size_t)Dh * (size_t)QB;
    for (size_t n = 0; n < step; n++)
        U[n] = 0;
    for (int j = t1 - 1; j >= 0; j--) {
        const int lo = j > t0 ? j - t0 : 0; /* the columns that have joined */
        if (j >= t0) {
            const real *qj = sl->Q + (size_t)j * (size_t)ld;
            for (int e = 0; e < Dh; e++)
                U[(size_t)e * QB + (size_t)(j - t0)] = qj[e];
        }
        if (Us != NULL) {
            real *keep = Us + (size_t)j * step;
            for (size_t n = 0; n < step; n++)
                keep[n] = U[n];
        }
        /* scores s_r = u_r . k_j and a_r = w_j . u_r, summed over e in order */
        const real *kj = sl->K + (size_t)j * (size_t)ld, *wj = sl->W + (size_t)j * (size_t)ld;
        for (int r = lo; r < rows; r++)
            sc[r] = 0, a[r] = 0;
        for (int e = 0; e < Dh; e++) {
            const real *ue = U + (size_t)e * QB;
            const real ke = kj[e], we = wj[e];
            for (int r = lo; r < rows; r++) {
                sc[r] += ue[r] * ke;
                a[r] += we * ue[r];
            }
        }
        for (int r = lo; r < rows; r++)
            S[(size_t)r * t1 + (size_t)j] = sc[r];
        if (j == 0)
            break;
        /* u_r <- u_r - beta_j (w_j . u_r) w_j */
        const real bj = sl->beta[(size_t)j * (size_t)sl->bs];
        for (int r = lo; r < rows; r++)
            a[r] *= bj;
        for (int e = 0; e < Dh; e++) {
            real *ue = U + (size_t)e * QB;
            const real we = wj[e];
            for (int r = lo; r < rows; r++)
                ue[r] = ue[r] - a[r] * we;
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = t0 + r + 1; j < t1; j++)
            S[(size_t)r * t1 + (size_t)j] = 0;
}

static void pathb_backward(sb_graph *g, void *ctx)
{
    path_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, Dh = c->Dh, ld = H * Dh, QB = c->block;
    const real scale = 1 / sqrt((real)Dh);
    real *dq = c->q->requires_grad ? sb_tensor_grad(g, c->q) : NULL;
    real *dk = c->k->requires_grad ? sb_tensor_grad(g, c->k) : NULL;
    real *dv = c->v->requires_grad ? sb_tensor_grad(g, c->v) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    real *dbeta = c->beta->requires_grad ? sb_tensor_grad(g, c->beta) : NULL;
    const int threads = omp_get_max_threads();
    const size_t step = (size_t)Dh * (size_t)QB;
    /* per thread: P and dZ blocks [QB, T] each, V transposed [Dh, T], the walk's vectors
     * [T, Dh, QB], the walk U and its gradient G [Dh, QB] each, five [QB] rows */
    const size_t scratch = 2 * (size_t)QB * (size_t)T + (size_t)Dh * (size_t)T + (size_t)T * step +
                           2 * step + 5 * (size_t)QB;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const size_t bbase = (size_t)b * (size_t)T * (size_t)H + (size_t)h;
        const path_slice sl = {c->q->data + base,
                               c->k->data + base,
                               c->w->data + base,
                               c->beta->data + bbase,
                               ld,
                               H,
                               Dh};
        const real *dO = c->o->grad + base;
        const real *lse = c->lse + (size_t)bh * (size_t)T;
        real *P = work + (size_t)tid * scratch, *dZ = P + (size_t)QB * (size_t)T;
        real *VT = dZ + (size_t)QB * (size_t)T, *Us = VT + (size_t)Dh * (size_t)T;
        real *U = Us + (size_t)T * step, *G = U + step;
        real *a = G + step, *cg = a + QB, *dz = cg + QB, *tmp = dz + QB, *sc = tmp + QB;
        sb_transpose_head(c->v->data + base, ld, T, Dh, VT);
        for (int t0 = 0; t0 < T; t0 += QB) {
            const int rows = T - t0 < QB ? T - t0 : QB, t1 = t0 + rows;
            pathb_scores(&sl, t0, rows, QB, P, Us, U, a, sc);
            for (int r = 0; r < rows; r++) {
                real *p = P + (size_t)r * t1;
                const int last = t0 + r;
                for (int j = 0; j <= last; j++)
                    p[j] = sb_fexp(scale * p[j] - lse[last]);
            }
            /* dV[0:t1] += P^T dO[t0:t1];  dP = dO[t0:t1] V[0:t1]^T (in dZ) */
            if (dv != NULL)
                sb_causal_at_y(P, t0, rows, 1, dO, ld, Dh, dv + base, 1);
            sb_causal_scores(dO, ld, Dh, t0, rows, 1, VT, T, dZ);
            for (int r = 0; r < rows; r++) {
                const real *p = P + (size_t)r * t1;
                real *d = dZ + (size_t)r * t1;
                const int last = t0 + r;
                real rowdot = 0;
                for (int j = 0; j <= last; j++)
                    rowdot += p[j] * d[j];
                for (int j = 0; j <= last; j++)
                    d[j] = scale * p[j] * (d[j] - rowdot);
                for (int j = last + 1; j < t1; j++)
                    d[j] = 0;
            }
            /* the walk in reverse, G = dL/dU */
            for (size_t n = 0; n < step; n++)
                G[n] = 0;
            for (int j = 0; j < t1; j++) {
                const int lo = j > t0 ? j - t0 : 0, n_act = rows - lo;
                const real *Uj = Us + (size_t)j * step;
                const real *kj = sl.K + (size_t)j * (size_t)ld;
                const real *wj = sl.W + (size_t)j * (size_t)ld;
                if (j > 0) { /* through u_{j-1} = H_j u_j */
                    const real bj = sl.beta[(size_t)j * (size_t)H];
                    for (int r = lo; r < rows; r++)
                        a[r] = 0, cg[r] = 0;
                    for (int e = 0; e < Dh; e++) {
                        const real *ue = Uj + (size_t)e * QB, *ge = G + (size_t)e * QB;
                        const real we = wj[e];
                        for (int r = lo; r < rows; r++) {
                            a[r] += we * ue[r];
                            cg[r] += we * ge[r];
                        }
                    }
                    if (dbeta != NULL) {
                        for (int r = lo; r < rows; r++)
                            tmp[r] = a[r] * cg[r];
                        dbeta[bbase + (size_t)j * (size_t)H] -= sb_vsum(tmp + lo, n_act);
                    }
                    if (dw != NULL) {
                        real *dwj = dw + base + (size_t)j * (size_t)ld;
                        for (int e = 0; e < Dh; e++) {
                            const real *ue = Uj + (size_t)e * QB, *ge = G + (size_t)e * QB;
                            for (int r = lo; r < rows; r++)
                                tmp[r] = cg[r] * ue[r] + a[r] * ge[r];
                            dwj[e] -= bj * sb_vsum(tmp + lo, n_act);
                        }
                    }
                    for (int r = lo; r < rows; r++)
                        cg[r] *= bj;
                    for (int e = 0; e < Dh; e++) {
                        real *ge = G + (size_t)e * QB;
                        const real we = wj[e];
                        for (int r = lo; r < rows; r++)
                            ge[r] -= cg[r] * we;
                    }
                }
                /* through the scores: G += dZ_j k_j^T, dk_j += U_j dZ_j */
                for (int r = lo; r < rows; r++)
                    dz[r] = dZ[(size_t)r * t1 + (size_t)j];
                for (int e = 0; e < Dh; e++) {
                    real *ge = G + (size_t)e * QB;
                    const real ke = kj[e];
                    for (int r = lo; r < rows; r++)
                        ge[r] += dz[r] * ke;
                }
                if (dk != NULL) {
                    real *dkj = dk + base + (size_t)j * (size_t)ld;
                    for (int e = 0; e < Dh; e++) {
                        const real *ue = Uj + (size_t)e * QB;
                        for (int r = lo; r < rows; r++)
                            tmp[r] = dz[r] * ue[r];
                        dkj[e] += sb_vsum(tmp + lo, n_act);
                    }
                }
                /* row j's walk began here: its gradient is q_j's */
                if (j >= t0 && dq != NULL) {
                    real *dqj = dq + base + (size_t)j * (size_t)ld;
                    for (int e = 0; e < Dh; e++)
                        dqj[e] += G[(size_t)e * QB + (size_t)(j - t0)];
                }
            }
        }
    }
}

sb_tensor *sb_path_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                        sb_tensor *beta, int block)
{
    SB_ASSERT(block >= 1);
    real *lse;
    sb_tensor *o = path_begin(g, q, k, v, w, beta, block, pathb_backward, &lse);
    const int B = q->shape[0], T = q->shape[1], H = q->shape[2], Dh = q->shape[3];
    const int ld = H * Dh, QB = block;
    const real scale = 1 / sqrt((real)Dh);
    const int threads = omp_get_max_threads();
    /* per thread: the probability block [QB, T], the walk [Dh, QB], two [QB] rows */
    const size_t scratch = (size_t)QB * (size_t)T + (size_t)Dh * (size_t)QB + 2 * (size_t)QB;
    real *work = sb_graph_alloc(g, (size_t)threads * scratch * sizeof *work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, tid = omp_get_thread_num();
        const size_t base = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)Dh;
        const path_slice sl = {q->data + base,
                               k->data + base,
                               w->data + base,
                               beta->data + (size_t)b * (size_t)T * (size_t)H + (size_t)h,
                               ld,
                               H,
                               Dh};
        real *P = work + (size_t)tid * scratch, *U = P + (size_t)QB * (size_t)T;
        real *a = U + (size_t)Dh * (size_t)QB, *sc = a + QB;
        for (int t0 = 0; t0 < T; t0 += QB) {
            const int rows = T - t0 < QB ? T - t0 : QB, t1 = t0 + rows;
            pathb_scores(&sl, t0, rows, QB, P, NULL, U, a, sc);
            for (int r = 0; r < rows; r++) {
                real *s = P + (size_t)r * t1;
                const int last = t0 + r;
                for (int j = 0; j <= last; j++)
                    s[j] *= scale;
                const real m = sb_vmax(s, last + 1);
                const real sum = sb_vexp_shift(s, last + 1, m);
                const real inv = 1 / sum;
                for (int j = 0; j <= last; j++)
                    s[j] *= inv;
                if (lse != NULL)
                    lse[(size_t)bh * (size_t)T + (size_t)last] = m + log(sum);
            }
            sb_causal_a_y(P, t0, rows, 1, v->data + base, ld, Dh,
                          o->data + base + (size_t)t0 * (size_t)ld, 0);
        }
    }
    return o;
}

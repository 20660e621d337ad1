/* ssd.c - Mamba2's state-space dual (SSD) layer core: the chunked form the model uses and
 * the recurrent form as its oracle (ops_ssm.h; docs/models/mamba2.md; derivation:
 * docs/models/mamba2.md).
 *
 * Per batch b and head m (scalar A = -exp(A_log[m]); x_t is the head's P channels):
 *   dt_t = softplus(dt_in_t + dt_bias),  S_t = exp(dt_t A) S_t-1 + dt_t x_t B_t^T,
 *   y_t = S_t C_t + D x_t
 *
 * Chunked forward, chunk c of q frames (local i, j), F = state before the chunk:
 *   s_i = sum_{k<=i} dt_k A                                  cumulative decay
 *   G_ij = (C_i . B_j) exp(s_i - s_j) dt_j     for j <= i, else 0   (exponent <= 0)
 *   y_i = sum_j G_ij x_j + exp(s_i) F C_i + D x_i           (one q x q GEMM + one q x N x P)
 *   F  <- exp(s_q-1) F + sum_j exp(s_q-1 - s_j) dt_j x_j B_j^T
 * C . B is one q x q GEMM per chunk, shared by the heads.
 *
 * Chunked backward, chunks last to first, dF = dl/d(state after the chunk) (0 after the
 * last), Gam_ij = (C_i . B_j) exp(s_i - s_j), xbar_j = dt_j x_j:
 *   dxbar  = Gam^T dy + w_j dF B_j            w_j = exp(s_q-1 - s_j)
 *   dGam_ij = dy_i . xbar_j;  d(CB)_ij += dGam_ij exp(s_i - s_j) (summed over heads)
 *   V_ij = dGam_ij Gam_ij;  da_k += sum_{i>=k} sum_{j<k} V_ij      (stable double sum)
 *   dF_prev = sum_i exp(s_i) dy_i C_i^T + exp(s_q-1) dF
 *   dC_i += exp(s_i) F^T dy_i;  ds_i += exp(s_i) dy_i . F C_i
 *   ds_q-1 += exp(s_q-1) <dF, F>;  dB_j += w_j dF^T xbar_j
 *   omega_j = w_j xbar_j . dF B_j;  da_k += sum_{j<k} omega_j       (stable prefix sum)
 *   da_k += sum_{i>=k} ds_i;  ddt_k = da_k A + dxbar_k . x_k;  dA += sum_k da_k dt_k
 *   dx_k += dt_k dxbar_k;  dC += d(CB) B;  dB += d(CB)^T C
 * The forward saves the state before every chunk; the backward recomputes C . B, the
 * decays and Gam. Threads own batch rows (chunks and heads of a row run in order on one
 * thread); the per-head parameter gradients are summed over rows in order afterwards.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops_ssm.h"
#include "ops/ssm_math.h"

typedef struct ssd_ctx {
    sb_tensor *x, *dt_in, *dt_bias, *A_log, *Bm, *Cm, *D, *y;
    real *F0; /* fast form: [B][chunks][M][P][N] state before each chunk */
    real *hs; /* reference form: [B][M][T][P][N] every state */
    int B, T, E, M, P, N, Q;
} ssd_ctx;

static void check_shapes(sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                         sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D)
{
    SB_ASSERT(x->ndim == 3 && dt_in->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], E = x->shape[2], M = (int)A_log->size;
    SB_ASSERT(M >= 1 && E % M == 0);
    SB_ASSERT(dt_in->shape[0] == B && dt_in->shape[1] == T && dt_in->shape[2] == M);
    SB_ASSERT(Bm->ndim == 3 && Bm->shape[0] == B && Bm->shape[1] == T);
    SB_ASSERT(Cm->size == Bm->size && Bm->shape[2] <= SB_SSM_MAX_STATE);
    SB_ASSERT(dt_bias == NULL || (int)dt_bias->size == M);
    SB_ASSERT(D == NULL || (int)D->size == M);
}

static int any_grad(sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                    sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D)
{
    return x->requires_grad || dt_in->requires_grad || A_log->requires_grad || Bm->requires_grad ||
           Cm->requires_grad || (dt_bias != NULL && dt_bias->requires_grad) ||
           (D != NULL && D->requires_grad);
}

static void sum_rows_into(const real *part, int B, int n, real *out)
{
    for (int i = 0; i < n; i++) {
        real acc = 0;
        for (int b = 0; b < B; b++)
            acc += part[(size_t)b * (size_t)n + (size_t)i];
        out[i] += acc;
    }
}

/* A gradient buffer, or zeroed scratch of n values when the tensor (maybe NULL) needs none. */
static real *grad_or_scratch(sb_graph *g, sb_tensor *t, size_t n)
{
    if (t != NULL && t->requires_grad)
        return sb_tensor_grad(g, t);
    real *s = sb_graph_alloc(g, n * sizeof(real));
    memset(s, 0, n * sizeof(real));
    return s;
}

/* dt and the cumulative decay of head m over frames [row0, row0 + q) */
static void chunk_decay(const real *dt_in, int M, int m, real bias, real A, size_t row0, int q,
                        real *pre, real *dtv, real *s)
{
    real acc = 0;
    for (int i = 0; i < q; i++) {
        pre[i] = dt_in[(row0 + (size_t)i) * (size_t)M + (size_t)m] + bias;
        dtv[i] = ssm_softplus(pre[i]);
        acc += dtv[i] * A;
        s[i] = acc;
    }
}

/* ---- products with a causal (lower-triangular) q x q factor ----------------------------
 * Row blocks of QB frames: block i only meets columns up to its own end, so the blocks
 * above the diagonal are never computed (37.5% of the work at q = 256). Entries above the
 * diagonal inside a diagonal block are computed or read as they are: the callers keep
 * them zero (factors) or never read them (products). */
#define QB 64

/* lower part of G [q x q] (ld q) = A [q x k] (ld lda) B [q x k]^T (ld ldb) */
static void tril_abt(int q, int k, const real *A, int lda, const real *B, int ldb, real *G)
{
    for (int i0 = 0; i0 < q; i0 += QB) {
        const int rows = q - i0 < QB ? q - i0 : QB;
        ssm_gemm(0, 1, rows, i0 + rows, k, 1, A + (size_t)i0 * (size_t)lda, lda, B, ldb, 0,
                 G + (size_t)i0 * (size_t)q, q);
    }
}

/* Y [q x n] (ld ldy) = beta Y + L X for lower-triangular L [q x q] (ld q), X [q x n] */
static void tril_mm(int q, int n, const real *L, const real *X, int ldx, real beta, real *Y,
                    int ldy)
{
    for (int i0 = 0; i0 < q; i0 += QB) {
        const int rows = q - i0 < QB ? q - i0 : QB;
        ssm_gemm(0, 0, rows, n, i0 + rows, 1, L + (size_t)i0 * (size_t)q, q, X, ldx, beta,
                 Y + (size_t)i0 * (size_t)ldy, ldy);
    }
}

/* Y [q x n] (ld ldy) = beta Y + L^T X for lower-triangular L [q x q] (ld q), X [q x n] */
static void tril_t_mm(int q, int n, const real *L, const real *X, int ldx, real beta, real *Y,
                      int ldy)
{
    for (int j0 = 0; j0 < q; j0 += QB) {
        const int cols = q - j0 < QB ? q - j0 : QB;
        ssm_gemm(1, 0, cols, n, q - j0, 1, L + (size_t)j0 * (size_t)q + (size_t)j0, q,
                 X + (size_t)j0 * (size_t)ldx, ldx, beta, Y + (size_t)j0 * (size_t)ldy, ldy);
    }
}

/* ---- fast form: chunked --------------------------------------------------------------- */

static void chunked_forward(sb_graph *g, const ssd_ctx *c, const real *A, real *y, real *state)
{
    const int B = c->B, T = c->T, E = c->E, M = c->M, P = c->P, N = c->N, Q = c->Q;
    const int nc = (T + Q - 1) / Q;
    const real *x = c->x->data, *dt_in = c->dt_in->data, *Bm = c->Bm->data, *Cm = c->Cm->data;
    const size_t PN = (size_t)P * (size_t)N, QQ = (size_t)Q * (size_t)Q;
    /* one workspace per thread, taken from the arena before the parallel region */
    const int nth = omp_get_max_threads();
    const size_t n_ws = 2 * QQ + 2 * (size_t)Q * (size_t)N + 3 * (size_t)Q + (size_t)M * PN;
    real *ws_all = sb_graph_alloc(g, (size_t)nth * n_ws * sizeof(real));
#pragma omp parallel num_threads(nth) if ((size_t)B * (size_t)T * (size_t)E * (size_t)N > 65536)
    {
        real *ws = ws_all + (size_t)omp_get_thread_num() * n_ws;
        real *CB = ws, *G = CB + QQ, *Cs = G + QQ, *Bw = Cs + (size_t)Q * N;
        real *pre = Bw + (size_t)Q * N, *dtv = pre + Q, *s = dtv + Q, *F = s + Q;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            if (state != NULL)
                memcpy(F, state + (size_t)b * (size_t)M * PN, (size_t)M * PN * sizeof(real));
            else
                memset(F, 0, (size_t)M * PN * sizeof(real));
            for (int ch = 0; ch < nc; ch++) {
                const int t0 = ch * Q, q = T - t0 < Q ? T - t0 : Q;
                const size_t row0 = (size_t)b * (size_t)T + (size_t)t0;
                const real *Bc = Bm + row0 * (size_t)N, *Cc = Cm + row0 * (size_t)N;
                const int has_prev = ch > 0 || state != NULL;
                if (c->F0 != NULL)
                    memcpy(c->F0 + ((size_t)b * (size_t)nc + (size_t)ch) * (size_t)M * PN, F,
                           (size_t)M * PN * sizeof(real));
                tril_abt(q, N, Cc, N, Bc, N, CB);
                for (int m = 0; m < M; m++) {
                    real *Fm = F + (size_t)m * PN;
                    chunk_decay(dt_in, M, m, c->dt_bias != NULL ? c->dt_bias->data[m] : 0, A[m],
                                row0, q, pre, dtv, s);
                    for (int i = 0; i < q; i++) {
                        real *Gi = G + (size_t)i * (size_t)q;
                        const real *CBi = CB + (size_t)i * (size_t)q;
                        const real si = s[i];
#pragma omp simd
                        for (int j = 0; j <= i; j++)
                            Gi[j] = CBi[j] * ssm_exp(si - s[j]) * dtv[j];
                        for (int j = i + 1; j < q; j++)
                            Gi[j] = 0;
                    }
                    const real *xb = x + row0 * (size_t)E + (size_t)m * (size_t)P;
                    real *yb = y + row0 * (size_t)E + (size_t)m * (size_t)P;
                    tril_mm(q, P, G, xb, E, 0, yb, E);
                    if (has_prev) {
                        for (int i = 0; i < q; i++) {
                            const real es = ssm_exp(s[i]);
                            for (int n = 0; n < N; n++)
                                Cs[(size_t)i * N + (size_t)n] = Cc[(size_t)i * N + (size_t)n] * es;
                        }
                        ssm_gemm(0, 1, q, P, N, 1, Cs, N, Fm, N, 1, yb, E);
                    }
                    const real Dm = c->D != NULL ? c->D->data[m] : 0;
                    for (int i = 0; i < q; i++)
                        for (int p = 0; p < P; p++)
                            yb[(size_t)i * E + (size_t)p] += Dm * xb[(size_t)i * E + (size_t)p];
                    if (ch == nc - 1 && state == NULL)
                        continue; /* the final state is not needed */
                    const real sq = s[q - 1];
                    for (int j = 0; j < q; j++) {
                        const real wj = ssm_exp(sq - s[j]) * dtv[j];
                        for (int n = 0; n < N; n++)
                            Bw[(size_t)j * N + (size_t)n] = Bc[(size_t)j * N + (size_t)n] * wj;
                    }
                    ssm_gemm(1, 0, P, N, q, 1, xb, E, Bw, N, ssm_exp(sq), Fm, N);
                }
            }
            if (state != NULL)
                memcpy(state + (size_t)b * (size_t)M * PN, F, (size_t)M * PN * sizeof(real));
        }
    }
}

static void chunked_backward(sb_graph *g, void *ctx)
{
    ssd_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, E = c->E, M = c->M, P = c->P, N = c->N, Q = c->Q;
    const int nc = (T + Q - 1) / Q;
    const real *x = c->x->data, *dt_in = c->dt_in->data, *Bm = c->Bm->data, *Cm = c->Cm->data;
    const real *dy = c->y->grad;
    real *dx = grad_or_scratch(g, c->x, c->x->size);
    real *ddt = grad_or_scratch(g, c->dt_in, c->dt_in->size);
    real *dB = grad_or_scratch(g, c->Bm, c->Bm->size), *dC = grad_or_scratch(g, c->Cm, c->Cm->size);
    real *A = sb_graph_alloc(g, (size_t)M * sizeof(real));
    for (int m = 0; m < M; m++)
        A[m] = -exp(c->A_log->data[m]);
    real *dA_part = sb_graph_alloc(g, 3 * (size_t)B * (size_t)M * sizeof(real));
    real *dD_part = dA_part + (size_t)B * M, *dbias_part = dD_part + (size_t)B * M;
    memset(dA_part, 0, 3 * (size_t)B * (size_t)M * sizeof(real));
    const size_t PN = (size_t)P * (size_t)N, QQ = (size_t)Q * (size_t)Q;
    const int nth = omp_get_max_threads();
    const size_t n_ws = 5 * QQ + 2 * (size_t)Q * (size_t)N + (size_t)Q * (size_t)P * 2 +
                        6 * (size_t)Q + (size_t)M * PN + PN;
    real *ws_all = sb_graph_alloc(g, (size_t)nth * n_ws * sizeof(real));
#pragma omp parallel num_threads(nth) if ((size_t)B * (size_t)T * (size_t)E * (size_t)N > 16384)
    {
        real *ws = ws_all + (size_t)omp_get_thread_num() * n_ws;
        real *CB = ws, *Psi = CB + QQ, *Gam = Psi + QQ, *Gm = Gam + QQ, *dCB = Gm + QQ;
        real *Cs = dCB + QQ, *tmpN = Cs + (size_t)Q * N;
        real *dxbar = tmpN + (size_t)Q * N, *tmpP = dxbar + (size_t)Q * P;
        real *pre = tmpP + (size_t)Q * P, *dtv = pre + Q, *s = dtv + Q, *ds = s + Q;
        real *da = ds + Q, *colacc = da + Q, *dF = colacc + Q, *dFprev = dF + (size_t)M * PN;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            memset(dF, 0, (size_t)M * PN * sizeof(real));
            for (int ch = nc - 1; ch >= 0; ch--) {
                const int t0 = ch * Q, q = T - t0 < Q ? T - t0 : Q;
                const size_t row0 = (size_t)b * (size_t)T + (size_t)t0;
                const real *Bc = Bm + row0 * (size_t)N, *Cc = Cm + row0 * (size_t)N;
                real *dBc = dB + row0 * (size_t)N, *dCc = dC + row0 * (size_t)N;
                tril_abt(q, N, Cc, N, Bc, N, CB);
                memset(dCB, 0, (size_t)q * (size_t)q * sizeof(real));
                for (int m = 0; m < M; m++) {
                    const real Am = A[m];
                    const real *Fprev =
                        c->F0 +
                        (((size_t)b * (size_t)nc + (size_t)ch) * (size_t)M + (size_t)m) * PN;
                    real *dFc = dF + (size_t)m * PN;
                    chunk_decay(dt_in, M, m, c->dt_bias != NULL ? c->dt_bias->data[m] : 0, Am, row0,
                                q, pre, dtv, s);
                    for (int i = 0; i < q; i++) {
                        real *Psii = Psi + (size_t)i * q, *Gami = Gam + (size_t)i * q;
                        const real *CBi = CB + (size_t)i * q;
                        const real si = s[i];
#pragma omp simd
                        for (int j = 0; j <= i; j++) {
                            Psii[j] = ssm_exp(si - s[j]);
                            Gami[j] = CBi[j] * Psii[j];
                        }
                        for (int j = i + 1; j < q; j++)
                            Gami[j] = 0;
                    }
                    const real *xb = x + row0 * (size_t)E + (size_t)m * (size_t)P;
                    const real *dyb = dy + row0 * (size_t)E + (size_t)m * (size_t)P;
                    real *dxb = dx + row0 * (size_t)E + (size_t)m * (size_t)P;
                    /* D skip */
                    const real Dm = c->D != NULL ? c->D->data[m] : 0;
                    real dD_lane[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                    for (int i = 0; i < q; i++)
                        for (int p0 = 0; p0 < P; p0 += SSM_LANES) {
                            const int lanes = ssm_lanes_width(p0, P);
#pragma omp simd
                            for (int k = 0; k < lanes; k++) {
                                const size_t ip = (size_t)i * E + (size_t)(p0 + k);
                                dD_lane[k] += dyb[ip] * xb[ip];
                                dxb[ip] += Dm * dyb[ip];
                            }
                        }
                    dD_part[(size_t)b * M + (size_t)m] += ssm_lanes_sum(dD_lane);
                    /* intra-chunk: Gm = dy x^T, dxbar = Gam^T dy */
                    tril_abt(q, P, dyb, E, xb, E, Gm);
                    tril_t_mm(q, P, Gam, dyb, E, 0, dxbar, P);
                    /* da_k = sum_{i>=k} sum_{j<k} V_ij, rows from the last: colacc[j] holds
                     * sum_{i>=k} V_ij, so every term is added once (no cancellation) */
                    for (int k = 0; k < q; k++)
                        ds[k] = colacc[k] = 0;
                    for (int k = q - 1; k >= 0; k--) {
                        const real *Gmk = Gm + (size_t)k * q, *Gamk = Gam + (size_t)k * q;
                        const real *Psik = Psi + (size_t)k * q;
                        real *dCBk = dCB + (size_t)k * q;
                        real part[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                        for (int j0 = 0; j0 < k; j0 += SSM_LANES) {
                            const int lanes = ssm_lanes_width(j0, k);
#pragma omp simd
                            for (int l = 0; l < lanes; l++) {
                                const int j = j0 + l;
                                const real dG = dtv[j] * Gmk[j]; /* dGam_kj */
                                colacc[j] += dG * Gamk[j];
                                part[l] += colacc[j];
                                dCBk[j] += dG * Psik[j];
                            }
                        }
                        dCBk[k] += dtv[k] * Gmk[k]; /* Psi_kk = 1 */
                        da[k] = ssm_lanes_sum(part);
                    }
                    /* the carried state's contribution to y (zero in the first chunk) */
                    if (ch > 0) {
                        for (int i = 0; i < q; i++) {
                            const real es = ssm_exp(s[i]);
                            for (int n = 0; n < N; n++)
                                Cs[(size_t)i * N + (size_t)n] = Cc[(size_t)i * N + (size_t)n] * es;
                        }
                        ssm_gemm(1, 0, P, N, q, 1, dyb, E, Cs, N, 0, dFprev, N);
                        ssm_gemm(0, 0, q, N, P, 1, dyb, E, Fprev, N, 0, tmpN, N);
                        for (int i = 0; i < q; i++) {
                            const real es = ssm_exp(s[i]);
                            real part[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                            for (int n0 = 0; n0 < N; n0 += SSM_LANES) {
                                const int lanes = ssm_lanes_width(n0, N);
#pragma omp simd
                                for (int k = 0; k < lanes; k++) {
                                    const size_t in = (size_t)i * N + (size_t)(n0 + k);
                                    const real v = tmpN[in];
                                    dCc[in] += es * v;
                                    part[k] += v * Cc[in];
                                }
                            }
                            ds[i] += es * ssm_lanes_sum(part);
                        }
                    }
                    /* state passing and the chunk's own state (dF = 0 after the last chunk) */
                    if (ch < nc - 1) {
                        const real sq = s[q - 1], eq = ssm_exp(sq);
                        if (ch > 0) {
                            real part[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                            for (size_t k0 = 0; k0 < PN; k0 += SSM_LANES) {
                                const int lanes = PN - k0 < SSM_LANES ? (int)(PN - k0) : SSM_LANES;
#pragma omp simd
                                for (int l = 0; l < lanes; l++) {
                                    const size_t k = k0 + (size_t)l;
                                    dFprev[k] += eq * dFc[k];
                                    part[l] += dFc[k] * Fprev[k];
                                }
                            }
                            ds[q - 1] += eq * ssm_lanes_sum(part);
                        }
                        ssm_gemm(0, 1, q, P, N, 1, Bc, N, dFc, N, 0, tmpP, P);
                        ssm_gemm(0, 0, q, N, P, 1, xb, E, dFc, N, 0, tmpN, N);
                        real prefix = 0; /* sum_{j<k} omega_j */
                        for (int j = 0; j < q; j++) {
                            da[j] += prefix;
                            const real wj = ssm_exp(sq - s[j]), wdt = wj * dtv[j];
                            real part[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                            for (int p0 = 0; p0 < P; p0 += SSM_LANES) {
                                const int lanes = ssm_lanes_width(p0, P);
#pragma omp simd
                                for (int k = 0; k < lanes; k++) {
                                    const int p = p0 + k;
                                    dxbar[(size_t)j * P + (size_t)p] +=
                                        wj * tmpP[(size_t)j * P + (size_t)p];
                                    part[k] += xb[(size_t)j * E + (size_t)p] *
                                               tmpP[(size_t)j * P + (size_t)p];
                                }
                            }
                            const real dot = ssm_lanes_sum(part);
#pragma omp simd
                            for (int n = 0; n < N; n++)
                                dBc[(size_t)j * N + (size_t)n] +=
                                    wdt * tmpN[(size_t)j * N + (size_t)n];
                            prefix += wdt * dot;
                        }
                    }
                    /* da_k += sum_{i>=k} ds_i, then through dt and softplus */
                    real suffix = 0, dA_acc = 0, dbias_acc = 0;
                    for (int k = q - 1; k >= 0; k--) {
                        suffix += ds[k];
                        const real dak = da[k] + suffix;
                        real part[SSM_LANES] = {0}; /* fixed lanes (ssm_math.h) */
                        for (int p0 = 0; p0 < P; p0 += SSM_LANES) {
                            const int lanes = ssm_lanes_width(p0, P);
#pragma omp simd
                            for (int l = 0; l < lanes; l++) {
                                const int p = p0 + l;
                                const real v = dxbar[(size_t)k * P + (size_t)p];
                                part[l] += v * xb[(size_t)k * E + (size_t)p];
                                dxb[(size_t)k * E + (size_t)p] += dtv[k] * v;
                            }
                        }
                        const real dot = ssm_lanes_sum(part);
                        dA_acc += dak * dtv[k];
                        const real dpre = (dak * Am + dot) * ssm_softplus_grad(pre[k]);
                        ddt[(row0 + (size_t)k) * (size_t)M + (size_t)m] += dpre;
                        dbias_acc += dpre;
                    }
                    dA_part[(size_t)b * M + (size_t)m] += dA_acc * Am; /* dA_log = dA A */
                    dbias_part[(size_t)b * M + (size_t)m] += dbias_acc;
                    if (ch > 0)
                        memcpy(dFc, dFprev, PN * sizeof(real));
                }
                tril_mm(q, N, dCB, Bc, N, 1, dCc, N);
                tril_t_mm(q, N, dCB, Cc, N, 1, dBc, N);
            }
        }
    }
    if (c->A_log->requires_grad)
        sum_rows_into(dA_part, B, M, sb_tensor_grad(g, c->A_log));
    if (c->D != NULL && c->D->requires_grad)
        sum_rows_into(dD_part, B, M, sb_tensor_grad(g, c->D));
    if (c->dt_bias != NULL && c->dt_bias->requires_grad)
        sum_rows_into(dbias_part, B, M, sb_tensor_grad(g, c->dt_bias));
}

static ssd_ctx make_ctx(sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                        sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, sb_tensor *y, int Q)
{
    ssd_ctx c = {.x = x,
                 .dt_in = dt_in,
                 .dt_bias = dt_bias,
                 .A_log = A_log,
                 .Bm = Bm,
                 .Cm = Cm,
                 .D = D,
                 .y = y,
                 .B = x->shape[0],
                 .T = x->shape[1],
                 .E = x->shape[2],
                 .M = (int)A_log->size,
                 .N = Bm->shape[2],
                 .Q = Q};
    c.P = c.E / c.M;
    return c;
}

sb_tensor *sb_ssd(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                  sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, int chunk, real *state)
{
    check_shapes(x, dt_in, dt_bias, A_log, Bm, Cm, D);
    SB_ASSERT(chunk >= 1);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    y->requires_grad = any_grad(x, dt_in, dt_bias, A_log, Bm, Cm, D);
    ssd_ctx *rec = y->requires_grad ? sb_graph_record(g, chunked_backward, sizeof *rec) : NULL;
    SB_ASSERT(rec == NULL || state == NULL); /* the backward assumes a zero initial state */
    const int T = x->shape[1];
    ssd_ctx c = make_ctx(x, dt_in, dt_bias, A_log, Bm, Cm, D, y, chunk < T ? chunk : T);
    if (T == 0)
        return y;
    real *A = sb_graph_alloc(g, (size_t)c.M * sizeof(real));
    for (int m = 0; m < c.M; m++)
        A[m] = -exp(A_log->data[m]);
    if (rec != NULL) {
        const int nc = (T + c.Q - 1) / c.Q;
        c.F0 =
            sb_graph_alloc(g, (size_t)c.B * (size_t)nc * (size_t)c.E * (size_t)c.N * sizeof(real));
    }
    chunked_forward(g, &c, A, y->data, state);
    if (rec != NULL)
        *rec = c;
    return y;
}

/* ---- reference form: the recurrence, every state kept --------------------------------------- */

static void recurrent_backward(sb_graph *g, void *ctx)
{
    ssd_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, E = c->E, M = c->M, P = c->P, N = c->N;
    const real *x = c->x->data, *dt_in = c->dt_in->data, *Bm = c->Bm->data, *Cm = c->Cm->data;
    const real *dy = c->y->grad;
    real *dx = grad_or_scratch(g, c->x, c->x->size);
    real *ddt = grad_or_scratch(g, c->dt_in, c->dt_in->size);
    real *dB = grad_or_scratch(g, c->Bm, c->Bm->size), *dC = grad_or_scratch(g, c->Cm, c->Cm->size);
    real *dAlog = grad_or_scratch(g, c->A_log, (size_t)M),
         *dD = grad_or_scratch(g, c->D, (size_t)M);
    real *dbias = grad_or_scratch(g, c->dt_bias, (size_t)M);
    real *lam = sb_graph_alloc(g, (size_t)P * (size_t)N * sizeof(real));
    for (int b = 0; b < B; b++)
        for (int m = 0; m < M; m++) {
            const real A = -exp(c->A_log->data[m]);
            const real bias = c->dt_bias != NULL ? c->dt_bias->data[m] : 0;
            const real Dm = c->D != NULL ? c->D->data[m] : 0;
            memset(lam, 0, (size_t)P * (size_t)N * sizeof(real));
            real dA = 0;
            for (int t = T - 1; t >= 0; t--) {
                const size_t row = (size_t)b * T + (size_t)t;
                const real *xt = x + row * E + (size_t)m * P, *dyt = dy + row * E + (size_t)m * P;
                const real *Bt = Bm + row * N, *Ct = Cm + row * N;
                real *dxt = dx + row * E + (size_t)m * P;
                const real *S = c->hs + (((size_t)b * M + (size_t)m) * T + (size_t)t) * P * N;
                const real pre = dt_in[row * M + (size_t)m] + bias, dt = ssm_softplus(pre);
                const real a = exp(dt * A);
                real ga = 0, dxdot = 0;
                for (int p = 0; p < P; p++) {
                    dD[m] += dyt[p] * xt[p];
                    dxt[p] += Dm * dyt[p];
                    real lb = 0;
                    for (int n = 0; n < N; n++) {
                        real *l = &lam[(size_t)p * N + (size_t)n];
                        *l += dyt[p] * Ct[n];
                        dC[row * N + (size_t)n] += S[(size_t)p * N + (size_t)n] * dyt[p];
                        if (t > 0)
                            ga += *l * (S - (size_t)P * N)[(size_t)p * N + (size_t)n];
                        lb += *l * Bt[n];
                        dB[row * N + (size_t)n] += dt * *l * xt[p];
                    }
                    dxt[p] += dt * lb;
                    dxdot += lb * xt[p];
                }
                const real ddt_t = ga * a * A + dxdot;
                dA += ga * a * dt;
                const real dpre = ddt_t * ssm_softplus_grad(pre);
                ddt[row * M + (size_t)m] += dpre;
                dbias[m] += dpre;
                for (size_t k = 0; k < (size_t)P * N; k++)
                    lam[k] *= a;
            }
            dAlog[m] += dA * A;
        }
}

sb_tensor *sb_ssd_ref(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                      sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, real *state)
{
    check_shapes(x, dt_in, dt_bias, A_log, Bm, Cm, D);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    y->requires_grad = any_grad(x, dt_in, dt_bias, A_log, Bm, Cm, D);
    ssd_ctx *rec = y->requires_grad ? sb_graph_record(g, recurrent_backward, sizeof *rec) : NULL;
    SB_ASSERT(rec == NULL || state == NULL);
    ssd_ctx c = make_ctx(x, dt_in, dt_bias, A_log, Bm, Cm, D, y, 1);
    const int B = c.B, T = c.T, E = c.E, M = c.M, P = c.P, N = c.N;
    const size_t PN = (size_t)P * (size_t)N;
    if (rec != NULL)
        c.hs = sb_graph_alloc(g, (size_t)B * M * (size_t)T * PN * sizeof(real));
    real *S = sb_graph_alloc(g, PN * sizeof(real));
    for (int b = 0; b < B; b++)
        for (int m = 0; m < M; m++) {
            real *st = state != NULL ? state + ((size_t)b * M + (size_t)m) * PN : NULL;
            for (size_t k = 0; k < PN; k++)
                S[k] = st != NULL ? st[k] : 0;
            const real A = -exp(A_log->data[m]);
            const real bias = dt_bias != NULL ? dt_bias->data[m] : 0;
            const real Dm = D != NULL ? D->data[m] : 0;
            for (int t = 0; t < T; t++) {
                const size_t row = (size_t)b * T + (size_t)t;
                const real dt = ssm_softplus(dt_in->data[row * M + (size_t)m] + bias);
                const real a = exp(dt * A);
                const real *xt = x->data + row * E + (size_t)m * P;
                const real *Bt = Bm->data + row * N, *Ct = Cm->data + row * N;
                real *yt = y->data + row * E + (size_t)m * P;
                for (int p = 0; p < P; p++) {
                    real acc = 0;
                    for (int n = 0; n < N; n++) {
                        real *Sv = &S[(size_t)p * N + (size_t)n];
                        *Sv = a * *Sv + dt * xt[p] * Bt[n];
                        acc += *Sv * Ct[n];
                    }
                    yt[p] = acc + Dm * xt[p];
                }
                if (c.hs != NULL)
                    memcpy(c.hs + (((size_t)b * M + (size_t)m) * T + (size_t)t) * PN, S,
                           PN * sizeof(real));
            }
            if (st != NULL)
                memcpy(st, S, PN * sizeof(real));
        }
    if (rec != NULL)
        *rec = c;
    return y;
}

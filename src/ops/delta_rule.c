/* delta_rule.c - kernel K2, the (gated) delta rule with n Householder steps per token (see
 * ops_fla.h; spec docs/models/linear_attention.md; derivations
 * docs/models/linear_attention.md).
 *
 * A token's n steps are run as n consecutive positions of one interleaved sequence
 * (position p = t n + j): the token's log-decay g_t sits at j = 0 (0 elsewhere) and its query
 * at j = n - 1 (no readout elsewhere). Per position, with alpha = exp(g):
 *   S' = alpha S,  u = beta (v - S'^T k),  S = S' + k u^T;   o = s S^T q at query positions.
 *
 * Chunked form (WY/UT transform; a chunk is C tokens = np = C n positions entering with
 * state S0; gamma = inclusive cumsum of g over the chunk's positions, Gam = exp(gamma),
 * E_ij = exp(gamma_i - gamma_j) for j <= i):
 *   A    = strictly_lower(diag(beta) (K K^T) ⊙ E)
 *   Tm   = (I + A)^-1                     (unit lower triangular, row by row)
 *   W    = Tm diag(beta Gam) K,   U = Tm diag(beta) V
 *   Vn   = U - W S0                       (the u of every position)
 *   O_i  = s (Gam_i q_i S0 + sum_{j <= i} (q_i . k_j) E_ij Vn_j)     at query positions i
 *   S    = Gam_last S0 + (diag(E_last,.) K)^T Vn
 * E is formed as Gam_i / Gam_j when the chunk's total decay is below exp(-FACTOR_RANGE),
 * else exponent by exponent.
 *
 * Forming Tm (np^3 / 6 multiply-adds, small at np <= 64) turns W, U and their gradients into
 * products of small matrices (sb_fla_gemm) instead of row-by-row substitutions.
 *
 * Backward (spec 3.4 without the dgamma lines), chunks in reverse carrying dS; with
 * dBk = Tm^T dW and dBv = Tm^T dU the inverse's gradient is
 * dA = -strictly_lower(dBv U^T + dBk W^T). The log-decay gradient comes from the state-free
 * identity (S_0 = 0): dg_t = revcumsum_t(q_t . dq_t - sum_j v_{t,j} . dv_{t,j}).
 * The forward keeps the state entering each chunk; everything else of a chunk (E, A, Tm, W,
 * U, Vn) is recomputed in the backward from the inputs and that state.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/ops_fla.h"

#define FACTOR_RANGE ((real)30)

typedef struct dr_dims {
    int B, T, H, K, V;
    int n;     /* Householder steps per token */
    int gated; /* a log-decay per token and head */
    int C;     /* chunk length in tokens; C n positions */
    real scale;
} dr_dims;

/* One (batch, head) pair: token rows of q, o (and the gate), position rows of k, v, beta. */
typedef struct dr_pair {
    real *q, *k, *v, *beta, *g, *o;
    size_t ldq, ldv, ldh; /* H K, H V, H */
} dr_pair;

static dr_pair dr_pair_at(const dr_dims *d, real *q, real *k, real *v, real *beta, real *gate,
                          real *o, int bh)
{
    const int b = bh / d->H, h = bh % d->H;
    const size_t tok = (size_t)b * (size_t)d->T * (size_t)d->H + (size_t)h;
    const size_t pos = (size_t)b * (size_t)d->T * (size_t)d->n * (size_t)d->H + (size_t)h;
    dr_pair p;
    p.ldq = (size_t)d->H * (size_t)d->K;
    p.ldv = (size_t)d->H * (size_t)d->V;
    p.ldh = (size_t)d->H;
    p.q = q + tok * (size_t)d->K;
    p.o = o + tok * (size_t)d->V;
    p.g = gate != NULL ? gate + tok : NULL;
    p.k = k + pos * (size_t)d->K;
    p.v = v + pos * (size_t)d->V;
    p.beta = beta + pos;
    return p;
}

static void dr_check(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                     const sb_tensor *beta, const sb_tensor *gate, dr_dims *d)
{
    SB_ASSERT(q->ndim == 4 && k->ndim == 4 && v->ndim == 4);
    d->B = q->shape[0], d->T = q->shape[1], d->H = q->shape[2], d->K = q->shape[3];
    d->V = v->shape[3];
    SB_ASSERT(k->shape[0] == d->B && k->shape[1] == d->T && k->shape[3] == d->K);
    SB_ASSERT(k->shape[2] % d->H == 0 && k->shape[2] >= d->H);
    d->n = k->shape[2] / d->H;
    SB_ASSERT(v->shape[0] == d->B && v->shape[1] == d->T && v->shape[2] == k->shape[2]);
    SB_ASSERT(beta->size == (size_t)d->B * (size_t)d->T * (size_t)d->n * (size_t)d->H);
    d->gated = gate != NULL;
    SB_ASSERT(gate == NULL || gate->size == (size_t)d->B * (size_t)d->T * (size_t)d->H);
}

static int dr_needs_grad(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                         const sb_tensor *beta, const sb_tensor *gate)
{
    return q->requires_grad || k->requires_grad || v->requires_grad || beta->requires_grad ||
           (gate != NULL && gate->requires_grad);
}

/* ---- step-by-step reference (spec 3, 3.1) ------------------------------------------------- */

typedef struct dr_ref_ctx {
    sb_tensor *q, *k, *v, *beta, *gate, *o;
    dr_dims d;
    real *states; /* [B*H][T n][K][V]: S after each position */
} dr_ref_ctx;

static void dr_ref_forward_pair(const dr_dims *d, dr_pair p, real *S, real *u, real *keep)
{
    const int K = d->K, V = d->V, n = d->n;
    const size_t KV = (size_t)K * (size_t)V;
    for (int t = 0; t < d->T; t++) {
        if (d->gated) {
            real a = exp(p.g[(size_t)t * p.ldh]);
            for (size_t i = 0; i < KV; i++)
                S[i] *= a;
        }
        for (int j = 0; j < n; j++) {
            const size_t pos = (size_t)t * (size_t)n + (size_t)j;
            const real *k = p.k + pos * p.ldq, *v = p.v + pos * p.ldv;
            const real b = p.beta[pos * p.ldh];
            /* u = beta (v - S^T k) */
            for (int x = 0; x < V; x++)
                u[x] = v[x];
            for (int c = 0; c < K; c++)
                fla_axpy(V, -k[c], S + (size_t)c * (size_t)V, u);
            for (int x = 0; x < V; x++)
                u[x] *= b;
            for (int c = 0; c < K; c++)
                fla_axpy(V, k[c], u, S + (size_t)c * (size_t)V);
            if (keep != NULL)
                memcpy(keep + pos * KV, S, KV * sizeof *S);
        }
        real *o = p.o + (size_t)t * p.ldv;
        const real *q = p.q + (size_t)t * p.ldq;
        for (int x = 0; x < V; x++)
            o[x] = 0;
        for (int c = 0; c < K; c++)
            fla_axpy(V, d->scale * q[c], S + (size_t)c * (size_t)V, o);
    }
}

static void dr_ref_backward(sb_graph *gr, void *ctx)
{
    dr_ref_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const dr_dims *d = &c->d;
    const int K = d->K, V = d->V, n = d->n, T = d->T;
    const size_t KV = (size_t)K * (size_t)V;
    real *dq = sb_tensor_grad(gr, c->q), *dk = sb_tensor_grad(gr, c->k);
    real *dv = sb_tensor_grad(gr, c->v), *db = sb_tensor_grad(gr, c->beta);
    real *dg = c->gate != NULL ? sb_tensor_grad(gr, c->gate) : NULL;
    const size_t per_thread = 2 * KV + 3 * (size_t)V;
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *dS = scratch + (size_t)omp_get_thread_num() * per_thread;
        real *Sp = dS + KV, *r = Sp + KV, *du = r + V;
        dr_pair p = dr_pair_at(d, c->q->data, c->k->data, c->v->data, c->beta->data,
                               c->gate != NULL ? c->gate->data : NULL, c->o->grad, bh);
        dr_pair gp = dr_pair_at(d, dq, dk, dv, db, dg, c->o->grad, bh);
        const real *states = c->states + (size_t)bh * (size_t)T * (size_t)n * KV;
        memset(dS, 0, KV * sizeof *dS);
        for (int t = T - 1; t >= 0; t--) {
            const real *q = p.q + (size_t)t * p.ldq, *dout = p.o + (size_t)t * p.ldv;
            const real *St = states + ((size_t)t * (size_t)n + (size_t)(n - 1)) * KV;
            real *gq = gp.q + (size_t)t * p.ldq;
            for (int ch = 0; ch < K; ch++) {
                fla_axpy(V, d->scale * q[ch], dout, dS + (size_t)ch * (size_t)V);
                gq[ch] += d->scale * fla_dot(V, St + (size_t)ch * (size_t)V, dout);
            }
            for (int j = n - 1; j >= 0; j--) {
                const size_t pos = (size_t)t * (size_t)n + (size_t)j;
                const real *k = p.k + pos * p.ldq, *v = p.v + pos * p.ldv;
                const real b = p.beta[pos * p.ldh];
                /* S' = alpha S_prev (alpha only at j = 0) */
                real a = (j == 0 && d->gated) ? exp(p.g[(size_t)t * p.ldh]) : 1;
                if (pos > 0)
                    for (size_t i = 0; i < KV; i++)
                        Sp[i] = a * states[(pos - 1) * KV + i];
                else
                    memset(Sp, 0, KV * sizeof *Sp);
                for (int x = 0; x < V; x++)
                    r[x] = v[x], du[x] = 0;
                for (int ch = 0; ch < K; ch++) {
                    fla_axpy(V, -k[ch], Sp + (size_t)ch * (size_t)V, r);
                    fla_axpy(V, k[ch], dS + (size_t)ch * (size_t)V, du); /* du = dS^T k */
                }
                real *gk = gp.k + pos * p.ldq, *gv = gp.v + pos * p.ldv;
                for (int ch = 0; ch < K; ch++) /* dk = dS u - beta S' du, u = beta r */
                    gk[ch] += b * fla_dot(V, dS + (size_t)ch * (size_t)V, r) -
                              b * fla_dot(V, Sp + (size_t)ch * (size_t)V, du);
                fla_axpy(V, b, du, gv);
                gp.beta[pos * p.ldh] += fla_dot(V, du, r);
                for (int ch = 0; ch < K; ch++) /* dS' = dS - beta k du^T */
                    fla_axpy(V, -b * k[ch], du, dS + (size_t)ch * (size_t)V);
                if (j == 0 && d->gated) {
                    real s = 0;
                    for (size_t i = 0; i < KV; i++)
                        s += dS[i] * Sp[i];
                    gp.g[(size_t)t * p.ldh] += s;
                    for (size_t i = 0; i < KV; i++)
                        dS[i] *= a;
                }
            }
        }
    }
}

sb_tensor *sb_delta_rule_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                             sb_tensor *gate, real scale, real *state)
{
    dr_dims d;
    dr_check(q, k, v, beta, gate, &d);
    d.scale = scale;
    d.C = 0;
    SB_ASSERT(state == NULL || !g->record);
    int oshape[4] = {d.B, d.T, d.H, d.V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && dr_needs_grad(q, k, v, beta, gate);
    dr_ref_ctx *c = o->requires_grad ? sb_graph_record(g, dr_ref_backward, sizeof *c) : NULL;
    const size_t KV = (size_t)d.K * (size_t)d.V;
    real *states = NULL;
    if (c != NULL) {
        states = sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)d.T * (size_t)d.n * KV *
                                       sizeof(real));
        c->q = q, c->k = k, c->v = v, c->beta = beta, c->gate = gate, c->o = o, c->d = d;
        c->states = states;
    }
    const size_t per_thread = KV + (size_t)d.V;
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        real *mine = scratch + (size_t)omp_get_thread_num() * per_thread;
        dr_pair p = dr_pair_at(&d, q->data, k->data, v->data, beta->data,
                               gate != NULL ? gate->data : NULL, o->data, bh);
        real *S = state != NULL ? state + (size_t)bh * KV : mine;
        if (state == NULL)
            memset(S, 0, KV * sizeof *S);
        dr_ref_forward_pair(&d, p, S, mine + KV,
                            states != NULL ? states + (size_t)bh * (size_t)d.T * (size_t)d.n * KV
                                           : NULL);
    }
    return o;
}

/* ---- chunked form (spec 3.3, 3.4) --------------------------------------------------------- */

/* Per-thread scratch of one chunk (Cp = C n positions, C tokens). */
typedef struct dr_work {
    /* forward quantities (recomputed in the backward) */
    real *gamma, *Gam;    /* [Cp] */
    real *E, *G, *A, *Tm; /* [Cp][Cp]: decays, Gram K K^T, A, (I + A)^-1 (lower) */
    real *KT;             /* [K][Cp] */
    real *Bk, *W, *Khat;  /* [Cp][K] */
    real *Bv, *U, *Vn;    /* [Cp][V] */
    real *Qg;             /* [C][K]: q Gam at the query position */
    real *Pm;             /* [C][Cp]: (q . k) E on the causal triangle, 0 beyond */
    real *S;              /* [K][V]: the running state of the forward */
    /* backward */
    real *dS0, *S0T, *dST;    /* [K][V], [V][K], [V][K] */
    real *dVn, *dBv, *dv;     /* [Cp][V] */
    real *tk, *dk, *dW, *dBk; /* [Cp][K] */
    real *VnT, *UT;           /* [V][Cp] */
    real *WT;                 /* [K][Cp] */
    real *M, *D;              /* [C][Cp], [Cp][Cp] */
    real *dq;                 /* [C][K] */
    real *dbeta;              /* [Cp] */
} dr_work;

#define R16(x) (((x) + 15) / 16 * 16)

/* Lays the scratch out from base (base NULL: only counts); returns the number of reals. */
static size_t dr_work_layout(const dr_dims *d, real *base, dr_work *w)
{
    const size_t C = (size_t)d->C, Cp = C * (size_t)d->n, K = (size_t)d->K, V = (size_t)d->V;
    size_t used = 0;
#define TAKE(field, n) (w->field = base != NULL ? base + used : NULL, used += R16(n))
    TAKE(gamma, Cp), TAKE(Gam, Cp);
    TAKE(E, Cp * Cp), TAKE(G, Cp * Cp), TAKE(A, Cp * Cp), TAKE(Tm, Cp * Cp);
    TAKE(KT, K * Cp), TAKE(Bk, Cp * K), TAKE(W, Cp * K), TAKE(Khat, Cp * K);
    TAKE(Bv, Cp * V), TAKE(U, Cp * V), TAKE(Vn, Cp * V);
    TAKE(Qg, C * K), TAKE(Pm, C * Cp), TAKE(S, K * V);
    TAKE(dS0, K * V), TAKE(S0T, V * K), TAKE(dST, V * K);
    TAKE(dVn, Cp * V), TAKE(dBv, Cp * V), TAKE(dv, Cp * V);
    TAKE(tk, Cp * K), TAKE(dk, Cp * K), TAKE(dW, Cp * K), TAKE(dBk, Cp * K);
    TAKE(VnT, V * Cp), TAKE(UT, V * Cp), TAKE(WT, K * Cp);
    TAKE(M, C * Cp), TAKE(D, Cp * Cp), TAKE(dq, C * K), TAKE(dbeta, Cp);
#undef TAKE
    return used;
}

/* Everything of one chunk (nt tokens from token t0) that depends on the inputs and the
 * entering state S0: decays, E, Gram matrix, A, (I + A)^-1, W, U, Vn, the queries' Qg and
 * Pm, and Khat = diag(E_last,.) K. */
static void dr_chunk_prepare(const dr_dims *d, const dr_pair *p, int t0, int nt, const real *S0,
                             dr_work *w)
{
    const int K = d->K, V = d->V, n = d->n, np = nt * n;
    const size_t Cp = (size_t)d->C * (size_t)n;
    const size_t p0 = (size_t)t0 * (size_t)n;
    const real *k = p->k + p0 * p->ldq, *v = p->v + p0 * p->ldv, *beta = p->beta + p0 * p->ldh;
    const real *q = p->q + (size_t)t0 * p->ldq;
    /* decays over the positions: the token's gate at its first step */
    real run = 0;
    for (int i = 0; i < np; i++) {
        if (d->gated && i % n == 0)
            run += p->g[(size_t)(t0 + i / n) * p->ldh];
        w->gamma[i] = run;
    }
    const int fast = -w->gamma[np - 1] <= FACTOR_RANGE;
    for (int i = 0; i < np; i++)
        w->Gam[i] = fla_exp(w->gamma[i]);
    for (int i = 0; i < np; i++) {
        real *e = w->E + (size_t)i * Cp;
        if (fast) {
            const real gi = w->Gam[i];
            for (int j = 0; j <= i; j++)
                e[j] = gi / w->Gam[j];
        } else {
            const real gi = w->gamma[i];
            for (int j = 0; j <= i; j++)
                e[j] = fla_exp(gi - w->gamma[j]);
        }
    }
    /* Gram matrix (lower part), A = strictly_lower(diag(beta) G ⊙ E) */
    fla_transpose(np, K, k, p->ldq, w->KT, Cp);
    sb_fla_gemm(0, np, np, K, 1, k, p->ldq, w->KT, Cp, w->G, Cp, 0, 0, 1);
    for (int i = 0; i < np; i++) {
        const real b = beta[(size_t)i * p->ldh];
        const real *g = w->G + (size_t)i * Cp, *e = w->E + (size_t)i * Cp;
        real *a = w->A + (size_t)i * Cp;
        for (int j = 0; j < i; j++)
            a[j] = b * g[j] * e[j];
    }
    /* Tm = (I + A)^-1, unit lower triangular, by rows: Tm_i = e_i - sum_{j<i} A_ij Tm_j */
    for (int i = 0; i < np; i++) {
        real *t = w->Tm + (size_t)i * Cp;
        memset(t, 0, (size_t)np * sizeof *t);
        const real *a = w->A + (size_t)i * Cp;
        for (int j = 0; j < i; j++)
            fla_axpy(j + 1, -a[j], w->Tm + (size_t)j * Cp, t);
        t[i] = 1;
    }
    /* W = Tm diag(beta Gam) K, U = Tm diag(beta) V */
    for (int i = 0; i < np; i++) {
        const real b = beta[(size_t)i * p->ldh], bg = b * w->Gam[i];
        const real *ki = k + (size_t)i * p->ldq, *vi = v + (size_t)i * p->ldv;
        real *bk = w->Bk + (size_t)i * (size_t)K, *bv = w->Bv + (size_t)i * (size_t)V;
        for (int c = 0; c < K; c++)
            bk[c] = bg * ki[c];
        for (int x = 0; x < V; x++)
            bv[x] = b * vi[x];
    }
    sb_fla_gemm(0, np, K, np, 1, w->Tm, Cp, w->Bk, (size_t)K, w->W, (size_t)K, 0, 1, 0);
    sb_fla_gemm(0, np, V, np, 1, w->Tm, Cp, w->Bv, (size_t)V, w->U, (size_t)V, 0, 1, 0);
    /* Vn = U - W S0 */
    memcpy(w->Vn, w->U, (size_t)np * (size_t)V * sizeof(real));
    sb_fla_gemm(0, np, V, K, -1, w->W, (size_t)K, S0, (size_t)V, w->Vn, (size_t)V, 1, 0, 0);
    /* queries (token i at position pi = i n + n - 1): Qg_i = Gam q_i,
     * Pm_ij = (q_i . k_j) E_{pi, j} for j <= pi, 0 beyond */
    sb_fla_gemm(0, nt, np, K, 1, q, p->ldq, w->KT, Cp, w->Pm, Cp, 0, 0, n);
    for (int i = 0; i < nt; i++) {
        const int pi = i * n + n - 1;
        const real *qi = q + (size_t)i * p->ldq, *e = w->E + (size_t)pi * Cp;
        real *qg = w->Qg + (size_t)i * (size_t)K, *pm = w->Pm + (size_t)i * Cp;
        for (int c = 0; c < K; c++)
            qg[c] = qi[c] * w->Gam[pi];
        for (int j = 0; j <= pi; j++)
            pm[j] *= e[j];
        for (int j = pi + 1; j < np; j++)
            pm[j] = 0;
    }
    /* Khat_j = exp(gamma_last - gamma_j) k_j */
    const real *elast = w->E + (size_t)(np - 1) * Cp;
    for (int j = 0; j < np; j++) {
        const real *kj = k + (size_t)j * p->ldq;
        real *kh = w->Khat + (size_t)j * (size_t)K;
        for (int c = 0; c < K; c++)
            kh[c] = elast[j] * kj[c];
    }
}

static void dr_chunk_forward(const dr_dims *d, const dr_pair *p, int t0, int nt, real *S,
                             dr_work *w)
{
    const int K = d->K, V = d->V, n = d->n, np = nt * n;
    const size_t Cp = (size_t)d->C * (size_t)n;
    dr_chunk_prepare(d, p, t0, nt, S, w);
    /* O = s (Qg S0 + Pm Vn) */
    real *o = p->o + (size_t)t0 * p->ldv;
    sb_fla_gemm(0, nt, V, K, d->scale, w->Qg, (size_t)K, S, (size_t)V, o, p->ldv, 0, 0, 0);
    sb_fla_gemm(0, nt, V, np, d->scale, w->Pm, Cp, w->Vn, (size_t)V, o, p->ldv, 1, n, 0);
    /* S <- Gam_last S + Khat^T Vn */
    const real gl = w->Gam[np - 1];
    for (size_t i = 0; i < (size_t)K * (size_t)V; i++)
        S[i] *= gl;
    sb_fla_gemm(1, K, V, np, 1, w->Khat, (size_t)K, w->Vn, (size_t)V, S, (size_t)V, 1, 0, 0);
}

typedef struct dr_ctx {
    sb_tensor *q, *k, *v, *beta, *gate, *o;
    dr_dims d;
    real *bstates; /* [B*H][n_chunks][K][V] */
    int n_chunks;
} dr_ctx;

/* One chunk backward; dS: gradient of the state leaving the chunk in, entering it out. */
static void dr_chunk_backward(const dr_dims *d, const dr_pair *p, const dr_pair *gp, int t0, int nt,
                              const real *S0, real *dS, dr_work *w, real *acc)
{
    const int K = d->K, V = d->V, n = d->n, np = nt * n;
    const size_t Cp = (size_t)d->C * (size_t)n, KV = (size_t)K * (size_t)V;
    const size_t p0 = (size_t)t0 * (size_t)n;
    const size_t ks = (size_t)K, vs = (size_t)V;
    const real s = d->scale;
    const real *k = p->k + p0 * p->ldq, *v = p->v + p0 * p->ldv, *beta = p->beta + p0 * p->ldh;
    const real *q = p->q + (size_t)t0 * p->ldq;
    const real *dO = gp->o + (size_t)t0 * p->ldv;
    dr_chunk_prepare(d, p, t0, nt, S0, w);
    /* state output: dS0 = Gam_last dS; dVn = Khat dS; dK_j = E_last,j (Vn dS^T)_j */
    const real gl = w->Gam[np - 1];
    for (size_t i = 0; i < KV; i++)
        w->dS0[i] = gl * dS[i];
    sb_fla_gemm(0, np, V, K, 1, w->Khat, ks, dS, vs, w->dVn, vs, 0, 0, 0);
    fla_transpose(K, V, dS, vs, w->dST, ks);
    sb_fla_gemm(0, np, K, V, 1, w->Vn, vs, w->dST, ks, w->tk, ks, 0, 0, 0);
    const real *elast = w->E + (size_t)(np - 1) * Cp;
    for (int j = 0; j < np; j++) {
        const real *t = w->tk + (size_t)j * ks;
        real *dk = w->dk + (size_t)j * ks;
        for (int c = 0; c < K; c++)
            dk[c] = elast[j] * t[c];
    }
    /* outputs O = s (Qg S0 + Pm Vn) */
    fla_transpose(K, V, S0, vs, w->S0T, ks);
    sb_fla_gemm(0, nt, K, V, s, dO, p->ldv, w->S0T, ks, w->dq, ks, 0, 0, 0);
    for (int i = 0; i < nt; i++) {
        const real gi = w->Gam[i * n + n - 1];
        real *dq = w->dq + (size_t)i * ks;
        for (int c = 0; c < K; c++)
            dq[c] *= gi;
    }
    sb_fla_gemm(1, K, V, nt, s, w->Qg, ks, dO, p->ldv, w->dS0, vs, 1, 0, 0);
    fla_transpose(np, V, w->Vn, vs, w->VnT, Cp);
    sb_fla_gemm(0, nt, np, V, s, dO, p->ldv, w->VnT, Cp, w->M, Cp, 0, 0, n); /* dPm */
    sb_fla_gemm(1, np, V, nt, s, w->Pm, Cp, dO, p->ldv, w->dVn, vs, 1, -n, 0);
    for (int i = 0; i < nt; i++) { /* M = dPm ⊙ E on the triangle */
        const int pi = i * n + n - 1;
        const real *e = w->E + (size_t)pi * Cp;
        real *m = w->M + (size_t)i * Cp;
        for (int j = 0; j <= pi; j++)
            m[j] *= e[j];
        for (int j = pi + 1; j < np; j++)
            m[j] = 0;
    }
    sb_fla_gemm(0, nt, K, np, 1, w->M, Cp, k, p->ldq, w->dq, ks, 1, n, 0);
    sb_fla_gemm(1, np, K, nt, 1, w->M, Cp, q, p->ldq, w->dk, ks, 1, -n, 0);
    /* Vn = U - W S0: dU = dVn, dW = -dVn S0^T, dS0 -= W^T dVn */
    sb_fla_gemm(0, np, K, V, -1, w->dVn, vs, w->S0T, ks, w->dW, ks, 0, 0, 0);
    sb_fla_gemm(1, K, V, np, -1, w->W, ks, w->dVn, vs, w->dS0, vs, 1, 0, 0);
    /* W = Tm Bk, U = Tm Bv: dBk = Tm^T dW, dBv = Tm^T dU */
    sb_fla_gemm(1, np, K, np, 1, w->Tm, Cp, w->dW, ks, w->dBk, ks, 0, -1, 0);
    sb_fla_gemm(1, np, V, np, 1, w->Tm, Cp, w->dVn, vs, w->dBv, vs, 0, -1, 0);
    /* Bk = diag(beta Gam) K, Bv = diag(beta) V */
    for (int i = 0; i < np; i++) {
        const real b = beta[(size_t)i * p->ldh];
        const real *ki = k + (size_t)i * p->ldq, *vi = v + (size_t)i * p->ldv;
        const real *bk = w->dBk + (size_t)i * ks, *bv = w->dBv + (size_t)i * vs;
        real *dv = w->dv + (size_t)i * vs;
        for (int x = 0; x < V; x++)
            dv[x] = b * bv[x];
        fla_axpy(K, b * w->Gam[i], bk, w->dk + (size_t)i * ks);
        w->dbeta[i] = fla_dot(V, vi, bv) + w->Gam[i] * fla_dot(K, ki, bk);
    }
    /* Tm = (I + A)^-1: dA = -strictly_lower(dBv U^T + dBk W^T) */
    fla_transpose(np, V, w->U, vs, w->UT, Cp);
    fla_transpose(np, K, w->W, ks, w->WT, Cp);
    sb_fla_gemm(0, np, np, V, -1, w->dBv, vs, w->UT, Cp, w->D, Cp, 0, 0, 1);
    sb_fla_gemm(0, np, np, K, -1, w->dBk, ks, w->WT, Cp, w->D, Cp, 1, 0, 1);
    /* A_ij = beta_i (k_i . k_j) E_ij: dbeta_i += sum_j dA_ij G_ij E_ij;
     * D = diag(beta) (dA ⊙ E) (strictly lower, zeros stored): dK += D K + D^T K */
    for (int i = 0; i < np; i++) {
        const real b = beta[(size_t)i * p->ldh];
        const real *g = w->G + (size_t)i * Cp, *e = w->E + (size_t)i * Cp;
        real *dd = w->D + (size_t)i * Cp;
        real sb = 0;
        for (int j = 0; j < i; j++) {
            const real de = dd[j] * e[j];
            sb += de * g[j];
            dd[j] = b * de;
        }
        for (int j = i; j < np; j++)
            dd[j] = 0;
        w->dbeta[i] += sb;
    }
    sb_fla_gemm(0, np, K, np, 1, w->D, Cp, k, p->ldq, w->dk, ks, 1, 1, 0);
    sb_fla_gemm(1, np, K, np, 1, w->D, Cp, k, p->ldq, w->dk, ks, 1, -1, 0);
    memcpy(dS, w->dS0, KV * sizeof(real));
    /* into the gradients; the gate identity backwards over the tokens */
    for (int i = nt - 1; i >= 0; i--) {
        const int t = t0 + i;
        const real *qi = q + (size_t)i * p->ldq, *dqi = w->dq + (size_t)i * ks;
        real *gq = gp->q + (size_t)t * p->ldq;
        for (int c = 0; c < K; c++)
            gq[c] += dqi[c];
        real term = fla_dot(K, qi, dqi);
        for (int j = n - 1; j >= 0; j--) {
            const int li = i * n + j;
            const size_t pos = p0 + (size_t)li;
            fla_axpy(K, 1, w->dk + (size_t)li * ks, gp->k + pos * p->ldq);
            fla_axpy(V, 1, w->dv + (size_t)li * vs, gp->v + pos * p->ldv);
            gp->beta[pos * p->ldh] += w->dbeta[li];
            term -= fla_dot(V, v + (size_t)li * p->ldv, w->dv + (size_t)li * vs);
        }
        if (d->gated) {
            *acc += term;
            gp->g[(size_t)t * p->ldh] += *acc;
        }
    }
}

static void dr_backward(sb_graph *gr, void *ctx)
{
    dr_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const dr_dims *d = &c->d;
    const size_t KV = (size_t)d->K * (size_t)d->V;
    real *dq = sb_tensor_grad(gr, c->q), *dk = sb_tensor_grad(gr, c->k);
    real *dv = sb_tensor_grad(gr, c->v), *db = sb_tensor_grad(gr, c->beta);
    real *dg = c->gate != NULL ? sb_tensor_grad(gr, c->gate) : NULL;
    dr_work w0;
    const size_t wf0 = dr_work_layout(d, NULL, &w0), wf = wf0 + R16(KV);
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * wf * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *base = scratch + (size_t)omp_get_thread_num() * wf;
        dr_work w;
        dr_work_layout(d, base, &w);
        real *dS = base + wf0;
        memset(dS, 0, KV * sizeof *dS);
        real acc = 0;
        dr_pair p = dr_pair_at(d, c->q->data, c->k->data, c->v->data, c->beta->data,
                               c->gate != NULL ? c->gate->data : NULL, c->o->data, bh);
        dr_pair gp = dr_pair_at(d, dq, dk, dv, db, dg, c->o->grad, bh);
        for (int ci = c->n_chunks - 1; ci >= 0; ci--) {
            int t0 = ci * d->C, nt = d->T - t0 < d->C ? d->T - t0 : d->C;
            const real *S0 = c->bstates + ((size_t)bh * (size_t)c->n_chunks + (size_t)ci) * KV;
            dr_chunk_backward(d, &p, &gp, t0, nt, S0, dS, &w, &acc);
        }
    }
}

sb_tensor *sb_delta_rule(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                         sb_tensor *gate, real scale, int chunk, real *state)
{
    dr_dims d;
    dr_check(q, k, v, beta, gate, &d);
    SB_ASSERT(chunk >= 1);
    SB_ASSERT(state == NULL || !g->record);
    d.scale = scale;
    d.C = chunk < d.T ? chunk : (d.T > 0 ? d.T : 1);
    int oshape[4] = {d.B, d.T, d.H, d.V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && dr_needs_grad(q, k, v, beta, gate);
    dr_ctx *c = o->requires_grad ? sb_graph_record(g, dr_backward, sizeof *c) : NULL;
    const size_t KV = (size_t)d.K * (size_t)d.V;
    const int n_chunks = (d.T + d.C - 1) / d.C;
    if (c != NULL) {
        c->q = q, c->k = k, c->v = v, c->beta = beta, c->gate = gate, c->o = o, c->d = d;
        c->n_chunks = n_chunks;
        c->bstates =
            sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)n_chunks * KV * sizeof(real));
    }
    dr_work w0;
    const size_t wf = dr_work_layout(&d, NULL, &w0);
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * wf * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        dr_work w;
        dr_work_layout(&d, scratch + (size_t)omp_get_thread_num() * wf, &w);
        dr_pair p = dr_pair_at(&d, q->data, k->data, v->data, beta->data,
                               gate != NULL ? gate->data : NULL, o->data, bh);
        real *S = state != NULL ? state + (size_t)bh * KV : w.S;
        if (state == NULL)
            memset(S, 0, KV * sizeof *S);
        for (int ci = 0; ci < n_chunks; ci++) {
            int t0 = ci * d.C, nt = d.T - t0 < d.C ? d.T - t0 : d.C;
            if (c != NULL)
                memcpy(c->bstates + ((size_t)bh * (size_t)n_chunks + (size_t)ci) * KV, S,
                       KV * sizeof *S);
            dr_chunk_forward(&d, &p, t0, nt, S, &w);
        }
    }
    return o;
}

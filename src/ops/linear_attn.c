/* linear_attn.c - kernel K1, decayed linear attention (see ops_fla.h;
 * derivations docs/models/linear_attention.md).
 *
 * Per batch and head, with log-decays g_t (a vector over the K key channels, one scalar, or
 * none) and scale s:
 *   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = s S_t^T q_t.
 *
 * Chunked form (chunks of n <= C tokens entering with state S0; gamma_i = inclusive cumsum of
 * g inside the chunk, so gamma is non-increasing and gamma_{n-1} is the most negative):
 *   Qb_i = q_i exp(gamma_i)              Kb_j = k_j exp(gamma_{n-1} - gamma_j)
 *   P_ij = sum_c q_i[c] k_j[c] exp(gamma_i[c] - gamma_j[c]),  j <= i
 *   O    = s (Qb S0 + P V),              S_next = diag(exp(gamma_{n-1})) S0 + Kb^T V
 * P is factorised: P = Qb Kr^T with Kr_j = k_j exp(-gamma_j), a product of small matrices,
 * when every channel's decay over the chunk stays above exp(-FACTOR_RANGE) (then Kr cannot
 * overflow and every term keeps its relative accuracy); otherwise that chunk is computed
 * term by term with the exponent inside the sum (only ever exponentiating gamma_i - gamma_j
 * <= 0).
 *
 * Backward, chunks in reverse carrying dS (the gradient of the state leaving the chunk):
 *   dP = s dO V^T (j <= i)      dV = s P^T dO + Kb dS
 *   dQ = exp(gamma) (s dO S0^T) + [dP (K exp(gamma_i - gamma_j))]
 *   dK = exp(gamma_{n-1} - gamma) (V dS^T) + [dP^T (Q exp(gamma_i - gamma_j))]
 *   dS <- diag(exp(gamma_{n-1})) dS + s Qb^T dO
 * and the log-decay gradient from the state-free identity (valid since S_0 = 0)
 *   dg_t = revcumsum_t(q ⊙ dq - k ⊙ dk)      (summed over channels for a scalar gate),
 * which needs this op's own dq, dk: they are formed per chunk in scratch and then added.
 * The forward keeps the state entering each chunk (B H ceil(T/C) K V values).
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/ops_fla.h"

/* Largest total log-decay of a chunk for the factorised intra-chunk products. */
#define FACTOR_RANGE ((real)30)
/* scratch blocks are rounded up to 16 values (64 bytes) */
#define R16(x) (((x) + 15) / 16 * 16)

typedef struct la_dims {
    int B, T, H, K, V;
    int G; /* gate values per token and head: K (per channel), 1 (per head), 0 */
    int C; /* chunk length (tokens) */
    real scale;
} la_dims;

/* Pointers to one (batch, head) pair's rows; row t is at + t * ld. */
typedef struct la_pair {
    real *q, *k, *v, *g, *o;
    size_t ldk, ldv, ldg;
} la_pair;

static la_pair pair_at(const la_dims *d, real *q, real *k, real *v, real *gate, real *o, int bh)
{
    const int b = bh / d->H, h = bh % d->H;
    const size_t row = (size_t)b * (size_t)d->T * (size_t)d->H + (size_t)h;
    la_pair p;
    p.ldk = (size_t)d->H * (size_t)d->K;
    p.ldv = (size_t)d->H * (size_t)d->V;
    p.ldg = (size_t)d->H * (size_t)d->G;
    p.q = q + row * (size_t)d->K;
    p.k = k + row * (size_t)d->K;
    p.v = v + row * (size_t)d->V;
    p.g = gate != NULL ? gate + row * (size_t)d->G : NULL;
    p.o = o + row * (size_t)d->V;
    return p;
}

/* Y[i][c] = X[i][c] * f[i][c] (G = K) or X[i][c] * f[i][0] (G <= 1); f has rows of fs. */
static void mul_rows(int n, int K, int G, const real *X, size_t ldx, const real *f, size_t fs,
                     real *Y, size_t ldy)
{
    for (int i = 0; i < n; i++) {
        const real *x = X + (size_t)i * ldx, *fi = f + (size_t)i * fs;
        real *y = Y + (size_t)i * ldy;
        if (G > 1)
            for (int c = 0; c < K; c++)
                y[c] = x[c] * fi[c];
        else
            for (int c = 0; c < K; c++)
                y[c] = x[c] * fi[0];
    }
}

/* ---- step-by-step reference (spec 2, 2.1) ------------------------------------------------ */

typedef struct la_ref_ctx {
    sb_tensor *q, *k, *v, *gate, *o;
    la_dims d;
    real *states; /* [B*H][T][K][V]: S_t after token t */
} la_ref_ctx;

static void la_ref_forward_pair(const la_dims *d, la_pair p, real *S, real *keep)
{
    const int K = d->K, V = d->V, G = d->G;
    for (int t = 0; t < d->T; t++) {
        const real *q = p.q + (size_t)t * p.ldk, *k = p.k + (size_t)t * p.ldk;
        const real *v = p.v + (size_t)t * p.ldv;
        real *o = p.o + (size_t)t * p.ldv;
        for (int c = 0; c < K; c++) {
            real a = G == 0 ? 1 : exp(p.g[(size_t)t * p.ldg + (size_t)(G > 1 ? c : 0)]);
            real *s = S + (size_t)c * (size_t)V;
            for (int j = 0; j < V; j++)
                s[j] = a * s[j] + k[c] * v[j];
        }
        for (int j = 0; j < V; j++)
            o[j] = 0;
        for (int c = 0; c < K; c++)
            fla_axpy(V, d->scale * q[c], S + (size_t)c * (size_t)V, o);
        if (keep != NULL)
            memcpy(keep + (size_t)t * (size_t)K * (size_t)V, S, (size_t)K * (size_t)V * sizeof *S);
    }
}

static void la_ref_backward(sb_graph *gr, void *ctx)
{
    la_ref_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const la_dims *d = &c->d;
    const int K = d->K, V = d->V, G = d->G, T = d->T;
    real *dq = sb_tensor_grad(gr, c->q), *dk = sb_tensor_grad(gr, c->k);
    real *dv = sb_tensor_grad(gr, c->v);
    real *dg = c->gate != NULL ? sb_tensor_grad(gr, c->gate) : NULL;
    const size_t KV = (size_t)K * (size_t)V;
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * KV * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        la_pair p = pair_at(d, c->q->data, c->k->data, c->v->data,
                            c->gate != NULL ? c->gate->data : NULL, c->o->grad, bh);
        /* the same offsets address the gradients */
        la_pair gp = pair_at(d, dq, dk, dv, dg, c->o->grad, bh);
        real *dS = scratch + (size_t)omp_get_thread_num() * KV;
        memset(dS, 0, KV * sizeof *dS);
        const real *states = c->states + (size_t)bh * (size_t)T * KV;
        for (int t = T - 1; t >= 0; t--) {
            const real *q = p.q + (size_t)t * p.ldk, *k = p.k + (size_t)t * p.ldk;
            const real *v = p.v + (size_t)t * p.ldv, *dout = p.o + (size_t)t * p.ldv;
            const real *St = states + (size_t)t * KV;
            const real *Sp = t > 0 ? states + (size_t)(t - 1) * KV : NULL; /* S_{t-1} */
            real *gq = gp.q + (size_t)t * p.ldk, *gk = gp.k + (size_t)t * p.ldk;
            real *gv = gp.v + (size_t)t * p.ldv;
            real dgs = 0; /* scalar gate */
            for (int ch = 0; ch < K; ch++) {
                real *ds = dS + (size_t)ch * (size_t)V;
                fla_axpy(V, d->scale * q[ch], dout, ds); /* dS += s q do^T */
                gq[ch] += d->scale * fla_dot(V, St + (size_t)ch * (size_t)V, dout);
                gk[ch] += fla_dot(V, ds, v);
                fla_axpy(V, k[ch], ds, gv);
                if (G > 0) {
                    real gval = p.g[(size_t)t * p.ldg + (size_t)(G > 1 ? ch : 0)];
                    real a = exp(gval);
                    real r = Sp != NULL ? a * fla_dot(V, ds, Sp + (size_t)ch * (size_t)V) : 0;
                    if (G > 1)
                        (gp.g)[(size_t)t * p.ldg + (size_t)ch] += r;
                    else
                        dgs += r;
                    for (int j = 0; j < V; j++)
                        ds[j] *= a;
                }
            }
            if (G == 1)
                (gp.g)[(size_t)t * p.ldg] += dgs;
        }
    }
}

static void la_check(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                     const sb_tensor *gate, la_dims *d)
{
    SB_ASSERT(q->ndim == 4 && k->ndim == 4 && v->ndim == 4);
    d->B = q->shape[0], d->T = q->shape[1], d->H = q->shape[2], d->K = q->shape[3];
    d->V = v->shape[3];
    for (int i = 0; i < 4; i++)
        SB_ASSERT(k->shape[i] == q->shape[i]);
    SB_ASSERT(v->shape[0] == d->B && v->shape[1] == d->T && v->shape[2] == d->H);
    d->G = 0;
    if (gate != NULL) {
        SB_ASSERT(gate->shape[0] == d->B && gate->shape[1] == d->T && gate->shape[2] == d->H);
        SB_ASSERT(gate->ndim == 3 || (gate->ndim == 4 && gate->shape[3] == d->K));
        d->G = gate->ndim == 4 ? d->K : 1;
    }
}

static int la_needs_grad(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                         const sb_tensor *gate)
{
    return q->requires_grad || k->requires_grad || v->requires_grad ||
           (gate != NULL && gate->requires_grad);
}

sb_tensor *sb_linear_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v,
                              sb_tensor *gate, real scale, real *state)
{
    la_dims d;
    la_check(q, k, v, gate, &d);
    d.scale = scale;
    d.C = 0;
    SB_ASSERT(state == NULL || !g->record);
    int oshape[4] = {d.B, d.T, d.H, d.V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && la_needs_grad(q, k, v, gate);
    la_ref_ctx *c = o->requires_grad ? sb_graph_record(g, la_ref_backward, sizeof *c) : NULL;
    const size_t KV = (size_t)d.K * (size_t)d.V;
    real *states = NULL;
    if (c != NULL) {
        states = sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)d.T * KV * sizeof(real));
        c->q = q, c->k = k, c->v = v, c->gate = gate, c->o = o, c->d = d, c->states = states;
    }
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * KV * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        la_pair p =
            pair_at(&d, q->data, k->data, v->data, gate != NULL ? gate->data : NULL, o->data, bh);
        real *S =
            state != NULL ? state + (size_t)bh * KV : scratch + (size_t)omp_get_thread_num() * KV;
        if (state == NULL)
            memset(S, 0, KV * sizeof *S);
        la_ref_forward_pair(&d, p, S,
                            states != NULL ? states + (size_t)bh * (size_t)d.T * KV : NULL);
    }
    return o;
}

/* ---- chunked form (spec 2.3, 2.4) -------------------------------------------------------- */

/* Per-thread scratch of the chunked form. */
typedef struct la_work {
    real *gamma, *eg, *ieg, *ebn; /* [C][Gs]: cumsum, exp(gamma), exp(-gamma), exp(last-gamma) */
    real *Qb, *Kr, *Kb, *KrT;     /* [C][K] x3, [K][C] */
    real *P, *dP;                 /* [C][C] */
    real *VT;                     /* [V][C] */
    real *S, *S0T, *dST;          /* [K][V], [V][K], [V][K] */
    real *dq, *dk, *tq;           /* [C][K] */
    real *dv;                     /* [C][V] */
    real *acc;                    /* [K] running sum of the gate identity */
    int fast;                     /* the chunk uses the factorised products */
} la_work;

/* Lays the scratch out from base (base NULL: only counts); returns the number of reals. */
static size_t la_work_layout(const la_dims *d, real *base, la_work *w)
{
    const size_t C = (size_t)d->C, K = (size_t)d->K, V = (size_t)d->V;
    const size_t Gs = d->G > 1 ? K : 1;
    size_t used = 0;
#define TAKE(field, n) (w->field = base != NULL ? base + used : NULL, used += R16(n))
    TAKE(gamma, C * Gs), TAKE(eg, C * Gs), TAKE(ieg, C * Gs), TAKE(ebn, C * Gs);
    TAKE(Qb, C * K), TAKE(Kr, C * K), TAKE(Kb, C * K), TAKE(KrT, K * C);
    TAKE(P, C * C), TAKE(dP, C * C), TAKE(VT, V * C);
    TAKE(S, K * V), TAKE(S0T, V * K), TAKE(dST, V * K);
    TAKE(dq, C * K), TAKE(dk, C * K), TAKE(tq, C * K);
    TAKE(dv, C * V), TAKE(acc, K);
#undef TAKE
    w->fast = 1;
    return used;
}

/* The chunk's decays, Qb, Kb and P for the n tokens at rows q, k (stride ldk) and gate rows g
 * (stride ldg). */
static void la_chunk_prepare(const la_dims *d, const real *q, const real *k, size_t ldk,
                             const real *g, size_t ldg, int n, la_work *w)
{
    const int K = d->K, G = d->G, Gs = G > 1 ? K : 1;
    const int C = d->C;
    /* local cumulative log-decay; the gate-free case is a zero gate */
    for (int c = 0; c < Gs; c++) {
        real run = 0;
        for (int i = 0; i < n; i++) {
            if (G > 0)
                run += g[(size_t)i * ldg + (size_t)c];
            w->gamma[(size_t)i * (size_t)Gs + (size_t)c] = run;
        }
    }
    const real *last = w->gamma + (size_t)(n - 1) * (size_t)Gs;
    w->fast = 1;
    for (int c = 0; c < Gs; c++)
        if (!(-last[c] <= FACTOR_RANGE))
            w->fast = 0;
    const size_t nG = (size_t)n * (size_t)Gs;
    for (size_t i = 0; i < nG; i++)
        w->eg[i] = fla_exp(w->gamma[i]);
    mul_rows(n, K, G, q, ldk, w->eg, (size_t)Gs, w->Qb, (size_t)K);
    if (w->fast) {
        const real *eg_last = w->eg + (size_t)(n - 1) * (size_t)Gs;
        for (size_t i = 0; i < nG; i++)
            w->ieg[i] = 1 / w->eg[i];
        for (int i = 0; i < n; i++)
            for (int c = 0; c < Gs; c++)
                w->ebn[(size_t)i * (size_t)Gs + (size_t)c] =
                    eg_last[c] * w->ieg[(size_t)i * (size_t)Gs + (size_t)c];
        mul_rows(n, K, G, k, ldk, w->ieg, (size_t)Gs, w->Kr, (size_t)K);
        fla_transpose(n, K, w->Kr, (size_t)K, w->KrT, (size_t)C);
        sb_fla_gemm(0, n, n, K, 1, w->Qb, (size_t)K, w->KrT, (size_t)C, w->P, (size_t)C, 0, 0, 1);
    } else {
        for (int i = 0; i < n; i++)
            for (int c = 0; c < Gs; c++)
                w->ebn[(size_t)i * (size_t)Gs + (size_t)c] =
                    fla_exp(last[c] - w->gamma[(size_t)i * (size_t)Gs + (size_t)c]);
        for (int i = 0; i < n; i++) {
            const real *qi = q + (size_t)i * ldk, *gi = w->gamma + (size_t)i * (size_t)Gs;
            for (int j = 0; j <= i; j++) {
                const real *kj = k + (size_t)j * ldk, *gj = w->gamma + (size_t)j * (size_t)Gs;
                real s = 0;
                if (G > 1)
                    for (int c = 0; c < K; c++)
                        s += qi[c] * kj[c] * fla_exp(gi[c] - gj[c]);
                else
                    s = fla_dot(K, qi, kj) * fla_exp(gi[0] - gj[0]);
                w->P[(size_t)i * (size_t)C + (size_t)j] = s;
            }
        }
    }
    for (int i = 0; i < n; i++) /* zeros above the diagonal (the products read them) */
        for (int j = i + 1; j < n; j++)
            w->P[(size_t)i * (size_t)C + (size_t)j] = 0;
    mul_rows(n, K, G, k, ldk, w->ebn, (size_t)Gs, w->Kb, (size_t)K);
}

/* One chunk forward: o rows (stride ldv) from the state S (updated in place). */
static void la_chunk_forward(const la_dims *d, la_pair p, int t0, int n, real *S, la_work *w)
{
    const int K = d->K, V = d->V, Gs = d->G > 1 ? K : 1;
    const real *q = p.q + (size_t)t0 * p.ldk, *k = p.k + (size_t)t0 * p.ldk;
    const real *v = p.v + (size_t)t0 * p.ldv;
    const real *g = p.g != NULL ? p.g + (size_t)t0 * p.ldg : NULL;
    real *o = p.o + (size_t)t0 * p.ldv;
    la_chunk_prepare(d, q, k, p.ldk, g, p.ldg, n, w);
    sb_fla_gemm(0, n, V, K, d->scale, w->Qb, (size_t)K, S, (size_t)V, o, p.ldv, 0, 0, 0);
    sb_fla_gemm(0, n, V, n, d->scale, w->P, (size_t)d->C, v, p.ldv, o, p.ldv, 1, 1, 0);
    /* S <- diag(exp(gamma_last)) S + Kb^T V */
    const real *eg_last = w->eg + (size_t)(n - 1) * (size_t)Gs;
    for (int c = 0; c < K; c++) {
        real a = eg_last[Gs > 1 ? c : 0];
        real *s = S + (size_t)c * (size_t)V;
        for (int j = 0; j < V; j++)
            s[j] *= a;
    }
    sb_fla_gemm(1, K, V, n, 1, w->Kb, (size_t)K, v, p.ldv, S, (size_t)V, 1, 0, 0);
}

typedef struct la_ctx {
    sb_tensor *q, *k, *v, *gate, *o;
    la_dims d;
    real *bstates; /* [B*H][n_chunks][K][V]: the state entering each chunk */
    int n_chunks;
} la_ctx;

/* One chunk backward: adds this chunk's gradients into the tensors' gradients (gp: rows of
 * the gradients, same layout as p) and turns dS (state leaving the chunk) into the gradient
 * of the state entering it. */
static void la_chunk_backward(const la_dims *d, la_pair p, la_pair gp, const real *dO_all, int t0,
                              int n, const real *S0, real *dS, la_work *w)
{
    const int K = d->K, V = d->V, G = d->G, Gs = G > 1 ? K : 1, C = d->C;
    const real s = d->scale;
    const real *q = p.q + (size_t)t0 * p.ldk, *k = p.k + (size_t)t0 * p.ldk;
    const real *v = p.v + (size_t)t0 * p.ldv;
    const real *g = p.g != NULL ? p.g + (size_t)t0 * p.ldg : NULL;
    const real *dO = dO_all + (size_t)t0 * p.ldv;
    la_chunk_prepare(d, q, k, p.ldk, g, p.ldg, n, w);
    const size_t ks = (size_t)K, vs = (size_t)V, cs = (size_t)C;
    /* dP = s dO V^T on j <= i (zeros above: the products below read them) */
    fla_transpose(n, V, v, p.ldv, w->VT, cs);
    sb_fla_gemm(0, n, n, V, s, dO, p.ldv, w->VT, cs, w->dP, cs, 0, 0, 1);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            w->dP[(size_t)i * cs + (size_t)j] = 0;
    /* dV = s P^T dO + Kb dS */
    sb_fla_gemm(1, n, V, n, s, w->P, cs, dO, p.ldv, w->dv, vs, 0, -1, 0);
    sb_fla_gemm(0, n, V, K, 1, w->Kb, ks, dS, vs, w->dv, vs, 1, 0, 0);
    /* dQ = exp(gamma) (s dO S0^T + dP Kr); dK = exp(-gamma) (dP^T Qb) (factorised; else the
     * intra-chunk sums term by term) */
    fla_transpose(K, V, S0, vs, w->S0T, ks);
    sb_fla_gemm(0, n, K, V, s, dO, p.ldv, w->S0T, ks, w->tq, ks, 0, 0, 0);
    if (w->fast) {
        sb_fla_gemm(0, n, K, n, 1, w->dP, cs, w->Kr, ks, w->tq, ks, 1, 1, 0);
        mul_rows(n, K, G, w->tq, ks, w->eg, (size_t)Gs, w->dq, ks);
        sb_fla_gemm(1, n, K, n, 1, w->dP, cs, w->Qb, ks, w->dk, ks, 0, -1, 0);
        mul_rows(n, K, G, w->dk, ks, w->ieg, (size_t)Gs, w->dk, ks);
    } else {
        mul_rows(n, K, G, w->tq, ks, w->eg, (size_t)Gs, w->dq, ks);
        memset(w->dk, 0, (size_t)n * ks * sizeof(real));
        for (int i = 0; i < n; i++) {
            const real *qi = q + (size_t)i * p.ldk, *gi = w->gamma + (size_t)i * (size_t)Gs;
            real *dqi = w->dq + (size_t)i * ks;
            for (int j = 0; j <= i; j++) {
                const real *kj = k + (size_t)j * p.ldk, *gj = w->gamma + (size_t)j * (size_t)Gs;
                real *dkj = w->dk + (size_t)j * ks;
                const real dp = w->dP[(size_t)i * cs + (size_t)j];
                for (int c = 0; c < K; c++) {
                    real e = fla_exp(gi[Gs > 1 ? c : 0] - gj[Gs > 1 ? c : 0]);
                    dqi[c] += dp * kj[c] * e;
                    dkj[c] += dp * qi[c] * e;
                }
            }
        }
    }
    /* dK += exp(last - gamma) (V dS^T) */
    fla_transpose(K, V, dS, vs, w->dST, ks);
    sb_fla_gemm(0, n, K, V, 1, v, p.ldv, w->dST, ks, w->tq, ks, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        const real *e = w->ebn + (size_t)i * (size_t)Gs, *t = w->tq + (size_t)i * ks;
        real *dk = w->dk + (size_t)i * ks;
        for (int c = 0; c < K; c++)
            dk[c] += t[c] * e[Gs > 1 ? c : 0];
    }
    /* dS <- diag(exp(gamma_last)) dS + s Qb^T dO */
    const real *eg_last = w->eg + (size_t)(n - 1) * (size_t)Gs;
    for (int c = 0; c < K; c++) {
        real a = eg_last[Gs > 1 ? c : 0];
        real *ds = dS + (size_t)c * (size_t)V;
        for (int j = 0; j < V; j++)
            ds[j] *= a;
    }
    sb_fla_gemm(1, K, V, n, s, w->Qb, ks, dO, p.ldv, dS, vs, 1, 0, 0);
    /* add into the gradients; the gate identity runs backwards over the tokens */
    for (int i = n - 1; i >= 0; i--) {
        const real *qi = q + (size_t)i * p.ldk, *ki = k + (size_t)i * p.ldk;
        const real *dqi = w->dq + (size_t)i * (size_t)K, *dki = w->dk + (size_t)i * (size_t)K;
        real *gq = gp.q + (size_t)(t0 + i) * p.ldk;
        real *gk = gp.k + (size_t)(t0 + i) * p.ldk;
        real *gv = gp.v + (size_t)(t0 + i) * p.ldv;
        for (int c = 0; c < K; c++)
            gq[c] += dqi[c], gk[c] += dki[c];
        fla_axpy(V, 1, w->dv + (size_t)i * (size_t)V, gv);
        if (G > 0) {
            real *gg = gp.g + (size_t)(t0 + i) * p.ldg;
            if (G > 1) {
                for (int c = 0; c < K; c++) {
                    w->acc[c] += qi[c] * dqi[c] - ki[c] * dki[c];
                    gg[c] += w->acc[c];
                }
            } else {
                w->acc[0] += fla_dot(K, qi, dqi) - fla_dot(K, ki, dki);
                gg[0] += w->acc[0];
            }
        }
    }
}

static void la_backward(sb_graph *gr, void *ctx)
{
    la_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const la_dims *d = &c->d;
    const size_t KV = (size_t)d->K * (size_t)d->V;
    /* this op's own gradients are needed for the gate identity: all are formed */
    real *dq = sb_tensor_grad(gr, c->q), *dk = sb_tensor_grad(gr, c->k);
    real *dv = sb_tensor_grad(gr, c->v);
    real *dg = c->gate != NULL ? sb_tensor_grad(gr, c->gate) : NULL;
    la_work w0;
    const size_t wf = la_work_layout(d, NULL, &w0);
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * (wf + KV) * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *base = scratch + (size_t)omp_get_thread_num() * (wf + KV);
        la_work w;
        la_work_layout(d, base, &w);
        real *dS = base + wf;
        memset(dS, 0, KV * sizeof *dS);
        memset(w.acc, 0, (size_t)d->K * sizeof(real));
        la_pair p = pair_at(d, c->q->data, c->k->data, c->v->data,
                            c->gate != NULL ? c->gate->data : NULL, c->o->data, bh);
        la_pair gp = pair_at(d, dq, dk, dv, dg, c->o->grad, bh);
        for (int ci = c->n_chunks - 1; ci >= 0; ci--) {
            int t0 = ci * d->C, n = d->T - t0 < d->C ? d->T - t0 : d->C;
            const real *S0 = c->bstates + ((size_t)bh * (size_t)c->n_chunks + (size_t)ci) * KV;
            la_chunk_backward(d, p, gp, gp.o, t0, n, S0, dS, &w);
        }
    }
}

sb_tensor *sb_linear_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *gate,
                          real scale, int chunk, real *state)
{
    la_dims d;
    la_check(q, k, v, gate, &d);
    SB_ASSERT(chunk >= 1);
    SB_ASSERT(state == NULL || !g->record);
    d.scale = scale;
    d.C = chunk < d.T ? chunk : (d.T > 0 ? d.T : 1);
    int oshape[4] = {d.B, d.T, d.H, d.V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && la_needs_grad(q, k, v, gate);
    la_ctx *c = o->requires_grad ? sb_graph_record(g, la_backward, sizeof *c) : NULL;
    const size_t KV = (size_t)d.K * (size_t)d.V;
    const int n_chunks = (d.T + d.C - 1) / d.C;
    if (c != NULL) {
        c->q = q, c->k = k, c->v = v, c->gate = gate, c->o = o, c->d = d;
        c->n_chunks = n_chunks;
        c->bstates =
            sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)n_chunks * KV * sizeof(real));
    }
    la_work w0;
    const size_t wf = la_work_layout(&d, NULL, &w0);
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * wf * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        la_work w;
        la_work_layout(&d, scratch + (size_t)omp_get_thread_num() * wf, &w);
        la_pair p =
            pair_at(&d, q->data, k->data, v->data, gate != NULL ? gate->data : NULL, o->data, bh);
        real *S = state != NULL ? state + (size_t)bh * KV : w.S;
        if (state == NULL)
            memset(S, 0, KV * sizeof *S);
        for (int ci = 0; ci < n_chunks; ci++) {
            int t0 = ci * d.C, n = d.T - t0 < d.C ? d.T - t0 : d.C;
            if (c != NULL)
                memcpy(c->bstates + ((size_t)bh * (size_t)n_chunks + (size_t)ci) * KV, S,
                       KV * sizeof *S);
            la_chunk_forward(&d, p, t0, n, S, &w);
        }
    }
    return o;
}

/* mesa.c - kernel K3, the MesaNet recurrence (see mesa.h; spec docs/models/mesa_net.md;
 * derivations docs/models/mesa_net.md).
 *
 * Per batch and head (alpha_t = exp(g_t), A_t = H_t + diag(lam)):
 *   H_t = alpha_t H_{t-1} + beta_t k_t k_t^T,   G_t = alpha_t G_{t-1} + beta_t k_t v_t^T
 *   x_t = A_t^{-1} q_t (fla's conjugate gradient or an exact solve),   o_t = G_t^T x_t
 *
 * Backward (implicit differentiation, as fla: x_t is taken as the exact solution):
 *   dx_t = G_t do_t,   y_t = A_t^{-1} dx_t (the same solver),   dq_t = y_t,   dlam -= y_t x_t
 * and, with the state gradients dH, dG running backwards from 0 (t = T..1):
 *   dG += x_t do_t^T,   dH -= y_t x_t^T
 *   dk_t = beta_t ((dH + dH^T) k_t + dG v_t),   dv_t = beta_t dG^T k_t
 *   dbeta_t = k_t^T dH k_t + k_t^T dG v_t,      dg_t = alpha_t (<dH, H_{t-1}> + <dG, G_{t-1}>)
 *   dH *= alpha_t,   dG *= alpha_t
 * The gate gradient is taken from the states (not from the revcumsum identity of the spec,
 * which holds only for exact solves): it is then the gradient of the model with the solver's
 * x_t, whatever the solver's accuracy, as fla's chunk terms are.
 *
 * sb_mesa keeps the state entering every chunk of C tokens and the x_t; its backward rebuilds
 * a chunk's C states into scratch, solves for the chunk's y_t, then runs the recurrences above
 * over it. Its solves run MESA_NB tokens at a time in lockstep (forward and backward).
 * sb_mesa_ref solves token by token and keeps every state (B H (T + 1) (K K + K V) values;
 * for tests).
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/mesa.h"

/* fla's guard in both CG denominators */
#define CG_EPS ((real)1e-5)

typedef struct mesa_dims {
    int B, T, H, K, V;
    int steps; /* CG steps; 0: exact solve */
    int C;     /* tokens per kept state (sb_mesa) */
} mesa_dims;

/* Pointers to one (batch, head) pair's rows: row t of q, k at + t ldk, of v, o at + t ldv, of
 * beta, g at + t ldh; lam is the head's ridge [K]. */
typedef struct mesa_pair {
    const real *q, *k, *v, *beta, *g, *lam;
    real *o;
    size_t ldk, ldv, ldh;
} mesa_pair;

static mesa_pair pair_at(const mesa_dims *d, const real *q, const real *k, const real *v,
                         const real *beta, const real *g, const real *lam, real *o, int bh)
{
    const int b = bh / d->H, h = bh % d->H;
    const size_t row = (size_t)b * (size_t)d->T * (size_t)d->H + (size_t)h;
    mesa_pair p;
    p.ldk = (size_t)d->H * (size_t)d->K;
    p.ldv = (size_t)d->H * (size_t)d->V;
    p.ldh = (size_t)d->H;
    p.q = q + row * (size_t)d->K;
    p.k = k + row * (size_t)d->K;
    p.v = v + row * (size_t)d->V;
    p.beta = beta + row;
    p.g = g + row;
    p.lam = lam + (size_t)h * (size_t)d->K;
    p.o = o != NULL ? o + row * (size_t)d->V : NULL;
    return p;
}

/* Systems solved together: the CG of one token is a chain of dependent reductions and
 * divisions; running MESA_NB independent chains in lockstep lets the processor overlap them
 * (each system's arithmetic stays exactly that of a lone solve). */
#define MESA_NB 16

/* Solver work space in reals. */
static size_t solve_work(int K)
{
    return (size_t)MESA_NB * (3 * (size_t)K + 1) + (size_t)K * (size_t)K;
}

/* Cholesky: x = A^{-1} rhs with A = Hm + diag(lam) = L L^T (L in work, K x K). */
static void cholesky_solve(int K, const real *Hm, const real *lam, const real *rhs, real *x,
                           real *L)
{
    const size_t ks = (size_t)K;
    for (int i = 0; i < K; i++)
        for (int j = 0; j <= i; j++) {
            real s = Hm[(size_t)i * ks + (size_t)j] + (i == j ? lam[i] : 0);
            for (int c = 0; c < j; c++)
                s -= L[(size_t)i * ks + (size_t)c] * L[(size_t)j * ks + (size_t)c];
            L[(size_t)i * ks + (size_t)j] = i == j ? sqrt(s) : s / L[(size_t)j * ks + (size_t)j];
        }
    for (int i = 0; i < K; i++) { /* L z = rhs */
        real s = rhs[i];
        for (int c = 0; c < i; c++)
            s -= L[(size_t)i * ks + (size_t)c] * x[c];
        x[i] = s / L[(size_t)i * ks + (size_t)i];
    }
    for (int i = K - 1; i >= 0; i--) { /* L^T x = z */
        real s = x[i];
        for (int c = i + 1; c < K; c++)
            s -= L[(size_t)c * ks + (size_t)i] * x[c];
        x[i] = s / L[(size_t)i * ks + (size_t)i];
    }
}

/* fla's conjugate gradient (chunk_cg_solver_fwd.py) for n <= MESA_NB systems e:
 * x_e = (H_e + diag(lam))^{-1} rhs_e, H_e (symmetric K x K) at Hs + e hs, rhs_e at rhs + e rs,
 * x_e at x + e xs: x = 0, r = p = rhs, delta = r.r, then exactly `steps` times
 *   m = A p;  a = delta / (p.m + 1e-5);  x += a p;  r -= a m;
 *   delta' = r.r;  p = r + delta' / (delta + 1e-5) p;  delta = delta'.
 * Inlined with constant K for the usual head widths (the inner loops then become a few
 * vector instructions); the arithmetic is the same for every K. */
static inline __attribute__((always_inline)) void cg_n(int n, const int K, const real *Hs,
                                                       size_t hs, const real *lam, const real *rhs,
                                                       size_t rs, int steps, real *x, size_t xs,
                                                       real *work)
{
    const size_t ks = (size_t)K;
    real *r = work, *p = r + MESA_NB * ks, *m = p + MESA_NB * ks, *delta = m + MESA_NB * ks;
    for (int e = 0; e < n; e++) {
        real *xe = x + (size_t)e * xs, *re = r + (size_t)e * ks, *pe = p + (size_t)e * ks;
        const real *be = rhs + (size_t)e * rs;
        for (int i = 0; i < K; i++)
            xe[i] = 0, re[i] = be[i], pe[i] = be[i];
        delta[e] = fla_dot(K, re, re);
    }
    for (int s = 0; s < steps; s++) {
        for (int e = 0; e < n; e++)
            for (int i = 0; i < K; i++)
                m[(size_t)e * ks + (size_t)i] = lam[i] * p[(size_t)e * ks + (size_t)i];
        for (int j = 0; j < K; j++) /* H symmetric: row j = column j */
            for (int e = 0; e < n; e++) {
                const real pj = p[(size_t)e * ks + (size_t)j];
                const real *h = Hs + (size_t)e * hs + (size_t)j * ks;
                real *me = m + (size_t)e * ks;
                for (int i = 0; i < K; i++)
                    me[i] += pj * h[i];
            }
        for (int e = 0; e < n; e++) {
            real *xe = x + (size_t)e * xs, *re = r + (size_t)e * ks, *pe = p + (size_t)e * ks;
            const real *me = m + (size_t)e * ks;
            const real a = delta[e] / (fla_dot(K, pe, me) + CG_EPS);
            for (int i = 0; i < K; i++) {
                xe[i] += a * pe[i];
                re[i] -= a * me[i];
            }
            const real dn = fla_dot(K, re, re);
            const real bb = dn / (delta[e] + CG_EPS);
            for (int i = 0; i < K; i++)
                pe[i] = re[i] + bb * pe[i];
            delta[e] = dn;
        }
    }
}

/* x_e = (H_e + diag(lam))^{-1} rhs_e for n <= MESA_NB systems (layout as cg_n): fla's CG for
 * steps > 0, Cholesky factorisation and two triangular solves for steps == 0. */
static void mesa_solve_n(int n, int K, const real *Hs, size_t hs, const real *lam, const real *rhs,
                         size_t rs, int steps, real *x, size_t xs, real *work)
{
    if (steps == 0) {
        for (int e = 0; e < n; e++)
            cholesky_solve(K, Hs + (size_t)e * hs, lam, rhs + (size_t)e * rs, x + (size_t)e * xs,
                           work);
        return;
    }
    switch (K) {
    case 16: cg_n(n, 16, Hs, hs, lam, rhs, rs, steps, x, xs, work); break;
    case 32: cg_n(n, 32, Hs, hs, lam, rhs, rs, steps, x, xs, work); break;
    case 64: cg_n(n, 64, Hs, hs, lam, rhs, rs, steps, x, xs, work); break;
    default: cg_n(n, K, Hs, hs, lam, rhs, rs, steps, x, xs, work); break;
    }
}

/* Hm = a Hp + b k k^T (kept exactly symmetric), Gm = a Gp + b k v^T; the outputs may be the
 * inputs. */
static void state_update(int K, int V, real a, real b, const real *k, const real *v, const real *Hp,
                         const real *Gp, real *Hm, real *Gm)
{
    for (int i = 0; i < K; i++) {
        const real *hp = Hp + (size_t)i * (size_t)K, *gp = Gp + (size_t)i * (size_t)V;
        real *hr = Hm + (size_t)i * (size_t)K, *gr = Gm + (size_t)i * (size_t)V;
        const real ki = k[i], bki = b * k[i];
        for (int j = 0; j < K; j++)
            hr[j] = a * hp[j] + b * (ki * k[j]);
        for (int j = 0; j < V; j++)
            gr[j] = a * gp[j] + bki * v[j];
    }
}

/* o = Gm^T x */
static void readout(int K, int V, const real *Gm, const real *x, real *o)
{
    for (int j = 0; j < V; j++)
        o[j] = 0;
    for (int i = 0; i < K; i++)
        fla_axpy(V, x[i], Gm + (size_t)i * (size_t)V, o);
}

/* dx = Gm do */
static void readout_grad(int K, int V, const real *Gm, const real *dout, real *dx)
{
    for (int i = 0; i < K; i++)
        dx[i] = fla_dot(V, Gm + (size_t)i * (size_t)V, dout);
}

static void mesa_check(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                       const sb_tensor *beta, const sb_tensor *gate, const sb_tensor *lam,
                       mesa_dims *d)
{
    SB_ASSERT(q->ndim == 4 && k->ndim == 4 && v->ndim == 4);
    d->B = q->shape[0], d->T = q->shape[1], d->H = q->shape[2], d->K = q->shape[3];
    d->V = v->shape[3];
    for (int i = 0; i < 4; i++)
        SB_ASSERT(k->shape[i] == q->shape[i]);
    SB_ASSERT(v->shape[0] == d->B && v->shape[1] == d->T && v->shape[2] == d->H);
    SB_ASSERT(beta->ndim == 3 && gate->ndim == 3);
    for (int i = 0; i < 3; i++)
        SB_ASSERT(beta->shape[i] == q->shape[i] && gate->shape[i] == q->shape[i]);
    SB_ASSERT(lam->size == (size_t)d->H * (size_t)d->K);
}

static int mesa_needs_grad(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                           const sb_tensor *beta, const sb_tensor *gate, const sb_tensor *lam)
{
    return q->requires_grad || k->requires_grad || v->requires_grad || beta->requires_grad ||
           gate->requires_grad || lam->requires_grad;
}

/* The gradients of one pair (same offsets as mesa_pair) and its own dlam [K]. */
typedef struct mesa_grads {
    real *q, *k, *v, *beta, *g, *lam;
} mesa_grads;

/* One token of the backward after its solve (the recurrences of the header comment): x, y:
 * the forward's x_t and y_t = A_t^{-1} G_t do_t; Hp, Gp: H_{t-1}, G_{t-1}; dH, dG: the state
 * gradients, updated to those of H_{t-1}, G_{t-1}. work: 2 K reals. */
static void backward_token(const mesa_dims *d, const mesa_pair *p, const mesa_grads *gp, int t,
                           const real *Hp, const real *Gp, const real *x, const real *y,
                           const real *dout, real *dH, real *dG, real *work)
{
    const int K = d->K, V = d->V;
    const size_t ks = (size_t)K, vs = (size_t)V;
    real *w = work, *wt = work + ks;
    const real *k = p->k + (size_t)t * p->ldk, *v = p->v + (size_t)t * p->ldv;
    const real a = fla_exp(p->g[(size_t)t * p->ldh]), b = p->beta[(size_t)t * p->ldh];
    real *gq = gp->q + (size_t)t * p->ldk, *gk = gp->k + (size_t)t * p->ldk;
    real *gv = gp->v + (size_t)t * p->ldv;
    for (int i = 0; i < K; i++) {
        gq[i] += y[i];
        gp->lam[i] -= y[i] * x[i];
    }
    /* dH -= y x^T; w = dH k, wt = dH^T k; inner product with H_{t-1}; decay */
    real kdk = 0, ip = 0;
    for (int i = 0; i < K; i++)
        wt[i] = 0;
    for (int i = 0; i < K; i++) {
        real *r = dH + (size_t)i * ks;
        fla_axpy(K, -y[i], x, r);
        w[i] = fla_dot(K, r, k);
        fla_axpy(K, k[i], r, wt);
        ip += fla_dot(K, r, Hp + (size_t)i * ks);
        for (int j = 0; j < K; j++)
            r[j] *= a;
    }
    for (int i = 0; i < K; i++) {
        kdk += k[i] * w[i];
        w[i] += wt[i];
    }
    /* dG += x do^T; w += dG v; dv = b dG^T k; inner product with G_{t-1}; decay */
    real kdgv = 0;
    for (int i = 0; i < K; i++) {
        real *r = dG + (size_t)i * vs;
        fla_axpy(V, x[i], dout, r);
        real dgv = fla_dot(V, r, v);
        w[i] += dgv;
        kdgv += k[i] * dgv;
        fla_axpy(V, b * k[i], r, gv);
        ip += fla_dot(V, r, Gp + (size_t)i * vs);
        for (int j = 0; j < V; j++)
            r[j] *= a;
    }
    for (int i = 0; i < K; i++)
        gk[i] += b * w[i];
    gp->beta[(size_t)t * p->ldh] += kdk + kdgv;
    gp->g[(size_t)t * p->ldh] += a * ip;
}

/* The gradient buffers of every input, allocated before the threads start (all are formed:
 * the kernel writes them in one pass). */
typedef struct mesa_gbufs {
    real *q, *k, *v, *beta, *g, *dlam_pairs; /* dlam_pairs: [B*H][K] */
} mesa_gbufs;

static void gbufs_alloc(sb_graph *gr, const mesa_dims *d, sb_tensor *const *in, mesa_gbufs *gb)
{
    gb->q = sb_tensor_grad(gr, in[0]), gb->k = sb_tensor_grad(gr, in[1]);
    gb->v = sb_tensor_grad(gr, in[2]), gb->beta = sb_tensor_grad(gr, in[3]);
    gb->g = sb_tensor_grad(gr, in[4]);
    const size_t n = (size_t)d->B * (size_t)d->H * (size_t)d->K;
    gb->dlam_pairs = sb_graph_alloc(gr, n * sizeof(real));
    memset(gb->dlam_pairs, 0, n * sizeof(real));
}

/* One pair's rows of the gradients (same offsets as pair_at). */
static mesa_grads grads_at(const mesa_dims *d, const mesa_gbufs *gb, int bh)
{
    const int b = bh / d->H, h = bh % d->H;
    const size_t row = (size_t)b * (size_t)d->T * (size_t)d->H + (size_t)h;
    mesa_grads gp;
    gp.q = gb->q + row * (size_t)d->K;
    gp.k = gb->k + row * (size_t)d->K;
    gp.v = gb->v + row * (size_t)d->V;
    gp.beta = gb->beta + row;
    gp.g = gb->g + row;
    gp.lam = gb->dlam_pairs + (size_t)bh * (size_t)d->K;
    return gp;
}

/* dlam[h] += sum over b of the pairs' sums, in batch order. */
static void reduce_dlam(sb_graph *gr, const mesa_dims *d, sb_tensor *lam, const real *dlam_pairs)
{
    real *dl = sb_tensor_grad(gr, lam);
    for (int b = 0; b < d->B; b++)
        for (int h = 0; h < d->H; h++)
            fla_axpy(d->K, 1, dlam_pairs + ((size_t)b * (size_t)d->H + (size_t)h) * (size_t)d->K,
                     dl + (size_t)h * (size_t)d->K);
}

/* ---- step-by-step reference ---------------------------------------------------------------- */

typedef struct mesa_ref_ctx {
    sb_tensor *in[6]; /* q, k, v, beta, gate, lam */
    sb_tensor *o;
    mesa_dims d;
    real *states; /* [B*H][T + 1][K K + K V]: H_t, G_t after token t (entry 0: zeros) */
    real *xs;     /* [B*H][T][K] */
} mesa_ref_ctx;

static void mesa_ref_backward(sb_graph *gr, void *ctx)
{
    mesa_ref_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const mesa_dims *d = &c->d;
    const int K = d->K, T = d->T;
    const size_t KK = (size_t)K * (size_t)K, KV = (size_t)K * (size_t)d->V, SS = KK + KV;
    const size_t per_thread = SS + 2 * (size_t)K + solve_work(K) + 2 * (size_t)K;
    mesa_gbufs gb;
    gbufs_alloc(gr, d, c->in, &gb);
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *dS = scratch + (size_t)omp_get_thread_num() * per_thread;
        real *dx = dS + SS, *y = dx + K, *sw = y + K, *work = sw + solve_work(K);
        memset(dS, 0, SS * sizeof *dS);
        mesa_pair p = pair_at(d, c->in[0]->data, c->in[1]->data, c->in[2]->data, c->in[3]->data,
                              c->in[4]->data, c->in[5]->data, c->o->grad, bh);
        const mesa_grads gp = grads_at(d, &gb, bh);
        const real *st = c->states + (size_t)bh * (size_t)(T + 1) * SS;
        for (int t = T - 1; t >= 0; t--) {
            const real *S = st + (size_t)(t + 1) * SS, *Sp = S - SS;
            const real *x = c->xs + ((size_t)bh * (size_t)T + (size_t)t) * (size_t)K;
            const real *dout = p.o + (size_t)t * p.ldv;
            readout_grad(K, d->V, S + KK, dout, dx);
            mesa_solve_n(1, K, S, 0, p.lam, dx, 0, d->steps, y, 0, sw);
            backward_token(d, &p, &gp, t, Sp, Sp + KK, x, y, dout, dS, dS + KK, work);
        }
    }
    reduce_dlam(gr, d, c->in[5], gb.dlam_pairs);
}

sb_tensor *sb_mesa_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                       sb_tensor *gate, sb_tensor *lam, int cg_steps, real *state)
{
    mesa_dims d;
    mesa_check(q, k, v, beta, gate, lam, &d);
    SB_ASSERT(cg_steps >= 0);
    SB_ASSERT(state == NULL || !g->record);
    d.steps = cg_steps;
    d.C = 0;
    const int K = d.K, V = d.V, T = d.T;
    const size_t KK = (size_t)K * (size_t)K, KV = (size_t)K * (size_t)V, SS = KK + KV;
    int oshape[4] = {d.B, T, d.H, V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && mesa_needs_grad(q, k, v, beta, gate, lam);
    mesa_ref_ctx *c = o->requires_grad ? sb_graph_record(g, mesa_ref_backward, sizeof *c) : NULL;
    if (c != NULL) {
        sb_tensor *in[6] = {q, k, v, beta, gate, lam};
        memcpy(c->in, in, sizeof in);
        c->o = o, c->d = d;
        c->states =
            sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)(T + 1) * SS * sizeof(real));
        c->xs = sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)T * (size_t)K * sizeof(real));
    }
    const size_t per_thread = SS + (size_t)K + solve_work(K);
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        real *base = scratch + (size_t)omp_get_thread_num() * per_thread;
        real *S = state != NULL ? state + (size_t)bh * SS : base;
        real *xw = base + SS, *sw = xw + K;
        if (state == NULL)
            memset(S, 0, SS * sizeof *S);
        real *keep = c != NULL ? c->states + (size_t)bh * (size_t)(T + 1) * SS : NULL;
        if (keep != NULL)
            memcpy(keep, S, SS * sizeof *S);
        mesa_pair p =
            pair_at(&d, q->data, k->data, v->data, beta->data, gate->data, lam->data, o->data, bh);
        for (int t = 0; t < T; t++) {
            const real *kt = p.k + (size_t)t * p.ldk, *vt = p.v + (size_t)t * p.ldv;
            state_update(K, V, fla_exp(p.g[(size_t)t * p.ldh]), p.beta[(size_t)t * p.ldh], kt, vt,
                         S, S + KK, S, S + KK);
            real *x = c != NULL ? c->xs + ((size_t)bh * (size_t)T + (size_t)t) * (size_t)K : xw;
            mesa_solve_n(1, K, S, 0, p.lam, p.q + (size_t)t * p.ldk, 0, d.steps, x, 0, sw);
            readout(K, V, S + KK, x, p.o + (size_t)t * p.ldv);
            if (keep != NULL)
                memcpy(keep + (size_t)(t + 1) * SS, S, SS * sizeof *S);
        }
    }
    return o;
}

/* ---- the kernel: states every C tokens ------------------------------------------------------- */

typedef struct mesa_ctx {
    sb_tensor *in[6]; /* q, k, v, beta, gate, lam */
    sb_tensor *o;
    mesa_dims d;
    int n_chunks;
    real *bstates; /* [B*H][n_chunks][K K + K V]: H, G entering each chunk */
    real *xs;      /* [B*H][T][K] */
} mesa_ctx;

static void mesa_backward(sb_graph *gr, void *ctx)
{
    mesa_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const mesa_dims *d = &c->d;
    const int K = d->K, V = d->V, T = d->T, C = d->C;
    const size_t KK = (size_t)K * (size_t)K, KV = (size_t)K * (size_t)V, SS = KK + KV;
    const size_t CK = (size_t)C * (size_t)K;
    /* per thread: the chunk's C states, their dx and y, dH and dG, solver and token work */
    const size_t per_thread = (size_t)C * SS + 2 * CK + SS + solve_work(K) + 2 * (size_t)K;
    mesa_gbufs gb;
    gbufs_alloc(gr, d, c->in, &gb);
    real *scratch = sb_graph_alloc(gr, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *states = scratch + (size_t)omp_get_thread_num() * per_thread;
        real *dx = states + (size_t)C * SS, *y = dx + CK, *dS = y + CK;
        real *sw = dS + SS, *work = sw + solve_work(K);
        memset(dS, 0, SS * sizeof *dS);
        mesa_pair p = pair_at(d, c->in[0]->data, c->in[1]->data, c->in[2]->data, c->in[3]->data,
                              c->in[4]->data, c->in[5]->data, c->o->grad, bh);
        const mesa_grads gp = grads_at(d, &gb, bh);
        const real *xs = c->xs + (size_t)bh * (size_t)T * (size_t)K;
        for (int ci = c->n_chunks - 1; ci >= 0; ci--) {
            const int t0 = ci * C, n = T - t0 < C ? T - t0 : C;
            const real *S0 = c->bstates + ((size_t)bh * (size_t)c->n_chunks + (size_t)ci) * SS;
            /* the chunk's states, rebuilt as the forward made them, and dx = G_t do_t */
            for (int i = 0; i < n; i++) {
                const int t = t0 + i;
                real *S = states + (size_t)i * SS;
                const real *Sp = i > 0 ? S - SS : S0;
                state_update(K, V, fla_exp(p.g[(size_t)t * p.ldh]), p.beta[(size_t)t * p.ldh],
                             p.k + (size_t)t * p.ldk, p.v + (size_t)t * p.ldv, Sp, Sp + KK, S,
                             S + KK);
                readout_grad(K, V, S + KK, p.o + (size_t)t * p.ldv, dx + (size_t)i * (size_t)K);
            }
            /* y = A^{-1} dx, MESA_NB tokens at a time */
            for (int i = 0; i < n; i += MESA_NB)
                mesa_solve_n(n - i < MESA_NB ? n - i : MESA_NB, K, states + (size_t)i * SS, SS,
                             p.lam, dx + (size_t)i * (size_t)K, (size_t)K, d->steps,
                             y + (size_t)i * (size_t)K, (size_t)K, sw);
            for (int i = n - 1; i >= 0; i--) {
                const int t = t0 + i;
                const real *Sp = i > 0 ? states + (size_t)(i - 1) * SS : S0;
                backward_token(d, &p, &gp, t, Sp, Sp + KK, xs + (size_t)t * (size_t)K,
                               y + (size_t)i * (size_t)K, p.o + (size_t)t * p.ldv, dS, dS + KK,
                               work);
            }
        }
    }
    reduce_dlam(gr, d, c->in[5], gb.dlam_pairs);
}

sb_tensor *sb_mesa(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                   sb_tensor *gate, sb_tensor *lam, int cg_steps, int chunk, real *state)
{
    mesa_dims d;
    mesa_check(q, k, v, beta, gate, lam, &d);
    SB_ASSERT(cg_steps >= 0 && chunk >= 1);
    SB_ASSERT(state == NULL || !g->record);
    d.steps = cg_steps;
    d.C = chunk < d.T ? chunk : (d.T > 0 ? d.T : 1);
    const int K = d.K, V = d.V, T = d.T, C = d.C;
    const size_t KK = (size_t)K * (size_t)K, KV = (size_t)K * (size_t)V, SS = KK + KV;
    const int n_chunks = (T + C - 1) / C;
    int oshape[4] = {d.B, T, d.H, V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && mesa_needs_grad(q, k, v, beta, gate, lam);
    mesa_ctx *c = o->requires_grad ? sb_graph_record(g, mesa_backward, sizeof *c) : NULL;
    if (c != NULL) {
        sb_tensor *in[6] = {q, k, v, beta, gate, lam};
        memcpy(c->in, in, sizeof in);
        c->o = o, c->d = d, c->n_chunks = n_chunks;
        c->bstates =
            sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)n_chunks * SS * sizeof(real));
        c->xs = sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)T * (size_t)K * sizeof(real));
    }
    /* per thread: the running state, the states of MESA_NB tokens, their x, solver work */
    const size_t per_thread = SS + MESA_NB * (SS + (size_t)K) + solve_work(K);
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        real *base = scratch + (size_t)omp_get_thread_num() * per_thread;
        real *S = state != NULL ? state + (size_t)bh * SS : base;
        real *St = base + SS, *xw = St + MESA_NB * SS, *sw = xw + MESA_NB * (size_t)K;
        if (state == NULL)
            memset(S, 0, SS * sizeof *S);
        mesa_pair p =
            pair_at(&d, q->data, k->data, v->data, beta->data, gate->data, lam->data, o->data, bh);
        for (int t0 = 0; t0 < T; t0 += MESA_NB) {
            const int n = T - t0 < MESA_NB ? T - t0 : MESA_NB;
            for (int i = 0; i < n; i++) {
                const int t = t0 + i;
                const real *Sp = i > 0 ? St + (size_t)(i - 1) * SS : S;
                if (c != NULL && t % C == 0)
                    memcpy(c->bstates + ((size_t)bh * (size_t)n_chunks + (size_t)(t / C)) * SS, Sp,
                           SS * sizeof *Sp);
                real *Sn = St + (size_t)i * SS;
                state_update(K, V, fla_exp(p.g[(size_t)t * p.ldh]), p.beta[(size_t)t * p.ldh],
                             p.k + (size_t)t * p.ldk, p.v + (size_t)t * p.ldv, Sp, Sp + KK, Sn,
                             Sn + KK);
            }
            real *x = c != NULL ? c->xs + ((size_t)bh * (size_t)T + (size_t)t0) * (size_t)K : xw;
            mesa_solve_n(n, K, St, SS, p.lam, p.q + (size_t)t0 * p.ldk, p.ldk, d.steps, x,
                         (size_t)K, sw);
            for (int i = 0; i < n; i++)
                readout(K, V, St + (size_t)i * SS + KK, x + (size_t)i * (size_t)K,
                        p.o + (size_t)(t0 + i) * p.ldv);
            memcpy(S, St + (size_t)(n - 1) * SS, SS * sizeof *S);
        }
    }
    return o;
}

/* ---- the ridge ------------------------------------------------------------------------------- */

typedef struct lambda_ctx {
    sb_tensor *p, *y;
} lambda_ctx;

static void lambda_backward(sb_graph *g, void *ctx)
{
    lambda_ctx *c = ctx;
    if (c->y->grad == NULL || !c->p->requires_grad)
        return;
    real *dp = sb_tensor_grad(g, c->p);
    for (size_t i = 0; i < c->p->size; i++) {
        const real x = c->p->data[i];
        dp[i] += c->y->grad[i] * (x > 20 ? 1 : 1 / (1 + exp(-x)));
    }
}

sb_tensor *sb_mesa_lambda(sb_graph *g, sb_tensor *p, real lower)
{
    sb_tensor *y = sb_tensor_new(g, p->ndim, p->shape);
    for (size_t i = 0; i < p->size; i++) {
        const real x = p->data[i];
        y->data[i] = (x > 20 ? x : log1p(exp(x))) + lower;
    }
    y->requires_grad = p->requires_grad;
    if (y->requires_grad) {
        lambda_ctx *c = sb_graph_record(g, lambda_backward, sizeof *c);
        if (c != NULL)
            c->p = p, c->y = y;
    }
    return y;
}

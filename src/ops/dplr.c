/* dplr.c - the diagonal-plus-low-rank recurrence of KDA and RWKV-7 (ops_dplr.h), step by step,
 * with an exact backward that keeps one state per block of `chunk` tokens.
 *
 * Per head and token, with D = diag(exp(w_t)) and P the state the rank-1 term reads
 * (P = S_{t-1} in the undecayed order, P = D S_{t-1} in the decayed one):
 *   z   = P^T a_t                                  [V]
 *   S_t = D S_{t-1} + b_t z^T + k_t v_t^T          (decayed order: D S_{t-1} is P itself)
 *   o_t = scale S_t^T q_t
 * Backward, tokens in reverse, dS the gradient of S_t (from o_t and the later tokens):
 *   dS += scale q_t do_t^T;  dq_t = scale S_t do_t;  dk_t = dS v_t;  dv_t = dS^T k_t
 *   dz = dS^T b_t;  db_t = dS z;  da_t = P dz
 *   undecayed: dw_t = exp(w_t) . rowsum(dS o S_{t-1});          dS <- D dS + a_t dz^T
 *   decayed:   dP = dS + a_t dz^T;  dw_t = rowsum(dP o P);     dS <- D dP
 * The forward keeps S at the start of every block of `chunk` tokens; the backward re-runs a
 * block's forward from its kept state into a per-thread buffer of chunk + 1 states, then
 * walks the block backwards. (batch, head) pairs are split between threads; every sum runs
 * in a fixed order, so results do not depend on the thread count.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/ops_dplr.h"

typedef struct dplr_dims {
    int B, T, H, K, V;
    int chunk;
    sb_dplr_order order;
    real scale;
} dplr_dims;

/* One (batch, head) pair's rows: q, k, w, a, b have stride H K between tokens, v and o H V. */
typedef struct dplr_rows {
    const real *q, *k, *v, *w, *a, *b;
    real *o;
    size_t ldk, ldv;
} dplr_rows;

typedef struct dplr_grads {
    real *q, *k, *v, *w, *a, *b; /* NULL where the input needs no gradient */
} dplr_grads;

static size_t dplr_key_offset(const dplr_dims *d, int bh)
{
    const size_t b = (size_t)(bh / d->H), h = (size_t)(bh % d->H);
    return (b * (size_t)d->T * (size_t)d->H + h) * (size_t)d->K;
}

static size_t dplr_value_offset(const dplr_dims *d, int bh)
{
    const size_t b = (size_t)(bh / d->H), h = (size_t)(bh % d->H);
    return (b * (size_t)d->T * (size_t)d->H + h) * (size_t)d->V;
}

/* S <- S_t from S = S_{t-1} for token t; z [V] is scratch. */
static void dplr_step(const dplr_dims *d, const dplr_rows *r, int t, real *S, real *z)
{
    const int K = d->K, V = d->V;
    const real *k = r->k + (size_t)t * r->ldk, *w = r->w + (size_t)t * r->ldk;
    const real *a = r->a + (size_t)t * r->ldk, *b = r->b + (size_t)t * r->ldk;
    const real *v = r->v + (size_t)t * r->ldv;
    if (d->order == SB_DPLR_DECAYED)
        for (int c = 0; c < K; c++) {
            const real decay = exp(w[c]);
            real *row = S + (size_t)c * (size_t)V;
            for (int x = 0; x < V; x++)
                row[x] *= decay;
        }
    for (int x = 0; x < V; x++)
        z[x] = 0;
    for (int c = 0; c < K; c++)
        fla_axpy(V, a[c], S + (size_t)c * (size_t)V, z);
    for (int c = 0; c < K; c++) {
        real *row = S + (size_t)c * (size_t)V;
        if (d->order == SB_DPLR_UNDECAYED) {
            const real decay = exp(w[c]);
            for (int x = 0; x < V; x++)
                row[x] *= decay;
        }
        fla_axpy(V, b[c], z, row);
        fla_axpy(V, k[c], v, row);
    }
}

/* o_t = scale S_t^T q_t */
static void dplr_readout(const dplr_dims *d, const dplr_rows *r, int t, const real *S)
{
    const int K = d->K, V = d->V;
    const real *q = r->q + (size_t)t * r->ldk;
    real *o = r->o + (size_t)t * r->ldv;
    for (int x = 0; x < V; x++)
        o[x] = 0;
    for (int c = 0; c < K; c++)
        fla_axpy(V, d->scale * q[c], S + (size_t)c * (size_t)V, o);
}

typedef struct dplr_ctx {
    sb_tensor *q, *k, *v, *w, *a, *b, *o;
    dplr_dims d;
    real *kept; /* [B H][ceil(T / chunk)][K][V]: S entering each block */
} dplr_ctx;

static dplr_rows dplr_rows_at(const dplr_dims *d, const dplr_ctx *c, int bh)
{
    const size_t ko = dplr_key_offset(d, bh), vo = dplr_value_offset(d, bh);
    dplr_rows r = {c->q->data + ko,
                   c->k->data + ko,
                   c->v->data + vo,
                   c->w->data + ko,
                   c->a->data + ko,
                   c->b->data + ko,
                   NULL,
                   (size_t)d->H * (size_t)d->K,
                   (size_t)d->H * (size_t)d->V};
    return r;
}

static real *grad_or_null(sb_graph *g, sb_tensor *t)
{
    return t->requires_grad ? sb_tensor_grad(g, t) : NULL;
}

/* The backward of token t: dS holds the gradient of S_t on entry, of S_{t-1} on return.
 * Sprev = S_{t-1}, Scur = S_t; P and z are scratch ([K][V], [V]), dz [V]. */
static void dplr_step_backward(const dplr_dims *d, const dplr_rows *r, const dplr_grads *gr,
                               size_t ko, size_t vo, int t, const real *dout, const real *Sprev,
                               const real *Scur, real *dS, real *P, real *z, real *dz)
{
    const int K = d->K, V = d->V;
    const size_t KV = (size_t)K * (size_t)V, tk = ko + (size_t)t * r->ldk;
    const size_t tv = vo + (size_t)t * r->ldv;
    const real *q = r->q + (size_t)t * r->ldk, *k = r->k + (size_t)t * r->ldk;
    const real *w = r->w + (size_t)t * r->ldk, *a = r->a + (size_t)t * r->ldk;
    const real *b = r->b + (size_t)t * r->ldk, *v = r->v + (size_t)t * r->ldv;
    /* the readout */
    for (int c = 0; c < K; c++) {
        real *row = dS + (size_t)c * (size_t)V;
        fla_axpy(V, d->scale * q[c], dout, row);
        if (gr->q != NULL)
            gr->q[tk + (size_t)c] += d->scale * fla_dot(V, Scur + (size_t)c * (size_t)V, dout);
    }
    /* the write k v^T */
    if (gr->k != NULL)
        for (int c = 0; c < K; c++)
            gr->k[tk + (size_t)c] += fla_dot(V, dS + (size_t)c * (size_t)V, v);
    if (gr->v != NULL)
        for (int c = 0; c < K; c++)
            fla_axpy(V, k[c], dS + (size_t)c * (size_t)V, gr->v + tv);
    /* the rank-1 term b (P^T a)^T */
    if (d->order == SB_DPLR_DECAYED)
        for (int c = 0; c < K; c++) {
            const real decay = exp(w[c]);
            for (int x = 0; x < V; x++)
                P[(size_t)c * (size_t)V + (size_t)x] =
                    decay * Sprev[(size_t)c * (size_t)V + (size_t)x];
        }
    else
        memcpy(P, Sprev, KV * sizeof *P);
    for (int x = 0; x < V; x++)
        z[x] = 0, dz[x] = 0;
    for (int c = 0; c < K; c++) {
        fla_axpy(V, a[c], P + (size_t)c * (size_t)V, z);
        fla_axpy(V, b[c], dS + (size_t)c * (size_t)V, dz);
    }
    if (gr->b != NULL)
        for (int c = 0; c < K; c++)
            gr->b[tk + (size_t)c] += fla_dot(V, dS + (size_t)c * (size_t)V, z);
    if (gr->a != NULL)
        for (int c = 0; c < K; c++)
            gr->a[tk + (size_t)c] += fla_dot(V, P + (size_t)c * (size_t)V, dz);
    /* the decay, and dS -> the gradient of S_{t-1} */
    for (int c = 0; c < K; c++) {
        real *row = dS + (size_t)c * (size_t)V;
        const real decay = exp(w[c]);
        if (d->order == SB_DPLR_UNDECAYED) {
            if (gr->w != NULL)
                gr->w[tk + (size_t)c] += decay * fla_dot(V, row, Sprev + (size_t)c * (size_t)V);
            for (int x = 0; x < V; x++)
                row[x] *= decay;
            fla_axpy(V, a[c], dz, row);
        } else {
            fla_axpy(V, a[c], dz, row); /* dP */
            if (gr->w != NULL)
                gr->w[tk + (size_t)c] += fla_dot(V, row, P + (size_t)c * (size_t)V);
            for (int x = 0; x < V; x++)
                row[x] *= decay;
        }
    }
}

static void dplr_backward(sb_graph *g, void *ctx)
{
    dplr_ctx *c = ctx;
    if (c->o->grad == NULL)
        return;
    const dplr_dims *d = &c->d;
    const int K = d->K, V = d->V, T = d->T, C = d->chunk;
    const int blocks = (T + C - 1) / C;
    const size_t KV = (size_t)K * (size_t)V;
    dplr_grads gr = {grad_or_null(g, c->q), grad_or_null(g, c->k), grad_or_null(g, c->v),
                     grad_or_null(g, c->w), grad_or_null(g, c->a), grad_or_null(g, c->b)};
    const size_t per_thread = ((size_t)C + 3) * KV + 3 * (size_t)V;
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d->B * d->H; bh++) {
        real *states = scratch + (size_t)omp_get_thread_num() * per_thread; /* [C + 1][K][V] */
        real *dS = states + ((size_t)C + 1) * KV, *P = dS + KV;
        real *z = P + KV, *dz = z + V, *zf = dz + V;
        const dplr_rows r = dplr_rows_at(d, c, bh);
        const size_t ko = dplr_key_offset(d, bh), vo = dplr_value_offset(d, bh);
        const real *dO = c->o->grad + vo;
        const real *kept = c->kept + (size_t)bh * (size_t)blocks * KV;
        memset(dS, 0, KV * sizeof *dS);
        for (int blk = blocks - 1; blk >= 0; blk--) {
            const int t0 = blk * C, t1 = t0 + C < T ? t0 + C : T;
            memcpy(states, kept + (size_t)blk * KV, KV * sizeof *states);
            for (int t = t0; t < t1; t++) {
                real *next = states + (size_t)(t - t0 + 1) * KV;
                memcpy(next, next - KV, KV * sizeof *next);
                dplr_step(d, &r, t, next, zf);
            }
            for (int t = t1 - 1; t >= t0; t--) {
                const real *Sprev = states + (size_t)(t - t0) * KV;
                dplr_step_backward(d, &r, &gr, ko, vo, t, dO + (size_t)t * r.ldv, Sprev, Sprev + KV,
                                   dS, P, z, dz);
            }
        }
    }
}

static void dplr_check(const sb_tensor *q, const sb_tensor *k, const sb_tensor *v,
                       const sb_tensor *w, const sb_tensor *a, const sb_tensor *b, dplr_dims *d)
{
    SB_ASSERT(q->ndim == 4 && v->ndim == 4);
    d->B = q->shape[0], d->T = q->shape[1], d->H = q->shape[2], d->K = q->shape[3];
    d->V = v->shape[3];
    const sb_tensor *keys[5] = {k, w, a, b, q};
    for (int i = 0; i < 5; i++)
        SB_ASSERT(keys[i]->ndim == 4 && keys[i]->shape[0] == d->B && keys[i]->shape[1] == d->T &&
                  keys[i]->shape[2] == d->H && keys[i]->shape[3] == d->K);
    SB_ASSERT(v->shape[0] == d->B && v->shape[1] == d->T && v->shape[2] == d->H);
}

sb_tensor *sb_dplr(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                   sb_tensor *a, sb_tensor *b, real scale, sb_dplr_order order, int chunk,
                   real *state)
{
    dplr_dims d;
    dplr_check(q, k, v, w, a, b, &d);
    SB_ASSERT(chunk >= 1);
    SB_ASSERT(state == NULL || !g->record);
    d.chunk = chunk, d.order = order, d.scale = scale;
    const int oshape[4] = {d.B, d.T, d.H, d.V};
    sb_tensor *o = sb_tensor_new(g, 4, oshape);
    o->requires_grad = state == NULL && (q->requires_grad || k->requires_grad || v->requires_grad ||
                                         w->requires_grad || a->requires_grad || b->requires_grad);
    dplr_ctx *c = o->requires_grad ? sb_graph_record(g, dplr_backward, sizeof *c) : NULL;
    const size_t KV = (size_t)d.K * (size_t)d.V;
    const int blocks = (d.T + chunk - 1) / chunk;
    dplr_ctx local = {q, k, v, w, a, b, o, d, NULL};
    if (c != NULL) {
        *c = local;
        c->kept = sb_graph_alloc(g, (size_t)d.B * (size_t)d.H * (size_t)blocks * KV * sizeof(real));
    }
    const size_t per_thread = KV + (size_t)d.V;
    real *scratch = sb_graph_alloc(g, (size_t)omp_get_max_threads() * per_thread * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.B * d.H; bh++) {
        real *mine = scratch + (size_t)omp_get_thread_num() * per_thread;
        dplr_rows r = dplr_rows_at(&d, &local, bh);
        r.o = o->data + dplr_value_offset(&d, bh);
        real *S = state != NULL ? state + (size_t)bh * KV : mine;
        if (state == NULL)
            memset(S, 0, KV * sizeof *S);
        real *kept = c != NULL ? c->kept + (size_t)bh * (size_t)blocks * KV : NULL;
        for (int t = 0; t < d.T; t++) {
            if (kept != NULL && t % chunk == 0)
                memcpy(kept + (size_t)(t / chunk) * KV, S, KV * sizeof *S);
            dplr_step(&d, &r, t, S, mine + KV);
            dplr_readout(&d, &r, t, S);
        }
    }
    return o;
}

/* ---- elementwise blocks ------------------------------------------------------------------ */

typedef struct scale_heads_ctx {
    sb_tensor *x, *s, *y;
    real c;
    size_t rows; /* rows of D values, one scalar of s each */
    int D;
} scale_heads_ctx;

static void scale_heads_backward(sb_graph *g, void *ctx)
{
    scale_heads_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad, *x = c->x->data;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *ds = c->s != NULL && c->s->requires_grad ? sb_tensor_grad(g, c->s) : NULL;
    for (size_t n = 0; n < c->rows; n++) {
        const real s = c->s != NULL ? c->s->data[n] : 1;
        const real *dyr = dy + n * (size_t)c->D;
        if (dx != NULL)
            fla_axpy(c->D, c->c * s, dyr, dx + n * (size_t)c->D);
        if (ds != NULL)
            ds[n] += c->c * fla_dot(c->D, dyr, x + n * (size_t)c->D);
    }
}

sb_tensor *sb_dplr_scale_heads(sb_graph *g, sb_tensor *x, sb_tensor *s, real c)
{
    const int D = x->shape[x->ndim - 1];
    const size_t rows = x->size / (size_t)D;
    SB_ASSERT(s == NULL || s->size == rows);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    for (size_t n = 0; n < rows; n++) {
        const real f = c * (s != NULL ? s->data[n] : 1);
        for (int i = 0; i < D; i++)
            y->data[n * (size_t)D + (size_t)i] = f * x->data[n * (size_t)D + (size_t)i];
    }
    y->requires_grad = x->requires_grad || (s != NULL && s->requires_grad);
    if (y->requires_grad) {
        scale_heads_ctx *bc = sb_graph_record(g, scale_heads_backward, sizeof *bc);
        if (bc != NULL)
            bc->x = x, bc->s = s, bc->y = y, bc->c = c, bc->rows = rows, bc->D = D;
    }
    return y;
}

typedef struct mul_ctx {
    sb_tensor *x, *z, *y;
    real c;
} mul_ctx;

static void mul_backward(sb_graph *g, void *ctx)
{
    mul_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dz = c->z->requires_grad ? sb_tensor_grad(g, c->z) : NULL;
    for (size_t i = 0; i < c->y->size; i++) {
        if (dx != NULL)
            dx[i] += c->c * dy[i] * c->z->data[i];
        if (dz != NULL)
            dz[i] += c->c * dy[i] * c->x->data[i];
    }
}

sb_tensor *sb_dplr_mul(sb_graph *g, sb_tensor *x, sb_tensor *z, real c)
{
    SB_ASSERT(x->size == z->size);
    sb_tensor *y = sb_tensor_new(g, x->ndim, x->shape);
    for (size_t i = 0; i < x->size; i++)
        y->data[i] = c * x->data[i] * z->data[i];
    y->requires_grad = x->requires_grad || z->requires_grad;
    if (y->requires_grad) {
        mul_ctx *bc = sb_graph_record(g, mul_backward, sizeof *bc);
        if (bc != NULL)
            bc->x = x, bc->z = z, bc->y = y, bc->c = c;
    }
    return y;
}

/* ---- KDA's gate ---------------------------------------------------------------------------- */

static inline real dplr_sigmoid(real x)
{
    return 1 / (1 + exp(-x));
}

static inline real dplr_softplus(real x)
{
    return x > 20 ? x : log1p(exp(x));
}

typedef struct kda_gate_ctx {
    sb_tensor *f, *A_log, *dt_bias, *y;
    size_t rows;
    int H, K;
} kda_gate_ctx;

static void kda_gate_backward(sb_graph *g, void *ctx)
{
    kda_gate_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int H = c->H, K = c->K, HK = H * K;
    const real *f = c->f->data, *y = c->y->data, *dy = c->y->grad;
    const real *A_log = c->A_log->data, *dt = c->dt_bias->data;
    real *df = c->f->requires_grad ? sb_tensor_grad(g, c->f) : NULL;
    real *dA = c->A_log->requires_grad ? sb_tensor_grad(g, c->A_log) : NULL;
    real *ddt = c->dt_bias->requires_grad ? sb_tensor_grad(g, c->dt_bias) : NULL;
    /* channels split between threads, rows summed in order */
#pragma omp parallel for schedule(static) if (c->rows * (size_t)HK > 8192)
    for (int j = 0; j < HK; j++) {
        const real negA = -exp(A_log[j / K]);
        real sum_du = 0;
        for (size_t n = 0; n < c->rows; n++) {
            const size_t i = n * (size_t)HK + (size_t)j;
            const real u = f[i] + dt[j];
            const real du = dy[i] * negA * (u > 20 ? 1 : dplr_sigmoid(u));
            if (df != NULL)
                df[i] += du;
            sum_du += du;
        }
        if (ddt != NULL)
            ddt[j] += sum_du;
    }
    if (dA != NULL)
        for (int h = 0; h < H; h++) {
            real sum = 0; /* dy y, summed row by row over the head's channels */
            for (size_t n = 0; n < c->rows; n++)
                for (int x = 0; x < K; x++) {
                    const size_t i = n * (size_t)HK + (size_t)h * (size_t)K + (size_t)x;
                    sum += dy[i] * y[i];
                }
            dA[h] += sum;
        }
}

sb_tensor *sb_kda_gate(sb_graph *g, sb_tensor *f, sb_tensor *A_log, sb_tensor *dt_bias)
{
    const int H = (int)A_log->size, HK = (int)dt_bias->size;
    SB_ASSERT(H > 0 && HK % H == 0 && f->shape[f->ndim - 1] == HK);
    const int K = HK / H;
    const size_t rows = f->size / (size_t)HK;
    sb_tensor *y = sb_tensor_new(g, f->ndim, f->shape);
    for (size_t n = 0; n < rows; n++)
        for (int j = 0; j < HK; j++) {
            const size_t i = n * (size_t)HK + (size_t)j;
            y->data[i] = -exp(A_log->data[j / K]) * dplr_softplus(f->data[i] + dt_bias->data[j]);
        }
    y->requires_grad = f->requires_grad || A_log->requires_grad || dt_bias->requires_grad;
    if (y->requires_grad) {
        kda_gate_ctx *c = sb_graph_record(g, kda_gate_backward, sizeof *c);
        if (c != NULL)
            c->f = f, c->A_log = A_log, c->dt_bias = dt_bias, c->y = y, c->rows = rows, c->H = H,
            c->K = K;
    }
    return y;
}

/* log_linear.c - log-linear attention over Mamba2's SSD (ops_log_linear.h): the masked
 * quadratic form in query blocks with its backward, and the hierarchical (Fenwick)
 * recurrence for streaming. Spec and derivations: docs/models/log_linear_mamba2.md.
 *
 * Whole-sequence form, per batch row b, query block [t0, t1) and head h:
 *   CB_ts  = C_t . B_s                             one q x t1 product, shared by the heads
 *   W_ts   = CB_ts exp(c_t - c_s) lam[t, level(t,s)]   s <= t (else 0), c = cumsum(dt A)
 *   y_t    = sum_s W_ts v_s + D x_t,  v_s = dt_s x_s
 * Backward, with dW_ts = dy_t . v_s:
 *   dv_s   += sum_t W_ts dy_t
 *   dCB_ts += dW_ts exp(c_t - c_s) lam      (summed over heads; dC += dCB B, dB += dCB^T C)
 *   dlam[t, level(t,s)] += dW_ts exp(c_t - c_s) CB_ts
 *   da_k   += sum_{t >= k} sum_{s < k} dW_ts W_ts     (the segment (s, t] holds a_k)
 * The double sum is accumulated row by row with a running prefix (every term added once,
 * nothing subtracted). Then dt collects da A + dv . x, and the softplus, A = -exp(A_log) and
 * lam = softplus(L dl) chains close it. Nothing but the inputs is saved: the backward
 * recomputes dt, the cumulative decays, lam, v and C B^T.
 *
 * Threads own batch rows; per-head parameter gradients are kept per row and summed over rows
 * in order, so results do not depend on the thread count. */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops_log_linear.h"
#include "ops/ssm_math.h"

/* level(t, s) for s <= t: min(bit_length(t XOR s), K - 1) */
static inline int level_of(long t, long s, int K)
{
    unsigned long d = (unsigned long)(t ^ s);
    int l = 0;
    while (d != 0) {
        l++;
        d >>= 1;
    }
    return l < K - 1 ? l : K - 1;
}

/* The keys of query t by level, as ranges [lo, hi) of frames: level 0 is t itself; level
 * l >= 1, present when bit l-1 of t is set, is the 2^(l-1) frames before t with its low l-1
 * bits cleared (levels past K - 1 read weight K - 1). Returns the number of ranges; together
 * they cover [0, t]. */
#define MAX_RANGES 64
static int level_ranges(long t, int K, long *lo, long *hi, int *lev)
{
    int n = 0;
    lo[n] = t, hi[n] = t + 1, lev[n] = 0, n++;
    for (int l = 1; (t >> (l - 1)) != 0; l++)
        if ((t >> (l - 1)) & 1) {
            const long end = (t >> (l - 1)) << (l - 1);
            lo[n] = end - (1l << (l - 1)), hi[n] = end, lev[n] = l < K - 1 ? l : K - 1, n++;
        }
    return n;
}

typedef struct llssd_ctx {
    sb_tensor *x, *dt_in, *dt_bias, *A_log, *Bm, *Cm, *dl, *L, *D, *y;
    int B, T, E, H, P, N, K, Q;
} llssd_ctx;

static llssd_ctx make_ctx(sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                          sb_tensor *Bm, sb_tensor *Cm, sb_tensor *dl, sb_tensor *L, sb_tensor *D)
{
    SB_ASSERT(x->ndim == 3 && dt_in->ndim == 3 && dl->ndim == 3);
    llssd_ctx c = {.x = x,
                   .dt_in = dt_in,
                   .dt_bias = dt_bias,
                   .A_log = A_log,
                   .Bm = Bm,
                   .Cm = Cm,
                   .dl = dl,
                   .L = L,
                   .D = D};
    c.B = x->shape[0], c.T = x->shape[1], c.E = x->shape[2], c.H = (int)A_log->size;
    SB_ASSERT(c.H >= 1 && c.E % c.H == 0);
    c.P = c.E / c.H, c.N = Bm->shape[2], c.K = (int)(L->size / (size_t)c.H);
    SB_ASSERT(c.K >= 1 && c.K <= SB_LOG_LINEAR_MAX_LEVELS && L->size == (size_t)c.H * c.K);
    SB_ASSERT(dt_in->shape[0] == c.B && dt_in->shape[1] == c.T && dt_in->shape[2] == c.H);
    SB_ASSERT(dl->shape[0] == c.B && dl->shape[1] == c.T && dl->shape[2] == c.H * c.K);
    SB_ASSERT(Bm->ndim == 3 && Bm->shape[0] == c.B && Bm->shape[1] == c.T);
    SB_ASSERT(Cm->size == Bm->size && (int)dt_bias->size == c.H);
    SB_ASSERT(D == NULL || (int)D->size == c.H);
    return c;
}

static int any_grad(const llssd_ctx *c)
{
    return c->x->requires_grad || c->dt_in->requires_grad || c->dt_bias->requires_grad ||
           c->A_log->requires_grad || c->Bm->requires_grad || c->Cm->requires_grad ||
           c->dl->requires_grad || c->L->requires_grad || (c->D != NULL && c->D->requires_grad);
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

/* What one batch row's products read, recomputed from the inputs. */
typedef struct row_terms {
    real *pre; /* [T][H] dt_in + dt_bias */
    real *dt;  /* [T][H] softplus(pre) */
    real *cum; /* [H][T] running sum of dt A */
    real *lam; /* [T][H][K] softplus(L dl) */
    real *v;   /* [T][E] dt x */
} row_terms;

static size_t row_terms_size(const llssd_ctx *c)
{
    const size_t T = (size_t)c->T, H = (size_t)c->H;
    return 3 * T * H + T * H * (size_t)c->K + T * (size_t)c->E;
}

static row_terms row_terms_at(const llssd_ctx *c, real *ws)
{
    const size_t T = (size_t)c->T, H = (size_t)c->H;
    row_terms r = {.pre = ws, .dt = ws + T * H, .cum = ws + 2 * T * H, .lam = ws + 3 * T * H};
    r.v = r.lam + T * H * (size_t)c->K;
    return r;
}

static void row_terms_fill(const llssd_ctx *c, int b, row_terms *r)
{
    const int T = c->T, H = c->H, K = c->K, P = c->P, E = c->E;
    const size_t row0 = (size_t)b * (size_t)T;
    const real *dt_in = c->dt_in->data, *dl = c->dl->data, *x = c->x->data;
    for (int h = 0; h < H; h++) {
        const real A = -exp(c->A_log->data[h]), bias = c->dt_bias->data[h];
        real acc = 0;
        for (int t = 0; t < T; t++) {
            const size_t th = (size_t)t * H + (size_t)h;
            r->pre[th] = dt_in[(row0 + (size_t)t) * H + (size_t)h] + bias;
            r->dt[th] = ssm_softplus(r->pre[th]);
            acc += r->dt[th] * A;
            r->cum[(size_t)h * T + (size_t)t] = acc;
        }
    }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const size_t at = ((size_t)t * H + (size_t)h) * (size_t)K;
            const real *dlt = dl + (row0 + (size_t)t) * (size_t)(H * K) + (size_t)h * K;
            /* query t meets levels 0..level_of(t, 0, K) only; the others stay unread */
            const int top = level_of(t, 0, K);
            for (int l = 0; l <= top; l++)
                r->lam[at + (size_t)l] =
                    ssm_softplus(c->L->data[(size_t)h * K + (size_t)l] * dlt[l]);
            for (int l = top + 1; l < K; l++)
                r->lam[at + (size_t)l] = 0;
            const real dt = r->dt[(size_t)t * H + (size_t)h];
            const real *xt = x + (row0 + (size_t)t) * (size_t)E + (size_t)h * P;
            real *vt = r->v + (size_t)t * E + (size_t)h * P;
            for (int p = 0; p < P; p++)
                vt[p] = dt * xt[p];
        }
}

/* W of head h for queries [t0, t0 + q) against keys [0, t1): CB scaled by the decay and the
 * level weight on and below the diagonal, zero above */
static void head_weights(const llssd_ctx *c, const row_terms *r, int h, int t0, int q, int t1,
                         const real *CB, real *W)
{
    const int T = c->T, H = c->H, K = c->K;
    const real *cum = r->cum + (size_t)h * T;
    for (int i = 0; i < q; i++) {
        const int t = t0 + i;
        const real *lam = r->lam + ((size_t)t * H + (size_t)h) * (size_t)K;
        const real *cb = CB + (size_t)i * t1;
        real *w = W + (size_t)i * t1;
        long lo[MAX_RANGES], hi[MAX_RANGES];
        int lev[MAX_RANGES];
        const int n = level_ranges(t, K, lo, hi, lev);
        for (int k = 0; k < n; k++) {
            const real lv = lam[lev[k]], ct = cum[t];
#pragma omp simd
            for (long s = lo[k]; s < hi[k]; s++)
                w[s] = cb[s] * ssm_exp(ct - cum[s]) * lv;
        }
        for (int s = t + 1; s < t1; s++)
            w[s] = 0;
    }
}

static void forward_row(const llssd_ctx *c, int b, real *ws)
{
    const int T = c->T, E = c->E, H = c->H, P = c->P, N = c->N, Q = c->Q;
    const size_t row0 = (size_t)b * (size_t)T;
    row_terms r = row_terms_at(c, ws);
    real *CB = ws + row_terms_size(c), *W = CB + (size_t)Q * T;
    row_terms_fill(c, b, &r);
    const real *Bb = c->Bm->data + row0 * N, *Cb = c->Cm->data + row0 * N;
    const real *xb = c->x->data + row0 * E;
    real *yb = c->y->data + row0 * E;
    for (int t0 = 0; t0 < T; t0 += Q) {
        const int q = T - t0 < Q ? T - t0 : Q, t1 = t0 + q;
        ssm_gemm(0, 1, q, t1, N, 1, Cb + (size_t)t0 * N, N, Bb, N, 0, CB, t1);
        for (int h = 0; h < H; h++) {
            head_weights(c, &r, h, t0, q, t1, CB, W);
            ssm_gemm(0, 0, q, P, t1, 1, W, t1, r.v + (size_t)h * P, E, 0,
                     yb + (size_t)t0 * E + (size_t)h * P, E);
        }
    }
    if (c->D != NULL)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const real Dh = c->D->data[h];
                const size_t at = (size_t)t * E + (size_t)h * P;
                for (int p = 0; p < P; p++)
                    yb[at + (size_t)p] += Dh * xb[at + (size_t)p];
            }
}

/* per-row parameter gradient terms: dt_bias, A_log, D [H] each, then L [H K] */
static size_t param_terms_size(const llssd_ctx *c)
{
    return 3 * (size_t)c->H + (size_t)c->H * (size_t)c->K;
}

static void backward_row(const llssd_ctx *c, int b, real *ws, real *dx, real *ddt_in, real *dB,
                         real *dC, real *ddl, real *par)
{
    const int T = c->T, E = c->E, H = c->H, P = c->P, N = c->N, Q = c->Q, K = c->K;
    const size_t row0 = (size_t)b * (size_t)T;
    row_terms r = row_terms_at(c, ws);
    real *CB = ws + row_terms_size(c), *W = CB + (size_t)Q * T, *dW = W + (size_t)Q * T;
    real *dCB = dW + (size_t)Q * T, *dv = dCB + (size_t)Q * T, *da = dv + (size_t)T * E;
    real *dlam = da + (size_t)H * T;
    row_terms_fill(c, b, &r);
    memset(dv, 0, ((size_t)T * E + (size_t)H * T + (size_t)T * H * K) * sizeof(real));
    const real *Bb = c->Bm->data + row0 * N, *Cb = c->Cm->data + row0 * N;
    const real *xb = c->x->data + row0 * E, *dyb = c->y->grad + row0 * E;
    for (int t0 = 0; t0 < T; t0 += Q) {
        const int q = T - t0 < Q ? T - t0 : Q, t1 = t0 + q;
        ssm_gemm(0, 1, q, t1, N, 1, Cb + (size_t)t0 * N, N, Bb, N, 0, CB, t1);
        memset(dCB, 0, (size_t)q * t1 * sizeof(real));
        for (int h = 0; h < H; h++) {
            const real *dyh = dyb + (size_t)t0 * E + (size_t)h * P;
            const real *cum = r.cum + (size_t)h * T;
            ssm_gemm(0, 1, q, t1, P, 1, dyh, E, r.v + (size_t)h * P, E, 0, dW, t1);
            head_weights(c, &r, h, t0, q, t1, CB, W);
            real *dah = da + (size_t)h * T;
            for (int i = 0; i < q; i++) {
                const int t = t0 + i;
                const real *lam = r.lam + ((size_t)t * H + (size_t)h) * (size_t)K;
                real *dlamt = dlam + ((size_t)t * H + (size_t)h) * (size_t)K;
                const real *cb = CB + (size_t)i * t1, *w = W + (size_t)i * t1;
                real *dw = dW + (size_t)i * t1, *dcb = dCB + (size_t)i * t1;
                long lo[MAX_RANGES], hi[MAX_RANGES];
                int lev[MAX_RANGES];
                const int n = level_ranges(t, K, lo, hi, lev);
                for (int k = 0; k < n; k++) {
                    const real lv = lam[lev[k]], ct = cum[t];
                    real dlv = 0;
#pragma omp simd reduction(+ : dlv)
                    for (long s = lo[k]; s < hi[k]; s++) {
                        const real dwd = dw[s] * ssm_exp(ct - cum[s]);
                        dcb[s] += dwd * lv;
                        dlv += dwd * cb[s];
                        dw[s] *= w[s]; /* now dW_ts W_ts, the decay's term */
                    }
                    dlamt[lev[k]] += dlv;
                }
                /* da_k += sum_{s < k} dW_ts W_ts for k = 1..t */
                real run = 0;
                for (int k = 1; k <= t; k++) {
                    run += dw[k - 1];
                    dah[k] += run;
                }
            }
            ssm_gemm(1, 0, t1, P, q, 1, W, t1, dyh, E, 1, dv + (size_t)h * P, E);
        }
        ssm_gemm(0, 0, q, N, t1, 1, dCB, t1, Bb, N, 1, dC + (row0 + (size_t)t0) * N, N);
        ssm_gemm(1, 0, t1, N, q, 1, dCB, t1, Cb + (size_t)t0 * N, N, 1, dB + row0 * N, N);
    }
    /* through v = dt x, a = dt A, the D skip, the softplus of dt and of lam */
    real *dbias = par, *dAlog = par + H, *dD = par + 2 * H, *dL = par + 3 * H;
    for (int h = 0; h < H; h++) {
        const real A = -exp(c->A_log->data[h]);
        const real Dh = c->D != NULL ? c->D->data[h] : 0;
        real dA = 0;
        for (int t = 0; t < T; t++) {
            const size_t th = (size_t)t * H + (size_t)h, at = (size_t)t * E + (size_t)h * P;
            const real dt = r.dt[th], dat = da[(size_t)h * T + (size_t)t];
            real dvx = 0, dyx = 0;
            for (int p = 0; p < P; p++) {
                dvx += dv[at + (size_t)p] * xb[at + (size_t)p];
                dyx += dyb[at + (size_t)p] * xb[at + (size_t)p];
                dx[row0 * E + at + (size_t)p] += dt * dv[at + (size_t)p] + Dh * dyb[at + (size_t)p];
            }
            dA += dat * dt;
            dD[h] += dyx;
            const real dpre = (dat * A + dvx) * ssm_softplus_grad(r.pre[th]);
            ddt_in[(row0 + (size_t)t) * H + (size_t)h] += dpre;
            dbias[h] += dpre;
            const size_t lrow = (row0 + (size_t)t) * (size_t)(H * K) + (size_t)h * K;
            const int top = level_of(t, 0, K); /* dlam is zero above */
            for (int l = 0; l <= top; l++) {
                const real Lhl = c->L->data[(size_t)h * K + (size_t)l], dlv = c->dl->data[lrow + l];
                const real du = dlam[th * K + (size_t)l] * ssm_softplus_grad(Lhl * dlv);
                ddl[lrow + (size_t)l] += du * Lhl;
                dL[(size_t)h * K + (size_t)l] += du * dlv;
            }
        }
        dAlog[h] += dA * A;
    }
}

static size_t forward_ws_size(const llssd_ctx *c)
{
    return row_terms_size(c) + 2 * (size_t)c->Q * (size_t)c->T;
}

static size_t backward_ws_size(const llssd_ctx *c)
{
    const size_t T = (size_t)c->T;
    return row_terms_size(c) + 4 * (size_t)c->Q * T + T * (size_t)c->E + T * (size_t)c->H +
           T * (size_t)c->H * (size_t)c->K;
}

static void llssd_backward(sb_graph *g, void *ctx)
{
    llssd_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, H = c->H, K = c->K;
    real *dx = grad_or_scratch(g, c->x, c->x->size);
    real *ddt = grad_or_scratch(g, c->dt_in, c->dt_in->size);
    real *dB = grad_or_scratch(g, c->Bm, c->Bm->size), *dC = grad_or_scratch(g, c->Cm, c->Cm->size);
    real *ddl = grad_or_scratch(g, c->dl, c->dl->size);
    const size_t n_par = param_terms_size(c), n_ws = backward_ws_size(c);
    real *par = sb_graph_alloc(g, (size_t)B * n_par * sizeof(real));
    memset(par, 0, (size_t)B * n_par * sizeof(real));
    const int nth = omp_get_max_threads();
    real *ws_all = sb_graph_alloc(g, (size_t)nth * n_ws * sizeof(real));
#pragma omp parallel num_threads(nth) if ((size_t)B * (size_t)c->T * (size_t)c->E > 4096)
    {
        real *ws = ws_all + (size_t)omp_get_thread_num() * n_ws;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++)
            backward_row(c, b, ws, dx, ddt, dB, dC, ddl, par + (size_t)b * n_par);
    }
    /* per-row parameter terms summed over rows in order */
    real *dst[4] = {grad_or_scratch(g, c->dt_bias, (size_t)H),
                    grad_or_scratch(g, c->A_log, (size_t)H), grad_or_scratch(g, c->D, (size_t)H),
                    grad_or_scratch(g, c->L, (size_t)H * K)};
    const size_t off[4] = {0, (size_t)H, 2 * (size_t)H, 3 * (size_t)H};
    const size_t len[4] = {(size_t)H, (size_t)H, (size_t)H, (size_t)H * K};
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < len[k]; i++) {
            real acc = 0;
            for (int b = 0; b < B; b++)
                acc += par[(size_t)b * n_par + off[k] + i];
            dst[k][i] += acc;
        }
}

sb_tensor *sb_log_linear_ssd(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                             sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *dl,
                             sb_tensor *L, sb_tensor *D, int block)
{
    SB_ASSERT(block >= 1);
    llssd_ctx c = make_ctx(x, dt_in, dt_bias, A_log, Bm, Cm, dl, L, D);
    c.Q = block < c.T ? block : (c.T > 0 ? c.T : 1);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    c.y = y;
    y->requires_grad = any_grad(&c);
    llssd_ctx *rec = y->requires_grad ? sb_graph_record(g, llssd_backward, sizeof *rec) : NULL;
    const int B = c.B;
    const size_t n_ws = forward_ws_size(&c);
    const int nth = omp_get_max_threads();
    real *ws_all = sb_graph_alloc(g, (size_t)nth * n_ws * sizeof(real));
#pragma omp parallel num_threads(nth) if ((size_t)B * (size_t)c.T * (size_t)c.E > 4096)
    {
        real *ws = ws_all + (size_t)omp_get_thread_num() * n_ws;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++)
            forward_row(&c, b, ws);
    }
    if (rec != NULL)
        *rec = c;
    return y;
}

/* ---- the streaming form: the hierarchical recurrence ------------------------------------
 * Level state U_l (l = 1..K-1, P x N) holds sum over level l's frames of the decayed
 * v_s B_s^T, for the frame about to come. At frame t (position p): decay every level by
 * exp(dt A); y = sum_l lam_l U_l C + lam_0 (C . B) v + D x; then fold for position p + 1:
 * with z = the trailing ones of p, the frames of levels 0..z of p become level z + 1 of p + 1
 * (levels 1..z empty), higher levels stay. Past K - 1 everything gathers in level K - 1. */
static void stream_row_head(const llssd_ctx *c, int b, int h, real *U, long p0, real *acc)
{
    const int T = c->T, E = c->E, H = c->H, P = c->P, N = c->N, K = c->K;
    const size_t PN = (size_t)P * (size_t)N, row0 = (size_t)b * (size_t)T;
    const real A = -exp(c->A_log->data[h]), bias = c->dt_bias->data[h];
    const real Dh = c->D != NULL ? c->D->data[h] : 0;
    real lam[SB_LOG_LINEAR_MAX_LEVELS];
    for (int t = 0; t < T; t++) {
        const long p = p0 + t;
        const size_t row = row0 + (size_t)t;
        const real dt = ssm_softplus(c->dt_in->data[row * H + (size_t)h] + bias);
        const real a = exp(dt * A);
        const real *xt = c->x->data + row * E + (size_t)h * P;
        const real *Bt = c->Bm->data + row * N, *Ct = c->Cm->data + row * N;
        const real *dlt = c->dl->data + row * (size_t)(H * K) + (size_t)h * K;
        for (int l = 0; l < K; l++)
            lam[l] = ssm_softplus(c->L->data[(size_t)h * K + (size_t)l] * dlt[l]);
        /* levels that can hold frames: 1..min(bit_length(p), K-1) */
        const int top = level_of(p, 0, K);
        for (size_t k = 0; k < (size_t)top * PN; k++)
            U[k] *= a;
        real cb = 0;
        for (int n = 0; n < N; n++)
            cb += Ct[n] * Bt[n];
        real *yt = c->y->data + row * E + (size_t)h * P;
        for (int pp = 0; pp < P; pp++) {
            real out = lam[0] * cb * dt * xt[pp];
            for (int l = 1; l <= top; l++) {
                const real *u = U + (size_t)(l - 1) * PN + (size_t)pp * N;
                real dot = 0;
                for (int n = 0; n < N; n++)
                    dot += u[n] * Ct[n];
                out += lam[l] * dot;
            }
            yt[pp] = out + Dh * xt[pp];
        }
        /* fold this frame and levels 1..z into level z + 1 */
        int z = 0;
        while (((unsigned long)p >> z) & 1ul)
            z++;
        const int merged = z < K - 1 ? z : K - 1, target = z + 1 < K - 1 ? z + 1 : K - 1;
        for (int pp = 0; pp < P; pp++)
            for (int n = 0; n < N; n++)
                acc[(size_t)pp * N + (size_t)n] = dt * xt[pp] * Bt[n];
        for (int l = 1; l <= merged; l++) {
            real *u = U + (size_t)(l - 1) * PN;
            for (size_t k = 0; k < PN; k++) {
                acc[k] += u[k];
                u[k] = 0;
            }
        }
        if (target >= 1) {
            real *u = U + (size_t)(target - 1) * PN;
            for (size_t k = 0; k < PN; k++)
                u[k] += acc[k];
        }
    }
}

sb_tensor *sb_log_linear_ssd_stream(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                                    sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *dl,
                                    sb_tensor *L, sb_tensor *D, real *levels, real *pos)
{
    SB_ASSERT(!g->record && levels != NULL && pos != NULL);
    llssd_ctx c = make_ctx(x, dt_in, dt_bias, A_log, Bm, Cm, dl, L, D);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    c.y = y;
    const int B = c.B, H = c.H;
    const size_t PN = (size_t)c.P * (size_t)c.N, per_head = (size_t)(c.K - 1) * PN;
    const int nth = omp_get_max_threads();
    real *acc_all = sb_graph_alloc(g, (size_t)nth * PN * sizeof(real));
#pragma omp parallel for num_threads(nth) schedule(static)                                         \
    collapse(2) if ((size_t)B * (size_t)c.T * (size_t)c.E * (size_t)c.N > 65536)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            stream_row_head(&c, b, h, levels + ((size_t)b * H + (size_t)h) * per_head, (long)pos[b],
                            acc_all + (size_t)omp_get_thread_num() * PN);
    for (int b = 0; b < B; b++)
        pos[b] += (real)c.T;
    return y;
}

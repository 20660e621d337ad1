/* selective_scan.c - Mamba's selective scan with the D skip and the z gate fused in
 * (ops_ssm.h; derivation: docs/models/mamba.md).
 *
 * Forward, per batch b and channel e (A = -exp(A_log), h[-1] = 0):
 *   dt_t = softplus(delta_t + dt_bias),  abar_t,n = exp(dt_t A_n)
 *   h_t,n = abar_t,n h_t-1,n + dt_t B_t,n u_t
 *   ypre_t = sum_n C_t,n h_t,n + D u_t,   y_t = ypre_t silu(z_t)
 * Backward, reverse in time with lam = dl/dh (lam = 0 after the last frame):
 *   dypre = dy silu(z),  dz += dy ypre silu'(z),  dD += dypre u,  du += D dypre
 *   lam  += dypre C_t                         (now dl/dh_t)
 *   dC_t += dypre h_t
 *   gA_n  = lam_n h_t-1,n abar_t,n            (dl/d(dt_t A_n))
 *   ddt   = sum_n gA_n A_n + u_t sum_n lam_n B_t,n
 *   dA_log_n += gA_n dt_t A_n                 (dA = gA dt, dA_log = dA A)
 *   dB_t += dt_t u_t lam,  du += dt_t sum_n lam_n B_t,n
 *   ddelta += ddt softplus'(delta + dt_bias), ddt_bias += the same
 *   lam  *= abar_t                            (now dl/dh_t-1 from this path)
 *
 * The fast form runs one (b, e) recurrence at a time with its N-wide state in L1, the
 * loop over n vectorised (ssm_exp). It never stores all states: the forward keeps the
 * state at the start of every segment of SEG frames (SEG N <= 32768, so that a segment's
 * states and decays fit in L2; no checkpoint at all when T <= SEG), and the backward walks
 * the segments from last to first, recomputing each segment's states and decays from its
 * checkpoint into a SEG x N buffer before running the reverse steps over it: one extra
 * forward scan in all. In the backward, threads own batch rows: dB and dC of row b are
 * summed over e by one thread, and dA_log, dD, ddt_bias are summed over b in order from
 * per-row partials, so results do not depend on the thread count.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops_ssm.h"
#include "ops/ssm_math.h"

/* frames per backward segment for a state of N values (see the top of the file). The
 * double build (gradient checks at a few dozen frames) uses 16-frame segments so that its
 * tests cross segment boundaries; the code path is the same. */
#ifdef SB_REAL_DOUBLE
#define SEG_BUDGET 16
#else
#define SEG_BUDGET 32768
#endif
static int scan_seg(int N)
{
    const int seg = SEG_BUDGET / N;
    return seg < 16 ? 16 : seg;
}

/* raw pointers and sizes of one call */
typedef struct scan_io {
    const real *u, *delta, *bias, *A, *Bm, *Cm, *D, *z; /* A = -exp(A_log), [E][N] */
    int B, T, E, N;
} scan_io;

typedef struct scan_ctx {
    sb_tensor *u, *delta, *dt_bias, *A_log, *Bm, *Cm, *D, *z, *y;
    real *A;    /* [E][N] */
    real *ypre; /* [B][T][E] before the gate; NULL without z (then y is ypre) */
    real *ckpt; /* fast form: [B][E][nseg - 1][N] state before segments 1.. (may be NULL) */
    real *hs;   /* reference form only: every state [B][E][T][N] */
    int B, T, E, N, seg;
} scan_ctx;

static void check_shapes(sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias, sb_tensor *A_log,
                         sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, sb_tensor *z)
{
    SB_ASSERT(u->ndim == 3 && A_log->ndim == 2);
    const int B = u->shape[0], T = u->shape[1], E = u->shape[2], N = A_log->shape[1];
    SB_ASSERT(A_log->shape[0] == E && N >= 1 && N <= SB_SSM_MAX_STATE);
    SB_ASSERT(delta->size == u->size && (z == NULL || z->size == u->size));
    SB_ASSERT(Bm->size == (size_t)B * (size_t)T * (size_t)N && Cm->size == Bm->size);
    SB_ASSERT(dt_bias == NULL || (int)dt_bias->size == E);
    SB_ASSERT(D == NULL || (int)D->size == E);
}

/* A = -exp(A_log), once per call */
static real *make_A(sb_graph *g, const sb_tensor *A_log)
{
    real *A = sb_graph_alloc(g, A_log->size * sizeof(real));
    for (size_t i = 0; i < A_log->size; i++)
        A[i] = -exp(A_log->data[i]);
    return A;
}

static scan_io make_io(const real *A, sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias,
                       sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, sb_tensor *z, int N)
{
    scan_io io = {
        .u = u->data,
        .delta = delta->data,
        .bias = dt_bias != NULL ? dt_bias->data : NULL,
        .A = A,
        .Bm = Bm->data,
        .Cm = Cm->data,
        .D = D != NULL ? D->data : NULL,
        .z = z != NULL ? z->data : NULL,
        .B = u->shape[0],
        .T = u->shape[1],
        .E = u->shape[2],
        .N = N,
    };
    return io;
}

/* y = gate(ypre) */
static inline real gate(const real *z, size_t i, real ypre)
{
    return z != NULL ? ypre * z[i] * ssm_sigmoid(z[i]) : ypre;
}

/* Sums per-row partials part[B][n] over rows, in row order, into out[n]. */
static void sum_rows_into(const real *part, int B, size_t n, real *out)
{
#pragma omp parallel for schedule(static) if (n * (size_t)B > 65536)
    for (size_t i = 0; i < n; i++) {
        real acc = 0;
        for (int b = 0; b < B; b++)
            acc += part[(size_t)b * n + i];
        out[i] += acc;
    }
}

/* ---- fast form ------------------------------------------------------------------------ */

static void fast_forward(const scan_io *io, real *y, real *ypre, real *state, real *ckpt, int seg)
{
    const int B = io->B, T = io->T, E = io->E, N = io->N;
    const int nseg = (T + seg - 1) / seg;
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)E * (size_t)N > 65536)
    for (int be = 0; be < B * E; be++) {
        const int b = be / E, e = be % E;
        real h[SB_SSM_MAX_STATE];
        real *st = state != NULL ? state + (size_t)be * (size_t)N : NULL;
        for (int n = 0; n < N; n++)
            h[n] = st != NULL ? st[n] : 0;
        const real *Ae = io->A + (size_t)e * (size_t)N;
        const real bias = io->bias != NULL ? io->bias[e] : 0;
        const real Dd = io->D != NULL ? io->D[e] : 0;
        for (int t = 0; t < T; t++) {
            if (ckpt != NULL && t > 0 && t % seg == 0)
                memcpy(ckpt + ((size_t)be * (size_t)(nseg - 1) + (size_t)(t / seg - 1)) * (size_t)N,
                       h, (size_t)N * sizeof(real));
            const size_t row = (size_t)b * (size_t)T + (size_t)t, ie = row * (size_t)E + (size_t)e;
            const real dt = ssm_softplus(io->delta[ie] + bias);
            const real uu = io->u[ie], du = dt * uu;
            const real *Bt = io->Bm + row * (size_t)N, *Ct = io->Cm + row * (size_t)N;
            real part[SSM_LANES] = {0}; /* C h in fixed lanes (ssm_math.h) */
            for (int n0 = 0; n0 < N; n0 += SSM_LANES) {
                const int lanes = ssm_lanes_width(n0, N);
#pragma omp simd
                for (int k = 0; k < lanes; k++) {
                    const int n = n0 + k;
                    const real hn = fma(ssm_exp(dt * Ae[n]), h[n], du * Bt[n]);
                    h[n] = hn;
                    part[k] += Ct[n] * hn;
                }
            }
            const real yp = ssm_lanes_sum(part) + Dd * uu;
            if (ypre != NULL)
                ypre[ie] = yp;
            y[ie] = gate(io->z, ie, yp);
        }
        if (st != NULL)
            memcpy(st, h, (size_t)N * sizeof(real));
    }
}

static void fast_backward(sb_graph *g, void *ctx)
{
    scan_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, E = c->E, N = c->N;
    const scan_io io0 = make_io(c->A, c->u, c->delta, c->dt_bias, c->Bm, c->Cm, c->D, c->z, N);
    const scan_io *io = &io0;
    const size_t BTN = (size_t)B * (size_t)T * (size_t)N;
    const real *dy = c->y->grad, *ypre = c->ypre != NULL ? c->ypre : c->y->data;
    real *du = c->u->requires_grad ? sb_tensor_grad(g, c->u) : NULL;
    real *ddelta = c->delta->requires_grad ? sb_tensor_grad(g, c->delta) : NULL;
    real *dz = c->z != NULL && c->z->requires_grad ? sb_tensor_grad(g, c->z) : NULL;
    /* dB, dC are accumulated in place (into scratch when not wanted) */
    real *dB = c->Bm->requires_grad ? sb_tensor_grad(g, c->Bm) : NULL;
    real *dC = c->Cm->requires_grad ? sb_tensor_grad(g, c->Cm) : NULL;
    if (dB == NULL || dC == NULL) {
        real *scratch = sb_graph_alloc(g, BTN * sizeof(real));
        memset(scratch, 0, BTN * sizeof(real));
        dB = dB != NULL ? dB : scratch;
        dC = dC != NULL ? dC : scratch;
    }
    /* per-row partials of the parameter gradients */
    const size_t EN = (size_t)E * (size_t)N;
    real *dAlog_part = sb_graph_alloc(g, (size_t)B * EN * sizeof(real));
    real *dD_part = sb_graph_alloc(g, (size_t)B * (size_t)E * sizeof(real));
    real *dbias_part = sb_graph_alloc(g, (size_t)B * (size_t)E * sizeof(real));
    const int seg = c->seg, nseg = (T + seg - 1) / seg;
    const size_t ws_floats = 2 * (size_t)seg * (size_t)N + 3 * (size_t)N + (size_t)seg;
    /* one workspace per thread, taken from the arena before the parallel region */
    const int nth = omp_get_max_threads();
    real *ws_all = sb_graph_alloc(g, (size_t)nth * ws_floats * sizeof(real));

#pragma omp parallel num_threads(nth) if (EN * (size_t)T > 16384)
    {
        real *hseg = ws_all + (size_t)omp_get_thread_num() * ws_floats; /* [seg][N] states */
        real *aseg = hseg + (size_t)seg * (size_t)N;                    /* [seg][N] decays */
        real *h0 = aseg + (size_t)seg * (size_t)N;      /* [N] state before the segment */
        real *h = h0 + N, *lam = h + N, *dts = lam + N; /* dts [seg]: dt of each frame */
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            memset(dAlog_part + (size_t)b * EN, 0, EN * sizeof(real));
            for (int e = 0; e < E; e++) {
                const real *Ae = io->A + (size_t)e * (size_t)N;
                const real bias = io->bias != NULL ? io->bias[e] : 0;
                const real Dd = io->D != NULL ? io->D[e] : 0;
                real *dAl = dAlog_part + (size_t)b * EN + (size_t)e * (size_t)N;
                const size_t be = (size_t)b * (size_t)E + (size_t)e;
                memset(lam, 0, (size_t)N * sizeof(real));
                real dD_acc = 0, dbias_acc = 0;
                for (int sg = nseg - 1; sg >= 0; sg--) {
                    const int t0 = sg * seg, t1 = t0 + seg < T ? t0 + seg : T;
                    /* recompute the segment's decays and states from its checkpoint */
                    if (sg == 0)
                        memset(h0, 0, (size_t)N * sizeof(real));
                    else
                        memcpy(h0,
                               c->ckpt + (be * (size_t)(nseg - 1) + (size_t)(sg - 1)) * (size_t)N,
                               (size_t)N * sizeof(real));
                    memcpy(h, h0, (size_t)N * sizeof(real));
                    for (int t = t0; t < t1; t++) {
                        const size_t row = (size_t)b * (size_t)T + (size_t)t;
                        const size_t ie = row * (size_t)E + (size_t)e;
                        const real dt = ssm_softplus(io->delta[ie] + bias), dtu = dt * io->u[ie];
                        const real *Bt = io->Bm + row * (size_t)N;
                        real *at = aseg + (size_t)(t - t0) * (size_t)N;
                        real *ht = hseg + (size_t)(t - t0) * (size_t)N;
                        dts[t - t0] = dt;
#pragma omp simd
                        for (int n = 0; n < N; n++) {
                            const real a = ssm_exp(dt * Ae[n]);
                            at[n] = a;
                            h[n] = ht[n] = fma(a, h[n], dtu * Bt[n]);
                        }
                    }
                    /* reverse steps */
                    for (int t = t1 - 1; t >= t0; t--) {
                        const size_t row = (size_t)b * (size_t)T + (size_t)t;
                        const size_t ie = row * (size_t)E + (size_t)e;
                        const real pre = io->delta[ie] + bias;
                        const real dt = dts[t - t0], uu = io->u[ie];
                        real dyp = dy[ie];
                        if (io->z != NULL) {
                            const real zz = io->z[ie], s = ssm_sigmoid(zz);
                            if (dz != NULL)
                                dz[ie] += dyp * ypre[ie] * s * (1 + zz * (1 - s));
                            dyp *= zz * s;
                        }
                        dD_acc += dyp * uu;
                        const real *ht = hseg + (size_t)(t - t0) * (size_t)N;
                        const real *at = aseg + (size_t)(t - t0) * (size_t)N;
                        const real *hp = t > t0 ? ht - N : h0;
                        const real *Bt = io->Bm + row * (size_t)N, *Ct = io->Cm + row * (size_t)N;
                        real *dBt = dB + row * (size_t)N, *dCt = dC + row * (size_t)N;
                        const real dtu = dt * uu;
                        real p1[SSM_LANES] = {0}, p2[SSM_LANES] = {0}; /* fixed lanes */
                        for (int n0 = 0; n0 < N; n0 += SSM_LANES) {
                            const int lanes = ssm_lanes_width(n0, N);
#pragma omp simd
                            for (int k = 0; k < lanes; k++) {
                                const int n = n0 + k;
                                const real l = fma(dyp, Ct[n], lam[n]);
                                dCt[n] = fma(dyp, ht[n], dCt[n]);
                                const real gAA = l * hp[n] * at[n] * Ae[n];
                                p1[k] += gAA;
                                p2[k] += l * Bt[n];
                                dAl[n] = fma(gAA, dt, dAl[n]);
                                dBt[n] = fma(dtu, l, dBt[n]);
                                lam[n] = l * at[n];
                            }
                        }
                        const real s1 = ssm_lanes_sum(p1), s2 = ssm_lanes_sum(p2);
                        if (du != NULL)
                            du[ie] += dt * s2 + Dd * dyp;
                        const real dpre = (s1 + uu * s2) * ssm_softplus_grad(pre);
                        if (ddelta != NULL)
                            ddelta[ie] += dpre;
                        dbias_acc += dpre;
                    }
                }
                dD_part[be] = dD_acc;
                dbias_part[be] = dbias_acc;
            }
        }
    }
    if (c->A_log->requires_grad)
        sum_rows_into(dAlog_part, B, EN, sb_tensor_grad(g, c->A_log));
    if (c->D != NULL && c->D->requires_grad)
        sum_rows_into(dD_part, B, (size_t)E, sb_tensor_grad(g, c->D));
    if (c->dt_bias != NULL && c->dt_bias->requires_grad)
        sum_rows_into(dbias_part, B, (size_t)E, sb_tensor_grad(g, c->dt_bias));
}

static int any_grad(sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias, sb_tensor *A_log,
                    sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, sb_tensor *z)
{
    return u->requires_grad || delta->requires_grad || A_log->requires_grad || Bm->requires_grad ||
           Cm->requires_grad || (dt_bias != NULL && dt_bias->requires_grad) ||
           (D != NULL && D->requires_grad) || (z != NULL && z->requires_grad);
}

sb_tensor *sb_selective_scan(sb_graph *g, sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias,
                             sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D,
                             sb_tensor *z, real *state)
{
    check_shapes(u, delta, dt_bias, A_log, Bm, Cm, D, z);
    const int N = A_log->shape[1];
    sb_tensor *y = sb_tensor_new(g, 3, u->shape);
    y->requires_grad = any_grad(u, delta, dt_bias, A_log, Bm, Cm, D, z);
    scan_ctx *c = y->requires_grad ? sb_graph_record(g, fast_backward, sizeof *c) : NULL;
    SB_ASSERT(c == NULL || state == NULL); /* the backward assumes h[-1] = 0 */
    real *A = make_A(g, A_log);
    real *ypre = c != NULL && z != NULL ? sb_graph_alloc(g, u->size * sizeof(real)) : NULL;
    scan_io io = make_io(A, u, delta, dt_bias, Bm, Cm, D, z, N);
    const int seg = scan_seg(N), nseg = (io.T + seg - 1) / seg;
    real *ckpt = c != NULL && nseg > 1
                     ? sb_graph_alloc(g, (size_t)io.B * (size_t)io.E * (size_t)(nseg - 1) *
                                             (size_t)N * sizeof(real))
                     : NULL;
    fast_forward(&io, y->data, ypre, state, ckpt, seg);
    if (c != NULL) {
        c->u = u, c->delta = delta, c->dt_bias = dt_bias, c->A_log = A_log, c->Bm = Bm;
        c->Cm = Cm, c->D = D, c->z = z, c->y = y, c->A = A, c->ypre = ypre, c->ckpt = ckpt;
        c->B = io.B, c->T = io.T, c->E = io.E, c->N = N, c->seg = seg;
    }
    return y;
}

/* ---- reference form: the recurrence as written, every state kept ------------------------ */

static void ref_backward(sb_graph *g, void *ctx)
{
    scan_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, E = c->E, N = c->N;
    const real *u = c->u->data, *delta = c->delta->data, *A = c->A;
    const real *Bm = c->Bm->data, *Cm = c->Cm->data, *dy = c->y->grad;
    const real *z = c->z != NULL ? c->z->data : NULL;
    real *lam = sb_graph_alloc(g, (size_t)N * sizeof(real));
    real *dA = sb_graph_alloc(g, (size_t)E * (size_t)N * sizeof(real));
    memset(dA, 0, (size_t)E * (size_t)N * sizeof(real));
    real *du = c->u->requires_grad ? sb_tensor_grad(g, c->u) : NULL;
    real *ddelta = c->delta->requires_grad ? sb_tensor_grad(g, c->delta) : NULL;
    real *dB = c->Bm->requires_grad ? sb_tensor_grad(g, c->Bm) : NULL;
    real *dC = c->Cm->requires_grad ? sb_tensor_grad(g, c->Cm) : NULL;
    real *dz = z != NULL && c->z->requires_grad ? sb_tensor_grad(g, c->z) : NULL;
    real *dD = c->D != NULL && c->D->requires_grad ? sb_tensor_grad(g, c->D) : NULL;
    real *dbias =
        c->dt_bias != NULL && c->dt_bias->requires_grad ? sb_tensor_grad(g, c->dt_bias) : NULL;
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) {
            const real bias = c->dt_bias != NULL ? c->dt_bias->data[e] : 0;
            const real Dd = c->D != NULL ? c->D->data[e] : 0;
            for (int n = 0; n < N; n++)
                lam[n] = 0;
            for (int t = T - 1; t >= 0; t--) {
                const size_t row = (size_t)b * T + (size_t)t, ie = row * E + (size_t)e;
                const real *h = c->hs + (((size_t)b * E + (size_t)e) * T + (size_t)t) * N;
                const real pre = delta[ie] + bias, dt = ssm_softplus(pre);
                real dyp = dy[ie];
                if (z != NULL) {
                    const real s = ssm_sigmoid(z[ie]);
                    if (dz != NULL)
                        dz[ie] += dyp * c->ypre[ie] * s * (1 + z[ie] * (1 - s));
                    dyp = dyp * z[ie] * s;
                }
                if (dD != NULL)
                    dD[e] += dyp * u[ie];
                real ddt = 0, lb = 0;
                for (int n = 0; n < N; n++) {
                    lam[n] += dyp * Cm[row * N + (size_t)n];
                    if (dC != NULL)
                        dC[row * N + (size_t)n] += dyp * h[n];
                    const real hprev = t > 0 ? (h - N)[n] : 0;
                    const real abar = exp(dt * A[(size_t)e * N + (size_t)n]);
                    const real gA = lam[n] * hprev;
                    ddt += gA * abar * A[(size_t)e * N + (size_t)n];
                    dA[(size_t)e * N + (size_t)n] += gA * abar * dt;
                    lb += lam[n] * Bm[row * N + (size_t)n];
                    if (dB != NULL)
                        dB[row * N + (size_t)n] += dt * u[ie] * lam[n];
                    lam[n] *= abar;
                }
                ddt += u[ie] * lb;
                if (du != NULL)
                    du[ie] += dt * lb + Dd * dyp;
                const real dpre = ddt * ssm_softplus_grad(pre);
                if (ddelta != NULL)
                    ddelta[ie] += dpre;
                if (dbias != NULL)
                    dbias[e] += dpre;
            }
        }
    if (c->A_log->requires_grad) {
        real *dAlog = sb_tensor_grad(g, c->A_log);
        for (size_t i = 0; i < (size_t)E * (size_t)N; i++)
            dAlog[i] += dA[i] * A[i];
    }
}

sb_tensor *sb_selective_scan_ref(sb_graph *g, sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias,
                                 sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D,
                                 sb_tensor *z, real *state)
{
    check_shapes(u, delta, dt_bias, A_log, Bm, Cm, D, z);
    const int B = u->shape[0], T = u->shape[1], E = u->shape[2], N = A_log->shape[1];
    sb_tensor *y = sb_tensor_new(g, 3, u->shape);
    y->requires_grad = any_grad(u, delta, dt_bias, A_log, Bm, Cm, D, z);
    scan_ctx *c = y->requires_grad ? sb_graph_record(g, ref_backward, sizeof *c) : NULL;
    SB_ASSERT(c == NULL || state == NULL);
    real *A = make_A(g, A_log);
    real *hs = c != NULL ? sb_graph_alloc(g, u->size * (size_t)N * sizeof(real)) : NULL;
    real *ypre = c != NULL ? sb_graph_alloc(g, u->size * sizeof(real)) : NULL;
    real *h = sb_graph_alloc(g, (size_t)N * sizeof(real));
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) {
            real *st = state != NULL ? state + ((size_t)b * E + (size_t)e) * N : NULL;
            for (int n = 0; n < N; n++)
                h[n] = st != NULL ? st[n] : 0;
            const real bias = dt_bias != NULL ? dt_bias->data[e] : 0;
            for (int t = 0; t < T; t++) {
                const size_t row = (size_t)b * T + (size_t)t, ie = row * E + (size_t)e;
                const real dt = ssm_softplus(delta->data[ie] + bias);
                real acc = 0;
                for (int n = 0; n < N; n++) {
                    const real abar = exp(dt * A[(size_t)e * N + (size_t)n]);
                    h[n] = abar * h[n] + dt * Bm->data[row * N + (size_t)n] * u->data[ie];
                    acc += Cm->data[row * N + (size_t)n] * h[n];
                }
                if (hs != NULL)
                    memcpy(hs + (((size_t)b * E + (size_t)e) * T + (size_t)t) * N, h,
                           (size_t)N * sizeof(real));
                const real yp = acc + (D != NULL ? D->data[e] : 0) * u->data[ie];
                if (ypre != NULL)
                    ypre[ie] = yp;
                y->data[ie] = gate(z != NULL ? z->data : NULL, ie, yp);
            }
            if (st != NULL)
                memcpy(st, h, (size_t)N * sizeof(real));
        }
    if (c != NULL) {
        c->u = u, c->delta = delta, c->dt_bias = dt_bias, c->A_log = A_log, c->Bm = Bm;
        c->Cm = Cm, c->D = D, c->z = z, c->y = y, c->A = A, c->ypre = ypre, c->hs = hs;
        c->B = B, c->T = T, c->E = E, c->N = N;
    }
    return y;
}

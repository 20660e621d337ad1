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
 * The fast form runs SCAN_W = 8 channels of one batch row side by side, one channel per
 * vector lane: a frame's dt, u, z of those channels are one contiguous load, B_t,n and C_t,n
 * are broadcast, and every operation is lane-wise (the exp on whole vectors), so each
 * channel's arithmetic is the scalar recurrence's in its own lane, in the same order for
 * every instruction set. The sum over n of C h is one running sum per lane, in n order. A
 * block's state, [N][SCAN_W], stays in L1. A last block of fewer channels runs with its
 * missing lanes fed zeros, which keep their states and every gradient they touch at 0.
 *
 * It never stores all states: the forward keeps each block's state at the start of every
 * segment of SEG frames (scan_seg: SEG N SCAN_W about 16k values, so that a segment's
 * states, decays and gradient sums fit in L2; at most about 8 E floats of checkpoint per
 * frame), and the backward walks the segments from last to first; in each segment it takes
 * every block of the row in turn: the block's states and decays recomputed from its
 * checkpoint into [SEG][N][SCAN_W] buffers, then the reverse steps over them, the block's lam
 * carried from segment to segment (one extra forward scan in all). dB_t,n and dC_t,n are sums
 * over the channels: each lane sums its channels block after block, and at the end of a
 * segment the 8 lanes are added in a fixed tree (ssm_lanes_sum). Threads own (row, block)
 * pairs in the forward and batch rows in the backward; dA_log, dD, ddt_bias are summed over
 * b in order from per-row partials, so results do not depend on the thread count.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops_ssm.h"
#include "ops/ssm_math.h"

/* channels per vector (ssm_lanes_sum adds a lane vector of this width) */
#define SCAN_W 8
_Static_assert(SCAN_W == SSM_LANES, "a block's lanes are summed by ssm_lanes_sum");

/* Frames per backward segment for a state of N values (see the top of the file). The
 * double build (gradient checks at a few dozen frames) uses segments of a few frames so that
 * its tests cross segment boundaries; the code path is the same. */
#ifdef SB_REAL_DOUBLE
#define SEG_BUDGET 128
#define SEG_MIN 2
#else
#define SEG_BUDGET 16384
#define SEG_MIN 4
#endif
static int scan_seg(int N)
{
    int seg = SEG_BUDGET / (N * SCAN_W);
    const int ckpt_floor = (N + 7) / 8; /* checkpoints of at most 8 E floats per frame */
    if (seg < ckpt_floor)
        seg = ckpt_floor;
    return seg < SEG_MIN ? SEG_MIN : seg;
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
    real *ckpt; /* fast form: [B][blocks][nseg - 1][N][SCAN_W] state before segments 1..
                   (may be NULL) */
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

/* The lanes of one block: channels e0 .. e0 + w - 1 of a row of x ([..][E]); the missing
 * lanes of a last, narrower block read 0. */
static inline void block_load(real *dst, const real *row, int w)
{
    for (int k = 0; k < SCAN_W; k++)
        dst[k] = k < w ? row[k] : 0;
}

/* A of the block's channels as [N][SCAN_W] (missing lanes: -1, any finite decay will do) */
static void block_A(const scan_io *io, int e0, int w, real *Ab)
{
    for (int n = 0; n < io->N; n++)
        for (int k = 0; k < SCAN_W; k++)
            Ab[(size_t)n * SCAN_W + (size_t)k] =
                k < w ? io->A[(size_t)(e0 + k) * (size_t)io->N + (size_t)n] : -1;
}

/* dt, dt u and u of frame `row` for the block's lanes */
static inline void block_frame(const scan_io *io, size_t row, int e0, int w, const real *bias,
                               real *dt, real *dtu, real *uu)
{
    real del[SCAN_W];
    block_load(del, io->delta + row * (size_t)io->E + (size_t)e0, w);
    block_load(uu, io->u + row * (size_t)io->E + (size_t)e0, w);
    for (int k = 0; k < SCAN_W; k++) {
        dt[k] = ssm_softplus(del[k] + bias[k]);
        dtu[k] = dt[k] * uu[k];
    }
}

static void fast_forward(const scan_io *io, real *y, real *ypre, real *state, real *ckpt, int seg)
{
    const int B = io->B, T = io->T, E = io->E, N = io->N;
    const int nblk = (E + SCAN_W - 1) / SCAN_W, nseg = (T + seg - 1) / seg;
    const size_t NW = (size_t)N * SCAN_W;
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)E * (size_t)N > 65536)
    for (int bk = 0; bk < B * nblk; bk++) {
        const int b = bk / nblk, e0 = (bk % nblk) * SCAN_W;
        const int w = E - e0 < SCAN_W ? E - e0 : SCAN_W;
        real h[SB_SSM_MAX_STATE * SCAN_W], Ab[SB_SSM_MAX_STATE * SCAN_W];
        block_A(io, e0, w, Ab);
        real *st = state != NULL ? state + ((size_t)b * (size_t)E + (size_t)e0) * (size_t)N : NULL;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < SCAN_W; k++)
                h[(size_t)n * SCAN_W + (size_t)k] =
                    st != NULL && k < w ? st[(size_t)k * (size_t)N + (size_t)n] : 0;
        real bias[SCAN_W], Dd[SCAN_W];
        block_load(bias, io->bias != NULL ? io->bias + e0 : NULL, io->bias != NULL ? w : 0);
        block_load(Dd, io->D != NULL ? io->D + e0 : NULL, io->D != NULL ? w : 0);
        for (int t = 0; t < T; t++) {
            if (ckpt != NULL && t > 0 && t % seg == 0)
                memcpy(ckpt + ((size_t)bk * (size_t)(nseg - 1) + (size_t)(t / seg - 1)) * NW, h,
                       NW * sizeof(real));
            const size_t row = (size_t)b * (size_t)T + (size_t)t;
            real dt[SCAN_W], dtu[SCAN_W], uu[SCAN_W], acc[SCAN_W] = {0};
            block_frame(io, row, e0, w, bias, dt, dtu, uu);
            const real *Bt = io->Bm + row * (size_t)N, *Ct = io->Cm + row * (size_t)N;
            for (int n = 0; n < N; n++) {
                const real bn = Bt[n], cn = Ct[n];
                real *hn = h + (size_t)n * SCAN_W;
                const real *an = Ab + (size_t)n * SCAN_W;
#pragma omp simd
                for (int k = 0; k < SCAN_W; k++) {
                    hn[k] = fma(ssm_exp(dt[k] * an[k]), hn[k], dtu[k] * bn);
                    acc[k] = fma(cn, hn[k], acc[k]);
                }
            }
            const size_t ie = row * (size_t)E + (size_t)e0;
            for (int k = 0; k < w; k++) {
                const real yp = fma(Dd[k], uu[k], acc[k]);
                if (ypre != NULL)
                    ypre[ie + (size_t)k] = yp;
                y[ie + (size_t)k] = gate(io->z, ie + (size_t)k, yp);
            }
        }
        if (st != NULL)
            for (int n = 0; n < N; n++)
                for (int k = 0; k < w; k++)
                    st[(size_t)k * (size_t)N + (size_t)n] = h[(size_t)n * SCAN_W + (size_t)k];
    }
}

/* What the backward of one batch row works in (one per thread, from the arena). */
typedef struct scan_ws {
    real *lam, *dAl;     /* [blocks][N][W]: dl/dh carried between segments; dA_log sums */
    real *dD, *dbias;    /* [blocks][W] */
    real *hseg, *aseg;   /* [seg][N][W]: the segment's states and decays */
    real *dCacc, *dBacc; /* [seg][N][W]: the segment's dC, dB sums over blocks, per lane */
    real *h0, *Ab, *dts; /* [N][W] state before the segment, [N][W] A, [seg][W] dt */
} scan_ws;

static size_t scan_ws_floats(int nblk, int seg, int N)
{
    const size_t NW = (size_t)N * SCAN_W;
    return 2 * (size_t)nblk * NW + 2 * (size_t)nblk * SCAN_W + 4 * (size_t)seg * NW + 2 * NW +
           (size_t)seg * SCAN_W;
}

static scan_ws scan_ws_at(real *p, int nblk, int seg, int N)
{
    const size_t NW = (size_t)N * SCAN_W, SNW = (size_t)seg * NW, BNW = (size_t)nblk * NW;
    scan_ws w;
    w.lam = p, w.dAl = p + BNW, p += 2 * BNW;
    w.dD = p, w.dbias = p + (size_t)nblk * SCAN_W, p += 2 * (size_t)nblk * SCAN_W;
    w.hseg = p, w.aseg = p + SNW, w.dCacc = p + 2 * SNW, w.dBacc = p + 3 * SNW, p += 4 * SNW;
    w.h0 = p, w.Ab = p + NW, w.dts = p + 2 * NW;
    return w;
}

/* The gradients one call writes into (NULL: not wanted) and its inputs. */
typedef struct scan_grads {
    const real *dy, *ypre;
    real *du, *ddelta, *dz;
} scan_grads;

/* Recomputes the states and decays of block blk over frames t0 .. t1 - 1 of row b from the
 * checkpoint before them (zero before the first segment). */
static void block_recompute(const scan_io *io, const real *ckpt, int b, int blk, int nblk, int sg,
                            int nseg, int t0, int t1, const real *bias, scan_ws *w)
{
    const int N = io->N, e0 = blk * SCAN_W;
    const int wd = io->E - e0 < SCAN_W ? io->E - e0 : SCAN_W;
    const size_t NW = (size_t)N * SCAN_W;
    if (sg == 0)
        memset(w->h0, 0, NW * sizeof(real));
    else
        memcpy(w->h0,
               ckpt + (((size_t)b * (size_t)nblk + (size_t)blk) * (size_t)(nseg - 1) +
                       (size_t)(sg - 1)) *
                          NW,
               NW * sizeof(real));
    for (int t = t0; t < t1; t++) {
        const size_t row = (size_t)b * (size_t)io->T + (size_t)t;
        real dtu[SCAN_W], uu[SCAN_W];
        real *dt = w->dts + (size_t)(t - t0) * SCAN_W;
        block_frame(io, row, e0, wd, bias, dt, dtu, uu);
        const real *Bt = io->Bm + row * (size_t)N;
        const real *hp = t > t0 ? w->hseg + (size_t)(t - t0 - 1) * NW : w->h0;
        real *ht = w->hseg + (size_t)(t - t0) * NW, *at = w->aseg + (size_t)(t - t0) * NW;
        for (int n = 0; n < N; n++) {
            const real bn = Bt[n];
            const size_t o = (size_t)n * SCAN_W;
#pragma omp simd
            for (int k = 0; k < SCAN_W; k++) {
                const real a = ssm_exp(dt[k] * w->Ab[o + (size_t)k]);
                at[o + (size_t)k] = a;
                ht[o + (size_t)k] = fma(a, hp[o + (size_t)k], dtu[k] * bn);
            }
        }
    }
}

/* The reverse steps of block blk over frames t1 - 1 down to t0 of row b (after
 * block_recompute): lam, dA_log, dD, ddt_bias of the block and the segment's lane sums of
 * dB and dC. */
static void block_reverse(const scan_io *io, const scan_grads *gr, int b, int blk, int t0, int t1,
                          const real *bias, scan_ws *w)
{
    const int N = io->N, E = io->E, e0 = blk * SCAN_W;
    const int wd = E - e0 < SCAN_W ? E - e0 : SCAN_W;
    const size_t NW = (size_t)N * SCAN_W;
    real *lam = w->lam + (size_t)blk * NW, *dAl = w->dAl + (size_t)blk * NW;
    real *dD = w->dD + (size_t)blk * SCAN_W, *dbias = w->dbias + (size_t)blk * SCAN_W;
    real Dd[SCAN_W];
    block_load(Dd, io->D != NULL ? io->D + e0 : NULL, io->D != NULL ? wd : 0);
    for (int t = t1 - 1; t >= t0; t--) {
        const size_t row = (size_t)b * (size_t)io->T + (size_t)t;
        const size_t ie = row * (size_t)E + (size_t)e0;
        const real *dt = w->dts + (size_t)(t - t0) * SCAN_W;
        real uu[SCAN_W], del[SCAN_W], dyp[SCAN_W], dtu[SCAN_W];
        block_load(uu, io->u + ie, wd);
        block_load(del, io->delta + ie, wd);
        block_load(dyp, gr->dy + ie, wd);
        if (io->z != NULL) {
            for (int k = 0; k < wd; k++) {
                const real zz = io->z[ie + (size_t)k], s = ssm_sigmoid(zz);
                if (gr->dz != NULL)
                    gr->dz[ie + (size_t)k] +=
                        dyp[k] * gr->ypre[ie + (size_t)k] * s * (1 + zz * (1 - s));
                dyp[k] *= zz * s;
            }
        }
        for (int k = 0; k < SCAN_W; k++) {
            dD[k] += dyp[k] * uu[k];
            dtu[k] = dt[k] * uu[k];
        }
        const real *ht = w->hseg + (size_t)(t - t0) * NW, *at = w->aseg + (size_t)(t - t0) * NW;
        const real *hp = t > t0 ? ht - NW : w->h0;
        const real *Bt = io->Bm + row * (size_t)N, *Ct = io->Cm + row * (size_t)N;
        real *dCt = w->dCacc + (size_t)(t - t0) * NW, *dBt = w->dBacc + (size_t)(t - t0) * NW;
        real p1[SCAN_W] = {0}, p2[SCAN_W] = {0};
        for (int n = 0; n < N; n++) {
            const real bn = Bt[n], cn = Ct[n];
            const size_t o = (size_t)n * SCAN_W;
#pragma omp simd
            for (int k = 0; k < SCAN_W; k++) {
                const size_t i = o + (size_t)k;
                const real l = fma(dyp[k], cn, lam[i]);
                dCt[i] = fma(dyp[k], ht[i], dCt[i]);
                const real gAA = l * hp[i] * at[i] * w->Ab[i];
                p1[k] += gAA;
                p2[k] = fma(l, bn, p2[k]);
                dAl[i] = fma(gAA, dt[k], dAl[i]);
                dBt[i] = fma(dtu[k], l, dBt[i]);
                lam[i] = l * at[i];
            }
        }
        for (int k = 0; k < wd; k++) {
            if (gr->du != NULL)
                gr->du[ie + (size_t)k] += dt[k] * p2[k] + Dd[k] * dyp[k];
            const real dpre = (p1[k] + uu[k] * p2[k]) * ssm_softplus_grad(del[k] + bias[k]);
            if (gr->ddelta != NULL)
                gr->ddelta[ie + (size_t)k] += dpre;
            dbias[k] += dpre;
        }
    }
}

/* The backward of batch row b: every segment from the last, every block in it; the lane
 * sums of dB and dC go into the gradients at the end of each segment; the block sums of
 * dA_log, dD and ddt_bias into the row's partials at the end. */
static void row_backward(const scan_io *io, const scan_grads *gr, const real *ckpt, int b, int seg,
                         real *dB, real *dC, real *dAlog_part, real *dD_part, real *dbias_part,
                         scan_ws *w)
{
    const int T = io->T, E = io->E, N = io->N;
    const int nblk = (E + SCAN_W - 1) / SCAN_W, nseg = (T + seg - 1) / seg;
    const size_t NW = (size_t)N * SCAN_W;
    memset(w->lam, 0, 2 * (size_t)nblk * NW * sizeof(real));    /* lam, dAl */
    memset(w->dD, 0, 2 * (size_t)nblk * SCAN_W * sizeof(real)); /* dD, dbias */
    for (int sg = nseg - 1; sg >= 0; sg--) {
        const int t0 = sg * seg, t1 = t0 + seg < T ? t0 + seg : T;
        memset(w->dCacc, 0, 2 * (size_t)seg * NW * sizeof(real)); /* dCacc, dBacc */
        for (int blk = 0; blk < nblk; blk++) {
            const int e0 = blk * SCAN_W, wd = E - e0 < SCAN_W ? E - e0 : SCAN_W;
            real bias[SCAN_W];
            block_load(bias, io->bias != NULL ? io->bias + e0 : NULL, io->bias != NULL ? wd : 0);
            block_A(io, e0, wd, w->Ab);
            block_recompute(io, ckpt, b, blk, nblk, sg, nseg, t0, t1, bias, w);
            block_reverse(io, gr, b, blk, t0, t1, bias, w);
        }
        for (int t = t0; t < t1; t++) {
            const size_t row = (size_t)b * (size_t)T + (size_t)t;
            for (int n = 0; n < N; n++) {
                const size_t o = (size_t)(t - t0) * NW + (size_t)n * SCAN_W;
                dC[row * (size_t)N + (size_t)n] += ssm_lanes_sum(w->dCacc + o);
                dB[row * (size_t)N + (size_t)n] += ssm_lanes_sum(w->dBacc + o);
            }
        }
    }
    for (int blk = 0; blk < nblk; blk++) {
        const int e0 = blk * SCAN_W, wd = E - e0 < SCAN_W ? E - e0 : SCAN_W;
        for (int k = 0; k < wd; k++) {
            const size_t be = (size_t)b * (size_t)E + (size_t)(e0 + k);
            for (int n = 0; n < N; n++)
                dAlog_part[be * (size_t)N + (size_t)n] =
                    w->dAl[(size_t)blk * NW + (size_t)n * SCAN_W + (size_t)k];
            dD_part[be] = w->dD[(size_t)blk * SCAN_W + (size_t)k];
            dbias_part[be] = w->dbias[(size_t)blk * SCAN_W + (size_t)k];
        }
    }
}

static void fast_backward(sb_graph *g, void *ctx)
{
    scan_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, E = c->E, N = c->N;
    const scan_io io = make_io(c->A, c->u, c->delta, c->dt_bias, c->Bm, c->Cm, c->D, c->z, N);
    const size_t BTN = (size_t)B * (size_t)T * (size_t)N;
    scan_grads gr = {
        .dy = c->y->grad,
        .ypre = c->ypre != NULL ? c->ypre : c->y->data,
        .du = c->u->requires_grad ? sb_tensor_grad(g, c->u) : NULL,
        .ddelta = c->delta->requires_grad ? sb_tensor_grad(g, c->delta) : NULL,
        .dz = c->z != NULL && c->z->requires_grad ? sb_tensor_grad(g, c->z) : NULL,
    };
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
    const int seg = c->seg, nblk = (E + SCAN_W - 1) / SCAN_W;
    /* one workspace per thread, taken from the arena before the parallel region */
    const size_t ws_floats = scan_ws_floats(nblk, seg, N);
    const int nth = omp_get_max_threads();
    real *ws_all = sb_graph_alloc(g, (size_t)nth * ws_floats * sizeof(real));

#pragma omp parallel num_threads(nth) if (EN * (size_t)T > 16384)
    {
        scan_ws w = scan_ws_at(ws_all + (size_t)omp_get_thread_num() * ws_floats, nblk, seg, N);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++)
            row_backward(&io, &gr, c->ckpt, b, seg, dB, dC, dAlog_part, dD_part, dbias_part, &w);
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
    const int nblk = (io.E + SCAN_W - 1) / SCAN_W;
    real *ckpt = c != NULL && nseg > 1
                     ? sb_graph_alloc(g, (size_t)io.B * (size_t)nblk * (size_t)(nseg - 1) *
                                             (size_t)N * SCAN_W * sizeof(real))
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

/* s4_kernel.c - the S4D ops (ops_s4.h; docs/models/s4.md;
 * derivations in docs/models/s4.md):
 *   - the kernel K[h, l] = 2 Re sum_n C q w^l from the diagonal parameters, and its
 *     backward to log_dt, C, log_A_real and A_imag;
 *   - the causal convolution y = K * u + D u by real FFTs (FFTW), and the direct sum;
 *   - the same map as a diagonal recurrence (streaming evaluation, test oracle);
 *   - the time-tied dropout and the GLU of the block's output.
 *
 * Parameter chain shared by the kernel and the recurrence backward (complex gradients as
 * dRe + i dIm, per channel h and mode n):
 *   zeta = dt A, w = e^zeta, q = (w - 1) / A, and from g_zeta, g_q:
 *   g_A  = g_zeta dt + g_q conj(dq/dA),   dq/dA = (dt w A - (w - 1)) / A^2
 *   d dt = Re(g_zeta conj(A)) + Re(g_q conj(w))          (dq/ddt = w)
 *   dlog_A_real = Re(g_A) (-exp(log_A_real)),  dA_imag = Im(g_A),  dlog_dt = d dt * dt. */
#include <fftw3.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "ops/ops_s4.h"

#include "tensor/fastmath.h"

#define PAR_MIN 32768 /* below this much work, one thread */

/* ---- per-mode coefficients ------------------------------------------------------------ */

typedef struct s4_mode {
    double ar, ai; /* A */
    double wr, wi; /* w = e^zeta */
    double er, ei; /* e^zeta - 1 (accurate for small zeta) */
    double qr, qi; /* q = (e^zeta - 1) / A */
} s4_mode;

/* Coefficients of channel h: modes[n] for n < N2; returns dt. */
static double s4_modes(const real *log_dt, const real *log_A_real, const real *A_imag, int h,
                       int N2, s4_mode *modes)
{
    const double dt = exp((double)log_dt[h]);
    for (int n = 0; n < N2; n++) {
        s4_mode *m = &modes[n];
        const size_t i = (size_t)h * (size_t)N2 + (size_t)n;
        m->ar = -exp((double)log_A_real[i]);
        m->ai = (double)A_imag[i];
        const double zr = dt * m->ar, zi = dt * m->ai;
        const double ez = exp(zr), c = cos(zi), s = sin(zi), sh = sin(0.5 * zi);
        m->wr = ez * c;
        m->wi = ez * s;
        /* e^zeta - 1 = (expm1(zr) cos zi - 2 sin^2(zi / 2)) + i e^zr sin zi */
        m->er = expm1(zr) * c - 2.0 * sh * sh;
        m->ei = m->wi;
        const double den = m->ar * m->ar + m->ai * m->ai;
        m->qr = (m->er * m->ar + m->ei * m->ai) / den;
        m->qi = (m->ei * m->ar - m->er * m->ai) / den;
    }
    return dt;
}

/* The chain from (g_zeta, g_q) of one mode to dlog_A_real, dA_imag (accumulated into
 * *dlar, *daim when not NULL); returns the mode's d dt. */
static double s4_mode_backward(const s4_mode *m, double dt, double gzr, double gzi, double gqr,
                               double gqi, real *dlar, real *daim)
{
    /* dq/dA = (dt w A - (w - 1)) / A^2 */
    const double twr = dt * (m->wr * m->ar - m->wi * m->ai) - m->er;
    const double twi = dt * (m->wr * m->ai + m->wi * m->ar) - m->ei;
    const double a2r = m->ar * m->ar - m->ai * m->ai, a2i = 2.0 * m->ar * m->ai;
    const double den = a2r * a2r + a2i * a2i;
    const double dqr = (twr * a2r + twi * a2i) / den, dqi = (twi * a2r - twr * a2i) / den;
    /* g_A = g_zeta dt + g_q conj(dq/dA) */
    const double gar = gzr * dt + (gqr * dqr + gqi * dqi);
    const double gai = gzi * dt + (gqi * dqr - gqr * dqi);
    if (dlar != NULL)
        *dlar += (real)(gar * m->ar); /* dA_re / dlog_A_real = -exp(log_A_real) = A_re */
    if (daim != NULL)
        *daim += (real)gai;
    /* Re(g_zeta conj(A)) + Re(g_q conj(w)) */
    return (gzr * m->ar + gzi * m->ai) + (gqr * m->wr + gqi * m->wi);
}

/* sum of x[0..n) with 8 running partial sums combined in a fixed order */
static double sum_fixed(const double *x, int n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += x[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static int grad_wanted(const sb_tensor *t)
{
    return t != NULL && t->requires_grad;
}

/* ---- kernel ------------------------------------------------------------------------------
 * Forward per channel (independent, one thread each): P_n = C_n q_n, then for l = 0..T-1
 * K[l] = 2 sum_n Re P_n and P_n *= w_n.
 * Backward: G_n = sum_l dK_l w_n^l, S_n = sum_l l dK_l w_n^l (one pass over l with the
 * powers recomputed), then g_Ct = 2 conj(G), g_zeta = 2 conj(Ct S), g_C = g_Ct conj(q),
 * g_q = g_Ct conj(C), and the shared chain. */

typedef struct s4k_ctx {
    sb_tensor *log_dt, *C, *lar, *aim, *K;
    int H, N2, T;
} s4k_ctx;

static void s4k_backward(sb_graph *g, void *ctx)
{
    s4k_ctx *c = ctx;
    if (c->K->grad == NULL)
        return;
    const int H = c->H, N2 = c->N2, T = c->T;
    real *d_log_dt = grad_wanted(c->log_dt) ? sb_tensor_grad(g, c->log_dt) : NULL;
    real *dC = grad_wanted(c->C) ? sb_tensor_grad(g, c->C) : NULL;
    real *dlar = grad_wanted(c->lar) ? sb_tensor_grad(g, c->lar) : NULL;
    real *daim = grad_wanted(c->aim) ? sb_tensor_grad(g, c->aim) : NULL;
    const int nth = omp_get_max_threads();
    const size_t per = (size_t)N2 * 8;
    double *scratch = sb_graph_alloc(g, (size_t)nth * per * sizeof(double) + sizeof(double));
    s4_mode *modes_all =
        sb_graph_alloc(g, (size_t)nth * (size_t)(N2 > 0 ? N2 : 1) * sizeof(s4_mode));
    const real *dK = c->K->grad, *Cd = c->C->data;
#pragma omp parallel for schedule(static) if ((double)H * N2 * T > PAR_MIN)
    for (int h = 0; h < H; h++) {
        const int tid = omp_get_thread_num();
        double *restrict Er = scratch + (size_t)tid * per, *restrict Ei = Er + N2;
        double *restrict Gr = Ei + N2, *restrict Gi = Gr + N2;
        double *restrict Sr = Gi + N2, *restrict Si = Sr + N2;
        double *restrict Wr = Si + N2, *restrict Wi = Wr + N2;
        s4_mode *modes = modes_all + (size_t)tid * (size_t)N2;
        const double dt = s4_modes(c->log_dt->data, c->lar->data, c->aim->data, h, N2, modes);
        for (int n = 0; n < N2; n++) {
            Er[n] = 1, Ei[n] = 0;
            Gr[n] = Gi[n] = Sr[n] = Si[n] = 0;
            Wr[n] = modes[n].wr, Wi[n] = modes[n].wi;
        }
        const real *dk = dK + (size_t)h * (size_t)T;
        for (int l = 0; l < T; l++) {
            const double d = (double)dk[l], ld = (double)l * d;
#pragma omp simd
            for (int n = 0; n < N2; n++) {
                Gr[n] += d * Er[n];
                Gi[n] += d * Ei[n];
                Sr[n] += ld * Er[n];
                Si[n] += ld * Ei[n];
                const double er = Er[n] * Wr[n] - Ei[n] * Wi[n];
                Ei[n] = Er[n] * Wi[n] + Ei[n] * Wr[n];
                Er[n] = er;
            }
        }
        double ddt = 0;
        for (int n = 0; n < N2; n++) {
            const s4_mode *m = &modes[n];
            const size_t i = (size_t)h * (size_t)N2 + (size_t)n;
            const double cr = (double)Cd[2 * i], ci = (double)Cd[2 * i + 1];
            const double ctr = cr * m->qr - ci * m->qi, cti = cr * m->qi + ci * m->qr;
            const double gcr = 2.0 * Gr[n], gci = -2.0 * Gi[n]; /* g_Ct = 2 conj(G) */
            /* g_zeta = 2 conj(Ct S) */
            const double gzr = 2.0 * (ctr * Sr[n] - cti * Si[n]);
            const double gzi = -2.0 * (ctr * Si[n] + cti * Sr[n]);
            if (dC != NULL) { /* g_C = g_Ct conj(q) */
                dC[2 * i] += (real)(gcr * m->qr + gci * m->qi);
                dC[2 * i + 1] += (real)(gci * m->qr - gcr * m->qi);
            }
            /* g_q = g_Ct conj(C) */
            const double gqr = gcr * cr + gci * ci, gqi = gci * cr - gcr * ci;
            ddt += s4_mode_backward(m, dt, gzr, gzi, gqr, gqi, dlar != NULL ? dlar + i : NULL,
                                    daim != NULL ? daim + i : NULL);
        }
        if (d_log_dt != NULL)
            d_log_dt[h] += (real)(ddt * dt);
    }
}

sb_tensor *sb_s4d_kernel(sb_graph *g, sb_tensor *log_dt, sb_tensor *C, sb_tensor *log_A_real,
                         sb_tensor *A_imag, int T)
{
    const int H = (int)log_dt->size, N2 = log_A_real->ndim == 2 ? log_A_real->shape[1] : 0;
    SB_ASSERT(T >= 1 && log_A_real->ndim == 2 && log_A_real->shape[0] == H);
    SB_ASSERT(A_imag->size == log_A_real->size && C->size == 2 * log_A_real->size);
    int shape[2] = {H, T};
    sb_tensor *K = sb_tensor_new(g, 2, shape);
    const int nth = omp_get_max_threads();
    const size_t per = (size_t)N2 * 4;
    double *scratch = sb_graph_alloc(g, (size_t)nth * per * sizeof(double) + sizeof(double));
    s4_mode *modes_all =
        sb_graph_alloc(g, (size_t)nth * (size_t)(N2 > 0 ? N2 : 1) * sizeof(s4_mode));
    const real *Cd = C->data;
#pragma omp parallel for schedule(static) if ((double)H * N2 * T > PAR_MIN)
    for (int h = 0; h < H; h++) {
        const int tid = omp_get_thread_num();
        double *restrict Pr = scratch + (size_t)tid * per, *restrict Pi = Pr + N2;
        double *restrict Wr = Pi + N2, *restrict Wi = Wr + N2;
        s4_mode *modes = modes_all + (size_t)tid * (size_t)N2;
        s4_modes(log_dt->data, log_A_real->data, A_imag->data, h, N2, modes);
        for (int n = 0; n < N2; n++) { /* Ct = C q */
            const size_t i = (size_t)h * (size_t)N2 + (size_t)n;
            const double cr = (double)Cd[2 * i], ci = (double)Cd[2 * i + 1];
            Pr[n] = cr * modes[n].qr - ci * modes[n].qi;
            Pi[n] = cr * modes[n].qi + ci * modes[n].qr;
            Wr[n] = modes[n].wr, Wi[n] = modes[n].wi;
        }
        real *k = K->data + (size_t)h * (size_t)T;
        for (int l = 0; l < T; l++) {
            k[l] = (real)(2.0 * sum_fixed(Pr, N2));
#pragma omp simd
            for (int n = 0; n < N2; n++) {
                const double pr = Pr[n] * Wr[n] - Pi[n] * Wi[n];
                Pi[n] = Pr[n] * Wi[n] + Pi[n] * Wr[n];
                Pr[n] = pr;
            }
        }
    }
    K->requires_grad = (unsigned char)(log_dt->requires_grad || C->requires_grad ||
                                       log_A_real->requires_grad || A_imag->requires_grad);
    if (K->requires_grad) {
        s4k_ctx *c = sb_graph_record(g, s4k_backward, sizeof *c);
        if (c != NULL) {
            c->log_dt = log_dt, c->C = C, c->lar = log_A_real, c->aim = A_imag, c->K = K;
            c->H = H, c->N2 = N2, c->T = T;
        }
    }
    return K;
}

/* ---- FFTW plumbing -------------------------------------------------------------------------
 * One r2c and one c2r plan per transform size, made with FFTW_ESTIMATE (deterministic:
 * no timing) on arrays from fftw_malloc, and executed with the new-array interface on
 * arena buffers aligned to 64 bytes (the same alignment class, as FFTW requires). FFTW's
 * planner is not thread-safe: planning and destruction happen under one named lock. */

#ifdef SB_REAL_DOUBLE
typedef fftw_plan fft_plan;
typedef fftw_complex fft_cpx;
#define FFT(name) fftw_##name
#else
typedef fftwf_plan fft_plan;
typedef fftwf_complex fft_cpx;
#define FFT(name) fftwf_##name
#endif

#define PLAN_CACHE 128
#define CHANNEL_BLOCK 16 /* channels per task: 64 bytes of a frame in float */

typedef struct fft_plans {
    int n;
    fft_plan r2c, c2r;
} fft_plans;

static fft_plans plan_cache[PLAN_CACHE];
static int plan_count;

/* The plans for size n; returns 1 if they are cached (kept for the process), 0 if the
 * cache was full and the caller must release them with release_plans. */
static int get_plans(int n, fft_plans *out)
{
    int cached = 1;
#pragma omp critical(sb_s4_fftw_planner)
    {
        int i = 0;
        while (i < plan_count && plan_cache[i].n != n)
            i++;
        if (i < plan_count) {
            *out = plan_cache[i];
        } else {
            real *a = FFT(malloc)(sizeof(real) * (size_t)(n + 2));
            fft_cpx *b = FFT(malloc)(sizeof(fft_cpx) * (size_t)(n / 2 + 1));
            SB_ASSERT(a != NULL && b != NULL);
            out->n = n;
            out->r2c = FFT(plan_dft_r2c_1d)(n, a, b, FFTW_ESTIMATE);
            out->c2r = FFT(plan_dft_c2r_1d)(n, b, a, FFTW_ESTIMATE);
            SB_ASSERT(out->r2c != NULL && out->c2r != NULL);
            FFT(free)(a);
            FFT(free)(b);
            if (plan_count < PLAN_CACHE)
                plan_cache[plan_count++] = *out;
            else
                cached = 0;
        }
    }
    return cached;
}

static void release_plans(fft_plans *p)
{
#pragma omp critical(sb_s4_fftw_planner)
    {
        FFT(destroy_plan)(p->r2c);
        FFT(destroy_plan)(p->c2r);
    }
}

static void fft_r2c(const fft_plans *p, real *in, real *out)
{
    FFT(execute_dft_r2c)(p->r2c, in, (fft_cpx *)(void *)out);
}

/* destroys `in` */
static void fft_c2r(const fft_plans *p, real *in, real *out)
{
    FFT(execute_dft_c2r)(p->c2r, (fft_cpx *)(void *)in, out);
}

/* smallest n >= m with no prime factor above 5 */
static int fft_size(int m)
{
    for (int n = m > 1 ? m : 1;; n++) {
        int r = n;
        while (r % 2 == 0)
            r /= 2;
        while (r % 3 == 0)
            r /= 3;
        while (r % 5 == 0)
            r /= 5;
        if (r == 1)
            return n;
    }
}

static size_t round16(size_t x)
{
    return (x + 15) / 16 * 16;
}

/* channel h of frames [0, T) of batch row b of x [B, T, H] into buf[0, n), zero-padded */
static void gather(real *buf, const real *x, int b, int h, int T, int H, int n)
{
    const real *src = x + (size_t)b * (size_t)T * (size_t)H + (size_t)h;
    for (int t = 0; t < T; t++)
        buf[t] = src[(size_t)t * (size_t)H];
    memset(buf + T, 0, (size_t)(n - T) * sizeof(real));
}

/* Complex products with explicit fused multiply-adds: re = fma(ar, br, -(ai bi)), im =
 * fma(ar, bi, ai br). Written as plain products and sums, gcc 12's vectoriser turns the
 * pair into vfmaddsub (one rounding) when AVX is enabled, despite -ffp-contract=off, and
 * into separate roundings otherwise, so the S4 results depended on SB_NATIVE. With fma()
 * every build rounds the same way (one instruction with FMA, a libm call without). */
static inline real cmul_re(real ar, real ai, real br, real bi)
{
    return fma(ar, br, -(ai * bi));
}

static inline real cmul_im(real ar, real ai, real br, real bi)
{
    return fma(ar, bi, ai * br);
}

/* spectra: out[k] = a[k] * b[k] (conj_b: * conj(b[k])), nc complex bins interleaved */
static void cmul(real *out, const real *a, const real *b, int nc, int conj_b)
{
    const real sgn = conj_b ? -1 : 1;
    for (int k = 0; k < nc; k++) {
        const real ar = a[2 * k], ai = a[2 * k + 1], br = b[2 * k], bi = sgn * b[2 * k + 1];
        out[2 * k] = cmul_re(ar, ai, br, bi);
        out[2 * k + 1] = cmul_im(ar, ai, br, bi);
    }
}

/* ---- FFT convolution ---------------------------------------------------------------------
 * Forward: Kf[h] = rfft_n(K[h]) / n; y[b, :, h] = irfft_n(rfft_n(u[b, :, h]) Kf[h])[0, T)
 * + D u. With n >= 2T - 1 the circular convolution has no wrap-around in [0, T).
 * Backward with G = rfft_n(dy[b, :, h]):
 *   du[b, :, h] += irfft(G conj(Kf[h]))[0, T) + D dy   (the correlation sum_{t>=m} dy K)
 *   dK[h] += irfft(sum_b G conj(rfft(u[b, :, h])))[0, T) / n   (batch summed in order)
 *   dD[h] += sum_{b, t} dy u
 * Tasks: (batch row, block of 16 channels) in the forward, blocks of channels (all rows, in
 * order) in the backward, so that every sum has a fixed order. */

typedef struct s4conv_ctx {
    sb_tensor *u, *K, *D, *y;
    real *Kf; /* [H][kf_stride]: rfft(K[h]) / n */
    size_t kf_stride;
    int B, T, H, n;
} s4conv_ctx;

static void s4conv_backward(sb_graph *g, void *ctx)
{
    s4conv_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, n = c->n, nc = n / 2 + 1;
    real *du = grad_wanted(c->u) ? sb_tensor_grad(g, c->u) : NULL;
    real *dK = grad_wanted(c->K) ? sb_tensor_grad(g, c->K) : NULL;
    real *dD = grad_wanted(c->D) ? sb_tensor_grad(g, c->D) : NULL;
    if (du == NULL && dK == NULL && dD == NULL)
        return;
    const real *dy = c->y->grad, *u = c->u->data, *D = c->D != NULL ? c->D->data : NULL;
    fft_plans pl;
    const int cached = get_plans(n, &pl);
    const size_t buf = round16((size_t)n + 2);
    const int nth = omp_get_max_threads();
    const size_t per = (3 + CHANNEL_BLOCK) * buf;
    real *scratch = sb_graph_alloc(g, (size_t)nth * per * sizeof(real));
    const int nblk = (H + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
    const real inv_n = (real)1 / (real)n;
#pragma omp parallel for schedule(static) if ((double)B * T * H > PAR_MIN / 8)
    for (int blk = 0; blk < nblk; blk++) {
        real *in = scratch + (size_t)omp_get_thread_num() * per, *spec = in + buf;
        real *spec2 = spec + buf, *acc = spec2 + buf;
        const int h0 = blk * CHANNEL_BLOCK, h1 = h0 + CHANNEL_BLOCK < H ? h0 + CHANNEL_BLOCK : H;
        double dd[CHANNEL_BLOCK] = {0};
        if (dK != NULL)
            memset(acc, 0, (size_t)CHANNEL_BLOCK * buf * sizeof(real));
        for (int b = 0; b < B; b++) {
            for (int h = h0; h < h1; h++) {
                const real *Kf = c->Kf + (size_t)h * c->kf_stride;
                const size_t base = (size_t)b * (size_t)T * (size_t)H + (size_t)h;
                if (du != NULL || dK != NULL) {
                    gather(in, dy, b, h, T, H, n);
                    fft_r2c(&pl, in, spec); /* G */
                }
                if (du != NULL) {
                    cmul(spec2, spec, Kf, nc, 1);
                    fft_c2r(&pl, spec2, in);
                    const real Dh = D != NULL ? D[h] : 0;
                    for (int t = 0; t < T; t++) {
                        const size_t i = base + (size_t)t * (size_t)H;
                        du[i] += in[t] + Dh * dy[i];
                    }
                }
                if (dK != NULL) {
                    gather(in, u, b, h, T, H, n);
                    fft_r2c(&pl, in, spec2); /* U */
                    real *a = acc + (size_t)(h - h0) * buf;
                    for (int k = 0; k < nc; k++) { /* a += G conj(U) */
                        const real gr = spec[2 * k], gi = spec[2 * k + 1];
                        const real ur = spec2[2 * k], ui = -spec2[2 * k + 1];
                        a[2 * k] += cmul_re(gr, gi, ur, ui);
                        a[2 * k + 1] += cmul_im(gr, gi, ur, ui);
                    }
                }
                if (dD != NULL) {
                    double s = 0;
                    for (int t = 0; t < T; t++) {
                        const size_t i = base + (size_t)t * (size_t)H;
                        s += (double)dy[i] * (double)u[i];
                    }
                    dd[h - h0] += s;
                }
            }
        }
        for (int h = h0; h < h1; h++) {
            if (dK != NULL) {
                fft_c2r(&pl, acc + (size_t)(h - h0) * buf, in);
                real *dk = dK + (size_t)h * (size_t)T;
                for (int t = 0; t < T; t++)
                    dk[t] += in[t] * inv_n;
            }
            if (dD != NULL)
                dD[h] += (real)dd[h - h0];
        }
    }
    if (!cached)
        release_plans(&pl);
}

sb_tensor *sb_s4d_conv(sb_graph *g, sb_tensor *u, sb_tensor *K, sb_tensor *D)
{
    SB_ASSERT(u->ndim == 3 && K->ndim == 2);
    const int B = u->shape[0], T = u->shape[1], H = u->shape[2];
    SB_ASSERT(K->shape[0] == H && K->shape[1] == T && (D == NULL || (int)D->size == H));
    const int n = fft_size(2 * T), nc = n / 2 + 1;
    fft_plans pl;
    const int cached = get_plans(n, &pl);
    const size_t buf = round16((size_t)n + 2), kf_stride = round16(2 * (size_t)nc);
    const int nth = omp_get_max_threads();
    real *scratch = sb_graph_alloc(g, (size_t)nth * 2 * buf * sizeof(real));
    real *Kf = sb_graph_alloc(g, (size_t)H * kf_stride * sizeof(real));
    const real inv_n = (real)1 / (real)n;
    const double work = (double)B * T * H;
#pragma omp parallel for schedule(static) if (work > PAR_MIN / 8)
    for (int h = 0; h < H; h++) {
        real *in = scratch + (size_t)omp_get_thread_num() * 2 * buf;
        memcpy(in, K->data + (size_t)h * (size_t)T, (size_t)T * sizeof(real));
        memset(in + T, 0, (size_t)(n - T) * sizeof(real));
        real *kf = Kf + (size_t)h * kf_stride;
        fft_r2c(&pl, in, kf);
        for (int k = 0; k < 2 * nc; k++)
            kf[k] *= inv_n;
    }
    sb_tensor *y = sb_tensor_new(g, 3, u->shape);
    const int nblk = (H + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
    const real *D_data = D != NULL ? D->data : NULL;
#pragma omp parallel for schedule(static) if (work > PAR_MIN / 8)
    for (int task = 0; task < B * nblk; task++) {
        real *in = scratch + (size_t)omp_get_thread_num() * 2 * buf, *spec = in + buf;
        const int b = task / nblk, h0 = (task % nblk) * CHANNEL_BLOCK;
        const int h1 = h0 + CHANNEL_BLOCK < H ? h0 + CHANNEL_BLOCK : H;
        for (int h = h0; h < h1; h++) {
            gather(in, u->data, b, h, T, H, n);
            fft_r2c(&pl, in, spec);
            cmul(spec, spec, Kf + (size_t)h * kf_stride, nc, 0);
            fft_c2r(&pl, spec, in);
            const real Dh = D_data != NULL ? D_data[h] : 0;
            const size_t base = (size_t)b * (size_t)T * (size_t)H + (size_t)h;
            for (int t = 0; t < T; t++) {
                const size_t i = base + (size_t)t * (size_t)H;
                y->data[i] = in[t] + Dh * u->data[i];
            }
        }
    }
    if (!cached)
        release_plans(&pl);
    y->requires_grad = (unsigned char)(u->requires_grad || K->requires_grad || grad_wanted(D));
    if (y->requires_grad) {
        s4conv_ctx *c = sb_graph_record(g, s4conv_backward, sizeof *c);
        if (c != NULL) {
            c->u = u, c->K = K, c->D = D, c->y = y, c->Kf = Kf, c->kf_stride = kf_stride;
            c->B = B, c->T = T, c->H = H, c->n = n;
        }
    }
    return y;
}

/* ---- direct convolution (reference) --------------------------------------------------------
 *   y[t] = sum_{j<=t} K[j] u[t-j] + D u[t]
 *   du[m] += sum_{t>=m} dy[t] K[t-m] + D dy[m],  dK[j] += sum_b sum_{t>=j} dy[t] u[t-j] */

typedef struct s4conv_ref_ctx {
    sb_tensor *u, *K, *D, *y;
} s4conv_ref_ctx;

static void s4conv_ref_backward(sb_graph *g, void *ctx)
{
    s4conv_ref_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->u->shape[0], T = c->u->shape[1], H = c->u->shape[2];
    real *du = grad_wanted(c->u) ? sb_tensor_grad(g, c->u) : NULL;
    real *dK = grad_wanted(c->K) ? sb_tensor_grad(g, c->K) : NULL;
    real *dD = grad_wanted(c->D) ? sb_tensor_grad(g, c->D) : NULL;
    const real *dy = c->y->grad, *u = c->u->data, *K = c->K->data;
    for (int h = 0; h < H; h++) {
        const real Dh = c->D != NULL ? c->D->data[h] : 0;
        for (int b = 0; b < B; b++) {
            const size_t base = (size_t)b * (size_t)T * (size_t)H + (size_t)h;
            for (int t = 0; t < T; t++) {
                const real d = dy[base + (size_t)t * (size_t)H];
                for (int j = 0; j <= t; j++) {
                    const size_t src = base + (size_t)(t - j) * (size_t)H;
                    if (du != NULL)
                        du[src] += d * K[(size_t)h * (size_t)T + (size_t)j];
                    if (dK != NULL)
                        dK[(size_t)h * (size_t)T + (size_t)j] += d * u[src];
                }
                if (du != NULL)
                    du[base + (size_t)t * (size_t)H] += Dh * d;
                if (dD != NULL)
                    dD[h] += d * u[base + (size_t)t * (size_t)H];
            }
        }
    }
}

sb_tensor *sb_s4d_conv_ref(sb_graph *g, sb_tensor *u, sb_tensor *K, sb_tensor *D)
{
    SB_ASSERT(u->ndim == 3 && K->ndim == 2);
    const int B = u->shape[0], T = u->shape[1], H = u->shape[2];
    SB_ASSERT(K->shape[0] == H && K->shape[1] == T && (D == NULL || (int)D->size == H));
    sb_tensor *y = sb_tensor_new(g, 3, u->shape);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const size_t i = ((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)h;
                real acc = 0;
                for (int j = 0; j <= t; j++)
                    acc += K->data[(size_t)h * (size_t)T + (size_t)j] *
                           u->data[i - (size_t)j * (size_t)H];
                y->data[i] = acc + (D != NULL ? D->data[h] : 0) * u->data[i];
            }
    y->requires_grad = (unsigned char)(u->requires_grad || K->requires_grad || grad_wanted(D));
    if (y->requires_grad) {
        s4conv_ref_ctx *c = sb_graph_record(g, s4conv_ref_backward, sizeof *c);
        if (c != NULL)
            c->u = u, c->K = K, c->D = D, c->y = y;
    }
    return y;
}

/* ---- diagonal recurrence ------------------------------------------------------------------
 * Forward per (b, h), modes in double: s = w s + q u; y = 2 sum_n Re(C s) + D u.
 * Backward (every state kept), per channel over the batch rows in order, t descending:
 *   g_s[t] = conj(w) g_s[t+1] + 2 dy[t] conj(C)
 *   g_C += 2 dy[t] conj(s[t]),  g_w += conj(s[t-1]) g_s[t],  g_q += u[t] g_s[t]
 *   du[t] += Re(conj(q) g_s[t]) + D dy[t],  dD += dy[t] u[t]
 * then g_zeta = g_w conj(w) and the shared chain. */

typedef struct s4rec_ctx {
    sb_tensor *u, *log_dt, *C, *lar, *aim, *D, *y;
    double *states; /* [B][H][T][N2][2] */
    int B, T, H, N2;
} s4rec_ctx;

static void s4rec_backward(sb_graph *g, void *ctx)
{
    s4rec_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, H = c->H, N2 = c->N2;
    real *du = grad_wanted(c->u) ? sb_tensor_grad(g, c->u) : NULL;
    real *d_log_dt = grad_wanted(c->log_dt) ? sb_tensor_grad(g, c->log_dt) : NULL;
    real *dC = grad_wanted(c->C) ? sb_tensor_grad(g, c->C) : NULL;
    real *dlar = grad_wanted(c->lar) ? sb_tensor_grad(g, c->lar) : NULL;
    real *daim = grad_wanted(c->aim) ? sb_tensor_grad(g, c->aim) : NULL;
    real *dD = grad_wanted(c->D) ? sb_tensor_grad(g, c->D) : NULL;
    const real *dy = c->y->grad, *u = c->u->data, *Cd = c->C->data;
    s4_mode *modes = sb_graph_alloc(g, (size_t)(N2 > 0 ? N2 : 1) * sizeof(s4_mode));
    double *acc = sb_graph_alloc(g, (size_t)(N2 > 0 ? N2 : 1) * 8 * sizeof(double));
    for (int h = 0; h < H; h++) {
        const double dt = s4_modes(c->log_dt->data, c->lar->data, c->aim->data, h, N2, modes);
        double *gwr = acc, *gwi = gwr + N2, *gqr = gwi + N2, *gqi = gqr + N2, *gcr = gqi + N2;
        double *gci = gcr + N2, *lr = gci + N2, *li = lr + N2;
        for (int n = 0; n < 6 * N2; n++)
            acc[n] = 0;
        double dd = 0;
        for (int b = 0; b < B; b++) {
            for (int n = 0; n < N2; n++)
                lr[n] = li[n] = 0;
            const double *st =
                c->states + ((size_t)b * (size_t)H + (size_t)h) * (size_t)T * (size_t)N2 * 2;
            for (int t = T - 1; t >= 0; t--) {
                const size_t i = ((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)h;
                const double d = (double)dy[i], ut = (double)u[i];
                const double *s = st + (size_t)t * (size_t)N2 * 2;
                const double *sp = t > 0 ? s - (size_t)N2 * 2 : NULL;
                double dut = 0;
                for (int n = 0; n < N2; n++) {
                    const size_t k = (size_t)h * (size_t)N2 + (size_t)n;
                    const double cr = (double)Cd[2 * k], ci = (double)Cd[2 * k + 1];
                    /* g_s = conj(w) lambda + 2 d conj(C); lambda holds g_s[t+1] */
                    const double wr = modes[n].wr, wi = modes[n].wi;
                    const double gsr = wr * lr[n] + wi * li[n] + 2.0 * d * cr;
                    const double gsi = wr * li[n] - wi * lr[n] - 2.0 * d * ci;
                    gcr[n] += 2.0 * d * s[2 * n];
                    gci[n] -= 2.0 * d * s[2 * n + 1];
                    if (sp != NULL) { /* g_w += conj(s[t-1]) g_s */
                        gwr[n] += sp[2 * n] * gsr + sp[2 * n + 1] * gsi;
                        gwi[n] += sp[2 * n] * gsi - sp[2 * n + 1] * gsr;
                    }
                    gqr[n] += ut * gsr;
                    gqi[n] += ut * gsi;
                    dut += modes[n].qr * gsr + modes[n].qi * gsi; /* Re(conj(q) g_s) */
                    lr[n] = gsr, li[n] = gsi;
                }
                const double Dh = c->D != NULL ? (double)c->D->data[h] : 0.0;
                if (du != NULL)
                    du[i] += (real)(dut + Dh * d);
                dd += d * ut;
            }
        }
        double ddt = 0;
        for (int n = 0; n < N2; n++) {
            const s4_mode *m = &modes[n];
            const size_t k = (size_t)h * (size_t)N2 + (size_t)n;
            /* g_zeta = g_w conj(w) */
            const double gzr = gwr[n] * m->wr + gwi[n] * m->wi;
            const double gzi = gwi[n] * m->wr - gwr[n] * m->wi;
            if (dC != NULL) {
                dC[2 * k] += (real)gcr[n];
                dC[2 * k + 1] += (real)gci[n];
            }
            ddt += s4_mode_backward(m, dt, gzr, gzi, gqr[n], gqi[n], dlar != NULL ? dlar + k : NULL,
                                    daim != NULL ? daim + k : NULL);
        }
        if (d_log_dt != NULL)
            d_log_dt[h] += (real)(ddt * dt);
        if (dD != NULL)
            dD[h] += (real)dd;
    }
}

sb_tensor *sb_s4d_recurrence(sb_graph *g, sb_tensor *u, sb_tensor *log_dt, sb_tensor *C,
                             sb_tensor *log_A_real, sb_tensor *A_imag, sb_tensor *D, real *state)
{
    SB_ASSERT(u->ndim == 3 && log_A_real->ndim == 2);
    const int B = u->shape[0], T = u->shape[1], H = u->shape[2], N2 = log_A_real->shape[1];
    SB_ASSERT((int)log_dt->size == H && log_A_real->shape[0] == H);
    SB_ASSERT(A_imag->size == log_A_real->size && C->size == 2 * log_A_real->size);
    SB_ASSERT(D == NULL || (int)D->size == H);
    sb_tensor *y = sb_tensor_new(g, 3, u->shape);
    y->requires_grad =
        (unsigned char)(u->requires_grad || log_dt->requires_grad || C->requires_grad ||
                        log_A_real->requires_grad || A_imag->requires_grad || grad_wanted(D));
    const int record = y->requires_grad && g->record;
    SB_ASSERT(!(record && state != NULL));
    const size_t per_seq = (size_t)T * (size_t)N2 * 2;
    double *states =
        record
            ? sb_graph_alloc(g, (size_t)B * (size_t)H * per_seq * sizeof(double) + sizeof(double))
            : NULL;
    /* coefficients per channel as contiguous rows over the modes: wr, wi, qr, qi, Cr, Ci */
    const size_t co_len = 6 * (size_t)N2 + 1;
    double *coef = sb_graph_alloc(g, (size_t)H * co_len * sizeof(double));
    s4_mode *modes = sb_graph_alloc(g, (size_t)(N2 > 0 ? N2 : 1) * sizeof(s4_mode));
    for (int h = 0; h < H; h++) {
        s4_modes(log_dt->data, log_A_real->data, A_imag->data, h, N2, modes);
        double *co = coef + (size_t)h * co_len;
        for (int n = 0; n < N2; n++) {
            const size_t k = (size_t)h * (size_t)N2 + (size_t)n;
            co[n] = modes[n].wr, co[N2 + n] = modes[n].wi;
            co[2 * N2 + n] = modes[n].qr, co[3 * N2 + n] = modes[n].qi;
            co[4 * N2 + n] = (double)C->data[2 * k], co[5 * N2 + n] = (double)C->data[2 * k + 1];
        }
    }
    const int nth = omp_get_max_threads();
    const size_t per = (size_t)N2 * 2 + 8;
    double *scratch = sb_graph_alloc(g, (size_t)nth * per * sizeof(double));
#pragma omp parallel for schedule(static) if ((double)B * T * H * N2 > PAR_MIN)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        double *restrict sr = scratch + (size_t)omp_get_thread_num() * per;
        double *restrict si = sr + N2;
        real *st =
            state != NULL ? state + ((size_t)b * (size_t)H + (size_t)h) * (size_t)N2 * 2 : NULL;
        for (int n = 0; n < N2; n++) {
            sr[n] = st != NULL ? (double)st[2 * n] : 0.0;
            si[n] = st != NULL ? (double)st[2 * n + 1] : 0.0;
        }
        const double *co = coef + (size_t)h * co_len;
        const double *restrict wr = co, *restrict wi = wr + N2, *restrict qr = wi + N2;
        const double *restrict qi = qr + N2, *restrict cr = qi + N2, *restrict ci = cr + N2;
        const double Dh = D != NULL ? (double)D->data[h] : 0.0;
        double *keep = record ? states + (size_t)bh * per_seq : NULL;
        for (int t = 0; t < T; t++) {
            const size_t i = ((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)h;
            const double ut = (double)u->data[i];
            /* s = w s + q u; Re(C s) summed in 8 running partial sums (fixed order) */
            double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int n = 0;
            for (; n + 8 <= N2; n += 8)
#pragma omp simd
                for (int k = 0; k < 8; k++) {
                    const double r = wr[n + k] * sr[n + k] - wi[n + k] * si[n + k] + qr[n + k] * ut;
                    const double im =
                        wr[n + k] * si[n + k] + wi[n + k] * sr[n + k] + qi[n + k] * ut;
                    sr[n + k] = r, si[n + k] = im;
                    acc[k] += cr[n + k] * r - ci[n + k] * im;
                }
            for (int k = 0; n < N2; n++, k++) {
                const double r = wr[n] * sr[n] - wi[n] * si[n] + qr[n] * ut;
                const double im = wr[n] * si[n] + wi[n] * sr[n] + qi[n] * ut;
                sr[n] = r, si[n] = im;
                acc[k] += cr[n] * r - ci[n] * im;
            }
            if (keep != NULL)
                for (int k = 0; k < N2; k++) {
                    keep[((size_t)t * (size_t)N2 + (size_t)k) * 2] = sr[k];
                    keep[((size_t)t * (size_t)N2 + (size_t)k) * 2 + 1] = si[k];
                }
            const double sum =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            y->data[i] = (real)(2.0 * sum + Dh * ut);
        }
        if (st != NULL)
            for (int n = 0; n < N2; n++) {
                st[2 * n] = (real)sr[n];
                st[2 * n + 1] = (real)si[n];
            }
    }
    if (record) {
        s4rec_ctx *c = sb_graph_record(g, s4rec_backward, sizeof *c);
        if (c != NULL) {
            c->u = u, c->log_dt = log_dt, c->C = C, c->lar = log_A_real, c->aim = A_imag;
            c->D = D, c->y = y, c->states = states;
            c->B = B, c->T = T, c->H = H, c->N2 = N2;
        }
    }
    return y;
}

/* ---- tied dropout ---------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z)
{
    /* splitmix64 finaliser (the same hash as sb_dropout) */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct tied_ctx {
    sb_tensor *x, *y;
    uint8_t *keep; /* [B][H] */
    real scale;
} tied_ctx;

static void tied_backward(sb_graph *g, void *ctx)
{
    tied_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    const int B = c->x->shape[0], T = c->x->shape[1], H = c->x->shape[2];
    real *dx = sb_tensor_grad(g, c->x);
    const real *dy = c->y->grad;
#pragma omp parallel for schedule(static) if (c->y->size > PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        const uint8_t *keep = c->keep + (size_t)(bt / T) * (size_t)H;
        const size_t row = (size_t)bt * (size_t)H;
        for (int h = 0; h < H; h++)
            dx[row + (size_t)h] += keep[h] ? dy[row + (size_t)h] * c->scale : 0;
    }
}

sb_tensor *sb_dropout_tied(sb_graph *g, sb_tensor *x, real p)
{
    if (!g->training || p <= 0)
        return x;
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], H = x->shape[2];
    uint8_t *keep = sb_graph_alloc(g, (size_t)B * (size_t)H);
    const real scale = 1 / (1 - p);
    const uint64_t stream =
        mix64(g->dropout_seed ^ mix64(g->step * 0x9e3779b97f4a7c15ull + g->dropout_calls++));
    const double keep_prob = 1.0 - (double)p;
    for (size_t i = 0; i < (size_t)B * (size_t)H; i++) {
        uint64_t hsh = mix64(stream + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        double v = (double)(hsh >> 11) * (1.0 / 9007199254740992.0);
        keep[i] = v < keep_prob;
    }
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
#pragma omp parallel for schedule(static) if (x->size > PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        const uint8_t *kp = keep + (size_t)(bt / T) * (size_t)H;
        const size_t row = (size_t)bt * (size_t)H;
        for (int h = 0; h < H; h++)
            y->data[row + (size_t)h] = kp[h] ? x->data[row + (size_t)h] * scale : 0;
    }
    y->requires_grad = x->requires_grad;
    if (y->requires_grad) {
        tied_ctx *c = sb_graph_record(g, tied_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y, c->keep = keep, c->scale = scale;
    }
    return y;
}

/* ---- GLU ------------------------------------------------------------------------------------
 * out = a sigmoid(z), p = [a | z]; da = dout s, dz = dout a s (1 - s). */

typedef struct glu_ctx {
    sb_tensor *p, *y;
} glu_ctx;

static void glu_backward(sb_graph *g, void *ctx)
{
    glu_ctx *c = ctx;
    if (c->y->grad == NULL || !c->p->requires_grad)
        return;
    const int W = c->y->shape[c->y->ndim - 1];
    const size_t rows = c->y->size / (size_t)W;
    real *dp = sb_tensor_grad(g, c->p);
    const real *dy = c->y->grad, *p = c->p->data;
#pragma omp parallel for schedule(static) if (c->y->size > PAR_MIN / 4)
    for (size_t r = 0; r < rows; r++) {
        const real *pa = p + r * 2 * (size_t)W, *pz = pa + W, *d = dy + r * (size_t)W;
        real *da = dp + r * 2 * (size_t)W, *dz = da + W;
        for (int k = 0; k < W; k++) {
            const real s = sb_fsigmoid(pz[k]);
            da[k] += d[k] * s;
            dz[k] += d[k] * pa[k] * s * (1 - s);
        }
    }
}

sb_tensor *sb_glu(sb_graph *g, sb_tensor *p)
{
    const int W2 = p->shape[p->ndim - 1];
    SB_ASSERT(W2 % 2 == 0);
    int shape[SB_MAX_DIMS];
    for (int d = 0; d < p->ndim; d++)
        shape[d] = p->shape[d];
    const int W = W2 / 2;
    shape[p->ndim - 1] = W;
    sb_tensor *y = sb_tensor_new(g, p->ndim, shape);
    const size_t rows = y->size / (size_t)W;
#pragma omp parallel for schedule(static) if (y->size > PAR_MIN / 4)
    for (size_t r = 0; r < rows; r++) {
        const real *pa = p->data + r * (size_t)W2, *pz = pa + W;
        real *o = y->data + r * (size_t)W;
        for (int k = 0; k < W; k++)
            o[k] = pa[k] * sb_fsigmoid(pz[k]);
    }
    y->requires_grad = p->requires_grad;
    if (y->requires_grad) {
        glu_ctx *c = sb_graph_record(g, glu_backward, sizeof *c);
        if (c != NULL)
            c->p = p, c->y = y;
    }
    return y;
}

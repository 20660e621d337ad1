/* ssm_math.h - scalar helpers shared by the state-space kernels (private to src/ops).
 *
 * ssm_exp is the exponential the scans call E*N times per frame. In the float build it is
 * a branch-free Cephes-style expf (range reduction by ln 2 in two parts, a degree-6
 * polynomial in fused multiply-adds, 2^k by exponent bits; about 2 ulp) that the compiler
 * vectorises inside `omp simd` loops, where libm's expf would be one call per element.
 * Arguments are clamped to [-87, 88]; NaN gives NaN, and no input (NaN, infinities) reaches
 * undefined behaviour. ssm_sigmoid builds on it. In the double build
 * (gradient checks) both are libm's. */
#ifndef SB_SSM_MATH_H
#define SB_SSM_MATH_H

#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "tensor/nn.h"

/* One single-threaded BLAS product (arguments as sb_gemm). The chunk kernels call it from
 * their own threads, one batch row per thread; a product that OpenBLAS split over threads
 * would round differently for different thread counts, and sb_gemm's blocking depends on
 * whether it is called inside a team (a team of one thread is not "in parallel"). */
static inline void ssm_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha,
                            const real *A, int lda, const real *B, int ldb, real beta, real *C,
                            int ldc)
{
    const int threads = omp_get_max_threads();
    if (threads > 1)
        omp_set_num_threads(1);
#ifdef SB_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    if (threads > 1)
        omp_set_num_threads(threads);
}

#ifdef SB_REAL_DOUBLE
static inline real ssm_exp(real x)
{
    return exp(x);
}

static inline real ssm_sigmoid(real x)
{
    return 1 / (1 + exp(-x));
}
#else
/* k as an integer, read from the bits of shifted = k + 1.5 * 2^23 (an integer of the
 * binade [2^23, 2^24), where consecutive integers have consecutive bit patterns) in
 * unsigned arithmetic: no float-to-int conversion, which is undefined for the NaN that a
 * NaN argument carries this far (a NaN then gives garbage bits times a NaN polynomial:
 * NaN). */
static inline uint32_t ssm_exp_shifted_int(float shifted)
{
    const float magic = 12582912.0f;
    uint32_t shifted_bits, magic_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    memcpy(&magic_bits, &magic, sizeof magic_bits);
    return shifted_bits - magic_bits;
}

static inline float ssm_exp(float x)
{
    const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* k = round(x / ln 2) by the 1.5 * 2^23 trick (exact in round-to-nearest) */
    const float shifted = fmaf(xc, 1.44269504088896341f, 12582912.0f);
    const float k = shifted - 12582912.0f;
    float r = fmaf(k, -0.693359375f, xc);
    r = fmaf(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    const uint32_t bits = (ssm_exp_shifted_int(shifted) + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale; /* exp(-87) = 1.6e-38 stands for anything below: still normal */
}

/* clamped so that the result never goes subnormal */
static inline float ssm_sigmoid(float x)
{
    const float xc = x < -80.0f ? -80.0f : (x > 80.0f ? 80.0f : x);
    return 1.0f / (1.0f + ssm_exp(-xc));
}
#endif

/* Sums inside the scans' vectorised loops are kept in SSM_LANES running partial sums, term i
 * going to lane i % SSM_LANES, combined by ssm_lanes_sum in a fixed tree:
 *
 *     real part[SSM_LANES] = {0};
 *     for (int n0 = 0; n0 < N; n0 += SSM_LANES) {
 *         const int lanes = ssm_lanes_width(n0, N);
 *     #pragma omp simd
 *         for (int k = 0; k < lanes; k++) { ... part[k] += term(n0 + k); }
 *     }
 *     acc = ssm_lanes_sum(part);
 *
 * An `omp simd reduction(+ : acc)` would let the compiler sum in its vector width's order
 * (8 float lanes with AVX2/AVX-512 at gcc's 256-bit preference, 4 with SSE2), so the
 * result would depend on the instruction set the binary was built for (SB_NATIVE). This
 * order is the same for every build; the compiler still vectorises the lanes. */
#define SSM_LANES 8

static inline int ssm_lanes_width(int n0, int n)
{
    return n - n0 < SSM_LANES ? n - n0 : SSM_LANES;
}

static inline real ssm_lanes_sum(const real *p)
{
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/* softplus with PyTorch's threshold: x above 20 passes through */
static inline real ssm_softplus(real x)
{
    return x > 20 ? x : log1p(exp(x));
}

/* d softplus / dx */
static inline real ssm_softplus_grad(real x)
{
    return x > 20 ? 1 : ssm_sigmoid(x);
}

#endif

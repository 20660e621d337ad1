/* fla_kernels.h - dense helpers shared by the chunked recurrences (linear_attn.c,
 * delta_rule.c), the fla blocks (fla_blocks.c) and attention (causal_blocks.c): the
 * products of tiny matrices (chunk x head width, at most a few hundred on a side), an exp
 * and a log1p that the compiler can vectorise, and lane-split sums.
 *
 * The per-chunk products are too small and too many for BLAS calls to pay, so they go to
 * sb_fla_gemm (fla_gemm.c), a register-blocked kernel (about twice OpenBLAS's speed on this
 * machine's AVX-512 at these sizes). Every sum runs in a fixed order, so results do not
 * depend on the number of threads. All matrices are row-major with a leading dimension
 * (elements between rows). Internal to src/ops/.
 */
#ifndef SELECTIVBENCH_FLA_KERNELS_H
#define SELECTIVBENCH_FLA_KERNELS_H

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "tensor/nn.h"

/* exp for the kernels. The double build uses libm (finite-difference checks want every
 * digit); the float build uses a Cody-Waite reduction and a degree-6 polynomial (cephes
 * expf, about 1 ulp) written so that loops over it vectorise (libm's expf does not without
 * -ffast-math). Arguments below -87 give 0 (libm: denormals down to -103), NaN stays NaN;
 * no input reaches undefined behaviour. */
#ifdef SB_REAL_DOUBLE
static inline real fla_exp(real x)
{
    return exp(x);
}
#else
static inline float fla_exp(float x)
{
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float shifted = xc * 1.44269504088896341f + 12582912.0f;
    float n = shifted - 12582912.0f; /* round(x / ln 2) */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* n as an integer from the bits of shifted (as ssm_exp does, ssm_math.h): no
     * float-to-int conversion, undefined for the NaN that a NaN argument carries here */
    const float magic = 12582912.0f;
    uint32_t shifted_bits, magic_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    memcpy(&magic_bits, &magic, sizeof magic_bits);
    uint32_t bits = (shifted_bits - magic_bits + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    y = x < -87.0f ? 0.0f : y;
    return x != x ? x : y;
}
#endif

/* log1p(y) for 0 <= y <= 1 (softplus and logsigmoid of -|x|): libm in the double build; in the
 * float build 2 atanh(s) with s = y / (2 + y) <= 1/3 by its series to s^15 (relative error
 * below 2e-9 before rounding), vectorisable. */
#ifdef SB_REAL_DOUBLE
static inline real fla_log1p01(real y)
{
    return log1p(y);
}
#else
static inline float fla_log1p01(float y)
{
    const float s = y / (2.0f + y), s2 = s * s;
    float p = 1.0f / 15.0f;
    p = p * s2 + 1.0f / 13.0f;
    p = p * s2 + 1.0f / 11.0f;
    p = p * s2 + 1.0f / 9.0f;
    p = p * s2 + 1.0f / 7.0f;
    p = p * s2 + 1.0f / 5.0f;
    p = p * s2 + 1.0f / 3.0f;
    p = p * s2 + 1.0f;
    return 2.0f * s * p;
}
#endif

/* C[M, N] = (accumulate ? C : 0) + alpha op(A)[M, P] B[P, N] (fla_gemm.c): op(A) = A (ta = 0,
 * A is M x P) or A^T (ta = 1, A is P x M); row-major with leading dimensions. Triangular
 * structure: tri_in = n > 0 when op(A)[i][p] = 0 for p >= (i + 1) n, tri_in = -n when
 * op(A)[i][p] = 0 for p < floor(i / n); tri_out = n > 0 when only C[i][j] with
 * j < (i + 1) n are wanted (others in the diagonal blocks may get any value). Zeros inside
 * the diagonal 8 x 8 blocks must be stored in A. Each C element is summed over p in
 * increasing order. */
void sb_fla_gemm(int ta, int M, int N, int P, real alpha, const real *A, size_t lda, const real *B,
                 size_t ldb, real *C, size_t ldc, int accumulate, int tri_in, int tri_out);

/* dst[N, M] = src[M, N]^T. */
static inline void fla_transpose(int M, int N, const real *src, size_t lds, real *dst, size_t ldd)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            dst[(size_t)j * ldd + (size_t)i] = src[(size_t)i * lds + (size_t)j];
}

/* Plain helpers over n values. Sums run in 16 interleaved partial sums added in a fixed
 * order at the end: the same result every time, and the compiler can vectorise it (a plain
 * running sum it cannot reorder). */
#define FLA_LANES 16

static inline real fla_lanes_sum(const real *part)
{
    real s = 0;
    for (int l = 0; l < FLA_LANES; l++)
        s += part[l];
    return s;
}

static inline real fla_dot(int n, const real *a, const real *b)
{
    real part[FLA_LANES] = {0};
    int i = 0;
    for (; i + FLA_LANES <= n; i += FLA_LANES)
        for (int l = 0; l < FLA_LANES; l++)
            part[l] = fma(a[i + l], b[i + l], part[l]);
    for (int l = 0; i + l < n; l++)
        part[l] = fma(a[i + l], b[i + l], part[l]);
    return fla_lanes_sum(part);
}

static inline void fla_axpy(int n, real alpha, const real *x, real *y)
{
    for (int i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

#endif

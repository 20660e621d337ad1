/* fla_kernels.h - small dense helpers shared by the chunked recurrences (linear_attn.c,
 * delta_rule.c): products of the tiny per-chunk matrices (C x K, K x V with K, V <= 256) and
 * an exp that the compiler can vectorise.
 *
 * The per-chunk products are too small for a BLAS call to pay (its overhead is about the
 * cost of the product), so they are plain loops whose innermost loop runs along a
 * contiguous row: the compiler vectorises it. Every sum runs in a fixed order, so results
 * do not depend on the number of threads. All matrices are row-major with a leading
 * dimension (elements between rows). Internal to src/nn/ops/.
 */
#ifndef SELECTIVBENCH_FLA_KERNELS_H
#define SELECTIVBENCH_FLA_KERNELS_H

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "selectivbench/nn.h"

/* exp for the kernels. The double build uses libm (finite-difference checks want every
 * digit); the float build uses a Cody-Waite reduction and a degree-6 polynomial (cephes
 * expf, about 1 ulp) written so that loops over it vectorise (libm's expf does not without
 * -ffast-math). Arguments below -87 give 0 (libm: denormals down to -103), NaN stays NaN. */
#ifdef SB_REAL_DOUBLE
static inline real fla_exp(real x)
{
    return exp(x);
}
#else
static inline float fla_exp(float x)
{
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    y = x < -87.0f ? 0.0f : y;
    return x != x ? x : y;
}
#endif

/* C[M, N] += alpha A[M, P] B[P, N]. */
static inline void fla_mm_nn(int M, int N, int P, real alpha, const real *A, size_t lda,
                             const real *B, size_t ldb, real *C, size_t ldc)
{
    for (int i = 0; i < M; i++) {
        real *c = C + (size_t)i * ldc;
        const real *a = A + (size_t)i * lda;
        for (int p = 0; p < P; p++) {
            const real ap = alpha * a[p];
            const real *b = B + (size_t)p * ldb;
            for (int j = 0; j < N; j++)
                c[j] += ap * b[j];
        }
    }
}

/* C[P, N] += alpha A[M, P]^T B[M, N] (a sum of M rank-1 updates, in order of M). */
static inline void fla_mm_tn(int M, int N, int P, real alpha, const real *A, size_t lda,
                             const real *B, size_t ldb, real *C, size_t ldc)
{
    for (int i = 0; i < M; i++) {
        const real *a = A + (size_t)i * lda, *b = B + (size_t)i * ldb;
        for (int p = 0; p < P; p++) {
            const real ap = alpha * a[p];
            real *c = C + (size_t)p * ldc;
            for (int j = 0; j < N; j++)
                c[j] += ap * b[j];
        }
    }
}

/* Lower-triangular variants for the intra-chunk products (L[i][j] used for j <= i only,
 * strict: j < i):
 *   fla_mm_lower_nn:  C[M, N] += alpha L[M, M] B[M, N]    (row i sums j <= i, or j < i)
 *   fla_mm_lower_tn:  C[M, N] += alpha L[M, M]^T B[M, N]  (row j sums i >= j, or i > j) */
static inline void fla_mm_lower_nn(int M, int N, int strict, real alpha, const real *L,
                                   size_t ldl, const real *B, size_t ldb, real *C, size_t ldc)
{
    for (int i = 0; i < M; i++) {
        real *c = C + (size_t)i * ldc;
        const real *l = L + (size_t)i * ldl;
        const int jend = strict ? i : i + 1;
        for (int j = 0; j < jend; j++) {
            const real lj = alpha * l[j];
            const real *b = B + (size_t)j * ldb;
            for (int v = 0; v < N; v++)
                c[v] += lj * b[v];
        }
    }
}

static inline void fla_mm_lower_tn(int M, int N, int strict, real alpha, const real *L,
                                   size_t ldl, const real *B, size_t ldb, real *C, size_t ldc)
{
    for (int i = 0; i < M; i++) {
        const real *l = L + (size_t)i * ldl, *b = B + (size_t)i * ldb;
        const int jend = strict ? i : i + 1;
        for (int j = 0; j < jend; j++) {
            const real lj = alpha * l[j];
            real *c = C + (size_t)j * ldc;
            for (int v = 0; v < N; v++)
                c[v] += lj * b[v];
        }
    }
}

/* dst[N, M] = src[M, N]^T. */
static inline void fla_transpose(int M, int N, const real *src, size_t lds, real *dst, size_t ldd)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            dst[(size_t)j * ldd + (size_t)i] = src[(size_t)i * lds + (size_t)j];
}

/* C[M, M] (lower triangle: j <= i, or j < i when strict) = alpha A[M, P] Bt[P, M] where Bt is
 * the transpose of the second factor; entries above the triangle are left alone. */
static inline void fla_mm_nn_lower_out(int M, int P, int strict, real alpha, const real *A,
                                       size_t lda, const real *Bt, size_t ldb, real *C,
                                       size_t ldc)
{
    for (int i = 0; i < M; i++) {
        real *c = C + (size_t)i * ldc;
        const real *a = A + (size_t)i * lda;
        const int jend = strict ? i : i + 1;
        for (int j = 0; j < jend; j++)
            c[j] = 0;
        for (int p = 0; p < P; p++) {
            const real ap = alpha * a[p];
            const real *b = Bt + (size_t)p * ldb;
            for (int j = 0; j < jend; j++)
                c[j] += ap * b[j];
        }
    }
}

/* Plain helpers over n values. */
static inline real fla_dot(int n, const real *a, const real *b)
{
    real s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline void fla_axpy(int n, real alpha, const real *x, real *y)
{
    for (int i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

#endif

/* blas.c - the one entry point to OpenBLAS for every matrix product (see nn.h).
 *
 * OpenBLAS's own threading splits a product differently for different thread counts, and
 * its kernels then round differently (measured: 1 and 2 threads disagree in the last
 * bits for most shapes). Results here must not depend on the thread count, so every
 * product is cut into blocks chosen from its shape alone, each block is one
 * single-threaded OpenBLAS call, and our OpenMP loop hands the blocks to threads. When
 * the inner dimension dominates (weight gradients summed over many tokens), it is cut
 * into fixed slices whose partial products are added in slice order.
 *
 * The same blocks can be computed by oneDNN's dnnl_sgemm instead (gemm_engine.c chooses;
 * inside our parallel loop oneDNN runs each block on one thread), or, outside deterministic
 * mode, one dnnl_sgemm call runs the whole product on all threads.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#if defined(SB_HAVE_ONEDNN) && !defined(SB_REAL_DOUBLE)
#include <oneapi/dnnl/dnnl.h>
#define SB_USE_ONEDNN 1
#endif

#include "core/alloc.h"
#include "tensor/gemm_engine.h"
#include "tensor/nn.h"

#define GEMM_SERIAL_FLOPS 2.0e6 /* below this, one call */
#define GEMM_BLOCKS 8           /* target number of blocks of a split product */
#define GEMM_K_SLICE 2048       /* inner-dimension slice of a K-split product */

/* One call to the engine's library (single-threaded inside our parallel loops). */
static void gemm_call(sb_gemm_kind engine, int trans_a, int trans_b, int M, int N, int K,
                      real alpha, const real *A, int lda, const real *B, int ldb, real beta,
                      real *C, int ldc)
{
#ifdef SB_USE_ONEDNN
    /* oneDNN's sgemm is row-major like ours; on a failure (it has no reason to fail on
     * valid sizes) OpenBLAS computes the product instead */
    if (engine == SB_GEMM_ONEDNN && dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K,
                                               alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success)
        return;
#else
    (void)engine;
#endif
#ifdef SB_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* Address of row r (of op(A)) / column c (of op(B)) inside a row-major operand. */
static const real *rows_of(const real *A, int trans, int lda, int r)
{
    return trans ? A + r : A + (size_t)r * (size_t)lda;
}

static const real *cols_of(const real *B, int trans, int ldb, int c)
{
    return trans ? B + (size_t)c * (size_t)ldb : B + c;
}

/* Blocks of `n` in steps of a multiple of 8, a function of n alone. */
static int block_size(int n)
{
    int b = (n + GEMM_BLOCKS - 1) / GEMM_BLOCKS;
    b = (b + 7) / 8 * 8;
    return b < 16 ? 16 : b;
}

void sb_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A, int lda,
             const real *B, int ldb, real beta, real *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    sb_gemm_kind engine = SB_GEMM_OPENBLAS;
    if (K > 0)
        engine = sb_gemm_engine_for(trans_a, trans_b, M, N, K, A, lda, B, ldb);
    sb_gemm_flops_add(engine, 2.0 * (double)M * (double)N * (double)K);
    sb_gemm_run(engine, engine == SB_GEMM_OPENBLAS || sb_gemm_deterministic(), trans_a, trans_b, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sb_gemm_run(sb_gemm_kind engine, int blocked, int trans_a, int trans_b, int M, int N, int K,
                 real alpha, const real *A, int lda, const real *B, int ldb, real beta, real *C,
                 int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (!blocked && engine == SB_GEMM_ONEDNN && K > 0) {
        /* one call on all threads: oneDNN's own split, fixed for a thread count */
        gemm_call(engine, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (K <= 0) {
        /* C = beta * C (some BLAS builds dislike K = 0) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * (size_t)ldc + (size_t)j] =
                    beta == 0 ? 0 : beta * C[(size_t)i * (size_t)ldc + (size_t)j];
        return;
    }
    /* OpenBLAS sizes its team with omp_get_max_threads(): set it to 1 around every call */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    /* K-split: partial products of fixed slices, summed in slice order, in a scratch of
     * slices x M x N; without memory for it, one serial call (the same product, rounded
     * differently) rather than a crash */
    const int k_split = K >= GEMM_K_SLICE * 2 && (double)K >= 4.0 * (double)(M > N ? M : N);
    const int slices = (K + GEMM_K_SLICE - 1) / GEMM_K_SLICE;
    const size_t mn = (size_t)M * (size_t)N;
    real *part = NULL;
    if (flops >= GEMM_SERIAL_FLOPS && omp_get_level() == 0 && k_split)
        part = sb_malloc((size_t)slices * mn * sizeof *part);
    if (flops < GEMM_SERIAL_FLOPS || omp_get_level() > 0 || (k_split && part == NULL)) {
        gemm_call(engine, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else if (k_split) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int s = 0; s < slices; s++) {
            int k0 = s * GEMM_K_SLICE, kn = K - k0 < GEMM_K_SLICE ? K - k0 : GEMM_K_SLICE;
            /* op(A)[:, k0:k0+kn] and op(B)[k0:k0+kn, :] */
            const real *As = trans_a ? A + (size_t)k0 * (size_t)lda : A + k0;
            const real *Bs = trans_b ? B + k0 : B + (size_t)k0 * (size_t)ldb;
            gemm_call(engine, trans_a, trans_b, M, N, kn, 1, As, lda, Bs, ldb, 0,
                      part + (size_t)s * mn, N);
        }
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                real acc = 0;
                for (int s = 0; s < slices; s++)
                    acc += part[(size_t)s * mn + (size_t)i * (size_t)N + (size_t)j];
                real *c = &C[(size_t)i * (size_t)ldc + (size_t)j];
                *c = alpha * acc + (beta == 0 ? 0 : beta * *c);
            }
        sb_free(part);
    } else if (M >= N) {
        int bm = block_size(M), blocks = (M + bm - 1) / bm;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int blk = 0; blk < blocks; blk++) {
            int r0 = blk * bm, rows = M - r0 < bm ? M - r0 : bm;
            gemm_call(engine, trans_a, trans_b, rows, N, K, alpha, rows_of(A, trans_a, lda, r0),
                      lda, B, ldb, beta, C + (size_t)r0 * (size_t)ldc, ldc);
        }
    } else {
        int bn = block_size(N), blocks = (N + bn - 1) / bn;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * bn, cols = N - c0 < bn ? N - c0 : bn;
            gemm_call(engine, trans_a, trans_b, M, cols, K, alpha, A, lda,
                      cols_of(B, trans_b, ldb, c0), ldb, beta, C + c0, ldc);
        }
    }
    omp_set_num_threads(threads);
}

const char *sb_blas_core_name(void)
{
    return openblas_get_corename();
}

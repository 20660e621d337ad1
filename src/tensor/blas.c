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
 * The same blocks can be computed by oneDNN instead (gemm_engine.c chooses; a matmul
 * primitive, gemm_onednn.c; inside our parallel loop oneDNN runs each block on one thread),
 * or, outside deterministic mode, one oneDNN call runs the whole product on all threads.
 * Under --precision bf16 the large products round both operands to bf16 first (once per
 * product) and oneDNN multiplies the copies, accumulating in float32.
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
    /* a matmul primitive (about twice dnnl_sgemm's rate here), else dnnl_sgemm (row-major like
     * ours), else (neither has a reason to fail on valid sizes) OpenBLAS */
    if (engine == SB_GEMM_ONEDNN &&
        (sb_onednn_matmul(0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0 ||
         dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta,
                    C, ldc) == dnnl_success))
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

/* The operands of one product, and where its blocks go: float32 (A, B) always, their bf16
 * copies (A16, B16, same layouts, dense) when the product runs in bf16. */
typedef struct gemm_operands {
    sb_gemm_kind engine;
    int trans_a, trans_b;
    const real *A, *B;
    int lda, ldb;
    const uint16_t *A16, *B16;
    int lda16, ldb16;
} gemm_operands;

/* Offset of op(X)[i][p] in a row-major X with leading dimension ld. */
static size_t at(int trans, int ld, int i, int p)
{
    return trans ? (size_t)p * (size_t)ld + (size_t)i : (size_t)i * (size_t)ld + (size_t)p;
}

/* The block C[r0:r0+rows, c0:c0+cols] (+)= alpha op(A)[r0.., k0:k0+kn] op(B)[k0.., c0..]; C
 * points at the block's first element. Single-threaded inside our parallel loops. */
static void block_product(const gemm_operands *g, int r0, int rows, int c0, int cols, int k0,
                          int kn, real alpha, real beta, real *C, int ldc)
{
#ifndef SB_REAL_DOUBLE
    if (g->A16 != NULL &&
        sb_onednn_matmul(1, g->trans_a, g->trans_b, rows, cols, kn, alpha,
                         g->A16 + at(g->trans_a, g->lda16, r0, k0), g->lda16,
                         g->B16 + at(!g->trans_b, g->ldb16, c0, k0), g->ldb16, beta, C, ldc) == 0)
        return;
#endif
    gemm_call(g->engine, g->trans_a, g->trans_b, rows, cols, kn, alpha,
              g->A + at(g->trans_a, g->lda, r0, k0), g->lda, g->B + at(!g->trans_b, g->ldb, c0, k0),
              g->ldb, beta, C, ldc);
}

/* Blocks of `n` in steps of a multiple of 8, a function of n alone. */
static int block_size(int n)
{
    int b = (n + GEMM_BLOCKS - 1) / GEMM_BLOCKS;
    b = (b + 7) / 8 * 8;
    return b < 16 ? 16 : b;
}

/* The product cut into blocks chosen from its shape alone, so that the result does not
 * depend on the thread count (K > 0). */
static void blocked_product(const gemm_operands *g, int M, int N, int K, real alpha, real beta,
                            real *C, int ldc)
{
    /* OpenBLAS sizes its team with omp_get_max_threads(): set it to 1 around every call
     * (oneDNN, inside our loop, runs on the calling thread anyway) */
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
        block_product(g, 0, M, 0, N, 0, K, alpha, beta, C, ldc);
    } else if (k_split) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int s = 0; s < slices; s++) {
            int k0 = s * GEMM_K_SLICE, kn = K - k0 < GEMM_K_SLICE ? K - k0 : GEMM_K_SLICE;
            block_product(g, 0, M, 0, N, k0, kn, 1, 0, part + (size_t)s * mn, N);
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
            block_product(g, r0, rows, 0, N, 0, K, alpha, beta, C + (size_t)r0 * (size_t)ldc, ldc);
        }
    } else {
        int bn = block_size(N), blocks = (N + bn - 1) / bn;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * bn, cols = N - c0 < bn ? N - c0 : bn;
            block_product(g, 0, M, c0, cols, 0, K, alpha, beta, C + c0, ldc);
        }
    }
    omp_set_num_threads(threads);
}

/* C = beta * C (some BLAS builds dislike K = 0) */
static void scale_only(int M, int N, real beta, real *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(size_t)i * (size_t)ldc + (size_t)j] =
                beta == 0 ? 0 : beta * C[(size_t)i * (size_t)ldc + (size_t)j];
}

#ifndef SB_REAL_DOUBLE
/* The bf16 copies of the operands, kept between products (top level only). */
static struct {
    uint16_t *data;
    size_t size; /* elements */
} bf16_buffer;

/* The product of operands already in bf16 (g->A16, g->B16): one oneDNN call on all threads,
 * or the deterministic blocks. 0, or -1 (nothing written) when it cannot run. */
static int bf16_run(const gemm_operands *g, int M, int N, int K, real alpha, real beta, real *C,
                    int ldc)
{
    if (sb_gemm_deterministic()) {
        blocked_product(g, M, N, K, alpha, beta, C, ldc);
        return 0;
    }
    return sb_onednn_matmul(1, g->trans_a, g->trans_b, M, N, K, alpha, g->A16, g->lda16, g->B16,
                            g->ldb16, beta, C, ldc);
}

/* The product with bf16 operands: both converted once into bf16_buffer, then bf16_run.
 * 0, or -1 (nothing written) when it cannot run. */
static int bf16_product(sb_gemm_kind engine, int trans_a, int trans_b, int M, int N, int K,
                        real alpha, const real *A, int lda, const real *B, int ldb, real beta,
                        real *C, int ldc)
{
    const size_t a_size = (size_t)M * (size_t)K, need = a_size + (size_t)K * (size_t)N;
    if (need > bf16_buffer.size) {
        sb_free(bf16_buffer.data);
        bf16_buffer.data = sb_malloc(need * sizeof *bf16_buffer.data);
        bf16_buffer.size = bf16_buffer.data != NULL ? need : 0;
        if (bf16_buffer.data == NULL)
            return -1;
    }
    /* the copies keep the operands' layouts, densely: op(A) is M x K either way */
    gemm_operands g = {.engine = engine,
                       .trans_a = trans_a,
                       .trans_b = trans_b,
                       .A = A,
                       .B = B,
                       .lda = lda,
                       .ldb = ldb,
                       .A16 = bf16_buffer.data,
                       .B16 = bf16_buffer.data + a_size,
                       .lda16 = trans_a ? M : K,
                       .ldb16 = trans_b ? K : N};
    sb_bf16_from_float(trans_a ? K : M, g.lda16, A, lda, (uint16_t *)g.A16);
    sb_bf16_from_float(trans_b ? N : K, g.ldb16, B, ldb, (uint16_t *)g.B16);
    return bf16_run(&g, M, N, K, alpha, beta, C, ldc);
}
#endif

int sb_gemm_bf16_applies(int M, int N, int K)
{
#ifdef SB_REAL_DOUBLE
    (void)M, (void)N, (void)K;
    return 0;
#else
    return sb_gemm_precision() == SB_PRECISION_BF16 &&
           2.0 * (double)M * (double)N * (double)K >= SB_GEMM_BF16_MIN_FLOPS &&
           omp_get_level() == 0;
#endif
}

void sb_gemm_rounded(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A,
                     const uint16_t *A16, int lda, const real *B, const uint16_t *B16, int ldb,
                     real beta, real *C, int ldc)
{
#ifndef SB_REAL_DOUBLE
    if (M > 0 && N > 0 && K > 0 && A16 != NULL && B16 != NULL && sb_gemm_bf16_applies(M, N, K)) {
        gemm_operands g = {.engine = SB_GEMM_ONEDNN,
                           .trans_a = trans_a,
                           .trans_b = trans_b,
                           .A = A,
                           .B = B,
                           .lda = lda,
                           .ldb = ldb,
                           .A16 = A16,
                           .B16 = B16,
                           .lda16 = lda,
                           .ldb16 = ldb};
        if (bf16_run(&g, M, N, K, alpha, beta, C, ldc) == 0) {
            const double flops = 2.0 * (double)M * (double)N * (double)K;
            sb_gemm_flops_add(SB_GEMM_ONEDNN, flops);
            sb_gemm_flops_add_bf16(flops);
            return;
        }
    }
#else
    (void)A16, (void)B16;
#endif
    sb_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sb_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A, int lda,
             const real *B, int ldb, real beta, real *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    const double flops = 2.0 * (double)M * (double)N * (double)K;
#ifndef SB_REAL_DOUBLE
    /* before the engine's choice: a bf16 product needs no float32 calibration */
    if (K > 0 && sb_gemm_bf16_applies(M, N, K) &&
        bf16_product(SB_GEMM_ONEDNN, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                     ldc) == 0) {
        sb_gemm_flops_add(SB_GEMM_ONEDNN, flops);
        sb_gemm_flops_add_bf16(flops);
        return;
    }
#endif
    sb_gemm_kind engine = SB_GEMM_OPENBLAS;
    if (K > 0)
        engine = sb_gemm_engine_for(M, N, K);
    sb_gemm_flops_add(engine, flops);
    sb_gemm_run(engine, engine == SB_GEMM_OPENBLAS || sb_gemm_deterministic(), trans_a, trans_b, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sb_gemm_run(sb_gemm_kind engine, int blocked, int trans_a, int trans_b, int M, int N, int K,
                 real alpha, const real *A, int lda, const real *B, int ldb, real beta, real *C,
                 int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_only(M, N, beta, C, ldc);
        return;
    }
    if (!blocked && engine == SB_GEMM_ONEDNN) {
        /* one call on all threads: oneDNN's own split, fixed for a thread count */
        gemm_call(engine, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_operands g = {.engine = engine,
                       .trans_a = trans_a,
                       .trans_b = trans_b,
                       .A = A,
                       .B = B,
                       .lda = lda,
                       .ldb = ldb};
    blocked_product(&g, M, N, K, alpha, beta, C, ldc);
}

const char *sb_blas_core_name(void)
{
    return openblas_get_corename();
}

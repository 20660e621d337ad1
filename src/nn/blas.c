/* blas.c - the one entry point to OpenBLAS for every matrix product (see nn.h). */
#include <cblas.h>

#include "selectivbench/nn.h"

void sb_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A, int lda,
             const real *B, int ldb, real beta, real *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        /* C = beta * C (BLAS would do the same; some builds dislike K = 0) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * (size_t)ldc + (size_t)j] =
                    beta == 0 ? 0 : beta * C[(size_t)i * (size_t)ldc + (size_t)j];
        return;
    }
#ifdef SB_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

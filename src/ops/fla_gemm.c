/* fla_gemm.c - the small matrix products of the chunked recurrences and of attention's query
 * blocks (causal_blocks.c); see fla_kernels.h.
 *
 * C[M, N] = (C or 0) + alpha op(A)[M, P] B[P, N], row-major, op(A) = A or A^T. The products
 * are tiny (chunk x head width: 16..256 on a side), too small for a BLAS call to pay and
 * too many for its overhead, so they get a register-blocked kernel of their own: blocks of
 * 8 rows x 32 columns of C (16 accumulator vectors), each step of p one row of B and 8
 * scalars of A, explicit fused multiply-adds (the build disables contraction). The compiler
 * vectorises the 32-wide rows (AVX-512: two registers). Narrower blocks (16 down to 1 column;
 * 4 rows) serve narrow heads and the last rows of a chunk, so head widths 4..16 do not fall
 * to the scalar tail kernel. Every element of C is one sum over p in increasing order, so
 * the result does not depend on the blocking or the threads.
 *
 * Triangular structure (chunk-local causal masks) is skipped block by block:
 *   tri_in = n > 0   op(A)[i][p] = 0 for p >= (i + 1) n      (lower; n = 1: p > i)
 *   tri_in = -n < 0  op(A)[i][p] = 0 for p < floor(i / n)     (upper)
 *   tri_out = n > 0  only C[i][j] with j < (i + 1) n are needed
 * A row block only skips whole steps of p (or columns) that are zero (unneeded) for all its
 * rows, so zeros inside the diagonal blocks must be stored in A, and C entries beyond the
 * triangle inside the diagonal blocks may be written with meaningless values.
 */
#include "ops/fla_kernels.h"

#define BR 8 /* rows per block (8 x 32 block: 16 accumulator registers in float) */

/* One block of R rows x W columns: A points at row 0 of the block in op(A) terms through
 * the strides (sa_i between rows, sa_p between steps of p). */
#define FLA_BLOCK(NAME, R, W)                                                                      \
    static void NAME(int p0, int p1, real alpha, const real *A, size_t sa_i, size_t sa_p,          \
                     const real *B, size_t ldb, real *C, size_t ldc, int accumulate)               \
    {                                                                                              \
        real acc[R][W];                                                                            \
        for (int r = 0; r < R; r++)                                                                \
            for (int j = 0; j < W; j++)                                                            \
                acc[r][j] = 0;                                                                     \
        for (int p = p0; p < p1; p++) {                                                            \
            const real *b = B + (size_t)p * ldb;                                                   \
            for (int r = 0; r < R; r++) {                                                          \
                const real x = A[(size_t)r * sa_i + (size_t)p * sa_p];                             \
                /* without this, gcc 12 vectorises W = 16 across r with shuffles, 12x slower */    \
                _Pragma("omp simd") for (int j = 0; j < W; j++) acc[r][j] =                        \
                    fma(x, b[j], acc[r][j]);                                                       \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < R; r++) {                                                              \
            real *c = C + (size_t)r * ldc;                                                         \
            if (accumulate)                                                                        \
                for (int j = 0; j < W; j++)                                                        \
                    c[j] += alpha * acc[r][j];                                                     \
            else                                                                                   \
                for (int j = 0; j < W; j++)                                                        \
                    c[j] = alpha * acc[r][j];                                                      \
        }                                                                                          \
    }

FLA_BLOCK(block_8x32, 8, 32)
FLA_BLOCK(block_8x16, 8, 16)
FLA_BLOCK(block_8x8, 8, 8)
FLA_BLOCK(block_8x4, 8, 4)
FLA_BLOCK(block_8x2, 8, 2)
FLA_BLOCK(block_8x1, 8, 1)
FLA_BLOCK(block_4x32, 4, 32)
FLA_BLOCK(block_4x16, 4, 16)
FLA_BLOCK(block_4x8, 4, 8)
FLA_BLOCK(block_4x4, 4, 4)
FLA_BLOCK(block_4x2, 4, 2)
FLA_BLOCK(block_4x1, 4, 1)
FLA_BLOCK(block_1x32, 1, 32)
FLA_BLOCK(block_1x16, 1, 16)

/* The last columns (fewer than 16) of a single row. */
static void block_1xw(int W, int p0, int p1, real alpha, const real *A, size_t sa_p, const real *B,
                      size_t ldb, real *C, int accumulate)
{
    real acc[16] = {0};
    for (int p = p0; p < p1; p++) {
        const real x = A[(size_t)p * sa_p];
        const real *b = B + (size_t)p * ldb;
        for (int j = 0; j < W; j++)
            acc[j] = fma(x, b[j], acc[j]);
    }
    for (int j = 0; j < W; j++)
        C[j] = (accumulate ? C[j] : 0) + alpha * acc[j];
}

/* The columns [0, ncols) of one row block of R rows (8, 4 or 1). */
static void row_block(int R, int ncols, int p0, int p1, real alpha, const real *A, size_t sa_i,
                      size_t sa_p, const real *B, size_t ldb, real *C, size_t ldc, int accumulate)
{
    int j = 0;
    if (R == BR) {
        for (; j + 32 <= ncols; j += 32)
            block_8x32(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 16 <= ncols; j += 16)
            block_8x16(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 8 <= ncols; j += 8)
            block_8x8(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 4 <= ncols; j += 4)
            block_8x4(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 2 <= ncols; j += 2)
            block_8x2(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j < ncols; j++)
            block_8x1(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
    } else if (R == 4) {
        for (; j + 32 <= ncols; j += 32)
            block_4x32(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 16 <= ncols; j += 16)
            block_4x16(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 8 <= ncols; j += 8)
            block_4x8(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 4 <= ncols; j += 4)
            block_4x4(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 2 <= ncols; j += 2)
            block_4x2(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j < ncols; j++)
            block_4x1(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
    } else {
        for (; j + 32 <= ncols; j += 32)
            block_1x32(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        for (; j + 16 <= ncols; j += 16)
            block_1x16(p0, p1, alpha, A, sa_i, sa_p, B + j, ldb, C + j, ldc, accumulate);
        if (j < ncols)
            block_1xw(ncols - j, p0, p1, alpha, A, sa_p, B + j, ldb, C + j, accumulate);
    }
}

void sb_fla_gemm(int ta, int M, int N, int P, real alpha, const real *A, size_t lda, const real *B,
                 size_t ldb, real *C, size_t ldc, int accumulate, int tri_in, int tri_out)
{
    /* op(A)[i][p] = A[i * sa_i + p * sa_p] */
    const size_t sa_i = ta ? 1 : lda, sa_p = ta ? lda : 1;
    for (int i = 0; i < M;) {
        const int R = M - i >= BR ? BR : M - i >= 4 ? 4 : 1;
        int p0 = 0, p1 = P;
        if (tri_in > 0) {
            const long end = (long)(i + R) * tri_in;
            p1 = end < P ? (int)end : P;
        } else if (tri_in < 0) {
            p0 = i / -tri_in;
        }
        int ncols = N;
        if (tri_out > 0) {
            const long end = (long)(i + R) * tri_out;
            ncols = end < N ? (int)end : N;
        }
        row_block(R, ncols, p0, p1, alpha, A + (size_t)i * sa_i, sa_i, sa_p, B, ldb,
                  C + (size_t)i * ldc, ldc, accumulate);
        i += R;
    }
}

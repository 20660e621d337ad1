/* causal_blocks.c - the products of causal attention over one block of queries, shared by
 * softmax attention (attention.c) and forgetting attention (forgetting_attn.c); see
 * causal_blocks.h. They go to sb_fla_gemm (fla_gemm.c), not BLAS: with head widths of 2 to
 * 128 they are small and thin, where the register-blocked kernel runs about twice as fast as
 * a serial sgemm call, and it skips the masked half of each diagonal block (the keys after
 * the query), a third of the work at T = 256.
 */
#include "ops/causal_blocks.h"

#include "ops/fla_kernels.h"

/* S[rows, t1] <- Q[t0:t1] X for X = [Dh, T] (a transposed K or V): the keys before the block
 * in full, the diagonal block only on and below its diagonal (entries above it are left
 * undefined; callers never read them). */
void sb_causal_scores(const real *Q, int ld, int Dh, int t0, int rows, real alpha, const real *X,
                      int T, real *S)
{
    const int t1 = t0 + rows;
    const real *Qb = Q + (size_t)t0 * (size_t)ld;
    if (t0 > 0)
        sb_fla_gemm(0, rows, t0, Dh, alpha, Qb, (size_t)ld, X, (size_t)T, S, (size_t)t1, 0, 0, 0);
    sb_fla_gemm(0, rows, rows, Dh, alpha, Qb, (size_t)ld, X + t0, (size_t)T, S + t0, (size_t)t1, 0,
                0, 1);
}

/* C[0:t1, Dh] (+)= alpha A^T Y[t0:t1] for A = [rows, t1] lower-triangular in its diagonal
 * block (P or dS): rows [0, t0) of C in full, rows [t0, t1) skipping the masked zeros. */
void sb_causal_at_y(const real *A, int t0, int rows, real alpha, const real *Y, int ld, int Dh,
                    real *C, int accumulate)
{
    const int t1 = t0 + rows;
    const real *Yb = Y + (size_t)t0 * (size_t)ld;
    if (t0 > 0)
        sb_fla_gemm(1, t0, Dh, rows, alpha, A, (size_t)t1, Yb, (size_t)ld, C, (size_t)ld,
                    accumulate, 0, 0);
    sb_fla_gemm(1, rows, Dh, rows, alpha, A + t0, (size_t)t1, Yb, (size_t)ld,
                C + (size_t)t0 * (size_t)ld, (size_t)ld, accumulate, -1, 0);
}

/* C[rows, Dh] (+)= alpha A Y[0:t1] for A = [rows, t1] as above: keys before the block, then
 * the diagonal block's lower triangle (the sum over keys stays in increasing order). */
void sb_causal_a_y(const real *A, int t0, int rows, real alpha, const real *Y, int ld, int Dh,
                   real *C, int accumulate)
{
    const int t1 = t0 + rows;
    if (t0 > 0) {
        sb_fla_gemm(0, rows, Dh, t0, alpha, A, (size_t)t1, Y, (size_t)ld, C, (size_t)ld, accumulate,
                    0, 0);
        accumulate = 1;
    }
    sb_fla_gemm(0, rows, Dh, rows, alpha, A + t0, (size_t)t1, Y + (size_t)t0 * (size_t)ld,
                (size_t)ld, C, (size_t)ld, accumulate, 1, 0);
}

/* XT[Dh, T] = X^T for the [T, Dh] slice X with row stride ld. */
void sb_transpose_head(const real *X, int ld, int T, int Dh, real *XT)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < Dh; i++)
            XT[(size_t)i * (size_t)T + (size_t)t] = X[(size_t)t * (size_t)ld + (size_t)i];
}

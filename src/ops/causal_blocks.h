/* causal_blocks.h - block products of causal attention (causal_blocks.c). Internal to
 * src/ops/.
 *
 * A block holds the queries [t0, t0 + rows) of one (batch, head) slice; t1 = t0 + rows. Q, K,
 * V, Y are [T, Dh] slices with row stride ld; A is a [rows, t1] block of probabilities or
 * score gradients, row stride t1, zero above the causal diagonal (the zeros stored). Each
 * sum runs over keys (or queries) in increasing order, so results do not depend on threads.
 */
#ifndef SELECTIVBENCH_CAUSAL_BLOCKS_H
#define SELECTIVBENCH_CAUSAL_BLOCKS_H

#include "tensor/nn.h"

/* XT[Dh, T] = X^T for the [T, Dh] slice X (row stride ld): the score products read the keys
 * (or values) transposed. */
void sb_transpose_head(const real *X, int ld, int T, int Dh, real *XT);

/* S[rows, t1] = alpha Q[t0:t1] XT[:, 0:t1]: the keys before the block in full, the diagonal
 * block on and below its diagonal only (entries above it are left undefined). */
void sb_causal_scores(const real *Q, int ld, int Dh, int t0, int rows, real alpha, const real *X,
                      int T, real *S);

/* C[0:t1, Dh] (+)= alpha A^T Y[t0:t1] (dV from P, dK from dS). */
void sb_causal_at_y(const real *A, int t0, int rows, real alpha, const real *Y, int ld, int Dh,
                    real *C, int accumulate);

/* C[rows, Dh] (+)= alpha A Y[0:t1] (O from P, dQ from dS); C is the block's first row. */
void sb_causal_a_y(const real *A, int t0, int rows, real alpha, const real *Y, int ld, int Dh,
                   real *C, int accumulate);

#endif

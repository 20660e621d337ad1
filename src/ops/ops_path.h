/*
 * ops_path.h - PaTH attention (Yang et al. 2025, "PaTH Attention: Position Encoding via
 * Accumulating Householder Transformations"), the kernel of src/layers/path_attn.c.
 * Conventions as ops.h: the output is new arena memory, the op records its backward when an
 * input needs a gradient, and the backward accumulates (+=) into the inputs' gradients.
 * Docs: docs/models/path_attn.md.
 */
#ifndef SELECTIVBENCH_OPS_PATH_H
#define SELECTIVBENCH_OPS_PATH_H

#include "tensor/nn.h"

/* ---- path_attn.c ----------------------------------------------------------------------------
 *
 * Per batch and head, with the Householder-like transforms H_s = I - beta_s w_s w_s^T and
 * s = Dh^-1/2:
 *   Z_ij = s q_i^T H_i H_{i-1} ... H_{j+1} k_j   (j <= i; the empty product is I)
 *   P = softmax_j(Z),   o_i = sum_j P_ij v_j
 * q, k, v, w [B, T, H, Dh]; beta [B, T, H]. w is used as given (the layer L2-normalises it;
 * with |w| = 1 and beta in (0, 2) every H_s is orthogonal-like with eigenvalue 1 - beta along
 * w). Returns o [B, T, H, Dh].
 *
 * No T x T x Dh tensor (nor T x T) is formed. sb_path_attn works on blocks of `block` query
 * rows (SB_PATH_ATTN_BLOCK in the layer) that walk back over the keys together, carrying
 * one vector per row (u <- H_j u between key j and key j - 1): ~3 Dh multiply-adds per row
 * and key, vectorised across the block's rows; the forward saves the row log-sum-exp only,
 * the backward recomputes a block's walk keeping its vectors ([T, Dh, block] scratch per
 * thread) and runs it in reverse. Memory grows linearly in T. sb_path_attn_ref is the same
 * walk one row at a time (its backward keeps one row's vectors), the twin the blocked form is
 * tested against; tests/unit/test_path_attn.c checks both against explicit products of the
 * Householder matrices. Work is split over (b, h) pairs, each summed in a fixed order:
 * results do not depend on the thread count. Any block >= 1 gives the same function. */
#define SB_PATH_ATTN_BLOCK 32
sb_tensor *sb_path_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                        sb_tensor *beta, int block);
sb_tensor *sb_path_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                            sb_tensor *beta);

#endif

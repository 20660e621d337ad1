/*
 * ops_gla_family.h - the two small ops that LinearAttention and HGRN2 need around kernel K1
 * (sb_linear_attn, ops_fla.h): fla's Hadamard feature map and HGRN2's tied input gate.
 * Conventions as ops.h: every op writes a new output in the arena, records its backward when
 * an input needs a gradient, and its backward accumulates (+=) into the inputs' gradients.
 * Docs: docs/models/linear_attn.md, docs/models/hgrn2.md.
 */
#ifndef SELECTIVBENCH_OPS_GLA_FAMILY_H
#define SELECTIVBENCH_OPS_GLA_FAMILY_H

#include "tensor/nn.h"

/* fla's HadamardFeatureMap: y = (x W1^T + b1) ⊙ (x W2^T + b2) over the last dimension of x
 * [..., Din], W1, W2 [Dout, Din], b1, b2 [Dout] (the two nn.Linear of the map, one pair
 * shared by every head). Returns [..., Dout]. */
sb_tensor *sb_hadamard_map(sb_graph *g, sb_tensor *x, sb_tensor *w1, sb_tensor *b1, sb_tensor *w2,
                           sb_tensor *b2);

/* HGRN2's key from its log forget gate: k = 1 - exp(glog), elementwise (glog <= 0 gives k in
 * [0, 1)); dglog = -dk exp(glog). */
sb_tensor *sb_one_minus_exp(sb_graph *g, sb_tensor *glog);

#endif

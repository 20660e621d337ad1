/*
 * ops_layered.h - the ops that the LM stack of the *_layered models adds to ops.h and
 * ops_fla.h: kernel K4 (forgetting attention, FoX) and fla's GatedMLP. Conventions as ops.h:
 * every op writes a new output in the arena, records its backward when an input needs a
 * gradient, and its backward accumulates (+=) into the inputs' gradients.
 * Docs: docs/models/layered.md.
 */
#ifndef SELECTIVBENCH_OPS_LAYERED_H
#define SELECTIVBENCH_OPS_LAYERED_H

#include "tensor/nn.h"

/* ---- forgetting_attn.c: kernel K4 -------------------------------------------------------
 *
 * Per batch and head, with F_t = f_1 + ... + f_t (the cumulative log forget gates) and
 * s = Dh^-1/2:
 *   Z_ij = s q_i . k_j + F_i - F_j  (j <= i),   P = softmax_j(Z),   o_i = sum_j P_ij v_j
 * q, k, v [B, T, H, Dh]; f [B, T, H] (log forget gates, <= 0, e.g. logsigmoid of a
 * projection). Returns o [B, T, H, Dh].
 *
 * sb_forgetting_attn works on blocks of queries like sb_attention_causal: no T x T matrix is
 * stored; training keeps the row log-sum-exp and recomputes the probabilities in the
 * backward. The cumulative sums are formed in double. sb_forgetting_attn_ref is the plain
 * form (the whole score matrix, kept for the backward), the reference the blocked form is
 * tested against. */
sb_tensor *sb_forgetting_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *f);
sb_tensor *sb_forgetting_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v,
                                  sb_tensor *f);

/* ---- gated_mlp.c: fla's GatedMLP ----------------------------------------------------------
 *
 * m = (silu(z Wg^T) * (z Wu^T)) Wd^T for z [..., D], Wg and Wu [I, D] (gate_proj, up_proj),
 * Wd [D, I] (down_proj); no biases. Returns m with z's shape. Saves z and the two [N, I]
 * projections; the product silu(g) u is recomputed in the backward (as fla's fused
 * swiglu_linear does). */
sb_tensor *sb_gated_mlp(sb_graph *g, sb_tensor *z, sb_tensor *w_gate, sb_tensor *w_up,
                        sb_tensor *w_down);

#endif

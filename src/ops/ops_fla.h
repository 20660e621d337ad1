/*
 * ops_fla.h - the ops of the flash-linear-attention layers (GLA, DeltaNet, Gated DeltaNet,
 * Gated DeltaProduct; later RetNet, SimpleGLA, HGRN2, MesaNet): the two recurrence kernels
 * and the small blocks around them. Conventions as ops.h: shapes in comments, every op
 * writes a new output in the arena, records its backward when an input needs a gradient,
 * and its backward accumulates (+=) into the inputs' gradients.
 *
 * Glossary: B batch, T frames, H heads, K key width per head, V value width per head,
 * n Householder steps per token (delta rule), C chunk length (tokens).
 * Spec: docs/models/fla_layers.md; derivations: docs/models/linear_attention.md.
 *
 * Recurrent states are [B, H, K, V] (key-major), as the spec writes them.
 */
#ifndef SELECTIVBENCH_OPS_FLA_H
#define SELECTIVBENCH_OPS_FLA_H

#include "tensor/nn.h"

/* Chunk lengths (tokens) of GLA (K1) and DeltaNet / Gated DeltaNet (K2); Gated DeltaProduct
 * uses 8 tokens = 32 steps. Any value >= 1 gives the same function. */
#define SB_LINEAR_ATTN_CHUNK 32
#define SB_DELTA_RULE_CHUNK 16

/* ---- linear_attn.c: kernel K1, decayed linear attention ---------------------------------
 *
 *   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = scale * S_t^T q_t
 *
 * q, k [B, T, H, K]; v [B, T, H, V]; gate: NULL (no decay, LinearAttention), [B, T, H] (one
 * log-decay per head and token: RetNet, SimpleGLA) or [B, T, H, K] (one per key channel:
 * GLA, HGRN2); log-decays must be finite and <= 0. Returns o [B, T, H, V].
 *
 * state == NULL: the sequence starts from S_0 = 0, and the op records its backward when an
 * input needs a gradient. state != NULL ([B, H, K, V]): streaming evaluation; S_0 is read
 * from state and the final state is written back; the graph must not record.
 *
 * sb_linear_attn is the chunked algorithm (chunks of `chunk` tokens, intra-chunk products
 * factorised through the chunk's decays, boundary states kept for the backward);
 * sb_linear_attn_ref is the plain step-by-step recurrence with the state-based backward,
 * kept as the reference the chunked form is tested against (it stores every state). */
sb_tensor *sb_linear_attn(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *gate,
                          real scale, int chunk, real *state);
sb_tensor *sb_linear_attn_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v,
                              sb_tensor *gate, real scale, real *state);

/* ---- delta_rule.c: kernel K2, the (gated) delta rule --------------------------------------
 *
 * Per token t and Householder step j = 0..n-1 (spec sections 3 and 10.3):
 *   S <- exp(g_t) S                                   (before step 0; no gate: g = 0)
 *   S <- S + beta_{t,j} k_{t,j} (v_{t,j} - S^T k_{t,j})^T
 *   o_t = scale * S^T q_t                              (after step n-1)
 * q [B, T, H, K] (already L2-normalised by the caller); k [B, T, n*H, K] and v [B, T, n*H, V]
 * with the step index outermost (k[b, t, j*H + h] is step j of head h); beta [B, T, n*H];
 * gate NULL (DeltaNet) or [B, T, H] (log-decays <= 0: Gated DeltaNet / DeltaProduct).
 * n = k->shape[2] / H (1 for DeltaNet and Gated DeltaNet). Returns o [B, T, H, V].
 * beta is used as given: (0, 1) keeps the transition's eigenvalues in [0, 1], (0, 2)
 * allows negative ones (the caller scales). state as for sb_linear_attn.
 *
 * sb_delta_rule is the chunked WY/UT algorithm (chunks of `chunk` tokens = chunk*n
 * interleaved steps); sb_delta_rule_ref the step-by-step recurrence with the state-based
 * backward (stores every state; for tests). */
sb_tensor *sb_delta_rule(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                         sb_tensor *gate, real scale, int chunk, real *state);
sb_tensor *sb_delta_rule_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                             sb_tensor *gate, real scale, real *state);

/* ---- fla_blocks.c: the shared blocks (spec section 1) ------------------------------------ */

/* Short convolution of the fla layers: silu(causal depthwise conv(x)), no bias.
 * x [B, T, C], w [C, 1, W] (W <= 8) -> [B, T, C]. */
sb_tensor *sb_short_conv(sb_graph *g, sb_tensor *x, sb_tensor *w);
/* Streaming form (not recorded): history [B][W-1][C] as sb_conv1d_causal_stream. */
sb_tensor *sb_short_conv_stream(sb_graph *g, sb_tensor *x, sb_tensor *w, real *history);
/* The short convolutions of a layer's n projections, xs[i] through ws[i] in place. With
 * history NULL, whole sequences from zero history (recorded); else streaming, with the
 * histories of the n convolutions stored one after the other from `history` (in the
 * order given). Returns the first float after them (NULL when history is NULL): where a
 * layer's streaming state continues. */
real *sb_short_convs(sb_graph *g, int n, sb_tensor **xs, sb_tensor *const *ws, real *history);

/* L2 normalisation over groups of D values (the last dimension must be a multiple of D):
 * y = x / sqrt(sum x^2 + eps) (eps inside the root, added to the sum; fla uses 1e-6). */
sb_tensor *sb_l2norm(sb_graph *g, sb_tensor *x, int D, real eps);

/* fla RMSNorm over groups of D = w->size values, one weight shared by every group (head):
 * y = x / sqrt(mean x^2 + eps) * w, and with a gate (same shape as x) the swish-gated form
 * of FusedRMSNormGated: y = x / sqrt(mean x^2 + eps) * w * silu(gate). gate may be NULL. */
sb_tensor *sb_rmsnorm_gated(sb_graph *g, sb_tensor *x, sb_tensor *gate, sb_tensor *w, real eps);

/* y = scale * logsigmoid(x), elementwise (GLA: scale = 1/16; MesaNet, FoX: 1). */
sb_tensor *sb_logsigmoid(sb_graph *g, sb_tensor *x, real scale);

/* The GLA key-channel log-decay: logsigmoid((x W0^T) W1^T + b1) / normalizer, with the
 * low-rank pair W0 [R, D], W1 [K_all, R], b1 [K_all] and no nonlinearity between them.
 * x [B, T, D] -> [B, T, K_all]. */
sb_tensor *sb_gla_gate(sb_graph *g, sb_tensor *x, sb_tensor *w0, sb_tensor *w1, sb_tensor *b1,
                       real normalizer);

/* The Gated DeltaNet / DeltaProduct log-decay: g = -exp(A_log[h]) * softplus(a + dt_bias[h])
 * for a [B, T, H], A_log [H], dt_bias [H] -> [B, T, H]. */
sb_tensor *sb_decay_gate(sb_graph *g, sb_tensor *a, sb_tensor *A_log, sb_tensor *dt_bias);

/* Write strength beta = c * sigmoid(z), elementwise (c = 1, or 2 to allow negative
 * eigenvalues). */
sb_tensor *sb_beta_gate(sb_graph *g, sb_tensor *z, real c);

#endif

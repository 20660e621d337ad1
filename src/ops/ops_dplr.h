/*
 * ops_dplr.h - the diagonal-plus-low-rank (generalized delta rule) recurrence that serves Kimi
 * Delta Attention (src/layers/kda.c) and RWKV-7 (src/layers/rwkv7.c), and the small
 * elementwise blocks around it. Conventions as ops.h and ops_fla.h: shapes in comments,
 * states [B, H, K, V] key-major, backward accumulates (+=).
 * Docs: docs/models/kda.md, docs/models/rwkv7.md.
 */
#ifndef SELECTIVBENCH_OPS_DPLR_H
#define SELECTIVBENCH_OPS_DPLR_H

#include "tensor/nn.h"

/* Tokens between the states the forward keeps for the backward (the backward recomputes the
 * states inside each such block from the one kept at its start). Any value >= 1 gives the
 * same function and gradients. */
#define SB_DPLR_CHUNK 16

/* Which state the rank-1 term reads. With D_t = diag(exp(w_t)):
 *   SB_DPLR_UNDECAYED (RWKV-7, fla's generalized delta rule):
 *       S_t = D_t S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T
 *   SB_DPLR_DECAYED (KDA, fla's naive_recurrent_kda: decay first, then the delta update):
 *       S_t = (I + b_t a_t^T) D_t S_{t-1} + k_t v_t^T
 * and in both o_t = scale * S_t^T q_t (the readout sees token t). */
typedef enum sb_dplr_order { SB_DPLR_UNDECAYED = 0, SB_DPLR_DECAYED = 1 } sb_dplr_order;

/* ---- dplr.c ------------------------------------------------------------------------------
 * q, k, w, a, b [B, T, H, K]; v [B, T, H, V]; w is the log-decay (finite; any sign is
 * accepted, the layers pass w <= 0). Returns o [B, T, H, V].
 * state == NULL: from S_0 = 0, recorded when an input needs a gradient; the forward keeps the
 * state entering every block of `chunk` tokens and the backward recomputes the rest, so its
 * memory is B H (T / chunk + chunk) K V reals. state != NULL ([B, H, K, V]): streaming
 * evaluation, S_0 read from state and the last state written back; not recorded. */
sb_tensor *sb_dplr(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *w,
                   sb_tensor *a, sb_tensor *b, real scale, sb_dplr_order order, int chunk,
                   real *state);

/* y = c * x * s: x [B, T, H, D] (or any [rows, H, D]), s [B, T, H] (one scalar per head and
 * token) or NULL (then y = c * x). */
sb_tensor *sb_dplr_scale_heads(sb_graph *g, sb_tensor *x, sb_tensor *s, real c);

/* y = c * x * z, elementwise (same shapes). */
sb_tensor *sb_dplr_mul(sb_graph *g, sb_tensor *x, sb_tensor *z, real c);

/* KDA's per-channel log-decay: g = -exp(A_log[h]) * softplus(f + dt_bias[h K + c]) for
 * f [B, T, H K], A_log [H], dt_bias [H K] -> [B, T, H K] (softplus with PyTorch's threshold
 * 20). */
sb_tensor *sb_kda_gate(sb_graph *g, sb_tensor *f, sb_tensor *A_log, sb_tensor *dt_bias);

/* ---- rwkv_blocks.c: the blocks of RWKV-7 around the recurrence --------------------------- */

/* Token shift: delta_t = x_{t-1} - x_t with x_{-1} = 0, x [B, T, D] -> [B, T, D]. history
 * NULL: whole sequences (recorded). history != NULL ([B][D]): streaming, x_{-1} read from it
 * and the last frame written back (not recorded). */
sb_tensor *sb_token_shift(sb_graph *g, sb_tensor *x, real *history);

/* y = x * w with w [D] broadcast over the rows of x [..., D]. */
sb_tensor *sb_dplr_rowmul(sb_graph *g, sb_tensor *x, sb_tensor *w);

/* nn.GroupNorm(G, D, eps) on x [..., D]: each row's D channels in G groups of D / G, each
 * group normalised by its mean and biased variance (eps under the root), then y * weight +
 * bias per channel (weight, bias [D]). */
sb_tensor *sb_group_norm(sb_graph *g, sb_tensor *x, int G, sb_tensor *weight, sb_tensor *bias,
                         real eps);

/* RWKV-7's bonus term: for each head h, y_h = (sum_c r_hc k_hc u_hc) v_h with r, k
 * [B, T, H K], u [H K] (the parameter r_k flattened), v [B, T, H V] -> [B, T, H V]. */
sb_tensor *sb_rwkv7_bonus(sb_graph *g, sb_tensor *r, sb_tensor *k, sb_tensor *u, sb_tensor *v,
                          int H);

#endif

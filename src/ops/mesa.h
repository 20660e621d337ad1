/* mesa.h - kernel K3, the MesaNet recurrence (mesa.c), and the ridge parameter of MesaNet.
 * Derivations: docs/models/mesa_net.md.
 * Conventions as ops.h and ops_fla.h: every op writes a new output in the arena, records its
 * backward when an input needs a gradient, and its backward accumulates (+=).
 * Internal to src/ops/ and src/layers/ (the MesaNet layer and the tests include it by path).
 */
#ifndef SELECTIVBENCH_MESA_H
#define SELECTIVBENCH_MESA_H

#include "tensor/nn.h"

/* Tokens between the states the training forward keeps for the backward (fla: 64). Any value
 * >= 1 gives the same function. */
#define SB_MESA_CHUNK 64
/* Conjugate-gradient steps of fla's MesaNet in training and evaluation
 * (max_cg_step_training = max_cg_step_decoding = 30). */
#define SB_MESA_CG_STEPS 30

/* Per batch and head, with q_t, k_t [K] (L2-normalised by the caller), v_t [V], beta_t,
 * log-decay g_t <= 0 and the ridge lam [K] of the head:
 *   H_t = exp(g_t) H_{t-1} + beta_t k_t k_t^T          (K x K)
 *   G_t = exp(g_t) G_{t-1} + beta_t k_t v_t^T          (K x V)
 *   x_t = (H_t + diag(lam))^{-1} q_t,   o_t = G_t^T x_t  (no scale)
 * q, k [B, T, H, K]; v [B, T, H, V]; beta, gate [B, T, H]; lam [H, K] (or [H K]) -> o
 * [B, T, H, V].
 *
 * cg_steps > 0: x_t is fla's conjugate gradient, started from x = 0, run for exactly
 * cg_steps steps with its 1e-5 guards in both denominators (what the reference computes);
 * cg_steps == 0: the exact solve (Cholesky), for gradient checks. The backward is the
 * implicit one in both cases (as fla): y_t = (H_t + diag(lam))^{-1} (G_t do_t) by the same
 * solver, dq_t = y_t, dlam -= y_t * x_t, and reverse-time recurrences for the two states; it
 * is the exact gradient of the exact-solve forward.
 *
 * state == NULL: the sequence starts from H_0 = G_0 = 0 and the op records its backward when
 * an input needs a gradient. state != NULL ([B, H, K K + K V]: H_t then G_t of each
 * sample and head): streaming evaluation, read and written back; the graph must not record.
 *
 * sb_mesa solves token by token on explicit states (the cheaper form on a CPU: a K x K
 * matrix-vector product per CG step, against fla's 2 C K + K^2 per token for its chunk
 * rows); the training forward keeps the states every `chunk` tokens and the solutions x_t,
 * and the backward recomputes each chunk's states. sb_mesa_ref is the plain recurrence
 * that keeps every state, with the state-based backward of the spec, kept as the reference
 * sb_mesa is tested against. */
sb_tensor *sb_mesa(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                   sb_tensor *gate, sb_tensor *lam, int cg_steps, int chunk, real *state);
sb_tensor *sb_mesa_ref(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v, sb_tensor *beta,
                       sb_tensor *gate, sb_tensor *lam, int cg_steps, real *state);

/* MesaNet's ridge: lam = softplus(p) + lower, elementwise (PyTorch's softplus threshold 20),
 * d p = d lam * sigmoid(p) (1 above the threshold). Same shape as p. */
sb_tensor *sb_mesa_lambda(sb_graph *g, sb_tensor *p, real lower);

#endif

/*
 * ops_ssm.h - the ops of the two state-space layers, Mamba (selective scan) and Mamba2
 * (chunked SSD with a gated RMSNorm), plus the column split both use on their projections.
 * Same conventions as ops.h: outputs go to the step's arena, the backward is recorded when
 * the graph records, and every backward accumulates (+=) into its inputs' gradients.
 *
 * Every recurrence comes twice: the fast form the layers use, and a plain step-by-step
 * `_ref` form in the same file with the same contract, which the tests hold the fast form
 * to (outputs, final states and gradients). Derivations: docs/models/mamba.md and
 * docs/models/mamba2.md.
 *
 * Dimension names: B batch, T frames, E inner width (2 * d_model), N state width,
 * M Mamba2 heads, P = E / M head width, Q chunk length.
 */
#ifndef SELECTIVBENCH_OPS_SSM_H
#define SELECTIVBENCH_OPS_SSM_H

#include "tensor/nn.h"

/* Largest d_state the scan kernels accept (their per-thread state lives on the stack). */
#define SB_SSM_MAX_STATE 512

/* ---- split.c ------------------------------------------------------------------------- */

/* Splits x[..., sum(widths)] along its last dimension into n_parts new tensors
 * parts[k][..., widths[k]] (copies, so each part is contiguous). The backward adds each
 * part's gradient back into its columns of dx. */
void sb_split_cols(sb_graph *g, sb_tensor *x, int n_parts, const int *widths, sb_tensor **parts);

/* ---- ssm_conv.c ------------------------------------------------------------------------ */

/* silu(causal depthwise convolution(x)) in one op: x [B, T, C], w with C * K values
 * (state-dict shape [C, 1, K]; w[c][K-1] multiplies the current frame), bias [C] or NULL
 * -> [B, T, C]. history: NULL, or [B][K-1][C] holding the K-1 inputs before x (zeros at
 * sequence start), updated to the last K-1 inputs (streaming; only when the graph does
 * not record). K <= 8. The same values as sb_silu(sb_conv1d_causal(...)). */
sb_tensor *sb_conv1d_silu(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b, real *history);

/* ---- selective_scan.c (Mamba) ------------------------------------------------------------
 * For each batch b and channel e, with h[-1] = state (zeros when state is NULL):
 *   dt[t]  = softplus(delta[b,t,e] + dt_bias[e])            threshold 20
 *   h[t,n] = exp(dt[t] A[e,n]) h[t-1,n] + dt[t] B[b,t,n] u[b,t,e],  A = -exp(A_log)
 *   y[b,t,e] = (sum_n C[b,t,n] h[t,n] + D[e] u[b,t,e]) * silu(z[b,t,e])
 * Shapes: u, delta, z [B, T, E]; dt_bias [E] or NULL (no bias); A_log [E, N];
 * Bm, Cm [B, T, N]; D [E] or NULL (no skip); z may be NULL (no gate). Returns y [B, T, E].
 * state: NULL, or [B][E][N] holding the state before the first frame, overwritten with
 * the state after the last one (streaming evaluation; only when the graph does not
 * record). The fast form keeps each state in cache and, in the backward, recomputes
 * states from checkpoints every few frames; it never stores B*T*E*N values. */
sb_tensor *sb_selective_scan(sb_graph *g, sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias,
                             sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D,
                             sb_tensor *z, real *state);
/* The same recurrence step by step; its backward keeps every state (tests only). */
sb_tensor *sb_selective_scan_ref(sb_graph *g, sb_tensor *u, sb_tensor *delta, sb_tensor *dt_bias,
                                 sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D,
                                 sb_tensor *z, real *state);

/* ---- ssd.c (Mamba2) -----------------------------------------------------------------------
 * Heads m = 0..M-1 own the channels [m P, (m+1) P) of x; B and C are shared by all heads
 * (one group). For each batch b and head m, with S[-1] = state (zeros when NULL):
 *   dt[t] = softplus(dt_in[b,t,m] + dt_bias[m]),  a[t] = exp(dt[t] A[m]),  A = -exp(A_log)
 *   S[t]  = a[t] S[t-1] + dt[t] x[b,t,m,:] B[b,t,:]^T                (P x N)
 *   y[b,t,m,:] = S[t] C[b,t,:] + D[m] x[b,t,m,:]
 * Shapes: x [B, T, E] with E = M P; dt_in [B, T, M]; dt_bias [M] or NULL; A_log [M];
 * Bm, Cm [B, T, N]; D [M] or NULL. Returns y [B, T, E]. state: NULL or [B][M][P][N], as for
 * the selective scan. The fast form is the chunked SSD with chunks of `chunk` frames (the
 * last may be shorter): intra-chunk products as GEMMs, decays exp(s_i - s_j) only for
 * j <= i, inter-chunk state passing; the backward recomputes the chunk's products from the
 * chunk-boundary states saved by the forward. */
sb_tensor *sb_ssd(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias, sb_tensor *A_log,
                  sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, int chunk, real *state);
/* The recurrent form, step by step; its backward keeps every state (the tests' oracle). */
sb_tensor *sb_ssd_ref(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                      sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *D, real *state);

/* ---- ssm_norm.c -----------------------------------------------------------------------------
 * Mamba2's RMSNormGated with norm_before_gate=False and one group over the whole width:
 *   g = y * silu(z),  r = (mean(g^2) + eps)^(-1/2),  o = g r w
 * y, z [..., E]; w [E]. Returns o with y's shape. */
sb_tensor *sb_rmsnorm_gate_first(sb_graph *g, sb_tensor *y, sb_tensor *z, sb_tensor *w, real eps);

#endif

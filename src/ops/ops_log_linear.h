/*
 * ops_log_linear.h - log-linear attention over Mamba2's SSD (Guo et al. 2025, "Log-Linear
 * Attention"; fla's LogLinearMamba2, fla/ops/log_linear_attn). Same conventions as ops.h:
 * outputs go to the step's arena, the backward is recorded when the graph records, and the
 * backward accumulates (+=) into its inputs' gradients. Derivations:
 * docs/models/log_linear_mamba2.md.
 *
 * Heads h = 0..H-1 own the channels [h P, (h+1) P) of x; B and C are shared by all heads (one
 * group). For each batch b and head h, frames t (absolute positions from the sequence start):
 *   dt[t]   = softplus(dt_in[b,t,h] + dt_bias[h]),   a[t] = dt[t] A[h],   A = -exp(A_log)
 *   lam[t,l] = softplus(L[h,l] dl[b,t,h,l])           l = 0..K-1, K = dl's levels
 *   level(t, s) = min(bit_length(t XOR s), K - 1)     (0 for s = t: the Fenwick levels)
 *   y[b,t,h,:] = sum_{s<=t} lam[t, level(t,s)] exp(a[s+1] + ... + a[t]) (C_t . B_s) dt[s]
 * x[b,s,h,:]
 *                + D[h] x[b,t,h,:]
 * Shapes: x [B, T, E] with E = H P; dt_in [B, T, H]; dt_bias [H]; A_log [H]; Bm, Cm [B, T, N];
 * dl [B, T, H K]; L [H, K]; D [H] or NULL. Returns y [B, T, E].
 *
 * Level l >= 1 of query t holds the 2^(l-1) frames before t's position with its lowest l-1
 * bits cleared, when bit l-1 of t is set (else it is empty); level 0 is t itself. Past K - 1
 * levels (T > 2^(K-1), 16384 for fla's 15 levels) the higher levels share the last weight.
 */
#ifndef SELECTIVBENCH_OPS_LOG_LINEAR_H
#define SELECTIVBENCH_OPS_LOG_LINEAR_H

#include "tensor/nn.h"

/* Most levels the kernels accept (fla's MAX_NUM_LEVELS is 15). */
#define SB_LOG_LINEAR_MAX_LEVELS 32

/* The whole-sequence form (training): per head the masked quadratic form above, queries in
 * blocks of `block` frames (the last may be shorter), so its workspace is block x T per
 * thread. The backward recomputes everything from the inputs. */
sb_tensor *sb_log_linear_ssd(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                             sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *dl,
                             sb_tensor *L, sb_tensor *D, int block);

/* The streaming form: the hierarchical recurrence frame by frame, carrying per (b, h) K - 1
 * level states of P x N each (level 0 is the current frame), so memory does not grow with T.
 * levels: [B][H][K-1][P][N], zeroed at sequence start; pos: [B], the number of frames seen
 * before x (0 at sequence start). Both are updated to the state after x. The graph must not
 * record (evaluation only). Also the tests' step-by-step oracle. */
sb_tensor *sb_log_linear_ssd_stream(sb_graph *g, sb_tensor *x, sb_tensor *dt_in, sb_tensor *dt_bias,
                                    sb_tensor *A_log, sb_tensor *Bm, sb_tensor *Cm, sb_tensor *dl,
                                    sb_tensor *L, sb_tensor *D, real *levels, real *pos);

#endif

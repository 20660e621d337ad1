/*
 * ops_hawk.h - the ops of Hawk's residual block (Griffin/Hawk, De et al. 2024; the layer is
 * src/layers/hawk.c, the derivations docs/models/hawk.md): the RG-LRU scan, the
 * block-diagonal gate projection and the GeLU-gated product of both of Hawk's branches.
 * Conventions as ops.h: every op writes a new output in the arena, records its backward when
 * an input needs a gradient, and its backward accumulates (+=) into the inputs' gradients.
 *
 * Glossary: B batch, T frames, C channels (the recurrence width D_rnn), H gate blocks
 * (heads), W = C / H channels per block.
 */
#ifndef SELECTIVBENCH_OPS_HAWK_H
#define SELECTIVBENCH_OPS_HAWK_H

#include "tensor/nn.h"

/* ---- rglru.c: the Real-Gated Linear Recurrent Unit -----------------------------------------
 *
 * Per batch b, frame t and channel c (gate pre-activations ga, gx from the block-diagonal
 * projections; lambda[c] the learnt logit of the base decay a0 = sigmoid(lambda)):
 *   r_t = sigmoid(ga_t),  i_t = sigmoid(gx_t)
 *   log a_t = -c_exp * softplus(-lambda) * r_t          (= c_exp * r_t * log a0)
 *   h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (i_t x_t)
 * and, as Griffin's reference code does at a sequence's first frame (a reset), h_0 = i_0 x_0:
 * neither the previous state nor a_0 enters, and the input is not scaled by sqrt(1 - a_0^2).
 * x, ga, gx [B, T, C]; lambda [C]; c_exp the paper's constant c (8). Returns h [B, T, C].
 * sqrt(1 - a^2) is formed as sqrt(-expm1(2 log a)), accurate for a near 1; the backward is
 * the exact derivative (no clipping of the square root's slope).
 *
 * reset: 1 when frame 0 of x is the first frame of its sequences (the rule above; whole
 * sequences, and the first chunk of a stream); 0 when x continues a sequence: frame 0 then
 * follows the recurrence from h_{-1} (read from state, or 0 when state is NULL).
 * state == NULL: the op records its backward when an input needs one (it saves nothing
 * beyond its inputs and output: h_{t-1} is the output's previous frame, the gates are
 * recomputed); with reset, frame 0 passes no gradient to ga_0 or lambda. state != NULL
 * ([B, C]): streaming evaluation; h_{-1} is read from state (unless reset) and h_{T-1}
 * written back; the graph must not record.
 *
 * The scan is step by step per channel (no chunked form), channels split between threads;
 * lambda's gradient is summed per sample, then over the samples in order (thread-count
 * independent). */
sb_tensor *sb_rglru(sb_graph *g, sb_tensor *x, sb_tensor *ga, sb_tensor *gx, sb_tensor *lambda,
                    real c_exp, real *state, int reset);

/* ---- block-diagonal projection (rglru.c) ----------------------------------------------------
 *
 * y[n, h W + j] = sum_i x[n, h W + i] w[h, i, j] + b[h, j]: x [..., H W], w [H, W, W] (input
 * index before output index), b [H, W] or NULL. Returns y with x's shape. */
sb_tensor *sb_block_diag_linear(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b);

/* ---- GeLU-gated product (rglru.c) -----------------------------------------------------------
 *
 * y = gelu_tanh(a) * v elementwise, with GeLU's tanh form (PyTorch's
 * F.gelu(approximate="tanh"), which Griffin's reference code uses):
 *   gelu_tanh(a) = a/2 (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))).
 * Hawk's recurrent block (GeLU branch times the RG-LRU branch) and its gated MLP. a, v of
 * equal size; y has a's shape. */
sb_tensor *sb_gelu_tanh_mul(sb_graph *g, sb_tensor *a, sb_tensor *v);

#endif

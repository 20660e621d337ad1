/*
 * ops.h - the coarse operations models are written with (forward here, backward on the
 * tape). Conventions:
 *   - shapes in comments: N tokens (= B*T), B batch, T frames, D width, H heads,
 *     Dh head width, C classes;
 *   - every op reads its inputs, writes a new output tensor in the arena and, when the
 *     graph records, saves what its backward needs; backward accumulates into inputs;
 *   - an op whose inputs need no gradient records nothing.
 * Each op family lives in one file of src/ops/ with its forward and backward side by
 * side; docs/models/ holds the derivations.
 */
#ifndef SELECTIVBENCH_OPS_H
#define SELECTIVBENCH_OPS_H

#include <stdint.h>

#include "tensor/nn.h"

/* ---- linear.c ---------------------------------------------------------------------- */

/* y[N, out] = x[N, in] W[out, in]^T + b[out]. b may be NULL. x may have any leading
 * shape; its last dimension is `in`, and y keeps the leading shape. */
sb_tensor *sb_linear(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b);

/* out[c] += sum over rows r of x[r][c] for an N x C matrix (deterministic: fixed order). */
void sb_colsum_add(const real *x, int N, int C, real *out);

/* ---- norm.c ------------------------------------------------------------------------- */

/* LayerNorm over the last dimension (D = gamma->size): biased variance, eps under the
 * root (PyTorch nn.LayerNorm). */
sb_tensor *sb_layernorm(sb_graph *g, sb_tensor *x, sb_tensor *gamma, sb_tensor *beta, real eps);

/* The reference transformer's RMSNorm over groups of d = w->size values:
 * y = x / (||x|| / sqrt(d) + eps) * w, eps added to the RMS (not under the root).
 * w is shared by every group (q_norm over heads). */
sb_tensor *sb_rmsnorm_rms_eps(sb_graph *g, sb_tensor *x, sb_tensor *w, real eps);

/* ---- elementwise.c ------------------------------------------------------------------- */

sb_tensor *sb_add(sb_graph *g, sb_tensor *a, sb_tensor *b);
/* a + b + c in one pass */
sb_tensor *sb_add3(sb_graph *g, sb_tensor *a, sb_tensor *b, sb_tensor *c);

/* Inverted dropout with keep probability 1 - p; the identity (x itself) when the graph
 * is not training or p == 0. Masks come from a counter-based hash of (graph seed, step,
 * call, element): independent of threads. */
sb_tensor *sb_dropout(sb_graph *g, sb_tensor *x, real p);

sb_tensor *sb_gelu(sb_graph *g, sb_tensor *x); /* exact erf form */
sb_tensor *sb_silu(sb_graph *g, sb_tensor *x);
sb_tensor *sb_sigmoid(sb_graph *g, sb_tensor *x);
sb_tensor *sb_softplus(sb_graph *g, sb_tensor *x); /* threshold 20 as PyTorch */
sb_tensor *sb_tanh_op(sb_graph *g, sb_tensor *x);

/* SwiGLU with trainable beta: h[N, 2F] = [a | v]; m = a * sigmoid(beta * a) * v, [N, F]. */
sb_tensor *sb_swiglu_beta(sb_graph *g, sb_tensor *h, sb_tensor *beta);

/* ---- rope.c ---------------------------------------------------------------------------- */

/* Rotary embedding on x[B, T, H, Dh] (rotate-half pairs (i, i + Dh/2), angle t * f_i,
 * the reference's sign: y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos).
 * inv_freq[Dh/2] holds f_i. */
sb_tensor *sb_rope(sb_graph *g, sb_tensor *x, const real *inv_freq);

/* ---- attention.c ------------------------------------------------------------------------ */

/* Causal softmax attention per batch and head, scale 1/sqrt(Dh): q, k, v [B, T, H, Dh]
 * -> o [B, T, H, Dh]. Works on blocks of queries, so no T x T matrix is ever stored:
 * training keeps the row log-sum-exp and recomputes probabilities in the backward. */
sb_tensor *sb_attention_causal(sb_graph *g, sb_tensor *q, sb_tensor *k, sb_tensor *v);

/* ---- conv.c ----------------------------------------------------------------------------- */

/* Causal depthwise convolution over time: x[B, T, C], w with C * K values (state-dict shape
 * [C, 1, K]; w[c][K-1] multiplies the current frame), bias[C] or NULL -> y[B, T, C].
 * K <= 8. */
sb_tensor *sb_conv1d_causal(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b);

/* Streaming form (evaluation, not recorded): history[B][K-1][C] holds the K-1 inputs
 * before x (zeros at sequence start) and is updated to the last K-1 inputs. */
sb_tensor *sb_conv1d_causal_stream(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b,
                                   real *history);

/* ---- gru.c ------------------------------------------------------------------------------ */

/* PyTorch nn.GRU, one layer, batch_first, h0 = 0: x[B, T, D] -> h[B, T, Hd]; gate order
 * r, z, n; weights w_ih[3Hd, D], w_hh[3Hd, Hd], biases [3Hd]. */
sb_tensor *sb_gru(sb_graph *g, sb_tensor *x, sb_tensor *w_ih, sb_tensor *w_hh, sb_tensor *b_ih,
                  sb_tensor *b_hh);

/* Streaming form (evaluation, not recorded): starts from h[B, Hd] and leaves the last
 * hidden state there. */
sb_tensor *sb_gru_stream(sb_graph *g, sb_tensor *x, sb_tensor *w_ih, sb_tensor *w_hh,
                         sb_tensor *b_ih, sb_tensor *b_hh, real *h);

/* ---- loss.c ----------------------------------------------------------------------------- */

/* Mean cross-entropy over the valid frames: logits[N, C], target[N], valid[N] (1/0).
 * Returns a [1] tensor. *probs (if not NULL) receives the softmax probabilities [N, C]
 * (valid until the backward, which reuses their memory for the logits' gradient).
 * loss_scale multiplies the gradient (gradient accumulation). */
sb_tensor *sb_cross_entropy(sb_graph *g, sb_tensor *logits, const int32_t *target,
                            const uint8_t *valid, real loss_scale, sb_tensor **probs);

/* Per-element accuracy (docs/training.md): for every element window (elem_start,
 * elem_len of B rows of E entries; len 0 = padding, skipped) sum the probabilities of
 * its frames, take the first argmax, compare with the window's target. probs[B*T, C]. */
void sb_window_accuracy(const real *probs, int T, int C, const int32_t *target,
                        const int32_t *elem_start, const int32_t *elem_len, int B, int E,
                        int64_t *correct, int64_t *counted);

/* ---- linear_loss.c ------------------------------------------------------------------------ */

/* What the fused decoder head and loss reads and adds to: targets and mask as
 * sb_cross_entropy; optionally the element windows of sb_window_accuracy (elem_start NULL:
 * no accuracy), whose counts are added to correct and counted. */
typedef struct sb_head_loss {
    const int32_t *target;                /* [N] */
    const uint8_t *valid;                 /* [N] 1/0 */
    real loss_scale;                      /* multiplies the gradient (gradient accumulation) */
    const int32_t *elem_start, *elem_len; /* [B, E], or NULL */
    int B, T, E;                          /* N = B * T when windows are given */
    int chunk_rows;                       /* rows per chunk; 0: the default (512) */
    /* the valid rows the mean (and its gradient) is over; 0: this call's own. A shard of a
     * batch (data-parallel training) passes the whole batch's, so that the shards'
     * gradients add up to the batch's */
    int64_t mean_over;
    int64_t correct, counted;
    double loss_sum; /* out: the loss summed over this call's valid rows */
} sb_head_loss;

/* sb_cross_entropy(sb_linear(x, w, b)) without the [N, C] logits: rows are taken a chunk at
 * a time and the gradients computed on the way (linear_loss.c). x[..., D], w[C, D], b[C] or
 * NULL. Returns the [1] mean loss over valid rows; the same values as the unfused ops up to
 * float rounding, and the same accuracy counts. */
sb_tensor *sb_linear_cross_entropy(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b,
                                   sb_head_loss *h);

#endif

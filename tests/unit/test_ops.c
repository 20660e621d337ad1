/*
 * test_ops.c - one table of op cases, every case run in every mode that applies to it
 * (the shape of ggml's tests/test-backend-ops.cpp).
 *
 * A row of op_table names the op (its C function), a builder that calls it on inputs, the
 * inputs' shapes and initial ranges, the finite-difference step, the tolerances and the
 * modes that apply. The modes:
 *   GRAD     central finite differences against the tape's backward (gradcheck.c, double
 *            build; relative step, loss = sum(y * r), junk pre-filled gradients);
 *   FLOAT    the float build agrees with the double build: the double build writes every
 *            FLOAT case's output and input gradients to a file (test_ops --write-float-ref,
 *            a CTest fixture), the float build recomputes and compares;
 *   REF      the op agrees with a second computation of the same function (its
 *            step-by-step `_ref` twin, or a plain loop here): outputs and gradients;
 *   STREAM   the op fed chunk by chunk (3, 1, then 4 frames at a time, a recurrent state or
 *            convolution history carried between calls) agrees with the whole-sequence op;
 *   THREADS  outputs and gradients are bitwise identical on 1 and 2 threads (both builds);
 *            rows labelled "parallel" use shapes above the ops' one-thread thresholds.
 * Every (case, mode) pair is its own cmocka test, so one failure does not hide others.
 *
 * test_op_table_covers_every_op reads the op headers (the glob SB_OP_HEADER_GLOB, one CMake
 * definition) and fails naming every declared function without a row, every `_ref` twin whose
 * op has no REF row and every `_stream` twin without a STREAM row: an op added without a case
 * fails the suite.
 *
 * usage: test_ops                          (double build: table checks, GRAD, REF, STREAM,
 *                                           THREADS)
 *        test_ops --write-float-ref FILE   (double build: the FLOAT reference)
 *        test_ops_float FILE               (float build: FLOAT against FILE, THREADS)
 */
#include <glob.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"
#include "ops/ops_dplr.h"
#include "ops/ops_fla.h"
#include "ops/ops_gla_family.h"
#include "ops/ops_hawk.h"
#include "ops/ops_layered.h"
#include "ops/ops_log_linear.h"
#include "ops/ops_path.h"
#include "ops/ops_s4.h"
#include "ops/ops_ssm.h"
#include "tensor/nn.h"
#ifdef SB_REAL_DOUBLE
#include "gradcheck.h"
#endif

#ifndef SB_OP_HEADER_GLOB
#error "SB_OP_HEADER_GLOB (the op headers, e.g. src/ops/ops*.h) is not defined"
#endif

enum {
    GRAD = 1 << 0,
    FLOAT = 1 << 1,
    REF = 1 << 2,
    STREAM = 1 << 3,
    THREADS = 1 << 4,
};

#define MAX_INPUTS 10 /* sb_log_linear_ssd takes 9 */
/* reals of recurrent state / convolution history a STREAM case may use (zeroed at start) */
#define STATE_MAX 4096

typedef struct op_input {
    const char *name;
    int ndim;
    int shape[SB_MAX_DIMS];
    double lo, hi; /* initial values: U(lo, hi), rounded to float so both builds see the same */
} op_input;

/* Calls the op on the inputs (in the row's order) and returns its output. */
typedef sb_tensor *(*op_build_fn)(sb_graph *g, sb_tensor **in);
/* Calls the streaming form on a chunk of frames; state persists between chunks. */
typedef sb_tensor *(*op_stream_fn)(sb_graph *g, sb_tensor **in, real *state);

typedef struct op_case {
    const char *op;      /* the function under test, as declared in the op headers */
    const char *variant; /* what sets this row apart from the op's other rows */
    op_build_fn build;
    op_input in[MAX_INPUTS];
    double fd_step;   /* GRAD: relative finite-difference step */
    double grad_rtol; /* GRAD: |numeric - analytic| <= 1e-8 + grad_rtol * max(|num|, |ana|) */
    double float_tol; /* FLOAT: max |float - double| over the largest |double|, per tensor */
    double twin_tol;  /* REF, STREAM: the same measure between the two computations */
    unsigned modes;
    op_build_fn ref;       /* REF: another computation of the same function */
    op_stream_fn stream;   /* STREAM: the op on one chunk of frames */
    unsigned frames;       /* STREAM: bit i set when input i is [B, T, ...] (sliced in time) */
    int training;          /* dropout active (fixed seed): the masks are part of the function */
    unsigned zero_grad_ok; /* GRAD: bit i: input i's gradient may be zero everywhere */
} op_case;

/* the tolerances of a row, in the order fd_step, grad_rtol, float_tol, twin_tol */
#define TOL(step, rtol, ftol, ttol)                                                                \
    .fd_step = step, .grad_rtol = rtol, .float_tol = ftol, .twin_tol = ttol

/* ---- builders: one small function per call form ----------------------------------------------
 * Scalars (eps, scales, chunk lengths) are fixed here; chunked ops use chunks that the
 * row's T crosses with a ragged tail (T = 2 * chunk + 3). */

enum { CHUNK = 4 }; /* chunk length of the chunked kernels in this table (T = 11 = 2*4 + 3) */

/* ops.h */
static sb_tensor *build_linear(sb_graph *g, sb_tensor **in)
{
    return sb_linear(g, in[0], in[1], in[2]);
}
static sb_tensor *build_linear_nobias(sb_graph *g, sb_tensor **in)
{
    return sb_linear(g, in[0], in[1], NULL);
}
/* sb_colsum_add is a plain helper on arrays (no tape): out = in[1] + column sums of in[0] */
static sb_tensor *build_colsum_add(sb_graph *g, sb_tensor **in)
{
    sb_tensor *out = sb_tensor_new(g, in[1]->ndim, in[1]->shape);
    memcpy(out->data, in[1]->data, out->size * sizeof(real));
    sb_colsum_add(in[0]->data, in[0]->shape[0], in[0]->shape[1], out->data);
    return out;
}
static sb_tensor *ref_colsum_add(sb_graph *g, sb_tensor **in)
{
    const int N = in[0]->shape[0], C = in[0]->shape[1];
    sb_tensor *out = sb_tensor_new(g, 1, &C);
    for (int c = 0; c < C; c++) {
        double sum = (double)in[1]->data[c];
        for (int r = 0; r < N; r++)
            sum += (double)in[0]->data[(size_t)r * (size_t)C + (size_t)c];
        out->data[c] = (real)sum;
    }
    return out;
}
static sb_tensor *build_layernorm(sb_graph *g, sb_tensor **in)
{
    return sb_layernorm(g, in[0], in[1], in[2], (real)1e-5);
}
static sb_tensor *build_rmsnorm_rms_eps(sb_graph *g, sb_tensor **in)
{
    return sb_rmsnorm_rms_eps(g, in[0], in[1], (real)1e-8);
}
static sb_tensor *build_add(sb_graph *g, sb_tensor **in)
{
    return sb_add(g, in[0], in[1]);
}
static sb_tensor *build_add3(sb_graph *g, sb_tensor **in)
{
    return sb_add3(g, in[0], in[1], in[2]);
}
static sb_tensor *build_dropout(sb_graph *g, sb_tensor **in)
{
    return sb_dropout(g, in[0], (real)0.3);
}
static sb_tensor *build_gelu(sb_graph *g, sb_tensor **in)
{
    return sb_gelu(g, in[0]);
}
static sb_tensor *build_silu(sb_graph *g, sb_tensor **in)
{
    return sb_silu(g, in[0]);
}
static sb_tensor *build_sigmoid(sb_graph *g, sb_tensor **in)
{
    return sb_sigmoid(g, in[0]);
}
static sb_tensor *build_softplus(sb_graph *g, sb_tensor **in)
{
    return sb_softplus(g, in[0]);
}
static sb_tensor *build_tanh_op(sb_graph *g, sb_tensor **in)
{
    return sb_tanh_op(g, in[0]);
}
static sb_tensor *build_swiglu_beta(sb_graph *g, sb_tensor **in)
{
    return sb_swiglu_beta(g, in[0], in[1]);
}
static const real rope_inv_freq[4] = {(real)1.0, (real)0.3, (real)0.1, (real)0.03};
static sb_tensor *build_rope(sb_graph *g, sb_tensor **in)
{
    return sb_rope(g, in[0], rope_inv_freq);
}
static sb_tensor *build_attention_causal(sb_graph *g, sb_tensor **in)
{
    return sb_attention_causal(g, in[0], in[1], in[2]);
}
static sb_tensor *build_conv1d_causal(sb_graph *g, sb_tensor **in)
{
    return sb_conv1d_causal(g, in[0], in[1], in[2]);
}
static sb_tensor *stream_conv1d_causal(sb_graph *g, sb_tensor **in, real *history)
{
    return sb_conv1d_causal_stream(g, in[0], in[1], in[2], history);
}
static sb_tensor *build_gru(sb_graph *g, sb_tensor **in)
{
    return sb_gru(g, in[0], in[1], in[2], in[3], in[4]);
}
static sb_tensor *stream_gru(sb_graph *g, sb_tensor **in, real *h)
{
    return sb_gru_stream(g, in[0], in[1], in[2], in[3], in[4], h);
}
/* 12 frames (logits [3, 4, 5]): targets and a validity mask with two frames left out */
static const int32_t ce_target[12] = {0, 3, 2, 1, 4, 4, 0, 2, 1, 3, 0, 1};
static const uint8_t ce_valid[12] = {1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1};
static sb_tensor *build_cross_entropy(sb_graph *g, sb_tensor **in)
{
    return sb_cross_entropy(g, in[0], ce_target, ce_valid, 1, NULL);
}
/* The probabilities sb_cross_entropy hands out: a metric output, not differentiated (the
 * backward reuses their memory), so computed without recording. */
static sb_tensor *build_cross_entropy_probs(sb_graph *g, sb_tensor **in)
{
    const int record = g->record;
    g->record = 0;
    sb_tensor *probs = NULL;
    sb_cross_entropy(g, in[0], ce_target, ce_valid, 1, &probs);
    g->record = record;
    return probs;
}
/* Two samples of T = 6 frames, C = 4 classes, E = 3 element windows each (the last window of
 * sample 1 is padding). The output is {correct, counted} as a [2] tensor. */
enum { WA_B = 2, WA_T = 6, WA_C = 4, WA_E = 3 };
static const int32_t wa_target[WA_B * WA_T] = {1, 1, 3, 3, 3, 0, 2, 2, 2, 2, 1, 1};
static const int32_t wa_start[WA_B * WA_E] = {0, 2, 5, 0, 4, 0};
static const int32_t wa_len[WA_B * WA_E] = {2, 3, 1, 4, 2, 0};
static sb_tensor *build_window_accuracy(sb_graph *g, sb_tensor **in)
{
    int64_t correct = 0, counted = 0;
    sb_window_accuracy(in[0]->data, WA_T, WA_C, wa_target, wa_start, wa_len, WA_B, WA_E, &correct,
                       &counted);
    const int two = 2;
    sb_tensor *out = sb_tensor_new(g, 1, &two);
    out->data[0] = (real)correct;
    out->data[1] = (real)counted;
    return out;
}
/* the windowed accuracy by its definition: sum each window's probabilities, first argmax */
/* linear_loss.c: the fused head on x [3, 4, 6] (12 frames, the cross-entropy's targets and
 * mask), W [5, 6], b [5], in chunks of 5 rows (12 = 5 + 5 + 2); the reference is the
 * unfused pair sb_linear + sb_cross_entropy. */
static sb_tensor *build_linear_ce(sb_graph *g, sb_tensor **in)
{
    sb_head_loss h = {.target = ce_target, .valid = ce_valid, .loss_scale = 1, .chunk_rows = 5};
    return sb_linear_cross_entropy(g, in[0], in[1], in[2], &h);
}
static sb_tensor *build_linear_ce_nobias(sb_graph *g, sb_tensor **in)
{
    sb_head_loss h = {.target = ce_target, .valid = ce_valid, .loss_scale = 1, .chunk_rows = 5};
    return sb_linear_cross_entropy(g, in[0], in[1], NULL, &h);
}
static sb_tensor *ref_linear_ce(sb_graph *g, sb_tensor **in)
{
    return sb_cross_entropy(g, sb_linear(g, in[0], in[1], in[2]), ce_target, ce_valid, 1, NULL);
}
static sb_tensor *ref_linear_ce_nobias(sb_graph *g, sb_tensor **in)
{
    return sb_cross_entropy(g, sb_linear(g, in[0], in[1], NULL), ce_target, ce_valid, 1, NULL);
}
/* The fused head's accuracy counts on the window-accuracy batch (x [12, 3], W [4, 3]) in
 * chunks of 3 rows, so that windows (frames 2-4 of sample 0, 0-3 of sample 1) continue
 * across chunks; the reference scores the unfused probabilities with sb_window_accuracy.
 * Output: {correct, counted, loss}. */
static sb_tensor *counts_and_loss(sb_graph *g, int64_t correct, int64_t counted, real loss)
{
    const int three = 3;
    sb_tensor *out = sb_tensor_new(g, 1, &three);
    out->data[0] = (real)correct;
    out->data[1] = (real)counted;
    out->data[2] = loss;
    return out;
}
static const uint8_t wa_valid[WA_B * WA_T] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static sb_tensor *build_linear_ce_accuracy(sb_graph *g, sb_tensor **in)
{
    sb_head_loss h = {.target = wa_target,
                      .valid = wa_valid,
                      .loss_scale = 1,
                      .elem_start = wa_start,
                      .elem_len = wa_len,
                      .B = WA_B,
                      .T = WA_T,
                      .E = WA_E,
                      .chunk_rows = 3};
    sb_tensor *loss = sb_linear_cross_entropy(g, in[0], in[1], in[2], &h);
    return counts_and_loss(g, h.correct, h.counted, loss->data[0]);
}
static sb_tensor *ref_linear_ce_accuracy(sb_graph *g, sb_tensor **in)
{
    sb_tensor *probs = NULL;
    sb_tensor *logits = sb_linear(g, in[0], in[1], in[2]);
    sb_tensor *loss = sb_cross_entropy(g, logits, wa_target, wa_valid, 1, &probs);
    int64_t correct = 0, counted = 0;
    sb_window_accuracy(probs->data, WA_T, WA_C, wa_target, wa_start, wa_len, WA_B, WA_E, &correct,
                       &counted);
    return counts_and_loss(g, correct, counted, loss->data[0]);
}
static sb_tensor *ref_window_accuracy(sb_graph *g, sb_tensor **in)
{
    int correct = 0, counted = 0;
    for (int b = 0; b < WA_B; b++)
        for (int e = 0; e < WA_E; e++) {
            const int start = wa_start[b * WA_E + e], len = wa_len[b * WA_E + e];
            if (len == 0)
                continue;
            double sums[WA_C] = {0};
            for (int f = start; f < start + len; f++)
                for (int c = 0; c < WA_C; c++)
                    sums[c] += (double)in[0]->data[(size_t)(b * WA_T + f) * WA_C + (size_t)c];
            int best = 0;
            for (int c = 1; c < WA_C; c++)
                if (sums[c] > sums[best])
                    best = c;
            correct += best == wa_target[b * WA_T + start];
            counted++;
        }
    const int two = 2;
    sb_tensor *out = sb_tensor_new(g, 1, &two);
    out->data[0] = (real)correct;
    out->data[1] = (real)counted;
    return out;
}

/* ops_fla.h: q, k, v, then gate inputs as the row lists them */
static sb_tensor *build_linear_attn_gated(sb_graph *g, sb_tensor **in)
{
    return sb_linear_attn(g, in[0], in[1], in[2], in[3], (real)0.6, CHUNK, NULL);
}
static sb_tensor *build_linear_attn_nogate(sb_graph *g, sb_tensor **in)
{
    return sb_linear_attn(g, in[0], in[1], in[2], NULL, (real)0.6, CHUNK, NULL);
}
static sb_tensor *stream_linear_attn_gated(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_linear_attn(g, in[0], in[1], in[2], in[3], (real)0.6, CHUNK, state);
}
static sb_tensor *stream_linear_attn_nogate(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_linear_attn(g, in[0], in[1], in[2], NULL, (real)0.6, CHUNK, state);
}
static sb_tensor *build_linear_attn_ref_gated(sb_graph *g, sb_tensor **in)
{
    return sb_linear_attn_ref(g, in[0], in[1], in[2], in[3], (real)0.6, NULL);
}
static sb_tensor *build_linear_attn_ref_nogate(sb_graph *g, sb_tensor **in)
{
    return sb_linear_attn_ref(g, in[0], in[1], in[2], NULL, (real)0.6, NULL);
}
static sb_tensor *stream_linear_attn_ref_gated(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_linear_attn_ref(g, in[0], in[1], in[2], in[3], (real)0.6, state);
}
/* delta rule: q, k, v, beta [, gate] */
static sb_tensor *build_delta_rule_gated(sb_graph *g, sb_tensor **in)
{
    return sb_delta_rule(g, in[0], in[1], in[2], in[3], in[4], (real)0.6, CHUNK, NULL);
}
static sb_tensor *build_delta_rule_nogate(sb_graph *g, sb_tensor **in)
{
    return sb_delta_rule(g, in[0], in[1], in[2], in[3], NULL, (real)0.6, CHUNK, NULL);
}
static sb_tensor *stream_delta_rule_gated(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_delta_rule(g, in[0], in[1], in[2], in[3], in[4], (real)0.6, CHUNK, state);
}
static sb_tensor *build_delta_rule_ref_gated(sb_graph *g, sb_tensor **in)
{
    return sb_delta_rule_ref(g, in[0], in[1], in[2], in[3], in[4], (real)0.6, NULL);
}
static sb_tensor *build_delta_rule_ref_nogate(sb_graph *g, sb_tensor **in)
{
    return sb_delta_rule_ref(g, in[0], in[1], in[2], in[3], NULL, (real)0.6, NULL);
}
static sb_tensor *stream_delta_rule_ref_gated(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_delta_rule_ref(g, in[0], in[1], in[2], in[3], in[4], (real)0.6, state);
}
static sb_tensor *build_short_conv(sb_graph *g, sb_tensor **in)
{
    return sb_short_conv(g, in[0], in[1]);
}
static sb_tensor *stream_short_conv(sb_graph *g, sb_tensor **in, real *history)
{
    return sb_short_conv_stream(g, in[0], in[1], history);
}
/* two projections x0, x1 through w0, w1; tanh on the second so that a swap of the two is seen */
static sb_tensor *short_convs_combined(sb_graph *g, sb_tensor **in, real *history)
{
    sb_tensor *xs[2] = {in[0], in[1]};
    sb_tensor *ws[2] = {in[2], in[3]};
    sb_short_convs(g, 2, xs, ws, history);
    return sb_add(g, xs[0], sb_tanh_op(g, xs[1]));
}
static sb_tensor *build_short_convs(sb_graph *g, sb_tensor **in)
{
    return short_convs_combined(g, in, NULL);
}
static sb_tensor *build_l2norm(sb_graph *g, sb_tensor **in)
{
    return sb_l2norm(g, in[0], 5, (real)1e-6);
}
static sb_tensor *build_rmsnorm_gated(sb_graph *g, sb_tensor **in)
{
    return sb_rmsnorm_gated(g, in[0], in[2], in[1], (real)1e-5);
}
static sb_tensor *build_rmsnorm_ungated(sb_graph *g, sb_tensor **in)
{
    return sb_rmsnorm_gated(g, in[0], NULL, in[1], (real)1e-5);
}
static sb_tensor *build_logsigmoid(sb_graph *g, sb_tensor **in)
{
    return sb_logsigmoid(g, in[0], (real)(1.0 / 16));
}
static sb_tensor *build_gla_gate(sb_graph *g, sb_tensor **in)
{
    return sb_gla_gate(g, in[0], in[1], in[2], in[3], 16);
}
static sb_tensor *build_decay_gate(sb_graph *g, sb_tensor **in)
{
    return sb_decay_gate(g, in[0], in[1], in[2]);
}
static sb_tensor *build_beta_gate_1(sb_graph *g, sb_tensor **in)
{
    return sb_beta_gate(g, in[0], 1);
}
static sb_tensor *build_beta_gate_2(sb_graph *g, sb_tensor **in)
{
    return sb_beta_gate(g, in[0], 2);
}

/* ops_ssm.h */
/* three equal parts of x, each through a different map so that misplaced columns are seen */
static sb_tensor *build_split_cols(sb_graph *g, sb_tensor **in)
{
    const int widths[3] = {4, 4, 4};
    sb_tensor *parts[3];
    sb_split_cols(g, in[0], 3, widths, parts);
    return sb_add3(g, parts[0], sb_silu(g, parts[1]), sb_tanh_op(g, parts[2]));
}
static sb_tensor *build_conv1d_silu(sb_graph *g, sb_tensor **in)
{
    return sb_conv1d_silu(g, in[0], in[1], in[2], NULL);
}
/* the header's promise: the same values as silu(causal conv) */
static sb_tensor *ref_conv1d_silu(sb_graph *g, sb_tensor **in)
{
    return sb_silu(g, sb_conv1d_causal(g, in[0], in[1], in[2]));
}
static sb_tensor *stream_conv1d_silu(sb_graph *g, sb_tensor **in, real *history)
{
    return sb_conv1d_silu(g, in[0], in[1], in[2], history);
}
/* log-linear SSD (ops_log_linear.h): x, dt, dt_bias, A_log, B, C, dl, L, D; query blocks of
 * CHUNK frames; the streamed form carries its level states, then the positions */
static sb_tensor *build_log_linear(sb_graph *g, sb_tensor **in)
{
    return sb_log_linear_ssd(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8],
                             CHUNK);
}
static sb_tensor *build_log_linear_bare(sb_graph *g, sb_tensor **in)
{
    return sb_log_linear_ssd(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL, 3);
}
/* the same function in one block of queries */
static sb_tensor *ref_log_linear_bare(sb_graph *g, sb_tensor **in)
{
    return sb_log_linear_ssd(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL,
                             1 << 20);
}
static sb_tensor *stream_log_linear(sb_graph *g, sb_tensor **in, real *state)
{
    const size_t B = (size_t)in[0]->shape[0], H = in[3]->size, P = (size_t)in[0]->shape[2] / H;
    const size_t K = in[7]->size / H, N = (size_t)in[4]->shape[2];
    real *pos = state + B * H * (K - 1) * P * N;
    return sb_log_linear_ssd_stream(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7],
                                    in[8], state, pos);
}
/* selective scan: u, delta, dt_bias, A_log, B, C, D, z */
static sb_tensor *build_selective_scan(sb_graph *g, sb_tensor **in)
{
    return sb_selective_scan(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL);
}
static sb_tensor *ref_selective_scan(sb_graph *g, sb_tensor **in)
{
    return sb_selective_scan_ref(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL);
}
static sb_tensor *stream_selective_scan(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_selective_scan(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], state);
}
static sb_tensor *stream_selective_scan_ref(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_selective_scan_ref(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], state);
}
/* without the optional dt_bias, D and z: u, delta, A_log, B, C */
static sb_tensor *build_selective_scan_bare(sb_graph *g, sb_tensor **in)
{
    return sb_selective_scan(g, in[0], in[1], NULL, in[2], in[3], in[4], NULL, NULL, NULL);
}
static sb_tensor *ref_selective_scan_bare(sb_graph *g, sb_tensor **in)
{
    return sb_selective_scan_ref(g, in[0], in[1], NULL, in[2], in[3], in[4], NULL, NULL, NULL);
}
/* SSD: x, dt, dt_bias, A_log, B, C, D */
static sb_tensor *build_ssd(sb_graph *g, sb_tensor **in)
{
    return sb_ssd(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], CHUNK, NULL);
}
static sb_tensor *ref_ssd(sb_graph *g, sb_tensor **in)
{
    return sb_ssd_ref(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], NULL);
}
static sb_tensor *stream_ssd(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_ssd(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], CHUNK, state);
}
static sb_tensor *stream_ssd_ref(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_ssd_ref(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], state);
}
/* without dt_bias and D: x, dt, A_log, B, C */
static sb_tensor *build_ssd_bare(sb_graph *g, sb_tensor **in)
{
    return sb_ssd(g, in[0], in[1], NULL, in[2], in[3], in[4], NULL, CHUNK, NULL);
}
static sb_tensor *ref_ssd_bare(sb_graph *g, sb_tensor **in)
{
    return sb_ssd_ref(g, in[0], in[1], NULL, in[2], in[3], in[4], NULL, NULL);
}
static sb_tensor *build_rmsnorm_gate_first(sb_graph *g, sb_tensor **in)
{
    return sb_rmsnorm_gate_first(g, in[0], in[1], in[2], (real)1e-5);
}

/* ops_s4.h: u [B, T, H]; log_dt, C, log_A_real, A_imag; D */
static sb_tensor *build_s4d_kernel(sb_graph *g, sb_tensor **in)
{
    return sb_s4d_kernel(g, in[0], in[1], in[2], in[3], 9);
}
static sb_tensor *build_s4d_conv(sb_graph *g, sb_tensor **in)
{
    return sb_s4d_conv(g, in[0], in[1], in[2]);
}
static sb_tensor *ref_s4d_conv(sb_graph *g, sb_tensor **in)
{
    return sb_s4d_conv_ref(g, in[0], in[1], in[2]);
}
static sb_tensor *build_s4d_recurrence(sb_graph *g, sb_tensor **in)
{
    return sb_s4d_recurrence(g, in[0], in[1], in[2], in[3], in[4], in[5], NULL);
}
/* the convolution form of the same map: the kernel, then the FFT convolution */
static sb_tensor *ref_s4d_kernel_conv(sb_graph *g, sb_tensor **in)
{
    sb_tensor *K = sb_s4d_kernel(g, in[1], in[2], in[3], in[4], in[0]->shape[1]);
    return sb_s4d_conv(g, in[0], K, in[5]);
}
static sb_tensor *stream_s4d_recurrence(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_s4d_recurrence(g, in[0], in[1], in[2], in[3], in[4], in[5], state);
}
static sb_tensor *build_dropout_tied(sb_graph *g, sb_tensor **in)
{
    return sb_dropout_tied(g, in[0], (real)0.4);
}
static sb_tensor *build_glu(sb_graph *g, sb_tensor **in)
{
    return sb_glu(g, in[0]);
}

/* ops_layered.h */
static sb_tensor *build_forgetting_attn(sb_graph *g, sb_tensor **in)
{
    return sb_forgetting_attn(g, in[0], in[1], in[2], in[3]);
}
static sb_tensor *build_forgetting_attn_ref(sb_graph *g, sb_tensor **in)
{
    return sb_forgetting_attn_ref(g, in[0], in[1], in[2], in[3]);
}
/* ops_path.h: q, k, v, w, beta */
static sb_tensor *build_path_attn(sb_graph *g, sb_tensor **in)
{
    return sb_path_attn(g, in[0], in[1], in[2], in[3], in[4], 4);
}
static sb_tensor *build_path_attn_ref(sb_graph *g, sb_tensor **in)
{
    return sb_path_attn_ref(g, in[0], in[1], in[2], in[3], in[4]);
}
static sb_tensor *build_gated_mlp(sb_graph *g, sb_tensor **in)
{
    return sb_gated_mlp(g, in[0], in[1], in[2], in[3]);
}

/* ops_gla_family.h */
static sb_tensor *build_hadamard_map(sb_graph *g, sb_tensor **in)
{
    return sb_hadamard_map(g, in[0], in[1], in[2], in[3], in[4]);
}
static sb_tensor *build_one_minus_exp(sb_graph *g, sb_tensor **in)
{
    return sb_one_minus_exp(g, in[0]);
}
/* ops_dplr.h: q, k, v, w, a, b; blocks of CHUNK tokens kept for the backward */
static sb_tensor *build_dplr_undecayed(sb_graph *g, sb_tensor **in)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_UNDECAYED, CHUNK,
                   NULL);
}
static sb_tensor *build_dplr_decayed(sb_graph *g, sb_tensor **in)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_DECAYED, CHUNK,
                   NULL);
}
/* REF: the same function with a state kept at every token */
static sb_tensor *ref_dplr_undecayed(sb_graph *g, sb_tensor **in)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_UNDECAYED, 1,
                   NULL);
}
static sb_tensor *ref_dplr_decayed(sb_graph *g, sb_tensor **in)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_DECAYED, 1,
                   NULL);
}
static sb_tensor *stream_dplr_undecayed(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_UNDECAYED, CHUNK,
                   state);
}
static sb_tensor *stream_dplr_decayed(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_dplr(g, in[0], in[1], in[2], in[3], in[4], in[5], (real)0.6, SB_DPLR_DECAYED, CHUNK,
                   state);
}
static sb_tensor *build_dplr_scale_heads(sb_graph *g, sb_tensor **in)
{
    return sb_dplr_scale_heads(g, in[0], in[1], (real)-0.8);
}
static sb_tensor *build_dplr_mul(sb_graph *g, sb_tensor **in)
{
    return sb_dplr_mul(g, in[0], in[1], (real)1.3);
}
static sb_tensor *build_kda_gate(sb_graph *g, sb_tensor **in)
{
    return sb_kda_gate(g, in[0], in[1], in[2]);
}
static sb_tensor *build_token_shift(sb_graph *g, sb_tensor **in)
{
    return sb_token_shift(g, in[0], NULL);
}
static sb_tensor *stream_token_shift(sb_graph *g, sb_tensor **in, real *state)
{
    return sb_token_shift(g, in[0], state);
}
static sb_tensor *build_dplr_rowmul(sb_graph *g, sb_tensor **in)
{
    return sb_dplr_rowmul(g, in[0], in[1]);
}
static sb_tensor *build_group_norm(sb_graph *g, sb_tensor **in)
{
    return sb_group_norm(g, in[0], 3, in[1], in[2], (real)0.05);
}
static sb_tensor *build_rwkv7_bonus(sb_graph *g, sb_tensor **in)
{
    return sb_rwkv7_bonus(g, in[0], in[1], in[2], in[3], 2);
}
/* ops_hawk.h: RG-LRU x, ga, gx, lambda (c = 8); frame 0 a reset (a sequence's first frame),
 * or not (a continuation from a zero state) */
static sb_tensor *build_rglru(sb_graph *g, sb_tensor **in)
{
    return sb_rglru(g, in[0], in[1], in[2], in[3], 8, NULL, 1);
}
static sb_tensor *build_rglru_no_reset(sb_graph *g, sb_tensor **in)
{
    return sb_rglru(g, in[0], in[1], in[2], in[3], 8, NULL, 0);
}
/* the state: h [B, C], then a flag (0 before the first chunk), as Hawk's layer keeps it */
static sb_tensor *stream_rglru(sb_graph *g, sb_tensor **in, real *state)
{
    real *started = state + (size_t)in[0]->shape[0] * (size_t)in[0]->shape[2];
    sb_tensor *y = sb_rglru(g, in[0], in[1], in[2], in[3], 8, state, *started == 0);
    *started = 1;
    return y;
}
static sb_tensor *build_block_diag_linear(sb_graph *g, sb_tensor **in)
{
    return sb_block_diag_linear(g, in[0], in[1], in[2]);
}
static sb_tensor *build_block_diag_linear_nobias(sb_graph *g, sb_tensor **in)
{
    return sb_block_diag_linear(g, in[0], in[1], NULL);
}
static sb_tensor *build_gelu_tanh_mul(sb_graph *g, sb_tensor **in)
{
    return sb_gelu_tanh_mul(g, in[0], in[1]);
}

/* ---- the table ---------------------------------------------------------------------------------
 * Default tolerances: relative FD step 1e-6 and rtol 1e-6 (double); float within 1e-5 of each
 * tensor's largest value (float's epsilon is 1.2e-7: a few dozen roundings); REF and STREAM
 * in double within 1e-12 (two orders of summation, nothing more). Rows that need more say so
 * in their own numbers. */

/* shared shapes: the recurrences run B = 2, T = 11 = 2 * CHUNK + 3, H = 2, K = 3, V = 4 */
#define QK_SHAPE                                                                                   \
    {                                                                                              \
        2, 11, 2, 3                                                                                \
    }
#define V_SHAPE                                                                                    \
    {                                                                                              \
        2, 11, 2, 4                                                                                \
    }
#define HEAD_SHAPE                                                                                 \
    {                                                                                              \
        2, 11, 2                                                                                   \
    }
/* selective scan: E = 3 channels, N = 4 states (the double build's backward segments are
 * 16 / N = 4 frames: T = 11 crosses two boundaries) */
#define SCAN_INPUTS                                                                                \
    {"u", 3, {2, 11, 3}, -1, 1}, {"delta", 3, {2, 11, 3}, -2, 1}, {"dt_bias", 1, {3}, -1, 0},      \
        {"A_log", 2, {3, 4}, -0.5, 1.5}, {"B", 3, {2, 11, 4}, -1, 1}, {"C", 3, {2, 11, 4}, -1, 1}, \
        {"D", 1, {3}, 0.5, 1.5},                                                                   \
    {                                                                                              \
        "z", 3, {2, 11, 3}, -2, 2                                                                  \
    }
/* SSD: M = 2 heads of P = 2 channels (E = 4), N = 3 */
#define SSD_INPUTS                                                                                 \
    {"x", 3, {2, 11, 4}, -1, 1}, {"dt", 3, {2, 11, 2}, -2, 1}, {"dt_bias", 1, {2}, -1, 0},         \
        {"A_log", 1, {2}, -1, 1}, {"B", 3, {2, 11, 3}, -1, 1}, {"C", 3, {2, 11, 3}, -1, 1},        \
    {                                                                                              \
        "D", 1, {2}, 0.5, 1.5                                                                      \
    }
/* log-linear SSD: B = 2, T = 11, H = 2 heads of P = 2, N = 3, K levels; x, dt, dt_bias, A_log,
 * B, C, dl, L, D */
#define LOG_LINEAR_INPUTS(K)                                                                       \
    {"x", 3, {2, 11, 4}, -1, 1}, {"dt", 3, {2, 11, 2}, -2, 0.5}, {"dt_bias", 1, {2}, -0.5, 0.5},   \
        {"A_log", 1, {2}, -1.5, 0}, {"B", 3, {2, 11, 3}, -1, 1}, {"C", 3, {2, 11, 3}, -1, 1},      \
        {"dl", 3, {2, 11, 2 * (K)}, -1.5, 1.5}, {"L", 2, {2, K}, -1.5, 1.5},                       \
    {                                                                                              \
        "D", 1, {2}, 0.5, 1.5                                                                      \
    }
/* S4D: H = 3 channels, N2 = 2 complex modes, T = 9 */
#define S4_PARAMS                                                                                  \
    {"log_dt", 1, {3}, -3, -1}, {"C", 3, {3, 2, 2}, -1, 1}, {"log_A_real", 2, {3, 2}, -1.5, 0.3},  \
    {                                                                                              \
        "A_imag", 2, {3, 2}, 0, 12                                                                 \
    }

static const op_case op_table[] = {
    /* ---- ops.h ---- */
    {.op = "sb_linear",
     .variant = "bias",
     .build = build_linear,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 5}, -1, 1}, {"w", 2, {4, 5}, -1, 1}, {"b", 1, {4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_linear",
     .variant = "no bias",
     .build = build_linear_nobias,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {6, 5}, -1, 1}, {"w", 2, {4, 5}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    /* a plain helper on arrays, not a tape op: no gradient; checked against a plain loop */
    {.op = "sb_colsum_add",
     .build = build_colsum_add,
     TOL(0, 0, 1e-6, 1e-15),
     .in = {{"x", 2, {37, 5}, -1, 1}, {"out", 1, {5}, -1, 1}},
     .ref = ref_colsum_add,
     .modes = FLOAT | REF | THREADS},
    {.op = "sb_layernorm",
     .build = build_layernorm,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 37}, -2, 2}, {"gamma", 1, {37}, 0.5, 1.5}, {"beta", 1, {37}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rmsnorm_rms_eps",
     .build = build_rmsnorm_rms_eps,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 4, {2, 3, 4, 6}, -2, 2}, {"w", 1, {6}, 0.5, 1.5}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_add",
     .build = build_add,
     TOL(1e-6, 1e-6, 1e-6, 0),
     .in = {{"a", 2, {3, 4}, -1, 1}, {"b", 2, {3, 4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_add3",
     .build = build_add3,
     TOL(1e-6, 1e-6, 1e-6, 0),
     .in = {{"a", 2, {3, 4}, -1, 1}, {"b", 2, {3, 4}, -1, 1}, {"c", 2, {3, 4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_dropout",
     .variant = "p 0.3, training",
     .build = build_dropout,
     TOL(1e-6, 1e-6, 1e-6, 0),
     .in = {{"x", 2, {8, 16}, -1, 1}},
     .training = 1,
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_gelu",
     .build = build_gelu,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -3, 3}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_silu",
     .build = build_silu,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -4, 4}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_sigmoid",
     .build = build_sigmoid,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -4, 4}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_softplus",
     .build = build_softplus,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -5, 5}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_softplus",
     .variant = "above the threshold 20",
     .build = build_softplus,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, 21, 30}},
     .modes = GRAD | FLOAT},
    {.op = "sb_tanh_op",
     .build = build_tanh_op,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -2, 2}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_swiglu_beta",
     .build = build_swiglu_beta,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"h", 3, {2, 3, 10}, -2, 2}, {"beta", 1, {1}, 0.5, 1.5}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rope",
     .build = build_rope,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 4, {2, 5, 3, 8}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_attention_causal",
     .variant = "T 7",
     .build = build_attention_causal,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"q", 4, {2, 7, 2, 4}, -1.5, 1.5},
            {"k", 4, {2, 7, 2, 4}, -1.5, 1.5},
            {"v", 4, {2, 7, 2, 4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    /* T = 131 crosses the 128-query block */
    {.op = "sb_attention_causal",
     .variant = "T 131",
     .build = build_attention_causal,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"q", 4, {1, 131, 2, 2}, -1.5, 1.5},
            {"k", 4, {1, 131, 2, 2}, -1.5, 1.5},
            {"v", 4, {1, 131, 2, 2}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    /* 19 channels cross the 16-channel blocks */
    {.op = "sb_conv1d_causal",
     .build = build_conv1d_causal,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 6, 19}, -1, 1},
            {"w", 3, {19, 1, 4}, -0.5, 0.5},
            {"b", 1, {19}, -0.5, 0.5}},
     .modes = GRAD | FLOAT | THREADS},
    /* evaluation only (never recorded): no gradient of its own */
    {.op = "sb_conv1d_causal_stream",
     .build = build_conv1d_causal,
     TOL(0, 0, 0, 1e-14),
     .in = {{"x", 3, {2, 11, 19}, -1, 1},
            {"w", 3, {19, 1, 4}, -0.5, 0.5},
            {"b", 1, {19}, -0.5, 0.5}},
     .stream = stream_conv1d_causal,
     .frames = 1u << 0,
     .modes = STREAM},
    /* B = 9 crosses the 8-row blocks */
    {.op = "sb_gru",
     .build = build_gru,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {9, 7, 3}, -1, 1},
            {"w_ih", 2, {12, 3}, -0.8, 0.8},
            {"w_hh", 2, {12, 4}, -0.8, 0.8},
            {"b_ih", 1, {12}, -0.5, 0.5},
            {"b_hh", 1, {12}, -0.5, 0.5}},
     .modes = GRAD | FLOAT | THREADS},
    /* evaluation only: no gradient of its own */
    {.op = "sb_gru_stream",
     .build = build_gru,
     TOL(0, 0, 0, 1e-14),
     .in = {{"x", 3, {9, 11, 3}, -1, 1},
            {"w_ih", 2, {12, 3}, -0.8, 0.8},
            {"w_hh", 2, {12, 4}, -0.8, 0.8},
            {"b_ih", 1, {12}, -0.5, 0.5},
            {"b_hh", 1, {12}, -0.5, 0.5}},
     .stream = stream_gru,
     .frames = 1u << 0,
     .modes = STREAM},
    {.op = "sb_cross_entropy",
     .variant = "loss",
     .build = build_cross_entropy,
     TOL(1e-6, 1e-6, 1e-6, 0),
     .in = {{"logits", 3, {3, 4, 5}, -2, 2}},
     .modes = GRAD | FLOAT | THREADS},
    /* the probabilities: a metric output, not differentiated */
    {.op = "sb_cross_entropy",
     .variant = "probabilities",
     .build = build_cross_entropy_probs,
     TOL(0, 0, 1e-6, 0),
     .in = {{"logits", 3, {3, 4, 5}, -2, 2}},
     .modes = FLOAT | THREADS},
    /* counts, not differentiable; float and double must count exactly the same */
    {.op = "sb_window_accuracy",
     .build = build_window_accuracy,
     TOL(0, 0, 0, 0),
     .in = {{"probs", 2, {WA_B * WA_T, WA_C}, 0, 1}},
     .ref = ref_window_accuracy,
     .modes = FLOAT | REF | THREADS},

    /* the fused head: chunks of 5 rows; against the unfused pair */
    {.op = "sb_linear_cross_entropy",
     .variant = "bias",
     .build = build_linear_ce,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"x", 3, {3, 4, 6}, -1, 1}, {"w", 2, {5, 6}, -1, 1}, {"b", 1, {5}, -0.5, 0.5}},
     .ref = ref_linear_ce,
     .modes = GRAD | FLOAT | REF | THREADS},
    {.op = "sb_linear_cross_entropy",
     .variant = "no bias",
     .build = build_linear_ce_nobias,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"x", 3, {3, 4, 6}, -1, 1}, {"w", 2, {5, 6}, -1, 1}},
     .ref = ref_linear_ce_nobias,
     .modes = GRAD | FLOAT | REF | THREADS},
    /* accuracy counts (exact) and the loss, windows across chunks of 3 rows; not recorded */
    {.op = "sb_linear_cross_entropy",
     .variant = "accuracy",
     .build = build_linear_ce_accuracy,
     TOL(0, 0, 1e-6, 1e-12),
     .in = {{"x", 2, {WA_B * WA_T, 3}, -2, 2},
            {"w", 2, {WA_C, 3}, -2, 2},
            {"b", 1, {WA_C}, -0.5, 0.5}},
     .ref = ref_linear_ce_accuracy,
     .modes = FLOAT | REF | THREADS},

    /* ---- ops_fla.h ---- */
    {.op = "sb_linear_attn",
     .variant = "key-channel gate",
     .build = build_linear_attn_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"g", 4, QK_SHAPE, -0.6, -0.01}},
     .ref = build_linear_attn_ref_gated,
     .stream = stream_linear_attn_gated,
     .frames = 0xf,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_linear_attn",
     .variant = "head gate",
     .build = build_linear_attn_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"g", 3, HEAD_SHAPE, -0.6, -0.01}},
     .ref = build_linear_attn_ref_gated,
     .stream = stream_linear_attn_gated,
     .frames = 0xf,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    /* log-decays far beyond the factorised range (chunk totals < -30): the term-by-term path */
    {.op = "sb_linear_attn",
     .variant = "strong key-channel gate",
     .build = build_linear_attn_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"g", 4, QK_SHAPE, -12, -6}},
     .ref = build_linear_attn_ref_gated,
     .modes = GRAD | REF},
    {.op = "sb_linear_attn",
     .variant = "no gate",
     .build = build_linear_attn_nogate,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1}, {"k", 4, QK_SHAPE, -1, 1}, {"v", 4, V_SHAPE, -1, 1}},
     .ref = build_linear_attn_ref_nogate,
     .stream = stream_linear_attn_nogate,
     .frames = 0x7,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_linear_attn_ref",
     .variant = "key-channel gate",
     .build = build_linear_attn_ref_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"g", 4, QK_SHAPE, -0.6, -0.01}},
     .stream = stream_linear_attn_ref_gated,
     .frames = 0xf,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    /* |k| < 0.55 keeps the delta rule's transitions contracting; beta in (0, 2) */
    {.op = "sb_delta_rule",
     .variant = "gated",
     .build = build_delta_rule_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -0.55, 0.55},
            {"v", 4, V_SHAPE, -1, 1},
            {"beta", 3, HEAD_SHAPE, 0.1, 1.9},
            {"g", 3, HEAD_SHAPE, -0.8, -0.01}},
     .ref = build_delta_rule_ref_gated,
     .stream = stream_delta_rule_gated,
     .frames = 0x1f,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_delta_rule",
     .variant = "ungated",
     .build = build_delta_rule_nogate,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -0.55, 0.55},
            {"v", 4, V_SHAPE, -1, 1},
            {"beta", 3, HEAD_SHAPE, 0.1, 1.9}},
     .ref = build_delta_rule_ref_nogate,
     .modes = GRAD | FLOAT | REF | THREADS},
    /* n = 2 Householder steps per token: k, v, beta carry 2 * H heads (step index outermost) */
    {.op = "sb_delta_rule",
     .variant = "gated product n 2",
     .build = build_delta_rule_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, {2, 11, 4, 3}, -0.55, 0.55},
            {"v", 4, {2, 11, 4, 4}, -1, 1},
            {"beta", 3, {2, 11, 4}, 0.1, 1.9},
            {"g", 3, HEAD_SHAPE, -0.8, -0.01}},
     .ref = build_delta_rule_ref_gated,
     .stream = stream_delta_rule_gated,
     .frames = 0x1f,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_delta_rule_ref",
     .variant = "gated product n 2",
     .build = build_delta_rule_ref_gated,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, {2, 11, 4, 3}, -0.55, 0.55},
            {"v", 4, {2, 11, 4, 4}, -1, 1},
            {"beta", 3, {2, 11, 4}, 0.1, 1.9},
            {"g", 3, HEAD_SHAPE, -0.8, -0.01}},
     .stream = stream_delta_rule_ref_gated,
     .frames = 0x1f,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_short_conv",
     .build = build_short_conv,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 7, 5}, -1, 1}, {"w", 3, {5, 1, 4}, -0.5, 0.5}},
     .modes = GRAD | FLOAT | THREADS},
    /* evaluation only: no gradient of its own */
    {.op = "sb_short_conv_stream",
     .build = build_short_conv,
     TOL(0, 0, 0, 1e-14),
     .in = {{"x", 3, {2, 11, 5}, -1, 1}, {"w", 3, {5, 1, 4}, -0.5, 0.5}},
     .stream = stream_short_conv,
     .frames = 1u << 0,
     .modes = STREAM},
    {.op = "sb_short_convs",
     .build = build_short_convs,
     TOL(1e-6, 1e-6, 1e-5, 1e-14),
     .in = {{"x0", 3, {2, 11, 5}, -1, 1},
            {"x1", 3, {2, 11, 5}, -1, 1},
            {"w0", 3, {5, 1, 4}, -0.5, 0.5},
            {"w1", 3, {5, 1, 3}, -0.5, 0.5}},
     .stream = short_convs_combined,
     .frames = 0x3,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_l2norm",
     .build = build_l2norm,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 10}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rmsnorm_gated",
     .variant = "gate",
     .build = build_rmsnorm_gated,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 8}, -2, 2}, {"w", 1, {4}, 0.5, 1.5}, {"gate", 3, {2, 3, 8}, -2, 2}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rmsnorm_gated",
     .variant = "no gate",
     .build = build_rmsnorm_ungated,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 8}, -2, 2}, {"w", 1, {4}, 0.5, 1.5}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_logsigmoid",
     .build = build_logsigmoid,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 7}, -6, 6}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_gla_gate",
     .build = build_gla_gate,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 6}, -1, 1},
            {"w0", 2, {2, 6}, -1, 1},
            {"w1", 2, {8, 2}, -1, 1},
            {"b1", 1, {8}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_decay_gate",
     .build = build_decay_gate,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"a", 3, {2, 3, 4}, -2, 2}, {"A_log", 1, {4}, -1, 1}, {"dt_bias", 1, {4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_beta_gate",
     .variant = "c 1",
     .build = build_beta_gate_1,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"z", 2, {5, 7}, -4, 4}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_beta_gate",
     .variant = "c 2",
     .build = build_beta_gate_2,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"z", 2, {5, 7}, -4, 4}},
     .modes = GRAD | FLOAT},

    /* ---- ops_ssm.h ---- */
    {.op = "sb_split_cols",
     .build = build_split_cols,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 12}, -2, 2}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_conv1d_silu",
     .build = build_conv1d_silu,
     TOL(1e-6, 1e-6, 1e-5, 1e-14),
     .in = {{"x", 3, {2, 11, 19}, -1, 1},
            {"w", 3, {19, 1, 4}, -0.5, 0.5},
            {"b", 1, {19}, -0.5, 0.5}},
     .ref = ref_conv1d_silu,
     .stream = stream_conv1d_silu,
     .frames = 1u << 0,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_selective_scan",
     .build = build_selective_scan,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {SCAN_INPUTS},
     .ref = ref_selective_scan,
     .stream = stream_selective_scan,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5 | 1u << 7,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_selective_scan",
     .variant = "no dt_bias, D, z",
     .build = build_selective_scan_bare,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"u", 3, {2, 11, 3}, -1, 1},
            {"delta", 3, {2, 11, 3}, -2, 1},
            {"A_log", 2, {3, 4}, -0.5, 1.5},
            {"B", 3, {2, 11, 4}, -1, 1},
            {"C", 3, {2, 11, 4}, -1, 1}},
     .ref = ref_selective_scan_bare,
     .modes = GRAD | REF},
    {.op = "sb_selective_scan_ref",
     .build = ref_selective_scan,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {SCAN_INPUTS},
     .stream = stream_selective_scan_ref,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5 | 1u << 7,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_ssd",
     .variant = "chunk 4",
     .build = build_ssd,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {SSD_INPUTS},
     .ref = ref_ssd,
     .stream = stream_ssd,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_ssd",
     .variant = "chunk 4, no dt_bias, D",
     .build = build_ssd_bare,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"x", 3, {2, 11, 4}, -1, 1},
            {"dt", 3, {2, 11, 2}, -2, 1},
            {"A_log", 1, {2}, -1, 1},
            {"B", 3, {2, 11, 3}, -1, 1},
            {"C", 3, {2, 11, 3}, -1, 1}},
     .ref = ref_ssd_bare,
     .modes = GRAD | REF},
    {.op = "sb_ssd_ref",
     .build = ref_ssd,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {SSD_INPUTS},
     .stream = stream_ssd_ref,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_log_linear_ssd",
     .variant = "blocks of 4, 15 levels",
     .build = build_log_linear,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {LOG_LINEAR_INPUTS(15)},
     .stream = stream_log_linear,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5 | 1u << 6,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_log_linear_ssd",
     .variant = "blocks of 3, 3 levels, no D",
     .build = build_log_linear_bare,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {LOG_LINEAR_INPUTS(3)},
     .ref = ref_log_linear_bare,
     .zero_grad_ok = 1u << 8,
     /* D unused */ .modes = GRAD | REF},
    {.op = "sb_log_linear_ssd",
     .variant = "parallel",
     .build = build_log_linear,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"x", 3, {4, 40, 32}, -1, 1},
            {"dt", 3, {4, 40, 4}, -2, 0.5},
            {"dt_bias", 1, {4}, -0.5, 0.5},
            {"A_log", 1, {4}, -1.5, 0},
            {"B", 3, {4, 40, 5}, -1, 1},
            {"C", 3, {4, 40, 5}, -1, 1},
            {"dl", 3, {4, 40, 60}, -1.5, 1.5},
            {"L", 2, {4, 15}, -1.5, 1.5},
            {"D", 1, {4}, 0.5, 1.5}},
     .modes = THREADS},
    {.op = "sb_log_linear_ssd_stream",
     .variant = "against the whole-sequence form",
     .build = build_log_linear,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {LOG_LINEAR_INPUTS(15)},
     .stream = stream_log_linear,
     .frames = 1u << 0 | 1u << 1 | 1u << 4 | 1u << 5 | 1u << 6,
     .modes = STREAM},
    {.op = "sb_rmsnorm_gate_first",
     .build = build_rmsnorm_gate_first,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"y", 3, {2, 3, 6}, -2, 2}, {"z", 3, {2, 3, 6}, -2, 2}, {"w", 1, {6}, 0.5, 1.5}},
     .modes = GRAD | FLOAT | THREADS},

    /* ---- ops_s4.h ---- */
    {.op = "sb_s4d_kernel",
     .variant = "T 9",
     .build = build_s4d_kernel,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {S4_PARAMS},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_s4d_conv",
     .build = build_s4d_conv,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"u", 3, {2, 9, 3}, -1, 1}, {"K", 2, {3, 9}, -1, 1}, {"D", 1, {3}, -1, 1}},
     .ref = ref_s4d_conv,
     .modes = GRAD | FLOAT | REF | THREADS},
    {.op = "sb_s4d_conv_ref",
     .build = ref_s4d_conv,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"u", 3, {2, 9, 3}, -1, 1}, {"K", 2, {3, 9}, -1, 1}, {"D", 1, {3}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_s4d_recurrence",
     .build = build_s4d_recurrence,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"u", 3, {2, 9, 3}, -1, 1}, S4_PARAMS, {"D", 1, {3}, -1, 1}},
     .ref = ref_s4d_kernel_conv,
     .stream = stream_s4d_recurrence,
     .frames = 1u << 0,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_dropout_tied",
     .variant = "p 0.4, training",
     .build = build_dropout_tied,
     TOL(1e-6, 1e-6, 1e-6, 0),
     .in = {{"x", 3, {2, 5, 6}, -1, 1}},
     .training = 1,
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_glu",
     .build = build_glu,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"p", 3, {2, 3, 8}, -3, 3}},
     .modes = GRAD | FLOAT | THREADS},

    /* ---- ops_layered.h ---- */
    {.op = "sb_forgetting_attn",
     .variant = "T 7",
     .build = build_forgetting_attn,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, {2, 7, 2, 4}, -1, 1},
            {"k", 4, {2, 7, 2, 4}, -1, 1},
            {"v", 4, {2, 7, 2, 4}, -1, 1},
            {"f", 3, {2, 7, 2}, -1.5, -0.01}},
     .ref = build_forgetting_attn_ref,
     .modes = GRAD | FLOAT | REF | THREADS},
    /* T = 131 crosses the 128-query block */
    {.op = "sb_forgetting_attn",
     .variant = "T 131",
     .build = build_forgetting_attn,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, {1, 131, 1, 2}, -1, 1},
            {"k", 4, {1, 131, 1, 2}, -1, 1},
            {"v", 4, {1, 131, 1, 2}, -1, 1},
            {"f", 3, {1, 131, 1}, -0.3, -0.01}},
     .ref = build_forgetting_attn_ref,
     .modes = GRAD | FLOAT | REF | THREADS},
    {.op = "sb_forgetting_attn_ref",
     .build = build_forgetting_attn_ref,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"q", 4, {2, 7, 2, 4}, -1, 1},
            {"k", 4, {2, 7, 2, 4}, -1, 1},
            {"v", 4, {2, 7, 2, 4}, -1, 1},
            {"f", 3, {2, 7, 2}, -1.5, -0.01}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_gated_mlp",
     .build = build_gated_mlp,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"z", 3, {2, 3, 4}, -1.5, 1.5},
            {"gate_proj", 2, {6, 4}, -1, 1},
            {"up_proj", 2, {6, 4}, -1, 1},
            {"down_proj", 2, {4, 6}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},

    /* ---- ops_gla_family.h ---- */
    {.op = "sb_hadamard_map",
     .build = build_hadamard_map,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 4, {2, 3, 2, 4}, -1.5, 1.5},
            {"w1", 2, {5, 4}, -1, 1},
            {"b1", 1, {5}, -1, 1},
            {"w2", 2, {5, 4}, -1, 1},
            {"b2", 1, {5}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_one_minus_exp",
     .build = build_one_minus_exp,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"g", 3, {2, 3, 5}, -6, -0.001}},
     .modes = GRAD | FLOAT | THREADS},
    /* ---- ops_path.h ---- (the explicit Householder products: tests/unit/test_path_attn.c) */
    {.op = "sb_path_attn",
     .variant = "block 4, T 9",
     .build = build_path_attn,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, {2, 9, 2, 3}, -1, 1},
            {"k", 4, {2, 9, 2, 3}, -1, 1},
            {"v", 4, {2, 9, 2, 3}, -1, 1},
            {"w", 4, {2, 9, 2, 3}, -0.6, 0.6},
            {"beta", 3, {2, 9, 2}, 0.05, 1.95}},
     .ref = build_path_attn_ref,
     .modes = GRAD | FLOAT | REF | THREADS},
    {.op = "sb_path_attn_ref",
     .build = build_path_attn_ref,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"q", 4, {2, 9, 2, 3}, -1, 1},
            {"k", 4, {2, 9, 2, 3}, -1, 1},
            {"v", 4, {2, 9, 2, 3}, -1, 1},
            {"w", 4, {2, 9, 2, 3}, -0.6, 0.6},
            {"beta", 3, {2, 9, 2}, 0.05, 1.95}},
     .modes = GRAD | FLOAT | THREADS},

    /* ---- above the one-thread thresholds ----
     * Most ops run on one thread below some size (PAR_MIN = 32768 elements and the like in
     * src/nn/ops/), which the small shapes above never reach: these rows make THREADS compare
     * a run that is really split. Too large for finite differences. */
    {.op = "sb_linear",
     .variant = "parallel",
     .build = build_linear,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 150, 64}, -1, 1}, {"w", 2, {256, 64}, -1, 1}, {"b", 1, {256}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_hadamard_map",
     .variant = "parallel",
     .build = build_hadamard_map,
     TOL(0, 0, 0, 0),
     .in = {{"x", 4, {2, 150, 4, 32}, -1, 1},
            {"w1", 2, {32, 32}, -1, 1},
            {"b1", 1, {32}, -1, 1},
            {"w2", 2, {32, 32}, -1, 1},
            {"b2", 1, {32}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_one_minus_exp",
     .variant = "parallel",
     .build = build_one_minus_exp,
     TOL(0, 0, 0, 0),
     .in = {{"g", 3, {2, 300, 64}, -6, -0.001}},
     .modes = THREADS},
    {.op = "sb_layernorm",
     .variant = "parallel",
     .build = build_layernorm,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 64}, -2, 2}, {"gamma", 1, {64}, 0.5, 1.5}, {"beta", 1, {64}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_rmsnorm_rms_eps",
     .variant = "parallel",
     .build = build_rmsnorm_rms_eps,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 64}, -2, 2}, {"w", 1, {16}, 0.5, 1.5}},
     .modes = THREADS},
    {.op = "sb_add",
     .variant = "parallel",
     .build = build_add,
     TOL(0, 0, 0, 0),
     .in = {{"a", 2, {200, 200}, -1, 1}, {"b", 2, {200, 200}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_silu",
     .variant = "parallel",
     .build = build_silu,
     TOL(0, 0, 0, 0),
     .in = {{"x", 2, {200, 200}, -4, 4}},
     .modes = THREADS},
    {.op = "sb_swiglu_beta",
     .variant = "parallel",
     .build = build_swiglu_beta,
     TOL(0, 0, 0, 0),
     .in = {{"h", 3, {2, 150, 256}, -2, 2}, {"beta", 1, {1}, 0.5, 1.5}},
     .modes = THREADS},
    {.op = "sb_rope",
     .variant = "parallel",
     .build = build_rope,
     TOL(0, 0, 0, 0),
     .in = {{"x", 4, {2, 300, 8, 8}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_conv1d_causal",
     .variant = "parallel",
     .build = build_conv1d_causal,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 64}, -1, 1},
            {"w", 3, {64, 1, 4}, -0.5, 0.5},
            {"b", 1, {64}, -0.5, 0.5}},
     .modes = THREADS},
    {.op = "sb_l2norm",
     .variant = "parallel",
     .build = build_l2norm,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 60}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_rmsnorm_gated",
     .variant = "parallel",
     .build = build_rmsnorm_gated,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 64}, -2, 2},
            {"w", 1, {16}, 0.5, 1.5},
            {"gate", 3, {2, 300, 64}, -2, 2}},
     .modes = THREADS},
    {.op = "sb_s4d_conv",
     .variant = "parallel",
     .build = build_s4d_conv,
     TOL(0, 0, 0, 0),
     .in = {{"u", 3, {2, 300, 8}, -1, 1}, {"K", 2, {8, 300}, -1, 1}, {"D", 1, {8}, -1, 1}},
     .modes = THREADS},
    {.op = "sb_gated_mlp",
     .variant = "parallel",
     .build = build_gated_mlp,
     TOL(0, 0, 0, 0),
     .in = {{"z", 3, {2, 300, 16}, -1.5, 1.5},
            {"gate_proj", 2, {64, 16}, -1, 1},
            {"up_proj", 2, {64, 16}, -1, 1},
            {"down_proj", 2, {16, 64}, -1, 1}},
     .modes = THREADS},
    /* ---- ops_dplr.h ---- */
    /* w the log-decay; |a|, |b| < 0.5 keep the transitions contracting */
    {.op = "sb_dplr",
     .variant = "undecayed (rwkv7)",
     .build = build_dplr_undecayed,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"w", 4, QK_SHAPE, -1, 0},
            {"a", 4, QK_SHAPE, -0.5, 0.5},
            {"b", 4, QK_SHAPE, -0.5, 0.5}},
     .ref = ref_dplr_undecayed,
     .stream = stream_dplr_undecayed,
     .frames = 0x3f,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_dplr",
     .variant = "decayed (kda)",
     .build = build_dplr_decayed,
     TOL(1e-6, 1e-6, 1e-5, 1e-12),
     .in = {{"q", 4, QK_SHAPE, -1, 1},
            {"k", 4, QK_SHAPE, -1, 1},
            {"v", 4, V_SHAPE, -1, 1},
            {"w", 4, QK_SHAPE, -1, 0},
            {"a", 4, QK_SHAPE, -0.5, 0.5},
            {"b", 4, QK_SHAPE, -0.5, 0.5}},
     .ref = ref_dplr_decayed,
     .stream = stream_dplr_decayed,
     .frames = 0x3f,
     .modes = GRAD | FLOAT | REF | STREAM | THREADS},
    {.op = "sb_dplr_scale_heads",
     .build = build_dplr_scale_heads,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 4, QK_SHAPE, -1, 1}, {"s", 3, HEAD_SHAPE, 0, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_dplr_mul",
     .build = build_dplr_mul,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 5}, -1, 1}, {"z", 3, {2, 3, 5}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_kda_gate",
     .build = build_kda_gate,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"f", 3, {2, 3, 6}, -3, 3}, {"A_log", 1, {2}, -1, 1}, {"dt_bias", 1, {6}, -2, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_token_shift",
     .build = build_token_shift,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 11, 5}, -1, 1}},
     .stream = stream_token_shift,
     .frames = 1u << 0,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_dplr_rowmul",
     .build = build_dplr_rowmul,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 5}, -1, 1}, {"w", 1, {5}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_group_norm",
     .build = build_group_norm,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 6}, -1, 1}, {"weight", 1, {6}, 0.5, 1.5}, {"bias", 1, {6}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rwkv7_bonus",
     .build = build_rwkv7_bonus,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"r", 3, {2, 3, 6}, -1, 1},
            {"k", 3, {2, 3, 6}, -1, 1},
            {"u", 1, {6}, -1, 1},
            {"v", 3, {2, 3, 8}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    /* ---- ops_hawk.h ---- */
    {.op = "sb_rglru",
     .build = build_rglru,
     TOL(1e-6, 1e-6, 1e-5, 1e-14),
     .in = {{"x", 3, {2, 11, 5}, -1.5, 1.5},
            {"ga", 3, {2, 11, 5}, -3, 3},
            {"gx", 3, {2, 11, 5}, -2, 2},
            {"lambda", 1, {5}, -1, 8}},
     .stream = stream_rglru,
     .frames = 0x7,
     .modes = GRAD | FLOAT | STREAM | THREADS},
    {.op = "sb_rglru",
     .variant = "no reset",
     .build = build_rglru_no_reset,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 11, 5}, -1.5, 1.5},
            {"ga", 3, {2, 11, 5}, -3, 3},
            {"gx", 3, {2, 11, 5}, -2, 2},
            {"lambda", 1, {5}, -1, 8}},
     .modes = GRAD | FLOAT},
    {.op = "sb_block_diag_linear",
     .variant = "bias",
     .build = build_block_diag_linear,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 3, {2, 3, 12}, -1, 1}, {"w", 3, {3, 4, 4}, -1, 1}, {"b", 2, {3, 4}, -1, 1}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_block_diag_linear",
     .variant = "no bias",
     .build = build_block_diag_linear_nobias,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"x", 2, {5, 6}, -1, 1}, {"w", 3, {2, 3, 3}, -1, 1}},
     .modes = GRAD | FLOAT},
    {.op = "sb_gelu_tanh_mul",
     .build = build_gelu_tanh_mul,
     TOL(1e-6, 1e-6, 1e-5, 0),
     .in = {{"a", 2, {5, 7}, -4, 4}, {"v", 2, {5, 7}, -2, 2}},
     .modes = GRAD | FLOAT | THREADS},
    {.op = "sb_rglru",
     .variant = "parallel",
     .build = build_rglru,
     TOL(0, 0, 0, 0),
     .in = {{"x", 3, {2, 300, 70}, -1.5, 1.5},
            {"ga", 3, {2, 300, 70}, -3, 3},
            {"gx", 3, {2, 300, 70}, -2, 2},
            {"lambda", 1, {70}, -1, 8}},
     .modes = THREADS},
    {.op = "sb_gelu_tanh_mul",
     .variant = "parallel",
     .build = build_gelu_tanh_mul,
     TOL(0, 0, 0, 0),
     .in = {{"a", 3, {2, 300, 64}, -4, 4}, {"v", 3, {2, 300, 64}, -2, 2}},
     .modes = THREADS},
};

enum { N_CASES = (int)(sizeof op_table / sizeof op_table[0]) };

/* ---- running a case -------------------------------------------------------------------------- */

static int case_n_inputs(const op_case *c)
{
    int n = 0;
    while (n < MAX_INPUTS && c->in[n].name != NULL)
        n++;
    return n;
}

/* "sb_op (variant)": the name failures and the float reference file use */
static void case_label(const op_case *c, char *buf, size_t size)
{
    if (c->variant != NULL)
        snprintf(buf, size, "%s (%s)", c->op, c->variant);
    else
        snprintf(buf, size, "%s", c->op);
}

/* The inputs of a case, owned here (outside any graph's arena). */
typedef struct case_inputs {
    sb_tensor tensor[MAX_INPUTS];
    sb_tensor *ptr[MAX_INPUTS];
    int n;
} case_inputs;

static void inputs_init(case_inputs *ci, const op_case *c)
{
    memset(ci, 0, sizeof *ci);
    ci->n = case_n_inputs(c);
    for (int i = 0; i < ci->n; i++) {
        const op_input *spec = &c->in[i];
        sb_tensor *t = &ci->tensor[i];
        t->ndim = spec->ndim;
        t->size = 1;
        for (int d = 0; d < spec->ndim; d++) {
            t->shape[d] = spec->shape[d];
            t->size *= (size_t)spec->shape[d];
        }
        t->data = malloc(t->size * sizeof(real));
        assert_non_null(t->data);
        /* an LCG per input; values rounded to float so that both builds start equal */
        uint32_t state = 2654435761u * (uint32_t)(i + 1) + 12345u;
        for (size_t k = 0; k < t->size; k++) {
            state = state * 1664525u + 1013904223u;
            const double u = (double)(state >> 8) / 16777216.0;
            t->data[k] = (real)(float)(spec->lo + (spec->hi - spec->lo) * u);
        }
        t->requires_grad = 1;
        ci->ptr[i] = t;
    }
}

static void inputs_free(case_inputs *ci)
{
    for (int i = 0; i < ci->n; i++)
        free(ci->tensor[i].data);
}

/* What one run of a case produced: the output, then each input's gradient (zeros for an
 * input the op left without one), as doubles. Section s is values[start[s], start[s + 1]). */
typedef struct case_result {
    double *values;
    size_t start[MAX_INPUTS + 2];
    int n_sections; /* 1 + number of inputs */
} case_result;

static void result_free(case_result *r)
{
    free(r->values);
    r->values = NULL;
}

static const char *section_name(const op_case *c, int s)
{
    return s == 0 ? "output" : c->in[s - 1].name;
}

static void graph_setup(sb_graph *g, const op_case *c)
{
    sb_graph_reset(g);
    g->record = 1;
    g->training = c->training;
    g->dropout_seed = 42;
    g->step = 0;
}

/* Forward with `build`, then the backward of a fixed output gradient dy = sin(0.7 i + 0.3). */
static case_result run_forward_backward(const op_case *c, op_build_fn build, case_inputs *ci)
{
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    graph_setup(&g, c);
    for (int i = 0; i < ci->n; i++)
        ci->ptr[i]->grad = NULL;
    sb_tensor *y = build(&g, ci->ptr);

    case_result r = {0};
    r.n_sections = 1 + ci->n;
    r.start[0] = 0;
    r.start[1] = y->size;
    for (int i = 0; i < ci->n; i++)
        r.start[i + 2] = r.start[i + 1] + ci->ptr[i]->size;
    r.values = malloc(r.start[r.n_sections] * sizeof *r.values);
    assert_non_null(r.values);
    /* the output is copied before the backward, which may reuse its memory */
    for (size_t k = 0; k < y->size; k++)
        r.values[k] = (double)y->data[k];

    real *dy = sb_tensor_grad(&g, y);
    for (size_t k = 0; k < y->size; k++)
        dy[k] = (real)sin(0.7 * (double)k + 0.3);
    sb_graph_backward(&g);
    for (int i = 0; i < ci->n; i++) {
        const sb_tensor *t = ci->ptr[i];
        double *out = r.values + r.start[i + 1];
        for (size_t k = 0; k < t->size; k++)
            out[k] = t->grad != NULL ? (double)t->grad[k] : 0.0;
        ci->ptr[i]->grad = NULL; /* it lived in the arena */
    }
    sb_graph_free(&g);
    return r;
}

/* max |got - want| over max |want| (the absolute difference when want is all zero); a NaN
 * anywhere gives infinity. */
static double rel_diff(const double *got, const double *want, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t k = 0; k < n; k++) {
        const double e = fabs(got[k] - want[k]);
        if (!(e <= diff))
            diff = isnan(e) ? (double)INFINITY : e;
        if (!(fabs(want[k]) <= scale))
            scale = isnan(want[k]) ? (double)INFINITY : fabs(want[k]);
    }
    if (isinf(diff) || isinf(scale))
        return (double)INFINITY;
    return scale > 0 ? diff / scale : diff;
}

/* Compares two results section by section; fails naming the worst section when any exceeds
 * tol. Returns the worst relative difference. */
static double compare_results(const op_case *c, const char *what, const case_result *got,
                              const case_result *want, double tol)
{
    char label[128];
    case_label(c, label, sizeof label);
    if (got->n_sections != want->n_sections)
        fail_msg("%s, %s: %d tensors, expected %d", label, what, got->n_sections, want->n_sections);
    double worst = 0;
    int worst_section = 0;
    for (int s = 0; s < got->n_sections; s++) {
        const size_t n = got->start[s + 1] - got->start[s];
        if (n != want->start[s + 1] - want->start[s])
            fail_msg("%s, %s: %s has %zu values, expected %zu", label, what, section_name(c, s), n,
                     want->start[s + 1] - want->start[s]);
        const double d = rel_diff(got->values + got->start[s], want->values + want->start[s], n);
        if (!(d <= worst)) {
            worst = d;
            worst_section = s;
        }
    }
    if (!(worst <= tol))
        fail_msg("%s, %s: %s differs by %.3g of its largest value (tolerance %.3g)", label, what,
                 section_name(c, worst_section), worst, tol);
    return worst;
}

/* ---- THREADS -------------------------------------------------------------------------------- */

static void test_threads(void **state)
{
    const op_case *c = *state;
    case_inputs ci;
    inputs_init(&ci, c);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    case_result one = run_forward_backward(c, c->build, &ci);
    omp_set_num_threads(2);
    case_result two = run_forward_backward(c, c->build, &ci);
    omp_set_num_threads(saved);
    char label[128];
    case_label(c, label, sizeof label);
    for (int s = 0; s < one.n_sections; s++) {
        const size_t n = one.start[s + 1] - one.start[s];
        if (memcmp(one.values + one.start[s], two.values + two.start[s], n * sizeof(double)) != 0)
            fail_msg("%s: %s differs between 1 and 2 threads", label, section_name(c, s));
    }
    result_free(&one);
    result_free(&two);
    inputs_free(&ci);
}

#ifdef SB_REAL_DOUBLE

/* ---- GRAD ----------------------------------------------------------------------------------- */

static sb_tensor *gradcheck_fn(sb_graph *g, sb_tensor **in, void *ctx)
{
    const op_case *c = ctx;
    return c->build(g, in);
}

static void test_grad(void **state)
{
    const op_case *c = *state;
    char label[128];
    case_label(c, label, sizeof label);
    gc_problem p = {.name = label,
                    .fn = gradcheck_fn,
                    .ctx = (void *)c,
                    .step = c->fd_step,
                    .rtol = c->grad_rtol,
                    .training = c->training,
                    .allow_zero_grad = (int)c->zero_grad_ok};
    case_inputs ci;
    inputs_init(&ci, c);
    for (int i = 0; i < ci.n; i++) {
        const op_input *spec = &c->in[i];
        sb_tensor *t = gc_add_input(&p, spec->name, spec->ndim, spec->shape, 0, 0, 1);
        memcpy(t->data, ci.tensor[i].data, t->size * sizeof(real));
    }
    gc_check(&p);
    gc_free(&p);
    inputs_free(&ci);
}

/* ---- REF ------------------------------------------------------------------------------------ */

static void test_ref(void **state)
{
    const op_case *c = *state;
    case_inputs ci;
    inputs_init(&ci, c);
    case_result fast = run_forward_backward(c, c->build, &ci);
    case_result ref = run_forward_backward(c, c->ref, &ci);
    compare_results(c, "against its reference", &fast, &ref, c->twin_tol);
    result_free(&fast);
    result_free(&ref);
    inputs_free(&ci);
}

/* ---- STREAM --------------------------------------------------------------------------------- */

/* Frames [t0, t0 + len) of x [B, T, ...] as a new tensor of g. */
static sb_tensor *frames_slice(sb_graph *g, const sb_tensor *x, int t0, int len)
{
    int shape[SB_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[1] = len;
    sb_tensor *s = sb_tensor_new(g, x->ndim, shape);
    const size_t frame = x->size / ((size_t)x->shape[0] * (size_t)x->shape[1]);
    for (int b = 0; b < x->shape[0]; b++)
        memcpy(s->data + (size_t)b * (size_t)len * frame,
               x->data + ((size_t)b * (size_t)x->shape[1] + (size_t)t0) * frame,
               (size_t)len * frame * sizeof(real));
    return s;
}

static void test_stream(void **state)
{
    const op_case *c = *state;
    char label[128];
    case_label(c, label, sizeof label);
    case_inputs ci;
    inputs_init(&ci, c);
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    graph_setup(&g, c);
    g.record = 0; /* streaming is evaluation */
    const sb_tensor *whole = c->build(&g, ci.ptr);
    const int B = whole->shape[0], T = whole->shape[1];
    const size_t frame = whole->size / ((size_t)B * (size_t)T);

    real *carried = calloc(STATE_MAX, sizeof(real));
    assert_non_null(carried);
    double worst = 0, scale = 0;
    /* chunks of 3, 1, then 4 frames: a one-frame chunk, and chunks that straddle the
     * op's own chunk boundaries */
    int t0 = 0;
    for (int k = 0; t0 < T; k++) {
        const int want_len = k == 0 ? 3 : k == 1 ? 1 : 4;
        const int len = want_len < T - t0 ? want_len : T - t0;
        sb_tensor *chunk_in[MAX_INPUTS];
        for (int i = 0; i < ci.n; i++)
            chunk_in[i] = (c->frames >> i) & 1u ? frames_slice(&g, ci.ptr[i], t0, len) : ci.ptr[i];
        const sb_tensor *part = c->stream(&g, chunk_in, carried);
        if (part->size != (size_t)B * (size_t)len * frame)
            fail_msg("%s, streamed: a chunk of %d frames gave %zu values", label, len, part->size);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < len; t++)
                for (size_t e = 0; e < frame; e++) {
                    const double got =
                        (double)part->data[((size_t)b * (size_t)len + (size_t)t) * frame + e];
                    const double want =
                        (double)whole->data[((size_t)b * (size_t)T + (size_t)(t0 + t)) * frame + e];
                    const double d = fabs(got - want);
                    if (!(d <= worst))
                        worst = isnan(d) ? (double)INFINITY : d;
                    scale = fmax(scale, fabs(want));
                }
        t0 += len;
    }
    const double rel = scale > 0 ? worst / scale : worst;
    if (!(rel <= c->twin_tol))
        fail_msg("%s, streamed in chunks: differs from the whole sequence by %.3g of its largest "
                 "value (tolerance %.3g)",
                 label, rel, c->twin_tol);
    free(carried);
    sb_graph_free(&g);
    inputs_free(&ci);
}

/* ---- FLOAT, the double side: write every FLOAT case's result ------------------------------------
 * File: per case, the label (length-prefixed), the number of sections and their ends, the
 * values (doubles). */

static int write_float_reference(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    for (int k = 0; k < N_CASES; k++) {
        const op_case *c = &op_table[k];
        if (!(c->modes & FLOAT))
            continue;
        char label[128];
        case_label(c, label, sizeof label);
        case_inputs ci;
        inputs_init(&ci, c);
        case_result r = run_forward_backward(c, c->build, &ci);
        const uint32_t len = (uint32_t)strlen(label), n_sections = (uint32_t)r.n_sections;
        fwrite(&len, sizeof len, 1, f);
        fwrite(label, 1, len, f);
        fwrite(&n_sections, sizeof n_sections, 1, f);
        fwrite(r.start, sizeof r.start[0], (size_t)n_sections + 1, f);
        fwrite(r.values, sizeof *r.values, r.start[n_sections], f);
        result_free(&r);
        inputs_free(&ci);
    }
    const int write_failed = ferror(f);
    if (fclose(f) != 0 || write_failed) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

#else /* float build */

/* ---- FLOAT, the float side: compare with the double build's file --------------------------- */

typedef struct float_reference {
    char label[128];
    case_result result;
} float_reference;

static float_reference *float_refs;
static int n_float_refs;

static int read_float_reference(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "no reference file %s (test_ops --write-float-ref writes it)\n", path);
        return 1;
    }
    float_refs = calloc(N_CASES, sizeof *float_refs);
    if (float_refs == NULL) {
        fclose(f);
        return 1;
    }
    uint32_t len;
    while (n_float_refs < N_CASES && fread(&len, sizeof len, 1, f) == 1) {
        float_reference *fr = &float_refs[n_float_refs];
        uint32_t n_sections;
        if (len >= sizeof fr->label || fread(fr->label, 1, len, f) != len ||
            fread(&n_sections, sizeof n_sections, 1, f) != 1 || n_sections > MAX_INPUTS + 1 ||
            fread(fr->result.start, sizeof fr->result.start[0], (size_t)n_sections + 1, f) !=
                (size_t)n_sections + 1) {
            fprintf(stderr, "%s: truncated or malformed\n", path);
            fclose(f);
            return 1;
        }
        fr->result.n_sections = (int)n_sections;
        const size_t n = fr->result.start[n_sections];
        fr->result.values = malloc(n * sizeof(double));
        if (fr->result.values == NULL || fread(fr->result.values, sizeof(double), n, f) != n) {
            fprintf(stderr, "%s: truncated\n", path);
            fclose(f);
            return 1;
        }
        n_float_refs++;
    }
    fclose(f);
    return 0;
}

static void test_float(void **state)
{
    const op_case *c = *state;
    char label[128];
    case_label(c, label, sizeof label);
    const float_reference *want = NULL;
    for (int k = 0; k < n_float_refs; k++)
        if (strcmp(float_refs[k].label, label) == 0)
            want = &float_refs[k];
    if (want == NULL)
        fail_msg("%s: not in the double build's reference file", label);
    case_inputs ci;
    inputs_init(&ci, c);
    case_result got = run_forward_backward(c, c->build, &ci);
    const double worst =
        compare_results(c, "float against double", &got, &want->result, c->float_tol);
    print_message("%-50s float vs double %.2e (tolerance %.0e)\n", label, worst, c->float_tol);
    result_free(&got);
    inputs_free(&ci);
}

#endif

/* ---- coverage: every op in the headers has a row -------------------------------------------- */

#define MAX_DECLARED 256

typedef struct declared_fn {
    char name[64];
    char header[64]; /* file name only */
} declared_fn;

/* Appends every function the header declares: an identifier sb_* followed by '(' at file scope
 * (outside parentheses and braces), after comments and preprocessor lines are removed. */
static int scan_header(const char *path, declared_fn *out, int n, int cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);

    /* blank out comments and preprocessor lines (keeping the newlines) */
    int line_start = 1;
    for (char *p = text; *p != '\0'; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end != NULL ? end + 2 : p + strlen(p);
            for (; p < stop; p++)
                if (*p != '\n')
                    *p = ' ';
            p--;
        } else if ((p[0] == '/' && p[1] == '/') || (line_start && p[0] == '#')) {
            for (; *p != '\0' && *p != '\n'; p++)
                *p = ' ';
            if (*p == '\0')
                break;
        }
        if (*p == '\n')
            line_start = 1;
        else if (*p != ' ' && *p != '\t')
            line_start = 0;
    }

    const char *file = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
    int depth = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '(' || *p == '{')
            depth++;
        else if (*p == ')' || *p == '}')
            depth--;
        const int word_start =
            p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                           (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9'));
        if (depth != 0 || !word_start || strncmp(p, "sb_", 3) != 0)
            continue;
        const char *end = p;
        while (*end == '_' || (*end >= 'a' && *end <= 'z') || (*end >= 'A' && *end <= 'Z') ||
               (*end >= '0' && *end <= '9'))
            end++;
        const char *next = end;
        while (*next == ' ' || *next == '\t' || *next == '\n')
            next++;
        if (*next == '(' && (size_t)(end - p) < sizeof out[0].name) {
            if (n >= cap)
                fail_msg("more than %d functions in the op headers", cap);
            snprintf(out[n].name, sizeof out[n].name, "%.*s", (int)(end - p), p);
            snprintf(out[n].header, sizeof out[n].header, "%s", file);
            n++;
        }
        p = end - 1;
    }
    free(text);
    return n;
}

static int table_has(const char *op, unsigned mode)
{
    for (int k = 0; k < N_CASES; k++)
        if (strcmp(op_table[k].op, op) == 0 && (op_table[k].modes & mode) == mode)
            return 1;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void test_op_table_covers_every_op(void **state)
{
    (void)state;
    glob_t headers;
    if (glob(SB_OP_HEADER_GLOB, 0, NULL, &headers) != 0 || headers.gl_pathc == 0)
        fail_msg("no op headers match %s (update SB_OP_HEADER_GLOB in tests/CMakeLists.txt)",
                 SB_OP_HEADER_GLOB);
    static declared_fn declared[MAX_DECLARED];
    int n = 0;
    for (size_t h = 0; h < headers.gl_pathc; h++)
        n = scan_header(headers.gl_pathv[h], declared, n, MAX_DECLARED);
    globfree(&headers);

    int problems = 0;
    for (int i = 0; i < n; i++) {
        const char *op = declared[i].name;
        if (!table_has(op, 0)) {
            print_error("%s (%s) has no row in the op table of tests/unit/test_ops.c\n", op,
                        declared[i].header);
            problems++;
        }
        /* a step-by-step twin must be compared with its fast op; a streaming twin with the
         * whole-sequence op */
        char base[64];
        if (ends_with(op, "_ref")) {
            snprintf(base, sizeof base, "%.*s", (int)(strlen(op) - 4), op);
            if (!table_has(base, REF)) {
                print_error("%s has a _ref twin but no row of %s runs the REF mode\n", base, base);
                problems++;
            }
        }
        if (ends_with(op, "_stream") && !table_has(op, STREAM)) {
            print_error("%s: no row runs the STREAM mode\n", op);
            problems++;
        }
    }
    /* and the other way: every row tests a declared function, with a mode that can run */
    for (int k = 0; k < N_CASES; k++) {
        const op_case *c = &op_table[k];
        char label[128];
        case_label(c, label, sizeof label);
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= strcmp(declared[i].name, c->op) == 0;
        if (!found) {
            print_error("row %s: %s is not declared in the op headers\n", label, c->op);
            problems++;
        }
        if (c->modes == 0 || ((c->modes & REF) && c->ref == NULL) ||
            ((c->modes & STREAM) && c->stream == NULL)) {
            print_error("row %s: no mode, or a REF/STREAM mode without its function\n", label);
            problems++;
        }
        for (int j = 0; j < k; j++) {
            char other[128];
            case_label(&op_table[j], other, sizeof other);
            if (strcmp(label, other) == 0) {
                print_error("two rows are labelled %s\n", label);
                problems++;
            }
        }
    }
    print_message("%d functions declared in the op headers, %d rows\n", n, N_CASES);
    if (n == 0 || problems > 0)
        fail_msg("%d problems with the op table (above)", problems);
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
#ifdef SB_REAL_DOUBLE
    if (argc == 3 && strcmp(argv[1], "--write-float-ref") == 0)
        return write_float_reference(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_ops [--write-float-ref FILE]\n");
        return 2;
    }
    static const struct {
        unsigned mode;
        const char *name;
        CMUnitTestFunction fn;
    } modes[] = {{GRAD, "grad", test_grad},
                 {REF, "ref", test_ref},
                 {STREAM, "stream", test_stream},
                 {THREADS, "threads", test_threads}};
#else
    if (argc != 2) {
        fprintf(stderr, "usage: test_ops_float FILE (written by test_ops --write-float-ref)\n");
        return 2;
    }
    if (read_float_reference(argv[1]) != 0)
        return 1;
    static const struct {
        unsigned mode;
        const char *name;
        CMUnitTestFunction fn;
    } modes[] = {{FLOAT, "float", test_float}, {THREADS, "threads", test_threads}};
#endif
    const int n_modes = (int)(sizeof modes / sizeof modes[0]);
    struct CMUnitTest *tests = calloc((size_t)N_CASES * (size_t)n_modes + 1, sizeof *tests);
    char(*names)[160] = calloc((size_t)N_CASES * (size_t)n_modes + 1, sizeof *names);
    if (tests == NULL || names == NULL)
        return 1;
    size_t n_tests = 0;
    tests[n_tests++] = (struct CMUnitTest){.name = "op table covers every op",
                                           .test_func = test_op_table_covers_every_op};
    for (int m = 0; m < n_modes; m++)
        for (int k = 0; k < N_CASES; k++) {
            const op_case *c = &op_table[k];
            if (!(c->modes & modes[m].mode))
                continue;
            char label[128];
            case_label(c, label, sizeof label);
            snprintf(names[n_tests], sizeof names[0], "%s: %s", modes[m].name, label);
            tests[n_tests] = (struct CMUnitTest){
                .name = names[n_tests], .test_func = modes[m].fn, .initial_state = (void *)c};
            n_tests++;
        }
    const int failed = _cmocka_run_group_tests("test_ops", tests, n_tests, NULL, NULL);
    free(tests);
    free(names);
#ifndef SB_REAL_DOUBLE
    for (int k = 0; k < n_float_refs; k++)
        result_free(&float_refs[k].result);
    free(float_refs);
#endif
    return failed == 0 ? 0 : 1;
}

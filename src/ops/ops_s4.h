/*
 * ops_s4.h - the ops of the S4D layer (the reference's S4D and S4DKernel in
 * models/ssm_models.py; docs/models/s4.md). Same conventions as ops.h: outputs
 * go to the step's arena, the backward is recorded when the graph records, and every
 * backward accumulates (+=) into its inputs' gradients.
 *
 * The layer works on x[B, T, H] (frames major, channels contiguous). Each channel h owns
 * N2 = d_state / 2 complex modes n with
 *   dt = exp(log_dt[h]),  A = -exp(log_A_real[h, n]) + i A_imag[h, n],  zeta = dt A,
 *   w = e^zeta (the transition),  q = (e^zeta - 1) / A (zero-order hold, B folded into C).
 * Two equivalent forms of the same linear time-invariant map u -> y:
 *   convolution:  K[h, l] = 2 Re sum_n C q w^l,  y[t] = sum_{j<=t} K[j] u[t-j] + D u[t]
 *   recurrence:   s[t] = w s[t-1] + q u[t],       y[t] = 2 Re sum_n C s[t] + D u[t]
 * Training uses the convolution (kernel op + FFT convolution op); evaluation streams with
 * the recurrence; each is tested against the other and against a direct O(T^2) sum.
 * Derivations: docs/models/s4.md.
 *
 * Parameter shapes (the reference's state_dict): log_dt [H]; C [H, N2, 2] (real view of the
 * complex C: [..., 0] real part, [..., 1] imaginary part); log_A_real, A_imag [H, N2]; D [H].
 * Gradients of complex quantities follow PyTorch: dRe + i dIm.
 */
#ifndef SELECTIVBENCH_OPS_S4_H
#define SELECTIVBENCH_OPS_S4_H

#include "tensor/nn.h"

/* ---- s4_kernel.c ------------------------------------------------------------------------ */

/* The convolution kernel K[H, T] = 2 Re sum_n C q w^l for l = 0..T-1, recomputed from the
 * parameters on every call (independent of the batch). Computed in double whatever `real`
 * is, the powers w^l by repeated products. */
sb_tensor *sb_s4d_kernel(sb_graph *g, sb_tensor *log_dt, sb_tensor *C, sb_tensor *log_A_real,
                         sb_tensor *A_imag, int T);

/* Causal convolution along time, channel by channel, plus the skip term:
 *   y[b, t, h] = sum_{j=0}^{t} K[h, j] u[b, t-j, h] + D[h] u[b, t, h]
 * u [B, T, H], K [H, T], D [H] or NULL -> y [B, T, H]. Computed with real FFTs (FFTW) of a
 * size n >= 2T with only the factors 2, 3, 5 (the reference uses n = 2T: the same linear
 * convolution). Plans are made once per size with FFTW_ESTIMATE (no timing, so the same
 * plan and the same rounding on every run) under a lock, and every transform is a
 * single-threaded call on one channel, so the result does not depend on the thread count.
 * The backward's correlations (dK sums over the batch in order, du) use the same FFTs. */
sb_tensor *sb_s4d_conv(sb_graph *g, sb_tensor *u, sb_tensor *K, sb_tensor *D);

/* The same by the direct O(T^2) sums (the tests' oracle for sb_s4d_conv). */
sb_tensor *sb_s4d_conv_ref(sb_graph *g, sb_tensor *u, sb_tensor *K, sb_tensor *D);

/* The diagonal recurrence, step by step, with the kernel's parameters:
 *   s[t] = w s[t-1] + q u[b, t, h],  y[b, t, h] = 2 Re sum_n C s[t] + D[h] u[b, t, h]
 * u [B, T, H]; D [H] or NULL -> y [B, T, H], the same map as sb_s4d_conv of sb_s4d_kernel.
 * state: NULL (s[-1] = 0), or [B][H][N2][2] holding s[-1] (real, imaginary parts),
 * overwritten with s[T-1] (streaming evaluation; only when the graph does not record).
 * Arithmetic in double. The recorded backward keeps every state (tests only). */
sb_tensor *sb_s4d_recurrence(sb_graph *g, sb_tensor *u, sb_tensor *log_dt, sb_tensor *C,
                             sb_tensor *log_A_real, sb_tensor *A_imag, sb_tensor *D, real *state);

/* DropoutNd(p, tie=True, transposed=True) of the reference on x[B, T, H]: one keep
 * decision per (b, h), shared by every frame; kept values are scaled by 1 / (1 - p). The
 * identity (x itself) when the graph is not training or p == 0. Masks come from the same
 * counter-based hash as sb_dropout (graph seed, step, call, index b H + h). */
sb_tensor *sb_dropout_tied(sb_graph *g, sb_tensor *x, real p);

/* GLU over the last dimension (nn.GLU on the channel axis): p[..., 2H] ->
 * p[..., 0:H] * sigmoid(p[..., H:2H]), the gate being the second half. */
sb_tensor *sb_glu(sb_graph *g, sb_tensor *p);

#endif

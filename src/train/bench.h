/*
 * bench.h - training-step benchmarks: tokens per second, memory and the fraction of the
 * machine's FP32 peak, for any registered model at any size.
 */
#ifndef SELECTIVBENCH_BENCH_H
#define SELECTIVBENCH_BENCH_H

#include <stddef.h>

#include "config/run_config.h"
#include "core/status.h"

/* sb_bench_config, sb_bench_result and sb_bench_isa are the public header's (one
 * definition). */

/* Builds the model on a random one-hot batch, validates a training step (finite loss,
 * every trainable tensor receives a gradient, the loss moves after updates), warms up,
 * then times `steps` full steps (forward, loss, backward, clipping, Adam). */
sb_status sb_bench_train_step(const sb_bench_config *cfg, sb_bench_result *res, sb_error *err);

/* The machine's FP32 matrix-multiply rate in GFLOP/s on `threads` threads (0: all): the
 * best of a few 2048^3 sgemm runs (the roofline the fractions are relative to). */
double sb_bench_sgemm_peak(int threads);

/* "openblas", "onednn", "auto" (or NULL: auto) as an engine; SB_ERR_INVALID otherwise. */
sb_status sb_bench_gemm_parse(const char *name, sb_gemm_kind *engine, sb_error *err);

/* GFLOP/s of an M x K by K x N sgemm on an engine (the best of three after a warm-up). */
sb_status sb_bench_sgemm_rate(const char *gemm, int M, int N, int K, int threads, double *gflops,
                              sb_error *err);

/* The instruction sets behind a benchmark: what the compiler was allowed to use for this
 * binary (its predefined macros; SB_NATIVE=ON builds with -march=native), what this CPU
 * offers (asked at run time), and the OpenBLAS kernel set (chosen by OpenBLAS at run time,
 * whatever the build: OPENBLAS_CORETYPE overrides its choice). Feature lists are
 * space-separated lower-case names (sse2 ... avx2 fma avx512f ... avx512bf16); the level is
 * the widest vector extension among them ("avx512", "avx2", "avx", "sse4.2", "sse2"). */

void sb_bench_isa_get(sb_bench_isa *isa);

/* The data benchmark (bench_data.c): sb_bench_data_stage_name and sb_bench_data_stage, as the
 * public header declares them. */

#endif

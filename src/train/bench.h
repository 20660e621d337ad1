/*
 * bench.h - training-step benchmarks: tokens per second, memory and the fraction of the
 * machine's FP32 peak, for any registered model at any size.
 */
#ifndef SELECTIVBENCH_BENCH_H
#define SELECTIVBENCH_BENCH_H

#include <stddef.h>

#include "core/status.h"

typedef struct sb_bench_config {
    const char *model;
    int batch;     /* B */
    int frames;    /* T */
    int width;     /* D (--feat_size) */
    int layers;    /* L */
    int inputs;    /* one-hot width */
    int classes;   /* decoder outputs */
    int d_state;
    int steps;     /* timed steps (median reported) */
    int threads;   /* 0: all cores */
} sb_bench_config;

typedef struct sb_bench_result {
    size_t params;
    double step_ms;       /* median of the timed steps */
    double tokens_per_s;  /* B * T / step time */
    double gflops;        /* achieved: 3 x forward FLOPs per step / step time */
    double memory_mib;    /* what a step holds: activations (arena peak) + parameter,
                             gradient and Adam buffers + the batch */
    double first_loss, last_loss;
} sb_bench_result;

/* Builds the model on a random one-hot batch, validates a training step (finite loss,
 * every trainable tensor receives a gradient, the loss moves after updates), warms up,
 * then times `steps` full steps (forward, loss, backward, clipping, Adam). */
sb_status sb_bench_train_step(const sb_bench_config *cfg, sb_bench_result *res, sb_error *err);

/* The machine's FP32 matrix-multiply rate in GFLOP/s on `threads` threads (0: all): the
 * best of a few 2048^3 sgemm runs (the roofline the fractions are relative to). */
double sb_bench_sgemm_peak(int threads);

/* The instruction sets behind a benchmark: what the compiler was allowed to use for this
 * binary (its predefined macros; SB_NATIVE=ON builds with -march=native), what this CPU
 * offers (asked at run time), and the OpenBLAS kernel set (chosen by OpenBLAS at run time,
 * whatever the build: OPENBLAS_CORETYPE overrides its choice). Feature lists are
 * space-separated lower-case names (sse2 ... avx2 fma avx512f ... avx512bf16); the level is
 * the widest vector extension among them ("avx512", "avx2", "avx", "sse4.2", "sse2"). */
typedef struct sb_bench_isa {
    int native;                 /* built with -march=native */
    const char *built_level;
    char built[160];
    const char *cpu_level;      /* "unknown" off x86 */
    char cpu[160];
    const char *blas_core;      /* openblas_get_corename() */
    const char *blas_coretype;  /* $OPENBLAS_CORETYPE, NULL when unset */
} sb_bench_isa;

void sb_bench_isa_get(sb_bench_isa *isa);

#endif

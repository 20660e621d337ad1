/*
 * gemm_engine.h - which library computes sb_gemm's products (docs/performance.md).
 *
 * Two engines: OpenBLAS, through blas.c's blocked path (blocks chosen from the shape alone,
 * each one single-threaded call, so 1 and 2 threads give the same bits), and oneDNN's
 * dnnl_sgemm (float builds linked with oneDNN; one call on all threads, reproducible for a
 * fixed thread count). Under SB_GEMM_AUTO each shape class (the transposes and the
 * power-of-two sizes of M, N, K, for a thread count) is measured on both at its first use
 * and the faster one is kept; decisions are cached in $XDG_CACHE_HOME/selectivbench/
 * gemm.json (else ~/.cache/...), keyed by the CPU model and the library versions, so later
 * runs make the same choices (and get the same bits). In deterministic mode oneDNN also
 * runs block by block, and auto means OpenBLAS (no measurement decides anything).
 *
 * The setting is process-wide: set it before training, not while products run.
 */
#ifndef SELECTIVBENCH_GEMM_ENGINE_H
#define SELECTIVBENCH_GEMM_ENGINE_H

#include "config/run_config.h"
#include "core/status.h"
#include "tensor/nn.h"

/* Sets the engine and the mode. SB_ERR_INVALID when oneDNN is asked for and this build
 * has none (or is the double-precision one). A program that never calls it gets OpenBLAS,
 * not deterministic-only (today's blocked path is deterministic anyway). */
sb_status sb_gemm_engine_set(sb_gemm_kind engine, int deterministic, sb_error *err);

/* Whether deterministic mode is on. */
int sb_gemm_deterministic(void);

/* Whether oneDNN can compute this build's products. */
int sb_gemm_onednn_available(void);

/* "openblas", "onednn" or "auto". */
const char *sb_gemm_kind_name(sb_gemm_kind engine);

/* oneDNN's version ("2.6.3"), or NULL when the build has none. */
const char *sb_gemm_onednn_version(void);

/* The engine the next product of this shape will use (under auto, it measures the shape
 * class now if it has not been decided; A and B are read, never written). */
sb_gemm_kind sb_gemm_engine_for(int trans_a, int trans_b, int M, int N, int K, const real *A,
                                int lda, const real *B, int ldb);

/* The product on a given engine (OpenBLAS or oneDNN, never auto), blocked or not: what
 * sb_gemm runs once the engine is chosen. */
void sb_gemm_run(sb_gemm_kind engine, int blocked, int trans_a, int trans_b, int M, int N, int K,
                 real alpha, const real *A, int lda, const real *B, int ldb, real beta, real *C,
                 int ldc);

/* FLOPs computed by each engine since the last reset (products at least as large as the
 * calibration threshold and those below it), for `bench`'s report. */
void sb_gemm_flops_get(double *openblas, double *onednn);
void sb_gemm_flops_reset(void);
void sb_gemm_flops_add(sb_gemm_kind engine, double flops);

/* The cache file's path in buf (empty when neither XDG_CACHE_HOME nor HOME is set). */
void sb_gemm_cache_path(char *buf, size_t size);

/* Forgets the decisions held in memory (the next product of each class reads the cache
 * file again, or measures): for tests of the cache. */
void sb_gemm_decisions_forget(void);

#endif

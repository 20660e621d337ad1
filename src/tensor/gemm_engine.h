/*
 * gemm_engine.h - which library computes sb_gemm's products (docs/performance.md).
 *
 * Two engines: OpenBLAS, through blas.c's blocked path (blocks chosen from the shape alone,
 * each one single-threaded call, so 1 and 2 threads give the same bits), and oneDNN's
 * matmul (float builds linked with oneDNN; one call on all threads, reproducible for a fixed
 * thread count). Which one computes a product is the engine table: `openblas` or `onednn`
 * for every product, or the default, SB_GEMM_TABLE_AUTO, a rule of the product's size:
 * oneDNN for products of at least SB_GEMM_ONEDNN_MIN_FLOPS, OpenBLAS's blocked path for
 * smaller ones. Products inside parallel regions (per-head products) always use OpenBLAS.
 * Nothing is measured: the table is a function of the setting and the product, so a run is
 * reproduced by its command, its thread count and its machine (sb_gemm_fingerprint). In
 * deterministic mode oneDNN also runs block by block (bits independent of the thread count).
 *
 * The setting is process-wide: set it before training, not while products run.
 */
#ifndef SELECTIVBENCH_GEMM_ENGINE_H
#define SELECTIVBENCH_GEMM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "config/run_config.h"
#include "core/status.h"
#include "tensor/nn.h"

/* Sets the engine and the mode. SB_ERR_INVALID when oneDNN is asked for and this build
 * has none (or is the double-precision one). A program that never calls it gets OpenBLAS,
 * not deterministic-only (today's blocked path is deterministic anyway). */
sb_status sb_gemm_engine_set(sb_gemm_kind engine, int deterministic, sb_error *err);

/* The engine, the mode and the precision of a run (--gemm, --deterministic, --precision). */
sb_status sb_gemm_configure(const sb_run_config *cfg, sb_error *err);

/* Whether deterministic mode is on. */
int sb_gemm_deterministic(void);

/* Whether oneDNN can compute this build's products. */
int sb_gemm_onednn_available(void);

/* "openblas", "onednn" or "auto". */
const char *sb_gemm_kind_name(sb_gemm_kind engine);

/* oneDNN's version ("2.6.3"), or NULL when the build has none. */
const char *sb_gemm_onednn_version(void);

/* The default table's threshold: oneDNN computes products of at least this many FLOPs
 * (2 M N K), OpenBLAS's blocked path smaller ones (docs/performance.md, "Which engine
 * computes a product": below it, oneDNN's one call on all threads loses to OpenBLAS in
 * training, a thread's wake-up costing more than the product's share of it). */
#define SB_GEMM_ONEDNN_MIN_FLOPS 16.0e6

/* The default table's name, as runs record it (a new rule gets a new name). */
#define SB_GEMM_TABLE_AUTO "auto-1"

/* The engine the engine table gives an M x N x K product called now (at the top level or
 * inside a parallel region). */
sb_gemm_kind sb_gemm_engine_for(int M, int N, int K);

/* The engine table in force: "openblas", "onednn" or SB_GEMM_TABLE_AUTO ("openblas" in a
 * build without oneDNN, whatever was asked). */
const char *sb_gemm_table_name(void);

/* The setting that gives a recorded table (sb_gemm_table_name's words); SB_ERR_INVALID for
 * a name this version does not know. */
sb_status sb_gemm_table_parse(const char *name, sb_gemm_kind *engine, sb_error *err);

/* What the bits of a run of cfg on `threads` threads depend on besides its hashed keys: the
 * engine table (cfg->gemm), the thread count (not in deterministic mode, whose bits do not
 * depend on it), deterministic mode, the precision, the CPU and the libraries (versions and
 * OpenBLAS's kernel set). Two runs of one configuration with
 * equal fingerprints compute the same bits. digest: 8 hex digits of the text's hash, stored
 * with every run and checkpoint. */
typedef struct sb_fingerprint {
    char table[16]; /* the engine table's name */
    char text[512]; /* every part, "table=auto-1; threads=2; ..." */
    char digest[9];
} sb_fingerprint;
void sb_gemm_fingerprint(const sb_run_config *cfg, int threads, sb_fingerprint *fp);

/* The product on a given engine (OpenBLAS or oneDNN, never auto), blocked or not: what
 * sb_gemm runs once the engine is chosen. */
void sb_gemm_run(sb_gemm_kind engine, int blocked, int trans_a, int trans_b, int M, int N, int K,
                 real alpha, const real *A, int lda, const real *B, int ldb, real beta, real *C,
                 int ldc);

/* FLOPs computed by each engine since the last reset (products at least as large as the
 * calibration threshold and those below it), for `bench`'s report. */
void sb_gemm_flops_get(double *openblas, double *onednn);
double sb_gemm_flops_bf16(void); /* the share of them with bf16 operands (oneDNN's) */
void sb_gemm_flops_add_bf16(double flops);
void sb_gemm_flops_reset(void);
void sb_gemm_flops_add(sb_gemm_kind engine, double flops);

/* ---- precision ---- */

/* Sets the operands' precision of the large products: SB_PRECISION_BF16 rounds both operands
 * of every product of at least SB_GEMM_BF16_MIN_FLOPS (outside parallel regions) to bf16 and
 * multiplies them with oneDNN's bf16 matmul, accumulating in float32; smaller products, and
 * everything else, stay float32. SB_ERR_INVALID, with the reason, when this build or CPU has
 * no bf16 products, or when the engine was forced to OpenBLAS (it has none). Set the engine
 * first. */
#define SB_GEMM_BF16_MIN_FLOPS 2.0e6
sb_status sb_gemm_precision_set(sb_precision_kind precision, sb_error *err);
sb_precision_kind sb_gemm_precision(void);

/* Suspends bf16 products (suspend = 1) or lifts the suspension (0) and returns the previous
 * state: a layer whose numerics bf16 operands would spoil (MesaNet's conjugate-gradient
 * solve) runs its own products in float32 under --precision bf16. The tape records the state
 * with each op (graph.c), so an op's backward multiplies in the precision its forward did.
 * Set at the top level only (not inside parallel regions). */
int sb_gemm_bf16_suspend(int suspend);
int sb_gemm_bf16_suspended(void);

/* Whether sb_gemm would multiply an M x N x K product in bf16 now (precision, size, level). */
int sb_gemm_bf16_applies(int M, int N, int K);

/* sb_gemm for a caller that keeps bf16 copies of its operands (A16, B16: A and B rounded
 * element by element, sb_bf16_from_float, with the same leading dimensions), so that an
 * operand used by several products is rounded once (the linear op: x and W in the forward,
 * dy in the backward). For dense operands (each leading dimension its row's width) the bits
 * are those sb_gemm gives. When bf16 does not apply, or a copy
 * is NULL, it is sb_gemm on A and B. */
void sb_gemm_rounded(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A,
                     const uint16_t *A16, int lda, const real *B, const uint16_t *B16, int ldb,
                     real beta, real *C, int ldc);

/* "fp32" or "bf16". */
const char *sb_precision_name(sb_precision_kind precision);

/* ---- oneDNN matmul primitives (gemm_onednn.c) ---- */

/* C = alpha op(A) op(B) + beta C (row-major, C float32) by a cached oneDNN matmul primitive,
 * A and B float32 (bf16 = 0) or bf16 (bf16 = 1, as uint16_t). All threads at the top level,
 * the calling thread alone inside a parallel region. 0, or -1 when oneDNN has no primitive
 * for it (or this build has no oneDNN): C is then untouched. */
int sb_onednn_matmul(int bf16, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc);

/* Whether oneDNN multiplies bf16 operands on this CPU. */
int sb_onednn_bf16_supported(void);

/* dst[r][c] = bf16(src[r * ld + c]), dst dense (rows x cols), rounded to nearest even. */
void sb_bf16_from_float(int rows, int cols, const float *src, int ld, uint16_t *dst);

#endif

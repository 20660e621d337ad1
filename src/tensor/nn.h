/*
 * nn.h - the core of training: the `real` type, tensors, the per-step arena and the tape.
 *
 * A model's forward is written once as straight-line calls of coarse ops (ops.h). Each
 * op computes its output into the step's arena and, when the graph records, appends its
 * backward function and a small context to the tape. sb_graph_backward replays the tape
 * in reverse; every backward *accumulates* (+=) into the gradients of its inputs.
 * Evaluation runs the same forward without recording, and callers may rewind the arena
 * to a mark to keep only what the next op needs.
 *
 * `real` is float in the normal build and double in the gradient-check build
 * (-DSB_REAL_DOUBLE): the library is compiled twice from the same sources.
 */
#ifndef SELECTIVBENCH_NN_H
#define SELECTIVBENCH_NN_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef SB_REAL_DOUBLE
typedef double real;
#define SB_REAL_NAME "float64"
#else
typedef float real;
#define SB_REAL_NAME "float32"
#endif

#define SB_MAX_DIMS 4
#define SB_ALIGN 64

/* ---- arena: a chunked bump allocator reused from step to step ------------------- */

typedef struct sb_arena_block sb_arena_block;

typedef struct sb_arena {
    sb_arena_block *first; /* blocks are kept for reuse after a reset */
    sb_arena_block *current;
    size_t block_size; /* default size of a new block */
    size_t in_use;     /* bytes handed out since the last reset */
    size_t peak;       /* largest in_use seen */
    size_t reserved;   /* bytes held in blocks */
} sb_arena;

typedef struct sb_arena_mark {
    sb_arena_block *block;
    size_t offset;
    size_t in_use;
} sb_arena_mark;

void sb_arena_init(sb_arena *a, size_t block_size);
void sb_arena_free(sb_arena *a);
/* SB_ALIGN-aligned memory, or NULL when the system is out of memory. */
void *sb_arena_alloc(sb_arena *a, size_t bytes);
sb_arena_mark sb_arena_get_mark(const sb_arena *a);
void sb_arena_reset_to(sb_arena *a, sb_arena_mark mark);
void sb_arena_reset(sb_arena *a);

/* ---- tensors ----------------------------------------------------------------------- */

/* A dense row-major tensor. Activations live in the arena; parameters point into the
 * model's flat parameter and gradient buffers. */
typedef struct sb_tensor {
    real *data;
    real *grad; /* NULL until a backward writes to it (then zero-initialised) */
    int ndim;
    int shape[SB_MAX_DIMS];
    size_t size; /* number of elements */
    unsigned char requires_grad;
} sb_tensor;

/* ---- graph: arena + tape + step settings ------------------------------------------- */

typedef struct sb_graph sb_graph;
typedef void (*sb_backward_fn)(sb_graph *g, void *ctx);

typedef struct sb_tape_entry {
    sb_backward_fn backward;
    void *ctx;
    int bf16_suspended; /* the forward ran with bf16 products suspended (gemm_engine.h) */
} sb_tape_entry;

struct sb_graph {
    sb_arena arena;
    int record;             /* append backward functions to the tape */
    int training;           /* dropout active */
    uint64_t dropout_seed;  /* dropout masks: hash of (seed, step, call, element) */
    uint64_t step;          /* set by the trainer: makes masks differ between steps */
    uint64_t dropout_calls; /* dropout ops issued in this step */
    sb_tape_entry *tape;    /* grows as needed, kept across steps */
    size_t tape_len, tape_cap;
    /* out of memory inside an op: longjmp here (set by sb_graph_guard) */
    jmp_buf oom_jump;
    int oom_armed;
};

void sb_graph_init(sb_graph *g, size_t block_size);
void sb_graph_free(sb_graph *g);
/* Forgets the tape and rewinds the arena: the start of every step. */
void sb_graph_reset(sb_graph *g);

/* Arena memory for an op; on exhaustion jumps to the armed guard (see sb_graph_run). */
void *sb_graph_alloc(sb_graph *g, size_t bytes);

/* New activation tensors (uninitialised / zeroed) of the given shape. */
sb_tensor *sb_tensor_new(sb_graph *g, int ndim, const int *shape);
sb_tensor *sb_tensor_zeros(sb_graph *g, int ndim, const int *shape);
sb_tensor *sb_tensor_2d(sb_graph *g, int rows, int cols);
/* A tensor header over existing data (no copy), e.g. an input batch. */
sb_tensor *sb_tensor_wrap(sb_graph *g, real *data, int ndim, const int *shape);
/* The same data seen with another shape of equal size; gradients are shared too. */
sb_tensor *sb_tensor_reshape(sb_graph *g, sb_tensor *t, int ndim, const int *shape);

/* The tensor's gradient buffer, allocated and zeroed on first use. */
real *sb_tensor_grad(sb_graph *g, sb_tensor *t);
/* The same for an op that writes every element of the gradient: a gradient that does not
 * exist yet is allocated without the clearing (*fresh = 1: store, do not accumulate), else
 * *fresh = 0. Saves one pass over the tensor (zeroing was 5-7% of a d 128 step). */
real *sb_tensor_grad_fresh(sb_graph *g, sb_tensor *t, int *fresh);

/* Appends an op's backward to the tape and returns its context (ctx_size bytes of arena
 * memory, zeroed), or NULL when the graph does not record (then the op saves nothing). */
void *sb_graph_record(sb_graph *g, sb_backward_fn backward, size_t ctx_size);

/* Runs the tape in reverse. The loss tensor's gradient must be seeded first. */
void sb_graph_backward(sb_graph *g);

/* Runs fn(g, arg) with out-of-memory protection: an allocation failure inside returns
 * SB_ERR_NOMEM (with a message giving the arena size) instead of crashing. */
sb_status sb_graph_run(sb_graph *g, void (*fn)(sb_graph *g, void *arg), void *arg, sb_error *err);

/* ---- BLAS ------------------------------------------------------------------------------ */

/* C = alpha * op(A) op(B) + beta * C, row-major, op = transpose when trans_* is nonzero.
 * op(A) is M x K, op(B) is K x N, C is M x N. sgemm or dgemm after `real`. */
void sb_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A, int lda,
             const real *B, int ldb, real beta, real *C, int ldc);

/* The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell", ...): the speed of
 * every product depends on it, and OPENBLAS_CORETYPE can override it. */
const char *sb_blas_core_name(void);

#endif

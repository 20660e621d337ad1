/*
 * alloc.h - the one allocation entry point of the library, with a fault-injection hook.
 *
 * Every malloc/calloc/realloc/aligned_alloc/free of the library (core to train) goes
 * through these functions. They add no header to the block: memory from sb_malloc may be
 * released with sb_free() and the other way round (only the counters then drift), so a front
 * end that frees a returned buffer with sb_free() stays correct.
 *
 * Test hook (SQLite's fault simulation): sb_alloc_fail_after(n, mode) makes the n-th
 * allocation from now return NULL (n = 0: the next one); in SB_ALLOC_FAIL_ONCE mode the
 * later ones succeed again, in SB_ALLOC_FAIL_ALWAYS mode every later one fails too.
 * When the hook is off an allocation costs one extra branch and two relaxed atomic adds.
 *
 * Not covered: memory that third-party libraries and libc allocate themselves (OpenBLAS,
 * FFTW plans and fftw_malloc, jansson, SQLite, cairo, libyaml, open_memstream, stdio).
 */
#ifndef SELECTIVBENCH_ALLOC_H
#define SELECTIVBENCH_ALLOC_H

#include <stddef.h>

void *sb_malloc(size_t bytes);
void *sb_calloc(size_t count, size_t size);
/* Like realloc; a failed call leaves p allocated. p NULL: an allocation. */
void *sb_realloc(void *p, size_t bytes);
/* bytes is rounded up to a multiple of alignment (a power of two) as C17 requires. */
void *sb_aligned_alloc(size_t alignment, size_t bytes);
void sb_free(void *p);

typedef enum sb_alloc_fail_mode {
    SB_ALLOC_FAIL_ONCE,   /* only the chosen allocation fails */
    SB_ALLOC_FAIL_ALWAYS, /* the chosen allocation and every later one fail */
} sb_alloc_fail_mode;

/* Arms the hook: the n-th allocation from now fails (n = 0: the next); n < 0 disarms it. */
void sb_alloc_fail_after(long n, sb_alloc_fail_mode mode);

/* Allocation calls made since the process started (failed ones included). */
long sb_alloc_count(void);

/* Allocations made by the hook to fail since it was last armed. */
long sb_alloc_failures(void);

/* Blocks allocated through these functions and not yet released through sb_free. */
long sb_alloc_live(void);

#endif

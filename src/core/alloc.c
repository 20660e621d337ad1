/* alloc.c - counted allocation and the fault-injection hook (see alloc.h).
 *
 * Counters are atomics: allocations happen inside OpenMP regions too. */
#include "core/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long calls;        /* allocation calls so far */
static atomic_long live_blocks;  /* allocated and not yet freed */
static atomic_long fail_at = -1; /* the call index that fails; -1: the hook is off */
static atomic_int fail_always;   /* 1: every call from fail_at on fails */
static atomic_long failures;     /* calls the hook failed since it was armed */

/* Counts one allocation call; 1 if the hook says it must fail. */
static int next_call_fails(void)
{
    long index = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
    long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (at < 0 || index < at)
        return 0;
    if (index > at && !atomic_load_explicit(&fail_always, memory_order_relaxed))
        return 0;
    atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed);
    return 1;
}

static void *counted(void *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
    return p;
}

void *sb_malloc(size_t bytes)
{
    if (next_call_fails())
        return NULL;
    return counted(malloc(bytes));
}

void *sb_calloc(size_t count, size_t size)
{
    if (next_call_fails())
        return NULL;
    return counted(calloc(count, size));
}

void *sb_realloc(void *p, size_t bytes)
{
    if (next_call_fails())
        return NULL;
    void *q = realloc(p, bytes);
    return p == NULL ? counted(q) : q;
}

void *sb_aligned_alloc(size_t alignment, size_t bytes)
{
    if (next_call_fails())
        return NULL;
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    return counted(aligned_alloc(alignment, rounded > 0 ? rounded : alignment));
}

void sb_free(void *p)
{
    if (p == NULL)
        return;
    atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
    free(p);
}

void sb_alloc_fail_after(long n, sb_alloc_fail_mode mode)
{
    atomic_store(&fail_at, -1);
    atomic_store(&failures, 0);
    atomic_store(&fail_always, mode == SB_ALLOC_FAIL_ALWAYS);
    if (n >= 0)
        atomic_store(&fail_at, atomic_load(&calls) + n);
}

long sb_alloc_count(void)
{
    return atomic_load(&calls);
}

long sb_alloc_failures(void)
{
    return atomic_load(&failures);
}

long sb_alloc_live(void)
{
    return atomic_load(&live_blocks);
}

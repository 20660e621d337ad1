/* arena.c - a chunked bump allocator for per-step activations (see nn.h).
 *
 * Blocks are never moved (pointers stay valid) and are kept after a reset, so once the
 * first step has sized the arena, later steps allocate nothing from the system. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tensor/nn.h"

struct sb_arena_block {
    sb_arena_block *next;
    size_t size;   /* usable bytes */
    size_t offset; /* next free byte */
    unsigned char *base;
};

void sb_arena_init(sb_arena *a, size_t block_size)
{
    memset(a, 0, sizeof *a);
    a->block_size = block_size > 0 ? block_size : ((size_t)64 << 20);
}

void sb_arena_free(sb_arena *a)
{
    sb_arena_block *b = a->first;
    while (b != NULL) {
        sb_arena_block *next = b->next;
        sb_free(b->base);
        sb_free(b);
        b = next;
    }
    memset(a, 0, sizeof *a);
}

static sb_arena_block *arena_new_block(size_t size)
{
    sb_arena_block *b = sb_malloc(sizeof *b);
    if (b == NULL)
        return NULL;
    b->base = sb_aligned_alloc(SB_ALIGN, (size + SB_ALIGN - 1) / SB_ALIGN * SB_ALIGN);
    if (b->base == NULL) {
        sb_free(b);
        return NULL;
    }
    b->next = NULL;
    b->size = size;
    b->offset = 0;
    return b;
}

void *sb_arena_alloc(sb_arena *a, size_t bytes)
{
    size_t need = (bytes + SB_ALIGN - 1) / SB_ALIGN * SB_ALIGN;
    if (need == 0)
        need = SB_ALIGN;
    /* try the current block, then the following (kept) blocks */
    sb_arena_block *b = a->current;
    while (b != NULL) {
        if (b->size - b->offset >= need)
            break;
        b = b->next;
        if (b != NULL)
            b->offset = 0;
    }
    if (b == NULL) {
        size_t size = need > a->block_size ? need : a->block_size;
        b = arena_new_block(size);
        if (b == NULL)
            return NULL;
        a->reserved += size;
        /* append after the current block: the chain order is the allocation order */
        if (a->first == NULL) {
            a->first = b;
        } else {
            sb_arena_block *last = a->current != NULL ? a->current : a->first;
            while (last->next != NULL)
                last = last->next;
            last->next = b;
        }
    }
    a->current = b;
    void *p = b->base + b->offset;
    b->offset += need;
    a->in_use += need;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
    return p;
}

sb_arena_mark sb_arena_get_mark(const sb_arena *a)
{
    sb_arena_mark m = {a->current, a->current != NULL ? a->current->offset : 0, a->in_use};
    return m;
}

void sb_arena_reset_to(sb_arena *a, sb_arena_mark mark)
{
    if (mark.block == NULL) {
        sb_arena_reset(a);
        return;
    }
    a->current = mark.block;
    mark.block->offset = mark.offset;
    a->in_use = mark.in_use;
}

void sb_arena_reset(sb_arena *a)
{
    a->current = a->first;
    if (a->first != NULL)
        a->first->offset = 0;
    a->in_use = 0;
}

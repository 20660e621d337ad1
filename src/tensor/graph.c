/* graph.c - tensors, the tape and the backward replay (see nn.h). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tensor/gemm_engine.h"
#include "tensor/nn.h"

void sb_graph_init(sb_graph *g, size_t block_size)
{
    memset(g, 0, sizeof *g);
    sb_arena_init(&g->arena, block_size);
}

void sb_graph_free(sb_graph *g)
{
    sb_arena_free(&g->arena);
    sb_free(g->tape);
    memset(g, 0, sizeof *g);
}

void sb_graph_reset(sb_graph *g)
{
    sb_arena_reset(&g->arena);
    g->tape_len = 0;
    g->dropout_calls = 0;
}

void *sb_graph_alloc(sb_graph *g, size_t bytes)
{
    void *p = sb_arena_alloc(&g->arena, bytes);
    if (p == NULL) {
        if (g->oom_armed)
            longjmp(g->oom_jump, 1);
        SB_ASSERT(!"out of memory outside sb_graph_run");
    }
    return p;
}

static size_t shape_size(int ndim, const int *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        SB_ASSERT(shape[i] >= 0);
        n *= (size_t)shape[i];
    }
    return n;
}

sb_tensor *sb_tensor_wrap(sb_graph *g, real *data, int ndim, const int *shape)
{
    SB_ASSERT(ndim >= 1 && ndim <= SB_MAX_DIMS);
    sb_tensor *t = sb_graph_alloc(g, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->size = shape_size(ndim, shape);
    t->data = data;
    return t;
}

sb_tensor *sb_tensor_new(sb_graph *g, int ndim, const int *shape)
{
    size_t n = shape_size(ndim, shape);
    real *data = sb_graph_alloc(g, n * sizeof *data);
    return sb_tensor_wrap(g, data, ndim, shape);
}

sb_tensor *sb_tensor_zeros(sb_graph *g, int ndim, const int *shape)
{
    sb_tensor *t = sb_tensor_new(g, ndim, shape);
    memset(t->data, 0, t->size * sizeof *t->data);
    return t;
}

sb_tensor *sb_tensor_2d(sb_graph *g, int rows, int cols)
{
    int shape[2] = {rows, cols};
    return sb_tensor_new(g, 2, shape);
}

/* A reshaped view shares data and gradient with its source. Since the gradient of the
 * source may not exist yet, the view records a tiny backward that forwards its
 * gradient to the source. */
typedef struct reshape_ctx {
    sb_tensor *src, *view;
} reshape_ctx;

static void reshape_backward(sb_graph *g, void *ctx)
{
    reshape_ctx *c = ctx;
    if (c->view->grad == NULL || c->view->grad == c->src->grad)
        return;
    real *dsrc = sb_tensor_grad(g, c->src);
    for (size_t i = 0; i < c->src->size; i++)
        dsrc[i] += c->view->grad[i];
}

sb_tensor *sb_tensor_reshape(sb_graph *g, sb_tensor *t, int ndim, const int *shape)
{
    SB_ASSERT(shape_size(ndim, shape) == t->size);
    sb_tensor *v = sb_tensor_wrap(g, t->data, ndim, shape);
    v->requires_grad = t->requires_grad;
    if (t->grad != NULL) {
        v->grad = t->grad; /* already allocated (e.g. a parameter): share it */
    } else if (t->requires_grad) {
        reshape_ctx *c = sb_graph_record(g, reshape_backward, sizeof *c);
        if (c != NULL) {
            c->src = t;
            c->view = v;
        }
    }
    return v;
}

real *sb_tensor_grad(sb_graph *g, sb_tensor *t)
{
    if (t->grad == NULL) {
        t->grad = sb_graph_alloc(g, t->size * sizeof *t->grad);
        memset(t->grad, 0, t->size * sizeof *t->grad);
    }
    return t->grad;
}

real *sb_tensor_grad_fresh(sb_graph *g, sb_tensor *t, int *fresh)
{
    *fresh = t->grad == NULL;
    if (t->grad == NULL)
        t->grad = sb_graph_alloc(g, t->size * sizeof *t->grad);
    return t->grad;
}

void *sb_graph_record(sb_graph *g, sb_backward_fn backward, size_t ctx_size)
{
    if (!g->record)
        return NULL;
    if (g->tape_len == g->tape_cap) {
        size_t cap = g->tape_cap > 0 ? 2 * g->tape_cap : 256;
        sb_tape_entry *grown = sb_realloc(g->tape, cap * sizeof *grown);
        if (grown == NULL) {
            if (g->oom_armed)
                longjmp(g->oom_jump, 1);
            SB_ASSERT(!"out of memory growing the tape");
        }
        g->tape = grown;
        g->tape_cap = cap;
    }
    void *ctx = sb_graph_alloc(g, ctx_size);
    memset(ctx, 0, ctx_size);
    g->tape[g->tape_len].backward = backward;
    g->tape[g->tape_len].ctx = ctx;
    g->tape[g->tape_len].bf16_suspended = sb_gemm_bf16_suspended();
    g->tape_len++;
    return ctx;
}

void sb_graph_backward(sb_graph *g)
{
    const int suspended = sb_gemm_bf16_suspended();
    for (size_t i = g->tape_len; i-- > 0;) {
        sb_gemm_bf16_suspend(g->tape[i].bf16_suspended);
        g->tape[i].backward(g, g->tape[i].ctx);
    }
    sb_gemm_bf16_suspend(suspended);
}

sb_status sb_graph_run(sb_graph *g, void (*fn)(sb_graph *g, void *arg), void *arg, sb_error *err)
{
    if (setjmp(g->oom_jump) != 0) {
        g->oom_armed = 0;
        return sb_error_set(err, SB_ERR_NOMEM,
                            "out of memory with %.1f MiB of activations in use: lower "
                            "--batch_size or use --grad_acc",
                            (double)g->arena.in_use / 1048576.0);
    }
    g->oom_armed = 1;
    fn(g, arg);
    g->oom_armed = 0;
    return SB_OK;
}

/* elementwise.c - residual adds, dropout, activations and SwiGLU (see ops.h).
 * Every op here maps element i of its inputs to element i of its output, so forward
 * and backward are plain loops split across threads. */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops.h"

#include "tensor/fastmath.h"

#define PAR_MIN 32768 /* below this many elements, one thread */

static sb_tensor *like(sb_graph *g, const sb_tensor *x)
{
    return sb_tensor_new(g, x->ndim, x->shape);
}

/* ---- add ------------------------------------------------------------------------------ */

typedef struct add_ctx {
    sb_tensor *in[3], *y;
    int n_in;
} add_ctx;

static void add_backward(sb_graph *g, void *ctx)
{
    add_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const real *dy = c->y->grad;
    const size_t n = c->y->size;
    for (int k = 0; k < c->n_in; k++) {
        if (!c->in[k]->requires_grad)
            continue;
        int fresh;
        real *dx = sb_tensor_grad_fresh(g, c->in[k], &fresh);
        if (fresh) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
            for (size_t i = 0; i < n; i++)
                dx[i] = dy[i];
            continue;
        }
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
        for (size_t i = 0; i < n; i++)
            dx[i] += dy[i];
    }
}

static sb_tensor *add_n(sb_graph *g, sb_tensor **in, int n_in)
{
    for (int k = 1; k < n_in; k++)
        SB_ASSERT(in[k]->size == in[0]->size);
    sb_tensor *y = like(g, in[0]);
    const size_t n = y->size;
    const real *a = in[0]->data, *b = in[1]->data, *c3 = n_in > 2 ? in[2]->data : NULL;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y->data[i] = a[i] + b[i] + (c3 != NULL ? c3[i] : 0);
    for (int k = 0; k < n_in; k++)
        y->requires_grad |= in[k]->requires_grad;
    if (y->requires_grad) {
        add_ctx *c = sb_graph_record(g, add_backward, sizeof *c);
        if (c != NULL) {
            for (int k = 0; k < n_in; k++)
                c->in[k] = in[k];
            c->n_in = n_in;
            c->y = y;
        }
    }
    return y;
}

sb_tensor *sb_add(sb_graph *g, sb_tensor *a, sb_tensor *b)
{
    sb_tensor *in[2] = {a, b};
    return add_n(g, in, 2);
}

sb_tensor *sb_add3(sb_graph *g, sb_tensor *a, sb_tensor *b, sb_tensor *c)
{
    sb_tensor *in[3] = {a, b, c};
    return add_n(g, in, 3);
}

/* ---- dropout ------------------------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t z)
{
    /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct dropout_ctx {
    sb_tensor *x, *y;
    uint8_t *keep;
    real scale;
} dropout_ctx;

static void dropout_backward(sb_graph *g, void *ctx)
{
    dropout_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const real *dy = c->y->grad;
    const size_t n = c->y->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] += c->keep[i] ? dy[i] * c->scale : 0;
}

sb_tensor *sb_dropout(sb_graph *g, sb_tensor *x, real p)
{
    if (!g->training || p <= 0)
        return x;
    sb_tensor *y = like(g, x);
    const size_t n = x->size;
    uint8_t *keep = sb_graph_alloc(g, n);
    const real scale = 1 / (1 - p);
    /* one stream per (seed, step, call); element i takes hash number i of it */
    const uint64_t stream =
        mix64(g->dropout_seed ^ mix64(g->step * 0x9e3779b97f4a7c15ull + g->dropout_calls++));
    const double keep_prob = 1.0 - (double)p;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(stream + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
        keep[i] = u < keep_prob;
        y->data[i] = keep[i] ? x->data[i] * scale : 0;
    }
    y->requires_grad = x->requires_grad;
    if (y->requires_grad) {
        dropout_ctx *c = sb_graph_record(g, dropout_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y, c->keep = keep, c->scale = scale;
    }
    return y;
}

/* ---- unary activations ------------------------------------------------------------------------
 * y = f(x); the backward needs f'(x), computed from the saved input. */

typedef enum act_kind { ACT_GELU, ACT_SILU, ACT_SIGMOID, ACT_SOFTPLUS, ACT_TANH } act_kind;

typedef struct act_ctx {
    sb_tensor *x, *y;
    act_kind kind;
} act_ctx;

static inline real sigmoid(real x)
{
    return sb_fsigmoid(x);
}

static inline real act_forward(act_kind kind, real x)
{
    switch (kind) {
    case ACT_GELU: return (real)0.5 * x * (1 + erf(x * (real)0.70710678118654752440));
    case ACT_SILU: return x * sigmoid(x);
    case ACT_SIGMOID: return sigmoid(x);
    case ACT_SOFTPLUS: return x > 20 ? x : log1p(sb_fexp(x));
    case ACT_TANH: return sb_ftanh(x);
    }
    return 0;
}

static inline real act_derivative(act_kind kind, real x, real y)
{
    switch (kind) {
    case ACT_GELU: {
        /* Phi(x) + x phi(x) */
        real cdf = (real)0.5 * (1 + erf(x * (real)0.70710678118654752440));
        real pdf = sb_fexp((real)-0.5 * x * x) * (real)0.39894228040143267794;
        return cdf + x * pdf;
    }
    case ACT_SILU: {
        real s = sigmoid(x);
        return s * (1 + x * (1 - s));
    }
    case ACT_SIGMOID: return y * (1 - y);
    case ACT_SOFTPLUS: return x > 20 ? 1 : sigmoid(x);
    case ACT_TANH: return 1 - y * y;
    }
    return 0;
}

static void act_backward(sb_graph *g, void *ctx)
{
    act_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const real *dy = c->y->grad, *x = c->x->data, *y = c->y->data;
    const size_t n = c->y->size;
    const act_kind kind = c->kind;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * act_derivative(kind, x[i], y[i]);
}

static sb_tensor *activation(sb_graph *g, sb_tensor *x, act_kind kind)
{
    sb_tensor *y = like(g, x);
    const size_t n = x->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t i = 0; i < n; i++)
        y->data[i] = act_forward(kind, x->data[i]);
    y->requires_grad = x->requires_grad;
    if (y->requires_grad) {
        act_ctx *c = sb_graph_record(g, act_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y, c->kind = kind;
    }
    return y;
}

sb_tensor *sb_gelu(sb_graph *g, sb_tensor *x)
{
    return activation(g, x, ACT_GELU);
}
sb_tensor *sb_silu(sb_graph *g, sb_tensor *x)
{
    return activation(g, x, ACT_SILU);
}
sb_tensor *sb_sigmoid(sb_graph *g, sb_tensor *x)
{
    return activation(g, x, ACT_SIGMOID);
}
sb_tensor *sb_softplus(sb_graph *g, sb_tensor *x)
{
    return activation(g, x, ACT_SOFTPLUS);
}
sb_tensor *sb_tanh_op(sb_graph *g, sb_tensor *x)
{
    return activation(g, x, ACT_TANH);
}

/* ---- SwiGLU with trainable beta ------------------------------------------------------------
 * h = [a | v] per row (F values each); s = sigmoid(beta a); m = a s v.
 * Backward: dv = dm a s; da = dm v (s + beta a s (1 - s)); dbeta += sum dm v a^2 s (1 - s).
 */
typedef struct swiglu_ctx {
    sb_tensor *h, *beta, *m;
    int N, F;
} swiglu_ctx;

static void swiglu_backward(sb_graph *g, void *ctx)
{
    swiglu_ctx *c = ctx;
    if (c->m->grad == NULL)
        return;
    const int N = c->N, F = c->F;
    const real beta = c->beta->data[0];
    const real *h = c->h->data, *dm = c->m->grad;
    real *dh = c->h->requires_grad ? sb_tensor_grad(g, c->h) : NULL;
    /* dbeta: per-row partial sums, then summed in row order (deterministic) */
    real *row_dbeta = sb_graph_alloc(g, (size_t)N * sizeof *row_dbeta);
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)F > PAR_MIN / 4)
    for (int n = 0; n < N; n++) {
        const real *a = h + (size_t)n * 2 * (size_t)F, *v = a + F;
        const real *dmr = dm + (size_t)n * (size_t)F;
        real acc = 0;
        for (int j = 0; j < F; j++) {
            real s = sigmoid(beta * a[j]);
            real dsw = dmr[j] * v[j];
            real ds = s * (1 - s);
            if (dh != NULL) {
                real *da = dh + (size_t)n * 2 * (size_t)F, *dv = da + F;
                da[j] += dsw * (s + beta * a[j] * ds);
                dv[j] += dmr[j] * a[j] * s;
            }
            acc += dsw * a[j] * a[j] * ds;
        }
        row_dbeta[n] = acc;
    }
    if (c->beta->requires_grad) {
        real total = 0;
        for (int n = 0; n < N; n++)
            total += row_dbeta[n];
        sb_tensor_grad(g, c->beta)[0] += total;
    }
}

sb_tensor *sb_swiglu_beta(sb_graph *g, sb_tensor *h, sb_tensor *beta)
{
    const int F2 = h->shape[h->ndim - 1];
    SB_ASSERT(F2 % 2 == 0 && beta->size == 1);
    const int F = F2 / 2;
    const int N = (int)(h->size / (size_t)F2);
    int shape[SB_MAX_DIMS];
    for (int d = 0; d < h->ndim; d++)
        shape[d] = h->shape[d];
    shape[h->ndim - 1] = F;
    sb_tensor *m = sb_tensor_new(g, h->ndim, shape);
    const real b = beta->data[0];
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)F > PAR_MIN / 4)
    for (int n = 0; n < N; n++) {
        const real *a = h->data + (size_t)n * 2 * (size_t)F, *v = a + F;
        real *mr = m->data + (size_t)n * (size_t)F;
        for (int j = 0; j < F; j++)
            mr[j] = a[j] * sigmoid(b * a[j]) * v[j];
    }
    m->requires_grad = h->requires_grad || beta->requires_grad;
    if (m->requires_grad) {
        swiglu_ctx *c = sb_graph_record(g, swiglu_backward, sizeof *c);
        if (c != NULL)
            c->h = h, c->beta = beta, c->m = m, c->N = N, c->F = F;
    }
    return m;
}

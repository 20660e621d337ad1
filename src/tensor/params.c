/* params.c - the parameter table, flat buffers and PyTorch-compatible init (params.h). */
#include "tensor/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

void sb_params_init(sb_params *ps)
{
    memset(ps, 0, sizeof *ps);
}

void sb_params_free(sb_params *ps)
{
    sb_free(ps->p);
    sb_free(ps->data);
    sb_free(ps->grad);
    sb_free(ps->m);
    sb_free(ps->v);
    memset(ps, 0, sizeof *ps);
}

sb_param *sb_params_add(sb_params *ps, const char *name, int ndim, const int *shape,
                        sb_init_kind init, double a, int draw_rank)
{
    SB_ASSERT(ndim >= 1 && ndim <= SB_MAX_DIMS);
    SB_ASSERT(strlen(name) < SB_PARAM_NAME_MAX);
    SB_ASSERT(sb_params_find(ps, name) == NULL);
    SB_ASSERT(ps->data == NULL); /* no additions after allocation */
    if (ps->n == ps->cap && !ps->out_of_memory) {
        int cap = ps->cap > 0 ? 2 * ps->cap : 64;
        sb_param *grown = sb_realloc(ps->p, (size_t)cap * sizeof *grown);
        if (grown != NULL) {
            ps->p = grown;
            ps->cap = cap;
        } else {
            ps->out_of_memory = 1;
        }
    }
    if (ps->out_of_memory) {
        memset(&ps->spare, 0, sizeof ps->spare);
        return &ps->spare;
    }
    sb_param *p = &ps->p[ps->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->size = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->size *= (size_t)shape[i];
    }
    p->init = init;
    p->a = a;
    p->draw_key = ps->draw_module * 1000000 + draw_rank;
    return p;
}

sb_param *sb_params_add_named(sb_params *ps, const char *prefix, const char *suffix, int ndim,
                              const int *shape, sb_init_kind init, double a, int draw_rank)
{
    char name[SB_PARAM_NAME_MAX];
    int len = snprintf(name, sizeof name, "%s%s", prefix, suffix);
    SB_ASSERT(len > 0 && (size_t)len < sizeof name);
    return sb_params_add(ps, name, ndim, shape, init, a, draw_rank);
}

sb_param *sb_params_find(const sb_params *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].name, name) == 0)
            return &ps->p[i];
    return NULL;
}

sb_status sb_params_alloc(sb_params *ps, sb_error *err)
{
    if (ps->out_of_memory)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory registering %d parameters", ps->n);
    const size_t align = SB_ALIGN / sizeof(real);
    size_t offset = 0, count = 0;
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = &ps->p[i];
        p->offset = offset;
        offset += (p->size + align - 1) / align * align;
        if (!(p->flags & SB_PARAM_BUFFER))
            count += p->size;
    }
    ps->total = offset > 0 ? offset : align;
    ps->count = count;
    size_t bytes = ps->total * sizeof(real);
    ps->data = sb_aligned_alloc(SB_ALIGN, bytes);
    ps->grad = sb_aligned_alloc(SB_ALIGN, bytes);
    ps->m = sb_aligned_alloc(SB_ALIGN, bytes);
    ps->v = sb_aligned_alloc(SB_ALIGN, bytes);
    if (!ps->data || !ps->grad || !ps->m || !ps->v) {
        sb_free(ps->data), sb_free(ps->grad), sb_free(ps->m), sb_free(ps->v);
        ps->data = ps->grad = ps->m = ps->v = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for %zu parameters", ps->total);
    }
    memset(ps->data, 0, bytes);
    memset(ps->grad, 0, bytes);
    memset(ps->m, 0, bytes);
    memset(ps->v, 0, bytes);
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = &ps->p[i];
        sb_tensor *t = &p->tensor;
        memset(t, 0, sizeof *t);
        t->data = ps->data + p->offset;
        t->grad = (p->flags & SB_PARAM_BUFFER) ? NULL : ps->grad + p->offset;
        t->ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++)
            t->shape[d] = p->shape[d];
        t->size = p->size;
        t->requires_grad = !(p->flags & SB_PARAM_BUFFER);
    }
    return SB_OK;
}

void sb_params_zero_grad(sb_params *ps)
{
    memset(ps->grad, 0, ps->total * sizeof(real));
}

void sb_torch_uniform(sb_mt19937 *rng, real *out, size_t n, double from, double to)
{
    /* ATen casts the bounds to the tensor type; the product is formed in double (the
     * CPU accumulation type of float) and rounded to float at the end. */
    float lo = (float)from, hi = (float)to;
    float range = hi - lo;
    for (size_t i = 0; i < n; i++) {
        uint32_t word = sb_mt19937_next32(rng);
        double x = (double)(word & 0xffffffu) * (1.0 / 16777216.0);
        out[i] = (real)(float)(x * (double)range + (double)lo);
    }
}

double sb_torch_kaiming_bound(double fan_in)
{
    /* torch.nn.init.kaiming_uniform_(w, a=sqrt(5)): gain = sqrt(2 / (1 + a^2)),
     * std = gain / sqrt(fan_in), bound = sqrt(3) * std */
    double gain = sqrt(2.0 / (1.0 + 5.0));
    double std = gain / sqrt(fan_in);
    return sqrt(3.0) * std;
}

static int cmp_draw(const void *a, const void *b)
{
    const sb_param *x = *(sb_param *const *)a, *y = *(sb_param *const *)b;
    if (x->draw_key != y->draw_key)
        return x->draw_key < y->draw_key ? -1 : 1;
    return x < y ? -1 : (x > y); /* registration order among equal keys */
}

sb_status sb_params_initialise(sb_params *ps, uint64_t seed, sb_error *err)
{
    sb_mt19937 rng;
    sb_mt19937_init_genrand(&rng, (uint32_t)seed);
    sb_param **order = sb_malloc((size_t)(ps->n > 0 ? ps->n : 1) * sizeof *order);
    if (order == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory initialising %d parameters", ps->n);
    for (int i = 0; i < ps->n; i++)
        order[i] = &ps->p[i];
    qsort(order, (size_t)ps->n, sizeof *order, cmp_draw);
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = order[i];
        real *data = ps->data + p->offset;
        switch (p->init) {
        case SB_INIT_CONST:
            for (size_t k = 0; k < p->size; k++)
                data[k] = (real)p->a;
            break;
        case SB_INIT_UNIFORM: sb_torch_uniform(&rng, data, p->size, -p->a, p->a); break;
        case SB_INIT_KAIMING: {
            double bound = sb_torch_kaiming_bound(p->a);
            sb_torch_uniform(&rng, data, p->size, -bound, bound);
            break;
        }
        case SB_INIT_FANIN: {
            double bound = p->a > 0 ? 1.0 / sqrt(p->a) : 0.0;
            sb_torch_uniform(&rng, data, p->size, -bound, bound);
            break;
        }
        case SB_INIT_CUSTOM: p->custom(p, data, &rng, p->custom_ctx); break;
        }
    }
    sb_free(order);
    return SB_OK;
}

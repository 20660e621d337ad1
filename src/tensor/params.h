/*
 * params.h - a model's parameters: one table drives allocation, initialisation,
 * checkpoints and parameter counts.
 *
 * Parameters, their gradients and the two Adam moments live in four flat buffers of the
 * same layout (every tensor starts on a 64-byte boundary). Names and shapes are the
 * reference model's state_dict() names and shapes, registered in state_dict order.
 *
 * Initialisation reproduces PyTorch's CPU defaults bit for bit: torch.manual_seed(seed)
 * is an MT19937 seeded with init_genrand, and uniform_(a, b) on a float32 tensor draws
 * one 32-bit word per element, x = (word & 0xffffff) / 2^24, value = x * (b - a) + a.
 * Parameters are drawn in the reference's construction order (`draw_key`), which may
 * differ from the state_dict order.
 */
#ifndef SELECTIVBENCH_PARAMS_H
#define SELECTIVBENCH_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "tensor/nn.h"

#define SB_PARAM_NAME_MAX 96

typedef enum sb_init_kind {
    SB_INIT_CONST,   /* every element = a (zeros, ones) */
    SB_INIT_UNIFORM, /* torch uniform_(-a, a) */
    SB_INIT_KAIMING, /* nn.Linear weight: kaiming_uniform_(a=sqrt(5)), fan_in = a */
    SB_INIT_FANIN,   /* nn.Linear bias: uniform_(-1/sqrt(a), 1/sqrt(a)) */
    SB_INIT_CUSTOM,  /* a layer's own rule (custom callback) */
} sb_init_kind;

/* Parameter flags. */
#define SB_PARAM_NO_DECAY 1u /* excluded from weight decay */
#define SB_PARAM_GROUP2 2u   /* second optimiser group (S4 kernel parameters) */
#define SB_PARAM_BUFFER 4u   /* a state_dict buffer (e.g. rotary.inv_freq): saved, not trained */

typedef struct sb_param sb_param;

/* Custom initialiser: fills data[0..p->size) using the torch generator in draw order. */
typedef void (*sb_init_fn)(const sb_param *p, real *data, sb_mt19937 *torch_rng, const void *ctx);

struct sb_param {
    char name[SB_PARAM_NAME_MAX];
    int ndim;
    int shape[SB_MAX_DIMS];
    size_t size;
    size_t offset; /* into the flat buffers */
    sb_init_kind init;
    double a; /* init argument (constant, bound or fan-in) */
    sb_init_fn custom;
    const void *custom_ctx;
    int64_t draw_key; /* construction order; params with equal keys keep add order */
    unsigned flags;
    sb_tensor tensor; /* view on the flat buffers (data, grad), set by sb_params_alloc */
};

typedef struct sb_params {
    sb_param *p;
    int n, cap;
    size_t total; /* buffer length in reals (with alignment padding) */
    size_t count; /* trainable values (what the reference reports as nb_params) */
    real *data, *grad, *m, *v;
    int64_t draw_module; /* set by the model builder: the module being registered */
    /* an addition found no memory: the table is incomplete, and sb_params_alloc fails;
     * that addition and every later one return `spare`, which absorbs their settings */
    int out_of_memory;
    sb_param spare;
} sb_params;

void sb_params_init(sb_params *ps);
void sb_params_free(sb_params *ps);

/* Registers a parameter (state_dict order). shape has ndim entries (ndim 0: a scalar
 * stored as shape [1]... use ndim 1 with 1 for torch's (1,) parameters). draw_rank orders
 * the draws inside the current module (ps->draw_module). Returns the entry, never NULL: out
 * of memory it returns ps->spare and sets ps->out_of_memory, which sb_params_alloc (and the
 * model's registration) reports. A taken name is a programmer error (asserted). */
sb_param *sb_params_add(sb_params *ps, const char *name, int ndim, const int *shape,
                        sb_init_kind init, double a, int draw_rank);

/* The same with the name given as prefix + suffix ("layers.0." + "q_proj.weight"). */
sb_param *sb_params_add_named(sb_params *ps, const char *prefix, const char *suffix, int ndim,
                              const int *shape, sb_init_kind init, double a, int draw_rank);

/* Lays out and allocates the four buffers (zeroed) and points every tensor at them. */
sb_status sb_params_alloc(sb_params *ps, sb_error *err);

/* Initialises every parameter as PyTorch would after torch.manual_seed(seed). Fails only
 * for want of memory (SB_ERR_NOMEM), the parameters then partly initialised. */
sb_status sb_params_initialise(sb_params *ps, uint64_t seed, sb_error *err);

/* The parameter called `name`, or NULL. */
sb_param *sb_params_find(const sb_params *ps, const char *name);

/* Zeroes all gradients. */
void sb_params_zero_grad(sb_params *ps);

/* torch CPU float32 uniform_(from, to) for n values, drawn from the generator. */
void sb_torch_uniform(sb_mt19937 *rng, real *out, size_t n, double from, double to);

/* kaiming_uniform_(a = sqrt(5)) bound for a fan-in, computed as torch.nn.init does. */
double sb_torch_kaiming_bound(double fan_in);

#endif

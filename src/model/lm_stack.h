/* lm_stack.h - the second model wrapper beside RecNet: the fla causal-LM stack of the
 * reference's *_layered models (docs/models/layered.md). recnet.c
 * hands every layer type with a stack descriptor to these functions; the rest of the library
 * sees an ordinary sb_model. Internal to src/model/. */
#ifndef SELECTIVBENCH_LM_STACK_H
#define SELECTIVBENCH_LM_STACK_H

#include "model/model.h"

/* On failure *out may hold the partly built model, which the caller frees with
 * sb_model_free. Creates the model and registers every parameter in the reference's state_dict
 * order (nothing allocated yet). cfg has passed the common and the type's checks. */
sb_status sb_lm_stack_register(const sb_layer_type *type, const sb_model_config *cfg,
                               sb_model **out, sb_error *err);
/* After sb_params_alloc: points the model's tensors at the parameters (and allocates the
 * head's zero bias: fails only for want of memory). */
sb_status sb_lm_stack_bind(sb_model *m, sb_error *err);
/* The reference's initialisation after torch.manual_seed(seed), draw for draw (see
 * lm_stack.c): construction defaults, then fla's _init_weights, head, input projection.
 * Fails only for want of memory. */
sb_status sb_lm_stack_initialise(sb_model *m, uint64_t seed, sb_error *err);
void sb_lm_stack_free(struct sb_lm_stack *s);

/* As sb_model_hidden / sb_model_hidden_stream / sb_model_forward. */
sb_tensor *sb_lm_stack_hidden(sb_graph *g, const sb_model *m, sb_tensor *input,
                              int keep_only_output);
sb_tensor *sb_lm_stack_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                     real *const *states);
sb_tensor *sb_lm_stack_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                      sb_model_capture *cap);
double sb_lm_stack_flops(const sb_layer_type *type, const sb_model_config *c, int T);

/* GatedMLP width of fla (hidden_ratio 4, no intermediate_size): two thirds of 4 D rounded up
 * to a multiple of 256. */
int sb_lm_stack_mlp_width(int D);

/* torch's CPU normal_(mean, std) on a float32 tensor of n values, drawn from the generator
 * as torch 1.13's AVX2 kernel draws them (Box-Muller over blocks of 16 uniforms with the
 * Cephes log and sincos of avx_mathfun, FMA-contracted as that build compiles them; below 16
 * values the double Box-Muller with its cached second sample). *cache_valid / *cache hold
 * the generator's cached double normal sample. out may be NULL (draws consumed only). */
void sb_torch_normal(sb_mt19937 *rng, int *cache_valid, double *cache, real *out, size_t n,
                     double mean, double std);

#endif

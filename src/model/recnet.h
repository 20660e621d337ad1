/* recnet.h - the reference's RecNet wrapper (see model.h), called by the facade model.c. */
#ifndef SELECTIVBENCH_RECNET_H
#define SELECTIVBENCH_RECNET_H

#include "model/model.h"

/* Creates the model and registers every parameter in the reference's state_dict order (no
 * allocation of their values). On failure *out may hold the partly built model, which the
 * caller frees with sb_model_free. */
sb_status sb_recnet_register(const sb_layer_type *type, const sb_model_config *cfg, sb_model **out,
                             sb_error *err);
/* After sb_params_alloc: points the model's tensors at the parameters and initialises them
 * as PyTorch would after torch.manual_seed(seed). Fails only for want of memory. */
sb_status sb_recnet_bind_initialise(sb_model *m, uint64_t seed, sb_error *err);

/* As sb_model_hidden / sb_model_hidden_stream / sb_model_hidden_capture. */
sb_tensor *sb_recnet_hidden(sb_graph *g, const sb_model *m, sb_tensor *input, int keep_only_output);
sb_tensor *sb_recnet_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                   real *const *states);
sb_tensor *sb_recnet_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                    sb_model_capture *cap);
double sb_recnet_flops(const sb_layer_type *type, const sb_model_config *c, int T);

#endif

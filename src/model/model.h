/*
 * model.h - whole models built from a layer type (layers/layer.h), behind one facade
 * (src/model/model.c) over the two wrappers:
 *
 *   RecNet (src/model/recnet.c), the reference's model wrapper:
 *     x = encoder(input)                           Linear(I -> D)
 *     for l in 0..L-1: x = LayerNorm_l(x + Dropout(layer_l(x)))
 *     logits = decoder(x)                          Linear(D -> C), every frame
 *   the LM stack (src/model/lm_stack.c), for a layer type with a stack descriptor
 *   (sb_stack_desc: the reference's *_layered models): input projection, pre-norm blocks
 *   with a GatedMLP, final RMSNorm, head (docs/models/layered.md); the layer type's
 *   functions then describe the token mixer alone.
 *
 * The facade picks the wrapper from the layer type; neither wrapper names the other.
 */
#ifndef SELECTIVBENCH_MODEL_H
#define SELECTIVBENCH_MODEL_H

#include <stdio.h>

#include "layers/layer.h"
#include "ops/ops.h"
#include "tensor/nn.h"

/* ---- model (src/model/model.c) ------------------------------------------------------------ */

/* Builds a RecNet: parameters registered and allocated, initialised as PyTorch would after
 * torch.manual_seed(seed). Errors: unknown model (the message lists the known ones),
 * impossible sizes. */
sb_status sb_model_create(const sb_model_config *cfg, uint64_t seed, sb_model **out, sb_error *err);
void sb_model_free(sb_model *m);

/* The same for a layer type given directly (tests of layers not yet in the registry). */
sb_status sb_model_create_type(const sb_layer_type *type, const sb_model_config *cfg, uint64_t seed,
                               sb_model **out, sb_error *err);

/* Number of trainable parameters of cfg (what the reference logs as nb_params), without
 * allocating the model. */
sb_status sb_model_param_count(const sb_model_config *cfg, size_t *count, sb_error *err);

/* Training forward: input[B, T, I] -> logits[B, T, C] (recorded when g->record). */
sb_tensor *sb_model_forward(sb_graph *g, const sb_model *m, sb_tensor *input);

/* A layer type with fp32_products multiplies in float32 under --precision bf16: every entry
 * point of this file suspends bf16 products around its work (the tape carries that to the
 * backward); code that multiplies by the model's weights itself (the streamed evaluation's
 * head) does the same: was = sb_model_precision_enter(m); ...; sb_gemm_bf16_suspend(was). */
int sb_model_precision_enter(const sb_model *m);

/* Training forward fused with the loss: the decoder head and cross-entropy taken a chunk of
 * frames at a time (sb_linear_cross_entropy), so the [B, T, C] logits are never stored.
 * Returns the [1] loss; h carries the targets and receives the accuracy counts. */
sb_tensor *sb_model_loss(sb_graph *g, const sb_model *m, sb_tensor *input, sb_head_loss *h);

/* Forward up to the last layer norm: input[B, T, I] -> x[B, T, D]. With
 * keep_only_output, the arena is rewound after every layer so that memory does not grow
 * with the depth (evaluation; the graph must not record). */
sb_tensor *sb_model_hidden(sb_graph *g, const sb_model *m, sb_tensor *input, int keep_only_output);

/* Streaming forward (evaluation): input chunk [B, Tc, I] -> x [B, Tc, D] after the last
 * layer norm, carrying every layer's state (states: L buffers of B *
 * stream_state_floats reals, zeroed at the start of the sequences). Requires every layer
 * to have forward_stream; see sb_model_can_stream. */
sb_tensor *sb_model_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                  real *const *states);
int sb_model_can_stream(const sb_model *m);

/* What sb_model_hidden_capture keeps of a forward (the probe command): arrays the caller
 * provides, filled with tensors of the graph's arena. */
typedef struct sb_model_capture {
    sb_tensor **block_out; /* [L + 1] the encoder's (input projection's) output, then every
                              block's; LM stacks: the last one after the final RMSNorm */
    sb_tensor **layer_in;  /* [L] the x each layer's forward received (LM stacks: the mixer's
                              input, after the block's first RMSNorm) */
    sb_tensor **layer_out; /* [L] what each layer's forward returned */
} sb_model_capture;

/* As sb_model_hidden without keep_only_output, keeping every block's tensors in cap. */
sb_tensor *sb_model_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                   sb_model_capture *cap);

/* Forward FLOPs per token of the whole model at length T. */
double sb_model_flops_per_token(const sb_model *m, int T);
double sb_model_config_flops_per_token(const sb_model_config *cfg, int T);

#endif

/* fla_layers.h - helpers shared by the flash-linear-attention layers (gla.c, delta_net.c,
 * gated_delta_net.c, gated_delta_product.c). Internal to src/layers/. */
#ifndef SELECTIVBENCH_FLA_LAYERS_H
#define SELECTIVBENCH_FLA_LAYERS_H

#include "tensor/params.h"

/* Special initialisations of the gated delta family (fla/layers/gated_deltanet.py and
 * gated_deltaproduct.py v0.3.2), defined in gated_delta_net.c:
 * A_log = log(A), A = torch.empty(H).uniform_(0, 16), in float32. */
void sb_fla_init_A_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx);

/* dt_bias = dt + log(-expm1(-dt)) (the inverse softplus), with
 * dt = max(exp(torch.rand(H) * (ln 0.1 - ln 0.001) + ln 0.001), 1e-4), in float32. */
void sb_fla_init_dt_bias(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx);

/* t [B, T, groups * D] seen as [B, T, groups, D] (heads). When the graph records, t's
 * gradient is allocated first so that the view shares it: the backward then needs no copy
 * from the view's gradient into t's (what sb_tensor_reshape records otherwise). */
static inline sb_tensor *sb_fla_heads(sb_graph *g, sb_tensor *t, int D)
{
    const int shape[4] = {t->shape[0], t->shape[1], t->shape[2] / D, D};
    if (g->record && t->requires_grad)
        sb_tensor_grad(g, t);
    return sb_tensor_reshape(g, t, 4, shape);
}

/* t [B, T, H, D] seen as [B, T, H D], sharing the gradient as sb_fla_heads. */
static inline sb_tensor *sb_fla_flat(sb_graph *g, sb_tensor *t)
{
    const int shape[3] = {t->shape[0], t->shape[1], t->shape[2] * t->shape[3]};
    if (g->record && t->requires_grad)
        sb_tensor_grad(g, t);
    return sb_tensor_reshape(g, t, 3, shape);
}

#endif

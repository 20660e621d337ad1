/* model.c - the facade over the two model wrappers: RecNet (recnet.c) for plain layer types,
 * the LM stack (lm_stack.c) for types with a stack descriptor. Everything outside src/model/
 * sees one sb_model; the wrappers never call each other. */
#include <stdlib.h>

#include "core/alloc.h"
#include "model/lm_stack.h"
#include "model/model.h"
#include "model/recnet.h"
#include "ops/ops.h"
#include "tensor/gemm_engine.h"

void sb_model_free(sb_model *m)
{
    if (m == NULL)
        return;
    sb_params_free(&m->params);
    sb_lm_stack_free(m->stack);
    sb_free(m->layer_first);
    sb_free(m->norm_w);
    sb_free(m->norm_b);
    sb_free(m);
}

sb_status sb_model_create(const sb_model_config *cfg, uint64_t seed, sb_model **out, sb_error *err)
{
    *out = NULL;
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type == NULL)
        return sb_layer_type_unknown(cfg->model, err);
    return sb_model_create_type(type, cfg, seed, out, err);
}

/* Validates cfg and registers every parameter with the type's wrapper (no allocation of
 * their values yet). */
static sb_status model_register(const sb_layer_type *type, const sb_model_config *cfg,
                                sb_model **out, sb_error *err)
{
    *out = NULL;
    if (cfg->d_model < 1 || cfg->n_layers < 1 || cfg->d_input < 1 || cfg->d_output < 1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "model sizes must be positive (--feat_size %d, --layers %d, "
                            "inputs %d, classes %d)",
                            cfg->d_model, cfg->n_layers, cfg->d_input, cfg->d_output);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "--dropout %g must lie in [0, 1)", cfg->dropout);
    if (type->check != NULL) {
        sb_status st = type->check(cfg, err);
        if (st != SB_OK)
            return st;
    }
    sb_model *m = NULL;
    sb_status st = type->stack != NULL ? sb_lm_stack_register(type, cfg, &m, err)
                                       : sb_recnet_register(type, cfg, &m, err);
    if (st == SB_OK && m->params.out_of_memory)
        st = sb_error_set(err, SB_ERR_NOMEM,
                          "out of memory registering the parameters of a "
                          "%s model",
                          type->name);
    if (st != SB_OK) {
        sb_model_free(m);
        return st;
    }
    *out = m;
    return SB_OK;
}

sb_status sb_model_create_type(const sb_layer_type *type, const sb_model_config *cfg, uint64_t seed,
                               sb_model **out, sb_error *err)
{
    sb_model *m = NULL;
    sb_status st = model_register(type, cfg, &m, err);
    if (st != SB_OK)
        return st;
    st = sb_params_alloc(&m->params, err);
    if (st != SB_OK) {
        sb_model_free(m);
        return st;
    }
    if (m->stack != NULL) {
        st = sb_lm_stack_bind(m, err);
        if (st == SB_OK)
            st = sb_lm_stack_initialise(m, seed, err);
    } else {
        st = sb_recnet_bind_initialise(m, seed, err);
    }
    if (st != SB_OK) {
        sb_model_free(m);
        return st;
    }
    *out = m;
    return SB_OK;
}

sb_status sb_model_param_count(const sb_model_config *cfg, size_t *count, sb_error *err)
{
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type == NULL)
        return sb_layer_type_unknown(cfg->model, err);
    sb_model *m = NULL;
    sb_status st = model_register(type, cfg, &m, err);
    if (st != SB_OK)
        return st;
    size_t n = 0;
    for (int i = 0; i < m->params.n; i++)
        if (!(m->params.p[i].flags & SB_PARAM_BUFFER))
            n += m->params.p[i].size;
    *count = n;
    sb_model_free(m);
    return SB_OK;
}

int sb_model_precision_enter(const sb_model *m)
{
    return sb_gemm_bf16_suspend(sb_gemm_bf16_suspended() || m->type->fp32_products);
}

sb_tensor *sb_model_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                   sb_model_capture *cap)
{
    SB_ASSERT(input->ndim == 3 && input->shape[2] == m->cfg.d_input);
    const int was = sb_model_precision_enter(m);
    sb_tensor *x = m->stack != NULL ? sb_lm_stack_hidden_capture(g, m, input, cap)
                                    : sb_recnet_hidden_capture(g, m, input, cap);
    sb_gemm_bf16_suspend(was);
    return x;
}

sb_tensor *sb_model_hidden(sb_graph *g, const sb_model *m, sb_tensor *input, int keep_only_output)
{
    SB_ASSERT(input->ndim == 3 && input->shape[2] == m->cfg.d_input);
    const int was = sb_model_precision_enter(m);
    sb_tensor *x = m->stack != NULL ? sb_lm_stack_hidden(g, m, input, keep_only_output)
                                    : sb_recnet_hidden(g, m, input, keep_only_output);
    sb_gemm_bf16_suspend(was);
    return x;
}

int sb_model_can_stream(const sb_model *m)
{
    return m->type->forward_stream != NULL && m->type->stream_state_floats != NULL;
}

sb_tensor *sb_model_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                  real *const *states)
{
    SB_ASSERT(!g->record && sb_model_can_stream(m));
    const int was = sb_model_precision_enter(m);
    sb_tensor *x = m->stack != NULL ? sb_lm_stack_hidden_stream(g, m, input, states)
                                    : sb_recnet_hidden_stream(g, m, input, states);
    sb_gemm_bf16_suspend(was);
    return x;
}

sb_tensor *sb_model_forward(sb_graph *g, const sb_model *m, sb_tensor *input)
{
    sb_tensor *x = sb_model_hidden(g, m, input, 0);
    const int was = sb_model_precision_enter(m);
    sb_tensor *y =
        sb_linear(g, x, m->dec_w, m->stack != NULL ? NULL : m->dec_b); /* stack: no bias */
    sb_gemm_bf16_suspend(was);
    return y;
}

sb_tensor *sb_model_loss(sb_graph *g, const sb_model *m, sb_tensor *input, sb_head_loss *h)
{
    sb_tensor *x = sb_model_hidden(g, m, input, 0);
    const int was = sb_model_precision_enter(m);
    sb_tensor *loss =
        sb_linear_cross_entropy(g, x, m->dec_w, m->stack != NULL ? NULL : m->dec_b, h);
    sb_gemm_bf16_suspend(was);
    return loss;
}

static double model_flops(const sb_layer_type *type, const sb_model_config *c, int T)
{
    if (type != NULL && type->stack != NULL)
        return sb_lm_stack_flops(type, c, T);
    return sb_recnet_flops(type, c, T);
}

double sb_model_flops_per_token(const sb_model *m, int T)
{
    return model_flops(m->type, &m->cfg, T);
}

double sb_model_config_flops_per_token(const sb_model_config *c, int T)
{
    return model_flops(sb_layer_type_find(c->model), c, T);
}

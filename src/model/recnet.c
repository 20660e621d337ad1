/* recnet.c - the reference's RecNet wrapper around any registered layer (see model.h; the
 * facade model.c calls it for every layer type without a stack descriptor). Derivation of
 * its backward: docs/models/recnet.md. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "model/recnet.h"
#include "ops/ops.h"

#define LAYERNORM_EPS ((real)1e-5)

sb_status sb_recnet_register(const sb_layer_type *type, const sb_model_config *cfg, sb_model **out,
                             sb_error *err)
{
    *out = NULL;
    sb_model *m = sb_calloc(1, sizeof *m);
    if (m == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating the model");
    const int L = cfg->n_layers, D = cfg->d_model, I = cfg->d_input, C = cfg->d_output;
    m->cfg = *cfg;
    m->type = type;
    m->layer_first = sb_calloc((size_t)L, sizeof *m->layer_first);
    m->norm_w = sb_calloc((size_t)L, sizeof *m->norm_w);
    m->norm_b = sb_calloc((size_t)L, sizeof *m->norm_b);
    *out = m; /* from here on the facade frees it on failure */
    if (!m->layer_first || !m->norm_w || !m->norm_b)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating the model");
    sb_params *ps = &m->params;
    sb_params_init(ps);
    /* state_dict order: encoder, norms.*, layers.*, decoder; draws in construction order:
     * encoder, then each layer, then the decoder (the norms draw nothing) */
    int enc_w_shape[2] = {D, I}, vec_d[1] = {D};
    ps->draw_module = 0;
    sb_params_add(ps, "encoder.weight", 2, enc_w_shape, SB_INIT_KAIMING, I, 0);
    sb_params_add(ps, "encoder.bias", 1, vec_d, SB_INIT_FANIN, I, 1);
    char name[SB_PARAM_NAME_MAX];
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "norms.%d.weight", l);
        sb_params_add(ps, name, 1, vec_d, SB_INIT_CONST, 1.0, 0);
        snprintf(name, sizeof name, "norms.%d.bias", l);
        sb_params_add(ps, name, 1, vec_d, SB_INIT_CONST, 0.0, 0);
    }
    for (int l = 0; l < L; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "layers.%d.", l);
        ps->draw_module = 1 + l;
        m->layer_first[l] = ps->n;
        type->add_params(ps, prefix, cfg);
    }
    int dec_w_shape[2] = {C, D}, vec_c[1] = {C};
    ps->draw_module = 1 + L;
    sb_params_add(ps, "decoder.weight", 2, dec_w_shape, SB_INIT_KAIMING, D, 0);
    sb_params_add(ps, "decoder.bias", 1, vec_c, SB_INIT_FANIN, D, 1);
    return SB_OK;
}

sb_status sb_recnet_bind_initialise(sb_model *m, uint64_t seed, sb_error *err)
{
    sb_params *ps = &m->params;
    const int L = m->cfg.n_layers;
    m->enc_w = &ps->p[0].tensor;
    m->enc_b = &ps->p[1].tensor;
    for (int l = 0; l < L; l++) {
        m->norm_w[l] = &ps->p[2 + 2 * l].tensor;
        m->norm_b[l] = &ps->p[2 + 2 * l + 1].tensor;
    }
    m->dec_w = &ps->p[ps->n - 2].tensor;
    m->dec_b = &ps->p[ps->n - 1].tensor;
    return sb_params_initialise(ps, seed, err);
}

/* One block: x = LayerNorm(x + Dropout(layer(x))); cap (may be NULL) keeps its tensors. */
static sb_tensor *recnet_block(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                               sb_model_capture *cap)
{
    sb_tensor *z = m->type->forward(g, m, l, x);
    if (cap != NULL) {
        cap->layer_in[l] = x;
        cap->layer_out[l] = z;
    }
    z = sb_dropout(g, z, (real)m->cfg.dropout);
    sb_tensor *y = sb_layernorm(g, sb_add(g, x, z), m->norm_w[l], m->norm_b[l], LAYERNORM_EPS);
    if (cap != NULL)
        cap->block_out[l + 1] = y;
    return y;
}

sb_tensor *sb_recnet_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                    sb_model_capture *cap)
{
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    cap->block_out[0] = x;
    for (int l = 0; l < m->cfg.n_layers; l++)
        x = recnet_block(g, m, l, x, cap);
    return x;
}

sb_tensor *sb_recnet_hidden(sb_graph *g, const sb_model *m, sb_tensor *input, int keep_only_output)
{
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    if (!keep_only_output) {
        for (int l = 0; l < m->cfg.n_layers; l++)
            x = recnet_block(g, m, l, x, NULL);
        return x;
    }
    /* evaluation: two buffers hold the running activation; everything a layer allocates
     * after them is released before the next layer, unless a later layer reads what an
     * earlier one made */
    SB_ASSERT(!g->record);
    const int release = !m->type->layers_share_tensors;
    real *buf[2];
    buf[0] = sb_graph_alloc(g, x->size * sizeof(real));
    buf[1] = sb_graph_alloc(g, x->size * sizeof(real));
    memcpy(buf[0], x->data, x->size * sizeof(real));
    x = sb_tensor_wrap(g, buf[0], 3, x->shape);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sb_arena_mark mark = sb_arena_get_mark(&g->arena);
        sb_tensor *y = recnet_block(g, m, l, x, NULL);
        real *dst = buf[(l + 1) % 2];
        memcpy(dst, y->data, y->size * sizeof(real));
        int shape[3] = {y->shape[0], y->shape[1], y->shape[2]};
        if (release)
            sb_arena_reset_to(&g->arena, mark);
        x = sb_tensor_wrap(g, dst, 3, shape);
    }
    return x;
}

sb_tensor *sb_recnet_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                   real *const *states)
{
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sb_tensor *z = m->type->forward_stream(g, m, l, x, states[l]);
        x = sb_layernorm(g, sb_add(g, x, z), m->norm_w[l], m->norm_b[l], LAYERNORM_EPS);
    }
    return x;
}

double sb_recnet_flops(const sb_layer_type *type, const sb_model_config *c, int T)
{
    double wrapper = 2.0 * c->d_input * c->d_model + 2.0 * c->d_model * c->d_output +
                     10.0 * c->d_model * c->n_layers;
    double layer =
        type != NULL && type->flops_per_token != NULL ? type->flops_per_token(c, T) : 0.0;
    return wrapper + c->n_layers * layer;
}

/* gru.c - PyTorch nn.GRU as the reference's RecNet uses it (one layer, hidden = input
 * width, h0 = 0). Spec: spec/models-ssm.md section 8. */
#include <math.h>

#include "selectivbench/model.h"
#include "selectivbench/ops.h"

enum { P_W_IH, P_W_HH, P_B_IH, P_B_HH, P_COUNT };

static int gru_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model;
    const double bound = 1.0 / sqrt((double)D); /* stdv = 1 / sqrt(hidden_size) */
    int w[2] = {3 * D, D}, b[1] = {3 * D};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "weight_ih_l0", 2, w, SB_INIT_UNIFORM, bound, 0);
    sb_params_add_named(ps, prefix, "weight_hh_l0", 2, w, SB_INIT_UNIFORM, bound, 1);
    sb_params_add_named(ps, prefix, "bias_ih_l0", 1, b, SB_INIT_UNIFORM, bound, 2);
    sb_params_add_named(ps, prefix, "bias_hh_l0", 1, b, SB_INIT_UNIFORM, bound, 3);
    return ps->n - first;
}

static sb_tensor *gru_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return sb_gru(g, x, sb_model_param(m, l, P_W_IH), sb_model_param(m, l, P_W_HH),
                  sb_model_param(m, l, P_B_IH), sb_model_param(m, l, P_B_HH));
}

static sb_tensor *gru_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     real *state)
{
    return sb_gru_stream(g, x, sb_model_param(m, l, P_W_IH), sb_model_param(m, l, P_W_HH),
                         sb_model_param(m, l, P_B_IH), sb_model_param(m, l, P_B_HH), state);
}

static size_t gru_stream_state(const sb_model_config *cfg)
{
    return (size_t)cfg->d_model;
}

static double gru_flops(const sb_model_config *cfg, int T)
{
    (void)T;
    double D = cfg->d_model;
    return 12.0 * D * D + 20.0 * D;
}

static double gru_state(const sb_model_config *cfg)
{
    return cfg->d_model;
}

const sb_layer_type sb_layer_gru = {
    .name = "gru",
    .summary = "PyTorch nn.GRU, one layer per block (the repository's classic RNN baseline)",
    .taxonomy = {"data-dependent per channel (update z, reset r)",
                 "nonlinear: tanh of a dense W_hh h (not a linear recurrence)", "full", "none",
                 "n/a", "d"},
    .check = NULL,
    .add_params = gru_add_params,
    .forward = gru_forward,
    .flops_per_token = gru_flops,
    .state_size = gru_state,
    .stream_state_floats = gru_stream_state,
    .forward_stream = gru_forward_stream,
};

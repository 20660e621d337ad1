/* gru.c - PyTorch nn.GRU as the reference's RecNet uses it (one layer, hidden = input
 * width, h0 = 0). Spec: docs/models/gru.md. */
#include <math.h>

#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"

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

/* probe: the update gate z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz) (the share of
 * h_{t-1} kept), recomputed from the layer's outputs h; mean over the channels of each of
 * n_head channel groups (one group when n_head does not divide D). */
static sb_tensor *gru_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                  const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    const int G = m->cfg.n_head > 0 && D % m->cfg.n_head == 0 ? m->cfg.n_head : 1, w = D / G;
    sb_tensor *w_ih = sb_model_param(m, l, P_W_IH), *w_hh = sb_model_param(m, l, P_W_HH);
    sb_tensor *b_ih = sb_model_param(m, l, P_B_IH), *b_hh = sb_model_param(m, l, P_B_HH);
    sb_tensor *h = sb_gru(g, x, w_ih, w_hh, b_ih, b_hh);
    sb_tensor *h_prev = sb_tensor_zeros(g, 3, x->shape); /* h shifted by one frame, h_-1 = 0 */
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            for (int j = 0; j < D; j++)
                h_prev->data[((size_t)b * T + t) * D + j] =
                    h->data[((size_t)b * T + t - 1) * D + j];
    sb_tensor *gi = sb_linear(g, x, w_ih, b_ih), *gh = sb_linear(g, h_prev, w_hh, b_hh);
    int shape[3] = {B, T, G};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int q = 0; q < G; q++) {
            double sum = 0.0;
            for (int j = q * w; j < (q + 1) * w; j++) {
                const double a =
                    (double)(gi->data[r * 3 * D + D + j] + gh->data[r * 3 * D + D + j]);
                sum += sb_probe_sigmoid(a);
            }
            out->data[r * G + q] = (real)(sum / w);
        }
    *desc = (sb_gate_desc){.n_kinds = 1, .n_groups = G, .kind = {"update z (keep)"}, .hi = {1.0}};
    return out;
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
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_NONLINEAR, SB_UPDATE_FULL,
             SB_MEMORY_CONSTANT, "D"},
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
    .probe_gates = gru_probe_gates,
};

/* mamba.c - mamba_ssm's Mamba block ("Mamba-1", mamba_simple.py at v2.2.4) exactly as the
 * reference's RecNet builds it: d_state = --d_state, d_conv 4, expand 2, dt_rank
 * ceil(d_model / 16), conv bias on, no projection biases.
 *
 *   [x | z] = X W_in^T                       [B, T, E] each, E = 2 D
 *   u = silu(causal depthwise conv(x))       kernel 4, bias
 *   [dt_low | B | C] = u W_x^T               R, N, N columns
 *   delta = dt_low W_dt^T                    (dt_proj.bias is added inside the scan)
 *   y = selective_scan(u, delta, A = -exp(A_log), B, C, D) * silu(z)
 *   out = y W_out^T
 * Spec: docs/models/mamba.md; derivations and the reference's quirks:
 * docs/models/mamba.md.
 */
#include <math.h>

#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "layers/ssm_init.h"
#include "ops/ops.h"
#include "ops/ops_ssm.h"

#define D_CONV 4

/* parameters in state_dict order: the module's own, then its children */
enum { P_A_LOG, P_D, P_IN_W, P_CONV_W, P_CONV_B, P_X_W, P_DT_W, P_DT_B, P_OUT_W, P_COUNT };

static int dt_rank(int d_model)
{
    return (d_model + 15) / 16; /* math.ceil(d_model / 16) */
}

/* A_log[e, n] = log(n + 1) in float32 (S4D-real), the same for every channel */
static void init_a_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)rng, (void)ctx;
    const int E = p->shape[0], N = p->shape[1];
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++)
            data[(size_t)e * (size_t)N + (size_t)n] = (real)logf((float)(n + 1));
}

/* dt_proj.weight: nn.Linear's default init draws the weight and then the bias, and
 * Mamba overwrites both; only then is the weight drawn again from U(-R^-1/2, R^-1/2). */
static void init_dt_weight(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    const int E = p->shape[0], R = p->shape[1];
    const double kaiming = sb_torch_kaiming_bound((double)R);
    sb_torch_uniform(rng, data, p->size, -kaiming, kaiming); /* default weight */
    sb_torch_uniform(rng, data, (size_t)E, -1.0 / sqrt((double)R),
                     1.0 / sqrt((double)R)); /* bias */
    const double std = 1.0 / sqrt((double)R);
    sb_torch_uniform(rng, data, p->size, -std, std);
}

static sb_status mamba_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->d_state < 1 || cfg->d_state > SB_SSM_MAX_STATE)
        return sb_error_set(err, SB_ERR_INVALID, "mamba: --d_state %d must lie in [1, %d]",
                            cfg->d_state, SB_SSM_MAX_STATE);
    return SB_OK;
}

static int mamba_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, E = 2 * D, N = cfg->d_state, R = dt_rank(D);
    int en[2] = {E, N}, e1[1] = {E}, in_w[2] = {2 * E, D}, conv_w[3] = {E, 1, D_CONV};
    int x_w[2] = {R + 2 * N, E}, dt_w[2] = {E, R}, out_w[2] = {D, E};
    int first = ps->n;
    /* ranks = construction (draw) order: in_proj, conv1d (weight, bias), x_proj, dt_proj
     * (default weight and bias, weight again), torch.rand for the dt bias, out_proj.
     * mamba_ssm marks A_log and D _no_weight_decay, but the reference's optimiser ignores
     * the mark (one group, --wd for all): no SB_PARAM_NO_DECAY here. */
    sb_param *p = sb_params_add_named(ps, prefix, "A_log", 2, en, SB_INIT_CUSTOM, 0.0, 100);
    p->custom = init_a_log;
    sb_params_add_named(ps, prefix, "D", 1, e1, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "in_proj.weight", 2, in_w, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "conv1d.weight", 3, conv_w, SB_INIT_KAIMING, D_CONV, 1);
    sb_params_add_named(ps, prefix, "conv1d.bias", 1, e1, SB_INIT_FANIN, D_CONV, 2);
    sb_params_add_named(ps, prefix, "x_proj.weight", 2, x_w, SB_INIT_KAIMING, E, 3);
    p = sb_params_add_named(ps, prefix, "dt_proj.weight", 2, dt_w, SB_INIT_CUSTOM, 0.0, 4);
    p->custom = init_dt_weight;
    p = sb_params_add_named(ps, prefix, "dt_proj.bias", 1, e1, SB_INIT_CUSTOM, 0.0, 5);
    p->custom = ssm_init_dt_bias;
    sb_params_add_named(ps, prefix, "out_proj.weight", 2, out_w, SB_INIT_KAIMING, E, 6);
    return ps->n - first;
}

/* The projections and the convolution; leaves u, delta, B, C, z for the scan. */
static void mamba_inputs(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *conv_history,
                         sb_tensor **u, sb_tensor **delta, sb_tensor **Bm, sb_tensor **Cm,
                         sb_tensor **z)
{
    const int D = m->cfg.d_model, E = 2 * D, N = m->cfg.d_state, R = dt_rank(D);
    sb_tensor *xz = sb_linear(g, x, sb_model_param(m, l, P_IN_W), NULL);
    sb_tensor *parts[3];
    int xz_w[2] = {E, E};
    sb_split_cols(g, xz, 2, xz_w, parts);
    *z = parts[1];
    sb_tensor *conv_w = sb_model_param(m, l, P_CONV_W), *conv_b = sb_model_param(m, l, P_CONV_B);
    *u = sb_conv1d_silu(g, parts[0], conv_w, conv_b, conv_history);
    sb_tensor *x_dbl = sb_linear(g, *u, sb_model_param(m, l, P_X_W), NULL);
    int dbl_w[3] = {R, N, N};
    sb_split_cols(g, x_dbl, 3, dbl_w, parts);
    *Bm = parts[1];
    *Cm = parts[2];
    *delta = sb_linear(g, parts[0], sb_model_param(m, l, P_DT_W), NULL);
}

static sb_tensor *mamba_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    sb_tensor *u, *delta, *Bm, *Cm, *z;
    mamba_inputs(g, m, l, x, NULL, &u, &delta, &Bm, &Cm, &z);
    sb_tensor *y =
        sb_selective_scan(g, u, delta, sb_model_param(m, l, P_DT_B), sb_model_param(m, l, P_A_LOG),
                          Bm, Cm, sb_model_param(m, l, P_D), z, NULL);
    return sb_linear(g, y, sb_model_param(m, l, P_OUT_W), NULL);
}

/* streaming state per layer: conv history [B][K-1][E], then the scan state [B][E][N] */
static size_t mamba_stream_state(const sb_model_config *cfg)
{
    const size_t E = 2 * (size_t)cfg->d_model;
    return (D_CONV - 1) * E + E * (size_t)cfg->d_state;
}

static sb_tensor *mamba_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                       real *state)
{
    const size_t B = (size_t)x->shape[0], E = 2 * (size_t)m->cfg.d_model;
    real *history = state, *ssm = state + B * (D_CONV - 1) * E;
    sb_tensor *u, *delta, *Bm, *Cm, *z;
    mamba_inputs(g, m, l, x, history, &u, &delta, &Bm, &Cm, &z);
    sb_tensor *y =
        sb_selective_scan(g, u, delta, sb_model_param(m, l, P_DT_B), sb_model_param(m, l, P_A_LOG),
                          Bm, Cm, sb_model_param(m, l, P_D), z, ssm);
    return sb_linear(g, y, sb_model_param(m, l, P_OUT_W), NULL);
}

/* probe: the per-frame decay exp(dt A) of the scan, dt = softplus(delta + dt_bias) and
 * A = -exp(A_log), averaged over the N states of each channel and then over the channels of
 * each of n_head channel groups (one group when n_head does not divide E). */
static sb_tensor *mamba_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                    const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int B = x->shape[0], T = x->shape[1], E = 2 * m->cfg.d_model, N = m->cfg.d_state;
    const int G = m->cfg.n_head > 0 && E % m->cfg.n_head == 0 ? m->cfg.n_head : 1, w = E / G;
    sb_tensor *u, *delta, *Bm, *Cm, *z;
    mamba_inputs(g, m, l, x, NULL, &u, &delta, &Bm, &Cm, &z);
    const real *dt_bias = sb_model_param(m, l, P_DT_B)->data;
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    int shape[3] = {B, T, G};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int q = 0; q < G; q++) {
            double sum = 0.0;
            for (int e = q * w; e < (q + 1) * w; e++) {
                const double dt = sb_probe_softplus((double)(delta->data[r * E + e] + dt_bias[e]));
                for (int n = 0; n < N; n++)
                    sum += exp(-dt * exp((double)A_log[(size_t)e * N + n]));
            }
            out->data[r * G + q] = (real)(sum / ((double)w * N));
        }
    *desc = (sb_gate_desc){.n_kinds = 1, .n_groups = G, .kind = {"decay exp(dt*A)"}, .hi = {1.0}};
    return out;
}

/* probe: the stream state holds the conv history [B][K-1][E], then the scan state */
static void mamba_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const size_t E = 2 * (size_t)cfg->d_model;
    *history = (D_CONV - 1) * E;
    *count = E * (size_t)cfg->d_state;
}

static double mamba_flops(const sb_model_config *cfg, int T)
{
    (void)T;
    /* docs/spec/flops.md: 12 D^2 + 8 D R + 20 D N + 40 D */
    const double D = cfg->d_model, N = cfg->d_state, R = dt_rank(cfg->d_model);
    return 12.0 * D * D + 8.0 * D * R + 20.0 * D * N + 40.0 * D;
}

static double mamba_state(const sb_model_config *cfg)
{
    const double E = 2.0 * cfg->d_model;
    return E * cfg->d_state + (D_CONV - 1) * E;
}

const sb_layer_type sb_layer_mamba = {
    .name = "mamba",
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "2D N + 3 x 2D (conv)"},
    .summary = "Mamba (selective SSM): input-dependent dt, B, C; diagonal A per channel; z gate",
    .taxonomy = {"input-dependent (dt, B, C)", "diagonal", "1 per channel", "none", "no",
                 "d_state per channel (2 d_model x d_state per layer)"},
    .check = mamba_check,
    .add_params = mamba_add_params,
    .forward = mamba_forward,
    .flops_per_token = mamba_flops,
    .state_size = mamba_state,
    .stream_state_floats = mamba_stream_state,
    .forward_stream = mamba_forward_stream,
    .probe_gates = mamba_probe_gates,
    .stream_recurrent = mamba_stream_recurrent,
};

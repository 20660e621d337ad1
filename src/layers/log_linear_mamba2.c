/* log_linear_mamba2.c - fla's LogLinearMamba2 (fla/layers/log_linear_mamba2.py, fla commit
 * bc3b101d; Guo et al. 2025, "Log-Linear Attention") inside RecNet. Arguments:
 * hidden_size = D, num_heads = H = n_head (as the other fla layers take the config's heads),
 * head_dim = 2D / H (the layer needs num_heads * head_dim = expand * hidden_size, expand 2),
 * state_size = --d_state (as our mamba2), every other argument at fla's default: n_groups 1,
 * conv_kernel 4 without conv bias, projection biases on, D per head, gated RMSNorm
 * (norm_before_gate False, one group, eps 1e-5), 15 level weights per head (fla's
 * MAX_NUM_LEVELS for 16384 frames), A = 1..H.
 *
 *   [z | xBC | dt | dl] = U W_in^T + b_in         E, E + 2N, H, 15 H columns (E = 2 D)
 *   [x | B | C] = silu(causal depthwise conv(xBC))    kernel 4, no bias
 *   y = log-linear SSD(x, dt + dt_bias, A = -exp(A_log), B, C, lam = softplus(L dl)) + D x
 *   o = RMSNormGated(y, z);   out = o W_out^T + b_out
 * The log-linear SSD is Mamba2's SSD whose causal mask is split into Fenwick levels, each
 * scaled by its own data-dependent weight lam_t^(l) (ops_log_linear.h). Training runs the
 * masked quadratic form in query blocks of 64 frames (fla's chunk size); evaluation streams
 * with the O(log T) level states. Docs: docs/models/log_linear_mamba2.md.
 */
#include <math.h>

#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "layers/ssm_init.h"
#include "ops/ops.h"
#include "ops/ops_log_linear.h"
#include "ops/ops_ssm.h"

#define D_CONV 4
#define BLOCK 64  /* query block of the quadratic form (fla's chunk_size) */
#define LEVELS 15 /* fla: ceil(log2(2048 * 8)) + 1 */
#define NORM_EPS ((real)1e-5)

/* parameters in state_dict order: the module's own, then its children */
enum {
    P_DT_BIAS,
    P_A_LOG,
    P_L,
    P_D,
    P_CONV_W,
    P_IN_W,
    P_IN_B,
    P_NORM_W,
    P_OUT_W,
    P_OUT_B,
    P_COUNT
};

/* A_log = log(arange(1, H + 1)) in float32 (draws nothing) */
static void init_a_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx, (void)rng;
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)logf((float)(i + 1));
}

static sb_status llm2_check(const sb_model_config *cfg, sb_error *err)
{
    sb_status heads = sb_layer_check_heads("log_linear_mamba2", "the inner width", 2 * cfg->d_model,
                                           cfg->n_head, err);
    if (heads != SB_OK)
        return heads;
    if (cfg->d_state < 1)
        return sb_error_set(err, SB_ERR_INVALID, "log_linear_mamba2: --d_state %d must be >= 1",
                            cfg->d_state);
    return SB_OK;
}

static int llm2_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, E = 2 * D, N = cfg->d_state, H = cfg->n_head;
    int h1[1] = {H}, e1[1] = {E}, lvl[2] = {H, LEVELS};
    int in_w[2] = {2 * E + 2 * N + H * (LEVELS + 1), D}, in_b[1] = {in_w[0]};
    int conv_w[3] = {E + 2 * N, 1, D_CONV}, out_w[2] = {D, E}, out_b[1] = {D};
    int first = ps->n;
    /* ranks = construction (draw) order: conv1d.weight, in_proj (weight, bias), torch.rand
     * for dt_bias, out_proj (weight, bias); A_log, L, D and the norm weight draw nothing.
     * The _no_weight_decay marks are ignored by the reference's optimiser (one group). */
    sb_param *p = sb_params_add_named(ps, prefix, "dt_bias", 1, h1, SB_INIT_CUSTOM, 0.0, 3);
    p->custom = ssm_init_dt_bias;
    p = sb_params_add_named(ps, prefix, "A_log", 1, h1, SB_INIT_CUSTOM, 0.0, 100);
    p->custom = init_a_log;
    sb_params_add_named(ps, prefix, "L", 2, lvl, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "D", 1, h1, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "conv1d.weight", 3, conv_w, SB_INIT_KAIMING, D_CONV, 0);
    sb_params_add_named(ps, prefix, "in_proj.weight", 2, in_w, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "in_proj.bias", 1, in_b, SB_INIT_FANIN, D, 2);
    sb_params_add_named(ps, prefix, "norm.weight", 1, e1, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "out_proj.weight", 2, out_w, SB_INIT_KAIMING, E, 4);
    sb_params_add_named(ps, prefix, "out_proj.bias", 1, out_b, SB_INIT_FANIN, E, 5);
    return ps->n - first;
}

/* The whole block; conv_history, levels and pos are NULL in training (the quadratic form),
 * the streaming state otherwise (the level recurrence). */
static sb_tensor *llm2_block(sb_graph *g, const sb_model *m, int l, sb_tensor *u,
                             real *conv_history, real *levels, real *pos)
{
    const int D = m->cfg.d_model, E = 2 * D, N = m->cfg.d_state, H = m->cfg.n_head;
    sb_tensor *proj = sb_linear(g, u, sb_model_param(m, l, P_IN_W), sb_model_param(m, l, P_IN_B));
    sb_tensor *parts[4];
    int in_w[4] = {E, E + 2 * N, H, H * LEVELS};
    sb_split_cols(g, proj, 4, in_w, parts);
    sb_tensor *z = parts[0], *dt = parts[2], *dl = parts[3];
    int xbc_w[3] = {E, N, N};
    sb_split_cols(g,
                  sb_conv1d_silu(g, parts[1], sb_model_param(m, l, P_CONV_W), NULL, conv_history),
                  3, xbc_w, parts);
    sb_tensor *dt_bias = sb_model_param(m, l, P_DT_BIAS), *A_log = sb_model_param(m, l, P_A_LOG);
    sb_tensor *L = sb_model_param(m, l, P_L), *Dp = sb_model_param(m, l, P_D);
    sb_tensor *y = levels == NULL
                       ? sb_log_linear_ssd(g, parts[0], dt, dt_bias, A_log, parts[1], parts[2], dl,
                                           L, Dp, BLOCK)
                       : sb_log_linear_ssd_stream(g, parts[0], dt, dt_bias, A_log, parts[1],
                                                  parts[2], dl, L, Dp, levels, pos);
    sb_tensor *o = sb_rmsnorm_gate_first(g, y, z, sb_model_param(m, l, P_NORM_W), NORM_EPS);
    return sb_linear(g, o, sb_model_param(m, l, P_OUT_W), sb_model_param(m, l, P_OUT_B));
}

static sb_tensor *llm2_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return llm2_block(g, m, l, x, NULL, NULL, NULL);
}

/* per sample: conv history [K-1][E+2N], the level states [H][LEVELS-1][P][N] (= 14 E N),
 * the position; laid out field by field over the B samples */
static size_t history_floats(const sb_model_config *cfg)
{
    return (D_CONV - 1) * (2 * (size_t)cfg->d_model + 2 * (size_t)cfg->d_state);
}

static size_t level_floats(const sb_model_config *cfg)
{
    return (LEVELS - 1) * 2 * (size_t)cfg->d_model * (size_t)cfg->d_state;
}

static size_t llm2_stream_state(const sb_model_config *cfg)
{
    return history_floats(cfg) + level_floats(cfg) + 1;
}

static sb_tensor *llm2_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                      real *state)
{
    const size_t B = (size_t)x->shape[0];
    real *levels = state + B * history_floats(&m->cfg);
    return llm2_block(g, m, l, x, state, levels, levels + B * level_floats(&m->cfg));
}

static void llm2_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    *history = history_floats(cfg);
    *count = level_floats(cfg);
}

/* probe: the per-head decay a_t = exp(dt_t A), dt_t = softplus(dt_in + dt_bias), A =
 * -exp(A_log), dt_in the H columns after z and xBC of the input projection */
static sb_tensor *llm2_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                   const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int B = x->shape[0], T = x->shape[1], E = 2 * m->cfg.d_model, N = m->cfg.d_state;
    const int H = m->cfg.n_head, W = 2 * E + 2 * N + H * (LEVELS + 1);
    sb_tensor *proj = sb_linear(g, x, sb_model_param(m, l, P_IN_W), sb_model_param(m, l, P_IN_B));
    const real *dt_bias = sb_model_param(m, l, P_DT_BIAS)->data;
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            const double dt =
                sb_probe_softplus((double)(proj->data[r * W + 2 * E + 2 * N + h] + dt_bias[h]));
            out->data[r * H + h] = (real)exp(-dt * exp((double)A_log[h]));
        }
    *desc = (sb_gate_desc){.n_kinds = 1, .n_groups = H, .kind = {"decay exp(dt*A)"}, .hi = {1.0}};
    return out;
}

static double llm2_flops(const sb_model_config *cfg, int T)
{
    /* projections 2 D (2E + 2N + 16H) + 2 E D, conv and SiLU ~ 10 (E + 2N); the masked
     * quadratic form over (T + 1) / 2 keys on average: C . B (2N), the weight (4 per head:
     * decay, level, two products), W v (2E); D skip, gated norm ~ 12 E */
    const double D = cfg->d_model, N = cfg->d_state, H = cfg->n_head, E = 2.0 * D;
    const double keys = T > 0 ? (T + 1) / 2.0 : 1.0;
    return 2.0 * D * (2 * E + 2 * N + H * (LEVELS + 1)) + 2.0 * E * D + 10.0 * (E + 2 * N) +
           keys * (2 * N + 4 * H + 2 * E) + 12.0 * E;
}

/* What evaluation carries per layer at its capacity of 16384 frames: the conv history and 14
 * level states of headdim x d_state per head. At T frames only ceil(log2 T) levels hold
 * anything: the memory grows as log T. */
static double llm2_state(const sb_model_config *cfg)
{
    return (double)level_floats(cfg) + (double)history_floats(cfg);
}

const sb_layer_type sb_layer_log_linear_mamba2 = {
    .name = "log_linear_mamba2",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_LOG, "ceil(log2 T) levels x 2D N + 3 (2D + 2N) (conv)"},
    .summary = "Log-linear Mamba2 (fla): SSD mask split into Fenwick levels with data-dependent "
               "weights; O(log T) states",
    .taxonomy = {"input-dependent (dt, B, C, level weights)", "scalar per head, per level",
                 "1 per head", "gated RMSNorm", "no",
                 "ceil(log2 T) levels x headdim x d_state (grows as log T)"},
    .check = llm2_check,
    .add_params = llm2_add_params,
    .forward = llm2_forward,
    .flops_per_token = llm2_flops,
    .state_size = llm2_state,
    .stream_state_floats = llm2_stream_state,
    .forward_stream = llm2_forward_stream,
    .probe_gates = llm2_probe_gates,
    .stream_recurrent = llm2_stream_recurrent,
    .test_chunk = BLOCK,
};

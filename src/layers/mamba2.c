/* mamba2.c - mamba_ssm's Mamba2 block (modules/mamba2.py at v2.2.4) exactly as the
 * reference's RecNet builds it: d_state = --d_state, d_conv 4, expand 2,
 * headdim = d_model / n_head, so M = E / headdim = 2 n_head SSM heads; one group (B and C
 * shared by every head), chunk size 256, gated RMSNorm, no projection biases.
 *
 *   [z | xBC | dt] = U W_in^T                E, E + 2N, M columns (E = 2 D)
 *   [x | B | C] = silu(causal depthwise conv(xBC))    kernel 4, bias
 *   y = SSD(x, dt + dt_bias, A = -exp(A_log), B, C) + D x      per head, chunked
 *   o = RMSNormGated(y, z)                   gate first, one group over all E channels
 *   out = o W_out^T
 * Spec: docs/models/mamba2.md; derivations and the reference's quirks:
 * docs/models/mamba2.md.
 */
#include <math.h>

#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "layers/ssm_init.h"
#include "ops/ops.h"
#include "ops/ops_ssm.h"

#define D_CONV 4
#define CHUNK 256 /* Mamba2's default chunk_size */
#define NORM_EPS ((real)1e-5)

/* parameters in state_dict order: the module's own, then its children */
enum { P_DT_BIAS, P_A_LOG, P_D, P_IN_W, P_CONV_W, P_CONV_B, P_NORM_W, P_OUT_W, P_COUNT };

static int n_ssm_heads(const sb_model_config *cfg)
{
    /* nheads = d_ssm / headdim = 2 d_model / (d_model / n_head) */
    return 2 * cfg->d_model / (cfg->d_model / cfg->n_head);
}

/* A = U(1, 16) per head (torch uniform_ on float32), A_log = log(A) in float32 */
static void init_a_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    sb_torch_uniform(rng, data, p->size, 1.0, 16.0);
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)logf((float)data[i]);
}

static sb_status mamba2_check(const sb_model_config *cfg, sb_error *err)
{
    sb_status heads = sb_layer_check_heads("mamba2", "--feat_size", cfg->d_model, cfg->n_head, err);
    if (heads != SB_OK)
        return heads;
    if ((2 * cfg->d_model) % (cfg->d_model / cfg->n_head) != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "mamba2: the inner width %d is not a multiple of the head width %d",
                            2 * cfg->d_model, cfg->d_model / cfg->n_head);
    if (cfg->d_state < 1 || cfg->d_state > SB_SSM_MAX_STATE)
        return sb_error_set(err, SB_ERR_INVALID, "mamba2: --d_state %d must lie in [1, %d]",
                            cfg->d_state, SB_SSM_MAX_STATE);
    return SB_OK;
}

static int mamba2_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, E = 2 * D, N = cfg->d_state, M = n_ssm_heads(cfg);
    int m1[1] = {M}, e1[1] = {E}, in_w[2] = {2 * E + 2 * N + M, D};
    int conv_w[3] = {E + 2 * N, 1, D_CONV}, conv_b[1] = {E + 2 * N}, out_w[2] = {D, E};
    int first = ps->n;
    /* ranks = construction (draw) order: in_proj, conv1d (weight, bias), torch.rand for
     * dt_bias, uniform_(1, 16) for A, out_proj; D and the norm weight draw nothing. The
     * _no_weight_decay marks of mamba_ssm are ignored by the reference's optimiser (one
     * group, --wd for all): no SB_PARAM_NO_DECAY here. */
    sb_param *p = sb_params_add_named(ps, prefix, "dt_bias", 1, m1, SB_INIT_CUSTOM, 0.0, 3);
    p->custom = ssm_init_dt_bias;
    p = sb_params_add_named(ps, prefix, "A_log", 1, m1, SB_INIT_CUSTOM, 0.0, 4);
    p->custom = init_a_log;
    sb_params_add_named(ps, prefix, "D", 1, m1, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "in_proj.weight", 2, in_w, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "conv1d.weight", 3, conv_w, SB_INIT_KAIMING, D_CONV, 1);
    sb_params_add_named(ps, prefix, "conv1d.bias", 1, conv_b, SB_INIT_FANIN, D_CONV, 2);
    sb_params_add_named(ps, prefix, "norm.weight", 1, e1, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "out_proj.weight", 2, out_w, SB_INIT_KAIMING, E, 5);
    return ps->n - first;
}

/* The whole block with SSD chunks of `chunk` frames; conv_history and ssm_state are NULL
 * in training, the streaming state otherwise. */
static sb_tensor *mamba2_block(sb_graph *g, const sb_model *m, int l, sb_tensor *u, int chunk,
                               real *conv_history, real *ssm_state)
{
    const int D = m->cfg.d_model, E = 2 * D, N = m->cfg.d_state, M = n_ssm_heads(&m->cfg);
    sb_tensor *zxbcdt = sb_linear(g, u, sb_model_param(m, l, P_IN_W), NULL);
    sb_tensor *parts[3];
    int in_w[3] = {E, E + 2 * N, M};
    sb_split_cols(g, zxbcdt, 3, in_w, parts);
    sb_tensor *z = parts[0], *dt = parts[2];
    sb_tensor *conv_w = sb_model_param(m, l, P_CONV_W), *conv_b = sb_model_param(m, l, P_CONV_B);
    int xbc_w[3] = {E, N, N};
    sb_split_cols(g, sb_conv1d_silu(g, parts[1], conv_w, conv_b, conv_history), 3, xbc_w, parts);
    sb_tensor *y =
        sb_ssd(g, parts[0], dt, sb_model_param(m, l, P_DT_BIAS), sb_model_param(m, l, P_A_LOG),
               parts[1], parts[2], sb_model_param(m, l, P_D), chunk, ssm_state);
    sb_tensor *o = sb_rmsnorm_gate_first(g, y, z, sb_model_param(m, l, P_NORM_W), NORM_EPS);
    return sb_linear(g, o, sb_model_param(m, l, P_OUT_W), NULL);
}

static sb_tensor *mamba2_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return mamba2_block(g, m, l, x, CHUNK, NULL, NULL);
}

static sb_tensor *mamba2_forward_chunk4(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return mamba2_block(g, m, l, x, 4, NULL, NULL);
}

/* streaming state per layer: conv history [B][K-1][E+2N], then the SSD state [B][M][P][N] */
static size_t mamba2_stream_state(const sb_model_config *cfg)
{
    const size_t E = 2 * (size_t)cfg->d_model, N = (size_t)cfg->d_state;
    return (D_CONV - 1) * (E + 2 * N) + E * N;
}

static sb_tensor *mamba2_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                        real *state)
{
    const size_t B = (size_t)x->shape[0], E = 2 * (size_t)m->cfg.d_model;
    const size_t N = (size_t)m->cfg.d_state;
    return mamba2_block(g, m, l, x, CHUNK, state, state + B * (D_CONV - 1) * (E + 2 * N));
}

/* probe: the per-head decay a_t = exp(dt_t A) of the SSD, dt_t = softplus(dt_in + dt_bias)
 * and A = -exp(A_log), with dt_in the last M columns of the input projection. */
static sb_tensor *mamba2_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int B = x->shape[0], T = x->shape[1], E = 2 * m->cfg.d_model, N = m->cfg.d_state;
    const int M = n_ssm_heads(&m->cfg), W = 2 * E + 2 * N + M;
    sb_tensor *zxbcdt = sb_linear(g, x, sb_model_param(m, l, P_IN_W), NULL);
    const real *dt_bias = sb_model_param(m, l, P_DT_BIAS)->data;
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    int shape[3] = {B, T, M};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < M; h++) {
            const double dt =
                sb_probe_softplus((double)(zxbcdt->data[r * W + 2 * E + 2 * N + h] + dt_bias[h]));
            out->data[r * M + h] = (real)exp(-dt * exp((double)A_log[h]));
        }
    *desc = (sb_gate_desc){.n_kinds = 1, .n_groups = M, .kind = {"decay exp(dt*A)"}, .hi = {1.0}};
    return out;
}

/* probe: the stream state holds the conv history [B][K-1][E+2N], then the SSD state */
static void mamba2_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const size_t E = 2 * (size_t)cfg->d_model, N = (size_t)cfg->d_state;
    *history = (D_CONV - 1) * (E + 2 * N);
    *count = E * N;
}

static double mamba2_flops(const sb_model_config *cfg, int T)
{
    /* docs/spec/flops.md, chunked SSD with q = min(256, T):
     * 12 D^2 + 14 D N + 2 D M + 46 D + 24 N with 5 E N replaced by
     * N (q + 1) + (q + 1)(E + 1.5 M) + 4 E N */
    const double D = cfg->d_model, N = cfg->d_state, M = n_ssm_heads(cfg), E = 2.0 * D;
    const double q = T < CHUNK ? (T > 0 ? T : 1) : CHUNK;
    return 12.0 * D * D + 14.0 * D * N + 2.0 * D * M + 46.0 * D + 24.0 * N - 5.0 * E * N +
           N * (q + 1) + (q + 1) * (E + 1.5 * M) + 4.0 * E * N;
}

static double mamba2_state(const sb_model_config *cfg)
{
    const double E = 2.0 * cfg->d_model, N = cfg->d_state;
    return E * N + (D_CONV - 1) * (E + 2 * N);
}

const sb_layer_type sb_layer_mamba2 = {
    .name = "mamba2",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "2D N + 3 (2D + 2N) (conv)"},
    .summary = "Mamba2 (SSD): scalar decay per head, shared B and C, chunked; gated RMSNorm",
    .taxonomy = {"input-dependent (dt, B, C)", "scalar per head", "1 per head", "gated RMSNorm",
                 "no", "headdim x d_state"},
    .check = mamba2_check,
    .add_params = mamba2_add_params,
    .forward = mamba2_forward,
    .flops_per_token = mamba2_flops,
    .state_size = mamba2_state,
    .stream_state_floats = mamba2_stream_state,
    .forward_stream = mamba2_forward_stream,
    .probe_gates = mamba2_probe_gates,
    .stream_recurrent = mamba2_stream_recurrent,
    .test_chunk = CHUNK,
};

/* The same layer with 4-frame chunks, so that whole-model tests at a few frames cross
 * chunk boundaries. Not in the registry: the tests declare it and build it with
 * sb_model_create_type. */
const sb_layer_type sb_layer_mamba2_chunk4 = {
    .name = "mamba2-chunk4",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "2D N + 3 (2D + 2N) (conv)"},
    .summary = "Mamba2 with 4-frame SSD chunks (tests only)",
    .taxonomy = {"input-dependent (dt, B, C)", "scalar per head", "1 per head", "gated RMSNorm",
                 "no", "headdim x d_state"},
    .check = mamba2_check,
    .add_params = mamba2_add_params,
    .forward = mamba2_forward_chunk4,
    .flops_per_token = mamba2_flops,
    .state_size = mamba2_state,
    .stream_state_floats = mamba2_stream_state,
    .forward_stream = mamba2_forward_stream,
};

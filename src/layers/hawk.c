/* hawk.c - Hawk's residual block (De et al. 2024, "Griffin: Mixing Gated Linear Recurrences
 * with Local Attention for Efficient Language Models", section 2), as Griffin's reference
 * code computes it (google-deepmind/recurrentgemma, its PyTorch modules RecurrentBlock,
 * MLPBlock, ResidualBlock and layers RGLRU, Conv1D, BlockDiagonalLinear, rnn_param_init);
 * where the paper's text and that code differ, the code is followed (docs/models/hawk.md).
 * Inside RecNet (x = LayerNorm(x + Dropout(layer(x)))) the layer returns the residual
 * block's two branches, so that x + layer(x) is the block's output:
 *
 *   n1  = RMSNorm(x)                                          temporal_pre_norm
 *   y   = gelu(n1 Wy^T + by)                                  [B, T, R]  linear_y
 *   u   = conv4(n1 Wx^T + bx)                                 causal depthwise, width 4, bias
 *   h   = RG-LRU(u)                                           rg_lru (ops_hawk.h)
 *   r   = (y * h) Wo^T + bo                                   [B, T, D]  linear_out
 *   n2  = RMSNorm(x + r)                                      channel_pre_norm
 *   m   = (gelu(n2 Wg^T + bg) * (n2 Wu^T + bu)) Wd^T + bd     gated MLP, expansion 3
 *   layer(x) = r + m
 * RG-LRU gates: r_t = sigmoid(BD_a(u_t)), i_t = sigmoid(BD_x(u_t)), block-diagonal over H
 * blocks of W channels; log a_t = -8 softplus(-Lambda) r_t; h_t = a_t h_{t-1} +
 * sqrt(1 - a_t^2) (i_t u_t), and at the sequence's first frame (the reference's reset)
 * h_0 = i_0 u_0.
 *
 * Choices (the paper leaves them open or they break divisibility; docs/models/hawk.md):
 *   - H = the config's head count (get_num_heads(D, 128): 4 up to D = 512) gate blocks;
 *     block width W = ceil(4 D / (3 H)), recurrence width R = H W: the paper's D_rnn = 4/3 D
 *     rounded up to a multiple of the blocks (D 16 -> R 24, D 128 -> R 172);
 *   - GeLU: the tanh form (the reference's), both the recurrent block's and the MLP's;
 *   - RMSNorm: x / sqrt(mean x^2 + 1e-6) * w, w initialised to ones (the reference's
 *     (1 + scale) with scale = 0: the same function, w = 1 + scale);
 *   - init: Lambda as the reference's rnn_param_init (a0^2 = sigmoid(Lambda)^2 uniform in
 *     [0.9^2, 0.999^2]); every Linear weight and the gate blocks LeCun-style, variance
 *     1/fan_in, drawn uniform U(-sqrt(3/fan_in), sqrt(3/fan_in)); every Linear and gate bias
 *     zero; the convolution at PyTorch's nn.Conv1d default.
 * State per sample: the convolution's last 3 inputs and h (R each): a diagonal recurrence.
 */
#include <math.h>

#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_hawk.h"

/* parameters in state_dict order */
enum {
    P_TNORM,
    P_Y_W,
    P_Y_B,
    P_X_W,
    P_X_B,
    P_CONV_W,
    P_CONV_B,
    P_LAMBDA,
    P_IG_W,
    P_IG_B,
    P_AG_W,
    P_AG_B,
    P_OUT_W,
    P_OUT_B,
    P_CNORM,
    P_GATE_W,
    P_GATE_B,
    P_UP_W,
    P_UP_B,
    P_DOWN_W,
    P_DOWN_B,
    P_COUNT
};

#define CONV_SIZE 4
#define RG_LRU_C 8.0
#define MIN_RAD 0.9   /* the base decay a0 = sigmoid(Lambda) at init: a0^2 uniform in */
#define MAX_RAD 0.999 /* [MIN_RAD^2, MAX_RAD^2] (+ RAD_EPS), rnn_param_init's ring */
#define RAD_EPS 1e-8
#define MLP_EXPAND 3
#define NORM_EPS 1e-6

typedef struct hawk_dims {
    int D, H, W, R, F; /* width, gate blocks, block width, recurrence width, MLP width */
} hawk_dims;

static hawk_dims hawk_dims_of(const sb_model_config *cfg)
{
    hawk_dims d;
    d.D = cfg->d_model;
    d.H = cfg->n_head > 0 ? cfg->n_head : 1;
    d.W = (4 * d.D + 3 * d.H - 1) / (3 * d.H); /* ceil(4 D / (3 H)) */
    d.R = d.H * d.W;
    d.F = MLP_EXPAND * d.D;
    return d;
}

static sb_status hawk_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->n_head < 1)
        return sb_error_set(err, SB_ERR_INVALID, "hawk: no head count for --feat_size %d",
                            cfg->d_model);
    return SB_OK;
}

/* Lambda = -a_param of rnn_param_init(a_param, 0.9, 0.999): u = a0^2 drawn by torch's
 * uniform_ (float32) on [0.81 + 1e-8, 0.998001 + 1e-8], then a_param = log(1/a0 - 1) formed
 * in double (1/a0 - 1 = expm1(-log(u) / 2), which keeps the digits that the subtraction
 * cancels) and rounded to float32. torch takes the same steps in float32 with its own log
 * and exp (SLEEF's), which can differ in the last place; the draws, and so the
 * distribution, are the reference's, and the mimic computes Lambda with the same double
 * steps (Python's math: the same libm), so the two agree bit for bit. */
static void init_lambda(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    sb_torch_uniform(rng, data, p->size, MIN_RAD * MIN_RAD + RAD_EPS, MAX_RAD * MAX_RAD + RAD_EPS);
    for (size_t k = 0; k < p->size; k++) {
        const double log_a0 = 0.5 * log((double)(float)data[k]);
        data[k] = (real)(float)-log(expm1(-log_a0));
    }
}

static double lecun_bound(int fan_in)
{
    return sqrt(3.0 / (double)fan_in);
}

static int hawk_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const hawk_dims d = hawk_dims_of(cfg);
    const int D = d.D, R = d.R, F = d.F;
    int vd[1] = {D}, vr[1] = {R}, vf[1] = {F}, rd[2] = {R, D}, conv[3] = {R, 1, CONV_SIZE};
    int blk[3] = {d.H, d.W, d.W}, blk_b[2] = {d.H, d.W}, dr[2] = {D, R}, fd[2] = {F, D};
    int df[2] = {D, F};
    int first = ps->n;
    /* draw ranks: linear_y, linear_x, the convolution (weight, bias), Lambda, the input gate,
     * the recurrence gate, linear_out, the MLP's gate, up and down projections */
    sb_params_add_named(ps, prefix, "temporal_pre_norm.weight", 1, vd, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "temporal_block.linear_y.weight", 2, rd, SB_INIT_UNIFORM,
                        lecun_bound(D), 0);
    sb_params_add_named(ps, prefix, "temporal_block.linear_y.bias", 1, vr, SB_INIT_CONST, 0.0, 100);
    sb_params_add_named(ps, prefix, "temporal_block.linear_x.weight", 2, rd, SB_INIT_UNIFORM,
                        lecun_bound(D), 1);
    sb_params_add_named(ps, prefix, "temporal_block.linear_x.bias", 1, vr, SB_INIT_CONST, 0.0, 100);
    /* nn.Conv1d(R, R, 4, groups=R): fan_in = 1 * kernel */
    sb_params_add_named(ps, prefix, "temporal_block.conv_1d.weight", 3, conv, SB_INIT_KAIMING,
                        CONV_SIZE, 2);
    sb_params_add_named(ps, prefix, "temporal_block.conv_1d.bias", 1, vr, SB_INIT_FANIN, CONV_SIZE,
                        3);
    sb_param *p = sb_params_add_named(ps, prefix, "temporal_block.rg_lru.a_logit", 1, vr,
                                      SB_INIT_CUSTOM, 0.0, 4);
    p->custom = init_lambda;
    sb_params_add_named(ps, prefix, "temporal_block.rg_lru.input_gate_weight", 3, blk,
                        SB_INIT_UNIFORM, lecun_bound(d.W), 5);
    sb_params_add_named(ps, prefix, "temporal_block.rg_lru.input_gate_bias", 2, blk_b,
                        SB_INIT_CONST, 0.0, 100);
    sb_params_add_named(ps, prefix, "temporal_block.rg_lru.a_gate_weight", 3, blk, SB_INIT_UNIFORM,
                        lecun_bound(d.W), 6);
    sb_params_add_named(ps, prefix, "temporal_block.rg_lru.a_gate_bias", 2, blk_b, SB_INIT_CONST,
                        0.0, 100);
    sb_params_add_named(ps, prefix, "temporal_block.linear_out.weight", 2, dr, SB_INIT_UNIFORM,
                        lecun_bound(R), 7);
    sb_params_add_named(ps, prefix, "temporal_block.linear_out.bias", 1, vd, SB_INIT_CONST, 0.0,
                        100);
    sb_params_add_named(ps, prefix, "channel_pre_norm.weight", 1, vd, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "mlp_block.gate_proj.weight", 2, fd, SB_INIT_UNIFORM,
                        lecun_bound(D), 8);
    sb_params_add_named(ps, prefix, "mlp_block.gate_proj.bias", 1, vf, SB_INIT_CONST, 0.0, 100);
    sb_params_add_named(ps, prefix, "mlp_block.up_proj.weight", 2, fd, SB_INIT_UNIFORM,
                        lecun_bound(D), 9);
    sb_params_add_named(ps, prefix, "mlp_block.up_proj.bias", 1, vf, SB_INIT_CONST, 0.0, 100);
    sb_params_add_named(ps, prefix, "mlp_block.down_proj.weight", 2, df, SB_INIT_UNIFORM,
                        lecun_bound(F), 10);
    sb_params_add_named(ps, prefix, "mlp_block.down_proj.bias", 1, vd, SB_INIT_CONST, 0.0, 100);
    return ps->n - first;
}

/* RMSNorm(x) and the RG-LRU's input u = conv4(n1 Wx^T + bx); conv_history NULL (whole
 * sequences) or [B][3][R] (streaming). */
static sb_tensor *hawk_lru_input(sb_graph *g, const sb_model *m, int l, sb_tensor *n1,
                                 real *conv_history)
{
    sb_tensor *xb = sb_linear(g, n1, sb_model_param(m, l, P_X_W), sb_model_param(m, l, P_X_B));
    sb_tensor *cw = sb_model_param(m, l, P_CONV_W), *cb = sb_model_param(m, l, P_CONV_B);
    return conv_history != NULL ? sb_conv1d_causal_stream(g, xb, cw, cb, conv_history)
                                : sb_conv1d_causal(g, xb, cw, cb);
}

/* the whole residual block's branches r + m; state NULL or the stream state (hawk_stream_state:
 * conv history [B][3][R], h [B][R], then a flag per sample, 0 before the sequence's first
 * frame) */
static sb_tensor *hawk_block(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const hawk_dims d = hawk_dims_of(&m->cfg);
    const size_t B = (size_t)x->shape[0], R = (size_t)d.R;
    real *conv_history = state, *h_state = state != NULL ? state + B * (CONV_SIZE - 1) * R : NULL;
    real *started = state != NULL ? h_state + B * R : NULL;
    /* the reference resets h at the sequence's first frame: whole sequences always start
     * there, a stream only in its first chunk (the samples of a batch stream together) */
    const int reset = started == NULL || B == 0 || started[0] == 0;
    const real eps = (real)NORM_EPS;
    sb_tensor *n1 = sb_rmsnorm_gated(g, x, NULL, sb_model_param(m, l, P_TNORM), eps);
    sb_tensor *yb = sb_linear(g, n1, sb_model_param(m, l, P_Y_W), sb_model_param(m, l, P_Y_B));
    sb_tensor *u = hawk_lru_input(g, m, l, n1, conv_history);
    sb_tensor *ga =
        sb_block_diag_linear(g, u, sb_model_param(m, l, P_AG_W), sb_model_param(m, l, P_AG_B));
    sb_tensor *gx =
        sb_block_diag_linear(g, u, sb_model_param(m, l, P_IG_W), sb_model_param(m, l, P_IG_B));
    sb_tensor *h =
        sb_rglru(g, u, ga, gx, sb_model_param(m, l, P_LAMBDA), (real)RG_LRU_C, h_state, reset);
    if (started != NULL && x->shape[1] > 0)
        for (size_t b = 0; b < B; b++)
            started[b] = 1;
    sb_tensor *r = sb_linear(g, sb_gelu_tanh_mul(g, yb, h), sb_model_param(m, l, P_OUT_W),
                             sb_model_param(m, l, P_OUT_B));
    sb_tensor *n2 = sb_rmsnorm_gated(g, sb_add(g, x, r), NULL, sb_model_param(m, l, P_CNORM), eps);
    sb_tensor *gate =
        sb_linear(g, n2, sb_model_param(m, l, P_GATE_W), sb_model_param(m, l, P_GATE_B));
    sb_tensor *up = sb_linear(g, n2, sb_model_param(m, l, P_UP_W), sb_model_param(m, l, P_UP_B));
    sb_tensor *mlp = sb_linear(g, sb_gelu_tanh_mul(g, gate, up), sb_model_param(m, l, P_DOWN_W),
                               sb_model_param(m, l, P_DOWN_B));
    return sb_add(g, r, mlp);
}

static sb_tensor *hawk_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return hawk_block(g, m, l, x, NULL);
}

static sb_tensor *hawk_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                      real *state)
{
    return hawk_block(g, m, l, x, state);
}

/* per sample: 3 R of conv history, R of h and a flag (0 until the sequence's first frame has
 * been seen; a real, 0 or 1); laid out field by field over the batch */
static size_t hawk_stream_state(const sb_model_config *cfg)
{
    const hawk_dims d = hawk_dims_of(cfg);
    return (size_t)CONV_SIZE * (size_t)d.R + 1;
}

/* probe: h after the conv histories (the flag that follows is not part of the state) */
static void hawk_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const hawk_dims d = hawk_dims_of(cfg);
    *history = (CONV_SIZE - 1) * (size_t)d.R;
    *count = (size_t)d.R;
}

/* probe: the recurrence gate a_t = exp(-8 softplus(-Lambda) r_t), averaged over the channels
 * of each of the H gate blocks */
static sb_tensor *hawk_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                   const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const hawk_dims d = hawk_dims_of(&m->cfg);
    const int B = x->shape[0], T = x->shape[1], R = d.R, H = d.H, W = d.W;
    sb_tensor *n1 = sb_rmsnorm_gated(g, x, NULL, sb_model_param(m, l, P_TNORM), (real)NORM_EPS);
    sb_tensor *u = hawk_lru_input(g, m, l, n1, NULL);
    sb_tensor *ga =
        sb_block_diag_linear(g, u, sb_model_param(m, l, P_AG_W), sb_model_param(m, l, P_AG_B));
    const real *lam = sb_model_param(m, l, P_LAMBDA)->data;
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t row = 0; row < (size_t)B * T; row++)
        for (int q = 0; q < H; q++) {
            double sum = 0.0;
            for (int c = q * W; c < (q + 1) * W; c++) {
                const double rate = RG_LRU_C * sb_probe_softplus(-(double)lam[c]);
                sum += exp(-rate * sb_probe_sigmoid((double)ga->data[row * R + c]));
            }
            out->data[row * H + q] = (real)(sum / W);
        }
    *desc = (sb_gate_desc){
        .n_kinds = 1, .n_groups = H, .kind = {"decay a=sigmoid(Lambda)^(8r)"}, .hi = {1.0}};
    return out;
}

static double hawk_flops(const sb_model_config *cfg, int T)
{
    (void)T;
    const hawk_dims d = hawk_dims_of(cfg);
    const double D = d.D, R = d.R, W = d.W, F = d.F;
    const double proj = 2 * D * R * 2 + 2 * R * D + 2 * R * W * 2; /* y, x, out, two gates */
    const double mlp = 2 * D * F * 3;
    const double conv = 2.0 * CONV_SIZE * R;
    return proj + mlp + conv + 30 * R + 20 * D + 10 * F; /* scan, gelu, norms, residuals */
}

static double hawk_state(const sb_model_config *cfg)
{
    const hawk_dims d = hawk_dims_of(cfg);
    return (double)CONV_SIZE * d.R; /* h (R) + the convolution's history (3 R), as mamba */
}

const sb_layer_type sb_layer_hawk = {
    .name = "hawk",
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_ELEMENTWISE,
             SB_MEMORY_CONSTANT, "R + 3 R (conv), R = H ceil(4 D / (3 H))"},
    .summary = "Hawk (Griffin's RG-LRU block): input-gated diagonal recurrence, conv4, gated MLP",
    .taxonomy = {"data-dependent per channel (recurrence gate r_t and input gate i_t, "
                 "block-diagonal)",
                 "diagonal", "1 per channel", "sqrt(1 - a^2) input normalisation; RMSNorm", "no",
                 "1 per channel (4/3 d_model per layer)"},
    .check = hawk_check,
    .add_params = hawk_add_params,
    .forward = hawk_forward,
    .flops_per_token = hawk_flops,
    .state_size = hawk_state,
    .stream_state_floats = hawk_stream_state,
    .forward_stream = hawk_forward_stream,
    .probe_gates = hawk_probe_gates,
    .stream_recurrent = hawk_stream_recurrent,
};

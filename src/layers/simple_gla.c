/* simple_gla.c - SimpleGatedLinearAttention of flash-linear-attention
 * (fla/layers/simple_gla.py, fla commit bc3b101d) with the arguments that make it GLA's
 * (gla.c) twin up to the gate: hidden_size=D, num_heads=H (cfg->n_head), expand_k=1,
 * expand_v=2 (the benchmark's GLA arguments; fla's default expand_v is 1), use_short_conv=True
 * and conv_size=4 (fla's defaults here, and the benchmark's for GLA), every other argument at
 * fla's default (feature_map None, gate_fn swish with the fused gated RMSNorm, norm_eps 1e-5,
 * gate_logit_normalizer 16). Against `gla` it changes one thing: the decay is one scalar per
 * head and token instead of one per key channel.
 *
 *   q, k = silu(conv(x Wq^T)), silu(conv(x Wk^T))      [B, T, H, K]   K = D / H
 *   v    = silu(conv(x Wv^T))                          [B, T, H, V]   V = 2D / H
 *   g    = logsigmoid(x Wgk^T + bgk) / 16              [B, T, H]      one per head
 *   o    = K1(q, k, v, g), scale K^-1/2                S_t = exp(g_t) S_{t-1} + k_t v_t^T
 *   y    = RMSNorm(o) * w * silu(x Wg^T)               per head, w [V] shared by the heads
 *   out  = y Wo^T
 * Docs: docs/models/simple_gla.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

/* parameters in state_dict order (= construction order) */
enum { P_Q, P_K, P_V, P_G, P_Q_CONV, P_K_CONV, P_V_CONV, P_GK, P_GK_B, P_NORM, P_O, P_COUNT };

#define CONV_SIZE 4
#define GATE_NORMALIZER 16
#define NORM_EPS ((real)1e-5)

static sb_status simple_gla_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("simple_gla", "--feat_size", cfg->d_model, cfg->n_head, err);
}

static int simple_gla_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, H = cfg->n_head, V = 2 * D / H;
    int dd[2] = {D, D}, d2d[2] = {2 * D, D}, cd[3] = {D, 1, CONV_SIZE};
    int c2d[3] = {2 * D, 1, CONV_SIZE}, hd[2] = {H, D}, hb[1] = {H}, vn[1] = {V};
    int od[2] = {D, 2 * D};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, dd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, d2d, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "g_proj.weight", 2, d2d, SB_INIT_KAIMING, D, 3);
    /* ShortConvolution = nn.Conv1d(groups=C): fan_in = 1 * kernel */
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, cd, SB_INIT_KAIMING, CONV_SIZE, 4);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, cd, SB_INIT_KAIMING, CONV_SIZE, 5);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, c2d, SB_INIT_KAIMING, CONV_SIZE, 6);
    /* gk_proj = nn.Linear(D, H) with its bias */
    sb_params_add_named(ps, prefix, "gk_proj.weight", 2, hd, SB_INIT_KAIMING, D, 7);
    sb_params_add_named(ps, prefix, "gk_proj.bias", 1, hb, SB_INIT_FANIN, D, 8);
    /* fla builds the norm before o_proj here (GLA builds it after) */
    sb_params_add_named(ps, prefix, "g_norm_swish_gate.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, 2 * D, 9);
    return ps->n - first;
}

/* g = logsigmoid(x Wgk^T + bgk) / 16, [B, T, H] */
static sb_tensor *simple_gla_gate(sb_graph *g, sb_tensor *x, sb_tensor *const *p)
{
    return sb_logsigmoid(g, sb_linear(g, x, p[P_GK], p[P_GK_B]), (real)1 / GATE_NORMALIZER);
}

/* The layer over whole sequences (state == NULL) or streamed (state: the q, k, v convolution
 * histories, then the recurrent state; simple_gla_stream_state). */
static sb_tensor *simple_gla_run(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const int H = m->cfg.n_head, K = m->cfg.d_model / H, V = 2 * K;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *qkv[3] = {sb_linear(g, x, p[P_Q], NULL), sb_linear(g, x, p[P_K], NULL),
                         sb_linear(g, x, p[P_V], NULL)};
    sb_tensor *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    sb_tensor *q = sb_fla_heads(g, qkv[0], K), *k = sb_fla_heads(g, qkv[1], K);
    sb_tensor *v = sb_fla_heads(g, qkv[2], V);
    sb_tensor *gk = simple_gla_gate(g, x, p);
    sb_tensor *o =
        sb_linear_attn(g, q, k, v, gk, (real)(1.0 / sqrt((double)K)), SB_LINEAR_ATTN_CHUNK, S);
    sb_tensor *zg = sb_fla_heads(g, sb_linear(g, x, p[P_G], NULL), V);
    sb_tensor *y = sb_rmsnorm_gated(g, o, zg, p[P_NORM], NORM_EPS);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

static sb_tensor *simple_gla_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return simple_gla_run(g, m, l, x, NULL);
}

static sb_tensor *simple_gla_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                            real *state)
{
    return simple_gla_run(g, m, l, x, state);
}

/* the per-head decay alpha = exp(g) for the probe, [B, T, H] */
static sb_tensor *simple_gla_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                         const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *gk = simple_gla_gate(g, x, p);
    sb_tensor *out = sb_tensor_new(g, 3, gk->shape);
    for (size_t i = 0; i < gk->size; i++)
        out->data[i] = (real)exp((double)gk->data[i]);
    *desc = (sb_gate_desc){
        .n_kinds = 1, .n_groups = m->cfg.n_head, .kind = {"decay alpha=exp(g)"}, .hi = {1.0}};
    return out;
}

/* Per sample: the histories of the q, k (H K channels each) and v (H V) convolutions, then
 * the recurrent state (H K V); B samples laid out field by field, as gla. */
static void simple_gla_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const size_t H = (size_t)cfg->n_head, K = (size_t)(cfg->d_model / cfg->n_head), V = 2 * K;
    *history = (CONV_SIZE - 1) * H * (2 * K + V);
    *count = H * K * V;
}

static size_t simple_gla_stream_state(const sb_model_config *cfg)
{
    size_t history, count;
    simple_gla_stream_recurrent(cfg, &history, &count);
    return history + count;
}

static double simple_gla_flops(const sb_model_config *cfg, int T)
{
    const double D = cfg->d_model, H = cfg->n_head, K = D / H, V = 2 * K, KA = D, VA = 2 * D;
    const double q = T < SB_LINEAR_ATTN_CHUNK ? T : SB_LINEAR_ATTN_CHUNK;
    double proj = 2 * D * (KA + KA + VA + VA) + 2 * VA * D + 2 * D * H;
    double conv = 2.0 * CONV_SIZE * (2 * KA + VA);
    /* per head: as GLA's (the scalar decay saves a little, not counted) */
    double rec = H * (5 * K * V + (q + 1) * (K + V));
    return proj + conv + rec + 30 * D; /* + silu, gate, norm elementwise */
}

static double simple_gla_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_simple_gla = {
    .name = "simple_gla",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = 2 D^2 / H"},
    .summary = "Simple GLA (fla): GLA with one data-dependent scalar decay per head",
    .taxonomy = {"data-dependent scalar per head (logsigmoid/16)", "scalar x identity", "1",
                 "gated RMSNorm", "no", "d_k x d_v"},
    .check = simple_gla_check,
    .add_params = simple_gla_add_params,
    .forward = simple_gla_forward,
    .flops_per_token = simple_gla_flops,
    .state_size = simple_gla_state,
    .stream_state_floats = simple_gla_stream_state,
    .forward_stream = simple_gla_forward_stream,
    .probe_gates = simple_gla_probe_gates,
    .stream_recurrent = simple_gla_stream_recurrent,
    .test_chunk = SB_LINEAR_ATTN_CHUNK,
};

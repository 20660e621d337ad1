/* gla.c - GatedLinearAttention of flash-linear-attention v0.3.2 (fla/layers/gla.py) as the
 * reference builds it: hidden_size=D, num_heads=H, use_short_conv=True, expand_k=1,
 * expand_v=2, conv_size=4, every other argument at its default (docs/models/fla_layers.md).
 *
 *   q, k = silu(conv(x Wq^T)), silu(conv(x Wk^T))      [B, T, H, K]   K = D / H
 *   v    = silu(conv(x Wv^T))                          [B, T, H, V]   V = 2D / H
 *   g    = logsigmoid((x W0^T) W1^T + b1) / 16         [B, T, H, K]   (low rank 16)
 *   o    = K1(q, k, v, g), scale K^-1/2                 per-key-channel decay
 *   y    = RMSNorm(o) * w * silu(x Wg^T)               per head, w [V] shared by the heads
 *   out  = y Wo^T
 * The same code builds gla_layered's mixer with another configuration (fla_mixer.h: 4 heads,
 * expand_k 0.5, expand_v 1, no short convolutions, eps 1e-6; layered.c).
 * Docs: docs/models/fla_layers.md, docs/models/layered.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/fla_mixer.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

/* parameters in state_dict order (= construction order) */
enum {
    P_Q,
    P_K,
    P_V,
    P_G,
    P_Q_CONV,
    P_K_CONV,
    P_V_CONV,
    P_GK0,
    P_GK1,
    P_GK1_B,
    P_O,
    P_NORM,
    P_COUNT
};

#define CONV_SIZE 4
#define GATE_RANK 16
#define GATE_NORMALIZER 16

/* RecNet's GLA: the benchmark's arguments (expand_k 1, expand_v 2, short convs, eps 1e-5) */
static sb_fla_mixer gla_recnet(const sb_model_config *cfg)
{
    const int H = cfg->n_head > 0 ? cfg->n_head : 1;
    sb_fla_mixer mx = {.H = H,
                       .K = cfg->d_model / H,
                       .V = 2 * cfg->d_model / H,
                       .short_conv = 1,
                       .norm_eps = 1e-5};
    return mx;
}

static sb_status gla_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("gla", "--feat_size", cfg->d_model, cfg->n_head, err);
}

int sb_gla_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx)
{
    const int KA = mx->H * mx->K, VA = mx->H * mx->V; /* key_dim, value_dim */
    int kd[2] = {KA, D}, vd[2] = {VA, D}, ck[3] = {KA, 1, CONV_SIZE}, cv[3] = {VA, 1, CONV_SIZE};
    int g0[2] = {GATE_RANK, D}, g1[2] = {KA, GATE_RANK}, vk[1] = {KA}, od[2] = {D, VA};
    int vn[1] = {mx->V};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, kd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, kd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, vd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "g_proj.weight", 2, vd, SB_INIT_KAIMING, D, 3);
    if (mx->short_conv) {
        /* nn.Conv1d(groups=C): fan_in = 1 * kernel */
        sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 4);
        sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 5);
        sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, cv, SB_INIT_KAIMING, CONV_SIZE, 6);
    }
    sb_params_add_named(ps, prefix, "gk_proj.0.weight", 2, g0, SB_INIT_KAIMING, D, 7);
    sb_params_add_named(ps, prefix, "gk_proj.1.weight", 2, g1, SB_INIT_KAIMING, GATE_RANK, 8);
    sb_params_add_named(ps, prefix, "gk_proj.1.bias", 1, vk, SB_INIT_FANIN, GATE_RANK, 9);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, VA, 10);
    sb_params_add_named(ps, prefix, "g_norm_swish_gate.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    return ps->n - first;
}

static int gla_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const sb_fla_mixer mx = gla_recnet(cfg);
    return sb_gla_mixer_params(ps, prefix, cfg->d_model, &mx);
}

/* The layer with or without the short convolutions, the recurrence either over whole
 * sequences (state == NULL) or streamed (state: conv histories and the recurrent state). */
sb_tensor *sb_gla_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                        const sb_fla_mixer *mx)
{
    const int K = mx->K, V = mx->V;
    sb_tensor *p[P_COUNT];
    for (int i = 0, k = 0; i < P_COUNT; i++) {
        const int conv = i == P_Q_CONV || i == P_K_CONV || i == P_V_CONV;
        p[i] = conv && !mx->short_conv ? NULL : sb_model_param(m, l, k++);
    }
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    real *S = state;
    if (mx->short_conv) { /* streaming state: sb_gla_mixer_stream_floats */
        sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
        S = sb_short_convs(g, 3, qkv, conv, state);
        q = qkv[0], k = qkv[1], v = qkv[2];
    }
    sb_tensor *gk = sb_gla_gate(g, x, p[P_GK0], p[P_GK1], p[P_GK1_B], GATE_NORMALIZER);
    q = sb_fla_heads(g, q, K);
    k = sb_fla_heads(g, k, K);
    v = sb_fla_heads(g, v, V);
    gk = sb_fla_heads(g, gk, K);
    sb_tensor *o =
        sb_linear_attn(g, q, k, v, gk, (real)(1.0 / sqrt((double)K)), SB_LINEAR_ATTN_CHUNK, S);
    sb_tensor *zg = sb_fla_heads(g, sb_linear(g, x, p[P_G], NULL), V);
    sb_tensor *y = sb_rmsnorm_gated(g, o, zg, p[P_NORM], (real)mx->norm_eps);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

sb_tensor *sb_gla_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc)
{
    const int B = x->shape[0], T = x->shape[1], H = mx->H, K = mx->K;
    sb_tensor *p[P_COUNT];
    for (int i = 0, k = 0; i < P_COUNT; i++) {
        const int conv = i == P_Q_CONV || i == P_K_CONV || i == P_V_CONV;
        p[i] = conv && !mx->short_conv ? NULL : sb_model_param(m, l, k++);
    }
    sb_tensor *gk = sb_gla_gate(g, x, p[P_GK0], p[P_GK1], p[P_GK1_B], GATE_NORMALIZER);
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++)
                sum += exp((double)gk->data[(r * H + h) * K + k]);
            out->data[r * H + h] = (real)(sum / K);
        }
    *desc =
        (sb_gate_desc){.n_kinds = 1, .n_groups = H, .kind = {"decay alpha=exp(gk)"}, .hi = {1.0}};
    return out;
}

static sb_tensor *gla_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                  const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const sb_fla_mixer mx = gla_recnet(&m->cfg);
    return sb_gla_mixer_gates(g, m, l, x, &mx, desc);
}

static void gla_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const sb_fla_mixer mx = gla_recnet(cfg);
    sb_fla_mixer_stream_recurrent(&mx, history, count);
}

static sb_tensor *gla_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const sb_fla_mixer mx = gla_recnet(&m->cfg);
    return sb_gla_mixer(g, m, l, x, NULL, &mx);
}

static sb_tensor *gla_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     real *state)
{
    const sb_fla_mixer mx = gla_recnet(&m->cfg);
    return sb_gla_mixer(g, m, l, x, state, &mx);
}

/* Per sample: the histories of the q, k (H K channels) and v (H V) convolutions when the
 * layer has them, then the recurrent state (H K V). The buffer of B samples is laid out field
 * by field: q histories of all samples, k histories, v histories, states. */
size_t sb_gla_mixer_stream_floats(const sb_fla_mixer *mx)
{
    const size_t H = (size_t)mx->H, K = (size_t)mx->K, V = (size_t)mx->V;
    return (mx->short_conv ? (CONV_SIZE - 1) * H * (2 * K + V) : 0) + H * K * V;
}

static size_t gla_stream_state(const sb_model_config *cfg)
{
    const sb_fla_mixer mx = gla_recnet(cfg);
    return sb_gla_mixer_stream_floats(&mx);
}

double sb_gla_mixer_flops(int Dm, const sb_fla_mixer *mx, int T)
{
    const double D = Dm, H = mx->H, K = mx->K, V = mx->V, KA = H * K, VA = H * V;
    const double q = T < SB_LINEAR_ATTN_CHUNK ? T : SB_LINEAR_ATTN_CHUNK;
    double proj = 2 * D * (KA + KA + VA + VA) + 2 * VA * D + 2 * GATE_RANK * (D + KA);
    double conv = mx->short_conv ? 2.0 * CONV_SIZE * (2 * KA + VA) : 0.0;
    /* per head: Qb S0 and the state update (2KV each, + KV decay), P and P V over (q+1)/2 rows */
    double rec = H * (5 * K * V + (q + 1) * (K + V));
    return proj + conv + rec + 30 * D; /* + silu, gate, norm elementwise */
}

static double gla_flops(const sb_model_config *cfg, int T)
{
    const sb_fla_mixer mx = gla_recnet(cfg);
    return sb_gla_mixer_flops(cfg->d_model, &mx, T);
}

static double gla_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_gla = {
    .name = "gla",
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = 2 D^2 / H"},
    .summary = "Gated Linear Attention (fla 0.3.2): per-key-channel data-dependent decay",
    .taxonomy = {"data-dependent per key channel (low-rank, logsigmoid/16)", "diagonal", "1",
                 "gated RMSNorm", "no", "d_k x d_v"},
    .check = gla_check,
    .add_params = gla_add_params,
    .forward = gla_forward,
    .flops_per_token = gla_flops,
    .state_size = gla_state,
    .stream_state_floats = gla_stream_state,
    .forward_stream = gla_forward_stream,
    .probe_gates = gla_probe_gates,
    .stream_recurrent = gla_stream_recurrent,
    .test_chunk = SB_LINEAR_ATTN_CHUNK,
};

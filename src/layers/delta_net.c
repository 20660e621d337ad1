/* delta_net.c - DeltaNet of flash-linear-attention v0.3.2 (fla/layers/delta_net.py) as the
 * reference builds it: hidden_size=D, num_heads=H, use_short_conv=True, expand_k=1,
 * expand_v=2, conv_size=4, defaults otherwise (use_beta, no output gate, qk_activation silu,
 * qk_norm l2, allow_neg_eigval False) (docs/models/fla_layers.md).
 *
 *   q, k = L2N(silu(conv(x Wq^T))), L2N(silu(conv(x Wk^T)))   [B, T, H, K]   K = D / H
 *   v    = silu(conv(x Wv^T))                                 [B, T, H, V]   V = 2D / H
 *   beta = sigmoid(x Wb^T)                                     [B, T, H]
 *   o    = K2(q, k, v, beta), no decay, scale K^-1/2
 *   out  = RMSNorm(o) * w Wo^T                                 w [V] shared by the heads
 * The reference trains this layer in bfloat16; here float32. The same code builds
 * delta_net_layered's mixer with another configuration (fla_mixer.h: 16 heads, expand_v 1,
 * eps 1e-6; layered.c). Docs: docs/models/fla_layers.md, docs/models/layered.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/fla_mixer.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

enum { P_Q, P_K, P_V, P_B, P_Q_CONV, P_K_CONV, P_V_CONV, P_NORM, P_O, P_COUNT };

#define CONV_SIZE 4
#define L2_EPS ((real)1e-6)

/* RecNet's DeltaNet: the benchmark's arguments (expand_k 1, expand_v 2, eps 1e-5) */
static sb_fla_mixer delta_net_recnet(const sb_model_config *cfg)
{
    const int H = cfg->n_head > 0 ? cfg->n_head : 1;
    sb_fla_mixer mx = {.H = H,
                       .K = cfg->d_model / H,
                       .V = 2 * cfg->d_model / H,
                       .short_conv = 1,
                       .norm_eps = 1e-5};
    return mx;
}

static sb_status delta_net_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("delta_net", "--feat_size", cfg->d_model, cfg->n_head, err);
}

int sb_delta_net_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx)
{
    SB_ASSERT(mx->short_conv); /* both wrappers build DeltaNet with its convolutions */
    const int H = mx->H, KA = H * mx->K, VA = H * mx->V;
    int kd[2] = {KA, D}, vd[2] = {VA, D}, hd[2] = {H, D}, ck[3] = {KA, 1, CONV_SIZE};
    int cv[3] = {VA, 1, CONV_SIZE}, vn[1] = {mx->V}, od[2] = {D, VA};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, kd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, kd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, vd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "b_proj.weight", 2, hd, SB_INIT_KAIMING, D, 3);
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 4);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 5);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, cv, SB_INIT_KAIMING, CONV_SIZE, 6);
    sb_params_add_named(ps, prefix, "o_norm.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, VA, 7);
    return ps->n - first;
}

static int delta_net_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const sb_fla_mixer mx = delta_net_recnet(cfg);
    return sb_delta_net_mixer_params(ps, prefix, cfg->d_model, &mx);
}

sb_tensor *sb_delta_net_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                              const sb_fla_mixer *mx)
{
    const int K = mx->K, V = mx->V;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    /* streaming state: sb_delta_net_mixer_stream_floats */
    sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    q = qkv[0], k = qkv[1], v = qkv[2];
    sb_tensor *beta = sb_beta_gate(g, sb_linear(g, x, p[P_B], NULL), 1);
    q = sb_fla_heads(g, sb_l2norm(g, q, K, L2_EPS), K);
    k = sb_fla_heads(g, sb_l2norm(g, k, K, L2_EPS), K);
    v = sb_fla_heads(g, v, V);
    sb_tensor *o = sb_delta_rule(g, q, k, v, beta, NULL, (real)(1.0 / sqrt((double)K)),
                                 SB_DELTA_RULE_CHUNK, S);
    sb_tensor *y = sb_rmsnorm_gated(g, o, NULL, p[P_NORM], (real)mx->norm_eps);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

sb_tensor *sb_delta_net_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                    const sb_fla_mixer *mx, sb_gate_desc *desc)
{
    const int B = x->shape[0], T = x->shape[1], H = mx->H;
    sb_tensor *z = sb_linear(g, x, sb_model_param(m, l, P_B), NULL);
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < out->size; i++)
        out->data[i] = (real)sb_probe_sigmoid((double)z->data[i]);
    *desc =
        (sb_gate_desc){.n_kinds = 1, .n_groups = H, .kind = {"beta (write strength)"}, .hi = {1.0}};
    return out;
}

static sb_tensor *delta_net_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                        const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const sb_fla_mixer mx = delta_net_recnet(&m->cfg);
    return sb_delta_net_mixer_gates(g, m, l, x, &mx, desc);
}

static void delta_net_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const sb_fla_mixer mx = delta_net_recnet(cfg);
    sb_fla_mixer_stream_recurrent(&mx, history, count);
}

static sb_tensor *delta_net_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const sb_fla_mixer mx = delta_net_recnet(&m->cfg);
    return sb_delta_net_mixer(g, m, l, x, NULL, &mx);
}

static sb_tensor *delta_net_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                           real *state)
{
    const sb_fla_mixer mx = delta_net_recnet(&m->cfg);
    return sb_delta_net_mixer(g, m, l, x, state, &mx);
}

/* Per sample: q, k (H K channels) and v (H V) conv histories, then the state (H K V); the
 * buffer of B samples is laid out field by field. */
size_t sb_delta_net_mixer_stream_floats(const sb_fla_mixer *mx)
{
    const size_t H = (size_t)mx->H, K = (size_t)mx->K, V = (size_t)mx->V;
    return (CONV_SIZE - 1) * H * (2 * K + V) + H * K * V;
}

static size_t delta_net_stream_state(const sb_model_config *cfg)
{
    const sb_fla_mixer mx = delta_net_recnet(cfg);
    return sb_delta_net_mixer_stream_floats(&mx);
}

double sb_delta_net_mixer_flops(int Dm, const sb_fla_mixer *mx, int T)
{
    const double D = Dm, H = mx->H, K = mx->K, V = mx->V, KA = H * K, VA = H * V;
    const double q = T < SB_DELTA_RULE_CHUNK ? T : SB_DELTA_RULE_CHUNK;
    double proj = 2 * D * (KA + KA + VA + H) + 2 * VA * D;
    double conv = 2.0 * CONV_SIZE * (2 * KA + VA);
    /* per head and token: W S0, Q S0, the state update (2KV each); Gram, Q K^T, the
     * triangular solves and Pm Vn over (q+1)/2 earlier positions */
    double rec = H * (6 * K * V + (q + 1) * (2 * K + 2 * V));
    return proj + conv + rec + 30 * D;
}

static double delta_net_flops(const sb_model_config *cfg, int T)
{
    const sb_fla_mixer mx = delta_net_recnet(cfg);
    return sb_delta_net_mixer_flops(cfg->d_model, &mx, T);
}

static double delta_net_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_delta_net = {
    .name = "delta_net",
    .axes = {SB_GATE_NONE, SB_FORGET_NONE, SB_TRANSITION_DELTA, SB_UPDATE_RANK1, SB_MEMORY_CONSTANT,
             "H K V = 2 D^2 / H"},
    .summary = "DeltaNet (fla 0.3.2): delta-rule state update, no decay",
    .taxonomy = {"none (data-dependent write strength beta per head)",
                 "identity + rank-1 (I - beta k k^T)", "1", "L2 q, k; RMSNorm",
                 "no (beta in (0, 1): eigenvalues in [0, 1])", "d_k x d_v"},
    .check = delta_net_check,
    .add_params = delta_net_add_params,
    .forward = delta_net_forward,
    .flops_per_token = delta_net_flops,
    .state_size = delta_net_state,
    .stream_state_floats = delta_net_stream_state,
    .forward_stream = delta_net_forward_stream,
    .probe_gates = delta_net_probe_gates,
    .stream_recurrent = delta_net_stream_recurrent,
    .test_chunk = SB_DELTA_RULE_CHUNK,
};

/* gated_delta_net.c - GatedDeltaNet of flash-linear-attention v0.3.2
 * (fla/layers/gated_deltanet.py) as the reference builds it: hidden_size=D, head_dim=D/H,
 * num_heads=H, use_short_conv=True, expand_v=2, conv_size=4, defaults otherwise (output
 * gate with fused gated RMSNorm, allow_neg_eigval False) (docs/models/fla_layers.md).
 *
 *   q, k = L2N(silu(conv(x Wq^T))), L2N(silu(conv(x Wk^T)))   [B, T, H, K]   K = D / H
 *   v    = silu(conv(x Wv^T))                                 [B, T, H, V]   V = 2K
 *   beta = sigmoid(x Wb^T)                                     [B, T, H]
 *   g    = -exp(A_log) softplus(x Wa^T + dt_bias)              [B, T, H]
 *   o    = K2(q, k, v, beta, g), scale K^-1/2
 *   out  = (RMSNorm(o) * w * silu(x Wg^T)) Wo^T                w [V] shared by the heads
 * The reference trains this layer in bfloat16 and (fla 0.3.x) cannot train it on sequences
 * of 64 frames or fewer; here float32 and any length. The same code builds
 * gated_delta_net_layered's mixer with another configuration (fla_mixer.h: 6 heads of the
 * benchmark's width, expand_v 2, eps 1e-6; layered.c). Docs: docs/models/fla_layers.md,
 * docs/models/layered.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/fla_mixer.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

/* state_dict order: the layer's own parameters first, then the submodules in construction
 * order (draw ranks give the construction order) */
enum {
    P_A_LOG,
    P_DT_BIAS,
    P_Q,
    P_K,
    P_V,
    P_A,
    P_B,
    P_Q_CONV,
    P_K_CONV,
    P_V_CONV,
    P_G,
    P_NORM,
    P_O,
    P_COUNT
};

#define CONV_SIZE 4
#define L2_EPS ((real)1e-6)

void sb_fla_init_A_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    sb_torch_uniform(rng, data, p->size, 0.0, 16.0);
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)logf((float)data[i]);
}

void sb_fla_init_dt_bias(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    const float span = (float)(log(0.1) - log(0.001)), lo = (float)log(0.001);
    sb_torch_uniform(rng, data, p->size, 0.0, 1.0); /* torch.rand */
    for (size_t i = 0; i < p->size; i++) {
        float dt = expf((float)data[i] * span + lo);
        dt = dt < 1e-4f ? 1e-4f : dt;
        data[i] = (real)(dt + logf(-expm1f(-dt)));
    }
}

/* RecNet's Gated DeltaNet: head_dim D/H, expand_v 2, eps 1e-5 */
static sb_fla_mixer gdn_recnet(const sb_model_config *cfg)
{
    const int H = cfg->n_head > 0 ? cfg->n_head : 1;
    sb_fla_mixer mx = {.H = H,
                       .K = cfg->d_model / H,
                       .V = 2 * cfg->d_model / H,
                       .short_conv = 1,
                       .norm_eps = 1e-5};
    return mx;
}

static sb_status gdn_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("gated_delta_net", "--feat_size", cfg->d_model, cfg->n_head, err);
}

int sb_gdn_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx)
{
    SB_ASSERT(mx->short_conv); /* both wrappers build Gated DeltaNet with its convolutions */
    const int H = mx->H, KA = H * mx->K, VA = H * mx->V;
    int h[1] = {H}, kd[2] = {KA, D}, vd[2] = {VA, D}, hd[2] = {H, D};
    int ck[3] = {KA, 1, CONV_SIZE}, cv[3] = {VA, 1, CONV_SIZE}, vn[1] = {mx->V}, od[2] = {D, VA};
    int first = ps->n;
    /* fla marks A_log and dt_bias _no_weight_decay; the reference's optimiser ignores the
     * mark (AdamW over all parameters), so they are decayed like the rest here too */
    sb_param *a = sb_params_add_named(ps, prefix, "A_log", 1, h, SB_INIT_CUSTOM, 0.0, 5);
    a->custom = sb_fla_init_A_log;
    sb_param *dt = sb_params_add_named(ps, prefix, "dt_bias", 1, h, SB_INIT_CUSTOM, 0.0, 6);
    dt->custom = sb_fla_init_dt_bias;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, kd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, kd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, vd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "a_proj.weight", 2, hd, SB_INIT_KAIMING, D, 3);
    sb_params_add_named(ps, prefix, "b_proj.weight", 2, hd, SB_INIT_KAIMING, D, 4);
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 7);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 8);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, cv, SB_INIT_KAIMING, CONV_SIZE, 9);
    sb_params_add_named(ps, prefix, "g_proj.weight", 2, vd, SB_INIT_KAIMING, D, 10);
    sb_params_add_named(ps, prefix, "o_norm.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, VA, 11);
    return ps->n - first;
}

static int gdn_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const sb_fla_mixer mx = gdn_recnet(cfg);
    return sb_gdn_mixer_params(ps, prefix, cfg->d_model, &mx);
}

sb_tensor *sb_gdn_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                        const sb_fla_mixer *mx)
{
    const int K = mx->K, V = mx->V;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    /* streaming state: sb_gdn_mixer_stream_floats */
    sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    q = qkv[0], k = qkv[1], v = qkv[2];
    sb_tensor *beta = sb_beta_gate(g, sb_linear(g, x, p[P_B], NULL), 1);
    sb_tensor *gate = sb_decay_gate(g, sb_linear(g, x, p[P_A], NULL), p[P_A_LOG], p[P_DT_BIAS]);
    q = sb_fla_heads(g, sb_l2norm(g, q, K, L2_EPS), K);
    k = sb_fla_heads(g, sb_l2norm(g, k, K, L2_EPS), K);
    v = sb_fla_heads(g, v, V);
    sb_tensor *o = sb_delta_rule(g, q, k, v, beta, gate, (real)(1.0 / sqrt((double)K)),
                                 SB_DELTA_RULE_CHUNK, S);
    sb_tensor *zg = sb_fla_heads(g, sb_linear(g, x, p[P_G], NULL), V);
    sb_tensor *y = sb_rmsnorm_gated(g, o, zg, p[P_NORM], (real)mx->norm_eps);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

sb_tensor *sb_gdn_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc)
{
    const int B = x->shape[0], T = x->shape[1], H = mx->H;
    sb_tensor *a = sb_linear(g, x, sb_model_param(m, l, P_A), NULL);
    sb_tensor *z = sb_linear(g, x, sb_model_param(m, l, P_B), NULL);
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    const real *dt_bias = sb_model_param(m, l, P_DT_BIAS)->data;
    int shape[3] = {B, T, 2 * H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            /* g = -exp(A_log) softplus(a + dt_bias): the decay is exp(g) */
            const double gl = -exp((double)A_log[h]) *
                              sb_probe_softplus((double)(a->data[r * H + h] + dt_bias[h]));
            out->data[r * 2 * H + h] = (real)exp(gl);
            out->data[r * 2 * H + H + h] = (real)sb_probe_sigmoid((double)z->data[r * H + h]);
        }
    *desc = (sb_gate_desc){.n_kinds = 2,
                           .n_groups = H,
                           .kind = {"decay exp(g)", "beta (write strength)"},
                           .hi = {1.0, 1.0}};
    return out;
}

static sb_tensor *gdn_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                  const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const sb_fla_mixer mx = gdn_recnet(&m->cfg);
    return sb_gdn_mixer_gates(g, m, l, x, &mx, desc);
}

static void gdn_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const sb_fla_mixer mx = gdn_recnet(cfg);
    sb_fla_mixer_stream_recurrent(&mx, history, count);
}

static sb_tensor *gdn_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const sb_fla_mixer mx = gdn_recnet(&m->cfg);
    return sb_gdn_mixer(g, m, l, x, NULL, &mx);
}

static sb_tensor *gdn_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     real *state)
{
    const sb_fla_mixer mx = gdn_recnet(&m->cfg);
    return sb_gdn_mixer(g, m, l, x, state, &mx);
}

/* Per sample: q, k (H K channels) and v (H V) conv histories, then the state (H K V); the
 * buffer of B samples is laid out field by field. */
size_t sb_gdn_mixer_stream_floats(const sb_fla_mixer *mx)
{
    const size_t H = (size_t)mx->H, K = (size_t)mx->K, V = (size_t)mx->V;
    return (CONV_SIZE - 1) * H * (2 * K + V) + H * K * V;
}

static size_t gdn_stream_state(const sb_model_config *cfg)
{
    const sb_fla_mixer mx = gdn_recnet(cfg);
    return sb_gdn_mixer_stream_floats(&mx);
}

double sb_gdn_mixer_flops(int Dm, const sb_fla_mixer *mx, int T)
{
    const double D = Dm, H = mx->H, K = mx->K, V = mx->V, KA = H * K, VA = H * V;
    const double q = T < SB_DELTA_RULE_CHUNK ? T : SB_DELTA_RULE_CHUNK;
    double proj = 2 * D * (KA + KA + VA + H + H + VA) + 2 * VA * D;
    double conv = 2.0 * CONV_SIZE * (2 * KA + VA);
    double rec = H * (6 * K * V + (q + 1) * (2 * K + 2 * V));
    return proj + conv + rec + 36 * D;
}

static double gdn_flops(const sb_model_config *cfg, int T)
{
    const sb_fla_mixer mx = gdn_recnet(cfg);
    return sb_gdn_mixer_flops(cfg->d_model, &mx, T);
}

static double gdn_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_gated_delta_net = {
    .name = "gated_delta_net",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DELTA, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = 2 D^2 / H"},
    .summary = "Gated DeltaNet (fla 0.3.2): delta rule with a data-dependent decay per head",
    .taxonomy = {"data-dependent scalar decay per head (exp(-e^A_log softplus)) + beta",
                 "scalar x (identity + rank-1)", "1", "L2 q, k; gated RMSNorm",
                 "no (eigenvalues in [0, alpha])", "d_k x d_v"},
    .check = gdn_check,
    .add_params = gdn_add_params,
    .forward = gdn_forward,
    .flops_per_token = gdn_flops,
    .state_size = gdn_state,
    .stream_state_floats = gdn_stream_state,
    .forward_stream = gdn_forward_stream,
    .probe_gates = gdn_probe_gates,
    .stream_recurrent = gdn_stream_recurrent,
    .test_chunk = SB_DELTA_RULE_CHUNK,
};

/* kda.c - Kimi Delta Attention, KimiDeltaAttention of flash-linear-attention at commit
 * bc3b101d (fla/layers/kda.py; recurrence as fla/ops/kda/naive.py), built as
 *   KimiDeltaAttention(hidden_size=D, head_dim=D/H, num_heads=H)
 * with every other argument at fla's default: expand_v=1 (so V = K = D/H), use_short_conv
 * True, conv_size 4, no conv bias, allow_neg_eigval False, safe_gate False, lower_bound None
 * (the softplus gate with A_log), num_v_heads = H, norm_eps 1e-5. head_dim = D/H and
 * num_heads = H are what the benchmark passes Gated DeltaNet (the existing fla layers take
 * their head count from the config), so the two layers share heads and key width and differ
 * in the gate's granularity; the rest that differs is listed in docs/models/kda.md.
 *
 *   q, k = L2N(silu(conv(x Wq^T))), L2N(silu(conv(x Wk^T)))     [B, T, H, K]
 *   v    = silu(conv(x Wv^T))                                   [B, T, H, V]
 *   beta = sigmoid(x Wb^T)                                      [B, T, H]
 *   g    = -exp(A_log[h]) softplus((x Wf0^T) Wf1^T + dt_bias)   [B, T, H, K]  (per channel)
 *   S_t  = (I - beta_t k_t k_t^T) diag(exp(g_t)) S_{t-1} + beta_t k_t v_t^T
 *   o_t  = K^-1/2 S_t^T q_t
 *   out  = (RMSNorm(o) * w * sigmoid((x Wg0^T) Wg1^T + bg)) Wo^T
 * The recurrence is sb_dplr in its decayed order with a = k, b = -beta k and the written key
 * beta k (ops_dplr.h).
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_dplr.h"
#include "ops/ops_fla.h"

/* state_dict order: the layer's own A_log, dt_bias, then the submodules in construction
 * order; draw ranks give the construction order (A_log and dt_bias are drawn after b_proj) */
enum {
    P_A_LOG,
    P_DT_BIAS,
    P_Q,
    P_K,
    P_V,
    P_Q_CONV,
    P_K_CONV,
    P_V_CONV,
    P_F0,
    P_F1,
    P_B,
    P_G0,
    P_G1,
    P_G1_BIAS,
    P_NORM,
    P_O,
    P_COUNT
};

#define CONV_SIZE 4
#define L2_EPS ((real)1e-6)
#define NORM_EPS 1e-5

typedef struct kda_dims {
    int H, K, V;
} kda_dims;

static kda_dims kda_dims_of(const sb_model_config *cfg)
{
    const int H = cfg->n_head > 0 ? cfg->n_head : 1;
    kda_dims d = {H, cfg->d_model / H, cfg->d_model / H}; /* expand_v = 1 */
    return d;
}

/* A_log = log(A), A = torch.empty(H).uniform_(1, 16), in float32 */
static void kda_init_A_log(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    sb_torch_uniform(rng, data, p->size, 1.0, 16.0);
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)logf((float)data[i]);
}

static sb_status kda_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("kda", "--feat_size", cfg->d_model, cfg->n_head, err);
}

static int kda_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const kda_dims d = kda_dims_of(cfg);
    const int D = cfg->d_model, H = d.H, KA = H * d.K, VA = H * d.V, V = d.V;
    int h[1] = {H}, ka[1] = {KA}, kd[2] = {KA, D}, vd[2] = {VA, D}, hd[2] = {H, D};
    int ck[3] = {KA, 1, CONV_SIZE}, cv[3] = {VA, 1, CONV_SIZE};
    int f0[2] = {V, D}, f1[2] = {KA, V}, g1[2] = {VA, V}, vb[1] = {VA}, vn[1] = {V};
    int od[2] = {D, VA};
    int first = ps->n;
    /* fla marks A_log and dt_bias _no_weight_decay; the benchmark's AdamW ignores the mark */
    sb_param *a = sb_params_add_named(ps, prefix, "A_log", 1, h, SB_INIT_CUSTOM, 0.0, 9);
    a->custom = kda_init_A_log;
    sb_param *dt = sb_params_add_named(ps, prefix, "dt_bias", 1, ka, SB_INIT_CUSTOM, 0.0, 10);
    dt->custom = sb_fla_init_dt_bias;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, kd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, kd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, vd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 3);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 4);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, cv, SB_INIT_KAIMING, CONV_SIZE, 5);
    sb_params_add_named(ps, prefix, "f_proj.0.weight", 2, f0, SB_INIT_KAIMING, D, 6);
    sb_params_add_named(ps, prefix, "f_proj.1.weight", 2, f1, SB_INIT_KAIMING, V, 7);
    sb_params_add_named(ps, prefix, "b_proj.weight", 2, hd, SB_INIT_KAIMING, D, 8);
    sb_params_add_named(ps, prefix, "g_proj.0.weight", 2, f0, SB_INIT_KAIMING, D, 11);
    sb_params_add_named(ps, prefix, "g_proj.1.weight", 2, g1, SB_INIT_KAIMING, V, 12);
    sb_params_add_named(ps, prefix, "g_proj.1.bias", 1, vb, SB_INIT_FANIN, V, 13);
    sb_params_add_named(ps, prefix, "o_norm.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, VA, 14);
    return ps->n - first;
}

static sb_tensor *kda_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const kda_dims d = kda_dims_of(&m->cfg);
    const int K = d.K, V = d.V;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    /* streaming state: the three conv histories, then the recurrent state (kda_stream_state) */
    sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    q = sb_fla_heads(g, sb_l2norm(g, qkv[0], K, L2_EPS), K);
    k = sb_fla_heads(g, sb_l2norm(g, qkv[1], K, L2_EPS), K);
    v = sb_fla_heads(g, qkv[2], V);
    sb_tensor *f = sb_linear(g, sb_linear(g, x, p[P_F0], NULL), p[P_F1], NULL);
    sb_tensor *gate = sb_fla_heads(g, sb_kda_gate(g, f, p[P_A_LOG], p[P_DT_BIAS]), K);
    sb_tensor *beta = sb_beta_gate(g, sb_linear(g, x, p[P_B], NULL), 1);
    /* (I - beta k k^T) P + beta k v^T with P = diag(exp(g)) S: a = k, b = -beta k */
    sb_tensor *kb = sb_dplr_scale_heads(g, k, beta, 1);
    sb_tensor *b = sb_dplr_scale_heads(g, kb, NULL, -1);
    sb_tensor *o = sb_dplr(g, q, kb, v, gate, k, b, (real)(1.0 / sqrt((double)K)), SB_DPLR_DECAYED,
                           SB_DPLR_CHUNK, S);
    /* FusedRMSNormGated with activation "sigmoid": RMSNorm(o) * w * sigmoid(z) */
    sb_tensor *z = sb_linear(g, sb_linear(g, x, p[P_G0], NULL), p[P_G1], p[P_G1_BIAS]);
    sb_tensor *y = sb_rmsnorm_gated(g, o, NULL, p[P_NORM], (real)NORM_EPS);
    y = sb_dplr_mul(g, y, sb_fla_heads(g, sb_sigmoid(g, z), V), 1);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

static sb_tensor *kda_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return kda_mixer(g, m, l, x, NULL);
}

static sb_tensor *kda_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     real *state)
{
    return kda_mixer(g, m, l, x, state);
}

/* Per sample: q, k (H K channels) and v (H V) conv histories, then the state (H K V); the
 * buffer of B samples is laid out field by field. */
static size_t kda_stream_state(const sb_model_config *cfg)
{
    const kda_dims d = kda_dims_of(cfg);
    const size_t H = (size_t)d.H, K = (size_t)d.K, V = (size_t)d.V;
    return (CONV_SIZE - 1) * H * (2 * K + V) + H * K * V;
}

static void kda_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const kda_dims d = kda_dims_of(cfg);
    const size_t H = (size_t)d.H, K = (size_t)d.K, V = (size_t)d.V;
    *history = (CONV_SIZE - 1) * H * (2 * K + V);
    *count = H * K * V;
}

/* The decay exp(g) averaged over each head's K channels, and beta. */
static sb_tensor *kda_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                  const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const kda_dims d = kda_dims_of(&m->cfg);
    const int B = x->shape[0], T = x->shape[1], H = d.H, K = d.K;
    sb_tensor *f = sb_linear(g, sb_linear(g, x, sb_model_param(m, l, P_F0), NULL),
                             sb_model_param(m, l, P_F1), NULL);
    sb_tensor *z = sb_linear(g, x, sb_model_param(m, l, P_B), NULL);
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    const real *dt_bias = sb_model_param(m, l, P_DT_BIAS)->data;
    int shape[3] = {B, T, 2 * H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            double sum = 0.0;
            for (int c = 0; c < K; c++) {
                const size_t j = (size_t)h * K + c;
                sum += exp(-exp((double)A_log[h]) *
                           sb_probe_softplus((double)(f->data[r * H * K + j] + dt_bias[j])));
            }
            out->data[r * 2 * H + h] = (real)(sum / K);
            out->data[r * 2 * H + H + h] = (real)sb_probe_sigmoid((double)z->data[r * H + h]);
        }
    *desc =
        (sb_gate_desc){.n_kinds = 2,
                       .n_groups = H,
                       .kind = {"decay exp(g) (mean over key channels)", "beta (write strength)"},
                       .hi = {1.0, 1.0}};
    return out;
}

static double kda_flops(const sb_model_config *cfg, int T)
{
    (void)T;
    const kda_dims d = kda_dims_of(cfg);
    const double D = cfg->d_model, H = d.H, K = d.K, V = d.V, KA = H * K, VA = H * V;
    double proj =
        2 * D * (2 * KA + VA + H) + 2 * (D * V + V * KA) + 2 * (D * V + V * VA) + 2 * VA * D;
    double conv = 2.0 * CONV_SIZE * (2 * KA + VA);
    double rec = H * 10 * K * V; /* decay, z = P^T a, two rank-1 writes, readout */
    return proj + conv + rec + 40 * D;
}

static double kda_state(const sb_model_config *cfg)
{
    const kda_dims d = kda_dims_of(cfg);
    return (double)d.H * d.K * d.V;
}

const sb_layer_type sb_layer_kda = {
    .name = "kda",
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DELTA, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = D^2 / H"},
    .summary = "Kimi Delta Attention (fla bc3b101d): delta rule with a data-dependent decay "
               "per key channel",
    .taxonomy = {"data-dependent decay per key channel (-exp(A_log) softplus, low-rank) + beta",
                 "(identity + rank-1) x diagonal", "1", "L2 q, k; sigmoid-gated RMSNorm",
                 "no (beta in (0, 1))", "d_k x d_v"},
    .check = kda_check,
    .add_params = kda_add_params,
    .forward = kda_forward,
    .flops_per_token = kda_flops,
    .state_size = kda_state,
    .stream_state_floats = kda_stream_state,
    .forward_stream = kda_forward_stream,
    .probe_gates = kda_probe_gates,
    .stream_recurrent = kda_stream_recurrent,
    .test_chunk = SB_DPLR_CHUNK,
};

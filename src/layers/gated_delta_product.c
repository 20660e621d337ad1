/* gated_delta_product.c - GatedDeltaProduct of flash-linear-attention v0.3.2
 * (fla/layers/gated_deltaproduct.py) as the reference builds it: hidden_size=D, head_dim=D/H,
 * num_heads=H, use_short_conv=True, num_householder=4, expand_v=2, conv_size=4, defaults
 * otherwise: forget gate, output gate with fused gated RMSNorm and allow_neg_eigval=True
 * (beta = 2 sigmoid) (docs/models/fla_layers.md).
 *
 *   q    = L2N(silu(conv(x Wq^T)))                 [B, T, H, K]     K = D / H
 *   kk   = L2N(silu(conv(x Wk^T)))                 [B, T, 4H, K]    step j of head h at j H + h
 *   vv   = silu(conv(x Wv^T))                      [B, T, 4H, V]    V = 2K
 *   beta = 2 sigmoid(x Wb^T)                       [B, T, 4H]
 *   g    = -exp(A_log) softplus(x Wa^T + dt_bias)  [B, T, H]
 *   o    = K2 with 4 Householder steps per token, scale K^-1/2
 *   out  = (RMSNorm(o) * w * silu(x Wg^T)) Wo^T
 * The reference trains in bfloat16 and (fla 0.3.x) cannot train on sequences of 64 frames or
 * fewer; here float32 and any length. Docs: docs/models/fla_layers.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

enum {
    P_A_LOG,
    P_DT_BIAS,
    P_Q,
    P_K,
    P_V,
    P_B,
    P_A,
    P_Q_CONV,
    P_K_CONV,
    P_V_CONV,
    P_G,
    P_NORM,
    P_O,
    P_COUNT
};

#define N_HOUSEHOLDER 4
#define CONV_SIZE 4
#define NORM_EPS ((real)1e-5)
#define L2_EPS ((real)1e-6)
/* tokens per chunk: 8 tokens = 32 interleaved steps (fla: 64 steps); measured fastest here */
#define GDP_CHUNK 8

static sb_status gdp_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("gated_delta_product", "--feat_size", cfg->d_model, cfg->n_head,
                                err);
}

static int gdp_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, H = cfg->n_head, V = 2 * D / H, n = N_HOUSEHOLDER;
    int h[1] = {H}, dd[2] = {D, D}, kd[2] = {n * D, D}, vd[2] = {2 * n * D, D};
    int bd[2] = {n * H, D}, hd[2] = {H, D}, d2d[2] = {2 * D, D};
    int cq[3] = {D, 1, CONV_SIZE}, ck[3] = {n * D, 1, CONV_SIZE}, cv[3] = {2 * n * D, 1, CONV_SIZE};
    int vn[1] = {V}, od[2] = {D, 2 * D};
    int first = ps->n;
    /* fla marks A_log and dt_bias _no_weight_decay; the reference's optimiser ignores the
     * mark (AdamW over all parameters), so they are decayed like the rest here too */
    sb_param *a = sb_params_add_named(ps, prefix, "A_log", 1, h, SB_INIT_CUSTOM, 0.0, 5);
    a->custom = sb_fla_init_A_log;
    sb_param *dt = sb_params_add_named(ps, prefix, "dt_bias", 1, h, SB_INIT_CUSTOM, 0.0, 6);
    dt->custom = sb_fla_init_dt_bias;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, kd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, vd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "b_proj.weight", 2, bd, SB_INIT_KAIMING, D, 3);
    sb_params_add_named(ps, prefix, "a_proj.weight", 2, hd, SB_INIT_KAIMING, D, 4);
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, cq, SB_INIT_KAIMING, CONV_SIZE, 7);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, ck, SB_INIT_KAIMING, CONV_SIZE, 8);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, cv, SB_INIT_KAIMING, CONV_SIZE, 9);
    sb_params_add_named(ps, prefix, "g_proj.weight", 2, d2d, SB_INIT_KAIMING, D, 10);
    sb_params_add_named(ps, prefix, "o_norm.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, 2 * D, 11);
    return ps->n - first;
}

static sb_tensor *gdp_run(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const int D = x->shape[2];
    const int H = m->cfg.n_head, K = D / H, V = 2 * D / H;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    /* streaming state: gdp_stream_state */
    sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    q = qkv[0], k = qkv[1], v = qkv[2];
    sb_tensor *beta = sb_beta_gate(g, sb_linear(g, x, p[P_B], NULL), 2);
    sb_tensor *gate = sb_decay_gate(g, sb_linear(g, x, p[P_A], NULL), p[P_A_LOG], p[P_DT_BIAS]);
    q = sb_fla_heads(g, sb_l2norm(g, q, K, L2_EPS), K);
    k = sb_fla_heads(g, sb_l2norm(g, k, K, L2_EPS), K);
    v = sb_fla_heads(g, v, V);
    sb_tensor *o =
        sb_delta_rule(g, q, k, v, beta, gate, (real)(1.0 / sqrt((double)K)), GDP_CHUNK, S);
    sb_tensor *zg = sb_fla_heads(g, sb_linear(g, x, p[P_G], NULL), V);
    sb_tensor *y = sb_rmsnorm_gated(g, o, zg, p[P_NORM], NORM_EPS);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

static sb_tensor *gdp_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return gdp_run(g, m, l, x, NULL);
}

static sb_tensor *gdp_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                     real *state)
{
    return gdp_run(g, m, l, x, state);
}

/* Per sample: q (D channels), k (4D) and v (8D) conv histories, then the state (H K V); the
 * buffer of B samples is laid out field by field. */
static size_t gdp_stream_state(const sb_model_config *cfg)
{
    const size_t D = (size_t)cfg->d_model, H = (size_t)cfg->n_head;
    return (CONV_SIZE - 1) * (1 + 3 * N_HOUSEHOLDER) * D + H * (D / H) * (2 * D / H);
}

/* probe: the decay exp(g) per head and beta = 2 sigmoid(.) averaged over the 4 Householder
 * steps of each head. */
static sb_tensor *gdp_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                  const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int B = x->shape[0], T = x->shape[1], H = m->cfg.n_head, n = N_HOUSEHOLDER;
    sb_tensor *a = sb_linear(g, x, sb_model_param(m, l, P_A), NULL);
    sb_tensor *z = sb_linear(g, x, sb_model_param(m, l, P_B), NULL); /* [B, T, n H] */
    const real *A_log = sb_model_param(m, l, P_A_LOG)->data;
    const real *dt_bias = sb_model_param(m, l, P_DT_BIAS)->data;
    int shape[3] = {B, T, 2 * H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            const double gl = -exp((double)A_log[h]) *
                              sb_probe_softplus((double)(a->data[r * H + h] + dt_bias[h]));
            double beta = 0.0;
            for (int j = 0; j < n; j++)
                beta += 2.0 * sb_probe_sigmoid((double)z->data[r * n * H + (size_t)j * H + h]);
            out->data[r * 2 * H + h] = (real)exp(gl);
            out->data[r * 2 * H + H + h] = (real)(beta / n);
        }
    *desc = (sb_gate_desc){.n_kinds = 2,
                           .n_groups = H,
                           .kind = {"decay exp(g)", "beta (mean of 4 steps)"},
                           .hi = {1.0, 2.0}};
    return out;
}

/* probe: after the q (D), k (4D) and v (8D) conv histories, the H K V state */
static void gdp_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const size_t D = (size_t)cfg->d_model, H = (size_t)cfg->n_head;
    *history = (CONV_SIZE - 1) * (1 + 3 * N_HOUSEHOLDER) * D;
    *count = H * (D / H) * (2 * D / H);
}

static double gdp_flops(const sb_model_config *cfg, int T)
{
    const double D = cfg->d_model, H = cfg->n_head, K = D / H, V = 2 * D / H, n = N_HOUSEHOLDER;
    const double q = n * (T < GDP_CHUNK ? T : GDP_CHUNK); /* steps per chunk */
    double proj = 2 * D * (D + n * D + 2 * n * D + n * H + H + 2 * D) + 2 * 2 * D * D;
    double conv = 2.0 * CONV_SIZE * (1 + 3 * n) * D;
    /* per head: n steps of (W S0, state update: 4KV; Gram, solves: (q+1)(K+V)), one readout
     * (Q S0: 2KV; Q K^T, Pm Vn over (q+1)/2 steps) */
    double rec = H * (n * (4 * K * V + (q + 1) * (K + V)) + 2 * K * V + (q + 1) * (K + V));
    return proj + conv + rec + 60 * D;
}

static double gdp_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_gated_delta_product = {
    .name = "gated_delta_product",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_HOUSEHOLDER_PRODUCT, SB_UPDATE_RANKN,
             SB_MEMORY_CONSTANT, "H K V = 2 D^2 / H"},
    .summary = "Gated DeltaProduct (fla 0.3.2): 4 Householder delta steps per token, decay, "
               "negative eigenvalues",
    .taxonomy = {"data-dependent scalar decay per head + 4 betas per token",
                 "scalar x product of 4 generalised Householders (identity + rank <= 4)", "<= 4",
                 "L2 q, k; gated RMSNorm", "yes (beta in (0, 2): each factor in (-1, 1])",
                 "d_k x d_v"},
    .check = gdp_check,
    .add_params = gdp_add_params,
    .forward = gdp_forward,
    .flops_per_token = gdp_flops,
    .state_size = gdp_state,
    .stream_state_floats = gdp_stream_state,
    .forward_stream = gdp_forward_stream,
    .probe_gates = gdp_probe_gates,
    .stream_recurrent = gdp_stream_recurrent,
    .test_chunk = GDP_CHUNK,
};

/* linear_attn.c - LinearAttention of flash-linear-attention (fla/layers/linear_attn.py, fla
 * commit bc3b101d) at its defaults, with hidden_size=D and num_heads=H (cfg->n_head, as the
 * other fla layers take it; fla's own default is 8): mode 'chunk', expand_k = expand_v = 1,
 * feature_map 'elementwise_product' (HadamardFeatureMap, untied for q and k),
 * output_norm 'rmsnorm', norm_q = norm_k = False, do_feature_map_norm = False (no
 * denominator), norm_eps 1e-5, no short convolution, no gate. The floor of the GLA family:
 * the same kernel K1 with no decay at all.
 *
 *   q, k = x Wq^T, x Wk^T                                 [B, T, H, K]   K = D / H
 *   v    = x Wv^T                                         [B, T, H, V]   V = D / H
 *   q    = (q A1^T + a1) ⊙ (q A2^T + a2)                   feature_map_q, shared by the heads
 *   k    = (k C1^T + c1) ⊙ (k C2^T + c2)                   feature_map_k
 *   o_t  = K^-1/2 sum_{s <= t} (q_t . k_s) v_s             K1 with no gate (S_t = S_{t-1} + k v^T)
 *   y    = RMSNorm(o) * w                                  per head, w [V] shared by the heads
 *   out  = y Wo^T
 * Docs: docs/models/linear_attn.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_gla_family.h"

/* parameters in state_dict order (= construction order: the feature maps come first) */
enum {
    P_FQ1_W,
    P_FQ1_B,
    P_FQ2_W,
    P_FQ2_B,
    P_FK1_W,
    P_FK1_B,
    P_FK2_W,
    P_FK2_B,
    P_Q,
    P_K,
    P_V,
    P_NORM,
    P_O,
    P_COUNT
};

#define NORM_EPS ((real)1e-5)

static sb_status linear_attn_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("linear_attn", "--feat_size", cfg->d_model, cfg->n_head, err);
}

static int linear_attn_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, K = D / cfg->n_head;
    int kk[2] = {K, K}, kb[1] = {K}, dd[2] = {D, D}, vn[1] = {K};
    int first = ps->n;
    /* HadamardFeatureMap(head_dim=K): two nn.Linear(K, K) with bias, for q then for k */
    const char *const maps[4] = {"feature_map_q.layer1", "feature_map_q.layer2",
                                 "feature_map_k.layer1", "feature_map_k.layer2"};
    for (int i = 0; i < 4; i++) {
        char w[64], b[64];
        snprintf(w, sizeof w, "%s.weight", maps[i]);
        snprintf(b, sizeof b, "%s.bias", maps[i]);
        sb_params_add_named(ps, prefix, w, 2, kk, SB_INIT_KAIMING, K, 2 * i);
        sb_params_add_named(ps, prefix, b, 1, kb, SB_INIT_FANIN, K, 2 * i + 1);
    }
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 8);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, dd, SB_INIT_KAIMING, D, 9);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, dd, SB_INIT_KAIMING, D, 10);
    sb_params_add_named(ps, prefix, "norm.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, dd, SB_INIT_KAIMING, D, 11);
    return ps->n - first;
}

/* The layer over whole sequences (state == NULL) or streamed (state: the recurrent state
 * [B, H, K, V]; the layer has no convolution). */
static sb_tensor *linear_attn_run(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const int K = m->cfg.d_model / m->cfg.n_head;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_fla_heads(g, sb_linear(g, x, p[P_Q], NULL), K);
    sb_tensor *k = sb_fla_heads(g, sb_linear(g, x, p[P_K], NULL), K);
    sb_tensor *v = sb_fla_heads(g, sb_linear(g, x, p[P_V], NULL), K);
    q = sb_hadamard_map(g, q, p[P_FQ1_W], p[P_FQ1_B], p[P_FQ2_W], p[P_FQ2_B]);
    k = sb_hadamard_map(g, k, p[P_FK1_W], p[P_FK1_B], p[P_FK2_W], p[P_FK2_B]);
    sb_tensor *o = sb_linear_attn(g, q, k, v, NULL, (real)(1.0 / sqrt((double)K)),
                                  SB_LINEAR_ATTN_CHUNK, state);
    sb_tensor *y = sb_rmsnorm_gated(g, o, NULL, p[P_NORM], NORM_EPS);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

static sb_tensor *linear_attn_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return linear_attn_run(g, m, l, x, NULL);
}

static sb_tensor *linear_attn_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                             real *state)
{
    return linear_attn_run(g, m, l, x, state);
}

/* per sample: the recurrent state H K V (K = V = D / H) */
static size_t linear_attn_stream_state(const sb_model_config *cfg)
{
    const size_t H = (size_t)cfg->n_head, K = (size_t)(cfg->d_model / cfg->n_head);
    return H * K * K;
}

static double linear_attn_flops(const sb_model_config *cfg, int T)
{
    const double D = cfg->d_model, H = cfg->n_head, K = D / H, V = K;
    const double q = T < SB_LINEAR_ATTN_CHUNK ? T : SB_LINEAR_ATTN_CHUNK;
    double proj = 2 * D * (3 * D) + 2 * D * D;
    double maps = 2 * H * (2 * 2 * K * K + K); /* two K x K linears and a product, q and k */
    /* per head: as GLA's (the decay factors multiply by one here) */
    double rec = H * (5 * K * V + (q + 1) * (K + V));
    return proj + maps + rec + 10 * D; /* + the norm */
}

static double linear_attn_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (D / H);
}

const sb_layer_type sb_layer_linear_attn = {
    .name = "linear_attn",
    .axes = {SB_GATE_NONE, SB_FORGET_NONE, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = D^2 / H"},
    .summary = "Linear Attention (fla): Hadamard feature maps, no gate, no decay",
    .taxonomy = {"none", "identity", "1", "Hadamard feature map; RMSNorm per head", "no (all 1)",
                 "d_k x d_v"},
    .check = linear_attn_check,
    .add_params = linear_attn_add_params,
    .forward = linear_attn_forward,
    .flops_per_token = linear_attn_flops,
    .state_size = linear_attn_state,
    .stream_state_floats = linear_attn_stream_state,
    .forward_stream = linear_attn_forward_stream,
    .test_chunk = SB_LINEAR_ATTN_CHUNK,
    /* With nothing forgotten, o_t sums every past (q_t . k_s) v_s; the Hadamard maps' outputs
     * have both signs, so the sum cancels and the per-head RMSNorm scales the rounding of
     * bf16 operands up with it: 300 frames at width 64 moved the logits by 0.056 at
     * initialisation (test_bf16's bound is 3e-2). The products stay float32, as MesaNet's. */
    .fp32_products = 1,
};

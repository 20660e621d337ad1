/* path_attn.c - PaTHAttention of flash-linear-attention (fla/layers/path_attn.py, commit
 * bc3b101d) at its defaults: hidden_size = D, num_heads = H (the benchmark's head count, as
 * the other fla layers take it), num_kv_heads = H, use_forget_gate False, use_qk_norm False,
 * use_low_rank_w True (rank 32), use_w_shortconv True, conv_size 3, conv_bias False.
 *
 *   q, k, v = x Wq^T, x Wk^T, x Wv^T                   [B, T, H, Dh]   Dh = D / H
 *   w       = L2N(silu(conv((x W0^T) W1^T)))           [B, T, H, Dh]   W0 [32, D], W1 [D, 32]
 *   beta    = 2 sigmoid(x Wb^T + bb)                   [B, T, H]       (0, 2): fla always
 *                                                                     allows negative
 *                                                                     eigenvalues here
 *   o_i     = sum_j softmax_j(Dh^-1/2 q_i^T H_i ... H_{j+1} k_j) v_j,  H_s = I - beta_s w_s w_s^T
 *   out     = o Wo^T
 * Attention has no fixed-size recurrent state (the key cache grows with T, each cached key
 * multiplied by the new token's H_t), so, as the transformer, there is no streaming form:
 * evaluation runs whole sequences. Docs: docs/models/path_attn.md.
 */
#include <math.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_path.h"

/* parameters in state_dict order (= construction order) */
enum { P_Q, P_K, P_V, P_W0, P_W1, P_W_CONV, P_BT, P_BT_B, P_O, P_COUNT };

#define W_RANK 32 /* the low-rank w projection's inner width */
#define CONV_SIZE 3
#define L2_EPS ((real)1e-6)

static sb_status path_check(const sb_model_config *cfg, sb_error *err)
{
    return sb_layer_check_heads("path_attn", "--feat_size", cfg->d_model, cfg->n_head, err);
}

static int path_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, H = cfg->n_head;
    int dd[2] = {D, D}, w0[2] = {W_RANK, D}, w1[2] = {D, W_RANK}, cw[3] = {D, 1, CONV_SIZE};
    int hd[2] = {H, D}, h[1] = {H};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, dd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, dd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "w_proj.0.weight", 2, w0, SB_INIT_KAIMING, D, 3);
    sb_params_add_named(ps, prefix, "w_proj.1.weight", 2, w1, SB_INIT_KAIMING, W_RANK, 4);
    /* nn.Conv1d(groups=C): fan_in = 1 * kernel */
    sb_params_add_named(ps, prefix, "w_conv1d.weight", 3, cw, SB_INIT_KAIMING, CONV_SIZE, 5);
    sb_params_add_named(ps, prefix, "bt_proj.weight", 2, hd, SB_INIT_KAIMING, D, 6);
    sb_params_add_named(ps, prefix, "bt_proj.bias", 1, h, SB_INIT_FANIN, D, 7);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, dd, SB_INIT_KAIMING, D, 8);
    return ps->n - first;
}

static sb_tensor *path_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const int Dh = m->cfg.d_model / m->cfg.n_head;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_fla_heads(g, sb_linear(g, x, p[P_Q], NULL), Dh);
    sb_tensor *k = sb_fla_heads(g, sb_linear(g, x, p[P_K], NULL), Dh);
    sb_tensor *v = sb_fla_heads(g, sb_linear(g, x, p[P_V], NULL), Dh);
    sb_tensor *w = sb_linear(g, sb_linear(g, x, p[P_W0], NULL), p[P_W1], NULL);
    w = sb_short_conv(g, w, p[P_W_CONV]);
    w = sb_fla_heads(g, sb_l2norm(g, w, Dh, L2_EPS), Dh);
    sb_tensor *beta = sb_beta_gate(g, sb_linear(g, x, p[P_BT], p[P_BT_B]), 2);
    sb_tensor *o = sb_path_attn(g, q, k, v, w, beta, SB_PATH_ATTN_BLOCK);
    return sb_linear(g, sb_fla_flat(g, o), p[P_O], NULL);
}

/* probe: beta = 2 sigmoid(x Wb^T + bb), the strength of each token's Householder factor */
static sb_tensor *path_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                   const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const int H = m->cfg.n_head;
    sb_tensor *z = sb_linear(g, x, sb_model_param(m, l, P_BT), sb_model_param(m, l, P_BT_B));
    sb_tensor *out = sb_tensor_new(g, 3, z->shape);
    for (size_t i = 0; i < out->size; i++)
        out->data[i] = (real)(2.0 * sb_probe_sigmoid((double)z->data[i]));
    *desc = (sb_gate_desc){.n_kinds = 1,
                           .n_groups = H,
                           .kind = {"beta (Householder strength, 2 sigmoid)"},
                           .hi = {2.0}};
    return out;
}

static double path_flops(const sb_model_config *cfg, int T)
{
    const double D = cfg->d_model, H = cfg->n_head;
    /* q, k, v, o, the rank-32 w pair, beta; the convolution; per key (T + 1) / 2 on
     * average: the score (2 Dh), the walk's Householder step (4 Dh) and P V (2 Dh) per head,
     * the softmax ~5 per head; ~30 D elementwise (silu, L2 norm, sigmoid) */
    return 2 * D * (4 * D + 2 * W_RANK + H) + 2.0 * CONV_SIZE * D +
           (8 * D + 5 * H) * (T + 1) / 2.0 + 30 * D;
}

static double path_state(const sb_model_config *cfg)
{
    (void)cfg;
    return 0.0; /* a key/value cache that grows with T */
}

const sb_layer_type sb_layer_path_attn = {
    .name = "path_attn",
    .axes = {SB_GATE_NONE, SB_FORGET_NONE, SB_TRANSITION_ATTENTION_HOUSEHOLDER, SB_UPDATE_APPEND,
             SB_MEMORY_LINEAR, "2 T D (the keys and values of every frame)"},
    .summary = "PaTH attention (fla): softmax attention, positions as products of "
               "data-dependent Householder transforms",
    .taxonomy = {"data-dependent beta (2 sigmoid) of each Householder factor; no forget gate",
                 "none: softmax attention; cached keys multiplied by I - beta w w^T per token",
                 "n/a (appends k, v)", "L2 w; softmax", "yes (beta in (0, 2))", "O(T)"},
    .check = path_check,
    .add_params = path_add_params,
    .forward = path_forward,
    .flops_per_token = path_flops,
    .state_size = path_state,
    .probe_gates = path_probe_gates,
    .test_chunk = SB_PATH_ATTN_BLOCK, /* the kernel's query blocks */
};

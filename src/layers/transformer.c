/* transformer.c - the reference's TransformerDecoderLayer (models/ssm_models.py).
 *
 *   q, k, v = x W^T + b                  [B, T, H, Dh]
 *   q, k = RMSNorm(q), RMSNorm(k)        weights shared by the heads, eps 1e-8 on the RMS
 *   q, k = RoPE(q), RoPE(k)              base --rope_base (1000)
 *   o = causal softmax attention          scale 1/sqrt(Dh)
 *   x1 = x + RMSNorm_out(o W_o^T + b_o)
 *   f = linear2(SwiGLU_beta(linear1(x1)))
 *   return x1 + Dropout(f)                (RecNet adds x again: the doubled skip path)
 * Derivations: docs/models/transformer.md.
 */
#include <math.h>
#include <stdio.h>

#include "layers/layer.h"
#include "ops/ops.h"

/* parameters in state_dict order */
enum {
    P_BETA,
    P_Q_W,
    P_Q_B,
    P_K_W,
    P_K_B,
    P_V_W,
    P_V_B,
    P_INV_FREQ,
    P_O_W,
    P_O_B,
    P_Q_NORM,
    P_K_NORM,
    P_OUT_NORM,
    P_L1_W,
    P_L1_B,
    P_L2_W,
    P_L2_B,
    P_COUNT
};

#define RMS_EPS ((real)1e-8)

/* rotary.inv_freq = (1 / base) ** (arange(0, Dh, 2) / Dh), in float32 as torch does */
static void init_inv_freq(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)rng;
    const sb_model_config *cfg = ctx;
    int Dh = cfg->d_model / cfg->n_head;
    float base_inv = (float)(1.0 / cfg->rope_base);
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)powf(base_inv, (float)(2 * i) / (float)Dh);
}

static sb_status transformer_check(const sb_model_config *cfg, sb_error *err)
{
    sb_status heads =
        sb_layer_check_heads("transformer", "--feat_size", cfg->d_model, cfg->n_head, err);
    if (heads != SB_OK)
        return heads;
    if ((cfg->d_model / cfg->n_head) % 2 != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "transformer: head width %d (--feat_size %d / %d heads) must be even "
                            "for the rotary embedding",
                            cfg->d_model / cfg->n_head, cfg->d_model, cfg->n_head);
    if (!(cfg->rope_base > 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "--rope_base %g must be above 1", cfg->rope_base);
    return SB_OK;
}

/* train.py builds the transformer 768 wide for --feat_size 648 and 1280 wide for 1296 */
static int transformer_model_width(int feat_size)
{
    if (feat_size == 648)
        return 768;
    if (feat_size == 1296)
        return 1280;
    return feat_size;
}

static sb_status transformer_check_feat_size(int feat_size, sb_error *err)
{
    if (feat_size == 960)
        return sb_error_set(err, SB_ERR_EXCLUDED,
                            "--feat_size 960 with the transformer: train.py skips this run (its "
                            "positional code fails there); use another width");
    return SB_OK;
}

static int transformer_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, Dh = D / cfg->n_head;
    int one[1] = {1}, dd[2] = {D, D}, d[1] = {D}, dh[1] = {Dh}, half[1] = {Dh / 2};
    int l1[2] = {8 * D, D}, l1b[1] = {8 * D}, l2[2] = {D, 4 * D};
    int first = ps->n;
    /* state_dict order; the ranks give the construction (draw) order: q, k, v, out_proj,
     * linear1, linear2; constants draw nothing */
    sb_params_add_named(ps, prefix, "beta", 1, one, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "q_proj.bias", 1, d, SB_INIT_FANIN, D, 1);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, dd, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "k_proj.bias", 1, d, SB_INIT_FANIN, D, 3);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, dd, SB_INIT_KAIMING, D, 4);
    sb_params_add_named(ps, prefix, "v_proj.bias", 1, d, SB_INIT_FANIN, D, 5);
    sb_param *inv =
        sb_params_add_named(ps, prefix, "rotary.inv_freq", 1, half, SB_INIT_CUSTOM, 0.0, 100);
    inv->custom = init_inv_freq;
    inv->custom_ctx = cfg;
    inv->flags |= SB_PARAM_BUFFER;
    sb_params_add_named(ps, prefix, "out_proj.weight", 2, dd, SB_INIT_KAIMING, D, 6);
    sb_params_add_named(ps, prefix, "out_proj.bias", 1, d, SB_INIT_FANIN, D, 7);
    sb_params_add_named(ps, prefix, "q_norm.weight", 1, dh, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "k_norm.weight", 1, dh, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "out_norm.weight", 1, d, SB_INIT_CONST, 1.0, 100);
    sb_params_add_named(ps, prefix, "linear1.weight", 2, l1, SB_INIT_KAIMING, D, 8);
    sb_params_add_named(ps, prefix, "linear1.bias", 1, l1b, SB_INIT_FANIN, D, 9);
    sb_params_add_named(ps, prefix, "linear2.weight", 2, l2, SB_INIT_KAIMING, 4 * D, 10);
    sb_params_add_named(ps, prefix, "linear2.bias", 1, d, SB_INIT_FANIN, 4 * D, 11);
    return ps->n - first;
}

static sb_tensor *transformer_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    const int H = m->cfg.n_head, Dh = D / H;
    sb_tensor *p[P_COUNT];
    for (int k = 0; k < P_COUNT; k++)
        p[k] = sb_model_param(m, l, k);
    int heads[4] = {B, T, H, Dh}, flat[3] = {B, T, D};
    sb_tensor *q = sb_tensor_reshape(g, sb_linear(g, x, p[P_Q_W], p[P_Q_B]), 4, heads);
    sb_tensor *k = sb_tensor_reshape(g, sb_linear(g, x, p[P_K_W], p[P_K_B]), 4, heads);
    sb_tensor *v = sb_tensor_reshape(g, sb_linear(g, x, p[P_V_W], p[P_V_B]), 4, heads);
    /* normalise first, then rotate */
    q = sb_rope(g, sb_rmsnorm_rms_eps(g, q, p[P_Q_NORM], RMS_EPS), p[P_INV_FREQ]->data);
    k = sb_rope(g, sb_rmsnorm_rms_eps(g, k, p[P_K_NORM], RMS_EPS), p[P_INV_FREQ]->data);
    sb_tensor *o = sb_tensor_reshape(g, sb_attention_causal(g, q, k, v), 3, flat);
    sb_tensor *a = sb_linear(g, o, p[P_O_W], p[P_O_B]);
    sb_tensor *x1 = sb_add(g, x, sb_rmsnorm_rms_eps(g, a, p[P_OUT_NORM], RMS_EPS));
    sb_tensor *h = sb_linear(g, x1, p[P_L1_W], p[P_L1_B]);
    sb_tensor *f = sb_linear(g, sb_swiglu_beta(g, h, p[P_BETA]), p[P_L2_W], p[P_L2_B]);
    f = sb_dropout(g, f, (real)m->cfg.dropout);
    return sb_add(g, x1, f);
}

/* probe: for every query frame t and head, the share of its attention weight on gap frames,
 * sum over gap keys s <= t of softmax_s(q_t . k_s / sqrt(Dh)), with q and k normalised and
 * rotated as in the forward. On symbol frames this is the attention mass from symbol frames
 * that falls on gap frames (docs/probe.md). */
static sb_tensor *transformer_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                          const uint8_t *gap, sb_gate_desc *desc)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    const int H = m->cfg.n_head, Dh = D / H;
    sb_tensor *p[P_COUNT];
    for (int k = 0; k < P_COUNT; k++)
        p[k] = sb_model_param(m, l, k);
    int heads[4] = {B, T, H, Dh};
    sb_tensor *q = sb_tensor_reshape(g, sb_linear(g, x, p[P_Q_W], p[P_Q_B]), 4, heads);
    sb_tensor *k = sb_tensor_reshape(g, sb_linear(g, x, p[P_K_W], p[P_K_B]), 4, heads);
    q = sb_rope(g, sb_rmsnorm_rms_eps(g, q, p[P_Q_NORM], RMS_EPS), p[P_INV_FREQ]->data);
    k = sb_rope(g, sb_rmsnorm_rms_eps(g, k, p[P_K_NORM], RMS_EPS), p[P_INV_FREQ]->data);
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    double *score = sb_graph_alloc(g, (size_t)T * sizeof *score);
    const double scale = 1.0 / sqrt((double)Dh);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const real *qt = q->data + (((size_t)b * T + t) * H + h) * Dh;
                double mx = -(double)INFINITY;
                for (int s = 0; s <= t; s++) {
                    const real *ks = k->data + (((size_t)b * T + s) * H + h) * Dh;
                    double dot = 0.0;
                    for (int i = 0; i < Dh; i++)
                        dot += (double)qt[i] * (double)ks[i];
                    score[s] = dot * scale;
                    mx = score[s] > mx ? score[s] : mx;
                }
                double sum = 0.0, on_gap = 0.0;
                for (int s = 0; s <= t; s++) {
                    const double e = exp(score[s] - mx);
                    sum += e;
                    on_gap += gap[(size_t)b * T + s] ? e : 0.0;
                }
                out->data[((size_t)b * T + t) * H + h] = (real)(on_gap / sum);
            }
    *desc = (sb_gate_desc){
        .n_kinds = 1, .n_groups = H, .kind = {"attention on gap frames"}, .hi = {1.0}};
    return out;
}

static double transformer_flops(const sb_model_config *cfg, int T)
{
    /* docs/spec/flops.md: 32 D^2 + (2D + 2H)(T + 1) + ~60 D, averaged over t */
    double D = cfg->d_model, H = cfg->n_head;
    return 32.0 * D * D + (2.0 * D + 2.0 * H) * (T + 1) + 60.0 * D;
}

static double transformer_state(const sb_model_config *cfg)
{
    (void)cfg;
    return 0.0; /* a KV cache that grows with T */
}

const sb_layer_type sb_layer_transformer = {
    .name = "transformer",
    .axes = {SB_GATE_NONE, SB_FORGET_NONE, SB_TRANSITION_ATTENTION, SB_UPDATE_APPEND,
             SB_MEMORY_LINEAR, "2 T D (the keys and values of every frame)"},
    .summary = "softmax attention with QK-RMSNorm, RoPE and a SwiGLU FFN (the paper's baseline)",
    .taxonomy = {"none", "none: softmax attention over a cache that grows with T",
                 "n/a (appends k, v)", "QK-RMSNorm, RoPE; softmax; out RMSNorm", "n/a", "O(T)"},
    .check = transformer_check,
    .add_params = transformer_add_params,
    .forward = transformer_forward,
    .flops_per_token = transformer_flops,
    .state_size = transformer_state,
    .probe_gates = transformer_probe_gates,
    .model_width = transformer_model_width,
    .check_feat_size = transformer_check_feat_size,
    .test_chunk = 128, /* the attention's query blocks */
};

/* retnet.c - MultiScaleRetention of flash-linear-attention v0.3.2
 * (fla/layers/multiscale_retention.py) as the reference builds it: hidden_size=D,
 * num_heads=H, use_short_conv=True, expand_k=1, expand_v=2, conv_size=4, every other argument
 * at its default (docs/models/fla_layers.md).
 *
 *   q, k = silu(conv(x Wq^T)), silu(conv(x Wk^T))      [B, T, H, K]   K = D / H
 *   v    = silu(conv(x Wv^T))                          [B, T, H, V]   V = 2D / H
 *   q, k = RoPE(q), RoPE(k)                            base 10000, halves rotated, positions 0..
 *   o    = K1(q, k, v, g_h), scale K^-1/2              fixed decay g_h = ln(1 - 2^(-5-h))
 *   y    = RMSNorm(o) * w * silu(x Wg^T)               per head, w [V] shared by the heads
 *   out  = y Wo^T
 * rotary.inv_freq is a non-persistent buffer of the reference: not a parameter here either.
 * Docs: docs/models/retnet.md.
 */
#include <tgmath.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

/* parameters in state_dict order (= construction order) */
enum { P_Q, P_K, P_V, P_G, P_Q_CONV, P_K_CONV, P_V_CONV, P_O, P_NORM, P_COUNT };

#define CONV_SIZE 4
#define NORM_EPS ((real)1e-5)
#define ROPE_BASE 10000.0f
#define MAX_HEAD_K 256 /* fla asserts head_k_dim <= 256 (its rotary kernel) */

static sb_status retnet_check(const sb_model_config *cfg, sb_error *err)
{
    sb_status heads = sb_layer_check_heads("retnet", "--feat_size", cfg->d_model, cfg->n_head, err);
    if (heads != SB_OK)
        return heads;
    const int K = cfg->d_model / cfg->n_head;
    if (K % 2 != 0 || K > MAX_HEAD_K)
        return sb_error_set(err, SB_ERR_INVALID,
                            "retnet: head width %d (--feat_size %d / %d heads) must be even and at "
                            "most %d for the rotary embedding; choose another --feat_size",
                            K, cfg->d_model, cfg->n_head, MAX_HEAD_K);
    return SB_OK;
}

static int retnet_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int D = cfg->d_model, V = 2 * D / cfg->n_head;
    int dd[2] = {D, D}, d2d[2] = {2 * D, D}, cd[3] = {D, 1, CONV_SIZE};
    int c2d[3] = {2 * D, 1, CONV_SIZE}, od[2] = {D, 2 * D}, vn[1] = {V};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, dd, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, dd, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, d2d, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "g_proj.weight", 2, d2d, SB_INIT_KAIMING, D, 3);
    /* nn.Conv1d(groups=C): fan_in = 1 * kernel */
    sb_params_add_named(ps, prefix, "q_conv1d.weight", 3, cd, SB_INIT_KAIMING, CONV_SIZE, 4);
    sb_params_add_named(ps, prefix, "k_conv1d.weight", 3, cd, SB_INIT_KAIMING, CONV_SIZE, 5);
    sb_params_add_named(ps, prefix, "v_conv1d.weight", 3, c2d, SB_INIT_KAIMING, CONV_SIZE, 6);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, od, SB_INIT_KAIMING, 2 * D, 7);
    sb_params_add_named(ps, prefix, "g_norm_swish_gate.weight", 1, vn, SB_INIT_CONST, 1.0, 100);
    return ps->n - first;
}

/* fla's RotaryEmbedding(dim=K): inv_freq = 1 / base^(arange(0, K, 2) / K), in float32 as torch
 * computes it. */
static real *rope_inv_freq(sb_graph *g, int K)
{
    real *f = sb_graph_alloc(g, (size_t)(K / 2) * sizeof *f);
    for (int i = 0; i < K / 2; i++)
        f[i] = (real)(1.0f / powf(ROPE_BASE, (float)(2 * i) / (float)K));
    return f;
}

/* fla's rotation (y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin, angle p f_i) at positions
 * pos0, pos0 + 1, ... of x [B, T, H, K]. From position 0 (whole sequences) it is sb_rope with
 * negated frequencies (sb_rope rotates the other way); later chunks of a stream (not
 * recorded) are rotated here. */
static sb_tensor *retnet_rotary(sb_graph *g, sb_tensor *x, const real *inv_freq, long pos0)
{
    const int B = x->shape[0], T = x->shape[1], H = x->shape[2], K = x->shape[3], half = K / 2;
    if (pos0 == 0) {
        real *neg = sb_graph_alloc(g, (size_t)half * sizeof *neg);
        for (int i = 0; i < half; i++)
            neg[i] = -inv_freq[i];
        return sb_rope(g, x, neg);
    }
    SB_ASSERT(!g->record);
    sb_tensor *y = sb_tensor_new(g, 4, x->shape);
    real *cs = sb_graph_alloc(g, (size_t)T * (size_t)half * 2 * sizeof *cs);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const real angle = (real)(pos0 + t) * inv_freq[i];
            cs[((size_t)t * (size_t)half + (size_t)i) * 2] = cos(angle);
            cs[((size_t)t * (size_t)half + (size_t)i) * 2 + 1] = sin(angle);
        }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const real *c = cs + (size_t)t * (size_t)half * 2;
            for (int h = 0; h < H; h++) {
                const size_t off =
                    (((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)h) * (size_t)K;
                const real *xi = x->data + off;
                real *yo = y->data + off;
                for (int i = 0; i < half; i++) {
                    yo[i] = xi[i] * c[2 * i] - xi[i + half] * c[2 * i + 1];
                    yo[i + half] = xi[i + half] * c[2 * i] + xi[i] * c[2 * i + 1];
                }
            }
        }
    return y;
}

/* The layer over whole sequences (state == NULL) or streamed (state: conv histories, the
 * recurrent state and the position of the next frame). */
static sb_tensor *retnet_run(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    const int H = m->cfg.n_head, K = D / H, V = 2 * D / H;
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_linear(g, x, p[P_Q], NULL), *k = sb_linear(g, x, p[P_K], NULL);
    sb_tensor *v = sb_linear(g, x, p[P_V], NULL);
    /* streaming state: retnet_stream_state */
    sb_tensor *qkv[3] = {q, k, v}, *const conv[3] = {p[P_Q_CONV], p[P_K_CONV], p[P_V_CONV]};
    real *S = sb_short_convs(g, 3, qkv, conv, state);
    q = qkv[0], k = qkv[1], v = qkv[2];
    real *pos = S != NULL ? S + (size_t)B * (size_t)H * (size_t)K * (size_t)V : NULL;
    const long pos0 = pos != NULL ? (long)pos[0] : 0;
    const real *inv_freq = rope_inv_freq(g, K);
    q = retnet_rotary(g, sb_fla_heads(g, q, K), inv_freq, pos0);
    k = retnet_rotary(g, sb_fla_heads(g, k, K), inv_freq, pos0);
    v = sb_fla_heads(g, v, V);
    /* the fixed decays as a constant [B, T, H] gate (fla: g_gamma in float32) */
    const int gs[3] = {B, T, H};
    sb_tensor *gate = sb_tensor_new(g, 3, gs);
    for (int h = 0; h < H; h++) {
        const real gh = (real)logf(1.0f - ldexpf(1.0f, -5 - h));
        for (size_t r = 0; r < (size_t)B * (size_t)T; r++)
            gate->data[r * (size_t)H + (size_t)h] = gh;
    }
    sb_tensor *o =
        sb_linear_attn(g, q, k, v, gate, (real)(1.0 / sqrt((double)K)), SB_LINEAR_ATTN_CHUNK, S);
    if (pos != NULL)
        for (int b = 0; b < B; b++)
            pos[b] = (real)(pos0 + T);
    sb_tensor *zg = sb_fla_heads(g, sb_linear(g, x, p[P_G], NULL), V);
    sb_tensor *y = sb_rmsnorm_gated(g, o, zg, p[P_NORM], NORM_EPS);
    return sb_linear(g, sb_fla_flat(g, y), p[P_O], NULL);
}

static sb_tensor *retnet_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return retnet_run(g, m, l, x, NULL);
}

static sb_tensor *retnet_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                        real *state)
{
    return retnet_run(g, m, l, x, state);
}

/* Per sample: the histories of the q, k (D channels) and v (2D) convolutions, the recurrent
 * state (H K V) and the position of the next frame (for the rotary embedding; a real, exact
 * up to 2^24 frames in float). The buffer of B samples is laid out field by field: q
 * histories of all samples, k histories, v histories, states, positions. */
static size_t retnet_stream_state(const sb_model_config *cfg)
{
    const size_t D = (size_t)cfg->d_model, H = (size_t)cfg->n_head;
    return (CONV_SIZE - 1) * 4 * D + H * (D / H) * (2 * D / H) + 1;
}

/* probe: after the q, k (D each) and v (2D) conv histories, the H K V state (the position
 * that follows it is not part of the recurrent state) */
static void retnet_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const size_t D = (size_t)cfg->d_model, H = (size_t)cfg->n_head;
    *history = (CONV_SIZE - 1) * 4 * D;
    *count = H * (D / H) * (2 * D / H);
}

static double retnet_flops(const sb_model_config *cfg, int T)
{
    const double D = cfg->d_model, H = cfg->n_head, K = D / H, V = 2 * D / H;
    const double q = T < SB_LINEAR_ATTN_CHUNK ? T : SB_LINEAR_ATTN_CHUNK;
    double proj = 2 * D * (D + D + 2 * D + 2 * D) + 2 * 2 * D * D;
    double conv = 2.0 * CONV_SIZE * 4 * D;
    /* per head: Qb S0 and the state update (2KV each, + KV decay), P and P V over (q+1)/2 rows */
    double rec = H * (5 * K * V + (q + 1) * (K + V));
    return proj + conv + rec + 6 * 2 * D + 20 * D; /* + rotary, silu, norm elementwise */
}

static double retnet_state(const sb_model_config *cfg)
{
    const double D = cfg->d_model, H = cfg->n_head;
    return H * (D / H) * (2 * D / H);
}

const sb_layer_type sb_layer_retnet = {
    .name = "retnet",
    .axes = {SB_GATE_SCALAR, SB_FORGET_FIXED, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V = 2 D^2 / H"},
    .summary = "RetNet multi-scale retention (fla 0.3.2): fixed decay 1 - 2^(-5-h) per head",
    .taxonomy = {"fixed, data-independent scalar per head (1 - 2^(-5-h))", "scalar x identity", "1",
                 "RoPE on q, k; d_k^-1/2; gated RMSNorm", "no", "d_k x d_v"},
    .check = retnet_check,
    .add_params = retnet_add_params,
    .forward = retnet_forward,
    .flops_per_token = retnet_flops,
    .state_size = retnet_state,
    .stream_state_floats = retnet_stream_state,
    .forward_stream = retnet_forward_stream,
    .stream_recurrent = retnet_stream_recurrent,
    .test_chunk = SB_LINEAR_ATTN_CHUNK,
};

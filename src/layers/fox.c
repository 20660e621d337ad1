/* fox.c - ForgettingAttention of flash-linear-attention v0.3.2 (fla/layers/forgetting_attn.py)
 * with its defaults (no q/k norm, no output gate, no window, no kv-head sharing;
 * docs/models/layered.md), the mixer of fox_layered (layered.c; 32 heads there):
 *
 *   q, k, v = x Wq^T, x Wk^T, x Wv^T                [B, T, H, Dh]   Dh = D / H
 *   f       = logsigmoid(x Wf^T + bf)                [B, T, H]
 *   o       = K4(q, k, v, f), scale Dh^-1/2          softmax attention with forget gates
 *   out     = o Wo^T
 * Attention has no fixed-size recurrent state, so there is no streaming form: evaluation
 * runs whole sequences. Docs: docs/models/layered.md.
 */
#include "layers/fla_layers.h"
#include "layers/fla_mixer.h"
#include "layers/probe_gates.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_layered.h"

/* parameters in state_dict order (= construction order) */
enum { P_Q, P_K, P_V, P_F, P_F_B, P_O, P_COUNT };

int sb_fox_mixer_params(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx)
{
    const int H = mx->H, A = H * mx->K; /* A = D: q, k, v and o are square */
    int ad[2] = {A, D}, hd[2] = {H, D}, h[1] = {H}, da[2] = {D, A};
    int first = ps->n;
    sb_params_add_named(ps, prefix, "q_proj.weight", 2, ad, SB_INIT_KAIMING, D, 0);
    sb_params_add_named(ps, prefix, "k_proj.weight", 2, ad, SB_INIT_KAIMING, D, 1);
    sb_params_add_named(ps, prefix, "v_proj.weight", 2, ad, SB_INIT_KAIMING, D, 2);
    sb_params_add_named(ps, prefix, "f_proj.weight", 2, hd, SB_INIT_KAIMING, D, 3);
    sb_params_add_named(ps, prefix, "f_proj.bias", 1, h, SB_INIT_FANIN, D, 4);
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, da, SB_INIT_KAIMING, A, 5);
    return ps->n - first;
}

sb_tensor *sb_fox_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, const sb_fla_mixer *mx)
{
    sb_tensor *p[P_COUNT];
    for (int i = 0; i < P_COUNT; i++)
        p[i] = sb_model_param(m, l, i);
    sb_tensor *q = sb_fla_heads(g, sb_linear(g, x, p[P_Q], NULL), mx->K);
    sb_tensor *k = sb_fla_heads(g, sb_linear(g, x, p[P_K], NULL), mx->K);
    sb_tensor *v = sb_fla_heads(g, sb_linear(g, x, p[P_V], NULL), mx->K);
    sb_tensor *f = sb_logsigmoid(g, sb_linear(g, x, p[P_F], p[P_F_B]), 1);
    sb_tensor *o = sb_forgetting_attn(g, q, k, v, f);
    return sb_linear(g, sb_fla_flat(g, o), p[P_O], NULL);
}

sb_tensor *sb_fox_mixer_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const sb_fla_mixer *mx, sb_gate_desc *desc)
{
    const int B = x->shape[0], T = x->shape[1], H = mx->H;
    sb_tensor *f = sb_linear(g, x, sb_model_param(m, l, P_F), sb_model_param(m, l, P_F_B));
    int shape[3] = {B, T, H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < out->size; i++) /* exp(logsigmoid(z)) = sigmoid(z) */
        out->data[i] = (real)sb_probe_sigmoid((double)f->data[i]);
    *desc = (sb_gate_desc){.n_kinds = 1, .n_groups = H, .kind = {"forget exp(f)"}, .hi = {1.0}};
    return out;
}

double sb_fox_mixer_flops(int Dm, const sb_fla_mixer *mx, int T)
{
    const double D = Dm, H = mx->H, A = H * mx->K;
    /* q, k, v, o and the gate projections; scores and P V over (T + 1) / 2 keys on average */
    return 2 * D * (4 * A + H) + 2 * 2 * A * (T + 1) / 2.0 + 20 * D + 5 * H * (T + 1) / 2.0;
}

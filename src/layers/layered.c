/* layered.c - the reference's four *_layered models (docs/models/layered.md): fla causal-LM
 * stacks that the LM stack (src/model/lm_stack.c) builds around these mixers, configured with
 * the fla model configs' defaults rather than the benchmark's layer arguments (section 3):
 *
 *   gla_layered              GLA, 4 heads, expand_k 0.5 (K = D/8), expand_v 1 (V = D/4),
 *                            no short convolutions, eps 1e-6
 *   delta_net_layered        DeltaNet, 16 heads, K = V = D/16, short convolutions, eps 1e-6
 *   gated_delta_net_layered  Gated DeltaNet, 6 heads of the benchmark's width K = D/n_b
 *                            (n_b = get_num_heads(D)), V = 2K, short convolutions, eps 1e-6
 *   fox_layered              ForgettingAttention, 32 heads of width D/32
 *
 * The mixers are the RecNet layers' code (gla.c, delta_net.c, gated_delta_net.c) and fox.c,
 * given these configurations (fla_mixer.h). The functions below describe the mixer alone;
 * the stack adds its norms, GatedMLPs, head and input projection. fox_layered gets an
 * lm_head like the other three (the reference returns the normed hidden state as logits and
 * cannot train on the classification task; docs/models/layered.md).
 */
#include <string.h>

#include "layers/fla_mixer.h"
#include "layers/layer.h"
#include "ops/ops_fla.h"

#define NORM_EPS 1e-6

/* fla's causal-LM classes; FoX: the reference builds the bare backbone (no lm_head: the stack
 * adds one anyway, named base_model.lm_head.weight, a documented deviation) */
static const sb_stack_desc causal_lm = {.backbone = "base_model.model."};
static const sb_stack_desc backbone_only = {.backbone = "base_model."};

/* ---- each type's mixer configuration and width check ----------------------------------- */

static sb_fla_mixer gla_cfg(const sb_model_config *cfg)
{
    /* key_dim = int(D * 0.5), value_dim = D, over 4 heads */
    sb_fla_mixer mx = {.H = 4,
                       .K = cfg->d_model / 2 / 4,
                       .V = cfg->d_model / 4,
                       .short_conv = 0,
                       .norm_eps = NORM_EPS};
    return mx;
}

static sb_status gla_l_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->d_model % 8 != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "gla_layered: --feat_size %d must be a multiple of 8 (fla's "
                            "GatedLinearAttention splits key width D/2 and value width D over "
                            "4 heads)",
                            cfg->d_model);
    return SB_OK;
}

static sb_fla_mixer delta_cfg(const sb_model_config *cfg)
{
    sb_fla_mixer mx = {.H = 16,
                       .K = cfg->d_model / 16,
                       .V = cfg->d_model / 16,
                       .short_conv = 1,
                       .norm_eps = NORM_EPS};
    return mx;
}

static sb_status delta_l_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->d_model % 16 != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "delta_net_layered: --feat_size %d must be a multiple of 16 (fla's "
                            "DeltaNet asserts that its 16 heads divide the key width D; the "
                            "reference fails there too)",
                            cfg->d_model);
    return SB_OK;
}

static sb_fla_mixer gdn_cfg(const sb_model_config *cfg)
{
    /* train.py passes head_dim = D / n_b; num_heads stays at the config's 6, expand_v 2 */
    const int K = cfg->n_head > 0 ? cfg->d_model / cfg->n_head : 0;
    sb_fla_mixer mx = {.H = 6, .K = K, .V = 2 * K, .short_conv = 1, .norm_eps = NORM_EPS};
    return mx;
}

static sb_status gdn_l_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->n_head < 1 || cfg->d_model % cfg->n_head != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "gated_delta_net_layered: --feat_size %d is not divisible by the "
                            "benchmark's %d heads (train.py asserts it)",
                            cfg->d_model, cfg->n_head);
    return SB_OK;
}

static sb_fla_mixer fox_cfg(const sb_model_config *cfg)
{
    sb_fla_mixer mx = {.H = 32,
                       .K = cfg->d_model / 32,
                       .V = cfg->d_model / 32,
                       .short_conv = 0,
                       .norm_eps = NORM_EPS};
    return mx;
}

static sb_status fox_l_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->d_model % 32 != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "fox_layered: --feat_size %d must be a multiple of 32 (fla's "
                            "ForgettingAttention has 32 heads of width D // 32; the reference "
                            "fails at its head reshape otherwise)",
                            cfg->d_model);
    return SB_OK;
}

/* ---- one adapter for the four --------------------------------------------------------------- */

/* fox.c's mixer has no recurrent form (and fox_layered no streaming): no state */
static sb_tensor *fox_mix(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                          const sb_fla_mixer *mx)
{
    (void)state;
    return sb_fox_mixer(g, m, l, x, mx);
}

/* A *_layered type's mixer: its configuration from the benchmark's and its functions in
 * fla_mixer.h, which the hooks below call (stream_floats NULL: no recurrent form). */
typedef struct layered_mixer {
    const char *layer; /* the layer type's name */
    sb_fla_mixer (*config)(const sb_model_config *cfg);
    sb_status (*check)(const sb_model_config *cfg, sb_error *err);
    int (*params)(sb_params *ps, const char *prefix, int D, const sb_fla_mixer *mx);
    sb_tensor *(*mix)(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                      const sb_fla_mixer *mx);
    size_t (*stream_floats)(const sb_fla_mixer *mx);
    sb_tensor *(*gates)(sb_graph *g, const sb_model *m, int l, sb_tensor *x, const sb_fla_mixer *mx,
                        sb_gate_desc *desc);
    double (*flops)(int D, const sb_fla_mixer *mx, int T);
} layered_mixer;

static const layered_mixer mixers[] = {
    {"gla_layered", gla_cfg, gla_l_check, sb_gla_mixer_params, sb_gla_mixer,
     sb_gla_mixer_stream_floats, sb_gla_mixer_gates, sb_gla_mixer_flops},
    {"delta_net_layered", delta_cfg, delta_l_check, sb_delta_net_mixer_params, sb_delta_net_mixer,
     sb_delta_net_mixer_stream_floats, sb_delta_net_mixer_gates, sb_delta_net_mixer_flops},
    {"gated_delta_net_layered", gdn_cfg, gdn_l_check, sb_gdn_mixer_params, sb_gdn_mixer,
     sb_gdn_mixer_stream_floats, sb_gdn_mixer_gates, sb_gdn_mixer_flops},
    {"fox_layered", fox_cfg, fox_l_check, sb_fox_mixer_params, fox_mix, NULL, sb_fox_mixer_gates,
     sb_fox_mixer_flops},
};

/* The mixer of the type cfg->model names (one of the four records below). */
static const layered_mixer *mixer_of(const sb_model_config *cfg)
{
    for (size_t i = 0; i < sizeof mixers / sizeof mixers[0]; i++)
        if (strcmp(cfg->model, mixers[i].layer) == 0)
            return &mixers[i];
    SB_ASSERT(0 && "a *_layered type without its mixer in layered.c");
    return &mixers[0];
}

static sb_status layered_check(const sb_model_config *cfg, sb_error *err)
{
    return mixer_of(cfg)->check(cfg, err);
}

static int layered_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const layered_mixer *k = mixer_of(cfg);
    const sb_fla_mixer mx = k->config(cfg);
    return k->params(ps, prefix, cfg->d_model, &mx);
}

static sb_tensor *layered_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    const layered_mixer *k = mixer_of(&m->cfg);
    const sb_fla_mixer mx = k->config(&m->cfg);
    return k->mix(g, m, l, x, NULL, &mx);
}

static sb_tensor *layered_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const layered_mixer *k = mixer_of(&m->cfg);
    const sb_fla_mixer mx = k->config(&m->cfg);
    return k->mix(g, m, l, x, state, &mx);
}

static size_t layered_stream_floats(const sb_model_config *cfg)
{
    const layered_mixer *k = mixer_of(cfg);
    const sb_fla_mixer mx = k->config(cfg);
    return k->stream_floats(&mx);
}

static sb_tensor *layered_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const layered_mixer *k = mixer_of(&m->cfg);
    const sb_fla_mixer mx = k->config(&m->cfg);
    return k->gates(g, m, l, x, &mx, desc);
}

static void layered_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const sb_fla_mixer mx = mixer_of(cfg)->config(cfg);
    sb_fla_mixer_stream_recurrent(&mx, history, count);
}

static double layered_flops(const sb_model_config *cfg, int T)
{
    const layered_mixer *k = mixer_of(cfg);
    const sb_fla_mixer mx = k->config(cfg);
    return k->flops(cfg->d_model, &mx, T);
}

/* H K V for the recurrent mixers; attention's key/value cache grows with T (0) */
static double layered_state(const sb_model_config *cfg)
{
    const layered_mixer *k = mixer_of(cfg);
    const sb_fla_mixer mx = k->config(cfg);
    return k->stream_floats != NULL ? (double)mx.H * mx.K * mx.V : 0.0;
}

/* ---- the four types -------------------------------------------------------------------------- */

const sb_layer_type sb_layer_gla_layered = {
    .name = "gla_layered",
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V (4 heads, K = D/8, V = D/4)"},
    .summary = "GLA in fla's causal-LM stack (pre-norm blocks + GatedMLP, final RMSNorm, "
               "head; 4 heads, key width D/2, no short conv)",
    .taxonomy = {"data-dependent per key channel (low-rank, logsigmoid/16)", "diagonal", "1",
                 "gated RMSNorm; pre-norm RMSNorm blocks", "no", "D/8 x D/4 per head, 4 heads"},
    .check = layered_check,
    .add_params = layered_params,
    .forward = layered_forward,
    .flops_per_token = layered_flops,
    .state_size = layered_state,
    .stream_state_floats = layered_stream_floats,
    .forward_stream = layered_stream,
    .probe_gates = layered_gates,
    .stream_recurrent = layered_stream_recurrent,
    .stack = &causal_lm,
    .test_chunk = SB_LINEAR_ATTN_CHUNK,
};

const sb_layer_type sb_layer_delta_net_layered = {
    .name = "delta_net_layered",
    .axes = {SB_GATE_NONE, SB_FORGET_NONE, SB_TRANSITION_DELTA, SB_UPDATE_RANK1, SB_MEMORY_CONSTANT,
             "H K V (16 heads, K = V = D/16)"},
    .summary = "DeltaNet in fla's causal-LM stack (pre-norm blocks + GatedMLP, final RMSNorm, "
               "head; 16 heads of D/16, value width D)",
    .taxonomy = {"none (data-dependent write strength beta per head)",
                 "identity + rank-1 (I - beta k k^T)", "1",
                 "L2 q, k; RMSNorm; pre-norm RMSNorm "
                 "blocks",
                 "no (beta in (0, 1): eigenvalues in [0, 1])", "D/16 x D/16 per head, 16 heads"},
    .check = layered_check,
    .add_params = layered_params,
    .forward = layered_forward,
    .flops_per_token = layered_flops,
    .state_size = layered_state,
    .stream_state_floats = layered_stream_floats,
    .forward_stream = layered_stream,
    .probe_gates = layered_gates,
    .stream_recurrent = layered_stream_recurrent,
    .stack = &causal_lm,
    .test_chunk = SB_DELTA_RULE_CHUNK,
    .test_width = 32, /* 16 heads of key width 2 (at width 1 the keys' L2 norm is a sign) */
};

const sb_layer_type sb_layer_gated_delta_net_layered = {
    .name = "gated_delta_net_layered",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_DELTA, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K V (6 heads, V = 2K)"},
    .summary = "Gated DeltaNet in fla's causal-LM stack (pre-norm blocks + GatedMLP, final "
               "RMSNorm, head; 6 heads of D/n_b, expand_v 2)",
    .taxonomy = {"data-dependent scalar decay per head (exp(-e^A_log softplus)) + beta",
                 "scalar x (identity + rank-1)", "1",
                 "L2 q, k; gated RMSNorm; pre-norm RMSNorm blocks",
                 "no (eigenvalues in [0, alpha])", "d_k x 2 d_k per head (d_k = D/n_b), 6 heads"},
    .check = layered_check,
    .add_params = layered_params,
    .forward = layered_forward,
    .flops_per_token = layered_flops,
    .state_size = layered_state,
    .stream_state_floats = layered_stream_floats,
    .forward_stream = layered_stream,
    .probe_gates = layered_gates,
    .stream_recurrent = layered_stream_recurrent,
    .stack = &causal_lm,
    .test_chunk = SB_DELTA_RULE_CHUNK,
};

const sb_layer_type sb_layer_fox_layered = {
    .name = "fox_layered",
    .axes = {SB_GATE_SCALAR, SB_FORGET_INPUT, SB_TRANSITION_ATTENTION, SB_UPDATE_APPEND,
             SB_MEMORY_LINEAR, "2 T D (the keys and values of every frame)"},
    .summary = "Forgetting Transformer (FoX) in fla's stack (pre-norm blocks + GatedMLP, final "
               "RMSNorm; 32 heads); lm_head added (the reference has none)",
    .taxonomy = {"data-dependent scalar forget gate per head (additive log-bias in softmax)",
                 "none: softmax attention", "n/a (appends k, v)",
                 "softmax; pre-norm RMSNorm blocks", "n/a", "O(T) (key/value cache)"},
    .check = layered_check,
    .add_params = layered_params,
    .forward = layered_forward,
    .flops_per_token = layered_flops,
    .state_size = layered_state,
    .stack = &backbone_only,
    .probe_gates = layered_gates,
    .test_chunk = 128 /* the forgetting attention's query blocks */,
    .test_width = 32, /* 32 heads */
};

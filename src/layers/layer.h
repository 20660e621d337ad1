/*
 * layer.h - what a layer type is: the model configuration it is built from, its record in
 * the registry (parameters, forward, streaming form, training rules, test shapes), and the
 * model data its forward reads its parameters from.
 *
 * A layer type is one file in src/layers/ (the build takes every file there) and one
 * SB_LAYER line in src/layers/layers.def (the registry, src/layers/registry.c): it
 * registers its parameters (reference state_dict names, shapes, init) and writes its
 * forward as straight-line op calls; its record also carries the training rules of
 * train.py that are specific to it and the shapes its tests need. Adding a model = one file
 * + one line (+ its docs page); see docs/ADDING_A_MODEL.md. The wrappers that build whole
 * models from a layer type are the floor above (model/model.h).
 */
#ifndef SELECTIVBENCH_LAYER_H
#define SELECTIVBENCH_LAYER_H

#include <stdio.h>

#include "config/run_config.h" /* SB_MODEL_NAME_MAX */
#include "tensor/nn.h"
#include "tensor/params.h"

typedef struct sb_model_config {
    char model[SB_MODEL_NAME_MAX]; /* layer type name ("transformer", "gru", ...) */
    int d_input;                   /* I: one-hot width (vocab) */
    int d_output;                  /* C: classes (grammar states) */
    int d_model;                   /* D: --feat_size (after the transformer's remapping) */
    int n_layers;                  /* L: --layers */
    int d_state;                   /* N: --d_state */
    int n_head;                    /* get_num_heads(D, 128) */
    double dropout;                /* --dropout */
    double rope_base;              /* --rope_base (1000 in train.py) */
    int att_dropout;               /* --att_dropout */
} sb_model_config;

typedef struct sb_model sb_model;

/* The design axes of the taxonomy (docs/models/taxonomy.md): categorical, so that the pairs of
 * models that differ on one axis alone can be listed. 0 is "not set": a test fails on it.
 * Their names (src/layers/axes.c) are what `models` prints and the public API returns. */
typedef enum sb_gate_grain {
    SB_GATE_UNSET = 0,
    SB_GATE_NONE,   /* no decay of the state */
    SB_GATE_SCALAR, /* one decay per head (or per layer) */
    SB_GATE_VECTOR, /* one decay per channel */
} sb_gate_grain;
typedef enum sb_forgetting {
    SB_FORGET_UNSET = 0,
    SB_FORGET_NONE,  /* nothing decays (the delta rule erases by overwriting, not by decay) */
    SB_FORGET_FIXED, /* the decay is a trained constant, the same for every input */
    SB_FORGET_INPUT, /* the decay is computed from the input, token by token */
} sb_forgetting;
typedef enum sb_transition {
    SB_TRANSITION_UNSET = 0,
    SB_TRANSITION_ATTENTION,             /* no fixed-size state: softmax over the past */
    SB_TRANSITION_ATTENTION_HOUSEHOLDER, /* softmax with Householder position transforms */
    SB_TRANSITION_DIAGONAL,              /* the state decays channel by channel (or as a whole) */
    SB_TRANSITION_DELTA,                 /* (decay x) (I - beta k k^T): rank-1 channel mixing */
    SB_TRANSITION_DIAGONAL_RANK1,        /* diag(w) + a b^T with a != b (generalised delta) */
    SB_TRANSITION_HOUSEHOLDER_PRODUCT,   /* a product of n delta steps per token */
    SB_TRANSITION_NONLINEAR,             /* a dense nonlinear map (GRU) */
} sb_transition;
typedef enum sb_update {
    SB_UPDATE_UNSET = 0,
    SB_UPDATE_APPEND,      /* attention: appends a key and a value */
    SB_UPDATE_ELEMENTWISE, /* a vector state, written channel by channel */
    SB_UPDATE_RANK1,       /* one outer product per token (per head) */
    SB_UPDATE_RANKN,       /* n outer products per token */
    SB_UPDATE_FULL,        /* a dense recurrent matrix */
} sb_update;
typedef enum sb_memory_growth {
    SB_MEMORY_UNSET = 0,
    SB_MEMORY_CONSTANT, /* the same state at every length */
    SB_MEMORY_LOG,      /* log T states (log-linear attention) */
    SB_MEMORY_LINEAR,   /* a cache of every frame */
} sb_memory_growth;
#define SB_AXES 5 /* the enums above, in this order */
typedef struct sb_axes {
    sb_gate_grain gate;
    sb_forgetting forgetting;
    sb_transition transition;
    sb_update update;
    sb_memory_growth memory;
    const char *state_formula; /* the floats one layer carries, as a formula of D, H, K, V, N, T */
} sb_axes;

/* The state transition's structure as the findings read it (src/exp/claims.c), derived from
 * the transition axis by sb_layer_state_mixing. */
typedef enum sb_state_mixing {
    SB_MIXING_UNCLASSIFIED = 0,
    SB_MIXING_DIAGONAL,  /* per-channel (or per-head scalar) decay: no mixing inside the state */
    SB_MIXING_CHANNELS,  /* the transition mixes channels (delta rule's I - beta k k^T, GRU) */
    SB_MIXING_ATTENTION, /* no fixed-size state: softmax attention over the whole past */
} sb_state_mixing;
struct sb_optimizer; /* optim.h */

/* Taxonomy of a layer (docs/spec/taxonomy.md). */
typedef struct sb_taxonomy {
    const char *gating;
    const char *transition;  /* state transition structure */
    const char *update_rank; /* rank of the information written per token */
    const char *normalisation;
    const char *negative_eigenvalues;
    const char *state; /* state per head (or per layer) */
} sb_taxonomy;

/* Set by a layer type whose models are not RecNets but LM stacks (src/nn/lm_stack.c): the
 * reference's *_layered models, an fla causal-LM stack around the layer as token mixer
 * (input projection, pre-norm blocks with a GatedMLP, final RMSNorm, head; see
 * docs/models/layered.md). The type's functions then describe the mixer alone. */
typedef struct sb_stack_desc {
    const char *backbone; /* state_dict prefix of the backbone's modules ("base_model.model."
                             for fla's causal-LM classes, "base_model." for a bare backbone) */
} sb_stack_desc;

/* A layer's input-dependent gates as its probe_gates returns them (the probe command,
 * src/train/probe.c; docs/probe.md). */
#define SB_GATE_KINDS_MAX 2
typedef struct sb_gate_desc {
    int n_kinds;                         /* gates of the layer (1, or 2: e.g. beta and decay) */
    int n_groups;                        /* heads or channel groups of every kind */
    const char *kind[SB_GATE_KINDS_MAX]; /* what each is, e.g. "decay exp(dt*A)", "beta" */
    double hi[SB_GATE_KINDS_MAX];        /* each gate lies in [0, hi] */
} sb_gate_desc;

typedef struct sb_layer_type {
    const char *name;
    const char *summary; /* one line for `selectivbench models` */
    sb_taxonomy taxonomy;
    sb_axes axes; /* the design axes (required: every axis set; test_claims checks) */
    /* optional: refuse configurations the layer cannot build */
    sb_status (*check)(const sb_model_config *cfg, sb_error *err);
    /* registers the layer's parameters under `prefix` ("layers.3."), in state_dict order,
     * with draw ranks in construction order; returns how many it registered */
    int (*add_params)(sb_params *ps, const char *prefix, const sb_model_config *cfg);
    /* x[B, T, D] -> [B, T, D]; its parameters are sb_model_param(m, l, k) */
    sb_tensor *(*forward)(sb_graph *g, const sb_model *m, int l, sb_tensor *x);
    /* forward FLOPs per token of one layer at sequence length T (for reports) */
    double (*flops_per_token)(const sb_model_config *cfg, int T);
    /* recurrent state size per layer in floats (0 for attention: it grows with T) */
    double (*state_size)(const sb_model_config *cfg);
    /* optional streaming form, used by evaluation so that memory does not grow with the
     * number of frames: processes x[B, Tc, D] (a chunk of frames) starting from the
     * layer's state after the previous chunk, and leaves the state after this chunk in
     * place. state holds B * stream_state_floats(cfg) reals, zeroed at sequence start.
     * The graph does not record. NULL when the layer has no recurrent form. */
    size_t (*stream_state_floats)(const sb_model_config *cfg);
    sb_tensor *(*forward_stream)(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state);
    /* NULL: RecNet builds the model; else the LM stack does (see sb_stack_desc) */
    const sb_stack_desc *stack;
    /* optional (probe): the layer's input-dependent gates, recomputed from its input x[B, T,
     * D] (the x its forward receives), not recorded: returns [B, T, n_kinds * n_groups] with
     * kind k of group h at column k * n_groups + h, and fills desc. gap[B * T] marks the gap
     * frames (attention reports the share of its weight on them). NULL: the layer has no
     * input-dependent gates. */
    sb_tensor *(*probe_gates)(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                              const uint8_t *gap, sb_gate_desc *desc);
    /* optional (probe): where the recurrent state lies in one sample's stream state: after
     * *history reals (convolution histories), *count reals; in a buffer of B samples (laid
     * out field by field) at B * history, B * count reals. NULL: the whole stream state. */
    void (*stream_recurrent)(const sb_model_config *cfg, size_t *history, size_t *count);

    /* ---- training rules of the reference's train.py that belong to this layer ---- */
    /* optional: the model width train.py builds for --feat_size feat_size (the transformer
     * maps 648 -> 768 and 1296 -> 1280). NULL: feat_size itself. */
    int (*model_width)(int feat_size);
    /* optional: refuses a --feat_size that train.py skips for this layer (the transformer's
     * positional code fails at 960). NULL: every width is accepted here. */
    sb_status (*check_feat_size)(int feat_size, sb_error *err);
    /* optional: train.py's own optimiser for this layer, whatever --optimizer and --wd say
     * (S4's setup_optimizer: AdamW with a second group for SB_PARAM_GROUP2 parameters); the
     * trainer then steps CosineAnnealingLR over epochs instead of the warm-up schedule.
     * NULL: the flags' optimiser and schedule. */
    void (*init_optimizer)(struct sb_optimizer *opt, double lr);

    /* ---- what the registry-driven tests need (tests/unit/test_every_model.c) ---- */
    /* the longest block of frames the layer processes at once (a chunk of its recurrence,
     * attention's query block): the tests use sequences that cross it with a ragged tail.
     * 0: no chunking (step by step or one piece). */
    int test_chunk;
    /* the smallest model width the layer builds (heads it fixes must divide it); 0: 8 */
    int test_width;
    /* relative tolerance of the whole-model finite-difference gradient check (double build);
     * 0: 1e-5 */
    double grad_rtol;
    /* optional: a twin whose forward is the function this layer's backward differentiates,
     * checked in its place (MesaNet's backward is that of the exact ridge solve, its forward
     * runs 30 CG steps); not registered */
    const struct sb_layer_type *grad_check_type;
    /* 1: a later layer reads a tensor an earlier layer made in the same forward (RWKV-7's
     * value residual): the wrappers then keep every layer's activations until the forward
     * ends, also where they would release them layer by layer (evaluation) */
    int layers_share_tensors;
    /* 1: the model's products stay float32 under --precision bf16 (a layer whose numerics
     * bf16 operands spoil; the model facade suspends bf16 around every forward) */
    int fp32_products;
} sb_layer_type;

struct sb_model {
    sb_model_config cfg;
    const sb_layer_type *type;
    sb_params params;
    int *layer_first; /* [L] index of each layer's first parameter */
    sb_tensor *enc_w, *enc_b, *dec_w, *dec_b;
    sb_tensor **norm_w, **norm_b; /* [L] */
    /* LM stacks (type->stack != NULL): their blocks' tensors (src/nn/lm_stack.c); enc_w,
     * enc_b are then the input projection, dec_w the head and dec_b a zero vector (the head
     * has no bias); norm_w, norm_b are unused. NULL for RecNets. */
    struct sb_lm_stack *stack;
};

/* ---- registry (src/layers/registry.c) ---------------------------------------------------- */

/* The layer type of that name, or NULL. */
const sb_layer_type *sb_layer_type_find(const char *name);
/* All registered types (NULL-terminated). */
const sb_layer_type *const *sb_layer_types(void);
/* The findings' reading of a type's transition axis (UNCLASSIFIED when it is not set). */
sb_state_mixing sb_layer_state_mixing(const sb_layer_type *type);
/* Axis a's name ("gate granularity", ...), a in [0, SB_AXES), else NULL. */
const char *sb_axis_name(int axis);
/* The name of value v of axis a ("scalar per head", ...), or NULL for an unset or unknown
 * value. */
const char *sb_axis_value_name(int axis, int value);
/* "transformer, gru, ..." */
void sb_layer_type_list(char *buf, size_t size);
/* The error for a --model that names no type: the closest name when one is near (a typo),
 * else the whole list. Always returns SB_ERR_INVALID. */
sb_status sb_layer_type_unknown(const char *name, sb_error *err);

/* The check of every multi-head layer: n_head >= 1 heads dividing width. SB_ERR_INVALID
 * "MODEL: WHAT W is not divisible by H heads" otherwise (what: "--feat_size", or "the inner
 * width" for a layer whose heads split another width). */
sb_status sb_layer_check_heads(const char *model, const char *what, int width, int n_head,
                               sb_error *err);

/* get_num_heads(d, 128) of the reference's utils.py; 0 if none exists. */
int sb_num_heads(int d_model);

/* Parameter k of layer l (in the layer's registration order). */
static inline sb_tensor *sb_model_param(const sb_model *m, int l, int k)
{
    return &m->params.p[m->layer_first[l] + k].tensor;
}

#endif

/* lm_stack.c - the second model wrapper: fla's causal-LM stack as the reference's
 * *_layered models build it (train.py: an fla XForCausalLM whose token embedding is
 * replaced by an identity, wrapped in CustomModel; docs/models/layered.md):
 *
 *   x_0 = u Wp^T + bp                                    proj: Linear(F -> D), with bias
 *   block l:  s = x_l + Mixer_l(RMSNorm(x_l))            pre-norm 1, residual 1
 *             x_l+1 = s + GatedMLP_l(RMSNorm(s))         pre-norm 2, residual 2
 *   logits = RMSNorm(x_L) Wlm^T                          final norm, lm_head (no bias)
 *
 * RMSNorm eps 1e-6 with a weight, no biases, no dropout, no positions. The mixer is the
 * layer type's forward (gla.c, delta_net.c, gated_delta_net.c, fox.c with the stack's
 * configuration, layered.c). Backward: the ops' own (rmsnorm in fla_blocks.c, GatedMLP in
 * gated_mlp.c, linear, add). Docs: docs/models/layered.md.
 *
 * Parameters in the reference's state_dict order: the backbone's blocks
 * (<backbone>layers.{l}.attn_norm.weight, .attn.*, .mlp_norm.weight, .mlp.{gate,up,down}_proj
 * .weight), <backbone>norm.weight, base_model.lm_head.weight, proj.weight, proj.bias.
 *
 * Initialisation (sb_lm_stack_initialise) replays the reference's random draws after
 * torch.manual_seed(seed), so that the initial weights equal PyTorch's bit for bit:
 *   A. the backbone's construction: the embedding table's normal_(0, 1) (drawn, then thrown
 *      away with the table), each block's mixer in its construction order with PyTorch's
 *      defaults (the draw ranks the mixer registered), the MLP's three Linear defaults;
 *   B. the backbone's post_init: fla's _init_weights on every module, children before their
 *      parent: the embedding again, each Linear and Conv1d weight normal_(0, 0.02) and bias
 *      zero, every norm weight one, and (after its children) the Gated DeltaNet layer's own
 *      A_log and dt_bias drawn again;
 *   C. the causal LM's lm_head: its Linear default, then normal_(0, 0.02) by the second
 *      post_init (everything else is already flagged as initialised);
 *   D. CustomModel's proj: PyTorch's Linear default.
 */
#include "model/lm_stack.h"

#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "core/alloc.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"
#include "ops/ops_layered.h"

#define NORM_EPS ((real)1e-6) /* the configs' norm_eps */
#define INIT_RANGE 0.02       /* the configs' initializer_range */

/* per block: the indices of its parameters outside the mixer */
enum { B_ATTN_NORM, B_MLP_NORM, B_GATE, B_UP, B_DOWN, B_COUNT };

struct sb_lm_stack {
    int Hd;   /* GatedMLP width */
    int *idx; /* [L][B_COUNT] */
    int final_norm, head, proj_w, proj_b;
    sb_tensor zero_bias; /* [C] zeros: m->dec_b for the evaluation decoder */
};

int sb_lm_stack_mlp_width(int D)
{
    /* GatedMLP: intermediate_size = int(D * 4 * 2 / 3), rounded up to a multiple of 256 */
    const int third = (8 * D) / 3;
    return 256 * ((third + 255) / 256);
}

void sb_lm_stack_free(struct sb_lm_stack *s)
{
    if (s == NULL)
        return;
    sb_free(s->idx);
    sb_free(s->zero_bias.data);
    sb_free(s);
}

sb_status sb_lm_stack_register(const sb_layer_type *type, const sb_model_config *cfg,
                               sb_model **out, sb_error *err)
{
    *out = NULL;
    const int L = cfg->n_layers, D = cfg->d_model, F = cfg->d_input, C = cfg->d_output;
    const int Hd = sb_lm_stack_mlp_width(D);
    sb_model *m = sb_calloc(1, sizeof *m);
    if (m == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating the model");
    m->cfg = *cfg;
    m->type = type;
    m->layer_first = sb_calloc((size_t)L, sizeof *m->layer_first);
    m->stack = sb_calloc(1, sizeof *m->stack);
    *out = m; /* from here on the facade (model.c) frees it on failure */
    if (m->layer_first == NULL || m->stack == NULL ||
        (m->stack->idx = sb_calloc((size_t)L * B_COUNT, sizeof *m->stack->idx)) == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating the model");
    struct sb_lm_stack *s = m->stack;
    s->Hd = Hd;
    sb_params *ps = &m->params;
    sb_params_init(ps);
    const char *bb = type->stack->backbone;
    int vd[1] = {D}, id[2] = {Hd, D}, di[2] = {D, Hd}, cd[2] = {C, D}, df[2] = {D, F};
    char prefix[SB_PARAM_NAME_MAX], name[SB_PARAM_NAME_MAX + 8];
    for (int l = 0; l < L; l++) {
        int *bi = s->idx + (size_t)l * B_COUNT;
        snprintf(prefix, sizeof prefix, "%slayers.%d.", bb, l);
        ps->draw_module = 1 + l; /* orders the mixer's construction draws (phase A) */
        bi[B_ATTN_NORM] = ps->n;
        sb_params_add_named(ps, prefix, "attn_norm.weight", 1, vd, SB_INIT_CONST, 1.0, 0);
        snprintf(name, sizeof name, "%sattn.", prefix);
        m->layer_first[l] = ps->n;
        type->add_params(ps, name, cfg);
        bi[B_MLP_NORM] = ps->n;
        sb_params_add_named(ps, prefix, "mlp_norm.weight", 1, vd, SB_INIT_CONST, 1.0, 0);
        bi[B_GATE] = ps->n;
        sb_params_add_named(ps, prefix, "mlp.gate_proj.weight", 2, id, SB_INIT_KAIMING, D, 0);
        bi[B_UP] = ps->n;
        sb_params_add_named(ps, prefix, "mlp.up_proj.weight", 2, id, SB_INIT_KAIMING, D, 0);
        bi[B_DOWN] = ps->n;
        sb_params_add_named(ps, prefix, "mlp.down_proj.weight", 2, di, SB_INIT_KAIMING, Hd, 0);
    }
    ps->draw_module = 1 + L;
    s->final_norm = ps->n;
    sb_params_add_named(ps, bb, "norm.weight", 1, vd, SB_INIT_CONST, 1.0, 0);
    s->head = ps->n;
    sb_params_add(ps, "base_model.lm_head.weight", 2, cd, SB_INIT_KAIMING, D, 0);
    s->proj_w = ps->n;
    sb_params_add(ps, "proj.weight", 2, df, SB_INIT_KAIMING, F, 0);
    s->proj_b = ps->n;
    sb_params_add(ps, "proj.bias", 1, vd, SB_INIT_FANIN, F, 1);
    *out = m;
    return SB_OK;
}

sb_status sb_lm_stack_bind(sb_model *m, sb_error *err)
{
    struct sb_lm_stack *s = m->stack;
    sb_params *ps = &m->params;
    const int C = m->cfg.d_output;
    m->enc_w = &ps->p[s->proj_w].tensor;
    m->enc_b = &ps->p[s->proj_b].tensor;
    m->dec_w = &ps->p[s->head].tensor;
    memset(&s->zero_bias, 0, sizeof s->zero_bias);
    s->zero_bias.data = sb_calloc((size_t)C, sizeof(real));
    if (s->zero_bias.data == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating the model");
    s->zero_bias.ndim = 1;
    s->zero_bias.shape[0] = C;
    s->zero_bias.size = (size_t)C;
    m->dec_b = &s->zero_bias;
    return SB_OK;
}

/* ---- initialisation -------------------------------------------------------------------------- */

/* avx_mathfun's log256_ps for one lane (Cephes logf), with the multiply-adds contracted as
 * torch 1.13's AVX2 build compiles them. */
static float cephes_logf(float x)
{
    const float min_norm = 1.17549435e-38f; /* 0x00800000 */
    x = x > min_norm ? x : min_norm;
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t ex = (int32_t)(bits >> 23) - 0x7f;
    bits = (bits & ~0x7f800000u) | 0x3f000000u; /* mantissa with the exponent of 0.5 */
    memcpy(&x, &bits, sizeof x);
    float e = (float)ex + 1.0f;
    const int below = x < 0.707106781186547524f;
    const float keep = below ? x : 0.0f;
    x = x - 1.0f;
    e = e - (below ? 1.0f : 0.0f);
    x = x + keep;
    const float z = x * x;
    float y = 7.0376836292e-2f;
    y = fmaf(y, x, -1.1514610310e-1f);
    y = fmaf(y, x, 1.1676998740e-1f);
    y = fmaf(y, x, -1.2420140846e-1f);
    y = fmaf(y, x, 1.4249322787e-1f);
    y = fmaf(y, x, -1.6668057665e-1f);
    y = fmaf(y, x, 2.0000714765e-1f);
    y = fmaf(y, x, -2.4999993993e-1f);
    y = fmaf(y, x, 3.3333331174e-1f);
    y = y * x;
    y = fmaf(y, z, e * -2.12194440e-4f);
    y = fmaf(z, -0.5f, y);
    x = x + y;
    return fmaf(e, 0.693359375f, x);
}

/* avx_mathfun's sincos256_ps for one lane (Cephes sinf / cosf), contracted likewise. */
static void cephes_sincosf(float theta, float *sn, float *cs)
{
    uint32_t bits;
    memcpy(&bits, &theta, sizeof bits);
    uint32_t sign_sin = bits & 0x80000000u;
    bits &= 0x7fffffffu;
    float x;
    memcpy(&x, &bits, sizeof x);
    int32_t j = (int32_t)(x * 1.27323954473516f); /* 4 / pi, truncated */
    j = (j + 1) & ~1;
    const float yq = (float)j;
    sign_sin ^= (uint32_t)(j & 4) << 29;
    const int poly = (j & 2) == 0;
    const uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    x = fmaf(yq, -0.78515625f, x);
    x = fmaf(yq, -2.4187564849853515625e-4f, x);
    x = fmaf(yq, -3.77489497744594108e-8f, x);
    const float z = x * x;
    float yc = fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f);
    yc = fmaf(yc, z, 4.166664568298827e-2f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f);
    ys = fmaf(ys, z, -1.6666654611e-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    float s = poly ? ys : yc, c = poly ? yc : ys;
    uint32_t sb, cb;
    memcpy(&sb, &s, sizeof sb);
    memcpy(&cb, &c, sizeof cb);
    sb ^= sign_sin;
    cb ^= sign_cos;
    memcpy(sn, &sb, sizeof sb);
    memcpy(cs, &cb, sizeof cb);
}

/* torch's normal_fill_16_AVX2: Box-Muller over the pairs (j, j + 8) of 16 uniforms. */
static void normal16(float *d, float mean, float std)
{
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - d[j], u2 = d[j + 8];
        const float radius = sqrtf(-2.0f * cephes_logf(u1));
        float sn, cs;
        cephes_sincosf(two_pi * u2, &sn, &cs);
        d[j] = fmaf(radius * cs, std, mean);
        d[j + 8] = fmaf(radius * sn, std, mean);
    }
}

static float uniform01f(sb_mt19937 *rng)
{
    return (float)((double)(sb_mt19937_next32(rng) & 0xffffffu) * (1.0 / 16777216.0));
}

static double uniform01d(sb_mt19937 *rng)
{
    /* random64(): two 32-bit draws, the first in the high half; 53 bits kept */
    const uint64_t hi = sb_mt19937_next32(rng), lo = sb_mt19937_next32(rng);
    const uint64_t x = (hi << 32) | lo;
    return (double)(x & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

void sb_torch_normal(sb_mt19937 *rng, int *cache_valid, double *cache, real *out, size_t n,
                     double mean, double std)
{
    if (n >= 16) {
        /* normal_fill_AVX2: all uniforms first, then blocks of 16; a ragged tail redraws
         * the last 16 values. A block depends only on its own uniforms, so the blocks are
         * drawn and transformed one at a time, in the same draw order, without a buffer
         * of n values. */
        float block[16];
        const size_t full = n / 16 * 16;
        for (size_t i = 0; i < full; i += 16) {
            for (int k = 0; k < 16; k++)
                block[k] = uniform01f(rng);
            normal16(block, (float)mean, (float)std);
            if (out != NULL)
                for (int k = 0; k < 16; k++)
                    out[i + (size_t)k] = (real)block[k];
        }
        if (n % 16 != 0) {
            for (size_t i = full; i < n; i++)
                (void)uniform01f(rng); /* drawn, then overwritten by the tail */
            for (int k = 0; k < 16; k++)
                block[k] = uniform01f(rng);
            normal16(block, (float)mean, (float)std);
            if (out != NULL)
                for (int k = 0; k < 16; k++)
                    out[n - 16 + (size_t)k] = (real)block[k];
        }
        return;
    }
    /* at::normal_distribution<double>, one value per element, the sine half cached */
    for (size_t i = 0; i < n; i++) {
        double v;
        if (*cache_valid) {
            v = *cache;
            *cache_valid = 0;
        } else {
            const double u1 = uniform01d(rng), u2 = uniform01d(rng);
            const double r = sqrt(-2.0 * log(1.0 - u2));
            const double theta = 2.0 * 3.14159265358979323846 * u1;
            *cache = r * sin(theta);
            *cache_valid = 1;
            v = r * cos(theta);
        }
        if (out != NULL)
            out[i] = (real)(float)(v * std + mean);
    }
}

/* PyTorch's default initialisation of one parameter (the construction draws). */
static void default_init(sb_param *p, real *data, sb_mt19937 *rng)
{
    switch (p->init) {
    case SB_INIT_CONST:
        for (size_t k = 0; k < p->size; k++)
            data[k] = (real)p->a;
        break;
    case SB_INIT_UNIFORM: sb_torch_uniform(rng, data, p->size, -p->a, p->a); break;
    case SB_INIT_KAIMING: {
        const double bound = sb_torch_kaiming_bound(p->a);
        sb_torch_uniform(rng, data, p->size, -bound, bound);
        break;
    }
    case SB_INIT_FANIN: {
        const double bound = p->a > 0 ? 1.0 / sqrt(p->a) : 0.0;
        sb_torch_uniform(rng, data, p->size, -bound, bound);
        break;
    }
    case SB_INIT_CUSTOM: p->custom(p, data, rng, p->custom_ctx); break;
    }
}

typedef struct init_state {
    sb_mt19937 rng;
    int cache_valid;
    double cache;
} init_state;

static void normal_init(init_state *st, real *data, size_t n, double std)
{
    sb_torch_normal(&st->rng, &st->cache_valid, &st->cache, data, n, 0.0, std);
}

/* fla's _init_weights on a parameter, by the kind of module that owns it: Linear and Conv1d
 * weights (registered with PyTorch's kaiming default) N(0, 0.02^2), Linear biases zero, norm
 * weights (constants) reset. Custom parameters (A_log, dt_bias) are left to the caller. */
static void fla_init(init_state *st, sb_param *p, real *data)
{
    switch (p->init) {
    case SB_INIT_KAIMING: normal_init(st, data, p->size, INIT_RANGE); break;
    case SB_INIT_FANIN: memset(data, 0, p->size * sizeof *data); break;
    case SB_INIT_CONST:
        for (size_t k = 0; k < p->size; k++)
            data[k] = (real)p->a;
        break;
    case SB_INIT_UNIFORM: /* no fla mixer registers one */
    case SB_INIT_CUSTOM: SB_ASSERT(!"fla_init: unexpected init kind"); break;
    }
}

static int cmp_draw(const void *a, const void *b)
{
    const sb_param *x = *(sb_param *const *)a, *y = *(sb_param *const *)b;
    if (x->draw_key != y->draw_key)
        return x->draw_key < y->draw_key ? -1 : 1;
    return x < y ? -1 : (x > y);
}

sb_status sb_lm_stack_initialise(sb_model *m, uint64_t seed, sb_error *err)
{
    struct sb_lm_stack *s = m->stack;
    sb_params *ps = &m->params;
    const int L = m->cfg.n_layers;
    const size_t table = (size_t)m->cfg.d_output * (size_t)m->cfg.d_model;
    init_state st;
    sb_mt19937_init_genrand(&st.rng, (uint32_t)seed);
    st.cache_valid = 0;
    st.cache = 0;
    sb_param **order = sb_malloc((size_t)(ps->n > 0 ? ps->n : 1) * sizeof *order);
    if (order == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory initialising %d parameters", ps->n);
#define DATA(i) (ps->data + ps->p[i].offset)
    /* A. construction of the backbone */
    normal_init(&st, NULL, table, 1.0); /* nn.Embedding: normal_(0, 1) */
    for (int l = 0; l < L; l++) {
        const int *bi = s->idx + (size_t)l * B_COUNT;
        default_init(&ps->p[bi[B_ATTN_NORM]], DATA(bi[B_ATTN_NORM]), &st.rng);
        int n = 0;
        for (int i = m->layer_first[l]; i < bi[B_MLP_NORM]; i++)
            order[n++] = &ps->p[i];
        qsort(order, (size_t)n, sizeof *order, cmp_draw);
        for (int i = 0; i < n; i++)
            default_init(order[i], ps->data + order[i]->offset, &st.rng);
        for (int k = B_MLP_NORM; k <= B_DOWN; k++)
            default_init(&ps->p[bi[k]], DATA(bi[k]), &st.rng);
    }
    default_init(&ps->p[s->final_norm], DATA(s->final_norm), &st.rng);
    /* B. the backbone's post_init, children before parents */
    normal_init(&st, NULL, table, INIT_RANGE); /* the embedding, discarded afterwards */
    for (int l = 0; l < L; l++) {
        const int *bi = s->idx + (size_t)l * B_COUNT;
        fla_init(&st, &ps->p[bi[B_ATTN_NORM]], DATA(bi[B_ATTN_NORM]));
        for (int i = m->layer_first[l]; i < bi[B_MLP_NORM]; i++)
            if (ps->p[i].init != SB_INIT_CUSTOM)
                fla_init(&st, &ps->p[i], DATA(i));
        /* the mixer module itself, after its children: Gated DeltaNet's A_log, dt_bias */
        for (int i = m->layer_first[l]; i < bi[B_MLP_NORM]; i++)
            if (ps->p[i].init == SB_INIT_CUSTOM)
                ps->p[i].custom(&ps->p[i], DATA(i), &st.rng, ps->p[i].custom_ctx);
        for (int k = B_MLP_NORM; k <= B_DOWN; k++)
            fla_init(&st, &ps->p[bi[k]], DATA(bi[k]));
    }
    fla_init(&st, &ps->p[s->final_norm], DATA(s->final_norm));
    /* C. lm_head: Linear default, then the second post_init */
    default_init(&ps->p[s->head], DATA(s->head), &st.rng);
    fla_init(&st, &ps->p[s->head], DATA(s->head));
    /* D. CustomModel's input projection */
    default_init(&ps->p[s->proj_w], DATA(s->proj_w), &st.rng);
    default_init(&ps->p[s->proj_b], DATA(s->proj_b), &st.rng);
#undef DATA
    sb_free(order);
    return SB_OK;
}

/* ---- forward --------------------------------------------------------------------------------- */

static sb_tensor *param(const sb_model *m, int i)
{
    return &m->params.p[i].tensor;
}

/* One pre-norm block; state != NULL: the mixer streams from its carried state; cap (may be
 * NULL) keeps the mixer's input and output and the block's output. */
static sb_tensor *stack_block(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state,
                              sb_model_capture *cap)
{
    const int *bi = m->stack->idx + (size_t)l * B_COUNT;
    sb_tensor *y = sb_rmsnorm_gated(g, x, NULL, param(m, bi[B_ATTN_NORM]), NORM_EPS);
    sb_tensor *a =
        state != NULL ? m->type->forward_stream(g, m, l, y, state) : m->type->forward(g, m, l, y);
    sb_tensor *s = sb_add(g, x, a);
    sb_tensor *z = sb_rmsnorm_gated(g, s, NULL, param(m, bi[B_MLP_NORM]), NORM_EPS);
    sb_tensor *h =
        sb_gated_mlp(g, z, param(m, bi[B_GATE]), param(m, bi[B_UP]), param(m, bi[B_DOWN]));
    sb_tensor *out = sb_add(g, s, h);
    if (cap != NULL) {
        cap->layer_in[l] = y;
        cap->layer_out[l] = a;
        cap->block_out[l + 1] = out;
    }
    return out;
}

sb_tensor *sb_lm_stack_hidden_capture(sb_graph *g, const sb_model *m, sb_tensor *input,
                                      sb_model_capture *cap)
{
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    cap->block_out[0] = x;
    for (int l = 0; l < m->cfg.n_layers; l++)
        x = stack_block(g, m, l, x, NULL, cap);
    /* the last entry is what the head reads: after the final norm */
    x = sb_rmsnorm_gated(g, x, NULL, param(m, m->stack->final_norm), NORM_EPS);
    cap->block_out[m->cfg.n_layers] = x;
    return x;
}

sb_tensor *sb_lm_stack_hidden(sb_graph *g, const sb_model *m, sb_tensor *input,
                              int keep_only_output)
{
    const struct sb_lm_stack *s = m->stack;
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    if (!keep_only_output) {
        for (int l = 0; l < m->cfg.n_layers; l++)
            x = stack_block(g, m, l, x, NULL, NULL);
        return sb_rmsnorm_gated(g, x, NULL, param(m, s->final_norm), NORM_EPS);
    }
    /* evaluation: two buffers hold the running activation, everything a block allocates
     * after them is released before the next block (as RecNet's evaluation does) */
    SB_ASSERT(!g->record);
    real *buf[2];
    buf[0] = sb_graph_alloc(g, x->size * sizeof(real));
    buf[1] = sb_graph_alloc(g, x->size * sizeof(real));
    memcpy(buf[0], x->data, x->size * sizeof(real));
    x = sb_tensor_wrap(g, buf[0], 3, x->shape);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sb_arena_mark mark = sb_arena_get_mark(&g->arena);
        sb_tensor *y = stack_block(g, m, l, x, NULL, NULL);
        real *dst = buf[(l + 1) % 2];
        memcpy(dst, y->data, y->size * sizeof(real));
        int shape[3] = {y->shape[0], y->shape[1], y->shape[2]};
        if (!m->type->layers_share_tensors) /* see sb_layer_type */
            sb_arena_reset_to(&g->arena, mark);
        x = sb_tensor_wrap(g, dst, 3, shape);
    }
    return sb_rmsnorm_gated(g, x, NULL, param(m, s->final_norm), NORM_EPS);
}

sb_tensor *sb_lm_stack_hidden_stream(sb_graph *g, const sb_model *m, sb_tensor *input,
                                     real *const *states)
{
    sb_tensor *x = sb_linear(g, input, m->enc_w, m->enc_b);
    for (int l = 0; l < m->cfg.n_layers; l++)
        x = stack_block(g, m, l, x, states[l], NULL);
    return sb_rmsnorm_gated(g, x, NULL, param(m, m->stack->final_norm), NORM_EPS);
}

double sb_lm_stack_flops(const sb_layer_type *type, const sb_model_config *c, int T)
{
    const double D = c->d_model, Hd = sb_lm_stack_mlp_width(c->d_model);
    const double mixer = type->flops_per_token != NULL ? type->flops_per_token(c, T) : 0.0;
    /* per block: the mixer, the GatedMLP's three products and its activation, two norms and
     * two residual adds; around them the input projection, final norm and head */
    const double block = mixer + 2.0 * 3.0 * D * Hd + 4.0 * Hd + 12.0 * D;
    return 2.0 * c->d_input * D + c->n_layers * block + 4.0 * D + 2.0 * D * c->d_output;
}

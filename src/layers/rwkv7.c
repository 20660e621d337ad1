/* rwkv7.c - RWKV-7 "Goose", RWKV7Attention of flash-linear-attention at commit bc3b101d
 * (fla/layers/rwkv7.py, LoRA of fla/layers/rwkv6.py; recurrence as
 * fla/ops/generalized_delta_rule/dplr/naive.py), built in RecNet as
 *   RWKV7Attention(hidden_size=D, head_dim=D/H, layer_idx=l, num_hidden_layers=L)
 * with every other argument at fla's default (low-rank dims automatic, value_dim = D,
 * elementwise_affine, norm_eps 1e-5, fuse_norm False). head_dim = D/H gives the config's head
 * count, as the other fla layers take it; layer_idx = the layer's index in the stack and
 * num_hidden_layers = L drive fla's position- and depth-dependent initialisation.
 *
 *   delta = x_{t-1} - x_t;  m_* = x + delta * x_*           (* in r, w, k, v, a, g)
 *   r = m_r Wr^T;  k = m_k Wk^T;  v = m_v Wv^T
 *   w = -e^-1/2 sigmoid(W_w2 tanh(W_w1 m_w) + b_w)           log-decay per channel
 *   layer 0: v_first = v;  else v = lerp(v, v_first, sigmoid(W_v2 W_v1 m_v + b_v))
 *   a = sigmoid(W_a2 W_a1 m_a + b_a);  g = W_g2 sigmoid(W_g1 m_g)
 *   kk = normalize_head(k * k_k);  k = k * (1 + (a - 1) * k_a)
 *   S_t = diag(exp(w)) S_{t-1} + (kk a)(-kk^T S_{t-1}) + k v^T;  o = S_t^T r
 *   out = ((GroupNorm_H(o) + (sum_head r k r_k) v) * g) Wo^T
 * The recurrence is sb_dplr in its undecayed order with a = -kk, b = kk * a, scale 1.
 *
 * The value residual: fla's RWKV7 model hands layer 0's v to every later layer. RecNet's layer
 * interface passes only x, so layer 0 leaves its v (a tensor of the graph being built) in a
 * per-thread slot tagged with the graph and the model, and later layers of the same forward
 * read it; the gradient flows back into layer 0 through the tape as in fla. The record's
 * layers_share_tensors keeps that tensor alive in evaluation, where RecNet would otherwise
 * release each layer's activations before the next. A later layer that finds no v_first of
 * its own forward (run alone) fails an assertion rather than guess.
 * Docs: docs/models/rwkv7.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/fla_layers.h"
#include "layers/layer.h"
#include "ops/ops.h"
#include "ops/ops_dplr.h"
#include "ops/ops_fla.h"

/* registration order = state_dict order; enum of the layer with a v_lora (l > 0); layer 0
 * registers the same list without P_V_LORA0..P_V_LORA2B (see rwkv7_param) */
enum {
    P_X_R,
    P_X_W,
    P_X_K,
    P_X_V,
    P_X_A,
    P_X_G,
    P_K_K,
    P_K_A,
    P_R_K,
    P_R,
    P_K,
    P_V,
    P_O,
    P_W_LORA0,
    P_W_LORA2,
    P_W_LORA2B,
    P_V_LORA0,
    P_V_LORA2,
    P_V_LORA2B,
    P_A_LORA0,
    P_A_LORA2,
    P_A_LORA2B,
    P_G_LORA0,
    P_G_LORA2,
    P_GN_W,
    P_GN_B,
    P_COUNT
};

#define DECAY_SCALE 0.6065306597126334 /* e^-1/2 */

typedef struct rwkv7_dims {
    int D, H, K;        /* K = head width (key = value width per head) */
    int Rw, Ra, Rg, Rv; /* low-rank dims */
} rwkv7_dims;

/* fla's automatic low-rank dims: max(32, 32 round(c sqrt(D) f / 32)), round half to even */
static int lora_dim(double c, int D, double factor)
{
    const double r = nearbyint(c * sqrt((double)D) * factor / 32.0) * 32.0;
    return r > 32 ? (int)r : 32;
}

static rwkv7_dims rwkv7_dims_of(const sb_model_config *cfg)
{
    rwkv7_dims d;
    d.D = cfg->d_model;
    d.H = cfg->n_head > 0 ? cfg->n_head : 1;
    d.K = d.D / d.H;
    const double f = d.K / 64.0;
    d.Rw = d.Ra = lora_dim(2.5, d.D, f);
    d.Rg = lora_dim(5.0, d.D, 1.0);
    d.Rv = lora_dim(1.7, d.D, f);
    return d;
}

/* Parameter P_* of layer l (layer 0 has no v_lora). */
static sb_tensor *rwkv7_param(const sb_model *m, int l, int which)
{
    int k = which;
    if (l == 0) {
        SB_ASSERT(which < P_V_LORA0 || which > P_V_LORA2B);
        if (which > P_V_LORA2B)
            k -= 3;
    }
    return sb_model_param(m, l, k);
}

/* ---- initialisation ------------------------------------------------------------------------
 * The layer's construction draws, in order: r_proj, k_proj, v_proj, o_proj (nn.Linear
 * defaults, later overwritten), then per LoRA (w, v if l > 0, a, g) its two nn.Linear (later
 * overwritten) and five orthogonal draws of its second matrix: LoRA.__init__ applies its
 * _initialize_weights through Module.apply, which visits the activation, both Linear, the
 * Sequential and the LoRA itself and re-initialises the whole LoRA at each of those five
 * visits (it marks only the module visited). Last, the layer's own init draws the orthogonal
 * r_proj, k_proj (gain 0.1) and v_proj. Every value the default draws produce is overwritten,
 * so they are consumed (one 32-bit word per element) without being kept: the first LoRA's
 * second matrix consumes the projections' words before its own. */

/* torch.empty(n).normal_() on CPU, float32: n uniforms u = (word & 0xffffff) / 2^24, then
 * Box-Muller on blocks of 16 (u1 = 1 - u[j], u2 = u[j + 8]); when n is not a multiple of 16
 * the last 16 values are redrawn from 16 fresh uniforms and transformed again. n >= 16. The
 * transcendental functions run in double and round to float (torch: float, 1 ulp apart). */
static void fill16(float *x)
{
    for (int j = 0; j < 8; j++) {
        const double u1 = 1.0 - (double)x[j], u2 = (double)x[j + 8];
        const double radius = sqrt(-2.0 * log(u1)), theta = 2.0 * 3.14159265358979323846 * u2;
        x[j] = (float)(radius * cos(theta));
        x[j + 8] = (float)(radius * sin(theta));
    }
}

static float torch_uniform01(sb_mt19937 *rng)
{
    return (float)((double)(sb_mt19937_next32(rng) & 0xffffffu) * (1.0 / 16777216.0));
}

static void torch_normal(sb_mt19937 *rng, float *out, size_t n)
{
    SB_ASSERT(n >= 16);
    for (size_t i = 0; i < n; i++)
        out[i] = torch_uniform01(rng);
    for (size_t i = 0; i + 16 <= n; i += 16)
        fill16(out + i);
    if (n % 16 != 0) {
        float *tail = out + n - 16;
        for (int i = 0; i < 16; i++)
            tail[i] = torch_uniform01(rng);
        fill16(tail);
    }
}

static void skip_words(sb_mt19937 *rng, size_t n)
{
    for (size_t i = 0; i < n; i++)
        (void)sb_mt19937_next32(rng);
}

/* nn.init.orthogonal_(w [rows, cols], gain): a normal [rows, cols] matrix, transposed when
 * rows < cols, its QR with R's diagonal made positive, Q (transposed back) times gain. Q from
 * two passes of modified Gram-Schmidt in double (the same Q as LAPACK's up to rounding). */
static void orthogonal_init(sb_mt19937 *rng, real *out, int rows, int cols, double gain)
{
    const size_t n = (size_t)rows * (size_t)cols;
    const int m = rows >= cols ? rows : cols, k = rows >= cols ? cols : rows; /* m x k, m >= k */
    float *g = malloc(n * sizeof *g);
    double *Q = malloc(n * sizeof *Q);
    SB_ASSERT(g != NULL && Q != NULL);
    torch_normal(rng, g, n);
    for (int i = 0; i < m; i++) /* Q[i][j] = element (i, j) of the m x k matrix */
        for (int j = 0; j < k; j++)
            Q[(size_t)i * (size_t)k + (size_t)j] =
                rows >= cols ? (double)g[(size_t)i * (size_t)cols + (size_t)j]
                             : (double)g[(size_t)j * (size_t)cols + (size_t)i];
    for (int j = 0; j < k; j++) {
        for (int pass = 0; pass < 2; pass++)
            for (int p = 0; p < j; p++) {
                double dot = 0;
                for (int i = 0; i < m; i++)
                    dot += Q[(size_t)i * k + p] * Q[(size_t)i * k + j];
                for (int i = 0; i < m; i++)
                    Q[(size_t)i * k + j] -= dot * Q[(size_t)i * k + p];
            }
        double norm = 0;
        for (int i = 0; i < m; i++)
            norm += Q[(size_t)i * k + j] * Q[(size_t)i * k + j];
        norm = sqrt(norm);
        for (int i = 0; i < m; i++)
            Q[(size_t)i * k + j] /= norm;
    }
    const float gf = (float)gain;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const double q = rows >= cols ? Q[(size_t)r * k + c] : Q[(size_t)c * k + r];
            out[(size_t)r * (size_t)cols + (size_t)c] = (real)((float)q * gf);
        }
    free(g);
    free(Q);
}

/* The LoRA second matrices [D, R] (rank 0..3). p->a: 0 the w LoRA (consumes the four
 * projections' words first), 1 a LoRA with a bias, 2 without (g). */
static void init_lora2(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    const int D = p->shape[0], R = p->shape[1];
    const int kind = (int)p->a;
    if (kind == 0)
        skip_words(rng, 4 * (size_t)D * (size_t)D);
    skip_words(rng, 2 * (size_t)R * (size_t)D + (kind == 2 ? 0 : (size_t)D));
    const double gain = 0.1 * (R > D ? sqrt((double)R / (double)D) : 1.0);
    for (int i = 0; i < 5; i++)
        orthogonal_init(rng, data, D, R, gain);
}

/* r_proj, k_proj, v_proj: orthogonal with gain p->a */
static void init_orthogonal(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    orthogonal_init(rng, data, p->shape[0], p->shape[1], p->a);
}

/* The position- and depth-dependent constants; p->a = (l * 1000 + L) * 1000 + K and the
 * parameter's name says which rule. float32 arithmetic as torch's on float tensors. */
static void init_rwkv_const(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)rng, (void)ctx;
    const long code = (long)p->a;
    const int K = (int)(code % 1000), L = (int)((code / 1000) % 1000), l = (int)(code / 1000000);
    const int D = (int)p->size;
    /* fla divides by L - 1; a one-layer stack (which fla cannot build) takes ratio 0 */
    const double r0 = L > 1 ? (double)l / (double)(L - 1) : 0.0;
    const double r1 = 1.0 - (double)l / (double)L;
    const char *name = p->name;
    for (int n = 0; n < D; n++) {
        const float linear = (float)((double)n / (double)(D - 1) - 0.5);
        const double zz = ((double)(n % K) - (K - 1) / 2.0) / ((K - 1) / 2.0);
        const float zf = (float)zz, zigzag = zf * fabsf(zf);
        const float www =
            (float)(-6.0 + 6.0 * pow((double)n / (double)(D - 1), 1.0 + pow(r0, 0.3)));
        const float ddd = (float)((double)n / (double)D);
        float v = 0;
        if (strstr(name, "x_r") != NULL || strstr(name, "x_g") != NULL)
            v = 1.0f - powf(ddd, (float)(0.2 * r1));
        else if (strstr(name, "x_w") != NULL || strstr(name, "x_a") != NULL)
            v = 1.0f - powf(ddd, (float)(0.9 * r1));
        else if (strstr(name, "x_k") != NULL || strstr(name, "x_v") != NULL)
            v = 1.0f - powf(ddd, (float)(0.7 * r1));
        else if (strstr(name, "k_k") != NULL)
            v = 0.71f - linear * 0.1f;
        else if (strstr(name, "w_lora") != NULL)
            v = www + 0.5f + zigzag * 2.5f;
        else if (strstr(name, "a_lora") != NULL)
            v = -0.19f + zigzag * 0.3f + linear * 0.4f;
        else if (strstr(name, "v_lora") != NULL)
            v = 0.73f - linear * 0.4f;
        else if (strstr(name, "g_norm") != NULL)
            v = (float)pow((double)(l + 1) / (double)L, 0.7);
        else
            SB_ASSERT(0);
        data[n] = (real)v;
    }
}

static int layer_index(const char *prefix)
{
    int l = 0;
    if (sscanf(prefix, "layers.%d.", &l) != 1)
        l = 0;
    return l;
}

static sb_status rwkv7_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->n_head < 1 || cfg->d_model % cfg->n_head != 0 || cfg->d_model / cfg->n_head < 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "rwkv7: --feat_size %d does not split into %d heads of 2 or more",
                            cfg->d_model, cfg->n_head);
    if (cfg->n_layers > 999 || cfg->d_model / cfg->n_head > 999)
        return sb_error_set(err, SB_ERR_INVALID, "rwkv7: at most 999 layers and head width 999");
    return SB_OK;
}

static int rwkv7_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const rwkv7_dims d = rwkv7_dims_of(cfg);
    const int l = layer_index(prefix), D = d.D;
    const double code = ((double)l * 1000.0 + (double)cfg->n_layers) * 1000.0 + (double)d.K;
    int mix[3] = {1, 1, D}, vec[1] = {D}, rk[2] = {d.H, d.K}, sq[2] = {D, D};
    int first = ps->n;
    static const char *const mixes[6] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};
    for (int i = 0; i < 6; i++) {
        sb_param *p = sb_params_add_named(ps, prefix, mixes[i], 3, mix, SB_INIT_CUSTOM, code, 100);
        p->custom = init_rwkv_const;
    }
    sb_param *kk = sb_params_add_named(ps, prefix, "k_k", 1, vec, SB_INIT_CUSTOM, code, 100);
    kk->custom = init_rwkv_const;
    sb_params_add_named(ps, prefix, "k_a", 1, vec, SB_INIT_CONST, 1.02, 100);
    sb_params_add_named(ps, prefix, "r_k", 2, rk, SB_INIT_CONST, -0.04, 100);
    sb_param *r = sb_params_add_named(ps, prefix, "r_proj.weight", 2, sq, SB_INIT_CUSTOM, 1.0, 4);
    r->custom = init_orthogonal;
    sb_param *k = sb_params_add_named(ps, prefix, "k_proj.weight", 2, sq, SB_INIT_CUSTOM, 0.1, 5);
    k->custom = init_orthogonal;
    sb_param *v = sb_params_add_named(ps, prefix, "v_proj.weight", 2, sq, SB_INIT_CUSTOM, 1.0, 6);
    v->custom = init_orthogonal;
    sb_params_add_named(ps, prefix, "o_proj.weight", 2, sq, SB_INIT_CONST, 0.0, 100);
    /* the LoRAs: first matrix zero, second orthogonal, bias by rule */
    const char *const loras[4] = {"w_lora", "v_lora", "a_lora", "g_lora"};
    const int ranks[4] = {d.Rw, d.Rv, d.Ra, d.Rg};
    for (int i = 0; i < 4; i++) {
        if (i == 1 && l == 0)
            continue; /* fla builds no v_lora in layer 0 */
        char name[64];
        int w0[2] = {ranks[i], D}, w2[2] = {D, ranks[i]};
        snprintf(name, sizeof name, "%s.lora.0.weight", loras[i]);
        sb_params_add_named(ps, prefix, name, 2, w0, SB_INIT_CONST, 0.0, 100);
        snprintf(name, sizeof name, "%s.lora.2.weight", loras[i]);
        sb_param *p2 = sb_params_add_named(ps, prefix, name, 2, w2, SB_INIT_CUSTOM,
                                           i == 0 ? 0.0 : (i == 3 ? 2.0 : 1.0), i);
        p2->custom = init_lora2;
        if (i != 3) {
            snprintf(name, sizeof name, "%s.lora.2.bias", loras[i]);
            sb_param *b = sb_params_add_named(ps, prefix, name, 1, vec, SB_INIT_CUSTOM, code, 100);
            b->custom = init_rwkv_const;
        }
    }
    sb_param *gw =
        sb_params_add_named(ps, prefix, "g_norm.weight", 1, vec, SB_INIT_CUSTOM, code, 100);
    gw->custom = init_rwkv_const;
    sb_params_add_named(ps, prefix, "g_norm.bias", 1, vec, SB_INIT_CONST, 0.0, 100);
    return ps->n - first;
}

/* ---- forward -------------------------------------------------------------------------------- */

/* layer 0's v of the forward being built (see the header comment) */
static _Thread_local struct {
    const sb_graph *g;
    const sb_model *m;
    sb_tensor *v;
} v_first_slot;

static sb_tensor *lora(sb_graph *g, sb_tensor *x, sb_tensor *w0, sb_tensor *w2, sb_tensor *b,
                       int activation /* 0 none, 1 tanh, 2 sigmoid */)
{
    sb_tensor *h = sb_linear(g, x, w0, NULL);
    if (activation == 1)
        h = sb_tanh_op(g, h);
    else if (activation == 2)
        h = sb_sigmoid(g, h);
    return sb_linear(g, h, w2, b);
}

/* per-sample stream state: the previous frame x_{t-1} [D], then the recurrent state H K K */
static sb_tensor *rwkv7_mixer(sb_graph *g, const sb_model *m, int l, sb_tensor *x, real *state)
{
    const rwkv7_dims d = rwkv7_dims_of(&m->cfg);
    const int B = x->shape[0], H = d.H, K = d.K;
    sb_tensor *p[P_COUNT] = {0};
    for (int i = 0; i < P_COUNT; i++)
        if (l != 0 || i < P_V_LORA0 || i > P_V_LORA2B)
            p[i] = rwkv7_param(m, l, i);
    sb_tensor *delta = sb_token_shift(g, x, state);
    real *S = state != NULL ? state + (size_t)B * (size_t)d.D : NULL;
    sb_tensor *mx[6];
    for (int i = 0; i < 6; i++)
        mx[i] = sb_add(g, x, sb_dplr_rowmul(g, delta, p[P_X_R + i]));
    sb_tensor *r = sb_linear(g, mx[0], p[P_R], NULL);
    sb_tensor *w = lora(g, mx[1], p[P_W_LORA0], p[P_W_LORA2], p[P_W_LORA2B], 1);
    w = sb_dplr_scale_heads(g, sb_sigmoid(g, w), NULL, (real)-DECAY_SCALE);
    sb_tensor *k = sb_linear(g, mx[2], p[P_K], NULL);
    sb_tensor *v = sb_linear(g, mx[3], p[P_V], NULL);
    if (l == 0) {
        v_first_slot.g = g, v_first_slot.m = m, v_first_slot.v = v;
    } else {
        SB_ASSERT(v_first_slot.g == g && v_first_slot.m == m && v_first_slot.v != NULL &&
                  v_first_slot.v->size == v->size);
        sb_tensor *s = sb_sigmoid(g, lora(g, mx[3], p[P_V_LORA0], p[P_V_LORA2], p[P_V_LORA2B], 0));
        /* torch.lerp(v, v_first, s) = v + s (v_first - v) */
        sb_tensor *gap = sb_add(g, v_first_slot.v, sb_dplr_scale_heads(g, v, NULL, -1));
        v = sb_add(g, v, sb_dplr_mul(g, s, gap, 1));
    }
    sb_tensor *a = sb_sigmoid(g, lora(g, mx[4], p[P_A_LORA0], p[P_A_LORA2], p[P_A_LORA2B], 0));
    sb_tensor *gate = lora(g, mx[5], p[P_G_LORA0], p[P_G_LORA2], NULL, 2);
    /* kk = F.normalize(k * k_k) per head: x / max(|x|, 1e-12), here x / sqrt(|x|^2 + 1e-24) */
    sb_tensor *kk = sb_l2norm(g, sb_dplr_rowmul(g, k, p[P_K_K]), K, (real)1e-24);
    /* k * (1 + (a - 1) * k_a) = k + (k a - k) * k_a */
    sb_tensor *ka = sb_add(g, sb_dplr_mul(g, k, a, 1), sb_dplr_scale_heads(g, k, NULL, -1));
    k = sb_add(g, k, sb_dplr_rowmul(g, ka, p[P_K_A]));
    sb_tensor *rh = sb_fla_heads(g, r, K), *kh = sb_fla_heads(g, k, K);
    sb_tensor *vh = sb_fla_heads(g, v, K), *wh = sb_fla_heads(g, w, K);
    sb_tensor *ah = sb_fla_heads(g, sb_dplr_scale_heads(g, kk, NULL, -1), K);
    sb_tensor *bh = sb_fla_heads(g, sb_dplr_mul(g, kk, a, 1), K);
    sb_tensor *o = sb_dplr(g, rh, kh, vh, wh, ah, bh, 1, SB_DPLR_UNDECAYED, SB_DPLR_CHUNK, S);
    o = sb_group_norm(g, sb_fla_flat(g, o), H, p[P_GN_W], p[P_GN_B], (real)(K * 1e-5));
    sb_tensor *r_k = sb_tensor_reshape(g, p[P_R_K], 1, (int[]){H * K});
    o = sb_add(g, o, sb_rwkv7_bonus(g, r, k, r_k, v, H));
    o = sb_dplr_mul(g, o, gate, 1);
    return sb_linear(g, o, p[P_O], NULL);
}

static sb_tensor *rwkv7_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    return rwkv7_mixer(g, m, l, x, NULL);
}

static sb_tensor *rwkv7_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                       real *state)
{
    return rwkv7_mixer(g, m, l, x, state);
}

/* The probe's gates: the decay exp(w) and the in-context rate a, each averaged over a head's
 * K channels (recomputed with the forward's ops; the probe's graph does not record). */
static sb_tensor *rwkv7_probe_gates(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                    const uint8_t *gap, sb_gate_desc *desc)
{
    (void)gap;
    const rwkv7_dims d = rwkv7_dims_of(&m->cfg);
    const int B = x->shape[0], T = x->shape[1], H = d.H, K = d.K;
    sb_tensor *delta = sb_token_shift(g, x, NULL);
    sb_tensor *mw = sb_add(g, x, sb_dplr_rowmul(g, delta, rwkv7_param(m, l, P_X_W)));
    sb_tensor *ma = sb_add(g, x, sb_dplr_rowmul(g, delta, rwkv7_param(m, l, P_X_A)));
    sb_tensor *w = lora(g, mw, rwkv7_param(m, l, P_W_LORA0), rwkv7_param(m, l, P_W_LORA2),
                        rwkv7_param(m, l, P_W_LORA2B), 1);
    sb_tensor *a = lora(g, ma, rwkv7_param(m, l, P_A_LORA0), rwkv7_param(m, l, P_A_LORA2),
                        rwkv7_param(m, l, P_A_LORA2B), 0);
    int shape[3] = {B, T, 2 * H};
    sb_tensor *out = sb_tensor_new(g, 3, shape);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            double decay = 0, rate = 0;
            for (int c = 0; c < K; c++) {
                const size_t j = r * (size_t)d.D + (size_t)h * K + c;
                decay += exp(-DECAY_SCALE / (1.0 + exp(-(double)w->data[j])));
                rate += 1.0 / (1.0 + exp(-(double)a->data[j]));
            }
            out->data[r * 2 * H + h] = (real)(decay / K);
            out->data[r * 2 * H + H + h] = (real)(rate / K);
        }
    *desc = (sb_gate_desc){
        .n_kinds = 2,
        .n_groups = H,
        .kind = {"decay exp(w) (mean over channels)", "in-context rate a (mean over channels)"},
        .hi = {1.0, 1.0}};
    return out;
}

/* Per sample: the previous frame [D], then the state H K K; the buffer of B samples is laid
 * out field by field. */
static size_t rwkv7_stream_state(const sb_model_config *cfg)
{
    const rwkv7_dims d = rwkv7_dims_of(cfg);
    return (size_t)d.D + (size_t)d.H * (size_t)d.K * (size_t)d.K;
}

static void rwkv7_stream_recurrent(const sb_model_config *cfg, size_t *history, size_t *count)
{
    const rwkv7_dims d = rwkv7_dims_of(cfg);
    *history = (size_t)d.D;
    *count = (size_t)d.H * (size_t)d.K * (size_t)d.K;
}

static double rwkv7_flops(const sb_model_config *cfg, int T)
{
    (void)T;
    const rwkv7_dims d = rwkv7_dims_of(cfg);
    const double D = d.D, H = d.H, K = d.K;
    const double proj = 2 * 4 * D * D + 4 * D * (d.Rw + d.Rv + d.Ra + d.Rg);
    const double rec = H * 10 * K * K;
    return proj + rec + 60 * D;
}

static double rwkv7_state(const sb_model_config *cfg)
{
    const rwkv7_dims d = rwkv7_dims_of(cfg);
    return (double)d.H * d.K * d.K;
}

const sb_layer_type sb_layer_rwkv7 = {
    .name = "rwkv7",
    .layers_share_tensors = 1, /* v_first */
    .axes = {SB_GATE_VECTOR, SB_FORGET_INPUT, SB_TRANSITION_DIAGONAL_RANK1, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "H K^2 = D^2 / H"},
    .summary = "RWKV-7 Goose (fla bc3b101d): generalized delta rule, vector decay + in-context "
               "rate, value residual",
    .taxonomy = {"data-dependent decay per channel (LoRA, e^w in (0.545, 1)) + in-context rate a",
                 "diagonal + rank-1 (diag(e^w) - (kk a) kk^T)", "1 (plus rank-1 transition)",
                 "L2 removal key; GroupNorm per head", "yes, limited (down to about -0.45)",
                 "d_k x d_v"},
    .check = rwkv7_check,
    .add_params = rwkv7_add_params,
    .forward = rwkv7_forward,
    .flops_per_token = rwkv7_flops,
    .state_size = rwkv7_state,
    .stream_state_floats = rwkv7_stream_state,
    .forward_stream = rwkv7_forward_stream,
    .probe_gates = rwkv7_probe_gates,
    .stream_recurrent = rwkv7_stream_recurrent,
    .test_chunk = SB_DPLR_CHUNK,
};

/* s4.c - the reference's S4D block (models/ssm_models.py: S4D with S4DKernel, DropoutNd)
 * exactly as its RecNet builds it: d_model = --feat_size, d_state = --d_state (N/2 complex
 * modes per channel), dropout = --dropout (tied over time), transposed=True,
 * act_function='none' (which selects GELU), GLU output, kernel learning rate
 * min(0.001, lr) (SB_PARAM_GROUP2; the trainer gives that group its own AdamW settings).
 *
 *   K = kernel(log_dt, C, log_A_real, A_imag)     [H, T]   2 Re sum_n C q w^l
 *   y = causal_conv(x, K) + D x                    FFT (FFTW) along time, per channel
 *   a = DropoutNd(GELU(y))                         one keep decision per (b, h)
 *   out = GLU(a W^T + b)                           1x1 conv H -> 2H, gate = second half
 * The reference works in (B, H, L) layout; here x stays [B, T, H] (the same numbers, with
 * the time axis strided). Evaluation streams with the equivalent diagonal recurrence.
 * Spec: docs/models/s4.md; derivations and the reference's quirks:
 * docs/models/s4.md. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/layer.h"
#include "ops/ops.h"
#include "ops/ops_s4.h"
#include "tensor/optim.h"

/* parameters in state_dict order: S4D.D, then kernel.{C, log_dt, log_A_real, A_imag},
 * then output_linear.0.{weight, bias} */
enum { P_D, P_C, P_LOG_DT, P_LOG_A_REAL, P_A_IMAG, P_OUT_W, P_OUT_B, P_COUNT };

#define S4_MAX_STATE 65536

/* ---- torch.randn on the CPU generator -----------------------------------------------------
 * ATen's normal_ on a contiguous float32 tensor of at least 16 values (torch 1.13, AVX2
 * kernels, the build every x86-64 machine with AVX2 runs): all n values are first drawn as
 * uniforms (24-bit, as uniform_), then every block of 16 becomes 16 normals by Box-Muller,
 * u1 = 1 - x[j], u2 = x[j + 8] (j < 8), with the vectorised Cephes log and sincos of
 * avx_mathfun.h; when n is not a multiple of 16 the last 16 positions are drawn again and
 * transformed once more. The arithmetic below is that of the compiled kernel, including
 * the multiply-adds the compiler fused (found against torch: 3 million values, all equal).
 * Tensors of fewer than 16 values take the scalar path: Box-Muller in double on 53-bit
 * uniforms, the sine of each pair kept for the next value. */

static inline float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* log256_ps for x > 0 */
static float cephes_logf(float x)
{
    if (x < bits_float(0x00800000u))
        x = bits_float(0x00800000u);
    const int32_t ex = (int32_t)(float_bits(x) >> 23) - 0x7f;
    x = bits_float((float_bits(x) & ~0x7f800000u) | float_bits(0.5f));
    float e = (float)ex + 1.0f;
    const int small = x < 0.707106781186547524f;
    const float tmp = small ? x : 0.0f;
    x = x - 1.0f;
    e = e - (small ? 1.0f : 0.0f);
    x = x + tmp;
    const float z = x * x;
    float y = 7.0376836292E-2f;
    y = fmaf(y, x, -1.1514610310E-1f);
    y = fmaf(y, x, 1.1676998740E-1f);
    y = fmaf(y, x, -1.2420140846E-1f);
    y = fmaf(y, x, 1.4249322787E-1f);
    y = fmaf(y, x, -1.6668057665E-1f);
    y = fmaf(y, x, 2.0000714765E-1f);
    y = fmaf(y, x, -2.4999993993E-1f);
    y = fmaf(y, x, 3.3333331174E-1f);
    y = y * x;
    y = fmaf(y, z, e * -2.12194440e-4f);
    y = fmaf(-z, 0.5f, y);
    return fmaf(e, 0.693359375f, x + y);
}

/* sincos256_ps */
static void cephes_sincosf(float xin, float *s, float *c)
{
    float x = fabsf(xin);
    uint32_t sign_sin = float_bits(xin) & 0x80000000u;
    const int32_t j = ((int32_t)(x * 1.27323954473516f) + 1) & ~1;
    const float y = (float)j;
    const uint32_t swap_sin = (uint32_t)(j & 4) << 29;
    const int poly = (j & 2) == 0;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    const uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    sign_sin ^= swap_sin;
    const float z = x * x;
    float yc = 2.443315711809948E-005f;
    yc = fmaf(yc, z, -1.388731625493765E-003f);
    yc = fmaf(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = -1.9515295891E-4f;
    ys = fmaf(ys, z, 8.3321608736E-3f);
    ys = fmaf(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    const float sin1 = poly ? 0.0f : yc, sin2 = poly ? ys : 0.0f;
    const float sv = sin1 + sin2, cv = (yc - sin1) + (ys - sin2);
    *s = bits_float(float_bits(sv) ^ sign_sin);
    *c = bits_float(float_bits(cv) ^ sign_cos);
}

static float torch_uniform24(sb_mt19937 *rng)
{
    return (float)((double)(sb_mt19937_next32(rng) & 0xffffffu) * (1.0 / 16777216.0));
}

/* normal_fill_16_AVX2 on d[0..16) (uniforms in, normals out) */
static void normal_fill16(real *d, float stdv)
{
    const float two_pi = (float)(2.0 * 3.14159265358979323846); /* 2.0f * pi<double> */
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - (float)d[j], u2 = (float)d[j + 8];
        const float radius = sqrtf(-2.0f * cephes_logf(u1));
        float s, c;
        cephes_sincosf(two_pi * u2, &s, &c);
        d[j] = (real)fmaf(radius * c, stdv, 0.0f);
        d[j + 8] = (real)fmaf(radius * s, stdv, 0.0f);
    }
}

/* the generator's random64(): two 32-bit draws, the first in the high half */
static double torch_uniform53(sb_mt19937 *rng)
{
    const uint64_t hi = sb_mt19937_next32(rng), lo = sb_mt19937_next32(rng);
    return (double)(((hi << 32) | lo) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* torch.randn(n) * std (std as ATen receives it for normal_(0, std)), into out */
static void torch_randn(sb_mt19937 *rng, real *out, size_t n, double std)
{
    if (n >= 16) {
        for (size_t i = 0; i < n; i++)
            out[i] = (real)torch_uniform24(rng);
        for (size_t i = 0; i + 16 <= n; i += 16)
            normal_fill16(out + i, (float)std);
        if (n % 16 != 0) {
            real *tail = out + n - 16;
            for (int i = 0; i < 16; i++)
                tail[i] = (real)torch_uniform24(rng);
            normal_fill16(tail, (float)std);
        }
        return;
    }
    /* fewer than 16: normal_distribution<double>; a pair's second value is cached */
    int have = 0;
    double cached = 0;
    for (size_t i = 0; i < n; i++) {
        double v;
        if (have) {
            v = cached;
            have = 0;
        } else {
            const double u1 = torch_uniform53(rng), u2 = torch_uniform53(rng);
            const double r = sqrt(-2.0 * log(1.0 - u2)), theta = 2.0 * M_PI * u1;
            cached = r * sin(theta);
            have = 1;
            v = r * cos(theta);
        }
        out[i] = (real)(float)(v * std);
    }
}

/* ---- initialisation ------------------------------------------------------------------------- */

/* D = torch.randn(H) */
static void init_D(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    torch_randn(rng, data, p->size, 1.0);
}

/* C = torch.randn(H, N2, dtype=cfloat): normal_ on the real view with std 1/sqrt(2) */
static void init_C(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    torch_randn(rng, data, p->size, 1.0 / sqrt(2.0));
}

/* log_dt = torch.rand(H) * (ln 0.1 - ln 0.001) + ln 0.001, in float32 steps */
static void init_log_dt(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    const float scale = (float)(log(0.1) - log(0.001)), shift = (float)log(0.001);
    for (size_t i = 0; i < p->size; i++) {
        const float u = torch_uniform24(rng);
        const float v = u * scale;
        data[i] = (real)(v + shift);
    }
}

/* log_A_real = log(0.5 * ones(H, N2)) */
static void init_log_A_real(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)rng, (void)ctx;
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)logf(0.5f);
}

/* A_imag = math.pi * arange(N2) per channel: float32 n times float32 pi */
static void init_A_imag(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)rng, (void)ctx;
    const int N2 = p->shape[1];
    for (size_t i = 0; i < p->size; i++)
        data[i] = (real)((float)(int)(i % (size_t)N2) * (float)M_PI);
}

static sb_status s4_check(const sb_model_config *cfg, sb_error *err)
{
    if (cfg->d_state < 2 || cfg->d_state > S4_MAX_STATE)
        return sb_error_set(err, SB_ERR_INVALID,
                            "s4: --d_state %d must lie in [2, %d] (d_state / 2 complex modes)",
                            cfg->d_state, S4_MAX_STATE);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "s4: --dropout %g must lie in [0, 1)",
                            cfg->dropout);
    return SB_OK;
}

static int s4_add_params(sb_params *ps, const char *prefix, const sb_model_config *cfg)
{
    const int H = cfg->d_model, N2 = cfg->d_state / 2;
    int h1[1] = {H}, hn2[3] = {H, N2, 2}, hn[2] = {H, N2}, w[3] = {2 * H, H, 1}, b[1] = {2 * H};
    int first = ps->n;
    /* draw ranks = construction order: D (randn), log_dt (rand), C (complex randn), the
     * output conv (weight, then bias); log_A_real and A_imag draw nothing */
    sb_param *p = sb_params_add_named(ps, prefix, "D", 1, h1, SB_INIT_CUSTOM, 0.0, 0);
    p->custom = init_D;
    p = sb_params_add_named(ps, prefix, "kernel.C", 3, hn2, SB_INIT_CUSTOM, 0.0, 2);
    p->custom = init_C;
    p = sb_params_add_named(ps, prefix, "kernel.log_dt", 1, h1, SB_INIT_CUSTOM, 0.0, 1);
    p->custom = init_log_dt;
    p->flags |= SB_PARAM_GROUP2;
    p = sb_params_add_named(ps, prefix, "kernel.log_A_real", 2, hn, SB_INIT_CUSTOM, 0.0, 100);
    p->custom = init_log_A_real;
    p->flags |= SB_PARAM_GROUP2;
    p = sb_params_add_named(ps, prefix, "kernel.A_imag", 2, hn, SB_INIT_CUSTOM, 0.0, 100);
    p->custom = init_A_imag;
    p->flags |= SB_PARAM_GROUP2;
    /* nn.Conv1d(H, 2H, 1): fan_in = H */
    sb_params_add_named(ps, prefix, "output_linear.0.weight", 3, w, SB_INIT_KAIMING, H, 3);
    sb_params_add_named(ps, prefix, "output_linear.0.bias", 1, b, SB_INIT_FANIN, H, 4);
    return ps->n - first;
}

/* GELU, tied dropout, the 1x1 conv and the GLU, on y [B, T, H] */
static sb_tensor *s4_output(sb_graph *g, const sb_model *m, int l, sb_tensor *y)
{
    const int H = m->cfg.d_model;
    sb_tensor *a = sb_gelu(g, y);
    a = sb_dropout_tied(g, a, (real)m->cfg.dropout);
    int w2[2] = {2 * H, H};
    sb_tensor *w = sb_tensor_reshape(g, sb_model_param(m, l, P_OUT_W), 2, w2);
    sb_tensor *p = sb_linear(g, a, w, sb_model_param(m, l, P_OUT_B));
    return sb_glu(g, p);
}

static sb_tensor *s4_forward(sb_graph *g, const sb_model *m, int l, sb_tensor *x)
{
    sb_tensor *K = sb_s4d_kernel(g, sb_model_param(m, l, P_LOG_DT), sb_model_param(m, l, P_C),
                                 sb_model_param(m, l, P_LOG_A_REAL), sb_model_param(m, l, P_A_IMAG),
                                 x->shape[1]);
    sb_tensor *y = sb_s4d_conv(g, x, K, sb_model_param(m, l, P_D));
    return s4_output(g, m, l, y);
}

/* streaming state per batch row: the N2 complex modes of every channel, [H][N2][2] */
static size_t s4_stream_state(const sb_model_config *cfg)
{
    return (size_t)cfg->d_model * (size_t)(cfg->d_state / 2) * 2;
}

static sb_tensor *s4_forward_stream(sb_graph *g, const sb_model *m, int l, sb_tensor *x,
                                    real *state)
{
    sb_tensor *y =
        sb_s4d_recurrence(g, x, sb_model_param(m, l, P_LOG_DT), sb_model_param(m, l, P_C),
                          sb_model_param(m, l, P_LOG_A_REAL), sb_model_param(m, l, P_A_IMAG),
                          sb_model_param(m, l, P_D), state);
    return s4_output(g, m, l, y);
}

static double s4_flops(const sb_model_config *cfg, int T)
{
    /* docs/spec/flops.md, direct convolution averaged over a sequence of T
     * frames: 4 H^2 + H (T + 1) + 12 H (the kernel build, 10 H N/2 T per forward, is not
     * per token) */
    const double H = cfg->d_model;
    return 4.0 * H * H + H * ((double)T + 1.0) + 12.0 * H;
}

static double s4_state(const sb_model_config *cfg)
{
    return (double)cfg->d_model * (double)(cfg->d_state / 2) * 2.0;
}

const sb_layer_type sb_layer_s4 = {
    .name = "s4",
    .axes = {SB_GATE_VECTOR, SB_FORGET_FIXED, SB_TRANSITION_DIAGONAL, SB_UPDATE_RANK1,
             SB_MEMORY_CONSTANT, "D N (N/2 complex modes per channel)"},
    .summary = "S4D: diagonal complex SSM as a long FFT convolution, GELU, tied dropout, GLU",
    .taxonomy = {"a fixed decay per channel and mode, no input-dependent gate (the kernel "
                 "does not depend on the input)",
                 "diagonal, complex (e^{dt A}: N/2 damped rotations per channel)", "1 per channel",
                 "none", "yes: complex e^{dt A} rotate by dt A_imag per step (up to dt pi N/2)",
                 "N per channel (N/2 complex)"},
    .check = s4_check,
    .add_params = s4_add_params,
    .forward = s4_forward,
    .flops_per_token = s4_flops,
    .state_size = s4_state,
    .stream_state_floats = s4_stream_state,
    .forward_stream = s4_forward_stream,
    .init_optimizer = sb_optimizer_init_s4, /* train.py's setup_optimizer */
};

/* fla_blocks.c - the small blocks around the fla recurrences (see ops_fla.h; spec
 * docs/models/fla_layers.md): short convolution, L2 norm, (gated) RMSNorm, and the gate
 * functions (GLA logsigmoid, Gated DeltaNet decay, beta).
 *
 *   L2 norm (1.3):    r = (sum x^2 + eps)^-1/2, y = x r;   dx = r (dy - (dy . y) y)
 *   RMSNorm (1.4):    r = (mean x^2 + eps)^-1/2, xh = x r, y = xh w silu(z)
 *                     dw += sum dy xh silu(z);  dz = dy xh w silu'(z);
 *                     dxh = dy w silu(z);  dx = r (dxh - xh mean(dxh xh))
 *   logsigmoid:       y = c (min(x, 0) - log1p(exp(-|x|))),  dx = dy c sigmoid(-x)
 *   decay (1.5):      u = a + dt_bias_h,  y = -exp(A_log_h) softplus(u)
 *                     da = dy (-exp(A_log_h)) sigmoid(u);  d dt_bias_h += sum da;
 *                     d A_log_h += sum dy y
 *   beta:             y = c sigmoid(z),  dz = dy y (1 - y / c)
 * Parameter gradients are column sums in row order, columns split between threads.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/fla_kernels.h"
#include "ops/ops.h"
#include "ops/ops_fla.h"

#define PAR_MIN 32768 /* below this many elements, one thread */

static inline real sigmoid(real x)
{
    return 1 / (1 + fla_exp(-x));
}

/* PyTorch softplus (beta 1, threshold 20) */
static inline real softplus(real x)
{
    return x > 20 ? x : log1p(exp(x));
}

static sb_tensor *like(sb_graph *g, const sb_tensor *x)
{
    return sb_tensor_new(g, x->ndim, x->shape);
}

/* ---- short convolution + SiLU ---------------------------------------------------------------
 * z[b, t, c] = sum_i w[c, i] x[b, t - (W-1) + i, c] (x = 0 before t = 0, or the carried
 * history when streaming), y = silu(z). Backward (z recomputed, W multiply-adds):
 *   dz = dy silu'(z);  dx[b, s, c] += sum_i dz[b, s + (W-1) - i, c] w[c, i];
 *   dw[c, i] += sum_{b,t} dz[b, t, c] x[b, t - (W-1) + i, c]
 * One fused op instead of sb_conv1d_causal + sb_silu (the pair took a fifth of a GLA training
 * step): one pass each way, no stored pre-activation, a vectorised exp. Samples are split
 * between threads and each walks its frames in order over whole rows of channels (contiguous
 * memory); dw is summed per sample, then over the samples in order, so the result does not
 * depend on the number of threads. */
#define SC_MAXW 8

typedef struct sconv_ctx {
    sb_tensor *x, *w, *y;
    int B, T, C, W;
} sconv_ctx;

/* wt[i][c] = w[c][i] (taps contiguous over the channels) */
static void sconv_taps(const real *w, int C, int W, real *wt)
{
    for (int c = 0; c < C; c++)
        for (int i = 0; i < W; i++)
            wt[(size_t)i * (size_t)C + (size_t)c] = w[(size_t)c * (size_t)W + (size_t)i];
}

/* z of row t of sample b into z[C]; xs[i] receives the input row of tap i (NULL: zeros). */
static void sconv_row(const real *x, const real *hist, const real *wt, int b, int t, int T, int C,
                      int W, real *z, const real **xs)
{
    for (int c = 0; c < C; c++)
        z[c] = 0;
    for (int i = 0; i < W; i++) {
        const int s = t - (W - 1) + i;
        if (s >= 0)
            xs[i] = x + ((size_t)b * (size_t)T + (size_t)s) * (size_t)C;
        else if (hist != NULL)
            xs[i] = hist + ((size_t)b * (size_t)(W - 1) + (size_t)(W - 1 + s)) * (size_t)C;
        else
            xs[i] = NULL;
        if (xs[i] == NULL)
            continue;
        const real *xr = xs[i], *wr = wt + (size_t)i * (size_t)C;
        for (int c = 0; c < C; c++)
            z[c] = fma(wr[c], xr[c], z[c]);
    }
}

static void sconv_backward(sb_graph *g, void *ctx)
{
    sconv_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, C = c->C, W = c->W;
    const real *x = c->x->data, *dy = c->y->grad;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    const size_t CW = (size_t)C * (size_t)W;
    real *wt = sb_graph_alloc(g, CW * sizeof(real));
    sconv_taps(c->w->data, C, W, wt);
    /* per-sample dw [B][W][C], and per-thread rows z, dz */
    real *part = sb_graph_alloc(g, (size_t)B * CW * sizeof(real));
    real *rows = sb_graph_alloc(g, (size_t)omp_get_max_threads() * 2 * (size_t)C * sizeof(real));
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)C > PAR_MIN)
    for (int b = 0; b < B; b++) {
        real *z = rows + (size_t)omp_get_thread_num() * 2 * (size_t)C, *dz = z + C;
        real *acc = part + (size_t)b * CW;
        memset(acc, 0, CW * sizeof *acc);
        for (int t = 0; t < T; t++) {
            const real *xs[SC_MAXW];
            sconv_row(x, NULL, wt, b, t, T, C, W, z, xs);
            const real *dyr = dy + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            for (int ch = 0; ch < C; ch++) {
                const real sg = 1 / (1 + fla_exp(-z[ch]));
                dz[ch] = dyr[ch] * sg * (1 + z[ch] * (1 - sg));
            }
            for (int i = 0; i < W; i++) {
                if (xs[i] == NULL)
                    continue;
                real *a = acc + (size_t)i * (size_t)C;
                for (int ch = 0; ch < C; ch++)
                    a[ch] = fma(dz[ch], xs[i][ch], a[ch]);
                if (dx != NULL) {
                    const real *wr = wt + (size_t)i * (size_t)C;
                    real *dxr =
                        dx + ((size_t)b * (size_t)T + (size_t)(t - (W - 1) + i)) * (size_t)C;
                    for (int ch = 0; ch < C; ch++)
                        dxr[ch] = fma(dz[ch], wr[ch], dxr[ch]);
                }
            }
        }
    }
    if (dw != NULL) {
#pragma omp parallel for schedule(static) if (CW * (size_t)B > PAR_MIN)
        for (int ch = 0; ch < C; ch++)
            for (int i = 0; i < W; i++) {
                real sum = 0;
                for (int b = 0; b < B; b++)
                    sum += part[(size_t)b * CW + (size_t)i * (size_t)C + (size_t)ch];
                dw[(size_t)ch * (size_t)W + (size_t)i] += sum;
            }
    }
}

static sb_tensor *sconv_run(sb_graph *g, sb_tensor *x, sb_tensor *w, real *hist)
{
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    const int W = (int)(w->size / (size_t)C);
    SB_ASSERT(w->size == (size_t)C * (size_t)W && W >= 1 && W <= SC_MAXW);
    sb_tensor *y = like(g, x);
    real *wt = sb_graph_alloc(g, (size_t)C * (size_t)W * sizeof(real));
    sconv_taps(w->data, C, W, wt);
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)C > PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            real *yr = y->data + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            const real *xs[SC_MAXW];
            sconv_row(x->data, hist, wt, b, t, T, C, W, yr, xs);
            for (int ch = 0; ch < C; ch++)
                yr[ch] = yr[ch] / (1 + fla_exp(-yr[ch]));
        }
    return y;
}

sb_tensor *sb_short_conv(sb_graph *g, sb_tensor *x, sb_tensor *w)
{
    sb_tensor *y = sconv_run(g, x, w, NULL);
    y->requires_grad = x->requires_grad || w->requires_grad;
    if (y->requires_grad) {
        sconv_ctx *c = sb_graph_record(g, sconv_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->w = w, c->y = y;
            c->B = x->shape[0], c->T = x->shape[1], c->C = x->shape[2];
            c->W = (int)(w->size / (size_t)x->shape[2]);
        }
    }
    return y;
}

sb_tensor *sb_short_conv_stream(sb_graph *g, sb_tensor *x, sb_tensor *w, real *history)
{
    SB_ASSERT(!g->record);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    const int W = (int)(w->size / (size_t)C);
    sb_tensor *y = sconv_run(g, x, w, history);
    /* the new history: the last W-1 inputs (from x, or the old history when T < W-1) */
    if (W > 1) {
        const size_t row = (size_t)C * sizeof(real);
        real *tmp = sb_graph_alloc(g, (size_t)(W - 1) * row);
        for (int b = 0; b < B; b++) {
            real *h = history + (size_t)b * (size_t)(W - 1) * (size_t)C;
            for (int j = 0; j < W - 1; j++) {
                const int s = T - (W - 1) + j;
                const real *src = s >= 0 ? x->data + ((size_t)b * (size_t)T + (size_t)s) * (size_t)C
                                         : h + (size_t)(W - 1 + s) * (size_t)C;
                memcpy(tmp + (size_t)j * (size_t)C, src, row);
            }
            memcpy(h, tmp, (size_t)(W - 1) * row);
        }
    }
    return y;
}

real *sb_short_convs(sb_graph *g, int n, sb_tensor **xs, sb_tensor *const *ws, real *history)
{
    for (int i = 0; i < n; i++) {
        if (history == NULL) {
            xs[i] = sb_short_conv(g, xs[i], ws[i]);
            continue;
        }
        const int B = xs[i]->shape[0], C = xs[i]->shape[2];
        const size_t taps = ws[i]->size / (size_t)C;
        xs[i] = sb_short_conv_stream(g, xs[i], ws[i], history);
        history += (size_t)B * (taps - 1) * (size_t)C;
    }
    return history;
}

/* ---- L2 norm -------------------------------------------------------------------------------- */

typedef struct l2norm_ctx {
    sb_tensor *x, *y;
    real *r; /* [rows] */
    int rows, D;
} l2norm_ctx;

static void l2norm_backward(sb_graph *g, void *ctx)
{
    l2norm_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const real *y = c->y->data, *dy = c->y->grad;
    const int D = c->D;
#pragma omp parallel for schedule(static) if ((size_t)c->rows * (size_t)D > PAR_MIN)
    for (int n = 0; n < c->rows; n++) {
        const size_t o = (size_t)n * (size_t)D;
        const real dot = fla_dot(D, dy + o, y + o), r = c->r[n];
        for (int i = 0; i < D; i++)
            dx[o + (size_t)i] += r * (dy[o + (size_t)i] - dot * y[o + (size_t)i]);
    }
}

sb_tensor *sb_l2norm(sb_graph *g, sb_tensor *x, int D, real eps)
{
    SB_ASSERT(D >= 1 && x->size % (size_t)D == 0);
    const int rows = (int)(x->size / (size_t)D);
    sb_tensor *y = like(g, x);
    y->requires_grad = x->requires_grad;
    l2norm_ctx *c = y->requires_grad ? sb_graph_record(g, l2norm_backward, sizeof *c) : NULL;
    real *rs = NULL;
    if (c != NULL) {
        rs = sb_graph_alloc(g, (size_t)rows * sizeof *rs);
        c->x = x, c->y = y, c->r = rs, c->rows = rows, c->D = D;
    }
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)D > PAR_MIN)
    for (int n = 0; n < rows; n++) {
        const size_t o = (size_t)n * (size_t)D;
        const real r = 1 / sqrt(fla_dot(D, x->data + o, x->data + o) + eps);
        for (int i = 0; i < D; i++)
            y->data[o + (size_t)i] = x->data[o + (size_t)i] * r;
        if (rs != NULL)
            rs[n] = r;
    }
    return y;
}

/* ---- RMSNorm, plain and swish-gated ---------------------------------------------------------- */

typedef struct rmsg_ctx {
    sb_tensor *x, *z, *w, *y;
    real *r; /* [rows] */
    int rows, D;
} rmsg_ctx;

/* One gated row of the backward: gate = silu(z), dz = dy xh w silu'(z), acc += dy xh gate. */
static void rmsg_row_gated(int D, real r, const real *restrict x, const real *restrict z,
                           const real *restrict dy, const real *restrict w, real *restrict gate,
                           real *restrict dz, real *restrict acc)
{
    for (int i = 0; i < D; i++)
        dz[i] = 1 / (1 + fla_exp(-z[i])); /* sigmoid(z) */
    for (int i = 0; i < D; i++) {
        const real xh = x[i] * r, sg = dz[i], gi = z[i] * sg;
        gate[i] = gi;
        dz[i] = dy[i] * xh * w[i] * sg * (1 + z[i] * (1 - sg));
        acc[i] += dy[i] * xh * gi;
    }
}

#define RMS_ROWS 64 /* rows per block of the weight-gradient partial sums */

static void rmsg_backward(sb_graph *g, void *ctx)
{
    rmsg_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int D = c->D, rows = c->rows;
    const real *x = c->x->data, *z = c->z != NULL ? c->z->data : NULL, *w = c->w->data;
    const real *dy = c->y->grad;
    real *dx = c->x->requires_grad ? sb_tensor_grad(g, c->x) : NULL;
    real *dz = (c->z != NULL && c->z->requires_grad) ? sb_tensor_grad(g, c->z) : NULL;
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    /* dw: partial sums over fixed blocks of rows, added in block order (thread-independent) */
    const int blocks = (rows + RMS_ROWS - 1) / RMS_ROWS;
    real *part = dw != NULL ? sb_graph_alloc(g, (size_t)blocks * (size_t)D * sizeof(real)) : NULL;
    /* per thread: the gate row, its dz row, and a dw row when dw is not wanted */
    real *rows_buf =
        sb_graph_alloc(g, (size_t)omp_get_max_threads() * 3 * (size_t)D * sizeof(real));
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)D > PAR_MIN / 4)
    for (int blk = 0; blk < blocks; blk++) {
        real *restrict gate = rows_buf + (size_t)omp_get_thread_num() * 3 * (size_t)D;
        real *restrict dzr = gate + D;
        real *restrict acc = part != NULL ? part + (size_t)blk * (size_t)D : dzr + D;
        const real *restrict wv = w;
        memset(acc, 0, (size_t)D * sizeof *acc);
        const int n1 = (blk + 1) * RMS_ROWS < rows ? (blk + 1) * RMS_ROWS : rows;
        for (int n = blk * RMS_ROWS; n < n1; n++) {
            const size_t o = (size_t)n * (size_t)D;
            const real r = c->r[n], *restrict xr = x + o, *restrict dyr = dy + o;
            real mp[FLA_LANES] = {0}; /* sum dxh xh, in lanes */
            if (z != NULL) {
                rmsg_row_gated(D, r, xr, z + o, dyr, wv, gate, dzr, acc);
                if (dz != NULL)
                    fla_axpy(D, 1, dzr, dz + o);
            } else {
                for (int i = 0; i < D; i++) {
                    gate[i] = 1;
                    acc[i] += dyr[i] * xr[i] * r;
                }
            }
            int i0 = 0;
            for (; i0 + FLA_LANES <= D; i0 += FLA_LANES)
                for (int l = 0; l < FLA_LANES; l++)
                    mp[l] += dyr[i0 + l] * wv[i0 + l] * gate[i0 + l] * xr[i0 + l];
            for (int l = 0; i0 + l < D; l++)
                mp[l] += dyr[i0 + l] * wv[i0 + l] * gate[i0 + l] * xr[i0 + l];
            real m = fla_lanes_sum(mp) * r;
            if (dx == NULL)
                continue;
            m /= (real)D;
            real *dxr = dx + o;
            for (int i = 0; i < D; i++)
                dxr[i] += r * (dyr[i] * wv[i] * gate[i] - xr[i] * r * m);
        }
    }
    if (dw != NULL)
        for (int blk = 0; blk < blocks; blk++)
            fla_axpy(D, 1, part + (size_t)blk * (size_t)D, dw);
}

sb_tensor *sb_rmsnorm_gated(sb_graph *g, sb_tensor *x, sb_tensor *gate, sb_tensor *w, real eps)
{
    const int D = (int)w->size;
    SB_ASSERT(x->size % (size_t)D == 0);
    SB_ASSERT(gate == NULL || gate->size == x->size);
    const int rows = (int)(x->size / (size_t)D);
    sb_tensor *y = like(g, x);
    y->requires_grad =
        x->requires_grad || w->requires_grad || (gate != NULL && gate->requires_grad);
    rmsg_ctx *c = y->requires_grad ? sb_graph_record(g, rmsg_backward, sizeof *c) : NULL;
    real *rs = NULL;
    if (c != NULL) {
        rs = sb_graph_alloc(g, (size_t)rows * sizeof *rs);
        c->x = x, c->z = gate, c->w = w, c->y = y, c->r = rs, c->rows = rows, c->D = D;
    }
    const real *wd = w->data, *z = gate != NULL ? gate->data : NULL;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)D > PAR_MIN / 4)
    for (int n = 0; n < rows; n++) {
        const size_t o = (size_t)n * (size_t)D;
        const real *xr = x->data + o;
        const real r = 1 / sqrt(fla_dot(D, xr, xr) / (real)D + eps);
        real *yr = y->data + o;
        if (z != NULL)
            for (int i = 0; i < D; i++)
                yr[i] = xr[i] * r * wd[i] * (z[o + (size_t)i] * sigmoid(z[o + (size_t)i]));
        else
            for (int i = 0; i < D; i++)
                yr[i] = xr[i] * r * wd[i];
        if (rs != NULL)
            rs[n] = r;
    }
    return y;
}

/* ---- logsigmoid and the GLA gate ------------------------------------------------------------- */

typedef struct logsig_ctx {
    sb_tensor *x, *y;
    real scale;
} logsig_ctx;

static void logsig_backward(sb_graph *g, void *ctx)
{
    logsig_ctx *c = ctx;
    if (c->y->grad == NULL || !c->x->requires_grad)
        return;
    real *dx = sb_tensor_grad(g, c->x);
    const real *x = c->x->data, *dy = c->y->grad;
    const size_t n = c->x->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * c->scale * sigmoid(-x[i]);
}

sb_tensor *sb_logsigmoid(sb_graph *g, sb_tensor *x, real scale)
{
    sb_tensor *y = like(g, x);
    const size_t n = x->size;
#pragma omp parallel for schedule(static) if (n > PAR_MIN / 4)
    for (size_t i = 0; i < n; i++) {
        const real xi = x->data[i];
        y->data[i] = scale * ((xi < 0 ? xi : 0) - fla_log1p01(fla_exp(-fabs(xi))));
    }
    y->requires_grad = x->requires_grad;
    if (y->requires_grad) {
        logsig_ctx *c = sb_graph_record(g, logsig_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->y = y, c->scale = scale;
    }
    return y;
}

sb_tensor *sb_gla_gate(sb_graph *g, sb_tensor *x, sb_tensor *w0, sb_tensor *w1, sb_tensor *b1,
                       real normalizer)
{
    sb_tensor *z = sb_linear(g, sb_linear(g, x, w0, NULL), w1, b1);
    return sb_logsigmoid(g, z, 1 / normalizer);
}

/* ---- Gated DeltaNet decay -------------------------------------------------------------------- */

typedef struct decay_ctx {
    sb_tensor *a, *A_log, *dt_bias, *y;
    int rows, H;
} decay_ctx;

static void decay_backward(sb_graph *g, void *ctx)
{
    decay_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int rows = c->rows, H = c->H;
    const real *a = c->a->data, *y = c->y->data, *dy = c->y->grad;
    const real *A_log = c->A_log->data, *dt = c->dt_bias->data;
    real *da = c->a->requires_grad ? sb_tensor_grad(g, c->a) : NULL;
    real *dA = c->A_log->requires_grad ? sb_tensor_grad(g, c->A_log) : NULL;
    real *ddt = c->dt_bias->requires_grad ? sb_tensor_grad(g, c->dt_bias) : NULL;
    /* heads split between threads, rows summed in order */
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)H > PAR_MIN / 4)
    for (int h = 0; h < H; h++) {
        const real negA = -exp(A_log[h]);
        real sum_du = 0, sum_dA = 0;
        for (int n = 0; n < rows; n++) {
            const size_t i = (size_t)n * (size_t)H + (size_t)h;
            const real u = a[i] + dt[h];
            const real du = dy[i] * negA * (u > 20 ? 1 : sigmoid(u));
            if (da != NULL)
                da[i] += du;
            sum_du += du;
            sum_dA += dy[i] * y[i];
        }
        if (ddt != NULL)
            ddt[h] += sum_du;
        if (dA != NULL)
            dA[h] += sum_dA;
    }
}

sb_tensor *sb_decay_gate(sb_graph *g, sb_tensor *a, sb_tensor *A_log, sb_tensor *dt_bias)
{
    const int H = (int)A_log->size;
    SB_ASSERT((int)dt_bias->size == H && a->shape[a->ndim - 1] == H);
    const int rows = (int)(a->size / (size_t)H);
    sb_tensor *y = like(g, a);
#pragma omp parallel for schedule(static) if (a->size > PAR_MIN / 4)
    for (int n = 0; n < rows; n++)
        for (int h = 0; h < H; h++) {
            const size_t i = (size_t)n * (size_t)H + (size_t)h;
            y->data[i] = -exp(A_log->data[h]) * softplus(a->data[i] + dt_bias->data[h]);
        }
    y->requires_grad = a->requires_grad || A_log->requires_grad || dt_bias->requires_grad;
    if (y->requires_grad) {
        decay_ctx *c = sb_graph_record(g, decay_backward, sizeof *c);
        if (c != NULL)
            c->a = a, c->A_log = A_log, c->dt_bias = dt_bias, c->y = y, c->rows = rows, c->H = H;
    }
    return y;
}

/* ---- beta ------------------------------------------------------------------------------------ */

typedef struct beta_ctx {
    sb_tensor *z, *y;
    real c;
} beta_ctx;

static void beta_backward(sb_graph *g, void *ctx)
{
    beta_ctx *c = ctx;
    if (c->y->grad == NULL || !c->z->requires_grad)
        return;
    real *dz = sb_tensor_grad(g, c->z);
    const real *y = c->y->data, *dy = c->y->grad;
    const size_t n = c->y->size;
    for (size_t i = 0; i < n; i++)
        dz[i] += dy[i] * y[i] * (1 - y[i] / c->c);
}

sb_tensor *sb_beta_gate(sb_graph *g, sb_tensor *z, real c)
{
    sb_tensor *y = like(g, z);
    for (size_t i = 0; i < z->size; i++)
        y->data[i] = c * sigmoid(z->data[i]);
    y->requires_grad = z->requires_grad;
    if (y->requires_grad) {
        beta_ctx *bc = sb_graph_record(g, beta_backward, sizeof *bc);
        if (bc != NULL)
            bc->z = z, bc->y = y, bc->c = c;
    }
    return y;
}

/* conv.c - causal depthwise 1-D convolution (the short convolutions of Mamba, Mamba2 and
 * the flash-linear-attention layers), PyTorch nn.Conv1d(C, C, K, groups=C, padding=K-1)
 * keeping the first T outputs:
 *   y[b, t, c] = bias[c] + sum_{k=0}^{K-1} w[c, k] x[b, t - (K-1) + k, c]   (x = 0 before t=0)
 * Backward:
 *   dbias[c] += sum_{b,t} dy[b, t, c]
 *   dw[c, k] += sum_{b,t} dy[b, t, c] x[b, t - (K-1) + k, c]
 *   dx[b, s, c] += sum_k dy[b, s + (K-1) - k, c] w[c, k]
 * Spec: docs/models/mamba.md. */
#include <omp.h>
#include <string.h>

#include "ops/ops.h"

typedef struct conv_ctx {
    sb_tensor *x, *w, *b, *y;
    int B, T, C, K;
} conv_ctx;

static void conv_backward(sb_graph *g, void *ctx)
{
    conv_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, C = c->C, K = c->K;
    const real *x = c->x->data, *w = c->w->data, *dy = c->y->grad;
    if (c->x->requires_grad) {
        real *dx = sb_tensor_grad(g, c->x);
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)C > 32768)
        for (int bt = 0; bt < B * T; bt++) {
            int t = bt % T;
            real *dxr = dx + (size_t)bt * (size_t)C;
            for (int k = 0; k < K; k++) {
                int s = t + (K - 1) - k; /* output that used x[t] with tap k */
                if (s >= T)
                    continue;
                const real *dyr = dy + ((size_t)bt + (size_t)(s - t)) * (size_t)C;
                for (int ch = 0; ch < C; ch++)
                    dxr[ch] += dyr[ch] * w[(size_t)ch * (size_t)K + (size_t)k];
            }
        }
    }
    real *dw = c->w->requires_grad ? sb_tensor_grad(g, c->w) : NULL;
    real *db = (c->b != NULL && c->b->requires_grad) ? sb_tensor_grad(g, c->b) : NULL;
    if (dw == NULL && db == NULL)
        return;
    /* channels split between threads, (b, t) summed in order: deterministic */
    int blocks = (C + 15) / 16;
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)C > 32768)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * 16, c1 = c0 + 16 < C ? c0 + 16 : C;
        real acc_w[16 * 8] = {0}, acc_b[16] = {0}; /* K <= 8 */
        for (int bb = 0; bb < B; bb++)
            for (int t = 0; t < T; t++) {
                const real *dyr = dy + ((size_t)bb * (size_t)T + (size_t)t) * (size_t)C;
                for (int ch = c0; ch < c1; ch++)
                    acc_b[ch - c0] += dyr[ch];
                for (int k = 0; k < K; k++) {
                    int s = t - (K - 1) + k;
                    if (s < 0)
                        continue;
                    const real *xr = x + ((size_t)bb * (size_t)T + (size_t)s) * (size_t)C;
                    for (int ch = c0; ch < c1; ch++)
                        acc_w[(ch - c0) * 8 + k] += dyr[ch] * xr[ch];
                }
            }
        for (int ch = c0; ch < c1; ch++) {
            if (db != NULL)
                db[ch] += acc_b[ch - c0];
            if (dw != NULL)
                for (int k = 0; k < K; k++)
                    dw[(size_t)ch * (size_t)K + (size_t)k] += acc_w[(ch - c0) * 8 + k];
        }
    }
}

/* y = conv(x) starting from `history` (the K-1 inputs before x, [B][K-1][C], or NULL for
 * zeros). */
static void conv_run(const real *x, const real *w, const real *bias, const real *history, real *y,
                     int B, int T, int C, int K)
{
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)T * (size_t)C > 32768)
    for (int bt = 0; bt < B * T; bt++) {
        int bb = bt / T, t = bt % T;
        real *yr = y + (size_t)bt * (size_t)C;
        for (int ch = 0; ch < C; ch++)
            yr[ch] = bias != NULL ? bias[ch] : 0;
        for (int k = 0; k < K; k++) {
            int s = t - (K - 1) + k;
            const real *xr;
            if (s >= 0)
                xr = x + ((size_t)bb * (size_t)T + (size_t)s) * (size_t)C;
            else if (history != NULL)
                xr = history + ((size_t)bb * (size_t)(K - 1) + (size_t)(K - 1 + s)) * (size_t)C;
            else
                continue;
            for (int ch = 0; ch < C; ch++)
                yr[ch] += w[(size_t)ch * (size_t)K + (size_t)k] * xr[ch];
        }
    }
}

sb_tensor *sb_conv1d_causal(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b)
{
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    const int K = (int)(w->size / (size_t)C);
    SB_ASSERT(w->size == (size_t)C * (size_t)K && K >= 1 && K <= 8);
    SB_ASSERT(b == NULL || (int)b->size == C);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    conv_run(x->data, w->data, b != NULL ? b->data : NULL, NULL, y->data, B, T, C, K);
    y->requires_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    if (y->requires_grad) {
        conv_ctx *c = sb_graph_record(g, conv_backward, sizeof *c);
        if (c != NULL)
            c->x = x, c->w = w, c->b = b, c->y = y, c->B = B, c->T = T, c->C = C, c->K = K;
    }
    return y;
}

sb_tensor *sb_conv1d_causal_stream(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b,
                                   real *history)
{
    SB_ASSERT(x->ndim == 3 && !g->record);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    const int K = (int)(w->size / (size_t)C);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    conv_run(x->data, w->data, b != NULL ? b->data : NULL, history, y->data, B, T, C, K);
    /* the new history: the last K-1 inputs (from x, or the old history when T < K-1) */
    const size_t row = (size_t)C * sizeof(real);
    real *tmp = sb_graph_alloc(g, (size_t)(K > 1 ? K - 1 : 1) * row);
    for (int bb = 0; bb < B; bb++) {
        real *hist = history + (size_t)bb * (size_t)(K - 1) * (size_t)C;
        for (int j = 0; j < K - 1; j++) {
            int s = T - (K - 1) + j; /* input index of slot j */
            const real *src = s >= 0 ? x->data + ((size_t)bb * (size_t)T + (size_t)s) * (size_t)C
                                     : hist + (size_t)(K - 1 + s) * (size_t)C;
            memcpy(tmp + (size_t)j * (size_t)C, src, row);
        }
        memcpy(hist, tmp, (size_t)(K - 1) * row);
    }
    return y;
}

/* ssm_conv.c - the causal depthwise convolution followed by SiLU, fused, as both Mambas
 * apply it (ops_ssm.h; docs/models/mamba.md). Same contract as
 * sb_conv1d_causal + sb_silu, in one pass:
 *   pre[b, t, c] = bias[c] + sum_{k<K} w[c, k] x[b, t - (K-1) + k, c]   (x = history or 0
 *                                                                        before t = 0)
 *   y = pre sigmoid(pre)
 * Backward (pre is recomputed, 2K flops per element, instead of being stored):
 *   dpre = dy s (1 + pre (1 - s)),  s = sigmoid(pre)
 *   dx[b, s, c] += sum_k dpre[b, s + (K-1) - k, c] w[c, k]
 *   dw[c, k] += sum_{b,t} dpre[b, t, c] x[b, t - (K-1) + k, c],  dbias[c] += sum_{b,t} dpre
 * The weights are transposed to [K][C] once per call so that every loop runs over
 * contiguous channels (vectorised). dw and dbias are summed over 64 fixed groups of (b, t)
 * rows (partial sums per group, in one pass with dpre), then over the groups in order:
 * the same result for any thread count.
 * Measured (one thread, B 16, T 400, C 512, forward + backward with the gradient buffers'
 * setup): 13.4 ms fused against 51.3 ms for sb_conv1d_causal followed by sb_silu. */
#include <omp.h>
#include <string.h>

#include "ops/ops_ssm.h"
#include "ops/ssm_math.h"

#define MAX_K 8
#define ROW_GROUPS 64 /* fixed partition of the (b, t) rows for dw and dbias */

typedef struct convsilu_ctx {
    sb_tensor *x, *w, *b, *y;
    int B, T, C, K;
} convsilu_ctx;

/* w [C][K] -> wT [K][C] */
static real *transpose_w(sb_graph *g, const real *w, int C, int K)
{
    real *wT = sb_graph_alloc(g, (size_t)C * (size_t)K * sizeof(real));
    for (int c = 0; c < C; c++)
        for (int k = 0; k < K; k++)
            wT[(size_t)k * (size_t)C + (size_t)c] = w[(size_t)c * (size_t)K + (size_t)k];
    return wT;
}

/* pre-activations of row (b, t) into out[C] */
static inline void conv_row(const real *x, const real *wT, const real *bias, const real *history,
                            int b, int t, int T, int C, int K, real *out)
{
    if (bias != NULL)
        memcpy(out, bias, (size_t)C * sizeof(real));
    else
        memset(out, 0, (size_t)C * sizeof(real));
    for (int k = 0; k < K; k++) {
        const int s = t - (K - 1) + k;
        const real *xr;
        if (s >= 0)
            xr = x + ((size_t)b * (size_t)T + (size_t)s) * (size_t)C;
        else if (history != NULL)
            xr = history + ((size_t)b * (size_t)(K - 1) + (size_t)(K - 1 + s)) * (size_t)C;
        else
            continue;
        const real *wk = wT + (size_t)k * (size_t)C;
#pragma omp simd
        for (int c = 0; c < C; c++)
            out[c] = fma(wk[c], xr[c], out[c]);
    }
}

static void convsilu_backward(sb_graph *g, void *ctx)
{
    convsilu_ctx *cx = ctx;
    if (cx->y->grad == NULL)
        return;
    const int B = cx->B, T = cx->T, C = cx->C, K = cx->K;
    const real *x = cx->x->data, *dy = cx->y->grad;
    const real *bias = cx->b != NULL ? cx->b->data : NULL;
    real *wT = transpose_w(g, cx->w->data, C, K);
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
    real *dpre = sb_graph_alloc(g, n * sizeof(real));
    real *dw = cx->w->requires_grad ? sb_tensor_grad(g, cx->w) : NULL;
    real *db = cx->b != NULL && cx->b->requires_grad ? sb_tensor_grad(g, cx->b) : NULL;
    /* pass 1, over fixed groups of rows: dpre, and each group's partial sums of dw (as
     * [K][C]) and db; the groups are summed in order afterwards */
    const int rows = B * T, groups = rows < ROW_GROUPS ? rows : ROW_GROUPS;
    const int per = (rows + groups - 1) / groups;
    const size_t part_len = (size_t)(K + 1) * (size_t)C;
    real *part = sb_graph_alloc(g, (size_t)groups * part_len * sizeof(real));
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int gi = 0; gi < groups; gi++) {
        real *acc_w = part + (size_t)gi * part_len, *acc_b = acc_w + (size_t)K * (size_t)C;
        memset(acc_w, 0, part_len * sizeof(real));
        const int r1 = (gi + 1) * per < rows ? (gi + 1) * per : rows;
        for (int bt = gi * per; bt < r1; bt++) {
            const int b = bt / T, t = bt % T;
            real *dp = dpre + (size_t)bt * (size_t)C;
            const real *dyr = dy + (size_t)bt * (size_t)C;
            conv_row(x, wT, bias, NULL, b, t, T, C, K, dp);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const real p = dp[c], s = ssm_sigmoid(p);
                dp[c] = dyr[c] * s * (1 + p * (1 - s));
                acc_b[c] += dp[c];
            }
            for (int k = 0; k < K; k++) {
                const int src = t - (K - 1) + k;
                if (src < 0)
                    continue;
                const real *xr = x + ((size_t)b * (size_t)T + (size_t)src) * (size_t)C;
                real *aw = acc_w + (size_t)k * (size_t)C;
#pragma omp simd
                for (int c = 0; c < C; c++)
                    aw[c] = fma(dp[c], xr[c], aw[c]);
            }
        }
    }
    if (dw != NULL || db != NULL) {
        for (int c = 0; c < C; c++) {
            for (int k = 0; k <= K; k++) {
                real acc = 0;
                for (int gi = 0; gi < groups; gi++)
                    acc += part[(size_t)gi * part_len + (size_t)k * (size_t)C + (size_t)c];
                if (k < K && dw != NULL)
                    dw[(size_t)c * (size_t)K + (size_t)k] += acc;
                else if (k == K && db != NULL)
                    db[c] += acc;
            }
        }
    }
    /* pass 2: dx[b, s] += sum_k dpre[b, s + (K-1) - k] w[k] */
    if (cx->x->requires_grad) {
        real *dx = sb_tensor_grad(g, cx->x);
#pragma omp parallel for schedule(static) if (n > 16384)
        for (int bt = 0; bt < B * T; bt++) {
            const int t = bt % T;
            real *dxr = dx + (size_t)bt * (size_t)C;
            for (int k = 0; k < K; k++) {
                const int s = t + (K - 1) - k; /* the output that read x[t] through tap k */
                if (s >= T)
                    continue;
                const real *dp = dpre + ((size_t)bt + (size_t)(s - t)) * (size_t)C;
                const real *wk = wT + (size_t)k * (size_t)C;
#pragma omp simd
                for (int c = 0; c < C; c++)
                    dxr[c] = fma(dp[c], wk[c], dxr[c]);
            }
        }
    }
}

sb_tensor *sb_conv1d_silu(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b, real *history)
{
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    const int K = (int)(w->size / (size_t)C);
    SB_ASSERT(w->size == (size_t)C * (size_t)K && K >= 1 && K <= MAX_K);
    SB_ASSERT(b == NULL || (int)b->size == C);
    sb_tensor *y = sb_tensor_new(g, 3, x->shape);
    y->requires_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    convsilu_ctx *cx = y->requires_grad ? sb_graph_record(g, convsilu_backward, sizeof *cx) : NULL;
    SB_ASSERT(cx == NULL || history == NULL);
    real *wT = transpose_w(g, w->data, C, K);
    const real *bias = b != NULL ? b->data : NULL;
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int bt = 0; bt < B * T; bt++) {
        real *yr = y->data + (size_t)bt * (size_t)C;
        conv_row(x->data, wT, bias, history, bt / T, bt % T, T, C, K, yr);
#pragma omp simd
        for (int c = 0; c < C; c++)
            yr[c] = yr[c] * ssm_sigmoid(yr[c]);
    }
    if (history != NULL) {
        /* the new history: the last K-1 inputs (from x, or the old history when T < K-1) */
        const size_t row = (size_t)C * sizeof(real);
        real *tmp = sb_graph_alloc(g, (size_t)(K > 1 ? K - 1 : 1) * row);
        for (int bb = 0; bb < B; bb++) {
            real *hist = history + (size_t)bb * (size_t)(K - 1) * (size_t)C;
            for (int j = 0; j < K - 1; j++) {
                const int s = T - (K - 1) + j;
                const real *src = s >= 0
                                      ? x->data + ((size_t)bb * (size_t)T + (size_t)s) * (size_t)C
                                      : hist + (size_t)(K - 1 + s) * (size_t)C;
                memcpy(tmp + (size_t)j * (size_t)C, src, row);
            }
            memcpy(hist, tmp, (size_t)(K - 1) * row);
        }
    }
    if (cx != NULL)
        cx->x = x, cx->w = w, cx->b = b, cx->y = y, cx->B = B, cx->T = T, cx->C = C, cx->K = K;
    return y;
}

/* linear_loss.c - the decoder head fused with its loss (see ops.h).
 *
 * The unfused path (sb_linear, then sb_cross_entropy) keeps the logits [N, C], their
 * probabilities and their gradient for the whole batch: 3 N C floats, which at 1601
 * classes outweigh every layer of a narrow model. Here the rows are taken a chunk at a
 * time (R rows, one [R, C] buffer reused):
 *
 *   logits   = x_r W^T + b                     (one sgemm)
 *   p        = softmax(logits); loss_n = lse - logits[target]
 *   accuracy : p added to the element windows that cover the chunk (a window that
 *              continues into the next chunk carries its partial sum)
 *   dlogits  = (p - onehot(target)) * scale / n_valid on valid rows, 0 elsewhere (in place)
 *   dx_r     = dlogits W;  dW += dlogits^T x_r;  db += colsum(dlogits)
 *
 * The gradient is computed during the forward, as if the loss's own gradient were 1, into
 * private buffers ([N, D], [C, D], [C]: small); the backward adds them, times the loss's
 * gradient, to the inputs' gradients. Only the evaluation probes and sb_model_forward still
 * produce whole-batch logits.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops.h"

#include "tensor/fastmath.h"

#define HEAD_CHUNK_ROWS 512 /* [512, 1601] floats = 3.3 MB: stays in the caches */

typedef struct head_ctx {
    sb_tensor *x, *w, *b, *loss;
    real *dx, *dw, *db; /* the gradients for a loss gradient of 1 (NULL: not needed) */
    size_t x_size, w_size, b_size;
} head_ctx;

/* grad += k * d */
static void add_scaled(real *grad, const real *d, size_t n, real k)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        grad[i] += k * d[i];
}

static void head_backward(sb_graph *g, void *ctx)
{
    head_ctx *c = ctx;
    if (c->loss->grad == NULL)
        return;
    const real k = c->loss->grad[0];
    if (c->dx != NULL)
        add_scaled(sb_tensor_grad(g, c->x), c->dx, c->x_size, k);
    if (c->dw != NULL)
        add_scaled(sb_tensor_grad(g, c->w), c->dw, c->w_size, k);
    if (c->db != NULL)
        add_scaled(sb_tensor_grad(g, c->b), c->db, c->b_size, k);
}

/* Softmax of every row of logits[R, C] in place; row_loss[r] = lse - logit[target] on valid
 * rows, 0 elsewhere (the same arithmetic as sb_cross_entropy). */
static void chunk_softmax_loss(real *logits, int R, int C, const int32_t *target,
                               const uint8_t *valid, real *row_loss)
{
#pragma omp parallel for schedule(static) if ((size_t)R * (size_t)C > 65536)
    for (int r = 0; r < R; r++) {
        real *p = logits + (size_t)r * (size_t)C;
        real m = sb_vmax(p, C);
        real at_target = valid[r] ? p[target[r]] : 0;
        real sum = sb_vexp_shift(p, C, m);
        real inv = 1 / sum;
        for (int j = 0; j < C; j++)
            p[j] *= inv;
        row_loss[r] = valid[r] ? -(at_target - m - log(sum)) : 0;
    }
}

/* Probabilities [R, C] -> dlogits for a loss gradient of 1, in place. */
static void chunk_dlogits(real *p, int R, int C, const int32_t *target, const uint8_t *valid,
                          real k)
{
#pragma omp parallel for schedule(static) if ((size_t)R * (size_t)C > 65536)
    for (int r = 0; r < R; r++) {
        real *row = p + (size_t)r * (size_t)C;
        if (!valid[r]) {
            memset(row, 0, (size_t)C * sizeof *row);
            continue;
        }
        const int tgt = target[r];
        for (int j = 0; j < C; j++)
            row[j] = (row[j] - (j == tgt ? 1 : 0)) * k; /* as sb_cross_entropy's backward */
    }
}

/* The running sums of the element windows: per sample, the window that is open (it began in
 * an earlier chunk and has not ended) and its probability sum so far. A sample's windows are
 * contiguous and do not overlap (task/batch.h), so one open window per sample suffices. */
typedef struct window_sums {
    real *sum;   /* [B, C] */
    int *open_e; /* [B] the open window's index, -1 when none */
} window_sums;

/* Adds the probabilities of rows [r0, r0 + R) to the windows they belong to; a window that
 * ends inside the chunk is scored as sb_window_accuracy scores it (sum in frame order, first
 * argmax, compared with the target of its first frame). */
static void chunk_windows(const real *p, size_t r0, int R, int C, sb_head_loss *h, window_sums *ws)
{
    const size_t r1 = r0 + (size_t)R, T = (size_t)h->T;
    const int b0 = (int)(r0 / T), b1 = (int)((r1 - 1) / T);
    int64_t ok = 0, n = 0;
#pragma omp parallel for schedule(static) reduction(+ : ok, n) if (b1 > b0)
    for (int b = b0; b <= b1; b++) {
        real *sum = ws->sum + (size_t)b * (size_t)C;
        for (int e = 0; e < h->E; e++) {
            size_t i = (size_t)b * (size_t)h->E + (size_t)e;
            if (h->elem_len[i] <= 0)
                continue;
            size_t f0 = (size_t)b * T + (size_t)h->elem_start[i];
            size_t f1 = f0 + (size_t)h->elem_len[i];
            if (f1 <= r0 || f0 >= r1)
                continue;
            if (f0 >= r0) { /* the window starts here */
                SB_ASSERT(ws->open_e[b] < 0);
                memset(sum, 0, (size_t)C * sizeof *sum);
                ws->open_e[b] = e;
            }
            SB_ASSERT(ws->open_e[b] == e);
            size_t hi = f1 < r1 ? f1 : r1;
            for (size_t f = f0 > r0 ? f0 : r0; f < hi; f++) {
                const real *pf = p + (f - r0) * (size_t)C;
                for (int j = 0; j < C; j++)
                    sum[j] += pf[j];
            }
            if (hi < f1)
                continue; /* continues in the next chunk */
            int best = 0;
            for (int j = 1; j < C; j++)
                if (sum[j] > sum[best])
                    best = j;
            ok += best == h->target[f0];
            n++;
            ws->open_e[b] = -1;
        }
    }
    h->correct += ok;
    h->counted += n;
}

/* The chunk's share of the gradients: dx rows, dW and db (dW and db summed over chunks in
 * order, so the result does not depend on threads). */
static void chunk_gradients(const real *dl, const real *x, const real *w, int R, int D, int C,
                            int first, real *dx, real *dw, real *db)
{
    if (dx != NULL)
        sb_gemm(0, 0, R, D, C, 1, dl, C, w, D, 0, dx, D);
    if (dw != NULL)
        sb_gemm(1, 0, C, D, R, 1, dl, C, x, D, first ? 0 : 1, dw, D);
    if (db != NULL)
        sb_colsum_add(dl, R, C, db);
}

sb_tensor *sb_linear_cross_entropy(sb_graph *g, sb_tensor *x, sb_tensor *w, sb_tensor *b,
                                   sb_head_loss *h)
{
    SB_ASSERT(w->ndim == 2);
    const int C = w->shape[0], D = w->shape[1];
    SB_ASSERT(x->shape[x->ndim - 1] == D);
    SB_ASSERT(b == NULL || (int)b->size == C);
    const int N = (int)(x->size / (size_t)D);
    SB_ASSERT(h->elem_start == NULL || (size_t)h->B * (size_t)h->T == (size_t)N);
    const int chunk = h->chunk_rows > 0 ? h->chunk_rows : HEAD_CHUNK_ROWS;

    size_t n_valid = 0;
    for (int n = 0; n < N; n++)
        n_valid += h->valid[n] != 0;
    const int wants_grad = x->requires_grad || w->requires_grad || (b != NULL && b->requires_grad);
    const int grads = g->record && wants_grad && n_valid > 0;
    real *dx = grads && x->requires_grad ? sb_graph_alloc(g, x->size * sizeof *dx) : NULL;
    real *dw = grads && w->requires_grad ? sb_graph_alloc(g, w->size * sizeof *dw) : NULL;
    real *db =
        grads && b != NULL && b->requires_grad ? sb_graph_alloc(g, b->size * sizeof *db) : NULL;
    if (db != NULL)
        memset(db, 0, b->size * sizeof *db);
    const size_t mean_over = h->mean_over > 0 ? (size_t)h->mean_over : n_valid;
    const real k = n_valid > 0 ? h->loss_scale / (real)mean_over : 0;

    window_sums ws = {0};
    if (h->elem_start != NULL) {
        ws.sum = sb_graph_alloc(g, (size_t)h->B * (size_t)C * sizeof *ws.sum);
        ws.open_e = sb_graph_alloc(g, (size_t)h->B * sizeof *ws.open_e);
        for (int i = 0; i < h->B; i++)
            ws.open_e[i] = -1;
    }
    real *logits = sb_graph_alloc(g, (size_t)(N < chunk ? N : chunk) * (size_t)C * sizeof *logits);
    real *row_loss = sb_graph_alloc(g, (size_t)N * sizeof *row_loss);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int R = N - r0 < chunk ? N - r0 : chunk;
        const real *xr = x->data + (size_t)r0 * (size_t)D;
        if (b != NULL)
            for (int r = 0; r < R; r++)
                memcpy(logits + (size_t)r * (size_t)C, b->data, (size_t)C * sizeof *logits);
        sb_gemm(0, 1, R, C, D, 1, xr, D, w->data, D, b != NULL ? 1 : 0, logits, C);
        chunk_softmax_loss(logits, R, C, h->target + r0, h->valid + r0, row_loss + r0);
        if (ws.sum != NULL)
            chunk_windows(logits, (size_t)r0, R, C, h, &ws);
        if (grads) {
            chunk_dlogits(logits, R, C, h->target + r0, h->valid + r0, k);
            chunk_gradients(logits, xr, w->data, R, D, C, r0 == 0,
                            dx != NULL ? dx + (size_t)r0 * (size_t)D : NULL, dw, db);
        }
    }

    /* sum in frame order: deterministic */
    double total = 0;
    for (int n = 0; n < N; n++)
        total += (double)row_loss[n];
    int one = 1;
    sb_tensor *loss = sb_tensor_new(g, 1, &one);
    h->loss_sum = total;
    loss->data[0] = n_valid > 0 ? (real)(total / (double)mean_over) : 0;
    loss->requires_grad = wants_grad;
    if (grads) {
        head_ctx *c = sb_graph_record(g, head_backward, sizeof *c);
        if (c != NULL) {
            c->x = x, c->w = w, c->b = b, c->loss = loss;
            c->dx = dx, c->dw = dw, c->db = db;
            c->x_size = x->size, c->w_size = w->size, c->b_size = b != NULL ? b->size : 0;
        }
    }
    return loss;
}

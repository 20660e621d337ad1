/* loss.c - masked cross-entropy and the per-element windowed accuracy (see ops.h).
 *
 * Forward: p = softmax(logits) per frame; loss = -(1/n_valid) sum_valid log p[target].
 * Backward: dlogits = scale (p - onehot(target)) / n_valid on valid frames, 0 elsewhere.
 * The probabilities are kept for the accuracy and then overwritten by the gradient. */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops.h"

#include "tensor/fastmath.h"

typedef struct ce_ctx {
    sb_tensor *logits, *loss;
    real *probs; /* [N, C], becomes dlogits in the backward */
    const int32_t *target;
    const uint8_t *valid;
    int N, C;
    real scale;
    size_t n_valid;
} ce_ctx;

static void ce_backward(sb_graph *g, void *ctx)
{
    ce_ctx *c = ctx;
    (void)g; /* the gradient reuses the probabilities' memory: nothing to allocate */
    if (c->loss->grad == NULL || !c->logits->requires_grad || c->n_valid == 0)
        return;
    const int N = c->N, C = c->C;
    const real k = c->loss->grad[0] * c->scale / (real)c->n_valid;
    real *p = c->probs;
    int reuse = c->logits->grad == NULL;
    real *dl = reuse ? p : c->logits->grad;
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)C > 65536)
    for (int n = 0; n < N; n++) {
        real *pr = p + (size_t)n * (size_t)C, *dr = dl + (size_t)n * (size_t)C;
        if (!c->valid[n]) {
            if (reuse)
                memset(dr, 0, (size_t)C * sizeof *dr);
            continue;
        }
        int tgt = c->target[n];
        for (int j = 0; j < C; j++) {
            real v = (pr[j] - (j == tgt ? 1 : 0)) * k;
            dr[j] = reuse ? v : dr[j] + v;
        }
    }
    if (reuse)
        c->logits->grad = p;
}

sb_tensor *sb_cross_entropy(sb_graph *g, sb_tensor *logits, const int32_t *target,
                            const uint8_t *valid, real loss_scale, sb_tensor **probs_out)
{
    const int C = logits->shape[logits->ndim - 1];
    const int N = (int)(logits->size / (size_t)C);
    real *probs = sb_graph_alloc(g, (size_t)N * (size_t)C * sizeof *probs);
    real *row_loss = sb_graph_alloc(g, (size_t)N * sizeof *row_loss);
#pragma omp parallel for schedule(static) if ((size_t)N * (size_t)C > 65536)
    for (int n = 0; n < N; n++) {
        const real *x = logits->data + (size_t)n * (size_t)C;
        real *p = probs + (size_t)n * (size_t)C;
        real m = sb_vmax(x, C);
        memcpy(p, x, (size_t)C * sizeof *p);
        real sum = sb_vexp_shift(p, C, m);
        real inv = 1 / sum;
        for (int j = 0; j < C; j++)
            p[j] *= inv;
        row_loss[n] = valid[n] ? -(x[target[n]] - m - log(sum)) : 0;
    }
    /* sum in frame order: deterministic */
    double total = 0;
    size_t n_valid = 0;
    for (int n = 0; n < N; n++) {
        total += (double)row_loss[n];
        n_valid += valid[n] != 0;
    }
    int one = 1;
    sb_tensor *loss = sb_tensor_new(g, 1, &one);
    loss->data[0] = n_valid > 0 ? (real)(total / (double)n_valid) : 0;
    loss->requires_grad = logits->requires_grad;
    if (loss->requires_grad) {
        ce_ctx *c = sb_graph_record(g, ce_backward, sizeof *c);
        if (c != NULL) {
            c->logits = logits, c->loss = loss, c->probs = probs, c->target = target;
            c->valid = valid, c->N = N, c->C = C, c->scale = loss_scale, c->n_valid = n_valid;
        }
    }
    if (probs_out != NULL) {
        int shape[2] = {N, C};
        *probs_out = sb_tensor_wrap(g, probs, 2, shape);
    }
    return loss;
}

void sb_window_accuracy(const real *probs, int T, int C, const int32_t *target,
                        const int32_t *elem_start, const int32_t *elem_len, int B, int E,
                        int64_t *correct, int64_t *counted)
{
    int64_t ok = 0, n = 0;
#pragma omp parallel for schedule(static) reduction(+ : ok, n) if ((size_t)B * (size_t)E > 64)
    for (int b = 0; b < B; b++) {
        real acc_local[2048];
        real *acc = C <= 2048 ? acc_local : NULL;
        for (int e = 0; e < E; e++) {
            int len = elem_len[(size_t)b * (size_t)E + (size_t)e];
            if (len <= 0)
                continue;
            int start = elem_start[(size_t)b * (size_t)E + (size_t)e];
            size_t f0 = (size_t)b * (size_t)T + (size_t)start;
            int best = 0;
            if (acc != NULL) {
                memcpy(acc, probs + f0 * (size_t)C, (size_t)C * sizeof *acc);
                for (int f = 1; f < len; f++) {
                    const real *p = probs + (f0 + (size_t)f) * (size_t)C;
                    for (int j = 0; j < C; j++)
                        acc[j] += p[j];
                }
                for (int j = 1; j < C; j++)
                    if (acc[j] > acc[best])
                        best = j;
            } else {
                /* very many classes: column by column */
                real best_v = -1;
                for (int j = 0; j < C; j++) {
                    real s = 0;
                    for (int f = 0; f < len; f++)
                        s += probs[(f0 + (size_t)f) * (size_t)C + (size_t)j];
                    if (s > best_v) {
                        best_v = s;
                        best = j;
                    }
                }
            }
            ok += best == target[f0];
            n++;
        }
    }
    *correct += ok;
    *counted += n;
}

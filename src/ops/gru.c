/* gru.c - PyTorch nn.GRU (one layer, batch_first, h0 = 0), forward and BPTT.
 *
 * Per step t, with gi = W_ih x_t + b_ih and gh = W_hh h_{t-1} + b_hh split as [r | z | n]:
 *   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r gh_n),
 *   h_t = (1 - z) n + z h_{t-1}
 * The input projection of all steps is one GEMM; the recurrence is one [rows x Hd] x
 * [Hd x 3Hd] GEMM per step and block of batch rows. Backward (carry = dh_{t+1} contribution, 0 at
 * the end): dh = dy_t + carry; dn = dh (1 - z); dz = dh (h_{t-1} - n); dan = dn (1 - n^2) dar = dan
 * gh_n r (1 - r); daz = dz z (1 - z) di_t = [dar | daz | dan], dg_t = [dar | daz | dan r] carry =
 * dg_t W_hh + dh z and the weight gradients are GEMMs over all steps at the end: dW_ih += dI^T X,
 * db_ih += sum dI, dX += dI W_ih, dW_hh += dG^T Hprev, db_hh += sum dG.
 */
#include <omp.h>
#include <string.h>
#include <tgmath.h>

#include "ops/ops.h"

#include "tensor/fastmath.h"

/* The batch rows are independent in the recurrence: blocks of GRU_ROWS rows each run the
 * whole time loop on one thread, with no synchronisation between steps. The blocks depend
 * on B alone, so the results do not depend on the thread count. */
#define GRU_ROWS 8

typedef struct gru_ctx {
    sb_tensor *x, *w_ih, *w_hh, *b_ih, *b_hh, *y;
    real *gates; /* [B][T][4 Hd]: r, z, n, gh_n per step */
    int B, T, D, Hd;
} gru_ctx;

static inline real sigm(real v)
{
    return sb_fsigmoid(v);
}

static void gru_backward(sb_graph *g, void *ctx)
{
    gru_ctx *c = ctx;
    if (c->y->grad == NULL)
        return;
    const int B = c->B, T = c->T, D = c->D, Hd = c->Hd, G3 = 3 * Hd;
    const real *y = c->y->data, *dy = c->y->grad, *gates = c->gates;
    real *dI = sb_graph_alloc(g, (size_t)B * (size_t)T * (size_t)G3 * sizeof(real));
    real *dG = sb_graph_alloc(g, (size_t)B * (size_t)T * (size_t)G3 * sizeof(real));
    real *carry = sb_graph_alloc(g, (size_t)B * (size_t)Hd * sizeof(real));
    memset(carry, 0, (size_t)B * (size_t)Hd * sizeof(real));
    const int blocks = (B + GRU_ROWS - 1) / GRU_ROWS;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
    for (int blk = 0; blk < blocks; blk++) {
        const int b0 = blk * GRU_ROWS, rows = B - b0 < GRU_ROWS ? B - b0 : GRU_ROWS;
        for (int t = T - 1; t >= 0; t--) {
            for (int b = b0; b < b0 + rows; b++) {
                size_t row = (size_t)b * (size_t)T + (size_t)t;
                const real *gt = gates + row * 4 * (size_t)Hd;
                const real *hprev = t > 0 ? y + (row - 1) * (size_t)Hd : NULL;
                const real *dyt = dy + row * (size_t)Hd;
                real *cr = carry + (size_t)b * (size_t)Hd;
                real *di = dI + row * (size_t)G3, *dg = dG + row * (size_t)G3;
                for (int j = 0; j < Hd; j++) {
                    real r = gt[j], z = gt[Hd + j], n = gt[2 * Hd + j], ghn = gt[3 * Hd + j];
                    real hp = hprev != NULL ? hprev[j] : 0;
                    real dh = dyt[j] + cr[j];
                    real dn = dh * (1 - z);
                    real dz = dh * (hp - n);
                    real dan = dn * (1 - n * n);
                    real dar = dan * ghn * r * (1 - r);
                    real daz = dz * z * (1 - z);
                    di[j] = dar, di[Hd + j] = daz, di[2 * Hd + j] = dan;
                    dg[j] = dar, dg[Hd + j] = daz, dg[2 * Hd + j] = dan * r;
                    cr[j] = dh * z; /* + dg W_hh below */
                }
            }
            /* carry += dG_t W_hh for the block's rows (stride T * 3Hd between rows) */
            sb_gemm(0, 0, rows, Hd, G3, 1, dG + ((size_t)b0 * (size_t)T + (size_t)t) * (size_t)G3,
                    T * G3, c->w_hh->data, Hd, 1, carry + (size_t)b0 * (size_t)Hd, Hd);
        }
    }
    const int N = B * T;
    if (c->x->requires_grad)
        sb_gemm(0, 0, N, D, G3, 1, dI, G3, c->w_ih->data, D, 1, sb_tensor_grad(g, c->x), D);
    if (c->w_ih->requires_grad)
        sb_gemm(1, 0, G3, D, N, 1, dI, G3, c->x->data, D, 1, sb_tensor_grad(g, c->w_ih), D);
    if (c->b_ih->requires_grad)
        sb_colsum_add(dI, N, G3, sb_tensor_grad(g, c->b_ih));
    if (c->b_hh->requires_grad)
        sb_colsum_add(dG, N, G3, sb_tensor_grad(g, c->b_hh));
    if (c->w_hh->requires_grad) {
        /* dW_hh += sum_t dG_t^T h_{t-1}; h_{-1} = 0, so per batch row use steps 1..T-1 */
        real *dw = sb_tensor_grad(g, c->w_hh);
        for (int b = 0; b < B; b++) {
            if (T < 2)
                break;
            size_t row0 = (size_t)b * (size_t)T;
            sb_gemm(1, 0, G3, Hd, T - 1, 1, dG + (row0 + 1) * (size_t)G3, G3, y + row0 * (size_t)Hd,
                    Hd, 1, dw, Hd);
        }
    }
}

/* The recurrence over x[B, T, D] from h0 (NULL: zeros); writes y and, if not NULL, the
 * gates the backward needs. */
static void gru_run(sb_graph *g, sb_tensor *x, sb_tensor *w_ih, sb_tensor *w_hh, sb_tensor *b_ih,
                    sb_tensor *b_hh, const real *h0, sb_tensor *y, real *gates)
{
    const int B = x->shape[0], T = x->shape[1];
    const int Hd = w_hh->shape[1], G3 = 3 * Hd;
    /* input projections of every step at once; not recorded: the GRU backward computes
     * the input projection's gradients itself */
    int record = g->record;
    g->record = 0;
    sb_tensor *gi = sb_linear(g, x, w_ih, b_ih);
    g->record = record;
    real *gh_all = sb_graph_alloc(g, (size_t)B * (size_t)G3 * sizeof(real));
    const int blocks = (B + GRU_ROWS - 1) / GRU_ROWS;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
    for (int blk = 0; blk < blocks; blk++) {
        const int b0 = blk * GRU_ROWS, rows = B - b0 < GRU_ROWS ? B - b0 : GRU_ROWS;
        real *gh = gh_all + (size_t)b0 * (size_t)G3;
        for (int t = 0; t < T; t++) {
            /* gh = h_{t-1} W_hh^T + b_hh for the block's rows */
            for (int i = 0; i < rows; i++)
                memcpy(gh + (size_t)i * (size_t)G3, b_hh->data, (size_t)G3 * sizeof(real));
            if (t > 0)
                sb_gemm(0, 1, rows, G3, Hd, 1,
                        y->data + ((size_t)b0 * (size_t)T + (size_t)(t - 1)) * (size_t)Hd, T * Hd,
                        w_hh->data, Hd, 1, gh, G3);
            else if (h0 != NULL)
                sb_gemm(0, 1, rows, G3, Hd, 1, h0 + (size_t)b0 * (size_t)Hd, Hd, w_hh->data, Hd, 1,
                        gh, G3);
            for (int i = 0; i < rows; i++) {
                const int b = b0 + i;
                size_t row = (size_t)b * (size_t)T + (size_t)t;
                const real *gir = gi->data + row * (size_t)G3, *ghr = gh + (size_t)i * (size_t)G3;
                const real *hprev = t > 0 ? y->data + (row - 1) * (size_t)Hd
                                          : (h0 != NULL ? h0 + (size_t)b * (size_t)Hd : NULL);
                real *h = y->data + row * (size_t)Hd;
                real *gt = gates != NULL ? gates + row * 4 * (size_t)Hd : NULL;
                for (int j = 0; j < Hd; j++) {
                    real r = sigm(gir[j] + ghr[j]);
                    real z = sigm(gir[Hd + j] + ghr[Hd + j]);
                    real n = sb_ftanh(gir[2 * Hd + j] + r * ghr[2 * Hd + j]);
                    real hp = hprev != NULL ? hprev[j] : 0;
                    h[j] = (1 - z) * n + z * hp;
                    if (gt != NULL) {
                        gt[j] = r, gt[Hd + j] = z, gt[2 * Hd + j] = n,
                        gt[3 * Hd + j] = ghr[2 * Hd + j];
                    }
                }
            }
        }
    }
}

sb_tensor *sb_gru(sb_graph *g, sb_tensor *x, sb_tensor *w_ih, sb_tensor *w_hh, sb_tensor *b_ih,
                  sb_tensor *b_hh)
{
    SB_ASSERT(x->ndim == 3);
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    const int Hd = w_hh->shape[1], G3 = 3 * Hd;
    SB_ASSERT(w_ih->shape[0] == G3 && w_ih->shape[1] == D && w_hh->shape[0] == G3);
    int shape[3] = {B, T, Hd};
    sb_tensor *y = sb_tensor_new(g, 3, shape);
    y->requires_grad = x->requires_grad || w_ih->requires_grad || w_hh->requires_grad ||
                       b_ih->requires_grad || b_hh->requires_grad;
    gru_ctx *c = y->requires_grad ? sb_graph_record(g, gru_backward, sizeof *c) : NULL;
    real *gates =
        c != NULL ? sb_graph_alloc(g, (size_t)B * (size_t)T * 4 * (size_t)Hd * sizeof(real)) : NULL;
    gru_run(g, x, w_ih, w_hh, b_ih, b_hh, NULL, y, gates);
    if (c != NULL) {
        c->x = x, c->w_ih = w_ih, c->w_hh = w_hh, c->b_ih = b_ih, c->b_hh = b_hh, c->y = y;
        c->gates = gates, c->B = B, c->T = T, c->D = D, c->Hd = Hd;
    }
    return y;
}

sb_tensor *sb_gru_stream(sb_graph *g, sb_tensor *x, sb_tensor *w_ih, sb_tensor *w_hh,
                         sb_tensor *b_ih, sb_tensor *b_hh, real *h)
{
    SB_ASSERT(x->ndim == 3 && !g->record);
    const int B = x->shape[0], T = x->shape[1], Hd = w_hh->shape[1];
    int shape[3] = {B, T, Hd};
    sb_tensor *y = sb_tensor_new(g, 3, shape);
    gru_run(g, x, w_ih, w_hh, b_ih, b_hh, h, y, NULL);
    for (int b = 0; b < B; b++)
        memcpy(h + (size_t)b * (size_t)Hd,
               y->data + ((size_t)b * (size_t)T + (size_t)(T - 1)) * (size_t)Hd,
               (size_t)Hd * sizeof(real));
    return y;
}

/* probe.c - linear readouts, gate statistics and state retention of a trained model (see
 * probe.h; definitions: docs/probe.md).
 *
 * Three passes over the data, each a forward that keeps every block's tensors
 * (sb_model_hidden_capture):
 *   1. training samples: per depth, the sums X^T X and X^T Y (one-hot Y), accumulated row
 *      by row in double (rows = elements, features = the element's frame), from which
 *      either readout is solved: LDA (class means and pooled covariance, the default) or
 *      ridge regression onto one-hot targets;
 *   2. test samples: the readouts' accuracies, the model's own windowed accuracy, and the
 *      layers' gates (probe_gates on the captured layer inputs) on symbol and gap frames;
 *   3. long-gap test samples: per layer and frame, ||output|| from the whole forward and
 *      ||recurrent state|| from the streaming forward, one frame per chunk.
 * Everything is deterministic: fixed summation orders, a plain Cholesky, sb_gemm.
 */
#include "train/probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/plot.h"
#include "ops/ops.h"
#include "task/batch.h"
#include "tensor/gemm_engine.h"

const int sb_probe_lags[SB_PROBE_N_LAGS] = {0, 1, 2, 4, 8};

sb_probe_options sb_probe_options_from(const sb_runtime *rt)
{
    /* the section key's choices: all, then each section alone in the order of its bit */
    const int sections = rt->section == 0 ? SB_PROBE_ALL : 1 << (rt->section - 1);
    sb_probe_options o = {.sections = sections,
                          .gates_required = sections == SB_PROBE_GATES,
                          .train_samples = rt->probe_samples,
                          .test_samples = rt->samples,
                          .readout = (sb_probe_readout)rt->readout,
                          .ridge = rt->ridge,
                          .frame = (sb_probe_frame)rt->probe_frame,
                          .retention_samples = rt->retention_samples,
                          .retention_element = rt->retention_element,
                          .batch = rt->probe_bs};
    return o;
}

void sb_probe_result_free(sb_probe_result *res)
{
    if (res == NULL)
        return;
    sb_free(res->readout_acc);
    sb_free(res->readout_n);
    if (res->gates != NULL)
        for (int l = 0; l < res->L; l++)
            for (int k = 0; k < res->gates[l].n_kinds; k++) {
                sb_free(res->gates[l].kind[k].mean_symbol);
                sb_free(res->gates[l].kind[k].mean_gap);
                sb_free(res->gates[l].kind[k].selectivity);
            }
    sb_free(res->gates);
    sb_free(res->output_norm);
    sb_free(res->state_norm);
    memset(res, 0, sizeof *res);
}

/* ---- ridge regression ---------------------------------------------------------------------- */

static int features_finite(const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* States that are not finite (or whose Gram matrix overflows) are the weights' failure, not
 * the readout's: no ridge makes them usable. */
static sb_status weights_overflow(int depth, sb_error *err)
{
    return sb_error_set(err, SB_ERR_DIVERGED,
                        "probe: the model's weights give non-finite states at depth %d: they "
                        "overflow in the forward pass (a run that diverged, or damaged "
                        "weights); probe an earlier checkpoint or retrain",
                        depth);
}

sb_status sb_probe_cholesky_solve(double *A, int n, double *B, int c, sb_error *err)
{
    /* A = L L^T, L in the lower triangle of A */
    for (int j = 0; j < n; j++) {
        double d = A[(size_t)j * n + j];
        for (int k = 0; k < j; k++)
            d -= A[(size_t)j * n + k] * A[(size_t)j * n + k];
        if (!(d > 0.0))
            return sb_error_set(err, SB_ERR_RUNTIME,
                                "probe: the ridge system is not positive definite (pivot %d); "
                                "raise --ridge",
                                j);
        const double ljj = sqrt(d);
        A[(size_t)j * n + j] = ljj;
        for (int i = j + 1; i < n; i++) {
            double s = A[(size_t)i * n + j];
            for (int k = 0; k < j; k++)
                s -= A[(size_t)i * n + k] * A[(size_t)j * n + k];
            A[(size_t)i * n + j] = s / ljj;
        }
    }
    /* L Z = B, then L^T W = Z, row by row over all c right-hand sides at once */
    for (int i = 0; i < n; i++) {
        double *bi = B + (size_t)i * c;
        for (int k = 0; k < i; k++) {
            const double lik = A[(size_t)i * n + k];
            const double *bk = B + (size_t)k * c;
            for (int r = 0; r < c; r++)
                bi[r] -= lik * bk[r];
        }
        const double inv = 1.0 / A[(size_t)i * n + i];
        for (int r = 0; r < c; r++)
            bi[r] *= inv;
    }
    for (int i = n - 1; i >= 0; i--) {
        double *bi = B + (size_t)i * c;
        for (int k = i + 1; k < n; k++) {
            const double lki = A[(size_t)k * n + i];
            const double *bk = B + (size_t)k * c;
            for (int r = 0; r < c; r++)
                bi[r] -= lki * bk[r];
        }
        const double inv = 1.0 / A[(size_t)i * n + i];
        for (int r = 0; r < c; r++)
            bi[r] *= inv;
    }
    return SB_OK;
}

/* xtx [n x n] (lower triangle) += xa xa^T; xa has n = d + 1 entries, the last one 1 */
static void ridge_add_gram(double *xtx, int n, const double *xa)
{
    for (int i = 0; i < n; i++) {
        double *row = xtx + (size_t)i * n;
        const double xi = xa[i];
        for (int k = 0; k <= i; k++)
            row[k] += xi * xa[k];
    }
}

/* xty [n x C]: column y += xa */
static void ridge_add_target(double *xty, int n, int C, const double *xa, int y)
{
    for (int i = 0; i < n; i++)
        xty[(size_t)i * C + y] += xa[i];
}

/* Adds the ridge term to xtx (the last, bias, row unregularised) and solves for W in xty. */
static sb_status ridge_solve(double *xtx, double *xty, int n, int C, double lambda, sb_error *err)
{
    double scale = 0.0;
    for (int i = 0; i < n - 1; i++)
        scale += xtx[(size_t)i * n + i];
    scale = n > 1 ? scale / (n - 1) : 0.0;
    if (!(scale > 0.0))
        scale = 1.0; /* every feature zero: any lambda keeps the system definite */
    for (int i = 0; i < n - 1; i++)
        xtx[(size_t)i * n + i] += lambda * scale;
    return sb_probe_cholesky_solve(xtx, n, xty, C, err);
}

/* Linear discriminant analysis from the same sums: xtx = sum of xa xa^T (lower triangle,
 * the last entry of xa the constant 1), xty column c = sum of xa over the rows of class c
 * (its last entry the class count). Shared within-class covariance S = (sum x x^T -
 * sum_c n_c mu_c mu_c^T) / N, shrunk by lambda times its mean diagonal; class c scores
 * x . S^-1 mu_c - mu_c . S^-1 mu_c / 2 + log(n_c / N). Writes W like ridge_solve: rows
 * 0..n-2 the weights, row n-1 the biases; a class never seen gets a bias of -1e30. */
static sb_status lda_solve(double *xtx, double *xty, int n, int C, double lambda, sb_error *err)
{
    const int d = n - 1;
    double N = 0.0;
    for (int c = 0; c < C; c++)
        N += xty[(size_t)d * C + c];
    if (!(N > 0.0))
        return sb_error_set(err, SB_ERR_INVALID, "probe: no training rows for a readout");
    double *S = sb_calloc((size_t)d * d, sizeof *S), *mu = sb_malloc((size_t)d * C * sizeof *mu);
    if (S == NULL || mu == NULL) {
        sb_free(S), sb_free(mu);
        return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the LDA system");
    }
    for (int c = 0; c < C; c++) {
        const double nc = xty[(size_t)d * C + c];
        for (int i = 0; i < d; i++)
            mu[(size_t)i * C + c] = nc > 0.0 ? xty[(size_t)i * C + c] / nc : 0.0;
    }
    for (int i = 0; i < d; i++)
        for (int k = 0; k <= i; k++) {
            double between = 0.0;
            for (int c = 0; c < C; c++)
                between += xty[(size_t)d * C + c] * mu[(size_t)i * C + c] * mu[(size_t)k * C + c];
            S[(size_t)i * d + k] = (xtx[(size_t)i * n + k] - between) / N;
        }
    /* the shrinkage scale: the mean variance of the features over all rows (the within-class
     * one can vanish, e.g. for the embedding, which the symbol alone determines) */
    double scale = 0.0;
    for (int i = 0; i < d; i++) {
        const double mean = xtx[(size_t)d * n + i] / N;
        scale += xtx[(size_t)i * n + i] / N - mean * mean;
    }
    scale = d > 0 ? scale / d : 0.0;
    if (!(scale > 0.0))
        scale = 1.0;
    for (int i = 0; i < d; i++)
        S[(size_t)i * d + i] += (lambda > 0.0 ? lambda : 1e-9) * scale;
    memcpy(xty, mu, (size_t)d * C * sizeof *mu); /* S^-1 mu in place of the sums */
    sb_status st = sb_probe_cholesky_solve(S, d, xty, C, err);
    if (st == SB_OK)
        for (int c = 0; c < C; c++) {
            const double nc = xty[(size_t)d * C + c]; /* the count row is untouched */
            double quad = 0.0;
            for (int i = 0; i < d; i++)
                quad += mu[(size_t)i * C + c] * xty[(size_t)i * C + c];
            xty[(size_t)d * C + c] = nc > 0.0 ? -0.5 * quad + log(nc / N) : -1e30;
        }
    sb_free(S), sb_free(mu);
    return st;
}

/* The normal sums of X (and the ones column) and y, then `solve` in place: W. */
static sb_status readout_fit(const double *X, const int32_t *y, int64_t rows, int d, int C,
                             double lambda, double *W,
                             sb_status (*solve)(double *, double *, int, int, double, sb_error *),
                             sb_error *err)
{
    const int n = d + 1;
    double *xtx = sb_calloc((size_t)n * n, sizeof *xtx), *xa = sb_malloc((size_t)n * sizeof *xa);
    if (xtx == NULL || xa == NULL) {
        sb_free(xtx);
        sb_free(xa);
        return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the ridge system");
    }
    memset(W, 0, (size_t)n * C * sizeof *W);
    for (int64_t r = 0; r < rows; r++) {
        memcpy(xa, X + (size_t)r * d, (size_t)d * sizeof *xa);
        xa[d] = 1.0;
        ridge_add_gram(xtx, n, xa);
        ridge_add_target(W, n, C, xa, y[r]);
    }
    sb_status st = solve(xtx, W, n, C, lambda, err);
    sb_free(xtx);
    sb_free(xa);
    return st;
}

sb_status sb_probe_ridge_fit(const double *X, const int32_t *y, int64_t rows, int d, int C,
                             double lambda, double *W, sb_error *err)
{
    return readout_fit(X, y, rows, d, C, lambda, W, ridge_solve, err);
}

sb_status sb_probe_lda_fit(const double *X, const int32_t *y, int64_t rows, int d, int C,
                           double lambda, double *W, sb_error *err)
{
    return readout_fit(X, y, rows, d, C, lambda, W, lda_solve, err);
}

/* ---- forward with capture ------------------------------------------------------------------ */

typedef struct fwd_args {
    const sb_model *m;
    const sb_batch *batch; /* whole batches, or NULL with input/T given */
    const float *input;    /* [1, T, V] when batch is NULL */
    int T;
    sb_model_capture cap;
    const uint8_t *gap; /* [B * T], NULL: no gates */
    sb_tensor **gates;  /* [L] */
    sb_gate_desc *desc; /* [L] */
} fwd_args;

static void probe_forward(sb_graph *g, void *arg)
{
    fwd_args *a = arg;
    const sb_model *m = a->m;
    const int B = a->batch != NULL ? a->batch->B : 1, T = a->batch != NULL ? a->batch->T : a->T;
    const int V = m->cfg.d_input;
    const float *src = a->batch != NULL ? a->batch->data : a->input;
    int shape[3] = {B, T, V};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)src[i];
    sb_model_hidden_capture(g, m, x, &a->cap);
    if (a->gap == NULL)
        return;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        a->gates[l] = NULL;
        if (m->type->probe_gates != NULL)
            a->gates[l] = m->type->probe_gates(g, m, l, a->cap.layer_in[l], a->gap, &a->desc[l]);
    }
}

typedef struct stream_args {
    const sb_model *m;
    const float *frame; /* [V] */
    real *const *states;
} stream_args;

static void probe_stream_frame(sb_graph *g, void *arg)
{
    stream_args *a = arg;
    const int V = a->m->cfg.d_input;
    int shape[3] = {1, 1, V};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    for (int v = 0; v < V; v++)
        x->data[v] = (real)a->frame[v];
    sb_model_hidden_stream(g, a->m, x, a->states);
}

/* Frame of element e used as its feature row. */
static int feature_frame(const sb_batch *b, int s, int e, sb_probe_frame frame)
{
    const size_t i = (size_t)s * (size_t)b->E + (size_t)e;
    return frame == SB_PROBE_FRAME_LAST ? b->elem_start[i] + b->elem_len[i] - 1 : b->elem_start[i];
}

/* State id of element e of sample s (the target of its window). */
static int element_target(const sb_batch *b, int s, int e)
{
    return b->target[(size_t)s * (size_t)b->T +
                     (size_t)b->elem_start[(size_t)s * (size_t)b->E + (size_t)e]];
}

/* The bucket of element index e: the largest lag index whose lag is <= e. The Gram matrix of
 * lag index k is the sum of the buckets >= k (elements e >= lag). */
static int lag_bucket(int e)
{
    int k = 0;
    while (k + 1 < SB_PROBE_N_LAGS && sb_probe_lags[k + 1] <= e)
        k++;
    return k;
}

/* ---- pass 1: fit the readouts ---------------------------------------------------------------- */

typedef struct probe_ctx {
    const sb_task *task;
    const sb_model *m;
    const sb_probe_options *opt;
    sb_probe_result *res;
    sb_graph g;
    sb_batch batch;
    int n_depths, n, C; /* n = D + 1 features with the bias */
    int64_t *index;
    sb_tensor **cap_tensors; /* [3 L + 1] storage of the capture */
    real *W;                 /* [n_depths][N_LAGS][n x C] readouts, NULL rows when unfitted */
    uint8_t *fitted;         /* [n_depths][N_LAGS] */
} probe_ctx;

static void ctx_capture(probe_ctx *c, fwd_args *a)
{
    const int L = c->m->cfg.n_layers;
    a->cap.block_out = c->cap_tensors;
    a->cap.layer_in = c->cap_tensors + L + 1;
    a->cap.layer_out = c->cap_tensors + 2 * L + 1;
}

static sb_status fill_and_run(probe_ctx *c, sb_split split, int64_t first, int cnt, fwd_args *a,
                              sb_error *err)
{
    for (int i = 0; i < cnt; i++)
        c->index[i] = first + i;
    sb_status st = sb_batch_fill(&c->batch, c->task, split, c->index, cnt, 0, err);
    if (st != SB_OK)
        return st;
    sb_graph_reset(&c->g);
    c->g.record = 0;
    c->g.training = 0;
    a->m = c->m;
    a->batch = &c->batch;
    ctx_capture(c, a);
    return sb_graph_run(&c->g, probe_forward, a, err);
}

static sb_status fit_readouts(probe_ctx *c, sb_error *err)
{
    const sb_probe_options *opt = c->opt;
    const int n = c->n, C = c->C, D = c->m->cfg.d_model, ND = c->n_depths;
    const size_t nn = (size_t)n * n, nc = (size_t)n * C;
    int64_t total = sb_task_split_size(c->task, SB_SPLIT_TRAIN);
    if (opt->train_samples < total)
        total = opt->train_samples;
    /* per depth: N_LAGS Gram buckets and N_LAGS right-hand sides */
    double *gram = sb_calloc((size_t)ND * SB_PROBE_N_LAGS * nn, sizeof *gram);
    double *rhs = sb_calloc((size_t)ND * SB_PROBE_N_LAGS * nc, sizeof *rhs);
    double *xa = sb_malloc((size_t)n * sizeof *xa);
    int64_t rows[SB_PROBE_N_LAGS] = {0};
    sb_status st = SB_OK;
    if (gram == NULL || rhs == NULL || xa == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM,
                          "probe: out of memory for the ridge systems "
                          "(%d depths, %d features, %d classes)",
                          ND, n, C);
        goto done;
    }
    c->res->train_samples = total;
    for (int64_t first = 0; first < total && st == SB_OK; first += opt->batch) {
        const int cnt = (int)(total - first < opt->batch ? total - first : opt->batch);
        fwd_args a = {0};
        if ((st = fill_and_run(c, SB_SPLIT_TRAIN, first, cnt, &a, err)) != SB_OK)
            break;
        const sb_batch *b = &c->batch;
        for (int s = 0; s < cnt; s++)
            for (int e = 0; e < b->E; e++) {
                if (b->elem_len[(size_t)s * b->E + e] <= 0)
                    continue;
                const int f = feature_frame(b, s, e, opt->frame), bucket = lag_bucket(e);
                c->res->train_elements++;
                for (int k = 0; k < SB_PROBE_N_LAGS; k++)
                    rows[k] += e >= sb_probe_lags[k];
                for (int d = 0; d < ND; d++) {
                    const real *x = a.cap.block_out[d]->data + ((size_t)s * b->T + f) * D;
                    for (int i = 0; i < D; i++)
                        xa[i] = (double)x[i];
                    xa[D] = 1.0;
                    if (!features_finite(xa, D)) {
                        st = weights_overflow(d, err);
                        goto done;
                    }
                    ridge_add_gram(gram + ((size_t)d * SB_PROBE_N_LAGS + bucket) * nn, n, xa);
                    for (int k = 0; k < SB_PROBE_N_LAGS && e >= sb_probe_lags[k]; k++)
                        ridge_add_target(rhs + ((size_t)d * SB_PROBE_N_LAGS + k) * nc, n, C, xa,
                                         element_target(b, s, e - sb_probe_lags[k]));
                }
            }
    }
    if (st != SB_OK)
        goto done;
    /* solve: the Gram matrix of lag k sums the buckets k.. (elements at least lag k in) */
    for (int d = 0; d < ND && st == SB_OK; d++) {
        double *g0 = gram + (size_t)d * SB_PROBE_N_LAGS * nn;
        for (int k = SB_PROBE_N_LAGS - 2; k >= 0; k--)
            for (size_t i = 0; i < nn; i++)
                g0[(size_t)k * nn + i] += g0[(size_t)(k + 1) * nn + i];
        for (int k = 0; k < SB_PROBE_N_LAGS && st == SB_OK; k++) {
            if (rows[k] == 0)
                continue;
            double *A = g0 + (size_t)k * nn, *Bm = rhs + ((size_t)d * SB_PROBE_N_LAGS + k) * nc;
            if (!features_finite(A, (int)nn)) { /* finite states whose squares overflow */
                st = weights_overflow(d, err);
                break;
            }
            if ((st = (opt->readout == SB_PROBE_LDA ? lda_solve : ridge_solve)(
                     A, Bm, n, C, opt->ridge, err)) != SB_OK)
                break;
            real *W = c->W + ((size_t)d * SB_PROBE_N_LAGS + k) * nc;
            for (size_t i = 0; i < nc; i++)
                W[i] = (real)Bm[i];
            c->fitted[d * SB_PROBE_N_LAGS + k] = 1;
        }
    }
done:
    sb_free(gram);
    sb_free(rhs);
    sb_free(xa);
    return st;
}

/* ---- pass 2: score on the test split, gate statistics ---------------------------------------- */

typedef struct gate_acc {
    double *sum;   /* [L][KINDS][G][2] sums over symbol (0) and gap (1) frames */
    int64_t *hist; /* [L][KINDS][2][BINS] */
    int64_t n[2];  /* frames of each kind (per group) */
    int G_max;
} gate_acc;

static int first_argmax(const real *x, int C)
{
    int best = 0;
    for (int j = 1; j < C; j++)
        if (x[j] > x[best])
            best = j;
    return best;
}

/* The buffers and counts of the test pass; the buffers grow to the largest batch. */
typedef struct test_pass {
    int64_t *correct;      /* [ND][N_LAGS] readouts right */
    int64_t model_correct; /* elements the model's own decision got right */
    real *xr;              /* [cap_T][n] one sample's readout features, bias last */
    real *logits;          /* [cap_T][C] one sample's logits, then probabilities */
    real *probs_sum;       /* [C] probabilities summed over an element's window */
    uint8_t *gap;          /* [cap_rows] 1 on an element's gap frames (all but its first) */
    sb_tensor **gates;     /* [L] each layer's gates of the batch (NULL: none) */
    sb_gate_desc *desc;    /* [L] what the gates are */
    size_t cap_rows;
    int cap_T;
} test_pass;

static void test_pass_free(test_pass *tp)
{
    sb_free(tp->correct);
    sb_free(tp->gates);
    sb_free(tp->desc);
    sb_free(tp->gap);
    sb_free(tp->logits);
    sb_free(tp->xr);
    sb_free(tp->probs_sum);
}

/* Grows the per-batch buffers of tp to batch b (n features, C classes). */
static sb_status test_pass_grow(test_pass *tp, const sb_batch *b, int n, int C, sb_error *err)
{
    const size_t BT = (size_t)b->B * b->T;
    if (BT > tp->cap_rows || b->T > tp->cap_T) { /* elements <= frames: T rows hold either */
        tp->cap_rows = BT > tp->cap_rows ? BT : tp->cap_rows;
        tp->cap_T = b->T > tp->cap_T ? b->T : tp->cap_T;
        sb_free(tp->gap);
        sb_free(tp->logits);
        sb_free(tp->xr);
        tp->gap = sb_calloc(tp->cap_rows, 1);
        tp->logits = sb_malloc((size_t)tp->cap_T * C * sizeof *tp->logits);
        tp->xr = sb_malloc((size_t)tp->cap_T * n * sizeof *tp->xr);
        if (tp->gap == NULL || tp->logits == NULL || tp->xr == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the test pass");
    }
    if (tp->probs_sum == NULL &&
        (tp->probs_sum = sb_malloc((size_t)C * sizeof *tp->probs_sum)) == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the test pass");
    return SB_OK;
}

/* gap [B][T]: 1 on the frames of each element after its first, for the first cnt samples. */
static void mark_gap_frames(uint8_t *gap, const sb_batch *b, int cnt)
{
    memset(gap, 0, (size_t)b->B * b->T);
    for (int s = 0; s < cnt; s++)
        for (int e = 0; e < b->E; e++) {
            const size_t i = (size_t)s * b->E + e;
            for (int t = b->elem_start[i] + 1; t < b->elem_start[i] + b->elem_len[i]; t++)
                gap[(size_t)s * b->T + t] = 1;
        }
}

/* The model's own decision on sample s: the first argmax of each window's summed
 * probabilities; counts its elements and those right. */
static void score_model_sample(const probe_ctx *c, const fwd_args *a, int s, test_pass *tp)
{
    const sb_model *m = c->m;
    const sb_batch *b = a->batch;
    const int C = c->C, D = m->cfg.d_model, L = m->cfg.n_layers;
    const int32_t *es = b->elem_start + (size_t)s * b->E, *el = b->elem_len + (size_t)s * b->E;
    const int Tb = b->n_frames[s];
    real *logits = tp->logits, *probs_sum = tp->probs_sum;
    const real *h = a->cap.block_out[L]->data + (size_t)s * b->T * D;
    for (int t = 0; t < Tb; t++)
        memcpy(logits + (size_t)t * C, m->dec_b->data, (size_t)C * sizeof(real));
    const int bf16_was_suspended = sb_model_precision_enter(m);
    sb_gemm(0, 1, Tb, C, D, 1, h, D, m->dec_w->data, D, 1, logits, C);
    sb_gemm_bf16_suspend(bf16_was_suspended);
    for (int t = 0; t < Tb; t++) {
        real *x = logits + (size_t)t * C;
        real mx = x[first_argmax(x, C)];
        double sum = 0.0;
        for (int j = 0; j < C; j++) {
            x[j] = (real)exp((double)(x[j] - mx));
            sum += (double)x[j];
        }
        for (int j = 0; j < C; j++)
            x[j] = (real)((double)x[j] / sum);
    }
    for (int e = 0; e < b->E; e++) {
        if (el[e] <= 0)
            continue;
        c->res->test_elements++;
        for (int j = 0; j < C; j++)
            probs_sum[j] = 0;
        for (int t = es[e]; t < es[e] + el[e]; t++)
            for (int j = 0; j < C; j++)
                probs_sum[j] += logits[(size_t)t * C + j];
        tp->model_correct += first_argmax(probs_sum, C) == element_target(b, s, e);
    }
}

/* The fitted readouts on sample s: one product per depth and lag over its elements;
 * counts, per depth and lag, the elements scored and those right. */
static void score_readouts_sample(const probe_ctx *c, const fwd_args *a, int s, test_pass *tp)
{
    const sb_batch *b = a->batch;
    const int n = c->n, C = c->C, D = c->m->cfg.d_model;
    const int32_t *el = b->elem_len + (size_t)s * b->E;
    real *xr = tp->xr, *logits = tp->logits;
    for (int d = 0; d < c->n_depths; d++) {
        int rows = 0;
        for (int e = 0; e < b->E; e++) {
            if (el[e] <= 0)
                continue;
            const int f = feature_frame(b, s, e, c->opt->frame);
            const real *x = a->cap.block_out[d]->data + ((size_t)s * b->T + f) * D;
            memcpy(xr + (size_t)rows * n, x, (size_t)D * sizeof(real));
            xr[(size_t)rows * n + D] = 1;
            rows++;
        }
        for (int k = 0; k < SB_PROBE_N_LAGS; k++) {
            if (!c->fitted[d * SB_PROBE_N_LAGS + k] || rows == 0)
                continue;
            const real *W = c->W + ((size_t)d * SB_PROBE_N_LAGS + k) * (size_t)n * C;
            sb_gemm(0, 0, rows, C, n, 1, xr, n, W, C, 0, logits, C);
            for (int e = 0, r = 0; e < b->E; e++) {
                if (el[e] <= 0)
                    continue;
                if (e >= sb_probe_lags[k]) {
                    c->res->readout_n[d * SB_PROBE_N_LAGS + k]++;
                    tp->correct[d * SB_PROBE_N_LAGS + k] +=
                        first_argmax(logits + (size_t)r * C, C) ==
                        element_target(b, s, e - sb_probe_lags[k]);
                }
                r++;
            }
        }
    }
}

/* The gates of sample s on its symbol (0) and gap (1) frames: frame counts, sums and
 * histograms into ga. */
static void accumulate_gates_sample(const sb_batch *b, int s, int L, const test_pass *tp,
                                    gate_acc *ga)
{
    const int Tb = b->n_frames[s];
    const uint8_t *gap = tp->gap;
    for (int t = 0; t < Tb; t++) {
        const int kind = gap[(size_t)s * b->T + t];
        ga->n[kind]++;
    }
    for (int l = 0; l < L; l++) {
        if (tp->gates[l] == NULL)
            continue;
        const sb_gate_desc *gd = &tp->desc[l];
        const int G = gd->n_groups, KG = gd->n_kinds * G;
        SB_ASSERT(G <= ga->G_max && tp->gates[l]->shape[2] == KG);
        for (int t = 0; t < Tb; t++) {
            const int kind = gap[(size_t)s * b->T + t];
            const real *v = tp->gates[l]->data + ((size_t)s * b->T + t) * KG;
            for (int q = 0; q < gd->n_kinds; q++) {
                double *sum = ga->sum + (((size_t)l * SB_GATE_KINDS_MAX + q) * ga->G_max) * 2;
                int64_t *hist = ga->hist + (((size_t)l * SB_GATE_KINDS_MAX + q) * 2 + kind) *
                                               SB_PROBE_HIST_BINS;
                for (int hh = 0; hh < G; hh++) {
                    const double val = (double)v[q * G + hh];
                    sum[hh * 2 + kind] += val;
                    int bin = (int)(val / gd->hi[q] * SB_PROBE_HIST_BINS);
                    bin = bin < 0 ? 0 : bin >= SB_PROBE_HIST_BINS ? SB_PROBE_HIST_BINS - 1 : bin;
                    hist[bin]++;
                }
            }
        }
    }
}

/* The gate descriptions into res, once per layer (the first batch that has them). */
static void record_gate_descs(sb_probe_result *res, const test_pass *tp, int L)
{
    if (res->gates == NULL)
        return;
    for (int l = 0; l < L; l++)
        if (tp->gates[l] != NULL && res->gates[l].n_kinds == 0) {
            res->gates[l].n_kinds = tp->desc[l].n_kinds;
            res->gates[l].n_groups = tp->desc[l].n_groups;
            for (int q = 0; q < tp->desc[l].n_kinds; q++) {
                snprintf(res->gates[l].kind[q].name, sizeof res->gates[l].kind[q].name, "%s",
                         tp->desc[l].kind[q]);
                res->gates[l].kind[q].hi = tp->desc[l].hi[q];
            }
        }
}

/* Pass 2: the model's accuracy and the readouts' on the test split (opt->test_samples of
 * it), and with want_gates the gate statistics into ga. */
static sb_status score_test(probe_ctx *c, int want_gates, gate_acc *ga, sb_error *err)
{
    const sb_probe_options *opt = c->opt;
    const int L = c->m->cfg.n_layers, ND = c->n_depths;
    sb_probe_result *res = c->res;
    int64_t total = sb_task_split_size(c->task, SB_SPLIT_TEST);
    if (opt->test_samples > 0 && opt->test_samples < total)
        total = opt->test_samples;
    res->test_samples = total;
    test_pass tp = {0};
    tp.correct = sb_calloc((size_t)ND * SB_PROBE_N_LAGS, sizeof *tp.correct);
    tp.gates = sb_calloc((size_t)L, sizeof *tp.gates);
    tp.desc = sb_calloc((size_t)L, sizeof *tp.desc);
    sb_status st = SB_OK;
    if (tp.gates == NULL || tp.desc == NULL || tp.correct == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the test pass");
    for (int64_t first = 0; first < total && st == SB_OK; first += opt->batch) {
        const int cnt = (int)(total - first < opt->batch ? total - first : opt->batch);
        for (int i = 0; i < cnt; i++)
            c->index[i] = first + i;
        if ((st = sb_batch_fill(&c->batch, c->task, SB_SPLIT_TEST, c->index, cnt, 0, err)) != SB_OK)
            break;
        const sb_batch *b = &c->batch;
        if ((st = test_pass_grow(&tp, b, c->n, c->C, err)) != SB_OK)
            break;
        mark_gap_frames(tp.gap, b, cnt);
        sb_graph_reset(&c->g);
        c->g.record = 0;
        c->g.training = 0;
        fwd_args a = {.m = c->m,
                      .batch = b,
                      .gap = want_gates ? tp.gap : NULL,
                      .gates = tp.gates,
                      .desc = tp.desc};
        ctx_capture(c, &a);
        if ((st = sb_graph_run(&c->g, probe_forward, &a, err)) != SB_OK)
            break;
        for (int s = 0; s < cnt; s++) {
            score_model_sample(c, &a, s, &tp);
            score_readouts_sample(c, &a, s, &tp);
            if (want_gates)
                accumulate_gates_sample(b, s, L, &tp, ga);
        }
        if (want_gates)
            record_gate_descs(res, &tp, L);
    }
    if (st == SB_OK) {
        res->model_test_acc = res->test_elements > 0
                                  ? (double)tp.model_correct / (double)res->test_elements
                                  : (double)NAN;
        for (int i = 0; i < ND * SB_PROBE_N_LAGS; i++)
            res->readout_acc[i] = res->readout_n[i] > 0
                                      ? (double)tp.correct[i] / (double)res->readout_n[i]
                                      : (double)NAN;
    }
    test_pass_free(&tp);
    return st;
}

/* Turns the gate sums into means, selectivities and histogram fractions. */
static sb_status gate_finish(sb_probe_result *res, const gate_acc *ga, sb_error *err)
{
    res->gate_symbol_frames = ga->n[0];
    res->gate_gap_frames = ga->n[1];
    for (int l = 0; l < res->L; l++) {
        sb_probe_gate_layer *gl = &res->gates[l];
        for (int q = 0; q < gl->n_kinds; q++) {
            sb_probe_gate_kind *k = &gl->kind[q];
            const int G = gl->n_groups;
            k->mean_symbol = sb_malloc((size_t)G * sizeof(double));
            k->mean_gap = sb_malloc((size_t)G * sizeof(double));
            k->selectivity = sb_malloc((size_t)G * sizeof(double));
            if (!k->mean_symbol || !k->mean_gap || !k->selectivity)
                return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the gates");
            const double *sum = ga->sum + (((size_t)l * SB_GATE_KINDS_MAX + q) * ga->G_max) * 2;
            double total = 0.0;
            for (int h = 0; h < G; h++) {
                k->mean_symbol[h] = ga->n[0] > 0 ? sum[h * 2] / (double)ga->n[0] : (double)NAN;
                k->mean_gap[h] = ga->n[1] > 0 ? sum[h * 2 + 1] / (double)ga->n[1] : (double)NAN;
                k->selectivity[h] = k->mean_gap[h] - k->mean_symbol[h];
                total += k->selectivity[h];
            }
            k->layer_selectivity = G > 0 ? total / G : (double)NAN;
            for (int kind = 0; kind < 2; kind++) {
                const int64_t *hist = ga->hist + (((size_t)l * SB_GATE_KINDS_MAX + q) * 2 + kind) *
                                                     SB_PROBE_HIST_BINS;
                double *out = kind == 0 ? k->hist_symbol : k->hist_gap;
                const double cnt = (double)ga->n[kind] * G;
                for (int i = 0; i < SB_PROBE_HIST_BINS; i++)
                    out[i] = cnt > 0 ? (double)hist[i] / cnt : (double)NAN;
            }
        }
    }
    return SB_OK;
}

/* ---- pass 3: retention along one long gap ---------------------------------------------------- */

static double norm2(const real *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

/* The test samples of the long-gap task the retention pass reads: up to `want`, each with
 * its element before the gap (the first at index >= first_element with a gap, else the last
 * one with a gap: the state has then seen a few elements before the long gap) in which[] and
 * elem[]; *G the shortest of their gaps in frames. */
static sb_status pick_gap_samples(const sb_task *lt, int first_element, int64_t want,
                                  sb_sample *smp, int64_t *which, int *elem, int *found, int *G,
                                  sb_error *err)
{
    int64_t n_test = sb_task_split_size(lt, SB_SPLIT_TEST);
    *found = 0;
    *G = 0;
    for (int64_t i = 0; i < n_test && *found < want; i++) {
        sb_status st = sb_task_sample(lt, SB_SPLIT_TEST, i, smp, err);
        if (st != SB_OK)
            return st;
        int pick = -1;
        for (int e = 0; e < smp->n_elements; e++)
            if (smp->gap[e] > 0) {
                pick = e;
                if (e >= first_element)
                    break;
            }
        if (pick >= 0) {
            if (*found == 0 || smp->gap[pick] < *G)
                *G = smp->gap[pick];
            which[*found] = i;
            elem[(*found)++] = pick;
        }
    }
    return SB_OK;
}

/* What the retention pass shares across its samples. */
typedef struct retention_pass {
    const sb_model *m;
    sb_graph *g;
    sb_tensor **cap_tensors;
    int stream;                /* the model streams: states are measured too */
    real *state_buf, **states; /* each layer's streaming state (sf floats) */
    size_t sf, hist, count;    /* state floats; of them, the recurrent part's offset and size */
    int G, found;              /* frames into the gap; samples averaged */
} retention_pass;

/* One sample's norms along the gap, each divided by the samples' count, added to res: the
 * layers' outputs from a whole forward of its first t0 + G + 1 frames, and with streaming
 * the recurrent states after every frame. */
static sb_status retention_sample(const retention_pass *rp, const float *data, int t0,
                                  sb_probe_result *res, sb_error *err)
{
    const sb_model *m = rp->m;
    const int L = m->cfg.n_layers, V = m->cfg.d_input, D = m->cfg.d_model;
    const int G = rp->G, Tn = t0 + G + 1;
    const size_t per_layer = (size_t)G + 1;
    sb_graph *g = rp->g;
    sb_graph_reset(g);
    g->record = 0;
    g->training = 0;
    fwd_args a = {.m = m, .input = data, .T = Tn};
    a.cap.block_out = rp->cap_tensors;
    a.cap.layer_in = rp->cap_tensors + L + 1;
    a.cap.layer_out = rp->cap_tensors + 2 * L + 1;
    sb_status st = sb_graph_run(g, probe_forward, &a, err);
    if (st != SB_OK)
        return st;
    for (int l = 0; l < L; l++)
        for (int t = 0; t <= G; t++)
            res->output_norm[(size_t)l * per_layer + t] +=
                norm2(a.cap.layer_out[l]->data + (size_t)(t0 + t) * D, (size_t)D) / rp->found;
    if (!rp->stream)
        return SB_OK;
    /* streaming, one frame per chunk: the recurrent states after every frame */
    memset(rp->state_buf, 0, (size_t)L * rp->sf * sizeof(real));
    for (int t = 0; t < Tn && st == SB_OK; t++) {
        sb_graph_reset(g);
        g->record = 0;
        g->training = 0;
        stream_args sa = {.m = m, .frame = data + (size_t)t * V, .states = rp->states};
        if ((st = sb_graph_run(g, probe_stream_frame, &sa, err)) != SB_OK)
            break;
        if (t >= t0)
            for (int l = 0; l < L; l++)
                res->state_norm[(size_t)l * per_layer + (t - t0)] +=
                    norm2(rp->states[l] + rp->hist, rp->count) / rp->found;
    }
    return st;
}

static sb_status retention(const sb_task *lt, const sb_model *m, const sb_probe_options *opt,
                           sb_probe_result *res, sb_graph *g, sb_tensor **cap_tensors,
                           sb_error *err)
{
    const int L = m->cfg.n_layers, V = m->cfg.d_input;
    retention_pass rp = {.m = m, .g = g, .cap_tensors = cap_tensors};
    rp.stream = sb_model_can_stream(m);
    sb_sample smp;
    sb_status st = sb_sample_alloc(lt, &smp, err);
    if (st != SB_OK)
        return st;
    int64_t n_test = sb_task_split_size(lt, SB_SPLIT_TEST);
    int64_t want = opt->retention_samples < n_test ? opt->retention_samples : n_test;
    /* the first element with a gap in each sample; the gap length is the task's test gap */
    int64_t *which = sb_calloc((size_t)(want > 0 ? want : 1), sizeof *which);
    int *elem = sb_calloc((size_t)(want > 0 ? want : 1), sizeof *elem);
    float *data = NULL;
    int32_t *target = NULL;
    rp.sf = rp.stream ? m->type->stream_state_floats(&m->cfg) : 0;
    rp.count = rp.sf;
    if (rp.stream && m->type->stream_recurrent != NULL)
        m->type->stream_recurrent(&m->cfg, &rp.hist, &rp.count);
    if (which == NULL || elem == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the retention pass");
        goto done;
    }
    st = pick_gap_samples(lt, opt->retention_element, want, &smp, which, elem, &rp.found, &rp.G,
                          err);
    if (st != SB_OK)
        goto done;
    if (rp.found == 0) {
        snprintf(res->retention_reason, sizeof res->retention_reason,
                 "no long-gap test sample has an element with a gap");
        goto done;
    }
    res->gap_frames = rp.G;
    res->retention_samples = rp.found;
    res->retention_element = opt->retention_element;
    const size_t per_layer = (size_t)rp.G + 1;
    res->output_norm = sb_calloc((size_t)L * per_layer, sizeof(double));
    res->state_norm = rp.stream ? sb_calloc((size_t)L * per_layer, sizeof(double)) : NULL;
    if (!rp.stream)
        snprintf(res->retention_reason, sizeof res->retention_reason,
                 "model '%s' has no streaming form: output norms only", m->cfg.model);
    rp.state_buf = rp.stream ? sb_malloc((size_t)L * (rp.sf > 0 ? rp.sf : 1) * sizeof(real)) : NULL;
    rp.states = rp.stream ? sb_malloc((size_t)L * sizeof *rp.states) : NULL;
    if (res->output_norm == NULL ||
        (rp.stream && (!res->state_norm || !rp.state_buf || !rp.states))) {
        st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the retention pass");
        goto done;
    }
    for (int l = 0; rp.stream && l < L; l++)
        rp.states[l] = rp.state_buf + (size_t)l * rp.sf;
    for (int r = 0; r < rp.found && st == SB_OK; r++) {
        if ((st = sb_task_sample(lt, SB_SPLIT_TEST, which[r], &smp, err)) != SB_OK)
            break;
        sb_free(data);
        sb_free(target);
        data = sb_malloc((size_t)smp.n_frames * V * sizeof *data);
        target = sb_malloc((size_t)smp.n_frames * sizeof *target);
        if (data == NULL || target == NULL) {
            st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the retention pass");
            break;
        }
        sb_task_sample_frames(lt, SB_SPLIT_TEST, which[r], &smp, data, target);
        st = retention_sample(&rp, data, smp.frame_start[elem[r]], res, err);
    }
done:
    sb_free(which);
    sb_free(elem);
    sb_free(data);
    sb_free(target);
    sb_free(rp.state_buf);
    sb_free(rp.states);
    sb_sample_free(&smp);
    return st;
}

/* ---- the run --------------------------------------------------------------------------------- */

static int model_has_gates(const sb_model *m)
{
    return m->type->probe_gates != NULL;
}

sb_status sb_probe_run(const sb_task *task, const sb_task *long_task, const sb_model *m,
                       const sb_probe_options *opt, sb_probe_result *res, sb_error *err)
{
    memset(res, 0, sizeof *res);
    const int L = m->cfg.n_layers, D = m->cfg.d_model, C = m->cfg.d_output;
    snprintf(res->model, sizeof res->model, "%s", m->cfg.model);
    res->L = L;
    res->D = D;
    res->C = C;
    res->V = m->cfg.d_input;
    res->sections = opt->sections;
    res->frame = opt->frame;
    res->ridge = opt->ridge;
    res->readout = opt->readout;
    res->model_test_acc = (double)NAN;
    if (opt->batch < 1 || opt->train_samples < 1 || !(opt->ridge >= 0.0))
        return sb_error_set(err, SB_ERR_INVALID,
                            "probe: the batch (%d), the training samples (%lld) must be positive "
                            "and the ridge (%g) non-negative",
                            opt->batch, (long long)opt->train_samples, opt->ridge);
    const int want_gates = (opt->sections & SB_PROBE_GATES) && model_has_gates(m);
    if ((opt->sections & SB_PROBE_GATES) && !model_has_gates(m)) {
        snprintf(res->gates_reason, sizeof res->gates_reason,
                 "model '%s' has no input-dependent gates (its gating: %s)", m->cfg.model,
                 m->type->taxonomy.gating);
        if (opt->gates_required)
            return sb_error_set(err, SB_ERR_INVALID, "%s; run --section readout or retention",
                                res->gates_reason);
    } else if (!(opt->sections & SB_PROBE_GATES))
        snprintf(res->gates_reason, sizeof res->gates_reason, "section not requested");
    if (!(opt->sections & SB_PROBE_RETENTION))
        snprintf(res->retention_reason, sizeof res->retention_reason, "section not requested");

    probe_ctx c = {
        .task = task, .m = m, .opt = opt, .res = res, .n_depths = L + 1, .n = D + 1, .C = C};
    const size_t wsize = (size_t)(L + 1) * SB_PROBE_N_LAGS * (size_t)(D + 1) * (size_t)C;
    sb_status st = sb_batch_init(&c.batch, task, opt->batch, err);
    if (st != SB_OK)
        return st;
    sb_graph_init(&c.g, (size_t)64 << 20);
    gate_acc ga = {0};
    c.index = sb_malloc((size_t)opt->batch * sizeof *c.index);
    c.cap_tensors = sb_calloc((size_t)(3 * L + 1), sizeof *c.cap_tensors);
    c.fitted = sb_calloc((size_t)(L + 1) * SB_PROBE_N_LAGS, 1);
    res->readout_acc = sb_malloc((size_t)(L + 1) * SB_PROBE_N_LAGS * sizeof *res->readout_acc);
    res->readout_n = sb_calloc((size_t)(L + 1) * SB_PROBE_N_LAGS, sizeof *res->readout_n);
    if (!c.index || !c.cap_tensors || !c.fitted || !res->readout_acc || !res->readout_n) {
        st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory");
        goto done;
    }
    for (int i = 0; i < (L + 1) * SB_PROBE_N_LAGS; i++)
        res->readout_acc[i] = (double)NAN;
    if (opt->sections & SB_PROBE_READOUT) {
        if ((c.W = sb_malloc(wsize * sizeof *c.W)) == NULL) {
            st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the readouts");
            goto done;
        }
        if ((st = fit_readouts(&c, err)) != SB_OK)
            goto done;
    }
    if (want_gates) {
        res->gates = sb_calloc((size_t)L, sizeof *res->gates);
        /* groups are heads or channel groups: never more than the model width */
        ga.G_max = 4 * D > 64 ? 4 * D : 64;
        ga.sum = sb_calloc((size_t)L * SB_GATE_KINDS_MAX * ga.G_max * 2, sizeof *ga.sum);
        ga.hist =
            sb_calloc((size_t)L * SB_GATE_KINDS_MAX * 2 * SB_PROBE_HIST_BINS, sizeof *ga.hist);
        if (res->gates == NULL || ga.sum == NULL || ga.hist == NULL) {
            st = sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the gates");
            goto done;
        }
    }
    if ((opt->sections & (SB_PROBE_READOUT | SB_PROBE_GATES)) &&
        (st = score_test(&c, want_gates, &ga, err)) != SB_OK)
        goto done;
    if (want_gates && (st = gate_finish(res, &ga, err)) != SB_OK)
        goto done;
    if ((opt->sections & SB_PROBE_RETENTION) && long_task != NULL)
        st = retention(long_task, m, opt, res, &c.g, c.cap_tensors, err);
done:
    sb_free(c.index);
    sb_free(c.cap_tensors);
    sb_free(c.fitted);
    sb_free(c.W);
    sb_free(ga.sum);
    sb_free(ga.hist);
    sb_graph_free(&c.g);
    sb_batch_free(&c.batch);
    return st;
}

/* ---- output ---------------------------------------------------------------------------------- */

static void json_num(sb_json *j, double v)
{
    if (isfinite(v))
        sb_json_double(j, v);
    else
        sb_json_null(j);
}

static void json_array(sb_json *j, const double *v, int n)
{
    sb_json_array_begin(j);
    for (int i = 0; i < n; i++)
        json_num(j, v[i]);
    sb_json_array_end(j);
}

static void depth_name(const sb_probe_result *res, int d, char *buf, size_t size)
{
    if (d == 0)
        snprintf(buf, size, "embedding");
    else
        snprintf(buf, size, "block %d", d);
    (void)res;
}

/* "readout": the readouts' accuracy by depth and lag (null when not probed). */
static void write_readout_json(const sb_probe_result *res, sb_json *j)
{
    sb_json_key(j, "readout");
    if (!(res->sections & SB_PROBE_READOUT)) {
        sb_json_null(j);
    } else {
        sb_json_object_begin(j);
        sb_json_key(j, "feature_frame");
        sb_json_string(j, res->frame == SB_PROBE_FRAME_LAST ? "last" : "symbol");
        sb_json_key(j, "method");
        sb_json_string(j, res->readout == SB_PROBE_LDA ? "lda" : "ridge");
        sb_json_key(j, "ridge");
        sb_json_double(j, res->ridge);
        sb_json_key(j, "train_samples");
        sb_json_int(j, res->train_samples);
        sb_json_key(j, "train_elements");
        sb_json_int(j, res->train_elements);
        sb_json_key(j, "lags");
        sb_json_array_begin(j);
        for (int k = 0; k < SB_PROBE_N_LAGS; k++)
            sb_json_int(j, sb_probe_lags[k]);
        sb_json_array_end(j);
        sb_json_key(j, "depths");
        sb_json_array_begin(j);
        for (int d = 0; d <= res->L; d++) {
            char name[32];
            depth_name(res, d, name, sizeof name);
            sb_json_object_begin(j);
            sb_json_key(j, "name");
            sb_json_string(j, name);
            sb_json_key(j, "acc");
            json_array(j, res->readout_acc + (size_t)d * SB_PROBE_N_LAGS, SB_PROBE_N_LAGS);
            sb_json_key(j, "n_test");
            sb_json_array_begin(j);
            for (int k = 0; k < SB_PROBE_N_LAGS; k++)
                sb_json_int(j, res->readout_n[(size_t)d * SB_PROBE_N_LAGS + k]);
            sb_json_array_end(j);
            sb_json_object_end(j);
        }
        sb_json_array_end(j);
        sb_json_object_end(j);
    }
}

/* "gates": each layer's gate statistics on symbol and gap frames (null without gates, then
 * "gates_reason"). */
static void write_gates_json(const sb_probe_result *res, sb_json *j)
{
    sb_json_key(j, "gates");
    if (res->gates == NULL) {
        sb_json_null(j);
    } else {
        sb_json_object_begin(j);
        sb_json_key(j, "selectivity");
        sb_json_string(j, "mean on gap frames - mean on symbol frames");
        sb_json_key(j, "symbol_frames");
        sb_json_int(j, res->gate_symbol_frames);
        sb_json_key(j, "gap_frames");
        sb_json_int(j, res->gate_gap_frames);
        sb_json_key(j, "layers");
        sb_json_array_begin(j);
        for (int l = 0; l < res->L; l++) {
            const sb_probe_gate_layer *gl = &res->gates[l];
            sb_json_object_begin(j);
            sb_json_key(j, "layer");
            sb_json_int(j, l + 1);
            sb_json_key(j, "groups");
            sb_json_int(j, gl->n_groups);
            sb_json_key(j, "kinds");
            sb_json_array_begin(j);
            for (int q = 0; q < gl->n_kinds; q++) {
                const sb_probe_gate_kind *k = &gl->kind[q];
                sb_json_object_begin(j);
                sb_json_key(j, "name");
                sb_json_string(j, k->name);
                sb_json_key(j, "range");
                sb_json_array_begin(j);
                sb_json_double(j, 0.0);
                sb_json_double(j, k->hi);
                sb_json_array_end(j);
                sb_json_key(j, "gap_selectivity");
                json_num(j, k->layer_selectivity);
                sb_json_key(j, "mean_symbol");
                json_array(j, k->mean_symbol, gl->n_groups);
                sb_json_key(j, "mean_gap");
                json_array(j, k->mean_gap, gl->n_groups);
                sb_json_key(j, "selectivity");
                json_array(j, k->selectivity, gl->n_groups);
                sb_json_key(j, "hist_symbol");
                json_array(j, k->hist_symbol, SB_PROBE_HIST_BINS);
                sb_json_key(j, "hist_gap");
                json_array(j, k->hist_gap, SB_PROBE_HIST_BINS);
                sb_json_object_end(j);
            }
            sb_json_array_end(j);
            sb_json_object_end(j);
        }
        sb_json_array_end(j);
        sb_json_object_end(j);
    }
    if (res->gates == NULL) {
        sb_json_key(j, "gates_reason");
        sb_json_string(j, res->gates_reason);
    }
}

/* "retention": the output and state norms along a long gap, by layer (null when not probed,
 * then "retention_reason" when there is one). */
static void write_retention_json(const sb_probe_result *res, sb_json *j)
{
    sb_json_key(j, "retention");
    if (res->output_norm == NULL) {
        sb_json_null(j);
    } else {
        sb_json_object_begin(j);
        sb_json_key(j, "gap_frames");
        sb_json_int(j, res->gap_frames);
        sb_json_key(j, "samples");
        sb_json_int(j, res->retention_samples);
        sb_json_key(j, "from_element");
        sb_json_int(j, res->retention_element);
        sb_json_key(j, "layers");
        sb_json_array_begin(j);
        const int n = res->gap_frames + 1;
        for (int l = 0; l < res->L; l++) {
            const double *on = res->output_norm + (size_t)l * n;
            sb_json_object_begin(j);
            sb_json_key(j, "layer");
            sb_json_int(j, l + 1);
            sb_json_key(j, "output_retention");
            json_num(j, on[0] > 0 ? on[n - 1] / on[0] : (double)NAN);
            sb_json_key(j, "state_retention");
            if (res->state_norm != NULL) {
                const double *sn = res->state_norm + (size_t)l * n;
                json_num(j, sn[0] > 0 ? sn[n - 1] / sn[0] : (double)NAN);
            } else {
                sb_json_null(j);
            }
            sb_json_key(j, "output_norm");
            json_array(j, on, n);
            sb_json_key(j, "state_norm");
            if (res->state_norm != NULL)
                json_array(j, res->state_norm + (size_t)l * n, n);
            else
                sb_json_null(j);
            sb_json_object_end(j);
        }
        sb_json_array_end(j);
        sb_json_object_end(j);
    }
    if (res->retention_reason[0] != '\0') {
        sb_json_key(j, "retention_reason");
        sb_json_string(j, res->retention_reason);
    }
}

void sb_probe_write_json(const sb_probe_result *res, const char *checkpoint, sb_json *j)
{
    sb_json_object_begin(j);
    if (checkpoint != NULL) {
        sb_json_key(j, "checkpoint");
        sb_json_string(j, checkpoint);
    }
    sb_json_key(j, "model");
    sb_json_string(j, res->model);
    sb_json_key(j, "layers");
    sb_json_int(j, res->L);
    sb_json_key(j, "d_model");
    sb_json_int(j, res->D);
    sb_json_key(j, "classes");
    sb_json_int(j, res->C);
    sb_json_key(j, "inputs");
    sb_json_int(j, res->V);
    sb_json_key(j, "test_samples");
    sb_json_int(j, res->test_samples);
    sb_json_key(j, "test_elements");
    sb_json_int(j, res->test_elements);
    sb_json_key(j, "model_test_acc");
    json_num(j, res->model_test_acc);

    write_readout_json(res, j);
    write_gates_json(res, j);
    write_retention_json(res, j);
    sb_json_object_end(j);
}

#define MAX_SERIES 64

/* DIR/readout: the readouts' accuracy against the lag, one line per depth. */
static sb_status write_readout_figure(const sb_probe_result *res, const char *dir, sb_error *err)
{
    char path[4096], subtitle[256];
    char labels[MAX_SERIES][48];
    sb_plot_series series[MAX_SERIES];
    const int L = res->L;
    double x[SB_PROBE_N_LAGS];
    for (int k = 0; k < SB_PROBE_N_LAGS; k++)
        x[k] = sb_probe_lags[k];
    int ns = 0;
    for (int d = 0; d <= L && ns < MAX_SERIES; d++, ns++) {
        depth_name(res, d, labels[ns], sizeof labels[ns]);
        series[ns] = (sb_plot_series){.label = labels[ns],
                                      .n = SB_PROBE_N_LAGS,
                                      .x = x,
                                      .y = res->readout_acc + (size_t)d * SB_PROBE_N_LAGS};
    }
    snprintf(subtitle, sizeof subtitle,
             "%s: %s readout of the state id j elements back (model test acc %.3f)", res->model,
             res->readout == SB_PROBE_LDA ? "LDA" : "ridge", res->model_test_acc);
    sb_plot p = {.title = "Linear decodability by depth",
                 .subtitle = subtitle,
                 .xlabel = "elements back (j)",
                 .ylabel = "test accuracy",
                 .ymin = 0.0,
                 .ymax = 1.0,
                 .n_series = ns,
                 .series = series};
    snprintf(path, sizeof path, "%s/readout", dir);
    return sb_plot_write(&p, path, err);
}

/* DIR/gates: the mean gate over heads on symbol and gap frames against the layer, +- its std
 * over heads (no figure when no layer has a gate kind). */
static sb_status write_gates_figure(const sb_probe_result *res, const char *dir, sb_error *err)
{
    char path[4096], subtitle[256];
    char labels[MAX_SERIES][48];
    sb_plot_series series[MAX_SERIES];
    const int L = res->L;
    double xs[256], ys[2 * SB_GATE_KINDS_MAX][256], es[2 * SB_GATE_KINDS_MAX][256];
    const int nl = L < 256 ? L : 256;
    int ns = 0;
    for (int q = 0; q < SB_GATE_KINDS_MAX; q++)
        for (int kind = 0; kind < 2; kind++) {
            const char *name = NULL;
            for (int l = 0; l < nl; l++) {
                const sb_probe_gate_layer *gl = &res->gates[l];
                xs[l] = l + 1;
                ys[ns][l] = (double)NAN;
                es[ns][l] = 0.0;
                if (q >= gl->n_kinds)
                    continue;
                name = gl->kind[q].name;
                const double *v = kind == 0 ? gl->kind[q].mean_symbol : gl->kind[q].mean_gap;
                double s = 0.0, s2 = 0.0;
                for (int h = 0; h < gl->n_groups; h++)
                    s += v[h];
                s /= gl->n_groups;
                for (int h = 0; h < gl->n_groups; h++)
                    s2 += (v[h] - s) * (v[h] - s);
                ys[ns][l] = s;
                es[ns][l] = sqrt(s2 / gl->n_groups);
            }
            if (name == NULL)
                continue;
            snprintf(labels[ns], sizeof labels[ns], "%.30s, %s", name,
                     kind == 0 ? "symbol" : "gap");
            series[ns] =
                (sb_plot_series){.label = labels[ns], .n = nl, .x = xs, .y = ys[ns], .err = es[ns]};
            ns++;
        }
    snprintf(subtitle, sizeof subtitle,
             "%s: mean gate over heads (+- std over heads) on symbol vs gap frames", res->model);
    sb_plot p = {.title = "Gates on symbol and gap frames",
                 .subtitle = subtitle,
                 .xlabel = "layer",
                 .xinteger = 1,
                 .ylabel = "gate value",
                 .ymin = (double)NAN,
                 .ymax = (double)NAN,
                 .n_series = ns,
                 .series = series};
    snprintf(path, sizeof path, "%s/gates", dir);
    return ns > 0 ? sb_plot_write(&p, path, err) : SB_OK;
}

/* DIR/retention: the state and output norms relative to the symbol frame, against the
 * frames into the gap. */
static sb_status write_retention_figure(const sb_probe_result *res, const char *dir, sb_error *err)
{
    char path[4096], subtitle[256];
    char labels[MAX_SERIES][48];
    sb_plot_series series[MAX_SERIES];
    const int L = res->L;
    const int n = res->gap_frames + 1;
    double *x = sb_malloc((size_t)n * sizeof *x), *y = sb_malloc((size_t)2 * L * n * sizeof *y);
    if (x == NULL || y == NULL) {
        sb_free(x);
        sb_free(y);
        return sb_error_set(err, SB_ERR_NOMEM, "probe: out of memory for the figures");
    }
    int ns = 0;
    for (int t = 0; t < n; t++)
        x[t] = t;
    for (int l = 0; l < L && ns + 2 <= MAX_SERIES; l++)
        for (int src = 0; src < 2; src++) {
            const double *v = src == 0 ? res->state_norm : res->output_norm;
            if (v == NULL)
                continue;
            v += (size_t)l * n;
            double *yy = y + (size_t)ns * n;
            for (int t = 0; t < n; t++)
                yy[t] = v[0] > 0 ? v[t] / v[0] : (double)NAN;
            snprintf(labels[ns], sizeof labels[ns], "layer %d %s", l + 1,
                     src == 0 ? "state" : "output");
            series[ns] = (sb_plot_series){.label = labels[ns], .n = n, .x = x, .y = yy};
            ns++;
        }
    snprintf(subtitle, sizeof subtitle,
             "%s: norm / norm at the symbol frame along a gap of %d frames (%d samples)",
             res->model, res->gap_frames, res->retention_samples);
    sb_plot p = {.title = "State retention along a long gap",
                 .subtitle = subtitle,
                 .xlabel = "frames after the symbol",
                 .ylabel = "relative norm",
                 .ymin = (double)NAN,
                 .ymax = (double)NAN,
                 .n_series = ns,
                 .series = series};
    snprintf(path, sizeof path, "%s/retention", dir);
    sb_status st = sb_plot_write(&p, path, err);
    sb_free(x);
    sb_free(y);
    return st;
}

sb_status sb_probe_write_figures(const sb_probe_result *res, const char *dir, sb_error *err)
{
    sb_status st = SB_OK;
    if (res->sections & SB_PROBE_READOUT)
        st = write_readout_figure(res, dir, err);
    if (st == SB_OK && res->gates != NULL)
        st = write_gates_figure(res, dir, err);
    if (st == SB_OK && res->output_norm != NULL)
        st = write_retention_figure(res, dir, err);
    return st;
}

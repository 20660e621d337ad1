/* trainer.c - the training loop and the evaluation of the reference (see trainer.h). */
#include "train/trainer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/safetensors.h"
#include "core/timer.h"
#include "ops/ops.h"
#include "task/batch.h"
#include "tensor/optim.h"
#include "train/checkpoint.h"
#include "train/grad_shards.h"

#include "tensor/fastmath.h"
#include "tensor/gemm_engine.h"
#include "train/run_setup.h"

#define DECODE_CHUNK 1024     /* frames decoded at once in evaluation */
#define SB_MAX_WORLD_POLL 256 /* processes whose stop flags fit on the stack */

/* ---- memory estimates (sb_train_step_bytes: train/run_setup.c) ------------------------ */

/* Longest sample of a split, in frames. */
static int split_max_frames(const sb_task *task, sb_split split)
{
    const sb_task_config *c = &task->cfg;
    double delay = split != SB_SPLIT_TRAIN ? sb_task_test_duration(task) : c->train_gap_max;
    if (split == SB_SPLIT_TRAIN && c->dist_dur == SB_GAP_DIST_LOGNORMAL)
        delay = exp(c->train_gap_min + 3.0 * c->train_gap_max); /* +3 sigma */
    int gap = (int)ceil(delay / SB_TIMESTEP) + 1;
    return task->n_elements[split] * (1 + gap);
}

int sb_train_grad_acc(const sb_run_config *cfg, const sb_task *task, double mem_budget_gb)
{
    /* train.py forces 16 micro-batches for long gaps on wide models */
    if (cfg->task.protocol == SB_PROTOCOL_REFERENCE && cfg->task.train_gap_max >= 1.0 &&
        cfg->feat_size > 648)
        return 16;
    if (cfg->grad_acc > 0)
        return cfg->grad_acc;
    if (cfg->grad_acc == 0)
        return 1;
    /* -1: the smallest power of two whose micro-batch fits the budget, keeping more than
     * 2 samples per micro-batch as train.py requires */
    sb_model_config mc = sb_run_config_model(cfg, task->n_inputs, task->grammar->d_output);
    int frames = split_max_frames(task, SB_SPLIT_TRAIN);
    int acc = 1;
    while (cfg->batch_size / (2 * acc) > 2 &&
           sb_train_step_bytes(&mc, cfg->batch_size / acc, frames) > mem_budget_gb * 1073741824.0)
        acc *= 2;
    return acc;
}

/* ---- batches as model input ------------------------------------------------------------- */

/* The batch's frames as a [B, T, V] tensor (a view in the float build, a copy in double). */
static sb_tensor *batch_input(sb_graph *g, const sb_batch *b)
{
    int shape[3] = {b->B, b->T, b->V};
#ifdef SB_REAL_DOUBLE
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)b->data[i];
    return x;
#else
    return sb_tensor_wrap(g, b->data, 3, shape);
#endif
}

/* ---- one training micro-step --------------------------------------------------------------- */

typedef struct step_args {
    const sb_model *m;
    const sb_batch *batch;
    real loss_scale;
    int want_acc;
    int64_t mean_over; /* valid frames the loss is averaged over; 0: the batch's own */
    double loss;
    double loss_sum; /* the loss summed over the batch's valid frames */
    int64_t correct, counted;
} step_args;

static void train_micro_step(sb_graph *g, void *arg)
{
    step_args *a = arg;
    const sb_batch *b = a->batch;
    sb_head_loss h = {.target = b->target,
                      .valid = b->valid,
                      .loss_scale = a->loss_scale,
                      .mean_over = a->mean_over};
    if (a->want_acc) {
        h.elem_start = b->elem_start, h.elem_len = b->elem_len;
        h.B = b->B, h.T = b->T, h.E = b->E;
    }
    sb_tensor *loss = sb_model_loss(g, a->m, batch_input(g, b), &h);
    a->loss = (double)loss->data[0];
    a->loss_sum = h.loss_sum;
    a->correct = h.correct, a->counted = h.counted;
    if (!isfinite(a->loss))
        return; /* diverged: no backward */
    sb_tensor_grad(g, loss)[0] = 1;
    sb_graph_backward(g);
}

real sb_train_loss_scale(sb_protocol protocol, int acc_steps)
{
    return protocol == SB_PROTOCOL_CLEAN ? (real)(1.0 / acc_steps) : 1;
}

sb_status sb_train_micro_batch(sb_graph *g, const sb_model *m, const sb_batch *b, real loss_scale,
                               double *loss, sb_error *err)
{
    sb_graph_reset(g);
    g->record = 1;
    step_args sa = {.m = m, .batch = b, .loss_scale = loss_scale};
    sb_status st = sb_graph_run(g, train_micro_step, &sa, err);
    *loss = sa.loss;
    return st;
}

sb_status sb_train_shard_batch(sb_graph *g, const sb_model *m, const sb_batch *b, real loss_scale,
                               int64_t mean_over, double *loss_sum, sb_error *err)
{
    sb_graph_reset(g);
    g->record = 1;
    step_args sa = {.m = m, .batch = b, .loss_scale = loss_scale, .mean_over = mean_over};
    sb_status st = sb_graph_run(g, train_micro_step, &sa, err);
    *loss_sum = sa.loss_sum;
    return st;
}

/* ---- evaluation ------------------------------------------------------------------------------ */

#define STREAM_CHUNK 512 /* frames per streaming step of recurrent layers */

/* The decoder's running state for one sample: the element whose window is open and the
 * probabilities summed over it so far. */
typedef struct decoder_state {
    int e;       /* current element */
    real *acc;   /* [C] */
    double loss; /* cross-entropy summed over the frames decoded */
    int64_t correct, counted;
} decoder_state;

static void decoder_begin(decoder_state *ds, real *acc, int C, const int32_t *elem_len, int E)
{
    ds->e = 0;
    while (ds->e < E && elem_len[ds->e] <= 0)
        ds->e++;
    ds->acc = acc;
    for (int c = 0; c < C; c++)
        acc[c] = 0;
    ds->loss = 0.0;
    ds->correct = ds->counted = 0;
}

/* Decoder, softmax, loss and windowed accuracy for frames [t0, t0 + rows) of one sample,
 * given their hidden states (rows x D, consecutive) and targets (rows, target[r] of frame
 * t0 + r). logits: scratch of rows x C. */
static void decode_frames(const sb_model *m, const real *hidden, int t0, int rows,
                          const int32_t *target, const int32_t *elem_start, const int32_t *elem_len,
                          int E, real *logits, decoder_state *ds)
{
    const int D = m->cfg.d_model, C = m->cfg.d_output;
    for (int r = 0; r < rows; r++)
        memcpy(logits + (size_t)r * (size_t)C, m->dec_b->data, (size_t)C * sizeof(real));
    const int bf16_was_suspended = sb_model_precision_enter(m);
    sb_gemm(0, 1, rows, C, D, 1, hidden, D, m->dec_w->data, D, 1, logits, C);
    sb_gemm_bf16_suspend(bf16_was_suspended);
    real *acc = ds->acc;
    for (int r = 0; r < rows; r++) {
        int t = t0 + r;
        real *x = logits + (size_t)r * (size_t)C;
        real mx = sb_vmax(x, C);
        real target_logit = x[target[r]];
        double sum = (double)sb_vexp_shift(x, C, mx);
        double p_target = (double)x[target[r]] / sum;
        /* a target more than 87 nats below the best class has exp() = 0 in float: its loss
         * is then taken from the logits (log-softmax), finite as torch's, not -log(0) */
        ds->loss += p_target > 0 ? -log(p_target) : (double)(mx - target_logit) + log(sum);
        real inv = (real)(1.0 / sum);
        int e = ds->e;
        if (e < E && t >= elem_start[e]) {
            for (int j = 0; j < C; j++)
                acc[j] += x[j] * inv;
            if (t == elem_start[e] + elem_len[e] - 1) {
                int best = 0;
                for (int j = 1; j < C; j++)
                    if (acc[j] > acc[best])
                        best = j;
                /* the target is constant over the window: its last frame's is the element's */
                ds->correct += best == target[r];
                ds->counted++;
                for (int j = 0; j < C; j++)
                    acc[j] = 0;
                e++;
                while (e < E && elem_len[e] <= 0)
                    e++;
                ds->e = e;
            }
        }
    }
}

typedef struct eval_args {
    const sb_model *m;
    const sb_batch *batch;
    sb_tensor *hidden;
    /* streaming */
    int rows;
    real *const *states;
    const float *chunk; /* [B, rows, V] the chunk's input frames */
} eval_args;

static void eval_forward(sb_graph *g, void *arg)
{
    eval_args *a = arg;
    a->hidden = sb_model_hidden(g, a->m, batch_input(g, a->batch), 1);
}

static void eval_forward_chunk(sb_graph *g, void *arg)
{
    eval_args *a = arg;
    const sb_batch *b = a->batch;
    int shape[3] = {b->B, a->rows, b->V};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)a->chunk[i];
    a->hidden = sb_model_hidden_stream(g, a->m, x, a->states);
}

/* What one evaluation holds besides the graph: the batch, the decoders' state, the
 * streaming buffers. Sizes in the comments: sub samples, C classes, L layers, S the
 * state floats of a sample's layer, Tc = STREAM_CHUNK, V inputs. */
typedef struct eval_buffers {
    sb_batch batch;
    real *logits;          /* [DECODE_CHUNK][C] */
    real *acc;             /* [sub][C] each decoder's summed probabilities */
    decoder_state *ds;     /* [sub] */
    int64_t *index;        /* [sub] */
    sb_split split;        /* the split evaluated: test or validation */
    real *state_buf;       /* [L][sub][S] streaming only */
    size_t state_bytes;    /* of state_buf */
    real **states;         /* [L] into state_buf */
    float *chunk_data;     /* [sub][Tc][V] streaming only */
    int32_t *chunk_target; /* [sub][Tc] streaming only */
} eval_buffers;

static void eval_buffers_free(eval_buffers *eb)
{
    sb_free(eb->logits);
    sb_free(eb->acc);
    sb_free(eb->ds);
    sb_free(eb->index);
    sb_free(eb->state_buf);
    sb_free(eb->states);
    sb_free(eb->chunk_data);
    sb_free(eb->chunk_target);
    sb_batch_free(&eb->batch);
}

static sb_status eval_buffers_init(eval_buffers *eb, const sb_task *task, const sb_model *m,
                                   int sub, int stream, sb_error *err)
{
    memset(eb, 0, sizeof *eb);
    sb_status st = sb_batch_init(&eb->batch, task, sub, err);
    if (st != SB_OK)
        return st;
    const size_t C = (size_t)m->cfg.d_output, L = (size_t)m->cfg.n_layers;
    const size_t state_floats = stream ? m->type->stream_state_floats(&m->cfg) : 0;
    const size_t chunk_frames = (size_t)sub * STREAM_CHUNK;
    eb->logits = sb_malloc((size_t)DECODE_CHUNK * C * sizeof *eb->logits);
    eb->acc = sb_malloc((size_t)sub * C * sizeof *eb->acc);
    eb->ds = sb_malloc((size_t)sub * sizeof *eb->ds);
    eb->index = sb_malloc((size_t)sub * sizeof *eb->index);
    int ok = eb->logits && eb->acc && eb->ds && eb->index;
    if (stream) {
        eb->state_bytes = L * (size_t)sub * state_floats * sizeof(real);
        eb->state_buf = sb_malloc(eb->state_bytes);
        eb->states = sb_malloc(L * sizeof *eb->states);
        ok = ok && eb->state_buf && eb->states;
        for (size_t l = 0; ok && l < L; l++)
            eb->states[l] = eb->state_buf + l * (size_t)sub * state_floats;
        eb->chunk_data = sb_malloc(chunk_frames * (size_t)task->n_inputs * sizeof(float));
        eb->chunk_target = sb_malloc(chunk_frames * sizeof *eb->chunk_target);
        ok = ok && eb->chunk_data && eb->chunk_target;
    }
    if (!ok) {
        eval_buffers_free(eb);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the evaluation");
    }
    return SB_OK;
}

/* The whole-sequence forward of a filled batch, decoded in chunks of frames. */
static sb_status eval_whole(sb_graph *g, const sb_model *m, eval_buffers *eb, sb_error *err)
{
    const sb_batch *batch = &eb->batch;
    const int T = batch->T, E = batch->E, D = m->cfg.d_model;
    sb_graph_reset(g);
    g->record = 0;
    g->training = 0;
    eval_args ea = {.m = m, .batch = batch};
    sb_status st = sb_graph_run(g, eval_forward, &ea, err);
    if (st != SB_OK)
        return st;
    for (int b = 0; b < batch->B; b++)
        for (int t0 = 0; t0 < batch->n_frames[b]; t0 += DECODE_CHUNK) {
            int rows =
                batch->n_frames[b] - t0 < DECODE_CHUNK ? batch->n_frames[b] - t0 : DECODE_CHUNK;
            size_t frame0 = (size_t)b * (size_t)T + (size_t)t0;
            decode_frames(m, ea.hidden->data + frame0 * (size_t)D, t0, rows, batch->target + frame0,
                          batch->elem_start + (size_t)b * (size_t)E,
                          batch->elem_len + (size_t)b * (size_t)E, E, eb->logits, &eb->ds[b]);
        }
    return SB_OK;
}

/* Frames [t0, t0 + rows) of the batch into the chunk buffers: generated (streamed input)
 * or copied from the filled batch (whole input); the same values either way. */
static void eval_chunk_input(const sb_task *task, eval_buffers *eb, int stream_input, int t0,
                             int rows)
{
    const sb_batch *batch = &eb->batch;
    if (stream_input) {
        sb_batch_frames(batch, task, eb->split, t0, rows, 0, eb->chunk_data, eb->chunk_target);
        return;
    }
    const size_t V = (size_t)batch->V;
    for (int b = 0; b < batch->B; b++) {
        size_t from = (size_t)b * (size_t)batch->T + (size_t)t0, to = (size_t)b * (size_t)rows;
        memcpy(eb->chunk_data + to * V, batch->data + from * V, (size_t)rows * V * sizeof(float));
        memcpy(eb->chunk_target + to, batch->target + from, (size_t)rows * sizeof(int32_t));
    }
}

/* The streaming forward of an assembled batch: STREAM_CHUNK frames at a time through every
 * layer (carrying their states), each chunk decoded as it comes. */
static sb_status eval_streamed(sb_graph *g, const sb_task *task, const sb_model *m,
                               eval_buffers *eb, int stream_input, sb_error *err)
{
    const sb_batch *batch = &eb->batch;
    const int T = batch->T, E = batch->E, D = m->cfg.d_model;
    /* every layer's states start at zero (each layer's block holds sub samples' states,
     * of which the first B are used) */
    memset(eb->state_buf, 0, eb->state_bytes);
    for (int t0 = 0; t0 < T; t0 += STREAM_CHUNK) {
        int rows = T - t0 < STREAM_CHUNK ? T - t0 : STREAM_CHUNK;
        eval_chunk_input(task, eb, stream_input, t0, rows);
        sb_graph_reset(g);
        g->record = 0;
        g->training = 0;
        eval_args ea = {
            .m = m, .batch = batch, .rows = rows, .states = eb->states, .chunk = eb->chunk_data};
        sb_status st = sb_graph_run(g, eval_forward_chunk, &ea, err);
        if (st != SB_OK)
            return st;
        for (int b = 0; b < batch->B; b++) {
            /* padding frames past a sample's end are not decoded */
            int valid = batch->n_frames[b] - t0;
            if (valid <= 0)
                continue;
            decode_frames(m, ea.hidden->data + (size_t)b * (size_t)rows * (size_t)D, t0,
                          valid < rows ? valid : rows, eb->chunk_target + (size_t)b * (size_t)rows,
                          batch->elem_start + (size_t)b * (size_t)E,
                          batch->elem_len + (size_t)b * (size_t)E, E, eb->logits, &eb->ds[b]);
        }
    }
    return SB_OK;
}

/* sb_evaluate_mode on a split (test or validation) with the arena's block size (0: the
 * default). */
static sb_status evaluate(const sb_task *task, sb_split split, const sb_model *m, int test_bs,
                          double mem_budget_gb, sb_eval_mode mode, size_t arena_block,
                          double *loss_out, double *acc_out, sb_error *err)
{
    const int64_t n = sb_task_split_size(task, split);
    const int frames = split_max_frames(task, split);
    const int stream = mode != SB_EVAL_WHOLE && sb_model_can_stream(m);
    const int stream_input = stream && mode == SB_EVAL_STREAM;
    const int D = m->cfg.d_model, C = m->cfg.d_output;
    /* memory per sample: one layer's activations (about 30 D floats per frame) over the
     * whole sequence, or over one chunk when streaming */
    double per_sample =
        (double)(stream ? STREAM_CHUNK : frames) * (30.0 * D + m->cfg.d_input) * sizeof(real);
    int sub = (int)(mem_budget_gb * 1073741824.0 / per_sample);
    if (sub < 1)
        sub = 1;
    if (sub > test_bs)
        sub = test_bs;
    eval_buffers eb;
    sb_status st = eval_buffers_init(&eb, task, m, sub, stream, err);
    if (st != SB_OK)
        return st;
    eb.split = split;
    sb_graph g;
    sb_graph_init(&g, arena_block);
    double test_loss = 0.0, test_acc = 0.0;
    for (int64_t first = 0; first < n && st == SB_OK; first += test_bs) {
        int bs = (int)(n - first < test_bs ? n - first : test_bs);
        double batch_loss = 0.0;
        int64_t batch_frames = 0, correct = 0, counted = 0;
        for (int s0 = 0; s0 < bs && st == SB_OK; s0 += sub) {
            int cnt = bs - s0 < sub ? bs - s0 : sub;
            for (int i = 0; i < cnt; i++)
                eb.index[i] = first + s0 + i;
            /* streamed input: only the samples' plan here, the frames chunk by chunk */
            st = stream_input ? sb_batch_assemble(&eb.batch, task, split, eb.index, cnt, 0, err)
                              : sb_batch_fill(&eb.batch, task, split, eb.index, cnt, 0, err);
            if (st != SB_OK)
                break;
            const int E = eb.batch.E;
            for (int b = 0; b < cnt; b++)
                decoder_begin(&eb.ds[b], eb.acc + (size_t)b * (size_t)C, C,
                              eb.batch.elem_len + (size_t)b * (size_t)E, E);
            st = stream ? eval_streamed(&g, task, m, &eb, stream_input, err)
                        : eval_whole(&g, m, &eb, err);
            if (st != SB_OK)
                break;
            for (int b = 0; b < cnt; b++) {
                batch_loss += eb.ds[b].loss;
                correct += eb.ds[b].correct;
                counted += eb.ds[b].counted;
                batch_frames += eb.batch.n_frames[b];
            }
        }
        if (st != SB_OK)
            break;
        /* train.py: test_loss += loss * batch / test_size, with loss the batch mean */
        double w = (double)bs / (double)n;
        test_loss += batch_frames > 0 ? batch_loss / (double)batch_frames * w : 0.0;
        test_acc += counted > 0 ? (double)correct / (double)counted * w : w;
    }
    if (st == SB_OK) {
        *loss_out = test_loss;
        *acc_out = test_acc;
    }
    sb_graph_free(&g);
    eval_buffers_free(&eb);
    return st;
}

sb_status sb_evaluate_mode(const sb_task *task, const sb_model *m, int test_bs,
                           double mem_budget_gb, sb_eval_mode mode, double *loss_out,
                           double *acc_out, sb_error *err)
{
    return evaluate(task, SB_SPLIT_TEST, m, test_bs, mem_budget_gb, mode, 0, loss_out, acc_out,
                    err);
}

sb_status sb_evaluate(const sb_task *task, const sb_model *m, int test_bs, double mem_budget_gb,
                      double *loss_out, double *acc_out, sb_error *err)
{
    return evaluate(task, SB_SPLIT_TEST, m, test_bs, mem_budget_gb, SB_EVAL_STREAM, 0, loss_out,
                    acc_out, err);
}

sb_status sb_evaluate_split(const sb_task *task, sb_split split, const sb_model *m, int test_bs,
                            double mem_budget_gb, double *loss_out, double *acc_out, sb_error *err)
{
    if (split == SB_SPLIT_VALID && sb_task_split_size(task, split) == 0) {
        *loss_out = *acc_out = (double)NAN;
        return SB_OK;
    }
    return evaluate(task, split, m, test_bs, mem_budget_gb, SB_EVAL_STREAM, 0, loss_out, acc_out,
                    err);
}

/* The evaluation of a run: the test split, then the validation split (NaN without one). */
typedef struct split_scores {
    double test_loss, test_acc, valid_loss, valid_acc;
} split_scores;

static sb_status evaluate_run(const sb_task *task, const sb_model *m, int test_bs, double budget,
                              size_t arena_block, split_scores *s, sb_error *err)
{
    s->valid_loss = s->valid_acc = (double)NAN;
    sb_status st = evaluate(task, SB_SPLIT_TEST, m, test_bs, budget, SB_EVAL_STREAM, arena_block,
                            &s->test_loss, &s->test_acc, err);
    if (st == SB_OK && sb_task_split_size(task, SB_SPLIT_VALID) > 0)
        st = evaluate(task, SB_SPLIT_VALID, m, test_bs, budget, SB_EVAL_STREAM, arena_block,
                      &s->valid_loss, &s->valid_acc, err);
    return st;
}

/* ---- the run ------------------------------------------------------------------------------ */

static void emit(const sb_train_options *opt, const sb_train_event *ev)
{
    if (opt->callback != NULL)
        opt->callback(ev, opt->user);
}

static int file_exists(const char *path)
{
    struct stat sbuf;
    return path != NULL && stat(path, &sbuf) == 0;
}

/* The trainer's fields of the outcome as before anything ran (the caller's stay). */
static void outcome_reset(sb_train_outcome *res)
{
    res->status = SB_RUN_NONE;
    res->reason[0] = '\0';
    res->test_acc = res->test_loss = res->train_acc = res->train_loss = (double)NAN;
    res->valid_acc = res->valid_loss = (double)NAN;
    res->params = 0;
    res->steps = res->samples = 0;
    res->grad_acc = 0;
    res->tokens_per_s = res->wall_s = res->gather_s = 0.0;
    res->flops_per_token = (double)NAN;
    res->n_evals = 0;
}

static sb_status run_failed(sb_train_outcome *res, sb_run_status status, sb_status st,
                            const sb_error *err)
{
    res->status = status;
    snprintf(res->reason, sizeof res->reason, "%s", err != NULL ? err->msg : "");
    return st;
}

/* What the steps of one run share: the inputs, what set-up made, the plan, the loop's
 * running state. */
typedef struct train_run {
    const sb_run_config *cfg;
    const sb_train_options *opt;
    sb_train_outcome *res;
    double budget;  /* GiB of activations for a step (grad_acc -1) and for evaluation */
    double t_start; /* when the run began, for elapsed times */

    /* set up: the task, the model, its optimiser (and a checkpoint loaded into them) */
    sb_task *task;
    sb_model *m;
    sb_optimizer optim;
    int s4_schedule;       /* the layer's own optimiser and epoch schedule (S4's) */
    int64_t start_samples; /* samples consumed before this process (resume) */

    /* the plan */
    int acc_steps;              /* micro-batches per update */
    int micro;                  /* samples per micro-batch */
    int64_t n_train;            /* training samples (one pass) */
    int64_t n_micro;            /* micro-batches in the pass */
    int64_t total_updates;      /* updates in the pass */
    int64_t eval_every;         /* updates between evaluations */
    double sched_total, warmup; /* the schedule's horizon and warm-up, in updates */
    real loss_scale;            /* 1 / acc_steps (averaged, clean) or 1 (summed, reference) */
    int64_t first_micro;        /* the first micro-batch of this process (resume) */
    int64_t patience;           /* early stopping: updates without a better loss */

    /* buffers of the loop */
    sb_batch batch;
    sb_graph g;
    int64_t *index; /* [micro] sample indices of a micro-batch */
    int have_batch, have_graph;
    /* --grad_shards K > 1 (or a world of several processes): the shards' buffers */
    sb_grad_shards shards;
    int have_shards;

    /* the loop's state */
    int64_t updates;
    int dropout_on;
    double best_loss;
    int64_t since_best;
    int stop_early;            /* early stopping has fired: evaluate, save and end */
    int stopped;               /* --stop_after or a stop request ended the run; res is filled
                                  (interrupted) */
    int64_t saved_updates;     /* updates done when the checkpoint was last written (-1: never) */
    double saved_at;           /* when it was (sb_time_now), or when the run began */
    double train_time, tokens; /* seconds and frames of training steps (evaluation excluded) */
    double sum_loss, sum_acc;  /* over the updates since the last evaluation */
    int n_since_eval;
    /* over the updates since the curve's last point (either kind of evaluation): each
     * point's training row */
    double pt_loss, pt_acc;
    int n_since_point;
    double last_lr;
    double first_loss; /* the loss of this process's first update (NaN before): the anchor of
                        * the divergence rule */
} train_run;

/* The task, the model and its optimiser; the checkpoint loaded for --test_pretrained
 * (weights) or --resume (weights, optimiser state and the samples consumed). */
static sb_status train_setup(train_run *r, sb_error *err)
{
    const sb_run_config *cfg = r->cfg;
    const sb_train_options *opt = r->opt;
    sb_status st;
    if ((st = sb_task_create(&cfg->task, &r->task, err)) != SB_OK)
        return st;
    sb_model_config mc = sb_run_config_model(cfg, r->task->n_inputs, r->task->grammar->d_output);
    if ((st = sb_model_create(&mc, cfg->seed, &r->m, err)) != SB_OK)
        return st;
    r->res->params = r->m->params.count;
    r->res->flops_per_token = sb_model_flops_per_token(r->m, r->task->n_elements[SB_SPLIT_TRAIN]);

    /* train.py gives some layers their own optimiser and schedule (the layer type's
     * init_optimizer: S4's setup_optimizer, AdamW with a second group for the kernel
     * parameters, and CosineAnnealingLR over epochs) */
    r->s4_schedule = r->m->type->init_optimizer != NULL;
    if (r->s4_schedule)
        r->m->type->init_optimizer(&r->optim, cfg->lr);
    else
        sb_optimizer_init(&r->optim, cfg->optimizer, cfg->lr, cfg->wd);
    r->start_samples = 0;
    if (!cfg->test_pretrained && !opt->resume)
        return SB_OK;
    if (!file_exists(opt->ckpt_path))
        return sb_error_set(err, SB_ERR_IO,
                            "no checkpoint at '%s': the training run of this configuration has "
                            "not saved one (train it first, with the same flags)",
                            opt->ckpt_path != NULL ? opt->ckpt_path : "(none)");
    return sb_checkpoint_load(opt->ckpt_path, r->m, cfg->test_pretrained ? NULL : &r->optim,
                              &r->start_samples, err);
}

/* --test_pretrained: one evaluation of the loaded weights, no training. */
static sb_status train_test_pretrained(train_run *r, sb_error *err)
{
    sb_train_outcome *res = r->res;
    split_scores s;
    sb_status st =
        evaluate_run(r->task, r->m, r->cfg->test_bs, r->budget, r->opt->arena_block_bytes, &s, err);
    if (st != SB_OK)
        return st;
    res->test_loss = s.test_loss;
    res->test_acc = s.test_acc;
    res->valid_loss = s.valid_loss;
    res->valid_acc = s.valid_acc;
    res->n_evals = 1;
    res->wall_s = sb_time_now() - r->t_start;
    res->status = SB_RUN_FINISHED;
    sb_train_event ev = {.kind = SB_EVENT_EVAL,
                         .test_loss = s.test_loss,
                         .test_acc = s.test_acc,
                         .valid_loss = s.valid_loss,
                         .valid_acc = s.valid_acc,
                         .loss = (double)NAN,
                         .acc = (double)NAN,
                         .params = res->params,
                         .elapsed_s = res->wall_s};
    emit(r->opt, &ev);
    return SB_OK;
}

/* The plan: micro-batches and updates of one pass over the training set, the schedule,
 * the evaluation cadence, the loss scale, and where a resumed run picks up. */
static void train_plan(train_run *r)
{
    const sb_run_config *cfg = r->cfg;
    r->acc_steps = sb_train_grad_acc(cfg, r->task, r->budget);
    r->micro = cfg->batch_size / r->acc_steps;
    r->res->grad_acc = r->acc_steps;
    r->n_train = cfg->task.dataset_size;
    r->n_micro = (r->n_train + r->micro - 1) / r->micro;
    r->total_updates = r->n_micro / r->acc_steps;
    r->sched_total = sb_run_config_total_updates(cfg);
    r->warmup = sb_run_config_warmup(cfg);
    r->eval_every = cfg->epoch_size / ((int64_t)r->micro * r->acc_steps);
    if (r->eval_every < 1)
        r->eval_every = 1;
    /* the clean protocol averages the micro-batches' gradients; the reference sums them */
    r->loss_scale = sb_train_loss_scale(cfg->task.protocol, r->acc_steps);

    /* resume: skip what was consumed; dropout is already off after the first evaluation */
    r->first_micro = r->start_samples / r->micro;
    r->updates = r->first_micro / r->acc_steps;
    r->dropout_on = cfg->task.protocol == SB_PROTOCOL_CLEAN || r->updates < r->eval_every;

    /* train.py's early stopping: on the loss of each update, patience 10% of the updates */
    r->best_loss = HUGE_VAL;
    r->patience = cfg->patience >= 0 ? cfg->patience : (int64_t)(r->sched_total * 0.1);
}

/* The loop's batch, graph (arena, dropout seed) and index buffer. */
static sb_status train_buffers_init(train_run *r, sb_error *err)
{
    sb_status st = sb_batch_init(&r->batch, r->task, r->micro, err);
    if (st != SB_OK)
        return st;
    r->have_batch = 1;
    sb_graph_init(&r->g, r->opt->arena_block_bytes);
    r->have_graph = 1;
    r->g.record = 1;
    r->g.dropout_seed = r->cfg->seed * 0x9e3779b97f4a7c15ull + 0x5eedu;
    r->index = sb_malloc((size_t)r->micro * sizeof *r->index);
    if (r->index == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    const sb_train_options *opt = r->opt;
    const int K = r->cfg->grad_shards, world = opt->world_size > 1 ? opt->world_size : 1;
    if (K <= 1 && world == 1)
        return SB_OK; /* the whole micro-batch at once */
    if (K > r->micro)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_shards %d is more than the %d samples of a micro-batch "
                            "(--batch_size %d in %d micro-batches): every shard needs a sample",
                            K, r->micro, r->cfg->batch_size, r->acc_steps);
    st = sb_grad_shards_init(&r->shards, K, opt->world_rank, world, r->m->params.total,
                             opt->all_gather, opt->all_to_all, opt->world_user, err);
    if (st != SB_OK)
        return st;
    r->have_shards = 1;
    return SB_OK;
}

/* ---- divergence (docs/training.md) --------------------------------------------------------- */

double sb_train_loss_limit(double first_loss, int n_classes)
{
    double chance = log(n_classes > 1 ? (double)n_classes : 2.0);
    return SB_DIVERGENCE_FACTOR * (first_loss > chance ? first_loss : chance);
}

/* The run's progress when it diverges at micro-batch sample `sample`. */
static void train_diverged_at(train_run *r, int64_t sample)
{
    r->res->steps = r->updates;
    r->res->samples = sample;
}

/* The rule on the mean training loss of an evaluation window, before that evaluation. */
static sb_status train_check_window_loss(train_run *r, int64_t samples, sb_error *err)
{
    double window_loss = r->sum_loss / r->n_since_eval;
    double limit = sb_train_loss_limit(r->first_loss, r->m->cfg.d_output);
    if (window_loss <= limit)
        return SB_OK;
    train_diverged_at(r, samples);
    r->res->train_loss = window_loss;
    r->res->train_acc = r->sum_acc / r->n_since_eval;
    return sb_error_set(err, SB_ERR_DIVERGED,
                        "the training loss rose to %.6g (mean of updates %lld-%lld), above the "
                        "limit %.4g (%g x the larger of the first update's loss %.4g and "
                        "ln %d classes): the run diverged at update %lld (sample %lld); try a "
                        "lower --lr",
                        window_loss, (long long)(r->updates - r->n_since_eval + 1),
                        (long long)r->updates, limit, SB_DIVERGENCE_FACTOR, r->first_loss,
                        r->m->cfg.d_output, (long long)r->updates, (long long)samples);
}

/* One optimiser update from the accumulated gradients: clip, the learning rate of the
 * schedule, the step; then the running training averages. A gradient norm that is NaN or
 * infinite ends the run (diverged) before the step, so the weights stay finite.
 * sample: the first sample of the update's last micro-batch. */
static sb_status train_update(train_run *r, const step_args *sa, int64_t sample, sb_error *err)
{
    const sb_run_config *cfg = r->cfg;
    sb_params *params = &r->m->params;
    double grad_norm = sb_clip_grad_norm(params, 1.0);
    if (!isfinite(grad_norm)) {
        train_diverged_at(r, sample);
        return sb_error_set(err, SB_ERR_DIVERGED,
                            "the gradient norm became %s at update %lld (sample %lld), with a "
                            "training loss of %.6g: the run diverged; try a lower --lr",
                            isnan(grad_norm) ? "NaN" : "infinite", (long long)r->updates,
                            (long long)sample, sa->loss);
    }
    if (r->s4_schedule) {
        /* T_max = dataset_size // EPOCH_SIZE; one scheduler step after every periodic
         * evaluation, none within an epoch, no warm-up */
        const int64_t epoch = r->updates / r->eval_every, t_max = r->n_train / cfg->epoch_size;
        r->last_lr = sb_cosine_annealing_lr(r->optim.lr, epoch, t_max);
        sb_optimizer_step_lr(&r->optim, params, r->last_lr,
                             sb_cosine_annealing_lr(r->optim.group2_lr, epoch, t_max));
    } else {
        double factor =
            sb_schedule_factor(cfg->scheduler, (double)r->updates, r->warmup, r->sched_total);
        r->last_lr = cfg->lr * factor;
        sb_optimizer_step(&r->optim, params, factor);
    }
    sb_params_zero_grad(params);
    r->updates++;
    if (isnan(r->first_loss))
        r->first_loss = sa->loss;
    r->sum_loss += sa->loss;
    double acc = sa->counted > 0 ? (double)sa->correct / (double)sa->counted : 0.0;
    r->sum_acc += acc;
    r->n_since_eval++;
    r->pt_loss += sa->loss;
    r->pt_acc += acc;
    r->n_since_point++;
    return SB_OK;
}

/* The progress event of an update; samples: consumed so far. */
static void train_report_progress(const train_run *r, const step_args *sa, int64_t samples)
{
    sb_train_event ev = {.kind = SB_EVENT_PROGRESS,
                         .step = r->updates,
                         .total_steps = r->total_updates,
                         .samples = samples,
                         .loss = sa->loss,
                         .acc = sa->counted > 0 ? (double)sa->correct / (double)sa->counted : 0,
                         .mean_loss = r->pt_loss / (double)r->n_since_point,
                         .mean_acc = r->pt_acc / (double)r->n_since_point,
                         .lr = r->last_lr,
                         .tokens_per_s = r->tokens / r->train_time,
                         .elapsed_s = sb_time_now() - r->t_start,
                         .params = r->res->params,
                         .grad_acc = r->acc_steps};
    ev.eta_s = (double)(r->total_updates - r->updates) * r->train_time /
               (double)(r->updates - r->first_micro / r->acc_steps);
    emit(r->opt, &ev);
}

/* Early stopping: counts the updates since the best loss; sets stop_early at patience. */
static void train_check_patience(train_run *r, double loss)
{
    if (loss < r->best_loss) {
        r->best_loss = loss;
        r->since_best = 0;
    } else if (++r->since_best >= r->patience) {
        r->stop_early = 1;
    }
}

/* The checkpoint at ckpt_path after `samples` samples: written by rank 0 only (every rank
 * holds the same weights and optimiser state). */
static sb_status train_save(train_run *r, int64_t samples, sb_error *err)
{
    if (r->opt->world_rank != 0)
        return SB_OK;
    return sb_checkpoint_save(r->opt->ckpt_path, r->m, r->cfg, &r->optim, samples, err);
}

/* A point of the learning curve (an evaluation of either kind): its scores, the training
 * averages since the previous point; then those averages start again. */
static void emit_point(train_run *r, int64_t samples, const split_scores *sc)
{
    const double loss = r->pt_loss / r->n_since_point, acc = r->pt_acc / r->n_since_point;
    sb_train_event ev = {.kind = SB_EVENT_EVAL,
                         .step = r->updates,
                         .total_steps = r->total_updates,
                         .samples = samples,
                         .loss = loss,
                         .acc = acc,
                         .mean_loss = loss,
                         .mean_acc = acc,
                         .test_loss = sc->test_loss,
                         .test_acc = sc->test_acc,
                         .valid_loss = sc->valid_loss,
                         .valid_acc = sc->valid_acc,
                         .lr = r->last_lr,
                         .tokens_per_s = r->tokens / r->train_time,
                         .elapsed_s = sb_time_now() - r->t_start,
                         .params = r->res->params,
                         .grad_acc = r->acc_steps};
    emit(r->opt, &ev);
    r->pt_loss = r->pt_acc = 0.0;
    r->n_since_point = 0;
}

/* An evaluation after an update: the test split, the training averages since the last
 * one, the event, the checkpoint; then --stop_after, unless this was the last update.
 * samples: consumed so far. */
static sb_status train_evaluate_and_save(train_run *r, int64_t samples, int last_update,
                                         sb_error *err)
{
    const sb_run_config *cfg = r->cfg;
    sb_train_outcome *res = r->res;
    sb_status st = train_check_window_loss(r, samples, err);
    if (st != SB_OK)
        return st;
    split_scores s;
    st = evaluate_run(r->task, r->m, cfg->test_bs, r->budget, r->opt->arena_block_bytes, &s, err);
    if (st != SB_OK)
        return st;
    const double test_loss = s.test_loss, test_acc = s.test_acc;
    if (!isfinite(test_loss)) {
        train_diverged_at(r, samples);
        return sb_error_set(err, SB_ERR_DIVERGED,
                            "the test loss became %s at the evaluation after update %lld "
                            "(sample %lld): the run diverged; try a lower --lr",
                            isnan(test_loss) ? "NaN" : "infinite", (long long)r->updates,
                            (long long)samples);
    }
    res->train_loss = r->sum_loss / r->n_since_eval;
    res->train_acc = r->sum_acc / r->n_since_eval;
    res->test_loss = test_loss;
    res->test_acc = test_acc;
    res->valid_loss = s.valid_loss;
    res->valid_acc = s.valid_acc;
    res->n_evals++;
    if (cfg->task.protocol == SB_PROTOCOL_REFERENCE)
        r->dropout_on = 0; /* train.py's evaluation leaves the model in eval mode */
    emit_point(r, samples, &s);
    r->sum_loss = r->sum_acc = 0.0;
    r->n_since_eval = 0;
    if (r->opt->ckpt_path != NULL && (st = train_save(r, samples, err)) != SB_OK)
        return st;
    r->saved_updates = r->updates;
    r->saved_at = sb_time_now();
    if (r->stop_early)
        return SB_OK;
    if (r->opt->stop_after > 0 && r->updates >= r->opt->stop_after && !last_update) {
        res->steps = r->updates;
        res->samples = samples;
        res->tokens_per_s = r->train_time > 0 ? r->tokens / r->train_time : 0.0;
        res->status = SB_RUN_INTERRUPTED;
        r->stopped = 1;
    }
    return SB_OK;
}

/* ---- the learning curve's extra points (trainer.h) ------------------------------------------ */

int sb_train_curve_point(int64_t u, int64_t total, int64_t eval_every, int points)
{
    if (points < 2 || u < 1 || u >= total || (eval_every > 0 && u % eval_every == 0))
        return 0;
    /* ceil(k total / P) = u for some k  <=>  k = floor(u P / total) > (u - 1) P / total */
    const int64_t k = u * points / total;
    return k >= 1 && k <= points - 1 && k * total > (u - 1) * points;
}

int64_t sb_train_curve_extra(int64_t total, int64_t eval_every, int points)
{
    int64_t n = 0, last = 0;
    for (int k = 1; k < points; k++) {
        const int64_t u = (k * total + points - 1) / points;
        if (u != last && sb_train_curve_point(u, total, eval_every, points))
            n++;
        last = u;
    }
    return n;
}

/* A point of the learning curve between the --epoch_size evaluations: the test split only,
 * the training averages since the last point; nothing else of the run changes. */
static sb_status train_curve_point(train_run *r, int64_t samples, sb_error *err)
{
    double test_loss, test_acc;
    sb_status st = evaluate(r->task, SB_SPLIT_TEST, r->m, r->cfg->test_bs, r->budget,
                            SB_EVAL_STREAM, r->opt->arena_block_bytes, &test_loss, &test_acc, err);
    if (st != SB_OK)
        return st;
    split_scores sc = {.test_loss = test_loss,
                       .test_acc = test_acc,
                       .valid_loss = (double)NAN,
                       .valid_acc = (double)NAN};
    emit_point(r, samples, &sc);
    return SB_OK;
}

/* Testing aid: the first gradient of the first trained parameter becomes NaN. */
static void inject_nan_gradient(sb_params *ps)
{
    for (int i = 0; i < ps->n; i++)
        if (!(ps->p[i].flags & SB_PARAM_BUFFER)) {
            ps->grad[ps->p[i].offset] = (real)NAN;
            return;
        }
}

/* Micro-batch k: forward and backward (gradients accumulate), the divergence check, and
 * at the end of an update the optimiser step, progress, early stopping and, on the
 * evaluation cadence or at the last update, an evaluation and a checkpoint. */
/* Micro-batch k (samples index[0..count)) in one piece: its forward and backward, the
 * gradients accumulating into the parameters'. *frames: its valid frames. */
static sb_status train_whole_micro_batch(train_run *r, int64_t k, int count, step_args *sa,
                                         int64_t *frames, sb_error *err)
{
    sb_status st = sb_batch_fill(&r->batch, r->task, SB_SPLIT_TRAIN, r->index, count, 0, err);
    if (st != SB_OK)
        return st;
    sb_graph_reset(&r->g);
    r->g.training = r->dropout_on;
    r->g.step = (uint64_t)k;
    if ((st = sb_graph_run(&r->g, train_micro_step, sa, err)) != SB_OK)
        return st;
    *frames = 0;
    for (int b = 0; b < count; b++)
        *frames += r->batch.n_frames[b];
    return SB_OK;
}

/* Micro-batch k in K shards (grad_shards.h): this process's shards, each a forward and a
 * backward of its samples with the loss over the whole micro-batch's frames, dropout drawn
 * from the stream of (seed, micro-batch, shard) (K k + s: micro-batch k's own for K = 1);
 * then every shard from every process, and the parameters' gradient = the update's
 * earlier micro-batches' + shards 0..K-1 in order. sa gets the micro-batch's loss and
 * accuracy counts, the same on every process. */
static sb_status train_sharded_micro_batch(train_run *r, int64_t k, int count, step_args *sa,
                                           int64_t *frames, sb_error *err)
{
    sb_grad_shards *gs = &r->shards;
    sb_params *ps = &r->m->params;
    /* the micro-batch's valid frames, from its samples' plan (no frames built) */
    sb_status st = sb_batch_assemble(&r->batch, r->task, SB_SPLIT_TRAIN, r->index, count, 0, err);
    if (st != SB_OK)
        return st;
    *frames = 0;
    for (int b = 0; b < count; b++)
        *frames += r->batch.n_frames[b];
    const int first_of_update = k % r->acc_steps == 0;
    if (!first_of_update)
        memcpy(gs->before, ps->grad, gs->n * sizeof *ps->grad);
    for (int j = 0; j < gs->local; j++) {
        const int s = sb_grad_shards_index(gs, j);
        double *stats = sb_grad_shards_stats(gs, s);
        int s0, len;
        sb_grad_shard_range(count, gs->K, s, &s0, &len);
        sb_params_zero_grad(ps);
        for (int i = 0; i < SB_SHARD_STATS; i++)
            stats[i] = 0.0;
        if (len > 0) {
            st = sb_batch_fill(&r->batch, r->task, SB_SPLIT_TRAIN, r->index + s0, len, 0, err);
            if (st != SB_OK)
                return st;
            sb_graph_reset(&r->g);
            r->g.training = r->dropout_on;
            r->g.step = (uint64_t)k * (uint64_t)gs->K + (uint64_t)s;
            step_args shard = *sa;
            shard.batch = &r->batch;
            shard.mean_over = *frames;
            if ((st = sb_graph_run(&r->g, train_micro_step, &shard, err)) != SB_OK)
                return st;
            stats[SB_SHARD_LOSS_SUM] = shard.loss_sum;
            stats[SB_SHARD_CORRECT] = (double)shard.correct;
            stats[SB_SHARD_COUNTED] = (double)shard.counted;
        }
        memcpy(sb_grad_shards_grad(gs, s), ps->grad, gs->n * sizeof *ps->grad);
    }
    double sum[SB_SHARD_STATS];
    if ((st = sb_grad_shards_reduce(gs, first_of_update ? NULL : gs->before, ps->grad, sum, err)) !=
        SB_OK)
        return st;
    sa->loss = *frames > 0 ? sum[SB_SHARD_LOSS_SUM] / (double)*frames : 0.0;
    sa->loss_sum = sum[SB_SHARD_LOSS_SUM];
    sa->correct = (int64_t)sum[SB_SHARD_CORRECT];
    sa->counted = (int64_t)sum[SB_SHARD_COUNTED];
    return SB_OK;
}

static sb_status train_step(train_run *r, int64_t k, sb_error *err)
{
    const sb_train_options *opt = r->opt;
    double t0 = sb_time_now();
    int64_t first = k * r->micro;
    int count = (int)(r->n_train - first < r->micro ? r->n_train - first : r->micro);
    for (int i = 0; i < count; i++)
        r->index[i] = first + i;
    int is_update = (k + 1) % r->acc_steps == 0;
    step_args sa = {
        .m = r->m, .batch = &r->batch, .loss_scale = r->loss_scale, .want_acc = is_update};
    int64_t frames = 0;
    sb_status st = r->have_shards ? train_sharded_micro_batch(r, k, count, &sa, &frames, err)
                                  : train_whole_micro_batch(r, k, count, &sa, &frames, err);
    if (st != SB_OK)
        return st;
    if (opt->inject_nan_at > 0 && k + 1 == opt->inject_nan_at)
        sa.loss = (double)NAN;
    if (opt->inject_nan_grad_at > 0 && k + 1 == opt->inject_nan_grad_at)
        inject_nan_gradient(&r->m->params);
    if (!isfinite(sa.loss)) {
        train_diverged_at(r, first);
        return sb_error_set(err, SB_ERR_DIVERGED,
                            "the training loss became %s at update %lld (sample %lld): the run "
                            "diverged; try a lower --lr",
                            isnan(sa.loss) ? "NaN" : "infinite", (long long)r->updates,
                            (long long)first);
    }
    r->tokens += (double)frames;
    if (is_update && (st = train_update(r, &sa, first, err)) != SB_OK)
        return st;
    r->train_time += sb_time_now() - t0;
    if (!is_update)
        return SB_OK;
    train_report_progress(r, &sa, first + count);
    if (r->cfg->early_stop)
        train_check_patience(r, sa.loss);
    /* the last update is always evaluated (and saved), on the cadence or not */
    int last_update = r->updates == r->total_updates || r->stop_early;
    if (r->updates % r->eval_every == 0 || last_update)
        return train_evaluate_and_save(r, first + count, last_update, err);
    if (sb_train_curve_point(r->updates, r->total_updates, r->eval_every, r->cfg->curve_points))
        return train_curve_point(r, first + count, err);
    return SB_OK;
}

/* Whether the caller asks the run to stop now: polled after an update that was not the
 * last one (a run that is ending anyway finishes). */
static int train_stop_requested(const train_run *r)
{
    const sb_train_options *opt = r->opt;
    return opt->should_stop != NULL && !r->stop_early && !r->stopped &&
           r->updates < r->total_updates && opt->should_stop(opt->stop_user);
}

/* train_stop_requested of every process of the world: *stop when any has a request, so that
 * all stop after the same update (every process reaches this point at every update). */
static sb_status train_poll_stop(train_run *r, int *stop, sb_error *err)
{
    *stop = train_stop_requested(r);
    const sb_grad_shards *gs = &r->shards;
    if (!r->have_shards || gs->world == 1)
        return SB_OK;
    if (r->stop_early || r->stopped || r->updates >= r->total_updates)
        return SB_OK; /* the same on every process: no poll */
    int flags[SB_MAX_WORLD_POLL];
    int *all = gs->world <= SB_MAX_WORLD_POLL ? flags : sb_malloc((size_t)gs->world * sizeof *all);
    if (all == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    int mine = *stop;
    int rc = gs->all_gather(&mine, sizeof mine, all, gs->user);
    for (int i = 0; rc == 0 && i < gs->world; i++)
        *stop |= all[i] != 0;
    if (all != flags)
        sb_free(all);
    if (rc != 0)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "the all-gather of the stop requests between the %d processes failed",
                            gs->world);
    return SB_OK;
}

/* Ends the run after the update that consumed `samples` samples, at a stop request: the
 * checkpoint that resume continues from (unless the evaluation of this update wrote it
 * already), status "interrupted" with the update in the reason. The training averages since
 * the last evaluation are not in the checkpoint: after a resume, the first evaluation
 * averages the updates of the resumed process only. */
static sb_status train_interrupt(train_run *r, int64_t samples, sb_error *err)
{
    sb_train_outcome *res = r->res;
    const char *ckpt = r->opt->ckpt_path;
    if (ckpt != NULL && r->saved_updates != r->updates) {
        sb_status st = train_save(r, samples, err);
        if (st != SB_OK)
            return st;
        r->saved_updates = r->updates;
        r->saved_at = sb_time_now();
    }
    res->steps = r->updates;
    res->samples = samples;
    res->tokens_per_s = r->train_time > 0 ? r->tokens / r->train_time : 0.0;
    res->status = SB_RUN_INTERRUPTED;
    if (ckpt != NULL)
        snprintf(res->reason, sizeof res->reason,
                 "interrupted at update %lld of %lld (%lld samples); its checkpoint continues "
                 "it with --resume",
                 (long long)r->updates, (long long)r->total_updates, (long long)samples);
    else
        snprintf(res->reason, sizeof res->reason,
                 "interrupted at update %lld of %lld (%lld samples); no checkpoint was written, "
                 "so it trains again from the start",
                 (long long)r->updates, (long long)r->total_updates, (long long)samples);
    r->stopped = 1;
    return SB_OK;
}

/* --checkpoint_every: the checkpoint after the update that consumed `samples` samples when
 * the last one is checkpoint_every_s old (the interruption's checkpoint: resume continues
 * from it with the same bits as an uninterrupted run). */
static sb_status train_periodic_checkpoint(train_run *r, int64_t samples, sb_error *err)
{
    const sb_train_options *opt = r->opt;
    if (opt->ckpt_path == NULL || !(opt->checkpoint_every_s > 0) ||
        r->saved_updates == r->updates || r->updates >= r->total_updates ||
        sb_time_now() - r->saved_at < opt->checkpoint_every_s)
        return SB_OK;
    sb_status st = train_save(r, samples, err);
    if (st != SB_OK)
        return st;
    r->saved_updates = r->updates;
    r->saved_at = sb_time_now();
    return SB_OK;
}

/* The micro-batches from where this process starts to the end of the pass, unless early
 * stopping, --stop_after or a stop request ends the run first. */
static sb_status train_loop(train_run *r, sb_error *err)
{
    sb_train_event ev0 = {.kind = SB_EVENT_START,
                          .total_steps = r->total_updates,
                          .params = r->res->params,
                          .grad_acc = r->acc_steps,
                          .step = r->updates,
                          .samples = r->start_samples};
    emit(r->opt, &ev0);
    for (int64_t k = r->first_micro; k < r->n_micro && !r->stop_early && !r->stopped; k++) {
        sb_status st = train_step(r, k, err);
        if (st != SB_OK)
            return st;
        /* the stop request is polled once per update, at the end of its last micro-batch */
        int stop = 0;
        if ((k + 1) % r->acc_steps == 0 && (st = train_poll_stop(r, &stop, err)) != SB_OK)
            return st;
        if (stop)
            return train_interrupt(r, (k + 1) * r->micro, err);
        if ((k + 1) % r->acc_steps == 0 && !r->stop_early && !r->stopped &&
            (st = train_periodic_checkpoint(r, (k + 1) * r->micro, err)) != SB_OK)
            return st;
    }
    return SB_OK;
}

/* A run resumed from the checkpoint of its last update (killed after it was written, before
 * its record was): nothing is left to train, but its result is the test evaluation of
 * these weights, as the uninterrupted run's last evaluation was; the training averages of
 * that evaluation's window are not in the checkpoint and stay unknown. */
static sb_status train_final_test(train_run *r, sb_error *err)
{
    split_scores s;
    sb_status st =
        evaluate_run(r->task, r->m, r->cfg->test_bs, r->budget, r->opt->arena_block_bytes, &s, err);
    if (st != SB_OK)
        return st;
    const double test_loss = s.test_loss, test_acc = s.test_acc;
    if (!isfinite(test_loss))
        return sb_error_set(err, SB_ERR_DIVERGED,
                            "the test loss of the checkpoint's weights is %s: the run diverged",
                            isnan(test_loss) ? "NaN" : "infinite");
    r->res->test_loss = test_loss;
    r->res->test_acc = test_acc;
    r->res->valid_loss = s.valid_loss;
    r->res->valid_acc = s.valid_acc;
    r->res->n_evals++;
    int64_t samples = r->updates * r->micro * r->acc_steps;
    sb_train_event ev = {.kind = SB_EVENT_EVAL,
                         .step = r->updates,
                         .total_steps = r->total_updates,
                         .samples = samples < r->n_train ? samples : r->n_train,
                         .loss = (double)NAN,
                         .acc = (double)NAN,
                         .mean_loss = (double)NAN,
                         .mean_acc = (double)NAN,
                         .test_loss = test_loss,
                         .test_acc = test_acc,
                         .valid_loss = s.valid_loss,
                         .valid_acc = s.valid_acc,
                         .lr = (double)NAN,
                         .tokens_per_s = (double)NAN,
                         .elapsed_s = sb_time_now() - r->t_start,
                         .params = r->res->params,
                         .grad_acc = r->acc_steps};
    emit(r->opt, &ev);
    return SB_OK;
}

/* The result of a run that ended at the end of the pass or by early stopping. */
static void train_finish(train_run *r)
{
    sb_train_outcome *res = r->res;
    int64_t consumed = r->updates * r->micro * r->acc_steps;
    res->steps = r->updates;
    res->samples = consumed < r->n_train ? consumed : r->n_train;
    res->tokens_per_s = r->train_time > 0 ? r->tokens / r->train_time : 0.0;
    res->status = SB_RUN_FINISHED;
}

static void train_run_free(train_run *r)
{
    sb_free(r->index);
    if (r->have_graph)
        sb_graph_free(&r->g);
    if (r->have_shards)
        sb_grad_shards_free(&r->shards);
    if (r->have_batch)
        sb_batch_free(&r->batch);
    sb_model_free(r->m);
    sb_task_free(r->task);
}

sb_status sb_train(const sb_run_config *cfg, const sb_train_options *opt, sb_train_outcome *res,
                   sb_error *err)
{
    outcome_reset(res);
    /* cfg was checked where it entered the library (sb_train_config) */
    if (opt->threads > 0)
        omp_set_num_threads(opt->threads);
    sb_status st = sb_gemm_configure(cfg, err);
    if (st != SB_OK)
        return run_failed(res, SB_RUN_FAILED, st, err);
    train_run r = {.cfg = cfg,
                   .opt = opt,
                   .res = res,
                   .budget = opt->mem_budget_gb > 0 ? opt->mem_budget_gb : 4.0,
                   .t_start = sb_time_now(),
                   .saved_updates = -1,
                   .saved_at = sb_time_now(),
                   .first_loss = (double)NAN};

    st = train_setup(&r, err);
    if (st == SB_OK && cfg->test_pretrained) {
        st = train_test_pretrained(&r, err);
    } else if (st == SB_OK) {
        train_plan(&r);
        st = train_buffers_init(&r, err);
        if (st == SB_OK)
            st = train_loop(&r, err);
        if (st == SB_OK && !r.stopped && r.first_micro >= r.n_micro && r.n_micro > 0)
            st = train_final_test(&r, err);
        if (st == SB_OK && !r.stopped)
            train_finish(&r);
    }

    res->wall_s = sb_time_now() - r.t_start;
    res->gather_s = r.shards.gather_s;
    if (st == SB_ERR_DIVERGED)
        run_failed(res, SB_RUN_DIVERGED, st, err);
    else if (st != SB_OK)
        run_failed(res, SB_RUN_FAILED, st, err);
    train_run_free(&r);
    return st;
}

/* ---- the first test batch, for cross-checks ---------------------------------------------- */

typedef struct dump_args {
    const sb_model *m;
    const sb_batch *batch;
    sb_tensor *logits;
} dump_args;

static void dump_forward(sb_graph *g, void *arg)
{
    dump_args *a = arg;
    a->logits = sb_model_forward(g, a->m, batch_input(g, a->batch));
}

sb_status sb_dump_first_batch(const char *path, const sb_task *task, const sb_model *m, int test_bs,
                              sb_error *err)
{
    int64_t n = sb_task_split_size(task, SB_SPLIT_TEST);
    int B = (int)(n < test_bs ? n : test_bs);
    sb_batch batch;
    sb_status st = sb_batch_init(&batch, task, B, err);
    if (st != SB_OK)
        return st;
    int64_t *index = sb_malloc((size_t)B * sizeof *index);
    sb_graph g;
    sb_graph_init(&g, (size_t)64 << 20);
    float *logits = NULL, *mask = NULL;
    if (index == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < B; i++)
        index[i] = i;
    if ((st = sb_batch_fill(&batch, task, SB_SPLIT_TEST, index, B, 0, err)) != SB_OK)
        goto done;
    dump_args da = {m, &batch, NULL};
    if ((st = sb_graph_run(&g, dump_forward, &da, err)) != SB_OK)
        goto done;
    size_t frames = (size_t)batch.B * (size_t)batch.T;
    size_t C = (size_t)m->cfg.d_output;
    logits = sb_malloc(frames * C * sizeof *logits);
    mask = sb_malloc(frames * sizeof *mask);
    if (logits == NULL || mask == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < frames * C; i++)
        logits[i] = (float)da.logits->data[i];
    for (size_t i = 0; i < frames; i++)
        mask[i] = batch.valid[i] ? 1.0f : 0.0f;
    sb_st_tensor t[3] = {
        {"inputs", SB_ST_F32, 3, {batch.B, batch.T, batch.V}, batch.data},
        {"logits", SB_ST_F32, 3, {batch.B, batch.T, (int64_t)C}, logits},
        {"mask", SB_ST_F32, 2, {batch.B, batch.T}, mask},
    };
    sb_st_meta meta[1] = {{"format", "selectivbench-dump-1"}};
    st = sb_safetensors_write(path, t, 3, meta, 1, err);
done:
    sb_free(logits);
    sb_free(mask);
    sb_free(index);
    sb_graph_free(&g);
    sb_batch_free(&batch);
    return st;
}

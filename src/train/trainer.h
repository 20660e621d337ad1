/*
 * trainer.h - one run of the reference's train.py: one pass over the training set in index
 * order, evaluation of the whole test set every epoch_size samples, checkpoints, metrics.
 *
 * What happens, per docs/training.md:
 *   - micro-batches of batch_size / grad_acc samples; one update every grad_acc of them,
 *     gradients summed (protocol reference) or averaged (clean) over the micro-batches;
 *   - before each update: global-norm clipping at 1, then Adam/AdamW with the learning
 *     rate lr * schedule(update index) (0 at the first update, as LambdaLR gives);
 *   - every epoch_size // (batch_size) updates: train loss/accuracy averaged over the
 *     updates since the last evaluation, test loss/accuracy, a checkpoint; under the
 *     reference protocol dropout stops after the first evaluation (train.py never switches
 *     the model back to training mode), under clean it stays on;
 *   - a final evaluation after the last update if it did not just happen;
 *   - divergence stops the run (status "diverged", SB_ERR_DIVERGED, the update and the value
 *     in the reason; no checkpoint written from then on): a NaN or infinite loss, a NaN or
 *     infinite gradient norm (before the optimiser step), a NaN or infinite test loss, or
 *     the mean training loss of an evaluation window above sb_train_loss_limit (checked
 *     before that evaluation).
 *   - a stop request (should_stop, polled once per update: a signal caught by the CLI)
 *     ends the run after the current update with a checkpoint that resume continues from:
 *     status "interrupted", SB_OK.
 * Deterministic for a seed: the same numbers for 1 and 2 threads.
 * The library does not print: progress and evaluations are reported through a callback.
 */
#ifndef SELECTIVBENCH_TRAINER_H
#define SELECTIVBENCH_TRAINER_H

#include <stdint.h>

#include "core/status.h"
#include "model/model.h"
#include "task/batch.h"
#include "task/task.h"
#include "train/run_setup.h"

typedef enum sb_event_kind {
    SB_EVENT_START,    /* the run is set up: params, grad_acc, updates known */
    SB_EVENT_PROGRESS, /* after an update */
    SB_EVENT_EVAL,     /* after an evaluation */
} sb_event_kind;

typedef struct sb_train_event {
    sb_event_kind kind;
    int64_t step;               /* updates done */
    int64_t total_steps;        /* updates of the whole run */
    int64_t samples;            /* training samples consumed */
    double loss, acc;           /* EVENT_PROGRESS: last micro-batch; EVENT_EVAL: train averages */
    double mean_loss, mean_acc; /* EVENT_PROGRESS: means over the updates since the last
                                   evaluation or learning-curve point (the running training
                                   loss); EVENT_EVAL: as loss, acc */
    double test_loss, test_acc;
    double valid_loss, valid_acc; /* EVENT_EVAL: the validation split's; NaN without one */
    double lr;                    /* learning rate of the last update */
    double tokens_per_s;          /* training frames per second so far (evaluation excluded) */
    double elapsed_s, eta_s;
    size_t params;
    int grad_acc;
} sb_train_event;

typedef void (*sb_train_callback)(const sb_train_event *ev, void *user);

typedef struct sb_train_options {
    int threads;           /* 0: all cores */
    const char *ckpt_path; /* where checkpoints go (NULL: none) */
    int resume;            /* continue from ckpt_path and its optimiser state */
    double mem_budget_gb;  /* activation memory for a step (grad_acc -1) and evaluation */
    sb_train_callback callback;
    void *user;
    /* stop at the first checkpoint after this many updates (0: never), with status
     * interrupted: an interruption that --resume continues (used by tests) */
    int64_t stop_after;
    /* Polled after every update (NULL: never): nonzero ends the run there, unless it was
     * the last update, with a checkpoint at ckpt_path (when there is one) that resume
     * continues from, and status "interrupted". It must be cheap and must not call back
     * into the run (the CLI reads a flag its signal handler sets). */
    int (*should_stop)(void *stop_user);
    void *stop_user;
    /* with ckpt_path: also write the checkpoint after the first update that ends this many
     * seconds after the last one was written (0: at evaluations only), so that a process
     * killed without warning loses at most that much work */
    double checkpoint_every_s;
    /* testing aid: treat the loss of this micro-batch (1-based) as NaN (0: never) */
    int64_t inject_nan_at;
    /* testing aid: make one gradient of this micro-batch (1-based) NaN, its loss finite */
    int64_t inject_nan_grad_at;
    /* bytes of each block of the activation arenas (training step, evaluation); 0: 64 MiB.
     * Small blocks make tests with many short runs cheap (and give the fault-injection test
     * more arena allocations to fail) */
    size_t arena_block_bytes;
    /* Data-parallel training (cfg->grad_shards K > 1; grad_shards.h, docs/cluster.md):
     * this process is rank world_rank of world_size (0 and 0 or 1: one process, which
     * computes every shard). Each computes the shards s with s % world_size == world_rank,
     * all_gather (required when world_size > 1) gives every process every shard, and each
     * sums them in shard order: the weights are the same on every rank, and the same as one
     * process's. Every rank evaluates (the same numbers), so every decision (early
     * stopping, divergence, the end) is the same on every rank; a stop request counts when
     * any rank has one (the flags are gathered once per update). Only rank 0 writes
     * checkpoints; with resume every rank reads ckpt_path. With all_to_all (optional) the
     * shards are reduced instead (grad_shards.h): each rank sums its slice of the parameters
     * over the shards in the same order, then the slices are gathered: the same bits, about
     * K/2 times fewer bytes and K/W times less memory than gathering every shard. */
    int world_rank, world_size;
    int (*all_gather)(const void *mine, size_t bytes, void *all, void *world_user);
    void *world_user;
    int (*all_to_all)(const void *send, size_t bytes, void *recv, void *world_user);
} sb_train_options;

/* Trains (or, with cfg->test_pretrained, only evaluates the checkpoint at
 * opt->ckpt_path). cfg must have passed sb_run_config_check (sb_train_config checks it,
 * once). The trainer's fields of the public outcome are filled, even on failure (status and
 * reason): status, reason, the test/train/validation metrics, params, steps, samples,
 * grad_acc, tokens_per_s, wall_s, gather_s, flops_per_token and n_evals. The others (the
 * hashes, paths, engine, threads and yardsticks that the caller knows) are left as they are. */
sb_status sb_train(const sb_run_config *cfg, const sb_train_options *opt, sb_train_outcome *res,
                   sb_error *err);

/* Evaluates model m on the test split of task: mean loss (per-batch means weighted by
 * batch size, as train.py) and per-element accuracy. Batches of test_bs samples are cut
 * into smaller ones when the memory budget requires it; the decoder is applied in chunks
 * of frames, so no [B, T, classes] tensor is ever formed. A model with a streaming form
 * gets its input frames a chunk at a time too (SB_EVAL_STREAM below), so memory does not
 * grow with the frames. */
sb_status sb_evaluate(const sb_task *task, const sb_model *m, int test_bs, double mem_budget_gb,
                      double *loss, double *acc, sb_error *err);

/* sb_evaluate on another split: SB_SPLIT_TEST as sb_evaluate, SB_SPLIT_VALID the validation
 * split (loss and accuracy NaN when the task has none: --valid_size 0). */
sb_status sb_evaluate_split(const sb_task *task, sb_split split, const sb_model *m, int test_bs,
                            double mem_budget_gb, double *loss, double *acc, sb_error *err);

/* How sb_evaluate_mode runs a model that has a streaming form (models without one, the
 * transformer and fox, always take the whole path):
 * SB_EVAL_STREAM: the default, the memory of a batch is flat in its frames: the inputs
 *   are generated 512 frames at a time (sb_batch_frames) and each chunk runs through the
 *   layers' streaming step;
 * SB_EVAL_STREAM_WHOLE_INPUT: the layers stream, but the batch's whole one-hot input is
 *   built first (the path before issue 17: bit-identical results, memory growing with
 *   the frames);
 * SB_EVAL_WHOLE: the whole input and the whole-sequence forward (the non-streaming path;
 *   the same results bit for bit, S4 within 1e-8: its whole form is an FFT). */
typedef enum sb_eval_mode {
    SB_EVAL_STREAM = 0,
    SB_EVAL_STREAM_WHOLE_INPUT,
    SB_EVAL_WHOLE,
} sb_eval_mode;

/* sb_evaluate in a given mode (tests compare the modes). */
sb_status sb_evaluate_mode(const sb_task *task, const sb_model *m, int test_bs,
                           double mem_budget_gb, sb_eval_mode mode, double *loss, double *acc,
                           sb_error *err);

/* The divergence rule (docs/training.md): a run has diverged when the mean training loss
 * over the updates since the last evaluation exceeds this limit, SB_DIVERGENCE_FACTOR times
 * the larger of first_loss (the loss of the first update the process made) and
 * ln(n_classes) (a uniform guess's loss, about where every model starts). */
#define SB_DIVERGENCE_FACTOR 10.0
double sb_train_loss_limit(double first_loss, int n_classes);

/* The learning curve's extra evaluations (--curve_points P; docs/training.md, "Learning
 * curves"): update u (1..total) gets one when it is ceil(k total / P) for some k in 1..P-1
 * and is not evaluated anyway (a multiple of eval_every, the --epoch_size cadence, or the
 * last update). They read the test split only and change nothing else: no checkpoint, no
 * schedule step, no dropout switch, no early-stopping or divergence window. */
int sb_train_curve_point(int64_t u, int64_t total, int64_t eval_every, int points);
/* How many updates of a run of `total` get one (plan.c counts their cost). */
int64_t sb_train_curve_extra(int64_t total, int64_t eval_every, int points);

/* Gradient accumulation the run will use (train.py's rules, the memory budget for -1). */
int sb_train_grad_acc(const sb_run_config *cfg, const sb_task *task, double mem_budget_gb);

/* The factor on each micro-batch's loss before its backward: 1 under the reference protocol
 * (train.py calls loss.backward() on every micro-batch's mean loss and steps every acc_steps
 * of them, so an update's gradient is the SUM of the micro-batches' gradients), 1 / acc_steps
 * under clean (their mean). */
real sb_train_loss_scale(sb_protocol protocol, int acc_steps);

/* One training micro-batch as the trainer's loop runs it (exposed for test_protocol): resets
 * g and records on it the forward of m on batch b, the mean cross-entropy over the batch's
 * valid frames and, if that loss is finite, the backward of loss_scale times it, so the
 * gradients ACCUMULATE (+=) into m->params.grad (the caller zeroes them between updates).
 * Dropout follows g->training, its masks g->dropout_seed and g->step. *loss: the unscaled
 * mean loss (NaN or infinite: no backward ran). */
sb_status sb_train_micro_batch(sb_graph *g, const sb_model *m, const sb_batch *b, real loss_scale,
                               double *loss, sb_error *err);

/* sb_train_micro_batch on a shard of a micro-batch (--grad_shards, grad_shards.h): the loss
 * is divided by mean_over, the valid frames of the whole micro-batch, instead of b's own, so
 * that the shards' gradients add up to the micro-batch's. *loss_sum: the loss summed over
 * b's valid frames (NaN or infinite: no backward ran). */
sb_status sb_train_shard_batch(sb_graph *g, const sb_model *m, const sb_batch *b, real loss_scale,
                               int64_t mean_over, double *loss_sum, sb_error *err);

/* A safetensors file with the first test batch: inputs [B, T, I], logits [B, T, C] and
 * mask [B, T] (float32), for cross-checks against the reference model. */
sb_status sb_dump_first_batch(const char *path, const sb_task *task, const sb_model *m, int test_bs,
                              sb_error *err);

#endif

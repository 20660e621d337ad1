/*
 * grad_shards.h - a micro-batch's gradient in K shards (--grad_shards K; docs/cluster.md,
 * "Data-parallel training").
 *
 * The micro-batch's samples are cut into K contiguous ranges whose sizes differ by at most
 * one. Each shard's gradient is computed on its own (its loss divided by the whole
 * micro-batch's valid frames, so the shards add up to the micro-batch's gradient) into its
 * own buffer, and the buffers are added in the order 0, 1, ..., K-1. The sum depends on K
 * only: a world of W processes (K a multiple of W), each computing the shards s with
 * s % W == its rank and then gathering every shard from the others, sums the same numbers
 * in the same order as one process computing them all, so the weights are bit-identical
 * for every W.
 *
 * Memory: K gradient buffers of the parameters' size on every process (all of them arrive
 * there), and one more for the gradient of the update's earlier micro-batches.
 */
#ifndef SELECTIVBENCH_GRAD_SHARDS_H
#define SELECTIVBENCH_GRAD_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/nn.h"

/* Shard s of K over count samples: its first sample and its length (contiguous ranges, the
 * first count % K shards one sample longer; 0 when count < K leaves it empty). */
void sb_grad_shard_range(int count, int K, int s, int *first, int *len);

/* What one shard reports besides its gradient, summed over the shards in order. */
enum {
    SB_SHARD_LOSS_SUM, /* cross-entropy summed over its valid frames (NaN: diverged) */
    SB_SHARD_CORRECT,  /* elements right */
    SB_SHARD_COUNTED,  /* elements counted */
    SB_SHARD_STATS     /* doubles per shard */
};

/* Gathers every process's block: mine (bytes, this process's block, which may lie inside
 * all at its place) is sent to every process, and all receives the blocks of ranks
 * 0 .. world-1 one after the other. Returns 0, or nonzero when it failed. */
typedef int (*sb_all_gather_fn)(const void *mine, size_t bytes, void *all, void *user);

typedef struct sb_grad_shards {
    int K;         /* shards per micro-batch */
    int rank;      /* this process: it computes the shards s with s % world == rank */
    int world;     /* processes */
    int local;     /* shards per process, K / world */
    size_t n;      /* reals of one gradient */
    real *grads;   /* [world][local][n]: rank-major, as the all-gather lays them out */
    real *before;  /* [n]: the update's gradient from its earlier micro-batches */
    double *stats; /* [world][local][SB_SHARD_STATS] */
    sb_all_gather_fn all_gather; /* NULL: one process */
    void *user;
    double gather_s; /* seconds spent in all_gather so far */
} sb_grad_shards;

/* Buffers for K shards of gradients of n reals, this process rank of world (K a multiple
 * of world; all_gather required when world > 1). SB_ERR_INVALID for a world that does not
 * divide K, SB_ERR_NOMEM. */
sb_status sb_grad_shards_init(sb_grad_shards *gs, int K, int rank, int world, size_t n,
                              sb_all_gather_fn all_gather, void *user, sb_error *err);
void sb_grad_shards_free(sb_grad_shards *gs);

/* The j-th shard this process computes (j < local): its shard index, gradient buffer and
 * statistics. */
int sb_grad_shards_index(const sb_grad_shards *gs, int j);
real *sb_grad_shards_grad(sb_grad_shards *gs, int s);
double *sb_grad_shards_stats(sb_grad_shards *gs, int s);

/* Every process's shards to every process (nothing with one process). SB_ERR_RUNTIME when
 * the all-gather fails. */
sb_status sb_grad_shards_exchange(sb_grad_shards *gs, sb_error *err);

/* grad = start + shard 0 + shard 1 + ... + shard K-1, added in that order (start NULL:
 * zero); the shards' statistics summed in the same order into stats[SB_SHARD_STATS]. */
void sb_grad_shards_sum(const sb_grad_shards *gs, const real *start, real *grad, double *stats);

#endif

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
 * Two ways to bring the shards together, with the same bits:
 * - all-gather (sb_all_gather_fn alone): every shard to every process, each sums all of
 *   them. Memory: K gradient buffers of the parameters' size on every process; bytes
 *   received per micro-batch: (K - K/W) gradients.
 * - reduce-scatter (with an sb_all_to_all_fn): the parameters are cut into W slices of
 *   ceil(n / W); each process receives every shard's values of its own slice (all-to-all),
 *   sums them in shard order after the same start, and the summed slices are gathered. Each
 *   element is the same sum in the same order as above. Memory: the K/W own shards and
 *   about 2 K/W + 1 more gradients' worth of slices; bytes received per micro-batch: about
 *   (K/W) (W - 1)/W + (W - 1)/W gradients, which is 2 (W - 1)/W at K = W: a ring
 *   all-reduce's volume, instead of K - 1.
 * And one more buffer for the gradient of the update's earlier micro-batches.
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

/* Exchanges blocks between all processes (MPI_Alltoall): send holds world blocks of bytes
 * each, block d for process d; recv receives world blocks, block r from process r. Returns
 * 0, or nonzero when it failed. */
typedef int (*sb_all_to_all_fn)(const void *send, size_t bytes, void *recv, void *user);

typedef struct sb_grad_shards {
    int K;         /* shards per micro-batch */
    int rank;      /* this process: it computes the shards s with s % world == rank */
    int world;     /* processes */
    int local;     /* shards per process, K / world */
    size_t n;      /* reals of one gradient */
    real *grads;   /* all-gather: [world][local][n], rank-major as the all-gather lays them
                      out; reduce-scatter: [local][n], this process's shards */
    real *before;  /* [n]: the update's gradient from its earlier micro-batches */
    double *stats; /* [world][local][SB_SHARD_STATS] (gathered in both ways) */
    sb_all_gather_fn all_gather; /* NULL: one process */
    sb_all_to_all_fn all_to_all; /* NULL: gather every shard */
    void *user;
    /* reduce-scatter: slices of `slice` reals; send and recv [world][local][slice], the
     * summed slice [slice], the gathered slices [world][slice] */
    size_t slice;
    real *send, *recv, *summed, *gathered;
    double gather_s; /* seconds spent exchanging (all-gathers and all-to-alls) so far */
} sb_grad_shards;

/* Buffers for K shards of gradients of n reals, this process rank of world (K a multiple
 * of world; all_gather required when world > 1; with all_to_all too the shards are
 * reduce-scattered). SB_ERR_INVALID for a world that does not divide K, SB_ERR_NOMEM. */
sb_status sb_grad_shards_init(sb_grad_shards *gs, int K, int rank, int world, size_t n,
                              sb_all_gather_fn all_gather, sb_all_to_all_fn all_to_all, void *user,
                              sb_error *err);
void sb_grad_shards_free(sb_grad_shards *gs);

/* The j-th shard this process computes (j < local): its shard index, gradient buffer and
 * statistics. */
int sb_grad_shards_index(const sb_grad_shards *gs, int j);
real *sb_grad_shards_grad(sb_grad_shards *gs, int s);
double *sb_grad_shards_stats(sb_grad_shards *gs, int s);

/* grad = start + shard 0 + shard 1 + ... + shard K-1, added in that order (start NULL:
 * zero), on every process, after every process wrote its own shards; the shards'
 * statistics summed in the same order into stats[SB_SHARD_STATS]. start is not grad.
 * SB_ERR_RUNTIME when an exchange fails. */
sb_status sb_grad_shards_reduce(sb_grad_shards *gs, const real *start, real *grad, double *stats,
                                sb_error *err);

#endif

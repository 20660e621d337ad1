/* grad_shards.c - a micro-batch's gradient in K shards, summed in order (grad_shards.h). */
#include "train/grad_shards.h"

#include <string.h>

#include "core/alloc.h"
#include "core/timer.h"

void sb_grad_shard_range(int count, int K, int s, int *first, int *len)
{
    const int base = count / K, extra = count % K;
    *first = s * base + (s < extra ? s : extra);
    *len = base + (s < extra ? 1 : 0);
}

sb_status sb_grad_shards_init(sb_grad_shards *gs, int K, int rank, int world, size_t n,
                              sb_all_gather_fn all_gather, sb_all_to_all_fn all_to_all, void *user,
                              sb_error *err)
{
    memset(gs, 0, sizeof *gs);
    if (world < 1 || K < 1 || K % world != 0 || rank < 0 || rank >= world)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_shards %d cannot be shared by %d processes: use a multiple "
                            "of the process count",
                            K, world);
    if (world > 1 && all_gather == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "a world of %d processes needs an all-gather to train", world);
    gs->K = K, gs->rank = rank, gs->world = world, gs->local = K / world, gs->n = n;
    gs->all_gather = all_gather, gs->user = user;
    gs->all_to_all = world > 1 ? all_to_all : NULL;
    gs->before = sb_malloc(n * sizeof *gs->before);
    gs->stats = sb_calloc((size_t)K * SB_SHARD_STATS, sizeof *gs->stats);
    int ok = gs->before != NULL && gs->stats != NULL;
    if (gs->all_to_all == NULL) {
        gs->grads = sb_malloc((size_t)K * n * sizeof *gs->grads);
        ok = ok && gs->grads != NULL;
    } else {
        const size_t slices = (size_t)world * (size_t)gs->local;
        gs->slice = (n + (size_t)world - 1) / (size_t)world;
        gs->grads = sb_malloc((size_t)gs->local * n * sizeof *gs->grads);
        gs->send = sb_malloc(slices * gs->slice * sizeof *gs->send);
        gs->recv = sb_malloc(slices * gs->slice * sizeof *gs->recv);
        gs->summed = sb_malloc(gs->slice * sizeof *gs->summed);
        gs->gathered = sb_malloc((size_t)world * gs->slice * sizeof *gs->gathered);
        ok = ok && gs->grads != NULL && gs->send != NULL && gs->recv != NULL &&
             gs->summed != NULL && gs->gathered != NULL;
    }
    if (!ok) {
        sb_grad_shards_free(gs);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for %d gradient shards of %zu values",
                            K, n);
    }
    return SB_OK;
}

void sb_grad_shards_free(sb_grad_shards *gs)
{
    sb_free(gs->grads);
    sb_free(gs->before);
    sb_free(gs->stats);
    sb_free(gs->send);
    sb_free(gs->recv);
    sb_free(gs->summed);
    sb_free(gs->gathered);
    memset(gs, 0, sizeof *gs);
}

int sb_grad_shards_index(const sb_grad_shards *gs, int j)
{
    return j * gs->world + gs->rank;
}

/* Where shard s lies in the rank-major statistics (and, gathering every shard, gradients):
 * rank s % world, its (s / world)-th. */
static size_t shard_slot(const sb_grad_shards *gs, int s)
{
    return (size_t)(s % gs->world) * (size_t)gs->local + (size_t)(s / gs->world);
}

real *sb_grad_shards_grad(sb_grad_shards *gs, int s)
{
    if (gs->all_to_all != NULL) /* only this process's shards are kept whole */
        return gs->grads + (size_t)(s / gs->world) * gs->n;
    return gs->grads + shard_slot(gs, s) * gs->n;
}

double *sb_grad_shards_stats(sb_grad_shards *gs, int s)
{
    return gs->stats + shard_slot(gs, s) * SB_SHARD_STATS;
}

/* Every process's block of n_bytes at mine (its place in all) to all of them, timed. */
static int gather(sb_grad_shards *gs, void *all, size_t n_bytes)
{
    const double t0 = sb_time_now();
    char *mine = (char *)all + (size_t)gs->rank * n_bytes;
    int rc = gs->all_gather(mine, n_bytes, all, gs->user);
    gs->gather_s += sb_time_now() - t0;
    return rc;
}

/* The statistics of every shard, summed in shard order. */
static void sum_stats(const sb_grad_shards *gs, double *stats)
{
    for (int i = 0; i < SB_SHARD_STATS; i++)
        stats[i] = 0.0;
    for (int s = 0; s < gs->K; s++) {
        const double *st = gs->stats + shard_slot(gs, s) * SB_SHARD_STATS;
        for (int i = 0; i < SB_SHARD_STATS; i++)
            stats[i] += st[i];
    }
}

/* Every shard to every process, each sums them all. */
static int reduce_by_gather(sb_grad_shards *gs, const real *start, real *grad)
{
    const size_t n = gs->n;
    if (gs->world > 1 && gather(gs, gs->grads, (size_t)gs->local * n * sizeof(real)) != 0)
        return -1;
    if (start != NULL)
        memcpy(grad, start, n * sizeof *grad);
    else
        memset(grad, 0, n * sizeof *grad);
    for (int s = 0; s < gs->K; s++) {
        const real *g = gs->grads + shard_slot(gs, s) * n;
        for (size_t i = 0; i < n; i++)
            grad[i] += g[i];
    }
    return 0;
}

/* Each process sums its slice of the parameters over every shard, in shard order after the
 * same start, then the slices are gathered: per element the same additions as above. */
static int reduce_by_slices(sb_grad_shards *gs, const real *start, real *grad)
{
    const size_t n = gs->n, slice = gs->slice;
    const int world = gs->world, local = gs->local;
    /* send[d][j]: slice d of this process's j-th shard, zero past the end */
    for (int d = 0; d < world; d++) {
        const size_t first = (size_t)d * slice;
        const size_t len = first >= n ? 0 : (n - first < slice ? n - first : slice);
        for (int j = 0; j < local; j++) {
            real *to = gs->send + ((size_t)d * (size_t)local + (size_t)j) * slice;
            if (len > 0)
                memcpy(to, gs->grads + (size_t)j * n + first, len * sizeof *to);
            memset(to + len, 0, (slice - len) * sizeof *to);
        }
    }
    const double t0 = sb_time_now();
    int rc = gs->all_to_all(gs->send, (size_t)local * slice * sizeof(real), gs->recv, gs->user);
    gs->gather_s += sb_time_now() - t0;
    if (rc != 0)
        return -1;
    /* recv[r][j]: this process's slice of shard j world + r */
    const size_t first = (size_t)gs->rank * slice;
    const size_t len = first >= n ? 0 : (n - first < slice ? n - first : slice);
    if (start != NULL && len > 0)
        memcpy(gs->summed, start + first, len * sizeof *gs->summed);
    else
        memset(gs->summed, 0, slice * sizeof *gs->summed);
    for (int s = 0; s < gs->K; s++) {
        const real *g =
            gs->recv + ((size_t)(s % world) * (size_t)local + (size_t)(s / world)) * slice;
        for (size_t i = 0; i < len; i++)
            gs->summed[i] += g[i];
    }
    memcpy(gs->gathered + first, gs->summed, slice * sizeof *gs->summed);
    if (gather(gs, gs->gathered, slice * sizeof(real)) != 0)
        return -1;
    memcpy(grad, gs->gathered, n * sizeof *grad);
    return 0;
}

sb_status sb_grad_shards_reduce(sb_grad_shards *gs, const real *start, real *grad, double *stats,
                                sb_error *err)
{
    int rc = 0;
    if (gs->world > 1)
        rc = gather(gs, gs->stats, (size_t)gs->local * SB_SHARD_STATS * sizeof(double));
    if (rc == 0)
        rc = gs->all_to_all != NULL ? reduce_by_slices(gs, start, grad)
                                    : reduce_by_gather(gs, start, grad);
    if (rc != 0)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "the exchange of the gradient shards between the %d processes "
                            "failed",
                            gs->world);
    sum_stats(gs, stats);
    return SB_OK;
}

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
                              sb_all_gather_fn all_gather, void *user, sb_error *err)
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
    gs->grads = sb_malloc((size_t)K * n * sizeof *gs->grads);
    gs->before = sb_malloc(n * sizeof *gs->before);
    gs->stats = sb_calloc((size_t)K * SB_SHARD_STATS, sizeof *gs->stats);
    if (gs->grads == NULL || gs->before == NULL || gs->stats == NULL) {
        sb_grad_shards_free(gs);
        return sb_error_set(err, SB_ERR_NOMEM,
                            "out of memory for %d gradient shards of %zu values", K, n);
    }
    return SB_OK;
}

void sb_grad_shards_free(sb_grad_shards *gs)
{
    sb_free(gs->grads);
    sb_free(gs->before);
    sb_free(gs->stats);
    memset(gs, 0, sizeof *gs);
}

int sb_grad_shards_index(const sb_grad_shards *gs, int j)
{
    return j * gs->world + gs->rank;
}

/* Where shard s lies in the rank-major buffers: rank s % world, its (s / world)-th. */
static size_t shard_slot(const sb_grad_shards *gs, int s)
{
    return (size_t)(s % gs->world) * (size_t)gs->local + (size_t)(s / gs->world);
}

real *sb_grad_shards_grad(sb_grad_shards *gs, int s)
{
    return gs->grads + shard_slot(gs, s) * gs->n;
}

double *sb_grad_shards_stats(sb_grad_shards *gs, int s)
{
    return gs->stats + shard_slot(gs, s) * SB_SHARD_STATS;
}

sb_status sb_grad_shards_exchange(sb_grad_shards *gs, sb_error *err)
{
    if (gs->world == 1)
        return SB_OK;
    const double t0 = sb_time_now();
    const size_t block = (size_t)gs->local * gs->n;
    const size_t stats_block = (size_t)gs->local * SB_SHARD_STATS;
    int rc = gs->all_gather(gs->grads + (size_t)gs->rank * block, block * sizeof(real),
                            gs->grads, gs->user);
    if (rc == 0)
        rc = gs->all_gather(gs->stats + (size_t)gs->rank * stats_block,
                            stats_block * sizeof(double), gs->stats, gs->user);
    gs->gather_s += sb_time_now() - t0;
    if (rc != 0)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "the all-gather of the gradient shards between the %d processes "
                            "failed",
                            gs->world);
    return SB_OK;
}

void sb_grad_shards_sum(const sb_grad_shards *gs, const real *start, real *grad, double *stats)
{
    const size_t n = gs->n;
    if (start != NULL)
        memcpy(grad, start, n * sizeof *grad);
    else
        memset(grad, 0, n * sizeof *grad);
    for (int i = 0; i < SB_SHARD_STATS; i++)
        stats[i] = 0.0;
    for (int s = 0; s < gs->K; s++) {
        const real *g = gs->grads + shard_slot(gs, s) * n;
        for (size_t i = 0; i < n; i++)
            grad[i] += g[i];
        const double *st = gs->stats + shard_slot(gs, s) * SB_SHARD_STATS;
        for (int i = 0; i < SB_SHARD_STATS; i++)
            stats[i] += st[i];
    }
}

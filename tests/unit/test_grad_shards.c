/*
 * test_grad_shards.c - --grad_shards (src/train/grad_shards.h; double build: the comparisons
 * are exact up to rounding):
 *   - the shards of a micro-batch are contiguous, cover it, and differ in size by at most one;
 *   - the gradient of a micro-batch computed in K shards (each a forward and backward of its
 *     samples, its loss divided by the whole micro-batch's valid frames, the buffers added
 *     in order) is the gradient of the whole micro-batch within 1e-12, for K = 2, 3, 4, 16,
 *     and the shards' summed losses give its mean loss;
 *   - a world of W processes (each rank a thread here, the exchanges a shared buffer and a
 *     barrier), each rank computing only its shards (s % W == rank), gets the same bits on
 *     every rank as one process, for W = 1, 2, 4, both by gathering every shard and by
 *     reduce-scattering slices (all-to-all), with and without the earlier micro-batches'
 *     gradient as the start, and the same summed statistics;
 *   - a world that does not divide K is refused.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "task/batch.h"
#include "test_util.h"
#include "train/grad_shards.h"
#include "train/run_setup.h"
#include "train/trainer.h"

enum { MICRO = 16 };

/* ---- a world of W ranks as threads: the collectives through a shared buffer ---------- */

enum { MAX_WORLD = 4 };

typedef struct fake_world {
    int W;
    pthread_barrier_t barrier;
    char *board; /* [W][W][bytes]: block from rank r to rank d at (r W + d) bytes */
    size_t board_bytes;
} fake_world;

typedef struct fake_rank {
    fake_world *world;
    int rank;
    sb_grad_shards *gs;
    const real *start;
    real *grad;
    double stats[SB_SHARD_STATS];
    sb_status st;
} fake_rank;

static int fake_all_gather(const void *mine, size_t bytes, void *all, void *user)
{
    fake_rank *me = user;
    fake_world *w = me->world;
    if ((size_t)w->W * bytes > w->board_bytes)
        return -1;
    memcpy(w->board + (size_t)me->rank * bytes, mine, bytes);
    pthread_barrier_wait(&w->barrier);
    memcpy(all, w->board, (size_t)w->W * bytes);
    pthread_barrier_wait(&w->barrier);
    return 0;
}

static int fake_all_to_all(const void *send, size_t bytes, void *recv, void *user)
{
    fake_rank *me = user;
    fake_world *w = me->world;
    if ((size_t)w->W * (size_t)w->W * bytes > w->board_bytes)
        return -1;
    for (int d = 0; d < w->W; d++)
        memcpy(w->board + ((size_t)me->rank * (size_t)w->W + (size_t)d) * bytes,
               (const char *)send + (size_t)d * bytes, bytes);
    pthread_barrier_wait(&w->barrier);
    for (int r = 0; r < w->W; r++)
        memcpy((char *)recv + (size_t)r * bytes,
               w->board + ((size_t)r * (size_t)w->W + (size_t)me->rank) * bytes, bytes);
    pthread_barrier_wait(&w->barrier);
    return 0;
}

static void *reduce_on_rank(void *arg)
{
    fake_rank *me = arg;
    sb_error err = {0};
    me->st = sb_grad_shards_reduce(me->gs, me->start, me->grad, me->stats, &err);
    return NULL;
}

static void test_ranges(void **state)
{
    (void)state;
    for (int count = 1; count <= 40; count++)
        for (int K = 1; K <= 17; K++) {
            int next = 0, min_len = count, max_len = 0;
            for (int s = 0; s < K; s++) {
                int first, len;
                sb_grad_shard_range(count, K, s, &first, &len);
                assert_int_equal(first, next);
                next = first + len;
                min_len = len < min_len ? len : min_len;
                max_len = len > max_len ? len : max_len;
            }
            assert_int_equal(next, count);
            assert_true(max_len - min_len <= 1);
        }
}

/* A tiny GRU with samples of different frame counts (gaps of 1-3 frames). */
static sb_run_config tiny_run(void)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "gru");
    c.task.grammar.vocab = 9, c.task.grammar.amb = 8, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.train_gap_max = 0.3;
    c.task.dataset_size = 64;
    c.task.test_size = 16;
    c.feat_size = 8;
    c.layers = 2;
    c.batch_size = MICRO;
    c.seed = c.task.grammar.seed = 3;
    return c;
}

static void fill(sb_batch *b, const sb_task *task, int first, int len)
{
    int64_t index[MICRO];
    for (int i = 0; i < len; i++)
        index[i] = first + i;
    sb_error err = {0};
    if (sb_batch_fill(b, task, SB_SPLIT_TRAIN, index, len, 1, &err) != SB_OK)
        fail_msg("batch: %s", err.msg);
}

static void test_shards_add_up_to_the_batch(void **state)
{
    (void)state;
    sb_run_config c = tiny_run();
    sb_error err = {0};
    sb_task *task = NULL;
    sb_model *m = NULL;
    assert_int_equal(sb_task_create(&c.task, &task, &err), SB_OK);
    sb_model_config mc = sb_run_config_model(&c, task->n_inputs, task->grammar->d_output);
    assert_int_equal(sb_model_create(&mc, c.seed, &m, &err), SB_OK);
    sb_params *ps = &m->params;
    const size_t n = ps->total;
    sb_batch b;
    assert_int_equal(sb_batch_init(&b, task, MICRO, &err), SB_OK);
    sb_graph g;
    sb_graph_init(&g, (size_t)1 << 20);
    g.training = 0;

    /* the whole micro-batch */
    fill(&b, task, 0, MICRO);
    int64_t frames = 0;
    for (int i = 0; i < MICRO; i++)
        frames += b.n_frames[i];
    sb_params_zero_grad(ps);
    double whole_loss = 0.0;
    assert_int_equal(sb_train_micro_batch(&g, m, &b, 1, &whole_loss, &err), SB_OK);
    real *whole = malloc(n * sizeof *whole), *sharded = malloc(n * sizeof *sharded);
    assert_non_null(whole), assert_non_null(sharded);
    memcpy(whole, ps->grad, n * sizeof *whole);

    /* every shard's gradient and loss, computed once */
    enum { MAX_K = 16 };
    real *shard_grad[MAX_K];
    double shard_loss[MAX_K];
    real *start = malloc(n * sizeof *start);
    assert_non_null(start);
    for (size_t i = 0; i < n; i++)
        start[i] = (real)(0.001 * (double)((i * 7919) % 1000) - 0.5);
    const int Ks[] = {2, 3, 4, 16};
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
        const int K = Ks[ki];
        for (int s = 0; s < K; s++) {
            int s0, len;
            sb_grad_shard_range(MICRO, K, s, &s0, &len);
            fill(&b, task, s0, len);
            sb_params_zero_grad(ps);
            shard_loss[s] = 0.0;
            assert_int_equal(sb_train_shard_batch(&g, m, &b, 1, frames, &shard_loss[s], &err),
                             SB_OK);
            shard_grad[s] = malloc(n * sizeof(real));
            assert_non_null(shard_grad[s]);
            memcpy(shard_grad[s], ps->grad, n * sizeof(real));
        }
        real *reference[2] = {NULL, NULL}; /* W = 1's sums: from zero, from start */
        const int worlds[] = {1, 2, 4};
        for (size_t wi = 0; wi < sizeof worlds / sizeof *worlds; wi++) {
            const int W = worlds[wi];
            if (K % W != 0)
                continue;
            for (int sliced = 0; sliced <= (W > 1); sliced++)
                for (int with_start = 0; with_start <= 1; with_start++) {
                    /* the largest exchange: every shard (gathering), or W x W blocks of
                     * K / W slices (all-to-all: about K gradients) */
                    fake_world world = {.W = W,
                                        .board_bytes = (size_t)(K + W) * (n + W) * sizeof(real) +
                                                       (size_t)K * SB_SHARD_STATS * sizeof(double)};
                    world.board = malloc(world.board_bytes);
                    assert_non_null(world.board);
                    pthread_barrier_init(&world.barrier, NULL, (unsigned)W);
                    sb_grad_shards gs[MAX_WORLD];
                    fake_rank ranks[MAX_WORLD];
                    pthread_t threads[MAX_WORLD];
                    for (int r = 0; r < W; r++) {
                        ranks[r] = (fake_rank){.world = &world,
                                               .rank = r,
                                               .gs = &gs[r],
                                               .start = with_start ? start : NULL};
                        ranks[r].grad = malloc(n * sizeof(real));
                        assert_non_null(ranks[r].grad);
                        assert_int_equal(sb_grad_shards_init(&gs[r], K, r, W, n, fake_all_gather,
                                                             sliced ? fake_all_to_all : NULL,
                                                             &ranks[r], &err),
                                         SB_OK);
                        /* rank r fills only the shards it computes */
                        for (int j = 0; j < gs[r].local; j++) {
                            const int s = sb_grad_shards_index(&gs[r], j);
                            assert_int_equal(s % W, r);
                            memcpy(sb_grad_shards_grad(&gs[r], s), shard_grad[s], n * sizeof(real));
                            double *st = sb_grad_shards_stats(&gs[r], s);
                            st[SB_SHARD_LOSS_SUM] = shard_loss[s];
                            st[SB_SHARD_CORRECT] = s;
                            st[SB_SHARD_COUNTED] = 1;
                        }
                    }
                    for (int r = 0; r < W; r++)
                        assert_int_equal(
                            pthread_create(&threads[r], NULL, reduce_on_rank, &ranks[r]), 0);
                    for (int r = 0; r < W; r++)
                        pthread_join(threads[r], NULL);
                    for (int r = 0; r < W; r++) {
                        assert_int_equal(ranks[r].st, SB_OK);
                        assert_true(ranks[r].stats[SB_SHARD_COUNTED] == (double)K);
                        assert_true(ranks[r].stats[SB_SHARD_CORRECT] == (double)(K * (K - 1) / 2));
                        if (W == 1) {
                            reference[with_start] = ranks[r].grad;
                            if (!with_start) {
                                double d = test_max_rel_diff(ranks[r].grad, whole, n);
                                if (!(d <= 1e-12))
                                    fail_msg("K = %d: the shards' gradient differs from the "
                                             "batch's by %.3g",
                                             K, d);
                                assert_true(
                                    fabs(ranks[r].stats[SB_SHARD_LOSS_SUM] / (double)frames -
                                         whole_loss) <= 1e-12 * whole_loss);
                            }
                        } else {
                            if (memcmp(ranks[r].grad, reference[with_start], n * sizeof(real)) != 0)
                                fail_msg("K = %d, W = %d, rank %d, %s, start %d: other bits than "
                                         "one process's",
                                         K, W, r, sliced ? "slices" : "gather", with_start);
                            free(ranks[r].grad);
                        }
                        sb_grad_shards_free(&gs[r]);
                    }
                    pthread_barrier_destroy(&world.barrier);
                    free(world.board);
                }
        }
        free(reference[0]), free(reference[1]);
        for (int s = 0; s < K; s++)
            free(shard_grad[s]);
    }
    free(start);
    /* the normalisation matters: two halves each averaged over their own frames sum to
     * about twice the batch's gradient */
    memset(sharded, 0, n * sizeof *sharded);
    for (int s = 0; s < 2; s++) {
        int s0, len;
        sb_grad_shard_range(MICRO, 2, s, &s0, &len);
        fill(&b, task, s0, len);
        sb_params_zero_grad(ps);
        double loss_sum = 0.0;
        assert_int_equal(sb_train_shard_batch(&g, m, &b, 1, 0, &loss_sum, &err), SB_OK);
        for (size_t i = 0; i < n; i++)
            sharded[i] += ps->grad[i];
    }
    assert_true(test_max_rel_diff(sharded, whole, n) > 0.5);

    sb_grad_shards bad;
    assert_int_equal(sb_grad_shards_init(&bad, 6, 0, 4, n, NULL, NULL, NULL, &err), SB_ERR_INVALID);
    free(whole), free(sharded);
    sb_graph_free(&g);
    sb_batch_free(&b);
    sb_model_free(m);
    sb_task_free(task);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_shards_add_up_to_the_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

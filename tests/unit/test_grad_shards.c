/*
 * test_grad_shards.c - --grad_shards (src/train/grad_shards.h; double build: the comparisons
 * are exact up to rounding):
 *   - the shards of a micro-batch are contiguous, cover it, and differ in size by at most one;
 *   - the gradient of a micro-batch computed in K shards (each a forward and backward of its
 *     samples, its loss divided by the whole micro-batch's valid frames, the buffers added
 *     in order) is the gradient of the whole micro-batch within 1e-12, for K = 2, 3, 4, 16,
 *     and the shards' summed losses give its mean loss;
 *   - the shard buffers of a world of W processes lie rank-major (shard s at rank s % W), and
 *     the sum adds them in shard order whatever W: the same bits for W = 1, 2, 4;
 *   - a world that does not divide K is refused.
 */
#include <math.h>
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
#include "train/grad_shards.h"
#include "train/run_setup.h"
#include "train/trainer.h"
#include "test_util.h"

enum { MICRO = 16 };

/* The test fills every rank's buffers itself: the all-gather is never called. */
static int unused_gather(const void *mine, size_t bytes, void *all, void *user)
{
    (void)mine, (void)bytes, (void)all, (void)user;
    return -1;
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
    real *first_bits = malloc(n * sizeof *first_bits);
    assert_non_null(whole), assert_non_null(sharded), assert_non_null(first_bits);
    memcpy(whole, ps->grad, n * sizeof *whole);

    const int Ks[] = {2, 3, 4, 16};
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
        const int K = Ks[ki];
        const int worlds[] = {1, 2, 4};
        for (size_t wi = 0; wi < sizeof worlds / sizeof *worlds; wi++) {
            const int W = worlds[wi];
            if (K % W != 0)
                continue;
            /* every rank's buffers of one world, filled as each rank would fill its own and
             * the all-gather would then fill the rest: rank r's shards computed here, the
             * others copied from the rank that computed them */
            sb_grad_shards gs[4];
            for (int r = 0; r < W; r++)
                assert_int_equal(sb_grad_shards_init(&gs[r], K, r, W, n, unused_gather, NULL,
                                                     &err),
                                 SB_OK);
            for (int s = 0; s < K; s++) {
                int s0, len;
                sb_grad_shard_range(MICRO, K, s, &s0, &len);
                fill(&b, task, s0, len);
                sb_params_zero_grad(ps);
                double loss_sum = 0.0;
                assert_int_equal(sb_train_shard_batch(&g, m, &b, 1, frames, &loss_sum, &err),
                                 SB_OK);
                for (int r = 0; r < W; r++) {
                    memcpy(sb_grad_shards_grad(&gs[r], s), ps->grad, n * sizeof(real));
                    sb_grad_shards_stats(&gs[r], s)[SB_SHARD_LOSS_SUM] = loss_sum;
                }
                /* the rank that computes shard s is s % W */
                assert_int_equal(sb_grad_shards_index(&gs[s % W], s / W), s);
            }
            for (int r = 0; r < W; r++) {
                double stats[SB_SHARD_STATS];
                sb_grad_shards_sum(&gs[r], NULL, sharded, stats);
                if (W == 1 && r == 0) {
                    double d = test_max_rel_diff(sharded, whole, n);
                    if (!(d <= 1e-12))
                        fail_msg("K = %d: the shards' gradient differs from the batch's by %.3g",
                                 K, d);
                    assert_true(fabs(stats[SB_SHARD_LOSS_SUM] / (double)frames - whole_loss) <=
                                1e-12 * whole_loss);
                    memcpy(first_bits, sharded, n * sizeof(real));
                } else {
                    assert_memory_equal(sharded, first_bits, n * sizeof(real));
                }
                sb_grad_shards_free(&gs[r]);
            }
        }
    }
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
    assert_int_equal(sb_grad_shards_init(&bad, 6, 0, 4, n, NULL, NULL, &err), SB_ERR_INVALID);
    free(whole), free(sharded), free(first_bits);
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

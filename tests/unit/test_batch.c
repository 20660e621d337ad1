/*
 * test_batch.c - padded batches: layout, padding, windows, noise, thread independence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "task/batch.h"
#include "task/task.h"

static sb_task *make_task(double noise)
{
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = 9, cfg.grammar.amb = 8, cfg.grammar.amb_depth = 8;
    cfg.train_seqlen_max = cfg.test_seqlen_max = 30;
    cfg.train_gap_max = 1.0;
    cfg.train_noise = noise;
    cfg.dataset_size = 500;
    cfg.test_size = 20;
    sb_task *task = NULL;
    sb_error err = {0};
    if (sb_task_create(&cfg, &task, &err) != SB_OK)
        fail_msg("%s", err.msg);
    return task;
}

static void test_batch_layout(void **state)
{
    (void)state;
    sb_task *task = make_task(0.0);
    sb_batch batch;
    sb_error err = {0};
    assert_int_equal(sb_batch_init(&batch, task, 8, &err), SB_OK);
    int64_t index[5] = {4, 0, 9, 2, 7};
    assert_int_equal(sb_batch_fill(&batch, task, SB_SPLIT_TRAIN, index, 5, 2, &err), SB_OK);
    assert_int_equal(batch.B, 5);
    assert_int_equal(batch.E, 30);
    int longest = 0;
    sb_sample s;
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    for (int b = 0; b < 5; b++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, index[b], &s, &err), SB_OK);
        assert_int_equal(batch.n_frames[b], s.n_frames);
        if (s.n_frames > longest)
            longest = s.n_frames;
        /* each window covers the element's symbol frame and its gap */
        for (int k = 0; k < s.n_elements; k++) {
            int32_t start = batch.elem_start[b * batch.E + k];
            int32_t len = batch.elem_len[b * batch.E + k];
            assert_int_equal(start, s.frame_start[k]);
            assert_int_equal(len, 1 + s.gap[k]);
            for (int f = start; f < start + len; f++)
                assert_int_equal(batch.target[(size_t)b * batch.T + f],
                                 task->grammar->state_id[s.state[k]]);
        }
        for (int t = 0; t < batch.T; t++) {
            int valid = t < s.n_frames;
            assert_int_equal(batch.valid[(size_t)b * batch.T + t], valid);
            if (!valid) {
                assert_int_equal(batch.target[(size_t)b * batch.T + t], 0);
                for (int v = 0; v < batch.V; v++)
                    assert_true(batch.data[((size_t)b * batch.T + t) * batch.V + v] == 0.0f);
            }
        }
    }
    assert_int_equal(batch.T, longest);
    sb_sample_free(&s);
    sb_batch_free(&batch);
    sb_task_free(task);
}

static void test_batch_threads_and_noise(void **state)
{
    (void)state;
    sb_task *task = make_task(0.2);
    sb_batch a, b;
    sb_error err = {0};
    assert_int_equal(sb_batch_init(&a, task, 16, &err), SB_OK);
    assert_int_equal(sb_batch_init(&b, task, 16, &err), SB_OK);
    int64_t index[16];
    for (int i = 0; i < 16; i++)
        index[i] = 100 + 3 * i;
    assert_int_equal(sb_batch_fill(&a, task, SB_SPLIT_TRAIN, index, 16, 1, &err), SB_OK);
    assert_int_equal(sb_batch_fill(&b, task, SB_SPLIT_TRAIN, index, 16, 2, &err), SB_OK);
    assert_int_equal(a.T, b.T);
    size_t frames = (size_t)a.B * (size_t)a.T;
    assert_memory_equal(a.data, b.data, frames * (size_t)a.V * sizeof *a.data);
    assert_memory_equal(a.target, b.target, frames * sizeof *a.target);
    /* noise: every real entry in [0, 0.2) (+1 on the hot one), padding exactly zero */
    double sum = 0.0;
    long count = 0;
    for (int bb = 0; bb < a.B; bb++)
        for (int t = 0; t < a.T; t++)
            for (int v = 0; v < a.V; v++) {
                float x = a.data[((size_t)bb * a.T + t) * a.V + v];
                if (t >= a.n_frames[bb]) {
                    assert_true(x == 0.0f);
                    continue;
                }
                float frac = x >= 1.0f ? x - 1.0f : x;
                assert_true(frac >= 0.0f && frac < 0.2f);
                sum += (double)frac;
                count++;
            }
    double mean = sum / (double)count;
    assert_true(mean > 0.095 && mean < 0.105);
    /* a test batch of the same indices has the same sequences but other gaps and noise */
    int64_t test_index[4] = {0, 1, 2, 3};
    assert_int_equal(sb_batch_fill(&b, task, SB_SPLIT_TEST, test_index, 4, 2, &err), SB_OK);
    assert_int_equal(b.T, 30 * 11); /* test gaps are fixed at train_gap_max = 1.0 s */
    /* bad index */
    int64_t bad[1] = {20};
    assert_int_equal(sb_batch_fill(&b, task, SB_SPLIT_TEST, bad, 1, 1, &err), SB_ERR_INVALID);
    sb_batch_free(&a);
    sb_batch_free(&b);
    sb_task_free(task);
}

/* sb_batch_frames: any cut of the frames into chunks gives the bytes sb_batch_fill writes
 * (noise from the middle of its stream, distractors, padding past a sample's end). */
static void check_chunks_equal_fill(sb_task *task, sb_split split)
{
    sb_batch whole, chunked;
    sb_error err = {0};
    assert_int_equal(sb_batch_init(&whole, task, 6, &err), SB_OK);
    assert_int_equal(sb_batch_init(&chunked, task, 6, &err), SB_OK);
    int64_t index[6] = {5, 0, 11, 3, 8, 1};
    assert_int_equal(sb_batch_fill(&whole, task, split, index, 6, 2, &err), SB_OK);
    assert_int_equal(sb_batch_assemble(&chunked, task, split, index, 6, 1, &err), SB_OK);
    assert_int_equal(chunked.T, whole.T);
    assert_int_equal(chunked.E, whole.E);
    assert_memory_equal(chunked.n_frames, whole.n_frames, 6 * sizeof *whole.n_frames);
    size_t elems = (size_t)whole.B * (size_t)whole.E;
    assert_memory_equal(chunked.elem_start, whole.elem_start, elems * sizeof *whole.elem_start);
    assert_memory_equal(chunked.elem_len, whole.elem_len, elems * sizeof *whole.elem_len);
    const int B = whole.B, T = whole.T, V = whole.V;
    /* V = 9 inputs: odd chunk lengths start chunks on either half of a noise draw */
    const int lens[] = {1, 2, 7, 64, T + 5};
    float *data = malloc((size_t)B * (size_t)(T + 5) * (size_t)V * sizeof *data);
    int32_t *target = malloc((size_t)B * (size_t)(T + 5) * sizeof *target);
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        for (int t0 = 0; t0 < T; t0 += lens[l]) {
            int len = lens[l];
            sb_batch_frames(&chunked, task, split, t0, len, 2, data, target);
            for (int b = 0; b < B; b++) {
                int inside = T - t0 < len ? T - t0 : len; /* rows the whole batch has */
                size_t at = (size_t)b * (size_t)T + (size_t)t0, row = (size_t)b * (size_t)len;
                assert_memory_equal(data + row * V, whole.data + at * V,
                                    (size_t)inside * V * sizeof *data);
                assert_memory_equal(target + row, whole.target + at,
                                    (size_t)inside * sizeof *target);
                for (int r = inside; r < len; r++) {
                    assert_int_equal(target[row + (size_t)r], 0);
                    for (int v = 0; v < V; v++)
                        assert_true(data[(row + (size_t)r) * V + (size_t)v] == 0.0f);
                }
            }
        }
    }
    free(data);
    free(target);
    sb_batch_free(&whole);
    sb_batch_free(&chunked);
}

static void test_batch_frames_in_chunks(void **state)
{
    (void)state;
    sb_task *noisy = make_task(0.2);
    check_chunks_equal_fill(noisy, SB_SPLIT_TRAIN);
    check_chunks_equal_fill(noisy, SB_SPLIT_TEST);
    sb_task_free(noisy);

    /* distractor symbols in the gaps, some elements without a gap */
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = 12, cfg.grammar.amb = 3, cfg.grammar.amb_depth = 4;
    cfg.train_seqlen_max = cfg.test_seqlen_max = 30;
    cfg.train_gap_max = 1.0;
    cfg.gap_prob = 0.5;
    cfg.gap_start = 3;
    cfg.grammar_gap = 1;
    cfg.train_noise = 0.1;
    cfg.dataset_size = 200;
    cfg.test_size = 20;
    sb_task *gapped = NULL;
    sb_error err = {0};
    if (sb_task_create(&cfg, &gapped, &err) != SB_OK)
        fail_msg("%s", err.msg);
    check_chunks_equal_fill(gapped, SB_SPLIT_TRAIN);
    check_chunks_equal_fill(gapped, SB_SPLIT_TEST);
    sb_task_free(gapped);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_layout),
        cmocka_unit_test(test_batch_threads_and_noise),
        cmocka_unit_test(test_batch_frames_in_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_walks.c - interleaved walks (--walk_len; docs/task.md "Interleaved walks", issue 37):
 *   1. a sample of E elements interleaves ceil(E / walk_len) walks; walk j of the sample on
 *      sequence s is the prefix of the reference task's sequence s * stride + j (stride: the
 *      most walks of any split), taken in the order the elements name the walks;
 *   2. the frames: each symbol frame shows its letter and its walk's tag (input
 *      n_classes + j), gap frames carry neither, every frame's target is its element's state
 *      id, and the width is n_classes + stride;
 *   3. the schedule is uniform over the walks and a pure function of (seed, split, index);
 *      the splits stay disjoint (the clean protocol's test walks are no training walk);
 *   4. without --walk_len nothing changes: every element is walk 0, the width is the
 *      letters' (the reference vectors in test_assembly check the bits);
 *   5. bad settings give one error line: distractor gaps, too many walks, a negative value,
 *      exporting the reference's files.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/run_config.h"
#include "task/task.h"

static sb_task_config walk_config(int walk_len)
{
    sb_task_config c = sb_run_config_default().task;
    c.grammar.vocab = 9, c.grammar.amb = 8, c.grammar.amb_depth = 4;
    c.grammar.seed = 3;
    c.train_seqlen_max = 40;
    c.test_seqlen_max = 24;
    c.train_gap_min = 0.1, c.train_gap_max = 0.4;
    c.train_noise = 0.0;
    c.dataset_size = 60;
    c.test_size = 12;
    c.walk_len = walk_len;
    return c;
}

static sb_task *make(const sb_task_config *c)
{
    sb_task *t = NULL;
    sb_error err = {0};
    if (sb_task_create(c, &t, &err) != SB_OK)
        fail_msg("task: %s", err.msg);
    return t;
}

/* 1: the walks are prefixes of the reference task's sequences */
static void test_walks_are_reference_sequences(void **state)
{
    (void)state;
    sb_task_config c = walk_config(10);
    sb_task *t = make(&c);
    assert_int_equal(t->n_walks[SB_SPLIT_TRAIN], 4); /* ceil(40 / 10) */
    assert_int_equal(t->n_walks[SB_SPLIT_TEST], 3);  /* ceil(24 / 10) */
    assert_int_equal(t->n_walks[SB_SPLIT_VALID], 3);
    assert_int_equal(t->walk_stride, 4);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &s, &err), SB_OK);
    for (int split = 0; split < SB_SPLIT_COUNT; split++) {
        const int E = t->n_elements[split], K = t->n_walks[split];
        uint16_t *full = malloc((size_t)E * sizeof *full);
        for (int64_t i = 0; i < 6; i++) {
            assert_int_equal(sb_task_sample(t, (sb_split)split, i, &s, &err), SB_OK);
            assert_int_equal(s.n_elements, E);
            uint64_t seq = sb_task_sequence_index(t, (sb_split)split, i);
            int used = 0;
            for (int j = 0; j < K; j++) {
                assert_int_equal(sb_sampler_generate(&t->sampler[split], seq * 4 + (uint64_t)j,
                                                     full, NULL, NULL, &err),
                                 SB_OK);
                int m = 0;
                for (int k = 0; k < E; k++)
                    if (s.walk[k] == j)
                        assert_int_equal(s.state[k], full[m++]);
                used += m;
            }
            assert_int_equal(used, E); /* every element belongs to one of the split's walks */
        }
        free(full);
    }
    sb_sample_free(&s);
    sb_task_free(t);
}

/* 2: letters, tags, gaps and targets in the frames */
static void test_frames_show_the_tags(void **state)
{
    (void)state;
    sb_task_config c = walk_config(8);
    sb_task *t = make(&c);
    const sb_grammar *g = t->grammar;
    const int V = t->n_inputs;
    assert_int_equal(V, g->n_classes + t->walk_stride);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, 5, &s, &err), SB_OK);
    float *data = malloc((size_t)s.n_frames * (size_t)V * sizeof *data);
    int32_t *target = malloc((size_t)s.n_frames * sizeof *target);
    sb_task_sample_frames(t, SB_SPLIT_TRAIN, 5, &s, data, target);
    for (int k = 0; k < s.n_elements; k++) {
        const float *row = data + (size_t)s.frame_start[k] * (size_t)V;
        for (int v = 0; v < V; v++) {
            float want = v == g->state_class[s.state[k]] || v == g->n_classes + s.walk[k];
            assert_true(row[v] == want);
        }
        for (int f = 0; f <= s.gap[k]; f++)
            assert_int_equal(target[s.frame_start[k] + f], g->state_id[s.state[k]]);
        for (int f = 1; f <= s.gap[k]; f++)
            for (int v = 0; v < V; v++)
                assert_true(data[(size_t)(s.frame_start[k] + f) * (size_t)V + (size_t)v] == 0.0f);
    }
    free(data);
    free(target);
    sb_sample_free(&s);
    sb_task_free(t);
}

/* 3: the schedule: uniform, reproducible, and the splits disjoint */
static void test_schedule(void **state)
{
    (void)state;
    sb_task_config c = walk_config(10);
    c.dataset_size = 400;
    sb_task *t = make(&c);
    sb_sample s, again;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &s, &err), SB_OK);
    assert_int_equal(sb_sample_alloc(t, &again, &err), SB_OK);
    int64_t count[4] = {0}, total = 0;
    for (int64_t i = 0; i < 400; i++) {
        assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, i, &s, &err), SB_OK);
        for (int k = 0; k < s.n_elements; k++, total++)
            count[s.walk[k]]++;
    }
    /* 16 000 draws over 4 walks: each share within 5 standard deviations of 1/4 */
    double sd = sqrt(total * 0.25 * 0.75);
    for (int j = 0; j < 4; j++)
        assert_true(fabs((double)count[j] - 0.25 * (double)total) < 5.0 * sd);
    /* a pure function of the index: read again after another sample */
    assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, 7, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, 3, &again, &err), SB_OK);
    assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, 7, &again, &err), SB_OK);
    assert_memory_equal(s.walk, again.walk, (size_t)s.n_elements);
    assert_memory_equal(s.state, again.state, (size_t)s.n_elements * sizeof *s.state);
    sb_sample_free(&s);
    sb_sample_free(&again);
    sb_task_free(t);

    /* the clean protocol: test sample i is sequence dataset_size + i, its walks sequences
     * (dataset_size + i) * stride + j, past every training walk (at most dataset_size *
     * stride - 1) */
    c = walk_config(10);
    c.protocol = SB_PROTOCOL_CLEAN;
    t = make(&c);
    uint64_t first_test_walk = sb_task_sequence_index(t, SB_SPLIT_TEST, 0) * t->walk_stride;
    assert_true(first_test_walk >= (uint64_t)c.dataset_size * t->walk_stride);
    sb_task_free(t);
}

/* 4: without walk_len, one walk and the letters' width */
static void test_off_by_default(void **state)
{
    (void)state;
    sb_task_config c = walk_config(0);
    sb_task *t = make(&c);
    assert_int_equal(t->n_inputs, t->grammar->n_classes);
    assert_int_equal(t->walk_stride, 1);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, 2, &s, &err), SB_OK);
    uint16_t *full = malloc((size_t)s.n_elements * sizeof *full);
    assert_int_equal(sb_sampler_generate(&t->sampler[0], 2, full, NULL, NULL, &err), SB_OK);
    for (int k = 0; k < s.n_elements; k++) {
        assert_int_equal(s.walk[k], 0);
        assert_int_equal(s.state[k], full[k]);
    }
    /* the walks change the checksum; the reference task's is its own */
    uint64_t h0, h1;
    int64_t n0, n1;
    assert_int_equal(sb_task_split_checksum(t, SB_SPLIT_TRAIN, 1, &h0, &n0, &err), SB_OK);
    c.walk_len = 40; /* one walk: the same states, the tags hashed */
    sb_task *one = make(&c);
    assert_int_equal(sb_task_split_checksum(one, SB_SPLIT_TRAIN, 2, &h1, &n1, &err), SB_OK);
    assert_true(h0 != h1);
    assert_int_equal(n0, n1);
    free(full);
    sb_sample_free(&s);
    sb_task_free(one);
    sb_task_free(t);
}

/* 5: one error line for what cannot be built */
static void test_bad_settings(void **state)
{
    (void)state;
    sb_task *t = NULL;
    sb_error err = {0};
    sb_task_config c = walk_config(10);
    c.grammar_gap = 1;
    assert_int_equal(sb_task_create(&c, &t, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--walk_len with --grammar_gap True"));
    c = walk_config(1);
    c.train_seqlen_max = 200; /* 200 walks */
    assert_int_equal(sb_task_create(&c, &t, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "more than 64; use --walk_len 4 or more"));
    c = walk_config(-1);
    assert_int_equal(sb_task_create(&c, &t, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--walk_len -1 is negative"));
    assert_null(t);
    c = walk_config(10);
    t = make(&c);
    char dir[] = "/tmp/sb_walks_exportXXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(sb_task_export(t, dir, 1, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--export with --walk_len"));
    rmdir(dir);
    sb_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walks_are_reference_sequences),
        cmocka_unit_test(test_frames_show_the_tags),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_off_by_default),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_assembly.c - assembled samples (gaps, distractors, frames, targets, windows)
 * against tests/data/reference/assembly_vectors.json.
 *
 * With --gap_rng reference every case must match exactly; with the default derived
 * streams the deterministic case (fixed test duration, gap_prob 1) must match exactly
 * and the others structurally: no gap before gap_start, distractors never successors of
 * the element's state, durations in range, frame counts consistent.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "task/task.h"
#include "test_util.h"

static json_t *vectors;

static int setup(void **state)
{
    (void)state;
    vectors = test_load_json("reference/assembly_vectors.json");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

/* The task of one assembly case; *split receives the split the case describes. */
static sb_task_config case_config(const json_t *c, sb_gap_rng rng, sb_split *split)
{
    const json_t *cfg = json_object_get(c, "config");
    sb_task_config t = sb_task_config_default();
    t.grammar.vocab = (int)json_integer_value(json_object_get(cfg, "alphabet_size"));
    t.grammar.amb = (int)json_integer_value(json_object_get(cfg, "ambiguities"));
    t.grammar.amb_depth = (int)json_integer_value(json_object_get(cfg, "ambiguity_depth"));
    t.grammar.seed = test_json_u64(json_object_get(cfg, "seed"));
    int len = (int)json_integer_value(json_object_get(cfg, "seq_len_max"));
    int combined = (int)json_integer_value(json_object_get(cfg, "combined_seq_length"));
    t.train_seqlen_max = t.test_seqlen_max = len;
    t.combined_seq_length = combined;
    t.gap_start = (int)json_integer_value(json_object_get(cfg, "gap_start"));
    t.gap_prob = json_number_value(json_object_get(cfg, "gap_prob"));
    t.grammar_gap = json_is_true(json_object_get(cfg, "add_nongramm_gap"));
    t.train_noise = json_number_value(json_object_get(cfg, "noise"));
    const json_t *dur = json_object_get(cfg, "duration");
    if (json_object_get(dur, "fixed") != NULL) {
        t.test_dur = json_number_value(json_object_get(dur, "fixed"));
    } else {
        t.train_gap_min = json_number_value(json_object_get(dur, "low"));
        t.train_gap_max = json_number_value(json_object_get(dur, "high"));
    }
    t.dataset_size = 1000;
    t.test_size = 1000;
    t.gap_rng = rng;
    *split = json_is_true(json_object_get(c, "is_train")) ? SB_SPLIT_TRAIN : SB_SPLIT_TEST;
    return t;
}

/* Checks frames and targets of an assembled sample against its element list. */
static void check_frames(const sb_task *task, sb_split split, int64_t i, const sb_sample *s)
{
    const int V = task->n_inputs;
    float *data = malloc((size_t)s->n_frames * (size_t)V * sizeof *data);
    int32_t *target = malloc((size_t)s->n_frames * sizeof *target);
    sb_task_sample_frames(task, split, i, s, data, target);
    const sb_grammar *g = task->grammar;
    int next = 0;
    for (int k = 0; k < s->n_elements; k++) {
        int t = s->frame_start[k];
        for (int f = 0; f <= s->gap[k]; f++) {
            assert_int_equal(target[t + f], g->state_id[s->state[k]]);
            int hot = -1, ones = 0;
            for (int v = 0; v < V; v++) {
                float x = data[(size_t)(t + f) * (size_t)V + (size_t)v];
                assert_true(x == 0.0f || x == 1.0f);
                if (x == 1.0f) {
                    hot = v;
                    ones++;
                }
            }
            if (f == 0) {
                assert_int_equal(ones, 1);
                assert_int_equal(hot, g->state_class[s->state[k]]);
            } else if (task->cfg.grammar_gap) {
                assert_int_equal(ones, 1);
                assert_int_equal(hot, s->gap_class[next++]);
            } else {
                assert_int_equal(ones, 0);
            }
        }
    }
    free(data);
    free(target);
}

/* Compares one sample with its reference elements [class, target id, zero gap frames,
 * [distractor classes]]. */
static void check_exact(const sb_task *task, const sb_sample *s, const json_t *ref,
                        const char *what)
{
    const sb_grammar *g = task->grammar;
    const json_t *elements = json_object_get(ref, "elements");
    assert_int_equal(s->n_elements, json_array_size(elements));
    if (s->n_frames != json_integer_value(json_object_get(ref, "total_frames")))
        fail_msg("%s: %d frames, expected %lld", what, s->n_frames,
                 (long long)json_integer_value(json_object_get(ref, "total_frames")));
    int next = 0;
    for (int k = 0; k < s->n_elements; k++) {
        const json_t *e = json_array_get(elements, (size_t)k);
        int cls = g->state_class[s->state[k]];
        int id = g->state_id[s->state[k]];
        int zeros = task->cfg.grammar_gap ? 0 : s->gap[k];
        const json_t *inserted = json_array_get(e, 3);
        int n_ins = task->cfg.grammar_gap ? s->gap[k] : 0;
        if (cls != json_integer_value(json_array_get(e, 0)) ||
            id != json_integer_value(json_array_get(e, 1)) ||
            zeros != json_integer_value(json_array_get(e, 2)) ||
            (size_t)n_ins != json_array_size(inserted))
            fail_msg(
                "%s element %d: [%d, %d, %d, %d distractors], expected [%lld, %lld, %lld, "
                "%zu]",
                what, k, cls, id, zeros, n_ins, (long long)json_integer_value(json_array_get(e, 0)),
                (long long)json_integer_value(json_array_get(e, 1)),
                (long long)json_integer_value(json_array_get(e, 2)), json_array_size(inserted));
        for (int r = 0; r < n_ins; r++) {
            int got = s->gap_class[next++];
            if (got != json_integer_value(json_array_get(inserted, (size_t)r)))
                fail_msg("%s element %d distractor %d: %d, expected %lld", what, k, r, got,
                         (long long)json_integer_value(json_array_get(inserted, (size_t)r)));
        }
    }
}

static void test_reference_stream_exact(void **state)
{
    (void)state;
    size_t ci;
    json_t *c;
    int n_checked = 0;
    json_array_foreach (json_object_get(vectors, "cases"), ci, c) {
        sb_split split;
        sb_task_config cfg = case_config(c, SB_GAP_RNG_REFERENCE, &split);
        sb_task *task = NULL;
        sb_error err = {0};
        if (sb_task_create(&cfg, &task, &err) != SB_OK)
            fail_msg("%s", err.msg);
        sb_sample s;
        assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
        /* request the samples out of order: the result must not depend on it */
        size_t n = json_array_size(json_object_get(c, "samples"));
        for (size_t r = n; r-- > 0;) {
            const json_t *ref = json_array_get(json_object_get(c, "samples"), r);
            int64_t idx = json_integer_value(json_object_get(ref, "idx"));
            assert_int_equal(sb_task_sample(task, split, idx, &s, &err), SB_OK);
            char what[128];
            snprintf(what, sizeof what, "%s sample %lld",
                     json_string_value(json_object_get(c, "description")), (long long)idx);
            check_exact(task, &s, ref, what);
            check_frames(task, split, idx, &s);
            n_checked++;
        }
        sb_sample_free(&s);
        sb_task_free(task);
    }
    assert_int_equal(n_checked, 20);
}

static void test_derived_stream_structure(void **state)
{
    (void)state;
    size_t ci;
    json_t *c;
    json_array_foreach (json_object_get(vectors, "cases"), ci, c) {
        sb_split split;
        sb_task_config cfg = case_config(c, SB_GAP_RNG_DERIVED, &split);
        sb_task *task = NULL;
        sb_error err = {0};
        assert_int_equal(sb_task_create(&cfg, &task, &err), SB_OK);
        const sb_grammar *g = task->grammar;
        int deterministic = split == SB_SPLIT_TEST && cfg.gap_prob >= 1.0 && !cfg.grammar_gap;
        sb_sample s;
        assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
        int max_gap = (int)ceil(
            (split == SB_SPLIT_TRAIN ? cfg.train_gap_max : sb_task_test_duration(task)) / 0.1);
        int64_t gaps_total = 0;
        for (int64_t idx = 0; idx < 200; idx++) {
            assert_int_equal(sb_task_sample(task, split, idx, &s, &err), SB_OK);
            int next = 0;
            for (int k = 0; k < s.n_elements; k++) {
                if (k < cfg.gap_start)
                    assert_int_equal(s.gap[k], 0);
                assert_true(s.gap[k] >= 0 && s.gap[k] <= max_gap);
                for (int r = 0; cfg.grammar_gap && r < s.gap[k]; r++) {
                    int cls = s.gap_class[next++];
                    uint64_t bit = 1ull << cls;
                    assert_true((g->forbidden_classes[s.state[k]] & bit) != 0);
                    /* and no successor of the state has that class */
                    int st = s.state[k];
                    for (int e = g->succ_offset[st]; e < g->succ_offset[st + 1]; e++)
                        assert_int_not_equal(g->state_class[g->succ[e]], cls);
                }
                gaps_total += s.gap[k];
            }
            assert_int_equal(next, s.n_gap_classes);
            check_frames(task, split, idx, &s);
        }
        if (deterministic) {
            size_t r;
            json_t *ref;
            json_array_foreach (json_object_get(c, "samples"), r, ref) {
                int64_t idx = json_integer_value(json_object_get(ref, "idx"));
                assert_int_equal(sb_task_sample(task, split, idx, &s, &err), SB_OK);
                check_exact(task, &s, ref, "derived stream, fixed test gaps");
            }
        }
        assert_true(gaps_total > 0);
        sb_sample_free(&s);
        sb_task_free(task);
    }
}

/* Derived streams: train and test draws differ, and the gap_prob rate is right. */
static void test_derived_stream_statistics(void **state)
{
    (void)state;
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = 12, cfg.grammar.amb = 3, cfg.grammar.amb_depth = 4;
    cfg.train_seqlen_max = cfg.test_seqlen_max = 50;
    cfg.train_gap_max = 1.0;
    cfg.gap_prob = 0.3;
    cfg.gap_start = 10;
    cfg.grammar_gap = 1;
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&cfg, &task, &err), SB_OK);
    sb_sample s;
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    long gapped = 0, eligible = 0, hist[11] = {0};
    for (int64_t i = 0; i < 2000; i++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, i, &s, &err), SB_OK);
        for (int k = cfg.gap_start; k < s.n_elements; k++) {
            if (task->grammar->forbidden_classes[s.state[k]] == 0)
                continue;
            eligible++;
            gapped += s.gap[k] > 0;
            hist[s.gap[k]]++;
        }
    }
    double rate = (double)gapped / (double)eligible;
    assert_true(fabs(rate - 0.3) < 0.01);
    /* durations round(U(0.1, 1.0), 1): 1 and 10 frames half as likely as 2..9 */
    assert_true(hist[1] > 0 && hist[10] > 0);
    double mid = (double)(hist[5] + hist[6]) / 2.0;
    assert_true(fabs((double)hist[1] / mid - 0.5) < 0.1);
    assert_true(fabs((double)hist[10] / mid - 0.5) < 0.1);
    /* protocol reference: test sequences equal training sequences, gaps differ */
    sb_sample t;
    assert_int_equal(sb_sample_alloc(task, &t, &err), SB_OK);
    assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, 7, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(task, SB_SPLIT_TEST, 7, &t, &err), SB_OK);
    assert_memory_equal(s.state, t.state, (size_t)s.n_elements * sizeof *s.state);
    sb_sample_free(&t);
    sb_sample_free(&s);
    sb_task_free(task);
}

/* The clean protocol moves the test set past the training set. */
static void test_clean_protocol_is_disjoint(void **state)
{
    (void)state;
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = 9, cfg.grammar.amb = 8, cfg.grammar.amb_depth = 8;
    cfg.train_seqlen_max = cfg.test_seqlen_max = 30;
    cfg.dataset_size = 100;
    cfg.protocol = SB_PROTOCOL_CLEAN;
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&cfg, &task, &err), SB_OK);
    assert_int_equal(sb_task_sequence_index(task, SB_SPLIT_TEST, 3), 103);
    assert_int_equal(sb_task_sequence_index(task, SB_SPLIT_TRAIN, 3), 3);
    sb_sample a, b;
    assert_int_equal(sb_sample_alloc(task, &a, &err), SB_OK);
    assert_int_equal(sb_sample_alloc(task, &b, &err), SB_OK);
    assert_int_equal(sb_task_sample(task, SB_SPLIT_TEST, 3, &a, &err), SB_OK);
    assert_int_equal(
        sb_sampler_generate(&task->sampler[SB_SPLIT_TRAIN], 103, b.state, NULL, NULL, &err), SB_OK);
    assert_memory_equal(a.state, b.state, 30 * sizeof *a.state);
    sb_sample_free(&a);
    sb_sample_free(&b);
    sb_task_free(task);
}

/* A split's checksum does not depend on the number of threads. */
static void test_checksum_threads(void **state)
{
    (void)state;
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = 12, cfg.grammar.amb = 3, cfg.grammar.amb_depth = 4;
    cfg.train_seqlen_max = cfg.test_seqlen_max = 60;
    cfg.train_gap_max = 1.0;
    cfg.grammar_gap = 1;
    cfg.gap_prob = 0.5;
    cfg.dataset_size = 3000;
    sb_task *task = NULL;
    sb_error err = {0};
    assert_int_equal(sb_task_create(&cfg, &task, &err), SB_OK);
    uint64_t h1 = 0, h2 = 0, h3 = 0;
    int64_t sym = 0;
    assert_int_equal(sb_task_split_checksum(task, SB_SPLIT_TRAIN, 1, &h1, &sym, &err), SB_OK);
    assert_int_equal(sb_task_split_checksum(task, SB_SPLIT_TRAIN, 2, &h2, NULL, &err), SB_OK);
    assert_int_equal(sb_task_split_checksum(task, SB_SPLIT_TRAIN, 3, &h3, NULL, &err), SB_OK);
    assert_true(h1 == h2 && h2 == h3);
    assert_int_equal(sym, 3000 * 60);
    uint64_t ht = 0;
    assert_int_equal(sb_task_split_checksum(task, SB_SPLIT_TEST, 2, &ht, NULL, &err), SB_OK);
    assert_true(ht != h1);
    sb_task_free(task);
}

static void test_bad_task_configs(void **state)
{
    (void)state;
    sb_task_config base = sb_task_config_default(), c;
    sb_error err = {0};
    c = base, c.train_gap_min = 2.0, c.train_gap_max = 1.0;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--train_gap_min"));
    c = base, c.gap_prob = 1.5;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--gap_prob"));
    c = base, c.train_noise = -0.1;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    c = base, c.train_seqlen_min = 300;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--train_seqlen_min"));
    c = base, c.test_seqlen_max = 1;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    c = base, c.dataset_size = 0;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    c = base, c.gap_start = -1;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    c = base, c.train_gap_max = 5000.0;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    c = base, c.test_dur = (double)NAN;
    assert_int_equal(sb_task_config_check(&c, &err), SB_ERR_INVALID);
    /* the reference gap stream needs seed * idx < 2^32 */
    c = base;
    c.grammar.vocab = 9, c.grammar.amb = 8, c.grammar.amb_depth = 8;
    c.grammar.seed = 3000000000u;
    c.train_seqlen_max = c.test_seqlen_max = 20;
    c.gap_rng = SB_GAP_RNG_REFERENCE;
    sb_task *task = NULL;
    assert_int_equal(sb_task_create(&c, &task, &err), SB_OK);
    sb_sample s;
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, 1, &s, &err), SB_OK);
    assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, 2, &s, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "2^32"));
    sb_sample_free(&s);
    sb_task_free(task);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_stream_exact),
        cmocka_unit_test(test_derived_stream_structure),
        cmocka_unit_test(test_derived_stream_statistics),
        cmocka_unit_test(test_clean_protocol_is_disjoint),
        cmocka_unit_test(test_checksum_threads),
        cmocka_unit_test(test_bad_task_configs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

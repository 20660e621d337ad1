/*
 * test_splits.c - the validation split (docs/task.md, "Splits"; issue 36):
 *   1. its samples come from sequences neither training nor the test uses, under both
 *      protocols (sample i: sequence dataset_size + test_size + i), and differ from the
 *      test's samples of the same index;
 *   2. they are drawn as the test's: the test's element count and its fixed gap, while
 *      training gaps vary;
 *   3. its size: --valid_size, by default the test's, 0 for none (then its evaluation is
 *      NaN, not an error);
 *   4. the public API reads it (sb_task_read_batch with SB_SPLIT_VALID, the split's names);
 *   5. under --gap_rng reference its gap decisions continue the test's stream: valid sample
 *      i decides as test sample test_size + i would.
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

#include "config/run_config.h"
#include "model/model.h"
#include "task/task.h"
#include "train/run_setup.h"
#include "train/trainer.h"

static sb_task_config task_config(sb_protocol protocol)
{
    sb_task_config c = sb_run_config_default().task;
    c.grammar.vocab = 9, c.grammar.amb = 8, c.grammar.grammar_scale = 1;
    c.grammar.seed = 5;
    c.train_seqlen_max = 30;
    c.test_seqlen_max = 20;
    c.train_gap_min = 0.1, c.train_gap_max = 0.6;
    c.test_dur = 0.4;
    c.dataset_size = 50;
    c.test_size = 10;
    c.protocol = protocol;
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

static void test_disjoint_sequences(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        sb_task_config c = task_config(p == 0 ? SB_PROTOCOL_REFERENCE : SB_PROTOCOL_CLEAN);
        sb_task *t = make(&c);
        assert_int_equal(sb_task_split_size(t, SB_SPLIT_VALID), 10); /* default: the test's */
        uint64_t test_end = p == 0 ? 10 : 60; /* reference: the first training sequences */
        for (int64_t i = 0; i < 10; i++) {
            uint64_t v = sb_task_sequence_index(t, SB_SPLIT_VALID, i);
            assert_int_equal(v, 60 + (uint64_t)i);
            assert_true(v >= 50 && v >= test_end); /* past training and the test */
        }
        /* the samples differ from the test's of the same index */
        sb_sample a, b;
        sb_error err = {0};
        assert_int_equal(sb_sample_alloc(t, &a, &err), SB_OK);
        assert_int_equal(sb_sample_alloc(t, &b, &err), SB_OK);
        int differ = 0;
        for (int64_t i = 0; i < 10; i++) {
            assert_int_equal(sb_task_sample(t, SB_SPLIT_TEST, i, &a, &err), SB_OK);
            assert_int_equal(sb_task_sample(t, SB_SPLIT_VALID, i, &b, &err), SB_OK);
            differ += a.n_elements != b.n_elements ||
                      memcmp(a.state, b.state, (size_t)a.n_elements * sizeof *a.state) != 0;
        }
        assert_true(differ >= 8);
        sb_sample_free(&a);
        sb_sample_free(&b);
        sb_task_free(t);
    }
}

static void test_drawn_as_the_test(void **state)
{
    (void)state;
    sb_task_config c = task_config(SB_PROTOCOL_CLEAN);
    sb_task *t = make(&c);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &s, &err), SB_OK);
    int train_gaps[64] = {0};
    for (int64_t i = 0; i < 10; i++) {
        assert_int_equal(sb_task_sample(t, SB_SPLIT_VALID, i, &s, &err), SB_OK);
        assert_int_equal(s.n_elements, 20); /* test_seqlen_max, not train_seqlen_max */
        for (int k = 0; k < s.n_elements; k++)
            assert_true(s.gap[k] == 0 || s.gap[k] == 4); /* test_dur 0.4 s: 4 frames */
        assert_int_equal(sb_task_sample(t, SB_SPLIT_TRAIN, i, &s, &err), SB_OK);
        assert_int_equal(s.n_elements, 30);
        for (int k = 0; k < s.n_elements; k++)
            train_gaps[s.gap[k] < 63 ? s.gap[k] : 63] = 1;
    }
    int distinct = 0;
    for (int g = 1; g < 64; g++)
        distinct += train_gaps[g];
    assert_true(distinct >= 3); /* training gaps vary (1 to 6 frames) */
    sb_sample_free(&s);
    sb_task_free(t);
}

static void test_size(void **state)
{
    (void)state;
    sb_task_config c = task_config(SB_PROTOCOL_CLEAN);
    c.valid_size = 7;
    sb_task *t = make(&c);
    assert_int_equal(sb_task_split_size(t, SB_SPLIT_VALID), 7);
    sb_task_free(t);
    /* none: its evaluation is unknown, not an error */
    sb_run_config run = sb_run_config_default();
    snprintf(run.model, sizeof run.model, "gru");
    run.task = task_config(SB_PROTOCOL_CLEAN);
    run.task.valid_size = 0;
    run.feat_size = 8;
    run.layers = 1;
    t = make(&run.task);
    sb_model_config mc = sb_run_config_model(&run, t->n_inputs, t->grammar->d_output);
    sb_model *m = NULL;
    sb_error err = {0};
    assert_int_equal(sb_model_create(&mc, 1, &m, &err), SB_OK);
    double loss = 0, acc = 0;
    assert_int_equal(sb_evaluate_split(t, SB_SPLIT_VALID, m, 5, 1.0, &loss, &acc, &err), SB_OK);
    assert_true(isnan(loss) && isnan(acc));
    /* a validation split of 10: finite, and not the test's numbers */
    sb_task_free(t);
    run.task.valid_size = 10;
    t = make(&run.task);
    double tloss = 0, tacc = 0;
    assert_int_equal(sb_evaluate_split(t, SB_SPLIT_VALID, m, 5, 1.0, &loss, &acc, &err), SB_OK);
    assert_int_equal(sb_evaluate_split(t, SB_SPLIT_TEST, m, 5, 1.0, &tloss, &tacc, &err), SB_OK);
    assert_true(isfinite(loss) && isfinite(acc) && isfinite(tloss));
    assert_true(loss != tloss);
    sb_model_free(m);
    sb_task_free(t);
}

static void test_public_api(void **state)
{
    (void)state;
    assert_string_equal(sb_split_name(SB_SPLIT_VALID), "valid");
    assert_string_equal(sb_split_name(SB_SPLIT_TEST), "test");
    assert_string_equal(sb_split_name((sb_split)7), "?");
    sb_split s = SB_SPLIT_TRAIN;
    assert_int_equal(sb_split_from_name("valid", &s), 0);
    assert_int_equal(s, SB_SPLIT_VALID);
    assert_int_equal(sb_split_from_name("validation", &s), -1);
    sb_task_config c = task_config(SB_PROTOCOL_REFERENCE);
    sb_task *t = make(&c);
    uint64_t h_valid = 0, h_test = 0;
    sb_error err = {0};
    assert_int_equal(sb_task_checksum(t, SB_SPLIT_VALID, 1, &h_valid, NULL, &err), SB_OK);
    assert_int_equal(sb_task_checksum(t, SB_SPLIT_TEST, 1, &h_test, NULL, &err), SB_OK);
    assert_true(h_valid != h_test);
    assert_int_equal(sb_task_checksum(t, (sb_split)3, 1, &h_test, NULL, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "SB_SPLIT_VALID"));
    sb_task_facts f;
    sb_task_get_facts(t, &f);
    assert_int_equal(f.valid_size, 10);
    sb_task_free(t);
}

static void test_reference_gap_stream(void **state)
{
    (void)state;
    /* a test split twice as long: its samples 10..19 are the validation split's 0..9 as far
     * as the gap decisions go (the legacy durations are fixed by test_dur here) */
    sb_task_config c = task_config(SB_PROTOCOL_CLEAN);
    c.gap_rng = SB_GAP_RNG_REFERENCE;
    c.gap_prob = 0.5;
    sb_task *t = make(&c);
    sb_task_config longer = c;
    longer.test_size = 20;
    sb_task *t2 = make(&longer);
    sb_sample a, b;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(t, &a, &err), SB_OK);
    assert_int_equal(sb_sample_alloc(t2, &b, &err), SB_OK);
    int same = 0, gaps = 0;
    for (int64_t i = 0; i < 10; i++) {
        assert_int_equal(sb_task_sample(t, SB_SPLIT_VALID, i, &a, &err), SB_OK);
        assert_int_equal(sb_task_sample(t2, SB_SPLIT_TEST, 10 + i, &b, &err), SB_OK);
        for (int k = 0; k < 20; k++) {
            same += (a.gap[k] > 0) == (b.gap[k] > 0);
            gaps += a.gap[k] > 0;
        }
    }
    assert_int_equal(same, 200);
    assert_true(gaps > 50 && gaps < 150); /* gap_prob 0.5: decisions, not all one way */
    sb_sample_free(&a);
    sb_sample_free(&b);
    sb_task_free(t);
    sb_task_free(t2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_sequences),
        cmocka_unit_test(test_drawn_as_the_test),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_public_api),
        cmocka_unit_test(test_reference_gap_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

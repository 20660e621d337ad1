/*
 * test_sequence.c - state and class sequences against every sample of the reference
 * vector files, plus the sampler's failure mode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "task/grammar.h"
#include "task/sequence.h"
#include "test_util.h"

static int samples_checked;

static void check_file(const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, "reference/%s", file);
    json_t *ref = test_load_json(rel);
    json_t *c = json_object_get(ref, "config");
    sb_grammar_config cfg = sb_grammar_config_default();
    cfg.vocab = (int)json_integer_value(json_object_get(c, "alphabet_size"));
    cfg.amb = (int)json_integer_value(json_object_get(c, "ambiguities"));
    cfg.amb_depth = (int)json_integer_value(json_object_get(c, "ambiguity_depth"));
    cfg.seed = test_json_u64(json_object_get(c, "seed"));
    sb_grammar *g = NULL;
    sb_error err = {0};
    if (sb_grammar_generate(&cfg, &g, &err) != SB_OK)
        fail_msg("%s: %s", file, err.msg);

    size_t i;
    json_t *set;
    json_array_foreach (json_object_get(ref, "sample_sets"), i, set) {
        int lo = (int)json_integer_value(json_object_get(set, "seq_len_min"));
        int hi = (int)json_integer_value(json_object_get(set, "seq_len_max"));
        int total = (int)json_integer_value(json_object_get(set, "combined_seq_length"));
        sb_sampler sp;
        assert_int_equal(sb_sampler_init(&sp, g, cfg.seed, lo, hi, total, &err), SB_OK);
        uint16_t *states = malloc((size_t)total * sizeof *states);
        size_t k;
        json_t *sample;
        json_array_foreach (json_object_get(set, "samples"), k, sample) {
            uint64_t idx = test_json_u64(json_object_get(sample, "idx"));
            if (sb_sampler_generate(&sp, idx, states, NULL, NULL, &err) != SB_OK)
                fail_msg("%s idx %llu: %s", file, (unsigned long long)idx, err.msg);
            json_t *cls = json_object_get(sample, "class_seq");
            json_t *st = json_object_get(sample, "state_seq");
            assert_int_equal(json_array_size(cls), (size_t)total);
            assert_int_equal(json_array_size(st), (size_t)total);
            for (int e = 0; e < total; e++) {
                const char *want = json_string_value(json_array_get(st, (size_t)e));
                if (strcmp(g->state_name[states[e]], want) != 0)
                    fail_msg("%s (len %d-%d, combined %d) idx %llu element %d: %s, expected %s",
                             file, lo, hi, total, (unsigned long long)idx, e,
                             g->state_name[states[e]], want);
                assert_int_equal(g->state_class[states[e]],
                                 json_integer_value(json_array_get(cls, (size_t)e)));
            }
            samples_checked++;
        }
        free(states);
        sb_sampler_free(&sp);
    }
    sb_grammar_free(g);
    json_decref(ref);
}

static void test_reference_samples(void **state)
{
    (void)state;
    json_t *index = test_load_json("reference/index.json");
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(index, "files"), i, f)
        check_file(json_string_value(json_object_get(f, "file")));
    json_decref(index);
    print_message("%d reference samples reproduced\n", samples_checked);
    assert_true(samples_checked >= 200);
}

/* The worked example of docs/task.md: sample 0 with string limit 20. */
static void test_worked_example(void **state)
{
    (void)state;
    sb_grammar_config cfg = {
        .vocab = 5, .amb = 2, .amb_depth = 2, .seed = 1, .transition_density = 0.4};
    sb_grammar *g = NULL;
    sb_error err = {0};
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    sb_sampler sp;
    assert_int_equal(sb_sampler_init(&sp, g, 1, 1, 20, 20, &err), SB_OK);
    uint16_t states[20];
    int strings = 0;
    long draws = 0;
    assert_int_equal(sb_sampler_generate(&sp, 0, states, &strings, &draws, &err), SB_OK);
    const char *want[] = {"C", "A1", "A1", "A1", "#",  "A0", "B1", "#", "A0", "B1",
                          "#", "A0", "B1", "#",  "A0", "B1", "#",  "C", "A1", "#"};
    for (int e = 0; e < 20; e++)
        assert_string_equal(g->state_name[states[e]], want[e]);
    assert_int_equal(strings, 6);
    assert_true(draws >= strings);
    sb_sampler_free(&sp);
    sb_grammar_free(g);
}

/* Seeds collide through the product seed * idx (reference quirk 3). */
static void test_seed_product(void **state)
{
    (void)state;
    sb_grammar_config cfg = {
        .vocab = 9, .amb = 8, .amb_depth = 8, .seed = 2, .transition_density = 0.4};
    sb_grammar *g = NULL;
    sb_error err = {0};
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    sb_sampler a, b;
    assert_int_equal(sb_sampler_init(&a, g, 2, 1, 30, 30, &err), SB_OK);
    assert_int_equal(sb_sampler_init(&b, g, 3, 1, 30, 30, &err), SB_OK);
    uint16_t sa[30], sb[30];
    assert_int_equal(sb_sampler_generate(&a, 3, sa, NULL, NULL, &err), SB_OK); /* 2*3 */
    assert_int_equal(sb_sampler_generate(&b, 2, sb, NULL, NULL, &err), SB_OK); /* 3*2 */
    assert_memory_equal(sa, sb, sizeof sa);
    assert_int_equal(sb_sampler_generate(&b, 5, sb, NULL, NULL, &err), SB_OK);
    assert_memory_not_equal(sa, sb, sizeof sa);
    sb_sampler_free(&a);
    sb_sampler_free(&b);
    sb_grammar_free(g);
}

/* The fast interleaved form equals the plain form, sample for sample. */
static void test_fast_equals_plain(void **state)
{
    (void)state;
    struct {
        int vocab, amb, depth, lo, hi, total;
        uint64_t seed;
    } cases[] = {
        {5, 2, 2, 1, 20, 50, 1},      {9, 8, 8, 1, 30, 30, 2},     {12, 3, 4, 3, 20, 61, 3},
        {41, 40, 40, 1, 200, 200, 1}, {25, 24, 24, 5, 60, 100, 7}, {20, 0, 1, 1, 12, 40, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sb_grammar_config cfg = {.vocab = cases[c].vocab,
                                 .amb = cases[c].amb,
                                 .amb_depth = cases[c].depth,
                                 .seed = cases[c].seed,
                                 .transition_density = 0.4};
        sb_grammar *g = NULL;
        sb_error err = {0};
        if (sb_grammar_generate(&cfg, &g, &err) != SB_OK)
            fail_msg("%s", err.msg);
        sb_sampler sp;
        assert_int_equal(
            sb_sampler_init(&sp, g, cfg.seed, cases[c].lo, cases[c].hi, cases[c].total, &err),
            SB_OK);
        enum { N = 37 }; /* not a multiple of the lane count */
        int total = cases[c].total;
        uint16_t *fast = malloc((size_t)N * (size_t)total * sizeof *fast);
        uint16_t *plain = malloc((size_t)total * sizeof *plain);
        uint16_t *rows[N];
        uint64_t idx[N];
        for (int r = 0; r < N; r++) {
            idx[r] = (uint64_t)(r * 7919 % 1000); /* scattered, unordered indices */
            rows[r] = fast + (size_t)r * (size_t)total;
        }
        assert_int_equal(sb_sampler_generate_many(&sp, idx, N, rows, &err), SB_OK);
        for (int r = 0; r < N; r++) {
            assert_int_equal(sb_sampler_generate(&sp, idx[r], plain, NULL, NULL, &err), SB_OK);
            assert_memory_equal(rows[r], plain, (size_t)total * sizeof *plain);
        }
        free(fast);
        free(plain);
        sb_sampler_free(&sp);
        sb_grammar_free(g);
    }
}

static void test_bad_lengths(void **state)
{
    (void)state;
    sb_grammar_config cfg = {
        .vocab = 5, .amb = 2, .amb_depth = 2, .seed = 1, .transition_density = 0.4};
    sb_grammar *g = NULL;
    sb_error err = {0};
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    sb_sampler sp;
    assert_int_equal(sb_sampler_init(&sp, g, 1, 1, 1, 10, &err), SB_ERR_INVALID);
    assert_int_equal(sb_sampler_init(&sp, g, 1, 8, 5, 10, &err), SB_ERR_INVALID);
    assert_int_equal(sb_sampler_init(&sp, g, 1, 0, 5, 10, &err), SB_ERR_INVALID);
    assert_int_equal(sb_sampler_init(&sp, g, 1, 1, 5, 0, &err), SB_ERR_INVALID);
    /* strings of this grammar end after a few states: exactly 1000 never comes up, so the
     * sampler gives up after 10001 draws as the reference does */
    assert_int_equal(sb_sampler_init(&sp, g, 1, 1000, 1000, 10, &err), SB_OK);
    uint16_t states[10];
    assert_int_equal(sb_sampler_generate(&sp, 0, states, NULL, NULL, &err), SB_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "10001"));
    uint16_t *row = states;
    uint64_t idx = 3;
    memset(&err, 0, sizeof err);
    assert_int_equal(sb_sampler_generate_many(&sp, &idx, 1, &row, &err), SB_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "sample 3"));
    sb_sampler_free(&sp);
    sb_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example), cmocka_unit_test(test_reference_samples),
        cmocka_unit_test(test_seed_product),   cmocka_unit_test(test_fast_equals_plain),
        cmocka_unit_test(test_bad_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

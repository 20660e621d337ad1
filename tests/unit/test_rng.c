/*
 * test_rng.c - the random number generators against raw outputs recorded from numpy and
 * CPython (tests/data/reference/rng_vectors.json).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "test_util.h"

static json_t *vectors;

static int setup(void **state)
{
    (void)state;
    vectors = test_load_json("reference/rng_vectors.json");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

static void assert_int_array(const json_t *expected, const int *got, size_t n, const char *what)
{
    assert_int_equal(json_array_size(expected), n);
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(expected, i)) != got[i])
            fail_msg("%s[%zu]: expected %lld, got %d", what, i,
                     (long long)json_integer_value(json_array_get(expected, i)), got[i]);
}

static void assert_double_exact(double expected, double got, const char *what)
{
    if (memcmp(&expected, &got, sizeof got) != 0)
        fail_msg("%s: expected %.17g, got %.17g", what, expected, got);
}

static void test_seedseq_and_pcg64_seeding(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "numpy_default_rng");
    assert_true(json_array_size(cases) >= 8);
    size_t k;
    json_t *c;
    json_array_foreach (cases, k, c) {
        uint64_t seed = test_json_u64(json_object_get(c, "seed"));
        uint32_t words[8];
        sb_seedseq_generate_u64(seed, words);
        json_t *expected = json_object_get(c, "seedseq_generate_state_u32x8");
        for (size_t i = 0; i < 8; i++)
            assert_int_equal(words[i], json_integer_value(json_array_get(expected, i)));
        sb_pcg64 rng;
        sb_pcg64_init(&rng, seed);
        sb_u128 st =
            test_parse_u128(json_string_value(json_object_get(c, "pcg64_state_after_seeding")));
        sb_u128 inc = test_parse_u128(json_string_value(json_object_get(c, "pcg64_inc")));
        assert_true(rng.state == st);
        assert_true(rng.inc == inc);
        json_t *first = json_object_get(c, "first_next64");
        for (size_t i = 0; i < json_array_size(first); i++) {
            uint64_t want = test_json_u64(json_array_get(first, i));
            uint64_t got = sb_pcg64_next64(&rng);
            if (want != got)
                fail_msg("seed %llu next64[%zu]: expected %llu, got %llu", (unsigned long long)seed,
                         i, (unsigned long long)want, (unsigned long long)got);
        }
    }
}

/* One Generator, methods called in the recorded order: the 32-bit buffer carries over. */
static void test_generator_call_sequence(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "numpy_default_rng");
    size_t k;
    json_t *c;
    json_array_foreach (cases, k, c) {
        uint64_t seed = test_json_u64(json_object_get(c, "seed"));
        json_t *seq = json_object_get(c, "call_sequence");
        sb_pcg64 rng;
        sb_pcg64_init(&rng, seed);
        int v = (int)sb_pcg64_bounded(&rng, 99);
        assert_int_equal(v, json_integer_value(json_object_get(seq, "integers_0_100")));
        assert_double_exact(json_real_value(json_object_get(seq, "then_random")),
                            sb_pcg64_random(&rng), "random");
        int ints[5];
        for (int i = 0; i < 5; i++)
            ints[i] = (int)sb_pcg64_bounded(&rng, 3);
        assert_int_array(json_object_get(seq, "then_integers_4"), ints, 5, "integers(4)");
        int perm40[40], perm3[3];
        sb_pcg64_permutation(&rng, 40, perm40);
        assert_int_array(json_object_get(seq, "then_permutation_40"), perm40, 40, "perm(40)");
        sb_pcg64_permutation(&rng, 3, perm3);
        assert_int_array(json_object_get(seq, "then_permutation_3"), perm3, 3, "perm(3)");
        json_t *r2 = json_object_get(seq, "then_random_2");
        for (size_t i = 0; i < 2; i++)
            assert_double_exact(json_real_value(json_array_get(r2, i)), sb_pcg64_random(&rng),
                                "random (second pair)");
        int choice[4];
        sb_pcg64_choice_noreplace(&rng, 1601, 4, choice);
        assert_int_array(json_object_get(seq, "then_choice_1601_4_noreplace"), choice, 4,
                         "choice(1601, 4)");
        sb_pcg64_choice_noreplace(&rng, 7, 4, choice);
        assert_int_array(json_object_get(seq, "then_choice_7_4_noreplace"), choice, 4,
                         "choice(7, 4)");
    }
}

static void test_cpython_random(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "cpython_random");
    assert_true(json_array_size(cases) >= 3);
    size_t k;
    json_t *c;
    json_array_foreach (cases, k, c) {
        uint64_t seed = test_json_u64(json_object_get(c, "seed"));
        sb_mt19937 mt;
        sb_pyrandom_seed(&mt, seed);
        json_t *bits = json_object_get(c, "first_getrandbits32");
        for (size_t i = 0; i < json_array_size(bits); i++)
            assert_int_equal(sb_pyrandom_getrandbits(&mt, 32),
                             json_integer_value(json_array_get(bits, i)));
        sb_pyrandom_seed(&mt, seed);
        int s5[5], s40[40], s2[2];
        sb_pyrandom_sample(&mt, 40, 5, s5);
        assert_int_array(json_object_get(c, "sample_range40_k5"), s5, 5, "sample(40, 5)");
        sb_pyrandom_sample(&mt, 40, 40, s40);
        assert_int_array(json_object_get(c, "then_sample_range40_k40"), s40, 40, "sample(40, 40)");
        sb_pyrandom_sample(&mt, 4, 2, s2);
        assert_int_array(json_object_get(c, "then_sample_range4_k2"), s2, 2, "sample(4, 2)");
        assert_double_exact(json_real_value(json_object_get(c, "then_random")),
                            sb_mt19937_res53(&mt), "random.random()");
    }
}

static void test_numpy_legacy(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "numpy_legacy_seed");
    assert_true(json_array_size(cases) >= 3);
    size_t k;
    json_t *c;
    json_array_foreach (cases, k, c) {
        uint32_t seed = (uint32_t)test_json_u64(json_object_get(c, "seed"));
        sb_mt19937 mt;
        sb_legacy_seed(&mt, seed);
        json_t *u = json_object_get(c, "uniform_0.1_1.0");
        for (size_t i = 0; i < json_array_size(u); i++)
            assert_double_exact(json_real_value(json_array_get(u, i)),
                                sb_legacy_uniform(&mt, 0.1, 1.0), "uniform(0.1, 1.0)");
        int ch[4];
        for (int i = 0; i < 4; i++)
            ch[i] = (int)sb_legacy_choice_index(&mt, 17);
        assert_int_array(json_object_get(c, "then_choice_arange_17"), ch, 4, "choice(17)");
    }
}

/* advance(n) must equal n next64 calls. */
static void test_pcg64_advance(void **state)
{
    (void)state;
    sb_pcg64 a, b;
    sb_pcg64_init(&a, 7);
    sb_pcg64_init(&b, 7);
    for (int i = 0; i < 12345; i++)
        (void)sb_pcg64_next64(&a);
    sb_pcg64_advance(&b, 12345);
    assert_true(a.state == b.state);
    assert_true(sb_pcg64_next64(&a) == sb_pcg64_next64(&b));
    sb_pcg64_advance(&b, 0);
    assert_true(a.state == b.state);
}

/* The 32-bit buffer survives 64-bit draws, as in numpy. */
static void test_pcg64_buffer(void **state)
{
    (void)state;
    sb_pcg64 a, b;
    sb_pcg64_init(&a, 3);
    sb_pcg64_init(&b, 3);
    uint64_t w0 = sb_pcg64_next64(&b);
    uint64_t w1 = sb_pcg64_next64(&b);
    assert_int_equal(sb_pcg64_next32(&a), (uint32_t)w0);
    assert_true(sb_pcg64_next64(&a) == w1); /* does not consume the buffered half */
    assert_int_equal(sb_pcg64_next32(&a), (uint32_t)(w0 >> 32));
}

/* bounded(r) stays in [0, r] and hits both ends. */
static void test_bounded_range(void **state)
{
    (void)state;
    sb_pcg64 rng;
    sb_pcg64_init(&rng, 11);
    int seen_lo = 0, seen_hi = 0;
    for (int i = 0; i < 10000; i++) {
        uint32_t v = sb_pcg64_bounded(&rng, 6);
        assert_true(v <= 6);
        seen_lo |= v == 0;
        seen_hi |= v == 6;
        uint32_t w = sb_pcg64_interval(&rng, 6);
        assert_true(w <= 6);
    }
    assert_true(seen_lo && seen_hi);
    assert_int_equal(sb_pcg64_bounded(&rng, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seedseq_and_pcg64_seeding),
        cmocka_unit_test(test_generator_call_sequence),
        cmocka_unit_test(test_cpython_random),
        cmocka_unit_test(test_numpy_legacy),
        cmocka_unit_test(test_pcg64_advance),
        cmocka_unit_test(test_pcg64_buffer),
        cmocka_unit_test(test_bounded_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

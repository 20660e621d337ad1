/*
 * test_cli_json.c - the CLI's JSON against the reference files: `selectivbench grammar
 * --json` must print every field of each reference grammar file with the same values,
 * and `selectivbench data --samples ... --json` the same samples.
 *
 * usage: test_cli_json PATH/TO/selectivbench
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

#include "test_util.h"

static const char *binary;

/* Runs the CLI with the given arguments and parses its standard output as JSON. */
static json_t *run_json(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", binary, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        fail_msg("cannot run %s", cmd);
    json_error_t jerr;
    json_t *root = json_loadf(p, 0, &jerr);
    int rc = pclose(p);
    if (root == NULL || rc != 0)
        fail_msg("'%s' (exit %d) did not print JSON: %s", cmd, rc, jerr.text);
    return root;
}

/* Exact equality of two JSON values, except that reals compare by value. */
static void assert_json_equal(const json_t *want, const json_t *got, const char *where)
{
    if (json_is_number(want) && json_is_number(got)) {
        if (json_number_value(want) != json_number_value(got))
            fail_msg("%s: %.17g, expected %.17g", where, json_number_value(got),
                     json_number_value(want));
        return;
    }
    if (!json_equal((json_t *)want, (json_t *)got)) {
        char *a = json_dumps(want, JSON_COMPACT), *b = json_dumps(got, JSON_COMPACT);
        fail_msg("%s differs:\n  expected %.300s\n  got      %.300s", where, a, b);
    }
}

static void check_grammar_file(const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, "reference/%s", file);
    json_t *ref = test_load_json(rel);
    json_t *c = json_object_get(ref, "config");
    char args[512];
    snprintf(args, sizeof args,
             "grammar --vocab %lld --amb %lld --amb_depth %lld --seed %lld --json",
             (long long)json_integer_value(json_object_get(c, "alphabet_size")),
             (long long)json_integer_value(json_object_get(c, "ambiguities")),
             (long long)json_integer_value(json_object_get(c, "ambiguity_depth")),
             (long long)json_integer_value(json_object_get(c, "seed")));
    json_t *got = run_json(args);
    static const char *exact[] = {"python_seed",  "grammar_attempts", "num_states", "states",
                                  "start_states", "num_transitions",  "successors", "out_prob",
                                  "d_output",     "state_ids"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
        char where[300];
        snprintf(where, sizeof where, "%s: %s", file, exact[i]);
        json_t *g = json_object_get(got, exact[i]);
        if (g == NULL)
            fail_msg("%s missing", where);
        assert_json_equal(json_object_get(ref, exact[i]), g, where);
    }
    /* the config block: every reference key with the same value (grammar_scale is
     * informative in the files: they give the effective sizes) */
    const char *key;
    json_t *val;
    json_object_foreach (c, key, val) {
        if (strcmp(key, "grammar_scale") == 0)
            continue;
        char where[300];
        snprintf(where, sizeof where, "%s: config.%s", file, key);
        assert_json_equal(val, json_object_get(json_object_get(got, "config"), key), where);
    }
    double te_ref = json_real_value(json_object_get(ref, "topological_entropy"));
    double te = json_real_value(json_object_get(got, "topological_entropy"));
    if (!(fabs(te - te_ref) <= 1e-9))
        fail_msg("%s: TE %.17g, expected %.17g", file, te, te_ref);

    /* samples through `data --samples --json` */
    size_t si;
    json_t *set;
    json_array_foreach (json_object_get(ref, "sample_sets"), si, set) {
        char dargs[768];
        size_t n = json_array_size(json_object_get(set, "samples"));
        snprintf(dargs, sizeof dargs,
                 "data --vocab %lld --amb %lld --amb_depth %lld --seed %lld "
                 "--train_seqlen_min %lld --train_seqlen_max %lld --combined_seq_length %lld "
                 "--samples 0-%zu --json",
                 (long long)json_integer_value(json_object_get(c, "alphabet_size")),
                 (long long)json_integer_value(json_object_get(c, "ambiguities")),
                 (long long)json_integer_value(json_object_get(c, "ambiguity_depth")),
                 (long long)json_integer_value(json_object_get(c, "seed")),
                 (long long)json_integer_value(json_object_get(set, "seq_len_min")),
                 (long long)json_integer_value(json_object_get(set, "seq_len_max")),
                 (long long)json_integer_value(json_object_get(set, "combined_seq_length")), n - 1);
        json_t *samples = run_json(dargs);
        char where[300];
        snprintf(where, sizeof where, "%s sample set %zu", file, si);
        assert_json_equal(json_object_get(set, "samples"), json_object_get(samples, "samples"),
                          where);
        json_decref(samples);
    }
    json_decref(got);
    json_decref(ref);
}

static void test_grammar_and_samples_json(void **state)
{
    (void)state;
    json_t *index = test_load_json("reference/index.json");
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(index, "files"), i, f)
        check_grammar_file(json_string_value(json_object_get(f, "file")));
    json_decref(index);
}

/* grammar_scale: --amb alone fixes vocab and depth */
static void test_grammar_scale_flag(void **state)
{
    (void)state;
    json_t *got = run_json("grammar --grammar_scale True --amb 24 --seed 2 --json");
    json_t *ref = test_load_json("reference/v25_a24_scale_seed2.json");
    assert_json_equal(json_object_get(ref, "states"), json_object_get(got, "states"),
                      "grammar_scale states");
    assert_json_equal(json_object_get(ref, "successors"), json_object_get(got, "successors"),
                      "grammar_scale successors");
    json_decref(ref);
    json_decref(got);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/selectivbench\n", argv[0]);
        return 2;
    }
    binary = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar_and_samples_json),
        cmocka_unit_test(test_grammar_scale_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_grammar.c - grammars against the reference vectors: states and their order, start
 * states, the transition list with bit-identical probabilities, state ids, d_output and
 * the topological entropy; plus the bad configurations the generator must refuse.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/timer.h"
#include "task/grammar.h"
#include "test_util.h"

extern void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda,
                   double *wr, double *wi, double *vl, const int *ldvl, double *vr, const int *ldvr,
                   double *work, const int *lwork, int *info);

static sb_grammar_config config_from_json(const json_t *c)
{
    sb_grammar_config cfg = sb_grammar_config_default();
    cfg.vocab = (int)json_integer_value(json_object_get(c, "alphabet_size"));
    cfg.amb = (int)json_integer_value(json_object_get(c, "ambiguities"));
    cfg.amb_depth = (int)json_integer_value(json_object_get(c, "ambiguity_depth"));
    cfg.seed = test_json_u64(json_object_get(c, "seed"));
    cfg.transition_density = json_real_value(json_object_get(c, "transition_density_param"));
    cfg.grammar_scale = 0; /* the files give the effective vocab and depth */
    return cfg;
}

static void check_grammar_file(const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, "reference/%s", file);
    json_t *ref = test_load_json(rel);
    sb_grammar_config cfg = config_from_json(json_object_get(ref, "config"));
    sb_grammar *g = NULL;
    sb_error err = {0};
    if (sb_grammar_generate(&cfg, &g, &err) != SB_OK)
        fail_msg("%s: %s", file, err.msg);

    assert_int_equal(g->python_seed, json_integer_value(json_object_get(ref, "python_seed")));
    assert_int_equal(g->attempts, json_integer_value(json_object_get(ref, "grammar_attempts")));
    json_t *states = json_object_get(ref, "states");
    assert_int_equal(g->n_states, json_array_size(states));
    for (int s = 0; s < g->n_states; s++)
        if (strcmp(g->state_name[s], json_string_value(json_array_get(states, (size_t)s))) != 0)
            fail_msg("%s: state %d is %s, expected %s", file, s, g->state_name[s],
                     json_string_value(json_array_get(states, (size_t)s)));
    json_t *starts = json_object_get(ref, "start_states");
    for (int k = 0; k < SB_START_STATES; k++)
        assert_string_equal(g->state_name[g->start_states[k]],
                            json_string_value(json_array_get(starts, (size_t)k)));

    /* transition list: successors in order, and exact probabilities */
    assert_int_equal(g->n_transitions, json_integer_value(json_object_get(ref, "num_transitions")));
    json_t *succ = json_object_get(ref, "successors");
    json_t *prob = json_object_get(ref, "out_prob");
    for (int s = 0; s < g->n_states; s++) {
        json_t *row = json_array_get(succ, (size_t)s);
        int k = g->succ_offset[s + 1] - g->succ_offset[s];
        if ((size_t)k != json_array_size(row))
            fail_msg("%s: state %s has %d successors, expected %zu", file, g->state_name[s], k,
                     json_array_size(row));
        for (int e = 0; e < k; e++)
            assert_int_equal(g->succ[g->succ_offset[s] + e],
                             json_integer_value(json_array_get(row, (size_t)e)));
        double want = json_real_value(json_array_get(prob, (size_t)s));
        if (memcmp(&want, &g->out_prob[s], sizeof want) != 0)
            fail_msg("%s: out_prob[%d] %.17g, expected %.17g", file, s, g->out_prob[s], want);
    }

    /* state ids: every name and alias of the reference map */
    assert_int_equal(g->d_output, json_integer_value(json_object_get(ref, "d_output")));
    json_t *ids = json_object_get(ref, "state_ids");
    const char *name;
    json_t *id;
    size_t n_names = 0;
    json_object_foreach (ids, name, id) {
        int s = sb_grammar_find_state(g, name);
        if (s < 0)
            fail_msg("%s: state id map names unknown state %s", file, name);
        if (g->state_id[s] != json_integer_value(id))
            fail_msg("%s: id of %s is %d, expected %lld", file, name, g->state_id[s],
                     (long long)json_integer_value(id));
        n_names++;
    }
    assert_true(n_names >= (size_t)g->n_states);

    double te = json_real_value(json_object_get(ref, "topological_entropy"));
    if (!(fabs(te - g->topological_entropy) <= 1e-9))
        fail_msg("%s: TE %.17g, expected %.17g", file, g->topological_entropy, te);

    sb_grammar_free(g);
    json_decref(ref);
}

static void test_reference_grammars(void **state)
{
    (void)state;
    json_t *index = test_load_json("reference/index.json");
    json_t *files = json_object_get(index, "files");
    assert_int_equal(json_array_size(files), 20);
    size_t i;
    json_t *f;
    json_array_foreach (files, i, f)
        check_grammar_file(json_string_value(json_object_get(f, "file")));
    json_decref(index);
}

/* The worked example of docs/task.md, "Grammar". */
static void test_worked_example(void **state)
{
    (void)state;
    sb_grammar_config cfg = {
        .vocab = 5, .amb = 2, .amb_depth = 2, .seed = 1, .transition_density = 0.4};
    sb_grammar *g = NULL;
    sb_error err = {0};
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    assert_int_equal(g->python_seed, 47);
    assert_int_equal(g->attempts, 6);
    const char *names[] = {"C", "D", "A0", "A1", "B0", "B1", "#"};
    for (int s = 0; s < 7; s++)
        assert_string_equal(g->state_name[s], names[s]);
    assert_true(fabs(g->topological_entropy - 0.8491268764026884) <= 1e-12);
    assert_int_equal(g->state_id[sb_grammar_find_state(g, "C0")], 5);
    /* B0 -> D, B1, # with probability 1/3 each; D has only '#' */
    int b0 = sb_grammar_find_state(g, "B0");
    assert_int_equal(g->succ_offset[b0 + 1] - g->succ_offset[b0], 3);
    assert_true(g->out_prob[b0] == 1.0 / 3.0);
    /* forbidden classes of D: everything but '#' */
    int d = sb_grammar_find_state(g, "D");
    assert_true(g->forbidden_classes[d] == 0x1eu);
    sb_grammar_free(g);
}

/* TE by dense LAPACK on the whole corrected table: must agree with the SCC + power
 * iteration path. */
static double dense_te(const sb_grammar *g)
{
    int n = g->n_states;
    double *a = calloc((size_t)n * (size_t)n, sizeof *a);
    for (int s = 0; s < n; s++)
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            a[(size_t)g->succ[e] * (size_t)n + (size_t)s] = 1.0; /* column major A[s][t] */
    for (int k = 0; k < SB_START_STATES; k++)
        a[(size_t)g->start_states[k] * (size_t)n + (size_t)g->end_state] = 1.0;
    double *wr = malloc((size_t)n * sizeof *wr), *wi = malloc((size_t)n * sizeof *wi);
    int lwork = 8 * n + 64, info = 0, one = 1;
    double *work = malloc((size_t)lwork * sizeof *work), dummy = 0;
    dgeev_("N", "N", &n, a, &n, wr, wi, &dummy, &one, &dummy, &one, work, &lwork, &info);
    assert_int_equal(info, 0);
    double rho = wr[0];
    for (int i = 1; i < n; i++)
        if (wr[i] > rho)
            rho = wr[i];
    free(a), free(wr), free(wi), free(work);
    return log(rho);
}

static void test_entropy_against_dense(void **state)
{
    (void)state;
    struct {
        int vocab, amb, depth;
    } configs[] = {{5, 2, 2}, {6, 0, 1}, {9, 8, 8}, {12, 3, 4}, {20, 5, 3}, {25, 24, 24}};
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
        for (uint64_t seed = 1; seed <= 6; seed++) {
            sb_grammar_config cfg = {.vocab = configs[c].vocab,
                                     .amb = configs[c].amb,
                                     .amb_depth = configs[c].depth,
                                     .seed = seed,
                                     .transition_density = 0.4};
            sb_grammar *g = NULL;
            sb_error err = {0};
            if (sb_grammar_generate(&cfg, &g, &err) != SB_OK)
                fail_msg("%s", err.msg);
            double want = dense_te(g);
            if (!(fabs(want - g->topological_entropy) <= 1e-9))
                fail_msg("vocab %d amb %d seed %llu: TE %.17g, dense %.17g", cfg.vocab, cfg.amb,
                         (unsigned long long)seed, g->topological_entropy, want);
            sb_grammar_free(g);
        }
    }
}

/* grammar_scale derives vocab and depth from amb. */
static void test_grammar_scale(void **state)
{
    (void)state;
    sb_grammar_config cfg = {.vocab = 41,
                             .amb = 8,
                             .amb_depth = 40,
                             .grammar_scale = 1,
                             .seed = 1,
                             .transition_density = 0.4};
    sb_grammar *g = NULL;
    sb_error err = {0};
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    assert_int_equal(g->config.vocab, 9);
    assert_int_equal(g->config.amb_depth, 8);
    assert_int_equal(g->n_states, 65);
    assert_int_equal(g->n_transitions, 225); /* v9_a8_scale_seed1 */
    sb_grammar_free(g);
}

static void expect_error(sb_grammar_config cfg, sb_status status, const char *needle)
{
    sb_grammar *g = NULL;
    sb_error err = {0};
    sb_status st = sb_grammar_generate(&cfg, &g, &err);
    if (st != status)
        fail_msg("expected status %d for '%s', got %d (%s)", status, needle, st, err.msg);
    assert_null(g);
    if (strstr(err.msg, needle) == NULL)
        fail_msg("message '%s' does not mention '%s'", err.msg, needle);
}

static void test_bad_configurations(void **state)
{
    (void)state;
    sb_grammar_config base = sb_grammar_config_default();
    sb_grammar_config c;
    c = base, c.vocab = 10, c.amb = 12;
    expect_error(c, SB_ERR_INVALID, "--amb 12");
    c = base, c.amb_depth = 0;
    expect_error(c, SB_ERR_INVALID, "--amb_depth 0");
    c = base, c.vocab = 60, c.amb = 3;
    expect_error(c, SB_ERR_INVALID, "--vocab 60");
    c = base, c.vocab = 1, c.amb = 0;
    expect_error(c, SB_ERR_INVALID, "--vocab 1");
    c = base, c.vocab = 4, c.amb = 0, c.amb_depth = 1;
    expect_error(c, SB_ERR_INVALID, "states");
    c = base, c.amb = -1;
    expect_error(c, SB_ERR_INVALID, "--amb -1");
    c = base, c.grammar_scale = 1, c.amb = 60;
    expect_error(c, SB_ERR_INVALID, "grammar_scale");
    /* no edges at all: refused before the attempt loop (which would give up after 100000) */
    c = base, c.vocab = 6, c.amb = 0, c.amb_depth = 1, c.transition_density = 0.0;
    expect_error(c, SB_ERR_INVALID, "raise --transition_density");
    /* --amb 4 with depth 40: the 36 plain letters are reached with chance 0.4/40, so some of
     * the 196 states has no successor in all but 1e-8 of the attempts: refused at once,
     * with the depths and amb counts that work, and those do generate */
    c = base, c.amb = 4;
    expect_error(c, SB_ERR_INVALID,
                 "one of its 196 states has no successor in all but 1.1e-08 of the attempts; "
                 "use --amb_depth 19 or less, or --amb 7 or more");
    sb_grammar *g = NULL;
    sb_error err = {0};
    c = base, c.amb = 4, c.amb_depth = 19;
    assert_int_equal(sb_grammar_generate(&c, &g, &err), SB_OK);
    sb_grammar_free(g);
    c = base, c.amb = 7;
    assert_int_equal(sb_grammar_generate(&c, &g, &err), SB_OK);
    sb_grammar_free(g);
    /* the check alone, without generating: the same verdicts */
    c = base, c.amb = 4;
    assert_int_equal(sb_grammar_config_check(&c, &err), SB_ERR_INVALID);
    c = base;
    assert_int_equal(sb_grammar_config_check(&c, &err), SB_OK);
}

/* The paper's configuration: size checked, time only printed (speed is measured by the
 * benchmark, never asserted in a test). */
static void test_paper_grammar(void **state)
{
    (void)state;
    sb_grammar_config cfg = sb_grammar_config_default();
    sb_grammar *g = NULL;
    sb_error err = {0};
    double t0 = sb_time_now();
    assert_int_equal(sb_grammar_generate(&cfg, &g, &err), SB_OK);
    double dt = sb_time_now() - t0;
    print_message("paper grammar (with TE) in %.1f ms\n", dt * 1e3);
    assert_int_equal(g->n_states, 1601);
    sb_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),        cmocka_unit_test(test_reference_grammars),
        cmocka_unit_test(test_entropy_against_dense), cmocka_unit_test(test_grammar_scale),
        cmocka_unit_test(test_bad_configurations),    cmocka_unit_test(test_paper_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

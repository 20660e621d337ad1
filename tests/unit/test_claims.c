/* test_claims.c - the findings' verdicts (src/exp/claims.h) are computed under the rules of
 * docs/claims.md, not typed in. Issue 36's cases: (a) a finding holds with 6 seeds, (b) the
 * same effect with 2 seeds is not shown, underpowered, (c) runs far below the ideal observer
 * are not tested at this scale, (d) several test gaps of one training are one unit, (e) a
 * setting chosen on validation differs from the one the test would pick, and the verdict
 * takes validation's. Then: contradicted, Holm across slices, equivalence, attention's task
 * check, attention's growth with the memory demand, pairs that differ on two axes are not pairs,
 * runs that do not count, the registry classified; and the statistics against known values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exp/claims.h"
#include "exp/claims_stats.h"
#include "layers/layer.h"

enum { MAX_ROWS = 256 };
static sb_run_row rows[MAX_ROWS];
static sb_claim_task tasks[MAX_ROWS];
static char json[MAX_ROWS][320];
static size_t n_rows;
static sb_claim *claims;
static int n_claims;

/* Defaults of the next runs: the task's ceiling and window, the slice's amb, the lr. */
static double ceiling = 0.95, window = 32;
static int amb = 8, length = 50;
static double lr = 0.001;

/* A run: model, seed, test gap (< 0: the training gap of 0.1), test and validation accuracy
 * (NaN: none recorded). */
static void add(const char *model, int seed, double test_dur, double acc, double valid)
{
    assert_true(n_rows < MAX_ROWS);
    char dur[32];
    if (test_dur < 0)
        snprintf(dur, sizeof dur, "null");
    else
        snprintf(dur, sizeof dur, "%g", test_dur);
    snprintf(json[n_rows], sizeof json[n_rows],
             "{\"model\":\"%s\",\"seed\":%d,\"task_seed\":%d,\"amb\":%d,\"train_seqlen_max\":%d,"
             "\"train_gap_max\":0.1,\"test_dur\":%s,\"lr\":%g,\"warmup_steps\":null}",
             model, seed, seed, amb, length, dur, lr);
    sb_run_row *r = &rows[n_rows];
    memset(r, 0, sizeof *r);
    r->config_json = json[n_rows];
    snprintf(r->r.model, sizeof r->r.model, "%s", model);
    r->r.status = SB_RUN_FINISHED;
    r->r.test_acc = acc;
    r->r.valid_acc = valid;
    r->r.ceiling = ceiling;
    tasks[n_rows] = (sb_claim_task){.ceiling = ceiling, .needed_window = window};
    n_rows++;
}

static void evaluate(void)
{
    free(claims);
    sb_error err = {0};
    assert_int_equal(sb_claims_evaluate(rows, tasks, n_rows, &claims, &n_claims, &err), SB_OK);
    n_rows = 0;
    ceiling = 0.95, window = 32, amb = 8, length = 50, lr = 0.001;
}

/* The k-th verdict of finding id (0: its first slice); fails when there is none. */
static const sb_claim *claim(const char *id, int k)
{
    for (int i = 0; i < n_claims; i++)
        if (strcmp(claims[i].id, id) == 0 && k-- == 0)
            return &claims[i];
    fail_msg("no verdict %d of %s", k, id);
    return NULL;
}

/* Gated minus ungated differences of 0.05 + (-0.01, 0, +0.01) by seed, seeds 1..n. */
static void gating_pairs(int n, double effect)
{
    for (int s = 1; s <= n; s++) {
        double d = effect + 0.01 * (s % 3 - 1);
        add("gated_delta_net", s, -1, 0.80 + d, 0.80 + d);
        add("delta_net", s, -1, 0.80, 0.80);
    }
}

static void test_holds_with_six_seeds(void **state) /* (a) */
{
    (void)state;
    gating_pairs(6, 0.05);
    evaluate();
    const sb_claim *c = claim("gating", 0);
    assert_int_equal(c->n, 6);
    assert_int_equal(c->verdict, SB_VERDICT_HOLDS);
    assert_true(fabs(c->estimate - 0.05) < 1e-12);
    assert_string_equal(c->pairs, "gated_delta_net/delta_net");
    /* the line gives n in seeds, the interval, p with Holm, the power */
    assert_non_null(strstr(c->reason, "over 6 seeds"));
    assert_non_null(strstr(c->reason, "Holm"));
    assert_non_null(strstr(c->reason, "80% power"));
    assert_true(c->detectable > 0 && c->detectable < 0.05);
    assert_true(c->lo > 0);
    /* the other findings have no pair here: one line each, not tested */
    assert_int_equal(claim("mixing", 0)->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(claim("mixing", 0)->reason, "no pair"));
}

static void test_two_seeds_underpowered(void **state) /* (b) */
{
    (void)state;
    gating_pairs(2, 0.05);
    evaluate();
    const sb_claim *c = claim("gating", 0);
    assert_int_equal(c->n, 2);
    assert_int_equal(c->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(c->reason, "underpowered"));
    assert_true(c->detectable > SB_CLAIM_DELTA);
    assert_true(c->seeds_needed > 2);
    /* one seed: no interval */
    gating_pairs(1, 0.05);
    evaluate();
    assert_non_null(strstr(claim("gating", 0)->reason, "too few seeds"));
}

static void test_far_below_ceiling(void **state) /* (c) */
{
    (void)state;
    for (int s = 1; s <= 6; s++) { /* gated well ahead, but at a third of the ceiling */
        add("gated_delta_net", s, -1, 0.35 + 0.01 * (s % 3), 0.35);
        add("delta_net", s, -1, 0.25, 0.25);
    }
    evaluate();
    const sb_claim *c = claim("gating", 0);
    assert_int_equal(c->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(c->reason, "not tested at this scale"));
    assert_true(c->scale < SB_CLAIM_SCALE);
    assert_true(isnan(c->p_holm)); /* not a test: outside the Holm family */
    /* behind, far below: not tested, never contradicted */
    for (int s = 1; s <= 6; s++) {
        add("gated_delta_net", s, -1, 0.20, 0.20);
        add("delta_net", s, -1, 0.30 + 0.01 * (s % 3), 0.30);
    }
    evaluate();
    assert_int_equal(claim("gating", 0)->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(claim("gating", 0)->reason, "not tested at this scale"));
}

static void test_test_gaps_one_unit(void **state) /* (d) */
{
    (void)state;
    /* mamba2 (diagonal) and gated_delta_net (rank-1) differ on the transition alone; each
     * seed's weights tested at three longer gaps */
    for (int s = 1; s <= 4; s++) {
        const double j = 0.005 * (s % 2);
        add("mamba2", s, -1, 0.90, 0.90);
        add("gated_delta_net", s, -1, 0.90, 0.90);
        const double gaps[3] = {1.0, 2.0, 5.0};
        for (int g = 0; g < 3; g++) {
            add("mamba2", s, gaps[g], 0.90 - 0.1 * (g + 1) - j, NAN);
            add("gated_delta_net", s, gaps[g], 0.90 - 0.02 * (g + 1), NAN);
        }
    }
    evaluate();
    const sb_claim *c = claim("mixing", 0);
    assert_int_equal(c->n, 4); /* seeds, not seeds x gaps */
    assert_string_equal(c->pairs, "gated_delta_net/mamba2");
    /* at the longest gap: drops 0.3 + j and 0.06 */
    assert_true(fabs(c->estimate - (0.24 + 0.0025)) < 1e-12);
    assert_int_equal(c->verdict, SB_VERDICT_HOLDS);
    /* the equivalence at the training gap: equal there on every seed */
    assert_int_equal(claim("mixing_selectivity", 0)->verdict, SB_VERDICT_HOLDS);
    assert_int_equal(claim("mixing_retention", 0)->exploratory, 1);
}

static void test_choice_reads_validation(void **state) /* (e) */
{
    (void)state;
    /* delta_net at two learning rates: lr 0.001 best on validation, lr 0.003 on test */
    ceiling = 0.85;
    for (int s = 1; s <= 4; s++) {
        double j = 0.002 * s;
        add("gated_delta_net", s, -1, 0.80 + j, 0.80);
        lr = 0.001;
        add("delta_net", s, -1, 0.70, 0.90);
        lr = 0.003;
        add("delta_net", s, -1, 0.85, 0.80);
        lr = 0.001;
    }
    evaluate();
    const sb_claim *c = claim("gating", 0);
    assert_int_equal(c->chosen, SB_CHOSE_ON_VALID);
    assert_true(fabs(c->estimate - (0.10 + 0.005)) < 1e-12); /* against lr 0.001's 0.70 */
    assert_int_equal(c->verdict, SB_VERDICT_HOLDS);
    /* the same runs without validation accuracies: the test chooses, and the verdict says so */
    for (int s = 1; s <= 4; s++) {
        double j = 0.002 * s;
        add("gated_delta_net", s, -1, 0.80 + j, NAN);
        add("delta_net", s, -1, 0.70, NAN);
        lr = 0.003;
        add("delta_net", s, -1, 0.85, NAN);
        lr = 0.001;
    }
    evaluate();
    c = claim("gating", 0);
    assert_int_equal(c->chosen, SB_CHOSE_ON_TEST);
    assert_true(fabs(c->estimate - (-0.05 + 0.005)) < 1e-12);
}

static void test_contradicted(void **state)
{
    (void)state;
    gating_pairs(6, -0.05); /* the gated model behind on every seed */
    evaluate();
    const sb_claim *c = claim("gating", 0);
    assert_int_equal(c->verdict, SB_VERDICT_CONTRADICTED);
    assert_non_null(strstr(c->reason, "excludes a benefit"));
}

static void test_holm_across_slices(void **state)
{
    (void)state;
    /* two slices (amb 8 and 12), each p about 0.029 alone: not after the correction */
    const double d[3] = {0.05, 0.035, 0.065};
    for (int a = 0; a < 2; a++) {
        amb = a == 0 ? 8 : 12;
        for (int s = 1; s <= 3; s++) {
            add("gated_delta_net", s, -1, 0.80 + d[s - 1], 0.80);
            add("delta_net", s, -1, 0.80, 0.80);
        }
    }
    evaluate();
    const sb_claim *c8 = claim("gating", 0), *c12 = claim("gating", 1);
    assert_string_equal(c8->slice, "amb=8");
    assert_string_equal(c12->slice, "amb=12");
    assert_true(c8->p < 0.05 && c8->p > 0.02);
    assert_true(c8->p_holm >= 0.05);
    assert_true(fabs(c8->p_holm - 2 * c8->p) < 1e-12);
    assert_int_equal(c8->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(c8->reason, "not after the correction for 2 verdicts"));
}

static void test_one_axis_pairs_only(void **state)
{
    (void)state;
    /* gla and retnet differ on gate granularity and forgetting: no pair of finding 1 */
    for (int s = 1; s <= 4; s++) {
        add("gla", s, -1, 0.9, 0.9);
        add("retnet", s, -1, 0.8, 0.8);
    }
    evaluate();
    assert_int_equal(claim("gating", 0)->n, 0);
    assert_non_null(strstr(claim("gating", 0)->reason, "forgetting axis alone"));
    /* mamba2 and retnet differ in forgetting alone (input-dependent against fixed) */
    for (int s = 1; s <= 4; s++) {
        add("mamba2", s, -1, 0.9 + 0.001 * s, 0.9);
        add("retnet", s, -1, 0.8, 0.8);
    }
    evaluate();
    assert_string_equal(claim("gating", 0)->pairs, "mamba2/retnet");
}

static void test_attention_needs_a_demanding_task(void **state)
{
    (void)state;
    window = 4; /* the task's observer needs 4 elements: a fixed state holds them */
    ceiling = 0.75;
    for (int s = 1; s <= 4; s++) {
        add("transformer", s, -1, 0.70, 0.70);
        add("mamba2", s, -1, 0.85 + 0.01 * s, 0.85);
        add("gla", s, -1, 0.60, 0.90); /* the best recurrent model on validation */
    }
    evaluate();
    const sb_claim *c = claim("attention", 0);
    assert_int_equal(c->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(c->reason, "not tested by this task"));
    assert_string_equal(c->pairs, "transformer vs gla");
    /* a task whose observer needs more than 32: tested, attention ahead of gla */
    window = INFINITY;
    ceiling = 0.85;
    for (int s = 1; s <= 4; s++) {
        add("transformer", s, -1, 0.80 + 0.01 * s, 0.80);
        add("gla", s, -1, 0.70, 0.70);
    }
    evaluate();
    assert_int_equal(claim("attention", 0)->verdict, SB_VERDICT_HOLDS);
}

/* attention_growth: one task at two lengths (interleaved walks: demand 4 at 16 elements, 64 at
 * 256); per seed, attention's margin at the larger demand minus at the smaller, each side's
 * best model chosen on validation at each length. */
static void test_attention_growth(void **state)
{
    (void)state;
    for (int s = 1; s <= 5; s++) {
        length = 16, window = 4;
        add("transformer", s, -1, 0.90, 0.90);
        add("gla", s, -1, 0.88 + 0.002 * s, 0.89);
        add("mamba2", s, -1, 0.95, 0.85); /* the test would pick it; validation does not */
        length = 256, window = 64;
        add("transformer", s, -1, 0.80 + 0.01 * s, 0.80);
        add("gla", s, -1, 0.70, 0.70);
        add("mamba2", s, -1, 0.72, 0.60);
    }
    evaluate();
    const sb_claim *c = claim("attention_growth", 0);
    /* margins: at 256, 0.10 + 0.01 s; at 16, 0.02 - 0.002 s: the difference 0.08 + 0.012 s,
     * mean over s = 1..5 0.116 */
    assert_int_equal(c->n, 5);
    assert_true(fabs(c->estimate - 0.116) < 1e-9);
    assert_string_equal(c->pairs, "demand 64: transformer vs gla; demand 4: transformer vs gla");
    assert_int_equal(c->chosen, SB_CHOSE_ON_VALID);
    assert_int_equal(c->verdict, SB_VERDICT_HOLDS);
    /* the scale: the shortest length's runs (0.90, 0.89 on average over a ceiling of 0.95) */
    assert_true(fabs(c->scale - (0.90 + 0.886) / 2 / 0.95) < 1e-9);
    /* the per-length verdicts: not tested at 16 elements (demand 4), tested at 256 */
    assert_non_null(strstr(claim("attention", 0)->reason, "not tested by this task"));
    assert_int_equal(claim("attention", 1)->verdict, SB_VERDICT_HOLDS);

    /* a largest demand a fixed state holds: not tested by this task */
    for (int s = 1; s <= 5; s++) {
        length = 16, window = 2;
        add("transformer", s, -1, 0.90, 0.90);
        add("gla", s, -1, 0.88, 0.88);
        length = 32, window = 8;
        add("transformer", s, -1, 0.90 + 0.01 * s, 0.90);
        add("gla", s, -1, 0.80, 0.80);
    }
    evaluate();
    c = claim("attention_growth", 0);
    assert_int_equal(c->verdict, SB_VERDICT_NOT_SHOWN);
    assert_non_null(strstr(c->reason, "not tested by this task"));
    /* one length only: no growth to measure */
    for (int s = 1; s <= 3; s++) {
        add("transformer", s, -1, 0.90, 0.90);
        add("gla", s, -1, 0.80, 0.80);
    }
    evaluate();
    assert_non_null(strstr(claim("attention_growth", 0)->reason, "no task trained at two lengths"));
}

static void test_runs_that_do_not_count(void **state)
{
    (void)state;
    gating_pairs(3, 0.05);
    rows[0].r.status = SB_RUN_DIVERGED;
    rows[2].r.test_acc = (double)NAN;
    rows[4].config_json = (char *)"{not json";
    add("no_such_model", 1, -1, 0.9, 0.9);
    evaluate();
    assert_int_equal(claim("gating", 0)->n, 0); /* every pair lost its gated run */
    for (int i = 0; i < n_claims; i++)
        assert_int_equal(claims[i].verdict, SB_VERDICT_NOT_SHOWN);
    evaluate(); /* no rows at all: a line per finding */
    assert_int_equal(n_claims, 6);
    assert_true(isnan(claim("attention", 0)->estimate));
}

static void test_registry_classified(void **state)
{
    (void)state;
    const sb_layer_type *const *types = sb_layer_types();
    for (int i = 0; types[i] != NULL; i++) {
        const sb_axes *a = &types[i]->axes;
        const int values[SB_AXES] = {a->gate, a->forgetting, a->transition, a->update, a->memory};
        for (int k = 0; k < SB_AXES; k++)
            if (sb_axis_value_name(k, values[k]) == NULL)
                fail_msg("%s: axis '%s' not set in its layer record (.axes)", types[i]->name,
                         sb_axis_name(k));
        if (a->state_formula == NULL)
            fail_msg("%s: no state formula in .axes", types[i]->name);
        if (sb_layer_state_mixing(types[i]) == SB_MIXING_UNCLASSIFIED)
            fail_msg("%s: the transition axis does not classify its state", types[i]->name);
    }
}

/* The statistics against values from tables (scipy.stats.t): quantiles, p, Holm. */
static void test_statistics(void **state)
{
    (void)state;
    assert_true(fabs(sb_t_quantile(0.975, 1) - 12.7062) < 1e-4);
    assert_true(fabs(sb_t_quantile(0.975, 5) - 2.5706) < 1e-4);
    assert_true(fabs(sb_t_quantile(0.80, 5) - 0.9195) < 1e-4);
    assert_true(fabs(sb_t_quantile(0.975, 1e6) - 1.9600) < 1e-4);
    assert_true(fabs(sb_t_cdf(2.0, 10) - 0.963306) < 1e-6);
    assert_true(fabs(sb_t_cdf(-2.0, 10) - 0.036694) < 1e-6);
    /* detectable at n 10, sd 1: (2.2622 + 0.8834) / sqrt(10) */
    assert_true(fabs(sb_detectable_effect(10, 1.0, 0.05) - (2.2622 + 0.8834) / sqrt(10.0)) < 1e-3);
    int n = sb_units_needed(0.5, 1.0, 0.05);
    assert_true(sb_detectable_effect(n, 1.0, 0.05) <= 0.5);
    assert_true(sb_detectable_effect(n - 1, 1.0, 0.05) > 0.5);
    const double p[4] = {0.01, 0.04, 0.03, 0.005};
    double adj[4];
    sb_holm(p, 4, adj); /* sorted 0.005 0.01 0.03 0.04: x4 x3 x2 x1, running max */
    assert_true(fabs(adj[3] - 0.02) < 1e-12);
    assert_true(fabs(adj[0] - 0.03) < 1e-12);
    assert_true(fabs(adj[2] - 0.06) < 1e-12);
    assert_true(fabs(adj[1] - 0.06) < 1e-12);
}

static int teardown(void **state)
{
    (void)state;
    free(claims);
    claims = NULL;
    n_rows = 0;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_holds_with_six_seeds, teardown),
        cmocka_unit_test_teardown(test_two_seeds_underpowered, teardown),
        cmocka_unit_test_teardown(test_far_below_ceiling, teardown),
        cmocka_unit_test_teardown(test_test_gaps_one_unit, teardown),
        cmocka_unit_test_teardown(test_choice_reads_validation, teardown),
        cmocka_unit_test_teardown(test_contradicted, teardown),
        cmocka_unit_test_teardown(test_holm_across_slices, teardown),
        cmocka_unit_test_teardown(test_one_axis_pairs_only, teardown),
        cmocka_unit_test_teardown(test_attention_needs_a_demanding_task, teardown),
        cmocka_unit_test_teardown(test_attention_growth, teardown),
        cmocka_unit_test_teardown(test_runs_that_do_not_count, teardown),
        cmocka_unit_test_teardown(test_registry_classified, teardown),
        cmocka_unit_test_teardown(test_statistics, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

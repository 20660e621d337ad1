/* test_claims.c - the findings' verdicts (src/exp/claims.h) are computed, not typed in: for
 * each finding a tiny set of runs where it holds, one where it does not, and one too small to
 * tell, and the verdicts flip with the numbers; runs that are not finished, have no accuracy
 * or name no registered model do not count; every registered layer type is classified and
 * its ungated twin is registered. */
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
#include "layers/layer.h"

enum { MAX_ROWS = 64 };
static sb_run_row rows[MAX_ROWS];
static char json[MAX_ROWS][256];
static size_t n_rows;

/* A run: model, seed, sequence length, test gap (< 0: the training gap of 0.1), accuracy. */
static void add(const char *model, int seed, int seqlen, double test_dur, double acc)
{
    assert_true(n_rows < MAX_ROWS);
    char dur[32];
    if (test_dur < 0)
        snprintf(dur, sizeof dur, "null");
    else
        snprintf(dur, sizeof dur, "%g", test_dur);
    snprintf(json[n_rows], sizeof json[n_rows],
             "{\"model\":\"%s\",\"seed\":%d,\"amb\":8,\"train_seqlen_max\":%d,"
             "\"train_gap_max\":0.1,\"test_dur\":%s}",
             model, seed, seqlen, dur);
    sb_run_row *r = &rows[n_rows++];
    memset(r, 0, sizeof *r);
    r->config_json = json[n_rows - 1];
    r->model = (char *)model;
    r->status = (char *)"finished";
    r->metrics.test_acc = acc;
}

static sb_claim claims[SB_CLAIMS];

static void evaluate(void)
{
    sb_error err = {0};
    assert_int_equal(sb_claims_evaluate(rows, n_rows, claims, &err), SB_OK);
    n_rows = 0;
}

static void test_gating(void **state)
{
    (void)state;
    /* gated_delta_net ahead of delta_net on every seed */
    for (int s = 1; s <= 3; s++) {
        add("gated_delta_net", s, 50, -1, 0.90 + 0.01 * s);
        add("delta_net", s, 50, -1, 0.80 + 0.012 * s);
    }
    evaluate();
    assert_string_equal(claims[0].id, "gating");
    assert_int_equal(claims[0].groups, 3);
    assert_int_equal(claims[0].verdict, SB_VERDICT_HOLDS);
    assert_true(fabs(claims[0].estimate - (0.1 - 0.004)) < 1e-12);
    /* behind on every seed: does not hold */
    for (int s = 1; s <= 3; s++) {
        add("gated_delta_net", s, 50, -1, 0.80 + 0.01 * s);
        add("delta_net", s, 50, -1, 0.85 + 0.012 * s);
    }
    evaluate();
    assert_int_equal(claims[0].verdict, SB_VERDICT_DOES_NOT_HOLD);
    /* ahead on one seed, far behind on another: the interval holds 0 */
    add("gla", 1, 50, -1, 0.95);
    add("retnet", 1, 50, -1, 0.80);
    add("gla", 2, 50, -1, 0.70);
    add("retnet", 2, 50, -1, 0.80);
    evaluate();
    assert_int_equal(claims[0].groups, 2);
    assert_int_equal(claims[0].verdict, SB_VERDICT_INCONCLUSIVE);
    /* a single pair, or pairs whose configurations differ, give no interval */
    add("gla", 1, 50, -1, 0.95);
    add("retnet", 1, 50, -1, 0.80);
    add("gla", 2, 50, -1, 0.95);
    add("retnet", 2, 100, -1, 0.80); /* another length: not a pair */
    evaluate();
    assert_int_equal(claims[0].groups, 1);
    assert_int_equal(claims[0].verdict, SB_VERDICT_INCONCLUSIVE);
    assert_non_null(strstr(claims[0].reason, "one pair"));
}

/* Each seed: mamba (diagonal) and delta_net (mixing) at the training gap and 10x longer. */
static void mixing_runs(double diagonal_drop, double mixing_drop)
{
    for (int s = 1; s <= 3; s++) {
        const double jitter = 0.002 * s;
        add("mamba", s, 50, -1, 0.9);
        add("mamba", s, 50, 1.0, 0.9 - diagonal_drop - jitter);
        add("delta_net", s, 50, -1, 0.9);
        add("delta_net", s, 50, 1.0, 0.9 - mixing_drop + jitter);
        add("transformer", s, 50, 1.0, 0.1); /* attention: in neither side */
    }
}

static void test_mixing(void **state)
{
    (void)state;
    mixing_runs(0.3, 0.05);
    evaluate();
    assert_string_equal(claims[1].id, "mixing");
    assert_int_equal(claims[1].groups, 3);
    assert_int_equal(claims[1].verdict, SB_VERDICT_HOLDS);
    assert_true(fabs(claims[1].estimate - 0.258) < 1e-9); /* 0.25 + the jitter's 2 x 0.004 */
    mixing_runs(0.05, 0.3);
    evaluate();
    assert_int_equal(claims[1].verdict, SB_VERDICT_DOES_NOT_HOLD);
    /* no run at a longer gap: no group */
    add("mamba", 1, 50, -1, 0.9);
    add("delta_net", 1, 50, 0.1, 0.9); /* test_dur equal to the training gap: not longer */
    evaluate();
    assert_int_equal(claims[1].groups, 0);
    assert_int_equal(claims[1].verdict, SB_VERDICT_INCONCLUSIVE);
}

/* Retention: the mixing models keep 60% of their accuracy, the diagonal ones 30%, on every
 * seed: holds; the other way round: does not hold; although both drop by the same amount
 * (the drop statistic cannot tell them apart). */
static void retention_runs(double diagonal_start, double mixing_start, double drop)
{
    for (int s = 1; s <= 3; s++) {
        const double jitter = 0.002 * s;
        add("mamba", s, 50, -1, diagonal_start);
        add("mamba", s, 50, 1.0, diagonal_start - drop - jitter);
        add("delta_net", s, 50, -1, mixing_start);
        add("delta_net", s, 50, 1.0, mixing_start - drop + jitter);
    }
}

static void test_mixing_retention(void **state)
{
    (void)state;
    retention_runs(0.5, 0.8, 0.35); /* kept: 0.15/0.5 = 0.30 and 0.45/0.8 = 0.5625 */
    evaluate();
    assert_string_equal(claims[3].id, "mixing_retention");
    assert_int_equal(claims[3].groups, 3);
    assert_int_equal(claims[3].verdict, SB_VERDICT_HOLDS);
    double expect = 0;
    for (int s = 1; s <= 3; s++)
        expect += (0.45 + 0.002 * s) / 0.8 - (0.15 - 0.002 * s) / 0.5;
    assert_true(fabs(claims[3].estimate - expect / 3) < 1e-9);
    assert_int_equal(claims[1].verdict, SB_VERDICT_INCONCLUSIVE); /* equal drops, but jitter */
    retention_runs(0.8, 0.5, 0.35);
    evaluate();
    assert_int_equal(claims[3].verdict, SB_VERDICT_DOES_NOT_HOLD);
    /* a model at 0 at the training gap has no retention: the group has no mixing side */
    add("mamba", 1, 50, -1, 0.5);
    add("mamba", 1, 50, 1.0, 0.2);
    add("delta_net", 1, 50, -1, 0.0);
    add("delta_net", 1, 50, 1.0, 0.0);
    evaluate();
    assert_int_equal(claims[3].groups, 0);
    assert_int_equal(claims[3].verdict, SB_VERDICT_INCONCLUSIVE);
}

static void test_attention(void **state)
{
    (void)state;
    /* attention behind at length 50, ahead at 200: the verdict reads the longest length */
    for (int s = 1; s <= 3; s++) {
        add("transformer", s, 50, -1, 0.70);
        add("mamba2", s, 50, -1, 0.80 + 0.01 * s);
        add("gla", s, 50, -1, 0.60);
        add("transformer", s, 200, -1, 0.90 + 0.01 * s);
        add("mamba2", s, 200, -1, 0.75);
    }
    evaluate();
    assert_string_equal(claims[2].id, "attention");
    assert_int_equal(claims[2].verdict, SB_VERDICT_HOLDS);
    assert_int_equal(claims[2].groups, 3);
    assert_int_equal(claims[2].n_lengths, 2);
    assert_int_equal(claims[2].length[0], 50);
    assert_int_equal(claims[2].length[1], 200);
    assert_true(fabs(claims[2].length_margin[0] - (0.70 - 0.82)) < 1e-9);
    assert_true(fabs(claims[2].length_margin[1] - (0.92 - 0.75)) < 1e-9);
    /* the same without the long runs: attention behind, does not hold */
    for (int s = 1; s <= 3; s++) {
        add("transformer", s, 50, -1, 0.70);
        add("mamba2", s, 50, -1, 0.80 + 0.01 * s);
    }
    evaluate();
    assert_int_equal(claims[2].verdict, SB_VERDICT_DOES_NOT_HOLD);
    assert_int_equal(claims[2].n_lengths, 1);
}

static void test_runs_that_do_not_count(void **state)
{
    (void)state;
    for (int s = 1; s <= 3; s++) {
        add("gated_delta_net", s, 50, -1, 0.9);
        add("delta_net", s, 50, -1, 0.8);
    }
    rows[0].status = (char *)"diverged";
    rows[2].metrics.test_acc = (double)NAN;
    rows[4].config_json = (char *)"{not json";
    add("no_such_model", 1, 50, -1, 0.9);
    evaluate();
    assert_int_equal(claims[0].groups, 0); /* every pair lost its gated run */
    for (int i = 0; i < SB_CLAIMS; i++)
        assert_int_equal(claims[i].verdict, SB_VERDICT_INCONCLUSIVE);
    evaluate(); /* no rows at all */
    assert_true(isnan(claims[2].estimate));
}

static void test_registry_classified(void **state)
{
    (void)state;
    const sb_layer_type *const *types = sb_layer_types();
    int twins = 0;
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
        if (types[i]->ungated_twin != NULL) {
            const sb_layer_type *twin = sb_layer_type_find(types[i]->ungated_twin);
            if (twin == NULL)
                fail_msg("%s: ungated twin %s is not registered", types[i]->name,
                         types[i]->ungated_twin);
            /* the twin is this layer without its input-dependent gate: same transition and
             * update, no input-dependent forgetting */
            if (a->forgetting != SB_FORGET_INPUT || twin->axes.forgetting == SB_FORGET_INPUT ||
                twin->axes.transition != a->transition || twin->axes.update != a->update)
                fail_msg("%s: its ungated twin %s differs on more than the gate", types[i]->name,
                         twin->name);
            twins++;
        }
    }
    assert_true(twins >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gating),
        cmocka_unit_test(test_mixing),
        cmocka_unit_test(test_mixing_retention),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_runs_that_do_not_count),
        cmocka_unit_test(test_registry_classified),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

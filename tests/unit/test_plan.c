/*
 * test_plan.c - the arithmetic of `selectivbench plan` (src/exp/plan.c): list scheduling
 * of known run times on 1, 2 and 3 ranks (largest first and in grid order), dependent runs
 * after the runs they evaluate, bad schedules refused; and the calibration cache file
 * (src/exp/plan_cache.c): a round trip, a damaged file read as damaged, a missing file;
 * the plan of one run (train's) and the learning curve's evaluations in it.
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

#include "config/config.h"
#include "exp/plan.h"
#include "train/trainer.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* runs of 5, 4, 3, 3, 2, 1 s (18 s in all), given in a mixed order */
static const double secs[6] = {3, 5, 1, 4, 2, 3};

static void test_one_rank(void **state)
{
    (void)state;
    double start[6];
    int rank[6];
    /* one rank: the sum, whatever the order */
    NEAR(sb_plan_schedule(secs, NULL, 6, 1, 1, start, rank), 18.0);
    NEAR(sb_plan_schedule(secs, NULL, 6, 1, 0, NULL, NULL), 18.0);
    /* largest first: 5 (run 1) starts at 0, then 4 (run 3) at 5, then the 3s in grid order */
    NEAR(start[1], 0.0);
    NEAR(start[3], 5.0);
    NEAR(start[0], 9.0);
    NEAR(start[5], 12.0);
    NEAR(start[4], 15.0);
    NEAR(start[2], 17.0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(rank[i], 0);
}

static void test_two_and_three_ranks(void **state)
{
    (void)state;
    double start[6];
    int rank[6];
    /* 2 ranks, largest first: r0 5 | r1 4 | r1 3 (4..7) | r0 3 (5..8) | r1 2 (7..9) |
     * r0 1 (8..9): 9 s */
    NEAR(sb_plan_schedule(secs, NULL, 6, 2, 1, start, rank), 9.0);
    assert_int_equal(rank[1], 0);
    assert_int_equal(rank[3], 1);
    NEAR(start[0], 4.0);
    NEAR(start[5], 5.0);
    /* 2 ranks in grid order: 3 | 5 | 1 (3..4) | 4 (4..8) | 2 (5..7) | 3 (7..10): 10 s */
    NEAR(sb_plan_schedule(secs, NULL, 6, 2, 0, NULL, NULL), 10.0);
    /* 3 ranks, largest first: 5 | 4 | 3 | 3 (3..6) | 2 (4..6) | 1 (5..6): 6 s */
    NEAR(sb_plan_schedule(secs, NULL, 6, 3, 1, NULL, NULL), 6.0);
    /* more ranks than runs: the longest run */
    NEAR(sb_plan_schedule(secs, NULL, 6, 64, 1, NULL, NULL), 5.0);
    /* nothing to run */
    NEAR(sb_plan_schedule(secs, NULL, 0, 2, 1, NULL, NULL), 0.0);
}

static void test_dependencies(void **state)
{
    (void)state;
    /* runs 0 and 1 train (10 s, 2 s); runs 2 and 3 evaluate run 0's weights (1 s each),
     * run 4 evaluates run 1's (1 s) */
    const double s[5] = {10, 2, 1, 1, 1};
    const int64_t after[5] = {-1, -1, 0, 0, 1};
    double start[5];
    int rank[5];
    /* 2 ranks: r0 10 | r1 2, then the evaluations, the earliest ready first: run 4 (ready
     * at 2) on r1 2..3, run 2 on r1 (free at 3) waiting for run 0: 10..11, run 3 on r0
     * 10..11 */
    NEAR(sb_plan_schedule(s, after, 5, 2, 1, start, rank), 11.0);
    NEAR(start[4], 2.0);
    assert_int_equal(rank[4], 1);
    assert_true(start[2] >= 10.0 && start[3] >= 10.0 && start[4] >= 2.0);
    for (int i = 2; i < 5; i++)
        assert_true(start[i] >= start[after[i]] + s[after[i]] - 1e-12);
    /* 1 rank: 15 s; 3 ranks: the evaluations of run 0 wait until 10: 11 s */
    NEAR(sb_plan_schedule(s, after, 5, 1, 1, NULL, NULL), 15.0);
    NEAR(sb_plan_schedule(s, after, 5, 3, 1, start, NULL), 11.0);
    assert_true(start[4] >= 2.0 && start[4] < 10.0); /* run 1's evaluation does not wait for 0 */
    /* bad schedules: no rank, a dependency on a dependent run, one out of range, on itself */
    assert_true(sb_plan_schedule(s, after, 5, 0, 1, NULL, NULL) < 0);
    const int64_t chain[3] = {-1, 0, 1}, out[2] = {-1, 7}, self[2] = {-1, 1};
    assert_true(sb_plan_schedule(s, chain, 3, 2, 1, NULL, NULL) < 0);
    assert_true(sb_plan_schedule(s, out, 2, 2, 1, NULL, NULL) < 0);
    assert_true(sb_plan_schedule(s, self, 2, 2, 1, NULL, NULL) < 0);
}

static sb_plan_calibration calibration(const char *key, int threads, double spf)
{
    sb_plan_calibration c;
    memset(&c, 0, sizeof c);
    snprintf(c.key, sizeof c.key, "%s", key);
    c.calibrated_threads = threads;
    c.train_s_per_frame = spf;
    c.eval_s_per_frame = spf / 3;
    c.setup_s = 0.25;
    c.gemm_share = 0.5;
    c.gflops = 12.5;
    c.calibrated_layers = 2;
    c.train_flops_per_frame = 2e6;
    c.eval_flops_per_frame = 2.5e6;
    return c;
}

static void test_cache_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_plan_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/sub/plan-calibration.json", dir);
    sb_error err = {0};
    int damaged = 1;
    sb_plan_cache cache;
    /* a missing file: an empty cache, not damaged */
    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(cache.n, 0);
    assert_int_equal(damaged, 0);
    sb_plan_calibration a = calibration("gla d 64", 1, 3.5e-5),
                        b = calibration("gla d 64", 2, 2e-5);
    assert_int_equal(sb_plan_cache_put(&cache, "CPU X, selectivbench 1", &a, &err), SB_OK);
    assert_int_equal(sb_plan_cache_put(&cache, "CPU X, selectivbench 1", &b, &err), SB_OK);
    a.train_s_per_frame = 4e-5; /* the same machine, threads and key: replaced */
    assert_int_equal(sb_plan_cache_put(&cache, "CPU X, selectivbench 1", &a, &err), SB_OK);
    assert_int_equal(cache.n, 2);
    assert_int_equal(sb_plan_cache_save(path, &cache, &err), SB_OK); /* creates sub/ */
    sb_plan_cache_free(&cache);

    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(damaged, 0);
    assert_int_equal(cache.n, 2);
    const sb_plan_calibration *hit =
        sb_plan_cache_find(&cache, "CPU X, selectivbench 1", 1, "gla d 64");
    assert_non_null(hit);
    assert_true(hit->train_s_per_frame == 4e-5 && hit->setup_s == 0.25 && hit->gflops == 12.5 &&
                hit->train_flops_per_frame == 2e6 && hit->eval_flops_per_frame == 2.5e6);
    assert_int_equal(hit->source, SB_PLAN_CACHED);
    assert_null(sb_plan_cache_find(&cache, "CPU Y, selectivbench 1", 1, "gla d 64"));
    assert_null(sb_plan_cache_find(&cache, "CPU X, selectivbench 1", 4, "gla d 64"));
    sb_plan_cache_free(&cache);

    /* damaged: cut in the middle of its last line; the first line still reads */
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, size - 40), 0);
    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(damaged, 1);
    assert_int_equal(cache.n, 1);
    sb_plan_cache_free(&cache);
    /* an older version's cache (3: no ideal observer in setup_s): a well-formed line of it is
     * not used */
    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(cache.n, 1);
    sb_plan_cache_free(&cache);
    char *text = NULL;
    size_t text_len = 0;
    f = fopen(path, "r");
    assert_non_null(f);
    assert_true(getdelim(&text, &text_len, '\0', f) > 0);
    fclose(f);
    char *head = strstr(text, "\"version\": 4");
    assert_non_null(head);
    head[11] = '3';
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(damaged, 1);
    assert_int_equal(cache.n, 0);
    sb_plan_cache_free(&cache);
    /* not a cache at all */
    f = fopen(path, "w");
    fputs("\x01\x02 garbage {\"machine\": 3\n", f);
    fclose(f);
    assert_int_equal(sb_plan_cache_load(path, &cache, &damaged, &err), SB_OK);
    assert_int_equal(damaged, 1);
    assert_int_equal(cache.n, 0);
    sb_plan_cache_free(&cache);
    unlink(path);
    snprintf(path, sizeof path, "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
}

/* A tiny run planned at --curve_points 10 and 0: one run, the same training frames; the
 * curve's points add evaluations of the test split alone (the others read the test and the
 * validation split, here of equal size), exactly as many as the trainer makes. */
static void test_one_run_and_curve_points(void **state)
{
    (void)state;
    const char *keys[][2] = {{"model", "gru"},
                             {"vocab", "7"},
                             {"amb", "6"},
                             {"amb_depth", "6"},
                             {"train_seqlen_max", "20"},
                             {"test_seqlen_max", "20"},
                             {"dataset_size", "320"},
                             {"test_size", "12"},
                             {"batch_size", "16"},
                             {"feat_size", "16"},
                             {"layers", "1"}};
    sb_run_config cfg = sb_run_config_default();
    sb_error err = {0};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        assert_int_equal(sb_config_set(&cfg, keys[i][0], keys[i][1], &err), SB_OK);
    sb_plan_options o = {.ranks = 1, .threads = 1, .cached_only = 1};
    sb_plan *p10 = NULL, *p0 = NULL;
    assert_int_equal(sb_plan_run_config(&cfg, &o, &p10, &err), SB_OK);
    cfg.curve_points = 0;
    assert_int_equal(sb_plan_run_config(&cfg, &o, &p0, &err), SB_OK);
    assert_int_equal(p10->n_runs, 1);
    assert_int_equal(p0->n_runs, 1);
    assert_int_equal(p10->runs[0].train_frames, p0->runs[0].train_frames);
    /* 20 updates, --epoch_size 5000: the last update's evaluation, and 9 curve points */
    assert_int_equal(sb_train_curve_extra(20, 5000 / 16, 10), 9);
    assert_int_equal(p0->runs[0].evaluations, 1);
    assert_int_equal(p10->runs[0].evaluations, 10);
    /* (1 x (test + valid) + 9 x test) / (1 x (test + valid)) with valid = test: 11 / 2 */
    double ratio = (double)p10->runs[0].eval_frames / (double)p0->runs[0].eval_frames;
    assert_true(fabs(ratio - 5.5) < 0.01);
    assert_true(p10->runs[0].seconds > p0->runs[0].seconds);
    sb_plan_free(p10);
    sb_plan_free(p0);
    /* a configuration the run would refuse is refused here too */
    cfg.batch_size = 0;
    assert_int_not_equal(sb_plan_run_config(&cfg, &o, &p0, &err), SB_OK);
    assert_null(p0);
}

/* A sweep's ETA by its plan: the planned seconds not yet done, at the pace of the runs
 * trained so far, over the ranks; along a grid of growing runs that each take 1.2x their
 * plan it never rises once the first run has reported progress (the mean time of the runs
 * so far, the ETA it replaced, climbed at every larger run). */
static void test_time_left(void **state)
{
    (void)state;
    sb_plan_run runs[4] = {{.seconds = 10}, {.seconds = 20}, {.seconds = 30}, {.seconds = 40}};
    sb_plan p = {.n_runs = 3, .runs = runs, .ranks = 2};
    double share[4] = {1, 0.5, 0, 0}, none[4] = {0}, spent[4] = {12, 12, 0, 0};
    NEAR(sb_plan_time_left(&p, share, none), (0 + 10 + 30) / 2.0); /* the plan's pace */
    /* 24 s spent for 10 + 10 planned: pace 1.2 */
    NEAR(sb_plan_time_left(&p, share, spent), 1.2 * 40 / 2.0);
    share[1] = 7; /* shares outside [0, 1] are clamped */
    NEAR(sb_plan_time_left(&p, share, spent), (24.0 / 30.0) * 30 / 2.0);
    assert_true(isnan(sb_plan_time_left(NULL, share, spent)));
    assert_true(isnan(sb_plan_time_left(&p, NULL, spent)));
    assert_true(isnan(sb_plan_time_left(&p, share, NULL)));
    /* one rank, runs of 10, 20, 30, 40 s planned, each at 1.2x: the ETA at each tenth */
    p.n_runs = 4;
    p.ranks = 1;
    double s4[4] = {0}, t4[4] = {0}, last = HUGE_VAL;
    for (int r = 0; r < 4; r++)
        for (int k = 0; k <= 10; k++) {
            s4[r] = k / 10.0;
            t4[r] = 1.2 * runs[r].seconds * s4[r];
            double eta = sb_plan_time_left(&p, s4, t4);
            if ((r > 0 || k > 1) && eta > last + 1e-9)
                fail_msg("run %d at %d/10: the ETA rose from %g to %g", r, k, last, eta);
            last = eta;
        }
    NEAR(last, 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_two_and_three_ranks),
        cmocka_unit_test(test_dependencies),
        cmocka_unit_test(test_cache_file),
        cmocka_unit_test(test_one_run_and_curve_points),
        cmocka_unit_test(test_time_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_fuzz_findings.c - what the fuzz targets of tests/fuzz/ found, each fixed and checked
 * here by its behaviour (the inputs themselves are in tests/fuzz/corpus/ and replayed by
 * test_fuzz_replay_*):
 *   - a sweep file giving a parameter twice is refused (the grid had both, and the run's
 *     flags disagreed with sb_sweep_run_matches);
 *   - ${args} more than once in a sweep's command repeats the parameters at each place (the
 *     flags array was sized for one: a heap overflow);
 *   - a grid of more than 2^63 runs is refused (sb_sweep_count overflowed);
 *   - a damaged results database with NULL in the NOT NULL columns hash and status reads
 *     them as "" (callers compared NULL);
 *   - a cached ceiling's counts outside [0, 2^53] read as 0 (the conversion was undefined).
 *
 * usage: test_fuzz_findings PATH/TO/tests/fuzz/corpus
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
#include <sqlite3.h>
#include <unistd.h>

#include "exp/results.h"
#include "exp/sweep.h"
#include "task/ceiling.h"

static const char *corpus_dir;

static void test_sweep_parameter_twice(void **state)
{
    (void)state;
    const char *text = "method: grid\n"
                       "parameters:\n"
                       "  seed: {values: [1, 2]}\n"
                       "  lr: {value: 0.001}\n"
                       "  seed: {values: [3]}\n";
    sb_sweep *s = NULL;
    sb_error err = {0};
    assert_int_equal(sb_sweep_load_text("dup.yaml", text, strlen(text), &s, &err), SB_ERR_INVALID);
    assert_null(s);
    assert_string_equal(err.msg, "sweep file 'dup.yaml', line 5: key 'seed' is given twice in one "
                                 "mapping (first on line 3); keep one");
}

static void test_sweep_args_macro_repeated(void **state)
{
    (void)state;
    const char *text = "method: grid\n"
                       "parameters:\n"
                       "  seed: {values: [1, 2]}\n"
                       "  lr: {value: 0.001}\n"
                       "  layers: {values: [1]}\n"
                       "command: [\"${args}\", \"--vocab\", 9, \"${args}\", \"${args}\"]\n";
    sb_sweep *s = NULL;
    sb_error err = {0};
    assert_int_equal(sb_sweep_load_text("args.yaml", text, strlen(text), &s, &err), SB_OK);
    char **argv = NULL;
    int argc = 0;
    assert_int_equal(sb_sweep_run_args(s, 1, &argv, &argc, &err), SB_OK);
    /* parameters in name order, the last varying fastest: run 1 has seed 2 */
    const char *want[] = {"--layers=1", "--lr=0.001", "--seed=2",   "--vocab",
                          "9",          "--layers=1", "--lr=0.001", "--seed=2",
                          "--layers=1", "--lr=0.001", "--seed=2"};
    int n_want = (int)(sizeof want / sizeof *want);
    assert_int_equal(argc, n_want);
    for (int i = 0; i < n_want; i++)
        assert_string_equal(argv[i], want[i]);
    assert_null(argv[argc]);
    sb_sweep_args_free(argv);
    sb_sweep_free(s);
}

static void test_sweep_grid_too_large(void **state)
{
    (void)state;
    /* 64 parameters of 2 values: 2^64 runs; 62 of them (2^62 runs) fit */
    char text[4096] = "method: grid\nparameters:\n";
    for (int i = 0; i < 64; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "  p%02d: {values: [a, b]}\n", i);
    sb_sweep *s = NULL;
    sb_error err = {0};
    assert_int_equal(sb_sweep_load_text("wide.yaml", text, strlen(text), &s, &err), SB_ERR_INVALID);
    assert_string_equal(err.msg, "sweep file 'wide.yaml': its grid has more than "
                                 "9223372036854775807 runs (the product of its 64 parameters' "
                                 "value counts); split it into several files");
    *strstr(text, "  p62") = '\0';
    assert_int_equal(sb_sweep_load_text("wide.yaml", text, strlen(text), &s, &err), SB_OK);
    assert_true(sb_sweep_count(s) == INT64_C(1) << 62);
    sb_sweep_free(s);
}

static void test_results_null_hash_status(void **state)
{
    (void)state;
    /* one_run.db with the NOT NULL of hash and status removed from the schema and both set
     * to NULL (what a damaged file may hold) */
    char path[4096];
    snprintf(path, sizeof path, "%s/results/regress_null_hash_status.db", corpus_dir);
    sb_results *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_results_open_readonly(path, &db, &err), SB_OK);
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].r.run_hash, "");
    assert_int_equal(rows[0].r.status, SB_RUN_NONE);
    assert_string_equal(rows[0].r.model, "gru");
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
}

/* A NULL split in a damaged database (its NOT NULL dropped from the schema) is reported as
 * damage, not as "out of memory". */
static void test_results_null_split(void **state)
{
    (void)state;
    char src[4096], path[64];
    snprintf(src, sizeof src, "%s/results/one_run.db", corpus_dir);
    snprintf(path, sizeof path, "/tmp/sb-null-split-%ld.db", (long)getpid());
    FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, got, out), got);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
    const char *damage =
        "PRAGMA writable_schema = ON;"
        "UPDATE sqlite_master SET sql = replace(sql, 'split TEXT NOT NULL', 'split TEXT') "
        "WHERE name = 'evaluations';"
        "PRAGMA writable_schema = OFF;";
    assert_int_equal(sqlite3_exec(raw, damage, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw,
                                  "PRAGMA ignore_check_constraints = ON;"
                                  "UPDATE evaluations SET split = NULL;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_true(sqlite3_changes(raw) > 0);
    sqlite3_close(raw);

    sb_results *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_results_open_readonly(path, &db, &err), SB_OK);
    sb_run_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_list_runs(db, NULL, &rows, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    sb_eval_row *evals = NULL;
    size_t n_evals = 0;
    assert_int_equal(sb_results_list_evals(db, rows[0].id, &evals, &n_evals, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, "is damaged: an evaluation of run"));
    assert_non_null(strstr(err.msg, "has no split"));
    sb_results_run_rows_free(rows, n);
    sb_results_close(db);
    unlink(path);
}

static void test_ceiling_counts_out_of_range(void **state)
{
    (void)state;
    const char *text = "{\"expected_acc\":0.5,\"realized_acc\":0.5,\"expected_acc_se\":0.01,"
                       "\"window_acc\":{\"0\":0.1,\"1\":0.2,\"2\":0.3,\"4\":0.4,\"8\":0.5,"
                       "\"16\":0.5,\"32\":0.5},"
                       "\"n_samples\":1e300,\"n_elements\":-5,\"prior_samples\":12}";
    sb_ceiling c;
    sb_error err = {0};
    assert_int_equal(sb_ceiling_from_json(text, &c, &err), SB_OK);
    assert_int_equal(c.n_samples, 0);
    assert_int_equal(c.n_elements, 0);
    assert_int_equal(c.prior_samples, 12);
    assert_true(c.expected_acc == 0.5);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/tests/fuzz/corpus\n", argv[0]);
        return 2;
    }
    corpus_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_parameter_twice),
        cmocka_unit_test(test_sweep_args_macro_repeated),
        cmocka_unit_test(test_sweep_grid_too_large),
        cmocka_unit_test(test_results_null_hash_status),
        cmocka_unit_test(test_results_null_split),
        cmocka_unit_test(test_ceiling_counts_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

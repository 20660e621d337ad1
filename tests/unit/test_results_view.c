/*
 * test_results_view.c - `selectivbench results` on a database with known numbers, and run
 * ids in `eval`, `probe` and `results --run`: a database is made by hand (runs with chosen
 * hashes, configurations, accuracies and checkpoint paths), then the command's output is
 * checked against values computed here:
 *   --group: n, mean and sample standard deviation (n - 1) per group, finished runs only;
 *   --sort: ascending and descending order, unknown values last;
 *   --columns: exactly the columns asked, in that order;
 *   the default table: the keys the runs vary (and TE when the grammar varies), not the
 *   constant ones;
 *   unknown column names: one error line with the closest name, exit 2;
 *   ids: a full hash, a unique prefix, an ambiguous prefix and an unknown one, for eval,
 *   probe and results --run; the checkpoint path in --json and --csv;
 *   the library's groups (sb_run_table_groups) directly: order, apart labels, statistics.
 *
 * usage: test_results_view PATH/TO/selectivbench
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "exp/results.h"
#include "test_util.h"

static const char *binary;
static char dir[256];     /* the results folder */
static char db_path[320]; /* dir/selectivbench.db */

/* A run of the hand-made database. */
typedef struct made_run {
    const char *hash, *model;
    int feat_size, seed, amb;
    sb_run_status status;
    double test_acc;
} made_run;

/* gru/8: 0.5, 0.6, 0.7 (mean 0.6, sd 0.1); gru/16: 0.2, 0.4 and a failed run (mean 0.3,
 * sd sqrt(0.02)); transformer/8: 0.9 alone (no sd). Two hashes share the prefix abcd. */
static const made_run runs[] = {
    {"abcd000000000001", "gru", 8, 1, 3, SB_RUN_FINISHED, 0.5},
    {"abcd000000000002", "gru", 8, 2, 3, SB_RUN_FINISHED, 0.7},
    {"1234567890abcdef", "gru", 8, 3, 3, SB_RUN_FINISHED, 0.6},
    {"2222222222222222", "gru", 16, 1, 3, SB_RUN_FINISHED, 0.2},
    {"3333333333333333", "gru", 16, 2, 3, SB_RUN_FINISHED, 0.4},
    {"4444444444444444", "gru", 16, 3, 3, SB_RUN_FAILED, (double)NAN},
    {"ef01234567890abc", "transformer", 8, 1, 3, SB_RUN_FINISHED, 0.9},
};
#define N_RUNS (sizeof runs / sizeof *runs)

/* The stored configuration of a run: a tiny task (its ceiling is quick to compute). */
static char *config_json(const made_run *r, int amb)
{
    sb_config *cfg = NULL;
    sb_error err = {0};
    char value[32];
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    const char *keys[][2] = {{"grammar_scale", "True"},
                             {"train_seqlen_max", "8"},
                             {"test_seqlen_max", "8"},
                             {"test_size", "20"},
                             {"model", r->model}};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        assert_int_equal(sb_config_set_key(cfg, keys[k][0], keys[k][1], &err), SB_OK);
    snprintf(value, sizeof value, "%d", r->feat_size);
    assert_int_equal(sb_config_set_key(cfg, "feat_size", value, &err), SB_OK);
    snprintf(value, sizeof value, "%d", r->seed);
    assert_int_equal(sb_config_set_key(cfg, "seed", value, &err), SB_OK);
    snprintf(value, sizeof value, "%d", amb);
    assert_int_equal(sb_config_set_key(cfg, "amb", value, &err), SB_OK);
    char *json = NULL;
    assert_int_equal(sb_config_to_json(cfg, 0, &json, &err), SB_OK);
    sb_config_free(cfg);
    return json;
}

/* Writes the runs into a new database at db_path; with amb_varies, the last run gets
 * amb 4 (another grammar). */
static void make_database(int amb_varies)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -f '%s' '%s-wal' '%s-shm'", db_path, db_path, db_path);
    assert_int_equal(system(cmd), 0);
    sb_results *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_results_open(db_path, &db, &err), SB_OK);
    for (size_t i = 0; i < N_RUNS; i++) {
        const made_run *r = &runs[i];
        char *json = config_json(r, amb_varies && i == N_RUNS - 1 ? 4 : r->amb);
        char ckpt[400];
        snprintf(ckpt, sizeof ckpt, "%s/checkpoints/weights_of_%s.safetensors", dir, r->hash);
        sb_run_info info = {.hash = r->hash,
                            .config_json = json,
                            .model = r->model,
                            .protocol = "reference",
                            .params = 1000 + (int64_t)i,
                            .state_size = -1,
                            .flops_per_token = (double)NAN,
                            .checkpoint = ckpt};
        int64_t id = 0;
        assert_int_equal(sb_results_run_begin(db, &info, &id, &err), SB_OK);
        sb_run_metrics m = sb_results_metrics_unknown();
        m.test_acc = r->test_acc;
        m.test_loss = 1.0 - r->test_acc;
        assert_int_equal(sb_results_run_end(db, id, r->status, NULL, &m, &err), SB_OK);
        if (r->status == SB_RUN_FINISHED)
            assert_int_equal(sb_results_set_yardsticks(db, id, 0.95, 2.0, &err), SB_OK);
        sb_string_free(json);
    }
    sb_results_close(db);
}

/* Runs `selectivbench ARGS`: its exit code; stdout in *out (malloc'd), stderr in *errs. */
static int run_cli(const char *args, char **out, char **errs)
{
    char err_file[320], cmd[2048];
    snprintf(err_file, sizeof err_file, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "%s %s 2>'%s'", binary, args, err_file);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t got;
    while ((got = fread(text + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) {
            cap *= 2;
            text = realloc(text, cap);
            assert_non_null(text);
        }
    }
    text[len] = '\0';
    int status = pclose(p);
    *out = text;
    FILE *f = fopen(err_file, "r");
    assert_non_null(f);
    char *e = calloc(1, 4096);
    assert_non_null(e);
    size_t n = fread(e, 1, 4095, f);
    e[n] = '\0';
    fclose(f);
    *errs = e;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `results ARGS` must succeed; its stdout (malloc'd). */
static char *results_ok(const char *args)
{
    char full[1024], *out = NULL, *errs = NULL;
    snprintf(full, sizeof full, "results '%s' %s", db_path, args);
    int rc = run_cli(full, &out, &errs);
    if (rc != 0)
        fail_msg("results %s: exit %d: %s", args, rc, errs);
    free(errs);
    return out;
}

/* `selectivbench ARGS` must fail with exit code `want` and one stderr line holding needle. */
static void expect_error(const char *args, int want, const char *needle)
{
    char *out = NULL, *errs = NULL;
    int rc = run_cli(args, &out, &errs);
    size_t lines = 0;
    for (const char *c = errs; *c != '\0'; c++)
        lines += *c == '\n';
    if (rc != want || lines != 1 || strstr(errs, needle) == NULL)
        fail_msg("'%s': exit %d (want %d), stderr '%s' (want one line with '%s')", args, rc, want,
                 errs, needle);
    free(out);
    free(errs);
}

static void assert_close(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= 1e-12))
        fail_msg("%s: %.17g, want %.17g", what, got, want);
}

/* The group of the JSON output with these model and feat_size values. */
static json_t *find_group(json_t *groups, const char *model, int feat_size)
{
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g) {
        if (strcmp(json_string_value(json_object_get(g, "model")), model) == 0 &&
            json_integer_value(json_object_get(g, "feat_size")) == feat_size)
            return g;
    }
    fail_msg("no group %s/%d", model, feat_size);
    return NULL;
}

/* --group model,feat_size: n, mean and sample sd against the numbers computed here. */
static void test_group_statistics(void **state)
{
    (void)state;
    make_database(0);
    char *out = results_ok("--group model,feat_size --json");
    json_error_t jerr;
    json_t *root = json_loads(out, 0, &jerr);
    if (root == NULL)
        fail_msg("not JSON: %s: %.300s", jerr.text, out);
    json_t *groups = json_object_get(root, "groups");
    assert_int_equal(json_array_size(groups), 3);
    /* the expected values, from the accuracies of the finished runs of each group */
    const struct {
        const char *model;
        int feat_size;
        double acc[3];
        int n;
    } want[] = {{"gru", 8, {0.5, 0.7, 0.6}, 3},
                {"gru", 16, {0.2, 0.4, 0}, 2},
                {"transformer", 8, {0.9, 0, 0}, 1}};
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        json_t *g = find_group(groups, want[w].model, want[w].feat_size);
        double mean = 0, ss = 0;
        for (int k = 0; k < want[w].n; k++)
            mean += want[w].acc[k] / want[w].n;
        for (int k = 0; k < want[w].n; k++)
            ss += (want[w].acc[k] - mean) * (want[w].acc[k] - mean);
        json_t *acc = json_object_get(g, "test_acc");
        assert_int_equal(json_integer_value(json_object_get(g, "n")), want[w].n);
        assert_int_equal(json_integer_value(json_object_get(acc, "n")), want[w].n);
        assert_close(json_real_value(json_object_get(acc, "mean")), mean, "mean test_acc");
        if (want[w].n > 1)
            assert_close(json_real_value(json_object_get(acc, "std")), sqrt(ss / (want[w].n - 1)),
                         "sd test_acc");
        else
            assert_true(json_is_null(json_object_get(acc, "std")));
        assert_close(json_real_value(json_object_get(json_object_get(g, "ceiling"), "mean")), 0.95,
                     "mean ceiling");
    }
    /* by hand: gru/8 0.6 and 0.1; gru/16 0.3 and sqrt(0.02) */
    json_t *g8 = json_object_get(find_group(groups, "gru", 8), "test_acc");
    assert_close(json_real_value(json_object_get(g8, "std")), 0.1, "gru/8 sd");
    json_t *g16 = json_object_get(find_group(groups, "gru", 16), "test_acc");
    assert_close(json_real_value(json_object_get(g16, "mean")), 0.3, "gru/16 mean");
    assert_close(json_real_value(json_object_get(g16, "std")), sqrt(0.02), "gru/16 sd");
    /* the failed run is listed with its group but not counted */
    assert_int_equal(json_array_size(json_object_get(find_group(groups, "gru", 16), "runs")), 3);
    json_decref(root);
    free(out);

    /* CSV: a header and a line per group, in the group columns' order */
    char *csv = results_ok("--group model,feat_size --csv --columns test_acc");
    char *lines[5] = {csv};
    for (int k = 1; k < 5 && lines[k - 1] != NULL; k++) {
        char *eol = strchr(lines[k - 1], '\n');
        lines[k] = eol != NULL ? eol + 1 : NULL;
        if (eol != NULL)
            *eol = '\0';
    }
    assert_string_equal(lines[0], "model,feat_size,n,test_acc_mean,test_acc_std");
    assert_true(strncmp(lines[1], "gru,8,3,", 8) == 0);
    assert_true(strncmp(lines[2], "gru,16,2,", 9) == 0);
    assert_string_equal(lines[3], "transformer,8,1,0.9,");
    free(csv);

    /* the table says what the spread is */
    char *table = results_ok("--group model");
    assert_non_null(strstr(table, "sample standard deviation, n - 1"));
    assert_non_null(strstr(table, "1 runs that did not finish left out"));
    free(table);
    /* groups sorted by their mean, descending */
    char *sorted = results_ok("--group model,feat_size --sort -test_acc --csv");
    assert_non_null(strstr(sorted, "_std\ntransformer,8,"));
    free(sorted);
}

/* --sort: numbers in order (descending with -), the unknown accuracy of the failed run last. */
static void test_sort_and_columns(void **state)
{
    (void)state;
    make_database(0);
    char *out = results_ok("--sort test_acc --columns run,test_acc --csv");
    assert_string_equal(out, "hash,test_acc\n"
                             "2222222222222222,0.2\n"
                             "3333333333333333,0.4\n"
                             "abcd000000000001,0.5\n"
                             "1234567890abcdef,0.6\n"
                             "abcd000000000002,0.7\n"
                             "ef01234567890abc,0.9\n"
                             "4444444444444444,\n");
    free(out);
    out = results_ok("--sort -test_acc --columns test_acc,seed --csv");
    assert_string_equal(out, "test_acc,seed\n0.9,1\n0.7,2\n0.6,3\n0.5,1\n0.4,2\n0.2,1\n,3\n");
    free(out);
    /* text columns sort as text; ties keep the database's order */
    out = results_ok("--sort -model --columns model,seed --csv");
    assert_string_equal(out, "model,seed\ntransformer,1\ngru,1\ngru,2\ngru,3\ngru,1\ngru,2\n"
                             "gru,3\n");
    free(out);
    /* the table: the columns asked for, in that order */
    out = results_ok("--columns seed,model --status finished");
    assert_true(strncmp(out, "seed  model", 11) == 0);
    free(out);
}

/* The default table shows the keys the runs vary (seed, feat_size, model), not the constant
 * ones (lr, layers), and TE once the grammar varies. */
static void test_varied_columns(void **state)
{
    (void)state;
    make_database(0);
    char *out = results_ok("");
    char *eol = strchr(out, '\n');
    assert_non_null(eol);
    *eol = '\0';
    assert_non_null(strstr(out, "feat_size"));
    assert_non_null(strstr(out, "seed"));
    assert_null(strstr(out, " lr "));
    assert_null(strstr(out, "layers"));
    assert_null(strstr(out, "TE"));
    assert_null(strstr(out, "amb"));
    free(out);
    /* one model: its runs vary seed only */
    out = results_ok("--model transformer");
    eol = strchr(out, '\n');
    *eol = '\0';
    assert_null(strstr(out, "seed"));
    assert_null(strstr(out, "feat_size"));
    free(out);
    make_database(1);
    out = results_ok("");
    eol = strchr(out, '\n');
    *eol = '\0';
    assert_non_null(strstr(out, "amb"));
    assert_non_null(strstr(out, "TE"));
    free(out);
}

/* Unknown names: one line with the closest name, exit 2. */
static void test_unknown_columns(void **state)
{
    (void)state;
    make_database(0);
    char args[600];
    snprintf(args, sizeof args, "results '%s' --group modle", db_path);
    expect_error(args, 2, "--group: no column 'modle'; did you mean 'model'?");
    snprintf(args, sizeof args, "results '%s' --sort -tset_acc", db_path);
    expect_error(args, 2, "--sort: no column 'tset_acc'; did you mean 'test_acc'?");
    snprintf(args, sizeof args, "results '%s' --columns run,feat_sise", db_path);
    expect_error(args, 2, "did you mean 'feat_size'?");
    snprintf(args, sizeof args, "results '%s' --group model --sort seed", db_path);
    expect_error(args, 2, "--sort 'seed' with --group");
    snprintf(args, sizeof args, "results '%s' --group model --columns status", db_path);
    expect_error(args, 2, "only numbers are summarised");
}

/* Run ids: a full hash or a unique prefix finds the run's checkpoint (here a missing file,
 * which the load names); an ambiguous or unknown prefix is an error naming the database. */
static void test_run_ids(void **state)
{
    (void)state;
    make_database(0);
    const char *commands[] = {"eval", "probe"};
    char args[800], want[600];
    for (size_t c = 0; c < 2; c++) {
        const char *cmd = commands[c];
        snprintf(args, sizeof args, "%s abcd --results '%s'", cmd, dir);
        expect_error(args, 2, "run id 'abcd' matches several runs");
        snprintf(args, sizeof args, "%s ffff --results '%s'", cmd, dir);
        expect_error(args, 2, "no run in the results database has an id starting with 'ffff'");
        snprintf(args, sizeof args, "%s abc --db '%s'", cmd, db_path);
        expect_error(args, 2, "give 4 to 16 of its lowercase hex digits");
        /* the full hash, then a unique prefix: each run's own checkpoint is looked for */
        snprintf(args, sizeof args, "%s abcd000000000002 --results '%s'", cmd, dir);
        snprintf(want, sizeof want, "weights_of_abcd000000000002.safetensors");
        expect_error(args, 1, want);
        snprintf(args, sizeof args, "%s ef01 --db '%s'", cmd, dir);
        expect_error(args, 1, "weights_of_ef01234567890abc.safetensors");
        /* no database there: said, with the flags that name one */
        snprintf(args, sizeof args, "%s ef01 --results '%s/nowhere'", cmd, dir);
        expect_error(args, 1, "give --results DIR or --db PATH");
    }
    /* results --run: the run alone, with its checkpoint */
    char *out = results_ok("--run ef01");
    assert_non_null(strstr(out, "run         ef01234567890abc\n"));
    assert_non_null(strstr(out, "weights_of_ef01234567890abc.safetensors"));
    free(out);
    snprintf(args, sizeof args, "results '%s' --run abcd", db_path);
    expect_error(args, 2, "matches several runs");
    /* the checkpoint path in JSON and CSV */
    out = results_ok("--run 1234 --json");
    snprintf(want, sizeof want,
             "\"checkpoint\":\"%s/checkpoints/weights_of_1234567890abcdef.safetensors\"", dir);
    assert_non_null(strstr(out, want));
    free(out);
    out = results_ok("--run 1234 --csv");
    assert_non_null(strstr(out, ",checkpoint,"));
    assert_non_null(strstr(out, "weights_of_1234567890abcdef.safetensors"));
    free(out);
}

/* The library's rule itself (sb_run_table_groups, what `results --group` and the dashboard's
 * /api/groups print): by model alone, the gru runs of widths 8 and 16 are two groups (they
 * differ in more than their seeds) labelled apart by the width, in the order of the group
 * column with ties by appearance; by feat_size, 8 before 16 as numbers (not as text); the
 * failed run is in its group but not in its statistics; an unknown column is refused. */
static void test_library_groups(void **state)
{
    (void)state;
    sb_result_row rows[N_RUNS];
    char *configs[N_RUNS];
    for (size_t i = 0; i < N_RUNS; i++) {
        memset(&rows[i], 0, sizeof rows[i]);
        snprintf(rows[i].run_hash, sizeof rows[i].run_hash, "%s", runs[i].hash);
        snprintf(rows[i].model, sizeof rows[i].model, "%s", runs[i].model);
        rows[i].status = runs[i].status;
        rows[i].test_acc = runs[i].test_acc;
        configs[i] = config_json(&runs[i], runs[i].amb);
    }
    sb_run_table *t = NULL;
    sb_error err = {0};
    assert_int_equal(sb_run_table_new(rows, (const char *const *)configs, NULL, N_RUNS, &t, &err),
                     SB_OK);
    size_t all[N_RUNS];
    for (size_t i = 0; i < N_RUNS; i++)
        all[i] = i;
    int model = sb_run_column_find("model"), width = sb_run_column_find("feat_size");
    int acc = sb_run_column_find("test_acc");
    assert_true(model >= 0 && width >= sb_run_column_fields() && acc >= 0);
    sb_run_group *g = NULL;
    size_t n = 0;
    assert_int_equal(sb_run_table_groups(t, all, N_RUNS, &model, 1, &acc, 1, &g, &n, &err), SB_OK);
    assert_int_equal(n, 3);
    char buf[64];
    sb_run_table_value(t, g[0].first, model, buf, sizeof buf);
    assert_string_equal(buf, "gru");
    assert_string_equal(g[0].apart, "feat_size=8"); /* first appearance among the gru */
    assert_string_equal(g[1].apart, "feat_size=16");
    assert_string_equal(g[2].apart, "");
    assert_int_equal(g[0].n_runs, 3);
    assert_int_equal(g[1].n_runs, 3);   /* the failed run is in it */
    assert_int_equal(g[1].finished, 2); /* but not counted */
    assert_int_equal(g[1].stats[0].n, 2);
    assert_true(fabs(g[1].stats[0].mean - 0.3) < 1e-12);
    assert_true(fabs(g[1].stats[0].std - sqrt(0.02)) < 1e-12); /* n - 1 */
    assert_true(fabs(g[0].stats[0].std - 0.1) < 1e-12);
    assert_true(isnan(g[2].stats[0].std)); /* one run: no standard deviation */
    sb_run_groups_free(g, n);
    /* by width: 8 (gru, transformer) before 16 as numbers; by width and model: 8/gru,
     * 8/transformer, 16/gru */
    int by[2] = {width, model};
    assert_int_equal(sb_run_table_groups(t, all, N_RUNS, by, 2, &acc, 1, &g, &n, &err), SB_OK);
    assert_int_equal(n, 3);
    const char *want[3][2] = {{"8", "gru"}, {"8", "transformer"}, {"16", "gru"}};
    for (size_t k = 0; k < n; k++)
        for (int c = 0; c < 2; c++) {
            sb_run_table_value(t, g[k].first, by[c], buf, sizeof buf);
            assert_string_equal(buf, want[k][c]);
        }
    sb_run_groups_free(g, n);
    /* a subset: the two gru runs of width 16 that ran, one group of 2 */
    size_t some[2] = {3, 4};
    assert_int_equal(sb_run_table_groups(t, some, 2, &model, 1, &acc, 1, &g, &n, &err), SB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(g[0].finished, 2);
    sb_run_groups_free(g, n);
    int bad = -5;
    assert_int_equal(sb_run_table_groups(t, all, N_RUNS, &bad, 1, &acc, 1, &g, &n, &err),
                     SB_ERR_INVALID);
    assert_null(g);
    assert_int_equal(sb_run_column_find("no_such_column"), -1);
    sb_run_table_free(t);
    for (size_t i = 0; i < N_RUNS; i++)
        sb_string_free(configs[i]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/selectivbench\n", argv[0]);
        return 2;
    }
    binary = argv[1];
    snprintf(dir, sizeof dir, "/tmp/sb_results_view_XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/selectivbench.db", dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_statistics), cmocka_unit_test(test_sort_and_columns),
        cmocka_unit_test(test_varied_columns),   cmocka_unit_test(test_unknown_columns),
        cmocka_unit_test(test_run_ids),          cmocka_unit_test(test_library_groups),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    test_remove_dir(dir);
    return failed;
}

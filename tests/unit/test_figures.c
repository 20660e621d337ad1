/*
 * test_figures.c - figures that are right on any data (issue 16, item 1).
 *
 * The axes a figure computes (sb_plot_axes): an accuracy axis stays inside [0, 1] and
 * spans at least 0.1 around one point or points all equal; a log axis has at least three
 * labelled, distinct ticks inside its range, never closer than 8 % of the axis, and "(log)"
 * in its label, for one x, two close x values, the demo's range and a wide range.
 *
 * The report on degenerate databases (built with the library, each run with a few
 * evaluations): one run (the README's `train` run: task 1a settings), two models of one
 * width each (task 2), one model at three widths with equal accuracies (task 1b). Every
 * figure listed in report.json is checked: accuracy and curve axes inside [0, 1], every
 * log axis with >= 3 labelled ticks and "(log)", the chance and ceiling reference lines on
 * the accuracy figures; the single run sits under "Other runs" (report.md and report.json)
 * and in no figure.
 */
/* mkdtemp needs _GNU_SOURCE, which the build defines for every file */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "config/run_config.h"
#include "core/plot.h"
#include "exp/report.h"
#include "exp/results.h"

/* ---- sb_plot_axes ---------------------------------------------------------------------- */

/* The axes of a plot of one series. */
static void axes_of(const double *x, const double *y, int n, int logx, int yfraction,
                    sb_plot_axis *xa, sb_plot_axis *ya)
{
    sb_plot_series s = {.label = "m", .n = n, .x = x, .y = y};
    sb_plot p = {.title = "t",
                 .xlabel = "parameters (millions)",
                 .ylabel = "test accuracy",
                 .logx = logx,
                 .ymin = (double)NAN,
                 .ymax = (double)NAN,
                 .n_series = 1,
                 .series = &s,
                 .yfraction = yfraction};
    sb_plot_axes(&p, xa, ya);
}

/* A log axis: "(log)" in its label, >= 3 labelled ticks inside its range, increasing, with
 * distinct labels. */
static void check_log_axis(const sb_plot_axis *a)
{
    assert_true(a->log);
    assert_non_null(strstr(a->label, "(log)"));
    if (a->n_ticks < 3)
        fail_msg("log axis %g .. %g has %d labelled ticks", a->min, a->max, a->n_ticks);
    for (int i = 0; i < a->n_ticks; i++) {
        assert_true(a->ticks[i] >= a->min * (1 - 1e-9) && a->ticks[i] <= a->max * (1 + 1e-9));
        assert_true(a->tick_labels[i][0] != '\0');
        if (i > 0) {
            assert_true(a->ticks[i] > a->ticks[i - 1]);
            assert_string_not_equal(a->tick_labels[i], a->tick_labels[i - 1]);
            /* labels apart: at least 8 % of the axis between neighbours */
            double gap = log10(a->ticks[i] / a->ticks[i - 1]) / log10(a->max / a->min);
            if (gap < 0.08 - 1e-9)
                fail_msg("log ticks %s and %s crowd (%.3f of the axis)", a->tick_labels[i - 1],
                         a->tick_labels[i], gap);
        }
    }
}

/* An accuracy axis: inside [0, 1], at least 0.1 wide, containing the values, >= 3 ticks. */
static void check_fraction_axis(const sb_plot_axis *a, double lo, double hi)
{
    if (!(a->min >= 0 && a->max <= 1 && a->max - a->min >= 0.1 - 1e-12 && a->min <= lo &&
          a->max >= hi))
        fail_msg("accuracy axis %g .. %g for values %g .. %g", a->min, a->max, lo, hi);
    assert_true(a->n_ticks >= 3);
}

static void test_axes_one_point(void **state)
{
    (void)state;
    double x[1] = {0.0138}, y[1] = {0.95};
    sb_plot_axis xa, ya;
    axes_of(x, y, 1, 1, 1, &xa, &ya);
    check_log_axis(&xa);
    check_fraction_axis(&ya, 0.95, 0.95);
    /* one point at 0.95: about 0.89 .. 1.0, not a unit range around it */
    assert_true(fabs(ya.min - 0.89) < 0.011 && ya.max == 1.0);
    /* a point at 1: the axis ends at 1 */
    y[0] = 1.0;
    axes_of(x, y, 1, 1, 1, &xa, &ya);
    check_fraction_axis(&ya, 1.0, 1.0);
    y[0] = 0.0;
    axes_of(x, y, 1, 0, 1, &xa, &ya);
    check_fraction_axis(&ya, 0.0, 0.0);
    assert_null(strstr(xa.label, "(log)"));
}

static void test_axes_log_ranges(void **state)
{
    (void)state;
    sb_plot_axis xa, ya;
    /* two models of one width: parameter counts close together (no label before) */
    double close[2] = {0.0101, 0.0119}, y[3] = {0.5, 0.6, 0.7};
    axes_of(close, y, 2, 1, 1, &xa, &ya);
    check_log_axis(&xa);
    /* the demo's figure 3A: 0.01 .. 0.03 (only 0.01 and 0.02 labelled before) */
    double demo[3] = {0.0094, 0.018, 0.031};
    axes_of(demo, y, 3, 1, 1, &xa, &ya);
    check_log_axis(&xa);
    /* a wide range: decades */
    double wide[3] = {0.001, 0.5, 40};
    axes_of(wide, y, 3, 1, 1, &xa, &ya);
    check_log_axis(&xa);
    assert_true(xa.n_ticks <= 12);
    /* every ratio from 1.0001 to 1000 keeps three labelled ticks */
    for (double r = 1.0001; r < 1000; r *= 1.37) {
        double xs[2] = {0.0123, 0.0123 * r};
        axes_of(xs, y, 2, 1, 1, &xa, &ya);
        check_log_axis(&xa);
    }
}

/* ---- degenerate databases -------------------------------------------------------------- */

typedef struct fixture {
    char dir[512];
    char db[600], out[600];
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (fx == NULL)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(fx->dir, sizeof fx->dir, "%s/sb_figures_XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    snprintf(fx->db, sizeof fx->db, "%s/results.db", fx->dir);
    snprintf(fx->out, sizeof fx->out, "%s/report", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    int rc = test_remove_dir(fx->dir);
    free(fx);
    return rc;
}

/* A small task (its ceiling is quick): 7 letters, 6 ambiguous, 20 elements. */
static sb_run_config small_config(const char *model, int width, uint64_t seed)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "%s", model);
    c.feat_size = width;
    c.layers = 1;
    c.lr = 3e-3;
    c.seed = seed;
    c.task.grammar.vocab = 7;
    c.task.grammar.amb = 6;
    c.task.grammar.amb_depth = 6;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.dataset_size = 96;
    c.task.test_size = 12;
    return c;
}

/* Records a finished run of c with `params` parameters, evaluations at 32, 64 and 96
 * samples (test accuracy rising to acc), and final test accuracy acc. Writes its hash. */
static void add_run(const char *db_path, const sb_run_config *c, int64_t params, double acc,
                    char hash[17])
{
    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open(db_path, &db, &err) != SB_OK)
        fail_msg("open: %s", err.msg);
    sb_run_config_hash(c, 0, hash);
    char *json = sb_run_config_json_string(c, 0);
    assert_non_null(json);
    sb_run_info run = {.hash = hash,
                       .config_json = json,
                       .model = c->model,
                       .protocol = "reference",
                       .params = params,
                       .state_size = -1,
                       .flops_per_token = (double)NAN};
    int64_t id = -1;
    if (sb_results_run_begin(db, &run, &id, &err) != SB_OK)
        fail_msg("run_begin: %s", err.msg);
    for (int e = 1; e <= 3; e++) {
        sb_eval_row row = {.step = 2 * e,
                           .samples = 32 * e,
                           .split = SB_SPLIT_TEST,
                           .loss = 1.0 / e,
                           .acc = acc - 0.1 * (3 - e),
                           .lr = c->lr,
                           .tokens_per_s = (double)NAN,
                           .wall_s = e};
        if (sb_results_add_eval(db, id, &row, &err) != SB_OK)
            fail_msg("add_eval: %s", err.msg);
    }
    sb_run_metrics m = sb_results_metrics_unknown();
    m.test_acc = acc;
    if (sb_results_run_end(db, id, SB_RUN_FINISHED, NULL, &m, &err) != SB_OK)
        fail_msg("run_end: %s", err.msg);
    sb_results_close(db);
    free(json);
}

/* Writes the report of fx's database and reads its report.json. */
static json_t *report_json(const fixture *fx, sb_report_summary *sum)
{
    sb_error err = {0};
    if (sb_report_generate(fx->db, fx->out, sum, &err) != SB_OK)
        fail_msg("report: %s", err.msg);
    char path[700];
    snprintf(path, sizeof path, "%s/report.json", fx->out);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL)
        fail_msg("report.json: %s", jerr.text);
    return root;
}

/* One axis of report.json as checked: its range, ticks and label. */
static void check_json_axis(json_t *axis, int fraction, const char *figure)
{
    double lo = json_number_value(json_object_get(axis, "min"));
    double hi = json_number_value(json_object_get(axis, "max"));
    const char *label = json_string_value(json_object_get(axis, "label"));
    json_t *labels = json_object_get(axis, "tick_labels");
    assert_non_null(label);
    if (fraction && !(lo >= 0 && hi <= 1 && hi - lo >= 0.1 - 1e-12))
        fail_msg("%s: accuracy axis %g .. %g", figure, lo, hi);
    if (json_is_true(json_object_get(axis, "log"))) {
        if (strstr(label, "(log)") == NULL)
            fail_msg("%s: log axis labelled '%s'", figure, label);
        if (json_array_size(labels) < 3)
            fail_msg("%s: log axis with %zu labelled ticks", figure, json_array_size(labels));
    }
    assert_true(json_array_size(labels) >= 2);
}

/* Checks every figure of report.json; returns how many of each kind there are. */
static void check_figures(json_t *root, int *n_accuracy, int *n_curves)
{
    json_t *figures = json_object_get(root, "figures");
    assert_true(json_is_array(figures));
    *n_accuracy = *n_curves = 0;
    size_t i;
    json_t *f;
    json_array_foreach (figures, i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *kind = json_string_value(json_object_get(f, "kind"));
        assert_non_null(name);
        assert_non_null(kind);
        int fraction = strcmp(kind, "memory") != 0;
        check_json_axis(json_object_get(f, "x"), 0, name);
        check_json_axis(json_object_get(f, "y"), fraction, name);
        if (strcmp(kind, "accuracy") == 0) {
            (*n_accuracy)++;
            /* chance and the ceiling are drawn, and in the legend */
            json_t *refs = json_object_get(f, "reference_lines");
            int chance = 0, ceiling = 0;
            size_t r;
            json_t *label;
            json_array_foreach (refs, r, label) {
                chance += strncmp(json_string_value(label), "chance", 6) == 0;
                ceiling += strncmp(json_string_value(label), "ceiling", 7) == 0;
            }
            if (chance != 1 || ceiling != 1)
                fail_msg("%s: %d chance and %d ceiling lines", name, chance, ceiling);
        }
        *n_curves += strcmp(kind, "curves") == 0;
    }
}

/* Whether report.json lists run hash under other_runs. */
static int listed_other(json_t *root, const char *hash)
{
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(root, "other_runs"), i, r)
        if (strcmp(json_string_value(json_object_get(r, "run")), hash) == 0)
            return 1;
    return 0;
}

/* Whether the file at path has a line starting with prefix that contains needle, after a
 * line starting with after (NULL: anywhere). */
static int file_has(const char *path, const char *after, const char *prefix, const char *needle)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int past = after == NULL, found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        if (!past)
            past = strncmp(line, after, strlen(after)) == 0;
        else
            found = strncmp(line, prefix, strlen(prefix)) == 0 && strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

/* The README's single `train` run (task 1a settings: grammar_scale, amb 8): under "Other
 * runs", in no figure; its learning curve is drawn with an accuracy axis inside [0, 1]. */
static void test_report_one_run(void **state)
{
    fixture *fx = *state;
    sb_run_config c = small_config("transformer", 64, 1);
    c.task.grammar.grammar_scale = 1;
    c.task.grammar.amb = 6;
    char hash[17];
    add_run(fx->db, &c, 138000, 0.8861, hash);
    sb_report_summary sum;
    json_t *root = report_json(fx, &sum);
    assert_int_equal(sum.out.runs_used, 1);
    assert_int_equal(sum.out.runs_other, 1);
    int n_acc, n_curves;
    check_figures(root, &n_acc, &n_curves);
    assert_int_equal(n_acc, 0);    /* not filed under "Task 1a" */
    assert_int_equal(n_curves, 1); /* other_curves */
    assert_true(listed_other(root, hash));
    char md[700];
    snprintf(md, sizeof md, "%s/report.md", fx->out);
    assert_true(file_has(md, "## Other runs", "| transformer |", hash));
    assert_false(file_has(md, NULL, "## Task 1a", ""));
    json_decref(root);
}

/* Two models of one width each (task 2): one figure whose log x axis is labelled. */
static void test_report_two_models_one_width(void **state)
{
    fixture *fx = *state;
    const char *models[2] = {"gru", "transformer"};
    const int64_t params[2] = {10100, 11900};
    for (int m = 0; m < 2; m++) {
        sb_run_config c = small_config(models[m], 32, 1);
        c.task.train_noise = 0.2;
        c.task.train_gap_max = 0.5;
        char hash[17];
        add_run(fx->db, &c, params[m], 0.7 + 0.1 * m, hash);
    }
    sb_report_summary sum;
    json_t *root = report_json(fx, &sum);
    assert_int_equal(sum.out.runs_other, 0);
    int n_acc, n_curves;
    check_figures(root, &n_acc, &n_curves);
    assert_int_equal(n_acc, 1);
    assert_int_equal(n_curves, 1);
    json_t *fig = json_array_get(json_object_get(root, "figures"), 0);
    assert_string_equal(json_string_value(json_object_get(fig, "name")), "fig3a");
    assert_true(json_is_true(json_object_get(json_object_get(fig, "x"), "log")));
    json_decref(root);
}

/* One model at three widths, every accuracy 0.95 (task 1b): the axis is not a unit range
 * around 0.95 and stays inside [0, 1]. */
static void test_report_equal_accuracies(void **state)
{
    fixture *fx = *state;
    const int widths[3] = {16, 32, 64};
    for (int w = 0; w < 3; w++) {
        sb_run_config c = small_config("gru", widths[w], 1);
        char hash[17];
        add_run(fx->db, &c, 1000 * widths[w], 0.95, hash);
    }
    sb_report_summary sum;
    json_t *root = report_json(fx, &sum);
    int n_acc, n_curves;
    check_figures(root, &n_acc, &n_curves);
    assert_int_equal(n_acc, 1);
    json_t *fig = json_array_get(json_object_get(root, "figures"), 0);
    json_t *y = json_object_get(fig, "y");
    double lo = json_number_value(json_object_get(y, "min"));
    double hi = json_number_value(json_object_get(y, "max"));
    if (!(lo <= 0.95 && hi >= 0.95 && hi <= 1))
        fail_msg("equal accuracies of 0.95 on an axis %g .. %g", lo, hi);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axes_one_point),
        cmocka_unit_test(test_axes_log_ranges),
        cmocka_unit_test_setup_teardown(test_report_one_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_two_models_one_width, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_equal_accuracies, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

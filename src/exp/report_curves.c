/* report_curves.c - learning-curve figures from the evaluations of a results database
 * (see report_curves.h). */
#include "exp/report_curves.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One test evaluation: training samples seen and the test accuracy. */
typedef struct curve_obs {
    double samples, acc;
} curve_obs;

static int cmp_obs(const void *a, const void *b)
{
    const curve_obs *x = a, *y = b;
    return x->samples < y->samples ? -1 : x->samples > y->samples;
}

/* The mean and the spread of one group at each sample count: arrays of *n points. */
typedef struct curve_line {
    double *x, *mean, *lo, *hi;
    int n;
} curve_line;

static void curve_line_free(curve_line *l)
{
    free(l->x), free(l->mean), free(l->lo), free(l->hi);
    memset(l, 0, sizeof *l);
}

/* Appends run run_id's test evaluations with a known sample count and accuracy to *obs
 * (grown as needed; *cap its room). */
static sb_status append_run(sb_results *db, int64_t run_id, curve_obs **obs, size_t *n_obs,
                            size_t *cap, sb_error *err)
{
    sb_eval_row *rows = NULL;
    size_t n = 0;
    sb_status st = sb_results_list_evals(db, run_id, &rows, &n, err);
    if (st != SB_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].split != SB_SPLIT_TEST || rows[i].samples < 0 || !isfinite(rows[i].acc))
            continue;
        if (*n_obs == *cap) {
            size_t grown_cap = *cap > 0 ? 2 * *cap : 64;
            curve_obs *grown = realloc(*obs, grown_cap * sizeof *grown);
            if (grown == NULL) {
                free(rows);
                return sb_error_set(err, SB_ERR_NOMEM, "out of memory reading learning curves");
            }
            *obs = grown, *cap = grown_cap;
        }
        (*obs)[(*n_obs)++] = (curve_obs){(double)rows[i].samples, rows[i].acc};
    }
    free(rows);
    return SB_OK;
}

/* The group's line: its runs' evaluations merged by sample count. */
static sb_status group_line(sb_results *db, const sb_curve_group *g, curve_line *line,
                            sb_error *err)
{
    memset(line, 0, sizeof *line);
    curve_obs *obs = NULL;
    size_t n_obs = 0, cap = 0;
    sb_status st = SB_OK;
    for (int r = 0; r < g->n_runs && st == SB_OK; r++)
        st = append_run(db, g->run_ids[r], &obs, &n_obs, &cap, err);
    if (st != SB_OK || n_obs == 0) {
        free(obs);
        return st;
    }
    qsort(obs, n_obs, sizeof *obs, cmp_obs);
    line->x = malloc(n_obs * sizeof *line->x), line->mean = malloc(n_obs * sizeof *line->mean);
    line->lo = malloc(n_obs * sizeof *line->lo), line->hi = malloc(n_obs * sizeof *line->hi);
    if (line->x == NULL || line->mean == NULL || line->lo == NULL || line->hi == NULL) {
        free(obs);
        curve_line_free(line);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory drawing learning curves");
    }
    for (size_t i = 0; i < n_obs;) {
        size_t j = i;
        double sum = 0, lo = HUGE_VAL, hi = -HUGE_VAL;
        for (; j < n_obs && obs[j].samples == obs[i].samples; j++) {
            sum += obs[j].acc;
            lo = fmin(lo, obs[j].acc), hi = fmax(hi, obs[j].acc);
        }
        line->x[line->n] = obs[i].samples;
        line->mean[line->n] = sum / (double)(j - i);
        line->lo[line->n] = lo, line->hi[line->n] = hi;
        line->n++;
        i = j;
    }
    free(obs);
    return SB_OK;
}

sb_status sb_report_curve_figure(sb_results *db, const char *title, const char *subtitle,
                                 const sb_curve_group *groups, int n_groups,
                                 const sb_plot_ref *refs, int n_refs, const char *path_base,
                                 sb_plot_axis *x, sb_plot_axis *y, int *n_drawn, sb_error *err)
{
    *n_drawn = 0;
    curve_line *lines = calloc((size_t)(n_groups > 0 ? n_groups : 1), sizeof *lines);
    sb_plot_series *series = calloc((size_t)(n_groups > 0 ? n_groups : 1), sizeof *series);
    if (lines == NULL || series == NULL) {
        free(lines), free(series);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory drawing learning curves");
    }
    sb_status st = SB_OK;
    int most_points = 0, n_series = 0;
    for (int g = 0; g < n_groups && st == SB_OK; g++) {
        st = group_line(db, &groups[g], &lines[g], err);
        /* a line of one or two points is not a curve (runs recorded with --curve_points 0) */
        if (st != SB_OK || lines[g].n < SB_CURVE_MIN_POINTS)
            continue;
        /* a single run has no spread to shade */
        int band = groups[g].n_runs > 1;
        series[n_series++] = (sb_plot_series){.label = groups[g].label,
                                              .n = lines[g].n,
                                              .x = lines[g].x,
                                              .y = lines[g].mean,
                                              .lo = band ? lines[g].lo : NULL,
                                              .hi = band ? lines[g].hi : NULL};
        most_points = lines[g].n > most_points ? lines[g].n : most_points;
    }
    if (st == SB_OK && n_series > 0) {
        *n_drawn = n_series;
        sb_plot plot = {.title = title,
                        .subtitle = subtitle,
                        .xlabel = "training samples seen",
                        .ylabel = "test accuracy (fraction of elements)",
                        .ymin = (double)NAN,
                        .ymax = (double)NAN,
                        .n_series = n_series,
                        .series = series,
                        .n_refs = n_refs,
                        .refs = refs,
                        .yfraction = 1,
                        .no_markers = most_points > 20,
                        .xfrom0 = 1};
        sb_plot_axis xa, ya;
        sb_plot_axes(&plot, &xa, &ya);
        if (x != NULL)
            *x = xa;
        if (y != NULL)
            *y = ya;
        st = sb_plot_write(&plot, path_base, err);
    }
    for (int g = 0; g < n_groups; g++)
        curve_line_free(&lines[g]);
    free(lines);
    free(series);
    return st;
}

/* report.c - the paper's figures and a markdown table from a results database
 * (see report.h). */
#include "exp/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/run_config.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "core/plot.h"
#include "exp/claims.h"
#include "exp/experiment.h"
#include "exp/report_curves.h"
#include "exp/results.h"
#include "model/model.h"
#include "task/ceiling.h"
#include "task/grammar.h"
#include "train/run_setup.h"

#define ONE_FRAME_S 0.1 /* a gap of one frame: task 1 has no longer ones */

/* FIG_X: every run against one configuration key (report's x_key: a scale study's
 * dataset_size or train_seqlen_max), instead of the paper's figures. */
enum { FIG_2A, FIG_2B, FIG_3A, FIG_3B, FIG_4, FIG_X, N_FIGS };

static const char *fig_name[N_FIGS] = {"fig2a", "fig2b", "fig3a", "fig3b", "fig4", "scale"};
static const char *fig_title[N_FIGS] = {
    "Task 1a: accuracy vs grammar complexity",
    "Task 1b: accuracy vs model size",
    "Task 2: noisy gaps",
    "Task 3: non-grammatical gaps",
    "Task 4: generalisation to longer gaps",
    "Accuracy vs",
};
static const char *fig_xlabel[N_FIGS] = {
    "topological entropy of the grammar (nats)",
    "parameters (millions)",
    "parameters (millions)",
    "parameters (millions)",
    "gap frames after each symbol at test (0.1 s each)",
    NULL, /* the key's name */
};

/* One finished run, reduced to what the figures need. */
typedef struct rec {
    int64_t run_id; /* the database's id (its evaluations) */
    char hash[17];  /* the run hash, the run's id for people */
    int seed;
    int other;                /* its figure's runs have one x only: listed under "Other runs" */
    int fig, protocol, panel; /* panel: the width for fig2a and fig4, else 0 */
    /* its experiment within its figure (experiment.h): the runs of one figure set share
     * every stored key but the model, the seeds, lr / warm-up and the axis drawn */
    int experiment, n_experiments;
    char *exp_key;       /* the identity (owned by the report's key list) */
    char exp_label[160]; /* what sets it apart from its figure's other experiments */
    int model_rank;      /* registry order */
    char model[SB_MODEL_NAME_MAX];
    double xkey;     /* amb (fig2a), params (2b, 3a, 3b), gap frames (4) */
    double params_m; /* parameters, millions */
    double lr;
    int warmup;
    double acc;   /* test accuracy: reported, never chosen on */
    double valid; /* validation accuracy, which choices read; NaN: none recorded */
    /* yardsticks: the ceiling, chance (the k = 0 observer: always the most frequent state)
     * and window observers k = 1, 4, 8 of the run's task, and the run's effective memory;
     * NaN where unknown */
    double ceiling, chance, window[3], memory;
    /* for fig2a: the grammar of this run (its TE is averaged per amb) */
    int vocab, amb, depth;
    uint64_t task_seed;
} rec;

static int cmp_rec(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->other != y->other) /* the other runs last */
        return x->other - y->other;
    if (x->fig != y->fig)
        return x->fig - y->fig;
    if (x->protocol != y->protocol)
        return x->protocol - y->protocol;
    if (x->experiment != y->experiment)
        return x->experiment - y->experiment;
    if (x->panel != y->panel)
        return x->panel - y->panel;
    if (x->model_rank != y->model_rank)
        return x->model_rank - y->model_rank;
    int c = strcmp(x->model, y->model);
    if (c != 0)
        return c;
    if (x->xkey != y->xkey)
        return x->xkey < y->xkey ? -1 : 1;
    if (x->lr != y->lr)
        return x->lr < y->lr ? -1 : 1;
    return x->warmup - y->warmup;
}

static int model_rank(const char *name)
{
    const sb_layer_type *const *types = sb_layer_types();
    for (int i = 0; types[i] != NULL; i++)
        if (strcmp(types[i]->name, name) == 0)
            return i;
    return 1000;
}

/* Figure of a configuration (see report.h). */
static void classify(const sb_run_config *c, size_t params, rec *r)
{
    const sb_task_config *t = &c->task;
    r->panel = 0;
    if (c->test_pretrained) {
        r->fig = FIG_4;
        double dur = t->test_dur >= 0 ? t->test_dur : t->train_gap_max;
        r->xkey = rint(dur / 0.1);
        r->panel = sb_run_config_effective_width(c);
    } else if (t->grammar_gap) {
        r->fig = FIG_3B;
        r->xkey = (double)params / 1e6;
    } else if (t->train_noise > 0 || t->train_gap_max > ONE_FRAME_S + 1e-9) {
        r->fig = FIG_3A;
        r->xkey = (double)params / 1e6;
    } else if (t->grammar.grammar_scale) {
        r->fig = FIG_2A;
        r->xkey = t->grammar.amb;
        r->panel = sb_run_config_effective_width(c);
    } else {
        r->fig = FIG_2B;
        r->xkey = (double)params / 1e6;
    }
}

/* Mean TE over the distinct seeds of the fig2a runs with this amb (grammars cached). */
typedef struct te_cache {
    int vocab, amb, depth;
    uint64_t seed;
    double te;
} te_cache;

static double grammar_te(te_cache **cache, int *n_cache, const rec *r)
{
    for (int i = 0; i < *n_cache; i++) {
        te_cache *c = &(*cache)[i];
        if (c->vocab == r->vocab && c->amb == r->amb && c->depth == r->depth &&
            c->seed == r->task_seed)
            return c->te;
    }
    sb_grammar_config gc = sb_grammar_config_default();
    gc.vocab = r->vocab, gc.amb = r->amb, gc.amb_depth = r->depth, gc.seed = r->task_seed;
    sb_grammar *g = NULL;
    sb_error err = {0};
    double te = (double)NAN;
    if (sb_grammar_generate(&gc, &g, &err) == SB_OK)
        te = g->topological_entropy;
    sb_grammar_free(g);
    te_cache *grown = realloc(*cache, (size_t)(*n_cache + 1) * sizeof *grown);
    if (grown != NULL) {
        *cache = grown;
        grown[*n_cache] = (te_cache){r->vocab, r->amb, r->depth, r->task_seed, te};
        (*n_cache)++;
    }
    return te;
}

/* The window sizes k of the observers drawn on the accuracy figures. */
static const int ref_k[3] = {1, 4, 8};

/* Index of window size k in sb_ceiling_window_k. */
static int window_index(int k)
{
    for (int i = 0; i < SB_CEILING_N_WINDOWS; i++)
        if (sb_ceiling_window_k[i] == k)
            return i;
    return 0;
}

/* Effective memory beyond the k = 32 observer: plotted on a line of its own (at twice 32)
 * when every seed of a point is beyond; in a mean over seeds it counts as 32, so the mean is
 * a lower bound (the window curve says no more than "at least 32"). */
#define MEMORY_BEYOND 32.0

/* One plotted point: the best setting's statistics. */
/* Which split chose a point's lr / warm-up setting among several. */
enum { CHOSE_NOTHING, CHOSE_ON_VALID, CHOSE_ON_TEST };
static const char *const chose_name[] = {"-", "valid", "test"};

typedef struct point {
    double x, mean, std, lr; /* the test accuracy's mean and std (n - 1) over the seeds */
    int n, warmup;
    double valid_mean;        /* the validation accuracy's mean; NaN when a seed has none */
    int chosen;               /* CHOSE_*: how this setting was chosen among the point's */
    double score;             /* what it was chosen by: valid_mean, or mean */
    double ceiling;           /* mean over the setting's seeds */
    double mem_mean, mem_std; /* effective memory over the seeds (beyond 32 as 32) */
    int mem_n, mem_beyond;    /* seeds with a memory, of which beyond 32 */
} point;

/* The yardsticks' statistics of runs recs[a..b): ceiling mean, memory mean and std. */
static void point_yardsticks(const rec *recs, int a, int b, point *pt)
{
    double sum_c = 0, sum_m = 0;
    int n_c = 0, n_m = 0, beyond = 0;
    for (int q = a; q < b; q++) {
        if (!isnan(recs[q].ceiling))
            sum_c += recs[q].ceiling, n_c++;
        if (!isnan(recs[q].memory)) {
            sum_m += fmin(recs[q].memory, MEMORY_BEYOND);
            n_m++;
            beyond += recs[q].memory > MEMORY_BEYOND;
        }
    }
    pt->ceiling = n_c > 0 ? sum_c / n_c : (double)NAN;
    pt->mem_n = n_m;
    pt->mem_beyond = beyond;
    pt->mem_mean = n_m > 0 ? sum_m / n_m : (double)NAN;
    double var = 0;
    for (int q = a; q < b; q++)
        if (!isnan(recs[q].memory)) {
            double d = fmin(recs[q].memory, MEMORY_BEYOND) - pt->mem_mean;
            var += d * d;
        }
    pt->mem_std = n_m > 1 ? sqrt(var / (n_m - 1)) : n_m == 1 ? 0.0 : (double)NAN;
    if (n_m > 0 && beyond == n_m)
        pt->mem_mean = (double)INFINITY; /* every seed beyond 32 */
}

/* The reference lines of an accuracy figure, in this order: */
#define N_REFS 5
static const char *ref_label[N_REFS] = {"ceiling (ideal observer)", "chance (majority state)",
                                        "k = 8 window", "k = 4 window", "k = 1 window"};
/* dashed, dash-dot, solid, short dashes, dotted (plot.h) */
static const int ref_style_of[N_REFS] = {1, 4, 0, 2, 3};

/* A run's values of the reference lines, in ref_label's order. */
static void rec_ref_values(const rec *r, double v[N_REFS])
{
    v[0] = r->ceiling, v[1] = r->chance;
    v[2] = r->window[2], v[3] = r->window[1], v[4] = r->window[0];
}

/* A figure's reference lines: per distinct x (over every model's runs there) the mean
 * ceiling, chance and window accuracies of the runs' tasks. */
typedef struct ref_x {
    double xkey, x;
    double sum[N_REFS];
    int n[N_REFS];
    double te_sum;
    int te_n;
} ref_x;

static int cmp_ref_x(const void *a, const void *b)
{
    const ref_x *x = a, *y = b;
    return x->xkey < y->xkey ? -1 : x->xkey > y->xkey;
}

/* Builds up to N_REFS reference lines (ceiling, chance, k = 8, 4, 1) of the runs
 * recs[a..b) into refs, their points into xs/ys (N_REFS * (b - a) each); returns how many.
 * A line is horizontal when every x has the same value. */
static int figure_refs(const rec *recs, int a, int b, int fig, te_cache **cache, int *n_cache,
                       sb_plot_ref *refs, double *xs, double *ys, ref_x *rx)
{
    int n_x = 0;
    for (int q = a; q < b; q++) {
        int k = 0;
        while (k < n_x && rx[k].xkey != recs[q].xkey)
            k++;
        if (k == n_x)
            rx[n_x++] = (ref_x){.xkey = recs[q].xkey};
        double v[N_REFS];
        rec_ref_values(&recs[q], v);
        for (int r = 0; r < N_REFS; r++)
            if (!isnan(v[r]))
                rx[k].sum[r] += v[r], rx[k].n[r]++;
        if (fig == FIG_2A) {
            double te = grammar_te(cache, n_cache, &recs[q]);
            if (isfinite(te))
                rx[k].te_sum += te, rx[k].te_n++;
        }
    }
    qsort(rx, (size_t)n_x, sizeof *rx, cmp_ref_x);
    for (int k = 0; k < n_x; k++)
        rx[k].x = fig != FIG_2A    ? rx[k].xkey
                  : rx[k].te_n > 0 ? rx[k].te_sum / rx[k].te_n
                                   : (double)NAN;
    int n_refs = 0;
    for (int r = 0; r < N_REFS; r++) {
        double *x = xs + r * (b - a), *y = ys + r * (b - a);
        double lo = HUGE_VAL, hi = -HUGE_VAL;
        int n = 0;
        for (int k = 0; k < n_x; k++) {
            if (rx[k].n[r] == 0)
                continue;
            x[n] = rx[k].x;
            y[n] = rx[k].sum[r] / rx[k].n[r];
            lo = fmin(lo, y[n]), hi = fmax(hi, y[n]);
            n++;
        }
        if (n == 0)
            continue;
        sb_plot_ref ref = {
            .label = ref_label[r], .style = ref_style_of[r], .n = n, .x = x, .y_at = y};
        if (hi - lo <= 1e-9)
            ref.n = 0, ref.y = y[0];
        refs[n_refs++] = ref;
    }
    return n_refs;
}

static sb_status make_dir(const char *dir, sb_error *err)
{
    return sb_make_dirs(dir, "report folder", err);
}

/* Opens the database (read-only when asked or when we may not write it), lists its runs
 * and makes out_dir; on failure nothing is left open. */
static sb_status report_open(const char *db_path, int read_only, const char *out_dir,
                             sb_results **db, sb_run_row **rows, size_t *n_rows, sb_error *err)
{
    /* a database we may not write is read as it is (yardsticks computed, not stored) */
    sb_status st = !read_only && access(db_path, W_OK) == 0
                       ? sb_results_open(db_path, db, err)
                       : sb_results_open_readonly(db_path, db, err);
    if (st != SB_OK)
        return st;
    st = sb_results_list_runs(*db, NULL, rows, n_rows, err);
    if (st == SB_OK)
        st = make_dir(out_dir, err);
    if (st != SB_OK) {
        sb_results_close(*db);
        sb_results_run_rows_free(*rows, *n_rows);
        *rows = NULL;
    }
    return st;
}

/* A finished run as a rec: its figure and place, its setting and accuracy, its grammar,
 * and its yardsticks (backfilled where missing; a failure is counted in sum). */
static void rec_from_run(sb_results *db, sb_run_row *row, const sb_run_config *c, rec *r,
                         sb_report_summary *sum)
{
    classify(c, row->r.params > 0 ? (size_t)row->r.params : 0, r);
    r->run_id = row->id;
    r->params_m = row->r.params > 0 ? (double)row->r.params / 1e6 : (double)NAN;
    snprintf(r->hash, sizeof r->hash, "%s", row->r.run_hash);
    r->seed = (int)c->seed;
    r->protocol = (int)c->task.protocol;
    snprintf(r->model, sizeof r->model, "%s", c->model);
    r->model_rank = model_rank(c->model);
    r->lr = c->lr;
    r->warmup = c->warmup_steps;
    r->acc = row->r.test_acc;
    r->valid = row->r.valid_acc;
    const sb_grammar_config gc = sb_grammar_config_effective(&c->task.grammar);
    r->vocab = gc.vocab;
    r->amb = gc.amb;
    r->depth = gc.amb_depth;
    r->task_seed = c->task.grammar.seed;
    r->ceiling = r->chance = r->memory = (double)NAN;
    for (int w = 0; w < 3; w++)
        r->window[w] = (double)NAN;
    sb_ceiling ce;
    sb_error yerr = {0};
    if (sb_results_fill_yardsticks(db, row, 0, NULL, &yerr) == SB_OK &&
        sb_results_task_ceiling(db, &c->task, 0, &ce, NULL, &yerr) == SB_OK) {
        r->ceiling = row->r.ceiling;
        r->memory = row->r.effective_memory;
        r->chance = ce.window_acc[window_index(0)];
        for (int w = 0; w < 3; w++)
            r->window[w] = ce.window_acc[window_index(ref_k[w])];
    } else if (sum->out.yardsticks_missing++ == 0) {
        snprintf(sum->out.yardsticks_error, sizeof sum->out.yardsticks_error, "%s", yerr.msg);
    }
}

/* The finished runs with a test accuracy and a readable configuration, as recs (NULL when
 * out of memory: then none); *n: how many. The others are counted in sum: a diverged run's
 * last accuracy is not a result of its setting, and a mean over seeds with it would mix
 * the two. */
/* The value of configuration key `key` of c as a number, in *x; 0 when it is not one. */
static int config_number(const sb_run_config *c, const char *key, double *x)
{
    const sb_config_key *k = sb_config_find(key);
    char buf[128];
    if (k == NULL || sb_config_format(c, k, buf, sizeof buf) < 0)
        return 0;
    char *end;
    *x = strtod(buf, &end);
    return end != buf && *end == '\0' && isfinite(*x);
}

/* The keys a figure's x axis varies (dropped from the experiment's identity): the grammar's
 * size (fig2a: amb, and the vocab and depth grammar_scale derives from it), the width (the
 * parameter axis of 1b, 2, 3), the test gap (4), or report --x's key (the grammar's three
 * sizes together; the three lengths together: a length study sets them together;
 * memory_demand: the lengths and walk_len its demand follows). Returns how many. */
static int axis_keys(int fig, const char *x_key, const char *axis[4])
{
    const char *const *lengths = sb_experiment_lengths;
    switch (fig) {
    case FIG_2A: axis[0] = "amb", axis[1] = "vocab", axis[2] = "amb_depth"; return 3;
    case FIG_2B:
    case FIG_3A:
    case FIG_3B: axis[0] = "feat_size"; return 1;
    case FIG_4: axis[0] = "test_dur"; return 1;
    }
    static const char *const grammar[3] = {"amb", "vocab", "amb_depth"};
    int is_length = strcmp(x_key, SB_REPORT_X_DEMAND) == 0, is_grammar = 0;
    for (int k = 0; k < 3; k++) {
        is_length |= strcmp(x_key, lengths[k]) == 0;
        is_grammar |= strcmp(x_key, grammar[k]) == 0;
    }
    if (is_grammar) { /* the grammar's size: grammar_scale moves the three together */
        for (int k = 0; k < 3; k++)
            axis[k] = grammar[k];
        return 3;
    }
    if (!is_length) {
        axis[0] = x_key;
        return 1;
    }
    for (int k = 0; k < 3; k++)
        axis[k] = lengths[k];
    axis[3] = strcmp(x_key, SB_REPORT_X_DEMAND) == 0 ? "walk_len" : lengths[0];
    return 4;
}

static void recs_free(rec *recs, int n)
{
    for (int i = 0; recs != NULL && i < n; i++)
        free(recs[i].exp_key);
    free(recs);
}

/* Numbers the experiments of each figure in the order their runs come, and labels them by
 * the keys that differ between them. Returns 0, or -1 out of memory. */
static int assign_experiments(rec *recs, int n)
{
    int *first = malloc((size_t)(n > 0 ? n : 1) * sizeof *first); /* first rec of each */
    if (first == NULL)
        return -1;
    int status = 0;
    for (int fig = 0; fig < N_FIGS && status == 0; fig++) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (recs[i].fig != fig)
                continue;
            int e = 0;
            while (e < m && strcmp(recs[first[e]].exp_key, recs[i].exp_key) != 0)
                e++;
            if (e == m)
                first[m++] = i;
            recs[i].experiment = e;
        }
        const char **keys = malloc((size_t)(m > 0 ? m : 1) * sizeof *keys);
        char **labels = malloc((size_t)(m > 0 ? m : 1) * sizeof *labels);
        if (keys == NULL || labels == NULL) {
            free(keys), free(labels);
            status = -1;
            break;
        }
        for (int e = 0; e < m; e++)
            keys[e] = recs[first[e]].exp_key, labels[e] = recs[first[e]].exp_label;
        status = sb_experiment_labels(keys, m, labels, sizeof recs[0].exp_label);
        for (int i = 0; i < n && status == 0; i++)
            if (recs[i].fig == fig) {
                recs[i].n_experiments = m;
                if (first[recs[i].experiment] != i)
                    memcpy(recs[i].exp_label, recs[first[recs[i].experiment]].exp_label,
                           sizeof recs[i].exp_label);
            }
        free(keys), free(labels);
    }
    free(first);
    return status;
}

static rec *report_read_runs(sb_results *db, sb_run_row *rows, size_t n_rows, const char *x_key,
                             sb_report_summary *sum, int *n)
{
    rec *recs = calloc(n_rows > 0 ? n_rows : 1, sizeof *recs);
    *n = 0;
    for (size_t i = 0; recs != NULL && i < n_rows; i++) {
        sb_run_row *row = &rows[i];
        if (row->r.status == SB_RUN_DIVERGED) {
            sum->out.runs_diverged++;
            continue;
        }
        if (row->r.status != SB_RUN_FINISHED) {
            sum->runs_unfinished++;
            continue;
        }
        sb_run_config c;
        sb_error cerr = {0};
        if (!isfinite(row->r.test_acc) || row->config_json == NULL ||
            sb_run_config_from_json(row->config_json, &c, &cerr) != SB_OK) {
            sum->runs_unusable++;
            continue;
        }
        double x = 0;
        if (x_key != NULL && strcmp(x_key, SB_REPORT_X_DEMAND) == 0) {
            /* a derived axis: the window its task's observer needs (the cached ceiling) */
            sb_ceiling ce;
            sb_error derr = {0};
            x = sb_results_task_ceiling(db, &c.task, 0, &ce, NULL, &derr) == SB_OK
                    ? sb_ceiling_memory_demand(&ce)
                    : (double)NAN;
            if (!isfinite(x)) {
                sum->runs_unusable++;
                continue;
            }
        } else if (x_key != NULL && !config_number(&c, x_key, &x)) {
            sum->runs_unusable++;
            continue;
        }
        rec *r = &recs[(*n)++];
        rec_from_run(db, row, &c, r, sum);
        if (x_key != NULL) { /* one figure of every run against the key */
            r->fig = FIG_X;
            r->panel = 0;
            r->xkey = x;
        }
        const char *axis[4];
        int n_axis = axis_keys(r->fig, x_key, axis);
        r->exp_key = sb_experiment_key(row->config_json, sb_experiment_varied, SB_EXPERIMENT_VARIED,
                                       axis, n_axis);
        if (r->exp_key == NULL) { /* out of memory: no figure */
            recs_free(recs, *n);
            *n = 0;
            return NULL;
        }
    }
    if (recs != NULL && assign_experiments(recs, *n) != 0) {
        recs_free(recs, *n);
        *n = 0;
        return NULL;
    }
    return recs;
}

/* "1 <kind> run<after>" or "N <kind> runs<after>", after a comma unless it is the first. */
static void write_count(FILE *md, int count, const char *kind, const char *after, int *first)
{
    if (count == 0)
        return;
    fprintf(md, "%s%d %s run%s%s", *first ? "" : ", ", count, kind, count == 1 ? "" : "s", after);
    *first = 0;
}

/* The runs of the database that no figure or mean includes, by kind. */
static void write_left_out(FILE *md, const sb_report_summary *sum)
{
    int left_out = sum->out.runs_left_out;
    if (left_out == 0)
        return;
    fprintf(md, " Left out of every figure and mean: ");
    int first = 1;
    write_count(md, sum->out.runs_diverged, "diverged", "", &first);
    write_count(md, sum->runs_unfinished, "unfinished", " (failed, stopped or running)", &first);
    write_count(md, sum->runs_unusable, "finished",
                " without a test accuracy, a readable configuration or a finite value of the "
                "--x axis (a memory demand beyond the largest window)",
                &first);
    fprintf(md, "; `selectivbench results` shows why.");
}

/* report.md's title and the paragraph on how to read it. */
static void write_report_intro(FILE *md, const char *db_path, const sb_report_summary *sum)
{
    if (sum->out.runs_other == 0)
        fprintf(md,
                "# SelectivBench results\n\nFrom `%s`: %d runs, %d finished and placed in a "
                "figure.",
                db_path, sum->out.runs_read, sum->out.runs_used);
    else
        fprintf(md,
                "# SelectivBench results\n\nFrom `%s`: %d runs, %d finished: %d placed in "
                "a figure, %d under \"Other runs\" (a figure needs runs at two or more of "
                "its x values: grammars, sizes or test gaps; a single `train` run or the "
                "seeds of one setting make no figure).",
                db_path, sum->out.runs_read, sum->out.runs_used,
                sum->out.runs_used - sum->out.runs_other, sum->out.runs_other);
    write_left_out(md, sum);
    fprintf(md, " Each point: the learning-rate / warm-up setting with the best mean "
                "validation accuracy over its seeds (column *chosen on*: valid; test where the "
                "runs were recorded without a validation split, which makes the point's test "
                "accuracy optimistic; - where one setting was run), and its test accuracy, "
                "which no choice reads: mean and standard deviation (n - 1) over the seeds.\n\n"
                "Yardsticks: *ceiling* is the ideal observer's expected accuracy on the task's "
                "test split (mean over the point's seeds); *eff. memory* is the window size k, "
                "in elements, at which an observer that sees only the last k elements reaches "
                "the run's accuracy (mean over the seeds, a memory beyond 32 counted as 32, so "
                "the mean is a lower bound; \">32\" when every seed is beyond the k = 32 "
                "observer); *chance* is the accuracy of always naming the task's most frequent "
                "state (the k = 0 observer). The accuracy figures draw the ceiling (dashed), "
                "chance (dash-dot) and the k = 1, 4, 8 window observers as grey lines; each has "
                "a `_memory` figure of the effective memory (log2(1 + m) axis) and a `_curves` "
                "figure of the learning curves (test accuracy against training samples: mean "
                "and min-max band over the seeds of each point's best setting). report.json "
                "lists every figure with the axes drawn.\n");
}

/* What the figures share while they are written. */
typedef struct report_ctx {
    const rec *recs; /* sorted by figure, model, x, setting */
    int n;
    const char *out_dir;
    FILE *md;
    te_cache *cache; /* fig2a: the TE of each grammar met */
    int n_cache;
    point *pts; /* [n] the points of the current figure */
    sb_report_summary *sum;
    sb_results *db;    /* the runs' evaluations, for the learning curves */
    sb_json *json;     /* report.json, inside its "figures" array */
    const char *x_key; /* FIG_X's key, or NULL */
} report_ctx;

/* The end of the figure that starts at recs[f0]: the runs with its fig, protocol, panel. */
static int figure_end(const rec *recs, int n, int f0)
{
    int i = f0;
    while (i < n && recs[i].fig == recs[f0].fig && recs[i].protocol == recs[f0].protocol &&
           recs[i].experiment == recs[f0].experiment && recs[i].panel == recs[f0].panel)
        i++;
    return i;
}

/* The scratch arrays of one figure of n runs. */
typedef struct figure_buffers {
    double *xs, *ys, *es; /* [n] points: x, mean accuracy, its std */
    double *ms, *mes;     /* [n] effective memory: mean, std */
    double *rxs, *rys;    /* [N_REFS n] the reference lines' points */
    ref_x *rx;            /* [n] the reference lines' per-x sums */
} figure_buffers;

static void figure_buffers_free(figure_buffers *fb)
{
    free(fb->xs), free(fb->ys), free(fb->es), free(fb->ms), free(fb->mes), free(fb->rxs),
        free(fb->rys), free(fb->rx);
}

/* Returns 0 when out of memory (then nothing is left allocated). */
static int figure_buffers_alloc(figure_buffers *fb, size_t n)
{
    fb->xs = calloc(n, sizeof *fb->xs), fb->ys = calloc(n, sizeof *fb->ys),
    fb->es = calloc(n, sizeof *fb->es), fb->ms = calloc(n, sizeof *fb->ms),
    fb->mes = calloc(n, sizeof *fb->mes), fb->rxs = calloc(N_REFS * n, sizeof *fb->rxs),
    fb->rys = calloc(N_REFS * n, sizeof *fb->rys);
    fb->rx = calloc(n, sizeof *fb->rx);
    if (fb->xs == NULL || fb->ys == NULL || fb->es == NULL || fb->ms == NULL || fb->mes == NULL ||
        fb->rxs == NULL || fb->rys == NULL || fb->rx == NULL) {
        figure_buffers_free(fb);
        return 0;
    }
    return 1;
}

/* A figure's file names (without extension) and texts. */
typedef struct figure_names {
    char base[4096], title[256], subtitle[256];
    char mem_base[4200], mem_title[300]; /* the effective-memory companion */
    char curves_base[4200], curves_title[300], curves_subtitle[300]; /* learning curves */
} figure_names;

static void figure_names_make(const rec *head, const char *out_dir, const char *x_key, int choice,
                              figure_names *fn)
{
    const char *chosen = choice == CHOSE_ON_VALID  ? "best lr / warm-up per point on validation"
                         : choice == CHOSE_ON_TEST ? "best lr / warm-up per point ON TEST (runs "
                                                     "without a validation split)"
                                                   : "one lr / warm-up per point";
    char *base = fn->base;
    snprintf(base, sizeof fn->base, "%s/%s", out_dir, fig_name[head->fig]);
    if (head->fig == FIG_X)
        snprintf(base + strlen(base), sizeof fn->base - strlen(base), "_%s", x_key);
    if (head->panel > 0)
        snprintf(base + strlen(base), sizeof fn->base - strlen(base), "_d%d", head->panel);
    if (head->protocol == 1)
        snprintf(base + strlen(base), sizeof fn->base - strlen(base), "_clean");
    if (head->n_experiments > 1)
        snprintf(base + strlen(base), sizeof fn->base - strlen(base), "_e%d", head->experiment + 1);
    snprintf(fn->title, sizeof fn->title, "%s", fig_title[head->fig]);
    if (head->fig == FIG_X)
        snprintf(fn->title, sizeof fn->title, "%s %s", fig_title[head->fig], x_key);
    if (head->panel > 0)
        snprintf(fn->subtitle, sizeof fn->subtitle,
                 "width %d, protocol %s; test accuracy, mean \xC2\xB1 std over seeds; %s",
                 head->panel, head->protocol == 1 ? "clean" : "reference", chosen);
    else
        snprintf(fn->subtitle, sizeof fn->subtitle,
                 "protocol %s; test accuracy, mean \xC2\xB1 std over seeds; %s",
                 head->protocol == 1 ? "clean" : "reference", chosen);
    if (head->n_experiments > 1) /* which experiment: the keys that set it apart */
        snprintf(fn->subtitle + strlen(fn->subtitle), sizeof fn->subtitle - strlen(fn->subtitle),
                 "; %s", head->exp_label);
    snprintf(fn->mem_base, sizeof fn->mem_base, "%s_memory", base);
    snprintf(fn->mem_title, sizeof fn->mem_title, "%s: effective memory", fn->title);
    snprintf(fn->curves_base, sizeof fn->curves_base, "%s_curves", base);
    snprintf(fn->curves_title, sizeof fn->curves_title, "%s: learning curves", fn->title);
    char width[32] = "";
    if (head->panel > 0)
        snprintf(width, sizeof width, "width %d, ", head->panel);
    snprintf(fn->curves_subtitle, sizeof fn->curves_subtitle,
             "%sprotocol %s; mean and min-max over the seeds of each point's best lr / warm-up",
             width, head->protocol == 1 ? "clean" : "reference");
}

/* The figure's section of report.md: its heading and the head of its table. */
static void write_table_head(FILE *md, const rec *head, const figure_names *fn, const char *x_key)
{
    fprintf(md,
            "\n## %s (%s)\n\n%s.\n\n| model | %s | mean test acc | std | seeds | lr | "
            "warm-up | chosen on | ceiling | eff. memory |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n",
            fn->title, strrchr(fn->base, '/') + 1, fn->subtitle,
            head->fig == FIG_2A  ? "TE"
            : head->fig == FIG_4 ? "gap frames"
            : head->fig == FIG_X ? x_key
                                 : "params (M)");
}

/* The end of the setting (lr, warm-up) that starts at recs[s0], before b. */
static int setting_end(const rec *recs, int b, int s0)
{
    int s = s0;
    while (s < b && recs[s].lr == recs[s0].lr && recs[s].warmup == recs[s0].warmup)
        s++;
    return s;
}

/* The statistics of one setting's runs recs[s0..s1) (its seeds): mean and sample standard
 * deviation (n - 1; 0 for one seed) of the test accuracy, the mean validation accuracy,
 * and the yardsticks. */
static point setting_point(const rec *recs, int s0, int s1)
{
    point pt = {.n = s1 - s0, .lr = recs[s0].lr, .warmup = recs[s0].warmup};
    double sum_acc = 0, sum_valid = 0, var = 0;
    for (int q = s0; q < s1; q++) {
        sum_acc += recs[q].acc;
        sum_valid += recs[q].valid; /* NaN when one seed has none */
    }
    pt.mean = sum_acc / pt.n;
    pt.valid_mean = sum_valid / pt.n;
    for (int q = s0; q < s1; q++)
        var += (recs[q].acc - pt.mean) * (recs[q].acc - pt.mean);
    pt.std = pt.n > 1 ? sqrt(var / (pt.n - 1)) : 0.0;
    point_yardsticks(recs, s0, s1, &pt);
    return pt;
}

/* The best (lr, warm-up) setting of runs recs[a..b) (one model at one x, sorted by
 * setting): the highest mean validation accuracy over its seeds, the first on a tie. The
 * test accuracy is only reported. Runs recorded without a validation split (before schema
 * 6, or --valid_size 0) leave only the test to choose on: then the test chooses, and the
 * point says so (CHOSE_ON_TEST), as report.md's "chosen on" column and the figure's
 * subtitle do. */
static point best_setting(const rec *recs, int a, int b)
{
    int n_settings = 0, all_valid = 1;
    for (int s = a; s < b; n_settings++) {
        int s1 = setting_end(recs, b, s);
        all_valid &= !isnan(setting_point(recs, s, s1).valid_mean);
        s = s1;
    }
    point best = {.score = -HUGE_VAL};
    for (int s = a; s < b;) {
        int s1 = setting_end(recs, b, s);
        point pt = setting_point(recs, s, s1);
        pt.score = all_valid ? pt.valid_mean : pt.mean;
        if (pt.score > best.score)
            best = pt;
        s = s1;
    }
    best.chosen = n_settings < 2 ? CHOSE_NOTHING : all_valid ? CHOSE_ON_VALID : CHOSE_ON_TEST;
    return best;
}

/* How the points of the figure recs[f0..f1) were chosen: CHOSE_ON_TEST when any was,
 * else CHOSE_ON_VALID when any point had several settings, else CHOSE_NOTHING. */
static int figure_choice(const rec *recs, int f0, int f1)
{
    int worst = CHOSE_NOTHING;
    for (int k = f0; k < f1;) {
        int x0 = k;
        while (k < f1 && strcmp(recs[k].model, recs[x0].model) == 0 &&
               recs[k].xkey == recs[x0].xkey)
            k++;
        int c = best_setting(recs, x0, k).chosen;
        worst = c > worst ? c : worst;
    }
    return worst;
}

/* The plotted x of runs recs[a..b) (one x key): the key, or for fig2a the TE of this amb,
 * the mean over the grammars (seeds) of its runs. */
static double point_x(report_ctx *rc, int a, int b, int fig)
{
    if (fig != FIG_2A)
        return rc->recs[a].xkey;
    double te_sum = 0;
    int te_n = 0;
    for (int q = a; q < b; q++) {
        double te = grammar_te(&rc->cache, &rc->n_cache, &rc->recs[q]);
        if (isfinite(te))
            te_sum += te, te_n++;
    }
    return te_n > 0 ? te_sum / te_n : (double)NAN;
}

/* One row of a figure's table in report.md. */
static void write_point_row(FILE *md, const char *model, const point *p)
{
    char warm[16] = "5%";
    if (p->warmup >= 0)
        snprintf(warm, sizeof warm, "%d", p->warmup);
    char ceil_s[32] = "-", mem_s[32] = "-";
    if (!isnan(p->ceiling))
        snprintf(ceil_s, sizeof ceil_s, "%.4f", p->ceiling);
    if (p->mem_mean > MEMORY_BEYOND)
        snprintf(mem_s, sizeof mem_s, ">32");
    else if (!isnan(p->mem_mean))
        snprintf(mem_s, sizeof mem_s, "%.3g \xC2\xB1 %.2g", p->mem_mean, p->mem_std);
    fprintf(md, "| %s | %.4g | %.4f | %.4f | %d | %g | %s | %s | %s | %s |\n", model, p->x, p->mean,
            p->std, p->n, p->lr, warm, chose_name[p->chosen], ceil_s, mem_s);
}

/* The points of the figure recs[f0..f1) into rc->pts, model after model (at most 64
 * models), each point's row into report.md; one series per model (labels: their names;
 * the arrays are set later). Returns the number of points. */
static int figure_points(report_ctx *rc, int f0, int f1, sb_plot_series *series,
                         char labels[][SB_MODEL_NAME_MAX], int *n_series)
{
    const rec *recs = rc->recs;
    int n_pts = 0;
    *n_series = 0;
    int j = f0;
    while (j < f1 && *n_series < 64) {
        /* one model */
        int m0 = j;
        while (j < f1 && strcmp(recs[j].model, recs[m0].model) == 0)
            j++;
        int first_pt = n_pts;
        int k = m0;
        while (k < j) {
            /* one x */
            int x0 = k;
            while (k < j && recs[k].xkey == recs[x0].xkey)
                k++;
            point best = best_setting(recs, x0, k);
            best.x = point_x(rc, x0, k, recs[f0].fig);
            rc->pts[n_pts++] = best;
            write_point_row(rc->md, recs[m0].model, &best);
        }
        snprintf(labels[*n_series], sizeof labels[*n_series], "%s", recs[m0].model);
        series[*n_series] = (sb_plot_series){.label = labels[*n_series], .n = n_pts - first_pt};
        (*n_series)++;
    }
    return n_pts;
}

/* The series' arrays: slices of fb's, in point order; mem_series: the same points'
 * effective memory (beyond 32: no error bar). */
static void figure_series(const point *pts, int n_pts, figure_buffers *fb, sb_plot_series *series,
                          sb_plot_series *mem_series, int n_series)
{
    for (int q = 0; q < n_pts; q++) {
        fb->xs[q] = pts[q].x;
        fb->ys[q] = pts[q].mean;
        fb->es[q] = pts[q].std;
        fb->ms[q] = pts[q].mem_mean;
        fb->mes[q] = isinf(pts[q].mem_mean) ? 0 : pts[q].mem_std;
    }
    int offset = 0;
    for (int s = 0; s < n_series; s++) {
        series[s].x = fb->xs + offset;
        series[s].y = fb->ys + offset;
        series[s].err = fb->es + offset;
        mem_series[s] = series[s];
        mem_series[s].y = fb->ms + offset;
        mem_series[s].err = fb->mes + offset;
        offset += series[s].n;
    }
}

/* report.json: one axis. */
static void json_axis(sb_json *j, const char *key, const sb_plot_axis *a)
{
    sb_json_key(j, key);
    sb_json_object_begin(j);
    sb_json_key(j, "label");
    sb_json_string(j, a->label);
    sb_json_key(j, "log");
    sb_json_bool(j, a->log);
    sb_json_key(j, "min");
    sb_json_double(j, a->min);
    sb_json_key(j, "max");
    sb_json_double(j, a->max);
    sb_json_key(j, "ticks");
    sb_json_array_begin(j);
    for (int i = 0; i < a->n_ticks; i++)
        sb_json_double(j, a->ticks[i]);
    sb_json_array_end(j);
    sb_json_key(j, "tick_labels");
    sb_json_array_begin(j);
    for (int i = 0; i < a->n_ticks; i++)
        sb_json_string(j, a->tick_labels[i]);
    sb_json_array_end(j);
    sb_json_object_end(j);
}

/* report.json: one figure written to base (its kind: accuracy, memory or curves), with the
 * axes it drew. */
static void json_figure(sb_json *j, const char *base, const char *kind, const char *title,
                        const sb_plot_axis *x, const sb_plot_axis *y, int n_refs,
                        const sb_plot_ref *refs)
{
    const char *slash = strrchr(base, '/');
    sb_json_object_begin(j);
    sb_json_key(j, "name");
    sb_json_string(j, slash != NULL ? slash + 1 : base);
    sb_json_key(j, "kind");
    sb_json_string(j, kind);
    sb_json_key(j, "title");
    sb_json_string(j, title);
    json_axis(j, "x", x);
    json_axis(j, "y", y);
    sb_json_key(j, "reference_lines");
    sb_json_array_begin(j);
    for (int r = 0; r < n_refs; r++)
        sb_json_string(j, refs[r].label);
    sb_json_array_end(j);
    sb_json_object_end(j);
}

/* Writes one figure and records it in report.json and the summary. */
static sb_status write_plot(report_ctx *rc, const sb_plot *p, const char *base, const char *kind,
                            sb_error *err)
{
    sb_status st = sb_plot_write(p, base, err);
    if (st != SB_OK)
        return st;
    sb_plot_axis x, y;
    sb_plot_axes(p, &x, &y);
    json_figure(rc->json, base, kind, p->title, &x, &y, p->n_refs, p->refs);
    rc->sum->out.figures++;
    return SB_OK;
}

/* The horizontal reference lines of a learning-curve figure: the ceiling and chance of the
 * runs recs[a..b), their mean over the runs (seeds draw different grammars; every line is
 * a mean over seeds too), or with same_only only when every run has the same value (the
 * other runs: unrelated tasks). */
static int curve_refs(const rec *recs, int a, int b, int same_only, sb_plot_ref *refs)
{
    int n_refs = 0;
    for (int r = 0; r < 2; r++) {
        double lo = HUGE_VAL, hi = -HUGE_VAL, sum = 0;
        int n = 0;
        for (int q = a; q < b; q++) {
            double v[N_REFS];
            rec_ref_values(&recs[q], v);
            if (isnan(v[r]))
                continue;
            lo = fmin(lo, v[r]), hi = fmax(hi, v[r]);
            sum += v[r], n++;
        }
        if (n > 0 && (!same_only || hi - lo <= 1e-9))
            refs[n_refs++] =
                (sb_plot_ref){.label = ref_label[r], .y = sum / n, .style = ref_style_of[r]};
    }
    return n_refs;
}

/* One learning-curve group: the runs of recs[x0..x1) (one model at one x) with the
 * setting of best; their ids are appended to ids. */
static void add_curve_group(const rec *recs, int x0, int x1, const point *best, int64_t *ids,
                            int *n_ids, sb_curve_group *g, char *label, size_t label_size)
{
    g->run_ids = ids + *n_ids;
    g->n_runs = 0;
    for (int q = x0; q < x1; q++)
        if (recs[q].lr == best->lr && recs[q].warmup == best->warmup) {
            ids[(*n_ids)++] = recs[q].run_id;
            g->n_runs++;
        }
    const rec *r = &recs[x0];
    if (r->fig == FIG_2A || r->fig == FIG_4 || r->fig == FIG_X)
        snprintf(label, label_size, "%s, %s %g, %d seed%s", r->model,
                 r->fig == FIG_2A  ? "amb"
                 : r->fig == FIG_4 ? "gap"
                                   : "x",
                 r->xkey, g->n_runs, g->n_runs == 1 ? "" : "s");
    else
        snprintf(label, label_size, "%s, %.3gM, %d seed%s", r->model, r->params_m, g->n_runs,
                 g->n_runs == 1 ? "" : "s");
    g->label = label;
}

/* The learning-curve groups of runs recs[f0..f1): per model and x, the runs (seeds) of its
 * best setting; with more than MAX_CURVES of them, per model only the x where it does best
 * (the first MAX_CURVES models). ids has room for f1 - f0. Returns the number of groups. */
#define MAX_CURVES 12
/* report.md's line where a learning-curve figure would be and no run has a curve */
#define NO_CURVES_LINE                                                                             \
    "\nNo learning-curve figure: no run here has 3 or more evaluations (recorded with "            \
    "`--curve_points 0`, or before it existed).\n"
static int curve_groups(const rec *recs, int f0, int f1, int64_t *ids, sb_curve_group *groups,
                        char labels[][96])
{
    int n_pairs = 0;
    for (int j = f0; j < f1; j++)
        n_pairs += j == f0 || strcmp(recs[j].model, recs[j - 1].model) != 0 ||
                   recs[j].xkey != recs[j - 1].xkey;
    const int per_model = n_pairs > MAX_CURVES;
    int n_groups = 0, n_ids = 0;
    for (int j = f0; j < f1 && n_groups < MAX_CURVES;) {
        int m0 = j;
        while (j < f1 && strcmp(recs[j].model, recs[m0].model) == 0)
            j++;
        point best = {.score = -HUGE_VAL};
        int best_x0 = m0, best_x1 = m0;
        for (int k = m0; k < j;) {
            int x0 = k;
            while (k < j && recs[k].xkey == recs[x0].xkey)
                k++;
            point pt = best_setting(recs, x0, k);
            if (!per_model && n_groups < MAX_CURVES) {
                add_curve_group(recs, x0, k, &pt, ids, &n_ids, &groups[n_groups], labels[n_groups],
                                sizeof labels[n_groups]);
                n_groups++;
            } else if (pt.score > best.score) {
                best = pt, best_x0 = x0, best_x1 = k;
            }
        }
        if (per_model) {
            add_curve_group(recs, best_x0, best_x1, &best, ids, &n_ids, &groups[n_groups],
                            labels[n_groups], sizeof labels[n_groups]);
            n_groups++;
        }
    }
    return n_groups;
}

/* The learning-curve companion of the figure of runs recs[f0..f1), written to base;
 * *drawn: 0 when no run had enough points for a curve (no figure written). */
static sb_status write_curves(report_ctx *rc, int f0, int f1, const char *base, const char *title,
                              const char *subtitle, int *drawn, sb_error *err)
{
    int64_t *ids = calloc((size_t)(f1 - f0), sizeof *ids);
    if (ids == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory drawing the learning curves");
    sb_curve_group groups[MAX_CURVES];
    char labels[MAX_CURVES][96];
    int n_groups = curve_groups(rc->recs, f0, f1, ids, groups, labels);
    sb_plot_ref refs[2];
    int n_refs = curve_refs(rc->recs, f0, f1, 0, refs);
    sb_plot_axis x, y;
    sb_status st = sb_report_curve_figure(rc->db, title, subtitle, groups, n_groups, refs, n_refs,
                                          base, &x, &y, drawn, err);
    free(ids);
    if (st != SB_OK || !*drawn)
        return st;
    json_figure(rc->json, base, "curves", title, &x, &y, n_refs, refs);
    rc->sum->out.figures++;
    return SB_OK;
}

/* The figure of runs recs[f0..f1): its table in report.md, the accuracy figure with its
 * reference lines, the effective-memory and learning-curve companions, and their links in
 * report.md. */
/* Whether the positive x keys of recs[a..b) span a factor of 10 or more (a log axis). */
static int x_spans_decade(const rec *recs, int a, int b)
{
    double lo = HUGE_VAL, hi = 0;
    for (int q = a; q < b; q++) {
        if (!(recs[q].xkey > 0))
            return 0;
        lo = fmin(lo, recs[q].xkey);
        hi = fmax(hi, recs[q].xkey);
    }
    return hi >= 10 * lo;
}

static sb_status write_figure(report_ctx *rc, int f0, int f1, sb_error *err)
{
    const rec *head = &rc->recs[f0];
    figure_buffers fb;
    if (!figure_buffers_alloc(&fb, (size_t)(f1 - f0)))
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory drawing the figures");
    figure_names fn;
    figure_names_make(head, rc->out_dir, rc->x_key, figure_choice(rc->recs, f0, f1), &fn);
    write_table_head(rc->md, head, &fn, rc->x_key);

    sb_plot_series series[64], mem_series[64];
    char labels[64][SB_MODEL_NAME_MAX];
    int n_series;
    int n_pts = figure_points(rc, f0, f1, series, labels, &n_series);
    figure_series(rc->pts, n_pts, &fb, series, mem_series, n_series);
    sb_plot_ref refs[N_REFS];
    int n_refs = figure_refs(rc->recs, f0, f1, head->fig, &rc->cache, &rc->n_cache, refs, fb.rxs,
                             fb.rys, fb.rx);

    int logx = head->fig == FIG_2B || head->fig == FIG_3A || head->fig == FIG_3B ||
               (head->fig == FIG_X && x_spans_decade(rc->recs, f0, f1));
    const char *xlabel = head->fig == FIG_X ? rc->x_key : fig_xlabel[head->fig];
    sb_plot plot = {.title = fn.title,
                    .subtitle = fn.subtitle,
                    .xlabel = xlabel,
                    .ylabel = "test accuracy (fraction of elements)",
                    .logx = logx,
                    .ymin = (double)NAN,
                    .ymax = (double)NAN,
                    .n_series = n_series,
                    .series = series,
                    .n_refs = n_refs,
                    .refs = refs,
                    .yfraction = 1};
    sb_plot mem_plot = {.title = fn.mem_title,
                        .subtitle = fn.subtitle,
                        .xlabel = xlabel,
                        .ylabel = "effective memory (elements, log2(1 + m) axis)",
                        .logx = logx,
                        .ymin = 0,
                        .ymax = (double)NAN,
                        .n_series = n_series,
                        .series = mem_series,
                        .logy1p = 1,
                        .ybeyond = MEMORY_BEYOND,
                        .ybeyond_label = ">32"};
    sb_status st = write_plot(rc, &plot, fn.base, "accuracy", err);
    if (st == SB_OK)
        st = write_plot(rc, &mem_plot, fn.mem_base, "memory", err);
    figure_buffers_free(&fb);
    int curves_drawn = 0;
    if (st == SB_OK)
        st = write_curves(rc, f0, f1, fn.curves_base, fn.curves_title, fn.curves_subtitle,
                          &curves_drawn, err);
    if (st != SB_OK)
        return st;
    fprintf(rc->md, "\n![%s](%s.png)\n\n![%s](%s.png)\n", fn.title, strrchr(fn.base, '/') + 1,
            fn.mem_title, strrchr(fn.mem_base, '/') + 1);
    if (curves_drawn)
        fprintf(rc->md, "\n![%s](%s.png)\n", fn.curves_title, strrchr(fn.curves_base, '/') + 1);
    else
        fputs(NO_CURVES_LINE, rc->md);
    return SB_OK;
}

/* Marks the runs of every figure whose runs have a single x value (a grammar, a size, a
 * test gap): they make no figure and are listed under "Other runs" (a single `train` run,
 * the seeds of one setting). Then sorts the recs again, the other runs last. Returns how
 * many were marked. */
static int mark_other_runs(rec *recs, int n)
{
    int n_other = 0;
    for (int f0 = 0; f0 < n;) {
        int f1 = figure_end(recs, n, f0);
        int several_x = 0;
        for (int q = f0 + 1; q < f1 && !several_x; q++)
            several_x = recs[q].xkey != recs[f0].xkey;
        for (int q = f0; q < f1 && !several_x; q++)
            recs[q].other = 1, n_other++;
        f0 = f1;
    }
    qsort(recs, (size_t)n, sizeof *recs, cmp_rec);
    return n_other;
}

/* An other run's task in words: its task number and what its x would have been. */
static void other_task(const rec *r, char *buf, size_t size)
{
    static const char *task[N_FIGS] = {"1a", "1b", "2", "3", "4", "scale"};
    if (r->fig == FIG_2A)
        snprintf(buf, size, "%s: amb %g, width %d", task[r->fig], r->xkey, r->panel);
    else if (r->fig == FIG_4)
        snprintf(buf, size, "%s: %g gap frames, width %d", task[r->fig], r->xkey, r->panel);
    else
        snprintf(buf, size, "%s", task[r->fig]);
    if (r->protocol == 1)
        snprintf(buf + strlen(buf), size - strlen(buf), " (clean)");
    if (r->n_experiments > 1)
        snprintf(buf + strlen(buf), size - strlen(buf), "; %s", r->exp_label);
}

/* One setting's row under "Other runs": like a figure's row, with the task, the chance
 * level and the run ids. */
static void write_other_row(FILE *md, const rec *recs, int s0, int s1, const point *p)
{
    char task[256], warm[16] = "5%", ceil_s[32] = "-", chance_s[32] = "-", mem_s[32] = "-";
    other_task(&recs[s0], task, sizeof task);
    if (p->warmup >= 0)
        snprintf(warm, sizeof warm, "%d", p->warmup);
    if (!isnan(p->ceiling))
        snprintf(ceil_s, sizeof ceil_s, "%.4f", p->ceiling);
    if (!isnan(recs[s0].chance))
        snprintf(chance_s, sizeof chance_s, "%.4f", recs[s0].chance);
    if (p->mem_mean > MEMORY_BEYOND)
        snprintf(mem_s, sizeof mem_s, ">32");
    else if (!isnan(p->mem_mean))
        snprintf(mem_s, sizeof mem_s, "%.3g \xC2\xB1 %.2g", p->mem_mean, p->mem_std);
    fprintf(md, "| %s | %s | %.4g | %.4f | %.4f | %d | %g | %s | %s | %s | %s |", recs[s0].model,
            task, recs[s0].params_m, p->mean, p->std, p->n, p->lr, warm, ceil_s, chance_s, mem_s);
    for (int q = s0; q < s1; q++)
        fprintf(md, "%s`%s`", q == s0 ? " " : ", ", recs[q].hash);
    fprintf(md, " |\n");
}

/* The "Other runs" section: a row per setting of the other runs recs[o0..n), their
 * learning curves (the first MAX_CURVES settings), and their ids in report.json. */
static sb_status write_other_runs(report_ctx *rc, int o0, sb_error *err)
{
    const rec *recs = rc->recs;
    fprintf(rc->md, "\n## Other runs\n\nRuns that make no figure: their task was run at one "
                    "x value only (one grammar, size or test gap), such as a single `train` run "
                    "or the seeds of one setting. A row per setting: mean and standard "
                    "deviation (n - 1) over its seeds.\n\n"
                    "| model | task | params (M) | mean test acc | std | seeds | lr | warm-up | "
                    "ceiling | chance | eff. memory | runs |\n"
                    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                    "| --- |\n");
    int64_t *ids = calloc((size_t)(rc->n - o0), sizeof *ids);
    if (ids == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing the other runs");
    sb_curve_group groups[MAX_CURVES];
    char labels[MAX_CURVES][96];
    int n_groups = 0, n_ids = 0;
    for (int s0 = o0; s0 < rc->n;) {
        /* one setting: same figure, model, x, lr and warm-up */
        int s1 = s0 + 1;
        while (s1 < rc->n && cmp_rec(&recs[s1], &recs[s0]) == 0)
            s1++;
        point pt = setting_point(recs, s0, s1);
        write_other_row(rc->md, recs, s0, s1, &pt);
        if (n_groups < MAX_CURVES) {
            add_curve_group(recs, s0, s1, &pt, ids, &n_ids, &groups[n_groups], labels[n_groups],
                            sizeof labels[n_groups]);
            n_groups++;
        }
        s0 = s1;
    }
    char base[4200];
    snprintf(base, sizeof base, "%s/other_curves", rc->out_dir);
    const char *title = "Other runs: learning curves";
    sb_plot_ref refs[2];
    int n_refs = curve_refs(recs, o0, rc->n, 1, refs);
    sb_plot_axis x, y;
    int drawn = 0;
    sb_status st =
        sb_report_curve_figure(rc->db, title,
                               "test accuracy; mean and min-max over "
                               "the seeds of each setting",
                               groups, n_groups, refs, n_refs, base, &x, &y, &drawn, err);
    free(ids);
    if (st != SB_OK)
        return st;
    if (!drawn) {
        fputs(NO_CURVES_LINE, rc->md);
        return SB_OK;
    }
    json_figure(rc->json, base, "curves", title, &x, &y, n_refs, refs);
    rc->sum->out.figures++;
    fprintf(rc->md, "\n![%s](other_curves.png)\n", title);
    return SB_OK;
}

/* report.json's list of the other runs: id, model, test accuracy. */
static void json_other_runs(sb_json *j, const rec *recs, int o0, int n)
{
    sb_json_key(j, "other_runs");
    sb_json_array_begin(j);
    for (int q = o0; q < n; q++) {
        sb_json_object_begin(j);
        sb_json_key(j, "run");
        sb_json_string(j, recs[q].hash);
        sb_json_key(j, "model");
        sb_json_string(j, recs[q].model);
        sb_json_key(j, "test_acc");
        sb_json_double(j, recs[q].acc);
        sb_json_object_end(j);
    }
    sb_json_array_end(j);
}

/* Every figure of the sorted recs, in order, until one fails, then the other runs; json:
 * report.json, its object open. */
static sb_status write_figures(sb_results *db, const rec *recs, int n, const char *out_dir,
                               const char *x_key, FILE *md, sb_json *json, sb_report_summary *sum,
                               sb_error *err)
{
    report_ctx rc = {.recs = recs,
                     .n = n,
                     .out_dir = out_dir,
                     .md = md,
                     .sum = sum,
                     .db = db,
                     .json = json,
                     .x_key = x_key};
    rc.pts = calloc((size_t)(n > 0 ? n : 1), sizeof *rc.pts);
    if (rc.pts == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory drawing the figures");
    sb_status st = SB_OK;
    int f0 = 0;
    sb_json_key(json, "figures");
    sb_json_array_begin(json);
    for (; f0 < n && !recs[f0].other && st == SB_OK;) {
        int f1 = figure_end(recs, n, f0);
        st = write_figure(&rc, f0, f1, err);
        f0 = f1;
    }
    if (st == SB_OK && f0 < n)
        st = write_other_runs(&rc, f0, err);
    sb_json_array_end(json);
    json_other_runs(json, recs, f0, n);
    free(rc.pts);
    free(rc.cache);
    return st;
}

/* A file written under PATH.tmp and renamed into place when everything went well. */
typedef struct out_file {
    char path[4200], tmp[4300];
    FILE *f;
} out_file;

static sb_status out_file_open(out_file *o, const char *out_dir, const char *name, sb_error *err)
{
    snprintf(o->path, sizeof o->path, "%s/%s", out_dir, name);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->path);
    o->f = fopen(o->tmp, "w");
    if (o->f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", o->tmp, strerror(errno));
    return SB_OK;
}

/* Closes the file and, when st is SB_OK, renames it into place; removes it otherwise. */
static sb_status out_file_close(out_file *o, sb_status st, sb_error *err)
{
    if (o->f == NULL)
        return st;
    int bad = fclose(o->f) != 0;
    o->f = NULL;
    if (st == SB_OK && bad)
        st = sb_error_set(err, SB_ERR_IO, "writing '%s' failed", o->tmp);
    if (st == SB_OK && rename(o->tmp, o->path) != 0)
        st = sb_error_set(err, SB_ERR_IO, "cannot rename '%s': %s", o->tmp, strerror(errno));
    if (st != SB_OK)
        remove(o->tmp);
    return st;
}

sb_status sb_report_generate_with(const char *db_path, const char *out_dir,
                                  const sb_report_options *opts, sb_report_summary *sum,
                                  sb_error *err)
{
    memset(sum, 0, sizeof *sum);
    if (opts->x_key != NULL && sb_config_find(opts->x_key) == NULL &&
        strcmp(opts->x_key, SB_REPORT_X_DEMAND) != 0)
        return sb_error_set(err, SB_ERR_INVALID, "report: '%s' is not a configuration key (nor %s)",
                            opts->x_key, SB_REPORT_X_DEMAND);
    sb_results *db = NULL;
    sb_run_row *rows = NULL;
    size_t n_rows = 0;
    sb_status st = report_open(db_path, opts->read_only, out_dir, &db, &rows, &n_rows, err);
    if (st != SB_OK)
        return st;
    /* the runs every filter matches first; the report reads those */
    size_t kept = 0;
    for (size_t i = 0; i < n_rows; i++) {
        int keep = 1;
        for (int f = 0; keep && f < opts->n_filters; f++)
            keep = sb_results_config_matches(rows[i].config_json, opts->filters[f]);
        if (keep && kept != i) {
            sb_run_row t = rows[kept];
            rows[kept] = rows[i];
            rows[i] = t;
        }
        kept += keep;
    }
    sum->out.runs_read = (int)kept;
    int n = 0;
    rec *recs = report_read_runs(db, rows, kept, opts->x_key, sum, &n);
    sb_claim *claims = NULL;
    int n_claims = 0;
    sb_claim_task *tasks = calloc(kept > 0 ? kept : 1, sizeof *tasks);
    sb_status claims_st = tasks != NULL ? sb_claims_tasks(db, rows, kept, tasks, err)
                                        : sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    if (claims_st == SB_OK)
        claims_st = sb_claims_evaluate(rows, tasks, kept, &claims, &n_claims, err);
    free(tasks);
    sb_results_run_rows_free(rows, n_rows);
    sum->out.runs_used = n;
    sum->out.runs_left_out = sum->out.runs_read - n;
    qsort(recs, (size_t)n, sizeof *recs, cmp_rec);
    sum->out.runs_other = mark_other_runs(recs, n);

    /* report.md and report.json are written under temporary names, renamed at the end */
    out_file md = {0}, json = {0};
    st = out_file_open(&md, out_dir, "report.md", err);
    if (st == SB_OK)
        st = out_file_open(&json, out_dir, "report.json", err);
    snprintf(sum->out.table_path, sizeof sum->out.table_path, "%s/report.md", out_dir);
    if (st == SB_OK) {
        sb_json j;
        sb_json_init(&j, json.f, 1);
        sb_json_object_begin(&j);
        write_report_intro(md.f, db_path, sum);
        st = write_figures(db, recs, n, out_dir, opts->x_key, md.f, &j, sum, err);
        if (st == SB_OK && (st = claims_st) == SB_OK)
            sb_claims_write_markdown(md.f, claims, n_claims);
        sb_json_object_end(&j);
        fputc('\n', json.f);
    }
    sb_results_close(db);
    recs_free(recs, n);
    free(claims);
    st = out_file_close(&md, st, err);
    return out_file_close(&json, st, err);
}

sb_status sb_report_generate_mode(const char *db_path, int read_only, const char *out_dir,
                                  sb_report_summary *sum, sb_error *err)
{
    sb_report_options opts = {.read_only = read_only};
    return sb_report_generate_with(db_path, out_dir, &opts, sum, err);
}

sb_status sb_report_generate(const char *db_path, const char *out_dir, sb_report_summary *sum,
                             sb_error *err)
{
    return sb_report_generate_mode(db_path, 0, out_dir, sum, err);
}

/* claims.c - the paper's findings as verdicts over slices, one-axis pairs and seeds
 * (claims.h; the statistics in claims_stats.c, the writers in claims_write.c). */
#include "exp/claims.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp/claims_stats.h"
#include "exp/experiment.h"
#include "layers/layer.h"

/* ---- the runs ------------------------------------------------------------------------- */

/* One finished run, as the findings see it. */
typedef struct claim_run {
    const sb_layer_type *type;
    double acc, valid;      /* test (reported) and validation (chosen on; NaN: none) */
    double ceiling, window; /* its task's ideal observer (sb_claim_task); NaN: unknown */
    double test_dur;        /* the longer gap it was tested at; NaN: its training gap */
    char unit[48];          /* its seed and task seed: the unit of every interval */
    char setting[64];       /* its learning rate and warm-up: what a slice chooses among */
    char *slice;            /* its configuration without model, seeds, lr and warm-up */
    char *slice_training;   /* the same without test_dur: one training, any test gap */
    char *family;           /* the slice without its lengths: one task at several lengths */
} claim_run;

/* A key's value as text ("null" when missing; a real as %g: 0.1, not 0.10000000000000001). */
static void value_text(json_t *cfg, const char *key, char *buf, size_t size)
{
    sb_experiment_value_text(json_object_get(cfg, key), buf, size);
}

/* Fills r from a row; 0 when the row does not count (not finished, no accuracy, an unknown
 * model or an unreadable configuration), -1 on allocation failure. */
static int read_run(const sb_run_row *row, const sb_claim_task *task, claim_run *r)
{
    memset(r, 0, sizeof *r);
    if (row->r.status != SB_RUN_FINISHED || !isfinite(row->r.test_acc) || row->config_json == NULL)
        return 0;
    json_t *cfg = json_loads(row->config_json, 0, NULL);
    json_t *gap = json_object_get(cfg, "train_gap_max");
    const char *model = json_string_value(json_object_get(cfg, "model"));
    r->type = model != NULL ? sb_layer_type_find(model) : NULL;
    if (cfg == NULL || !json_is_object(cfg) || r->type == NULL || !json_is_number(gap)) {
        json_decref(cfg);
        return 0;
    }
    r->acc = row->r.test_acc;
    r->valid = row->r.valid_acc;
    r->ceiling = task != NULL ? task->ceiling : (double)NAN;
    r->window = task != NULL ? task->needed_window : (double)NAN;
    json_t *dur = json_object_get(cfg, "test_dur");
    r->test_dur = (double)NAN;
    if (json_is_number(dur) && json_number_value(dur) > json_number_value(gap) * (1 + 1e-9))
        r->test_dur = json_number_value(dur);
    char a[24], b[24];
    value_text(cfg, "seed", a, sizeof a);
    value_text(cfg, "task_seed", b, sizeof b);
    snprintf(r->unit, sizeof r->unit, "%s/%s", a, b);
    value_text(cfg, "lr", a, sizeof a);
    value_text(cfg, "warmup_steps", b, sizeof b);
    snprintf(r->setting, sizeof r->setting, "lr %s, warm-up %s", a,
             strcmp(b, "null") == 0 ? "5%" : b);
    static const char *const test_dur[1] = {"test_dur"};
    r->slice =
        sb_experiment_key(row->config_json, sb_experiment_varied, SB_EXPERIMENT_VARIED, NULL, 0);
    r->slice_training = sb_experiment_key(row->config_json, sb_experiment_varied,
                                          SB_EXPERIMENT_VARIED, test_dur, 1);
    r->family = sb_experiment_key(row->config_json, sb_experiment_varied, SB_EXPERIMENT_VARIED,
                                  sb_experiment_lengths, SB_EXPERIMENT_LENGTHS);
    json_decref(cfg);
    if (r->slice == NULL || r->slice_training == NULL || r->family == NULL) {
        free(r->slice);
        free(r->slice_training);
        free(r->family);
        return -1;
    }
    return 1;
}

/* ---- the findings --------------------------------------------------------------------- */

typedef struct ctx ctx;

/* The value of a pair for one seed: the benefit of side `hi` over side `lo` (each at its
 * chosen setting) in the finding's measure, NaN when a run is missing. */
typedef double (*pair_value_fn)(ctx *c, const char *slice, const sb_layer_type *hi,
                                const char *set_hi, const sb_layer_type *lo, const char *set_lo,
                                const char *unit);

#define AXIS_ATTENTION (-1) /* attention's classes, one slice */
#define AXIS_GROWTH (-2)    /* attention's classes, the slices of one task at several lengths */

typedef struct finding {
    const char *id, *finding, *statistic, *untested;
    int axis; /* the taxonomy axis its pairs differ on alone, or AXIS_ATTENTION, AXIS_GROWTH */
    int by_training; /* its slices span test gaps (one training, several gaps) */
    int exploratory, equivalence;
    pair_value_fn value;
} finding;

struct ctx {
    claim_run *r;
    size_t n;
    unsigned char *used; /* [n] runs the current slice's statistic read (its scale) */
    double *x;           /* [n] per-seed values */
    sb_claim *out;
    const char **slice_of; /* [cap] each claim's slice text (for its label) */
    int n_out, cap;
};

static const char *slice_key(const claim_run *r, int by_training)
{
    return by_training ? r->slice_training : r->slice;
}

/* The run of type t at setting `set` and seed `unit` in the slice, tested at its training gap
 * (test_dur NaN) or at the longer gap test_dur; -1 when there is none. */
static long find_run(const ctx *c, const char *slice, int by_training, const sb_layer_type *t,
                     const char *set, const char *unit, double test_dur)
{
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (r->type == t && strcmp(r->unit, unit) == 0 && strcmp(r->setting, set) == 0 &&
            (isnan(test_dur) ? isnan(r->test_dur) : r->test_dur == test_dur) &&
            strcmp(slice_key(r, by_training), slice) == 0)
            return (long)i;
    }
    return -1;
}

/* The accuracy of a run found by find_run, marked as used; NaN when there is none. */
static double use_acc(ctx *c, long i)
{
    if (i < 0)
        return (double)NAN;
    c->used[i] = 1;
    return c->r[i].acc;
}

/* The setting of type t in the slice (runs at the training gap): the one with the highest
 * mean validation accuracy over its seeds, or, when a setting has a run without one, the
 * highest mean test accuracy (*how says which; SB_CHOSE_NOTHING: one setting). NULL when t
 * has no run there. */
static const char *choose_setting(const ctx *c, const char *slice, int by_training,
                                  const sb_layer_type *t, sb_claim_choice *how)
{
    const char *best = NULL;
    double best_valid = -HUGE_VAL, best_test = -HUGE_VAL;
    const char *best_by_test = NULL;
    int settings = 0, all_valid = 1;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (r->type != t || !isnan(r->test_dur) || strcmp(slice_key(r, by_training), slice) != 0)
            continue;
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = !(c->r[j].type == t && isnan(c->r[j].test_dur) &&
                      strcmp(c->r[j].setting, r->setting) == 0 &&
                      strcmp(slice_key(&c->r[j], by_training), slice) == 0);
        if (!first)
            continue;
        settings++;
        double sum_valid = 0, sum_test = 0;
        int k = 0;
        for (size_t j = i; j < c->n; j++)
            if (c->r[j].type == t && isnan(c->r[j].test_dur) &&
                strcmp(c->r[j].setting, r->setting) == 0 &&
                strcmp(slice_key(&c->r[j], by_training), slice) == 0) {
                sum_valid += c->r[j].valid;
                sum_test += c->r[j].acc;
                k++;
            }
        all_valid &= isfinite(sum_valid);
        if (isfinite(sum_valid) && sum_valid / k > best_valid)
            best_valid = sum_valid / k, best = r->setting;
        if (sum_test / k > best_test)
            best_test = sum_test / k, best_by_test = r->setting;
    }
    *how = settings < 2 ? SB_CHOSE_NOTHING : all_valid ? SB_CHOSE_ON_VALID : SB_CHOSE_ON_TEST;
    return all_valid ? best : best_by_test;
}

/* Whether types a and b differ on `axis` alone. The gate granularity is not compared when
 * either forgets nothing: a state that never decays has no gate to be coarse or fine, so
 * delta_net / gated_delta_net differ in forgetting alone. */
static int one_axis_pair(const sb_axes *a, const sb_axes *b, int axis)
{
    const int va[SB_AXES] = {a->gate, a->forgetting, a->transition, a->update, a->memory};
    const int vb[SB_AXES] = {b->gate, b->forgetting, b->transition, b->update, b->memory};
    if (va[axis] == vb[axis])
        return 0;
    const int no_forgetting = a->forgetting == SB_FORGET_NONE || b->forgetting == SB_FORGET_NONE;
    for (int k = 0; k < SB_AXES; k++)
        if (k != axis && va[k] != vb[k] && !(k == 0 && no_forgetting))
            return 0;
    return 1;
}

/* For a pair of a finding: 1 when a is the side the finding favours (more forgetting; the
 * channel-mixing transition), -1 when b is, 0 when a, b is not a pair of this finding. */
static int pair_side(const finding *f, const sb_layer_type *a, const sb_layer_type *b)
{
    if (!one_axis_pair(&a->axes, &b->axes, f->axis))
        return 0;
    if (f->axis == 1)
        return a->axes.forgetting > b->axes.forgetting ? 1 : -1;
    const sb_state_mixing ma = sb_layer_state_mixing(a), mb = sb_layer_state_mixing(b);
    if (ma == SB_MIXING_CHANNELS && mb == SB_MIXING_DIAGONAL)
        return 1;
    if (ma == SB_MIXING_DIAGONAL && mb == SB_MIXING_CHANNELS)
        return -1;
    return 0;
}

/* Finding 1: accuracy of the more forgetting model minus the less. */
static double gating_value(ctx *c, const char *slice, const sb_layer_type *hi, const char *set_hi,
                           const sb_layer_type *lo, const char *set_lo, const char *unit)
{
    return use_acc(c, find_run(c, slice, 0, hi, set_hi, unit, (double)NAN)) -
           use_acc(c, find_run(c, slice, 0, lo, set_lo, unit, (double)NAN));
}

/* A pair's accuracies at the training gap and at the longest longer gap both were tested
 * at; 0 when there is no such gap. Only the runs at the training gap count for the scale
 * check: a collapse at the longer gap is what finding 2 measures, not a lack of training. */
static int gap_accs(ctx *c, const char *slice, const sb_layer_type *hi, const char *set_hi,
                    const sb_layer_type *lo, const char *set_lo, const char *unit, double acc[4])
{
    double longest = -1;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (r->type == hi && !isnan(r->test_dur) && r->test_dur > longest &&
            strcmp(r->unit, unit) == 0 && strcmp(r->setting, set_hi) == 0 &&
            strcmp(r->slice_training, slice) == 0 &&
            find_run(c, slice, 1, lo, set_lo, unit, r->test_dur) >= 0)
            longest = r->test_dur;
    }
    if (longest < 0)
        return 0;
    long at[4] = {find_run(c, slice, 1, hi, set_hi, unit, (double)NAN),
                  find_run(c, slice, 1, hi, set_hi, unit, longest),
                  find_run(c, slice, 1, lo, set_lo, unit, (double)NAN),
                  find_run(c, slice, 1, lo, set_lo, unit, longest)};
    for (int k = 0; k < 4; k++)
        if (at[k] < 0)
            return 0;
    for (int k = 0; k < 4; k++)
        acc[k] = k % 2 == 0 ? use_acc(c, at[k]) : c->r[at[k]].acc;
    return 1;
}

/* Finding 2: the diagonal model's accuracy drop to the longer gap minus the mixing model's. */
static double drop_value(ctx *c, const char *slice, const sb_layer_type *hi, const char *set_hi,
                         const sb_layer_type *lo, const char *set_lo, const char *unit)
{
    double a[4];
    if (!gap_accs(c, slice, hi, set_hi, lo, set_lo, unit, a))
        return (double)NAN;
    return (a[2] - a[3]) - (a[0] - a[1]);
}

/* Finding 2, what is kept: the mixing model's retention (longer gap over training gap)
 * minus the diagonal model's. */
static double retention_value(ctx *c, const char *slice, const sb_layer_type *hi,
                              const char *set_hi, const sb_layer_type *lo, const char *set_lo,
                              const char *unit)
{
    double a[4];
    if (!gap_accs(c, slice, hi, set_hi, lo, set_lo, unit, a) || !(a[0] > 0) || !(a[2] > 0))
        return (double)NAN;
    return a[1] / a[0] - a[3] / a[2];
}

/* Finding 2's first half: mixing minus diagonal accuracy at the training gap. */
static double selectivity_value(ctx *c, const char *slice, const sb_layer_type *hi,
                                const char *set_hi, const sb_layer_type *lo, const char *set_lo,
                                const char *unit)
{
    return use_acc(c, find_run(c, slice, 1, hi, set_hi, unit, (double)NAN)) -
           use_acc(c, find_run(c, slice, 1, lo, set_lo, unit, (double)NAN));
}

static const finding findings[] = {
    {"gating", "gating and fast forgetting help recall",
     "accuracy of the model that forgets by its input minus its twin that forgets less (a "
     "fixed decay, or none), same slice and seed",
     "other axes, other tasks, and test gaps longer than the training's", 1, 0, 0, 0, gating_value},
    {"mixing", "in-state channel mixing matters for generalising to longer gaps",
     "accuracy drop from the training gap to the longest longer test gap: the diagonal model's "
     "minus its channel-mixing twin's, same training and seed",
     "gaps longer than the longest tested, noise other than the slice's", 2, 1, 0, 0, drop_value},
    {"mixing_selectivity", "channel mixing is unnecessary for selectivity (at the training gap)",
     "accuracy at the training gap: the channel-mixing model minus its diagonal twin, same "
     "training and seed; equivalence within +-0.02",
     "selectivity at other gaps, other tasks", 2, 1, 0, 1, selectivity_value},
    {"mixing_retention",
     "in-state channel mixing matters for generalising to longer gaps (what is kept)",
     "retention at the longest longer test gap (its accuracy over the training gap's): the "
     "channel-mixing model's minus its diagonal twin's, same training and seed",
     "chosen after looking at the data (docs/claims.md): it can suggest, never confirm", 2, 1, 1, 0,
     retention_value},
    {"attention", "softmax attention stays ahead where long-context memory matters",
     "accuracy of the best attention model minus the best recurrent model (each chosen on "
     "validation), same slice and seed",
     "a task whose memory demand grows beyond a fixed-size state (interleaved walks)",
     AXIS_ATTENTION, 0, 0, 0, NULL},
    {"attention_growth",
     "attention's lead grows with the memory demand (its memory scales "
     "with the sequence)",
     "attention's margin over the best recurrent model (each chosen on validation at each "
     "length) at the length of largest memory demand minus at the length of smallest, same "
     "seed (the grammar)",
     "demands beyond the largest tried, tasks other than the slice's", AXIS_GROWTH, 0, 0, 0, NULL},
};
#define N_FINDINGS (int)(sizeof findings / sizeof *findings)

/* A new verdict of finding f on slice (NULL: the finding had none), appended to c->out. */
static sb_claim *new_claim(ctx *c, const finding *f, const char *slice)
{
    if (c->n_out == c->cap) {
        int cap = c->cap > 0 ? 2 * c->cap : 16;
        sb_claim *out = realloc(c->out, (size_t)cap * sizeof *out);
        const char **slices =
            out != NULL ? realloc(c->slice_of, (size_t)cap * sizeof *slices) : NULL;
        if (out != NULL)
            c->out = out;
        if (slices == NULL)
            return NULL;
        c->slice_of = slices;
        c->cap = cap;
    }
    sb_claim *cl = &c->out[c->n_out];
    c->slice_of[c->n_out++] = slice;
    memset(cl, 0, sizeof *cl);
    cl->id = f->id;
    cl->finding = f->finding;
    cl->statistic = f->statistic;
    cl->untested = f->untested;
    cl->exploratory = f->exploratory;
    cl->equivalence = f->equivalence;
    cl->estimate = cl->sd = cl->lo = cl->hi = cl->p = cl->p_holm = (double)NAN;
    cl->detectable = cl->scale = cl->window = (double)NAN;
    return cl;
}

/* Appends "a SEP b" to the list in buf, after ", " unless it is the first. */
static void append(char *buf, size_t size, const char *a, const char *sep, const char *b)
{
    size_t len = strlen(buf);
    if (len < size)
        snprintf(buf + len, size - len, "%s%s%s%s", len > 0 ? ", " : "", a, sep, b);
}

/* The statistics of x[0..k) (one value per seed) and the scale of the runs used. */
static void claim_stats(ctx *c, sb_claim *cl, int k)
{
    sb_sample_stats s = sb_sample_stats_of(c->x, k);
    cl->n = k;
    cl->estimate = s.mean;
    cl->sd = k > 1 ? s.sd : (double)NAN;
    if (k > 1)
        sb_mean_interval(&s, SB_ALPHA, &cl->lo, &cl->hi);
    double sum_acc = 0, sum_ceiling = 0;
    int used = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->used[i]) {
            sum_acc += c->r[i].acc;
            sum_ceiling += c->r[i].ceiling;
            used++;
        }
    cl->scale = used > 0 && sum_ceiling > 0 ? sum_acc / sum_ceiling : (double)NAN;
}

/* The seeds of the slice (first run of each, at the training gap), each given the mean of
 * value over the pairs it has: c->x[0..k). */
static int seed_values(ctx *c, const finding *f, const char *slice, const sb_layer_type **hi,
                       const char **set_hi, const sb_layer_type **lo, const char **set_lo,
                       int n_pairs)
{
    int k = 0;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (!isnan(r->test_dur) || strcmp(slice_key(r, f->by_training), slice) != 0)
            continue;
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = !(isnan(c->r[j].test_dur) && strcmp(c->r[j].unit, r->unit) == 0 &&
                      strcmp(slice_key(&c->r[j], f->by_training), slice) == 0);
        if (!first)
            continue;
        double sum = 0;
        int m = 0;
        for (int p = 0; p < n_pairs; p++) {
            double v = f->value(c, slice, hi[p], set_hi[p], lo[p], set_lo[p], r->unit);
            if (isfinite(v))
                sum += v, m++;
        }
        if (m > 0)
            c->x[k++] = sum / m;
    }
    return k;
}

#define MAX_TYPES 64

/* The distinct types with a run at the training gap in the slice, registry order. */
static int slice_types(const ctx *c, const char *slice, int by_training,
                       const sb_layer_type **types)
{
    int n = 0;
    const sb_layer_type *const *all = sb_layer_types();
    for (int t = 0; all[t] != NULL && n < MAX_TYPES; t++)
        for (size_t i = 0; i < c->n; i++)
            if (c->r[i].type == all[t] && isnan(c->r[i].test_dur) &&
                strcmp(slice_key(&c->r[i], by_training), slice) == 0) {
                types[n++] = all[t];
                break;
            }
    return n;
}

/* A pair finding on one slice: its one-axis pairs at their chosen settings, the per-seed
 * values, the statistics. 0 when the slice has no pair of the finding; -1 out of memory. */
static int pair_claim(ctx *c, const finding *f, const char *slice)
{
    const sb_layer_type *types[MAX_TYPES], *hi[MAX_TYPES], *lo[MAX_TYPES];
    const char *set_hi[MAX_TYPES], *set_lo[MAX_TYPES];
    int n_types = slice_types(c, slice, f->by_training, types), n_pairs = 0;
    sb_claim_choice chosen = SB_CHOSE_NOTHING;
    char pairs[256] = "";
    for (int a = 0; a < n_types; a++)
        for (int b = a + 1; b < n_types && n_pairs < MAX_TYPES; b++) {
            int side = pair_side(f, types[a], types[b]);
            if (side == 0)
                continue;
            hi[n_pairs] = side > 0 ? types[a] : types[b];
            lo[n_pairs] = side > 0 ? types[b] : types[a];
            sb_claim_choice how_hi, how_lo;
            set_hi[n_pairs] = choose_setting(c, slice, f->by_training, hi[n_pairs], &how_hi);
            set_lo[n_pairs] = choose_setting(c, slice, f->by_training, lo[n_pairs], &how_lo);
            chosen = how_hi > chosen ? how_hi : chosen;
            chosen = how_lo > chosen ? how_lo : chosen;
            append(pairs, sizeof pairs, hi[n_pairs]->name, "/", lo[n_pairs]->name);
            n_pairs++;
        }
    if (n_pairs == 0)
        return 0;
    memset(c->used, 0, c->n);
    int k = seed_values(c, f, slice, hi, set_hi, lo, set_lo, n_pairs);
    if (k == 0)
        return 0;
    sb_claim *cl = new_claim(c, f, slice);
    if (cl == NULL)
        return -1;
    snprintf(cl->pairs, sizeof cl->pairs, "%s", pairs);
    cl->chosen = chosen;
    claim_stats(c, cl, k);
    return 1;
}

/* The best model of a class (attention, or recurrent) in the slice: the highest mean
 * validation accuracy over the seeds at its chosen setting (test where a run has none). */
static const sb_layer_type *best_of_class(const ctx *c, const char *slice, int attention,
                                          const char **set, sb_claim_choice *how)
{
    const sb_layer_type *types[MAX_TYPES], *best = NULL;
    int n_types = slice_types(c, slice, 0, types);
    double best_score = -HUGE_VAL;
    sb_claim_choice worst = SB_CHOSE_NOTHING;
    int candidates = 0, all_valid = 1;
    double score[MAX_TYPES], test_score[MAX_TYPES];
    const char *sets[MAX_TYPES];
    const sb_layer_type *cand[MAX_TYPES];
    for (int t = 0; t < n_types; t++) {
        const sb_state_mixing m = sb_layer_state_mixing(types[t]);
        if ((m == SB_MIXING_ATTENTION) != attention || m == SB_MIXING_UNCLASSIFIED)
            continue;
        sb_claim_choice h;
        const char *s = choose_setting(c, slice, 0, types[t], &h);
        worst = h > worst ? h : worst;
        double sum_valid = 0, sum_test = 0;
        int k = 0;
        for (size_t i = 0; i < c->n; i++)
            if (c->r[i].type == types[t] && isnan(c->r[i].test_dur) &&
                strcmp(c->r[i].setting, s) == 0 && strcmp(c->r[i].slice, slice) == 0)
                sum_valid += c->r[i].valid, sum_test += c->r[i].acc, k++;
        score[candidates] = sum_valid / k;
        test_score[candidates] = sum_test / k;
        all_valid &= isfinite(score[candidates]);
        sets[candidates] = s;
        cand[candidates++] = types[t];
    }
    for (int q = 0; q < candidates; q++) {
        double v = all_valid ? score[q] : test_score[q];
        if (v > best_score)
            best_score = v, best = cand[q], *set = sets[q];
    }
    sb_claim_choice among = candidates < 2 ? SB_CHOSE_NOTHING
                            : all_valid    ? SB_CHOSE_ON_VALID
                                           : SB_CHOSE_ON_TEST;
    *how = among > worst ? among : worst;
    return best;
}

/* Whether run i is the first of its unit (seed) among the slice's runs at their training
 * gap: one value per seed. */
static int first_of_unit(const ctx *c, size_t i, const char *slice)
{
    for (size_t j = 0; j < i; j++)
        if (isnan(c->r[j].test_dur) && strcmp(c->r[j].unit, c->r[i].unit) == 0 &&
            strcmp(c->r[j].slice, slice) == 0)
            return 0;
    return 1;
}

/* Finding 3 on one slice: 0 when it lacks either class; -1 out of memory. */
static int attention_claim(ctx *c, const finding *f, const char *slice)
{
    const char *set_a = NULL, *set_r = NULL;
    sb_claim_choice how_a, how_r;
    const sb_layer_type *a = best_of_class(c, slice, 1, &set_a, &how_a);
    const sb_layer_type *rec = best_of_class(c, slice, 0, &set_r, &how_r);
    if (a == NULL || rec == NULL)
        return 0;
    memset(c->used, 0, c->n);
    int k = 0;
    double window = -1;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (!isnan(r->test_dur) || strcmp(r->slice, slice) != 0)
            continue;
        window = fmax(window, isnan(r->window) ? -1 : r->window);
        if (!first_of_unit(c, i, slice))
            continue;
        double v = gating_value(c, slice, a, set_a, rec, set_r, r->unit);
        if (isfinite(v))
            c->x[k++] = v;
    }
    if (k == 0)
        return 0;
    sb_claim *cl = new_claim(c, f, slice);
    if (cl == NULL)
        return -1;
    snprintf(cl->pairs, sizeof cl->pairs, "%s vs %s", a->name, rec->name);
    cl->chosen = how_a > how_r ? how_a : how_r;
    claim_stats(c, cl, k);
    cl->window = window >= 0 ? window : (double)NAN;
    return 1;
}

/* Finding 3 as the demand grows, on one family (a task at several lengths): per seed, the
 * margin at the slice of largest demand minus at the slice of smallest. 0 when the family
 * has fewer than two demands with both classes; -1 out of memory. */
static int growth_claim(ctx *c, const finding *f, const char *family)
{
    const char *lo = NULL, *hi = NULL;
    double w_lo = HUGE_VAL, w_hi = -HUGE_VAL;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (!isnan(r->test_dur) || strcmp(r->family, family) != 0 || !isfinite(r->window))
            continue;
        if (r->window < w_lo)
            w_lo = r->window, lo = r->slice;
        if (r->window > w_hi)
            w_hi = r->window, hi = r->slice;
    }
    if (lo == NULL || !(w_hi > w_lo))
        return 0;
    const char *sa_lo = NULL, *sr_lo = NULL, *sa_hi = NULL, *sr_hi = NULL;
    sb_claim_choice h[4];
    const sb_layer_type *a_lo = best_of_class(c, lo, 1, &sa_lo, &h[0]);
    const sb_layer_type *r_lo = best_of_class(c, lo, 0, &sr_lo, &h[1]);
    const sb_layer_type *a_hi = best_of_class(c, hi, 1, &sa_hi, &h[2]);
    const sb_layer_type *r_hi = best_of_class(c, hi, 0, &sr_hi, &h[3]);
    if (a_lo == NULL || r_lo == NULL || a_hi == NULL || r_hi == NULL)
        return 0;
    memset(c->used, 0, c->n);
    int k = 0;
    for (size_t i = 0; i < c->n; i++) {
        const claim_run *r = &c->r[i];
        if (!isnan(r->test_dur) || strcmp(r->slice, hi) != 0)
            continue;
        if (!first_of_unit(c, i, hi))
            continue;
        /* attention's margin at each demand (gating_value: a's accuracy minus rec's) */
        double v = gating_value(c, hi, a_hi, sa_hi, r_hi, sr_hi, r->unit) -
                   gating_value(c, lo, a_lo, sa_lo, r_lo, sr_lo, r->unit);
        if (isfinite(v))
            c->x[k++] = v;
    }
    if (k == 0)
        return 0;
    /* the scale guard reads the smallest demand's runs: whether the models learned the
     * grammar where memory is no obstacle; falling below the ceiling at the larger demand is
     * what the statistic measures */
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->r[i].slice, hi) == 0)
            c->used[i] = 0;
    sb_claim *cl = new_claim(c, f, family);
    if (cl == NULL)
        return -1;
    snprintf(cl->pairs, sizeof cl->pairs, "demand %.0f: %s vs %s; demand %.0f: %s vs %s", w_hi,
             a_hi->name, r_hi->name, w_lo, a_lo->name, r_lo->name);
    cl->chosen = SB_CHOSE_NOTHING;
    for (int q = 0; q < 4; q++)
        cl->chosen = h[q] > cl->chosen ? h[q] : cl->chosen;
    claim_stats(c, cl, k);
    cl->window = w_hi; /* the test needs its largest demand beyond a fixed-size state */
    return 1;
}

/* ---- verdicts ------------------------------------------------------------------------- */

/* The label of each verdict: the keys whose values differ between the slices of its
 * finding ("key=value, ..."). */
static void label_slices(ctx *c, int first, int last)
{
    if (last - first < 2)
        return;
    json_t **cfg = calloc((size_t)(last - first), sizeof *cfg);
    if (cfg == NULL)
        return;
    for (int i = first; i < last; i++)
        cfg[i - first] = json_loads(c->slice_of[i], 0, NULL);
    const char *key;
    json_t *value;
    json_t *head = cfg[0];
    for (int i = first; head != NULL && i < last; i++) {
        if (cfg[i - first] == NULL)
            continue;
        json_object_foreach (cfg[i - first], key, value) {
            int differs = 0;
            for (int j = first; j < last && !differs; j++)
                differs = cfg[j - first] == NULL ||
                          !json_equal(value, json_object_get(cfg[j - first], key));
            if (!differs)
                continue;
            char v[64];
            value_text(cfg[i - first], key, v, sizeof v);
            sb_claim *cl = &c->out[i];
            append(cl->slice, sizeof cl->slice, key, "=", v);
        }
    }
    for (int i = first; i < last; i++)
        json_decref(cfg[i - first]);
    free(cfg);
}

sb_status sb_claims_evaluate(const sb_run_row *rows, const sb_claim_task *tasks, size_t n,
                             sb_claim **out, int *n_out, sb_error *err)
{
    *out = NULL;
    *n_out = 0;
    ctx c = {0};
    size_t cap = n > 0 ? n : 1;
    c.r = calloc(cap, sizeof *c.r);
    c.used = calloc(cap, 1);
    c.x = calloc(cap, sizeof *c.x);
    sb_status st = SB_OK;
    if (c.r == NULL || c.used == NULL || c.x == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory reading %zu runs", n);
    for (size_t i = 0; i < n && st == SB_OK; i++) {
        int ok = read_run(&rows[i], tasks != NULL ? &tasks[i] : NULL, &c.r[c.n]);
        if (ok < 0)
            st = sb_error_set(err, SB_ERR_NOMEM, "out of memory reading run %zu", i);
        c.n += ok > 0;
    }
    for (int f = 0; f < N_FINDINGS && st == SB_OK; f++) {
        const finding *fd = &findings[f];
        int first = c.n_out;
        for (size_t i = 0; i < c.n && st == SB_OK; i++) {
            const char *slice =
                fd->axis == AXIS_GROWTH ? c.r[i].family : slice_key(&c.r[i], fd->by_training);
            int seen = !isnan(c.r[i].test_dur);
            for (size_t j = 0; j < i && !seen; j++)
                seen = isnan(c.r[j].test_dur) &&
                       strcmp(fd->axis == AXIS_GROWTH ? c.r[j].family
                                                      : slice_key(&c.r[j], fd->by_training),
                              slice) == 0;
            if (seen)
                continue;
            int made = fd->axis >= 0                ? pair_claim(&c, fd, slice)
                       : fd->axis == AXIS_ATTENTION ? attention_claim(&c, fd, slice)
                                                    : growth_claim(&c, fd, slice);
            if (made < 0)
                st = sb_error_set(err, SB_ERR_NOMEM, "out of memory computing the findings");
        }
        if (st == SB_OK && c.n_out == first) {
            sb_claim *cl = new_claim(&c, fd, NULL);
            if (cl == NULL)
                st = sb_error_set(err, SB_ERR_NOMEM, "out of memory computing the findings");
            else if (fd->axis >= 0)
                snprintf(cl->reason, sizeof cl->reason,
                         "no pair of models that differ on the %s axis alone, trained in one "
                         "slice on the same seed%s",
                         sb_axis_name(fd->axis),
                         fd->by_training && !fd->equivalence ? " and tested at a longer gap" : "");
            else if (fd->axis == AXIS_ATTENTION)
                snprintf(cl->reason, sizeof cl->reason,
                         "no slice with an attention model and a recurrent model on the same "
                         "seed");
            else
                snprintf(cl->reason, sizeof cl->reason,
                         "no task trained at two lengths of different memory demand with an "
                         "attention model and a recurrent model on the same seed");
        }
        if (st == SB_OK)
            label_slices(&c, first, c.n_out);
    }
    if (st == SB_OK)
        st = sb_claims_decide(c.out, c.n_out, err);
    for (size_t i = 0; i < c.n; i++) {
        free(c.r[i].slice);
        free(c.r[i].slice_training);
        free(c.r[i].family);
    }
    free(c.r);
    free(c.used);
    free(c.x);
    free(c.slice_of);
    if (st != SB_OK) {
        free(c.out);
        return st;
    }
    *out = c.out;
    *n_out = c.n_out;
    return SB_OK;
}

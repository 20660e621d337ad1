/*
 * ceiling.c - the ideal observer of a task and the window observers (see ceiling.h).
 *
 * Two passes over each scored sample:
 *   1. the exact filter, element by element: within a string, alpha over the states that
 *      show the observed symbol, times G(s, t) at readout; the posterior of every element
 *      is kept for pass 2;
 *   2. the window observers: one filter per start element j, run for 32 elements without
 *      the length rule; the window of size k that ends at element i = j + k - 1 decides
 *      argmax of that filter's belief at i, scored with the exact posterior of pass 1.
 * Interleaved walks (--walk_len): the walks are independent and every element names its
 * walk, so the exact observer is one filter per walk; a window of the last k elements holds
 * some of the current walk's elements, and its observer filters those (walks_window_pass).
 * Samples are independent, so they are spread over threads; the per-sample sums are added
 * in sample order, so the numbers do not depend on the thread count.
 */
#include "task/ceiling.h"

#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/cpus.h"
#include "core/timer.h"
#include "task/ceiling_internal.h"

const int sb_ceiling_window_k[SB_CEILING_N_WINDOWS] = {0,  1,   2,   4,   8,    16,   32,
                                                       64, 128, 256, 512, 1024, 2048, 4096};
#define WINDOW_MAX 32       /* the reference tasks' largest window */
#define REFERENCE_WINDOWS 7 /* k = 0 .. WINDOW_MAX */
#define DEFAULT_PRIOR_SAMPLES 2000
#define MAX_LENGTH_TABLE ((size_t)1 << 25) /* doubles in the G table (256 MiB) */

sb_ceiling_options sb_ceiling_options_default(void)
{
    return (sb_ceiling_options){
        .split = SB_SPLIT_TEST, .samples = 0, .prior_samples = 0, .threads = 0};
}

/* ---- what every sample shares -------------------------------------------------------- */

static void tables_free(tables *tb)
{
    sb_free(tb->G);
    sb_free(tb->class_offset);
    sb_free(tb->class_state);
    sb_free(tb->prior);
    sb_free(tb->inv_forbidden);
    sb_free(tb->gap_pmf);
    memset(tb, 0, sizeof *tb);
}

/* G(s, t) from the hitting-time distribution f_n(s) = P(a walk from s reaches '#' after
 * exactly n steps): the string that holds s at position t has length t + n + 1. */
static sb_status tables_length_rule(tables *tb, sb_error *err)
{
    const sb_grammar *g = tb->g;
    const int n = g->n_states, T = tb->len_max;
    if ((size_t)T * (size_t)n > MAX_LENGTH_TABLE)
        return sb_error_set(err, SB_ERR_INVALID,
                            "the exact observer needs a %d x %d length table (string length "
                            "limit x states), more than %zu entries; lower --test_seqlen_max / "
                            "--train_seqlen_max",
                            T, n, MAX_LENGTH_TABLE);
    tb->G = sb_calloc((size_t)T * (size_t)n, sizeof *tb->G);
    double *f = sb_calloc((size_t)n, sizeof *f), *f_next = sb_calloc((size_t)n, sizeof *f);
    double *cum = sb_calloc((size_t)T * (size_t)n, sizeof *cum); /* cum[m][s] = sum f_0..f_m */
    if (tb->G == NULL || f == NULL || f_next == NULL || cum == NULL) {
        sb_free(f), sb_free(f_next), sb_free(cum);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the observer's length table");
    }
    f[g->end_state] = 1.0;
    for (int m = 0; m < T; m++) {
        for (int s = 0; s < n; s++)
            cum[(size_t)m * n + s] = (m > 0 ? cum[(size_t)(m - 1) * n + s] : 0.0) + f[s];
        for (int s = 0; s < n; s++) {
            double sum = 0.0;
            for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
                sum += f[g->succ[e]];
            f_next[s] = sum * g->out_prob[s];
        }
        double *tmp = f;
        f = f_next;
        f_next = tmp;
    }
    /* lengths t + n + 1 in [len_min, len_max]: n in [len_min - 1 - t, len_max - 1 - t] */
    for (int t = 0; t < T; t++) {
        int hi = T - 1 - t, lo = tb->len_min - 1 - t;
        for (int s = 0; s < n; s++) {
            double v = cum[(size_t)hi * n + s];
            if (lo > 0)
                v -= cum[(size_t)(lo - 1) * n + s];
            tb->G[(size_t)t * n + s] = v > 0.0 ? v : 0.0;
        }
    }
    sb_free(f), sb_free(f_next), sb_free(cum);
    tb->accept_prob = 0.0;
    for (int i = 0; i < SB_START_STATES; i++)
        tb->accept_prob += 0.25 * tb->G[g->start_states[i]];
    if (!(tb->accept_prob > 0.0))
        return sb_error_set(err, SB_ERR_INVALID,
                            "no string of the grammar has a length in [%d, %d]; widen the "
                            "sequence length range",
                            tb->len_min, tb->len_max);
    return SB_OK;
}

/* The distribution of a drawn gap's length in frames (the assembly's rule: the duration
 * rounded to 0.1 s, capped at SB_MAX_GAP_SECONDS; as many frames as tenths): test gaps
 * have the fixed --test_dur, training gaps the uniform or lognormal duration. */
static sb_status gap_length_pmf(const sb_task *task, sb_split split, tables *tb, sb_error *err)
{
    const sb_task_config *c = &task->cfg;
    const int cap = (int)rint(SB_MAX_GAP_SECONDS / SB_TIMESTEP);
    int fixed = -1;
    if (split != SB_SPLIT_TRAIN) /* test and validation: the fixed test gap */
        fixed = (int)rint(sb_task_test_duration(task) / SB_TIMESTEP);
    else if (c->dist_dur == SB_GAP_DIST_UNIFORM && c->train_gap_max <= c->train_gap_min)
        fixed = (int)rint(rint(c->train_gap_min * 10.0) / 10.0 / SB_TIMESTEP);
    else if (c->dist_dur == SB_GAP_DIST_LOGNORMAL && c->train_gap_max <= 0.0)
        fixed = (int)rint(rint(exp(c->train_gap_min) * 10.0) / 10.0 / SB_TIMESTEP);
    int n = fixed >= 0                           ? (fixed < cap ? fixed : cap) + 1
            : c->dist_dur == SB_GAP_DIST_UNIFORM ? (int)fmin(rint(c->train_gap_max * 10.0), cap) + 1
                                                 : cap + 1;
    tb->gap_pmf = sb_calloc((size_t)n, sizeof *tb->gap_pmf);
    if (tb->gap_pmf == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the gap length table");
    tb->gap_pmf_n = n;
    if (fixed >= 0) {
        tb->gap_pmf[n - 1] = 1.0;
        return SB_OK;
    }
    /* j frames iff the duration x rounds to j tenths: 10 x in [j - 0.5, j + 0.5] */
    for (int j = 0; j < n; j++) {
        double lo = (j - 0.5) / 10.0, hi = j == cap ? (double)INFINITY : (j + 0.5) / 10.0;
        double p;
        if (c->dist_dur == SB_GAP_DIST_UNIFORM) {
            double a = fmax(lo, c->train_gap_min), b = fmin(hi, c->train_gap_max);
            p = b > a ? (b - a) / (c->train_gap_max - c->train_gap_min) : 0.0;
        } else { /* x = exp(mu + sigma z) */
            double mu = c->train_gap_min, sigma = c->train_gap_max;
            double za = lo > 0.0 ? (log(lo) - mu) / sigma : -(double)INFINITY;
            double zb = isinf(hi) ? (double)INFINITY : (log(hi) - mu) / sigma;
            p = 0.5 * erfc(-zb / sqrt(2.0)) - 0.5 * erfc(-za / sqrt(2.0));
        }
        tb->gap_pmf[j] = p;
    }
    return SB_OK;
}

static sb_status tables_init(tables *tb, const sb_task *task, sb_split split, sb_error *err)
{
    memset(tb, 0, sizeof *tb);
    const sb_grammar *g = task->grammar;
    const int n = g->n_states, C = g->n_classes;
    tb->g = g;
    tb->len_min = split == SB_SPLIT_TRAIN ? task->cfg.train_seqlen_min : task->cfg.test_seqlen_min;
    tb->len_max = split == SB_SPLIT_TRAIN ? task->cfg.train_seqlen_max : task->cfg.test_seqlen_max;
    tb->class_offset = sb_calloc((size_t)C + 1, sizeof *tb->class_offset);
    tb->class_state = sb_calloc((size_t)n, sizeof *tb->class_state);
    tb->prior = sb_calloc((size_t)n, sizeof *tb->prior);
    tb->inv_forbidden = sb_calloc((size_t)n, sizeof *tb->inv_forbidden);
    if (!tb->class_offset || !tb->class_state || !tb->prior || !tb->inv_forbidden) {
        tables_free(tb);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the observer's tables");
    }
    for (int s = 0; s < n; s++)
        tb->class_offset[g->state_class[s] + 1]++;
    for (int c = 0; c < C; c++)
        tb->class_offset[c + 1] += tb->class_offset[c];
    int *fill = sb_calloc((size_t)C, sizeof *fill);
    if (fill == NULL) {
        tables_free(tb);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the observer's tables");
    }
    for (int s = 0; s < n; s++) {
        int c = g->state_class[s];
        tb->class_state[tb->class_offset[c] + fill[c]++] = s;
    }
    sb_free(fill);

    tb->grammar_gap = task->cfg.grammar_gap;
    tb->gap_start = task->cfg.gap_start;
    /* the reference tasks: windows up to 32 elements (4-8 reach the ceiling at every size
     * tried); walks: up to the first window that covers a whole sample of the split */
    tb->walks = task->cfg.walk_len > 0;
    tb->n_windows = REFERENCE_WINDOWS;
    while (tb->walks && tb->n_windows < SB_CEILING_N_WINDOWS &&
           sb_ceiling_window_k[tb->n_windows - 1] < task->n_elements[split])
        tb->n_windows++;
    sb_status st = gap_length_pmf(task, split, tb, err);
    if (st != SB_OK) {
        tables_free(tb);
        return st;
    }
    double q = task->cfg.gap_prob, zero = tb->gap_pmf[0];
    tb->gap_prob = q;
    tb->nogap_any = (1.0 - q) + q * zero;
    tb->nogap_if_empty = q * (1.0 - zero);
    for (int s = 0; s < n; s++) {
        int m = __builtin_popcountll(g->forbidden_classes[s]);
        tb->inv_forbidden[s] = m > 0 ? 1.0 / m : 0.0;
    }
    st = tables_length_rule(tb, err);
    if (st != SB_OK)
        tables_free(tb);
    return st;
}

/* ---- one sample ------------------------------------------------------------------------ */

/* A sparse distribution over states: support list plus a dense scratch row. */
typedef struct belief {
    int n;
    int *state; /* [n_states] */
    double *w;  /* [n_states] weights of the support, in support order */
} belief;

typedef struct scratch {
    sb_sample sample;
    belief cur, next;
    belief *walk_b; /* [walks] the exact filter of each walk (one for the reference tasks) */
    int n_walks;
    int *walk_prev; /* [walks] the walk's previous state; -1 before its first element */
    int *walk_t;    /* [walks] position of the walk's current element in its string */
    int *walk_pos;  /* [walks * E] the elements of each walk, in order (window pass) */
    int *walk_n;    /* [walks] */
    double *dense;  /* [n_states] accumulation row, zero between uses */
    int *stamp;     /* [n_states] */
    int stamp_now;
    posteriors post;       /* the exact posterior of every element of the sample */
    frame_scratch *frames; /* non-grammatical gaps only */
} scratch;

typedef struct sample_sums {
    double expected, realized, p_true, p_sq;
    double model_expected, model_realized; /* the frame-level predictor (distractor gaps) */
    double window[SB_CEILING_N_WINDOWS];
    int64_t elements;
} sample_sums;

static void scratch_free(scratch *sc)
{
    sb_sample_free(&sc->sample);
    sb_free(sc->cur.state), sb_free(sc->cur.w), sb_free(sc->next.state), sb_free(sc->next.w);
    for (int j = 0; sc->walk_b != NULL && j < sc->n_walks; j++)
        sb_free(sc->walk_b[j].state), sb_free(sc->walk_b[j].w);
    sb_free(sc->walk_b), sb_free(sc->walk_prev), sb_free(sc->walk_t);
    sb_free(sc->walk_pos), sb_free(sc->walk_n);
    sb_free(sc->dense), sb_free(sc->stamp);
    sb_free(sc->post.offset), sb_free(sc->post.state), sb_free(sc->post.p);
    ceiling_frames_free(sc->frames);
    memset(sc, 0, sizeof *sc);
}

static sb_status scratch_init(scratch *sc, const tables *tb, const sb_task *task, sb_error *err)
{
    memset(sc, 0, sizeof *sc);
    size_t n = (size_t)task->grammar->n_states;
    const sb_grammar *g = task->grammar;
    int E = task->n_elements[0] > task->n_elements[1] ? task->n_elements[0] : task->n_elements[1];
    int widest = 1; /* states of the most ambiguous class: the largest support */
    for (int c = 0; c < g->n_classes; c++) {
        int count = 0;
        for (int s = 0; s < g->n_states; s++)
            count += g->state_class[s] == c;
        widest = count > widest ? count : widest;
    }
    sb_status st = sb_sample_alloc(task, &sc->sample, err);
    if (st != SB_OK)
        return st;
    sc->cur.state = sb_malloc(n * sizeof(int));
    sc->cur.w = sb_malloc(n * sizeof(double));
    sc->next.state = sb_malloc(n * sizeof(int));
    sc->next.w = sb_malloc(n * sizeof(double));
    sc->dense = sb_calloc(n, sizeof(double));
    sc->stamp = sb_calloc(n, sizeof(int));
    sc->post.offset = sb_malloc(((size_t)E + 1) * sizeof(int));
    sc->post.cap = (size_t)E * (size_t)widest;
    sc->post.state = sb_malloc(sc->post.cap * sizeof(int));
    sc->post.p = sb_malloc(sc->post.cap * sizeof(double));
    int walks = task->walk_stride;
    sc->walk_b = sb_calloc((size_t)walks, sizeof *sc->walk_b);
    sc->n_walks = sc->walk_b != NULL ? walks : 0;
    int walk_ok = sc->walk_b != NULL;
    for (int j = 0; j < sc->n_walks; j++) {
        sc->walk_b[j].state = sb_malloc(n * sizeof(int));
        sc->walk_b[j].w = sb_malloc(n * sizeof(double));
        walk_ok = walk_ok && sc->walk_b[j].state && sc->walk_b[j].w;
    }
    sc->walk_prev = sb_malloc((size_t)walks * sizeof(int));
    sc->walk_t = sb_malloc((size_t)walks * sizeof(int));
    sc->walk_pos = sb_malloc((size_t)walks * (size_t)E * sizeof(int));
    sc->walk_n = sb_malloc((size_t)walks * sizeof(int));
    if (!sc->cur.state || !sc->cur.w || !sc->next.state || !sc->next.w || !sc->dense ||
        !sc->stamp || !sc->post.offset || !sc->post.state || !sc->post.p || !walk_ok ||
        !sc->walk_prev || !sc->walk_t || !sc->walk_pos || !sc->walk_n) {
        scratch_free(sc);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the observer");
    }
    if (tb->grammar_gap && (st = ceiling_frames_alloc(tb, &sc->frames, err)) != SB_OK)
        scratch_free(sc);
    return st;
}

/* Likelihood of element k's own gap frames given its state s (non-grammatical gaps; 1
 * otherwise, since zero and noise frames do not depend on the state). dist points at the
 * element's distractor classes. */
static double gap_likelihood(const tables *tb, int k, int s, int gap, const uint8_t *dist)
{
    if (!tb->grammar_gap || k < tb->gap_start)
        return 1.0;
    uint64_t forbidden = tb->g->forbidden_classes[s];
    if (gap == 0)
        return tb->nogap_any + (forbidden == 0 ? tb->nogap_if_empty : 0.0);
    double l = 1.0;
    for (int r = 0; r < gap; r++) {
        if (!((forbidden >> dist[r]) & 1u))
            return 0.0;
        l *= tb->inv_forbidden[s];
    }
    return l;
}

/* Belief at the first element of a string: the start states showing class c. */
static void belief_string_start(const tables *tb, belief *b, int c)
{
    b->n = 0;
    for (int i = 0; i < SB_START_STATES; i++) {
        int s = tb->g->start_states[i];
        if (tb->g->state_class[s] == c) {
            b->state[b->n] = s;
            b->w[b->n++] = 0.25;
        }
    }
}

/* Belief of a window's first element: the prior over the states showing class c. */
static void belief_from_prior(const tables *tb, belief *b, int c)
{
    b->n = 0;
    double total = 0.0;
    for (int i = tb->class_offset[c]; i < tb->class_offset[c + 1]; i++) {
        int s = tb->class_state[i];
        b->state[b->n] = s;
        b->w[b->n++] = tb->prior[s];
        total += tb->prior[s];
    }
    if (total <= 0.0) /* no training element showed this class: uniform over its states */
        for (int i = 0; i < b->n; i++)
            b->w[i] = 1.0;
}

/* next = cur pushed one step through the walk, restricted to class c (cur must not hold
 * '#': its successor is a new string). */
static void belief_step(const tables *tb, scratch *sc, const belief *cur, belief *next, int c)
{
    const sb_grammar *g = tb->g;
    int stamp = ++sc->stamp_now;
    next->n = 0;
    for (int i = 0; i < cur->n; i++) {
        int s = cur->state[i];
        double w = cur->w[i] * g->out_prob[s];
        if (w == 0.0)
            continue;
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++) {
            int t = g->succ[e];
            if (g->state_class[t] != c)
                continue;
            if (sc->stamp[t] != stamp) {
                sc->stamp[t] = stamp;
                next->state[next->n++] = t;
            }
            sc->dense[t] += w;
        }
    }
    for (int i = 0; i < next->n; i++) {
        next->w[i] = sc->dense[next->state[i]];
        sc->dense[next->state[i]] = 0.0;
    }
}

/* Multiplies in element k's gap likelihood and normalises; returns the total before
 * normalisation (0: the belief excludes what was seen). */
static double belief_observe(const tables *tb, belief *b, int k, int gap, const uint8_t *dist)
{
    double total = 0.0;
    for (int i = 0; i < b->n; i++) {
        b->w[i] *= gap_likelihood(tb, k, b->state[i], gap, dist);
        total += b->w[i];
    }
    if (total > 0.0)
        for (int i = 0; i < b->n; i++)
            b->w[i] /= total;
    return total;
}

/* The state of largest weight (lowest state id on ties). */
static int belief_argmax(const sb_grammar *g, const belief *b)
{
    int best = -1;
    double bw = -1.0;
    for (int i = 0; i < b->n; i++) {
        int s = b->state[i];
        if (b->w[i] > bw || (b->w[i] == bw && g->state_id[s] < g->state_id[best])) {
            bw = b->w[i];
            best = s;
        }
    }
    return best;
}

static void swap_beliefs(scratch *sc)
{
    belief tmp = sc->cur;
    sc->cur = sc->next;
    sc->next = tmp;
}

static void swap_into(belief *b, belief *next)
{
    belief tmp = *b;
    *b = *next;
    *next = tmp;
}

double ceiling_posterior_of(const posteriors *post, int k, int s)
{
    for (int i = post->offset[k]; i < post->offset[k + 1]; i++)
        if (post->state[i] == s)
            return post->p[i];
    return 0.0;
}

/* Pass 1: the exact filter over sample s, filling the posterior table. One filter per walk
 * (the reference tasks have one walk: element k - 1 of the walk is element k - 1). */
static sb_status exact_pass(const tables *tb, scratch *sc, sample_sums *out, sb_error *err)
{
    const sb_grammar *g = tb->g;
    const sb_sample *smp = &sc->sample;
    const int n = g->n_states;
    int dist_pos = 0;
    size_t used = 0;
    for (int j = 0; j < sc->n_walks; j++)
        sc->walk_prev[j] = -1;
    for (int k = 0; k < smp->n_elements; k++) {
        int truth = smp->state[k], c = g->state_class[truth], j = smp->walk[k];
        belief *cur = &sc->walk_b[j];
        if (sc->walk_prev[j] < 0 || sc->walk_prev[j] == g->end_state) {
            sc->walk_t[j] = 0;
            belief_string_start(tb, cur, c);
        } else {
            sc->walk_t[j]++;
            belief_step(tb, sc, cur, &sc->next, c);
            swap_into(cur, &sc->next);
        }
        sc->walk_prev[j] = truth;
        const int t = sc->walk_t[j];
        const uint8_t *dist = smp->gap_class + dist_pos;
        if (tb->grammar_gap)
            dist_pos += smp->gap[k];
        double total = belief_observe(tb, cur, k, smp->gap[k], dist);
        if (!(total > 0.0) || t >= tb->len_max)
            return sb_error_set(err, SB_ERR_RUNTIME,
                                "the exact observer lost the true state at element %d (a bug: "
                                "please report it with the task flags)",
                                k);
        /* readout: alpha * G, normalised */
        if (used + (size_t)cur->n > sc->post.cap)
            return sb_error_set(err, SB_ERR_RUNTIME, "observer posterior table overflow");
        sc->post.offset[k] = (int)used;
        double z = 0.0;
        for (int i = 0; i < cur->n; i++)
            z += cur->w[i] * tb->G[(size_t)t * n + cur->state[i]];
        if (!(z > 0.0))
            return sb_error_set(err, SB_ERR_RUNTIME,
                                "the exact observer gives the true path probability 0 at "
                                "element %d (a bug: please report it with the task flags)",
                                k);
        double best = -1.0, p_true = 0.0, p_sq = 0.0;
        int best_s = -1;
        for (int i = 0; i < cur->n; i++) {
            int s = cur->state[i];
            double p = cur->w[i] * tb->G[(size_t)t * n + s] / z;
            sc->post.state[used] = s;
            sc->post.p[used++] = p;
            if (p > best || (p == best && g->state_id[s] < g->state_id[best_s])) {
                best = p;
                best_s = s;
            }
            if (s == truth)
                p_true = p;
            p_sq += p * p;
        }
        out->expected += best;
        out->realized += best_s == truth;
        out->p_true += p_true;
        out->p_sq += p_sq;
        out->elements++;
    }
    sc->post.offset[smp->n_elements] = (int)used;
    return SB_OK;
}

/* Pass 2: the window observers. */
static void window_pass(const tables *tb, scratch *sc, sample_sums *out)
{
    const sb_grammar *g = tb->g;
    const sb_sample *smp = &sc->sample;
    const int E = smp->n_elements;
    int dist_pos = 0; /* where element j's distractors start */
    for (int k = 0; k < E; k++)
        out->window[0] += ceiling_posterior_of(&sc->post, k, tb->prior_argmax);
    for (int j = 0; j < E; j++) {
        /* offset of element j's distractors */
        int pos = dist_pos;
        for (int step = 0; step < WINDOW_MAX && j + step < E; step++) {
            int k = j + step;
            int c = g->state_class[smp->state[k]];
            if (step == 0) {
                if (j == 0)
                    belief_string_start(tb, &sc->cur, c);
                else
                    belief_from_prior(tb, &sc->cur, c);
            } else if (smp->state[k - 1] == g->end_state) {
                belief_string_start(tb, &sc->cur, c);
            } else {
                belief_step(tb, sc, &sc->cur, &sc->next, c);
                swap_beliefs(sc);
            }
            const uint8_t *dist = smp->gap_class + pos;
            if (tb->grammar_gap)
                pos += smp->gap[k];
            if (!(belief_observe(tb, &sc->cur, k, smp->gap[k], dist) > 0.0)) {
                /* the observer's own model excludes what it saw: it starts afresh here */
                belief_from_prior(tb, &sc->cur, c);
                belief_observe(tb, &sc->cur, k, smp->gap[k], dist);
            }
            int window = step + 1;
            /* which window sizes this belief decides: k = window, and, for the filter
             * that starts at the sample's first element, every larger k as well */
            for (int w = 1; w < REFERENCE_WINDOWS; w++) {
                int kw = sb_ceiling_window_k[w];
                if (kw == window || (j == 0 && kw > window)) {
                    int choice = belief_argmax(g, &sc->cur);
                    out->window[w] += ceiling_posterior_of(&sc->post, k, choice);
                }
            }
        }
        if (tb->grammar_gap)
            dist_pos += smp->gap[j];
    }
}

/* One window filter over walk elements P[a], P[a + 1], ... of the sample (P: the elements of
 * the current walk, in order). It starts at P[a] from the prior or, when `known` (a = 0 only),
 * from a string start: the observer whose window reaches the sample's first element knows
 * that it sees its walk from the beginning. Its belief at element e = P[b] decides the
 * windows k that hold P[a] as their walk's first element: k > e - P[a], and k <= e - P[a - 1]
 * (k <= e when a = 0: the window does not reach the sample's first element); when known,
 * every k > e. */
static void walk_window_filter(const tables *tb, scratch *sc, sample_sums *out, const int *P, int n,
                               int a, int known)
{
    const sb_grammar *g = tb->g;
    const sb_sample *smp = &sc->sample;
    const int kmax = sb_ceiling_window_k[tb->n_windows - 1];
    for (int b = a; b < n; b++) {
        const int e = P[b], span = e - P[a];
        if (span >= kmax || (known && e >= kmax))
            return;
        const int c = g->state_class[smp->state[e]];
        if (b == a) {
            if (known)
                belief_string_start(tb, &sc->cur, c);
            else
                belief_from_prior(tb, &sc->cur, c);
        } else if (smp->state[P[b - 1]] == g->end_state) {
            belief_string_start(tb, &sc->cur, c);
        } else {
            belief_step(tb, sc, &sc->cur, &sc->next, c);
            swap_beliefs(sc);
        }
        if (!(belief_observe(tb, &sc->cur, e, smp->gap[e], NULL) > 0.0)) {
            belief_from_prior(tb, &sc->cur, c); /* as window_pass: start afresh */
            belief_observe(tb, &sc->cur, e, smp->gap[e], NULL);
        }
        const int lo = known ? e : span, hi = known ? kmax : a > 0 ? e - P[a - 1] : e;
        int choice = -1;
        for (int w = 1; w < tb->n_windows; w++) {
            int k = sb_ceiling_window_k[w];
            if (k <= lo || k > hi)
                continue;
            if (choice < 0)
                choice = belief_argmax(g, &sc->cur);
            out->window[w] += ceiling_posterior_of(&sc->post, e, choice);
        }
    }
}

/* Pass 2 with interleaved walks: the window observers of each walk's elements. */
static void walks_window_pass(const tables *tb, scratch *sc, sample_sums *out)
{
    const sb_sample *smp = &sc->sample;
    const int E = smp->n_elements;
    for (int k = 0; k < E; k++)
        out->window[0] += ceiling_posterior_of(&sc->post, k, tb->prior_argmax);
    for (int j = 0; j < sc->n_walks; j++)
        sc->walk_n[j] = 0;
    for (int k = 0; k < E; k++) {
        int j = smp->walk[k];
        sc->walk_pos[(size_t)j * (size_t)E + (size_t)sc->walk_n[j]++] = k;
    }
    for (int j = 0; j < sc->n_walks; j++) {
        const int *P = sc->walk_pos + (size_t)j * (size_t)E;
        const int n = sc->walk_n[j];
        if (n > 0)
            walk_window_filter(tb, sc, out, P, n, 0, 1);
        for (int a = 0; a < n; a++)
            walk_window_filter(tb, sc, out, P, n, a, 0);
    }
}

/* ---- the whole computation ----------------------------------------------------------- */

static sb_status estimate_prior(tables *tb, const sb_task *task, int64_t n_prior, int threads,
                                sb_error *err)
{
    const int n = tb->g->n_states;
    sb_status status = SB_OK;
    sb_error first = {0};
    int64_t *counts = sb_calloc((size_t)n, sizeof *counts);
    if (counts == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the observer's prior");
#pragma omp parallel num_threads(threads)
    {
        int64_t *mine = sb_calloc((size_t)n, sizeof *mine);
        sb_sample smp;
        sb_error e = {0};
        int ok = mine != NULL && sb_sample_alloc(task, &smp, &e) == SB_OK;
        if (!ok && mine != NULL) {
            sb_free(mine);
            mine = NULL;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t i = 0; i < n_prior; i++) {
            if (!ok)
                continue;
            if (sb_task_sample(task, SB_SPLIT_TRAIN, i, &smp, &e) != SB_OK) {
#pragma omp critical
                if (status == SB_OK) {
                    status = e.status;
                    first = e;
                }
                continue;
            }
            for (int k = 0; k < smp.n_elements; k++)
                mine[smp.state[k]]++;
        }
#pragma omp critical
        {
            if (ok) {
                for (int s = 0; s < n; s++)
                    counts[s] += mine[s];
            } else if (status == SB_OK) {
                status = SB_ERR_NOMEM;
                sb_error_set(&first, SB_ERR_NOMEM, "out of memory for the observer's prior");
            }
        }
        if (ok) {
            sb_sample_free(&smp);
            sb_free(mine);
        }
    }
    if (status != SB_OK) {
        sb_free(counts);
        *err = first;
        return status;
    }
    int64_t total = 0;
    for (int s = 0; s < n; s++)
        total += counts[s];
    int best = 0;
    for (int s = 0; s < n; s++) {
        tb->prior[s] = total > 0 ? (double)counts[s] / (double)total : 1.0 / n;
        if (tb->prior[s] > tb->prior[best] ||
            (tb->prior[s] == tb->prior[best] && tb->g->state_id[s] < tb->g->state_id[best]))
            best = s;
    }
    tb->prior_argmax = best;
    sb_free(counts);
    return SB_OK;
}

/* Every sample's sums (sums[n_samples]) on `threads` threads: the exact observer, the window
 * observers and, with grammar gaps, the frame-level ideal model. On an error, the one of
 * the lowest sample index (or of a thread's set-up) is returned, whatever the thread count. */
static sb_status sample_pass(const tables *tb, const sb_task *task, sb_split split,
                             int64_t n_samples, int threads, sample_sums *sums, sb_error *err)
{
    sb_status status = SB_OK;
    int64_t failed_at = n_samples;
    sb_error first = {0};
#pragma omp parallel num_threads(threads)
    {
        scratch sc;
        sb_error e = {0};
        sb_status mine = scratch_init(&sc, tb, task, &e);
        if (mine != SB_OK) {
#pragma omp critical
            if (status == SB_OK) {
                status = mine;
                first = e;
                failed_at = -1;
            }
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t i = 0; i < n_samples; i++) {
            if (mine != SB_OK)
                continue;
            sb_status s2 = sb_task_sample(task, split, i, &sc.sample, &e);
            if (s2 == SB_OK)
                s2 = exact_pass(tb, &sc, &sums[i], &e);
            if (s2 == SB_OK && tb->walks)
                walks_window_pass(tb, &sc, &sums[i]);
            else if (s2 == SB_OK)
                window_pass(tb, &sc, &sums[i]);
            if (s2 == SB_OK && tb->grammar_gap)
                s2 = ceiling_frames_pass(tb, sc.frames, &sc.sample, &sc.post,
                                         &sums[i].model_expected, &sums[i].model_realized, &e);
            if (s2 != SB_OK) {
#pragma omp critical
                if (i < failed_at) {
                    status = s2;
                    first = e;
                    failed_at = i;
                }
            }
        }
        if (mine == SB_OK)
            scratch_free(&sc);
    }
    if (status != SB_OK)
        *err = first;
    return status;
}

/* The per-sample sums added in sample order (the same for any thread count) into out's
 * accuracies. */
static void reduce_sums(const tables *tb, const sample_sums *sums, int64_t n_samples,
                        sb_ceiling *out)
{
    double expected = 0.0, realized = 0.0, p_true = 0.0, p_sq = 0.0, dev2 = 0.0;
    double model_expected = 0.0, model_realized = 0.0;
    double window[SB_CEILING_N_WINDOWS] = {0};
    int64_t elements = 0;
    for (int64_t i = 0; i < n_samples; i++) {
        expected += sums[i].expected;
        realized += sums[i].realized;
        p_true += sums[i].p_true;
        p_sq += sums[i].p_sq;
        model_expected += sums[i].model_expected;
        model_realized += sums[i].model_realized;
        double d = sums[i].realized - sums[i].expected;
        dev2 += d * d;
        for (int w = 0; w < SB_CEILING_N_WINDOWS; w++)
            window[w] += sums[i].window[w];
        elements += sums[i].elements;
    }
    double N = elements > 0 ? (double)elements : 1.0;
    out->expected_acc = expected / N;
    out->realized_acc = realized / N;
    out->expected_acc_se = sqrt(dev2) / N;
    /* zero and noise gaps: the frame predictor's window sum is its symbol-frame posterior
     * times the window length, so the ideal model is the ideal observer */
    out->bayes_model_acc = tb->grammar_gap ? model_expected / N : out->expected_acc;
    out->bayes_model_realized_acc = tb->grammar_gap ? model_realized / N : out->realized_acc;
    out->p_true_mean = p_true / N;
    out->p_sq_mean = p_sq / N;
    for (int w = 0; w < tb->n_windows; w++)
        out->window_acc[w] = window[w] / N;
    out->n_windows = tb->n_windows;
    out->n_elements = elements;
}

sb_status sb_ceiling_compute_with(const sb_task *task, const sb_ceiling_options *opt,
                                  sb_ceiling *out, sb_error *err)
{
    if (task == NULL || out == NULL) /* a public function (selectivbench.h) */
        return sb_error_set(err, SB_ERR_INVALID, "sb_ceiling_compute_with: %s is NULL",
                            task == NULL ? "task" : "out");
    memset(out, 0, sizeof *out);
    sb_ceiling_options o = opt != NULL ? *opt : sb_ceiling_options_default();
    sb_status st_threads = sb_threads_check(o.threads, "sb_ceiling_compute", err);
    if (st_threads != SB_OK)
        return st_threads;
    double t0 = sb_time_now();
    int64_t split_size = sb_task_split_size(task, o.split);
    if (o.samples < 0 || o.samples > split_size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--samples %lld: the %s split has %lld samples; use 1..%lld (0: all)",
                            (long long)o.samples, sb_split_name(o.split), (long long)split_size,
                            (long long)split_size);
    int64_t n_samples = o.samples > 0 ? o.samples : split_size;
    int64_t train_size = sb_task_split_size(task, SB_SPLIT_TRAIN);
    if (o.prior_samples < 0 || o.prior_samples > train_size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--prior_samples %lld: the training split has %lld samples; use "
                            "1..%lld (0: min(2000, all))",
                            (long long)o.prior_samples, (long long)train_size,
                            (long long)train_size);
    int64_t n_prior = o.prior_samples > 0                  ? o.prior_samples
                      : train_size < DEFAULT_PRIOR_SAMPLES ? train_size
                                                           : DEFAULT_PRIOR_SAMPLES;
    int threads = o.threads > 0 ? o.threads : omp_get_max_threads();

    tables tb;
    sb_status st = tables_init(&tb, task, o.split, err);
    if (st != SB_OK)
        return st;
    if ((st = estimate_prior(&tb, task, n_prior, threads, err)) != SB_OK) {
        tables_free(&tb);
        return st;
    }
    sample_sums *sums = sb_calloc((size_t)n_samples, sizeof *sums);
    if (sums == NULL) {
        tables_free(&tb);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for %lld samples",
                            (long long)n_samples);
    }
    sb_status status = sample_pass(&tb, task, o.split, n_samples, threads, sums, err);
    if (status != SB_OK) {
        sb_free(sums);
        tables_free(&tb);
        return status;
    }
    reduce_sums(&tb, sums, n_samples, out);
    out->n_samples = n_samples;
    out->prior_samples = n_prior;
    out->segmented = task->cfg.grammar_gap ? 1 : 0;
    out->seconds = sb_time_now() - t0;
    sb_free(sums);
    tables_free(&tb);
    return SB_OK;
}

/* ---- effective memory, hash, JSON -------------------------------------------------- */

double sb_ceiling_effective_memory(const sb_ceiling *c, double acc)
{
    if (isnan(acc))
        return (double)NAN;
    const double *a = c->window_acc;
    const int n_windows = c->n_windows > 0 ? c->n_windows : REFERENCE_WINDOWS;
    if (acc <= a[0])
        return 0.0;
    for (int w = 1; w < n_windows; w++) {
        if (acc > a[w])
            continue;
        double k0 = sb_ceiling_window_k[w - 1], k1 = sb_ceiling_window_k[w];
        double lo = a[w - 1] < acc ? a[w - 1] : acc; /* a non-monotone curve: clamp */
        double frac = a[w] > lo ? (acc - lo) / (a[w] - lo) : 1.0;
        if (w == 1)
            return k0 + frac * (k1 - k0); /* between 0 and 1: linear in k */
        return exp(log(k0) + frac * (log(k1) - log(k0)));
    }
    return (double)INFINITY;
}

double sb_ceiling_memory_demand(const sb_ceiling *c)
{
    return sb_ceiling_effective_memory(c, c->expected_acc - 0.01);
}

void sb_ceiling_hash(const sb_task_config *cfg, const sb_ceiling_options *opt, char out[17])
{
    const sb_ceiling_options o = opt != NULL ? *opt : sb_ceiling_options_default();
    const sb_grammar_config *gc = &cfg->grammar;
    char text[1024];
    /* everything the observer's numbers depend on; noise is left out on purpose (it never
     * hides a symbol), as are the sizes of splits beyond the scored and prior samples */
    snprintf(text, sizeof text,
             "ceiling v%d|V%d|amb%d|d%d|gs%d|seed%llu|td%.17g|tr%d-%d|te%d-%d|comb%d|"
             "gap%.17g-%.17g|dist%d|tdur%.17g|gg%d|gstart%d|gprob%.17g|ds%lld|ts%lld|"
             "prot%d|grng%d|split%d|n%lld|prior%lld",
             SB_CEILING_VERSION, gc->vocab, gc->amb, gc->amb_depth, gc->grammar_scale,
             (unsigned long long)gc->seed, gc->transition_density, cfg->train_seqlen_min,
             cfg->train_seqlen_max, cfg->test_seqlen_min, cfg->test_seqlen_max,
             cfg->combined_seq_length, cfg->train_gap_min, cfg->train_gap_max, (int)cfg->dist_dur,
             cfg->test_dur, cfg->grammar_gap, cfg->gap_start, cfg->gap_prob,
             (long long)cfg->dataset_size, (long long)cfg->test_size, (int)cfg->protocol,
             (int)cfg->gap_rng, (int)o.split, (long long)o.samples, (long long)o.prior_samples);
    if (cfg->walk_len > 0) /* the reference tasks keep their hashes */
        snprintf(text + strlen(text), sizeof text - strlen(text), "|walk%d", cfg->walk_len);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = text; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void sb_ceiling_write_json(const sb_ceiling *c, sb_json *j)
{
    sb_json_object_begin(j);
    sb_json_key(j, "expected_acc");
    sb_json_double(j, c->expected_acc);
    sb_json_key(j, "realized_acc");
    sb_json_double(j, c->realized_acc);
    sb_json_key(j, "expected_acc_se");
    sb_json_double(j, c->expected_acc_se);
    sb_json_key(j, "bayes_model_acc");
    sb_json_double(j, c->bayes_model_acc);
    sb_json_key(j, "bayes_model_realized_acc");
    sb_json_double(j, c->bayes_model_realized_acc);
    sb_json_key(j, "window_acc");
    sb_json_object_begin(j);
    const int n_windows = c->n_windows > 0 ? c->n_windows : REFERENCE_WINDOWS;
    for (int w = 0; w < n_windows; w++) {
        char key[16];
        snprintf(key, sizeof key, "%d", sb_ceiling_window_k[w]);
        sb_json_key(j, key);
        sb_json_double(j, c->window_acc[w]);
    }
    sb_json_object_end(j);
    sb_json_key(j, "p_true_mean");
    sb_json_double(j, c->p_true_mean);
    sb_json_key(j, "p_sq_mean");
    sb_json_double(j, c->p_sq_mean);
    sb_json_key(j, "n_samples");
    sb_json_int(j, c->n_samples);
    sb_json_key(j, "n_elements");
    sb_json_int(j, c->n_elements);
    sb_json_key(j, "prior_samples");
    sb_json_int(j, c->prior_samples);
    sb_json_key(j, "segmented");
    sb_json_bool(j, c->segmented);
    sb_json_key(j, "seconds");
    sb_json_double(j, c->seconds);
    sb_json_object_end(j);
}

static int json_number(json_t *obj, const char *key, double *v)
{
    json_t *x = json_object_get(obj, key);
    if (x == NULL || !json_is_number(x))
        return 0;
    *v = json_number_value(x);
    return 1;
}

/* A count (n_samples, ...) of the object: a number in [0, 2^53], so that the conversion is
 * exact and defined (a damaged cache may hold 1e300; tests/fuzz/fuzz_ceiling_json.c). */
static int json_count(json_t *obj, const char *key, int64_t *v)
{
    double d = 0.0;
    if (!json_number(obj, key, &d) || !(d >= 0.0 && d <= 9007199254740992.0))
        return 0;
    *v = (int64_t)d;
    return 1;
}

sb_status sb_ceiling_from_json(const char *text, sb_ceiling *c, sb_error *err)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (root == NULL || !json_is_object(root)) {
        json_decref(root);
        return sb_error_set(err, SB_ERR_INVALID, "cached ceiling is not a JSON object");
    }
    int ok = json_number(root, "expected_acc", &c->expected_acc) &&
             json_number(root, "realized_acc", &c->realized_acc) &&
             json_number(root, "expected_acc_se", &c->expected_acc_se);
    json_t *win = json_object_get(root, "window_acc");
    for (int w = 0; ok && w < REFERENCE_WINDOWS; w++) {
        char key[16];
        snprintf(key, sizeof key, "%d", sb_ceiling_window_k[w]);
        ok = json_is_object(win) && json_number(win, key, &c->window_acc[w]);
    }
    /* the windows past 32 of interleaved walks, in order while present */
    c->n_windows = REFERENCE_WINDOWS;
    while (ok && c->n_windows < SB_CEILING_N_WINDOWS) {
        char key[16];
        snprintf(key, sizeof key, "%d", sb_ceiling_window_k[c->n_windows]);
        if (!json_number(win, key, &c->window_acc[c->n_windows]))
            break;
        c->n_windows++;
    }
    /* optional: a missing or out-of-range count stays 0 */
    if (ok) {
        json_count(root, "n_samples", &c->n_samples);
        json_count(root, "n_elements", &c->n_elements);
        json_count(root, "prior_samples", &c->prior_samples);
        json_number(root, "seconds", &c->seconds);
    }
    c->bayes_model_acc = c->expected_acc;
    c->bayes_model_realized_acc = c->realized_acc;
    json_number(root, "bayes_model_acc", &c->bayes_model_acc);
    json_number(root, "bayes_model_realized_acc", &c->bayes_model_realized_acc);
    json_number(root, "p_true_mean", &c->p_true_mean);
    json_number(root, "p_sq_mean", &c->p_sq_mean);
    json_t *seg = json_object_get(root, "segmented");
    c->segmented = json_is_true(seg);
    json_decref(root);
    if (!ok)
        return sb_error_set(err, SB_ERR_INVALID,
                            "cached ceiling lacks expected_acc, realized_acc, expected_acc_se "
                            "or a window_acc entry");
    return SB_OK;
}

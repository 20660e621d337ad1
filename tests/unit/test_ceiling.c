/*
 * test_ceiling.c - the ideal observer against brute-force enumeration of every hidden path
 * on tiny grammars and against Monte-Carlo estimates on medium ones; the window curve, the
 * effective memory, thread independence, the cache hash and JSON, bad options.
 *
 * The brute force shares nothing with the filter: it lists every string the grammar can
 * emit with its probability (walk probability / acceptance probability), and for each
 * element sums, over every concatenation of strings that agrees with the observed symbols
 * (and distractors) up to that element, the probability by the state at the element.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "task/ceiling.h"
#include "task/task.h"

/* ---- brute force ------------------------------------------------------------------------ */

#define MAX_STRINGS 200000
#define MAX_LEN 16

typedef struct string_list {
    int n;
    int len[MAX_STRINGS];
    uint16_t st[MAX_STRINGS][MAX_LEN];
    double p[MAX_STRINGS];
} string_list;

static string_list strings;

static void walk(const sb_grammar *g, uint16_t *path, int len, double p, int lo, int hi,
                 double *accepted)
{
    int s = path[len - 1];
    if (s == g->end_state) {
        if (len >= lo && len <= hi) {
            assert_true(strings.n < MAX_STRINGS);
            memcpy(strings.st[strings.n], path, (size_t)len * sizeof *path);
            strings.len[strings.n] = len;
            strings.p[strings.n++] = p;
            *accepted += p;
        }
        return;
    }
    if (len >= hi)
        return;
    int k = g->succ_offset[s + 1] - g->succ_offset[s];
    for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++) {
        path[len] = g->succ[e];
        walk(g, path, len + 1, p / k, lo, hi, accepted);
    }
}

static void list_strings(const sb_grammar *g, int lo, int hi)
{
    assert_true(hi <= MAX_LEN);
    strings.n = 0;
    double accepted = 0.0;
    uint16_t path[MAX_LEN];
    for (int i = 0; i < SB_START_STATES; i++) {
        path[0] = (uint16_t)g->start_states[i];
        walk(g, path, 1, 0.25, lo, hi, &accepted);
    }
    for (int i = 0; i < strings.n; i++)
        strings.p[i] /= accepted; /* rejection sampling: renormalise over accepted strings */
}

/* P(element k's observed gap | its state s) for non-grammatical gaps, from the generative
 * description: from gap_start on, a gap with probability q, of n frames, each a uniform
 * class the state forbids; none when it forbids nothing. */
static double brute_gap(const sb_task *task, int k, int s, int gap, const uint8_t *cls)
{
    const sb_task_config *c = &task->cfg;
    if (!c->grammar_gap || k < c->gap_start)
        return 1.0;
    int n = (int)rint(sb_task_test_duration(task) / SB_TIMESTEP);
    uint64_t forbidden = task->grammar->forbidden_classes[s];
    int m = 0;
    for (int b = 0; b < 64; b++)
        m += (int)((forbidden >> b) & 1u);
    double q = c->gap_prob;
    if (gap == 0)
        return (1.0 - q) + q * ((n == 0 || m == 0) ? 1.0 : 0.0);
    if (gap != n || m == 0)
        return 0.0;
    double p = q;
    for (int r = 0; r < gap; r++)
        p *= ((forbidden >> cls[r]) & 1u) ? 1.0 / m : 0.0;
    return p;
}

typedef struct observed {
    const sb_task *task;
    const sb_sample *s;
    const int *dist_start; /* [E] first distractor of each element */
    int target;            /* the element whose posterior is summed */
    double *post;          /* [n_states] */
} observed;

static void concat(const observed *o, int pos, double p)
{
    const sb_grammar *g = o->task->grammar;
    for (int i = 0; i < strings.n; i++) {
        double q = p * strings.p[i];
        int ok = 1;
        for (int r = 0; r < strings.len[i] && pos + r <= o->target && ok; r++) {
            int k = pos + r, s = strings.st[i][r];
            if (g->state_class[s] != g->state_class[o->s->state[k]]) {
                ok = 0;
                break;
            }
            q *= brute_gap(o->task, k, s, o->s->gap[k], o->s->gap_class + o->dist_start[k]);
        }
        if (!ok || q == 0.0)
            continue;
        if (pos + strings.len[i] > o->target)
            o->post[strings.st[i][o->target - pos]] += q;
        else
            concat(o, pos + strings.len[i], q);
    }
}

typedef struct brute_result {
    double expected, realized, p_true, p_sq;
    int64_t elements;
} brute_result;

static void brute_force(const sb_task *task, int64_t n_samples, brute_result *r)
{
    const sb_grammar *g = task->grammar;
    list_strings(g, task->cfg.test_seqlen_min, task->cfg.test_seqlen_max);
    memset(r, 0, sizeof *r);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    double *post = calloc((size_t)g->n_states, sizeof *post);
    int *dist_start = calloc((size_t)task->n_elements[SB_SPLIT_TEST], sizeof *dist_start);
    for (int64_t i = 0; i < n_samples; i++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TEST, i, &s, &err), SB_OK);
        for (int k = 0, d = 0; k < s.n_elements; k++) {
            dist_start[k] = d;
            d += task->cfg.grammar_gap ? s.gap[k] : 0;
        }
        for (int e = 0; e < s.n_elements; e++) {
            memset(post, 0, (size_t)g->n_states * sizeof *post);
            observed o = {task, &s, dist_start, e, post};
            concat(&o, 0, 1.0);
            double z = 0.0;
            for (int q = 0; q < g->n_states; q++)
                z += post[q];
            assert_true(z > 0.0);
            int best = 0;
            double sq = 0.0;
            for (int q = 0; q < g->n_states; q++) {
                post[q] /= z;
                sq += post[q] * post[q];
                if (post[q] > post[best] ||
                    (post[q] == post[best] && g->state_id[q] < g->state_id[best]))
                    best = q;
            }
            r->expected += post[best];
            r->realized += best == s.state[e];
            r->p_true += post[s.state[e]];
            r->p_sq += sq;
            r->elements++;
        }
    }
    r->expected /= (double)r->elements;
    r->realized /= (double)r->elements;
    r->p_true /= (double)r->elements;
    r->p_sq /= (double)r->elements;
    free(post);
    free(dist_start);
    sb_sample_free(&s);
}

/* ---- brute force, frame level: the owner of each frame, segmentation unknown ----------- */

typedef struct frame_observed {
    const sb_task *task;
    const int *fc; /* [T] class shown by each frame */
    int F;         /* the frame whose owner is summed */
    double *post;  /* [n_states] */
} frame_observed;

static void frames_string(const frame_observed *o, int pos, int k, double p);

/* Element k = str[i] with its symbol at frame pos: every gap it may draw. */
static void frames_element(const frame_observed *o, int si, int i, int pos, int k, double p)
{
    const sb_task *task = o->task;
    const sb_grammar *g = task->grammar;
    if (i == strings.len[si]) {
        frames_string(o, pos, k, p);
        return;
    }
    int s = strings.st[si][i];
    if (g->state_class[s] != o->fc[pos])
        return;
    uint64_t forbidden = g->forbidden_classes[s];
    int m = 0;
    for (int b = 0; b < 64; b++)
        m += (int)((forbidden >> b) & 1u);
    /* the gap options of element k: none, or a drawn gap of n frames (test: n fixed) */
    const sb_task_config *c = &task->cfg;
    int n_drawn = (int)rint(sb_task_test_duration(task) / SB_TIMESTEP);
    double opt_p[2] = {1.0, 0.0};
    int opt_frames[2] = {0, 0};
    if (k >= c->gap_start) {
        opt_p[0] = 1.0 - c->gap_prob;
        opt_p[1] = c->gap_prob;
        opt_frames[1] = m > 0 ? n_drawn : 0;
    }
    for (int op = 0; op < 2; op++) {
        if (opt_p[op] == 0.0)
            continue;
        double q = p * opt_p[op];
        int gap = opt_frames[op];
        for (int r = 1; r <= gap && pos + r <= o->F && q > 0.0; r++)
            q *= ((forbidden >> o->fc[pos + r]) & 1u) ? 1.0 / m : 0.0;
        if (q == 0.0)
            continue;
        if (o->F <= pos + gap)
            o->post[s] += q; /* frame F belongs to this element */
        else
            frames_element(o, si, i + 1, pos + gap + 1, k + 1, q);
    }
}

static void frames_string(const frame_observed *o, int pos, int k, double p)
{
    for (int i = 0; i < strings.n; i++)
        frames_element(o, i, 0, pos, k, p * strings.p[i]);
}

/* The ideal model through the window metric, by brute force: [lo, hi] brackets the
 * expected accuracy over the decisions that tie within 1e-9, likewise the realized one. */
static void brute_force_frames(const sb_task *task, int64_t n_samples, double *exp_lo,
                               double *exp_hi, double *real_lo, double *real_hi)
{
    const sb_grammar *g = task->grammar;
    list_strings(g, task->cfg.test_seqlen_min, task->cfg.test_seqlen_max);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    const int n = g->n_states;
    double *post = calloc((size_t)n, sizeof *post), *wsum = calloc((size_t)n, sizeof *wsum);
    double *seg = calloc((size_t)n, sizeof *seg);
    int *fc = calloc(4096, sizeof *fc);
    int *dist_start = calloc((size_t)task->n_elements[SB_SPLIT_TEST], sizeof *dist_start);
    int64_t elements = 0;
    *exp_lo = *exp_hi = *real_lo = *real_hi = 0.0;
    for (int64_t i = 0; i < n_samples; i++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TEST, i, &s, &err), SB_OK);
        assert_true(s.n_frames <= 4096);
        for (int k = 0, f = 0, d = 0; k < s.n_elements; k++) {
            dist_start[k] = d;
            fc[f++] = g->state_class[s.state[k]];
            for (int r = 0; r < s.gap[k]; r++)
                fc[f++] = s.gap_class[d++];
        }
        for (int k = 0; k < s.n_elements; k++) {
            memset(wsum, 0, (size_t)n * sizeof *wsum);
            for (int F = s.frame_start[k]; F <= s.frame_start[k] + s.gap[k]; F++) {
                memset(post, 0, (size_t)n * sizeof *post);
                frame_observed o = {task, fc, F, post};
                frames_string(&o, 0, 0, 1.0);
                double z = 0.0;
                for (int q = 0; q < n; q++)
                    z += post[q];
                assert_true(z > 0.0);
                for (int q = 0; q < n; q++)
                    wsum[q] += post[q] / z;
            }
            /* the segmented posterior of element k scores the decision */
            memset(seg, 0, (size_t)n * sizeof *seg);
            observed so = {task, &s, dist_start, k, seg};
            concat(&so, 0, 1.0);
            double z = 0.0, best = -1.0;
            for (int q = 0; q < n; q++) {
                z += seg[q];
                best = wsum[q] > best ? wsum[q] : best;
            }
            double e_lo = 2.0, e_hi = -1.0, r_lo = 2.0, r_hi = -1.0;
            for (int q = 0; q < n; q++) {
                if (wsum[q] < best - 1e-9)
                    continue;
                double e = seg[q] / z, r = q == s.state[k];
                e_lo = e < e_lo ? e : e_lo;
                e_hi = e > e_hi ? e : e_hi;
                r_lo = r < r_lo ? r : r_lo;
                r_hi = r > r_hi ? r : r_hi;
            }
            *exp_lo += e_lo, *exp_hi += e_hi, *real_lo += r_lo, *real_hi += r_hi;
            elements++;
        }
    }
    *exp_lo /= (double)elements, *exp_hi /= (double)elements;
    *real_lo /= (double)elements, *real_hi /= (double)elements;
    free(post), free(wsum), free(seg), free(fc), free(dist_start);
    sb_sample_free(&s);
}

/* A tiny task configuration: vocab V (V-1 letters), amb ambiguous letters of depth d,
 * strings of length [lo, hi], test samples of hi elements. */
static sb_task_config tiny_config(int V, int amb, int d, uint64_t seed, int lo, int hi,
                                  int64_t test_size)
{
    sb_task_config cfg = sb_task_config_default();
    cfg.grammar.vocab = V;
    cfg.grammar.amb = amb;
    cfg.grammar.amb_depth = d;
    cfg.grammar.seed = seed;
    cfg.train_seqlen_min = cfg.test_seqlen_min = lo;
    cfg.train_seqlen_max = cfg.test_seqlen_max = hi;
    cfg.combined_seq_length = 0;
    cfg.dataset_size = 300;
    cfg.test_size = test_size;
    return cfg;
}

static sb_task *make_task(const sb_task_config *cfg)
{
    sb_task *task = NULL;
    sb_error err = {0};
    if (sb_task_create(cfg, &task, &err) != SB_OK)
        fail_msg("task: %s", err.msg);
    return task;
}

static sb_ceiling compute(const sb_task *task, int64_t samples, int threads)
{
    sb_ceiling_options o = sb_ceiling_options_default();
    o.samples = samples;
    o.threads = threads;
    sb_ceiling c;
    sb_error err = {0};
    if (sb_ceiling_compute_with(task, &o, &c, &err) != SB_OK)
        fail_msg("ceiling: %s", err.msg);
    return c;
}

static void check_against_brute_force(const sb_task_config *cfg, int64_t samples)
{
    sb_task *task = make_task(cfg);
    sb_ceiling c = compute(task, samples, 1);
    brute_result b;
    brute_force(task, samples, &b);
    assert_int_equal(c.n_elements, b.elements);
    if (fabs(c.expected_acc - b.expected) > 1e-12 || fabs(c.realized_acc - b.realized) > 1e-12 ||
        fabs(c.p_true_mean - b.p_true) > 1e-12 || fabs(c.p_sq_mean - b.p_sq) > 1e-12)
        fail_msg("V%d amb%d d%d seed %llu len %d-%d gap %d: filter %.15f %.15f %.15f %.15f, "
                 "brute force %.15f %.15f %.15f %.15f",
                 cfg->grammar.vocab, cfg->grammar.amb, cfg->grammar.amb_depth,
                 (unsigned long long)cfg->grammar.seed, cfg->test_seqlen_min, cfg->test_seqlen_max,
                 cfg->grammar_gap, c.expected_acc, c.realized_acc, c.p_true_mean, c.p_sq_mean,
                 b.expected, b.realized, b.p_true, b.p_sq);
    /* the posterior is not trivial on these tasks: the check has something to check */
    assert_true(b.expected < 0.99);
    for (int w = 0; w < SB_CEILING_N_WINDOWS; w++)
        assert_true(c.window_acc[w] <= c.expected_acc + 1e-12);
    sb_task_free(task);
}

/* Zero gaps: several grammars, the length rule binding at both ends. */
static void test_brute_force_plain(void **state)
{
    (void)state;
    static const int grid[][6] = {
        /* V, amb, d, seed, lo, hi */
        {5, 2, 2, 1, 1, 7}, {5, 2, 2, 1, 4, 8}, {5, 2, 3, 2, 2, 7},
        {4, 2, 2, 3, 1, 8}, {6, 3, 2, 4, 3, 7}, {5, 1, 3, 5, 1, 9},
    };
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        sb_task_config cfg = tiny_config(grid[i][0], grid[i][1], grid[i][2], (uint64_t)grid[i][3],
                                         grid[i][4], grid[i][5], 12);
        check_against_brute_force(&cfg, 12);
    }
}

/* Non-grammatical gaps: the distractors of an element inform about its state. */
static void test_brute_force_distractors(void **state)
{
    (void)state;
    static const int grid[][6] = {
        {5, 2, 2, 1, 1, 7},
        {6, 3, 2, 4, 2, 7},
        {5, 2, 3, 2, 1, 7},
    };
    static const double durations[] = {0.1, 0.2};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        for (size_t d = 0; d < 2; d++) {
            sb_task_config cfg = tiny_config(grid[i][0], grid[i][1], grid[i][2],
                                             (uint64_t)grid[i][3], grid[i][4], grid[i][5], 12);
            cfg.grammar_gap = 1;
            cfg.gap_start = 2;
            cfg.gap_prob = 0.5;
            cfg.train_gap_min = cfg.train_gap_max = durations[d];
            cfg.test_dur = durations[d];
            check_against_brute_force(&cfg, 12);
            /* the ideal model, not told which frames are distractors */
            sb_task *task = make_task(&cfg);
            sb_ceiling c = compute(task, 12, 1);
            double e_lo, e_hi, r_lo, r_hi;
            brute_force_frames(task, 12, &e_lo, &e_hi, &r_lo, &r_hi);
            if (!(c.bayes_model_acc >= e_lo - 1e-12 && c.bayes_model_acc <= e_hi + 1e-12 &&
                  c.bayes_model_realized_acc >= r_lo - 1e-12 &&
                  c.bayes_model_realized_acc <= r_hi + 1e-12))
                fail_msg("grid %zu dur %g: ideal model %.15f / %.15f, brute force [%.15f, "
                         "%.15f] / [%.15f, %.15f]",
                         i, durations[d], c.bayes_model_acc, c.bayes_model_realized_acc, e_lo, e_hi,
                         r_lo, r_hi);
            assert_true(c.bayes_model_acc <= c.expected_acc + 1e-12);
            printf("  grid %zu dur %g: bayes_model_acc %.6f in [%.6f, %.6f], expected_acc "
                   "%.6f\n",
                   i, durations[d], c.bayes_model_acc, e_lo, e_hi, c.expected_acc);
            sb_task_free(task);
        }
    }
}

/* Medium grammars, too large to enumerate: the realized accuracy of the Bayes decision is
 * a Monte-Carlo estimate of the expected one, and a calibrated posterior gives the true
 * state the probability it expects (mean p(true) = mean sum p^2). A filter that got the
 * length rule or the distractors wrong is miscalibrated and fails these. */
static void test_monte_carlo(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 30, 3000);
        if (variant == 1) {
            cfg.grammar.amb_depth = 10;
            cfg.test_seqlen_min = cfg.train_seqlen_min = 12;
        }
        if (variant == 2) {
            cfg.grammar_gap = 1;
            cfg.gap_start = 3;
            cfg.gap_prob = 0.3;
        }
        sb_task *task = make_task(&cfg);
        sb_ceiling c = compute(task, 0, 2);
        double gap = fabs(c.realized_acc - c.expected_acc);
        double cal = fabs(c.p_true_mean - c.p_sq_mean);
        if (gap > 4.0 * c.expected_acc_se || cal > 4.0 * c.expected_acc_se + 1e-3)
            fail_msg("variant %d: expected %.5f realized %.5f (se %.5f), p_true %.5f p_sq %.5f",
                     variant, c.expected_acc, c.realized_acc, c.expected_acc_se, c.p_true_mean,
                     c.p_sq_mean);
        assert_true(c.expected_acc > 0.3 && c.expected_acc < 0.995);
        /* the ideal model's decisions: realized around expected, below the bound */
        if (fabs(c.bayes_model_realized_acc - c.bayes_model_acc) > 4.0 * c.expected_acc_se + 1e-3)
            fail_msg("variant %d: ideal model expected %.5f realized %.5f", variant,
                     c.bayes_model_acc, c.bayes_model_realized_acc);
        assert_true(c.bayes_model_acc <= c.expected_acc + 1e-12);
        assert_true(c.expected_acc_se > 0.0);
        sb_task_free(task);
    }
}

/* The window curve: from the prior floor up to the ideal observer, never above it. */
static void test_window_curve(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 60, 400);
    sb_task *task = make_task(&cfg);
    sb_ceiling c = compute(task, 0, 2);
    for (int w = 0; w < SB_CEILING_N_WINDOWS; w++)
        assert_true(c.window_acc[w] <= c.expected_acc + 1e-12);
    assert_true(c.window_acc[0] < c.window_acc[1]);
    assert_true(c.window_acc[1] < c.window_acc[3]);
    assert_true(c.window_acc[3] < c.window_acc[6]);
    /* the prior's choice is one state: its accuracy is that state's share at most */
    assert_true(c.window_acc[0] < 0.5);
    /* 32 elements of history get close to everything */
    assert_true(c.expected_acc - c.window_acc[6] < 0.05);
    sb_task_free(task);
}

static void test_threads_identical(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 40, 300);
    cfg.grammar_gap = 1;
    cfg.gap_start = 3;
    cfg.gap_prob = 0.3;
    sb_task *task = make_task(&cfg);
    sb_ceiling a = compute(task, 0, 1), b = compute(task, 0, 2);
    assert_true(a.expected_acc == b.expected_acc && a.realized_acc == b.realized_acc);
    assert_memory_equal(a.window_acc, b.window_acc, sizeof a.window_acc);
    assert_true(a.expected_acc_se == b.expected_acc_se);
    sb_task_free(task);
}

static void test_effective_memory(void **state)
{
    (void)state;
    sb_ceiling c;
    memset(&c, 0, sizeof c);
    const double curve[7] = {0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9};
    memcpy(c.window_acc, curve, sizeof curve);
    c.n_windows = 7;
    assert_true(sb_ceiling_effective_memory(&c, 0.05) == 0.0);
    assert_true(sb_ceiling_effective_memory(&c, 0.1) == 0.0);
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.15) - 0.5) < 1e-12); /* linear in k */
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.2) - 1.0) < 1e-12);
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.25) - sqrt(2.0)) < 1e-12); /* log k */
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.4) - sqrt(8.0)) < 1e-12);
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.9) - 32.0) < 1e-12);
    assert_true(isinf(sb_ceiling_effective_memory(&c, 0.95)));
    assert_true(isnan(sb_ceiling_effective_memory(&c, (double)NAN)));
    /* a dip at k = 4: the curve is first at 0.4 between k = 4 and 8, interpolated from the
     * dip */
    c.window_acc[3] = 0.25;
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.28) - pow(2.0, 0.8)) < 1e-12);
    assert_true(fabs(sb_ceiling_effective_memory(&c, 0.4) - 4.0 * pow(2.0, 1.0 / 3.0)) < 1e-12);
}

static void test_json_and_hash(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 30, 100);
    sb_task *task = make_task(&cfg);
    sb_ceiling c = compute(task, 0, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_ceiling_write_json(&c, &j);
    fclose(f);
    sb_ceiling back;
    sb_error err = {0};
    assert_int_equal(sb_ceiling_from_json(buf, &back, &err), SB_OK);
    assert_true(back.expected_acc == c.expected_acc && back.realized_acc == c.realized_acc);
    assert_memory_equal(back.window_acc, c.window_acc, sizeof c.window_acc);
    assert_int_equal(back.n_elements, c.n_elements);
    free(buf);
    assert_int_equal(sb_ceiling_from_json("{\"expected_acc\": 1}", &back, &err), SB_ERR_INVALID);
    assert_int_equal(sb_ceiling_from_json("not json", &back, &err), SB_ERR_INVALID);

    char h1[17], h2[17], h3[17];
    sb_ceiling_options o = sb_ceiling_options_default();
    sb_ceiling_hash(&cfg, &o, h1);
    sb_ceiling_hash(&cfg, &o, h2);
    assert_string_equal(h1, h2);
    cfg.grammar.amb_depth = 7;
    sb_ceiling_hash(&cfg, &o, h3);
    assert_string_not_equal(h1, h3);
    cfg.grammar.amb_depth = 6;
    o.samples = 10;
    sb_ceiling_hash(&cfg, &o, h3);
    assert_string_not_equal(h1, h3);
    sb_task_free(task);
}

static void test_bad_options(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 30, 100);
    sb_task *task = make_task(&cfg);
    sb_ceiling_options o = sb_ceiling_options_default();
    sb_ceiling c;
    sb_error err = {0};
    o.samples = 101;
    assert_int_equal(sb_ceiling_compute_with(task, &o, &c, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "100 samples"));
    o.samples = -1;
    assert_int_equal(sb_ceiling_compute_with(task, &o, &c, &err), SB_ERR_INVALID);
    o.samples = 0;
    o.prior_samples = 301;
    assert_int_equal(sb_ceiling_compute_with(task, &o, &c, &err), SB_ERR_INVALID);
    sb_task_free(task);
}

/* ---- interleaved walks ------------------------------------------------------------------ */

/* The walks of a sample are independent and the schedule does not depend on them, so the
 * exact posterior of an element is its own walk's: the brute force of that walk alone (its
 * elements as a sample of their own, enumerated as above). Fills post[E][n_states]. */
static void brute_walk_posteriors(const sb_task *task, const sb_sample *s, double *post)
{
    const sb_grammar *g = task->grammar;
    const int E = s->n_elements, n = g->n_states;
    sb_sample w = {0};
    w.state = calloc((size_t)E, sizeof *w.state);
    w.gap = calloc((size_t)E, sizeof *w.gap);
    w.gap_class = calloc(1, 1);
    int *P = calloc((size_t)E, sizeof *P), *dist_start = calloc((size_t)E, sizeof *dist_start);
    for (int j = 0; j < task->n_walks[SB_SPLIT_TEST]; j++) {
        int m = 0;
        for (int k = 0; k < E; k++)
            if (s->walk[k] == j) {
                P[m] = k;
                w.state[m] = s->state[k];
                w.gap[m++] = s->gap[k];
            }
        w.n_elements = m;
        for (int t = 0; t < m; t++) {
            double *row = post + (size_t)P[t] * (size_t)n;
            memset(row, 0, (size_t)n * sizeof *row);
            observed o = {task, &w, dist_start, t, row};
            concat(&o, 0, 1.0);
            double z = 0.0;
            for (int q = 0; q < n; q++)
                z += row[q];
            assert_true(z > 0.0);
            for (int q = 0; q < n; q++)
                row[q] /= z;
        }
    }
    free(w.state), free(w.gap), free(w.gap_class), free(P), free(dist_start);
}

/* The window observer of the definition (docs/reading-results.md), dense and without the
 * filter's code: of the last k elements it sees those of element e's walk; it starts from
 * the prior restricted to the first one's letter, or from the start states when the window
 * reaches the sample's first element, steps through the grammar without the length rule
 * (after '#' from the start states again) and keeps the states that show each letter.
 * Writes its normalised belief into b[n_states]. */
static void window_belief(const sb_task *task, const sb_sample *s, const double *prior, int e,
                          int k, double *b, double *nb)
{
    const sb_grammar *g = task->grammar;
    const int n = g->n_states, j = s->walk[e];
    const int known = e - k + 1 <= 0;
    int prev = -1;
    for (int i = known ? 0 : e - k + 1; i <= e; i++) {
        if (s->walk[i] != j)
            continue;
        const int c = g->state_class[s->state[i]];
        memset(nb, 0, (size_t)n * sizeof *nb);
        if (prev < 0 && !known) {
            for (int q = 0; q < n; q++)
                nb[q] = g->state_class[q] == c ? prior[q] : 0.0;
        } else if (prev < 0 || prev == g->end_state) {
            for (int r = 0; r < SB_START_STATES; r++)
                if (g->state_class[g->start_states[r]] == c)
                    nb[g->start_states[r]] += 0.25;
        } else {
            for (int q = 0; q < n; q++)
                for (int x = g->succ_offset[q]; b[q] > 0.0 && x < g->succ_offset[q + 1]; x++)
                    if (g->state_class[g->succ[x]] == c)
                        nb[g->succ[x]] += b[q] * g->out_prob[q];
        }
        double z = 0.0;
        for (int q = 0; q < n; q++)
            z += nb[q];
        if (!(z > 0.0)) /* what it saw is impossible in its model: it starts afresh */
            for (int q = 0; q < n; q++)
                z += nb[q] = g->state_class[q] == c ? prior[q] : 0.0;
        for (int q = 0; q < n; q++)
            b[q] = nb[q] / z;
        prev = s->state[i];
    }
}

/* Exact posteriors by brute force, window observers by their definition: expected_acc and
 * every window's accuracy of a walk task, the windows as [lo, hi] over the observer's
 * near-ties (an argmax a float rounding could flip). */
static void check_walks_against_brute_force(const sb_task_config *cfg, int64_t samples)
{
    sb_task *task = make_task(cfg);
    sb_ceiling c = compute(task, samples, 1);
    const sb_grammar *g = task->grammar;
    const int n = g->n_states, E = task->n_elements[SB_SPLIT_TEST];
    list_strings(g, cfg->test_seqlen_min, cfg->test_seqlen_max);
    /* the observers' prior: the state counts of the first min(2000, all) training samples */
    double *prior = calloc((size_t)n, sizeof *prior);
    sb_sample s;
    sb_error err = {0};
    assert_int_equal(sb_sample_alloc(task, &s, &err), SB_OK);
    double total = 0.0;
    for (int64_t i = 0; i < cfg->dataset_size && i < 2000; i++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TRAIN, i, &s, &err), SB_OK);
        for (int k = 0; k < s.n_elements; k++, total += 1.0)
            prior[s.state[k]] += 1.0;
    }
    for (int q = 0; q < n; q++)
        prior[q] /= total;
    double *post = calloc((size_t)E * (size_t)n, sizeof *post);
    double *b = calloc((size_t)n, sizeof *b), *nb = calloc((size_t)n, sizeof *nb);
    double expected = 0.0, lo[SB_CEILING_N_WINDOWS] = {0}, hi[SB_CEILING_N_WINDOWS] = {0};
    int64_t elements = 0;
    for (int64_t i = 0; i < samples; i++) {
        assert_int_equal(sb_task_sample(task, SB_SPLIT_TEST, i, &s, &err), SB_OK);
        brute_walk_posteriors(task, &s, post);
        for (int e = 0; e < E; e++, elements++) {
            const double *row = post + (size_t)e * (size_t)n;
            double best = 0.0;
            for (int q = 0; q < n; q++)
                best = row[q] > best ? row[q] : best;
            expected += best;
            for (int w = 1; w < c.n_windows; w++) {
                window_belief(task, &s, prior, e, sb_ceiling_window_k[w], b, nb);
                double top = 0.0, l = 2.0, h = -1.0;
                for (int q = 0; q < n; q++)
                    top = b[q] > top ? b[q] : top;
                for (int q = 0; q < n; q++)
                    if (b[q] >= top * (1.0 - 1e-9)) {
                        l = row[q] < l ? row[q] : l;
                        h = row[q] > h ? row[q] : h;
                    }
                lo[w] += l;
                hi[w] += h;
            }
        }
    }
    assert_int_equal(c.n_elements, elements);
    double N = (double)elements;
    if (fabs(c.expected_acc - expected / N) > 1e-12)
        fail_msg("walk_len %d: filter %.15f, brute force %.15f", cfg->walk_len, c.expected_acc,
                 expected / N);
    for (int w = 1; w < c.n_windows; w++)
        if (!(c.window_acc[w] >= lo[w] / N - 1e-12 && c.window_acc[w] <= hi[w] / N + 1e-12))
            fail_msg("walk_len %d, window %d: %.15f, by definition [%.15f, %.15f]", cfg->walk_len,
                     sb_ceiling_window_k[w], c.window_acc[w], lo[w] / N, hi[w] / N);
    /* something to check: several walks, a posterior that is not trivial, a window curve
     * that climbs */
    assert_true(task->n_walks[SB_SPLIT_TEST] >= 2);
    assert_true(expected / N < 0.99);
    printf("  walk_len %d: %d walks, expected %.4f, windows k=1 %.4f k=4 %.4f\n", cfg->walk_len,
           task->n_walks[SB_SPLIT_TEST], c.expected_acc, c.window_acc[1], c.window_acc[3]);
    assert_true(c.window_acc[1] < c.expected_acc - 0.02);
    free(prior), free(post), free(b), free(nb);
    sb_sample_free(&s);
    sb_task_free(task);
}

/* Interleaved walks on tiny grammars: two and three walks, the length rule binding. */
static void test_walks_brute_force(void **state)
{
    (void)state;
    static const int grid[][7] = {
        /* V, amb, d, seed, lo, hi, walk_len */
        {5, 2, 2, 1, 1, 7, 4},
        {5, 2, 3, 2, 2, 7, 3},
        {6, 3, 2, 4, 3, 7, 4},
        {5, 1, 3, 5, 1, 9, 5},
    };
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        sb_task_config cfg = tiny_config(grid[i][0], grid[i][1], grid[i][2], (uint64_t)grid[i][3],
                                         grid[i][4], grid[i][5], 8);
        cfg.walk_len = grid[i][6];
        check_walks_against_brute_force(&cfg, 8);
    }
}

/* One walk (walk_len >= the sample): the reference task's samples, so its ideal observer
 * and window curve, through the walks' window pass. */
static void test_walks_one_walk_is_reference(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 30, 200);
    sb_task *ref = make_task(&cfg);
    cfg.walk_len = 30;
    sb_task *one = make_task(&cfg);
    assert_int_equal(one->n_walks[SB_SPLIT_TEST], 1);
    sb_ceiling a = compute(ref, 0, 2), b = compute(one, 0, 2);
    assert_true(a.expected_acc == b.expected_acc && a.realized_acc == b.realized_acc);
    assert_int_equal(a.n_windows, 7);
    assert_int_equal(b.n_windows, 7); /* k = 32 covers the 30 elements */
    for (int w = 0; w < 7; w++)
        if (fabs(a.window_acc[w] - b.window_acc[w]) > 1e-12)
            fail_msg("window %d: reference %.15f, one walk %.15f", w, a.window_acc[w],
                     b.window_acc[w]);
    sb_task_free(ref);
    sb_task_free(one);
}

/* A medium walk task: the realized accuracy around the expected one, a calibrated posterior
 * (Monte Carlo: a filter that mixed the walks up fails it), one thread as two. */
static void test_walks_monte_carlo(void **state)
{
    (void)state;
    sb_task_config cfg = tiny_config(13, 8, 6, 7, 5, 60, 2000);
    cfg.walk_len = 15;
    sb_task *task = make_task(&cfg);
    sb_ceiling c = compute(task, 0, 2), one = compute(task, 0, 1);
    assert_true(c.expected_acc == one.expected_acc);
    assert_memory_equal(c.window_acc, one.window_acc, sizeof c.window_acc);
    double gap = fabs(c.realized_acc - c.expected_acc);
    double cal = fabs(c.p_true_mean - c.p_sq_mean);
    if (gap > 4.0 * c.expected_acc_se || cal > 4.0 * c.expected_acc_se + 1e-3)
        fail_msg("walks: expected %.5f realized %.5f (se %.5f), p_true %.5f p_sq %.5f",
                 c.expected_acc, c.realized_acc, c.expected_acc_se, c.p_true_mean, c.p_sq_mean);
    assert_int_equal(c.n_windows, 8); /* up to k = 64, past the 60 elements */
    for (int w = 0; w < c.n_windows; w++)
        assert_true(c.window_acc[w] <= c.expected_acc + 1e-12);
    sb_task_free(task);
}

/* The memory demand grows with the length at a fixed walk_len (issue 37's acceptance, on a
 * grammar of the lite grids: 12 ambiguous letters of depth 12): the window that reaches the
 * ceiling grows at least 8-fold from 25 to 400 elements, and at 400 the observer of the last
 * 32 elements is 0.2 or more below the ceiling. */
static void test_walks_demand_grows(void **state)
{
    (void)state;
    double demand[2], below32 = 0.0;
    const int lengths[2] = {25, 400};
    for (int i = 0; i < 2; i++) {
        sb_task_config cfg = tiny_config(13, 12, 12, 1, 1, lengths[i], 100);
        cfg.walk_len = 25;
        cfg.dataset_size = 400;
        sb_task *task = make_task(&cfg);
        sb_ceiling c = compute(task, 0, 2);
        demand[i] = sb_ceiling_memory_demand(&c);
        below32 = c.expected_acc - c.window_acc[6];
        printf("  length %d: %d walks, ceiling %.4f, k=32 %.4f, demand %.1f\n", lengths[i],
               task->n_walks[SB_SPLIT_TEST], c.expected_acc, c.window_acc[6], demand[i]);
        sb_task_free(task);
    }
    assert_true(isfinite(demand[1]));
    assert_true(demand[1] >= 8.0 * demand[0]);
    assert_true(below32 >= 0.2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force_plain),
        cmocka_unit_test(test_brute_force_distractors),
        cmocka_unit_test(test_monte_carlo),
        cmocka_unit_test(test_window_curve),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_effective_memory),
        cmocka_unit_test(test_json_and_hash),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_walks_brute_force),
        cmocka_unit_test(test_walks_one_walk_is_reference),
        cmocka_unit_test(test_walks_monte_carlo),
        cmocka_unit_test(test_walks_demand_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

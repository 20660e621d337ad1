/*
 * ceiling_frames.c - the frame-level predictor of tasks with non-grammatical gaps: the
 * exact posterior, at every frame, of the state of the element the frame belongs to,
 * given every frame so far, without being told which frames are distractors. This is
 * what a model trained with cross-entropy converges to with unlimited capacity and data;
 * put through the accuracy metric (sum over an element's window, argmax) it gives the
 * accuracy of that ideal model (sb_ceiling.bayes_model_acc).
 *
 * Hidden variables at a frame: the owner element's state s, its position t in its string
 * and r, the number of its distractor frames still to come. At an element's symbol frame
 * its gap is drawn: from frame gap_start on (before it, frames and elements coincide, so
 * the element index rule is a frame index rule), with probability gap_prob a gap whose
 * length follows the split's duration rule, empty when s forbids no class. Each distractor
 * is a uniform class that s forbids. The next frame is then either a distractor (r > 0)
 * or the next element's symbol (r = 0). The weights are joint probabilities: each string
 * is a walk accepted with probability accept_prob, and a string that reaches '#' too
 * short is dropped.
 * The predictor ignores that a sample ends after a fixed number of elements (a model
 * could learn it; it only matters in the last frames).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "task/ceiling_internal.h"

typedef struct entry {
    int s, t, r;
    double w;
} entry;

struct frame_scratch {
    entry *cur, *next;
    size_t n_cur, n_next, cap_cur, cap_next;
    int64_t *slot; /* [hash_cap] index into next + 1, 0 = empty */
    size_t hash_cap;
    double *window_sum; /* [n_states] the current element's summed frame posteriors */
    int *touched;       /* [n_states] states with a nonzero window_sum */
    int n_touched;
    double *owner; /* [n_states] the frame's owner posterior, zero between frames */
    int *owner_list;
    int n_owner;
};

void ceiling_frames_free(frame_scratch *fs)
{
    if (fs == NULL)
        return;
    sb_free(fs->cur), sb_free(fs->next), sb_free(fs->slot);
    sb_free(fs->window_sum), sb_free(fs->touched), sb_free(fs->owner), sb_free(fs->owner_list);
    sb_free(fs);
}

sb_status ceiling_frames_alloc(const tables *tb, frame_scratch **out, sb_error *err)
{
    size_t n = (size_t)tb->g->n_states;
    frame_scratch *fs = sb_calloc(1, sizeof *fs);
    if (fs != NULL) {
        fs->cap_cur = fs->cap_next = 1024;
        fs->hash_cap = 4096;
        fs->cur = sb_malloc(fs->cap_cur * sizeof *fs->cur);
        fs->next = sb_malloc(fs->cap_next * sizeof *fs->next);
        fs->slot = sb_calloc(fs->hash_cap, sizeof *fs->slot);
        fs->window_sum = sb_calloc(n, sizeof *fs->window_sum);
        fs->touched = sb_malloc(n * sizeof *fs->touched);
        fs->owner = sb_calloc(n, sizeof *fs->owner);
        fs->owner_list = sb_malloc(n * sizeof *fs->owner_list);
    }
    if (fs == NULL || !fs->cur || !fs->next || !fs->slot || !fs->window_sum || !fs->touched ||
        !fs->owner || !fs->owner_list) {
        ceiling_frames_free(fs);
        *out = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the frame-level observer");
    }
    *out = fs;
    return SB_OK;
}

static uint64_t entry_key(const entry *e)
{
    return ((uint64_t)(uint32_t)e->s << 40) ^ ((uint64_t)(uint32_t)e->t << 20) ^
           (uint64_t)(uint32_t)e->r;
}

static size_t hash_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

/* Rebuilds the hash of next with twice the room. */
static int grow_hash(frame_scratch *fs)
{
    size_t cap = fs->hash_cap * 2;
    int64_t *slot = sb_calloc(cap, sizeof *slot);
    if (slot == NULL)
        return 0;
    for (size_t i = 0; i < fs->n_next; i++) {
        size_t h = hash_of(entry_key(&fs->next[i]), cap);
        while (slot[h] != 0)
            h = (h + 1) & (cap - 1);
        slot[h] = (int64_t)i + 1;
    }
    sb_free(fs->slot);
    fs->slot = slot;
    fs->hash_cap = cap;
    return 1;
}

/* Adds weight w to (s, t, r) in next. Returns 0 when out of memory. */
static int add_entry(frame_scratch *fs, int s, int t, int r, double w)
{
    if (w == 0.0)
        return 1;
    entry e = {s, t, r, w};
    uint64_t key = entry_key(&e);
    size_t h = hash_of(key, fs->hash_cap);
    while (fs->slot[h] != 0) {
        entry *x = &fs->next[fs->slot[h] - 1];
        if (x->s == s && x->t == t && x->r == r) {
            x->w += w;
            return 1;
        }
        h = (h + 1) & (fs->hash_cap - 1);
    }
    if (fs->n_next == fs->cap_next) { /* only next grows: frame_step is reading cur */
        size_t cap = fs->cap_next * 2;
        entry *b = sb_realloc(fs->next, cap * sizeof *b);
        if (b == NULL)
            return 0;
        fs->next = b;
        fs->cap_next = cap;
    }
    fs->next[fs->n_next] = e;
    fs->slot[h] = (int64_t)++fs->n_next;
    if (2 * fs->n_next > fs->hash_cap && !grow_hash(fs))
        return 0;
    return 1;
}

/* Empties the hash of the last frame's entries (now cur), newest first so that every
 * probe chain is intact when its entry is removed. */
static void clear_hash(frame_scratch *fs)
{
    for (size_t i = fs->n_cur; i-- > 0;) {
        size_t h = hash_of(entry_key(&fs->cur[i]), fs->hash_cap);
        while (fs->slot[h] != (int64_t)i + 1)
            h = (h + 1) & (fs->hash_cap - 1);
        fs->slot[h] = 0;
    }
}

/* A new element in state s at position t whose symbol is frame f: its gap is drawn. */
static int add_element(frame_scratch *fs, const tables *tb, int s, int t, int f, double w)
{
    if (t >= tb->len_max)
        return 1;              /* no accepted string is that long */
    if (s == tb->g->end_state) /* the string is complete: was it long enough? */
        w *= tb->G[(size_t)t * tb->g->n_states + s];
    if (!(f >= tb->gap_start))
        return add_entry(fs, s, t, 0, w);
    const double q = tb->gap_prob;
    const int empty = tb->g->forbidden_classes[s] == 0;
    double none = (1.0 - q) + q * tb->gap_pmf[0] + (empty ? q * (1.0 - tb->gap_pmf[0]) : 0.0);
    if (!add_entry(fs, s, t, 0, w * none))
        return 0;
    if (empty)
        return 1;
    for (int j = 1; j < tb->gap_pmf_n; j++)
        if (tb->gap_pmf[j] > 0.0 && !add_entry(fs, s, t, j, w * q * tb->gap_pmf[j]))
            return 0;
    return 1;
}

/* The start states showing class c begin a string at frame f. Hypotheses that started
 * different numbers of strings compete here, so each string carries its probability
 * under the rejection: walk probability / accept_prob. */
static int add_string_start(frame_scratch *fs, const tables *tb, int c, int f, double w)
{
    for (int i = 0; i < SB_START_STATES; i++) {
        int s = tb->g->start_states[i];
        if (tb->g->state_class[s] == c && !add_element(fs, tb, s, 0, f, 0.25 * w / tb->accept_prob))
            return 0;
    }
    return 1;
}

/* One frame of class c: next = cur moved through it. */
static int frame_step(frame_scratch *fs, const tables *tb, int c, int f)
{
    const sb_grammar *g = tb->g;
    for (size_t i = 0; i < fs->n_cur; i++) {
        const entry *e = &fs->cur[i];
        if (e->r > 0) { /* a distractor of the same element */
            if ((g->forbidden_classes[e->s] >> c) & 1u)
                if (!add_entry(fs, e->s, e->t, e->r - 1, e->w * tb->inv_forbidden[e->s]))
                    return 0;
            continue;
        }
        if (e->s == g->end_state) { /* the next element starts a new string */
            if (!add_string_start(fs, tb, c, f, e->w))
                return 0;
            continue;
        }
        double w = e->w * g->out_prob[e->s];
        for (int k = g->succ_offset[e->s]; k < g->succ_offset[e->s + 1]; k++) {
            int s2 = g->succ[k];
            if (g->state_class[s2] == c && !add_element(fs, tb, s2, e->t + 1, f, w))
                return 0;
        }
    }
    return 1;
}

sb_status ceiling_frames_pass(const tables *tb, frame_scratch *fs, const sb_sample *smp,
                              const posteriors *post, double *expected, double *realized,
                              sb_error *err)
{
    const sb_grammar *g = tb->g;
    const int n_states = g->n_states;
    int f = 0, dist = 0;
    for (int k = 0; k < smp->n_elements; k++) {
        for (int r = 0; r <= smp->gap[k]; r++, f++) {
            int c = r == 0 ? g->state_class[smp->state[k]] : smp->gap_class[dist++];
            /* next = the hypotheses after frame f */
            clear_hash(fs);
            fs->n_next = 0;
            int ok = f == 0 ? add_string_start(fs, tb, c, 0, 1.0) : frame_step(fs, tb, c, f);
            if (!ok)
                return sb_error_set(err, SB_ERR_NOMEM, "out of memory in the frame-level observer");
            double total = 0.0;
            for (size_t i = 0; i < fs->n_next; i++)
                total += fs->next[i].w;
            if (!(total > 0.0))
                return sb_error_set(err, SB_ERR_RUNTIME,
                                    "the frame-level observer lost the true path at frame %d "
                                    "(a bug: please report it with the task flags)",
                                    f);
            entry *tmp = fs->cur;
            fs->cur = fs->next;
            fs->next = tmp;
            size_t cap = fs->cap_cur;
            fs->cap_cur = fs->cap_next;
            fs->cap_next = cap;
            fs->n_cur = fs->n_next;
            fs->n_next = 0;
            for (size_t i = 0; i < fs->n_cur; i++)
                fs->cur[i].w /= total;
            /* the owner's posterior at this frame, with the length rule */
            fs->n_owner = 0;
            double z = 0.0;
            for (size_t i = 0; i < fs->n_cur; i++) {
                const entry *e = &fs->cur[i];
                double v = e->w * tb->G[(size_t)e->t * n_states + e->s];
                if (v == 0.0)
                    continue;
                if (fs->owner[e->s] == 0.0)
                    fs->owner_list[fs->n_owner++] = e->s;
                fs->owner[e->s] += v;
                z += v;
            }
            for (int i = 0; i < fs->n_owner; i++) {
                int s = fs->owner_list[i];
                if (fs->window_sum[s] == 0.0)
                    fs->touched[fs->n_touched++] = s;
                fs->window_sum[s] += fs->owner[s] / z;
                fs->owner[s] = 0.0;
            }
        }
        /* the window of element k is complete: the metric's decision */
        int best = -1;
        for (int i = 0; i < fs->n_touched; i++) {
            int s = fs->touched[i];
            if (best < 0 || fs->window_sum[s] > fs->window_sum[best] ||
                (fs->window_sum[s] == fs->window_sum[best] && g->state_id[s] < g->state_id[best]))
                best = s;
        }
        for (int i = 0; i < fs->n_touched; i++)
            fs->window_sum[fs->touched[i]] = 0.0;
        fs->n_touched = 0;
        *expected += ceiling_posterior_of(post, k, best);
        *realized += best == smp->state[k];
    }
    return SB_OK;
}

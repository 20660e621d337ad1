/*
 * sequence.c - the reference's string sampler, made fast.
 *
 * The reference rescans the whole transition list at every step (~25 600 entries at the
 * paper's size) and spends seconds per sample. Here a state's successors are a slice of
 * the grammar's CSR table, and since all successors of a state are equally likely the
 * bisection thresholds depend on the out-degree k only: cum[k][j] is numpy's sequential
 * cumsum of k copies of 1/k.
 *
 * Two forms:
 *   sb_sampler_generate       the plain form: one walk, bisect_right on cum[k] as the
 *                             reference does (the oracle);
 *   sb_sampler_generate_many  the fast form: the successor index is found in O(1) from
 *                             floor(u * k) and corrected against exact integer
 *                             thresholds, and LANES samples walk at once so the
 *                             processor overlaps their dependent loads.
 * Both make the same draws in the same order: equal outputs to the last element.
 */
#include "task/sequence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"

#define LANES 4 /* interleaved walks per call of the fast form */

sb_status sb_sampler_init(sb_sampler *sp, const sb_grammar *g, uint64_t seed, int seq_len_min,
                          int seq_len_max, int combined_seq_length, sb_error *err)
{
    memset(sp, 0, sizeof *sp);
    if (seq_len_max < 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sequence length limit %d is below 2: every string holds a start "
                            "state and '#'; use a maximum of 2 or more",
                            seq_len_max);
    if (seq_len_min < 1 || seq_len_min > seq_len_max)
        return sb_error_set(err, SB_ERR_INVALID,
                            "minimum sequence length %d must lie in [1, %d] (the maximum)",
                            seq_len_min, seq_len_max);
    if (combined_seq_length < 1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--combined_seq_length %d: a sample needs at least one element",
                            combined_seq_length);
    sp->grammar = g;
    sp->seed = seed;
    sp->seq_len_min = seq_len_min;
    sp->seq_len_max = seq_len_max;
    sp->combined_seq_length = combined_seq_length;
    sp->degree = sb_malloc((size_t)g->n_states);
    sp->packed = sb_malloc((size_t)g->n_states * sizeof *sp->packed);
    if (sp->degree == NULL || sp->packed == NULL) {
        sb_sampler_free(sp);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory preparing the sampler");
    }
    for (int s = 0; s < g->n_states; s++) {
        int k = g->succ_offset[s + 1] - g->succ_offset[s];
        sp->degree[s] = (uint8_t)k;
        sp->packed[s] = ((uint32_t)g->succ_offset[s] << 8) | (uint32_t)k;
    }
    for (int k = 1; k <= SB_MAX_CLASSES; k++) {
        double p = 1.0 / (double)k;
        double c = 0.0;
        for (int j = 0; j < k; j++) {
            c = j == 0 ? p : c + p;
            sp->cum[k][j] = c;
            sp->thr[k][j] = (uint64_t)ceil(c * 9007199254740992.0);
        }
        sp->thr[k][k] = UINT64_MAX;
    }
    return SB_OK;
}

void sb_sampler_free(sb_sampler *sp)
{
    sb_free(sp->degree);
    sb_free(sp->packed);
    sp->degree = NULL;
    sp->packed = NULL;
}

/* The sample's own Generator: default_rng(seed * idx). The product is a Python int, so
 * it may exceed 64 bits; SeedSequence takes it as 32-bit words. */
static void sampler_rng(const sb_sampler *sp, uint64_t idx, sb_pcg64 *rng)
{
    sb_u128 product = (sb_u128)sp->seed * idx;
    uint32_t entropy[4] = {(uint32_t)product, (uint32_t)(product >> 32), (uint32_t)(product >> 64),
                           (uint32_t)(product >> 96)};
    size_t n_words = 4;
    while (n_words > 1 && entropy[n_words - 1] == 0)
        n_words--;
    uint32_t words[8];
    sb_seedseq_generate(entropy, n_words, words);
    sb_pcg64_seed_words(rng, words);
}

static sb_status sampler_give_up(const sb_sampler *sp, uint64_t idx, sb_error *err)
{
    return sb_error_set(err, SB_ERR_RUNTIME,
                        "sample %llu: no string with length in [%d, %d] after %d draws (the "
                        "reference gives up there too); widen the length range",
                        (unsigned long long)idx, sp->seq_len_min, sp->seq_len_max,
                        SB_STRING_MAX_ATTEMPTS);
}

/* ---- plain form ---------------------------------------------------------------------- */

/* One string from a start state to '#' (the reference's generate_string). The states
 * are stored in out[0 .. cap) (later ones are only walked: the sample is cut there).
 * Returns the string length, or 0 when it grew beyond seq_len_max and was abandoned. */
static int sampler_string(const sb_sampler *sp, sb_pcg64 *rng, uint16_t *out, int cap)
{
    const sb_grammar *g = sp->grammar;
    int s = g->start_states[sb_pcg64_bounded(rng, SB_START_STATES - 1)];
    int len = 0;
    if (len < cap)
        out[len] = (uint16_t)s;
    len++;
    while (s != g->end_state) {
        int k = sp->degree[s];
        const uint16_t *next = g->succ + g->succ_offset[s];
        if (k == 1) {
            s = next[0]; /* a single successor costs no draw */
        } else {
            /* bisect_right(cum, u): the number of cumulative sums <= u */
            double u = sb_pcg64_random(rng);
            const double *c = sp->cum[k];
            int lo = 0, hi = k;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (u < c[mid])
                    hi = mid;
                else
                    lo = mid + 1;
            }
            /* lo == k needs u >= the rounded sum of the k probabilities (< 1 for some k):
             * about 1e-16 per draw. The reference raises an IndexError there; we take the
             * last successor. */
            s = next[lo < k ? lo : k - 1];
        }
        if (len >= sp->seq_len_max)
            return 0; /* appending would exceed the limit: the reference drops the string */
        if (len < cap)
            out[len] = (uint16_t)s;
        len++;
    }
    return len;
}

sb_status sb_sampler_generate(const sb_sampler *sp, uint64_t idx, uint16_t *states, int *n_strings,
                              long *n_draws, sb_error *err)
{
    sb_pcg64 rng;
    sampler_rng(sp, idx, &rng);
    const int total = sp->combined_seq_length;
    int pos = 0, strings = 0;
    long draws = 0;
    while (pos < total) {
        int len = 0;
        int attempts = 0;
        for (;;) {
            len = sampler_string(sp, &rng, states + pos, total - pos);
            attempts++;
            draws++;
            /* the reference checks its counter after each draw, even a successful one */
            if (attempts > SB_STRING_MAX_ATTEMPTS)
                return sampler_give_up(sp, idx, err);
            if (len >= sp->seq_len_min && len <= sp->seq_len_max)
                break;
        }
        pos += len;
        strings++;
    }
    if (n_strings != NULL)
        *n_strings = strings;
    if (n_draws != NULL)
        *n_draws = draws;
    return SB_OK;
}

/* ---- fast form ------------------------------------------------------------------------ */

/* One sample being walked. */
typedef struct walker {
    sb_pcg64 rng;
    uint16_t *out; /* the sample's output row */
    int pos;       /* elements accepted so far */
    int len;       /* length of the current string */
    int s;         /* current state */
    int attempts;  /* string draws for the current element group */
    int list_pos;  /* position of the sample in the caller's list; -1: lane idle */
} walker;

/* Starts a string: the start state is drawn with integers(4). */
static inline void walker_start_string(walker *w, const sb_grammar *g, int total)
{
    w->s = g->start_states[sb_pcg64_bounded(&w->rng, SB_START_STATES - 1)];
    if (w->pos < total)
        w->out[w->pos] = (uint16_t)w->s;
    w->len = 1;
}

static void walker_start_sample(walker *w, const sb_sampler *sp, uint64_t idx, uint16_t *out,
                                int list_pos, int total)
{
    sampler_rng(sp, idx, &w->rng);
    w->out = out;
    w->pos = 0;
    w->attempts = 0;
    w->list_pos = list_pos;
    walker_start_string(w, sp->grammar, total);
}

/* A string ended ('#' appended, complete = 1) or outgrew the limit (complete = 0).
 * Returns 1 when the sample is finished, -1 when it must give up, 0 to go on. */
static int walker_string_done(walker *w, const sb_sampler *sp, int complete, int total)
{
    w->attempts++;
    if (w->attempts > SB_STRING_MAX_ATTEMPTS)
        return -1;
    if (complete && w->len >= sp->seq_len_min) {
        w->pos += w->len;
        w->attempts = 0;
        if (w->pos >= total)
            return 1;
    }
    walker_start_string(w, sp->grammar, total);
    return 0;
}

sb_status sb_sampler_generate_many(const sb_sampler *sp, const uint64_t *idx, int n,
                                   uint16_t *const *states, sb_error *err)
{
    return sb_sampler_generate_prefix(sp, idx, n, states, sp->combined_seq_length, err);
}

sb_status sb_sampler_generate_prefix(const sb_sampler *sp, const uint64_t *idx, int n,
                                     uint16_t *const *states, int total, sb_error *err)
{
    const sb_grammar *g = sp->grammar;
    const int end = g->end_state;
    const int max_len = sp->seq_len_max;
    const uint32_t *packed = sp->packed;
    const uint16_t *succ = g->succ;

    walker lanes[LANES];
    int next_sample = 0, active = 0, failed = n;
    for (int l = 0; l < LANES; l++) {
        lanes[l].list_pos = -1;
        if (next_sample < n) {
            walker_start_sample(&lanes[l], sp, idx[next_sample], states[next_sample], next_sample,
                                total);
            next_sample++;
            active++;
        }
    }
    while (active > 0) {
#pragma GCC unroll 8
        for (int l = 0; l < LANES; l++) {
            walker *w = &lanes[l];
            if (w->list_pos < 0)
                continue;
            /* one step of this walk */
            uint32_t p = packed[w->s];
            uint32_t k = p & 0xffu;
            uint32_t j = 0;
            if (k > 1) {
                uint64_t u = sb_pcg64_next64(&w->rng) >> 11; /* random() = u * 2^-53 */
                j = (uint32_t)((u * k) >> 53);               /* floor(u * k), exact */
                const uint64_t *t = sp->thr[k];
                while (j > 0 && t[j - 1] > u)
                    j--;
                while (t[j] <= u)
                    j++;
                if (j == k) /* see the plain form: the reference would raise here */
                    j = k - 1;
            }
            int next = succ[(p >> 8) + j];
            int event;
            if (w->len >= max_len) {
                event = walker_string_done(w, sp, 0, total);
            } else {
                if (w->pos + w->len < total)
                    w->out[w->pos + w->len] = (uint16_t)next;
                w->len++;
                w->s = next;
                if (next != end)
                    continue;
                event = walker_string_done(w, sp, 1, total);
            }
            if (event == 0)
                continue;
            if (event < 0 && w->list_pos < failed)
                failed = w->list_pos;
            /* the lane takes the next sample of the list, or goes idle */
            if (next_sample < n) {
                walker_start_sample(w, sp, idx[next_sample], states[next_sample], next_sample,
                                    total);
                next_sample++;
            } else {
                w->list_pos = -1;
                active--;
            }
        }
    }
    if (failed < n)
        return sampler_give_up(sp, idx[failed], err);
    return SB_OK;
}

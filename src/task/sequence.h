/*
 * sequence.h - state sequences of a grammar, bit-identical to the reference's sampler
 * (docs/task.md, "Samples").
 *
 * Sample idx of a task with seed s is drawn from its own numpy Generator
 * default_rng(s * idx): strings are walked from a random start state to '#', rejected
 * unless seq_len_min <= length <= seq_len_max, and concatenated until the sample holds
 * combined_seq_length elements (the last string is cut). A sample is therefore a pure
 * function of (grammar, lengths, seed, idx): generate any index, in any order, on any
 * thread.
 */
#ifndef SELECTIVBENCH_SEQUENCE_H
#define SELECTIVBENCH_SEQUENCE_H

#include <stdint.h>

#include "core/status.h"
#include "task/grammar.h"

#define SB_STRING_MAX_ATTEMPTS 10001 /* the reference raises on the 10002nd draw */

typedef struct sb_sampler {
    const sb_grammar *grammar; /* borrowed */
    int seq_len_min;
    int seq_len_max;
    int combined_seq_length;
    uint64_t seed;
    uint8_t *degree; /* [n_states] out-degree of each state */
    /* cum[k][j]: cumulative sum of j+1 probabilities 1/k, summed one by one as numpy's
     * cumsum does (the bisection thresholds of a state with k successors) */
    double cum[SB_MAX_CLASSES + 1][SB_MAX_CLASSES];
    /* the fast walk's view of the same: per state (succ offset << 8 | degree), and the
     * thresholds as integers on the 53-bit draw: c <= u53 * 2^-53 iff
     * ceil(c * 2^53) <= u53; thr[k][k] is a sentinel above every draw */
    uint32_t *packed; /* [n_states] */
    uint64_t thr[SB_MAX_CLASSES + 1][SB_MAX_CLASSES + 1];
} sb_sampler;

/* Prepares a sampler for grammar g (which must outlive it). Lengths count the start
 * state and the final '#'. Errors: SB_ERR_INVALID for impossible lengths. */
sb_status sb_sampler_init(sb_sampler *sp, const sb_grammar *g, uint64_t seed, int seq_len_min,
                          int seq_len_max, int combined_seq_length, sb_error *err);
void sb_sampler_free(sb_sampler *sp);

/* Generates sample idx: writes combined_seq_length state indices into states[].
 * *n_strings (may be NULL) receives the number of accepted strings used, *n_draws (may be
 * NULL) the number of strings drawn including rejected ones.
 * This is the plain form, written as the reference's loop (one walk, a bisection on the
 * cumulative probabilities); sb_sampler_generate_many is the fast form, tested equal.
 * Errors: SB_ERR_RUNTIME when 10001 string draws fail the length filter. */
sb_status sb_sampler_generate(const sb_sampler *sp, uint64_t idx, uint16_t *states, int *n_strings,
                              long *n_draws, sb_error *err);

/* Generates the samples idx[0..n-1] into the rows states[0..n-1] (combined_seq_length
 * elements each), the same sequences as sb_sampler_generate. The walks of several samples are
 * interleaved so that the processor overlaps their memory and arithmetic latencies (one walk alone
 * is a chain of dependent loads). Errors as sb_sampler_generate (for the first failing sample of
 * the list). */
sb_status sb_sampler_generate_many(const sb_sampler *sp, const uint64_t *idx, int n,
                                   uint16_t *const *states, sb_error *err);
/* The first `total` elements (1 <= total <= combined_seq_length) of the samples idx[0..n-1]:
 * what sb_sampler_generate_many writes there, drawing no further (the strings are walked in
 * order and the last one is cut, so a shorter sample is a prefix of the longer one). */
sb_status sb_sampler_generate_prefix(const sb_sampler *sp, const uint64_t *idx, int n,
                                     uint16_t *const *states, int total, sb_error *err);

#endif

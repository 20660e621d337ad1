/*
 * ceiling.h - the ideal observer of a task: what accuracy was possible, and how much
 * memory it takes (docs/reading-results.md).
 *
 * The exact filter. Samples are strings drawn independently (uniform start state, uniform
 * successors, rejected unless seq_len_min <= length <= seq_len_max), concatenated and cut
 * to the sample length. '#' is a symbol, so the observer always knows where the current
 * string began and how far into it the current element is; the posterior of the current
 * state is then
 *     p(s_t | symbols of the string so far) ~ alpha_t(s) * G(s, t)
 * with alpha the forward recursion of the walk restricted to the observed symbols and
 * G(s, t) the probability that a walk from s at position t ends ('#') at a length inside the
 * accepted range (the length rejection seen from inside the string). The support of alpha
 * is at most the states of one letter, so an element costs about (states of a letter) x
 * (successors) operations.
 *
 * Scored elements are every element of every sample (the accuracy of docs/training.md).
 *   expected_acc  mean over elements of max_s p(s | frames up to the element's symbol)
 *                 (the Bayes accuracy; ties do not matter);
 *   realized_acc  the fraction of elements whose posterior argmax is the true state
 *                 (lowest state id on ties).
 * Zero and noisy gaps (tasks 1, 2, 4) carry no information about the state: these are the
 * best accuracies any model can reach on these samples. Non-grammatical gaps (task 3): the
 * distractors of an element are symbols its state forbids, so they do carry information
 * about it. The observer is then told which frames are distractors and sees the element's
 * own distractors (every frame of its accuracy window): an upper bound for any model scored
 * by the window metric, which sees no more than those frames and cannot do better than
 * knowing the segmentation (`segmented` = 1). bayes_model_acc is the tighter number: the
 * accuracy of a model that outputs the exact frame posterior without being told which
 * frames are distractors, with the gap process modelled exactly (gap_start, gap_prob, the
 * split's duration distribution, the eligible-class rule).
 *
 * The window observers. Observer k sees only the symbols of the last k elements (the
 * current one included; k = 0: none) and does not know where inside a string the window
 * begins. It believes the state of its window's first element follows the marginal state
 * distribution of the training elements (estimated from prior_samples samples), and that
 * states follow the grammar's walk (after '#' a uniform start state), without the length
 * rule. When the window reaches back to the sample's first element it knows it and starts
 * there from the uniform start state; k = 0 always names the most frequent state. It
 * decides the argmax of its own posterior (lowest state id on ties), and
 * window_acc[k] is that decision's accuracy under the exact posterior (the expected
 * accuracy of the rule, so window_acc <= expected_acc element by element).
 */
#ifndef SELECTIVBENCH_CEILING_H
#define SELECTIVBENCH_CEILING_H

#include <stdint.h>

#include "core/json_writer.h"
#include "core/status.h"
#include "task/task.h"

/* the window sizes k, in order: 0 1 2 4 8 16 32 (the reference tasks), then 64 ... 4096
 * (interleaved walks, up to the first that covers a sample) */
extern const int sb_ceiling_window_k[SB_CEILING_N_WINDOWS];
/* Version of the algorithm; part of the cache hash, so cached numbers of an older
 * definition are recomputed. */
#define SB_CEILING_VERSION 1

/* SB_CEILING_N_WINDOWS and sb_ceiling are the public header's (one definition). */

/* What the observer scores: the library's callers fill it from the keys split, samples,
 * prior_samples and threads (api/ceiling_api.c); the yardsticks and the planner use the
 * defaults. */
typedef struct sb_ceiling_options {
    sb_split split;        /* samples scored */
    int64_t samples;       /* the first N samples of the split; 0: the whole split */
    int64_t prior_samples; /* training samples for the window prior; 0: min(dataset, 2000) */
    int threads;           /* 0: all cores */
} sb_ceiling_options;

/* The keys' defaults: the whole test split, the default prior, every core. */
sb_ceiling_options sb_ceiling_options_default(void);

/* Computes the ideal observer and the window curve of task on opt's samples (opt NULL: the
 * defaults). Errors: SB_ERR_INVALID for NULL task or out, a bad option (samples beyond the
 * split, negative counts); SB_ERR_NOMEM; the sampler's errors. */
sb_status sb_ceiling_compute_with(const sb_task *task, const sb_ceiling_options *opt,
                                  sb_ceiling *out, sb_error *err);

/* Effective memory of a model with accuracy acc: the k at which the window curve reaches
 * acc, interpolated linearly in k between 0 and 1 and in log k above; 0 when acc is at or
 * below the prior (k = 0); INFINITY when acc is above the largest window computed (the
 * k = 32 observer of the reference tasks: "beyond 32"; n_windows 0 reads as 7);
 * NaN for a NaN acc. Where the curve is not monotone, the first crossing counts. */
double sb_ceiling_effective_memory(const sb_ceiling *c, double acc);

/* Hash of what the ceiling depends on (the task configuration, the options' split,
 * samples and prior_samples, SB_CEILING_VERSION) as 16 hex digits in out[17]: the key of
 * the results database's cache. */
void sb_ceiling_hash(const sb_task_config *cfg, const sb_ceiling_options *opt, char out[17]);

/* Writes {"expected_acc", "realized_acc", "expected_acc_se", "bayes_model_acc",
 * "bayes_model_realized_acc", "window_acc": {"0": .., "1": .., ...}, "p_true_mean", "p_sq_mean",
 * "n_samples", "n_elements", "prior_samples", "segmented", "seconds"} as one object. */
void sb_ceiling_write_json(const sb_ceiling *c, sb_json *j);

/* Reads what sb_ceiling_write_json wrote (the results database's cache). A count outside
 * [0, 2^53] (only in a damaged cache) reads as 0, as a missing one does. */
sb_status sb_ceiling_from_json(const char *text, sb_ceiling *c, sb_error *err);

#endif

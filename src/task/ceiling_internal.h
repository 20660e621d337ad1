/*
 * ceiling_internal.h - what the passes of the ideal observer share (ceiling.c: the tables,
 * the exact element filter and the window observers; ceiling_frames.c: the frame-level
 * predictor of non-grammatical gaps).
 */
#ifndef SELECTIVBENCH_CEILING_INTERNAL_H
#define SELECTIVBENCH_CEILING_INTERNAL_H

#include "task/ceiling.h"

typedef struct tables {
    const sb_grammar *g;
    int len_min, len_max; /* accepted string lengths of the scored split */
    double *G;            /* [len_max][n_states] G(s, t): a walk from s at position t ends
                             at a length in [len_min, len_max] */
    double accept_prob;   /* P(a walk from a uniform start state has an accepted length) */
    int *class_offset;    /* [n_classes + 1] CSR of the states of each class */
    int *class_state;     /* [n_states] */
    double *prior;        /* [n_states] marginal state distribution of training elements */
    int prior_argmax;     /* the k = 0 observer's choice */
    /* non-grammatical gaps */
    int grammar_gap, gap_start;
    double nogap_any;      /* P(no distractor frames) whatever the state */
    double nogap_if_empty; /* added when the state forbids no class (its gaps stay empty) */
    double *inv_forbidden; /* [n_states] 1 / (number of classes the state forbids), 0 if none */
    double gap_prob;
    double *gap_pmf; /* [gap_pmf_n] P(a drawn gap lasts j frames), j = 0.. */
    int gap_pmf_n;
    /* interleaved walks (--walk_len) */
    int walks;     /* 1: elements name their walk; the window pass of walks */
    int n_windows; /* window sizes computed: sb_ceiling_window_k[0 .. n_windows - 1] */
} tables;

/* The exact posterior of every element of one sample (CSR over elements). */
typedef struct posteriors {
    int *offset; /* [E + 1] */
    int *state;  /* [cap] */
    double *p;
    size_t cap;
} posteriors;

/* p(element k is in state s | everything the exact observer saw through element k). */
double ceiling_posterior_of(const posteriors *post, int k, int s);

/* The frame-level predictor (ceiling_frames.c): per-thread working memory. */
typedef struct frame_scratch frame_scratch;
sb_status ceiling_frames_alloc(const tables *tb, frame_scratch **out, sb_error *err);
void ceiling_frames_free(frame_scratch *fs);

/* Runs the exact frame posterior over sample s (its owner state at every frame, not told
 * which frames are distractors), sums it over each element's window and takes the
 * argmax, as the accuracy metric does with a model's outputs; adds to *expected the
 * decisions' exact posterior (post, from the segmented observer) and to *realized their
 * agreement with the true states. */
sb_status ceiling_frames_pass(const tables *tb, frame_scratch *fs, const sb_sample *s,
                              const posteriors *post, double *expected, double *realized,
                              sb_error *err);

#endif

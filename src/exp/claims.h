/*
 * claims.h - the paper's three findings tested on whatever runs a results database holds
 * (docs/claims.md). Each finding gets one statistic, computed from finished runs grouped by
 * their stored configuration, a 95% confidence interval over the groups (Student's t), and a
 * verdict:
 *
 *   gating     gating and fast forgetting help recall. Pairs: a model and its ungated twin
 *              (sb_layer_type.ungated_twin: gated_delta_net / delta_net, gla / retnet)
 *              trained on the same configuration and seed. Statistic: mean accuracy of the
 *              gated minus the ungated model.
 *   mixing     in-state channel mixing matters for generalising to longer gaps. Groups: one
 *              training configuration and seed with runs tested at the training gap and at
 *              a longer one (test_dur > train_gap_max), for models whose state mixes
 *              channels and models whose state is diagonal (sb_layer_state_mixing: the transition axis).
 *              Statistic: the diagonal models' mean accuracy drop to the longer gap minus the
 *              mixing models' mean drop.
 *   attention  softmax attention stays ahead where long-context memory matters. Groups: one
 *              configuration and seed with an attention model and at least one recurrent
 *              model. Statistic: the best attention model's accuracy minus the best recurrent
 *              model's, at the longest sequence length (train_seqlen_max) the groups have;
 *              the margin at every length is listed too.
 *   mixing_retention  finding 2 read as what is kept at the longer gap: the same groups;
 *              statistic: the channel-mixing models' mean retention (accuracy at the longer
 *              gap over accuracy at the training gap) minus the diagonal models' mean.
 *
 * Verdicts: holds when the interval lies above 0; does not hold when it lies below +0.01
 * (the data exclude a benefit of a point or more); inconclusive otherwise, or with fewer
 * than 2 groups (the reason says which).
 */
#ifndef SELECTIVBENCH_CLAIMS_H
#define SELECTIVBENCH_CLAIMS_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "exp/results.h"

#define SB_CLAIMS 4
#define SB_CLAIM_LENGTHS_MAX 8 /* sequence lengths listed for the attention finding */

typedef enum sb_verdict {
    SB_VERDICT_INCONCLUSIVE = 0,
    SB_VERDICT_HOLDS,
    SB_VERDICT_DOES_NOT_HOLD,
} sb_verdict;

typedef struct sb_claim {
    const char *id;          /* "gating", "mixing", "attention", "mixing_retention" */
    const char *finding;     /* the finding, one line */
    const char *statistic;   /* what `estimate` is */
    int groups;              /* pairs or groups the statistic averages */
    double estimate, lo, hi; /* mean and 95% interval (NaN with no group) */
    sb_verdict verdict;
    char reason[256]; /* why this verdict, with the numbers */
    /* attention: the margin (mean over groups) at each sequence length, shortest first */
    int n_lengths;
    int length[SB_CLAIM_LENGTHS_MAX];
    double length_margin[SB_CLAIM_LENGTHS_MAX];
    int length_groups[SB_CLAIM_LENGTHS_MAX];
} sb_claim;

/* The findings (three, the second with two statistics) from rows (any status: only finished runs with a test accuracy and a
 * readable configuration count). SB_ERR_NOMEM on allocation failure. */
sb_status sb_claims_evaluate(const sb_run_row *rows, size_t n, sb_claim out[SB_CLAIMS],
                             sb_error *err);

/* The findings as report.md's section "The paper's findings": a table, each verdict's
 * reason, and attention's margin by sequence length. */
void sb_claims_write_markdown(FILE *f, const sb_claim c[SB_CLAIMS]);

/* "holds", "does not hold", "inconclusive". */
const char *sb_verdict_name(sb_verdict v);

#endif

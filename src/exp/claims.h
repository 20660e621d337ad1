/*
 * claims.h - the paper's findings tested on whatever runs a results database holds, under
 * the rules of docs/claims.md ("What a verdict may claim"):
 *
 *   - Runs are compared only within one experiment (a slice): every stored key equal except
 *     the model, the seed (the grammar), the learning rate and the warm-up; a finding's
 *     slices get a verdict each, never a mean across them.
 *   - Choices read the validation split: a model's lr / warm-up setting in a slice (the
 *     highest mean validation accuracy over its seeds) and the attention statistic's best
 *     model of each class. Runs without a validation split leave only the test to choose on;
 *     the verdict then says "chosen on test".
 *   - Models are compared in pairs that differ on the finding's axis alone
 *     (layers/layer.h, sb_axes; docs/models/taxonomy.md), at the same seed.
 *   - The unit is the seed: the pairs of one seed are averaged first; several test gaps of
 *     one training are one unit. The interval is Student's t over the seeds.
 *   - Each verdict states n (seeds), the estimate and its 95% interval, the p-value and its
 *     Holm adjustment across the verdicts the report prints, the smallest effect the design
 *     detects at 80% power, the seeds a decisive answer needs at the observed spread, and
 *     what it did not test.
 *
 * Verdicts (a benefit of the finding's side of size delta, 0.01 accuracy):
 *   holds         the Holm-adjusted p of "no benefit" is under 0.05 and the estimate > 0
 *   contradicted  the Bonferroni interval (level 1 - 0.05 / m) lies below +delta: the data
 *                 exclude any benefit of delta or more in this slice
 *   not shown     anything else, with its reason: too few seeds, not tested at this scale
 *                 (the runs' mean accuracy under 80% of the ideal observer's), not tested by
 *                 this task (attention: the ideal observer needs only a short window),
 *                 underpowered (the design detects only effects above delta) or
 *                 inconclusive
 * The equivalence statistic (channel mixing unnecessary for selectivity) holds when the
 * Holm-adjusted TOST p is under 0.05 (the mean within +-0.02), and is contradicted when the
 * Bonferroni interval lies outside [-0.02, +0.02].
 */
#ifndef SELECTIVBENCH_CLAIMS_H
#define SELECTIVBENCH_CLAIMS_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "exp/results.h"

typedef enum sb_verdict {
    SB_VERDICT_NOT_SHOWN = 0,
    SB_VERDICT_HOLDS,
    SB_VERDICT_CONTRADICTED,
} sb_verdict;

/* How a slice's settings (and the attention statistic's models) were chosen. */
typedef enum sb_claim_choice {
    SB_CHOSE_NOTHING = 0, /* one setting per model: nothing to choose */
    SB_CHOSE_ON_VALID,    /* on the validation split */
    SB_CHOSE_ON_TEST,     /* on the test split: some runs have no validation split */
} sb_claim_choice;

/* What the ideal observer of a run's task says (NaN: unknown). */
typedef struct sb_claim_task {
    double ceiling;       /* expected accuracy on the run's test split */
    double needed_window; /* the fewest last elements (window k of 1 2 4 8 16 32) whose observer
                             comes within 0.01 of the ceiling; INFINITY beyond 32 */
} sb_claim_task;

/* One verdict: a finding's statistic on one slice. */
typedef struct sb_claim {
    const char *id;        /* "gating", "mixing", "mixing_retention", "mixing_selectivity",
                              "attention", "attention_growth" */
    const char *finding;   /* the paper's finding, one line */
    const char *statistic; /* what estimate is, per seed */
    const char *untested;  /* what a verdict on it does not test */
    int exploratory;       /* chosen after looking at the data: never confirmatory */
    int equivalence;       /* 1: the equivalence statistic (margin SB_CLAIM_MARGIN) */
    char slice[256];       /* the keys that set this slice apart from the finding's others */
    char pairs[256];       /* the model pairs compared ("a/b, c/d"), or the models chosen */
    sb_claim_choice chosen;
    int n;                       /* seeds */
    double estimate, sd, lo, hi; /* mean over seeds, its sd (n - 1), 95% interval */
    double p, p_holm;            /* of "no benefit" (the TOST p for equivalence); NaN untested */
    double detectable;           /* smallest effect detected at 80% power at this n and spread */
    int seeds_needed;            /* for 80% power at max(|estimate|, delta); -1: over 100000 */
    double scale;                /* mean accuracy of the runs used over their mean ceiling */
    double window;               /* attention: the largest window its tasks' observers need
                                    (attention_growth: at its larger demand); NaN */
    sb_verdict verdict;
    char reason[768]; /* the verdict in words, with its numbers */
} sb_claim;

#define SB_CLAIM_DELTA 0.01  /* the benefit a finding is tested for (accuracy) */
#define SB_CLAIM_MARGIN 0.02 /* the equivalence margin (accuracy) */
#define SB_CLAIM_SCALE 0.80  /* under this fraction of the ceiling: not tested at this scale */
#define SB_CLAIM_WINDOW 16   /* attention needs a task whose observer needs this many elements */

/* The verdicts from rows (any status: only finished runs with a test accuracy, a readable
 * configuration and a registered model count) and tasks[i], the ideal observer of rows[i]'s
 * task (NULL: unknown for every run; the scale and task checks are then skipped and the
 * verdict says so). *out is a new array of *n_out verdicts, freed with free(): each finding's
 * slices in the order their runs first appear, a finding without any pair once with its
 * reason. Errors: SB_ERR_NOMEM. */
sb_status sb_claims_evaluate(const sb_run_row *rows, const sb_claim_task *tasks, size_t n,
                             sb_claim **out, int *n_out, sb_error *err);

/* Every verdict of c[0..n), whose statistics are set (claims.c): the guards (too few seeds,
 * not tested at this scale or by this task), then the p-values, the detectable effect and
 * Holm's correction over the tested ones, and the verdict with its reason
 * (claims_verdict.c). A claim whose reason is already set (no data) keeps it. Errors:
 * SB_ERR_NOMEM. */
sb_status sb_claims_decide(sb_claim *c, int n, sb_error *err);

/* tasks[0..n) for rows[0..n) from db: the ceiling (the row's, else the task's from the cache
 * or computed) and the window its observer needs; NaN for runs that are not finished or
 * whose task cannot be built. Errors: SB_ERR_NOMEM; a task whose ceiling fails is left NaN. */
sb_status sb_claims_tasks(sb_results *db, const sb_run_row *rows, size_t n, sb_claim_task *tasks,
                          sb_error *err);

/* The verdicts as report.md's section "The paper's findings": how to read them, a line
 * per verdict ("- ID [SLICE], VERDICT: ...", the lines docs/claims.md checks). */
void sb_claims_write_markdown(FILE *f, const sb_claim *c, int n);

/* The verdicts as a JSON array of objects (`report --claims --json`). */
void sb_claims_write_json(FILE *f, const sb_claim *c, int n);

/* "holds", "contradicted", "not shown". */
const char *sb_verdict_name(sb_verdict v);

#endif

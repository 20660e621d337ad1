/* claims_verdict.c - the verdict of each finding's statistic: its guards (seeds, scale,
 * task), its p-value, power and Holm's correction across a report, the words (claims.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "exp/claims.h"
#include "exp/claims_stats.h"

/* Whether a verdict is a test (enters the Holm family): seeds enough, runs at a scale that
 * tests something, and a task that can show the finding. Otherwise its reason is set. */
static int guard(sb_claim *cl)
{
    char stats[160] = "";
    if (cl->n >= 2)
        snprintf(stats, sizeof stats, "; %+.4f [%+.4f, %+.4f] over %d seeds", cl->estimate, cl->lo,
                 cl->hi, cl->n);
    else if (cl->n == 1)
        snprintf(stats, sizeof stats, "; %+.4f from 1 seed", cl->estimate);
    if (cl->window < SB_CLAIM_WINDOW) { /* attention: NaN (unknown) compares false */
        snprintf(cl->reason, sizeof cl->reason,
                 "not tested by this task: its ideal observer needs only the last %.0f "
                 "elements, which a fixed-size state holds; a task that demands %d or more "
                 "would test it%s",
                 cl->window, SB_CLAIM_WINDOW, stats);
        return 0;
    }
    if (isfinite(cl->scale) && cl->scale < SB_CLAIM_SCALE) {
        snprintf(cl->reason, sizeof cl->reason,
                 "not tested at this scale: its runs reach %.0f%% of the ideal observer's "
                 "accuracy (under %.0f%%), too far below it for memory to be what limits "
                 "them%s",
                 100 * cl->scale, 100 * SB_CLAIM_SCALE, stats);
        return 0;
    }
    if (cl->n < 2) {
        snprintf(cl->reason, sizeof cl->reason, "too few seeds: %d, no interval%s", cl->n, stats);
        return 0;
    }
    return 1;
}

static void p_value(sb_claim *cl)
{
    const double e = SB_CLAIM_MARGIN;
    sb_sample_stats s = {
        .n = cl->n, .mean = cl->estimate, .sd = cl->sd, .se = cl->sd / sqrt((double)cl->n)};
    if (cl->equivalence) /* TOST: both one-sided tests must reject */
        cl->p = fmax(sb_p_above(&s, -e), sb_p_below(&s, e));
    else
        cl->p = fmin(1.0, 2.0 * fmin(sb_p_above(&s, 0.0), sb_p_below(&s, 0.0)));
    cl->detectable = sb_detectable_effect(cl->n, cl->sd, SB_ALPHA);
    double target = fmax(fabs(cl->estimate), cl->equivalence ? e : SB_CLAIM_DELTA);
    cl->seeds_needed = sb_units_needed(target, cl->sd, SB_ALPHA);
}

/* The verdict of a tested claim in a family of m tests, from its Holm-adjusted p. */
static void decide(sb_claim *cl, int m)
{
    sb_sample_stats s = {
        .n = cl->n, .mean = cl->estimate, .sd = cl->sd, .se = cl->sd / sqrt((double)cl->n)};
    double blo, bhi; /* the Bonferroni interval */
    sb_mean_interval(&s, SB_ALPHA / m, &blo, &bhi);
    char base[200];
    snprintf(base, sizeof base, "%+.4f [%+.4f, %+.4f] over %d seeds, p %.4f (Holm %.4f of %d)",
             cl->estimate, cl->lo, cl->hi, cl->n, cl->p, cl->p_holm, m);
    char power[140];
    if (cl->seeds_needed > cl->n || cl->seeds_needed < 0)
        snprintf(power, sizeof power, "detects %.4f at 80%% power; %s%d seeds would detect %.4f",
                 cl->detectable, cl->seeds_needed < 0 ? "over " : "",
                 cl->seeds_needed < 0 ? 100000 : cl->seeds_needed,
                 fmax(fabs(cl->estimate), cl->equivalence ? SB_CLAIM_MARGIN : SB_CLAIM_DELTA));
    else
        snprintf(power, sizeof power, "detects %.4f at 80%% power", cl->detectable);
    const double e = cl->equivalence ? SB_CLAIM_MARGIN : SB_CLAIM_DELTA;
    if (cl->equivalence) {
        if (cl->p_holm < SB_ALPHA) {
            cl->verdict = SB_VERDICT_HOLDS;
            snprintf(cl->reason, sizeof cl->reason, "%s: within +-%.2f; %s", base, e, power);
        } else if (blo > e || bhi < -e) {
            cl->verdict = SB_VERDICT_CONTRADICTED;
            snprintf(cl->reason, sizeof cl->reason,
                     "%s: the corrected interval [%+.4f, %+.4f] lies outside +-%.2f; %s", base, blo,
                     bhi, e, power);
        } else if (cl->p < SB_ALPHA) {
            snprintf(cl->reason, sizeof cl->reason,
                     "%s: within +-%.2f alone, not after the correction for %d verdicts; %s", base,
                     e, m, power);
        } else {
            snprintf(cl->reason, sizeof cl->reason, "%s: %s, the interval reaches past +-%.2f; %s",
                     base, cl->detectable > e ? "underpowered" : "inconclusive", e, power);
        }
        return;
    }
    if (cl->p_holm < SB_ALPHA && cl->estimate > 0) {
        cl->verdict = SB_VERDICT_HOLDS;
        snprintf(cl->reason, sizeof cl->reason, "%s: above 0; %s", base, power);
    } else if (bhi < e) {
        cl->verdict = SB_VERDICT_CONTRADICTED;
        snprintf(cl->reason, sizeof cl->reason,
                 "%s: the corrected interval [%+.4f, %+.4f] excludes a benefit of +%.2f or "
                 "more; %s",
                 base, blo, bhi, e, power);
    } else if (cl->p < SB_ALPHA && cl->estimate > 0) {
        snprintf(cl->reason, sizeof cl->reason,
                 "%s: above 0 alone, not after the correction for %d verdicts; %s", base, m, power);
    } else if (cl->detectable > e) {
        snprintf(cl->reason, sizeof cl->reason, "underpowered: %s; the design %s, above +%.2f",
                 base, power, e);
    } else {
        snprintf(cl->reason, sizeof cl->reason, "inconclusive: %s, holding 0 and +%.2f; %s", base,
                 e, power);
    }
}

sb_status sb_claims_decide(sb_claim *c, int n, sb_error *err)
{
    int *tested = calloc((size_t)(n > 0 ? n : 1), sizeof *tested);
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p),
           *adj = calloc((size_t)(n > 0 ? n : 1), sizeof *adj);
    if (tested == NULL || p == NULL || adj == NULL) {
        free(tested), free(p), free(adj);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory deciding %d verdicts", n);
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        c[i].verdict = SB_VERDICT_NOT_SHOWN;
        if (c[i].reason[0] != '\0' || !guard(&c[i]))
            continue;
        p_value(&c[i]);
        tested[m] = i;
        p[m++] = c[i].p;
    }
    sb_holm(p, m, adj);
    for (int k = 0; k < m; k++) {
        c[tested[k]].p_holm = adj[k];
        decide(&c[tested[k]], m);
    }
    free(tested), free(p), free(adj);
    return SB_OK;
}

const char *sb_verdict_name(sb_verdict v)
{
    return v == SB_VERDICT_HOLDS          ? "holds"
           : v == SB_VERDICT_CONTRADICTED ? "contradicted"
                                          : "not shown";
}

/*
 * claims_stats.h - the statistics the findings' verdicts use (claims.c): Student's t
 * distribution, the one-sample interval and test over units (seeds), the smallest effect a
 * design detects at 80% power, the units a decisive answer needs, and Holm's step-down
 * correction across the verdicts of one report. docs/claims.md, "What a verdict may claim".
 */
#ifndef SELECTIVBENCH_CLAIMS_STATS_H
#define SELECTIVBENCH_CLAIMS_STATS_H

#define SB_ALPHA 0.05 /* the family-wise error rate of a report's verdicts */
#define SB_POWER 0.80 /* the power the detectable effect is stated at */

/* P(T <= t) for Student's t with df > 0 degrees of freedom. */
double sb_t_cdf(double t, double df);

/* The t with P(T <= t) = p, for 0 < p < 1. */
double sb_t_quantile(double p, double df);

/* The one-sample statistics of x[0..n): mean, sample standard deviation (n - 1; 0 for one
 * value) and the standard error of the mean. */
typedef struct sb_sample_stats {
    int n;
    double mean, sd, se;
} sb_sample_stats;
sb_sample_stats sb_sample_stats_of(const double *x, int n);

/* The two-sided interval of level 1 - alpha around the mean (n >= 2). */
void sb_mean_interval(const sb_sample_stats *s, double alpha, double *lo, double *hi);

/* One-sided p-values of the mean against mu0 (n >= 2): P under mean = mu0 of a mean as
 * high as the one observed (above) or as low (below). With sd 0 they are 0 or 1. */
double sb_p_above(const sb_sample_stats *s, double mu0);
double sb_p_below(const sb_sample_stats *s, double mu0);

/* The smallest true mean a two-sided test at level alpha detects with power SB_POWER from
 * n units of spread sd: (t_{1-alpha/2} + t_{power}) sd / sqrt(n), df n - 1 (n >= 2). */
double sb_detectable_effect(int n, double sd, double alpha);

/* The fewest units (>= 2) whose detectable effect at spread sd is at most effect; -1 when
 * more than 100000 would be needed. */
int sb_units_needed(double effect, double sd, double alpha);

/* Holm's step-down adjusted p-values: adj[i] for p[i] over the family p[0..m); the family
 * rejects p[i] at level alpha when adj[i] < alpha. */
void sb_holm(const double *p, int m, double *adj);

#endif

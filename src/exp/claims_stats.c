/* claims_stats.c - Student's t, intervals, power and Holm for the verdicts (claims_stats.h). */
#include "exp/claims_stats.h"

#include <math.h>
#include <stdlib.h>

/* The continued fraction of the regularized incomplete beta function I_x(a, b), evaluated
 * by the modified Lentz method; converges fast for x < (a + 1) / (a + b + 2). */
static double beta_fraction(double x, double a, double b)
{
    const double tiny = 1e-300;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    if (fabs(d) < tiny)
        d = tiny;
    d = 1.0 / d;
    double f = d;
    for (int m = 1; m <= 500; m++) {
        /* the even step d_2m, then the odd step d_2m+1 */
        for (int odd = 0; odd < 2; odd++) {
            double num = odd ? -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
                             : m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
            d = 1.0 + num * d;
            c = 1.0 + num / c;
            if (fabs(d) < tiny)
                d = tiny;
            if (fabs(c) < tiny)
                c = tiny;
            d = 1.0 / d;
            double step = c * d;
            f *= step;
            if (odd && fabs(step - 1.0) < 1e-15)
                return f;
        }
    }
    return f;
}

/* I_x(a, b), the regularized incomplete beta function. */
static double incomplete_beta(double x, double a, double b)
{
    if (x <= 0.0)
        return 0.0;
    if (x >= 1.0)
        return 1.0;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1.0) / (a + b + 2.0))
        return front * beta_fraction(x, a, b) / a;
    return 1.0 - front * beta_fraction(1.0 - x, b, a) / b;
}

double sb_t_cdf(double t, double df)
{
    if (isinf(t))
        return t > 0 ? 1.0 : 0.0;
    /* P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2) */
    double tail = 0.5 * incomplete_beta(df / (df + t * t), 0.5 * df, 0.5);
    return t > 0 ? 1.0 - tail : tail;
}

double sb_t_quantile(double p, double df)
{
    double lo = -1.0, hi = 1.0;
    while (sb_t_cdf(lo, df) > p && lo > -1e12)
        lo *= 2.0;
    while (sb_t_cdf(hi, df) < p && hi < 1e12)
        hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 1e-13 * (1.0 + fabs(lo)); i++) {
        double mid = 0.5 * (lo + hi);
        if (sb_t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

sb_sample_stats sb_sample_stats_of(const double *x, int n)
{
    sb_sample_stats s = {.n = n, .mean = (double)NAN, .sd = (double)NAN, .se = (double)NAN};
    if (n < 1)
        return s;
    double sum = 0.0, var = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    s.mean = sum / n;
    for (int i = 0; i < n; i++)
        var += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = n > 1 ? sqrt(var / (n - 1)) : 0.0;
    s.se = s.sd / sqrt((double)n);
    return s;
}

void sb_mean_interval(const sb_sample_stats *s, double alpha, double *lo, double *hi)
{
    double half = sb_t_quantile(1.0 - 0.5 * alpha, s->n - 1) * s->se;
    *lo = s->mean - half;
    *hi = s->mean + half;
}

double sb_p_above(const sb_sample_stats *s, double mu0)
{
    if (s->se == 0.0)
        return s->mean > mu0 ? 0.0 : 1.0;
    return 1.0 - sb_t_cdf((s->mean - mu0) / s->se, s->n - 1);
}

double sb_p_below(const sb_sample_stats *s, double mu0)
{
    if (s->se == 0.0)
        return s->mean < mu0 ? 0.0 : 1.0;
    return sb_t_cdf((s->mean - mu0) / s->se, s->n - 1);
}

double sb_detectable_effect(int n, double sd, double alpha)
{
    double df = n - 1;
    return (sb_t_quantile(1.0 - 0.5 * alpha, df) + sb_t_quantile(SB_POWER, df)) * sd /
           sqrt((double)n);
}

int sb_units_needed(double effect, double sd, double alpha)
{
    if (sd == 0.0)
        return 2;
    if (!(effect > 0.0))
        return -1;
    /* the detectable effect falls with n: double, then halve the bracket */
    int lo = 2, hi = 2;
    while (sb_detectable_effect(hi, sd, alpha) > effect) {
        lo = hi;
        hi *= 2;
        if (hi > 100000)
            return -1;
    }
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sb_detectable_effect(mid, sd, alpha) > effect)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sb_holm(const double *p, int m, double *adj)
{
    int *order = malloc((size_t)(m > 0 ? m : 1) * sizeof *order);
    if (order == NULL) { /* Bonferroni: never less strict than Holm */
        for (int i = 0; i < m; i++)
            adj[i] = fmin(1.0, p[i] * m);
        return;
    }
    for (int i = 0; i < m; i++)
        order[i] = i;
    /* the p-values ascending (insertion sort: a report has tens of verdicts) */
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && p[order[j]] < p[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double running = 0.0;
    for (int k = 0; k < m; k++) {
        double v = fmin(1.0, (m - k) * p[order[k]]);
        running = fmax(running, v);
        adj[order[k]] = running;
    }
    free(order);
}

/* plot.c - line plots with error bars and reference lines in PNG, SVG and PDF via cairo
 * (see plot.h). */
#include "core/plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_W 900.0
#define PLOT_H 620.0
#define FONT "DejaVu Sans"

/* Okabe-Ito colours (distinguishable with colour blindness), then greys */
static const double palette[][3] = {
    {0.000, 0.447, 0.698}, {0.835, 0.369, 0.000}, {0.000, 0.620, 0.451}, {0.800, 0.475, 0.655},
    {0.941, 0.894, 0.259}, {0.337, 0.706, 0.914}, {0.902, 0.624, 0.000}, {0.000, 0.000, 0.000},
    {0.500, 0.500, 0.500}, {0.300, 0.300, 0.600},
};
#define N_COLOURS (sizeof palette / sizeof *palette)

typedef struct frame {
    double x0, y0, x1, y1;         /* plotting area in device units */
    double xmin, xmax, ymin, ymax; /* y in axis units (see axis_y) */
    int logx, logy1p;
    double ybeyond;
} frame;

/* A y value in axis units: values above ybeyond sit at 2 * ybeyond; log2(1 + y) on a
 * logy1p axis. */
static double axis_y(const frame *f, double y)
{
    if (f->ybeyond > 0 && y > f->ybeyond)
        y = 2 * f->ybeyond;
    if (f->logy1p)
        y = log2(1 + fmax(y, 0));
    return y;
}

/* Whether y can be drawn: not NaN, and infinite only above a ybeyond line. */
static int drawable_y(const frame *f, double y)
{
    return !isnan(y) && (isfinite(y) || (f->ybeyond > 0 && y > 0));
}

static double map_x(const frame *f, double x)
{
    double t = f->logx ? (log10(x) - log10(f->xmin)) / (log10(f->xmax) - log10(f->xmin))
                       : (x - f->xmin) / (f->xmax - f->xmin);
    return f->x0 + t * (f->x1 - f->x0);
}

static double map_y(const frame *f, double y)
{
    return f->y1 - (axis_y(f, y) - f->ymin) / (f->ymax - f->ymin) * (f->y1 - f->y0);
}

/* A "nice" step (1, 2 or 5 times a power of ten) giving about `target` ticks. */
static double nice_step(double range, int target)
{
    double raw = range / target;
    double mag = pow(10.0, floor(log10(raw)));
    double r = raw / mag;
    return (r < 1.5 ? 1.0 : r < 3.5 ? 2.0 : r < 7.5 ? 5.0 : 10.0) * mag;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double size, double halign,
                    double valign, int bold)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - halign * e.width - e.x_bearing, y - valign * e.height - e.y_bearing);
    cairo_show_text(cr, s);
}

static void format_tick(double v, double step, char *buf, size_t size)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (decimals > 6)
        decimals = 6;
    snprintf(buf, size, "%.*f", decimals, fabs(v) < step * 1e-6 ? 0.0 : v);
}

/* A fraction axis (yfraction): the data range [lo, hi], widened to a span of at least 0.1
 * around its middle, padded by 5 % of the span and moved inside [0, 1] (keeping the span).
 * One point at 0.95 gives 0.89 .. 1.0, not a range of width 1 around it. */
static void fraction_range(double *lo, double *hi)
{
    double a = fmin(fmax(*lo, 0.0), 1.0), b = fmin(fmax(*hi, 0.0), 1.0);
    if (!(a <= b))
        a = 0, b = 1;
    if (b - a < 0.1) {
        double mid = (a + b) / 2;
        a = mid - 0.05, b = mid + 0.05;
    }
    double pad = 0.05 * (b - a);
    a -= pad, b += pad;
    if (a < 0)
        b -= a, a = 0;
    if (b > 1)
        a -= b - 1, b = 1;
    *lo = fmax(a, 0.0), *hi = fmin(b, 1.0);
}

/* The x range of a log axis: at least a factor of 4 (a single x, or x values close
 * together, still get a sane range with three ticks), then 5 % of room on both sides. */
static void log_range(double *lo, double *hi)
{
    double a = log10(*lo), b = log10(*hi);
    const double min_span = log10(4.0);
    if (b - a < min_span) {
        double mid = (a + b) / 2;
        a = mid - min_span / 2, b = mid + min_span / 2;
    }
    double pad = 0.05 * (b - a);
    *lo = pow(10, a - pad), *hi = pow(10, b + pad);
}

/* The data's extent in axis units (series with their error bars and bands, reference
 * lines); +-HUGE_VAL when there is nothing to draw. */
static void data_extent(const sb_plot *p, const frame *f, double *xmin, double *xmax, double *ymin,
                        double *ymax)
{
    *xmin = *ymin = HUGE_VAL, *xmax = *ymax = -HUGE_VAL;
    for (int s = 0; s < p->n_series; s++) {
        const sb_plot_series *ser = &p->series[s];
        for (int i = 0; i < ser->n; i++) {
            double x = ser->x[i], y = ser->y[i];
            double e = ser->err != NULL && isfinite(ser->err[i]) ? ser->err[i] : 0;
            if (!isfinite(x) || !drawable_y(f, y) || (p->logx && x <= 0))
                continue;
            double lo = y - e, hi = y + e;
            if (ser->lo != NULL && isfinite(ser->lo[i]))
                lo = fmin(lo, ser->lo[i]);
            if (ser->hi != NULL && isfinite(ser->hi[i]))
                hi = fmax(hi, ser->hi[i]);
            *xmin = fmin(*xmin, x), *xmax = fmax(*xmax, x);
            *ymin = fmin(*ymin, axis_y(f, lo)), *ymax = fmax(*ymax, axis_y(f, hi));
        }
    }
    /* the reference lines are part of the picture */
    for (int r = 0; r < p->n_refs; r++) {
        const sb_plot_ref *ref = &p->refs[r];
        if (ref->n == 0 && drawable_y(f, ref->y))
            *ymin = fmin(*ymin, axis_y(f, ref->y)), *ymax = fmax(*ymax, axis_y(f, ref->y));
        for (int i = 0; i < ref->n; i++) {
            double x = ref->x[i], y = ref->y_at[i];
            if (!isfinite(x) || !drawable_y(f, y) || (p->logx && x <= 0))
                continue;
            *xmin = fmin(*xmin, x), *xmax = fmax(*xmax, x);
            *ymin = fmin(*ymin, axis_y(f, y)), *ymax = fmax(*ymax, axis_y(f, y));
        }
    }
}

static void data_ranges(const sb_plot *p, frame *f)
{
    f->logy1p = p->logy1p;
    f->ybeyond = p->ybeyond;
    double xmin, xmax, ymin, ymax;
    data_extent(p, f, &xmin, &xmax, &ymin, &ymax);
    /* the line of the values beyond ybeyond is always there */
    if (f->ybeyond > 0 && isfinite(ymin))
        ymax = fmax(ymax, axis_y(f, (double)INFINITY));
    if (!isfinite(xmin)) {
        xmin = p->logx ? 1 : 0;
        xmax = p->logx ? 10 : 1;
    }
    if (!isfinite(ymin)) {
        ymin = 0;
        ymax = 1;
    }
    if (p->logx) {
        log_range(&xmin, &xmax);
    } else {
        if (p->xfrom0)
            xmin = fmin(xmin, 0.0);
        if (xmax <= xmin)
            xmin -= 1, xmax += 1;
        double pad = 0.05 * (xmax - xmin);
        xmin = p->xfrom0 && xmin >= 0 ? xmin : xmin - pad;
        xmax += pad;
    }
    f->xmin = xmin, f->xmax = xmax;
    f->logx = p->logx;
    /* room at the free ends (a given limit is kept as it is) */
    if (isfinite(p->ymin))
        ymin = fmin(axis_y(f, p->ymin), ymin);
    if (isfinite(p->ymax))
        ymax = fmax(axis_y(f, p->ymax), ymax);
    if (p->yfraction) {
        fraction_range(&ymin, &ymax);
        f->ymin = ymin, f->ymax = ymax;
        return;
    }
    if (ymax <= ymin) /* one value: a unit around it */
        ymin -= 0.5, ymax += 0.5;
    double ypad = 0.05 * (ymax - ymin);
    if (!isfinite(p->ymin))
        ymin -= ypad;
    if (!isfinite(p->ymax))
        ymax += p->n_refs > 0 ? 2.5 * ypad : ypad; /* room for the reference labels */
    if (isfinite(p->ymin))
        ymin = axis_y(f, p->ymin);
    if (isfinite(p->ymax))
        ymax = axis_y(f, p->ymax);
    if (ymax <= ymin)
        ymax = ymin + 1;
    f->ymin = ymin, f->ymax = ymax;
}

/* Appends a labelled tick to an axis (quietly full at SB_PLOT_MAX_TICKS). */
static void axis_add_tick(sb_plot_axis *a, double v, const char *label)
{
    if (a->n_ticks >= SB_PLOT_MAX_TICKS)
        return;
    a->ticks[a->n_ticks] = v;
    snprintf(a->tick_labels[a->n_ticks], SB_PLOT_TICK_LABEL, "%s", label);
    a->n_ticks++;
}

/* How round a mantissa is: 1, then 2 and 5, then the others. */
static int mantissa_rank(int m)
{
    return m == 1 ? 0 : (m == 2 || m == 5) ? 1 : 2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The ticks m * 10^e in [lo, hi] for the mantissas m of one set, roundest first, each kept
 * only when it is at least min_gap (a fraction of the axis' length) from every tick kept
 * before, so that labels never overlap; in increasing order. Returns how many. */
static int log_ticks_of_set(double lo, double hi, const int *mantissas, int n_m, double min_gap,
                            sb_plot_axis *a)
{
    double kept[SB_PLOT_MAX_TICKS];
    int n = 0;
    const double span = log10(hi) - log10(lo);
    for (int rank = 0; rank <= 2; rank++)
        for (int e = (int)floor(log10(lo)) - 1; e <= (int)ceil(log10(hi)); e++)
            for (int m = 0; m < n_m; m++) {
                double v = mantissas[m] * pow(10.0, e);
                if (mantissa_rank(mantissas[m]) != rank || v < lo * (1 - 1e-9) ||
                    v > hi * (1 + 1e-9))
                    continue;
                int clear = n < SB_PLOT_MAX_TICKS;
                for (int k = 0; k < n && clear; k++)
                    clear = fabs(log10(v) - log10(kept[k])) >= min_gap * span;
                if (clear)
                    kept[n++] = v;
            }
    qsort(kept, (size_t)n, sizeof *kept, cmp_double);
    a->n_ticks = 0;
    for (int k = 0; k < n; k++) {
        char buf[SB_PLOT_TICK_LABEL];
        snprintf(buf, sizeof buf, "%g", kept[k]);
        axis_add_tick(a, kept[k], buf);
    }
    return a->n_ticks;
}

/* Ticks of a log axis: at least three labelled ones, never closer than 8 % of the axis.
 * Decades when they give 3 to 8, else 1-2-5 (up to 12), else 1..9 times a power of ten
 * (the roundest kept where they crowd); on a range too narrow for those, four ticks evenly
 * spaced in log, with as many digits as keep their labels apart. */
static void log_ticks(double lo, double hi, sb_plot_axis *a)
{
    static const int decades[1] = {1}, one_two_five[3] = {1, 2, 5};
    static const int all[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const double min_gap = 0.08;
    int n = log_ticks_of_set(lo, hi, decades, 1, min_gap, a);
    if (n >= 3 && n <= 8)
        return;
    n = log_ticks_of_set(lo, hi, one_two_five, 3, min_gap, a);
    if (n >= 3 && n <= 12)
        return;
    if (n > 12) { /* many decades: every decade */
        log_ticks_of_set(lo, hi, decades, 1, min_gap, a);
        return;
    }
    if (log_ticks_of_set(lo, hi, all, 9, min_gap, a) >= 3)
        return;
    static const double at[4] = {0.1, 0.37, 0.63, 0.9};
    for (int digits = 2; digits <= 8; digits++) {
        a->n_ticks = 0;
        int distinct = 1;
        for (int i = 0; i < 4; i++) {
            char buf[SB_PLOT_TICK_LABEL];
            double v = lo * pow(hi / lo, at[i]);
            snprintf(buf, sizeof buf, "%.*g", digits, v);
            v = strtod(buf, NULL); /* the tick sits where its label says */
            if (i > 0 && strcmp(buf, a->tick_labels[i - 1]) == 0)
                distinct = 0;
            axis_add_tick(a, v, buf);
        }
        if (distinct)
            return;
    }
}

/* Ticks of a linear axis: nice steps (whole numbers only for counts). */
static void linear_ticks(double lo, double hi, int integer, sb_plot_axis *a)
{
    double step = nice_step(hi - lo, 7);
    if (integer) /* counts (layers, heads): whole ticks only */
        step = fmax(1.0, round(step));
    a->n_ticks = 0;
    for (double v = ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) {
        char buf[SB_PLOT_TICK_LABEL];
        format_tick(v, step, buf, sizeof buf);
        axis_add_tick(a, v, buf);
    }
}

/* The y ticks: on a logy1p axis 0, 1, 2, 4, 8, ...; nice steps otherwise; a tick labelled
 * ybeyond_label for the values beyond ybeyond. */
static void y_ticks(const sb_plot *p, const frame *f, sb_plot_axis *a)
{
    double ystep = nice_step(f->ymax - f->ymin, 6);
    a->n_ticks = 0;
    for (int i = 0; i <= 1000; i++) {
        double y;
        char buf[SB_PLOT_TICK_LABEL];
        if (f->logy1p) {
            y = i == 0 ? 0 : pow(2.0, i - 1);
            snprintf(buf, sizeof buf, "%g", y);
        } else {
            y = ceil(f->ymin / ystep) * ystep + i * ystep;
            format_tick(y, ystep, buf, sizeof buf);
        }
        if ((f->ybeyond > 0 && y > f->ybeyond) || axis_y(f, y) > f->ymax + 1e-9 * ystep)
            break;
        if (axis_y(f, y) < f->ymin - 1e-9)
            continue;
        axis_add_tick(a, y, buf);
    }
    double top = axis_y(f, (double)INFINITY);
    if (f->ybeyond > 0 && top <= f->ymax + 1e-9 && top >= f->ymin - 1e-9)
        axis_add_tick(a, 2 * f->ybeyond, p->ybeyond_label != NULL ? p->ybeyond_label : "");
}

/* An axis label, with " (log)" on a log axis unless it says so already. */
static void axis_label(sb_plot_axis *a, const char *label, int log)
{
    if (label == NULL)
        label = "";
    snprintf(a->label, sizeof a->label, "%s%s", label,
             log && strstr(label, "(log") == NULL ? " (log)" : "");
}

/* The frame's axes as drawn: ranges (data units), ticks and labels. */
static void frame_axes(const sb_plot *p, const frame *f, sb_plot_axis *x, sb_plot_axis *y)
{
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    axis_label(x, p->xlabel, p->logx);
    axis_label(y, p->ylabel, 0);
    x->log = p->logx;
    x->min = f->xmin, x->max = f->xmax;
    if (p->logx)
        log_ticks(f->xmin, f->xmax, x);
    else
        linear_ticks(f->xmin, f->xmax, p->xinteger, x);
    y->min = f->logy1p ? pow(2.0, f->ymin) - 1 : f->ymin;
    y->max = f->logy1p ? pow(2.0, f->ymax) - 1 : f->ymax;
    y_ticks(p, f, y);
}

void sb_plot_axes(const sb_plot *p, sb_plot_axis *x, sb_plot_axis *y)
{
    frame f;
    memset(&f, 0, sizeof f);
    data_ranges(p, &f);
    frame_axes(p, &f, x, y);
}

/* The grid lines and labelled ticks of both axes. */
static void draw_ticks(cairo_t *cr, const frame *f, const sb_plot_axis *x, const sb_plot_axis *y)
{
    for (int i = 0; i < y->n_ticks; i++) {
        double py = map_y(f, y->ticks[i]);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, f->x0, py);
        cairo_line_to(cr, f->x1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, f->x0 - 8, py, y->tick_labels[i], 13, 1.0, 0.5, 0);
    }
    for (int i = 0; i < x->n_ticks; i++) {
        double px = map_x(f, x->ticks[i]);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, px, f->y0);
        cairo_line_to(cr, px, f->y1);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, px, f->y1 + 16, x->tick_labels[i], 13, 0.5, 0.5, 0);
    }
}

/* Grey lines of five dash patterns for the reference lines: solid, dashed, short dashes,
 * dotted, dash-dot. */
static void ref_style(cairo_t *cr, int style)
{
    static const double dash[5][4] = {
        {0, 0, 0, 0}, {9, 5, 9, 5}, {4, 4, 4, 4}, {0.1, 4, 0.1, 4}, {10, 4, 1.5, 4}};
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_set_line_width(cr, style == 3 ? 2.0 : 1.5);
    cairo_set_line_cap(cr, style == 3 ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
    if (style >= 1 && style <= 4)
        cairo_set_dash(cr, dash[style], 4, 0);
    else
        cairo_set_dash(cr, NULL, 0, 0);
}

static void ref_style_reset(cairo_t *cr)
{
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
}

/* The reference lines (inside the clipped frame), and where each one's label goes: the
 * line's height at the right end of the frame. */
static void draw_refs(cairo_t *cr, const sb_plot *p, const frame *f, double *label_y)
{
    for (int r = 0; r < p->n_refs; r++) {
        const sb_plot_ref *ref = &p->refs[r];
        label_y[r] = (double)NAN;
        ref_style(cr, ref->style);
        if (ref->n == 0) {
            if (!drawable_y(f, ref->y))
                continue;
            label_y[r] = map_y(f, ref->y);
            cairo_move_to(cr, f->x0, label_y[r]);
            cairo_line_to(cr, f->x1, label_y[r]);
            cairo_stroke(cr);
            continue;
        }
        int started = 0;
        for (int i = 0; i < ref->n; i++) {
            double x = ref->x[i], y = ref->y_at[i];
            if (!isfinite(x) || !drawable_y(f, y) || (f->logx && x <= 0))
                continue;
            double px = map_x(f, x), py = map_y(f, y);
            if (!started)
                cairo_move_to(cr, px, py);
            else
                cairo_line_to(cr, px, py);
            started = 1;
            label_y[r] = py;
        }
        cairo_stroke(cr);
    }
    ref_style_reset(cr);
}

/* The labels of the reference lines, just above their lines at the right end of the
 * frame, pushed apart upwards where lines are close. */
static void draw_ref_labels(cairo_t *cr, const sb_plot *p, const frame *f, double *label_y)
{
    int order[16], n = 0;
    for (int r = 0; r < p->n_refs && n < 16; r++)
        if (isfinite(label_y[r]))
            order[n++] = r;
    /* lowest on the page first */
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && label_y[order[k]] > label_y[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    double y[16], prev = HUGE_VAL;
    for (int i = 0; i < n; i++) {
        y[i] = fmin(label_y[order[i]] - 3, prev - 13);
        prev = y[i];
    }
    /* labels pushed out of the top of the frame come back down into it, pushing the
     * ones below them down as far as needed */
    double floor_y = f->y0 + 13;
    for (int i = n - 1; i >= 0; i--) {
        y[i] = fmax(y[i], floor_y);
        floor_y = y[i] + 13;
    }
    for (int i = 0; i < n; i++) {
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        const char *label = p->refs[order[i]].label;
        text_at(cr, f->x1 - 6, y[i], label != NULL ? label : "", 11, 1.0, 1.0, 0);
    }
}

/* One series' band (lo..hi, shaded), error bars and line, inside the clipped frame. */
static void draw_series_lines(cairo_t *cr, const sb_plot *p, const frame *f, int s)
{
    const sb_plot_series *ser = &p->series[s];
    const double *c = palette[s % N_COLOURS];
    if (ser->lo != NULL && ser->hi != NULL) {
        /* the polygon along hi forwards and lo backwards */
        int started = 0;
        for (int i = 0; i < ser->n; i++) {
            if (!isfinite(ser->x[i]) || !isfinite(ser->hi[i]) || (p->logx && ser->x[i] <= 0))
                continue;
            double px = map_x(f, ser->x[i]), py = map_y(f, ser->hi[i]);
            if (!started)
                cairo_move_to(cr, px, py);
            else
                cairo_line_to(cr, px, py);
            started = 1;
        }
        for (int i = ser->n - 1; started && i >= 0; i--) {
            if (!isfinite(ser->x[i]) || !isfinite(ser->lo[i]) || (p->logx && ser->x[i] <= 0))
                continue;
            cairo_line_to(cr, map_x(f, ser->x[i]), map_y(f, ser->lo[i]));
        }
        cairo_close_path(cr);
        cairo_set_source_rgba(cr, c[0], c[1], c[2], 0.18);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 1.4);
    for (int i = 0; ser->err != NULL && i < ser->n; i++) {
        if (!isfinite(ser->err[i]) || ser->err[i] <= 0 || !drawable_y(f, ser->y[i]))
            continue;
        double px = map_x(f, ser->x[i]);
        double a = map_y(f, ser->y[i] - ser->err[i]), b = map_y(f, ser->y[i] + ser->err[i]);
        cairo_move_to(cr, px, a);
        cairo_line_to(cr, px, b);
        cairo_move_to(cr, px - 4, a);
        cairo_line_to(cr, px + 4, a);
        cairo_move_to(cr, px - 4, b);
        cairo_line_to(cr, px + 4, b);
        cairo_stroke(cr);
    }
    cairo_set_line_width(cr, p->no_markers ? 1.8 : 2.2);
    int started = 0;
    for (int i = 0; i < ser->n; i++) {
        if (!drawable_y(f, ser->y[i]) || (p->logx && ser->x[i] <= 0))
            continue;
        double px = map_x(f, ser->x[i]), py = map_y(f, ser->y[i]);
        if (!started)
            cairo_move_to(cr, px, py);
        else
            cairo_line_to(cr, px, py);
        started = 1;
    }
    cairo_stroke(cr);
}

/* One series' markers; drawn with a clip a little larger than the frame, so that a point
 * on the frame's edge (an accuracy of 1) shows whole. */
static void draw_series_markers(cairo_t *cr, const sb_plot *p, const frame *f, int s)
{
    const sb_plot_series *ser = &p->series[s];
    const double *c = palette[s % N_COLOURS];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    for (int i = 0; i < ser->n; i++) {
        if (!drawable_y(f, ser->y[i]) || (p->logx && ser->x[i] <= 0))
            continue;
        cairo_arc(cr, map_x(f, ser->x[i]), map_y(f, ser->y[i]), 4.5, 0, 2 * M_PI);
        cairo_fill(cr);
    }
}

/* The legend, right of the frame: the series, then the reference lines. */
static void draw_legend(cairo_t *cr, const sb_plot *p, const frame *f, int n_refs)
{
    double ly = f->y0 + 8;
    for (int s = 0; s < p->n_series; s++) {
        const double *c = palette[s % N_COLOURS];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 2.2);
        cairo_move_to(cr, f->x1 + 18, ly);
        cairo_line_to(cr, f->x1 + 48, ly);
        cairo_stroke(cr);
        if (!p->no_markers) {
            cairo_arc(cr, f->x1 + 33, ly, 4.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, f->x1 + 56, ly, p->series[s].label != NULL ? p->series[s].label : "", 13, 0.0,
                0.5, 0);
        ly += 24;
    }
    if (n_refs > 0)
        ly += 6;
    for (int r = 0; r < n_refs; r++) {
        ref_style(cr, p->refs[r].style);
        cairo_move_to(cr, f->x1 + 18, ly);
        cairo_line_to(cr, f->x1 + 48, ly);
        cairo_stroke(cr);
        ref_style_reset(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, f->x1 + 56, ly, p->refs[r].label != NULL ? p->refs[r].label : "", 12, 0.0, 0.5,
                0);
        ly += 22;
    }
}

static void draw(cairo_t *cr, const sb_plot *p)
{
    frame f;
    data_ranges(p, &f);
    sb_plot_axis xa, ya;
    frame_axes(p, &f, &xa, &ya);
    /* the legend's room: its longest label, within a third of the width */
    double legend = 0.0;
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 13);
    for (int s = 0; s < p->n_series + p->n_refs; s++) {
        const char *label = s < p->n_series ? p->series[s].label : p->refs[s - p->n_series].label;
        cairo_text_extents_t e;
        cairo_text_extents(cr, label != NULL ? label : "", &e);
        legend = fmax(legend, e.x_advance);
    }
    legend = fmin(fmax(legend + 90.0, 215.0), PLOT_W * 0.4); /* 56 to the label, then a margin */
    f.x0 = 90, f.x1 = PLOT_W - legend, f.y0 = 95, f.y1 = PLOT_H - 75;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);

    /* title and subtitle */
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, (f.x0 + f.x1) / 2, 28, p->title != NULL ? p->title : "", 19, 0.5, 0.5, 1);
    if (p->subtitle != NULL) {
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        text_at(cr, (f.x0 + f.x1) / 2, 58, p->subtitle, 13, 0.5, 0.5, 0);
    }

    /* grid and ticks, the axes box, the axis labels */
    cairo_set_line_width(cr, 1.0);
    draw_ticks(cr, &f, &xa, &ya);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, (f.x0 + f.x1) / 2, PLOT_H - 28, xa.label, 15, 0.5, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, 26, (f.y0 + f.y1) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, ya.label, 15, 0.5, 0.5, 0);
    cairo_restore(cr);

    /* reference lines, then the series: bands, error bars, lines (clipped to the frame) */
    cairo_save(cr);
    cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
    cairo_clip(cr);
    double label_y[16];
    sb_plot ref_part = *p;
    ref_part.n_refs = p->n_refs < 16 ? p->n_refs : 16;
    draw_refs(cr, &ref_part, &f, label_y);
    for (int s = 0; s < p->n_series; s++)
        draw_series_lines(cr, p, &f, s);
    cairo_restore(cr);
    if (!p->no_markers) {
        cairo_save(cr);
        cairo_rectangle(cr, f.x0 - 6, f.y0 - 6, f.x1 - f.x0 + 12, f.y1 - f.y0 + 12);
        cairo_clip(cr);
        for (int s = 0; s < p->n_series; s++)
            draw_series_markers(cr, p, &f, s);
        cairo_restore(cr);
    }
    draw_ref_labels(cr, &ref_part, &f, label_y);
    draw_legend(cr, p, &f, ref_part.n_refs);
}

/* Renders to one file format through a temporary name. */
static sb_status write_one(const sb_plot *p, const char *path, int kind, sb_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cairo_surface_t *surface = NULL;
    const double scale = kind == 0 ? 2.0 : 1.0; /* PNG at twice the size: crisp on screens */
    if (kind == 0)
        surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)(PLOT_W * scale),
                                             (int)(PLOT_H * scale));
    else if (kind == 1)
        surface = cairo_svg_surface_create(tmp, PLOT_W, PLOT_H);
    else
        surface = cairo_pdf_surface_create(tmp, PLOT_W, PLOT_H);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface);
        return sb_error_set(err, SB_ERR_IO, "cannot write figure '%s': %s", tmp,
                            cairo_status_to_string(cairo_surface_status(surface)));
    }
    cairo_t *cr = cairo_create(surface);
    cairo_scale(cr, scale, scale);
    draw(cr, p);
    cairo_destroy(cr);
    cairo_status_t cs = CAIRO_STATUS_SUCCESS;
    if (kind == 0)
        cs = cairo_surface_write_to_png(surface, tmp);
    cairo_surface_finish(surface);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (cs != CAIRO_STATUS_SUCCESS) {
        remove(tmp);
        return sb_error_set(err, SB_ERR_IO, "cannot write figure '%s': %s", path,
                            cairo_status_to_string(cs));
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return sb_error_set(err, SB_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                            strerror(errno));
    }
    return SB_OK;
}

sb_status sb_plot_write(const sb_plot *p, const char *path_base, sb_error *err)
{
    static const char *ext[3] = {"png", "svg", "pdf"};
    for (int k = 0; k < 3; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", path_base, ext[k]);
        sb_status st = write_one(p, path, k, err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

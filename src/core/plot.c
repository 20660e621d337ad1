/* plot.c - line plots with error bars and reference lines in PNG, SVG and PDF via cairo
 * (see plot.h). */
#include "core/plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
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
    double x0, y0, x1, y1;   /* plotting area in device units */
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

static void data_ranges(const sb_plot *p, frame *f)
{
    f->logy1p = p->logy1p;
    f->ybeyond = p->ybeyond;
    double xmin = HUGE_VAL, xmax = -HUGE_VAL, ymin = HUGE_VAL, ymax = -HUGE_VAL;
    for (int s = 0; s < p->n_series; s++)
        for (int i = 0; i < p->series[s].n; i++) {
            double x = p->series[s].x[i], y = p->series[s].y[i];
            double e = p->series[s].err != NULL && isfinite(p->series[s].err[i]) ? p->series[s].err[i] : 0;
            if (!isfinite(x) || !drawable_y(f, y) || (p->logx && x <= 0))
                continue;
            xmin = fmin(xmin, x), xmax = fmax(xmax, x);
            ymin = fmin(ymin, axis_y(f, y - e)), ymax = fmax(ymax, axis_y(f, y + e));
        }
    /* the reference lines are part of the picture */
    for (int r = 0; r < p->n_refs; r++) {
        const sb_plot_ref *ref = &p->refs[r];
        if (ref->n == 0 && drawable_y(f, ref->y))
            ymin = fmin(ymin, axis_y(f, ref->y)), ymax = fmax(ymax, axis_y(f, ref->y));
        for (int i = 0; i < ref->n; i++) {
            double x = ref->x[i], y = ref->y_at[i];
            if (!isfinite(x) || !drawable_y(f, y) || (p->logx && x <= 0))
                continue;
            xmin = fmin(xmin, x), xmax = fmax(xmax, x);
            ymin = fmin(ymin, axis_y(f, y)), ymax = fmax(ymax, axis_y(f, y));
        }
    }
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
    if (xmax <= xmin) {
        xmin = p->logx ? xmin / 2 : xmin - 1;
        xmax = p->logx ? xmax * 2 : xmax + 1;
    }
    if (p->logx) {
        /* a little room on both sides, in log space */
        double span = log10(xmax) - log10(xmin);
        xmin = pow(10, log10(xmin) - 0.05 * span);
        xmax = pow(10, log10(xmax) + 0.05 * span);
    } else {
        double pad = 0.05 * (xmax - xmin);
        xmin -= pad, xmax += pad;
    }
    /* room at the free ends (a given limit is kept as it is) */
    if (isfinite(p->ymin))
        ymin = fmin(axis_y(f, p->ymin), ymin);
    if (isfinite(p->ymax))
        ymax = fmax(axis_y(f, p->ymax), ymax);
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
    f->xmin = xmin, f->xmax = xmax, f->ymin = ymin, f->ymax = ymax;
    f->logx = p->logx;
}

/* The y ticks: on a logy1p axis 0, 1, 2, 4, 8, ...; nice steps otherwise; a tick labelled
 * ybeyond_label for the values beyond ybeyond. */
static void draw_y_ticks(cairo_t *cr, const sb_plot *p, const frame *f)
{
    double ystep = nice_step(f->ymax - f->ymin, 6);
    for (int i = 0;; i++) {
        double y;
        char buf[32];
        if (f->logy1p) {
            y = i == 0 ? 0 : pow(2.0, i - 1);
            snprintf(buf, sizeof buf, "%g", y);
        } else {
            y = ceil(f->ymin / ystep) * ystep + i * ystep;
            format_tick(y, ystep, buf, sizeof buf);
        }
        if ((f->ybeyond > 0 && y > f->ybeyond) || axis_y(f, y) > f->ymax + 1e-9 * ystep || i > 1000)
            break;
        if (axis_y(f, y) < f->ymin - 1e-9)
            continue;
        double py = map_y(f, y);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, f->x0, py);
        cairo_line_to(cr, f->x1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, f->x0 - 8, py, buf, 13, 1.0, 0.5, 0);
    }
    double top = axis_y(f, (double)INFINITY);
    if (f->ybeyond > 0 && top <= f->ymax + 1e-9 && top >= f->ymin - 1e-9) {
        double py = map_y(f, (double)INFINITY);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, f->x0, py);
        cairo_line_to(cr, f->x1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, f->x0 - 8, py, p->ybeyond_label != NULL ? p->ybeyond_label : "", 13, 1.0, 0.5,
                0);
    }
}

/* Grey lines of four dash patterns for the reference lines. */
static void ref_style(cairo_t *cr, int style)
{
    static const double dash[4][2] = {{0, 0}, {9, 5}, {4, 4}, {0.1, 4}};
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_set_line_width(cr, style == 3 ? 2.0 : 1.5);
    cairo_set_line_cap(cr, style == 3 ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
    if (style >= 1 && style <= 3)
        cairo_set_dash(cr, dash[style], 2, 0);
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

static void draw(cairo_t *cr, const sb_plot *p)
{
    frame f;
    data_ranges(p, &f);
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
    legend = fmin(fmax(legend + 70.0, 215.0), PLOT_W / 3.0);
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

    /* grid and ticks */
    cairo_set_line_width(cr, 1.0);
    draw_y_ticks(cr, p, &f);
    if (f.logx) {
        for (int e = (int)floor(log10(f.xmin)); e <= (int)ceil(log10(f.xmax)); e++) {
            static const int mult[3] = {1, 2, 5};
            for (int m = 0; m < 3; m++) {
                double x = mult[m] * pow(10.0, e);
                if (x < f.xmin || x > f.xmax)
                    continue;
                double px = map_x(&f, x);
                cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
                cairo_move_to(cr, px, f.y0);
                cairo_line_to(cr, px, f.y1);
                cairo_stroke(cr);
                char buf[32];
                snprintf(buf, sizeof buf, "%g", x);
                cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
                text_at(cr, px, f.y1 + 16, buf, 13, 0.5, 0.5, 0);
            }
        }
    } else {
        double xstep = nice_step(f.xmax - f.xmin, 7);
        if (p->xinteger) /* counts (layers, heads): whole ticks only */
            xstep = fmax(1.0, round(xstep));
        for (double x = ceil(f.xmin / xstep) * xstep; x <= f.xmax + 1e-9 * xstep; x += xstep) {
            double px = map_x(&f, x);
            cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
            cairo_move_to(cr, px, f.y0);
            cairo_line_to(cr, px, f.y1);
            cairo_stroke(cr);
            char buf[32];
            format_tick(x, xstep, buf, sizeof buf);
            cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
            text_at(cr, px, f.y1 + 16, buf, 13, 0.5, 0.5, 0);
        }
    }
    /* axes box */
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
    cairo_stroke(cr);
    /* axis labels */
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, (f.x0 + f.x1) / 2, PLOT_H - 28, p->xlabel != NULL ? p->xlabel : "", 15, 0.5, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, 26, (f.y0 + f.y1) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, p->ylabel != NULL ? p->ylabel : "", 15, 0.5, 0.5, 0);
    cairo_restore(cr);

    /* reference lines, then the series: error bars, lines, markers (clipped to the frame) */
    cairo_save(cr);
    cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
    cairo_clip(cr);
    double label_y[16];
    sb_plot ref_part = *p;
    ref_part.n_refs = p->n_refs < 16 ? p->n_refs : 16;
    draw_refs(cr, &ref_part, &f, label_y);
    for (int s = 0; s < p->n_series; s++) {
        const sb_plot_series *ser = &p->series[s];
        const double *c = palette[s % N_COLOURS];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 1.4);
        for (int i = 0; ser->err != NULL && i < ser->n; i++) {
            if (!isfinite(ser->err[i]) || ser->err[i] <= 0 || !drawable_y(&f, ser->y[i]))
                continue;
            double px = map_x(&f, ser->x[i]);
            double a = map_y(&f, ser->y[i] - ser->err[i]), b = map_y(&f, ser->y[i] + ser->err[i]);
            cairo_move_to(cr, px, a);
            cairo_line_to(cr, px, b);
            cairo_move_to(cr, px - 4, a);
            cairo_line_to(cr, px + 4, a);
            cairo_move_to(cr, px - 4, b);
            cairo_line_to(cr, px + 4, b);
            cairo_stroke(cr);
        }
        cairo_set_line_width(cr, 2.2);
        int started = 0;
        for (int i = 0; i < ser->n; i++) {
            if (!drawable_y(&f, ser->y[i]) || (p->logx && ser->x[i] <= 0))
                continue;
            double px = map_x(&f, ser->x[i]), py = map_y(&f, ser->y[i]);
            if (!started)
                cairo_move_to(cr, px, py);
            else
                cairo_line_to(cr, px, py);
            started = 1;
        }
        cairo_stroke(cr);
        for (int i = 0; i < ser->n; i++) {
            if (!drawable_y(&f, ser->y[i]) || (p->logx && ser->x[i] <= 0))
                continue;
            cairo_arc(cr, map_x(&f, ser->x[i]), map_y(&f, ser->y[i]), 4.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    }
    cairo_restore(cr);
    draw_ref_labels(cr, &ref_part, &f, label_y);

    /* legend, right of the frame */
    double ly = f.y0 + 8;
    for (int s = 0; s < p->n_series; s++) {
        const double *c = palette[s % N_COLOURS];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 2.2);
        cairo_move_to(cr, f.x1 + 18, ly);
        cairo_line_to(cr, f.x1 + 48, ly);
        cairo_stroke(cr);
        cairo_arc(cr, f.x1 + 33, ly, 4.5, 0, 2 * M_PI);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, f.x1 + 56, ly, p->series[s].label != NULL ? p->series[s].label : "", 13, 0.0,
                0.5, 0);
        ly += 24;
    }
    if (ref_part.n_refs > 0)
        ly += 6;
    for (int r = 0; r < ref_part.n_refs; r++) {
        ref_style(cr, p->refs[r].style);
        cairo_move_to(cr, f.x1 + 18, ly);
        cairo_line_to(cr, f.x1 + 48, ly);
        cairo_stroke(cr);
        ref_style_reset(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, f.x1 + 56, ly, p->refs[r].label != NULL ? p->refs[r].label : "", 12, 0.0, 0.5,
                0);
        ly += 22;
    }
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

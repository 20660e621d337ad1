/*
 * plot.h - line plots with error bars, drawn with cairo into PNG, SVG and PDF.
 *
 * Enough for the paper's figures: several labelled series (one per model), each a line
 * through (x, y) points with vertical error bars, a legend, a title and a subtitle, axis
 * labels, nice ticks, an optional logarithmic x axis, an optional log2(1 + y) y axis (for
 * counts from 0), and reference lines (yardsticks) drawn in grey behind the series.
 *
 * The axes are right on any data: a fraction axis (yfraction, accuracies) stays inside
 * [0, 1] and spans at least 0.1 (one point, or points all equal, sit inside it, not on a
 * range of width 1 around them); a log axis spans at least a factor of 4, carries at least
 * three labelled ticks (decades, then 1-2-5, then 1..9 times a power of ten, then evenly
 * spaced in log) and says "(log)" in its label. sb_plot_axes returns what is drawn, for
 * tests and for report.json.
 */
#ifndef SELECTIVBENCH_PLOT_H
#define SELECTIVBENCH_PLOT_H

#include "core/status.h"

typedef struct sb_plot_series {
    const char *label;
    int n;
    const double *x, *y;
    const double *err;     /* half-heights of the error bars, or NULL */
    const double *lo, *hi; /* a shaded band from lo[i] to hi[i] (spread over seeds), or NULL */
} sb_plot_series;

/* A reference line, drawn in grey behind the series and labelled at the right end of the
 * frame and in the legend. n == 0: horizontal at y across the frame; otherwise the line
 * through (x[i], y_at[i]) (non-finite points skipped). */
typedef struct sb_plot_ref {
    const char *label;
    double y;
    int n;
    const double *x, *y_at;
    int style; /* 0 solid, 1 dashed, 2 short dashes, 3 dotted, 4 dash-dot */
} sb_plot_ref;

typedef struct sb_plot {
    const char *title;
    const char *subtitle; /* a second line under the title (may be NULL) */
    const char *xlabel, *ylabel;
    int logx;
    int xinteger;      /* x is a count (layers): ticks at whole numbers only */
    double ymin, ymax; /* NAN for automatic */
    int n_series;
    const sb_plot_series *series;
    int n_refs;
    const sb_plot_ref *refs;
    int logy1p;     /* y axis scaled as log2(1 + y), ticks at 0, 1, 2, 4, 8, ... (y >= 0) */
    double ybeyond; /* > 0: values above it (infinity included) are drawn at 2 * ybeyond, */
    const char *ybeyond_label; /* on a line always shown, its tick reading ybeyond_label */
    int yfraction;             /* y is a fraction (an accuracy): the axis stays within [0, 1] */
    int no_markers;            /* lines only (learning curves: many points) */
    int xfrom0;                /* a linear x axis starts at 0 (training samples) */
} sb_plot;

#define SB_PLOT_MAX_TICKS 32
#define SB_PLOT_TICK_LABEL 24

/* One axis as drawn. */
typedef struct sb_plot_axis {
    char label[320];                 /* the axis label; a log axis ends in " (log)" */
    int log;                         /* 1: logarithmic */
    double min, max;                 /* the range shown, in data units */
    int n_ticks;                     /* labelled ticks, in increasing order */
    double ticks[SB_PLOT_MAX_TICKS]; /* data units (the ybeyond line: 2 * ybeyond) */
    char tick_labels[SB_PLOT_MAX_TICKS][SB_PLOT_TICK_LABEL];
} sb_plot_axis;

/* The axes sb_plot_write draws for p: range, labelled ticks and label of x and of y. */
void sb_plot_axes(const sb_plot *p, sb_plot_axis *x, sb_plot_axis *y);

/* Writes path_base.png, path_base.svg and path_base.pdf. Errors: SB_ERR_IO naming the
 * file (each is written under a temporary name and renamed). */
sb_status sb_plot_write(const sb_plot *p, const char *path_base, sb_error *err);

#endif

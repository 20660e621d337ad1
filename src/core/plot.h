/*
 * plot.h - line plots with error bars, drawn with cairo into PNG, SVG and PDF.
 *
 * Enough for the paper's figures: several labelled series (one per model), each a line
 * through (x, y) points with vertical error bars, a legend, a title and a subtitle, axis
 * labels, nice ticks, an optional logarithmic x axis, an optional log2(1 + y) y axis (for
 * counts from 0), and reference lines (yardsticks) drawn in grey behind the series.
 */
#ifndef SELECTIVBENCH_PLOT_H
#define SELECTIVBENCH_PLOT_H

#include "core/status.h"

typedef struct sb_plot_series {
    const char *label;
    int n;
    const double *x, *y;
    const double *err; /* half-heights of the error bars, or NULL */
} sb_plot_series;

/* A reference line, drawn in grey behind the series and labelled at the right end of the
 * frame and in the legend. n == 0: horizontal at y across the frame; otherwise the line
 * through (x[i], y_at[i]) (non-finite points skipped). */
typedef struct sb_plot_ref {
    const char *label;
    double y;
    int n;
    const double *x, *y_at;
    int style; /* 0 solid, 1 dashed, 2 short dashes, 3 dotted */
} sb_plot_ref;

typedef struct sb_plot {
    const char *title;
    const char *subtitle; /* a second line under the title (may be NULL) */
    const char *xlabel, *ylabel;
    int logx;
    int xinteger;         /* x is a count (layers): ticks at whole numbers only */
    double ymin, ymax;    /* NAN for automatic */
    int n_series;
    const sb_plot_series *series;
    int n_refs;
    const sb_plot_ref *refs;
    int logy1p;      /* y axis scaled as log2(1 + y), ticks at 0, 1, 2, 4, 8, ... (y >= 0) */
    double ybeyond;  /* > 0: values above it (infinity included) are drawn at 2 * ybeyond, */
    const char *ybeyond_label; /* on a line always shown, its tick reading ybeyond_label */
} sb_plot;

/* Writes path_base.png, path_base.svg and path_base.pdf. Errors: SB_ERR_IO naming the
 * file (each is written under a temporary name and renamed). */
sb_status sb_plot_write(const sb_plot *p, const char *path_base, sb_error *err);

#endif

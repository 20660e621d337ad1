/*
 * plot.h - line plots with error bars, drawn with cairo into PNG, SVG and PDF.
 *
 * Enough for the paper's figures: several labelled series (one per model), each a line
 * through (x, y) points with vertical error bars, a legend, a title and a subtitle, axis
 * labels, nice ticks, and an optional logarithmic x axis.
 */
#ifndef SELECTIVBENCH_PLOT_H
#define SELECTIVBENCH_PLOT_H

#include "selectivbench/status.h"

typedef struct sb_plot_series {
    const char *label;
    int n;
    const double *x, *y;
    const double *err; /* half-heights of the error bars, or NULL */
} sb_plot_series;

typedef struct sb_plot {
    const char *title;
    const char *subtitle; /* a second line under the title (may be NULL) */
    const char *xlabel, *ylabel;
    int logx;
    double ymin, ymax;    /* NAN for automatic */
    int n_series;
    const sb_plot_series *series;
} sb_plot;

/* Writes path_base.png, path_base.svg and path_base.pdf. Errors: SB_ERR_IO naming the
 * file (each is written under a temporary name and renamed). */
sb_status sb_plot_write(const sb_plot *p, const char *path_base, sb_error *err);

#endif

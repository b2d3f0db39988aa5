/*
 * svg.h - the small set of SVG primitives the HTML pages draw their plots with: linear scales,
 * "nice" tick values, axes with grid lines, and dot clouds written as one <path> per group (a
 * zero-length segment per point with a round or square cap), so 100,000 points cost ~12 bytes
 * each and one DOM node per group. Hand-written on purpose: see reports/html.c for the choice.
 */
#ifndef AB_SVG_H
#define AB_SVG_H

#include <stddef.h>

#include "text.h"

/* Maps the data interval [d0, d1] onto the pixel interval [r0, r1] (r1 < r0 for a y axis). */
struct ab_scale {
	double d0, d1, r0, r1;
};

/* The pixel for v (clamped to a little outside the range, so wild values stay drawable). */
double ab_scale_px(const struct ab_scale *s, double v);

/* Widens [*lo, *hi] by `frac` of its width on each side; a zero-width range gets +-1% (or +-1). */
void ab_scale_pad(double *lo, double *hi, double frac);

/* Up to `max` round tick values (1, 2, 5 x 10^k steps) covering [lo, hi], about `want` of them.
 * Returns how many were written. */
size_t ab_svg_ticks(double *out, size_t max, double lo, double hi, int want);

/* Opens an <svg> of w x h pixels with a viewBox and an accessible label (escaped). */
void ab_svg_begin(struct ab_text *t, int w, int h, const char *label);
void ab_svg_end(struct ab_text *t);

/* How tick labels are written. */
enum ab_svg_fmt {
	AB_SVG_NUM,       /* 512.3, 12345 */
	AB_SVG_PCT,       /* a ratio as a signed percentage: 1.05 -> +5% */
	AB_SVG_INT        /* 0, 10, 20 */
};

/* Horizontal grid lines and left labels for the y scale, spanning x0..x1. */
void ab_svg_yaxis(struct ab_text *t, const struct ab_scale *y, double x0, double x1, enum ab_svg_fmt fmt);
/* Vertical grid lines and bottom labels for the x scale, spanning y0 (top)..y1 (bottom). */
void ab_svg_xaxis(struct ab_text *t, const struct ab_scale *x, double y0, double y1, enum ab_svg_fmt fmt);

/* A dot cloud: begin, any number of dots, end. `cls` names a CSS class (colour); `square` draws
 * squares instead of discs. */
void ab_svg_dots_begin(struct ab_text *t, const char *cls, int square, double size);
void ab_svg_dot(struct ab_text *t, double x, double y);
void ab_svg_dots_end(struct ab_text *t);

/* A tick value as text ("+5%", "512", "0.001"). */
void ab_svg_fmt_value(char *buf, size_t size, double v, enum ab_svg_fmt fmt);

#endif

/*
 * svg.c - SVG primitives for the HTML pages (see svg.h). Coordinates are written with one decimal:
 * enough for a screen, and it keeps a 100-series page small.
 */
#include "svg.h"

#include <math.h>
#include <stdio.h>

double ab_scale_px(const struct ab_scale *s, double v)
{
	double span = s->d1 - s->d0;
	double f = span != 0 ? (v - s->d0) / span : 0.5;
	if (!isfinite(f))
		f = 0.5;
	if (f < -0.05)
		f = -0.05;
	if (f > 1.05)
		f = 1.05;
	return s->r0 + f * (s->r1 - s->r0);
}

void ab_scale_pad(double *lo, double *hi, double frac)
{
	if (!isfinite(*lo) || !isfinite(*hi)) {
		*lo = 0;
		*hi = 1;
	}
	double w = *hi - *lo;
	if (w <= 0) {
		double d = fabs(*lo) > 0 ? fabs(*lo) * 0.01 : 1;
		*lo -= d;
		*hi += d;
		return;
	}
	*lo -= w * frac;
	*hi += w * frac;
}

/* How many multiples of step lie in [lo, hi]. */
static long tick_count(double lo, double hi, double step)
{
	return (long)(floor(hi / step + 1e-9) - ceil(lo / step - 1e-9)) + 1;
}

size_t ab_svg_ticks(double *out, size_t max, double lo, double hi, int want)
{
	if (!(hi > lo) || !isfinite(lo) || !isfinite(hi) || want < 1 || max == 0)
		return 0;
	/* The coarsest 1/2/5 x 10^k step that still puts at least min(want, 3) ticks in the range:
	 * rounding the raw step up alone could leave a single labelled tick on a narrow axis. */
	double raw = (hi - lo) / want, mag = pow(10, floor(log10(raw)));
	static const double mult[] = { 10, 5, 2, 1, 0.5, 0.2 };
	long need = want < 3 ? want : 3;
	double step = mag * mult[sizeof(mult) / sizeof(mult[0]) - 1];
	for (size_t i = 0; i < sizeof(mult) / sizeof(mult[0]); i++)
		if (tick_count(lo, hi, mag * mult[i]) >= need) {
			step = mag * mult[i];
			break;
		}
	size_t n = 0;
	for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && n < max; v += step)
		out[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
}

void ab_svg_begin(struct ab_text *t, int w, int h, const char *label)
{
	ab_text_printf(t, "<svg width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", w, h, w, h);
	ab_text_html(t, label, 200);
	ab_text_puts(t, "\">");
}

void ab_svg_end(struct ab_text *t)
{
	ab_text_puts(t, "</svg>");
}

void ab_svg_fmt_value(char *buf, size_t size, double v, enum ab_svg_fmt fmt)
{
	if (!isfinite(v))
		snprintf(buf, size, "n/a");
	else if (fmt == AB_SVG_PCT) {
		double p = (v - 1.0) * 100.0;
		if (fabs(p) < 1e-9)
			snprintf(buf, size, "0%%");
		else
			snprintf(buf, size, fabs(p) < 1 ? "%+.2g%%" : "%+.3g%%", p);
	} else if (fmt == AB_SVG_INT)
		snprintf(buf, size, "%.0f", v);
	else if (fabs(v) >= 10000)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.4g", v);
}

void ab_svg_yaxis(struct ab_text *t, const struct ab_scale *y, double x0, double x1, enum ab_svg_fmt fmt)
{
	double ticks[16];
	size_t n = ab_svg_ticks(ticks, 16, y->d0, y->d1, 4);
	ab_text_puts(t, "<g class=\"axis\">");
	for (size_t i = 0; i < n; i++) {
		char label[32];
		if (fmt == AB_SVG_INT && ticks[i] != floor(ticks[i]))
			continue;          /* pair and evaluation indices are whole */
		double py = ab_scale_px(y, ticks[i]);
		ab_svg_fmt_value(label, sizeof(label), ticks[i], fmt);
		ab_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", x0, py, x1, py, x0 - 4, py + 4, label);
	}
	ab_text_puts(t, "</g>");
}

void ab_svg_xaxis(struct ab_text *t, const struct ab_scale *x, double y0, double y1, enum ab_svg_fmt fmt)
{
	double ticks[16];
	size_t n = ab_svg_ticks(ticks, 16, x->d0, x->d1, 6);
	ab_text_puts(t, "<g class=\"axis\">");
	for (size_t i = 0; i < n; i++) {
		char label[32];
		if (fmt == AB_SVG_INT && ticks[i] != floor(ticks[i]))
			continue;
		double px = ab_scale_px(x, ticks[i]);
		ab_svg_fmt_value(label, sizeof(label), ticks[i], fmt);
		ab_text_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", px, y0, px, y1, px, y1 + 14, label);
	}
	ab_text_puts(t, "</g>");
}

void ab_svg_dots_begin(struct ab_text *t, const char *cls, int square, double size)
{
	ab_text_printf(t, "<path class=\"dots %s\" stroke-width=\"%.1f\" stroke-linecap=\"%s\" d=\"", cls, size,
		square ? "square" : "round");
}

void ab_svg_dot(struct ab_text *t, double x, double y)
{
	ab_text_printf(t, "M%.1f %.1fh0", x, y);
}

void ab_svg_dots_end(struct ab_text *t)
{
	ab_text_puts(t, "\"/>");
}

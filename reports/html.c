/*
 * html.c - the report page of one evaluation (see html.h), from its result document only. Plots
 * are hand-written inline SVG (svg.h): compared with a charting library (Vega-Lite or Plotly would
 * inline 0.5-3.5 MB of script in every page, need a JS engine to draw anything and fight the "no
 * network, no script" rule) and with gnuplot or cairo (a new runtime dependency and a process or
 * raster per plot), four plot kinds of lines and dots are a few hundred lines of C, deterministic,
 * testable as text, and a 100-series x 1,000-sample page stays a few MB that draws at once.
 */
#include "html.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "html_parts.h"
#include "render.h"
#include "svg.h"

#define TEXT_MAX 600

/* One series (model x metric x ctx): its metric entry (may be NULL) and its samples. */
struct series {
	const char *model, *metric;
	long long ctx;
	const json_t *m;
	const json_t **s;     /* samples, in document order */
	size_t n, cap;
	int spec;
};

struct series_set {
	struct series *v;
	size_t n, cap;
	size_t *slots;        /* open addressing: index + 1, 0 empty */
	size_t n_slots;
	int oom;
};

static int is_spec_name(const char *name)
{
	return name && (strcmp(name, "tau") == 0 || strncmp(name, "spec_", 5) == 0);
}

static uint64_t key_hash(const char *model, const char *metric, long long ctx)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = model; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (const char *p = metric; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (h ^ (uint64_t)ctx) * 1099511628211ull;
}

/* The series for (model, metric, ctx), created when absent; NULL when out of memory. */
static struct series *series_get(struct series_set *set, const char *model, const char *metric, long long ctx)
{
	if (set->oom)
		return NULL;
	if ((set->n + 1) * 2 > set->n_slots) {
		size_t n_slots = set->n_slots ? set->n_slots * 2 : 64;
		size_t *slots = calloc(n_slots, sizeof(*slots));
		if (slots == NULL) {
			set->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i < set->n; i++) {
			size_t h = (size_t)key_hash(set->v[i].model, set->v[i].metric, set->v[i].ctx) & (n_slots - 1);
			while (slots[h])
				h = (h + 1) & (n_slots - 1);
			slots[h] = i + 1;
		}
		free(set->slots);
		set->slots = slots;
		set->n_slots = n_slots;
	}
	size_t h = (size_t)key_hash(model, metric, ctx) & (set->n_slots - 1);
	for (; set->slots[h]; h = (h + 1) & (set->n_slots - 1)) {
		struct series *s = &set->v[set->slots[h] - 1];
		if (s->ctx == ctx && strcmp(s->model, model) == 0 && strcmp(s->metric, metric) == 0)
			return s;
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 16;
		struct series *v = realloc(set->v, cap * sizeof(*v));
		if (v == NULL) {
			set->oom = 1;
			return NULL;
		}
		set->v = v;
		set->cap = cap;
	}
	struct series *s = &set->v[set->n];
	*s = (struct series){ .model = model, .metric = metric, .ctx = ctx, .spec = is_spec_name(metric) };
	set->slots[h] = ++set->n;
	return s;
}

/* Metric series first (in the document's order), then series that only have samples. */
static void series_collect(struct series_set *set, const json_t *doc)
{
	size_t i;
	const json_t *m;
	json_array_foreach(json_object_get(doc, "metrics"), i, m) {
		const char *model = ab_render_str(m, "model"), *name = ab_render_str(m, "name");
		struct series *s = model && name ? series_get(set, model, name, ab_render_int(m, "ctx", 0)) : NULL;
		if (s)
			s->m = m;
	}
	json_array_foreach(json_object_get(doc, "samples"), i, m) {
		const char *model = ab_render_str(m, "model"), *name = ab_render_str(m, "metric");
		struct series *s = model && name ? series_get(set, model, name, ab_render_int(m, "ctx", 0)) : NULL;
		if (s == NULL)
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 32;
			const json_t **v = realloc(s->s, cap * sizeof(*v));
			if (v == NULL) {
				set->oom = 1;
				return;
			}
			s->s = v;
			s->cap = cap;
		}
		s->s[s->n++] = m;
	}
}

static void series_free(struct series_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		free(set->v[i].s);
	free(set->v);
	free(set->slots);
}

static const char *metric_shown(const char *name)
{
	if (name == NULL)
		return "?";
	return strcmp(name, "decode_tps") == 0 ? "decode tok/s" : strcmp(name, "prefill_tps") == 0 ? "prefill tok/s" :
		strcmp(name, "spec_decode_tps") == 0 ? "spec decode tok/s" : strcmp(name, "tau") == 0 ? "\xcf\x84" :
		strcmp(name, "spec_speedup") == 0 ? "spec speedup" : name;
}

/* "mock · decode tok/s · 2k" */
static void series_title(struct ab_text *t, const char *model, const char *metric, long long ctx)
{
	char c[24];
	ab_render_ctx(c, sizeof(c), ctx);
	ab_text_html(t, model, 40);
	ab_text_puts(t, " \xc2\xb7 ");
	ab_text_html(t, metric_shown(metric), 32);
	ab_text_printf(t, " \xc2\xb7 %s", c);
}

static const char *outcome_class(const char *outcome)
{
	if (outcome == NULL)
		return "none";
	return strcmp(outcome, "regressed") == 0 ? "bad" : strcmp(outcome, "improved") == 0 ? "good" :
		strcmp(outcome, "inconclusive") == 0 ? "unsure" : "none";
}

/* "+5.4% (+3.1% … +7.9%)" */
static void delta_text(struct ab_text *t, const json_t *m)
{
	char a[32], b[32], c[32];
	ab_text_pct(a, sizeof(a), ab_render_num(m, "ratio"));
	ab_text_pct(b, sizeof(b), ab_render_num_at(m, "ci", 0));
	ab_text_pct(c, sizeof(c), ab_render_num_at(m, "ci", 1));
	ab_text_printf(t, "%s (%s \xe2\x80\xa6 %s)", a, b, c);
}

static void gate_text(struct ab_text *t, const json_t *m)
{
	char pct[32];
	const char *tier = ab_render_str(m, "tier");
	if (!json_is_true(json_object_get(m, "gating")))
		ab_text_puts(t, "advisory");
	else if (json_is_true(json_object_get(m, "confirmed"))) {
		ab_text_puts(t, "<b class=\"bad\">");
		ab_text_html(t, ab_render_str(m, "label"), 60);
		ab_text_puts(t, "</b>");
	} else if (json_is_true(json_object_get(m, "regression")))
		ab_text_puts(t, "regression not confirmed");
	else if (tier) {
		ab_text_pct(pct, sizeof(pct), ab_render_num_at(m, "ci_adj", 0));
		ab_text_puts(t, "<b class=\"good\">");
		ab_text_html(t, tier, 4);
		ab_text_printf(t, "</b> (verified \xe2\x89\xa5 %s)", pct);
	} else
		ab_text_puts(t, "\xe2\x80\x94");
}

static void render_header(struct ab_text *t, const json_t *doc, const struct ab_html_options *o)
{
	const json_t *v = json_object_get(doc, "verdict");
	const char *kind = ab_render_str(v, "kind");
	char base[16], head[16];
	ab_text_printf(t, "<header class=\"verdict %s\"><h1>abgate <span class=\"label\">",
		kind && strspn(kind, "abcdefghijklmnopqrstuvwxyz") == strlen(kind) ? kind : "unknown");
	ab_text_html(t, ab_render_str(v, "label"), 60);
	ab_text_puts(t, "</span></h1><p class=\"reason\">");
	ab_text_html(t, ab_render_str(v, "reason"), TEXT_MAX);
	ab_text_puts(t, "</p>");
	size_t i;
	const json_t *x;
	json_array_foreach(json_object_get(v, "notes"), i, x) {
		ab_text_puts(t, "<p class=\"note\">Note: ");
		ab_text_html(t, json_string_value(x), TEXT_MAX);
		ab_text_puts(t, "</p>");
	}
	const json_t *b = json_object_get(doc, "base"), *h = json_object_get(doc, "head");
	ab_render_short_sha(base, sizeof(base), ab_render_str(b, "sha"));
	ab_render_short_sha(head, sizeof(head), ab_render_str(h, "sha"));
	ab_text_puts(t, "<p><b>head</b> ");
	ab_text_html(t, ab_render_str(h, "ref"), 80);
	ab_text_printf(t, " <code>%s</code> vs <b>base</b> ", head);
	ab_text_html(t, ab_render_str(b, "ref"), 80);
	ab_text_printf(t, " <code>%s</code>", base);
	const json_t *pairs = json_object_get(doc, "pairs");
	if (ab_render_int(pairs, "count", -1) >= 0)
		ab_text_printf(t, " \xc2\xb7 %lld pairs (first look %lld, cap %lld, confirmation %lld)",
			ab_render_int(pairs, "count", 0), ab_render_int(pairs, "min", 0), ab_render_int(pairs, "max", 0),
			ab_render_int(pairs, "confirmation", 0));
	ab_text_puts(t, " \xc2\xb7 suite ");
	ab_text_html(t, ab_render_str(json_object_get(doc, "suite"), "name"), 64);
	ab_text_puts(t, "</p><p>Labels:");
	json_array_foreach(json_object_get(v, "labels"), i, x) {
		ab_text_puts(t, " <code>");
		ab_text_html(t, json_string_value(x), 60);
		ab_text_puts(t, "</code>");
	}
	if (o && o->json_href)
		ab_text_printf(t, " \xc2\xb7 <a href=\"%s\">result JSON</a>", o->json_href);
	if (o && o->history_href)
		ab_text_printf(t, " \xc2\xb7 <a href=\"%s\">history of the base branch</a>", o->history_href);
	ab_text_puts(t, "</p></header>\n");
}

/* A row that says something: a claim, a regression (confirmed or not), or a clear outcome. */
static int is_decisive(const json_t *m)
{
	const char *outcome = ab_render_str(m, "outcome");
	return json_is_true(json_object_get(m, "regression")) || json_is_true(json_object_get(m, "confirmed")) ||
		ab_render_str(m, "tier") != NULL || (outcome && (!strcmp(outcome, "regressed") || !strcmp(outcome, "improved")));
}

static const char table_head[] = "<table class=\"metrics\"><thead><tr><th>model</th><th>metric</th><th>ctx</th>"
	"<th>base</th><th>head</th><th>\xce\x94 (95% CI)</th><th>pairs</th><th>outcome</th><th>gate</th></tr></thead><tbody>\n";

static void metric_rows(struct ab_text *t, const json_t *metrics, int which)
{
	size_t i;
	const json_t *m;
	json_array_foreach(metrics, i, m) {
		if (which >= 0 && is_decisive(m) != which)
			continue;
		char ctx[24], base[32], head[32];
		ab_render_ctx(ctx, sizeof(ctx), ab_render_int(m, "ctx", 0));
		ab_render_value(base, sizeof(base), ab_render_num(json_object_get(m, "base"), "median"));
		ab_render_value(head, sizeof(head), ab_render_num(json_object_get(m, "head"), "median"));
		const char *outcome = ab_render_str(m, "outcome");
		ab_text_printf(t, "<tr class=\"%s\"><td>", outcome_class(outcome));
		ab_text_html(t, ab_render_str(m, "model"), 40);
		ab_text_puts(t, "</td><td>");
		ab_text_html(t, metric_shown(ab_render_str(m, "name")), 32);
		ab_text_printf(t, "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>", ctx, base, head);
		delta_text(t, m);
		ab_text_printf(t, "</td><td class=\"n\">%lld/%lld</td><td>", ab_render_int(m, "n_pairs", 0),
			ab_render_int(m, "pairs", 0));
		ab_text_html(t, outcome, 16);
		ab_text_puts(t, "</td><td>");
		gate_text(t, m);
		ab_text_puts(t, "</td></tr>\n");
	}
}

/* The metrics table; from 18 series the neutral rows fold into a <details> below the decisive ones. */
static void metrics_table(struct ab_text *t, const json_t *metrics)
{
	size_t n = json_array_size(metrics), decisive = 0;
	for (size_t i = 0; i < n; i++)
		decisive += is_decisive(json_array_get(metrics, i));
	ab_text_puts(t, table_head);
	if (n < 18 || decisive == n) {
		metric_rows(t, metrics, -1);
		ab_text_puts(t, "</tbody></table>\n");
		return;
	}
	metric_rows(t, metrics, 1);
	ab_text_printf(t, "</tbody></table>\n<details><summary>%zu neutral series (no claim, no regression)</summary>%s",
		n - decisive, table_head);
	metric_rows(t, metrics, 0);
	ab_text_puts(t, "</tbody></table></details>\n");
}

static void widen(double *lo, double *hi, double v)
{
	if (!isfinite(v))
		return;
	if (v < *lo)
		*lo = v;
	if (v > *hi)
		*hi = v;
}

/* The forest plot: one row per series, its 95% CI (thick) and the simultaneous interval the
 * claims are read off (thin), against the margin band, the regression floor and the tier lines. */
static void forest_plot(struct ab_text *t, const json_t *doc, const json_t *metrics)
{
	const json_t *stats = json_object_get(doc, "statistics"), *tiers = json_object_get(stats, "tiers");
	double floor_ratio = ab_render_num(stats, "regression_ratio");
	size_t n = json_array_size(metrics), i;
	const json_t *m;
	double lo = 1, hi = 1, margin = NAN;
	json_array_foreach(metrics, i, m) {
		widen(&lo, &hi, ab_render_num_at(m, "ci_adj", 0));
		widen(&lo, &hi, ab_render_num_at(m, "ci_adj", 1));
		widen(&lo, &hi, ab_render_num_at(m, "ci", 0));
		widen(&lo, &hi, ab_render_num_at(m, "ci", 1));
		widen(&lo, &hi, ab_render_num(m, "ratio"));
		if (!isfinite(margin))
			margin = ab_render_num(m, "margin");
	}
	widen(&lo, &hi, floor_ratio);
	if (isfinite(margin))
		widen(&lo, &hi, 1 + margin);
	double xs = 1 + ab_render_num(tiers, "XS");
	widen(&lo, &hi, xs);
	ab_scale_pad(&lo, &hi, 0.04);
	const int label_w = 250, w = 940, row = 18, top = 30, bottom = 26;
	int h = top + row * (int)n + bottom;
	struct ab_scale x = { lo, hi, label_w + 10, w - 16 };
	ab_text_puts(t, "<figure class=\"plot forest\">");
	ab_svg_begin(t, w, h, "forest plot: every series' delta with its 95% CI");
	double y0 = top - 6, y1 = top + row * (double)n;
	if (isfinite(margin) && margin > 0)
		ab_text_printf(t, "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
			ab_scale_px(&x, 1 - margin), y0, ab_scale_px(&x, 1 + margin) - ab_scale_px(&x, 1 - margin), y1 - y0);
	ab_svg_xaxis(t, &x, y0, y1, AB_SVG_PCT);
	ab_text_printf(t, "<line class=\"zero\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
		ab_scale_px(&x, 1), y0, ab_scale_px(&x, 1), y1);
	if (isfinite(floor_ratio)) {
		double px = ab_scale_px(&x, floor_ratio);
		ab_text_printf(t, "<line class=\"floor\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text class=\"floor\" x=\"%.1f\" y=\"%d\" text-anchor=\"end\">floor</text>", px, y0 - 8, px, y1, px - 3, top - 16);
	}
	const char *key;
	json_t *tv;
	json_object_foreach((json_t *)tiers, key, tv) {
		double r = 1 + (json_is_number(tv) ? json_number_value(tv) : NAN);
		if (!isfinite(r) || r > hi || r < lo)
			continue;
		double px = ab_scale_px(&x, r);
		ab_text_printf(t, "<line class=\"tier\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text class=\"tier\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px, y0 - 8, px, y1, px, top - 16);
		ab_text_html(t, key, 4);
		ab_text_puts(t, "</text>");
	}
	json_array_foreach(metrics, i, m) {
		double cy = top + row * (double)i + row / 2.0;
		const char *cls = outcome_class(ab_render_str(m, "outcome"));
		ab_text_printf(t, "<g class=\"row %s\"><title>", cls);
		series_title(t, ab_render_str(m, "model"), ab_render_str(m, "name"), ab_render_int(m, "ctx", 0));
		ab_text_puts(t, ": ");
		delta_text(t, m);
		ab_text_puts(t, ", ");
		ab_text_html(t, ab_render_str(m, "outcome"), 16);
		ab_text_printf(t, "</title><text class=\"name\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", label_w, cy + 4);
		series_title(t, ab_render_str(m, "model"), ab_render_str(m, "name"), ab_render_int(m, "ctx", 0));
		ab_text_puts(t, "</text>");
		double a0 = ab_render_num_at(m, "ci_adj", 0), a1 = ab_render_num_at(m, "ci_adj", 1);
		double c0 = ab_render_num_at(m, "ci", 0), c1 = ab_render_num_at(m, "ci", 1), r = ab_render_num(m, "ratio");
		if (isfinite(a0) && isfinite(a1))
			ab_text_printf(t, "<line class=\"adj\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
				ab_scale_px(&x, a0), cy, ab_scale_px(&x, a1), cy);
		if (isfinite(c0) && isfinite(c1))
			ab_text_printf(t, "<line class=\"ci\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
				ab_scale_px(&x, c0), cy, ab_scale_px(&x, c1), cy);
		double rr = ab_render_num(m, "regression_ratio");
		if (isfinite(rr) && isfinite(floor_ratio) && fabs(rr - floor_ratio) > 1e-12)
			ab_text_printf(t, "<line class=\"floor\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
				ab_scale_px(&x, rr), cy - 6, ab_scale_px(&x, rr), cy + 6);
		if (isfinite(r))
			ab_text_printf(t, "<circle class=\"est\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"/>", ab_scale_px(&x, r), cy);
		else
			ab_text_printf(t, "<text x=\"%.1f\" y=\"%.1f\">n/a</text>", ab_scale_px(&x, 1) + 4, cy + 4);
		ab_text_puts(t, "</g>");
	}
	ab_svg_end(t);
	ab_text_puts(t, "<figcaption>\xce\x94 of head over base per series: thick bar the 95% CI, thin bar the "
		"simultaneous interval the claims are read off, dot the estimate; grey band \xc2\xb1margin, red line the "
		"regression floor, green lines the tier thresholds a verified gain must clear.</figcaption></figure>\n");
}

/* The raw samples of one series by pair index: colour = side, disc = AB (base ran first),
 * square = BA; dashed lines the medians; failed samples as red marks on the bottom edge. */
static void series_plot(struct ab_text *t, const struct series *s)
{
	double lo = INFINITY, hi = -INFINITY;
	long long max_pair = 0, first_confirm = -1;
	size_t failed = 0;
	for (size_t i = 0; i < s->n; i++) {
		const json_t *x = s->s[i];
		long long pair = ab_render_int(x, "pair", 0);
		if (pair > max_pair)
			max_pair = pair;
		if (ab_render_int(x, "batch", 0) == 1 && (first_confirm < 0 || pair < first_confirm))
			first_confirm = pair;
		if (json_is_true(json_object_get(x, "ok")))
			widen(&lo, &hi, ab_render_num(x, "value"));
		else
			failed++;
	}
	const json_t *bm = json_object_get(s->m, "base"), *hm = json_object_get(s->m, "head");
	ab_scale_pad(&lo, &hi, 0.06);
	const int w = 440, h = 170, left = 56, right = 8, top = 8, bottom = 24;
	struct ab_scale x = { -0.5, (double)max_pair + 0.5, left, w - right };
	struct ab_scale y = { lo, hi, h - bottom, top };
	ab_text_printf(t, "<figure class=\"plot series %s\">", outcome_class(ab_render_str(s->m, "outcome")));
	struct ab_text label = { 0 };
	ab_text_puts(&label, "raw samples of ");
	ab_text_puts(&label, s->model);
	ab_svg_begin(t, w, h, label.buf ? label.buf : "raw samples");
	ab_text_free(&label);
	ab_svg_yaxis(t, &y, left, w - right, AB_SVG_NUM);
	ab_svg_xaxis(t, &x, top, h - bottom, AB_SVG_INT);
	if (first_confirm >= 0)
		ab_text_printf(t, "<line class=\"batch\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>",
			ab_scale_px(&x, (double)first_confirm - 0.5), top, ab_scale_px(&x, (double)first_confirm - 0.5), h - bottom);
	static const char *const sides[] = { "base", "head" };
	for (int side = 0; side < 2; side++) {
		double med = ab_render_num(side ? hm : bm, "median");
		if (isfinite(med))
			ab_text_printf(t, "<line class=\"median %s\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>", sides[side],
				left, ab_scale_px(&y, med), w - right, ab_scale_px(&y, med));
		for (int ba = 0; ba < 2; ba++) {
			size_t shown = 0;
			for (size_t i = 0; i < s->n; i++) {
				const json_t *p = s->s[i];
				const char *sd = ab_render_str(p, "side");
				if (!sd || strcmp(sd, sides[side]) != 0 || !json_is_true(json_object_get(p, "ok")))
					continue;
				/* AB: base first, so base order 0 / head order 1. */
				long long order = ab_render_int(p, "order", 0);
				if ((side == 0 ? order == 1 : order == 0) != ba)
					continue;
				if (shown++ == 0)
					ab_svg_dots_begin(t, sides[side], ba, ba ? 4.5 : 5);
				ab_svg_dot(t, ab_scale_px(&x, (double)ab_render_int(p, "pair", 0)), ab_scale_px(&y, ab_render_num(p, "value")));
			}
			if (shown)
				ab_svg_dots_end(t);
		}
	}
	if (failed) {
		ab_svg_dots_begin(t, "fail", 1, 4);
		for (size_t i = 0; i < s->n; i++)
			if (!json_is_true(json_object_get(s->s[i], "ok")))
				ab_svg_dot(t, ab_scale_px(&x, (double)ab_render_int(s->s[i], "pair", 0)), h - bottom - 3);
		ab_svg_dots_end(t);
	}
	ab_svg_end(t);
	ab_text_puts(t, "<figcaption><b>");
	series_title(t, s->model, s->metric, s->ctx);
	ab_text_puts(t, "</b>");
	if (s->m) {
		ab_text_puts(t, " \xc2\xb7 \xce\x94 ");
		delta_text(t, s->m);
		ab_text_puts(t, " \xc2\xb7 ");
		ab_text_html(t, ab_render_str(s->m, "outcome"), 16);
	}
	ab_text_printf(t, " \xc2\xb7 %zu samples", s->n);
	if (failed)
		ab_text_printf(t, ", <span class=\"bad\">%zu failed</span>", failed);
	ab_text_puts(t, "</figcaption></figure>\n");
}

static const char legend[] = "<p class=\"legend\"><span class=\"key base\">\xe2\x97\x8f</span> base "
	"<span class=\"key head\">\xe2\x97\x8f</span> head \xc2\xb7 \xe2\x97\x8f AB pair (base ran first) "
	"\xe2\x96\xa0 BA pair (head ran first) \xc2\xb7 dashed: medians \xc2\xb7 grey vertical line: start of the "
	"confirmation batch \xc2\xb7 <span class=\"bad\">\xe2\x96\xa0</span> on the bottom edge: failed sample</p>\n";

static void render_samples(struct ab_text *t, const struct series_set *set, int spec)
{
	size_t shown = 0;
	for (size_t i = 0; i < set->n; i++) {
		if (set->v[i].spec != spec || set->v[i].n == 0)
			continue;
		if (shown++ == 0) {
			if (spec)
				ab_text_puts(t, "<h3>\xcf\x84 per prompt and speculative speed, base vs head</h3>\n");
			ab_text_puts(t, legend);
			ab_text_puts(t, "<div class=\"grid\">\n");
		}
		series_plot(t, &set->v[i]);
	}
	if (shown)
		ab_text_puts(t, "</div>\n");
	else if (!spec)
		ab_text_puts(t, "<p>No samples were recorded.</p>\n");
}

int ab_html_render_run(char **out, const json_t *doc, const struct ab_html_options *o)
{
	struct ab_text t = { 0 };
	struct series_set set = { 0 };
	if (out == NULL || !json_is_object(doc))
		return ab_error_setc(AB_EINVALID, "html: the result is not an object");
	const json_t *v = json_object_get(doc, "verdict"), *metrics = json_object_get(doc, "metrics");
	char title[160], head[16];
	ab_render_short_sha(head, sizeof(head), ab_render_str(json_object_get(doc, "head"), "sha"));
	snprintf(title, sizeof(title), "abgate %.60s \xc2\xb7 head %s", ab_render_str(v, "label") ?
		ab_render_str(v, "label") : "eval:unknown", head);
	ab_html_page_begin(&t, title);
	render_header(&t, doc, o);
	series_collect(&set, doc);

	ab_text_puts(&t, "<section id=\"metrics\" class=\"plots\"><h2>Metrics</h2>\n");
	if (json_array_size(metrics) > 0) {
		metrics_table(&t, metrics);
		forest_plot(&t, doc, metrics);
	} else {
		ab_text_puts(&t, "<p>No speed metrics were measured.</p>\n");
	}
	ab_text_puts(&t, "</section>\n<section id=\"samples\" class=\"plots\"><h2>Raw samples by pair</h2>\n");
	render_samples(&t, &set, 0);
	ab_text_puts(&t, "</section>\n");
	const json_t *accuracy = json_object_get(doc, "accuracy");
	if (json_array_size(json_object_get(accuracy, "models")) > 0) {
		ab_text_puts(&t, "<section id=\"accuracy\" class=\"plots\"><h2>Accuracy</h2>\n");
		ab_html_accuracy(&t, accuracy);
		ab_text_puts(&t, "</section>\n");
	}
	int any_spec = 0;
	for (size_t i = 0; i < set.n; i++)
		any_spec |= set.v[i].spec && set.v[i].n > 0;
	if (any_spec || json_is_object(json_object_get(doc, "spec"))) {
		ab_text_puts(&t, "<section id=\"spec\" class=\"plots\"><h2>Speculative decoding</h2>\n");
		ab_html_spec_table(&t, doc);
		render_samples(&t, &set, 1);
		ab_text_puts(&t, "</section>\n");
	}
	ab_html_details(&t, doc);
	ab_html_page_end(&t);
	int oom = set.oom;
	series_free(&set);
	if (oom || t.failed || (*out = ab_text_take(&t)) == NULL) {
		ab_text_free(&t);
		return ab_error_set("html: out of memory");
	}
	return 0;
}

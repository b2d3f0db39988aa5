/*
 * html_parts.c - sections of the run page (see html_parts.h): accuracy plots (KL per scored
 * position with top-1 misses when the result carries them, else the per-side summary with its
 * intervals against the thresholds), the speculative decoding table, and the details: gates,
 * failed samples, environment, method, builds with their log tails, timing, footer.
 */
#include "html_parts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render.h"
#include "svg.h"

static const char *const sides[] = { "base", "head" };

static void widen(double *lo, double *hi, double v)
{
	if (isfinite(v) && v < *lo)
		*lo = v;
	if (isfinite(v) && v > *hi)
		*hi = v;
}

/* KL per scored position (log scale) for both sides; the positions whose top-1 token differs from
 * the reference's as red marks in one strip per side below the plot. */
static void kl_plot(struct ab_text *t, const json_t *per)
{
	const json_t *kl = json_object_get(per, "kl"), *miss = json_object_get(per, "top1_miss");
	size_t n = json_array_size(json_object_get(kl, "base"));
	if (json_array_size(json_object_get(kl, "head")) > n)
		n = json_array_size(json_object_get(kl, "head"));
	double lo = INFINITY, hi = -INFINITY;
	for (int s = 0; s < 2; s++) {
		size_t i;
		const json_t *v;
		json_array_foreach(json_object_get(kl, sides[s]), i, v)
			if (json_number_value(v) > 0)
				widen(&lo, &hi, log10(json_number_value(v)));
	}
	if (!isfinite(lo)) {
		lo = -7;
		hi = -1;
	}
	if (lo < hi - 8)
		lo = hi - 8;           /* eight decades are plenty; smaller values sit on the floor */
	lo = floor(lo), hi = ceil(hi);
	if (hi <= lo)
		hi = lo + 1;
	const int w = 940, h = 240, left = 56, right = 8, top = 8, strip = 12, bottom = 22 + 2 * strip;
	struct ab_scale x = { -0.5, (double)n - 0.5, left, w - right }, y = { lo, hi, h - bottom, top };
	ab_text_puts(t, "<figure class=\"plot accuracy\">");
	ab_svg_begin(t, w, h, "KL divergence per scored position, base and head");
	ab_text_puts(t, "<g class=\"axis\">");
	for (double d = lo; d <= hi; d += 1) {
		double py = ab_scale_px(&y, d);
		ab_text_printf(t, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
			"text-anchor=\"end\">1e%+.0f</text>", left, py, w - right, py, left - 4, py + 4, d);
	}
	ab_text_puts(t, "</g>");
	ab_svg_xaxis(t, &x, top, h - bottom + 2 * strip, AB_SVG_INT);
	for (int s = 0; s < 2; s++) {
		size_t i;
		const json_t *v;
		ab_svg_dots_begin(t, sides[s], s, 2.6);
		json_array_foreach(json_object_get(kl, sides[s]), i, v) {
			double k = json_number_value(v);
			ab_svg_dot(t, ab_scale_px(&x, (double)i), ab_scale_px(&y, k > 0 ? log10(k) : lo));
		}
		ab_svg_dots_end(t);
		double sy = h - bottom + 6 + s * strip;
		ab_text_printf(t, "<text class=\"strip\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s miss</text>", left - 4,
			sy + 4, sides[s]);
		if (json_array_size(json_object_get(miss, sides[s])) == 0)
			continue;
		ab_text_printf(t, "<path class=\"miss\" d=\"");
		json_array_foreach(json_object_get(miss, sides[s]), i, v)
			ab_text_printf(t, "M%.1f %.1fv8", ab_scale_px(&x, (double)json_integer_value(v)), sy - 4);
		ab_text_puts(t, "\"/>");
	}
	ab_svg_end(t);
	ab_text_printf(t, "<figcaption>KL(reference \xe2\x80\x96 side) per scored position (log scale; "
		"<span class=\"key base\">\xe2\x97\x8f</span> base, <span class=\"key head\">\xe2\x96\xa0</span> head); "
		"red ticks: positions whose top-1 token differs from the reference's (base %zu, head %zu).</figcaption></figure>\n",
		json_array_size(json_object_get(miss, "base")), json_array_size(json_object_get(miss, "head")));
}

/* One summary row: a side's estimate with its interval. */
struct irow {
	const char *label, *cls;
	double est, lo, hi;
};

/* Rows of intervals against one threshold line, on a shared x scale. */
static void interval_rows(struct ab_text *t, const char *what, const struct irow *rows, int n, double threshold,
	const char *threshold_label)
{
	double lo = INFINITY, hi = -INFINITY;
	for (int i = 0; i < n; i++) {
		widen(&lo, &hi, rows[i].lo);
		widen(&lo, &hi, rows[i].hi);
		widen(&lo, &hi, rows[i].est);
	}
	widen(&lo, &hi, threshold);
	ab_scale_pad(&lo, &hi, 0.08);
	const int w = 460, row = 22, top = 22, left = 70;
	int h = top + row * n + 24;
	struct ab_scale x = { lo, hi, left, w - 12 };
	ab_svg_begin(t, w, h, what);
	ab_text_printf(t, "<text class=\"name\" x=\"%d\" y=\"14\">", left);
	ab_text_html(t, what, 80);
	ab_text_puts(t, "</text>");
	ab_svg_xaxis(t, &x, top - 4, top + row * n, AB_SVG_NUM);
	if (isfinite(threshold)) {
		double px = ab_scale_px(&x, threshold);
		ab_text_printf(t, "<line class=\"floor\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/><text class=\"floor\" "
			"x=\"%.1f\" y=\"14\" text-anchor=\"end\">%s</text>", px, top - 4, px, top + row * n, w - 12.0,
			threshold_label);
	}
	for (int i = 0; i < n; i++) {
		double cy = top + row * i + row / 2.0;
		ab_text_printf(t, "<text class=\"name\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>", left - 6, cy + 4,
			rows[i].label);
		if (isfinite(rows[i].lo) && isfinite(rows[i].hi))
			ab_text_printf(t, "<line class=\"ci %s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", rows[i].cls,
				ab_scale_px(&x, rows[i].lo), cy, ab_scale_px(&x, rows[i].hi), cy);
		if (isfinite(rows[i].est))
			ab_text_printf(t, "<circle class=\"est %s\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>", rows[i].cls,
				ab_scale_px(&x, rows[i].est), cy);
	}
	ab_svg_end(t);
}

void ab_html_accuracy(struct ab_text *t, const json_t *accuracy)
{
	const json_t *th = json_object_get(accuracy, "thresholds");
	size_t i;
	const json_t *m;
	json_array_foreach(json_object_get(accuracy, "models"), i, m) {
		ab_text_puts(t, "<h3>");
		ab_text_html(t, ab_render_str(m, "model"), 40);
		ab_text_printf(t, " \xc2\xb7 %lld scored positions</h3>\n", ab_render_int(m, "positions", 0));
		const char *error = ab_render_str(m, "error");
		if (error) {
			ab_text_puts(t, "<p class=\"bad\">Not scored: ");
			ab_text_html(t, error, 600);
			ab_text_puts(t, "</p>\n");
			continue;
		}
		const json_t *b = json_object_get(m, "base"), *h = json_object_get(m, "head");
		ab_text_puts(t, "<table><thead><tr><th>side</th><th>top-1 (95% CI)</th><th>mean KL (95% CI)</th>"
			"<th>KL p99</th><th>KL max</th></tr></thead><tbody>");
		for (int s = 0; s < 2; s++) {
			const json_t *x = s ? h : b;
			ab_text_printf(t, "<tr><td>%s</td><td class=\"n\">%.4f (%.4f \xe2\x80\xa6 %.4f)</td><td class=\"n\">%.3g "
				"(%.3g \xe2\x80\xa6 %.3g)</td><td class=\"n\">%.3g</td><td class=\"n\">%.3g</td></tr>", sides[s],
				ab_render_num(x, "top1"), ab_render_num_at(x, "top1_ci", 0), ab_render_num_at(x, "top1_ci", 1),
				ab_render_num(x, "kl_mean"), ab_render_num_at(x, "kl_ci", 0), ab_render_num_at(x, "kl_ci", 1),
				ab_render_num(x, "kl_p99"), ab_render_num(x, "kl_max"));
		}
		ab_text_puts(t, "</tbody></table>\n");
		const json_t *per = json_object_get(m, "per_position");
		if (json_array_size(json_object_get(json_object_get(per, "kl"), "base")) > 0) {
			kl_plot(t, per);
			continue;
		}
		/* Older results carry only the per-side summary. */
		ab_text_puts(t, "<figure class=\"plot accuracy\">");
		struct irow top1[2], kl[2];
		for (int s = 0; s < 2; s++) {
			const json_t *x = s ? h : b;
			top1[s] = (struct irow){ sides[s], sides[s], ab_render_num(x, "top1"), ab_render_num_at(x, "top1_ci", 0),
				ab_render_num_at(x, "top1_ci", 1) };
			kl[s] = (struct irow){ sides[s], sides[s], ab_render_num(x, "kl_mean"), ab_render_num_at(x, "kl_ci", 0),
				ab_render_num_at(x, "kl_ci", 1) };
		}
		interval_rows(t, "top-1 agreement with the reference", top1, 2, ab_render_num(th, "top1_min"), "top1_min");
		interval_rows(t, "mean KL from the reference", kl, 2, ab_render_num(th, "kl_max"), "kl_max");
		ab_text_puts(t, "<figcaption>Per-side estimates with their 95% intervals against the gate thresholds "
			"(this result has no per-position record).</figcaption></figure>\n");
	}
}


static void medians(struct ab_text *t, const json_t *m)
{
	double b = ab_render_num(json_object_get(m, "base"), "median"), h = ab_render_num(json_object_get(m, "head"), "median");
	if (m == NULL || !isfinite(b) || !isfinite(h))
		ab_text_puts(t, "n/a");
	else
		ab_text_printf(t, "%.2f \xe2\x86\x92 %.2f", b, h);
}

void ab_html_spec_table(struct ab_text *t, const json_t *doc)
{
	const json_t *metrics = json_object_get(doc, "metrics"), *models = json_object_get(json_object_get(doc, "spec"), "models");
	size_t i;
	const json_t *m;
	int rows = 0;
	json_array_foreach(metrics, i, m) {
		const char *name = ab_render_str(m, "name"), *model = ab_render_str(m, "model");
		if (!name || strcmp(name, "spec_decode_tps") != 0)
			continue;
		long long ctx = ab_render_int(m, "ctx", 0);
		if (rows++ == 0)
			ab_text_puts(t, "<table><thead><tr><th>model</th><th>ctx</th><th>spec tok/s base \xe2\x86\x92 head</th>"
				"<th>\xce\x94 (95% CI)</th><th>\xcf\x84 base \xe2\x86\x92 head</th><th>speedup vs plain</th>"
				"<th>exact (head)</th></tr></thead><tbody>\n");
		char c[24], pa[32], pb[32], pc[32];
		ab_render_ctx(c, sizeof(c), ctx);
		ab_text_puts(t, "<tr><td>");
		ab_text_html(t, model, 40);
		ab_text_printf(t, "</td><td class=\"n\">%s</td><td class=\"n\">", c);
		medians(t, m);
		ab_text_pct(pa, sizeof(pa), ab_render_num(m, "ratio"));
		ab_text_pct(pb, sizeof(pb), ab_render_num_at(m, "ci", 0));
		ab_text_pct(pc, sizeof(pc), ab_render_num_at(m, "ci", 1));
		ab_text_printf(t, "</td><td>%s (%s \xe2\x80\xa6 %s)</td><td class=\"n\">", pa, pb, pc);
		medians(t, ab_render_metric_find(metrics, "tau", model, ctx));
		ab_text_puts(t, "</td><td class=\"n\">");
		medians(t, ab_render_metric_find(metrics, "spec_speedup", model, ctx));
		const json_t *e = json_object_get(json_object_get(models, model ? model : ""), "head");
		if (json_is_object(e))
			ab_text_printf(t, "</td><td class=\"n %s\">%lld/%lld</td></tr>\n",
				ab_render_int(e, "identical", 0) == ab_render_int(e, "compared", 0) ? "good" : "bad",
				ab_render_int(e, "identical", 0), ab_render_int(e, "compared", 0));
		else
			ab_text_puts(t, "</td><td>n/a</td></tr>\n");
	}
	if (rows)
		ab_text_puts(t, "</tbody></table>\n");
	else
		ab_text_puts(t, "<p>No speculative decoding series were measured.</p>\n");
}

static void gates_table(struct ab_text *t, const json_t *gates)
{
	ab_text_puts(t, "<section id=\"gates\"><h2>Gates</h2><table><thead><tr><th>gate</th><th>model</th><th>value</th>"
		"<th>threshold</th><th>result</th><th>detail</th></tr></thead><tbody>\n");
	size_t i;
	const json_t *g;
	json_array_foreach(gates, i, g) {
		char value[32], threshold[32];
		ab_render_value(value, sizeof(value), ab_render_num(g, "value"));
		ab_render_value(threshold, sizeof(threshold), ab_render_num(g, "threshold"));
		int error = json_is_true(json_object_get(g, "error")), pass = json_is_true(json_object_get(g, "pass"));
		int advisory = json_is_true(json_object_get(g, "advisory"));
		const char *res = error ? "not measured" : pass ? "pass" : advisory ? "warn" : "fail";
		ab_text_printf(t, "<tr class=\"%s\"><td>", error || (!pass && advisory) ? "unsure" : pass ? "good" : "bad");
		ab_text_html(t, ab_render_str(g, "name"), 40);
		ab_text_puts(t, "</td><td>");
		ab_text_html(t, ab_render_str(g, "model"), 40);
		ab_text_printf(t, "</td><td class=\"n\">%s</td><td class=\"n\">", value);
		ab_text_html(t, ab_render_str(g, "op"), 3);
		ab_text_printf(t, " %s</td><td>%s</td><td>", threshold, res);
		ab_text_html(t, ab_render_str(g, "detail"), 300);
		ab_text_puts(t, "</td></tr>\n");
	}
	ab_text_puts(t, "</tbody></table></section>\n");
}

static void dd(struct ab_text *t, const char *what, const char *value, size_t max)
{
	if (value == NULL)
		return;
	ab_text_printf(t, "<dt>%s</dt><dd>", what);
	ab_text_html(t, value, max);
	ab_text_puts(t, "</dd>");
}

static void environment(struct ab_text *t, const json_t *env)
{
	size_t i;
	const json_t *gpu;
	ab_text_puts(t, "<dl class=\"env\">");
	json_array_foreach(json_object_get(env, "gpus"), i, gpu) {
		ab_text_puts(t, "<dt>GPU</dt><dd>");
		ab_text_html(t, ab_render_str(gpu, "name"), 60);
		const char *driver = ab_render_str(gpu, "driver_version");
		if (driver || (driver = ab_render_str(gpu, "driver"))) {
			ab_text_puts(t, ", driver ");
			ab_text_html(t, driver, 24);
		}
		long long sm = ab_render_int(gpu, "clocks_sm_mhz", -1), sm_max = ab_render_int(gpu, "clocks_max_sm_mhz", -1);
		if (sm > 0)
			ab_text_printf(t, sm_max > 0 ? ", SM %lld/%lld MHz" : ", SM %lld MHz", sm, sm_max);
		ab_text_puts(t, "</dd>");
	}
	dd(t, "GPU query failed", ab_render_str(env, "gpu_query_error"), 200);
	for (int s = 0; s < 2; s++) {
		const json_t *r = json_object_get(json_object_get(env, "sut"), sides[s]);
		if (!json_is_object(r))
			continue;
		ab_text_printf(t, "<dt>%s SUT</dt><dd>", sides[s]);
		ab_text_html(t, ab_render_str(r, "engine"), 40);
		if (ab_render_str(r, "backend")) {
			ab_text_puts(t, "/");
			ab_text_html(t, ab_render_str(r, "backend"), 16);
		}
		ab_text_puts(t, " on ");
		ab_text_html(t, ab_render_str(r, "device"), 80);
		ab_text_puts(t, "</dd>");
	}
	const json_t *cpu = json_object_get(env, "cpu");
	if (ab_render_str(cpu, "model")) {
		ab_text_puts(t, "<dt>CPU</dt><dd>");
		ab_text_html(t, ab_render_str(cpu, "model"), 60);
		ab_text_printf(t, " x%lld</dd>", ab_render_int(cpu, "cores", 0));
	}
	dd(t, "host", ab_render_str(env, "host"), 60);
	dd(t, "kernel", ab_render_str(env, "kernel"), 80);
	const json_t *runs = json_object_get(env, "runs");
	if (ab_render_int(runs, "processes", -1) >= 0)
		ab_text_printf(t, "<dt>SUT processes</dt><dd>%lld, %lld retried%s</dd>", ab_render_int(runs, "processes", 0),
			ab_render_int(runs, "retries", 0), json_is_true(json_object_get(runs, "stopped_early")) ? ", stopped early" : "");
	ab_text_puts(t, "</dl>\n");
}

void ab_html_details(struct ab_text *t, const json_t *doc)
{
	if (json_array_size(json_object_get(doc, "gates")) > 0)
		gates_table(t, json_object_get(doc, "gates"));
	ab_text_puts(t, "<section id=\"details\"><h2>Environment and method</h2>\n");
	const json_t *failures = json_object_get(doc, "failures");
	for (int s = 0; s < 2; s++) {
		const json_t *f = json_object_get(failures, sides[s]);
		if (ab_render_int(f, "failed", 0) <= 0)
			continue;
		ab_text_printf(t, "<p class=\"bad\">%s: %lld of %lld samples failed, e.g. \xe2\x80\x9c", sides[s],
			ab_render_int(f, "failed", 0), ab_render_int(f, "total", 0));
		ab_text_html(t, ab_render_str(f, "example"), 200);
		ab_text_puts(t, "\xe2\x80\x9d</p>\n");
	}
	environment(t, json_object_get(doc, "environment"));
	if (ab_render_str(doc, "method")) {
		ab_text_puts(t, "<p class=\"method\"><b>Method:</b> ");
		ab_text_html(t, ab_render_str(doc, "method"), 1000);
		ab_text_puts(t, "</p>\n");
	}
	const json_t *tm = json_object_get(doc, "timing");
	static const char *const parts[] = { "build", "models", "measure", "accuracy", "total" };
	const char *sep = "<p>Timing: ";
	for (int i = 0; i < 5; i++) {
		char key[16];
		snprintf(key, sizeof(key), "%s_s", parts[i]);
		double v = ab_render_num(tm, key);
		if (isfinite(v)) {
			ab_text_printf(t, "%s%s %.1f s", sep, parts[i], v);
			sep = ", ";
		}
	}
	if (sep[0] == ',')
		ab_text_puts(t, "</p>\n");
	const json_t *build = json_object_get(doc, "build");
	for (int s = 0; s < 2; s++) {
		const json_t *b = json_object_get(build, sides[s]);
		if (!json_is_object(b))
			continue;
		const char *status = ab_render_str(b, "status");
		ab_text_printf(t, "<details%s><summary>%s build: ", status && strcmp(status, "ok") && strcmp(status, "not-run") ?
			" open" : "", sides[s]);
		ab_text_html(t, status, 16);
		if (ab_render_str(b, "detail")) {
			ab_text_puts(t, " \xe2\x80\x94 ");
			ab_text_html(t, ab_render_str(b, "detail"), 200);
		}
		ab_text_printf(t, " (%.1f s)</summary>", ab_render_num(b, "seconds"));
		if (ab_render_str(b, "log_tail")) {
			ab_text_puts(t, "<pre>");
			const char *tail = ab_render_str(b, "log_tail");
			/* pre keeps the lines: escape line by line */
			for (const char *p = tail; *p;) {
				size_t n = strcspn(p, "\n");
				struct ab_text line = { 0 };
				ab_text_append(&line, p, n);
				ab_text_html(t, line.buf ? line.buf : "", 4000);
				ab_text_free(&line);
				ab_text_puts(t, "\n");
				p += n + (p[n] == '\n');
			}
			ab_text_puts(t, "</pre>");
		}
		ab_text_puts(t, "</details>\n");
	}
	ab_text_puts(t, "</section>\n");
	char base[16], head[16];
	ab_render_short_sha(base, sizeof(base), ab_render_str(json_object_get(doc, "base"), "sha"));
	ab_render_short_sha(head, sizeof(head), ab_render_str(json_object_get(doc, "head"), "sha"));
	ab_text_printf(t, "<footer>abgate \xc2\xb7 base <code>%s</code> \xc2\xb7 head <code>%s</code> \xc2\xb7 seed ", base, head);
	ab_text_html(t, ab_render_str(doc, "seed"), 24);
	ab_text_puts(t, " \xc2\xb7 created ");
	ab_text_html(t, ab_render_str(doc, "created_at"), 32);
	ab_text_puts(t, " \xc2\xb7 ");
	ab_text_html(t, ab_render_str(doc, "schema"), 32);
	ab_text_puts(t, "</footer>\n");
}

/*
 * html_pages.c - the page chrome every HTML page shares (one inline style sheet, no script, no
 * external resource), the history page of a base branch (one plot per series: the base median with
 * its interval per stored evaluation), the calibration page and short status pages (see html.h).
 */
#include "html.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "render.h"
#include "svg.h"

static const char style[] =
	"body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1400px;padding:0 20px 40px;"
	"color:#1f2328;background:#fff}"
	"h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}"
	"h3{font-size:15px;margin:18px 0 6px}code{font:12px ui-monospace,monospace;background:#f6f8fa;padding:1px 4px;border-radius:4px}"
	"header.verdict{border-left:6px solid #8c959f;padding:12px 16px;margin:16px 0;background:#f6f8fa}"
	"header.reject{border-color:#cf222e;background:#fff5f5}header.tier{border-color:#1a7f37;background:#f3fbf5}"
	"header.infra{border-color:#bf8700;background:#fff8e5}.reason{font-size:15px}.note{color:#57606a}"
	"table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left}"
	"th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}"
	"tr.bad td{background:#fff1f0}tr.good td{background:#f0faf2}.bad{color:#cf222e}.good{color:#1a7f37}"
	"figure{margin:10px 0}figcaption{font-size:12px;color:#57606a;max-width:940px}"
	".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(450px,1fr));gap:4px 16px}"
	"svg{display:block;max-width:100%;height:auto;font:11px system-ui,sans-serif}"
	"svg text{fill:#57606a}svg .name{fill:#1f2328}.axis line{stroke:#eaeef2}"
	".band{fill:#eaeef2}.zero{stroke:#57606a}.floor{stroke:#cf222e;stroke-dasharray:4 3}text.floor{fill:#cf222e;stroke:none}"
	".tier{stroke:#1a7f37;stroke-dasharray:2 3}text.tier{fill:#1a7f37;stroke:none}"
	".ci{stroke-width:5;stroke:#8c959f}.adj{stroke-width:1.5;stroke:#8c959f}.est{fill:#1f2328}"
	".row.bad .ci,.row.bad .adj{stroke:#cf222e}.row.good .ci,.row.good .adj{stroke:#1a7f37}"
	".row.unsure .ci{stroke:#bf8700}.row.unsure .adj{stroke:#bf8700}"
	".dots{fill:none}.dots.base{stroke:#0969da;opacity:.75}.dots.head{stroke:#e16f24;opacity:.75}.dots.fail{stroke:#cf222e}"
	".median{stroke-width:1.2;stroke-dasharray:5 3}.median.base{stroke:#0969da}.median.head{stroke:#e16f24}"
	".batch{stroke:#8c959f;stroke-dasharray:1 2}.miss{stroke:#cf222e;stroke-width:1}"
	".ci.base{stroke:#0969da}.ci.head{stroke:#e16f24}.est.base{fill:#0969da}.est.head{fill:#e16f24}"
	".trend{fill:none;stroke:#0969da;stroke-width:1.2}.iv{stroke:#0969da;stroke-width:2;opacity:.5}.pt{fill:#0969da}"
	".key.base{color:#0969da}.key.head{color:#e16f24}.legend{font-size:12px;color:#57606a}"
	"dl.env{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}dt{font-weight:600}dd{margin:0}"
	"pre{font:12px ui-monospace,monospace;background:#f6f8fa;padding:8px;overflow:auto;max-height:360px}"
	"footer{margin-top:30px;font-size:12px;color:#57606a}";

void ab_html_page_begin(struct ab_text *t, const char *title)
{
	ab_text_puts(t, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
	ab_text_html(t, title, 200);
	ab_text_printf(t, "</title><style>%s</style></head><body>\n", style);
}

void ab_html_page_end(struct ab_text *t)
{
	ab_text_puts(t, "</body></html>\n");
}

static int finish(char **out, struct ab_text *t, const char *what)
{
	if (t->failed || (*out = ab_text_take(t)) == NULL) {
		ab_text_free(t);
		return ab_error_set("html %s: out of memory", what);
	}
	return 0;
}

int ab_html_render_message(char **out, const char *title, const char *text)
{
	struct ab_text t = { 0 };
	ab_html_page_begin(&t, title);
	ab_text_puts(&t, "<h1>");
	ab_text_html(&t, title, 200);
	ab_text_puts(&t, "</h1><p>");
	ab_text_html(&t, text, 1000);
	ab_text_puts(&t, "</p>\n");
	ab_html_page_end(&t);
	return finish(out, &t, "message");
}

/* One series over the evaluations: interval bars, the medians joined by a line. */
static void history_plot(struct ab_text *t, const json_t *series, size_t n_evals, const json_t *evals)
{
	const json_t *points = json_object_get(series, "points");
	double lo = INFINITY, hi = -INFINITY;
	size_t i;
	const json_t *p;
	json_array_foreach(points, i, p) {
		double v[3] = { ab_render_num(p, "median"), ab_render_num(p, "lo"), ab_render_num(p, "hi") };
		for (int k = 0; k < 3; k++)
			if (isfinite(v[k])) {
				lo = v[k] < lo ? v[k] : lo;
				hi = v[k] > hi ? v[k] : hi;
			}
	}
	ab_scale_pad(&lo, &hi, 0.08);
	const int w = 460, h = 180, left = 56, right = 10, top = 10, bottom = 24;
	struct ab_scale x = { -0.5, (double)(n_evals ? n_evals : 1) - 0.5, left, w - right }, y = { lo, hi, h - bottom, top };
	char c[24];
	ab_render_ctx(c, sizeof(c), ab_render_int(series, "ctx", 0));
	ab_text_puts(t, "<figure class=\"plot history\">");
	ab_svg_begin(t, w, h, "base median per evaluation");
	ab_svg_yaxis(t, &y, left, w - right, AB_SVG_NUM);
	ab_svg_xaxis(t, &x, top, h - bottom, AB_SVG_INT);
	ab_text_puts(t, "<path class=\"iv\" d=\"");
	json_array_foreach(points, i, p) {
		double px = ab_scale_px(&x, (double)ab_render_int(p, "eval", 0));
		double l = ab_render_num(p, "lo"), u = ab_render_num(p, "hi");
		if (isfinite(l) && isfinite(u))
			ab_text_printf(t, "M%.1f %.1fV%.1f", px, ab_scale_px(&y, l), ab_scale_px(&y, u));
	}
	ab_text_puts(t, "\"/><path class=\"trend\" d=\"");
	const char *cmd = "M";
	json_array_foreach(points, i, p) {
		double m = ab_render_num(p, "median");
		if (!isfinite(m))
			continue;
		ab_text_printf(t, "%s%.1f %.1f", cmd, ab_scale_px(&x, (double)ab_render_int(p, "eval", 0)), ab_scale_px(&y, m));
		cmd = "L";
	}
	ab_text_puts(t, "\"/>");
	json_array_foreach(points, i, p) {
		double m = ab_render_num(p, "median");
		long long e = ab_render_int(p, "eval", 0);
		if (!isfinite(m))
			continue;
		ab_text_printf(t, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>evaluation %lld: median %.4g "
			"(%.4g \xe2\x80\xa6 %.4g), n %lld</title></circle>", ab_scale_px(&x, (double)e), ab_scale_px(&y, m),
			ab_render_int(json_array_get(evals, (size_t)e), "id", 0), m, ab_render_num(p, "lo"), ab_render_num(p, "hi"),
			ab_render_int(p, "n", 0));
	}
	ab_svg_end(t);
	ab_text_puts(t, "<figcaption><b>");
	ab_text_html(t, ab_render_str(series, "model"), 40);
	ab_text_puts(t, " \xc2\xb7 ");
	ab_text_html(t, ab_render_str(series, "metric"), 32);
	ab_text_printf(t, " \xc2\xb7 %s</b> \xc2\xb7 %zu evaluations</figcaption></figure>\n", c, json_array_size(points));
}

int ab_html_render_history(char **out, const json_t *hist)
{
	struct ab_text t = { 0 };
	if (out == NULL || !json_is_object(hist))
		return ab_error_setc(AB_EINVALID, "html: the history is not an object");
	const json_t *evals = json_object_get(hist, "evaluations"), *series = json_object_get(hist, "series");
	ab_html_page_begin(&t, "abgate history");
	ab_text_puts(&t, "<header class=\"verdict\"><h1>History of ");
	ab_text_html(&t, ab_render_str(hist, "repo"), 100);
	ab_text_puts(&t, " <code>");
	ab_text_html(&t, ab_render_str(hist, "base"), 80);
	ab_text_puts(&t, "</code></h1><p>Suite ");
	ab_text_html(&t, ab_render_str(hist, "suite"), 64);
	ab_text_printf(&t, " \xc2\xb7 %zu stored evaluations, oldest first. Each point is the base side's median in one "
		"evaluation with its 95%% distribution-free interval (order statistics of that evaluation's base samples): "
		"drift of the base branch and of the machine shows as movement across evaluations.</p></header>\n",
		json_array_size(evals));
	ab_text_puts(&t, "<section id=\"history\" class=\"plots\"><h2>Series</h2>\n");
	if (json_array_size(series) == 0)
		ab_text_puts(&t, "<p>No stored evaluation of this repository and suite has base samples.</p>\n");
	else
		ab_text_puts(&t, "<div class=\"grid\">\n");
	size_t i;
	const json_t *s;
	json_array_foreach(series, i, s)
		history_plot(&t, s, json_array_size(evals), evals);
	if (json_array_size(series) > 0)
		ab_text_puts(&t, "</div>\n");
	ab_text_puts(&t, "</section>\n<section id=\"evaluations\"><h2>Evaluations</h2><table><thead><tr><th>#</th>"
		"<th>evaluation</th><th>created</th><th>base</th><th>verdict</th></tr></thead><tbody>\n");
	const json_t *e;
	json_array_foreach(evals, i, e) {
		char sha[16];
		long long id = ab_render_int(e, "id", 0);
		ab_render_short_sha(sha, sizeof(sha), ab_render_str(e, "base_sha"));
		ab_text_printf(&t, "<tr><td class=\"n\">%zu</td><td><a href=\"/runs/%lld\">%lld</a></td><td>", i, id, id);
		ab_text_html(&t, ab_render_str(e, "created_at"), 32);
		ab_text_printf(&t, "</td><td><code>%s</code></td><td>", sha);
		ab_text_html(&t, ab_render_str(e, "label"), 60);
		ab_text_puts(&t, "</td></tr>\n");
	}
	ab_text_puts(&t, "</tbody></table></section>\n");
	ab_html_page_end(&t);
	return finish(out, &t, "history");
}

int ab_html_render_calibration(char **out, const json_t *cals)
{
	struct ab_text t = { 0 };
	ab_html_page_begin(&t, "abgate calibration");
	ab_text_puts(&t, "<header class=\"verdict\"><h1>Calibration</h1><p>The latest calibration per suite: how often "
		"abgate labels an A/A change (false positives) and how often it catches a known one (power).</p></header>\n"
		"<section id=\"calibration\">\n");
	if (json_array_size(cals) == 0)
		ab_text_puts(&t, "<p>No calibration is stored. Run <code>abgate calibrate</code> to make one.</p>\n");
	size_t i;
	const json_t *c;
	json_array_foreach(cals, i, c) {
		ab_text_puts(&t, "<h3>");
		ab_text_html(&t, ab_render_str(c, "suite"), 64);
		ab_text_puts(&t, " \xc2\xb7 ");
		ab_text_html(&t, ab_render_str(c, "created_at"), 32);
		ab_text_puts(&t, "</h3><table><tbody>\n");
		const char *key;
		json_t *v;
		json_object_foreach((json_t *)c, key, v) {
			if (json_is_object(v) || json_is_array(v))
				continue;          /* scalars only: the page shows the figures, the JSON has the rest */
			ab_text_puts(&t, "<tr><th>");
			ab_text_html(&t, key, 64);
			ab_text_puts(&t, "</th><td>");
			if (json_is_string(v))
				ab_text_html(&t, json_string_value(v), 200);
			else if (json_is_number(v))
				ab_text_printf(&t, "%.6g", json_number_value(v));
			else
				ab_text_puts(&t, json_is_true(v) ? "true" : json_is_false(v) ? "false" : "null");
			ab_text_puts(&t, "</td></tr>\n");
		}
		ab_text_puts(&t, "</tbody></table>\n");
	}
	ab_text_puts(&t, "</section>\n");
	ab_html_page_end(&t);
	return finish(out, &t, "calibration");
}

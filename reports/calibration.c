/*
 * calibration.c - markdown and citation of a calibration document (see calibration.h).
 */
#include "calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "render.h"
#include "speed.h"
#include "text.h"

static void series_name(char *buf, size_t size, const json_t *s)
{
	char ctx[32];
	ab_speed_ctx_name(ctx, sizeof(ctx), (int)ab_render_int(s, "ctx", 0));
	const char *metric = ab_render_str(s, "metric");
	snprintf(buf, size, "%s %s", metric ? ab_speed_metric_short(metric) : "?", ctx);
}

void ab_calibration_cite(char *buf, size_t size, const json_t *c)
{
	buf[0] = '\0';
	const json_t *fpr = json_object_get(c, "fpr");
	if (!json_is_object(c) || !json_is_object(fpr))
		return;
	double best = INFINITY, worst = -INFINITY;
	char best_name[64] = "", worst_name[64] = "";
	size_t i;
	const json_t *s;
	json_array_foreach(json_object_get(c, "series"), i, s) {
		double mde = ab_render_num(s, "mde");
		if (!json_is_true(json_object_get(s, "gating")) || !isfinite(mde))
			continue;
		if (mde < best) {
			best = mde;
			series_name(best_name, sizeof(best_name), s);
		}
		if (mde > worst) {
			worst = mde;
			series_name(worst_name, sizeof(worst_name), s);
		}
	}
	int n = snprintf(buf, size, "Calibration #%lld (%lld A/A runs of %s): FPR %lld/%lld, \xe2\x89\xa4 %.1f%%",
		ab_render_int(c, "id", 0), ab_render_int(fpr, "runs", 0), ab_render_str(c, "ref") ? ab_render_str(c, "ref") : "?",
		ab_render_int(fpr, "false_positives", 0), ab_render_int(fpr, "runs", 0), ab_render_num(fpr, "upper") * 100);
	if (n < 0 || (size_t)n >= size || !isfinite(best))
		return;
	if (best == worst)
		snprintf(buf + n, size - (size_t)n, "; %.0f%% power to REJECT a slowdown of %.1f%% (%s)",
			ab_render_num(c, "power") * 100, best * 100, best_name);
	else
		snprintf(buf + n, size - (size_t)n, "; %.0f%% power to REJECT a slowdown of %.1f%% (%s) to %.1f%% (%s)",
			ab_render_num(c, "power") * 100, best * 100, best_name, worst * 100, worst_name);
}

static void pct(char *buf, size_t size, double x)
{
	if (isfinite(x))
		snprintf(buf, size, "%.2f%%", x * 100);
	else
		snprintf(buf, size, "n/a");
}

int ab_calibration_markdown(char **out, const json_t *c)
{
	if (!json_is_object(c))
		return ab_error_setc(AB_EINVALID, "calibration: not an object");
	struct ab_text t = { 0 };
	char cite[512], a[32], b[32], m[32], r[32];
	const json_t *fpr = json_object_get(c, "fpr");
	ab_text_puts(&t, "### abgate calibration\n\n");
	ab_text_puts(&t, "Suite ");
	ab_text_md(&t, ab_render_str(json_object_get(c, "suite"), "name"), 64);
	ab_text_puts(&t, ", ref ");
	ab_text_md(&t, ab_render_str(c, "ref"), 64);
	ab_text_printf(&t, " (`%.12s`), %lld A/A evaluations", ab_render_str(c, "sha") ? ab_render_str(c, "sha") : "",
		ab_render_int(c, "runs", 0));
	if (ab_render_int(c, "infra_runs", 0) > 0)
		ab_text_printf(&t, " (%lld more ended in infra-error and are left out)", ab_render_int(c, "infra_runs", 0));
	ab_text_printf(&t, ".\n\n**False positives:** %lld of %lld A/A verdicts made a claim (%.1f%%); one-sided "
		"95%% Clopper-Pearson upper bound %.1f%%.\n\n", ab_render_int(fpr, "false_positives", 0),
		ab_render_int(fpr, "runs", 0), ab_render_num(fpr, "rate") * 100, ab_render_num(fpr, "upper") * 100);
	ab_text_printf(&t, "| series | pairs | noise (sd of log-ratio) | robust sd | MDE: REJECT with %.0f%% power "
		"| resolved (interval below 1 - margin) |\n|:--|--:|--:|--:|--:|--:|\n", ab_render_num(c, "power") * 100);
	size_t i;
	const json_t *s;
	json_array_foreach(json_object_get(c, "series"), i, s) {
		char name[96];
		series_name(name, sizeof(name), s);
		pct(a, sizeof(a), ab_render_num(s, "noise_sd"));
		pct(b, sizeof(b), ab_render_num(s, "noise_robust_sd"));
		pct(m, sizeof(m), ab_render_num(s, "mde"));
		pct(r, sizeof(r), ab_render_num(s, "mde_resolve"));
		ab_text_puts(&t, "| ");
		ab_text_md(&t, ab_render_str(s, "model"), 40);
		ab_text_printf(&t, " %s%s | %lld | %s | %s | %s | %s |\n", name,
			json_is_true(json_object_get(s, "gating")) ? "" : " (reported)", ab_render_int(s, "n_pairs", 0), a, b,
			json_is_true(json_object_get(s, "gating")) ? m : "-", json_is_true(json_object_get(s, "gating")) ? r : "-");
	}
	ab_calibration_cite(cite, sizeof(cite), c);
	ab_text_puts(&t, "\n<sub>");
	ab_text_md(&t, cite, 600);
	ab_text_printf(&t, ". MDE: the smallest slowdown the suite's own decision procedure (looks, equivalence stop, "
		"confirmation batch) REJECTs in %lld resampled evaluations built from the real A/A pairs.</sub>\n",
		ab_render_int(c, "resamples", 0));
	double lo = INFINITY, hi = -INFINITY;
	json_array_foreach(json_object_get(c, "series"), i, s) {
		double f = ab_render_num(s, "noise_scale");
		if (json_is_true(json_object_get(s, "gating")) && isfinite(f)) {
			lo = f < lo ? f : lo;
			hi = f > hi ? f : hi;
		}
	}
	if (ab_render_num(c, "noise_level") > 0 && isfinite(lo)) {
		ab_text_printf(&t, "<sub>Those pairs are first widened to the noise's %.0f%% upper confidence bound (x%.2f",
			ab_render_num(c, "noise_level") * 100, lo);
		if (hi - lo >= 0.005)
			ab_text_printf(&t, " to x%.2f", hi);
		ab_text_puts(&t, "): a calibration whose A/A pairs happened to be quiet does not claim a smaller MDE than "
			"the box delivers.</sub>\n");
	}
	if (t.failed) {
		ab_text_free(&t);
		return ab_error_set("calibration: out of memory");
	}
	*out = t.buf ? t.buf : strdup("");
	return *out ? 0 : ab_error_set("calibration: out of memory");
}

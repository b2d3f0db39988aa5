/*
 * markdown.c - GitHub markdown from a result document (see markdown.h). The document is rendered
 * in parts (head, metric rows, gates and notes, samples, footer) so that the size cap can drop
 * sample rows first and metric rows second while keeping the verdict and the footer whole.
 */
#include "markdown.h"
#include "calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "render.h"
#include "speed.h"
#include "text.h"

#define REF_MAX 80          /* characters of a ref name shown */
#define REASON_MAX 600
#define LOG_TAIL_MAX 3000

static const char *icon_for(const char *kind, const char *label)
{
	if (kind == NULL && label)
		kind = strstr(label, "REJECT") ? "reject" : strstr(label, "infra") ? "infra" :
			strstr(label, "none") ? "none" : "tier";
	if (kind == NULL)
		return "\xe2\x9d\x94";                      /* grey question mark */
	if (strcmp(kind, "reject") == 0)
		return "\xe2\x9d\x8c";                      /* cross mark */
	if (strcmp(kind, "infra") == 0)
		return "\xe2\x9a\xa0\xef\xb8\x8f";          /* warning sign */
	if (strcmp(kind, "none") == 0)
		return "\xe2\x9a\xaa";                      /* white circle */
	return "\xe2\x9c\x85";                          /* check mark */
}

static void label_span(struct ab_text *t, const char *label)
{
	if (ab_render_label_safe(label))
		ab_text_printf(t, "`%s`", label);
	else
		ab_text_md(t, label, 60);
}

static void side_line(struct ab_text *t, const char *what, const json_t *side)
{
	char sha[16];
	ab_render_short_sha(sha, sizeof(sha), ab_render_str(side, "sha"));
	ab_text_printf(t, "**%s** ", what);
	ab_text_md(t, ab_render_str(side, "ref"), REF_MAX);
	ab_text_printf(t, " (`%s`)", sha);
}

static void render_head(struct ab_text *t, const json_t *doc)
{
	const json_t *verdict = json_object_get(doc, "verdict");
	const char *label = ab_render_str(verdict, "label");
	ab_text_printf(t, "### %s abgate ", icon_for(ab_render_str(verdict, "kind"), label));
	label_span(t, label ? label : "eval:unknown");
	ab_text_puts(t, "\n\n");
	ab_text_md(t, ab_render_str(verdict, "reason"), REASON_MAX);
	ab_text_puts(t, "\n\n");
	size_t i;
	const json_t *note;
	json_array_foreach(json_object_get(verdict, "notes"), i, note) {
		ab_text_puts(t, "> **Note:** ");
		ab_text_md(t, json_string_value(note), REASON_MAX);
		ab_text_puts(t, "\n\n");
	}
	/* Unsandboxed PR code (issue 17) is shown in every report that comes from such a run. */
	const json_t *sandbox = json_object_get(json_object_get(doc, "environment"), "sandbox");
	if (json_is_false(json_object_get(sandbox, "enabled")))
		ab_text_puts(t, "> **Warning:** the PR's build and SUT ran **unsandboxed** (`--no-sandbox` / "
			"`\"sandbox\": {\"enabled\": false}`): with abgate's own rights.\n\n");
	side_line(t, "head", json_object_get(doc, "head"));
	ab_text_puts(t, " vs ");
	side_line(t, "base", json_object_get(doc, "base"));
	const json_t *pairs = json_object_get(doc, "pairs");
	long long count = ab_render_int(pairs, "count", -1);
	if (count >= 0) {
		ab_text_printf(t, " \xc2\xb7 %lld pairs (first look %lld, cap %lld)", count,
			ab_render_int(pairs, "min", 0), ab_render_int(pairs, "max", 0));
		long long confirm = ab_render_int(pairs, "confirmation", 0);
		if (confirm > 0)
			ab_text_printf(t, " + %lld confirmation pairs", confirm);
	}
	ab_text_puts(t, "\n\n");
	ab_text_puts(t, "Labels:");
	const json_t *l;
	json_array_foreach(json_object_get(verdict, "labels"), i, l) {
		ab_text_puts(t, " ");
		label_span(t, json_string_value(l));
	}
	ab_text_puts(t, "\n\n");
}

static void pct_cell(struct ab_text *t, double ratio, double lo, double hi)
{
	char a[32], b[32], c[32];
	ab_text_pct(a, sizeof(a), ratio);
	ab_text_pct(b, sizeof(b), lo);
	ab_text_pct(c, sizeof(c), hi);
	if (!isfinite(lo) || !(lo > 0))
		snprintf(b, sizeof(b), "n/a");
	ab_text_printf(t, "%s (%s \xe2\x80\xa6 %s)", a, b, c);   /* 95% CI always beside the estimate */
}

static void gate_cell(struct ab_text *t, const json_t *m)
{
	char pct[32];
	if (!json_is_true(json_object_get(m, "gating"))) {
		ab_text_puts(t, "advisory");
		return;
	}
	const char *tier = ab_render_str(m, "tier");
	if (json_is_true(json_object_get(m, "confirmed"))) {
		ab_text_puts(t, "\xe2\x9d\x8c ");
		label_span(t, ab_render_str(m, "label"));
	} else if (json_is_true(json_object_get(m, "regression"))) {
		ab_text_puts(t, "\xe2\x9a\xa0\xef\xb8\x8f regression not confirmed");
	} else if (tier) {
		ab_text_pct(pct, sizeof(pct), ab_render_num_at(m, "ci_adj", 0));
		ab_text_puts(t, "\xe2\x9c\x85 ");
		ab_text_md(t, tier, 4);
		ab_text_printf(t, " (verified \xe2\x89\xa5 %s)", pct);
	} else {
		ab_text_puts(t, "\xe2\x80\x94");
	}
}

static void metric_row(struct ab_text *t, const json_t *m)
{
	char ctx[24], base[32], head[32];
	const json_t *b = json_object_get(m, "base"), *h = json_object_get(m, "head");
	ab_render_ctx(ctx, sizeof(ctx), ab_render_int(m, "ctx", 0));
	ab_render_value(base, sizeof(base), ab_render_num(b, "median"));
	ab_render_value(head, sizeof(head), ab_render_num(h, "median"));
	const char *name = ab_render_str(m, "name");
	const char *shown = name && strcmp(name, "decode_tps") == 0 ? "decode tok/s" :
		name && strcmp(name, "prefill_tps") == 0 ? "prefill tok/s" : name;
	ab_text_puts(t, "| ");
	ab_text_md(t, ab_render_str(m, "model"), 40);
	ab_text_puts(t, " | ");
	ab_text_md(t, shown, 32);
	ab_text_printf(t, " | %s | %s | %s | ", ctx, base, head);
	pct_cell(t, ab_render_num(m, "ratio"), ab_render_num_at(m, "ci", 0), ab_render_num_at(m, "ci", 1));
	ab_text_printf(t, " | %lld/%lld | ", ab_render_int(m, "n_pairs", 0), ab_render_int(m, "pairs", 0));
	ab_text_md(t, ab_render_str(m, "outcome"), 16);
	ab_text_puts(t, " | ");
	gate_cell(t, m);
	ab_text_puts(t, " |\n");
}

static const char metric_header[] =
	"| model | metric | ctx | base | head | \xce\x94 (95% CI) | pairs | outcome | gate |\n"
	"|:--|:--|--:|--:|--:|:--|--:|:--|:--|\n";

static int is_spec_metric(const json_t *m)
{
	const char *family = ab_render_str(m, "family");
	return family && strcmp(family, "spec") == 0;
}

/* A row that says something: a claim, a regression (confirmed or not), or a clear outcome. */
static int is_decisive(const json_t *m)
{
	const char *outcome = ab_render_str(m, "outcome");
	return json_is_true(json_object_get(m, "regression")) || json_is_true(json_object_get(m, "confirmed")) ||
		ab_render_str(m, "tier") != NULL ||
		(outcome && (!strcmp(outcome, "regressed") || !strcmp(outcome, "improved")));
}


/* "4.02 → 3.98" from a metric's base and head medians, with a decimal count that fits the values. */
static void medians_cell(struct ab_text *t, const json_t *m, const char *unit)
{
	if (m == NULL) {
		ab_text_puts(t, "n/a");
		return;
	}
	char b[32], h[32];
	double vb = ab_render_num(json_object_get(m, "base"), "median"), vh = ab_render_num(json_object_get(m, "head"), "median");
	snprintf(b, sizeof(b), isfinite(vb) ? "%.2f%s" : "n/a", vb, unit);
	snprintf(h, sizeof(h), isfinite(vh) ? "%.2f%s" : "n/a", vh, unit);
	ab_text_printf(t, "%s \xe2\x86\x92 %s", b, h);
}

/* "24/24" of one side's exactness record in doc.spec.models[model], "n/a" without one. */
static void exact_cell(struct ab_text *t, const json_t *doc, const char *model, const char *side)
{
	const json_t *e = json_object_get(json_object_get(json_object_get(json_object_get(doc, "spec"), "models"),
		model ? model : ""), side);
	if (!json_is_object(e)) {
		ab_text_puts(t, "n/a");
		return;
	}
	long long compared = ab_render_int(e, "compared", 0), identical = ab_render_int(e, "identical", 0);
	ab_text_printf(t, "%s%lld/%lld", identical == compared ? "" : "\xe2\x9d\x8c ", identical, compared);
}

/* Speculative decoding at a glance: per model x spec context, spec tok/s base and head with its
 * interval, tau base -> head, the speedup over plain decode on each side, exactness, the gate. */
static void render_spec(struct ab_text *t, const json_t *doc)
{
	const json_t *metrics = json_object_get(doc, "metrics"), *m;
	size_t i;
	int rows = 0;
	json_array_foreach(metrics, i, m) {
		const char *name = ab_render_str(m, "name"), *model = ab_render_str(m, "model");
		if (!name || strcmp(name, "spec_decode_tps") != 0)
			continue;
		long long ctx_value = ab_render_int(m, "ctx", 0);
		if (rows++ == 0)
			ab_text_puts(t, "\n**Speculative decoding**\n\n"
				"| model | ctx | spec tok/s base | head | \xce\x94 (95% CI) | \xcf\x84 base \xe2\x86\x92 head | "
				"speedup vs plain | exact (head) | gate |\n"
				"|:--|--:|--:|--:|:--|:--|:--|:--|:--|\n");
		char ctx[24], base[32], head[32];
		ab_render_ctx(ctx, sizeof(ctx), ctx_value);
		ab_render_value(base, sizeof(base), ab_render_num(json_object_get(m, "base"), "median"));
		ab_render_value(head, sizeof(head), ab_render_num(json_object_get(m, "head"), "median"));
		const json_t *tau = ab_render_metric_find(metrics, "tau", model, ctx_value);
		ab_text_puts(t, "| ");
		ab_text_md(t, model, 40);
		ab_text_printf(t, " | %s | %s | %s | ", ctx, base, head);
		pct_cell(t, ab_render_num(m, "ratio"), ab_render_num_at(m, "ci", 0), ab_render_num_at(m, "ci", 1));
		ab_text_puts(t, " | ");
		medians_cell(t, tau, "");
		ab_text_puts(t, " | ");
		medians_cell(t, ab_render_metric_find(metrics, "spec_speedup", model, ctx_value), "\xc3\x97");
		ab_text_puts(t, " | ");
		exact_cell(t, doc, model, "head");
		ab_text_puts(t, " | ");
		/* The worse of the two gating claims of this context: a tau regression, else spec speed. */
		if (tau && (json_is_true(json_object_get(tau, "confirmed")) || json_is_true(json_object_get(tau, "regression"))))
			gate_cell(t, tau);
		else
			gate_cell(t, m);
		ab_text_puts(t, " |\n");
	}
}

/* The engine-clock cross-check: per series, how much faster the SUT's own stats say it was than the
 * harness measured (median harness time / engine time), base and head. */
static void render_engine_clock(struct ab_text *t, const json_t *doc)
{
	const json_t *clock = json_object_get(doc, "engine_clock");
	if (json_array_size(json_object_get(clock, "series")) == 0)
		return;
	ab_text_printf(t, "\n<sub>**Engine clock** (median harness time / engine time, base \xe2\x86\x92 head; "
		"warning at %.2fx):", ab_render_num(clock, "threshold"));
	size_t i;
	const json_t *s;
	json_array_foreach(json_object_get(clock, "series"), i, s) {
		char ctx[32], b[32], h[32];
		ab_speed_ctx_name(ctx, sizeof(ctx), (int)ab_render_int(s, "ctx", 0));
		double rb = ab_render_num(s, "base_ratio"), rh = ab_render_num(s, "head_ratio");
		snprintf(b, sizeof(b), isfinite(rb) ? "%.2f" : "n/a", rb);
		snprintf(h, sizeof(h), isfinite(rh) ? "%.2f" : "n/a", rh);
		const char *metric = ab_render_str(s, "metric");
		ab_text_printf(t, "%s %s%s %s %s \xe2\x86\x92 %s", i ? ";" : "",
			json_is_true(json_object_get(s, "flagged")) ? "\xe2\x9a\xa0\xef\xb8\x8f " : "",
			metric ? ab_speed_metric_short(metric) : "?", ctx, b, h);
	}
	ab_text_puts(t, "</sub>\n");
}

static void render_gates(struct ab_text *t, const json_t *doc)
{
	const json_t *gates = json_object_get(doc, "gates");
	if (json_array_size(gates) == 0)
		return;
	ab_text_puts(t, "\n| gate | model | value | threshold | result | detail |\n"
		"|:--|:--|--:|--:|:--|:--|\n");
	size_t i;
	const json_t *g;
	json_array_foreach(gates, i, g) {
		char value[32], threshold[32];
		ab_render_value(value, sizeof(value), ab_render_num(g, "value"));
		ab_render_value(threshold, sizeof(threshold), ab_render_num(g, "threshold"));
		const char *result = json_is_true(json_object_get(g, "error")) ? "\xe2\x9a\xa0\xef\xb8\x8f not measured" :
			json_is_true(json_object_get(g, "pass")) ? "\xe2\x9c\x85 pass" :
			json_is_true(json_object_get(g, "advisory")) ? "\xe2\x9a\xa0\xef\xb8\x8f warn" :
			"\xe2\x9d\x8c fail";
		ab_text_puts(t, "| ");
		ab_text_md(t, ab_render_str(g, "name"), 40);
		ab_text_puts(t, " | ");
		ab_text_md(t, ab_render_str(g, "model"), 40);
		ab_text_printf(t, " | %s | ", value);
		ab_text_md(t, ab_render_str(g, "op"), 3);
		ab_text_printf(t, " %s | %s | ", threshold, result);
		ab_text_md(t, ab_render_str(g, "detail"), 200);
		ab_text_puts(t, " |\n");
	}
}

static void failure_side(struct ab_text *t, const char *what, const json_t *f)
{
	long long failed = ab_render_int(f, "failed", 0);
	ab_text_printf(t, "%s %lld of %lld", what, failed, ab_render_int(f, "total", 0));
	if (failed == 0)
		return;
	const char *sep = " (";
	for (int k = 0; k < AB_FAILURE_KIND_COUNT; k++) {
		const char *kind = ab_failure_kind_name(k);
		long long c = ab_render_int(f, kind, 0);
		if (c > 0) {
			ab_text_printf(t, "%s%lld %s", sep, c, kind);
			sep = ", ";
		}
	}
	ab_text_puts(t, "; e.g. \xe2\x80\x9c");
	ab_text_md(t, ab_render_str(f, "example"), 120);
	ab_text_puts(t, "\xe2\x80\x9d)");
}

/* A fenced block that the content cannot close: the fence is longer than any backtick run in it. */
static void code_block(struct ab_text *t, const char *s, size_t max_bytes)
{
	size_t n = strlen(s), run = 0, longest = 0;
	if (n > max_bytes) {
		s += n - max_bytes;
		while ((*s & 0xc0) == 0x80)
			s++;
	}
	for (const char *p = s; *p; p++) {
		run = *p == '`' ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	size_t fence = longest < 3 ? 3 : longest + 1;
	for (size_t i = 0; i < fence; i++)
		ab_text_puts(t, "`");
	ab_text_puts(t, "text\n");
	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\n' || c == '\t' || c >= 0x20)
			ab_text_append(t, p, 1);
	}
	ab_text_puts(t, "\n");
	for (size_t i = 0; i < fence; i++)
		ab_text_puts(t, "`");
	ab_text_puts(t, "\n");
}

/* Starts one part of the environment line: the separator, `what`, then `value` escaped. */
static void env_part(struct ab_text *t, const char **sep, const char *what, const char *value,
	size_t max_chars)
{
	ab_text_puts(t, *sep);
	ab_text_puts(t, what);
	ab_text_md(t, value, max_chars);
	*sep = " \xc2\xb7 ";
}

/* The environment as one readable line: GPU(s) with driver and clocks, what each SUT said it ran
 * on, the host's CPU, and how many SUT processes ran (and were retried). Every piece is optional. */
static void environment_line(struct ab_text *t, const json_t *env)
{
	const char *sep = "";
	const json_t *gpus = json_object_get(env, "gpus");
	size_t i;
	const json_t *gpu;
	json_array_foreach(gpus, i, gpu) {
		if (i >= 2) {
			ab_text_printf(t, " (+%zu more)", json_array_size(gpus) - 2);
			break;
		}
		env_part(t, &sep, "GPU ", ab_render_str(gpu, "name"), 60);
		const char *driver = ab_render_str(gpu, "driver_version");
		if (driver == NULL)
			driver = ab_render_str(gpu, "driver");
		if (driver) {
			ab_text_puts(t, ", driver ");
			ab_text_md(t, driver, 24);
		}
		long long sm = ab_render_int(gpu, "clocks_sm_mhz", -1);
		long long sm_max = ab_render_int(gpu, "clocks_max_sm_mhz", -1);
		if (sm > 0)
			ab_text_printf(t, sm_max > 0 ? ", SM %lld/%lld MHz" : ", SM %lld MHz", sm, sm_max);
	}
	const char *gpu_error = ab_render_str(env, "gpu_query_error");
	if (gpu_error)
		env_part(t, &sep, "GPU query failed: ", gpu_error, 120);
	const json_t *sut = json_object_get(env, "sut");
	static const char *const sides[] = { "base", "head" };
	const char *base_dev = NULL;
	for (int s = 0; s < 2; s++) {
		const json_t *ready = json_object_get(sut, sides[s]);
		const char *engine = ab_render_str(ready, "engine"), *device = ab_render_str(ready, "device");
		if (engine == NULL && device == NULL)
			continue;
		if (s == 1 && base_dev && device && strcmp(base_dev, device) == 0)
			continue;   /* the same device line twice says nothing */
		if (s == 0)
			base_dev = device;
		env_part(t, &sep, s ? "head SUT " : "SUT ", engine, 40);
		const char *backend = ab_render_str(ready, "backend");
		if (backend) {
			ab_text_puts(t, "/");
			ab_text_md(t, backend, 16);
		}
		if (device) {
			ab_text_puts(t, " on ");
			ab_text_md(t, device, 80);
		}
	}
	const json_t *cpu = json_object_get(env, "cpu");
	const char *cpu_model = ab_render_str(cpu, "model");
	if (cpu_model) {
		env_part(t, &sep, "CPU ", cpu_model, 60);
		long long cores = ab_render_int(cpu, "cores", -1);
		if (cores > 0)
			ab_text_printf(t, " x%lld", cores);
	}
	const char *host = ab_render_str(env, "host");
	if (host)
		env_part(t, &sep, "host ", host, 60);
	const json_t *runs = json_object_get(env, "runs");
	long long procs = ab_render_int(runs, "processes", -1);
	if (procs >= 0) {
		ab_text_puts(t, sep);
		ab_text_printf(t, "%lld SUT processes, %lld retried", procs, ab_render_int(runs, "retries", 0));
		if (json_is_true(json_object_get(runs, "stopped_early")))
			ab_text_puts(t, ", stopped early");
	}
}

static void render_details(struct ab_text *t, const json_t *doc)
{
	const json_t *failures = json_object_get(doc, "failures");
	const json_t *fb = json_object_get(failures, "base"), *fh = json_object_get(failures, "head");
	if (ab_render_int(fb, "failed", 0) > 0 || ab_render_int(fh, "failed", 0) > 0) {
		ab_text_puts(t, "\n**Failed samples:** ");
		failure_side(t, "base", fb);
		ab_text_puts(t, "; ");
		failure_side(t, "head", fh);
		ab_text_puts(t, ".\n");
	}
	const char *method = ab_render_str(doc, "method");
	if (method) {
		ab_text_puts(t, "\n<sub>**Method:** ");
		ab_text_md(t, method, 800);
		char cite[512];
		ab_calibration_cite(cite, sizeof(cite), json_object_get(doc, "calibration"));
		if (cite[0]) {
			ab_text_puts(t, " ");
			ab_text_md(t, cite, 500);
			ab_text_puts(t, ".");
		}
		ab_text_puts(t, "</sub>\n");
	}
	const json_t *env = json_object_get(doc, "environment");
	if (json_object_size(env) > 0) {
		ab_text_puts(t, "\n<sub>**Environment:** ");
		environment_line(t, env);
		ab_text_puts(t, "</sub>\n");
	}
	const json_t *build = json_object_get(doc, "build");
	static const char *const sides[] = { "base", "head" };
	for (int i = 0; i < 2; i++) {
		const json_t *b = json_object_get(build, sides[i]);
		const char *status = ab_render_str(b, "status");
		const char *tail = ab_render_str(b, "log_tail");
		if (status == NULL || strcmp(status, "ok") == 0 || strcmp(status, "not-run") == 0)
			continue;
		ab_text_printf(t, "\n<details><summary>%s build %s: ", sides[i],
			strcmp(status, "failed") == 0 ? "failed" : "could not run");
		ab_text_md(t, ab_render_str(b, "detail"), 200);
		ab_text_puts(t, "</summary>\n\n");
		if (tail)
			code_block(t, tail, LOG_TAIL_MAX);
		ab_text_puts(t, "\n</details>\n");
	}
}

static void sample_row(struct ab_text *t, const json_t *s)
{
	char ctx[24], value[32];
	ab_render_ctx(ctx, sizeof(ctx), ab_render_int(s, "ctx", 0));
	ab_render_value(value, sizeof(value), ab_render_num(s, "value"));
	ab_text_puts(t, "| ");
	ab_text_md(t, ab_render_str(s, "side"), 8);
	ab_text_printf(t, " | %lld | %lld | %lld | ", ab_render_int(s, "pair", -1),
		ab_render_int(s, "batch", 0), ab_render_int(s, "order", 0));
	ab_text_md(t, ab_render_str(s, "model"), 40);
	ab_text_puts(t, " | ");
	ab_text_md(t, ab_render_str(s, "metric"), 32);
	ab_text_printf(t, " | %s | %s | ", ctx, value);
	if (json_is_true(json_object_get(s, "ok")))
		ab_text_puts(t, "ok");
	else
		ab_text_md(t, ab_render_str(s, "reason"), 120);
	ab_text_puts(t, " |\n");
}

static void render_footer(struct ab_text *t, const json_t *doc)
{
	char base[16], head[16];
	ab_render_short_sha(base, sizeof(base), ab_render_str(json_object_get(doc, "base"), "sha"));
	ab_render_short_sha(head, sizeof(head), ab_render_str(json_object_get(doc, "head"), "sha"));
	ab_text_printf(t, "\n<sub>abgate \xc2\xb7 base `%s` \xc2\xb7 head `%s` \xc2\xb7 seed ", base, head);
	ab_text_md(t, ab_render_str(doc, "seed"), 24);
	ab_text_puts(t, " \xc2\xb7 suite ");
	ab_text_md(t, ab_render_str(json_object_get(doc, "suite"), "name"), 64);
	ab_text_puts(t, " \xc2\xb7 ");
	ab_text_md(t, ab_render_str(doc, "schema"), 32);
	ab_text_puts(t, "</sub>\n");
}

int ab_markdown_render(char **out, const json_t *result, const struct ab_markdown_options *opts)
{
	struct ab_markdown_options o = { AB_MARKDOWN_MAX_CHARS, 1 };
	struct ab_text t = { 0 }, footer = { 0 }, row = { 0 };
	if (opts)
		o = *opts;
	if (o.max_chars == 0)
		o.max_chars = AB_MARKDOWN_MAX_CHARS;
	if (o.max_chars < 2000)
		o.max_chars = 2000;
	if (out == NULL || !json_is_object(result))
		return ab_error_setc(AB_EINVALID, "markdown: the result is not an object");

	render_footer(&footer, result);
	size_t reserve = footer.len + 400;     /* footer plus the "cut" notes */
	render_head(&t, result);

	/* Metric rows while they fit (a cap this small only bites on absurd documents). */
	const json_t *metrics = json_object_get(result, "metrics");
	size_t n_metrics = json_array_size(metrics), shown = 0;
	if (n_metrics > 0) {
		size_t plain = 0, cut = 0;
		for (size_t i = 0; i < n_metrics; i++)
			plain += !is_spec_metric(json_array_get(metrics, i));
		/* A long table keeps the decisive rows on top and folds the neutral ones away. */
		int fold = plain >= AB_MARKDOWN_FOLD_ROWS;
		ab_text_puts(&t, metric_header);
		for (int pass = 0; pass < (fold ? 2 : 1); pass++) {
			size_t neutral_shown = 0;
			for (size_t i = 0; i < n_metrics; i++) {
				const json_t *m = json_array_get(metrics, i);
				if (is_spec_metric(m) || (fold && is_decisive(m) == pass))
					continue;          /* spec rows: in the spec section below */
				ab_text_free(&row);
				metric_row(&row, m);
				if (t.len + row.len + reserve + 60 > o.max_chars) {
					cut++;
					continue;
				}
				if (pass == 1 && neutral_shown++ == 0) {
					size_t n_neutral = 0;
					for (size_t k = 0; k < n_metrics; k++)
						n_neutral += !is_spec_metric(json_array_get(metrics, k)) &&
							!is_decisive(json_array_get(metrics, k));
					ab_text_printf(&t, "\n<details><summary>%zu neutral series (no claim, no regression)"
						"</summary>\n\n%s", n_neutral, metric_header);
				}
				ab_text_append(&t, row.buf ? row.buf : "", row.len);
				shown++;
			}
			if (pass == 1 && neutral_shown)
				ab_text_puts(&t, "\n</details>\n");
		}
		if (cut > 0)
			ab_text_printf(&t, "\n_Table cut: %zu of %zu metric rows shown; the stored result has "
				"all of them._\n", shown, plain);
		ab_text_free(&row);
		render_spec(&row, result);
		if (t.len + row.len + reserve <= o.max_chars)
			ab_text_append(&t, row.buf ? row.buf : "", row.len);
	} else {
		ab_text_puts(&t, "_No speed metrics were measured._\n");
	}

	/* Gates, failures, method, environment and build logs: cut as a block if they do not fit. */
	struct ab_text details = { 0 };
	render_gates(&details, result);
	render_engine_clock(&details, result);
	render_details(&details, result);
	if (t.len + details.len + reserve <= o.max_chars)
		ab_text_append(&t, details.buf ? details.buf : "", details.len);
	else
		ab_text_puts(&t, "\n_Gates, method and environment cut for size; see the stored result._\n");
	ab_text_free(&details);

	const json_t *samples = json_object_get(result, "samples");
	size_t n_samples = json_array_size(samples);
	if (o.samples && n_samples > 0 && t.len + reserve + 300 < o.max_chars) {
		ab_text_printf(&t, "\n<details><summary>%zu raw samples</summary>\n\n"
			"| side | pair | batch | order | model | metric | ctx | value | status |\n"
			"|:--|--:|--:|--:|:--|:--|--:|--:|:--|\n", n_samples);
		size_t i = 0;
		for (; i < n_samples; i++) {
			ab_text_free(&row);
			sample_row(&row, json_array_get(samples, i));
			if (t.len + row.len + reserve + 40 > o.max_chars)
				break;
			ab_text_append(&t, row.buf ? row.buf : "", row.len);
		}
		if (i < n_samples)
			ab_text_printf(&t, "\n_Sample detail cut for size: %zu of %zu samples shown; the "
				"stored result has all of them._\n", i, n_samples);
		ab_text_puts(&t, "\n</details>\n");
	} else if (o.samples && n_samples > 0) {
		ab_text_printf(&t, "\n_Sample detail (%zu samples) cut for size; the stored result has "
			"all of them._\n", n_samples);
	}
	ab_text_append(&t, footer.buf ? footer.buf : "", footer.len);
	ab_text_free(&footer);
	ab_text_free(&row);
	if (t.failed) {
		ab_text_free(&t);
		return ab_error_set("markdown: out of memory");
	}
	if ((*out = ab_text_take(&t)) == NULL)
		return ab_error_set("markdown: out of memory");
	return 0;
}

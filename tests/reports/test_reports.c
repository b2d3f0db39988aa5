/*
 * test_reports.c - reports/: the result document round trip (build -> dump -> load -> equal, and
 * the re-rendered markdown identical), markdown and terminal content (rows, CI beside every
 * delta, verdict, method, environment, shas), escaping of hostile ref names and reasons, the
 * 65,000-character cap, build-log fences, colour only on request, load errors on purpose, the HTML
 * page (structure, escaping, nothing external; 100 series x 1,000 samples, its render time printed) and the
 * markdown's folded neutral rows from 18 series on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../guards/check.h"
#include "../guards/sim.h"
#include "error.h"
#include "html.h"
#include "markdown.h"
#include "result.h"
#include "svg.h"
#include "terminal.h"
#include "verdict.h"

static const char *base_sha = "0123456789abcdef0123456789abcdef01234567";
static const char *head_sha = "fedcba9876543210fedcba9876543210fedcba98";

struct fixture {
	struct ab_sample *samples;
	size_t n_samples;
	struct ab_speed_result *speed;
	struct ab_verdict verdict;
	struct ab_gate_result gates[3];
	json_t *env;
	json_t *doc;
};

/* Two models, decode 128/4k and prefill 4k, head 12% faster on small decode 4k; 12 pairs. */
static int fixture_init(struct fixture *f, const char *base_ref, const char *head_ref, int pairs,
	int extra_series)
{
	static struct sim_series shape[1100];
	static const struct sim_series fixed[] = {
		{ "small", "decode_tps", 128, 1.0 }, { "small", "decode_tps", 4096, 1.12 },
		{ "small", "prefill_tps", 4096, 1.0 }, { "big", "decode_tps", 4096, 1.0 },
	};
	int n_series = 4 + extra_series;
	memcpy(shape, fixed, sizeof(fixed));
	for (int i = 0; i < extra_series; i++)
		shape[4 + i] = (struct sim_series){ "small", "decode_tps", 100000 + i, 1.0 };
	memset(f, 0, sizeof(*f));
	f->samples = calloc((size_t)pairs * 2 * (size_t)n_series, sizeof(*f->samples));
	if (f->samples == NULL)
		return -1;
	struct sim sim = { shape, n_series, SIM_NORMAL, 0.01, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, 77);
	f->n_samples = sim_pairs(f->samples, 0, &sim, &rng, 0, pairs, 0);
	f->samples[3].ok = 0;           /* one failed sample with a hostile reason */
	f->samples[3].value = NAN;
	snprintf(f->samples[3].reason, sizeof(f->samples[3].reason),
		"timeout | <b>bold</b> @maintainers\n| injected | row |");
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.pairs_min = p.pairs_max = pairs;
	p.looks = 1;
	p.confirm_pairs = 0;
	const char *models[] = { "small", "big" };
	p.models = models;
	p.n_models = 2;
	if (ab_speed_decide(&f->speed, f->samples, f->n_samples, &p) != 0)
		return -1;
	snprintf(f->gates[0].name, sizeof(f->gates[0].name), "top1");
	snprintf(f->gates[0].model, sizeof(f->gates[0].model), "small");
	f->gates[0].value = 0.953;
	f->gates[0].threshold = 0.90;
	snprintf(f->gates[0].op, sizeof(f->gates[0].op), ">=");
	f->gates[0].pass = 1;
	snprintf(f->gates[0].detail, sizeof(f->gates[0].detail), "95%% CI 0.93-0.97 | 512 positions");
	snprintf(f->gates[1].name, sizeof(f->gates[1].name), "kl_mean");
	f->gates[1].value = 0.02;
	f->gates[1].threshold = 0.2;
	snprintf(f->gates[1].op, sizeof(f->gates[1].op), "<=");
	f->gates[1].pass = 1;
	snprintf(f->gates[2].name, sizeof(f->gates[2].name), "greedy_agreement");   /* advisory, failed */
	snprintf(f->gates[2].model, sizeof(f->gates[2].model), "small");
	f->gates[2].value = 0.75;
	f->gates[2].threshold = 1.0;
	snprintf(f->gates[2].op, sizeof(f->gates[2].op), ">=");
	f->gates[2].advisory = 1;
	struct ab_verdict_input vin;
	memset(&vin, 0, sizeof(vin));
	vin.base_build = vin.head_build = AB_BUILD_OK;
	vin.speed = f->speed;
	vin.gates = f->gates;
	vin.n_gates = 3;
	const char *touched[] = { "guards/default.json" };
	vin.harness_touched = touched;
	vin.n_harness_touched = 1;
	if (ab_verdict_decide(&f->verdict, &vin) != 0)
		return -1;
	/* The shape evaluator/pipeline/env.c produces. */
	f->env = json_pack("{s:[{s:s, s:s, s:i}], s:s, s:{s:s, s:i}}", "gpus", "name", "NVIDIA H200 <b>",
		"driver_version", "575.57", "clocks_sm_mhz", 1980, "host", "bench-01", "cpu", "model", "EPYC", "cores", 16);
	const char *changed[] = { "engine/decode.c", "guards/default.json" };
	struct ab_result_input in;
	memset(&in, 0, sizeof(in));
	in.base = (struct ab_result_side){ base_ref, base_sha, "1111111111111111111111111111111111111111" };
	in.head = (struct ab_result_side){ head_ref, head_sha, "2222222222222222222222222222222222222222" };
	in.changed_files = changed;
	in.n_changed_files = 2;
	in.suite_name = "default";
	in.suite_sha256 = "ab12";
	in.seed = 18446744073709551615ULL;
	in.environment = f->env;
	in.verdict = &f->verdict;
	in.speed = f->speed;
	in.gates = f->gates;
	in.n_gates = 3;
	in.samples = f->samples;
	in.n_samples = f->n_samples;
	in.build_base = (struct ab_result_build){ AB_BUILD_OK, 12.5, "built", NULL, 0, NULL };
	in.build_head = (struct ab_result_build){ AB_BUILD_OK, 13.0, "reused build of tree 2222", NULL, 1, NULL };
	in.timing = (struct ab_result_timing){ .build_s = 25.5, .models_s = 1.0, .measure_s = 300.0, .accuracy_s = NAN, .total_s = 330.0 };
	in.trigger = "cli";
	in.created_at = "2025-01-01T00:00:00Z";
	return ab_result_build(&f->doc, &in);
}

static void fixture_free(struct fixture *f)
{
	free(f->samples);
	ab_speed_result_free(f->speed);
	json_decref(f->env);
	json_decref(f->doc);
}

static int count_lines_starting(const char *text, const char *prefix)
{
	int n = 0;
	size_t len = strlen(prefix);
	for (const char *p = text; p && *p;) {
		if (strncmp(p, prefix, len) == 0)
			n++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return n;
}

static void test_roundtrip(void)
{
	struct fixture f;
	if (fixture_init(&f, "main", "pull/7/head", 12, 0) != 0) {
		fprintf(stderr, "fixture: %s\n", ab_error_last());
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	CHECK(ab_result_validate(f.doc) == 0);
	CHECK_STR(json_string_value(json_object_get(f.doc, "seed")), "18446744073709551615");
	CHECK(json_array_size(json_object_get(f.doc, "metrics")) == 4);
	CHECK(json_array_size(json_object_get(f.doc, "samples")) == f.n_samples);
	const json_t *m1 = json_array_get(json_object_get(f.doc, "metrics"), 1);
	CHECK_STR(json_string_value(json_object_get(m1, "name")), "decode_tps");
	CHECK(json_integer_value(json_object_get(m1, "ctx")) == 4096);
	CHECK(json_array_size(json_object_get(m1, "ci")) == 2);
	CHECK(json_is_real(json_object_get(m1, "p_adj")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(f.doc, "verdict"), "label")),
		f.verdict.label);
	/* A gate's label is what its failure applies; an advisory gate applies none. */
	const json_t *gates = json_object_get(f.doc, "gates");
	CHECK(json_array_size(gates) == 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(gates, 0), "label")), "accuracy-regression");
	CHECK(json_is_null(json_object_get(json_array_get(gates, 2), "label")));
	CHECK(f.verdict.kind != AB_VERDICT_REJECT);
	for (size_t i = 0; i < f.verdict.n_labels; i++)
		CHECK(strcmp(f.verdict.labels[i], "accuracy-regression") != 0);

	/* dump -> load -> equal, and the same markdown from both. */
	char *text = json_dumps(f.doc, JSON_COMPACT);
	json_t *back = NULL;
	CHECK(text && ab_result_load(&back, text, strlen(text)) == 0);
	CHECK(back && json_equal(back, f.doc));
	char *md1 = NULL, *md2 = NULL, *term = NULL;
	struct ab_markdown_options o = { 0, 1 };
	CHECK(ab_markdown_render(&md1, f.doc, &o) == 0);
	CHECK(back && ab_markdown_render(&md2, back, &o) == 0);
	CHECK(md1 && md2 && strcmp(md1, md2) == 0);
	if (md1) {
		printf("---- markdown (%zu bytes) ----\n%.2500s\n", strlen(md1), md1);
		CHECK(strncmp(md1, "### ", 4) == 0);               /* the verdict line comes first */
		CHECK(strstr(md1, f.verdict.label) != NULL);
		CHECK(strstr(md1, "| small | decode tok/s | 128 |") != NULL);
		CHECK(strstr(md1, "| small | decode tok/s | 4k |") != NULL);
		CHECK(strstr(md1, "| small | prefill tok/s | 4k |") != NULL);
		CHECK(strstr(md1, "| big | decode tok/s | 4k |") != NULL);
		CHECK(count_lines_starting(md1, "| small |") + count_lines_starting(md1, "| big |") == 4);
		CHECK(strstr(md1, "\xe2\x80\xa6") != NULL);                 /* CI beside the delta */
		CHECK(strstr(md1, "**Method:**") != NULL);
		CHECK(strstr(md1, "NVIDIA H200 &lt;b&gt;") != NULL);         /* environment escaped */
		CHECK(strstr(md1, "base `0123456`") && strstr(md1, "head `fedcba9`"));
		CHECK(strstr(md1, "| top1 | small | 0.953 | &gt;= 0.9 | \xe2\x9c\x85 pass |") != NULL);
		CHECK(strstr(md1, "| greedy\\_agreement | small | 0.75 | &gt;= 1 | \xe2\x9a\xa0\xef\xb8\x8f warn |") != NULL);
		CHECK(strstr(md1, "`harness-touched`") != NULL);
		CHECK(strstr(md1, "**Note:**") != NULL);
		CHECK(strstr(md1, "raw samples") != NULL);
		CHECK(strstr(md1, "<b>") == NULL);                           /* no HTML from outside */
		CHECK(strstr(md1, "@maintainers") == NULL);                  /* no mentions */
		CHECK(strstr(md1, "\n| injected") == NULL);                  /* no injected rows */
	}
	CHECK(ab_terminal_render(&term, back, 0) == 0);
	if (term) {
		printf("---- terminal ----\n%s\n", term);
		CHECK(strstr(term, "DELTA [95% CI]") != NULL);
		CHECK(strstr(term, "\x1b") == NULL);
		CHECK(strstr(term, f.verdict.label) != NULL);
		/* Alignment: the GATE column starts at the same offset on every table line. */
		const char *header = strstr(term, "  MODEL");
		const char *gate = header ? strstr(header, "GATE") : NULL;
		size_t col = header && gate ? (size_t)(gate - header) : 0;
		int rows = 0;
		for (const char *line = header; line && *line; ) {
			const char *end = strchr(line, '\n');
			if (!end || end == line)
				break;
			if ((size_t)(end - line) > col) {
				CHECK(line[col] != ' ' && line[col - 1] == ' ' && line[col - 2] == ' ');
				rows++;
			}
			line = end + 1;
		}
		CHECK(rows == 5);                                   /* header + 4 metrics */
		CHECK(strstr(term, "greedy_agreement small: 0.75 >= 1  warn") != NULL);
		CHECK(strstr(term, "<b>bold</b>") != NULL || strstr(term, "e.g.") != NULL);
	}
	char *colored = NULL;
	CHECK(ab_terminal_render(&colored, back, 1) == 0 && colored && strstr(colored, "\x1b[") != NULL);
	free(colored);
	free(term);
	free(md1);
	free(md2);
	free(text);
	json_decref(back);
	fixture_free(&f);
}

static void test_hostile(void)
{
	const char *evil_base = "main|<script>alert(1)</script>\n| x | y |\n@everyone `rm -rf` ![i](http://e/x.png)";
	const char *evil_head = "feat/\x1b[31mred\x07\xff\xfe-bad-utf8";
	struct fixture f;
	if (fixture_init(&f, evil_base, evil_head, 8, 0) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	char *md = NULL, *term = NULL;
	CHECK(ab_markdown_render(&md, f.doc, NULL) == 0);
	CHECK(ab_terminal_render(&term, f.doc, 0) == 0);
	if (md) {
		CHECK(strstr(md, "<script") == NULL);
		CHECK(strstr(md, "&lt;script&gt;") != NULL);
		CHECK(strstr(md, "@everyone") == NULL);
		CHECK(strstr(md, "\n| x | y |") == NULL);
		CHECK(strstr(md, "main\\|") != NULL);
		CHECK(strstr(md, "!\\[i\\]") != NULL);
		CHECK(strstr(md, "\x1b") == NULL && strstr(md, "\x07") == NULL);
		CHECK(count_lines_starting(md, "| small |") + count_lines_starting(md, "| big |") == 4);
		/* The ref line stays one line: both refs appear on the line that starts with **head**. */
		const char *line = strstr(md, "**head**");
		const char *nl = line ? strchr(line, '\n') : NULL;
		const char *b = line ? strstr(line, "**base**") : NULL;
		CHECK(line && nl && b && b < nl);
	}
	if (term) {
		CHECK(strstr(term, "\x1b") == NULL && strstr(term, "\x07") == NULL);
		CHECK(strstr(term, "\n| x | y |") == NULL);
	}
	free(md);
	free(term);
	fixture_free(&f);
}

static void test_size_cap(void)
{
	/* 600 pairs x 4 series x 2 sides = 4800 samples: far above the cap with samples. */
	struct fixture f;
	if (fixture_init(&f, "main", "pr", 600, 0) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	char *md = NULL;
	CHECK(ab_markdown_render(&md, f.doc, NULL) == 0);
	if (md) {
		printf("4800 samples: %zu bytes\n", strlen(md));
		CHECK(strlen(md) <= AB_MARKDOWN_MAX_CHARS);
		CHECK(strstr(md, "Sample detail cut for size") != NULL);
		CHECK(strstr(md, "| big | decode tok/s | 4k |") != NULL);       /* metrics kept whole */
		CHECK(strstr(md, AB_RESULT_SCHEMA "</sub>") != NULL);              /* footer kept */
		CHECK(strstr(md, "</details>") != NULL);
	}
	free(md);
	md = NULL;
	struct ab_markdown_options small = { 5000, 1 };
	CHECK(ab_markdown_render(&md, f.doc, &small) == 0);
	CHECK(md && strlen(md) <= 5000);
	free(md);
	fixture_free(&f);

	/* 1000 extra series: the metric table itself must be cut. */
	if (fixture_init(&f, "main", "pr", 4, 1000) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	md = NULL;
	CHECK(ab_markdown_render(&md, f.doc, NULL) == 0);
	if (md) {
		printf("1004 metrics: %zu bytes\n", strlen(md));
		CHECK(strlen(md) <= AB_MARKDOWN_MAX_CHARS);
		CHECK(strstr(md, "Table cut:") != NULL);
	}
	free(md);
	fixture_free(&f);
}

static void test_build_failure(void)
{
	struct ab_verdict v;
	struct ab_verdict_input vin;
	memset(&vin, 0, sizeof(vin));
	vin.base_build = AB_BUILD_OK;
	vin.head_build = AB_BUILD_FAILED;
	vin.head_build_detail = "exit status 2";
	CHECK(ab_verdict_decide(&v, &vin) == 0);
	struct ab_result_input in;
	memset(&in, 0, sizeof(in));
	in.base = (struct ab_result_side){ "main", base_sha, NULL };
	in.head = (struct ab_result_side){ "pr", head_sha, NULL };
	in.verdict = &v;
	in.build_base = (struct ab_result_build){ AB_BUILD_OK, 10, NULL, NULL, 0, NULL };
	in.build_head = (struct ab_result_build){ AB_BUILD_FAILED, 3, "exit status 2",
		"cc -c x.c\nx.c:1: error: ```` fence\n</details><script>x</script>\n", 0, NULL };
	in.timing = (struct ab_result_timing){ NAN, NAN, NAN, NAN, NAN };
	json_t *doc = NULL;
	CHECK(ab_result_build(&doc, &in) == 0);
	char *md = NULL, *term = NULL;
	CHECK(doc && ab_markdown_render(&md, doc, NULL) == 0);
	CHECK(doc && ab_terminal_render(&term, doc, 0) == 0);
	if (md) {
		CHECK(strstr(md, "does not compile") != NULL);
		CHECK(strstr(md, "`````text\n") != NULL);          /* fence longer than the 4 in the log */
		CHECK(strstr(md, "head build failed") != NULL);
		CHECK(strstr(md, "No speed metrics") != NULL);
		CHECK(json_is_null(json_object_get(json_object_get(doc, "timing"), "total_s")));
	}
	if (term)
		CHECK(strstr(term, "no speed metrics measured") != NULL);
	free(md);
	free(term);
	json_decref(doc);
	CHECK(ab_result_build(&doc, NULL) == AB_EINVALID);
	in.verdict = NULL;
	CHECK(ab_result_build(&doc, &in) == AB_EINVALID);
}

static void test_load_errors(void)
{
	json_t *doc = NULL;
	const char *cases[][2] = {
		{ "not json", "line 1" },
		{ "[1,2]", "expected an object" },
		{ "{\"schema\":\"abgate.result/9\",\"verdict\":{\"label\":\"eval:M\",\"reason\":\"r\",\"labels\":[]}}",
		  "schema is" },
		{ "{\"schema\":\"abgate.result/1\"}", "verdict: missing" },
		{ "{\"schema\":\"abgate.result/1\",\"verdict\":{\"label\":1,\"reason\":\"r\",\"labels\":[]}}",
		  "verdict.label: expected a string" },
		{ "{\"schema\":\"abgate.result/1\",\"verdict\":{\"label\":\"x\",\"reason\":\"r\",\"labels\":[3]}}",
		  "verdict.labels[0]" },
		{ "{\"schema\":\"abgate.result/1\",\"verdict\":{\"label\":\"x\",\"reason\":\"r\",\"labels\":[]},"
		  "\"metrics\":[{\"name\":\"decode_tps\",\"model\":\"m\",\"ctx\":\"4k\"}]}", "metrics[0].ctx" },
		{ "{\"schema\":\"abgate.result/1\",\"schema\":\"abgate.result/1\"}", "duplicate" },
		{ "{\"schema\":\"abgate.result/1\",\"verdict\":{\"label\":\"x\",\"reason\":\"r\",\"labels\":[]},"
		  "\"samples\":{}}", "samples: expected an array" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = ab_result_load(&doc, cases[i][0], strlen(cases[i][0]));
		CHECK(rc == AB_EINVALID);
		if (strstr(ab_error_last(), cases[i][1]) == NULL) {
			fprintf(stderr, "case %zu: message \"%s\" lacks \"%s\"\n", i, ab_error_last(), cases[i][1]);
			CHECK(!"error message");
		}
	}
	CHECK(ab_result_load(&doc, "{}", (size_t)AB_RESULT_MAX_BYTES + 1) == AB_EINVALID);
	/* A minimal valid document renders with n/a where data is missing. */
	const char *minimal = "{\"schema\":\"abgate.result/1\",\"verdict\":{\"label\":\"eval:none\","
		"\"reason\":\"nothing\",\"labels\":[\"eval:none\"]}}";
	CHECK(ab_result_load(&doc, minimal, strlen(minimal)) == 0);
	char *md = NULL, *term = NULL;
	CHECK(doc && ab_markdown_render(&md, doc, NULL) == 0 && md && strstr(md, "`eval:none`"));
	CHECK(doc && ab_terminal_render(&term, doc, 0) == 0 && term && strstr(term, "eval:none"));
	CHECK(ab_markdown_render(&md, NULL, NULL) == AB_EINVALID);
	free(md);
	free(term);
	json_decref(doc);
}

static size_t count_of(const char *text, const char *needle)
{
	size_t n = 0;
	for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_html_structure(void)
{
	const char *evil_base = "main\"><script>alert(1)</script>";
	struct fixture f;
	if (fixture_init(&f, evil_base, "feat/\xff-x", 12, 0) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	char *html = NULL;
	struct ab_html_options o = { .json_href = "/runs/3.json" };
	CHECK(ab_html_render_run(&html, f.doc, &o) == 0);
	if (html) {
		const char *label = json_string_value(json_object_get(json_object_get(f.doc, "verdict"), "label"));
		char want[128];
		snprintf(want, sizeof(want), "<span class=\"label\">%s</span>", label);
		CHECK(strstr(html, want) != NULL);
		CHECK(strncmp(html, "<!DOCTYPE html>", 15) == 0 && strstr(html, "</html>") != NULL);
		CHECK(strstr(html, "<script") == NULL);
		CHECK(strstr(html, "&lt;script&gt;") != NULL);
		CHECK(strstr(html, "NVIDIA H200 &lt;b&gt;") != NULL);
		CHECK(strstr(html, "http://") == NULL && strstr(html, "https://") == NULL);
		CHECK(count_of(html, "class=\"plot forest\"") == 1);
		CHECK(count_of(html, "<figure class=\"plot series") == 4);       /* one per series */
		CHECK(count_of(html, "<g class=\"row ") == 4);                   /* one forest row each */
		CHECK(strstr(html, "small \xc2\xb7 decode tok/s \xc2\xb7 4k") != NULL);
		CHECK(strstr(html, "big \xc2\xb7 decode tok/s \xc2\xb7 4k") != NULL);
		CHECK(strstr(html, "href=\"/runs/3.json\"") != NULL);
		CHECK(strstr(html, "class=\"tier\"") != NULL && strstr(html, "class=\"floor\"") != NULL);
		CHECK(strstr(html, "stroke-linecap=\"square\"") != NULL);           /* BA pairs drawn */
		CHECK(strstr(html, "stroke-linecap=\"round\"") != NULL);            /* AB pairs drawn */
		CHECK(strstr(html, "greedy_agreement") != NULL);
	}
	free(html);
	json_t *empty = json_pack("{s:{s:s, s:s, s:[]}}", "verdict", "label", "eval:infra-error", "reason", "x", "labels");
	CHECK(ab_html_render_run(&html, empty, NULL) == 0 && html && strstr(html, "No speed metrics"));
	free(html);
	json_decref(empty);
	CHECK(ab_html_render_run(&html, NULL, NULL) == AB_EINVALID);
	fixture_free(&f);
}

static void test_html_large(void)
{
	/* 100 series, 500 pairs: 1,000 samples per series, 100,000 in all. */
	struct fixture f;
	if (fixture_init(&f, "main", "head", 500, 96) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	char *html = NULL;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK(ab_html_render_run(&html, f.doc, NULL) == 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	if (html) {
		size_t len = strlen(html);
		/* The render time is a figure, not an assertion (STYLE.md: no timed tests; 0.22 s in the
		 * RelWithDebInfo build, ~0.9 s under ASan on this 2-core VM). */
		printf("html_large: 100 series x 1000 samples: %zu bytes rendered in %.3f s\n", len, s);
		CHECK(len < 8u << 20);
		CHECK(count_of(html, "<figure class=\"plot series") == 100);
		CHECK(strstr(html, "<details><summary>99 neutral series") != NULL);   /* the decisive row on top */
		const char *dir = getenv("AB_ARTIFACTS");
		char path[4096];
		if (dir && snprintf(path, sizeof(path), "%s/large.html", dir) < (int)sizeof(path)) {
			FILE *out = fopen(path, "w");
			CHECK(out && fputs(html, out) >= 0 && fclose(out) == 0);
		}
	}
	free(html);
	fixture_free(&f);
}

static void test_md_fold(void)
{
	/* 4 + 16 = 20 series, one of them decisive (small decode 4k +12%). */
	struct fixture f;
	if (fixture_init(&f, "main", "head", 12, 16) != 0) {
		CHECK(!"fixture");
		fixture_free(&f);
		return;
	}
	char *md = NULL;
	CHECK(ab_markdown_render(&md, f.doc, NULL) == 0);
	if (md) {
		const char *fold = strstr(md, "<details><summary>19 neutral series");
		const char *decisive = strstr(md, "| small | decode tok/s | 4k |");
		CHECK(fold != NULL);
		CHECK(decisive != NULL && fold && decisive < fold);
		CHECK(count_lines_starting(md, "| small |") + count_lines_starting(md, "| big |") == 20);
	}
	free(md);
	fixture_free(&f);
	/* Under 18 series nothing folds. */
	CHECK(fixture_init(&f, "main", "head", 12, 0) == 0);
	CHECK(ab_markdown_render(&md, f.doc, NULL) == 0 && md && strstr(md, "neutral series") == NULL);
	free(md);
	fixture_free(&f);
}

/* Axis ticks: round 1/2/5 x 10^k steps, evenly spaced, inside the range, and at least three of
 * them even on a narrow axis (a history plot of 19560..20380 once labelled only 20000). */
static void test_svg_ticks(void)
{
	static const double ranges[][2] = { { 19560, 20380 }, { 0, 1 }, { 490.2, 504.9 }, { -0.213, 0.031 },
		{ 1, 1000000 }, { 0.99, 1.01 } };
	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		double t[16], lo = ranges[r][0], hi = ranges[r][1];
		size_t n = ab_svg_ticks(t, 16, lo, hi, 4);
		CHECK(n >= 3 && n <= 12);
		double step = t[1] - t[0], mag = pow(10, floor(log10(step) + 1e-9)), m = step / mag;
		CHECK(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6);
		for (size_t i = 0; i < n; i++) {
			CHECK(t[i] >= lo - 1e-9 * step && t[i] <= hi + 1e-9 * step);
			CHECK(fabs(t[i] / step - round(t[i] / step)) < 1e-6);
			if (i > 0)
				CHECK(fabs(t[i] - t[i - 1] - step) < 1e-6 * step);
		}
	}
	double t[4];
	CHECK(ab_svg_ticks(t, 4, 5, 5, 4) == 0 && ab_svg_ticks(t, 4, 0, NAN, 4) == 0);
	CHECK(ab_svg_ticks(t, 2, 0, 1000, 4) == 2);   /* max bounds the output */
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "svg_ticks", test_svg_ticks },
		{ "roundtrip", test_roundtrip },
		{ "hostile", test_hostile },
		{ "size_cap", test_size_cap },
		{ "build_failure", test_build_failure },
		{ "load_errors", test_load_errors },
		{ "html_structure", test_html_structure },
		{ "html_large", test_html_large },
		{ "md_fold", test_md_fold },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

/*
 * terminal.c - aligned plain-text rendering of a result document (see terminal.h). Cells are
 * rendered first, column widths measured in code points, then rows are padded; colour codes are
 * added around already padded cells so they never disturb the alignment.
 */
#include "terminal.h"
#include "calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "render.h"
#include "speed.h"
#include "text.h"

#define COLS 9
#define CELL 96

#define RED "\x1b[31m"
#define GREEN "\x1b[32m"
#define YELLOW "\x1b[33m"
#define BOLD "\x1b[1m"
#define RESET "\x1b[0m"

static void cell_plain(char *dst, const char *s, size_t max_chars)
{
	struct ab_text t = { 0 };
	ab_text_plain(&t, s, max_chars);
	snprintf(dst, CELL, "%s", t.buf && !t.failed ? t.buf : "");
	ab_text_free(&t);
}

static const char *outcome_color(const char *outcome)
{
	if (outcome == NULL)
		return NULL;
	if (strcmp(outcome, "improved") == 0)
		return GREEN;
	if (strcmp(outcome, "regressed") == 0)
		return RED;
	if (strcmp(outcome, "inconclusive") == 0)
		return YELLOW;
	return NULL;
}

static void metric_cells(char cells[COLS][CELL], const char **color, const json_t *m)
{
	char a[24], b[24], c[24];
	const json_t *base = json_object_get(m, "base"), *head = json_object_get(m, "head");
	cell_plain(cells[0], ab_render_str(m, "model"), 32);
	const char *name = ab_render_str(m, "name");
	cell_plain(cells[1], name ? ab_speed_metric_short(name) : NULL, 24);
	ab_render_ctx(cells[2], CELL, ab_render_int(m, "ctx", 0));
	ab_render_value(cells[3], CELL, ab_render_num(base, "median"));
	ab_render_value(cells[4], CELL, ab_render_num(head, "median"));
	ab_text_pct(a, sizeof(a), ab_render_num(m, "ratio"));
	double lo = ab_render_num_at(m, "ci", 0), hi = ab_render_num_at(m, "ci", 1);
	ab_text_pct(b, sizeof(b), lo > 0 ? lo : NAN);
	ab_text_pct(c, sizeof(c), hi);
	snprintf(cells[5], CELL, "%s [%s, %s]", a, b, c);
	snprintf(cells[6], CELL, "%lld/%lld", ab_render_int(m, "n_pairs", 0), ab_render_int(m, "pairs", 0));
	const char *outcome = ab_render_str(m, "outcome");
	cell_plain(cells[7], outcome, 16);
	*color = outcome_color(outcome);
	const char *tier = ab_render_str(m, "tier");
	if (!json_is_true(json_object_get(m, "gating"))) {
		snprintf(cells[8], CELL, "advisory");
	} else if (json_is_true(json_object_get(m, "confirmed"))) {
		cell_plain(cells[8], ab_render_str(m, "label"), 50);
	} else if (json_is_true(json_object_get(m, "regression"))) {
		snprintf(cells[8], CELL, "regression not confirmed");
	} else if (tier) {
		ab_text_pct(a, sizeof(a), ab_render_num_at(m, "ci_adj", 0));
		char t[8];
		cell_plain(t, tier, 4);
		snprintf(cells[8], CELL, "%s (>= %s)", t, a);
	} else {
		snprintf(cells[8], CELL, "-");
	}
}

static void pad(struct ab_text *t, const char *s, size_t width, int right, const char *color)
{
	size_t w = ab_text_width(s);
	if (right)
		for (size_t i = w; i < width; i++)
			ab_text_puts(t, " ");
	if (color)
		ab_text_puts(t, color);
	ab_text_puts(t, s);
	if (color)
		ab_text_puts(t, RESET);
	if (!right)
		for (size_t i = w; i < width; i++)
			ab_text_puts(t, " ");
}

static void render_table(struct ab_text *t, const json_t *metrics, int color)
{
	static const char *const header[COLS] = { "MODEL", "METRIC", "CTX", "BASE", "HEAD",
		"DELTA [95% CI]", "PAIRS", "OUTCOME", "GATE" };
	static const int right[COLS] = { 0, 0, 1, 1, 1, 0, 1, 0, 0 };
	size_t n = json_array_size(metrics), width[COLS];
	char (*cells)[COLS][CELL] = calloc(n + 1, sizeof(*cells));
	const char **colors = calloc(n + 1, sizeof(*colors));
	if (cells == NULL || colors == NULL) {
		t->failed = 1;
		goto cleanup;
	}
	for (int c = 0; c < COLS; c++)
		width[c] = ab_text_width(header[c]);
	for (size_t i = 0; i < n; i++) {
		metric_cells(cells[i], &colors[i], json_array_get(metrics, i));
		for (int c = 0; c < COLS; c++) {
			size_t w = ab_text_width(cells[i][c]);
			if (w > width[c])
				width[c] = w;
		}
	}
	ab_text_puts(t, "  ");
	for (int c = 0; c < COLS; c++) {
		pad(t, header[c], c == COLS - 1 ? 0 : width[c], right[c], NULL);
		ab_text_puts(t, c == COLS - 1 ? "\n" : "  ");
	}
	for (size_t i = 0; i < n; i++) {
		ab_text_puts(t, "  ");
		for (int c = 0; c < COLS; c++) {
			const char *col = !color ? NULL : c == 7 ? colors[i] :
				c == 8 && json_is_true(json_object_get(json_array_get(metrics, i), "confirmed")) ?
				RED : NULL;
			pad(t, cells[i][c], c == COLS - 1 ? 0 : width[c], right[c], col);
			ab_text_puts(t, c == COLS - 1 ? "\n" : "  ");
		}
	}
cleanup:
	free(cells);
	free(colors);
}

static void side(struct ab_text *t, const char *what, const json_t *s)
{
	char sha[16];
	ab_render_short_sha(sha, sizeof(sha), ab_render_str(s, "sha"));
	ab_text_printf(t, "%s ", what);
	ab_text_plain(t, ab_render_str(s, "ref"), 80);
	ab_text_printf(t, " (%s)", sha);
}

int ab_terminal_render(char **out, const json_t *result, int color)
{
	struct ab_text t = { 0 };
	if (out == NULL || !json_is_object(result))
		return ab_error_setc(AB_EINVALID, "terminal: the result is not an object");
	const json_t *verdict = json_object_get(result, "verdict");
	const char *label = ab_render_str(verdict, "label");
	const char *kind = ab_render_str(verdict, "kind");
	const char *col = !color || !kind ? NULL : strcmp(kind, "reject") == 0 ? RED :
		strcmp(kind, "infra") == 0 ? YELLOW : strcmp(kind, "tier") == 0 ? GREEN : NULL;
	ab_text_puts(&t, "abgate: ");
	if (color)
		ab_text_puts(&t, BOLD);
	if (col)
		ab_text_puts(&t, col);
	ab_text_plain(&t, label ? label : "eval:unknown", 40);
	if (color)
		ab_text_puts(&t, RESET);
	ab_text_puts(&t, "\n  ");
	ab_text_plain(&t, ab_render_str(verdict, "reason"), 600);
	ab_text_puts(&t, "\n");
	size_t i;
	const json_t *v;
	json_array_foreach(json_object_get(verdict, "notes"), i, v) {
		ab_text_puts(&t, "  note: ");
		ab_text_plain(&t, json_string_value(v), 600);
		ab_text_puts(&t, "\n");
	}
	const json_t *sandbox = json_object_get(json_object_get(result, "environment"), "sandbox");
	if (json_is_false(json_object_get(sandbox, "enabled")))
		ab_text_puts(&t, "  warning: the PR's build and SUT ran UNSANDBOXED (--no-sandbox), with abgate's rights\n");
	ab_text_puts(&t, "  labels:");
	json_array_foreach(json_object_get(verdict, "labels"), i, v) {
		ab_text_puts(&t, " ");
		ab_text_plain(&t, json_string_value(v), 60);
	}
	ab_text_puts(&t, "\n  ");
	side(&t, "head", json_object_get(result, "head"));
	ab_text_puts(&t, " vs ");
	side(&t, "base", json_object_get(result, "base"));
	const json_t *pairs = json_object_get(result, "pairs");
	if (ab_render_int(pairs, "count", -1) >= 0)
		ab_text_printf(&t, ", %lld pairs (first look %lld, cap %lld, confirmation %lld)",
			ab_render_int(pairs, "count", 0), ab_render_int(pairs, "min", 0),
			ab_render_int(pairs, "max", 0), ab_render_int(pairs, "confirmation", 0));
	ab_text_puts(&t, "\n\n");

	const json_t *metrics = json_object_get(result, "metrics");
	if (json_array_size(metrics) > 0)
		render_table(&t, metrics, color);
	else
		ab_text_puts(&t, "  no speed metrics measured\n");

	const json_t *g;
	if (json_array_size(json_object_get(result, "gates")) > 0)
		ab_text_puts(&t, "\n  gates:\n");
	json_array_foreach(json_object_get(result, "gates"), i, g) {
		char value[32], threshold[32];
		ab_render_value(value, sizeof(value), ab_render_num(g, "value"));
		ab_render_value(threshold, sizeof(threshold), ab_render_num(g, "threshold"));
		const char *res = json_is_true(json_object_get(g, "error")) ? "NOT MEASURED" :
			json_is_true(json_object_get(g, "pass")) ? "pass" :
			json_is_true(json_object_get(g, "advisory")) ? "warn" : "FAIL";
		ab_text_puts(&t, "    ");
		ab_text_plain(&t, ab_render_str(g, "name"), 40);
		ab_text_puts(&t, " ");
		ab_text_plain(&t, ab_render_str(g, "model"), 40);
		ab_text_printf(&t, ": %s ", value);
		ab_text_plain(&t, ab_render_str(g, "op"), 3);
		ab_text_printf(&t, " %s  %s  ", threshold, res);
		ab_text_plain(&t, ab_render_str(g, "detail"), 200);
		ab_text_puts(&t, "\n");
	}
	const json_t *failures = json_object_get(result, "failures");
	static const char *const sides[] = { "base", "head" };
	for (int s = 0; s < 2; s++) {
		const json_t *f = json_object_get(failures, sides[s]);
		if (ab_render_int(f, "failed", 0) <= 0)
			continue;
		ab_text_printf(&t, "\n  %s: %lld of %lld samples failed, e.g. ", sides[s],
			ab_render_int(f, "failed", 0), ab_render_int(f, "total", 0));
		ab_text_plain(&t, ab_render_str(f, "example"), 120);
	}
	const char *method = ab_render_str(result, "method");
	if (method) {
		ab_text_puts(&t, "\n\n  method: ");
		ab_text_plain(&t, method, 800);
		char cite[512];
		ab_calibration_cite(cite, sizeof(cite), json_object_get(result, "calibration"));
		if (cite[0]) {
			ab_text_puts(&t, "\n  calibration: ");
			ab_text_plain(&t, cite, 500);
		}
	}
	ab_text_puts(&t, "\n");
	if (t.failed || (*out = ab_text_take(&t)) == NULL) {
		ab_text_free(&t);
		return ab_error_set("terminal: out of memory");
	}
	return 0;
}

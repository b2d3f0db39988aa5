/*
 * pages.c - the read-only pages of `abgate serve` (see pages.h): route parsing, store reads, the
 * history document (the base side's median with a distribution-free 95% interval per stored
 * evaluation and series), redaction, and the hand-over to reports/html.h for the markup.
 */
#include "pages.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "html.h"
#include "log.h"
#include "result.h"
#include "stats.h"
#include "store.h"

#define HISTORY_MAX_EVALS 200     /* newest stored evaluations looked at for a history page */
#define HTML "text/html; charset=utf-8"

static int message(struct ab_webhook_page *out, int status, const char *title, const char *text)
{
	out->content_type = HTML;
	return ab_html_render_message(&out->body, title, text) < 0 ? -1 : status;
}

/* Replaces every occurrence of `secret` (at least 4 bytes) in the malloc'd *text. */
static int scrub_one(char **text, const char *secret)
{
	static const char mask[] = "********";
	size_t n = secret ? strlen(secret) : 0;
	if (n < 4 || !strstr(*text, secret))
		return 0;
	size_t count = 0;
	for (const char *p = *text; (p = strstr(p, secret)); p += n)
		count++;
	char *o = malloc(strlen(*text) + count * sizeof(mask) + 1), *w = o;
	if (!o)
		return ab_error_set("out of memory");
	for (const char *p = *text, *q; ; p = q + n) {
		if (!(q = strstr(p, secret))) {
			strcpy(w, p);
			break;
		}
		memcpy(w, p, (size_t)(q - p));
		w += q - p;
		memcpy(w, mask, sizeof(mask) - 1);
		w += sizeof(mask) - 1;
	}
	free(*text);
	*text = o;
	return 0;
}

/* Whatever a page says, it never carries a configured secret or clone URL (they may hold tokens). */
static int scrub(char **text, const struct ab_config *cfg)
{
	if (scrub_one(text, cfg->webhook_secret) < 0 || scrub_one(text, cfg->github.token) < 0)
		return -1;
	for (size_t i = 0; i < cfg->repo_count; i++)
		if (scrub_one(text, cfg->repos[i].git_url) < 0)
			return -1;
	return 0;
}

/* The configured repository an evaluation's repo column belongs to, NULL when none. */
static const struct ab_repo_config *repo_of(const struct ab_config *cfg, const char *stored)
{
	for (size_t i = 0; stored && i < cfg->repo_count; i++)
		if (cfg->repos[i].git_url && !strcmp(cfg->repos[i].git_url, stored))
			return &cfg->repos[i];
	return NULL;
}

static void url_encode(char *buf, size_t size, const char *s)
{
	size_t o = 0;
	for (; s && *s && o + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || strchr("-._~/", c))
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, size - o, "%%%02X", c);
	}
	buf[o < size ? o : size - 1] = '\0';
}

/* The stored result of evaluation `id`, loaded and with the suite path cut to its file name. */
static int load_run(json_t **doc, struct ab_store_eval **ev, const struct ab_config *cfg, long long id)
{
	ab_store *store = NULL;
	int error = ab_store_open(&store, cfg->state_dir);
	if (error == 0)
		error = ab_store_eval_get(ev, store, id);
	ab_store_close(store);
	if (error < 0)
		return error;
	if (!(*ev)->result_json)
		return ab_error_setc(AB_ENOTFOUND, "no result");
	if ((error = ab_result_load(doc, (*ev)->result_json, strlen((*ev)->result_json))) < 0)
		return error;
	json_t *suite = json_object_get(*doc, "suite");
	const char *path = json_string_value(json_object_get(suite, "path"));
	if (path) {
		const char *slash = strrchr(path, '/');
		json_object_set_new(suite, "path", json_string(slash ? slash + 1 : path));
	}
	return 0;
}

static int run_page(const struct ab_config *cfg, long long id, int as_json, struct ab_webhook_page *out)
{
	json_t *doc = NULL;
	struct ab_store_eval *ev = NULL;
	char text[160], json_href[64], history_href[700], repo[300], suite[300];
	int status = -1, error = load_run(&doc, &ev, cfg, id);
	if (error == AB_ENOTFOUND) {
		snprintf(text, sizeof(text), ev ? "Evaluation %lld has no result (yet)." : "No evaluation %lld is stored.", id);
		status = message(out, 404, "404 Not found", text);
		goto cleanup;
	}
	if (error < 0) {
		AB_WARN("pages: evaluation %lld: %s", id, ab_error_last());
		snprintf(text, sizeof(text), "The stored result of evaluation %lld cannot be read.", id);
		status = message(out, 500, "500 Unreadable result", text);
		goto cleanup;
	}
	if (as_json) {
		out->content_type = "application/json";
		if (!(out->body = json_dumps(doc, JSON_INDENT(1))))
			goto cleanup;
	} else {
		snprintf(json_href, sizeof(json_href), "/runs/%lld.json", id);
		const struct ab_repo_config *rc = repo_of(cfg, ev->repo);
		struct ab_html_options o = { .json_href = json_href };
		if (rc && ev->suite_name) {
			url_encode(repo, sizeof(repo), rc->name);
			url_encode(suite, sizeof(suite), ev->suite_name);
			snprintf(history_href, sizeof(history_href), "/history?repo=%s&amp;suite=%s", repo, suite);
			o.history_href = history_href;
		}
		out->content_type = HTML;
		if (ab_html_render_run(&out->body, doc, &o) < 0)
			goto cleanup;
	}
	status = 200;
cleanup:
	json_decref(doc);
	ab_store_eval_free(ev);
	return status;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One point of a series: the median of `v` and a distribution-free 95% interval from the order
 * statistics (ranks n/2 -+ 0.98 sqrt(n)); with under 6 values the range. */
static json_t *point_of(double *v, size_t n, size_t eval)
{
	qsort(v, n, sizeof(*v), cmp_double);
	double half = 0.98 * sqrt((double)n);
	long k = (long)floor((double)n / 2 - half);
	if (n < 6 || k < 0)
		k = 0;
	return json_pack("{s:I, s:f, s:f, s:f, s:I}", "eval", (json_int_t)eval, "median",
			 ab_stats_quantile_sorted(v, n, 0.5), "lo", v[k], "hi", v[n - 1 - (size_t)k], "n", (json_int_t)n);
}

/* Adds evaluation `e`'s base samples, one point per series, to `series` (an object keyed by
 * "model\tmetric\tctx"). */
static int history_add(json_t *series, const json_t *doc, size_t e)
{
	const json_t *metrics = json_object_get(doc, "metrics"), *samples = json_object_get(doc, "samples"), *m, *s;
	size_t i, j, n_samples = json_array_size(samples);
	double *v = malloc((n_samples ? n_samples : 1) * sizeof(*v));
	if (!v)
		return ab_error_set("out of memory");
	json_array_foreach(metrics, i, m) {
		const char *name = json_string_value(json_object_get(m, "name"));
		const char *model = json_string_value(json_object_get(m, "model"));
		json_int_t ctx = json_integer_value(json_object_get(m, "ctx"));
		size_t n = 0;
		if (!name || !model)
			continue;
		json_array_foreach(samples, j, s) {
			const char *sm = json_string_value(json_object_get(s, "metric"));
			const char *mo = json_string_value(json_object_get(s, "model"));
			const char *side = json_string_value(json_object_get(s, "side"));
			if (sm && mo && side && !strcmp(side, "base") && json_is_true(json_object_get(s, "ok")) &&
			    !strcmp(sm, name) && !strcmp(mo, model) && json_integer_value(json_object_get(s, "ctx")) == ctx &&
			    json_is_number(json_object_get(s, "value")))
				v[n++] = json_number_value(json_object_get(s, "value"));
		}
		if (n == 0)
			continue;
		char key[300];
		snprintf(key, sizeof(key), "%.100s\t%.100s\t%lld", model, name, (long long)ctx);
		json_t *entry = json_object_get(series, key);
		if (!entry) {
			entry = json_pack("{s:s, s:s, s:I, s:[]}", "model", model, "metric", name, "ctx", ctx, "points");
			if (!entry || json_object_set_new(series, key, entry) < 0) {
				free(v);
				return ab_error_set("out of memory");
			}
		}
		json_array_append_new(json_object_get(entry, "points"), point_of(v, n, e));
	}
	free(v);
	return 0;
}

static int history_page(const struct ab_config *cfg, ab_webhook_arg_fn arg, void *request, struct ab_webhook_page *out)
{
	const char *name = arg(request, "repo"), *suite = arg(request, "suite");
	const struct ab_repo_config *rc = name ? ab_config_repo(cfg, name) : NULL;
	struct ab_store_eval *evals = NULL;
	size_t n = 0;
	ab_store *store = NULL;
	json_t *hist = NULL, *series = NULL, *list = NULL;
	int status = -1;
	if (!rc)
		return message(out, 404, "404 Not found", "No such repository is configured (history?repo=owner/name).");
	if (ab_store_open(&store, cfg->state_dir) < 0 || ab_store_history(&evals, &n, store, HISTORY_MAX_EVALS) < 0) {
		AB_WARN("pages: history: %s", ab_error_last());
		goto cleanup;
	}
	if (!(series = json_object()) || !(list = json_array()))
		goto cleanup;
	for (size_t i = n; i-- > 0;) {   /* oldest first */
		const struct ab_store_eval *e = &evals[i];
		struct ab_store_eval *full = NULL;
		json_t *doc = NULL;
		if (e->status != AB_STORE_DONE || !e->repo || strcmp(e->repo, rc->git_url) || !e->base_ref ||
		    strcmp(e->base_ref, rc->base) || !e->suite_name || (suite && strcmp(e->suite_name, suite)))
			continue;
		if (ab_store_eval_get(&full, store, e->id) == 0 && full->result_json &&
		    ab_result_load(&doc, full->result_json, strlen(full->result_json)) == 0) {
			char when[32];
			time_t t = (time_t)(e->created_at_ms / 1000);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
			size_t idx = json_array_size(list);
			json_array_append_new(list, json_pack("{s:I, s:s, s:s?, s:s?}", "id", (json_int_t)e->id, "created_at", when,
							      "base_sha", e->base_sha, "label", e->label));
			if (history_add(series, doc, idx) < 0) {
				json_decref(doc);
				ab_store_eval_free(full);
				goto cleanup;
			}
		}
		json_decref(doc);
		ab_store_eval_free(full);
	}
	json_t *arr = json_array();
	const char *key;
	json_t *value;
	json_object_foreach(series, key, value)
		json_array_append(arr, value);
	hist = json_pack("{s:s, s:s, s:s, s:O, s:o}", "repo", rc->name, "base", rc->base, "suite", suite ? suite : "all suites",
			 "evaluations", list, "series", arr);
	out->content_type = HTML;
	if (hist && ab_html_render_history(&out->body, hist) == 0)
		status = 200;
cleanup:
	json_decref(hist);
	json_decref(series);
	json_decref(list);
	ab_store_evals_free(evals, n);
	ab_store_close(store);
	return status;
}

/* The newest calibration of every suite the store has evaluations of (abgate calibrate), each as
 * the renderer's flat {suite, created_at, figures...} object; the full document stays in the store. */
static int calibration_page(const struct ab_config *cfg, struct ab_webhook_page *out)
{
	struct ab_store_eval *evals = NULL;
	ab_store *store = NULL;
	size_t n = 0;
	json_t *cals = json_array(), *seen = json_object();
	int status = -1;
	out->content_type = HTML;
	if (!cals || !seen)
		goto cleanup;
	if (ab_store_open(&store, cfg->state_dir) < 0 || ab_store_history(&evals, &n, store, HISTORY_MAX_EVALS) < 0) {
		AB_WARN("pages: calibration: %s", ab_error_last());
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = evals[i].suite_name;
		char *text = NULL;
		json_t *doc = NULL;
		json_error_t jerr;
		if (!name || json_object_get(seen, name))
			continue;
		json_object_set_new(seen, name, json_true());
		if (ab_store_calibration_latest(&text, NULL, store, name) < 0)
			continue;                  /* never calibrated (or unreadable): not listed */
		doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
		free(text);
		json_t *fpr = json_object_get(doc, "fpr");
		json_t *row = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "suite", name,
			"created_at", json_object_get(doc, "created_at"), "ref", json_object_get(doc, "ref"),
			"runs", json_object_get(doc, "runs"), "infra_runs", json_object_get(doc, "infra_runs"),
			"false_positives", json_object_get(fpr, "false_positives"), "fpr", json_object_get(fpr, "rate"),
			"fpr_upper_95", json_object_get(fpr, "upper"), "power", json_object_get(doc, "power"));
		if (row)
			json_array_append_new(cals, row);
		json_decref(doc);
	}
	if (ab_html_render_calibration(&out->body, cals) == 0)
		status = 200;
cleanup:
	json_decref(cals);
	json_decref(seen);
	ab_store_evals_free(evals, n);
	ab_store_close(store);
	return status;
}

int ab_pages_get(const struct ab_config *cfg, const char *path, ab_webhook_arg_fn arg, void *request,
		 struct ab_webhook_page *out)
{
	int status;
	out->body = NULL;
	if (!strncmp(path, "/runs/", 6)) {
		const char *p = path + 6;
		size_t digits = strspn(p, "0123456789");
		int as_json = !strcmp(p + digits, ".json");
		long long id = digits > 0 && digits <= 12 && p[0] != '0' ? strtoll(p, NULL, 10) : 0;
		if (id <= 0 || (p[digits] && !as_json))
			status = message(out, 404, "404 Not found", "No such evaluation.");
		else
			status = run_page(cfg, id, as_json, out);
	} else if (!strcmp(path, "/history")) {
		status = history_page(cfg, arg, request, out);
	} else if (!strcmp(path, "/calibration")) {
		status = calibration_page(cfg, out);
	} else {
		status = message(out, 404, "404 Not found", "There is no page at this address.");
	}
	if (status >= 0 && out->body && scrub(&out->body, cfg) < 0)
		status = -1;
	if (status < 0) {
		free(out->body);
		out->body = NULL;
	}
	return status;
}

void ab_pages_run_url(char *buf, size_t size, const struct ab_config *cfg, long long id)
{
	const char *base = cfg->public_url;
	size_t n = base ? strlen(base) : 0;
	while (n > 0 && base[n - 1] == '/')
		n--;
	if (n == 0 || id <= 0)
		snprintf(buf, size, "%s", "");
	else
		snprintf(buf, size, "%.*s/runs/%lld", (int)n, base, id);
}

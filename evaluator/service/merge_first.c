/*
 * merge_first.c - the `merge-first` label's move (see merge_first.h): read each open PR's
 * verified gain off its latest verdict, find the closed PRs that still carry the label, let
 * guards/policy.c pick the holder, then remove the label where it no longer belongs before
 * adding it to the holder, so there is never a moment with two.
 */
#define _GNU_SOURCE
#include "merge_first.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "error.h"
#include "log.h"
#include "policy.h"

#define CLOSED_MAX 1000

int ab_merge_first_gain(double *out_gain, char *what, size_t what_size, const char *result_json)
{
	json_t *doc = result_json ? json_loads(result_json, 0, NULL) : NULL;
	json_t *verdict = json_object_get(doc, "verdict"), *m;
	const char *kind = json_string_value(json_object_get(verdict, "kind"));
	const char *label = json_string_value(json_object_get(verdict, "label"));
	double best = NAN;
	size_t i;

	if (!kind && label)  /* documents without `kind`: the label says it */
		kind = !strcmp(label, "eval:none") ? "none" : !strcmp(label, "eval:REJECT") ? "reject"
			: !strcmp(label, "eval:infra-error") ? "infra" : "tier";
	if (!kind || !strcmp(kind, "infra")) {
		json_decref(doc);
		return AB_ENOTFOUND;
	}
	if (what)
		snprintf(what, what_size, "%s", label ? label : kind);
	if (strcmp(kind, "tier")) {
		json_decref(doc);
		*out_gain = 0;
		return 0;
	}
	json_array_foreach(json_object_get(doc, "metrics"), i, m) {
		json_t *lo = json_array_get(json_object_get(m, "ci_adj"), 0);
		if (!json_is_true(json_object_get(m, "gating")) || !json_is_string(json_object_get(m, "tier")) ||
		    !json_is_number(lo) || !(json_number_value(lo) - 1 > best || isnan(best)))
			continue;
		best = json_number_value(lo) - 1;
		if (what)
			snprintf(what, what_size, "%s ctx %lld (%s): family-wise lower bound %.3fx, %s",
				 json_string_value(json_object_get(m, "name")) ? json_string_value(json_object_get(m, "name")) : "?",
				 (long long)json_integer_value(json_object_get(m, "ctx")),
				 json_string_value(json_object_get(m, "model")) ? json_string_value(json_object_get(m, "model")) : "?",
				 json_number_value(lo), label ? label : "tier");
	}
	json_decref(doc);
	*out_gain = isnan(best) ? 0 : best;
	return 0;
}

/* The gain of repo#pr's latest verdict (0 when none). */
static double pr_gain(ab_queue *queue, const char *repo, int pr, char *what, size_t what_size)
{
	int64_t *ids = NULL;
	size_t n = 0;
	double gain = 0;

	snprintf(what, what_size, "no verdict yet");
	if (!queue || ab_queue_pr_done_jobs(queue, &ids, &n, repo, pr) < 0)
		return 0;
	for (size_t i = n; i-- > 0;) {
		struct ab_job *j = NULL;
		if (ab_queue_job_get(queue, &j, ids[i]) < 0)
			continue;
		int found = (!j->outcome || strcmp(j->outcome, "skipped")) &&
			    ab_merge_first_gain(&gain, what, what_size, j->result) == 0;
		ab_job_free(j);
		if (found)
			break;
		gain = 0;
	}
	free(ids);
	return gain;
}

static void emit(ab_policies_row_fn row, void *payload, const char *repo, int pr, const char *did, const char *figures)
{
	char key[32];
	snprintf(key, sizeof(key), "pr-%d", pr);
	if (row) {
		struct ab_policies_row r = { repo, pr, AB_MERGE_FIRST_LABEL, key, did, figures, 0, 0 };
		row(payload, &r);
	}
}

int ab_merge_first_run(ab_gh *gh, ab_queue *queue, const char *repo, const struct ab_merge_first_pr *prs, size_t n,
		       int dry_run, ab_policies_row_fn row, void *payload)
{
	json_t *closed = NULL, *item;
	struct ab_policy_gain *g = NULL;
	char (*what)[160] = NULL, *esc = NULL, path[512], figures[512];
	int *remove = NULL, winner = 0, error = -1;
	size_t n_g = 0, n_remove = 0, i;

	snprintf(path, sizeof(path), "/repos/%s/issues?state=closed&labels=%s&per_page=100", repo, AB_MERGE_FIRST_LABEL);
	if (ab_gh_get_all(gh, &closed, path, NULL, CLOSED_MAX) < 0)
		goto cleanup;
	size_t cap = n + json_array_size(closed);
	if (!(g = calloc(cap ? cap : 1, sizeof(*g))) || !(what = calloc(cap ? cap : 1, sizeof(*what))) ||
	    !(remove = calloc(cap ? cap : 1, sizeof(*remove))) || ab_gh_escape(&esc, AB_MERGE_FIRST_LABEL) < 0) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	for (i = 0; i < n; i++, n_g++) {
		g[n_g] = (struct ab_policy_gain){ prs[i].number, 0, prs[i].labelled, prs[i].eligible };
		g[n_g].gain = pr_gain(queue, repo, prs[i].number, what[n_g], sizeof(what[0]));
	}
	json_array_foreach(closed, i, item) {
		int number = (int)json_integer_value(json_object_get(item, "number"));
		if (number > 0 && json_object_get(item, "pull_request")) {
			g[n_g] = (struct ab_policy_gain){ number, 0, 1, 0 };
			snprintf(what[n_g++], sizeof(what[0]), "closed");
		}
	}
	if (ab_policy_merge_first(&winner, remove, cap, &n_remove, g, n_g) < 0) {
		ab_error_set("merge-first: too many labelled pull requests");
		goto cleanup;
	}
	error = 0;
	for (i = 0; i < n_remove; i++) {
		int rc = 0;
		snprintf(figures, sizeof(figures), "#%d carries `%s` now", winner, AB_MERGE_FIRST_LABEL);
		if (!winner)
			snprintf(figures, sizeof(figures), "no open pull request has a verified gain");
		if (!dry_run) {
			snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels/%s", repo, remove[i], esc);
			rc = ab_gh_request(gh, NULL, NULL, "DELETE", path, NULL, 0);
			if (rc == AB_ENOTFOUND)  /* already gone */
				rc = 0;
			if (rc < 0 && error == 0)
				error = rc;
		}
		AB_INFO("merge-first: %s#%d: %s %s (%s)", repo, remove[i], rc < 0 ? "could not remove" : "removed",
			AB_MERGE_FIRST_LABEL, figures);
		emit(row, payload, repo, remove[i], dry_run ? "would remove merge-first" : rc < 0 ? "failed to remove merge-first"
			: "removed merge-first", figures);
	}
	for (i = 0; winner && i < n_g; i++) {
		if (g[i].pr != winner || g[i].labelled)
			continue;
		int rc = 0;
		snprintf(figures, sizeof(figures), "verified gain %+.1f%%: %s", g[i].gain * 100, what[i]);
		if (!dry_run) {
			json_t *body = json_pack("{s:[s]}", "labels", AB_MERGE_FIRST_LABEL);
			snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels", repo, winner);
			rc = body ? ab_gh_request(gh, NULL, NULL, "POST", path, body, 0) : ab_error_set("out of memory");
			json_decref(body);
			if (rc < 0 && error == 0)
				error = rc;
		}
		AB_INFO("merge-first: %s#%d: %s %s (%s)", repo, winner, rc < 0 ? "could not label" : "labelled",
			AB_MERGE_FIRST_LABEL, figures);
		emit(row, payload, repo, winner, dry_run ? "would label merge-first" : rc < 0 ? "failed to label merge-first"
			: "labelled merge-first", figures);
	}
cleanup:
	if (error < 0)
		AB_WARN("merge-first: %s: %s", repo, ab_error_last());
	free(esc);
	free(remove);
	free(what);
	free(g);
	json_decref(closed);
	return error;
}

/*
 * reporter.c - posting an evaluation (see reporter.h). GitHub creates are not idempotent, so a
 * create that may have landed (5xx, network error) is never blindly repeated: the check run is
 * looked up by its external_id and the comment by its marker before another create is tried.
 * Updates (PATCH) and label changes are idempotent and use the client's own retries.
 */
#define _GNU_SOURCE
#include "reporter.h"
#include "verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "log.h"

#define CREATE_TRIES 4            /* look-up + create rounds for a non-idempotent create */
#define LIST_MAX 20000            /* comments / labels / check runs read per PR at most */
#define STATUS_DESCRIPTION_MAX 140 /* GitHub's cap on a commit status description, in characters */

struct ab_reporter {
	ab_gh *gh;                    /* NULL: directory backend */
	ab_queue *queue;              /* may be NULL */
	char *dir;
	int per_pr;
	char *check_name;
};

int ab_reporter_new_github(ab_reporter **out, ab_gh *gh, ab_queue *queue, const char *check_name)
{
	ab_reporter *r = calloc(1, sizeof(*r));
	if (!r || !(r->check_name = strdup(check_name ? check_name : "abgate"))) {
		free(r);
		return ab_error_set("out of memory");
	}
	r->gh = gh;
	r->queue = queue;
	*out = r;
	return 0;
}

int ab_reporter_new_dir(ab_reporter **out, const char *dir, int per_pr, const char *check_name)
{
	ab_reporter *r = calloc(1, sizeof(*r));
	if (!r || !(r->dir = strdup(dir)) || !(r->check_name = strdup(check_name ? check_name : "abgate"))) {
		if (r)
			free(r->dir);
		free(r);
		return ab_error_set("out of memory");
	}
	r->per_pr = per_pr;
	*out = r;
	return 0;
}

void ab_reporter_free(ab_reporter *r)
{
	if (!r)
		return;
	free(r->dir);
	free(r->check_name);
	free(r);
}

int ab_reporter_is_github(const ab_reporter *r) { return r->gh != NULL; }

static char *now_iso(char *buf, size_t size)
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* ---- directory backend ---- */

static int pr_dir(const ab_reporter *r, char *buf, size_t size, const char *repo, int pr)
{
	if (!r->per_pr) {
		snprintf(buf, size, "%s", r->dir);
	} else {
		char flat[512];
		size_t o = 0;
		for (const char *p = repo; *p && o + 3 < sizeof(flat); p++) {  /* owner/repo -> owner__repo */
			if (*p == '/') {
				flat[o++] = '_';
				flat[o++] = '_';
			} else {
				flat[o++] = *p;
			}
		}
		flat[o] = '\0';
		snprintf(buf, size, "%s/%s/pr-%d", r->dir, flat, pr);
	}
	return ab_fs_mkdirs(buf);
}

/* Writes text to dir/name atomically (fs.h). */
static int write_file(const char *dir, const char *name, const char *text)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (ab_fs_write_atomic(path, text) < 0)
		return ab_error_wrap(AB_ERROR, "reporter");
	AB_INFO("reporter: wrote %s", path);
	return 0;
}

static int write_json(const char *dir, const char *name, json_t *j)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text)
		return ab_error_set("out of memory");
	size_t n = strlen(text);
	char *nl = realloc(text, n + 2);
	if (!nl) {
		free(text);
		return ab_error_set("out of memory");
	}
	nl[n] = '\n';
	nl[n + 1] = '\0';
	int error = write_file(dir, name, nl);
	free(nl);
	return error;
}

/* check_run.json: the body that would be sent to GitHub. */
static json_t *check_run_body(const ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep,
			      const char *summary)
{
	char stamp[32], title[256];
	ab_report_title(title, sizeof(title), rep);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}}", "name", r->check_name, "head_sha",
			      t->head_sha, "external_id", t->external_id ? t->external_id : "", "status", "completed",
			      "conclusion", ab_report_conclusion(rep->outcome), "completed_at",
			      now_iso(stamp, sizeof(stamp)), "output", "title", title, "summary", summary);
	if (j && rep->run_url)
		json_object_set_new(j, "details_url", json_string(rep->run_url));
	return j;
}

/* Writes text (or j, when text is NULL) as dir/name in the PR's directory. */
static int dir_write(const ab_reporter *r, const struct ab_report_target *t, const char *name, const char *text, json_t *j)
{
	char dir[4096];
	if (pr_dir(r, dir, sizeof(dir), t->repo, t->pr) < 0)
		return -1;
	return text ? write_file(dir, name, text) : write_json(dir, name, j);
}

static int dir_check(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep)
{
	char *summary = NULL;
	json_t *check = NULL;
	int error = -1;

	if (ab_report_summary(&summary, t, rep) < 0)
		return -1;
	if (!(check = check_run_body(r, t, rep, summary)))
		ab_error_set("out of memory");
	else
		error = dir_write(r, t, "check_run.json", NULL, check);
	free(summary);
	json_decref(check);
	return error;
}

static int dir_comment(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep)
{
	char *comment = NULL;
	if (ab_report_comment_body(&comment, t, rep) < 0)
		return -1;
	int error = dir_write(r, t, "comment.md", comment, NULL);
	free(comment);
	return error;
}

static int dir_labels(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep)
{
	json_t *labels = ab_report_labels(rep), *doc;
	int error;

	doc = json_pack("{s:s, s:i, s:s, s:O, s:[ssss]}", "repo", t->repo, "pr", t->pr, "head_sha", t->head_sha, "labels",
			labels, "managed", "eval:*", "eval-*:*", "regression-*", "accuracy-regression");
	error = doc ? dir_write(r, t, "labels.json", NULL, doc) : ab_error_set("out of memory");
	json_decref(labels);
	json_decref(doc);
	return error;
}

/* ---- GitHub backend ---- */

static const char *auth_kind(ab_reporter *r)
{
	return ab_gh_auth_is_app(ab_gh_get_auth(r->gh)) ? "app" : "token";
}

/* Remembered across restarts: these credentials got 403/404 creating a check run. */
static int checks_unavailable(ab_reporter *r)
{
	char *v = NULL;
	int yes = 0;
	if (r->queue && ab_queue_kv_get(r->queue, "checks_unavailable", &v) == 0) {
		yes = !strcmp(v, auth_kind(r));
		free(v);
	}
	return yes;
}

static int find_check_run(ab_reporter *r, const struct ab_report_target *t, int64_t *out)
{
	char path[512], *name = NULL;
	json_t *runs = NULL;
	int error = AB_ENOTFOUND;

	if (ab_gh_escape(&name, r->check_name) < 0)
		return -1;
	snprintf(path, sizeof(path), "/repos/%s/commits/%s/check-runs?check_name=%s&per_page=100", t->repo, t->head_sha,
		 name);
	free(name);
	if (ab_gh_get_all(r->gh, &runs, path, "check_runs", LIST_MAX) < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(runs); i++) {
		json_t *run = json_array_get(runs, i);
		const char *ext = json_string_value(json_object_get(run, "external_id"));
		if (ext && t->external_id && !strcmp(ext, t->external_id)) {
			*out = json_integer_value(json_object_get(run, "id"));
			error = 0;
			break;
		}
	}
	json_decref(runs);
	return error;
}

/* Creates a check run from `body` once: looks for one with our external_id before each retry. */
static int create_check_run(ab_reporter *r, const struct ab_report_target *t, json_t *body, int64_t *out)
{
	char path[512];
	json_t *reply = NULL;
	long status = 0;
	int error = -1;

	snprintf(path, sizeof(path), "/repos/%s/check-runs", t->repo);
	for (int attempt = 0; attempt < CREATE_TRIES; attempt++) {
		if (attempt > 0) {
			if (ab_gh_backoff(r->gh, attempt - 1) < 0)
				return -1;
			if (find_check_run(r, t, out) == 0)
				return 0;  /* the earlier try landed */
		}
		error = ab_gh_request(r->gh, &reply, &status, "POST", path, body, AB_GH_NO_RETRY);
		if (error == 0) {
			*out = json_integer_value(json_object_get(reply, "id"));
			json_decref(reply);
			return *out > 0 ? 0 : ab_error_set("github: check run reply without id");
		}
		if (status == 403 || status == 404)
			return AB_ENOTFOUND;  /* these credentials cannot create check runs */
		if (error != AB_ERROR || (status && status < 500))
			return error;     /* a 4xx or a rate limit: retrying now will not help */
	}
	return error;
}

/* `description` is at most STATUS_DESCRIPTION_MAX bytes (ab_report_title cuts it to fit). */
static int post_status(ab_reporter *r, const struct ab_report_target *t, const char *state, const char *description)
{
	char path[512];
	json_t *body;
	int error;

	snprintf(path, sizeof(path), "/repos/%s/statuses/%s", t->repo, t->head_sha);
	if (!(body = json_pack("{s:s, s:s, s:s}", "state", state, "context", r->check_name, "description", description)))
		return ab_error_set("out of memory");
	error = ab_gh_request(r->gh, NULL, NULL, "POST", path, body, 0);
	json_decref(body);
	return error;
}

static int set_kind(char **io_kind, const char *kind)
{
	char *k = strdup(kind);
	if (!k)
		return ab_error_set("out of memory");
	free(*io_kind);
	*io_kind = k;
	return 0;
}

/* Switches to commit statuses for good after check runs were refused. */
static int fall_back_to_status(ab_reporter *r, char **io_kind)
{
	AB_WARN("reporter: these credentials cannot create check runs (%s auth); using commit statuses", auth_kind(r));
	if (r->queue)
		ab_queue_kv_set(r->queue, "checks_unavailable", auth_kind(r));
	return set_kind(io_kind, "status");
}

int ab_reporter_start(ab_reporter *r, const struct ab_report_target *t, int64_t *io_check_id, char **io_kind,
		      int retried)
{
	char stamp[32], path[512];
	json_t *body = NULL;
	int error = -1;

	if (!r->gh)
		return 0;  /* files are written once, at the end */
	if (!*io_kind && set_kind(io_kind, checks_unavailable(r) ? "status" : "check") < 0)
		return -1;
	if (!strcmp(*io_kind, "check")) {
		if (*io_check_id == 0 && retried && find_check_run(r, t, io_check_id) == 0)
			AB_INFO("reporter: %s#%d: reusing check run %lld of an earlier attempt", t->repo, t->pr,
				(long long)*io_check_id);
		if (*io_check_id) {
			snprintf(path, sizeof(path), "/repos/%s/check-runs/%lld", t->repo, (long long)*io_check_id);
			body = json_pack("{s:s}", "status", "in_progress");
			error = body ? ab_gh_request(r->gh, NULL, NULL, "PATCH", path, body, 0) : ab_error_set("out of memory");
			goto cleanup;
		}
		body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}}", "name", r->check_name, "head_sha", t->head_sha,
				 "status", "in_progress", "external_id", t->external_id ? t->external_id : "",
				 "started_at", now_iso(stamp, sizeof(stamp)), "output", "title", "Evaluating",
				 "summary", "abgate is building and measuring base and head.");
		if (!body) {
			ab_error_set("out of memory");
			goto cleanup;
		}
		error = create_check_run(r, t, body, io_check_id);
		if (error != AB_ENOTFOUND)
			goto cleanup;
		if (fall_back_to_status(r, io_kind) < 0)
			goto cleanup;
	}
	error = post_status(r, t, "pending", "abgate: evaluating");
cleanup:
	json_decref(body);
	return error;
}

int ab_reporter_pause(ab_reporter *r, const struct ab_report_target *t, int64_t check_id, const char *kind)
{
	char path[512];
	json_t *body;
	int error;

	if (!r->gh || !kind)
		return 0;
	if (!strcmp(kind, "status"))
		return post_status(r, t, "pending", "abgate: paused (service stopped); resumes on restart");
	if (!check_id)
		return 0;
	snprintf(path, sizeof(path), "/repos/%s/check-runs/%lld", t->repo, (long long)check_id);
	body = json_pack("{s:s, s:{s:s, s:s}}", "status", "queued", "output", "title", "Paused",
			 "summary", "abgate stopped before this evaluation finished (the service was shut down). "
			 "The evaluation is back in the queue and starts again when the service restarts.");
	if (!body)
		return ab_error_set("out of memory");
	/* No retries: the service is stopping, and a restart resumes the run anyway. */
	error = ab_gh_request(r->gh, NULL, NULL, "PATCH", path, body, AB_GH_NO_RETRY);
	json_decref(body);
	return error;
}

static int complete_check(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep,
			  int64_t *io_check_id, char **io_kind)
{
	char path[512], description[STATUS_DESCRIPTION_MAX + 1];
	char *summary = NULL;
	json_t *body = NULL;
	int error = -1;

	if (!*io_kind && set_kind(io_kind, checks_unavailable(r) ? "status" : "check") < 0)
		return -1;
	ab_report_title(description, sizeof(description), rep);
	if (!strcmp(*io_kind, "status"))
		return post_status(r, t, ab_report_status_state(rep->outcome), description);
	if (ab_report_summary(&summary, t, rep) < 0)
		return -1;
	if (!(body = check_run_body(r, t, rep, summary))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	if (*io_check_id) {
		snprintf(path, sizeof(path), "/repos/%s/check-runs/%lld", t->repo, (long long)*io_check_id);
		error = ab_gh_request(r->gh, NULL, NULL, "PATCH", path, body, 0);
		if (error != AB_ENOTFOUND)
			goto cleanup;
		AB_WARN("reporter: check run %lld is gone; creating a new one", (long long)*io_check_id);
		*io_check_id = 0;
	}
	if (find_check_run(r, t, io_check_id) == 0) {
		snprintf(path, sizeof(path), "/repos/%s/check-runs/%lld", t->repo, (long long)*io_check_id);
		error = ab_gh_request(r->gh, NULL, NULL, "PATCH", path, body, 0);
		goto cleanup;
	}
	error = create_check_run(r, t, body, io_check_id);
	if (error == AB_ENOTFOUND) {
		if (fall_back_to_status(r, io_kind) < 0)
			goto cleanup;
		error = post_status(r, t, ab_report_status_state(rep->outcome), description);
	}
cleanup:
	free(summary);
	json_decref(body);
	return error;
}

/* The id of the first comment on repo#pr that opens with our marker; AB_ENOTFOUND when none. */
static int find_sticky(ab_reporter *r, const struct ab_report_target *t, int64_t *out)
{
	char path[512];
	json_t *comments = NULL;
	int error = AB_ENOTFOUND, found = 0;

	snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments?per_page=100", t->repo, t->pr);
	if (ab_gh_get_all(r->gh, &comments, path, NULL, LIST_MAX) < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(comments); i++) {
		const char *body = json_string_value(json_object_get(json_array_get(comments, i), "body"));
		if (body && !strncmp(body, AB_COMMENT_MARKER, strlen(AB_COMMENT_MARKER))) {
			if (!found++) {
				*out = json_integer_value(json_object_get(json_array_get(comments, i), "id"));
				error = 0;
			}
		}
	}
	if (found > 1)
		AB_WARN("reporter: %s#%d has %d abgate comments; updating the oldest", t->repo, t->pr, found);
	json_decref(comments);
	return error;
}

static int update_comment(ab_reporter *r, const struct ab_report_target *t, int64_t id, json_t *body)
{
	char path[512];
	snprintf(path, sizeof(path), "/repos/%s/issues/comments/%lld", t->repo, (long long)id);
	return ab_gh_request(r->gh, NULL, NULL, "PATCH", path, body, 0);
}

static int publish_comment(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep)
{
	char path[512];
	char *text = NULL;
	json_t *body = NULL, *reply = NULL;
	int64_t id = 0;
	long status = 0;
	int error = -1;

	if (ab_report_comment_body(&text, t, rep) < 0)
		return -1;
	if (!(body = json_pack("{s:s}", "body", text))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	if (r->queue && ab_queue_sticky_get(r->queue, t->repo, t->pr, &id) == 0) {
		error = update_comment(r, t, id, body);
		if (error != AB_ENOTFOUND)
			goto record;
		AB_WARN("reporter: %s#%d: sticky comment %lld was deleted; looking again", t->repo, t->pr, (long long)id);
	}
	snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments", t->repo, t->pr);
	for (int attempt = 0; attempt < CREATE_TRIES; attempt++) {
		if (attempt > 0 && (error = ab_gh_backoff(r->gh, attempt - 1)) < 0)
			goto cleanup;
		/* Look before creating: an earlier try (this process or one that crashed) may have landed. */
		if ((error = find_sticky(r, t, &id)) == 0) {
			error = update_comment(r, t, id, body);
			goto record;
		}
		if (error != AB_ENOTFOUND)
			goto cleanup;
		error = ab_gh_request(r->gh, &reply, &status, "POST", path, body, AB_GH_NO_RETRY);
		if (error == 0) {
			/* Without an id the comment cannot be updated: the retry finds it by its marker. */
			if ((id = json_integer_value(json_object_get(reply, "id"))) <= 0)
				error = ab_error_set("github: comment reply without id");
			goto record;
		}
		if (error != AB_ERROR || (status && status < 500))
			goto cleanup;
	}
	goto cleanup;
record:
	if (error == 0 && r->queue)
		ab_queue_sticky_set(r->queue, t->repo, t->pr, id, t->head_sha, time(NULL));
cleanup:
	json_decref(reply);
	json_decref(body);
	free(text);
	return error;
}

static int in_array(json_t *array, const char *s)
{
	for (size_t i = 0; i < json_array_size(array); i++)
		if (!strcmp(json_string_value(json_array_get(array, i)) ?: "", s))
			return 1;
	return 0;
}

static int sync_labels(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep)
{
	char path[1024];
	json_t *current = NULL, *want = ab_report_labels(rep), *add = json_array(), *names = json_array();
	int error = -1;

	if (!want || !add || !names) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels?per_page=100", t->repo, t->pr);
	if (ab_gh_get_all(r->gh, &current, path, NULL, LIST_MAX) < 0)
		goto cleanup;
	for (size_t i = 0; i < json_array_size(current); i++) {
		const char *name = json_string_value(json_object_get(json_array_get(current, i), "name"));
		if (!name)
			continue;
		json_array_append_new(names, json_string(name));
		if (!ab_verdict_label_is_managed(name) || in_array(want, name))
			continue;
		char *esc = NULL;
		if (ab_gh_escape(&esc, name) < 0)
			goto cleanup;
		snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels/%s", t->repo, t->pr, esc);
		free(esc);
		int rc = ab_gh_request(r->gh, NULL, NULL, "DELETE", path, NULL, 0);
		if (rc < 0 && rc != AB_ENOTFOUND)  /* already gone is fine */
			goto cleanup;
	}
	for (size_t i = 0; i < json_array_size(want); i++)
		if (!in_array(names, json_string_value(json_array_get(want, i))))
			json_array_append(add, json_array_get(want, i));
	if (json_array_size(add) > 0) {  /* GitHub rejects an empty list; unchanged sets cost no write */
		json_t *body = json_pack("{s:O}", "labels", add);
		snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels", t->repo, t->pr);
		int rc = body ? ab_gh_request(r->gh, NULL, NULL, "POST", path, body, 0) : ab_error_set("out of memory");
		json_decref(body);
		if (rc < 0)
			goto cleanup;
	}
	error = 0;
cleanup:
	json_decref(current);
	json_decref(want);
	json_decref(add);
	json_decref(names);
	return error;
}

/* A step landed: set its bit and tell the caller before the next step starts. */
static int step_done(unsigned *io_done, unsigned bit, int (*mark)(void *, unsigned), void *payload)
{
	*io_done |= bit;
	return mark ? mark(payload, bit) : 0;
}

int ab_reporter_publish(ab_reporter *r, const struct ab_report_target *t, const struct ab_report *rep,
			int64_t *io_check_id, char **io_kind, unsigned *io_done, int (*mark)(void *, unsigned),
			void *payload)
{
	int error;

	if (!(*io_done & AB_REPORT_CHECK)) {
		error = r->gh ? complete_check(r, t, rep, io_check_id, io_kind) : dir_check(r, t, rep);
		if (error < 0 || (error = step_done(io_done, AB_REPORT_CHECK, mark, payload)) < 0)
			return error;
	}
	if (!rep->current || !ab_report_has_verdict(rep)) {
		*io_done |= AB_REPORT_COMMENT | AB_REPORT_LABELS;  /* nothing to post as current */
		return 0;
	}
	if (!(*io_done & AB_REPORT_COMMENT)) {
		error = r->gh ? publish_comment(r, t, rep) : dir_comment(r, t, rep);
		if (error < 0 || (error = step_done(io_done, AB_REPORT_COMMENT, mark, payload)) < 0)
			return error;
	}
	if (!(*io_done & AB_REPORT_LABELS)) {
		error = r->gh ? sync_labels(r, t, rep) : dir_labels(r, t, rep);
		if (error < 0 || (error = step_done(io_done, AB_REPORT_LABELS, mark, payload)) < 0)
			return error;
	}
	return 0;
}

int ab_reporter_reply(ab_reporter *r, const char *repo, int pr, const char *text)
{
	char path[512];
	json_t *body;
	int error;

	if (!r->gh) {
		char dir[4096], name[64];
		if (pr_dir(r, dir, sizeof(dir), repo, pr) < 0)
			return -1;
		snprintf(name, sizeof(name), "reply-%lld.md", (long long)time(NULL));
		return write_file(dir, name, text);
	}
	snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments", repo, pr);
	if (!(body = json_pack("{s:s}", "body", text)))
		return ab_error_set("out of memory");
	/* A reply is not sticky: retry only what certainly did not land. */
	error = ab_gh_request(r->gh, NULL, NULL, "POST", path, body, AB_GH_NO_RETRY);
	json_decref(body);
	return error;
}

/*
 * policy_actions.c - one decided policy action applied as recorded steps (see policy_actions.h):
 * the action row is written first (pending), then each missing step (label, comment, close) is
 * made and marked, so a restart resumes where it stopped. A comment is a create that may land
 * without us hearing back, so before creating one the PR's comments are searched for the action's
 * hidden marker; labels and closing are idempotent by nature.
 */
#define _GNU_SOURCE
#include "policy_actions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>

#include "error.h"
#include "log.h"

#define LIST_MAX 5000

enum { STEP_LABEL = 1, STEP_COMMENT = 2, STEP_CLOSE = 4 };

struct ctx {
	sqlite3 *db;
	ab_gh *gh;
};

static int db_fail(sqlite3 *db, const char *what)
{
	return ab_error_set("policies: %s: %s", what, sqlite3_errmsg(db));
}

/* Records the action (pending) if new; *out_steps and *out_done receive its progress. */
static int record(struct ctx *p, const char *repo, const struct ab_policy_action *a, const char *head,
		  int *out_steps, int *out_done)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(p->db, "INSERT OR IGNORE INTO actions(repo, pr, rule, key, head_sha, figures, value, "
				    "match_pr, close, no_eval, label, state, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,'pending',?)",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return db_fail(p->db, "prepare");
	sqlite3_bind_text(st, 1, repo, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, a->pr);
	sqlite3_bind_text(st, 3, ab_policy_rule_name(a->rule), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, head, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, a->figures, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 7, a->value);
	sqlite3_bind_int(st, 8, a->match_pr);
	sqlite3_bind_int(st, 9, a->close);
	sqlite3_bind_int(st, 10, a->no_eval);
	if (a->label)
		sqlite3_bind_text(st, 11, a->label, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 12, (sqlite3_int64)time(NULL));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return db_fail(p->db, "record action");
	if (sqlite3_prepare_v2(p->db, "SELECT steps, state FROM actions WHERE repo = ? AND pr = ? AND rule = ? AND key = ?",
			       -1, &st, NULL) != SQLITE_OK)
		return db_fail(p->db, "prepare");
	sqlite3_bind_text(st, 1, repo, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, a->pr);
	sqlite3_bind_text(st, 3, ab_policy_rule_name(a->rule), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out_steps = sqlite3_column_int(st, 0);
		*out_done = !strcmp((const char *)sqlite3_column_text(st, 1), "done");
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : db_fail(p->db, "read action");
}

static int mark(struct ctx *p, const char *repo, const struct ab_policy_action *a, int steps, int done, int64_t comment_id)
{
	char *sql = sqlite3_mprintf("UPDATE actions SET steps = %d, state = '%s', done_at = %lld, comment_id = CASE WHEN "
				    "%lld != 0 THEN %lld ELSE comment_id END WHERE repo = %Q AND pr = %d AND rule = %Q AND "
				    "key = %Q", steps, done ? "done" : "pending", done ? (long long)time(NULL) : 0LL,
				    (long long)comment_id, (long long)comment_id, repo, a->pr, ab_policy_rule_name(a->rule),
				    a->key);
	int rc = sql ? sqlite3_exec(p->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
	sqlite3_free(sql);
	return rc == SQLITE_OK ? 0 : db_fail(p->db, "mark action");
}

/* The id of a comment on repo#pr that starts with `marker`; AB_ENOTFOUND when none. */
static int find_marked(struct ctx *p, const char *repo, int pr, const char *marker, int64_t *out)
{
	char path[512];
	json_t *items = NULL, *c;
	size_t i;
	int error = AB_ENOTFOUND;

	snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments?per_page=100", repo, pr);
	if (ab_gh_get_all(p->gh, &items, path, NULL, LIST_MAX) < 0)
		return -1;
	json_array_foreach(items, i, c) {
		const char *body = json_string_value(json_object_get(c, "body"));
		if (body && !strncmp(body, marker, strlen(marker))) {
			*out = json_integer_value(json_object_get(c, "id"));
			error = 0;
			break;
		}
	}
	json_decref(items);
	return error;
}

int ab_policy_actions_apply(sqlite3 *db, ab_gh *gh, const char *repo, const struct ab_policy_action *a,
			    const struct ab_policy_rules *rules, const char *head, char *did, size_t did_size)
{
	struct ctx ctx = { db, gh }, *p = &ctx;
	int steps = 0, done = 0, error;
	int want = (a->label ? STEP_LABEL : 0) | (a->rule != AB_RULE_HARNESS ? STEP_COMMENT : 0) | (a->close ? STEP_CLOSE : 0);
	int64_t comment_id = 0;
	char path[512];
	size_t o = 0;

	if ((error = record(p, repo, a, head, &steps, &done)) < 0)
		return error;
	if (done || (steps & want) == want) {
		snprintf(did, did_size, "already done");
		return done ? 0 : mark(p, repo, a, steps, 1, 0);
	}
	did[0] = '\0';
	if ((want & STEP_LABEL) && !(steps & STEP_LABEL)) {
		json_t *body = json_pack("{s:[s]}", "labels", a->label);
		snprintf(path, sizeof(path), "/repos/%s/issues/%d/labels", repo, a->pr);
		error = ab_gh_request(p->gh, NULL, NULL, "POST", path, body, 0);
		json_decref(body);
		if (error < 0)
			goto fail;
		steps |= STEP_LABEL;
		o += (size_t)snprintf(did + o, did_size - o, "labelled %s", a->label);
		if ((error = mark(p, repo, a, steps, 0, 0)) < 0)
			goto fail;
	}
	if ((want & STEP_COMMENT) && !(steps & STEP_COMMENT)) {
		char marker[256], *text = NULL;
		ab_policy_marker(marker, sizeof(marker), a);
		error = find_marked(p, repo, a->pr, marker, &comment_id);
		if (error == AB_ENOTFOUND) {
			json_t *body = NULL, *reply = NULL;
			if (ab_policy_comment(&text, a, rules) < 0 || !(body = json_pack("{s:s}", "body", text))) {
				free(text);
				error = ab_error_set("out of memory");
				goto fail;
			}
			snprintf(path, sizeof(path), "/repos/%s/issues/%d/comments", repo, a->pr);
			/* Not retried blindly: the next sweep looks for the marker first. */
			error = ab_gh_request(p->gh, &reply, NULL, "POST", path, body, AB_GH_NO_RETRY);
			comment_id = json_integer_value(json_object_get(reply, "id"));
			json_decref(body);
			json_decref(reply);
			free(text);
		}
		if (error < 0)
			goto fail;
		steps |= STEP_COMMENT;
		o += (size_t)snprintf(did + o, did_size - o, "%scommented", o ? ", " : "");
		if ((error = mark(p, repo, a, steps, 0, comment_id)) < 0)
			goto fail;
	}
	if ((want & STEP_CLOSE) && !(steps & STEP_CLOSE)) {
		json_t *body = json_pack("{s:s}", "state", "closed");
		snprintf(path, sizeof(path), "/repos/%s/pulls/%d", repo, a->pr);
		error = ab_gh_request(p->gh, NULL, NULL, "PATCH", path, body, 0);
		json_decref(body);
		if (error < 0)
			goto fail;
		steps |= STEP_CLOSE;
		o += (size_t)snprintf(did + o, did_size - o, "%sclosed", o ? ", " : "");
	}
	if (!did[0])
		snprintf(did, did_size, "recorded");
	AB_INFO("policies: %s#%d: %s (%s): %s", repo, a->pr, ab_policy_rule_name(a->rule), a->key, did);
	return mark(p, repo, a, steps, 1, 0);
fail:
	snprintf(did, did_size, "failed: %.200s", ab_error_last());
	AB_WARN("policies: %s#%d: %s: %s", repo, a->pr, ab_policy_rule_name(a->rule), ab_error_last());
	return error;
}

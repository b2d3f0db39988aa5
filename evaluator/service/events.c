/*
 * events.c - webhook payload → queue intent (see events.h). Dispatch is on X-GitHub-Event, as
 * GitHub recommends, never on the body's shape. Only the few fields needed are read, each with its
 * type and length checked.
 */
#include "events.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>

#include "error.h"

/* Copies a string member into buf when it is a string of 1..size-1 bytes; 0 or -1. */
static int get_string(char *buf, size_t size, json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	if (!s || !s[0] || strlen(s) >= size)
		return -1;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

static int is_sha(const char *s)
{
	if (strlen(s) != 40)
		return 0;
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s))
			return 0;
	return 1;
}

int ab_events_command(const char *body)
{
	char line[64];
	size_t n = 0;

	if (!body)
		return 0;
	while (*body == ' ' || *body == '\t' || *body == '\r' || *body == '\n')
		body++;
	while (body[n] && body[n] != '\n' && n < sizeof(line) - 1) {
		line[n] = body[n];
		n++;
	}
	line[n] = '\0';
	while (n > 0 && isspace((unsigned char)line[n - 1]))
		line[--n] = '\0';
	if (!strcmp(line, "/eval"))
		return 1;
	if (!strncmp(line, "/eval", 5) && isspace((unsigned char)line[5])) {
		const char *arg = line + 5;
		while (isspace((unsigned char)*arg))
			arg++;
		if (!strcmp(arg, "rerun"))
			return 2;
	}
	return 0;
}

static void ignore(struct ab_event *out, const char *why)
{
	out->intent.kind = AB_INTENT_NONE;
	out->ignored = why;
}

static int parse_pull_request(struct ab_event *out, const struct ab_repo_config *repo, json_t *root)
{
	json_t *pr = json_object_get(root, "pull_request");
	const char *action = json_string_value(json_object_get(root, "action"));
	json_int_t number = json_integer_value(json_object_get(root, "number"));

	if (!action || !json_is_object(pr))
		return ab_error_setc(AB_EINVALID, "webhook: pull_request without action or pull_request");
	if (number <= 0)
		number = json_integer_value(json_object_get(pr, "number"));
	if (number <= 0 || number > 1000000000)
		return ab_error_setc(AB_EINVALID, "webhook: pull_request without a number");
	out->intent.pr = (int)number;
	if (!strcmp(action, "closed")) {
		out->intent.kind = AB_INTENT_CLOSE;
		return 0;
	}
	if (strcmp(action, "opened") && strcmp(action, "synchronize") && strcmp(action, "reopened") &&
	    strcmp(action, "ready_for_review")) {
		ignore(out, "pull_request action not evaluated");
		return 0;
	}
	if (json_is_true(json_object_get(pr, "draft"))) {
		ignore(out, "draft pull request");
		return 0;
	}
	if (get_string(out->head_sha, sizeof(out->head_sha), json_object_get(pr, "head"), "sha") < 0 ||
	    !is_sha(out->head_sha))
		return ab_error_setc(AB_EINVALID, "webhook: pull_request.head.sha is not a sha");
	out->intent.kind = AB_INTENT_ENQUEUE;
	out->intent.head_sha = out->head_sha;
	out->intent.base_ref = repo->base;
	snprintf(out->trigger, sizeof(out->trigger), "webhook %s", action);
	out->intent.trigger = out->trigger;
	return 0;
}

static int parse_issue_comment(struct ab_event *out, json_t *root)
{
	const char *action = json_string_value(json_object_get(root, "action"));
	json_t *issue = json_object_get(root, "issue"), *comment = json_object_get(root, "comment");
	json_t *user = json_object_get(comment, "user");

	if (!action || !json_is_object(issue) || !json_is_object(comment))
		return ab_error_setc(AB_EINVALID, "webhook: issue_comment without action, issue or comment");
	if (strcmp(action, "created")) {
		ignore(out, "issue_comment action not a command");
		return 0;
	}
	if (!json_is_object(json_object_get(issue, "pull_request"))) {
		ignore(out, "comment on an issue, not a pull request");
		return 0;
	}
	int cmd = ab_events_command(json_string_value(json_object_get(comment, "body")));
	if (!cmd) {
		ignore(out, "comment is not an /eval command");
		return 0;
	}
	const char *type = json_string_value(json_object_get(user, "type"));
	if (type && !strcmp(type, "Bot")) {
		ignore(out, "command from a bot");
		return 0;
	}
	json_int_t number = json_integer_value(json_object_get(issue, "number"));
	json_int_t comment_id = json_integer_value(json_object_get(comment, "id"));
	if (number <= 0 || number > 1000000000 || get_string(out->user, sizeof(out->user), user, "login") < 0)
		return ab_error_setc(AB_EINVALID, "webhook: issue_comment without issue.number or comment.user.login");
	out->intent.kind = AB_INTENT_COMMAND;
	out->intent.pr = (int)number;
	out->intent.user = out->user;
	out->intent.comment_id = comment_id > 0 ? comment_id : 0;
	out->intent.rerun = cmd == 2;
	return 0;
}

int ab_events_parse(struct ab_event *out, const struct ab_config *cfg, const char *event, const char *body, size_t len)
{
	json_t *root = NULL;
	json_error_t jerr;
	const struct ab_repo_config *repo;
	int error = -1;

	memset(out, 0, sizeof(*out));
	out->intent.kind = AB_INTENT_NONE;
	if (!(root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr)) || !json_is_object(root)) {
		error = ab_error_setc(AB_EINVALID, "webhook: body is not a JSON object: %s", root ? "" : jerr.text);
		goto cleanup;
	}
	if (!strcmp(event, "ping")) {
		out->is_ping = 1;
		ignore(out, "ping");
		error = 0;
		goto cleanup;
	}
	if (strcmp(event, "pull_request") && strcmp(event, "issue_comment")) {
		ignore(out, "event not handled");
		error = 0;
		goto cleanup;
	}
	if (get_string(out->repo, sizeof(out->repo), json_object_get(root, "repository"), "full_name") < 0) {
		error = ab_error_setc(AB_EINVALID, "webhook: %s without repository.full_name", event);
		goto cleanup;
	}
	out->intent.repo = out->repo;
	if (!(repo = ab_config_repo(cfg, out->repo))) {
		ignore(out, "repository not configured");
		error = 0;
		goto cleanup;
	}
	/* Use the configured spelling: GitHub names are case-insensitive, our keys are not. */
	snprintf(out->repo, sizeof(out->repo), "%s", repo->name);
	error = !strcmp(event, "pull_request") ? parse_pull_request(out, repo, root) : parse_issue_comment(out, root);
cleanup:
	json_decref(root);
	return error;
}

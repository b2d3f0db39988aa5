/*
 * report.c - what a post says for each outcome (see report.h): the label, reason and conclusion
 * when the evaluation left no verdict, the managed label sets, and the comment's hidden marker.
 * The text itself is rendered by reports/post.h from the result document and these choices.
 */
#include "report.h"
#include "verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "post.h"

static int has_verdict(const char *outcome)
{
	/* "skipped": a policy decided not to evaluate the head (the note says which and why). */
	return strcmp(outcome, "canceled") && strcmp(outcome, "superseded") && strcmp(outcome, "skipped");
}

static int is_infra(const char *outcome)
{
	return !strcmp(outcome, "infra") || !strcmp(outcome, "timeout") || !strcmp(outcome, "exhausted");
}

static json_t *verdict(const struct ab_report *rep)
{
	return rep->result ? json_object_get(rep->result, "verdict") : NULL;
}

/* The label when the result has none (or there is no result). */
static const char *outcome_label(const char *outcome)
{
	if (!has_verdict(outcome))
		return outcome;  /* "canceled", "superseded", "skipped" */
	if (!strcmp(outcome, "reject"))
		return "eval:REJECT";
	return is_infra(outcome) ? "eval:infra-error" : "eval:none";
}

static const char *verdict_label(const struct ab_report *rep)
{
	const char *label = json_string_value(json_object_get(verdict(rep), "label"));
	return label ? label : outcome_label(rep->outcome);
}

/* The reason when the result has none (or there is no result). */
static const char *outcome_reason(const struct ab_report *rep)
{
	if (!strcmp(rep->outcome, "superseded"))
		return "a newer push replaced this head";
	if (!strcmp(rep->outcome, "canceled"))
		return "the pull request was closed";
	if (!strcmp(rep->outcome, "timeout"))
		return "the evaluation ran past job_timeout_s";
	if (!strcmp(rep->outcome, "exhausted"))
		return "the evaluation did not finish: its worker stopped every attempt";
	return rep->note;
}

static struct ab_post post_of(const struct ab_report_target *t, const struct ab_report *rep)
{
	return (struct ab_post){
		.result = rep->result, .label = outcome_label(rep->outcome), .reason = outcome_reason(rep),
		.note = rep->note, .infra = is_infra(rep->outcome), .head_sha = t ? t->head_sha : NULL,
		.pr = t ? t->pr : 0, .base_ref = t ? t->base_ref : NULL, .run_url = rep->run_url,
	};
}

const char *ab_report_conclusion(const char *outcome)
{
	if (!strcmp(outcome, "pass"))
		return "success";
	if (!strcmp(outcome, "reject"))
		return "failure";
	if (!strcmp(outcome, "timeout"))
		return "timed_out";
	if (!strcmp(outcome, "skipped"))
		return "skipped";
	/* Infra errors, cancellations: no verdict. "cancelled" keeps a required check from passing
	 * without blaming the PR the way "failure" would. */
	return "cancelled";
}

const char *ab_report_status_state(const char *outcome)
{
	return !strcmp(outcome, "pass") ? "success" : !strcmp(outcome, "reject") ? "failure" : "error";
}

void ab_report_title(char *buf, size_t size, const struct ab_report *rep)
{
	struct ab_post p = post_of(NULL, rep);
	ab_post_title(buf, size, &p);
}

json_t *ab_report_labels(const struct ab_report *rep)
{
	json_t *out = json_array(), *labels = json_object_get(verdict(rep), "labels");

	if (!out || !has_verdict(rep->outcome))
		return out;
	for (size_t i = 0; i < json_array_size(labels); i++) {
		const char *l = json_string_value(json_array_get(labels, i));
		/* Only names of the managed sets: a result can never make us touch a human's label. */
		if (l && l[0] && strlen(l) <= 50 && ab_verdict_label_is_managed(l))
			json_array_append_new(out, json_string(l));
	}
	if (json_array_size(out) == 0)
		json_array_append_new(out, json_string(is_infra(rep->outcome) ? "eval:infra-error" : verdict_label(rep)));
	return out;
}

int ab_report_has_verdict(const struct ab_report *rep)
{
	return has_verdict(rep->outcome);
}

int ab_report_comment_body(char **out, const struct ab_report_target *t, const struct ab_report *rep)
{
	char marker[128], *body = NULL, *text;
	struct ab_post p = post_of(t, rep);
	int n = snprintf(marker, sizeof(marker), AB_COMMENT_MARKER " head=%.64s -->\n", t->head_sha);

	if (ab_post_body(&body, &p, AB_COMMENT_MAX - (size_t)n) < 0)
		return -1;
	if (!(text = malloc((size_t)n + strlen(body) + 1))) {
		free(body);
		return ab_error_set("out of memory");
	}
	memcpy(text, marker, (size_t)n);
	strcpy(text + n, body);
	free(body);
	*out = text;
	return 0;
}

int ab_report_summary(char **out, const struct ab_report_target *t, const struct ab_report *rep)
{
	struct ab_post p = post_of(t, rep);
	return ab_post_body(out, &p, AB_SUMMARY_MAX);
}

/*
 * report.c - the text of a post (see report.h). With a result document the body is reports/'s
 * markdown (verdict, table with CIs, gates, environment, footer), which cuts itself to the size it
 * is given; without one (worker died, canceled) a short notice says what happened. A last cap at
 * GitHub's limits cuts at a line boundary, so no UTF-8 sequence or table row is split.
 */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "text.h"
#include "markdown.h"


static int has_verdict(const char *outcome)
{
	return strcmp(outcome, "canceled") && strcmp(outcome, "superseded");
}

static int is_infra(const char *outcome)
{
	return !strcmp(outcome, "infra") || !strcmp(outcome, "timeout") || !strcmp(outcome, "exhausted");
}

static json_t *verdict(const struct ab_report *rep)
{
	return rep->result ? json_object_get(rep->result, "verdict") : NULL;
}

static const char *verdict_label(const struct ab_report *rep)
{
	const char *label = json_string_value(json_object_get(verdict(rep), "label"));
	if (label)
		return label;
	if (!strcmp(rep->outcome, "canceled"))
		return "canceled";
	if (!strcmp(rep->outcome, "superseded"))
		return "superseded";
	if (!strcmp(rep->outcome, "reject"))
		return "eval:REJECT";
	return is_infra(rep->outcome) ? "eval:infra-error" : "eval:none";
}

static const char *verdict_reason(const struct ab_report *rep)
{
	const char *reason = json_string_value(json_object_get(verdict(rep), "reason"));
	if (reason)
		return reason;
	if (!strcmp(rep->outcome, "superseded"))
		return "a newer push replaced this head";
	if (!strcmp(rep->outcome, "canceled"))
		return "the pull request was closed";
	if (!strcmp(rep->outcome, "timeout"))
		return "the evaluation ran past job_timeout_s";
	if (!strcmp(rep->outcome, "exhausted"))
		return "the evaluation did not finish: its worker stopped every attempt";
	return rep->note ? rep->note : "";
}

const char *ab_report_conclusion(const char *outcome)
{
	if (!strcmp(outcome, "pass"))
		return "success";
	if (!strcmp(outcome, "reject"))
		return "failure";
	if (!strcmp(outcome, "timeout"))
		return "timed_out";
	/* Infra errors, cancellations: no verdict. "cancelled" keeps a required check from passing
	 * without blaming the PR the way "failure" would. */
	return "cancelled";
}

void ab_report_title(char *buf, size_t size, const struct ab_report *rep)
{
	const char *reason = verdict_reason(rep);
	snprintf(buf, size, "%s%s%.200s", verdict_label(rep), reason[0] ? ": " : "", reason);
}

int ab_report_label_managed(const char *l)
{
	if (!strncmp(l, "eval:", 5) || !strncmp(l, "regression-", 11) || !strcmp(l, "accuracy-regression"))
		return 1;
	return !strncmp(l, "eval-", 5) && strchr(l + 5, ':') != NULL;
}

json_t *ab_report_labels(const struct ab_report *rep)
{
	json_t *out = json_array(), *labels = json_object_get(verdict(rep), "labels");

	if (!out || !has_verdict(rep->outcome))
		return out;
	for (size_t i = 0; i < json_array_size(labels); i++) {
		const char *l = json_string_value(json_array_get(labels, i));
		/* Only names of the managed sets: a result can never make us touch a human's label. */
		if (l && l[0] && strlen(l) <= 50 && ab_report_label_managed(l))
			json_array_append_new(out, json_string(l));
	}
	if (json_array_size(out) == 0)
		json_array_append_new(out, json_string(is_infra(rep->outcome) ? "eval:infra-error" : verdict_label(rep)));
	return out;
}

/* The body shared by comment and summary. `room` is the size left for it. */
static void add_body(struct ab_text *t, const struct ab_report_target *tg, const struct ab_report *rep, size_t room)
{
	const char *reason = verdict_reason(rep);

	if (rep->note && rep->note[0])
		ab_text_printf(t, "%s\n\n", rep->note);
	if (is_infra(rep->outcome))
		ab_text_printf(t, "> This is an infrastructure problem on the evaluation host, not a verdict on the PR. "
		       "A maintainer can comment `/eval rerun` to try again.\n\n");
	if (rep->result) {
		char *md = NULL;
		struct ab_markdown_options mo = { .max_chars = room > t->len + 1000 ? room - t->len - 500 : 2000,
						  .samples = 1 };
		if (ab_markdown_render(&md, rep->result, &mo) == 0) {
			ab_text_printf(t, "%s", md);
			free(md);
			return;
		}
		/* A result reports/ cannot read: say so rather than post nothing. */
		ab_text_printf(t, "_The result document could not be rendered: %s_\n\n", ab_error_last());
	}
	ab_text_printf(t, "### abgate: `%s`%s%s\n\n", verdict_label(rep), reason[0] ? " — " : "", reason);
	ab_text_printf(t, "<sub>head `%.12s` of #%d against `%s` · abgate</sub>\n", tg->head_sha, tg->pr,
	    tg->base_ref ? tg->base_ref : "base");
}

/* Caps t at max bytes by cutting at the last newline that fits, and says so. */
static void cap_text(struct ab_text *t, size_t max)
{
	static const char note[] = "\n\n_… cut to fit GitHub's size limit; the full report is in the result JSON._\n";
	if (t->failed || t->len <= max)
		return;
	size_t keep = max - sizeof(note);
	while (keep > 0 && t->buf[keep] != '\n')
		keep--;
	t->len = keep;
	t->buf[t->len] = '\0';
	ab_text_printf(t, "%s", note);
}

static int finish(char **out, struct ab_text *t)
{
	if (t->failed || !t->buf) {
		free(t->buf);
		return ab_error_set("out of memory");
	}
	*out = t->buf;
	return 0;
}

int ab_report_comment_body(char **out, const struct ab_report_target *tg, const struct ab_report *rep)
{
	struct ab_text t = { 0 };
	ab_text_printf(&t, AB_COMMENT_MARKER " head=%s -->\n", tg->head_sha);
	add_body(&t, tg, rep, AB_COMMENT_MAX);
	cap_text(&t, AB_COMMENT_MAX);
	return finish(out, &t);
}

int ab_report_summary(char **out, const struct ab_report_target *tg, const struct ab_report *rep)
{
	struct ab_text t = { 0 };
	add_body(&t, tg, rep, AB_SUMMARY_MAX);
	cap_text(&t, AB_SUMMARY_MAX);
	return finish(out, &t);
}

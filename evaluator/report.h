/*
 * report.h - what abgate posts about one evaluation, as text: the sticky comment (hidden marker
 * with the head sha, the verdict table, a footer), the check run title and summary, the verdict
 * labels, and the conclusion for each outcome. Rendering only: reporter.c decides where it goes.
 * The table itself comes from reports/ (markdown of the abgate.result/1 document).
 */
#ifndef AB_REPORT_H
#define AB_REPORT_H

#include <stddef.h>
#include <jansson.h>

/* Hidden marker that opens the sticky comment; " head=<sha> -->" follows it. */
#define AB_COMMENT_MARKER "<!-- abgate:v1"
#define AB_COMMENT_MAX 65536     /* GitHub's limit for a comment body, in characters */
#define AB_SUMMARY_MAX 65535     /* GitHub's limit for check run output.summary */

/* Which PR and head a report is about. */
struct ab_report_target {
	const char *repo;          /* "owner/repo" */
	int pr;
	const char *head_sha;
	const char *base_ref;      /* shown in the comment */
	const char *external_id;   /* job key, stored on the check run ("abgate:<repo>#<pr>@<sha>/<round>") */
};

/* What is reported. */
struct ab_report {
	const char *outcome;       /* pass reject infra timeout exhausted canceled superseded */
	json_t *result;            /* abgate.result/1, borrowed; NULL when the evaluation produced none */
	const char *note;          /* an extra sentence for the comment and check run (may be NULL) */
	int current;               /* the head is still the PR's head: post comment and labels */
};

/* The sticky comment's body (marker first, at most AB_COMMENT_MAX characters). Caller frees. */
int ab_report_comment_body(char **out, const struct ab_report_target *t, const struct ab_report *rep);
/* The check run summary (at most AB_SUMMARY_MAX characters). Caller frees. */
int ab_report_summary(char **out, const struct ab_report_target *t, const struct ab_report *rep);
/* The labels the verdict asks for (new array; empty for canceled runs). Caller json_decref. */
json_t *ab_report_labels(const struct ab_report *rep);
/* Whether `label` belongs to the sets abgate manages (eval:*, eval-*:*, regression-*, accuracy-regression). */
int ab_report_label_managed(const char *label);
/* One line: the verdict label and reason ("eval:M: decode +7.1% at ctx 512"), into buf. */
void ab_report_title(char *buf, size_t size, const struct ab_report *rep);
/* Check run conclusion for an outcome ("success", "failure", "cancelled", "timed_out"). */
const char *ab_report_conclusion(const char *outcome);

#endif

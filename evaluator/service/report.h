/*
 * report.h - what abgate posts about one evaluation: the sticky comment (hidden marker with the
 * head sha, then the body), the check run title and summary, the verdict labels limited to the
 * sets abgate manages, and the conclusion or commit status for each outcome. The text is rendered
 * by reports/post.h from the abgate.result/1 document; reporter.c decides where it goes.
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
	const char *run_url;       /* the run's page (public_url/runs/<id>), NULL: none; details_url and a link */
};

/* The sticky comment's body (marker first, at most AB_COMMENT_MAX characters). Caller frees. */
int ab_report_comment_body(char **out, const struct ab_report_target *t, const struct ab_report *rep);
/* The check run summary (at most AB_SUMMARY_MAX characters). Caller frees. */
int ab_report_summary(char **out, const struct ab_report_target *t, const struct ab_report *rep);
/* The labels the verdict asks for (new array; empty for canceled runs). Caller json_decref. */
json_t *ab_report_labels(const struct ab_report *rep);
/* Whether the outcome is a verdict to show on the PR (not "canceled" or "superseded"). */
int ab_report_has_verdict(const struct ab_report *rep);
/*
 * One line of plain text: the verdict label and reason ("eval:M: decode +7.1% at ctx 512"), cut to
 * fit buf without splitting a UTF-8 character (a commit status description: size 141).
 */
void ab_report_title(char *buf, size_t size, const struct ab_report *rep);
/* Check run conclusion for an outcome ("success", "failure", "cancelled", "timed_out"). */
const char *ab_report_conclusion(const char *outcome);
/* Commit status state for an outcome ("success", "failure", "error"), when check runs are unavailable. */
const char *ab_report_status_state(const char *outcome);

#endif

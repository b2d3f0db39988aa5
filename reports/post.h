/*
 * post.h - the text of what abgate posts about one evaluation: the body shared by the sticky PR
 * comment and the check run summary (markdown.h's rendering of the result document, or a short
 * notice when there is none), cut to a size at a line boundary, and a one-line plain title.
 * Rendering only: the service decides what goes where, with which labels and conclusion, and owns
 * the comment's hidden marker (evaluator/service/report.h).
 */
#ifndef AB_POST_H
#define AB_POST_H

#include <stddef.h>
#include <jansson.h>

/* What one post says. Every string is borrowed; text from outside is escaped when rendered. */
struct ab_post {
	const json_t *result;    /* abgate.result/1; NULL when the evaluation produced none */
	const char *label;       /* shown when the result has no verdict label ("eval:infra-error", "canceled") */
	const char *reason;      /* shown when the result has no verdict reason; may be NULL */
	const char *note;        /* a sentence above the body; may be NULL */
	int infra;               /* say it is the evaluation host's problem, not a verdict on the PR */
	const char *head_sha;    /* the notice's footer: head, PR number and base (may be NULL) */
	int pr;
	const char *base_ref;
	const char *run_url;     /* the report page with plots (http(s) URL); NULL: no link */
};

/*
 * The body in at most `max_bytes` bytes (>= 4096): when it is longer it is cut at the last line
 * that fits and the cut is said, so no character or table row is split. *out is NUL-terminated
 * valid UTF-8; the caller frees it with free(). AB_ERROR on allocation failure.
 */
int ab_post_body(char **out, const struct ab_post *post, size_t max_bytes);

/*
 * One line of plain text: the verdict label and reason ("eval:M: decode +7.1% at ctx 512"), the
 * reason cut at 200 characters, the whole cut to fit `size` bytes without splitting a character.
 */
void ab_post_title(char *buf, size_t size, const struct ab_post *post);

#endif

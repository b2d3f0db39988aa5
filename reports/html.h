/*
 * html.h - self-contained HTML pages (inline CSS, plots as inline SVG, no script, nothing fetched):
 * the report of one evaluation rendered only from its abgate.result/1 document, the history of a
 * base branch, the calibration page, and short status pages (404). reports/ renders, it never
 * decides: every figure shown is in the document handed in. Untrusted text is escaped (text.h).
 */
#ifndef AB_HTML_H
#define AB_HTML_H

#include <stddef.h>
#include <jansson.h>

#include "text.h"

struct ab_html_options {
	const char *json_href;   /* link to the result JSON ("/runs/7.json"), NULL: none */
	const char *history_href;/* link to the base branch's history page, NULL: none */
};

/*
 * The report page of one evaluation: verdict, the metrics table with a forest plot of every
 * series' delta and 95% CI against the margin, the regression floor and the tier thresholds; per
 * series the raw samples of both sides by pair index, marked by order (AB/BA) and batch; accuracy
 * (KL per scored position, top-1 misses, where the result has them); speculative decoding (tau per
 * prompt base vs head, exactness); gates, environment, method, builds. *out is the caller's
 * (free()). AB_EINVALID when result is not an object; AB_ERROR when out of memory.
 */
int ab_html_render_run(char **out, const json_t *result, const struct ab_html_options *opts);

/*
 * The history page from a document built by the service (evaluator/service/pages.c):
 *   {repo, suite, base, evaluations: [{id, created_at, base_sha, label}],
 *    series: [{model, metric, ctx, points: [{eval, median, lo, hi, n}]}]}
 * (`eval` indexes evaluations, oldest first). One plot per series: the base side's median with its
 * interval per evaluation. *out is the caller's.
 */
int ab_html_render_history(char **out, const json_t *history);

/* The calibration page: `calibrations` is an array of {suite, created_at, ...} objects (the newest
 * per suite); an empty array says that no calibration is stored. *out is the caller's. */
int ab_html_render_calibration(char **out, const json_t *calibrations);

/* A short page for a status ("404", "Not found", "No evaluation 7 is stored."). *out is the caller's. */
int ab_html_render_message(char **out, const char *title, const char *text);

/* Page chrome shared by the renderers: doctype, head with the inline style sheet, body open;
 * and the end of the page. */
void ab_html_page_begin(struct ab_text *t, const char *title);
void ab_html_page_end(struct ab_text *t);

#endif

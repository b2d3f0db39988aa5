/*
 * markdown.h - the GitHub-flavoured markdown of an evaluation (sticky PR comment, check-run
 * summary), rendered only from an abgate.result/1 document so that stored results re-render.
 * Verdict line (icon, label, reason), one row per metric x context (base, head, delta with its 95%
 * CI, outcome, gating claim), pairs, gates, method sentence, environment, failures, a build log
 * tail when a build failed, per-sample detail (with 18+ series the neutral rows in a collapsed
 * <details> below the decisive ones), and a footer with the short shas. Everything that
 * came from outside is escaped (text.h). The output stays under max_chars: sample detail is cut
 * first, then metric rows, and the cut is said.
 */
#ifndef AB_MARKDOWN_H
#define AB_MARKDOWN_H

#include <stddef.h>
#include <jansson.h>

#define AB_MARKDOWN_MAX_CHARS 65000     /* GitHub refuses comment bodies over 65536 characters */
#define AB_MARKDOWN_FOLD_ROWS 18        /* from this many speed series, neutral rows fold into <details> */

struct ab_markdown_options {
	size_t max_chars;       /* 0: AB_MARKDOWN_MAX_CHARS; values below 2000 are raised to 2000 */
	int samples;            /* 1: per-sample table in a <details> block (cut first when too long) */
};

/*
 * Renders `result` (borrowed). *out is a NUL-terminated string the caller frees with free().
 * opts may be NULL (defaults: cap 65000, samples on). The sticky comment's hidden marker
 * is the poster's business (evaluator/service/report.h), not part of the rendering. Missing fields render as "n/a";
 * AB_EINVALID only when result is not an object, AB_ERROR on allocation failure.
 */
int ab_markdown_render(char **out, const json_t *result, const struct ab_markdown_options *opts);

#endif

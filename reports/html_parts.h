/*
 * html_parts.h - sections of the run page that live in html_parts.c (accuracy, the speculative
 * decoding table, gates / failures / environment / method / builds), for reports/html.c only.
 */
#ifndef AB_HTML_PARTS_H
#define AB_HTML_PARTS_H

#include <jansson.h>

#include "text.h"

/* doc.accuracy: per model a KL-per-position plot with top-1 misses (or a summary plot). */
void ab_html_accuracy(struct ab_text *t, const json_t *accuracy);
/* Per model x spec context: spec tok/s, tau base -> head, speedup, exactness. */
void ab_html_spec_table(struct ab_text *t, const json_t *doc);
/* Gates, failed samples, environment, method, builds (log tails), timing and the footer. */
void ab_html_details(struct ab_text *t, const json_t *doc);

#endif

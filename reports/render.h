/*
 * render.h - read-only accessors over an abgate.result/1 document shared by the markdown and
 * terminal renderers. A stored document may come from an older version or be partial: every getter
 * tolerates a missing key or a wrong type and returns NULL / NAN / a fallback instead.
 */
#ifndef AB_RENDER_H
#define AB_RENDER_H

#include <jansson.h>

/* Borrowed string at obj[key], NULL when absent or not a string. */
const char *ab_render_str(const json_t *obj, const char *key);
/* Number at obj[key] (integer or real), NAN when absent, null or not a number. */
double ab_render_num(const json_t *obj, const char *key);
/* Integer at obj[key], `fallback` when absent or not an integer. */
long long ab_render_int(const json_t *obj, const char *key, long long fallback);
/* Element i of the array at obj[key] as a number, NAN when absent. */
double ab_render_num_at(const json_t *obj, const char *key, size_t i);
/* "4k" style context name for a ctx value. */
void ab_render_ctx(char *buf, size_t size, long long ctx);
/* A commit id shortened to 7 characters if it is hex; "unknown" otherwise. */
void ab_render_short_sha(char *buf, size_t size, const char *sha);
/* A number with a sensible precision for tok/s ("512.3", "12345"), "n/a" when not finite. */
void ab_render_value(char *buf, size_t size, double v);
/* Whether a label is made only of [A-Za-z0-9._:-] (safe to print inside a code span). */
int ab_render_label_safe(const char *label);

/* The metric named `name` of (model, ctx) in a result's "metrics" array; NULL when absent. Borrowed. */
const json_t *ab_render_metric_find(const json_t *metrics, const char *name, const char *model, long long ctx);

#endif

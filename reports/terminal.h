/*
 * terminal.h - the plain-text table `abgate eval` prints: verdict line, one aligned row per
 * metric x context (base, head, delta with its 95% CI, pairs, outcome, gating claim), gates,
 * failures, the method sentence and the shas. Rendered from an abgate.result/1 document like the
 * markdown. ANSI colours only when asked (the caller passes isatty()); control characters from
 * outside never reach the terminal.
 */
#ifndef AB_TERMINAL_H
#define AB_TERMINAL_H

#include <jansson.h>

/* Renders `result` (borrowed). *out is NUL-terminated; the caller frees it with free().
 * AB_EINVALID when result is not an object, AB_ERROR on allocation failure. */
int ab_terminal_render(char **out, const json_t *result, int color);

#endif

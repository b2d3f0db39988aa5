/*
 * suite_json.h - the suite as JSON again (internal to the suite module): argv arrays for the build
 * cache key, and the whole effective suite that ab_suite_to_json (suite.h) returns.
 */
#ifndef AB_SUITE_JSON_H
#define AB_SUITE_JSON_H

#include <jansson.h>

#include "suite.h"

/* A command as a JSON array of strings, or null when absent (argc 0). New reference; NULL on OOM. */
json_t *ab_suite_argv_json(const struct ab_suite_argv *a);

#endif

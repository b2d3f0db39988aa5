/*
 * suite_values.h - typed readers for the suite file's own values (internal to the suite module:
 * suite.c and its section parsers). Each reads at the jread path of the caller, pushes the key it
 * reads, and fails with AB_EINVALID and a message naming that key; allocation failure sets p->oom.
 */
#ifndef AB_SUITE_VALUES_H
#define AB_SUITE_VALUES_H

#include <jansson.h>

#include "jread.h"
#include "suite.h"

/* A string value at the current path: non-empty, at most 4096 bytes, no NUL, and every lower-case
 * {placeholder} one of {src} {build} {jobs} {state} {model} {draft}. */
int ab_suite_check_string(struct ab_jread *p, const json_t *v);

/* obj[key] as a new string (caller frees); *out = NULL when absent and !required. */
int ab_suite_get_string(char **out, struct ab_jread *p, const json_t *obj, const char *key, int required);

/* [A-Za-z0-9._-]{1,63} */
int ab_suite_valid_name(const char *s);

/* obj[key], required, as a name (see ab_suite_valid_name) copied into out. */
int ab_suite_get_name(char out[AB_SUITE_NAME_MAX], struct ab_jread *p, const json_t *obj, const char *key);

/* obj[key] as a command: a non-empty array of at most 256 checked strings. out owns what it gets
 * even on failure (the suite's free releases it); untouched when absent and !required. */
int ab_suite_get_argv(struct ab_suite_argv *out, struct ab_jread *p, const json_t *obj, const char *key,
	int required);

/* obj["contexts"]: up to 64 distinct integers in [1, 2^24]; *out (caller frees) stays NULL when absent. */
int ab_suite_get_contexts(int **out, int *out_count, struct ab_jread *p, const json_t *obj);

/* obj["sha256"]: 64 hex digits (or null), stored lower-case into out; out untouched when absent. */
int ab_suite_get_sha256(char out[65], struct ab_jread *p, const json_t *obj);

#endif

/*
 * suite_sut.h - the HTTP keys of a suite's SUT objects (kind "openai": url, ready_path, api,
 * model_name, vocab_size) and the {port} placeholder rules, internal to the suite module. Parsed
 * strictly at the caller's jread path; errors name the key.
 */
#ifndef AB_SUITE_SUT_H
#define AB_SUITE_SUT_H

#include <jansson.h>

#include "jread.h"
#include "suite.h"

/* Reads kind and, for "openai", the HTTP keys of the SUT object v into *sut (strings owned by
 * *sut, freed with the suite). HTTP keys with kind "stdio", and {port} in a stdio SUT's command or
 * env, are refused naming the key. */
int ab_suite_parse_sut_http(struct ab_suite_sut *sut, struct ab_jread *p, const json_t *v);

/* {port} is only meaningful in SUT objects: refused in build commands and model paths/generators. */
int ab_suite_check_port_placeholders(const struct ab_suite *suite, struct ab_jread *p);

/* The HTTP keys of an openai SUT added to its JSON dump (no-op for stdio). 0, or -1 on OOM. */
int ab_suite_sut_http_json(json_t *obj, const struct ab_suite_sut *sut);

/* "stdio"/"openai", "completions"/"llama". Static strings. */
const char *ab_suite_sut_kind_name(enum ab_suite_sut_kind kind);
const char *ab_suite_sut_api_name(enum ab_suite_sut_api api);

#endif

/*
 * suite_values.c - the suite file's own value types, read at the jread path of the caller: bounded
 * strings whose {placeholders} must be known ones, names, commands (argv arrays), context lists and
 * sha256 digests. Shared by the section parsers of suite.c; every error names the key.
 */
#include "suite_values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define STRING_MAX 4096      /* longest string value accepted */
#define ARGV_MAX 256         /* most arguments in one command */
#define CONTEXTS_MAX 64
#define CONTEXT_LIMIT (1 << 24)

static const char *const known_placeholders[] = { "src", "build", "jobs", "state", "model", "draft", "port" };

/* --- suite values: strings, names, commands, contexts ---------------------------------------- */

/* Checks a string value at the current path: non-empty, bounded, no NUL, known placeholders. */
int ab_suite_check_string(struct ab_jread *p, const json_t *v)
{
	const char *s, *c;
	size_t len;

	if (!json_is_string(v))
		return ab_jread_fail_type(p, "a string", v);
	s = json_string_value(v);
	len = json_string_length(v);
	if (len == 0)
		return ab_jread_fail(p, "expected a non-empty string");
	if (len > STRING_MAX)
		return ab_jread_fail(p, "string longer than %d bytes", STRING_MAX);
	if (strlen(s) != len)
		return ab_jread_fail(p, "string contains a NUL character");
	/* {name} in lower case is a placeholder; ${NAME} and anything else with braces is left alone. */
	for (c = strchr(s, '{'); c; c = strchr(c + 1, '{')) {
		size_t n = strspn(c + 1, "abcdefghijklmnopqrstuvwxyz_"), i;
		if (n == 0 || c[1 + n] != '}' || (c > s && c[-1] == '$'))
			continue;
		for (i = 0; i < sizeof(known_placeholders) / sizeof(*known_placeholders); i++)
			if (strlen(known_placeholders[i]) == n && strncmp(known_placeholders[i], c + 1, n) == 0)
				break;
		if (i == sizeof(known_placeholders) / sizeof(*known_placeholders))
			return ab_jread_fail(p, "unknown placeholder {%.*s} (known: {src} {build} {jobs} {state} {model} {draft} {port})",
				    (int)n, c + 1);
	}
	return 0;
}

int ab_suite_get_string(char **out, struct ab_jread *p, const json_t *obj, const char *key, int required)
{
	json_t *v = ab_jread_optional(obj, key);
	size_t old;
	char *copy;

	if (!v && !required) {
		*out = NULL;
		return 0;
	}
	if (ab_jread_required(&v, p, obj, key) < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, key);
	if (ab_suite_check_string(p, v) < 0)
		return AB_EINVALID;
	ab_jread_pop(p, old);
	if (!(copy = strdup(json_string_value(v))))
		return ab_jread_oom(p);
	*out = copy;
	return 0;
}

int ab_suite_valid_name(const char *s)
{
	size_t len = strlen(s);
	return len >= 1 && len < AB_SUITE_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

int ab_suite_get_name(char out[AB_SUITE_NAME_MAX], struct ab_jread *p, const json_t *obj, const char *key)
{
	json_t *v = NULL;
	size_t old;

	if (ab_jread_required(&v, p, obj, key) < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, key);
	if (!json_is_string(v) || !ab_suite_valid_name(json_string_value(v)) || strlen(json_string_value(v)) != json_string_length(v))
		return ab_jread_fail_type(p, "a name of 1-63 characters from [A-Za-z0-9._-]", v);
	ab_jread_pop(p, old);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int ab_suite_get_argv(struct ab_suite_argv *out, struct ab_jread *p, const json_t *obj, const char *key,
	int required)
{
	json_t *v = ab_jread_optional(obj, key), *item;
	size_t old, i, n;

	if (!v && !required)
		return 0;
	if (ab_jread_required(&v, p, obj, key) < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, key);
	n = json_array_size(v);
	if (!json_is_array(v) || n == 0)
		return ab_jread_fail_type(p, "a non-empty array of strings (a command and its arguments)", v);
	if (n > ARGV_MAX)
		return ab_jread_fail(p, "more than %d arguments", ARGV_MAX);
	if (!(out->argv = calloc(n + 1, sizeof(char *))))
		return ab_jread_oom(p);
	json_array_foreach(v, i, item) {
		size_t old_index = ab_jread_push_index(p, i);
		if (ab_suite_check_string(p, item) < 0)
			return AB_EINVALID;
		if (!(out->argv[i] = strdup(json_string_value(item))))
			return ab_jread_oom(p);
		out->argc = (int)i + 1;
		ab_jread_pop(p, old_index);
	}
	ab_jread_pop(p, old);
	return 0;
}

int ab_suite_get_contexts(int **out, int *out_count, struct ab_jread *p, const json_t *obj)
{
	json_t *v = ab_jread_optional(obj, "contexts"), *item;
	size_t old, old_list, i, j, n;

	if (!v)
		return 0;
	old = ab_jread_push_key(p, "contexts");
	old_list = p->path_len;
	n = json_array_size(v);
	if (!json_is_array(v))
		return ab_jread_fail_type(p, "an array of positive integers", v);
	if (n > CONTEXTS_MAX)
		return ab_jread_fail(p, "more than %d contexts", CONTEXTS_MAX);
	if (n && !(*out = calloc(n, sizeof(int))))
		return ab_jread_oom(p);
	json_array_foreach(v, i, item) {
		json_int_t x = json_is_integer(item) ? json_integer_value(item) : 0;
		ab_jread_push_index(p, i);
		if (!json_is_integer(item) || x < 1 || x > CONTEXT_LIMIT)
			return ab_jread_fail_type(p, "a positive integer (at most 16777216)", item);
		for (j = 0; j < i; j++)
			if ((*out)[j] == (int)x)
				return ab_jread_fail(p, "context %d is listed twice", (int)x);
		(*out)[i] = (int)x;
		*out_count = (int)i + 1;
		ab_jread_pop(p, old_list);
	}
	ab_jread_pop(p, old);
	return 0;
}

/* An optional "sha256" of obj: 64 hex digits (or null), stored lower-case; "" when absent. */
int ab_suite_get_sha256(char out[65], struct ab_jread *p, const json_t *obj)
{
	json_t *sha = ab_jread_optional(obj, "sha256");
	if (!sha)
		return 0;
	size_t old = ab_jread_push_key(p, "sha256"), i;
	const char *s = json_string_value(sha);
	if (!json_is_string(sha) || json_string_length(sha) != 64 || strspn(s, "0123456789abcdefABCDEF") != 64)
		return ab_jread_fail_type(p, "64 hexadecimal digits or null", sha);
	for (i = 0; i < 64; i++)
		out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
	out[64] = '\0';
	ab_jread_pop(p, old);
	return 0;
}

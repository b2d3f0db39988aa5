/*
 * jread.c - strict JSON reading with path-named errors (see jread.h). The path is a fixed buffer
 * that pushes append to and pops truncate, so a getter that fails leaves it pointing at the bad
 * value for the message; a getter that succeeds restores it.
 */
#include "jread.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

__attribute__((format(printf, 2, 3)))
static size_t push(struct ab_jread *r, const char *fmt, ...)
{
	size_t old = r->path_len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(r->path + old, sizeof(r->path) - old, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->path_len = old + (size_t)n < sizeof(r->path) ? old + (size_t)n : sizeof(r->path) - 1;
	return old;
}

size_t ab_jread_push_key(struct ab_jread *r, const char *key)
{
	return push(r, "%s%s", r->path_len ? "." : "", key);
}

size_t ab_jread_push_index(struct ab_jread *r, size_t index)
{
	return push(r, "[%zu]", index);
}

void ab_jread_pop(struct ab_jread *r, size_t old_len)
{
	r->path_len = old_len;
	r->path[old_len] = '\0';
}

int ab_jread_fail(struct ab_jread *r, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ab_error_setc(AB_EINVALID, "%s%s%s: %s%s%s", r->what, r->origin ? " " : "",
			     r->origin ? r->origin : "", r->path, r->path_len ? ": " : "", msg);
}

/* A short, printable description of a JSON value for "got ..." (buf holds it when needed). */
static const char *describe(const json_t *v, char *buf, size_t size)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return json_array_size(v) ? "an array" : "an empty array";
	case JSON_TRUE: return "true";
	case JSON_FALSE: return "false";
	case JSON_NULL: return "null";
	case JSON_INTEGER: snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return buf;
	case JSON_REAL: snprintf(buf, size, "%g", json_real_value(v)); return buf;
	case JSON_STRING: {
		size_t i, len = json_string_length(v);
		snprintf(buf, size, "\"%.32s%s\"", json_string_value(v), len > 32 ? "..." : "");
		for (i = 1; buf[i]; i++)   /* keep messages on one printable line */
			if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
				buf[i] = '?';
		return buf;
	}
	}
	return "?";
}

int ab_jread_fail_type(struct ab_jread *r, const char *expected, const json_t *got)
{
	char buf[48];
	return ab_jread_fail(r, "expected %s, got %s", expected, describe(got, buf, sizeof(buf)));
}

int ab_jread_oom(struct ab_jread *r)
{
	r->oom = 1;
	return ab_error_set("%s: out of memory", r->what);
}

int ab_jread_object(struct ab_jread *r, const json_t *v)
{
	return json_is_object(v) ? 0 : ab_jread_fail_type(r, "an object", v);
}

int ab_jread_keys(struct ab_jread *r, const json_t *obj, const char *const *allowed)
{
	const char *key;
	json_t *value;

	json_object_foreach((json_t *)obj, key, value) {
		const char *const *a;
		for (a = allowed; *a && strcmp(*a, key) != 0; a++)
			;
		if (!*a) {
			char list[512] = "";
			size_t used = 0;
			for (a = allowed; *a && used < sizeof(list); a++)
				used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", a == allowed ? "" : ", ", *a);
			ab_jread_push_key(r, key);
			return ab_jread_fail(r, "unknown key (expected one of: %s)", list);
		}
	}
	return 0;
}

json_t *ab_jread_optional(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

int ab_jread_required(json_t **out, struct ab_jread *r, const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		size_t old = ab_jread_push_key(r, key);
		int error = ab_jread_fail(r, "required key is missing");
		ab_jread_pop(r, old);
		return error;
	}
	*out = v;
	return 0;
}

int ab_jread_int(int *out, struct ab_jread *r, const json_t *obj, const char *key, int def, int lo, int hi)
{
	json_t *v = ab_jread_optional(obj, key);
	size_t old;
	json_int_t x;

	if (!v) {
		*out = def;
		return 0;
	}
	old = ab_jread_push_key(r, key);
	x = json_is_integer(v) ? json_integer_value(v) : 0;
	if (!json_is_integer(v) || x < lo || x > hi) {
		char expected[96];
		if (lo == 1 && hi == INT_MAX)
			snprintf(expected, sizeof(expected), "a positive integer");
		else
			snprintf(expected, sizeof(expected), "an integer in [%d, %d]", lo, hi);
		return ab_jread_fail_type(r, expected, v);
	}
	ab_jread_pop(r, old);
	*out = (int)x;
	return 0;
}

int ab_jread_number(double *out, struct ab_jread *r, const json_t *obj, const char *key, double def,
	double lo, double hi, const char *bounds)
{
	json_t *v = ab_jread_optional(obj, key);
	size_t old;
	double x;
	int ok;

	if (!v) {
		*out = def;
		return 0;
	}
	old = ab_jread_push_key(r, key);
	x = json_number_value(v);
	ok = json_is_number(v) && (bounds[0] == '[' ? x >= lo : x > lo) && (bounds[1] == ']' ? x <= hi : x < hi);
	if (!ok) {
		char expected[96];
		if (hi == INFINITY)
			snprintf(expected, sizeof(expected), "a number %s %g", bounds[0] == '[' ? ">=" : ">", lo);
		else
			snprintf(expected, sizeof(expected), "a number in %c%g, %g%c", bounds[0], lo, hi, bounds[1]);
		return ab_jread_fail_type(r, expected, v);
	}
	ab_jread_pop(r, old);
	*out = x;
	return 0;
}

int ab_jread_bool(int *out, struct ab_jread *r, const json_t *obj, const char *key, int def)
{
	json_t *v = ab_jread_optional(obj, key);
	size_t old;

	if (!v) {
		*out = def;
		return 0;
	}
	old = ab_jread_push_key(r, key);
	if (!json_is_boolean(v))
		return ab_jread_fail_type(r, "true or false", v);
	ab_jread_pop(r, old);
	*out = json_is_true(v);
	return 0;
}

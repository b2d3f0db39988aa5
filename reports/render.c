/*
 * render.c - tolerant accessors over result documents for the renderers (see render.h).
 */
#include "render.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *ab_render_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

double ab_render_num(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

long long ab_render_int(const json_t *obj, const char *key, long long fallback)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : fallback;
}

double ab_render_num_at(const json_t *obj, const char *key, size_t i)
{
	const json_t *v = json_array_get(json_object_get(obj, key), i);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

void ab_render_ctx(char *buf, size_t size, long long ctx)
{
	if (ctx > 0 && ctx % 1024 == 0)
		snprintf(buf, size, "%lldk", ctx / 1024);
	else
		snprintf(buf, size, "%lld", ctx);
}

void ab_render_short_sha(char *buf, size_t size, const char *sha)
{
	size_t n = sha ? strlen(sha) : 0;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)sha[i]))
			n = 0;
	if (n == 0)
		snprintf(buf, size, "unknown");
	else
		snprintf(buf, size, "%.7s", sha);
}

void ab_render_value(char *buf, size_t size, double v)
{
	if (!isfinite(v))
		snprintf(buf, size, "n/a");
	else if (fabs(v) >= 10000)
		snprintf(buf, size, "%.0f", v);
	else if (fabs(v) >= 100)
		snprintf(buf, size, "%.1f", v);
	else
		snprintf(buf, size, "%.3g", v);
}

int ab_render_label_safe(const char *label)
{
	if (label == NULL || *label == '\0')
		return 0;
	for (const char *p = label; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("._:-", *p)))
			return 0;
	return 1;
}

const json_t *ab_render_metric_find(const json_t *metrics, const char *name, const char *model, long long ctx)
{
	size_t i;
	const json_t *m;
	json_array_foreach(metrics, i, m) {
		const char *n = ab_render_str(m, "name"), *mm = ab_render_str(m, "model");
		if (n && mm && model && strcmp(n, name) == 0 && strcmp(mm, model) == 0 &&
		    ab_render_int(m, "ctx", -1) == ctx)
			return m;
	}
	return NULL;
}

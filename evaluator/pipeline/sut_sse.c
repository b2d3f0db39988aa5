/*
 * sut_sse.c - bounded Server-Sent Events line reader (see sut_sse.h). Lines end in "\n" (a "\r"
 * before it is dropped); the line buffer grows up to line_max and no further.
 */
#include "sut_sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ab_sse_init(struct ab_sse *s, size_t line_max)
{
	memset(s, 0, sizeof(*s));
	s->line_max = line_max ? line_max : 65536;
}

void ab_sse_clear(struct ab_sse *s)
{
	free(s->line);
	s->line = NULL;
	s->len = s->cap = 0;
}

size_t ab_sse_pending(const struct ab_sse *s)
{
	return s->len;
}

static int fail(struct ab_sse *s, const char *why)
{
	snprintf(s->error, sizeof(s->error), "malformed SSE: %s", why);
	return -1;
}

static int line_done(struct ab_sse *s, ab_sse_data_fn fn, void *user)
{
	char *l = s->line;
	size_t n = s->len;
	if (n && l[n - 1] == '\r')
		n--;
	l[n] = '\0';
	s->len = 0;
	if (n == 0 || l[0] == ':')
		return 0;   /* end of an event, or a comment */
	if (strncmp(l, "data:", 5) == 0) {
		size_t skip = n > 5 && l[5] == ' ' ? 6 : 5;
		return fn(user, l + skip, n - skip);
	}
	if (strncmp(l, "event:", 6) == 0 || strncmp(l, "id:", 3) == 0 || strncmp(l, "retry:", 6) == 0)
		return 0;
	char why[96];
	snprintf(why, sizeof(why), "line is not a field (\"%.40s\")", l);
	for (char *c = why; *c; c++)
		if (*c < ' ' || *c > '~')
			*c = '?';
	return fail(s, why);
}

int ab_sse_feed(struct ab_sse *s, const char *data, size_t n, ab_sse_data_fn fn, void *user)
{
	if (s->error[0])
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (c == '\0')
			return fail(s, "NUL byte in the stream");
		if (c == '\n') {
			if (s->len + 1 > s->cap) {   /* room for the terminator */
				char *g = realloc(s->line, s->len + 1);
				if (!g)
					return fail(s, "out of memory");
				s->line = g;
				s->cap = s->len + 1;
			}
			int rc = line_done(s, fn, user);
			if (rc < 0)
				return rc;
			continue;
		}
		if (s->len + 2 > s->line_max)
			return fail(s, "line longer than the cap");
		if (s->len + 2 > s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 1024;
			if (cap > s->line_max)
				cap = s->line_max;
			char *g = realloc(s->line, cap);
			if (!g)
				return fail(s, "out of memory");
			s->line = g;
			s->cap = cap;
		}
		s->line[s->len++] = c;
	}
	return 0;
}

/*
 * text.c - growable text and escaping for the renderers (see text.h). Untrusted strings are
 * decoded as UTF-8 one code point at a time, so a cut never splits a character and invalid bytes
 * cannot reach the output.
 */
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct ab_text *t, size_t more)
{
	if (t->failed)
		return -1;
	if (t->len + more + 1 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap : 256;
	while (cap < t->len + more + 1)
		cap *= 2;
	char *buf = realloc(t->buf, cap);
	if (buf == NULL) {
		t->failed = 1;
		return -1;
	}
	t->buf = buf;
	t->cap = cap;
	return 0;
}

void ab_text_append(struct ab_text *t, const char *s, size_t n)
{
	if (reserve(t, n) != 0)
		return;
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

void ab_text_puts(struct ab_text *t, const char *s)
{
	ab_text_append(t, s, strlen(s));
}

void ab_text_printf(struct ab_text *t, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->failed = 1;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		ab_text_append(t, small, (size_t)n);
		return;
	}
	if (reserve(t, (size_t)n) != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

void ab_text_truncate(struct ab_text *t, size_t len)
{
	if (t->buf && len < t->len) {
		t->len = len;
		t->buf[len] = '\0';
	}
}

char *ab_text_take(struct ab_text *t)
{
	char *out = NULL;
	if (!t->failed && reserve(t, 0) == 0) {
		out = t->buf;
		t->buf = NULL;
	}
	int failed = t->failed;
	ab_text_free(t);
	t->failed = failed;
	return out;
}

void ab_text_free(struct ab_text *t)
{
	free(t->buf);
	t->buf = NULL;
	t->len = t->cap = 0;
	t->failed = 0;
}

/* Decodes one UTF-8 code point at s; returns its byte length (>= 1) and *cp (U+FFFD if invalid). */
static size_t utf8_next(const unsigned char *s, unsigned *cp)
{
	unsigned c = s[0];
	size_t n;
	unsigned min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		n = 2, min = 0x80, c &= 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3, min = 0x800, c &= 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4, min = 0x10000, c &= 0x07;
	} else {
		*cp = 0xfffd;
		return 1;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			*cp = 0xfffd;
			return 1;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		c = 0xfffd;
	*cp = c;
	return n;
}

size_t ab_text_width(const char *s)
{
	size_t width = 0;
	unsigned cp;
	for (const unsigned char *p = (const unsigned char *)s; *p; p += utf8_next(p, &cp))
		width++;
	return width;
}

static void append_cp(struct ab_text *t, unsigned cp)
{
	char b[4];
	if (cp < 0x80) {
		b[0] = (char)cp;
		ab_text_append(t, b, 1);
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		ab_text_append(t, b, 2);
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		ab_text_append(t, b, 3);
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		ab_text_append(t, b, 4);
	}
}

/* One code point of untrusted text for markdown (see ab_text_md). */
static void md_cp(struct ab_text *t, unsigned cp)
{
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
		ab_text_puts(t, " ");
	else if (cp == '<')
		ab_text_puts(t, "&lt;");
	else if (cp == '>')
		ab_text_puts(t, "&gt;");
	else if (cp == '&')
		ab_text_puts(t, "&amp;");
	else if (cp == '|')
		ab_text_puts(t, "\\|");
	else if (cp == '@')
		ab_text_puts(t, "@&#8203;");
	else if (cp < 0x80 && strchr("\\`*_[]#!~$", (int)cp))
		ab_text_printf(t, "\\%c", (char)cp);
	else
		append_cp(t, cp);
}

/* One code point of untrusted text for HTML (see ab_text_html). */
static void html_cp(struct ab_text *t, unsigned cp)
{
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
		ab_text_puts(t, " ");
	else if (cp == '<')
		ab_text_puts(t, "&lt;");
	else if (cp == '>')
		ab_text_puts(t, "&gt;");
	else if (cp == '&')
		ab_text_puts(t, "&amp;");
	else if (cp == '"')
		ab_text_puts(t, "&quot;");
	else if (cp == '\'')
		ab_text_puts(t, "&#39;");
	else
		append_cp(t, cp);
}

/* One code point of untrusted text for a terminal: no escape sequences reach it. */
static void plain_cp(struct ab_text *t, unsigned cp)
{
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
		ab_text_puts(t, "?");
	else
		append_cp(t, cp);
}

/* Appends at most max_chars code points of s, each through `emit`, then `cut` if s was longer. */
static void append_untrusted(struct ab_text *t, const char *s, size_t max_chars, const char *cut,
	void (*emit)(struct ab_text *, unsigned))
{
	if (s == NULL) {
		ab_text_puts(t, "n/a");
		return;
	}
	size_t chars = 0;
	unsigned cp;
	for (const unsigned char *p = (const unsigned char *)s; *p; chars++) {
		if (chars >= max_chars) {
			ab_text_puts(t, cut);
			return;
		}
		p += utf8_next(p, &cp);
		emit(t, cp);
	}
}

void ab_text_md(struct ab_text *t, const char *s, size_t max_chars)
{
	append_untrusted(t, s, max_chars, "\xe2\x80\xa6", md_cp);       /* ellipsis */
}

void ab_text_html(struct ab_text *t, const char *s, size_t max_chars)
{
	append_untrusted(t, s, max_chars, "\xe2\x80\xa6", html_cp);     /* ellipsis */
}

void ab_text_plain(struct ab_text *t, const char *s, size_t max_chars)
{
	append_untrusted(t, s, max_chars, "...", plain_cp);
}

void ab_text_pct(char *buf, size_t size, double ratio)
{
	if (!isfinite(ratio))
		snprintf(buf, size, "n/a");
	else
		snprintf(buf, size, "%+.1f%%", (ratio - 1.0) * 100.0);
}

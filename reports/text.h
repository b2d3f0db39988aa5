/*
 * text.h - what the renderers share: a growable text buffer that remembers allocation failure
 * (checked once at the end), escaping of untrusted strings for GitHub markdown table cells and HTML, and
 * number formatting that never prints a bare percentage (ratio -> "+5.4%").
 */
#ifndef AB_TEXT_H
#define AB_TEXT_H

#include <stdarg.h>
#include <stddef.h>

struct ab_text {
	char *buf;      /* NUL-terminated; NULL until the first append */
	size_t len;
	size_t cap;
	int failed;     /* an allocation failed: the content is incomplete */
};

/* Appends formatted text. On allocation failure sets t->failed and keeps what it has. */
void ab_text_printf(struct ab_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ab_text_append(struct ab_text *t, const char *s, size_t n);
void ab_text_puts(struct ab_text *t, const char *s);
/* Cuts the text back to `len` bytes (len <= t->len). */
void ab_text_truncate(struct ab_text *t, size_t len);
/* Hands the buffer over (caller frees with free()); NULL with t->failed set on failure. The text
 * is reset. */
char *ab_text_take(struct ab_text *t);
void ab_text_free(struct ab_text *t);

/*
 * Appends `s` (untrusted: ref names, reasons, model names) escaped for a markdown table cell or
 * inline text: control characters and newlines become spaces, markdown punctuation is
 * backslash-escaped, '|' cannot end a cell, '<' '>' '&' become entities (no HTML injection), '@'
 * is followed by a zero-width space entity (no mentions), and at most `max_chars` characters are
 * kept (an ellipsis marks the cut). Invalid UTF-8 bytes become U+FFFD. NULL appends "n/a".
 */
void ab_text_md(struct ab_text *t, const char *s, size_t max_chars);

/*
 * Appends `s` (untrusted) escaped for HTML text or a quoted attribute value: '&' '<' '>' '"' '\''
 * become entities, control characters and newlines become spaces, invalid UTF-8 becomes U+FFFD,
 * at most `max_chars` characters (an ellipsis marks the cut). NULL appends "n/a".
 */
void ab_text_html(struct ab_text *t, const char *s, size_t max_chars);

/* Appends `s` for a plain-text terminal: control characters become '?', at most max_chars. */
void ab_text_plain(struct ab_text *t, const char *s, size_t max_chars);

/* Display width of UTF-8 text in terminal cells (one per code point; good enough for tables). */
size_t ab_text_width(const char *s);

/* "+5.4%" for a ratio of 1.054; "n/a" for a non-finite ratio. */
void ab_text_pct(char *buf, size_t size, double ratio);

#endif

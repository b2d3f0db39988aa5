/*
 * sut_sse.h - a bounded Server-Sent Events reader for the HTTP SUT: bytes in, one callback per
 * `data:` line out. Comment lines and the event/id/retry fields are skipped; any other line, a
 * line over the cap or a NUL byte is malformed. Memory is bounded by the line cap.
 */
#ifndef AB_SUT_SSE_H
#define AB_SUT_SSE_H

#include <stddef.h>

struct ab_sse {
	char *line;          /* the line being assembled; owned */
	size_t len, cap;
	size_t line_max;     /* longest line accepted */
	char error[160];     /* why the stream is malformed, "" while it is not */
};

/* payload is the data line's value (one leading space removed), NUL-terminated, borrowed; the
 * callback returns 0 to go on, negative to stop (its own reason). */
typedef int (*ab_sse_data_fn)(void *user, const char *payload, size_t len);

void ab_sse_init(struct ab_sse *s, size_t line_max);
void ab_sse_clear(struct ab_sse *s);

/* Feeds n bytes. Returns 0, -1 when the stream is malformed (s->error says why), or the callback's
 * negative value. */
int ab_sse_feed(struct ab_sse *s, const char *data, size_t n, ab_sse_data_fn fn, void *user);

/* Bytes of a last line left without its newline: 0 at a clean end of stream. */
size_t ab_sse_pending(const struct ab_sse *s);

#endif

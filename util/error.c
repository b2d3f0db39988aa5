/*
 * error.c - thread-local last-error message for the abgate libraries (see error.h).
 */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define AB_ERROR_MAX 2048

static _Thread_local char last_error[AB_ERROR_MAX];

int ab_error_vset(int code, const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	return code;
}

int ab_error_set(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ab_error_vset(AB_ERROR, fmt, ap);
	va_end(ap);
	return AB_ERROR;
}

int ab_error_setc(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ab_error_vset(code, fmt, ap);
	va_end(ap);
	return code;
}

int ab_error_wrap(int code, const char *fmt, ...)
{
	char prefix[512], old[AB_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last_error, sizeof(old));
	if (old[0]) {
		/* "prefix: old", the old message cut where the buffer ends */
		const int n = snprintf(last_error, sizeof(last_error), "%s: ", prefix);
		if (n > 0 && (size_t)n < sizeof(last_error))
			snprintf(last_error + n, sizeof(last_error) - (size_t)n, "%s", old);
	} else {
		snprintf(last_error, sizeof(last_error), "%s", prefix);
	}
	return code;
}

int ab_error_errno(const char *fmt, ...)
{
	int saved = errno;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(last_error, sizeof(last_error), "%s: %s", msg, strerror(saved));
	return AB_ERROR;
}

const char *ab_error_last(void)
{
	return last_error;
}

void ab_error_clear(void)
{
	last_error[0] = '\0';
}

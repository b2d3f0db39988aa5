/*
 * error.c - thread-local last-error message for ember (see error.h).
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[2048];

int ember_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return code;
}

int ember_error_wrap(int code, const char *fmt, ...)
{
	char prefix[512], old[sizeof(last_error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last_error, sizeof(old));
	snprintf(last_error, sizeof(last_error), old[0] ? "%s: %s" : "%s%s", prefix, old);
	return code;
}

const char *ember_error_last(void) { return last_error; }
void ember_error_clear(void) { last_error[0] = '\0'; }

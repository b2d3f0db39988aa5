/*
 * error.h - abgate's error convention: functions return int (0 ok, negative failure) and leave
 * a human-readable message in a thread-local "last error", as libgit2 does. Library boundaries
 * (libgit2, libcurl, SQLite, jansson) translate their codes into ours and keep their messages.
 */
#ifndef AB_ERROR_H
#define AB_ERROR_H

#include <stdarg.h>

/* The few codes a caller is expected to act on; everything else is AB_ERROR (-1). */
enum {
	AB_OK = 0,
	AB_ERROR = -1,      /* generic failure; read ab_error_last() */
	AB_ENOTFOUND = -2,  /* a named thing (ref, row, file, key) does not exist */
	AB_ETIMEOUT = -3,   /* a deadline passed */
	AB_EINVALID = -4,   /* input failed validation (config, protocol line, payload) */
	AB_ECANCELED = -5,  /* the work was cancelled by its owner */
	AB_ERATELIMIT = -6  /* a remote service asked us to wait */
};

/* Sets the calling thread's last error (printf-style). Returns AB_ERROR for `return ab_error_set(..)`. */
int ab_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same with an explicit code, returned unchanged. */
int ab_error_setc(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ab_error_vset(int code, const char *fmt, va_list ap);
/* Prepends "what: " to the current message (adds context while unwinding). Returns `code`. */
int ab_error_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the last error from errno: "<msg>: <strerror(errno)>". Returns AB_ERROR. */
int ab_error_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Borrowed: the calling thread's last message ("" when none); valid until the next ab_error_* call. */
const char *ab_error_last(void);
void ab_error_clear(void);

#endif

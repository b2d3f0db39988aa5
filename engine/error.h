/*
 * error.h - ember's error convention (the engine links nothing from abgate): functions return
 * int, 0 on success and negative on failure, with the message in a thread-local last error.
 */
#ifndef EMBER_ERROR_H
#define EMBER_ERROR_H

enum {
	EMBER_OK = 0,
	EMBER_ERROR = -1,    /* generic failure; read ember_error_last() */
	EMBER_EFORMAT = -2,  /* a file or request is malformed */
	EMBER_ENOMEM = -3,   /* host or device memory exhausted (message gives the sizes) */
	EMBER_EUNSUPPORTED = -4 /* valid, but not something this build can do (type, arch, backend) */
};

/* Sets the calling thread's last error (printf-style) and returns `code`. */
int ember_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "context: " to the current message and returns `code`. */
int ember_error_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Borrowed: the calling thread's last message ("" when none), valid until the next ember_error_* call. */
const char *ember_error_last(void);
void ember_error_clear(void);

#endif

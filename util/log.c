/*
 * log.c - the levelled log sink behind AB_LOG (see log.h). Lines are formatted into a bounded
 * buffer and written with one call so concurrent threads do not interleave within a line.
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static enum ab_log_level log_level = AB_LOG_INFO;
static ab_log_fn log_sink;
static void *log_payload;
static int log_timestamps;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void ab_log_set_level(enum ab_log_level level) { log_level = level; }
enum ab_log_level ab_log_get_level(void) { return log_level; }
void ab_log_set_timestamps(int on) { log_timestamps = on; }

void ab_log_set_sink(ab_log_fn fn, void *payload)
{
	pthread_mutex_lock(&log_lock);
	log_sink = fn;
	log_payload = payload;
	pthread_mutex_unlock(&log_lock);
}

void ab_log_write(enum ab_log_level level, const char *fmt, ...)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	char line[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	if (log_sink) {
		log_sink(level, line, log_payload);
	} else if (log_timestamps) {
		char stamp[32];
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(stderr, "%s %-5s %s\n", stamp, names[level], line);
	} else if (level <= AB_LOG_WARN) {
		fprintf(stderr, "abgate: %s: %s\n", names[level], line);
	} else {
		fprintf(stderr, "abgate: %s\n", line);
	}
	pthread_mutex_unlock(&log_lock);
}

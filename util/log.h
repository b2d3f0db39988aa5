/*
 * log.h - one levelled log for abgate. AB_LOG checks the level before formatting; library code
 * logs only through here, and the executable decides where lines go (stderr by default, or an
 * installed callback, e.g. the service's log file). Progress lines use AB_LOG_INFO.
 */
#ifndef AB_LOG_H
#define AB_LOG_H

enum ab_log_level {
	AB_LOG_ERROR = 0,
	AB_LOG_WARN = 1,
	AB_LOG_INFO = 2,
	AB_LOG_DEBUG = 3
};

/* Callback receiving each formatted line (no trailing newline). `payload` is the one given. */
typedef void (*ab_log_fn)(enum ab_log_level level, const char *line, void *payload);

/* Lines above `level` are dropped before formatting. Default AB_LOG_INFO. Not thread-safe to change
 * while other threads log; set once at start-up. */
void ab_log_set_level(enum ab_log_level level);
enum ab_log_level ab_log_get_level(void);
/* Installs a sink; NULL restores the default (stderr, "abgate: " prefix, timestamps in service mode). */
void ab_log_set_sink(ab_log_fn fn, void *payload);
/* Prefix each default-sink line with an ISO-8601 UTC timestamp (service mode). */
void ab_log_set_timestamps(int on);

void ab_log_write(enum ab_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define AB_LOG(level, ...) \
	do { if ((level) <= ab_log_get_level()) ab_log_write((level), __VA_ARGS__); } while (0)
#define AB_ERR(...)   AB_LOG(AB_LOG_ERROR, __VA_ARGS__)
#define AB_WARN(...)  AB_LOG(AB_LOG_WARN, __VA_ARGS__)
#define AB_INFO(...)  AB_LOG(AB_LOG_INFO, __VA_ARGS__)
#define AB_DEBUG(...) AB_LOG(AB_LOG_DEBUG, __VA_ARGS__)

#endif

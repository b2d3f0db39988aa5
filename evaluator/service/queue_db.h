/*
 * queue_db.h - internal to the job queue (queue.c): the queue handle's layout and the SQL helpers
 * its calls are written with. Not for other modules: they use queue.h.
 * Binding types: 's' const char * (NULL binds NULL), 'i' int, 'l' int64_t; a type for a parameter
 * number the statement does not use is ignored.
 */
#ifndef AB_QUEUE_DB_H
#define AB_QUEUE_DB_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sqlite3.h>

#include "queue.h"

struct ab_queue {
	sqlite3 *db;
	pthread_mutex_t lock;
};

/* Sets the last error to "queue: WHAT: <SQLite's message>" and returns -1. */
int ab_queue_db_error(ab_queue *q, const char *what);

/* Runs SQL text (no parameters, no rows wanted). 0 or -1. */
int ab_queue_db_exec(ab_queue *q, const char *sql);

/* Prepares `sql` and binds the arguments described by `types`; *out: caller sqlite3_finalize()s. */
int ab_queue_db_prep_va(ab_queue *q, sqlite3_stmt **out, const char *sql, const char *types, va_list ap);
int ab_queue_db_prep(ab_queue *q, sqlite3_stmt **out, const char *sql, const char *types, ...);

/* Runs a statement that returns no rows. *out_changes (may be NULL) gets the rows changed. */
int ab_queue_db_run(ab_queue *q, int *out_changes, const char *sql, const char *types, ...);

/*
 * Prepares, binds and steps once: 0 with *out on the first row (the caller reads its columns and
 * finalizes), AB_ENOTFOUND when there is none, or an error naming `what`.
 */
int ab_queue_db_select_row_va(ab_queue *q, sqlite3_stmt **out, const char *what, const char *sql, const char *types,
			      va_list ap);
int ab_queue_db_select_row(ab_queue *q, sqlite3_stmt **out, const char *what, const char *sql, const char *types, ...);

/* SELECT of one integer; AB_ENOTFOUND when no row. */
int ab_queue_db_select_i64(ab_queue *q, int64_t *out, const char *sql, const char *types, ...);

/* Locks the queue and begins an IMMEDIATE transaction. 0, or -1 (unlocked again). */
int ab_queue_db_begin(ab_queue *q);

/* Commits when error == 0, else rolls back; unlocks; returns error (or the commit's failure). */
int ab_queue_db_end(ab_queue *q, int error);

#endif

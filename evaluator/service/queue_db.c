/*
 * queue_db.c - the SQL layer under the job queue (see queue_db.h): statements prepared and bound
 * from a type string, single-row selects, and the IMMEDIATE transaction that every public queue
 * call is, under the queue's mutex.
 */
#include "queue_db.h"

#include <stdarg.h>
#include <stdio.h>

#include "error.h"

int ab_queue_db_error(ab_queue *q, const char *what)
{
	return ab_error_set("queue: %s: %s", what, sqlite3_errmsg(q->db));
}

int ab_queue_db_exec(ab_queue *q, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(q->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		ab_error_set("queue: %s", msg ? msg : sqlite3_errmsg(q->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/*
 * Prepares `sql` and binds the arguments described by `types`: 's' const char * (NULL binds NULL),
 * 'i' int, 'l' int64_t. A type for a parameter number the statement does not use is ignored.
 */
int ab_queue_db_prep_va(ab_queue *q, sqlite3_stmt **out, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
		return ab_queue_db_error(q, "prepare");
	for (int i = 0; types[i]; i++) {
		if (types[i] == 's') {
			const char *s = va_arg(ap, const char *);
			if (s)
				sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT);
			else
				sqlite3_bind_null(st, i + 1);
		} else if (types[i] == 'i') {
			sqlite3_bind_int(st, i + 1, va_arg(ap, int));
		} else {
			sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		}
	}
	*out = st;
	return 0;
}

int ab_queue_db_prep(ab_queue *q, sqlite3_stmt **out, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int error = ab_queue_db_prep_va(q, out, sql, types, ap);
	va_end(ap);
	return error;
}

/* Runs a statement that returns no rows. *out_changes (may be NULL) gets the rows changed. */
int ab_queue_db_run(ab_queue *q, int *out_changes, const char *sql, const char *types, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int rc;

	va_start(ap, types);
	rc = ab_queue_db_prep_va(q, &st, sql, types, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return ab_queue_db_error(q, "step");
	if (out_changes)
		*out_changes = sqlite3_changes(q->db);
	return 0;
}

/*
 * Prepares and binds as ab_queue_db_prep() and steps once: 0 with *out on the first row (the caller reads its
 * columns and finalizes), AB_ENOTFOUND when there is none, or an error naming `what`.
 */
int ab_queue_db_select_row_va(ab_queue *q, sqlite3_stmt **out, const char *what, const char *sql, const char *types,
			 va_list ap)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (ab_queue_db_prep_va(q, &st, sql, types, ap) < 0)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = st;
		return 0;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? AB_ENOTFOUND : ab_queue_db_error(q, what);
}

int ab_queue_db_select_row(ab_queue *q, sqlite3_stmt **out, const char *what, const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int error = ab_queue_db_select_row_va(q, out, what, sql, types, ap);
	va_end(ap);
	return error;
}

/* SELECT of one integer; AB_ENOTFOUND when no row. */
int ab_queue_db_select_i64(ab_queue *q, int64_t *out, const char *sql, const char *types, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;

	va_start(ap, types);
	int error = ab_queue_db_select_row_va(q, &st, "select", sql, types, ap);
	va_end(ap);
	if (error == 0) {
		*out = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	return error;
}

int ab_queue_db_begin(ab_queue *q)
{
	pthread_mutex_lock(&q->lock);
	if (ab_queue_db_exec(q, "BEGIN IMMEDIATE") < 0) {
		pthread_mutex_unlock(&q->lock);
		return -1;
	}
	return 0;
}

/* Commits when error == 0, else rolls back; unlocks; returns error (or the commit's failure). */
int ab_queue_db_end(ab_queue *q, int error)
{
	if (error == 0 && ab_queue_db_exec(q, "COMMIT") < 0)
		error = -1;
	if (error != 0)
		sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
	pthread_mutex_unlock(&q->lock);
	return error;
}

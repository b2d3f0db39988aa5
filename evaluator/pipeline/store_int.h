/*
 * store_int.h - what store.c (the handle: open, schema migrations, prepared statements, the cache
 * and calibration tables) and store_eval.c (evaluation rows and their samples) share: the handle,
 * its statement cache and the helpers that run a statement. Internal to evaluator/pipeline:
 * everything a caller needs is in store.h.
 */
#ifndef AB_STORE_INT_H
#define AB_STORE_INT_H

#include <stdint.h>

#include <sqlite3.h>

#include "store.h"

/* The prepared statements of a handle; their SQL is store.c's statement_sql[]. */
enum statement {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_EVAL_INSERT, ST_EVAL_UPDATE, ST_EVAL_FINISH, ST_EVAL_GET, ST_HISTORY,
	ST_SAMPLE_INSERT, ST_SAMPLES_GET, ST_CACHE_GET, ST_CACHE_PUT, ST_CALIB_INSERT, ST_CALIB_LATEST,
	ST_COUNT
};

struct ab_store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *statements[ST_COUNT];   /* prepared on first use */
};

/* Sets the last error to "store PATH: what: SQLite's message (SQLite rc)". Returns AB_ERROR. */
int ab_store_db_error(ab_store *store, int rc, const char *what);

/* Wall-clock time in Unix ms, as the created_at / finished_at columns hold it. */
int64_t ab_store_now_ms(void);

/* The statement, reset and unbound, ready to bind; NULL with the error set. Borrowed: the handle
 * owns it until ab_store_close. */
sqlite3_stmt *ab_store_statement(ab_store *store, enum statement which);

/* Runs a statement that returns no rows, then resets it. */
int ab_store_step_done(ab_store *store, sqlite3_stmt *st, const char *what);

/* Runs one of the row-less statements (ST_BEGIN, ST_COMMIT, ST_ROLLBACK). */
int ab_store_run_simple(ab_store *store, enum statement which, const char *what);

#endif

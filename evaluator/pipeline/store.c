/*
 * store.c - the SQLite store behind store.h: the handle, its schema and the small tables. WAL lets a
 * reader (a CLI listing history) and the writer (a service worker) share the file; a busy timeout
 * plus BEGIN IMMEDIATE for every write transaction makes concurrent writers queue instead of
 * failing. Schema changes are numbered migrations applied in one transaction on open; statements
 * are prepared once per handle. Evaluations and their samples are in store_eval.c.
 */
#define _GNU_SOURCE
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"

#define BUSY_TIMEOUT_MS 30000

/* migrations[v] takes a database from schema version v to v + 1. Append only; never edit one. */
static const char *const migrations[AB_STORE_SCHEMA_VERSION] = {
	/* 0 -> 1 */
	"CREATE TABLE evaluations ("
	"  id INTEGER PRIMARY KEY,"
	"  created_at INTEGER NOT NULL,"            /* Unix ms */
	"  finished_at INTEGER,"                    /* Unix ms, NULL while running */
	"  status TEXT NOT NULL CHECK (status IN ('running','done','canceled','error')),"
	"  \"trigger\" TEXT, repo TEXT,"
	"  base_ref TEXT, base_sha TEXT, base_tree TEXT,"
	"  head_ref TEXT, head_sha TEXT, head_tree TEXT,"
	"  suite_name TEXT, suite_sha256 TEXT,"
	"  seed INTEGER,"                           /* the uint64 seed's bits as a signed integer */
	"  label TEXT, reason TEXT, exit_status INTEGER,"
	"  result_json TEXT);"
	"CREATE TABLE samples ("
	"  eval_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,"
	"  side INTEGER NOT NULL, pair INTEGER NOT NULL,"
	"  pair_order INTEGER NOT NULL,"            /* struct ab_sample.order (ORDER is an SQL keyword) */
	"  batch INTEGER NOT NULL,"
	"  model TEXT NOT NULL, metric TEXT NOT NULL, ctx INTEGER NOT NULL,"
	"  value REAL,"                             /* NULL for a failed sample (NAN) */
	"  ok INTEGER NOT NULL, reason TEXT,"
	"  t_start_ns INTEGER NOT NULL, t_end_ns INTEGER NOT NULL);"
	"CREATE INDEX samples_by_eval ON samples(eval_id);"
	"CREATE TABLE cache ("
	"  key TEXT PRIMARY KEY,"
	"  value BLOB NOT NULL,"
	"  created_at INTEGER NOT NULL);",          /* Unix ms */
	/* 1 -> 2: steady-state reps and the engine clock beside each sample (struct ab_sample) */
	"ALTER TABLE samples ADD COLUMN reps INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE samples ADD COLUMN rep_values TEXT;"     /* JSON array of the raw values */
	"ALTER TABLE samples ADD COLUMN harness_ms REAL;"
	"ALTER TABLE samples ADD COLUMN engine_ms REAL;"
	"ALTER TABLE samples ADD COLUMN deferred_ms REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE samples ADD COLUMN stats TEXT;",        /* the engine's stats object, compact JSON */
	/* 2 -> 3: calibrations (abgate calibrate), cited by later evaluations of the same suite */
	"CREATE TABLE calibrations ("
	"  id INTEGER PRIMARY KEY,"
	"  created_at INTEGER NOT NULL,"            /* Unix ms */
	"  repo TEXT, ref TEXT, sha TEXT,"
	"  suite_name TEXT NOT NULL, suite_sha256 TEXT,"
	"  runs INTEGER NOT NULL, false_positives INTEGER NOT NULL, fpr_upper REAL,"
	"  result_json TEXT NOT NULL);"             /* the abgate.calibration/1 document */
	"CREATE INDEX calibrations_by_suite ON calibrations(suite_name, id);",
};

#define EVAL_COLUMNS "id, created_at, finished_at, status, \"trigger\", repo, base_ref, base_sha, base_tree," \
		     " head_ref, head_sha, head_tree, suite_name, suite_sha256, seed, label, reason, exit_status"

static const char *const statement_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_EVAL_INSERT] =
		"INSERT INTO evaluations (created_at, status, \"trigger\", repo, base_ref, base_sha, base_tree,"
		" head_ref, head_sha, head_tree, suite_name, suite_sha256, seed, exit_status)"
		" VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, -1)",
	[ST_EVAL_UPDATE] =
		"UPDATE evaluations SET \"trigger\" = coalesce(?2, \"trigger\"), repo = coalesce(?3, repo),"
		" base_ref = coalesce(?4, base_ref), base_sha = coalesce(?5, base_sha), base_tree = coalesce(?6, base_tree),"
		" head_ref = coalesce(?7, head_ref), head_sha = coalesce(?8, head_sha), head_tree = coalesce(?9, head_tree),"
		" suite_name = coalesce(?10, suite_name), suite_sha256 = coalesce(?11, suite_sha256),"
		" seed = coalesce(?12, seed) WHERE id = ?1",
	[ST_EVAL_FINISH] =
		"UPDATE evaluations SET status = ?2, label = ?3, reason = ?4, exit_status = ?5, result_json = ?6,"
		" finished_at = ?7 WHERE id = ?1",
	[ST_EVAL_GET] = "SELECT " EVAL_COLUMNS ", result_json FROM evaluations WHERE id = ?1",
	[ST_HISTORY] = "SELECT " EVAL_COLUMNS " FROM evaluations ORDER BY id DESC LIMIT ?1",
	[ST_SAMPLE_INSERT] =
		"INSERT INTO samples (eval_id, side, pair, pair_order, batch, model, metric, ctx, value, ok, reason,"
		" t_start_ns, t_end_ns, reps, rep_values, harness_ms, engine_ms, deferred_ms, stats)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
	[ST_SAMPLES_GET] =
		"SELECT side, pair, pair_order, batch, model, metric, ctx, value, ok, reason, t_start_ns, t_end_ns,"
		" reps, rep_values, harness_ms, engine_ms, deferred_ms, stats FROM samples WHERE eval_id = ?1 ORDER BY rowid",
	[ST_CACHE_GET] = "SELECT value FROM cache WHERE key = ?1",
	[ST_CACHE_PUT] = "INSERT OR REPLACE INTO cache (key, value, created_at) VALUES (?1, ?2, ?3)",
	[ST_CALIB_INSERT] =
		"INSERT INTO calibrations (created_at, repo, ref, sha, suite_name, suite_sha256, runs, false_positives,"
		" fpr_upper, result_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_CALIB_LATEST] =
		"SELECT id, result_json FROM calibrations WHERE suite_name = ?1 ORDER BY id DESC LIMIT 1",
};

int ab_store_db_error(ab_store *store, int rc, const char *what)
{
	return ab_error_set("store %s: %s: %s (SQLite %d)", store->path, what,
			    store->db ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc), rc);
}

int64_t ab_store_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sqlite3_stmt *ab_store_statement(ab_store *store, enum statement which)
{
	sqlite3_stmt **st = &store->statements[which];
	int rc;

	if (!*st) {
		rc = sqlite3_prepare_v3(store->db, statement_sql[which], -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
		if (rc != SQLITE_OK) {
			ab_store_db_error(store, rc, "prepare");
			*st = NULL;
			return NULL;
		}
	}
	sqlite3_reset(*st);
	sqlite3_clear_bindings(*st);
	return *st;
}

int ab_store_step_done(ab_store *store, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);
	int error = rc == SQLITE_DONE ? 0 : ab_store_db_error(store, rc, what);
	sqlite3_reset(st);
	return error;
}

int ab_store_run_simple(ab_store *store, enum statement which, const char *what)
{
	sqlite3_stmt *st = ab_store_statement(store, which);
	return st ? ab_store_step_done(store, st, what) : AB_ERROR;
}

static int read_version(int *out, ab_store *store)
{
	sqlite3_stmt *st = NULL;
	int rc, version = 0;

	rc = sqlite3_prepare_v2(store->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
				-1, &st, NULL);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
		goto fail;
	if (sqlite3_column_int(st, 0) == 1) {
		sqlite3_finalize(st);
		st = NULL;
		rc = sqlite3_prepare_v2(store->db, "SELECT max(version) FROM schema_version", -1, &st, NULL);
		if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
			goto fail;
		version = sqlite3_column_int(st, 0);
	}
	sqlite3_finalize(st);
	*out = version;
	return 0;
fail:
	ab_store_db_error(store, rc, "reading the schema version");
	sqlite3_finalize(st);
	return AB_ERROR;
}

/* Brings the schema to AB_STORE_SCHEMA_VERSION in one IMMEDIATE transaction, so that two processes
 * opening a fresh file at once migrate it exactly once. */
static int migrate(ab_store *store)
{
	char sql[128];
	char *msg = NULL;
	int version = 0, rc, error = AB_ERROR;

	/* The common case, an up-to-date file, is settled by a read: no write lock on every open. */
	if (read_version(&version, store) < 0)
		return AB_ERROR;
	if (version == AB_STORE_SCHEMA_VERSION)
		return 0;
	if ((rc = sqlite3_exec(store->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK)
		return ab_store_db_error(store, rc, "begin migration");
	if (read_version(&version, store) < 0)   /* again: another process may have migrated meanwhile */
		goto cleanup;
	if (version > AB_STORE_SCHEMA_VERSION) {
		error = ab_error_setc(AB_EINVALID, "store %s: schema version %d is newer than this abgate supports (%d); "
				      "use a newer abgate or another state directory", store->path, version,
				      AB_STORE_SCHEMA_VERSION);
		goto cleanup;
	}
	if (version == 0 &&
	    (rc = sqlite3_exec(store->db, "CREATE TABLE schema_version (version INTEGER NOT NULL);"
				"INSERT INTO schema_version VALUES (0)", NULL, NULL, &msg)) != SQLITE_OK)
		goto migration_failed;
	for (; version < AB_STORE_SCHEMA_VERSION; version++) {
		if ((rc = sqlite3_exec(store->db, migrations[version], NULL, NULL, &msg)) != SQLITE_OK)
			goto migration_failed;
		snprintf(sql, sizeof(sql), "UPDATE schema_version SET version = %d", version + 1);
		if ((rc = sqlite3_exec(store->db, sql, NULL, NULL, &msg)) != SQLITE_OK)
			goto migration_failed;
	}
	if ((rc = sqlite3_exec(store->db, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK) {
		ab_store_db_error(store, rc, "commit migration");
		goto cleanup;
	}
	return 0;

migration_failed:
	ab_error_set("store %s: migration to schema version %d: %s (SQLite %d)", store->path, version + 1,
		     msg ? msg : sqlite3_errstr(rc), rc);
	sqlite3_free(msg);
cleanup:
	sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
	return error;
}

int ab_store_open_file(ab_store **out, const char *db_path)
{
	ab_store *store = NULL;
	sqlite3_stmt *st = NULL;
	int rc, waited_ms, error = AB_ERROR;

	if (!(store = calloc(1, sizeof(*store))) || !(store->path = strdup(db_path))) {
		ab_error_set("store: out of memory");
		goto cleanup;
	}
	if (!sqlite3_threadsafe()) {   /* the one-handle-per-thread promise rests on this */
		ab_error_set("store: this SQLite library was built without thread support");
		goto cleanup;
	}
	rc = sqlite3_open_v2(db_path, &store->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		ab_store_db_error(store, rc, "open");
		goto cleanup;
	}
	sqlite3_extended_result_codes(store->db, 1);
	sqlite3_busy_timeout(store->db, BUSY_TIMEOUT_MS);
	/* journal_mode answers with the mode now in force: anything but "wal" (e.g. a read-only or
	 * network file system) is reported rather than silently run without it. Switching a fresh file
	 * to WAL needs an exclusive lock and SQLite does not call the busy handler for it, so two
	 * processes creating the store at once retry here themselves. */
	rc = sqlite3_prepare_v2(store->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	for (waited_ms = 0; rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_BUSY && waited_ms < BUSY_TIMEOUT_MS;
	     waited_ms += 10) {
		sqlite3_reset(st);
		rc = SQLITE_OK;
		usleep(10000);
	}
	if (rc != SQLITE_ROW) {
		ab_store_db_error(store, rc, "enabling WAL");
		goto cleanup;
	}
	if (strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		ab_error_set("store %s: the database refused WAL mode (journal mode is %s)", db_path,
			     (const char *)sqlite3_column_text(st, 0));
		goto cleanup;
	}
	sqlite3_finalize(st);
	st = NULL;
	if ((rc = sqlite3_exec(store->db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL", NULL, NULL, NULL))
	    != SQLITE_OK) {
		ab_store_db_error(store, rc, "setting pragmas");
		goto cleanup;
	}
	if ((error = migrate(store)) < 0)
		goto cleanup;
	*out = store;
	store = NULL;
	error = 0;

cleanup:
	sqlite3_finalize(st);
	ab_store_close(store);
	return error;
}

int ab_store_open(ab_store **out, const char *state_dir)
{
	char path[4096];

	if (ab_fs_mkdirs(state_dir) < 0)
		return ab_error_wrap(AB_ERROR, "store");
	if ((size_t)snprintf(path, sizeof(path), "%s/abgate.db", state_dir) >= sizeof(path))
		return ab_error_set("store: state directory path too long");
	return ab_store_open_file(out, path);
}

void ab_store_close(ab_store *store)
{
	int i;

	if (!store)
		return;
	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(store->statements[i]);
	sqlite3_close(store->db);   /* every statement is finalised, so this cannot be left busy */
	free(store->path);
	free(store);
}

/* --- cache --------------------------------------------------------------------------------------- */

int ab_store_cache_get(void **out_value, size_t *out_len, ab_store *store, const char *key)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_CACHE_GET);
	const void *blob;
	char *copy = NULL;
	size_t len;
	int rc, error = AB_ERROR;

	if (!st)
		return AB_ERROR;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		error = ab_error_setc(AB_ENOTFOUND, "store: no cache entry %s", key);
		goto cleanup;
	}
	if (rc != SQLITE_ROW) {
		ab_store_db_error(store, rc, "reading the cache");
		goto cleanup;
	}
	blob = sqlite3_column_blob(st, 0);
	len = (size_t)sqlite3_column_bytes(st, 0);
	if (!(copy = malloc(len + 1))) {
		ab_error_set("store: out of memory");
		goto cleanup;
	}
	if (len)
		memcpy(copy, blob, len);
	copy[len] = '\0';
	*out_value = copy;
	*out_len = len;
	error = 0;

cleanup:
	sqlite3_reset(st);
	return error;
}

int ab_store_cache_put(ab_store *store, const char *key, const void *value, size_t len)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_CACHE_PUT);

	if (!st)
		return AB_ERROR;
	if (len > (size_t)1 << 30)
		return ab_error_setc(AB_EINVALID, "store: cache value of %zu bytes is over the 1 GiB limit", len);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob64(st, 2, value ? value : "", len, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, ab_store_now_ms());
	return ab_store_step_done(store, st, "writing the cache");
}

/* --- calibrations -------------------------------------------------------------------------------- */

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *text)
{
	if (text)
		sqlite3_bind_text(st, i, text, -1, SQLITE_TRANSIENT);
}

int ab_store_calibration_add(int64_t *out_id, ab_store *store, const struct ab_store_calibration *c)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_CALIB_INSERT);
	if (!st)
		return AB_ERROR;
	if (c->suite_name == NULL || c->result_json == NULL)
		return ab_error_setc(AB_EINVALID, "store: a calibration needs a suite name and a document");
	sqlite3_bind_int64(st, 1, ab_store_now_ms());
	bind_text_or_null(st, 2, c->repo);
	bind_text_or_null(st, 3, c->ref);
	bind_text_or_null(st, 4, c->sha);
	sqlite3_bind_text(st, 5, c->suite_name, -1, SQLITE_TRANSIENT);
	bind_text_or_null(st, 6, c->suite_sha256);
	sqlite3_bind_int(st, 7, c->runs);
	sqlite3_bind_int(st, 8, c->false_positives);
	if (isfinite(c->fpr_upper))
		sqlite3_bind_double(st, 9, c->fpr_upper);
	sqlite3_bind_text(st, 10, c->result_json, -1, SQLITE_TRANSIENT);
	if (ab_store_step_done(store, st, "inserting a calibration") < 0)
		return AB_ERROR;
	if (out_id)
		*out_id = sqlite3_last_insert_rowid(store->db);
	return 0;
}

int ab_store_calibration_latest(char **out_json, int64_t *out_id, ab_store *store, const char *suite_name)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_CALIB_LATEST);
	int rc, error = AB_ENOTFOUND;
	if (!st)
		return AB_ERROR;
	sqlite3_bind_text(st, 1, suite_name ? suite_name : "", -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *text = sqlite3_column_text(st, 1);
		char *copy = strdup(text ? (const char *)text : "");
		if (copy == NULL) {
			error = ab_error_set("store: out of memory");
		} else {
			*out_json = copy;
			if (out_id)
				*out_id = sqlite3_column_int64(st, 0);
			error = 0;
		}
	} else if (rc != SQLITE_DONE) {
		error = ab_store_db_error(store, rc, "reading the latest calibration");
	} else {
		ab_error_setc(AB_ENOTFOUND, "store: no calibration of suite %s", suite_name ? suite_name : "");
	}
	sqlite3_reset(st);
	return error;
}

/*
 * queue.c - the durable job queue (see queue.h) on SQLite in WAL mode. Every public call is one
 * IMMEDIATE transaction under the queue's mutex, so a crash between any two calls leaves a state
 * the next start can resume from: leases expire, "reporting" jobs are retried, recorded deliveries
 * are never applied twice.
 */
#include "queue.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "error.h"
#include "log.h"
#include "queue_db.h"

#define SCHEMA_VERSION "1"

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS jobs("
	"  id INTEGER PRIMARY KEY,"
	"  repo TEXT NOT NULL, pr INTEGER NOT NULL, head_sha TEXT NOT NULL, round INTEGER NOT NULL,"
	"  base_ref TEXT NOT NULL, trigger TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  lease_owner TEXT, lease_until INTEGER NOT NULL DEFAULT 0,"
	"  cancel_reason TEXT,"
	"  outcome TEXT, eval_status INTEGER NOT NULL DEFAULT -1, eval_id INTEGER NOT NULL DEFAULT 0, result TEXT, note TEXT,"
	"  check_run_id INTEGER NOT NULL DEFAULT 0, check_kind TEXT,"
	"  report_done INTEGER NOT NULL DEFAULT 0, report_attempts INTEGER NOT NULL DEFAULT 0,"
	"  next_report_at INTEGER NOT NULL DEFAULT 0, last_error TEXT,"
	"  created_at INTEGER NOT NULL, started_at INTEGER, evaluated_at INTEGER, finished_at INTEGER,"
	"  UNIQUE(repo, pr, head_sha, round));"
	"CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, id);"
	"CREATE INDEX IF NOT EXISTS jobs_pr ON jobs(repo, pr);"
	"CREATE TABLE IF NOT EXISTS deliveries(id TEXT PRIMARY KEY, event TEXT, received_at INTEGER NOT NULL,"
	"  result INTEGER NOT NULL, job_id INTEGER);"
	"CREATE INDEX IF NOT EXISTS deliveries_time ON deliveries(received_at);"
	"CREATE TABLE IF NOT EXISTS commands(id INTEGER PRIMARY KEY, repo TEXT NOT NULL, pr INTEGER NOT NULL,"
	"  user TEXT NOT NULL, comment_id INTEGER NOT NULL, rerun INTEGER NOT NULL, state TEXT NOT NULL,"
	"  attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL DEFAULT 0, outcome TEXT, last_error TEXT,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS sticky(repo TEXT NOT NULL, pr INTEGER NOT NULL, comment_id INTEGER NOT NULL,"
	"  head_sha TEXT, updated_at INTEGER, PRIMARY KEY(repo, pr));"
	"CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', '" SCHEMA_VERSION "');";

int ab_queue_open(ab_queue **out, const char *path)
{
	ab_queue *q = calloc(1, sizeof(*q));
	int error = -1;

	if (!q)
		return ab_error_set("out of memory");
	pthread_mutex_init(&q->lock, NULL);
	if (sqlite3_open_v2(path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
	    SQLITE_OK) {
		ab_error_set("queue: cannot open %s: %s", path, q->db ? sqlite3_errmsg(q->db) : "out of memory");
		goto cleanup;
	}
	sqlite3_busy_timeout(q->db, 10000);  /* `abgate eval --pr --post` may share the file */
	/* WAL + synchronous=NORMAL: a commit is durable against a process crash (what the queue
	 * guards against); only an OS crash may lose the last transactions. */
	if (ab_queue_db_exec(q, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") < 0 || ab_queue_db_exec(q, schema) < 0)
		goto cleanup;
	*out = q;
	q = NULL;
	error = 0;
cleanup:
	if (error)
		ab_error_wrap(AB_ERROR, "%s", path);
	ab_queue_free(q);
	return error;
}

void ab_queue_free(ab_queue *q)
{
	if (!q)
		return;
	sqlite3_close(q->db);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void ab_job_free(struct ab_job *j)
{
	if (!j)
		return;
	free(j->repo);
	free(j->head_sha);
	free(j->base_ref);
	free(j->trigger);
	free(j->state);
	free(j->cancel_reason);
	free(j->outcome);
	free(j->result);
	free(j->check_kind);
	free(j->note);
	free(j);
}

#define JOB_COLS                                                                                                   \
	"id, repo, pr, head_sha, base_ref, trigger, round, state, attempts, cancel_reason, outcome, eval_status, " \
	"eval_id, result, check_run_id, check_kind, report_done, report_attempts, created_at, note"

static char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);
	return s ? strdup((const char *)s) : NULL;
}

static int read_job(ab_queue *q, struct ab_job **out, int64_t id)
{
	sqlite3_stmt *st = NULL;
	struct ab_job *j = NULL;
	int error = ab_queue_db_select_row(q, &st, "read job", "SELECT " JOB_COLS " FROM jobs WHERE id = ?", "l", id);

	if (error == AB_ENOTFOUND)
		return ab_error_setc(AB_ENOTFOUND, "queue: no job %lld", (long long)id);
	if (error < 0)
		return error;
	error = -1;
	if (!(j = calloc(1, sizeof(*j)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	j->id = sqlite3_column_int64(st, 0);
	j->repo = col_text(st, 1);
	j->pr = sqlite3_column_int(st, 2);
	j->head_sha = col_text(st, 3);
	j->base_ref = col_text(st, 4);
	j->trigger = col_text(st, 5);
	j->round = sqlite3_column_int(st, 6);
	j->state = col_text(st, 7);
	j->attempts = sqlite3_column_int(st, 8);
	j->cancel_reason = col_text(st, 9);
	j->outcome = col_text(st, 10);
	j->eval_status = sqlite3_column_int(st, 11);
	j->eval_id = sqlite3_column_int64(st, 12);
	j->result = col_text(st, 13);
	j->check_run_id = sqlite3_column_int64(st, 14);
	j->check_kind = col_text(st, 15);
	j->report_done = (unsigned)sqlite3_column_int(st, 16);
	j->report_attempts = sqlite3_column_int(st, 17);
	j->created_at = sqlite3_column_int64(st, 18);
	j->note = col_text(st, 19);
	if (!j->repo || !j->head_sha || !j->base_ref || !j->trigger || !j->state) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	*out = j;
	j = NULL;
	error = 0;
cleanup:
	ab_job_free(j);
	sqlite3_finalize(st);
	return error;
}

int ab_queue_job_get(ab_queue *q, struct ab_job **out, int64_t id)
{
	pthread_mutex_lock(&q->lock);
	int error = read_job(q, out, id);
	pthread_mutex_unlock(&q->lock);
	return error;
}

/* Cancels or supersedes the jobs of repo#pr other than `keep_sha` (NULL: all). */
static int stop_pr_jobs(ab_queue *q, const char *repo, int pr, const char *keep_sha, const char *outcome, time_t now,
			int *out_changed)
{
	const char *reason = !strcmp(outcome, "superseded") ? "superseded" : "closed";
	int a = 0, b = 0, c = 0;
	const char *other = keep_sha ? " AND head_sha <> ?4" : "";
	char sql[512];

	/* Queued jobs that never posted a check run just end; those that did (a retried job) go
	 * through reporting so their check run is closed as cancelled. */
	snprintf(sql, sizeof(sql),
		 "UPDATE jobs SET state = ?3, outcome = ?3, finished_at = ?5 WHERE repo = ?1 AND pr = ?2 AND "
		 "state = 'queued' AND check_run_id = 0%s",
		 other);
	if (ab_queue_db_run(q, &a, sql, "sissl", repo, pr, outcome, keep_sha ? keep_sha : "", (int64_t)now) < 0)
		return -1;
	snprintf(sql, sizeof(sql),
		 "UPDATE jobs SET state = 'reporting', outcome = ?3, lease_owner = NULL, lease_until = 0, "
		 "next_report_at = 0, evaluated_at = ?5 WHERE repo = ?1 AND pr = ?2 AND state = 'queued'%s",
		 other);
	if (ab_queue_db_run(q, &b, sql, "sissl", repo, pr, outcome, keep_sha ? keep_sha : "", (int64_t)now) < 0)
		return -1;
	snprintf(sql, sizeof(sql),
		 "UPDATE jobs SET cancel_reason = ?3 WHERE repo = ?1 AND pr = ?2 AND state = 'running' AND "
		 "cancel_reason IS NULL%s",
		 other);
	if (ab_queue_db_run(q, &c, sql, "siss", repo, pr, reason, keep_sha ? keep_sha : "") < 0)
		return -1;
	if (a + b + c)
		AB_INFO("queue: %s#%d: %d queued job(s) %s, %d running job(s) asked to stop", repo, pr, a + b, outcome, c);
	if (out_changed)
		*out_changed = a + b + c;
	return 0;
}

static int enqueue_locked(ab_queue *q, enum ab_ingest_result *out, int64_t *out_job_id, const struct ab_intent *in,
			  time_t now)
{
	int64_t id = 0, round = 0;
	int changed = 0;

	*out_job_id = 0;
	switch (in->kind) {
	case AB_INTENT_NONE:
		*out = AB_INGEST_IGNORED;
		return 0;
	case AB_INTENT_CLOSE:
		if (stop_pr_jobs(q, in->repo, in->pr, NULL, "canceled", now, &changed) < 0)
			return -1;
		if (ab_queue_db_run(q, NULL, "UPDATE commands SET state = 'done', outcome = 'closed' WHERE repo = ? AND pr = ? AND "
				 "state = 'pending'",
			"si", in->repo, in->pr) < 0)
			return -1;
		*out = changed ? AB_INGEST_CANCELED : AB_INGEST_IGNORED;
		return 0;
	case AB_INTENT_COMMAND:
		if (ab_queue_db_run(q, NULL, "INSERT INTO commands(repo, pr, user, comment_id, rerun, state, created_at) "
				 "VALUES(?, ?, ?, ?, ?, 'pending', ?)",
			"sislil", in->repo, in->pr, in->user ? in->user : "", in->comment_id, in->rerun,
			(int64_t)now) < 0)
			return -1;
		*out = AB_INGEST_COMMAND;
		return 0;
	case AB_INTENT_ENQUEUE:
		break;
	}
	if (!in->repo || !in->head_sha || !in->base_ref || in->pr <= 0)
		return ab_error_setc(AB_EINVALID, "queue: enqueue needs repo, pr, head sha and base");
	if (stop_pr_jobs(q, in->repo, in->pr, in->head_sha, "superseded", now, NULL) < 0)
		return -1;
	/* A live job, or (unless rerun) a finished one, already covers this head. Jobs being canceled
	 * do not count: a PR closed and reopened, or pushed back to an old head, is evaluated again. */
	int rc = ab_queue_db_select_i64(q, &id,
			    in->rerun ? "SELECT id FROM jobs WHERE repo = ? AND pr = ? AND head_sha = ? AND "
					"cancel_reason IS NULL AND state IN ('queued', 'running') ORDER BY round DESC LIMIT 1"
				      : "SELECT id FROM jobs WHERE repo = ? AND pr = ? AND head_sha = ? AND "
					"cancel_reason IS NULL AND (state IN ('queued', 'running', 'done') OR (state = "
					"'reporting' AND outcome NOT IN ('canceled', 'superseded'))) ORDER BY round DESC LIMIT 1",
			    "sis", in->repo, in->pr, in->head_sha);
	if (rc == 0) {
		*out_job_id = id;
		*out = AB_INGEST_EXISTS;
		return 0;
	}
	if (rc != AB_ENOTFOUND)
		return -1;
	if (ab_queue_db_select_i64(
		    q, &round,
		    "SELECT COALESCE(MAX(round) + 1, 0) FROM jobs WHERE repo = ? AND pr = ? AND head_sha = ?", "sis",
		    in->repo, in->pr, in->head_sha) < 0)
		return -1;
	if (ab_queue_db_run(q, NULL, "INSERT INTO jobs(repo, pr, head_sha, round, base_ref, trigger, state, created_at) "
			 "VALUES(?, ?, ?, ?, ?, ?, 'queued', ?)",
		"sisissl", in->repo, in->pr, in->head_sha, (int)round, in->base_ref, in->trigger ? in->trigger : "",
		(int64_t)now) < 0)
		return -1;
	*out_job_id = sqlite3_last_insert_rowid(q->db);
	*out = AB_INGEST_ENQUEUED;
	AB_INFO("queue: job %lld: %s#%d head %.12s queued (%s%s)", (long long)*out_job_id, in->repo, in->pr, in->head_sha,
		in->trigger ? in->trigger : "", round ? ", rerun" : "");
	return 0;
}

int ab_queue_ingest(ab_queue *q, enum ab_ingest_result *out, int64_t *out_job_id, const char *delivery,
		    const char *event, const struct ab_intent *intent, time_t now)
{
	int64_t job_id = 0, seen;
	enum ab_ingest_result result = AB_INGEST_IGNORED;
	int error;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	if (delivery && (error = ab_queue_db_select_i64(q, &seen, "SELECT 1 FROM deliveries WHERE id = ?", "s",
							delivery)) != AB_ENOTFOUND) {
		if (error == 0)
			result = AB_INGEST_DUPLICATE;
		goto done;
	}
	if ((error = enqueue_locked(q, &result, &job_id, intent, now)) < 0)
		goto done;
	if (delivery)
		error = ab_queue_db_run(q, NULL, "INSERT INTO deliveries(id, event, received_at, result, job_id) VALUES(?, ?, ?, ?, ?)",
			    "slil", delivery, event ? event : "", (int64_t)now, (int)result, job_id);
done:
	error = ab_queue_db_end(q, error);
	if (error == 0) {
		*out = result;
		if (out_job_id)
			*out_job_id = job_id;
	}
	return error;
}

int ab_queue_enqueue(ab_queue *q, enum ab_ingest_result *out, int64_t *out_job_id, const struct ab_intent *intent,
		     time_t now)
{
	return ab_queue_ingest(q, out, out_job_id, NULL, NULL, intent, now);
}

/* Leases the job selected by `select_sql` (one id) to owner. */
static int claim(ab_queue *q, struct ab_job **out, const char *select_sql, const char *update_sql, const char *owner,
		 int lease_s, time_t now)
{
	int64_t id;
	int error;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	if ((error = ab_queue_db_select_i64(q, &id, select_sql, "l", (int64_t)now)) < 0)
		goto done;
	if ((error = ab_queue_db_run(q, NULL, update_sql, "slll", owner, (int64_t)now + lease_s, id, (int64_t)now)) < 0)
		goto done;
	error = read_job(q, out, id);
done:
	return ab_queue_db_end(q, error);
}

int ab_queue_claim(ab_queue *q, struct ab_job **out, const char *owner, int lease_s, time_t now)
{
	return claim(q, out, "SELECT id FROM jobs WHERE state = 'queued' AND ?1 >= 0 ORDER BY id LIMIT 1",
		     "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?1, lease_until = ?2, "
		     "started_at = COALESCE(started_at, ?4) WHERE id = ?3",
		     owner, lease_s, now);
}

int ab_queue_claim_report(ab_queue *q, struct ab_job **out, const char *owner, int lease_s, time_t now)
{
	return claim(q, out,
		     "SELECT id FROM jobs WHERE state = 'reporting' AND lease_until < ?1 AND next_report_at <= ?1 "
		     "ORDER BY next_report_at, id LIMIT 1",
		     "UPDATE jobs SET lease_owner = ?1, lease_until = ?2 WHERE id = ?3 AND ?4 >= 0", owner, lease_s, now);
}

int ab_queue_heartbeat(ab_queue *q, int64_t id, const char *owner, int lease_s, time_t now, int *out_cancel)
{
	int changed = 0, error;
	int64_t cancel = 0;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	error = ab_queue_db_run(q, &changed, "UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND "
				 "state IN ('running', 'reporting')",
		    "lls", (int64_t)now + lease_s, id, owner);
	if (error == 0 && changed == 0)
		error = ab_error_setc(AB_ECANCELED, "queue: job %lld: lease lost", (long long)id);
	if (error == 0)
		error = ab_queue_db_select_i64(q, &cancel, "SELECT cancel_reason IS NOT NULL FROM jobs WHERE id = ?", "l", id);
	error = ab_queue_db_end(q, error);
	if (error == 0 && out_cancel)
		*out_cancel = (int)cancel;
	return error;
}

int ab_queue_cancel_requested(ab_queue *q, int64_t id)
{
	int64_t cancel = 0;
	pthread_mutex_lock(&q->lock);
	ab_queue_db_select_i64(q, &cancel, "SELECT cancel_reason IS NOT NULL FROM jobs WHERE id = ?", "l", id);
	pthread_mutex_unlock(&q->lock);
	return (int)cancel;
}

int ab_queue_finish_eval(ab_queue *q, int64_t id, const char *owner, const char *outcome, int eval_status,
			 int64_t eval_id, const char *result, const char *note, time_t now)
{
	int changed = 0, error;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	error = ab_queue_db_run(q, &changed,
		    "UPDATE jobs SET state = 'reporting', outcome = ?, eval_status = ?, eval_id = ?, result = ?, note = ?, "
		    "evaluated_at = ?, next_report_at = 0 WHERE id = ? AND lease_owner = ? AND state = 'running'",
		    "silsslls", outcome, eval_status, eval_id, result, note, (int64_t)now, id, owner);
	if (error == 0 && changed == 0)
		error = ab_error_setc(AB_ECANCELED, "queue: job %lld: lease lost before the result was recorded",
				      (long long)id);
	/* A canceled run that never posted a check run has nothing to report. */
	if (error == 0)
		error = ab_queue_db_run(q, NULL,
			    "UPDATE jobs SET state = outcome, finished_at = ?, lease_owner = NULL, lease_until = 0 "
			    "WHERE id = ? AND outcome IN ('canceled', 'superseded') AND check_run_id = 0",
			    "ll", (int64_t)now, id);
	return ab_queue_db_end(q, error);
}

int ab_queue_release(ab_queue *q, int64_t id, const char *owner)
{
	int error;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	error = ab_queue_db_run(q, NULL,
		    "UPDATE jobs SET state = 'queued', attempts = MAX(attempts - 1, 0), lease_owner = NULL, "
		    "lease_until = 0 WHERE id = ? AND lease_owner = ? AND state = 'running' AND cancel_reason IS NULL",
		    "ls", id, owner);
	return ab_queue_db_end(q, error);
}

int ab_queue_set_check(ab_queue *q, int64_t id, int64_t check_run_id, const char *kind)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q,
			       ab_queue_db_run(q, NULL, "UPDATE jobs SET check_run_id = ?, check_kind = ? WHERE id = ?",
					       "lsl", check_run_id, kind, id));
}

int ab_queue_report_mark(ab_queue *q, int64_t id, unsigned bits)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q, ab_queue_db_run(q, NULL, "UPDATE jobs SET report_done = report_done | ? WHERE id = ?",
						  "il", (int)bits, id));
}

int ab_queue_report_finish(ab_queue *q, int64_t id, time_t now)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q, ab_queue_db_run(q, NULL,
			  "UPDATE jobs SET state = CASE WHEN outcome IN ('canceled', 'superseded') THEN outcome "
			  "ELSE 'done' END, finished_at = ?, lease_owner = NULL, lease_until = 0, last_error = NULL "
			  "WHERE id = ? AND state = 'reporting'",
			  "ll", (int64_t)now, id));
}

int ab_queue_report_defer(ab_queue *q, int64_t id, const char *error_text, time_t retry_at)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q, ab_queue_db_run(q, NULL,
			  "UPDATE jobs SET lease_owner = NULL, lease_until = 0, next_report_at = ?, "
			  "report_attempts = report_attempts + 1, last_error = ? WHERE id = ? AND state = 'reporting'",
			  "lsl", (int64_t)retry_at, error_text, id));
}

int ab_queue_recover(ab_queue *q, time_t now, int max_attempts, int all, int *out_count)
{
	int a = 0, b = 0, c = 0, error;
	int64_t cutoff = all ? INT64_MAX : (int64_t)now;

	if (ab_queue_db_begin(q) < 0)
		return -1;
	/* Dead worker, job asked to stop: close it out as canceled/superseded. */
	error = ab_queue_db_run(q, &a,
		    "UPDATE jobs SET state = 'reporting', outcome = CASE cancel_reason WHEN 'superseded' THEN "
		    "'superseded' ELSE 'canceled' END, lease_owner = NULL, lease_until = 0, next_report_at = 0, "
		    "evaluated_at = ?1 WHERE state = 'running' AND lease_until < ?2 AND cancel_reason IS NOT NULL",
		    "ll", (int64_t)now, cutoff);
	/* Dead worker, out of attempts: report an infra error instead of looping forever. */
	if (error == 0)
		error = ab_queue_db_run(q, &b,
			    "UPDATE jobs SET state = 'reporting', outcome = 'exhausted', lease_owner = NULL, "
			    "lease_until = 0, next_report_at = 0, evaluated_at = ?1 WHERE state = 'running' AND "
			    "lease_until < ?2 AND attempts >= ?3",
			    "lli", (int64_t)now, cutoff, max_attempts);
	if (error == 0)
		error = ab_queue_db_run(q, &c,
			    "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_until = 0 WHERE "
			    "state = 'running' AND lease_until < ?",
			    "l", cutoff);
	if (error == 0)
		error = ab_queue_db_run(q, NULL, "UPDATE jobs SET lease_owner = NULL, lease_until = 0 WHERE state = 'reporting' AND "
				     "lease_until < ?",
			    "l", cutoff);
	error = ab_queue_db_end(q, error);
	if (error == 0) {
		if (a + b + c)
			AB_WARN("queue: recovered %d job(s) from dead workers: %d requeued, %d out of attempts, %d canceled",
				a + b + c, c, b, a);
		if (out_count)
			*out_count = a + b + c;
	}
	return error;
}

void ab_command_free(struct ab_command *c)
{
	if (!c)
		return;
	free(c->repo);
	free(c->user);
	free(c);
}

int ab_queue_command_next(ab_queue *q, struct ab_command **out, time_t now)
{
	sqlite3_stmt *st = NULL;
	struct ab_command *c = NULL;
	int error;

	pthread_mutex_lock(&q->lock);
	error = ab_queue_db_select_row(q, &st, "next command",
			   "SELECT id, repo, pr, user, comment_id, rerun, attempts FROM commands WHERE state = 'pending' "
			   "AND next_at <= ? ORDER BY id LIMIT 1",
			   "l", (int64_t)now);
	if (error < 0)
		goto cleanup;
	error = -1;
	if (!(c = calloc(1, sizeof(*c)))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	c->id = sqlite3_column_int64(st, 0);
	c->repo = col_text(st, 1);
	c->pr = sqlite3_column_int(st, 2);
	c->user = col_text(st, 3);
	c->comment_id = sqlite3_column_int64(st, 4);
	c->rerun = sqlite3_column_int(st, 5);
	c->attempts = sqlite3_column_int(st, 6);
	if (!c->repo || !c->user) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	*out = c;
	c = NULL;
	error = 0;
cleanup:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&q->lock);
	ab_command_free(c);
	return error;
}

int ab_queue_command_done(ab_queue *q, int64_t id, const char *outcome)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q,
			       ab_queue_db_run(q, NULL, "UPDATE commands SET state = 'done', outcome = ? WHERE id = ?",
					       "sl", outcome, id));
}

int ab_queue_command_defer(ab_queue *q, int64_t id, const char *error_text, time_t retry_at)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(
		q,
		ab_queue_db_run(q, NULL,
				"UPDATE commands SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?",
				"lsl", (int64_t)retry_at, error_text, id));
}

int ab_queue_sticky_get(ab_queue *q, const char *repo, int pr, int64_t *out)
{
	pthread_mutex_lock(&q->lock);
	int error = ab_queue_db_select_i64(q, out, "SELECT comment_id FROM sticky WHERE repo = ? AND pr = ?", "si", repo, pr);
	pthread_mutex_unlock(&q->lock);
	return error;
}

int ab_queue_sticky_set(ab_queue *q, const char *repo, int pr, int64_t comment_id, const char *head_sha, time_t now)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q, ab_queue_db_run(q, NULL,
			  "INSERT INTO sticky(repo, pr, comment_id, head_sha, updated_at) VALUES(?, ?, ?, ?, ?) "
			  "ON CONFLICT(repo, pr) DO UPDATE SET comment_id = excluded.comment_id, "
			  "head_sha = excluded.head_sha, updated_at = excluded.updated_at",
			  "silsl", repo, pr, comment_id, head_sha, (int64_t)now));
}

int ab_queue_kv_get(ab_queue *q, const char *key, char **out)
{
	sqlite3_stmt *st = NULL;
	int error;

	pthread_mutex_lock(&q->lock);
	if ((error = ab_queue_db_select_row(q, &st, "kv get", "SELECT value FROM kv WHERE key = ?", "s", key)) == 0) {
		char *value = col_text(st, 0);
		if (value)
			*out = value;
		else
			error = ab_error_set("out of memory");
		sqlite3_finalize(st);
	}
	pthread_mutex_unlock(&q->lock);
	return error;
}

int ab_queue_kv_set(ab_queue *q, const char *key, const char *value)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(
		q, ab_queue_db_run(q, NULL,
				   "INSERT INTO kv(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = "
				   "excluded.value",
				   "ss", key, value));
}

int ab_queue_stats(ab_queue *q, struct ab_queue_stats *out)
{
	sqlite3_stmt *st = NULL;
	struct ab_queue_stats s = { 0 };
	int rc, error = -1;

	pthread_mutex_lock(&q->lock);
	if (ab_queue_db_prep(q, &st, "SELECT state, COUNT(*) FROM jobs GROUP BY state", "") < 0)
		goto cleanup;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *state = (const char *)sqlite3_column_text(st, 0);
		int64_t n = sqlite3_column_int64(st, 1);
		if (!state)
			continue;
		if (!strcmp(state, "queued")) s.queued = n;
		else if (!strcmp(state, "running")) s.running = n;
		else if (!strcmp(state, "reporting")) s.reporting = n;
		else if (!strcmp(state, "done")) s.done = n;
		else if (!strcmp(state, "canceled")) s.canceled = n;
		else if (!strcmp(state, "superseded")) s.superseded = n;
	}
	if (rc != SQLITE_DONE) {
		ab_queue_db_error(q, "stats");
		goto cleanup;
	}
	if (ab_queue_db_select_i64(q, &s.commands_pending, "SELECT COUNT(*) FROM commands WHERE state = 'pending'", "") < 0 ||
	    ab_queue_db_select_i64(q, &s.deliveries, "SELECT COUNT(*) FROM deliveries", "") < 0)
		goto cleanup;
	*out = s;
	error = 0;
cleanup:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&q->lock);
	return error;
}

int ab_queue_prune(ab_queue *q, time_t before)
{
	if (ab_queue_db_begin(q) < 0)
		return -1;
	return ab_queue_db_end(q, ab_queue_db_run(q, NULL, "DELETE FROM deliveries WHERE received_at < ?", "l", (int64_t)before));
}

int ab_queue_pr_done_jobs(ab_queue *q, int64_t **out_ids, size_t *out_n, const char *repo, int pr)
{
	sqlite3_stmt *st = NULL;
	int64_t *ids = NULL;
	size_t n = 0, cap = 0;
	int rc, error = -1;

	pthread_mutex_lock(&q->lock);
	if (ab_queue_db_prep(q, &st, "SELECT id FROM jobs WHERE repo = ? AND pr = ? AND state = 'done' ORDER BY id",
			     "si", repo, pr) < 0)
		goto cleanup;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			int64_t *p = realloc(ids, (cap = cap ? cap * 2 : 16) * sizeof(*p));
			if (!p) {
				ab_error_set("out of memory");
				goto cleanup;
			}
			ids = p;
		}
		ids[n++] = sqlite3_column_int64(st, 0);
	}
	if (rc != SQLITE_DONE) {
		ab_queue_db_error(q, "step");
		goto cleanup;
	}
	*out_ids = ids;
	*out_n = n;
	ids = NULL;
	error = 0;
cleanup:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&q->lock);
	free(ids);
	return error;
}

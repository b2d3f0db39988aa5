/*
 * store_eval.c - the evaluations and samples tables of store.h: an evaluation row is inserted when
 * the run starts, filled in as its commits and suite are resolved, and finished with the verdict
 * and the result document; samples are added one at a time or many in one transaction, each with
 * its raw repetition values kept as a JSON array beside it. The SQL is in store.c's statement table.
 */
#define _GNU_SOURCE
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static const char *const status_names[] = { "running", "done", "canceled", "error" };

/* --- evaluations --------------------------------------------------------------------------------- */

static void bind_info(sqlite3_stmt *st, int first, const struct ab_store_eval_info *info)
{
	const char *fields[] = { info->trigger, info->repo, info->base_ref, info->base_sha, info->base_tree,
				 info->head_ref, info->head_sha, info->head_tree, info->suite_name, info->suite_sha256 };
	int i;

	for (i = 0; i < 10; i++)
		sqlite3_bind_text(st, first + i, fields[i], -1, SQLITE_TRANSIENT);   /* NULL binds NULL */
	if (info->has_seed)
		sqlite3_bind_int64(st, first + 10, (int64_t)info->seed);
}

int ab_store_eval_begin(int64_t *out_id, ab_store *store, const struct ab_store_eval_info *info)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_EVAL_INSERT);

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int64(st, 1, ab_store_now_ms());
	bind_info(st, 2, info);
	if (ab_store_step_done(store, st, "inserting an evaluation") < 0)
		return AB_ERROR;
	*out_id = sqlite3_last_insert_rowid(store->db);
	return 0;
}

int ab_store_eval_update(ab_store *store, int64_t id, const struct ab_store_eval_info *info)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_EVAL_UPDATE);

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int64(st, 1, id);
	bind_info(st, 2, info);
	if (ab_store_step_done(store, st, "updating an evaluation") < 0)
		return AB_ERROR;
	if (sqlite3_changes(store->db) == 0)
		return ab_error_setc(AB_ENOTFOUND, "store: no evaluation %lld", (long long)id);
	return 0;
}

int ab_store_eval_finish(ab_store *store, int64_t id, enum ab_store_status status, const char *label,
			 const char *reason, int exit_status, const char *result_json)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_EVAL_FINISH);

	if (!st)
		return AB_ERROR;
	if ((unsigned)status > AB_STORE_ERROR)
		return ab_error_setc(AB_EINVALID, "store: invalid evaluation status %d", (int)status);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, status_names[status], -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, label, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, exit_status);
	sqlite3_bind_text(st, 6, result_json, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 7, ab_store_now_ms());
	if (ab_store_step_done(store, st, "finishing an evaluation") < 0)
		return AB_ERROR;
	if (sqlite3_changes(store->db) == 0)
		return ab_error_setc(AB_ENOTFOUND, "store: no evaluation %lld", (long long)id);
	return 0;
}

/* Copies a text column; sets *oom on allocation failure. NULL for SQL NULL. */
static char *column_strdup(sqlite3_stmt *st, int col, int *oom)
{
	const char *text = (const char *)sqlite3_column_text(st, col);
	char *copy;

	if (!text)
		return NULL;
	if (!(copy = strdup(text)))
		*oom = 1;
	return copy;
}

static void eval_clear(struct ab_store_eval *e)
{
	char **strings[] = { &e->trigger, &e->repo, &e->base_ref, &e->base_sha, &e->base_tree, &e->head_ref,
			     &e->head_sha, &e->head_tree, &e->suite_name, &e->suite_sha256, &e->label, &e->reason,
			     &e->result_json };
	size_t i;

	for (i = 0; i < sizeof(strings) / sizeof(*strings); i++) {
		free(*strings[i]);
		*strings[i] = NULL;
	}
}

/* Fills `e` from a row of store.c's EVAL_COLUMNS (and result_json at column 18 when `with_result`). */
static int eval_from_row(struct ab_store_eval *e, sqlite3_stmt *st, int with_result)
{
	const char *status = (const char *)sqlite3_column_text(st, 3);
	int oom = 0, i;

	memset(e, 0, sizeof(*e));
	e->id = sqlite3_column_int64(st, 0);
	e->created_at_ms = sqlite3_column_int64(st, 1);
	e->finished_at_ms = sqlite3_column_int64(st, 2);
	for (i = 0; i < 4; i++)
		if (status && strcmp(status, status_names[i]) == 0)
			e->status = (enum ab_store_status)i;
	e->trigger = column_strdup(st, 4, &oom);
	e->repo = column_strdup(st, 5, &oom);
	e->base_ref = column_strdup(st, 6, &oom);
	e->base_sha = column_strdup(st, 7, &oom);
	e->base_tree = column_strdup(st, 8, &oom);
	e->head_ref = column_strdup(st, 9, &oom);
	e->head_sha = column_strdup(st, 10, &oom);
	e->head_tree = column_strdup(st, 11, &oom);
	e->suite_name = column_strdup(st, 12, &oom);
	e->suite_sha256 = column_strdup(st, 13, &oom);
	e->has_seed = sqlite3_column_type(st, 14) != SQLITE_NULL;
	e->seed = (uint64_t)sqlite3_column_int64(st, 14);
	e->label = column_strdup(st, 15, &oom);
	e->reason = column_strdup(st, 16, &oom);
	e->exit_status = sqlite3_column_type(st, 17) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 17);
	if (with_result)
		e->result_json = column_strdup(st, 18, &oom);
	if (oom) {
		eval_clear(e);
		return ab_error_set("store: out of memory");
	}
	return 0;
}

int ab_store_eval_get(struct ab_store_eval **out, ab_store *store, int64_t id)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_EVAL_GET);
	struct ab_store_eval *e = NULL;
	int rc, error = AB_ERROR;

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		error = ab_error_setc(AB_ENOTFOUND, "store: no evaluation %lld", (long long)id);
		goto cleanup;
	}
	if (rc != SQLITE_ROW) {
		ab_store_db_error(store, rc, "reading an evaluation");
		goto cleanup;
	}
	if (!(e = malloc(sizeof(*e)))) {
		ab_error_set("store: out of memory");
		goto cleanup;
	}
	if (eval_from_row(e, st, 1) < 0)
		goto cleanup;
	*out = e;
	e = NULL;
	error = 0;

cleanup:
	free(e);
	sqlite3_reset(st);
	return error;
}

void ab_store_eval_free(struct ab_store_eval *eval)
{
	if (!eval)
		return;
	eval_clear(eval);
	free(eval);
}

int ab_store_history(struct ab_store_eval **out_evals, size_t *out_count, ab_store *store, int limit)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_HISTORY);
	struct ab_store_eval *evals = NULL, *grown;
	size_t count = 0, capacity = 0;
	int rc, error = AB_ERROR;

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int(st, 1, limit > 0 ? limit : -1);   /* LIMIT -1: no limit */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (count == capacity) {
			capacity = capacity ? 2 * capacity : 16;
			if (!(grown = realloc(evals, capacity * sizeof(*evals)))) {
				ab_error_set("store: out of memory");
				goto cleanup;
			}
			evals = grown;
		}
		if (eval_from_row(&evals[count], st, 0) < 0)
			goto cleanup;
		count++;
	}
	if (rc != SQLITE_DONE) {
		ab_store_db_error(store, rc, "listing evaluations");
		goto cleanup;
	}
	*out_evals = count ? evals : NULL;
	*out_count = count;
	if (!count)
		free(evals);
	evals = NULL;
	count = 0;
	error = 0;

cleanup:
	ab_store_evals_free(evals, count);
	sqlite3_reset(st);
	return error;
}

void ab_store_evals_free(struct ab_store_eval *evals, size_t count)
{
	size_t i;

	if (!evals)
		return;
	for (i = 0; i < count; i++)
		eval_clear(&evals[i]);
	free(evals);
}

/* --- samples ------------------------------------------------------------------------------------- */

static int insert_sample(ab_store *store, int64_t eval_id, const struct ab_sample *s)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_SAMPLE_INSERT);

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int64(st, 1, eval_id);
	sqlite3_bind_int(st, 2, s->side);
	sqlite3_bind_int(st, 3, s->pair);
	sqlite3_bind_int(st, 4, s->order);
	sqlite3_bind_int(st, 5, s->batch);
	sqlite3_bind_text(st, 6, s->model, (int)strnlen(s->model, sizeof(s->model)), SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 7, s->metric, (int)strnlen(s->metric, sizeof(s->metric)), SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 8, s->ctx);
	if (isfinite(s->value))
		sqlite3_bind_double(st, 9, s->value);
	sqlite3_bind_int(st, 10, s->ok);
	if (s->reason[0])
		sqlite3_bind_text(st, 11, s->reason, (int)strnlen(s->reason, sizeof(s->reason)), SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 12, s->t_start_ns);
	sqlite3_bind_int64(st, 13, s->t_end_ns);
	int reps = s->reps > 0 && s->reps <= AB_SAMPLE_REPS_MAX ? s->reps : 0;
	char values[AB_SAMPLE_REPS_MAX * 32 + 4];
	size_t len = 0;
	values[len++] = '[';
	for (int r = 0; r < reps; r++) {
		if (isfinite(s->rep_values[r]))
			len += (size_t)snprintf(values + len, sizeof(values) - len, "%s%.17g", r ? "," : "", s->rep_values[r]);
		else
			len += (size_t)snprintf(values + len, sizeof(values) - len, "%snull", r ? "," : "");
	}
	snprintf(values + len, sizeof(values) - len, "]");
	sqlite3_bind_int(st, 14, reps);
	if (reps > 0)
		sqlite3_bind_text(st, 15, values, -1, SQLITE_TRANSIENT);
	if (isfinite(s->harness_ms))
		sqlite3_bind_double(st, 16, s->harness_ms);
	if (isfinite(s->engine_ms))
		sqlite3_bind_double(st, 17, s->engine_ms);
	sqlite3_bind_double(st, 18, isfinite(s->deferred_ms) ? s->deferred_ms : 0);
	if (s->stats[0])
		sqlite3_bind_text(st, 19, s->stats, (int)strnlen(s->stats, sizeof(s->stats)), SQLITE_TRANSIENT);
	return ab_store_step_done(store, st, "inserting a sample");
}

int ab_store_sample_add(ab_store *store, int64_t eval_id, const struct ab_sample *sample)
{
	return insert_sample(store, eval_id, sample);
}

int ab_store_samples_add(ab_store *store, int64_t eval_id, const struct ab_sample *samples, size_t count)
{
	size_t i;

	if (ab_store_run_simple(store, ST_BEGIN, "begin") < 0)
		return AB_ERROR;
	for (i = 0; i < count; i++)
		if (insert_sample(store, eval_id, &samples[i]) < 0) {
			ab_store_run_simple(store, ST_ROLLBACK, "rollback");   /* keeps the first error: it is the cause */
			return AB_ERROR;
		}
	return ab_store_run_simple(store, ST_COMMIT, "commit");
}

static void copy_text(char *dst, size_t size, const unsigned char *src)
{
	snprintf(dst, size, "%s", src ? (const char *)src : "");
}

/* The raw values of a stored sample: "[v, null, ...]" as written above; anything else leaves NAN. */
static void rep_values_parse(struct ab_sample *s, const unsigned char *text)
{
	const char *p = text ? (const char *)text : "";
	for (int r = 0; r < AB_SAMPLE_REPS_MAX; r++)
		s->rep_values[r] = NAN;
	if (*p++ != '[')
		return;
	for (int r = 0; r < s->reps && *p; r++) {
		char *end;
		if (strncmp(p, "null", 4) == 0) {
			end = (char *)p + 4;
		} else {
			s->rep_values[r] = strtod(p, &end);
			if (end == p)
				return;
		}
		p = end;
		if (*p == ',')
			p++;
	}
}

int ab_store_samples_get(struct ab_sample **out_samples, size_t *out_count, ab_store *store, int64_t eval_id)
{
	sqlite3_stmt *st = ab_store_statement(store, ST_SAMPLES_GET);
	struct ab_sample *samples = NULL, *grown, *s;
	size_t count = 0, capacity = 0;
	int rc, error = AB_ERROR;

	if (!st)
		return AB_ERROR;
	sqlite3_bind_int64(st, 1, eval_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (count == capacity) {
			capacity = capacity ? 2 * capacity : 64;
			if (!(grown = realloc(samples, capacity * sizeof(*samples)))) {
				ab_error_set("store: out of memory");
				goto cleanup;
			}
			samples = grown;
		}
		s = &samples[count++];
		memset(s, 0, sizeof(*s));
		s->side = sqlite3_column_int(st, 0);
		s->pair = sqlite3_column_int(st, 1);
		s->order = sqlite3_column_int(st, 2);
		s->batch = sqlite3_column_int(st, 3);
		copy_text(s->model, sizeof(s->model), sqlite3_column_text(st, 4));
		copy_text(s->metric, sizeof(s->metric), sqlite3_column_text(st, 5));
		s->ctx = sqlite3_column_int(st, 6);
		s->value = sqlite3_column_type(st, 7) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 7);
		s->ok = sqlite3_column_int(st, 8);
		copy_text(s->reason, sizeof(s->reason), sqlite3_column_text(st, 9));
		s->t_start_ns = sqlite3_column_int64(st, 10);
		s->t_end_ns = sqlite3_column_int64(st, 11);
		s->reps = sqlite3_column_int(st, 12);
		if (s->reps < 0 || s->reps > AB_SAMPLE_REPS_MAX)
			s->reps = 0;
		rep_values_parse(s, sqlite3_column_text(st, 13));
		s->harness_ms = sqlite3_column_type(st, 14) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 14);
		s->engine_ms = sqlite3_column_type(st, 15) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 15);
		s->deferred_ms = sqlite3_column_double(st, 16);
		copy_text(s->stats, sizeof(s->stats), sqlite3_column_text(st, 17));
	}
	if (rc != SQLITE_DONE) {
		ab_store_db_error(store, rc, "reading samples");
		goto cleanup;
	}
	*out_samples = count ? samples : NULL;
	*out_count = count;
	if (!count)
		free(samples);
	samples = NULL;
	error = 0;

cleanup:
	free(samples);
	sqlite3_reset(st);
	return error;
}

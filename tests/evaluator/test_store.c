/*
 * test_store.c - the SQLite store: an evaluation with its samples survives a round trip and a
 * reopen, history is newest first, the cache stores binary values, the file is in WAL mode, two
 * handles, two threads and two processes write one file at once, and a file from a newer schema
 * is refused. Everything happens in a temp state directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"

static char state_dir[256];

static struct ab_sample make_sample(int i)
{
	struct ab_sample s;

	memset(&s, 0, sizeof(s));
	s.side = i % 2;
	s.pair = i / 2;
	s.order = (i / 2) % 2 ^ (i % 2);
	s.batch = i >= 8;
	snprintf(s.model, sizeof(s.model), "tiny");
	snprintf(s.metric, sizeof(s.metric), i % 3 ? "decode_tps" : "prefill_tps");
	s.ctx = 64 << (i % 3);
	s.ok = i != 5;
	s.value = s.ok ? 100.0 + i * 0.25 : NAN;
	if (!s.ok)
		snprintf(s.reason, sizeof(s.reason), "crashed: signal 11");
	s.t_start_ns = 1000000000LL * i + 17;
	s.t_end_ns = s.t_start_ns + 123456789LL;
	s.reps = i % 4;                 /* 0: a sample of the single-request design */
	for (int r = 0; r < AB_SAMPLE_REPS_MAX; r++)
		s.rep_values[r] = r < s.reps ? (r == 1 && i == 7 ? NAN : 99.5 + r + i * 0.125) : NAN;
	s.harness_ms = i % 2 ? 12.5 + i : NAN;
	s.engine_ms = i % 3 ? 11.25 + i : NAN;
	s.deferred_ms = i == 4 ? 3.5 : 0;
	if (i % 2)
		snprintf(s.stats, sizeof(s.stats), "{\"prefill_ms\":%d.5}", i);
	return s;
}

static int same_double(double a, double b)
{
	return isnan(a) ? isnan(b) : a == b;
}

static int same_sample(const struct ab_sample *a, const struct ab_sample *b)
{
	return a->side == b->side && a->pair == b->pair && a->order == b->order && a->batch == b->batch &&
	       strcmp(a->model, b->model) == 0 && strcmp(a->metric, b->metric) == 0 && a->ctx == b->ctx &&
	       a->ok == b->ok && (a->ok ? a->value == b->value : isnan(b->value)) && strcmp(a->reason, b->reason) == 0 &&
	       a->t_start_ns == b->t_start_ns && a->t_end_ns == b->t_end_ns && a->reps == b->reps &&
	       same_double(a->rep_values[0], b->rep_values[0]) && same_double(a->rep_values[1], b->rep_values[1]) &&
	       same_double(a->rep_values[2], b->rep_values[2]) && same_double(a->rep_values[3], b->rep_values[3]) &&
	       same_double(a->harness_ms, b->harness_ms) && same_double(a->engine_ms, b->engine_ms) &&
	       a->deferred_ms == b->deferred_ms && strcmp(a->stats, b->stats) == 0;
}

static int64_t round_trip(void)
{
	ab_store *store = NULL;
	struct ab_store_eval_info begin = { .trigger = "cli", .repo = "/tmp/repo", .base_ref = "main", .head_ref = "pr" };
	struct ab_store_eval_info resolved = { .base_sha = "aaaa", .base_tree = "bbbb", .head_sha = "cccc",
					       .head_tree = "dddd", .suite_name = "cpu", .suite_sha256 = "eeee",
					       .has_seed = 1, .seed = 0xfedcba9876543210ULL };
	struct ab_sample samples[12], *got = NULL;
	struct ab_store_eval *e = NULL;
	size_t count = 0, i;
	int64_t id = 0;

	CHECK(ab_store_open(&store, state_dir) == 0);
	if (!store)
		return 0;
	CHECK(ab_store_eval_begin(&id, store, &begin) == 0 && id > 0);
	CHECK(ab_store_eval_get(&e, store, id) == 0);
	if (e) {
		CHECK(e->status == AB_STORE_RUNNING && e->exit_status == -1 && e->finished_at_ms == 0);
		CHECK(e->created_at_ms > 1600000000000LL && !e->has_seed && e->base_sha == NULL);
		ab_store_eval_free(e);
		e = NULL;
	}
	CHECK(ab_store_eval_update(store, id, &resolved) == 0);
	for (i = 0; i < 12; i++)
		samples[i] = make_sample((int)i);
	CHECK(ab_store_sample_add(store, id, &samples[0]) == 0);
	CHECK(ab_store_samples_add(store, id, samples + 1, 11) == 0);
	CHECK(ab_store_eval_finish(store, id, AB_STORE_DONE, "eval:none", "no verified gain", 0,
				   "{\"schema\":\"abgate.result/1\"}") == 0);

	CHECK(ab_store_eval_get(&e, store, id) == 0);
	if (e) {
		CHECK(e->id == id && e->status == AB_STORE_DONE && e->exit_status == 0);
		CHECK(e->finished_at_ms >= e->created_at_ms);
		CHECK(strcmp(e->trigger, "cli") == 0 && strcmp(e->repo, "/tmp/repo") == 0);
		CHECK(strcmp(e->base_ref, "main") == 0 && strcmp(e->base_sha, "aaaa") == 0 && strcmp(e->base_tree, "bbbb") == 0);
		CHECK(strcmp(e->head_ref, "pr") == 0 && strcmp(e->head_sha, "cccc") == 0 && strcmp(e->head_tree, "dddd") == 0);
		CHECK(strcmp(e->suite_name, "cpu") == 0 && strcmp(e->suite_sha256, "eeee") == 0);
		CHECK(e->has_seed && e->seed == 0xfedcba9876543210ULL);   /* all 64 bits survive */
		CHECK(strcmp(e->label, "eval:none") == 0 && strcmp(e->reason, "no verified gain") == 0);
		CHECK(e->result_json && strcmp(e->result_json, "{\"schema\":\"abgate.result/1\"}") == 0);
		ab_store_eval_free(e);
	}
	CHECK(ab_store_samples_get(&got, &count, store, id) == 0 && count == 12);
	for (i = 0; got && i < count; i++)
		CHECK(same_sample(&samples[i], &got[i]));
	free(got);
	got = NULL;
	CHECK(ab_store_samples_get(&got, &count, store, id + 1000) == 0 && count == 0 && got == NULL);

	/* errors: unknown ids, a sample for an evaluation that does not exist */
	CHECK(ab_store_eval_get(&e, store, id + 1000) == AB_ENOTFOUND);
	CHECK(ab_store_eval_finish(store, id + 1000, AB_STORE_DONE, NULL, NULL, 0, NULL) == AB_ENOTFOUND);
	CHECK(ab_store_eval_update(store, id + 1000, &resolved) == AB_ENOTFOUND);
	CHECK(ab_store_samples_add(store, id + 1000, samples, 3) < 0 && strstr(ab_error_last(), "FOREIGN KEY"));
	CHECK(ab_store_samples_get(&got, &count, store, id + 1000) == 0 && count == 0);

	/* calibrations: none yet, then the latest of a suite */
	char *json = NULL;
	int64_t cid = 0, latest = 0;
	CHECK(ab_store_calibration_latest(&json, &latest, store, "cpu") == AB_ENOTFOUND);
	struct ab_store_calibration cal = { .repo = "/tmp/repo", .ref = "main", .sha = "aaaa", .suite_name = "cpu",
					    .runs = 10, .false_positives = 0, .fpr_upper = 0.259, .result_json = "{\"n\":1}" };
	CHECK(ab_store_calibration_add(&cid, store, &cal) == 0 && cid > 0);
	cal.result_json = "{\"n\":2}";
	CHECK(ab_store_calibration_add(&cid, store, &cal) == 0);
	cal.suite_name = "gpu";
	cal.result_json = "{\"n\":3}";
	CHECK(ab_store_calibration_add(NULL, store, &cal) == 0);
	CHECK(ab_store_calibration_latest(&json, &latest, store, "cpu") == 0 && latest == cid);
	CHECK(json && strcmp(json, "{\"n\":2}") == 0);
	free(json);
	cal.result_json = NULL;
	CHECK(ab_store_calibration_add(NULL, store, &cal) == AB_EINVALID);
	ab_store_close(store);
	return id;
}

static void history_and_cache(int64_t first_id)
{
	ab_store *store = NULL;
	struct ab_store_eval_info info = { .trigger = "test" };
	struct ab_store_eval *evals = NULL;
	int64_t ids[3];
	size_t count = 0;
	void *value = NULL;
	size_t len = 0;
	static const unsigned char blob[] = { 0, 1, 2, 0, 255, 'x' };
	int i;

	CHECK(ab_store_open(&store, state_dir) == 0);   /* a reopen: the first evaluation is still there */
	if (!store)
		return;
	for (i = 0; i < 3; i++)
		CHECK(ab_store_eval_begin(&ids[i], store, &info) == 0);
	CHECK(ab_store_eval_finish(store, ids[1], AB_STORE_ERROR, NULL, "suite: bad", 2, NULL) == 0);
	CHECK(ab_store_history(&evals, &count, store, 2) == 0 && count == 2);
	if (evals && count == 2) {
		CHECK(evals[0].id == ids[2] && evals[1].id == ids[1]);
		CHECK(evals[1].status == AB_STORE_ERROR && evals[1].exit_status == 2 && evals[1].result_json == NULL);
		CHECK(evals[0].status == AB_STORE_RUNNING);
	}
	ab_store_evals_free(evals, count);
	CHECK(ab_store_history(&evals, &count, store, 0) == 0 && count == 4);
	if (evals && count == 4)
		CHECK(evals[3].id == first_id && strcmp(evals[3].label, "eval:none") == 0);
	ab_store_evals_free(evals, count);

	CHECK(ab_store_cache_get(&value, &len, store, "ref:abc") == AB_ENOTFOUND && value == NULL);
	CHECK(ab_store_cache_put(store, "ref:abc", blob, sizeof(blob)) == 0);
	CHECK(ab_store_cache_get(&value, &len, store, "ref:abc") == 0 && len == sizeof(blob));
	CHECK(value && memcmp(value, blob, sizeof(blob)) == 0 && ((char *)value)[len] == '\0');
	free(value);
	value = NULL;
	CHECK(ab_store_cache_put(store, "ref:abc", "{\"replaced\":true}", 17) == 0);
	CHECK(ab_store_cache_get(&value, &len, store, "ref:abc") == 0 && len == 17);
	CHECK(value && strcmp(value, "{\"replaced\":true}") == 0);
	free(value);
	value = NULL;
	CHECK(ab_store_cache_put(store, "empty", NULL, 0) == 0);
	CHECK(ab_store_cache_get(&value, &len, store, "empty") == 0 && len == 0);
	free(value);
	ab_store_close(store);
}

static void wal_mode(void)
{
	char path[512];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	snprintf(path, sizeof(path), "%s/abgate.db", state_dir);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

#define WRITER_EVALS 40
#define WRITER_SAMPLES 8

/* One writer: its own handle, evaluations with batches of samples, while another writes too. */
static void *writer(void *arg)
{
	ab_store *store = NULL;
	struct ab_store_eval_info info = { .trigger = arg };
	struct ab_sample samples[WRITER_SAMPLES];
	struct ab_store_eval *evals = NULL;
	size_t count = 0;
	int64_t id;
	int i, errors = 0;

	for (i = 0; i < WRITER_SAMPLES; i++)
		samples[i] = make_sample(i);
	if (ab_store_open(&store, state_dir) < 0)
		return (void *)1;
	for (i = 0; i < WRITER_EVALS && !errors; i++) {
		errors += ab_store_eval_begin(&id, store, &info) < 0;
		errors += !errors && ab_store_samples_add(store, id, samples, WRITER_SAMPLES) < 0;
		errors += !errors && ab_store_eval_finish(store, id, AB_STORE_DONE, "eval:none", NULL, 0, "{}") < 0;
		errors += !errors && ab_store_history(&evals, &count, store, 5) < 0;   /* reads interleave too */
		ab_store_evals_free(evals, count);
		evals = NULL;
	}
	if (errors)
		fprintf(stderr, "writer %s: %s\n", (const char *)arg, ab_error_last());
	ab_store_close(store);
	return (void *)(intptr_t)errors;
}

static int count_rows(const char *sql)
{
	char path[512];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int n = -1;

	snprintf(path, sizeof(path), "%s/abgate.db", state_dir);
	if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void concurrency(void)
{
	ab_store *a = NULL, *b = NULL;
	struct ab_store_eval_info info = { .trigger = "handle-a" };
	struct ab_store_eval *e = NULL;
	pthread_t t1, t2;
	void *r1 = (void *)1, *r2 = (void *)1;
	int64_t id = 0;
	pid_t child;
	int status = -1;

	/* two handles in one thread: what one writes, the other reads at once */
	CHECK(ab_store_open(&a, state_dir) == 0 && ab_store_open(&b, state_dir) == 0);
	if (a && b) {
		CHECK(ab_store_eval_begin(&id, a, &info) == 0);
		CHECK(ab_store_eval_get(&e, b, id) == 0 && e && strcmp(e->trigger, "handle-a") == 0);
		ab_store_eval_free(e);
		CHECK(ab_store_eval_finish(b, id, AB_STORE_CANCELED, NULL, NULL, 4, NULL) == 0);
	}
	ab_store_close(a);
	ab_store_close(b);

	/* two processes (a service worker and a CLI), then two threads, each with its own handle */
	child = fork();
	if (child == 0)
		_exit(writer("process-child") != NULL);
	CHECK(writer("process-parent") == NULL);
	CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(pthread_create(&t1, NULL, writer, "thread-1") == 0);
	CHECK(pthread_create(&t2, NULL, writer, "thread-2") == 0);
	pthread_join(t1, &r1);
	pthread_join(t2, &r2);
	CHECK(r1 == NULL && r2 == NULL);
	CHECK(count_rows("SELECT count(*) FROM evaluations WHERE \"trigger\" LIKE 'process-%' OR \"trigger\" LIKE 'thread-%'")
	      == 4 * WRITER_EVALS);
	CHECK(count_rows("SELECT count(*) FROM samples JOIN evaluations ON eval_id = id WHERE \"trigger\" LIKE 'thread-%'")
	      == 2 * WRITER_EVALS * WRITER_SAMPLES);
}

/* Two processes opening one fresh file at once: it is created and migrated exactly once. */
static void fresh_file_race(void)
{
	char dir[512];
	struct ab_store_eval_info info = { .trigger = "race" };
	ab_store *store = NULL;
	struct ab_store_eval *evals = NULL;
	size_t count = 0;
	int64_t id;
	pid_t child;
	int status = -1;

	snprintf(dir, sizeof(dir), "%s/race", tu_tmpdir());
	child = fork();
	if (child == 0) {
		int ok = ab_store_open(&store, dir) == 0 && ab_store_eval_begin(&id, store, &info) == 0;
		ab_store_close(store);
		_exit(!ok);
	}
	CHECK(ab_store_open(&store, dir) == 0 && ab_store_eval_begin(&id, store, &info) == 0);
	CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(store && ab_store_history(&evals, &count, store, 0) == 0 && count == 2);
	ab_store_evals_free(evals, count);
	ab_store_close(store);
}

static void newer_schema_refused(void)
{
	char path[512];
	sqlite3 *db = NULL;
	ab_store *store = NULL;

	snprintf(path, sizeof(path), "%s/abgate.db", state_dir);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, "UPDATE schema_version SET version = 99", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	CHECK(ab_store_open(&store, state_dir) == AB_EINVALID && store == NULL);
	CHECK(strstr(ab_error_last(), "schema version 99 is newer") != NULL);
	/* a state "directory" that is a file */
	CHECK(ab_store_open(&store, path) < 0 && store == NULL);
}

/* The steps share one state directory, each starting from what the previous ones left. */
int main(void)
{
	snprintf(state_dir, sizeof(state_dir), "%s/nested/state", tu_tmpdir());   /* created by ab_store_open */
	int64_t first_id = round_trip();
	history_and_cache(first_id);
	wal_mode();
	concurrency();
	fresh_file_race();
	newer_schema_refused();
	printf("test_store: ok\n");
	return 0;
}

/*
 * test_queue.c - the durable job queue: one job per (repo, PR, head), supersede and close, leases
 * and their recovery (including a "crash": the database closed with a job running and reopened),
 * attempt limits, the reporting state with deferred retries, delivery dedupe, commands, the sticky
 * comment record.
 */
#include "testutil.h"

#include "queue.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define SHA_C "cccccccccccccccccccccccccccccccccccccccc"

static ab_queue *open_fresh(const char *name)
{
	ab_queue *q = NULL;
	CHECK(ab_queue_open(&q, tu_path(name)) == 0);
	return q;
}

static struct ab_intent enq(int pr, const char *sha)
{
	struct ab_intent in = { .kind = AB_INTENT_ENQUEUE, .repo = "o/r", .pr = pr, .head_sha = sha,
				.base_ref = "main", .trigger = "test" };
	return in;
}

static const char *state_of(ab_queue *q, int64_t id)
{
	static char buf[32];
	struct ab_job *j = NULL;
	CHECK(ab_queue_job_get(q, &j, id) == 0);
	snprintf(buf, sizeof(buf), "%s", j->state);
	ab_job_free(j);
	return buf;
}

static void dedupe(void)
{
	ab_queue *q = open_fresh("dedupe.db");
	enum ab_ingest_result res;
	int64_t id1 = 0, id2 = 0;
	struct ab_intent in = enq(7, SHA_A);

	CHECK(ab_queue_ingest(q, &res, &id1, "d-1", "pull_request", &in, 100) == 0);
	CHECK_EQ(res, AB_INGEST_ENQUEUED);
	CHECK(id1 > 0);
	for (int i = 0; i < 20; i++) {
		CHECK(ab_queue_ingest(q, &res, &id2, "d-1", "pull_request", &in, 101) == 0);
		CHECK_EQ(res, AB_INGEST_DUPLICATE);
	}
	CHECK(ab_queue_ingest(q, &res, &id2, "d-2", "pull_request", &in, 102) == 0);
	CHECK_EQ(res, AB_INGEST_EXISTS);
	CHECK_EQ(id2, id1);
	struct ab_queue_stats s;
	CHECK(ab_queue_stats(q, &s) == 0);
	CHECK_EQ(s.queued, 1);
	CHECK_EQ(s.deliveries, 2);
	/* Pruning forgets old deliveries only. */
	CHECK(ab_queue_prune(q, 102) == 0);
	CHECK(ab_queue_stats(q, &s) == 0);
	CHECK_EQ(s.deliveries, 1);
	ab_queue_free(q);
}

static void supersede(void)
{
	ab_queue *q = open_fresh("supersede.db");
	enum ab_ingest_result res;
	int64_t a = 0, b = 0, c = 0;
	struct ab_intent ia = enq(7, SHA_A), ib = enq(7, SHA_B), ic = enq(7, SHA_C), other = enq(8, SHA_A);
	struct ab_job *job = NULL;

	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 100) == 0);
	CHECK(ab_queue_enqueue(q, &res, NULL, &other, 100) == 0);
	CHECK(ab_queue_enqueue(q, &res, &b, &ib, 101) == 0);
	CHECK_EQ(res, AB_INGEST_ENQUEUED);
	CHECK_STR(state_of(q, a), "superseded");
	CHECK_STR(state_of(q, b), "queued");
	/* B runs; a push of C asks B to stop and queues C. PR 8 is untouched. */
	CHECK(ab_queue_claim(q, &job, "w0", 30, 102) == 0);
	CHECK_EQ(job->pr, 8);  /* oldest first */
	ab_job_free(job);
	CHECK(ab_queue_claim(q, &job, "w1", 30, 102) == 0);
	CHECK_EQ(job->id, b);
	CHECK_EQ(job->attempts, 1);
	ab_job_free(job);
	CHECK(!ab_queue_cancel_requested(q, b));
	CHECK(ab_queue_enqueue(q, &res, &c, &ic, 103) == 0);
	CHECK(ab_queue_cancel_requested(q, b));
	int cancel = 0;
	CHECK(ab_queue_heartbeat(q, b, "w1", 30, 104, &cancel) == 0);
	CHECK_EQ(cancel, 1);
	/* The canceled run never posted a check run: it ends without reporting. */
	CHECK(ab_queue_finish_eval(q, b, "w1", "superseded", 4, 0, NULL, NULL, 105) == 0);
	CHECK_STR(state_of(q, b), "superseded");
	/* Back to head A (force-push): evaluated again, as a new round. */
	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 106) == 0);
	CHECK_EQ(res, AB_INGEST_ENQUEUED);
	CHECK_STR(state_of(q, c), "superseded");
	ab_queue_free(q);
}

static void close_pr(void)
{
	ab_queue *q = open_fresh("close.db");
	enum ab_ingest_result res;
	int64_t a = 0, b = 0;
	struct ab_intent ia = enq(7, SHA_A), ib = enq(9, SHA_B);
	struct ab_intent close7 = { .kind = AB_INTENT_CLOSE, .repo = "o/r", .pr = 7 };
	struct ab_intent close9 = { .kind = AB_INTENT_CLOSE, .repo = "o/r", .pr = 9 };
	struct ab_job *job = NULL;

	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 100) == 0);
	CHECK(ab_queue_enqueue(q, &res, &b, &ib, 100) == 0);
	CHECK(ab_queue_claim(q, &job, "w0", 30, 101) == 0);
	CHECK_EQ(job->id, a);
	CHECK(ab_queue_set_check(q, a, 555, "check") == 0);
	ab_job_free(job);
	CHECK(ab_queue_ingest(q, &res, NULL, "c-1", "pull_request", &close7, 102) == 0);
	CHECK_EQ(res, AB_INGEST_CANCELED);
	CHECK(ab_queue_cancel_requested(q, a));
	CHECK(ab_queue_ingest(q, &res, NULL, "c-2", "pull_request", &close9, 102) == 0);
	CHECK_STR(state_of(q, b), "canceled");
	/* The running one had a check run: it goes through reporting to close it as cancelled. */
	CHECK(ab_queue_finish_eval(q, a, "w0", "canceled", 4, 0, NULL, NULL, 103) == 0);
	CHECK_STR(state_of(q, a), "reporting");
	CHECK(ab_queue_report_finish(q, a, 104) == 0);
	CHECK_STR(state_of(q, a), "canceled");
	/* Reopened: evaluated again. */
	CHECK(ab_queue_enqueue(q, &res, NULL, &ia, 105) == 0);
	CHECK_EQ(res, AB_INGEST_ENQUEUED);
	ab_queue_free(q);
}

static void leases(void)
{
	ab_queue *q = open_fresh("leases.db");
	enum ab_ingest_result res;
	int64_t a = 0;
	struct ab_intent ia = enq(7, SHA_A);
	struct ab_job *job = NULL;
	int n = 0;

	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 100) == 0);
	CHECK(ab_queue_claim(q, &job, "w0", 10, 100) == 0);
	ab_job_free(job);
	CHECK(ab_queue_claim(q, &job, "w1", 10, 100) == AB_ENOTFOUND);
	CHECK(ab_queue_heartbeat(q, a, "w0", 10, 105, NULL) == 0);   /* lease now until 115 */
	CHECK(ab_queue_heartbeat(q, a, "w9", 10, 105, NULL) == AB_ECANCELED);
	CHECK(ab_queue_recover(q, 112, 3, 0, &n) == 0);
	CHECK_EQ(n, 0);
	CHECK(ab_queue_recover(q, 116, 3, 0, &n) == 0);              /* w0 died */
	CHECK_EQ(n, 1);
	CHECK_STR(state_of(q, a), "queued");
	CHECK(ab_queue_heartbeat(q, a, "w0", 10, 117, NULL) == AB_ECANCELED);
	CHECK(ab_queue_claim(q, &job, "w1", 10, 120) == 0);
	CHECK_EQ(job->attempts, 2);
	ab_job_free(job);
	/* Graceful shutdown gives the job back without counting the attempt. */
	CHECK(ab_queue_release(q, a, "w1") == 0);
	CHECK_STR(state_of(q, a), "queued");
	CHECK(ab_queue_claim(q, &job, "w1", 10, 121) == 0);
	CHECK_EQ(job->attempts, 2);
	ab_job_free(job);
	CHECK(ab_queue_claim(q, &job, "w1", 10, 1000) == AB_ENOTFOUND);
	CHECK(ab_queue_recover(q, 1000, 3, 0, &n) == 0);
	CHECK(ab_queue_claim(q, &job, "w1", 10, 1001) == 0);
	CHECK_EQ(job->attempts, 3);
	ab_job_free(job);
	/* Third worker death: out of attempts, reported as an infra error instead of looping. */
	CHECK(ab_queue_recover(q, 2000, 3, 0, &n) == 0);
	CHECK_STR(state_of(q, a), "reporting");
	CHECK(ab_queue_job_get(q, &job, a) == 0);
	CHECK_STR(job->outcome, "exhausted");
	ab_job_free(job);
	ab_queue_free(q);
}

static void crash_restart(void)
{
	enum ab_ingest_result res;
	int64_t a = 0;
	struct ab_intent ia = enq(7, SHA_A);
	struct ab_job *job = NULL;
	int n = 0;
	ab_queue *q = open_fresh("crash.db");

	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 100) == 0);
	CHECK(ab_queue_claim(q, &job, "old:w0", 600, 100) == 0);
	ab_job_free(job);
	CHECK(ab_queue_set_check(q, a, 4242, "check") == 0);
	ab_queue_free(q);  /* the process is gone; its lease would run for ten more minutes */

	q = open_fresh("crash.db");
	CHECK(ab_queue_recover(q, 101, 3, 1, &n) == 0);  /* the only instance starts: everything is stale */
	CHECK_EQ(n, 1);
	CHECK(ab_queue_claim(q, &job, "new:w0", 600, 102) == 0);
	CHECK_EQ(job->id, a);
	CHECK_EQ(job->attempts, 2);
	CHECK_EQ(job->check_run_id, 4242);                 /* the check run is reused, not duplicated */
	ab_job_free(job);
	ab_queue_free(q);
}

static void reporting(void)
{
	ab_queue *q = open_fresh("report.db");
	enum ab_ingest_result res;
	int64_t a = 0, id = 0;
	struct ab_intent ia = enq(7, SHA_A);
	struct ab_job *job = NULL;

	CHECK(ab_queue_enqueue(q, &res, &a, &ia, 100) == 0);
	CHECK(ab_queue_claim(q, &job, "w0", 30, 100) == 0);
	ab_job_free(job);
	CHECK(ab_queue_finish_eval(q, a, "w0", "pass", 0, 12, "{\"schema\":\"abgate.result/1\"}", "a note", 110) == 0);
	CHECK(ab_queue_finish_eval(q, a, "w0", "pass", 0, 12, NULL, NULL, 110) == AB_ECANCELED);  /* only once */
	CHECK(ab_queue_report_mark(q, a, AB_REPORT_CHECK) == 0);
	CHECK(ab_queue_report_defer(q, a, "502", 200) == 0);
	CHECK(ab_queue_claim_report(q, &job, "d", 30, 150) == AB_ENOTFOUND);  /* not due yet */
	CHECK(ab_queue_claim_report(q, &job, "d", 30, 200) == 0);
	CHECK_EQ(job->report_done, AB_REPORT_CHECK);
	CHECK_EQ(job->report_attempts, 1);
	CHECK_EQ(job->eval_id, 12);
	CHECK_STR_HAS(job->result, "abgate.result/1");
	CHECK_STR(job->note, "a note");
	ab_job_free(job);
	CHECK(ab_queue_claim_report(q, &job, "d2", 30, 201) == AB_ENOTFOUND);  /* leased */
	CHECK(ab_queue_report_mark(q, a, AB_REPORT_COMMENT | AB_REPORT_LABELS) == 0);
	CHECK(ab_queue_report_finish(q, a, 202) == 0);
	CHECK_STR(state_of(q, a), "done");
	/* A finished head is not evaluated again unless asked to rerun. */
	CHECK(ab_queue_enqueue(q, &res, &id, &ia, 203) == 0);
	CHECK_EQ(res, AB_INGEST_EXISTS);
	ia.rerun = 1;
	CHECK(ab_queue_enqueue(q, &res, &id, &ia, 204) == 0);
	CHECK_EQ(res, AB_INGEST_ENQUEUED);
	CHECK(ab_queue_job_get(q, &job, id) == 0);
	CHECK_EQ(job->round, 1);
	ab_job_free(job);
	ab_queue_free(q);
}

static void commands(void)
{
	ab_queue *q = open_fresh("cmd.db");
	enum ab_ingest_result res;
	struct ab_command *c = NULL;
	struct ab_intent cmd = { .kind = AB_INTENT_COMMAND, .repo = "o/r", .pr = 7, .user = "alice",
				 .comment_id = 9876543210LL, .rerun = 1 };

	CHECK(ab_queue_ingest(q, &res, NULL, "k-1", "issue_comment", &cmd, 100) == 0);
	CHECK_EQ(res, AB_INGEST_COMMAND);
	CHECK(ab_queue_ingest(q, &res, NULL, "k-1", "issue_comment", &cmd, 100) == 0);
	CHECK_EQ(res, AB_INGEST_DUPLICATE);
	CHECK(ab_queue_command_next(q, &c, 100) == 0);
	CHECK_STR(c->user, "alice");
	CHECK_EQ(c->comment_id, 9876543210LL);
	CHECK_EQ(c->rerun, 1);
	CHECK(ab_queue_command_defer(q, c->id, "503", 160) == 0);
	int64_t id = c->id;
	ab_command_free(c);
	CHECK(ab_queue_command_next(q, &c, 120) == AB_ENOTFOUND);
	CHECK(ab_queue_command_next(q, &c, 160) == 0);
	CHECK_EQ(c->attempts, 1);
	ab_command_free(c);
	CHECK(ab_queue_command_done(q, id, "denied") == 0);
	CHECK(ab_queue_command_next(q, &c, 1000) == AB_ENOTFOUND);

	int64_t comment = 0;
	char *v = NULL;
	CHECK(ab_queue_sticky_get(q, "o/r", 7, &comment) == AB_ENOTFOUND);
	CHECK(ab_queue_sticky_set(q, "o/r", 7, 1001, SHA_A, 100) == 0);
	CHECK(ab_queue_sticky_set(q, "o/r", 7, 1002, SHA_B, 101) == 0);
	CHECK(ab_queue_sticky_get(q, "o/r", 7, &comment) == 0);
	CHECK_EQ(comment, 1002);
	CHECK(ab_queue_kv_get(q, "checks_unavailable", &v) == AB_ENOTFOUND);
	CHECK(ab_queue_kv_set(q, "checks_unavailable", "token") == 0);
	CHECK(ab_queue_kv_get(q, "checks_unavailable", &v) == 0);
	CHECK_STR(v, "token");
	free(v);
	ab_queue_free(q);
}

static void bad_path(void)
{
	ab_queue *q = NULL;
	CHECK(ab_queue_open(&q, "/nonexistent-dir/x/queue.db") < 0);
	CHECK(q == NULL);
	CHECK_STR_HAS(ab_error_last(), "queue");
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "dedupe", dedupe },       { "supersede", supersede }, { "close", close_pr },
		{ "leases", leases },       { "crash_restart", crash_restart }, { "reporting", reporting },
		{ "commands", commands },   { "bad_path", bad_path },
	};
	return TU_RUN(argc, argv, cases);
}

/*
 * queue.h - the service's durable job queue in SQLite (<state>/queue.db, WAL). A job is one
 * evaluation of (repo, PR, head sha); a newer head of the same PR supersedes it. Workers lease jobs
 * and renew the lease while they run; a lease that expires (the worker died) sends the job back to
 * the queue, up to max_attempts. After the evaluation the job stays in "reporting" until every post
 * (check run, sticky comment, labels) is recorded as done, so a crash or a GitHub outage delays a
 * post but never drops or duplicates it. Deliveries (X-GitHub-Delivery) and /eval commands are
 * recorded in the same transaction as the jobs they cause.
 *
 * Job states: queued → running → reporting → done | canceled | superseded.
 * All functions are thread-safe (one connection behind a mutex; each call is one transaction).
 */
#ifndef AB_QUEUE_H
#define AB_QUEUE_H

#include <stdint.h>
#include <time.h>

typedef struct ab_queue ab_queue;

/* Report steps done for a job (bits of ab_job.report_done). */
enum {
	AB_REPORT_CHECK = 1,    /* check run (or commit status) completed */
	AB_REPORT_COMMENT = 2,  /* sticky comment created or updated */
	AB_REPORT_LABELS = 4    /* labels synced */
};

struct ab_job {
	int64_t id;
	char *repo;            /* "owner/repo" */
	int pr;
	char *head_sha;
	char *base_ref;
	char *trigger;         /* "webhook", "poll", "/eval by alice", ... */
	int round;             /* 0 first evaluation of this head; reruns count up */
	char *state;
	int attempts;          /* evaluation attempts started */
	char *cancel_reason;   /* non-NULL: stop at the next safe point ("superseded", "closed") */
	char *outcome;         /* after evaluation: pass reject infra timeout exhausted canceled superseded */
	int eval_status;       /* ab_eval_status of the run, -1 before */
	int64_t eval_id;       /* the store's evaluation id, 0 if none */
	char *result;          /* abgate.result/1 JSON text, NULL if none */
	char *note;            /* why there is no verdict (the evaluation's error), NULL if none */
	int64_t check_run_id;  /* 0: none created yet */
	char *check_kind;      /* "check" or "status" once the start was posted, else NULL */
	unsigned report_done;  /* AB_REPORT_* bits */
	int report_attempts;
	int64_t created_at;
};

void ab_job_free(struct ab_job *job);

/* Opens (creating) the queue database at `path`. Caller frees with ab_queue_free. */
int ab_queue_open(ab_queue **out, const char *path);
void ab_queue_free(ab_queue *q);

/* What an event asks the queue to do. */
enum ab_intent_kind {
	AB_INTENT_NONE = 0,   /* record the delivery only (ignored event) */
	AB_INTENT_ENQUEUE,    /* evaluate repo#pr at head_sha (supersedes older heads) */
	AB_INTENT_CLOSE,      /* PR closed: cancel its queued and running jobs */
	AB_INTENT_COMMAND     /* "/eval" comment: permission check and head lookup happen later */
};

struct ab_intent {
	enum ab_intent_kind kind;
	const char *repo;
	int pr;
	const char *head_sha;   /* ENQUEUE */
	const char *base_ref;   /* ENQUEUE */
	const char *trigger;    /* ENQUEUE */
	int rerun;              /* ENQUEUE: evaluate again even if the head has a result; COMMAND: "/eval rerun" */
	const char *user;       /* COMMAND: comment author */
	int64_t comment_id;     /* COMMAND */
};

/* What ab_queue_ingest / ab_queue_enqueue did. */
enum ab_ingest_result {
	AB_INGEST_DUPLICATE = 0,  /* the delivery id was seen before: nothing done */
	AB_INGEST_IGNORED,        /* recorded; nothing to do */
	AB_INGEST_ENQUEUED,       /* a new job */
	AB_INGEST_EXISTS,         /* this head already has a live or finished job */
	AB_INGEST_CANCELED,       /* close: jobs canceled or flagged */
	AB_INGEST_COMMAND         /* a command waits for its permission check */
};

/*
 * Applies `intent` and records `delivery` (may be NULL: no dedupe) in one transaction. A delivery
 * seen before returns AB_INGEST_DUPLICATE and changes nothing. *out_job_id (may be NULL) receives
 * the job enqueued or found (0 if none). Returns 0 or a negative error.
 */
int ab_queue_ingest(ab_queue *q, enum ab_ingest_result *out, int64_t *out_job_id, const char *delivery,
		    const char *event, const struct ab_intent *intent, time_t now);

/* The same without a delivery (polling sweep, /eval commands). */
int ab_queue_enqueue(ab_queue *q, enum ab_ingest_result *out, int64_t *out_job_id, const struct ab_intent *intent,
		     time_t now);

/*
 * Leases the oldest queued job to `owner` until now + lease_s and counts an attempt. Returns 0 and
 * *out (caller ab_job_free), or AB_ENOTFOUND when the queue is empty.
 */
int ab_queue_claim(ab_queue *q, struct ab_job **out, const char *owner, int lease_s, time_t now);

/* Leases a job in "reporting" whose lease expired and whose retry time has come. As claim. */
int ab_queue_claim_report(ab_queue *q, struct ab_job **out, const char *owner, int lease_s, time_t now);

/*
 * Renews `owner`'s lease on job `id`. *out_cancel (may be NULL) is set nonzero when the job should
 * stop (superseded, closed). Returns AB_ECANCELED when the lease is no longer ours.
 */
int ab_queue_heartbeat(ab_queue *q, int64_t id, const char *owner, int lease_s, time_t now, int *out_cancel);

/* Whether job `id` has a cancel request (cheap; for should_cancel). */
int ab_queue_cancel_requested(ab_queue *q, int64_t id);

/*
 * Ends the evaluation of job `id`: records outcome, eval status/id, result and note (may be NULL) and
 * moves it to "reporting" (the lease stays with `owner`, who reports next). An outcome of
 * "canceled"/"superseded" with no check run to close finishes the job at once.
 */
int ab_queue_finish_eval(ab_queue *q, int64_t id, const char *owner, const char *outcome, int eval_status,
			 int64_t eval_id, const char *result, const char *note, time_t now);

/* Gives a running job back to the queue without counting the attempt (graceful shutdown). */
int ab_queue_release(ab_queue *q, int64_t id, const char *owner);

/* Records the check run (or "status") posted at job start. */
int ab_queue_set_check(ab_queue *q, int64_t id, int64_t check_run_id, const char *kind);

/* Marks report steps (AB_REPORT_* bits) done. */
int ab_queue_report_mark(ab_queue *q, int64_t id, unsigned bits);

/* All posts made: the job reaches its final state (done, or canceled/superseded) and the lease ends. */
int ab_queue_report_finish(ab_queue *q, int64_t id, time_t now);

/* A post failed: drop the lease, retry at `retry_at`; `error` is kept for the operator. */
int ab_queue_report_defer(ab_queue *q, int64_t id, const char *error, time_t retry_at);

/*
 * Returns expired leases: running jobs go back to "queued" (or to "reporting" with outcome
 * "exhausted" after max_attempts), reporting jobs become claimable. `all` treats every lease as
 * expired (start-up of the only instance: nothing can still be running). *out_count (may be NULL)
 * receives how many jobs were recovered.
 */
int ab_queue_recover(ab_queue *q, time_t now, int max_attempts, int all, int *out_count);

/* A pending /eval command. */
struct ab_command {
	int64_t id;
	char *repo;
	int pr;
	char *user;
	int64_t comment_id;
	int rerun;
	int attempts;
};
void ab_command_free(struct ab_command *cmd);

/* The oldest pending command due at `now`; AB_ENOTFOUND when none. Caller frees. */
int ab_queue_command_next(ab_queue *q, struct ab_command **out, time_t now);
/* Done: `outcome` is kept ("enqueued", "denied", ...). */
int ab_queue_command_done(ab_queue *q, int64_t id, const char *outcome);
/* Try again at `retry_at` (GitHub unreachable). */
int ab_queue_command_defer(ab_queue *q, int64_t id, const char *error, time_t retry_at);

/* The sticky comment recorded for repo#pr: 0 and *out_comment_id, or AB_ENOTFOUND. */
int ab_queue_sticky_get(ab_queue *q, const char *repo, int pr, int64_t *out_comment_id);
int ab_queue_sticky_set(ab_queue *q, const char *repo, int pr, int64_t comment_id, const char *head_sha, time_t now);

/* Small persistent settings ("checks_unavailable"). get: caller frees *out; AB_ENOTFOUND when unset. */
int ab_queue_kv_get(ab_queue *q, const char *key, char **out);
int ab_queue_kv_set(ab_queue *q, const char *key, const char *value);

/* Job counts for /metrics and tests. */
struct ab_queue_stats {
	int64_t queued, running, reporting, done, canceled, superseded;
	int64_t commands_pending;
	int64_t deliveries;
};
int ab_queue_stats(ab_queue *q, struct ab_queue_stats *out);

/* Reads one job by id (tests, status). Caller frees. AB_ENOTFOUND when absent. */
int ab_queue_job_get(ab_queue *q, struct ab_job **out, int64_t id);

/* The ids of repo#pr's finished ("done") jobs, oldest first (policies count evaluations). Caller frees. */
int ab_queue_pr_done_jobs(ab_queue *q, int64_t **out_ids, size_t *out_n, const char *repo, int pr);

/* Forgets deliveries older than `before`. */
int ab_queue_prune(ab_queue *q, time_t before);

#endif

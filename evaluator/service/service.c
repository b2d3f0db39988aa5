/*
 * service.c - the bot's moving parts (see service.h). Webhook threads only verify, parse and
 * record (one SQLite transaction) and answer; workers claim jobs, open a check run, run the
 * evaluation with a should_cancel that sees supersedes, closes, timeouts and shutdown, record the
 * result and post it; the heartbeat thread renews leases and recovers dead workers' jobs; the
 * dispatcher answers /eval commands, retries deferred posts and runs the polling sweep.
 */
#define _GNU_SOURCE
#include "service.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "events.h"
#include "fs.h"
#include "github.h"
#include "log.h"
#include "metrics.h"
#include "policies.h"
#include "reporter.h"
#include "pages.h"
#include "webhook.h"

enum cancel_why { CANCEL_NONE = 0, CANCEL_QUEUE, CANCEL_TIMEOUT, CANCEL_SHUTDOWN };

struct worker {
	ab_service *svc;
	pthread_t thread;
	int started;
	char owner[96];
	pthread_mutex_t lock;          /* guards job_id and next_heartbeat */
	int64_t job_id;                /* 0: idle */
	time_t next_heartbeat;
	time_t deadline;               /* job_timeout_s after the job started */
	atomic_int cancel;             /* enum cancel_why */
};

struct ab_service {
	const struct ab_config *cfg;
	ab_service_eval_fn eval;
	ab_queue *queue;
	ab_gh_auth *auth;
	ab_gh *gh;                     /* NULL without credentials */
	ab_reporter *reporter;
	ab_policies *policies;         /* NULL without credentials */
	atomic_int policies_due;       /* a verdict was posted: run the policies soon */
	ab_metrics *metrics;
	ab_webhook *webhook;
	atomic_int stop;
	int lock_fd;
	struct worker *workers;
	int worker_count;
	pthread_t heartbeat, dispatcher;
	int heartbeat_started, dispatcher_started;
	pthread_mutex_t wake_lock;
	pthread_cond_t work_cond;      /* a job was queued */
	pthread_cond_t dispatch_cond;  /* a command was recorded */
	pthread_mutex_t post_lock;     /* posts go out one at a time: no double-create races */
	char owner_prefix[64];
};

/* ---- helpers ---- */

static void sleep_until_woken(ab_service *svc, pthread_cond_t *cond, int seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	pthread_mutex_lock(&svc->wake_lock);
	if (!atomic_load(&svc->stop))
		pthread_cond_timedwait(cond, &svc->wake_lock, &ts);
	pthread_mutex_unlock(&svc->wake_lock);
}

static void wake(ab_service *svc, pthread_cond_t *cond)
{
	pthread_mutex_lock(&svc->wake_lock);
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(&svc->wake_lock);
}

static const char *outcome_of(int status)
{
	switch (status) {
	case AB_EVAL_PASS: return "pass";
	case AB_EVAL_REJECT: return "reject";
	default: return "infra";  /* USAGE (bad suite/ref: the deployment's problem) and INFRA */
	}
}

/* Stops jobs the queue flagged (superseded, closed) at their next safe point, right away. */
static void poke_workers(ab_service *svc)
{
	for (int i = 0; i < svc->worker_count; i++) {
		struct worker *w = &svc->workers[i];
		pthread_mutex_lock(&w->lock);
		int64_t id = w->job_id;
		pthread_mutex_unlock(&w->lock);
		if (id && ab_queue_cancel_requested(svc->queue, id))
			atomic_store(&w->cancel, CANCEL_QUEUE);
	}
}

static void external_id(char *buf, size_t size, const struct ab_job *job)
{
	snprintf(buf, size, "abgate:%s#%d@%s/%d", job->repo, job->pr, job->head_sha, job->round);
}

/* ---- reporting ---- */

struct mark_ctx {
	ab_service *svc;
	int64_t job_id;
};

static int mark_step(void *payload, unsigned bit)
{
	struct mark_ctx *m = payload;
	return ab_queue_report_mark(m->svc->queue, m->job_id, bit);
}

/* Posts what job `id` still owes GitHub; on failure schedules a retry. Caller holds the lease. */
static void report_job(ab_service *svc, int64_t id)
{
	struct ab_job *job = NULL;
	json_t *result = NULL;
	char ext[512], note[512] = "";  /* run_job's notes fit whole */
	int error;

	if (ab_queue_job_get(svc->queue, &job, id) < 0) {
		AB_ERR("service: job %lld: %s", (long long)id, ab_error_last());
		return;
	}
	if (job->result && !(result = json_loads(job->result, 0, NULL)))
		AB_WARN("service: job %lld: stored result is not JSON; reporting without it", (long long)id);
	if (!strcmp(job->outcome ? job->outcome : "", "exhausted"))
		snprintf(note, sizeof(note), "The evaluation was started %d times and its worker stopped each time.",
			 job->attempts);
	else if (job->note)
		snprintf(note, sizeof(note), "%s", job->note);
	external_id(ext, sizeof(ext), job);
	struct ab_report_target t = { job->repo, job->pr, job->head_sha, job->base_ref, ext };
	struct ab_report rep = { job->outcome ? job->outcome : "infra", result, note[0] ? note : NULL, 1, NULL };
	char run_url[1200];
	ab_pages_run_url(run_url, sizeof(run_url), svc->cfg, result ? (long long)job->eval_id : 0);
	rep.run_url = run_url[0] ? run_url : NULL;
	int64_t check_id = job->check_run_id;
	char *kind = job->check_kind ? strdup(job->check_kind) : NULL;
	unsigned done = job->report_done;

	/* Comment and labels describe the PR as it is now: post them only for its current head. */
	if (svc->gh && (done & (AB_REPORT_COMMENT | AB_REPORT_LABELS)) != (AB_REPORT_COMMENT | AB_REPORT_LABELS) &&
	    strcmp(rep.outcome, "canceled") && strcmp(rep.outcome, "superseded")) {
		struct ab_gh_pr pr;
		if ((error = ab_gh_pr_get(svc->gh, &pr, job->repo, job->pr)) < 0 && error != AB_ENOTFOUND)
			goto defer;
		rep.current = error == 0 && pr.open && !strcmp(pr.head_sha, job->head_sha);
		if (!rep.current)
			AB_INFO("service: job %lld: %s#%d head %.12s is no longer current; check run only", (long long)id,
				job->repo, job->pr, job->head_sha);
	}
	struct mark_ctx mc = { svc, id };
	pthread_mutex_lock(&svc->post_lock);
	error = ab_reporter_publish(svc->reporter, &t, &rep, &check_id, &kind, &done, mark_step, &mc);
	pthread_mutex_unlock(&svc->post_lock);
	if ((check_id != job->check_run_id || (kind && (!job->check_kind || strcmp(kind, job->check_kind)))) &&
	    ab_queue_set_check(svc->queue, id, check_id, kind) < 0)
		AB_WARN("service: job %lld: %s", (long long)id, ab_error_last());
	if (error < 0)
		goto defer;
	if (ab_queue_report_finish(svc->queue, id, time(NULL)) < 0)
		AB_ERR("service: job %lld: %s", (long long)id, ab_error_last());
	else
		AB_INFO("service: job %lld: %s#%d %.12s reported (%s)", (long long)id, job->repo, job->pr, job->head_sha,
			rep.outcome);
	/* A verdict counts towards the exhausted-evaluations rule: let the dispatcher sweep. */
	atomic_store(&svc->policies_due, 1);
	wake(svc, &svc->dispatch_cond);
	goto cleanup;
defer: {
	/* GitHub's own wait is honoured (the client caps it at an hour); our backoff at report_retry_max_s. */
	long delay = 10L << (job->report_attempts < 10 ? job->report_attempts : 10);
	if (delay > svc->cfg->report_retry_max_s)
		delay = svc->cfg->report_retry_max_s;
	if (error == AB_ERATELIMIT && ab_gh_last_wait_s() > 0)
		delay = ab_gh_last_wait_s() + 1;  /* whole seconds: never earlier than asked */
	AB_WARN("service: job %lld: posting failed (%s); retry in %ld s", (long long)id, ab_error_last(), delay);
	ab_metrics_report_deferred(svc->metrics);
	if (ab_queue_report_defer(svc->queue, id, ab_error_last(), time(NULL) + delay) < 0)
		AB_ERR("service: job %lld: %s", (long long)id, ab_error_last());
}
cleanup:
	free(kind);
	json_decref(result);
	ab_job_free(job);
}

/* ---- workers ---- */

static int should_cancel(void *payload)
{
	struct worker *w = payload;
	if (atomic_load(&w->svc->stop))
		atomic_store(&w->cancel, CANCEL_SHUTDOWN);
	else if (w->deadline && time(NULL) > w->deadline && !atomic_load(&w->cancel))
		atomic_store(&w->cancel, CANCEL_TIMEOUT);
	return atomic_load(&w->cancel) != CANCEL_NONE;
}

/* Before spending an evaluation: is this still the PR's head? Webhooks can arrive out of order. */
static int still_current(ab_service *svc, const struct ab_job *job, const char **out_outcome)
{
	struct ab_gh_pr pr;
	int error;

	*out_outcome = NULL;
	if (!svc->gh)
		return 1;
	if ((error = ab_gh_pr_get(svc->gh, &pr, job->repo, job->pr)) < 0) {
		/* Not knowing is no reason to skip: the post re-checks before commenting. */
		AB_WARN("service: job %lld: cannot read the PR (%s); evaluating anyway", (long long)job->id, ab_error_last());
		return 1;
	}
	if (!pr.open) {
		*out_outcome = "canceled";
		return 0;
	}
	if (strcmp(pr.head_sha, job->head_sha)) {
		const struct ab_repo_config *rc = ab_config_repo(svc->cfg, job->repo);
		struct ab_intent in = { .kind = AB_INTENT_ENQUEUE, .repo = job->repo, .pr = job->pr,
					.head_sha = pr.head_sha, .base_ref = rc ? rc->base : job->base_ref,
					.trigger = "head moved" };
		enum ab_ingest_result res;
		*out_outcome = "superseded";
		if (!pr.draft && ab_queue_enqueue(svc->queue, &res, NULL, &in, time(NULL)) == 0)
			wake(svc, &svc->work_cond);
		return 0;
	}
	return 1;
}

static void run_job(struct worker *w, struct ab_job *job)
{
	ab_service *svc = w->svc;
	const struct ab_repo_config *rc = ab_config_repo(svc->cfg, job->repo);
	json_t *result = NULL;
	char *result_text = NULL, *kind = job->check_kind ? strdup(job->check_kind) : NULL;
	char ext[512], trigger[160], note[320] = "";
	const char *outcome = NULL;
	int64_t eval_id = 0, check_id = job->check_run_id;
	int status = -1;
	struct timespec t0, t1;

	AB_INFO("service: job %lld: %s#%d head %.12s (attempt %d, %s)", (long long)job->id, job->repo, job->pr,
		job->head_sha, job->attempts, job->trigger);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!rc) {
		outcome = "infra";
		AB_ERR("service: job %lld: %s is no longer configured", (long long)job->id, job->repo);
		goto finish;
	}
	if (!still_current(svc, job, &outcome))
		goto finish;
	/* Policies before any build or GPU time: a refused or closed PR is not evaluated. */
	if (svc->policies) {
		int closed = 0;
		if (!ab_policies_gate(svc->policies, job->repo, job->pr, job->head_sha, note, sizeof(note), &closed)) {
			outcome = closed ? "canceled" : "skipped";
			AB_INFO("service: job %lld: not evaluated: %s", (long long)job->id, note);
			if (closed)
				note[0] = '\0';
			goto finish;
		}
	}
	external_id(ext, sizeof(ext), job);
	struct ab_report_target t = { job->repo, job->pr, job->head_sha, job->base_ref, ext };
	pthread_mutex_lock(&svc->post_lock);
	int start_error = ab_reporter_start(svc->reporter, &t, &check_id, &kind, job->attempts > 1);
	pthread_mutex_unlock(&svc->post_lock);
	if (start_error < 0)
		AB_WARN("service: job %lld: could not mark the check in progress (%s); it is completed at the end",
			(long long)job->id, ab_error_last());
	if ((check_id != job->check_run_id || kind) && ab_queue_set_check(svc->queue, job->id, check_id, kind) < 0)
		AB_WARN("service: job %lld: %s", (long long)job->id, ab_error_last());

	snprintf(trigger, sizeof(trigger), "service %s#%d: %s", job->repo, job->pr, job->trigger);
	struct ab_eval_options opts = {
		.repo = rc->git_url, .base_ref = job->base_ref, .head_ref = job->head_sha, .suite_path = rc->suite,
		.state_dir = svc->cfg->state_dir, .pairs_min = rc->pairs_min, .pairs_max = rc->pairs_max,
		.jobs = svc->cfg->jobs, .quiet = 0, .trigger = trigger, .should_cancel = should_cancel,
		.cancel_payload = w, .sandbox = &svc->cfg->sandbox,
	};
	status = svc->eval(&result, &eval_id, &opts);
	if (status == AB_EVAL_CANCELED || (status != AB_EVAL_PASS && status != AB_EVAL_REJECT && atomic_load(&w->cancel))) {
		switch (atomic_load(&w->cancel)) {
		case CANCEL_SHUTDOWN:
			AB_INFO("service: job %lld: stopped for shutdown; back to the queue", (long long)job->id);
			if (ab_queue_release(svc->queue, job->id, w->owner) < 0)
				AB_ERR("service: job %lld: %s", (long long)job->id, ab_error_last());
			/* The check run must not claim an evaluation in progress while the service is down. */
			pthread_mutex_lock(&svc->post_lock);
			if (ab_reporter_pause(svc->reporter, &t, check_id, kind) < 0)
				AB_WARN("service: job %lld: could not mark the check paused (%s); the restart resumes it",
					(long long)job->id, ab_error_last());
			pthread_mutex_unlock(&svc->post_lock);
			goto cleanup;
		case CANCEL_TIMEOUT:
			outcome = "timeout";
			break;
		default: {
			struct ab_job *now = NULL;
			outcome = "canceled";
			if (ab_queue_job_get(svc->queue, &now, job->id) == 0 && now->cancel_reason &&
			    !strcmp(now->cancel_reason, "superseded"))
				outcome = "superseded";
			ab_job_free(now);
		}
		}
	} else {
		outcome = outcome_of(status);
		if (status != AB_EVAL_PASS && status != AB_EVAL_REJECT) {
			AB_WARN("service: job %lld: evaluation ended without a verdict (status %d): %s", (long long)job->id,
				status, ab_error_last());
			if (!result)  /* say why on the PR; the result, when there is one, says it itself */
				snprintf(note, sizeof(note), "The evaluation stopped: %.280s", ab_error_last());
		}
	}
	if (result && !(result_text = json_dumps(result, JSON_COMPACT)))
		AB_ERR("service: job %lld: cannot serialise the result", (long long)job->id);
finish:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ab_metrics_eval(svc->metrics, outcome,
			(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	AB_INFO("service: job %lld: %s (eval status %d)", (long long)job->id, outcome, status);
	if (ab_queue_finish_eval(svc->queue, job->id, w->owner, outcome, status, eval_id, result_text,
				 note[0] ? note : NULL, time(NULL)) < 0) {
		AB_ERR("service: job %lld: %s", (long long)job->id, ab_error_last());
		goto cleanup;
	}
	struct ab_job *after = NULL;
	if (ab_queue_job_get(svc->queue, &after, job->id) == 0 && !strcmp(after->state, "reporting"))
		report_job(svc, job->id);
	ab_job_free(after);
cleanup:
	free(kind);
	free(result_text);
	json_decref(result);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	ab_service *svc = w->svc;

	while (!atomic_load(&svc->stop)) {
		struct ab_job *job = NULL;
		int rc = ab_queue_claim(svc->queue, &job, w->owner, svc->cfg->lease_s, time(NULL));
		if (rc == AB_ENOTFOUND) {
			sleep_until_woken(svc, &svc->work_cond, 1);
			continue;
		}
		if (rc < 0) {
			AB_ERR("service: %s: %s", w->owner, ab_error_last());
			sleep_until_woken(svc, &svc->work_cond, 1);
			continue;
		}
		atomic_store(&w->cancel, CANCEL_NONE);
		pthread_mutex_lock(&w->lock);
		w->job_id = job->id;
		w->deadline = time(NULL) + svc->cfg->job_timeout_s;
		w->next_heartbeat = time(NULL) + svc->cfg->lease_s / 3;
		pthread_mutex_unlock(&w->lock);
		run_job(w, job);
		pthread_mutex_lock(&w->lock);
		w->job_id = 0;
		w->deadline = 0;
		pthread_mutex_unlock(&w->lock);
		ab_job_free(job);
	}
	return NULL;
}

/* ---- heartbeat: leases, cancel requests, dead workers ---- */

static void *heartbeat_main(void *arg)
{
	ab_service *svc = arg;
	time_t next_recover = 0;

	while (!atomic_load(&svc->stop)) {
		time_t now = time(NULL);
		for (int i = 0; i < svc->worker_count; i++) {
			struct worker *w = &svc->workers[i];
			pthread_mutex_lock(&w->lock);
			int64_t id = w->job_id;
			int due = id && now >= w->next_heartbeat;
			if (due)
				w->next_heartbeat = now + (svc->cfg->lease_s / 3 > 0 ? svc->cfg->lease_s / 3 : 1);
			pthread_mutex_unlock(&w->lock);
			if (!due)
				continue;
			int cancel = 0;
			int rc = ab_queue_heartbeat(svc->queue, id, w->owner, svc->cfg->lease_s, now, &cancel);
			if (rc == AB_ECANCELED || cancel) {
				if (rc == AB_ECANCELED)
					AB_WARN("service: %s: %s", w->owner, ab_error_last());
				atomic_store(&w->cancel, CANCEL_QUEUE);
			}
		}
		if (now >= next_recover) {
			int n = 0;
			if (ab_queue_recover(svc->queue, now, svc->cfg->max_attempts, 0, &n) == 0 && n > 0) {
				wake(svc, &svc->work_cond);
				wake(svc, &svc->dispatch_cond);
			}
			next_recover = now + 5;
		}
		struct timespec ts = { 0, 250 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- dispatcher: commands, deferred posts, polling ---- */

static void process_command(ab_service *svc, struct ab_command *cmd)
{
	char perm[32], reply[512];
	const struct ab_repo_config *rc = ab_config_repo(svc->cfg, cmd->repo);
	struct ab_gh_pr pr;
	int error;

	if (!svc->gh || !rc) {
		snprintf(reply, sizeof(reply), "@%s abgate cannot check permissions here (no GitHub credentials "
					       "configured), so `/eval` does nothing.", cmd->user);
		ab_reporter_reply(svc->reporter, cmd->repo, cmd->pr, reply);
		ab_queue_command_done(svc->queue, cmd->id, "no-credentials");
		return;
	}
	if ((error = ab_gh_permission(svc->gh, perm, sizeof(perm), cmd->repo, cmd->user)) < 0)
		goto defer;
	if (!ab_gh_permission_can_write(perm)) {
		AB_INFO("service: /eval on %s#%d by %s (%s permission): declined", cmd->repo, cmd->pr, cmd->user, perm);
		snprintf(reply, sizeof(reply),
			 "@%s thanks for asking! Evaluations start automatically for every push; `/eval` is reserved for "
			 "people with write access to this repository, so this request was not run.",
			 cmd->user);
		pthread_mutex_lock(&svc->post_lock);
		error = ab_reporter_reply(svc->reporter, cmd->repo, cmd->pr, reply);
		pthread_mutex_unlock(&svc->post_lock);
		if (error < 0 && error != AB_EINVALID)
			goto defer;
		ab_queue_command_done(svc->queue, cmd->id, "denied");
		return;
	}
	if ((error = ab_gh_pr_get(svc->gh, &pr, cmd->repo, cmd->pr)) < 0) {
		if (error == AB_ENOTFOUND) {
			ab_queue_command_done(svc->queue, cmd->id, "no-such-pr");
			return;
		}
		goto defer;
	}
	if (!pr.open) {
		ab_queue_command_done(svc->queue, cmd->id, "closed");
		return;
	}
	char trigger[160];
	snprintf(trigger, sizeof(trigger), "/eval%s by %s", cmd->rerun ? " rerun" : "", cmd->user);
	struct ab_intent in = { .kind = AB_INTENT_ENQUEUE, .repo = cmd->repo, .pr = cmd->pr, .head_sha = pr.head_sha,
				.base_ref = rc->base, .trigger = trigger, .rerun = cmd->rerun };
	enum ab_ingest_result res;
	int64_t job_id = 0;
	if (ab_queue_enqueue(svc->queue, &res, &job_id, &in, time(NULL)) < 0) {
		error = -1;
		goto defer;
	}
	AB_INFO("service: %s on %s#%d: %s (job %lld)", trigger, cmd->repo, cmd->pr,
		res == AB_INGEST_ENQUEUED ? "queued" : "already evaluated or queued", (long long)job_id);
	ab_queue_command_done(svc->queue, cmd->id, res == AB_INGEST_ENQUEUED ? "enqueued" : "exists");
	if (res == AB_INGEST_ENQUEUED)
		wake(svc, &svc->work_cond);
	return;
defer: {
	long delay = error == AB_ERATELIMIT && ab_gh_last_wait_s() > 0 ? ab_gh_last_wait_s() + 1
									: 15L << (cmd->attempts < 6 ? cmd->attempts : 6);
	AB_WARN("service: /eval on %s#%d: %s; retry in %ld s", cmd->repo, cmd->pr, ab_error_last(), delay);
	ab_queue_command_defer(svc->queue, cmd->id, ab_error_last(), time(NULL) + delay);
}
}

static void poll_sweep(ab_service *svc)
{
	for (size_t i = 0; i < svc->cfg->repo_count && !atomic_load(&svc->stop); i++) {
		const struct ab_repo_config *rc = &svc->cfg->repos[i];
		struct ab_gh_pr *prs = NULL;
		size_t n = 0, queued = 0;
		if (ab_gh_pr_list_open(svc->gh, &prs, &n, rc->name) < 0) {
			AB_WARN("service: poll %s: %s", rc->name, ab_error_last());
			continue;
		}
		for (size_t k = 0; k < n; k++) {
			if (prs[k].draft)
				continue;
			struct ab_intent in = { .kind = AB_INTENT_ENQUEUE, .repo = rc->name, .pr = prs[k].number,
						.head_sha = prs[k].head_sha, .base_ref = rc->base, .trigger = "poll" };
			enum ab_ingest_result res;
			if (ab_queue_enqueue(svc->queue, &res, NULL, &in, time(NULL)) < 0)
				AB_WARN("service: poll %s#%d: %s", rc->name, prs[k].number, ab_error_last());
			else if (res == AB_INGEST_ENQUEUED)
				queued++;
		}
		AB_INFO("service: poll %s: %zu open PR(s), %zu head(s) queued", rc->name, n, queued);
		if (queued)
			wake(svc, &svc->work_cond);
		free(prs);
	}
}

static void *dispatcher_main(void *arg)
{
	ab_service *svc = arg;
	char owner[128];
	time_t next_poll = time(NULL) + 2, next_prune = 0;

	snprintf(owner, sizeof(owner), "%s:dispatcher", svc->owner_prefix);
	while (!atomic_load(&svc->stop)) {
		time_t now = time(NULL);
		struct ab_command *cmd = NULL;
		struct ab_job *job = NULL;
		int busy = 0;

		if (ab_queue_command_next(svc->queue, &cmd, now) == 0) {
			process_command(svc, cmd);
			ab_command_free(cmd);
			busy = 1;
		}
		if (!atomic_load(&svc->stop) &&
		    ab_queue_claim_report(svc->queue, &job, owner, svc->cfg->lease_s, now) == 0) {
			AB_INFO("service: job %lld: retrying its posts", (long long)job->id);
			report_job(svc, job->id);
			ab_job_free(job);
			busy = 1;
		}
		if (svc->policies && atomic_exchange(&svc->policies_due, 0))
			ab_policies_sweep(svc->policies, NULL, 0, NULL, NULL);
		if (svc->gh && svc->cfg->poll_interval_s > 0 && now >= next_poll) {
			if (svc->policies)
				ab_policies_sweep(svc->policies, NULL, 0, NULL, NULL);
			poll_sweep(svc);
			next_poll = time(NULL) + svc->cfg->poll_interval_s;
		}
		if (now >= next_prune) {
			ab_queue_prune(svc->queue, now - (time_t)svc->cfg->delivery_ttl_days * 86400);
			next_prune = now + 3600;
		}
		if (!busy)
			sleep_until_woken(svc, &svc->dispatch_cond, 1);
	}
	return NULL;
}

/* ---- webhook callbacks ---- */

static int on_event(void *payload, const char *event, const char *delivery, const char *body, size_t len, char *reply,
		    size_t reply_size)
{
	ab_service *svc = payload;
	struct ab_event ev;
	enum ab_ingest_result res;
	int64_t job_id = 0;
	static const char *names[] = { "duplicate", "ignored", "enqueued", "exists", "canceled", "command" };

	if (ab_events_parse(&ev, svc->cfg, event, body, len) < 0) {
		AB_WARN("webhook: delivery %s: %s", delivery ? delivery : "-", ab_error_last());
		snprintf(reply, reply_size, "{\"error\":\"unreadable payload\"}");
		return 400;
	}
	if (ev.is_ping) {
		AB_INFO("webhook: ping (delivery %s)", delivery ? delivery : "-");
		snprintf(reply, reply_size, "{\"result\":\"pong\"}");
		return 200;
	}
	if (ab_queue_ingest(svc->queue, &res, &job_id, delivery, event, &ev.intent, time(NULL)) < 0) {
		AB_ERR("webhook: delivery %s: %s", delivery ? delivery : "-", ab_error_last());
		snprintf(reply, reply_size, "{\"error\":\"could not record the delivery\"}");
		return 503;
	}
	AB_INFO("webhook: %s delivery %s %s#%d: %s%s%s", event, delivery ? delivery : "-", ev.repo[0] ? ev.repo : "-",
		ev.intent.pr, names[res], ev.ignored ? ": " : "", ev.ignored ? ev.ignored : "");
	if (res == AB_INGEST_ENQUEUED)
		wake(svc, &svc->work_cond);
	if (res == AB_INGEST_ENQUEUED || res == AB_INGEST_CANCELED)
		poke_workers(svc);
	if (res == AB_INGEST_COMMAND)
		wake(svc, &svc->dispatch_cond);
	snprintf(reply, reply_size, "{\"result\":\"%s\",\"job\":%lld%s%s%s}", names[res], (long long)job_id,
		 ev.ignored ? ",\"note\":\"" : "", ev.ignored ? ev.ignored : "", ev.ignored ? "\"" : "");
	return res == AB_INGEST_ENQUEUED || res == AB_INGEST_COMMAND || res == AB_INGEST_CANCELED ? 202 : 200;
}

static char *on_metrics(void *payload)
{
	ab_service *svc = payload;
	struct ab_queue_stats qs;
	char *text = NULL;
	if (ab_queue_stats(svc->queue, &qs) < 0 || ab_metrics_render(&text, svc->metrics, &qs) < 0)
		return NULL;
	return text;
}

static int on_health(void *payload, char *msg, size_t size)
{
	ab_service *svc = payload;
	struct ab_queue_stats qs;
	if (ab_queue_stats(svc->queue, &qs) < 0) {
		snprintf(msg, size, "queue unavailable: %s", ab_error_last());
		return 1;
	}
	snprintf(msg, size, "ok: %lld queued, %lld running, %lld reporting", (long long)qs.queued,
		 (long long)qs.running, (long long)qs.reporting);
	return 0;
}

static int on_page(void *payload, const char *path, ab_webhook_arg_fn arg, void *request, struct ab_webhook_page *out)
{
	return ab_pages_get(((ab_service *)payload)->cfg, path, arg, request, out);
}

static void on_webhook_done(void *payload, int status, double seconds)
{
	ab_metrics_webhook(((ab_service *)payload)->metrics, status, seconds);
}

static void on_github_response(void *payload, const char *method, const char *path, long status, double seconds)
{
	ab_metrics_github(payload, status, seconds);
}

/* ---- start / stop ---- */

int ab_service_start(ab_service **out, const struct ab_config *cfg, ab_service_eval_fn eval)
{
	ab_service *svc = NULL;
	char path[4096], host[64];
	int n;

	if (ab_config_check_serve(cfg) < 0)
		return -1;
	if (!(svc = calloc(1, sizeof(*svc))))
		return ab_error_set("out of memory");
	svc->cfg = cfg;
	svc->eval = eval;
	svc->lock_fd = -1;
	pthread_mutex_init(&svc->wake_lock, NULL);
	pthread_mutex_init(&svc->post_lock, NULL);
	pthread_cond_init(&svc->work_cond, NULL);
	pthread_cond_init(&svc->dispatch_cond, NULL);
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(svc->owner_prefix, sizeof(svc->owner_prefix), "%.40s:%d", host, (int)getpid());

	if (ab_fs_mkdirs(cfg->state_dir) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/serve.lock", cfg->state_dir);
	if ((svc->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		ab_error_errno("service: %s", path);
		goto fail;
	}
	if (flock(svc->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		ab_error_set("service: another abgate serve owns %s", cfg->state_dir);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/queue.db", cfg->state_dir);
	if (ab_queue_open(&svc->queue, path) < 0)
		goto fail;
	/* We hold the state dir's lock: whatever was running belonged to a process that is gone. */
	if (ab_queue_recover(svc->queue, time(NULL), cfg->max_attempts, 1, &n) < 0)
		goto fail;
	if (ab_metrics_new(&svc->metrics) < 0)
		goto fail;
	if (ab_config_has_auth(cfg)) {
		if (cfg->github.token ? ab_gh_auth_new_token(&svc->auth, cfg->github.token) < 0
				      : ab_gh_auth_new_app(&svc->auth, cfg->github.app_id, cfg->github.private_key_file,
							   cfg->github.installation_id) < 0)
			goto fail;
		struct ab_gh_options go = {
			.api_url = cfg->github.api_url, .user_agent = cfg->github.user_agent,
			.timeout_s = cfg->github.timeout_s, .max_retries = cfg->github.max_retries,
			.backoff_base_ms = cfg->github.backoff_base_ms, .backoff_max_ms = cfg->github.backoff_max_ms,
			.max_wait_s = cfg->github.max_wait_s, .stop = &svc->stop, .on_response = on_github_response,
			.payload = svc->metrics,
		};
		if (ab_gh_new(&svc->gh, &go, svc->auth) < 0 ||
		    ab_reporter_new_github(&svc->reporter, svc->gh, svc->queue, cfg->github.check_name) < 0 ||
		    ab_policies_new(&svc->policies, cfg, svc->gh, svc->queue) < 0)
			goto fail;
	} else {
		AB_WARN("service: no GitHub credentials: posts are written under %s, no polling, /eval declined",
			cfg->github.output_dir);
		if (ab_reporter_new_dir(&svc->reporter, cfg->github.output_dir, 1, cfg->github.check_name) < 0)
			goto fail;
	}
	svc->worker_count = cfg->workers;
	if (!(svc->workers = calloc((size_t)svc->worker_count, sizeof(*svc->workers)))) {
		ab_error_set("out of memory");
		goto fail;
	}
	for (int i = 0; i < svc->worker_count; i++) {
		struct worker *w = &svc->workers[i];
		w->svc = svc;
		pthread_mutex_init(&w->lock, NULL);
		snprintf(w->owner, sizeof(w->owner), "%s:w%d", svc->owner_prefix, i);
		if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
			ab_error_set("service: cannot start worker %d", i);
			goto fail;
		}
		w->started = 1;
	}
	if (pthread_create(&svc->heartbeat, NULL, heartbeat_main, svc) != 0) {
		ab_error_set("service: cannot start the heartbeat thread");
		goto fail;
	}
	svc->heartbeat_started = 1;
	if (pthread_create(&svc->dispatcher, NULL, dispatcher_main, svc) != 0) {
		ab_error_set("service: cannot start the dispatcher thread");
		goto fail;
	}
	svc->dispatcher_started = 1;
	struct ab_webhook_options wo = {
		.listen = cfg->listen, .secret = cfg->webhook_secret, .max_body = (size_t)cfg->webhook_max_body,
		.on_event = on_event, .metrics = on_metrics, .healthy = on_health, .on_done = on_webhook_done,
		.page = on_page, .payload = svc,
	};
	if (ab_webhook_start(&svc->webhook, &wo) < 0)
		goto fail;
	/* Tell tests and operators where we listen (the port may have been 0); atomically, so a reader
	 * that sees the file never reads it half written. */
	{
		char line[512];
		snprintf(path, sizeof(path), "%s/serve.addr", cfg->state_dir);
		snprintf(line, sizeof(line), "%.*s:%d\n", (int)(strrchr(cfg->listen, ':') - cfg->listen), cfg->listen,
			 ab_webhook_port(svc->webhook));
		if (ab_fs_write_atomic(path, line) < 0)
			AB_WARN("service: %s", ab_error_last());
	}
	AB_INFO("service: listening on %.*s:%d (POST /webhook, GET /healthz, /metrics, /runs, /history); %d worker(s); %d job(s) "
		"recovered",
		(int)(strrchr(cfg->listen, ':') - cfg->listen), cfg->listen, ab_webhook_port(svc->webhook),
		svc->worker_count, n);
	*out = svc;
	return 0;
fail:
	ab_error_wrap(AB_ERROR, "abgate serve");
	ab_service_stop(svc);
	return -1;
}

int ab_service_port(const ab_service *svc) { return ab_webhook_port(svc->webhook); }
ab_queue *ab_service_queue(ab_service *svc) { return svc->queue; }

void ab_service_stop(ab_service *svc)
{
	if (!svc)
		return;
	atomic_store(&svc->stop, 1);
	ab_webhook_stop(svc->webhook);  /* first: no new work arrives while we wind down */
	wake(svc, &svc->work_cond);
	wake(svc, &svc->dispatch_cond);
	for (int i = 0; svc->workers && i < svc->worker_count; i++) {
		if (svc->workers[i].started)
			pthread_join(svc->workers[i].thread, NULL);
		pthread_mutex_destroy(&svc->workers[i].lock);
	}
	if (svc->heartbeat_started)
		pthread_join(svc->heartbeat, NULL);
	if (svc->dispatcher_started)
		pthread_join(svc->dispatcher, NULL);
	free(svc->workers);
	ab_policies_free(svc->policies);
	ab_reporter_free(svc->reporter);
	ab_gh_free(svc->gh);
	ab_gh_auth_free(svc->auth);
	ab_metrics_free(svc->metrics);
	ab_queue_free(svc->queue);
	if (svc->lock_fd >= 0)
		close(svc->lock_fd);
	pthread_cond_destroy(&svc->work_cond);
	pthread_cond_destroy(&svc->dispatch_cond);
	pthread_mutex_destroy(&svc->wake_lock);
	pthread_mutex_destroy(&svc->post_lock);
	free(svc);
}

/*
 * driver.c - the service tests' front end: `driver serve ...` and `driver eval --pr ...` run the
 * same code as `abgate serve` / `abgate eval --pr` (ab_cmd_serve_with / ab_cmd_eval_pr_with), and
 * `driver jobs STATE_DIR` prints the queue's jobs as JSON lines for assertions. With
 * ABGATE_FAKE_EVAL="outcome:seconds[:lower]" (pass | none | reject | infra | crash) a stand-in evaluation
 * replaces the pipeline: it waits, honours should_cancel, and returns a small abgate.result/1 document
 * (pass: one gating series whose family-wise lower bound is `lower`, default 1.065, and its tier)
 * (crash: an infra error with no document, only its message). Tests of
 * the GitHub side use it to be fast; the required scenarios use the real pipeline and the mock SUT.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <jansson.h>

#include "cmd_policies.h"
#include "cmd_serve.h"
#include "error.h"
#include "queue.h"

#ifndef AB_HAVE_EVAL
/* evaluator/pipeline/eval.c is not written yet: fail every real evaluation as an infra error. */
int ab_eval_run(json_t **out_result, int64_t *out_eval_id, const struct ab_eval_options *opts)
{
	*out_result = NULL;
	*out_eval_id = 0;
	ab_error_set("ab_eval_run is not built (evaluator/pipeline/eval.c missing)");
	return AB_EVAL_INFRA;
}
#endif

static int fake_eval(json_t **out_result, int64_t *out_eval_id, const struct ab_eval_options *opts)
{
	const char *spec = getenv("ABGATE_FAKE_EVAL");
	char outcome[32] = "pass", file_spec[64] = "";
	/* ABGATE_FAKE_EVAL_FILE: the spec is read from this file at each evaluation (tests vary it). */
	FILE *sf = getenv("ABGATE_FAKE_EVAL_FILE") ? fopen(getenv("ABGATE_FAKE_EVAL_FILE"), "r") : NULL;
	if (sf) {
		if (fgets(file_spec, sizeof(file_spec), sf))
			spec = file_spec;
		fclose(sf);
	}
	double seconds = 0.2, lower = 1.065;
	const char *head = opts->head_ref;

	sscanf(spec, "%31[^:]:%lf:%lf", outcome, &seconds, &lower);
	for (double waited = 0; waited < seconds; waited += 0.02) {
		if (opts->should_cancel && opts->should_cancel(opts->cancel_payload))
			return AB_EVAL_CANCELED;
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (opts->should_cancel && opts->should_cancel(opts->cancel_payload))
		return AB_EVAL_CANCELED;
	if (!strcmp(outcome, "crash")) {
		*out_result = NULL;
		*out_eval_id = 0;
		ab_error_set("fake evaluation: the SUT crashed (signal 11)");
		return AB_EVAL_INFRA;
	}
	if (strlen(head) != 40)
		head = getenv("ABGATE_FAKE_HEAD_SHA") ? getenv("ABGATE_FAKE_HEAD_SHA") : "ffffffffffffffffffffffffffffffffffffffff";
	int status = !strcmp(outcome, "reject") ? AB_EVAL_REJECT : !strcmp(outcome, "infra") ? AB_EVAL_INFRA : AB_EVAL_PASS;
	/* The default policy's tiers (guards/speed.h): XS S M L XL at 2, 3.5, 6, 10, 18% verified. */
	static const double tiers[] = { 0.02, 0.035, 0.06, 0.10, 0.18 };
	static const char *const tier_names[] = { "XS", "S", "M", "L", "XL" };
	int tier = -1;
	for (int t = 0; t < 5; t++)
		if (status == AB_EVAL_PASS && strcmp(outcome, "none") && lower >= 1 + tiers[t])
			tier = t;
	char tier_label[16];
	snprintf(tier_label, sizeof(tier_label), "eval:%s", tier >= 0 ? tier_names[tier] : "none");
	const char *label = status == AB_EVAL_REJECT ? "eval:REJECT" : status == AB_EVAL_INFRA ? "eval:infra-error"
			    : tier_label;
	const char *kind = status == AB_EVAL_REJECT ? "reject" : status == AB_EVAL_INFRA ? "infra" : tier >= 0 ? "tier" : "none";
	if (tier < 0 && status == AB_EVAL_PASS)
		lower = 1.0;
	json_t *labels = status == AB_EVAL_REJECT ? json_pack("[ss]", "eval:REJECT", "regression-512") : json_pack("[s]", label);
	*out_result = json_pack(
		"{s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:o}, s:[{s:s, s:s, s:i, s:{s:f, s:i}, s:{s:f, s:i}, "
		"s:f, s:[ff], s:s, s:b, s:[ff], s:s?}]}",
		"schema", "abgate.result/1", "base", "ref", opts->base_ref, "sha", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		"head", "ref", opts->head_ref, "sha", head, "verdict", "label", label, "kind", kind, "reason", "fake evaluation",
		"labels", labels, "metrics", "name", "decode_tps", "model", "mock", "ctx", 512, "base", "median", 100.0,
		"n", 6, "head", "median", status == AB_EVAL_REJECT ? 80.0 : 108.0, "n", 6, "ratio",
		status == AB_EVAL_REJECT ? 0.8 : 1.08, "ci", status == AB_EVAL_REJECT ? 0.78 : 1.06,
		status == AB_EVAL_REJECT ? 0.82 : 1.10, "outcome", status == AB_EVAL_REJECT ? "regressed" : "improved",
		"gating", 1, "ci_adj", status == AB_EVAL_REJECT ? 0.76 : lower, status == AB_EVAL_REJECT ? 0.84 : lower + 0.05,
		"tier", tier >= 0 ? tier_names[tier] : NULL);
	*out_eval_id = 1;
	return status;
}

static int dump_jobs(const char *state_dir)
{
	char path[4096];
	ab_queue *q = NULL;

	snprintf(path, sizeof(path), "%s/queue.db", state_dir);
	if (ab_queue_open(&q, path) < 0) {
		fprintf(stderr, "driver: %s\n", ab_error_last());
		return 1;
	}
	for (int64_t id = 1; id < 100000; id++) {
		struct ab_job *j = NULL;
		if (ab_queue_job_get(q, &j, id) < 0)
			break;
		json_t *result = j->result ? json_loads(j->result, 0, NULL) : NULL;
		json_t *labels = json_object_get(json_object_get(result, "verdict"), "labels");
		json_t *o = json_pack("{s:I, s:s, s:i, s:s, s:s, s:i, s:s?, s:I, s:s?, s:i, s:s, s:O?}", "id", (json_int_t)j->id,
				      "repo", j->repo, "pr", j->pr, "head_sha", j->head_sha, "state", j->state, "attempts",
				      j->attempts, "outcome", j->outcome, "check_run_id", (json_int_t)j->check_run_id,
				      "check_kind", j->check_kind, "report_done", (int)j->report_done, "trigger", j->trigger,
				      "labels", labels);
		json_decref(result);
		char *s = json_dumps(o, JSON_COMPACT);
		printf("%s\n", s);
		free(s);
		json_decref(o);
		ab_job_free(j);
	}
	ab_queue_free(q);
	return 0;
}

int main(int argc, char **argv)
{
	ab_service_eval_fn eval = getenv("ABGATE_FAKE_EVAL") ? fake_eval : ab_eval_run;

	/* A test runner killed by its timeout must not leave a service listening: die with the parent. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);

	if (argc >= 3 && !strcmp(argv[1], "jobs"))
		return dump_jobs(argv[2]);
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return ab_cmd_serve_with(argc - 1, argv + 1, eval);
	if (argc >= 2 && !strcmp(argv[1], "policies"))
		return ab_cmd_policies(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "eval"))
		return ab_cmd_eval_pr_with(argc - 1, argv + 1, eval);
	fprintf(stderr, "usage: driver serve ... | driver eval --pr N ... | driver jobs STATE_DIR\n");
	return 2;
}

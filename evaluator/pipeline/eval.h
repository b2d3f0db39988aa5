/*
 * eval.h - one A/B evaluation, end to end: resolve and check out base and head (libgit2), build
 * both, prepare models, measure interleaved pairs through the SUT protocol, hand the samples to
 * guards/ for a verdict, build the abgate.result/1 document and store it. `abgate eval` and the
 * service's workers both call ab_eval_run; neither does any of these steps itself.
 */
#ifndef AB_EVAL_H
#define AB_EVAL_H

#include <stdint.h>
#include <jansson.h>

struct ab_sandbox_config;

/* How an evaluation ended; also the `abgate eval` exit status. */
enum ab_eval_status {
	AB_EVAL_PASS = 0,        /* a verdict without REJECT: a tier or eval:none */
	AB_EVAL_REJECT = 1,      /* eval:REJECT (regression, does not compile, accuracy gate) */
	AB_EVAL_USAGE = 2,       /* usage or configuration error (bad suite, unknown ref): no verdict */
	AB_EVAL_INFRA = 3,       /* eval:infra-error: no verdict could be reached */
	AB_EVAL_CANCELED = 4     /* stopped by should_cancel at a safe point; nothing to report */
};

struct ab_eval_options {
	const char *repo;          /* local path or clone URL (required) */
	const char *base_ref;      /* branch, tag, sha or pull/N/head (required) */
	const char *head_ref;      /* likewise (required) */
	const char *suite_path;    /* NULL: guards/default.json read from the base commit */
	const char *state_dir;     /* NULL: ./.abgate */
	int pairs_min;             /* 0: the suite's */
	int pairs_max;             /* 0: the suite's */
	int has_seed;              /* 0: a fresh random seed, recorded in the result */
	uint64_t seed;
	int jobs;                  /* build parallelism for {jobs}; 0: online cores */
	int quiet;                 /* no progress lines on stderr */
	const char *trigger;       /* free text stored with the evaluation ("cli", "webhook pr#7") */
	/* How PR code is confined (sandbox.h). NULL: the defaults, sandbox on. Running unsandboxed takes
	 * an explicit enabled = 0 and is recorded in environment.sandbox of the result. A sandbox that
	 * cannot start here ends the evaluation as eval:infra-error with bwrap's reason. */
	const struct ab_sandbox_config *sandbox;

	/* Polled at safe points (between steps and pairs). Returning nonzero stops the evaluation with
	 * AB_EVAL_CANCELED; the partial evaluation is stored as canceled. May be NULL. */
	int (*should_cancel)(void *payload);
	void *cancel_payload;
};

/*
 * Runs one evaluation. Returns an ab_eval_status (never negative). *out_result receives the
 * abgate.result/1 document whenever one exists (every status except USAGE and CANCELED; also
 * INFRA when at least the refs resolved) and is owned by the caller (json_decref); it is NULL
 * otherwise. *out_eval_id receives the store's id for the evaluation (0 if nothing was stored).
 * On USAGE/INFRA, ab_error_last() says why.
 */
int ab_eval_run(json_t **out_result, int64_t *out_eval_id, const struct ab_eval_options *opts);

#endif

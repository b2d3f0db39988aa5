/*
 * measure.h - the interleaved A/B measurement loop: pairs of fresh SUT processes (base and head in
 * the balanced random order of schedule.h). One process (measure_process.c): a discarded warm-up,
 * fence calibration, the shape warm-up (the first request of every context, its TTFT sampled as
 * first_prefill_tps), then speed.reps timed passes over every context; each ab_sample is the median
 * of its reps with the raw values, the harness interval and the engine's own stats beside it; a
 * fence after each decode request charges work left over after `done` to that request. For a model
 * with a draft, each spec context is answered plain and speculatively per rep (the order
 * alternating): samples spec_decode_tps (harness clock), tau ((n - 1) / target_steps, checked
 * against the engine's accept_mean) and spec_speedup (spec / plain decode tok/s), and the exactness
 * record (speculative tokens must equal the plain ones). Adaptive: guards/speed.h says after each
 * look whether a decision is still open and how many pairs (or which confirmation batch) to measure
 * next. A SUT that crashes, hangs or prints garbage becomes failed samples with their reason (after
 * one automatic retry of that process), never an abgate failure.
 */
#ifndef AB_MEASURE_H
#define AB_MEASURE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "sample.h"
#include "spec.h"
#include "speed.h"
#include "store.h"
#include "suite.h"
#include "sut.h"

/* A growable array of samples. Zero-initialise; free with ab_samples_free. */
struct ab_samples {
	struct ab_sample *v;
	size_t n;
	size_t cap;
};

int ab_samples_push(struct ab_samples *samples, const struct ab_sample *sample);
void ab_samples_free(struct ab_samples *samples);

/* One side's SUT command for one model, placeholders already substituted. */
struct ab_measure_sut {
	const char *const *argv;   /* NULL-terminated */
	const char *const *env;    /* "KEY=VALUE", NULL-terminated; may be NULL */
	const char *cwd;           /* may be NULL */
	struct ab_sut_http_config http;  /* http.url NULL: a stdio SUT; else an HTTP one (strings borrowed) */
	int sandbox_status;        /* argv is a bwrap wrapper writing its status to fd 3 (sut.h) */
};

struct ab_measure_config {
	const struct ab_suite *suite;            /* contexts, gen_tokens, timeouts, models */
	const struct ab_measure_sut *sut[2];     /* [side] -> array of suite->model_count entries */
	uint64_t seed;
	const struct ab_speed_policy *policy;    /* pairs, looks, confirmation */
	const char *log_dir;                     /* SUT stderr goes to <log_dir>/<side>-<model>.log */
	const char *spec_corpus;                 /* spec.prompts, substituted; NULL: random ids */
	ab_store *store;                         /* samples are stored as they come; may be NULL */
	int64_t eval_id;
	int quiet;                               /* no progress lines */
	int (*should_cancel)(void *payload);     /* polled before each pair; may be NULL */
	void *cancel_payload;
};

/* Greedy agreement of one model: head's decode tokens against base's, request by request (the
 * same prompt in the same pair). guards/acc.h turns it into the advisory greedy_agreement gate. */
struct ab_measure_agreement {
	int compared;              /* decode requests both sides answered in the same pair */
	int identical;             /* of those, the ones whose tokens were equal */
	int first_diff;            /* earliest generated-token index where any differed; -1 when none */
	int diff_ctx, diff_pair;   /* the request where that earliest divergence was seen */
};

/* What happened besides the samples (for the result's environment and notes). */
struct ab_measure_report {
	uint32_t vocab[AB_SUITE_MODELS_MAX]; /* per suite model: vocab_size of its first ready line, or 0 */
	struct ab_measure_agreement agreement[AB_SUITE_MODELS_MAX]; /* per suite model */
	struct ab_spec_exact spec_exact[AB_SUITE_MODELS_MAX][2]; /* per suite model, per side (guards/spec.h) */
	char spec_kind[AB_SUITE_MODELS_MAX][32];  /* ready line's spec.kind of the model's SUT, "" if none */
	int spec_block[AB_SUITE_MODELS_MAX];      /* its spec.block_size, 0 when not said */
	json_t *ready[2];          /* the first ready line of each side (owned; json_decref), or NULL */
	int processes;             /* SUT processes started */
	int retries;               /* processes re-run after a fault */
	char retry_reasons[4][192];/* the first few faults that were retried */
	int stopped_early;         /* measuring stopped because one side kept failing */
	char stop_reason[256];
	double seconds;            /* wall time of the loop */
};

/*
 * Runs the loop until guards/speed.h closes every decision (or the pair cap), appending samples to
 * *samples (which the caller owns) and returning the final decision in *out_speed (caller frees with
 * ab_speed_result_free). *report is filled and must be cleared with ab_measure_report_clear.
 * Returns 0; AB_ECANCELED when should_cancel stopped it (samples so far are kept); negative on an
 * internal error (bad config, out of memory), with the message set.
 */
int ab_measure_run(struct ab_speed_result **out_speed, struct ab_samples *samples,
	struct ab_measure_report *report, const struct ab_measure_config *config);

void ab_measure_report_clear(struct ab_measure_report *report);

#endif

/*
 * measure_int.h - what measure.c (the pair loop) and measure_process.c (one SUT process's requests)
 * share: the loop state, the request slots and the per-request figures. Internal to the evaluator;
 * nothing outside those two files includes it.
 */
#ifndef AB_MEASURE_INT_H
#define AB_MEASURE_INT_H

#include "measure.h"
#include "sut.h"

#define AB_MEASURE_SLOTS_MAX AB_SUITE_CONTEXTS_MAX   /* distinct contexts one process measures */
#define AB_MEASURE_SPEC_METRICS 3      /* spec_decode_tps, tau, spec_speedup per spec context */
/* decode, prefill and first_prefill per plain context; the spec metrics per spec context */
#define AB_MEASURE_PROCESS_SAMPLES_MAX (3 * AB_MEASURE_SLOTS_MAX + \
	AB_MEASURE_SPEC_METRICS * AB_MEASURE_SLOTS_MAX)

/* One context the loop measures for every model, in request order. */
struct ab_measure_slot {
	int ctx;
	int decode;        /* decode_tps wanted at this context */
	int prefill;       /* prefill_tps (and first_prefill_tps) wanted at this context */
	int idx[3];        /* index of its decode, prefill, first_prefill sample in a process; -1: none */
};

/* The greedy tokens of one decode request, kept until the other side of the pair has answered. */
struct ab_measure_answer {
	int32_t *tokens;
	int n;
};

/* The figures of one timed request: [0] decode, [1] prefill (or the three spec metrics). */
struct ab_measure_rep {
	double value[AB_MEASURE_SPEC_METRICS];
	double harness_ms[2];      /* decode interval with deferred work, TTFT */
	double engine_ms[2];       /* the stats' decode_ms, prefill_ms; NAN when absent */
	double deferred_ms;
	char stats[AB_SAMPLE_STATS_MAX];
	char why[192];             /* a spec protocol fault of this request ("" when fine) */
};

struct ab_measure_loop {
	const struct ab_measure_config *cfg;
	struct ab_samples *samples;
	struct ab_measure_report *report;
	struct ab_measure_slot *slots;
	int n_slots;
	int n_plain;                  /* plain samples per process (the spec ones follow) */
	int max_ctx;
	int reps;                     /* timed requests per context (suite speed.reps) */
	int spec_ctx[AB_MEASURE_SLOTS_MAX]; /* spec contexts, ascending (for models with a draft) */
	int n_spec;
	uint32_t *prompt;             /* max_ctx ids */
	struct ab_measure_rep *rep;   /* [slot * reps + rep] of the current process */
	struct ab_sample *process;    /* AB_MEASURE_PROCESS_SAMPLES_MAX samples of the current process */
	int consecutive_fails[2];
	char last_fault[2][192];      /* the latest fault of each side, for the stop reason */
	int retry_budget;
	int fatal;                    /* a configuration problem stopped the loop: no retry helps */
	struct ab_measure_answer answers[2][AB_MEASURE_SLOTS_MAX]; /* [side][slot], latest process */
};

/* The samples one process yields, all failed with `reason` until measured. Returns the count. */
size_t ab_measure_process_init(struct ab_sample *out, const struct ab_measure_loop *L, int side, int model,
	int pair, int order, int batch, const char *reason);

/*
 * One SUT process: start, warm up every shape, time speed.reps requests per context (and the spec
 * contexts for a model with a draft). Fills v (n entries from ab_measure_process_init) and returns 0
 * when every request succeeded, 1 when a fault cut it short (*fault set; unmeasured samples fail).
 */
int ab_measure_process_run(struct ab_measure_loop *L, struct ab_sample *v, size_t n, int side, int model,
	int pair, struct ab_sut_fault *fault);

/* Drops the kept decode answers of one side. */
void ab_measure_answers_clear(struct ab_measure_loop *L, int side);

/* Counts one comparison of two token lists into a tally (compared, identical, and the earliest
 * divergence with the request it was seen in): greedy agreement and spec exactness both keep one. */
void ab_measure_tally(int *compared, int *identical, int *first_diff, int *diff_ctx, int *diff_pair,
	const int32_t *a, int na, const int32_t *b, int nb, int ctx, int pair);

/* Stops the whole loop for a reason re-running cannot change (a configuration problem). */
void ab_measure_fatal(struct ab_measure_loop *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

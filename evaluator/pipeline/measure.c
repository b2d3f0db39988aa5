/*
 * measure.c - the interleaved A/B measurement loop (see measure.h). One pair = for every model,
 * one fresh SUT process per side in the schedule's order; one process = ready line, a discarded
 * warm-up request, then one timed generate per context. Faults are retried once per process and
 * otherwise become failed samples carrying the fault's reason.
 */
#include "measure.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "proc.h"
#include "schedule.h"
#include "sut.h"

#define WARMUP_TOKENS 4
#define CONSECUTIVE_FAILS_STOP 3    /* a side failing this many processes in a row stops the loop */
#define SLOTS_MAX AB_SUITE_CONTEXTS_MAX   /* distinct contexts one process measures */
#define SPEC_METRICS 3                    /* spec_decode_tps, tau, spec_speedup per spec context */
#define PROCESS_SAMPLES_MAX (2 * SLOTS_MAX + SPEC_METRICS * SLOTS_MAX)
#define TAU_TOLERANCE 0.01                /* engine accept_mean vs the harness's tau */

static const char *const spec_metrics[SPEC_METRICS] = { "spec_decode_tps", "tau", "spec_speedup" };

int ab_samples_push(struct ab_samples *samples, const struct ab_sample *sample)
{
	if (samples->n == samples->cap) {
		size_t cap = samples->cap ? samples->cap * 2 : 256;
		struct ab_sample *v = realloc(samples->v, cap * sizeof(*v));
		if (v == NULL)
			return ab_error_set("measure: out of memory for %zu samples", cap);
		samples->v = v;
		samples->cap = cap;
	}
	samples->v[samples->n++] = *sample;
	return 0;
}

void ab_samples_free(struct ab_samples *samples)
{
	if (samples == NULL)
		return;
	free(samples->v);
	memset(samples, 0, sizeof(*samples));
}

void ab_measure_report_clear(struct ab_measure_report *report)
{
	if (report == NULL)
		return;
	json_decref(report->ready[0]);
	json_decref(report->ready[1]);
	memset(report, 0, sizeof(*report));
}

/* One (metric, ctx) the loop measures for every model, in request order. */
struct slot {
	int ctx;
	int decode;      /* decode_tps wanted at this context */
	int prefill;     /* prefill_tps wanted at this context */
};

/* The greedy tokens of one decode request, kept until the other side of the pair has answered. */
struct answer {
	int32_t *tokens;
	int n;
};

struct loop {
	const struct ab_measure_config *cfg;
	struct ab_samples *samples;
	struct ab_measure_report *report;
	struct slot *slots;
	int n_slots;
	int max_ctx;
	int spec_ctx[SLOTS_MAX];      /* spec contexts, ascending (measured for models with a draft) */
	int n_spec;
	uint32_t *prompt;             /* max_ctx ids */
	int consecutive_fails[2];
	char last_fault[2][192];      /* the latest fault of each side, for the stop reason */
	int retry_budget;
	int fatal;                    /* a configuration problem stopped the loop: no retry helps */
	struct answer answers[2][SLOTS_MAX]; /* [side][slot]: the current model's latest process */
};

static const char *side_name(int side)
{
	return side == AB_SIDE_BASE ? "base" : "head";
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The union of decode and prefill contexts, ascending, each marked with what it measures. */
static int slots_make(struct loop *L)
{
	const struct ab_suite_speed *sp = &L->cfg->suite->speed;
	int n_all = sp->decode_count + sp->prefill_count;
	int *all = calloc((size_t)(n_all ? n_all : 1), sizeof(int));
	if (all == NULL)
		return ab_error_set("measure: out of memory");
	/* A suite without decode (or prefill) contexts has a NULL list: memcpy must not see it. */
	if (sp->decode_count > 0)
		memcpy(all, sp->decode_contexts, (size_t)sp->decode_count * sizeof(int));
	if (sp->prefill_count > 0)
		memcpy(all + sp->decode_count, sp->prefill_contexts, (size_t)sp->prefill_count * sizeof(int));
	qsort(all, (size_t)n_all, sizeof(int), cmp_int);

	L->slots = calloc((size_t)(n_all ? n_all : 1), sizeof(*L->slots));
	if (L->slots == NULL) {
		free(all);
		return ab_error_set("measure: out of memory");
	}
	for (int i = 0; i < n_all; i++) {
		if (L->n_slots > 0 && L->slots[L->n_slots - 1].ctx == all[i])
			continue;
		struct slot *s = &L->slots[L->n_slots++];
		s->ctx = all[i];
		for (int j = 0; j < sp->decode_count; j++)
			s->decode |= sp->decode_contexts[j] == all[i];
		for (int j = 0; j < sp->prefill_count; j++)
			s->prefill |= sp->prefill_contexts[j] == all[i];
		if (all[i] > L->max_ctx)
			L->max_ctx = all[i];
	}
	free(all);
	const struct ab_suite_spec *spec = &L->cfg->suite->spec;
	for (int i = 0; i < spec->count && L->n_spec < SLOTS_MAX; i++) {
		int c = spec->contexts[i], k = L->n_spec++;
		while (k > 0 && L->spec_ctx[k - 1] > c) {     /* insertion: a handful of contexts */
			L->spec_ctx[k] = L->spec_ctx[k - 1];
			k--;
		}
		L->spec_ctx[k] = c;
		if (c > L->max_ctx)
			L->max_ctx = c;
	}
	L->prompt = malloc((size_t)(L->max_ctx > 0 ? L->max_ctx : 1) * sizeof(uint32_t));
	return L->prompt ? 0 : ab_error_set("measure: out of memory for a %d-token prompt", L->max_ctx);
}

/* One sample, failed with `reason` until measured. */
static void sample_init(struct ab_sample *s, const struct loop *L, int side, int model, int pair, int order,
	int batch, const char *metric, int ctx, const char *reason)
{
	memset(s, 0, sizeof(*s));
	s->side = side;
	s->pair = pair;
	s->order = order;
	s->batch = batch;
	snprintf(s->model, sizeof(s->model), "%s", L->cfg->suite->models[model].name);
	snprintf(s->metric, sizeof(s->metric), "%s", metric);
	s->ctx = ctx;
	s->value = NAN;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

/* The samples one process yields, in request order, all failed with `reason` until measured.
 * Returns the count (at most PROCESS_SAMPLES_MAX). */
static size_t process_samples_init(struct ab_sample *out, const struct loop *L, int side, int model,
	int pair, int order, int batch, const char *reason)
{
	size_t n = 0;
	for (int i = 0; i < L->n_slots; i++) {
		if (L->slots[i].decode)
			sample_init(&out[n++], L, side, model, pair, order, batch, "decode_tps", L->slots[i].ctx, reason);
		if (L->slots[i].prefill)
			sample_init(&out[n++], L, side, model, pair, order, batch, "prefill_tps", L->slots[i].ctx, reason);
	}
	for (int i = 0; L->cfg->suite->models[model].has_draft && i < L->n_spec; i++)
		for (int k = 0; k < SPEC_METRICS; k++)
			sample_init(&out[n++], L, side, model, pair, order, batch, spec_metrics[k], L->spec_ctx[i], reason);
	return n;
}

static void samples_fail_from(struct ab_sample *v, size_t n, size_t from, const char *reason)
{
	for (size_t i = from; i < n; i++) {
		v[i].ok = 0;
		v[i].value = NAN;
		snprintf(v[i].reason, sizeof(v[i].reason), "%s", reason);
	}
}

static void answers_clear(struct loop *L, int side)
{
	for (int i = 0; i < SLOTS_MAX; i++) {
		free(L->answers[side][i].tokens);
		L->answers[side][i] = (struct answer){ NULL, 0 };
	}
}

/* Counts one comparison of two token lists into a tally (compared, identical, and the earliest
 * divergence with the request it was seen in): greedy agreement and spec exactness both keep one. */
static void tally_match(int *compared, int *identical, int *first_diff, int *diff_ctx, int *diff_pair,
	const int32_t *a, int na, const int32_t *b, int nb, int ctx, int pair)
{
	int n = na < nb ? na : nb, k = 0;
	while (k < n && a[k] == b[k])
		k++;
	(*compared)++;
	if (k == n && na == nb) {
		(*identical)++;
	} else if (*first_diff < 0 || k < *first_diff) {
		*first_diff = k;
		*diff_ctx = ctx;
		*diff_pair = pair;
	}
}

/* Greedy agreement: compares the decode tokens both sides gave `model` in `pair` (the latest
 * process of each side, so a retried process counts once), then drops them. */
static void agreement_add(struct loop *L, int model, int pair)
{
	struct ab_measure_agreement *a = &L->report->agreement[model];
	for (int i = 0; i < L->n_slots; i++) {
		const struct answer *b = &L->answers[AB_SIDE_BASE][i], *h = &L->answers[AB_SIDE_HEAD][i];
		if (b->tokens == NULL || h->tokens == NULL)
			continue;
		tally_match(&a->compared, &a->identical, &a->first_diff, &a->diff_ctx, &a->diff_pair,
			b->tokens, b->n, h->tokens, h->n, L->slots[i].ctx, pair);
	}
	answers_clear(L, AB_SIDE_BASE);
	answers_clear(L, AB_SIDE_HEAD);
}

/* Stops the whole loop for a reason re-running cannot change (a configuration problem). */
static void loop_fatal(struct loop *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void loop_fatal(struct loop *L, const char *fmt, ...)
{
	if (L->report->stopped_early)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(L->report->stop_reason, sizeof(L->report->stop_reason), fmt, ap);
	va_end(ap);
	L->report->stopped_early = 1;
	L->fatal = 1;
}

/* The prompt of one spec request into L->prompt: cut from spec.prompts when the suite names a
 * corpus, else seeded random ids; keyed by (seed, model, ctx, pair) either way, so base and head of a
 * pair get the same one. A corpus that cannot serve it stops the loop. */
static int spec_prompt(struct loop *L, const char *model, int ctx, int pair, uint32_t vocab)
{
	char key[96];
	snprintf(key, sizeof(key), "%s/spec", model);
	if (L->cfg->spec_corpus == NULL)
		return ab_schedule_prompt(L->prompt, L->cfg->seed, key, ctx, pair, vocab);
	struct ab_schedule_windows *w = NULL;
	snprintf(key, sizeof(key), "%s/spec/%d", model, pair);
	if (ab_schedule_windows_make(&w, L->cfg->seed, key, 1, ctx, L->cfg->spec_corpus, vocab) < 0) {
		loop_fatal(L, "spec.prompts %s: %.180s", L->cfg->spec_corpus, ab_error_last());
		return -1;
	}
	memcpy(L->prompt, w->tokens, (size_t)ctx * sizeof(uint32_t));
	ab_schedule_windows_free(w);
	return 0;
}

/* Fills the three spec samples of one context from a plain and a speculative answer. A speculative
 * answer whose stats are missing, malformed, or whose accept_mean disagrees with the harness's tau
 * by more than TAU_TOLERANCE fails all three (a protocol fault of that sample, not of the process). */
static void spec_samples_fill(struct ab_sample *out, struct ab_spec_exact *e,
	const struct ab_sut_gen *plain, const struct ab_sut_gen *spec)
{
	struct ab_sut_spec_stats st;
	char why[192] = "";
	double tau = NAN;
	if (ab_sut_parse_spec_stats(&st, spec->stats, spec->n_tokens) < 0) {
		snprintf(why, sizeof(why), "protocol: spec stats: %.160s", ab_error_last());
	} else {
		tau = (double)(spec->n_tokens - 1) / st.target_steps;
		if (fabs(st.accept_mean / tau - 1.0) > TAU_TOLERANCE)
			snprintf(why, sizeof(why), "protocol: the engine's accept_mean %.4g disagrees with the "
				"harness's tau %.4g (%d tokens in %d target steps)", st.accept_mean, tau,
				spec->n_tokens, st.target_steps);
	}
	double values[SPEC_METRICS] = { spec->decode_tps, tau, spec->decode_tps / plain->decode_tps };
	for (int k = 0; k < SPEC_METRICS; k++) {
		out[k].t_start_ns = spec->t_write_ns;
		out[k].t_end_ns = spec->t_done_ns;
		if (why[0]) {
			snprintf(out[k].reason, sizeof(out[k].reason), "%s", why);
		} else if (isfinite(values[k]) && values[k] > 0) {
			out[k].ok = 1;
			out[k].value = values[k];
			out[k].reason[0] = '\0';
		} else {
			snprintf(out[k].reason, sizeof(out[k].reason), "protocol: %s of %g is not a positive value",
				out[k].metric, values[k]);
		}
	}
	if (why[0]) {
		if (e->stats_faults++ == 0)
			snprintf(e->stats_example, sizeof(e->stats_example), "%.150s", why + strlen("protocol: "));
	}
}

/*
 * The spec part of one process: a discarded speculative warm-up, then for each spec context the same
 * prompt plain and speculatively (plain first in even pairs at even context indices, alternating).
 * v points at the first spec sample. Returns 0, or -1 with *fault set (the caller fails the rest).
 */
static int spec_run(struct loop *L, struct ab_sample *v, size_t *done, ab_sut *sut, int side, int model,
	int pair, uint32_t vocab, struct ab_sut_fault *fault)
{
	const struct ab_suite_spec *spec = &L->cfg->suite->spec;
	const char *model_name = L->cfg->suite->models[model].name;
	struct ab_spec_exact *e = &L->report->spec_exact[model][side];
	struct ab_sut_gen gen[2] = { { 0 }, { 0 } };   /* [0] plain, [1] speculative */
	int error = -1;

	if (!ab_sut_spec(sut)->present) {
		fault->kind = AB_SUT_PROTOCOL;
		snprintf(fault->reason, sizeof(fault->reason), "model %s: the SUT's ready line has no \"spec\": it "
			"was started without a draft, so speculative decoding cannot be measured", model_name);
		loop_fatal(L, "%s SUT: %s", side_name(side), fault->reason);
		return -1;
	}
	if (L->report->spec_kind[model][0] == '\0') {
		snprintf(L->report->spec_kind[model], sizeof(L->report->spec_kind[model]), "%s", ab_sut_spec(sut)->kind);
		L->report->spec_block[model] = ab_sut_spec(sut)->block_size;
	}
	if (spec_prompt(L, model_name, L->spec_ctx[0], -1, vocab) < 0)
		goto prompt_failed;
	if (ab_sut_generate(&gen[1], fault, sut, (const int32_t *)L->prompt, L->spec_ctx[0], WARMUP_TOKENS, 1) < 0)
		goto cleanup;
	ab_sut_gen_clear(&gen[1]);
	for (int i = 0; i < L->n_spec; i++) {
		int ctx = L->spec_ctx[i], first = (pair + i) % 2;   /* 0: plain first */
		if (spec_prompt(L, model_name, ctx, pair, vocab) < 0)
			goto prompt_failed;
		for (int k = 0; k < 2; k++) {
			int speculative = k == 0 ? first : 1 - first;
			if (ab_sut_generate(&gen[speculative], fault, sut, (const int32_t *)L->prompt, ctx, spec->gen_tokens,
				speculative) < 0)
				goto cleanup;
		}
		tally_match(&e->compared, &e->identical, &e->first_diff, &e->diff_ctx, &e->diff_pair,
			gen[0].tokens, gen[0].n_tokens, gen[1].tokens, gen[1].n_tokens, ctx, pair);
		spec_samples_fill(&v[*done], e, &gen[0], &gen[1]);
		*done += SPEC_METRICS;
		ab_sut_gen_clear(&gen[0]);
		ab_sut_gen_clear(&gen[1]);
	}
	error = 0;
	goto cleanup;
prompt_failed:
	fault->kind = AB_SUT_PROTOCOL;
	snprintf(fault->reason, sizeof(fault->reason), "%.250s", L->report->stop_reason);
cleanup:
	ab_sut_gen_clear(&gen[0]);
	ab_sut_gen_clear(&gen[1]);
	return error;
}

/*
 * One SUT process: start, warm up, one generate per slot. Fills v (n entries, pre-initialised in
 * slot order) and returns 0 when every request succeeded, 1 when a fault cut it short (fault set).
 */
static int process_run(struct loop *L, struct ab_sample *v, size_t n, int side, int model,
	int pair, struct ab_sut_fault *fault)
{
	const struct ab_measure_config *cfg = L->cfg;
	const struct ab_suite *suite = cfg->suite;
	const struct ab_measure_sut *cmd = &cfg->sut[side][model];
	const char *model_name = suite->models[model].name;
	char log_path[4096];
	ab_sut *sut = NULL;
	struct ab_sut_gen gen = { 0 };
	size_t done = 0;
	int faulted = 1;

	snprintf(log_path, sizeof(log_path), "%s/%s-%s.log", cfg->log_dir, side_name(side), model_name);
	struct ab_sut_config sc = {
		.argv = cmd->argv,
		.env = cmd->env,
		.cwd = cmd->cwd,
		.stderr_log = log_path,
		.ready_timeout_ms = suite->sut.ready_timeout_s * 1000,
		.request_timeout_ms = suite->sut.request_timeout_s * 1000,
	};
	memset(fault, 0, sizeof(*fault));
	answers_clear(L, side);
	L->report->processes++;
	if (ab_sut_start(&sut, fault, &sc) < 0)
		goto cleanup;
	if (L->report->ready[side] == NULL)
		L->report->ready[side] = json_deep_copy(ab_sut_ready(sut));

	uint32_t vocab = (uint32_t)ab_sut_vocab_size(sut);
	if (L->report->vocab[model] == 0)
		L->report->vocab[model] = vocab;
	int warm_ctx = L->slots[0].ctx;
	if (ab_schedule_prompt(L->prompt, cfg->seed, model_name, warm_ctx, -1, vocab) < 0) {
		fault->kind = AB_SUT_PROTOCOL;
		snprintf(fault->reason, sizeof(fault->reason), "prompt: %s", ab_error_last());
		goto cleanup;
	}
	if (ab_sut_generate(&gen, fault, sut, (const int32_t *)L->prompt, warm_ctx, WARMUP_TOKENS, 0) < 0)
		goto cleanup;
	ab_sut_gen_clear(&gen);

	for (int i = 0; i < L->n_slots; i++) {
		const struct slot *s = &L->slots[i];
		int max_tokens = s->decode ? suite->speed.gen_tokens : 1;
		if (ab_schedule_prompt(L->prompt, cfg->seed, model_name, s->ctx, pair, vocab) < 0) {
			fault->kind = AB_SUT_PROTOCOL;
			snprintf(fault->reason, sizeof(fault->reason), "prompt: %s", ab_error_last());
			goto cleanup;
		}
		if (ab_sut_generate(&gen, fault, sut, (const int32_t *)L->prompt, s->ctx, max_tokens, 0) < 0)
			goto cleanup;
		if (s->decode) {   /* the tokens move to the answer; the sample fields below stay in gen */
			L->answers[side][i] = (struct answer){ gen.tokens, gen.n_tokens };
			gen.tokens = NULL;
		}
		for (int k = 0; k < 2; k++) {
			int want = k == 0 ? s->decode : s->prefill;
			if (!want)
				continue;
			struct ab_sample *out = &v[done++];
			double value = k == 0 ? gen.decode_tps : gen.prefill_tps;
			out->t_start_ns = gen.t_write_ns;
			out->t_end_ns = gen.t_done_ns;
			if (isfinite(value) && value > 0) {
				out->ok = 1;
				out->value = value;
				out->reason[0] = '\0';
			} else {
				snprintf(out->reason, sizeof(out->reason), "protocol: %s of %g is not a positive rate",
					out->metric, value);
			}
		}
		ab_sut_gen_clear(&gen);
	}
	if (suite->models[model].has_draft && L->n_spec > 0 &&
	    spec_run(L, v, &done, sut, side, model, pair, vocab, fault) < 0)
		goto cleanup;
	faulted = 0;

cleanup:
	ab_sut_gen_clear(&gen);
	if (sut) {
		struct ab_proc_status st;
		if (ab_sut_quit(&st, sut) < 0 && !faulted)
			AB_DEBUG("%s SUT did not quit cleanly: %s", side_name(side), ab_error_last());
		ab_sut_free(sut);
	}
	if (faulted) {
		char reason[192];
		snprintf(reason, sizeof(reason), "%s: %.170s", ab_sut_fault_kind_name(fault->kind), fault->reason);
		samples_fail_from(v, n, done, reason);
	}
	return faulted;
}

/* One side of one pair for one model, with one retry on a fault. Appends and stores the samples. */
static int side_run(struct loop *L, int side, int model, int pair, int order, int batch)
{
	struct ab_sample v[PROCESS_SAMPLES_MAX];
	struct ab_sut_fault fault;
	size_t n = process_samples_init(v, L, side, model, pair, order, batch, "not measured");
	int faulted = process_run(L, v, n, side, model, pair, &fault);

	if (faulted && L->retry_budget > 0 && !L->fatal) {
		struct ab_measure_report *r = L->report;
		if (r->retries < 4)
			snprintf(r->retry_reasons[r->retries], sizeof(r->retry_reasons[0]), "%s pair %d: %s: %.150s",
				side_name(side), pair, ab_sut_fault_kind_name(fault.kind), fault.reason);
		r->retries++;
		L->retry_budget--;
		if (!L->cfg->quiet)
			AB_WARN("%s SUT failed (%s: %s); retrying once", side_name(side),
				ab_sut_fault_kind_name(fault.kind), fault.reason);
		process_samples_init(v, L, side, model, pair, order, batch, "not measured");
		faulted = process_run(L, v, n, side, model, pair, &fault);
	}
	L->consecutive_fails[side] = faulted ? L->consecutive_fails[side] + 1 : 0;
	if (faulted) {
		snprintf(L->last_fault[side], sizeof(L->last_fault[side]), "%s: %.170s",
			ab_sut_fault_kind_name(fault.kind), fault.reason);
		if (!L->cfg->quiet)
			AB_WARN("%s SUT failed on pair %d: %s", side_name(side), pair, L->last_fault[side]);
	}

	for (size_t i = 0; i < n; i++)
		if (ab_samples_push(L->samples, &v[i]) < 0)
			return -1;
	if (L->cfg->store && ab_store_samples_add(L->cfg->store, L->cfg->eval_id, v, n) < 0)
		AB_WARN("could not store samples: %s", ab_error_last());
	return 0;
}

static int pair_run(struct loop *L, int pair, int batch)
{
	int first = ab_schedule_first_side(L->cfg->seed, pair);
	for (int model = 0; model < L->cfg->suite->model_count; model++) {
		for (int k = 0; k < 2 && !L->fatal; k++) {
			int side = k == 0 ? first : 1 - first;
			if (side_run(L, side, model, pair, k, batch) < 0)
				return -1;
		}
		if (L->fatal)
			return 0;
		agreement_add(L, model, pair);
	}
	return 0;
}

static void progress(const struct loop *L, int batch, int done, int target, int64_t t0, int64_t t_batch0)
{
	if (L->cfg->quiet)
		return;
	double elapsed = (ab_proc_now_ns() - t0) / 1e9;
	double per_pair = done > 0 ? (ab_proc_now_ns() - t_batch0) / 1e9 / done : 0;
	double eta = per_pair * (target - done);
	AB_INFO("measured %s %d of %d  (%.0f s elapsed, ETA %.0f s)",
		batch ? "confirmation pair" : "pair", done, target, elapsed, eta > 0 ? eta : 0);
}

int ab_measure_run(struct ab_speed_result **out_speed, struct ab_samples *samples,
	struct ab_measure_report *report, const struct ab_measure_config *cfg)
{
	struct loop L = { 0 };
	struct ab_speed_result *speed = NULL;
	int pairs_in_batch[2] = { 0, 0 };
	int next_pair = 0, target_batch = 0, target_pairs, last_pairs;
	int error = -1;
	int64_t t0 = ab_proc_now_ns();

	memset(report, 0, sizeof(*report));
	for (int m = 0; m < AB_SUITE_MODELS_MAX; m++) {
		report->agreement[m].first_diff = -1;
		report->spec_exact[m][0].first_diff = report->spec_exact[m][1].first_diff = -1;
	}
	L.cfg = cfg;
	L.samples = samples;
	L.report = report;
	if (cfg->suite->model_count < 1 || cfg->suite->model_count > AB_SUITE_MODELS_MAX)
		return ab_error_setc(AB_EINVALID, "measure: %d models (1..%d supported)", cfg->suite->model_count,
			AB_SUITE_MODELS_MAX);
	if (slots_make(&L) < 0)
		goto cleanup;
	if (L.n_slots == 0 || L.n_slots > SLOTS_MAX) {
		ab_error_setc(AB_EINVALID, "measure: %d contexts (1..%d supported)", L.n_slots, SLOTS_MAX);
		goto cleanup;
	}
	size_t n_gating = 0;
	for (int i = 0; i < L.n_slots; i++)
		n_gating += (size_t)(L.slots[i].decode + L.slots[i].prefill);
	n_gating *= (size_t)cfg->suite->model_count;
	for (int m = 0; m < cfg->suite->model_count; m++)      /* spec_decode_tps and tau gate too */
		n_gating += cfg->suite->models[m].has_draft ? 2 * (size_t)L.n_spec : 0;
	if (ab_speed_pairs_needed(&target_pairs, &last_pairs, cfg->policy, n_gating) < 0)
		goto cleanup;
	/* One retry for roughly every eighth process: enough for flaky boxes, not enough to hide a
	 * SUT that always fails (that one still ends as infra). */
	L.retry_budget = 2 + last_pairs * cfg->suite->model_count / 4;
	if (!cfg->quiet)
		AB_INFO("measuring: %d contexts x %d model(s), first look after %d pairs, at most %d",
			L.n_slots, cfg->suite->model_count, target_pairs, last_pairs);

	for (;;) {
		int64_t t_batch0 = ab_proc_now_ns();
		while (pairs_in_batch[target_batch] < target_pairs) {
			if (cfg->should_cancel && cfg->should_cancel(cfg->cancel_payload)) {
				error = AB_ECANCELED;
				ab_error_setc(AB_ECANCELED, "measure: canceled after %d pairs", next_pair);
				goto cleanup;
			}
			if (pair_run(&L, next_pair++, target_batch) < 0)
				goto cleanup;
			pairs_in_batch[target_batch]++;
			progress(&L, target_batch, pairs_in_batch[target_batch], target_pairs, t0, t_batch0);
			for (int side = 0; side < 2; side++) {
				if (!report->stopped_early &&
				    L.consecutive_fails[side] >= CONSECUTIVE_FAILS_STOP * cfg->suite->model_count) {
					report->stopped_early = 1;
					snprintf(report->stop_reason, sizeof(report->stop_reason),
						"the %s SUT failed %d processes in a row (last: %.150s)",
						side_name(side), L.consecutive_fails[side], L.last_fault[side]);
				}
			}
			if (report->stopped_early)
				break;
		}
		ab_speed_result_free(speed);
		speed = NULL;
		if (ab_speed_decide(&speed, samples->v, samples->n, cfg->policy) < 0)
			goto cleanup;
		if (report->stopped_early || !speed->open)
			break;
		if (!cfg->quiet)
			AB_INFO("look %d: %s; measuring to %d pairs%s", speed->look, speed->open_reason,
				speed->next_pairs, speed->next_batch ? " in a confirmation batch" : "");
		if (speed->next_batch < 0 || speed->next_batch > 1 ||
		    speed->next_pairs <= pairs_in_batch[speed->next_batch]) {
			ab_error_set("measure: the plan asks for batch %d to reach %d pairs, which it has",
				speed->next_batch, speed->next_pairs);
			goto cleanup;
		}
		target_batch = speed->next_batch;
		target_pairs = speed->next_pairs;
	}

	*out_speed = speed;
	speed = NULL;
	error = 0;

cleanup:
	report->seconds = (ab_proc_now_ns() - t0) / 1e9;
	ab_speed_result_free(speed);
	answers_clear(&L, AB_SIDE_BASE);
	answers_clear(&L, AB_SIDE_HEAD);
	free(L.slots);
	free(L.prompt);
	return error;
}

/*
 * measure_process.c - one SUT process of the A/B loop (measure.h): ready line, a process warm-up,
 * fence calibration, one first request per context (the shape warm-up, reported as
 * first_prefill_tps), then speed.reps timed passes over every context (one over those above
 * speed.reps_ctx_max); each sample is the median of
 * its requests, with every raw value, the harness interval and the engine's own figure kept. A
 * short "fence" request after each decode request charges work the SUT left over after its done
 * event back to that request, so answering early gains nothing.
 */
#include "measure_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "proc.h"
#include "schedule.h"
#include "stats.h"

#define WARMUP_TOKENS 4
#define FENCE_TOKENS 16          /* prompt of a fence request (and of the process warm-up) */
#define FENCE_CALIBRATE 3        /* fences after the warm-up; all but the first set the floor */
#define FENCE_SLACK_MS 0.05      /* a fence above floor x 1.1 + this found the engine busy (what
                                  * an engine could hide after its done event, ~0.1 ms on the mock) */
#define TAU_TOLERANCE 0.01       /* engine accept_mean vs the harness's tau */

static const char *const spec_metrics[AB_MEASURE_SPEC_METRICS] = { AB_METRIC_SPEC, AB_METRIC_TAU,
	AB_METRIC_SPEC_SPEEDUP };

static const char *side_name(int side)
{
	return side == AB_SIDE_BASE ? "base" : "head";
}

void ab_measure_fatal(struct ab_measure_loop *L, const char *fmt, ...)
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

void ab_measure_answers_clear(struct ab_measure_loop *L, int side)
{
	for (int i = 0; i < AB_MEASURE_SLOTS_MAX; i++) {
		free(L->answers[side][i].tokens);
		L->answers[side][i] = (struct ab_measure_answer){ NULL, 0 };
	}
}

static void sample_init(struct ab_sample *s, const struct ab_measure_loop *L, int side, int model, int pair,
	int order, int batch, const char *metric, int ctx, const char *reason)
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
	s->harness_ms = NAN;
	s->engine_ms = NAN;
	for (int r = 0; r < AB_SAMPLE_REPS_MAX; r++)
		s->rep_values[r] = NAN;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

size_t ab_measure_process_init(struct ab_sample *out, const struct ab_measure_loop *L, int side, int model,
	int pair, int order, int batch, const char *reason)
{
	static const char *const plain[3] = { AB_METRIC_DECODE, AB_METRIC_PREFILL, AB_METRIC_FIRST_PREFILL };
	for (int i = 0; i < L->n_slots; i++)
		for (int k = 0; k < 3; k++)
			if (L->slots[i].idx[k] >= 0)
				sample_init(&out[L->slots[i].idx[k]], L, side, model, pair, order, batch, plain[k],
					L->slots[i].ctx, reason);
	size_t n = (size_t)L->n_plain;
	for (int i = 0; L->cfg->suite->models[model].has_draft && i < L->n_spec; i++)
		for (int k = 0; k < AB_MEASURE_SPEC_METRICS; k++)
			sample_init(&out[n++], L, side, model, pair, order, batch, spec_metrics[k], L->spec_ctx[i], reason);
	return n;
}

/* A stats member that is a finite number >= 0, else NAN. */
static double stat_ms(const json_t *stats, const char *key)
{
	const json_t *v = json_object_get(stats, key);
	double x = json_is_number(v) ? json_number_value(v) : NAN;
	return isfinite(x) && x >= 0 ? x : NAN;
}

static void stats_text(char *out, size_t size, const json_t *stats)
{
	out[0] = '\0';
	if (stats == NULL)
		return;
	char *text = json_dumps(stats, JSON_COMPACT);
	if (text && strlen(text) < size)
		snprintf(out, size, "%s", text);
	free(text);
}

/* The median of the finite values of x[0..n), NAN when none. */
static double median_finite(const double *x, int n)
{
	double v[AB_SAMPLE_REPS_MAX], m = NAN;
	int k = 0;
	for (int i = 0; i < n && k < AB_SAMPLE_REPS_MAX; i++)
		if (isfinite(x[i]))
			v[k++] = x[i];
	if (k > 0 && ab_stats_median(&m, v, (size_t)k) != 0)
		m = NAN;
	return m;
}

/* A request's prompt into L->prompt: keyed by (seed, model/what, ctx, pair), so base and head of a
 * pair get the same one and every rep and warm-up a different one (no prefix cache can help). */
static int prompt_make(struct ab_measure_loop *L, const char *model, const char *what, int rep, int ctx,
	int pair, uint32_t vocab, struct ab_sut_fault *fault)
{
	char key[128];
	if (what == NULL && rep == 0)
		snprintf(key, sizeof(key), "%s", model);     /* the prompts of the single-request design */
	else
		snprintf(key, sizeof(key), "%s/%s%d", model, what ? what : "rep", rep);
	if (ab_schedule_prompt(L->prompt, L->cfg->seed, key, ctx, pair, vocab) < 0) {
		fault->kind = AB_SUT_PROTOCOL;
		snprintf(fault->reason, sizeof(fault->reason), "prompt: %.240s", ab_error_last());
		return -1;
	}
	return 0;
}

/* Fences: a FENCE_TOKENS-token, one-token request; returns its time (write -> done) in *out_ms and,
 * when t_write_ns is not NULL, the time its request was written. */
struct fence {
	uint32_t ids[FENCE_TOKENS];
	double floor_ms;
};

static int fence_run(double *out_ms, int64_t *t_write_ns, struct fence *f, ab_sut *sut,
	struct ab_sut_fault *fault)
{
	struct ab_sut_gen gen = { 0 };
	if (ab_sut_generate(&gen, fault, sut, (const int32_t *)f->ids, FENCE_TOKENS, 1, 0) < 0)
		return -1;
	*out_ms = (gen.t_done_ns - gen.t_write_ns) / 1e6;
	if (t_write_ns != NULL)
		*t_write_ns = gen.t_write_ns;
	ab_sut_gen_clear(&gen);
	return 0;
}

/* The work found left over by the fence after a decode request whose done event was read at
 * t_done_ns, in ms (0: none beyond the slack). A fence that finds the engine still busy means it was
 * busy since its done line, so the harness's own time between reading that line and writing the
 * fence counts as well: under load that turnaround is a few percent of a short decode, and an
 * engine that answers early must not pocket it. The slack only decides whether the engine was busy;
 * a busy engine is charged all of the fence above the floor, not above floor x 1.1 + slack (that
 * discount was ~0.4% of the test mock's 30 ms decode). What an early engine still gains is one
 * wake-up: its fence request waits in the pipe, where an idle engine's fence (the floor) has to
 * wake it; that is well under a millisecond per request, on a loaded box too. */
static int fence_deferred(double *out_ms, struct fence *f, ab_sut *sut, int64_t t_done_ns,
	struct ab_sut_fault *fault)
{
	double ms;
	int64_t t_write = 0;
	if (fence_run(&ms, &t_write, f, sut, fault) < 0)
		return -1;
	int busy = ms > 1.1 * f->floor_ms + FENCE_SLACK_MS;
	double gap = t_write > t_done_ns ? (t_write - t_done_ns) / 1e6 : 0;
	*out_ms = busy ? ms - f->floor_ms + gap : 0;
	return 0;
}

/* The figures of one plain timed request (decode interval charged with deferred work). */
static void rep_fill(struct ab_measure_rep *r, const struct ab_sut_gen *gen, double deferred_ms)
{
	double decode_ms = (gen->t_done_ns - gen->t_first_ns) / 1e6 + deferred_ms;
	r->harness_ms[0] = decode_ms;
	r->harness_ms[1] = gen->ttft_s * 1e3;
	r->value[0] = gen->n_tokens >= 2 && decode_ms > 0 ? (gen->n_tokens - 1) / (decode_ms / 1e3) : NAN;
	r->value[1] = gen->prefill_tps;
	r->value[2] = NAN;
	r->engine_ms[0] = stat_ms(gen->stats, "decode_ms");
	r->engine_ms[1] = stat_ms(gen->stats, "prefill_ms");
	r->deferred_ms = deferred_ms;
	r->why[0] = '\0';
	stats_text(r->stats, sizeof(r->stats), gen->stats);
}

/* Sample `out` from the reps of one (slot, metric k): the median value, all raw values, the harness
 * and engine medians and the stats of the request nearest the median. k indexes value[]; hk the
 * harness/engine interval (-1: none). */
static void sample_from_reps(struct ab_sample *out, const struct ab_measure_rep *reps, int n, int k, int hk)
{
	double v[AB_SAMPLE_REPS_MAX] = { 0 }, h[AB_SAMPLE_REPS_MAX] = { 0 }, e[AB_SAMPLE_REPS_MAX] = { 0 };
	int nearest = 0;
	out->reason[0] = '\0';
	for (int r = 0; r < n; r++) {
		v[r] = reps[r].value[k];
		h[r] = hk >= 0 ? reps[r].harness_ms[hk] : NAN;
		e[r] = hk >= 0 ? reps[r].engine_ms[hk] : NAN;
		out->rep_values[r] = v[r];
		if (reps[r].deferred_ms > out->deferred_ms)
			out->deferred_ms = reps[r].deferred_ms;
		if (reps[r].why[0] && out->reason[0] == '\0')
			snprintf(out->reason, sizeof(out->reason), "%s", reps[r].why);
	}
	out->reps = n;
	for (int r = 0; r < n; r++)
		if (!(isfinite(v[r]) && v[r] > 0)) {
			if (out->reason[0] == '\0')
				snprintf(out->reason, sizeof(out->reason), "protocol: %s of %g is not a positive value",
					out->metric, v[r]);
			out->ok = 0;
			out->value = NAN;
			return;
		}
	if (out->reason[0])
		return;
	double m = median_finite(v, n);
	for (int r = 1; r < n; r++)
		if (fabs(v[r] - m) < fabs(v[nearest] - m))
			nearest = r;
	out->ok = 1;
	out->value = m;
	out->harness_ms = median_finite(h, n);
	out->engine_ms = median_finite(e, n);
	snprintf(out->stats, sizeof(out->stats), "%s", reps[nearest].stats);
}

static void samples_fail_unfilled(struct ab_sample *v, size_t n, const char *reason)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i].ok && strcmp(v[i].reason, "not measured") == 0)
			snprintf(v[i].reason, sizeof(v[i].reason), "%s", reason);
}

/* ---- speculative decoding ------------------------------------------------------------------ */

/* The prompt of one spec request: cut from spec.prompts when the suite names a corpus, else seeded
 * random ids; keyed by (seed, model, ctx, pair, rep) either way. A corpus that cannot serve it stops
 * the loop. */
static int spec_prompt(struct ab_measure_loop *L, const char *model, int ctx, int pair, int rep, uint32_t vocab)
{
	char key[128];
	if (rep == 0)
		snprintf(key, sizeof(key), "%s/spec", model);
	else
		snprintf(key, sizeof(key), "%s/spec/r%d", model, rep);
	if (L->cfg->spec_corpus == NULL)
		return ab_schedule_prompt(L->prompt, L->cfg->seed, key, ctx, pair, vocab);
	struct ab_schedule_windows *w = NULL;
	if (rep == 0)
		snprintf(key, sizeof(key), "%s/spec/%d", model, pair);
	else
		snprintf(key, sizeof(key), "%s/spec/%d/r%d", model, pair, rep);
	if (ab_schedule_windows_make(&w, L->cfg->seed, key, 1, ctx, L->cfg->spec_corpus, vocab) < 0) {
		ab_measure_fatal(L, "spec.prompts %s: %.180s", L->cfg->spec_corpus, ab_error_last());
		return -1;
	}
	memcpy(L->prompt, w->tokens, (size_t)ctx * sizeof(uint32_t));
	ab_schedule_windows_free(w);
	return 0;
}

void ab_measure_tally(int *compared, int *identical, int *first_diff, int *diff_ctx, int *diff_pair,
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

/* The three spec figures of one (plain, speculative) request pair. A speculative answer whose stats
 * are missing, malformed, or whose accept_mean disagrees with the harness's tau by more than
 * TAU_TOLERANCE fails the context's samples (a protocol fault of the sample, not of the process).
 * The decode intervals carry their fences' deferred work. */
static void spec_rep_fill(struct ab_measure_rep *r, struct ab_spec_exact *e, const struct ab_sut_gen *plain,
	const struct ab_sut_gen *spec, const double deferred_ms[2])
{
	struct ab_sut_spec_stats st;
	double tau = NAN, ms[2];
	r->why[0] = '\0';
	if (ab_sut_parse_spec_stats(&st, spec->stats, spec->n_tokens) < 0) {
		snprintf(r->why, sizeof(r->why), "protocol: spec stats: %.160s", ab_error_last());
	} else {
		tau = (double)(spec->n_tokens - 1) / st.target_steps;
		if (fabs(st.accept_mean / tau - 1.0) > TAU_TOLERANCE)
			snprintf(r->why, sizeof(r->why), "protocol: the engine's accept_mean %.4g disagrees with the "
				"harness's tau %.4g (%d tokens in %d target steps)", st.accept_mean, tau,
				spec->n_tokens, st.target_steps);
	}
	const struct ab_sut_gen *g[2] = { plain, spec };
	double tps[2];
	for (int k = 0; k < 2; k++) {
		ms[k] = (g[k]->t_done_ns - g[k]->t_first_ns) / 1e6 + deferred_ms[k];
		tps[k] = ms[k] > 0 ? (g[k]->n_tokens - 1) / (ms[k] / 1e3) : NAN;
	}
	r->value[0] = tps[1];
	r->value[1] = tau;
	r->value[2] = tps[1] / tps[0];
	r->harness_ms[0] = ms[1];
	r->harness_ms[1] = spec->ttft_s * 1e3;
	r->engine_ms[0] = stat_ms(spec->stats, "decode_ms");
	r->engine_ms[1] = stat_ms(spec->stats, "prefill_ms");
	r->deferred_ms = deferred_ms[0] > deferred_ms[1] ? deferred_ms[0] : deferred_ms[1];
	stats_text(r->stats, sizeof(r->stats), spec->stats);
	if (r->why[0] && e->stats_faults++ == 0)
		snprintf(e->stats_example, sizeof(e->stats_example), "%.150s", r->why + strlen("protocol: "));
}

/*
 * The spec part of one process: a speculative (and a plain) warm-up at every spec context, then
 * speed.reps passes, each answering every spec context plain and speculatively (the order
 * alternating with pair, context and rep). v points at the first spec sample.
 */
static int spec_run(struct ab_measure_loop *L, struct ab_sample *v, ab_sut *sut, struct fence *fence, int side,
	int model, int pair, uint32_t vocab, struct ab_sut_fault *fault)
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
		ab_measure_fatal(L, "%s SUT: %s", side_name(side), fault->reason);
		return -1;
	}
	if (L->report->spec_kind[model][0] == '\0') {
		snprintf(L->report->spec_kind[model], sizeof(L->report->spec_kind[model]), "%s", ab_sut_spec(sut)->kind);
		L->report->spec_block[model] = ab_sut_spec(sut)->block_size;
	}
	for (int i = 0; i < L->n_spec; i++) {
		if (spec_prompt(L, model_name, L->spec_ctx[i], -1, 0, vocab) < 0)
			goto prompt_failed;
		for (int k = 0; k < 2; k++) {
			if (ab_sut_generate(&gen[k], fault, sut, (const int32_t *)L->prompt, L->spec_ctx[i],
				k ? WARMUP_TOKENS : 2, k) < 0)
				goto cleanup;
			ab_sut_gen_clear(&gen[k]);
		}
	}
	for (int r = 0; r < L->reps; r++) {
		for (int i = 0; i < L->n_spec; i++) {
			int ctx = L->spec_ctx[i], first = (pair + i + r) % 2;   /* 0: plain first */
			double deferred[2] = { 0, 0 };
			if (spec_prompt(L, model_name, ctx, pair, r, vocab) < 0)
				goto prompt_failed;
			for (int k = 0; k < 2; k++) {
				int speculative = k == 0 ? first : 1 - first;
				if (ab_sut_generate(&gen[speculative], fault, sut, (const int32_t *)L->prompt, ctx,
					spec->gen_tokens, speculative) < 0 ||
				    fence_deferred(&deferred[speculative], fence, sut, gen[speculative].t_done_ns, fault) < 0)
					goto cleanup;
			}
			ab_measure_tally(&e->compared, &e->identical, &e->first_diff, &e->diff_ctx, &e->diff_pair,
				gen[0].tokens, gen[0].n_tokens, gen[1].tokens, gen[1].n_tokens, ctx, pair);
			spec_rep_fill(&L->rep[i * L->reps + r], e, &gen[0], &gen[1], deferred);
			ab_sut_gen_clear(&gen[0]);
			ab_sut_gen_clear(&gen[1]);
		}
	}
	for (int i = 0; i < L->n_spec; i++)
		for (int k = 0; k < AB_MEASURE_SPEC_METRICS; k++)
			sample_from_reps(&v[i * AB_MEASURE_SPEC_METRICS + k], &L->rep[i * L->reps], L->reps, k,
				k == 0 ? 0 : -1);
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

/* ---- one process ----------------------------------------------------------------------------- */

int ab_measure_process_run(struct ab_measure_loop *L, struct ab_sample *v, size_t n, int side, int model,
	int pair, struct ab_sut_fault *fault)
{
	const struct ab_measure_config *cfg = L->cfg;
	const struct ab_suite *suite = cfg->suite;
	const struct ab_measure_sut *cmd = &cfg->sut[side][model];
	const char *model_name = suite->models[model].name;
	char log_path[4096];
	ab_sut *sut = NULL;
	struct ab_sut_gen gen = { 0 };
	struct fence fence = { .floor_ms = INFINITY };
	int faulted = 1;

	snprintf(log_path, sizeof(log_path), "%s/%s-%s.log", cfg->log_dir, side_name(side), model_name);
	struct ab_sut_config sc = {
		.argv = cmd->argv,
		.env = cmd->env,
		.cwd = cmd->cwd,
		.http = cmd->http.url ? &cmd->http : NULL,
		.stderr_log = log_path,
		.ready_timeout_ms = suite->sut.ready_timeout_s * 1000,
		.request_timeout_ms = suite->sut.request_timeout_s * 1000,
		.sandbox_status = cmd->sandbox_status,
	};
	memset(fault, 0, sizeof(*fault));
	ab_measure_answers_clear(L, side);
	L->report->processes++;
	if (ab_sut_start(&sut, fault, &sc) < 0) {
		if (fault->kind == AB_SUT_SANDBOX)   /* the box's: stop now, as infra, with bwrap's reason */
			ab_measure_fatal(L, "%s SUT: %s", side_name(side), fault->reason);
		goto cleanup;
	}
	if (L->report->ready[side] == NULL)
		L->report->ready[side] = json_deep_copy(ab_sut_ready(sut));

	uint32_t vocab = (uint32_t)ab_sut_vocab_size(sut);
	if (L->report->vocab[model] == 0)
		L->report->vocab[model] = vocab;

	/* Process warm-up (discarded), then the fence floor: fences right after a fence carry no left-over
	 * work of a decode request, so their minimum is what a fence costs. */
	if (prompt_make(L, model_name, "warmup", 0, FENCE_TOKENS, -1, vocab, fault) < 0 ||
	    ab_sut_generate(&gen, fault, sut, (const int32_t *)L->prompt, FENCE_TOKENS, WARMUP_TOKENS, 0) < 0)
		goto cleanup;
	ab_sut_gen_clear(&gen);
	if (ab_schedule_prompt(fence.ids, cfg->seed, "fence", FENCE_TOKENS, -1, vocab) < 0) {
		fault->kind = AB_SUT_PROTOCOL;
		snprintf(fault->reason, sizeof(fault->reason), "prompt: %.240s", ab_error_last());
		goto cleanup;
	}
	for (int k = 0; k < FENCE_CALIBRATE; k++) {
		double ms;
		if (fence_run(&ms, NULL, &fence, sut, fault) < 0)
			goto cleanup;
		if (k > 0 && ms < fence.floor_ms)
			fence.floor_ms = ms;
	}

	/* The shape warm-up: the first request of every length, two tokens (a prefill at that length and
	 * one decode step after it). Its TTFT is the cold-start figure first_prefill_tps. */
	for (int i = 0; i < L->n_slots; i++) {
		const struct ab_measure_slot *s = &L->slots[i];
		if (prompt_make(L, model_name, "first", 0, s->ctx, pair, vocab, fault) < 0 ||
		    ab_sut_generate(&gen, fault, sut, (const int32_t *)L->prompt, s->ctx, 2, 0) < 0)
			goto cleanup;
		if (s->idx[2] >= 0) {
			struct ab_measure_rep r;
			rep_fill(&r, &gen, 0);
			sample_from_reps(&v[s->idx[2]], &r, 1, 1, 1);
			v[s->idx[2]].t_start_ns = gen.t_write_ns;
			v[s->idx[2]].t_end_ns = gen.t_done_ns;
		}
		ab_sut_gen_clear(&gen);
	}

	/* speed.reps timed passes over every context (passes, not repeats in place: a rep follows other
	 * lengths, as a real request does). */
	int64_t t_start = 0, t_end = 0;
	for (int r = 0; r < L->reps; r++) {
		for (int i = 0; i < L->n_slots; i++) {
			const struct ab_measure_slot *s = &L->slots[i];
			/* a context above speed.reps_ctx_max is timed once (in the first pass) */
			const int n_reps = suite->speed.reps_ctx_max > 0 && s->ctx > suite->speed.reps_ctx_max ? 1 : L->reps;
			if (r >= n_reps)
				continue;
			int max_tokens = s->decode ? suite->speed.gen_tokens : 1;
			double deferred = 0;
			if (prompt_make(L, model_name, NULL, r, s->ctx, pair, vocab, fault) < 0 ||
			    ab_sut_generate(&gen, fault, sut, (const int32_t *)L->prompt, s->ctx, max_tokens, 0) < 0 ||
			    (s->decode && fence_deferred(&deferred, &fence, sut, gen.t_done_ns, fault) < 0))
				goto cleanup;
			if (t_start == 0)
				t_start = gen.t_write_ns;
			t_end = gen.t_done_ns;
			rep_fill(&L->rep[i * L->reps + r], &gen, deferred);
			if (s->decode && r == 0) {   /* the tokens move to the answer (greedy agreement) */
				L->answers[side][i] = (struct ab_measure_answer){ gen.tokens, gen.n_tokens };
				gen.tokens = NULL;
			}
			ab_sut_gen_clear(&gen);
			for (int k = 0; k < 2 && r == n_reps - 1; k++)   /* its last rep: the samples */
				if (s->idx[k] >= 0) {
					struct ab_sample *out = &v[s->idx[k]];
					sample_from_reps(out, &L->rep[i * L->reps], n_reps, k, k);
					out->t_start_ns = t_start;
					out->t_end_ns = t_end;
				}
		}
	}
	if (suite->models[model].has_draft && L->n_spec > 0) {
		int64_t t0 = ab_proc_now_ns();
		if (spec_run(L, v + L->n_plain, sut, &fence, side, model, pair, vocab, fault) < 0)
			goto cleanup;
		for (size_t i = (size_t)L->n_plain; i < n; i++) {
			v[i].t_start_ns = t0;
			v[i].t_end_ns = ab_proc_now_ns();
		}
	}
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
		samples_fail_unfilled(v, n, reason);
	}
	return faulted;
}

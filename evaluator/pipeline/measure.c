/*
 * measure.c - the interleaved A/B measurement loop (see measure.h): pairs, sides, retries and the
 * adaptive plan. One SUT process's requests live in measure_process.c. Faults are retried once per
 * process and otherwise become failed samples carrying the fault's reason.
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
#include "sut.h"

#define CONSECUTIVE_FAILS_STOP 3    /* a side failing this many processes in a row stops the loop */
#define SLOTS_MAX AB_MEASURE_SLOTS_MAX

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
static int slots_make(struct ab_measure_loop *L)
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
		struct ab_measure_slot *s = &L->slots[L->n_slots++];
		s->ctx = all[i];
		for (int j = 0; j < sp->decode_count; j++)
			s->decode |= sp->decode_contexts[j] == all[i];
		for (int j = 0; j < sp->prefill_count; j++)
			s->prefill |= sp->prefill_contexts[j] == all[i];
		if (all[i] > L->max_ctx)
			L->max_ctx = all[i];
	}
	free(all);
	for (int i = 0; i < L->n_slots; i++) {     /* sample order: decode, prefill, first_prefill */
		struct ab_measure_slot *s = &L->slots[i];
		s->idx[0] = s->decode ? L->n_plain++ : -1;
		s->idx[1] = s->prefill ? L->n_plain++ : -1;
		s->idx[2] = s->prefill ? L->n_plain++ : -1;
	}
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
	L->reps = L->cfg->suite->speed.reps >= 1 ? L->cfg->suite->speed.reps : 1;
	if (L->reps > AB_SAMPLE_REPS_MAX)
		L->reps = AB_SAMPLE_REPS_MAX;
	int most = L->n_slots > L->n_spec ? L->n_slots : L->n_spec;
	L->rep = calloc((size_t)(most ? most : 1) * (size_t)L->reps, sizeof(*L->rep));
	L->process = calloc(AB_MEASURE_PROCESS_SAMPLES_MAX, sizeof(*L->process));
	L->prompt = malloc((size_t)(L->max_ctx > 0 ? L->max_ctx : 1) * sizeof(uint32_t));
	if (L->rep == NULL || L->process == NULL)
		return ab_error_set("measure: out of memory");
	return L->prompt ? 0 : ab_error_set("measure: out of memory for a %d-token prompt", L->max_ctx);
}

/* Greedy agreement: compares the decode tokens both sides gave `model` in `pair` (the latest
 * process of each side, so a retried process counts once), then drops them. */
static void agreement_add(struct ab_measure_loop *L, int model, int pair)
{
	struct ab_measure_agreement *a = &L->report->agreement[model];
	for (int i = 0; i < L->n_slots; i++) {
		const struct ab_measure_answer *b = &L->answers[AB_SIDE_BASE][i], *h = &L->answers[AB_SIDE_HEAD][i];
		if (b->tokens == NULL || h->tokens == NULL)
			continue;
		ab_measure_tally(&a->compared, &a->identical, &a->first_diff, &a->diff_ctx, &a->diff_pair,
			b->tokens, b->n, h->tokens, h->n, L->slots[i].ctx, pair);
	}
	ab_measure_answers_clear(L, AB_SIDE_BASE);
	ab_measure_answers_clear(L, AB_SIDE_HEAD);
}

/* One side of one pair for one model, with one retry on a fault. Appends and stores the samples. */
static int side_run(struct ab_measure_loop *L, int side, int model, int pair, int order, int batch)
{
	struct ab_sample *v = L->process;
	struct ab_sut_fault fault;
	size_t n = ab_measure_process_init(v, L, side, model, pair, order, batch, "not measured");
	int faulted = ab_measure_process_run(L, v, n, side, model, pair, &fault);

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
		ab_measure_process_init(v, L, side, model, pair, order, batch, "not measured");
		faulted = ab_measure_process_run(L, v, n, side, model, pair, &fault);
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

static int pair_run(struct ab_measure_loop *L, int pair, int batch)
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

static void progress(const struct ab_measure_loop *L, int batch, int done, int target, int64_t t0, int64_t t_batch0)
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
	struct ab_measure_loop L = { 0 };
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
	if (cfg->suite->speed.gate_first_request)
		for (int i = 0; i < L.n_slots; i++)
			n_gating += (size_t)L.slots[i].prefill;
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
	ab_measure_answers_clear(&L, AB_SIDE_BASE);
	ab_measure_answers_clear(&L, AB_SIDE_HEAD);
	free(L.slots);
	free(L.prompt);
	free(L.rep);
	free(L.process);
	return error;
}

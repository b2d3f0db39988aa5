/*
 * test_speed.c - guards/speed: grouping and pairing, failed pairs, labels, infra on failures,
 * the adaptive plan and the confirmation batch, feasibility, power (20% changes with 8 pairs at 2%
 * noise) and the family-wise false-positive rate of the whole gating family over many simulated
 * evaluations (A/A, at the decision boundaries, with adaptive looks, heavy tails and drift).
 */
#include <stdlib.h>

#include "check.h"
#include "error.h"
#include "sim.h"
#include "speed.h"

#define MAX_SAMPLES 8192
static struct ab_sample buf[MAX_SAMPLES];

static struct ab_speed_result *decide(size_t n, const struct ab_speed_policy *policy)
{
	struct ab_speed_result *r = NULL;
	int error = ab_speed_decide(&r, buf, n, policy);
	if (error) {
		fprintf(stderr, "ab_speed_decide: %s\n", ab_error_last());
		CHECK(!"decide failed");
	}
	return r;
}

static const struct ab_speed_series *find(const struct ab_speed_result *r, const char *model,
	const char *metric, int ctx)
{
	for (size_t i = 0; i < r->n_series; i++)
		if (strcmp(r->series[i].model, model) == 0 && strcmp(r->series[i].metric, metric) == 0 &&
		    r->series[i].ctx == ctx)
			return &r->series[i];
	return NULL;
}

static void policy_fixed(struct ab_speed_policy *p, int pairs)
{
	ab_speed_policy_init(p);
	p->pairs_min = p->pairs_max = pairs;
	p->looks = 1;
	p->confirm_pairs = 0;
}

static void test_labels(void)
{
	char b[64];
	ab_speed_ctx_name(b, sizeof(b), 128);
	CHECK_STR(b, "128");
	ab_speed_ctx_name(b, sizeof(b), 4096);
	CHECK_STR(b, "4k");
	ab_speed_ctx_name(b, sizeof(b), 32768);
	CHECK_STR(b, "32k");
	ab_speed_ctx_name(b, sizeof(b), 131072);
	CHECK_STR(b, "128k");
	ab_speed_ctx_name(b, sizeof(b), 1000);
	CHECK_STR(b, "1000");
	ab_speed_regression_label(b, sizeof(b), "qwen3-0.6b", 1, "decode_tps", 4096);
	CHECK_STR(b, "regression-4k");
	ab_speed_regression_label(b, sizeof(b), "qwen3-0.6b", 1, "prefill_tps", 16384);
	CHECK_STR(b, "regression-16k-pp");
	ab_speed_regression_label(b, sizeof(b), "qwen3-8b", 0, "decode_tps", 512);
	CHECK_STR(b, "regression-qwen3-8b-512");
	ab_speed_regression_label(b, sizeof(b), "we ird/name", 0, "prefill_tps", 128);
	CHECK_STR(b, "regression-we-ird-name-128-pp");
	ab_speed_regression_label(b, sizeof(b), "m", 1, "ttft_ms", 128);
	CHECK_STR(b, "regression-128-ttft_ms");
	ab_speed_regression_label(b, sizeof(b),
		"a-very-long-model-name-that-goes-on-and-on-and-on-and-on", 0, "decode_tps", 4096);
	CHECK_STR(b, "regression-a-very-long-model-name-that-goes-on--4k");   /* 50: the model is cut */
	ab_speed_regression_label(b, sizeof(b),
		"a-very-long-model-name-that-goes-on-and-on-and-on-and-on", 0, "prefill_tps", 16384);
	CHECK_STR(b, "regression-a-very-long-model-name-that-goes-16k-pp");
	CHECK(strcmp(ab_tier_name(2), "M") == 0 && strcmp(ab_tier_name(-1), "none") == 0);
	CHECK(ab_tier_from_name("XL") == 4 && ab_tier_from_name("Q") == -1);
	CHECK(ab_failure_classify("timeout after 120 s") == AB_FAILURE_TIMEOUT);
	CHECK(ab_failure_classify("crashed: signal 11") == AB_FAILURE_CRASH);
	CHECK(ab_failure_classify("CUDA out of memory") == AB_FAILURE_OOM);
	CHECK(ab_failure_classify("malformed line from SUT") == AB_FAILURE_PROTOCOL);
	CHECK(ab_failure_classify("???") == AB_FAILURE_OTHER);
	CHECK(ab_failure_classify(NULL) == AB_FAILURE_OTHER);
}

static void test_grouping(void)
{
	static const struct sim_series series[] = {
		{ "small", "prefill_tps", 16384, 1.0 },
		{ "big", "decode_tps", 4096, 1.0 },
		{ "small", "decode_tps", 4096, 1.0 },
		{ "small", "decode_tps", 128, 1.0 },
		{ "small", "ttft_ms", 128, 1.0 },
	};
	struct sim sim = { series, 5, SIM_NORMAL, 0.02, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, 11);
	size_t n = sim_pairs(buf, 0, &sim, &rng, 0, 8, 0);
	struct ab_speed_policy p;
	policy_fixed(&p, 8);
	const char *models[] = { "small", "big" };
	p.models = models;
	p.n_models = 2;
	struct ab_speed_result *r = decide(n, &p);
	if (!r)
		return;
	CHECK(r->n_series == 5);
	CHECK(r->n_gating == 4);                    /* ttft_ms has no rule: advisory */
	CHECK(r->n_models == 2);
	CHECK_STR(r->models[0].name, "small");
	/* Order: model (policy order), decode before prefill before others, ctx ascending. */
	CHECK_STR(r->series[0].metric, "decode_tps");
	CHECK(r->series[0].ctx == 128);
	CHECK(r->series[1].ctx == 4096);
	CHECK_STR(r->series[2].metric, "prefill_tps");
	CHECK_STR(r->series[3].metric, "ttft_ms");
	CHECK_STR(r->series[4].model, "big");
	CHECK_STR(r->series[1].label, "regression-4k");
	CHECK_STR(r->series[2].label, "regression-16k-pp");
	CHECK_STR(r->series[3].label, "");
	CHECK(r->series[3].gating == 0);
	CHECK_STR(r->series[4].label, "regression-big-4k");
	CHECK(r->series[0].n_pairs == 8 && r->series[0].base.n == 8 && r->series[0].head.n == 8);
	CHECK(r->series[0].ratio > 0.95 && r->series[0].ratio < 1.05);
	CHECK(r->series[0].ci.lo < r->series[0].ratio && r->series[0].ratio < r->series[0].ci.hi);
	CHECK(r->series[0].ci_adj.lo <= r->series[0].ci.lo && r->series[0].ci_adj.hi >= r->series[0].ci.hi);
	CHECK(r->series[0].base.median > 900 && r->series[0].base.median < 1100);
	CHECK(r->pairs == 8 && !r->open);
	CHECK(strstr(r->method, "4 gating series") != NULL);
	printf("method: %s\n", r->method);
	ab_speed_result_free(r);

	/* Without a model list the first model seen is primary. */
	p.models = NULL;
	p.n_models = 0;
	r = decide(n, &p);
	if (r) {
		CHECK_STR(r->models[0].name, "small");
		ab_speed_result_free(r);
	}

	/* Errors on purpose: a duplicate sample, a bad side, an invalid policy. */
	buf[n] = buf[0];
	struct ab_speed_result *bad = NULL;
	CHECK(ab_speed_decide(&bad, buf, n + 1, &p) == AB_EINVALID && bad == NULL);
	CHECK(strstr(ab_error_last(), "two base samples") != NULL);
	buf[n].side = 7;
	CHECK(ab_speed_decide(&bad, buf, n + 1, &p) == AB_EINVALID);
	p.alpha = 0.7;
	CHECK(ab_speed_decide(&bad, buf, n, &p) == AB_EINVALID);
	policy_fixed(&p, 8);
	p.tiers[2] = 0.01;                          /* not increasing */
	CHECK(ab_speed_decide(&bad, buf, n, &p) == AB_EINVALID);
	policy_fixed(&p, 8);
	r = decide(0, &p);                          /* nothing measured: no series, nothing open */
	if (r) {
		CHECK(r->n_series == 0 && r->tier == -1 && !r->reject);
		ab_speed_result_free(r);
	}
}

/* A regression flagged while the run also lost too many pairs: the confirmation batch cannot run,
 * so nothing may REJECT; the infra flag makes the verdict a re-run instead. */
static void test_unconfirmed_under_infra(void)
{
	static const struct sim_series ser[] = { { "m", "decode_tps", 128, 0.80 }, { "m", "decode_tps", 4096, 1.0 } };
	struct sim sim = { ser, 2, SIM_NORMAL, 0.01, 0, 0 };
	struct ab_sample v[2 * 2 * 16];
	struct ab_rng rng;
	ab_rng_seed(&rng, 9);
	size_t n = sim_pairs(v, 0, &sim, &rng, 0, 16, 0);
	for (size_t i = 0; i < n; i++)        /* the 4k series loses 8 of 16 pairs on the head side */
		if (v[i].ctx == 4096 && v[i].side == AB_SIDE_HEAD && v[i].pair % 2 == 0) {
			v[i].ok = 0;
			snprintf(v[i].reason, sizeof(v[i].reason), "timeout after 120 s");
		}
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.pairs_min = p.pairs_max = 16;
	p.confirm_pairs = 6;
	struct ab_speed_result *r = NULL;
	CHECK(ab_speed_decide(&r, v, n, &p) == 0);
	if (r) {
		CHECK(r->infra);
		CHECK(r->regression);
		CHECK(!r->reject);
		CHECK(!r->series[0].confirmed);
	}
	ab_speed_result_free(r);
	/* Without a confirmation batch configured the same regression REJECTs. */
	p.confirm_pairs = 0;
	CHECK(ab_speed_decide(&r, v, n, &p) == 0);
	if (r)
		CHECK(r->reject);
	ab_speed_result_free(r);
}

static void test_failures(void)
{
	static const struct sim_series series[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "decode_tps", 32768, 1.0 },
	};
	struct sim sim = { series, 2, SIM_NORMAL, 0.02, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, 12);
	size_t n = sim_pairs(buf, 0, &sim, &rng, 0, 12, 0);
	/* Head fails at 32k in 2 pairs (timeout), base crashes in 1 pair; a 128 sample is missing. */
	int fails = 0;
	for (size_t i = 0; i < n; i++) {
		struct ab_sample *s = &buf[i];
		if (s->ctx == 32768 && s->side == AB_SIDE_HEAD && (s->pair == 3 || s->pair == 7)) {
			s->ok = 0;
			s->value = NAN;
			snprintf(s->reason, sizeof(s->reason), "timeout after 120 s");
			fails++;
		}
		if (s->ctx == 32768 && s->side == AB_SIDE_BASE && s->pair == 5) {
			s->ok = 0;
			s->value = NAN;
			snprintf(s->reason, sizeof(s->reason), "crashed: signal 11");
		}
	}
	CHECK(fails == 2);
	for (size_t i = 0; i < n; i++)
		if (buf[i].ctx == 128 && buf[i].side == AB_SIDE_HEAD && buf[i].pair == 0) {
			buf[i] = buf[--n];                  /* drop: the pair misses its head sample */
			break;
		}
	struct ab_speed_policy p;
	policy_fixed(&p, 12);
	struct ab_speed_result *r = decide(n, &p);
	if (!r)
		return;
	const struct ab_speed_series *s32 = find(r, "m", "decode_tps", 32768);
	const struct ab_speed_series *s128 = find(r, "m", "decode_tps", 128);
	CHECK(s32 && s32->n_pairs == 9 && s32->pairs == 12);
	CHECK(s32 && s32->head.failed == 2 && s32->base.failed == 1 && s32->head.n == 10);
	CHECK(s128 && s128->n_pairs == 11 && s128->pairs - s128->n_pairs == 1);
	CHECK(r->failures[AB_SIDE_HEAD].failed == 2);
	CHECK(r->failures[AB_SIDE_HEAD].by_kind[AB_FAILURE_TIMEOUT] == 2);
	CHECK(r->failures[AB_SIDE_BASE].by_kind[AB_FAILURE_CRASH] == 1);
	CHECK_STR(r->failures[AB_SIDE_HEAD].example, "timeout after 120 s");
	CHECK(!r->infra);                           /* 3 of 12 = 25%: not more than the limit */
	ab_speed_result_free(r);

	p.max_failed_fraction = 0.2;
	r = decide(n, &p);
	if (!r)
		return;
	CHECK(r->infra && !r->open);
	CHECK(strstr(r->infra_reason, "32768") != NULL);
	CHECK(strstr(r->infra_reason, "2 timeout") != NULL);
	CHECK(strstr(r->infra_reason, "1 crash") != NULL);
	CHECK(r->models[0].infra);
	printf("infra reason: %s\n", r->infra_reason);
	ab_speed_result_free(r);
}

static void test_feasibility(void)
{
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	int first = 0, last = 0;
	p.pairs_min = 2;
	CHECK(ab_speed_pairs_needed(&first, &last, &p, 8) == 0);
	CHECK(first == 10);                         /* 0.05 / 48: 2^-10 <= 0.00104 */
	CHECK(last == 16);
	CHECK(ab_speed_pairs_needed(&first, &last, &p, 18) == 0);
	CHECK(first == 12);                         /* 0.05 / 108 = 4.6e-4 > 2^-11 = 4.9e-4? no: 12 */
	p.looks = 1;
	CHECK(ab_speed_pairs_needed(&first, NULL, &p, 1) == 0);
	CHECK(first == 6);                          /* 0.025: 2^-6 */
	p.pairs_min = 20;
	CHECK(ab_speed_pairs_needed(&first, &last, &p, 1) == 0);
	CHECK(first == 20 && last == 20);           /* pairs_max below the first look is raised */
	p.looks = 0;
	CHECK(ab_speed_pairs_needed(&first, &last, &p, 1) == AB_EINVALID);
}

/* 20% changes on 4 gating series, 8 pairs at 2% noise, one look: detected every time. */
static void test_power(void)
{
	static const struct sim_series slow[] = {
		{ "m", "decode_tps", 512, 0.80 }, { "m", "decode_tps", 4096, 1.0 },
		{ "m", "prefill_tps", 512, 1.0 }, { "m", "prefill_tps", 4096, 1.0 },
	};
	static const struct sim_series fast[] = {
		{ "m", "decode_tps", 512, 1.0 }, { "m", "decode_tps", 4096, 1.20 },
		{ "m", "prefill_tps", 512, 1.0 }, { "m", "prefill_tps", 4096, 1.0 },
	};
	struct ab_speed_policy p;
	policy_fixed(&p, 8);
	int runs = 200, rejected = 0, regressed = 0, tier_m = 0, false_label = 0;
	for (int i = 0; i < runs; i++) {
		struct ab_rng rng;
		ab_rng_seed(&rng, 1000 + (uint64_t)i);
		struct sim s1 = { slow, 4, SIM_NORMAL, 0.02, 0, 0 };
		size_t n = sim_pairs(buf, 0, &s1, &rng, 0, 8, 0);
		struct ab_speed_result *r = decide(n, &p);
		if (!r)
			return;
		const struct ab_speed_series *s = find(r, "m", "decode_tps", 512);
		rejected += r->reject && s->confirmed;
		regressed += s->outcome == AB_OUTCOME_REGRESSED;
		for (size_t k = 0; k < r->n_series; k++) {
			false_label += &r->series[k] != s && r->series[k].confirmed;
			/* Test inversion: the adjusted p-value and the posted bound agree (no ties here). */
			CHECK((r->series[k].p_adj <= p.alpha) == r->series[k].regression);
		}
		ab_speed_result_free(r);

		struct sim s2 = { fast, 4, SIM_NORMAL, 0.02, 0, 0 };
		n = sim_pairs(buf, 0, &s2, &rng, 0, 8, 0);
		if ((r = decide(n, &p)) == NULL)
			return;
		tier_m += r->tier >= 2 && !r->reject;
		ab_speed_result_free(r);
	}
	printf("power, 8 pairs, 2%% noise, 4 gating series: 20%% slowdown REJECT %d/%d, outcome "
		"regressed %d/%d; 20%% gain tier >= M %d/%d\n", rejected, runs, regressed, runs, tier_m, runs);
	CHECK(rejected == runs);
	CHECK(regressed == runs);
	CHECK(tier_m == runs);
	CHECK(false_label == 0);
}

/* The plan: first look raised to feasibility, looks while undecided, then the confirmation batch. */
static void test_adaptive(void)
{
	static const struct sim_series aa[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "decode_tps", 4096, 1.0 },
	};
	static const struct sim_series slow[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "decode_tps", 4096, 0.80 },
	};
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.pairs_min = 4;
	p.pairs_max = 24;
	p.looks = 3;                                /* tail 0.05/12: first look 8 pairs */
	struct ab_rng rng;
	ab_rng_seed(&rng, 21);
	struct sim sim = { aa, 2, SIM_NORMAL, 0.02, 0, 0 };
	size_t n = sim_pairs(buf, 0, &sim, &rng, 0, 4, 0);
	struct ab_speed_result *r = decide(n, &p);
	if (!r)
		return;
	CHECK(r->open && r->next_batch == 0 && r->next_pairs == 8 && r->look == 0);
	CHECK(r->pairs_min == 8 && r->pairs_max == 24);
	ab_speed_result_free(r);

	/* A/A with 2% noise: at 8 pairs the 4k series cannot yet exclude < 0.98: open, next look 16. */
	n = sim_pairs(buf, n, &sim, &rng, 4, 8, 0);
	if ((r = decide(n, &p)) == NULL)
		return;
	printf("A/A look 1: look %d open %d next %d: %s\n", r->look, r->open, r->next_pairs, r->open_reason);
	CHECK(r->look == 1 && r->open && r->next_pairs == 16);
	ab_speed_result_free(r);
	/* Calling between looks changes nothing: the plan still names the next look. */
	n = sim_pairs(buf, n, &sim, &rng, 8, 10, 0);
	if ((r = decide(n, &p)) == NULL)
		return;
	CHECK(r->look == 1 && r->open && r->next_pairs == 16);
	ab_speed_result_free(r);
	/* At the last look everything is final. */
	n = sim_pairs(buf, n, &sim, &rng, 10, 24, 0);
	if ((r = decide(n, &p)) == NULL)
		return;
	CHECK(r->look == 3 && !r->open && !r->reject && r->tier == -1);
	ab_speed_result_free(r);

	/* Very quiet A/A: decided at the first look (nothing can move past 0.98 or 1.02). */
	struct sim quiet = { aa, 2, SIM_NORMAL, 0.001, 0, 0 };
	n = sim_pairs(buf, 0, &quiet, &rng, 0, 8, 0);
	if ((r = decide(n, &p)) == NULL)
		return;
	CHECK(r->look == 1 && !r->open && r->tier == -1 && !r->reject);
	ab_speed_result_free(r);

	/* 20% slower at 4k: flagged at the first look, then the confirmation batch is asked for. */
	struct sim s2 = { slow, 2, SIM_NORMAL, 0.02, 0, 0 };
	n = sim_pairs(buf, 0, &s2, &rng, 0, 8, 0);
	if ((r = decide(n, &p)) == NULL)
		return;
	CHECK(r->regression && !r->reject && r->open && r->next_batch == 1);
	CHECK(r->next_pairs == 6);                  /* alpha / 1 flagged: 6 pairs suffice (2^-6) */
	ab_speed_result_free(r);
	size_t n0 = n;
	n = sim_pairs(buf, n, &s2, &rng, 8, 14, 1);
	if ((r = decide(n, &p)) == NULL)
		return;
	const struct ab_speed_series *s = find(r, "m", "decode_tps", 4096);
	CHECK(!r->open && r->reject && s->confirmed && s->confirm.tested && s->confirm.n_pairs == 6);
	CHECK(s->confirm.hi < 0.98 && s->confirm.ratio < 0.9);
	CHECK(r->models[0].reject);
	ab_speed_result_free(r);

	/* A transient slowdown the confirmation batch does not reproduce: no REJECT. */
	struct sim s3 = { aa, 2, SIM_NORMAL, 0.02, 0, 0 };
	n = sim_pairs(buf, n0, &s3, &rng, 8, 14, 1);
	if ((r = decide(n, &p)) == NULL)
		return;
	s = find(r, "m", "decode_tps", 4096);
	CHECK(!r->open && !r->reject && s->regression && !s->confirmed && s->confirm.tested);
	ab_speed_result_free(r);
}

/*
 * Family-wise false-positive rate over `runs` simulated evaluations of 8 gating series with true
 * ratios `ratio` (all series), under the policy's looks (the evaluator's loop). Counts evaluations
 * with any regression claim (before confirmation) and with any tier claim.
 */
static double family_pairs_mean, family_first_look;    /* of the latest family_rate call */
static double family_sigma = 0.02, family_equivalence = 0.90;

static void family_rate(double ratio, enum sim_noise noise, double drift, int looks, int pairs_min,
	int pairs_max, int runs, uint64_t seed, double *out_reg, double *out_tier)
{
	struct sim_series series[8];
	static const int ctx[4] = { 128, 512, 4096, 16384 };
	for (int i = 0; i < 8; i++) {
		series[i].model = "m";
		series[i].metric = i < 4 ? "decode_tps" : "prefill_tps";
		series[i].ctx = ctx[i % 4];
		series[i].ratio = ratio;
	}
	struct sim sim = { series, 8, noise, family_sigma, 0.10, drift };
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.equivalence_level = family_equivalence;
	p.looks = looks;
	p.pairs_min = pairs_min;
	p.pairs_max = pairs_max;
	p.confirm_pairs = 0;
	int reg = 0, tier = 0, first_look = 0;
	double pairs_sum = 0;
	for (int i = 0; i < runs; i++) {
		struct ab_rng rng;
		ab_rng_seed(&rng, seed + (uint64_t)i);
		size_t n = 0;
		int have = 0, target = pairs_min;
		struct ab_speed_result *r = NULL;
		for (;;) {
			n = sim_pairs(buf, n, &sim, &rng, have, target, 0);
			have = target;
			if ((r = decide(n, &p)) == NULL)
				return;
			if (!r->open)
				break;
			target = r->next_pairs;
			ab_speed_result_free(r);
		}
		reg += r->regression;
		tier += r->tier >= 0;
		pairs_sum += r->pairs;
		first_look += r->look == 1;
		ab_speed_result_free(r);
	}
	*out_reg = (double)reg / runs;
	*out_tier = (double)tier / runs;
	family_pairs_mean = pairs_sum / runs;
	family_first_look = (double)first_look / runs;
}

/* alpha plus three binomial standard deviations for `runs` evaluations. */
static double allowance(double alpha, int runs)
{
	return alpha + 3.0 * sqrt(alpha * (1.0 - alpha) / runs);
}

static void test_fpr(void)
{
	double reg, tier;
	int runs = 1000;
	family_rate(1.0, SIM_NORMAL, 0, 1, 12, 12, runs, 100000, &reg, &tier);
	printf("A/A, 8 series, 12 pairs, 2%% noise: any regression %.4f, any tier %.4f (%d runs)\n",
		reg, tier, runs);
	CHECK(reg + tier <= allowance(0.05, runs));
	/* At the boundaries the claims are as likely as the design allows: <= alpha / 2 per direction. */
	family_rate(0.98, SIM_NORMAL, 0, 1, 12, 12, runs, 200000, &reg, &tier);
	printf("all 8 series at 0.98x (REJECT boundary): any regression %.4f (bound 0.025)\n", reg);
	CHECK(reg <= allowance(0.025, runs));
	family_rate(1.02, SIM_NORMAL, 0, 1, 12, 12, runs, 300000, &reg, &tier);
	printf("all 8 series at 1.02x (XS boundary): any tier %.4f (bound 0.025)\n", tier);
	CHECK(tier <= allowance(0.025, runs));
}

static void test_fpr_adaptive(void)
{
	double reg, tier;
	int runs = 600;
	family_rate(0.98, SIM_NORMAL, 0, 3, 10, 30, runs, 400000, &reg, &tier);
	runs = 300;                                 /* A/A variants: far from both boundaries */
	printf("adaptive (3 looks, 10..30 pairs) at 0.98x: any regression %.4f (bound 0.025)\n", reg);
	CHECK(reg <= allowance(0.025, runs));
	family_rate(1.0, SIM_T2, 0, 3, 10, 30, runs, 500000, &reg, &tier);
	printf("adaptive A/A, Student-t(2) noise: regression %.4f, tier %.4f\n", reg, tier);
	CHECK(reg + tier <= allowance(0.05, runs));
	family_rate(1.0, SIM_OUTLIERS, 0, 3, 10, 30, runs, 600000, &reg, &tier);
	printf("adaptive A/A, 10%% 3x outliers: regression %.4f, tier %.4f\n", reg, tier);
	CHECK(reg + tier <= allowance(0.05, runs));
	family_rate(1.0, SIM_NORMAL, -0.002, 3, 10, 30, runs, 700000, &reg, &tier);
	printf("adaptive A/A, drift -0.2%%/run: regression %.4f, tier %.4f\n", reg, tier);
	CHECK(reg + tier <= allowance(0.05, runs));
	/* The tier boundary under the sequential design, and both boundaries with quiet series (0.5%
	 * noise, as speed.reps gives): claims still at most alpha / 2 per direction. */
	runs = 1500;
	family_rate(1.02, SIM_NORMAL, 0, 3, 10, 30, runs, 800000, &reg, &tier);
	printf("adaptive at 1.02x (XS boundary): any tier %.4f (bound 0.025), mean pairs %.1f\n", tier,
		family_pairs_mean);
	CHECK(tier <= allowance(0.025, runs));
	family_sigma = 0.005;
	family_rate(0.98, SIM_NORMAL, 0, 3, 6, 16, runs, 900000, &reg, &tier);
	printf("adaptive, 0.5%% noise, 6..16 pairs, at 0.98x: any regression %.4f (bound 0.025)\n", reg);
	CHECK(reg <= allowance(0.025, runs));
	family_rate(1.02, SIM_NORMAL, 0, 3, 6, 16, runs, 1000000, &reg, &tier);
	printf("adaptive, 0.5%% noise, 6..16 pairs, at 1.02x: any tier %.4f (bound 0.025)\n", tier);
	CHECK(tier <= allowance(0.025, runs));
	family_sigma = 0.02;
}

/* The sequential design lets a quiet A/A stop: 8 gating series at 0.75% noise per sample end at the
 * first look nearly always with the equivalence stop, and run on without it (their claim intervals
 * still reach past 0.98 or 1.02); a clear 10% slowdown of one series is flagged at the first look; a series of exactly
 * zero log-ratios (tau of a deterministic SUT) is equivalent at once. (0.75% noise; at 1% a
 * first look settles 79% of the runs.) */
static void test_aa_stops(void)
{
	double reg, tier;
	int runs = 300;
	family_sigma = 0.0075;
	family_rate(1.0, SIM_NORMAL, 0, 3, 6, 16, runs, 1100000, &reg, &tier);
	double with_eq = family_pairs_mean, share = family_first_look;
	printf("quiet A/A, 8 series, 6..16 pairs: first look %.0f%% of runs, mean pairs %.1f; claims %.4f\n",
		share * 100, with_eq, reg + tier);
	CHECK(share >= 0.90);
	CHECK(reg + tier <= allowance(0.05, runs));
	family_equivalence = 0;
	family_rate(1.0, SIM_NORMAL, 0, 3, 6, 16, runs, 1100000, &reg, &tier);
	printf("the same without the equivalence stop: first look %.0f%%, mean pairs %.1f\n",
		family_first_look * 100, family_pairs_mean);
	CHECK(family_pairs_mean >= with_eq + 2.0);
	family_equivalence = 0.90;
	family_sigma = 0.02;

	static const struct sim_series slow[] = {
		{ "m", "decode_tps", 512, 1.0 }, { "m", "decode_tps", 4096, 0.90 },
		{ "m", "prefill_tps", 512, 1.0 }, { "m", "prefill_tps", 4096, 1.0 },
	};
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.pairs_min = 6;
	p.pairs_max = 16;
	int flagged_first = 0;
	for (int i = 0; i < 100; i++) {
		struct ab_rng rng;
		ab_rng_seed(&rng, 1200000 + (uint64_t)i);
		struct sim sim = { slow, 4, SIM_NORMAL, 0.01, 0, 0 };
		int first = 0;
		CHECK(ab_speed_pairs_needed(&first, NULL, &p, 4) == 0);
		size_t n = sim_pairs(buf, 0, &sim, &rng, 0, first, 0);
		struct ab_speed_result *r = decide(n, &p);
		if (!r)
			return;
		const struct ab_speed_series *s = find(r, "m", "decode_tps", 4096);
		flagged_first += r->look == 1 && s->regression && r->open && r->next_batch == 1;
		ab_speed_result_free(r);
	}
	printf("10%% slowdown, 1%% noise: flagged at the first look, confirmation asked, %d/100\n", flagged_first);
	CHECK(flagged_first == 100);

	/* Exactly zero log-ratios: decided (equivalent) at the first look, no claim. */
	size_t n = 0;
	for (int pair = 0; pair < 8; pair++)      /* the first look of one gating series */
		for (int side = 0; side < 2; side++) {
			struct ab_sample *b = &buf[n++];
			memset(b, 0, sizeof(*b));
			b->side = side;
			b->pair = pair;
			b->order = (pair + side) % 2;
			snprintf(b->model, sizeof(b->model), "m");
			snprintf(b->metric, sizeof(b->metric), "tau");
			b->ctx = 512;
			b->value = 3.25;
			b->ok = 1;
		}
	static const struct ab_speed_metric_rule tau_rule[] = { { "tau", -1.0, 1, 0.95, 1, NULL, "tau-regression", 1 } };
	p.rules = tau_rule;
	p.n_rules = 1;
	struct ab_speed_result *r = decide(n, &p);
	if (r) {
		CHECK(r->look == 1 && !r->open && r->n_series == 1 && r->series[0].equivalent &&
			!r->series[0].regression);
		ab_speed_result_free(r);
	}
}

static void test_bootstrap_method(void)
{
	static const struct sim_series series[] = { { "m", "decode_tps", 4096, 1.10 } };
	struct sim sim = { series, 1, SIM_NORMAL, 0.02, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, 31);
	size_t n = sim_pairs(buf, 0, &sim, &rng, 0, 12, 0);
	struct ab_speed_policy p;
	policy_fixed(&p, 12);
	struct ab_speed_result *w = decide(n, &p);
	p.method = AB_SPEED_BOOTSTRAP_BCA;
	p.seed = 99;
	struct ab_speed_result *b1 = decide(n, &p), *b2 = decide(n, &p);
	if (w && b1 && b2) {
		CHECK(b1->series[0].ci.lo == b2->series[0].ci.lo);     /* seeded */
		CHECK(b1->series[0].ci.lo != w->series[0].ci.lo);
		CHECK(b1->series[0].ci_adj.lo == w->series[0].ci_adj.lo); /* claims do not depend on it */
		CHECK(b1->tier == w->tier && w->tier >= 1);
		CHECK(strstr(b1->method, "BCa bootstrap") != NULL);
	}
	ab_speed_result_free(w);
	ab_speed_result_free(b1);
	ab_speed_result_free(b2);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "labels", test_labels },
		{ "grouping", test_grouping },
		{ "failures", test_failures },
		{ "unconfirmed_under_infra", test_unconfirmed_under_infra },
		{ "feasibility", test_feasibility },
		{ "power", test_power },
		{ "adaptive", test_adaptive },
		{ "fpr", test_fpr },
		{ "fpr_adaptive", test_fpr_adaptive },
		{ "aa_stops", test_aa_stops },
		{ "bootstrap_method", test_bootstrap_method },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

/*
 * test_verdict.c - guards/verdict: build-failure verdicts, REJECT precedence (gates, confirmed
 * regressions) over infra, infra-error on failures, tiers and eval:none, per-model labels, the
 * harness-touched note and label-set helpers. Speed results are built by hand (and once by
 * ab_speed_decide) so each rule is tested on its own.
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "error.h"
#include "sim.h"
#include "spec.h"
#include "verdict.h"

static struct ab_speed_series series[4];
static struct ab_speed_model models[2];
static struct ab_speed_result speed;

/* Two models: "small" (decode 4k, prefill 4k) and "big" (decode 4k, decode 32k), all neutral. */
static void speed_reset(void)
{
	static const struct { const char *model, *metric; int ctx; } shape[4] = {
		{ "small", "decode_tps", 4096 }, { "small", "prefill_tps", 4096 },
		{ "big", "decode_tps", 4096 }, { "big", "decode_tps", 32768 },
	};
	memset(&speed, 0, sizeof(speed));
	memset(series, 0, sizeof(series));
	memset(models, 0, sizeof(models));
	for (int i = 0; i < 4; i++) {
		struct ab_speed_series *s = &series[i];
		snprintf(s->model, sizeof(s->model), "%s", shape[i].model);
		snprintf(s->metric, sizeof(s->metric), "%s", shape[i].metric);
		s->ctx = shape[i].ctx;
		s->gating = 1;
		s->pairs = s->n_pairs = 12;
		s->ratio = 1.0;
		s->ci = (struct ab_interval){ 0.99, 1.01, 0.95 };
		s->ci_adj = (struct ab_interval){ 0.985, 1.015, 0.99 };
		s->tier = -1;
		ab_speed_regression_label(s->label, sizeof(s->label), s->model, i < 2, s->metric, s->ctx);
	}
	snprintf(models[0].name, sizeof(models[0].name), "small");
	snprintf(models[1].name, sizeof(models[1].name), "big");
	models[0].tier = models[1].tier = -1;
	speed.series = series;
	speed.n_series = 4;
	speed.models = models;
	speed.n_models = 2;
	speed.n_gating = 4;
	speed.tier = -1;
	speed.pairs = 12;
	speed.regression_ratio = 0.98;
	speed.alpha = 0.05;
	const double tiers[AB_TIER_COUNT] = { 0.02, 0.035, 0.06, 0.10, 0.18 };
	memcpy(speed.tiers, tiers, sizeof(tiers));
}

static struct ab_verdict_input input(void)
{
	struct ab_verdict_input in;
	memset(&in, 0, sizeof(in));
	in.base_build = AB_BUILD_OK;
	in.head_build = AB_BUILD_OK;
	in.speed = &speed;
	return in;
}

static int has_label(const struct ab_verdict *v, const char *label)
{
	for (size_t i = 0; i < v->n_labels; i++)
		if (strcmp(v->labels[i], label) == 0)
			return 1;
	return 0;
}

static void set_gain(int i, double ratio, double adj_lo, int tier)
{
	series[i].ratio = ratio;
	series[i].ci = (struct ab_interval){ adj_lo + 0.01, ratio + 0.02, 0.95 };
	series[i].ci_adj = (struct ab_interval){ adj_lo, ratio + 0.04, 0.99 };
	series[i].tier = tier;
}

static void set_regression(int i, double ratio)
{
	series[i].ratio = ratio;
	series[i].ci = (struct ab_interval){ ratio - 0.01, ratio + 0.01, 0.95 };
	series[i].ci_adj = (struct ab_interval){ ratio - 0.02, ratio + 0.02, 0.99 };
	series[i].regression = series[i].confirmed = 1;
	speed.regression = speed.reject = 1;
}

static void test_builds(void)
{
	struct ab_verdict v;
	speed_reset();
	struct ab_verdict_input in = input();
	in.base_build = AB_BUILD_FAILED;
	in.base_build_detail = "exit status 2";
	in.head_build = AB_BUILD_FAILED;
	in.speed = NULL;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA);
	CHECK_STR(v.label, "eval:infra-error");
	CHECK(strstr(v.reason, "base side does not build") != NULL);
	CHECK(v.n_labels == 1 && has_label(&v, "eval:infra-error"));

	in.base_build = AB_BUILD_OK;
	in.head_build_detail = "exit status 1: error: 'foo' undeclared";
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT);
	CHECK_STR(v.label, "eval:REJECT");
	CHECK(strstr(v.reason, "does not compile") != NULL);
	CHECK(strstr(v.reason, "undeclared") != NULL);

	in.head_build = AB_BUILD_INFRA;
	in.head_build_detail = "timeout after 1800 s";
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA);

	in.head_build = AB_BUILD_OK;                /* built, but nothing measured */
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA);
	in.infra_error = "SUT never printed its ready line within 120 s";
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA && strstr(v.reason, "ready line") != NULL);
	CHECK(ab_verdict_decide(NULL, &in) == AB_EINVALID);
}

static void test_tiers(void)
{
	struct ab_verdict v;
	speed_reset();
	struct ab_verdict_input in = input();
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_NONE);
	CHECK_STR(v.label, "eval:none");
	CHECK(has_label(&v, "eval-small:none") && has_label(&v, "eval-big:none"));
	CHECK(strstr(v.reason, "No verified gain") != NULL);

	set_gain(1, 1.09, 1.065, 2);                /* small prefill 4k: M */
	set_gain(3, 1.05, 1.03, 0);                 /* big decode 32k: XS */
	models[0].tier = 2;
	models[1].tier = 0;
	speed.tier = 2;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_TIER && v.tier == 2);
	CHECK_STR(v.label, "eval:M");
	CHECK_STR(v.labels[0], "eval:M");
	CHECK(has_label(&v, "eval-small:M") && has_label(&v, "eval-big:XS"));
	CHECK(strstr(v.reason, "small prefill at 4k is +9.0%") != NULL);
	CHECK(strstr(v.reason, "threshold of 6%") != NULL);
	printf("tier reason: %s\n", v.reason);

	/* One model: no per-model labels, no model name in the reason. */
	speed.n_models = 1;
	speed.n_series = 2;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.n_labels == 1 && strstr(v.reason, "Prefill at 4k") == v.reason + strlen("Best verified gain: "));
}

static void test_reject(void)
{
	struct ab_verdict v;
	speed_reset();
	struct ab_verdict_input in = input();
	set_gain(0, 1.25, 1.19, 4);
	models[0].tier = 4;
	speed.tier = 4;
	set_regression(3, 0.90);                    /* big decode 32k */
	set_regression(2, 0.95);                    /* big decode 4k */
	models[1].reject = 1;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT);
	CHECK_STR(v.label, "eval:REJECT");
	CHECK(v.tier == 4);                         /* still computed and kept */
	CHECK(has_label(&v, "regression-big-32k") && has_label(&v, "regression-big-4k"));
	CHECK(has_label(&v, "eval-big:REJECT") && has_label(&v, "eval-small:XL"));
	CHECK(strstr(v.reason, "big decode at 32k is 10.0% slower") != NULL);
	CHECK(strstr(v.reason, "2 contexts regressed") != NULL);
	printf("regression reason: %s\n", v.reason);

	/* A regression flagged but not confirmed is no REJECT. */
	series[2].confirmed = series[3].confirmed = 0;
	speed.reject = 0;
	models[1].reject = 0;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_TIER && v.tier == 4 && !has_label(&v, "regression-big-32k"));

	/* REJECT evidence wins over infra trouble elsewhere. */
	series[3].confirmed = 1;
	speed.reject = 1;
	speed.infra = 1;
	snprintf(speed.infra_reason, sizeof(speed.infra_reason), "small decode lost 5 of 12 pairs");
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT);
	speed.reject = 0;
	series[3].confirmed = 0;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA);
	CHECK(strstr(v.reason, "lost 5 of 12 pairs") != NULL);
	CHECK(strstr(v.reason, "re-run") != NULL);
}

static void test_gates(void)
{
	struct ab_verdict v;
	speed_reset();
	set_gain(0, 1.08, 1.065, 2);
	models[0].tier = 2;
	speed.tier = 2;
	struct ab_gate_result gates[3];
	memset(gates, 0, sizeof(gates));
	snprintf(gates[0].name, sizeof(gates[0].name), "top1");
	snprintf(gates[0].model, sizeof(gates[0].model), "small");
	gates[0].value = 0.97;
	gates[0].threshold = 0.90;
	snprintf(gates[0].op, sizeof(gates[0].op), ">=");
	gates[0].pass = 1;
	snprintf(gates[1].name, sizeof(gates[1].name), "kl_mean");
	snprintf(gates[1].model, sizeof(gates[1].model), "big");
	gates[1].value = 0.31;
	gates[1].threshold = 0.20;
	snprintf(gates[1].op, sizeof(gates[1].op), "<=");
	gates[1].pass = 0;
	snprintf(gates[2].name, sizeof(gates[2].name), "kl_warn");
	gates[2].advisory = 1;                      /* advisory failures change nothing */
	struct ab_verdict_input in = input();
	in.gates = gates;
	in.n_gates = 3;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT && v.tier == 2);
	CHECK(v.n_labels >= 2);
	CHECK_STR(v.labels[0], "eval:REJECT");      /* the label first, then the gate's */
	CHECK_STR(v.labels[1], "accuracy-regression");
	CHECK(has_label(&v, "eval-big:REJECT") && has_label(&v, "eval-small:M"));
	CHECK(strstr(v.reason, "Gate kl_mean on big failed: 0.31, required <= 0.2") != NULL);
	CHECK(strstr(v.reason, "eval:M") != NULL);
	printf("gate reason: %s\n", v.reason);

	/* A gate that could not be measured is infra, never REJECT. */
	gates[1].pass = 0;
	gates[1].error = 1;
	snprintf(gates[1].detail, sizeof(gates[1].detail), "reference SUT crashed: signal 9");
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA && strstr(v.reason, "kl_mean could not be measured") != NULL);
	CHECK(has_label(&v, "eval-big:infra-error"));

	/* A custom label on failure. */
	gates[1].error = 0;
	snprintf(gates[1].label, sizeof(gates[1].label), "spec-mismatch");
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(has_label(&v, "spec-mismatch") && !has_label(&v, "accuracy-regression"));
	CHECK_STR(ab_verdict_gate_label(&gates[1]), "spec-mismatch");
	CHECK(ab_verdict_gate_label(&gates[2]) == NULL);   /* advisory gates never label */

	/* A gate measured against one of several references ("big/hf") counts for model big. */
	gates[1].label[0] = '\0';
	snprintf(gates[1].model, sizeof(gates[1].model), "big/hf");
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT && has_label(&v, "eval-big:REJECT"));
	snprintf(gates[1].model, sizeof(gates[1].model), "bigger/hf");   /* a prefix is not the model */
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT && has_label(&v, "eval-big:none"));

	/* Only an advisory gate fails: no REJECT, no gate label at all. */
	gates[1].pass = 1;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_TIER && !has_label(&v, "accuracy-regression"));
	for (size_t i = 0; i < v.n_labels; i++)
		CHECK(ab_verdict_label_is_managed(v.labels[i]));
}

/* A model name long enough to cut: the per-model label keeps ":<outcome>" within 50 characters. */
static void test_long_model(void)
{
	struct ab_verdict v;
	speed_reset();
	snprintf(models[1].name, sizeof(models[1].name), "a-model-name-of-sixty-three-characters-0123456789-0123456789-ab");
	for (int i = 2; i < 4; i++)
		snprintf(series[i].model, sizeof(series[i].model), "%s", models[1].name);
	speed.infra = 1;
	models[1].infra = 1;
	snprintf(speed.infra_reason, sizeof(speed.infra_reason), "lost pairs");
	struct ab_verdict_input in = input();
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA && v.n_labels == 3);
	for (size_t i = 0; i < v.n_labels; i++) {
		CHECK(strlen(v.labels[i]) <= 50);
		CHECK(ab_verdict_label_is_managed(v.labels[i]));
	}
	CHECK(has_label(&v, "eval-a-model-name-of-sixty-three-chara:infra-error"));
}

static void test_harness(void)
{
	const char *changed[] = { "engine/model.c", "guards/default.json", "tools/ref.py", "README.md",
		"ci/test.sh" };
	const char *paths[] = { "guards/", "tools/*.py", "README.md", "" };
	const char *hits[8];
	size_t n = ab_verdict_harness_match(hits, 8, changed, 5, paths, 4);
	CHECK(n == 3);
	CHECK_STR(hits[0], "guards/default.json");
	CHECK_STR(hits[1], "tools/ref.py");
	CHECK_STR(hits[2], "README.md");
	CHECK(ab_verdict_harness_match(hits, 1, changed, 5, paths, 4) == 3);   /* count beyond cap */

	struct ab_verdict v;
	speed_reset();
	struct ab_verdict_input in = input();
	in.harness_touched = hits;
	in.n_harness_touched = 2;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_NONE);           /* evaluated (with the base harness), and said so */
	CHECK(has_label(&v, "harness-touched"));
	CHECK(v.n_notes == 1 && strstr(v.notes[0], "guards/default.json, tools/ref.py") != NULL);

	CHECK(ab_verdict_label_is_managed("eval:M"));
	CHECK(ab_verdict_label_is_managed("eval-big:REJECT"));
	CHECK(ab_verdict_label_is_managed("regression-4k-pp"));
	CHECK(ab_verdict_label_is_managed("harness-touched"));
	CHECK(ab_verdict_label_is_managed("accuracy-regression"));
	CHECK(!ab_verdict_label_is_managed("eval-plan"));
	CHECK(!ab_verdict_label_is_managed("bug"));
	CHECK_STR(ab_verdict_label_name(AB_VERDICT_TIER, 4), "eval:XL");
	CHECK_STR(ab_verdict_label_name(AB_VERDICT_TIER, -1), "eval:none");
}

/* End to end through ab_speed_decide: a 20% slowdown at one context, confirmed, is a REJECT. */
static void test_end_to_end(void)
{
	static const struct sim_series shape[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "decode_tps", 4096, 0.8 },
		{ "m", "prefill_tps", 4096, 1.0 },
	};
	static struct ab_sample samples[3 * 2 * 24];
	struct sim sim = { shape, 3, SIM_NORMAL, 0.02, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, 5);
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	size_t n = sim_pairs(samples, 0, &sim, &rng, 0, 10, 0);
	struct ab_speed_result *r = NULL;
	CHECK(ab_speed_decide(&r, samples, n, &p) == 0);
	if (!r)
		return;
	CHECK(r->open && r->next_batch == 1);
	int want = r->next_pairs;
	ab_speed_result_free(r);
	r = NULL;
	n = sim_pairs(samples, n, &sim, &rng, 10, 10 + want, 1);
	CHECK(ab_speed_decide(&r, samples, n, &p) == 0);
	if (!r)
		return;
	struct ab_verdict v;
	struct ab_verdict_input in = input();
	in.speed = r;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT);
	CHECK(has_label(&v, "regression-4k") && v.n_labels == 2);
	CHECK(strstr(v.reason, "confirmed by an independent batch") != NULL);
	printf("end to end: %s | %s\n", v.label, v.reason);
	ab_speed_result_free(r);
}

/* Measures `shape` (one model "m") through ab_speed_decide to the end, confirmation included, and
 * decides with `gates`. Returns the speed result (caller frees) and fills *v. */
static struct ab_speed_result *spec_decide(struct ab_verdict *v, const struct sim_series *shape, int n_shape,
	const struct ab_gate_result *gates, size_t n_gates, uint64_t seed)
{
	static struct ab_sample samples[8 * 2 * 64];
	struct sim sim = { shape, n_shape, SIM_NORMAL, 0.01, 0, 0 };
	struct ab_rng rng;
	ab_rng_seed(&rng, seed);
	struct ab_speed_policy p;
	ab_speed_policy_init(&p);
	p.pairs_max = 20;
	struct ab_speed_result *r = NULL;
	size_t n = 0;
	int pairs[2] = { 0, 0 }, next = 0, batch = 0, target;
	CHECK(ab_speed_pairs_needed(&target, NULL, &p, 0) == 0);
	for (int look = 0; look < 8; look++) {
		n = sim_pairs(samples, n, &sim, &rng, next, next + (target - pairs[batch]), batch);
		next += target - pairs[batch];
		pairs[batch] = target;
		ab_speed_result_free(r);
		r = NULL;
		CHECK(ab_speed_decide(&r, samples, n, &p) == 0);
		if (r == NULL || !r->open)
			break;
		batch = r->next_batch;
		target = r->next_pairs;
	}
	struct ab_verdict_input in = input();
	in.speed = r;
	in.gates = gates;
	in.n_gates = n_gates;
	CHECK(ab_verdict_decide(v, &in) == 0);
	return r;
}

/* Speculative decoding: tau gates only downwards against its own 0.95 floor and is labelled
 * tau-regression; spec tok/s gates like decode and its tier is eval-dflash's and may be the headline;
 * the spec_exact gate rejects a diverging head, and a diverging base makes the family infra. */
static void test_spec(void)
{
	struct ab_verdict v;
	struct ab_speed_result *r;
	const struct sim_series same[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "spec_decode_tps", 128, 1.0 }, { "m", "tau", 128, 1.0 },
		{ "m", "spec_speedup", 128, 1.0 },
	};
	r = spec_decide(&v, same, 4, NULL, 0, 11);
	CHECK(v.kind == AB_VERDICT_NONE && has_label(&v, "eval-dflash:none") && v.n_labels == 2);
	CHECK(r && r->n_spec == 3 && r->n_gating == 3);   /* spec_speedup is reported, not gated */
	CHECK(r && strstr(r->method, "speculative-decoding series") && strstr(r->method, "0.95x"));
	ab_speed_result_free(r);

	/* Speculation switched off: tau 1/4 of base, plain decode 3% faster. */
	const struct sim_series off[] = {
		{ "m", "decode_tps", 128, 1.03 }, { "m", "spec_decode_tps", 128, 0.4 }, { "m", "tau", 128, 0.25 },
	};
	r = spec_decide(&v, off, 3, NULL, 0, 12);
	CHECK(v.kind == AB_VERDICT_REJECT);
	CHECK(has_label(&v, "tau-regression") && has_label(&v, "regression-spec-128"));
	CHECK(has_label(&v, "eval-dflash:REJECT"));
	CHECK(r && r->spec_reject && r->models[0].spec_reject);
	printf("spec off: %s | %s\n", v.label, v.reason);
	ab_speed_result_free(r);

	/* 3% lower tau is above the 0.95 floor, and a higher tau earns nothing; 5% slower spec tok/s is below
	 * its 0.98 floor while a 4% lower tau beside it is still above its own. */
	const struct sim_series tau_floor[] = {
		{ "m", "spec_decode_tps", 128, 1.0 }, { "m", "tau", 128, 0.97 }, { "m", "tau", 512, 1.3 },
	};
	r = spec_decide(&v, tau_floor, 3, NULL, 0, 13);
	CHECK(v.kind == AB_VERDICT_NONE && !has_label(&v, "tau-regression"));
	for (size_t i = 0; r && i < r->n_series; i++)
		if (strcmp(r->series[i].metric, "tau") == 0)
			CHECK(r->series[i].tier == -1 && r->series[i].no_tier && fabs(r->series[i].regression_ratio - 0.95) < 1e-12);
	ab_speed_result_free(r);
	const struct sim_series spec_slower[] = { { "m", "spec_decode_tps", 128, 0.95 }, { "m", "tau", 128, 0.96 } };
	r = spec_decide(&v, spec_slower, 2, NULL, 0, 14);
	CHECK(v.kind == AB_VERDICT_REJECT && has_label(&v, "regression-spec-128") && !has_label(&v, "tau-regression"));
	ab_speed_result_free(r);

	/* A faster draft: the spec tier is eval-dflash's and the headline's. */
	const struct sim_series faster[] = {
		{ "m", "decode_tps", 128, 1.0 }, { "m", "spec_decode_tps", 128, 1.25 }, { "m", "tau", 128, 1.0 },
	};
	r = spec_decide(&v, faster, 3, NULL, 0, 15);
	CHECK(r && r->spec_tier >= 3 && r->tier == r->spec_tier);
	CHECK(v.kind == AB_VERDICT_TIER && v.tier == r->spec_tier);
	char want[32];
	snprintf(want, sizeof(want), "eval-dflash:%s", ab_tier_name(r ? r->spec_tier : -1));
	CHECK(has_label(&v, want));
	printf("faster draft: %s %s\n", v.label, want);

	/* Exactness: the head diverging is a REJECT; the base diverging makes the gate (and eval-dflash)
	 * infra; nothing compared is infra too. */
	struct ab_spec_exact ok = { 24, 24, -1, 0, 0, 0, "" }, bad = { 24, 23, 17, 512, 3, 0, "" };
	struct ab_spec_exact none = { 0, 0, -1, 0, 0, 0, "" };
	struct ab_gate_result g;
	ab_spec_exact_gate(&g, "m", &ok, &bad);
	CHECK(!g.pass && !g.error && g.value == 1 && strcmp(g.label, "spec-mismatch") == 0);
	CHECK(strstr(g.detail, "token 17 (ctx 512, pair 3)") != NULL);
	struct ab_speed_result *faster_r = r;
	struct ab_verdict_input in = input();
	in.speed = faster_r;
	in.gates = &g;
	in.n_gates = 1;
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_REJECT && has_label(&v, "spec-mismatch") && has_label(&v, "eval-dflash:REJECT"));
	ab_spec_exact_gate(&g, "m", &bad, &ok);
	CHECK(g.error && !g.pass && strstr(g.detail, "base build") != NULL);
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_INFRA && has_label(&v, "eval-dflash:infra-error"));
	ab_spec_exact_gate(&g, "m", &none, &none);
	CHECK(g.error);
	ab_spec_exact_gate(&g, "m", &ok, &ok);
	CHECK(g.pass && !g.error && g.value == 0);
	in.spec_kind = "eagle";
	CHECK(ab_verdict_decide(&v, &in) == 0);
	CHECK(v.kind == AB_VERDICT_TIER && has_label(&v, "eval-eagle:L") + has_label(&v, "eval-eagle:XL") +
		has_label(&v, "eval-eagle:M") == 1);
	ab_speed_result_free(faster_r);

	CHECK(ab_verdict_label_is_managed("tau-regression") && ab_verdict_label_is_managed("spec-mismatch"));
	CHECK(ab_verdict_label_is_managed("eval-dflash:none") && ab_verdict_label_is_managed("regression-spec-4k"));
	char label[64];
	ab_speed_regression_label(label, sizeof(label), "m", 1, "spec_decode_tps", 4096);
	CHECK_STR(label, "regression-spec-4k");
	ab_speed_regression_label(label, sizeof(label), "qwen3-8b", 0, "spec_decode_tps", 128);
	CHECK_STR(label, "regression-qwen3-8b-spec-128");
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "builds", test_builds },
		{ "tiers", test_tiers },
		{ "reject", test_reject },
		{ "gates", test_gates },
		{ "long_model", test_long_model },
		{ "harness", test_harness },
		{ "end_to_end", test_end_to_end },
		{ "spec", test_spec },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

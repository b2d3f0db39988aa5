/*
 * verdict.c - combines build, infra, gate and speed outcomes into one label, a reason sentence and
 * the exclusive label set (precedence documented in verdict.h). Only formatting and rules here: the
 * statistics were decided by speed.c.
 */
#include "verdict.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"

const char *ab_verdict_label_name(enum ab_verdict_kind kind, int tier)
{
	static const char *const tiers[AB_TIER_COUNT] = { "eval:XS", "eval:S", "eval:M", "eval:L", "eval:XL" };
	switch (kind) {
	case AB_VERDICT_REJECT: return "eval:REJECT";
	case AB_VERDICT_INFRA: return "eval:infra-error";
	case AB_VERDICT_TIER: return tier >= 0 && tier < AB_TIER_COUNT ? tiers[tier] : "eval:none";
	default: return "eval:none";
	}
}

int ab_verdict_label_is_managed(const char *label)
{
	if (label == NULL)
		return 0;
	if (strncmp(label, "eval:", 5) == 0 || strncmp(label, "regression-", 11) == 0)
		return 1;
	if (strncmp(label, "eval-", 5) == 0 && strchr(label, ':'))
		return 1;
	return strcmp(label, "accuracy-regression") == 0 || strcmp(label, "harness-touched") == 0 ||
	       strcmp(label, "tau-regression") == 0 || strcmp(label, "spec-mismatch") == 0;
}

size_t ab_verdict_harness_match(const char **out, size_t cap, const char *const *changed,
	size_t n_changed, const char *const *harness_paths, size_t n_paths)
{
	size_t count = 0;
	for (size_t i = 0; i < n_changed; i++) {
		const char *file = changed[i];
		if (file == NULL)
			continue;
		for (size_t j = 0; j < n_paths; j++) {
			const char *h = harness_paths[j];
			size_t len = h ? strlen(h) : 0;
			int hit;
			if (len == 0)
				continue;
			if (h[len - 1] == '/')
				hit = strncmp(file, h, len) == 0;
			else if (strpbrk(h, "*?["))
				hit = fnmatch(h, file, FNM_PATHNAME) == 0;
			else
				hit = strcmp(file, h) == 0;
			if (hit) {
				if (count < cap)
					out[count] = file;
				count++;
				break;
			}
		}
	}
	return count;
}

const char *ab_verdict_gate_label(const struct ab_gate_result *gate)
{
	if (gate->advisory)
		return NULL;
	return gate->label[0] ? gate->label : "accuracy-regression";
}

static void add_label(struct ab_verdict *v, const char *label)
{
	for (size_t i = 0; i < v->n_labels; i++)
		if (strcmp(v->labels[i], label) == 0)
			return;
	if (v->n_labels >= AB_VERDICT_LABELS_MAX) {
		AB_WARN("verdict: more than %d labels, dropping %s", AB_VERDICT_LABELS_MAX, label);
		return;
	}
	snprintf(v->labels[v->n_labels++], sizeof(v->labels[0]), "%s", label);
}

static void add_note(struct ab_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(struct ab_verdict *v, const char *fmt, ...)
{
	if (v->n_notes >= AB_VERDICT_NOTES_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->notes[v->n_notes++], sizeof(v->notes[0]), fmt, ap);
	va_end(ap);
}

static void set_reason(struct ab_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(struct ab_verdict *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

static double pct(double ratio)
{
	return (ratio - 1.0) * 100.0;
}

/* "decode at 4k" or "qwen3-8b prefill at 16k" (the model only when there are several). */
static void series_name(char *buf, size_t size, const struct ab_speed_result *speed,
	const struct ab_speed_series *s)
{
	char ctx[24];
	ab_speed_ctx_name(ctx, sizeof(ctx), s->ctx);
	if (speed->n_models > 1)
		snprintf(buf, size, "%s %s at %s", s->model, ab_speed_metric_short(s->metric), ctx);
	else
		snprintf(buf, size, "%s at %s", ab_speed_metric_short(s->metric), ctx);
	if (speed->n_models <= 1)
		buf[0] = (char)toupper((unsigned char)buf[0]);   /* it starts the sentence */
}

static const struct ab_gate_result *first_failed_gate(const struct ab_verdict_input *in, int *count)
{
	const struct ab_gate_result *first = NULL;
	*count = 0;
	for (size_t i = 0; i < in->n_gates; i++) {
		const struct ab_gate_result *g = &in->gates[i];
		if (g->error || g->advisory || g->pass)
			continue;
		if (first == NULL)
			first = g;
		(*count)++;
	}
	return first;
}

static const struct ab_gate_result *first_error_gate(const struct ab_verdict_input *in)
{
	for (size_t i = 0; i < in->n_gates; i++)
		if (in->gates[i].error && !in->gates[i].advisory)
			return &in->gates[i];
	return NULL;
}

/* The confirmed regression with the lowest ratio, and how many there are. */
static const struct ab_speed_series *worst_regression(const struct ab_speed_result *speed, int *count)
{
	const struct ab_speed_series *worst = NULL;
	*count = 0;
	for (size_t i = 0; speed && speed->reject && i < speed->n_series; i++) {
		const struct ab_speed_series *s = &speed->series[i];
		if (!s->confirmed)
			continue;
		(*count)++;
		if (worst == NULL || s->ratio < worst->ratio)
			worst = s;
	}
	return worst;
}

/* The series that verified the verdict tier with the highest lower bound. */
static const struct ab_speed_series *best_gain(const struct ab_speed_result *speed)
{
	const struct ab_speed_series *best = NULL;
	for (size_t i = 0; speed && i < speed->n_series; i++) {
		const struct ab_speed_series *s = &speed->series[i];
		if (s->gating && s->tier >= 0 && s->tier == speed->tier &&
		    (best == NULL || s->ci_adj.lo > best->ci_adj.lo))
			best = s;
	}
	return best;
}

static void gate_labels(struct ab_verdict *v, const struct ab_verdict_input *in)
{
	for (size_t i = 0; i < in->n_gates; i++) {
		const struct ab_gate_result *g = &in->gates[i];
		if (!g->error && !g->advisory && !g->pass)
			add_label(v, ab_verdict_gate_label(g));
	}
}

static void regression_labels(struct ab_verdict *v, const struct ab_speed_result *speed)
{
	for (size_t i = 0; speed && speed->reject && i < speed->n_series; i++)
		if (speed->series[i].confirmed && speed->series[i].label[0])
			add_label(v, speed->series[i].label);
}

/* Whether a gate's model field ("m" or "m/<reference>") names suite model `name`. */
static int gate_concerns(const struct ab_gate_result *gate, const char *name)
{
	size_t len = strlen(name);
	return strncmp(gate->model, name, len) == 0 &&
		(gate->model[len] == '\0' || gate->model[len] == '/');
}

static void model_labels(struct ab_verdict *v, const struct ab_verdict_input *in)
{
	const struct ab_speed_result *speed = in->speed;
	if (speed == NULL || speed->n_models < 2)
		return;
	for (size_t m = 0; m < speed->n_models; m++) {
		const struct ab_speed_model *model = &speed->models[m];
		int gate_failed = 0, gate_error = 0;
		for (size_t g = 0; g < in->n_gates; g++) {
			const struct ab_gate_result *gate = &in->gates[g];
			if (gate->advisory || !gate_concerns(gate, model->name))
				continue;
			gate_failed |= !gate->error && !gate->pass;
			gate_error |= gate->error;
		}
		enum ab_verdict_kind kind;
		if (gate_failed || model->reject)
			kind = AB_VERDICT_REJECT;
		else if (model->infra || gate_error)
			kind = AB_VERDICT_INFRA;
		else
			kind = model->tier >= 0 ? AB_VERDICT_TIER : AB_VERDICT_NONE;
		char name[64], label[64];
		const char *outcome = ab_verdict_label_name(kind, model->tier) + 5;  /* past "eval:" */
		snprintf(name, sizeof(name), "%s", model->name);
		for (char *p = name; *p; p++)
			if (*p == ' ' || *p == ':' || *p == ',')
				*p = '-';
		/* GitHub allows 50 characters: cut the model name, never the ":<outcome>" that makes the
		 * label one of the managed set. */
		int name_max = 50 - (int)strlen("eval-:") - (int)strlen(outcome);
		snprintf(label, sizeof(label), "eval-%.*s:%s", name_max, name, outcome);
		add_label(v, label);
	}
}

/* Whether speculative decoding was evaluated: spec-family series or a spec_exact gate. */
static int spec_evaluated(const struct ab_verdict_input *in)
{
	if (in->speed && in->speed->n_spec > 0)
		return 1;
	for (size_t i = 0; i < in->n_gates; i++)
		if (strcmp(in->gates[i].name, "spec_exact") == 0)
			return 1;
	return 0;
}

/* eval-<kind>:<tier|none|REJECT|infra-error> of the spec family: REJECT on a confirmed spec or tau
 * regression or a failed spec_exact gate, infra when those could not be measured, else its tier. */
static void spec_label(struct ab_verdict *v, const struct ab_verdict_input *in)
{
	const struct ab_speed_result *speed = in->speed;
	int failed = speed && speed->spec_reject, error = speed == NULL || speed->spec_infra || speed->infra;
	for (size_t i = 0; i < in->n_gates; i++) {
		const struct ab_gate_result *g = &in->gates[i];
		if (strcmp(g->name, "spec_exact") != 0 || g->advisory)
			continue;
		failed |= !g->error && !g->pass;
		error |= g->error;
	}
	int tier = speed ? speed->spec_tier : -1;
	enum ab_verdict_kind kind = failed ? AB_VERDICT_REJECT : error ? AB_VERDICT_INFRA :
		tier >= 0 ? AB_VERDICT_TIER : AB_VERDICT_NONE;
	char kind_name[24], label[64];
	snprintf(kind_name, sizeof(kind_name), "%s", in->spec_kind && in->spec_kind[0] ? in->spec_kind : "dflash");
	for (char *p = kind_name; *p; p++)
		if (*p == ' ' || *p == ':' || *p == ',')
			*p = '-';
	snprintf(label, sizeof(label), "eval-%s:%s", kind_name, ab_verdict_label_name(kind, tier) + 5);
	add_label(v, label);
}

static void tier_phrase(char *buf, size_t size, const struct ab_speed_result *speed, int tier)
{
	if (tier >= 0)
		snprintf(buf, size, "eval:%s", ab_tier_name(tier));
	else if (speed)
		snprintf(buf, size, "eval:none");
	else
		snprintf(buf, size, "not measured");
}

int ab_verdict_decide(struct ab_verdict *out, const struct ab_verdict_input *in)
{
	if (out == NULL || in == NULL)
		return ab_error_setc(AB_EINVALID, "verdict: NULL argument");
	struct ab_verdict v;
	memset(&v, 0, sizeof(v));
	const struct ab_speed_result *speed = in->speed;
	v.tier = speed ? speed->tier : -1;
	int n_failed_gates = 0, n_regressions = 0, gate_reject = 0;
	const struct ab_gate_result *failed_gate = first_failed_gate(in, &n_failed_gates);
	const struct ab_gate_result *error_gate = first_error_gate(in);
	const struct ab_speed_series *worst = worst_regression(speed, &n_regressions);
	char name[160], tier_text[32];
	tier_phrase(tier_text, sizeof(tier_text), speed, v.tier);

	if (in->base_build == AB_BUILD_FAILED || in->base_build == AB_BUILD_INFRA) {
		v.kind = AB_VERDICT_INFRA;
		set_reason(&v, "The base side %s (%s), so nothing could be compared; this is an "
			"infrastructure problem, not a verdict on the PR.",
			in->base_build == AB_BUILD_FAILED ? "does not build" : "could not be built",
			in->base_build_detail ? in->base_build_detail : "no detail");
	} else if (in->head_build == AB_BUILD_FAILED) {
		v.kind = AB_VERDICT_REJECT;
		set_reason(&v, "The head does not compile (%s).",
			in->head_build_detail ? in->head_build_detail : "build failed");
	} else if (in->head_build == AB_BUILD_INFRA) {
		v.kind = AB_VERDICT_INFRA;
		set_reason(&v, "The head build could not run (%s); this is an infrastructure problem, "
			"re-run recommended.", in->head_build_detail ? in->head_build_detail : "no detail");
	} else if (failed_gate) {
		v.kind = AB_VERDICT_REJECT;
		gate_reject = 1;
		char value[48], threshold[48];
		snprintf(value, sizeof(value), "%.4g", failed_gate->value);
		snprintf(threshold, sizeof(threshold), "%.4g", failed_gate->threshold);
		set_reason(&v, "Gate %s%s%s failed: %s, required %s %s%s%s; the speed result alone "
			"would be %s.", failed_gate->name, failed_gate->model[0] ? " on " : "",
			failed_gate->model, value, failed_gate->op[0] ? failed_gate->op : "vs", threshold,
			n_failed_gates > 1 ? " (and other gates)" : "",
			n_regressions ? ", with a speed regression as well" : "", tier_text);
	} else if (worst) {
		v.kind = AB_VERDICT_REJECT;
		series_name(name, sizeof(name), speed, worst);
		char others[64] = "";
		if (n_regressions > 1)
			snprintf(others, sizeof(others), "; %d contexts regressed in all", n_regressions);
		set_reason(&v, "%s is %.1f%% %s (95%% CI %+.1f%% to %+.1f%%, %d pairs), below %.2fx base "
			"with family-wise confidence%s%s.", name, -pct(worst->ratio),
			strcmp(worst->metric, AB_METRIC_TAU) == 0 ? "lower" : "slower", pct(worst->ci.lo),
			pct(worst->ci.hi), worst->n_pairs, worst->regression_ratio,
			worst->confirm.tested ? " and confirmed by an independent batch" : "", others);
	} else if (in->infra_error || error_gate || (speed && speed->infra) || speed == NULL) {
		v.kind = AB_VERDICT_INFRA;
		if (in->infra_error)
			set_reason(&v, "Infrastructure failure, not a verdict on the PR (re-run recommended): "
				"%.360s.", in->infra_error);
		else if (error_gate)
			set_reason(&v, "Infrastructure failure, not a verdict on the PR (re-run recommended): "
				"gate %s could not be measured (%.200s).", error_gate->name, error_gate->detail);
		else if (speed)
			set_reason(&v, "Infrastructure failure, not a verdict on the PR (re-run recommended): "
				"%.400s.", speed->infra_reason);
		else
			set_reason(&v, "Infrastructure failure: no speed measurement reached the verdict "
				"(re-run recommended).");
	} else if (speed->tier >= 0) {
		const struct ab_speed_series *best = best_gain(speed);
		v.kind = AB_VERDICT_TIER;
		series_name(name, sizeof(name), speed, best);
		set_reason(&v, "Best verified gain: %s is %+.1f%% (95%% CI %+.1f%% to %+.1f%%, %d pairs); "
			"its family-wise lower bound %+.1f%% clears the %s threshold of %g%%.", name,
			pct(best->ratio), pct(best->ci.lo), pct(best->ci.hi), best->n_pairs,
			pct(best->ci_adj.lo), ab_tier_name(speed->tier), speed->tiers[speed->tier] * 100.0);
	} else {
		v.kind = AB_VERDICT_NONE;
		set_reason(&v, "No verified gain and no confirmed regression below the floor in %zu "
			"gating series (%d pairs).", speed->n_gating, speed->pairs);
	}
	snprintf(v.label, sizeof(v.label), "%s", ab_verdict_label_name(v.kind, v.tier));
	add_label(&v, v.label);                 /* the label first, as verdict.h promises */
	if (gate_reject)
		gate_labels(&v, in);
	if (spec_evaluated(in) && in->base_build == AB_BUILD_OK && in->head_build == AB_BUILD_OK)
		spec_label(&v, in);
	model_labels(&v, in);
	regression_labels(&v, speed);

	if (in->n_harness_touched > 0) {
		char files[200] = "";
		for (size_t i = 0; i < in->n_harness_touched && i < 4; i++) {
			size_t len = strlen(files);
			snprintf(files + len, sizeof(files) - len, "%s%s", i ? ", " : "",
				in->harness_touched[i] ? in->harness_touched[i] : "?");
		}
		add_label(&v, "harness-touched");
		add_note(&v, "This PR changes %zu harness file(s) (%s%s); it was measured with the base "
			"side's harness and suite, so those changes are not what was evaluated: review them "
			"by hand.", in->n_harness_touched, files, in->n_harness_touched > 4 ? ", ..." : "");
	}
	*out = v;
	return 0;
}

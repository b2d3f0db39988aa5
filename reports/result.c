/*
 * result.c - builds and loads abgate.result/1 documents (see result.h). Building never decides:
 * every value comes from the inputs or the guards' structs. Loading is strict about types and
 * bounded in size, because a stored document is read back from disk or a database.
 */
#include "result.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Collects allocation failures of a whole build so the code can stay linear. */
struct builder {
	int failed;
};

static void set(struct builder *b, json_t *obj, const char *key, json_t *value)
{
	if (value == NULL || obj == NULL || json_object_set_new(obj, key, value) != 0)
		b->failed = 1;
}

static void push(struct builder *b, json_t *arr, json_t *value)
{
	if (value == NULL || arr == NULL || json_array_append_new(arr, value) != 0)
		b->failed = 1;
}

/* Strings from outside may carry invalid UTF-8, which jansson refuses: keep the valid part. */
static json_t *str_lossy(const char *s)
{
	if (s == NULL)
		return json_null();
	json_t *v = json_string(s);
	if (v)
		return v;
	size_t n = strlen(s);
	char *copy = malloc(n + 1);
	if (copy == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		copy[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	copy[n] = '\0';
	v = json_string(copy);
	free(copy);
	return v;
}

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* A ratio bound: 0 and infinity mean "not bounded" and are written as null. */
static json_t *bound(double x)
{
	return isfinite(x) && x > 0.0 ? json_real(x) : json_null();
}

static json_t *pair_array(struct builder *b, double lo, double hi)
{
	json_t *a = json_array();
	push(b, a, bound(lo));
	push(b, a, bound(hi));
	return a;
}

const char *ab_result_build_status_name(enum ab_build_status status)
{
	switch (status) {
	case AB_BUILD_OK: return "ok";
	case AB_BUILD_FAILED: return "failed";
	case AB_BUILD_INFRA: return "infra";
	default: return "not-run";
	}
}

static const char *verdict_kind_name(enum ab_verdict_kind kind)
{
	switch (kind) {
	case AB_VERDICT_TIER: return "tier";
	case AB_VERDICT_REJECT: return "reject";
	case AB_VERDICT_INFRA: return "infra";
	default: return "none";
	}
}

static json_t *side_json(struct builder *b, const struct ab_result_side *s)
{
	json_t *o = json_object();
	set(b, o, "ref", str_lossy(s->ref));
	set(b, o, "sha", str_lossy(s->sha));
	set(b, o, "tree", str_lossy(s->tree));
	return o;
}

static json_t *verdict_json(struct builder *b, const struct ab_verdict *v)
{
	json_t *o = json_object(), *labels = json_array(), *notes = json_array();
	set(b, o, "label", str_lossy(v->label));
	set(b, o, "kind", json_string(verdict_kind_name(v->kind)));
	set(b, o, "reason", str_lossy(v->reason));
	for (size_t i = 0; i < v->n_labels; i++)
		push(b, labels, str_lossy(v->labels[i]));
	set(b, o, "labels", labels);
	set(b, o, "tier", v->tier >= 0 ? json_string(ab_tier_name(v->tier)) : json_null());
	for (size_t i = 0; i < v->n_notes; i++)
		push(b, notes, str_lossy(v->notes[i]));
	set(b, o, "notes", notes);
	return o;
}

static json_t *metric_json(struct builder *b, const struct ab_speed_series *s)
{
	json_t *o = json_object(), *base = json_object(), *head = json_object();
	set(b, o, "name", str_lossy(s->metric));
	set(b, o, "model", str_lossy(s->model));
	set(b, o, "ctx", json_integer(s->ctx));
	set(b, o, "gating", json_boolean(s->gating));
	set(b, o, "family", json_string(s->spec ? "spec" : "plain"));
	set(b, o, "margin", num(s->margin));
	set(b, o, "regression_ratio", num(s->regression_ratio));
	set(b, base, "median", num(s->base.median));
	set(b, base, "n", json_integer(s->base.n));
	set(b, base, "failed", json_integer(s->base.failed));
	set(b, head, "median", num(s->head.median));
	set(b, head, "n", json_integer(s->head.n));
	set(b, head, "failed", json_integer(s->head.failed));
	set(b, o, "base", base);
	set(b, o, "head", head);
	set(b, o, "pairs", json_integer(s->pairs));
	set(b, o, "n_pairs", json_integer(s->n_pairs));
	set(b, o, "ratio", num(s->ratio));
	set(b, o, "ci", pair_array(b, s->ci.lo, s->ci.hi));
	set(b, o, "ci_level", num(s->ci.level));
	set(b, o, "ci_adj", pair_array(b, s->ci_adj.lo, s->ci_adj.hi));
	set(b, o, "ci_eq", pair_array(b, s->ci_eq.lo, s->ci_eq.hi));
	set(b, o, "equivalent", json_boolean(s->equivalent));
	set(b, o, "claim_look", json_integer(s->claim_look));
	set(b, o, "p", num(s->p_regression));
	set(b, o, "p_adj", num(s->p_adj));
	set(b, o, "outcome", json_string(ab_outcome_name(s->outcome)));
	set(b, o, "tier", s->tier >= 0 ? json_string(ab_tier_name(s->tier)) : json_null());
	set(b, o, "regression", json_boolean(s->regression));
	set(b, o, "confirmed", json_boolean(s->confirmed));
	set(b, o, "label", s->label[0] ? str_lossy(s->label) : json_null());
	if (s->confirm.tested) {
		json_t *c = json_object();
		set(b, c, "n_pairs", json_integer(s->confirm.n_pairs));
		set(b, c, "ratio", num(s->confirm.ratio));
		set(b, c, "hi", bound(s->confirm.hi));
		set(b, c, "confirmed", json_boolean(s->confirm.confirmed));
		set(b, o, "confirmation", c);
	}
	return o;
}

static json_t *gate_json(struct builder *b, const struct ab_gate_result *g)
{
	json_t *o = json_object();
	set(b, o, "name", str_lossy(g->name));
	set(b, o, "model", str_lossy(g->model));
	set(b, o, "value", num(g->value));
	set(b, o, "threshold", num(g->threshold));
	set(b, o, "op", str_lossy(g->op));
	set(b, o, "pass", json_boolean(g->pass));
	set(b, o, "error", json_boolean(g->error));
	set(b, o, "advisory", json_boolean(g->advisory));
	set(b, o, "detail", str_lossy(g->detail));
	set(b, o, "label", str_lossy(ab_verdict_gate_label(g)));    /* null: advisory, never labels */
	return o;
}

static json_t *sample_json(struct builder *b, const struct ab_sample *s)
{
	json_t *o = json_object();
	char model[sizeof(s->model) + 1], metric[sizeof(s->metric) + 1], reason[sizeof(s->reason) + 1];
	/* Fixed buffers from outside may lack their NUL: copy bounded. */
	snprintf(model, sizeof(model), "%.*s", (int)sizeof(s->model), s->model);
	snprintf(metric, sizeof(metric), "%.*s", (int)sizeof(s->metric), s->metric);
	snprintf(reason, sizeof(reason), "%.*s", (int)sizeof(s->reason), s->reason);
	set(b, o, "side", json_string(s->side == AB_SIDE_HEAD ? "head" : "base"));
	set(b, o, "pair", json_integer(s->pair));
	set(b, o, "order", json_integer(s->order));
	set(b, o, "batch", json_integer(s->batch));
	set(b, o, "model", str_lossy(model));
	set(b, o, "ctx", json_integer(s->ctx));
	set(b, o, "metric", str_lossy(metric));
	set(b, o, "value", num(s->value));
	set(b, o, "ok", json_boolean(s->ok));
	set(b, o, "reason", str_lossy(reason));
	set(b, o, "t_start_ns", json_integer(s->t_start_ns));
	set(b, o, "t_end_ns", json_integer(s->t_end_ns));
	int reps = s->reps > 0 && s->reps <= AB_SAMPLE_REPS_MAX ? s->reps : 0;
	json_t *values = json_array();
	for (int r = 0; r < reps; r++)
		push(b, values, num(s->rep_values[r]));
	set(b, o, "reps", json_integer(reps));
	set(b, o, "rep_values", values);
	set(b, o, "harness_ms", num(s->harness_ms));
	set(b, o, "engine_ms", num(s->engine_ms));
	set(b, o, "deferred_ms", num(s->deferred_ms));
	char stats[sizeof(s->stats) + 1];
	snprintf(stats, sizeof(stats), "%.*s", (int)sizeof(s->stats), s->stats);
	json_t *parsed = stats[0] ? json_loads(stats, JSON_REJECT_DUPLICATES, NULL) : NULL;
	set(b, o, "stats", json_is_object(parsed) ? parsed : (json_decref(parsed), json_null()));
	return o;
}

static json_t *failure_side(struct builder *b, const struct ab_failure_counts *f)
{
	json_t *o = json_object();
	set(b, o, "total", json_integer(f->total));
	set(b, o, "failed", json_integer(f->failed));
	for (int k = 0; k < AB_FAILURE_KIND_COUNT; k++)
		set(b, o, ab_failure_kind_name(k), json_integer(f->by_kind[k]));
	set(b, o, "example", str_lossy(f->example));
	return o;
}

static json_t *build_side(struct builder *b, const struct ab_result_build *bs)
{
	json_t *o = json_object();
	set(b, o, "status", json_string(ab_result_build_status_name(bs->status)));
	set(b, o, "seconds", num(bs->seconds));
	set(b, o, "detail", str_lossy(bs->detail));
	set(b, o, "reused", json_boolean(bs->reused));
	if (bs->key)
		set(b, o, "key", json_string(bs->key));
	const char *tail = bs->log_tail;
	if (tail && strlen(tail) > AB_RESULT_LOG_TAIL_MAX) {
		tail += strlen(tail) - AB_RESULT_LOG_TAIL_MAX;
		while ((*tail & 0xc0) == 0x80)      /* do not start inside a UTF-8 sequence */
			tail++;
	}
	set(b, o, "log_tail", str_lossy(tail));
	return o;
}

int ab_result_build(json_t **out, const struct ab_result_input *in)
{
	if (out == NULL || in == NULL || in->verdict == NULL)
		return ab_error_setc(AB_EINVALID, "result: a verdict is required");
	struct builder b = { 0 };
	const struct ab_speed_result *speed = in->speed;
	json_t *doc = json_object();
	char seed[32];

	set(&b, doc, "schema", json_string(AB_RESULT_SCHEMA));
	if (in->created_at)
		set(&b, doc, "created_at", str_lossy(in->created_at));
	set(&b, doc, "trigger", str_lossy(in->trigger));
	set(&b, doc, "base", side_json(&b, &in->base));
	set(&b, doc, "head", side_json(&b, &in->head));
	json_t *changed = json_array();
	for (size_t i = 0; i < in->n_changed_files; i++)
		push(&b, changed, str_lossy(in->changed_files[i]));
	set(&b, doc, "changed_files", changed);
	json_t *suite = json_object();
	set(&b, suite, "name", str_lossy(in->suite_name));
	set(&b, suite, "sha256", str_lossy(in->suite_sha256));
	set(&b, suite, "path", str_lossy(in->suite_path));
	set(&b, doc, "suite", suite);
	snprintf(seed, sizeof(seed), "%" PRIu64, in->seed);
	set(&b, doc, "seed", json_string(seed));
	set(&b, doc, "environment", in->environment && json_is_object(in->environment) ?
		json_deep_copy(in->environment) : json_object());
	set(&b, doc, "verdict", verdict_json(&b, in->verdict));
	set(&b, doc, "method", speed ? str_lossy(speed->method) : json_null());

	json_t *stats = json_object(), *pairs = json_object(), *metrics = json_array();
	json_t *failures = json_object();
	if (speed) {
		json_t *tiers = json_object();
		set(&b, stats, "alpha", num(speed->alpha));
		set(&b, stats, "regression_ratio", num(speed->regression_ratio));
		set(&b, stats, "claim_tail", num(speed->claim_tail));
		for (int t = 0; t < AB_TIER_COUNT; t++)
			set(&b, tiers, ab_tier_name(t), num(speed->tiers[t]));
		set(&b, stats, "tiers", tiers);
		set(&b, stats, "gating_series", json_integer((json_int_t)speed->n_gating));
		set(&b, pairs, "count", json_integer(speed->pairs));
		set(&b, pairs, "min", json_integer(speed->pairs_min));
		set(&b, pairs, "max", json_integer(speed->pairs_max));
		set(&b, pairs, "looks", json_integer(speed->looks));
		set(&b, pairs, "look", json_integer(speed->look));
		set(&b, pairs, "confirmation", json_integer(speed->confirm_pairs_seen));
		set(&b, pairs, "confirmation_target", json_integer(speed->confirm_pairs));
		json_t *points = json_array(), *tails = json_array();
		for (int k = 0; k < speed->n_points; k++) {
			push(&b, points, json_integer(speed->points[k]));
			push(&b, tails, num(speed->tails[k]));
		}
		set(&b, pairs, "points", points);
		set(&b, stats, "look_tails", tails);
		set(&b, stats, "equivalence_level", num(speed->equivalence_level));
		for (size_t i = 0; i < speed->n_series; i++)
			push(&b, metrics, metric_json(&b, &speed->series[i]));
		set(&b, failures, "infra", json_boolean(speed->infra));
		set(&b, failures, "reason", speed->infra ? str_lossy(speed->infra_reason) : json_null());
		set(&b, failures, "base", failure_side(&b, &speed->failures[AB_SIDE_BASE]));
		set(&b, failures, "head", failure_side(&b, &speed->failures[AB_SIDE_HEAD]));
	}
	set(&b, doc, "statistics", stats);
	set(&b, doc, "pairs", pairs);
	set(&b, doc, "metrics", metrics);
	json_t *gates = json_array();
	for (size_t i = 0; i < in->n_gates; i++)
		push(&b, gates, gate_json(&b, &in->gates[i]));
	set(&b, doc, "gates", gates);
	json_t *samples = json_array();
	for (size_t i = 0; i < in->n_samples; i++)
		push(&b, samples, sample_json(&b, &in->samples[i]));
	set(&b, doc, "samples", samples);
	set(&b, doc, "failures", failures);
	if (in->clock) {
		json_t *clock = json_object(), *series = json_array();
		set(&b, clock, "threshold", num(in->clock->threshold));
		set(&b, clock, "flagged", json_boolean(in->clock->flagged));
		set(&b, clock, "worst", num(in->clock->worst));
		set(&b, clock, "worst_where", str_lossy(in->clock->worst_where));
		for (size_t i = 0; i < in->clock->n_series; i++) {
			const struct ab_clock_series *cs = &in->clock->series[i];
			json_t *o = json_object();
			set(&b, o, "model", str_lossy(cs->model));
			set(&b, o, "metric", str_lossy(cs->metric));
			set(&b, o, "ctx", json_integer(cs->ctx));
			set(&b, o, "base_ratio", num(cs->ratio[AB_SIDE_BASE]));
			set(&b, o, "head_ratio", num(cs->ratio[AB_SIDE_HEAD]));
			set(&b, o, "flagged", json_boolean(cs->flagged));
			push(&b, series, o);
		}
		set(&b, clock, "series", series);
		set(&b, doc, "engine_clock", clock);
	}
	json_t *timing = json_object();
	set(&b, timing, "build_s", num(in->timing.build_s));
	set(&b, timing, "models_s", num(in->timing.models_s));
	set(&b, timing, "measure_s", num(in->timing.measure_s));
	set(&b, timing, "accuracy_s", num(in->timing.accuracy_s));
	set(&b, timing, "total_s", num(in->timing.total_s));
	set(&b, doc, "timing", timing);
	json_t *build = json_object();
	set(&b, build, "base", build_side(&b, &in->build_base));
	set(&b, build, "head", build_side(&b, &in->build_head));
	set(&b, doc, "build", build);

	if (b.failed) {
		json_decref(doc);
		return ab_error_set("result: out of memory building the document");
	}
	*out = doc;
	return 0;
}

/* ---- loading ----------------------------------------------------------------------------- */

enum kind { K_STRING, K_NUMBER, K_INTEGER, K_BOOL, K_ARRAY, K_OBJECT, K_NUMBER_OR_NULL,
	K_STRING_OR_NULL };

static int type_ok(const json_t *v, enum kind k)
{
	switch (k) {
	case K_STRING: return json_is_string(v);
	case K_NUMBER: return json_is_number(v);
	case K_INTEGER: return json_is_integer(v);
	case K_BOOL: return json_is_boolean(v);
	case K_ARRAY: return json_is_array(v);
	case K_OBJECT: return json_is_object(v);
	case K_NUMBER_OR_NULL: return json_is_number(v) || json_is_null(v);
	case K_STRING_OR_NULL: return json_is_string(v) || json_is_null(v);
	}
	return 0;
}

static const char *kind_name(enum kind k)
{
	static const char *const names[] = { "a string", "a number", "an integer", "a boolean",
		"an array", "an object", "a number or null", "a string or null" };
	return names[k];
}

struct field {
	const char *key;
	enum kind kind;
	int required;
};

static int check_fields(const json_t *obj, const char *path, const struct field *fields, size_t n)
{
	if (!json_is_object(obj))
		return ab_error_setc(AB_EINVALID, "result: %s: expected an object", path);
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_object_get(obj, fields[i].key);
		if (v == NULL) {
			if (fields[i].required)
				return ab_error_setc(AB_EINVALID, "result: %s.%s: missing", path, fields[i].key);
			continue;
		}
		if (!type_ok(v, fields[i].kind))
			return ab_error_setc(AB_EINVALID, "result: %s.%s: expected %s", path, fields[i].key,
				kind_name(fields[i].kind));
	}
	return 0;
}

static int check_array(const json_t *doc, const char *key, const struct field *fields, size_t n)
{
	const json_t *arr = json_object_get(doc, key);
	if (arr == NULL)
		return 0;
	if (!json_is_array(arr))
		return ab_error_setc(AB_EINVALID, "result: %s: expected an array", key);
	size_t i;
	const json_t *item;
	json_array_foreach(arr, i, item) {
		char path[64];
		snprintf(path, sizeof(path), "%s[%zu]", key, i);
		int error = check_fields(item, path, fields, n);
		if (error)
			return error;
	}
	return 0;
}

int ab_result_validate(const json_t *doc)
{
	static const struct field top[] = {
		{ "schema", K_STRING, 1 }, { "verdict", K_OBJECT, 1 }, { "base", K_OBJECT, 0 },
		{ "head", K_OBJECT, 0 }, { "environment", K_OBJECT, 0 }, { "method", K_STRING_OR_NULL, 0 },
		{ "pairs", K_OBJECT, 0 }, { "seed", K_STRING, 0 }, { "suite", K_OBJECT, 0 },
		{ "changed_files", K_ARRAY, 0 }, { "failures", K_OBJECT, 0 }, { "timing", K_OBJECT, 0 },
		{ "build", K_OBJECT, 0 }, { "statistics", K_OBJECT, 0 }, { "engine_clock", K_OBJECT, 0 },
		{ "calibration", K_OBJECT, 0 },
	};
	static const struct field verdict[] = {
		{ "label", K_STRING, 1 }, { "reason", K_STRING, 1 }, { "labels", K_ARRAY, 1 },
		{ "notes", K_ARRAY, 0 }, { "tier", K_STRING_OR_NULL, 0 }, { "kind", K_STRING, 0 },
	};
	static const struct field side[] = {
		{ "ref", K_STRING_OR_NULL, 0 }, { "sha", K_STRING_OR_NULL, 0 }, { "tree", K_STRING_OR_NULL, 0 },
	};
	static const struct field metric[] = {
		{ "name", K_STRING, 1 }, { "model", K_STRING, 1 }, { "ctx", K_INTEGER, 1 },
		{ "base", K_OBJECT, 1 }, { "head", K_OBJECT, 1 }, { "ratio", K_NUMBER_OR_NULL, 1 },
		{ "ci", K_ARRAY, 1 }, { "outcome", K_STRING, 1 }, { "gating", K_BOOL, 0 },
		{ "p_adj", K_NUMBER_OR_NULL, 0 }, { "ci_adj", K_ARRAY, 0 }, { "n_pairs", K_INTEGER, 0 },
		{ "tier", K_STRING_OR_NULL, 0 }, { "label", K_STRING_OR_NULL, 0 },
	};
	static const struct field gate[] = {
		{ "name", K_STRING, 1 }, { "value", K_NUMBER_OR_NULL, 1 },
		{ "threshold", K_NUMBER_OR_NULL, 1 }, { "pass", K_BOOL, 1 }, { "detail", K_STRING_OR_NULL, 0 },
		{ "model", K_STRING_OR_NULL, 0 }, { "op", K_STRING_OR_NULL, 0 },
	};
	static const struct field sample[] = {
		{ "side", K_STRING, 1 }, { "pair", K_INTEGER, 1 }, { "model", K_STRING, 1 },
		{ "ctx", K_INTEGER, 1 }, { "metric", K_STRING, 1 }, { "value", K_NUMBER_OR_NULL, 1 },
		{ "ok", K_BOOL, 1 }, { "order", K_INTEGER, 0 }, { "batch", K_INTEGER, 0 },
		{ "reason", K_STRING_OR_NULL, 0 }, { "t_start_ns", K_INTEGER, 0 },
		{ "t_end_ns", K_INTEGER, 0 }, { "reps", K_INTEGER, 0 }, { "rep_values", K_ARRAY, 0 },
		{ "harness_ms", K_NUMBER_OR_NULL, 0 }, { "engine_ms", K_NUMBER_OR_NULL, 0 },
		{ "deferred_ms", K_NUMBER_OR_NULL, 0 },
	};
#define N(a) (sizeof(a) / sizeof((a)[0]))
	int error;
	if ((error = check_fields(doc, "$", top, N(top))) != 0)
		return error;
	const char *schema = json_string_value(json_object_get(doc, "schema"));
	if (strcmp(schema, AB_RESULT_SCHEMA) != 0 && strcmp(schema, AB_RESULT_SCHEMA_V1) != 0)
		return ab_error_setc(AB_EINVALID, "result: schema is \"%.64s\", expected %s", schema,
			AB_RESULT_SCHEMA);
	const json_t *v = json_object_get(doc, "verdict");
	if ((error = check_fields(v, "verdict", verdict, N(verdict))) != 0)
		return error;
	size_t i;
	const json_t *item;
	json_array_foreach(json_object_get(v, "labels"), i, item)
		if (!json_is_string(item))
			return ab_error_setc(AB_EINVALID, "result: verdict.labels[%zu]: expected a string", i);
	if (json_object_get(doc, "base") && (error = check_fields(json_object_get(doc, "base"), "base",
		side, N(side))) != 0)
		return error;
	if (json_object_get(doc, "head") && (error = check_fields(json_object_get(doc, "head"), "head",
		side, N(side))) != 0)
		return error;
	if ((error = check_array(doc, "metrics", metric, N(metric))) != 0 ||
	    (error = check_array(doc, "gates", gate, N(gate))) != 0 ||
	    (error = check_array(doc, "samples", sample, N(sample))) != 0)
		return error;
#undef N
	return 0;
}

int ab_result_load(json_t **out, const char *text, size_t len)
{
	if (out == NULL || text == NULL)
		return ab_error_setc(AB_EINVALID, "result: no input");
	if (len > AB_RESULT_MAX_BYTES)
		return ab_error_setc(AB_EINVALID, "result: document of %zu bytes (at most %u)", len,
			AB_RESULT_MAX_BYTES);
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (doc == NULL)
		return ab_error_setc(AB_EINVALID, "result: line %d column %d: %s", jerr.line, jerr.column,
			jerr.text);
	int error = ab_result_validate(doc);
	if (error) {
		json_decref(doc);
		return error;
	}
	*out = doc;
	return 0;
}

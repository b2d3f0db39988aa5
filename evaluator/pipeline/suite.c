/*
 * suite.c - strict parser for abgate.suite/1 files (see suite.h for the key table). Each section
 * is read by one function that checks for unknown keys first, then reads its keys with jread.h's
 * typed getters (defaults and ranges) and the suite's own (commands, names, contexts, strings with
 * placeholders), so every error names the key it is about ("speed.decode.contexts[2]").
 */
#define _GNU_SOURCE
#include "suite.h"
#include "suite_sut.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "error.h"
#include "jread.h"
#include "suite_json.h"
#include "suite_values.h"

#define LIST_MAX 256         /* most env vars, harness paths */

static const char *const default_harness_paths[] = { "guards/", "evaluator/", "tools/", "ci/" };
static const struct ab_suite_tier default_tiers[AB_SUITE_TIER_COUNT] = {
	{ "XS", 0.02 }, { "S", 0.035 }, { "M", 0.06 }, { "L", 0.10 }, { "XL", 0.18 }
};

/* --- sections ------------------------------------------------------------------------------------ */

static int parse_env(struct ab_suite_sut *sut, struct ab_jread *p, const json_t *obj)
{
	json_t *v = ab_jread_optional(obj, "env"), *value;
	const char *key;
	size_t old, n;

	if (!v)
		return 0;
	old = ab_jread_push_key(p, "env");
	if (ab_jread_object(p, v) < 0)
		return AB_EINVALID;
	if ((n = json_object_size(v)) > LIST_MAX)
		return ab_jread_fail(p, "more than %d variables", LIST_MAX);
	if (n && !(sut->env = calloc(n, sizeof(*sut->env))))
		return ab_jread_oom(p);
	json_object_foreach(v, key, value) {
		size_t old_key = ab_jread_push_key(p, key);
		struct ab_suite_envvar *var = &sut->env[sut->env_count];
		if (!key[0] || strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != strlen(key) ||
		    (key[0] >= '0' && key[0] <= '9'))
			return ab_jread_fail(p, "not a valid environment variable name");
		if (json_is_string(value) && json_string_length(value) == 0)
			var->value = strdup("");   /* an empty value is a legitimate setting */
		else if (ab_suite_check_string(p, value) < 0)
			return AB_EINVALID;
		else
			var->value = strdup(json_string_value(value));
		var->name = strdup(key);
		if (!var->name || !var->value) {
			free(var->name);
			free(var->value);
			return ab_jread_oom(p);
		}
		sut->env_count++;
		ab_jread_pop(p, old_key);
	}
	ab_jread_pop(p, old);
	return 0;
}

static int parse_sut(struct ab_suite_sut *sut, struct ab_jread *p, const json_t *v)
{
	static const char *const keys[] = { "command", "env", "ready_timeout_s", "request_timeout_s", "kind", "url",
					     "ready_path", "api", "model_name", "vocab_size", NULL };

	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0 ||
	    ab_suite_get_argv(&sut->command, p, v, "command", 1) < 0 ||
	    parse_env(sut, p, v) < 0 ||
	    ab_jread_int(&sut->ready_timeout_s, p, v, "ready_timeout_s", 120, 1, INT_MAX) < 0 ||
	    ab_jread_int(&sut->request_timeout_s, p, v, "request_timeout_s", 300, 1, INT_MAX) < 0 ||
	    ab_suite_parse_sut_http(sut, p, v) < 0)
		return AB_EINVALID;
	return 0;
}

static int parse_build(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	static const char *const keys[] = { "configure", "build", "timeout_s", NULL };
	json_t *v = NULL;
	size_t old;

	if (ab_jread_required(&v, p, root, "build") < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, "build");
	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0 ||
	    ab_suite_get_argv(&suite->configure, p, v, "configure", 0) < 0 ||
	    ab_suite_get_argv(&suite->build, p, v, "build", 1) < 0 ||
	    ab_jread_int(&suite->build_timeout_s, p, v, "timeout_s", 1800, 1, INT_MAX) < 0)
		return AB_EINVALID;
	ab_jread_pop(p, old);
	return 0;
}

static int parse_model(struct ab_suite_model *model, struct ab_jread *p, const json_t *v)
{
	static const char *const keys[] = { "name", "path", "generate", "sha256", "reference", "references", "draft",
					     NULL };
	json_t *ref, *refs, *draft;

	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0 ||
	    ab_suite_get_name(model->name, p, v, "name") < 0 ||
	    ab_suite_get_string(&model->path, p, v, "path", 1) < 0 ||
	    ab_suite_get_argv(&model->generate, p, v, "generate", 0) < 0)
		return AB_EINVALID;
	if (ab_suite_get_sha256(model->sha256, p, v) < 0)
		return AB_EINVALID;
	if ((draft = ab_jread_optional(v, "draft"))) {
		static const char *const draft_keys[] = { "path", "generate", "sha256", NULL };
		size_t old = ab_jread_push_key(p, "draft");
		if (ab_jread_object(p, draft) < 0 || ab_jread_keys(p, draft, draft_keys) < 0 ||
		    ab_suite_get_string(&model->draft.path, p, draft, "path", 1) < 0 ||
		    ab_suite_get_argv(&model->draft.generate, p, draft, "generate", 0) < 0 ||
		    ab_suite_get_sha256(model->draft.sha256, p, draft) < 0)
			return AB_EINVALID;
		model->has_draft = 1;
		ab_jread_pop(p, old);
	}
	ref = ab_jread_optional(v, "reference");
	refs = ab_jread_optional(v, "references");
	if (ref && refs)
		return ab_jread_fail(p, "give either reference or references, not both");
	if (ref) {
		size_t old = ab_jread_push_key(p, "reference");
		model->ref_count = 1;       /* counted first: a half-parsed reference is freed too */
		if (parse_sut(&model->refs[0].sut, p, ref) < 0)
			return AB_EINVALID;
		snprintf(model->refs[0].name, sizeof(model->refs[0].name), "reference");
		ab_jread_pop(p, old);
	}
	if (refs) {
		size_t old = ab_jread_push_key(p, "references");
		const char *key;
		json_t *sut;
		if (ab_jread_object(p, refs) < 0)
			return AB_EINVALID;
		if (json_object_size(refs) == 0 || json_object_size(refs) > AB_SUITE_REFS_MAX)
			return ab_jread_fail(p, "expected 1 to 4 named references");
		json_object_foreach(refs, key, sut) {
			struct ab_suite_ref *r = &model->refs[model->ref_count];
			size_t old_key = ab_jread_push_key(p, key);
			if (!ab_suite_valid_name(key))
				return ab_jread_fail(p, "reference names must match [A-Za-z0-9._-]{1,63}");
			snprintf(r->name, sizeof(r->name), "%s", key);
			model->ref_count++;     /* counted first: a half-parsed reference is freed too */
			if (parse_sut(&r->sut, p, sut) < 0)
				return AB_EINVALID;
			ab_jread_pop(p, old_key);
		}
		ab_jread_pop(p, old);
	}
	model->has_reference = model->ref_count > 0;
	return 0;
}

static int parse_models(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	json_t *v = NULL, *item;
	size_t old, i, n;
	int j;

	if (ab_jread_required(&v, p, root, "models") < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, "models");
	n = json_array_size(v);
	if (!json_is_array(v) || n == 0)
		return ab_jread_fail_type(p, "a non-empty array of models", v);
	if (n > AB_SUITE_MODELS_MAX)
		return ab_jread_fail(p, "more than %d models", AB_SUITE_MODELS_MAX);
	if (!(suite->models = calloc(n, sizeof(*suite->models))))
		return ab_jread_oom(p);
	json_array_foreach(v, i, item) {
		size_t old_index = ab_jread_push_index(p, i);
		suite->model_count = (int)i + 1;   /* counted first: a half-parsed model is freed too */
		if (parse_model(&suite->models[i], p, item) < 0)
			return AB_EINVALID;
		for (j = 0; j < (int)i; j++)
			if (strcmp(suite->models[j].name, suite->models[i].name) == 0) {
				ab_jread_push_key(p, "name");
				return ab_jread_fail(p, "model name \"%s\" is used twice", suite->models[i].name);
			}
		ab_jread_pop(p, old_index);
	}
	ab_jread_pop(p, old);
	return 0;
}

static int round_up_even(int x)
{
	return x + (x & 1);
}

static int parse_speed(struct ab_suite_speed *speed, struct ab_jread *p, const json_t *root)
{
	static const char *const keys[] = { "decode", "prefill", "pairs_min", "pairs_max", "confirm_pairs", "margin",
					     "regression_ratio", "alpha", "max_failed_fraction", "method", "reps",
					     "reps_ctx_max", "gate_first_request", "engine_clock_ratio", "equivalence_level", NULL };
	static const char *const decode_keys[] = { "contexts", "gen_tokens", NULL };
	static const char *const prefill_keys[] = { "contexts", NULL };
	json_t *v = NULL, *decode, *prefill, *method;
	size_t old, old_sub;

	if (ab_jread_required(&v, p, root, "speed") < 0)
		return AB_EINVALID;
	old = ab_jread_push_key(p, "speed");
	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0)
		return AB_EINVALID;
	speed->gen_tokens = 128;
	if ((decode = ab_jread_optional(v, "decode"))) {
		old_sub = ab_jread_push_key(p, "decode");
		if (ab_jread_object(p, decode) < 0 || ab_jread_keys(p, decode, decode_keys) < 0 ||
		    ab_suite_get_contexts(&speed->decode_contexts, &speed->decode_count, p, decode) < 0 ||
		    ab_jread_int(&speed->gen_tokens, p, decode, "gen_tokens", 128, 2, 1 << 20) < 0)
			return AB_EINVALID;
		ab_jread_pop(p, old_sub);
	}
	if ((prefill = ab_jread_optional(v, "prefill"))) {
		old_sub = ab_jread_push_key(p, "prefill");
		if (ab_jread_object(p, prefill) < 0 || ab_jread_keys(p, prefill, prefill_keys) < 0 ||
		    ab_suite_get_contexts(&speed->prefill_contexts, &speed->prefill_count, p, prefill) < 0)
			return AB_EINVALID;
		ab_jread_pop(p, old_sub);
	}
	if (speed->decode_count + speed->prefill_count == 0)
		return ab_jread_fail(p, "no workload: give decode.contexts and/or prefill.contexts");
	int distinct = speed->decode_count;
	for (int i = 0; i < speed->prefill_count; i++) {
		int seen = 0;
		for (int j = 0; j < speed->decode_count; j++)
			seen |= speed->decode_contexts[j] == speed->prefill_contexts[i];
		distinct += !seen;
	}
	if (distinct > AB_SUITE_CONTEXTS_MAX)
		return ab_jread_fail(p, "%d distinct contexts in decode and prefill together; at most %d",
			distinct, AB_SUITE_CONTEXTS_MAX);
	if (ab_jread_int(&speed->pairs_min, p, v, "pairs_min", 6, 2, 10000) < 0 ||
	    ab_jread_int(&speed->pairs_max, p, v, "pairs_max", speed->pairs_min > 16 ? speed->pairs_min : 16, 2,
	                 10000) < 0 ||
	    ab_jread_int(&speed->confirm_pairs, p, v, "confirm_pairs", 6, 0, 10000) < 0 ||
	    ab_jread_number(&speed->margin, p, v, "margin", 0.01, 0, 0.5, "[)") < 0 ||
	    ab_jread_number(&speed->regression_ratio, p, v, "regression_ratio", 0.98, 0, 1, "(]") < 0 ||
	    ab_jread_number(&speed->alpha, p, v, "alpha", 0.05, 0, 0.5, "()") < 0 ||
	    ab_jread_number(&speed->max_failed_fraction, p, v, "max_failed_fraction", 0.25, 0, 1, "[)") < 0 ||
	    ab_jread_int(&speed->reps, p, v, "reps", 3, 1, AB_SUITE_REPS_MAX) < 0 ||
	    ab_jread_int(&speed->reps_ctx_max, p, v, "reps_ctx_max", 0, 0, INT_MAX) < 0 ||
	    ab_jread_bool(&speed->gate_first_request, p, v, "gate_first_request", 0) < 0 ||
	    ab_jread_number(&speed->engine_clock_ratio, p, v, "engine_clock_ratio", 1.5, 1, 100, "(]") < 0 ||
	    ab_jread_number(&speed->equivalence_level, p, v, "equivalence_level", 0.90, 0.5, 1, "()") < 0)
		return AB_EINVALID;
	/* Balance (as many AB as BA pairs) holds only at even counts, so every budget is even. */
	speed->pairs_min = round_up_even(speed->pairs_min);
	speed->pairs_max = round_up_even(speed->pairs_max);
	speed->confirm_pairs = round_up_even(speed->confirm_pairs);
	if (speed->pairs_max < speed->pairs_min) {
		ab_jread_push_key(p, "pairs_max");
		return ab_jread_fail(p, "pairs_max (%d) is below pairs_min (%d)", speed->pairs_max, speed->pairs_min);
	}
	speed->method = AB_SUITE_METHOD_WILCOXON;
	if ((method = ab_jread_optional(v, "method"))) {
		old_sub = ab_jread_push_key(p, "method");
		if (json_is_string(method) && strcmp(json_string_value(method), "bootstrap") == 0)
			speed->method = AB_SUITE_METHOD_BOOTSTRAP;
		else if (!json_is_string(method) || strcmp(json_string_value(method), "wilcoxon") != 0)
			return ab_jread_fail_type(p, "\"wilcoxon\" or \"bootstrap\"", method);
		ab_jread_pop(p, old_sub);
	}
	ab_jread_pop(p, old);
	return 0;
}

static int parse_accuracy(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	static const char *const keys[] = { "enabled", "windows", "window_len", "score_from", "top_k", "corpus",
					     "top1_min", "kl_max", "top1_drop_max", "kl_rise_max", "kl_rise_rel", "greedy_check", NULL };
	struct ab_suite_accuracy *acc = &suite->accuracy;
	json_t *v = ab_jread_optional(root, "accuracy");
	size_t old;
	int i, any_reference = 0;

	/* Defaults even when absent, so that a caller enabling accuracy later gets sane values. */
	*acc = (struct ab_suite_accuracy){ 0, 4, 256, 128, 32, NULL, 0.90, 0.20, 0.01, 0.02, 0, 1 };
	if (!v)
		return 0;
	old = ab_jread_push_key(p, "accuracy");
	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0 ||
	    ab_jread_bool(&acc->enabled, p, v, "enabled", 1) < 0 ||
	    ab_jread_int(&acc->windows, p, v, "windows", 4, 1, 4096) < 0 ||
	    ab_jread_int(&acc->window_len, p, v, "window_len", 256, 2, 1 << 20) < 0 ||
	    ab_jread_int(&acc->score_from, p, v, "score_from", acc->window_len / 2, 0, acc->window_len - 1) < 0 ||
	    ab_jread_int(&acc->top_k, p, v, "top_k", 32, 1, 1024) < 0 ||
	    ab_suite_get_string(&acc->corpus, p, v, "corpus", 0) < 0 ||
	    ab_jread_number(&acc->top1_min, p, v, "top1_min", 0.90, 0, 1, "[]") < 0 ||
	    ab_jread_number(&acc->kl_max, p, v, "kl_max", 0.20, 0, INFINITY, "[)") < 0 ||
	    ab_jread_number(&acc->top1_drop_max, p, v, "top1_drop_max", 0.01, 0, 1, "[]") < 0 ||
	    ab_jread_number(&acc->kl_rise_max, p, v, "kl_rise_max", 0.02, 0, INFINITY, "[)") < 0 ||
	    ab_jread_number(&acc->kl_rise_rel, p, v, "kl_rise_rel", 0, 0, INFINITY, "[)") < 0 ||
	    ab_jread_bool(&acc->greedy_check, p, v, "greedy_check", 1) < 0)
		return AB_EINVALID;
	for (i = 0; i < suite->model_count; i++)
		any_reference |= suite->models[i].has_reference;
	if (acc->enabled && !any_reference)
		return ab_jread_fail(p, "accuracy is enabled but no model has a reference");
	ab_jread_pop(p, old);
	return 0;
}

/* A {XS,S,M,L,XL} object at the current path into tiers (which holds the defaults on entry). */
static int parse_tier_object(struct ab_suite_tier *tiers, struct ab_jread *p, const json_t *v)
{
	static const char *const keys[] = { "XS", "S", "M", "L", "XL", NULL };
	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0)
		return AB_EINVALID;
	for (int i = 0; i < AB_SUITE_TIER_COUNT; i++) {
		struct ab_suite_tier *t = &tiers[i];
		if (ab_jread_number(&t->min_gain, p, v, t->name, t->min_gain, 0, 10, "()") < 0)
			return AB_EINVALID;
		if (i > 0 && t->min_gain <= tiers[i - 1].min_gain) {
			ab_jread_push_key(p, t->name);
			return ab_jread_fail(p, "tier thresholds must increase: %s %g is not above %s %g", t->name, t->min_gain,
				    tiers[i - 1].name, tiers[i - 1].min_gain);
		}
	}
	return 0;
}

static int parse_tiers(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	json_t *v = ab_jread_optional(root, "tiers");
	size_t old;

	memcpy(suite->tiers, default_tiers, sizeof(default_tiers));
	if (!v)
		return 0;
	old = ab_jread_push_key(p, "tiers");
	if (parse_tier_object(suite->tiers, p, v) < 0)
		return AB_EINVALID;
	ab_jread_pop(p, old);
	return 0;
}

/* Distinct values over up to three context lists. */
static int distinct_contexts(const int *a, int na, const int *b, int nb, const int *c, int nc)
{
	const int *lists[3] = { a, b, c };
	int counts[3] = { na, nb, nc }, distinct = 0;
	for (int l = 0; l < 3; l++)
		for (int i = 0; i < counts[l]; i++) {
			int seen = 0;
			for (int m = 0; m <= l && !seen; m++)
				for (int j = 0; j < (m == l ? i : counts[m]) && !seen; j++)
					seen = lists[m][j] == lists[l][i];
			distinct += !seen;
		}
	return distinct;
}

/* The spec section (after models and tiers: it checks for drafts and copies the tiers). */
static int parse_spec(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	static const char *const keys[] = { "contexts", "gen_tokens", "prompts", "regression_ratio", "tau_floor_ratio",
					     "tiers", NULL };
	struct ab_suite_spec *spec = &suite->spec;
	json_t *v = ab_jread_optional(root, "spec"), *tiers;
	int any_draft = 0;

	spec->gen_tokens = 128;
	spec->regression_ratio = 0.98;
	spec->tau_floor_ratio = 0.95;
	memcpy(spec->tiers, suite->tiers, sizeof(spec->tiers));
	if (!v)
		return 0;
	size_t old = ab_jread_push_key(p, "spec");
	if (ab_jread_object(p, v) < 0 || ab_jread_keys(p, v, keys) < 0 ||
	    ab_suite_get_contexts(&spec->contexts, &spec->count, p, v) < 0 ||
	    ab_jread_int(&spec->gen_tokens, p, v, "gen_tokens", 128, 2, 1 << 20) < 0 ||
	    ab_suite_get_string(&spec->prompts, p, v, "prompts", 0) < 0 ||
	    ab_jread_number(&spec->regression_ratio, p, v, "regression_ratio", 0.98, 0, 1, "(]") < 0 ||
	    ab_jread_number(&spec->tau_floor_ratio, p, v, "tau_floor_ratio", 0.95, 0, 1, "(]") < 0)
		return AB_EINVALID;
	if ((tiers = ab_jread_optional(v, "tiers"))) {
		size_t old_sub = ab_jread_push_key(p, "tiers");
		if (parse_tier_object(spec->tiers, p, tiers) < 0)
			return AB_EINVALID;
		spec->own_tiers = 1;
		ab_jread_pop(p, old_sub);
	}
	for (int i = 0; i < suite->model_count; i++)
		any_draft |= suite->models[i].has_draft;
	if (spec->count > 0 && !any_draft)
		return ab_jread_fail(p, "spec.contexts are given but no model has a draft (models[].draft)");
	if (spec->count > 0 && suite->sut.kind == AB_SUITE_SUT_OPENAI && suite->sut.api != AB_SUITE_API_LLAMA)
		return ab_jread_fail(p, "spec.contexts with an openai SUT need sut.api \"llama\": agreement with plain "
			"greedy needs the token ids, which api \"completions\" does not stream");
	const struct ab_suite_speed *sp = &suite->speed;
	int distinct = distinct_contexts(sp->decode_contexts, sp->decode_count, sp->prefill_contexts,
		sp->prefill_count, spec->contexts, spec->count);
	if (distinct > AB_SUITE_CONTEXTS_MAX)
		return ab_jread_fail(p, "%d distinct contexts in decode, prefill and spec together; at most %d",
			distinct, AB_SUITE_CONTEXTS_MAX);
	ab_jread_pop(p, old);
	return 0;
}

/* Whether an argv or env value mentions {draft}. */
static int argv_mentions(const struct ab_suite_argv *a, const char *needle)
{
	for (int i = 0; i < a->argc; i++)
		if (strstr(a->argv[i], needle))
			return 1;
	return 0;
}

static int sut_mentions(const struct ab_suite_sut *sut, const char *needle)
{
	if (argv_mentions(&sut->command, needle))
		return 1;
	for (int i = 0; i < sut->env_count; i++)
		if (strstr(sut->env[i].value, needle))
			return 1;
	return 0;
}

/* {draft} names a model's draft: meaningful only where a SUT is started for a model that has one,
 * and in the draft's own generator (the file to write). Build commands, model paths and model
 * generators run for no particular draft, so it is refused there. */
static int check_draft_placeholders(struct ab_suite *suite, struct ab_jread *p)
{
	static const char draft[] = "{draft}";
	if (argv_mentions(&suite->configure, draft) || argv_mentions(&suite->build, draft))
		return ab_jread_fail(p, "build: {draft} is only substituted in SUT commands");
	for (int i = 0; i < suite->model_count; i++) {
		const struct ab_suite_model *m = &suite->models[i];
		if (argv_mentions(&m->generate, draft) || (m->draft.path && strstr(m->draft.path, draft)) ||
		    strstr(m->path, draft))
			return ab_jread_fail(p, "models[%d] (%s): {draft} is only substituted in SUT commands and in "
				"draft.generate", i, m->name);
		if (!m->has_draft && sut_mentions(&suite->sut, draft))
			return ab_jread_fail(p, "sut.command: uses {draft}, but model \"%s\" has no draft "
				"(every model started by this command needs models[].draft)", m->name);
		for (int r = 0; r < m->ref_count; r++)
			if (!m->has_draft && sut_mentions(&m->refs[r].sut, draft))
				return ab_jread_fail(p, "models[%d].%s: uses {draft}, but model \"%s\" has no draft", i,
					m->refs[r].name, m->name);
	}
	return 0;
}

static int parse_harness_paths(struct ab_suite *suite, struct ab_jread *p, const json_t *root)
{
	json_t *v = ab_jread_optional(root, "harness_paths"), *item;
	size_t old, i, n = sizeof(default_harness_paths) / sizeof(*default_harness_paths);

	if (v) {
		old = ab_jread_push_key(p, "harness_paths");
		if (!json_is_array(v))
			return ab_jread_fail_type(p, "an array of relative paths", v);
		if ((n = json_array_size(v)) > LIST_MAX)
			return ab_jread_fail(p, "more than %d paths", LIST_MAX);
		ab_jread_pop(p, old);
	}
	if (n && !(suite->harness_paths = calloc(n, sizeof(char *))))
		return ab_jread_oom(p);
	for (i = 0; i < n; i++) {
		const char *s = v ? NULL : default_harness_paths[i];
		if (v) {
			old = ab_jread_push_key(p, "harness_paths");
			ab_jread_push_index(p, i);
			item = json_array_get(v, i);
			if (ab_suite_check_string(p, item) < 0)
				return AB_EINVALID;
			s = json_string_value(item);
			if (s[0] == '/' || strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 || strstr(s, "/../") ||
			    (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
				return ab_jread_fail(p, "expected a path relative to the repository root without \"..\", got \"%s\"", s);
			ab_jread_pop(p, old);
		}
		if (!(suite->harness_paths[i] = strdup(s)))
			return ab_jread_oom(p);
		suite->harness_path_count = (int)i + 1;
	}
	return 0;
}

/* --- hashing ------------------------------------------------------------------------------------- */

static int sha256_hex(char out[65], const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0, i;

	if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) || md_len != 32)
		return ab_error_set("suite: SHA-256 failed");
	for (i = 0; i < md_len; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* The build cache key: only the commands (what determines the artifact), canonically serialised. */
static int hash_build(struct ab_suite *suite)
{
	json_t *canon = json_pack("{s:o, s:o}", "configure", ab_suite_argv_json(&suite->configure),
				  "build", ab_suite_argv_json(&suite->build));
	char *text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	int error = text ? sha256_hex(suite->build_hash, text, strlen(text)) : ab_error_set("suite: out of memory");

	free(text);
	json_decref(canon);
	return error;
}

/* --- public ------------------------------------------------------------------------------------- */

int ab_suite_load_buffer(struct ab_suite **out, const char *text, size_t len, const char *origin)
{
	static const char *const keys[] = { "schema", "name", "build", "sut", "models", "speed", "accuracy",
					     "spec", "tiers", "harness_paths", NULL };
	struct ab_jread p = { .what = "suite", .origin = origin };
	struct ab_suite *suite = NULL;
	json_t *root = NULL, *schema = NULL, *sut = NULL;
	json_error_t jerr;
	int error = AB_EINVALID;

	if (len > AB_SUITE_MAX_BYTES) {
		ab_jread_fail(&p, "file is %zu bytes, more than the %d-byte limit", len, AB_SUITE_MAX_BYTES);
		goto cleanup;
	}
	if (!(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr))) {
		ab_jread_fail(&p, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
		goto cleanup;
	}
	if (ab_jread_object(&p, root) < 0 || ab_jread_keys(&p, root, keys) < 0 ||
	    ab_jread_required(&schema, &p, root, "schema") < 0)
		goto cleanup;
	if (!json_is_string(schema) || strcmp(json_string_value(schema), AB_SUITE_SCHEMA) != 0) {
		ab_jread_push_key(&p, "schema");
		ab_jread_fail_type(&p, "\"" AB_SUITE_SCHEMA "\"", schema);
		goto cleanup;
	}
	if (!(suite = calloc(1, sizeof(*suite)))) {
		error = ab_error_set("suite: out of memory");
		goto cleanup;
	}
	if (ab_suite_get_name(suite->name, &p, root, "name") < 0 ||
	    parse_build(suite, &p, root) < 0 ||
	    ab_jread_required(&sut, &p, root, "sut") < 0)
		goto cleanup;
	ab_jread_push_key(&p, "sut");
	if (parse_sut(&suite->sut, &p, sut) < 0)
		goto cleanup;
	ab_jread_pop(&p, 0);
	if (parse_models(suite, &p, root) < 0 ||
	    parse_speed(&suite->speed, &p, root) < 0 ||
	    parse_accuracy(suite, &p, root) < 0 ||
	    parse_tiers(suite, &p, root) < 0 ||
	    parse_spec(suite, &p, root) < 0 ||
	    parse_harness_paths(suite, &p, root) < 0 ||
	    check_draft_placeholders(suite, &p) < 0 || ab_suite_check_port_placeholders(suite, &p) < 0)
		goto cleanup;
	if (sha256_hex(suite->sha256, text, len) < 0 || hash_build(suite) < 0) {
		error = AB_ERROR;
		goto cleanup;
	}
	*out = suite;
	suite = NULL;
	error = 0;

cleanup:
	ab_suite_free(suite);
	json_decref(root);
	return p.oom ? AB_ERROR : error;
}

int ab_suite_load_file(struct ab_suite **out, const char *path)
{
	char *text = NULL;
	ssize_t got;
	size_t len = 0;
	int fd = -1, error = AB_ERROR;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		error = errno == ENOENT ? AB_ENOTFOUND : AB_ERROR;
		ab_error_errno("suite %s: cannot open", path);
		goto cleanup;
	}
	/* Read one byte past the cap so an oversized file is recognised without trusting st_size. */
	if (!(text = malloc(AB_SUITE_MAX_BYTES + 1))) {
		ab_error_set("suite %s: out of memory", path);
		goto cleanup;
	}
	while (len < AB_SUITE_MAX_BYTES + 1 && (got = read(fd, text + len, AB_SUITE_MAX_BYTES + 1 - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ab_error_errno("suite %s: read failed", path);
			goto cleanup;
		}
		len += (size_t)got;
	}
	error = ab_suite_load_buffer(out, text, len, path);

cleanup:
	if (fd >= 0)
		close(fd);
	free(text);
	return error;
}

static void argv_free(struct ab_suite_argv *a)
{
	int i;
	if (a->argv)
		for (i = 0; i < a->argc; i++)
			free(a->argv[i]);
	free(a->argv);
}

static void sut_free(struct ab_suite_sut *sut)
{
	int i;
	argv_free(&sut->command);
	free(sut->url);
	free(sut->ready_path);
	free(sut->model_name);
	for (i = 0; i < sut->env_count; i++) {
		free(sut->env[i].name);
		free(sut->env[i].value);
	}
	free(sut->env);
}

void ab_suite_free(struct ab_suite *suite)
{
	int i;

	if (!suite)
		return;
	argv_free(&suite->configure);
	argv_free(&suite->build);
	sut_free(&suite->sut);
	for (i = 0; i < suite->model_count; i++) {
		free(suite->models[i].path);
		argv_free(&suite->models[i].generate);
		free(suite->models[i].draft.path);
		argv_free(&suite->models[i].draft.generate);
		for (int r = 0; r < suite->models[i].ref_count; r++)
			sut_free(&suite->models[i].refs[r].sut);
	}
	free(suite->models);
	free(suite->speed.decode_contexts);
	free(suite->speed.prefill_contexts);
	free(suite->accuracy.corpus);
	free(suite->spec.contexts);
	free(suite->spec.prompts);
	for (i = 0; i < suite->harness_path_count; i++)
		free(suite->harness_paths[i]);
	free(suite->harness_paths);
	free(suite);
}

const struct ab_suite_model *ab_suite_model_find(const struct ab_suite *suite, const char *name)
{
	int i;
	for (i = 0; i < suite->model_count; i++)
		if (strcmp(suite->models[i].name, name) == 0)
			return &suite->models[i];
	return NULL;
}

const char *ab_suite_method_name(enum ab_suite_method method)
{
	return method == AB_SUITE_METHOD_BOOTSTRAP ? "bootstrap" : "wilcoxon";
}

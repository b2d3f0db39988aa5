/*
 * suite_json.c - the effective suite as an abgate.suite/1 object (every default filled in), so the
 * configuration can be printed and recorded, and loading the dump gives an equal suite.
 */
#include "suite_json.h"
#include "suite_sut.h"

#include <string.h>

json_t *ab_suite_argv_json(const struct ab_suite_argv *a)
{
	json_t *arr;
	int i;

	if (a->argc == 0)
		return json_null();
	arr = json_array();
	for (i = 0; arr && i < a->argc; i++)
		json_array_append_new(arr, json_string(a->argv[i]));
	return arr;
}

static json_t *sut_to_json(const struct ab_suite_sut *sut)
{
	json_t *env = json_object();
	int i;

	for (i = 0; env && i < sut->env_count; i++)
		json_object_set_new(env, sut->env[i].name, json_string(sut->env[i].value));
	json_t *obj = json_pack("{s:o, s:o, s:i, s:i}", "command", ab_suite_argv_json(&sut->command), "env", env,
			 "ready_timeout_s", sut->ready_timeout_s, "request_timeout_s", sut->request_timeout_s);
	if (obj && ab_suite_sut_http_json(obj, sut) < 0) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

static json_t *ints_to_json(const int *values, int count)
{
	json_t *arr = json_array();
	int i;
	for (i = 0; arr && i < count; i++)
		json_array_append_new(arr, json_integer(values[i]));
	return arr;
}

static json_t *tiers_json(const struct ab_suite_tier *tiers)
{
	json_t *obj = json_object();
	for (int i = 0; obj && i < AB_SUITE_TIER_COUNT; i++)
		json_object_set_new(obj, tiers[i].name, json_real(tiers[i].min_gain));
	return obj;
}

json_t *ab_suite_to_json(const struct ab_suite *suite)
{
	const struct ab_suite_speed *sp = &suite->speed;
	const struct ab_suite_accuracy *acc = &suite->accuracy;
	json_t *models = json_array(), *tiers = tiers_json(suite->tiers), *paths = json_array(), *build, *accuracy;
	int i;

	for (i = 0; models && i < suite->model_count; i++) {
		const struct ab_suite_model *m = &suite->models[i];
		json_t *model = json_pack("{s:s, s:s}", "name", m->name, "path", m->path);
		if (!model)
			break;
		if (m->generate.argc)
			json_object_set_new(model, "generate", ab_suite_argv_json(&m->generate));
		json_object_set_new(model, "sha256", m->sha256[0] ? json_string(m->sha256) : json_null());
		if (m->ref_count == 1 && strcmp(m->refs[0].name, "reference") == 0) {
			json_object_set_new(model, "reference", sut_to_json(&m->refs[0].sut));
		} else if (m->ref_count > 0) {
			json_t *refs = json_object();
			for (int r = 0; r < m->ref_count; r++)
				json_object_set_new(refs, m->refs[r].name, sut_to_json(&m->refs[r].sut));
			json_object_set_new(model, "references", refs);
		} else {
			json_object_set_new(model, "reference", json_null());
		}
		if (m->has_draft) {
			json_t *draft = json_pack("{s:s, s:o}", "path", m->draft.path,
				"sha256", m->draft.sha256[0] ? json_string(m->draft.sha256) : json_null());
			if (draft && m->draft.generate.argc)
				json_object_set_new(draft, "generate", ab_suite_argv_json(&m->draft.generate));
			json_object_set_new(model, "draft", draft ? draft : json_null());
		} else {
			json_object_set_new(model, "draft", json_null());
		}
		json_array_append_new(models, model);
	}
	for (i = 0; paths && i < suite->harness_path_count; i++)
		json_array_append_new(paths, json_string(suite->harness_paths[i]));
	build = json_pack("{s:o, s:i}", "build", ab_suite_argv_json(&suite->build), "timeout_s", suite->build_timeout_s);
	if (build && suite->configure.argc)
		json_object_set_new(build, "configure", ab_suite_argv_json(&suite->configure));
	accuracy = json_pack("{s:b, s:i, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:f, s:f, s:b}",
			     "enabled", acc->enabled, "windows", acc->windows, "window_len", acc->window_len,
			     "score_from", acc->score_from, "top_k", acc->top_k,
			     "corpus", acc->corpus ? json_string(acc->corpus) : json_null(),
			     "top1_min", acc->top1_min, "kl_max", acc->kl_max, "top1_drop_max", acc->top1_drop_max,
			     "kl_rise_max", acc->kl_rise_max, "kl_rise_rel", acc->kl_rise_rel,
			     "greedy_check", acc->greedy_check);
	const struct ab_suite_spec *spec = &suite->spec;
	json_t *spec_json = json_pack("{s:o, s:i, s:o, s:f, s:f, s:o}",
			     "contexts", ints_to_json(spec->contexts, spec->count), "gen_tokens", spec->gen_tokens,
			     "prompts", spec->prompts ? json_string(spec->prompts) : json_null(),
			     "regression_ratio", spec->regression_ratio, "tau_floor_ratio", spec->tau_floor_ratio,
			     "tiers", spec->own_tiers ? tiers_json(spec->tiers) : json_null());
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:{s:o, s:i}, s:{s:o}, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:s, s:i, s:i, s:b, s:f, s:f},"
			 " s:o, s:o, s:o, s:o}",
			 "schema", AB_SUITE_SCHEMA, "name", suite->name, "build", build, "sut", sut_to_json(&suite->sut),
			 "models", models, "speed",
			 "decode", "contexts", ints_to_json(sp->decode_contexts, sp->decode_count),
			 "gen_tokens", sp->gen_tokens,
			 "prefill", "contexts", ints_to_json(sp->prefill_contexts, sp->prefill_count),
			 "pairs_min", sp->pairs_min, "pairs_max", sp->pairs_max, "confirm_pairs", sp->confirm_pairs,
			 "margin", sp->margin, "regression_ratio", sp->regression_ratio, "alpha", sp->alpha,
			 "max_failed_fraction", sp->max_failed_fraction, "method", ab_suite_method_name(sp->method),
			 "reps", sp->reps, "reps_ctx_max", sp->reps_ctx_max, "gate_first_request", sp->gate_first_request,
			 "engine_clock_ratio", sp->engine_clock_ratio, "equivalence_level", sp->equivalence_level,
			 "accuracy", accuracy, "spec", spec_json, "tiers", tiers, "harness_paths", paths);
}

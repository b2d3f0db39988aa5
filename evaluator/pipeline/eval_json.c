/*
 * eval_json.c - the parts of the abgate.result/2 document that describe the run rather than the
 * verdict: the environment (env.h's host record, the SUTs' ready records, process counts and
 * retries, the sandbox settings as applied) and the speculative-decoding exactness records.
 */
#include "eval_int.h"

#include "env.h"

json_t *ab_eval_environment(struct eval *E)
{
	json_t *env = NULL;
	if (ab_env_collect(&env, NULL) < 0 || env == NULL)
		env = json_object();
	json_t *sut = json_object();
	for (int s = 0; s < 2; s++)
		if (E->measure.ready[s])
			json_object_set(sut, s ? "head" : "base", E->measure.ready[s]);
	json_object_set_new(env, "sut", sut);
	if (E->measure.processes) {
		json_t *runs = json_pack("{s:i, s:i, s:b}", "processes", E->measure.processes,
			"retries", E->measure.retries, "stopped_early", E->measure.stopped_early);
		json_t *reasons = json_array();
		for (int i = 0; i < E->measure.retries && i < 4; i++)
			json_array_append_new(reasons, json_string(E->measure.retry_reasons[i]));
		json_object_set_new(runs, "retried", reasons);
		json_object_set_new(env, "runs", runs);
	}
	json_object_set_new(env, "jobs", json_integer(E->jobs));
	json_t *sb = json_pack("{s:b}", "enabled", E->sandbox.enabled);
	if (sb && E->sandbox.enabled) {
		json_t *net = json_array();
		for (size_t i = 0; net && i < E->sandbox.network_count; i++)
			json_array_append_new(net, json_string(E->sandbox.network[i]));
		json_object_set_new(sb, "bwrap", json_string(E->sandbox_version));
		json_object_set_new(sb, "network_steps", net ? net : json_array());
		for (int run = 0; run < 2; run++) {
			const struct ab_sandbox_limits *l = run ? &E->sandbox.run : &E->sandbox.build;
			json_object_set_new(sb, run ? "run" : "build", json_pack("{s:i, s:I, s:I, s:I, s:I, s:b}",
				"nproc", l->nproc, "mem_mb", (json_int_t)l->mem_mb, "fsize_mb", (json_int_t)l->fsize_mb,
				"cpu_s", (json_int_t)l->cpu_s, "mem_total_mb", (json_int_t)l->mem_total_mb,
				"memory_capped", ab_sandbox_memory_capped(&E->sandbox, run)));
		}
	}
	if (sb)
		json_object_set_new(env, "sandbox", sb);
	return env;
}

static json_t *spec_exact_json(const struct ab_spec_exact *e)
{
	json_t *o = json_pack("{s:i, s:i, s:i}", "compared", e->compared, "identical", e->identical,
		"stats_faults", e->stats_faults);
	if (o && e->first_diff >= 0)
		json_object_set_new(o, "first_diff", json_pack("{s:i, s:i, s:i}", "token", e->first_diff,
			"ctx", e->diff_ctx, "pair", e->diff_pair));
	if (o && e->stats_faults > 0)
		json_object_set_new(o, "stats_example", json_string(e->stats_example));
	return o;
}

json_t *ab_eval_spec_json(const struct eval *E)
{
	if (E->suite == NULL || E->suite->spec.count == 0)
		return NULL;
	json_t *models = json_object();
	for (int m = 0; models && m < E->suite->model_count; m++) {
		if (!E->suite->models[m].has_draft)
			continue;
		json_t *o = json_pack("{s:s, s:o, s:o, s:o}", "kind", E->measure.spec_kind[m],
			"block_size", E->measure.spec_block[m] > 0 ? json_integer(E->measure.spec_block[m]) : json_null(),
			"base", spec_exact_json(&E->measure.spec_exact[m][AB_SIDE_BASE]),
			"head", spec_exact_json(&E->measure.spec_exact[m][AB_SIDE_HEAD]));
		if (o)
			json_object_set_new(models, E->suite->models[m].name, o);
	}
	json_t *contexts = json_array();
	for (int i = 0; contexts && i < E->suite->spec.count; i++)
		json_array_append_new(contexts, json_integer(E->suite->spec.contexts[i]));
	return json_pack("{s:o, s:i, s:o}", "contexts", contexts ? contexts : json_null(), "gen_tokens",
		E->suite->spec.gen_tokens, "models", models ? models : json_null());
}

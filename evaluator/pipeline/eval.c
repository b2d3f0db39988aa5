/*
 * eval.c - one A/B evaluation end to end (see eval.h): repository and refs (repo.h), the suite from
 * the base commit (suite.h), both builds (build.h), the models (models.h), the interleaved pairs
 * (measure.h), the verdict (guards/), the abgate.result/2 document (reports/; its environment and spec
 * objects are eval_json.c's) and the store. Each
 * step's failure is classified here: a configuration problem is AB_EVAL_USAGE, the box's problem
 * is eval:infra-error, the PR's problem is eval:REJECT.
 */
#include "eval.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acc.h"
#include "accuracy.h"
#include "build.h"
#include "clock.h"
#include "env.h"
#include "error.h"
#include "fs.h"
#include "log.h"
#include "measure.h"
#include "models.h"
#include "decide.h"
#include "proc.h"
#include "repo.h"
#include "sandbox.h"
#include "spec.h"
#include "result.h"
#include "speed.h"
#include "store.h"
#include "suite.h"
#include "sut_relay.h"
#include "verdict.h"

#include "eval_int.h"

static double seconds_since(int64_t t)
{
	return (ab_proc_now_ns() - t) / 1e9;
}

static uint64_t fresh_seed(void)
{
	uint64_t seed = 0;
	FILE *f = fopen("/dev/urandom", "rb");
	if (f == NULL || fread(&seed, sizeof(seed), 1, f) != 1)
		seed = (uint64_t)ab_proc_now_ns() ^ ((uint64_t)getpid() << 32);
	if (f)
		fclose(f);
	return seed;
}

static void iso_now(char *buf, size_t size)
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int state_dir_init(struct eval *E)
{
	const char *dir = E->o->state_dir ? E->o->state_dir : ".abgate";
	char resolved[PATH_MAX];
	if (ab_fs_mkdirs(dir) < 0)
		return ab_error_wrap(AB_ERROR, "state dir %s", dir);
	if (realpath(dir, resolved) == NULL)
		return ab_error_errno("state dir %s", dir);
	E->state_dir = strdup(resolved);
	return E->state_dir ? 0 : ab_error_set("out of memory");
}

/* Opens the repository (or its mirror) and resolves both refs: every failure is a usage error,
 * except a clone/fetch of a remote, which is the network's (infra). */
static int refs_resolve(struct eval *E, int *out_status)
{
	const char *names[2] = { E->o->base_ref, E->o->head_ref };
	*out_status = AB_EVAL_USAGE;
	if (ab_repo_is_url(E->o->repo)) {
		EVAL_INFO(E, "fetching %s", E->o->repo);
		if (ab_repo_mirror(&E->repo, E->o->repo, E->state_dir) < 0) {
			*out_status = AB_EVAL_INFRA;
			return ab_error_wrap(AB_ERROR, "repository %s", E->o->repo);
		}
	} else if (ab_repo_open(&E->repo, E->o->repo) < 0) {
		return ab_error_wrap(AB_ERROR, "repository %s", E->o->repo);
	}
	for (int s = 0; s < 2; s++) {
		if (ab_repo_resolve(&E->side[s], E->repo, names[s]) < 0)
			return ab_error_wrap(AB_ERROR, "%s ref '%s'", s ? "head" : "base", names[s]);
	}
	EVAL_INFO(E, "base %s = %.12s, head %s = %.12s", names[0], E->side[0].sha, names[1], E->side[1].sha);
	return 0;
}

/* The suite: --suite FILE, else guards/default.json from the BASE commit (never the head's). */
static int suite_load(struct eval *E)
{
	if (E->o->suite_path)
		return ab_suite_load_file(&E->suite, E->o->suite_path);
	char *text = NULL;
	size_t len = 0;
	int error = ab_repo_read_file(&text, &len, E->repo, E->side[AB_SIDE_BASE].sha, SUITE_DEFAULT_PATH,
		AB_SUITE_MAX_BYTES);
	if (error < 0) {
		free(text);
		return ab_error_wrap(error, "no --suite given and no %s in the base commit", SUITE_DEFAULT_PATH);
	}
	char origin[128];
	snprintf(origin, sizeof(origin), "%s@%.12s", SUITE_DEFAULT_PATH, E->side[AB_SIDE_BASE].sha);
	error = ab_suite_load_buffer(&E->suite, text, len, origin);
	free(text);
	return error;
}

/* The suite's latest calibration (abgate calibrate), which the method line cites: its FPR, noise and
 * MDE figures (the per-run list stays in the store). */
static void calibration_cite(struct eval *E, json_t *doc)
{
	char *text = NULL;
	int64_t id = 0;
	if (E->store == NULL || E->suite == NULL ||
	    ab_store_calibration_latest(&text, &id, E->store, E->suite->name) < 0)
		return;
	json_t *c = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(c)) {
		json_decref(c);
		return;
	}
	json_object_del(c, "evaluations");
	json_object_set_new(c, "id", json_integer(id));
	json_object_set_new(doc, "calibration", c);
}

static void policy_from_suite(struct eval *E)
{
	ab_decide_from_suite(&E->policy, E->suite, E->seed, E->o->pairs_min, E->o->pairs_max);
}

static int checkout_and_build(struct eval *E)
{
	int64_t t = ab_proc_now_ns();
	for (int s = 0; s < 2; s++) {
		if (ab_repo_checkout(&E->src[s], NULL, E->repo, E->side[s].sha, E->state_dir) < 0)
			return ab_error_wrap(AB_ERROR, "checkout of %s", s ? "head" : "base");
	}
	for (int s = 0; s < 2; s++) {
		const char *name = s ? "head" : "base";
		struct ab_build_request rq = {
			.state_dir = E->state_dir,
			.src_dir = E->src[s],
			.tree_id = E->side[s].tree,
			.side = name,
			.configure = E->suite->configure.argc ? (const char *const *)E->suite->configure.argv : NULL,
			.build = (const char *const *)E->suite->build.argv,
			.timeout_s = E->suite->build_timeout_s,
			.jobs = E->jobs,
			.sandbox = &E->sandbox,
		};
		EVAL_INFO(E, "building %s (tree %.12s)", name, E->side[s].tree);
		if (ab_build_run(&E->build[s], &rq) < 0)
			return ab_error_wrap(AB_ERROR, "build of %s", name);
		switch (E->build[s].state) {
		case AB_BUILD_STATE_OK:
			E->build_status[s] = AB_BUILD_OK;
			EVAL_INFO(E, "%s build %s (%.1f s)", name, E->build[s].reused ? "reused" : "done",
				E->build[s].duration_s);
			break;
		case AB_BUILD_STATE_FAILED:
			E->build_status[s] = AB_BUILD_FAILED;
			break;
		default:
			E->build_status[s] = AB_BUILD_INFRA;
			break;
		}
		if (E->build_status[s] != AB_BUILD_OK) {
			AB_WARN("%s build failed: %s (log %s)", name, E->build[s].reason, E->build[s].log_path);
			break;   /* a failed base aborts (infra); a failed head is the verdict */
		}
	}
	E->timing.build_s = seconds_since(t);
	return 0;
}

/* A harness data file of the suite (a token corpus): {state} and {src} substituted, relative paths
 * against the base checkout (the harness comes from the base). *out: caller frees. */
static int harness_file(char **out, const struct eval *E, const char *template)
{
	struct ab_subst vars[] = { { "state", E->state_dir }, { "src", E->src[AB_SIDE_BASE] } };
	char *path = NULL;
	if (ab_build_subst(&path, template, vars, 2) < 0)
		return -1;
	if (path[0] != '/') {
		size_t len = strlen(E->src[AB_SIDE_BASE]) + strlen(path) + 2;
		char *abs = malloc(len);
		if (abs == NULL) {
			free(path);
			return ab_error_set("out of memory");
		}
		snprintf(abs, len, "%s/%s", E->src[AB_SIDE_BASE], path);
		free(path);
		path = abs;
	}
	*out = path;
	return 0;
}

/* argv and env of one side's SUT for one model. */
static int sut_command(struct ab_measure_sut *out, char ***argv_store, char ***env_store,
	const struct eval *E, const struct ab_suite_sut *sut, int side, int model)
{
	const char *model_path = E->model_paths[model];
	const char *draft_path = E->draft_paths ? E->draft_paths[model] : NULL;
	char jobs[16];
	snprintf(jobs, sizeof(jobs), "%d", E->jobs);
	struct ab_subst vars[] = {
		{ "src", E->src[side] }, { "build", E->build[side].build_dir }, { "model", model_path },
		{ "state", E->state_dir }, { "jobs", jobs }, { "draft", draft_path },
	};
	size_t n_vars = sizeof(vars) / sizeof(vars[0]);
	if (ab_build_subst_argv(argv_store, (const char *const *)sut->command.argv, vars, n_vars) < 0)
		return ab_error_wrap(AB_EINVALID, "sut.command");
	if (sut->env_count > 0) {
		char **tmpl = calloc((size_t)sut->env_count + 1, sizeof(char *));
		if (tmpl == NULL)
			return ab_error_set("out of memory");
		for (int i = 0; i < sut->env_count; i++) {
			size_t len = strlen(sut->env[i].name) + strlen(sut->env[i].value) + 2;
			if ((tmpl[i] = malloc(len)) != NULL)
				snprintf(tmpl[i], len, "%s=%s", sut->env[i].name, sut->env[i].value);
		}
		int error = ab_build_subst_argv(env_store, (const char *const *)tmpl, vars, n_vars);
		ab_build_argv_free(tmpl);
		if (error < 0)
			return ab_error_wrap(AB_EINVALID, "sut.env");
	}
	out->argv = (const char *const *)*argv_store;
	out->env = (const char *const *)*env_store;
	out->cwd = E->src[side];
	if (sut->kind == AB_SUITE_SUT_OPENAI) {
		out->http = (struct ab_sut_http_config){ .api = sut->api == AB_SUITE_API_LLAMA ? AB_SUT_HTTP_LLAMA
			: AB_SUT_HTTP_COMPLETIONS, .url = sut->url, .ready_path = sut->ready_path,
			.model_name = sut->model_name, .vocab_size = sut->vocab_size, .draft = draft_path != NULL };
		/* The sandbox gives PR code its own network namespace, whose loopback abgate cannot reach:
		 * sut_http.c wraps the command per process behind abgate-relay, which abgate reaches over a
		 * unix socket (docs/http-sut.md). The server still has no network beyond that loopback. */
		if (E->sandbox.enabled) {
			if (!E->relay[0])
				return ab_error_set("sut: kind \"openai\" in the sandbox needs abgate-relay: %s", E->relay_error);
			struct ab_sut_sandbox *sb = &out->http.sandbox;
			*sb = (struct ab_sut_sandbox){ .config = &E->sandbox, .relay = E->relay, .socket_root = E->run_dir,
				.ro = { E->src[side], E->build[side].build_dir, model_path, draft_path } };
			return 0;
		}
	}
	if (!E->sandbox.enabled)
		return 0;
	/* The SUT sees its own side's tree and build and the model files, all read-only; the suite's
	 * env is set inside (after --clearenv), so the process gets nothing of abgate's environment. */
	const char *ro[] = { E->src[side], E->build[side].build_dir, model_path, draft_path, NULL };
	if (draft_path == NULL)
		ro[3] = NULL;
	const struct ab_sandbox_step step = { .name = "sut", .cwd = E->src[side], .ro = ro,
		.env = out->env, .run = 1, .status_fd = 3 };
	char **boxed = NULL;
	if (ab_sandbox_wrap(&boxed, &E->sandbox, &step, out->argv) < 0)
		return -1;
	ab_build_argv_free(*argv_store);
	ab_build_argv_free(*env_store);
	*env_store = NULL;
	*argv_store = boxed;
	out->argv = (const char *const *)boxed;
	out->env = NULL;
	out->sandbox_status = 1;
	return 0;
}

static int measure(struct eval *E)
{
	int n_models = E->suite->model_count, error = -1;
	struct ab_measure_sut *suts[2] = { NULL, NULL };
	char **argvs[2][AB_SUITE_MODELS_MAX] = { { 0 } }, **envs[2][AB_SUITE_MODELS_MAX] = { { 0 } };
	char log_dir[4096], *spec_corpus = NULL;

	snprintf(log_dir, sizeof(log_dir), "%s/runs/%lld", E->state_dir, (long long)E->id);
	if (ab_fs_mkdirs(log_dir) < 0)
		return -1;
	if (E->suite->spec.prompts && harness_file(&spec_corpus, E, E->suite->spec.prompts) < 0)
		return -1;
	for (int s = 0; s < 2; s++) {
		if ((suts[s] = calloc((size_t)n_models, sizeof(*suts[s]))) == NULL)
			goto cleanup;
		for (int m = 0; m < n_models; m++)
			if (sut_command(&suts[s][m], &argvs[s][m], &envs[s][m], E, &E->suite->sut, s, m) < 0)
				goto cleanup;
	}
	struct ab_measure_config cfg = {
		.suite = E->suite,
		.sut = { suts[0], suts[1] },
		.seed = E->seed,
		.policy = &E->policy.speed,
		.log_dir = log_dir,
		.spec_corpus = spec_corpus,
		.store = E->store,
		.eval_id = E->id,
		.quiet = E->o->quiet,
		.should_cancel = E->o->should_cancel,
		.cancel_payload = E->o->cancel_payload,
	};
	error = ab_measure_run(&E->speed, &E->samples, &E->measure, &cfg);
	E->timing.measure_s = E->measure.seconds;
cleanup:
	free(spec_corpus);
	for (int s = 0; s < 2; s++) {
		for (int m = 0; m < n_models; m++) {
			ab_build_argv_free(argvs[s][m]);
			ab_build_argv_free(envs[s][m]);
		}
		free(suts[s]);
	}
	return error;
}

/* The gates counted while measuring: greedy agreement (when the suite asks), one advisory gate per
 * model that had decode requests answered by both sides; and spec exactness, one gate per model with
 * a draft where spec contexts were measured. */
static void measure_gates(struct eval *E)
{
	for (int m = 0; m < E->suite->model_count && E->suite->accuracy.greedy_check; m++) {
		const struct ab_measure_agreement *a = &E->measure.agreement[m];
		if (a->compared > 0)
			ab_acc_greedy_gate(&E->greedy[E->n_greedy++], E->suite->models[m].name, a->compared,
				a->identical, a->first_diff, a->diff_ctx, a->diff_pair);
	}
	for (int m = 0; m < E->suite->model_count && E->suite->spec.count > 0; m++)
		if (E->suite->models[m].has_draft)
			ab_spec_exact_gate(&E->spec_exact[E->n_spec_exact++], E->suite->models[m].name,
				&E->measure.spec_exact[m][AB_SIDE_BASE], &E->measure.spec_exact[m][AB_SIDE_HEAD]);
	if (ab_clock_check(&E->clock, E->samples.v, E->samples.n, E->suite->speed.engine_clock_ratio) < 0) {
		AB_WARN("engine clock check: %s", ab_error_last());
		return;
	}
	for (int m = 0; m < E->suite->model_count; m++)
		E->n_clock_gates += (size_t)ab_clock_gate(&E->clock_gates[E->n_clock_gates], E->clock,
			E->suite->models[m].name);
}

static int accuracy(struct eval *E)
{
	const struct ab_suite *suite = E->suite;
	struct ab_accuracy_model models[AB_ACCURACY_MAX_MODELS];
	char **store[AB_ACCURACY_MAX_MODELS][6];
	char labels[AB_ACCURACY_MAX_MODELS][AB_SUITE_NAME_MAX * 2 + 2];
	char log_dir[4096], *corpus = NULL;
	int n = 0, error = -1;

	memset(models, 0, sizeof(models));
	memset(store, 0, sizeof(store));
	snprintf(log_dir, sizeof(log_dir), "%s/runs/%lld", E->state_dir, (long long)E->id);
	for (int m = 0; m < suite->model_count; m++) {
		const struct ab_suite_model *sm = &suite->models[m];
		for (int r = 0; r < sm->ref_count; r++) {
			if (n == AB_ACCURACY_MAX_MODELS) {
				ab_error_setc(AB_EINVALID, "suite: at most %d (model, reference) pairs",
					AB_ACCURACY_MAX_MODELS);
				goto cleanup;
			}
			struct ab_accuracy_model *am = &models[n];
			am->model = sm;
			am->ref = &sm->refs[r];
			if (sm->ref_count > 1 || strcmp(sm->refs[r].name, "reference") != 0)
				snprintf(labels[n], sizeof(labels[n]), "%s/%s", sm->name, sm->refs[r].name);
			else
				snprintf(labels[n], sizeof(labels[n]), "%s", sm->name);
			am->label = labels[n];
			am->model_path = E->model_paths[m];
			am->vocab_size = E->measure.vocab[m];
			for (int s = 0; s < 2; s++)
				if (sut_command(&am->side[s], &store[n][2 * s], &store[n][2 * s + 1], E, &suite->sut, s,
				                m) < 0)
					goto cleanup;
			/* The reference is harness: it comes from the base side, like the suite. */
			if (sut_command(&am->reference, &store[n][4], &store[n][5], E, &sm->refs[r].sut, AB_SIDE_BASE,
			                m) < 0)
				goto cleanup;
			n++;
		}
	}
	if (n == 0) {
		error = 0;
		goto cleanup;
	}
	if (suite->accuracy.corpus && harness_file(&corpus, E, suite->accuracy.corpus) < 0)
		goto cleanup;
	struct ab_accuracy_config cfg = {
		.suite = suite, .models = models, .n_models = n, .seed = E->seed, .corpus_path = corpus,
		.store = E->store, .log_dir = log_dir, .quiet = E->o->quiet,
		.should_cancel = E->o->should_cancel, .cancel_payload = E->o->cancel_payload,
	};
	error = ab_accuracy_run(&E->accuracy, &cfg);
	E->timing.accuracy_s = E->accuracy.seconds;
cleanup:
	for (int i = 0; i < AB_ACCURACY_MAX_MODELS; i++)
		for (int k = 0; k < 6; k++)
			ab_build_argv_free(store[i][k]);
	free(corpus);
	return error;
}

/* Verdict, result document, store. Returns the evaluation status. */
static int conclude(json_t **out_result, struct eval *E)
{
	const char **changed = NULL, **watched = NULL, *touched[64];
	size_t n_changed = E->n_changes, n_watched = 0, n_touched = 0;
	struct ab_verdict verdict;
	struct ab_gate_result gates[AB_ACCURACY_MAX_MODELS * AB_ACCURACY_GATES_PER_MODEL + 3 * AB_SUITE_MODELS_MAX];
	size_t n_gates = 0;
	json_t *env = NULL, *doc = NULL;
	char created[32], detail[2][320];
	int status;

	/* Every changed path counts for the harness, the old path of a rename too (moving a harness file
	 * away changes the harness as much as editing it). */
	changed = malloc((n_changed ? n_changed : 1) * sizeof(*changed));
	watched = malloc((n_changed ? 2 * n_changed : 1) * sizeof(*watched));
	if (changed == NULL || watched == NULL) {
		n_changed = 0;
		if (!E->infra[0])
			snprintf(E->infra, sizeof(E->infra), "out of memory for the changed files");
	}
	for (size_t i = 0; i < n_changed; i++) {
		changed[i] = watched[n_watched++] = E->changes[i].path;
		if (strcmp(E->changes[i].old_path, E->changes[i].path) != 0)
			watched[n_watched++] = E->changes[i].old_path;
	}
	if (E->suite)
		n_touched = ab_verdict_harness_match(touched, 64, watched, n_watched,
			(const char *const *)E->suite->harness_paths, (size_t)E->suite->harness_path_count);
	if (n_touched > 64)
		n_touched = 64;
	if (E->measure.stopped_early && !E->infra[0])
		snprintf(E->infra, sizeof(E->infra), "%s", E->measure.stop_reason);
	for (int s = 0; s < 2; s++)
		snprintf(detail[s], sizeof(detail[s]), "%s", E->build[s].reason);

	for (size_t i = 0; i < E->accuracy.n_gates; i++)
		gates[n_gates++] = E->accuracy.gates[i];
	for (size_t i = 0; i < E->n_greedy; i++)
		gates[n_gates++] = E->greedy[i];
	for (size_t i = 0; i < E->n_spec_exact; i++)
		gates[n_gates++] = E->spec_exact[i];
	for (size_t i = 0; i < E->n_clock_gates; i++)
		gates[n_gates++] = E->clock_gates[i];
	const char *spec_kind = NULL;
	for (int m = 0; E->suite && m < E->suite->model_count && !spec_kind; m++)
		if (E->measure.spec_kind[m][0])
			spec_kind = E->measure.spec_kind[m];

	struct ab_verdict_input vin = {
		.base_build = E->build_status[0],
		.head_build = E->build_status[1],
		.base_build_detail = detail[0][0] ? detail[0] : NULL,
		.head_build_detail = detail[1][0] ? detail[1] : NULL,
		.infra_error = E->infra[0] ? E->infra : NULL,
		.speed = E->speed,
		.gates = gates,
		.n_gates = n_gates,
		.spec_kind = spec_kind,
		.harness_touched = touched,
		.n_harness_touched = n_touched,
	};
	ab_verdict_decide(&verdict, &vin);
	if (E->clock && E->clock->flagged && verdict.n_notes < AB_VERDICT_NOTES_MAX)
		snprintf(verdict.notes[verdict.n_notes++], sizeof(verdict.notes[0]), "%s: %.200s (threshold %.2fx); "
			"the verdict uses the harness's clock.", AB_CLOCK_WARNING, E->clock->worst_where, E->clock->threshold);

	env = ab_eval_environment(E);
	E->timing.total_s = seconds_since(E->t0);
	iso_now(created, sizeof(created));
	struct ab_result_input rin = {
		.base = { E->o->base_ref, E->side[0].sha, E->side[0].tree },
		.head = { E->o->head_ref, E->side[1].sha, E->side[1].tree },
		.changed_files = changed,
		.n_changed_files = n_changed,
		.suite_name = E->suite ? E->suite->name : NULL,
		.suite_sha256 = E->suite ? E->suite->sha256 : NULL,
		.suite_path = E->o->suite_path,
		.seed = E->seed,
		.environment = env,
		.verdict = &verdict,
		.speed = E->speed,
		.gates = gates,
		.n_gates = n_gates,
		.samples = E->samples.v,
		.n_samples = E->samples.n,
		.clock = E->clock,
		.timing = E->timing,
		.trigger = E->o->trigger ? E->o->trigger : "cli",
		.created_at = created,
	};
	for (int s = 0; s < 2; s++) {
		struct ab_result_build *rb = s ? &rin.build_head : &rin.build_base;
		rb->status = E->build_status[s];
		rb->seconds = E->build[s].duration_s;
		rb->detail = detail[s][0] ? detail[s] : NULL;
		rb->log_tail = E->build[s].log_tail;
		rb->reused = E->build[s].reused;
		rb->key = E->build[s].key[0] ? E->build[s].key : NULL;
	}
	int built = ab_result_build(&doc, &rin);
	json_decref(env);
	free(changed);
	free(watched);
	if (built < 0) {
		snprintf(E->infra, sizeof(E->infra), "result: %s", ab_error_last());
		return AB_EVAL_INFRA;
	}
	json_object_set_new(doc, "id", json_integer(E->id));
	if (E->accuracy.json)
		json_object_set(doc, "accuracy", E->accuracy.json);
	json_t *spec = ab_eval_spec_json(E);
	if (spec)
		json_object_set_new(doc, "spec", spec);
	calibration_cite(E, doc);

	switch (verdict.kind) {
	case AB_VERDICT_REJECT: status = AB_EVAL_REJECT; break;
	case AB_VERDICT_INFRA: status = AB_EVAL_INFRA; break;
	default: status = AB_EVAL_PASS; break;
	}
	if (E->store) {
		char *text = json_dumps(doc, JSON_COMPACT);
		if (text == NULL || ab_store_eval_finish(E->store, E->id, AB_STORE_DONE, verdict.label,
		                                         verdict.reason, status, text) < 0)
			AB_WARN("could not store evaluation %lld: %s", (long long)E->id, ab_error_last());
		free(text);
	}
	EVAL_INFO(E, "verdict: %s - %s", verdict.label, verdict.reason);
	*out_result = doc;
	return status;
}

static int begin_store(struct eval *E)
{
	if (ab_store_open(&E->store, E->state_dir) < 0)
		return ab_error_wrap(AB_ERROR, "store");
	struct ab_store_eval_info info = {
		.trigger = E->o->trigger ? E->o->trigger : "cli",
		.repo = E->o->repo,
		.base_ref = E->o->base_ref, .base_sha = E->side[0].sha, .base_tree = E->side[0].tree,
		.head_ref = E->o->head_ref, .head_sha = E->side[1].sha, .head_tree = E->side[1].tree,
		.suite_name = E->suite->name, .suite_sha256 = E->suite->sha256,
		.has_seed = 1, .seed = E->seed,
	};
	return ab_store_eval_begin(&E->id, E->store, &info);
}

/* Says whether PR code is sandboxed; a sandbox that cannot start is the box's failure (infra). */
static int sandbox_check(struct eval *E)
{
	if (!E->sandbox.enabled) {
		AB_WARN("sandbox: OFF - the PR's build and SUT run with abgate's own rights (--no-sandbox)");
		return 0;
	}
	if (ab_sandbox_probe(&E->sandbox, E->sandbox_version, sizeof(E->sandbox_version)) < 0)
		return -1;
	if (ab_sut_relay_default(E->relay, sizeof(E->relay)) < 0) {
		snprintf(E->relay_error, sizeof(E->relay_error), "%s", ab_error_last());
		E->relay[0] = '\0';
	}
	AB_INFO("sandbox: on (%s; no network%s%s)", E->sandbox_version[0] ? E->sandbox_version : "bwrap",
		E->sandbox.network_count ? " except " : "", E->sandbox.network_count ? E->sandbox.network[0] : "");
	return 0;
}

static int canceled(const struct eval *E)
{
	return E->o->should_cancel && E->o->should_cancel(E->o->cancel_payload);
}

static void eval_free(struct eval *E)
{
	for (int s = 0; s < 2; s++) {
		free(E->src[s]);
		ab_build_result_clear(&E->build[s]);
	}
	if (E->suite) {
		ab_models_free(E->model_paths, E->suite->model_count);
		ab_models_free(E->draft_paths, E->suite->model_count);
	}
	ab_speed_result_free(E->speed);
	ab_clock_check_free(E->clock);
	ab_samples_free(&E->samples);
	ab_measure_report_clear(&E->measure);
	ab_accuracy_result_clear(&E->accuracy);
	ab_repo_changes_free(E->changes, E->n_changes);
	ab_suite_free(E->suite);
	ab_repo_free(E->repo);
	ab_store_close(E->store);
	free(E->state_dir);
}

int ab_eval_run(json_t **out_result, int64_t *out_eval_id, const struct ab_eval_options *opts)
{
	struct eval E = { 0 };
	int status = AB_EVAL_USAGE, rc;

	*out_result = NULL;
	if (out_eval_id)
		*out_eval_id = 0;
	if (opts == NULL || opts->repo == NULL || opts->base_ref == NULL || opts->head_ref == NULL) {
		ab_error_setc(AB_EINVALID, "eval: --repo, --base and --head are required");
		return AB_EVAL_USAGE;
	}
	E.o = opts;
	E.t0 = ab_proc_now_ns();
	if (opts->sandbox)
		E.sandbox = *opts->sandbox;
	else
		ab_sandbox_config_defaults(&E.sandbox);
	E.timing.build_s = E.timing.models_s = E.timing.measure_s = E.timing.accuracy_s = NAN;
	E.seed = opts->has_seed ? opts->seed : fresh_seed();
	E.jobs = opts->jobs > 0 ? opts->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (state_dir_init(&E) < 0 || refs_resolve(&E, &status) < 0)
		goto done;
	status = AB_EVAL_USAGE;
	if (suite_load(&E) < 0)
		goto done;
	policy_from_suite(&E);
	status = AB_EVAL_INFRA;
	if (begin_store(&E) < 0)
		goto done;
	if (out_eval_id)
		*out_eval_id = E.id;
	snprintf(E.run_dir, sizeof(E.run_dir), "%s/runs/%lld", E.state_dir, (long long)E.id);
	EVAL_INFO(&E, "evaluation %lld: suite %s, seed %llu", (long long)E.id, E.suite->name,
		(unsigned long long)E.seed);
	/* What the PR changes, as GitHub shows it: from the merge base, not from the base tip (which
	 * may have moved on); harness-touched detection needs exactly the PR's own changes. */
	char fork_point[AB_REPO_OID_HEX];
	if (ab_repo_merge_base(fork_point, E.repo, E.side[0].sha, E.side[1].sha) < 0)
		snprintf(fork_point, sizeof(fork_point), "%s", E.side[0].sha);
	if (ab_repo_changed_files(&E.changes, &E.n_changes, E.repo, fork_point, E.side[1].sha) < 0)
		AB_WARN("could not list changed files: %s", ab_error_last());

	if (canceled(&E))
		goto cancel;
	if (sandbox_check(&E) < 0) {
		snprintf(E.infra, sizeof(E.infra), "%s", ab_error_last());
		status = conclude(out_result, &E);
		goto done;
	}
	if (checkout_and_build(&E) < 0) {
		snprintf(E.infra, sizeof(E.infra), "%s", ab_error_last());
		status = conclude(out_result, &E);
		goto done;
	}
	if (E.build_status[0] != AB_BUILD_OK || E.build_status[1] != AB_BUILD_OK) {
		status = conclude(out_result, &E);
		goto done;
	}
	if (canceled(&E))
		goto cancel;

	struct ab_models_request mrq = {
		.suite = E.suite, .state_dir = E.state_dir, .build_dir = E.build[0].build_dir,
		.src_dir = E.src[0], .jobs = E.jobs, .timeout_s = E.suite->build_timeout_s,
		.store = E.store, .quiet = opts->quiet, .sandbox = &E.sandbox,
	};
	if ((rc = ab_models_prepare(&E.model_paths, &E.draft_paths, &E.timing.models_s, &mrq)) < 0) {
		if (rc == AB_EINVALID) {
			status = AB_EVAL_USAGE;
			ab_store_eval_finish(E.store, E.id, AB_STORE_ERROR, NULL, ab_error_last(), status, NULL);
			goto done;
		}
		snprintf(E.infra, sizeof(E.infra), "%s", ab_error_last());
		status = conclude(out_result, &E);
		goto done;
	}

	rc = measure(&E);
	if (rc == AB_ECANCELED)
		goto cancel;
	if (rc < 0)
		snprintf(E.infra, sizeof(E.infra), "measurement: %s", ab_error_last());
	if (rc == 0)
		measure_gates(&E);
	if (rc == 0 && E.suite->accuracy.enabled && !E.measure.stopped_early) {
		rc = accuracy(&E);
		if (rc == AB_ECANCELED)
			goto cancel;
		if (rc < 0)
			snprintf(E.infra, sizeof(E.infra), "accuracy: %s", ab_error_last());
	}
	status = conclude(out_result, &E);
	goto done;

cancel:
	status = AB_EVAL_CANCELED;
	if (E.store)
		ab_store_eval_finish(E.store, E.id, AB_STORE_CANCELED, NULL, "canceled", status, NULL);
	EVAL_INFO(&E, "evaluation %lld canceled", (long long)E.id);
done:
	if (status == AB_EVAL_USAGE || (status == AB_EVAL_INFRA && *out_result == NULL)) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", ab_error_last());
		if (E.store && E.id > 0)
			ab_store_eval_finish(E.store, E.id, AB_STORE_ERROR, NULL, msg, status, NULL);
		ab_error_set("%s", msg);
	}
	eval_free(&E);
	return status;
}

/*
 * calibrate.c - `abgate calibrate` (see calibrate.h): runs the A/A evaluations through ab_eval_run,
 * reads their samples back from the store, hands them to guards/calib.h with the suite's own
 * decision procedure (policy.h) and stores the document.
 */
#include "calibrate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib.h"
#include "error.h"
#include "eval.h"
#include "log.h"
#include "decide.h"
#include "repo.h"
#include "store.h"
#include "suite.h"

#define SUITE_DEFAULT_PATH "guards/default.json"

/* The suite: --suite FILE, else guards/default.json of the ref (as `abgate eval` reads the base's). */
static int suite_load(struct ab_suite **out, char sha[AB_REPO_OID_HEX], const struct ab_calibrate_options *o)
{
	ab_repo *repo = NULL;
	struct ab_repo_commit c;
	char *text = NULL;
	size_t len = 0;
	int error;
	if (ab_repo_is_url(o->repo))
		error = ab_repo_mirror(&repo, o->repo, o->state_dir ? o->state_dir : ".abgate");
	else
		error = ab_repo_open(&repo, o->repo);
	if (error < 0 || (error = ab_repo_resolve(&c, repo, o->ref)) < 0) {
		ab_repo_free(repo);
		return ab_error_wrap(error, "calibrate: %s at %s", o->repo, o->ref);
	}
	snprintf(sha, AB_REPO_OID_HEX, "%s", c.sha);
	if (o->suite_path) {
		error = ab_suite_load_file(out, o->suite_path);
	} else if ((error = ab_repo_read_file(&text, &len, repo, c.sha, SUITE_DEFAULT_PATH, AB_SUITE_MAX_BYTES)) == 0) {
		error = ab_suite_load_buffer(out, text, len, SUITE_DEFAULT_PATH);
	} else {
		error = ab_error_wrap(error, "calibrate: no --suite given and no %s at %s", SUITE_DEFAULT_PATH, o->ref);
	}
	free(text);
	ab_repo_free(repo);
	return error;
}

/* Did an A/A verdict make any claim? Anything but eval:none (and an eval-<kind>:none beside it). */
static int verdict_claimed(const json_t *result)
{
	const json_t *labels = json_object_get(json_object_get(result, "verdict"), "labels"), *l;
	size_t i;
	json_array_foreach(labels, i, l) {
		const char *s = json_string_value(l);
		size_t n = s ? strlen(s) : 0;
		if (s && !(n >= 5 && strcmp(s + n - 5, ":none") == 0))
			return 1;
	}
	return 0;
}

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

int ab_calibrate_run(json_t **out_doc, const struct ab_calibrate_options *o)
{
	struct ab_suite *suite = NULL;
	struct ab_decide policy;
	ab_store *store = NULL;
	struct ab_calib_run *runs = NULL;
	struct ab_sample **held = NULL;
	struct ab_calib_result *calib = NULL;
	int *claimed = NULL, n_ok = 0, infra = 0, error;
	json_t *doc = NULL, *evals = json_array();
	char sha[AB_REPO_OID_HEX] = "";
	char *text = NULL;

	if (o->repo == NULL || o->ref == NULL || o->runs < 2)
		return ab_error_setc(AB_EINVALID, "calibrate: needs --repo, --ref and --runs >= 2");
	if ((error = suite_load(&suite, sha, o)) < 0)
		goto cleanup;
	uint64_t seed = o->has_seed ? o->seed : ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock();
	ab_decide_from_suite(&policy, suite, seed, o->pairs_min, o->pairs_max);
	if ((error = ab_store_open(&store, o->state_dir ? o->state_dir : ".abgate")) < 0)
		goto cleanup;
	error = AB_ERROR;
	if ((runs = calloc((size_t)o->runs, sizeof(*runs))) == NULL || (held = calloc((size_t)o->runs, sizeof(*held))) == NULL ||
	    (claimed = calloc((size_t)o->runs, sizeof(*claimed))) == NULL || evals == NULL) {
		ab_error_set("calibrate: out of memory");
		goto cleanup;
	}
	for (int i = 0; i < o->runs; i++) {
		char trigger[64];
		json_t *result = NULL;
		int64_t id = 0;
		snprintf(trigger, sizeof(trigger), "calibrate %d/%d", i + 1, o->runs);
		struct ab_eval_options eo = {
			.repo = o->repo, .base_ref = o->ref, .head_ref = o->ref, .suite_path = o->suite_path,
			.state_dir = o->state_dir, .pairs_min = o->pairs_min, .pairs_max = o->pairs_max,
			.has_seed = 1, .seed = seed + (uint64_t)i, .jobs = o->jobs, .quiet = o->quiet, .trigger = trigger,
			.sandbox = o->sandbox,
		};
		int status = ab_eval_run(&result, &id, &eo);
		const char *label = json_string_value(json_object_get(json_object_get(result, "verdict"), "label"));
		if (!o->quiet)
			AB_INFO("calibration run %d of %d: %s", i + 1, o->runs, label ? label : ab_error_last());
		json_t *e = json_pack("{s:I, s:s, s:s, s:b, s:O, s:O}", "id", (json_int_t)id,
			"seed", "", "label", label ? label : "none", "claimed", status != AB_EVAL_INFRA && verdict_claimed(result),
			"pairs", json_object_get(json_object_get(result, "pairs"), "count") ?
				json_object_get(json_object_get(result, "pairs"), "count") : json_null(),
			"measure_s", json_object_get(json_object_get(result, "timing"), "measure_s") ?
				json_object_get(json_object_get(result, "timing"), "measure_s") : json_null());
		char seed_text[32];
		snprintf(seed_text, sizeof(seed_text), "%" PRIu64, seed + (uint64_t)i);
		json_object_set_new(e, "seed", json_string(seed_text));
		json_array_append_new(evals, e);
		if (status == AB_EVAL_INFRA || status == AB_EVAL_USAGE || status == AB_EVAL_CANCELED || id <= 0) {
			infra++;
			json_decref(result);
			if (status == AB_EVAL_USAGE) {
				ab_error_set("calibrate: evaluation %d: %s", i + 1, ab_error_last());
				goto cleanup;
			}
			continue;
		}
		claimed[n_ok] = verdict_claimed(result);
		json_decref(result);
		size_t n = 0;
		if (ab_store_samples_get(&held[n_ok], &n, store, id) < 0)
			goto cleanup;
		runs[n_ok].samples = held[n_ok];
		runs[n_ok].n = n;
		n_ok++;
	}
	if (n_ok < 2) {
		ab_error_set("calibrate: %d of %d evaluations reached a verdict; at least 2 are needed", n_ok, o->runs);
		goto cleanup;
	}
	struct ab_calib_options co = {
		.policy = &policy.speed, .power = o->power > 0 ? o->power : 0.90,
		.resamples = o->resamples > 0 ? o->resamples : 200, .max_shift = 0.5, .seed = seed ^ 0xca11b7a7e5ULL,
		.noise_level = o->noise_level > 0 ? o->noise_level : o->noise_level < 0 ? 0.0 : 0.90,
	};
	if (!o->quiet)
		AB_INFO("calibration: resampling %d A/A evaluations for the minimal detectable effects", n_ok);
	if ((error = ab_calib_compute(&calib, runs, claimed, (size_t)n_ok, &co)) < 0)
		goto cleanup;
	error = AB_ERROR;

	json_t *series = json_array();
	for (size_t k = 0; k < calib->n_series; k++) {
		const struct ab_calib_series *c = &calib->series[k];
		json_array_append_new(series, json_pack("{s:s, s:s, s:i, s:b, s:i, s:o, s:o, s:o, s:o, s:o}",
			"model", c->model, "metric", c->metric, "ctx", c->ctx, "gating", c->gating, "n_pairs", c->n_pairs,
			"noise_sd", num(c->sd), "noise_robust_sd", num(c->robust_sd), "noise_scale", num(c->noise_scale),
			"mde", num(c->mde), "mde_resolve", num(c->mde_resolve)));
	}
	char created[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	doc = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:i, s:i, s:f, s:i, s:f,"
		" s:{s:i, s:i, s:f, s:f, s:f}, s:O, s:o}",
		"schema", AB_CALIBRATION_SCHEMA, "created_at", created, "repo", o->repo, "ref", o->ref, "sha", sha,
		"suite", "name", suite->name, "sha256", suite->sha256, "runs", calib->runs, "infra_runs", infra,
		"power", co.power, "resamples", co.resamples, "noise_level", co.noise_level,
		"fpr", "false_positives", calib->false_positives, "runs", calib->runs, "rate", calib->fpr,
		"upper", calib->fpr_upper, "level", 0.95, "evaluations", evals, "series", series);
	if (doc == NULL || (text = json_dumps(doc, JSON_COMPACT)) == NULL) {
		ab_error_set("calibrate: out of memory building the document");
		goto cleanup;
	}
	int64_t cid = 0;
	struct ab_store_calibration sc = {
		.repo = o->repo, .ref = o->ref, .sha = sha, .suite_name = suite->name, .suite_sha256 = suite->sha256,
		.runs = calib->runs, .false_positives = calib->false_positives, .fpr_upper = calib->fpr_upper,
		.result_json = text,
	};
	if (ab_store_calibration_add(&cid, store, &sc) < 0)
		goto cleanup;
	json_object_set_new(doc, "id", json_integer(cid));
	*out_doc = doc;
	doc = NULL;
	error = 0;

cleanup:
	free(text);
	json_decref(doc);
	json_decref(evals);
	for (int i = 0; held && i < o->runs; i++)
		free(held[i]);
	free(held);
	free(runs);
	free(claimed);
	ab_calib_result_free(calib);
	ab_store_close(store);
	ab_suite_free(suite);
	return error;
}

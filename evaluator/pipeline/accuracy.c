/*
 * accuracy.c - the accuracy workload (see accuracy.h): reference answers (cached), then base and
 * head scored on the reference's top-k ids, turned into per-position agreement and KL, handed to
 * guards/acc.h for statistics and gates.
 */
#include "accuracy.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "log.h"
#include "proc.h"
#include "schedule.h"
#include "sut.h"

#define CACHED_LOGPROB_MAX 1e-3    /* log-probs a little above 0 are rounding (as sut.c accepts) */

/* The reference's answer for one window: per scored position its top-k ids and log-probs. */
struct ref_window {
	int n_pos;
	int k;                 /* ids per position (the smallest top list the reference gave) */
	int32_t *ids;          /* n_pos * k */
	double *lp;            /* n_pos * k */
};

struct model_run {
	const struct ab_accuracy_config *cfg;
	const struct ab_accuracy_model *am;
	struct ab_schedule_windows *windows;
	struct ref_window *ref;        /* windows->count */
	int n_pos;                     /* total scored positions */
	int *agree[2];
	double *kl[2];
	json_t *ref_ready;
	int cached;                    /* windows answered from the cache */
	char fault[2][256];            /* why a side could not be scored, "" when it was */
	int bounded[2];                /* reference ids a side's SUT did not list (HTTP echo scoring):
	                                * their log-probs are upper bounds, so KL may read low */
};

static const char *side_name(int side) { return side ? "head" : "base"; }

static void ref_windows_free(struct ref_window *ref, int count)
{
	if (ref == NULL)
		return;
	for (int i = 0; i < count; i++) {
		free(ref[i].ids);
		free(ref[i].lp);
	}
	free(ref);
}

void ab_accuracy_result_clear(struct ab_accuracy_result *result)
{
	if (result == NULL)
		return;
	json_decref(result->json);
	memset(result, 0, sizeof(*result));
}

static int sut_open(ab_sut **out, struct ab_sut_fault *fault, const struct model_run *R,
	const struct ab_measure_sut *cmd, const char *who, int ready_s, int request_s)
{
	char log_path[4096];
	snprintf(log_path, sizeof(log_path), "%s/accuracy-%s-%s-%s.log", R->cfg->log_dir, who, R->am->model->name,
		R->am->ref->name);
	struct ab_sut_config sc = {
		.argv = cmd->argv, .env = cmd->env, .cwd = cmd->cwd, .stderr_log = log_path,
		.http = cmd->http.url ? &cmd->http : NULL,
		.ready_timeout_ms = ready_s * 1000, .request_timeout_ms = request_s * 1000,
		.sandbox_status = cmd->sandbox_status,
	};
	return ab_sut_start(out, fault, &sc);
}

/* Cache key: model identity, reference command, window tokens and the request's shape. */
static void cache_key(char out[96], const struct model_run *R, int w)
{
	const struct ab_suite_accuracy *acc = &R->cfg->suite->accuracy;
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char identity[512];
	struct stat st;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (R->am->model->sha256[0])
		snprintf(identity, sizeof(identity), "sha256=%s", R->am->model->sha256);
	else if (stat(R->am->model_path, &st) == 0)
		snprintf(identity, sizeof(identity), "file=%s:%lld:%lld.%09ld", R->am->model_path,
			(long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	else
		snprintf(identity, sizeof(identity), "file=%s", R->am->model_path);
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	EVP_DigestUpdate(md, identity, strlen(identity) + 1);
	for (const char *const *a = R->am->reference.argv; a && *a; a++)
		EVP_DigestUpdate(md, *a, strlen(*a) + 1);
	int shape[3] = { acc->top_k, acc->score_from, R->windows->window_len };
	EVP_DigestUpdate(md, shape, sizeof(shape));
	EVP_DigestUpdate(md, R->windows->tokens + (size_t)w * (size_t)R->windows->window_len,
		(size_t)R->windows->window_len * sizeof(uint32_t));
	EVP_DigestFinal_ex(md, digest, &len);
	EVP_MD_CTX_free(md);
	int n = snprintf(out, 96, "accuracy-ref:v1:");
	for (unsigned i = 0; i < 32 && i < len; i++)
		n += snprintf(out + n, (size_t)(96 - n), "%02x", digest[i]);
}

struct top_entry {
	double lp;
	int32_t id;
	int rank;              /* position in the reference's own list: ties keep its order */
};

static int cmp_top_desc(const void *a, const void *b)
{
	const struct top_entry *x = a, *y = b;
	if (x->lp != y->lp)
		return x->lp < y->lp ? 1 : -1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The reference's top lists, each sorted by log-prob (the protocol does not order them; a list
 * already in order is left as it is) and cut to the shortest one's length k: ids[p * k] is the
 * reference's argmax, the k ids its most likely. */
static int ref_from_scores(struct ref_window *rw, const struct ab_sut_scores *sc)
{
	struct top_entry *order = NULL;
	int k = INT32_MAX, n_top_max = 0;
	for (int p = 0; p < sc->n_positions; p++) {
		if (sc->positions[p].n_top < k)
			k = sc->positions[p].n_top;
		if (sc->positions[p].n_top > n_top_max)
			n_top_max = sc->positions[p].n_top;
	}
	if (sc->n_positions <= 0 || k <= 0 || k == INT32_MAX)
		return ab_error_setc(AB_EINVALID, "the reference returned no top-k entries");
	rw->n_pos = sc->n_positions;
	rw->k = k;
	rw->ids = malloc((size_t)rw->n_pos * (size_t)k * sizeof(int32_t));
	rw->lp = malloc((size_t)rw->n_pos * (size_t)k * sizeof(double));
	order = malloc((size_t)n_top_max * sizeof(*order));
	if (rw->ids == NULL || rw->lp == NULL || order == NULL) {
		free(order);
		return ab_error_set("accuracy: out of memory");
	}
	for (int p = 0; p < rw->n_pos; p++) {
		const struct ab_sut_position *sp = &sc->positions[p];
		for (int i = 0; i < sp->n_top; i++)
			order[i] = (struct top_entry){ sp->top_logprobs[i], sp->top_ids[i], i };
		qsort(order, (size_t)sp->n_top, sizeof(*order), cmp_top_desc);
		for (int i = 0; i < k; i++) {
			rw->ids[(size_t)p * k + i] = order[i].id;
			rw->lp[(size_t)p * k + i] = order[i].lp;
		}
	}
	free(order);
	return 0;
}

static char *ref_to_json(const struct ref_window *rw)
{
	json_t *o = json_pack("{s:i, s:i}", "n_pos", rw->n_pos, "k", rw->k);
	json_t *ids = json_array(), *lp = json_array();
	for (size_t i = 0; i < (size_t)rw->n_pos * (size_t)rw->k; i++) {
		json_array_append_new(ids, json_integer(rw->ids[i]));
		json_array_append_new(lp, json_real(rw->lp[i]));
	}
	json_object_set_new(o, "ids", ids);
	json_object_set_new(o, "lp", lp);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* A cached answer must have exactly the expected shape and what a live answer could hold: ids in
 * [0, vocab_size), finite log-probs <= 0 (the small rounding slack sut.c allows). Anything else is
 * ignored, so the windows are scored again and the entry replaced. */
static int ref_from_json(struct ref_window *rw, const char *text, size_t len, int n_pos_expected,
	uint32_t vocab_size)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, 0, &jerr);
	json_t *ids = json_object_get(o, "ids"), *lp = json_object_get(o, "lp");
	int n_pos = (int)json_integer_value(json_object_get(o, "n_pos"));
	int k = (int)json_integer_value(json_object_get(o, "k"));
	int error = -1;
	if (o == NULL || n_pos != n_pos_expected || k <= 0 || k > 4096 || !json_is_array(ids) ||
	    !json_is_array(lp) || json_array_size(ids) != (size_t)n_pos * k || json_array_size(lp) != (size_t)n_pos * k)
		goto cleanup;
	rw->n_pos = n_pos;
	rw->k = k;
	rw->ids = malloc((size_t)n_pos * k * sizeof(int32_t));
	rw->lp = malloc((size_t)n_pos * k * sizeof(double));
	if (rw->ids == NULL || rw->lp == NULL)
		goto cleanup;
	for (size_t i = 0; i < (size_t)n_pos * k; i++) {
		json_t *id = json_array_get(ids, i), *l = json_array_get(lp, i);
		json_int_t v = json_is_integer(id) ? json_integer_value(id) : -1;
		double x = json_is_number(l) ? json_number_value(l) : NAN;
		if (v < 0 || v >= (json_int_t)vocab_size || !isfinite(x) || x > CACHED_LOGPROB_MAX)
			goto cleanup;
		rw->ids[i] = (int32_t)v;
		rw->lp[i] = x;
	}
	error = 0;
cleanup:
	if (error < 0) {
		free(rw->ids);
		free(rw->lp);
		memset(rw, 0, sizeof(*rw));
	}
	json_decref(o);
	return error;
}

static int score_window(struct ab_sut_scores *out, struct ab_sut_fault *fault, ab_sut *sut,
	const struct model_run *R, int w, const struct ref_window *ask)
{
	const struct ab_suite_accuracy *acc = &R->cfg->suite->accuracy;
	int n_pos = R->windows->window_len - acc->score_from;
	const int32_t **ids = NULL;
	int *n_ids = NULL, error;
	if (ask) {
		ids = calloc((size_t)n_pos, sizeof(*ids));
		n_ids = calloc((size_t)n_pos, sizeof(*n_ids));
		if (ids == NULL || n_ids == NULL) {
			free(ids);
			free(n_ids);
			return ab_error_set("accuracy: out of memory");
		}
		for (int p = 0; p < n_pos; p++) {
			ids[p] = ask->ids + (size_t)p * ask->k;
			n_ids[p] = ask->k;
		}
	}
	struct ab_sut_score_request rq = {
		.prompt = (const int32_t *)(R->windows->tokens + (size_t)w * (size_t)R->windows->window_len),
		.prompt_len = R->windows->window_len,
		.top_k = acc->top_k,
		.first = acc->score_from,
		.ids = (const int32_t *const *)ids,
		.n_ids = n_ids,
	};
	error = ab_sut_score(out, fault, sut, &rq);
	free(ids);
	free(n_ids);
	return error;
}

/* Reference answers for every window: from the cache, else from one reference SUT process. */
static int reference_run(struct model_run *R)
{
	const struct ab_suite_sut *rs = &R->am->ref->sut;
	int count = R->windows->count, n_pos = R->windows->window_len - R->cfg->suite->accuracy.score_from;
	ab_sut *sut = NULL;
	struct ab_sut_fault fault = { 0 };
	int error = -1;

	if ((R->ref = calloc((size_t)count, sizeof(*R->ref))) == NULL)
		return ab_error_set("accuracy: out of memory");
	for (int w = 0; w < count; w++) {
		char key[96];
		void *value = NULL;
		size_t len = 0;
		cache_key(key, R, w);
		if (R->cfg->store && ab_store_cache_get(&value, &len, R->cfg->store, key) == 0 &&
		    ref_from_json(&R->ref[w], value, len, n_pos, R->am->vocab_size) == 0)
			R->cached++;
		free(value);
		if (R->ref[w].ids)
			continue;
		if (sut == NULL) {
			if (!R->cfg->quiet)
				AB_INFO("accuracy %s: scoring %d windows on the reference", R->am->label, count);
			if (sut_open(&sut, &fault, R, &R->am->reference, "reference", rs->ready_timeout_s,
			             rs->request_timeout_s) < 0)
				goto fault;
			R->ref_ready = json_deep_copy(ab_sut_ready(sut));
		}
		struct ab_sut_scores sc = { 0 };
		if (score_window(&sc, &fault, sut, R, w, NULL) < 0)
			goto fault;
		int rc = ref_from_scores(&R->ref[w], &sc);
		ab_sut_scores_clear(&sc);
		if (rc < 0)
			goto cleanup;
		char *text = ref_to_json(&R->ref[w]);
		if (text && R->cfg->store)
			ab_store_cache_put(R->cfg->store, key, text, strlen(text));
		free(text);
	}
	error = 0;
	goto cleanup;
fault:
	ab_error_set("reference SUT: %s: %s", ab_sut_fault_kind_name(fault.kind), fault.reason);
cleanup:
	if (sut) {
		char reason[512];
		snprintf(reason, sizeof(reason), "%s", ab_error_last());
		ab_sut_quit(NULL, sut);   /* after a fault it fails too: its message must not replace ours */
		ab_sut_free(sut);
		if (error < 0)
			ab_error_set("%s", reason);
	}
	return error;
}

/* One side: a fresh SUT scores every window on the reference's ids. Returns 0, or 1 on a fault
 * (R->fault[side] set). */
static int side_score(struct model_run *R, int side)
{
	const struct ab_suite_sut *ss = &R->cfg->suite->sut;
	ab_sut *sut = NULL;
	struct ab_sut_fault fault = { 0 };
	int pos = 0, faulted = 1;

	R->bounded[side] = 0;
	if (sut_open(&sut, &fault, R, &R->am->side[side], side_name(side), ss->ready_timeout_s,
	             ss->request_timeout_s) < 0)
		goto cleanup;
	for (int w = 0; w < R->windows->count; w++) {
		const struct ref_window *rw = &R->ref[w];
		struct ab_sut_scores sc = { 0 };
		if (score_window(&sc, &fault, sut, R, w, rw) < 0)
			goto cleanup;
		for (int p = 0; p < rw->n_pos && p < sc.n_positions; p++, pos++) {
			const struct ab_sut_position *sp = &sc.positions[p];
			int best = 0;
			for (int i = 1; i < sp->n_top; i++)
				if (sp->top_logprobs[i] > sp->top_logprobs[best])
					best = i;
			R->agree[side][pos] = sp->n_top > 0 && sp->top_ids[best] == rw->ids[(size_t)p * rw->k];
			R->kl[side][pos] = ab_acc_kl(rw->lp + (size_t)p * rw->k, sp->id_logprobs,
				sp->n_ids < rw->k ? sp->n_ids : rw->k);
			if (!isfinite(R->kl[side][pos])) {
				ab_sut_scores_clear(&sc);
				fault.kind = AB_SUT_PROTOCOL;
				snprintf(fault.reason, sizeof(fault.reason), "log-probs at window %d position %d are not finite", w, p);
				goto cleanup;
			}
		}
		R->bounded[side] += sc.n_ids_bounded;
		ab_sut_scores_clear(&sc);
	}
	faulted = 0;
cleanup:
	if (sut) {
		ab_sut_quit(NULL, sut);
		ab_sut_free(sut);
	}
	if (faulted)
		snprintf(R->fault[side], sizeof(R->fault[side]), "%s: %.200s", ab_sut_fault_kind_name(fault.kind),
			fault.reason);
	return faulted;
}

/* Every scored position's KL per side and the positions whose top-1 missed the reference's, for the
 * report's per-position plot: {"kl": {"base": [...], "head": [...]}, "top1_miss": {"base": [i, ...], ...}}. */
static json_t *per_position_json(const struct model_run *R)
{
	static const char *const sides[2] = { "base", "head" };
	json_t *kl = json_object(), *miss = json_object();
	for (int s = 0; kl && miss && s < 2; s++) {
		json_t *values = json_array(), *misses = json_array();
		for (int p = 0; values && misses && p < R->n_pos; p++) {
			json_array_append_new(values, isfinite(R->kl[s][p]) ? json_real(R->kl[s][p]) : json_null());
			if (!R->agree[s][p])
				json_array_append_new(misses, json_integer(p));
		}
		json_object_set_new(kl, sides[s], values ? values : json_null());
		json_object_set_new(miss, sides[s], misses ? misses : json_null());
	}
	return json_pack("{s:o, s:o}", "kl", kl ? kl : json_null(), "top1_miss", miss ? miss : json_null());
}

static json_t *stats_json(const struct ab_acc_stats *s)
{
	return json_pack("{s:i, s:f, s:[f,f], s:f, s:[f,f], s:f, s:f}", "positions", s->n, "top1", s->top1,
		"top1_ci", s->top1_ci.lo, s->top1_ci.hi, "kl_mean", s->kl_mean, "kl_ci", s->kl_ci.lo, s->kl_ci.hi,
		"kl_p99", s->kl_p99, "kl_max", s->kl_max);
}

static int model_run(json_t **out_json, struct ab_gate_result *gates, size_t *n_gates,
	struct model_run *R, const struct ab_acc_policy *policy)
{
	const char *name = R->am->label;
	json_t *j = json_pack("{s:s, s:s, s:s}", "model", R->am->model->name, "reference_name", R->am->ref->name,
		"label", name);
	int error = -1;

	*n_gates = 0;
	if (reference_run(R) < 0) {
		char reason[300];
		snprintf(reason, sizeof(reason), "%s", ab_error_last());
		AB_WARN("accuracy %s: %s", name, reason);
		static const char *const names[] = { "top1", "kl_mean", "top1_drop", "kl_rise" };
		for (int g = 0; g < 4; g++)
			ab_acc_gate_error(&gates[(*n_gates)++], names[g], name, reason);
		json_object_set_new(j, "error", json_string(reason));
		*out_json = j;
		return 0;
	}
	R->n_pos = 0;
	for (int w = 0; w < R->windows->count; w++)
		R->n_pos += R->ref[w].n_pos;
	for (int s = 0; s < 2; s++) {
		R->agree[s] = calloc((size_t)R->n_pos, sizeof(int));
		R->kl[s] = calloc((size_t)R->n_pos, sizeof(double));
		if (R->agree[s] == NULL || R->kl[s] == NULL) {
			ab_error_set("accuracy: out of memory");
			goto cleanup;
		}
	}
	for (int s = 0; s < 2; s++) {
		if (R->cfg->should_cancel && R->cfg->should_cancel(R->cfg->cancel_payload)) {
			error = ab_error_setc(AB_ECANCELED, "accuracy: canceled");
			goto cleanup;
		}
		if (!R->cfg->quiet)
			AB_INFO("accuracy %s: scoring %d positions on %s", name, R->n_pos, side_name(s));
		if (side_score(R, s) != 0) {
			AB_WARN("accuracy %s: %s SUT failed (%s); retrying once", name, side_name(s), R->fault[s]);
			R->fault[s][0] = '\0';
			side_score(R, s);
		}
	}
	if (R->ref_ready)
		json_object_set(j, "reference", R->ref_ready);
	json_object_set_new(j, "positions", json_integer(R->n_pos));
	json_object_set_new(j, "reference_cached_windows", json_integer(R->cached));
	json_object_set_new(j, "ids_bounded", json_pack("{s:i, s:i}", "base", R->bounded[0], "head", R->bounded[1]));
	if (R->fault[0][0] || R->fault[1][0]) {
		char reason[600];
		snprintf(reason, sizeof(reason), "%s%s%s%s%s", R->fault[0][0] ? "base SUT: " : "", R->fault[0],
			R->fault[0][0] && R->fault[1][0] ? "; " : "", R->fault[1][0] ? "head SUT: " : "", R->fault[1]);
		static const char *const names[] = { "top1", "kl_mean", "top1_drop", "kl_rise" };
		for (int g = 0; g < 4; g++)
			ab_acc_gate_error(&gates[(*n_gates)++], names[g], name, reason);
		json_object_set_new(j, "error", json_string(reason));
	} else {
		struct ab_acc_stats st[2];
		struct ab_acc_diff diff;
		for (int s = 0; s < 2; s++)
			if (ab_acc_stats(&st[s], R->agree[s], R->kl[s], (size_t)R->n_pos, 0.95,
			                 R->cfg->seed + (uint64_t)s) < 0)
				goto cleanup;
		if (ab_acc_diff(&diff, R->agree[0], R->agree[1], R->kl[0], R->kl[1], (size_t)R->n_pos, policy) < 0)
			goto cleanup;
		*n_gates = ab_acc_gates(gates, name, &st[0], &st[1], &diff, policy);
		if (R->bounded[0] || R->bounded[1]) {
			/* The KL gates read upper-bounded log-probs for ids a server did not list: say so there. */
			for (size_t g = 0; g < *n_gates; g++)
				if (strncmp(gates[g].name, "kl_", 3) == 0) {
					size_t used = strlen(gates[g].detail);
					snprintf(gates[g].detail + used, sizeof(gates[g].detail) - used,
						"; KL is a lower bound: %d base / %d head reference ids unlisted by the SUT",
						R->bounded[0], R->bounded[1]);
				}
			AB_WARN("accuracy %s: %d base / %d head reference ids were not in the SUT's listed top-k; "
				"their log-probs are upper bounds, so KL may read low", name, R->bounded[0], R->bounded[1]);
		}
		json_object_set_new(j, "base", stats_json(&st[0]));
		json_object_set_new(j, "head", stats_json(&st[1]));
		json_object_set_new(j, "diff", json_pack("{s:f, s:f, s:f, s:f}", "top1_drop", diff.top1_drop,
			"top1_drop_lo", diff.top1_drop_lo, "kl_rise", diff.kl_rise, "kl_rise_lo", diff.kl_rise_lo));
		json_object_set_new(j, "per_position", per_position_json(R));
		if (!R->cfg->quiet)
			AB_INFO("accuracy %s: top-1 base %.4f head %.4f, mean KL base %.3g head %.3g (%d positions)",
				name, st[0].top1, st[1].top1, st[0].kl_mean, st[1].kl_mean, R->n_pos);
	}
	*out_json = j;
	j = NULL;
	error = 0;
cleanup:
	json_decref(j);
	return error;
}

int ab_accuracy_run(struct ab_accuracy_result *out, const struct ab_accuracy_config *cfg)
{
	const struct ab_suite_accuracy *acc = &cfg->suite->accuracy;
	struct ab_acc_policy policy;
	struct ab_schedule_windows *windows = NULL;   /* of windows_model, reused by its references */
	const struct ab_suite_model *windows_model = NULL;
	uint32_t windows_vocab = 0;
	json_t *models = NULL;
	int64_t t0 = ab_proc_now_ns();
	int error = 0;

	memset(out, 0, sizeof(*out));
	if (cfg->n_models > AB_ACCURACY_MAX_MODELS)
		return ab_error_setc(AB_EINVALID, "accuracy: at most %d models", AB_ACCURACY_MAX_MODELS);
	models = json_array();
	ab_acc_policy_init(&policy);
	policy.top1_min = acc->top1_min;
	policy.kl_max = acc->kl_max;
	policy.top1_drop_max = acc->top1_drop_max;
	policy.kl_rise_max = acc->kl_rise_max;
	policy.kl_rise_rel = acc->kl_rise_rel;
	policy.alpha = cfg->suite->speed.alpha;
	policy.n_differential = 2 * (cfg->n_models > 0 ? cfg->n_models : 1);
	policy.seed = cfg->seed;

	for (int i = 0; i < cfg->n_models && error == 0; i++) {
		struct model_run R = { .cfg = cfg, .am = &cfg->models[i] };
		json_t *mj = NULL;
		size_t n = 0;
		uint32_t vocab = R.am->vocab_size;
		if (cfg->should_cancel && cfg->should_cancel(cfg->cancel_payload)) {
			error = ab_error_setc(AB_ECANCELED, "accuracy: canceled");
			break;
		}
		if (vocab == 0) {
			const char *reason = "the vocabulary size is unknown: no SUT of this model became ready";
			static const char *const names[] = { "top1", "kl_mean", "top1_drop", "kl_rise" };
			for (int g = 0; g < 4; g++)
				ab_acc_gate_error(&out->gates[out->n_gates++], names[g], R.am->label, reason);
			json_array_append_new(models, json_pack("{s:s, s:s, s:s, s:s}", "model", R.am->model->name,
				"reference_name", R.am->ref->name, "label", R.am->label, "error", reason));
			continue;
		}
		/* Windows depend on the model, not on the reference: every reference of a model scores the
		 * same held-out prompts, so the windows (and the corpus read behind them) are made once. */
		if (windows == NULL || windows_model != R.am->model || windows_vocab != vocab) {
			ab_schedule_windows_free(windows);
			windows = NULL;
			if (ab_schedule_windows_make(&windows, cfg->seed, R.am->model->name, acc->windows,
			                             acc->window_len, cfg->corpus_path, vocab) < 0) {
				error = -1;
				break;
			}
			windows_model = R.am->model;
			windows_vocab = vocab;
		}
		R.windows = windows;
		error = model_run(&mj, &out->gates[out->n_gates], &n, &R, &policy);
		out->n_gates += n;
		if (mj) {
			json_object_set(mj, "windows", R.windows->description);
			json_array_append_new(models, mj);
		}
		ref_windows_free(R.ref, R.windows->count);
		json_decref(R.ref_ready);
		for (int s = 0; s < 2; s++) {
			free(R.agree[s]);
			free(R.kl[s]);
		}
	}
	ab_schedule_windows_free(windows);
	out->seconds = (ab_proc_now_ns() - t0) / 1e9;
	out->json = json_pack("{s:o, s:{s:f, s:f, s:f, s:f}, s:f}", "models", models,
		"thresholds", "top1_min", acc->top1_min, "kl_max", acc->kl_max, "top1_drop_max", acc->top1_drop_max,
		"kl_rise_max", acc->kl_rise_max, "seconds", out->seconds);
	return error;
}

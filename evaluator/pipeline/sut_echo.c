/*
 * sut_echo.c - prompt log-probs over OpenAI echo (sut_echo.h): the request body, and a checked
 * reading of the answer into Contract 1's score positions. The body is capped before it is parsed
 * (sut_http.c); here every array length, token key, id and log-prob is checked before it is used,
 * so a malformed answer is a reason string, never a wrong number handed to the accuracy gates.
 */
#include "sut_echo.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define OWN_TOLERANCE 1e-3      /* token_logprobs[e] vs the same id in top_logprobs[e] */
#define LOGPROB_FLOOR (-745.0)  /* exp() of anything lower is 0 in double */
#define BODY_FIXED (64 << 10)
#define PER_ENTRY 192           /* tokens + token_logprobs + text_offset + the entry's text */
#define PER_TOP 64              /* one "token_id:N": log-prob pair */

char *ab_sut_echo_body(const struct ab_sut_score_request *rq, const char *model_name)
{
	json_t *ids = json_array();
	for (int i = 0; ids && i < rq->prompt_len; i++)
		json_array_append_new(ids, json_integer(rq->prompt[i]));
	json_t *body = ids ? json_pack("{s:o, s:i, s:b, s:i, s:f, s:b, s:b, s:b}", "prompt", ids, "max_tokens", 1, "echo", 1,
		"logprobs", rq->top_k, "temperature", 0.0, "return_tokens_as_token_ids", 1, "stream", 0, "ignore_eos", 1) : NULL;
	if (body && model_name)
		json_object_set_new(body, "model", json_string(model_name));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	return text;
}

size_t ab_sut_echo_body_cap(const struct ab_sut_score_request *rq)
{
	return BODY_FIXED + ((size_t)rq->prompt_len + 1) * (PER_ENTRY + ((size_t)rq->top_k + 1) * PER_TOP);
}

int ab_sut_echo_token_key(int32_t *out, const char *key, int vocab)
{
	static const char prefix[] = "token_id:";
	if (!key || strncmp(key, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	const char *d = key + sizeof(prefix) - 1;
	long v = 0;
	int n = 0;
	for (; d[n] >= '0' && d[n] <= '9'; n++) {
		if (n >= 9)
			return -1;
		v = v * 10 + (d[n] - '0');
	}
	if (n == 0 || d[n] != '\0' || v >= vocab)
		return -1;
	*out = (int32_t)v;
	return 0;
}

struct listed {
	int32_t id;
	double lp;
};

/* Best first; equal log-probs: lower id first (ember's order). */
static int cmp_listed(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	if (x->lp != y->lp)
		return x->lp < y->lp ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

static int find(const struct listed *l, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (l[i].id == id)
			return i;
	return -1;
}

static int why_set(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return AB_EINVALID;
}

/* Position p from entry p + 1's listing (sorted, n_list entries; known = listing + own token). */
static int fill_position(struct ab_sut_position *pos, const struct listed *known, int n_list, int n_known, int top_k,
	const int32_t *ask, int n_ask, int *bounded)
{
	const int n_top = n_list < top_k ? n_list : top_k;
	pos->top_ids = malloc((size_t)n_top * sizeof(*pos->top_ids));
	pos->top_logprobs = malloc((size_t)n_top * sizeof(*pos->top_logprobs));
	pos->id_logprobs = malloc((size_t)(n_ask > 0 ? n_ask : 1) * sizeof(*pos->id_logprobs));
	if (!pos->top_ids || !pos->top_logprobs || !pos->id_logprobs)
		return -1;
	pos->n_top = n_top;
	pos->n_ids = n_ask;
	for (int i = 0; i < n_top; i++) {
		pos->top_ids[i] = known[i].id;
		pos->top_logprobs[i] = known[i].lp;
	}
	double mass = 0, min_lp = 0;
	for (int i = 0; i < n_known; i++) {
		mass += exp(known[i].lp);
		min_lp = i == 0 || known[i].lp < min_lp ? known[i].lp : min_lp;
	}
	int missing = 0;
	for (int j = 0; j < n_ask; j++)
		missing += find(known, n_known, ask[j]) < 0;
	double bound = min_lp;
	if (missing > 0) {
		double rest = 1.0 - mass;
		bound = fmin(min_lp, rest > 0 ? log(rest / missing) : LOGPROB_FLOOR);
		if (!isfinite(bound))
			bound = fmin(min_lp, LOGPROB_FLOOR);
	}
	for (int j = 0; j < n_ask; j++) {
		int k = find(known, n_known, ask[j]);
		pos->id_logprobs[j] = k >= 0 ? known[k].lp : bound;
	}
	*bounded += missing;
	return 0;
}

int ab_sut_echo_parse(struct ab_sut_scores *out, char *why, size_t why_len, const char *body, size_t len,
	const struct ab_sut_score_request *rq, int vocab)
{
	struct ab_sut_scores sc = { 0 };
	struct listed *list = NULL;
	json_error_t jerr;
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	const int n = rq->prompt_len, n_entries = n + 1, cap = rq->top_k + 1;
	int error = AB_EINVALID;

	if (!root) {
		why_set(why, why_len, "the answer is not JSON (line %d: %.80s)", jerr.line, jerr.text);
		goto cleanup;
	}
	json_t *choices = json_object_get(root, "choices");
	if (!json_is_object(root) || !json_is_array(choices) || json_array_size(choices) != 1) {
		why_set(why, why_len, "the answer needs an object with one entry in \"choices\"");
		goto cleanup;
	}
	json_t *lp = json_object_get(json_array_get(choices, 0), "logprobs");
	if (!json_is_object(lp)) {
		why_set(why, why_len, "choices[0].logprobs is %s: no prompt log-probs in a 200 answer",
			lp && !json_is_null(lp) ? "not an object" : "missing");
		goto cleanup;
	}
	json_t *tokens = json_object_get(lp, "tokens"), *own_lp = json_object_get(lp, "token_logprobs"),
		*tops = json_object_get(lp, "top_logprobs");
	if (!json_is_array(tokens) || !json_is_array(own_lp) || !json_is_array(tops)) {
		why_set(why, why_len, "choices[0].logprobs needs arrays tokens, token_logprobs and top_logprobs");
		goto cleanup;
	}
	if (json_array_size(tokens) != (size_t)n_entries || json_array_size(own_lp) != (size_t)n_entries ||
	    json_array_size(tops) != (size_t)n_entries) {
		why_set(why, why_len, "%zu tokens, %zu token_logprobs, %zu top_logprobs for a prompt of %d tokens "
			"(expected %d each: the prompt and one generated token)", json_array_size(tokens),
			json_array_size(own_lp), json_array_size(tops), n, n_entries);
		goto cleanup;
	}
	if (!(list = malloc((size_t)(cap + 1) * sizeof(*list))) ||
	    !(sc.positions = calloc((size_t)(n - rq->first), sizeof(*sc.positions)))) {
		error = ab_error_set("out of memory");
		goto cleanup;
	}
	sc.n_positions = n - rq->first;
	for (int e = 0; e < n_entries; e++) {
		int32_t tok;
		if (ab_sut_echo_token_key(&tok, json_string_value(json_array_get(tokens, (size_t)e)), vocab) < 0) {
			why_set(why, why_len, "tokens[%d] is not \"token_id:N\" with N in [0, %d) (return_tokens_as_token_ids "
				"ignored?)", e, vocab);
			goto cleanup;
		}
		if (e < n && tok != rq->prompt[e]) {
			why_set(why, why_len, "tokens[%d] is id %d where the prompt has %d: the echo is not the prompt", e,
				(int)tok, (int)rq->prompt[e]);
			goto cleanup;
		}
		if (e == 0)
			continue;
		double own;
		if (!ab_sut_logprob_ok(json_array_get(own_lp, (size_t)e), &own)) {
			why_set(why, why_len, "token_logprobs[%d] is not a finite log-prob <= 0", e);
			goto cleanup;
		}
		json_t *top = json_array_get(tops, (size_t)e), *v;
		const char *key;
		if (!json_is_object(top) || json_object_size(top) < 1 || json_object_size(top) > (size_t)cap) {
			why_set(why, why_len, "top_logprobs[%d] must be an object of 1..%d entries (logprobs %d, maybe the "
				"entry's own token)", e, cap, rq->top_k);
			goto cleanup;
		}
		int n_list = 0;
		json_object_foreach(top, key, v) {
			if (ab_sut_echo_token_key(&list[n_list].id, key, vocab) < 0) {
				char shown[48];
				snprintf(shown, sizeof(shown), "%s", key);
				for (char *c = shown; *c; c++)
					*c = *c >= ' ' && *c <= '~' && *c != '"' ? *c : '?';
				why_set(why, why_len, "top_logprobs[%d] key \"%s\" is not \"token_id:N\" with N in [0, %d)", e,
					shown, vocab);
				goto cleanup;
			}
			if (!ab_sut_logprob_ok(v, &list[n_list].lp)) {
				why_set(why, why_len, "top_logprobs[%d][\"token_id:%d\"] is not a finite log-prob <= 0", e,
					(int)list[n_list].id);
				goto cleanup;
			}
			n_list++;
		}
		int at = find(list, n_list, tok);
		if (at >= 0 && fabs(list[at].lp - own) > OWN_TOLERANCE) {
			why_set(why, why_len, "token_logprobs[%d] = %.6g but top_logprobs[%d] gives token_id:%d %.6g", e, own, e,
				(int)tok, list[at].lp);
			goto cleanup;
		}
		const int p = e - 1;
		if (p < rq->first)
			continue;
		qsort(list, (size_t)n_list, sizeof(*list), cmp_listed);
		int n_known = n_list;
		if (at < 0)
			list[n_known++] = (struct listed){ tok, own };   /* known, though not among the top */
		const int pi = p - rq->first;
		if (fill_position(&sc.positions[pi], list, n_list, n_known, rq->top_k, rq->ids ? rq->ids[pi] : NULL,
			rq->ids ? rq->n_ids[pi] : 0, &sc.n_ids_bounded) < 0) {
			error = ab_error_set("out of memory");
			goto cleanup;
		}
	}
	*out = sc;
	memset(&sc, 0, sizeof(sc));
	error = 0;
cleanup:
	ab_sut_scores_clear(&sc);
	free(list);
	json_decref(root);
	return error;
}

/*
 * sut_parse.c - Contract 1's lines and values parsed without a process (see sut.h): the ready line
 * and its "spec" object, the done event's speculative stats, a reply's event and id, one log-prob,
 * and the printable excerpts of untrusted text the messages quote. Every input is bounded (line
 * length, NUL bytes, duplicate keys) before jansson sees it.
 */
#include "sut.h"

#include "error.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#define LOGPROB_SLACK 1e-3       /* log-probs a little above 0 are rounding, not garbage */

void ab_sut_snippet(char *dst, size_t cap, const char *src, size_t len)
{
	size_t w = 0, max = cap > 4 ? cap - 4 : 0;
	for (size_t i = 0; i < len && w < max; i++)
		dst[w++] = isprint((unsigned char)src[i]) ? src[i] : '?';
	if (len > w && cap > 4) {
		memcpy(dst + w, "...", 3);
		w += 3;
	}
	if (cap)
		dst[w < cap ? w : cap - 1] = '\0';
}

/* ---- line parsing ---- */

static int load_object(json_t **out, const char *line, size_t len, size_t max_len, const char *what)
{
	json_error_t jerr;
	char snip[80];

	if (len > max_len)
		return ab_error_setc(AB_EINVALID, "%s: line of %zu bytes exceeds %zu", what, len, max_len);
	if (memchr(line, '\0', len))
		return ab_error_setc(AB_EINVALID, "%s: line contains a NUL byte", what);
	json_t *obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj || !json_is_object(obj)) {
		ab_sut_snippet(snip, sizeof(snip), line, len);
		json_decref(obj);
		return ab_error_setc(AB_EINVALID, "%s: not a JSON object%s%s%s: '%s'", what, obj ? "" : " (",
			obj ? "" : jerr.text, obj ? "" : ")", snip);
	}
	*out = obj;
	return 0;
}

int ab_sut_parse_ready(json_t **out_ready, int *out_vocab, const char *line, size_t len, size_t max_len)
{
	json_t *obj = NULL;
	int error = load_object(&obj, line, len, max_len, "ready line");
	if (error < 0)
		return error;
	error = AB_EINVALID;
	json_t *ready = json_object_get(obj, "ready"), *protocol = json_object_get(obj, "protocol");
	json_t *model = json_object_get(obj, "model");
	json_t *vocab = model ? json_object_get(model, "vocab_size") : NULL;
	if (!json_is_true(ready)) {
		ab_error_setc(error, "ready line: \"ready\" must be true");
		goto cleanup;
	}
	if (!json_is_integer(protocol) || json_integer_value(protocol) != 1) {
		ab_error_setc(error, "ready line: \"protocol\" must be the integer 1 (this harness speaks protocol 1)");
		goto cleanup;
	}
	if (!json_is_object(model)) {
		ab_error_setc(error, "ready line: \"model\" must be an object");
		goto cleanup;
	}
	if (!json_is_integer(vocab) || json_integer_value(vocab) <= 0 || json_integer_value(vocab) > INT32_MAX) {
		ab_error_setc(error, "ready line: \"model.vocab_size\" must be a positive integer");
		goto cleanup;
	}
	*out_vocab = (int)json_integer_value(vocab);
	*out_ready = obj;
	obj = NULL;
	error = 0;
cleanup:
	json_decref(obj);
	return error;
}

int ab_sut_parse_spec(struct ab_sut_spec_info *out, const json_t *ready)
{
	json_t *spec = json_object_get(ready, "spec");
	memset(out, 0, sizeof(*out));
	if (spec == NULL || json_is_null(spec))
		return 0;
	json_t *kind = json_object_get(spec, "kind"), *block = json_object_get(spec, "block_size");
	const char *k = json_string_value(kind);
	if (!json_is_object(spec))
		return ab_error_setc(AB_EINVALID, "ready line: \"spec\" must be an object");
	if (!k || json_string_length(kind) == 0 || json_string_length(kind) >= sizeof(out->kind) ||
	    strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != json_string_length(kind))
		return ab_error_setc(AB_EINVALID, "ready line: \"spec.kind\" must be a short name such as \"dflash\"");
	if (block && !json_is_null(block) &&
	    (!json_is_integer(block) || json_integer_value(block) < 2 || json_integer_value(block) > 4096))
		return ab_error_setc(AB_EINVALID, "ready line: \"spec.block_size\" must be an integer in [2, 4096]");
	out->present = 1;
	snprintf(out->kind, sizeof(out->kind), "%s", k);
	out->block_size = json_is_integer(block) ? (int)json_integer_value(block) : 0;
	return 0;
}

/* A non-negative integer member of stats, or -1 when missing or not one. */
static json_int_t stat_count(const json_t *stats, const char *key)
{
	json_t *v = json_object_get(stats, key);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

int ab_sut_parse_spec_stats(struct ab_sut_spec_stats *out, const json_t *stats, int n_tokens)
{
	if (!json_is_object(stats))
		return ab_error_setc(AB_EINVALID, "a speculative answer without stats");
	json_int_t steps = stat_count(stats, "target_steps"), drafted = stat_count(stats, "drafted");
	json_int_t accepted = stat_count(stats, "accepted");
	json_t *mean = json_object_get(stats, "accept_mean");
	if (!json_object_get(stats, "target_steps") && !json_object_get(stats, "drafted"))
		return ab_error_setc(AB_EINVALID, "the answer carries no speculative stats (target_steps, drafted, "
			"accepted, accept_mean; over HTTP timings.draft_n and draft_n_accepted): was the SUT started with "
			"its draft?");
	if (steps < 1 || steps > n_tokens - 1)
		return ab_error_setc(AB_EINVALID, "stats.target_steps must be an integer in [1, %d] for %d tokens",
			n_tokens - 1, n_tokens);
	if (drafted < 0 || accepted < 0 || accepted > drafted)
		return ab_error_setc(AB_EINVALID, "stats.drafted and stats.accepted must be integers with "
			"0 <= accepted <= drafted");
	if (!json_is_number(mean) || !isfinite(json_number_value(mean)) || json_number_value(mean) < 1.0)
		return ab_error_setc(AB_EINVALID, "stats.accept_mean must be a number >= 1");
	out->target_steps = (int)steps;
	out->drafted = (long)drafted;
	out->accepted = (long)accepted;
	out->accept_mean = json_number_value(mean);
	return 0;
}

int ab_sut_parse_reply(enum ab_sut_event *out_event, json_t **out_obj, const char *line, size_t len,
	size_t max_len, int64_t expected_id)
{
	json_t *obj = NULL;
	enum ab_sut_event ev;
	int error = load_object(&obj, line, len, max_len, "reply");
	if (error < 0)
		return error;
	error = AB_EINVALID;
	json_t *id = json_object_get(obj, "id");
	const char *event = json_string_value(json_object_get(obj, "event"));
	if (!event) {
		ab_error_setc(error, "reply: no \"event\" string");
		goto cleanup;
	}
	if (strcmp(event, "first") == 0)
		ev = AB_SUT_EVENT_FIRST;
	else if (strcmp(event, "done") == 0)
		ev = AB_SUT_EVENT_DONE;
	else if (strcmp(event, "error") == 0)
		ev = AB_SUT_EVENT_ERROR;
	else {
		char snip[40];
		ab_sut_snippet(snip, sizeof(snip), event, strlen(event));
		ab_error_setc(error, "reply: unknown event '%s'", snip);
		goto cleanup;
	}
	/* An error about a line the SUT could not parse may carry no id; it still answers us. */
	if (ev == AB_SUT_EVENT_ERROR && (!id || json_is_null(id))) {
		/* accepted */
	} else if (!json_is_integer(id)) {
		ab_error_setc(error, "reply: \"id\" must be an integer");
		goto cleanup;
	} else if (json_integer_value(id) != expected_id) {
		ab_error_setc(error, "reply for id %lld while waiting for id %lld",
			(long long)json_integer_value(id), (long long)expected_id);
		goto cleanup;
	}
	*out_event = ev;
	*out_obj = obj;
	obj = NULL;
	error = 0;
cleanup:
	json_decref(obj);
	return error;
}

int ab_sut_logprob_ok(const json_t *v, double *out)
{
	if (!json_is_number(v))
		return 0;
	double x = json_number_value(v);
	if (!isfinite(x) || x > LOGPROB_SLACK)
		return 0;
	*out = x;
	return 1;
}

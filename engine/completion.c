/*
 * completion.c - completion requests of the llama-server and OpenAI APIs (completion.h): a
 * bounded jansson parse of the body, then field by field checks; token ids go through the
 * session's checks (vocabulary, context) like the stdio server's.
 */
#include "completion.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static int opt_bool(const json_t *req, const char *field, int dflt, int *out)
{
	const json_t *v = json_object_get(req, field);
	if (!v || json_is_null(v)) {
		*out = dflt;
		return 0;
	}
	if (!json_is_boolean(v))
		return ember_error_set(EMBER_EFORMAT, "'%s' must be true or false", field);
	*out = json_is_true(v);
	return 0;
}

static int opt_int(const json_t *req, const char *field, long long dflt, long long lo, long long hi, long long *out)
{
	const json_t *v = json_object_get(req, field);
	if (!v || json_is_null(v)) {
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ember_error_set(EMBER_EFORMAT, "'%s' must be an integer in %lld..%lld", field, lo, hi);
	*out = json_integer_value(v);
	return 0;
}

/* ember decodes greedily: a request may say so (temperature <= 0, or top_k 1) or say nothing. */
static int check_greedy(const json_t *req)
{
	const json_t *t = json_object_get(req, "temperature"), *k = json_object_get(req, "top_k");
	if (t && !json_is_null(t) && !json_is_number(t))
		return ember_error_set(EMBER_EFORMAT, "'temperature' must be a number");
	if (k && !json_is_null(k) && !json_is_integer(k))
		return ember_error_set(EMBER_EFORMAT, "'top_k' must be an integer");
	const int sampling = t && json_is_number(t) && json_number_value(t) > 0;
	if (sampling && !(json_is_integer(k) && json_integer_value(k) == 1))
		return ember_error_set(EMBER_EUNSUPPORTED, "ember serve decodes greedily only: send \"temperature\": 0 "
		                       "(or \"top_k\": 1); temperature %g asks for sampling", json_number_value(t));
	return 0;
}

/* "stop" needs text matching, which needs a tokenizer ember serve does not have. */
static int check_no_stop(const json_t *req)
{
	const json_t *v = json_object_get(req, "stop");
	if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
		return 0;
	return ember_error_set(EMBER_EUNSUPPORTED, "'stop' strings are not supported: ember serve has no tokenizer "
	                       "(generation ends at the token count)");
}

/* llama-server's per-request speculative fields (both APIs). n_max is checked against the draft's
 * block here; without a draft any value is accepted and nothing speculates (as llama-server). */
static int parse_speculative(const json_t *req, struct ember_completion *c, const struct ember_session *ss)
{
	const int max = ss->draft ? ss->draft->block_size - 1 : 4096;
	long long n_max, n_min;
	const json_t *p_min = json_object_get(req, "speculative.p_min");
	if (opt_int(req, "speculative.n_max", -1, 0, max, &n_max) || opt_int(req, "speculative.n_min", 0, 0, max, &n_min))
		return EMBER_EFORMAT;
	if (p_min && !json_is_null(p_min) && !json_is_number(p_min))
		return ember_error_set(EMBER_EFORMAT, "'speculative.p_min' must be a number");
	c->spec_depth = ss->draft ? (int)n_max : 0;
	return 0;
}

static int parse_llama(const json_t *req, struct ember_completion *c, long long n_ctx)
{
	long long n_probs;
	if (opt_int(req, "n_predict", -1, -1, 1LL << 30, &c->n_gen) || opt_bool(req, "return_tokens", 0, &c->return_tokens) ||
	    opt_int(req, "n_probs", 0, 0, 1LL << 30, &n_probs))
		return EMBER_EFORMAT;
	if (n_probs > 0)
		return ember_error_set(EMBER_EUNSUPPORTED, "n_probs not supported: ember serve --http returns no token "
		                       "probabilities (use ember serve --stdio's score op)");
	if (c->n_gen == 0)
		return ember_error_set(EMBER_EFORMAT, "'n_predict' must be -1 (fill the context) or at least 1");
	if (c->n_gen < 0 && (c->n_gen = n_ctx - c->n_prompt) < 1)
		return ember_error_set(EMBER_EFORMAT, "prompt (%d tokens) leaves no room in the context of %lld", c->n_prompt,
		                       n_ctx);
	return 0;
}

/* "logprobs": null/false/0 = none, else an integer K in 1..EMBER_COMPLETION_LOGPROBS_MAX. */
static int read_logprobs(const json_t *req, int *out)
{
	const json_t *lp = json_object_get(req, "logprobs");
	*out = 0;
	if (!lp || json_is_null(lp) || json_is_false(lp))
		return 0;
	if (!json_is_integer(lp) || json_integer_value(lp) < 0)
		return ember_error_set(EMBER_EFORMAT, "'logprobs' must be an integer in 0..%d", EMBER_COMPLETION_LOGPROBS_MAX);
	if (json_integer_value(lp) > EMBER_COMPLETION_LOGPROBS_MAX)
		return ember_error_set(EMBER_EUNSUPPORTED, "'logprobs' is at most %d in ember serve --http (asked %" JSON_INTEGER_FORMAT ")",
		                       EMBER_COMPLETION_LOGPROBS_MAX, json_integer_value(lp));
	*out = (int)json_integer_value(lp);
	return 0;
}

static int parse_openai(const json_t *req, struct ember_completion *c)
{
	long long n = 1, best_of = 1;
	const json_t *opts = json_object_get(req, "stream_options");
	int rc;
	if (opt_bool(req, "echo", 0, &c->echo) ||
	    opt_int(req, "max_tokens", EMBER_COMPLETION_DEFAULT_MAX_TOKENS, c->echo ? 0 : 1, 1LL << 30, &c->n_gen) ||
	    opt_int(req, "n", 1, 1, 1, &n) || opt_int(req, "best_of", 1, 1, 1, &best_of) ||
	    opt_bool(req, "return_tokens_as_token_ids", 0, &c->token_ids))
		return EMBER_EFORMAT;
	if ((rc = read_logprobs(req, &c->logprobs)))
		return rc;
	if (c->logprobs > 0 && !c->echo)
		return ember_error_set(EMBER_EUNSUPPORTED, "logprobs not supported without echo: ember serve --http gives the "
		                       "prompt's log-probs (\"echo\": true, max_tokens 0 or 1), not those of generated tokens");
	if (c->echo && c->stream)
		return ember_error_set(EMBER_EUNSUPPORTED, "'echo' is supported without streaming only");
	if (c->echo && c->n_gen > 1)
		return ember_error_set(EMBER_EUNSUPPORTED, "'echo' needs max_tokens 0 or 1 (the prompt's log-probs and at most "
		                       "the next token), not %lld", c->n_gen);
	if (c->echo && (uint64_t)(c->n_prompt + 1) * (uint64_t)(c->logprobs + 1) > EMBER_COMPLETION_ECHO_MAX_ENTRIES)
		return ember_error_set(EMBER_EUNSUPPORTED, "echo answer too large: %d positions x %d log-probs exceed %d "
		                       "(score a shorter prompt, or fewer logprobs)", c->n_prompt + 1, c->logprobs + 1,
		                       EMBER_COMPLETION_ECHO_MAX_ENTRIES);
	if (opts && !json_is_null(opts) && !json_is_object(opts))
		return ember_error_set(EMBER_EFORMAT, "'stream_options' must be an object");
	if (opts && opt_bool(opts, "include_usage", 0, &c->include_usage))
		return EMBER_EFORMAT;
	return 0;
}

int ember_completion_parse(struct ember_completion *c, const struct ember_session *ss, const char *body, size_t len,
                           enum ember_completion_api api)
{
	json_error_t jerr;
	json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	int ignore_eos, error = EMBER_EFORMAT;
	memset(c, 0, sizeof(*c));
	c->api = api;
	if (!req)
		return ember_error_set(EMBER_EFORMAT, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
		                       jerr.text);
	if (!json_is_object(req)) {
		ember_error_set(EMBER_EFORMAT, "the request body must be a JSON object");
		goto cleanup;
	}
	const json_t *prompt = json_object_get(req, "prompt");
	if (!prompt) {
		ember_error_set(EMBER_EFORMAT, "missing field 'prompt' (an array of token ids)");
		goto cleanup;
	}
	if (json_is_string(prompt)) {
		ember_error_set(EMBER_EFORMAT, "'prompt' must be an array of token ids: ember serve has no tokenizer");
		goto cleanup;
	}
	if ((error = ember_session_read_tokens(ss, prompt, "prompt", (size_t)ss->n_ctx, "context", &c->prompt,
	                                       &c->n_prompt)))
		goto cleanup;
	error = EMBER_EFORMAT;
	if (c->n_prompt == 0) {
		ember_error_set(EMBER_EFORMAT, "'prompt' is empty");
		goto cleanup;
	}
	if (opt_bool(req, "stream", 0, &c->stream) || opt_bool(req, "ignore_eos", 0, &ignore_eos) || check_greedy(req) ||
	    check_no_stop(req) || parse_speculative(req, c, ss) || (api == EMBER_COMPLETION_LLAMA ? parse_llama(req, c, ss->n_ctx) : parse_openai(req, c)))
		goto cleanup;
	error = 0;
cleanup:
	json_decref(req);
	if (error)
		ember_completion_clear(c);
	return error;
}

void ember_completion_clear(struct ember_completion *c)
{
	free(c->prompt);
	c->prompt = NULL;
	c->n_prompt = 0;
}

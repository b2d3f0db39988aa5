/*
 * sut_echo.h - scoring over HTTP (sut_http.c's score): the request and the validated answer of
 * OpenAI legacy completions with prompt echo, as vLLM and `ember serve --http` answer it:
 * POST /v1/completions {"prompt": ids, "max_tokens": 1, "echo": true, "logprobs": K,
 * "temperature": 0, "return_tokens_as_token_ids": true} -> choices[0].logprobs.{tokens,
 * token_logprobs, top_logprobs} with one entry per prompt token plus the generated one, tokens
 * named "token_id:N". Entry e >= 1 is the distribution after prompt[0..e-1], i.e. Contract 1's
 * score position e - 1, so the answer fills struct ab_sut_scores as the stdio score op does.
 */
#ifndef AB_SUT_ECHO_H
#define AB_SUT_ECHO_H

#include <stddef.h>

#include "sut.h"

/* The request body for `request` (logprobs = top_k; model_name NULL: no "model"). Caller frees
 * with free(); NULL when out of memory. */
char *ab_sut_echo_body(const struct ab_sut_score_request *request, const char *model_name);

/* The largest answer an honest server can send for `request` (bytes): the body cap. */
size_t ab_sut_echo_body_cap(const struct ab_sut_score_request *request);

/*
 * Parses and checks the answer body (len bytes, untrusted) against the request and the
 * vocabulary: exactly prompt_len + 1 entries in each of the three arrays; tokens[e] is
 * "token_id:prompt[e]" for every prompt position (the echo must be the prompt) and a valid id at
 * the end; every top_logprobs key is "token_id:N" with N in [0, vocab_size), each object has
 * 1..top_k + 1 entries (vLLM may add the entry's own token); every log-prob is a finite number
 * <= 1e-3; an entry's token_logprob agrees with its own id's value in top_logprobs. Entry 0 is
 * ignored beyond its token (OpenAI gives it null log-probs).
 *
 * Each scored position p (first .. prompt_len-1) gets the best top_k of entry p + 1's listed ids,
 * best first (ties: lower id first), and for each asked id its listed log-prob (top_logprobs or
 * the entry's own token). An asked id the server did not list gets the largest value the listing
 * allows: at most the smallest listed log-prob, and with the other unlisted asked ids at most the
 * unlisted mass (an optimistic bound; counted in out->n_ids_bounded).
 *
 * 0 with *out filled (caller clears with ab_sut_scores_clear); AB_EINVALID with the reason in
 * why (nothing to free); -1 when out of memory.
 */
int ab_sut_echo_parse(struct ab_sut_scores *out, char *why, size_t why_len, const char *body, size_t len,
	const struct ab_sut_score_request *request, int vocab_size);

/* Reads "token_id:N" (N decimal, no sign, 1..9 digits) with N in [0, vocab_size). 0 or -1. */
int ab_sut_echo_token_key(int32_t *out, const char *key, int vocab_size);

#endif

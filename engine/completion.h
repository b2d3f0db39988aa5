/*
 * completion.h - a completion request as `ember serve --http` accepts it, parsed and checked
 * before the engine sees it: llama-server's native POST /completion or OpenAI's POST
 * /v1/completions, the prompt as token ids, greedy only. OpenAI's echo + logprobs (the prompt's
 * teacher-forced log-probs, as vLLM answers them) is accepted non-streamed with max_tokens 0 or 1.
 * Fields ember cannot honour (sampling, n_probs, logprobs of generated tokens, stop strings, n > 1)
 * are refused with a message rather than ignored; fields that change nothing for a greedy,
 * tokenizer-less engine (cache_prompt, ignore_eos, seed, top_p, model) are accepted. Unknown
 * fields are ignored, as both servers do. Speculative decoding follows llama-server: a server
 * started with a draft speculates on every request unless it sends "speculative.n_max": 0;
 * "speculative.n_max": N sets the proposals per step (1..block-1); "speculative.n_min" and
 * "speculative.p_min" are accepted and change nothing (ember proposes the draft's argmax, always N).
 */
#ifndef EMBER_COMPLETION_H
#define EMBER_COMPLETION_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"

enum ember_completion_api { EMBER_COMPLETION_LLAMA, EMBER_COMPLETION_OPENAI };

#define EMBER_COMPLETION_DEFAULT_MAX_TOKENS 16 /* OpenAI's default for max_tokens */
#define EMBER_COMPLETION_LOGPROBS_MAX 64       /* "logprobs": K above this is a 400 */
#define EMBER_COMPLETION_ECHO_MAX_ENTRIES (2 << 20) /* (n_prompt + 1) * (K + 1) log-probs in one answer */

struct ember_completion {
	enum ember_completion_api api;
	int stream;              /* "stream": true: SSE, one event per token */
	int return_tokens;       /* llama: "return_tokens": each event carries tokens: [id] */
	int include_usage;       /* OpenAI: "stream_options": {"include_usage": true} */
	int echo;                /* OpenAI: "echo": true: the answer starts with the prompt; not streamed,
	                          * n_gen 0 or 1 (the greedy token after the prompt) */
	int logprobs;            /* OpenAI: "logprobs": K (only with echo): per position the token's log-prob
	                          * and the top K, teacher-forced over the prompt; 0: none */
	int token_ids;           /* OpenAI/vLLM: "return_tokens_as_token_ids": tokens named "token_id:N" */
	int spec_depth;          /* "speculative.n_max": -1 absent (the server's depth), 0 plain, else N */
	long long n_gen;         /* n_predict (-1: what the context leaves) or max_tokens (0 only with echo) */
	int32_t *prompt;         /* owned: freed by ember_completion_clear */
	int n_prompt;
};

/* Parses the request body (len bytes, untrusted) of `api` against the session's vocabulary and
 * context. 0 and *out filled (release with ember_completion_clear); else EMBER_EFORMAT (a
 * malformed request), EMBER_EUNSUPPORTED (a valid one ember cannot honour) or EMBER_ENOMEM, with
 * the message for the client in ember_error_last(), and *out holding nothing to free. */
int ember_completion_parse(struct ember_completion *out, const struct ember_session *session, const char *body,
                           size_t len, enum ember_completion_api api);

/* Frees what a parsed request owns; accepts a zeroed struct. */
void ember_completion_clear(struct ember_completion *c);

#endif

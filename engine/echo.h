/*
 * echo.h - the answer to an OpenAI legacy completion with "echo": true (and "logprobs": K), as
 * vLLM gives it: choices[0].logprobs.{tokens, token_logprobs, top_logprobs, text_offset} with one
 * entry per prompt token (entry 0 has null log-probs: nothing predicts the first token) plus one
 * for the greedy next token when max_tokens is 1. Entry i's numbers are the teacher-forced
 * distribution after prompt[0..i-1], computed by score.c exactly as the stdio score op's position
 * i - 1. With return_tokens_as_token_ids, tokens and top_logprobs keys are "token_id:N".
 */
#ifndef EMBER_ECHO_H
#define EMBER_ECHO_H

#include <stddef.h>

#include "completion.h"
#include "score.h"

/*
 * Scores the request's prompt on the session (the caller holds the engine) and formats the whole
 * JSON answer: object "text_completion" with `id`, `created`, the model's name, one choice, usage
 * and the engine's timings. c must be a parsed OpenAI request with echo set (n_gen 0 or 1, logprobs
 * within the caps, see completion.h). On success *out is a NUL-terminated buffer the caller frees
 * with free() and *out_len its length; else EMBER_ENOMEM or the backend's error, message set.
 */
int ember_echo_answer(char **out, size_t *out_len, struct ember_session *session, struct ember_scorer *scorer,
                      const struct ember_completion *c, const char *id, long long created);

#endif

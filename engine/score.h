/*
 * score.h - teacher-forced scoring of a prompt: the prompt runs through the model in chunks from
 * an empty cache with logits for every row, and for each scored position p (the distribution of
 * the token after prompt[0..p]) the caller gets the logits row, its log-sum-exp and the top-k ids.
 * The stdio server's score op and the HTTP server's echo + logprobs answer both format from it, so
 * the two APIs report the same numbers for the same prompt.
 */
#ifndef EMBER_SCORE_H
#define EMBER_SCORE_H

#include <stdint.h>

#include "session.h"

#define EMBER_SCORE_CHUNK 64 /* positions per forward call (bounds the logits buffer) */

/* Scratch for scoring one prompt at a time: [EMBER_SCORE_CHUNK][n_vocab] logits and a top-k heap. */
struct ember_scorer {
	int n_vocab;
	float *logits;
	int32_t *heap;
};

/* One scored position. Everything is borrowed for the duration of the callback only. */
struct ember_score_position {
	int pos;               /* p: the distribution of the token after prompt[0..p] */
	const float *logits;   /* [n_vocab] raw logits; log-prob of id = logits[id] - lse */
	double lse;            /* log(sum(exp(logits))) computed in double */
	const int32_t *top;    /* [top_k] ids, best first (ties: lower id first) */
	int top_k;
};

/* Called for every scored position in order; a non-zero return stops the scoring and is returned
 * by ember_score_prompt (the callback sets the error message). */
typedef int (*ember_score_fn)(void *user, const struct ember_score_position *position);

/* Allocates the scratch for the session's vocabulary. 0, or EMBER_ENOMEM (scorer left empty).
 * Release with ember_scorer_clear. */
int ember_scorer_init(struct ember_scorer *scorer, const struct ember_session *session);
/* Frees the scratch; accepts a zeroed struct. */
void ember_scorer_clear(struct ember_scorer *scorer);

/*
 * Scores positions first .. n_prompt-1 of prompt (n_prompt in [1, n_ctx], 0 <= first < n_prompt,
 * top_k in [0, n_vocab]): forward calls over the whole prompt from position 0 (the session's KV
 * cache is overwritten), logits only for the chunks that hold scored positions, fn per position.
 * 0, the backend's error (negative, message set), or fn's non-zero return.
 */
int ember_score_prompt(struct ember_scorer *scorer, struct ember_session *session, const int32_t *prompt,
                       int n_prompt, int first, int top_k, ember_score_fn fn, void *user);

#endif

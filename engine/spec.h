/*
 * spec.h - greedy speculative decoding over any backend with the draft ops (backend.h): the
 * DFlash loop of propose (one draft pass), verify (one target forward over the window
 * [last, d1..dk], argmax per row), accept the longest matching prefix plus the target's own token,
 * commit the accepted rows' hidden states to the draft context. With a backend whose window rows
 * are bit-identical to single-token decode steps, the tokens equal plain greedy decode's.
 */
#ifndef EMBER_SPEC_H
#define EMBER_SPEC_H

#include <stdint.h>

#include "backend.h"
#include "draft.h"

struct ember_spec_stats {
	int target_steps;         /* target forward passes of the decode loop (verify windows) */
	int drafted;              /* proposals made */
	int accepted;             /* proposals accepted */
	double accept_mean;       /* tau = (tokens - 1) / target_steps, bonus included; 0 when no step ran */
	double prefill_ms, draft_ms, verify_ms, commit_ms, total_ms; /* draft: proposals; commit: draft context */
};

/* 1 when `ops` has the three draft ops. */
int ember_spec_supported(const struct ember_backend_ops *ops);

/* EMBER_SPEC_DEPTH (proposals per step, 1..block_size-1; default block_size - 1) into *out, or
 * EMBER_ERROR naming the variable when it is set to anything else. */
int ember_spec_depth_from_env(int block_size, int *out);

/* One speculative generation in progress, for callers that hand out tokens as they come (the HTTP
 * server streams each step's tokens): ember_spec_begin runs the prefill (tokens[0]), each
 * ember_spec_step one propose + verify + accept (1..depth+1 new tokens), ember_spec_finish the
 * totals. Fields are read-only for callers; tokens is the caller's [n_gen] buffer. */
struct ember_spec_run {
	const struct ember_backend_ops *ops;
	struct ember_backend *be;
	int n_gen, depth;
	int32_t *tokens;
	int produced;             /* tokens[0..produced) are final */
	int pos;                  /* the committed position of tokens[produced - 1] */
	double t0;
	struct ember_spec_stats stats;
};

/* Checks the arguments (as ember_spec_generate) and runs the prefill: 0 with r->produced 1, or an
 * error. Nothing to free. */
int ember_spec_begin(struct ember_spec_run *r, const struct ember_backend_ops *ops, struct ember_backend *be,
                     const struct ember_draft *draft, const int32_t *prompt, int n_prompt, int n_gen, int depth,
                     int32_t *out_tokens);
/* One step (r->produced < r->n_gen). 0, or an error after which the run cannot continue. */
int ember_spec_step(struct ember_spec_run *r);
/* accept_mean and total_ms of r->stats. */
void ember_spec_finish(struct ember_spec_run *r);

/* Greedy generation of n_gen tokens after `prompt` from an empty cache, speculatively: prefill,
 * then steps of up to `depth` proposals. The backend must have the draft attached (draft_attach)
 * and capture its target layers; n_prompt + n_gen must fit the backend's context. on_first (may
 * be NULL) is called once the first token is known. out_tokens: [n_gen], caller's. */
int ember_spec_generate(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *draft,
                        const int32_t *prompt, int n_prompt, int n_gen, int depth, int32_t *out_tokens,
                        struct ember_spec_stats *stats, void (*on_first)(void *payload), void *payload);

#endif

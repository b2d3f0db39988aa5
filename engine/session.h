/*
 * session.h - a loaded model ready to answer requests: what `ember serve --stdio` (serve.c) and
 * `ember serve --http` (serve_http.c) share. A session owns the model, the backend and the
 * optional DFlash draft; it checks token-id arrays from untrusted requests, and runs greedy
 * generation from an empty cache one token at a time (ember_session_step: the first call is the
 * prefill, each later one a decode step), so a server can send every token as it is produced, or
 * the remaining tokens in one backend loop (ember_session_rest) when nobody watches them.
 */
#ifndef EMBER_SESSION_H
#define EMBER_SESSION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "draft.h"
#include "model.h"
#include "spec.h"

#define EMBER_SESSION_DEFAULT_CTX 4096 /* KV positions when n_ctx is 0 (capped by the model) */

struct ember_session_config {
	const char *model_path;
	const char *draft_path;  /* a DFlash draft (draft.h), or NULL */
	const char *backend;     /* "cpu", "cuda" or NULL for the default */
	int n_threads;           /* 0 = all cores */
	int n_ctx;               /* 0 = min(context_length, EMBER_SESSION_DEFAULT_CTX) */
	int max_batch;           /* 0 = backend default */
	int token_delay_us;      /* fault injection for harness tests: sleep after each decode step; 0 = off */
	int slow_prefill_pm;     /* fault injection for experiments: the prefill takes (1000 + N) / 1000 of its
	                          * own time (a busy wait of N/1000 x the pass's time, inside the timed region);
	                          * 0 = EMBER_SLOW_PREFILL_PM */
	int slow_decode_pm;      /* the same for the decode steps; 0 = EMBER_SLOW_DECODE_PM */
};

/* Defaults of the slowdown injection, per mille (0 = none). An experiment branch that changes one
 * of them is an engine made that much slower at every context (ci/gpu-experiments.sh). */
#define EMBER_SLOW_PREFILL_PM 0
#define EMBER_SLOW_DECODE_PM 0

/* Read-only for callers; every pointer is owned by the session. */
struct ember_session {
	struct ember_model *model;
	const struct ember_backend_ops *ops;
	struct ember_backend *be;
	struct ember_draft *draft;  /* NULL without a draft */
	int spec_depth;             /* proposals per speculative step (EMBER_SPEC_DEPTH) */
	int n_ctx;
	int token_delay_us;
	int slow_prefill_pm, slow_decode_pm; /* the injected slowdowns in effect (config or default) */
};

/* One greedy generation in progress (ember_session_gen_init fills it). */
struct ember_session_gen {
	const int32_t *prompt;      /* borrowed from the caller for the generation's lifetime */
	int n_prompt, n_gen;
	int32_t *tokens;            /* [n_gen], the caller's buffer */
	int n_done;                 /* tokens produced so far */
	double prefill_ms;          /* the prompt pass (it yields the first token) */
	double decode_ms;           /* the decode steps after it, delay included, callbacks excluded */
	double injected_ms;         /* of prefill_ms + decode_ms, the busy waits of the slowdown injection */
	int spec;                   /* 1: speculative (ember_session_gen_spec); a step may add several tokens */
	struct ember_spec_run run;  /* the speculative loop's state and stats (spec only) */
};

/* Loads the model (and draft), selects and creates the backend. On success *out is owned by the
 * caller and freed with ember_session_free; on failure a negative ember error with its message. */
int ember_session_open(struct ember_session **out, const struct ember_session_config *config);
void ember_session_free(struct ember_session *session);

/* Reads the JSON array `arr` of token ids (each in [0, n_vocab), at most max_len of them; `field`
 * and `limit_name` word the messages). On success *out is a new buffer the caller frees (also when
 * empty) and *n_out its length; else EMBER_EFORMAT / EMBER_ENOMEM with a message for the client. */
int ember_session_read_tokens(const struct ember_session *session, const json_t *arr, const char *field,
                              size_t max_len, const char *limit_name, int32_t **out, int *n_out);

/* Checks that a generation of n_gen tokens after n_prompt fits (n_prompt >= 1, n_gen >= 1,
 * n_prompt + n_gen <= n_ctx; `gen_field` names the request's count in the message) and prepares
 * *gen over the caller's prompt and tokens[n_gen] buffers. 0 or EMBER_EFORMAT. */
int ember_session_gen_init(struct ember_session_gen *gen, const struct ember_session *session, const int32_t *prompt,
                           int n_prompt, long long n_gen, const char *gen_field, int32_t *tokens);

/* Makes a prepared generation (before its first step) speculative with `depth` proposals per step
 * (1..block_size-1). 0, or EMBER_EUNSUPPORTED (no draft, or a backend without the draft ops) /
 * EMBER_EFORMAT (depth out of range) with a message for the client. */
int ember_session_gen_spec(struct ember_session_gen *gen, const struct ember_session *session, int depth);

/* Produces tokens[n_done++]: the prefill when n_done is 0, else one decode step; speculatively, the
 * prefill or one propose + verify step, which adds 1..depth+1 tokens (gen->run.stats has the
 * figures, final once n_done == n_gen). 0, or a negative error (the backend's message) after which
 * the generation cannot continue. */
int ember_session_step(struct ember_session *session, struct ember_session_gen *gen);

/* Produces every remaining token in one backend loop (one step at a time when a token delay is
 * set). The prefill must have run (n_done >= 1). 0 or a negative error. */
int ember_session_rest(struct ember_session *session, struct ember_session_gen *gen);

/* CLOCK_MONOTONIC in milliseconds. */
double ember_session_now_ms(void);

#endif

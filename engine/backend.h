/*
 * backend.h - the interface every ember compute backend implements (CPU reference, CUDA).
 * A backend owns its copy of the weights (or borrows the host views), a KV cache for one
 * sequence of up to n_ctx positions, and its scratch buffers. The server drives it: reset the
 * sequence, forward a batch of tokens at consecutive positions, read logits or argmax.
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "model.h"

struct ember_backend;
struct ember_draft;

struct ember_backend_config {
	int n_ctx;        /* KV cache capacity in positions; 0 = min(n_ctx_train, backend default) */
	int n_threads;    /* CPU worker threads; 0 = all online cores */
	int device;       /* CUDA device ordinal */
	int max_batch;    /* largest token batch per forward call (prefill chunk); 0 = backend default */
	/* Hidden-state capture for a DFlash draft: when n_capture > 0, every forward keeps, for each
	 * position it computes, the residual stream after each listed decoder layer (0-based ids, in
	 * this order; HF's hidden_states[id + 1]). Borrowed during create only. 0 = none, no cost.
	 * The CPU backend keeps them for its draft ops; CUDA exposes them through ember_cuda_captured
	 * (kernels/cuda_backend.h). */
	const int *capture_layers;
	int n_capture;
};

struct ember_backend_ops {
	const char *name; /* "cpu", "cuda" */

	/* 1 when this backend can run here (e.g. a CUDA device is present); fills `why` otherwise. */
	int (*available)(char *why, size_t why_len);

	/* Prepares the backend for `model` (uploads weights, allocates KV and scratch). The model must
	 * outlive the backend. On success *out is owned by the caller and released with destroy. */
	int (*create)(struct ember_backend **out, const struct ember_model *model,
	              const struct ember_backend_config *config);

	/* Runs n_tokens tokens at positions [pos, pos + n_tokens) through the model, appending their K/V
	 * to the cache (positions >= pos are overwritten; pos must be <= the current length).
	 * Outputs for the last token only (all_rows = 0) or for every token (all_rows = 1):
	 *   logits: NULL, or [rows][n_vocab] floats written by the backend;
	 *   argmax: NULL, or [rows] token ids (greedy choice, lowest id on ties).
	 * n_tokens may exceed max_batch: the backend chunks internally. */
	int (*forward)(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos,
	               int all_rows, float *logits, int32_t *argmax);

	/* Optional fast greedy loop (NULL if absent): starting from `token` at position `pos`, produces
	 * n_steps tokens greedily into out_tokens (out_tokens[i] is the argmax after feeding the previous
	 * one). Must give exactly the tokens repeated forward(..., argmax) calls would give. */
	int (*decode_greedy)(struct ember_backend *be, int32_t token, int pos, int n_steps,
	                     int32_t *out_tokens);

	/* ---- DFlash speculative decoding (optional: NULL when the backend lacks it) ----
	 * The draft's context is a K/V cache over committed positions [0, ctx_len), built from the
	 * hidden states the backend captured (config.capture_layers = draft->target_layers). */

	/* Prepares the draft (uploads it, allocates its context K/V for n_ctx positions and scratch).
	 * The draft must outlive the backend and be the one whose target_layers were the capture
	 * layers at create. At most one draft per backend. */
	int (*draft_attach)(struct ember_backend *be, const struct ember_draft *draft);

	/* Rows [0, n_rows) of the last forward call's captured hidden states (that call started at
	 * `pos`) become draft context at positions [pos, pos + n_rows). The context is first cut to
	 * pos (pos <= current context length): that is the rollback after a rejection. */
	int (*draft_commit)(struct ember_backend *be, int pos, int n_rows);

	/* Optional (NULL: every row): how many of a forward call's last rows its capture keeps for
	 * draft_commit (CUDA: the prefill chunk). A caller with a longer prompt runs it as forward calls
	 * of at most this many tokens and commits each (engine/spec.c). */
	int (*capture_rows)(struct ember_backend *be);

	/* One draft pass over the block [last_token, MASK x (B-1)] at positions [pos, pos + B), with
	 * context [0, pos) (pos must equal the context length): out[i] = argmax of block slot i + 1
	 * for i < depth (1 <= depth <= B - 1). logits: NULL, or [depth][n_vocab] floats of the same
	 * slots (for tests against a reference). */
	int (*draft_propose)(struct ember_backend *be, int32_t last_token, int pos, int depth, int32_t *out,
	                     float *logits);

	/* Borrowed description of the device, e.g. "NVIDIA H200 (sm_90, 139 GiB)" or "cpu x16". */
	const char *(*device_name)(struct ember_backend *be);

	void (*destroy)(struct ember_backend *be);
};

/* Backend registry: the ops table for `name` ("cpu", "cuda"), or NULL if not built in. */
const struct ember_backend_ops *ember_backend_find(const char *name);
/* The default: "cuda" when built and available, else "cpu". */
const struct ember_backend_ops *ember_backend_default(void);
/* The backend a user asked for: `name`, checked to be built in and available here, or the default
 * when name is NULL. 0 and *out set (static table), or EMBER_EUNSUPPORTED with a message naming
 * the backend and why. */
int ember_backend_select(const struct ember_backend_ops **out, const char *name);
/* n_steps greedy tokens from `token` at `pos` (see decode_greedy): the backend's own loop when it
 * has one, else one forward(..., argmax) call per token. */
int ember_backend_decode(const struct ember_backend_ops *ops, struct ember_backend *be, int32_t token, int pos,
                         int n_steps, int32_t *out_tokens);

/* Defined by each backend's source file. ember_backend_cuda_ops exists only when EMBER_HAVE_CUDA. */
extern const struct ember_backend_ops ember_backend_cpu_ops;
extern const struct ember_backend_ops ember_backend_cuda_ops;

#endif

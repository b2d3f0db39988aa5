/*
 * spec.c - the backend-agnostic DFlash speculative loop (spec.h). Positions: after a step the
 * committed sequence is prompt + produced tokens but the newest token ("last", the target's own
 * choice) has not been through the target yet; it sits at position pos and opens the next block.
 * KV rollback is free: the next forward starts at the committed position and overwrites the
 * rejected rows; the draft context is cut by draft_commit.
 */
#include "spec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int ember_spec_supported(const struct ember_backend_ops *ops)
{
	return ops->draft_attach && ops->draft_commit && ops->draft_propose;
}

int ember_spec_depth_from_env(int block_size, int *out)
{
	const char *v = getenv("EMBER_SPEC_DEPTH");
	if (!v || !*v) {
		*out = block_size - 1;
		return 0;
	}
	char *end;
	long d = strtol(v, &end, 10);
	if (*end || d < 1 || d > block_size - 1)
		return ember_error_set(EMBER_ERROR, "EMBER_SPEC_DEPTH='%.32s' must be an integer in 1..%d (block size %d - 1)",
		                       v, block_size - 1, block_size);
	*out = (int)d;
	return 0;
}

int ember_spec_begin(struct ember_spec_run *r, const struct ember_backend_ops *ops, struct ember_backend *be,
                     const struct ember_draft *draft, const int32_t *prompt, int n_prompt, int n_gen, int depth,
                     int32_t *out_tokens)
{
	memset(r, 0, sizeof(*r));
	if (!ember_spec_supported(ops))
		return ember_error_set(EMBER_EUNSUPPORTED, "backend %s has no speculative decoding", ops->name);
	if (depth < 1 || depth > draft->block_size - 1 || n_prompt < 1 || n_gen < 1)
		return ember_error_set(EMBER_ERROR, "spec: depth %d (1..%d), prompt %d and n_gen %d must be positive", depth,
		                       draft->block_size - 1, n_prompt, n_gen);
	r->ops = ops;
	r->be = be;
	r->n_gen = n_gen;
	r->depth = depth;
	r->tokens = out_tokens;
	r->t0 = now_ms();
	/* The prompt in pieces the capture holds (one piece on a backend that keeps every row), each
	 * committed to the draft context after its forward; the last piece's argmax is the first token.
	 * prefill_ms covers the forwards and the commits between them, not the last commit. */
	const int cap = ops->capture_rows ? ops->capture_rows(be) : 0, piece = cap > 0 ? cap : n_prompt;
	for (int p = 0; p < n_prompt; p += piece) {
		const int n = n_prompt - p < piece ? n_prompt - p : piece;
		if (ops->forward(be, prompt + p, n, p, 0, NULL, &out_tokens[0]))
			return ember_error_wrap(EMBER_ERROR, "prefill");
		if (p + n == n_prompt)
			r->stats.prefill_ms = now_ms() - r->t0;
		if (n_gen > 1 && ops->draft_commit(be, p, n))
			return EMBER_ERROR;
	}
	r->produced = 1;
	r->pos = n_prompt;
	return 0;
}

int ember_spec_step(struct ember_spec_run *r)
{
	int32_t window[EMBER_DRAFT_MAX_BLOCK], target[EMBER_DRAFT_MAX_BLOCK];
	const struct ember_backend_ops *ops = r->ops;
	struct ember_spec_stats *st = &r->stats;
	if (r->produced < 1 || r->produced >= r->n_gen)
		return ember_error_set(EMBER_ERROR, "spec: step after %d of %d tokens", r->produced, r->n_gen);
	/* a step yields at most k + 1 tokens: never propose past the request */
	const int k = r->n_gen - r->produced - 1 < r->depth ? r->n_gen - r->produced - 1 : r->depth;
	window[0] = r->tokens[r->produced - 1];
	double t1 = now_ms();
	if (k > 0) {
		if (ops->draft_propose(r->be, window[0], r->pos, k, window + 1, NULL))
			return ember_error_wrap(EMBER_ERROR, "draft at position %d", r->pos);
		st->drafted += k;
	}
	double t2 = now_ms();
	if (ops->forward(r->be, window, k + 1, r->pos, 1, NULL, target))
		return ember_error_wrap(EMBER_ERROR, "verify at position %d", r->pos);
	st->draft_ms += t2 - t1;
	st->verify_ms += now_ms() - t2;
	st->target_steps++;
	int acc = 0;
	while (acc < k && window[acc + 1] == target[acc])
		acc++;
	memcpy(r->tokens + r->produced, target, (size_t)(acc + 1) * sizeof(*target)); /* accepted = target's own */
	r->produced += acc + 1;
	st->accepted += acc;
	double t3 = now_ms();
	if (r->produced < r->n_gen && ops->draft_commit(r->be, r->pos, acc + 1))
		return EMBER_ERROR;
	st->commit_ms += now_ms() - t3;
	r->pos += acc + 1;
	return 0;
}

void ember_spec_finish(struct ember_spec_run *r)
{
	r->stats.accept_mean = r->stats.target_steps ? (double)(r->produced - 1) / r->stats.target_steps : 0.0;
	r->stats.total_ms = now_ms() - r->t0;
}

int ember_spec_generate(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *draft,
                        const int32_t *prompt, int n_prompt, int n_gen, int depth, int32_t *out_tokens,
                        struct ember_spec_stats *stats, void (*on_first)(void *payload), void *payload)
{
	struct ember_spec_run r;
	if (ember_spec_begin(&r, ops, be, draft, prompt, n_prompt, n_gen, depth, out_tokens))
		return EMBER_ERROR;
	if (on_first)
		on_first(payload);
	while (r.produced < n_gen)
		if (ember_spec_step(&r))
			return EMBER_ERROR;
	ember_spec_finish(&r);
	if (stats)
		*stats = r.stats;
	return 0;
}

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

int ember_spec_generate(const struct ember_backend_ops *ops, struct ember_backend *be, const struct ember_draft *draft,
                        const int32_t *prompt, int n_prompt, int n_gen, int depth, int32_t *out_tokens,
                        struct ember_spec_stats *stats, void (*on_first)(void *payload), void *payload)
{
	int32_t window[EMBER_DRAFT_MAX_BLOCK], target[EMBER_DRAFT_MAX_BLOCK];
	struct ember_spec_stats st = {0};
	if (!ember_spec_supported(ops))
		return ember_error_set(EMBER_EUNSUPPORTED, "backend %s has no speculative decoding", ops->name);
	if (depth < 1 || depth > draft->block_size - 1 || n_prompt < 1 || n_gen < 1)
		return ember_error_set(EMBER_ERROR, "spec: depth %d (1..%d), prompt %d and n_gen %d must be positive", depth,
		                       draft->block_size - 1, n_prompt, n_gen);
	const double t0 = now_ms();
	if (ops->forward(be, prompt, n_prompt, 0, 0, NULL, &out_tokens[0]))
		return ember_error_wrap(EMBER_ERROR, "prefill");
	st.prefill_ms = now_ms() - t0;
	if (on_first)
		on_first(payload);
	int produced = 1, pos = n_prompt;
	if (n_gen > 1 && ops->draft_commit(be, 0, n_prompt))
		return EMBER_ERROR;
	while (produced < n_gen) {
		/* a step yields at most k + 1 tokens: never propose past the request */
		const int k = n_gen - produced - 1 < depth ? n_gen - produced - 1 : depth;
		window[0] = out_tokens[produced - 1];
		double t1 = now_ms();
		if (k > 0) {
			if (ops->draft_propose(be, window[0], pos, k, window + 1, NULL))
				return ember_error_wrap(EMBER_ERROR, "draft at position %d", pos);
			st.drafted += k;
		}
		double t2 = now_ms();
		if (ops->forward(be, window, k + 1, pos, 1, NULL, target))
			return ember_error_wrap(EMBER_ERROR, "verify at position %d", pos);
		st.draft_ms += t2 - t1;
		st.verify_ms += now_ms() - t2;
		st.target_steps++;
		int acc = 0;
		while (acc < k && window[acc + 1] == target[acc])
			acc++;
		memcpy(out_tokens + produced, target, (size_t)(acc + 1) * sizeof(*target)); /* accepted = target's own */
		produced += acc + 1;
		st.accepted += acc;
		double t3 = now_ms();
		if (produced < n_gen && ops->draft_commit(be, pos, acc + 1))
			return EMBER_ERROR;
		st.commit_ms += now_ms() - t3;
		pos += acc + 1;
	}
	st.accept_mean = st.target_steps ? (double)(produced - 1) / st.target_steps : 0.0;
	st.total_ms = now_ms() - t0;
	if (stats)
		*stats = st;
	return 0;
}

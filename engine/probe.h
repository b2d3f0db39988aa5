/*
 * probe.h - measurements on a loaded model that the `ember` tools print: next-token distribution
 * statistics (how peaked a model is, e.g. a synthetic one from `ember gen`), deterministic
 * pseudo-random prompts, and a prefill/decode timing run of a backend.
 */
#ifndef EMBER_PROBE_H
#define EMBER_PROBE_H

#include <stdint.h>

#include "backend.h"

struct ember_probe_stats {
	int n_pos;
	double top1_mean, top1_min, top1_max;  /* probability of the argmax token */
	double entropy_mean;                    /* nats */
	double logit_std_mean;                  /* spread of the logits across the vocabulary */
	double repeat_frac;                     /* positions whose argmax is the input token itself */
	int distinct_top1;                      /* different argmax tokens over all positions */
};

/* Statistics of n_pos rows of logits ([n_pos][n_vocab]); tokens[p] is the input at position p. */
int ember_probe_stats(struct ember_probe_stats *out, const float *logits, int n_pos, int n_vocab,
                      const int32_t *tokens);

/* n token ids in [0, n_vocab), a fixed function of seed. */
void ember_probe_random_tokens(int32_t *out, int n, int n_vocab, uint64_t seed);

struct ember_bench_result {
	double prefill_ms, decode_ms;
	double prefill_tps;    /* n_prompt / prefill_ms */
	double decode_tps;     /* (n_gen - 1) / decode_ms: the first token comes from the prefill */
};

/* One generate-like run from an empty cache: prefill of the prompt (first token), then n_gen - 1
 * greedy decode steps. */
int ember_probe_bench(struct ember_bench_result *out, const struct ember_backend_ops *ops, struct ember_backend *be,
                      const int32_t *prompt, int n_prompt, int n_gen);

#endif

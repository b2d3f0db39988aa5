/*
 * probe.c - distribution statistics, seeded prompts and a timing run (see probe.h).
 */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

int ember_probe_stats(struct ember_probe_stats *out, const float *logits, int n_pos, int n_vocab,
                      const int32_t *tokens)
{
	struct ember_probe_stats st = {.n_pos = n_pos, .top1_min = 1.0};
	uint8_t *seen = calloc((size_t)n_vocab, 1);
	if (!seen)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	for (int p = 0; p < n_pos; p++) {
		const float *l = logits + (size_t)p * n_vocab;
		int best = 0;
		double sum = 0, mean = 0, sq = 0, ent = 0;
		for (int i = 1; i < n_vocab; i++)
			if (l[i] > l[best])
				best = i;
		for (int i = 0; i < n_vocab; i++) {
			sum += exp((double)l[i] - l[best]);
			mean += l[i];
		}
		mean /= n_vocab;
		for (int i = 0; i < n_vocab; i++) {
			double lp = (double)l[i] - l[best] - log(sum);
			ent -= exp(lp) * lp;
			sq += ((double)l[i] - mean) * ((double)l[i] - mean);
		}
		double top1 = 1.0 / sum;
		st.top1_mean += top1;
		st.top1_min = top1 < st.top1_min ? top1 : st.top1_min;
		st.top1_max = top1 > st.top1_max ? top1 : st.top1_max;
		st.entropy_mean += ent;
		st.logit_std_mean += sqrt(sq / n_vocab);
		st.repeat_frac += tokens && tokens[p] == best;
		if (!seen[best]++)
			st.distinct_top1++;
	}
	if (n_pos > 0) {
		st.top1_mean /= n_pos;
		st.entropy_mean /= n_pos;
		st.logit_std_mean /= n_pos;
		st.repeat_frac /= n_pos;
	}
	free(seen);
	*out = st;
	return 0;
}

void ember_probe_random_tokens(int32_t *out, int n, int n_vocab, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	for (int i = 0; i < n; i++) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		out[i] = (int32_t)(z % (uint64_t)n_vocab);
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int ember_probe_bench(struct ember_bench_result *out, const struct ember_backend_ops *ops, struct ember_backend *be,
                      const int32_t *prompt, int n_prompt, int n_gen)
{
	int32_t *gen = malloc((size_t)(n_gen > 0 ? n_gen : 1) * sizeof(*gen));
	int rc = 0;
	if (!gen)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	double t0 = now_ms();
	rc = ops->forward(be, prompt, n_prompt, 0, 0, NULL, gen);
	double t1 = now_ms();
	if (!rc && n_gen > 1)
		rc = ember_backend_decode(ops, be, gen[0], n_prompt, n_gen - 1, gen + 1);
	double t2 = now_ms();
	free(gen);
	if (rc)
		return rc;
	out->prefill_ms = t1 - t0;
	out->decode_ms = t2 - t1;
	out->prefill_tps = n_prompt / ((t1 - t0) / 1e3);
	out->decode_tps = n_gen > 1 ? (n_gen - 1) / ((t2 - t1) / 1e3) : 0.0;
	return 0;
}

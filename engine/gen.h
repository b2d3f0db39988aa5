/*
 * gen.h - synthetic Qwen3 models: writes a valid GGUF with the real shapes of Qwen3-0.6B..8B (or
 * CI's `tiny`), seeded weights and a real quantization mix. Weights depend only on (seed, tensor
 * name, row, column), never on the quant type or the thread count, so an f16 file and a q4_k_m
 * file of one seed are the same model at two precisions.
 *
 * How the weights are scaled (so next-token distributions are peaked but not chaotic):
 *   token_embd, output   N(0, 1)
 *   attn_q/k/v, ffn_gate/up   N(0, 1/fan_in)
 *   attn_output, ffn_down     N(0, 2/(fan_in n_layer))   (residual writes shrink with depth)
 *   attn_norm, ffn_norm  1 + 0.05 N(0,1)        attn_q_norm, attn_k_norm  0.8 + 0.05 N(0,1)
 *   output_norm          +-gamma (1 + 0.05 N(0,1)) with random signs, gamma = 7 / sqrt(n_embd)
 * After the final norm the hidden state has unit RMS, so each logit is ~N(0, 7^2) across the
 * vocabulary. Measured with `ember info FILE --probe 256` (seed 1): tiny q8_0 top-1 probability
 * 0.63 on average, entropy 1.2 nats; qwen3-0.6b q8_0 0.54 and 1.8 nats; argmax = input token at
 * about 1% of positions. The embedding is as large as the sum of the layer writes, so predictions
 * depend on the context (in a numpy study of this recipe the last token's argmax changed with the
 * prefix at 50-60% of positions) without being chaotic: 0.5% noise on every activation kept ~98%
 * of the argmaxes, and on tiny the quantized files keep this top-1 share of the f32 model's
 * argmaxes: f16 100%, bf16 99%, q8_0 97%, q6_k 94%, q4_k_m 78%. The random signs of output_norm
 * stop a tied head from simply repeating the input token. Normals are Irwin-Hall sums of four
 * uniforms (cheap, bounded at 3.5 sd).
 */
#ifndef EMBER_GEN_H
#define EMBER_GEN_H

#include <stdint.h>

struct ember_gen_shape {
	const char *name;
	int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
	int tied;                 /* 1: no output.weight, token_embd is the head */
};

struct ember_gen_config {
	const char *shape;        /* "tiny", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b" */
	const char *quant;        /* "f16", "bf16", "q8_0", "q4_k_m", "q6_k" (also "f32" for tests) */
	uint64_t seed;
	int n_threads;            /* 0 = all online cores */
	/* Optional progress report, called from one thread now and then. */
	void (*progress)(void *payload, uint64_t bytes_done, uint64_t bytes_total);
	void *payload;
};

/* The named shape, or NULL. Borrowed static data. */
const struct ember_gen_shape *ember_gen_find_shape(const char *name);

/* Writes the model to `path` (created or truncated; removed again on failure). */
int ember_gen_write(const struct ember_gen_config *config, const char *path);

#define EMBER_GEN_MAX_BLOCK 64

/* An untrained (seeded) DFlash draft for a target shape: the target's d, heads, head_dim and ffn,
 * n_layer layers, target layers spaced evenly (ember_draft_default_layers), mask token = the
 * last vocabulary id, no token_embd/output (shared from the target). Weights follow the recipe
 * above (fc and the layers as Qwen3 projections, output_norm as the target's), from a seed
 * derived from `seed` so a draft and a target of one seed differ. */
struct ember_gen_draft_config {
	const char *target_shape; /* a shape name of ember_gen_find_shape */
	int n_layer;              /* draft decoder layers */
	int n_target_layers;      /* target layers read by fc; 0 = n_layer (as the published drafts) */
	int block_size;           /* 2..EMBER_GEN_MAX_BLOCK */
	const char *quant;        /* NULL = "f16" */
	uint64_t seed;
	int n_threads;
};

/* Writes the draft to `path` (created or truncated; removed again on failure). */
int ember_gen_draft_write(const struct ember_gen_draft_config *config, const char *path);

/* The f32 weight value at (row, col) of tensor `name` for `seed`, before quantization: what the
 * generator stores (tests use it to check files). */
float ember_gen_weight(uint64_t seed, const char *name, const struct ember_gen_shape *shape, int64_t row, int64_t col);

#endif

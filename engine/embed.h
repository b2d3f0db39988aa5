/*
 * embed.h - a small Qwen3 model (and its DFlash draft) written at a larger shape with the same
 * function: the real shapes' kernels timed on a model whose greedy output, and so the accept length
 * of its draft, are those of a trained small pair (ember gen --embed).
 *
 * The small model's values sit in the first rows/columns of every big tensor and everything else
 * is zero, so the residual stream keeps zeros in the extra dimensions and the extra layers,
 * heads and FFN units add nothing. What the bigger shape changes is compensated exactly:
 *   - RMSNorm over D instead of d: norm weights x sqrt(d/D), rms epsilon x d/D;
 *   - per-head q/k RMSNorm over HD instead of hd, and the 1/sqrt(HD) attention scale: k_norm
 *     weights x sqrt(hd/HD) (q_norm unchanged);
 *   - NEOX RoPE pairs (i, i + hd/2) become (i, i + HD/2) with theta^(HD/hd), which keeps every
 *     pair's frequency;
 *   - GQA groups of another size: a small KV head is copied into as many big KV heads as its query
 *     heads need;
 *   - vocabulary rows past the small one are zero (their logit is 0: a trained model's best logit
 *     is far above that; a token id outside the small vocabulary in the output would show it).
 * With Q8_0 on both sides and d, hd/2 and n_ff multiples of 32 the quantized blocks are the small
 * file's blocks, so the weights are bit-identical; sums differ only by the order of their zero
 * terms and the epsilon of the q/k norms (d/D instead of hd/HD), so greedy tokens agree except at
 * near-ties. Other quant types re-quantize the values (a different, nearby model: measure its tau).
 * The context length stays the small model's (positions it was trained on).
 */
#ifndef EMBER_EMBED_H
#define EMBER_EMBED_H

#include <stdint.h>

struct ember_embed_config {
	const char *source;        /* the small target GGUF (qwen3) */
	const char *source_draft;  /* its DFlash draft, or NULL: with draft_out, written embedded too */
	const char *shape;         /* the big shape (ember_gen_find_shape), e.g. "qwen3-0.6b" */
	const char *quant;         /* "q8_0", "f16", "q4_k_m", ... */
	int n_threads;             /* 0 = all online cores */
	void (*progress)(void *payload, uint64_t bytes_done, uint64_t bytes_total);
	void *payload;
};

/* Writes the embedded target to `path` (NULL: the draft only) and, with config->source_draft, the
 * embedded draft to `draft_path` (each created or truncated, removed again on failure). Errors name what does not
 * fit (a smaller shape, a KV layout the big heads cannot hold, a tied big head for an untied
 * small one). */
int ember_embed_write(const struct ember_embed_config *config, const char *path, const char *draft_path);

#endif

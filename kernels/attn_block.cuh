/*
 * attn_block.cuh - attention of a DFlash draft block: every one of n_tok block queries over the
 * context and the whole block (keys 0..pos + n_tok - 1, no causal mask), the position read from
 * device memory so one captured graph serves every context length. Tensor cores, the K/V of each
 * KV head read once for all the query rows that share it (the block's tokens times the GQA group),
 * the keys split over CTAs and the splits merged by a second kernel.
 */
#ifndef EMBER_KERNELS_ATTN_BLOCK_CUH
#define EMBER_KERNELS_ATTN_BLOCK_CUH

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ember_block_attn_args {
	const void *q;       /* fp16 [n_tok][n_head][D], normed and rotated (not scaled) */
	const void *k_cache; /* this layer's fp16 K [n_kv][n_ctx][D], positions 0..pos+n_tok-1 filled */
	const void *v_cache; /* fp16 V, same layout */
	void *out;           /* fp16 [n_tok][n_head][D] */
	const int32_t *pos;  /* device: the block's first position (pos + n_tok <= n_ctx) */
	int n_tok, n_head, n_kv, n_ctx;
	int head_dim;        /* 64 or 128 */
	int n_split;         /* key splits per KV head and row block (the grid; the same at every pos) */
	float *part_o;       /* scratch, ember_attn_block_scratch floats */
	float *part_ml;      /* scratch, ember_attn_block_scratch(.., ml=1) floats */
};

/* Floats of part_o (ml == 0) or part_ml (ml == 1) for these dimensions. */
size_t ember_attn_block_scratch(int n_tok, int n_head, int n_kv, int head_dim, int n_split, int ml);

/* Launches the attention and the merge of its splits; returns 0 or a negative ember error
 * (EMBER_EUNSUPPORTED for a head_dim other than 64 or 128). */
int ember_attn_block(const struct ember_block_attn_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

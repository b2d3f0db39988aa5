/*
 * attn_prefill.cuh - causal flash attention for a chunk of prompt tokens over the fp16 KV cache
 * (tensor cores, mma.sync m16n8k16, FlashAttention-2 style online softmax).
 */
#ifndef EMBER_KERNELS_ATTN_PREFILL_CUH
#define EMBER_KERNELS_ATTN_PREFILL_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ember_fa_args {
	const void *q;      /* fp16 [n_tokens][n_head][D], normed and rotated (not scaled) */
	const void *k_cache; /* this layer's fp16 K [n_kv][n_ctx][D], positions 0..pos0+n_tokens-1 filled */
	const void *v_cache; /* fp16 V, same layout */
	void *out;          /* fp16 [n_tokens][n_head][D] */
	int n_tokens;       /* query tokens; token t is at position pos0 + t and sees keys 0..pos0+t */
	int pos0;
	int n_head, n_kv, n_ctx;
	int head_dim;       /* 64 or 128 */
};

/* Launches the attention; returns 0 or a negative ember error. */
int ember_attn_prefill(const struct ember_fa_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/*
 * attn_decode.cuh - attention for one new token over the fp16 KV cache, as split-KV
 * "flash-decoding": CTA (kv head, split) reads its slice of that head's keys and values once for
 * all the query heads that share it (GQA), and the last CTA of a head to finish merges the splits.
 * The decode variant also does the per-head q/k RMSNorm, NEOX RoPE and the append of the new
 * K/V to the cache, so one launch replaces four. A multi-token variant (one split per query token,
 * Q prepared by ember_qk_norm_rope_rows) is the prefill fallback and the flash-attention reference.
 */
#ifndef EMBER_KERNELS_ATTN_DECODE_CUH
#define EMBER_KERNELS_ATTN_DECODE_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ember_decode_state;

struct ember_attn_args {
	int head_dim;          /* D: 64 or 128 */
	int n_head, n_kv;      /* query heads and KV heads (n_head % n_kv == 0, group <= 8) */
	int n_ctx;             /* cache capacity (positions) */
	void *k_cache;         /* this layer's fp16 K [n_kv][n_ctx][D] (device) */
	void *v_cache;         /* this layer's fp16 V [n_kv][n_ctx][D] */
	void *out;             /* fp16 [n_tokens][n_head][D] */

	/* decode (n_tokens == 0): raw fp32 projections of one token, position from state->pos */
	const float *q, *k, *v;            /* [n_head*D], [n_kv*D], [n_kv*D] */
	const float *q_norm, *k_norm;      /* [D] per-head RMSNorm weights */
	float eps;
	const float *rope_cos, *rope_sin;  /* [n_ctx][D/2] tables (fp32 of float64 angles) */
	const struct ember_decode_state *state;
	int n_split;                       /* splits per KV head (grid.y) */
	float *part_o;                     /* [n_kv][n_split][group][D] scratch */
	float *part_ml;                    /* [n_kv][n_split][group][2] scratch */
	uint32_t *counters;                /* [n_kv], zero before the first launch; left zero */
	int lean;                          /* EMBER_ATTN_LEAN, decode only: 0 = the kernel as before; 1 = the
	                                      lower-latency variant (attn_decode.cu): same results up to
	                                      float rounding, splits without keys exit at once and only
	                                      the active ones take a ticket, one active split writes out
	                                      directly, the first loads are issued before q is staged */
	int pdl;                           /* lean decode only: 1 = launch as a programmatic dependent of the
	                                      previous kernel (the QKV GEMV): the CTAs start early, issue
	                                      their first K/V cache loads (written by earlier steps), then
	                                      wait for that kernel before reading q, k, v or any scratch */

	/* multi-token (n_tokens > 0): Q already normed/rotated, fp16 [n_tokens][n_head][D];
	 * token t sits at position pos0 + t and sees keys 0..pos0+t (already in the cache) */
	const void *q_prepped;
	int n_tokens;
	int pos0;

	/* window only (ember_attn_window): 1 = non-causal inside the window (a DFlash draft block) */
	int full;
	int win_shared;                    /* EMBER_WIN_ATTN: 1 = CTAs of 4 window tokens share one staging of
	                                      each K/V round (attn_window.cu), 0 = one CTA per token; the
	                                      same bits either way */
};

/* Launches the attention; returns 0 or a negative ember error. */
int ember_attn_decode(const struct ember_attn_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

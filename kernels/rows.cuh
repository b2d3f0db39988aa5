/*
 * rows.cuh - the row-wise ops of the batched (prefill) path: RMSNorm of the residual rows into
 * fp16 GEMM inputs, q/k RMSNorm + RoPE with the K/V append to the cache, SwiGLU of the gate/up
 * GEMM output and an fp32 -> fp16 cast (the greedy argmax is argmax.cuh). Plain C declarations.
 */
#ifndef EMBER_KERNELS_ROWS_CUH
#define EMBER_KERNELS_ROWS_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t][i] = fp16(x[t][i] / sqrt(mean(x[t]^2) + eps) * w[i]) for t < n_rows, i < n. */
int ember_rmsnorm_rows(void *out_f16, const float *x, const float *w, int n_rows, int n, float eps, cudaStream_t stream);

struct ember_qk_rope_args {
	const float *qkv;        /* [n_tokens][(n_head + 2 n_kv) * D]: q heads, k heads, v heads */
	const float *q_norm, *k_norm;
	float eps;
	const float *rope_cos, *rope_sin; /* [n_ctx][D/2] */
	int n_tokens, pos0, n_head, n_kv, head_dim, n_ctx;
	void *q_out;             /* fp16 [n_tokens][n_head][D] */
	void *k_cache, *v_cache; /* this layer's fp16 [n_kv][n_ctx][D]; rows pos0.. written */
	const int32_t *pos_dev;  /* NULL, or device memory holding pos0 (replaces the field above; the
	                            caller keeps pos0 + n_tokens <= n_ctx): a graph for every position */
};

/* Per-head RMSNorm + NEOX RoPE of q and k, fp16 q out, k/v appended to the cache. */
int ember_qk_norm_rope_rows(const struct ember_qk_rope_args *args, cudaStream_t stream);

/* out[t][i] = fp16(silu(gu[t][i]) * gu[t][n_ff + i]) for t < n_rows, i < n_ff. */
int ember_swiglu_rows(void *out_f16, const float *gu, int n_rows, int n_ff, cudaStream_t stream);

/* out[i] = fp16(x[i]) for i < n (the DFlash draft's captured fp32 hidden states into GEMM input). */
int ember_f16_from_f32(void *out_f16, const float *x, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

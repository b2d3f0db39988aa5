/*
 * rows.cu - row-wise ops of the prefill path (see rows.cuh). Each is one CTA per row (or per
 * token); they are memory-bound and small next to the GEMMs and the attention.
 */
#include "rows.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "common.cuh"
#include "rope.cuh"

static __global__ void rmsnorm_rows_kernel(__half *out, const float *x, const float *w, int n, float eps)
{
	__shared__ float red[32];
	const float *xr = x + (size_t)blockIdx.x * n;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		ss = fmaf(xr[i], xr[i], ss);
	ss = ember_block_sum(ss, red);
	const float scale = 1.0f / sqrtf(ss / (float)n + eps);
	__half *o = out + (size_t)blockIdx.x * n;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		o[i] = __float2half_rn(xr[i] * scale * w[i]);
}

extern "C" int ember_rmsnorm_rows(void *out, const float *x, const float *w, int n_rows, int n, float eps, cudaStream_t stream)
{
	EMBER_REQUIRE(out && x && w && n_rows > 0 && n > 0);
	rmsnorm_rows_kernel<<<n_rows, 256, 0, stream>>>(static_cast<__half *>(out), x, w, n, eps);
	CUDA_CHECK_LAUNCH("rmsnorm_rows_kernel");
	return 0;
}

/* CTA per token, one warp per head: q heads, then k heads, then v heads. */
template <int D>
static __global__ void qk_rope_kernel(const ember_qk_rope_args a)
{
	const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
	const int pos = (a.pos_dev ? *a.pos_dev : a.pos0) + t;
	const int n_heads = a.n_head + 2 * a.n_kv;
	const float *row = a.qkv + (size_t)t * n_heads * D;
	const float *cs = a.rope_cos + (size_t)pos * (D / 2), *sn = a.rope_sin + (size_t)pos * (D / 2);
	for (int hh = warp; hh < n_heads; hh += nwarps) {
		float v[D / 32];
#pragma unroll
		for (int c = 0; c < D / 32; c++)
			v[c] = row[(size_t)hh * D + lane + 32 * c];
		__half *dst;
		if (hh < a.n_head) {
			ember_norm_rope_head<D>(v, a.q_norm, a.eps, cs, sn, lane);
			dst = static_cast<__half *>(a.q_out) + ((size_t)t * a.n_head + hh) * D;
		} else if (hh < a.n_head + a.n_kv) {
			const int h = hh - a.n_head;
			ember_norm_rope_head<D>(v, a.k_norm, a.eps, cs, sn, lane);
			dst = static_cast<__half *>(a.k_cache) + ((size_t)h * a.n_ctx + pos) * D;
		} else {
			const int h = hh - a.n_head - a.n_kv;
			dst = static_cast<__half *>(a.v_cache) + ((size_t)h * a.n_ctx + pos) * D;
		}
#pragma unroll
		for (int c = 0; c < D / 32; c++)
			dst[lane + 32 * c] = __float2half_rn(v[c]);
	}
}

extern "C" int ember_qk_norm_rope_rows(const struct ember_qk_rope_args *a, cudaStream_t stream)
{
	EMBER_REQUIRE(a && a->qkv && a->q_norm && a->k_norm && a->rope_cos && a->rope_sin && a->q_out && a->k_cache && a->v_cache);
	EMBER_REQUIRE(a->n_tokens > 0 && a->pos0 >= 0 && a->pos0 + a->n_tokens <= a->n_ctx);
	switch (a->head_dim) {
	case 64: qk_rope_kernel<64><<<a->n_tokens, 256, 0, stream>>>(*a); break;
	case 128: qk_rope_kernel<128><<<a->n_tokens, 256, 0, stream>>>(*a); break;
	default: return ember_error_set(EMBER_EUNSUPPORTED, "rope: head_dim %d not supported (64, 128)", a->head_dim);
	}
	CUDA_CHECK_LAUNCH("qk_rope_kernel");
	return 0;
}

static __global__ void swiglu_rows_kernel(__half *out, const float *gu, int n_ff)
{
	const float *g = gu + (size_t)blockIdx.x * 2 * n_ff, *u = g + n_ff;
	__half *o = out + (size_t)blockIdx.x * n_ff;
	for (int i = threadIdx.x; i < n_ff; i += blockDim.x) {
		const float x = g[i];
		o[i] = __float2half_rn(x / (1.0f + expf(-x)) * u[i]);
	}
}

extern "C" int ember_swiglu_rows(void *out, const float *gu, int n_rows, int n_ff, cudaStream_t stream)
{
	EMBER_REQUIRE(out && gu && n_rows > 0 && n_ff > 0);
	swiglu_rows_kernel<<<n_rows, 256, 0, stream>>>(static_cast<__half *>(out), gu, n_ff);
	CUDA_CHECK_LAUNCH("swiglu_rows_kernel");
	return 0;
}

static __global__ void f16_from_f32_kernel(__half *out, const float *x, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		out[i] = __float2half_rn(x[i]);
}

extern "C" int ember_f16_from_f32(void *out, const float *x, size_t n, cudaStream_t stream)
{
	EMBER_REQUIRE(out && x && n > 0);
	size_t blocks = (n + 255) / 256;
	if (blocks > 4096)
		blocks = 4096;
	f16_from_f32_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<__half *>(out), x, n);
	CUDA_CHECK_LAUNCH("f16_from_f32_kernel");
	return 0;
}

/*
 * rope.cuh - device helper shared by the attention and prefill kernels: Qwen3's per-head
 * RMSNorm followed by NEOX rotate-half RoPE for one head held by one warp (lane owns dims
 * lane + 32c; dim i pairs with i + D/2, i.e. slot c with slot c + D/64 of the same lane).
 */
#ifndef EMBER_KERNELS_ROPE_CUH
#define EMBER_KERNELS_ROPE_CUH

#include "common.cuh"

template <int D>
static __device__ __forceinline__ void ember_norm_rope_head(float v[D / 32], const float *w, float eps,
                                                            const float *cos_row, const float *sin_row, int lane)
{
	float ss = 0.0f;
#pragma unroll
	for (int c = 0; c < D / 32; c++)
		ss = fmaf(v[c], v[c], ss);
	ss = ember_warp_sum(ss);
	const float scale = 1.0f / sqrtf(ss / (float)D + eps);
#pragma unroll
	for (int c = 0; c < D / 32; c++)
		v[c] = v[c] * scale * w[lane + 32 * c];
#pragma unroll
	for (int c = 0; c < D / 64; c++) {
		const int i = lane + 32 * c;
		const float cs = cos_row[i], sn = sin_row[i];
		const float x1 = v[c], x2 = v[c + D / 64];
		v[c] = x1 * cs - x2 * sn;
		v[c + D / 64] = x2 * cs + x1 * sn;
	}
}

#endif

/*
 * embed.cu - token embedding lookup (see embed.cuh): one CTA per token, one thread per element,
 * ggml's dequantization formulas evaluated in the CPU's order without FMA contraction so the
 * residual stream starts bit-identical to the CPU backend's.
 */
#include "embed.cuh"

#include <cuda_fp16.h>

#include "common.cuh"
#include "layout.cuh"

static __device__ __forceinline__ float h2f_bits(const uint8_t *p)
{
	return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

static __global__ void embed_kernel(float *out, int type, const uint8_t *table, int64_t cols, int n_vocab,
                                    const int32_t *tokens)
{
	asm volatile("griddepcontrol.launch_dependents;\n" ::); /* see attn_decode.cu */
	const int t = blockIdx.x;
	const int32_t id = tokens[t];
	float *dst = out + (size_t)t * cols;
	const int valid = id >= 0 && id < n_vocab;
	const uint8_t *row = table + (size_t)(valid ? id : 0) * ember_raw_row_bytes(type, cols);
	for (int64_t e = threadIdx.x; e < cols; e += blockDim.x) {
		float v = 0.0f;
		switch (type) {
		case EMBER_T_F32: v = reinterpret_cast<const float *>(row)[e]; break;
		case EMBER_T_F16: v = h2f_bits(row + 2 * e); break;
		case EMBER_T_BF16: v = __uint_as_float((uint32_t)(row[2 * e] | (row[2 * e + 1] << 8)) << 16); break;
		case EMBER_T_Q8_0: {
			const uint8_t *blk = row + (e / 32) * 34;
			v = __fmul_rn((float)(int8_t)blk[2 + e % 32], h2f_bits(blk));
			break;
		}
		case EMBER_T_Q4_K: {
			const uint8_t *blk = row + (e / 256) * 144;
			const int i = (int)(e % 256);
			int sc, m;
			ember_raw_q4k_scale_min(blk, i / 32, &sc, &m);
			const float d1 = __fmul_rn(h2f_bits(blk), (float)sc), m1 = __fmul_rn(h2f_bits(blk + 2), (float)m);
			v = __fsub_rn(__fmul_rn(d1, (float)ember_raw_q4k_q(blk, i)), m1);
			break;
		}
		case EMBER_T_Q6_K: {
			const uint8_t *blk = row + (e / 256) * 210;
			const int i = (int)(e % 256);
			v = __fmul_rn(__fmul_rn(h2f_bits(blk + 208), (float)(int8_t)blk[192 + i / 16]), (float)(ember_raw_q6k_q(blk, i) - 32));
			break;
		}
		}
		dst[e] = valid ? v : 0.0f;
	}
}

extern "C" int ember_embed_rows(float *out, int type, const void *table, int64_t cols, int n_vocab, const int32_t *tokens,
                                int n_tokens, cudaStream_t stream)
{
	EMBER_REQUIRE(out && table && tokens && cols > 0 && n_tokens > 0 && ember_raw_row_bytes(type, cols) > 0);
	embed_kernel<<<n_tokens, 256, 0, stream>>>(out, type, static_cast<const uint8_t *>(table), cols, n_vocab, tokens);
	CUDA_CHECK_LAUNCH("embed_kernel");
	return 0;
}

/*
 * repack.cu - load-time weight preparation (see repack.cuh). The tiled repack runs the same
 * host/device function the CPU layout test checks (ember_tile_repack), one thread per tile; the
 * fp16 dequantization uses ggml's formulas in fp32 and rounds once to fp16; the Q8R quantization
 * runs ember_tile_quant_q8r (also checked by the layout test), one thread per tile.
 */
#include "repack.cuh"

#include <cuda_fp16.h>

#include "common.cuh"
#include "layout.cuh"

static __global__ void repack_kernel(uint8_t *dst, int type, const uint8_t *src, int64_t rows, int64_t cols,
                                     int64_t row_tiles, int64_t k_tiles)
{
	const int64_t tile = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (tile >= row_tiles * k_tiles)
		return;
	const int64_t rt = tile / k_tiles, kt = tile % k_tiles;
	ember_tile_repack(dst + (size_t)tile * ember_tile_bytes(type), type, src, rows, cols, rt, kt);
}

extern "C" size_t ember_repack_bytes(int type, int64_t rows, int64_t cols)
{
	if (!ember_tile_type_supported(type))
		return 0;
	return (size_t)((rows + 15) / 16) * (size_t)((cols + 255) / 256) * ember_tile_bytes(type);
}

extern "C" int ember_repack_tiles(void *dst, int type, const void *src, int64_t rows, int64_t cols, cudaStream_t stream)
{
	EMBER_REQUIRE(dst && src && rows > 0 && cols > 0 && ember_tile_type_supported(type));
	EMBER_REQUIRE(cols % (type == EMBER_T_Q8_0 ? 32 : 256) == 0);
	const int64_t row_tiles = (rows + 15) / 16, k_tiles = (cols + 255) / 256, n = row_tiles * k_tiles;
	const int threads = 64;
	repack_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
		static_cast<uint8_t *>(dst), type, static_cast<const uint8_t *>(src), rows, cols, row_tiles, k_tiles);
	CUDA_CHECK_LAUNCH("repack_kernel");
	return 0;
}

static __global__ void quant_q8r_kernel(uint8_t *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t row_tiles,
                                        int64_t k_tiles)
{
	const int64_t tile = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (tile >= row_tiles * k_tiles)
		return;
	ember_tile_quant_q8r(dst + (size_t)tile * EMBER_Q8R_TILE_BYTES, src, rows, cols, tile / k_tiles, tile % k_tiles);
}

extern "C" size_t ember_quant_q8r_bytes(int64_t rows, int64_t cols)
{
	return (size_t)((rows + 15) / 16) * (size_t)((cols + 255) / 256) * EMBER_Q8R_TILE_BYTES;
}

extern "C" int ember_quant_q8r(void *dst, const void *src, int64_t rows, int64_t cols, cudaStream_t stream)
{
	EMBER_REQUIRE(dst && src && rows > 0 && cols > 0);
	const int64_t row_tiles = (rows + 15) / 16, k_tiles = (cols + 255) / 256, n = row_tiles * k_tiles;
	const int threads = 64;
	quant_q8r_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
		static_cast<uint8_t *>(dst), static_cast<const uint16_t *>(src), rows, cols, row_tiles, k_tiles);
	CUDA_CHECK_LAUNCH("quant_q8r_kernel");
	return 0;
}

/* One thread per (row, block); writes the block's values as fp16. */
static __global__ void dequant_f16_kernel(__half *dst, int type, const uint8_t *src, int64_t rows, int64_t cols,
                                          int block_elems)
{
	const int64_t blocks_per_row = cols / block_elems;
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= rows * blocks_per_row)
		return;
	const int64_t r = idx / blocks_per_row, b = idx % blocks_per_row;
	const uint8_t *row = src + (size_t)r * ember_raw_row_bytes(type, cols);
	__half *out = dst + (size_t)r * cols + (size_t)b * block_elems;
	switch (type) {
	case EMBER_T_F32:
		out[0] = __float2half_rn(reinterpret_cast<const float *>(row)[b]);
		break;
	case EMBER_T_F16:
		out[0] = reinterpret_cast<const __half *>(row)[b];
		break;
	case EMBER_T_BF16:
		out[0] = __float2half_rn(__uint_as_float((uint32_t)reinterpret_cast<const unsigned short *>(row)[b] << 16));
		break;
	case EMBER_T_Q8_0: {
		const uint8_t *blk = row + (size_t)b * 34;
		const float d = __half2float(__ushort_as_half((unsigned short)(blk[0] | (blk[1] << 8))));
		for (int i = 0; i < 32; i++)
			out[i] = __float2half_rn((float)(int8_t)blk[2 + i] * d);
		break;
	}
	case EMBER_T_Q4_K: {
		const uint8_t *blk = row + (size_t)b * 144;
		const float d = __half2float(__ushort_as_half((unsigned short)(blk[0] | (blk[1] << 8))));
		const float dmin = __half2float(__ushort_as_half((unsigned short)(blk[2] | (blk[3] << 8))));
		for (int j = 0; j < 8; j++) {
			int sc, m;
			ember_raw_q4k_scale_min(blk, j, &sc, &m);
			const float d1 = d * sc, m1 = dmin * m;
			for (int i = 0; i < 32; i++)
				out[32 * j + i] = __float2half_rn(__fsub_rn(__fmul_rn(d1, (float)ember_raw_q4k_q(blk, 32 * j + i)), m1));
		}
		break;
	}
	case EMBER_T_Q6_K: {
		const uint8_t *blk = row + (size_t)b * 210;
		const float d = __half2float(__ushort_as_half((unsigned short)(blk[208] | (blk[209] << 8))));
		for (int e = 0; e < 256; e++)
			out[e] = __float2half_rn(__fmul_rn(__fmul_rn(d, (float)(int8_t)blk[192 + e / 16]), (float)(ember_raw_q6k_q(blk, e) - 32)));
		break;
	}
	}
}

extern "C" int ember_dequant_f16(void *dst, int type, const void *src, int64_t rows, int64_t cols, cudaStream_t stream)
{
	EMBER_REQUIRE(dst && src && rows > 0 && cols > 0 && ember_raw_row_bytes(type, cols) > 0);
	const int block_elems = type == EMBER_T_Q8_0 ? 32 : (type == EMBER_T_Q4_K || type == EMBER_T_Q6_K) ? 256 : 1;
	EMBER_REQUIRE(cols % block_elems == 0);
	const int64_t n = rows * (cols / block_elems);
	const int threads = 256;
	dequant_f16_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
		static_cast<__half *>(dst), type, static_cast<const uint8_t *>(src), rows, cols, block_elems);
	CUDA_CHECK_LAUNCH("dequant_f16_kernel");
	return 0;
}

/*
 * attn_tile.cuh - device helpers the tensor-core attention kernels share (attn_prefill.cu,
 * attn_block.cu): cp.async copies of 64-row fp16 tiles into XOR-swizzled shared memory and the
 * ldmatrix loads that read them bank-conflict free. Header-only, device code.
 */
#ifndef EMBER_KERNELS_ATTN_TILE_CUH
#define EMBER_KERNELS_ATTN_TILE_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "common.cuh"

#define EMBER_ATT_LOG2E 1.4426950408889634f

static __device__ __forceinline__ uint32_t ember_smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared; src_bytes 0 zero-fills the chunk (rows past the end). */
static __device__ __forceinline__ void ember_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

static __device__ __forceinline__ void ember_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N> static __device__ __forceinline__ void ember_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

static __device__ __forceinline__ void ember_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

static __device__ __forceinline__ void ember_ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

/* Byte offset of 16-byte chunk c of row r in a [rows][D] fp16 tile, XOR-swizzled. */
template <int D> static __device__ __forceinline__ uint32_t ember_swz(int r, int c)
{
	return (uint32_t)(r * D * 2 + ((c ^ (r & 7)) << 4));
}

/* Copies rows [row0, row0+64) of a [.][row_stride] fp16 matrix (valid below row_end, zeros past
 * it) into a tile, with THREADS threads. */
template <int D, int THREADS>
static __device__ __forceinline__ void ember_load_tile64(uint32_t tile, const __half *src, size_t row_stride, int row0,
                                                         int row_end)
{
	constexpr int chunks = D / 8;
#pragma unroll
	for (int i = threadIdx.x; i < 64 * chunks; i += THREADS) {
		const int r = i / chunks, c = i % chunks;
		const int row = row0 + r;
		const bool ok = row < row_end;
		const __half *g = src + (size_t)(ok ? row : 0) * row_stride + c * 8;
		ember_cp_async16(tile + ember_swz<D>(r, c), g, ok ? 16 : 0);
	}
}

/* One 64-key tile of FlashAttention-2 for the 16 query rows of this warp (A fragments qf): S = Q K^T
 * on mma.sync, keys above lim_a (the thread's row gid) or lim_b (row gid + 8) masked, online
 * softmax in the exp2 domain (scale includes log2 e), O += P V with P re-packed in registers. kt_s
 * and vt_s are the swizzled shared K and V tiles of keys key0..key0+63. */
template <int D>
static __device__ __forceinline__ void ember_fa_tile(const uint32_t (&qf)[D / 16][4], uint32_t kt_s, uint32_t vt_s,
                                                     int key0, int lim_a, int lim_b, float scale, int lane, float &m0,
                                                     float &m1, float &l0, float &l1, float (&o)[D / 8][4])
{
	const int g = lane & 3;
	float s[8][4];
#pragma unroll
	for (int j = 0; j < 8; j++)
		s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
		for (int jp = 0; jp < 4; jp++) {
			uint32_t b[4];
			const int mi = lane >> 3;
			const int r = jp * 16 + (mi >> 1) * 8 + (lane & 7), c = 2 * kk + (mi & 1);
			ember_ldmatrix_x4(b, kt_s + ember_swz<D>(r, c));
			ember_mma_16816(s[2 * jp], qf[kk], b[0], b[1], s[2 * jp]);
			ember_mma_16816(s[2 * jp + 1], qf[kk], b[2], b[3], s[2 * jp + 1]);
		}
	}
	/* Scale, mask, online softmax (rows gid and gid+8 of this warp). */
	float mx0 = m0, mx1 = m1;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const int key = key0 + 8 * j + 2 * g;
		s[j][0] = key <= lim_a ? s[j][0] * scale : -INFINITY;
		s[j][1] = key + 1 <= lim_a ? s[j][1] * scale : -INFINITY;
		s[j][2] = key <= lim_b ? s[j][2] * scale : -INFINITY;
		s[j][3] = key + 1 <= lim_b ? s[j][3] * scale : -INFINITY;
		mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
		mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
	}
	mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
	mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
	mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
	mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
	/* Rows with no visible key yet keep m = -inf; use 0 as the reference to avoid inf - inf. */
	const float ref0 = mx0 == -INFINITY ? 0.0f : mx0, ref1 = mx1 == -INFINITY ? 0.0f : mx1;
	const float alpha0 = exp2f(m0 - ref0), alpha1 = exp2f(m1 - ref1);
	m0 = mx0;
	m1 = mx1;
	float rs0 = 0.0f, rs1 = 0.0f;
	uint32_t pf[4][4];
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const float p0 = exp2f(s[j][0] - ref0), p1 = exp2f(s[j][1] - ref0);
		const float p2 = exp2f(s[j][2] - ref1), p3 = exp2f(s[j][3] - ref1);
		rs0 += p0 + p1;
		rs1 += p2 + p3;
		pf[j >> 1][(j & 1) * 2 + 0] = ember_pack_half2(p0, p1);
		pf[j >> 1][(j & 1) * 2 + 1] = ember_pack_half2(p2, p3);
	}
	l0 = l0 * alpha0 + rs0;
	l1 = l1 * alpha1 + rs1;
#pragma unroll
	for (int i = 0; i < D / 8; i++) {
		o[i][0] *= alpha0;
		o[i][1] *= alpha0;
		o[i][2] *= alpha1;
		o[i][3] *= alpha1;
	}
	/* O += P V: k = 64 keys in 4 steps, n = D dims in D/8 tiles. */
#pragma unroll
	for (int kk = 0; kk < 4; kk++) {
#pragma unroll
		for (int dp = 0; dp < D / 16; dp++) {
			uint32_t b[4];
			const int mi = lane >> 3;
			const int r = kk * 16 + (mi & 1) * 8 + (lane & 7), c = 2 * dp + (mi >> 1);
			ember_ldmatrix_x4_trans(b, vt_s + ember_swz<D>(r, c));
			ember_mma_16816(o[2 * dp], pf[kk], b[0], b[1], o[2 * dp]);
			ember_mma_16816(o[2 * dp + 1], pf[kk], b[2], b[3], o[2 * dp + 1]);
		}
	}
}

/* FlashAttention-2 over the key tiles kt0..kt1-1 (64 keys each, valid below n_keys) for the 64
 * query rows of q_tile, whose copy the caller has issued but not committed: the K/V tiles
 * double-buffered at k_tile0 / v_tile0 (two tiles each) by THREADS threads, 4 warps of 16 rows,
 * keys above lim_a / lim_b masked (the thread's rows gid and gid + 8); a warp with active false
 * only copies. Leaves O unnormalized in o, and m and l per row (l summed over the quad). */
template <int D, int THREADS>
static __device__ __forceinline__ void ember_fa_rows(uint32_t q_tile, uint32_t k_tile0, uint32_t v_tile0,
                                                     const __half *kg, const __half *vg, int kt0, int kt1, int n_keys,
                                                     int lim_a, int lim_b, float scale, bool active, float &m0,
                                                     float &m1, float &l0, float &l1, float (&o)[D / 8][4])
{
	constexpr uint32_t tile_bytes = 64 * D * 2;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	ember_load_tile64<D, THREADS>(k_tile0, kg, D, kt0 * 64, n_keys);
	ember_load_tile64<D, THREADS>(v_tile0, vg, D, kt0 * 64, n_keys);
	ember_cp_async_commit();
	uint32_t qf[D / 16][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
		o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
	m0 = m1 = -INFINITY;
	l0 = l1 = 0.0f;
	for (int kt = kt0; kt < kt1; kt++) {
		const int buf = (kt - kt0) & 1;
		if (kt + 1 < kt1) {
			ember_load_tile64<D, THREADS>(k_tile0 + (buf ^ 1) * tile_bytes, kg, D, (kt + 1) * 64, n_keys);
			ember_load_tile64<D, THREADS>(v_tile0 + (buf ^ 1) * tile_bytes, vg, D, (kt + 1) * 64, n_keys);
		}
		ember_cp_async_commit();
		ember_cp_async_wait<1>();
		__syncthreads();
		if (kt == kt0) {
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++) {
				const int r = warp * 16 + (lane & 15), c = 2 * kk + (lane >> 4);
				ember_ldmatrix_x4(qf[kk], q_tile + ember_swz<D>(r, c));
			}
		}
		if (active)
			ember_fa_tile<D>(qf, k_tile0 + buf * tile_bytes, v_tile0 + buf * tile_bytes, kt * 64, lim_a, lim_b, scale,
			                 lane, m0, m1, l0, l1, o);
		__syncthreads();
	}
	ember_cp_async_wait<0>();
	l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
	l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
}

#endif

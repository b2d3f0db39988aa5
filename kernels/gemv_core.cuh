/*
 * gemv_core.cuh - device code shared by the decode GEMV kernels (gemv.cu: one CTA per row tile;
 * gemv_stream.cu: one wave of CTAs streaming many row tiles): the tiled mma cores per weight type
 * with their lane-split scale epilogues, the cp.async ring that streams a row tile's 16x256 tiles
 * through shared memory, the input staging, the scalar raw-row dot product, one row tile's 16 rows
 * (row_tile_dot, gemv.cu), and the bookkeeping both kernels share (segment lookup, the
 * greedy-argmax publication).
 * Internal to kernels/: included only by .cu files.
 */
#ifndef EMBER_KERNELS_GEMV_CORE_CUH
#define EMBER_KERNELS_GEMV_CORE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"
#include "gemv.cuh"
#include "layout.cuh"

#define GEMV_WARPS 4
#define GEMV_THREADS (GEMV_WARPS * 32)

static __device__ __forceinline__ uint32_t u4get(const uint4 &v, int i)
{
	return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

static __device__ __forceinline__ uint32_t u4byte(const uint4 &v, int i)
{
	return (u4get(v, i >> 2) >> (8 * (i & 3))) & 0xFFu;
}

static __device__ __forceinline__ float half_bits_to_float(uint32_t bits)
{
	return __half2float(__ushort_as_half((unsigned short)(bits & 0xFFFFu)));
}

/* ---- tiled (mma) cores ---- */

template <int TYPE> struct tile_regs;
template <> struct tile_regs<EMBER_T_Q8_0> {
	uint4 q[8];
	uint4 d0, d1;
};
template <> struct tile_regs<EMBER_T_Q4_K> {
	uint4 q[4];
	uint4 scm0, scm1;
	uint32_t dd0, dd1;
};
template <> struct tile_regs<EMBER_T_Q6_K> {
	uint4 q[4];
	uint4 hi[2];
	uint4 sc0, sc1;
	uint32_t d0, d1;
};

template <> struct tile_regs<EMBER_T_Q8R> {
	uint4 q[8];
	float d0, d1; /* rows gid, gid + 8 */
};

template <int TYPE> static __device__ __forceinline__ void tile_load(const uint8_t *tile, int lane, tile_regs<TYPE> &t);

template <> __device__ __forceinline__ void tile_load<EMBER_T_Q8_0>(const uint8_t *tile, int lane, tile_regs<EMBER_T_Q8_0> &t)
{
	const uint4 *v = reinterpret_cast<const uint4 *>(tile);
	const int gid = lane >> 2;
#pragma unroll
	for (int c = 0; c < 8; c++)
		t.q[c] = v[c * 32 + lane];
	t.d0 = v[EMBER_Q8_D_OFF / 16 + gid];
	t.d1 = v[EMBER_Q8_D_OFF / 16 + gid + 8];
}

template <> __device__ __forceinline__ void tile_load<EMBER_T_Q8R>(const uint8_t *tile, int lane, tile_regs<EMBER_T_Q8R> &t)
{
	const uint4 *v = reinterpret_cast<const uint4 *>(tile);
	const float *d = reinterpret_cast<const float *>(tile + EMBER_Q8R_D_OFF);
	const int gid = lane >> 2;
#pragma unroll
	for (int c = 0; c < 8; c++)
		t.q[c] = v[c * 32 + lane];
	t.d0 = d[gid];
	t.d1 = d[gid + 8];
}

template <> __device__ __forceinline__ void tile_load<EMBER_T_Q4_K>(const uint8_t *tile, int lane, tile_regs<EMBER_T_Q4_K> &t)
{
	const uint4 *v = reinterpret_cast<const uint4 *>(tile);
	const uint32_t *w = reinterpret_cast<const uint32_t *>(tile);
	const int gid = lane >> 2;
#pragma unroll
	for (int c = 0; c < 4; c++)
		t.q[c] = v[c * 32 + lane];
	t.scm0 = v[EMBER_Q4K_SCM_OFF / 16 + gid];
	t.scm1 = v[EMBER_Q4K_SCM_OFF / 16 + gid + 8];
	t.dd0 = w[EMBER_Q4K_D_OFF / 4 + gid];
	t.dd1 = w[EMBER_Q4K_D_OFF / 4 + gid + 8];
}

template <> __device__ __forceinline__ void tile_load<EMBER_T_Q6_K>(const uint8_t *tile, int lane, tile_regs<EMBER_T_Q6_K> &t)
{
	const uint4 *v = reinterpret_cast<const uint4 *>(tile);
	const unsigned short *h = reinterpret_cast<const unsigned short *>(tile);
	const int gid = lane >> 2;
#pragma unroll
	for (int c = 0; c < 4; c++)
		t.q[c] = v[c * 32 + lane];
#pragma unroll
	for (int c = 0; c < 2; c++)
		t.hi[c] = v[EMBER_Q6K_HI_OFF / 16 + c * 32 + lane];
	t.sc0 = v[EMBER_Q6K_SC_OFF / 16 + gid];
	t.sc1 = v[EMBER_Q6K_SC_OFF / 16 + gid + 8];
	t.d0 = h[EMBER_Q6K_D_OFF / 2 + gid];
	t.d1 = h[EMBER_Q6K_D_OFF / 2 + gid + 8];
}

/* The scale epilogues. A warp's mma gives every lane of a row group (lane >> 2) the same row sums
 * (B holds x in all 8 columns), so the 4 lanes of a group split the scale groups between them: lane
 * g = lane & 3 finishes the groups j with j % 4 == g, keeping its partial sums for rows gid and
 * gid + 8 in y0 and y1. Callers add the 4 lanes' partials (gemv_group_sum) before using them. */

/* Byte g (0..3, per lane) of w as a float, exact (2^23 + b - 2^23; no I2F). */
static __device__ __forceinline__ float byte_lane_to_float(uint32_t w, int g)
{
	return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | (uint32_t)g)) - 8388608.0f;
}

static __device__ __forceinline__ float sbyte_lane_to_float(uint32_t w, int g)
{
	return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | (uint32_t)g) ^ 0x80u) - 8388736.0f;
}

/* Sum of the 4 lanes of a row group: after it every lane holds the rows' totals. */
static __device__ __forceinline__ void gemv_group_sum(float &y0, float &y1)
{
	y0 += __shfl_xor_sync(0xffffffffu, y0, 1);
	y1 += __shfl_xor_sync(0xffffffffu, y1, 1);
	y0 += __shfl_xor_sync(0xffffffffu, y0, 2);
	y1 += __shfl_xor_sync(0xffffffffu, y1, 2);
}

/* The per-scale-group epilogue arithmetic, spelled out with explicit round-to-nearest intrinsics
 * so that ptxas cannot contract it differently in different kernels: the decode GEMVs and the
 * verify window (gemv_window.cu) call these same helpers and so produce bit-identical sums for a
 * row and a token (EMBER_VERIFY, kernels/README.md). */
static __device__ __forceinline__ float q8_group_epi(float y, float d, float c, float S)
{
	return __fmaf_rn(d, __fmaf_rn(-1152.0f, S, c), y);
}

/* hi: the row sits in the upper 8 rows of the tile (its quants were scaled by 16). */
static __device__ __forceinline__ float q4k_group_epi(float y, float dsc, float dmm, float c, float S, bool hi)
{
	float cc = __fmaf_rn(-1024.0f, S, c);
	if (hi)
		cc = __fmul_rn(cc, 0.0625f);
	return __fadd_rn(y, __fmaf_rn(dsc, cc, -__fmul_rn(dmm, S)));
}

static __device__ __forceinline__ float q6k_group_epi(float y, float dsc, float c, float S, bool hi)
{
	const float cc = hi ? __fmul_rn(__fmaf_rn(-1536.0f, S, c), 0.0625f) : __fmaf_rn(-1056.0f, S, c);
	return __fmaf_rn(dsc, cc, y);
}

/* SwiGLU of one row: fp16(silu(g) * u), explicit so every kernel rounds it the same way. */
static __device__ __forceinline__ __half swiglu_h(float g, float u)
{
	return __float2half_rn(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u));
}

/* xs32: this tile's 256 fp16 inputs as 128 pairs; sx: its 16 per-step input sums. */
template <int TYPE>
static __device__ __forceinline__ void tile_compute(const tile_regs<TYPE> &t, const uint32_t *xs32, const float *sx,
                                                    int lane, float &y0, float &y1);

template <>
__device__ __forceinline__ void tile_compute<EMBER_T_Q8_0>(const tile_regs<EMBER_T_Q8_0> &t, const uint32_t *xs32,
                                                           const float *sx, int lane, float &y0, float &y1)
{
	const int g = lane & 3;
	float c0s[2] = {0.0f, 0.0f}, c1s[2] = {0.0f, 0.0f}; /* this lane's blocks b = g, g + 4 */
#pragma unroll
	for (int b = 0; b < 8; b++) {
		float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int s = 2 * b + h;
			uint32_t a[4];
			ember_q8_regs(u4get(t.q[b], 2 * h), u4get(t.q[b], 2 * h + 1), a);
			ember_mma_16816(c, a, xs32[8 * s + g], xs32[8 * s + 4 + g], c);
		}
		if ((b & 3) == g) {
			c0s[b >> 2] = c[0];
			c1s[b >> 2] = c[2];
		}
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int b = g + 4 * i;
		const float2 s2 = *reinterpret_cast<const float2 *>(sx + 2 * b);
		const float S = s2.x + s2.y;
		/* d of block b: half (b & 1) of word b >> 1 = 2i + (g >> 1) */
		const uint32_t w0 = (g & 2) ? u4get(t.d0, 2 * i + 1) : u4get(t.d0, 2 * i);
		const uint32_t w1 = (g & 2) ? u4get(t.d1, 2 * i + 1) : u4get(t.d1, 2 * i);
		const float d0 = half_bits_to_float(w0 >> (16 * (g & 1))), d1 = half_bits_to_float(w1 >> (16 * (g & 1)));
		y0 = q8_group_epi(y0, d0, c0s[i], S);
		y1 = q8_group_epi(y1, d1, c1s[i], S);
	}
}

template <>
__device__ __forceinline__ void tile_compute<EMBER_T_Q4_K>(const tile_regs<EMBER_T_Q4_K> &t, const uint32_t *xs32,
                                                           const float *sx, int lane, float &y0, float &y1)
{
	const int g = lane & 3;
	float c0s[2] = {0.0f, 0.0f}, c1s[2] = {0.0f, 0.0f}; /* this lane's groups j = g, g + 4 */
#pragma unroll
	for (int j = 0; j < 8; j++) {
		float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int s = 2 * j + h;
			uint32_t a[4];
			ember_q4k_regs(u4get(t.q[s >> 2], s & 3), a);
			ember_mma_16816(c, a, xs32[8 * s + g], xs32[8 * s + 4 + g], c);
		}
		if ((j & 3) == g) {
			c0s[j >> 2] = c[0];
			c1s[j >> 2] = c[2];
		}
	}
	const float2 dm0 = __half22float2(*reinterpret_cast<const __half2 *>(&t.dd0));
	const float2 dm1 = __half22float2(*reinterpret_cast<const __half2 *>(&t.dd1));
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int j = g + 4 * i; /* scale j is byte g of word i, min j byte g of word 2 + i */
		const float2 s2 = *reinterpret_cast<const float2 *>(sx + 2 * j);
		const float S = s2.x + s2.y;
		const float sc0 = byte_lane_to_float(u4get(t.scm0, i), g), m0 = byte_lane_to_float(u4get(t.scm0, 2 + i), g);
		const float sc1 = byte_lane_to_float(u4get(t.scm1, i), g), m1 = byte_lane_to_float(u4get(t.scm1, 2 + i), g);
		y0 = q4k_group_epi(y0, __fmul_rn(dm0.x, sc0), __fmul_rn(dm0.y, m0), c0s[i], S, false);
		y1 = q4k_group_epi(y1, __fmul_rn(dm1.x, sc1), __fmul_rn(dm1.y, m1), c1s[i], S, true);
	}
}

template <>
__device__ __forceinline__ void tile_compute<EMBER_T_Q6_K>(const tile_regs<EMBER_T_Q6_K> &t, const uint32_t *xs32,
                                                           const float *sx, int lane, float &y0, float &y1)
{
	const int g = lane & 3;
	float c0s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1s[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* steps s = g + 4i */
#pragma unroll
	for (int s = 0; s < 16; s++) {
		float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		uint32_t a[4];
		const int wi = s >> 1;
		const uint32_t hi16 = (u4get(t.hi[wi >> 2], wi & 3) >> (16 * (s & 1))) & 0xFFFFu;
		ember_q6k_regs(u4get(t.q[s >> 2], s & 3), hi16, a);
		ember_mma_16816(c, a, xs32[8 * s + g], xs32[8 * s + 4 + g], c);
		if ((s & 3) == g) {
			c0s[s >> 2] = c[0];
			c1s[s >> 2] = c[2];
		}
	}
	const float d0 = half_bits_to_float(t.d0), d1 = half_bits_to_float(t.d1);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const float S = sx[g + 4 * i]; /* step s = g + 4i: its scale is byte g of word i */
		const float sc0 = sbyte_lane_to_float(u4get(t.sc0, i), g), sc1 = sbyte_lane_to_float(u4get(t.sc1, i), g);
		y0 = q6k_group_epi(y0, __fmul_rn(d0, sc0), c0s[i], S, false);
		y1 = q6k_group_epi(y1, __fmul_rn(d1, sc1), c1s[i], S, true);
	}
}

/* ---- streaming tiles through shared memory ----
 * A CTA's tiles for one row tile are contiguous in memory. They are copied with cp.async in
 * rounds of 4 tiles (one per warp), GEMV_ROUNDS rounds in flight, so each CTA keeps 8-12 tiles
 * (20-50 KB) of loads outstanding instead of one chain of dependent loads per warp. */
#define GEMV_ROUNDS 3

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
	const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
/* The same with the source's byte count: 0 zero-fills the destination without reading src. */
static __device__ __forceinline__ void cp_async16_zfill(void *smem, const void *gmem, bool ok)
{
	const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0));
}
/* 8 bytes (cp.async.cg takes only 16), zero-filled when !ok; both addresses 8-byte aligned. */
static __device__ __forceinline__ void cp_async8_zfill(void *smem, const void *gmem, bool ok)
{
	const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(ok ? 8 : 0));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Issues round r (tiles 4r..4r+3) of the row tile at `base` into ring slot r % GEMV_ROUNDS and
 * commits it as one group (an empty group past the last tile keeps the group count uniform). */
static __device__ __forceinline__ void issue_round(uint8_t *ring, const uint8_t *base, size_t tb, int kt_count, int r)
{
	const int t0 = 4 * r;
	if (t0 < kt_count) {
		const int nt = kt_count - t0 < 4 ? kt_count - t0 : 4;
		const int chunks = (int)(nt * tb / 16);
		uint8_t *dst = ring + (size_t)(r % GEMV_ROUNDS) * 4 * tb;
		const uint8_t *src = base + (size_t)t0 * tb;
		for (int c = threadIdx.x; c < chunks; c += GEMV_THREADS)
			cp_async16(dst + (size_t)c * 16, src + (size_t)c * 16);
	}
	cp_async_commit();
}

static __device__ __forceinline__ void prefetch_rounds(uint8_t *ring, const uint8_t *base, size_t tb, int kt_count)
{
#pragma unroll
	for (int r = 0; r < GEMV_ROUNDS - 1; r++)
		issue_round(ring, base, tb, kt_count, r);
}

/* Consumes all rounds of the row tile (the first GEMV_ROUNDS-1 already issued by prefetch_rounds). */
template <int TYPE>
static __device__ void tiled_stream(uint8_t *ring, const uint8_t *base, int kt_count, const uint32_t *xs32,
                                    const float *sx, int warp, int lane, float &y0, float &y1)
{
	constexpr size_t tb = TYPE == EMBER_T_Q8_0 ? EMBER_Q8_TILE_BYTES
	                      : TYPE == EMBER_T_Q4_K ? EMBER_Q4K_TILE_BYTES
	                                             : EMBER_Q6K_TILE_BYTES;
	const int n_rounds = (kt_count + 3) / 4;
	for (int r = 0; r < n_rounds; r++) {
		issue_round(ring, base, tb, kt_count, r + GEMV_ROUNDS - 1);
		cp_async_wait<GEMV_ROUNDS - 1>();
		__syncthreads();
		const int kt = 4 * r + warp;
		if (kt < kt_count) {
			tile_regs<TYPE> t;
			tile_load<TYPE>(ring + ((size_t)(r % GEMV_ROUNDS) * 4 + warp) * tb, lane, t);
			tile_compute<TYPE>(t, xs32 + kt * 128, sx + kt * 16, lane, y0, y1);
		}
		__syncthreads(); /* the slot is refilled by the next round's copies */
	}
}

/* ---- simple (raw GGUF rows) core: one warp per row, ggml's dequantization formulas ---- */

static __device__ float simple_row_dot(int type, const uint8_t *row, const __half *xs, int k, int lane)
{
	float acc = 0.0f;
	switch (type) {
	case EMBER_T_F32: {
		const float *w = reinterpret_cast<const float *>(row);
		for (int e = lane; e < k; e += 32)
			acc = fmaf(w[e], __half2float(xs[e]), acc);
		break;
	}
	case EMBER_T_F16:
	case EMBER_T_BF16: {
		const unsigned short *w = reinterpret_cast<const unsigned short *>(row);
		for (int e = lane; e < k; e += 32) {
			const unsigned short b = w[e];
			const float v = type == EMBER_T_F16 ? __half2float(__ushort_as_half(b)) : __uint_as_float((uint32_t)b << 16);
			acc = fmaf(v, __half2float(xs[e]), acc);
		}
		break;
	}
	case EMBER_T_Q8_0:
		for (int b = lane; b < k / 32; b += 32) {
			const uint8_t *blk = row + (size_t)b * 34;
			const float d = half_bits_to_float(blk[0] | (blk[1] << 8));
			float s = 0.0f;
			for (int i = 0; i < 32; i++)
				s = fmaf((float)(int8_t)blk[2 + i], __half2float(xs[32 * b + i]), s);
			acc = fmaf(d, s, acc);
		}
		break;
	case EMBER_T_Q4_K:
		for (int b = lane; b < k / 256; b += 32) {
			const uint8_t *blk = row + (size_t)b * 144;
			const float d = half_bits_to_float(blk[0] | (blk[1] << 8));
			const float dmin = half_bits_to_float(blk[2] | (blk[3] << 8));
			const __half *x = xs + 256 * b;
			for (int c = 0; c < 4; c++) {
				int sc, m;
				ember_raw_q4k_scale_min(blk, 2 * c, &sc, &m);
				const float d1 = d * sc, m1 = dmin * m;
				ember_raw_q4k_scale_min(blk, 2 * c + 1, &sc, &m);
				const float d2 = d * sc, m2 = dmin * m;
				const uint8_t *q = blk + 16 + 32 * c;
				for (int l = 0; l < 32; l++) {
					acc = fmaf(d1 * (q[l] & 0xF) - m1, __half2float(x[64 * c + l]), acc);
					acc = fmaf(d2 * (q[l] >> 4) - m2, __half2float(x[64 * c + 32 + l]), acc);
				}
			}
		}
		break;
	case EMBER_T_Q6_K:
		for (int b = lane; b < k / 256; b += 32) {
			const uint8_t *blk = row + (size_t)b * 210;
			const float d = half_bits_to_float(blk[208] | (blk[209] << 8));
			const __half *x = xs + 256 * b;
			for (int e = 0; e < 256; e++) {
				const float ds = d * (float)(int8_t)blk[192 + e / 16];
				acc = fmaf(ds * (float)(ember_raw_q6k_q(blk, e) - 32), __half2float(x[e]), acc);
			}
		}
		break;
	}
	return ember_warp_sum(acc);
}

/* ---- bookkeeping shared by the kernels ---- */

static __device__ __forceinline__ int seg_tiles(const ember_gemv_seg &s) { return (s.rows + 15) / 16; }

/* First tile of row tile rt of `seg` (its k_pad / 256 tiles are contiguous). */
static __device__ __forceinline__ const uint8_t *tile_base(const ember_gemv_seg &seg, int rt, int k_pad)
{
	return static_cast<const uint8_t *>(seg.w) + (size_t)rt * (k_pad / EMBER_TILE_K) * ember_tile_bytes(seg.type);
}

/* ---- the input, staged once per CTA by both kernels ---- */

/* Loads RMSNorm input items t0 and t0 + T (16 columns of x and of norm_w each; zeros past the
 * input) into registers, all 16 loads in flight together. */
template <int T>
static __device__ __forceinline__ void load_rms_items(const float4 *x4, const float4 *w4, int t0, int n_items, int k,
                                                      float4 (&xv)[2][4], float4 (&wv)[2][4])
{
#pragma unroll
	for (int u = 0; u < 2; u++) {
		const int t = t0 + u * T;
		const bool ok = t < n_items && 16 * t < k;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			xv[u][i] = ok ? x4[4 * t + i] : make_float4(0, 0, 0, 0);
			wv[u][i] = ok ? w4[4 * t + i] : make_float4(0, 0, 0, 0);
		}
	}
}

/* RMSNorm input item t (16 columns): fp16(x * scale * w) into xs, the sum of those fp16 values into
 * sx[t]. */
static __device__ __forceinline__ void stage_rms_item(const float4 (&xv)[4], const float4 (&wv)[4], float scale, __half *xs,
                                                      float *sx, int t)
{
	uint32_t packed[8];
	float sum = 0.0f;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const float4 p = xv[i], q = wv[i];
		packed[2 * i] = ember_pack_half2(p.x * scale * q.x, p.y * scale * q.y);
		packed[2 * i + 1] = ember_pack_half2(p.z * scale * q.z, p.w * scale * q.w);
	}
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const float2 f = ember_unpack_half2(packed[j]);
		sum += f.x + f.y;
	}
	reinterpret_cast<uint4 *>(xs)[2 * t] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
	reinterpret_cast<uint4 *>(xs)[2 * t + 1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
	sx[t] = sum;
}

/* Stages the input as fp16 xs[k_pad] (zero past k) plus per-16-column sums sx[k_pad/16] (the mma
 * epilogue removes the 1024 offset and the Q4_K mins with them): fp16 x as is, or RMSNorm(x) *
 * norm_w of the fp32 x, by a CTA of T threads. Vector paths move 16 columns per item with 16-byte
 * loads, several in flight per thread (a scalar loop costs one L2 round trip per 128 columns);
 * the RMS input is read once when every thread holds at most two items, else in two passes.
 * Contains __syncthreads; the caller syncs before reading xs. */
template <int IN, int T>
static __device__ __forceinline__ void gemv_stage_input(const ember_gemv_args &a, int k_pad, __half *xs, float *sx,
                                                        float *red)
{
	const int tid = threadIdx.x, k = a.k, n_items = k_pad / 16;
	const uintptr_t bits = (uintptr_t)a.x | (IN == EMBER_GEMV_IN_RMS ? (uintptr_t)a.norm_w : 0);
	const bool vec = (k & 15) == 0 && (bits & 15) == 0;
	if (IN == EMBER_GEMV_IN_F16 && vec) {
		const uint4 *x4 = static_cast<const uint4 *>(a.x);
		for (int t0 = tid; t0 < n_items; t0 += 4 * T) {
			uint4 v[4][2];
#pragma unroll
			for (int u = 0; u < 4; u++) {
				const int t = t0 + u * T;
				const bool ok = t < n_items && 16 * t < k;
				v[u][0] = ok ? x4[2 * t] : make_uint4(0, 0, 0, 0);
				v[u][1] = ok ? x4[2 * t + 1] : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < 4; u++) {
				const int t = t0 + u * T;
				if (t < n_items) {
					reinterpret_cast<uint4 *>(xs)[2 * t] = v[u][0];
					reinterpret_cast<uint4 *>(xs)[2 * t + 1] = v[u][1];
					const uint32_t w8[8] = {v[u][0].x, v[u][0].y, v[u][0].z, v[u][0].w,
					                        v[u][1].x, v[u][1].y, v[u][1].z, v[u][1].w};
					float sum = 0.0f;
#pragma unroll
					for (int i = 0; i < 8; i++) {
						const float2 f = ember_unpack_half2(w8[i]);
						sum += f.x + f.y;
					}
					sx[t] = sum;
				}
			}
		}
		return;
	}
	if (IN == EMBER_GEMV_IN_RMS && vec && n_items <= 2 * T) {
		/* One trip: each thread keeps its (at most two) items of x and norm_w in registers. */
		const float4 *x4 = static_cast<const float4 *>(a.x), *w4 = reinterpret_cast<const float4 *>(a.norm_w);
		float4 xv[2][4], wv[2][4];
		float ss = 0.0f;
		load_rms_items<T>(x4, w4, tid, n_items, k, xv, wv);
#pragma unroll
		for (int u = 0; u < 2; u++)
#pragma unroll
			for (int i = 0; i < 4; i++)
				ss += xv[u][i].x * xv[u][i].x + xv[u][i].y * xv[u][i].y + xv[u][i].z * xv[u][i].z + xv[u][i].w * xv[u][i].w;
		ss = ember_block_sum(ss, red);
		const float scale = 1.0f / sqrtf(ss / (float)k + a.eps);
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int t = tid + u * T;
			if (t < n_items)
				stage_rms_item(xv[u], wv[u], scale, xs, sx, t);
		}
		return;
	}
	if (IN == EMBER_GEMV_IN_RMS && vec) {
		/* Two passes: the sum of squares, then x and norm_w again for the items. */
		const float4 *x4 = static_cast<const float4 *>(a.x), *w4 = reinterpret_cast<const float4 *>(a.norm_w);
		float ss = 0.0f;
		for (int i0 = tid; i0 < k / 4; i0 += 8 * T) {
			float4 v[8];
#pragma unroll
			for (int u = 0; u < 8; u++)
				v[u] = i0 + u * T < k / 4 ? x4[i0 + u * T] : make_float4(0, 0, 0, 0);
#pragma unroll
			for (int u = 0; u < 8; u++)
				ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
		}
		ss = ember_block_sum(ss, red);
		const float scale = 1.0f / sqrtf(ss / (float)k + a.eps);
		for (int t0 = tid; t0 < n_items; t0 += 2 * T) {
			float4 xv[2][4], wv[2][4];
			load_rms_items<T>(x4, w4, t0, n_items, k, xv, wv);
#pragma unroll
			for (int u = 0; u < 2; u++) {
				const int t = t0 + u * T;
				if (t < n_items)
					stage_rms_item(xv[u], wv[u], scale, xs, sx, t);
			}
		}
		return;
	}
	/* Generic path: any k, any alignment, any width. */
	if (IN == EMBER_GEMV_IN_F16) {
		const __half *x = static_cast<const __half *>(a.x);
		for (int i = tid; i < k_pad; i += T)
			xs[i] = i < k ? x[i] : __float2half(0.0f);
	} else {
		const float *x = static_cast<const float *>(a.x);
		float ss = 0.0f;
		for (int i = tid; i < k; i += T)
			ss = fmaf(x[i], x[i], ss);
		ss = ember_block_sum(ss, red);
		const float scale = 1.0f / sqrtf(ss / (float)k + a.eps);
		for (int i = tid; i < k_pad; i += T)
			xs[i] = i < k ? __float2half_rn(x[i] * scale * a.norm_w[i]) : __float2half(0.0f);
	}
	__syncthreads();
	for (int t = tid; t < n_items; t += T) {
		float sum = 0.0f;
#pragma unroll
		for (int i = 0; i < 16; i++)
			sum += __half2float(xs[16 * t + i]);
		sx[t] = sum;
	}
}

/* ---- one row tile: the 16 rows the plain kernel computes per item ---- */

/* The 16 rows of row tile rt of `seg` over all k columns (k_pad / 256 tiles) into yout[16]
 * (shared), from the staged input xs/sx. Tiled weights stream through the ring (`prefetched`: the
 * first rounds were already issued), ys holding the warps' sums; raw rows take a warp per row.
 * Contains __syncthreads. */
static __device__ void row_tile_dot(const ember_gemv_seg &seg, int rt, int k, int k_pad, const __half *xs,
                                    const float *sx, float *ys, float *yout, uint8_t *ring, bool prefetched)
{
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (seg.tiled) {
		float y0 = 0.0f, y1 = 0.0f;
		/* ember_tile_bytes twice on purpose: one shared local changes the plain kernel's SASS. */
		const int kt_n = k_pad / EMBER_TILE_K;
		const uint8_t *base = tile_base(seg, rt, k_pad);
		const uint32_t *xs32 = reinterpret_cast<const uint32_t *>(xs);
		if (!prefetched)
			prefetch_rounds(ring, base, ember_tile_bytes(seg.type), kt_n);
		switch (seg.type) {
		case EMBER_T_Q8_0: tiled_stream<EMBER_T_Q8_0>(ring, base, kt_n, xs32, sx, warp, lane, y0, y1); break;
		case EMBER_T_Q4_K: tiled_stream<EMBER_T_Q4_K>(ring, base, kt_n, xs32, sx, warp, lane, y0, y1); break;
		case EMBER_T_Q6_K: tiled_stream<EMBER_T_Q6_K>(ring, base, kt_n, xs32, sx, warp, lane, y0, y1); break;
		}
		gemv_group_sum(y0, y1);
		if ((lane & 3) == 0) {
			ys[warp * 16 + (lane >> 2)] = y0;
			ys[warp * 16 + (lane >> 2) + 8] = y1;
		}
		__syncthreads();
		if (threadIdx.x < 16) {
			float y = 0.0f;
#pragma unroll
			for (int w = 0; w < GEMV_WARPS; w++)
				y += ys[w * 16 + threadIdx.x];
			yout[threadIdx.x] = y;
		}
		__syncthreads();
	} else {
		const size_t row_bytes = ember_raw_row_bytes(seg.type, k);
		for (int r16 = warp; r16 < 16; r16 += GEMV_WARPS) {
			const int row = rt * 16 + r16;
			float y = 0.0f;
			if (row < seg.rows)
				y = simple_row_dot(seg.type, static_cast<const uint8_t *>(seg.w) + (size_t)row * row_bytes, xs, k, lane);
			if (lane == 0)
				yout[r16] = y;
		}
		__syncthreads();
	}
}

static __device__ __forceinline__ unsigned long long argmax_key(float v, int idx)
{
	uint32_t u = __float_as_uint(v);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (uint32_t)idx);
}

/* Tile row and segment of the CTA's n-th tile (grid-stride order). */
static __device__ __forceinline__ int locate_tile(const ember_gemv_args &args, int tile, bool swiglu, int *si)
{
	int rt = tile;
	*si = 0;
	if (!swiglu) {
		while (*si < args.n_seg - 1 && rt >= seg_tiles(args.seg[*si])) {
			rt -= seg_tiles(args.seg[*si]);
			(*si)++;
		}
	}
	return rt;
}

/* ARGMAX: folds the CTA's best (key, held by warp 0's lanes) into state->best; the last CTA of
 * the grid (ticket) turns it into the next token, advances the decode state and resets it. */
static __device__ __forceinline__ void argmax_publish(const ember_gemv_args &args, unsigned long long best_key)
{
	const int tid = threadIdx.x;
	if (tid < 32) {
		unsigned long long key = best_key;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
			key = other > key ? other : key;
		}
		if (tid == 0) {
			ember_decode_state *st = args.state;
			atomicMax(&st->best, key);
			__threadfence();
			const uint32_t ticket = atomicAdd(&st->done, 1u);
			if (ticket == gridDim.x - 1) {
				/* Last CTA: every other CTA's atomicMax is visible (fence + ticket). */
				__threadfence();
				const unsigned long long best = atomicExch(&st->best, 0ull);
				const int token = (int)(0xFFFFFFFFu - (uint32_t)(best & 0xFFFFFFFFull));
				const int step = st->step;
				if (step >= 0 && step < args.out_tokens_cap && args.out_tokens)
					args.out_tokens[step] = token;
				st->token = token;
				st->step = step + 1;
				st->pos = st->pos + 1;
				st->done = 0;
			}
		}
	}
}

#endif

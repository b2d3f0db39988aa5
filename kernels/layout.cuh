/*
 * layout.cuh - the repacked weight layout the decode GEMV reads (host and device code).
 *
 * A matrix is cut into tiles of 16 rows x 256 columns. Inside a tile the quantized values are
 * stored "lane-major": the 32 lanes of a warp each find, in consecutive 16-byte chunks, exactly
 * the values their mma.sync m16n8k16 A-fragments need (rows gid and gid+8, columns 2g, 2g+1,
 * 2g+8, 2g+9 of each 16-column step, gid = lane/4, g = lane%4), so each warp load instruction
 * reads 512 contiguous bytes and the fragment comes out of a few LOP3/PRMT ops: quant values
 * become exact fp16 integers (1024 + q, via the 0x6400 exponent trick) and the per-block scales are
 * applied in fp32 after each scale group. The bytes per tile equal the GGUF bytes (Q4_K: +2.8%
 * for unpacked 6-bit scales), so "each weight byte once per token" still holds.
 */
#ifndef EMBER_KERNELS_LAYOUT_CUH
#define EMBER_KERNELS_LAYOUT_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD static inline
#endif

#define EMBER_TILE_ROWS 16
#define EMBER_TILE_K 256

/* ggml type codes (model.h's enum ember_type values). */
#define EMBER_T_F32 0
#define EMBER_T_F16 1
#define EMBER_T_Q8_0 8
#define EMBER_T_Q4_K 12
#define EMBER_T_Q6_K 14
#define EMBER_T_BF16 30
/* ember's own tiled type, never in a GGUF file: int8 with one fp32 scale per row and tile (16 rows
 * x 256 columns), quantized on the device from fp16 rows (the DFlash draft's weights with
 * EMBER_DRAFT_WEIGHTS=q8; ember_tile_quant_q8r). Used only by the verify-window GEMV. */
#define EMBER_T_Q8R 100

/* Tile byte layouts (offsets inside one tile). */
#define EMBER_Q8_TILE_BYTES 4352  /* data [8 chunks][32 lanes][16 B] (q+128), d [16 rows][8] fp16 */
#define EMBER_Q8_D_OFF 4096
#define EMBER_Q4K_TILE_BYTES 2368 /* nibbles [4][32][16 B], sc/m [16 rows][8 sc, 8 m], d/dmin [16][2] */
#define EMBER_Q4K_SCM_OFF 2048
#define EMBER_Q4K_D_OFF 2304
#define EMBER_Q6K_TILE_BYTES 3360 /* low nibbles [4][32][16], high bits [2][32][16], sc [16][16] i8, d [16] */
#define EMBER_Q6K_HI_OFF 2048
#define EMBER_Q6K_SC_OFF 3072
#define EMBER_Q6K_D_OFF 3328
#define EMBER_Q8R_TILE_BYTES 4160 /* data [8 chunks][32 lanes][16 B] (q+128) as Q8_0, d [16 rows] fp32 */
#define EMBER_Q8R_D_OFF 4096

/* 1 when the GEMV has a tiled (mma) layout for this type. */
EMBER_HD int ember_tile_type_supported(int type)
{
	return type == EMBER_T_Q8_0 || type == EMBER_T_Q4_K || type == EMBER_T_Q6_K;
}

EMBER_HD size_t ember_tile_bytes(int type)
{
	switch (type) {
	case EMBER_T_Q8_0: return EMBER_Q8_TILE_BYTES;
	case EMBER_T_Q4_K: return EMBER_Q4K_TILE_BYTES;
	case EMBER_T_Q6_K: return EMBER_Q6K_TILE_BYTES;
	default: return 0;
	}
}

/* The same with ember's own Q8R (ember_tile_bytes stays the GGUF types': the decode kernels'
 * cursors compute it per row tile, and the extra case costs the window kernels ~2%). */
EMBER_HD size_t ember_tile_bytes_any(int type)
{
	return type == EMBER_T_Q8R ? EMBER_Q8R_TILE_BYTES : ember_tile_bytes(type);
}

/* Raw GGUF row size in bytes for n elements (n a whole number of blocks). */
EMBER_HD size_t ember_raw_row_bytes(int type, int64_t n)
{
	switch (type) {
	case EMBER_T_F32: return (size_t)n * 4;
	case EMBER_T_F16:
	case EMBER_T_BF16: return (size_t)n * 2;
	case EMBER_T_Q8_0: return (size_t)(n / 32) * 34;
	case EMBER_T_Q4_K: return (size_t)(n / 256) * 144;
	case EMBER_T_Q6_K: return (size_t)(n / 256) * 210;
	default: return 0;
	}
}

/* Element (row r, column k) of a tile step: lane, step s (0..15), register j (0..3), half h. */
EMBER_HD int ember_frag_row(int lane, int j) { return (lane >> 2) + ((j & 1) ? 8 : 0); }
EMBER_HD int ember_frag_col(int lane, int s, int j, int h) { return 16 * s + 2 * (lane & 3) + h + ((j & 2) ? 8 : 0); }

/* ---- reading one raw GGUF value (used by the repacker) ---- */

/* Q8_0: quantized int8 and the block's fp16 scale bits. */
EMBER_HD int ember_raw_q8_q(const uint8_t *row, int64_t k) { return (int8_t)row[(k / 32) * 34 + 2 + (k % 32)]; }
EMBER_HD uint16_t ember_raw_q8_d(const uint8_t *row, int64_t block)
{
	return (uint16_t)(row[block * 34] | (row[block * 34 + 1] << 8));
}

/* Q4_K: the 4-bit q of element e (0..255) of a 144-byte super-block. */
EMBER_HD int ember_raw_q4k_q(const uint8_t *blk, int e)
{
	const int c = e >> 6, w = e & 63;
	const uint8_t b = blk[16 + 32 * c + (w & 31)];
	return w < 32 ? (b & 0xF) : (b >> 4);
}

/* Q4_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
EMBER_HD void ember_raw_q4k_scale_min(const uint8_t *blk, int j, int *sc, int *m)
{
	const uint8_t *s = blk + 4;
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/* Q6_K: the 6-bit q (0..63, value = d * sc[e/16] * (q - 32)) of element e of a 210-byte block. */
EMBER_HD int ember_raw_q6k_q(const uint8_t *blk, int e)
{
	const int h = e >> 7, l = e & 127, qd = l >> 5, i = l & 31;
	const uint8_t qlb = blk[64 * h + i + (qd & 1) * 32];
	const int lo = qd >= 2 ? (qlb >> 4) : (qlb & 0xF);
	const int hi = (blk[128 + 32 * h + i] >> (2 * qd)) & 3;
	return lo | (hi << 4);
}

/* ---- repacking: writes tile (rt, kt) of a rows x n_cols matrix from its raw GGUF rows ---- */

EMBER_HD void ember_tile_repack(uint8_t *dst, int type, const uint8_t *src, int64_t rows, int64_t n_cols,
                                int64_t rt, int64_t kt)
{
	const size_t row_bytes = ember_raw_row_bytes(type, n_cols);
	const size_t tile_bytes = ember_tile_bytes(type);
	for (size_t i = 0; i < tile_bytes; i++)
		dst[i] = 0;
	for (int lane = 0; lane < 32; lane++) {
		for (int s = 0; s < 16; s++) {
			for (int j = 0; j < 4; j++) {
				for (int h = 0; h < 2; h++) {
					const int64_t r = rt * 16 + ember_frag_row(lane, j);
					const int64_t k = kt * 256 + ember_frag_col(lane, s, j, h);
					const int valid = r < rows && k < n_cols;
					const uint8_t *row = src + (size_t)r * row_bytes;
					if (type == EMBER_T_Q8_0) {
						const int q = valid ? ember_raw_q8_q(row, k) : 0;
						dst[((s >> 1) * 32 + lane) * 16 + (s & 1) * 8 + j * 2 + h] = (uint8_t)(q + 128);
					} else {
						const uint8_t *blk = row + (size_t)kt * (type == EMBER_T_Q4_K ? 144 : 210);
						const int e = (int)(k - kt * 256);
						int q = 0;
						if (valid)
							q = type == EMBER_T_Q4_K ? ember_raw_q4k_q(blk, e) : ember_raw_q6k_q(blk, e);
						const size_t word = ((size_t)(s >> 2) * 32 + lane) * 16 + (s & 3) * 4;
						const int bit = 4 * j + 16 * h;
						dst[word + bit / 8] |= (uint8_t)((q & 0xF) << (bit % 8));
						if (type == EMBER_T_Q6_K) {
							const int wi = s >> 1; /* 32-bit word holding steps 2wi, 2wi+1 */
							const size_t hword = EMBER_Q6K_HI_OFF + ((size_t)(wi >> 2) * 32 + lane) * 16 + (wi & 3) * 4;
							const int hbit = 16 * (s & 1) + 2 * j + 8 * h;
							dst[hword + hbit / 8] |= (uint8_t)(((q >> 4) & 3) << (hbit % 8));
						}
					}
				}
			}
		}
	}
	for (int r16 = 0; r16 < 16; r16++) {
		const int64_t r = rt * 16 + r16;
		if (r >= rows)
			continue;
		const uint8_t *row = src + (size_t)r * row_bytes;
		if (type == EMBER_T_Q8_0) {
			for (int b = 0; b < 8; b++) {
				const int64_t block = kt * 8 + b;
				const uint16_t d = block * 32 < n_cols ? ember_raw_q8_d(row, block) : 0;
				dst[EMBER_Q8_D_OFF + r16 * 16 + b * 2] = (uint8_t)d;
				dst[EMBER_Q8_D_OFF + r16 * 16 + b * 2 + 1] = (uint8_t)(d >> 8);
			}
		} else if (type == EMBER_T_Q4_K) {
			const uint8_t *blk = row + (size_t)kt * 144;
			for (int j = 0; j < 8; j++) {
				int sc, m;
				ember_raw_q4k_scale_min(blk, j, &sc, &m);
				dst[EMBER_Q4K_SCM_OFF + r16 * 16 + j] = (uint8_t)sc;
				dst[EMBER_Q4K_SCM_OFF + r16 * 16 + 8 + j] = (uint8_t)m;
			}
			for (int b = 0; b < 4; b++)
				dst[EMBER_Q4K_D_OFF + r16 * 4 + b] = blk[b];
		} else {
			const uint8_t *blk = row + (size_t)kt * 210;
			for (int j = 0; j < 16; j++)
				dst[EMBER_Q6K_SC_OFF + r16 * 16 + j] = blk[192 + j];
			dst[EMBER_Q6K_D_OFF + r16 * 2] = blk[208];
			dst[EMBER_Q6K_D_OFF + r16 * 2 + 1] = blk[209];
		}
	}
}

/* ---- quantizing fp16 rows into Q8R tiles ---- */

/* IEEE half bits -> float, exact (normals, subnormals, zeros, infinities, NaN). */
EMBER_HD float ember_half_bits_f32(uint16_t h)
{
	const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
	float v;
	if (ex == 0)
		v = ldexpf((float)man, -24);
	else if (ex == 31)
		v = man ? NAN : INFINITY;
	else
		v = ldexpf((float)(man | 0x400u), (int)ex - 25);
	return sign ? -v : v;
}

/* Writes Q8R tile (rt, kt) of a rows x n_cols matrix of fp16 rows (src, n_cols halves apart): per
 * row of the tile d = max |w| / 127 over its (up to) 256 columns, q = rint(w / d) in -127..127,
 * stored q + 128 at the Q8_0 fragment positions; rows and columns past the matrix are q = 0, d = 0.
 * A non-finite weight gives its row d = NaN, as it makes an fp16 product non-finite. */
EMBER_HD void ember_tile_quant_q8r(uint8_t *dst, const uint16_t *src, int64_t rows, int64_t n_cols, int64_t rt, int64_t kt)
{
	float d[16];
	for (int r16 = 0; r16 < 16; r16++) {
		const int64_t r = rt * 16 + r16;
		float amax = 0.0f;
		for (int c = 0; c < 256 && r < rows && kt * 256 + c < n_cols; c++) {
			const float a = fabsf(ember_half_bits_f32(src[(size_t)r * n_cols + kt * 256 + c]));
			amax = a > amax || a != a ? a : amax;
		}
		d[r16] = amax / 127.0f;
		memcpy(dst + EMBER_Q8R_D_OFF + 4 * r16, &d[r16], 4);
	}
	for (int lane = 0; lane < 32; lane++)
		for (int s = 0; s < 16; s++)
			for (int j = 0; j < 4; j++)
				for (int h = 0; h < 2; h++) {
					const int r16 = ember_frag_row(lane, j);
					const int64_t r = rt * 16 + r16, k = kt * 256 + ember_frag_col(lane, s, j, h);
					int q = 0;
					if (r < rows && k < n_cols && d[r16] > 0.0f) {
						const float v = rintf(ember_half_bits_f32(src[(size_t)r * n_cols + k]) / d[r16]);
						q = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
					}
					dst[((s >> 1) * 32 + lane) * 16 + (s & 1) * 8 + j * 2 + h] = (uint8_t)(q + 128);
				}
}

/* ---- turning one step's packed words into the 4 A-fragment registers (fp16 pairs) ---- */

EMBER_HD uint32_t ember_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
	return __byte_perm(a, b, sel);
#else
	uint8_t bytes[8];
	uint32_t out = 0;
	for (int i = 0; i < 4; i++) {
		bytes[i] = (uint8_t)(a >> (8 * i));
		bytes[4 + i] = (uint8_t)(b >> (8 * i));
	}
	for (int i = 0; i < 4; i++)
		out |= (uint32_t)bytes[(sel >> (4 * i)) & 7] << (8 * i);
	return out;
#endif
}

/* Q8_0: 8 bytes (q + 128) -> fp16 pairs 1152 + q for rows (gid, gid+8, gid, gid+8). */
EMBER_HD void ember_q8_regs(uint32_t wa, uint32_t wb, uint32_t r[4])
{
	r[0] = ember_prmt(wa, 0x64646464u, 0x4140);
	r[1] = ember_prmt(wa, 0x64646464u, 0x4342);
	r[2] = ember_prmt(wb, 0x64646464u, 0x4140);
	r[3] = ember_prmt(wb, 0x64646464u, 0x4342);
}

/* Q4_K: one word of 8 nibbles -> fp16 pairs 1024 + q (rows gid: r[0], r[2]) and 1024 + 16 q
 * (rows gid+8: r[1], r[3]); the x16 is undone in fp32 after the mma. */
EMBER_HD void ember_q4k_regs(uint32_t w, uint32_t r[4])
{
	const uint32_t w8 = w >> 8;
	r[0] = (w & 0x000F000Fu) | 0x64006400u;
	r[1] = (w & 0x00F000F0u) | 0x64006400u;
	r[2] = (w8 & 0x000F000Fu) | 0x64006400u;
	r[3] = (w8 & 0x00F000F0u) | 0x64006400u;
}

/* Q6_K: low-nibble word plus the step's 16 high-bit bits -> 1024 + q6 (rows gid) and
 * 1024 + 16 q6 (rows gid+8). q6 <= 63, so 16 q6 <= 1008 still fits the 10-bit mantissa. */
EMBER_HD void ember_q6k_regs(uint32_t w, uint32_t hi16, uint32_t r[4])
{
	const uint32_t w8 = w >> 8;
	const uint32_t hs = (hi16 & 0xFFu) | ((hi16 & 0xFF00u) << 8);
	r[0] = (w & 0x000F000Fu) | ((hs << 4) & 0x00300030u) | 0x64006400u;
	r[1] = (w & 0x00F000F0u) | ((hs << 6) & 0x03000300u) | 0x64006400u;
	r[2] = (w8 & 0x000F000Fu) | (hs & 0x00300030u) | 0x64006400u;
	r[3] = (w8 & 0x00F000F0u) | ((hs << 2) & 0x03000300u) | 0x64006400u;
}

#endif

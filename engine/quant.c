/*
 * quant.c - ember's weight formats: the type table, fp16/bf16 conversion, row dequantization in
 * the exact evaluation order of ggml's reference code, and quantizers from f32. Compiled with
 * -ffp-contract=off so that `d1 * q - m1` is never fused into an FMA: dequantized values are then
 * bit-identical to the formulas. The fused dot products live in quant_dot.c (FMA allowed there).
 */
#include "quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(EMBER_NO_CLONES)
/* AVX2 and baseline builds of the dequantizers; without contraction both give identical bits. */
#define EMBER_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EMBER_HOT
#endif

#define QK8_0 32
#define QK_K 256
#define Q8_0_BYTES 34   /* d fp16, qs[32] int8 */
#define Q4_K_BYTES 144  /* d fp16, dmin fp16, scales[12], qs[128] */
#define Q6_K_BYTES 210  /* ql[128], qh[64], scales[16] int8, d fp16 (last) */

struct type_info {
	const char *name;
	int block_elems;
	int block_bytes;
};

static const struct type_info *type_info(int type)
{
	static const struct type_info f32 = {"F32", 1, 4}, f16 = {"F16", 1, 2}, bf16 = {"BF16", 1, 2},
	                              q8_0 = {"Q8_0", QK8_0, Q8_0_BYTES}, q4_k = {"Q4_K", QK_K, Q4_K_BYTES},
	                              q6_k = {"Q6_K", QK_K, Q6_K_BYTES};
	switch (type) {
	case EMBER_TYPE_F32: return &f32;
	case EMBER_TYPE_F16: return &f16;
	case EMBER_TYPE_BF16: return &bf16;
	case EMBER_TYPE_Q8_0: return &q8_0;
	case EMBER_TYPE_Q4_K: return &q4_k;
	case EMBER_TYPE_Q6_K: return &q6_k;
	default: return NULL;
	}
}

int ember_type_supported(int type) { return type_info(type) != NULL; }

size_t ember_type_bytes(int type, int64_t n)
{
	const struct type_info *ti = type_info(type);
	if (!ti || n < 0 || n % ti->block_elems != 0)
		return 0;
	return (size_t)(n / ti->block_elems) * (size_t)ti->block_bytes;
}

size_t ember_type_row_size(enum ember_type type, int64_t n) { return ember_type_bytes((int)type, n); }

int ember_type_block_elems(enum ember_type type)
{
	const struct type_info *ti = type_info((int)type);
	return ti ? ti->block_elems : 0;
}

const char *ember_type_name(enum ember_type type)
{
	const struct type_info *ti = type_info((int)type);
	return ti ? ti->name : NULL;
}

/* ---- scalar conversions ---- */

static inline float bits_to_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t f32_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline uint16_t load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline void store_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Branch-free half -> float (vectorizes): normal numbers are re-biased by shifting the half's
 * exponent+mantissa into float position and multiplying by 2^-112; subnormals are built as
 * (0.5 + m * 2^-24) - 0.5 in float, which is exact. Exponent 31 lands on float inf/NaN. */
static inline float half_to_f32(uint16_t h)
{
	uint32_t w = (uint32_t)h << 16;
	uint32_t sign = w & 0x80000000u;
	uint32_t two_w = w + w;
	float normalized = bits_to_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
	float denormalized = bits_to_f32((two_w >> 17) | (126u << 23)) - 0.5f;
	uint32_t magnitude = two_w < (1u << 27) ? f32_to_bits(denormalized) : f32_to_bits(normalized);
	return bits_to_f32(sign | magnitude);
}

float ember_fp16_to_f32(uint16_t h) { return half_to_f32(h); }

uint16_t ember_f32_to_fp16(float f)
{
	uint32_t x = f32_to_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	x &= 0x7fffffffu;
	if (x >= 0x7f800000u) /* inf or NaN (NaN stays NaN, made quiet) */
		return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
	if (x >= 0x477ff000u) /* >= 65520 rounds to inf */
		return (uint16_t)(sign | 0x7c00u);
	uint32_t exponent = x >> 23;
	if (exponent < 113) { /* below 2^-14: a half subnormal (or zero) in units of 2^-24 */
		uint32_t mant = (x & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - exponent; /* >= 14 */
		if (exponent == 0 || shift > 24)
			return sign;
		uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	uint32_t h = ((exponent - 112) << 10) | ((x >> 13) & 0x3ffu);
	uint32_t rem = x & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

float ember_bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

uint16_t ember_f32_to_bf16(float f)
{
	uint32_t x = f32_to_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- dequantization (ggml's dequantize_row_* evaluation order) ---- */

static void dequant_q8_0(const uint8_t *src, float *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, src += Q8_0_BYTES, dst += QK8_0) {
		const float d = half_to_f32(load_u16(src));
		const int8_t *qs = (const int8_t *)(src + 2);
		for (int j = 0; j < QK8_0; j++)
			dst[j] = qs[j] * d;
	}
}

/* The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static inline void q4_k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

static void dequant_q4_k(const uint8_t *src, float *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, src += Q4_K_BYTES) {
		const float d = half_to_f32(load_u16(src));
		const float dmin = half_to_f32(load_u16(src + 2));
		const uint8_t *scales = src + 4, *q = src + 16;
		for (int c = 0; c < 4; c++, q += 32) {
			uint8_t sc, m;
			q4_k_scale_min(2 * c, scales, &sc, &m);
			const float d1 = d * sc, m1 = dmin * m;
			q4_k_scale_min(2 * c + 1, scales, &sc, &m);
			const float d2 = d * sc, m2 = dmin * m;
			for (int l = 0; l < 32; l++)
				*dst++ = d1 * (q[l] & 0xF) - m1;
			for (int l = 0; l < 32; l++)
				*dst++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

static void dequant_q6_k(const uint8_t *src, float *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, src += Q6_K_BYTES) {
		const float d = half_to_f32(load_u16(src + 208));
		const uint8_t *ql = src, *qh = src + 128;
		const int8_t *sc = (const int8_t *)(src + 192);
		for (int half = 0; half < 2; half++, dst += 128, ql += 64, qh += 32, sc += 8) {
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
				int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
				int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
				dst[l + 0] = d * sc[is + 0] * q1;
				dst[l + 32] = d * sc[is + 2] * q2;
				dst[l + 64] = d * sc[is + 4] * q3;
				dst[l + 96] = d * sc[is + 6] * q4;
			}
		}
	}
}

EMBER_HOT
void ember_dequantize_row(enum ember_type type, const void *src, float *dst, int64_t n)
{
	const uint8_t *p = src;
	switch (type) {
	case EMBER_TYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case EMBER_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = half_to_f32(load_u16(p + 2 * i));
		break;
	case EMBER_TYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = bits_to_f32((uint32_t)load_u16(p + 2 * i) << 16);
		break;
	case EMBER_TYPE_Q8_0: dequant_q8_0(p, dst, n / QK8_0); break;
	case EMBER_TYPE_Q4_K: dequant_q4_k(p, dst, n / QK_K); break;
	case EMBER_TYPE_Q6_K: dequant_q6_k(p, dst, n / QK_K); break;
	}
}

/* ---- quantizers ---- */

static void quant_q8_0(const float *x, uint8_t *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, x += QK8_0, dst += Q8_0_BYTES) {
		float amax = 0.0f;
		for (int j = 0; j < QK8_0; j++)
			amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
		const float d = amax / 127.0f;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		store_u16(dst, ember_f32_to_fp16(d));
		for (int j = 0; j < QK8_0; j++)
			dst[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
	}
}

/* Fits one 32-value Q4_K sub-block as x ~ scale * q - min (q in 0..15, min >= 0): tries a few
 * quantization grids around the min/max range, refits scale and min by least squares for each,
 * and keeps the one with the lowest squared error. */
static void q4_k_fit_subblock(const float *x, float *out_scale, float *out_min)
{
	float lo = x[0], hi = x[0];
	for (int i = 1; i < 32; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	if (lo > 0.0f)
		lo = 0.0f;
	if (hi <= lo) {
		*out_scale = 0.0f;
		*out_min = -lo;
		return;
	}
	float sx = 0.0f;
	for (int i = 0; i < 32; i++)
		sx += x[i];
	float best_scale = (hi - lo) / 15.0f, best_min = -lo, best_err = INFINITY;
	static const float steps[] = {15.0f, 14.5f, 15.5f, 14.0f, 16.0f};
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		const float iscale = steps[s] / (hi - lo);
		float q[32], sq = 0, sqq = 0, sxq = 0;
		for (int i = 0; i < 32; i++) {
			int v = (int)lrintf(iscale * (x[i] - lo));
			q[i] = (float)(v < 0 ? 0 : v > 15 ? 15 : v);
			sq += q[i];
			sqq += q[i] * q[i];
			sxq += x[i] * q[i];
		}
		/* least squares for x = scale * q + offset */
		float det = 32.0f * sqq - sq * sq;
		if (det <= 0)
			continue;
		float scale = (32.0f * sxq - sq * sx) / det, offset = (sx - scale * sq) / 32.0f;
		if (offset > 0) { /* the format needs offset = -min <= 0: refit the scale alone */
			offset = 0;
			scale = sqq > 0 ? sxq / sqq : 0;
		}
		if (scale <= 0)
			continue;
		float err = 0;
		for (int i = 0; i < 32; i++) {
			float diff = scale * q[i] + offset - x[i];
			err += diff * diff;
		}
		if (err < best_err) {
			best_err = err;
			best_scale = scale;
			best_min = -offset;
		}
	}
	*out_scale = best_scale;
	*out_min = best_min;
}

static void quant_q4_k(const float *x, uint8_t *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, x += QK_K, dst += Q4_K_BYTES) {
		float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
		for (int j = 0; j < 8; j++) {
			q4_k_fit_subblock(x + 32 * j, &scale[j], &min[j]);
			max_scale = scale[j] > max_scale ? scale[j] : max_scale;
			max_min = min[j] > max_min ? min[j] : max_min;
		}
		uint16_t d_half = ember_f32_to_fp16(max_scale / 63.0f);
		uint16_t dmin_half = ember_f32_to_fp16(max_min / 63.0f);
		const float d = half_to_f32(d_half), dmin = half_to_f32(dmin_half);
		uint8_t sc[8], m[8];
		for (int j = 0; j < 8; j++) {
			int vs = d > 0 ? (int)lrintf(scale[j] / d) : 0;
			int vm = dmin > 0 ? (int)lrintf(min[j] / dmin) : 0;
			sc[j] = (uint8_t)(vs < 0 ? 0 : vs > 63 ? 63 : vs);
			m[j] = (uint8_t)(vm < 0 ? 0 : vm > 63 ? 63 : vm);
		}
		store_u16(dst, d_half);
		store_u16(dst + 2, dmin_half);
		uint8_t *s = dst + 4;
		for (int j = 0; j < 4; j++) {
			s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
			s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
			s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
		}
		uint8_t q[QK_K];
		for (int j = 0; j < 8; j++) {
			const float ds = d * sc[j], dm = dmin * m[j];
			for (int i = 0; i < 32; i++) {
				int v = ds > 0 ? (int)lrintf((x[32 * j + i] + dm) / ds) : 0;
				q[32 * j + i] = (uint8_t)(v < 0 ? 0 : v > 15 ? 15 : v);
			}
		}
		uint8_t *qs = dst + 16;
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; l++)
				qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
	}
}

static void quant_q6_k(const float *x, uint8_t *dst, int64_t nblocks)
{
	for (int64_t b = 0; b < nblocks; b++, x += QK_K, dst += Q6_K_BYTES) {
		/* Per 16-value group: a signed scale mapping the largest-magnitude value to -32. */
		float scale[16], max_scale = 0.0f;
		for (int j = 0; j < 16; j++) {
			float amax = 0.0f, vmax = 0.0f;
			for (int i = 0; i < 16; i++) {
				float v = x[16 * j + i];
				if (fabsf(v) > amax) {
					amax = fabsf(v);
					vmax = v;
				}
			}
			scale[j] = vmax / -32.0f;
			if (fabsf(scale[j]) > fabsf(max_scale))
				max_scale = scale[j];
		}
		uint8_t *ql = dst, *qh = dst + 128, *sc_out = dst + 192;
		float d = 0.0f;
		int8_t sc[16] = {0};
		if (max_scale != 0.0f) {
			const float iscale = -128.0f / max_scale;
			d = half_to_f32(ember_f32_to_fp16(1.0f / iscale));
			for (int j = 0; j < 16; j++) {
				int v = (int)lrintf(iscale * scale[j]);
				sc[j] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
			}
		}
		store_u16(dst + 208, ember_f32_to_fp16(d));
		memcpy(sc_out, sc, 16);
		uint8_t q[QK_K];
		for (int j = 0; j < 16; j++) {
			const float ds = d * sc[j];
			for (int i = 0; i < 16; i++) {
				int v = ds != 0.0f ? (int)lrintf(x[16 * j + i] / ds) : 0;
				v = v < -32 ? -32 : v > 31 ? 31 : v;
				q[16 * j + i] = (uint8_t)(v + 32);
			}
		}
		for (int half = 0; half < 2; half++) {
			const uint8_t *qq = q + 128 * half;
			for (int l = 0; l < 32; l++) {
				uint8_t q1 = qq[l], q2 = qq[l + 32], q3 = qq[l + 64], q4 = qq[l + 96];
				ql[64 * half + l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
				ql[64 * half + l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
				qh[32 * half + l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
			}
		}
	}
}

EMBER_HOT
void ember_quantize_row(enum ember_type type, const float *src, void *dst, int64_t n)
{
	uint8_t *p = dst;
	switch (type) {
	case EMBER_TYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case EMBER_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			store_u16(p + 2 * i, ember_f32_to_fp16(src[i]));
		break;
	case EMBER_TYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			store_u16(p + 2 * i, ember_f32_to_bf16(src[i]));
		break;
	case EMBER_TYPE_Q8_0: quant_q8_0(src, p, n / QK8_0); break;
	case EMBER_TYPE_Q4_K: quant_q4_k(src, p, n / QK_K); break;
	case EMBER_TYPE_Q6_K: quant_q6_k(src, p, n / QK_K); break;
	}
}

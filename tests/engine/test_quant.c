/*
 * test_quant.c - weight formats against independent, element-by-element implementations of the
 * block formulas written here from the format description (engine-anchors.md 1.2), not from
 * quant.c: fp16/bf16 conversion (all 65536 halves), dequantization of random Q8_0/Q4_K/Q6_K
 * blocks (bit-exact), quantize -> dequantize error bounds, and the dot kernels' promise that every
 * path gives the same bits. Compiled with -ffp-contract=off like quant.c.
 */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "quant.h"
#include "quant_dot.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}
static float gauss(void)
{
	double u1 = (rnd() + 1.0) / 4294967297.0, u2 = rnd() / 4294967296.0;
	return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- reference conversions, straight from IEEE 754 ---- */

static float ref_half(uint16_t h)
{
	int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	float v;
	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(1024 + m), e - 25);
	return sign ? -v : v;
}

static float ref_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

static void test_conversions(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float a = ember_fp16_to_f32((uint16_t)h), b = ref_half((uint16_t)h);
		CHECK(same_float(a, b), "fp16 0x%04x -> %g, expected %g", h, a, b);
		if (!isnan(b))
			CHECK(ember_f32_to_fp16(b) == h, "fp16 0x%04x does not round-trip (got 0x%04x)", h, ember_f32_to_fp16(b));
		CHECK(same_float(ember_bf16_to_f32((uint16_t)h), ref_bf16((uint16_t)h)), "bf16 0x%04x", h);
		if (!isnan(ref_bf16((uint16_t)h)))
			CHECK(ember_f32_to_bf16(ref_bf16((uint16_t)h)) == h, "bf16 0x%04x does not round-trip", h);
	}
	CHECK(isnan(ember_fp16_to_f32(ember_f32_to_fp16(NAN))), "fp16 NaN");
	CHECK(isnan(ember_bf16_to_f32(ember_f32_to_bf16(NAN))), "bf16 NaN");
	CHECK(ember_f32_to_fp16(65520.0f) == 0x7c00 && ember_f32_to_fp16(65519.0f) == 0x7bff, "fp16 overflow edge");
	/* Random floats round to the nearest half (ties to even). */
	for (int i = 0; i < 200000; i++) {
		uint32_t u = rnd() << 16 ^ rnd();
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f) || fabsf(f) >= 65504.0f)
			continue;
		uint16_t h = ember_f32_to_fp16(f), sign = h & 0x8000, mag = h & 0x7fff;
		double err = fabs((double)f - ref_half(h));
		for (int step = -1; step <= 1; step += 2) {
			int nm = mag + step;
			if (nm < 0 || nm > 0x7bff)
				continue;
			double other = fabs((double)f - ref_half((uint16_t)(sign | nm)));
			CHECK(err < other || (err == other && (mag & 1) == 0), "fp16 of %.9g is 0x%04x, not the nearest", f, h);
		}
		uint16_t b = ember_f32_to_bf16(f), bsign = b & 0x8000, bmag = b & 0x7fff;
		double eb = fabs((double)f - ref_bf16(b));
		for (int step = -1; step <= 1; step += 2) {
			int nm = bmag + step;
			if (nm < 0 || nm >= 0x7f80)
				continue;
			double other = fabs((double)f - ref_bf16((uint16_t)(bsign | nm)));
			CHECK(eb < other || (eb == other && (bmag & 1) == 0), "bf16 of %.9g is 0x%04x, not the nearest", f, b);
		}
	}
}

/* ---- reference dequantization, one element at a time ---- */

static float ld_half(const uint8_t *p) { return ref_half((uint16_t)(p[0] | p[1] << 8)); }

static float ref_q8_0(const uint8_t *block, int e) { return (float)(int8_t)block[2 + e] * ld_half(block); }

static float ref_q4_k(const uint8_t *block, int e)
{
	const float d = ld_half(block), dmin = ld_half(block + 2);
	const uint8_t *s = block + 4, *qs = block + 16;
	int c = e / 64, within = e % 64, j = 2 * c + within / 32, sc, m, q;
	q = within < 32 ? qs[32 * c + within] & 0xF : qs[32 * c + within - 32] >> 4;
	if (j < 4) {
		sc = s[j] & 63;
		m = s[j + 4] & 63;
	} else {
		sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
	return (d * (float)sc) * (float)q - dmin * (float)m;
}

static float ref_q6_k(const uint8_t *block, int e)
{
	const uint8_t *ql = block, *qh = block + 128;
	const int8_t *sc = (const int8_t *)(block + 192);
	const float d = ld_half(block + 208);
	int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
	int low = (k & 1) ? ql[64 * h + l + 32] : ql[64 * h + l];
	low = k < 2 ? low & 0xF : low >> 4;
	int high = (qh[32 * h + l] >> (2 * k)) & 3;
	int q = (low | high << 4) - 32;
	return (d * (float)sc[8 * h + l / 16 + 2 * k]) * (float)q;
}

static float ref_elem(enum ember_type t, const uint8_t *row, int64_t e)
{
	switch (t) {
	case EMBER_TYPE_Q8_0: return ref_q8_0(row + (e / 32) * 34, (int)(e % 32));
	case EMBER_TYPE_Q4_K: return ref_q4_k(row + (e / 256) * 144, (int)(e % 256));
	case EMBER_TYPE_Q6_K: return ref_q6_k(row + (e / 256) * 210, (int)(e % 256));
	case EMBER_TYPE_F16: return ld_half(row + 2 * e);
	case EMBER_TYPE_BF16: return ref_bf16((uint16_t)(row[2 * e] | row[2 * e + 1] << 8));
	default: {
		float f;
		memcpy(&f, row + 4 * e, 4);
		return f;
	}
	}
}

static const enum ember_type all_types[] = {EMBER_TYPE_F32, EMBER_TYPE_F16, EMBER_TYPE_BF16,
                                           EMBER_TYPE_Q8_0, EMBER_TYPE_Q4_K, EMBER_TYPE_Q6_K};

/* Random bytes, with every fp16 scale replaced by a finite value of either sign. */
static void random_row(enum ember_type t, uint8_t *row, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		row[i] = (uint8_t)rnd();
	uint16_t h;
	for (size_t b = 0; t == EMBER_TYPE_Q8_0 && b < bytes / 34; b++) {
		h = ember_f32_to_fp16(gauss() * 0.01f);
		memcpy(row + 34 * b, &h, 2);
	}
	for (size_t b = 0; t == EMBER_TYPE_Q4_K && b < bytes / 144; b++) {
		h = ember_f32_to_fp16(gauss() * 0.01f);
		memcpy(row + 144 * b, &h, 2);
		h = ember_f32_to_fp16(gauss() * 0.01f);
		memcpy(row + 144 * b + 2, &h, 2);
	}
	for (size_t b = 0; t == EMBER_TYPE_Q6_K && b < bytes / 210; b++) {
		h = ember_f32_to_fp16(gauss() * 0.001f);
		memcpy(row + 210 * b + 208, &h, 2);
	}
	for (size_t i = 0; (t == EMBER_TYPE_F16 || t == EMBER_TYPE_BF16) && i < bytes / 2; i++) {
		h = t == EMBER_TYPE_F16 ? ember_f32_to_fp16(gauss()) : ember_f32_to_bf16(gauss());
		memcpy(row + 2 * i, &h, 2);
	}
	for (size_t i = 0; t == EMBER_TYPE_F32 && i < bytes / 4; i++) {
		float f = gauss();
		memcpy(row + 4 * i, &f, 4);
	}
}

static void test_dequant(void)
{
	const int64_t n = 1024;
	uint8_t row[4096 + 64];
	float out[1024];
	CHECK(ember_type_row_size(EMBER_TYPE_Q8_0, 64) == 68 && ember_type_row_size(EMBER_TYPE_Q4_K, 512) == 288 &&
	      ember_type_row_size(EMBER_TYPE_Q6_K, 256) == 210 && ember_type_row_size(EMBER_TYPE_BF16, 3) == 6,
	      "row sizes");
	CHECK(ember_type_bytes(EMBER_TYPE_Q4_K, 100) == 0 && ember_type_bytes(2, 32) == 0, "partial block / unsupported");
	CHECK(ember_type_block_elems(EMBER_TYPE_Q6_K) == 256 && strcmp(ember_type_name(EMBER_TYPE_Q4_K), "Q4_K") == 0 &&
	      ember_type_name((enum ember_type)2) == NULL, "type table");
	for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++) {
		enum ember_type t = all_types[ti];
		int mismatches = 0;
		for (int trial = 0; trial < 200; trial++) {
			random_row(t, row, ember_type_row_size(t, n));
			ember_dequantize_row(t, row, out, n);
			for (int64_t e = 0; e < n; e++) {
				float want = ref_elem(t, row, e);
				if (!same_float(out[e], want) && mismatches++ < 5)
					CHECK(0, "%s element %lld: %.9g, reference %.9g", ember_type_name(t), (long long)e, out[e], want);
			}
		}
		CHECK(mismatches == 0, "%s: %d mismatching elements", ember_type_name(t), mismatches);
	}
}

/* Quantize Gaussian (and awkward) data, decode with the reference, bound the error. */
static void test_quantize(void)
{
	const int64_t n = 256 * 64;
	float *x = malloc(n * sizeof(float));
	uint8_t *q = malloc((size_t)n * 4);
	struct { enum ember_type t; double max_rel_rms; } bounds[] = {
		{EMBER_TYPE_F32, 0.0}, {EMBER_TYPE_F16, 1e-3}, {EMBER_TYPE_BF16, 5e-3},
		{EMBER_TYPE_Q8_0, 0.01}, {EMBER_TYPE_Q6_K, 0.03}, {EMBER_TYPE_Q4_K, 0.09},
	};
	for (int dataset = 0; dataset < 4; dataset++) {
		for (int64_t i = 0; i < n; i++) {
			float g = gauss();
			x[i] = dataset == 0 ? g * 0.02f                      /* typical weights */
			       : dataset == 1 ? (i % 97 == 0 ? 40.0f : g)     /* outliers */
			       : dataset == 2 ? 0.5f + 0.01f * g              /* all positive, offset */
			                      : (i / 256) % 2 ? 0.0f : g;     /* all-zero blocks */
		}
		for (size_t bi = 0; bi < sizeof(bounds) / sizeof(bounds[0]); bi++) {
			enum ember_type t = bounds[bi].t;
			ember_quantize_row(t, x, q, n);
			double err = 0, ref = 0, max_block_err = 0;
			for (int64_t i = 0; i < n; i++) {
				double y = ref_elem(t, q, i);
				err += (y - x[i]) * (y - x[i]);
				ref += (double)x[i] * x[i];
				if (t == EMBER_TYPE_Q8_0) { /* within half a step, plus the fp16 rounding of d (127 d 2^-11) */
					double amax = 0;
					for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; j++)
						amax = fmax(amax, fabs(x[j]));
					max_block_err = fmax(max_block_err, fabs(y - x[i]) / (amax / 127 * (0.5 + 127.0 / 2048) * 1.01 + 1e-30));
				}
				if (dataset == 3 && (i / 256) % 2)
					CHECK(y == 0.0, "%s: an all-zero block decodes to %g", ember_type_name(t), y);
			}
			double rel = sqrt(err / ref);
			/* the outlier set stresses small-scale formats; allow 2x there */
			double bound = bounds[bi].max_rel_rms * (dataset == 1 ? 2.0 : 1.0);
			CHECK(rel <= bound, "%s dataset %d: relative RMS error %.4f above %.4f", ember_type_name(t), dataset, rel, bound);
			if (dataset == 0)
				printf("quantize %s: relative RMS error %.4f (bound %.4f)\n", ember_type_name(t), rel, bound);
			CHECK(max_block_err <= 1.0, "Q8_0 element error above half a quantization step (%.3f)", max_block_err);
		}
	}
	free(x);
	free(q);
}

/* Every dot path gives the same bits, and matches a double-precision dot closely. */
static void test_dots(void)
{
	const int64_t n = 1024;
	uint8_t *row = malloc(4 * n);
	float *w = malloc(4 * n * sizeof(float)), *x = malloc(3 * n * sizeof(float)), out[4 * 3];
	for (int64_t i = 0; i < 3 * n; i++)
		x[i] = gauss();
	for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++) {
		enum ember_type t = all_types[ti];
		for (int trial = 0; trial < 20; trial++) {
			random_row(t, row, ember_type_row_size(t, n));
			ember_dequantize_row(t, row, w, n);
			float fused = ember_dot_row(t, row, x, n), plain = ember_dot_f32(w, x, n);
			double exact = 0, mag = 0;
			for (int64_t i = 0; i < n; i++) {
				exact += (double)w[i] * x[i];
				mag += fabs((double)w[i] * x[i]);
			}
			CHECK(same_float(fused, plain), "%s: fused dot %.9g != dequantize+dot %.9g", ember_type_name(t), fused, plain);
			CHECK(fabs(plain - exact) <= 1e-5 * mag + 1e-30, "%s: dot %.9g vs exact %.9g", ember_type_name(t), plain, exact);
		}
	}
	/* Panel kernel over odd shapes and lengths (tails not a multiple of 16). */
	int64_t lengths[] = {1, 15, 16, 17, 100, 256, 1000};
	for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
		int64_t len = lengths[li];
		for (int64_t i = 0; i < 4 * n; i++)
			w[i] = gauss();
		for (int rows = 1; rows <= 4; rows++)
			for (int toks = 1; toks <= 3; toks++) {
				ember_dot_panel(w, len, rows, x, len, toks, len, out, rows);
				for (int r = 0; r < rows; r++)
					for (int t = 0; t < toks; t++)
						CHECK(same_float(out[t * rows + r], ember_dot_f32(w + r * len, x + t * len, len)),
						      "panel %dx%d len %lld: element (%d,%d) differs", rows, toks, (long long)len, r, t);
			}
	}
	free(row);
	free(w);
	free(x);
}

int main(void)
{
	test_conversions();
	test_dequant();
	test_quantize();
	test_dots();
	return check_exit("test_quant");
}

/*
 * quant_dot.c - fused dot products and the f32 panel kernel of the CPU backend. All of them use
 * one accumulation scheme (element i into lane i % 16 of one 16-float vector, fixed reduction
 * tree) so that the fused quantized dot, dequantize-then-dot and the tiled matrix product agree
 * bit for bit. Each hot function is built three times: AVX-512 (4x4 tiles of rows x tokens: 16
 * accumulators fit its 32 registers), AVX2+FMA (2x2 tiles) and baseline SSE2; the loader picks one
 * per machine. Dequantization itself is in quant.c (compiled without FMA contraction).
 */
#include "quant.h"
#include "quant_dot.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(EMBER_NO_CLONES)
#define EMBER_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define EMBER_HAVE_CLONES 1
#else
#define EMBER_HOT
#define EMBER_HAVE_CLONES 0
#endif

#define INLINE static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));

INLINE v16f load16(const float *p)
{
	v16f v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Lanes 0..15 summed as ((l[j] + l[j+8]) pairs, then +4, then +2, then +1). */
float ember_dot_reduce(const float *lanes)
{
	float s8[8], s4[4];
	for (int j = 0; j < 8; j++)
		s8[j] = lanes[j] + lanes[j + 8];
	for (int j = 0; j < 4; j++)
		s4[j] = s8[j] + s8[j + 4];
	float s0 = s4[0] + s4[2], s1 = s4[1] + s4[3];
	return s0 + s1;
}

INLINE float reduce_vec(v16f acc)
{
	float lanes[16];
	memcpy(lanes, &acc, sizeof(lanes));
	return ember_dot_reduce(lanes);
}

/* Accumulates a[0..n) * b[0..n) into acc, the first element being element `start` of the dot
 * (a multiple of 16 except possibly for the final call of a dot). */
INLINE void acc_span(v16f *acc, const float *a, const float *b, int64_t n, int64_t start)
{
	int64_t i = 0;
	v16f s = *acc;
	for (; i + 16 <= n; i += 16)
		s += load16(a + i) * load16(b + i);
	if (i < n) {
		float lanes[16];
		memcpy(lanes, &s, sizeof(lanes));
		for (; i < n; i++)
			lanes[(start + i) % 16] += a[i] * b[i];
		memcpy(&s, lanes, sizeof(lanes));
	}
	*acc = s;
}

EMBER_HOT
float ember_dot_f32(const float *a, const float *b, int64_t n)
{
	v16f acc = {0};
	acc_span(&acc, a, b, n, 0);
	return reduce_vec(acc);
}

EMBER_HOT
float ember_dot_row(enum ember_type type, const void *row, const float *x, int64_t n)
{
	float out;
	ember_dot_rows(type, row, 0, 1, x, n, &out);
	return out;
}

/* R rows (R <= 4 after inlining) against x: each 1024-element chunk of each row is dequantized
 * into an L1 buffer (16 KiB for four rows; smaller chunks cost more in call overhead than they
 * save in cache), then the R independent accumulators advance together, which keeps the FMA
 * units busy (one accumulator alone is a serial chain of dependent FMAs). */
INLINE void dot_rows_group(enum ember_type type, const uint8_t *rows, size_t row_bytes, const int R, const float *x,
                           int64_t n, float *out)
{
	float tmp[4][1024];
	v16f acc[4] = {{0}};
	const int64_t chunk = 1024;
	const size_t chunk_bytes = ember_type_bytes((int)type, chunk);
	for (int64_t i = 0; i < n; i += chunk) {
		const int64_t len = n - i < chunk ? n - i : chunk;
		const float *w[4];
		for (int r = 0; r < R; r++) {
			const uint8_t *src = rows + (size_t)r * row_bytes + (size_t)(i / chunk) * chunk_bytes;
			if (type == EMBER_TYPE_F32) {
				w[r] = (const float *)src;
			} else {
				ember_dequantize_row(type, src, tmp[r], len);
				w[r] = tmp[r];
			}
		}
		int64_t j = 0;
		for (; j + 16 <= len; j += 16) {
			const v16f xv = load16(x + i + j);
			for (int r = 0; r < R; r++)
				acc[r] += load16(w[r] + j) * xv;
		}
		if (j < len) /* only a row's final chunk can end off a multiple of 16 */
			for (int r = 0; r < R; r++) {
				v16f a = acc[r]; /* a copy: taking acc's address would keep it out of registers */
				acc_span(&a, w[r] + j, x + i + j, len - j, i + j);
				acc[r] = a;
			}
	}
	for (int r = 0; r < R; r++)
		out[r] = reduce_vec(acc[r]);
}

EMBER_HOT
void ember_dot_rows(enum ember_type type, const void *rows, size_t row_bytes, int n_rows, const float *x, int64_t n,
                    float *out)
{
	const uint8_t *p = rows;
	int r = 0;
	for (; r + 4 <= n_rows; r += 4)
		dot_rows_group(type, p + (size_t)r * row_bytes, row_bytes, 4, x, n, out + r);
	for (; r < n_rows; r++)
		dot_rows_group(type, p + (size_t)r * row_bytes, row_bytes, 1, x, n, out + r);
}

/* An R x T tile of dots (R, T <= 4 compile-time after inlining); accumulators stay in registers. */
INLINE void tile(const float *w, int64_t ldw, const int rows, const float *x, int64_t ldx, const int toks, int64_t n,
                 float *out, int64_t ldo)
{
	v16f acc[4][4] = {{{0}}};
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		v16f xv[4];
		for (int t = 0; t < toks; t++)
			xv[t] = load16(x + t * ldx + i);
		for (int r = 0; r < rows; r++) {
			const v16f wv = load16(w + r * ldw + i);
			for (int t = 0; t < toks; t++)
				acc[r][t] += wv * xv[t];
		}
	}
	for (int r = 0; r < rows; r++)
		for (int t = 0; t < toks; t++) {
			v16f a = acc[r][t];
			if (i < n)
				acc_span(&a, w + r * ldw + i, x + t * ldx + i, n - i, i);
			out[t * ldo + r] = reduce_vec(a);
		}
}

/* Covers rows x toks with RxT tiles and smaller ones at the edges. */
#define PANEL_WITH(R, T)                                                                                   \
	do {                                                                                                   \
		int t = 0;                                                                                         \
		for (; t + (T) <= n_tok; t += (T)) {                                                               \
			int r = 0;                                                                                     \
			for (; r + (R) <= n_rows; r += (R))                                                            \
				tile(w + r * ldw, ldw, (R), x + t * ldx, ldx, (T), n, out + t * ldo + r, ldo);             \
			for (; r < n_rows; r++)                                                                        \
				tile(w + r * ldw, ldw, 1, x + t * ldx, ldx, (T), n, out + t * ldo + r, ldo);               \
		}                                                                                                  \
		for (; t < n_tok; t++) {                                                                           \
			int r = 0;                                                                                     \
			for (; r + (R) <= n_rows; r += (R))                                                            \
				tile(w + r * ldw, ldw, (R), x + t * ldx, ldx, 1, n, out + t * ldo + r, ldo);               \
			for (; r < n_rows; r++)                                                                        \
				tile(w + r * ldw, ldw, 1, x + t * ldx, ldx, 1, n, out + t * ldo + r, ldo);                 \
		}                                                                                                  \
	} while (0)

/* 1 when the CPU has the 32 vector registers of AVX-512, which the 4x4 tile needs. */
static int wide_registers(void)
{
#if EMBER_HAVE_CLONES
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 1 : 0;
	}
	return cached;
#else
	return 0;
#endif
}

EMBER_HOT
void ember_dot_panel(const float *w, int64_t ldw, int n_rows, const float *x, int64_t ldx, int n_tok, int64_t n,
                     float *out, int64_t ldo)
{
	if (wide_registers())
		PANEL_WITH(4, 4);
	else
		PANEL_WITH(2, 2);
}

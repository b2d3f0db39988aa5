/*
 * quant.h - ember's weight formats: fp16/bf16 conversion and, for F32, F16, BF16, Q8_0, Q4_K and
 * Q6_K, row dequantization exactly as ggml defines the blocks (engine-anchors.md 1.2), quantizers
 * from f32, and fused dot products of a stored row with an f32 vector (fp32 accumulation).
 * The type table behind ember_type_row_size/block_elems/name (model.h) lives here too.
 */
#ifndef EMBER_QUANT_H
#define EMBER_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Dot products and the CPU matmul accumulate element i into lane i % EMBER_DOT_LANES and sum the
 * lanes in a fixed order at the end, so every path (fused dot, dequantize-then-dot, any thread
 * count) gives bit-identical results on one machine. */
#define EMBER_DOT_LANES 16

/* IEEE half <-> float. f32->f16 rounds to nearest even; overflow gives inf, NaN stays NaN. */
float ember_fp16_to_f32(uint16_t h);
uint16_t ember_f32_to_fp16(float f);
/* bfloat16 <-> float. f32->bf16 rounds to nearest even; NaN stays NaN (quiet). */
float ember_bf16_to_f32(uint16_t h);
uint16_t ember_f32_to_bf16(float f);

/* 1 when ember can dequantize, quantize and dot `type` (the enum ember_type values). */
int ember_type_supported(int type);

/* Bytes of n elements of `type`, or 0 when n is not a whole number of blocks or the type is
 * unsupported. Same as ember_type_row_size but returns 0 instead of asserting. */
size_t ember_type_bytes(int type, int64_t n);

/* Dequantizes n elements (a whole number of blocks) of `type` from src into dst. */
void ember_dequantize_row(enum ember_type type, const void *src, float *dst, int64_t n);

/* Quantizes n elements (a whole number of blocks) from src into dst (ember_type_bytes(type, n)
 * bytes). Q8_0 matches ggml's reference quantizer; Q4_K and Q6_K use a simpler scale search than
 * llama.cpp (valid blocks, relative RMS error about 7% for Q4_K and 2% for Q6_K on Gaussian data). */
void ember_quantize_row(enum ember_type type, const float *src, void *dst, int64_t n);

/* Dot product of a stored row of n elements with the f32 vector x, fp32 accumulation in the lane
 * order described at EMBER_DOT_LANES (bit-identical to ember_dot_f32 on the dequantized row). */
float ember_dot_row(enum ember_type type, const void *row, const float *x, int64_t n);

/* out[r] = dot of stored row r with x, for r < n_rows rows that start row_bytes apart: the same
 * bits as ember_dot_row per row, computed 4 rows at a time (faster: independent accumulators). */
void ember_dot_rows(enum ember_type type, const void *rows, size_t row_bytes, int n_rows, const float *x, int64_t n,
                    float *out);

/* Dot of two f32 vectors, lane-ordered as above (any n). */
float ember_dot_f32(const float *a, const float *b, int64_t n);

/* Sums the EMBER_DOT_LANES partial sums in the fixed order every ember dot uses. */
float ember_dot_reduce(const float *lanes);

#endif

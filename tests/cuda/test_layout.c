/*
 * test_layout.c - test_cuda_layout: the decode GEMV's tiled weight layout, checked on the CPU
 * (no GPU needed). Random matrices are quantized with engine/quant.h, repacked with the same
 * function the GPU repack kernel runs (kernels/layout.cuh), and the GEMV kernel's arithmetic is
 * replayed lane by lane (tile_replay.h): fragment registers from the packed words, the mma.sync
 * m16n8k16 product (PTX fragment layout), and the fp32 scale epilogue with its 1024/1152 offsets.
 * The result must match dequantize-then-dot in double to a relative 2e-5 (fp32 accumulation), for
 * row counts and widths that need padding. A wrong bit position, offset or scale shows up as an O(1) error.
 * Q8R (ember's int8 tiles for the draft, quantized from fp16 rows by ember_tile_quant_q8r): every
 * weight within half a step of its fp16 value, and the replay (fragments less the 1152 offset, one
 * scale per row and tile) equal to dequantize-then-dot.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_cpu.h"
#include "layout.cuh"
#include "quant.h"
#include "tile_replay.h"

static void check_type(int type, int rows, int cols)
{
	const size_t row_bytes = ember_type_bytes(type, cols);
	uint8_t *raw = calloc((size_t)rows, row_bytes);
	float *w = malloc((size_t)cols * sizeof(float)), *deq = malloc((size_t)rows * cols * sizeof(float));
	float *x = calloc((size_t)(cols + 256), sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float scale = 0.02f * (1.0f + 2.0f * (float)urand());
		for (int k = 0; k < cols; k++)
			w[k] = nrand() * scale + (type == EMBER_T_Q4_K ? 0.01f : 0.0f);
		ember_quantize_row((enum ember_type)type, w, raw + (size_t)r * row_bytes, cols);
		ember_dequantize_row((enum ember_type)type, raw + (size_t)r * row_bytes, deq + (size_t)r * cols, cols);
	}
	for (int k = 0; k < cols; k++)
		x[k] = ember_fp16_to_f32(ember_f32_to_fp16(nrand() * 2.0f));

	const int rt_n = (rows + 15) / 16, kt_n = (cols + 255) / 256;
	const size_t tb = ember_tile_bytes(type);
	uint8_t *tiles = malloc((size_t)rt_n * kt_n * tb);
	memset(tiles, 0xA5, (size_t)rt_n * kt_n * tb); /* poison: the repack must write every byte */
	for (int rt = 0; rt < rt_n; rt++)
		for (int kt = 0; kt < kt_n; kt++)
			ember_tile_repack(tiles + ((size_t)rt * kt_n + kt) * tb, type, raw, rows, cols, rt, kt);

	double max_rel = 0;
	for (int rt = 0; rt < rt_n; rt++) {
		double y[16] = {0};
		for (int kt = 0; kt < kt_n; kt++)
			replay_tile(type, tiles + ((size_t)rt * kt_n + kt) * tb, x + 256 * kt, y);
		for (int r16 = 0; r16 < 16 && rt * 16 + r16 < rows; r16++) {
			const int r = rt * 16 + r16;
			double ref = 0, mag = 0;
			for (int k = 0; k < cols; k++) {
				ref += (double)deq[(size_t)r * cols + k] * x[k];
				mag += fabs((double)deq[(size_t)r * cols + k] * x[k]);
			}
			const double rel = fabs(y[r16] - ref) / (mag > 0 ? mag : 1);
			if (rel > max_rel)
				max_rel = rel;
		}
	}
	printf("layout %-5s %3d x %4d: max |gemv - ref| / sum|w x| = %.2e\n", ember_type_name((enum ember_type)type), rows, cols,
	       max_rel);
	CHECK(max_rel < 2e-5, "%s %dx%d: tiled GEMV replay differs from dequantize-then-dot (rel %.3g)",
	      ember_type_name((enum ember_type)type), rows, cols, max_rel);
	free(raw);
	free(w);
	free(deq);
	free(x);
	free(tiles);
}

static void check_q8r(int rows, int cols)
{
	uint16_t *w16 = malloc((size_t)rows * cols * 2);
	float *deq = malloc((size_t)rows * cols * sizeof(float)), *x = calloc((size_t)(cols + 256), sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float scale = 0.02f * (1.0f + 4.0f * (float)urand());
		for (int k = 0; k < cols; k++)
			w16[(size_t)r * cols + k] = ember_f32_to_fp16(nrand() * scale);
	}
	if (rows > 20)
		for (int k = 0; k < cols && k < 256; k++)
			w16[(size_t)20 * cols + k] = 0;
	for (int k = 0; k < cols; k++)
		x[k] = ember_fp16_to_f32(ember_f32_to_fp16(nrand() * 2.0f));
	const int rt_n = (rows + 15) / 16, kt_n = (cols + 255) / 256;
	uint8_t *tiles = malloc((size_t)rt_n * kt_n * EMBER_Q8R_TILE_BYTES);
	memset(tiles, 0xA5, (size_t)rt_n * kt_n * EMBER_Q8R_TILE_BYTES);
	for (int rt = 0; rt < rt_n; rt++)
		for (int kt = 0; kt < kt_n; kt++)
			ember_tile_quant_q8r(tiles + ((size_t)rt * kt_n + kt) * EMBER_Q8R_TILE_BYTES, w16, rows, cols, rt, kt);
	/* the reference: d = max|w| / 127 per row and 256 columns, w rounded to a multiple of d */
	double worst_q = 0;
	for (int r = 0; r < rows; r++)
		for (int kt = 0; kt < kt_n; kt++) {
			float amax = 0;
			for (int k = 256 * kt; k < cols && k < 256 * (kt + 1); k++)
				amax = fmaxf(amax, fabsf(ember_fp16_to_f32(w16[(size_t)r * cols + k])));
			const float d = amax / 127.0f;
			for (int k = 256 * kt; k < cols && k < 256 * (kt + 1); k++) {
				const float v = ember_fp16_to_f32(w16[(size_t)r * cols + k]);
				deq[(size_t)r * cols + k] = d > 0 ? rintf(v / d) * d : 0.0f;
				const double err = d > 0 ? fabs(deq[(size_t)r * cols + k] - v) / d : fabs(v);
				worst_q = err > worst_q ? err : worst_q;
			}
		}
	double max_rel = 0;
	for (int rt = 0; rt < rt_n; rt++) {
		double y[16] = {0};
		for (int kt = 0; kt < kt_n; kt++) {
			const uint8_t *tile = tiles + ((size_t)rt * kt_n + kt) * EMBER_Q8R_TILE_BYTES;
			double c[16] = {0};
			for (int s = 0; s < 16; s++) {
				uint32_t regs[32][4];
				for (int lane = 0; lane < 32; lane++) {
					const uint8_t *chunk = tile + ((s >> 1) * 32 + lane) * 16 + (s & 1) * 8;
					ember_q8_regs(rd32(chunk), rd32(chunk + 4), regs[lane]);
					for (int j = 0; j < 4; j++) /* less the 1152 offset, exact in fp16 */
						regs[lane][j] = (uint32_t)ember_f32_to_fp16(half_lo(regs[lane][j]) - 1152.0f) |
						                (uint32_t)ember_f32_to_fp16(half_hi(regs[lane][j]) - 1152.0f) << 16;
				}
				mma_rows(regs, x + 256 * kt + 16 * s, c);
			}
			for (int r = 0; r < 16; r++) {
				float d;
				memcpy(&d, tile + EMBER_Q8R_D_OFF + 4 * r, 4);
				y[r] += (double)d * c[r];
			}
		}
		for (int r16 = 0; r16 < 16 && rt * 16 + r16 < rows; r16++) {
			const int r = rt * 16 + r16;
			double ref = 0, mag = 0;
			for (int k = 0; k < cols; k++) {
				ref += (double)deq[(size_t)r * cols + k] * x[k];
				mag += fabs((double)deq[(size_t)r * cols + k] * x[k]);
			}
			const double rel = fabs(y[r16] - ref) / (mag > 0 ? mag : 1);
			max_rel = rel > max_rel || rel != rel ? rel : max_rel;
		}
	}
	printf("layout Q8R   %3d x %4d: max |gemv - ref| / sum|w x| = %.2e, max |q d - w| / d = %.3f\n", rows, cols, max_rel,
	       worst_q);
	CHECK(max_rel < 2e-5, "Q8R %dx%d: tiled GEMV replay differs from dequantize-then-dot (rel %.3g)", rows, cols, max_rel);
	CHECK(worst_q <= 0.5 + 1e-4, "Q8R %dx%d: a weight is %.3f steps from its fp16 value", rows, cols, worst_q);
	free(w16);
	free(deq);
	free(x);
	free(tiles);
}

static void check_magic(void)
{
	/* 0x6400 | q is the fp16 1024 + q for q < 1024; the Q6_K upper rows reach 1024 + 1008. */
	for (int q = 0; q < 1024; q++)
		CHECK(ember_fp16_to_f32((uint16_t)(0x6400 | q)) == 1024.0f + q, "fp16 magic wrong at %d", q);
	uint32_t r[4];
	ember_q8_regs(0x03020100u, 0x07060504u, r);
	CHECK(r[0] == 0x64016400u && r[1] == 0x64036402u && r[2] == 0x64056404u && r[3] == 0x64076406u,
	      "PRMT byte placement wrong: %08x %08x %08x %08x", r[0], r[1], r[2], r[3]);
}

int main(void)
{
	test_rng = 0x1234567887654321ull;
	check_magic();
	check_type(EMBER_T_Q8_0, 16, 256);
	check_type(EMBER_T_Q8_0, 37, 320);   /* rows and columns that need padding */
	check_type(EMBER_T_Q4_K, 16, 256);
	check_type(EMBER_T_Q4_K, 50, 768);
	check_type(EMBER_T_Q6_K, 16, 256);
	check_type(EMBER_T_Q6_K, 33, 512);
	check_q8r(16, 256);
	check_q8r(37, 320); /* padding rows and columns, a zero row segment (row 20) */
	return check_exit("test_cuda_layout");
}

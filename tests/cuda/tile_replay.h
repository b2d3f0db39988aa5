/*
 * tile_replay.h - the tiled decode GEMV's arithmetic replayed on the CPU for test_cuda_layout:
 * fragment registers from the packed words (layout.cuh's own functions), the mma.sync m16n8k16 product in the PTX fragment layout, and the fp32 scale
 * epilogue with its 1024/1152 offsets, one scale group at a time (what a warp adds to its running
 * row sums). Static functions: include from one test file each.
 */
#ifndef EMBER_TESTS_TILE_REPLAY_H
#define EMBER_TESTS_TILE_REPLAY_H

#include <stdint.h>

#include "layout.cuh"
#include "quant.h"

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static float half_lo(uint32_t u) { return ember_fp16_to_f32((uint16_t)(u & 0xFFFF)); }
static float half_hi(uint32_t u) { return ember_fp16_to_f32((uint16_t)(u >> 16)); }

/* mma.sync m16n8k16 with B's 8 columns all equal to x: returns the row dot products C[16]. The
 * A fragment of lane L is regs[L][0..3]: reg0 = (row gid, k 2g..2g+1), reg1 = (row gid+8, same k),
 * reg2 = (row gid, k 2g+8..), reg3 = (row gid+8, k 2g+8..), low half first (PTX ISA, 9.7.13.4.8). */
static void mma_rows(const uint32_t regs[32][4], const float xk[16], double c[16])
{
	float a[16][16];
	for (int lane = 0; lane < 32; lane++) {
		const int gid = lane >> 2, g = lane & 3;
		for (int j = 0; j < 4; j++) {
			const int row = gid + ((j & 1) ? 8 : 0), col = 2 * g + ((j & 2) ? 8 : 0);
			a[row][col] = half_lo(regs[lane][j]);
			a[row][col + 1] = half_hi(regs[lane][j]);
		}
	}
	for (int r = 0; r < 16; r++) {
		double acc = 0;
		for (int k = 0; k < 16; k++)
			acc += (double)a[r][k] * xk[k];
		c[r] += acc;
	}
}

/* Scale groups of a tile: 8 (Q8_0 and Q4_K: 32 columns each) or 16 (Q6_K: 16 columns each). */
static int replay_groups(int type) { return type == EMBER_T_Q6_K ? 16 : 8; }

/* The fp32 amounts the kernel adds to the 16 row sums for each scale group of one tile, in the
 * kernel's order: add[grp][row]. x: the tile's 256 staged (fp16-representable) inputs. */
static void replay_tile_adds(int type, const uint8_t *tile, const float *x, float add[16][16])
{
	float sx[16];
	for (int s = 0; s < 16; s++) {
		sx[s] = 0;
		for (int i = 0; i < 16; i++)
			sx[s] += x[16 * s + i];
	}
	const int groups = replay_groups(type), steps_per_group = 16 / groups;
	for (int grp = 0; grp < groups; grp++) {
		double c[16] = {0};
		for (int t = 0; t < steps_per_group; t++) {
			const int s = grp * steps_per_group + t;
			uint32_t regs[32][4];
			for (int lane = 0; lane < 32; lane++) {
				if (type == EMBER_T_Q8_0) {
					const uint8_t *chunk = tile + ((s >> 1) * 32 + lane) * 16 + (s & 1) * 8;
					ember_q8_regs(rd32(chunk), rd32(chunk + 4), regs[lane]);
				} else {
					const uint32_t w = rd32(tile + ((s >> 2) * 32 + lane) * 16 + (s & 3) * 4);
					if (type == EMBER_T_Q4_K) {
						ember_q4k_regs(w, regs[lane]);
					} else {
						const int wi = s >> 1;
						const uint32_t hw = rd32(tile + EMBER_Q6K_HI_OFF + ((wi >> 2) * 32 + lane) * 16 + (wi & 3) * 4);
						ember_q6k_regs(w, (hw >> (16 * (s & 1))) & 0xFFFF, regs[lane]);
					}
				}
			}
			mma_rows(regs, x + 16 * s, c);
		}
		const float S = type == EMBER_T_Q6_K ? sx[grp] : sx[2 * grp] + sx[2 * grp + 1];
		for (int r = 0; r < 16; r++) {
			const int upper = r >= 8; /* rows gid+8 carry the x16 variant for the K-quants */
			float a = 0;
			if (type == EMBER_T_Q8_0) {
				const float d = ember_fp16_to_f32((uint16_t)(tile[EMBER_Q8_D_OFF + r * 16 + grp * 2] |
				                                             tile[EMBER_Q8_D_OFF + r * 16 + grp * 2 + 1] << 8));
				a = d * ((float)c[r] - 1152.0f * S);
			} else if (type == EMBER_T_Q4_K) {
				const float d = ember_fp16_to_f32((uint16_t)(tile[EMBER_Q4K_D_OFF + r * 4] | tile[EMBER_Q4K_D_OFF + r * 4 + 1] << 8));
				const float dmin = ember_fp16_to_f32((uint16_t)(tile[EMBER_Q4K_D_OFF + r * 4 + 2] | tile[EMBER_Q4K_D_OFF + r * 4 + 3] << 8));
				const float sc = tile[EMBER_Q4K_SCM_OFF + r * 16 + grp], m = tile[EMBER_Q4K_SCM_OFF + r * 16 + 8 + grp];
				const float inner = upper ? ((float)c[r] - 1024.0f * S) * 0.0625f : (float)c[r] - 1024.0f * S;
				a = (d * sc) * inner - (dmin * m) * S;
			} else {
				const float d = ember_fp16_to_f32((uint16_t)(tile[EMBER_Q6K_D_OFF + r * 2] | tile[EMBER_Q6K_D_OFF + r * 2 + 1] << 8));
				const float sc = (float)(int8_t)tile[EMBER_Q6K_SC_OFF + r * 16 + grp];
				a = upper ? (d * sc) * (((float)c[r] - 1536.0f * S) * 0.0625f) : (d * sc) * ((float)c[r] - 1056.0f * S);
			}
			add[grp][r] = a;
		}
	}
}

/* Replays one tile (rt, kt): adds its 16 row results to y (in double). */
static void replay_tile(int type, const uint8_t *tile, const float *x /* 256 fp16-rounded */, double *y)
{
	float add[16][16];
	replay_tile_adds(type, tile, x, add);
	for (int grp = 0; grp < replay_groups(type); grp++)
		for (int r = 0; r < 16; r++)
			y[r] += add[grp][r];
}

#endif

/*
 * gemv_window_core.cuh - device code both verify-window GEMV kernels share (gemv_window.cu, the
 * one-group kernel; gemv_window_split.cu, the kernel that splits the decode's K chains over CTAs):
 * the staged inputs' padding, the B fragments of up to 16 tokens and the window tile cores, which
 * reproduce the decode tile cores' (gemv_core.cuh) scale epilogue per token, and the Q8R core (the
 * DFlash draft's int8 weights, which have no decode counterpart). Also the split
 * kernel's host entry, which ember_gemv_window calls. Internal to kernels/: included only by .cu
 * files, after gemv_core.cuh.
 */
#ifndef EMBER_KERNELS_GEMV_WINDOW_CORE_CUH
#define EMBER_KERNELS_GEMV_WINDOW_CORE_CUH

#include "gemv_core.cuh"
#include "gemv_window.cuh"

#define WIN_XPAD 8 /* halves of padding per token row of staged input (bank spread of B loads) */
#define WIN_SPAD 2 /* floats of padding per token row of input sums */

/* ---- the window tile cores: acc[nb][v][r][c] is virtual lane v's partial for row gid + 8r and
 * token 8 nb + 2 g + c; B column gid of block nb is token 8 nb + gid (zero past n_tok). ---- */

template <int NB>
static __device__ __forceinline__ void win_b(uint32_t (&b0)[NB], uint32_t (&b1)[NB], const uint32_t *xw32, int ws, int nt,
                                             int kt, int s, int lane)
{
	const int gid = lane >> 2, g = lane & 3;
#pragma unroll
	for (int nb = 0; nb < NB; nb++) {
		const int tok = nb * 8 + gid;
		const uint32_t *p = xw32 + (size_t)tok * ws + kt * 128 + 8 * s + g;
		b0[nb] = tok < nt ? p[0] : 0u;
		b1[nb] = tok < nt ? p[4] : 0u;
	}
}

template <int TYPE, int NB>
static __device__ __forceinline__ void win_tile(const tile_regs<TYPE> &t, const uint32_t *xw32, int ws, const float *sxw,
                                                int ss, int nt, int kt, int lane, float (&acc)[NB][4][2][2])
{
	const int g = lane & 3;
	if constexpr (TYPE == EMBER_T_Q8_0) {
#pragma unroll
		for (int b = 0; b < 8; b++) {
			float c[NB][4];
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
				c[nb][0] = c[nb][1] = c[nb][2] = c[nb][3] = 0.0f;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int s = 2 * b + h;
				uint32_t a[4], b0[NB], b1[NB];
				ember_q8_regs(u4get(t.q[b], 2 * h), u4get(t.q[b], 2 * h + 1), a);
				win_b<NB>(b0, b1, xw32, ws, nt, kt, s, lane);
#pragma unroll
				for (int nb = 0; nb < NB; nb++)
					ember_mma_16816(c[nb], a, b0[nb], b1[nb], c[nb]);
			}
			const float d0 = half_bits_to_float(u4get(t.d0, b >> 1) >> (16 * (b & 1)));
			const float d1 = half_bits_to_float(u4get(t.d1, b >> 1) >> (16 * (b & 1)));
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
#pragma unroll
				for (int cc = 0; cc < 2; cc++) {
					const int tok = nb * 8 + 2 * g + cc < nt ? nb * 8 + 2 * g + cc : 0; /* past nt: never stored */
					const float2 s2 = *reinterpret_cast<const float2 *>(sxw + (size_t)tok * ss + kt * 16 + 2 * b);
					const float S = s2.x + s2.y;
					acc[nb][b & 3][0][cc] = q8_group_epi(acc[nb][b & 3][0][cc], d0, c[nb][cc], S);
					acc[nb][b & 3][1][cc] = q8_group_epi(acc[nb][b & 3][1][cc], d1, c[nb][2 + cc], S);
				}
		}
	} else if constexpr (TYPE == EMBER_T_Q4_K) {
		const float2 dm0 = __half22float2(*reinterpret_cast<const __half2 *>(&t.dd0));
		const float2 dm1 = __half22float2(*reinterpret_cast<const __half2 *>(&t.dd1));
#pragma unroll
		for (int j = 0; j < 8; j++) {
			float c[NB][4];
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
				c[nb][0] = c[nb][1] = c[nb][2] = c[nb][3] = 0.0f;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int s = 2 * j + h;
				uint32_t a[4], b0[NB], b1[NB];
				ember_q4k_regs(u4get(t.q[s >> 2], s & 3), a);
				win_b<NB>(b0, b1, xw32, ws, nt, kt, s, lane);
#pragma unroll
				for (int nb = 0; nb < NB; nb++)
					ember_mma_16816(c[nb], a, b0[nb], b1[nb], c[nb]);
			}
			const int i = j >> 2, by = j & 3;
			const float sc0 = byte_lane_to_float(u4get(t.scm0, i), by), m0 = byte_lane_to_float(u4get(t.scm0, 2 + i), by);
			const float sc1 = byte_lane_to_float(u4get(t.scm1, i), by), m1 = byte_lane_to_float(u4get(t.scm1, 2 + i), by);
			const float dsc0 = __fmul_rn(dm0.x, sc0), dmm0 = __fmul_rn(dm0.y, m0);
			const float dsc1 = __fmul_rn(dm1.x, sc1), dmm1 = __fmul_rn(dm1.y, m1);
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
#pragma unroll
				for (int cc = 0; cc < 2; cc++) {
					const int tok = nb * 8 + 2 * g + cc < nt ? nb * 8 + 2 * g + cc : 0; /* past nt: never stored */
					const float2 s2 = *reinterpret_cast<const float2 *>(sxw + (size_t)tok * ss + kt * 16 + 2 * j);
					const float S = s2.x + s2.y;
					acc[nb][by][0][cc] = q4k_group_epi(acc[nb][by][0][cc], dsc0, dmm0, c[nb][cc], S, false);
					acc[nb][by][1][cc] = q4k_group_epi(acc[nb][by][1][cc], dsc1, dmm1, c[nb][2 + cc], S, true);
				}
		}
	} else if constexpr (TYPE == EMBER_T_Q8R) {
		/* One scale per row and tile: the 16 steps accumulate in the mma and the scale is applied
		 * once (no decode counterpart to match: only virtual lane 0 is used). The 1152 offset of
		 * ember_q8_regs is removed from the fragment (exact in fp16), so no input sums are needed. */
		float c[NB][4];
#pragma unroll
		for (int nb = 0; nb < NB; nb++)
			c[nb][0] = c[nb][1] = c[nb][2] = c[nb][3] = 0.0f;
		const __half2 off = __floats2half2_rn(1152.0f, 1152.0f);
#pragma unroll
		for (int s = 0; s < 16; s++) {
			uint32_t a[4], b0[NB], b1[NB];
			ember_q8_regs(u4get(t.q[s >> 1], 2 * (s & 1)), u4get(t.q[s >> 1], 2 * (s & 1) + 1), a);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const __half2 h = __hsub2(*reinterpret_cast<const __half2 *>(&a[i]), off);
				a[i] = *reinterpret_cast<const uint32_t *>(&h);
			}
			win_b<NB>(b0, b1, xw32, ws, nt, kt, s, lane);
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
				ember_mma_16816(c[nb], a, b0[nb], b1[nb], c[nb]);
		}
		(void)sxw;
		(void)ss;
#pragma unroll
		for (int nb = 0; nb < NB; nb++)
#pragma unroll
			for (int cc = 0; cc < 2; cc++) {
				acc[nb][0][0][cc] = __fmaf_rn(t.d0, c[nb][cc], acc[nb][0][0][cc]);
				acc[nb][0][1][cc] = __fmaf_rn(t.d1, c[nb][2 + cc], acc[nb][0][1][cc]);
			}
	} else {
		const float d0 = half_bits_to_float(t.d0), d1 = half_bits_to_float(t.d1);
#pragma unroll
		for (int s = 0; s < 16; s++) {
			float c[NB][4];
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
				c[nb][0] = c[nb][1] = c[nb][2] = c[nb][3] = 0.0f;
			uint32_t a[4], b0[NB], b1[NB];
			const int wi = s >> 1;
			const uint32_t hi16 = (u4get(t.hi[wi >> 2], wi & 3) >> (16 * (s & 1))) & 0xFFFFu;
			ember_q6k_regs(u4get(t.q[s >> 2], s & 3), hi16, a);
			win_b<NB>(b0, b1, xw32, ws, nt, kt, s, lane);
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
				ember_mma_16816(c[nb], a, b0[nb], b1[nb], c[nb]);
			const int i = s >> 2, by = s & 3;
			const float dsc0 = __fmul_rn(d0, sbyte_lane_to_float(u4get(t.sc0, i), by));
			const float dsc1 = __fmul_rn(d1, sbyte_lane_to_float(u4get(t.sc1, i), by));
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
#pragma unroll
				for (int cc = 0; cc < 2; cc++) {
					const int tok = nb * 8 + 2 * g + cc < nt ? nb * 8 + 2 * g + cc : 0;
					const float S = sxw[(size_t)tok * ss + kt * 16 + s];
					acc[nb][by][0][cc] = q6k_group_epi(acc[nb][by][0][cc], dsc0, c[nb][cc], S, false);
					acc[nb][by][1][cc] = q6k_group_epi(acc[nb][by][1][cc], dsc1, c[nb][2 + cc], S, true);
				}
		}
	}
}

/* The split kernel for a window whose tokens do not all fit one CTA's shared memory next to the
 * whole input (gemv_window_split.cu). W: the decode's K chains (4 or 8); cta_warps: 8 or 12.
 * *ran = 1 when it launched; 0 (nothing launched) when no chain split fits shared memory or the
 * args' scratch (a->part, a->cnt) is too small for this launch. 0 or a negative ember error. */
int win_split_run(int *ran, const ember_gemv_win_args *a, int W, int k_pad, size_t tb_max, int n_sm, int optin, cudaStream_t stream);

#endif

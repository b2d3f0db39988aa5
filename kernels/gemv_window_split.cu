/*
 * gemv_window_split.cu - the verify-window GEMV with the decode's K chains split over CTAs
 * (gemv_window.cuh, `split`). The decode GEMV's warp w sums K tiles w, w + W, ... of a row tile
 * (chain w) and the W chain sums are added in warp order. The one-group kernel (gemv_window.cu)
 * stages every token's whole input in each CTA; for a long input (the 8B down projection, k =
 * 12288) 16 tokens do not fit next to the ring, and it passes over the weights 4 times, 4 tokens
 * each. Here grid.y splits the W chains into groups of WC chains:
 *   - a CTA of WC x WR warps stages only its group's K tiles of every token (1/groups of the input);
 *   - each of its WR warp rows walks its own row tiles (grid-stride over grid.x * WR) through its
 *     slice of one cp.async ring, its WC warps one chain each with the window tile cores
 *     (gemv_window_core.cuh), so each chain's sum is the one-group kernel's;
 *   - a finished row tile's chain sums go to global scratch; the warp row that completes a row tile
 *     last (an arrival counter per row tile) adds the W sums in warp order and applies the epilogue
 *     (store, residual, SwiGLU), then resets the counter for the next launch.
 * Every token's result is bit-identical to the one-group kernel's and so to the decode's.
 */
#include "gemv_window.cuh"

#include "gemv_core.cuh"
#include "gemv_ring.cuh"
#include "gemv_window_core.cuh"

#define SPLIT_MAX_WR 12     /* warp rows per CTA (named barriers 1..12) */
#define SPLIT_MAX_THREADS 384

/* A warp row's position in its flat sequence of rounds (unit = row tile, pass = SwiGLU's gate/up,
 * rr = round within the pass) and what that round reads: its group's WC tiles of the row tile. */
struct split_cursor {
	int unit, pass, rr;
	int si, rt, type, tb;
	const uint8_t *src;
};

struct split_shape {
	int W, WC, WR, kt0, kt_count, rpp, Q; /* rpp: this group's rounds per pass; Q: warp rows in the grid */
};

template <int EPI, bool Q8>
static __device__ __forceinline__ void split_locate(const ember_gemv_args &a, split_cursor &c, const split_shape &sh)
{
	c.rt = locate_tile(a, c.unit, EPI == EMBER_GEMV_SWIGLU, &c.si);
	c.si += c.pass;
	const ember_gemv_seg &seg = a.seg[c.si];
	c.type = seg.type;
	c.tb = Q8 ? (int)EMBER_Q8R_TILE_BYTES : (int)ember_tile_bytes(seg.type);
	c.src = (Q8 ? static_cast<const uint8_t *>(seg.w) + (size_t)c.rt * sh.kt_count * EMBER_Q8R_TILE_BYTES
	            : tile_base(seg, c.rt, sh.kt_count * EMBER_TILE_K)) + (size_t)(c.rr * sh.W + sh.kt0) * c.tb;
}

template <int EPI, bool Q8>
static __device__ __forceinline__ void split_next(const ember_gemv_args &a, split_cursor &c, const split_shape &sh)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	if (++c.rr < sh.rpp) {
		c.src += (size_t)sh.W * c.tb;
		return;
	}
	c.rr = 0;
	if (++c.pass == P) {
		c.pass = 0;
		c.unit += sh.Q;
	}
	split_locate<EPI, Q8>(a, c, sh);
}

/* Issues round g of this warp row (its WC tiles) into its slice of ring slot `slot` when it has
 * that round, and commits a group either way (uniform group counts over the CTA). */
template <int EPI, bool Q8>
static __device__ __forceinline__ void split_issue(const ember_gemv_args &a, split_cursor &c, const split_shape &sh,
                                                   uint8_t *dst, int g, int my_rounds, int rtid, int rthreads)
{
	if (g < my_rounds) {
		const int t0 = c.rr * sh.W + sh.kt0; /* < kt_count for every round the group has */
		const int n = sh.kt_count - t0 < sh.WC ? sh.kt_count - t0 : sh.WC;
		const int chunks = n * c.tb / 16;
		for (int i = rtid; i < chunks; i += rthreads)
			cp_async16(dst + (size_t)i * 16, c.src + (size_t)i * 16);
		if (g + 1 < my_rounds)
			split_next<EPI, Q8>(a, c, sh);
	}
	cp_async_commit();
}

static __device__ __forceinline__ void named_barrier(int id, int threads)
{
	asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* The last warp row of a row tile: the W chain sums of each (row, token) in warp order (a chain
 * without tiles adds 0, as the decode's idle warp does), then the epilogue. */
template <int EPI, int W>
static __device__ __forceinline__ void split_finish(const ember_gemv_win_args &wa, int unit, int si, int rt, int kt_count,
                                                    int rtid, int rthreads)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	const ember_gemv_seg &seg = wa.g.seg[EPI == EMBER_GEMV_SWIGLU ? 0 : si];
	for (int i = rtid; i < wa.n_tok * 16; i += rthreads) {
		const int tok = i >> 4, row = rt * 16 + (i & 15);
		float y[P];
#pragma unroll
		for (int p = 0; p < P; p++) {
			const float *src = wa.part + (size_t)(unit * P + p) * W * (EMBER_WINDOW_MAX * 16) + i;
			float s = 0.0f;
#pragma unroll
			for (int w = 0; w < W; w++)
				s += w < kt_count ? __ldcg(src + (size_t)w * (EMBER_WINDOW_MAX * 16)) : 0.0f;
			y[p] = s;
		}
		if (row >= seg.rows)
			continue;
		if (EPI == EMBER_GEMV_STORE)
			seg.out[(size_t)tok * wa.ld_out + row] = y[0];
		else if (EPI == EMBER_GEMV_RESID)
			seg.out[(size_t)tok * wa.ld_out + row] += y[0];
		else
			static_cast<__half *>(wa.g.out_h)[(size_t)tok * wa.ld_h + row] = swiglu_h(y[0], y[P - 1]);
	}
}

template <int EPI, int W, int NB, bool Q8>
static __global__ void __launch_bounds__(SPLIT_MAX_THREADS, 1) win_split_kernel(const ember_gemv_win_args wa, int k_pad,
                                                                                int ring_rounds, int WC, int WR, int rpp0)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	const ember_gemv_args &args = wa.g;
	extern __shared__ __align__(16) unsigned char smem_raw[];
	const int R = ring_rounds, nt = wa.n_tok;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int wc = warp % WC, wr = warp / WC;
	split_shape sh;
	sh.W = W;
	sh.WC = WC;
	sh.WR = WR;
	sh.kt0 = (int)blockIdx.y * WC;
	sh.kt_count = k_pad / EMBER_TILE_K;
	sh.rpp = (sh.kt_count - sh.kt0 + W - 1) / W; /* >= 1: the grid has only groups with tiles */
	sh.Q = (int)gridDim.x * WR;
	const int chain = sh.kt0 + wc;
	const int rthreads = WC * 32, rtid = (int)threadIdx.x - wr * rthreads;

	/* Shared memory: the ring [R][WR][WC tiles], the group's staged inputs [nt][LT tiles] (LT: group
	 * 0's tiles, the layout of every group) and their per-16 sums, one flag per warp row. */
	const int LT = rpp0 * WC;
	const int ws = (LT * EMBER_TILE_K + WIN_XPAD) / 2, ss = LT * 16 + WIN_SPAD;
	const size_t slot_bytes = (size_t)args.ring_bytes / (size_t)R, slice = slot_bytes / (size_t)WR;
	uint8_t *ring = smem_raw;
	uint32_t *xw32 = reinterpret_cast<uint32_t *>(smem_raw + args.ring_bytes);
	float *sxw = reinterpret_cast<float *>(xw32 + (size_t)nt * ws);
	int *flag = reinterpret_cast<int *>(sxw + (size_t)nt * ss);

	const int q = (int)blockIdx.x * WR + wr, q0 = (int)blockIdx.x * WR;
	const int my_units = q < args.n_tiles ? (args.n_tiles - q + sh.Q - 1) / sh.Q : 0;
	const int max_units = q0 < args.n_tiles ? (args.n_tiles - q0 + sh.Q - 1) / sh.Q : 0;
	const int my_rounds = my_units * P * sh.rpp, n_rounds = max_units * P * sh.rpp;

	split_cursor ic, cc;
	ic.unit = q;
	ic.pass = 0;
	ic.rr = 0;
	if (my_rounds > 0)
		split_locate<EPI, Q8>(args, ic, sh);
	cc = ic;
	int issue_slot = 0;
	for (int g = 0; g < R - 1; g++) {
		split_issue<EPI, Q8>(args, ic, sh, ring + (size_t)issue_slot * slot_bytes + (size_t)wr * slice, g, my_rounds, rtid, rthreads);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;
	}
	if (args.pdl) /* weights first: they do not depend on the staging kernel */
		ember_pdl_release_wait();
	/* The group's K tiles of the staged inputs and sums (win_stage_kernel's [tok][k_pad] layout);
	 * local tile lt is K tile (lt / WC) * W + kt0 + lt % WC, zeros past the input (never read). */
	{
		const uint4 *src = static_cast<const uint4 *>(wa.xs);
		const int per = LT * 32, kq = k_pad / 8;
		for (int i = threadIdx.x; i < nt * per; i += (int)blockDim.x) {
			const int t = i / per, c = i - t * per, lt = c >> 5;
			const int kt = (lt / WC) * W + sh.kt0 + lt % WC;
			const bool ok = kt < sh.kt_count;
			cp_async16_zfill(reinterpret_cast<uint4 *>(xw32 + (size_t)t * ws) + c, src + (ok ? (size_t)t * kq + kt * 32 + (c & 31) : 0), ok);
		}
		const int sper = LT * 8, sk = k_pad / 32; /* float pairs */
		const float2 *ssrc = reinterpret_cast<const float2 *>(wa.sx);
		for (int i = threadIdx.x; i < nt * sper; i += (int)blockDim.x) {
			const int t = i / sper, c = i - t * sper, lt = c >> 3;
			const int kt = (lt / WC) * W + sh.kt0 + lt % WC;
			const bool ok = kt < sh.kt_count;
			cp_async8_zfill(sxw + (size_t)t * ss + 2 * c, ssrc + (ok ? (size_t)t * sk + kt * 8 + (c & 7) : 0), ok);
		}
		cp_async_commit();
		cp_async_wait<0>();
	}

	float acc[NB][4][2][2];
#pragma unroll
	for (int nb = 0; nb < NB; nb++)
#pragma unroll
		for (int v = 0; v < 4; v++)
			acc[nb][v][0][0] = acc[nb][v][0][1] = acc[nb][v][1][0] = acc[nb][v][1][1] = 0.0f;
	int slot = 0;
	for (int g = 0; g < n_rounds; g++) {
		cp_async_wait_dyn(R - 2);
		__syncthreads(); /* round g landed for all; round g-1's slot is free */
		split_issue<EPI, Q8>(args, ic, sh, ring + (size_t)issue_slot * slot_bytes + (size_t)wr * slice, g + R - 1, my_rounds, rtid,
		                 rthreads);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;
		if (g < my_rounds) {
			const int kt = cc.rr * W + chain;
			if (kt < sh.kt_count) {
				const uint8_t *tile = ring + (size_t)slot * slot_bytes + (size_t)wr * slice + (size_t)wc * cc.tb;
				const int lt = cc.rr * WC + wc;
				if constexpr (Q8) { /* the draft's Q8R tiles: their own instances, so the target's keep their code */
					tile_regs<EMBER_T_Q8R> t;
					tile_load<EMBER_T_Q8R>(tile, lane, t);
					win_tile<EMBER_T_Q8R, NB>(t, xw32, ws, sxw, ss, nt, lt, lane, acc);
				} else
				switch (cc.type) {
				case EMBER_T_Q8_0: {
					tile_regs<EMBER_T_Q8_0> t;
					tile_load<EMBER_T_Q8_0>(tile, lane, t);
					win_tile<EMBER_T_Q8_0, NB>(t, xw32, ws, sxw, ss, nt, lt, lane, acc);
					break;
				}
				case EMBER_T_Q4_K: {
					tile_regs<EMBER_T_Q4_K> t;
					tile_load<EMBER_T_Q4_K>(tile, lane, t);
					win_tile<EMBER_T_Q4_K, NB>(t, xw32, ws, sxw, ss, nt, lt, lane, acc);
					break;
				}
				case EMBER_T_Q6_K: {
					tile_regs<EMBER_T_Q6_K> t;
					tile_load<EMBER_T_Q6_K>(tile, lane, t);
					win_tile<EMBER_T_Q6_K, NB>(t, xw32, ws, sxw, ss, nt, lt, lane, acc);
					break;
				}
				}
			}
			if (cc.rr == sh.rpp - 1) {
				/* This chain's sum per (row, token): the decode's group sum (v0 + v1) + (v2 + v3). */
				float *dst = wa.part + ((size_t)(cc.unit * P + cc.pass) * W + chain) * (EMBER_WINDOW_MAX * 16);
				const int gid = lane >> 2, g4 = lane & 3;
#pragma unroll
				for (int nb = 0; nb < NB; nb++)
#pragma unroll
					for (int r = 0; r < 2; r++)
#pragma unroll
						for (int c2 = 0; c2 < 2; c2++) {
							const float y = (acc[nb][0][r][c2] + acc[nb][1][r][c2]) + (acc[nb][2][r][c2] + acc[nb][3][r][c2]);
							const int tok = nb * 8 + 2 * g4 + c2;
							if (tok < nt)
								dst[tok * 16 + gid + 8 * r] = y;
#pragma unroll
							for (int v = 0; v < 4; v++)
								acc[nb][v][r][c2] = 0.0f;
						}
				if (cc.pass == P - 1) {
					/* Arrival: the warp row's sums are visible before its ticket; the last ticket adds. */
					__threadfence();
					named_barrier(1 + wr, rthreads);
					if (rtid == 0)
						flag[wr] = atomicAdd(&wa.cnt[cc.unit], 1u) == gridDim.y - 1u;
					named_barrier(1 + wr, rthreads);
					if (flag[wr]) {
						__threadfence();
						split_finish<EPI, W>(wa, cc.unit, cc.si, cc.rt, sh.kt_count, rtid, rthreads);
						if (rtid == 0)
							wa.cnt[cc.unit] = 0u;
					}
				}
			}
			if (g + 1 < my_rounds)
				split_next<EPI, Q8>(args, cc, sh);
		}
		slot = slot + 1 == R ? 0 : slot + 1;
	}
	cp_async_wait<0>();
}

/* ---- launcher ---- */

static size_t split_smem(int R, int WC, int WR, size_t tb_max, int rpp0, int nt)
{
	const size_t LT = (size_t)rpp0 * WC;
	return (size_t)R * WR * WC * tb_max + (size_t)nt * (LT * EMBER_TILE_K + WIN_XPAD) * 2 + (size_t)nt * (LT * 16 + WIN_SPAD) * 4 +
	       SPLIT_MAX_WR * 4;
}

template <int EPI, int W, int NB, bool Q8>
static int split_launch(const ember_gemv_win_args *a, int k_pad, int R, int WC, int WR, int rpp0, int groups, size_t smem,
                        int n_sm, cudaStream_t stream)
{
	static size_t smem_set = 48 * 1024;
	static size_t occ_smem = 0;
	static int occ_threads = 0, occ_blocks = 0;
	const int threads = WC * WR * 32;
	if (smem > smem_set) {
		CUDA_CHECK(cudaFuncSetAttribute(win_split_kernel<EPI, W, NB, Q8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		smem_set = smem;
	}
	if (occ_smem != smem || occ_threads != threads) {
		int nb = 0;
		CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, win_split_kernel<EPI, W, NB, Q8>, threads, smem));
		if (nb < 1)
			return ember_error_set(EMBER_ERROR, "gemv window split: %d threads with %zu bytes of shared memory do not fit an SM",
			                       threads, smem);
		occ_blocks = nb;
		occ_smem = smem;
		occ_threads = threads;
	}
	/* One wave: each group gets an equal share of the CTAs, the row tiles dealt out evenly over
	 * the group's warp rows. */
	int cap_x = occ_blocks * n_sm / groups;
	cap_x = cap_x > 0 ? cap_x : 1;
	const int rows_cap = cap_x * WR;
	const int per = (a->g.n_tiles + rows_cap - 1) / rows_cap;
	const int rows = (a->g.n_tiles + per - 1) / per;
	const int gx = (rows + WR - 1) / WR;
	cudaLaunchAttribute attr;
	const cudaLaunchConfig_t cfg = ember_launch_config(&attr, dim3(gx, groups), dim3(threads), smem, stream, a->g.pdl);
	CUDA_CHECK(cudaLaunchKernelEx(&cfg, win_split_kernel<EPI, W, NB, Q8>, *a, k_pad, R, WC, WR, rpp0));
	return 0;
}

template <int EPI, int W, bool Q8>
static int split_launch_nb(const ember_gemv_win_args *a, int k_pad, int R, int WC, int WR, int rpp0, int groups, size_t smem,
                           int n_sm, cudaStream_t stream)
{
	if (a->n_tok > 8)
		return split_launch<EPI, W, 2, Q8>(a, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
	return split_launch<EPI, W, 1, Q8>(a, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
}

template <int W, bool Q8>
static int split_dispatch(const ember_gemv_win_args *a, int k_pad, int R, int WC, int WR, int rpp0, int groups, size_t smem,
                          int n_sm, cudaStream_t stream)
{
	switch (a->g.epi) {
	case EMBER_GEMV_STORE:
	case EMBER_GEMV_ARGMAX: return split_launch_nb<EMBER_GEMV_STORE, W, Q8>(a, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
	case EMBER_GEMV_RESID: return split_launch_nb<EMBER_GEMV_RESID, W, Q8>(a, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
	case EMBER_GEMV_SWIGLU: return split_launch_nb<EMBER_GEMV_SWIGLU, W, Q8>(a, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
	}
	return ember_error_set(EMBER_ERROR, "gemv window split: unknown epilogue %d", a->g.epi);
}

int win_split_run(int *ran, const ember_gemv_win_args *a_in, int W, int k_pad, size_t tb_max, int n_sm, int optin,
                  cudaStream_t stream)
{
	EMBER_REQUIRE(ran && a_in && (W == 4 || W == 8) && n_sm > 0);
	*ran = 0;
	const int P = a_in->g.epi == EMBER_GEMV_SWIGLU ? 2 : 1;
	if (!a_in->part || !a_in->cnt || (long long)a_in->g.n_tiles * P > a_in->part_jobs)
		return 0;
	const int T = a_in->split_warps == 12 ? 12 : 8;
	const int kt_count = k_pad / EMBER_TILE_K, rpp0 = (kt_count + W - 1) / W;
	/* The widest chain group (fewest groups: the least staging and scratch traffic) that fits. */
	for (int WC = W / 2; WC >= 1; WC /= 2) {
		const int WR = T / WC;
		if (T % WC || WR > SPLIT_MAX_WR)
			continue;
		for (int R = 3; R >= 2; R--) {
			const size_t smem = split_smem(R, WC, WR, tb_max, rpp0, a_in->n_tok);
			if (smem > (size_t)optin)
				continue;
			ember_gemv_win_args wa = *a_in;
			wa.g.ring_bytes = (int)((size_t)R * WR * WC * tb_max);
			int groups = (kt_count + WC - 1) / WC;
			groups = groups < W / WC ? groups : W / WC;
			*ran = 1;
			if (wa.g.seg[0].type == EMBER_T_Q8R) /* ember_gemv_window checked that every segment is */
				return W == 8 ? split_dispatch<8, true>(&wa, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream)
				              : split_dispatch<4, true>(&wa, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
			return W == 8 ? split_dispatch<8, false>(&wa, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream)
			              : split_dispatch<4, false>(&wa, k_pad, R, WC, WR, rpp0, groups, smem, n_sm, stream);
		}
	}
	return 0;
}

/*
 * gemv_window.cu - the verify-window GEMV (see gemv_window.cuh). Two kernels:
 *   - win_stage_kernel: one CTA per token, of the decode kernel's width, stages that token's input
 *     with the decode's own gemv_stage_input (same RMSNorm reduction order, same fp16 values and
 *     per-16 sums) and writes it to global scratch;
 *   - win_gemv_kernel: the streaming GEMV's structure (gemv_stream.cu: one wave of CTAs of W warps,
 *     warp w takes K tiles w, w + W, ... of each row tile, rounds through a cp.async ring), with the
 *     tokens' staged inputs in shared memory as the mma's B columns (8 per mma, NB mmas per A
 *     fragment). mma columns are independent, so column t equals the decode's result for token t;
 *     the decode splits the 8 scale groups of a tile over the 4 lanes of a row group, so each lane
 *     here keeps 4 "virtual lane" accumulators per (row, token) and adds them as the decode's
 *     shuffles do, then the warps' sums are added in warp order as in stream_finish.
 * When the tokens' inputs do not all fit one CTA (or with EMBER_WIN_SPLIT=2), ember_gemv_window runs
 * the chain-split kernel of gemv_window_split.cu instead, after the same staging.
 */
#include "gemv_window.cuh"

#include "gemv_core.cuh"
#include "gemv_ring.cuh"
#include "gemv_stream.cuh"
#include "gemv_window_core.cuh"

template <int IN, int T>
static __global__ void __launch_bounds__(T) win_stage_kernel(ember_gemv_args a, int k_pad, int ld_x, __half *xs_g, float *sx_g)
{
	if (a.pdl) /* launched early: let the GEMV's CTAs start on their weights, then wait for x */
		ember_pdl_release_wait();
	extern __shared__ __align__(16) unsigned char smem_raw[];
	__half *xs = reinterpret_cast<__half *>(smem_raw);
	float *sx = reinterpret_cast<float *>(smem_raw + (size_t)k_pad * 2);
	float *red = sx + k_pad / 16;
	const int t = blockIdx.x;
	a.x = static_cast<const char *>(a.x) + (size_t)t * ld_x * (IN == EMBER_GEMV_IN_F16 ? 2 : 4);
	gemv_stage_input<IN, T>(a, k_pad, xs, sx, red);
	__syncthreads();
	uint4 *dst = reinterpret_cast<uint4 *>(xs_g + (size_t)t * k_pad);
	for (int i = threadIdx.x; i < k_pad / 8; i += T)
		dst[i] = reinterpret_cast<const uint4 *>(xs)[i];
	for (int i = threadIdx.x; i < k_pad / 16; i += T)
		sx_g[(size_t)t * (k_pad / 16) + i] = sx[i];
}

/* Adds the warps' sums of a finished job for (row, token) pairs and applies the epilogue. */
template <int EPI, int W>
static __device__ __forceinline__ void win_finish(const ember_gemv_win_args &a, const float *ys, float *gate_s, int nt,
                                                  int tok0, int si, int rt, int pass)
{
	const ember_gemv_seg &seg = a.g.seg[si];
	for (int i = threadIdx.x; i < nt * 16; i += W * 32) {
		const int tok = i >> 4, r = i & 15, row = rt * 16 + r;
		float y = 0.0f;
#pragma unroll
		for (int w = 0; w < W; w++)
			y += ys[((size_t)w * EMBER_WINDOW_MAX + tok) * 16 + r];
		if (row >= seg.rows)
			continue;
		const size_t t = (size_t)(tok0 + tok);
		if (EPI == EMBER_GEMV_STORE || EPI == EMBER_GEMV_ARGMAX)
			seg.out[t * a.ld_out + row] = y;
		else if (EPI == EMBER_GEMV_RESID)
			seg.out[t * a.ld_out + row] += y;
		else if (pass == 0)
			gate_s[i] = y;
		else
			static_cast<__half *>(a.g.out_h)[t * a.ld_h + row] = swiglu_h(gate_s[i], y);
	}
}

template <int EPI, int W, int NB, bool Q8>
static __global__ void __launch_bounds__(W * 32, 1) win_gemv_kernel(const ember_gemv_win_args wa, int k_pad, int ring_rounds,
                                                                     int tok0, int nt)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	const ember_gemv_args &args = wa.g;
	extern __shared__ __align__(16) unsigned char smem_raw[];
	const int R = ring_rounds;
	const size_t slot_bytes = (size_t)args.ring_bytes / (size_t)R;
	const int ws = (k_pad + WIN_XPAD) / 2, ss = k_pad / 16 + WIN_SPAD;
	uint8_t *ring = smem_raw;
	uint32_t *xw32 = reinterpret_cast<uint32_t *>(smem_raw + args.ring_bytes);
	float *sxw = reinterpret_cast<float *>(xw32 + (size_t)nt * ws);
	float *ys = sxw + (size_t)nt * ss;          /* [2][W][EMBER_WINDOW_MAX][16] by job parity */
	float *gate_s = ys + 2 * W * EMBER_WINDOW_MAX * 16; /* [nt * 16] */
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	const int kt_count = k_pad / EMBER_TILE_K, rpp = (kt_count + W - 1) / W;
	const int n_units = args.n_tiles > (int)blockIdx.x ? (args.n_tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
	const int n_rounds = n_units * P * rpp;

	stream_cursor issue_c, comp_c;
	issue_c.unit = (int)blockIdx.x;
	issue_c.pass = 0;
	issue_c.rr = 0;
	if (n_rounds > 0)
		cursor_locate<EPI, W, Q8>(args, issue_c, kt_count);
	comp_c = issue_c;
	int issue_slot = 0;
	for (int g = 0; g < R - 1; g++) {
		stream_issue<EPI, W, Q8>(args, issue_c, ring, slot_bytes, issue_slot, g, n_rounds, rpp, kt_count);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;
	}
	if (args.pdl) /* weights first: they do not depend on the staging kernel */
		ember_pdl_release_wait();
	/* The tokens' staged inputs and sums (written by win_stage_kernel), as one more cp.async group;
	 * waiting for all groups here leaves the main loop's ring accounting as it was. */
	{
		const uint4 *src = reinterpret_cast<const uint4 *>(static_cast<const __half *>(wa.xs) + (size_t)tok0 * k_pad);
		const int per = k_pad / 8;
		for (int i = threadIdx.x; i < nt * per; i += W * 32) {
			const int t = i / per, c = i - t * per;
			cp_async16(reinterpret_cast<uint4 *>(xw32 + (size_t)t * ws) + c, src + (size_t)t * per + c);
		}
		/* the sums in pairs: WIN_SPAD leaves their rows 8-byte aligned, not 16 */
		const float2 *ssrc = reinterpret_cast<const float2 *>(wa.sx + (size_t)tok0 * (k_pad / 16));
		const int sp = k_pad / 32;
		for (int i = threadIdx.x; i < nt * sp; i += W * 32) {
			const int t = i / sp, c = i - t * sp;
			cp_async8_zfill(sxw + (size_t)t * ss + 2 * c, ssrc + i, true);
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
	int pend = 0, pend_si = 0, pend_rt = 0, pend_pass = 0, parity = 0;
	int slot = 0;
	for (int g = 0; g < n_rounds; g++) {
		cp_async_wait_dyn(R - 2);
		__syncthreads();
		if (pend) {
			win_finish<EPI, W>(wa, ys + (parity ^ 1) * W * EMBER_WINDOW_MAX * 16, gate_s, nt, tok0, pend_si, pend_rt, pend_pass);
			pend = 0;
		}
		stream_issue<EPI, W, Q8>(args, issue_c, ring, slot_bytes, issue_slot, g + R - 1, n_rounds, rpp, kt_count);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;

		const int kt = comp_c.rr * W + warp;
		if (kt < kt_count) {
			const uint8_t *tile = ring + (size_t)slot * slot_bytes + (size_t)warp * comp_c.tb;
			if constexpr (Q8) { /* the draft's Q8R tiles: their own instances, so the target's keep their code */
				tile_regs<EMBER_T_Q8R> t;
				tile_load<EMBER_T_Q8R>(tile, lane, t);
				win_tile<EMBER_T_Q8R, NB>(t, xw32, ws, sxw, ss, nt, kt, lane, acc);
			} else
			switch (comp_c.type) {
			case EMBER_T_Q8_0: {
				tile_regs<EMBER_T_Q8_0> t;
				tile_load<EMBER_T_Q8_0>(tile, lane, t);
				win_tile<EMBER_T_Q8_0, NB>(t, xw32, ws, sxw, ss, nt, kt, lane, acc);
				break;
			}
			case EMBER_T_Q4_K: {
				tile_regs<EMBER_T_Q4_K> t;
				tile_load<EMBER_T_Q4_K>(tile, lane, t);
				win_tile<EMBER_T_Q4_K, NB>(t, xw32, ws, sxw, ss, nt, kt, lane, acc);
				break;
			}
			case EMBER_T_Q6_K: {
				tile_regs<EMBER_T_Q6_K> t;
				tile_load<EMBER_T_Q6_K>(tile, lane, t);
				win_tile<EMBER_T_Q6_K, NB>(t, xw32, ws, sxw, ss, nt, kt, lane, acc);
				break;
			}
			}
		}
		slot = slot + 1 == R ? 0 : slot + 1;
		if (comp_c.rr == rpp - 1) {
			/* The decode's group sum: (v0 + v1) + (v2 + v3), per (row, token). */
			float *dst = ys + parity * W * EMBER_WINDOW_MAX * 16 + warp * EMBER_WINDOW_MAX * 16;
			const int gid = lane >> 2, g4 = lane & 3;
#pragma unroll
			for (int nb = 0; nb < NB; nb++)
#pragma unroll
				for (int r = 0; r < 2; r++)
#pragma unroll
					for (int cc = 0; cc < 2; cc++) {
						const float y = (acc[nb][0][r][cc] + acc[nb][1][r][cc]) + (acc[nb][2][r][cc] + acc[nb][3][r][cc]);
						const int tok = nb * 8 + 2 * g4 + cc;
						if (tok < nt)
							dst[tok * 16 + gid + 8 * r] = y;
#pragma unroll
						for (int v = 0; v < 4; v++)
							acc[nb][v][r][cc] = 0.0f;
					}
			pend = 1;
			pend_si = comp_c.si;
			pend_rt = comp_c.rt;
			pend_pass = comp_c.pass;
			parity ^= 1;
		}
		if (g + 1 < n_rounds)
			cursor_next<EPI, W, Q8>(args, comp_c, rpp, kt_count);
	}
	cp_async_wait<0>();
	__syncthreads();
	if (pend)
		win_finish<EPI, W>(wa, ys + (parity ^ 1) * W * EMBER_WINDOW_MAX * 16, gate_s, nt, tok0, pend_si, pend_rt, pend_pass);
}

/* ---- launchers ---- */

static size_t win_smem(int R, int W, size_t tb_max, int k_pad, int nt)
{
	return (size_t)R * W * tb_max + (size_t)nt * (k_pad + WIN_XPAD) * 2 + (size_t)nt * (k_pad / 16 + WIN_SPAD) * 4 +
	       (size_t)2 * W * EMBER_WINDOW_MAX * 16 * 4 + (size_t)nt * 16 * 4;
}

template <int EPI, int W, int NB, bool Q8>
static int win_launch(const ember_gemv_win_args *a, int k_pad, int R, size_t smem, int tok0, int nt, int n_sm, cudaStream_t stream)
{
	static size_t smem_set = 48 * 1024;
	static size_t occ_smem = 0;
	static int occ_blocks = 0;
	if (smem > smem_set) {
		CUDA_CHECK(cudaFuncSetAttribute(win_gemv_kernel<EPI, W, NB, Q8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		smem_set = smem;
	}
	if (occ_smem != smem) {
		int nb = 0;
		CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, win_gemv_kernel<EPI, W, NB, Q8>, W * 32, smem));
		if (nb < 1)
			return ember_error_set(EMBER_ERROR, "gemv window: %zu bytes of shared memory per CTA do not fit an SM", smem);
		occ_blocks = nb;
		occ_smem = smem;
	}
	const int cap = occ_blocks * n_sm;
	const int per = (a->g.n_tiles + cap - 1) / cap;
	const int grid = (a->g.n_tiles + per - 1) / per;
	cudaLaunchAttribute attr;
	const cudaLaunchConfig_t cfg = ember_launch_config(&attr, dim3(grid), dim3(W * 32), smem, stream, a->g.pdl);
	CUDA_CHECK(cudaLaunchKernelEx(&cfg, win_gemv_kernel<EPI, W, NB, Q8>, *a, k_pad, R, tok0, nt));
	return 0;
}

template <int EPI, int W, bool Q8>
static int win_launch_nb(const ember_gemv_win_args *a, int k_pad, int R, size_t smem, int tok0, int nt, int n_sm, cudaStream_t stream)
{
	if (nt > 8)
		return win_launch<EPI, W, 2, Q8>(a, k_pad, R, smem, tok0, nt, n_sm, stream);
	return win_launch<EPI, W, 1, Q8>(a, k_pad, R, smem, tok0, nt, n_sm, stream);
}

template <int W, bool Q8>
static int win_dispatch(const ember_gemv_win_args *a, int k_pad, int R, size_t smem, int tok0, int nt, int n_sm, cudaStream_t stream)
{
	switch (a->g.epi) {
	case EMBER_GEMV_STORE:
	case EMBER_GEMV_ARGMAX: return win_launch_nb<EMBER_GEMV_STORE, W, Q8>(a, k_pad, R, smem, tok0, nt, n_sm, stream);
	case EMBER_GEMV_RESID: return win_launch_nb<EMBER_GEMV_RESID, W, Q8>(a, k_pad, R, smem, tok0, nt, n_sm, stream);
	case EMBER_GEMV_SWIGLU: return win_launch_nb<EMBER_GEMV_SWIGLU, W, Q8>(a, k_pad, R, smem, tok0, nt, n_sm, stream);
	}
	return ember_error_set(EMBER_ERROR, "gemv window: unknown epilogue %d", a->g.epi);
}

template <int W>
static int win_stage(const ember_gemv_win_args *a, int k_pad, cudaStream_t stream)
{
	const size_t smem = (size_t)k_pad * 2 + (size_t)(k_pad / 16) * 4 + 32 * 4;
	cudaLaunchAttribute attr;
	const cudaLaunchConfig_t cfg = ember_launch_config(&attr, dim3(a->n_tok), dim3(W * 32), smem, stream, a->g.pdl);
	__half *xs = static_cast<__half *>(a->xs);
	if (a->g.in_mode == EMBER_GEMV_IN_F16) {
		if (smem > 48 * 1024)
			CUDA_CHECK(cudaFuncSetAttribute(win_stage_kernel<EMBER_GEMV_IN_F16, W * 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		CUDA_CHECK(cudaLaunchKernelEx(&cfg, win_stage_kernel<EMBER_GEMV_IN_F16, W * 32>, a->g, k_pad, a->ld_x, xs, a->sx));
	} else {
		if (smem > 48 * 1024)
			CUDA_CHECK(cudaFuncSetAttribute(win_stage_kernel<EMBER_GEMV_IN_RMS, W * 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		CUDA_CHECK(cudaLaunchKernelEx(&cfg, win_stage_kernel<EMBER_GEMV_IN_RMS, W * 32>, a->g, k_pad, a->ld_x, xs, a->sx));
	}
	return 0;
}

extern "C" int ember_gemv_window_warps(int *out, const struct ember_gemv_args *g)
{
	EMBER_REQUIRE(out && g && g->n_seg >= 1 && g->n_seg <= 3 && g->k > 0);
	*out = 0;
	size_t tb_max = 0;
	for (int i = 0; i < g->n_seg; i++) {
		if (!g->seg[i].tiled)
			return 0;
		const size_t tb = ember_tile_bytes_any(g->seg[i].type);
		tb_max = tb > tb_max ? tb : tb_max;
	}
	*out = 4; /* the plain kernel: GEMV_WARPS */
	if (!g->streaming)
		return 0;
	const int k_pad = (g->k + EMBER_TILE_K - 1) / EMBER_TILE_K * EMBER_TILE_K;
	int fits = 0, W = 0, R = 0;
	const int rc = ember_gemv_stream_fit(&fits, &W, &R, g, k_pad, tb_max);
	if (rc)
		return rc;
	if (fits)
		*out = W;
	return 0;
}

extern "C" int ember_gemv_window(const struct ember_gemv_win_args *a_in, cudaStream_t stream)
{
	EMBER_REQUIRE(a_in && a_in->n_tok >= 1 && a_in->n_tok <= EMBER_WINDOW_MAX && a_in->xs && a_in->sx);
	struct ember_gemv_win_args wa = *a_in, *a = &wa;
	struct ember_gemv_args *g = &wa.g;
	EMBER_REQUIRE(g->n_seg >= 1 && g->n_seg <= 3 && g->k > 0 && g->x);
	EMBER_REQUIRE(g->epi != EMBER_GEMV_SWIGLU || (g->n_seg == 2 && g->seg[0].rows == g->seg[1].rows && g->out_h));
	EMBER_REQUIRE(g->in_mode != EMBER_GEMV_IN_RMS || g->norm_w);
	int W = 0;
	int rc = ember_gemv_window_warps(&W, g);
	if (rc)
		return rc;
	EMBER_REQUIRE(W == 4 || W == 8);
	size_t tb_max = 0;
	int tiles = 0;
	for (int i = 0; i < g->n_seg; i++) {
		EMBER_REQUIRE(g->seg[i].w && g->seg[i].rows > 0 && (g->epi == EMBER_GEMV_SWIGLU || g->seg[i].out));
		const size_t tb = ember_tile_bytes_any(g->seg[i].type);
		tb_max = tb > tb_max ? tb : tb_max;
		tiles += (g->seg[i].rows + 15) / 16;
	}
	/* Q8R segments (the draft's) run their own kernel instances; one launch takes one kind */
	const int q8 = g->seg[0].type == EMBER_T_Q8R;
	for (int i = 1; i < g->n_seg; i++)
		if ((g->seg[i].type == EMBER_T_Q8R) != q8)
			return ember_error_set(EMBER_EUNSUPPORTED, "gemv window: Q8R and GGUF-type segments in one launch");
	g->n_tiles = g->epi == EMBER_GEMV_SWIGLU ? (g->seg[0].rows + 15) / 16 : tiles;
	const int k_pad = (g->k + EMBER_TILE_K - 1) / EMBER_TILE_K * EMBER_TILE_K;
	static int n_sm = 0;
	if (!n_sm) {
		int dev = 0, count = 0;
		CUDA_CHECK(cudaGetDevice(&dev));
		CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev));
		n_sm = count > 0 ? count : 80;
	}
	int optin = 0;
	if ((rc = ember_gemv_smem_optin(&optin)))
		return rc;
	/* Tokens per pass over the weights: as many as fit next to a ring of 3 (else 2) rounds. */
	int R = 3, nt = a->n_tok;
	while (nt > 1 && win_smem(2, W, tb_max, k_pad, nt) > (size_t)optin)
		nt = (nt + 1) / 2;
	const int try_split = a->split == 2 || (a->split == 1 && nt < a->n_tok);
	if (!try_split && win_smem(2, W, tb_max, k_pad, nt) > (size_t)optin)
		return ember_error_set(EMBER_EUNSUPPORTED, "gemv window: k = %d does not fit shared memory", g->k);
	if ((rc = W == 8 ? win_stage<8>(a, k_pad, stream) : win_stage<4>(a, k_pad, stream)))
		return rc;
	if (try_split) {
		int ran = 0;
		if ((rc = win_split_run(&ran, a, W, k_pad, tb_max, n_sm, optin, stream)) || ran)
			return rc;
		if (win_smem(2, W, tb_max, k_pad, nt) > (size_t)optin)
			return ember_error_set(EMBER_EUNSUPPORTED, "gemv window: k = %d does not fit shared memory", g->k);
	}
	if (win_smem(R, W, tb_max, k_pad, nt) > (size_t)optin)
		R = 2;
	g->ring_bytes = (int)((size_t)R * W * tb_max);
	const size_t smem = win_smem(R, W, tb_max, k_pad, nt);
	for (int t0 = 0; t0 < a->n_tok; t0 += nt) {
		const int n = a->n_tok - t0 < nt ? a->n_tok - t0 : nt;
		if (q8)
			rc = W == 8 ? win_dispatch<8, true>(a, k_pad, R, smem, t0, n, n_sm, stream)
			            : win_dispatch<4, true>(a, k_pad, R, smem, t0, n, n_sm, stream);
		else
			rc = W == 8 ? win_dispatch<8, false>(a, k_pad, R, smem, t0, n, n_sm, stream)
			            : win_dispatch<4, false>(a, k_pad, R, smem, t0, n, n_sm, stream);
		if (rc)
			return rc;
	}
	return 0;
}

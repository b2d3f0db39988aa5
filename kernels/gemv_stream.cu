/*
 * gemv_stream.cu - streaming variant of the decode GEMV (EMBER_GEMV_STREAM; see gemv_stream.cuh).
 *
 * The plain kernel (gemv.cu) gives each CTA one row tile: every CTA stages the whole input (for
 * the RMSNorm input, 2-3x the bytes of the weights it then reads), its ring starts empty and
 * drains at the end, and the SwiGLU launch's up pass starts with a cold ring. Here the grid is at
 * most one wave (as many CTAs as fit, or EMBER_GEMV_CTAS per SM), with the row tiles ("units")
 * dealt out evenly, and each CTA
 *   - issues the first rounds of weight copies before anything else,
 *   - stages the input once (the RMSNorm input in one trip when it fits in registers),
 *   - then walks one flat sequence of rounds over all its units and passes (a round = one 16x256
 *     tile per warp), one __syncthreads per round, the ring refilled R-1 rounds ahead across unit
 *     and pass boundaries, so it never drains until the CTA's last round.
 * A job's (unit, pass) per-warp sums go to a double-buffered shared array and are added and
 * finished (store, residual, SwiGLU, argmax) by 16 threads after the next round's barrier.
 * Tiled weights only (raw segments run the plain kernel). Same cores as gemv.cu (gemv_core.cuh).
 */
#include "gemv_stream.cuh"

#include "gemv_core.cuh"
#include "gemv_ring.cuh"

#ifndef STREAM_MIN_BLOCKS_W4
#define STREAM_MIN_BLOCKS_W4 4 /* CTAs per SM the 4-warp kernel's registers must allow */
#endif

/* Adds the warps' sums of a finished job (16 threads, one row each; seg/rt/pass: the job's) and
 * applies the epilogue. SwiGLU keeps the gate sum of pass 0 in *gate until pass 1 of the same rows. */
template <int EPI, int W>
static __device__ __forceinline__ void stream_finish(const ember_gemv_args &a, const float *ys, int si, int rt, int pass,
                                                     float *gate, unsigned long long *best_key)
{
	const int t = threadIdx.x;
	float y = 0.0f;
#pragma unroll
	for (int w = 0; w < W; w++)
		y += ys[w * 16 + t];
	const ember_gemv_seg &seg = a.seg[si];
	const int row = rt * 16 + t;
	if (row >= seg.rows)
		return;
	if (EPI == EMBER_GEMV_STORE || EPI == EMBER_GEMV_ARGMAX) {
		seg.out[row] = y;
		if (EPI == EMBER_GEMV_ARGMAX) {
			const unsigned long long key = argmax_key(y, row);
			*best_key = key > *best_key ? key : *best_key;
		}
	} else if (EPI == EMBER_GEMV_RESID) {
		seg.out[row] += y;
	} else if (pass == 0) {
		*gate = y;
	} else {
		static_cast<__half *>(a.out_h)[row] = swiglu_h(*gate, y);
	}
}

template <int TYPE>
static __device__ __forceinline__ void stream_tile(const uint8_t *tile, const uint32_t *xs32, const float *sx, int kt,
                                                   int lane, float &y0, float &y1)
{
	tile_regs<TYPE> t;
	tile_load<TYPE>(tile, lane, t);
	tile_compute<TYPE>(t, xs32 + kt * 128, sx + kt * 16, lane, y0, y1);
}

template <int IN, int EPI, int W>
static __global__ void __launch_bounds__(W * 32, W == 4 ? STREAM_MIN_BLOCKS_W4 : 2) gemv_stream_kernel(const ember_gemv_args args, int k_pad,
                                                                                int ring_rounds, int pdl)
{
	constexpr int P = EPI == EMBER_GEMV_SWIGLU ? 2 : 1;
	extern __shared__ __align__(16) unsigned char smem_raw[];
	const int R = ring_rounds;
	const size_t slot_bytes = (size_t)args.ring_bytes / (size_t)R;
	uint8_t *ring = smem_raw;
	__half *xs = reinterpret_cast<__half *>(smem_raw + args.ring_bytes);
	float *sx = reinterpret_cast<float *>(smem_raw + args.ring_bytes + (size_t)k_pad * 2);
	float *red = sx + k_pad / 16;
	float *ys = red + 32; /* [2][W][16], indexed by job parity */
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	const int kt_count = k_pad / EMBER_TILE_K, rpp = (kt_count + W - 1) / W;
	const int n_units = args.n_tiles > (int)blockIdx.x ? (args.n_tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
	const int n_rounds = n_units * P * rpp;

	/* Weights first: they do not depend on the previous kernel. */
	stream_cursor issue_c, comp_c;
	issue_c.unit = (int)blockIdx.x;
	issue_c.pass = 0;
	issue_c.rr = 0;
	if (n_rounds > 0)
		cursor_locate<EPI, W>(args, issue_c, kt_count);
	comp_c = issue_c;
	int issue_slot = 0;
	for (int g = 0; g < R - 1; g++) {
		stream_issue<EPI, W>(args, issue_c, ring, slot_bytes, issue_slot, g, n_rounds, rpp, kt_count);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;
	}
	if (pdl)
		ember_pdl_release_wait();
	gemv_stage_input<IN, W * 32>(args, k_pad, xs, sx, red);

	const uint32_t *xs32 = reinterpret_cast<const uint32_t *>(xs);
	float y0 = 0.0f, y1 = 0.0f, gate = 0.0f;
	unsigned long long best_key = 0;
	/* A finished job whose sums wait for the next barrier: its segment, row tile, pass, buffer. */
	int pend = 0, pend_si = 0, pend_rt = 0, pend_pass = 0, parity = 0;
	int slot = 0;
	for (int g = 0; g < n_rounds; g++) {
		cp_async_wait_dyn(R - 2);
		__syncthreads(); /* round g landed for all; round g-1's slot and the pending sums are free */
		if (pend) {
			if (threadIdx.x < 16)
				stream_finish<EPI, W>(args, ys + (parity ^ 1) * W * 16, pend_si, pend_rt, pend_pass, &gate, &best_key);
			pend = 0;
		}
		stream_issue<EPI, W>(args, issue_c, ring, slot_bytes, issue_slot, g + R - 1, n_rounds, rpp, kt_count);
		issue_slot = issue_slot + 1 == R ? 0 : issue_slot + 1;

		const int kt = comp_c.rr * W + warp;
		if (kt < kt_count) {
			const uint8_t *tile = ring + (size_t)slot * slot_bytes + (size_t)warp * comp_c.tb;
			switch (comp_c.type) {
			case EMBER_T_Q8_0: stream_tile<EMBER_T_Q8_0>(tile, xs32, sx, kt, lane, y0, y1); break;
			case EMBER_T_Q4_K: stream_tile<EMBER_T_Q4_K>(tile, xs32, sx, kt, lane, y0, y1); break;
			case EMBER_T_Q6_K: stream_tile<EMBER_T_Q6_K>(tile, xs32, sx, kt, lane, y0, y1); break;
			}
		}
		slot = slot + 1 == R ? 0 : slot + 1;
		if (comp_c.rr == rpp - 1) {
			gemv_group_sum(y0, y1);
			if ((lane & 3) == 0) {
				float *dst = ys + parity * W * 16 + warp * 16;
				dst[lane >> 2] = y0;
				dst[(lane >> 2) + 8] = y1;
			}
			y0 = 0.0f;
			y1 = 0.0f;
			pend = 1;
			pend_si = comp_c.si;
			pend_rt = comp_c.rt;
			pend_pass = comp_c.pass;
			parity ^= 1;
		}
		if (g + 1 < n_rounds)
			cursor_next<EPI, W>(args, comp_c, rpp, kt_count);
	}
	cp_async_wait<0>();
	__syncthreads();
	if (pend && threadIdx.x < 16)
		stream_finish<EPI, W>(args, ys + (parity ^ 1) * W * 16, pend_si, pend_rt, pend_pass, &gate, &best_key);
	if (EPI == EMBER_GEMV_ARGMAX)
		argmax_publish(args, best_key);
}

/* ---- launcher ---- */

template <int IN, int EPI, int W>
static int stream_launch(const ember_gemv_args *a, int k_pad, int n_sm, cudaStream_t stream)
{
	static size_t smem_set = 48 * 1024;
	static size_t occ_smem = 0;
	static int occ_blocks = 0;
	const int R = a->stream_ring;
	const size_t smem = (size_t)a->ring_bytes + (size_t)k_pad * 2 + (size_t)(k_pad / 16) * 4 + (32 + 2 * W * 16) * 4;
	if (smem > smem_set) {
		CUDA_CHECK(cudaFuncSetAttribute(gemv_stream_kernel<IN, EPI, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		smem_set = smem;
	}
	if (occ_smem != smem) {
		int nb = 0;
		CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, gemv_stream_kernel<IN, EPI, W>, W * 32, smem));
		if (nb < 1)
			return ember_error_set(EMBER_ERROR, "gemv stream: %zu bytes of shared memory per CTA do not fit an SM", smem);
		occ_blocks = nb;
		occ_smem = smem;
	}
	int per_sm = occ_blocks;
	if (a->stream_ctas > 0 && a->stream_ctas < per_sm)
		per_sm = a->stream_ctas;
	/* One wave at most, the units dealt out evenly: every CTA gets `per` or `per - 1` of them. */
	const int cap = per_sm * n_sm;
	const int per = (a->n_tiles + cap - 1) / cap;
	const int grid = (a->n_tiles + per - 1) / per;
	cudaLaunchAttribute attr;
	const cudaLaunchConfig_t cfg = ember_launch_config(&attr, dim3(grid), dim3(W * 32), smem, stream, a->pdl);
	CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemv_stream_kernel<IN, EPI, W>, *a, k_pad, R, a->pdl));
	CUDA_CHECK_LAUNCH("gemv_stream_kernel");
	return 0;
}

template <int IN, int W>
static int stream_dispatch_epi(const ember_gemv_args *a, int k_pad, int n_sm, cudaStream_t stream)
{
	switch (a->epi) {
	case EMBER_GEMV_STORE: return stream_launch<IN, EMBER_GEMV_STORE, W>(a, k_pad, n_sm, stream);
	case EMBER_GEMV_RESID: return stream_launch<IN, EMBER_GEMV_RESID, W>(a, k_pad, n_sm, stream);
	case EMBER_GEMV_SWIGLU: return stream_launch<IN, EMBER_GEMV_SWIGLU, W>(a, k_pad, n_sm, stream);
	case EMBER_GEMV_ARGMAX: return stream_launch<IN, EMBER_GEMV_ARGMAX, W>(a, k_pad, n_sm, stream);
	}
	return ember_error_set(EMBER_ERROR, "gemv stream: unknown epilogue %d", a->epi);
}

template <int W>
static int stream_dispatch(const ember_gemv_args *a, int k_pad, int n_sm, cudaStream_t stream)
{
	if (a->in_mode == EMBER_GEMV_IN_F16)
		return stream_dispatch_epi<EMBER_GEMV_IN_F16, W>(a, k_pad, n_sm, stream);
	return stream_dispatch_epi<EMBER_GEMV_IN_RMS, W>(a, k_pad, n_sm, stream);
}

extern "C" int ember_gemv_smem_optin(int *out)
{
	static int smem_optin = 0;
	if (!smem_optin) {
		int dev = 0;
		CUDA_CHECK(cudaGetDevice(&dev));
		CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	}
	*out = smem_optin;
	return 0;
}

extern "C" int ember_gemv_stream_fit(int *fits, int *out_w, int *out_r, const struct ember_gemv_args *a, int k_pad, size_t tb_max)
{
	const int W = a->stream_warps == 4 ? 4 : 8;
	int R = a->stream_ring > 0 ? a->stream_ring : 3;
	if (R < 2)
		R = 2;
	if (R > STREAM_MAX_RING)
		R = STREAM_MAX_RING;
	/* The ring shrinks to what the SM's shared memory holds next to the input; none fits: plain kernel. */
	int smem_optin = 0;
	const int rc = ember_gemv_smem_optin(&smem_optin);
	if (rc)
		return rc;
	const size_t fixed = (size_t)k_pad * 2 + (size_t)(k_pad / 16) * 4 + (32 + 2 * W * 16) * 4;
	while (R > 2 && fixed + (size_t)R * W * tb_max > (size_t)smem_optin)
		R--;
	*fits = fixed + (size_t)R * W * tb_max <= (size_t)smem_optin;
	*out_w = W;
	*out_r = R;
	return 0;
}

extern "C" int ember_gemv_stream(int *out_ran, const struct ember_gemv_args *a_in, int k_pad, int n_sm,
                                 cudaStream_t stream)
{
	EMBER_REQUIRE(out_ran && a_in && n_sm > 0 && a_in->n_tiles > 0);
	*out_ran = 0;
	struct ember_gemv_args args = *a_in, *a = &args;
	size_t tb_max = 0;
	for (int i = 0; i < a->n_seg; i++) {
		if (!a->seg[i].tiled)
			return 0;
		const size_t tb = ember_tile_bytes(a->seg[i].type);
		tb_max = tb > tb_max ? tb : tb_max;
	}
	int W = 0, R = 0, fits = 0;
	const int rc = ember_gemv_stream_fit(&fits, &W, &R, a, k_pad, tb_max);
	if (rc || !fits)
		return rc;
	a->stream_warps = W;
	a->stream_ring = R;
	a->ring_bytes = (int)((size_t)R * W * tb_max);
	*out_ran = 1;
	return W == 4 ? stream_dispatch<4>(a, k_pad, n_sm, stream) : stream_dispatch<8>(a, k_pad, n_sm, stream);
}

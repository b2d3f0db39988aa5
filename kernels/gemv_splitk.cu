/*
 * gemv_splitk.cu - split-K variant of the decode GEMV (EMBER_GEMV_SPLITK; the plan is in layout.cuh).
 *
 * The plain kernel (gemv.cu) gives a CTA 16 rows and all of K: up to 12 dependent rounds of 4 tiles,
 * in grids of ~1-1.5 waves on an H200. Here a CTA owns 16 rows x one K slice (1-2 rounds under
 * auto, all of them in flight at once) and the grid is 2-6x larger. Each CTA stores its 16 fp32
 * partial sums in a scratch buffer, fences, and takes a ticket on its row block's counter; the CTA
 * with the last ticket fences again, adds the partials of slice 0, 1, 2, ... in that order (so the
 * result is bit-identical whichever CTA finishes last), applies the epilogue exactly as gemv.cu does
 * (store, residual add, SwiGLU of the gate and up rows, greedy argmax) and sets the counter back to
 * zero: the buffers need no host-side reset between steps or inside the captured decode graph. A CTA
 * stages only its slice of the input; for the RMSNorm input it scales the slice by a power of two near
 * the slice's rms and the finisher applies 1/rms(x) from the slices' sums of squares.
 */
#include "gemv_splitk.cuh"

#include "gemv_core.cuh"

struct splitk_params {
	ember_splitk_plan plan;
	int k_pad;
	float *scratch;     /* partials and slice sums of squares (layout.cuh's index functions) */
	uint32_t *counters; /* [plan.groups], zero at rest */
};

/* Stages input columns [c0, c0 + cols) as fp16 xs plus per-16-column sums sx (columns >= k are 0).
 * IN_RMS: also returns the slice's sum of squares and the exponent e of the staged x * w * 2^-e.
 * Contains __syncthreads (IN_RMS); the caller syncs before reading xs. */
template <int IN>
static __device__ __forceinline__ void stage_slice(const ember_gemv_args &a, int c0, int cols, __half *xs, float *sx,
                                                   float *red, float *out_ss, int *out_exp)
{
	const int tid = threadIdx.x, n_items = cols / 16;
	const int n_valid = a.k - c0 < cols ? a.k - c0 : cols;
	const uintptr_t addr_bits = (uintptr_t)a.x | (IN == EMBER_GEMV_IN_RMS ? (uintptr_t)a.norm_w : 0);
	const bool vec = (a.k & 15) == 0 && (addr_bits & 15) == 0;
	float factor = 1.0f;
	*out_ss = 0.0f;
	*out_exp = 0;
	if (IN == EMBER_GEMV_IN_RMS) {
		const float *x = static_cast<const float *>(a.x) + c0;
		float ss = 0.0f;
		if (vec) {
			const float4 *x4 = reinterpret_cast<const float4 *>(x);
			const int n4 = n_valid / 4;
			for (int i0 = tid; i0 < n4; i0 += 4 * GEMV_THREADS) {
				float4 v[4];
#pragma unroll
				for (int u = 0; u < 4; u++)
					v[u] = i0 + u * GEMV_THREADS < n4 ? x4[i0 + u * GEMV_THREADS] : make_float4(0, 0, 0, 0);
#pragma unroll
				for (int u = 0; u < 4; u++)
					ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
			}
		} else {
			for (int i = tid; i < n_valid; i += GEMV_THREADS)
				ss = fmaf(x[i], x[i], ss);
		}
		ss = ember_block_sum(ss, red);
		const int e = ember_splitk_exponent(ss, n_valid);
		factor = ldexpf(1.0f, -e);
		*out_ss = ss;
		*out_exp = e;
	}
	if (vec) {
		/* 16 columns per item, two items in flight per thread (a slice is 1-4k columns). */
		for (int t0 = tid; t0 < n_items; t0 += 2 * GEMV_THREADS) {
			uint32_t packed[2][8];
			if (IN == EMBER_GEMV_IN_F16) {
				const uint4 *x4 = reinterpret_cast<const uint4 *>(static_cast<const __half *>(a.x) + c0);
				uint4 v[2][2];
#pragma unroll
				for (int u = 0; u < 2; u++) {
					const int t = t0 + u * GEMV_THREADS;
					const bool ok = t < n_items && 16 * t < n_valid;
					v[u][0] = ok ? x4[2 * t] : make_uint4(0, 0, 0, 0);
					v[u][1] = ok ? x4[2 * t + 1] : make_uint4(0, 0, 0, 0);
				}
#pragma unroll
				for (int u = 0; u < 2; u++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						packed[u][4 * h] = v[u][h].x;
						packed[u][4 * h + 1] = v[u][h].y;
						packed[u][4 * h + 2] = v[u][h].z;
						packed[u][4 * h + 3] = v[u][h].w;
					}
			} else {
				const float4 *x4 = reinterpret_cast<const float4 *>(static_cast<const float *>(a.x) + c0);
				const float4 *w4 = reinterpret_cast<const float4 *>(a.norm_w + c0);
				float4 xv[2][4], wv[2][4];
#pragma unroll
				for (int u = 0; u < 2; u++) {
					const int t = t0 + u * GEMV_THREADS;
					const bool ok = t < n_items && 16 * t < n_valid;
#pragma unroll
					for (int i = 0; i < 4; i++) {
						xv[u][i] = ok ? x4[4 * t + i] : make_float4(0, 0, 0, 0);
						wv[u][i] = ok ? w4[4 * t + i] : make_float4(0, 0, 0, 0);
					}
				}
#pragma unroll
				for (int u = 0; u < 2; u++)
#pragma unroll
					for (int i = 0; i < 4; i++) {
						const float4 p = xv[u][i], q = wv[u][i];
						packed[u][2 * i] = ember_pack_half2(p.x * q.x * factor, p.y * q.y * factor);
						packed[u][2 * i + 1] = ember_pack_half2(p.z * q.z * factor, p.w * q.w * factor);
					}
			}
#pragma unroll
			for (int u = 0; u < 2; u++) {
				const int t = t0 + u * GEMV_THREADS;
				if (t < n_items) {
					float sum = 0.0f;
#pragma unroll
					for (int j = 0; j < 8; j++) {
						const float2 f = ember_unpack_half2(packed[u][j]);
						sum += f.x + f.y;
					}
					reinterpret_cast<uint4 *>(xs)[2 * t] = make_uint4(packed[u][0], packed[u][1], packed[u][2], packed[u][3]);
					reinterpret_cast<uint4 *>(xs)[2 * t + 1] = make_uint4(packed[u][4], packed[u][5], packed[u][6], packed[u][7]);
					sx[t] = sum;
				}
			}
		}
	} else {
		/* Any k, any alignment. */
		for (int i = tid; i < cols; i += GEMV_THREADS) {
			if (IN == EMBER_GEMV_IN_F16)
				xs[i] = i < n_valid ? static_cast<const __half *>(a.x)[c0 + i] : __float2half(0.0f);
			else
				xs[i] = __float2half_rn(i < n_valid ? static_cast<const float *>(a.x)[c0 + i] * a.norm_w[c0 + i] * factor : 0.0f);
		}
		__syncthreads();
		for (int t = tid; t < n_items; t += GEMV_THREADS) {
			float sum = 0.0f;
#pragma unroll
			for (int i = 0; i < 16; i++)
				sum += __half2float(xs[16 * t + i]);
			sx[t] = sum;
		}
	}
}

/* Row tile and segment of an item's row block (SwiGLU: the pass picks gate or up). */
static __device__ __forceinline__ int item_tile(const ember_gemv_args &args, bool swiglu, int group, int pass, int *si)
{
	if (swiglu) {
		*si = pass;
		return group;
	}
	return locate_tile(args, group, false, si);
}

/* Warp 0, after an item: publishes its partials and, when its ticket is the row block's last, adds
 * all partials in slice order and applies the epilogue (lanes 0-15: rows; SwiGLU: lanes 16-31 add
 * the up rows). y: this item's sum for row (lane & 15); ss, e: the CTA's slice sum of squares and
 * exponent (IN_RMS). */
template <int IN, int EPI>
static __device__ __forceinline__ void finish_item(const ember_gemv_args &args, const splitk_params &sp, int group, int pass,
                                                   int slice, int si, int rt, float y, float ss, int e,
                                                   unsigned long long *best_key)
{
	const int lane = threadIdx.x & 31, r = lane & 15;
	const ember_splitk_plan &plan = sp.plan;
	const uint32_t expected = (uint32_t)(plan.slices * plan.passes);
	if (IN == EMBER_GEMV_IN_RMS)
		y = ldexpf(y, e); /* exact: undoes the slice's 2^-e */
	float total = y, ss_total = ss;
	if (expected > 1) {
		if (lane < 16)
			sp.scratch[ember_splitk_part_index(&plan, slice, group, pass, r)] = y;
		if (IN == EMBER_GEMV_IN_RMS && lane == 0 && pass == 0)
			sp.scratch[ember_splitk_ss_index(&plan, slice, group)] = ss;
		__threadfence(); /* this lane's partials are visible GPU-wide before the ticket */
		__syncwarp();
		uint32_t ticket = 0;
		if (lane == 0) {
			ticket = atomicAdd(&sp.counters[group], 1u);
			__threadfence(); /* with the last ticket: every other item's partials are visible now */
		}
		ticket = __shfl_sync(0xffffffffu, ticket, 0);
		__syncwarp(); /* orders lane 0's ticket and fence before the other lanes' loads */
		if (ticket != expected - 1)
			return;
		/* Fixed order, L2 loads (.cg: never a stale L1 line). */
		const int p = lane >> 4;
		total = 0.0f;
		if (p < plan.passes) {
#pragma unroll 4
			for (int s = 0; s < plan.slices; s++)
				total += __ldcg(sp.scratch + ember_splitk_part_index(&plan, s, group, p, r));
		}
		if (IN == EMBER_GEMV_IN_RMS) {
			ss_total = 0.0f;
#pragma unroll 4
			for (int s = 0; s < plan.slices; s++)
				ss_total += __ldcg(sp.scratch + ember_splitk_ss_index(&plan, s, group));
		}
		if (lane == 0)
			atomicExch(&sp.counters[group], 0u); /* every item of the block has arrived: ready for the next launch */
	}
	if (IN == EMBER_GEMV_IN_RMS)
		total *= 1.0f / sqrtf(ss_total / (float)args.k + args.eps);
	const float up = __shfl_down_sync(0xffffffffu, total, 16);
	const ember_gemv_seg &seg = args.seg[EPI == EMBER_GEMV_SWIGLU ? 0 : si];
	const int row = rt * 16 + r;
	if (lane >= 16 || row >= seg.rows)
		return;
	if (EPI == EMBER_GEMV_STORE || EPI == EMBER_GEMV_ARGMAX) {
		seg.out[row] = total;
	} else if (EPI == EMBER_GEMV_RESID) {
		seg.out[row] += total;
	} else if (EPI == EMBER_GEMV_SWIGLU) {
		const float silu = total / (1.0f + expf(-total));
		static_cast<__half *>(args.out_h)[row] = __float2half_rn(silu * up);
	}
	if (EPI == EMBER_GEMV_ARGMAX) {
		const unsigned long long key = argmax_key(total, row);
		*best_key = key > *best_key ? key : *best_key;
	}
}

/* 5 CTAs per SM (95-96 registers, no spills; gemv.cu's kernel takes up to 127 for 4): more tiles in flight. */
template <int IN, int EPI>
static __global__ void __launch_bounds__(GEMV_THREADS, EMBER_SPLITK_CTAS_PER_SM)
	gemv_splitk_kernel(const ember_gemv_args args, const splitk_params sp, int pdl)
{
	extern __shared__ __align__(16) unsigned char smem_raw[];
	const ember_splitk_plan &plan = sp.plan;
	const int slice_cols = plan.slice_tiles * EMBER_TILE_K;
	uint8_t *ring = smem_raw; /* min(3, rounds per slice) x 4 tiles of the largest tiled type */
	__half *xs = reinterpret_cast<__half *>(smem_raw + args.ring_bytes);
	float *sx = reinterpret_cast<float *>(smem_raw + args.ring_bytes + (size_t)slice_cols * 2);
	float *red = sx + slice_cols / 16;
	float *ys = red + 32;
	float *yv = ys + 16 * GEMV_WARPS;
	constexpr bool swiglu = EPI == EMBER_GEMV_SWIGLU;

	/* gridDim.x is a multiple of plan.slices, so all of this CTA's items share one slice. */
	const int slice = (int)blockIdx.x % plan.slices;
	const int kt0 = slice * plan.slice_tiles;
	const int kt_n = min(plan.slice_tiles, sp.k_pad / EMBER_TILE_K - kt0);
	const int cols = min(kt_n * EMBER_TILE_K, args.k - kt0 * EMBER_TILE_K); /* of the slice, inside k */

	bool prefetched = false;
	if ((int)blockIdx.x < plan.items) {
		int group, pass, s, si;
		ember_splitk_item(&plan, blockIdx.x, &group, &pass, &s);
		const int rt = item_tile(args, swiglu, group, pass, &si);
		if (args.seg[si].tiled) {
			const size_t tb = ember_tile_bytes(args.seg[si].type);
			prefetch_rounds(ring, tile_base(args.seg[si], rt, sp.k_pad) + (size_t)kt0 * tb, tb, kt_n);
			prefetched = true;
		}
	}
	if (pdl) {
		asm volatile("griddepcontrol.launch_dependents;\n" ::);
		asm volatile("griddepcontrol.wait;\n" ::: "memory");
	}

	float ss = 0.0f;
	int e = 0;
	stage_slice<IN>(args, kt0 * EMBER_TILE_K, kt_n * EMBER_TILE_K, xs, sx, red, &ss, &e);
	__syncthreads();

	unsigned long long best_key = 0;
	for (int item = blockIdx.x; item < plan.items; item += gridDim.x) {
		int group, pass, s, si;
		ember_splitk_item(&plan, item, &group, &pass, &s);
		const int rt = item_tile(args, swiglu, group, pass, &si);
		row_tile_dot(args.seg[si], rt, kt0, kt_n, cols, args.k, sp.k_pad, xs, sx, ys, yv, ring,
		             prefetched && item == (int)blockIdx.x);
		if (threadIdx.x < 32)
			finish_item<IN, EPI>(args, sp, group, pass, slice, si, rt, yv[threadIdx.x & 15], ss, e, &best_key);
		__syncthreads(); /* yv is rewritten by the next item */
	}
	if (EPI == EMBER_GEMV_ARGMAX)
		argmax_publish(args, best_key);
}

/* ---- launcher ---- */

template <int IN, int EPI>
static int splitk_launch(const ember_gemv_args *a, const splitk_params *sp, int grid, size_t smem, cudaStream_t stream)
{
	static size_t smem_set = 48 * 1024;
	if (smem > smem_set) {
		CUDA_CHECK(cudaFuncSetAttribute(gemv_splitk_kernel<IN, EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		smem_set = smem;
	}
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];
	cfg.gridDim = dim3(grid);
	cfg.blockDim = dim3(GEMV_THREADS);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr[0].val.programmaticStreamSerializationAllowed = a->pdl ? 1 : 0;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemv_splitk_kernel<IN, EPI>, *a, *sp, a->pdl));
	CUDA_CHECK_LAUNCH("gemv_splitk_kernel");
	return 0;
}

template <int IN>
static int splitk_dispatch_epi(const ember_gemv_args *a, const splitk_params *sp, int grid, size_t smem, cudaStream_t stream)
{
	switch (a->epi) {
	case EMBER_GEMV_STORE: return splitk_launch<IN, EMBER_GEMV_STORE>(a, sp, grid, smem, stream);
	case EMBER_GEMV_RESID: return splitk_launch<IN, EMBER_GEMV_RESID>(a, sp, grid, smem, stream);
	case EMBER_GEMV_SWIGLU: return splitk_launch<IN, EMBER_GEMV_SWIGLU>(a, sp, grid, smem, stream);
	case EMBER_GEMV_ARGMAX: return splitk_launch<IN, EMBER_GEMV_ARGMAX>(a, sp, grid, smem, stream);
	}
	return ember_error_set(EMBER_ERROR, "gemv split-K: unknown epilogue %d", a->epi);
}

extern "C" int ember_gemv_splitk(int *out_ran, const struct ember_gemv_args *a_in, int k_pad, int n_sm, int grid_cap,
                                 cudaStream_t stream)
{
	EMBER_REQUIRE(out_ran && a_in && k_pad > 0 && k_pad % EMBER_TILE_K == 0 && a_in->n_tiles > 0 && grid_cap > 0);
	EMBER_REQUIRE(a_in->splitk > 0 || a_in->splitk == EMBER_SPLITK_AUTO);
	struct ember_gemv_args args = *a_in, *a = &args;
	splitk_params sp;
	sp.plan = ember_splitk_make_plan(a->splitk, k_pad / EMBER_TILE_K, a->n_tiles, a->epi == EMBER_GEMV_SWIGLU ? 2 : 1, n_sm);
	if (a->splitk == EMBER_SPLITK_AUTO && sp.plan.slices * sp.plan.passes == 1) {
		*out_ran = 0;
		return 0;
	}
	EMBER_REQUIRE(a->splitk_scratch && a->splitk_counters);
	EMBER_REQUIRE(ember_splitk_scratch_floats(&sp.plan) <= a->splitk_scratch_floats);
	EMBER_REQUIRE(sp.plan.groups <= a->splitk_counters_cap);
	sp.k_pad = k_pad;
	sp.scratch = a->splitk_scratch;
	sp.counters = a->splitk_counters;

	/* The ring holds every round of a slice up to GEMV_ROUNDS: auto's 1-2 rounds are all issued
	 * before the input is staged. */
	const int rounds = (sp.plan.slice_tiles + 3) / 4;
	size_t ring_tile = 0;
	for (int i = 0; i < a->n_seg; i++)
		if (a->seg[i].tiled && ember_tile_bytes(a->seg[i].type) > ring_tile)
			ring_tile = ember_tile_bytes(a->seg[i].type);
	a->ring_bytes = (int)((rounds < GEMV_ROUNDS ? rounds : GEMV_ROUNDS) * 4 * ring_tile);
	const size_t slice_cols = (size_t)sp.plan.slice_tiles * EMBER_TILE_K;
	const size_t smem = (size_t)a->ring_bytes + slice_cols * 2 + slice_cols / 16 * 4 + (32 + 16 * GEMV_WARPS + 32) * 4;
	const int grid = ember_splitk_grid(&sp.plan, grid_cap);
	const int rc = a->in_mode == EMBER_GEMV_IN_F16 ? splitk_dispatch_epi<EMBER_GEMV_IN_F16>(a, &sp, grid, smem, stream)
	                                               : splitk_dispatch_epi<EMBER_GEMV_IN_RMS>(a, &sp, grid, smem, stream);
	if (rc)
		return rc;
	*out_ran = 1;
	return 0;
}

/*
 * gemv.cu - decode GEMV (see gemv.cuh). One CTA of 4 warps computes 16 output rows.
 *
 * Variant "mma" (tiled weights, layout.cuh): each warp walks 16x256 tiles of its rows, turns the
 * packed quants into exact fp16 integers and multiplies them with the fp16 activations on the
 * tensor cores (mma.sync m16n8k16, fp32 accumulate; x is copied into all 8 B columns), then applies
 * the block scale in fp32 once per scale group. Per weight that is ~1 integer op instead of the
 * ~4 ALU ops of scalar dequantize-and-FMA. Tiles stream through a shared-memory ring filled by
 * cp.async (rounds of 4 tiles, 3 rounds in flight), the first rounds issued before the input is
 * staged (and, with EMBER_PDL, before the previous kernel has finished). Variant "simple" (raw GGUF rows): a warp per
 * row, scalar fp32 dequantize-and-FMA in ggml's formulas; the reference and the fallback.
 * The input (fp16 x, or RMSNorm of the fp32 residual) is staged in shared memory with per-16
 * column sums that the mma epilogue needs to remove the 1024 offset and the Q4_K mins.
 * The shared cores live in gemv_core.cuh; with args.streaming, ember_gemv hands the launch to the
 * streaming kernel (gemv_stream.cu) when every segment is tiled.
 */
#include "gemv.cuh"

#include "gemv_core.cuh"
#include "gemv_stream.cuh"

/* ---- the kernel ---- */

#ifndef GEMV_MIN_BLOCKS
#define GEMV_MIN_BLOCKS 4 /* CTAs per SM the kernel's registers must allow */
#endif

template <int IN, int EPI>
static __global__ void __launch_bounds__(GEMV_THREADS, GEMV_MIN_BLOCKS) gemv_kernel(const ember_gemv_args args, int k_pad, int pdl)
{
	extern __shared__ __align__(16) unsigned char smem_raw[];
	uint8_t *ring = smem_raw; /* GEMV_ROUNDS x 4 tiles of the largest tiled type in args */
	__half *xs = reinterpret_cast<__half *>(smem_raw + args.ring_bytes);
	float *sx = reinterpret_cast<float *>(smem_raw + args.ring_bytes + (size_t)k_pad * 2);
	float *red = sx + k_pad / 16;
	float *ys = red + 32;
	float *yv = ys + 16 * GEMV_WARPS;
	const int k = args.k, tid = threadIdx.x;

	/* Weights do not depend on the previous kernel: start streaming the first row tile before
	 * waiting for it (programmatic dependent launch) and before staging the input. */
	bool prefetched = false;
	if ((int)blockIdx.x < args.n_tiles) {
		int si;
		const int rt = locate_tile(args, blockIdx.x, EPI == EMBER_GEMV_SWIGLU, &si);
		if (args.seg[si].tiled) {
			prefetch_rounds(ring, tile_base(args.seg[si], rt, k_pad), ember_tile_bytes(args.seg[si].type), k_pad / EMBER_TILE_K);
			prefetched = true;
		}
	}
	if (pdl)
		ember_pdl_release_wait();

	gemv_stage_input<IN, GEMV_THREADS>(args, k_pad, xs, sx, red);
	__syncthreads();

	/* Grid-stride over row tiles, so a huge matrix (the LM head) stages x once per CTA, not once
	 * per 16 rows. */
	unsigned long long best_key = 0;
	for (int tile = blockIdx.x; tile < args.n_tiles; tile += gridDim.x) {
		int si;
		const int rt = locate_tile(args, tile, EPI == EMBER_GEMV_SWIGLU, &si);
		const ember_gemv_seg &seg = args.seg[si];
		/* One call site (a loop for the gate/up pair) keeps the register allocation of the
		 * inlined cores from doubling. */
		for (int pass = 0; pass < (EPI == EMBER_GEMV_SWIGLU ? 2 : 1); pass++)
			row_tile_dot(args.seg[si + pass], rt, k, k_pad, xs, sx, ys, yv + 16 * pass, ring,
			             prefetched && pass == 0 && tile == (int)blockIdx.x);

		const int row = rt * 16 + tid;
		if (EPI == EMBER_GEMV_STORE || EPI == EMBER_GEMV_ARGMAX) {
			if (tid < 16 && row < seg.rows)
				seg.out[row] = yv[tid];
		} else if (EPI == EMBER_GEMV_RESID) {
			if (tid < 16 && row < seg.rows)
				seg.out[row] += yv[tid];
		} else if (EPI == EMBER_GEMV_SWIGLU) {
			if (tid < 16 && row < seg.rows) {
				static_cast<__half *>(args.out_h)[row] = swiglu_h(yv[tid], yv[16 + tid]);
			}
		}
		if (EPI == EMBER_GEMV_ARGMAX && tid < 16 && row < seg.rows) {
			const unsigned long long key = argmax_key(yv[tid], row);
			best_key = key > best_key ? key : best_key;
		}
		__syncthreads(); /* yv is rewritten by the next tile */
	}
	if (EPI == EMBER_GEMV_ARGMAX)
		argmax_publish(args, best_key);
}

/* ---- launcher ---- */

template <int IN, int EPI>
static int gemv_launch(const ember_gemv_args *a, int grid, int k_pad, size_t smem, cudaStream_t stream)
{
	static size_t smem_set = 48 * 1024;
	if (smem > smem_set) {
		CUDA_CHECK(cudaFuncSetAttribute(gemv_kernel<IN, EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		smem_set = smem;
	}
	cudaLaunchAttribute attr;
	const cudaLaunchConfig_t cfg = ember_launch_config(&attr, dim3(grid), dim3(GEMV_THREADS), smem, stream, a->pdl);
	CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemv_kernel<IN, EPI>, *a, k_pad, a->pdl));
	CUDA_CHECK_LAUNCH("gemv_kernel");
	return 0;
}

template <int IN>
static int gemv_dispatch_epi(const ember_gemv_args *a, int grid, int k_pad, size_t smem, cudaStream_t stream)
{
	switch (a->epi) {
	case EMBER_GEMV_STORE: return gemv_launch<IN, EMBER_GEMV_STORE>(a, grid, k_pad, smem, stream);
	case EMBER_GEMV_RESID: return gemv_launch<IN, EMBER_GEMV_RESID>(a, grid, k_pad, smem, stream);
	case EMBER_GEMV_SWIGLU: return gemv_launch<IN, EMBER_GEMV_SWIGLU>(a, grid, k_pad, smem, stream);
	case EMBER_GEMV_ARGMAX: return gemv_launch<IN, EMBER_GEMV_ARGMAX>(a, grid, k_pad, smem, stream);
	}
	return ember_error_set(EMBER_ERROR, "gemv: unknown epilogue %d", a->epi);
}

extern "C" int ember_gemv(const struct ember_gemv_args *a_in, cudaStream_t stream)
{
	EMBER_REQUIRE(a_in);
	struct ember_gemv_args args = *a_in, *a = &args;
	EMBER_REQUIRE(a && a->n_seg >= 1 && a->n_seg <= 3 && a->k > 0 && a->x);
	EMBER_REQUIRE(a->epi != EMBER_GEMV_SWIGLU || (a->n_seg == 2 && a->seg[0].rows == a->seg[1].rows && a->out_h));
	EMBER_REQUIRE(a->epi != EMBER_GEMV_ARGMAX || (a->n_seg == 1 && a->state));
	EMBER_REQUIRE(a->in_mode != EMBER_GEMV_IN_RMS || a->norm_w);
	int grid = 0;
	for (int i = 0; i < a->n_seg; i++) {
		const struct ember_gemv_seg *s = &a->seg[i];
		EMBER_REQUIRE(s->w && s->rows > 0);
		EMBER_REQUIRE(a->epi == EMBER_GEMV_SWIGLU || s->out);
		if (s->tiled)
			EMBER_REQUIRE(ember_tile_type_supported(s->type));
		else
			EMBER_REQUIRE(ember_raw_row_bytes(s->type, a->k) > 0 && a->k % (s->type == EMBER_T_Q8_0 ? 32 : s->type == EMBER_T_Q4_K || s->type == EMBER_T_Q6_K ? 256 : 1) == 0);
		grid += (s->rows + 15) / 16;
	}
	if (a->epi == EMBER_GEMV_SWIGLU)
		grid = (a->seg[0].rows + 15) / 16;
	a->n_tiles = grid;
	size_t ring_tile = 0;
	for (int i = 0; i < a->n_seg; i++)
		if (a->seg[i].tiled && ember_tile_bytes(a->seg[i].type) > ring_tile)
			ring_tile = ember_tile_bytes(a->seg[i].type);
	a->ring_bytes = (int)(GEMV_ROUNDS * 4 * ring_tile);
	/* Enough CTAs to fill the GPU several times over; beyond that CTAs loop over tiles. */
	static int n_sm = 0;
	if (!n_sm) {
		int dev = 0, count = 0;
		CUDA_CHECK(cudaGetDevice(&dev));
		CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev));
		n_sm = count > 0 ? count : 80;
	}
	const int grid_cap = 16 * n_sm;
	if (grid > grid_cap)
		grid = grid_cap;
	const int k_pad = (a->k + EMBER_TILE_K - 1) / EMBER_TILE_K * EMBER_TILE_K;
	if (a->streaming) {
		int ran = 0;
		const int rc = ember_gemv_stream(&ran, a, k_pad, n_sm, stream);
		if (rc || ran)
			return rc;
	}
	const size_t smem = (size_t)a->ring_bytes + (size_t)k_pad * 2 + (size_t)(k_pad / 16) * 4 + (32 + 16 * GEMV_WARPS + 32) * 4;
	if (a->in_mode == EMBER_GEMV_IN_F16)
		return gemv_dispatch_epi<EMBER_GEMV_IN_F16>(a, grid, k_pad, smem, stream);
	return gemv_dispatch_epi<EMBER_GEMV_IN_RMS>(a, grid, k_pad, smem, stream);
}

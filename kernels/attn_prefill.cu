/*
 * attn_prefill.cu - causal flash attention for prefill chunks (see attn_prefill.cuh).
 *
 * CTA = 64 query rows of one query head, 4 warps of 16 rows. Key/value tiles of 64 positions are
 * copied into shared memory with cp.async (double-buffered, 16-byte chunks XOR-swizzled by row so
 * ldmatrix reads are bank-conflict free). S = Q K^T and O += P V run on mma.sync m16n8k16 with fp32
 * accumulation; the S accumulators are re-packed in registers as the A operand of P V (the C and A
 * fragment layouts line up), so P never touches shared memory. Online softmax in the exp2 domain.
 * Query blocks are scheduled longest-first (reverse order) to balance the causal triangle.
 */
#include "attn_prefill.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "attn_tile.cuh"
#include "common.cuh"

#define FA_BQ 64
#define FA_BK 64
#define FA_WARPS 4
#define FA_THREADS (FA_WARPS * 32)

template <int D>
static __global__ void __launch_bounds__(FA_THREADS) fa_prefill_kernel(const ember_fa_args a)
{
	extern __shared__ __align__(128) unsigned char fa_smem[];
	const uint32_t q_tile = ember_smem_u32(fa_smem);
	const uint32_t k_tile0 = q_tile + FA_BQ * D * 2;
	const uint32_t v_tile0 = k_tile0 + 2 * FA_BK * D * 2;

	const int qb = gridDim.x - 1 - blockIdx.x; /* longest first */
	const int hq = blockIdx.y, hk = hq / (a.n_head / a.n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, g = lane & 3;
	const int q0 = qb * FA_BQ;
	const int q_last = min(a.n_tokens, q0 + FA_BQ) - 1;           /* last valid query row */
	const int n_keys = a.pos0 + q_last + 1;                          /* keys this block needs */
	const int n_kt = (n_keys + FA_BK - 1) / FA_BK;
	const __half *qg = static_cast<const __half *>(a.q) + (size_t)hq * D;
	const __half *kg = static_cast<const __half *>(a.k_cache) + (size_t)hk * a.n_ctx * D;
	const __half *vg = static_cast<const __half *>(a.v_cache) + (size_t)hk * a.n_ctx * D;
	const float scale = EMBER_ATT_LOG2E / sqrtf((float)D);

	ember_load_tile64<D, FA_THREADS>(q_tile, qg, (size_t)a.n_head * D, q0, a.n_tokens);
	float o[D / 8][4], m0, m1, l0, l1;
	const int row_a = q0 + warp * 16 + gid, row_b = row_a + 8; /* this thread's two query rows */
	ember_fa_rows<D, FA_THREADS>(q_tile, k_tile0, v_tile0, kg, vg, 0, n_kt, n_keys, a.pos0 + row_a, a.pos0 + row_b,
	                             scale, true, m0, m1, l0, l1, o);
	const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
	__half *out = static_cast<__half *>(a.out);
#pragma unroll
	for (int i = 0; i < D / 8; i++) {
		const int d = 8 * i + 2 * g;
		if (row_a < a.n_tokens)
			*reinterpret_cast<uint32_t *>(out + ((size_t)row_a * a.n_head + hq) * D + d) =
				ember_pack_half2(o[i][0] * inv0, o[i][1] * inv0);
		if (row_b < a.n_tokens)
			*reinterpret_cast<uint32_t *>(out + ((size_t)row_b * a.n_head + hq) * D + d) =
				ember_pack_half2(o[i][2] * inv1, o[i][3] * inv1);
	}
}

template <int D>
static int fa_launch(const ember_fa_args *a, cudaStream_t stream)
{
	const size_t smem = (size_t)(FA_BQ + 4 * FA_BK) * D * 2;
	CUDA_CHECK(cudaFuncSetAttribute(fa_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	const dim3 grid((a->n_tokens + FA_BQ - 1) / FA_BQ, a->n_head);
	fa_prefill_kernel<D><<<grid, FA_THREADS, smem, stream>>>(*a);
	CUDA_CHECK_LAUNCH("fa_prefill_kernel");
	return 0;
}

extern "C" int ember_attn_prefill(const struct ember_fa_args *a, cudaStream_t stream)
{
	EMBER_REQUIRE(a && a->q && a->k_cache && a->v_cache && a->out && a->n_tokens > 0 && a->pos0 >= 0);
	EMBER_REQUIRE(a->n_kv > 0 && a->n_head % a->n_kv == 0 && a->pos0 + a->n_tokens <= a->n_ctx);
	switch (a->head_dim) {
	case 64: return fa_launch<64>(a, stream);
	case 128: return fa_launch<128>(a, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "flash attention: head_dim %d not supported (64, 128)", a->head_dim);
}

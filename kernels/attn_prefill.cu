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

#include "common.cuh"

#define FA_BQ 64
#define FA_BK 64
#define FA_WARPS 4
#define FA_THREADS (FA_WARPS * 32)
#define FA_LOG2E 1.4426950408889634f

static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N> static __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

/* Byte offset of 16-byte chunk c of row r in a [rows][D] fp16 tile, XOR-swizzled. */
template <int D> static __device__ __forceinline__ uint32_t swz(int r, int c)
{
	return (uint32_t)(r * D * 2 + ((c ^ (r & 7)) << 4));
}

/* Copies rows [row0, row0+64) of a [.][row_stride] fp16 matrix (valid below row_end) into a tile. */
template <int D>
static __device__ __forceinline__ void load_tile(uint32_t tile, const __half *src, size_t row_stride, int row0,
                                                 int row_end)
{
	constexpr int chunks = D / 8;
#pragma unroll
	for (int i = threadIdx.x; i < 64 * chunks; i += FA_THREADS) {
		const int r = i / chunks, c = i % chunks;
		const int row = row0 + r;
		const bool ok = row < row_end;
		const __half *g = src + (size_t)(ok ? row : 0) * row_stride + c * 8;
		cp_async16(tile + swz<D>(r, c), g, ok ? 16 : 0);
	}
}

template <int D>
static __global__ void __launch_bounds__(FA_THREADS) fa_prefill_kernel(const ember_fa_args a)
{
	extern __shared__ __align__(128) unsigned char fa_smem[];
	const uint32_t q_tile = smem_u32(fa_smem);
	const uint32_t k_tile0 = q_tile + FA_BQ * D * 2;
	const uint32_t v_tile0 = k_tile0 + 2 * FA_BK * D * 2;
	constexpr uint32_t tile_bytes = FA_BK * D * 2;

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
	const float scale = FA_LOG2E / sqrtf((float)D);

	load_tile<D>(q_tile, qg, (size_t)a.n_head * D, q0, a.n_tokens);
	load_tile<D>(k_tile0, kg, D, 0, n_keys);
	load_tile<D>(v_tile0, vg, D, 0, n_keys);
	cp_async_commit();

	uint32_t qf[D / 16][4];
	float o[D / 8][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
		o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
	const int row_a = q0 + warp * 16 + gid, row_b = row_a + 8; /* this thread's two query rows */
	const int pos_a = a.pos0 + row_a, pos_b = a.pos0 + row_b;

	for (int kt = 0; kt < n_kt; kt++) {
		const int buf = kt & 1;
		if (kt + 1 < n_kt) {
			load_tile<D>(k_tile0 + (buf ^ 1) * tile_bytes, kg, D, (kt + 1) * FA_BK, n_keys);
			load_tile<D>(v_tile0 + (buf ^ 1) * tile_bytes, vg, D, (kt + 1) * FA_BK, n_keys);
		}
		cp_async_commit();
		cp_async_wait<1>();
		__syncthreads();
		if (kt == 0) {
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++) {
				const int r = warp * 16 + (lane & 15), c = 2 * kk + (lane >> 4);
				ldmatrix_x4(qf[kk], q_tile + swz<D>(r, c));
			}
		}
		const uint32_t kt_s = k_tile0 + buf * tile_bytes, vt_s = v_tile0 + buf * tile_bytes;
		const int key0 = kt * FA_BK;
		/* The whole tile lies above both rows' diagonals for warps whose rows all start later. */
		float s[8][4];
#pragma unroll
		for (int j = 0; j < 8; j++)
			s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
			for (int jp = 0; jp < 4; jp++) {
				uint32_t b[4];
				const int mi = lane >> 3;
				const int r = jp * 16 + (mi >> 1) * 8 + (lane & 7), c = 2 * kk + (mi & 1);
				ldmatrix_x4(b, kt_s + swz<D>(r, c));
				ember_mma_16816(s[2 * jp], qf[kk], b[0], b[1], s[2 * jp]);
				ember_mma_16816(s[2 * jp + 1], qf[kk], b[2], b[3], s[2 * jp + 1]);
			}
		}
		/* Scale, causal mask, online softmax (rows gid and gid+8 of this warp). */
		float mx0 = m0, mx1 = m1;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const int key = key0 + 8 * j + 2 * g;
			s[j][0] = key <= pos_a ? s[j][0] * scale : -INFINITY;
			s[j][1] = key + 1 <= pos_a ? s[j][1] * scale : -INFINITY;
			s[j][2] = key <= pos_b ? s[j][2] * scale : -INFINITY;
			s[j][3] = key + 1 <= pos_b ? s[j][3] * scale : -INFINITY;
			mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
			mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
		}
		mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
		mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
		mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
		mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
		/* Rows with no visible key yet keep m = -inf; use 0 as the reference to avoid inf - inf. */
		const float ref0 = mx0 == -INFINITY ? 0.0f : mx0, ref1 = mx1 == -INFINITY ? 0.0f : mx1;
		const float alpha0 = exp2f(m0 - ref0), alpha1 = exp2f(m1 - ref1);
		m0 = mx0;
		m1 = mx1;
		float rs0 = 0.0f, rs1 = 0.0f;
		uint32_t pf[4][4];
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const float p0 = exp2f(s[j][0] - ref0), p1 = exp2f(s[j][1] - ref0);
			const float p2 = exp2f(s[j][2] - ref1), p3 = exp2f(s[j][3] - ref1);
			rs0 += p0 + p1;
			rs1 += p2 + p3;
			pf[j >> 1][(j & 1) * 2 + 0] = ember_pack_half2(p0, p1);
			pf[j >> 1][(j & 1) * 2 + 1] = ember_pack_half2(p2, p3);
		}
		l0 = l0 * alpha0 + rs0;
		l1 = l1 * alpha1 + rs1;
#pragma unroll
		for (int i = 0; i < D / 8; i++) {
			o[i][0] *= alpha0;
			o[i][1] *= alpha0;
			o[i][2] *= alpha1;
			o[i][3] *= alpha1;
		}
		/* O += P V: k = 64 keys in 4 steps, n = D dims in D/8 tiles. */
#pragma unroll
		for (int kk = 0; kk < 4; kk++) {
#pragma unroll
			for (int dp = 0; dp < D / 16; dp++) {
				uint32_t b[4];
				const int mi = lane >> 3;
				const int r = kk * 16 + (mi & 1) * 8 + (lane & 7), c = 2 * dp + (mi >> 1);
				ldmatrix_x4_trans(b, vt_s + swz<D>(r, c));
				ember_mma_16816(o[2 * dp], pf[kk], b[0], b[1], o[2 * dp]);
				ember_mma_16816(o[2 * dp + 1], pf[kk], b[2], b[3], o[2 * dp + 1]);
			}
		}
		__syncthreads();
	}
	cp_async_wait<0>();

	l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
	l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
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

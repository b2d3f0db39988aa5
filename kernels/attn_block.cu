/*
 * attn_block.cu - attention of a DFlash draft block (see attn_block.cuh).
 *
 * CTA = (key split, KV head, row block) with 4 warps of 16 query rows. The rows of a KV head are
 * its GQA group's query heads times the block's tokens, packed (row p: head hk * G + p / n_tok,
 * token p % n_tok), so each K/V tile is read once for all of them; the 16 block tokens of an 8B
 * shape (G = 4) fill one 64-row block exactly. The keys 0..pos+n_tok-1 are cut into 64-key tiles,
 * and each split takes a run of consecutive tiles: the grid is fixed and the position comes from
 * device memory, so splits with no tiles at a short context exit at once. A split runs the
 * prefill's FlashAttention-2 tile (attn_tile.cuh: cp.async double buffering, mma.sync, online
 * softmax) with one limit for all rows and leaves its unnormalized O and (m, l) per row; the
 * merge kernel combines the splits per (token, head) and writes fp16. The draft needs no
 * bit-exactness, only agreement with the CPU reference within fp16 rounding.
 */
#include "attn_block.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "attn_tile.cuh"
#include "common.cuh"

#define BA_ROWS 64
#define BA_KEYS 64
#define BA_THREADS 128

template <int D>
static __global__ void __launch_bounds__(BA_THREADS) block_attn_kernel(const ember_block_attn_args a)
{
	extern __shared__ __align__(128) unsigned char ba_smem[];
	const uint32_t q_tile = ember_smem_u32(ba_smem);
	const uint32_t k_tile0 = q_tile + BA_ROWS * D * 2;
	const uint32_t v_tile0 = k_tile0 + 2 * BA_KEYS * D * 2;
	constexpr int chunks = D / 8;

	const int split = blockIdx.x, hk = blockIdx.y, rb = blockIdx.z;
	const int G = a.n_head / a.n_kv, rows = G * a.n_tok;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, g = lane & 3;
	const int n_keys = *a.pos + a.n_tok;
	const int n_kt = (n_keys + BA_KEYS - 1) / BA_KEYS, per = (n_kt + a.n_split - 1) / a.n_split;
	const int kt0 = split * per, kt1 = min(n_kt, kt0 + per);
	const size_t part = ((size_t)hk * gridDim.z + rb) * a.n_split + split; /* this CTA's 64 rows of partials */
	float *po = a.part_o + part * BA_ROWS * D, *pml = a.part_ml + part * BA_ROWS * 2;
	if (kt0 >= kt1) { /* no keys for this split at this position: the merge skips l == 0 */
		for (int r = threadIdx.x; r < BA_ROWS; r += BA_THREADS) {
			pml[2 * r] = -INFINITY;
			pml[2 * r + 1] = 0.0f;
		}
		return;
	}
	const __half *qg = static_cast<const __half *>(a.q);
	const __half *kg = static_cast<const __half *>(a.k_cache) + (size_t)hk * a.n_ctx * D;
	const __half *vg = static_cast<const __half *>(a.v_cache) + (size_t)hk * a.n_ctx * D;
	const float scale = EMBER_ATT_LOG2E / sqrtf((float)D);

	for (int i = threadIdx.x; i < BA_ROWS * chunks; i += BA_THREADS) {
		const int r = i / chunks, c = i % chunks, p = rb * BA_ROWS + r;
		const bool ok = p < rows;
		const int t = ok ? p % a.n_tok : 0, hq = ok ? hk * G + p / a.n_tok : 0;
		ember_cp_async16(q_tile + ember_swz<D>(r, c), qg + ((size_t)t * a.n_head + hq) * D + c * 8, ok ? 16 : 0);
	}
	float o[D / 8][4], m0, m1, l0, l1;
	const bool active = rb * BA_ROWS + warp * 16 < rows; /* a warp of padding rows only copies */
	ember_fa_rows<D, BA_THREADS>(q_tile, k_tile0, v_tile0, kg, vg, kt0, kt1, n_keys, n_keys - 1, n_keys - 1, scale,
	                             active, m0, m1, l0, l1, o);
	const int row_a = warp * 16 + gid, row_b = row_a + 8;
#pragma unroll
	for (int i = 0; i < D / 8; i++) {
		const int d = 8 * i + 2 * g;
		*reinterpret_cast<float2 *>(po + (size_t)row_a * D + d) = make_float2(o[i][0], o[i][1]);
		*reinterpret_cast<float2 *>(po + (size_t)row_b * D + d) = make_float2(o[i][2], o[i][3]);
	}
	if (g == 0) {
		pml[2 * row_a] = m0;
		pml[2 * row_a + 1] = l0;
		pml[2 * row_b] = m1;
		pml[2 * row_b + 1] = l1;
	}
}

/* CTA per (token, head), thread per dimension: out = sum_s w_s O_s / sum_s w_s l_s, w_s = 2^(m_s - M). */
template <int D>
static __global__ void __launch_bounds__(D) block_merge_kernel(const ember_block_attn_args a, int n_rb)
{
	const int t = blockIdx.x / a.n_head, h = blockIdx.x % a.n_head, d = threadIdx.x;
	const int G = a.n_head / a.n_kv, hk = h / G, p = (h % G) * a.n_tok + t, rb = p / BA_ROWS, r = p % BA_ROWS;
	const size_t base = ((size_t)hk * n_rb + rb) * a.n_split;
	float M = -INFINITY;
	for (int s = 0; s < a.n_split; s++) {
		const float *ml = a.part_ml + ((base + s) * BA_ROWS + r) * 2;
		if (ml[1] > 0.0f)
			M = fmaxf(M, ml[0]);
	}
	float L = 0.0f, acc = 0.0f;
	for (int s = 0; s < a.n_split; s++) {
		const float *ml = a.part_ml + ((base + s) * BA_ROWS + r) * 2;
		if (ml[1] > 0.0f) {
			const float w = exp2f(ml[0] - M);
			L += w * ml[1];
			acc += w * a.part_o[((base + s) * BA_ROWS + r) * D + d];
		}
	}
	static_cast<__half *>(a.out)[((size_t)t * a.n_head + h) * D + d] = __float2half_rn(acc / L);
}

static int block_rows(int n_tok, int n_head, int n_kv)
{
	return ((n_head / n_kv) * n_tok + BA_ROWS - 1) / BA_ROWS;
}

extern "C" size_t ember_attn_block_scratch(int n_tok, int n_head, int n_kv, int head_dim, int n_split, int ml)
{
	if (n_tok <= 0 || n_kv <= 0 || n_head % n_kv || n_split <= 0)
		return 0;
	return (size_t)n_kv * block_rows(n_tok, n_head, n_kv) * n_split * BA_ROWS * (ml ? 2 : head_dim);
}

template <int D>
static int block_launch(const ember_block_attn_args *a, cudaStream_t stream)
{
	const size_t smem = (size_t)(BA_ROWS + 4 * BA_KEYS) * D * 2;
	const int n_rb = block_rows(a->n_tok, a->n_head, a->n_kv);
	CUDA_CHECK(cudaFuncSetAttribute(block_attn_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	block_attn_kernel<D><<<dim3(a->n_split, a->n_kv, n_rb), BA_THREADS, smem, stream>>>(*a);
	CUDA_CHECK_LAUNCH("block_attn_kernel");
	block_merge_kernel<D><<<a->n_tok * a->n_head, D, 0, stream>>>(*a, n_rb);
	CUDA_CHECK_LAUNCH("block_merge_kernel");
	return 0;
}

extern "C" int ember_attn_block(const struct ember_block_attn_args *a, cudaStream_t stream)
{
	EMBER_REQUIRE(a && a->q && a->k_cache && a->v_cache && a->out && a->pos && a->part_o && a->part_ml);
	EMBER_REQUIRE(a->n_tok > 0 && a->n_kv > 0 && a->n_head % a->n_kv == 0 && a->n_split > 0 && a->n_tok <= a->n_ctx);
	switch (a->head_dim) {
	case 64: return block_launch<64>(a, stream);
	case 128: return block_launch<128>(a, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "block attention: head_dim %d not supported (64, 128)", a->head_dim);
}

/*
 * attn_window.cu - attention of the verify window (see attn_window.cuh): every window token runs the
 * lean decode body of attn_lean.cuh at its own position, with the decode step's split layout, so a
 * verified token gets the very bits a decode step at that position would.
 */
#include "attn_window.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "attn_lean.cuh"
#include "common.cuh"
#include "rope.cuh"

/* Verify window: token z of the window at position state->pos + z, its projections, output and
 * merge scratch offset by z (ember_attn_window). Same split layout as a decode step there. With
 * a.full every token sees the whole window (keys 0..state->pos + n_tok - 1), not the causal prefix.
 * grid (n_tok, n_split, n_kv): the token is the fastest index, so the CTAs of one (head, split)
 * for all the window's tokens run side by side and read its K/V slice from DRAM once; the other
 * n_tok - 1 reads hit L2 (a wave holds a few MB of slices). */
template <int D, int G>
static __global__ void __launch_bounds__(ATTN_THREADS, 2) attn_window_kernel(const ember_attn_args a_in, int ld_qkv)
{
	const int z = blockIdx.x, G_ = G;
	ember_attn_args a = a_in;
	a.q = a_in.q + (size_t)z * ld_qkv;
	a.out = static_cast<__half *>(a_in.out) + (size_t)z * a_in.n_head * D;
	a.part_o = a_in.part_o + (size_t)z * a_in.n_kv * a_in.n_split * G_ * D;
	a.part_ml = a_in.part_ml + (size_t)z * a_in.n_kv * a_in.n_split * G_ * 2;
	a.counters = a_in.counters + (size_t)z * a_in.n_kv;
	const int pos = a_in.state->pos + z;
	attn_lean_body<D, G, false>(a, blockIdx.z, blockIdx.y, pos, a_in.full ? a_in.state->pos + (int)gridDim.x : pos + 1);
}

/* Verify window, before attn_window_kernel: appends the K (q/k-normed, RoPE'd) and V rows of every
 * window token to the cache, as the lean decode kernel's appending warps do. grid (n_kv, n_tok),
 * 64 threads: warp 0 K, warp 1 V. */
template <int D>
static __global__ void __launch_bounds__(64) attn_window_append_kernel(const ember_attn_args a, int ld_qkv)
{
	const int h = blockIdx.x, z = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int pos = a.state->pos + z;
	const float *cs = a.rope_cos + (size_t)pos * (D / 2), *sn = a.rope_sin + (size_t)pos * (D / 2);
	const float *src = (warp == 0 ? a.k : a.v) + (size_t)z * ld_qkv + (size_t)h * D;
	float kv[D / 32];
#pragma unroll
	for (int c = 0; c < D / 32; c++)
		kv[c] = src[lane + 32 * c];
	if (warp == 0)
		ember_norm_rope_head<D>(kv, a.k_norm, a.eps, cs, sn, lane);
	__half *dst = static_cast<__half *>(warp == 0 ? a.k_cache : a.v_cache) + ((size_t)h * a.n_ctx + pos) * D;
#pragma unroll
	for (int c = 0; c < D / 32; c++)
		dst[lane + 32 * c] = __float2half_rn(kv[c]);
}

template <int D, int G>
static int attn_window_launch(const ember_attn_args *a, int n_tok, int ld_qkv, cudaStream_t stream)
{
	attn_window_append_kernel<D><<<dim3(a->n_kv, n_tok), 64, 0, stream>>>(*a, ld_qkv);
	CUDA_CHECK_LAUNCH("attn_window_append_kernel");
	attn_window_kernel<D, G><<<dim3(n_tok, a->n_split, a->n_kv), ATTN_THREADS, 0, stream>>>(*a, ld_qkv);
	CUDA_CHECK_LAUNCH("attn_window_kernel");
	return 0;
}

template <int D>
static int attn_window_group(const ember_attn_args *a, int n_tok, int ld_qkv, int group, cudaStream_t stream)
{
	switch (group) {
	case 1: return attn_window_launch<D, 1>(a, n_tok, ld_qkv, stream);
	case 2: return attn_window_launch<D, 2>(a, n_tok, ld_qkv, stream);
	case 4: return attn_window_launch<D, 4>(a, n_tok, ld_qkv, stream);
	case 8: return attn_window_launch<D, 8>(a, n_tok, ld_qkv, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "attention: GQA group %d not supported (1, 2, 4, 8)", group);
}

extern "C" int ember_attn_window(const struct ember_attn_args *a, int n_tok, int ld_qkv, cudaStream_t stream)
{
	EMBER_REQUIRE(a && a->k_cache && a->v_cache && a->out && a->n_kv > 0 && a->n_head % a->n_kv == 0 && n_tok >= 1);
	EMBER_REQUIRE(a->q && a->k && a->v && a->q_norm && a->k_norm && a->rope_cos && a->rope_sin && a->state && a->lean);
	EMBER_REQUIRE(a->n_split >= 1 && a->n_split <= ATTN_MAX_SPLIT && a->part_o && a->part_ml && a->counters);
	const int group = a->n_head / a->n_kv;
	switch (a->head_dim) {
	case 64: return attn_window_group<64>(a, n_tok, ld_qkv, group, stream);
	case 128: return attn_window_group<128>(a, n_tok, ld_qkv, group, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "attention: head_dim %d not supported (64, 128)", a->head_dim);
}

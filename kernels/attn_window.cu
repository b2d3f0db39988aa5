/*
 * attn_window.cu - attention of the verify window (see attn_window.cuh): every window token runs the
 * lean decode arithmetic of attn_lean.cuh at its own position, with the decode step's split layout,
 * so a verified token gets the very bits a decode step at that position would. Two kernels do it:
 * one CTA per token (the lean body as is), or CTAs of WIN_NT tokens that stage each round of K/V
 * keys in shared memory once for all their tokens (EMBER_WIN_ATTN=shared).
 */
#include "attn_window.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "attn_lean.cuh"
#include "attn_tile.cuh"
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

/* ---- shared K/V window kernel (EMBER_WIN_ATTN=shared) ----
 * A CTA holds WIN_NT consecutive window tokens of one (KV head, split), ATTN_WARPS warps each: warp w
 * of token t does what warp w of the lean body does for that token (keys start + 32 w + 128 r of its
 * split, in that order), with the same score, softmax, P.V and merge functions, so every token's
 * result has the lean body's bits. What changes is where K and V come from: the CTA copies each
 * round of 128 keys (K and V, cp.async, double-buffered, XOR-swizzled rows) into shared memory once
 * and all its tokens read them there, so the cache is read once per WIN_NT tokens instead of once
 * per token. Tokens of one CTA can have different split layouts (their key counts differ by up to
 * WIN_NT - 1, so their chunk sizes by at most one 128-key step); each distinct chunk size is one
 * pass over its keys. */
#define WIN_NT 4
#define WIN_THREADS (WIN_NT * ATTN_THREADS)
#define WIN_ROUND ATTN_THREADS /* keys per round: the lean body's stride */

/* Split layout of a token with n_keys keys, as attn_lean_body derives it. */
struct win_geo {
	int chunk, n_active, end; /* end: of split s's keys */
	bool on;                  /* the token exists and split s holds keys of it */
};

static __device__ __forceinline__ win_geo win_geometry(int n_keys, int n_split, int s, bool exists)
{
	win_geo g;
	g.chunk = (n_keys + n_split - 1) / n_split;
	g.chunk = (g.chunk + ATTN_THREADS - 1) / ATTN_THREADS * ATTN_THREADS;
	g.n_active = min(n_split, (n_keys + g.chunk - 1) / g.chunk);
	g.on = exists && s < g.n_active;
	g.end = min(n_keys, s * g.chunk + g.chunk);
	return g;
}

template <int D, int G> struct win_smem {
	static constexpr size_t q = (size_t)WIN_NT * G * D * 4;                /* q_s [WIN_NT][G][D] */
	static constexpr size_t stage = (size_t)2 * WIN_ROUND * D * 2;         /* K then V rows of a round */
	static constexpr size_t o = (size_t)WIN_NT * ATTN_WARPS * G * D * 4;   /* w_o [WIN_NT][ATTN_WARPS][G][D] */
	static constexpr size_t ml = (size_t)WIN_NT * ATTN_WARPS * G * 4;      /* w_m and w_l, each */
	static constexpr size_t sml = (size_t)WIN_NT * ATTN_MAX_SPLIT * G * 2 * 4; /* w_ml [WIN_NT][MAX_SPLIT][G][2] */
	static constexpr size_t sf = (size_t)WIN_NT * ATTN_MAX_SPLIT * G * 4;   /* w_f [WIN_NT][MAX_SPLIT][G] */
	static constexpr size_t merge = o + 2 * ml + sml + sf;
	static constexpr size_t loop = 2 * stage;
	static constexpr size_t total = q + (loop > merge ? loop : merge);
};

template <int D, int G>
static __global__ void __launch_bounds__(WIN_THREADS, 1) attn_window_shared_kernel(const ember_attn_args a, int ld_qkv, int n_tok)
{
	using SM = win_smem<D, G>;
	extern __shared__ __align__(128) unsigned char win_sm[];
	__shared__ int is_last[WIN_NT];
	float(*q_s)[G][D] = reinterpret_cast<float(*)[G][D]>(win_sm);
	unsigned char *un = win_sm + SM::q; /* the K/V stages, then the merge scratch */

	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
	const int t = warp / ATTN_WARPS, w = warp % ATTN_WARPS, tl = tid % ATTN_THREADS;
	const int h = blockIdx.z, s = blockIdx.y, z0 = blockIdx.x * WIN_NT, z = z0 + t;
	const int n_split = a.n_split, pos0 = a.state->pos;

	/* Every token's layout (every thread derives all of them, so passes are CTA-uniform). */
	int first = -1, last = -1, any_multi = 0;
	for (int u = 0; u < WIN_NT; u++) {
		const win_geo gu = win_geometry(a.full ? pos0 + n_tok : pos0 + z0 + u + 1, n_split, s, z0 + u < n_tok);
		if (gu.on) {
			first = first < 0 ? u : first;
			last = u;
			any_multi |= gu.n_active > 1;
		}
	}
	if (first < 0)
		return;
	const int n_keys = a.full ? pos0 + n_tok : pos0 + z + 1;
	const win_geo me = win_geometry(n_keys, n_split, s, z < n_tok);
	const int c_first = win_geometry(a.full ? pos0 + n_tok : pos0 + z0 + first + 1, n_split, s, true).chunk;
	const int c_last = win_geometry(a.full ? pos0 + n_tok : pos0 + z0 + last + 1, n_split, s, true).chunk;

	/* Stage token t's G query heads, as the lean body does (warp w: heads w, w + ATTN_WARPS, ...). */
	constexpr int QH = (G + ATTN_WARPS - 1) / ATTN_WARPS;
	if (me.on) {
		const int pos = pos0 + z;
		const float *q = a.q + (size_t)z * ld_qkv;
		float qv[QH][D / 32];
#pragma unroll
		for (int j = 0; j < QH; j++)
			if (w + j * ATTN_WARPS < G) {
#pragma unroll
				for (int c = 0; c < D / 32; c++)
					qv[j][c] = q[(size_t)(h * G + w + j * ATTN_WARPS) * D + lane + 32 * c];
			}
		const float qscale = ATTN_LOG2E / sqrtf((float)D);
		const float *cs = a.rope_cos + (size_t)pos * (D / 2), *sn = a.rope_sin + (size_t)pos * (D / 2);
#pragma unroll
		for (int j = 0; j < QH; j++) {
			const int g = w + j * ATTN_WARPS;
			if (g < G) {
				ember_norm_rope_head<D>(qv[j], a.q_norm, a.eps, cs, sn, lane);
#pragma unroll
				for (int c = 0; c < D / 32; c++)
					q_s[t][g][lane + 32 * c] = qv[j][c] * qscale;
			}
		}
	}

	float m[G], l[G], o[G][D / 32];
	attn_state_init<D, G>(m, l, o);
	const __half *kc = static_cast<const __half *>(a.k_cache) + (size_t)h * a.n_ctx * D;
	const __half *vc = static_cast<const __half *>(a.v_cache) + (size_t)h * a.n_ctx * D;
	const uint32_t st0 = ember_smem_u32(un);

	/* One pass per distinct chunk size: the tokens with that chunk share split s's start. */
	for (int pass = 0; pass < (c_first == c_last ? 1 : 2); pass++) {
		const int chunk = pass == 0 ? c_first : c_last;
		const int start = s * chunk;
		/* the end of the pass's keys: the furthest end of its tokens */
		int pend = start;
		for (int u = first; u <= last; u++) {
			const win_geo gu = win_geometry(a.full ? pos0 + n_tok : pos0 + z0 + u + 1, n_split, s, z0 + u < n_tok);
			if (gu.on && gu.chunk == chunk)
				pend = max(pend, gu.end);
		}
		const bool mine = me.on && me.chunk == chunk;
		const int n_rounds = (pend - start + WIN_ROUND - 1) / WIN_ROUND;
		auto issue = [&](int r) {
			const uint32_t ks = st0 + (uint32_t)((r & 1) * SM::stage), vs = ks + WIN_ROUND * D * 2;
			const int row0 = start + r * WIN_ROUND;
			ember_load_tile64<D, WIN_THREADS>(ks, kc, D, row0, pend);
			ember_load_tile64<D, WIN_THREADS>(ks + 64 * D * 2, kc, D, row0 + 64, pend);
			ember_load_tile64<D, WIN_THREADS>(vs, vc, D, row0, pend);
			ember_load_tile64<D, WIN_THREADS>(vs + 64 * D * 2, vc, D, row0 + 64, pend);
		};
		issue(0);
		ember_cp_async_commit();
		for (int r = 0; r < n_rounds; r++) {
			if (r + 1 < n_rounds)
				issue(r + 1);
			ember_cp_async_commit(); /* empty on the last round: wait<1> then covers round r */
			ember_cp_async_wait<1>();
			__syncthreads();
			const int base = start + r * WIN_ROUND + w * 32;
			if (mine && base < me.end) {
				const unsigned char *ks = un + (r & 1) * SM::stage, *vs = ks + WIN_ROUND * D * 2;
				const int krow = w * 32 + lane;
				float sc[G];
				lean_scores_f<D, G>(
					sc, [&](int c) { return *reinterpret_cast<const uint4 *>(ks + ember_swz<D>(krow, c)); }, q_s[t]);
				float pr[G];
				lean_softmax<D, G>(m, l, o, pr, sc, base + lane < me.end);
				const int vbyte = lane * (D / 32) * 2; /* the lane's dims of a V row */
				lean_pv_f<D, G>(
					o,
					[&](int u, uint32_t(&dst)[D / 64]) {
						const int vrow = w * 32 + u;
						const unsigned char *src = vs + ember_swz<D>(vrow, vbyte >> 4) + (vbyte & 15);
						const bool ok = base + u < me.end; /* zero past the keys' end, as lean_load_v */
						if constexpr (D == 128) {
							const uint2 x = *reinterpret_cast<const uint2 *>(src);
							dst[0] = ok ? x.x : 0u;
							dst[1] = ok ? x.y : 0u;
						} else {
							const uint32_t x = *reinterpret_cast<const uint32_t *>(src);
							dst[0] = ok ? x : 0u;
						}
					},
					pr, min(32, me.end - base));
			}
			__syncthreads();
		}
		ember_cp_async_wait<0>();
	}
	__syncthreads(); /* the stages become the merge scratch */

	float(*w_o)[G][D] = reinterpret_cast<float(*)[G][D]>(un + (size_t)t * ATTN_WARPS * G * D * 4);
	float(*w_m)[G] = reinterpret_cast<float(*)[G]>(un + SM::o + (size_t)t * ATTN_WARPS * G * 4);
	float(*w_l)[G] = reinterpret_cast<float(*)[G]>(un + SM::o + SM::ml + (size_t)t * ATTN_WARPS * G * 4);
	float(*w_ml)[G][2] = reinterpret_cast<float(*)[G][2]>(un + SM::o + 2 * SM::ml + (size_t)t * ATTN_MAX_SPLIT * G * 2 * 4);
	float(*w_f)[G] = reinterpret_cast<float(*)[G]>(un + SM::o + 2 * SM::ml + SM::sml + (size_t)t * ATTN_MAX_SPLIT * G * 4);
	if (me.on)
		attn_stash_warp<D, G>(w_m, w_l, w_o, w, lane, m, l, o);
	__syncthreads();

	/* Token t's outputs and scratch, as the per-token kernel offsets them. */
	ember_attn_args at = a;
	const int zc = min(z, n_tok - 1);
	at.out = static_cast<__half *>(a.out) + (size_t)zc * a.n_head * D;
	at.part_o = a.part_o + (size_t)zc * a.n_kv * n_split * G * D;
	at.part_ml = a.part_ml + (size_t)zc * a.n_kv * n_split * G * 2;
	at.counters = a.counters + (size_t)zc * a.n_kv;
	if (me.on)
		for (int i = tl; i < G * D; i += ATTN_THREADS) {
			float mx, L, O;
			attn_merge_warps<D, G>(*reinterpret_cast<const float(*)[ATTN_WARPS][G]>(w_m),
			                       *reinterpret_cast<const float(*)[ATTN_WARPS][G]>(w_l),
			                       *reinterpret_cast<const float(*)[ATTN_WARPS][G][D]>(w_o), i, &mx, &L, &O);
			if (me.n_active == 1)
				static_cast<__half *>(at.out)[(size_t)h * G * D + i] = __float2half_rn(O / L);
			else
				attn_store_partial<D, G>(at, h, s, n_split, i, mx, L, O);
		}
	if (!any_multi)
		return;

	/* Per token, a ticket over its active splits (attn_last_arrival, per 128-thread token group). */
	__threadfence();
	__syncthreads();
	if (tl == 0)
		is_last[t] = me.on && me.n_active > 1 && atomicAdd(&at.counters[h], 1u) == (uint32_t)(me.n_active - 1);
	__syncthreads();
	int merging = 0;
	for (int u = 0; u < WIN_NT; u++)
		merging |= is_last[u];
	if (!merging)
		return;
	__threadfence();
	attn_merge_splits<D, G>(at, h, me.n_active, n_split, tl, w_ml, w_f, is_last[t] != 0);
}

template <int D, int G>
static int attn_window_launch(const ember_attn_args *a, int n_tok, int ld_qkv, cudaStream_t stream)
{
	attn_window_append_kernel<D><<<dim3(a->n_kv, n_tok), 64, 0, stream>>>(*a, ld_qkv);
	CUDA_CHECK_LAUNCH("attn_window_append_kernel");
	if (a->win_shared) {
		const size_t smem = win_smem<D, G>::total;
		CUDA_CHECK(cudaFuncSetAttribute(attn_window_shared_kernel<D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		attn_window_shared_kernel<D, G>
			<<<dim3((n_tok + WIN_NT - 1) / WIN_NT, a->n_split, a->n_kv), WIN_THREADS, smem, stream>>>(*a, ld_qkv, n_tok);
		CUDA_CHECK_LAUNCH("attn_window_shared_kernel");
		return 0;
	}
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

/*
 * attn_decode.cu - split-KV decode attention (see attn_decode.cuh).
 *
 * CTA = (kv head h, split s[, token t]), 4 warps. Each warp takes 32 keys at a time, one key per
 * lane: the lane reads its key row with 16-byte loads and forms the dot products with all G query
 * heads of the group (q staged in shared memory, pre-scaled by log2(e)/sqrt(D)), so K is read once
 * per group instead of once per query head. Softmax is online (exp2, running max and sum per head);
 * for P.V each lane owns D/32 output dims and the probabilities are broadcast by shuffles, so V
 * rows are read coalesced. Warps merge in shared memory; with several splits the partial (m, l, o)
 * go to scratch and the last CTA of the head (atomic ticket) merges them, avoiding a second launch.
 * attn_decode_lean_kernel (args.lean, EMBER_ATTN_LEAN) is the same decode attention with a shorter
 * dependency chain; its comment says what differs.
 */
#include "attn_decode.cuh"

#include <cuda_fp16.h>
#include <math.h>

#include "common.cuh"
#include "gemv.cuh"
#include "rope.cuh"

#define ATTN_WARPS 4
#define ATTN_THREADS (ATTN_WARPS * 32)
#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_MAX_SPLIT 128

/* ---- what both decode kernels share ---- */

/* Row i (< G * D) of a CTA's result from its warps' (m, l, o) in shared memory: the running max
 * *mx, the softmax sum *L and the unnormalised output *O. A warp that saw no key has m = -inf,
 * l = 0, o = 0. */
template <int D, int G>
static __device__ __forceinline__ void attn_merge_warps(const float (&w_m)[ATTN_WARPS][G], const float (&w_l)[ATTN_WARPS][G],
                                                        const float (&w_o)[ATTN_WARPS][G][D], int i, float *mx,
                                                        float *L, float *O)
{
	const int g = i / D;
	float m = -INFINITY, l = 0.0f, o = 0.0f;
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; w++)
		m = fmaxf(m, w_m[w][g]);
#pragma unroll
	for (int w = 0; w < ATTN_WARPS; w++) {
		const float f = w_m[w][g] == -INFINITY ? 0.0f : exp2f(w_m[w][g] - m);
		l = fmaf(w_l[w][g], f, l);
		o = fmaf(w_o[w][g][i % D], f, o);
	}
	*mx = m;
	*L = l;
	*O = o;
}

/* Stores row i of split s of KV head h: its unnormalised output and, once per query head, its
 * (m, l), for the merging CTA. */
template <int D, int G>
static __device__ __forceinline__ void attn_store_partial(const ember_attn_args &a, int h, int s, int n_split, int i,
                                                          float mx, float L, float O)
{
	const int g = i / D;
	a.part_o[((size_t)h * n_split + s) * G * D + i] = O;
	if (i % D == 0) {
		a.part_ml[(((size_t)h * n_split + s) * G + g) * 2] = mx;
		a.part_ml[(((size_t)h * n_split + s) * G + g) * 2 + 1] = L;
	}
}

/* After this CTA's partials are stored: takes a ticket on head h's counter, of `arrivals` in all.
 * Returns 1 in the last CTA to arrive (every other partial is then visible), 0 elsewhere.
 * Contains __syncthreads; `is_last` is a shared int. */
static __device__ __forceinline__ int attn_last_arrival(const ember_attn_args &a, int h, int arrivals, int *is_last)
{
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		*is_last = atomicAdd(&a.counters[h], 1u) == (uint32_t)(arrivals - 1);
	__syncthreads();
	if (!*is_last)
		return 0;
	__threadfence();
	return 1;
}

template <int D, int G, bool DECODE>
static __global__ void __launch_bounds__(ATTN_THREADS) attn_decode_kernel(const ember_attn_args a)
{
	__shared__ __align__(16) float q_s[G][D];
	__shared__ float w_m[ATTN_WARPS][G], w_l[ATTN_WARPS][G];
	__shared__ float w_o[ATTN_WARPS][G][D];
	__shared__ int is_last;
	__shared__ float w_ml[ATTN_MAX_SPLIT][G][2];

	/* Let the next kernel (a GEMV launched as a programmatic dependent) start streaming its
	 * weights now; it waits for this grid to finish before reading anything it writes. */
	asm volatile("griddepcontrol.launch_dependents;\n" ::);
	const int h = blockIdx.x, s = blockIdx.y, t = blockIdx.z;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
	const int n_split = DECODE ? a.n_split : 1;
	const int pos = DECODE ? a.state->pos : a.pos0 + t;
	const int n_keys = pos + 1;
	int chunk = n_keys;
	if (DECODE) {
		chunk = (n_keys + n_split - 1) / n_split;
		chunk = (chunk + ATTN_THREADS - 1) / ATTN_THREADS * ATTN_THREADS;
	}
	const int start = s * chunk, end = min(n_keys, start + chunk);
	const __half *kc = static_cast<const __half *>(a.k_cache) + (size_t)h * a.n_ctx * D;
	const __half *vc = static_cast<const __half *>(a.v_cache) + (size_t)h * a.n_ctx * D;
	const float qscale = ATTN_LOG2E / sqrtf((float)D);

	if (start < end) {
		/* Stage the G query heads (and, in the split holding `pos`, append the new K/V). */
		if (DECODE) {
			const float *cs = a.rope_cos + (size_t)pos * (D / 2), *sn = a.rope_sin + (size_t)pos * (D / 2);
			for (int g = warp; g < G; g += ATTN_WARPS) {
				float v[D / 32];
				const float *src = a.q + (size_t)(h * G + g) * D;
#pragma unroll
				for (int c = 0; c < D / 32; c++)
					v[c] = src[lane + 32 * c];
				ember_norm_rope_head<D>(v, a.q_norm, a.eps, cs, sn, lane);
#pragma unroll
				for (int c = 0; c < D / 32; c++)
					q_s[g][lane + 32 * c] = v[c] * qscale;
			}
			if (pos >= start && pos < end) {
				__half *kdst = static_cast<__half *>(a.k_cache) + ((size_t)h * a.n_ctx + pos) * D;
				__half *vdst = static_cast<__half *>(a.v_cache) + ((size_t)h * a.n_ctx + pos) * D;
				if (warp == 0) {
					float v[D / 32];
#pragma unroll
					for (int c = 0; c < D / 32; c++)
						v[c] = a.k[(size_t)h * D + lane + 32 * c];
					ember_norm_rope_head<D>(v, a.k_norm, a.eps, cs, sn, lane);
#pragma unroll
					for (int c = 0; c < D / 32; c++)
						kdst[lane + 32 * c] = __float2half_rn(v[c]);
				} else if (warp == 1) {
#pragma unroll
					for (int c = 0; c < D / 32; c++)
						vdst[lane + 32 * c] = __float2half_rn(a.v[(size_t)h * D + lane + 32 * c]);
				}
			}
		} else {
			const __half *qp = static_cast<const __half *>(a.q_prepped) + ((size_t)t * a.n_head + h * G) * D;
			for (int i = tid; i < G * D; i += ATTN_THREADS)
				q_s[i / D][i % D] = __half2float(qp[i]) * qscale;
		}
		__syncthreads();

		float m[G], l[G], o[G][D / 32];
#pragma unroll
		for (int g = 0; g < G; g++) {
			m[g] = -INFINITY;
			l[g] = 0.0f;
#pragma unroll
			for (int i = 0; i < D / 32; i++)
				o[g][i] = 0.0f;
		}
		for (int base = start + warp * 32; base < end; base += ATTN_THREADS) {
			const int p = base + lane;
			const bool valid = p < end;
			float sc[G];
#pragma unroll
			for (int g = 0; g < G; g++)
				sc[g] = 0.0f;
			if (valid) {
				const uint4 *kr = reinterpret_cast<const uint4 *>(kc + (size_t)p * D);
#pragma unroll
				for (int c = 0; c < D / 8; c++) {
					const uint4 raw = __ldg(kr + c);
					const float2 k01 = ember_unpack_half2(raw.x), k23 = ember_unpack_half2(raw.y);
					const float2 k45 = ember_unpack_half2(raw.z), k67 = ember_unpack_half2(raw.w);
#pragma unroll
					for (int g = 0; g < G; g++) {
						const float4 qa = *reinterpret_cast<const float4 *>(&q_s[g][8 * c]);
						const float4 qb = *reinterpret_cast<const float4 *>(&q_s[g][8 * c + 4]);
						float acc = sc[g];
						acc = fmaf(qa.x, k01.x, acc);
						acc = fmaf(qa.y, k01.y, acc);
						acc = fmaf(qa.z, k23.x, acc);
						acc = fmaf(qa.w, k23.y, acc);
						acc = fmaf(qb.x, k45.x, acc);
						acc = fmaf(qb.y, k45.y, acc);
						acc = fmaf(qb.z, k67.x, acc);
						acc = fmaf(qb.w, k67.y, acc);
						sc[g] = acc;
					}
				}
			}
			float pr[G];
#pragma unroll
			for (int g = 0; g < G; g++) {
				const float sv = valid ? sc[g] : -INFINITY;
				const float m_new = fmaxf(m[g], ember_warp_max(sv));
				const float alpha = exp2f(m[g] - m_new);
				pr[g] = valid ? exp2f(sv - m_new) : 0.0f;
				l[g] = l[g] * alpha + ember_warp_sum(pr[g]);
				m[g] = m_new;
#pragma unroll
				for (int i = 0; i < D / 32; i++)
					o[g][i] *= alpha;
			}
			/* P.V: V rows are loaded 16 at a time before use, so a warp waits for two memory
			 * round trips per 32 keys instead of 32. */
			const int n_here = min(32, end - base);
#pragma unroll
			for (int j0 = 0; j0 < 32; j0 += 16) {
				if (j0 >= n_here)
					break;
				uint32_t vraw[16][D / 64];
#pragma unroll
				for (int u = 0; u < 16; u++) {
					const __half *vr = vc + (size_t)(base + j0 + u) * D + lane * (D / 32);
#pragma unroll
					for (int c = 0; c < D / 64; c++)
						vraw[u][c] = j0 + u < n_here ? __ldg(reinterpret_cast<const uint32_t *>(vr) + c) : 0u;
				}
#pragma unroll
				for (int u = 0; u < 16; u++) {
					float vv[D / 32];
#pragma unroll
					for (int c = 0; c < D / 64; c++) {
						const float2 f = ember_unpack_half2(vraw[u][c]);
						vv[2 * c] = f.x;
						vv[2 * c + 1] = f.y;
					}
#pragma unroll
					for (int g = 0; g < G; g++) {
						const float pj = __shfl_sync(0xffffffffu, pr[g], j0 + u);
#pragma unroll
						for (int i = 0; i < D / 32; i++)
							o[g][i] = fmaf(pj, vv[i], o[g][i]);
					}
				}
			}
		}
		/* Merge the warps. A warp that saw no key has m = -inf, l = 0, o = 0. */
#pragma unroll
		for (int g = 0; g < G; g++) {
			if (lane == 0) {
				w_m[warp][g] = m[g];
				w_l[warp][g] = l[g];
			}
#pragma unroll
			for (int i = 0; i < D / 32; i++)
				w_o[warp][g][lane * (D / 32) + i] = o[g][i];
		}
		__syncthreads();
		for (int i = tid; i < G * D; i += ATTN_THREADS) {
			float mx, L, O;
			attn_merge_warps<D, G>(w_m, w_l, w_o, i, &mx, &L, &O);
			if (n_split == 1)
				static_cast<__half *>(a.out)[((size_t)t * a.n_head + h * G) * D + i] = __float2half_rn(O / L);
			else
				attn_store_partial<D, G>(a, h, s, n_split, i, mx, L, O);
		}
	} else if (n_split > 1 && tid < G) {
		a.part_ml[(((size_t)h * n_split + s) * G + tid) * 2] = -INFINITY;
		a.part_ml[(((size_t)h * n_split + s) * G + tid) * 2 + 1] = 0.0f;
	}
	if (n_split == 1)
		return;

	/* Last CTA of this head merges the splits. */
	if (!attn_last_arrival(a, h, n_split, &is_last))
		return;
	/* Only splits that saw keys hold partials; their (m, l) go to shared memory in one round
	 * trip and the per-dim loop keeps several partial loads in flight. */
	const int n_active = min(n_split, (n_keys + chunk - 1) / chunk);
	for (int i = tid; i < n_active * G; i += ATTN_THREADS) {
		const int sp = i / G, g = i % G;
		const size_t idx = ((size_t)h * n_split + sp) * G + g;
		w_ml[sp][g][0] = __ldcg(&a.part_ml[idx * 2]);
		w_ml[sp][g][1] = __ldcg(&a.part_ml[idx * 2 + 1]);
	}
	__syncthreads();
	for (int i = tid; i < G * D; i += ATTN_THREADS) {
		const int g = i / D, d = i % D;
		float mx = -INFINITY;
		for (int sp = 0; sp < n_active; sp++)
			mx = fmaxf(mx, w_ml[sp][g][0]);
		float L = 0.0f, O = 0.0f;
#pragma unroll 8
		for (int sp = 0; sp < n_active; sp++) {
			const float ms = w_ml[sp][g][0];
			const float f = ms == -INFINITY ? 0.0f : exp2f(ms - mx);
			L = fmaf(w_ml[sp][g][1], f, L);
			O = fmaf(f == 0.0f ? 0.0f : __ldcg(&a.part_o[(((size_t)h * n_split + sp) * G + g) * D + d]), f, O);
		}
		static_cast<__half *>(a.out)[(size_t)(h * G + g) * D + d] = __float2half_rn(O / L);
	}
	if (tid == 0)
		a.counters[h] = 0;
}

/* ---- Lean decode variant (EMBER_ATTN_LEAN=1) ----
 * The same math and split layout as attn_decode_kernel<D, G, true>, with a shorter dependency chain
 * (short contexts are pure latency):
 * - only the n_active splits that hold keys run: the others return at once, the merge ticket counts
 *   active splits only, and a lone active split writes the fp16 output itself (no scratch, no atomic);
 * - a warp issues the loads of its 32 K rows and of all 32 of their V slices together, before q is
 *   staged: one memory round trip per 32 keys instead of three, overlapping the q norm/RoPE. Later
 *   batches load their K rows during the previous batch's softmax and P.V, and their V rows while
 *   their own scores are formed. Those loads may see the cache row `pos` before this launch appends
 *   it, so the appended K/V row is staged in shared memory and the key `pos` takes it from there;
 * - the running max is one redux.sync (not a 5-step shuffle), the softmax sum stays per lane until
 *   the loop ends (one shuffle reduction per warp, not per 32 keys), and fewer than 4 query heads
 *   get several accumulators each so the score FMA chains stay short;
 * - the merge loads the first partial outputs in the same round trip as the (m, l) pairs and
 *   computes each split's weight exp2(m - max) once per head instead of once per output element.
 */
#define ATTN_MERGE_PF 4 /* partial outputs per thread prefetched with the (m, l) pairs */

/* Warp max of a float (no NaN) by one redux.sync on its order-preserving integer image. */
static __device__ __forceinline__ float attn_warp_max_redux(float v)
{
	const int i = __float_as_int(v);
	const int r = __reduce_max_sync(0xffffffffu, i >= 0 ? i : i ^ 0x7fffffff);
	return __int_as_float(r >= 0 ? r : r ^ 0x7fffffff);
}

/* Key row p (zero when p >= end), as D/8 16-byte words. */
template <int D>
static __device__ __forceinline__ void lean_load_k(uint4 (&kraw)[D / 8], const __half *kc, int p, int end)
{
	const uint4 *kr = reinterpret_cast<const uint4 *>(kc + (size_t)p * D);
	if (p < end) {
#pragma unroll
		for (int c = 0; c < D / 8; c++)
			kraw[c] = __ldg(kr + c);
	} else {
#pragma unroll
		for (int c = 0; c < D / 8; c++)
			kraw[c] = make_uint4(0u, 0u, 0u, 0u);
	}
}

/* The lane's D/32 dims of one V row, in one load. */
template <int D>
static __device__ __forceinline__ void lean_load_vrow(uint32_t (&dst)[D / 64], const __half *src)
{
	static_assert(D == 64 || D == 128, "head_dim 64 or 128");
	if constexpr (D == 128) {
		const uint2 x = __ldg(reinterpret_cast<const uint2 *>(src));
		dst[0] = x.x;
		dst[1] = x.y;
	} else {
		dst[0] = __ldg(reinterpret_cast<const uint32_t *>(src));
	}
}

/* The lane's dims of V rows base..base+31, zero from `end` on (a whole batch needs no tests). */
template <int D>
static __device__ __forceinline__ void lean_load_v(uint32_t (&vraw)[32][D / 64], const __half *vc, int base, int end, int lane)
{
	const __half *vr = vc + (size_t)base * D + lane * (D / 32);
	if (base + 32 <= end) {
#pragma unroll
		for (int u = 0; u < 32; u++)
			lean_load_vrow<D>(vraw[u], vr + (size_t)u * D);
	} else {
#pragma unroll
		for (int u = 0; u < 32; u++) {
			if (base + u < end) {
				lean_load_vrow<D>(vraw[u], vr + (size_t)u * D);
			} else {
#pragma unroll
				for (int c = 0; c < D / 64; c++)
					vraw[u][c] = 0u;
			}
		}
	}
}

/* Scores of one key row against the G staged query heads. Fewer than 4 heads get 4/G accumulators
 * each, so there are always 4 independent FMA chains. */
template <int D, int G>
static __device__ __forceinline__ void lean_scores(float (&sc)[G], const uint4 (&kraw)[D / 8], const float (*q_s)[D])
{
	constexpr int NACC = G >= 4 ? 1 : 4 / G;
	float acc[G][NACC];
#pragma unroll
	for (int g = 0; g < G; g++)
#pragma unroll
		for (int j = 0; j < NACC; j++)
			acc[g][j] = 0.0f;
#pragma unroll
	for (int c = 0; c < D / 8; c++) {
		const float2 k01 = ember_unpack_half2(kraw[c].x), k23 = ember_unpack_half2(kraw[c].y);
		const float2 k45 = ember_unpack_half2(kraw[c].z), k67 = ember_unpack_half2(kraw[c].w);
#pragma unroll
		for (int g = 0; g < G; g++) {
			const float4 qa = *reinterpret_cast<const float4 *>(&q_s[g][8 * c]);
			const float4 qb = *reinterpret_cast<const float4 *>(&q_s[g][8 * c + 4]);
			float x = acc[g][c % NACC];
			x = fmaf(qa.x, k01.x, x);
			x = fmaf(qa.y, k01.y, x);
			x = fmaf(qa.z, k23.x, x);
			x = fmaf(qa.w, k23.y, x);
			x = fmaf(qb.x, k45.x, x);
			x = fmaf(qb.y, k45.y, x);
			x = fmaf(qb.z, k67.x, x);
			x = fmaf(qb.w, k67.y, x);
			acc[g][c % NACC] = x;
		}
	}
#pragma unroll
	for (int g = 0; g < G; g++) {
		sc[g] = acc[g][0];
#pragma unroll
		for (int j = 1; j < NACC; j++)
			sc[g] += acc[g][j];
	}
}

/* o += P.V over the batch's first n_here rows (probabilities broadcast from the key's lane). */
template <int D, int G>
static __device__ __forceinline__ void lean_pv(float (&o)[G][D / 32], const uint32_t (&vraw)[32][D / 64], const float (&pr)[G],
                                               int n_here)
{
#pragma unroll
	for (int u0 = 0; u0 < 32; u0 += 8) {
		if (u0 >= n_here)
			break;
#pragma unroll
		for (int u = u0; u < u0 + 8; u++) {
			float vv[D / 32];
#pragma unroll
			for (int c = 0; c < D / 64; c++) {
				const float2 f = ember_unpack_half2(vraw[u][c]);
				vv[2 * c] = f.x;
				vv[2 * c + 1] = f.y;
			}
#pragma unroll
			for (int g = 0; g < G; g++) {
				const float pj = __shfl_sync(0xffffffffu, pr[g], u);
#pragma unroll
				for (int i = 0; i < D / 32; i++)
					o[g][i] = fmaf(pj, vv[i], o[g][i]);
			}
		}
	}
}

/* The lean kernel's body for the token at `pos`; APPEND: this launch appends the token's K/V (the
 * decode step); the verify window appends all its rows first (attn_window_append_kernel) and
 * reads them from the cache like any other key (the same fp16 bits). */
template <int D, int G, bool APPEND>
static __device__ __forceinline__ void attn_lean_body(const ember_attn_args &a, int pos, int n_keys)
{
	__shared__ __align__(16) float q_s[G][D];
	__shared__ __align__(16) __half kv_new[2][D]; /* the appended K and V row, fp16 as stored */
	__shared__ float w_m[ATTN_WARPS][G], w_l[ATTN_WARPS][G];
	__shared__ float w_o[ATTN_WARPS][G][D];
	__shared__ int is_last;
	__shared__ float w_ml[ATTN_MAX_SPLIT][G][2];
	__shared__ float w_f[ATTN_MAX_SPLIT][G];

	const int h = blockIdx.x, s = blockIdx.y;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
	const int n_split = a.n_split;
	int chunk = (n_keys + n_split - 1) / n_split;
	chunk = (chunk + ATTN_THREADS - 1) / ATTN_THREADS * ATTN_THREADS;
	/* Splits 0..n_active-1 hold keys; every CTA derives the same n_active from n_keys. */
	const int n_active = min(n_split, (n_keys + chunk - 1) / chunk);
	if (s >= n_active)
		return;
	const int start = s * chunk, end = min(n_keys, start + chunk);
	const __half *kc = static_cast<const __half *>(a.k_cache) + (size_t)h * a.n_ctx * D;
	const __half *vc = static_cast<const __half *>(a.v_cache) + (size_t)h * a.n_ctx * D;

	/* This warp's first batch of keys: in flight while q is staged. */
	int base = start + warp * 32;
	uint4 kraw[D / 8];
	uint32_t vraw[32][D / 64];
	lean_load_k<D>(kraw, kc, base + lane, end);
	lean_load_v<D>(vraw, vc, base, end, lane);
	/* Launched as a programmatic dependent (args.pdl), the CTA got here while the QKV GEMV may still
	 * run: the cache rows above (positions < pos, written by earlier steps; the row at pos is taken
	 * from kv_new below) and state->pos (final before the step's first kernel) do not depend on it,
	 * everything after this does. Without a programmatic launch this returns at once. */
	asm volatile("griddepcontrol.wait;\n" ::: "memory");

	/* Stage the G query heads; the split holding `pos` also appends the new K/V (to the cache and
	 * to kv_new). All the inputs are loaded first, so they arrive in one round trip. */
	constexpr int QH = (G + ATTN_WARPS - 1) / ATTN_WARPS; /* query heads per warp */
	const bool has_pos = APPEND && pos >= start && pos < end;
	float qv[QH][D / 32], kv[D / 32]; /* kv: the new K (last warp) or V (the one before) */
#pragma unroll
	for (int j = 0; j < QH; j++)
		if (warp + j * ATTN_WARPS < G) {
#pragma unroll
			for (int c = 0; c < D / 32; c++)
				qv[j][c] = a.q[(size_t)(h * G + warp + j * ATTN_WARPS) * D + lane + 32 * c];
		}
	if (has_pos && warp >= ATTN_WARPS - 2) {
		const float *src = (warp == ATTN_WARPS - 1 ? a.k : a.v) + (size_t)h * D;
#pragma unroll
		for (int c = 0; c < D / 32; c++)
			kv[c] = src[lane + 32 * c];
	}
	const float qscale = ATTN_LOG2E / sqrtf((float)D);
	const float *cs = a.rope_cos + (size_t)pos * (D / 2), *sn = a.rope_sin + (size_t)pos * (D / 2);
#pragma unroll
	for (int j = 0; j < QH; j++) {
		const int g = warp + j * ATTN_WARPS;
		if (g < G) {
			ember_norm_rope_head<D>(qv[j], a.q_norm, a.eps, cs, sn, lane);
#pragma unroll
			for (int c = 0; c < D / 32; c++)
				q_s[g][lane + 32 * c] = qv[j][c] * qscale;
		}
	}
	if (has_pos && warp >= ATTN_WARPS - 2) {
		const int which = warp == ATTN_WARPS - 1 ? 0 : 1;
		__half *dst = static_cast<__half *>(which == 0 ? a.k_cache : a.v_cache) + ((size_t)h * a.n_ctx + pos) * D;
		if (which == 0)
			ember_norm_rope_head<D>(kv, a.k_norm, a.eps, cs, sn, lane);
#pragma unroll
		for (int c = 0; c < D / 32; c++) {
			const __half x = __float2half_rn(kv[c]);
			dst[lane + 32 * c] = x;
			kv_new[which][lane + 32 * c] = x;
		}
	}
	__syncthreads();

	float m[G], l[G], o[G][D / 32]; /* l: this lane's share of the softmax sum */
#pragma unroll
	for (int g = 0; g < G; g++) {
		m[g] = -INFINITY;
		l[g] = 0.0f;
#pragma unroll
		for (int i = 0; i < D / 32; i++)
			o[g][i] = 0.0f;
	}
	while (base < end) {
		const int p = base + lane, next = base + ATTN_THREADS;
		const bool valid = p < end;
		if (APPEND && p == pos) { /* without APPEND the cache row (appended earlier) is used */
#pragma unroll
			for (int c = 0; c < D / 8; c++)
				kraw[c] = reinterpret_cast<const uint4 *>(kv_new[0])[c];
		}
		float sc[G];
		lean_scores<D, G>(sc, kraw, q_s);
		if (next < end)
			lean_load_k<D>(kraw, kc, next + lane, end);
		float pr[G];
#pragma unroll
		for (int g = 0; g < G; g++) {
			const float sv = valid ? sc[g] : -INFINITY;
			const float m_new = fmaxf(m[g], attn_warp_max_redux(sv)); /* finite: lane 0 is valid */
			const float alpha = exp2f(m[g] - m_new);
			pr[g] = valid ? exp2f(sv - m_new) : 0.0f;
			l[g] = fmaf(l[g], alpha, pr[g]);
			m[g] = m_new;
#pragma unroll
			for (int i = 0; i < D / 32; i++)
				o[g][i] *= alpha;
		}
		if (has_pos && (unsigned)(pos - base) < 32u) {
			const uint32_t *vn = reinterpret_cast<const uint32_t *>(kv_new[1]) + lane * (D / 64);
#pragma unroll
			for (int u = 0; u < 32; u++)
				if (base + u == pos) {
#pragma unroll
					for (int c = 0; c < D / 64; c++)
						vraw[u][c] = vn[c];
				}
		}
		lean_pv<D, G>(o, vraw, pr, min(32, end - base));
		if (next < end)
			lean_load_v<D>(vraw, vc, next, end, lane);
		base = next;
	}

	/* Merge the warps. A warp that saw no key has m = -inf, l = 0, o = 0. */
#pragma unroll
	for (int g = 0; g < G; g++) {
		const float lw = ember_warp_sum(l[g]);
		if (lane == 0) {
			w_m[warp][g] = m[g];
			w_l[warp][g] = lw;
		}
#pragma unroll
		for (int i = 0; i < D / 32; i++)
			w_o[warp][g][lane * (D / 32) + i] = o[g][i];
	}
	__syncthreads();
	for (int i = tid; i < G * D; i += ATTN_THREADS) {
		float mx, L, O;
		attn_merge_warps<D, G>(w_m, w_l, w_o, i, &mx, &L, &O);
		if (n_active == 1)
			static_cast<__half *>(a.out)[(size_t)h * G * D + i] = __float2half_rn(O / L);
		else
			attn_store_partial<D, G>(a, h, s, n_split, i, mx, L, O);
	}
	if (n_active == 1)
		return;

	/* Ticket over the active splits: the last one to arrive merges, then re-zeroes the counter. */
	if (!attn_last_arrival(a, h, n_active, &is_last))
		return;
	/* One round trip: (m, l) of every active split to shared memory, and this thread's partial
	 * outputs of the first ATTN_MERGE_PF splits to registers. Every active split saw a key, so
	 * every m is finite and the largest weight is 1. */
	constexpr int E = (G * D + ATTN_THREADS - 1) / ATTN_THREADS; /* output elements per thread */
	const float *po = a.part_o + (size_t)h * n_split * G * D;
	float opf[ATTN_MERGE_PF][E];
#pragma unroll
	for (int k = 0; k < ATTN_MERGE_PF; k++)
#pragma unroll
		for (int e = 0; e < E; e++) {
			const int i = tid + e * ATTN_THREADS;
			opf[k][e] = k < n_active && i < G * D ? __ldcg(po + (size_t)k * G * D + i) : 0.0f;
		}
	for (int i = tid; i < n_active * G; i += ATTN_THREADS) {
		const size_t idx = (size_t)h * n_split * G + i;
		w_ml[i / G][i % G][0] = __ldcg(&a.part_ml[idx * 2]);
		w_ml[i / G][i % G][1] = __ldcg(&a.part_ml[idx * 2 + 1]);
	}
	__syncthreads();
	for (int i = tid; i < n_active * G; i += ATTN_THREADS) {
		const int g = i % G;
		float mx = -INFINITY;
		for (int sp = 0; sp < n_active; sp++)
			mx = fmaxf(mx, w_ml[sp][g][0]);
		w_f[i / G][g] = exp2f(w_ml[i / G][g][0] - mx);
	}
	__syncthreads();
#pragma unroll
	for (int e = 0; e < E; e++) {
		const int i = tid + e * ATTN_THREADS, g = i / D;
		if (i < G * D) {
			float L = 0.0f, O = 0.0f;
#pragma unroll
			for (int k = 0; k < ATTN_MERGE_PF; k++)
				if (k < n_active) {
					L = fmaf(w_ml[k][g][1], w_f[k][g], L);
					O = fmaf(opf[k][e], w_f[k][g], O);
				}
#pragma unroll 8
			for (int sp = ATTN_MERGE_PF; sp < n_active; sp++) {
				L = fmaf(w_ml[sp][g][1], w_f[sp][g], L);
				O = fmaf(__ldcg(po + (size_t)sp * G * D + i), w_f[sp][g], O);
			}
			static_cast<__half *>(a.out)[(size_t)h * G * D + i] = __float2half_rn(O / L);
		}
	}
	if (tid == 0)
		a.counters[h] = 0;
}

template <int D, int G>
static __global__ void __launch_bounds__(ATTN_THREADS, 2) attn_decode_lean_kernel(const ember_attn_args a)
{
	asm volatile("griddepcontrol.launch_dependents;\n" ::);
	attn_lean_body<D, G, true>(a, a.state->pos, a.state->pos + 1);
}

/* Verify window: token z of the window at position state->pos + z, its projections, output and
 * merge scratch offset by z (ember_attn_window). Same split layout as a decode step there. With
 * a.full every token sees the whole window (keys 0..state->pos + n_tok - 1), not the causal prefix. */
template <int D, int G>
static __global__ void __launch_bounds__(ATTN_THREADS, 2) attn_window_kernel(const ember_attn_args a_in, int ld_qkv)
{
	const int z = blockIdx.z, G_ = G;
	ember_attn_args a = a_in;
	a.q = a_in.q + (size_t)z * ld_qkv;
	a.out = static_cast<__half *>(a_in.out) + (size_t)z * a_in.n_head * D;
	a.part_o = a_in.part_o + (size_t)z * a_in.n_kv * a_in.n_split * G_ * D;
	a.part_ml = a_in.part_ml + (size_t)z * a_in.n_kv * a_in.n_split * G_ * 2;
	a.counters = a_in.counters + (size_t)z * a_in.n_kv;
	const int pos = a_in.state->pos + z;
	attn_lean_body<D, G, false>(a, pos, a_in.full ? a_in.state->pos + (int)gridDim.z : pos + 1);
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
	attn_window_kernel<D, G><<<dim3(a->n_kv, a->n_split, n_tok), ATTN_THREADS, 0, stream>>>(*a, ld_qkv);
	CUDA_CHECK_LAUNCH("attn_window_kernel");
	return 0;
}

template <int D, int G>
static int attn_launch(const ember_attn_args *a, cudaStream_t stream)
{
	if (a->n_tokens == 0 && a->lean) {
		cudaLaunchAttribute attr;
		const cudaLaunchConfig_t cfg =
			ember_launch_config(&attr, dim3(a->n_kv, a->n_split, 1), dim3(ATTN_THREADS), 0, stream, a->pdl);
		CUDA_CHECK(cudaLaunchKernelEx(&cfg, attn_decode_lean_kernel<D, G>, *a));
	} else if (a->n_tokens == 0) {
		attn_decode_kernel<D, G, true><<<dim3(a->n_kv, a->n_split, 1), ATTN_THREADS, 0, stream>>>(*a);
	} else {
		attn_decode_kernel<D, G, false><<<dim3(a->n_kv, 1, a->n_tokens), ATTN_THREADS, 0, stream>>>(*a);
	}
	CUDA_CHECK_LAUNCH("attn_decode_kernel");
	return 0;
}

template <int D>
static int attn_dispatch_group(const ember_attn_args *a, int group, cudaStream_t stream)
{
	switch (group) {
	case 1: return attn_launch<D, 1>(a, stream);
	case 2: return attn_launch<D, 2>(a, stream);
	case 4: return attn_launch<D, 4>(a, stream);
	case 8: return attn_launch<D, 8>(a, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "attention: GQA group %d not supported (1, 2, 4, 8)", group);
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

extern "C" int ember_attn_decode(const struct ember_attn_args *a, cudaStream_t stream)
{
	EMBER_REQUIRE(a && a->k_cache && a->v_cache && a->out && a->n_kv > 0 && a->n_head % a->n_kv == 0);
	EMBER_REQUIRE(a->n_tokens >= 0);
	if (a->n_tokens == 0) {
		EMBER_REQUIRE(a->q && a->k && a->v && a->q_norm && a->k_norm && a->rope_cos && a->rope_sin && a->state);
		EMBER_REQUIRE(a->n_split >= 1 && a->n_split <= ATTN_MAX_SPLIT && (a->n_split == 1 || (a->part_o && a->part_ml && a->counters)));
	} else {
		EMBER_REQUIRE(a->q_prepped && a->pos0 >= 0 && a->pos0 + a->n_tokens <= a->n_ctx);
	}
	const int group = a->n_head / a->n_kv;
	switch (a->head_dim) {
	case 64: return attn_dispatch_group<64>(a, group, stream);
	case 128: return attn_dispatch_group<128>(a, group, stream);
	}
	return ember_error_set(EMBER_EUNSUPPORTED, "attention: head_dim %d not supported (64, 128)", a->head_dim);
}

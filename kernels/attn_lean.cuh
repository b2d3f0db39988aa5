/*
 * attn_lean.cuh - device code of the lean split-KV decode attention that attn_decode.cu (the decode
 * step) and attn_window.cu (the verify window) share, so a window token runs the very arithmetic
 * of the decode step at its position: the split layout, the per-warp key batches, the score and
 * P.V FMA chains, the warp and split merges. Header-only, device code; the kernels are in the .cu
 * files. The comments of attn_decode.cu describe the algorithm.
 */
#ifndef EMBER_KERNELS_ATTN_LEAN_CUH
#define EMBER_KERNELS_ATTN_LEAN_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "attn_decode.cuh"
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

/* A warp's empty softmax state: m = -inf, l = 0, o = 0 (o: this lane's D / 32 output elements). */
template <int D, int G>
static __device__ __forceinline__ void attn_state_init(float (&m)[G], float (&l)[G], float (&o)[G][D / 32])
{
#pragma unroll
	for (int g = 0; g < G; g++) {
		m[g] = -INFINITY;
		l[g] = 0.0f;
#pragma unroll
		for (int i = 0; i < D / 32; i++)
			o[g][i] = 0.0f;
	}
}

/* Warp w's (m, l, o) into the shared rows attn_merge_warps reads; l is each lane's share of the
 * softmax sum, reduced over the warp here. */
template <int D, int G>
static __device__ __forceinline__ void attn_stash_warp(float (*w_m)[G], float (*w_l)[G], float (*w_o)[G][D], int w,
                                                       int lane, const float (&m)[G], const float (&l)[G],
                                                       const float (&o)[G][D / 32])
{
#pragma unroll
	for (int g = 0; g < G; g++) {
		const float lw = ember_warp_sum(l[g]);
		if (lane == 0) {
			w_m[w][g] = m[g];
			w_l[w][g] = lw;
		}
#pragma unroll
		for (int i = 0; i < D / 32; i++)
			w_o[w][g][lane * (D / 32) + i] = o[g][i];
	}
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

/* Scores of one key row against the G staged query heads; kchunk(c) gives the row's 16-byte word c
 * (from registers in the decode step, from shared memory in the shared window kernel: one FMA
 * order for both). Fewer than 4 heads get 4/G accumulators each, so there are always 4 independent
 * FMA chains. */
template <int D, int G, class KChunk>
static __device__ __forceinline__ void lean_scores_f(float (&sc)[G], KChunk kchunk, const float (*q_s)[D])
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
		const uint4 kw = kchunk(c);
		const float2 k01 = ember_unpack_half2(kw.x), k23 = ember_unpack_half2(kw.y);
		const float2 k45 = ember_unpack_half2(kw.z), k67 = ember_unpack_half2(kw.w);
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

template <int D, int G>
static __device__ __forceinline__ void lean_scores(float (&sc)[G], const uint4 (&kraw)[D / 8], const float (*q_s)[D])
{
	lean_scores_f<D, G>(sc, [&](int c) { return kraw[c]; }, q_s);
}

/* o += P.V over the batch's first n_here rows (probabilities broadcast from the key's lane);
 * vrow(u, dst) gives the lane's D/32 dims of the batch's row u (zero past the keys' end). */
template <int D, int G, class VRow>
static __device__ __forceinline__ void lean_pv_f(float (&o)[G][D / 32], VRow vrow, const float (&pr)[G], int n_here)
{
#pragma unroll
	for (int u0 = 0; u0 < 32; u0 += 8) {
		if (u0 >= n_here)
			break;
#pragma unroll
		for (int u = u0; u < u0 + 8; u++) {
			uint32_t vw[D / 64];
			vrow(u, vw);
			float vv[D / 32];
#pragma unroll
			for (int c = 0; c < D / 64; c++) {
				const float2 f = ember_unpack_half2(vw[c]);
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

template <int D, int G>
static __device__ __forceinline__ void lean_pv(float (&o)[G][D / 32], const uint32_t (&vraw)[32][D / 64], const float (&pr)[G],
                                               int n_here)
{
	lean_pv_f<D, G>(
		o,
		[&](int u, uint32_t (&dst)[D / 64]) {
#pragma unroll
			for (int c = 0; c < D / 64; c++)
				dst[c] = vraw[u][c];
		},
		pr, n_here);
}

/* One batch's online-softmax step: the running max m and this lane's share l of the sum per head,
 * the probabilities pr of the lane's key (0 when !valid) and o rescaled to the new max. */
template <int D, int G>
static __device__ __forceinline__ void lean_softmax(float (&m)[G], float (&l)[G], float (&o)[G][D / 32], float (&pr)[G],
                                                    const float (&sc)[G], bool valid)
{
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
}

/* The last CTA of KV head h (after attn_last_arrival) merges the n_active splits' partials into the
 * output, then re-zeroes h's counter. tid in 0..ATTN_THREADS-1: the thread's rank among the
 * ATTN_THREADS that merge; w_ml, w_f: shared scratch of ATTN_MAX_SPLIT rows. Contains two
 * __syncthreads that every thread of the CTA must reach; threads with !on only reach them. */
template <int D, int G>
static __device__ __forceinline__ void attn_merge_splits(const ember_attn_args &a, int h, int n_active, int n_split, int tid,
                                                         float (*w_ml)[G][2], float (*w_f)[G], bool on)
{
	/* One round trip: (m, l) of every active split to shared memory, and this thread's partial
	 * outputs of the first ATTN_MERGE_PF splits to registers. Every active split saw a key, so
	 * every m is finite and the largest weight is 1. */
	constexpr int E = (G * D + ATTN_THREADS - 1) / ATTN_THREADS; /* output elements per thread */
	const float *po = a.part_o + (size_t)h * n_split * G * D;
	float opf[ATTN_MERGE_PF][E];
	if (on) {
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
	}
	__syncthreads();
	if (on)
		for (int i = tid; i < n_active * G; i += ATTN_THREADS) {
			const int g = i % G;
			float mx = -INFINITY;
			for (int sp = 0; sp < n_active; sp++)
				mx = fmaxf(mx, w_ml[sp][g][0]);
			w_f[i / G][g] = exp2f(w_ml[i / G][g][0] - mx);
		}
	__syncthreads();
	if (!on)
		return;
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

/* The lean kernel's body for the token at `pos`; APPEND: this launch appends the token's K/V (the
 * decode step); the verify window appends all its rows first (attn_window_append_kernel) and
 * reads them from the cache like any other key (the same fp16 bits). */
template <int D, int G, bool APPEND>
static __device__ __forceinline__ void attn_lean_body(const ember_attn_args &a, int h, int s, int pos, int n_keys)
{
	__shared__ __align__(16) float q_s[G][D];
	__shared__ __align__(16) __half kv_new[2][D]; /* the appended K and V row, fp16 as stored */
	__shared__ float w_m[ATTN_WARPS][G], w_l[ATTN_WARPS][G];
	__shared__ float w_o[ATTN_WARPS][G][D];
	__shared__ int is_last;
	__shared__ float w_ml[ATTN_MAX_SPLIT][G][2];
	__shared__ float w_f[ATTN_MAX_SPLIT][G];

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
	attn_state_init<D, G>(m, l, o);
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
		lean_softmax<D, G>(m, l, o, pr, sc, valid);
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
	attn_stash_warp<D, G>(w_m, w_l, w_o, warp, lane, m, l, o);
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
	attn_merge_splits<D, G>(a, h, n_active, n_split, tid, w_ml, w_f, true);
}

#endif

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

#include "attn_lean.cuh"
#include "common.cuh"
#include "gemv.cuh"
#include "rope.cuh"

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
		attn_state_init<D, G>(m, l, o);
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

template <int D, int G>
static __global__ void __launch_bounds__(ATTN_THREADS, 2) attn_decode_lean_kernel(const ember_attn_args a)
{
	asm volatile("griddepcontrol.launch_dependents;\n" ::);
	attn_lean_body<D, G, true>(a, blockIdx.x, blockIdx.y, a.state->pos, a.state->pos + 1);
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

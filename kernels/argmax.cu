/*
 * argmax.cu - the greedy argmax over logits rows (see argmax.cuh). One CTA of 1024 threads per
 * row; each thread keeps ARGMAX_UNROLL 16-byte loads in flight before comparing, so a row of a
 * large vocabulary streams at the SM's bandwidth instead of one load latency per element. Both
 * orders reduce one 64-bit key per element (value order in the high word, lowest index wins in the
 * low word), so the result does not depend on which thread saw which element.
 */
#include "argmax.cuh"

#include <math.h>

#include "common.cuh"
#include "gemv_core.cuh"

#define ARGMAX_THREADS 1024
#define ARGMAX_UNROLL 8

/* DECODE: the decode LM head's key; else NaN never wins (key 0) and -0 equals +0. */
template <bool DECODE>
static __device__ __forceinline__ unsigned long long key_of(float v, int i)
{
	if (DECODE)
		return argmax_key(v, i);
	if (isnan(v))
		return 0ull;
	return argmax_key(v == 0.0f ? 0.0f : v, i);
}

static __device__ __forceinline__ unsigned long long key_max(unsigned long long a, unsigned long long b)
{
	return a > b ? a : b;
}

template <bool DECODE>
static __global__ void __launch_bounds__(ARGMAX_THREADS) argmax_kernel(int32_t *out, const float *logits, int n_cols, int ld)
{
	__shared__ unsigned long long best[ARGMAX_THREADS / 32];
	const float *row = logits + (size_t)blockIdx.x * ld;
	const int mis = (int)(((uintptr_t)row >> 2) & 3);
	const int head = mis ? (4 - mis < n_cols ? 4 - mis : n_cols) : 0;
	unsigned long long key = 0;
	if ((int)threadIdx.x < head)
		key = key_of<DECODE>(row[threadIdx.x], threadIdx.x);
	const float4 *r4 = reinterpret_cast<const float4 *>(row + head);
	const int n4 = (n_cols - head) >> 2;
	for (int b = threadIdx.x; b < n4; b += ARGMAX_THREADS * ARGMAX_UNROLL) {
		float4 v[ARGMAX_UNROLL];
#pragma unroll
		for (int u = 0; u < ARGMAX_UNROLL; u++) {
			const int j = b + u * ARGMAX_THREADS;
			v[u] = j < n4 ? __ldg(r4 + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int u = 0; u < ARGMAX_UNROLL; u++) {
			const int j = b + u * ARGMAX_THREADS;
			if (j < n4) {
				const int i = head + 4 * j;
				key = key_max(key, key_of<DECODE>(v[u].x, i));
				key = key_max(key, key_of<DECODE>(v[u].y, i + 1));
				key = key_max(key, key_of<DECODE>(v[u].z, i + 2));
				key = key_max(key, key_of<DECODE>(v[u].w, i + 3));
			}
		}
	}
	for (int i = head + 4 * n4 + threadIdx.x; i < n_cols; i += ARGMAX_THREADS)
		key = key_max(key, key_of<DECODE>(row[i], i));
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		key = key_max(key, __shfl_xor_sync(0xffffffffu, key, o));
	if ((threadIdx.x & 31) == 0)
		best[threadIdx.x >> 5] = key;
	__syncthreads();
	if (threadIdx.x < 32) {
		key = best[threadIdx.x];
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			key = key_max(key, __shfl_xor_sync(0xffffffffu, key, o));
		if (threadIdx.x == 0)
			out[blockIdx.x] = key ? (int32_t)(0xFFFFFFFFu - (uint32_t)(key & 0xFFFFFFFFull)) : 0;
	}
}

extern "C" int ember_argmax_rows(int32_t *out, const float *logits, int n_rows, int n_cols, cudaStream_t stream)
{
	EMBER_REQUIRE(out && logits && n_rows > 0 && n_cols > 0);
	argmax_kernel<false><<<n_rows, ARGMAX_THREADS, 0, stream>>>(out, logits, n_cols, n_cols);
	CUDA_CHECK_LAUNCH("argmax_kernel<rows>");
	return 0;
}

extern "C" int ember_argmax_keys(int32_t *out, const float *logits, int n_rows, int n_cols, int ld, cudaStream_t stream)
{
	EMBER_REQUIRE(out && logits && n_rows > 0 && n_cols > 0 && ld >= n_cols);
	argmax_kernel<true><<<n_rows, ARGMAX_THREADS, 0, stream>>>(out, logits, n_cols, ld);
	CUDA_CHECK_LAUNCH("argmax_kernel<keys>");
	return 0;
}

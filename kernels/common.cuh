/*
 * common.cuh - what every ember CUDA file shares: the CUDA_CHECK / CUBLAS_CHECK macros that record
 * the failing statement, file and line into ember's last error (engine/error.h) and return a
 * negative code to the caller, and small device helpers (warp reductions, fp16 packing, mma).
 * Host-only parts are plain C so the backend's .c files can include this header too.
 */
#ifndef EMBER_KERNELS_COMMON_CUH
#define EMBER_KERNELS_COMMON_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "error.h" /* engine/error.h has no C++ guards of its own */

/* Records "what: CUDA error (stmt at file:line)" as the last error; returns EMBER_ENOMEM for
 * allocation failures and EMBER_ERROR otherwise. Clears the sticky launch error if any. */
int ember_cuda_fail(cudaError_t err, const char *stmt, const char *file, int line);
/* Same for a cuBLAS status code (an int, so this header needs no cublas include). */
int ember_cublas_fail(int status, const char *stmt, const char *file, int line);

#ifdef __cplusplus
}
#endif

/* Evaluate a CUDA runtime call; on failure record it and `return` the negative code. */
#define CUDA_CHECK(stmt)                                                                  \
	do {                                                                                  \
		cudaError_t cuda_check_err_ = (stmt);                                             \
		if (cuda_check_err_ != cudaSuccess)                                               \
			return ember_cuda_fail(cuda_check_err_, #stmt, __FILE__, __LINE__);           \
	} while (0)

/* After a kernel launch: a bad configuration or missing kernel image shows up here. `what` (a
 * string literal, the kernel's name) is recorded as the failing statement. */
#define CUDA_CHECK_LAUNCH(what)                                                           \
	do {                                                                                  \
		cudaError_t cuda_check_err_ = cudaGetLastError();                                 \
		if (cuda_check_err_ != cudaSuccess)                                               \
			return ember_cuda_fail(cuda_check_err_, "launch of " what, __FILE__, __LINE__); \
	} while (0)

/* Same as CUDA_CHECK, but jumps to `cleanup` with error set (for goto-cleanup functions). */
#define CUDA_CHECK_GOTO(stmt)                                                             \
	do {                                                                                  \
		cudaError_t cuda_check_err_ = (stmt);                                             \
		if (cuda_check_err_ != cudaSuccess) {                                             \
			error = ember_cuda_fail(cuda_check_err_, #stmt, __FILE__, __LINE__);          \
			goto cleanup;                                                                 \
		}                                                                                 \
	} while (0)

#define CUBLAS_CHECK(stmt)                                                                \
	do {                                                                                  \
		int cublas_check_st_ = (int)(stmt);                                               \
		if (cublas_check_st_ != 0)                                                        \
			return ember_cublas_fail(cublas_check_st_, #stmt, __FILE__, __LINE__);        \
	} while (0)

/* Launcher shape assertion: records the failed condition and returns EMBER_ERROR. */
#define EMBER_REQUIRE(cond)                                                               \
	do {                                                                                  \
		if (!(cond))                                                                      \
			return ember_error_set(EMBER_ERROR, "kernel precondition failed: %s (%s:%d)", \
			                       #cond, __FILE__, __LINE__);                            \
	} while (0)

#ifdef __CUDACC__
#include <cuda_fp16.h>

/* A launch of grid x block threads with smem bytes of dynamic shared memory on `stream`, as a
 * programmatic dependent of the previous kernel when pdl (it may start while that kernel finishes;
 * it must griddepcontrol.wait before reading that kernel's output). *attr must outlive the
 * cudaLaunchKernelEx call that takes the result. */
static inline cudaLaunchConfig_t ember_launch_config(cudaLaunchAttribute *attr, dim3 grid, dim3 block, size_t smem,
                                                     cudaStream_t stream, int pdl)
{
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr->val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	return cfg;
}

/* A programmatic dependent's hand-over: let the next kernel's CTAs launch, then wait until the
 * previous kernel has finished and its writes are visible (before reading its output). */
static __device__ __forceinline__ void ember_pdl_release_wait()
{
	asm volatile("griddepcontrol.launch_dependents;\n" ::);
	asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

static __device__ __forceinline__ float ember_warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ float ember_warp_max(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
 * `scratch` holds 32 floats of shared memory; the call contains __syncthreads. */
static __device__ __forceinline__ float ember_block_sum(float v, float *scratch)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
	v = ember_warp_sum(v);
	__syncthreads();
	if (lane == 0)
		scratch[warp] = v;
	__syncthreads();
	float t = lane < nwarps ? scratch[lane] : 0.0f;
	return ember_warp_sum(t);
}

static __device__ __forceinline__ uint32_t ember_pack_half2(float lo, float hi)
{
	__half2 h = __floats2half2_rn(lo, hi);
	return *reinterpret_cast<uint32_t *>(&h);
}

static __device__ __forceinline__ float2 ember_unpack_half2(uint32_t u)
{
	__half2 h = *reinterpret_cast<__half2 *>(&u);
	return __half22float2(h);
}

/* D = A(16x16 f16, row) * B(16x8 f16, col) + C, fp32 accumulate (PTX m16n8k16 fragments). */
static __device__ __forceinline__ void ember_mma_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                                       const float c[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
	               "f"(c[2]), "f"(c[3]));
}

/* Exact small-integer byte -> float without the (quarter-rate) I2F: 2^23 + b, minus 2^23. */
static __device__ __forceinline__ float ember_u8_to_float(uint32_t b)
{
	return __uint_as_float(0x4B000000u | b) - 8388608.0f;
}

static __device__ __forceinline__ float ember_s8_to_float(uint32_t b)
{
	return __uint_as_float(0x4B000000u | ((b ^ 0x80u) & 0xFFu)) - 8388736.0f;
}
#endif /* __CUDACC__ */

#endif

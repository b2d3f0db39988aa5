/*
 * gemv_stream.cuh - the streaming variant of the decode GEMV (EMBER_GEMV_STREAM, gemv_stream.cu):
 * a grid of at most one wave of CTAs, each staging the input once and streaming all of its row tiles
 * (and, for SwiGLU, the gate then the up pass of each) through one cp.async ring that never drains
 * between them. Reached through ember_gemv (gemv.cuh), which validates the arguments first.
 * Plain C declarations.
 */
#ifndef EMBER_KERNELS_GEMV_STREAM_CUH
#define EMBER_KERNELS_GEMV_STREAM_CUH

#include <stddef.h>
#include <cuda_runtime_api.h>

#include "gemv.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches the streaming kernel on `stream` when every segment is tiled (*out_ran = 1); otherwise
 * sets *out_ran = 0 and the caller runs the plain kernel. args must already have passed
 * ember_gemv's checks and carry n_tiles; k_pad is k rounded up to 256; n_sm the SM count.
 * Returns 0 or a negative ember error. */
int ember_gemv_stream(int *out_ran, const struct ember_gemv_args *args, int k_pad, int n_sm, cudaStream_t stream);

/* The streaming kernel's shape for args (already checked by ember_gemv): *fits = 1 when its ring
 * of *out_r >= 2 rounds of *out_w warps' tiles (largest tile tb_max) fits in shared memory next to
 * the staged input; otherwise the plain kernel (4 warps) runs. 0 or a negative ember error. */
int ember_gemv_stream_fit(int *fits, int *out_w, int *out_r, const struct ember_gemv_args *args, int k_pad, size_t tb_max);
/* The device's opt-in shared memory per block (cached). */
int ember_gemv_smem_optin(int *out);

#ifdef __cplusplus
}
#endif

#endif

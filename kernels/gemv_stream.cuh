/*
 * gemv_stream.cuh - the streaming variant of the decode GEMV (EMBER_GEMV_STREAM, gemv_stream.cu):
 * a grid of at most one wave of CTAs, each staging the input once and streaming all of its row tiles
 * (and, for SwiGLU, the gate then the up pass of each) through one cp.async ring that never drains
 * between them. Reached through ember_gemv (gemv.cuh), which validates the arguments first.
 * Plain C declarations.
 */
#ifndef EMBER_KERNELS_GEMV_STREAM_CUH
#define EMBER_KERNELS_GEMV_STREAM_CUH

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

#ifdef __cplusplus
}
#endif

#endif

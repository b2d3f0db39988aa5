/*
 * gemm.cuh - the prefill matrix products through cuBLAS: fp16 weights and activations on the
 * tensor cores, fp32 accumulation and fp32 output (optionally accumulated into the residual).
 */
#ifndef EMBER_KERNELS_GEMM_CUH
#define EMBER_KERNELS_GEMM_CUH

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a cuBLAS handle bound to `stream`. On success *out_handle is owned by the caller and
 * released with ember_gemm_destroy (which accepts NULL). */
int ember_gemm_create(void **out_handle, cudaStream_t stream);
void ember_gemm_destroy(void *handle);

/* y[t][r] = beta * y[t][r] + sum_i w[r][i] * x[t][i] for r < n_out, t < n_tok, i < k.
 * w: fp16 [n_out][k], x: fp16 [n_tok][k] (row stride k), y: fp32 [n_tok][ldy]. */
int ember_gemm_f16(void *handle, const void *w, const void *x, float *y, int n_out, int n_tok, int k, int ldy, float beta);

#ifdef __cplusplus
}
#endif

#endif

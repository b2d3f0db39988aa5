/*
 * gemm.cu - cuBLAS wrappers for the prefill GEMMs (see gemm.cuh). Row-major y = x w^T is the
 * column-major product W^T(k x n_out)^T * X(k x n_tok), i.e. cublasGemmEx(T, N).
 */
#include "gemm.cuh"

#include <cublas_v2.h>

#include "common.cuh"

extern "C" int ember_gemm_create(void **out, cudaStream_t stream)
{
	cublasHandle_t h = NULL;
	CUBLAS_CHECK(cublasCreate(&h));
	cublasStatus_t st = cublasSetStream(h, stream);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
	if (st != CUBLAS_STATUS_SUCCESS) {
		cublasDestroy(h);
		return ember_cublas_fail((int)st, "cublasSetStream/SetMathMode", __FILE__, __LINE__);
	}
	*out = h;
	return 0;
}

extern "C" void ember_gemm_destroy(void *h)
{
	if (h)
		cublasDestroy(static_cast<cublasHandle_t>(h));
}

extern "C" int ember_gemm_f16(void *handle, const void *w, const void *x, float *y, int n_out, int n_tok, int k, int ldy,
                              float beta)
{
	EMBER_REQUIRE(handle && w && x && y && n_out > 0 && n_tok > 0 && k > 0 && ldy >= n_out);
	const float alpha = 1.0f;
	CUBLAS_CHECK(cublasGemmEx(static_cast<cublasHandle_t>(handle), CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tok, k, &alpha, w,
	                          CUDA_R_16F, k, x, CUDA_R_16F, k, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
	                          CUBLAS_GEMM_DEFAULT));
	return 0;
}

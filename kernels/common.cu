/*
 * common.cu - turns CUDA and cuBLAS failures into ember's last error (see common.cuh): the
 * failing statement, file and line, and for out-of-memory the EMBER_ENOMEM code.
 */
#include "common.cuh"

extern "C" int ember_cuda_fail(cudaError_t err, const char *stmt, const char *file, int line)
{
	(void)cudaGetLastError(); /* clear a sticky launch error so the next call starts clean */
	return ember_error_set(err == cudaErrorMemoryAllocation ? EMBER_ENOMEM : EMBER_ERROR, "CUDA error %s (%s) in %s at %s:%d",
	                       cudaGetErrorName(err), cudaGetErrorString(err), stmt, file, line);
}

extern "C" int ember_cublas_fail(int status, const char *stmt, const char *file, int line)
{
	/* cuBLAS status 3 is CUBLAS_STATUS_ALLOC_FAILED */
	return ember_error_set(status == 3 ? EMBER_ENOMEM : EMBER_ERROR, "cuBLAS status %d in %s at %s:%d", status, stmt, file,
	                       line);
}

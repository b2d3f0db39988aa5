/*
 * cuda_testutil.h - shared helpers of the GPU tests: skip (exit 77) without a device, checked
 * device allocations poisoned with 0xFF bytes (NaN in fp32 and fp16, so an unwritten output
 * fails), uploads/downloads, and a MUST for calls that may not fail. CHECK, check_exit and the
 * seeded random numbers come from check_cpu.h.
 */
#ifndef EMBER_CUDA_TESTUTIL_H
#define EMBER_CUDA_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "check_cpu.h"
#include "error.h"

#define SKIP_CODE 77

/* Aborts the test (not a skip) on an unexpected CUDA or ember error. */
#define MUST(call)                                                                                   \
	do {                                                                                             \
		int must_rc_ = (int)(call);                                                                  \
		if (must_rc_ != 0) {                                                                         \
			fprintf(stderr, "FATAL %s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, must_rc_,    \
			        ember_error_last());                                                             \
			exit(1);                                                                                 \
		}                                                                                            \
	} while (0)

static void require_gpu_or_skip(const char *test)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		printf("%s: no CUDA device, skipping\n", test);
		exit(SKIP_CODE);
	}
}

static void *dev_poison(size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess || cudaMemset(p, 0xFF, bytes ? bytes : 16) != cudaSuccess) {
		fprintf(stderr, "FATAL: cudaMalloc(%zu)\n", bytes);
		exit(1);
	}
	return p;
}

static void *dev_upload(const void *src, size_t bytes)
{
	void *p = dev_poison(bytes);
	if (cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
		fprintf(stderr, "FATAL: upload\n");
		exit(1);
	}
	return p;
}

static void dev_download(void *dst, const void *src, size_t bytes)
{
	cudaError_t e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
	if (e != cudaSuccess) {
		fprintf(stderr, "FATAL: download / kernel failure: %s\n", cudaGetErrorString(e));
		exit(1);
	}
}

#endif

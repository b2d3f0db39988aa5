/*
 * cuda_testutil.h - shared helpers of the CUDA tests: skip (exit 77) without a device, checked
 * device allocations poisoned with 0xFF bytes (NaN in fp32 and fp16, so an unwritten output
 * fails), uploads/downloads, seeded random numbers, and a CHECK macro that counts failures.
 */
#ifndef EMBER_CUDA_TESTUTIL_H
#define EMBER_CUDA_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "error.h"

#define SKIP_CODE 77

static int test_failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                      \
		if (!(cond)) {                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
			fprintf(stderr, __VA_ARGS__);                                     \
			fprintf(stderr, "\n");                                            \
			test_failures++;                                                  \
		}                                                                     \
	} while (0)

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

static uint64_t test_rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
	test_rng ^= test_rng << 13;
	test_rng ^= test_rng >> 7;
	test_rng ^= test_rng << 17;
	return (double)(test_rng >> 11) / 9007199254740992.0;
}
static float nrand(void) { return (float)((urand() + urand() + urand() + urand() - 2.0) * 1.7320508); }

#endif

/*
 * check_cpu.h - what every CUDA test shares that needs no CUDA header (test_cuda_layout builds
 * and runs without one): ember's CHECK / check_exit from tests/engine/check.h,
 * and the seeded xorshift generator the tests draw their weights and inputs from. Each test sets
 * its own seed in test_rng before the first draw.
 */
#ifndef EMBER_CUDA_CHECK_CPU_H
#define EMBER_CUDA_CHECK_CPU_H

#include <stdint.h>

#include "../engine/check.h"

static uint64_t test_rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [0, 1). */
static inline double urand(void)
{
	test_rng ^= test_rng << 13;
	test_rng ^= test_rng >> 7;
	test_rng ^= test_rng << 17;
	return (double)(test_rng >> 11) / 9007199254740992.0;
}

/* About N(0, 1): the sum of four uniforms, centred and scaled to unit variance. */
static inline float nrand(void) { return (float)((urand() + urand() + urand() + urand() - 2.0) * 1.7320508); }

#endif

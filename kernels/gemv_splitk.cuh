/*
 * gemv_splitk.cuh - the split-K variant of the decode GEMV (EMBER_GEMV_SPLITK, gemv_splitk.cu):
 * CTAs own 16 rows x one K slice, write fp32 partial sums, and the last CTA of each row block adds
 * them in slice order and applies the epilogue. Reached through ember_gemv (gemv.cuh), which
 * validates the arguments first. Plain C declarations.
 */
#ifndef EMBER_KERNELS_GEMV_SPLITK_CUH
#define EMBER_KERNELS_GEMV_SPLITK_CUH

#include <cuda_runtime_api.h>

#include "gemv.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* Plans args->splitk for this launch (layout.cuh: ember_splitk_make_plan, with n_sm SMs) and, unless
 * the setting is auto and the plan is one slice of one pass (the plain kernel is then as good),
 * launches the split kernel on `stream` with at most grid_cap CTAs. *out_ran = 1 when it launched,
 * 0 when the caller should run the plain kernel. args must already have passed ember_gemv's checks
 * and carry n_tiles; k_pad is k rounded up to 256. Returns 0 or a negative ember error (also when
 * the scratch or the counters are missing or too small for the plan). */
int ember_gemv_splitk(int *out_ran, const struct ember_gemv_args *args, int k_pad, int n_sm, int grid_cap,
                      cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/*
 * argmax.cuh - the greedy argmax over rows of fp32 logits, the two orders ember needs: the prefill
 * and draft order (largest value, lowest index on ties, NaN never chosen) and the decode LM head's
 * key order (gemv_core.cuh argmax_key), which the verify window must reproduce bit for bit.
 * Plain C declarations; outputs are device memory the caller owns.
 */
#ifndef EMBER_KERNELS_ARGMAX_CUH
#define EMBER_KERNELS_ARGMAX_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t] = argmax_i logits[t][i] (lowest index on ties; 0 for a row of NaNs) for t < n_rows. */
int ember_argmax_rows(int32_t *out, const float *logits, int n_rows, int n_cols, cudaStream_t stream);

/* out[r] = argmax of logits row r (n_cols floats, rows ld apart), with the decode LM head's
 * tie-break and NaN order (the key of gemv_core.cuh argmax_key). */
int ember_argmax_keys(int32_t *out, const float *logits, int n_rows, int n_cols, int ld, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

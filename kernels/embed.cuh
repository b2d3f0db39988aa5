/*
 * embed.cuh - token embedding lookup: dequantizes rows of the raw token_embd table (any ember
 * weight type) into the fp32 residual stream, bit-identical to the CPU's dequantization.
 */
#ifndef EMBER_KERNELS_EMBED_CUH
#define EMBER_KERNELS_EMBED_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t][0..cols) = row tokens[t] of the raw table (device pointers; tokens are read on the
 * device, so &state->token works inside a graph). Ids outside [0, n_vocab) give zero rows. */
int ember_embed_rows(float *out, int type, const void *table, int64_t cols, int n_vocab, const int32_t *tokens,
                     int n_tokens, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

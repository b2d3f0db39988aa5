/*
 * attn_window.cuh - attention for the verify window of speculative decoding: n_tok consecutive
 * tokens, each attending as the lean decode step at its position would (same splits, same bits),
 * or all over the whole window for a DFlash draft block.
 */
#ifndef EMBER_KERNELS_ATTN_WINDOW_CUH
#define EMBER_KERNELS_ATTN_WINDOW_CUH

#include <cuda_runtime_api.h>

#include "attn_decode.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* Verify window (speculative decoding): n_tok consecutive tokens at positions state->pos + z, with
 * the decode fields of args (lean kernel only, n_split as the decode step uses) pointing at token
 * 0; token z's q/k/v sit z * ld_qkv floats further, its output z * n_head * D halves further, and
 * part_o, part_ml and counters hold n_tok times the decode sizes (counters zero, left zero). Appends
 * every token's K/V first, then each token attends over keys 0..its position: per token the same
 * split layout and arithmetic as the lean decode step at that position. With args->full, every token
 * attends over keys 0..state->pos + n_tok - 1 instead (the draft block of speculative decoding:
 * the context plus the whole block); the same kernels, position read on the device. */
int ember_attn_window(const struct ember_attn_args *args, int n_tok, int ld_qkv, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/*
 * repack.cuh - weight preparation on the device at load time: raw GGUF rows (uploaded as they
 * are) into the decode GEMV's tiled layout (layout.cuh), and into dense fp16 rows for the prefill
 * GEMMs (cuBLAS), and fp16 rows into int8 Q8R tiles (the DFlash draft's window GEMVs). Plain C
 * declarations.
 */
#ifndef EMBER_KERNELS_REPACK_CUH
#define EMBER_KERNELS_REPACK_CUH

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the tiled copy of a rows x cols matrix of `type` (0 if the type has no tiled layout). */
size_t ember_repack_bytes(int type, int64_t rows, int64_t cols);

/* Writes the tiled copy (ember_repack_bytes bytes at dst) of the raw rows at src (device). */
int ember_repack_tiles(void *dst, int type, const void *src, int64_t rows, int64_t cols, cudaStream_t stream);

/* Bytes of the Q8R tiles (layout.cuh) of a rows x cols matrix. */
size_t ember_quant_q8r_bytes(int64_t rows, int64_t cols);

/* Quantizes fp16 rows src[rows][cols] (device) into Q8R tiles at dst (ember_quant_q8r_bytes). */
int ember_quant_q8r(void *dst, const void *src, int64_t rows, int64_t cols, cudaStream_t stream);

/* Dequantizes raw rows (F32, F16, BF16, Q8_0, Q4_K, Q6_K) into fp16 dst[rows][cols] (device). */
int ember_dequant_f16(void *dst, int type, const void *src, int64_t rows, int64_t cols, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

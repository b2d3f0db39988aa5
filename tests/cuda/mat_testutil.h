/*
 * mat_testutil.h - random quantized weight matrices for the CUDA op tests: raw GGUF rows from
 * engine/quant.h with their exact dequantization, device copies (raw, or tiled on the device),
 * double-precision row dot products, fp16 rounding and the RMSNorm input as the GEMV stages it.
 * Static inline functions for test_kernels.c and test_kernels_gemv.c.
 */
#ifndef EMBER_MAT_TESTUTIL_H
#define EMBER_MAT_TESTUTIL_H

#include "cuda_testutil.h"
#include "layout.cuh"
#include "quant.h"
#include "repack.cuh"

/* A random weight matrix: raw bytes (GGUF rows) and its exact dequantization. */
struct mat {
	int type, rows, cols;
	uint8_t *raw;
	float *deq;
};

static inline struct mat make_mat(int type, int rows, int cols)
{
	struct mat m = {type, rows, cols, NULL, NULL};
	const size_t rb = ember_type_bytes(type, cols);
	float *w = malloc((size_t)cols * 4);
	m.raw = malloc((size_t)rows * rb);
	m.deq = malloc((size_t)rows * cols * 4);
	for (int r = 0; r < rows; r++) {
		const float scale = 0.05f * (0.5f + (float)urand());
		for (int k = 0; k < cols; k++)
			w[k] = nrand() * scale + (type == EMBER_T_Q4_K ? 0.02f : 0.0f);
		ember_quantize_row((enum ember_type)type, w, m.raw + (size_t)r * rb, cols);
		ember_dequantize_row((enum ember_type)type, m.raw + (size_t)r * rb, m.deq + (size_t)r * cols, cols);
	}
	free(w);
	return m;
}

static inline void free_mat(struct mat *m)
{
	free(m->raw);
	free(m->deq);
}

/* Device copy of m for the GEMV: tiled (repacked on the device) or raw. */
static inline void *dev_mat(const struct mat *m, int tiled)
{
	void *raw = dev_upload(m->raw, (size_t)m->rows * ember_type_bytes(m->type, m->cols));
	if (!tiled)
		return raw;
	void *t = dev_poison(ember_repack_bytes(m->type, m->rows, m->cols));
	MUST(ember_repack_tiles(t, m->type, raw, m->rows, m->cols, 0));
	MUST(cudaDeviceSynchronize());
	cudaFree(raw);
	return t;
}

static inline double ref_dot(const struct mat *m, int r, const float *x, double *mag)
{
	double acc = 0, a = 0;
	for (int k = 0; k < m->cols; k++) {
		acc += (double)m->deq[(size_t)r * m->cols + k] * x[k];
		a += fabs((double)m->deq[(size_t)r * m->cols + k] * x[k]);
	}
	*mag = a;
	return acc;
}

static inline uint16_t *to_half(const float *x, int n, float *rounded)
{
	uint16_t *h = malloc((size_t)n * 2);
	for (int i = 0; i < n; i++) {
		h[i] = ember_f32_to_fp16(x[i]);
		if (rounded)
			rounded[i] = ember_fp16_to_f32(h[i]);
	}
	return h;
}

/* RMSNorm input on the CPU, rounded to fp16 like the kernel's staging. */
static inline void rms_ref(const float *x, const float *w, int n, float eps, float *out)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
	for (int i = 0; i < n; i++)
		out[i] = ember_fp16_to_f32(ember_f32_to_fp16(x[i] * scale * w[i]));
}

#endif

/*
 * gemv.cuh - the decode matrix-vector product (one token): y = W x for up to three weight
 * matrices in one launch (Q, K and V share the input), with the input RMSNorm and the output
 * epilogue (store, residual add, SwiGLU of a gate/up pair, LM head with greedy argmax) fused.
 * Weights are either tiled (layout.cuh, mma.sync variant) or raw GGUF rows (simple variant).
 * With args.streaming != 0 a one-wave grid of CTAs streams their row tiles through
 * never-draining rings (gemv_stream.cu); otherwise one CTA walks all of K for its 16 rows (gemv.cu).
 * Plain C declarations: the backend's .c files include this.
 */
#ifndef EMBER_KERNELS_GEMV_CUH
#define EMBER_KERNELS_GEMV_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ember_gemv_in {
	EMBER_GEMV_IN_F16 = 0, /* x: fp16 [k] */
	EMBER_GEMV_IN_RMS = 1  /* x: fp32 [k] residual; the kernel applies RMSNorm(x) * norm_w first */
};

enum ember_gemv_epi {
	EMBER_GEMV_STORE = 0,  /* seg.out[row] = y (fp32) */
	EMBER_GEMV_RESID = 1,  /* seg.out[row] += y (fp32 residual stream) */
	EMBER_GEMV_SWIGLU = 2, /* two segments, gate and up, same rows: out_h[row] = fp16(silu(g) * u) */
	EMBER_GEMV_ARGMAX = 3  /* seg.out[row] = y, then the greedy argmax over all rows (see state) */
};

/* Device-side decode state: read and advanced by the kernels, so one CUDA graph replays for
 * every step (the host never patches arguments between steps). */
struct ember_decode_state {
	int32_t token;           /* token fed at the next step */
	int32_t pos;             /* its position */
	int32_t step;            /* index into the greedy output array for the next result */
	uint32_t done;           /* LM-head CTAs finished this step (last one finalizes) */
	unsigned long long best; /* packed max: orderable logit bits << 32 | (0xffffffff - id) */
};

struct ember_gemv_seg {
	const void *w;  /* tiled weights (layout.cuh) when tiled, else raw GGUF rows; device memory */
	int type;       /* ggml type code: Q8_0, Q4_K, Q6_K (tiled or raw), F16, BF16, F32 (raw) */
	int tiled;      /* 1 when w is in the tiled layout */
	int rows;       /* output rows */
	float *out;     /* STORE/RESID/ARGMAX output [rows] (device) */
};

struct ember_gemv_args {
	struct ember_gemv_seg seg[3];
	int n_seg;                        /* 1..3 (SWIGLU: exactly 2, gate then up) */
	int k;                            /* input length (columns of every segment) */
	int in_mode;                      /* enum ember_gemv_in */
	const void *x;                    /* fp16 [k] or fp32 [k] (device) */
	const float *norm_w;              /* IN_RMS: fp32 [k] */
	float eps;                        /* IN_RMS epsilon */
	int epi;                          /* enum ember_gemv_epi */
	void *out_h;                      /* SWIGLU: fp16 [rows] */
	struct ember_decode_state *state; /* ARGMAX: advanced by the last CTA */
	int32_t *out_tokens;              /* ARGMAX: greedy results, written at state->step */
	int out_tokens_cap;               /* entries in out_tokens */
	int pdl;                          /* 1: launch as a programmatic dependent of the previous kernel
	                                     (weights stream in while that kernel finishes; EMBER_PDL) */
	/* filled in by ember_gemv: */
	int n_tiles;                      /* row tiles to compute (SWIGLU: of one segment) */
	int ring_bytes;                   /* shared-memory ring for the streamed tiles */
	/* streaming kernel (gemv_stream.cu); all zero = the plain kernel (gemv.cu): */
	int streaming;                    /* 1 = at most one wave of CTAs, each staging the input once and
	                                     streaming all its row tiles through one never-draining ring
	                                     (tiled weights only; a launch with raw segments runs the plain
	                                     kernel); the backend's default (EMBER_GEMV_STREAM) */
	int stream_warps;                 /* warps per CTA: 4 or 8 (0 = 8) */
	int stream_ring;                  /* ring depth in rounds of stream_warps tiles, 2..8 (0 = 3);
	                                     lowered to what shared memory holds */
	int stream_ctas;                  /* at most this many CTAs per SM (0 = as many as fit) */
};

/* Launches the GEMV on `stream`. Returns 0 or a negative ember error (shapes are checked).
 * Deterministic: the same inputs give bit-identical outputs on every run (fixed summation order). */
int ember_gemv(const struct ember_gemv_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

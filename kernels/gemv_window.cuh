/*
 * gemv_window.cuh - the verify-window GEMV (speculative decoding): y_t = W x_t for up to 16
 * tokens t in one pass over the weights, each token's row sums bit-identical to the decode GEMV
 * (gemv.cuh) on that token alone: same staged fp16 input, same tile cores, same split of K over
 * warps and the same order of every addition (the mma's B columns carry the tokens).
 * Ownership: every pointer in the args is the caller's (device memory it allocated).
 * Plain C declarations: the backend's .c files include this.
 */
#ifndef EMBER_KERNELS_GEMV_WINDOW_CUH
#define EMBER_KERNELS_GEMV_WINDOW_CUH

#include <stdint.h>
#include <cuda_runtime_api.h>

#include "gemv.cuh"

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_WINDOW_MAX 16

struct ember_gemv_win_args {
	struct ember_gemv_args g; /* as the decode step fills it, pointers at token 0's rows; epilogue
	                             ARGMAX stores the logits only (argmax.cuh ember_argmax_keys picks the tokens) */
	int n_tok;                /* 1..EMBER_WINDOW_MAX tokens */
	int ld_x;                 /* elements between the tokens' input rows (g.x) */
	int ld_out;               /* elements between the tokens' output rows (every seg.out) */
	int ld_h;                 /* SWIGLU: elements between the tokens' out_h rows */
	void *xs;                 /* scratch: fp16 [EMBER_WINDOW_MAX][k rounded up to 256] */
	float *sx;                /* scratch: [EMBER_WINDOW_MAX][that / 16] */
	/* The chain split (EMBER_WIN_SPLIT): when the tokens' whole inputs do not fit one CTA next to
	 * the ring, the decode's W K chains are split over groups of CTAs, each staging only its chains'
	 * K tiles; the chains' sums meet in `part` and the last CTA of a row tile adds them in the
	 * decode's order. */
	int split;                /* 0: never (passes of fewer tokens instead); 1: when the tokens do not
	                             fit one pass; 2: always, where the scratch holds the launch */
	int split_warps;          /* warps per CTA of the split kernel: 8 or 12 */
	float *part;              /* scratch: [part_jobs][W][EMBER_WINDOW_MAX][16] chain sums */
	uint32_t *cnt;            /* scratch: [part_jobs] arrival counters, zero between launches */
	int part_jobs;            /* row tiles (SWIGLU: twice them) the scratch holds; 0 = no split */
};

/* Warps over which the decode GEMV splits K for these args (the reduction order the window must
 * reproduce): 4 or 8; 0 when the window has no bit-identical kernel for them (a raw segment).
 * *out is set; returns 0 or a negative ember error. */
int ember_gemv_window_warps(int *out, const struct ember_gemv_args *g);

/* Launches the window GEMV on `stream` (the input staging, then one or more passes over the
 * weights, each for as many tokens as shared memory holds). 0 or a negative ember error. */
int ember_gemv_window(const struct ember_gemv_win_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

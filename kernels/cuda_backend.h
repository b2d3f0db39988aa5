/*
 * cuda_backend.h - internal state of ember's CUDA backend, shared by cuda_backend.c (create,
 * weights, memory, ops table), cuda_run.c (the decode step, its CUDA graph, the batched prefill,
 * the verify window) and cuda_draft.c (the DFlash draft ops). Not a public header: the engine
 * sees only ember_backend_cuda_ops (backend.h).
 */
#ifndef EMBER_CUDA_BACKEND_H
#define EMBER_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "gemv.cuh"

/* Run-time switches, read once from EMBER_* environment variables at create (kernels/README.md). */
struct cuda_options {
	int graphs;        /* EMBER_GRAPHS: replay the decode step as one CUDA graph (default 1) */
	int gemv_mma;      /* EMBER_GEMV=mma|simple: tiled tensor-core GEMV or raw-row scalar GEMV */
	int attn_split;    /* EMBER_ATTN_SPLIT: KV splits per head in decode attention (0 = auto) */
	int attn_lean;     /* EMBER_ATTN_LEAN: lower-latency decode attention kernel (default 1) */
	int attn_pdl;      /* EMBER_ATTN_PDL: lean attention as a programmatic dependent launch (default 0) */
	int fa_mma;        /* EMBER_FA=mma|simple: prefill flash attention on tensor cores, or the
	                      split-KV kernel run per query token */
	int prefill_chunk; /* EMBER_PREFILL_CHUNK: tokens per prefill pass (default 4096) */
	int pdl;           /* EMBER_PDL: decode GEMVs as programmatic dependent launches (default 1) */
	int gemv_stream;   /* EMBER_GEMV_STREAM: one-wave streaming GEMV (gemv_stream.cu), default 1 */
	int gemv_warps;    /* EMBER_GEMV_WARPS: its warps per CTA, 4 or 8 (default 8) */
	int gemv_ring;     /* EMBER_GEMV_RING: its ring depth in rounds, 2..8 (default 3) */
	int gemv_ctas;     /* EMBER_GEMV_CTAS: its CTAs per SM at most (0 = as many as fit) */
	int verify;        /* EMBER_VERIFY: all-rows forwards of 2..16 tokens run the verify window,
	                      bit-identical to decode steps (default 1); 0 = the batched prefill */
	int win_split;     /* EMBER_WIN_SPLIT: the window GEMV's chain split over CTAs: 1 (default) when
	                      the tokens do not fit one pass, 2 always (not the LM head), 0 never */
	int win_pdl;       /* EMBER_WIN_PDL: window GEMV and staging kernels (target window and q8 draft) as
	                      programmatic dependent launches, 1; default 0 (measured slower) */
	int win_warps;     /* EMBER_WIN_WARPS: warps per CTA of the split kernel, 8 (default) or 12 */
	int win_shared;    /* EMBER_WIN_ATTN=shared|token: the window attention's CTAs of 4 tokens sharing
	                      each staged K/V round (default), or one CTA per token; the same bits */
	int gemm_bucket;   /* EMBER_GEMM_BUCKET: prefill GEMM row counts rounded up to a multiple of this
	                      (default 64; 0 or 1 = the exact count), so few shapes exist */
	int draft_block_attn; /* EMBER_DRAFT_ATTN=block|window: the DFlash draft block's attention on
	                      attn_block.cu (default) or the verify window's lean kernel, non-causal */
	int draft_q8;      /* EMBER_DRAFT_WEIGHTS=q8|f16: the DFlash draft's block pass on int8 Q8R copies of
	                      its weights and of the LM head through the window GEMV (1), or on cuBLAS fp16
	                      GEMMs (0); unset (2): q8 when the block fits the window (<= 16 tokens) */
	int prefill_warm;  /* EMBER_PREFILL_WARM: run every bucketed GEMM shape and one full chunk at
	                      create, so no request pays cuBLAS's first use of a shape (default 1) */
};

/* The row count a GEMM over n rows runs with: n rounded up to the bucket, within the cap rows its
 * buffers hold (n itself when it does not fit or is 1). */
static inline int cuda_gemm_rows(int bucket, int n, int cap)
{
	if (bucket <= 1 || n <= 1)
		return n;
	const int r = (n + bucket - 1) / bucket * bucket;
	return r <= cap ? r : (n > cap ? n : cap);
}

/* One weight matrix as the GPU keeps it. */
struct cuda_matrix {
	int type;          /* ggml type code of the GGUF tensor */
	int rows, cols;
	void *dec;         /* decode copy: tiled (layout.cuh) when dec_tiled, else the raw GGUF rows */
	int dec_tiled;
	size_t dec_bytes;
};

struct cuda_layer {
	struct cuda_matrix q, k, v, o, gate, up, down;
	float *attn_norm, *ffn_norm, *q_norm, *k_norm; /* fp32 on the device */
	void *f16_qkv;     /* prefill copies, fp16: [(n_head + 2 n_kv) hd][n_embd] */
	void *f16_o;       /* [n_embd][n_head hd] */
	void *f16_gu;      /* [2 n_ff][n_embd]: gate rows, then up rows */
	void *f16_down;    /* [n_embd][n_ff] */
};

struct ember_backend {
	const struct ember_model *model;
	struct ember_hparams hp;
	struct cuda_options opt;
	int device, n_sm;
	char device_name[320];
	cudaStream_t stream;
	void *cublas;

	struct cuda_layer *layers;
	struct cuda_matrix head;     /* LM head (token_embd when tied) */
	void *f16_head;              /* [n_vocab][n_embd] */
	void *embd_raw;              /* raw token_embd rows for the lookup */
	int embd_type;
	float *output_norm;

	int n_ctx, cur_len;
	void *kv;                    /* fp16 [n_layer][2][n_kv][n_ctx][hd] */
	float *rope_cos, *rope_sin;  /* [n_ctx][hd/2] */

	/* decode step */
	struct ember_decode_state *state, *h_state; /* device, pinned host staging */
	int32_t *out_tokens;         /* [n_ctx] greedy results */
	float *x, *qkv, *logits;     /* residual [n_embd], projections, logits [n_vocab] */
	void *attn, *ffh;            /* fp16 [n_head hd], fp16 [n_ff] */
	float *part_o, *part_ml;
	uint32_t *counters;
	int n_split;
	cudaGraphExec_t graph;
	int graph_warm;             /* one plain step has run (kernels loaded) */

	/* prefill chunk */
	int chunk, logit_rows;
	int32_t *p_tokens, *p_argmax;
	float *p_x, *p_qkv, *p_gu, *p_logits;
	void *p_xn, *p_q, *p_attn, *p_h;

	/* verify window (speculative decoding: 2..EMBER_WINDOW_MAX tokens, bit-identical to decode) */
	int win_ok;                  /* the window kernels reproduce this decode configuration */
	struct ember_decode_state *w_state; /* device: pos = the window's first position */
	struct cuda_win_host *w_host; /* pinned: state + tokens staging */
	int32_t *w_tokens, *w_argmax;
	float *w_x, *w_qkv, *w_logits, *w_sx, *w_part_o, *w_part_ml;
	void *w_attn, *w_ffh, *w_xs;
	uint32_t *w_counters;
	float *w_split_part;         /* the window GEMV's chain sums (gemv_window.cuh part) */
	uint32_t *w_split_cnt;       /* its arrival counters, zeroed at create */
	int w_split_jobs;
	cudaGraphExec_t w_graph[17];
	int w_warm[17];

	/* hidden-state capture (config capture_layers): [cap_rows][n_capture][n_embd] fp32 */
	int n_capture, cap_rows, cap_n, cap_pos;
	int *cap_slot;               /* [n_layer]: slot of layer l in the capture, or -1 */
	float *cap;

	size_t bytes_weights, bytes_f16, bytes_kv, bytes_scratch;

	struct cuda_draft *draft;    /* the attached DFlash draft (cuda_draft.c), or NULL */
};

struct cuda_win_host {
	struct ember_decode_state state;
	int32_t tokens[16];
};

/* Captured hidden states of the latest forward (prefill: its last chunk; decode_greedy: its last
 * step): *dev = [*n_rows][n_capture][n_embd] fp32 on the device, the row r at position *pos0 + r.
 * Borrowed; valid until the next forward or destroy. 0, or EMBER_ERROR when capture is off. */
int ember_cuda_captured(struct ember_backend *be, const float **dev, int *n_rows, int *pos0);
/* The same rows copied to host dst (room for max_rows rows of n_capture * n_embd floats). */
int ember_cuda_captured_read(struct ember_backend *be, float *dst, int max_rows, int *n_rows, int *pos0);

/* cuda_draft.c: the DFlash draft ops of backend.h on the device (contracts there). attach
 * uploads the draft (fp16 weights, its own context K/V for n_ctx + block positions); commit
 * reads the capture buffer above on the device; propose runs the block pass as a CUDA graph. */
struct cuda_draft;
int ember_cuda_draft_attach(struct ember_backend *be, const struct ember_draft *draft);
int ember_cuda_draft_commit(struct ember_backend *be, int pos, int n_rows);
int ember_cuda_draft_propose(struct ember_backend *be, int32_t last_token, int pos, int depth, int32_t *out,
                             float *logits);
void ember_cuda_draft_free(struct cuda_draft *dr);

/* cuda_run.c */
int ember_cuda_forward(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos, int all_rows,
                       float *logits, int32_t *argmax);
int ember_cuda_decode_greedy(struct ember_backend *be, int32_t token, int pos, int n_steps, int32_t *out_tokens);
/* The create-time warm-up of the prefill (EMBER_PREFILL_WARM): each bucketed GEMM shape once and
 * one full chunk through the layers; leaves the cache empty. */
int ember_cuda_prefill_warm(struct ember_backend *be);

#endif

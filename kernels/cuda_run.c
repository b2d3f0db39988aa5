/*
 * cuda_run.c - running the model on the GPU: the decode step (2 + 5 launches per layer: fused
 * RMSNorm+QKV GEMV, split-KV attention with q/k-norm, RoPE and the KV append, O GEMV + residual,
 * fused RMSNorm+gate/up GEMV+SwiGLU, down GEMV + residual, then the LM head with the greedy argmax),
 * captured once as a CUDA graph whose kernels read the token and position from device memory, so
 * a greedy run replays it with no host round trip per token; and the batched prefill (cuBLAS GEMMs
 * on fp16 weights, flash attention), chunked so long prompts fit.
 */
#include <stdlib.h>
#include <string.h>

#include "argmax.cuh"
#include "attn_decode.cuh"
#include "attn_prefill.cuh"
#include "attn_window.cuh"
#include "common.cuh"
#include "cuda_backend.h"
#include "embed.cuh"
#include "error.h"
#include "gemm.cuh"
#include "gemv.cuh"
#include "gemv_window.cuh"
#include "rows.cuh"

static struct ember_gemv_seg seg_of(const struct cuda_matrix *m, float *out)
{
	struct ember_gemv_seg s = {m->dec, m->type, m->dec_tiled, m->rows, out};
	return s;
}

/* A decode GEMV over k columns of x: fp16, or fp32 that the kernel RMS-normalizes with norm_w when
 * norm_w is not NULL; epilogue epi; and what every launch of the step shares: EMBER_PDL and
 * EMBER_GEMV_STREAM with its shape. The caller adds the segments. */
static struct ember_gemv_args gemv_args(const struct ember_backend *be, int epi, const void *x, int k, const float *norm_w)
{
	struct ember_gemv_args g;
	memset(&g, 0, sizeof(g));
	g.epi = epi;
	g.x = x;
	g.k = k;
	g.in_mode = EMBER_GEMV_IN_F16;
	if (norm_w) {
		g.in_mode = EMBER_GEMV_IN_RMS;
		g.norm_w = norm_w;
		g.eps = be->hp.rms_eps;
	}
	g.pdl = be->opt.pdl;
	g.streaming = be->opt.gemv_stream;
	g.stream_warps = be->opt.gemv_warps;
	g.stream_ring = be->opt.gemv_ring;
	g.stream_ctas = be->opt.gemv_ctas;
	return g;
}

static void *layer_k(struct ember_backend *be, int l)
{
	const size_t per = (size_t)be->hp.n_head_kv * be->n_ctx * be->hp.head_dim * 2;
	return (char *)be->kv + (size_t)l * 2 * per;
}

static void *layer_v(struct ember_backend *be, int l)
{
	const size_t per = (size_t)be->hp.n_head_kv * be->n_ctx * be->hp.head_dim * 2;
	return (char *)be->kv + (size_t)l * 2 * per + per;
}

/* Attention over layer l's cache into `out`: the shapes both the decode step and the per-token
 * prefill fallback pass; the caller adds the mode's own fields. */
static struct ember_attn_args attn_args(struct ember_backend *be, int l, void *out)
{
	struct ember_attn_args a;
	memset(&a, 0, sizeof(a));
	a.head_dim = be->hp.head_dim;
	a.n_head = be->hp.n_head;
	a.n_kv = be->hp.n_head_kv;
	a.n_ctx = be->n_ctx;
	a.k_cache = layer_k(be, l);
	a.v_cache = layer_v(be, l);
	a.out = out;
	return a;
}

/* Hidden-state capture: layer l's residual output rows x[0..n) (n_embd floats apart) into the
 * capture's rows 0..n at layer l's slot. Nothing when capture is off or l is not captured. */
static int capture_rows(struct ember_backend *be, int l, const float *x, int n, cudaStream_t st)
{
	if (!be->n_capture || be->cap_slot[l] < 0)
		return 0;
	const size_t E = (size_t)be->hp.n_embd;
	CUDA_CHECK(cudaMemcpy2DAsync(be->cap + (size_t)be->cap_slot[l] * E, (size_t)be->n_capture * E * 4, x, E * 4, E * 4,
	                             (size_t)n, cudaMemcpyDeviceToDevice, st));
	return 0;
}

/* Enqueues one decode step on be->stream (used both plainly and under graph capture). */
static int decode_step_enqueue(struct ember_backend *be)
{
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
	cudaStream_t st = be->stream;
	int rc;

	if ((rc = ember_embed_rows(be->x, be->embd_type, be->embd_raw, hp->n_embd, hp->n_vocab, &be->state->token, 1, st)))
		return rc;
	for (int l = 0; l < hp->n_layer; l++) {
		struct cuda_layer *L = &be->layers[l];
		struct ember_gemv_args g = gemv_args(be, EMBER_GEMV_STORE, be->x, hp->n_embd, L->attn_norm);
		g.seg[0] = seg_of(&L->q, be->qkv);
		g.seg[1] = seg_of(&L->k, be->qkv + qd);
		g.seg[2] = seg_of(&L->v, be->qkv + qd + kvd);
		g.n_seg = 3;
		if ((rc = ember_gemv(&g, st)))
			return rc;

		struct ember_attn_args a = attn_args(be, l, be->attn);
		a.q = be->qkv;
		a.k = be->qkv + qd;
		a.v = be->qkv + qd + kvd;
		a.q_norm = L->q_norm;
		a.k_norm = L->k_norm;
		a.eps = hp->rms_eps;
		a.rope_cos = be->rope_cos;
		a.rope_sin = be->rope_sin;
		a.state = be->state;
		a.n_split = be->n_split;
		a.part_o = be->part_o;
		a.part_ml = be->part_ml;
		a.counters = be->counters;
		a.lean = be->opt.attn_lean;
		a.pdl = be->opt.attn_pdl;
		if ((rc = ember_attn_decode(&a, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_RESID, be->attn, qd, NULL);
		g.seg[0] = seg_of(&L->o, be->x);
		g.n_seg = 1;
		if ((rc = ember_gemv(&g, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_SWIGLU, be->x, hp->n_embd, L->ffn_norm);
		g.seg[0] = seg_of(&L->gate, NULL);
		g.seg[1] = seg_of(&L->up, NULL);
		g.n_seg = 2;
		g.out_h = be->ffh;
		if ((rc = ember_gemv(&g, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_RESID, be->ffh, hp->n_ff, NULL);
		g.seg[0] = seg_of(&L->down, be->x);
		g.n_seg = 1;
		if ((rc = ember_gemv(&g, st)) || (rc = capture_rows(be, l, be->x, 1, st)))
			return rc;
	}
	struct ember_gemv_args g = gemv_args(be, EMBER_GEMV_ARGMAX, be->x, hp->n_embd, be->output_norm);
	g.seg[0] = seg_of(&be->head, be->logits);
	g.n_seg = 1;
	g.state = be->state;
	g.out_tokens = be->out_tokens;
	g.out_tokens_cap = be->n_ctx;
	return ember_gemv(&g, st);
}

/* Runs one decode step: the captured graph when EMBER_GRAPHS allows, else plain launches. The
 * first call runs the step plainly once (module load, smem attributes), then captures. */
static int decode_step(struct ember_backend *be)
{
	if (!be->opt.graphs || !be->graph_warm) {
		be->graph_warm = 1;
		return decode_step_enqueue(be);
	}
	if (!be->graph) {
		cudaGraph_t graph = NULL;
		int rc;
		CUDA_CHECK(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeRelaxed));
		rc = decode_step_enqueue(be);
		cudaError_t end = cudaStreamEndCapture(be->stream, &graph);
		if (rc) {
			if (graph)
				cudaGraphDestroy(graph);
			return rc;
		}
		CUDA_CHECK(end);
		cudaError_t inst = cudaGraphInstantiate(&be->graph, graph, 0);
		cudaGraphDestroy(graph);
		if (inst != cudaSuccess)
			be->graph = NULL; /* not a handle cuda_destroy may pass to cudaGraphExecDestroy */
		CUDA_CHECK(inst);
	}
	CUDA_CHECK(cudaGraphLaunch(be->graph, be->stream));
	return 0;
}

static int set_state(struct ember_backend *be, int32_t token, int pos)
{
	memset(be->h_state, 0, sizeof(*be->h_state));
	be->h_state->token = token;
	be->h_state->pos = pos;
	CUDA_CHECK(cudaMemcpyAsync(be->state, be->h_state, sizeof(*be->h_state), cudaMemcpyHostToDevice, be->stream));
	return 0;
}

/* Final norm + LM head for `rows` rows of p_x starting at row `first` into p_logits/p_argmax,
 * then copied to the caller's arrays at row offset `dst_row`. */
static int prefill_logits(struct ember_backend *be, int first, int rows, float *logits, int32_t *argmax, int dst_row)
{
	const struct ember_hparams *hp = &be->hp;
	const int E = hp->n_embd, V = hp->n_vocab;
	int rc;
	for (int r0 = 0; r0 < rows; r0 += be->logit_rows) {
		const int n = rows - r0 < be->logit_rows ? rows - r0 : be->logit_rows;
		const int ng = cuda_gemm_rows(be->opt.gemm_bucket, n, be->logit_rows);
		if ((rc = ember_rmsnorm_rows(be->p_xn, be->p_x + (size_t)(first + r0) * E, be->output_norm, n, E, hp->rms_eps, be->stream)))
			return rc;
		if ((rc = ember_gemm_f16(be->cublas, be->f16_head, be->p_xn, be->p_logits, V, ng, E, V, 0.0f)))
			return rc;
		if (logits)
			CUDA_CHECK(cudaMemcpyAsync(logits + (size_t)(dst_row + r0) * V, be->p_logits, (size_t)n * V * 4,
			                           cudaMemcpyDeviceToHost, be->stream));
		if (argmax) {
			if ((rc = ember_argmax_rows(be->p_argmax, be->p_logits, n, V, be->stream)))
				return rc;
			CUDA_CHECK(cudaMemcpyAsync(argmax + dst_row + r0, be->p_argmax, (size_t)n * 4, cudaMemcpyDeviceToHost, be->stream));
		}
		/* p_logits is reused by the next sub-chunk: the copies above must finish first. */
		CUDA_CHECK(cudaStreamSynchronize(be->stream));
	}
	return 0;
}

/* One prefill chunk of n tokens at positions pos.. through all layers (residual left in p_x). The
 * GEMMs run over ng >= n rows (EMBER_GEMM_BUCKET): rows past n are scratch no later step reads. */
static int prefill_chunk(struct ember_backend *be, const int32_t *tokens, int n, int pos)
{
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd, E = hp->n_embd, F = hp->n_ff;
	const int ng = cuda_gemm_rows(be->opt.gemm_bucket, n, be->chunk);
	cudaStream_t st = be->stream;
	int rc;

	CUDA_CHECK(cudaMemcpyAsync(be->p_tokens, tokens, (size_t)n * 4, cudaMemcpyHostToDevice, st));
	if ((rc = ember_embed_rows(be->p_x, be->embd_type, be->embd_raw, E, hp->n_vocab, be->p_tokens, n, st)))
		return rc;
	for (int l = 0; l < hp->n_layer; l++) {
		struct cuda_layer *L = &be->layers[l];
		if ((rc = ember_rmsnorm_rows(be->p_xn, be->p_x, L->attn_norm, n, E, hp->rms_eps, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->f16_qkv, be->p_xn, be->p_qkv, qd + 2 * kvd, ng, E, qd + 2 * kvd, 0.0f)))
			return rc;
		struct ember_qk_rope_args r = {be->p_qkv, L->q_norm, L->k_norm, hp->rms_eps, be->rope_cos, be->rope_sin,
		                               n, pos, hp->n_head, hp->n_head_kv, hd, be->n_ctx, be->p_q,
		                               layer_k(be, l), layer_v(be, l), NULL};
		if ((rc = ember_qk_norm_rope_rows(&r, st)))
			return rc;
		if (be->opt.fa_mma) {
			struct ember_fa_args fa = {be->p_q, layer_k(be, l), layer_v(be, l), be->p_attn, n, pos,
			                           hp->n_head, hp->n_head_kv, be->n_ctx, hd};
			rc = ember_attn_prefill(&fa, st);
		} else {
			struct ember_attn_args a = attn_args(be, l, be->p_attn);
			a.q_prepped = be->p_q;
			a.n_tokens = n;
			a.pos0 = pos;
			rc = ember_attn_decode(&a, st);
		}
		if (rc)
			return rc;
		if ((rc = ember_gemm_f16(be->cublas, L->f16_o, be->p_attn, be->p_x, E, ng, qd, E, 1.0f)) ||
		    (rc = ember_rmsnorm_rows(be->p_xn, be->p_x, L->ffn_norm, n, E, hp->rms_eps, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->f16_gu, be->p_xn, be->p_gu, 2 * F, ng, E, 2 * F, 0.0f)) ||
		    (rc = ember_swiglu_rows(be->p_h, be->p_gu, n, F, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->f16_down, be->p_h, be->p_x, E, ng, F, E, 1.0f)) ||
		    (rc = capture_rows(be, l, be->p_x, n, st)))
			return rc;
	}
	return 0;
}

/* ---- the verify window ----
 * n tokens (2..EMBER_WINDOW_MAX) at positions w_state->pos.. as one pass per GEMV over the
 * weights (gemv_window.cu) and one attention launch per layer over all the rows (ember_attn_window),
 * each row bit-identical to the decode step at its position: the same fp16 staging, tile cores,
 * K split and summation order, the same attention split layout. Captured as one graph per n. */
static struct ember_gemv_win_args win_args(struct ember_backend *be, struct ember_gemv_args g, int n, int ld_x, int ld_out)
{
	struct ember_gemv_win_args w;
	memset(&w, 0, sizeof(w));
	w.g = g;
	w.g.pdl = be->opt.win_pdl;
	w.n_tok = n;
	w.ld_x = ld_x;
	w.ld_out = ld_out;
	w.ld_h = be->hp.n_ff;
	w.xs = be->w_xs;
	w.sx = be->w_sx;
	w.split = be->opt.win_split;
	w.split_warps = be->opt.win_warps;
	w.part = be->w_split_part;
	w.cnt = be->w_split_cnt;
	w.part_jobs = be->w_split_jobs;
	return w;
}

static int window_enqueue(struct ember_backend *be, int n)
{
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd, E = hp->n_embd, F = hp->n_ff;
	const int ldq = qd + 2 * kvd;
	cudaStream_t st = be->stream;
	int rc;

	if ((rc = ember_embed_rows(be->w_x, be->embd_type, be->embd_raw, E, hp->n_vocab, be->w_tokens, n, st)))
		return rc;
	for (int l = 0; l < hp->n_layer; l++) {
		struct cuda_layer *L = &be->layers[l];
		struct ember_gemv_args g = gemv_args(be, EMBER_GEMV_STORE, be->w_x, E, L->attn_norm);
		g.seg[0] = seg_of(&L->q, be->w_qkv);
		g.seg[1] = seg_of(&L->k, be->w_qkv + qd);
		g.seg[2] = seg_of(&L->v, be->w_qkv + qd + kvd);
		g.n_seg = 3;
		struct ember_gemv_win_args w = win_args(be, g, n, E, ldq);
		if ((rc = ember_gemv_window(&w, st)))
			return rc;

		struct ember_attn_args a = attn_args(be, l, be->w_attn);
		a.q = be->w_qkv;
		a.k = be->w_qkv + qd;
		a.v = be->w_qkv + qd + kvd;
		a.q_norm = L->q_norm;
		a.k_norm = L->k_norm;
		a.eps = hp->rms_eps;
		a.rope_cos = be->rope_cos;
		a.rope_sin = be->rope_sin;
		a.state = be->w_state;
		a.n_split = be->n_split;
		a.part_o = be->w_part_o;
		a.part_ml = be->w_part_ml;
		a.counters = be->w_counters;
		a.lean = 1;
		a.win_shared = be->opt.win_shared;
		if ((rc = ember_attn_window(&a, n, ldq, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_RESID, be->w_attn, qd, NULL);
		g.seg[0] = seg_of(&L->o, be->w_x);
		g.n_seg = 1;
		w = win_args(be, g, n, qd, E);
		if ((rc = ember_gemv_window(&w, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_SWIGLU, be->w_x, E, L->ffn_norm);
		g.seg[0] = seg_of(&L->gate, NULL);
		g.seg[1] = seg_of(&L->up, NULL);
		g.n_seg = 2;
		g.out_h = be->w_ffh;
		w = win_args(be, g, n, E, 0);
		if ((rc = ember_gemv_window(&w, st)))
			return rc;

		g = gemv_args(be, EMBER_GEMV_RESID, be->w_ffh, F, NULL);
		g.seg[0] = seg_of(&L->down, be->w_x);
		g.n_seg = 1;
		w = win_args(be, g, n, F, E);
		if ((rc = ember_gemv_window(&w, st)) || (rc = capture_rows(be, l, be->w_x, n, st)))
			return rc;
	}
	struct ember_gemv_args g = gemv_args(be, EMBER_GEMV_STORE, be->w_x, E, be->output_norm);
	g.seg[0] = seg_of(&be->head, be->w_logits);
	g.n_seg = 1;
	struct ember_gemv_win_args w = win_args(be, g, n, E, hp->n_vocab);
	if ((rc = ember_gemv_window(&w, st)))
		return rc;
	return ember_argmax_keys(be->w_argmax, be->w_logits, n, hp->n_vocab, hp->n_vocab, st);
}

/* One window of n tokens: plain launches the first time for each n, then its captured graph. */
static int window_run(struct ember_backend *be, int n)
{
	if (!be->opt.graphs || !be->w_warm[n]) {
		be->w_warm[n] = 1;
		return window_enqueue(be, n);
	}
	if (!be->w_graph[n]) {
		cudaGraph_t graph = NULL;
		int rc;
		CUDA_CHECK(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeRelaxed));
		rc = window_enqueue(be, n);
		cudaError_t end = cudaStreamEndCapture(be->stream, &graph);
		if (rc) {
			if (graph)
				cudaGraphDestroy(graph);
			return rc;
		}
		CUDA_CHECK(end);
		cudaError_t inst = cudaGraphInstantiate(&be->w_graph[n], graph, 0);
		cudaGraphDestroy(graph);
		if (inst != cudaSuccess)
			be->w_graph[n] = NULL;
		CUDA_CHECK(inst);
	}
	CUDA_CHECK(cudaGraphLaunch(be->w_graph[n], be->stream));
	return 0;
}

/* All-rows forward of 2..EMBER_WINDOW_MAX tokens, bit-identical to n decode steps: the window
 * kernels when they reproduce this configuration, else the decode step itself n times. */
static int window_forward(struct ember_backend *be, const int32_t *tokens, int n, int pos, float *logits, int32_t *argmax)
{
	const int V = be->hp.n_vocab;
	int rc;
	if (!be->win_ok) {
		for (int i = 0; i < n; i++) {
			if ((rc = set_state(be, tokens[i], pos + i)) || (rc = decode_step(be)))
				return rc;
			if (logits)
				CUDA_CHECK(cudaMemcpyAsync(logits + (size_t)i * V, be->logits, (size_t)V * 4, cudaMemcpyDeviceToHost, be->stream));
			if (argmax)
				CUDA_CHECK(cudaMemcpyAsync(argmax + i, &be->state->token, 4, cudaMemcpyDeviceToHost, be->stream));
			/* the next set_state reuses the pinned staging; cap rows of a step land in row 0 */
			CUDA_CHECK(cudaStreamSynchronize(be->stream));
		}
		be->cap_n = 1;
		be->cap_pos = pos + n - 1;
		return 0;
	}
	memset(be->w_host, 0, sizeof(*be->w_host));
	be->w_host->state.pos = pos;
	memcpy(be->w_host->tokens, tokens, (size_t)n * 4);
	CUDA_CHECK(cudaMemcpyAsync(be->w_state, &be->w_host->state, sizeof(be->w_host->state), cudaMemcpyHostToDevice, be->stream));
	CUDA_CHECK(cudaMemcpyAsync(be->w_tokens, be->w_host->tokens, (size_t)n * 4, cudaMemcpyHostToDevice, be->stream));
	if ((rc = window_run(be, n)))
		return rc;
	if (logits)
		CUDA_CHECK(cudaMemcpyAsync(logits, be->w_logits, (size_t)n * V * 4, cudaMemcpyDeviceToHost, be->stream));
	if (argmax)
		CUDA_CHECK(cudaMemcpyAsync(argmax, be->w_argmax, (size_t)n * 4, cudaMemcpyDeviceToHost, be->stream));
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	be->cap_n = n;
	be->cap_pos = pos;
	return 0;
}

int ember_cuda_captured(struct ember_backend *be, const float **dev, int *n_rows, int *pos0)
{
	if (!be || !be->n_capture)
		return ember_error_set(EMBER_ERROR, "cuda backend: hidden-state capture is off (config n_capture = 0)");
	if (dev)
		*dev = be->cap;
	if (n_rows)
		*n_rows = be->cap_n;
	if (pos0)
		*pos0 = be->cap_pos;
	return 0;
}

int ember_cuda_captured_read(struct ember_backend *be, float *dst, int max_rows, int *n_rows, int *pos0)
{
	int rc, n = 0;
	if ((rc = ember_cuda_captured(be, NULL, &n, pos0)))
		return rc;
	if (!dst || n > max_rows)
		return ember_error_set(EMBER_ERROR, "cuda backend: %d captured rows do not fit %d", n, max_rows);
	CUDA_CHECK(cudaMemcpyAsync(dst, be->cap, (size_t)n * be->n_capture * be->hp.n_embd * 4, cudaMemcpyDeviceToHost, be->stream));
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	if (n_rows)
		*n_rows = n;
	return 0;
}

int ember_cuda_forward(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos, int all_rows,
                       float *logits, int32_t *argmax)
{
	int rc;
	if (!be || !tokens || n_tokens < 1 || pos < 0 || pos > be->cur_len || n_tokens > be->n_ctx - pos)
		return ember_error_set(EMBER_ERROR, "cuda forward: %d tokens at position %d do not fit (cache holds %d of %d)",
		                       n_tokens, pos, be ? be->cur_len : 0, be ? be->n_ctx : 0);
	for (int i = 0; i < n_tokens; i++)
		if (tokens[i] < 0 || tokens[i] >= be->hp.n_vocab)
			return ember_error_set(EMBER_ERROR, "cuda forward: token %d at index %d is outside the vocabulary (%d)",
			                       tokens[i], i, be->hp.n_vocab);
	if (n_tokens == 1) {
		if ((rc = set_state(be, tokens[0], pos)) || (rc = decode_step(be)))
			return rc;
		if (logits)
			CUDA_CHECK(cudaMemcpyAsync(logits, be->logits, (size_t)be->hp.n_vocab * 4, cudaMemcpyDeviceToHost, be->stream));
		if (argmax)
			CUDA_CHECK(cudaMemcpyAsync(argmax, &be->state->token, 4, cudaMemcpyDeviceToHost, be->stream));
		CUDA_CHECK(cudaStreamSynchronize(be->stream));
		be->cur_len = pos + 1;
		be->cap_n = 1;
		be->cap_pos = pos;
		return 0;
	}
	be->cur_len = pos; /* positions >= pos are being overwritten */
	if (all_rows && n_tokens <= EMBER_WINDOW_MAX && be->opt.verify) {
		if ((rc = window_forward(be, tokens, n_tokens, pos, logits, argmax)))
			return rc;
		be->cur_len = pos + n_tokens;
		return 0;
	}
	for (int c0 = 0; c0 < n_tokens; c0 += be->chunk) {
		const int n = n_tokens - c0 < be->chunk ? n_tokens - c0 : be->chunk;
		if ((rc = prefill_chunk(be, tokens + c0, n, pos + c0)))
			return rc;
		be->cap_n = n;
		be->cap_pos = pos + c0;
		if (all_rows && (logits || argmax)) {
			if ((rc = prefill_logits(be, 0, n, logits, argmax, c0)))
				return rc;
		} else if (c0 + n == n_tokens && (logits || argmax)) {
			if ((rc = prefill_logits(be, n - 1, 1, logits, argmax, 0)))
				return rc;
		}
	}
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	be->cur_len = pos + n_tokens;
	return 0;
}

int ember_cuda_decode_greedy(struct ember_backend *be, int32_t token, int pos, int n_steps, int32_t *out_tokens)
{
	int rc;
	if (!be || !out_tokens || n_steps < 1 || pos < 0 || pos > be->cur_len || n_steps > be->n_ctx - pos)
		return ember_error_set(EMBER_ERROR, "cuda decode: %d steps at position %d do not fit (cache holds %d of %d)",
		                       n_steps, pos, be ? be->cur_len : 0, be ? be->n_ctx : 0);
	if (token < 0 || token >= be->hp.n_vocab)
		return ember_error_set(EMBER_ERROR, "cuda decode: token %d is outside the vocabulary (%d)", token, be->hp.n_vocab);
	if ((rc = set_state(be, token, pos)))
		return rc;
	for (int i = 0; i < n_steps; i++)
		if ((rc = decode_step(be)))
			return rc;
	CUDA_CHECK(cudaMemcpyAsync(out_tokens, be->out_tokens, (size_t)n_steps * 4, cudaMemcpyDeviceToHost, be->stream));
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	be->cur_len = pos + n_steps;
	be->cap_n = 1;
	be->cap_pos = pos + n_steps - 1;
	return 0;
}

/* ---- the create-time prefill warm-up ----
 * cuBLAS chooses (and loads) a GEMM algorithm the first time it sees a shape: +7-11 ms on the
 * first request of each new prompt length on an H200 (kernels/NOTES.md). With bucketed row counts
 * the shapes are few, so every one runs here once, on the zeroed chunk buffers: the four layer
 * shapes at each bucket up to the chunk and at one row, the LM head at each bucket up to its row
 * block and at one row. Then one full chunk runs through the layers, for what a first long chunk
 * costs beyond its GEMMs (seen at 4096 tokens with cuBLAS's cache off; whether this part is needed
 * once every GEMM shape has run was not measured apart). The residual rows it leaves
 * are scratch; the KV cache it wrote is past cur_len = 0. */
int ember_cuda_prefill_warm(struct ember_backend *be)
{
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd, E = hp->n_embd, F = hp->n_ff;
	const int V = hp->n_vocab, b = be->opt.gemm_bucket;
	int32_t *tokens = NULL;
	int error = 0;
	if (!be->opt.prefill_warm || b <= 1 || hp->n_layer < 1)
		return 0;
	const struct cuda_layer *L = &be->layers[0];
	for (int n = 1;; n = n == 1 ? b : n + b) {
		const int ng = n < be->chunk ? n : be->chunk;
		if ((error = ember_gemm_f16(be->cublas, L->f16_qkv, be->p_xn, be->p_qkv, qd + 2 * kvd, ng, E, qd + 2 * kvd, 0.0f)) ||
		    (error = ember_gemm_f16(be->cublas, L->f16_o, be->p_attn, be->p_x, E, ng, qd, E, 1.0f)) ||
		    (error = ember_gemm_f16(be->cublas, L->f16_gu, be->p_xn, be->p_gu, 2 * F, ng, E, 2 * F, 0.0f)) ||
		    (error = ember_gemm_f16(be->cublas, L->f16_down, be->p_h, be->p_x, E, ng, F, E, 1.0f)))
			goto cleanup;
		if (ng <= be->logit_rows &&
		    (error = ember_gemm_f16(be->cublas, be->f16_head, be->p_xn, be->p_logits, V,
		                         cuda_gemm_rows(b, ng, be->logit_rows), E, V, 0.0f)))
			goto cleanup;
		if (ng == be->chunk)
			break;
	}
	tokens = calloc((size_t)be->chunk, sizeof(*tokens));
	if (!tokens) {
		error = ember_error_set(EMBER_ENOMEM, "cuda prefill warm-up: out of host memory");
		goto cleanup;
	}
	if ((error = prefill_chunk(be, tokens, be->chunk, 0)))
		goto cleanup;
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->p_x, 0, (size_t)be->chunk * E * 4, be->stream));
	CUDA_CHECK_GOTO(cudaStreamSynchronize(be->stream));
	be->cur_len = 0;
	be->cap_n = 0;
	be->cap_pos = 0;
cleanup:
	free(tokens);
	return error;
}

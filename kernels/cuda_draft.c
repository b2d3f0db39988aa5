/*
 * cuda_draft.c - the DFlash draft ops of the CUDA backend (backend.h: draft_attach, draft_commit,
 * draft_propose). The draft runs on cuBLAS fp16 GEMMs over its weights dequantized at attach (as
 * the prefill does) for the context commit, while its block pass runs the verify window's GEMV
 * (gemv_window.cu) over int8 Q8R copies of its layers and of the LM head, about half the bytes of
 * fp16 (EMBER_DRAFT_WEIGHTS=q8, the default for blocks of up to 16 tokens), or cuBLAS fp16 GEMMs
 * over the fp16 weights (=f16). Its context K/V is an fp16 cache of the
 * target's layout, and the block's
 * attention is attn_block.cu's tensor-core kernel (EMBER_DRAFT_ATTN=block, the default: K/V read
 * once per KV head for the whole block) or the verify window's lean kernel in its non-causal mode
 * (=window, and for head dims the block kernel lacks). Hidden states never leave
 * the device: commit reads the backend's capture buffer. The block pass is one CUDA graph, reused
 * at every context length (the position is read from device memory by the kernels).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.cuh"
#include "attn_block.cuh"
#include "attn_decode.cuh"
#include "attn_window.cuh"
#include "common.cuh"
#include "cuda_backend.h"
#include "draft.h"
#include "embed.cuh"
#include "error.h"
#include "gemm.cuh"
#include "gemv_window.cuh"
#include "layout.cuh"
#include "repack.cuh"
#include "rows.cuh"

#define DRAFT_COMMIT_ROWS 256 /* context positions turned into draft K/V per pass */

struct cuda_draft_layer {
	float *attn_norm, *ffn_norm, *q_norm, *k_norm; /* fp32 */
	void *qkv;  /* fp16 [(n_head + 2 n_kv) hd][n_embd]: q rows, k rows, v rows */
	void *o;    /* fp16 [n_embd][n_head hd] */
	void *gu;   /* fp16 [2 n_ff][n_embd]: gate rows, then up rows */
	void *down; /* fp16 [n_embd][n_ff] */
	/* EMBER_DRAFT_WEIGHTS=q8: Q8R tiles of qkv, o, gate then up, down (o, gu, down fp16 freed) */
	void *qkv8, *o8, *gu8, *down8;
};

/* Device staging of one block pass: the window state (pos = the block's first position) and the
 * block's tokens [last, MASK x (B - 1)], copied in one transfer from the pinned twin. */
struct cuda_draft_io {
	struct ember_decode_state state;
	int32_t tokens[EMBER_DRAFT_MAX_BLOCK];
};

struct cuda_draft {
	const struct ember_draft *d;
	struct ember_hparams hp;
	int B, q_dim, kv_dim, cap, n_split, rows; /* cap: cache positions (n_ctx + B); rows: scratch rows */
	int ctx_len;                   /* committed context positions */
	struct cuda_draft_layer *layers;
	void *fc;                      /* fp16 [n_embd][n_capture n_embd] */
	float *hidden_norm, *output_norm;
	const void *embd;              /* raw token_embd rows (own_embd: the draft's upload, else the target's) */
	int embd_type, own_embd;
	const void *head;              /* fp16 [n_vocab][n_embd] (own_head: the draft's, else the target's) */
	int own_head;
	void *kv;                      /* fp16 [n_layer][2][n_kv][cap][hd] */
	float *rope_cos, *rope_sin;    /* [cap][hd / 2], the draft's theta */
	struct cuda_draft_io *io, *h_io; /* device, pinned host */
	float *x, *qkv, *gu, *logits;  /* [rows][n_embd], [rows][q + 2 kv], [B][2 n_ff], [B - 1][n_vocab] */
	void *xn, *attn, *h, *feat16, *q_scratch; /* fp16 [rows][n_embd], [B][q], [B][n_ff], [rows][n_cap n_embd], [rows][q] */
	float *part_o, *part_ml;       /* [B][n_kv][n_split][group][hd], [..][2] */
	uint32_t *counters;            /* [B][n_kv], zero */
	int block_attn, blk_split;     /* the block kernel (attn_block.cu) and its key splits */
	int win_shared;                /* EMBER_WIN_ATTN for the window attention (EMBER_DRAFT_ATTN=window) */
	float *blk_o, *blk_ml;         /* its scratch */
	int32_t *argmax;               /* [B - 1] */
	int q8;                        /* EMBER_DRAFT_WEIGHTS=q8: the block pass on Q8R window GEMVs */
	void *head8;                   /* Q8R tiles of the LM head [n_vocab][n_embd] */
	void *w_xs;                    /* window GEMV scratch: fp16 [B][k_max rounded up to 256] */
	float *w_sx, *w_part;          /* [B][that / 16]; chain split sums [w_jobs][8][EMBER_WINDOW_MAX][16] */
	uint32_t *w_cnt;               /* [w_jobs] split arrival counters, zero between launches */
	int w_jobs;
	cudaGraphExec_t graph;
	int warm;
	size_t bytes;
};

#define GIB (1024.0 * 1024.0 * 1024.0)

static void *dalloc(struct cuda_draft *dr, size_t bytes, int *error)
{
	void *p = NULL;
	if (*error)
		return NULL;
	cudaError_t err = cudaMalloc(&p, bytes ? bytes : 16);
	if (err != cudaSuccess) {
		size_t free_b = 0, total_b = 0;
		(void)cudaGetLastError();
		cudaMemGetInfo(&free_b, &total_b);
		*error = ember_error_set(EMBER_ENOMEM, "cuda draft: cudaMalloc of %.3f GiB failed (%s) after %.2f GiB for the "
		                         "draft; %.2f GiB of %.2f GiB free", bytes / GIB, cudaGetErrorString(err),
		                         dr->bytes / GIB, free_b / GIB, total_b / GIB);
		return NULL;
	}
	dr->bytes += bytes;
	return p;
}

void ember_cuda_draft_free(struct cuda_draft *dr)
{
	if (!dr)
		return;
	if (dr->graph)
		cudaGraphExecDestroy(dr->graph);
	if (dr->layers) {
		for (int l = 0; l < dr->hp.n_layer; l++) {
			struct cuda_draft_layer *L = &dr->layers[l];
			void *ps[] = {L->attn_norm, L->ffn_norm, L->q_norm, L->k_norm, L->qkv, L->o, L->gu, L->down,
			              L->qkv8, L->o8, L->gu8, L->down8};
			for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
				cudaFree(ps[i]);
		}
		free(dr->layers);
	}
	if (dr->own_embd)
		cudaFree((void *)dr->embd);
	if (dr->own_head)
		cudaFree((void *)dr->head);
	void *bufs[] = {dr->fc, dr->hidden_norm, dr->output_norm, dr->kv, dr->rope_cos, dr->rope_sin, dr->io, dr->x,
	                dr->qkv, dr->gu, dr->logits, dr->xn, dr->attn, dr->h, dr->feat16, dr->q_scratch, dr->part_o,
	                dr->part_ml, dr->counters, dr->argmax, dr->blk_o, dr->blk_ml, dr->head8, dr->w_xs, dr->w_sx,
	                dr->w_part, dr->w_cnt};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		cudaFree(bufs[i]);
	if (dr->h_io)
		cudaFreeHost(dr->h_io);
	free(dr);
}

/* Raw tensor t through `staging` (device, >= t->nbytes) into fp16 rows at dst. */
static int upload_f16(struct ember_backend *be, void *dst, const struct ember_tensor *t, void *staging)
{
	int rc;
	CUDA_CHECK(cudaMemcpyAsync(staging, t->data, t->nbytes, cudaMemcpyHostToDevice, be->stream));
	if ((rc = ember_dequant_f16(dst, (int)t->type, staging, t->ne[1], t->ne[0], be->stream)))
		return ember_error_wrap(rc, "cuda draft: dequantizing %s", t->name);
	CUDA_CHECK(cudaStreamSynchronize(be->stream)); /* staging is reused by the next upload */
	return 0;
}

static float *upload_norm(struct cuda_draft *dr, struct ember_backend *be, const struct ember_tensor *t, int *error)
{
	if (*error)
		return NULL;
	if (t->type != EMBER_TYPE_F32 || !t->data) {
		*error = ember_error_set(EMBER_EUNSUPPORTED, "cuda draft: %s must be F32", t->name);
		return NULL;
	}
	float *p = dalloc(dr, t->nbytes, error);
	if (!p)
		return NULL;
	cudaError_t err = cudaMemcpyAsync(p, t->data, t->nbytes, cudaMemcpyHostToDevice, be->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(be->stream);
	if (err != cudaSuccess)
		*error = ember_cuda_fail(err, "cudaMemcpy(draft norm weights)", __FILE__, __LINE__);
	return p;
}

/* Q8R tiles of the fp16 rows src[rows][cols] into a new allocation; with free_src the fp16 copy
 * is released once the quantization has run (*src set to NULL). */
static void *quant_q8r(struct cuda_draft *dr, struct ember_backend *be, void **src, int64_t rows, int64_t cols,
                       int free_src, int *error)
{
	void *p = dalloc(dr, ember_quant_q8r_bytes(rows, cols), error);
	if (!p)
		return NULL;
	int rc = ember_quant_q8r(p, *src, rows, cols, be->stream);
	cudaError_t err = rc ? cudaSuccess : cudaStreamSynchronize(be->stream);
	if (rc || err != cudaSuccess) {
		*error = rc ? rc : ember_cuda_fail(err, "quantizing the draft's weights to Q8R", __FILE__, __LINE__);
		return p;
	}
	if (free_src) {
		cudaFree(*src);
		dr->bytes -= (size_t)rows * cols * 2;
		*src = NULL;
	}
	return p;
}

/* EMBER_DRAFT_WEIGHTS=q8: Q8R copies of every layer's matrices (qkv keeps its fp16 rows for the
 * context commit) and of the LM head, and the window GEMV's scratch for the block. */
static int attach_q8(struct cuda_draft *dr, struct ember_backend *be)
{
	const struct ember_hparams *hp = &dr->hp;
	const int E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab, qd = dr->q_dim, ldq = qd + 2 * dr->kv_dim;
	int error = 0;
	if (dr->B > EMBER_WINDOW_MAX)
		return ember_error_set(EMBER_EUNSUPPORTED, "EMBER_DRAFT_WEIGHTS=q8: the window GEMV takes at most %d tokens, "
		                       "the draft's block is %d", EMBER_WINDOW_MAX, dr->B);
	for (int l = 0; l < hp->n_layer && !error; l++) {
		struct cuda_draft_layer *L = &dr->layers[l];
		L->qkv8 = quant_q8r(dr, be, &L->qkv, ldq, E, 0, &error);
		L->o8 = quant_q8r(dr, be, &L->o, E, qd, 1, &error);
		L->down8 = quant_q8r(dr, be, &L->down, E, F, 1, &error);
		if (error)
			break;
		/* gate and up as two tile arrays (the SwiGLU epilogue's two segments) in one allocation */
		const size_t half = ember_quant_q8r_bytes(F, E);
		L->gu8 = dalloc(dr, 2 * half, &error);
		if (error || (error = ember_quant_q8r(L->gu8, L->gu, F, E, be->stream)) ||
		    (error = ember_quant_q8r((char *)L->gu8 + half, (const char *)L->gu + (size_t)F * E * 2, F, E, be->stream)))
			break;
		CUDA_CHECK(cudaStreamSynchronize(be->stream));
		cudaFree(L->gu);
		dr->bytes -= (size_t)2 * F * E * 2;
		L->gu = NULL;
	}
	if (error)
		return error;
	void *head = (void *)dr->head;
	dr->head8 = quant_q8r(dr, be, &head, V, E, dr->own_head, &error);
	if (error)
		return error;
	dr->head = head;
	if (dr->own_head && !head)
		dr->own_head = 0;
	int k_max = E > qd ? E : qd;
	k_max = F > k_max ? F : k_max;
	const size_t k_pad = (size_t)(k_max + 255) / 256 * 256;
	int jobs = (ldq + 15) / 16;
	jobs = (E + 15) / 16 > jobs ? (E + 15) / 16 : jobs;
	jobs = 2 * ((F + 15) / 16) > jobs ? 2 * ((F + 15) / 16) : jobs;
	jobs = (V + 15) / 16 > jobs ? (V + 15) / 16 : jobs; /* the LM head, for EMBER_WIN_SPLIT=2 */
	dr->w_jobs = jobs;
	dr->w_xs = dalloc(dr, (size_t)dr->B * k_pad * 2, &error);
	dr->w_sx = dalloc(dr, (size_t)dr->B * (k_pad / 16) * 4, &error);
	dr->w_part = dalloc(dr, (size_t)jobs * 8 * EMBER_WINDOW_MAX * 16 * 4, &error);
	dr->w_cnt = dalloc(dr, (size_t)jobs * 4, &error);
	if (error)
		return error;
	CUDA_CHECK(cudaMemsetAsync(dr->w_cnt, 0, (size_t)jobs * 4, be->stream));
	dr->q8 = 1;
	return 0;
}

static int check_draft(const struct ember_backend *be, const struct ember_draft *d)
{
	const struct ember_hparams *hp = &d->hp;
	if (hp->n_embd != be->hp.n_embd || hp->n_vocab != be->hp.n_vocab || be->n_capture != d->n_target_layers)
		return ember_error_set(EMBER_ERROR, "draft does not fit this backend: n_embd %d/%d, n_vocab %d/%d, and the "
		                       "backend must capture the draft's %d target layers", hp->n_embd, be->hp.n_embd,
		                       hp->n_vocab, be->hp.n_vocab, d->n_target_layers);
	for (int i = 0; i < d->n_target_layers; i++)
		if (be->cap_slot[d->target_layers[i]] != i)
			return ember_error_set(EMBER_ERROR, "draft does not fit this backend: it must capture the draft's target "
			                       "layers in the draft's order (layer %d at slot %d)", d->target_layers[i], i);
	if (hp->head_dim != 64 && hp->head_dim != 128)
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda draft: head_dim %d not supported (64 or 128)", hp->head_dim);
	const int group = hp->n_head_kv > 0 ? hp->n_head / hp->n_head_kv : 0;
	if (group < 1 || hp->n_head % hp->n_head_kv || (group != 1 && group != 2 && group != 4 && group != 8))
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda draft: GQA group %d/%d not supported (1, 2, 4, 8)",
		                       hp->n_head, hp->n_head_kv);
	if (d->block_size < 2 || d->block_size > EMBER_DRAFT_MAX_BLOCK)
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda draft: block size %d outside 2..%d", d->block_size,
		                       EMBER_DRAFT_MAX_BLOCK);
	if (d->fc.ne[0] != (int64_t)d->n_target_layers * hp->n_embd || d->fc.ne[1] != hp->n_embd)
		return ember_error_set(EMBER_EFORMAT, "cuda draft: fc is %lld x %lld, want %d x %d", (long long)d->fc.ne[0],
		                       (long long)d->fc.ne[1], d->n_target_layers * hp->n_embd, hp->n_embd);
	return 0;
}

int ember_cuda_draft_attach(struct ember_backend *be, const struct ember_draft *d)
{
	struct cuda_draft *dr = NULL;
	void *staging = NULL;
	float *c = NULL, *s = NULL;
	int error = 0;
	if (be->draft)
		return ember_error_set(EMBER_ERROR, "a draft is already attached");
	if (!be->n_capture)
		return ember_error_set(EMBER_ERROR, "draft does not fit this backend: the backend must capture the draft's %d "
		                       "target layers (config capture_layers)", d->n_target_layers);
	if ((error = check_draft(be, d)))
		return error;
	if (!(dr = calloc(1, sizeof(*dr))) || !(dr->layers = calloc((size_t)d->hp.n_layer, sizeof(*dr->layers)))) {
		free(dr);
		return ember_error_set(EMBER_ENOMEM, "cuda draft: out of host memory");
	}
	dr->d = d;
	dr->hp = d->hp;
	const struct ember_hparams *hp = &dr->hp;
	const int hd = hp->head_dim, E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab, group = hp->n_head / hp->n_head_kv;
	const int B = d->block_size, ncap = d->n_target_layers;
	dr->B = B;
	dr->q_dim = hp->n_head * hd;
	dr->kv_dim = hp->n_head_kv * hd;
	dr->cap = be->n_ctx + B;
	dr->rows = B > DRAFT_COMMIT_ROWS ? B : DRAFT_COMMIT_ROWS;
	/* splits per KV head as the decode step chooses them, for the draft's head count */
	dr->n_split = (2 * be->n_sm + hp->n_head_kv - 1) / hp->n_head_kv;
	if (dr->n_split > 128)
		dr->n_split = 128;
	if (dr->n_split > (dr->cap + 127) / 128)
		dr->n_split = (dr->cap + 127) / 128;
	if (dr->n_split < 1)
		dr->n_split = 1;
	const int qd = dr->q_dim, kvd = dr->kv_dim, ldq = qd + 2 * kvd;
	const size_t R = (size_t)dr->rows;
	/* the block kernel's splits: one wave of its 2 CTAs per SM over (KV head, row block), each split
	 * at least one 64-key tile of the longest context */
	dr->block_attn = be->opt.draft_block_attn && (hd == 64 || hd == 128);
	dr->win_shared = be->opt.win_shared;
	{
		const int n_rb = (group * B + 63) / 64, cells = hp->n_head_kv * n_rb;
		dr->blk_split = (2 * be->n_sm + cells - 1) / cells;
		if (dr->blk_split > 64)
			dr->blk_split = 64;
		if (dr->blk_split > (dr->cap + 63) / 64)
			dr->blk_split = (dr->cap + 63) / 64;
		if (dr->blk_split < 1)
			dr->blk_split = 1;
	}

	size_t max_raw = d->fc.nbytes;
	if (d->own_token_embd && d->token_embd.nbytes > max_raw)
		max_raw = d->token_embd.nbytes;
	if (d->own_output && d->output.nbytes > max_raw)
		max_raw = d->output.nbytes;
	for (int l = 0; l < hp->n_layer; l++) {
		const struct ember_layer *ml = &d->layers[l];
		const struct ember_tensor *ts[] = {&ml->attn_q, &ml->attn_k, &ml->attn_v, &ml->attn_output, &ml->ffn_gate, &ml->ffn_up, &ml->ffn_down};
		for (int i = 0; i < 7; i++)
			if (ts[i]->nbytes > max_raw)
				max_raw = ts[i]->nbytes;
	}
	staging = dalloc(dr, max_raw, &error);
	for (int l = 0; l < hp->n_layer && !error; l++) {
		const struct ember_layer *ml = &d->layers[l];
		struct cuda_draft_layer *L = &dr->layers[l];
		L->attn_norm = upload_norm(dr, be, &ml->attn_norm, &error);
		L->ffn_norm = upload_norm(dr, be, &ml->ffn_norm, &error);
		L->q_norm = upload_norm(dr, be, &ml->attn_q_norm, &error);
		L->k_norm = upload_norm(dr, be, &ml->attn_k_norm, &error);
		L->qkv = dalloc(dr, (size_t)ldq * E * 2, &error);
		L->o = dalloc(dr, (size_t)E * qd * 2, &error);
		L->gu = dalloc(dr, (size_t)2 * F * E * 2, &error);
		L->down = dalloc(dr, (size_t)E * F * 2, &error);
		if (error)
			break;
		char *qkv = L->qkv, *gu = L->gu;
		if ((error = upload_f16(be, qkv, &ml->attn_q, staging)) ||
		    (error = upload_f16(be, qkv + (size_t)qd * E * 2, &ml->attn_k, staging)) ||
		    (error = upload_f16(be, qkv + (size_t)(qd + kvd) * E * 2, &ml->attn_v, staging)) ||
		    (error = upload_f16(be, L->o, &ml->attn_output, staging)) ||
		    (error = upload_f16(be, gu, &ml->ffn_gate, staging)) ||
		    (error = upload_f16(be, gu + (size_t)F * E * 2, &ml->ffn_up, staging)) ||
		    (error = upload_f16(be, L->down, &ml->ffn_down, staging)))
			break;
	}
	if (error)
		goto cleanup;
	dr->fc = dalloc(dr, (size_t)E * ncap * E * 2, &error);
	dr->hidden_norm = upload_norm(dr, be, &d->hidden_norm, &error);
	dr->output_norm = upload_norm(dr, be, &d->output_norm, &error);
	if (error || (error = upload_f16(be, dr->fc, &d->fc, staging)))
		goto cleanup;
	/* token_embd and the LM head: the target's copies unless the draft has its own */
	dr->own_embd = d->own_token_embd;
	dr->embd = be->embd_raw;
	dr->embd_type = be->embd_type;
	if (dr->own_embd) {
		void *p = dalloc(dr, d->token_embd.nbytes, &error);
		if (error)
			goto cleanup;
		dr->embd = p;
		dr->embd_type = (int)d->token_embd.type;
		CUDA_CHECK_GOTO(cudaMemcpyAsync(p, d->token_embd.data, d->token_embd.nbytes, cudaMemcpyHostToDevice, be->stream));
	}
	dr->own_head = d->own_output;
	dr->head = be->f16_head;
	if (dr->own_head) {
		void *p = dalloc(dr, (size_t)V * E * 2, &error);
		if (error)
			goto cleanup;
		dr->head = p;
		if ((error = upload_f16(be, p, &d->output, staging)))
			goto cleanup;
	}

	if ((be->opt.draft_q8 == 1 || (be->opt.draft_q8 == 2 && B <= EMBER_WINDOW_MAX)) && (error = attach_q8(dr, be)))
		goto cleanup;

	/* context K/V, RoPE tables, block and commit scratch */
	dr->kv = dalloc(dr, (size_t)hp->n_layer * 2 * hp->n_head_kv * dr->cap * hd * 2, &error);
	dr->rope_cos = dalloc(dr, (size_t)dr->cap * (hd / 2) * 4, &error);
	dr->rope_sin = dalloc(dr, (size_t)dr->cap * (hd / 2) * 4, &error);
	dr->io = dalloc(dr, sizeof(struct cuda_draft_io), &error);
	dr->x = dalloc(dr, R * E * 4, &error);
	dr->qkv = dalloc(dr, R * ldq * 4, &error);
	dr->gu = dalloc(dr, (size_t)B * 2 * F * 4, &error);
	dr->logits = dalloc(dr, (size_t)(B - 1) * V * 4, &error);
	dr->xn = dalloc(dr, R * E * 2, &error);
	dr->attn = dalloc(dr, (size_t)B * qd * 2, &error);
	dr->h = dalloc(dr, (size_t)B * F * 2, &error);
	dr->feat16 = dalloc(dr, R * ncap * E * 2, &error);
	dr->q_scratch = dalloc(dr, R * qd * 2, &error);
	dr->part_o = dalloc(dr, (size_t)B * hp->n_head_kv * dr->n_split * group * hd * 4, &error);
	dr->part_ml = dalloc(dr, (size_t)B * hp->n_head_kv * dr->n_split * group * 2 * 4, &error);
	dr->counters = dalloc(dr, (size_t)B * hp->n_head_kv * 4, &error);
	dr->argmax = dalloc(dr, (size_t)(B - 1) * 4, &error);
	if (dr->block_attn) {
		dr->blk_o = dalloc(dr, ember_attn_block_scratch(B, hp->n_head, hp->n_head_kv, hd, dr->blk_split, 0) * 4, &error);
		dr->blk_ml = dalloc(dr, ember_attn_block_scratch(B, hp->n_head, hp->n_head_kv, hd, dr->blk_split, 1) * 4, &error);
	}
	if (error)
		goto cleanup;
	CUDA_CHECK_GOTO(cudaMemsetAsync(dr->kv, 0, (size_t)hp->n_layer * 2 * hp->n_head_kv * dr->cap * hd * 2, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(dr->qkv, 0, R * ldq * 4, be->stream)); /* commit leaves the q columns unwritten */
	CUDA_CHECK_GOTO(cudaMemsetAsync(dr->feat16, 0, R * ncap * E * 2, be->stream)); /* bucketed GEMMs read past n */
	CUDA_CHECK_GOTO(cudaMemsetAsync(dr->xn, 0, R * E * 2, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(dr->counters, 0, (size_t)B * hp->n_head_kv * 4, be->stream));
	CUDA_CHECK_GOTO(cudaMallocHost((void **)&dr->h_io, sizeof(*dr->h_io)));
	memset(dr->h_io, 0, sizeof(*dr->h_io));
	for (int t = 1; t < B; t++)
		dr->h_io->tokens[t] = d->mask_token_id;
	{
		const size_t n = (size_t)dr->cap * (hd / 2);
		c = malloc(n * 4);
		s = malloc(n * 4);
		if (!c || !s) {
			error = ember_error_set(EMBER_ENOMEM, "cuda draft: out of host memory for RoPE tables");
			goto cleanup;
		}
		for (int p = 0; p < dr->cap; p++)
			for (int i = 0; i < hd / 2; i++) {
				const double angle = (double)p * pow((double)hp->rope_theta, -2.0 * i / hd);
				c[(size_t)p * (hd / 2) + i] = (float)cos(angle);
				s[(size_t)p * (hd / 2) + i] = (float)sin(angle);
			}
		CUDA_CHECK_GOTO(cudaMemcpyAsync(dr->rope_cos, c, n * 4, cudaMemcpyHostToDevice, be->stream));
		CUDA_CHECK_GOTO(cudaMemcpyAsync(dr->rope_sin, s, n * 4, cudaMemcpyHostToDevice, be->stream));
	}
	/* The commit's GEMM shapes once each (EMBER_PREFILL_WARM), as the target's prefill warm-up does:
	 * every bucketed row count up to its scratch rows, and one row. */
	if (be->opt.prefill_warm && be->opt.gemm_bucket > 1 && hp->n_layer > 0)
		for (int n = 1;; n = n == 1 ? be->opt.gemm_bucket : n + be->opt.gemm_bucket) {
			const int ng = n < dr->rows ? n : dr->rows;
			if ((error = ember_gemm_f16(be->cublas, dr->fc, dr->feat16, dr->x, E, ng, ncap * E, E, 0.0f)) ||
			    (error = ember_gemm_f16(be->cublas, (const char *)dr->layers[0].qkv + (size_t)qd * E * 2, dr->xn,
			                            dr->qkv + qd, 2 * kvd, ng, E, ldq, 0.0f)))
				goto cleanup;
			if (ng == dr->rows)
				break;
		}
	CUDA_CHECK_GOTO(cudaStreamSynchronize(be->stream));
	be->draft = dr;
	dr = NULL;
cleanup:
	free(c);
	free(s);
	cudaFree(staging);
	ember_cuda_draft_free(dr);
	return error;
}

static void *layer_cache(const struct cuda_draft *dr, int l, int which)
{
	const size_t per = (size_t)dr->hp.n_head_kv * dr->cap * dr->hp.head_dim * 2;
	return (char *)dr->kv + ((size_t)l * 2 + which) * per;
}

int ember_cuda_draft_commit(struct ember_backend *be, int pos, int n_rows)
{
	struct cuda_draft *dr = be->draft;
	int rc;
	if (!dr)
		return ember_error_set(EMBER_ERROR, "draft_commit: no draft attached");
	if (pos < 0 || pos > dr->ctx_len || n_rows < 0 || pos + n_rows > be->n_ctx)
		return ember_error_set(EMBER_ERROR, "draft_commit of %d rows at position %d: the draft context holds %d of %d "
		                       "positions", n_rows, pos, dr->ctx_len, be->n_ctx);
	if (n_rows > 0 && (pos < be->cap_pos || pos + n_rows > be->cap_pos + be->cap_n))
		return ember_error_set(EMBER_ERROR, "draft_commit of %d rows at position %d: the capture holds rows %d..%d of "
		                       "the last forward (a prompt longer than the prefill chunk, %d, keeps only its last "
		                       "chunk: raise EMBER_PREFILL_CHUNK)", n_rows, pos, be->cap_pos, be->cap_pos + be->cap_n,
		                       be->chunk);
	const struct ember_hparams *hp = &dr->hp;
	const int E = hp->n_embd, ncap = be->n_capture, qd = dr->q_dim, kvd = dr->kv_dim, ldq = qd + 2 * kvd;
	cudaStream_t st = be->stream;
	dr->ctx_len = pos; /* the rollback: anything after pos is overwritten below or never read */
	for (int c0 = 0; c0 < n_rows; c0 += dr->rows) {
		const int n = n_rows - c0 < dr->rows ? n_rows - c0 : dr->rows, p0 = pos + c0;
		const int ng = cuda_gemm_rows(be->opt.gemm_bucket, n, dr->rows); /* rows past n: scratch */
		const float *src = be->cap + (size_t)(p0 - be->cap_pos) * ncap * E;
		/* context feature = hidden_norm(fc(concatenated target layers)), fp16 for the k/v GEMMs */
		if ((rc = ember_f16_from_f32(dr->feat16, src, (size_t)n * ncap * E, st)) ||
		    (rc = ember_gemm_f16(be->cublas, dr->fc, dr->feat16, dr->x, E, ng, ncap * E, E, 0.0f)) ||
		    (rc = ember_rmsnorm_rows(dr->xn, dr->x, dr->hidden_norm, n, E, hp->rms_eps, st)))
			return rc;
		for (int l = 0; l < hp->n_layer; l++) {
			const struct cuda_draft_layer *L = &dr->layers[l];
			/* only the k and v rows of the fused weight; q columns of dr->qkv stay as they are */
			if ((rc = ember_gemm_f16(be->cublas, (const char *)L->qkv + (size_t)qd * E * 2, dr->xn, dr->qkv + qd,
			                         2 * kvd, ng, E, ldq, 0.0f)))
				return rc;
			struct ember_qk_rope_args r = {dr->qkv, L->q_norm, L->k_norm, hp->rms_eps, dr->rope_cos, dr->rope_sin,
			                               n, p0, hp->n_head, hp->n_head_kv, hp->head_dim, dr->cap, dr->q_scratch,
			                               layer_cache(dr, l, 0), layer_cache(dr, l, 1), NULL};
			if ((rc = ember_qk_norm_rope_rows(&r, st)))
				return rc;
		}
	}
	dr->ctx_len = pos + n_rows;
	return 0;
}

/* Layer l's block attention with the block kernel: q/k norms and RoPE of the block's rows, their
 * K/V written at positions pos.. of the draft cache (beyond the committed context, where the next
 * commit overwrites them), then every block query over keys 0..pos+B-1. The position comes from
 * dr->io on the device. */
static int block_attention(struct cuda_draft *dr, int l, cudaStream_t st)
{
	const struct ember_hparams *hp = &dr->hp;
	const struct cuda_draft_layer *L = &dr->layers[l];
	const int32_t *pos = &dr->io->state.pos;
	struct ember_qk_rope_args r = {dr->qkv, L->q_norm, L->k_norm, hp->rms_eps, dr->rope_cos, dr->rope_sin, dr->B, 0,
	                               hp->n_head, hp->n_head_kv, hp->head_dim, dr->cap, dr->q_scratch,
	                               layer_cache(dr, l, 0), layer_cache(dr, l, 1), pos};
	struct ember_block_attn_args a = {dr->q_scratch, layer_cache(dr, l, 0), layer_cache(dr, l, 1), dr->attn, pos, dr->B,
	                                  hp->n_head, hp->n_head_kv, dr->cap, hp->head_dim, dr->blk_split, dr->blk_o,
	                                  dr->blk_ml};
	int rc = ember_qk_norm_rope_rows(&r, st);
	return rc ? rc : ember_attn_block(&a, st);
}

/* The same with the verify window's lean kernel in its non-causal mode (EMBER_DRAFT_ATTN=window):
 * it writes the block's K/V at positions pos.. too, and each block token's CTAs read the context. */
static int window_attention(struct cuda_draft *dr, int l, cudaStream_t st)
{
	const struct ember_hparams *hp = &dr->hp;
	const struct cuda_draft_layer *L = &dr->layers[l];
	const int qd = dr->q_dim, kvd = dr->kv_dim;
	struct ember_attn_args a;
	memset(&a, 0, sizeof(a));
	a.head_dim = hp->head_dim;
	a.n_head = hp->n_head;
	a.n_kv = hp->n_head_kv;
	a.n_ctx = dr->cap;
	a.k_cache = layer_cache(dr, l, 0);
	a.v_cache = layer_cache(dr, l, 1);
	a.out = dr->attn;
	a.q = dr->qkv;
	a.k = dr->qkv + qd;
	a.v = dr->qkv + qd + kvd;
	a.q_norm = L->q_norm;
	a.k_norm = L->k_norm;
	a.eps = hp->rms_eps;
	a.rope_cos = dr->rope_cos;
	a.rope_sin = dr->rope_sin;
	a.state = &dr->io->state;
	a.n_split = dr->n_split;
	a.part_o = dr->part_o;
	a.part_ml = dr->part_ml;
	a.counters = dr->counters;
	a.lean = 1;
	a.full = 1;
	a.win_shared = dr->win_shared;
	return ember_attn_window(&a, dr->B, dr->q_dim + 2 * dr->kv_dim, st);
}

/* One window GEMV of the q8 block pass over n rows of x (ld_x apart): Q8R weights w (rows x k;
 * SWIGLU: gate w, up w2, into out_h), the input RMS-normalized with norm_w when given, and the
 * backend's GEMV shape switches. */
static int draft_gemv(struct ember_backend *be, struct cuda_draft *dr, int epi, const void *x, int k, int ld_x,
                      const float *norm_w, int n, const void *w, const void *w2, int rows, float *out, int ld_out, void *out_h)
{
	struct ember_gemv_win_args a;
	memset(&a, 0, sizeof(a));
	struct ember_gemv_args *g = &a.g;
	g->epi = epi;
	g->x = x;
	g->k = k;
	g->in_mode = norm_w ? EMBER_GEMV_IN_RMS : EMBER_GEMV_IN_F16;
	g->norm_w = norm_w;
	g->eps = dr->hp.rms_eps;
	g->pdl = be->opt.win_pdl;
	g->streaming = be->opt.gemv_stream;
	g->stream_warps = be->opt.gemv_warps;
	g->stream_ring = be->opt.gemv_ring;
	g->stream_ctas = be->opt.gemv_ctas;
	struct ember_gemv_seg s0 = {w, EMBER_T_Q8R, 1, rows, out}, s1 = {w2, EMBER_T_Q8R, 1, rows, NULL};
	g->seg[0] = s0;
	g->seg[1] = s1;
	g->n_seg = epi == EMBER_GEMV_SWIGLU ? 2 : 1;
	g->out_h = out_h;
	a.n_tok = n;
	a.ld_x = ld_x;
	a.ld_out = ld_out;
	a.ld_h = dr->hp.n_ff;
	a.xs = dr->w_xs;
	a.sx = dr->w_sx;
	a.split = be->opt.win_split;
	a.split_warps = be->opt.win_warps;
	a.part = dr->w_part;
	a.cnt = dr->w_cnt;
	a.part_jobs = dr->w_jobs;
	return ember_gemv_window(&a, be->stream);
}

/* The block pass with EMBER_DRAFT_WEIGHTS=q8: the layers and the LM head as window GEMVs (RMSNorm
 * fused into the input staging, residual adds and SwiGLU into the epilogues). */
static int propose_enqueue_q8(struct ember_backend *be, struct cuda_draft *dr)
{
	const struct ember_hparams *hp = &dr->hp;
	const int E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab, B = dr->B, qd = dr->q_dim, ldq = qd + 2 * dr->kv_dim;
	const size_t gu_half = ember_quant_q8r_bytes(F, E);
	cudaStream_t st = be->stream;
	int rc;
	if ((rc = ember_embed_rows(dr->x, dr->embd_type, dr->embd, E, V, dr->io->tokens, B, st)))
		return rc;
	for (int l = 0; l < hp->n_layer; l++) {
		const struct cuda_draft_layer *L = &dr->layers[l];
		if ((rc = draft_gemv(be, dr, EMBER_GEMV_STORE, dr->x, E, E, L->attn_norm, B, L->qkv8, NULL, ldq, dr->qkv, ldq, NULL)) ||
		    (rc = dr->block_attn ? block_attention(dr, l, st) : window_attention(dr, l, st)) ||
		    (rc = draft_gemv(be, dr, EMBER_GEMV_RESID, dr->attn, qd, qd, NULL, B, L->o8, NULL, E, dr->x, E, NULL)) ||
		    (rc = draft_gemv(be, dr, EMBER_GEMV_SWIGLU, dr->x, E, E, L->ffn_norm, B, L->gu8, (const char *)L->gu8 + gu_half,
		                     F, NULL, 0, dr->h)) ||
		    (rc = draft_gemv(be, dr, EMBER_GEMV_RESID, dr->h, F, F, NULL, B, L->down8, NULL, E, dr->x, E, NULL)))
			return rc;
	}
	/* slots 1..B-1 through the final norm and the LM head */
	if ((rc = draft_gemv(be, dr, EMBER_GEMV_STORE, dr->x + E, E, E, dr->output_norm, B - 1, dr->head8, NULL, V, dr->logits,
	                     V, NULL)))
		return rc;
	return ember_argmax_rows(dr->argmax, dr->logits, B - 1, V, st);
}

/* The block pass on be->stream (plainly or under capture): tokens and position from dr->io. */
static int propose_enqueue(struct ember_backend *be, struct cuda_draft *dr)
{
	const struct ember_hparams *hp = &dr->hp;
	const int E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab, B = dr->B, qd = dr->q_dim, kvd = dr->kv_dim;
	const int ldq = qd + 2 * kvd;
	cudaStream_t st = be->stream;
	int rc;
	if (dr->q8)
		return propose_enqueue_q8(be, dr);
	if ((rc = ember_embed_rows(dr->x, dr->embd_type, dr->embd, E, V, dr->io->tokens, B, st)))
		return rc;
	for (int l = 0; l < hp->n_layer; l++) {
		const struct cuda_draft_layer *L = &dr->layers[l];
		if ((rc = ember_rmsnorm_rows(dr->xn, dr->x, L->attn_norm, B, E, hp->rms_eps, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->qkv, dr->xn, dr->qkv, ldq, B, E, ldq, 0.0f)) ||
		    (rc = dr->block_attn ? block_attention(dr, l, st) : window_attention(dr, l, st)))
			return rc;
		if ((rc = ember_gemm_f16(be->cublas, L->o, dr->attn, dr->x, E, B, qd, E, 1.0f)) ||
		    (rc = ember_rmsnorm_rows(dr->xn, dr->x, L->ffn_norm, B, E, hp->rms_eps, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->gu, dr->xn, dr->gu, 2 * F, B, E, 2 * F, 0.0f)) ||
		    (rc = ember_swiglu_rows(dr->h, dr->gu, B, F, st)) ||
		    (rc = ember_gemm_f16(be->cublas, L->down, dr->h, dr->x, E, B, F, E, 1.0f)))
			return rc;
	}
	/* slots 1..B-1 through the final norm, the LM head and the argmax */
	if ((rc = ember_rmsnorm_rows(dr->xn, dr->x + E, dr->output_norm, B - 1, E, hp->rms_eps, st)) ||
	    (rc = ember_gemm_f16(be->cublas, dr->head, dr->xn, dr->logits, V, B - 1, E, V, 0.0f)))
		return rc;
	return ember_argmax_rows(dr->argmax, dr->logits, B - 1, V, st);
}

/* One block pass: plain launches the first time (module load, cuBLAS set-up), then the captured
 * graph (EMBER_GRAPHS), which serves every context length. */
static int propose_run(struct ember_backend *be, struct cuda_draft *dr)
{
	if (!be->opt.graphs || !dr->warm) {
		dr->warm = 1;
		return propose_enqueue(be, dr);
	}
	if (!dr->graph) {
		cudaGraph_t graph = NULL;
		int rc;
		CUDA_CHECK(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeRelaxed));
		rc = propose_enqueue(be, dr);
		cudaError_t end = cudaStreamEndCapture(be->stream, &graph);
		if (rc) {
			if (graph)
				cudaGraphDestroy(graph);
			return rc;
		}
		CUDA_CHECK(end);
		cudaError_t inst = cudaGraphInstantiate(&dr->graph, graph, 0);
		cudaGraphDestroy(graph);
		if (inst != cudaSuccess)
			dr->graph = NULL;
		CUDA_CHECK(inst);
	}
	CUDA_CHECK(cudaGraphLaunch(dr->graph, be->stream));
	return 0;
}

int ember_cuda_draft_propose(struct ember_backend *be, int32_t last_token, int pos, int depth, int32_t *out,
                             float *logits)
{
	struct cuda_draft *dr = be->draft;
	int rc;
	if (!dr)
		return ember_error_set(EMBER_ERROR, "draft_propose: no draft attached");
	const int B = dr->B, V = dr->hp.n_vocab;
	if (pos != dr->ctx_len || depth < 1 || depth > B - 1 || last_token < 0 || last_token >= V || !out ||
	    pos + B > dr->cap)
		return ember_error_set(EMBER_ERROR, "draft_propose at position %d, depth %d, token %d: the draft context holds "
		                       "%d positions, depth must be 1..%d", pos, depth, last_token, dr->ctx_len, B - 1);
	/* the previous pass's copies out of h_io finished at its synchronize */
	memset(&dr->h_io->state, 0, sizeof(dr->h_io->state));
	dr->h_io->state.pos = pos;
	dr->h_io->tokens[0] = last_token;
	CUDA_CHECK(cudaMemcpyAsync(dr->io, dr->h_io, sizeof(*dr->io), cudaMemcpyHostToDevice, be->stream));
	if ((rc = propose_run(be, dr)))
		return rc;
	CUDA_CHECK(cudaMemcpyAsync(out, dr->argmax, (size_t)depth * 4, cudaMemcpyDeviceToHost, be->stream));
	if (logits)
		CUDA_CHECK(cudaMemcpyAsync(logits, dr->logits, (size_t)depth * V * 4, cudaMemcpyDeviceToHost, be->stream));
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	return 0;
}

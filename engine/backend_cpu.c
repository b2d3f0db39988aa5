/*
 * backend_cpu.c - ember's reference backend: the Qwen3 forward in fp32 with fp32 accumulation,
 * weights left quantized and dequantized on the fly. A batch of tokens goes through each layer
 * at once: every weight row is dequantized once into a per-thread panel and dotted with all
 * tokens of the chunk; attention is causal over the cache plus the batch. Rows of each matrix are
 * split across a persistent thread pool; every output element is computed by one thread in a
 * fixed order, so results do not depend on the thread count. Each row of a batch goes through the
 * same dot kernels and reduction order as a single-token decode (quant_dot.h), so a verify window
 * of n tokens gives per row the bits of n decode steps. The DFlash draft (draft.h) runs here too:
 * captured target hidden states -> context K/V, and one non-causal pass over the block.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "draft.h"
#include "error.h"
#include "pool.h"
#include "quant.h"
#include "quant_dot.h"

#define CPU_DEFAULT_CTX 4096
#define CPU_DEFAULT_BATCH 512
#define PANEL_BYTES (256 * 1024)   /* dequantized weight rows per thread, sized for L2 */
#define HEAD_CHUNK 16              /* tokens per output-head pass when logits go to scratch */
#define SMALL_WORK (1 << 18)       /* multiply-adds below which a product runs on one thread */

struct thread_scratch {
	float *panel;                   /* PANEL rows of the widest matrix input */
	float *scores;                  /* attention scores, n_ctx */
};

/* The attached DFlash draft: its context K/V over committed positions and its own activations
 * (its shapes may differ from the target's, except n_embd). */
struct cpu_draft {
	const struct ember_draft *d;
	struct ember_hparams hp;
	int q_dim, kv_dim, rows;        /* rows: block size or commit chunk, whichever is larger */
	int ctx_len;                    /* committed context positions */
	float *k_ctx, *v_ctx;           /* [n_layer][n_ctx][kv_dim] */
	float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up, *feat; /* [rows][...] */
	float *rope_cos, *rope_sin;     /* [rows][head_dim / 2] */
	float *logits;                  /* [block_size][n_vocab] */
};

struct ember_backend {
	const struct ember_model *model;
	struct ember_hparams hp;
	int n_ctx, max_batch, n_len;    /* n_len: positions currently in the cache */
	int n_threads;
	int q_dim, kv_dim, max_in;
	struct ember_pool *pool;
	struct thread_scratch *ts;
	float *k_cache, *v_cache;       /* [n_layer][n_ctx][kv_dim] */
	float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up; /* [max_batch][...] activations */
	float *rope_cos, *rope_sin;     /* [max_batch][head_dim / 2] */
	float *head_logits;             /* [HEAD_CHUNK][n_vocab] when the caller wants only argmax */
	int n_capture;                  /* hidden-state capture for a draft (0 = off) */
	int *capture_layers;            /* [n_capture] target layer ids */
	float *captured;                /* [n_ctx][n_capture * n_embd], indexed by position */
	int last_pos, last_n;           /* the last forward call's positions */
	size_t panel_floats, scores_floats; /* per-thread scratch sizes */
	struct cpu_draft *draft;
	char device[160];
};

/* ---- parallel matrix product: y[t][r] = dot(W row r, x[t]) ---- */

/* Weight rows dequantized together for the batched product: a panel of about PANEL_BYTES. */
static int64_t panel_rows_for(int64_t n_in)
{
	int64_t rows = PANEL_BYTES / (int64_t)(n_in * sizeof(float));
	return rows < 2 ? 2 : rows > 64 ? 64 : rows;
}

struct matmul_job {
	struct ember_backend *be;
	const struct ember_tensor *w;
	const float *x;                 /* [n_tok][n_in] */
	int n_tok;
	float *y;                       /* [n_tok][ldy] */
	int64_t ldy;
};

/* Rows [begin, end) of y = W x for every token of the job. */
static void matmul_worker(void *arg, int64_t begin, int64_t end, int thread)
{
	const struct matmul_job *job = arg;
	const struct ember_tensor *w = job->w;
	const int64_t n_in = w->ne[0];
	const size_t row_bytes = ember_type_row_size(w->type, n_in);
	const uint8_t *rows = w->data;

	if (job->n_tok == 1) { /* decode: fused dots, four rows at a time, nothing to reuse */
		ember_dot_rows(w->type, rows + begin * row_bytes, row_bytes, (int)(end - begin), job->x, n_in, job->y + begin);
		return;
	}
	float *panel = job->be->ts[thread].panel;
	const int64_t panel_rows = panel_rows_for(n_in);
	for (int64_t r = begin; r < end; r += panel_rows) {
		int64_t nr = end - r < panel_rows ? end - r : panel_rows;
		const float *wf;
		if (w->type == EMBER_TYPE_F32) {
			wf = (const float *)(rows + r * row_bytes);
		} else {
			for (int64_t i = 0; i < nr; i++)
				ember_dequantize_row(w->type, rows + (r + i) * row_bytes, panel + i * n_in, n_in);
			wf = panel;
		}
		ember_dot_panel(wf, n_in, (int)nr, job->x, n_in, job->n_tok, n_in, job->y + r, job->ldy);
	}
}

static void matmul(struct ember_backend *be, const struct ember_tensor *w, const float *x, int n_tok, float *y,
                   int64_t ldy)
{
	struct matmul_job job = {be, w, x, n_tok, y, ldy};
	const int64_t n_out = w->ne[1], n_in = w->ne[0];
	const int threads = ember_pool_threads(be->pool);
	int64_t grain;
	if ((double)n_out * n_in * n_tok < SMALL_WORK)
		grain = n_out; /* not worth waking anyone */
	else if (n_tok == 1)
		grain = (n_out / (8 * threads) + 3) / 4 * 4; /* ~8 chunks per thread, whole groups of 4 rows */
	else
		grain = panel_rows_for(n_in);
	ember_pool_for(be->pool, n_out, grain < 4 ? 4 : grain, matmul_worker, &job);
}

/* ---- elementwise pieces ---- */

/* y = x / sqrt(mean(x^2) + eps) * w over n elements (sum of squares in double, as ggml). */
static void rms_norm(float *y, const float *x, const float *w, int n, float eps)
{
	double sum = 0.0;
	for (int i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	const float scale = 1.0f / sqrtf((float)(sum / n) + eps);
	for (int i = 0; i < n; i++)
		y[i] = (x[i] * scale) * w[i];
}

/* NEOX rotate-half: element i pairs with i + head_dim/2. */
static void rope_neox(float *x, const float *cos_t, const float *sin_t, int head_dim)
{
	const int half = head_dim / 2;
	for (int i = 0; i < half; i++) {
		float x0 = x[i], x1 = x[i + half];
		x[i] = x0 * cos_t[i] - x1 * sin_t[i];
		x[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
	}
}

/* ---- attention: per (token, q head), causal over cache + batch ---- */

struct attn_job {
	struct ember_backend *be;
	int layer, n_tok, pos;
};

/*
 * One query head's attention: softmax(q . k * scale) over n0 keys of a first segment, then n1 of a
 * second (the draft's block after its context; n1 = 0 for the target's causal prefix), and the
 * weighted sum of the values into out[hd]. Key and value rows are `stride` floats apart, the head's
 * offset already applied. One code path for every row keeps a window's rows equal to single steps.
 */
static void attend_head(float *out, const float *q, int hd, float scale, float *scores, const float *k0,
	const float *v0, int n0, const float *k1, const float *v1, int n1, size_t stride)
{
	const int n_keys = n0 + n1;
	float max = -INFINITY;
	for (int j = 0; j < n_keys; j++) {
		const float *kv = j < n0 ? k0 + (size_t)j * stride : k1 + (size_t)(j - n0) * stride;
		scores[j] = ember_dot_f32(q, kv, hd) * scale;
		if (scores[j] > max)
			max = scores[j];
	}
	double sum = 0.0;
	for (int j = 0; j < n_keys; j++) {
		scores[j] = expf(scores[j] - max);
		sum += scores[j];
	}
	memset(out, 0, (size_t)hd * sizeof(float));
	for (int j = 0; j < n_keys; j++) {
		const float *vv = j < n0 ? v0 + (size_t)j * stride : v1 + (size_t)(j - n0) * stride;
		const float p = scores[j];
		for (int i = 0; i < hd; i++)
			out[i] += p * vv[i];
	}
	const float inv = (float)(1.0 / sum);
	for (int i = 0; i < hd; i++)
		out[i] *= inv;
}

static void attn_worker(void *arg, int64_t begin, int64_t end, int thread)
{
	const struct attn_job *job = arg;
	struct ember_backend *be = job->be;
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
	const float scale = 1.0f / sqrtf((float)hd);
	const float *kc = be->k_cache + (size_t)job->layer * be->n_ctx * be->kv_dim;
	const float *vc = be->v_cache + (size_t)job->layer * be->n_ctx * be->kv_dim;
	float *scores = be->ts[thread].scores;

	for (int64_t pair = begin; pair < end; pair++) {
		const int t = (int)(pair / hp->n_head), h = (int)(pair % hp->n_head), g = h / group;
		attend_head(be->att + (size_t)t * be->q_dim + (size_t)h * hd, be->q + (size_t)t * be->q_dim + (size_t)h * hd,
			hd, scale, scores, kc + (size_t)g * hd, vc + (size_t)g * hd, job->pos + t + 1, NULL, NULL, 0,
			(size_t)be->kv_dim);
	}
}

/* ---- one chunk of tokens through the layers ---- */

static void layer_forward(struct ember_backend *be, int il, int n_tok, int pos)
{
	const struct ember_hparams *hp = &be->hp;
	const struct ember_layer *l = &be->model->layers[il];
	const int n_embd = hp->n_embd, hd = hp->head_dim;

	for (int t = 0; t < n_tok; t++)
		rms_norm(be->xn + (size_t)t * n_embd, be->x + (size_t)t * n_embd, l->attn_norm.data, n_embd, hp->rms_eps);
	matmul(be, &l->attn_q, be->xn, n_tok, be->q, be->q_dim);
	matmul(be, &l->attn_k, be->xn, n_tok, be->k, be->kv_dim);
	matmul(be, &l->attn_v, be->xn, n_tok, be->v, be->kv_dim);

	float *kc = be->k_cache + ((size_t)il * be->n_ctx + pos) * be->kv_dim;
	float *vc = be->v_cache + ((size_t)il * be->n_ctx + pos) * be->kv_dim;
	for (int t = 0; t < n_tok; t++) {
		const float *cs = be->rope_cos + (size_t)t * (hd / 2), *sn = be->rope_sin + (size_t)t * (hd / 2);
		for (int h = 0; h < hp->n_head; h++) {
			float *qh = be->q + (size_t)t * be->q_dim + (size_t)h * hd;
			rms_norm(qh, qh, l->attn_q_norm.data, hd, hp->rms_eps);
			rope_neox(qh, cs, sn, hd);
		}
		for (int h = 0; h < hp->n_head_kv; h++) {
			float *kh = be->k + (size_t)t * be->kv_dim + (size_t)h * hd;
			rms_norm(kh, kh, l->attn_k_norm.data, hd, hp->rms_eps);
			rope_neox(kh, cs, sn, hd);
		}
		memcpy(kc + (size_t)t * be->kv_dim, be->k + (size_t)t * be->kv_dim, (size_t)be->kv_dim * sizeof(float));
		memcpy(vc + (size_t)t * be->kv_dim, be->v + (size_t)t * be->kv_dim, (size_t)be->kv_dim * sizeof(float));
	}
	struct attn_job aj = {be, il, n_tok, pos};
	const int64_t pairs = (int64_t)n_tok * hp->n_head;
	ember_pool_for(be->pool, pairs, (pairs + 8 * be->n_threads - 1) / (8 * be->n_threads), attn_worker, &aj);
	matmul(be, &l->attn_output, be->att, n_tok, be->proj, n_embd);
	for (size_t i = 0; i < (size_t)n_tok * n_embd; i++)
		be->x[i] += be->proj[i];

	for (int t = 0; t < n_tok; t++)
		rms_norm(be->xn + (size_t)t * n_embd, be->x + (size_t)t * n_embd, l->ffn_norm.data, n_embd, hp->rms_eps);
	matmul(be, &l->ffn_gate, be->xn, n_tok, be->gate, hp->n_ff);
	matmul(be, &l->ffn_up, be->xn, n_tok, be->up, hp->n_ff);
	for (size_t i = 0; i < (size_t)n_tok * hp->n_ff; i++) {
		const float g = be->gate[i];
		be->gate[i] = g / (1.0f + expf(-g)) * be->up[i];
	}
	matmul(be, &l->ffn_down, be->gate, n_tok, be->proj, n_embd);
	for (size_t i = 0; i < (size_t)n_tok * n_embd; i++)
		be->x[i] += be->proj[i];
	for (int j = 0; j < be->n_capture; j++)
		if (be->capture_layers[j] == il)
			for (int t = 0; t < n_tok; t++)
				memcpy(be->captured + ((size_t)(pos + t) * be->n_capture + j) * n_embd, be->x + (size_t)t * n_embd,
				       (size_t)n_embd * sizeof(float));
}

static int32_t argmax_row(const float *logits, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

/* Final norm and output head for rows [row0, row0 + n_rows) of the current chunk. */
static void head_forward(struct ember_backend *be, int row0, int n_rows, float *logits, int32_t *argmax)
{
	const int n_embd = be->hp.n_embd, n_vocab = be->hp.n_vocab;
	for (int done = 0; done < n_rows;) {
		int n = n_rows - done;
		float *out = logits ? logits + (size_t)done * n_vocab : be->head_logits;
		if (!logits && n > HEAD_CHUNK)
			n = HEAD_CHUNK;
		for (int t = 0; t < n; t++)
			rms_norm(be->xn + (size_t)t * n_embd, be->x + (size_t)(row0 + done + t) * n_embd,
			         be->model->output_norm.data, n_embd, be->hp.rms_eps);
		matmul(be, &be->model->output, be->xn, n, out, n_vocab);
		if (argmax)
			for (int t = 0; t < n; t++)
				argmax[done + t] = argmax_row(out + (size_t)t * n_vocab, n_vocab);
		done += n;
	}
}

static int cpu_forward(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos, int all_rows,
                       float *logits, int32_t *argmax)
{
	const struct ember_hparams *hp = &be->hp;
	if (n_tokens < 1 || pos < 0 || pos > be->n_len || n_tokens > be->n_ctx - pos)
		return ember_error_set(EMBER_ERROR, "forward of %d tokens at position %d: the cache holds %d of %d positions",
		                       n_tokens, pos, be->n_len, be->n_ctx);
	for (int i = 0; i < n_tokens; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return ember_error_set(EMBER_ERROR, "token %d at index %d is outside the vocabulary (0..%d)", tokens[i], i,
			                       hp->n_vocab - 1);
	const int want_out = logits || argmax;
	const int hd = hp->head_dim;
	be->last_pos = pos;
	be->last_n = n_tokens;
	for (int c0 = 0; c0 < n_tokens; c0 += be->max_batch) {
		const int n = n_tokens - c0 < be->max_batch ? n_tokens - c0 : be->max_batch;
		const int p0 = pos + c0;
		for (int t = 0; t < n; t++) {
			const struct ember_tensor *e = &be->model->token_embd;
			const size_t row_bytes = ember_type_row_size(e->type, hp->n_embd);
			ember_dequantize_row(e->type, (const uint8_t *)e->data + (size_t)tokens[c0 + t] * row_bytes,
			                     be->x + (size_t)t * hp->n_embd, hp->n_embd);
			for (int i = 0; i < hd / 2; i++) {
				double angle = (double)(p0 + t) * pow((double)hp->rope_theta, -2.0 * i / hd);
				be->rope_cos[(size_t)t * (hd / 2) + i] = (float)cos(angle);
				be->rope_sin[(size_t)t * (hd / 2) + i] = (float)sin(angle);
			}
		}
		for (int il = 0; il < hp->n_layer; il++)
			layer_forward(be, il, n, p0);
		be->n_len = p0 + n;
		if (!want_out)
			continue;
		if (all_rows)
			head_forward(be, 0, n, logits ? logits + (size_t)c0 * hp->n_vocab : NULL, argmax ? argmax + c0 : NULL);
		else if (c0 + n == n_tokens)
			head_forward(be, n - 1, 1, logits, argmax);
	}
	return 0;
}

static int cpu_decode_greedy(struct ember_backend *be, int32_t token, int pos, int n_steps, int32_t *out_tokens)
{
	for (int i = 0; i < n_steps; i++) {
		if (cpu_forward(be, &token, 1, pos + i, 0, NULL, &out_tokens[i]))
			return EMBER_ERROR;
		token = out_tokens[i];
	}
	return 0;
}

/* ---- DFlash draft ---- */

#define DRAFT_COMMIT_ROWS 64        /* context positions turned into draft K/V per pass */

/* RoPE tables for n rows at positions pos.. with the draft's theta (as the target's tables). */
static void draft_rope_tables(struct cpu_draft *dr, int pos, int n)
{
	const int hd = dr->hp.head_dim;
	for (int t = 0; t < n; t++)
		for (int i = 0; i < hd / 2; i++) {
			double angle = (double)(pos + t) * pow((double)dr->hp.rope_theta, -2.0 * i / hd);
			dr->rope_cos[(size_t)t * (hd / 2) + i] = (float)cos(angle);
			dr->rope_sin[(size_t)t * (hd / 2) + i] = (float)sin(angle);
		}
}

/* Per-head k_norm and RoPE of n rows of k (row t at the table's row t). */
static void draft_norm_rope(struct cpu_draft *dr, float *x, int n, int n_heads, int ld, const struct ember_tensor *norm)
{
	const int hd = dr->hp.head_dim;
	for (int t = 0; t < n; t++)
		for (int h = 0; h < n_heads; h++) {
			float *xh = x + (size_t)t * ld + (size_t)h * hd;
			rms_norm(xh, xh, norm->data, hd, dr->hp.rms_eps);
			rope_neox(xh, dr->rope_cos + (size_t)t * (hd / 2), dr->rope_sin + (size_t)t * (hd / 2), hd);
		}
}

static int cpu_draft_commit(struct ember_backend *be, int pos, int n_rows)
{
	struct cpu_draft *dr = be->draft;
	if (!dr)
		return ember_error_set(EMBER_ERROR, "draft_commit: no draft attached");
	if (pos < 0 || pos > dr->ctx_len || n_rows < 0 || pos != be->last_pos || n_rows > be->last_n)
		return ember_error_set(EMBER_ERROR, "draft_commit of %d rows at position %d: the last forward computed %d rows "
		                       "at %d and the draft context holds %d positions", n_rows, pos, be->last_n, be->last_pos,
		                       dr->ctx_len);
	const int n_embd = dr->hp.n_embd, stride = be->n_capture * n_embd;
	dr->ctx_len = pos; /* the rollback: anything after pos is overwritten below or never read */
	for (int c0 = 0; c0 < n_rows; c0 += dr->rows) {
		const int n = n_rows - c0 < dr->rows ? n_rows - c0 : dr->rows, p0 = pos + c0;
		/* context feature = hidden_norm(fc(concatenated target layers)) */
		matmul(be, &dr->d->fc, be->captured + (size_t)p0 * stride, n, dr->feat, n_embd);
		for (int t = 0; t < n; t++)
			rms_norm(dr->feat + (size_t)t * n_embd, dr->feat + (size_t)t * n_embd, dr->d->hidden_norm.data, n_embd,
			         dr->hp.rms_eps);
		draft_rope_tables(dr, p0, n);
		for (int il = 0; il < dr->hp.n_layer; il++) {
			const struct ember_layer *l = &dr->d->layers[il];
			float *kc = dr->k_ctx + ((size_t)il * be->n_ctx + p0) * dr->kv_dim;
			float *vc = dr->v_ctx + ((size_t)il * be->n_ctx + p0) * dr->kv_dim;
			matmul(be, &l->attn_k, dr->feat, n, kc, dr->kv_dim);
			matmul(be, &l->attn_v, dr->feat, n, vc, dr->kv_dim);
			draft_norm_rope(dr, kc, n, dr->hp.n_head_kv, dr->kv_dim, &l->attn_k_norm);
		}
	}
	dr->ctx_len = pos + n_rows;
	return 0;
}

struct draft_attn_job {
	struct ember_backend *be;
	int layer, n_block;
};

/* Block row t, head h: softmax over the context keys [0, ctx_len) and all block keys. */
static void draft_attn_worker(void *arg, int64_t begin, int64_t end, int thread)
{
	const struct draft_attn_job *job = arg;
	struct ember_backend *be = job->be;
	struct cpu_draft *dr = be->draft;
	const int hd = dr->hp.head_dim, group = dr->hp.n_head / dr->hp.n_head_kv, n_ctx_keys = dr->ctx_len;
	const float scale = 1.0f / sqrtf((float)hd);
	const float *kc = dr->k_ctx + (size_t)job->layer * be->n_ctx * dr->kv_dim;
	const float *vc = dr->v_ctx + (size_t)job->layer * be->n_ctx * dr->kv_dim;
	float *scores = be->ts[thread].scores;
	for (int64_t pair = begin; pair < end; pair++) {
		const int t = (int)(pair / dr->hp.n_head), h = (int)(pair % dr->hp.n_head), g = h / group;
		attend_head(dr->att + (size_t)t * dr->q_dim + (size_t)h * hd, dr->q + (size_t)t * dr->q_dim + (size_t)h * hd,
			hd, scale, scores, kc + (size_t)g * hd, vc + (size_t)g * hd, n_ctx_keys, dr->k + (size_t)g * hd,
			dr->v + (size_t)g * hd, job->n_block, (size_t)dr->kv_dim);
	}
}

static int cpu_draft_propose(struct ember_backend *be, int32_t last_token, int pos, int depth, int32_t *out,
                             float *logits)
{
	struct cpu_draft *dr = be->draft;
	if (!dr)
		return ember_error_set(EMBER_ERROR, "draft_propose: no draft attached");
	const struct ember_draft *d = dr->d;
	const int B = d->block_size, n_embd = dr->hp.n_embd, n_vocab = be->hp.n_vocab;
	if (pos != dr->ctx_len || depth < 1 || depth > B - 1 || last_token < 0 || last_token >= n_vocab)
		return ember_error_set(EMBER_ERROR, "draft_propose at position %d, depth %d, token %d: the draft context holds "
		                       "%d positions, depth must be 1..%d", pos, depth, last_token, dr->ctx_len, B - 1);
	const size_t row_bytes = ember_type_row_size(d->token_embd.type, n_embd);
	for (int t = 0; t < B; t++)
		ember_dequantize_row(d->token_embd.type,
		                     (const uint8_t *)d->token_embd.data + (size_t)(t ? d->mask_token_id : last_token) * row_bytes,
		                     dr->x + (size_t)t * n_embd, n_embd);
	draft_rope_tables(dr, pos, B);
	for (int il = 0; il < dr->hp.n_layer; il++) {
		const struct ember_layer *l = &d->layers[il];
		for (int t = 0; t < B; t++)
			rms_norm(dr->xn + (size_t)t * n_embd, dr->x + (size_t)t * n_embd, l->attn_norm.data, n_embd, dr->hp.rms_eps);
		matmul(be, &l->attn_q, dr->xn, B, dr->q, dr->q_dim);
		matmul(be, &l->attn_k, dr->xn, B, dr->k, dr->kv_dim);
		matmul(be, &l->attn_v, dr->xn, B, dr->v, dr->kv_dim);
		draft_norm_rope(dr, dr->q, B, dr->hp.n_head, dr->q_dim, &l->attn_q_norm);
		draft_norm_rope(dr, dr->k, B, dr->hp.n_head_kv, dr->kv_dim, &l->attn_k_norm);
		struct draft_attn_job job = {be, il, B};
		const int64_t pairs = (int64_t)B * dr->hp.n_head;
		ember_pool_for(be->pool, pairs, (pairs + 4 * be->n_threads - 1) / (4 * be->n_threads), draft_attn_worker, &job);
		matmul(be, &l->attn_output, dr->att, B, dr->proj, n_embd);
		for (size_t i = 0; i < (size_t)B * n_embd; i++)
			dr->x[i] += dr->proj[i];
		for (int t = 0; t < B; t++)
			rms_norm(dr->xn + (size_t)t * n_embd, dr->x + (size_t)t * n_embd, l->ffn_norm.data, n_embd, dr->hp.rms_eps);
		matmul(be, &l->ffn_gate, dr->xn, B, dr->gate, dr->hp.n_ff);
		matmul(be, &l->ffn_up, dr->xn, B, dr->up, dr->hp.n_ff);
		for (size_t i = 0; i < (size_t)B * dr->hp.n_ff; i++) {
			const float g = dr->gate[i];
			dr->gate[i] = g / (1.0f + expf(-g)) * dr->up[i];
		}
		matmul(be, &l->ffn_down, dr->gate, B, dr->proj, n_embd);
		for (size_t i = 0; i < (size_t)B * n_embd; i++)
			dr->x[i] += dr->proj[i];
	}
	/* slots 1..depth through the final norm and the (target's) head */
	for (int t = 0; t < depth; t++)
		rms_norm(dr->xn + (size_t)t * n_embd, dr->x + (size_t)(t + 1) * n_embd, d->output_norm.data, n_embd,
		         dr->hp.rms_eps);
	float *lg = logits ? logits : dr->logits;
	matmul(be, &d->output, dr->xn, depth, lg, n_vocab);
	for (int t = 0; t < depth; t++)
		out[t] = argmax_row(lg + (size_t)t * n_vocab, n_vocab);
	return 0;
}

static void cpu_draft_free(struct cpu_draft *dr)
{
	if (!dr)
		return;
	float *bufs[] = {dr->k_ctx, dr->v_ctx, dr->x, dr->xn, dr->q, dr->k, dr->v, dr->att, dr->proj, dr->gate,
	                 dr->up, dr->feat, dr->rope_cos, dr->rope_sin, dr->logits};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
	free(dr);
}

static float *alloc_floats(size_t n, const char *what, int *failed);

/* Grows every thread's panel and score buffers to at least the given sizes. */
static int grow_thread_scratch(struct ember_backend *be, size_t panel, size_t scores)
{
	for (int i = 0; i < be->n_threads; i++) {
		if (panel > be->panel_floats) {
			float *p = realloc(be->ts[i].panel, panel * sizeof(float));
			if (!p)
				return ember_error_set(EMBER_ENOMEM, "out of memory growing the weight panels");
			be->ts[i].panel = p;
		}
		if (scores > be->scores_floats) {
			float *p = realloc(be->ts[i].scores, scores * sizeof(float));
			if (!p)
				return ember_error_set(EMBER_ENOMEM, "out of memory growing the attention scores");
			be->ts[i].scores = p;
		}
	}
	if (panel > be->panel_floats)
		be->panel_floats = panel;
	if (scores > be->scores_floats)
		be->scores_floats = scores;
	return 0;
}

static int cpu_draft_attach(struct ember_backend *be, const struct ember_draft *d)
{
	if (be->draft)
		return ember_error_set(EMBER_ERROR, "a draft is already attached");
	if (d->hp.n_embd != be->hp.n_embd || d->hp.n_vocab != be->hp.n_vocab || be->n_capture != d->n_target_layers ||
	    memcmp(be->capture_layers, d->target_layers, (size_t)d->n_target_layers * sizeof(int)) != 0)
		return ember_error_set(EMBER_ERROR, "draft does not fit this backend: n_embd %d/%d, n_vocab %d/%d, and the "
		                       "backend must capture the draft's %d target layers", d->hp.n_embd, be->hp.n_embd,
		                       d->hp.n_vocab, be->hp.n_vocab, d->n_target_layers);
	struct cpu_draft *dr = calloc(1, sizeof(*dr));
	int failed = 0;
	if (!dr)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	dr->d = d;
	dr->hp = d->hp;
	dr->q_dim = d->hp.n_head * d->hp.head_dim;
	dr->kv_dim = d->hp.n_head_kv * d->hp.head_dim;
	dr->rows = d->block_size > DRAFT_COMMIT_ROWS ? d->block_size : DRAFT_COMMIT_ROWS;
	const size_t R = (size_t)dr->rows, cache = (size_t)d->hp.n_layer * be->n_ctx * dr->kv_dim;
	const size_t n_embd = (size_t)d->hp.n_embd;
	dr->k_ctx = alloc_floats(cache, "the draft K cache", &failed);
	dr->v_ctx = alloc_floats(cache, "the draft V cache", &failed);
	dr->x = alloc_floats(R * n_embd, "draft activations", &failed);
	dr->xn = alloc_floats(R * n_embd, "draft activations", &failed);
	dr->feat = alloc_floats(R * n_embd, "draft activations", &failed);
	dr->proj = alloc_floats(R * n_embd, "draft activations", &failed);
	dr->q = alloc_floats(R * dr->q_dim, "draft activations", &failed);
	dr->att = alloc_floats(R * dr->q_dim, "draft activations", &failed);
	dr->k = alloc_floats(R * dr->kv_dim, "draft activations", &failed);
	dr->v = alloc_floats(R * dr->kv_dim, "draft activations", &failed);
	dr->gate = alloc_floats(R * d->hp.n_ff, "draft activations", &failed);
	dr->up = alloc_floats(R * d->hp.n_ff, "draft activations", &failed);
	dr->rope_cos = alloc_floats(R * (d->hp.head_dim / 2), "draft RoPE tables", &failed);
	dr->rope_sin = alloc_floats(R * (d->hp.head_dim / 2), "draft RoPE tables", &failed);
	dr->logits = alloc_floats((size_t)d->block_size * d->hp.n_vocab, "draft logits", &failed);
	size_t max_in = (size_t)d->fc.ne[0];
	const size_t ins[] = {(size_t)dr->q_dim, (size_t)d->hp.n_ff, n_embd};
	for (size_t i = 0; i < 3; i++)
		if (ins[i] > max_in)
			max_in = ins[i];
	if (failed || grow_thread_scratch(be, 2 * max_in, (size_t)be->n_ctx + (size_t)d->block_size)) {
		cpu_draft_free(dr);
		return EMBER_ENOMEM;
	}
	be->draft = dr;
	return 0;
}

/* ---- lifetime ---- */

static int cpu_available(char *why, size_t why_len)
{
	if (why && why_len)
		why[0] = '\0';
	return 1;
}

static const char *cpu_device_name(struct ember_backend *be) { return be->device; }

static void cpu_destroy(struct ember_backend *be)
{
	if (!be)
		return;
	ember_pool_free(be->pool);
	for (int i = 0; be->ts && i < be->n_threads; i++) {
		free(be->ts[i].panel);
		free(be->ts[i].scores);
	}
	free(be->ts);
	cpu_draft_free(be->draft);
	free(be->capture_layers);
	free(be->captured);
	free(be->k_cache);
	free(be->v_cache);
	float *bufs[] = {be->x, be->xn, be->q, be->k, be->v, be->att, be->proj, be->gate, be->up,
	                 be->rope_cos, be->rope_sin, be->head_logits};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
	free(be);
}

static float *alloc_floats(size_t n, const char *what, int *failed)
{
	float *p = NULL;
	if (*failed)
		return NULL;
	if (n > SIZE_MAX / sizeof(float) || !(p = calloc(n ? n : 1, sizeof(float)))) {
		ember_error_set(EMBER_ENOMEM, "out of memory allocating %s (%.1f MiB)", what,
		                (double)n * sizeof(float) / (1 << 20));
		*failed = 1;
	}
	return p;
}

static void cpu_describe(struct ember_backend *be, int n_threads)
{
	char model_name[128] = "cpu";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "model name", 10) == 0) {
				const char *v = strchr(line, ':');
				if (v) {
					v++;
					while (*v == ' ')
						v++;
					snprintf(model_name, sizeof(model_name), "%.*s", (int)strcspn(v, "\n"), v);
				}
				break;
			}
		fclose(f);
	}
	snprintf(be->device, sizeof(be->device), "cpu: %s, %d threads", model_name, n_threads);
}

static int cpu_create(struct ember_backend **out, const struct ember_model *model,
                      const struct ember_backend_config *config)
{
	struct ember_backend *be = calloc(1, sizeof(*be));
	int failed = 0;
	if (!be)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	be->model = model;
	be->hp = model->hp;
	const struct ember_hparams *hp = &be->hp;
	be->n_ctx = config && config->n_ctx > 0 ? config->n_ctx
	            : (hp->n_ctx_train < CPU_DEFAULT_CTX ? hp->n_ctx_train : CPU_DEFAULT_CTX);
	be->max_batch = config && config->max_batch > 0 ? config->max_batch : CPU_DEFAULT_BATCH;
	if (be->max_batch > be->n_ctx)
		be->max_batch = be->n_ctx;
	int n_threads = config && config->n_threads > 0 ? config->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > 512)
		n_threads = 512;
	be->q_dim = hp->n_head * hp->head_dim;
	be->kv_dim = hp->n_head_kv * hp->head_dim;
	be->max_in = hp->n_embd > be->q_dim ? hp->n_embd : be->q_dim;
	if (hp->n_ff > be->max_in)
		be->max_in = hp->n_ff;

	const size_t B = (size_t)be->max_batch, cache = (size_t)hp->n_layer * be->n_ctx * be->kv_dim;
	be->k_cache = alloc_floats(cache, "the K cache", &failed);
	be->v_cache = alloc_floats(cache, "the V cache", &failed);
	be->x = alloc_floats(B * hp->n_embd, "activations", &failed);
	be->xn = alloc_floats(B * hp->n_embd, "activations", &failed);
	be->q = alloc_floats(B * be->q_dim, "activations", &failed);
	be->att = alloc_floats(B * be->q_dim, "activations", &failed);
	be->k = alloc_floats(B * be->kv_dim, "activations", &failed);
	be->v = alloc_floats(B * be->kv_dim, "activations", &failed);
	be->proj = alloc_floats(B * hp->n_embd, "activations", &failed);
	be->gate = alloc_floats(B * hp->n_ff, "activations", &failed);
	be->up = alloc_floats(B * hp->n_ff, "activations", &failed);
	be->rope_cos = alloc_floats(B * (hp->head_dim / 2), "RoPE tables", &failed);
	be->rope_sin = alloc_floats(B * (hp->head_dim / 2), "RoPE tables", &failed);
	be->head_logits = alloc_floats((size_t)HEAD_CHUNK * hp->n_vocab, "logits scratch", &failed);
	if (failed)
		goto fail;
	if (config && config->n_capture > 0) {
		for (int j = 0; j < config->n_capture; j++)
			if (config->capture_layers[j] < 0 || config->capture_layers[j] >= hp->n_layer) {
				ember_error_set(EMBER_ERROR, "capture layer %d is outside the model's %d layers",
				                config->capture_layers[j], hp->n_layer);
				goto fail_other;
			}
		if (!(be->capture_layers = malloc((size_t)config->n_capture * sizeof(int)))) {
			ember_error_set(EMBER_ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(be->capture_layers, config->capture_layers, (size_t)config->n_capture * sizeof(int));
		be->n_capture = config->n_capture;
		be->captured = alloc_floats((size_t)be->n_ctx * be->n_capture * hp->n_embd, "captured hidden states", &failed);
		if (failed)
			goto fail;
	}
	if (ember_pool_create(&be->pool, n_threads))
		goto fail;
	if (!(be->ts = calloc((size_t)n_threads, sizeof(*be->ts)))) {
		ember_error_set(EMBER_ENOMEM, "out of memory");
		goto fail;
	}
	be->n_threads = n_threads;
	size_t panel = PANEL_BYTES / sizeof(float);
	if (panel < 2 * (size_t)be->max_in)
		panel = 2 * (size_t)be->max_in;
	for (int i = 0; i < n_threads; i++) {
		be->ts[i].panel = alloc_floats(panel, "weight panels", &failed);
		be->ts[i].scores = alloc_floats((size_t)be->n_ctx, "attention scores", &failed);
	}
	if (failed)
		goto fail;
	be->panel_floats = panel;
	be->scores_floats = (size_t)be->n_ctx;
	cpu_describe(be, n_threads);
	*out = be;
	return 0;
fail:
	cpu_destroy(be);
	return EMBER_ENOMEM;
fail_other:
	cpu_destroy(be);
	return EMBER_ERROR;
}

const struct ember_backend_ops ember_backend_cpu_ops = {
	.name = "cpu",
	.available = cpu_available,
	.create = cpu_create,
	.forward = cpu_forward,
	.decode_greedy = cpu_decode_greedy,
	.draft_attach = cpu_draft_attach,
	.draft_commit = cpu_draft_commit,
	.draft_propose = cpu_draft_propose,
	.device_name = cpu_device_name,
	.destroy = cpu_destroy,
};

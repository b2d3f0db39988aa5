/*
 * backend_cpu.c - ember's reference backend: the Qwen3 forward in fp32 with fp32 accumulation,
 * weights left quantized and dequantized on the fly. A batch of tokens goes through each layer
 * at once: every weight row is dequantized once into a per-thread panel and dotted with all
 * tokens of the chunk; attention is causal over the cache plus the batch. Rows of each matrix are
 * split across a persistent thread pool; every output element is computed by one thread in a
 * fixed order, so results do not depend on the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
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
		const int n_keys = job->pos + t + 1;
		const float *qv = be->q + (size_t)t * be->q_dim + (size_t)h * hd;
		float *out = be->att + (size_t)t * be->q_dim + (size_t)h * hd;
		float max = -INFINITY;
		for (int j = 0; j < n_keys; j++) {
			scores[j] = ember_dot_f32(qv, kc + (size_t)j * be->kv_dim + (size_t)g * hd, hd) * scale;
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
			const float *vv = vc + (size_t)j * be->kv_dim + (size_t)g * hd;
			const float p = scores[j];
			for (int i = 0; i < hd; i++)
				out[i] += p * vv[i];
		}
		const float inv = (float)(1.0 / sum);
		for (int i = 0; i < hd; i++)
			out[i] *= inv;
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
	cpu_describe(be, n_threads);
	*out = be;
	return 0;
fail:
	cpu_destroy(be);
	return EMBER_ENOMEM;
}

const struct ember_backend_ops ember_backend_cpu_ops = {
	.name = "cpu",
	.available = cpu_available,
	.create = cpu_create,
	.forward = cpu_forward,
	.decode_greedy = cpu_decode_greedy,
	.device_name = cpu_device_name,
	.destroy = cpu_destroy,
};

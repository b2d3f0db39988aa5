/*
 * cuda_backend.c - ember's CUDA backend: device discovery, the EMBER_* switches, and loading a
 * model onto the GPU. Each weight matrix is uploaded once in its raw GGUF form through a staging
 * buffer and turned on the device into (a) the decode copy, tiled for the tensor-core GEMV (or kept
 * raw for the simple GEMV) and (b) an fp16 copy for the prefill GEMMs (cuBLAS); Q/K/V and
 * gate/up are concatenated so a prefill layer runs four GEMMs. Everything is sized before the first
 * allocation, so running out of memory is one clear message with the sizes involved.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "cuda_backend.h"
#include "error.h"
#include "gemm.cuh"
#include "gemv_window.cuh"
#include "layout.cuh"
#include "repack.cuh"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end = NULL;
	long x = strtol(v, &end, 10);
	return end && *end == '\0' ? (int)x : dflt;
}

static int env_choice(const char *name, const char *first, const char *second, int dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	if (strcmp(v, first) == 0 || strcmp(v, "1") == 0)
		return 1;
	if (strcmp(v, second) == 0 || strcmp(v, "0") == 0)
		return 0;
	return dflt;
}

static void read_options(struct cuda_options *o)
{
	o->graphs = env_int("EMBER_GRAPHS", 1) != 0;
	o->gemv_mma = env_choice("EMBER_GEMV", "mma", "simple", 1);
	o->attn_split = env_int("EMBER_ATTN_SPLIT", 0);
	o->attn_lean = env_int("EMBER_ATTN_LEAN", 1) != 0;
	o->attn_pdl = env_int("EMBER_ATTN_PDL", 0) != 0;
	o->fa_mma = env_choice("EMBER_FA", "mma", "simple", 1);
	o->prefill_chunk = env_int("EMBER_PREFILL_CHUNK", 0);
	o->pdl = env_int("EMBER_PDL", 1) != 0;
	o->gemv_stream = env_int("EMBER_GEMV_STREAM", 1) != 0;
	o->gemv_warps = env_int("EMBER_GEMV_WARPS", 8) == 4 ? 4 : 8;
	o->gemv_ring = env_int("EMBER_GEMV_RING", 3);
	o->gemv_ctas = env_int("EMBER_GEMV_CTAS", 0);
	o->verify = env_int("EMBER_VERIFY", 1) != 0;
	o->win_split = env_int("EMBER_WIN_SPLIT", 1);
	o->win_split = o->win_split < 0 ? 0 : o->win_split > 2 ? 2 : o->win_split;
	o->win_warps = env_int("EMBER_WIN_WARPS", 8) == 12 ? 12 : 8;
	o->win_pdl = env_int("EMBER_WIN_PDL", 0) != 0;
	o->win_shared = env_choice("EMBER_WIN_ATTN", "shared", "token", 1);
	o->gemm_bucket = env_int("EMBER_GEMM_BUCKET", 64);
	o->prefill_warm = env_int("EMBER_PREFILL_WARM", 1) != 0;
	o->draft_block_attn = env_choice("EMBER_DRAFT_ATTN", "block", "window", 1);
	o->draft_q8 = env_choice("EMBER_DRAFT_WEIGHTS", "q8", "f16", 2);
}

static int cuda_available(char *why, size_t why_len)
{
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess || n <= 0) {
		if (why && why_len)
			snprintf(why, why_len, "no CUDA device: %s", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
		(void)cudaGetLastError();
		return 0;
	}
	return 1;
}

static const char *cuda_device_name(struct ember_backend *be) { return be->device_name; }

static void *dev_alloc(size_t bytes, int *error)
{
	void *p = NULL;
	if (*error)
		return NULL;
	cudaError_t err = cudaMalloc(&p, bytes ? bytes : 16);
	if (err != cudaSuccess) {
		size_t free_b = 0, total_b = 0;
		(void)cudaGetLastError();
		cudaMemGetInfo(&free_b, &total_b);
		*error = ember_error_set(EMBER_ENOMEM, "cudaMalloc of %.3f GiB failed (%s); %.2f GiB of %.2f GiB free",
		                         bytes / GIB, cudaGetErrorString(err), free_b / GIB, total_b / GIB);
		return NULL;
	}
	return p;
}

static void free_matrix(struct cuda_matrix *m)
{
	cudaFree(m->dec);
	m->dec = NULL;
}

static void cuda_destroy(struct ember_backend *be)
{
	if (!be)
		return;
	ember_cuda_draft_free(be->draft);
	if (be->graph)
		cudaGraphExecDestroy(be->graph);
	for (int i = 0; i < 17; i++)
		if (be->w_graph[i])
			cudaGraphExecDestroy(be->w_graph[i]);
	if (be->layers) {
		for (int l = 0; l < be->hp.n_layer; l++) {
			struct cuda_layer *L = &be->layers[l];
			struct cuda_matrix *ms[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
			for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
				free_matrix(ms[i]);
			cudaFree(L->attn_norm);
			cudaFree(L->ffn_norm);
			cudaFree(L->q_norm);
			cudaFree(L->k_norm);
			cudaFree(L->f16_qkv);
			cudaFree(L->f16_o);
			cudaFree(L->f16_gu);
			cudaFree(L->f16_down);
		}
		free(be->layers);
	}
	free_matrix(&be->head);
	void *bufs[] = {be->f16_head, be->embd_raw, be->output_norm, be->kv, be->rope_cos, be->rope_sin, be->state,
	                be->out_tokens, be->x, be->qkv, be->logits, be->attn, be->ffh, be->part_o, be->part_ml,
	                be->counters, be->p_tokens, be->p_argmax, be->p_x,
	                be->p_qkv, be->p_gu, be->p_logits, be->p_xn, be->p_q, be->p_attn, be->p_h,
	                be->w_state, be->w_tokens, be->w_argmax, be->w_x, be->w_qkv, be->w_logits, be->w_sx,
	                be->w_part_o, be->w_part_ml, be->w_attn, be->w_ffh, be->w_xs, be->w_counters, be->w_split_part, be->w_split_cnt, be->cap};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		cudaFree(bufs[i]);
	if (be->h_state)
		cudaFreeHost(be->h_state);
	if (be->w_host)
		cudaFreeHost(be->w_host);
	free(be->cap_slot);
	ember_gemm_destroy(be->cublas);
	if (be->stream)
		cudaStreamDestroy(be->stream);
	free(be);
}

/* Decode-copy bytes of one matrix under the current GEMV variant. */
static size_t dec_bytes(const struct cuda_options *o, const struct ember_tensor *t)
{
	if (o->gemv_mma && ember_tile_type_supported((int)t->type))
		return ember_repack_bytes((int)t->type, t->ne[1], t->ne[0]);
	return t->nbytes;
}

/* Uploads tensor t (raw) to `staging`, then builds its decode copy and, when f16_dst is not NULL,
 * its fp16 rows at f16_dst. */
static int upload_matrix(struct ember_backend *be, struct cuda_matrix *m, const struct ember_tensor *t, void *staging,
                         void *f16_dst, int *error)
{
	m->type = (int)t->type;
	m->rows = (int)t->ne[1];
	m->cols = (int)t->ne[0];
	m->dec_tiled = be->opt.gemv_mma && ember_tile_type_supported(m->type);
	m->dec_bytes = dec_bytes(&be->opt, t);
	m->dec = dev_alloc(m->dec_bytes, error);
	if (*error)
		return *error;
	CUDA_CHECK(cudaMemcpyAsync(staging, t->data, t->nbytes, cudaMemcpyHostToDevice, be->stream));
	if (m->dec_tiled) {
		int rc = ember_repack_tiles(m->dec, m->type, staging, m->rows, m->cols, be->stream);
		if (rc)
			return ember_error_wrap(rc, "repacking %s", t->name);
	} else {
		CUDA_CHECK(cudaMemcpyAsync(m->dec, staging, t->nbytes, cudaMemcpyDeviceToDevice, be->stream));
	}
	if (f16_dst) {
		int rc = ember_dequant_f16(f16_dst, m->type, staging, m->rows, m->cols, be->stream);
		if (rc)
			return ember_error_wrap(rc, "dequantizing %s", t->name);
	}
	/* The staging buffer is reused by the next upload. */
	CUDA_CHECK(cudaStreamSynchronize(be->stream));
	return 0;
}

static float *upload_f32(struct ember_backend *be, const struct ember_tensor *t, int *error)
{
	float *p = dev_alloc(t->nbytes, error);
	if (*error)
		return NULL;
	cudaError_t err = cudaMemcpyAsync(p, t->data, t->nbytes, cudaMemcpyHostToDevice, be->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(be->stream);
	if (err != cudaSuccess) {
		*error = ember_cuda_fail(err, "cudaMemcpy(norm weights)", __FILE__, __LINE__);
		return NULL;
	}
	return p;
}

static int check_model(const struct ember_model *model)
{
	const struct ember_hparams *hp = &model->hp;
	if (hp->head_dim != 64 && hp->head_dim != 128)
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda backend: head_dim %d not supported (64 or 128)", hp->head_dim);
	const int group = hp->n_head / hp->n_head_kv;
	if (hp->n_head % hp->n_head_kv != 0 || (group != 1 && group != 2 && group != 4 && group != 8))
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda backend: GQA group %d/%d not supported (1, 2, 4, 8)", hp->n_head,
		                       hp->n_head_kv);
	const struct ember_tensor *norms[] = {&model->output_norm};
	if (norms[0]->type != EMBER_TYPE_F32)
		return ember_error_set(EMBER_EUNSUPPORTED, "cuda backend: output_norm must be F32");
	for (int l = 0; l < hp->n_layer; l++) {
		const struct ember_layer *L = &model->layers[l];
		const struct ember_tensor *n4[] = {&L->attn_norm, &L->ffn_norm, &L->attn_q_norm, &L->attn_k_norm};
		for (int i = 0; i < 4; i++)
			if (n4[i]->type != EMBER_TYPE_F32)
				return ember_error_set(EMBER_EUNSUPPORTED, "cuda backend: %s must be F32", n4[i]->name);
	}
	return 0;
}

static int cuda_create(struct ember_backend **out, const struct ember_model *model,
                       const struct ember_backend_config *config)
{
	struct ember_backend *be = NULL;
	void *staging = NULL;
	int error = 0;

	if ((error = check_model(model)))
		return error;
	be = calloc(1, sizeof(*be));
	if (!be)
		return ember_error_set(EMBER_ENOMEM, "cuda backend: out of host memory");
	be->model = model;
	be->hp = model->hp;
	read_options(&be->opt);
	const struct ember_hparams *hp = &be->hp;
	const int hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd, E = hp->n_embd, F = hp->n_ff;
	const int V = hp->n_vocab, group = hp->n_head / hp->n_head_kv;

	be->device = config ? config->device : 0;
	CUDA_CHECK_GOTO(cudaSetDevice(be->device));
	struct cudaDeviceProp prop;
	CUDA_CHECK_GOTO(cudaGetDeviceProperties(&prop, be->device));
	be->n_sm = prop.multiProcessorCount;
	snprintf(be->device_name, sizeof(be->device_name), "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
	         prop.totalGlobalMem / GIB);
	if (prop.major < 8) {
		error = ember_error_set(EMBER_EUNSUPPORTED, "cuda backend: %s is sm_%d%d; ember's kernels need sm_80 or newer",
		                        prop.name, prop.major, prop.minor);
		goto cleanup;
	}
	CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking));

	/* Sizes: context, chunk, splits. */
	be->n_ctx = config && config->n_ctx > 0 ? config->n_ctx : hp->n_ctx_train;
	if (be->n_ctx > 65536 && !(config && config->n_ctx > 0))
		be->n_ctx = 65536;
	be->chunk = be->opt.prefill_chunk > 0 ? be->opt.prefill_chunk : (config && config->max_batch > 0 ? config->max_batch : 4096);
	if (be->chunk > be->n_ctx)
		be->chunk = be->n_ctx;
	be->logit_rows = be->chunk < 256 ? be->chunk : 256;
	be->n_split = be->opt.attn_split > 0 ? be->opt.attn_split : (2 * be->n_sm + hp->n_head_kv - 1) / hp->n_head_kv;
	if (be->n_split > 128)
		be->n_split = 128;
	if (be->n_split > (be->n_ctx + 127) / 128)
		be->n_split = (be->n_ctx + 127) / 128;
	if (be->n_split < 1)
		be->n_split = 1;

	/* Hidden-state capture: which layers, and room for the rows of one chunk (or window). */
	if (config && config->n_capture > 0) {
		if (!config->capture_layers || config->n_capture > hp->n_layer) {
			error = ember_error_set(EMBER_ERROR, "cuda backend: %d capture layers (of %d) without a valid list",
			                        config->n_capture, hp->n_layer);
			goto cleanup;
		}
		be->cap_slot = malloc((size_t)hp->n_layer * sizeof(int));
		if (!be->cap_slot) {
			error = ember_error_set(EMBER_ENOMEM, "cuda backend: out of host memory");
			goto cleanup;
		}
		for (int l = 0; l < hp->n_layer; l++)
			be->cap_slot[l] = -1;
		for (int i = 0; i < config->n_capture; i++) {
			const int l = config->capture_layers[i];
			if (l < 0 || l >= hp->n_layer || be->cap_slot[l] >= 0) {
				error = ember_error_set(EMBER_ERROR, "cuda backend: capture layer %d is outside [0, %d) or repeated", l,
				                        hp->n_layer);
				goto cleanup;
			}
			be->cap_slot[l] = i;
		}
		be->n_capture = config->n_capture;
		be->cap_rows = be->chunk > EMBER_WINDOW_MAX ? be->chunk : EMBER_WINDOW_MAX;
	}
	/* The verify window reproduces the decode step when every matrix is tiled, attention is the
	 * lean kernel and the row widths keep the staging's vector paths (multiples of 16). */
	be->win_ok = be->opt.verify && be->opt.gemv_mma && be->opt.attn_lean && E % 16 == 0 && qd % 16 == 0 &&
	             kvd % 16 == 0 && F % 16 == 0 && ember_tile_type_supported((int)model->output.type);
	for (int l = 0; l < hp->n_layer && be->win_ok; l++) {
		const struct ember_layer *L = &model->layers[l];
		const struct ember_tensor *ts[] = {&L->attn_q, &L->attn_k, &L->attn_v, &L->attn_output, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
		for (int i = 0; i < 7; i++)
			be->win_ok &= ember_tile_type_supported((int)ts[i]->type);
	}
	const int WM = EMBER_WINDOW_MAX;
	const int k_max = E > qd ? (E > F ? E : F) : (qd > F ? qd : F);
	const size_t k_max_pad = (size_t)(k_max + 255) / 256 * 256;
	const size_t bytes_win = (size_t)WM * (4 * E + 4 * (qd + 2 * kvd) + 4 * (size_t)V + 2 * qd + 2 * F + 2 * k_max_pad +
	                                       4 * (k_max_pad / 16) + 8) +
	                         (size_t)WM * hp->n_head_kv * be->n_split * group * (hd + 2) * 4 + (size_t)WM * hp->n_head_kv * 4;
	/* The split window GEMV's scratch: every GEMV of a layer but the LM head (qkv, o, gate/up, down). */
	be->w_split_jobs = (qd + 15) / 16 + 2 * ((kvd + 15) / 16) + (E + 15) / 16 + 2 * ((F + 15) / 16);
	const size_t bytes_split = (size_t)be->w_split_jobs * (8 * WM * 16 * 4 + 4);
	const size_t bytes_cap = (size_t)be->cap_rows * be->n_capture * E * 4;

	/* Plan every byte first, so an out-of-memory is one message with the sizes. */
	size_t max_raw = model->token_embd.nbytes > model->output.nbytes ? model->token_embd.nbytes : model->output.nbytes;
	be->bytes_weights = dec_bytes(&be->opt, &model->output) + model->token_embd.nbytes;
	for (int l = 0; l < hp->n_layer; l++) {
		const struct ember_layer *L = &model->layers[l];
		const struct ember_tensor *ts[] = {&L->attn_q, &L->attn_k, &L->attn_v, &L->attn_output, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
		for (int i = 0; i < 7; i++) {
			be->bytes_weights += dec_bytes(&be->opt, ts[i]);
			if (ts[i]->nbytes > max_raw)
				max_raw = ts[i]->nbytes;
		}
	}
	be->bytes_f16 = 2 * ((size_t)hp->n_layer * ((size_t)(qd + 2 * kvd) * E + (size_t)E * qd + 3 * (size_t)F * E) + (size_t)V * E);
	be->bytes_kv = (size_t)hp->n_layer * 2 * hp->n_head_kv * (size_t)be->n_ctx * hd * 2;
	const size_t B = (size_t)be->chunk;
	be->bytes_scratch = max_raw + (size_t)be->n_ctx * hd * 4 + B * (4 * E + 2 * E + 4 * (qd + 2 * kvd) + 2 * qd * 2 + 4 * 2 * F + 2 * F + 8) +
	                    (size_t)be->logit_rows * V * 4 + (size_t)V * 4 + (size_t)hp->n_head_kv * be->n_split * group * (hd + 2) * 4 +
	                    bytes_win + bytes_split + bytes_cap;
	{
		size_t free_b = 0, total_b = 0;
		CUDA_CHECK_GOTO(cudaMemGetInfo(&free_b, &total_b));
		const size_t need = be->bytes_weights + be->bytes_f16 + be->bytes_kv + be->bytes_scratch + (256u << 20);
		if (need > free_b) {
			error = ember_error_set(EMBER_ENOMEM,
			                        "cuda backend: %s needs %.2f GiB on %s (decode weights %.2f, fp16 prefill weights %.2f, "
			                        "KV cache %.2f for %d positions, scratch %.2f) but only %.2f GiB are free; "
			                        "lower n_ctx or EMBER_PREFILL_CHUNK",
			                        model->name, need / GIB, prop.name, be->bytes_weights / GIB, be->bytes_f16 / GIB,
			                        be->bytes_kv / GIB, be->n_ctx, be->bytes_scratch / GIB, free_b / GIB);
			goto cleanup;
		}
	}

	if ((error = ember_gemm_create(&be->cublas, be->stream)))
		goto cleanup;
	staging = dev_alloc(max_raw, &error);
	be->layers = calloc((size_t)hp->n_layer, sizeof(*be->layers));
	if (!be->layers && !error)
		error = ember_error_set(EMBER_ENOMEM, "cuda backend: out of host memory");
	if (error)
		goto cleanup;

	for (int l = 0; l < hp->n_layer && !error; l++) {
		const struct ember_layer *ml = &model->layers[l];
		struct cuda_layer *L = &be->layers[l];
		L->f16_qkv = dev_alloc((size_t)(qd + 2 * kvd) * E * 2, &error);
		L->f16_o = dev_alloc((size_t)E * qd * 2, &error);
		L->f16_gu = dev_alloc((size_t)2 * F * E * 2, &error);
		L->f16_down = dev_alloc((size_t)E * F * 2, &error);
		L->attn_norm = upload_f32(be, &ml->attn_norm, &error);
		L->ffn_norm = upload_f32(be, &ml->ffn_norm, &error);
		L->q_norm = upload_f32(be, &ml->attn_q_norm, &error);
		L->k_norm = upload_f32(be, &ml->attn_k_norm, &error);
		if (error)
			break;
		char *qkv16 = L->f16_qkv, *gu16 = L->f16_gu;
		if (upload_matrix(be, &L->q, &ml->attn_q, staging, qkv16, &error) ||
		    upload_matrix(be, &L->k, &ml->attn_k, staging, qkv16 + (size_t)qd * E * 2, &error) ||
		    upload_matrix(be, &L->v, &ml->attn_v, staging, qkv16 + (size_t)(qd + kvd) * E * 2, &error) ||
		    upload_matrix(be, &L->o, &ml->attn_output, staging, L->f16_o, &error) ||
		    upload_matrix(be, &L->gate, &ml->ffn_gate, staging, gu16, &error) ||
		    upload_matrix(be, &L->up, &ml->ffn_up, staging, gu16 + (size_t)F * E * 2, &error) ||
		    upload_matrix(be, &L->down, &ml->ffn_down, staging, L->f16_down, &error)) {
			if (!error)
				error = EMBER_ERROR;
			goto cleanup;
		}
	}
	if (error)
		goto cleanup;
	be->f16_head = dev_alloc((size_t)V * E * 2, &error);
	be->output_norm = upload_f32(be, &model->output_norm, &error);
	be->embd_raw = dev_alloc(model->token_embd.nbytes, &error);
	if (error)
		goto cleanup;
	be->embd_type = (int)model->token_embd.type;
	CUDA_CHECK_GOTO(cudaMemcpyAsync(be->embd_raw, model->token_embd.data, model->token_embd.nbytes, cudaMemcpyHostToDevice,
	                                be->stream));
	CUDA_CHECK_GOTO(cudaStreamSynchronize(be->stream));
	if (upload_matrix(be, &be->head, &model->output, staging, be->f16_head, &error)) {
		if (!error)
			error = EMBER_ERROR;
		goto cleanup;
	}

	/* KV cache (zeroed: masked-out rows must never hold NaN bit patterns) and RoPE tables. */
	be->kv = dev_alloc(be->bytes_kv, &error);
	be->rope_cos = dev_alloc((size_t)be->n_ctx * hd / 2 * 4, &error);
	be->rope_sin = dev_alloc((size_t)be->n_ctx * hd / 2 * 4, &error);
	if (error)
		goto cleanup;
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->kv, 0, be->bytes_kv, be->stream));
	{
		const size_t n = (size_t)be->n_ctx * hd / 2;
		float *c = malloc(n * 4), *s = malloc(n * 4);
		if (!c || !s) {
			free(c);
			free(s);
			error = ember_error_set(EMBER_ENOMEM, "cuda backend: out of host memory for RoPE tables");
			goto cleanup;
		}
		for (int p = 0; p < be->n_ctx; p++)
			for (int i = 0; i < hd / 2; i++) {
				const double angle = (double)p * pow((double)hp->rope_theta, -2.0 * i / hd);
				c[(size_t)p * (hd / 2) + i] = (float)cos(angle);
				s[(size_t)p * (hd / 2) + i] = (float)sin(angle);
			}
		cudaError_t e1 = cudaMemcpyAsync(be->rope_cos, c, n * 4, cudaMemcpyHostToDevice, be->stream);
		cudaError_t e2 = cudaMemcpyAsync(be->rope_sin, s, n * 4, cudaMemcpyHostToDevice, be->stream);
		if (e1 == cudaSuccess && e2 == cudaSuccess)
			e1 = cudaStreamSynchronize(be->stream);
		free(c);
		free(s);
		CUDA_CHECK_GOTO(e1);
		CUDA_CHECK_GOTO(e2);
	}

	/* Decode-step buffers and device state. */
	be->state = dev_alloc(sizeof(struct ember_decode_state), &error);
	be->out_tokens = dev_alloc((size_t)be->n_ctx * 4, &error);
	be->x = dev_alloc((size_t)E * 4, &error);
	be->qkv = dev_alloc((size_t)(qd + 2 * kvd) * 4, &error);
	be->logits = dev_alloc((size_t)V * 4, &error);
	be->attn = dev_alloc((size_t)qd * 2, &error);
	be->ffh = dev_alloc((size_t)F * 2, &error);
	be->part_o = dev_alloc((size_t)hp->n_head_kv * be->n_split * group * hd * 4, &error);
	be->part_ml = dev_alloc((size_t)hp->n_head_kv * be->n_split * group * 2 * 4, &error);
	be->counters = dev_alloc((size_t)hp->n_head_kv * 4, &error);
	/* Prefill chunk buffers. */
	be->p_tokens = dev_alloc(B * 4, &error);
	be->p_argmax = dev_alloc(B * 4, &error);
	be->p_x = dev_alloc(B * E * 4, &error);
	be->p_xn = dev_alloc(B * E * 2, &error);
	be->p_qkv = dev_alloc(B * (qd + 2 * kvd) * 4, &error);
	be->p_q = dev_alloc(B * qd * 2, &error);
	be->p_attn = dev_alloc(B * qd * 2, &error);
	be->p_gu = dev_alloc(B * 2 * F * 4, &error);
	be->p_h = dev_alloc(B * F * 2, &error);
	be->p_logits = dev_alloc((size_t)be->logit_rows * V * 4, &error);
	/* Verify-window buffers and the capture. */
	be->w_state = dev_alloc(sizeof(struct ember_decode_state), &error);
	be->w_tokens = dev_alloc((size_t)WM * 4, &error);
	be->w_argmax = dev_alloc((size_t)WM * 4, &error);
	be->w_x = dev_alloc((size_t)WM * E * 4, &error);
	be->w_qkv = dev_alloc((size_t)WM * (qd + 2 * kvd) * 4, &error);
	be->w_logits = dev_alloc((size_t)WM * V * 4, &error);
	be->w_attn = dev_alloc((size_t)WM * qd * 2, &error);
	be->w_ffh = dev_alloc((size_t)WM * F * 2, &error);
	be->w_xs = dev_alloc((size_t)WM * k_max_pad * 2, &error);
	be->w_sx = dev_alloc((size_t)WM * (k_max_pad / 16) * 4, &error);
	be->w_part_o = dev_alloc((size_t)WM * hp->n_head_kv * be->n_split * group * hd * 4, &error);
	be->w_part_ml = dev_alloc((size_t)WM * hp->n_head_kv * be->n_split * group * 2 * 4, &error);
	be->w_counters = dev_alloc((size_t)WM * hp->n_head_kv * 4, &error);
	be->w_split_part = dev_alloc((size_t)be->w_split_jobs * 8 * WM * 16 * 4, &error);
	be->w_split_cnt = dev_alloc((size_t)be->w_split_jobs * 4, &error);
	if (be->n_capture)
		be->cap = dev_alloc(bytes_cap, &error);
	if (error)
		goto cleanup;
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->w_counters, 0, (size_t)WM * hp->n_head_kv * 4, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->w_split_cnt, 0, (size_t)be->w_split_jobs * 4, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->w_state, 0, sizeof(struct ember_decode_state), be->stream));
	CUDA_CHECK_GOTO(cudaMallocHost((void **)&be->w_host, sizeof(struct cuda_win_host)));
	memset(be->w_host, 0, sizeof(*be->w_host));
	CUDA_CHECK_GOTO(cudaMallocHost((void **)&be->h_state, sizeof(struct ember_decode_state)));
	memset(be->h_state, 0, sizeof(*be->h_state));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->state, 0, sizeof(struct ember_decode_state), be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->counters, 0, (size_t)hp->n_head_kv * 4, be->stream));
	/* The rows past a request's count that a bucketed GEMM reads: defined values, never NaN noise. */
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->p_x, 0, B * E * 4, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->p_xn, 0, B * E * 2, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->p_attn, 0, B * qd * 2, be->stream));
	CUDA_CHECK_GOTO(cudaMemsetAsync(be->p_h, 0, B * F * 2, be->stream));
	CUDA_CHECK_GOTO(cudaStreamSynchronize(be->stream));
	cudaFree(staging);
	staging = NULL;
	if ((error = ember_cuda_prefill_warm(be)))
		goto cleanup;
	*out = be;
	be = NULL;
	error = 0;
cleanup:
	cudaFree(staging);
	cuda_destroy(be);
	return error;
}

static int cuda_forward_op(struct ember_backend *be, const int32_t *tokens, int n_tokens, int pos, int all_rows,
                           float *logits, int32_t *argmax)
{
	return ember_cuda_forward(be, tokens, n_tokens, pos, all_rows, logits, argmax);
}

static int cuda_decode_greedy_op(struct ember_backend *be, int32_t token, int pos, int n_steps, int32_t *out_tokens)
{
	return ember_cuda_decode_greedy(be, token, pos, n_steps, out_tokens);
}

/* The capture keeps the last prefill chunk of a forward call (cuda_run.c). */
static int cuda_capture_rows(struct ember_backend *be)
{
	return be->chunk;
}

const struct ember_backend_ops ember_backend_cuda_ops = {
	.name = "cuda",
	.available = cuda_available,
	.create = cuda_create,
	.forward = cuda_forward_op,
	.decode_greedy = cuda_decode_greedy_op,
	.draft_attach = ember_cuda_draft_attach,
	.draft_commit = ember_cuda_draft_commit,
	.draft_propose = ember_cuda_draft_propose,
	.capture_rows = cuda_capture_rows,
	.device_name = cuda_device_name,
	.destroy = cuda_destroy,
};

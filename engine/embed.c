/*
 * embed.c - ember gen --embed (see embed.h): a map from the big shape's rows and columns back to
 * the small model's, and a fill function for gen's parallel writer that dequantizes the small row
 * a big row comes from and scatters it (or writes zeros). The small files stay mmapped; memory is
 * a row per thread.
 */
#include "embed.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft.h"
#include "error.h"
#include "gen_int.h"
#include "model.h"
#include "quant.h"

#define MAX_HEADS 256
#define SMALL_ROW_MAX 16384   /* floats of the longest small row a big row is built from */

/* Where the big heads' rows come from, for one decoder (the target's layers or the draft's). */
struct head_map {
	int hd_s, hd_b;                 /* head_dim small / big */
	int n_head_b, n_kv_b;
	int small_head[MAX_HEADS];      /* big query head -> small head, -1: unused */
	int small_kv[MAX_HEADS];        /* big KV head -> small KV head, -1: unused */
	int big_head[MAX_HEADS];        /* small head -> big query head */
};

/* One decoder's sources: its layers and hyper-parameters. */
struct source {
	const struct ember_hparams *hp;
	const struct ember_layer *layers;
	struct head_map heads;
};

struct embed_job {
	const struct ember_model *target;    /* small */
	const struct ember_draft *draft;     /* small, NULL while writing the target */
	const struct ember_gen_shape *big;   /* the big decoder's shape (draft: n_layer = the draft's) */
	struct source src;                   /* the decoder being written */
	int d_s, d_b;
	float norm_scale;                    /* sqrt(d / D) */
	float k_norm_scale;                  /* sqrt(hd / HD) */
};

/* Big head-dim index -> small, -1 for the zero dimensions (NEOX pairs keep their partner). */
static int head_dim_src(const struct head_map *m, int j)
{
	const int half_s = m->hd_s / 2, half_b = m->hd_b / 2;
	if (j < half_b)
		return j < half_s ? j : -1;
	return j - half_b < half_s ? half_s + (j - half_b) : -1;
}

static int head_dim_dst(const struct head_map *m, int i)
{
	return i < m->hd_s / 2 ? i : m->hd_b / 2 + (i - m->hd_s / 2);
}

/* Small heads h (KV head h / g_s) onto big heads: each small KV head is copied into
 * ceil(g_s / g_b) consecutive big KV heads, whose g_b query slots take its query heads in order. */
static int head_map_make(struct head_map *m, const struct ember_hparams *s, const struct ember_gen_shape *b)
{
	memset(m, 0, sizeof(*m));
	m->hd_s = s->head_dim;
	m->hd_b = b->head_dim;
	m->n_head_b = b->n_head;
	m->n_kv_b = b->n_head_kv;
	if (s->n_head > MAX_HEADS || b->n_head > MAX_HEADS || s->n_head_kv < 1 || b->n_head_kv < 1 ||
	    s->n_head % s->n_head_kv || b->n_head % b->n_head_kv)
		return ember_error_set(EMBER_EUNSUPPORTED, "embed: head layout %d/%d into %d/%d is not supported", s->n_head,
		                       s->n_head_kv, b->n_head, b->n_head_kv);
	if (s->head_dim % 2 || b->head_dim < s->head_dim)
		return ember_error_set(EMBER_EUNSUPPORTED, "embed: head_dim %d does not fit into %d", s->head_dim, b->head_dim);
	const int g_s = s->n_head / s->n_head_kv, g_b = b->n_head / b->n_head_kv, copies = (g_s + g_b - 1) / g_b;
	if (s->n_head_kv * copies > b->n_head_kv)
		return ember_error_set(EMBER_EUNSUPPORTED, "embed: %d KV heads of %d query heads each need %d KV heads of "
		                       "%d; the shape has %d", s->n_head_kv, g_s, s->n_head_kv * copies, g_b, b->n_head_kv);
	for (int k = 0; k < MAX_HEADS; k++)
		m->small_head[k] = m->small_kv[k] = -1;
	for (int h = 0; h < s->n_head; h++) {
		const int kv = h / g_s, local = h % g_s, big_kv = kv * copies + local / g_b;
		m->big_head[h] = big_kv * g_b + local % g_b;
		m->small_head[m->big_head[h]] = h;
		m->small_kv[big_kv] = kv;
	}
	return 0;
}

static int small_row(const struct ember_tensor *t, int64_t row, float *out)
{
	if (row < 0 || row >= t->ne[1] || t->ne[0] > SMALL_ROW_MAX)
		return ember_error_set(EMBER_ERROR, "embed: %s row %" PRId64 " of %" PRId64 " (%" PRId64 " wide)", t->name,
		                       row, t->ne[1], t->ne[0]);
	const size_t rb = ember_type_row_size(t->type, t->ne[0]);
	ember_dequantize_row(t->type, (const uint8_t *)t->data + rb * (size_t)row, out, t->ne[0]);
	return 0;
}

/* A norm vector of the residual width: the small weights scaled, zeros after them. */
static int fill_norm(const struct embed_job *j, const struct ember_tensor *t, float *out, int64_t n)
{
	float v[SMALL_ROW_MAX];
	memset(out, 0, (size_t)n * sizeof(*out));
	if (small_row(t, 0, v))
		return EMBER_ERROR;
	for (int i = 0; i < j->d_s; i++)
		out[i] = v[i] * j->norm_scale;
	return 0;
}

/* Row `row` of a big matrix whose input is the residual (q, k, v, gate, up, embedding, head):
 * the small row it maps to in the first d columns, or zeros. */
static int fill_from(const struct embed_job *j, const struct ember_tensor *t, int64_t small, float *out, int64_t n)
{
	float v[SMALL_ROW_MAX];
	memset(out, 0, (size_t)n * sizeof(*out));
	if (small < 0)
		return 0;
	if (small_row(t, small, v))
		return EMBER_ERROR;
	memcpy(out, v, (size_t)j->d_s * sizeof(*out));
	return 0;
}

static int64_t q_row_src(const struct head_map *m, int64_t row)
{
	const int h = m->small_head[row / m->hd_b], i = head_dim_src(m, (int)(row % m->hd_b));
	return h < 0 || i < 0 ? -1 : (int64_t)h * m->hd_s + i;
}

static int64_t kv_row_src(const struct head_map *m, int64_t row)
{
	const int k = m->small_kv[row / m->hd_b], i = head_dim_src(m, (int)(row % m->hd_b));
	return k < 0 || i < 0 ? -1 : (int64_t)k * m->hd_s + i;
}

/* A layer tensor of the decoder being written. */
static int fill_layer(const struct embed_job *j, const char *what, int layer, int64_t row, float *out, int64_t n)
{
	const struct source *s = &j->src;
	const struct head_map *m = &s->heads;
	float v[SMALL_ROW_MAX];
	if (layer >= s->hp->n_layer) { /* an extra layer: all zero, it adds nothing to the residual */
		memset(out, 0, (size_t)n * sizeof(*out));
		return 0;
	}
	const struct ember_layer *l = &s->layers[layer];
	if (!strcmp(what, "attn_norm"))
		return fill_norm(j, &l->attn_norm, out, n);
	if (!strcmp(what, "ffn_norm"))
		return fill_norm(j, &l->ffn_norm, out, n);
	if (!strcmp(what, "attn_q_norm") || !strcmp(what, "attn_k_norm")) {
		const int is_k = what[5] == 'k';
		memset(out, 0, (size_t)n * sizeof(*out));
		if (small_row(is_k ? &l->attn_k_norm : &l->attn_q_norm, 0, v))
			return EMBER_ERROR;
		for (int i = 0; i < m->hd_s; i++)
			out[head_dim_dst(m, i)] = is_k ? v[i] * j->k_norm_scale : v[i];
		return 0;
	}
	if (!strcmp(what, "attn_q"))
		return fill_from(j, &l->attn_q, q_row_src(m, row), out, n);
	if (!strcmp(what, "attn_k"))
		return fill_from(j, &l->attn_k, kv_row_src(m, row), out, n);
	if (!strcmp(what, "attn_v"))
		return fill_from(j, &l->attn_v, kv_row_src(m, row), out, n);
	if (!strcmp(what, "ffn_gate"))
		return fill_from(j, &l->ffn_gate, row < s->hp->n_ff ? row : -1, out, n);
	if (!strcmp(what, "ffn_up"))
		return fill_from(j, &l->ffn_up, row < s->hp->n_ff ? row : -1, out, n);
	memset(out, 0, (size_t)n * sizeof(*out));
	if (row >= j->d_s)
		return 0;
	if (!strcmp(what, "attn_output")) { /* input: the heads' outputs, remapped */
		if (small_row(&l->attn_output, row, v))
			return EMBER_ERROR;
		for (int h = 0; h < s->hp->n_head; h++)
			for (int i = 0; i < m->hd_s; i++)
				out[(int64_t)m->big_head[h] * m->hd_b + head_dim_dst(m, i)] = v[(int64_t)h * m->hd_s + i];
		return 0;
	}
	if (!strcmp(what, "ffn_down")) {
		if (small_row(&l->ffn_down, row, v))
			return EMBER_ERROR;
		memcpy(out, v, (size_t)s->hp->n_ff * sizeof(*out));
		return 0;
	}
	return ember_error_set(EMBER_ERROR, "embed: no source for blk.%d.%s", layer, what);
}

static int embed_fill(void *arg, const struct ember_gen_tensor *t, int64_t row, float *out)
{
	const struct embed_job *j = arg;
	char what[EMBER_GGUF_MAX_NAME + 1];
	int layer, used = 0;
	if (sscanf(t->name, "blk.%d.%64[a-z_].weight%n", &layer, what, &used) == 2 && used == (int)strlen(t->name))
		return fill_layer(j, what, layer, row, out, t->ne0);
	const struct ember_model *tg = j->target;
	if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight")) {
		const struct ember_tensor *src = t->name[0] == 't' ? &tg->token_embd : &tg->output;
		return fill_from(j, src, row < tg->hp.n_vocab ? row : -1, out, t->ne0);
	}
	if (!strcmp(t->name, "output_norm.weight"))
		return fill_norm(j, j->draft ? &j->draft->output_norm : &tg->output_norm, out, t->ne0);
	if (j->draft && !strcmp(t->name, "hidden_norm.weight"))
		return fill_norm(j, &j->draft->hidden_norm, out, t->ne0);
	if (j->draft && !strcmp(t->name, "fc.weight")) { /* input: the target layers' states, each remapped */
		float v[SMALL_ROW_MAX];
		memset(out, 0, (size_t)t->ne0 * sizeof(*out));
		if (row >= j->d_s)
			return 0;
		if (small_row(&j->draft->fc, row, v))
			return EMBER_ERROR;
		for (int k = 0; k < j->draft->n_target_layers; k++)
			memcpy(out + (int64_t)k * j->d_b, v + (int64_t)k * j->d_s, (size_t)j->d_s * sizeof(*out));
		return 0;
	}
	return ember_error_set(EMBER_ERROR, "embed: no source for %s", t->name);
}

/* The checks every decoder shares: it fits into the big shape. */
static int check_fit(const struct ember_hparams *s, const struct ember_gen_shape *b, const char *what)
{
	if (s->n_embd > b->n_embd || s->n_layer > b->n_layer || s->n_ff > b->n_ff || s->n_vocab > b->n_vocab)
		return ember_error_set(EMBER_EUNSUPPORTED, "embed: %s (d %d, %d layers, ffn %d, vocab %d) does not fit into "
		                       "%s (d %d, %d layers, ffn %d, vocab %d)", what, s->n_embd, s->n_layer, s->n_ff,
		                       s->n_vocab, b->name, b->n_embd, b->n_layer, b->n_ff, b->n_vocab);
	if (s->n_embd > SMALL_ROW_MAX || s->n_ff > SMALL_ROW_MAX || (int64_t)s->n_head * s->head_dim > SMALL_ROW_MAX)
		return ember_error_set(EMBER_EUNSUPPORTED, "embed: %s is not small (rows over %d)", what, SMALL_ROW_MAX);
	return 0;
}

/* One file: metadata then every tensor through embed_fill. */
static int write_one(struct embed_job *j, const struct ember_embed_config *c, const char *path, const char *name,
                     float eps, float theta, const char *source_name)
{
	struct ember_gen_tensor *tensors = NULL;
	struct ember_gguf_writer *w = NULL;
	enum ember_type base = EMBER_TYPE_F32;
	int n_tensors = 0, file_type = 0, error;
	const char *arch = j->draft ? "dflash" : "qwen3";
	if ((error = ember_gen_quant_types(c->quant, &base, &file_type)))
		return error;
	if ((error = j->draft ? ember_gen_draft_tensor_list(&tensors, &n_tensors, j->big, j->draft->n_target_layers, c->quant,
	                                                    base)
	                      : ember_gen_tensor_list(&tensors, &n_tensors, j->big, c->quant, base)) ||
	    (error = ember_gguf_writer_create(&w)))
		goto cleanup;
	struct ember_gen_shape shape = *j->big;
	shape.n_ctx_train = j->target->hp.n_ctx_train; /* the positions the small model was trained on */
	if (ember_gguf_writer_set_str(w, "general.architecture", arch) || ember_gguf_writer_set_str(w, "general.name", name) ||
	    ember_gguf_writer_set_u32(w, "general.alignment", EMBER_GGUF_DEFAULT_ALIGNMENT) ||
	    ember_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type) ||
	    ember_gguf_writer_set_u32(w, "general.quantization_version", 2) ||
	    ember_gguf_writer_set_str(w, "ember.embedded.source", source_name) ||
	    ember_gguf_writer_set_str(w, "ember.embedded.shape", j->big->name) ||
	    ember_gen_write_shape(w, arch, &shape, eps, theta)) {
		error = EMBER_ERROR;
		goto cleanup;
	}
	if (j->draft) {
		int32_t ids[EMBER_DRAFT_MAX_TARGET_LAYERS];
		for (int i = 0; i < j->draft->n_target_layers; i++)
			ids[i] = j->draft->target_layers[i] + 1; /* llama.cpp's convention: layer id + 1 */
		if (ember_gguf_writer_set_u32(w, "dflash.block_size", (uint32_t)j->draft->block_size) ||
		    ember_gguf_writer_set_array(w, "dflash.target_layers", EMBER_GGUF_I32, ids,
		                                (uint64_t)j->draft->n_target_layers) ||
		    ember_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)j->draft->mask_token_id)) {
			error = EMBER_ERROR;
			goto cleanup;
		}
	} else if ((error = ember_gen_write_tokenizer(w, j->big))) {
		goto cleanup;
	}
	struct ember_gen_config gc = {.n_threads = c->n_threads, .progress = c->progress, .payload = c->payload};
	error = ember_gen_write_tensors(w, tensors, n_tensors, 0, &gc, embed_fill, j, path);
cleanup:
	ember_gguf_writer_free(w);
	free(tensors);
	return error;
}

int ember_embed_write(const struct ember_embed_config *c, const char *path, const char *draft_path)
{
	struct ember_model *target = NULL;
	struct ember_draft *draft = NULL;
	char name[200];
	int error;
	const struct ember_gen_shape *big = ember_gen_find_shape(c->shape);
	if (!big)
		return ember_error_set(EMBER_ERROR, "unknown shape '%s' (tiny, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b)",
		                       c->shape);
	if ((c->source_draft != NULL) != (draft_path != NULL))
		return ember_error_set(EMBER_ERROR, "embed: a draft needs both its source and an output file");
	if (!path && !draft_path)
		return ember_error_set(EMBER_ERROR, "embed: nothing to write (no target and no draft output)");
	if ((error = ember_model_load(&target, c->source)))
		return error;
	if (c->source_draft && (error = ember_draft_load(&draft, c->source_draft, target)))
		goto cleanup;
	const struct ember_hparams *hp = &target->hp;
	if ((error = check_fit(hp, big, "the model")))
		goto cleanup;
	if (big->tied && !hp->tied_output) {
		error = ember_error_set(EMBER_EUNSUPPORTED, "embed: %s ties its head to the embedding; the model has its own "
		                        "output.weight", big->name);
		goto cleanup;
	}
	struct embed_job j = {.target = target, .big = big, .d_s = hp->n_embd, .d_b = big->n_embd,
	                      .norm_scale = sqrtf((float)hp->n_embd / (float)big->n_embd),
	                      .k_norm_scale = sqrtf((float)hp->head_dim / (float)big->head_dim)};
	j.src = (struct source){.hp = hp, .layers = target->layers};
	if ((error = head_map_make(&j.src.heads, hp, big)))
		goto cleanup;
	/* epsilon: the residual norms' scaling; theta: every NEOX pair keeps its frequency */
	const float eps = hp->rms_eps * (float)hp->n_embd / (float)big->n_embd;
	const float theta = (float)pow((double)hp->rope_theta, (double)big->head_dim / hp->head_dim);
	snprintf(name, sizeof(name), "%.100s, embedded in %s", target->name, big->name);
	if (path && (error = write_one(&j, c, path, name, eps, theta, target->name)))
		goto cleanup;
	if (draft) {
		const struct ember_hparams *dh = &draft->hp;
		struct ember_gen_shape dshape = *big;
		dshape.n_layer = dh->n_layer;
		if ((error = check_fit(dh, &dshape, "the draft")))
			goto cleanup;
		if (dh->head_dim != hp->head_dim || fabsf(dh->rope_theta - hp->rope_theta) > 1e-3f * hp->rope_theta) {
			error = ember_error_set(EMBER_EUNSUPPORTED, "embed: the draft's head_dim %d / RoPE base %g differ from the "
			                        "target's (%d / %g)", dh->head_dim, dh->rope_theta, hp->head_dim, hp->rope_theta);
			goto cleanup;
		}
		j.draft = draft;
		j.big = &dshape;
		j.src = (struct source){.hp = dh, .layers = draft->layers};
		if ((error = head_map_make(&j.src.heads, dh, &dshape)))
			goto cleanup;
		snprintf(name, sizeof(name), "%.100s, embedded in %s", draft->name, big->name);
		if ((error = write_one(&j, c, draft_path, name, eps, theta, draft->name)))
			goto cleanup;
	}
	error = 0;
cleanup:
	ember_draft_free(draft);
	ember_model_free(target);
	return error;
}

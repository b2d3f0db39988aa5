/*
 * model.c - loads a Qwen3 GGUF into an ember_model: hyper-parameters from the qwen3.* metadata
 * (u32 or u64 accepted), then one borrowed view per weight, each checked against the shape and
 * types those hyper-parameters imply. Nothing is copied or dequantized; the GGUF stays mmapped
 * for the model's lifetime.
 */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "quant.h"

struct model_priv {
	struct ember_gguf *gguf;
};

/* An integer hparam: required (dflt < 0) or defaulted, within [lo, hi]. */
static int get_hparam(const struct ember_gguf *g, const char *key, int64_t dflt, int64_t lo, int64_t hi, int *out)
{
	int64_t v;
	if (ember_gguf_find_kv(g, key) < 0) {
		if (dflt < 0)
			return ember_error_set(EMBER_EFORMAT, "required metadata '%s' is missing", key);
		v = dflt;
	} else if (ember_gguf_get_int(g, key, &v)) {
		return EMBER_EFORMAT;
	}
	if (v < lo || v > hi)
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' = %" PRId64 " is outside %" PRId64 "..%" PRId64, key, v,
		                       lo, hi);
	*out = (int)v;
	return 0;
}

static int get_float_hparam(const struct ember_gguf *g, const char *key, double dflt, double lo, double hi, float *out)
{
	double v = dflt;
	if (ember_gguf_find_kv(g, key) >= 0 && ember_gguf_get_float(g, key, &v))
		return EMBER_EFORMAT;
	if (!(v >= lo && v <= hi))
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' = %g is outside %g..%g", key, v, lo, hi);
	*out = (float)v;
	return 0;
}

int ember_hparams_read(struct ember_hparams *hp, const struct ember_gguf *g, const char *arch)
{
	char key[96];
	snprintf(hp->arch, sizeof(hp->arch), "%s", arch);
#define HP(name, dflt, lo, hi, field)                                        \
	do {                                                                     \
		snprintf(key, sizeof(key), "%s." name, arch);                        \
		if (get_hparam(g, key, (dflt), (lo), (hi), (field)))                 \
			return EMBER_EFORMAT;                                            \
	} while (0)
	HP("block_count", -1, 1, 4096, &hp->n_layer);
	HP("embedding_length", -1, 1, 1 << 20, &hp->n_embd);
	HP("feed_forward_length", -1, 1, 1 << 22, &hp->n_ff);
	HP("context_length", -1, 1, 1 << 30, &hp->n_ctx_train);
	HP("attention.head_count", -1, 1, 65536, &hp->n_head);
	HP("attention.head_count_kv", hp->n_head, 1, 65536, &hp->n_head_kv);
	HP("attention.key_length", hp->n_embd / hp->n_head, 2, 65536, &hp->head_dim);
	int value_length;
	HP("attention.value_length", hp->head_dim, 1, 65536, &value_length);
#undef HP
	if (value_length != hp->head_dim)
		return ember_error_set(EMBER_EUNSUPPORTED, "%s.attention.value_length %d differs from key_length %d", arch,
		                       value_length, hp->head_dim);
	if (hp->head_dim % 2 != 0)
		return ember_error_set(EMBER_EFORMAT, "%s.attention.key_length %d is odd (RoPE pairs need an even head size)",
		                       arch, hp->head_dim);
	if (hp->n_head % hp->n_head_kv != 0)
		return ember_error_set(EMBER_EFORMAT, "%s.attention.head_count %d is not a multiple of head_count_kv %d", arch,
		                       hp->n_head, hp->n_head_kv);
	if ((int64_t)hp->n_head * hp->head_dim > (1 << 20)) /* backends hold n_head * head_dim in an int */
		return ember_error_set(EMBER_EFORMAT, "%s.attention.head_count %d x key_length %d exceeds 2^20", arch,
		                       hp->n_head, hp->head_dim);
	snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon", arch);
	if (get_float_hparam(g, key, 1e-6, 0.0, 1.0, &hp->rms_eps))
		return EMBER_EFORMAT;
	/* up to 1e20: a model embedded at a 4x wider head_dim keeps its RoPE frequencies with theta^4
	 * (embed.h); the tables are computed in double */
	snprintf(key, sizeof(key), "%s.rope.freq_base", arch);
	if (get_float_hparam(g, key, 10000.0, 1.0, 1e20, &hp->rope_theta))
		return EMBER_EFORMAT;
	return 0;
}

static int read_hparams(struct ember_hparams *hp, const struct ember_gguf *g)
{
	const char *arch;
	if (ember_gguf_get_str(g, "general.architecture", &arch))
		return EMBER_EFORMAT;
	if (strcmp(arch, "qwen3") != 0)
		return ember_error_set(EMBER_EUNSUPPORTED, "architecture '%.40s' is not supported (ember runs qwen3)", arch);
	return ember_hparams_read(hp, g, arch);
}

int ember_tensor_bind(struct ember_tensor *out, const struct ember_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                      int norm)
{
	const struct ember_gguf_tensor *t = ember_gguf_find_tensor(g, name);
	if (!t)
		return ember_error_set(EMBER_EFORMAT, "tensor '%s' is missing", name);
	int want_dims = ne1 > 0 ? 2 : 1;
	int64_t want1 = ne1 > 0 ? ne1 : 1;
	if (t->n_dims != want_dims || t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
		if (want_dims == 1)
			return ember_error_set(EMBER_EFORMAT, "tensor '%s' has shape {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
			                       "} (%d dims), expected {%" PRId64 "}", name, t->ne[0], t->ne[1], t->ne[2],
			                       t->ne[3], t->n_dims, ne0);
		return ember_error_set(EMBER_EFORMAT, "tensor '%s' has shape {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
		                       "} (%d dims), expected {%" PRId64 ", %" PRId64 "}", name, t->ne[0], t->ne[1],
		                       t->ne[2], t->ne[3], t->n_dims, ne0, ne1);
	}
	if (norm && t->type != EMBER_TYPE_F32)
		return ember_error_set(EMBER_EUNSUPPORTED, "tensor '%s' has type %s; ember needs F32 norm weights", name,
		                       ember_gguf_type_name(t->type));
	if (!ember_type_supported((int)t->type))
		return ember_error_set(EMBER_EUNSUPPORTED, "tensor '%s' has type %s, which ember does not support "
		                       "(F32, F16, BF16, Q8_0, Q4_K, Q6_K)", name, ember_gguf_type_name(t->type));
	out->name = t->name;
	out->type = (enum ember_type)t->type;
	out->n_dims = t->n_dims;
	memcpy(out->ne, t->ne, sizeof(out->ne));
	out->data = t->data;
	out->nbytes = (size_t)t->nbytes;
	return 0;
}

const char *ember_file_type_name(int64_t ft)
{
	switch (ft) {
	case 0: return "F32";
	case 1: return "F16";
	case 7: return "Q8_0";
	case 12: return "Q3_K_M";
	case 14: return "Q4_K_S";
	case 15: return "Q4_K_M";
	case 16: return "Q5_K_S";
	case 17: return "Q5_K_M";
	case 18: return "Q6_K";
	case 32: return "BF16";
	default: return NULL;
	}
}

static int bind_all(struct ember_model *m, const struct ember_gguf *g)
{
	const struct ember_hparams *hp = &m->hp;
	const struct ember_gguf_tensor *embd = ember_gguf_find_tensor(g, "token_embd.weight");

	if (!embd)
		return ember_error_set(EMBER_EFORMAT, "tensor 'token_embd.weight' is missing");
	if (embd->n_dims != 2 || embd->ne[1] < 1 || embd->ne[1] > (1 << 24))
		return ember_error_set(EMBER_EFORMAT, "tensor 'token_embd.weight' must be 2-D with 1..2^24 rows");
	m->hp.n_vocab = (int)embd->ne[1];
	if (ember_tensor_bind(&m->token_embd, g, "token_embd.weight", hp->n_embd, hp->n_vocab, 0) ||
	    ember_tensor_bind(&m->output_norm, g, "output_norm.weight", hp->n_embd, 0, 1))
		return EMBER_EFORMAT;
	if (ember_gguf_find_tensor(g, "output.weight")) {
		if (ember_tensor_bind(&m->output, g, "output.weight", hp->n_embd, hp->n_vocab, 0))
			return EMBER_EFORMAT;
	} else {
		m->output = m->token_embd;
		m->hp.tied_output = 1;
	}
	return ember_layers_bind(m->layers, hp, g);
}

int ember_layers_bind(struct ember_layer *layers, const struct ember_hparams *hp, const struct ember_gguf *g)
{
	const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim, kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
	char name[EMBER_GGUF_MAX_NAME + 32];
	for (int i = 0; i < hp->n_layer; i++) {
		struct ember_layer *l = &layers[i];
		struct {
			struct ember_tensor *t;
			const char *suffix;
			int64_t ne0, ne1;
			int norm;
		} spec[] = {
			{&l->attn_norm, "attn_norm", hp->n_embd, 0, 1},
			{&l->attn_q, "attn_q", hp->n_embd, q_dim, 0},
			{&l->attn_k, "attn_k", hp->n_embd, kv_dim, 0},
			{&l->attn_v, "attn_v", hp->n_embd, kv_dim, 0},
			{&l->attn_output, "attn_output", q_dim, hp->n_embd, 0},
			{&l->attn_q_norm, "attn_q_norm", hp->head_dim, 0, 1},
			{&l->attn_k_norm, "attn_k_norm", hp->head_dim, 0, 1},
			{&l->ffn_norm, "ffn_norm", hp->n_embd, 0, 1},
			{&l->ffn_gate, "ffn_gate", hp->n_embd, hp->n_ff, 0},
			{&l->ffn_up, "ffn_up", hp->n_embd, hp->n_ff, 0},
			{&l->ffn_down, "ffn_down", hp->n_ff, hp->n_embd, 0},
		};
		for (size_t s = 0; s < sizeof(spec) / sizeof(spec[0]); s++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", i, spec[s].suffix);
			if (ember_tensor_bind(spec[s].t, g, name, spec[s].ne0, spec[s].ne1, spec[s].norm))
				return EMBER_EFORMAT;
		}
	}
	return 0;
}

int ember_model_load(struct ember_model **out, const char *path)
{
	int error = -1;
	struct ember_model *m = NULL;
	struct model_priv *priv = NULL;

	if (!(m = calloc(1, sizeof(*m))) || !(priv = calloc(1, sizeof(*priv)))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	m->priv = priv;
	if ((error = ember_gguf_open(&priv->gguf, path))) {
		ember_model_free(m); /* the GGUF error already names the file */
		return error;
	}
	const struct ember_gguf *g = priv->gguf;
	if ((error = read_hparams(&m->hp, g)))
		goto cleanup;
	if (!(m->layers = calloc((size_t)m->hp.n_layer, sizeof(*m->layers)))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	if ((error = bind_all(m, g)))
		goto cleanup;

	const char *name = NULL;
	if (ember_gguf_find_kv(g, "general.name") >= 0 && ember_gguf_get_str(g, "general.name", &name) == 0)
		snprintf(m->name, sizeof(m->name), "%s", name);
	else {
		const char *base = strrchr(path, '/');
		snprintf(m->name, sizeof(m->name), "%s", base ? base + 1 : path);
	}
	int64_t ft = -1;
	const char *ft_name = NULL;
	if (ember_gguf_find_kv(g, "general.file_type") >= 0 && ember_gguf_get_int(g, "general.file_type", &ft) == 0)
		ft_name = ember_file_type_name(ft);
	if (ft_name)
		snprintf(m->file_type, sizeof(m->file_type), "%s", ft_name);
	else if (ft >= 0)
		snprintf(m->file_type, sizeof(m->file_type), "type %" PRId64, ft);
	else
		snprintf(m->file_type, sizeof(m->file_type), "unknown");
	for (int64_t i = 0; i < ember_gguf_tensor_count(g); i++) {
		const struct ember_gguf_tensor *t = ember_gguf_tensor(g, i);
		m->n_params += t->n_elements;
		m->weight_bytes += t->nbytes;
	}
	error = 0;
cleanup:
	if (error) {
		ember_model_free(m);
		return ember_error_wrap(error, "%s", path);
	}
	*out = m;
	return 0;
}

void ember_model_free(struct ember_model *model)
{
	if (!model)
		return;
	struct model_priv *priv = model->priv;
	if (priv)
		ember_gguf_close(priv->gguf);
	free(priv);
	free(model->layers);
	free(model);
}

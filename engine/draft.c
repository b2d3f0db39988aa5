/*
 * draft.c - loads a DFlash draft GGUF (see draft.h): the dflash.* hyper-parameters through the
 * Qwen3 loader's reader, the block size, target layers and mask token, then one borrowed view
 * per tensor, and the checks against the target that make a mismatched pair a clear error
 * instead of garbage proposals. Like the model, the file stays mmapped; nothing is copied.
 */
#include "draft.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"

struct draft_priv {
	struct ember_gguf *gguf;
};

void ember_draft_default_layers(int *ids, int n_target_layers, int n_layer)
{
	const int lo = n_layer >= 8 ? 1 : 0, hi = n_layer >= 8 ? n_layer - 3 : n_layer - 1;
	for (int i = 0; i < n_target_layers; i++)
		ids[i] = n_target_layers == 1 ? lo : lo + (int)((double)i * (hi - lo) / (n_target_layers - 1) + 0.5);
}

/* An integer metadata value that must be present, in [lo, hi]. */
static int get_int(const struct ember_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
	if (ember_gguf_get_int(g, key, out))
		return EMBER_EFORMAT;
	if (*out < lo || *out > hi)
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' = %" PRId64 " is outside %" PRId64 "..%" PRId64, key,
		                       *out, lo, hi);
	return 0;
}

static int read_target_layers(struct ember_draft *d, const struct ember_gguf *g)
{
	const char *key = "dflash.target_layers";
	int64_t kv = ember_gguf_find_kv(g, key);
	enum ember_gguf_type et;
	uint64_t n;
	if (kv < 0)
		return ember_error_set(EMBER_EFORMAT, "required metadata '%s' is missing", key);
	if (ember_gguf_kv_array(g, kv, &et, &n))
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' must be an array of layer ids", key);
	static const int sizes[] = {[EMBER_GGUF_U8] = 1, [EMBER_GGUF_I8] = 1, [EMBER_GGUF_U16] = 2, [EMBER_GGUF_I16] = 2,
	                            [EMBER_GGUF_U32] = 4, [EMBER_GGUF_I32] = 4, [EMBER_GGUF_U64] = 8, [EMBER_GGUF_I64] = 8};
	const int size = (unsigned)et < sizeof(sizes) / sizeof(sizes[0]) ? sizes[et] : 0;
	if (!size)
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' must hold integers, not %s", key,
		                       ember_gguf_value_type_name(et));
	if (n < 1 || n > EMBER_DRAFT_MAX_TARGET_LAYERS)
		return ember_error_set(EMBER_EFORMAT, "metadata '%s' has %" PRIu64 " entries (1..%d)", key, n,
		                       EMBER_DRAFT_MAX_TARGET_LAYERS);
	const uint8_t *p = ember_gguf_kv_array_data(g, kv);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t raw = 0;
		for (int b = size - 1; b >= 0; b--)
			raw = raw << 8 | p[i * (uint64_t)size + (uint64_t)b];
		int64_t v = (int64_t)raw;
		if (size < 8 && (et == EMBER_GGUF_I8 || et == EMBER_GGUF_I16 || et == EMBER_GGUF_I32) &&
		    (raw >> (8 * size - 1)) & 1)
			v = (int64_t)(raw | ~0ull << (8 * size)); /* sign-extend */
		/* stored as hidden_states indices (layer id + 1); 0 would be the embedding output */
		if (v < 1 || v > 4096)
			return ember_error_set(EMBER_EFORMAT, "metadata '%s'[%" PRIu64 "] = %" PRId64 " is outside 1..4096 "
			                       "(values are target layer id + 1, llama.cpp's convention)", key, i, v);
		d->target_layers[i] = (int)v - 1;
	}
	d->n_target_layers = (int)n;
	return 0;
}

static int read_draft_meta(struct ember_draft *d, const struct ember_gguf *g)
{
	const char *arch;
	int64_t v;
	if (ember_gguf_get_str(g, "general.architecture", &arch))
		return EMBER_EFORMAT;
	if (strcmp(arch, "dflash") != 0)
		return ember_error_set(EMBER_EUNSUPPORTED, "architecture '%.40s' is not a DFlash draft (expected 'dflash')",
		                       arch);
	if (ember_hparams_read(&d->hp, g, "dflash"))
		return EMBER_EFORMAT;
	if (get_int(g, "dflash.block_size", 2, EMBER_DRAFT_MAX_BLOCK, &v))
		return EMBER_EFORMAT;
	d->block_size = (int)v;
	if (read_target_layers(d, g))
		return EMBER_EFORMAT;
	d->mask_token_id = -1; /* resolved against the vocabulary once it is known */
	const char *mask_keys[] = {"tokenizer.ggml.mask_token_id", "dflash.mask_token_id"};
	for (int i = 0; i < 2; i++)
		if (ember_gguf_find_kv(g, mask_keys[i]) >= 0) {
			if (get_int(g, mask_keys[i], 0, (1 << 24) - 1, &v))
				return EMBER_EFORMAT;
			d->mask_token_id = (int32_t)v;
			break;
		}
	return 0;
}

/* token_embd / output of the draft's own, checked to be {n_embd, n_vocab}; or the target's. */
static int bind_vocab_tensors(struct ember_draft *d, const struct ember_gguf *g, const struct ember_model *target)
{
	const char *names[2] = {"token_embd.weight", "output.weight"};
	struct ember_tensor *views[2] = {&d->token_embd, &d->output};
	int *own[2] = {&d->own_token_embd, &d->own_output};
	d->hp.n_vocab = target ? target->hp.n_vocab : 0;
	for (int i = 0; i < 2; i++) {
		const struct ember_gguf_tensor *t = ember_gguf_find_tensor(g, names[i]);
		if (!t) {
			if (target)
				*views[i] = i == 0 ? target->token_embd : target->output;
			continue;
		}
		if (t->n_dims != 2 || t->ne[1] < 1 || t->ne[1] > (1 << 24))
			return ember_error_set(EMBER_EFORMAT, "tensor '%s' must be 2-D with 1..2^24 rows", names[i]);
		if (!d->hp.n_vocab)
			d->hp.n_vocab = (int)t->ne[1];
		if (t->ne[1] != d->hp.n_vocab)
			return ember_error_set(EMBER_EFORMAT, "tensor '%s' has %" PRId64 " rows but the %s vocabulary has %d tokens",
			                       names[i], t->ne[1], target ? "target's" : "draft's", d->hp.n_vocab);
		if (ember_tensor_bind(views[i], g, names[i], d->hp.n_embd, d->hp.n_vocab, 0))
			return EMBER_EFORMAT;
		*own[i] = 1;
	}
	if (d->own_token_embd && !d->own_output && !target) /* tied like a Qwen3 head */
		d->output = d->token_embd;
	return 0;
}

static int validate_against(struct ember_draft *d, const struct ember_model *target)
{
	const struct ember_hparams *t = &target->hp;
	if (d->hp.n_embd != t->n_embd)
		return ember_error_set(EMBER_EFORMAT, "draft embedding_length %d differs from the target's %d", d->hp.n_embd,
		                       t->n_embd);
	for (int i = 0; i < d->n_target_layers; i++)
		if (d->target_layers[i] >= t->n_layer)
			return ember_error_set(EMBER_EFORMAT, "dflash.target_layers[%d] names target layer %d, but the target has "
			                       "%d layers (0..%d)", i, d->target_layers[i], t->n_layer, t->n_layer - 1);
	if (d->mask_token_id >= t->n_vocab)
		return ember_error_set(EMBER_EFORMAT, "mask token id %d is outside the target's vocabulary (0..%d)",
		                       d->mask_token_id, t->n_vocab - 1);
	return 0;
}

int ember_draft_load(struct ember_draft **out, const char *path, const struct ember_model *target)
{
	int error = -1;
	struct ember_draft *d = NULL;
	struct draft_priv *priv = NULL;
	if (!(d = calloc(1, sizeof(*d))) || !(priv = calloc(1, sizeof(*priv)))) {
		free(d);
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	}
	d->priv = priv;
	if ((error = ember_gguf_open(&priv->gguf, path))) {
		ember_draft_free(d);
		return error;
	}
	const struct ember_gguf *g = priv->gguf;
	if ((error = read_draft_meta(d, g)) || (error = bind_vocab_tensors(d, g, target)))
		goto cleanup;
	if (d->mask_token_id < 0)
		d->mask_token_id = d->hp.n_vocab - 1;
	if (target && (error = validate_against(d, target)))
		goto cleanup;
	if (!(d->layers = calloc((size_t)d->hp.n_layer, sizeof(*d->layers)))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	const int64_t n_embd = d->hp.n_embd;
	if ((error = ember_tensor_bind(&d->fc, g, "fc.weight", n_embd * d->n_target_layers, n_embd, 0)) ||
	    (error = ember_tensor_bind(&d->hidden_norm, g, "hidden_norm.weight", n_embd, 0, 1)) ||
	    (error = ember_tensor_bind(&d->output_norm, g, "output_norm.weight", n_embd, 0, 1)) ||
	    (error = ember_layers_bind(d->layers, &d->hp, g)))
		goto cleanup;

	const char *name = NULL;
	if (ember_gguf_find_kv(g, "general.name") >= 0 && ember_gguf_get_str(g, "general.name", &name) == 0)
		snprintf(d->name, sizeof(d->name), "%s", name);
	else {
		const char *base = strrchr(path, '/');
		snprintf(d->name, sizeof(d->name), "%s", base ? base + 1 : path);
	}
	int64_t ft = -1;
	const char *ft_name = NULL;
	if (ember_gguf_find_kv(g, "general.file_type") >= 0 && ember_gguf_get_int(g, "general.file_type", &ft) == 0)
		ft_name = ember_file_type_name(ft);
	snprintf(d->file_type, sizeof(d->file_type), "%s", ft_name ? ft_name : "unknown");
	for (int64_t i = 0; i < ember_gguf_tensor_count(g); i++) {
		d->n_params += ember_gguf_tensor(g, i)->n_elements;
		d->weight_bytes += ember_gguf_tensor(g, i)->nbytes;
	}
	error = 0;
cleanup:
	if (error) {
		ember_draft_free(d);
		return ember_error_wrap(error, "draft %s", path);
	}
	*out = d;
	return 0;
}

void ember_draft_free(struct ember_draft *draft)
{
	if (!draft)
		return;
	struct draft_priv *priv = draft->priv;
	if (priv)
		ember_gguf_close(priv->gguf);
	free(priv);
	free(draft->layers);
	free(draft);
}

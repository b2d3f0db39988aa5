/*
 * info.c - `ember info` report (see info.h): the GGUF reader's view first (so a file that is
 * valid GGUF but not a runnable model still shows everything), then the model loader's, or for
 * a DFlash draft (arch dflash) the draft loader's view.
 */
#include "info.h"

#include <inttypes.h>
#include <string.h>

#include "draft.h"
#include "error.h"
#include "gguf.h"
#include "model.h"

/* Prints up to `max` bytes of s, escaping quotes, backslashes and control bytes. */
static void put_escaped(FILE *out, const char *s, uint64_t len, uint64_t max)
{
	fputc('"', out);
	for (uint64_t i = 0; i < len && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\x%02x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
	if (len > max)
		fprintf(out, "... (%" PRIu64 " bytes)", len);
}

static void put_number(FILE *out, enum ember_gguf_type type, const uint8_t *p)
{
	uint64_t v = 0;
	switch (type) {
	case EMBER_GGUF_U8: fprintf(out, "%u", p[0]); break;
	case EMBER_GGUF_I8: fprintf(out, "%d", (int8_t)p[0]); break;
	case EMBER_GGUF_BOOL: fputs(p[0] ? "true" : "false", out); break;
	case EMBER_GGUF_U16: fprintf(out, "%u", (unsigned)(p[0] | p[1] << 8)); break;
	case EMBER_GGUF_I16: fprintf(out, "%d", (int16_t)(p[0] | p[1] << 8)); break;
	default:
		for (int i = 7; i >= 0; i--)
			v = (v << 8) | (i < 4 || type == EMBER_GGUF_U64 || type == EMBER_GGUF_I64 || type == EMBER_GGUF_F64 ? p[i] : 0);
		if (type == EMBER_GGUF_U32 || type == EMBER_GGUF_U64)
			fprintf(out, "%" PRIu64, v);
		else if (type == EMBER_GGUF_I32)
			fprintf(out, "%" PRId32, (int32_t)(uint32_t)v);
		else if (type == EMBER_GGUF_I64)
			fprintf(out, "%" PRId64, (int64_t)v);
		else if (type == EMBER_GGUF_F32) {
			uint32_t b = (uint32_t)v;
			float f;
			memcpy(&f, &b, 4);
			fprintf(out, "%g", f);
		} else {
			double d;
			memcpy(&d, &v, 8);
			fprintf(out, "%g", d);
		}
	}
}

static uint64_t elem_size(enum ember_gguf_type t)
{
	static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	return (unsigned)t < sizeof(sizes) ? sizes[t] : 0;
}

static void print_kv(FILE *out, const struct ember_gguf *g, int64_t i)
{
	const char *key = ember_gguf_kv_key(g, i);
	enum ember_gguf_type type = ember_gguf_kv_type(g, i);
	fprintf(out, "  %-44s %-7s ", key, ember_gguf_value_type_name(type));
	if (type == EMBER_GGUF_STRING) {
		const char *s;
		ember_gguf_get_str(g, key, &s);
		put_escaped(out, s, strlen(s), 120);
	} else if (type == EMBER_GGUF_ARRAY) {
		enum ember_gguf_type et;
		uint64_t n;
		ember_gguf_kv_array(g, i, &et, &n);
		fprintf(out, "[%s x %" PRIu64 "]", ember_gguf_value_type_name(et), n);
		const int show = 6;
		if (et == EMBER_GGUF_STRING) {
			for (uint64_t j = 0; j < n && j < (uint64_t)show; j++) {
				const char *s;
				uint64_t len;
				ember_gguf_kv_array_str(g, i, j, &s, &len);
				fputs(j ? ", " : " ", out);
				put_escaped(out, s, len, 24);
			}
		} else if (elem_size(et)) {
			const uint8_t *p = ember_gguf_kv_array_data(g, i);
			for (uint64_t j = 0; j < n && j < (uint64_t)show; j++) {
				fputs(j ? ", " : " ", out);
				put_number(out, et, p + j * elem_size(et));
			}
		}
		if (n > (uint64_t)show && et != EMBER_GGUF_ARRAY)
			fputs(", ...", out);
	} else {
		double v;
		ember_gguf_kv_number(g, i, &v);
		if (type == EMBER_GGUF_F32 || type == EMBER_GGUF_F64)
			fprintf(out, "%g", v);
		else if (type == EMBER_GGUF_BOOL)
			fputs(v != 0 ? "true" : "false", out);
		else
			fprintf(out, "%.0f", v);
	}
	fputc('\n', out);
}

static void print_tensors(FILE *out, const struct ember_gguf *g)
{
	int64_t n = ember_gguf_tensor_count(g);
	fprintf(out, "\ntensors (%" PRId64 "):\n  %-5s %-34s %-6s %-26s %14s %14s\n", n, "#", "name", "type", "dims",
	        "offset", "bytes");
	for (int64_t i = 0; i < n; i++) {
		const struct ember_gguf_tensor *t = ember_gguf_tensor(g, i);
		char dims[64];
		int k = snprintf(dims, sizeof(dims), "{%" PRId64, t->ne[0]);
		for (int d = 1; d < t->n_dims && k < (int)sizeof(dims); d++)
			k += snprintf(dims + k, sizeof(dims) - (size_t)k, ", %" PRId64, t->ne[d]);
		snprintf(dims + (k < (int)sizeof(dims) - 1 ? k : (int)sizeof(dims) - 2), 2, "}");
		fprintf(out, "  %-5" PRId64 " %-34s %-6s %-26s %14" PRIu64 " %14" PRIu64 "\n", i, t->name,
		        ember_gguf_type_name(t->type), dims, t->file_offset, t->nbytes);
	}
}

static int print_draft(FILE *out, const char *path)
{
	struct ember_draft *d = NULL;
	if (ember_draft_load(&d, path, NULL)) {
		fprintf(out, "\ndraft: ember cannot use this file: %s\n", ember_error_last());
		return 2;
	}
	const struct ember_hparams *hp = &d->hp;
	fprintf(out, "\ndraft: %s\n  arch dflash, file type %s, block size %d, mask token id ", d->name, d->file_type,
	        d->block_size);
	if (d->mask_token_id >= 0)
		fprintf(out, "%d\n", d->mask_token_id);
	else
		fprintf(out, "(none: the target's last id)\n");
	fprintf(out, "  %d layers, n_embd %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d, rope_theta %g\n", hp->n_layer,
	        hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff, hp->rope_theta);
	fprintf(out, "  target layers (%d, 0-based decoder layers; the file stores id + 1):", d->n_target_layers);
	for (int i = 0; i < d->n_target_layers; i++)
		fprintf(out, " %d", d->target_layers[i]);
	fprintf(out, "\n  token_embd %s, output head %s\n", d->own_token_embd ? "own" : "shared from the target",
	        d->own_output ? "own" : "shared from the target");
	fprintf(out, "  params %" PRIu64 " (%.3f B), weights %" PRIu64 " bytes (%.2f MiB)\n", d->n_params, d->n_params / 1e9,
	        d->weight_bytes, d->weight_bytes / (double)(1 << 20));
	ember_draft_free(d);
	return 0;
}

int ember_info_print(FILE *out, const char *path)
{
	struct ember_gguf *g = NULL;
	struct ember_model *m = NULL;
	if (ember_gguf_open(&g, path))
		return 1;
	fprintf(out, "file: %s\n  %" PRIu64 " bytes, GGUF v%" PRIu32 ", alignment %" PRIu32 ", tensor data at offset %" PRIu64
	        "\n\nmetadata (%" PRId64 " entries):\n", path, ember_gguf_file_size(g), ember_gguf_version(g),
	        ember_gguf_alignment(g), ember_gguf_data_offset(g), ember_gguf_kv_count(g));
	for (int64_t i = 0; i < ember_gguf_kv_count(g); i++)
		print_kv(out, g, i);
	print_tensors(out, g);
	const char *arch = NULL;
	const int is_draft = ember_gguf_get_str(g, "general.architecture", &arch) == 0 && strcmp(arch, "dflash") == 0;
	ember_gguf_close(g);
	if (is_draft)
		return print_draft(out, path);

	if (ember_model_load(&m, path)) {
		fprintf(out, "\nmodel: ember cannot run this file: %s\n", ember_error_last());
		return 2;
	}
	const struct ember_hparams *hp = &m->hp;
	fprintf(out, "\nmodel: %s\n  arch %s, file type %s, %s output head\n", m->name, hp->arch, m->file_type,
	        hp->tied_output ? "tied (token_embd reused)" : "separate");
	fprintf(out, "  n_vocab %d, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d\n", hp->n_vocab,
	        hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff);
	fprintf(out, "  context_length %d, rms_eps %g, rope_theta %g\n", hp->n_ctx_train, hp->rms_eps, hp->rope_theta);
	fprintf(out, "  params %" PRIu64 " (%.3f B), weights %" PRIu64 " bytes (%.2f GiB), %.3f bits per weight\n",
	        m->n_params, m->n_params / 1e9, m->weight_bytes, m->weight_bytes / (double)(1ull << 30),
	        m->n_params ? 8.0 * m->weight_bytes / m->n_params : 0.0);
	ember_model_free(m);
	return 0;
}

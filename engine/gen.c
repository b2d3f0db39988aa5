/*
 * gen.c - synthetic Qwen3 GGUF generator (see gen.h for the weight recipe). Work is split into
 * chunks of rows (about 1 MiB of output each) that worker threads take from an atomic counter,
 * fill from a counter-based RNG (splitmix64 of seed, tensor-name hash, row and column), quantize
 * and pwrite straight into the file: memory stays at a few MiB per thread whatever the model size.
 */
#include "gen.h"
#include "gen_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "draft.h"
#include "error.h"
#include "gguf.h"
#include "model.h"
#include "pool.h"
#include "quant.h"

#define EMBED_STD 1.0f      /* token_embd and output elements */
#define LOGIT_STD 7.0f      /* target spread of the logits across the vocabulary */
#define QK_NORM_GAIN 0.8f   /* attn_q_norm / attn_k_norm weights: attention scores ~N(0, 0.64) */
#define CHUNK_BYTES (1u << 20)

static const struct ember_gen_shape shapes[] = {
	/* name          vocab  embd layer head kv  hd   ff    ctx   tied */
	{"tiny", 2048, 256, 4, 4, 2, 64, 768, 4096, 1},
	{"qwen3-0.6b", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1},
	{"qwen3-1.7b", 151936, 2048, 28, 16, 8, 128, 6144, 40960, 1},
	{"qwen3-4b", 151936, 2560, 36, 32, 8, 128, 9728, 40960, 1},
	{"qwen3-8b", 151936, 4096, 36, 32, 8, 128, 12288, 40960, 0},
};

const struct ember_gen_shape *ember_gen_find_shape(const char *name)
{
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (strcmp(shapes[i].name, name) == 0)
			return &shapes[i];
	return NULL;
}

/* ---- deterministic weights ---- */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* Approximately N(0,1): the sum of four 16-bit uniforms, centred and scaled to unit variance. */
static inline float normal_from_bits(uint64_t r)
{
	uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) + (uint32_t)((r >> 32) & 0xffff) +
	               (uint32_t)(r >> 48);
	return ((float)sum - 2.0f * 65535.0f) * (1.7320508f / 65535.0f);
}


static struct ember_gen_law weight_law(const char *name, const struct ember_gen_shape *s, int64_t fan_in)
{
	const char *dot = strrchr(name, '.');
	size_t len = dot ? (size_t)(dot - name) : strlen(name);
	struct ember_gen_law law = {0.0f, 1.0f / sqrtf((float)fan_in), 0};
#define ENDS(suffix) (len >= strlen(suffix) && strncmp(name + len - strlen(suffix), suffix, strlen(suffix)) == 0)
	if (ENDS("token_embd") || (ENDS("output") && !ENDS("attn_output"))) {
		law.std = EMBED_STD;
	} else if (ENDS("output_norm")) {
		float gamma = LOGIT_STD / (EMBED_STD * sqrtf((float)s->n_embd));
		law = (struct ember_gen_law){gamma, 0.05f * gamma, 1};
	} else if (ENDS("attn_q_norm") || ENDS("attn_k_norm")) {
		law = (struct ember_gen_law){QK_NORM_GAIN, 0.05f, 0};
	} else if (ENDS("_norm")) {
		law = (struct ember_gen_law){1.0f, 0.05f, 0};
	} else if (ENDS("attn_output") || ENDS("ffn_down")) {
		law.std *= sqrtf(2.0f / (float)s->n_layer); /* residual writes shrink with depth (GPT-2 style) */
	}
#undef ENDS
	return law;
}

static uint64_t row_seed(uint64_t seed, uint64_t tensor_hash, int64_t row)
{
	return mix64(seed * 0x9e3779b97f4a7c15ull ^ tensor_hash) + (uint64_t)row * 0xd1b54a32d192ed03ull;
}

static void fill_row(float *out, int64_t n, uint64_t rs, struct ember_gen_law law)
{
	for (int64_t c = 0; c < n; c++) {
		uint64_t r = mix64(rs + (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull);
		float v = law.mean + law.std * normal_from_bits(r);
		out[c] = law.signed_ && (mix64(r) >> 63) ? -v : v;
	}
}

static int64_t fan_in_of(const char *name, const struct ember_gen_shape *s)
{
	if (strstr(name, "attn_output"))
		return (int64_t)s->n_head * s->head_dim;
	if (strstr(name, "ffn_down"))
		return s->n_ff;
	return s->n_embd;
}

float ember_gen_weight(uint64_t seed, const char *name, const struct ember_gen_shape *shape, int64_t row, int64_t col)
{
	float v;
	fill_row(&v, 1, row_seed(seed, name_hash(name), row) + (uint64_t)col * 0x9e3779b97f4a7c15ull,
	         weight_law(name, shape, fan_in_of(name, shape)));
	return v;
}

/* ---- the tensor list and quant mix ---- */


/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third in between. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int ember_gen_quant_types(const char *quant, enum ember_type *base, int *file_type)
{
	static const struct { const char *name; enum ember_type type; int file_type; } q[] = {
		{"f32", EMBER_TYPE_F32, 0},    {"f16", EMBER_TYPE_F16, 1},       {"bf16", EMBER_TYPE_BF16, 32},
		{"q8_0", EMBER_TYPE_Q8_0, 7},  {"q4_k_m", EMBER_TYPE_Q4_K, 15},  {"q6_k", EMBER_TYPE_Q6_K, 18},
	};
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		if (strcmp(quant, q[i].name) == 0) {
			*base = q[i].type;
			*file_type = q[i].file_type;
			return 0;
		}
	return ember_error_set(EMBER_ERROR, "unknown quant '%s' (f16, bf16, q8_0, q4_k_m, q6_k, f32)", quant);
}

/* Q4_K_M as llama.cpp mixes it: Q6_K for the head (token_embd when tied, as llama.cpp treats the
 * tied embedding as the output) and for attn_v/ffn_down in the use_more_bits layers. */
static enum ember_type type_for(const char *quant, enum ember_type base, const struct ember_gen_shape *s,
                                const char *suffix, int layer)
{
	if (strcmp(quant, "q4_k_m") != 0)
		return base;
	if (strcmp(suffix, "output") == 0 || (s->tied && strcmp(suffix, "token_embd") == 0))
		return EMBER_TYPE_Q6_K;
	if ((strcmp(suffix, "attn_v") == 0 || strcmp(suffix, "ffn_down") == 0) && use_more_bits(layer, s->n_layer))
		return EMBER_TYPE_Q6_K;
	return base;
}

int ember_gen_tensor_list(struct ember_gen_tensor **out, int *out_n, const struct ember_gen_shape *s, const char *quant,
                             enum ember_type base)
{
	const int64_t q_dim = (int64_t)s->n_head * s->head_dim, kv_dim = (int64_t)s->n_head_kv * s->head_dim;
	int cap = 3 + 11 * s->n_layer, n = 0;
	struct ember_gen_tensor *t = calloc((size_t)cap, sizeof(*t));
	if (!t)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
#define ADD(label, layer, ne0_, ne1_, norm)                                                             \
	do {                                                                                                \
		if ((layer) < 0)                                                                                \
			snprintf(t[n].name, sizeof(t[n].name), "%s.weight", label);                                 \
		else                                                                                            \
			snprintf(t[n].name, sizeof(t[n].name), "blk.%d.%s.weight", (layer), label);                \
		t[n].type = (norm) ? EMBER_TYPE_F32 : type_for(quant, base, s, label, (layer));                 \
		t[n].ne0 = (ne0_);                                                                              \
		t[n].ne1 = (ne1_);                                                                              \
		n++;                                                                                            \
	} while (0)
	ADD("token_embd", -1, s->n_embd, s->n_vocab, 0);
	if (!s->tied)
		ADD("output", -1, s->n_embd, s->n_vocab, 0);
	ADD("output_norm", -1, s->n_embd, 1, 1);
	for (int i = 0; i < s->n_layer; i++) {
		ADD("attn_norm", i, s->n_embd, 1, 1);
		ADD("attn_q", i, s->n_embd, q_dim, 0);
		ADD("attn_k", i, s->n_embd, kv_dim, 0);
		ADD("attn_v", i, s->n_embd, kv_dim, 0);
		ADD("attn_output", i, q_dim, s->n_embd, 0);
		ADD("attn_q_norm", i, s->head_dim, 1, 1);
		ADD("attn_k_norm", i, s->head_dim, 1, 1);
		ADD("ffn_norm", i, s->n_embd, 1, 1);
		ADD("ffn_gate", i, s->n_embd, s->n_ff, 0);
		ADD("ffn_up", i, s->n_embd, s->n_ff, 0);
		ADD("ffn_down", i, s->n_ff, s->n_embd, 0);
	}
#undef ADD
	for (int i = 0; i < n; i++) {
		t[i].hash = name_hash(t[i].name);
		t[i].law = weight_law(t[i].name, s, t[i].ne0);
	}
	*out = t;
	*out_n = n;
	return 0;
}

/* ---- metadata ---- */

/* GPT-2 byte-level BPE shows byte b as this code point (printable Latin-1 bytes as themselves). */
static unsigned byte_codepoint(unsigned b)
{
	if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
		return b;
	unsigned n = 0;
	for (unsigned x = 0; x < b; x++)
		if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff)))
			n++;
	return 256 + n;
}

int ember_gen_write_tokenizer(struct ember_gguf_writer *w, const struct ember_gen_shape *s)
{
	int error = -1;
	const int n = s->n_vocab;
	char **tokens = calloc((size_t)n, sizeof(*tokens));
	int32_t *types = calloc((size_t)n, sizeof(*types));
	int eos = n >= 151646 ? 151645 : n - 1, bos = n >= 151646 ? 151643 : n - 1;
	if (!tokens || !types) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	for (int i = 0; i < n; i++) {
		char buf[32];
		types[i] = 1; /* normal */
		if (i < 256) {
			unsigned cp = byte_codepoint((unsigned)i);
			if (cp < 0x80)
				snprintf(buf, sizeof(buf), "%c", (char)cp);
			else /* two-byte UTF-8 (all code points here are below 0x800) */
				snprintf(buf, sizeof(buf), "%c%c", (char)(0xc0 | (cp >> 6)), (char)(0x80 | (cp & 0x3f)));
		} else if (i == bos || i == eos || (n >= 151646 && i == 151644)) {
			snprintf(buf, sizeof(buf), "%s", i == 151644 ? "<|im_start|>" : i == eos && i != bos ? "<|im_end|>"
			                                                                                         : "<|endoftext|>");
			types[i] = 3; /* control */
		} else {
			snprintf(buf, sizeof(buf), "<tok_%d>", i);
		}
		if (!(tokens[i] = strdup(buf))) {
			error = ember_error_set(EMBER_ENOMEM, "out of memory");
			goto cleanup;
		}
	}
	if ((error = ember_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2")) ||
	    (error = ember_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2")) ||
	    (error = ember_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n)) ||
	    (error = ember_gguf_writer_set_array(w, "tokenizer.ggml.token_type", EMBER_GGUF_I32, types, (uint64_t)n)) ||
	    (error = ember_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", NULL, 0)) ||
	    (error = ember_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos)) ||
	    (error = ember_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos)) ||
	    (error = ember_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)bos)) ||
	    (error = ember_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0)))
		goto cleanup;
	error = 0;
cleanup:
	for (int i = 0; tokens && i < n; i++)
		free(tokens[i]);
	free(tokens);
	free(types);
	return error;
}

/* The hyper-parameter keys of a Qwen3-style decoder under `arch` ("qwen3", "dflash"). Nonzero on failure. */
int ember_gen_write_shape(struct ember_gguf_writer *w, const char *arch, const struct ember_gen_shape *s, float rms_eps,
                          float rope_theta)
{
	static const struct { const char *key; size_t offset; } u32s[] = {
		{ "block_count", offsetof(struct ember_gen_shape, n_layer) },
		{ "context_length", offsetof(struct ember_gen_shape, n_ctx_train) },
		{ "embedding_length", offsetof(struct ember_gen_shape, n_embd) },
		{ "feed_forward_length", offsetof(struct ember_gen_shape, n_ff) },
		{ "attention.head_count", offsetof(struct ember_gen_shape, n_head) },
		{ "attention.head_count_kv", offsetof(struct ember_gen_shape, n_head_kv) },
		{ "attention.key_length", offsetof(struct ember_gen_shape, head_dim) },
		{ "attention.value_length", offsetof(struct ember_gen_shape, head_dim) },
	};
	char key[96];
	for (size_t i = 0; i < sizeof(u32s) / sizeof(u32s[0]); i++) {
		snprintf(key, sizeof(key), "%s.%s", arch, u32s[i].key);
		if (ember_gguf_writer_set_u32(w, key, (uint32_t)*(const int *)((const char *)s + u32s[i].offset)))
			return EMBER_ERROR;
	}
	snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon", arch);
	if (ember_gguf_writer_set_f32(w, key, rms_eps))
		return EMBER_ERROR;
	snprintf(key, sizeof(key), "%s.rope.freq_base", arch);
	return ember_gguf_writer_set_f32(w, key, rope_theta) ? EMBER_ERROR : 0;
}

static int write_metadata(struct ember_gguf_writer *w, const struct ember_gen_shape *s, const struct ember_gen_config *c,
                          int file_type)
{
	char name[128];
	snprintf(name, sizeof(name), "ember-synthetic %s %s seed %" PRIu64, s->name, c->quant, c->seed);
	if (ember_gguf_writer_set_str(w, "general.architecture", "qwen3") ||
	    ember_gguf_writer_set_str(w, "general.name", name) ||
	    ember_gguf_writer_set_u32(w, "general.alignment", EMBER_GGUF_DEFAULT_ALIGNMENT) ||
	    ember_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type) ||
	    ember_gguf_writer_set_u32(w, "general.quantization_version", 2) ||
	    ember_gguf_writer_set_u64(w, "ember.synthetic.seed", c->seed) ||
	    ember_gguf_writer_set_str(w, "ember.synthetic.shape", s->name) ||
	    ember_gen_write_shape(w, "qwen3", s, EMBER_GEN_RMS_EPS, EMBER_GEN_ROPE_THETA))
		return EMBER_ERROR;
	return ember_gen_write_tokenizer(w, s);
}

/* ---- parallel fill ---- */

struct chunk {
	int tensor;
	int64_t row0, rows;
};

struct gen_scratch {
	float *row;
	uint8_t *out;
	int64_t row_cap;
	size_t out_cap;
};

struct gen_job {
	struct ember_gguf_writer *w;
	const struct ember_gen_tensor *tensors;
	const struct chunk *chunks;
	uint64_t seed;
	struct gen_scratch *scratch; /* one per thread, touched only by that thread */
	_Atomic uint64_t bytes_done;
	uint64_t bytes_total;
	_Atomic int failed;
	char error[512];
	const struct ember_gen_config *config;
	ember_gen_fill_fn fill;      /* NULL: the seeded recipe */
	void *fill_arg;
};

static void gen_fail(struct gen_job *job, const char *message)
{
	if (!atomic_exchange(&job->failed, 1))
		snprintf(job->error, sizeof(job->error), "%s", message);
}

/* Fills, quantizes and writes chunks [begin, end). */
static void gen_worker(void *arg, int64_t begin, int64_t end, int thread)
{
	struct gen_job *job = arg;
	struct gen_scratch *sc = &job->scratch[thread];
	for (int64_t ci = begin; ci < end && !atomic_load(&job->failed); ci++) {
		const struct chunk *c = &job->chunks[ci];
		const struct ember_gen_tensor *t = &job->tensors[c->tensor];
		const size_t row_bytes = ember_type_row_size(t->type, t->ne0);
		if (t->ne0 > sc->row_cap) {
			free(sc->row);
			sc->row_cap = t->ne0;
			sc->row = malloc((size_t)sc->row_cap * sizeof(float));
		}
		if (row_bytes * (size_t)c->rows > sc->out_cap) {
			free(sc->out);
			sc->out_cap = row_bytes * (size_t)c->rows;
			sc->out = malloc(sc->out_cap);
		}
		if (!sc->row || !sc->out) {
			sc->row_cap = 0;
			sc->out_cap = 0;
			gen_fail(job, "out of memory in the generator");
			return;
		}
		for (int64_t r = 0; r < c->rows; r++) {
			if (!job->fill)
				fill_row(sc->row, t->ne0, row_seed(job->seed, t->hash, c->row0 + r), t->law);
			else if (job->fill(job->fill_arg, t, c->row0 + r, sc->row)) {
				gen_fail(job, ember_error_last());
				return;
			}
			ember_quantize_row(t->type, sc->row, sc->out + (size_t)r * row_bytes, t->ne0);
		}
		size_t bytes = row_bytes * (size_t)c->rows;
		if (ember_gguf_writer_write(job->w, t->index, (uint64_t)c->row0 * row_bytes, sc->out, bytes)) {
			gen_fail(job, ember_error_last());
			return;
		}
		uint64_t done = atomic_fetch_add(&job->bytes_done, bytes) + bytes;
		if (thread == 0 && job->config->progress)
			job->config->progress(job->config->payload, done, job->bytes_total);
	}
}

int ember_gen_write_tensors(struct ember_gguf_writer *w, struct ember_gen_tensor *tensors, int n_tensors, uint64_t seed,
                            const struct ember_gen_config *config, ember_gen_fill_fn fill, void *fill_arg,
                            const char *path)
{
	int error = -1;
	struct chunk *chunks = NULL;
	struct ember_pool *pool = NULL;
	struct gen_job *job = NULL;
	int64_t n_chunks = 0;
	for (int i = 0; i < n_tensors; i++) {
		int64_t ne[2] = {tensors[i].ne0, tensors[i].ne1};
		int idx = ember_gguf_writer_add_tensor(w, tensors[i].name, (uint32_t)tensors[i].type, ne[1] > 1 ? 2 : 1, ne);
		if (idx < 0) {
			error = idx;
			goto cleanup;
		}
		tensors[i].index = idx;
		size_t row_bytes = ember_type_row_size(tensors[i].type, tensors[i].ne0);
		int64_t per = CHUNK_BYTES / row_bytes ? (int64_t)(CHUNK_BYTES / row_bytes) : 1;
		n_chunks += (tensors[i].ne1 + per - 1) / per;
	}
	if (!(chunks = calloc((size_t)n_chunks, sizeof(*chunks))) || !(job = calloc(1, sizeof(*job)))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	int64_t k = 0;
	for (int i = 0; i < n_tensors; i++) {
		size_t row_bytes = ember_type_row_size(tensors[i].type, tensors[i].ne0);
		int64_t per = CHUNK_BYTES / row_bytes ? (int64_t)(CHUNK_BYTES / row_bytes) : 1;
		for (int64_t r = 0; r < tensors[i].ne1; r += per)
			chunks[k++] = (struct chunk){i, r, tensors[i].ne1 - r < per ? tensors[i].ne1 - r : per};
		job->bytes_total += ember_gguf_writer_tensor_bytes(w, tensors[i].index);
	}
	if ((error = ember_gguf_writer_open(w, path)))
		goto cleanup;
	int n_threads = config->n_threads > 0 ? config->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if ((error = ember_pool_create(&pool, n_threads < 1 ? 1 : n_threads)))
		goto cleanup;
	if (!(job->scratch = calloc((size_t)ember_pool_threads(pool), sizeof(*job->scratch)))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	job->w = w;
	job->tensors = tensors;
	job->chunks = chunks;
	job->seed = seed;
	job->config = config;
	job->fill = fill;
	job->fill_arg = fill_arg;
	ember_pool_for(pool, n_chunks, 1, gen_worker, job);
	if (atomic_load(&job->failed)) {
		error = ember_error_set(EMBER_ERROR, "%s", job->error);
		goto cleanup;
	}
	if ((error = ember_gguf_writer_finish(w)))
		goto cleanup;
	error = 0;
cleanup:
	for (int i = 0; job && job->scratch && i < ember_pool_threads(pool); i++) {
		free(job->scratch[i].row);
		free(job->scratch[i].out);
	}
	if (job)
		free(job->scratch);
	ember_pool_free(pool);
	free(job);
	free(chunks);
	return error;
}

int ember_gen_write(const struct ember_gen_config *config, const char *path)
{
	int error = -1, n_tensors = 0;
	struct ember_gen_tensor *tensors = NULL;
	struct ember_gguf_writer *w = NULL;
	enum ember_type base = EMBER_TYPE_F32;
	int file_type = 0;

	const struct ember_gen_shape *s = ember_gen_find_shape(config->shape);
	if (!s)
		return ember_error_set(EMBER_ERROR, "unknown shape '%s' (tiny, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b)",
		                       config->shape);
	if ((error = ember_gen_quant_types(config->quant, &base, &file_type)))
		return error;
	if ((error = ember_gen_tensor_list(&tensors, &n_tensors, s, config->quant, base)) ||
	    (error = ember_gguf_writer_create(&w)) || (error = write_metadata(w, s, config, file_type)) ||
	    (error = ember_gen_write_tensors(w, tensors, n_tensors, config->seed, config, NULL, NULL, path)))
		goto cleanup;
	error = 0;
cleanup:
	ember_gguf_writer_free(w);
	free(tensors);
	return error;
}

/* ---- DFlash drafts ---- */

/* The draft's tensors: the Qwen3 layer list of a shape with n_layer draft layers, without
 * token_embd/output (shared from the target), plus fc and hidden_norm. */
int ember_gen_draft_tensor_list(struct ember_gen_tensor **out, int *out_n, const struct ember_gen_shape *s,
                                   int n_target_layers, const char *quant, enum ember_type base)
{
	struct ember_gen_tensor *t = NULL;
	int n = 0;
	int error = ember_gen_tensor_list(&t, &n, s, quant, base);
	if (error)
		return error;
	/* token_embd (and output when untied) lead the list; output_norm follows */
	int first = s->tied ? 1 : 2;
	memmove(t, t + first, (size_t)(n - first) * sizeof(*t));
	n -= first;
	struct ember_gen_tensor fc = {.type = base == EMBER_TYPE_Q4_K ? EMBER_TYPE_Q8_0 : base, /* like the head: not K-quant */
	                        .ne0 = (int64_t)n_target_layers * s->n_embd, .ne1 = s->n_embd};
	struct ember_gen_tensor norm = {.type = EMBER_TYPE_F32, .ne0 = s->n_embd, .ne1 = 1};
	snprintf(fc.name, sizeof(fc.name), "fc.weight");
	snprintf(norm.name, sizeof(norm.name), "hidden_norm.weight");
	struct ember_gen_tensor *grown = realloc(t, (size_t)(n + 2) * sizeof(*t));
	if (!grown) {
		free(t);
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	}
	t = grown;
	memmove(t + 2, t, (size_t)n * sizeof(*t));
	t[0] = fc;
	t[1] = norm;
	n += 2;
	for (int i = 0; i < 2; i++) {
		t[i].hash = name_hash(t[i].name);
		t[i].law = weight_law(t[i].name, s, t[i].ne0);
	}
	*out = t;
	*out_n = n;
	return 0;
}

int ember_gen_draft_write(const struct ember_gen_draft_config *config, const char *path)
{
	int error = -1, n_tensors = 0, file_type = 0;
	struct ember_gen_tensor *tensors = NULL;
	struct ember_gguf_writer *w = NULL;
	enum ember_type base = EMBER_TYPE_F32;
	const struct ember_gen_shape *target = ember_gen_find_shape(config->target_shape);
	if (!target)
		return ember_error_set(EMBER_ERROR, "unknown shape '%s' (tiny, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b)",
		                       config->target_shape);
	const int n_tl = config->n_target_layers > 0 ? config->n_target_layers : config->n_layer;
	if (config->n_layer < 1 || config->n_layer > 64 || config->block_size < 2 || config->block_size > EMBER_GEN_MAX_BLOCK ||
	    n_tl < 1 || n_tl > target->n_layer || n_tl > 64)
		return ember_error_set(EMBER_ERROR, "draft: --layers must be 1..64, --block 2..%d and the target layers 1..%d",
		                       EMBER_GEN_MAX_BLOCK, target->n_layer < 64 ? target->n_layer : 64);
	const char *quant = config->quant ? config->quant : "f16";
	if ((error = ember_gen_quant_types(quant, &base, &file_type)))
		return error;
	struct ember_gen_shape s = *target; /* same d, heads, head_dim and ffn as the target (DFlash) */
	s.n_layer = config->n_layer;
	int32_t ids[64];
	int layer_ids[64];
	ember_draft_default_layers(layer_ids, n_tl, target->n_layer);
	for (int i = 0; i < n_tl; i++)
		ids[i] = layer_ids[i] + 1; /* llama.cpp's convention: hidden_states index = layer id + 1 */
	char name[160];
	snprintf(name, sizeof(name), "ember-synthetic dflash draft for %s, %d layers, block %d, %s seed %" PRIu64,
	         target->name, config->n_layer, config->block_size, quant, config->seed);
	if ((error = ember_gen_draft_tensor_list(&tensors, &n_tensors, &s, n_tl, quant, base)) ||
	    (error = ember_gguf_writer_create(&w)))
		goto cleanup;
	if (ember_gguf_writer_set_str(w, "general.architecture", "dflash") ||
	    ember_gguf_writer_set_str(w, "general.name", name) ||
	    ember_gguf_writer_set_u32(w, "general.alignment", EMBER_GGUF_DEFAULT_ALIGNMENT) ||
	    ember_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type) ||
	    ember_gguf_writer_set_u32(w, "general.quantization_version", 2) ||
	    ember_gguf_writer_set_u64(w, "ember.synthetic.seed", config->seed) ||
	    ember_gguf_writer_set_str(w, "ember.synthetic.draft_for", target->name) ||
	    ember_gen_write_shape(w, "dflash", &s, EMBER_GEN_RMS_EPS, EMBER_GEN_ROPE_THETA) ||
	    ember_gguf_writer_set_u32(w, "dflash.block_size", (uint32_t)config->block_size) ||
	    ember_gguf_writer_set_array(w, "dflash.target_layers", EMBER_GGUF_I32, ids, (uint64_t)n_tl) ||
	    ember_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)(target->n_vocab - 1))) {
		error = EMBER_ERROR;
		goto cleanup;
	}
	/* a seed of its own so a draft and a target of one --seed do not share layer weights */
	if ((error = ember_gen_write_tensors(w, tensors, n_tensors, mix64(config->seed ^ name_hash("dflash")),
	                                     &(struct ember_gen_config){.n_threads = config->n_threads}, NULL, NULL, path)))
		goto cleanup;
	error = 0;
cleanup:
	ember_gguf_writer_free(w);
	free(tensors);
	return error;
}

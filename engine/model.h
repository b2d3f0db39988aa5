/*
 * model.h - a Qwen3-family dense model as ember sees it once a GGUF is loaded: hyper-parameters
 * from the `qwen3.*` metadata and one tensor view per weight, pointing into the mmapped file.
 * Backends (CPU, CUDA) read weights only through these views; they never parse GGUF themselves.
 */
#ifndef EMBER_MODEL_H
#define EMBER_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Weight element types; the values are ggml's type codes as stored in GGUF tensor infos. */
enum ember_type {
	EMBER_TYPE_F32 = 0,
	EMBER_TYPE_F16 = 1,
	EMBER_TYPE_Q8_0 = 8,
	EMBER_TYPE_Q4_K = 12,
	EMBER_TYPE_Q6_K = 14,
	EMBER_TYPE_BF16 = 30
};

/* A read-only view of one weight tensor. ne[0] is the innermost (contiguous) dimension: a matrix
 * written {n_in, n_out} is n_out rows of n_in elements, each row a whole number of quant blocks. */
struct ember_tensor {
	const char *name;        /* GGUF tensor name, borrowed from the model */
	enum ember_type type;
	int n_dims;
	int64_t ne[4];           /* unused dimensions are 1 */
	const void *data;        /* host bytes (mmapped file), borrowed from the model */
	size_t nbytes;
};

struct ember_hparams {
	char arch[32];           /* general.architecture, "qwen3" */
	int n_vocab;             /* rows of token_embd */
	int n_embd;              /* qwen3.embedding_length */
	int n_layer;             /* qwen3.block_count */
	int n_head;              /* qwen3.attention.head_count */
	int n_head_kv;           /* qwen3.attention.head_count_kv */
	int head_dim;            /* qwen3.attention.key_length (== value_length); not n_embd/n_head */
	int n_ff;                /* qwen3.feed_forward_length */
	int n_ctx_train;         /* qwen3.context_length */
	float rms_eps;           /* qwen3.attention.layer_norm_rms_epsilon */
	float rope_theta;        /* qwen3.rope.freq_base (NEOX rotate-half over the full head_dim) */
	int tied_output;         /* 1 when output.weight is absent and token_embd is reused */
};

struct ember_layer {
	struct ember_tensor attn_norm;    /* F32 [n_embd] */
	struct ember_tensor attn_q;       /* {n_embd, n_head*head_dim} */
	struct ember_tensor attn_k;       /* {n_embd, n_head_kv*head_dim} */
	struct ember_tensor attn_v;       /* {n_embd, n_head_kv*head_dim} */
	struct ember_tensor attn_output;  /* {n_head*head_dim, n_embd} */
	struct ember_tensor attn_q_norm;  /* F32 [head_dim], per-head RMSNorm before RoPE */
	struct ember_tensor attn_k_norm;  /* F32 [head_dim] */
	struct ember_tensor ffn_norm;     /* F32 [n_embd] */
	struct ember_tensor ffn_gate;     /* {n_embd, n_ff} */
	struct ember_tensor ffn_up;       /* {n_embd, n_ff} */
	struct ember_tensor ffn_down;     /* {n_ff, n_embd} */
};

struct ember_model {
	struct ember_hparams hp;
	char name[128];                   /* general.name, or the file's base name */
	char file_type[32];               /* e.g. "Q4_K_M", "Q8_0", "F16" (from general.file_type) */
	uint64_t n_params;                /* elements over all weight tensors */
	uint64_t weight_bytes;            /* bytes over all weight tensors */
	struct ember_tensor token_embd;   /* {n_embd, n_vocab} */
	struct ember_tensor output_norm;  /* F32 [n_embd] */
	struct ember_tensor output;       /* {n_embd, n_vocab}; a copy of token_embd's view when tied */
	struct ember_layer *layers;       /* n_layer entries, owned by the model */
	void *priv;                       /* the loader's own state (mmapped GGUF); do not touch */
};

/* Loads a GGUF model (validated, mmapped; nothing dequantized). On success *out is owned by the
 * caller and freed with ember_model_free; tensor views stay valid until then. */
int ember_model_load(struct ember_model **out, const char *path);
void ember_model_free(struct ember_model *model);

/* Pieces of the loader shared with the DFlash draft loader (draft.c). `arch` prefixes the keys
 * ("qwen3.block_count", "dflash.block_count"); n_vocab and tied_output are left to the caller.
 * All return 0 or EMBER_EFORMAT / EMBER_EUNSUPPORTED with a message naming the key or tensor. */
struct ember_gguf;
int ember_hparams_read(struct ember_hparams *hp, const struct ember_gguf *g, const char *arch);
/* Binds tensor `name` of shape {ne0} (ne1 <= 0) or {ne0, ne1}; norm = 1 requires F32. */
int ember_tensor_bind(struct ember_tensor *out, const struct ember_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                      int norm);
/* The hp->n_layer decoder layers blk.N.* (attention with q/k norm, SwiGLU FFN) into layers[]. */
int ember_layers_bind(struct ember_layer *layers, const struct ember_hparams *hp, const struct ember_gguf *g);

/* llama.cpp's name of a general.file_type value ("Q4_K_M"), or NULL when unknown. */
const char *ember_file_type_name(int64_t file_type);

/* Bytes of one row of `n` elements of `type` (n must be a whole number of blocks). */
size_t ember_type_row_size(enum ember_type type, int64_t n);
/* Elements per block (1 for F32/F16/BF16, 32 for Q8_0, 256 for the K-quants). */
int ember_type_block_elems(enum ember_type type);
/* "F32", "Q4_K", ...; NULL for a code ember does not support. */
const char *ember_type_name(enum ember_type type);

#endif

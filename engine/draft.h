/*
 * draft.h - a DFlash draft model (z-lab "Block Diffusion for Flash Speculative Decoding") as
 * ember loads it from a GGUF of architecture `dflash`, with llama.cpp's tensor and key names.
 * The draft is a small Qwen3-style decoder that conditions on hidden states of chosen target
 * layers (concatenated, through `fc` and `hidden_norm`, injected as extra K/V in every layer) and
 * predicts a whole block at once; it borrows the target's embedding and LM head when it has none.
 *
 * File layout (GGUF):
 *   general.architecture = "dflash"; dflash.block_count, dflash.embedding_length, ... as qwen3.*
 *   dflash.block_size        u32, tokens per draft block (the slot of the last token included)
 *   dflash.target_layers     integer array; llama.cpp's converter convention: hidden_states
 *                            indices, i.e. decoder layer id + 1 (value L = output of layer L-1)
 *   tokenizer.ggml.mask_token_id (or dflash.mask_token_id)   the MASK token; default n_vocab - 1
 *   fc.weight {n_target_layers * n_embd, n_embd}, hidden_norm.weight, output_norm.weight,
 *   blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm,
 *   ffn_gate, ffn_up, ffn_down}.weight, and optionally token_embd.weight / output.weight.
 */
#ifndef EMBER_DRAFT_H
#define EMBER_DRAFT_H

#include "model.h"

#define EMBER_DRAFT_MAX_TARGET_LAYERS 64
#define EMBER_DRAFT_MAX_BLOCK 64

struct ember_draft {
	struct ember_hparams hp;          /* dflash.* hyper-parameters; n_vocab is the target's */
	int block_size;                   /* B: block slots, the last committed token's included */
	int32_t mask_token_id;
	int n_target_layers;
	int target_layers[EMBER_DRAFT_MAX_TARGET_LAYERS]; /* 0-based target decoder layer ids, in fc order */
	char name[128];                   /* general.name, or the file's base name */
	char file_type[32];
	uint64_t n_params, weight_bytes;  /* over the draft file's own tensors */
	int own_token_embd, own_output;   /* 1 when the file has them; else the target's views below */
	struct ember_tensor fc;           /* {n_target_layers * n_embd, n_embd} */
	struct ember_tensor hidden_norm;  /* F32 [n_embd], RMSNorm of the fc output */
	struct ember_tensor output_norm;  /* F32 [n_embd], before the (target's) LM head */
	struct ember_tensor token_embd;   /* {n_embd, n_vocab}: the draft's, or the target's view */
	struct ember_tensor output;       /* {n_embd, n_vocab}: the draft's, or the target's head */
	struct ember_layer *layers;       /* hp.n_layer entries, owned by the draft */
	void *priv;                       /* the loader's state (mmapped GGUF) */
};

/* Loads a DFlash draft and validates it against `target` (the same n_embd, token_embd/output of
 * the target's vocabulary, mask id inside it, every target layer id inside the target's layers).
 * target may be NULL (`ember info`): then only the file itself is checked and token_embd/output
 * are set only when the file has them. On success *out is owned by the caller, freed with
 * ember_draft_free; its views borrow from the draft's mapping and from `target`, which must
 * outlive it. Errors: EMBER_EFORMAT / EMBER_EUNSUPPORTED with a message naming the file. */
int ember_draft_load(struct ember_draft **out, const char *path, const struct ember_model *target);
void ember_draft_free(struct ember_draft *draft);

/* Target layer ids a DFlash draft of n_target_layers would read from a target of n_layer layers,
 * spaced evenly as the published drafts are ([1, 10, 19, 28, 37] of 40 layers): layer 1 to
 * n_layer - 3 when the target has at least 8 layers, else 0 to n_layer - 1. */
void ember_draft_default_layers(int *ids, int n_target_layers, int n_layer);

#endif

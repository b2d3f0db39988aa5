/*
 * gen_int.h - what gen.c shares with embed.c, the other writer of synthetic-shape GGUFs: the tensor
 * list of a shape and its quant mix, the metadata writers, and the parallel fill + quantize +
 * write of every tensor, whose rows come from the seeded recipe or from a caller's function.
 * Internal to ember_core.
 */
#ifndef EMBER_GEN_INT_H
#define EMBER_GEN_INT_H

#include <stdint.h>

#include "gen.h"
#include "gguf.h"
#include "model.h"

#define EMBER_GEN_RMS_EPS 1e-6f
#define EMBER_GEN_ROPE_THETA 1e6f

/* How the seeded recipe draws a tensor's elements: mean + std * N(0,1), times a random sign when
 * `signed_`. */
struct ember_gen_law {
	float mean, std;
	int signed_;
};

struct ember_gen_tensor {
	char name[EMBER_GGUF_MAX_NAME + 1];
	enum ember_type type;
	int64_t ne0, ne1;           /* ne1 = 1 for vectors */
	int index;                  /* in the writer */
	uint64_t hash;
	struct ember_gen_law law;
};

/* Fills row `row` (ne0 floats) of tensor t; 0 or an ember error (with its message). Called from
 * the writer's threads at once, for distinct rows. */
typedef int (*ember_gen_fill_fn)(void *arg, const struct ember_gen_tensor *t, int64_t row, float *out);

/* "f16", "q8_0", ... -> the base tensor type and general.file_type; else EMBER_ERROR. */
int ember_gen_quant_types(const char *quant, enum ember_type *base, int *file_type);
/* The tensors of a Qwen3 model of shape s (token_embd, output unless tied, output_norm, layers),
 * with the quant mix; *out is the caller's to free. */
int ember_gen_tensor_list(struct ember_gen_tensor **out, int *out_n, const struct ember_gen_shape *s, const char *quant,
                          enum ember_type base);
/* A DFlash draft's tensors at shape s (s.n_layer = draft layers): fc, hidden_norm, output_norm, layers. */
int ember_gen_draft_tensor_list(struct ember_gen_tensor **out, int *out_n, const struct ember_gen_shape *s,
                                int n_target_layers, const char *quant, enum ember_type base);
/* The hyper-parameter keys of shape s under `arch` ("qwen3", "dflash"). */
int ember_gen_write_shape(struct ember_gguf_writer *w, const char *arch, const struct ember_gen_shape *s, float rms_eps,
                          float rope_theta);
/* A byte-level GPT-2 style vocabulary of s->n_vocab tokens (placeholders past the bytes). */
int ember_gen_write_tokenizer(struct ember_gguf_writer *w, const struct ember_gen_shape *s);
/* Declares the tensors, opens `path`, fills every tensor in parallel (fill, or the seeded recipe
 * when fill is NULL), quantizes, writes and finishes the file. config gives threads and progress. */
int ember_gen_write_tensors(struct ember_gguf_writer *w, struct ember_gen_tensor *tensors, int n_tensors, uint64_t seed,
                            const struct ember_gen_config *config, ember_gen_fill_fn fill, void *fill_arg,
                            const char *path);

#endif

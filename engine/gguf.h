/*
 * gguf.h - GGUF v3 (and v2) files: a validating reader over an mmapped file or a memory buffer,
 * and a streaming writer. The reader checks every count, length, type code, dimension and
 * offset against the bytes actually present before it allocates or dereferences anything, so a
 * truncated or hostile file is a clear error naming the field and its offset, never a crash.
 * Format: ggml docs/gguf.md (summary in shared/reference/engine-anchors.md 1.1).
 */
#ifndef EMBER_GGUF_H
#define EMBER_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types (GGUF codes). */
enum ember_gguf_type {
	EMBER_GGUF_U8 = 0,
	EMBER_GGUF_I8 = 1,
	EMBER_GGUF_U16 = 2,
	EMBER_GGUF_I16 = 3,
	EMBER_GGUF_U32 = 4,
	EMBER_GGUF_I32 = 5,
	EMBER_GGUF_F32 = 6,
	EMBER_GGUF_BOOL = 7,
	EMBER_GGUF_STRING = 8,
	EMBER_GGUF_ARRAY = 9,
	EMBER_GGUF_U64 = 10,
	EMBER_GGUF_I64 = 11,
	EMBER_GGUF_F64 = 12
};

#define EMBER_GGUF_MAGIC 0x46554747u        /* "GGUF" read as a little-endian u32 */
#define EMBER_GGUF_DEFAULT_ALIGNMENT 32
#define EMBER_GGUF_MAX_NAME 64              /* tensor name bytes */
#define EMBER_GGUF_MAX_KEY 65535            /* key bytes */
#define EMBER_GGUF_MAX_ARRAY_DEPTH 4        /* arrays of arrays nest at most this deep */

struct ember_gguf;

/* One tensor as described by the file; all pointers borrowed from the ember_gguf. */
struct ember_gguf_tensor {
	const char *name;        /* NUL-terminated copy of the name */
	uint32_t type;           /* ggml type code (any type ggml defines; see ember_gguf_type_name) */
	int n_dims;              /* 1..4 */
	int64_t ne[4];           /* innermost first; unused dimensions are 1 */
	uint64_t offset;         /* relative to the data section (a multiple of the alignment) */
	uint64_t file_offset;    /* absolute offset in the file */
	uint64_t n_elements;
	uint64_t nbytes;
	const void *data;        /* the bytes, inside the mapping */
};

/* Opens and validates `path` (mmapped read-only). On success *out is owned by the caller and
 * released with ember_gguf_close; everything returned by the accessors is borrowed from it. */
int ember_gguf_open(struct ember_gguf **out, const char *path);
/* Same over a caller's buffer, which must outlive the handle (used by tests and the fuzzer). */
int ember_gguf_open_memory(struct ember_gguf **out, const void *data, size_t size);
void ember_gguf_close(struct ember_gguf *gguf);

uint32_t ember_gguf_version(const struct ember_gguf *gguf);
uint32_t ember_gguf_alignment(const struct ember_gguf *gguf);
uint64_t ember_gguf_file_size(const struct ember_gguf *gguf);
uint64_t ember_gguf_data_offset(const struct ember_gguf *gguf); /* start of the tensor data */

/* Metadata. Indices run over [0, ember_gguf_kv_count). */
int64_t ember_gguf_kv_count(const struct ember_gguf *gguf);
/* Index of `key`, or -1 when absent. */
int64_t ember_gguf_find_kv(const struct ember_gguf *gguf, const char *key);
const char *ember_gguf_kv_key(const struct ember_gguf *gguf, int64_t kv);   /* borrowed, NUL-terminated */
enum ember_gguf_type ember_gguf_kv_type(const struct ember_gguf *gguf, int64_t kv);

/* Typed getters by key: 0 on success; EMBER_EFORMAT with a message naming the key when the key
 * is absent or its type does not fit. *out is set only on success. */
/* Any integer type (u8..u64, i8..i64) whose value is >= 0 and fits in uint64_t. */
int ember_gguf_get_uint(const struct ember_gguf *gguf, const char *key, uint64_t *out);
/* Any integer type; signed range. */
int ember_gguf_get_int(const struct ember_gguf *gguf, const char *key, int64_t *out);
/* f32 or f64. */
int ember_gguf_get_float(const struct ember_gguf *gguf, const char *key, double *out);
int ember_gguf_get_bool(const struct ember_gguf *gguf, const char *key, int *out);
/* A string value: borrowed, NUL-terminated copy (the value may itself contain no NUL bytes). */
int ember_gguf_get_str(const struct ember_gguf *gguf, const char *key, const char **out);

/* Scalar value of entry kv as a number (integers, floats, bool); 0 on success. */
int ember_gguf_kv_number(const struct ember_gguf *gguf, int64_t kv, double *out);
/* Array entries: element type and count (EMBER_EFORMAT when kv is not an array). */
int ember_gguf_kv_array(const struct ember_gguf *gguf, int64_t kv, enum ember_gguf_type *elem_type,
                        uint64_t *count);
/* Raw little-endian elements of a numeric array (borrowed, inside the file; NULL for string or
 * nested arrays). */
const void *ember_gguf_kv_array_data(const struct ember_gguf *gguf, int64_t kv);
/* Element j of a string array: borrowed pointer into the file (NOT NUL-terminated) and length. */
int ember_gguf_kv_array_str(const struct ember_gguf *gguf, int64_t kv, uint64_t j, const char **str,
                            uint64_t *len);

/* Tensors. */
int64_t ember_gguf_tensor_count(const struct ember_gguf *gguf);
const struct ember_gguf_tensor *ember_gguf_tensor(const struct ember_gguf *gguf, int64_t i);
/* Borrowed, or NULL when absent. */
const struct ember_gguf_tensor *ember_gguf_find_tensor(const struct ember_gguf *gguf, const char *name);

/* ggml type codes: name ("Q4_K"), or NULL when the code is not a ggml type; elements and bytes
 * per block (0 when unknown). */
const char *ember_gguf_type_name(uint32_t type);
int ember_gguf_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
/* Name of a metadata value type ("u32", "string", ...), "?" when unknown. */
const char *ember_gguf_value_type_name(uint32_t type);

/* ---- writer ---- */

struct ember_gguf_writer;

/* A writer collects metadata and tensor declarations, then writes the header, then receives tensor
 * bytes (any order, from any thread) and finishes. The alignment is general.alignment when set
 * (as u32), else 32. On success *out is owned by the caller and freed with ember_gguf_writer_free,
 * which deletes the output file unless ember_gguf_writer_finish succeeded. */
int ember_gguf_writer_create(struct ember_gguf_writer **out);
void ember_gguf_writer_free(struct ember_gguf_writer *w);

/* Metadata setters; a key may be set once (EMBER_ERROR on a duplicate), before _open. */
int ember_gguf_writer_set_u32(struct ember_gguf_writer *w, const char *key, uint32_t value);
int ember_gguf_writer_set_i32(struct ember_gguf_writer *w, const char *key, int32_t value);
int ember_gguf_writer_set_u64(struct ember_gguf_writer *w, const char *key, uint64_t value);
int ember_gguf_writer_set_f32(struct ember_gguf_writer *w, const char *key, float value);
int ember_gguf_writer_set_bool(struct ember_gguf_writer *w, const char *key, int value);
int ember_gguf_writer_set_str(struct ember_gguf_writer *w, const char *key, const char *value);
/* Any fixed-size scalar value: `value` holds its little-endian bytes (1, 2, 4 or 8 of them). */
int ember_gguf_writer_set_scalar(struct ember_gguf_writer *w, const char *key, enum ember_gguf_type type,
                                 const void *value);
/* Numeric array: n elements of elem_type (not STRING/ARRAY), copied. */
int ember_gguf_writer_set_array(struct ember_gguf_writer *w, const char *key, enum ember_gguf_type elem_type,
                                const void *data, uint64_t n);
/* String array: n NUL-terminated strings, copied. */
int ember_gguf_writer_set_str_array(struct ember_gguf_writer *w, const char *key, const char *const *strs,
                                    uint64_t n);

/* Declares a tensor (before _open); returns its index (>= 0) or a negative error. */
int ember_gguf_writer_add_tensor(struct ember_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                 const int64_t *ne);
/* Bytes of declared tensor `index`. */
uint64_t ember_gguf_writer_tensor_bytes(const struct ember_gguf_writer *w, int index);

/* Creates `path` (truncating it) and writes the header, metadata and tensor infos. */
int ember_gguf_writer_open(struct ember_gguf_writer *w, const char *path);
/* Writes n bytes of tensor `index` at byte `offset` within the tensor. Thread-safe (pwrite). */
int ember_gguf_writer_write(struct ember_gguf_writer *w, int index, uint64_t offset, const void *data,
                            size_t n);
/* Checks every tensor byte was written, pads the file to its final size, closes it. */
int ember_gguf_writer_finish(struct ember_gguf_writer *w);

#endif

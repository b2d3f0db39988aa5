/*
 * gguf.c - validating GGUF reader. A bounds-checked cursor walks the header, the metadata and
 * the tensor infos; every length and count is compared with the bytes that remain before it is
 * used, and tables grow only as entries are actually parsed (no allocation sized by a count read
 * from the file). Then tensors are checked against the data section: alignment, extent, overlap.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

struct kv {
	char *key;
	uint32_t type;
	uint64_t offset;          /* of the entry (its key length) in the file */
	union {
		uint64_t u;
		int64_t i;
		double f;
	} num;                    /* scalar value, widened */
	char *str;                /* STRING value, NUL-terminated copy */
	uint32_t arr_type;
	uint64_t arr_count;
	uint64_t arr_data;        /* file offset of the first element */
	uint64_t *str_offsets;    /* string arrays: file offset of each element's length prefix */
};

struct ember_gguf {
	const uint8_t *base;
	uint64_t size;
	int mapped;
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	int64_t n_kv;
	struct kv *kvs;
	int64_t n_tensors;
	struct ember_gguf_tensor *tensors;
};

struct cursor {
	const uint8_t *base;
	uint64_t size;
	uint64_t pos;
};

/* ---- type tables ---- */

struct ggml_type_info {
	const char *name;
	uint32_t block_elems, block_bytes;
};

/* ggml's type codes (ggml.h enum ggml_type) with their block sizes; NULL name = unused code. */
static const struct ggml_type_info ggml_types[] = {
	[0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},
	[3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},       [7] = {"Q5_1", 32, 24},
	[8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},       [10] = {"Q2_K", 256, 84},
	[11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},    [13] = {"Q5_K", 256, 176},
	[14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},    [16] = {"IQ2_XXS", 256, 66},
	[17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98},  [19] = {"IQ1_S", 256, 50},
	[20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},   [22] = {"IQ2_S", 256, 82},
	[23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},          [25] = {"I16", 1, 2},
	[26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},         [28] = {"F64", 1, 8},
	[29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},        [34] = {"TQ1_0", 256, 54},
	[35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
};

const char *ember_gguf_type_name(uint32_t type)
{
	return type < sizeof(ggml_types) / sizeof(ggml_types[0]) ? ggml_types[type].name : NULL;
}

int ember_gguf_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
	if (!ember_gguf_type_name(type)) {
		*block_elems = *block_bytes = 0;
		return EMBER_EFORMAT;
	}
	*block_elems = ggml_types[type].block_elems;
	*block_bytes = ggml_types[type].block_bytes;
	return 0;
}

const char *ember_gguf_value_type_name(uint32_t type)
{
	static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
	                              "bool", "string", "array", "u64", "i64", "f64"};
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

/* Bytes of a fixed-size value type, 0 for STRING/ARRAY/unknown. */
static uint64_t value_size(uint32_t type)
{
	switch (type) {
	case EMBER_GGUF_U8: case EMBER_GGUF_I8: case EMBER_GGUF_BOOL: return 1;
	case EMBER_GGUF_U16: case EMBER_GGUF_I16: return 2;
	case EMBER_GGUF_U32: case EMBER_GGUF_I32: case EMBER_GGUF_F32: return 4;
	case EMBER_GGUF_U64: case EMBER_GGUF_I64: case EMBER_GGUF_F64: return 8;
	default: return 0;
	}
}

/* ---- cursor ---- */

static int need(const struct cursor *c, uint64_t n, const char *ctx, const char *what)
{
	if (n > c->size - c->pos)
		return ember_error_set(EMBER_EFORMAT,
		                       "truncated file: %s%s at offset %" PRIu64 " needs %" PRIu64
		                       " bytes, only %" PRIu64 " remain (file size %" PRIu64 ")",
		                       ctx, what, c->pos, n, c->size - c->pos, c->size);
	return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static int read_u32(struct cursor *c, uint32_t *out, const char *ctx, const char *what)
{
	if (need(c, 4, ctx, what))
		return EMBER_EFORMAT;
	*out = (uint32_t)le(c->base + c->pos, 4);
	c->pos += 4;
	return 0;
}

static int read_u64(struct cursor *c, uint64_t *out, const char *ctx, const char *what)
{
	if (need(c, 8, ctx, what))
		return EMBER_EFORMAT;
	*out = le(c->base + c->pos, 8);
	c->pos += 8;
	return 0;
}

/* Reads a GGUF string header (u64 length) and checks the bytes are present and within max_len.
 * On success *str points into the file and the cursor is past the string. */
static int read_str(struct cursor *c, const uint8_t **str, uint64_t *len, uint64_t max_len,
                    const char *ctx, const char *what)
{
	uint64_t at = c->pos, n;
	if (read_u64(c, &n, ctx, what))
		return EMBER_EFORMAT;
	if (n > max_len)
		return ember_error_set(EMBER_EFORMAT, "%s%s at offset %" PRIu64 ": length %" PRIu64
		                       " exceeds the limit of %" PRIu64, ctx, what, at, n, max_len);
	if (n > c->size - c->pos)
		return ember_error_set(EMBER_EFORMAT, "%s%s at offset %" PRIu64 ": length %" PRIu64
		                       " exceeds the %" PRIu64 " bytes left in the file", ctx, what, at, n,
		                       c->size - c->pos);
	*str = c->base + c->pos;
	*len = n;
	c->pos += n;
	return 0;
}

/* NUL-terminated copy of a name or key that must be non-empty and free of NUL bytes. */
static int copy_name(char **out, const uint8_t *s, uint64_t len, uint64_t at, const char *ctx, const char *what)
{
	if (len == 0)
		return ember_error_set(EMBER_EFORMAT, "%s%s at offset %" PRIu64 " is empty", ctx, what, at);
	if (memchr(s, 0, len))
		return ember_error_set(EMBER_EFORMAT, "%s%s at offset %" PRIu64 " contains a NUL byte", ctx, what, at);
	char *copy = malloc(len + 1);
	if (!copy)
		return ember_error_set(EMBER_ENOMEM, "out of memory copying a %" PRIu64 "-byte %s", len, what);
	memcpy(copy, s, len);
	copy[len] = '\0';
	*out = copy;
	return 0;
}

/* Grows *arr (elements of `elem` bytes) so that index `n` fits; capacity doubles. `what` names
 * the table in the error. */
static int grow(void **arr, uint64_t *cap, uint64_t n, size_t elem, const char *what)
{
	if (n < *cap)
		return 0;
	uint64_t new_cap = *cap ? *cap * 2 : 16;
	if (new_cap > SIZE_MAX / elem)
		return ember_error_set(EMBER_ENOMEM, "%s: a table of %" PRIu64 " entries is too large", what, new_cap);
	void *p = realloc(*arr, new_cap * elem);
	if (!p)
		return ember_error_set(EMBER_ENOMEM, "%s: out of memory growing the table to %" PRIu64 " entries", what,
		                       new_cap);
	*arr = p;
	*cap = new_cap;
	return 0;
}

/* ---- metadata ---- */

/* Parses one value of `type` at the cursor. `kv` receives the value for a top-level entry and is
 * NULL inside nested arrays, which are validated and skipped. */
static int parse_value(struct cursor *c, uint32_t type, int depth, struct kv *kv, const char *ctx)
{
	uint64_t at = c->pos;
	if (type > EMBER_GGUF_F64)
		return ember_error_set(EMBER_EFORMAT, "%svalue type %" PRIu32 " at offset %" PRIu64
		                       " is not a GGUF type (0..12)", ctx, type, at);
	if (type == EMBER_GGUF_STRING) {
		const uint8_t *s;
		uint64_t len;
		if (read_str(c, &s, &len, UINT64_MAX, ctx, "string value"))
			return EMBER_EFORMAT;
		if (kv) {
			if (memchr(s, 0, len))
				return ember_error_set(EMBER_EFORMAT, "%sstring value at offset %" PRIu64
				                       " contains a NUL byte", ctx, at);
			if (!(kv->str = malloc(len + 1)))
				return ember_error_set(EMBER_ENOMEM, "out of memory copying a %" PRIu64 "-byte string", len);
			memcpy(kv->str, s, len);
			kv->str[len] = '\0';
		}
		return 0;
	}
	if (type != EMBER_GGUF_ARRAY) {
		uint64_t size = value_size(type);
		if (need(c, size, ctx, "value"))
			return EMBER_EFORMAT;
		if (kv) {
			uint64_t raw = le(c->base + c->pos, (int)size);
			switch (type) {
			case EMBER_GGUF_I8: kv->num.i = (int8_t)raw; break;
			case EMBER_GGUF_I16: kv->num.i = (int16_t)raw; break;
			case EMBER_GGUF_I32: kv->num.i = (int32_t)raw; break;
			case EMBER_GGUF_I64: kv->num.i = (int64_t)raw; break;
			case EMBER_GGUF_F32: { uint32_t b = (uint32_t)raw; float f; memcpy(&f, &b, 4); kv->num.f = f; break; }
			case EMBER_GGUF_F64: memcpy(&kv->num.f, &raw, 8); break;
			case EMBER_GGUF_BOOL:
				if (raw > 1)
					return ember_error_set(EMBER_EFORMAT, "%sbool value at offset %" PRIu64
					                       " is %" PRIu64 ", not 0 or 1", ctx, at, raw);
				kv->num.u = raw;
				break;
			default: kv->num.u = raw; break;
			}
		}
		c->pos += size;
		return 0;
	}

	if (depth >= EMBER_GGUF_MAX_ARRAY_DEPTH)
		return ember_error_set(EMBER_EFORMAT, "%sarray at offset %" PRIu64 " nests deeper than %d levels",
		                       ctx, at, EMBER_GGUF_MAX_ARRAY_DEPTH);
	uint32_t elem_type;
	uint64_t count;
	if (read_u32(c, &elem_type, ctx, "array element type") || read_u64(c, &count, ctx, "array length"))
		return EMBER_EFORMAT;
	if (elem_type > EMBER_GGUF_F64)
		return ember_error_set(EMBER_EFORMAT, "%sarray at offset %" PRIu64 ": element type %" PRIu32
		                       " is not a GGUF type (0..12)", ctx, at, elem_type);
	/* Smallest possible encoding of one element: its fixed size, a string's length prefix, or a
	 * nested array's type and length. */
	uint64_t min_elem = value_size(elem_type);
	if (elem_type == EMBER_GGUF_STRING)
		min_elem = 8;
	else if (elem_type == EMBER_GGUF_ARRAY)
		min_elem = 12;
	if (count > (c->size - c->pos) / min_elem)
		return ember_error_set(EMBER_EFORMAT, "%sarray at offset %" PRIu64 ": length %" PRIu64
		                       " needs at least %" PRIu64 " bytes per element but only %" PRIu64
		                       " bytes remain", ctx, at, count, min_elem, c->size - c->pos);
	if (kv) {
		kv->arr_type = elem_type;
		kv->arr_count = count;
		kv->arr_data = c->pos;
	}
	if (elem_type != EMBER_GGUF_STRING && elem_type != EMBER_GGUF_ARRAY) {
		c->pos += count * min_elem;
		return 0;
	}
	uint64_t cap = 0;
	for (uint64_t j = 0; j < count; j++) {
		if (kv && elem_type == EMBER_GGUF_STRING) {
			if (grow((void **)&kv->str_offsets, &cap, j, sizeof(uint64_t), kv->key))
				return EMBER_ENOMEM;
			kv->str_offsets[j] = c->pos;
		}
		int error = parse_value(c, elem_type, depth + 1, NULL, ctx);
		if (error)
			return error;
	}
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a duplicate among n names; returns it or NULL. */
static int find_duplicate(const char **names, int64_t n, const char **dup)
{
	*dup = NULL;
	if (n < 2)
		return 0;
	const char **sorted = malloc((size_t)n * sizeof(*sorted));
	if (!sorted)
		return ember_error_set(EMBER_ENOMEM, "out of memory checking %" PRId64 " names", n);
	memcpy(sorted, names, (size_t)n * sizeof(*sorted));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_str_ptr);
	for (int64_t i = 1; i < n && !*dup; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			*dup = sorted[i];
	free(sorted);
	return 0;
}

static int parse_metadata(struct ember_gguf *g, struct cursor *c, uint64_t n_kv)
{
	uint64_t cap = 0;
	char ctx[128];
	for (uint64_t i = 0; i < n_kv; i++) {
		uint64_t at = c->pos, key_len;
		const uint8_t *key;
		snprintf(ctx, sizeof(ctx), "metadata entry %" PRIu64 ": ", i);
		if (read_str(c, &key, &key_len, EMBER_GGUF_MAX_KEY, ctx, "key"))
			return EMBER_EFORMAT;
		if (grow((void **)&g->kvs, &cap, i, sizeof(struct kv), "metadata"))
			return EMBER_ENOMEM;
		struct kv *kv = &g->kvs[i];
		memset(kv, 0, sizeof(*kv));
		g->n_kv = (int64_t)i + 1;
		kv->offset = at;
		int error = copy_name(&kv->key, key, key_len, at, ctx, "key");
		if (error)
			return error;
		snprintf(ctx, sizeof(ctx), "metadata '%.80s': ", kv->key);
		if ((error = read_u32(c, &kv->type, ctx, "value type")) || (error = parse_value(c, kv->type, 0, kv, ctx)))
			return error;
	}
	const char **keys = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof(*keys));
	if (!keys)
		return ember_error_set(EMBER_ENOMEM, "out of memory checking %" PRId64 " metadata keys", g->n_kv);
	for (int64_t i = 0; i < g->n_kv; i++)
		keys[i] = g->kvs[i].key;
	const char *dup;
	int error = find_duplicate(keys, g->n_kv, &dup);
	free(keys);
	if (error)
		return error;
	if (dup)
		return ember_error_set(EMBER_EFORMAT, "metadata key '%.80s' appears more than once", dup);
	return 0;
}

/* ---- tensors ---- */

static int parse_tensor_info(struct ember_gguf *g, struct cursor *c, uint64_t i)
{
	struct ember_gguf_tensor *t = &g->tensors[i];
	char ctx[128];
	uint64_t at = c->pos, name_len;
	const uint8_t *name;
	char *copy = NULL;
	snprintf(ctx, sizeof(ctx), "tensor info %" PRIu64 ": ", i);
	int error;
	if ((error = read_str(c, &name, &name_len, EMBER_GGUF_MAX_NAME, ctx, "name")) ||
	    (error = copy_name(&copy, name, name_len, at, ctx, "name")))
		return error;
	t->name = copy;
	snprintf(ctx, sizeof(ctx), "tensor '%s' (info at offset %" PRIu64 "): ", t->name, at);

	uint32_t n_dims, type;
	uint64_t dims_at = c->pos + 4;
	if (read_u32(c, &n_dims, ctx, "n_dims"))
		return EMBER_EFORMAT;
	if (n_dims < 1 || n_dims > 4)
		return ember_error_set(EMBER_EFORMAT, "%sn_dims %" PRIu32 " is outside 1..4", ctx, n_dims);
	t->n_dims = (int)n_dims;
	uint64_t n_elements = 1;
	for (int d = 0; d < 4; d++) {
		uint64_t dim = 1;
		if (d < (int)n_dims && read_u64(c, &dim, ctx, "dimension"))
			return EMBER_EFORMAT;
		if (dim == 0 || dim > (uint64_t)INT64_MAX)
			return ember_error_set(EMBER_EFORMAT, "%sdimension %d at offset %" PRIu64 " is %" PRIu64
			                       " (must be 1..2^63-1)", ctx, d, dims_at + 8 * (uint64_t)d, dim);
		if (n_elements > (uint64_t)INT64_MAX / dim)
			return ember_error_set(EMBER_EFORMAT, "%sthe element count overflows (dimension %d is %" PRIu64 ")",
			                       ctx, d, dim);
		n_elements *= dim;
		t->ne[d] = (int64_t)dim;
	}
	uint64_t type_at = c->pos;
	if (read_u32(c, &type, ctx, "type") || read_u64(c, &t->offset, ctx, "data offset"))
		return EMBER_EFORMAT;
	uint32_t block_elems, block_bytes;
	if (ember_gguf_type_block(type, &block_elems, &block_bytes))
		return ember_error_set(EMBER_EFORMAT, "%stype code %" PRIu32 " at offset %" PRIu64
		                       " is not a ggml type", ctx, type, type_at);
	t->type = type;
	if ((uint64_t)t->ne[0] % block_elems != 0)
		return ember_error_set(EMBER_EFORMAT, "%srow length %" PRId64 " is not a multiple of the %s block size %" PRIu32,
		                       ctx, t->ne[0], ggml_types[type].name, block_elems);
	uint64_t blocks = n_elements / block_elems;
	if (blocks > UINT64_MAX / block_bytes)
		return ember_error_set(EMBER_EFORMAT, "%sthe byte size overflows", ctx);
	t->n_elements = n_elements;
	t->nbytes = blocks * block_bytes;
	if (t->offset % g->alignment != 0)
		return ember_error_set(EMBER_EFORMAT, "%sdata offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
		                       ctx, t->offset, g->alignment);
	return 0;
}

static int cmp_tensor_offset(const void *a, const void *b)
{
	const struct ember_gguf_tensor *x = *(const struct ember_gguf_tensor *const *)a;
	const struct ember_gguf_tensor *y = *(const struct ember_gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every tensor inside the file, none overlapping another, names unique. */
static int check_tensor_data(struct ember_gguf *g)
{
	int error = -1;
	const struct ember_gguf_tensor **order = NULL;
	const char **names = NULL;
	if (g->n_tensors == 0)
		return 0;
	for (int64_t i = 0; i < g->n_tensors; i++) {
		struct ember_gguf_tensor *t = &g->tensors[i];
		uint64_t room = g->size - g->data_offset;
		if (t->offset > room || t->nbytes > room - t->offset) {
			error = ember_error_set(EMBER_EFORMAT, "tensor '%s': data at file offset %" PRIu64 " + %" PRIu64
			                        " bytes lies beyond the end of the file (size %" PRIu64 ")",
			                        t->name, g->data_offset + t->offset, t->nbytes, g->size);
			goto cleanup;
		}
		t->file_offset = g->data_offset + t->offset;
		t->data = g->base + t->file_offset;
	}
	order = malloc((size_t)g->n_tensors * sizeof(*order));
	names = malloc((size_t)g->n_tensors * sizeof(*names));
	if (!order || !names) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory checking %" PRId64 " tensors", g->n_tensors);
		goto cleanup;
	}
	for (int64_t i = 0; i < g->n_tensors; i++) {
		order[i] = &g->tensors[i];
		names[i] = g->tensors[i].name;
	}
	qsort(order, (size_t)g->n_tensors, sizeof(*order), cmp_tensor_offset);
	for (int64_t i = 1; i < g->n_tensors; i++)
		if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset) {
			error = ember_error_set(EMBER_EFORMAT, "tensors '%s' (offset %" PRIu64 ", %" PRIu64 " bytes) and '%s' "
			                        "(offset %" PRIu64 ") overlap", order[i - 1]->name, order[i - 1]->offset,
			                        order[i - 1]->nbytes, order[i]->name, order[i]->offset);
			goto cleanup;
		}
	const char *dup;
	if ((error = find_duplicate(names, g->n_tensors, &dup)))
		goto cleanup;
	if (dup) {
		error = ember_error_set(EMBER_EFORMAT, "tensor name '%s' appears more than once", dup);
		goto cleanup;
	}
	error = 0;
cleanup:
	free(order);
	free(names);
	return error;
}

static int parse(struct ember_gguf *g)
{
	struct cursor c = {g->base, g->size, 0};
	uint32_t magic;
	uint64_t n_tensors, n_kv;

	if (read_u32(&c, &magic, "", "magic"))
		return EMBER_EFORMAT;
	if (magic != EMBER_GGUF_MAGIC)
		return ember_error_set(EMBER_EFORMAT, "not a GGUF file: magic at offset 0 is 0x%08" PRIx32
		                       " (expected 0x%08x, \"GGUF\")", magic, EMBER_GGUF_MAGIC);
	if (read_u32(&c, &g->version, "", "version"))
		return EMBER_EFORMAT;
	if (g->version == 0x03000000u || g->version == 0x02000000u)
		return ember_error_set(EMBER_EUNSUPPORTED, "big-endian GGUF (version field 0x%08" PRIx32
		                       " at offset 4) is not supported", g->version);
	if (g->version != 2 && g->version != 3)
		return ember_error_set(EMBER_EUNSUPPORTED, "unsupported GGUF version %" PRIu32
		                       " at offset 4 (ember reads versions 2 and 3)", g->version);
	if (read_u64(&c, &n_tensors, "", "tensor count") || read_u64(&c, &n_kv, "", "metadata count"))
		return EMBER_EFORMAT;
	/* Cheapest entries: a 1-byte key with a 1-byte value (14 bytes); a 1-byte name, 1 dim (33). */
	if (n_kv > (c.size - c.pos) / 14)
		return ember_error_set(EMBER_EFORMAT, "metadata count %" PRIu64 " at offset 16 cannot fit in the %"
		                       PRIu64 " bytes after the header (truncated or corrupt file)", n_kv, c.size - c.pos);
	if (n_tensors > (c.size - c.pos) / 33)
		return ember_error_set(EMBER_EFORMAT, "tensor count %" PRIu64 " at offset 8 cannot fit in the %"
		                       PRIu64 " bytes after the header (truncated or corrupt file)", n_tensors, c.size - c.pos);
	int error = parse_metadata(g, &c, n_kv);
	if (error)
		return error;

	g->alignment = EMBER_GGUF_DEFAULT_ALIGNMENT;
	int64_t ai = ember_gguf_find_kv(g, "general.alignment");
	if (ai >= 0) {
		const struct kv *kv = &g->kvs[ai];
		if (kv->type != EMBER_GGUF_U32)
			return ember_error_set(EMBER_EFORMAT, "general.alignment (offset %" PRIu64 ") has type %s, expected u32",
			                       kv->offset, ember_gguf_value_type_name(kv->type));
		if (kv->num.u == 0 || (kv->num.u & (kv->num.u - 1)) != 0)
			return ember_error_set(EMBER_EFORMAT, "general.alignment (offset %" PRIu64 ") is %" PRIu64
			                       ", not a power of two", kv->offset, kv->num.u);
		g->alignment = (uint32_t)kv->num.u;
	}

	uint64_t cap = 0;
	for (uint64_t i = 0; i < n_tensors; i++) {
		if (grow((void **)&g->tensors, &cap, i, sizeof(struct ember_gguf_tensor), "tensor infos"))
			return EMBER_ENOMEM;
		memset(&g->tensors[i], 0, sizeof(g->tensors[i]));
		g->n_tensors = (int64_t)i + 1;
		if ((error = parse_tensor_info(g, &c, i)))
			return error;
	}
	uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
	g->data_offset = c.pos + pad;
	if (n_tensors > 0 && g->data_offset > g->size)
		return ember_error_set(EMBER_EFORMAT, "truncated file: the tensor data should start at offset %" PRIu64
		                       " but the file has %" PRIu64 " bytes", g->data_offset, g->size);
	return check_tensor_data(g);
}

/* ---- open / close ---- */

static int open_common(struct ember_gguf **out, struct ember_gguf *g)
{
	int error = parse(g);
	if (error) {
		ember_gguf_close(g);
		return error;
	}
	*out = g;
	return 0;
}

int ember_gguf_open_memory(struct ember_gguf **out, const void *data, size_t size)
{
	struct ember_gguf *g = calloc(1, sizeof(*g));
	if (!g)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	g->base = data;
	g->size = size;
	return open_common(out, g);
}

int ember_gguf_open(struct ember_gguf **out, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return ember_error_set(EMBER_ERROR, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ember_error_set(EMBER_ERROR, "%s: not a regular file", path);
	}
	if (st.st_size == 0) {
		close(fd);
		return ember_error_set(EMBER_EFORMAT, "%s: the file is empty", path);
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return ember_error_set(EMBER_ERROR, "%s: mmap of %lld bytes failed: %s", path, (long long)st.st_size,
		                       strerror(errno));
	struct ember_gguf *g = calloc(1, sizeof(*g));
	if (!g) {
		munmap(map, (size_t)st.st_size);
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	}
	g->base = map;
	g->size = (uint64_t)st.st_size;
	g->mapped = 1;
	int error = open_common(out, g);
	if (error)
		return ember_error_wrap(error, "%s", path);
	return 0;
}

void ember_gguf_close(struct ember_gguf *g)
{
	if (!g)
		return;
	for (int64_t i = 0; i < g->n_kv; i++) {
		free(g->kvs[i].key);
		free(g->kvs[i].str);
		free(g->kvs[i].str_offsets);
	}
	free(g->kvs);
	for (int64_t i = 0; i < g->n_tensors; i++)
		free((char *)g->tensors[i].name);
	free(g->tensors);
	if (g->mapped)
		munmap((void *)g->base, (size_t)g->size);
	free(g);
}

/* ---- accessors ---- */

uint32_t ember_gguf_version(const struct ember_gguf *g) { return g->version; }
uint32_t ember_gguf_alignment(const struct ember_gguf *g) { return g->alignment; }
uint64_t ember_gguf_file_size(const struct ember_gguf *g) { return g->size; }
uint64_t ember_gguf_data_offset(const struct ember_gguf *g) { return g->data_offset; }
int64_t ember_gguf_kv_count(const struct ember_gguf *g) { return g->n_kv; }
const char *ember_gguf_kv_key(const struct ember_gguf *g, int64_t kv) { return g->kvs[kv].key; }
enum ember_gguf_type ember_gguf_kv_type(const struct ember_gguf *g, int64_t kv) { return g->kvs[kv].type; }
int64_t ember_gguf_tensor_count(const struct ember_gguf *g) { return g->n_tensors; }
const struct ember_gguf_tensor *ember_gguf_tensor(const struct ember_gguf *g, int64_t i) { return &g->tensors[i]; }

int64_t ember_gguf_find_kv(const struct ember_gguf *g, const char *key)
{
	for (int64_t i = 0; i < g->n_kv; i++)
		if (strcmp(g->kvs[i].key, key) == 0)
			return i;
	return -1;
}

const struct ember_gguf_tensor *ember_gguf_find_tensor(const struct ember_gguf *g, const char *name)
{
	for (int64_t i = 0; i < g->n_tensors; i++)
		if (strcmp(g->tensors[i].name, name) == 0)
			return &g->tensors[i];
	return NULL;
}

static int is_signed_int(uint32_t t) { return t == EMBER_GGUF_I8 || t == EMBER_GGUF_I16 || t == EMBER_GGUF_I32 || t == EMBER_GGUF_I64; }
static int is_unsigned_int(uint32_t t) { return t == EMBER_GGUF_U8 || t == EMBER_GGUF_U16 || t == EMBER_GGUF_U32 || t == EMBER_GGUF_U64; }

static const struct kv *lookup(const struct ember_gguf *g, const char *key)
{
	int64_t i = ember_gguf_find_kv(g, key);
	if (i < 0) {
		ember_error_set(EMBER_EFORMAT, "metadata key '%s' is missing", key);
		return NULL;
	}
	return &g->kvs[i];
}

static int wrong_type(const struct kv *kv, const char *expected)
{
	return ember_error_set(EMBER_EFORMAT, "metadata '%s' has type %s, expected %s", kv->key,
	                       ember_gguf_value_type_name(kv->type), expected);
}

int ember_gguf_get_uint(const struct ember_gguf *g, const char *key, uint64_t *out)
{
	const struct kv *kv = lookup(g, key);
	if (!kv)
		return EMBER_EFORMAT;
	if (is_unsigned_int(kv->type)) {
		*out = kv->num.u;
		return 0;
	}
	if (is_signed_int(kv->type)) {
		if (kv->num.i < 0)
			return ember_error_set(EMBER_EFORMAT, "metadata '%s' is negative (%" PRId64 ")", key, kv->num.i);
		*out = (uint64_t)kv->num.i;
		return 0;
	}
	return wrong_type(kv, "an integer");
}

int ember_gguf_get_int(const struct ember_gguf *g, const char *key, int64_t *out)
{
	const struct kv *kv = lookup(g, key);
	if (!kv)
		return EMBER_EFORMAT;
	if (is_signed_int(kv->type)) {
		*out = kv->num.i;
		return 0;
	}
	if (is_unsigned_int(kv->type)) {
		if (kv->num.u > (uint64_t)INT64_MAX)
			return ember_error_set(EMBER_EFORMAT, "metadata '%s' is too large (%" PRIu64 ")", key, kv->num.u);
		*out = (int64_t)kv->num.u;
		return 0;
	}
	return wrong_type(kv, "an integer");
}

int ember_gguf_get_float(const struct ember_gguf *g, const char *key, double *out)
{
	const struct kv *kv = lookup(g, key);
	if (!kv)
		return EMBER_EFORMAT;
	if (kv->type != EMBER_GGUF_F32 && kv->type != EMBER_GGUF_F64)
		return wrong_type(kv, "f32 or f64");
	*out = kv->num.f;
	return 0;
}

int ember_gguf_get_bool(const struct ember_gguf *g, const char *key, int *out)
{
	const struct kv *kv = lookup(g, key);
	if (!kv)
		return EMBER_EFORMAT;
	if (kv->type != EMBER_GGUF_BOOL)
		return wrong_type(kv, "bool");
	*out = (int)kv->num.u;
	return 0;
}

int ember_gguf_get_str(const struct ember_gguf *g, const char *key, const char **out)
{
	const struct kv *kv = lookup(g, key);
	if (!kv)
		return EMBER_EFORMAT;
	if (kv->type != EMBER_GGUF_STRING)
		return wrong_type(kv, "string");
	*out = kv->str;
	return 0;
}

int ember_gguf_kv_number(const struct ember_gguf *g, int64_t i, double *out)
{
	const struct kv *kv = &g->kvs[i];
	if (is_unsigned_int(kv->type) || kv->type == EMBER_GGUF_BOOL)
		*out = (double)kv->num.u;
	else if (is_signed_int(kv->type))
		*out = (double)kv->num.i;
	else if (kv->type == EMBER_GGUF_F32 || kv->type == EMBER_GGUF_F64)
		*out = kv->num.f;
	else
		return wrong_type(kv, "a number");
	return 0;
}

int ember_gguf_kv_array(const struct ember_gguf *g, int64_t i, enum ember_gguf_type *elem_type, uint64_t *count)
{
	const struct kv *kv = &g->kvs[i];
	if (kv->type != EMBER_GGUF_ARRAY)
		return wrong_type(kv, "array");
	*elem_type = kv->arr_type;
	*count = kv->arr_count;
	return 0;
}

const void *ember_gguf_kv_array_data(const struct ember_gguf *g, int64_t i)
{
	const struct kv *kv = &g->kvs[i];
	if (kv->type != EMBER_GGUF_ARRAY || !value_size(kv->arr_type))
		return NULL;
	return g->base + kv->arr_data;
}

int ember_gguf_kv_array_str(const struct ember_gguf *g, int64_t i, uint64_t j, const char **str, uint64_t *len)
{
	const struct kv *kv = &g->kvs[i];
	if (kv->type != EMBER_GGUF_ARRAY || kv->arr_type != EMBER_GGUF_STRING)
		return wrong_type(kv, "array of strings");
	if (j >= kv->arr_count)
		return ember_error_set(EMBER_ERROR, "metadata '%s': index %" PRIu64 " is past the %" PRIu64 " elements",
		                       kv->key, j, kv->arr_count);
	uint64_t at = kv->str_offsets[j];
	*len = le(g->base + at, 8);
	*str = (const char *)g->base + at + 8;
	return 0;
}

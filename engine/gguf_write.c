/*
 * gguf_write.c - streaming GGUF v3 writer. Metadata and tensor infos are serialized in memory
 * (they are small); the tensor data never is: once the header is written the file is sized to its
 * final length and callers pwrite each tensor's bytes at its aligned offset, from any thread, in
 * any order. Padding between tensors stays zero because the file is extended with ftruncate.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

struct wkv {
	char *key;
	uint32_t type;
	uint8_t *payload;  /* the value's serialized bytes (after the type code) */
	size_t payload_len;
};

struct wtensor {
	char *name;
	uint32_t type;
	int n_dims;
	int64_t ne[4];
	uint64_t nbytes;
	uint64_t offset;              /* within the data section */
	_Atomic uint64_t written;
};

struct ember_gguf_writer {
	struct wkv *kvs;
	size_t n_kv, cap_kv;
	struct wtensor *tensors;
	size_t n_tensors, cap_tensors;
	uint32_t alignment;
	int fd;
	char *path;
	uint64_t data_offset, file_size;
	int finished;
};

/* A growable byte buffer for serializing. */
struct buf {
	uint8_t *data;
	size_t len, cap;
	int oom;
};

static void buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->oom = 1;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void buf_le(struct buf *b, uint64_t v, int n)
{
	uint8_t bytes[8];
	for (int i = 0; i < n; i++)
		bytes[i] = (uint8_t)(v >> (8 * i));
	buf_put(b, bytes, (size_t)n);
}

static void buf_str(struct buf *b, const char *s, size_t n)
{
	buf_le(b, n, 8);
	buf_put(b, s, n);
}

static uint64_t scalar_size(enum ember_gguf_type t)
{
	switch (t) {
	case EMBER_GGUF_U8: case EMBER_GGUF_I8: case EMBER_GGUF_BOOL: return 1;
	case EMBER_GGUF_U16: case EMBER_GGUF_I16: return 2;
	case EMBER_GGUF_U32: case EMBER_GGUF_I32: case EMBER_GGUF_F32: return 4;
	case EMBER_GGUF_U64: case EMBER_GGUF_I64: case EMBER_GGUF_F64: return 8;
	default: return 0;
	}
}

int ember_gguf_writer_create(struct ember_gguf_writer **out)
{
	struct ember_gguf_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	w->fd = -1;
	w->alignment = EMBER_GGUF_DEFAULT_ALIGNMENT;
	*out = w;
	return 0;
}

void ember_gguf_writer_free(struct ember_gguf_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->path && !w->finished)
		unlink(w->path);
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kvs[i].key);
		free(w->kvs[i].payload);
	}
	free(w->kvs);
	for (size_t i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name);
	free(w->tensors);
	free(w->path);
	free(w);
}

/* Takes ownership of the serialized payload in b. */
static int add_kv(struct ember_gguf_writer *w, const char *key, enum ember_gguf_type type, struct buf *b)
{
	int error = -1;
	if (b->oom) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory serializing metadata '%s'", key);
		goto cleanup;
	}
	if (w->fd >= 0) {
		error = ember_error_set(EMBER_ERROR, "metadata '%s' set after the header was written", key);
		goto cleanup;
	}
	size_t key_len = strlen(key);
	if (key_len == 0 || key_len > EMBER_GGUF_MAX_KEY) {
		error = ember_error_set(EMBER_ERROR, "metadata key of %zu bytes (must be 1..%d)", key_len, EMBER_GGUF_MAX_KEY);
		goto cleanup;
	}
	for (size_t i = 0; i < w->n_kv; i++)
		if (strcmp(w->kvs[i].key, key) == 0) {
			error = ember_error_set(EMBER_ERROR, "metadata key '%s' set twice", key);
			goto cleanup;
		}
	if (w->n_kv == w->cap_kv) {
		size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
		struct wkv *kvs = realloc(w->kvs, cap * sizeof(*kvs));
		if (!kvs) {
			error = ember_error_set(EMBER_ENOMEM, "out of memory");
			goto cleanup;
		}
		w->kvs = kvs;
		w->cap_kv = cap;
	}
	char *copy = strdup(key);
	if (!copy) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	w->kvs[w->n_kv++] = (struct wkv){copy, (uint32_t)type, b->data, b->len};
	b->data = NULL;
	error = 0;
cleanup:
	free(b->data);
	return error;
}

int ember_gguf_writer_set_scalar(struct ember_gguf_writer *w, const char *key, enum ember_gguf_type type,
                                 const void *value)
{
	struct buf b = {0};
	uint64_t size = scalar_size(type);
	if (!size)
		return ember_error_set(EMBER_ERROR, "metadata '%s': %s is not a scalar type", key,
		                       ember_gguf_value_type_name(type));
	uint32_t alignment = 0;
	if (strcmp(key, "general.alignment") == 0) {
		if (type == EMBER_GGUF_U32)
			memcpy(&alignment, value, 4);
		if (alignment == 0 || (alignment & (alignment - 1)) != 0)
			return ember_error_set(EMBER_ERROR, "general.alignment must be a u32 power of two");
	}
	buf_put(&b, value, size); /* host order is little-endian on every platform ember targets */
	int error = add_kv(w, key, type, &b);
	if (!error && alignment) /* only once the key is in: a refused duplicate must not move the data */
		w->alignment = alignment;
	return error;
}

int ember_gguf_writer_set_u32(struct ember_gguf_writer *w, const char *key, uint32_t value)
{
	return ember_gguf_writer_set_scalar(w, key, EMBER_GGUF_U32, &value);
}

int ember_gguf_writer_set_i32(struct ember_gguf_writer *w, const char *key, int32_t value)
{
	return ember_gguf_writer_set_scalar(w, key, EMBER_GGUF_I32, &value);
}

int ember_gguf_writer_set_u64(struct ember_gguf_writer *w, const char *key, uint64_t value)
{
	return ember_gguf_writer_set_scalar(w, key, EMBER_GGUF_U64, &value);
}

int ember_gguf_writer_set_f32(struct ember_gguf_writer *w, const char *key, float value)
{
	return ember_gguf_writer_set_scalar(w, key, EMBER_GGUF_F32, &value);
}

int ember_gguf_writer_set_bool(struct ember_gguf_writer *w, const char *key, int value)
{
	uint8_t v = value ? 1 : 0;
	return ember_gguf_writer_set_scalar(w, key, EMBER_GGUF_BOOL, &v);
}

int ember_gguf_writer_set_str(struct ember_gguf_writer *w, const char *key, const char *value)
{
	struct buf b = {0};
	buf_str(&b, value, strlen(value));
	return add_kv(w, key, EMBER_GGUF_STRING, &b);
}

int ember_gguf_writer_set_array(struct ember_gguf_writer *w, const char *key, enum ember_gguf_type elem_type,
                                const void *data, uint64_t n)
{
	struct buf b = {0};
	uint64_t size = scalar_size(elem_type);
	if (!size)
		return ember_error_set(EMBER_ERROR, "metadata '%s': use set_str_array for %s elements", key,
		                       ember_gguf_value_type_name(elem_type));
	if (n > SIZE_MAX / size)
		return ember_error_set(EMBER_ERROR, "metadata '%s': %" PRIu64 " elements are too many", key, n);
	buf_le(&b, elem_type, 4);
	buf_le(&b, n, 8);
	buf_put(&b, data, (size_t)(n * size));
	return add_kv(w, key, EMBER_GGUF_ARRAY, &b);
}

int ember_gguf_writer_set_str_array(struct ember_gguf_writer *w, const char *key, const char *const *strs,
                                    uint64_t n)
{
	struct buf b = {0};
	buf_le(&b, EMBER_GGUF_STRING, 4);
	buf_le(&b, n, 8);
	for (uint64_t i = 0; i < n; i++)
		buf_str(&b, strs[i], strlen(strs[i]));
	return add_kv(w, key, EMBER_GGUF_ARRAY, &b);
}

int ember_gguf_writer_add_tensor(struct ember_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                 const int64_t *ne)
{
	uint32_t block_elems, block_bytes;
	size_t name_len = strlen(name);
	if (w->fd >= 0)
		return ember_error_set(EMBER_ERROR, "tensor '%s' added after the header was written", name);
	if (name_len == 0 || name_len > EMBER_GGUF_MAX_NAME)
		return ember_error_set(EMBER_ERROR, "tensor name '%s' must be 1..%d bytes", name, EMBER_GGUF_MAX_NAME);
	if (ember_gguf_type_block(type, &block_elems, &block_bytes))
		return ember_error_set(EMBER_ERROR, "tensor '%s': unknown type code %" PRIu32, name, type);
	if (n_dims < 1 || n_dims > 4)
		return ember_error_set(EMBER_ERROR, "tensor '%s': n_dims %d is outside 1..4", name, n_dims);
	uint64_t n_elements = 1;
	for (int d = 0; d < n_dims; d++) {
		if (ne[d] < 1 || (uint64_t)ne[d] > (uint64_t)INT64_MAX / n_elements)
			return ember_error_set(EMBER_ERROR, "tensor '%s': bad dimension %d (%" PRId64 ")", name, d, ne[d]);
		n_elements *= (uint64_t)ne[d];
	}
	if (ne[0] % block_elems != 0)
		return ember_error_set(EMBER_ERROR, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block (%"
		                       PRIu32 ")", name, ne[0], ember_gguf_type_name(type), block_elems);
	if (n_elements / block_elems > UINT64_MAX / block_bytes)
		return ember_error_set(EMBER_ERROR, "tensor '%s': the byte size of %" PRIu64 " %s elements overflows", name,
		                       n_elements, ember_gguf_type_name(type));
	for (size_t i = 0; i < w->n_tensors; i++)
		if (strcmp(w->tensors[i].name, name) == 0)
			return ember_error_set(EMBER_ERROR, "tensor '%s' added twice", name);
	if (w->n_tensors == w->cap_tensors) {
		size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
		struct wtensor *t = realloc(w->tensors, cap * sizeof(*t));
		if (!t)
			return ember_error_set(EMBER_ENOMEM, "out of memory");
		w->tensors = t;
		w->cap_tensors = cap;
	}
	struct wtensor *t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof(*t));
	if (!(t->name = strdup(name)))
		return ember_error_set(EMBER_ENOMEM, "out of memory");
	t->type = type;
	t->n_dims = n_dims;
	for (int d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->nbytes = n_elements / block_elems * block_bytes;
	atomic_init(&t->written, 0);
	return (int)w->n_tensors++;
}

uint64_t ember_gguf_writer_tensor_bytes(const struct ember_gguf_writer *w, int index)
{
	return index >= 0 && (size_t)index < w->n_tensors ? w->tensors[index].nbytes : 0;
}

static int write_all(int fd, const void *data, size_t n, uint64_t offset, const char *path)
{
	const uint8_t *p = data;
	while (n > 0) {
		ssize_t k = pwrite(fd, p, n, (off_t)offset);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return ember_error_set(EMBER_ERROR, "%s: write of %zu bytes at offset %" PRIu64 " failed: %s", path, n,
			                       offset, k < 0 ? strerror(errno) : "no progress");
		p += k;
		n -= (size_t)k;
		offset += (uint64_t)k;
	}
	return 0;
}

int ember_gguf_writer_open(struct ember_gguf_writer *w, const char *path)
{
	int error = -1;
	struct buf b = {0};
	if (w->fd >= 0 || w->path)
		return ember_error_set(EMBER_ERROR, "the writer is already open");

	buf_le(&b, EMBER_GGUF_MAGIC, 4);
	buf_le(&b, 3, 4);
	buf_le(&b, w->n_tensors, 8);
	buf_le(&b, w->n_kv, 8);
	for (size_t i = 0; i < w->n_kv; i++) {
		buf_str(&b, w->kvs[i].key, strlen(w->kvs[i].key));
		buf_le(&b, w->kvs[i].type, 4);
		buf_put(&b, w->kvs[i].payload, w->kvs[i].payload_len);
	}
	uint64_t offset = 0;
	for (size_t i = 0; i < w->n_tensors; i++) {
		struct wtensor *t = &w->tensors[i];
		t->offset = offset;
		offset += (t->nbytes + w->alignment - 1) / w->alignment * w->alignment;
		buf_str(&b, t->name, strlen(t->name));
		buf_le(&b, (uint64_t)t->n_dims, 4);
		for (int d = 0; d < t->n_dims; d++)
			buf_le(&b, (uint64_t)t->ne[d], 8);
		buf_le(&b, t->type, 4);
		buf_le(&b, t->offset, 8);
	}
	if (b.oom) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory serializing the GGUF header");
		goto cleanup;
	}
	w->data_offset = (b.len + w->alignment - 1) / w->alignment * w->alignment;
	w->file_size = w->data_offset + offset;
	if (!(w->path = strdup(path))) {
		error = ember_error_set(EMBER_ENOMEM, "out of memory");
		goto cleanup;
	}
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		error = ember_error_set(EMBER_ERROR, "%s: cannot create: %s", path, strerror(errno));
		free(w->path);
		w->path = NULL;
		goto cleanup;
	}
	if (ftruncate(w->fd, (off_t)w->file_size) != 0) {
		error = ember_error_set(EMBER_ERROR, "%s: cannot size the file to %" PRIu64 " bytes: %s", path,
		                        w->file_size, strerror(errno));
		goto cleanup;
	}
	if ((error = write_all(w->fd, b.data, b.len, 0, path)))
		goto cleanup;
	error = 0;
cleanup:
	free(b.data);
	return error;
}

int ember_gguf_writer_write(struct ember_gguf_writer *w, int index, uint64_t offset, const void *data, size_t n)
{
	if (w->fd < 0)
		return ember_error_set(EMBER_ERROR, "tensor data written before ember_gguf_writer_open");
	if (index < 0 || (size_t)index >= w->n_tensors)
		return ember_error_set(EMBER_ERROR, "no tensor %d", index);
	struct wtensor *t = &w->tensors[index];
	if (offset > t->nbytes || n > t->nbytes - offset)
		return ember_error_set(EMBER_ERROR, "tensor '%s': write of %zu bytes at %" PRIu64 " is past its %" PRIu64
		                       " bytes", t->name, n, offset, t->nbytes);
	int error = write_all(w->fd, data, n, w->data_offset + t->offset + offset, w->path);
	if (!error)
		atomic_fetch_add(&t->written, n);
	return error;
}

int ember_gguf_writer_finish(struct ember_gguf_writer *w)
{
	if (w->fd < 0)
		return ember_error_set(EMBER_ERROR, "ember_gguf_writer_finish before ember_gguf_writer_open");
	for (size_t i = 0; i < w->n_tensors; i++) {
		uint64_t written = atomic_load(&w->tensors[i].written);
		if (written != w->tensors[i].nbytes)
			return ember_error_set(EMBER_ERROR, "tensor '%s': %" PRIu64 " of %" PRIu64 " bytes were written",
			                       w->tensors[i].name, written, w->tensors[i].nbytes);
	}
	int fd = w->fd;
	w->fd = -1;
	if (close(fd) != 0)
		return ember_error_set(EMBER_ERROR, "%s: close failed: %s", w->path, strerror(errno));
	w->finished = 1;
	return 0;
}

/*
 * test_gguf.c - the GGUF reader and writer. `roundtrip`: a file with every metadata type, string
 * arrays and tensors of several types is written, read back and compared value by value and byte
 * by byte. `corrupt`: a corpus of broken files built byte by byte here (truncated at every offset,
 * bad magic/version, absurd counts and lengths, bad types, misaligned/overlapping/out-of-file
 * tensors, overflowing dims, deep nesting) must each fail with a message naming the problem, and
 * random mutations must never crash. `seeds DIR` writes a fuzzing seed corpus.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"
#include "error.h"
#include "gen.h"
#include "gguf.h"

/* ---- a byte builder for hand-made files ---- */

struct bb {
	uint8_t *d;
	size_t n, cap;
};

static void put(struct bb *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->d = realloc(b->d, b->cap);
		REQUIRE(b->d, "out of memory");
	}
	memcpy(b->d + b->n, p, n);
	b->n += n;
}
static void u32(struct bb *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct bb *b, uint64_t v) { put(b, &v, 8); }
static void str(struct bb *b, const char *s)
{
	u64(b, strlen(s));
	put(b, s, strlen(s));
}
static void header(struct bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	u32(b, EMBER_GGUF_MAGIC);
	u32(b, version);
	u64(b, n_tensors);
	u64(b, n_kv);
}
static void kv_u32(struct bb *b, const char *key, uint32_t v)
{
	str(b, key);
	u32(b, EMBER_GGUF_U32);
	u32(b, v);
}
static void tinfo(struct bb *b, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type, uint64_t off)
{
	str(b, name);
	u32(b, n_dims);
	for (uint32_t i = 0; i < n_dims; i++)
		u64(b, dims[i]);
	u32(b, type);
	u64(b, off);
}
static void pad(struct bb *b, size_t align)
{
	while (b->n % align)
		put(b, "", 1);
}
static void zeros(struct bb *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(b, "", 1);
}

/* Opens a private copy of exactly n bytes (so ASan sees any over-read) and expects failure with
 * a message containing `want`. */
static void expect_error(const uint8_t *data, size_t n, const char *want, const char *what)
{
	uint8_t *copy = malloc(n ? n : 1);
	struct ember_gguf *g = NULL;
	memcpy(copy, data, n);
	ember_error_clear();
	int rc = ember_gguf_open_memory(&g, copy, n);
	CHECK(rc < 0, "%s: expected an error, the file was accepted", what);
	CHECK(strstr(ember_error_last(), want), "%s: message '%s' does not mention '%s'", what, ember_error_last(), want);
	if (rc == 0)
		ember_gguf_close(g);
	free(copy);
}

/* A small valid file: two KVs, two F32 tensors {8} and {4, 2}; data sizes multiples of 32 so
 * the file ends exactly at the end of the last tensor. */
static struct bb valid_file(void)
{
	struct bb b = {0};
	uint64_t d1[1] = {8}, d2[2] = {4, 2};
	header(&b, 3, 2, 2);
	kv_u32(&b, "general.alignment", 32);
	str(&b, "general.name");
	u32(&b, EMBER_GGUF_STRING);
	str(&b, "hand made");
	tinfo(&b, "a", 1, d1, 0, 0);
	tinfo(&b, "b", 2, d2, 0, 32);
	pad(&b, 32);
	for (int i = 0; i < 16; i++) {
		float f = (float)i;
		put(&b, &f, 4);
	}
	return b;
}

static void test_valid_and_truncation(void)
{
	struct bb b = valid_file();
	struct ember_gguf *g = NULL;
	REQUIRE(ember_gguf_open_memory(&g, b.d, b.n) == 0, "valid file rejected: %s", ember_error_last());
	CHECK(ember_gguf_tensor_count(g) == 2 && ember_gguf_kv_count(g) == 2, "counts");
	const struct ember_gguf_tensor *t = ember_gguf_find_tensor(g, "b");
	CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && t->nbytes == 32 && ((const float *)t->data)[7] == 15.0f, "tensor b");
	ember_gguf_close(g);
	/* Every prefix of the file is invalid, whichever field the cut lands in. */
	for (size_t n = 0; n < b.n; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, b.d, n);
		ember_error_clear();
		int rc = ember_gguf_open_memory(&g, copy, n);
		const char *msg = ember_error_last();
		CHECK(rc < 0, "truncated at %zu of %zu bytes: accepted", n, b.n);
		CHECK(strstr(msg, "truncated") || strstr(msg, "beyond the end") || strstr(msg, "cannot fit") ||
		      strstr(msg, "exceeds the"), "truncated at %zu: unclear message '%s'", n, msg);
		if (rc == 0)
			ember_gguf_close(g);
		free(copy);
	}
	free(b.d);
}

static void test_corpus(void)
{
	struct bb b = {0};
	uint64_t d1[1] = {8};
#define RESET() (b.n = 0)

	RESET();
	u32(&b, 0x46554746); /* "FGUF" */
	u32(&b, 3);
	u64(&b, 0);
	u64(&b, 0);
	expect_error(b.d, b.n, "not a GGUF file", "bad magic");
	RESET();
	header(&b, 1, 0, 0);
	expect_error(b.d, b.n, "unsupported GGUF version 1", "version 1");
	RESET();
	header(&b, 99, 0, 0);
	expect_error(b.d, b.n, "unsupported GGUF version 99", "version 99");
	RESET();
	header(&b, 0x03000000u, 0, 0);
	expect_error(b.d, b.n, "big-endian", "big-endian version");
	expect_error(b.d, 0, "truncated file: magic", "empty buffer");

	RESET();
	header(&b, 3, UINT64_MAX, 0);
	expect_error(b.d, b.n, "tensor count", "absurd tensor count");
	RESET();
	header(&b, 3, 0, UINT64_MAX);
	zeros(&b, 100);
	expect_error(b.d, b.n, "metadata count", "absurd metadata count");

	RESET();
	header(&b, 3, 0, 1);
	u64(&b, UINT64_MAX);
	zeros(&b, 64);
	expect_error(b.d, b.n, "exceeds the limit", "absurd key length");
	RESET();
	header(&b, 3, 0, 1);
	u64(&b, 70000);
	zeros(&b, 70010);
	expect_error(b.d, b.n, "limit of 65535", "key longer than 65535");
	RESET();
	header(&b, 3, 0, 1);
	u64(&b, 0);
	u32(&b, EMBER_GGUF_U8);
	zeros(&b, 4);
	expect_error(b.d, b.n, "is empty", "empty key");
	RESET();
	header(&b, 3, 0, 1);
	u64(&b, 3);
	put(&b, "a\0b", 3);
	u32(&b, EMBER_GGUF_U8);
	zeros(&b, 4);
	expect_error(b.d, b.n, "NUL byte", "NUL in key");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, EMBER_GGUF_STRING);
	u64(&b, (uint64_t)1 << 40);
	zeros(&b, 16);
	expect_error(b.d, b.n, "exceeds the 16 bytes left", "string value longer than the file");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, 13);
	zeros(&b, 16);
	expect_error(b.d, b.n, "value type 13", "bad value type");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, EMBER_GGUF_BOOL);
	put(&b, "\x02", 1);
	zeros(&b, 16);
	expect_error(b.d, b.n, "not 0 or 1", "bool 2");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, EMBER_GGUF_ARRAY);
	u32(&b, 99);
	u64(&b, 1);
	zeros(&b, 16);
	expect_error(b.d, b.n, "element type 99", "bad array element type");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, EMBER_GGUF_ARRAY);
	u32(&b, EMBER_GGUF_U64);
	u64(&b, UINT64_MAX / 4);
	zeros(&b, 64);
	expect_error(b.d, b.n, "needs at least 8 bytes per element", "absurd array length");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "k");
	u32(&b, EMBER_GGUF_ARRAY);
	for (int depth = 0; depth < 6; depth++) {
		u32(&b, EMBER_GGUF_ARRAY);
		u64(&b, 1);
	}
	u32(&b, EMBER_GGUF_U8);
	u64(&b, 0);
	zeros(&b, 16);
	expect_error(b.d, b.n, "nests deeper than 4", "arrays nested too deep");
	RESET();
	header(&b, 3, 0, 2);
	kv_u32(&b, "x", 1);
	kv_u32(&b, "x", 2);
	zeros(&b, 32);
	expect_error(b.d, b.n, "'x' appears more than once", "duplicate key");
	RESET();
	header(&b, 3, 0, 1);
	str(&b, "general.alignment");
	u32(&b, EMBER_GGUF_U64);
	u64(&b, 32);
	zeros(&b, 32);
	expect_error(b.d, b.n, "expected u32", "alignment of the wrong type");
	RESET();
	header(&b, 3, 0, 1);
	kv_u32(&b, "general.alignment", 24);
	zeros(&b, 32);
	expect_error(b.d, b.n, "not a power of two", "alignment 24");
	RESET();
	header(&b, 3, 0, 1);
	kv_u32(&b, "general.alignment", 0);
	zeros(&b, 32);
	expect_error(b.d, b.n, "not a power of two", "alignment 0");

	/* tensor infos */
	RESET();
	header(&b, 3, 1, 0);
	str(&b, "a_name_that_is_longer_than_sixty_four_bytes_which_ggml_does_not_allow_x");
	zeros(&b, 64);
	expect_error(b.d, b.n, "limit of 64", "tensor name too long");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[5] = {1, 1, 1, 1, 1};
		tinfo(&b, "t", 5, dims, 0, 0);
	}
	zeros(&b, 64);
	expect_error(b.d, b.n, "n_dims 5 is outside 1..4", "n_dims 5");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[2] = {8, 0};
		tinfo(&b, "t", 2, dims, 0, 0);
	}
	zeros(&b, 64);
	expect_error(b.d, b.n, "dimension 1", "zero dimension");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[3] = {(uint64_t)1 << 32, (uint64_t)1 << 31, 4};
		tinfo(&b, "t", 3, dims, 0, 0);
	}
	zeros(&b, 64);
	expect_error(b.d, b.n, "element count overflows", "overflowing dims");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[1] = {(uint64_t)1 << 63};
		tinfo(&b, "t", 1, dims, 0, 0);
	}
	zeros(&b, 64);
	expect_error(b.d, b.n, "must be 1..2^63-1", "dimension above INT64_MAX");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[2] = {(uint64_t)1 << 61, 1};
		tinfo(&b, "t", 2, dims, 0, 0); /* 2^61 F32 elements: 2^63 bytes, far past the file */
	}
	pad(&b, 32);
	expect_error(b.d, b.n, "beyond the end of the file", "byte size past the file");
	RESET();
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 1, d1, 99, 0);
	zeros(&b, 64);
	expect_error(b.d, b.n, "type code 99", "bad tensor type");
	RESET();
	header(&b, 3, 1, 0);
	{
		uint64_t dims[1] = {33};
		tinfo(&b, "t", 1, dims, 8, 0);
	}
	zeros(&b, 64);
	expect_error(b.d, b.n, "not a multiple of the Q8_0 block size", "row not a whole number of blocks");
	RESET();
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 1, d1, 0, 4);
	pad(&b, 32);
	zeros(&b, 64);
	expect_error(b.d, b.n, "not a multiple of the alignment 32", "misaligned offset");
	RESET();
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 1, d1, 0, 1 << 20);
	pad(&b, 32);
	zeros(&b, 64);
	expect_error(b.d, b.n, "beyond the end of the file", "offset past the end");
	RESET();
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 1, d1, 0, UINT64_MAX - 31);
	pad(&b, 32);
	zeros(&b, 64);
	expect_error(b.d, b.n, "beyond the end of the file", "offset near 2^64");
	RESET();
	header(&b, 3, 2, 0);
	{
		uint64_t dims[1] = {16};
		tinfo(&b, "a", 1, dims, 0, 0);
		tinfo(&b, "b", 1, dims, 0, 32); /* a covers [0, 64) */
	}
	pad(&b, 32);
	zeros(&b, 128);
	expect_error(b.d, b.n, "overlap", "overlapping tensors");
	RESET();
	header(&b, 3, 2, 0);
	tinfo(&b, "a", 1, d1, 0, 0);
	tinfo(&b, "a", 1, d1, 0, 32);
	pad(&b, 32);
	zeros(&b, 64);
	expect_error(b.d, b.n, "'a' appears more than once", "duplicate tensor name");
	RESET();
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 1, d1, 0, 0);
	expect_error(b.d, b.n, "truncated file: the tensor data should start", "missing data section");
	free(b.d);
#undef RESET
}

static int try_prefix(const uint8_t *data, size_t n)
{
	struct ember_gguf *g = NULL;
	uint8_t *copy = malloc(n ? n : 1);
	memcpy(copy, data, n);
	int rc = ember_gguf_open_memory(&g, copy, n);
	if (rc == 0)
		ember_gguf_close(g);
	free(copy);
	return rc;
}

/* A generated model (2048-string vocabulary, 46 tensors) cut at every section boundary: inside
 * the header, across the metadata, at the start of the data and at each tensor's start, middle
 * and last byte. Each cut must be an error. */
static void test_model_truncation(void)
{
	char *dir = check_tmpdir("trunc");
	char path[4200];
	snprintf(path, sizeof(path), "%s/tiny.gguf", dir);
	struct ember_gen_config c = {.shape = "tiny", .quant = "q4_k_m", .seed = 2, .n_threads = 1};
	REQUIRE(ember_gen_write(&c, path) == 0, "gen: %s", ember_error_last());
	FILE *f = fopen(path, "rb");
	REQUIRE(f, "open %s", path);
	fseek(f, 0, SEEK_END);
	size_t size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *data = malloc(size);
	REQUIRE(fread(data, 1, size, f) == size, "read");
	fclose(f);
	struct ember_gguf *g = NULL;
	REQUIRE(ember_gguf_open_memory(&g, data, size) == 0, "generated model rejected: %s", ember_error_last());
	size_t cuts[512], n_cuts = 0;
	const size_t data_at = (size_t)ember_gguf_data_offset(g);
	for (size_t i = 0; i < 200; i++) /* spread over header, metadata and tensor infos */
		cuts[n_cuts++] = data_at * i / 200;
	cuts[n_cuts++] = data_at - 1;
	cuts[n_cuts++] = data_at;
	for (int64_t i = 0; i < ember_gguf_tensor_count(g) && n_cuts + 3 <= 512; i++) {
		const struct ember_gguf_tensor *t = ember_gguf_tensor(g, i);
		cuts[n_cuts++] = (size_t)t->file_offset;
		cuts[n_cuts++] = (size_t)(t->file_offset + t->nbytes / 2);
		cuts[n_cuts++] = (size_t)(t->file_offset + t->nbytes - 1);
	}
	ember_gguf_close(g);
	int accepted = 0;
	for (size_t i = 0; i < n_cuts; i++)
		if (cuts[i] < size && try_prefix(data, cuts[i]) == 0 && accepted++ < 5)
			CHECK(0, "model truncated at %zu of %zu bytes was accepted", cuts[i], size);
	printf("model truncation: %zu cuts of a %zu-byte model, all rejected: %s\n", n_cuts, size, accepted ? "no" : "yes");
	free(data);
	unlink(path);
	check_rmdir(dir);
}

/* Random byte mutations of a valid file: any outcome but a crash (ASan/UBSan watch the reads). */
static void test_mutations(void)
{
	struct bb b = valid_file();
	uint64_t x = 12345;
	int accepted = 0;
	for (int iter = 0; iter < 20000; iter++) {
		uint8_t *copy = malloc(b.n);
		memcpy(copy, b.d, b.n);
		int flips = 1 + iter % 4;
		for (int f = 0; f < flips; f++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = (size_t)(x >> 33) % b.n;
			uint8_t v = (uint8_t)(x >> 20);
			copy[at] = (iter & 1) ? v : (uint8_t)(copy[at] ^ (1u << (v & 7)));
		}
		size_t n = iter % 7 == 0 ? (size_t)(x >> 40) % (b.n + 1) : b.n;
		struct ember_gguf *g = NULL;
		if (ember_gguf_open_memory(&g, copy, n) == 0) {
			accepted++;
			for (int64_t i = 0; i < ember_gguf_kv_count(g); i++) {
				double v;
				ember_gguf_kv_number(g, i, &v);
			}
			for (int64_t i = 0; i < ember_gguf_tensor_count(g); i++) {
				const struct ember_gguf_tensor *t = ember_gguf_tensor(g, i);
				volatile uint8_t sink = t->nbytes ? ((const uint8_t *)t->data)[t->nbytes - 1] : 0;
				(void)sink;
			}
			ember_gguf_close(g);
		}
		free(copy);
	}
	printf("mutations: 20000 mutated files, %d still valid, no crash\n", accepted);
	free(b.d);
}

/* ---- writer round trip ---- */

static void fill_bytes(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (uint8_t)(seed >> 24);
	}
}

static void write_and_check(const char *path, uint32_t alignment)
{
	struct ember_gguf_writer *w = NULL;
	REQUIRE(ember_gguf_writer_create(&w) == 0, "create");
	uint8_t u8v = 200;
	int8_t i8v = -100;
	uint16_t u16v = 60000;
	int16_t i16v = -30000;
	int64_t i64v = -((int64_t)1 << 50);
	double f64v = 3.141592653589793;
	const char *strs[] = {"alpha", "", "γ unicode", "with \"quotes\""};
	int32_t ints[5] = {-2, -1, 0, 1, 2147483647};
	float floats[3] = {0.5f, -1.25f, 1e30f};
	CHECK(ember_gguf_writer_set_str(w, "general.architecture", "qwen3") == 0, "str");
	if (alignment != EMBER_GGUF_DEFAULT_ALIGNMENT)
		CHECK(ember_gguf_writer_set_u32(w, "general.alignment", alignment) == 0, "alignment");
	CHECK(ember_gguf_writer_set_scalar(w, "t.u8", EMBER_GGUF_U8, &u8v) == 0, "u8");
	CHECK(ember_gguf_writer_set_scalar(w, "t.i8", EMBER_GGUF_I8, &i8v) == 0, "i8");
	CHECK(ember_gguf_writer_set_scalar(w, "t.u16", EMBER_GGUF_U16, &u16v) == 0, "u16");
	CHECK(ember_gguf_writer_set_scalar(w, "t.i16", EMBER_GGUF_I16, &i16v) == 0, "i16");
	CHECK(ember_gguf_writer_set_u32(w, "t.u32", 4000000000u) == 0, "u32");
	CHECK(ember_gguf_writer_set_i32(w, "t.i32", -2000000000) == 0, "i32");
	CHECK(ember_gguf_writer_set_f32(w, "t.f32", 1.5f) == 0, "f32");
	CHECK(ember_gguf_writer_set_bool(w, "t.bool", 1) == 0, "bool");
	CHECK(ember_gguf_writer_set_u64(w, "t.u64", UINT64_MAX) == 0, "u64");
	CHECK(ember_gguf_writer_set_scalar(w, "t.i64", EMBER_GGUF_I64, &i64v) == 0, "i64");
	CHECK(ember_gguf_writer_set_scalar(w, "t.f64", EMBER_GGUF_F64, &f64v) == 0, "f64");
	CHECK(ember_gguf_writer_set_str_array(w, "t.strs", strs, 4) == 0, "str array");
	CHECK(ember_gguf_writer_set_str_array(w, "t.empty", NULL, 0) == 0, "empty array");
	CHECK(ember_gguf_writer_set_array(w, "t.ints", EMBER_GGUF_I32, ints, 5) == 0, "i32 array");
	CHECK(ember_gguf_writer_set_array(w, "t.floats", EMBER_GGUF_F32, floats, 3) == 0, "f32 array");
	CHECK(ember_gguf_writer_set_u32(w, "t.u32", 1) < 0, "duplicate key accepted");
	CHECK(ember_gguf_writer_set_u32(w, "general.alignment2", 1) == 0, "similar key");
	/* A refused second general.alignment must not change the alignment the data is written with
	 * (the read-back below checks offsets and bytes against the header's value). */
	if (alignment != EMBER_GGUF_DEFAULT_ALIGNMENT)
		CHECK(ember_gguf_writer_set_u32(w, "general.alignment", 4096) < 0, "second general.alignment accepted");
	uint64_t too_many = UINT64_MAX / 2;
	CHECK(ember_gguf_writer_set_array(w, "t.huge", EMBER_GGUF_U64, ints, too_many) < 0 &&
	      strstr(ember_error_last(), "too many"), "array byte size overflow accepted");

	struct { const char *name; uint32_t type; int n_dims; int64_t ne[4]; } tensors[] = {
		{"f32.vec", 0, 1, {7}},             {"f16.mat", 1, 2, {16, 3}},     {"bf16.mat", 30, 2, {8, 5}},
		{"q8_0.mat", 8, 2, {64, 3}},        {"q4_k.mat", 12, 2, {256, 2}},  {"q6_k.mat", 14, 2, {512, 1}},
		{"q4_0.foreign", 2, 3, {32, 2, 2}}, {"f32.4d", 0, 4, {2, 3, 4, 5}},
	};
	const int n_tensors = (int)(sizeof(tensors) / sizeof(tensors[0]));
	uint8_t *data[8];
	for (int i = 0; i < n_tensors; i++)
		CHECK(ember_gguf_writer_add_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims, tensors[i].ne) == i,
		      "add %s", tensors[i].name);
	int64_t bad[2] = {33, 1};
	CHECK(ember_gguf_writer_add_tensor(w, "bad", 8, 2, bad) < 0, "Q8_0 row of 33 accepted");
	CHECK(ember_gguf_writer_add_tensor(w, "f32.vec", 0, 1, bad) < 0, "duplicate tensor accepted");
	int64_t huge[2] = {INT64_MAX / 2, 1};
	CHECK(ember_gguf_writer_add_tensor(w, "huge", 28, 1, huge) < 0 && strstr(ember_error_last(), "overflows"),
	      "F64 tensor byte size overflow accepted");
	REQUIRE(ember_gguf_writer_open(w, path) == 0, "open: %s", ember_error_last());
	CHECK(ember_gguf_writer_set_u32(w, "late", 1) < 0, "metadata after open accepted");
	for (int i = 0; i < n_tensors; i++) {
		uint64_t n = ember_gguf_writer_tensor_bytes(w, i);
		data[i] = malloc(n);
		fill_bytes(data[i], n, (uint32_t)i + 1);
		/* write the second half first: order must not matter */
		CHECK(ember_gguf_writer_write(w, i, n / 2, data[i] + n / 2, n - n / 2) == 0, "write");
		CHECK(ember_gguf_writer_write(w, i, 0, data[i], n / 2) == 0, "write");
		CHECK(ember_gguf_writer_write(w, i, n, data[i], 1) < 0, "write past the tensor accepted");
	}
	REQUIRE(ember_gguf_writer_finish(w) == 0, "finish: %s", ember_error_last());
	ember_gguf_writer_free(w);

	struct ember_gguf *g = NULL;
	REQUIRE(ember_gguf_open(&g, path) == 0, "read back: %s", ember_error_last());
	CHECK(ember_gguf_version(g) == 3, "version");
	CHECK(ember_gguf_alignment(g) == alignment, "alignment %u", ember_gguf_alignment(g));
	CHECK(ember_gguf_data_offset(g) % alignment == 0, "data offset aligned");
	uint64_t u;
	int64_t i;
	double f;
	int bv;
	const char *s;
	CHECK(ember_gguf_get_str(g, "general.architecture", &s) == 0 && strcmp(s, "qwen3") == 0, "arch");
	CHECK(ember_gguf_get_uint(g, "t.u8", &u) == 0 && u == 200, "u8");
	CHECK(ember_gguf_get_int(g, "t.i8", &i) == 0 && i == -100, "i8");
	CHECK(ember_gguf_get_uint(g, "t.u16", &u) == 0 && u == 60000, "u16");
	CHECK(ember_gguf_get_int(g, "t.i16", &i) == 0 && i == -30000, "i16");
	CHECK(ember_gguf_get_uint(g, "t.u32", &u) == 0 && u == 4000000000u, "u32");
	CHECK(ember_gguf_get_int(g, "t.i32", &i) == 0 && i == -2000000000, "i32");
	CHECK(ember_gguf_get_uint(g, "t.i32", &u) < 0 && strstr(ember_error_last(), "negative"), "negative as uint");
	CHECK(ember_gguf_get_float(g, "t.f32", &f) == 0 && f == 1.5, "f32");
	CHECK(ember_gguf_get_bool(g, "t.bool", &bv) == 0 && bv == 1, "bool");
	CHECK(ember_gguf_get_uint(g, "t.u64", &u) == 0 && u == UINT64_MAX, "u64");
	CHECK(ember_gguf_get_int(g, "t.u64", &i) < 0, "u64 max as int64");
	CHECK(ember_gguf_get_int(g, "t.i64", &i) == 0 && i == i64v, "i64");
	CHECK(ember_gguf_get_float(g, "t.f64", &f) == 0 && f == f64v, "f64");
	CHECK(ember_gguf_get_float(g, "t.u32", &f) < 0 && strstr(ember_error_last(), "expected f32 or f64"), "type check");
	CHECK(ember_gguf_get_str(g, "missing.key", &s) < 0 && strstr(ember_error_last(), "missing"), "missing key");
	enum ember_gguf_type et;
	uint64_t count;
	int64_t kv = ember_gguf_find_kv(g, "t.strs");
	CHECK(kv >= 0 && ember_gguf_kv_array(g, kv, &et, &count) == 0 && et == EMBER_GGUF_STRING && count == 4, "strs");
	for (uint64_t j = 0; kv >= 0 && j < 4; j++) {
		uint64_t len;
		CHECK(ember_gguf_kv_array_str(g, kv, j, &s, &len) == 0 && len == strlen(strs[j]) && memcmp(s, strs[j], len) == 0,
		      "string %" PRIu64, j);
	}
	CHECK(kv >= 0 && ember_gguf_kv_array_str(g, kv, 4, &s, &u) < 0, "index past the array");
	kv = ember_gguf_find_kv(g, "t.empty");
	CHECK(kv >= 0 && ember_gguf_kv_array(g, kv, &et, &count) == 0 && count == 0, "empty array");
	kv = ember_gguf_find_kv(g, "t.ints");
	CHECK(kv >= 0 && ember_gguf_kv_array(g, kv, &et, &count) == 0 && et == EMBER_GGUF_I32 && count == 5 &&
	      memcmp(ember_gguf_kv_array_data(g, kv), ints, sizeof(ints)) == 0, "i32 array");
	kv = ember_gguf_find_kv(g, "t.floats");
	CHECK(kv >= 0 && memcmp(ember_gguf_kv_array_data(g, kv), floats, sizeof(floats)) == 0, "f32 array");
	CHECK(ember_gguf_tensor_count(g) == n_tensors, "tensor count");
	uint64_t end = 0;
	for (int t = 0; t < n_tensors; t++) {
		const struct ember_gguf_tensor *gt = ember_gguf_find_tensor(g, tensors[t].name);
		REQUIRE(gt, "tensor %s missing", tensors[t].name);
		CHECK(gt->type == tensors[t].type && gt->n_dims == tensors[t].n_dims, "%s type/dims", gt->name);
		for (int d = 0; d < 4; d++)
			CHECK(gt->ne[d] == (d < tensors[t].n_dims ? tensors[t].ne[d] : 1), "%s ne[%d]", gt->name, d);
		CHECK(gt->offset % alignment == 0, "%s offset aligned", gt->name);
		CHECK(memcmp(gt->data, data[t], gt->nbytes) == 0, "%s bytes differ", gt->name);
		end = gt->file_offset + gt->nbytes > end ? gt->file_offset + gt->nbytes : end;
		free(data[t]);
	}
	CHECK(ember_gguf_file_size(g) >= end && ember_gguf_file_size(g) - end < alignment, "file ends after the padding");
	ember_gguf_close(g);
}

static void test_roundtrip(void)
{
	char *dir = check_tmpdir("gguf");
	char path[4200];
	snprintf(path, sizeof(path), "%s/rt32.gguf", dir);
	write_and_check(path, 32);
	snprintf(path, sizeof(path), "%s/rt64.gguf", dir);
	write_and_check(path, 64);

	/* An unfinished writer deletes its partial file; finish refuses missing bytes. */
	struct ember_gguf_writer *w = NULL;
	int64_t ne[1] = {32};
	snprintf(path, sizeof(path), "%s/partial.gguf", dir);
	REQUIRE(ember_gguf_writer_create(&w) == 0, "create");
	CHECK(ember_gguf_writer_add_tensor(w, "t", 0, 1, ne) == 0, "add");
	CHECK(ember_gguf_writer_open(w, path) == 0, "open");
	CHECK(ember_gguf_writer_finish(w) < 0 && strstr(ember_error_last(), "0 of 128 bytes"), "finish without data");
	ember_gguf_writer_free(w);
	struct stat st;
	CHECK(stat(path, &st) != 0, "partial file left behind");
	check_rmdir(dir);
}

/* Seed corpus for the fuzzer: the hand-made file and a writer-made file with every KV type. */
static int write_seeds(const char *dir)
{
	char path[4200];
	struct bb b = valid_file();
	snprintf(path, sizeof(path), "%s/hand.gguf", dir);
	FILE *f = fopen(path, "wb");
	if (!f)
		return 1;
	fwrite(b.d, 1, b.n, f);
	fclose(f);
	free(b.d);
	snprintf(path, sizeof(path), "%s/writer.gguf", dir);
	write_and_check(path, 32);
	return check_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";
	if (strcmp(mode, "seeds") == 0)
		return argc > 2 ? write_seeds(argv[2]) : 2;
	if (strcmp(mode, "roundtrip") == 0 || strcmp(mode, "all") == 0)
		test_roundtrip();
	if (strcmp(mode, "corrupt") == 0 || strcmp(mode, "all") == 0) {
		test_valid_and_truncation();
		test_corpus();
		test_model_truncation();
		test_mutations();
	}
	return check_exit(argc > 1 ? argv[1] : "test_gguf");
}

/*
 * schedule.c - deterministic randomness for an evaluation (see schedule.h). Every decision is a
 * pure function of (seed, domain, key...): the key is folded into one 64-bit value through
 * splitmix64's finaliser and seeds a private xoshiro256** stream (guards/stats.h's ab_rng), so
 * any pair can be recomputed on its own (a resumed or extended run sees the same orders and
 * prompts) and no global state is touched.
 */
#define _GNU_SOURCE
#include "schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "error.h"
#include "sample.h"
#include "stats.h"   /* ab_rng: the project's one xoshiro256** */

/* Domain tags keep the streams of different decisions independent for the same seed. */
enum { DOMAIN_ORDER = 1, DOMAIN_PROMPT = 2, DOMAIN_WINDOWS = 3 };

#define JSON_CORPUS_MAX_BYTES (256u << 20)   /* a JSON corpus is read whole: cap it */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Folds `value` into the running key `h`. */
static uint64_t mix(uint64_t h, uint64_t value)
{
	uint64_t x = h ^ splitmix64(&value);
	return splitmix64(&x);
}

static uint64_t hash_string(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a */
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

int ab_schedule_first_side(uint64_t seed, int pair)
{
	int block_flip;

	if (pair < 0)
		return ab_error_setc(AB_EINVALID, "schedule: negative pair index %d", pair);
	/* Pairs 2k and 2k+1 form a block holding one AB and one BA; the seed picks which comes first. */
	block_flip = (int)(mix(mix(seed, DOMAIN_ORDER), (uint64_t)(pair / 2)) & 1);
	return (pair & 1) ^ block_flip ? AB_SIDE_HEAD : AB_SIDE_BASE;
}

int ab_schedule_prompt(uint32_t *out_ids, uint64_t seed, const char *model, int ctx, int pair, uint32_t vocab_size)
{
	struct ab_rng r;
	int i;

	if (ctx <= 0 || vocab_size == 0)
		return ab_error_setc(AB_EINVALID, "schedule: prompt needs ctx > 0 and vocab_size > 0 (got %d, %u)", ctx,
				     vocab_size);
	ab_rng_seed(&r, mix(mix(mix(mix(seed, DOMAIN_PROMPT), hash_string(model)), (uint64_t)(int64_t)ctx),
			 (uint64_t)(int64_t)pair));
	for (i = 0; i < ctx; i++)
		out_ids[i] = (uint32_t)ab_rng_below(&r, vocab_size);
	return 0;
}

/* --- accuracy windows ---------------------------------------------------------------------------- */

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void hex(char out[65], const unsigned char md[32])
{
	int i;
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* A corpus opened for window extraction: binary files are read by offset, JSON ones whole. */
struct corpus {
	int fd;
	uint32_t *tokens;      /* JSON corpus only */
	int64_t count;         /* tokens in the corpus */
	char sha256[65];       /* of the file's bytes */
};

static int corpus_open_json(struct corpus *c, const char *path)
{
	json_t *root = NULL, *item;
	json_error_t jerr;
	unsigned char md[32];
	struct stat st;
	char *text = NULL;
	size_t len = 0, cap, i;
	ssize_t got;
	int error = AB_EINVALID;

	if (fstat(c->fd, &st) < 0)
		return ab_error_errno("corpus %s: stat failed", path);
	if (st.st_size > (off_t)JSON_CORPUS_MAX_BYTES)
		return ab_error_setc(AB_EINVALID, "corpus %s: larger than %u bytes; use the binary format", path,
				     JSON_CORPUS_MAX_BYTES);
	/* Read to one byte past the size, so that a file still growing is refused, not cut. */
	cap = (size_t)st.st_size + 1;
	if (!(text = malloc(cap)))
		return ab_error_set("schedule: out of memory");
	while (len < cap && (got = read(c->fd, text + len, cap - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			error = ab_error_errno("corpus %s: read failed", path);
			goto cleanup;
		}
		len += (size_t)got;
	}
	if (len == cap) {
		ab_error_setc(AB_EINVALID, "corpus %s: changed while it was read", path);
		goto cleanup;
	}
	if (!(root = json_loadb(text, len, 0, &jerr))) {
		ab_error_setc(AB_EINVALID, "corpus %s: line %d: %s", path, jerr.line, jerr.text);
		goto cleanup;
	}
	if (!json_is_array(root)) {
		ab_error_setc(AB_EINVALID, "corpus %s: expected an array of token ids", path);
		goto cleanup;
	}
	if (json_array_size(root) && !(c->tokens = malloc(json_array_size(root) * sizeof(uint32_t)))) {
		error = ab_error_set("schedule: out of memory");
		goto cleanup;
	}
	json_array_foreach(root, i, item) {
		json_int_t id = json_integer_value(item);
		if (!json_is_integer(item) || id < 0 || id > (json_int_t)UINT32_MAX) {
			ab_error_setc(AB_EINVALID, "corpus %s: [%zu]: expected a token id (a non-negative integer)", path, i);
			goto cleanup;
		}
		c->tokens[i] = (uint32_t)id;
	}
	c->count = (int64_t)json_array_size(root);
	EVP_Digest(text, len, md, NULL, EVP_sha256(), NULL);
	hex(c->sha256, md);
	error = 0;

cleanup:
	json_decref(root);
	free(text);
	return error;
}

static int corpus_open_binary(struct corpus *c, const char *path)
{
	EVP_MD_CTX *ctx = NULL;
	unsigned char md[32], *buf = NULL;
	struct stat st;
	ssize_t got;
	int error = AB_ERROR;

	if (fstat(c->fd, &st) < 0)
		return ab_error_errno("corpus %s: stat failed", path);
	if (st.st_size % 4 != 0)
		return ab_error_setc(AB_EINVALID, "corpus %s: size %lld is not a multiple of 4 (little-endian uint32 ids)",
				     path, (long long)st.st_size);
	c->count = st.st_size / 4;
	/* The hash identifies the corpus in the result record; streamed, so any size is fine. */
	if (!(ctx = EVP_MD_CTX_new()) || !(buf = malloc(1 << 20)) || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		ab_error_set("schedule: out of memory");
		goto cleanup;
	}
	while ((got = read(c->fd, buf, 1 << 20)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ab_error_errno("corpus %s: read failed", path);
			goto cleanup;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)got);
	}
	EVP_DigestFinal_ex(ctx, md, NULL);
	hex(c->sha256, md);
	error = 0;

cleanup:
	free(buf);
	EVP_MD_CTX_free(ctx);
	return error;
}

static int corpus_read(uint32_t *out, const struct corpus *c, int64_t offset, int len, const char *path)
{
	unsigned char *bytes;
	size_t want = (size_t)len * 4, done = 0;
	ssize_t got;
	int i;

	if (c->tokens) {
		memcpy(out, c->tokens + offset, (size_t)len * sizeof(uint32_t));
		return 0;
	}
	bytes = (unsigned char *)out;   /* read in place, then decode little-endian in place */
	while (done < want) {
		got = pread(c->fd, bytes + done, want - done, (off_t)(offset * 4 + (int64_t)done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? ab_error_errno("corpus %s: read failed", path)
				       : ab_error_set("corpus %s: file shrank while reading", path);
		done += (size_t)got;
	}
	for (i = 0; i < len; i++) {
		const unsigned char *b = bytes + 4 * (size_t)i;
		out[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	}
	return 0;
}

static int compare_offsets(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Picks `count` non-overlapping windows: the corpus is cut into slots of window_len tokens behind a
 * random shift, and `count` distinct slots are drawn (Floyd's algorithm), then sorted. */
static int choose_offsets(int64_t *offsets, struct ab_rng *r, int64_t corpus_tokens, int count, int window_len,
			  const char *path)
{
	int64_t slots = corpus_tokens / window_len, shift, j;
	int chosen = 0, k;

	if (slots < count)
		return ab_error_setc(AB_EINVALID, "corpus %s: %lld tokens hold fewer than %d windows of %d tokens", path,
				     (long long)corpus_tokens, count, window_len);
	shift = (int64_t)ab_rng_below(r, (uint64_t)(corpus_tokens - slots * window_len + 1));
	for (j = slots - count; j < slots; j++) {
		int64_t t = (int64_t)ab_rng_below(r, (uint64_t)j + 1);
		for (k = 0; k < chosen && offsets[k] != t; k++)
			;
		offsets[chosen] = k < chosen ? j : t;   /* t already taken: j is new by construction */
		chosen++;
	}
	qsort(offsets, (size_t)count, sizeof(*offsets), compare_offsets);
	for (k = 0; k < count; k++)
		offsets[k] = shift + offsets[k] * window_len;
	return 0;
}

static int describe_windows(struct ab_schedule_windows *w, uint64_t seed, const char *model, const char *path,
			    const struct corpus *c, uint32_t vocab_size)
{
	char seed_text[24];
	json_t *d, *offsets;
	int i;

	snprintf(seed_text, sizeof(seed_text), "%" PRIu64, seed);
	d = json_pack("{s:s, s:s, s:s, s:i, s:i, s:I}", "source", path ? "corpus" : "random", "seed", seed_text,
		      "model", model ? model : "", "windows", w->count, "window_len", w->window_len,
		      "vocab_size", (json_int_t)vocab_size);
	if (d && path) {
		offsets = json_array();
		for (i = 0; offsets && i < w->count; i++)
			json_array_append_new(offsets, json_integer(w->offsets[i]));
		json_object_set_new(d, "corpus", json_string(path));
		json_object_set_new(d, "corpus_tokens", json_integer(c->count));
		json_object_set_new(d, "corpus_sha256", json_string(c->sha256));
		json_object_set_new(d, "offsets", offsets ? offsets : json_null());
	}
	if (!d)
		return ab_error_set("schedule: out of memory");
	w->description = d;
	return 0;
}

int ab_schedule_windows_make(struct ab_schedule_windows **out, uint64_t seed, const char *model, int count,
			     int window_len, const char *corpus_path, uint32_t vocab_size)
{
	struct ab_schedule_windows *w = NULL;
	struct corpus c = { -1, NULL, 0, "" };
	struct ab_rng r;
	int64_t i, n;
	int error = AB_ERROR;

	if (count <= 0 || window_len <= 0 || vocab_size == 0 || (int64_t)count * window_len > (1 << 28))
		return ab_error_setc(AB_EINVALID, "schedule: windows need count > 0, window_len > 0, vocab_size > 0 "
				     "and at most 2^28 tokens (got %d x %d, vocab %u)", count, window_len, vocab_size);
	n = (int64_t)count * window_len;
	if (!(w = calloc(1, sizeof(*w))) || !(w->tokens = malloc((size_t)n * sizeof(uint32_t)))) {
		ab_error_set("schedule: out of memory");
		goto cleanup;
	}
	w->count = count;
	w->window_len = window_len;
	ab_rng_seed(&r, mix(mix(seed, DOMAIN_WINDOWS), hash_string(model)));
	if (!corpus_path) {
		for (i = 0; i < n; i++)
			w->tokens[i] = (uint32_t)ab_rng_below(&r, vocab_size);
	} else {
		if ((c.fd = open(corpus_path, O_RDONLY | O_CLOEXEC)) < 0) {
			error = errno == ENOENT ? AB_ENOTFOUND : AB_ERROR;
			ab_error_errno("corpus %s: cannot open", corpus_path);
			goto cleanup;
		}
		error = has_suffix(corpus_path, ".json") ? corpus_open_json(&c, corpus_path)
							   : corpus_open_binary(&c, corpus_path);
		if (error < 0)
			goto cleanup;
		error = AB_ERROR;
		if (!(w->offsets = malloc((size_t)count * sizeof(int64_t)))) {
			ab_error_set("schedule: out of memory");
			goto cleanup;
		}
		if ((error = choose_offsets(w->offsets, &r, c.count, count, window_len, corpus_path)) < 0)
			goto cleanup;
		error = AB_ERROR;
		for (i = 0; i < count; i++)
			if (corpus_read(w->tokens + i * window_len, &c, w->offsets[i], window_len, corpus_path) < 0)
				goto cleanup;
		for (i = 0; i < n; i++)
			if (w->tokens[i] >= vocab_size) {
				error = ab_error_setc(AB_EINVALID, "corpus %s: token %u at offset %lld is outside the "
						      "model's vocabulary (%u ids)", corpus_path, w->tokens[i],
						      (long long)(w->offsets[i / window_len] + i % window_len), vocab_size);
				goto cleanup;
			}
	}
	if (describe_windows(w, seed, model, corpus_path, &c, vocab_size) < 0)
		goto cleanup;
	*out = w;
	w = NULL;
	error = 0;

cleanup:
	if (c.fd >= 0)
		close(c.fd);
	free(c.tokens);
	ab_schedule_windows_free(w);
	return error;
}

void ab_schedule_windows_free(struct ab_schedule_windows *windows)
{
	if (!windows)
		return;
	free(windows->tokens);
	free(windows->offsets);
	json_decref(windows->description);
	free(windows);
}

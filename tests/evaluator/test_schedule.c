/*
 * test_schedule.c - the seeded scheduler: AB/BA balance at every even pair count for many seeds,
 * determinism, prompts identical for both sides of a pair and different across pairs, contexts and
 * models, ids in range and roughly uniform, and accuracy windows from binary and JSON corpora
 * (contiguous, non-overlapping, reproducible) with their error cases.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <unistd.h>

#include "sample.h"
#include "schedule.h"

static void test_schedule_balance(void)
{
	uint64_t seed;
	int pair, first_pair_base = 0, seeds_with_mixed_blocks = 0;

	for (seed = 0; seed < 200; seed++) {
		int ab = 0, block_starts_ab = 0;
		for (pair = 0; pair < 64; pair++) {
			int side = ab_schedule_first_side(seed * 7919 + 1, pair);
			CHECK(side == AB_SIDE_BASE || side == AB_SIDE_HEAD);
			CHECK(side == ab_schedule_first_side(seed * 7919 + 1, pair));   /* deterministic */
			ab += side == AB_SIDE_BASE;
			if (pair % 2 == 1)
				CHECK(ab == (pair + 1) / 2);   /* balanced at every even count */
			else
				block_starts_ab += side == AB_SIDE_BASE;
		}
		first_pair_base += ab_schedule_first_side(seed * 7919 + 1, 0) == AB_SIDE_BASE;
		seeds_with_mixed_blocks += block_starts_ab > 0 && block_starts_ab < 32;
	}
	/* random, not a fixed pattern: both orders start blocks, and the first pair varies with the seed */
	CHECK(first_pair_base > 60 && first_pair_base < 140);
	CHECK(seeds_with_mixed_blocks == 200);
	CHECK(ab_schedule_first_side(1, -1) == AB_EINVALID);
}

static int same_ids(const uint32_t *a, const uint32_t *b, int n)
{
	return memcmp(a, b, (size_t)n * sizeof(*a)) == 0;
}

static void test_schedule_prompts(void)
{
	uint32_t a[512], b[512], c[512], counts[10] = { 0 };
	int i;

	CHECK(ab_schedule_prompt(a, 42, "tiny", 512, 3, 151936) == 0);
	CHECK(ab_schedule_prompt(b, 42, "tiny", 512, 3, 151936) == 0);   /* the other side of pair 3 */
	CHECK(same_ids(a, b, 512));
	CHECK(ab_schedule_prompt(c, 42, "tiny", 512, 4, 151936) == 0);   /* next pair */
	CHECK(!same_ids(a, c, 512));
	CHECK(ab_schedule_prompt(c, 42, "tiny", 256, 3, 151936) == 0);   /* other context: not a prefix */
	CHECK(!same_ids(a, c, 256));
	CHECK(ab_schedule_prompt(c, 42, "small", 512, 3, 151936) == 0);  /* other model */
	CHECK(!same_ids(a, c, 512));
	CHECK(ab_schedule_prompt(c, 43, "tiny", 512, 3, 151936) == 0);   /* other seed */
	CHECK(!same_ids(a, c, 512));
	CHECK(ab_schedule_prompt(c, 42, "tiny", 512, -1, 151936) == 0);  /* warm-up key */
	CHECK(!same_ids(a, c, 512));
	for (i = 0; i < 512; i++)
		CHECK(a[i] < 151936);

	/* small vocabulary: in range and about uniform (deterministic seed, so no flakiness) */
	for (i = 0; i < 200; i++) {
		int k;
		CHECK(ab_schedule_prompt(a, 7, "u", 500, i, 10) == 0);
		for (k = 0; k < 500; k++) {
			CHECK(a[k] < 10);
			counts[a[k] < 10 ? a[k] : 0]++;
		}
	}
	for (i = 0; i < 10; i++) {
		CHECK(counts[i] > 9500 && counts[i] < 10500);   /* expected 10000, sd ~95 */
	}
	CHECK(ab_schedule_prompt(a, 1, "one", 16, 0, 1) == 0 && a[0] == 0 && a[15] == 0);
	CHECK(ab_schedule_prompt(a, 1, "tiny", 0, 0, 100) == AB_EINVALID);
	CHECK(ab_schedule_prompt(a, 1, "tiny", 16, 0, 0) == AB_EINVALID);
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(data, 1, len, f) == len;
	if (f)
		fclose(f);
	return ok;
}

static void test_schedule_windows(void)
{
	const char *dir = tu_tmpdir();
	char bin[512], json[512], odd[512], text[8192];
	unsigned char bytes[4000];
	struct ab_schedule_windows *w = NULL, *w2 = NULL;
	int i, k, n = 0, differs = 0;
	size_t used;

	/* random windows */
	CHECK(ab_schedule_windows_make(&w, 9, "tiny", 3, 40, NULL, 100) == 0);
	CHECK(ab_schedule_windows_make(&w2, 9, "tiny", 3, 40, NULL, 100) == 0);
	if (w && w2) {
		CHECK(w->count == 3 && w->window_len == 40 && w->offsets == NULL);
		CHECK(same_ids(w->tokens, w2->tokens, 120));
		for (i = 0; i < 120; i++)
			CHECK(w->tokens[i] < 100);
		CHECK(strcmp(json_string_value(json_object_get(w->description, "source")), "random") == 0);
		CHECK(strcmp(json_string_value(json_object_get(w->description, "seed")), "9") == 0);
	}
	ab_schedule_windows_free(w);
	ab_schedule_windows_free(w2);
	w = w2 = NULL;

	/* binary corpus: token i = i, so a window read correctly is a run of consecutive ids */
	for (i = 0; i < 1000; i++) {
		bytes[4 * i] = (unsigned char)(i & 0xff);
		bytes[4 * i + 1] = (unsigned char)(i >> 8);
		bytes[4 * i + 2] = bytes[4 * i + 3] = 0;
	}
	snprintf(bin, sizeof(bin), "%s/corpus.bin", dir);
	CHECK(write_file(bin, bytes, sizeof(bytes)));
	CHECK(ab_schedule_windows_make(&w, 5, "tiny", 4, 50, bin, 1000) == 0);
	CHECK(ab_schedule_windows_make(&w2, 5, "tiny", 4, 50, bin, 1000) == 0);
	if (w && w2) {
		json_t *offsets = json_object_get(w->description, "offsets");
		for (i = 0; i < 4; i++) {
			CHECK(w->offsets[i] >= 0 && w->offsets[i] + 50 <= 1000);
			CHECK(i == 0 || w->offsets[i] >= w->offsets[i - 1] + 50);   /* ascending, no overlap */
			CHECK(w->offsets[i] == w2->offsets[i]);                      /* reproducible */
			CHECK(json_integer_value(json_array_get(offsets, (size_t)i)) == w->offsets[i]);
			for (k = 0; k < 50; k++)
				CHECK(w->tokens[i * 50 + k] == (uint32_t)(w->offsets[i] + k));
		}
		CHECK(strcmp(json_string_value(json_object_get(w->description, "source")), "corpus") == 0);
		CHECK(json_integer_value(json_object_get(w->description, "corpus_tokens")) == 1000);
		CHECK(strlen(json_string_value(json_object_get(w->description, "corpus_sha256"))) == 64);
	}
	ab_schedule_windows_free(w2);
	w2 = NULL;
	for (i = 6; i < 16; i++) {   /* other seeds pick other windows */
		CHECK(ab_schedule_windows_make(&w2, (uint64_t)i, "tiny", 4, 50, bin, 1000) == 0);
		if (w && w2)
			differs += memcmp(w->offsets, w2->offsets, 4 * sizeof(int64_t)) != 0;
		ab_schedule_windows_free(w2);
		w2 = NULL;
	}
	CHECK(differs >= 9);
	ab_schedule_windows_free(w);
	w = NULL;

	/* JSON corpus that holds exactly three windows: they must tile it */
	used = (size_t)snprintf(text, sizeof(text), "[");
	for (i = 0; i < 300; i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%d", i ? "," : "", 1000 + i);
	used += (size_t)snprintf(text + used, sizeof(text) - used, "]\n");
	snprintf(json, sizeof(json), "%s/corpus.json", dir);
	CHECK(write_file(json, text, used));
	CHECK(ab_schedule_windows_make(&w, 77, "tiny", 3, 100, json, 2000) == 0);
	if (w) {
		CHECK(w->offsets[0] == 0 && w->offsets[1] == 100 && w->offsets[2] == 200);
		CHECK(w->tokens[0] == 1000 && w->tokens[299] == 1299);
	}
	ab_schedule_windows_free(w);
	w = NULL;

	/* errors */
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 4, 100, json, 2000) == AB_EINVALID && !w);   /* too small */
	CHECK(strstr(ab_error_last(), "fewer than 4 windows") != NULL);
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 3, 100, json, 1200) == AB_EINVALID && !w);   /* id >= vocab */
	CHECK(strstr(ab_error_last(), "outside the model's vocabulary") != NULL);
	snprintf(odd, sizeof(odd), "%s/odd.bin", dir);
	CHECK(write_file(odd, bytes, 10));
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 1, 2, odd, 2000) == AB_EINVALID && !w);
	CHECK(strstr(ab_error_last(), "multiple of 4") != NULL);
	snprintf(odd, sizeof(odd), "%s/bad.json", dir);
	CHECK(write_file(odd, "[1, -2, 3]", 10));
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 1, 2, odd, 2000) == AB_EINVALID && !w);
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 1, 2, "/nonexistent/corpus.bin", 2000) == AB_ENOTFOUND && !w);
	const char *huge = tu_path("huge.json");           /* sparse: refused by its size, never read */
	CHECK(write_file(huge, "", 0) && truncate(huge, ((off_t)256 << 20) + 1) == 0);
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 1, 2, huge, 2000) == AB_EINVALID && !w);
	CHECK(strstr(ab_error_last(), "use the binary format") != NULL);
	CHECK(ab_schedule_windows_make(&w, 1, "tiny", 0, 2, NULL, 2000) == AB_EINVALID && !w);
	n = unlink(bin) | unlink(json) | unlink(odd);
	snprintf(odd, sizeof(odd), "%s/odd.bin", dir);
	n |= unlink(odd);
	CHECK(n == 0);
}

int main(int argc, char **argv)
{
	static const struct tu_case cases[] = {
		{ "balance", test_schedule_balance }, { "prompts", test_schedule_prompts },
		{ "windows", test_schedule_windows },
	};
	return TU_RUN(argc, argv, cases);
}

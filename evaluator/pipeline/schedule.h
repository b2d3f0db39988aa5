/*
 * schedule.h - the evaluation's seeded decisions: which side runs first in each pair (balanced
 * random AB/BA order), the prompt token ids of each request, and the held-out accuracy windows.
 * Each is a pure function of the evaluation seed and its own key, never of call order or rand(),
 * so a resumed or extended evaluation reproduces exactly what it measured before.
 */
#ifndef AB_SCHEDULE_H
#define AB_SCHEDULE_H

#include <stdint.h>
#include <jansson.h>

/*
 * Which side runs first in pair `pair` (0-based, counted across batches): AB_SIDE_BASE or
 * AB_SIDE_HEAD (sample.h); AB_EINVALID for a negative pair. Pairs 2k and 2k+1 form a block with one
 * AB and one BA pair, the seed choosing which comes first, so the first n pairs hold exactly n/2 AB
 * pairs for every even n: the adaptive loop and the confirmation batch may stop at any even count.
 */
int ab_schedule_first_side(uint64_t seed, int pair);

/*
 * Fills out_ids[0..ctx) with prompt token ids drawn uniformly from [0, vocab_size), keyed by
 * (seed, model, ctx, pair): base and head get the same prompt in a pair, and prompts differ across
 * pairs, contexts and models. Any pair value works (e.g. -1 for a warm-up request). out_ids holds
 * ctx ids (caller-allocated). AB_EINVALID when ctx <= 0 or vocab_size == 0.
 */
int ab_schedule_prompt(uint32_t *out_ids, uint64_t seed, const char *model, int ctx, int pair, uint32_t vocab_size);

/* Held-out prompt windows for the accuracy gates. */
struct ab_schedule_windows {
	int count;              /* number of windows */
	int window_len;         /* tokens per window */
	uint32_t *tokens;       /* count * window_len ids; window w starts at tokens + w * window_len */
	int64_t *offsets;       /* count token offsets into the corpus, ascending; NULL for random ids */
	json_t *description;    /* how to reproduce them, for the result record (below); owned here */
};

/*
 * Chooses `count` windows of `window_len` tokens for `model`, keyed by (seed, model).
 *
 * With corpus_path (placeholders already substituted): a token corpus, either a JSON array of ids
 * (a path ending in ".json", at most 256 MiB) or raw little-endian uint32 ids (any other name, read
 * by offset). The windows are non-overlapping, at seeded offsets; a corpus with fewer than
 * count * window_len tokens, or an id >= vocab_size, is AB_EINVALID; a missing file AB_ENOTFOUND.
 * Without a corpus: ids drawn uniformly from [0, vocab_size).
 *
 * description: {"source": "corpus"|"random", "seed": "<decimal uint64>", "model", "windows",
 * "window_len", "vocab_size", and for a corpus "corpus" (path), "corpus_tokens", "corpus_sha256",
 * "offsets": [...]}. Borrow it with json_incref to keep it past ab_schedule_windows_free.
 *
 * *out is the caller's: ab_schedule_windows_free.
 */
int ab_schedule_windows_make(struct ab_schedule_windows **out, uint64_t seed, const char *model, int count,
			     int window_len, const char *corpus_path, uint32_t vocab_size);

/* Frees windows and their description reference. NULL is fine. */
void ab_schedule_windows_free(struct ab_schedule_windows *windows);

#endif

/*
 * clock.h - the engine-clock cross-check of Contract 1: the harness owns the clock, the SUT's own
 * stats (prefill_ms, decode_ms) are recorded beside it and compared. Per series and side, the
 * median of harness_ms / engine_ms says how much faster the engine claims to be than the harness
 * saw (1.05: 5% of the harness time is protocol and pipe overhead). A ratio at or above the
 * threshold is `engine-clock-disagrees`: reported as an advisory gate and a note, never gated (the
 * harness figure is what the speed guard decides on). No I/O.
 */
#ifndef AB_CLOCK_H
#define AB_CLOCK_H

#include <stddef.h>

#include "sample.h"
#include "verdict.h"

#define AB_CLOCK_WARNING "engine-clock-disagrees"

struct ab_clock_series {
	char model[64];
	char metric[32];
	int ctx;
	double ratio[2];       /* [side]: median harness_ms / engine_ms; NAN without both figures */
	int n[2];              /* samples with both figures */
	int flagged;           /* a side's ratio >= threshold */
};

struct ab_clock_check {
	struct ab_clock_series *series;  /* decode_tps, prefill_tps and spec_decode_tps series */
	size_t n_series;
	double threshold;
	int flagged;           /* some series flagged */
	double worst;          /* the largest ratio seen (NAN: none) */
	char worst_where[160]; /* "head qwen3 prefill at ctx 512: engine claims 3.02x the harness's rate" */
};

/*
 * Computes the check over `samples` (borrowed; only ok samples of metrics whose value is a rate of
 * one harness interval: decode_tps, prefill_tps, spec_decode_tps). *out is allocated; free with
 * ab_clock_check_free. AB_EINVALID for threshold <= 1, AB_ERROR when out of memory.
 */
int ab_clock_check(struct ab_clock_check **out, const struct ab_sample *samples, size_t n, double threshold);
void ab_clock_check_free(struct ab_clock_check *check);

/*
 * The advisory gate "engine_clock" of one model: value = its largest ratio, threshold, op "<";
 * passes when no series of the model is flagged. Returns 0 when the model has no series with engine
 * figures (nothing written), 1 when *out was filled.
 */
int ab_clock_gate(struct ab_gate_result *out, const struct ab_clock_check *check, const char *model);

#endif

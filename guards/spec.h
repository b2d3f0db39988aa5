/*
 * spec.h - the exactness gate of speculative decoding. Greedy speculative decoding is lossless: the
 * tokens of a speculative answer must equal the plain greedy answer of the same process to the same
 * prompt, on every repetition. The measurement loop counts both sides' (plain, speculative) answer
 * pairs; this turns the counts into the `spec_exact` gate (label `spec-mismatch`). Speed, tau and
 * their floors are series of speed.h (the spec family); the eval-dflash label is verdict.h's.
 */
#ifndef AB_SPEC_H
#define AB_SPEC_H

#include "verdict.h"

#define AB_SPEC_EXACT_GATE "spec_exact"
#define AB_SPEC_MISMATCH_LABEL "spec-mismatch"

/* Exactness of one (model, side): every speculative answer against its plain twin. */
struct ab_spec_exact {
	int compared;              /* (plain, speculative) answer pairs of this side */
	int identical;             /* of those, the ones whose tokens were equal */
	int first_diff;            /* earliest generated-token index where any differed; -1 when none */
	int diff_ctx, diff_pair;   /* the request where that earliest divergence was seen */
	int stats_faults;          /* speculative answers whose stats were missing, malformed or disagreed
	                            * with the harness's tau by more than 1% (their samples failed) */
	char stats_example[160];   /* the first such fault */
};

/*
 * The spec_exact gate of `model`:
 *   - head diverged (identical < compared), base did not: failed, label spec-mismatch (a REJECT);
 *     value = diverging head answers, threshold 0, op "==";
 *   - base diverged: error (infra): the base build's own speculative decoding is not exact, so the
 *     gate cannot tell what the PR did; the detail names both sides' counts;
 *   - neither side compared anything: error (nothing was measured);
 *   - else passed. The detail names counts and the first divergent position (token, ctx, pair).
 */
void ab_spec_exact_gate(struct ab_gate_result *out, const char *model, const struct ab_spec_exact *base,
	const struct ab_spec_exact *head);

#endif

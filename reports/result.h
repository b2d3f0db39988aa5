/*
 * result.h - the abgate.result/1 document (DESIGN.md Contract 3), built with jansson from the
 * evaluator's inputs and the guards' decisions, and loaded back (validated, size-capped) so that a
 * stored evaluation re-renders exactly: markdown.h and terminal.h render FROM this document only.
 *
 * Top-level keys (non-finite numbers are written as null; the seed is a decimal string because
 * 64-bit values do not survive JSON readers that use doubles):
 *   schema "abgate.result/1", created_at, trigger,
 *   base / head {ref, sha, tree}, changed_files [..], suite {name, sha256, path},
 *   seed "<u64>", environment {..opaque..},
 *   verdict {label, kind, reason, labels[], tier, notes[]},
 *   method "<one sentence>", statistics {alpha, regression_ratio, claim_tail, tiers {XS..XL}},
 *   pairs {count, min, max, looks, look, confirmation, confirmation_target},
 *   metrics[] {name, model, ctx, gating, margin, base {median, n, failed}, head {..}, pairs,
 *              n_pairs, ratio, ci [lo, hi], ci_level, ci_adj [lo, hi], p, p_adj, outcome,
 *              tier, regression, confirmed, label, confirmation {n_pairs, ratio, hi, confirmed}?},
 *   gates[] {name, model, value, threshold, op, pass, error, advisory, detail,
 *            label (what a failure applies; null for an advisory gate)},
 *   samples[] {side, pair, order, batch, model, ctx, metric, value, ok, reason, t_start_ns, t_end_ns,
 *              reps, rep_values [..], harness_ms, engine_ms, deferred_ms, stats {..}|null},
 *              (/2: value is the median of `reps` timed requests; /1 documents hold one request each)
 *   engine_clock {threshold, flagged, worst, series[] {model, metric, ctx, base_ratio, head_ratio,
 *                 flagged}}  (guards/clock.h; absent when no SUT reported stats),
 *   calibration {..}  the suite's latest abgate.calibration/1 document at evaluation time, without
 *                 its per-run list (evaluator/pipeline/calibrate.h; absent when the suite was never calibrated),
 *   failures {infra, reason, base {total, failed, crash, timeout, oom, protocol, other, example},
 *             head {..}},
 *   timing {build_s, models_s, measure_s, accuracy_s, total_s},
 *   build {base {status, seconds, detail, reused, key?, log_tail}, head {..}}  (status: ok|failed|infra|not-run)
 */
#ifndef AB_RESULT_H
#define AB_RESULT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "clock.h"
#include "sample.h"
#include "speed.h"
#include "verdict.h"

#define AB_RESULT_SCHEMA "abgate.result/2"
#define AB_RESULT_SCHEMA_V1 "abgate.result/1"  /* still loaded: sample values were single requests */
#define AB_RESULT_MAX_BYTES (64u * 1024 * 1024)   /* larger stored documents are refused */
#define AB_RESULT_LOG_TAIL_MAX 8192               /* build log tails are cut to their last bytes */

struct ab_result_side {
	const char *ref;        /* as the user named it ("main", "pull/7/head") */
	const char *sha;        /* commit id, hex */
	const char *tree;       /* tree id, hex */
};

struct ab_result_build {
	enum ab_build_status status;
	double seconds;         /* NAN when unknown */
	const char *detail;     /* "exit status 2", "reused build of tree 1a2b..", may be NULL */
	const char *log_tail;   /* last lines of the build log, may be NULL (cut to LOG_TAIL_MAX) */
	int reused;             /* 1: an identical tree's build was reused, nothing ran */
	const char *key;        /* the build cache key (tree id + build-section hash), may be NULL */
};

struct ab_result_timing {
	double build_s, models_s, measure_s, accuracy_s, total_s;   /* NAN when unknown */
};

struct ab_result_input {
	struct ab_result_side base, head;
	const char *const *changed_files;
	size_t n_changed_files;
	const char *suite_name;
	const char *suite_sha256;
	const char *suite_path;             /* NULL when the suite came from the base commit */
	uint64_t seed;
	const json_t *environment;          /* borrowed and deep-copied; NULL: {} */
	const struct ab_verdict *verdict;   /* required */
	const struct ab_speed_result *speed; /* NULL when speed was not measured */
	const struct ab_gate_result *gates;
	size_t n_gates;
	const struct ab_sample *samples;
	size_t n_samples;
	const struct ab_clock_check *clock; /* NULL: no engine_clock section */
	struct ab_result_build build_base, build_head;
	struct ab_result_timing timing;
	const char *trigger;                /* "cli", "webhook pr#7", may be NULL */
	const char *created_at;             /* ISO-8601 UTC, may be NULL (omitted) */
};

/* Builds the document. *out is a new reference (json_decref). AB_EINVALID without a verdict. */
int ab_result_build(json_t **out, const struct ab_result_input *in);

/*
 * Parses and validates a stored document (at most AB_RESULT_MAX_BYTES, duplicate keys refused):
 * schema must be abgate.result/1, verdict {label, reason, labels} must be there with the right
 * types, and metrics/gates/samples, where present, must be arrays of objects whose known keys have
 * the documented types. *out is a new reference. AB_EINVALID with the JSON path in the message.
 */
int ab_result_load(json_t **out, const char *text, size_t len);

/* The validation ab_result_load applies, on a document already in memory. */
int ab_result_validate(const json_t *doc);

/* "ok", "failed", "infra", "not-run". Static string. */
const char *ab_result_build_status_name(enum ab_build_status status);

#endif

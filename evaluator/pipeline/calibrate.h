/*
 * calibrate.h - `abgate calibrate`: N A/A evaluations of one ref against itself (fresh seeds, the
 * full pipeline of eval.h, each stored as usual), then guards/calib.h on their stored samples: the
 * family-wise false-positive rate with its Clopper-Pearson bound, per-series noise and minimal
 * detectable effect. The abgate.calibration/1 document goes to the store, where later evaluations of
 * the same suite find it and cite it in their method line.
 *
 * abgate.calibration/1: {schema, id, created_at, repo, ref, sha, suite {name, sha256}, runs,
 *   infra_runs, power, resamples, noise_level, fpr {false_positives, runs, rate, upper, level},
 *   evaluations[] {id, seed, label, claimed, pairs, measure_s},
 *   series[] {model, metric, ctx, gating, n_pairs, noise_sd, noise_robust_sd, noise_scale, mde,
 *   mde_resolve}}
 * (mde: the slowdown REJECTed with `power`, a fraction, on pairs widened by noise_scale to the
 * noise's noise_level upper bound; null when not reached or not gating).
 */
#ifndef AB_CALIBRATE_H
#define AB_CALIBRATE_H

#include <stdint.h>
#include <jansson.h>

struct ab_sandbox_config; /* sandbox.h */

#define AB_CALIBRATION_SCHEMA "abgate.calibration/1"

struct ab_calibrate_options {
	const char *repo;          /* local path or URL (required) */
	const char *ref;           /* the ref evaluated against itself (required) */
	const char *suite_path;    /* NULL: guards/default.json of ref */
	const char *state_dir;     /* NULL: ./.abgate */
	int runs;                  /* A/A evaluations (>= 2) */
	uint64_t seed;             /* run i uses seed + i; has_seed 0: a fresh one */
	int has_seed;
	int pairs_min, pairs_max;  /* 0: the suite's */
	int jobs;
	int quiet;
	double power;              /* 0: 0.90 */
	int resamples;             /* 0: 200 */
	double noise_level;        /* confidence of the noise bound the MDE is computed at; 0: 0.90,
	                            * < 0: the A/A pairs as measured (guards/calib.h) */
	const struct ab_sandbox_config *sandbox; /* borrowed; NULL: the defaults (on), as ab_eval_options */
};

/*
 * Runs the calibration. *out_doc (caller json_decref) is the stored document. Returns 0; a negative
 * error (message set) when the suite cannot be read, the evaluations produced no samples, or the
 * store fails. Evaluations ending in infra-error are counted (infra_runs) and left out.
 */
int ab_calibrate_run(json_t **out_doc, const struct ab_calibrate_options *options);

#endif

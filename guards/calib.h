/*
 * calib.h - what a calibration publishes, computed from N real A/A evaluations of one ref against
 * itself: the family-wise false-positive rate with its Clopper-Pearson bound, each series' noise
 * (the spread of its paired log-ratios) and its minimal detectable effect: the smallest slowdown the
 * whole decision procedure (looks, equivalence stop, confirmation batch: speed.h) REJECTs with the
 * wanted power, found by re-running that procedure on pairs resampled from the real A/A pairs with a
 * multiplicative shift applied to one side of one series. The A/A pairs are a sample of the box's
 * noise: where options.noise_level > 0, each series' log-ratios are widened about their mean to the
 * noise's upper confidence bound at that level (chi-square on n_pairs - 1 degrees of freedom) before
 * resampling, so a calibration whose pairs happened to be quiet does not publish an optimistic MDE.
 * No I/O; the evaluator runs the evaluations and stores what this returns.
 */
#ifndef AB_CALIB_H
#define AB_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"
#include "speed.h"

/* One A/A evaluation's samples (borrowed). */
struct ab_calib_run {
	const struct ab_sample *samples;
	size_t n;
};

struct ab_calib_series {
	char model[64];
	char metric[32];
	int ctx;
	int gating;
	int n_pairs;            /* valid pairs pooled over the runs (both batches) */
	double sd;              /* standard deviation of the paired log-ratios (0.01: 1%) */
	double robust_sd;       /* 1.4826 x their median absolute deviation */
	double mde;             /* smallest slowdown (0.03: head 3% slower) REJECTed with >= power, the
	                         * series confirmed; NAN when even max_shift is not (or not gating) */
	double mde_resolve;     /* smallest slowdown whose displayed interval marks the series
	                         * regressed (below 1 - margin) with >= power; NAN when not reached */
	double noise_scale;     /* factor its log-ratios were widened by for the MDE search (1: none) */
};

struct ab_calib_options {
	const struct ab_speed_policy *policy;  /* the suite's decision procedure */
	double power;           /* 0.90 */
	int resamples;          /* synthetic evaluations per shift tried (200) */
	double max_shift;       /* largest slowdown searched (0.5) */
	double noise_level;     /* confidence of the noise bound the MDE is computed at (0.90); 0: the
	                         * pairs as measured (a point estimate, low about half the time) */
	uint64_t seed;
};

struct ab_calib_result {
	int runs;
	int false_positives;    /* runs whose verdict carried any speed claim */
	double fpr;             /* false_positives / runs */
	double fpr_upper;       /* one-sided 95% Clopper-Pearson upper bound */
	struct ab_calib_series *series;
	size_t n_series;
	int units;              /* pairs available for resampling */
};

/*
 * Computes a calibration. claimed[i] says whether run i's verdict made any claim (a tier, a
 * regression label or a REJECT): an A/A claim is a false positive. *out is allocated; free with
 * ab_calib_result_free. AB_EINVALID without runs or with a bad option.
 */
int ab_calib_compute(struct ab_calib_result **out, const struct ab_calib_run *runs, const int *claimed,
	size_t n_runs, const struct ab_calib_options *options);
void ab_calib_result_free(struct ab_calib_result *result);

/* One-sided upper confidence bound of a binomial proportion at `level` (0.95): the p with
 * P(X <= k | n, p) = 1 - level (1 when k == n). */
double ab_calib_clopper_pearson_upper(int k, int n, double level);

/*
 * The power of the decision procedure against a slowdown `shift` of one series (index `target` of
 * result->series), from `resamples` synthetic evaluations of resampled pairs (widened as
 * options->noise_level says, like ab_calib_compute's MDE search). Exposed for tests.
 */
int ab_calib_power(double *out_power, double *out_resolve, const struct ab_calib_run *runs, size_t n_runs,
	const struct ab_calib_result *result, size_t target, double shift, const struct ab_calib_options *options);

#endif

/*
 * stats.h - the statistics abgate's verdicts rest on, as pure functions: medians and quantiles,
 * the Hodges-Lehmann estimate and Wilcoxon signed-rank interval and p-values (exact by dynamic
 * programming for small n, normal approximation above, ties handled), a seeded bootstrap
 * (percentile or BCa), Holm's step-down adjustment and the Wilson interval for proportions.
 * Randomness comes only from ab_rng (xoshiro256** seeded through splitmix64), never rand().
 */
#ifndef AB_STATS_H
#define AB_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Up to this many non-zero differences the signed-rank distribution is computed exactly. */
#define AB_STATS_EXACT_MAX 60
/* Inputs longer than this are refused (the Walsh averages grow as n^2 / 2). */
#define AB_STATS_N_MAX 4000

/* ---- random numbers ---------------------------------------------------------------------- */

/* xoshiro256** state. Seed with ab_rng_seed; the same seed gives the same stream everywhere. */
struct ab_rng {
	uint64_t s[4];
};

/* Seeds the generator from one 64-bit value (expanded by splitmix64; any value, 0 included). */
void ab_rng_seed(struct ab_rng *rng, uint64_t seed);
/* Next 64 random bits. */
uint64_t ab_rng_next(struct ab_rng *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double ab_rng_uniform(struct ab_rng *rng);
/* Uniform integer in [0, bound) without modulo bias; bound 0 returns 0. */
uint64_t ab_rng_below(struct ab_rng *rng, uint64_t bound);
/* Standard normal deviate (Box-Muller, both values of a pair are not cached: stateless). */
double ab_rng_normal(struct ab_rng *rng);
/* splitmix64 mixing of a value: used to derive independent seeds (seed ^ hash of a name). */
uint64_t ab_rng_mix(uint64_t x);

/* ---- distributions ----------------------------------------------------------------------- */

/* Standard normal CDF and its inverse (Acklam's rational approximation refined by one Halley
 * step; |error| < 1e-12). ab_stats_norm_quantile(p) for p outside (0, 1) returns -/+INFINITY. */
double ab_stats_norm_cdf(double z);
double ab_stats_norm_quantile(double p);

/* Quantile p of the chi-square distribution with k > 0 degrees of freedom, by the Wilson-Hilferty
 * cube-root normal approximation (relative error < 0.5% for k >= 10, < 0.1% for k >= 30). NAN for
 * k <= 0 or p outside (0, 1). */
double ab_stats_chi2_quantile(double p, double k);

/* ---- location ---------------------------------------------------------------------------- */

/* Quantile of already sorted data, linear interpolation between order statistics (R type 7).
 * q in [0, 1]. n must be > 0 (returns NAN otherwise). */
double ab_stats_quantile_sorted(const double *sorted, size_t n, double q);

/* Quantile / median of unsorted data (copied, the input is untouched). AB_EINVALID when n == 0,
 * q outside [0, 1] or a value is NAN. */
int ab_stats_quantile(double *out, const double *x, size_t n, double q);
int ab_stats_median(double *out, const double *x, size_t n);

/* Sorted Walsh averages (x_i + x_j) / 2 for i <= j: n (n + 1) / 2 values. *out is allocated, the
 * caller frees it with free(). AB_EINVALID when n == 0, n > AB_STATS_N_MAX or a value is not finite. */
int ab_stats_walsh(double **out, size_t *out_n, const double *x, size_t n);

/* Hodges-Lehmann one-sample estimate: the median of the Walsh averages. */
int ab_stats_hodges_lehmann(double *out, const double *x, size_t n);

/* ---- Wilcoxon signed-rank ---------------------------------------------------------------- */

/* P(T+ <= t) for the signed-rank statistic of n untied, non-zero observations under H0 (symmetric
 * about zero). Exact for n <= AB_STATS_EXACT_MAX, normal approximation with continuity correction
 * above. Returns 0 for t < 0 and 1 for t >= n (n + 1) / 2. */
double ab_stats_signed_rank_cdf(int n, long t);

/*
 * The order statistic that bounds a signed-rank confidence interval: the largest k >= 1 such that
 * P(T+ <= k - 1) <= tail, so that [W_(k), W_(N + 1 - k)] (Walsh averages, 1-based, N = n (n + 1) / 2)
 * misses the location with probability <= tail on each side. Returns 0 when no such k exists (n too
 * small for this tail: the bound is infinite). `*out_tail` (may be NULL) receives the achieved
 * one-sided miss probability P(T+ <= k - 1).
 */
size_t ab_stats_signed_rank_k(int n, double tail, double *out_tail);

/* The smallest n whose exact signed-rank test can reach one-sided significance `tail` at all, i.e.
 * 2^-n <= tail (asv's feasibility check). tail must be in (0, 1); returns 1 for tail >= 0.5. */
int ab_stats_signed_rank_min_n(double tail);

/* An interval (or a pair of one-sided bounds) with the confidence it actually achieves. */
struct ab_interval {
	double lo;      /* -INFINITY when the data cannot bound it */
	double hi;      /* +INFINITY likewise */
	double level;   /* achieved coverage 1 - (tail_lo + tail_hi), exact where the method is */
};

/*
 * Signed-rank (Tukey-Walsh) confidence interval for the centre of symmetry of x: each bound misses
 * with probability <= tail, so tail = 0.025 gives a 95% two-sided interval and its ends are the
 * 97.5% one-sided bounds. Ties among the Walsh averages are harmless (order statistics); the interval
 * is exact for continuous data and conservative for discrete data.
 */
int ab_stats_signed_rank_ci(struct ab_interval *out, const double *x, size_t n, double tail);

/* Same interval from already sorted Walsh averages of n observations (as ab_stats_walsh gives). */
int ab_stats_signed_rank_ci_walsh(struct ab_interval *out, const double *walsh, size_t n, double tail);

enum ab_alternative {
	AB_ALT_LESS = 0,     /* H1: location < mu0 (H0: location >= mu0) */
	AB_ALT_GREATER = 1   /* H1: location > mu0 (H0: location <= mu0) */
};

/*
 * One-sided signed-rank p-value against a shifted null: the differences x_i - mu0 are ranked by
 * absolute value (mid-ranks for ties, zeros dropped as Wilcoxon did). Up to AB_STATS_EXACT_MAX
 * non-zero differences the exact conditional distribution is used, ties included (DP over doubled
 * mid-ranks); above, the normal approximation with tie-corrected variance and continuity
 * correction. All differences zero gives p = 1.
 */
int ab_stats_signed_rank_p(double *out, const double *x, size_t n, double mu0,
	enum ab_alternative alternative);

/* ---- bootstrap --------------------------------------------------------------------------- */

enum ab_stat {
	AB_STAT_MEAN = 0,
	AB_STAT_MEDIAN = 1,
	AB_STAT_HODGES_LEHMANN = 2
};

enum ab_bootstrap_kind {
	AB_BOOTSTRAP_PERCENTILE = 0,
	AB_BOOTSTRAP_BCA = 1          /* bias-corrected and accelerated (jackknife acceleration) */
};

/*
 * Bootstrap interval of a statistic of x: `resamples` resamples drawn with ab_rng seeded by `seed`
 * (same inputs, same interval). tail as for the signed-rank interval (0.025: 95%). `out->level` is
 * the nominal level. AB_EINVALID for n < 2, resamples < 100 or > 1000000, or a non-finite value.
 */
int ab_stats_bootstrap_ci(struct ab_interval *out, const double *x, size_t n, enum ab_stat stat,
	enum ab_bootstrap_kind kind, int resamples, double tail, uint64_t seed);

/* ---- multiplicity and proportions -------------------------------------------------------- */

/*
 * Holm's step-down adjusted p-values: out[i] = max over j ranked at or before i of
 * min(1, (n - rank_j) * p_j). Hypothesis i is rejected at family-wise level alpha iff out[i] <= alpha.
 * `out` has n slots and may alias p. NAN p-values are treated as 1.
 */
int ab_stats_holm(double *out, const double *p, size_t n);

/* Wilson score interval for a proportion successes / n at two-sided level 1 - 2 * tail
 * (tail 0.025: 95%). AB_EINVALID for n == 0 or successes > n. */
int ab_stats_wilson(struct ab_interval *out, size_t successes, size_t n, double tail);

#endif

/*
 * stats.c - pure statistics for the guards (see stats.h). The signed-rank machinery follows
 * Hollander & Wolfe: the statistic's null distribution by dynamic programming over ranks, the
 * Tukey-Walsh interval from order statistics of the Walsh averages, the Hodges-Lehmann estimate as
 * their median. Nothing here allocates beyond what one call needs, and nothing does I/O.
 */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* ---- random numbers ---------------------------------------------------------------------- */

uint64_t ab_rng_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void ab_rng_seed(struct ab_rng *rng, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++) {
		x += 0x9e3779b97f4a7c15ULL;     /* splitmix64 stream: never all-zero state */
		rng->s[i] = ab_rng_mix(x - 0x9e3779b97f4a7c15ULL);
	}
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t ab_rng_next(struct ab_rng *rng)
{
	uint64_t *s = rng->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double ab_rng_uniform(struct ab_rng *rng)
{
	return (double)(ab_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint64_t ab_rng_below(struct ab_rng *rng, uint64_t bound)
{
	if (bound == 0)
		return 0;
	uint64_t threshold = (0 - bound) % bound;   /* reject the short last block: no modulo bias */
	for (;;) {
		uint64_t r = ab_rng_next(rng);
		if (r >= threshold)
			return r % bound;
	}
}

double ab_rng_normal(struct ab_rng *rng)
{
	double u1 = 1.0 - ab_rng_uniform(rng);      /* (0, 1]: log is finite */
	double u2 = ab_rng_uniform(rng);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- distributions ----------------------------------------------------------------------- */

double ab_stats_norm_cdf(double z)
{
	return 0.5 * erfc(-z / M_SQRT2);
}

double ab_stats_norm_quantile(double p)
{
	static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02,
		-2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01,
		2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02,
		-1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01,
		-2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00,
		2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01,
		2.445134137142996e+00, 3.754408661907416e+00 };
	const double plow = 0.02425;
	double q, r, x;

	if (!(p > 0.0))
		return -INFINITY;
	if (!(p < 1.0))
		return INFINITY;
	if (p < plow) {
		q = sqrt(-2.0 * log(p));
		x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
			((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
	} else if (p <= 1.0 - plow) {
		q = p - 0.5;
		r = q * q;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
			(((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
	} else {
		q = sqrt(-2.0 * log(1.0 - p));
		x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
			((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
	}
	/* One Halley step against the exact CDF takes the 1e-9 approximation to full precision. */
	double e = ab_stats_norm_cdf(x) - p;
	double u = e * sqrt(2.0 * M_PI) * exp(x * x / 2.0);
	return x - u / (1.0 + x * u / 2.0);
}

double ab_stats_chi2_quantile(double p, double k)
{
	if (!(k > 0) || !(p > 0.0 && p < 1.0))
		return NAN;
	double v = 2.0 / (9.0 * k), c = 1.0 - v + ab_stats_norm_quantile(p) * sqrt(v);
	return c > 0 ? k * c * c * c : 0.0;
}

/* ---- location ---------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double ab_stats_quantile_sorted(const double *sorted, size_t n, double q)
{
	if (n == 0)
		return NAN;
	if (q <= 0.0)
		return sorted[0];
	if (q >= 1.0)
		return sorted[n - 1];
	double h = q * (double)(n - 1);
	size_t i = (size_t)floor(h);
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + (h - (double)i) * (sorted[i + 1] - sorted[i]);
}

int ab_stats_quantile(double *out, const double *x, size_t n, double q)
{
	double *copy = NULL;
	int error = AB_EINVALID;

	if (n == 0 || !(q >= 0.0 && q <= 1.0))
		return ab_error_setc(AB_EINVALID, "quantile: empty data or q outside [0, 1]");
	for (size_t i = 0; i < n; i++)
		if (isnan(x[i]))
			return ab_error_setc(AB_EINVALID, "quantile: value %zu is NAN", i);
	if ((copy = malloc(n * sizeof(*copy))) == NULL) {
		error = ab_error_set("quantile: out of memory");
		goto cleanup;
	}
	memcpy(copy, x, n * sizeof(*copy));
	qsort(copy, n, sizeof(*copy), cmp_double);
	*out = ab_stats_quantile_sorted(copy, n, q);
	error = 0;
cleanup:
	free(copy);
	return error;
}

int ab_stats_median(double *out, const double *x, size_t n)
{
	return ab_stats_quantile(out, x, n, 0.5);
}

static int check_finite(const double *x, size_t n, const char *what)
{
	if (n == 0)
		return ab_error_setc(AB_EINVALID, "%s: no data", what);
	if (n > AB_STATS_N_MAX)
		return ab_error_setc(AB_EINVALID, "%s: %zu values (at most %d)", what, n, AB_STATS_N_MAX);
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return ab_error_setc(AB_EINVALID, "%s: value %zu is not finite", what, i);
	return 0;
}

int ab_stats_walsh(double **out, size_t *out_n, const double *x, size_t n)
{
	int error = check_finite(x, n, "walsh averages");
	if (error)
		return error;
	size_t count = n * (n + 1) / 2, k = 0;
	double *w = malloc(count * sizeof(*w));
	if (w == NULL)
		return ab_error_set("walsh averages: out of memory");
	for (size_t i = 0; i < n; i++)
		for (size_t j = i; j < n; j++)
			w[k++] = 0.5 * (x[i] + x[j]);
	qsort(w, count, sizeof(*w), cmp_double);
	*out = w;
	*out_n = count;
	return 0;
}

int ab_stats_hodges_lehmann(double *out, const double *x, size_t n)
{
	double *w = NULL;
	size_t count = 0;
	int error = ab_stats_walsh(&w, &count, x, n);
	if (error)
		return error;
	*out = ab_stats_quantile_sorted(w, count, 0.5);
	free(w);
	return 0;
}

/* ---- Wilcoxon signed-rank ---------------------------------------------------------------- */

/*
 * Null probabilities of T = sum of the `weights` whose sign is positive, each sign a fair coin:
 * prob[t] for t in [0, total]. Weights are ranks, or doubled mid-ranks when there are ties.
 * Probabilities (not counts) keep n = 60 (2^60 sign patterns) inside double range.
 */
static double *sign_sum_distribution(const long *weights, int n, long *out_total)
{
	long total = 0;
	for (int i = 0; i < n; i++)
		total += weights[i];
	double *prob = calloc((size_t)total + 1, sizeof(*prob));
	if (prob == NULL)
		return NULL;
	prob[0] = 1.0;
	long reach = 0;
	for (int i = 0; i < n; i++) {
		long w = weights[i];
		reach += w;
		for (long t = reach; t >= 0; t--)
			prob[t] = 0.5 * (prob[t] + (t >= w ? prob[t - w] : 0.0));
	}
	*out_total = total;
	return prob;
}

static double *untied_distribution(int n, long *out_total)
{
	long ranks[AB_STATS_EXACT_MAX];
	for (int i = 0; i < n; i++)
		ranks[i] = i + 1;
	return sign_sum_distribution(ranks, n, out_total);
}

static double signed_rank_sd(int n)
{
	return sqrt((double)n * (n + 1) * (2.0 * n + 1) / 24.0);
}

double ab_stats_signed_rank_cdf(int n, long t)
{
	long total = (long)n * (n + 1) / 2;
	if (t < 0)
		return 0.0;
	if (t >= total)
		return 1.0;
	if (n > AB_STATS_EXACT_MAX) {
		double mean = total / 2.0;
		return ab_stats_norm_cdf(((double)t + 0.5 - mean) / signed_rank_sd(n));
	}
	long all = 0;
	double *prob = untied_distribution(n, &all);
	if (prob == NULL)
		return NAN;
	double cdf = 0.0;
	for (long i = 0; i <= t; i++)
		cdf += prob[i];
	free(prob);
	return cdf > 1.0 ? 1.0 : cdf;
}

size_t ab_stats_signed_rank_k(int n, double tail, double *out_tail)
{
	if (n <= 0 || !(tail > 0.0))
		return 0;
	long total = (long)n * (n + 1) / 2;
	long t_max = -1;            /* largest t with P(T <= t) <= tail */
	double achieved = 0.0;

	if (n > AB_STATS_EXACT_MAX) {
		double z = ab_stats_norm_quantile(tail);
		t_max = (long)floor(total / 2.0 - 0.5 + z * signed_rank_sd(n));
		if (t_max > total / 2)
			t_max = total / 2;
		achieved = t_max >= 0 ? ab_stats_signed_rank_cdf(n, t_max) : 0.0;
	} else {
		long all = 0;
		double *prob = untied_distribution(n, &all);
		if (prob == NULL)
			return 0;
		double cdf = 0.0;
		/* 1e-12 slack: a cut exactly at the tail (2^-n = tail) must count as reached. */
		for (long t = 0; t <= total / 2; t++) {
			if (cdf + prob[t] > tail * (1.0 + 1e-12))
				break;
			cdf += prob[t];
			t_max = t;
		}
		achieved = cdf;
		free(prob);
	}
	if (out_tail)
		*out_tail = t_max >= 0 ? achieved : 0.0;
	return t_max >= 0 ? (size_t)(t_max + 1) : 0;
}

int ab_stats_signed_rank_min_n(double tail)
{
	if (!(tail > 0.0))
		return AB_STATS_N_MAX;
	int n = 1;
	while (ldexp(1.0, -n) > tail * (1.0 + 1e-12) && n < 1000)
		n++;
	return n;
}

int ab_stats_signed_rank_ci_walsh(struct ab_interval *out, const double *walsh, size_t n, double tail)
{
	if (n == 0 || n > AB_STATS_N_MAX || !(tail > 0.0 && tail < 0.5))
		return ab_error_setc(AB_EINVALID, "signed-rank interval: n = %zu, tail = %g", n, tail);
	size_t count = n * (n + 1) / 2;
	double achieved = 0.0;
	size_t k = ab_stats_signed_rank_k((int)n, tail, &achieved);
	if (k == 0) {
		out->lo = -INFINITY;
		out->hi = INFINITY;
		out->level = 1.0;
		return 0;
	}
	out->lo = walsh[k - 1];
	out->hi = walsh[count - k];
	out->level = 1.0 - 2.0 * achieved;
	return 0;
}

int ab_stats_signed_rank_ci(struct ab_interval *out, const double *x, size_t n, double tail)
{
	double *w = NULL;
	size_t count = 0;
	int error = ab_stats_walsh(&w, &count, x, n);
	if (error)
		return error;
	error = ab_stats_signed_rank_ci_walsh(out, w, n, tail);
	free(w);
	return error;
}

struct ranked {
	double abs;
	int positive;
};

static int cmp_ranked(const void *a, const void *b)
{
	return cmp_double(&((const struct ranked *)a)->abs, &((const struct ranked *)b)->abs);
}

int ab_stats_signed_rank_p(double *out, const double *x, size_t n, double mu0,
	enum ab_alternative alternative)
{
	struct ranked *r = NULL;
	long *weights = NULL;
	double *prob = NULL;
	int error = check_finite(x, n, "signed-rank test");
	if (error)
		return error;
	if (!isfinite(mu0))
		return ab_error_setc(AB_EINVALID, "signed-rank test: mu0 is not finite");

	error = AB_ERROR;
	if ((r = malloc(n * sizeof(*r))) == NULL || (weights = malloc(n * sizeof(*weights))) == NULL) {
		ab_error_set("signed-rank test: out of memory");
		goto cleanup;
	}
	int m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = x[i] - mu0;
		if (d == 0.0)
			continue;           /* Wilcoxon: zero differences carry no sign */
		r[m].abs = fabs(d);
		r[m].positive = d > 0.0;
		m++;
	}
	if (m == 0) {
		*out = 1.0;
		error = 0;
		goto cleanup;
	}
	qsort(r, (size_t)m, sizeof(*r), cmp_ranked);

	/* Doubled mid-ranks: a tie group spanning ranks a..b gets a + b, an integer. */
	long t_obs = 0;             /* doubled T+ */
	double tie_term = 0.0;      /* sum of (t^3 - t) over tie groups */
	for (int i = 0; i < m;) {
		int j = i;
		while (j + 1 < m && r[j + 1].abs == r[i].abs)
			j++;
		long doubled = (long)(i + 1) + (long)(j + 1);
		double t = (double)(j - i + 1);
		tie_term += t * t * t - t;
		for (int k = i; k <= j; k++) {
			weights[k] = doubled;
			if (r[k].positive)
				t_obs += doubled;
		}
		i = j + 1;
	}

	double p;
	if (m <= AB_STATS_EXACT_MAX) {
		long total = 0;
		if ((prob = sign_sum_distribution(weights, m, &total)) == NULL) {
			ab_error_set("signed-rank test: out of memory");
			goto cleanup;
		}
		p = 0.0;
		if (alternative == AB_ALT_GREATER)
			for (long t = t_obs; t <= total; t++)
				p += prob[t];
		else
			for (long t = 0; t <= t_obs; t++)
				p += prob[t];
	} else {
		double mean = (double)m * (m + 1) / 4.0;
		double var = (double)m * (m + 1) * (2.0 * m + 1) / 24.0 - tie_term / 48.0;
		double t_plus = t_obs / 2.0;
		if (!(var > 0.0)) {
			p = 1.0;
		} else if (alternative == AB_ALT_GREATER) {
			p = 1.0 - ab_stats_norm_cdf((t_plus - mean - 0.5) / sqrt(var));
		} else {
			p = ab_stats_norm_cdf((t_plus - mean + 0.5) / sqrt(var));
		}
	}
	*out = p > 1.0 ? 1.0 : (p < 0.0 ? 0.0 : p);
	error = 0;
cleanup:
	free(r);
	free(weights);
	free(prob);
	return error;
}

/* ---- bootstrap --------------------------------------------------------------------------- */

/* k-th smallest (0-based) of a[0..n), reordering a so that a[0..k) <= a[k] <= a(k..n) (Wirth's
 * selection, expected linear time). */
static double select_kth(double *a, size_t n, size_t k)
{
	long l = 0, m = (long)n - 1, kk = (long)k;
	while (l < m) {
		double pivot = a[kk];
		long i = l, j = m;
		do {
			while (a[i] < pivot)
				i++;
			while (pivot < a[j])
				j--;
			if (i <= j) {
				double t = a[i];
				a[i] = a[j];
				a[j] = t;
				i++;
				j--;
			}
		} while (i <= j);
		if (j < kk)
			l = i;
		if (kk < i)
			m = j;
	}
	return a[kk];
}

static double median_inplace(double *a, size_t n)
{
	double upper = select_kth(a, n, n / 2);
	if (n % 2)
		return upper;
	double lower = a[0];            /* max of the left part a[0 .. n/2) */
	for (size_t i = 1; i < n / 2; i++)
		if (a[i] > lower)
			lower = a[i];
	return 0.5 * (lower + upper);
}

/* The statistic of x[0..n); scratch holds at least n (n + 1) / 2 doubles. */
static double statistic(enum ab_stat stat, const double *x, size_t n, double *scratch)
{
	if (stat == AB_STAT_MEAN) {
		double sum = 0.0;
		for (size_t i = 0; i < n; i++)
			sum += x[i];
		return sum / (double)n;
	}
	if (stat == AB_STAT_MEDIAN) {
		memcpy(scratch, x, n * sizeof(*x));
		return median_inplace(scratch, n);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i; j < n; j++)
			scratch[k++] = 0.5 * (x[i] + x[j]);
	return median_inplace(scratch, k);
}

int ab_stats_bootstrap_ci(struct ab_interval *out, const double *x, size_t n, enum ab_stat stat,
	enum ab_bootstrap_kind kind, int resamples, double tail, uint64_t seed)
{
	double *scratch = NULL, *theta = NULL, *resample = NULL, *jack = NULL;
	int error = check_finite(x, n, "bootstrap");
	if (error)
		return error;
	if (n < 2 || resamples < 100 || resamples > 1000000 || !(tail > 0.0 && tail < 0.5))
		return ab_error_setc(AB_EINVALID, "bootstrap: n = %zu, resamples = %d, tail = %g",
			n, resamples, tail);
	error = AB_ERROR;
	size_t scratch_n = stat == AB_STAT_HODGES_LEHMANN ? n * (n + 1) / 2 : n;
	if ((scratch = malloc(scratch_n * sizeof(*scratch))) == NULL ||
	    (theta = malloc((size_t)resamples * sizeof(*theta))) == NULL ||
	    (resample = malloc(n * sizeof(*resample))) == NULL ||
	    (jack = malloc(n * sizeof(*jack))) == NULL) {
		ab_error_set("bootstrap: out of memory");
		goto cleanup;
	}

	struct ab_rng rng;
	ab_rng_seed(&rng, seed);
	double estimate = statistic(stat, x, n, scratch);
	size_t below = 0, equal = 0;
	for (int b = 0; b < resamples; b++) {
		for (size_t i = 0; i < n; i++)
			resample[i] = x[ab_rng_below(&rng, n)];
		theta[b] = statistic(stat, resample, n, scratch);
		below += theta[b] < estimate;
		equal += theta[b] == estimate;
	}
	qsort(theta, (size_t)resamples, sizeof(*theta), cmp_double);

	double q_lo = tail, q_hi = 1.0 - tail;
	if (kind == AB_BOOTSTRAP_BCA) {
		/* Bias correction from the share of resamples below the estimate (ties split), clamped so
		 * a lopsided bootstrap distribution gives a finite z0. */
		double share = ((double)below + 0.5 * (double)equal) / resamples;
		double clamp = 0.5 / resamples;
		if (share < clamp)
			share = clamp;
		if (share > 1.0 - clamp)
			share = 1.0 - clamp;
		double z0 = ab_stats_norm_quantile(share);

		/* Acceleration from the jackknife (leave-one-out) values. */
		double mean = 0.0, num = 0.0, den = 0.0;
		for (size_t i = 0; i < n; i++) {
			size_t k = 0;
			for (size_t j = 0; j < n; j++)
				if (j != i)
					resample[k++] = x[j];
			jack[i] = statistic(stat, resample, n - 1, scratch);
			mean += jack[i];
		}
		mean /= (double)n;
		for (size_t i = 0; i < n; i++) {
			double dlt = mean - jack[i];
			num += dlt * dlt * dlt;
			den += dlt * dlt;
		}
		double accel = den > 0.0 ? num / (6.0 * pow(den, 1.5)) : 0.0;
		double z_lo = ab_stats_norm_quantile(tail), z_hi = -z_lo;
		double a_lo = z0 + (z0 + z_lo) / (1.0 - accel * (z0 + z_lo));
		double a_hi = z0 + (z0 + z_hi) / (1.0 - accel * (z0 + z_hi));
		q_lo = ab_stats_norm_cdf(a_lo);
		q_hi = ab_stats_norm_cdf(a_hi);
		if (!(q_lo <= q_hi)) {      /* degenerate acceleration: fall back to percentile */
			q_lo = tail;
			q_hi = 1.0 - tail;
		}
	}
	out->lo = ab_stats_quantile_sorted(theta, (size_t)resamples, q_lo);
	out->hi = ab_stats_quantile_sorted(theta, (size_t)resamples, q_hi);
	out->level = 1.0 - 2.0 * tail;
	error = 0;
cleanup:
	free(scratch);
	free(theta);
	free(resample);
	free(jack);
	return error;
}

/* ---- multiplicity and proportions -------------------------------------------------------- */

struct indexed_p {
	double p;
	size_t index;
};

static int cmp_indexed_p(const void *a, const void *b)
{
	const struct indexed_p *x = a, *y = b;
	if (x->p != y->p)
		return (x->p > y->p) - (x->p < y->p);
	return (x->index > y->index) - (x->index < y->index);   /* stable order for equal p */
}

int ab_stats_holm(double *out, const double *p, size_t n)
{
	if (n == 0)
		return 0;
	struct indexed_p *order = malloc(n * sizeof(*order));
	if (order == NULL)
		return ab_error_set("holm: out of memory");
	for (size_t i = 0; i < n; i++) {
		order[i].p = isnan(p[i]) ? 1.0 : p[i];
		order[i].index = i;
	}
	qsort(order, n, sizeof(*order), cmp_indexed_p);
	double running = 0.0;
	for (size_t rank = 0; rank < n; rank++) {
		double adj = (double)(n - rank) * order[rank].p;
		if (adj > 1.0)
			adj = 1.0;
		if (adj > running)
			running = adj;
		out[order[rank].index] = running;
	}
	free(order);
	return 0;
}

int ab_stats_wilson(struct ab_interval *out, size_t successes, size_t n, double tail)
{
	if (n == 0 || successes > n || !(tail > 0.0 && tail < 0.5))
		return ab_error_setc(AB_EINVALID, "wilson: %zu of %zu, tail %g", successes, n, tail);
	double z = -ab_stats_norm_quantile(tail);
	double nn = (double)n, phat = (double)successes / nn, z2 = z * z;
	double centre = (phat + z2 / (2.0 * nn)) / (1.0 + z2 / nn);
	double half = z * sqrt(phat * (1.0 - phat) / nn + z2 / (4.0 * nn * nn)) / (1.0 + z2 / nn);
	out->lo = centre - half < 0.0 ? 0.0 : centre - half;
	out->hi = centre + half > 1.0 ? 1.0 : centre + half;
	if (successes == 0)
		out->lo = 0.0;
	if (successes == n)
		out->hi = 1.0;
	out->level = 1.0 - 2.0 * tail;
	return 0;
}

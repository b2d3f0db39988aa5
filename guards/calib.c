/*
 * calib.c - calibration statistics (see calib.h). A/A pairs of all runs are pooled into resampling
 * units (one unit = one pair of one run: every series' base and head value), so a synthetic
 * evaluation keeps the real cross-series structure of a pair; the target series' head values are
 * scaled by (1 - shift) and the evaluation runs the policy's own loop of looks and confirmation.
 * With a noise level, each series' head values are first moved so that its log-ratios spread
 * noise_scale times as wide about their mean (the cross-series structure of a unit is kept).
 * Power is a bisection over the shift with common random numbers (the same resamples per shift).
 */
#include "calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "stats.h"

#define BISECTIONS 12

struct unit {
	int run, batch, pair;
};

void ab_calib_result_free(struct ab_calib_result *result)
{
	if (result == NULL)
		return;
	free(result->series);
	free(result);
}

double ab_calib_clopper_pearson_upper(int k, int n, double level)
{
	if (n <= 0 || k >= n)
		return 1.0;
	double lo = (double)k / n, hi = 1.0, alpha = 1.0 - level;
	for (int it = 0; it < 100; it++) {    /* P(X <= k | p) falls with p: find where it is alpha */
		double p = (lo + hi) / 2, cdf = 0;
		for (int x = 0; x <= k; x++)
			cdf += exp(lgamma(n + 1.0) - lgamma(x + 1.0) - lgamma(n - x + 1.0) + x * log(p) +
				(n - x) * log1p(-p));
		if (cdf > alpha)
			lo = p;
		else
			hi = p;
	}
	return hi;
}

static int valid(const struct ab_sample *s)
{
	return s->ok && isfinite(s->value) && s->value > 0;
}

static int series_index(const struct ab_calib_result *r, const struct ab_sample *s)
{
	for (size_t k = 0; k < r->n_series; k++)
		if (r->series[k].ctx == s->ctx && strcmp(r->series[k].model, s->model) == 0 &&
		    strcmp(r->series[k].metric, s->metric) == 0)
			return (int)k;
	return -1;
}

/* The pooled units and, per unit and series, the base and head values (NAN: none). */
struct pool {
	struct unit *units;
	size_t n_units;
	double *values;            /* [unit][series][side] */
	double *scale;             /* [series]: the widening pool_widen applied (1: none) */
};

static void pool_free(struct pool *p)
{
	free(p->units);
	free(p->values);
	free(p->scale);
	memset(p, 0, sizeof(*p));
}

static int pool_make(struct pool *p, const struct ab_calib_run *runs, size_t n_runs, const struct ab_calib_result *r)
{
	size_t total = 0;
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < n_runs; i++)
		total += runs[i].n;
	if ((p->units = calloc(total + 1, sizeof(*p->units))) == NULL)
		return ab_error_set("calib: out of memory");
	for (size_t i = 0; i < n_runs; i++)
		for (size_t j = 0; j < runs[i].n; j++) {
			const struct ab_sample *s = &runs[i].samples[j];
			size_t u;
			for (u = p->n_units; u > 0; u--)   /* recent units first: samples come pair by pair */
				if (p->units[u - 1].run == (int)i && p->units[u - 1].batch == s->batch &&
				    p->units[u - 1].pair == s->pair)
					break;
			if (u == 0)
				p->units[p->n_units++] = (struct unit){ (int)i, s->batch, s->pair };
		}
	size_t cells = p->n_units * r->n_series * 2;
	if ((p->values = malloc((cells ? cells : 1) * sizeof(double))) == NULL)
		return ab_error_set("calib: out of memory");
	for (size_t c = 0; c < cells; c++)
		p->values[c] = NAN;
	if ((p->scale = malloc((r->n_series ? r->n_series : 1) * sizeof(double))) == NULL)
		return ab_error_set("calib: out of memory");
	for (size_t k = 0; k < r->n_series; k++)
		p->scale[k] = 1.0;
	size_t u = 0;
	for (size_t i = 0; i < n_runs; i++)
		for (size_t j = 0; j < runs[i].n; j++) {
			const struct ab_sample *s = &runs[i].samples[j];
			if (!valid(s) || s->side < 0 || s->side > 1)
				continue;
			if (!(p->units[u].run == (int)i && p->units[u].batch == s->batch && p->units[u].pair == s->pair))
				for (u = 0; u < p->n_units; u++)
					if (p->units[u].run == (int)i && p->units[u].batch == s->batch &&
					    p->units[u].pair == s->pair)
						break;
			int k = series_index(r, s);
			if (u < p->n_units && k >= 0)
				p->values[(u * r->n_series + (size_t)k) * 2 + (size_t)s->side] = s->value;
		}
	return 0;
}

/*
 * Widens each series' paired log-ratios d about their mean c to c + f (d - c), f = sqrt((m - 1) /
 * chi2_(1 - level)(m - 1)) for its m complete pairs: resampled, they then have the spread of the
 * noise's one-sided `level` upper confidence bound. Only the head values move. level 0 or m < 3:
 * unchanged.
 */
static void pool_widen(struct pool *p, const struct ab_calib_result *r, double level)
{
	for (size_t k = 0; k < r->n_series && level > 0; k++) {
		double sum = 0;
		size_t m = 0;
		for (size_t u = 0; u < p->n_units; u++) {
			double b = p->values[(u * r->n_series + k) * 2], h = p->values[(u * r->n_series + k) * 2 + 1];
			if (isfinite(b) && isfinite(h)) {
				sum += log(h / b);
				m++;
			}
		}
		if (m < 3)
			continue;
		double c = sum / (double)m, q = ab_stats_chi2_quantile(1.0 - level, (double)(m - 1));
		if (!(q > 0))
			continue;
		p->scale[k] = sqrt((double)(m - 1) / q);
		for (size_t u = 0; u < p->n_units; u++) {
			double b = p->values[(u * r->n_series + k) * 2], *h = &p->values[(u * r->n_series + k) * 2 + 1];
			if (isfinite(b) && isfinite(*h))
				*h = b * exp(c + p->scale[k] * (log(*h / b) - c));
		}
	}
}

/* One synthetic evaluation; *detected: the target series REJECTed (confirmed), *resolved: its
 * outcome regressed. */
static int synthetic(int *detected, int *resolved, const struct pool *pool, const struct ab_calib_result *r,
	size_t target, double shift, const struct ab_speed_policy *policy, struct ab_rng *rng,
	struct ab_sample *buf, size_t cap, int first)
{
	struct ab_speed_result *res = NULL;
	size_t n = 0;
	int have[2] = { 0, 0 }, batch = 0, goal = first, next_pair = 0, error;
	*detected = *resolved = 0;
	for (;;) {
		while (have[batch] < goal) {
			size_t u = (size_t)ab_rng_below(rng, pool->n_units);
			if (n + 2 * r->n_series > cap)
				return ab_error_setc(AB_EINVALID, "calib: a synthetic evaluation outgrew %zu samples", cap);
			for (size_t k = 0; k < r->n_series; k++)
				for (int side = 0; side < 2; side++) {
					double v = pool->values[(u * r->n_series + k) * 2 + (size_t)side];
					if (!isfinite(v))
						continue;
					struct ab_sample *s = &buf[n++];
					memset(s, 0, sizeof(*s));
					s->side = side;
					s->pair = next_pair;
					s->order = (next_pair + side) % 2;
					s->batch = batch;
					snprintf(s->model, sizeof(s->model), "%s", r->series[k].model);
					snprintf(s->metric, sizeof(s->metric), "%s", r->series[k].metric);
					s->ctx = r->series[k].ctx;
					s->value = side == AB_SIDE_HEAD && k == target ? v * (1.0 - shift) : v;
					s->ok = 1;
				}
			next_pair++;
			have[batch]++;
		}
		if ((error = ab_speed_decide(&res, buf, n, policy)) != 0)
			return error;
		if (!res->open)
			break;
		batch = res->next_batch;
		goal = res->next_pairs;
		ab_speed_result_free(res);
		res = NULL;
	}
	for (size_t i = 0; i < res->n_series; i++) {
		const struct ab_speed_series *s = &res->series[i];
		if (s->ctx == r->series[target].ctx && strcmp(s->model, r->series[target].model) == 0 &&
		    strcmp(s->metric, r->series[target].metric) == 0) {
			*detected = res->reject && s->confirmed;
			*resolved = s->outcome == AB_OUTCOME_REGRESSED;
		}
	}
	ab_speed_result_free(res);
	return 0;
}

static int first_look(int *out, const struct ab_calib_result *r, const struct ab_speed_policy *policy)
{
	size_t gating = 0;
	for (size_t k = 0; k < r->n_series; k++)
		gating += (size_t)r->series[k].gating;
	return ab_speed_pairs_needed(out, NULL, policy, gating);
}

static int power_pool(double *out_power, double *out_resolve, const struct pool *pool, const struct ab_calib_result *r,
	size_t target, double shift, const struct ab_calib_options *o)
{
	struct ab_rng rng;
	int first, last, error;
	if ((error = ab_speed_pairs_needed(&first, &last, o->policy, 1)) != 0 || (error = first_look(&first, r, o->policy)) != 0)
		return error;
	size_t cap = (size_t)(last + first + o->policy->confirm_pairs + 64) * r->n_series * 2;
	struct ab_sample *buf = malloc(cap * sizeof(*buf));
	if (buf == NULL)
		return ab_error_set("calib: out of memory");
	int hits = 0, resolved = 0;
	ab_rng_seed(&rng, o->seed ^ (0x9e3779b97f4a7c15ULL * (target + 1)));
	for (int b = 0; b < o->resamples; b++) {
		int d, v;
		if ((error = synthetic(&d, &v, pool, r, target, shift, o->policy, &rng, buf, cap, first)) != 0)
			break;
		hits += d;
		resolved += v;
	}
	free(buf);
	if (error)
		return error;
	*out_power = (double)hits / o->resamples;
	*out_resolve = (double)resolved / o->resamples;
	return 0;
}

int ab_calib_power(double *out_power, double *out_resolve, const struct ab_calib_run *runs, size_t n_runs,
	const struct ab_calib_result *result, size_t target, double shift, const struct ab_calib_options *options)
{
	struct pool pool;
	int error = pool_make(&pool, runs, n_runs, result);
	if (error == 0) {
		pool_widen(&pool, result, options->noise_level);
		error = pool.n_units > 0 ? power_pool(out_power, out_resolve, &pool, result, target, shift, options) :
			ab_error_setc(AB_EINVALID, "calib: no pairs to resample");
	}
	pool_free(&pool);
	return error;
}

/* Bisection for the smallest shift with power >= o->power; which: 0 REJECT, 1 resolve. */
static int mde_search(double *out, const struct pool *pool, const struct ab_calib_result *r, size_t target,
	int which, const struct ab_calib_options *o)
{
	double pw[2], lo = 0.0, hi = o->max_shift;
	int error;
	if ((error = power_pool(&pw[0], &pw[1], pool, r, target, hi, o)) != 0)
		return error;
	if (pw[which] < o->power) {
		*out = NAN;
		return 0;
	}
	for (int it = 0; it < BISECTIONS; it++) {
		double mid = (lo + hi) / 2;
		if ((error = power_pool(&pw[0], &pw[1], pool, r, target, mid, o)) != 0)
			return error;
		if (pw[which] >= o->power)
			hi = mid;
		else
			lo = mid;
	}
	*out = hi;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int ab_calib_compute(struct ab_calib_result **out, const struct ab_calib_run *runs, const int *claimed,
	size_t n_runs, const struct ab_calib_options *o)
{
	struct ab_calib_result *r = NULL;
	struct pool pool = { 0 };
	double *d = NULL;
	size_t total = 0;
	int error = AB_ERROR;

	if (n_runs == 0 || o == NULL || o->policy == NULL || !(o->power > 0 && o->power < 1) || o->resamples < 10 ||
	    !(o->max_shift > 0 && o->max_shift < 1) || !(o->noise_level >= 0 && o->noise_level < 1))
		return ab_error_setc(AB_EINVALID, "calib: no runs, or a bad power, resample count, shift bound or noise level");
	for (size_t i = 0; i < n_runs; i++)
		total += runs[i].n;
	if ((r = calloc(1, sizeof(*r))) == NULL || (r->series = calloc(total + 1, sizeof(*r->series))) == NULL ||
	    (d = malloc((total + 1) * sizeof(*d))) == NULL)
		goto oom;
	r->runs = (int)n_runs;
	for (size_t i = 0; i < n_runs; i++)
		r->false_positives += claimed[i] != 0;
	r->fpr = (double)r->false_positives / r->runs;
	r->fpr_upper = ab_calib_clopper_pearson_upper(r->false_positives, r->runs, 0.95);
	for (size_t i = 0; i < n_runs; i++)
		for (size_t j = 0; j < runs[i].n; j++) {
			const struct ab_sample *s = &runs[i].samples[j];
			if (series_index(r, s) >= 0)
				continue;
			struct ab_calib_series *c = &r->series[r->n_series++];
			snprintf(c->model, sizeof(c->model), "%.*s", (int)sizeof(c->model) - 1, s->model);
			snprintf(c->metric, sizeof(c->metric), "%.*s", (int)sizeof(c->metric) - 1, s->metric);
			c->ctx = s->ctx;
			const struct ab_speed_metric_rule *rule = ab_speed_rule_find(o->policy, c->metric);
			c->gating = rule ? rule->gating : 0;
		}
	if ((error = pool_make(&pool, runs, n_runs, r)) != 0)
		goto cleanup;
	r->units = (int)pool.n_units;
	for (size_t k = 0; k < r->n_series; k++) {
		struct ab_calib_series *c = &r->series[k];
		size_t m = 0;
		for (size_t u = 0; u < pool.n_units; u++) {
			double b = pool.values[(u * r->n_series + k) * 2], h = pool.values[(u * r->n_series + k) * 2 + 1];
			if (isfinite(b) && isfinite(h))
				d[m++] = log(h / b);
		}
		c->n_pairs = (int)m;
		c->sd = c->robust_sd = c->mde = c->mde_resolve = NAN;
		if (m >= 2) {
			double mean = 0, ss = 0, med;
			for (size_t i = 0; i < m; i++)
				mean += d[i] / m;
			for (size_t i = 0; i < m; i++)
				ss += (d[i] - mean) * (d[i] - mean);
			c->sd = sqrt(ss / (m - 1));
			qsort(d, m, sizeof(*d), cmp_double);
			med = ab_stats_quantile_sorted(d, m, 0.5);
			for (size_t i = 0; i < m; i++)
				d[i] = fabs(d[i] - med);
			qsort(d, m, sizeof(*d), cmp_double);
			c->robust_sd = 1.4826 * ab_stats_quantile_sorted(d, m, 0.5);
		}
	}
	/* The MDE searches resample the widened pairs; sd and robust_sd above are as measured. */
	pool_widen(&pool, r, o->noise_level);
	for (size_t k = 0; k < r->n_series; k++) {
		struct ab_calib_series *c = &r->series[k];
		c->noise_scale = pool.scale[k];
		if (!c->gating || c->n_pairs < 2)
			continue;
		if ((error = mde_search(&c->mde, &pool, r, k, 0, o)) != 0 ||
		    (error = mde_search(&c->mde_resolve, &pool, r, k, 1, o)) != 0)
			goto cleanup;
	}
	*out = r;
	r = NULL;
	error = 0;
	goto cleanup;
oom:
	error = ab_error_set("calib: out of memory");
cleanup:
	ab_calib_result_free(r);
	pool_free(&pool);
	free(d);
	return error;
}

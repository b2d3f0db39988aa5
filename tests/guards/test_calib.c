/*
 * test_calib.c - guards/calib: the Clopper-Pearson bound against known values, the noise of
 * simulated A/A runs, and the resampling MDE against the truth: the slowdown that fresh simulated
 * evaluations (not resampled ones) REJECT 90% of the time, found by its own bisection, must lie
 * within a factor of 1.5 of the MDE computed from the A/A pairs alone; and over many simulated
 * calibrations, the MDE at the noise's 90% upper bound is rarely below that truth, where the MDE of
 * the pairs as measured is below it about half the time.
 */
#include <stdlib.h>

#include "calib.h"
#include "check.h"
#include "error.h"
#include "sim.h"

#define RUNS 10
#define PAIRS 10
#define SERIES 4
static struct ab_sample aa[RUNS][PAIRS * SERIES * 2];
static struct ab_sample fresh[4096];

static const struct sim_series base_series[SERIES] = {
	{ "m", "decode_tps", 512, 1.0 }, { "m", "decode_tps", 4096, 1.0 },
	{ "m", "prefill_tps", 512, 1.0 }, { "m", "prefill_tps", 4096, 1.0 },
};

static void test_clopper_pearson(void)
{
	CHECK_NEAR(ab_calib_clopper_pearson_upper(0, 30, 0.95), 1 - pow(0.05, 1.0 / 30), 1e-6);  /* 0.0950 */
	CHECK_NEAR(ab_calib_clopper_pearson_upper(1, 30, 0.95), 0.1486, 5e-4);   /* (1-p)^30 + 30p(1-p)^29 = 0.05 */
	CHECK_NEAR(ab_calib_clopper_pearson_upper(5, 10, 0.95), 0.7775, 5e-4);
	CHECK(ab_calib_clopper_pearson_upper(10, 10, 0.95) == 1.0);
}

/* Power of fresh simulated evaluations against a slowdown of series 1 (decode 4k). */
static double fresh_power(double shift, double sigma, const struct ab_speed_policy *p, int evals, uint64_t seed)
{
	struct sim_series series[SERIES];
	memcpy(series, base_series, sizeof(series));
	series[1].ratio = 1.0 - shift;
	struct sim sim = { series, SERIES, SIM_NORMAL, sigma, 0, 0 };
	int hits = 0;
	for (int i = 0; i < evals; i++) {
		struct ab_rng rng;
		ab_rng_seed(&rng, seed + (uint64_t)i);
		int first = 0;
		ab_speed_pairs_needed(&first, NULL, p, SERIES);
		size_t n = sim_pairs(fresh, 0, &sim, &rng, 0, first, 0);
		int have[2] = { first, 0 };
		struct ab_speed_result *r = NULL;
		for (;;) {
			if (ab_speed_decide(&r, fresh, n, p) != 0) {
				CHECK(!"decide");
				return NAN;
			}
			if (!r->open)
				break;
			int b = r->next_batch, from = b ? 1000 + have[1] : have[0];
			n = sim_pairs(fresh, n, &sim, &rng, from, from + r->next_pairs - have[b], b);
			have[b] = r->next_pairs;
			ab_speed_result_free(r);
		}
		for (size_t k = 0; k < r->n_series; k++)
			if (r->series[k].ctx == 4096 && strcmp(r->series[k].metric, "decode_tps") == 0)
				hits += r->reject && r->series[k].confirmed;
		ab_speed_result_free(r);
	}
	return (double)hits / evals;
}

static void mde_policy(struct ab_speed_policy *p);
static double fresh_mde(double sigma, const struct ab_speed_policy *p);

static void test_mde(void)
{
	const double sigma = 0.01;
	struct ab_speed_policy p;
	mde_policy(&p);
	struct ab_calib_run runs[RUNS];
	int claimed[RUNS] = { 0 };
	claimed[3] = 1;                  /* one run "claimed": FPR 1/10 */
	struct sim sim = { base_series, SERIES, SIM_NORMAL, sigma, 0, 0 };
	for (int i = 0; i < RUNS; i++) {
		struct ab_rng rng;
		ab_rng_seed(&rng, 500 + (uint64_t)i);
		runs[i].n = sim_pairs(aa[i], 0, &sim, &rng, 0, PAIRS, 0);
		runs[i].samples = aa[i];
	}
	struct ab_calib_options o = { .policy = &p, .power = 0.90, .resamples = 200, .max_shift = 0.5, .seed = 9 };
	struct ab_calib_result *r = NULL;
	if (ab_calib_compute(&r, runs, claimed, RUNS, &o) != 0) {
		fprintf(stderr, "calib: %s\n", ab_error_last());
		CHECK(!"compute");
		return;
	}
	CHECK(r->runs == RUNS && r->false_positives == 1);
	CHECK_NEAR(r->fpr, 0.1, 1e-12);
	CHECK_NEAR(r->fpr_upper, ab_calib_clopper_pearson_upper(1, 10, 0.95), 1e-12);
	CHECK(r->n_series == SERIES && r->units == RUNS * PAIRS);
	const struct ab_calib_series *s = &r->series[1];
	CHECK(s->ctx == 4096 && strcmp(s->metric, "decode_tps") == 0 && s->n_pairs == RUNS * PAIRS);
	/* log-ratios of two values with 1% noise each: sd 1.41% */
	CHECK_NEAR(s->sd, sigma * sqrt(2.0), 0.25 * sigma * sqrt(2.0));
	CHECK_NEAR(s->robust_sd, sigma * sqrt(2.0), 0.35 * sigma * sqrt(2.0));
	CHECK(isfinite(s->mde) && s->mde > 0.02);          /* below the 0.98 floor, never at it */
	CHECK(isfinite(s->mde_resolve) && s->mde_resolve < s->mde);

	double hi = fresh_mde(sigma, &p);
	printf("decode 4k, 1%% noise: resampled MDE %.2f%% (resolves %.2f%%), fresh-simulation 90%% point %.2f%%\n",
		s->mde * 100, s->mde_resolve * 100, hi * 100);
	CHECK(s->mde / hi <= 1.5 && hi / s->mde <= 1.5);
	for (size_t k = 0; k < r->n_series; k++)
		printf("  %s ctx %d: sd %.2f%%, MDE %.2f%%\n", r->series[k].metric, r->series[k].ctx,
			r->series[k].sd * 100, r->series[k].mde * 100);
	/* The power curve itself: no REJECT without a shift (resampled A/A), every time far past the MDE. */
	double power = -1, resolve = -1;
	CHECK(ab_calib_power(&power, &resolve, runs, RUNS, r, 1, 0.0, &o) == 0);
	CHECK(power <= 0.05);
	CHECK(ab_calib_power(&power, &resolve, runs, RUNS, r, 1, 2.0 * s->mde, &o) == 0);
	CHECK(power == 1.0 && resolve == 1.0);
	ab_calib_result_free(r);
}

/* The policy of the MDE cases, and the truth: bisection on fresh simulated evaluations. */
static void mde_policy(struct ab_speed_policy *p)
{
	ab_speed_policy_init(p);
	p->pairs_min = 6;
	p->pairs_max = 16;
	p->confirm_pairs = 6;
}

static double fresh_mde(double sigma, const struct ab_speed_policy *p)
{
	double lo = 0.0, hi = 0.3;
	for (int it = 0; it < 8; it++) {
		double mid = (lo + hi) / 2;
		if (fresh_power(mid, sigma, p, 200, 77000) >= 0.9)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/*
 * 12 calibrations of 6 A/A runs x 10 pairs (the fixture's size), each from its own seeds: how often
 * is the published MDE of decode 4k below the fresh-simulation truth? At noise_level 0.90 it may be
 * in at most 3 of 12 (the bound's own 10%, plus the searches' resampling noise), and never more than
 * 1.6x the truth; the pairs as measured go below it far more often (printed, and at least as often).
 */
static void test_conservative(void)
{
	enum { CALS = 12, CRUNS = 6 };
	const double sigma = 0.01;
	struct ab_speed_policy p;
	mde_policy(&p);
	double truth = fresh_mde(sigma, &p);
	int low[2] = { 0, 0 };
	for (int j = 0; j < CALS; j++) {
		struct ab_calib_run runs[CRUNS];
		int claimed[CRUNS] = { 0 };
		struct sim sim = { base_series, SERIES, SIM_NORMAL, sigma, 0, 0 };
		for (int i = 0; i < CRUNS; i++) {
			struct ab_rng rng;
			ab_rng_seed(&rng, 9000 + 100 * (uint64_t)j + (uint64_t)i);
			runs[i].n = sim_pairs(aa[i], 0, &sim, &rng, 0, PAIRS, 0);
			runs[i].samples = aa[i];
		}
		double mde[2], sd = NAN, scale = NAN;
		for (int level = 0; level < 2; level++) {
			struct ab_calib_options o = { .policy = &p, .power = 0.90, .resamples = 200, .max_shift = 0.5,
				.seed = 31 + (uint64_t)j, .noise_level = level ? 0.90 : 0.0 };
			struct ab_calib_result *r = NULL;
			if (ab_calib_compute(&r, runs, claimed, CRUNS, &o) != 0) {
				fprintf(stderr, "calib: %s\n", ab_error_last());
				CHECK(!"compute");
				return;
			}
			mde[level] = r->series[1].mde;
			sd = r->series[1].sd;
			scale = r->series[1].noise_scale;
			CHECK(level ? scale > 1.1 && scale < 1.2 : scale == 1.0);   /* 59 d.f.: sqrt(59 / 45.6) */
			ab_calib_result_free(r);
		}
		printf("calibration %2d: sd %.2f%%, MDE as measured %.2f%%, at the 90%% noise bound %.2f%% (x%.3f)\n",
			j, sd * 100, mde[0] * 100, mde[1] * 100, scale);
		CHECK(isfinite(mde[0]) && isfinite(mde[1]) && mde[1] >= mde[0]);
		CHECK(mde[1] <= 1.6 * truth);
		low[0] += mde[0] < truth;
		low[1] += mde[1] < truth;
	}
	printf("fresh-simulation truth %.2f%%: below it %d of %d as measured, %d of %d at the 90%% bound\n",
		truth * 100, low[0], CALS, low[1], CALS);
	CHECK(low[1] <= 3);
	CHECK(low[0] >= low[1]);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "clopper_pearson", test_clopper_pearson },
		{ "mde", test_mde },
		{ "conservative", test_conservative },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

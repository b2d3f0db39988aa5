/*
 * test_stats.c - guards/stats: exact signed-rank distribution against hand-computed small cases,
 * Hodges-Lehmann, Holm, Wilson, quantiles, and the coverage of the 95% intervals on simulated
 * paired data (normal, Student-t 2 df, 3x outliers, linear drift under AB/BA interleaving).
 * Coverage figures are printed; the asserted bounds are stated next to each check.
 */
#include <stdlib.h>

#include "check.h"
#include "error.h"
#include "sim.h"
#include "stats.h"

static void test_exact(void)
{
	/* n = 3: T+ takes 0..6 with counts 1 1 1 2 1 1 1 over 8 sign patterns. */
	CHECK_NEAR(ab_stats_signed_rank_cdf(3, 0), 1.0 / 8, 1e-15);
	CHECK_NEAR(ab_stats_signed_rank_cdf(3, 2), 3.0 / 8, 1e-15);
	CHECK_NEAR(ab_stats_signed_rank_cdf(3, 3), 5.0 / 8, 1e-15);
	CHECK_NEAR(ab_stats_signed_rank_cdf(3, 6), 1.0, 0);
	CHECK_NEAR(ab_stats_signed_rank_cdf(3, -1), 0.0, 0);
	/* n = 4: counts 1 1 1 2 2 2 2 2 1 1 1 over 16. */
	CHECK_NEAR(ab_stats_signed_rank_cdf(4, 3), 5.0 / 16, 1e-15);
	CHECK_NEAR(ab_stats_signed_rank_cdf(4, 5), 9.0 / 16, 1e-15);
	/* n = 5: P(T <= 3) = 5/32. */
	CHECK_NEAR(ab_stats_signed_rank_cdf(5, 3), 5.0 / 32, 1e-15);
	/* n = 10: the classic table, P(T <= 8) = 25/1024, P(T <= 10) = 43/1024. */
	CHECK_NEAR(ab_stats_signed_rank_cdf(10, 8), 25.0 / 1024, 1e-12);
	CHECK_NEAR(ab_stats_signed_rank_cdf(10, 10), 43.0 / 1024, 1e-12);
	/* Normal approximation above the exact range stays close to the exact value at n = 60. */
	CHECK_NEAR(ab_stats_signed_rank_cdf(61, 600), ab_stats_norm_cdf((600.5 - 945.5) /
		sqrt(61.0 * 62 * 123 / 24)), 1e-12);
	CHECK(fabs(ab_stats_signed_rank_cdf(60, 600) - ab_stats_signed_rank_cdf(61, 600)) < 0.05);

	/* Interval order statistics: n = 6 at 2.5% is [min, max] of the Walsh averages (k = 1, achieved
	 * 1/64); n = 12 at 2.5% is k = 14 (P(T <= 13) = 87/4096). */
	double achieved = 0;
	CHECK(ab_stats_signed_rank_k(6, 0.025, &achieved) == 1);
	CHECK_NEAR(achieved, 1.0 / 64, 1e-15);
	CHECK(ab_stats_signed_rank_k(12, 0.025, &achieved) == 14);
	CHECK_NEAR(achieved, 87.0 / 4096, 1e-12);
	CHECK(ab_stats_signed_rank_k(5, 0.025, NULL) == 0);      /* 1/32 > 0.025: cannot bound */
	CHECK(ab_stats_signed_rank_k(100, 0.025, NULL) > 0);     /* normal approximation path */

	/* Feasibility: 2^-n <= tail. */
	CHECK(ab_stats_signed_rank_min_n(0.05) == 5);
	CHECK(ab_stats_signed_rank_min_n(0.01) == 7);
	CHECK(ab_stats_signed_rank_min_n(1.0 / 1024) == 10);
	CHECK(ab_stats_signed_rank_min_n(0.05 / 48) == 10);

	/* p-values against a shifted null. */
	double x[] = { 1, 2, 3, 4, 5 }, p = 0;
	CHECK(ab_stats_signed_rank_p(&p, x, 5, 0.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 1.0 / 32, 1e-15);
	CHECK(ab_stats_signed_rank_p(&p, x, 5, 0.0, AB_ALT_LESS) == 0);
	CHECK_NEAR(p, 1.0, 1e-15);
	double y[] = { -1, 2, 3, 4, 5 };                        /* T+ = 14: P(T >= 14) = P(T <= 1) */
	CHECK(ab_stats_signed_rank_p(&p, y, 5, 0.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 2.0 / 32, 1e-15);
	double shifted[] = { 11, 12, 13, 14, 15 };              /* same as x against mu0 = 10 */
	CHECK(ab_stats_signed_rank_p(&p, shifted, 5, 10.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 1.0 / 32, 1e-15);
	/* Ties: |d| = 1 1 2 2 get mid-ranks 1.5 1.5 3.5 3.5; signs + + - +: T+ = 6.5. Of the 16 sign
	 * patterns 6 reach T+ >= 6.5 (by hand: {1.5,1.5,3.5}x2, {1.5,3.5,3.5}x2, {3.5,3.5}, all). */
	double tied[] = { 1, 1, -2, 2 };
	CHECK(ab_stats_signed_rank_p(&p, tied, 4, 0.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 6.0 / 16, 1e-15);
	/* Zeros are dropped: {0, 1, 2, 3} behaves as {1, 2, 3}. */
	double zeros[] = { 0, 1, 2, 3 };
	CHECK(ab_stats_signed_rank_p(&p, zeros, 4, 0.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 1.0 / 8, 1e-15);
	double all_zero[] = { 0, 0 };
	CHECK(ab_stats_signed_rank_p(&p, all_zero, 2, 0.0, AB_ALT_GREATER) == 0);
	CHECK_NEAR(p, 1.0, 0);
	/* Large n: normal approximation agrees with the exact tail to a few per mille. */
	double big[70];
	for (int i = 0; i < 70; i++)
		big[i] = (i % 3 == 0 ? -1.0 : 1.0) * (i + 1);
	CHECK(ab_stats_signed_rank_p(&p, big, 70, 0.0, AB_ALT_GREATER) == 0);
	CHECK(p > 0.0 && p < 0.05);

	/* Errors on purpose. */
	double bad[] = { 1, NAN };
	CHECK(ab_stats_signed_rank_p(&p, bad, 2, 0.0, AB_ALT_GREATER) == AB_EINVALID);
	CHECK(ab_stats_signed_rank_p(&p, x, 0, 0.0, AB_ALT_GREATER) == AB_EINVALID);
	struct ab_interval ci;
	CHECK(ab_stats_signed_rank_ci(&ci, bad, 2, 0.025) == AB_EINVALID);
	CHECK(ab_stats_signed_rank_ci(&ci, x, 5, 0.7) == AB_EINVALID);
}

static void test_location(void)
{
	double m = 0;
	double odd[] = { 5, 1, 3 }, even[] = { 4, 1, 3, 2 };
	CHECK(ab_stats_median(&m, odd, 3) == 0);
	CHECK_NEAR(m, 3, 0);
	CHECK(ab_stats_median(&m, even, 4) == 0);
	CHECK_NEAR(m, 2.5, 0);
	CHECK(ab_stats_quantile(&m, even, 4, 0.25) == 0);
	CHECK_NEAR(m, 1.75, 1e-15);                             /* R type 7 */
	CHECK(ab_stats_quantile(&m, even, 4, 1.5) == AB_EINVALID);
	CHECK(ab_stats_median(&m, even, 0) == AB_EINVALID);

	double x[] = { 1, 2, 3 };                               /* Walsh: 1 1.5 2 2 2.5 3 */
	CHECK(ab_stats_hodges_lehmann(&m, x, 3) == 0);
	CHECK_NEAR(m, 2.0, 0);
	double skew[] = { 0, 0, 10 };                           /* Walsh: 0 0 0 5 5 10 -> 2.5 */
	CHECK(ab_stats_hodges_lehmann(&m, skew, 3) == 0);
	CHECK_NEAR(m, 2.5, 0);

	double six[] = { 0.3, -0.1, 0.2, 0.5, 0.1, 0.4 };
	struct ab_interval ci;
	CHECK(ab_stats_signed_rank_ci(&ci, six, 6, 0.025) == 0);   /* k = 1: [min, max] */
	CHECK_NEAR(ci.lo, -0.1, 1e-15);
	CHECK_NEAR(ci.hi, 0.5, 1e-15);
	CHECK_NEAR(ci.level, 1.0 - 2.0 / 64, 1e-15);
	CHECK(ab_stats_signed_rank_ci(&ci, six, 6, 0.01) == 0);    /* 1/64 > 0.01: unbounded */
	CHECK(isinf(ci.lo) && ci.lo < 0 && isinf(ci.hi));

	CHECK_NEAR(ab_stats_norm_quantile(0.975), 1.959963984540054, 1e-12);
	CHECK_NEAR(ab_stats_norm_quantile(1e-6), -4.753424308822899, 1e-9);
	CHECK_NEAR(ab_stats_norm_cdf(ab_stats_norm_quantile(0.3)), 0.3, 1e-14);
	/* chi-square quantiles against tables (Wilson-Hilferty: within 0.5% at these k) */
	CHECK_NEAR(ab_stats_chi2_quantile(0.05, 10), 3.940, 0.005 * 3.940);
	CHECK_NEAR(ab_stats_chi2_quantile(0.95, 10), 18.307, 0.005 * 18.307);
	CHECK_NEAR(ab_stats_chi2_quantile(0.10, 30), 20.599, 0.001 * 20.599);
	CHECK_NEAR(ab_stats_chi2_quantile(0.10, 100), 82.358, 0.001 * 82.358);
	CHECK(isnan(ab_stats_chi2_quantile(0.0, 10)) && isnan(ab_stats_chi2_quantile(0.5, 0)));
}

static void test_holm_wilson(void)
{
	double p[] = { 0.01, 0.04, 0.03, 0.005 }, adj[4];
	CHECK(ab_stats_holm(adj, p, 4) == 0);
	CHECK_NEAR(adj[0], 0.03, 1e-15);
	CHECK_NEAR(adj[1], 0.06, 1e-15);                       /* 0.04 * 1 lifted by monotonicity */
	CHECK_NEAR(adj[2], 0.06, 1e-15);
	CHECK_NEAR(adj[3], 0.02, 1e-15);
	double q[] = { 0.5, NAN };
	CHECK(ab_stats_holm(q, q, 2) == 0);                     /* aliasing allowed, NAN -> 1 */
	CHECK_NEAR(q[0], 1.0, 0);
	CHECK_NEAR(q[1], 1.0, 0);

	struct ab_interval w;
	CHECK(ab_stats_wilson(&w, 8, 10, 0.025) == 0);          /* 0.4902 .. 0.9433 */
	CHECK_NEAR(w.lo, 0.4901624, 1e-6);
	CHECK_NEAR(w.hi, 0.9433178, 1e-6);
	CHECK(ab_stats_wilson(&w, 0, 10, 0.025) == 0);
	CHECK_NEAR(w.lo, 0.0, 0);
	CHECK_NEAR(w.hi, 0.2775328, 1e-6);
	CHECK(ab_stats_wilson(&w, 11, 10, 0.025) == AB_EINVALID);
	CHECK(ab_stats_wilson(&w, 0, 0, 0.025) == AB_EINVALID);
}

static void test_rng(void)
{
	struct ab_rng a, b;
	ab_rng_seed(&a, 42);
	ab_rng_seed(&b, 42);
	for (int i = 0; i < 100; i++)
		CHECK(ab_rng_next(&a) == ab_rng_next(&b));
	ab_rng_seed(&b, 43);
	CHECK(ab_rng_next(&a) != ab_rng_next(&b));
	double sum = 0, sum2 = 0;
	int below[10] = { 0 };
	for (int i = 0; i < 100000; i++) {
		double z = ab_rng_normal(&a);
		sum += z;
		sum2 += z * z;
		below[ab_rng_below(&a, 10)]++;
	}
	CHECK(fabs(sum / 100000) < 0.02);
	CHECK(fabs(sum2 / 100000 - 1.0) < 0.02);
	for (int i = 0; i < 10; i++)
		CHECK(below[i] > 9500 && below[i] < 10500);
}

/* d_i = ln(head / base) of one simulated series, n pairs. */
static void sim_d(double *d, int n, const struct sim *sim, struct ab_rng *rng, struct ab_sample *buf)
{
	size_t count = sim_pairs(buf, 0, sim, rng, 0, n, 0);
	(void)count;
	for (int i = 0; i < n; i++)
		d[i] = log(buf[2 * i + 1].value / buf[2 * i].value);
}

/* Coverage of the true log-ratio by the 95% signed-rank interval over `runs` experiments. */
static double coverage(const struct sim *sim, int n, int runs, uint64_t seed, double *hl_bias)
{
	struct ab_rng rng;
	struct ab_sample buf[2 * 64];
	double d[64], truth = log(sim->series[0].ratio), bias = 0;
	int covered = 0;
	ab_rng_seed(&rng, seed);
	for (int r = 0; r < runs; r++) {
		struct ab_interval ci;
		double hl;
		sim_d(d, n, sim, &rng, buf);
		if (ab_stats_signed_rank_ci(&ci, d, (size_t)n, 0.025) != 0 ||
		    ab_stats_hodges_lehmann(&hl, d, (size_t)n) != 0) {
			CHECK(!"stats failed");
			return 0;
		}
		covered += ci.lo <= truth && truth <= ci.hi;
		bias += hl - truth;
	}
	if (hl_bias)
		*hl_bias = bias / runs;
	return (double)covered / runs;
}

static const struct sim_series one_series[] = { { "m", "decode_tps", 4096, 1.05 } };

static void test_coverage_normal(void)
{
	struct sim sim = { one_series, 1, SIM_NORMAL, 0.02, 0, 0 };
	double bias = 0;
	double c = coverage(&sim, 12, 2000, 1, &bias);
	/* Exact interval for n = 12 has achieved level 1 - 2 * 87/4096 = 0.9575. */
	printf("coverage normal n=12: %.4f (2000 runs, HL bias %.2e)\n", c, bias);
	CHECK(c >= 0.93 && c <= 0.97);
	CHECK(fabs(bias) < 0.002);
	c = coverage(&sim, 8, 2000, 2, NULL);
	printf("coverage normal n=8: %.4f\n", c);
	CHECK(c >= 0.93 && c <= 0.98);                          /* achieved level 1 - 2*5/256 = 0.961 */
	c = coverage(&sim, 40, 1000, 3, NULL);
	printf("coverage normal n=40: %.4f\n", c);
	CHECK(c >= 0.93 && c <= 0.97);
}

static void test_coverage_heavy(void)
{
	struct sim t2 = { one_series, 1, SIM_T2, 0.02, 0, 0 };
	double c = coverage(&t2, 12, 2000, 4, NULL);
	printf("coverage Student-t(2) n=12: %.4f\n", c);
	CHECK(c >= 0.93 && c <= 0.98);      /* symmetric differences: the signed-rank level holds */
	struct sim outliers = { one_series, 1, SIM_OUTLIERS, 0.02, 0.10, 0 };
	c = coverage(&outliers, 12, 2000, 5, NULL);
	printf("coverage 10%% 3x outliers n=12: %.4f\n", c);
	CHECK(c >= 0.93 && c <= 0.98);
}

static void test_coverage_drift(void)
{
	/* 0.2% slower per side-run: over 12 pairs the machine loses ~5%; balanced AB/BA order turns
	 * the within-pair step into a symmetric +-0.2% term, so the interval still covers. */
	struct sim drift = { one_series, 1, SIM_NORMAL, 0.02, 0, -0.002 };
	double c = coverage(&drift, 12, 2000, 6, NULL);
	printf("coverage normal + drift n=12: %.4f\n", c);
	CHECK(c >= 0.93 && c <= 0.98);
}

static void test_bootstrap(void)
{
	double x[] = { 0.01, 0.03, 0.02, 0.05, 0.04, 0.02, 0.03, 0.06 };
	struct ab_interval a, b;
	CHECK(ab_stats_bootstrap_ci(&a, x, 8, AB_STAT_HODGES_LEHMANN, AB_BOOTSTRAP_BCA, 2000, 0.025, 7) == 0);
	CHECK(ab_stats_bootstrap_ci(&b, x, 8, AB_STAT_HODGES_LEHMANN, AB_BOOTSTRAP_BCA, 2000, 0.025, 7) == 0);
	CHECK(a.lo == b.lo && a.hi == b.hi);                    /* seeded: reproducible */
	CHECK(a.lo < 0.0325 && a.hi > 0.0325 && a.lo > 0.0 && a.hi < 0.07);
	CHECK(ab_stats_bootstrap_ci(&b, x, 8, AB_STAT_MEAN, AB_BOOTSTRAP_PERCENTILE, 2000, 0.025, 7) == 0);
	CHECK(b.lo < 0.0325 && b.hi > 0.0325);
	CHECK(ab_stats_bootstrap_ci(&b, x, 1, AB_STAT_MEAN, AB_BOOTSTRAP_PERCENTILE, 2000, 0.025, 7) ==
		AB_EINVALID);
	CHECK(ab_stats_bootstrap_ci(&b, x, 8, AB_STAT_MEAN, AB_BOOTSTRAP_PERCENTILE, 10, 0.025, 7) ==
		AB_EINVALID);

	/* Coverage at n = 12 (normal noise): bootstrap intervals are known to run below nominal at
	 * small n (they behave like z rather than t intervals); the asserted band is [0.88, 0.97]. */
	struct sim sim = { one_series, 1, SIM_NORMAL, 0.02, 0, 0 };
	struct ab_rng rng;
	struct ab_sample buf[2 * 12];
	double d[12], truth = log(1.05);
	int runs = 400, cover_bca = 0, cover_pct = 0;
	ab_rng_seed(&rng, 8);
	for (int r = 0; r < runs; r++) {
		sim_d(d, 12, &sim, &rng, buf);
		CHECK(ab_stats_bootstrap_ci(&a, d, 12, AB_STAT_HODGES_LEHMANN, AB_BOOTSTRAP_BCA, 1000,
			0.025, (uint64_t)r) == 0);
		CHECK(ab_stats_bootstrap_ci(&b, d, 12, AB_STAT_HODGES_LEHMANN, AB_BOOTSTRAP_PERCENTILE,
			1000, 0.025, (uint64_t)r) == 0);
		cover_bca += a.lo <= truth && truth <= a.hi;
		cover_pct += b.lo <= truth && truth <= b.hi;
	}
	printf("bootstrap coverage n=12 (%d runs, 1000 resamples): BCa %.3f, percentile %.3f\n", runs,
		(double)cover_bca / runs, (double)cover_pct / runs);
	CHECK((double)cover_bca / runs >= 0.88 && (double)cover_bca / runs <= 0.97);
	CHECK((double)cover_pct / runs >= 0.88 && (double)cover_pct / runs <= 0.97);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		{ "exact", test_exact },
		{ "location", test_location },
		{ "holm_wilson", test_holm_wilson },
		{ "rng", test_rng },
		{ "coverage_normal", test_coverage_normal },
		{ "coverage_heavy", test_coverage_heavy },
		{ "coverage_drift", test_coverage_drift },
		{ "bootstrap", test_bootstrap },
	};
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

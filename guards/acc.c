/*
 * acc.c - top-1 agreement, KL on the reference's support plus a tail bucket, per-side
 * summaries, the absolute and differential accuracy gates and the advisory greedy-agreement gate
 * (see acc.h).
 */
#include "acc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Probability mass below this is treated as zero when forming the tail buckets. */
#define TAIL_FLOOR 1e-12

double ab_acc_kl(const double *ref_lp, const double *sut_lp, int k)
{
	double kl = 0, p_sum = 0, q_sum = 0;
	if (ref_lp == NULL || sut_lp == NULL || k <= 0)
		return NAN;
	for (int i = 0; i < k; i++) {
		if (!isfinite(ref_lp[i]) || isnan(sut_lp[i]))
			return NAN;
		double p = exp(ref_lp[i]), q = exp(sut_lp[i]);
		p_sum += p;
		q_sum += q;
		if (p > 0)
			kl += p * (ref_lp[i] - (isfinite(sut_lp[i]) ? sut_lp[i] : -745.0));
	}
	double p_tail = 1.0 - p_sum, q_tail = 1.0 - q_sum;
	if (p_tail > TAIL_FLOOR)
		kl += p_tail * (log(p_tail) - log(q_tail > TAIL_FLOOR ? q_tail : TAIL_FLOOR));
	return kl > 0 ? kl : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int ab_acc_stats(struct ab_acc_stats *out, const int *agree, const double *kl, size_t n,
	double ci_level, uint64_t seed)
{
	double *sorted = NULL;
	double tail = (1.0 - ci_level) / 2;

	if (out == NULL || agree == NULL || kl == NULL || n == 0 || !(ci_level > 0 && ci_level < 1))
		return ab_error_setc(AB_EINVALID, "accuracy: no positions to summarise");
	memset(out, 0, sizeof(*out));
	out->n = (int)n;
	double kl_sum = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(kl[i]))
			return ab_error_setc(AB_EINVALID, "accuracy: KL at position %zu is not finite", i);
		out->agree += agree[i] != 0;
		kl_sum += kl[i];
	}
	out->top1 = (double)out->agree / (double)n;
	out->kl_mean = kl_sum / (double)n;
	if (ab_stats_wilson(&out->top1_ci, (size_t)out->agree, n, tail) < 0)
		return -1;
	if (n >= 2) {
		if (ab_stats_bootstrap_ci(&out->kl_ci, kl, n, AB_STAT_MEAN, AB_BOOTSTRAP_PERCENTILE, 2000, tail,
		                          seed) < 0)
			return -1;
	} else {
		out->kl_ci.lo = out->kl_ci.hi = out->kl_mean;
		out->kl_ci.level = 0;
	}
	if ((sorted = malloc(n * sizeof(double))) == NULL)
		return ab_error_set("accuracy: out of memory");
	memcpy(sorted, kl, n * sizeof(double));
	qsort(sorted, n, sizeof(double), cmp_double);
	out->kl_p99 = ab_stats_quantile_sorted(sorted, n, 0.99);
	out->kl_max = sorted[n - 1];
	free(sorted);
	return 0;
}

void ab_acc_policy_init(struct ab_acc_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->top1_min = 0.90;
	p->kl_max = 0.20;
	p->top1_drop_max = 0.01;
	p->kl_rise_max = 0.02;
	p->alpha = 0.05;
	p->n_differential = 2;
	p->bootstrap_resamples = 2000;
}

/* One-sided lower bound of the mean of x at level 1 - tail; the mean itself when x is constant. */
static int mean_lower_bound(double *out_mean, double *out_lo, const double *x, size_t n, double tail,
	int resamples, uint64_t seed)
{
	double sum = 0;
	int constant = 1;
	for (size_t i = 0; i < n; i++) {
		sum += x[i];
		constant &= x[i] == x[0];
	}
	*out_mean = sum / (double)n;
	if (constant || n < 2) {
		*out_lo = *out_mean;
		return 0;
	}
	struct ab_interval ci;
	if (ab_stats_bootstrap_ci(&ci, x, n, AB_STAT_MEAN, AB_BOOTSTRAP_PERCENTILE, resamples, tail, seed) < 0)
		return -1;
	*out_lo = ci.lo;
	return 0;
}

int ab_acc_diff(struct ab_acc_diff *out, const int *agree_base, const int *agree_head,
	const double *kl_base, const double *kl_head, size_t n, const struct ab_acc_policy *p)
{
	double *d = NULL;
	int error = -1;
	if (out == NULL || p == NULL || n == 0)
		return ab_error_setc(AB_EINVALID, "accuracy: no paired positions");
	memset(out, 0, sizeof(*out));
	out->n = (int)n;
	/* Two one-sided bounds per model; the family is split evenly (Bonferroni). */
	double tail = p->alpha / (p->n_differential > 0 ? p->n_differential : 1);
	if ((d = malloc(n * sizeof(double))) == NULL)
		return ab_error_set("accuracy: out of memory");
	for (size_t i = 0; i < n; i++)
		d[i] = (double)(agree_base[i] != 0) - (double)(agree_head[i] != 0);
	if (mean_lower_bound(&out->top1_drop, &out->top1_drop_lo, d, n, tail, p->bootstrap_resamples,
	                     p->seed) < 0)
		goto cleanup;
	for (size_t i = 0; i < n; i++)
		d[i] = kl_head[i] - kl_base[i];
	if (mean_lower_bound(&out->kl_rise, &out->kl_rise_lo, d, n, tail, p->bootstrap_resamples,
	                     p->seed ^ 0x9e3779b97f4a7c15ULL) < 0)
		goto cleanup;
	error = 0;
cleanup:
	free(d);
	return error;
}

static void gate_init(struct ab_gate_result *g, const char *name, const char *model, double value,
	double threshold, const char *op)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	snprintf(g->model, sizeof(g->model), "%s", model ? model : "");
	snprintf(g->op, sizeof(g->op), "%s", op);
	g->value = value;
	g->threshold = threshold;
}

size_t ab_acc_gates(struct ab_gate_result out[4], const char *model, const struct ab_acc_stats *base,
	const struct ab_acc_stats *head, const struct ab_acc_diff *diff, const struct ab_acc_policy *p)
{
	gate_init(&out[0], "top1", model, head->top1, p->top1_min, ">=");
	out[0].pass = head->top1 >= p->top1_min;
	snprintf(out[0].detail, sizeof(out[0].detail),
		"head %.4f (95%% CI %.4f-%.4f), base %.4f, %d positions vs the reference",
		head->top1, head->top1_ci.lo, head->top1_ci.hi, base->top1, head->n);

	gate_init(&out[1], "kl_mean", model, head->kl_mean, p->kl_max, "<=");
	out[1].pass = head->kl_mean <= p->kl_max;
	snprintf(out[1].detail, sizeof(out[1].detail),
		"head %.3g (95%% CI %.3g-%.3g, p99 %.3g, max %.3g), base %.3g, %d positions",
		head->kl_mean, head->kl_ci.lo, head->kl_ci.hi, head->kl_p99, head->kl_max, base->kl_mean, head->n);

	gate_init(&out[2], "top1_drop", model, diff->top1_drop, p->top1_drop_max, "<=");
	out[2].pass = !(diff->top1_drop_lo > p->top1_drop_max);
	snprintf(out[2].detail, sizeof(out[2].detail),
		"head agrees %+.4f less often than base (one-sided lower bound %.4f), %d paired positions",
		diff->top1_drop, diff->top1_drop_lo, diff->n);

	double kl_limit = p->kl_rise_max + p->kl_rise_rel * base->kl_mean;
	gate_init(&out[3], "kl_rise", model, diff->kl_rise, kl_limit, "<=");
	out[3].pass = !(diff->kl_rise_lo > kl_limit);
	if (p->kl_rise_rel > 0)
		snprintf(out[3].detail, sizeof(out[3].detail),
			"head mean KL %+.3g vs base %.3g (one-sided lower bound %+.3g; limit %.3g + %.3g x base), "
			"%d paired positions", diff->kl_rise, base->kl_mean, diff->kl_rise_lo, p->kl_rise_max,
			p->kl_rise_rel, diff->n);
	else
		snprintf(out[3].detail, sizeof(out[3].detail),
			"head mean KL %+.3g vs base (one-sided lower bound %.3g), %d paired positions",
			diff->kl_rise, diff->kl_rise_lo, diff->n);
	return 4;
}

void ab_acc_gate_error(struct ab_gate_result *out, const char *name, const char *model, const char *reason)
{
	gate_init(out, name, model, NAN, NAN, "");
	out->error = 1;
	snprintf(out->detail, sizeof(out->detail), "not measured: %s", reason ? reason : "unknown");
}

void ab_acc_greedy_gate(struct ab_gate_result *out, const char *model, int compared, int identical,
	int first_diff, int ctx, int pair)
{
	gate_init(out, "greedy_agreement", model, compared > 0 ? (double)identical / compared : NAN, 1.0, ">=");
	out->advisory = 1;
	out->pass = identical == compared;
	if (compared <= 0)
		snprintf(out->detail, sizeof(out->detail), "no decode request was answered by both sides");
	else if (first_diff < 0)
		snprintf(out->detail, sizeof(out->detail),
			"head's greedy tokens equal base's in all %d decode requests", compared);
	else
		snprintf(out->detail, sizeof(out->detail), "%d of %d decode requests identical; earliest "
			"divergence at generated token %d (ctx %d, pair %d)", identical, compared, first_diff, ctx, pair);
}

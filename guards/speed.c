/*
 * speed.c - speed decisions (see speed.h for the statistical design). Samples are grouped into
 * (model, metric, ctx) series, base and head paired by pair index within a batch, and each series
 * is summarised by the Hodges-Lehmann ratio, its displayed interval and the simultaneous
 * signed-rank interval the claims are read from. The plan (open / next look / confirmation batch)
 * follows from which claims are still undecided.
 */
#include "speed.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"

static const struct ab_speed_metric_rule default_rules[] = {
	{ AB_METRIC_DECODE, -1.0, 1, 0, 0, NULL, NULL, 0 },
	{ AB_METRIC_PREFILL, -1.0, 1, 0, 0, NULL, NULL, 0 },
	{ AB_METRIC_SPEC, -1.0, 1, 0, 0, NULL, NULL, 1 },
	{ AB_METRIC_TAU, -1.0, 1, 0.95, 1, NULL, "tau-regression", 1 },
	{ AB_METRIC_SPEC_SPEEDUP, -1.0, 0, 0, 1, NULL, NULL, 1 },
	{ AB_METRIC_FIRST_PREFILL, -1.0, 0, 0, 1, NULL, NULL, 0 },
};

void ab_speed_policy_init(struct ab_speed_policy *policy)
{
	static const double tiers[AB_TIER_COUNT] = { 0.02, 0.035, 0.06, 0.10, 0.18 };
	memset(policy, 0, sizeof(*policy));
	policy->margin = 0.01;
	policy->regression_ratio = 0.98;
	policy->alpha = 0.05;
	policy->ci_level = 0.95;
	memcpy(policy->tiers, tiers, sizeof(tiers));
	policy->method = AB_SPEED_WILCOXON;
	policy->bootstrap_resamples = 2000;
	policy->max_failed_fraction = 0.25;
	policy->pairs_min = 6;
	policy->pairs_max = 16;
	policy->looks = 3;
	policy->confirm_pairs = 6;
	policy->spending = AB_SPENDING_LINEAR;
	policy->equivalence_level = 0.90;
}

/* ---- grouping ---------------------------------------------------------------------------- */

struct key {
	const char *model;
	const char *metric;
	int ctx;
	int model_rank;
	int metric_rank;
};

static int metric_rank(const char *metric)
{
	static const char *const order[] = { AB_METRIC_DECODE, AB_METRIC_PREFILL, AB_METRIC_FIRST_PREFILL,
					     AB_METRIC_SPEC, AB_METRIC_TAU, AB_METRIC_SPEC_SPEEDUP };
	for (int i = 0; i < (int)(sizeof(order) / sizeof(order[0])); i++)
		if (strcmp(metric, order[i]) == 0)
			return i;
	return 6;
}

static int cmp_key(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	if (x->model_rank != y->model_rank)
		return x->model_rank - y->model_rank;
	if (x->metric_rank != y->metric_rank)
		return x->metric_rank - y->metric_rank;
	int c = strcmp(x->metric, y->metric);
	if (c)
		return c;
	return (x->ctx > y->ctx) - (x->ctx < y->ctx);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Sorted distinct pair indices of one batch; returns the count, -1 on allocation failure. */
static int batch_pairs(int **out, const struct ab_sample *samples, size_t n, int batch)
{
	int *pairs = malloc((n ? n : 1) * sizeof(*pairs));
	int count = 0;
	if (pairs == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (samples[i].batch == batch)
			pairs[count++] = samples[i].pair;
	qsort(pairs, (size_t)count, sizeof(*pairs), cmp_int);
	int unique = 0;
	for (int i = 0; i < count; i++)
		if (unique == 0 || pairs[unique - 1] != pairs[i])
			pairs[unique++] = pairs[i];
	*out = pairs;
	return unique;
}

static int pair_slot(const int *pairs, int n_pairs, int pair)
{
	const int *hit = bsearch(&pair, pairs, (size_t)n_pairs, sizeof(*pairs), cmp_int);
	return hit ? (int)(hit - pairs) : -1;
}

static int sample_valid(const struct ab_sample *s)
{
	return s->ok && isfinite(s->value) && s->value > 0.0;
}

const struct ab_speed_metric_rule *ab_speed_rule_find(const struct ab_speed_policy *policy,
	const char *metric)
{
	const struct ab_speed_metric_rule *rules = policy->rules ? policy->rules : default_rules;
	size_t n = policy->rules ? policy->n_rules : sizeof(default_rules) / sizeof(default_rules[0]);
	for (size_t i = 0; i < n; i++)
		if (rules[i].metric && strcmp(rules[i].metric, metric) == 0)
			return &rules[i];
	return NULL;
}

static uint64_t name_hash(const struct ab_speed_series *s)
{
	uint64_t h = 1469598103934665603ULL;    /* FNV-1a over model, metric, ctx */
	for (const char *p = s->model; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ 0xff) * 1099511628211ULL;
	for (const char *p = s->metric; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return ab_rng_mix(h ^ (uint64_t)(uint32_t)s->ctx);
}

/*
 * Valid log-ratios of one series in one batch. `d` has room for n_pairs values; *out_n receives
 * how many; side medians and failure counts go to the series sides when `sides` is set.
 */
static int collect_pairs(double *d, int *out_n, struct ab_speed_side sides[2],
	const struct ab_sample *samples, size_t n, int batch, const struct key *key,
	const int *pairs, int n_pairs, double *scratch_base, double *scratch_head)
{
	const struct ab_sample **slot[2] = { NULL, NULL };
	int error = AB_ERROR;
	for (int side = 0; side < 2; side++)
		if ((slot[side] = calloc((size_t)(n_pairs ? n_pairs : 1), sizeof(*slot[side]))) == NULL) {
			ab_error_set("speed: out of memory");
			goto cleanup;
		}
	int n_ok[2] = { 0, 0 };
	for (size_t i = 0; i < n; i++) {
		const struct ab_sample *s = &samples[i];
		if (s->batch != batch || s->ctx != key->ctx || strcmp(s->model, key->model) != 0 ||
		    strcmp(s->metric, key->metric) != 0)
			continue;
		int k = pair_slot(pairs, n_pairs, s->pair);
		if (k < 0)
			continue;
		if (slot[s->side][k]) {
			error = ab_error_setc(AB_EINVALID, "speed: two %s samples for %s %s ctx %d pair %d",
				s->side == AB_SIDE_BASE ? "base" : "head", s->model, s->metric, s->ctx, s->pair);
			goto cleanup;
		}
		slot[s->side][k] = s;
		if (sides) {
			if (sample_valid(s))
				(s->side == AB_SIDE_BASE ? scratch_base : scratch_head)[n_ok[s->side]++] = s->value;
			else
				sides[s->side].failed++;
		}
	}
	int m = 0;
	for (int k = 0; k < n_pairs; k++) {
		const struct ab_sample *b = slot[AB_SIDE_BASE][k], *h = slot[AB_SIDE_HEAD][k];
		if (b && h && sample_valid(b) && sample_valid(h))
			d[m++] = log(h->value / b->value);
	}
	if (sides) {
		for (int side = 0; side < 2; side++) {
			sides[side].n = n_ok[side];
			sides[side].median = NAN;
			if (n_ok[side] > 0 && ab_stats_median(&sides[side].median,
				side == AB_SIDE_BASE ? scratch_base : scratch_head, (size_t)n_ok[side]) != 0)
				goto cleanup;
		}
	}
	*out_n = m;
	error = 0;
cleanup:
	free(slot[0]);
	free(slot[1]);
	return error;
}

/* ---- per-series statistics --------------------------------------------------------------- */

static struct ab_interval exp_interval(struct ab_interval log_interval)
{
	struct ab_interval r = log_interval;
	r.lo = exp(log_interval.lo);        /* exp(-inf) = 0, exp(inf) = inf */
	r.hi = exp(log_interval.hi);
	return r;
}

static int series_stats(struct ab_speed_series *s, const double *d, int n,
	const struct ab_speed_policy *policy, double claim_tail)
{
	double *walsh = NULL;
	size_t count = 0;
	struct ab_interval ci, adj;
	int error;

	s->ratio = NAN;
	s->ci.lo = s->ci_adj.lo = 0.0;
	s->ci.hi = s->ci_adj.hi = INFINITY;
	s->ci.level = s->ci_adj.level = 1.0;
	s->ci_eq = s->ci;
	s->p_regression = 1.0;
	if (n == 0)
		return 0;
	if ((error = ab_stats_walsh(&walsh, &count, d, (size_t)n)) != 0)
		return error;
	double tail = (1.0 - policy->ci_level) / 2.0;
	s->ratio = exp(ab_stats_quantile_sorted(walsh, count, 0.5));
	if ((error = ab_stats_signed_rank_ci_walsh(&ci, walsh, (size_t)n, tail)) != 0 ||
	    (error = ab_stats_signed_rank_ci_walsh(&adj, walsh, (size_t)n, claim_tail)) != 0)
		goto cleanup;
	if (policy->method != AB_SPEED_WILCOXON && n >= 2) {
		enum ab_bootstrap_kind kind = policy->method == AB_SPEED_BOOTSTRAP_BCA ?
			AB_BOOTSTRAP_BCA : AB_BOOTSTRAP_PERCENTILE;
		if ((error = ab_stats_bootstrap_ci(&ci, d, (size_t)n, AB_STAT_HODGES_LEHMANN, kind,
			policy->bootstrap_resamples, tail, policy->seed ^ name_hash(s))) != 0)
			goto cleanup;
	}
	if ((error = ab_stats_signed_rank_p(&s->p_regression, d, (size_t)n,
		log(s->regression_ratio), AB_ALT_LESS)) != 0)
		goto cleanup;
	if (policy->equivalence_level > 0.0) {
		struct ab_interval eq;
		if ((error = ab_stats_signed_rank_ci_walsh(&eq, walsh, (size_t)n,
			(1.0 - policy->equivalence_level) / 2.0)) != 0)
			goto cleanup;
		s->ci_eq = exp_interval(eq);
	}
	s->ci = exp_interval(ci);
	s->ci_adj = exp_interval(adj);
cleanup:
	free(walsh);
	return error;
}

static enum ab_outcome outcome_of(const struct ab_speed_series *s)
{
	if (s->n_pairs == 0)
		return AB_OUTCOME_INCONCLUSIVE;
	if (s->ci.lo > 1.0 + s->margin)
		return AB_OUTCOME_IMPROVED;
	if (s->ci.hi < 1.0 - s->margin)
		return AB_OUTCOME_REGRESSED;
	if (s->ci.lo >= 1.0 - s->margin && s->ci.hi <= 1.0 + s->margin)
		return AB_OUTCOME_NEUTRAL;
	return AB_OUTCOME_INCONCLUSIVE;
}

static int even_up(int n)
{
	return n + (n & 1);
}

/* The alpha spent by the looks up to pairs n of a plan ending at `last` pairs with K looks. */
static double spent(const struct ab_speed_policy *p, int look, int looks, int n, int last)
{
	if (p->spending == AB_SPENDING_EQUAL)
		return p->alpha * look / looks;
	return p->alpha * (last > 0 && n < last ? (double)n / last : 1.0);
}

int ab_speed_pairs_needed(int *out_first, int *out_last, const struct ab_speed_policy *policy,
	size_t n_gating)
{
	if (!(policy->alpha > 0.0 && policy->alpha < 0.5) || policy->looks < 1)
		return ab_error_setc(AB_EINVALID, "speed policy: alpha %g, looks %d", policy->alpha,
			policy->looks);
	size_t m = n_gating ? n_gating : 1;
	int first = policy->pairs_min > 2 ? even_up(policy->pairs_min) : 2;
	for (;; first += 2) {      /* the first look's own tail must be reachable */
		int last = policy->pairs_max > first ? even_up(policy->pairs_max) : first;
		double tail = spent(policy, 1, policy->looks, policy->looks == 1 ? last : first, last) / (2.0 * (double)m);
		if (ab_stats_signed_rank_min_n(tail) <= first || first > 100000)
			break;
	}
	if (policy->pairs_min > first)
		first = policy->pairs_min;
	int last = policy->pairs_max > first ? policy->pairs_max : first;
	*out_first = first;
	if (out_last)
		*out_last = last;
	return 0;
}

static int validate(const struct ab_speed_policy *p, const struct ab_sample *samples, size_t n)
{
	if (!(p->alpha > 0.0 && p->alpha < 0.5) || !(p->ci_level > 0.5 && p->ci_level < 1.0) ||
	    !(p->regression_ratio > 0.0 && p->regression_ratio <= 1.0) || !(p->margin >= 0.0) ||
	    p->looks < 1 || p->pairs_min < 1 || p->confirm_pairs < 0 ||
	    !(p->equivalence_level == 0.0 || (p->equivalence_level > 0.5 && p->equivalence_level < 1.0)) ||
	    !(p->max_failed_fraction >= 0.0 && p->max_failed_fraction <= 1.0))
		return ab_error_setc(AB_EINVALID, "speed policy: invalid alpha, ci_level, "
			"regression_ratio, margin, looks, pairs or max_failed_fraction");
	for (int t = 0; t < AB_TIER_COUNT; t++)
		if (!(p->tiers[t] > 0.0) || (t > 0 && !(p->tiers[t] > p->tiers[t - 1])))
			return ab_error_setc(AB_EINVALID, "speed policy: tiers must be positive and increasing");
	if (p->method != AB_SPEED_WILCOXON && (p->bootstrap_resamples < 100 ||
	    p->bootstrap_resamples > 1000000))
		return ab_error_setc(AB_EINVALID, "speed policy: bootstrap_resamples %d",
			p->bootstrap_resamples);
	for (size_t i = 0; i < n; i++) {
		const struct ab_sample *s = &samples[i];
		if ((s->side != AB_SIDE_BASE && s->side != AB_SIDE_HEAD) || (s->batch != 0 && s->batch != 1) ||
		    s->pair < 0 || !memchr(s->model, 0, sizeof(s->model)) ||
		    !memchr(s->metric, 0, sizeof(s->metric)) || !memchr(s->reason, 0, sizeof(s->reason)))
			return ab_error_setc(AB_EINVALID, "speed: sample %zu has a bad side, batch, pair or "
				"unterminated name", i);
	}
	return 0;
}

/* ---- the result -------------------------------------------------------------------------- */

void ab_speed_result_free(struct ab_speed_result *result)
{
	if (result == NULL)
		return;
	free(result->series);
	free(result->models);
	free(result);
}

static int model_rank(const struct ab_speed_policy *policy, const char *model,
	const struct ab_sample *samples, size_t n)
{
	for (size_t i = 0; policy->models && i < policy->n_models; i++)
		if (policy->models[i] && strcmp(policy->models[i], model) == 0)
			return (int)i;
	for (size_t i = 0; i < n; i++)     /* unknown to the policy: after them, by first appearance */
		if (strcmp(samples[i].model, model) == 0)
			return (int)(policy->n_models + i);
	return (int)(policy->n_models + n);
}

static void failures_count(struct ab_speed_result *r, const struct ab_sample *samples, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct ab_failure_counts *f = &r->failures[samples[i].side];
		f->total++;
		if (sample_valid(&samples[i]))
			continue;
		f->failed++;
		const char *reason = samples[i].ok ? "invalid value" : samples[i].reason;
		f->by_kind[ab_failure_classify(reason)]++;
		if (f->example[0] == '\0')
			snprintf(f->example, sizeof(f->example), "%s", reason[0] ? reason : "no reason given");
	}
}

static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	if (len + 1 >= size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

static void failure_side_summary(char *buf, size_t size, const char *side,
	const struct ab_failure_counts *f)
{
	append(buf, size, "%s %d of %d samples failed", side, f->failed, f->total);
	if (f->failed == 0)
		return;
	const char *sep = " (";
	for (int k = 0; k < AB_FAILURE_KIND_COUNT; k++)
		if (f->by_kind[k]) {
			append(buf, size, "%s%d %s", sep, f->by_kind[k], ab_failure_kind_name(k));
			sep = ", ";
		}
	append(buf, size, "; e.g. \"%.80s\")", f->example);
}

static void build_method(struct ab_speed_result *r, const struct ab_speed_policy *p)
{
	char ci[96];
	int pct = (int)lround(p->ci_level * 100.0);
	if (p->method == AB_SPEED_WILCOXON)
		snprintf(ci, sizeof(ci), "%d%% Wilcoxon signed-rank intervals", pct);
	else
		snprintf(ci, sizeof(ci), "%d%% seeded %s bootstrap intervals (%d resamples)", pct,
			p->method == AB_SPEED_BOOTSTRAP_BCA ? "BCa" : "percentile", p->bootstrap_resamples);
	snprintf(r->method, sizeof(r->method),
		"Paired log-ratios per context, Hodges-Lehmann estimate with %s; REJECT (below %.2fx base) "
		"and tier claims read off simultaneous signed-rank bounds, Bonferroni over %zu gating "
		"series x 2 directions, alpha spent %s over %d look%s (family-wise alpha = %g)%s%s.", ci,
		p->regression_ratio, r->n_gating, p->spending == AB_SPENDING_EQUAL ? "equally" : "in proportion to the pairs",
		r->n_points, r->n_points == 1 ? "" : "s", p->alpha,
		p->equivalence_level > 0 ? "; a series stops as neutral once its equivalence interval lies "
		"between the floor and the next tier" : "",
		p->confirm_pairs > 0 ? ", and a regression must be confirmed by an independent batch" : "");
	size_t spec_gating = 0;
	const struct ab_speed_series *tau = NULL;
	for (size_t i = 0; i < r->n_series; i++) {
		spec_gating += r->series[i].spec && r->series[i].gating;
		if (tau == NULL && strcmp(r->series[i].metric, AB_METRIC_TAU) == 0)
			tau = &r->series[i];
	}
	if (spec_gating > 0) {
		size_t len = strlen(r->method);
		if (len > 0 && r->method[len - 1] == '.')
			r->method[len - 1] = '\0';
		append(r->method, sizeof(r->method), "; the family includes %zu speculative-decoding series "
			"(spec tok/s", spec_gating);
		if (tau)
			append(r->method, sizeof(r->method), " and accept length tau, whose floor is %.2fx base",
				tau->regression_ratio);
		append(r->method, sizeof(r->method), ")");
		append(r->method, sizeof(r->method), ".");
	}
}

/* The schedule of looks: K points from first to last, even, increasing. Returns how many. */
static int schedule(int *points, int looks, int first, int last)
{
	int count = 0;
	for (int i = 0; i < looks; i++) {
		int p = looks == 1 ? last : first + (int)lround((double)i * (last - first) / (looks - 1));
		p = even_up(p);
		if (p > even_up(last))
			p = even_up(last);
		if (count == 0 || p > points[count - 1])
			points[count++] = p;
	}
	return count;
}

/* Did a gating series lose more of its batch-0 pairs to failed samples than the policy allows? */
static int series_lost(const struct ab_speed_series *s, const struct ab_speed_policy *p)
{
	return s->gating && s->pairs > 0 &&
		(double)(s->pairs - s->n_pairs) > p->max_failed_fraction * s->pairs;
}

/* The claims an interval supports: below the floor, or a verified tier; made at `look`. */
static void claims_of(struct ab_speed_series *s, struct ab_interval adj, int look)
{
	s->regression = adj.hi < s->regression_ratio;
	for (int t = AB_TIER_COUNT - 1; t >= 0 && !s->no_tier; t--)
		if (adj.lo >= 1.0 + s->tiers[t]) {
			s->tier = t;
			break;
		}
	if (s->regression || s->tier >= 0)
		s->claim_look = look;
}

/* May more batch-0 pairs still change a claim of series s, given the verdict tier so far? Each
 * claim is settled by making it, by the claim interval leaving no room for it, or by the
 * equivalence interval lying on the safe side of its threshold (speed.h). Sets s->equivalent. */
static int series_open(struct ab_speed_series *s, int tier)
{
	if (!s->gating)
		return 0;
	double rho = s->regression_ratio;
	int floor_open = !s->regression && s->ci_adj.lo < rho && s->ci_adj.hi >= rho && !(s->ci_eq.lo > rho);
	int tier_open = 0, tier_settled_eq = s->no_tier || tier + 1 >= AB_TIER_COUNT;
	if (!s->no_tier && tier + 1 < AB_TIER_COUNT) {
		double next = 1.0 + s->tiers[tier + 1];
		tier_settled_eq = s->ci_eq.hi < next;
		tier_open = s->ci_adj.hi >= next && s->ci_adj.lo < next && !tier_settled_eq;
	}
	s->equivalent = !s->regression && s->tier < 0 && s->ci_eq.lo > rho && tier_settled_eq;
	return floor_open || tier_open;
}

static int evaluate_confirmation(struct ab_speed_result *r, const struct ab_speed_policy *policy,
	const struct ab_sample *samples, size_t n, struct key *keys, const int *pairs1, int n_pairs1,
	double *d)
{
	int flagged = 0;
	for (size_t i = 0; i < r->n_series; i++)
		flagged += r->series[i].regression;
	double confirm_tail = policy->alpha / (flagged ? flagged : 1);
	for (size_t i = 0; i < r->n_series; i++) {
		struct ab_speed_series *s = &r->series[i];
		if (!s->regression)
			continue;
		int m = 0, error;
		if ((error = collect_pairs(d, &m, NULL, samples, n, 1, &keys[i], pairs1, n_pairs1,
			NULL, NULL)) != 0)
			return error;
		s->confirm.tested = 1;
		s->confirm.n_pairs = m;
		s->confirm.ratio = NAN;
		s->confirm.hi = INFINITY;
		if (m > 0) {
			struct ab_interval bound;
			double hl;
			if ((error = ab_stats_hodges_lehmann(&hl, d, (size_t)m)) != 0 ||
			    (error = ab_stats_signed_rank_ci(&bound, d, (size_t)m, confirm_tail)) != 0)
				return error;
			s->confirm.ratio = exp(hl);
			s->confirm.hi = exp(bound.hi);
		}
		s->confirm.confirmed = s->confirm.hi < s->regression_ratio;
		s->confirmed = s->confirm.confirmed;
		if (m < n_pairs1 && (double)(n_pairs1 - m) > policy->max_failed_fraction * n_pairs1) {
			r->infra = 1;
			snprintf(r->infra_reason, sizeof(r->infra_reason), "%s %s at ctx %d lost %d of %d "
				"confirmation pairs to failed samples", s->model, ab_speed_metric_short(s->metric),
				s->ctx, n_pairs1 - m, n_pairs1);
		}
	}
	return 0;
}

int ab_speed_decide(struct ab_speed_result **out, const struct ab_sample *samples, size_t n_samples,
	const struct ab_speed_policy *policy)
{
	struct ab_speed_result *r = NULL;
	struct key *keys = NULL;
	int *pairs0 = NULL, *pairs1 = NULL;
	double *d = NULL, *scratch_base = NULL, *scratch_head = NULL;
	size_t n_keys = 0;
	int error;

	if ((error = validate(policy, samples, n_samples)) != 0)
		return error;
	error = AB_ERROR;
	if ((r = calloc(1, sizeof(*r))) == NULL || (keys = calloc(n_samples + 1, sizeof(*keys))) == NULL)
		goto oom;
	int n_pairs0 = batch_pairs(&pairs0, samples, n_samples, 0);
	int n_pairs1 = batch_pairs(&pairs1, samples, n_samples, 1);
	if (n_pairs0 < 0 || n_pairs1 < 0)
		goto oom;
	size_t biggest = (size_t)(n_pairs0 > n_pairs1 ? n_pairs0 : n_pairs1) + 1;
	if ((d = malloc(biggest * sizeof(*d))) == NULL ||
	    (scratch_base = malloc((n_samples + 1) * sizeof(double))) == NULL ||
	    (scratch_head = malloc((n_samples + 1) * sizeof(double))) == NULL)
		goto oom;

	/* Distinct series (quadratic in series count, which is tens). */
	for (size_t i = 0; i < n_samples; i++) {
		const struct ab_sample *s = &samples[i];
		size_t k;
		for (k = 0; k < n_keys; k++)
			if (keys[k].ctx == s->ctx && strcmp(keys[k].model, s->model) == 0 &&
			    strcmp(keys[k].metric, s->metric) == 0)
				break;
		if (k < n_keys)
			continue;
		keys[n_keys].model = s->model;
		keys[n_keys].metric = s->metric;
		keys[n_keys].ctx = s->ctx;
		keys[n_keys].model_rank = model_rank(policy, s->model, samples, n_samples);
		keys[n_keys].metric_rank = metric_rank(s->metric);
		n_keys++;
	}
	qsort(keys, n_keys, sizeof(*keys), cmp_key);
	if ((r->series = calloc(n_keys + 1, sizeof(*r->series))) == NULL ||
	    (r->models = calloc(n_keys + 1, sizeof(*r->models))) == NULL)
		goto oom;
	r->n_series = n_keys;

	/* Models in rank order; the first is the primary one (unprefixed labels). */
	for (size_t k = 0; k < n_keys; k++) {
		if (r->n_models && strcmp(r->models[r->n_models - 1].name, keys[k].model) == 0)
			continue;
		struct ab_speed_model *m = &r->models[r->n_models++];
		snprintf(m->name, sizeof(m->name), "%s", keys[k].model);
		m->tier = -1;
		m->spec_tier = -1;
	}

	for (size_t k = 0; k < n_keys; k++) {
		struct ab_speed_series *s = &r->series[k];
		const struct ab_speed_metric_rule *rule = ab_speed_rule_find(policy, keys[k].metric);
		snprintf(s->model, sizeof(s->model), "%s", keys[k].model);
		snprintf(s->metric, sizeof(s->metric), "%s", keys[k].metric);
		s->ctx = keys[k].ctx;
		s->gating = rule ? rule->gating : 0;
		s->spec = rule ? rule->spec : 0;
		s->no_tier = rule ? rule->no_tier : 0;
		s->margin = rule && rule->margin >= 0.0 ? rule->margin : policy->margin;
		s->regression_ratio = rule && rule->regression_ratio > 0.0 ? rule->regression_ratio :
			policy->regression_ratio;
		memcpy(s->tiers, rule && rule->tiers ? rule->tiers : policy->tiers, sizeof(s->tiers));
		s->tier = -1;
		r->n_gating += (size_t)s->gating;
		r->n_spec += (size_t)s->spec;
		if (s->gating && rule && rule->label)
			snprintf(s->label, sizeof(s->label), "%s", rule->label);
		else if (s->gating)
			ab_speed_regression_label(s->label, sizeof(s->label), s->model,
				strcmp(s->model, r->models[0].name) == 0, s->metric, s->ctx);
	}
	r->looks = policy->looks;
	r->regression_ratio = policy->regression_ratio;
	r->alpha = policy->alpha;
	r->equivalence_level = policy->equivalence_level;
	memcpy(r->tiers, policy->tiers, sizeof(r->tiers));
	if ((error = ab_speed_pairs_needed(&r->pairs_min, &r->pairs_max, policy, r->n_gating)) != 0)
		goto cleanup;
	/* The looks and the alpha each may spend (speed.h): tail_k = alpha_k / (2 m). */
	r->n_points = schedule(r->points, policy->looks < AB_SPEED_LOOKS_MAX ? policy->looks : AB_SPEED_LOOKS_MAX,
		r->pairs_min, r->pairs_max);
	double m2 = 2.0 * (double)(r->n_gating ? r->n_gating : 1), before = 0.0;
	int last_point = r->points[r->n_points - 1];
	for (int i = 0; i < r->n_points; i++) {
		double upto = i == r->n_points - 1 ? policy->alpha :
			spent(policy, i + 1, r->n_points, r->points[i], last_point);
		r->tails[i] = (upto - before) / m2;
		before = upto;
	}
	r->look = 0;
	for (int i = 0; i < r->n_points; i++)
		if (n_pairs0 >= r->points[i])
			r->look = i + 1;
	r->claim_tail = r->tails[r->look > 0 ? r->look - 1 : 0];
	r->pairs = n_pairs0;
	r->confirm_pairs_seen = n_pairs1;
	r->tier = -1;
	r->spec_tier = -1;
	failures_count(r, samples, n_samples);

	/* Batch 0: every series, its statistics and claims. */
	for (size_t k = 0; k < n_keys; k++) {
		struct ab_speed_series *s = &r->series[k];
		int m = 0;
		struct ab_speed_side sides[2];
		memset(sides, 0, sizeof(sides));
		if ((error = collect_pairs(d, &m, sides, samples, n_samples, 0, &keys[k], pairs0, n_pairs0,
			scratch_base, scratch_head)) != 0 ||
		    (error = series_stats(s, d, m, policy, r->claim_tail)) != 0)
			goto cleanup;
		s->base = sides[AB_SIDE_BASE];
		s->head = sides[AB_SIDE_HEAD];
		s->pairs = n_pairs0;
		s->n_pairs = m;
		s->outcome = outcome_of(s);
		double scale = policy->alpha / r->claim_tail;
		s->p_adj = s->p_regression * scale > 1.0 ? 1.0 : s->p_regression * scale;
		if (!s->gating)
			continue;
		claims_of(s, s->ci_adj, r->look);
		/* A claim made at an earlier look stands: the pairs of that look, its own tail. */
		for (int j = 0; j + 1 < r->look; j++) {
			struct ab_speed_series past = *s;
			int mj = 0;
			if ((error = collect_pairs(d, &mj, NULL, samples, n_samples, 0, &keys[k], pairs0, r->points[j],
				NULL, NULL)) != 0 || (error = series_stats(&past, d, mj, policy, r->tails[j])) != 0)
				goto cleanup;
			past.regression = 0;
			past.tier = -1;
			claims_of(&past, past.ci_adj, j + 1);
			if (past.regression && !s->regression) {
				s->regression = 1;
				s->claim_look = j + 1;
			}
			if (past.tier > s->tier) {
				s->tier = past.tier;
				s->claim_look = j + 1;
			}
		}
		if (s->tier > r->tier)
			r->tier = s->tier;
		if (s->spec && s->tier > r->spec_tier)
			r->spec_tier = s->tier;
		r->regression |= s->regression;
		if (series_lost(s, policy) && !r->infra) {
			r->infra = 1;
			snprintf(r->infra_reason, sizeof(r->infra_reason), "%s %s at ctx %d lost %d of %d "
				"pairs to failed samples: ", s->model, ab_speed_metric_short(s->metric), s->ctx,
				s->pairs - s->n_pairs, s->pairs);
			failure_side_summary(r->infra_reason, sizeof(r->infra_reason), "base",
				&r->failures[AB_SIDE_BASE]);
			append(r->infra_reason, sizeof(r->infra_reason), "; ");
			failure_side_summary(r->infra_reason, sizeof(r->infra_reason), "head",
				&r->failures[AB_SIDE_HEAD]);
		}
	}

	/* The plan: the looks of batch 0, then the confirmation batch. */
	int *points = r->points, n_points = r->n_points;
	int main_open = 0, undecided = 0;
	for (size_t k = 0; k < n_keys; k++)     /* every series: sets its equivalence mark too */
		if (series_open(&r->series[k], r->series[k].spec ? r->spec_tier : r->tier) && !undecided++)
			snprintf(r->open_reason, sizeof(r->open_reason), "%s %s at ctx %d is undecided",
				r->series[k].model, ab_speed_metric_short(r->series[k].metric), r->series[k].ctx);
	if (r->infra) {
		main_open = 0;
	} else if (r->look == 0) {
		main_open = 1;
		snprintf(r->open_reason, sizeof(r->open_reason), "first look at %d pairs", points[0]);
	} else if (r->look < n_points && !r->regression) {
		/* Between looks (progress calls) the plan still names the next look: stopping for
		 * equivalence is judged at the looks only, as the schedule fixed in advance says. */
		main_open = undecided > 0 || n_pairs0 > points[r->look - 1];
	}
	if (main_open) {
		r->open = 1;
		r->next_batch = 0;
		r->next_pairs = points[r->look];
	} else if (r->regression && !r->infra && policy->confirm_pairs > 0) {
		int flagged = 0;
		for (size_t k = 0; k < n_keys; k++)
			flagged += r->series[k].regression;
		int feasible = even_up(ab_stats_signed_rank_min_n(policy->alpha / flagged));
		r->confirm_pairs = even_up(policy->confirm_pairs > feasible ? policy->confirm_pairs : feasible);
		if (n_pairs1 < r->confirm_pairs) {
			r->open = 1;
			r->next_batch = 1;
			r->next_pairs = r->confirm_pairs;
			snprintf(r->open_reason, sizeof(r->open_reason),
				"confirming %d regression(s) with an independent batch", flagged);
		} else if ((error = evaluate_confirmation(r, policy, samples, n_samples, keys, pairs1,
			n_pairs1, d)) != 0) {
			goto cleanup;
		}
	} else if (policy->confirm_pairs <= 0) {
		/* No confirmation configured: a flagged regression stands on its own. With one configured
		 * but the run cut short by infra trouble, nothing is confirmed: the verdict is then an
		 * infra error (re-run), never a REJECT the design did not allow. */
		for (size_t k = 0; k < n_keys; k++)
			r->series[k].confirmed = r->series[k].regression;
	}

	for (size_t k = 0; k < n_keys; k++) {
		const struct ab_speed_series *s = &r->series[k];
		struct ab_speed_model *m = r->models;
		while (strcmp(m->name, s->model) != 0)
			m++;
		if (s->tier > m->tier)
			m->tier = s->tier;
		if (s->spec && s->tier > m->spec_tier)
			m->spec_tier = s->tier;
		if (s->confirmed && !r->open) {
			m->reject = 1;
			r->reject = 1;
			m->spec_reject |= s->spec;
			r->spec_reject |= s->spec;
		}
		if (series_lost(s, policy)) {
			m->infra = 1;
			m->spec_infra |= s->spec;
			r->spec_infra |= s->spec;
		}
	}
	build_method(r, policy);
	*out = r;
	r = NULL;
	error = 0;
	goto cleanup;
oom:
	error = ab_error_set("speed: out of memory");
cleanup:
	ab_speed_result_free(r);
	free(keys);
	free(pairs0);
	free(pairs1);
	free(d);
	free(scratch_base);
	free(scratch_head);
	return error;
}

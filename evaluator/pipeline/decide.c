/*
 * decide.c - the suite's speed decision procedure (see decide.h): the guards' defaults, overridden
 * by the suite's speed keys, tiers and spec floors.
 */
#include "decide.h"

#include <string.h>

void ab_decide_from_suite(struct ab_decide *out, const struct ab_suite *s, uint64_t seed, int pairs_min,
	int pairs_max)
{
	struct ab_speed_policy *p = &out->speed;
	ab_speed_policy_init(p);
	p->margin = s->speed.margin;
	p->regression_ratio = s->speed.regression_ratio;
	p->alpha = s->speed.alpha;
	p->method = s->speed.method == AB_SUITE_METHOD_BOOTSTRAP ? AB_SPEED_BOOTSTRAP_BCA : AB_SPEED_WILCOXON;
	p->seed = seed;
	p->max_failed_fraction = s->speed.max_failed_fraction;
	p->pairs_min = pairs_min > 0 ? pairs_min : s->speed.pairs_min;
	p->pairs_max = pairs_max > 0 ? pairs_max : s->speed.pairs_max;
	if (p->pairs_max < p->pairs_min)
		p->pairs_max = p->pairs_min;
	p->confirm_pairs = s->speed.confirm_pairs;
	p->equivalence_level = s->speed.equivalence_level;
	for (int t = 0; t < AB_TIER_COUNT && t < AB_SUITE_TIER_COUNT; t++)
		p->tiers[t] = s->tiers[t].min_gain;
	for (int m = 0; m < s->model_count; m++)
		out->model_names[m] = s->models[m].name;
	p->models = out->model_names;
	p->n_models = (size_t)s->model_count;
	/* The speed rules with the suite's spec floors and tiers (speed.h documents the defaults). */
	for (int t = 0; t < AB_TIER_COUNT && t < AB_SUITE_TIER_COUNT; t++)
		out->spec_tiers[t] = s->spec.tiers[t].min_gain;
	const struct ab_speed_metric_rule rules[] = {
		{ AB_METRIC_DECODE, -1.0, 1, 0, 0, NULL, NULL, 0 },
		{ AB_METRIC_PREFILL, -1.0, 1, 0, 0, NULL, NULL, 0 },
		{ AB_METRIC_SPEC, -1.0, 1, s->spec.regression_ratio, 0, out->spec_tiers, NULL, 1 },
		{ AB_METRIC_TAU, -1.0, 1, s->spec.tau_floor_ratio, 1, NULL, "tau-regression", 1 },
		{ AB_METRIC_SPEC_SPEEDUP, -1.0, 0, 0, 1, NULL, NULL, 1 },
		{ AB_METRIC_FIRST_PREFILL, -1.0, s->speed.gate_first_request, 0, 1, NULL, NULL, 0 },
	};
	memcpy(out->rules, rules, sizeof(rules));
	p->rules = out->rules;
	p->n_rules = sizeof(rules) / sizeof(rules[0]);
}


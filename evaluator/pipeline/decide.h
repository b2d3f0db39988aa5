/*
 * decide.h - the speed decision procedure a suite asks for (guards/speed.h's policy and per-metric
 * rules, filled from the suite's speed, spec and tiers sections). The evaluation and the calibration
 * decide with the same one, so a calibration describes the gate that evaluations run.
 */
#ifndef AB_DECIDE_H
#define AB_DECIDE_H

#include <stdint.h>

#include "speed.h"
#include "suite.h"

#define AB_DECIDE_RULES 6

/* The policy and the storage its pointers refer to: keep the struct alive while the policy is used,
 * and do not copy it (policy.rules and policy.models point into it). */
struct ab_decide {
	struct ab_speed_policy speed;
	struct ab_speed_metric_rule rules[AB_DECIDE_RULES];
	double spec_tiers[AB_TIER_COUNT];
	const char *model_names[AB_SUITE_MODELS_MAX];  /* borrowed from the suite */
};

/* Fills *out from `suite` (borrowed; must outlive *out). pairs_min / pairs_max > 0 override the
 * suite's; seed seeds the bootstrap. */
void ab_decide_from_suite(struct ab_decide *out, const struct ab_suite *suite, uint64_t seed, int pairs_min,
	int pairs_max);

#endif

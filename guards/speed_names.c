/*
 * speed_names.c - the names the speed guard gives things (see speed.h): outcomes, tiers, failure
 * kinds (and the keyword classifier that maps a failure reason to one), context names and the
 * regression labels, which must fit GitHub's 50 characters and stay distinct per context.
 */
#include "speed.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const tier_names[AB_TIER_COUNT] = { "XS", "S", "M", "L", "XL" };

const char *ab_outcome_name(enum ab_outcome outcome)
{
	switch (outcome) {
	case AB_OUTCOME_NEUTRAL: return "neutral";
	case AB_OUTCOME_IMPROVED: return "improved";
	case AB_OUTCOME_REGRESSED: return "regressed";
	default: return "inconclusive";
	}
}

const char *ab_tier_name(int tier)
{
	return tier >= 0 && tier < AB_TIER_COUNT ? tier_names[tier] : "none";
}

int ab_tier_from_name(const char *name)
{
	for (int i = 0; name && i < AB_TIER_COUNT; i++)
		if (strcmp(name, tier_names[i]) == 0)
			return i;
	return -1;
}

const char *ab_failure_kind_name(enum ab_failure_kind kind)
{
	static const char *const names[] = { "crash", "timeout", "oom", "protocol", "other" };
	return kind >= 0 && kind < AB_FAILURE_KIND_COUNT ? names[kind] : "other";
}

static int contains_ci(const char *haystack, const char *needle)
{
	size_t n = strlen(needle);
	for (const char *p = haystack; *p; p++)
		if (strncasecmp(p, needle, n) == 0)
			return 1;
	return 0;
}

enum ab_failure_kind ab_failure_classify(const char *reason)
{
	static const char *const oom[] = { "out of memory", "oom", "cudaErrorMemoryAllocation", NULL };
	static const char *const timeout[] = { "timeout", "timed out", "hang", NULL };
	static const char *const protocol[] = { "protocol", "malformed", "garbage", "parse", "invalid", NULL };
	static const char *const crash[] = { "signal", "crash", "exit", "abort", "killed", "segfault", NULL };
	static const struct { const char *const *words; enum ab_failure_kind kind; } table[] = {
		{ oom, AB_FAILURE_OOM }, { timeout, AB_FAILURE_TIMEOUT },
		{ protocol, AB_FAILURE_PROTOCOL }, { crash, AB_FAILURE_CRASH },
	};
	if (reason == NULL)
		return AB_FAILURE_OTHER;
	for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++)
		for (const char *const *w = table[t].words; *w; w++)
			if (contains_ci(reason, *w))
				return table[t].kind;
	return AB_FAILURE_OTHER;
}

void ab_speed_ctx_name(char *buf, size_t size, int ctx)
{
	if (ctx > 0 && ctx % 1024 == 0)
		snprintf(buf, size, "%dk", ctx / 1024);
	else
		snprintf(buf, size, "%d", ctx);
}

const char *ab_speed_metric_short(const char *metric)
{
	if (strcmp(metric, "decode_tps") == 0)
		return "decode";
	if (strcmp(metric, "prefill_tps") == 0)
		return "prefill";
	if (strcmp(metric, AB_METRIC_SPEC) == 0)
		return "spec decode";
	if (strcmp(metric, AB_METRIC_TAU) == 0)
		return "tau";
	if (strcmp(metric, AB_METRIC_SPEC_SPEEDUP) == 0)
		return "spec speedup";
	if (strcmp(metric, AB_METRIC_FIRST_PREFILL) == 0)
		return "first prefill";
	return metric;
}

static void label_sanitize(char *s)
{
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '-'))
			*s = '-';
}

void ab_speed_regression_label(char *buf, size_t size, const char *model, int primary,
	const char *metric, int ctx)
{
	char ctx_name[32], model_part[80] = "", suffix[48] = "";
	ab_speed_ctx_name(ctx_name, sizeof(ctx_name), ctx);
	if (strcmp(metric, "prefill_tps") == 0) {
		snprintf(suffix, sizeof(suffix), "-pp");
	} else if (strcmp(metric, AB_METRIC_SPEC) == 0) {
		char plain[24];
		ab_speed_ctx_name(plain, sizeof(plain), ctx);
		snprintf(ctx_name, sizeof(ctx_name), "spec-%.24s", plain);
	} else if (strcmp(metric, "decode_tps") != 0) {
		snprintf(suffix, sizeof(suffix), "-%.31s", metric);
	}
	/* GitHub allows 50 characters: cut the model name first, so that the labels of one model's
	 * contexts stay distinct. */
	int model_max = 50 - (int)(strlen("regression--") + strlen(ctx_name) + strlen(suffix));
	if (!primary && model_max > 0)
		snprintf(model_part, sizeof(model_part), "%.*s-", model_max < 63 ? model_max : 63, model);
	char label[200];
	snprintf(label, sizeof(label), "regression-%s%s%s", model_part, ctx_name, suffix);
	label_sanitize(label);
	label[50] = '\0';               /* only a very long metric name is still cut here */
	snprintf(buf, size, "%s", label);
}


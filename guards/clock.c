/*
 * clock.c - the engine-clock cross-check (see clock.h): per (model, metric, ctx) and side, the
 * median ratio of the harness interval to the engine's own figure for the same interval.
 */
#include "clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "speed.h"
#include "stats.h"

static int checked_metric(const char *metric)
{
	return strcmp(metric, AB_METRIC_DECODE) == 0 || strcmp(metric, AB_METRIC_PREFILL) == 0 ||
		strcmp(metric, AB_METRIC_SPEC) == 0;
}

static int has_figures(const struct ab_sample *s)
{
	return s->ok && checked_metric(s->metric) && isfinite(s->harness_ms) && s->harness_ms > 0 &&
		isfinite(s->engine_ms) && s->engine_ms > 0;
}

void ab_clock_check_free(struct ab_clock_check *check)
{
	if (check == NULL)
		return;
	free(check->series);
	free(check);
}

int ab_clock_check(struct ab_clock_check **out, const struct ab_sample *samples, size_t n, double threshold)
{
	struct ab_clock_check *c = NULL;
	double *ratios = NULL;
	int error = AB_ERROR;

	if (!(threshold > 1.0))
		return ab_error_setc(AB_EINVALID, "clock: threshold %g must be above 1", threshold);
	if ((c = calloc(1, sizeof(*c))) == NULL || (c->series = calloc(n + 1, sizeof(*c->series))) == NULL ||
	    (ratios = malloc((n + 1) * sizeof(*ratios))) == NULL)
		goto oom;
	c->threshold = threshold;
	c->worst = NAN;
	for (size_t i = 0; i < n; i++) {     /* distinct series, in order of appearance */
		const struct ab_sample *s = &samples[i];
		if (!has_figures(s))
			continue;
		size_t k;
		for (k = 0; k < c->n_series; k++)
			if (c->series[k].ctx == s->ctx && strcmp(c->series[k].model, s->model) == 0 &&
			    strcmp(c->series[k].metric, s->metric) == 0)
				break;
		if (k < c->n_series)
			continue;
		struct ab_clock_series *cs = &c->series[c->n_series++];
		snprintf(cs->model, sizeof(cs->model), "%.*s", (int)sizeof(s->model) - 1, s->model);
		snprintf(cs->metric, sizeof(cs->metric), "%.*s", (int)sizeof(s->metric) - 1, s->metric);
		cs->ctx = s->ctx;
	}
	for (size_t k = 0; k < c->n_series; k++) {
		struct ab_clock_series *cs = &c->series[k];
		for (int side = 0; side < 2; side++) {
			size_t m = 0;
			for (size_t i = 0; i < n; i++) {
				const struct ab_sample *s = &samples[i];
				if (s->side == side && s->ctx == cs->ctx && has_figures(s) &&
				    strcmp(s->model, cs->model) == 0 && strcmp(s->metric, cs->metric) == 0)
					ratios[m++] = s->harness_ms / s->engine_ms;
			}
			cs->n[side] = (int)m;
			cs->ratio[side] = NAN;
			if (m > 0 && ab_stats_median(&cs->ratio[side], ratios, m) != 0)
				goto cleanup;
			if (!isfinite(cs->ratio[side]))
				continue;
			if (cs->ratio[side] >= threshold)
				cs->flagged = 1;
			if (!(cs->ratio[side] <= c->worst)) {
				c->worst = cs->ratio[side];
				snprintf(c->worst_where, sizeof(c->worst_where), "%s %.60s %s at ctx %d: the engine's "
					"stats claim %.2fx the harness's rate", side ? "head" : "base", cs->model,
					ab_speed_metric_short(cs->metric), cs->ctx, cs->ratio[side]);
			}
		}
		c->flagged |= cs->flagged;
	}
	*out = c;
	c = NULL;
	error = 0;
	goto cleanup;
oom:
	ab_error_set("clock: out of memory");
cleanup:
	ab_clock_check_free(c);
	free(ratios);
	return error;
}

int ab_clock_gate(struct ab_gate_result *out, const struct ab_clock_check *check, const char *model)
{
	double worst = NAN;
	int flagged = 0, series = 0;
	const struct ab_clock_series *at = NULL;
	int at_side = 0;
	for (size_t k = 0; k < check->n_series; k++) {
		const struct ab_clock_series *cs = &check->series[k];
		if (strcmp(cs->model, model) != 0)
			continue;
		series++;
		flagged |= cs->flagged;
		for (int side = 0; side < 2; side++)
			if (isfinite(cs->ratio[side]) && !(cs->ratio[side] <= worst)) {
				worst = cs->ratio[side];
				at = cs;
				at_side = side;
			}
	}
	if (series == 0 || at == NULL)
		return 0;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "engine_clock");
	snprintf(out->model, sizeof(out->model), "%s", model);
	out->value = worst;
	out->threshold = check->threshold;
	snprintf(out->op, sizeof(out->op), "<");
	out->advisory = 1;
	out->pass = !flagged;
	snprintf(out->detail, sizeof(out->detail), "%s%s %s at ctx %d: the engine's own stats claim %.2fx the "
		"rate the harness measured (median over %d samples; threshold %.2fx); the harness figure is "
		"what is gated", flagged ? AB_CLOCK_WARNING ": " : "", at_side ? "head" : "base",
		ab_speed_metric_short(at->metric), at->ctx, worst, at->n[at_side], check->threshold);
	return 1;
}

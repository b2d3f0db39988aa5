/*
 * sim.h - simulated A/B measurements for the guards tests: series of paired samples with a known
 * head/base ratio, normal, Student-t (2 df) or outlier-contaminated noise, slow linear drift over
 * time, and balanced random AB/BA order (as the scheduler runs them).
 */
#ifndef AB_TEST_SIM_H
#define AB_TEST_SIM_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sample.h"
#include "stats.h"

enum sim_noise {
	SIM_NORMAL = 0,     /* log-value ~ N(0, sigma) */
	SIM_T2 = 1,         /* sigma * Student-t with 2 degrees of freedom */
	SIM_OUTLIERS = 2    /* normal, and with probability outlier_p the run is 3x slower */
};

struct sim_series {
	const char *model;
	const char *metric;
	int ctx;
	double ratio;       /* true head/base ratio */
};

struct sim {
	const struct sim_series *series;
	int n_series;
	enum sim_noise noise;
	double sigma;       /* per-sample log noise (0.02: 2%) */
	double outlier_p;
	double drift;       /* relative change of the machine's speed per side-run (0.001 = 0.1%) */
};

static double sim_noise(const struct sim *sim, struct ab_rng *rng)
{
	double z = ab_rng_normal(rng);
	if (sim->noise == SIM_T2) {
		double u = 1.0 - ab_rng_uniform(rng);
		return sim->sigma * z / sqrt(-log(u));   /* chi2(2)/2 = -ln U */
	}
	double e = sim->sigma * z;
	if (sim->noise == SIM_OUTLIERS && ab_rng_uniform(rng) < sim->outlier_p)
		e -= log(3.0);
	return e;
}

/*
 * Appends pairs [pair_from, pair_to) of batch `batch` to out (room for the caller to size:
 * 2 * n_series per pair) and returns the new count. Orders come in blocks of two pairs, one AB and
 * one BA in random sequence. Side-run time (for drift) is 2 * pair + position.
 */
static size_t sim_pairs(struct ab_sample *out, size_t count, const struct sim *sim,
	struct ab_rng *rng, int pair_from, int pair_to, int batch)
{
	int block_first = 0;
	for (int pair = pair_from; pair < pair_to; pair++) {
		int head_first;
		if ((pair - pair_from) % 2 == 0) {
			block_first = (int)ab_rng_below(rng, 2);
			head_first = block_first;
		} else {
			head_first = !block_first;
		}
		for (int side = 0; side < 2; side++) {
			int position = (side == AB_SIDE_HEAD) == head_first ? 0 : 1;
			double t = 2.0 * pair + position;
			for (int s = 0; s < sim->n_series; s++) {
				const struct sim_series *ser = &sim->series[s];
				struct ab_sample *x = &out[count++];
				memset(x, 0, sizeof(*x));
				x->side = side;
				x->pair = pair;
				x->order = position;
				x->batch = batch;
				snprintf(x->model, sizeof(x->model), "%s", ser->model);
				snprintf(x->metric, sizeof(x->metric), "%s", ser->metric);
				x->ctx = ser->ctx;
				double level = 1000.0 * (1.0 + sim->drift * t);
				x->value = level * (side == AB_SIDE_HEAD ? ser->ratio : 1.0) * exp(sim_noise(sim, rng));
				x->ok = 1;
				x->t_start_ns = (int64_t)(t * 1e9);
				x->t_end_ns = x->t_start_ns + 500000000;
			}
		}
	}
	return count;
}

#endif

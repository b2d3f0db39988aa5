/*
 * sample.h - one measured value of the A/B evaluation, the unit everything downstream is built
 * from: the scheduler produces them, the store keeps them, guards decide on them and reports
 * print them. A failed measurement is a sample too (ok = 0, value NAN, reason set), so that
 * failures are counted and shown rather than silently dropped.
 */
#ifndef AB_SAMPLE_H
#define AB_SAMPLE_H

#include <stdint.h>

#define AB_SAMPLE_REPS_MAX 9      /* timed requests behind one sample (suite speed.reps) */
#define AB_SAMPLE_STATS_MAX 256   /* the engine's stats object as compact JSON, NUL included */

enum ab_side {
	AB_SIDE_BASE = 0,
	AB_SIDE_HEAD = 1
};

struct ab_sample {
	int side;              /* enum ab_side */
	int pair;              /* pair index, 0-based, across all batches */
	int order;             /* 0: this side ran first within its pair, 1: second */
	int batch;             /* 0: main adaptive batch, 1: confirmation batch */
	char model[64];        /* suite model name */
	char metric[32];       /* "decode_tps", "prefill_tps" */
	int ctx;               /* context length (prompt tokens) */
	double value;          /* the metric (tokens/s); NAN when !ok */
	int ok;                /* 1 measured, 0 failed */
	char reason[192];      /* why it failed ("timeout after 120 s", "crashed: signal 11", ...) */
	int64_t t_start_ns;    /* CLOCK_MONOTONIC when the request was written */
	int64_t t_end_ns;      /* CLOCK_MONOTONIC when its done event arrived */
	/* Steady state and the engine clock (all zero / NAN in samples that predate them). */
	int reps;              /* timed requests behind value (their median); 0: one, unrecorded */
	double rep_values[AB_SAMPLE_REPS_MAX]; /* each request's value, in request order */
	double harness_ms;     /* median over reps of the harness interval value comes from (TTFT for
	                        * prefill, first -> done plus deferred work for decode); NAN: none */
	double engine_ms;      /* median over reps of the engine's own figure for that interval
	                        * (stats prefill_ms / decode_ms); NAN when the SUT did not say */
	double deferred_ms;    /* largest work a fence request found left over after a done event,
	                        * charged to the decode interval; 0 when none */
	char stats[AB_SAMPLE_STATS_MAX]; /* the engine's stats of the median request ("" if none/too long) */
};

#endif

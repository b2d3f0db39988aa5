/*
 * sample.h - one measured value of the A/B evaluation, the unit everything downstream is built
 * from: the scheduler produces them, the store keeps them, guards decide on them and reports
 * print them. A failed measurement is a sample too (ok = 0, value NAN, reason set), so that
 * failures are counted and shown rather than silently dropped.
 */
#ifndef AB_SAMPLE_H
#define AB_SAMPLE_H

#include <stdint.h>

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
};

#endif

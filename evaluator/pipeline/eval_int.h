/*
 * eval_int.h - the state of one evaluation, shared by eval.c (the steps) and eval_json.c (the
 * result document's environment and spec objects). Internal to evaluator/pipeline: everything a
 * caller needs is in eval.h.
 */
#ifndef AB_EVAL_INT_H
#define AB_EVAL_INT_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#include "accuracy.h"
#include "build.h"
#include "clock.h"
#include "decide.h"
#include "eval.h"
#include "measure.h"
#include "repo.h"
#include "result.h"
#include "sandbox.h"
#include "speed.h"
#include "store.h"
#include "suite.h"
#include "verdict.h"

#define SUITE_DEFAULT_PATH "guards/default.json"
#define EVAL_INFO(E, ...) do { if (!(E)->o->quiet) AB_INFO(__VA_ARGS__); } while (0)

struct eval {
	const struct ab_eval_options *o;
	char *state_dir;                 /* absolute */
	ab_store *store;
	int64_t id;
	ab_repo *repo;
	struct ab_repo_commit side[2];   /* [AB_SIDE_BASE], [AB_SIDE_HEAD] */
	struct ab_repo_change *changes;
	size_t n_changes;
	struct ab_suite *suite;
	uint64_t seed;
	int jobs;
	char *src[2];
	struct ab_build_result build[2];
	enum ab_build_status build_status[2];
	char **model_paths;
	char **draft_paths;              /* per model, NULL entries for models without a draft */
	struct ab_samples samples;
	struct ab_speed_result *speed;
	struct ab_decide policy;         /* the suite's decision procedure (policy.h) */
	struct ab_measure_report measure;
	struct ab_accuracy_result accuracy;
	struct ab_gate_result greedy[AB_SUITE_MODELS_MAX];  /* advisory greedy-agreement gate per model */
	size_t n_greedy;
	struct ab_gate_result spec_exact[AB_SUITE_MODELS_MAX]; /* spec_exact gate per model with a draft */
	size_t n_spec_exact;
	struct ab_clock_check *clock;    /* engine clock vs the harness's (guards/clock.h), NULL if none */
	struct ab_gate_result clock_gates[AB_SUITE_MODELS_MAX]; /* advisory engine_clock gate per model */
	size_t n_clock_gates;
	char infra[512];                 /* evaluation-level infra failure, "" when none */
	struct ab_sandbox_config sandbox;  /* options' or the defaults (strings borrowed) */
	char sandbox_version[64];        /* "bubblewrap 0.8.0" once probed */
	char relay[PATH_MAX];            /* abgate-relay for HTTP SUTs in the sandbox; "" when missing */
	char relay_error[256];           /* why relay is "" */
	char run_dir[PATH_MAX];          /* <state>/runs/<id>: logs, relay socket dirs */
	struct ab_result_timing timing;
	int64_t t0;
};

/* The result's "environment" object: host, GPU and SUT ready records, process counts, sandbox
 * settings. New reference. */
json_t *ab_eval_environment(struct eval *E);

/* The result's "spec" object (per model with a draft: the SUT's spec kind and block and each side's
 * exactness record), NULL when spec was not measured. New reference. */
json_t *ab_eval_spec_json(const struct eval *E);

#endif

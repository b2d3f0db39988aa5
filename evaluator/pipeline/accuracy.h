/*
 * accuracy.h - the accuracy workload of an evaluation: held-out prompt windows chosen with the
 * evaluation's seed (schedule.h), scored by the model's reference SUT (answers cached in the store
 * by model identity, reference command and prompt), then by a fresh base and a fresh head SUT that
 * are asked for the log-probs of the reference's top-k ids, so guards/acc.h can compute KL on
 * the reference's support exactly. Faults get one retry; a side that still fails makes its gates
 * "not measured" (infra), never a REJECT.
 */
#ifndef AB_ACCURACY_H
#define AB_ACCURACY_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "acc.h"
#include "measure.h"
#include "store.h"
#include "suite.h"

#define AB_ACCURACY_MAX_MODELS 16   /* (model, reference) pairs */
#define AB_ACCURACY_GATES_PER_MODEL 4

/* One model's commands, placeholders substituted. */
struct ab_accuracy_model {
	const struct ab_suite_model *model;
	const struct ab_suite_ref *ref;       /* which of the model's references this run compares with */
	const char *label;                    /* gates' model field: "<model>", or "<model>/<ref>" when the
	                                       * model has several references */
	const char *model_path;
	struct ab_measure_sut side[2];        /* [AB_SIDE_BASE], [AB_SIDE_HEAD] */
	struct ab_measure_sut reference;
	uint32_t vocab_size;                  /* from the SUT's ready line; prompt ids are drawn below it */
};

struct ab_accuracy_config {
	const struct ab_suite *suite;         /* accuracy section, sut timeouts */
	const struct ab_accuracy_model *models;
	int n_models;
	uint64_t seed;
	const char *corpus_path;              /* substituted; NULL: random ids */
	ab_store *store;                      /* reference cache; may be NULL */
	const char *log_dir;                  /* SUT stderr logs */
	int quiet;
	int (*should_cancel)(void *payload);
	void *cancel_payload;
};

struct ab_accuracy_result {
	struct ab_gate_result gates[AB_ACCURACY_MAX_MODELS * AB_ACCURACY_GATES_PER_MODEL];
	size_t n_gates;
	json_t *json;                         /* the result's "accuracy" section (owned) */
	double seconds;
};

/*
 * Runs the workload for every model. Returns 0 with *out filled (gates may carry errors: that is
 * infra, decided by the verdict); AB_ECANCELED when canceled; negative on internal errors.
 * Clear *out with ab_accuracy_result_clear.
 */
int ab_accuracy_run(struct ab_accuracy_result *out, const struct ab_accuracy_config *config);
void ab_accuracy_result_clear(struct ab_accuracy_result *result);

#endif

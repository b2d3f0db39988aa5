/*
 * verdict.h - the one verdict of an evaluation: its `eval:` label, a one-sentence reason a
 * maintainer reads, and the exclusive set of labels to apply. It combines the build outcomes, infra
 * failures, the speed decisions (speed.h) and gate results (accuracy and other gates, added by later
 * issues through struct ab_gate_result), and reports PRs that touch the harness.
 *
 * Precedence, first match wins:
 *   1. base failed to build (or its build hit infra)     -> eval:infra-error
 *   2. head failed to build                              -> eval:REJECT "does not compile"
 *      (a head build that hit infra, e.g. a timeout of the box, is eval:infra-error)
 *   3. a failed (non-advisory) gate                      -> eval:REJECT + the gate's label
 *      ("accuracy-regression" by default); the speed tier is still computed and shown
 *   4. a confirmed speed regression                      -> eval:REJECT + regression-<ctx> labels
 *   5. infra: infra_error set, a gate that could not be measured, or too many failed samples
 *                                                        -> eval:infra-error (re-run; never REJECT)
 *   6. the verified tier                                 -> eval:<XS..XL>, else eval:none
 *      (speed not measured at all is infra-error: there is nothing to judge)
 * Verified evidence against the PR (2-4) wins over infra trouble elsewhere: re-running would not
 * change it. With more than one model, `eval-<model>:<tier|none|REJECT|infra-error>` is added per
 * model (the model name cut to fit GitHub's 50 characters; a gate counts for the model its `model`
 * field names). `harness-touched` is added whenever the PR changes a harness path, with a note.
 * Speculative decoding (spec-family series of speed.h, the spec_exact gate of spec.h) joins the
 * same precedence: a spec-mismatch gate or a confirmed tau-regression / regression-spec-<ctx> is a
 * REJECT like any other, and the spec family's tier competes with the plain family's for the
 * `eval:` tier. Where spec was evaluated, `eval-dflash:<tier|none|REJECT|infra-error>` (the kind from
 * the SUT's ready line) gives the spec family's own outcome.
 * Label order: the `eval:` label, the failed gates' labels, eval-dflash, per-model labels, regression
 * labels, `harness-touched`.
 */
#ifndef AB_VERDICT_H
#define AB_VERDICT_H

#include <stddef.h>

#include "speed.h"

#define AB_VERDICT_LABELS_MAX 48
#define AB_VERDICT_NOTES_MAX 4

enum ab_build_status {
	AB_BUILD_NOT_RUN = 0,   /* not attempted (e.g. the evaluation stopped earlier) */
	AB_BUILD_OK = 1,        /* built, or an identical tree's build was reused */
	AB_BUILD_FAILED = 2,    /* the build commands failed: the code does not compile */
	AB_BUILD_INFRA = 3      /* the build could not run properly (timeout, spawn failure, disk) */
};

enum ab_verdict_kind {
	AB_VERDICT_NONE = 0,    /* eval:none: no verified gain, no regression */
	AB_VERDICT_TIER = 1,    /* eval:XS..XL */
	AB_VERDICT_REJECT = 2,  /* eval:REJECT */
	AB_VERDICT_INFRA = 3    /* eval:infra-error */
};

/*
 * One gate's result (accuracy top-1, KL, greedy agreement, spec acceptance, ...). The producer
 * fills it; the verdict only reads pass/error/advisory/label. `value` and `threshold` are shown as
 * they are (use `op` to say how they compare).
 */
struct ab_gate_result {
	char name[64];          /* "top1", "kl_mean", "spec_tau" */
	char model[64];         /* the suite model it concerns, "" when none; "<model>/<reference>"
	                         * when it was measured against one of several references */
	double value;           /* measured value; NAN when not measured */
	double threshold;
	char op[4];             /* ">=", "<=", "==": how value must compare with threshold */
	int pass;               /* 1 passed */
	int error;              /* 1 could not be measured (infra): never a REJECT */
	int advisory;           /* 1 reported only (a warning), never changes the verdict */
	char detail[256];       /* e.g. "0.912 (95% CI 0.887-0.933, 512 positions)" */
	char label[48];         /* label applied on failure; "" means "accuracy-regression" */
};

/* The label a failure of `gate` applies ("accuracy-regression" unless the gate names its own), NULL
 * for an advisory gate, which never applies one. Borrowed from `gate` or static. */
const char *ab_verdict_gate_label(const struct ab_gate_result *gate);

struct ab_verdict_input {
	enum ab_build_status base_build;
	enum ab_build_status head_build;
	const char *base_build_detail;      /* "exit status 2", may be NULL */
	const char *head_build_detail;
	const char *infra_error;            /* evaluation-level infra failure (SUT never ready, model
	                                     * generation failed, GPU lost), NULL when none */
	const struct ab_speed_result *speed; /* NULL when speed was not measured */
	const struct ab_gate_result *gates;
	size_t n_gates;
	const char *spec_kind;              /* speculative-decoding kind for the eval-<kind>: label (the
	                                     * SUT's ready line, "dflash"); NULL: "dflash" */
	const char *const *harness_touched; /* changed files under harness paths (ab_verdict_harness_match) */
	size_t n_harness_touched;
};

struct ab_verdict {
	enum ab_verdict_kind kind;
	int tier;                           /* speed tier index, -1: none (also set with REJECT) */
	char label[32];                     /* "eval:M", "eval:REJECT", ... */
	char reason[512];                   /* one sentence */
	char labels[AB_VERDICT_LABELS_MAX][64]; /* the exclusive label set, label first */
	size_t n_labels;
	char notes[AB_VERDICT_NOTES_MAX][320]; /* extra sentences for the report (harness touched, ...) */
	size_t n_notes;
};

/* Decides. Never fails for valid pointers (returns 0); AB_EINVALID when out or in is NULL. */
int ab_verdict_decide(struct ab_verdict *out, const struct ab_verdict_input *in);

/* "eval:none" etc. for a kind and tier. Static string. */
const char *ab_verdict_label_name(enum ab_verdict_kind kind, int tier);

/*
 * Whether a label belongs to the sets abgate manages (so a poster removes stale ones): `eval:*`,
 * `eval-*:*`, `regression-*`, `accuracy-regression`, `tau-regression`, `spec-mismatch`,
 * `harness-touched`.
 */
int ab_verdict_label_is_managed(const char *label);

/*
 * Which changed files fall under the harness: a harness path ending in '/' matches every file
 * below it, one with a glob character (* ? [) is matched with fnmatch, any other matches exactly.
 * Writes up to `cap` borrowed pointers (into `changed`) to out and returns the number of matches
 * (which may exceed cap).
 */
size_t ab_verdict_harness_match(const char **out, size_t cap, const char *const *changed,
	size_t n_changed, const char *const *harness_paths, size_t n_paths);

#endif
